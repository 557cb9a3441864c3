/* SPDX-License-Identifier: Apache-2.0
 *
 * Embedding adr in an OpenCL application: adr_device_adopt over the
 * application's own context and queue (no second context), the native
 * handles adr reports for it, memory that the application's raw OpenCL
 * calls see, copies between the adopted device and opencl:0 (separate
 * contexts, so staged through the host), adoption of adr's own context with
 * a second queue, and descriptors that must be refused.
 */
#include <time.h>

#include "ocl_test.h"

static struct adr_device* dev;
static struct adr_device* cpu;
static cl_device_id device;
static cl_context app_ctx;
static cl_command_queue app_queue;
static struct adr_device* adopted;

static int setup(void** state) {
  (void)state;
  /* The application finds the device itself, with plain OpenCL. */
  cl_platform_id platform = NULL;
  if (clGetPlatformIDs(1, &platform, NULL) != CL_SUCCESS) return -1;
  if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL) != CL_SUCCESS) return -1;
  cl_int rc = CL_SUCCESS;
  app_ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &rc);
  if (rc != CL_SUCCESS) return -1;
  app_queue = clCreateCommandQueueWithProperties(app_ctx, device, NULL, &rc);
  if (rc != CL_SUCCESS) return -1;
  struct adr_opencl_device_desc desc = {
      .struct_size = sizeof(desc), .context = app_ctx, .queue = app_queue};
  struct adr_error err = {{0}};
  if (adr_device_adopt(ARROW_DEVICE_OPENCL, &desc, &adopted, &err) != 0) {
    fprintf(stderr, "adr_device_adopt: %s\n", err.message);
    return -1;
  }
  return 0;
}

static int teardown(void** state) {
  (void)state;
  /* adr keeps its own references while the adopted device lives. */
  if (app_queue != NULL) clReleaseCommandQueue(app_queue);
  if (app_ctx != NULL) clReleaseContext(app_ctx);
  return 0;
}

static void test_adopted_device_identity(void** state) {
  (void)state;
  assert_int_equal(adr_device_type(adopted), ARROW_DEVICE_OPENCL);
  /* Ids after the enumerated devices; adr_device_get finds it. */
  assert_true(adr_device_id(adopted) >= 1);
  struct adr_device* again = NULL;
  ASSERT_ADR(adr_device_get(ARROW_DEVICE_OPENCL, adr_device_id(adopted), &again, OCL_ERR));
  assert_ptr_equal(again, adopted);
  assert_ptr_equal(ocl_test_native(adopted, ADR_NATIVE_CONTEXT), app_ctx);
  assert_ptr_equal(ocl_test_native(adopted, ADR_NATIVE_QUEUE), app_queue);
  assert_ptr_equal(ocl_test_native(adopted, ADR_NATIVE_DEVICE), device);
  assert_ptr_equal(adr_stream_native(adr_stream_default(adopted)), app_queue);
  cl_platform_id platform = NULL;
  ASSERT_CL(clGetDeviceInfo(device, CL_DEVICE_PLATFORM, sizeof(platform), &platform, NULL));
  assert_ptr_equal(ocl_test_native(adopted, ADR_NATIVE_PLATFORM), platform);
  /* adr made no context of its own for this device. */
  assert_ptr_not_equal(ocl_test_native(dev, ADR_NATIVE_CONTEXT), app_ctx);
  struct adr_device_info info = {.struct_size = sizeof(info)};
  ASSERT_ADR(adr_device_info_get(adopted, &info, OCL_ERR));
  assert_string_equal(info.backend, "opencl");
  assert_true(info.name[0] != '\0');
}

