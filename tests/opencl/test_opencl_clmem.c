/* SPDX-License-Identifier: Apache-2.0
 *
 * The cl_mem address path, as used for a device without SVM (forced on
 * PoCL with ADR_OPENCL_MEMORY=buffer): addresses come from private
 * PROT_NONE reservations (unique, non-overlapping, never real host memory,
 * aligned as asked), map back to (cl_mem, offset) anywhere inside an
 * allocation, and that cl_mem holds what adr wrote. Also the checks every
 * mode does on device addresses: outside any allocation, running past its
 * end, or freed.
 */
#include "ocl_test.h"

static struct adr_device* dev;
static struct adr_device* cpu;

/* The permissions /proc/self/maps lists for the mapping holding `addr`
 * ("---p", "rw-p" ...), or "" when no mapping holds it. */
static void mapping_perms(const void* addr, char out[5]) {
  out[0] = '\0';
  FILE* f = fopen("/proc/self/maps", "r");
  assert_non_null(f);
  char line[512];
  while (fgets(line, sizeof(line), f) != NULL) {
    unsigned long lo, hi;
    char perms[5];
    if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) == 3 && (uintptr_t)addr >= lo &&
        (uintptr_t)addr < hi) {
      memcpy(out, perms, 5);
      break;
    }
  }
  fclose(f);
}

static void test_mode_and_caps(void** state) {
  (void)state;
  assert_int_equal(ocl_test_mode(dev), ADR_OPENCL_ADDRESS_BUFFER);
  struct adr_device_info info = {.struct_size = sizeof(info)};
  ASSERT_ADR(adr_device_info_get(dev, &info, OCL_ERR));
  assert_false(info.caps & ADR_CAP_DEVICE_ADDRESSES);
  assert_false(info.caps & ADR_CAP_HOST_ACCESSIBLE);
  assert_true(info.caps & ADR_CAP_ASYNC_STREAMS);
}

static void test_addresses_are_reserved_unique_and_aligned(void** state) {
  (void)state;
  enum { COUNT = 12 };
  static const size_t sizes[COUNT] = {1, 64, 100, 4095, 4096, 4097, 65536, 1000000, 3, 128, 8192, 77};
  static const size_t aligns[COUNT] = {0, 64, 128, 4096, 65536, 0, 1 << 20, 256, 0, 8192, 64, 2048};
  void* p[COUNT];
  for (size_t i = 0; i < COUNT; i++) {
    ASSERT_ADR(adr_alloc(dev, sizes[i], aligns[i], NULL, &p[i], OCL_ERR));
    size_t want = aligns[i] > 64 ? aligns[i] : 64;
    assert_int_equal((uintptr_t)p[i] % want, 0);
    /* Inaccessible reserved memory at both ends of the allocation. */
    char perms[5];
    mapping_perms(p[i], perms);
    assert_string_equal(perms, "---p");
    mapping_perms((char*)p[i] + sizes[i] - 1, perms);
    assert_string_equal(perms, "---p");
  }
  for (size_t i = 0; i < COUNT; i++)
    for (size_t j = 0; j < COUNT; j++)
      if (i != j)
        assert_true((uintptr_t)p[i] + sizes[i] <= (uintptr_t)p[j] ||
                    (uintptr_t)p[j] + sizes[j] <= (uintptr_t)p[i]);
  for (size_t i = 0; i < COUNT; i++) ASSERT_ADR(adr_free(dev, p[i], sizes[i], NULL, OCL_ERR));
}

static void test_mid_allocation_maps_to_cl_mem_offset(void** state) {
  (void)state;
  enum { SIZE = 256 * 1024, OFF = 12345, N = 40000 };
  static unsigned char in[N], out[N];
  for (size_t i = 0; i < N; i++) in[i] = (unsigned char)(i * 17 + 9);
  void* p = NULL;
  ASSERT_ADR(adr_alloc(dev, SIZE, 0, NULL, &p, OCL_ERR));
  ASSERT_ADR(adr_memset(dev, p, 0x11, SIZE, NULL, OCL_ERR));
  ASSERT_ADR(adr_copy(dev, (char*)p + OFF, cpu, in, N, NULL, OCL_ERR));

  struct adr_opencl_buffer q = {.struct_size = sizeof(q), .address = (char*)p + OFF + 7};
  void* inout = &q;
  ASSERT_ADR(adr_device_native(dev, ADR_OPENCL_NATIVE_BUFFER, &inout, OCL_ERR));
  assert_int_equal(q.mode, ADR_OPENCL_ADDRESS_BUFFER);
  assert_ptr_equal(q.base, p);
  assert_int_equal(q.size, SIZE);
  assert_int_equal(q.offset, OFF + 7);
  assert_non_null(q.buffer);
  size_t mem_size = 0;
  ASSERT_CL(clGetMemObjectInfo(q.buffer, CL_MEM_SIZE, sizeof(mem_size), &mem_size, NULL));
  assert_true(mem_size >= SIZE);

  /* Raw OpenCL sees adr's bytes at that cl_mem offset, and the fill around. */
  cl_command_queue queue = ocl_test_native(dev, ADR_NATIVE_QUEUE);
  memset(out, 0, sizeof(out));
  ASSERT_CL(clEnqueueReadBuffer(queue, q.buffer, CL_TRUE, OFF, N, out, 0, NULL, NULL));
  assert_memory_equal(in, out, N);
  unsigned char edge[2] = {0, 0};
  ASSERT_CL(clEnqueueReadBuffer(queue, q.buffer, CL_TRUE, OFF - 1, 1, &edge[0], 0, NULL, NULL));
  ASSERT_CL(clEnqueueReadBuffer(queue, q.buffer, CL_TRUE, OFF + N, 1, &edge[1], 0, NULL, NULL));
  assert_int_equal(edge[0], 0x11);
  assert_int_equal(edge[1], 0x11);

  /* Device-to-device between two mid-allocation addresses of one cl_mem. */
  ASSERT_ADR(adr_copy(dev, (char*)p + 200000, dev, (char*)p + OFF, 1000, NULL, OCL_ERR));
  ASSERT_ADR(adr_copy(cpu, out, dev, (char*)p + 200000, 1000, NULL, OCL_ERR));
  assert_memory_equal(in, out, 1000);

  struct adr_device* owner = NULL;
  ASSERT_ADR(adr_pointer_query((char*)p + SIZE - 1, &owner, OCL_ERR));
  assert_ptr_equal(owner, dev);
  ASSERT_ADR(adr_free(dev, p, SIZE, NULL, OCL_ERR));
  q.address = p;
  inout = &q;
  ASSERT_ADR_ERR(adr_device_native(dev, ADR_OPENCL_NATIVE_BUFFER, &inout, OCL_ERR), ENOENT,
                 "not inside an allocation");
}

