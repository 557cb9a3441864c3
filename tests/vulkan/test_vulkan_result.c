/* SPDX-License-Identifier: Apache-2.0
 *
 * vulkan_status.c, the Vulkan backend's one VkResult -> status + message file,
 * compiled into this test directly: statuses, names and message format
 * for the results the backend can meet, and for values it does not know.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "vulkan_internal.h"

static void test_statuses(void** state) {
  (void)state;
  static const struct {
    VkResult r;
    int status;
    const char* name;
  } cases[] = {
      {VK_SUCCESS, 0, "VK_SUCCESS"},
      {VK_NOT_READY, EBUSY, "VK_NOT_READY"},
      {VK_TIMEOUT, ETIMEDOUT, "VK_TIMEOUT"},
      {VK_EVENT_SET, 0, "VK_EVENT_SET"},
      {VK_EVENT_RESET, EBUSY, "VK_EVENT_RESET"},
      {VK_ERROR_OUT_OF_HOST_MEMORY, ENOMEM, "VK_ERROR_OUT_OF_HOST_MEMORY"},
      {VK_ERROR_OUT_OF_DEVICE_MEMORY, ENOMEM, "VK_ERROR_OUT_OF_DEVICE_MEMORY"},
      {VK_ERROR_TOO_MANY_OBJECTS, ENOMEM, "VK_ERROR_TOO_MANY_OBJECTS"},
      {VK_ERROR_FRAGMENTATION, ENOMEM, "VK_ERROR_FRAGMENTATION"},
      {VK_ERROR_DEVICE_LOST, EIO, "VK_ERROR_DEVICE_LOST"},
      {VK_ERROR_INITIALIZATION_FAILED, EIO, "VK_ERROR_INITIALIZATION_FAILED"},
      {VK_ERROR_MEMORY_MAP_FAILED, EIO, "VK_ERROR_MEMORY_MAP_FAILED"},
      {VK_ERROR_INCOMPATIBLE_DRIVER, ENODEV, "VK_ERROR_INCOMPATIBLE_DRIVER"},
      {VK_ERROR_LAYER_NOT_PRESENT, ENOENT, "VK_ERROR_LAYER_NOT_PRESENT"},
      {VK_ERROR_EXTENSION_NOT_PRESENT, ENOTSUP, "VK_ERROR_EXTENSION_NOT_PRESENT"},
      {VK_ERROR_FEATURE_NOT_PRESENT, ENOTSUP, "VK_ERROR_FEATURE_NOT_PRESENT"},
      {VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS, EINVAL, "VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS"},
      {VK_ERROR_UNKNOWN, EIO, "VK_ERROR_UNKNOWN"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    assert_int_equal(vkb_result_status(cases[i].r), cases[i].status);
    assert_string_equal(vkb_result_name(cases[i].r), cases[i].name);
  }
  /* Values this build does not know: negative ones are errors (EIO). */
  assert_int_equal(vkb_result_status((VkResult)-123456), EIO);
  assert_string_equal(vkb_result_name((VkResult)-123456), "VK_ERROR_(unknown)");
  assert_int_equal(vkb_result_status((VkResult)123456), 0);
}

static void test_messages(void** state) {
  (void)state;
  struct adr_error err;
  memset(&err, 0, sizeof(err));
  assert_int_equal(
      vkb_check(VK_ERROR_OUT_OF_DEVICE_MEMORY, &err, "vkAllocateMemory(%d bytes)", 4096), ENOMEM);
  /* "NATIVE_NAME: description" only: the core adds "[operation][vulkan]". */
  assert_string_equal(err.message,
                      "VK_ERROR_OUT_OF_DEVICE_MEMORY: vkAllocateMemory(4096 "
                      "bytes): device memory allocation failed");
  /* A success code reported as a failure still fails, with the number. */
  assert_int_equal(vkb_check(VK_INCOMPLETE, &err, "x"), ENOSPC);
  assert_int_equal(vkb_check(VK_EVENT_SET, &err, "y"), EIO);
  assert_string_equal(err.message, "VK_EVENT_SET (3): y: event is set");
  assert_int_equal(vkb_check((VkResult)-99999, &err, "z"), EIO);
  assert_string_equal(err.message, "VK_ERROR_(unknown) (-99999): z: unrecognised VkResult");
  assert_int_equal(vkb_errorf(&err, EINVAL, "%p is not an allocation", (void*)0x40), EINVAL);
  assert_string_equal(err.message, "EINVAL: 0x40 is not an allocation");
  assert_int_equal(vkb_errorf(&err, ETIMEDOUT, "waited %d s", 5), ETIMEDOUT);
  assert_string_equal(err.message, "ETIMEDOUT: waited 5 s");
  /* A NULL error is allowed everywhere. */
  assert_int_equal(vkb_check(VK_ERROR_DEVICE_LOST, NULL, "w"), EIO);
  assert_int_equal(vkb_errorf(NULL, ENOMEM, "w"), ENOMEM);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_statuses),
      cmocka_unit_test(test_messages),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