static void test_adopted_memory_is_the_applications(void** state) {
  (void)state;
  enum { N = 10000, OFF = 320 };
  unsigned char in[N], out[N];
  for (size_t i = 0; i < N; i++) in[i] = (unsigned char)(i * 31 + 7);
  void* buf = NULL;
  ASSERT_ADR(adr_alloc(adopted, N + OFF, 0, NULL, &buf, OCL_ERR));
  struct adr_device* owner = NULL;
  ASSERT_ADR(adr_pointer_query((char*)buf + OFF + 5, &owner, OCL_ERR));
  assert_ptr_equal(owner, adopted);
  ASSERT_ADR(adr_copy(adopted, (char*)buf + OFF, cpu, in, N, NULL, OCL_ERR));
  /* The application reads it back on its own queue with raw OpenCL. */
  struct adr_opencl_buffer q = {.struct_size = sizeof(q), .address = (char*)buf + OFF};
  void* inout = &q;
  ASSERT_ADR(adr_device_native(adopted, ADR_OPENCL_NATIVE_BUFFER, &inout, OCL_ERR));
  assert_int_equal(q.offset, OFF);
  assert_int_equal(q.size, N + OFF);
  memset(out, 0, sizeof(out));
  if (q.buffer != NULL)
    ASSERT_CL(
        clEnqueueReadBuffer(app_queue, q.buffer, CL_TRUE, q.buffer_offset, N, out, 0, NULL, NULL));
  else
    ASSERT_CL(clEnqueueSVMMemcpy(app_queue, CL_TRUE, out, (char*)buf + OFF, N, 0, NULL, NULL));
  assert_memory_equal(in, out, N);
  /* Not an allocation of opencl:0. */
  q.address = buf;
  inout = &q;
  ASSERT_ADR_ERR(adr_device_native(dev, ADR_OPENCL_NATIVE_BUFFER, &inout, OCL_ERR), ENOENT,
                 "not inside an allocation");
  ASSERT_ADR(adr_free(adopted, buf, N + OFF, NULL, OCL_ERR));
}

/* opencl:0 and the adopted device live in different contexts. */
static void test_copy_between_contexts(void** state) {
  (void)state;
  enum { N = 3 * 1024 * 1024 + 123 };
  unsigned char* in = malloc(N);
  unsigned char* out = malloc(N);
  assert_non_null(in);
  assert_non_null(out);
  for (size_t i = 0; i < N; i++) in[i] = (unsigned char)((i >> 8) ^ i);
  void* a = NULL;
  void* b = NULL;
  ASSERT_ADR(adr_alloc(dev, N + 64, 0, NULL, &a, OCL_ERR));
  ASSERT_ADR(adr_alloc(adopted, N + 64, 0, NULL, &b, OCL_ERR));
  ASSERT_ADR(adr_copy(dev, (char*)a + 64, cpu, in, N, NULL, OCL_ERR));
  ASSERT_ADR(adr_copy(adopted, (char*)b + 32, dev, (char*)a + 64, N, NULL, OCL_ERR));
  memset(out, 0, N);
  ASSERT_ADR(adr_copy(cpu, out, adopted, (char*)b + 32, N, NULL, OCL_ERR));
  assert_memory_equal(in, out, N);
  /* And back, on a stream of the adopted device. */
  struct adr_stream* s = NULL;
  ASSERT_ADR(adr_stream_create(adopted, &s, OCL_ERR));
  ASSERT_ADR(adr_memset(dev, a, 0, N + 64, NULL, OCL_ERR));
  ASSERT_ADR(adr_copy(dev, a, adopted, (char*)b + 32, N, s, OCL_ERR));
  ASSERT_ADR(adr_stream_synchronize(s, OCL_ERR));
  memset(out, 0, N);
  ASSERT_ADR(adr_copy(cpu, out, dev, a, N, NULL, OCL_ERR));
  assert_memory_equal(in, out, N);
  ASSERT_ADR(adr_stream_destroy(s, OCL_ERR));
  ASSERT_ADR(adr_free(dev, a, N + 64, NULL, OCL_ERR));
  ASSERT_ADR(adr_free(adopted, b, N + 64, NULL, OCL_ERR));
  free(in);
  free(out);
}

/* Adopting adr's own context with a second queue: same context, so the
 * two devices copy directly. */
