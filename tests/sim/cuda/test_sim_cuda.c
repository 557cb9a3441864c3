/* SPDX-License-Identifier: Apache-2.0
 *
 * The CUDA simulator itself, called directly: it must behave like the
 * driver where the backend's bugs would hide (README.md), or the backend's
 * tests on it prove nothing. Linked against the simulated libcuda.so.1.
 */
/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <cuda.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

void adr_sim_cuda_alloc_fail(unsigned long long nth, int once);
void adr_sim_cuda_delay(unsigned microseconds);

#define R(call, want) assert_int_equal((int)(call), (int)(want))

static CUcontext g_ctx0, g_ctx1;

static void test_not_initialized_first(void** state) {
  (void)state;
  int n = -1;
  R(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
  int v = 0;
  R(cuDriverGetVersion(&v), CUDA_SUCCESS); /* works before cuInit, like the driver */
  assert_true(v >= 12000);
  R(cuInit(1), CUDA_ERROR_INVALID_VALUE);
  R(cuInit(0), CUDA_SUCCESS);
  R(cuDeviceGetCount(&n), CUDA_SUCCESS);
  assert_int_equal(n, 2);
  R(cuDevicePrimaryCtxRetain(&g_ctx0, 0), CUDA_SUCCESS);
  R(cuDevicePrimaryCtxRetain(&g_ctx1, 1), CUDA_SUCCESS);
  assert_ptr_not_equal(g_ctx0, g_ctx1);
}

static void test_error_names(void** state) {
  (void)state;
  const char* s = NULL;
  R(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s), CUDA_SUCCESS);
  assert_string_equal(s, "CUDA_ERROR_OUT_OF_MEMORY");
  R(cuGetErrorString(CUDA_ERROR_INVALID_VALUE, &s), CUDA_SUCCESS);
  assert_string_equal(s, "invalid argument");
  R(cuGetErrorName((CUresult)9999, &s), CUDA_ERROR_INVALID_VALUE);
  assert_null(s);
}