static void test_bad_device_addresses(void** state) {
  (void)state;
  unsigned char h[64] = {0};
  void* p = NULL;
  ASSERT_ADR(adr_alloc(dev, 1000, 0, NULL, &p, OCL_ERR));
  /* One past the end, and a range that runs past it. */
  ASSERT_ADR_ERR(adr_copy(dev, (char*)p + 1000 + 4096 * 16, cpu, h, 1, NULL, OCL_ERR), EINVAL,
                 "not inside an allocation");
  ASSERT_ADR_ERR(adr_copy(dev, (char*)p + 990, cpu, h, 20, NULL, OCL_ERR), EINVAL,
                 "runs past the end");
  ASSERT_ADR_ERR(adr_copy(cpu, h, dev, (char*)p + 999, 2, NULL, OCL_ERR), EINVAL,
                 "runs past the end");
  ASSERT_ADR_ERR(adr_memset(dev, (char*)p + 500, 0, 501, NULL, OCL_ERR), EINVAL,
                 "runs past the end");
  /* A host address is no device address. */
  ASSERT_ADR_ERR(adr_copy(dev, h, cpu, h, 1, NULL, OCL_ERR), EINVAL, "");
  struct adr_device* owner = NULL;
  ASSERT_ADR_ERR(adr_pointer_query(h, &owner, OCL_ERR), ENOENT, "");
  ASSERT_ADR(adr_free(dev, p, 1000, NULL, OCL_ERR));
  ASSERT_ADR_ERR(adr_copy(dev, p, cpu, h, 1, NULL, OCL_ERR), EINVAL, "");
}

/* Stream-ordered work on the cl_mem path: a fill, copies and a free queued
 * on one stream, and a device-side wait across two streams. */
static void test_stream_ordering(void** state) {
  (void)state;
  enum { N = 1 << 20 };
  unsigned char* in = malloc(N);
  unsigned char* out = malloc(N);
  assert_non_null(in);
  assert_non_null(out);
  for (size_t i = 0; i < N; i++) in[i] = (unsigned char)(i * 5);
  struct adr_stream* s1 = NULL;
  struct adr_stream* s2 = NULL;
  ASSERT_ADR(adr_stream_create(dev, &s1, OCL_ERR));
  ASSERT_ADR(adr_stream_create(dev, &s2, OCL_ERR));
  void* a = NULL;
  void* b = NULL;
  ASSERT_ADR(adr_alloc(dev, N, 0, s1, &a, OCL_ERR));
  ASSERT_ADR(adr_alloc(dev, N, 0, s2, &b, OCL_ERR));
  ASSERT_ADR(adr_memset(dev, a, 0, N, s1, OCL_ERR));
  ASSERT_ADR(adr_copy(dev, a, cpu, in, N, s1, OCL_ERR));
  struct adr_event* ev = NULL;
  ASSERT_ADR(adr_event_create(dev, &ev, OCL_ERR));
  ASSERT_ADR(adr_event_record(ev, s1, OCL_ERR));
  ASSERT_ADR(adr_stream_wait_event(s2, ev, OCL_ERR));
  ASSERT_ADR(adr_copy(dev, b, dev, a, N, s2, OCL_ERR));
  ASSERT_ADR(adr_free(dev, a, N, s2, OCL_ERR));
  ASSERT_ADR(adr_copy(cpu, out, dev, b, N, s2, OCL_ERR));
  ASSERT_ADR(adr_stream_synchronize(s2, OCL_ERR));
  assert_memory_equal(in, out, N);
  ASSERT_ADR(adr_free(dev, b, N, s2, OCL_ERR));
  ASSERT_ADR(adr_stream_synchronize(s2, OCL_ERR));
  ASSERT_ADR(adr_event_destroy(ev, OCL_ERR));
  ASSERT_ADR(adr_stream_destroy(s1, OCL_ERR));
  ASSERT_ADR(adr_stream_destroy(s2, OCL_ERR));
  free(in);
  free(out);
}

int main(void) {
  ocl_test_devices(&dev, &cpu);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mode_and_caps),
      cmocka_unit_test(test_addresses_are_reserved_unique_and_aligned),
      cmocka_unit_test(test_mid_allocation_maps_to_cl_mem_offset),
      cmocka_unit_test(test_bad_device_addresses),
      cmocka_unit_test(test_stream_ordering),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
