/* SPDX-License-Identifier: Apache-2.0
 *
 * adr_opencl_buffer(): an adr address to the allocation as the application
 * made it (base, size, offset) and the OpenCL objects behind it (cl_mem and
 * its offset in buffer mode, the SVM address otherwise), under the caching
 * pool and without it, in every address mode (tests/opencl/meson.build runs
 * it once per configuration). Raw OpenCL copies through what it returns
 * into and out of the application's own cl_mem and check the bytes.
 */
#include <pthread.h>

#include "ocl_test.h"

static struct adr_device* dev;
static struct adr_device* cpu;
static cl_context context;
static cl_command_queue queue;

/* Reads n bytes at adr address p with raw OpenCL on the device's default
 * queue (ordered after adr's blocking calls), through the application's
 * own cl_mem: clEnqueueCopyBuffer from the cl_mem + buffer_offset, or
 * clEnqueueSVMMemcpy from the SVM address. */
static void native_read(void* p, size_t n, unsigned char* out) {
  struct adr_opencl_buffer q = {.struct_size = sizeof(q)};
  ASSERT_ADR(adr_opencl_buffer(dev, p, &q, OCL_ERR));
  cl_int rc = CL_SUCCESS;
  cl_mem app = clCreateBuffer(context, CL_MEM_READ_WRITE, n, NULL, &rc);
  ASSERT_CL(rc);
  if (q.buffer != NULL)
    ASSERT_CL(clEnqueueCopyBuffer(queue, q.buffer, app, q.buffer_offset, 0, n, 0, NULL, NULL));
  else
    ASSERT_CL(clEnqueueSVMMemcpy(queue, CL_FALSE, out, p, n, 0, NULL, NULL));
  if (q.buffer != NULL)
    ASSERT_CL(clEnqueueReadBuffer(queue, app, CL_TRUE, 0, n, out, 0, NULL, NULL));
  ASSERT_CL(clFinish(queue));
  ASSERT_CL(clReleaseMemObject(app));
}

/* Writes n bytes to adr address p with raw OpenCL (the reverse). */
static void native_write(void* p, const unsigned char* in, size_t n) {
  struct adr_opencl_buffer q = {.struct_size = sizeof(q)};
  ASSERT_ADR(adr_opencl_buffer(dev, p, &q, OCL_ERR));
  cl_int rc = CL_SUCCESS;
  if (q.buffer != NULL) {
    cl_mem app =
        clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n, (void*)in, &rc);
    ASSERT_CL(rc);
    ASSERT_CL(clEnqueueCopyBuffer(queue, app, q.buffer, 0, q.buffer_offset, n, 0, NULL, NULL));
    ASSERT_CL(clFinish(queue));
    ASSERT_CL(clReleaseMemObject(app));
  } else {
    ASSERT_CL(clEnqueueSVMMemcpy(queue, CL_TRUE, p, in, n, 0, NULL, NULL));
  }
}

static int setup(void** state) {
  (void)state;
  ocl_test_devices(&dev, &cpu);
  enum adr_opencl_address_mode want = ocl_test_expected_mode();
  if (want != 0 && ocl_test_mode(dev) != want) fail_msg("address mode is not the one configured");
  context = ocl_test_native(dev, ADR_NATIVE_CONTEXT);
  queue = ocl_test_native(dev, ADR_NATIVE_QUEUE);
  return 0;
}

/* A 100-byte allocation between two neighbours (under the pool all three
 * usually share one backend allocation): exact bounds, every interior
 * address, one past the end is ENOENT (nothing starts there: allocations
 * are 64-byte aligned), and the bytes through raw OpenCL. */