static void test_get_proc_address(void** state) {
  (void)state;
  void* fn = NULL;
  CUdriverProcAddressQueryResult q = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  R(cuGetProcAddress("cuMemAlloc", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &q), CUDA_SUCCESS);
  assert_int_equal(q, CU_GET_PROC_ADDRESS_SUCCESS);
  assert_ptr_equal(fn, (void*)&cuMemAlloc); /* the _v2 ABI */
  R(cuGetProcAddress("cuMemAllocAsync", &fn, 11000, CU_GET_PROC_ADDRESS_DEFAULT, &q),
    CUDA_ERROR_NOT_FOUND);
  assert_int_equal(q, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  assert_null(fn);
  R(cuGetProcAddress("cuNoSuchEntryPoint", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &q),
    CUDA_ERROR_NOT_FOUND);
  assert_int_equal(q, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
}

static void test_needs_current_context(void** state) {
  (void)state;
  CUcontext cur = (CUcontext)1;
  R(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
  assert_null(cur);
  CUdeviceptr p = 0;
  CUstream s = NULL;
  CUevent e = NULL;
  R(cuMemAlloc(&p, 4096), CUDA_ERROR_INVALID_CONTEXT);
  R(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_ERROR_INVALID_CONTEXT);
  R(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), CUDA_ERROR_INVALID_CONTEXT);
  R(cuCtxPushCurrent(g_ctx1), CUDA_SUCCESS);
  R(cuCtxPushCurrent(g_ctx0), CUDA_SUCCESS);
  R(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
  assert_ptr_equal(cur, g_ctx0);
  R(cuCtxPopCurrent(&cur), CUDA_SUCCESS);
  assert_ptr_equal(cur, g_ctx0);
  R(cuCtxPopCurrent(&cur), CUDA_SUCCESS);
  assert_ptr_equal(cur, g_ctx1);
  R(cuCtxPopCurrent(&cur), CUDA_ERROR_INVALID_CONTEXT);
}

static void test_pointer_checks(void** state) {
  (void)state;
  R(cuCtxPushCurrent(g_ctx0), CUDA_SUCCESS);
  CUstream s = NULL;
  R(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  CUdeviceptr p = 0, q = 0;
  R(cuMemAlloc(&p, 4096), CUDA_SUCCESS);
  assert_int_equal(p % 256, 0);
  unsigned char host[8192];
  R(cuMemcpyAsync((CUdeviceptr)(uintptr_t)host, p, 4096, s), CUDA_SUCCESS);
  R(cuStreamSynchronize(s), CUDA_SUCCESS);
  assert_int_equal(host[0], 0xA5); /* fresh device memory is not zeroed */
  R(cuMemcpyAsync((CUdeviceptr)(uintptr_t)host, p, 4097, s), CUDA_ERROR_INVALID_VALUE);
  R(cuMemcpyAsync((CUdeviceptr)(uintptr_t)host, p + 4096, 1, s), CUDA_ERROR_INVALID_VALUE);
  R(cuMemsetD8Async(p + 4000, 1, 97, s), CUDA_ERROR_INVALID_VALUE);
  R(cuMemFree(p + 16), CUDA_ERROR_INVALID_VALUE);
  R(cuMemFreeHost((void*)(uintptr_t)p), CUDA_ERROR_INVALID_VALUE); /* wrong kind */
  /* Another device's memory: peer copies must name the right contexts. */
  R(cuCtxPushCurrent(g_ctx1), CUDA_SUCCESS);
  R(cuMemAlloc(&q, 4096), CUDA_SUCCESS);
  CUcontext cur = NULL;
  R(cuCtxPopCurrent(&cur), CUDA_SUCCESS);
  R(cuMemcpyPeerAsync(q, g_ctx0, p, g_ctx0, 64, s), CUDA_ERROR_INVALID_VALUE);
  R(cuMemcpyPeerAsync(q, g_ctx1, p, g_ctx0, 64, s), CUDA_SUCCESS);
  R(cuMemsetD8Async(q, 0, 64, s), CUDA_ERROR_INVALID_VALUE); /* stream of device 0 */
  R(cuStreamSynchronize(s), CUDA_SUCCESS);
  R(cuMemFree(q), CUDA_SUCCESS);
  R(cuMemFree(p), CUDA_SUCCESS);
  R(cuMemFree(p), CUDA_ERROR_INVALID_VALUE);
  R(cuMemcpyAsync((CUdeviceptr)(uintptr_t)host, p, 16, s), CUDA_ERROR_INVALID_VALUE);
  /* Pointer attributes: a device pointer, and pageable memory. */
  R(cuMemAlloc(&p, 1000), CUDA_SUCCESS);
  unsigned int type = 99;
  int ordinal = -1;
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                 CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
  void* data[] = {&type, &ordinal};
  R(cuPointerGetAttributes(2, attrs, data, p + 999), CUDA_SUCCESS);
  assert_int_equal(type, CU_MEMORYTYPE_DEVICE);
  assert_int_equal(ordinal, 0);
  R(cuPointerGetAttributes(2, attrs, data, (CUdeviceptr)(uintptr_t)host), CUDA_SUCCESS);
  assert_int_equal(type, 0);
  CUdeviceptr base = 0;
  size_t size = 0;
  R(cuMemGetAddressRange(&base, &size, p + 500), CUDA_SUCCESS);
  assert_int_equal(base, p);
  assert_int_equal(size, 1000);
  R(cuMemFree(p), CUDA_SUCCESS);
  R(cuStreamDestroy(s), CUDA_SUCCESS);
  R(cuStreamSynchronize(s), CUDA_ERROR_INVALID_HANDLE); /* destroyed handle */
  R(cuCtxPopCurrent(&cur), CUDA_SUCCESS);
}

static void test_events_complete_when_reached(void** state) {
  (void)state;
  R(cuCtxPushCurrent(g_ctx0), CUDA_SUCCESS);
  CUstream s = NULL;
  CUevent e = NULL;
  CUdeviceptr p = 0;
  R(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  R(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
  R(cuEventQuery(e), CUDA_SUCCESS); /* never recorded: complete */
  R(cuMemAlloc(&p, 4096), CUDA_SUCCESS);
  adr_sim_cuda_delay(50000);
  R(cuMemsetD8Async(p, 7, 4096, s), CUDA_SUCCESS);
  R(cuEventRecord(e, s), CUDA_SUCCESS);
  R(cuEventQuery(e), CUDA_ERROR_NOT_READY);
  R(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
  R(cuEventSynchronize(e), CUDA_SUCCESS);
  R(cuEventQuery(e), CUDA_SUCCESS);
  adr_sim_cuda_delay(0);
  R(cuEventDestroy(e), CUDA_SUCCESS);
  R(cuEventQuery(e), CUDA_ERROR_INVALID_HANDLE);
  R(cuMemFree(p), CUDA_SUCCESS);
  R(cuStreamDestroy(s), CUDA_SUCCESS);
  CUcontext cur = NULL;
  R(cuCtxPopCurrent(&cur), CUDA_SUCCESS);
}

static void test_host_memory_and_failures(void** state) {
  (void)state;
  R(cuCtxPushCurrent(g_ctx0), CUDA_SUCCESS);
  unsigned char* buf = aligned_alloc(4096, 8192);
  R(cuMemHostRegister(buf, 8192, CU_MEMHOSTREGISTER_PORTABLE), CUDA_SUCCESS);
  R(cuMemHostRegister(buf + 4096, 100, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  R(cuMemHostUnregister(buf + 1), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  R(cuMemHostUnregister(buf), CUDA_SUCCESS);
  R(cuMemHostUnregister(buf), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  free(buf);
  adr_sim_cuda_alloc_fail(2, 1); /* only the second allocation from now */
  CUdeviceptr a = 0, b = 0, c = 0;
  R(cuMemAlloc(&a, 64), CUDA_SUCCESS);
  R(cuMemAlloc(&b, 64), CUDA_ERROR_OUT_OF_MEMORY);
  R(cuMemAlloc(&c, 64), CUDA_SUCCESS);
  adr_sim_cuda_alloc_fail(0, 0);
  R(cuMemAlloc(&b, (size_t)1 << 40), CUDA_ERROR_OUT_OF_MEMORY); /* over the budget */
  R(cuMemAlloc(&b, 0), CUDA_ERROR_INVALID_VALUE);
  R(cuMemFree(a), CUDA_SUCCESS);
  R(cuMemFree(c), CUDA_SUCCESS);
  CUcontext cur = NULL;
  R(cuCtxPopCurrent(&cur), CUDA_SUCCESS);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_not_initialized_first),
      cmocka_unit_test(test_error_names),
      cmocka_unit_test(test_get_proc_address),
      cmocka_unit_test(test_needs_current_context),
      cmocka_unit_test(test_pointer_checks),
      cmocka_unit_test(test_events_complete_when_reached),
      cmocka_unit_test(test_host_memory_and_failures),
  };
  int failed = cmocka_run_group_tests_name("cuda simulator", tests, NULL, NULL);
  if (g_ctx0 != NULL) cuDevicePrimaryCtxRelease(0);
  if (g_ctx1 != NULL) cuDevicePrimaryCtxRelease(1);
  return failed ? 1 : 0;
}
