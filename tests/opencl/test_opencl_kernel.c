/* SPDX-License-Identifier: Apache-2.0
 *
 * Real device code on adr memory: a kernel built and launched by the test
 * on the adr device's own context and queues reads an adr allocation at an
 * offset and writes another one at an offset; adr copies the data in and
 * out. Proves the address model (SVM pointer arithmetic, or cl_mem +
 * offset from ADR_OPENCL_NATIVE_BUFFER) holds for kernels, and that an adr
 * stream is the in-order queue adr_stream_native returns.
 *
 * Registered once per address mode; ADR_TEST_EXPECT_MODE says which.
 */
#include "ocl_test.h"

static struct adr_device* dev;
static struct adr_device* cpu;
static cl_program program;
static cl_kernel kernel;

static const char source[] =
    "__kernel void scale(__global const uint* in, uint in_off, __global uint* out,\n"
    "                    uint out_off, uint n) {\n"
    "  size_t i = get_global_id(0);\n"
    "  if (i < n) out[out_off + i] = in[in_off + i] * 3u + 1u;\n"
    "}\n";

static int setup(void** state) {
  (void)state;
  cl_context ctx = ocl_test_native(dev, ADR_NATIVE_CONTEXT);
  cl_device_id device = ocl_test_native(dev, ADR_NATIVE_DEVICE);
  const char* src = source;
  cl_int rc = CL_SUCCESS;
  program = clCreateProgramWithSource(ctx, 1, &src, NULL, &rc);
  if (rc != CL_SUCCESS) return -1;
  rc = clBuildProgram(program, 1, &device, "", NULL, NULL);
  if (rc != CL_SUCCESS) {
    char log[4096] = "";
    clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, sizeof(log) - 1, log, NULL);
    fprintf(stderr, "clBuildProgram: %d\n%s\n", (int)rc, log);
    return -1;
  }
  kernel = clCreateKernel(program, "scale", &rc);
  return rc == CL_SUCCESS ? 0 : -1;
}

static int teardown(void** state) {
  (void)state;
  if (kernel != NULL) clReleaseKernel(kernel);
  if (program != NULL) clReleaseProgram(program);
  return 0;
}

/* Sets kernel argument `index` (and the element offset at index + 1) to the
 * adr address `addr`, the way an application would in each mode. */
static void set_buffer_arg(cl_uint index, void* addr) {
  struct adr_opencl_buffer q = {.struct_size = sizeof(q)};
  ASSERT_ADR(adr_opencl_buffer(dev, addr, &q, OCL_ERR));
  assert_ptr_equal(q.address, addr);
  assert_int_equal(q.mode, ocl_test_mode(dev));
  assert_true((char*)q.base + q.offset == (char*)addr);
  cl_uint elem_off;
  if (q.mode == ADR_OPENCL_ADDRESS_BUFFER) {
    assert_non_null(q.buffer);
    assert_int_equal(q.buffer_offset % 4, 0);
    ASSERT_CL(clSetKernelArg(kernel, index, sizeof(cl_mem), &q.buffer));
    elem_off = (cl_uint)(q.buffer_offset / 4);
  } else {
    /* An SVM address in the middle of an allocation is itself a valid
     * kernel argument. */
    assert_null(q.buffer);
    ASSERT_CL(clSetKernelArgSVMPointer(kernel, index, addr));
    elem_off = 0;
  }
  ASSERT_CL(clSetKernelArg(kernel, index + 1, sizeof(elem_off), &elem_off));
}

static void check_scaled(const uint32_t* in, const uint32_t* out, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (out[i] != in[i] * 3u + 1u)
      fail_msg("element %zu: got %u, expected %u", i, out[i], in[i] * 3u + 1u);
}

struct props {
  char address_mode[32];
  char copy_path[128];
  int count;
};

static void collect(void* ctx, const char* key, const char* value) {
  struct props* p = ctx;
  p->count++;
  if (strcmp(key, "address_mode") == 0)
    snprintf(p->address_mode, sizeof(p->address_mode), "%s", value);
  if (strcmp(key, "copy_path") == 0) snprintf(p->copy_path, sizeof(p->copy_path), "%s", value);
}