static void test_adopt_adr_context_with_second_queue(void** state) {
  (void)state;
  cl_context ctx = ocl_test_native(dev, ADR_NATIVE_CONTEXT);
  cl_int rc = CL_SUCCESS;
  cl_command_queue q2 = clCreateCommandQueueWithProperties(ctx, device, NULL, &rc);
  assert_int_equal(rc, CL_SUCCESS);
  struct adr_opencl_device_desc desc = {
      .struct_size = sizeof(desc), .context = ctx, .queue = q2, .device = device};
  struct adr_device* twin = NULL;
  ASSERT_ADR(adr_device_adopt(ARROW_DEVICE_OPENCL, &desc, &twin, OCL_ERR));
  assert_ptr_not_equal(twin, dev);
  assert_ptr_not_equal(twin, adopted);
  unsigned char in[5000], out[5000];
  for (size_t i = 0; i < sizeof(in); i++) in[i] = (unsigned char)(i % 251);
  void* a = NULL;
  void* b = NULL;
  ASSERT_ADR(adr_alloc(dev, sizeof(in), 0, NULL, &a, OCL_ERR));
  ASSERT_ADR(adr_alloc(twin, sizeof(in), 0, NULL, &b, OCL_ERR));
  ASSERT_ADR(adr_copy(dev, a, cpu, in, sizeof(in), NULL, OCL_ERR));
  ASSERT_ADR(adr_copy(twin, b, dev, a, sizeof(in), adr_stream_default(twin), OCL_ERR));
  ASSERT_ADR(adr_stream_synchronize(adr_stream_default(twin), OCL_ERR));
  ASSERT_ADR(adr_copy(cpu, out, twin, b, sizeof(out), NULL, OCL_ERR));
  assert_memory_equal(in, out, sizeof(in));
  ASSERT_ADR(adr_free(dev, a, sizeof(in), NULL, OCL_ERR));
  ASSERT_ADR(adr_free(twin, b, sizeof(in), NULL, OCL_ERR));
  ASSERT_CL(clReleaseCommandQueue(q2));
}

static cl_uint refcount_context(cl_context c) {
  cl_uint n = 0;
  ASSERT_CL(clGetContextInfo(c, CL_CONTEXT_REFERENCE_COUNT, sizeof(n), &n, NULL));
  return n;
}

static cl_uint refcount_queue(cl_command_queue q) {
  cl_uint n = 0;
  ASSERT_CL(clGetCommandQueueInfo(q, CL_QUEUE_REFERENCE_COUNT, sizeof(n), &n, NULL));
  return n;
}

/* A reference count once it settles: PoCL's own completed command
 * objects can hold a queue (and context) reference for a moment after
 * clFinish (it frees them on its driver thread), so a count read at once
 * may be one over. Waits up to 5 s for `want`; a reference adr kept never
 * settles. */
static cl_uint settled(cl_uint (*count)(void*), void* obj, cl_uint want) {
  cl_uint n = count(obj);
  for (int i = 0; i < 500 && n != want; i++) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
    n = count(obj);
  }
  return n;
}

static cl_uint count_context(void* c) {
  return refcount_context(c);
}

static cl_uint count_queue(void* q) {
  return refcount_queue(q);
}

/* adr_device_release on an adopted OpenCL device: refused while memory or
 * a stream lives; afterwards adr's references on the context and queue are
 * gone (the application's count is back to its own), the device answers
 * ENODEV, and the application releases its objects whenever it likes. */
