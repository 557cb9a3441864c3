/* SPDX-License-Identifier: Apache-2.0
 *
 * The CUDA and HIP modules on backends/common/host.h, seen from the core's
 * side of the plugin ABI (argv[1] is the module, dlopen'd directly):
 *   - adr_backend_query is ADR_BACKEND_DEFINE_QUERY's: a wrong ABI major is
 *     refused (NULL), the right one returns the table;
 *   - init checks the host services first: NULL, or a struct smaller than
 *     ADR_BACKEND_HOST_MIN_STRUCT_SIZE, is EPROTO, before any environment
 *     variable or library is looked at;
 *   - ADR_<BACKEND>_STAGING is read through the host's getenv and parsed
 *     with the ADR_ALLOC size grammar: a malformed value is EINVAL with the
 *     shared syntax message, a new-grammar value ("64KiB:16KiB") passes the
 *     parser (init then goes on to load the driver: 0 or ENODEV).
 */
/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "adr/backend.h"

static const char* g_module;
static adr_backend_query_fn g_query;
static char g_staging_var[64]; /* ADR_CUDA_STAGING / ADR_HIP_STAGING */
static const char* g_staging_value;
static int g_getenv_calls;

static void host_log(int level, const char* backend, const char* fmt, ...) {
  (void)level;
  (void)backend;
  (void)fmt;
}

static const char* host_getenv(const char* name) {
  g_getenv_calls++;
  if (strcmp(name, g_staging_var) == 0) return g_staging_value;
  if (strcmp(name, "ADR_CUDA_DRIVER") == 0 || strcmp(name, "ADR_HIP_LIBRARY") == 0)
    return "/nonexistent/adr-test-driver.so"; /* never a real driver */
  return NULL;
}

static int host_log_level(void) {
  return ADR_LOG_ERROR;
}

static struct adr_backend_host full_host(void) {
  struct adr_backend_host h;
  memset(&h, 0, sizeof(h));
  h.struct_size = sizeof(h);
  h.abi_major = ADR_BACKEND_ABI_MAJOR;
  h.abi_minor = ADR_BACKEND_ABI_MINOR;
  h.log = host_log;
  h.getenv = host_getenv;
  h.log_level = host_log_level;
  return h;
}

static int setup(void** state) {
  (void)state;
  void* lib = dlopen(g_module, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "cannot open %s: %s\n", g_module, dlerror());
    return -1;
  }
  void* sym = dlsym(lib, "adr_backend_query");
  if (sym == NULL) return -1;
  memcpy(&g_query, &sym, sizeof(sym));
  return 0;
}

static void test_query_abi(void** state) {
  (void)state;
  struct adr_backend_host h = full_host();
  assert_null(g_query(ADR_BACKEND_ABI_MAJOR + 1, 0, &h));
  const struct adr_backend* b = g_query(ADR_BACKEND_ABI_MAJOR, ADR_BACKEND_ABI_MINOR, &h);
  assert_non_null(b);
  assert_int_equal(b->abi_major, ADR_BACKEND_ABI_MAJOR);
  snprintf(g_staging_var, sizeof(g_staging_var), "ADR_%s_STAGING", b->name);
  for (char* c = g_staging_var; *c; c++) *c = (char)toupper((unsigned char)*c);
}

static void test_no_host_is_eproto(void** state) {
  (void)state;
  const struct adr_backend* b = g_query(ADR_BACKEND_ABI_MAJOR, ADR_BACKEND_ABI_MINOR, NULL);
  assert_non_null(b);
  struct adr_error e = {{0}};
  assert_int_equal(b->init(&e), EPROTO);
  assert_non_null(strstr(e.message, "no services"));
}

static void test_small_host_is_eproto(void** state) {
  (void)state;
  struct adr_backend_host h = full_host();
  h.struct_size = ADR_BACKEND_HOST_MIN_STRUCT_SIZE - 8;
  g_getenv_calls = 0;
  const struct adr_backend* b = g_query(ADR_BACKEND_ABI_MAJOR, ADR_BACKEND_ABI_MINOR, &h);
  assert_non_null(b);
  struct adr_error e = {{0}};
  assert_int_equal(b->init(&e), EPROTO);
  assert_non_null(strstr(e.message, "less than"));
  assert_int_equal(g_getenv_calls, 0); /* refused before any service was used */
}

static void test_staging_through_host_getenv(void** state) {
  (void)state;
  struct adr_backend_host h = full_host();
  const struct adr_backend* b = g_query(ADR_BACKEND_ABI_MAJOR, ADR_BACKEND_ABI_MINOR, &h);
  assert_non_null(b);
  struct adr_error e = {{0}};
  g_staging_value = "1Q";
  assert_int_equal(b->init(&e), EINVAL);
  char want[256];
  snprintf(want, sizeof(want),
           "EINVAL: %s=\"1Q\": column 2: expected a unit (B, K, KiB, KB, M, MiB, MB, G, GiB, GB, "
           "T, TiB, TB), found 'Q'",
           g_staging_var);
  assert_string_equal(e.message, want);

  /* Accepted by the new grammar only: init gets past the configuration
   * and fails on the (nonexistent) driver instead. */
  g_staging_value = "64KiB:16KiB";
  memset(&e, 0, sizeof(e));
  assert_int_equal(b->init(&e), ENODEV);
  assert_null(strstr(e.message, "STAGING"));
  assert_non_null(strstr(e.message, "adr-test-driver.so"));
  g_staging_value = NULL;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODULE.so\n", argv[0]);
    return 2;
  }
  g_module = argv[1];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_query_abi),
      cmocka_unit_test(test_no_host_is_eproto),
      cmocka_unit_test(test_small_host_is_eproto),
      cmocka_unit_test(test_staging_through_host_getenv),
  };
  return cmocka_run_group_tests_name("backend-host", tests, setup, NULL);
}