/* The mode asked for is the one in use, and adr-info's properties say so. */
static void test_mode_is_the_configured_one(void** state) {
  (void)state;
  enum adr_opencl_address_mode want = ocl_test_expected_mode();
  if (want != 0) assert_int_equal(ocl_test_mode(dev), want);
  struct props p;
  memset(&p, 0, sizeof(p));
  ASSERT_ADR(adr_device_properties(dev, collect, &p, OCL_ERR));
  assert_true(p.count >= 10);
  static const char* names[] = {"", "svm-fine", "svm-coarse", "buffer"};
  assert_string_equal(p.address_mode, names[ocl_test_mode(dev)]);
  const char* host_copy = getenv("ADR_OPENCL_HOST_COPY");
  bool memcpy_path = ocl_test_mode(dev) == ADR_OPENCL_ADDRESS_SVM_FINE &&
                     (host_copy == NULL || strcmp(host_copy, "0") != 0);
  assert_int_equal(strstr(p.copy_path, "memcpy") != NULL, memcpy_path);
  struct adr_device_info info = {.struct_size = sizeof(info)};
  ASSERT_ADR(adr_device_info_get(dev, &info, OCL_ERR));
  assert_int_equal((info.caps & ADR_CAP_HOST_ACCESSIBLE) != 0,
                   ocl_test_mode(dev) == ADR_OPENCL_ADDRESS_SVM_FINE);
  assert_int_equal((info.caps & ADR_CAP_DEVICE_ADDRESSES) != 0,
                   ocl_test_mode(dev) != ADR_OPENCL_ADDRESS_BUFFER);
  assert_true(info.alignment >= 64);
}

/* Beyond CL_DEVICE_MAX_MEM_ALLOC_SIZE: ENOMEM that says so. */
static void test_too_large_allocation(void** state) {
  (void)state;
  void* p = NULL;
  ASSERT_ADR_ERR(adr_alloc(dev, (size_t)1 << 46, 0, NULL, &p, OCL_ERR), ENOMEM,
                 "CL_DEVICE_MAX_MEM_ALLOC_SIZE");
}

/* adr copy in on a stream, raw kernel on the stream's queue, adr copy out
 * on the same stream: ordering comes from the queue alone. */
static void test_kernel_on_adr_stream_at_offsets(void** state) {
  (void)state;
  enum { N = 1000, IN_OFF = 192, OUT_OFF = 68, BYTES = 8192 };
  uint32_t in[N], out[N];
  unsigned char whole[BYTES];
  for (size_t i = 0; i < N; i++) in[i] = (uint32_t)(i * 7 + 3);
  void* src = NULL;
  void* dst = NULL;
  ASSERT_ADR(adr_alloc(dev, BYTES, 0, NULL, &src, OCL_ERR));
  ASSERT_ADR(adr_alloc(dev, BYTES, 0, NULL, &dst, OCL_ERR));
  ASSERT_ADR(adr_memset(dev, dst, 0xee, BYTES, NULL, OCL_ERR));

  struct adr_stream* stream = NULL;
  ASSERT_ADR(adr_stream_create(dev, &stream, OCL_ERR));
  cl_command_queue queue = adr_stream_native(stream);
  assert_non_null(queue);

  void* in_addr = (char*)src + IN_OFF;
  void* out_addr = (char*)dst + OUT_OFF;
  ASSERT_ADR(adr_copy(dev, in_addr, cpu, in, sizeof(in), stream, OCL_ERR));
  set_buffer_arg(0, in_addr);
  set_buffer_arg(2, out_addr);
  cl_uint n = N;
  ASSERT_CL(clSetKernelArg(kernel, 4, sizeof(n), &n));
  size_t global = N;
  ASSERT_CL(clEnqueueNDRangeKernel(queue, kernel, 1, NULL, &global, NULL, 0, NULL, NULL));
  ASSERT_ADR(adr_copy(cpu, out, dev, out_addr, sizeof(out), stream, OCL_ERR));
  ASSERT_ADR(adr_copy(cpu, whole, dev, dst, BYTES, stream, OCL_ERR));
  ASSERT_ADR(adr_stream_synchronize(stream, OCL_ERR));
  check_scaled(in, out, N);
  /* The kernel wrote exactly [OUT_OFF, OUT_OFF + 4N) of dst. */
  for (size_t i = 0; i < BYTES; i++)
    if ((i < OUT_OFF || i >= OUT_OFF + sizeof(out)) && whole[i] != 0xee)
      fail_msg("byte %zu outside the kernel's range is %#x", i, whole[i]);

  ASSERT_ADR(adr_stream_destroy(stream, OCL_ERR));
  ASSERT_ADR(adr_free(dev, src, BYTES, NULL, OCL_ERR));
  ASSERT_ADR(adr_free(dev, dst, BYTES, NULL, OCL_ERR));
}