static void test_exact_bounds(void** state) {
  (void)state;
  void *before = NULL, *p = NULL, *after = NULL;
  ASSERT_ADR(adr_alloc(dev, 256, 0, NULL, &before, OCL_ERR));
  ASSERT_ADR(adr_alloc(dev, 100, 0, NULL, &p, OCL_ERR));
  ASSERT_ADR(adr_alloc(dev, 300, 0, NULL, &after, OCL_ERR));
  for (size_t k = 0; k < 100; k++) {
    struct adr_opencl_buffer q = {.struct_size = sizeof(q)};
    ASSERT_ADR(adr_opencl_buffer(dev, (char*)p + k, &q, OCL_ERR));
    assert_ptr_equal(q.address, (char*)p + k);
    assert_ptr_equal(q.base, p);
    assert_int_equal(q.size, 100);
    assert_int_equal(q.offset, k);
    assert_int_equal(q.mode, ocl_test_mode(dev));
    if (q.mode == ADR_OPENCL_ADDRESS_BUFFER) {
      assert_non_null(q.buffer);
      size_t mem_size = 0;
      ASSERT_CL(clGetMemObjectInfo(q.buffer, CL_MEM_SIZE, sizeof(mem_size), &mem_size, NULL));
      assert_true(q.buffer_offset + (100 - k) <= mem_size);
    } else {
      assert_null(q.buffer);
    }
  }
  ASSERT_ADR_ERR(
      adr_opencl_buffer(
          dev, (char*)p + 100,
          &(struct adr_opencl_buffer){.struct_size = sizeof(struct adr_opencl_buffer)}, OCL_ERR),
      ENOENT, "not inside an allocation of opencl:0");
  /* The neighbours answer with their own bounds. */
  struct adr_opencl_buffer q = {.struct_size = sizeof(q)};
  ASSERT_ADR(adr_opencl_buffer(dev, (char*)after + 299, &q, OCL_ERR));
  assert_ptr_equal(q.base, after);
  assert_int_equal(q.size, 300);
  assert_int_equal(q.offset, 299);

  unsigned char in[100], out[100], back[100];
  for (int i = 0; i < 100; i++) in[i] = (unsigned char)(i * 7 + 3);
  ASSERT_ADR(adr_memset(dev, before, 0xee, 256, NULL, OCL_ERR));
  ASSERT_ADR(adr_memset(dev, after, 0xdd, 300, NULL, OCL_ERR));
  ASSERT_ADR(adr_copy(dev, p, cpu, in, 100, NULL, OCL_ERR));
  memset(out, 0, sizeof(out));
  native_read(p, 100, out);
  assert_memory_equal(in, out, 100);
  /* From the middle: byte 37 onwards. */
  memset(out, 0, sizeof(out));
  native_read((char*)p + 37, 63, out);
  assert_memory_equal(in + 37, out, 63);
  /* The application writes into the middle; adr reads it back. */
  unsigned char patch[20];
  for (int i = 0; i < 20; i++) patch[i] = (unsigned char)(0x80 + i);
  native_write((char*)p + 50, patch, 20);
  ASSERT_ADR(adr_copy(cpu, back, dev, p, 100, NULL, OCL_ERR));
  assert_memory_equal(back, in, 50);
  assert_memory_equal(back + 50, patch, 20);
  assert_memory_equal(back + 70, in + 70, 30);
  /* The neighbours were not touched. */
  unsigned char nb[300];
  ASSERT_ADR(adr_copy(cpu, nb, dev, after, 300, NULL, OCL_ERR));
  for (int i = 0; i < 300; i++) assert_int_equal(nb[i], 0xdd);
  ASSERT_ADR(adr_copy(cpu, nb, dev, before, 256, NULL, OCL_ERR));
  for (int i = 0; i < 256; i++) assert_int_equal(nb[i], 0xee);

  ASSERT_ADR(adr_free(dev, p, 100, NULL, OCL_ERR));
  ASSERT_ADR_ERR(adr_opencl_buffer(dev, p, &q, OCL_ERR), ENOENT, "not inside an allocation");
  ASSERT_ADR(adr_free(dev, before, 256, NULL, OCL_ERR));
  ASSERT_ADR(adr_free(dev, after, 300, NULL, OCL_ERR));
}

/* The in/out native kind answers as the typed function does. */
static void test_native_kind_same_answer(void** state) {
  (void)state;
  void* p = NULL;
  ASSERT_ADR(adr_alloc(dev, 100, 0, NULL, &p, OCL_ERR));
  struct adr_opencl_buffer a = {.struct_size = sizeof(a)};
  ASSERT_ADR(adr_opencl_buffer(dev, (char*)p + 9, &a, OCL_ERR));
  struct adr_opencl_buffer b = {.struct_size = sizeof(b), .address = (char*)p + 9};
  void* inout = &b;
  ASSERT_ADR(adr_device_native(dev, ADR_OPENCL_NATIVE_BUFFER, &inout, OCL_ERR));
  assert_ptr_equal(inout, &b);
  assert_memory_equal(&a, &b, sizeof(a));
  b.address = (char*)p + 100;
  ASSERT_ADR_ERR(adr_device_native(dev, ADR_OPENCL_NATIVE_BUFFER, &inout, OCL_ERR), ENOENT,
                 "not inside an allocation");
  inout = NULL;
  ASSERT_ADR_ERR(adr_device_native(dev, ADR_OPENCL_NATIVE_BUFFER, &inout, OCL_ERR), EINVAL,
                 "struct adr_opencl_buffer");
  ASSERT_ADR(adr_free(dev, p, 100, NULL, OCL_ERR));
}

