/* SPDX-License-Identifier: Apache-2.0
 *
 * Unit test of the backends' host-services wrapper (backends/common/host.c,
 * compiled into this test as into each backend): the struct_size check
 * against ADR_BACKEND_HOST_MIN_STRUCT_SIZE, getenv and log forwarding, the
 * log level filter, and that nothing is called before a successful init.
 */
/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "host.h"

static struct {
  int calls, getenv_calls, level;
  char backend[32], line[4096];
} seen;
static int current_level = ADR_LOG_WARN;

static void fake_log(int level, const char* backend, const char* fmt, ...) {
  seen.calls++;
  seen.level = level;
  snprintf(seen.backend, sizeof(seen.backend), "%s", backend);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(seen.line, sizeof(seen.line), fmt, ap);
  va_end(ap);
}

static const char* fake_getenv(const char* name) {
  seen.getenv_calls++;
  return strcmp(name, "ADR_TEST_SET") == 0 ? "value" : NULL;
}

static int fake_level(void) {
  return current_level;
}

static struct adr_backend_host make_host(uint32_t size) {
  struct adr_backend_host h;
  memset(&h, 0, sizeof(h));
  h.struct_size = size;
  h.abi_major = ADR_BACKEND_ABI_MAJOR;
  h.log = fake_log;
  h.getenv = fake_getenv;
  h.log_level = fake_level;
  return h;
}

static int reset(void** state) {
  (void)state;
  memset(&seen, 0, sizeof(seen));
  current_level = ADR_LOG_WARN;
  return 0;
}

static void test_threshold_is_the_1_0_struct(void** state) {
  (void)state;
  assert_int_equal(ADR_BACKEND_HOST_MIN_STRUCT_SIZE, sizeof(struct adr_backend_host));
  assert_int_equal(ADR_BACKEND_HOST_MIN_STRUCT_SIZE, 104);
}

static void test_refused_hosts_are_never_called(void** state) {
  (void)state;
  struct adr_error e = {{0}};
  adr_host_set(NULL);
  assert_int_equal(adr_host_init("t", &e), EPROTO);
  assert_string_equal(e.message, "the host offered no services");
  assert_null(adr_host_getenv("ADR_TEST_SET"));

  struct adr_backend_host small = make_host(ADR_BACKEND_HOST_MIN_STRUCT_SIZE - 8);
  adr_host_set(&small);
  assert_int_equal(adr_host_init("t", &e), EPROTO);
  assert_non_null(strstr(e.message, "96 bytes, less than the 104 bytes of ABI 1.0"));
  assert_null(adr_host_getenv("ADR_TEST_SET"));
  assert_false(adr_host_log_enabled(ADR_LOG_ERROR));
  adr_host_log(ADR_LOG_ERROR, "never %d", 1);
  assert_int_equal(seen.calls, 0);
  assert_int_equal(seen.getenv_calls, 0);
}

static void test_nothing_before_init(void** state) {
  (void)state;
  struct adr_backend_host h = make_host(ADR_BACKEND_HOST_MIN_STRUCT_SIZE);
  adr_host_set(&h);
  assert_null(adr_host_getenv("ADR_TEST_SET"));
  adr_host_log(ADR_LOG_ERROR, "early");
  assert_int_equal(seen.calls + seen.getenv_calls, 0);
}

static void test_services_forwarded(void** state) {
  (void)state;
  struct adr_backend_host h = make_host(ADR_BACKEND_HOST_MIN_STRUCT_SIZE + 64); /* a newer host */
  adr_host_set(&h);
  assert_int_equal(adr_host_init("mybackend", NULL), 0);
  assert_string_equal(adr_host_getenv("ADR_TEST_SET"), "value");
  assert_null(adr_host_getenv("ADR_TEST_UNSET"));
  assert_int_equal(seen.getenv_calls, 2);

  adr_host_log(ADR_LOG_WARN, "%d device(s) on %s", 3, "x");
  assert_int_equal(seen.calls, 1);
  assert_int_equal(seen.level, ADR_LOG_WARN);
  assert_string_equal(seen.backend, "mybackend");
  assert_string_equal(seen.line, "3 device(s) on x");

  /* Above the host's level: not formatted, not passed on. */
  assert_false(adr_host_log_enabled(ADR_LOG_INFO));
  adr_host_log(ADR_LOG_INFO, "quiet");
  assert_int_equal(seen.calls, 1);
  current_level = ADR_LOG_TRACE;
  assert_true(adr_host_log_enabled(ADR_LOG_TRACE));
  adr_host_log(ADR_LOG_TRACE, "loud");
  assert_int_equal(seen.calls, 2);
  assert_string_equal(seen.line, "loud");

  /* Long lines are cut, not overrun. */
  char big[3000];
  memset(big, 'a', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  adr_host_log(ADR_LOG_ERROR, "%s", big);
  assert_int_equal(strlen(seen.line), 2047);
}

static void test_missing_slots_are_skipped(void** state) {
  (void)state;
  struct adr_backend_host h = make_host(ADR_BACKEND_HOST_MIN_STRUCT_SIZE);
  h.getenv = NULL;
  h.log_level = NULL;
  adr_host_set(&h);
  assert_int_equal(adr_host_init("b", NULL), 0);
  assert_null(adr_host_getenv("ADR_TEST_SET"));
  adr_host_log(ADR_LOG_TRACE, "no level service: everything passes");
  assert_int_equal(seen.calls, 1);
  h.log = NULL;
  assert_false(adr_host_log_enabled(ADR_LOG_ERROR));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_threshold_is_the_1_0_struct, reset),
      cmocka_unit_test_setup(test_refused_hosts_are_never_called, reset),
      cmocka_unit_test_setup(test_nothing_before_init, reset),
      cmocka_unit_test_setup(test_services_forwarded, reset),
      cmocka_unit_test_setup(test_missing_slots_are_skipped, reset),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