/* Blocking adr calls (NULL stream) around a kernel on the default queue. */
static void test_kernel_on_default_queue(void** state) {
  (void)state;
  enum { N = 4096 };
  static uint32_t in[N], out[N];
  for (size_t i = 0; i < N; i++) in[i] = (uint32_t)(i ^ 0x5a5a5a5au);
  void* buf = NULL;
  size_t bytes = 2 * sizeof(in) + 4096;
  ASSERT_ADR(adr_alloc(dev, bytes, 4096, NULL, &buf, OCL_ERR));
  assert_int_equal((uintptr_t)buf % 4096, 0);
  /* Input and output in the same allocation at different offsets. */
  void* in_addr = (char*)buf + 4096;
  void* out_addr = (char*)buf + 4096 + sizeof(in);
  ASSERT_ADR(adr_copy(dev, in_addr, cpu, in, sizeof(in), NULL, OCL_ERR));
  cl_command_queue queue = ocl_test_native(dev, ADR_NATIVE_QUEUE);
  assert_ptr_equal(queue, adr_stream_native(adr_stream_default(dev)));
  set_buffer_arg(0, in_addr);
  set_buffer_arg(2, out_addr);
  cl_uint n = N;
  ASSERT_CL(clSetKernelArg(kernel, 4, sizeof(n), &n));
  size_t global = N;
  ASSERT_CL(clEnqueueNDRangeKernel(queue, kernel, 1, NULL, &global, NULL, 0, NULL, NULL));
  /* A blocking adr copy on the default stream is ordered after the raw
   * kernel on the same queue. */
  ASSERT_ADR(adr_copy(cpu, out, dev, out_addr, sizeof(out), NULL, OCL_ERR));
  check_scaled(in, out, N);
  ASSERT_ADR(adr_free(dev, buf, bytes, NULL, OCL_ERR));
}

/* The kernel's output goes straight from one adr allocation to another
 * with a device-to-device adr copy between mid-allocation addresses. */
static void test_kernel_output_copied_device_to_device(void** state) {
  (void)state;
  enum { N = 512 };
  uint32_t in[N], out[N];
  for (size_t i = 0; i < N; i++) in[i] = (uint32_t)(i * 2654435761u);
  void* a = NULL;
  void* b = NULL;
  ASSERT_ADR(adr_alloc(dev, 3 * sizeof(in), 0, NULL, &a, OCL_ERR));
  ASSERT_ADR(adr_alloc(dev, 3 * sizeof(in), 0, NULL, &b, OCL_ERR));
  ASSERT_ADR(adr_copy(dev, a, cpu, in, sizeof(in), NULL, OCL_ERR));
  set_buffer_arg(0, a);
  set_buffer_arg(2, (char*)a + sizeof(in) + 4);
  cl_uint n = N;
  ASSERT_CL(clSetKernelArg(kernel, 4, sizeof(n), &n));
  size_t global = N;
  cl_command_queue queue = ocl_test_native(dev, ADR_NATIVE_QUEUE);
  ASSERT_CL(clEnqueueNDRangeKernel(queue, kernel, 1, NULL, &global, NULL, 0, NULL, NULL));
  ASSERT_ADR(adr_copy(dev, (char*)b + 2 * sizeof(in) - 8, dev, (char*)a + sizeof(in) + 4,
                      sizeof(in), NULL, OCL_ERR));
  ASSERT_ADR(adr_copy(cpu, out, dev, (char*)b + 2 * sizeof(in) - 8, sizeof(out), NULL, OCL_ERR));
  check_scaled(in, out, N);
  ASSERT_ADR(adr_free(dev, a, 3 * sizeof(in), NULL, OCL_ERR));
  ASSERT_ADR(adr_free(dev, b, 3 * sizeof(in), NULL, OCL_ERR));
}

int main(void) {
  ocl_test_devices(&dev, &cpu);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mode_is_the_configured_one),
      cmocka_unit_test(test_too_large_allocation),
      cmocka_unit_test(test_kernel_on_adr_stream_at_offsets),
      cmocka_unit_test(test_kernel_on_default_queue),
      cmocka_unit_test(test_kernel_output_copied_device_to_device),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
