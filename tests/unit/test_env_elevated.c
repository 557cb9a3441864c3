/* SPDX-License-Identifier: Apache-2.0
 *
 * adr_backend_allow_elevated from the application's side, in a process that
 * is not elevated (the elevated behaviour is tests/security/, which needs
 * root): the arguments it refuses, and that it must come before the
 * backend is first needed, elevated or not, so a program that calls it too
 * late finds out in its ordinary tests.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/auxv.h>

#include <cmocka.h>

#include "adr/adr.h"

static void test_arguments(void** state) {
  (void)state;
  struct adr_error err = {{0}};
  assert_int_equal(adr_backend_allow_elevated(NULL, &err), EINVAL);
  assert_string_equal(err.message, "[adr_backend_allow_elevated] name is NULL");
  assert_int_equal(adr_backend_allow_elevated("nope", &err), EINVAL);
  assert_non_null(strstr(err.message, "[adr_backend_allow_elevated] unknown backend 'nope'"));
  assert_int_equal(adr_backend_allow_elevated("OpenCL", NULL), EINVAL); /* names are exact */
  /* cpu and vulkan load in elevated processes anyway. */
  assert_int_equal(adr_backend_allow_elevated("cpu", &err), 0);
  assert_int_equal(adr_backend_allow_elevated("vulkan", &err), 0);
}

static int backend_state(const char* name) {
  for (size_t i = 0; i < adr_backend_count(); i++) {
    struct adr_backend_info bi;
    memset(&bi, 0, sizeof(bi));
    bi.struct_size = sizeof(bi);
    assert_int_equal(adr_backend_info_get(i, &bi, NULL), 0);
    if (strcmp(bi.name, name) == 0) return bi.state;
  }
  fail_msg("no backend '%s'", name);
  return -1;
}

static void test_order(void** state) {
  (void)state;
  struct adr_error err = {{0}};
  struct adr_device* dev = NULL;
  /* Before any use: recorded, and again is fine. */
  assert_int_equal(adr_backend_allow_elevated("hip", &err), 0);
  assert_int_equal(adr_backend_allow_elevated("hip", &err), 0);
  /* cuda is needed: loaded, or unavailable without a driver; its state is
   * decided either way. */
  int st = adr_device_get(ARROW_DEVICE_CUDA, 0, &dev, &err);
  assert_true(st == 0 || st == ENODEV);
  memset(&err, 0, sizeof(err));
  assert_int_equal(adr_backend_allow_elevated("cuda", &err), EBUSY);
  assert_non_null(strstr(err.message,
                         "[adr_backend_allow_elevated] backend 'cuda' was already "
                         "needed"));
  /* Not elevated: nothing was excluded for elevation. */
  assert_int_equal(getauxval(AT_SECURE), 0);
  assert_int_not_equal(backend_state("cuda"), ADR_BACKEND_NOT_LOADED);
  memset(&err, 0, sizeof(err));
  assert_int_equal(adr_device_get(ARROW_DEVICE_CUDA, 0, &dev, &err), st);
  assert_null(strstr(err.message, "elevated"));
  /* hip (kept out by ADR_BACKENDS here), opted in before, stays fine. */
  assert_int_equal(adr_device_get(ARROW_DEVICE_ROCM, 0, &dev, NULL), ENODEV);
  assert_int_equal(adr_backend_allow_elevated("hip", &err), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_arguments),
      cmocka_unit_test(test_order),
  };
  return cmocka_run_group_tests_name("env-elevated", tests, NULL, NULL);
}
