/* SPDX-License-Identifier: Apache-2.0
 *
 * Status names and message formatting.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "internal.h"

static void test_status_names(void** state) {
  (void)state;
  assert_string_equal(adr_status_name(0), "OK");
  assert_string_equal(adr_status_name(EINVAL), "EINVAL");
  assert_string_equal(adr_status_name(ENOMEM), "ENOMEM");
  assert_string_equal(adr_status_name(ENOTSUP), "ENOTSUP");
  assert_string_equal(adr_status_name(ENODEV), "ENODEV");
  assert_string_equal(adr_status_name(EBUSY), "EBUSY");
  assert_string_equal(adr_status_name(EOVERFLOW), "EOVERFLOW");
  assert_string_equal(adr_status_name(123456), "EUNKNOWN");
  assert_string_equal(adr_status_string(ENOMEM), "out of memory");
  assert_string_equal(adr_status_string(0), "success");
  assert_string_equal(adr_status_string(-7), "unknown status");
}

static void test_error_set(void** state) {
  (void)state;
  struct adr_error err = {{0}};
  assert_int_equal(adr_error_set(&err, EIO, "x=%d %s", 5, "y"), EIO);
  assert_string_equal(err.message, "x=5 y");
  assert_int_equal(adr_error_set(NULL, ENOMEM, "ignored"), ENOMEM);
}

static void test_errorf_prefix(void** state) {
  (void)state;
  struct adr_error err = {{0}};
  assert_int_equal(adr__errorf(&err, ENOMEM, "adr_copy", "opencl", "%s: %d bytes",
                               "CL_MEM_OBJECT_ALLOCATION_FAILURE", 64),
                   ENOMEM);
  assert_string_equal(err.message, "[adr_copy][opencl] CL_MEM_OBJECT_ALLOCATION_FAILURE: 64 bytes");
  assert_int_equal(adr__errorf(&err, EINVAL, "adr_free", NULL, "bad"), EINVAL);
  assert_string_equal(err.message, "[adr_free] bad");
}

/* Errors are built once: a backend writes "NATIVE: description" and the
 * core adds "[operation][backend]" in front, verbatim, whatever the text
 * starts with; a backend that wrote nothing is named. */
static void test_error_context(void** state) {
  (void)state;
  struct adr_error err = {{0}};
  adr_error_set(&err, EIO, "CL_OUT_OF_RESOURCES: clEnqueueSVMMemcpy failed");
  adr__error_context(&err, EIO, "adr_copy", "opencl");
  assert_string_equal(err.message,
                      "[adr_copy][opencl] CL_OUT_OF_RESOURCES: clEnqueueSVMMemcpy failed");
  adr_error_set(&err, EINVAL, "[0x10, +8) runs past its allocation");
  adr__error_context(&err, EINVAL, "adr_copy", "vulkan");
  assert_string_equal(err.message, "[adr_copy][vulkan] [0x10, +8) runs past its allocation");
  err.message[0] = '\0';
  adr__error_context(&err, ENOMEM, "adr_alloc", "cpu");
  assert_string_equal(err.message, "[adr_alloc][cpu] ENOMEM: the backend gave no message");
  adr__error_context(NULL, EIO, "adr_copy", "cpu"); /* no error struct: nothing to do */
}

static void test_message_truncates_safely(void** state) {
  (void)state;
  struct adr_error err;
  memset(&err, 'z', sizeof(err));
  char big[4000];
  memset(big, 'a', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  adr__errorf(&err, EINVAL, "op", "be", "%s", big);
  assert_int_equal(strlen(err.message), sizeof(err.message) - 1);
  assert_int_equal(strncmp(err.message, "[op][be] aaa", 12), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_status_names),
      cmocka_unit_test(test_error_set),
      cmocka_unit_test(test_errorf_prefix),
      cmocka_unit_test(test_error_context),
      cmocka_unit_test(test_message_truncates_safely),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
