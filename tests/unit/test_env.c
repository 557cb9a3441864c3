/* SPDX-License-Identifier: Apache-2.0
 *
 * The environment is read once and errors are reported by every call that
 * needs it. Registered several times with different environments; argv[1]
 * names the case:
 *   bad-backends  ADR_BACKENDS="cuda opencl"
 *   bad-device    ADR_DEVICE="cuda:x"
 *   bad-log       ADR_LOG="loud" (diagnostics only: a warning, never an error)
 *   preference    ADR_DEVICE="hip:3,cuda:0,cpu" (first available wins)
 *   excluded-cpu  ADR_BACKENDS="!cpu"
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "adr/adr.h"

static const char* which;

static void test_environment(void** state) {
  (void)state;
  struct adr_error err = {{0}};
  struct adr_device* d = NULL;
  if (strcmp(which, "bad-backends") == 0) {
    for (int i = 0; i < 2; i++) { /* same answer every time */
      assert_int_equal(adr_init(&err), EINVAL);
      assert_string_equal(err.message,
                          "ADR_BACKENDS=\"cuda opencl\": column 6: expected ',' or end of text, "
                          "found 'o'");
      memset(&err, 0, sizeof(err));
      assert_int_equal(adr_device_get(ARROW_DEVICE_CPU, 0, &d, &err), EINVAL);
      assert_non_null(strstr(err.message, "ADR_BACKENDS"));
    }
    assert_int_equal(adr_backend_count(), 0);
  } else if (strcmp(which, "bad-device") == 0) {
    assert_int_equal(adr_init(&err), EINVAL);
    assert_int_equal(adr_device_default(&d, &err), EINVAL);
    assert_non_null(strstr(err.message, "column 6"));
    /* Naming a device explicitly does not depend on ADR_DEVICE. */
    assert_int_equal(adr_device_get(ARROW_DEVICE_CPU, 0, &d, &err), 0);
  } else if (strcmp(which, "bad-log") == 0) {
    /* An ADR_LOG adr does not understand is one warning on stderr and the
     * default level (tests/packaging: adr-log-unknown checks the warning). */
    assert_int_equal(adr_init(&err), 0);
    assert_int_equal(adr_device_get(ARROW_DEVICE_CPU, 0, &d, &err), 0);
  } else if (strcmp(which, "preference") == 0) {
    assert_int_equal(adr_device_default(&d, &err), 0);
    assert_string_equal(adr_device_name(d), "cpu:0");
  } else if (strcmp(which, "excluded-cpu") == 0) {
    assert_int_equal(adr_device_get(ARROW_DEVICE_CPU, 0, &d, &err), ENODEV);
    assert_non_null(strstr(err.message, "excluded by ADR_BACKENDS"));
    assert_int_equal(adr_device_default(&d, &err), ENODEV);
  } else {
    fail_msg("unknown case %s", which);
  }
}

int main(int argc, char** argv) {
  which = argc > 1 ? argv[1] : "";
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_environment)};
  return cmocka_run_group_tests_name(which, tests, NULL, NULL);
}