static void test_release_adopted(void** state) {
  (void)state;
  cl_int rc = CL_SUCCESS;
  cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &rc);
  ASSERT_CL(rc);
  cl_command_queue q = clCreateCommandQueueWithProperties(ctx, device, NULL, &rc);
  ASSERT_CL(rc);
  cl_uint ctx_refs = refcount_context(ctx), q_refs = refcount_queue(q);
  struct adr_opencl_device_desc desc = {.struct_size = sizeof(desc), .context = ctx, .queue = q};
  struct adr_device* mine = NULL;
  ASSERT_ADR(adr_device_adopt(ARROW_DEVICE_OPENCL, &desc, &mine, OCL_ERR));
  assert_true(refcount_context(ctx) > ctx_refs);
  unsigned char in[3000], out[3000];
  for (size_t i = 0; i < sizeof(in); i++) in[i] = (unsigned char)(i * 13);
  void* a = NULL;
  ASSERT_ADR(adr_alloc(mine, sizeof(in), 0, NULL, &a, OCL_ERR));
  ASSERT_ADR(adr_copy(mine, a, cpu, in, sizeof(in), NULL, OCL_ERR));
  ASSERT_ADR(adr_copy(cpu, out, mine, a, sizeof(out), NULL, OCL_ERR));
  assert_memory_equal(in, out, sizeof(in));
  ASSERT_ADR_ERR(adr_device_release(mine, OCL_ERR), EBUSY, "allocation");
  ASSERT_ADR(adr_free(mine, a, sizeof(in), NULL, OCL_ERR));
  struct adr_stream* s = NULL;
  ASSERT_ADR(adr_stream_create(mine, &s, OCL_ERR));
  ASSERT_ADR_ERR(adr_device_release(mine, OCL_ERR), EBUSY, "1 stream or event");
  ASSERT_ADR(adr_stream_destroy(s, OCL_ERR));
  ASSERT_ADR_ERR(adr_device_release(dev, OCL_ERR), EINVAL, "not an adopted device");

  ASSERT_ADR(adr_device_release(mine, OCL_ERR));
  assert_int_equal(settled(count_context, ctx, ctx_refs), ctx_refs);
  assert_int_equal(settled(count_queue, q, q_refs), q_refs);
  ASSERT_ADR_ERR(adr_alloc(mine, 64, 0, NULL, &a, OCL_ERR), ENODEV, "released");
  ASSERT_ADR_ERR(adr_copy(cpu, out, mine, (void*)(uintptr_t)0x1000, 4, NULL, OCL_ERR), ENODEV,
                 "released");
  ASSERT_ADR_ERR(adr_device_release(mine, OCL_ERR), EINVAL, "already released");
  ASSERT_CL(clReleaseCommandQueue(q));
  ASSERT_CL(clReleaseContext(ctx));
}

static void test_bad_descriptors_are_refused(void** state) {
  (void)state;
  struct adr_device* out = NULL;
  ASSERT_ADR_ERR(adr_device_adopt(ARROW_DEVICE_OPENCL, NULL, &out, OCL_ERR), EINVAL, "");
  struct adr_opencl_device_desc desc = {.struct_size = 4, .context = app_ctx, .queue = app_queue};
  ASSERT_ADR_ERR(adr_device_adopt(ARROW_DEVICE_OPENCL, &desc, &out, OCL_ERR), EINVAL,
                 "struct_size");
  desc.struct_size = sizeof(desc);
  desc.queue = NULL;
  ASSERT_ADR_ERR(adr_device_adopt(ARROW_DEVICE_OPENCL, &desc, &out, OCL_ERR), EINVAL,
                 "cl_command_queue");
  /* A queue of adr's context with the application's context. */
  desc.queue = ocl_test_native(dev, ADR_NATIVE_QUEUE);
  ASSERT_ADR_ERR(adr_device_adopt(ARROW_DEVICE_OPENCL, &desc, &out, OCL_ERR), EINVAL,
                 "does not belong to the given context");
  cl_int rc = CL_SUCCESS;
  cl_queue_properties ooo[] = {CL_QUEUE_PROPERTIES, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, 0};
  cl_command_queue unordered = clCreateCommandQueueWithProperties(app_ctx, device, ooo, &rc);
  if (rc == CL_SUCCESS) {
    desc.queue = unordered;
    ASSERT_ADR_ERR(adr_device_adopt(ARROW_DEVICE_OPENCL, &desc, &out, OCL_ERR), EINVAL,
                   "out-of-order");
    ASSERT_CL(clReleaseCommandQueue(unordered));
  }
}

int main(void) {
  ocl_test_devices(&dev, &cpu);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_adopted_device_identity),
      cmocka_unit_test(test_adopted_memory_is_the_applications),
      cmocka_unit_test(test_copy_between_contexts),
      cmocka_unit_test(test_adopt_adr_context_with_second_queue),
      cmocka_unit_test(test_bad_descriptors_are_refused),
      cmocka_unit_test(test_release_adopted),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
