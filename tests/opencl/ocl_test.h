/* SPDX-License-Identifier: Apache-2.0
 *
 * Shared helpers of the OpenCL-specific tests (tests/opencl/). These tests
 * link libOpenCL directly (only the backend must not) so that they can act
 * as an OpenCL application would: build kernels, wait on raw cl_events,
 * create their own contexts.
 *
 * ASSERT_ADR(call) runs an adr call whose last argument is OCL_ERR and
 * fails with the status and message unless it returns 0.
 * ASSERT_ADR_ERR(call, status, text) requires that status and a message
 * containing `text`.
 */
#ifndef ADR_TESTS_OCL_TEST_H
#define ADR_TESTS_OCL_TEST_H

/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <adr/adr.h>
#include <adr/opencl.h>

#define OCL_ERR (&ocl_err_)

#define ASSERT_ADR(call)                                                                    \
  do {                                                                                      \
    struct adr_error ocl_err_ = {{0}};                                                      \
    int ocl_st_ = (call);                                                                   \
    if (ocl_st_ != 0)                                                                       \
      fail_msg("%s\n  returned %s: %s", #call, adr_status_name(ocl_st_), ocl_err_.message); \
  } while (0)

#define ASSERT_ADR_ERR(call, want, text)                                              \
  do {                                                                                \
    struct adr_error ocl_err_ = {{0}};                                                \
    int ocl_st_ = (call);                                                             \
    if (ocl_st_ != (want))                                                            \
      fail_msg("%s\n  returned %s, expected %s: %s", #call, adr_status_name(ocl_st_), \
               adr_status_name(want), ocl_err_.message);                              \
    if (strstr(ocl_err_.message, (text)) == NULL)                                     \
      fail_msg("%s\n  message \"%s\" lacks \"%s\"", #call, ocl_err_.message, (text)); \
  } while (0)

#define ASSERT_CL(call)                                                              \
  do {                                                                               \
    cl_int ocl_rc_ = (call);                                                         \
    if (ocl_rc_ != CL_SUCCESS) fail_msg("%s\n  returned %d", #call, (int)ocl_rc_);   \
  } while (0)

/* The OpenCL device under test (opencl:0) and the CPU device, or exit 77
 * when this machine has no OpenCL device (nothing to test). */
static inline void ocl_test_devices(struct adr_device** dev, struct adr_device** cpu) {
  struct adr_error err = {{0}};
  int st = adr_device_get(ARROW_DEVICE_OPENCL, 0, dev, &err);
  if (st == ENODEV) {
    fprintf(stderr, "no OpenCL device, nothing to test: %s\n", err.message);
    exit(77);
  }
  if (st != 0) {
    fprintf(stderr, "adr_device_get(opencl:0): %s: %s\n", adr_status_name(st), err.message);
    exit(1);
  }
  st = adr_device_get(ARROW_DEVICE_CPU, 0, cpu, &err);
  if (st != 0) {
    fprintf(stderr, "adr_device_get(cpu:0): %s\n", err.message);
    exit(1);
  }
}

static inline void* ocl_test_native(struct adr_device* dev, int kind) {
  void* out = NULL;
  ASSERT_ADR(adr_device_native(dev, kind, &out, OCL_ERR));
  return out;
}

static inline enum adr_opencl_address_mode ocl_test_mode(struct adr_device* dev) {
  return (enum adr_opencl_address_mode)(uintptr_t)ocl_test_native(
      dev, ADR_OPENCL_NATIVE_ADDRESS_MODE);
}

/* The mode ADR_TEST_EXPECT_MODE says the test run was configured for
 * ("svm-fine", "svm-coarse", "buffer"), 0 when unset. */
static inline enum adr_opencl_address_mode ocl_test_expected_mode(void) {
  const char* m = getenv("ADR_TEST_EXPECT_MODE");
  if (m == NULL) return (enum adr_opencl_address_mode)0;
  if (strcmp(m, "svm-fine") == 0) return ADR_OPENCL_ADDRESS_SVM_FINE;
  if (strcmp(m, "svm-coarse") == 0) return ADR_OPENCL_ADDRESS_SVM_COARSE;
  if (strcmp(m, "buffer") == 0) return ADR_OPENCL_ADDRESS_BUFFER;
  fprintf(stderr, "bad ADR_TEST_EXPECT_MODE '%s'\n", m);
  exit(1);
}

#endif /* ADR_TESTS_OCL_TEST_H */