static void test_bad_input(void** state) {
  (void)state;
  void* p = NULL;
  ASSERT_ADR(adr_alloc(dev, 64, 0, NULL, &p, OCL_ERR));
  struct adr_opencl_buffer q = {.struct_size = sizeof(q)};
  ASSERT_ADR_ERR(adr_opencl_buffer(NULL, p, &q, OCL_ERR), EINVAL, "device is NULL");
  ASSERT_ADR_ERR(adr_opencl_buffer(dev, p, NULL, OCL_ERR), EINVAL, "out is NULL");
  ASSERT_ADR_ERR(adr_opencl_buffer(dev, NULL, &q, OCL_ERR), EINVAL, "ptr is NULL");
  ASSERT_ADR_ERR(adr_opencl_buffer(cpu, p, &q, OCL_ERR), EINVAL, "cpu:0 is not an OpenCL device");
  struct adr_opencl_buffer small = {.struct_size = 8};
  ASSERT_ADR_ERR(adr_opencl_buffer(dev, p, &small, OCL_ERR), EINVAL, "struct_size 8 is too small");
  /* Foreign pointers: host memory, a CPU allocation. */
  unsigned char host[16];
  ASSERT_ADR_ERR(adr_opencl_buffer(dev, host, &q, OCL_ERR), ENOENT, "not inside an allocation");
  void* c = NULL;
  ASSERT_ADR(adr_alloc(cpu, 64, 0, NULL, &c, OCL_ERR));
  ASSERT_ADR_ERR(adr_opencl_buffer(dev, c, &q, OCL_ERR), ENOENT, "not inside an allocation");
  ASSERT_ADR(adr_free(cpu, c, 64, NULL, OCL_ERR));
  /* A message and status, never a crash, for the error argument NULL. */
  assert_int_equal(adr_opencl_buffer(dev, NULL, &q, NULL), EINVAL);
  ASSERT_ADR(adr_free(dev, p, 64, NULL, OCL_ERR));
}

/* Allocations of several threads while others look addresses up: the
 * first look-up on a host-accessible device builds the core's index from
 * the allocations made before, racing with new ones. */
enum { THREADS = 4, ROUNDS = 300 };

static void* churn(void* arg) {
  (void)arg;
  void* mine[8] = {0};
  size_t sizes[8];
  for (int r = 0; r < ROUNDS; r++) {
    int i = r % 8;
    if (mine[i] != NULL) {
      struct adr_opencl_buffer q = {.struct_size = sizeof(q)};
      size_t k = (size_t)r % sizes[i];
      if (adr_opencl_buffer(dev, (char*)mine[i] + k, &q, NULL) != 0 || q.base != mine[i] ||
          q.size != sizes[i] || q.offset != k)
        return (void*)1;
      if (adr_free(dev, mine[i], sizes[i], NULL, NULL) != 0) return (void*)1;
    }
    sizes[i] = 1 + (size_t)(r * 37 % 5000);
    if (adr_alloc(dev, sizes[i], 0, NULL, &mine[i], NULL) != 0) return (void*)1;
  }
  for (int i = 0; i < 8; i++)
    if (mine[i] != NULL && adr_free(dev, mine[i], sizes[i], NULL, NULL) != 0) return (void*)1;
  return NULL;
}

static void test_threads(void** state) {
  (void)state;
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) assert_int_equal(pthread_create(&t[i], NULL, churn, NULL), 0);
  for (int i = 0; i < THREADS; i++) {
    void* rv = NULL;
    pthread_join(t[i], &rv);
    assert_null(rv);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      /* First: the threads race the index's build on svm-fine. */
      cmocka_unit_test(test_threads),
      cmocka_unit_test(test_exact_bounds),
      cmocka_unit_test(test_native_kind_same_answer),
      cmocka_unit_test(test_bad_input),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
