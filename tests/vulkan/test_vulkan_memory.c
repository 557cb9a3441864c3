/* SPDX-License-Identifier: Apache-2.0
 *
 * The Vulkan backend's own allocator and copy paths, with the core's
 * caching pool out of the way (ADR_ALLOC=backend) and small blocks
 * (ADR_VULKAN_BLOCK_SIZE=1M) so that block boundaries, dedicated blocks
 * and block release are exercised:
 *  - 20,000 live small allocations (drivers often cap VkDeviceMemory
 *    objects at 4096): distinct, aligned, non-overlapping, each holding its
 *    own stamp, found by pointer query at an interior address, in far
 *    fewer blocks than allocations, all released when freed;
 *  - large (dedicated) allocations and big alignments;
 *  - memset at every head/tail alignment against a host model (this is
 *    vkCmdFillBuffer + the edge copies under ADR_VULKAN_COPY=staging);
 *  - overlapping device-to-device copies (memmove semantics);
 *  - a copy larger than the staging ring, at odd offsets;
 *  - errors: interior and foreign pointers, ranges past the allocation.
 * Registered with the mapped path and with ADR_VULKAN_COPY=staging.
 */
#include "vk_test.h"

static struct vkt T;

enum { LIVE = 20000 };

struct rec {
  uint8_t* p;
  size_t size;
  size_t align;
};

static int rec_cmp(const void* a, const void* b) {
  const struct rec* x = a;
  const struct rec* y = b;
  return x->p < y->p ? -1 : x->p > y->p;
}

static void test_twenty_thousand_live_allocations(void** state) {
  (void)state;
  struct rec* r = calloc(LIVE, sizeof(*r));
  assert_non_null(r);
  long long blocks_before = vkt_property_int(T.dev, "memory_blocks");
  for (size_t i = 0; i < LIVE; i++) {
    static const size_t sizes[] = {1, 64, 100, 256, 1000, 2048, 4096, 24};
    static const size_t aligns[] = {0, 64, 128, 0, 256, 0, 4096, 0};
    r[i].size = sizes[i % 8];
    r[i].align = aligns[(i / 8) % 8];
    struct adr_error err;
    void* p = NULL;
    int st = adr_alloc(T.dev, r[i].size, r[i].align, NULL, &p, &err);
    if (st != 0) fail_msg("allocation %zu of %zu bytes: %s", i, r[i].size, err.message);
    r[i].p = p;
    size_t a = r[i].align ? r[i].align : 64;
    assert_int_equal((uintptr_t)p % a, 0);
  }
  assert_true(vkt_property_int(T.dev, "live_allocations") >= LIVE);
  long long blocks = vkt_property_int(T.dev, "memory_blocks");
  /* 1 MiB blocks hold ~20 MiB of small allocations: tens of blocks, not
   * thousands of VkDeviceMemory objects. */
  assert_true(blocks - blocks_before <= 64);

  /* Stamp each allocation (its first up to 8 bytes) with uploads queued on
   * a stream, then read them back: all of them on the mapped path, every
   * 7th (and the last) through staging, where each read is a submission
   * and a wait. */
  const char* path = getenv("VKTEST_COPY_PATH");
  size_t stride = path != NULL && strcmp(path, "staging") == 0 ? 7 : 1;
  struct adr_stream* s = NULL;
  assert_int_equal(adr_stream_create(T.dev, &s, NULL), 0);
  uint64_t* stamps = malloc(LIVE * sizeof(*stamps));
  assert_non_null(stamps);
  for (size_t i = 0; i < LIVE; i++) {
    stamps[i] = 0xA5A5000000000000ull + i;
    struct adr_error err;
    if (adr_copy(T.dev, r[i].p, T.cpu, &stamps[i], r[i].size < 8 ? r[i].size : 8, s, &err) != 0)
      fail_msg("stamp %zu: %s", i, err.message);
  }
  assert_int_equal(adr_stream_synchronize(s, NULL), 0);
  assert_int_equal(adr_stream_destroy(s, NULL), 0);
  for (size_t i = 0; i < LIVE; i++) {
    if (i % stride != 0 && i != LIVE - 1) continue;
    uint64_t got = 0;
    size_t n = r[i].size < 8 ? r[i].size : 8;
    vkt_download(&T, &got, r[i].p, n);
    assert_memory_equal(&got, &stamps[i], n);
  }
  free(stamps);

  /* Pointer query at an interior address finds the device. */
  for (size_t i = 2; i < LIVE; i += 997) {
    struct adr_device* owner = NULL;
    assert_int_equal(adr_pointer_query(r[i].p + r[i].size - 1, &owner, NULL), 0);
    assert_ptr_equal(owner, T.dev);
  }

  /* No two allocations overlap. */
  struct rec* sorted = malloc(LIVE * sizeof(*sorted));
  assert_non_null(sorted);
  memcpy(sorted, r, LIVE * sizeof(*sorted));
  qsort(sorted, LIVE, sizeof(*sorted), rec_cmp);
  for (size_t i = 1; i < LIVE; i++)
    assert_true(sorted[i - 1].p + sorted[i - 1].size <= sorted[i].p);
  free(sorted);

  /* Free in a scrambled order (a fixed permutation). */
  for (size_t k = 0; k < LIVE; k++) {
    size_t i = (k * 7919) % LIVE;
    struct adr_error err;
    if (adr_free(T.dev, r[i].p, r[i].size, NULL, &err) != 0) fail_msg("free: %s", err.message);
  }
  assert_int_equal(vkt_property_int(T.dev, "live_allocations"), 0);
  /* Empty blocks go back to the driver (one may stay cached). */
  assert_true(vkt_property_int(T.dev, "memory_blocks") <= 1);
  free(r);
  vkt_assert_no_validation_messages(&T);
}

static void test_large_and_aligned(void** state) {
  (void)state;
  const size_t big = (3u << 20) + 5; /* > half a 1 MiB block: dedicated */
  void* p = NULL;
  assert_int_equal(adr_alloc(T.dev, big, 65536, NULL, &p, NULL), 0);
  assert_int_equal((uintptr_t)p % 65536, 0);
  uint8_t* host = malloc(big);
  uint8_t* back = malloc(big);
  assert_non_null(host);
  assert_non_null(back);
  for (size_t i = 0; i < big; i++) host[i] = (uint8_t)(i * 31 + 7);
  vkt_upload(&T, p, host, big);
  vkt_download(&T, back, p, big);
  assert_memory_equal(back, host, big);
  /* The last bytes, through an interior address. */
  memset(back, 0, 16);
  vkt_download(&T, back, (uint8_t*)p + big - 16, 16);
  assert_memory_equal(back, host + big - 16, 16);
  assert_int_equal(adr_free(T.dev, p, big, NULL, NULL), 0);
  free(host);
  free(back);
}

static void test_memset_edges(void** state) {
  (void)state;
  enum { SIZE = 64 };
  void* p = NULL;
  assert_int_equal(adr_alloc(T.dev, SIZE, 0, NULL, &p, NULL), 0);
  uint8_t model[SIZE], got[SIZE];
  struct adr_stream* s = NULL;
  assert_int_equal(adr_stream_create(T.dev, &s, NULL), 0);
  for (size_t off = 0; off < 8; off++) {
    for (size_t len = 1; len <= 13; len++) {
      memset(model, 0x33, SIZE);
      vkt_upload(&T, p, model, SIZE);
      int value = (int)(0x100 + off * 16 + len); /* only the low byte counts */
      memset(model + off, (uint8_t)value, len);
      struct adr_error err;
      int st = adr_memset(T.dev, (uint8_t*)p + off, value, len, (len & 1) ? s : NULL, &err);
      if (st != 0) fail_msg("memset(+%zu, %zu): %s", off, len, err.message);
      assert_int_equal(adr_stream_synchronize(s, NULL), 0);
      vkt_download(&T, got, p, SIZE);
      if (memcmp(got, model, SIZE) != 0) fail_msg("memset(+%zu, %zu) wrong bytes", off, len);
    }
  }
  assert_int_equal(adr_stream_destroy(s, NULL), 0);
  assert_int_equal(adr_free(T.dev, p, SIZE, NULL, NULL), 0);
  vkt_assert_no_validation_messages(&T);
}

static void test_overlapping_device_copy(void** state) {
  (void)state;
  enum { SIZE = 100000 };
  void* p = NULL;
  assert_int_equal(adr_alloc(T.dev, SIZE, 0, NULL, &p, NULL), 0);
  uint8_t* model = malloc(SIZE);
  uint8_t* got = malloc(SIZE);
  assert_non_null(model);
  assert_non_null(got);
  static const struct {
    size_t dst, src, n;
  } cases[] = {{0, 1000, 50000}, {1000, 0, 50000}, {3, 5, 70000}, {4096, 4000, 9}};
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
    for (size_t i = 0; i < SIZE; i++) model[i] = (uint8_t)(i * 13 + c);
    vkt_upload(&T, p, model, SIZE);
    memmove(model + cases[c].dst, model + cases[c].src, cases[c].n);
    assert_int_equal(adr_copy(T.dev, (uint8_t*)p + cases[c].dst, T.dev, (uint8_t*)p + cases[c].src,
                              cases[c].n, NULL, NULL),
                     0);
    vkt_download(&T, got, p, SIZE);
    if (memcmp(got, model, SIZE) != 0) fail_msg("overlapping copy case %zu", c);
  }
  assert_int_equal(adr_free(T.dev, p, SIZE, NULL, NULL), 0);
  free(model);
  free(got);
}

static void test_copy_larger_than_staging_ring(void** state) {
  (void)state;
  const size_t size = (40u << 20) + 3; /* the ring is 4 x 8 MiB */
  void* p = NULL;
  assert_int_equal(adr_alloc(T.dev, size + 16, 0, NULL, &p, NULL), 0);
  uint8_t* host = malloc(size);
  uint8_t* back = malloc(size);
  assert_non_null(host);
  assert_non_null(back);
  for (size_t i = 0; i < size; i++) host[i] = (uint8_t)((i >> 12) ^ i);
  struct adr_stream* s = NULL;
  assert_int_equal(adr_stream_create(T.dev, &s, NULL), 0);
  /* Queue a memset first so the upload finds the stream busy (staged,
   * asynchronous, in order after the memset) on either path. */
  assert_int_equal(adr_memset(T.dev, p, 0, size + 16, s, NULL), 0);
  assert_int_equal(adr_copy(T.dev, (uint8_t*)p + 5, T.cpu, host, size, s, NULL), 0);
  assert_int_equal(adr_copy(T.cpu, back, T.dev, (uint8_t*)p + 5, size, s, NULL), 0);
  assert_int_equal(adr_stream_synchronize(s, NULL), 0);
  assert_memory_equal(back, host, size);
  uint8_t edge[5];
  vkt_download(&T, edge, p, 5);
  for (int i = 0; i < 5; i++) assert_int_equal(edge[i], 0);
  assert_int_equal(adr_stream_destroy(s, NULL), 0);
  assert_int_equal(adr_free(T.dev, p, size + 16, NULL, NULL), 0);
  free(host);
  free(back);
  vkt_assert_no_validation_messages(&T);
}

static void test_bad_addresses(void** state) {
  (void)state;
  void* p = NULL;
  assert_int_equal(adr_alloc(T.dev, 4096, 0, NULL, &p, NULL), 0);
  uint8_t host[64] = {0};
  struct adr_error err = {{0}};
  /* A range running past the end of the allocation. */
  assert_int_equal(adr_copy(T.dev, (uint8_t*)p + 4090, T.cpu, host, 64, NULL, &err), EINVAL);
  assert_non_null(strstr(err.message, "[adr_copy][vulkan]"));
  assert_non_null(strstr(err.message, "past the end"));
  /* The same with host memory (a NULL device) on the other side, after a
   * copy inside the allocation that this thread's range cache remembers:
   * the remembered range must not let the longer copy through. */
  assert_int_equal(adr_copy(T.dev, (uint8_t*)p + 4000, NULL, host, 64, NULL, NULL), 0);
  assert_int_equal(adr_copy(NULL, host, T.dev, (uint8_t*)p + 4000, 64, NULL, NULL), 0);
  memset(&err, 0, sizeof(err));
  assert_int_equal(adr_copy(T.dev, (uint8_t*)p + 4090, NULL, host, 64, NULL, &err), EINVAL);
  assert_non_null(strstr(err.message, "past the end"));
  memset(&err, 0, sizeof(err));
  assert_int_equal(adr_copy(NULL, host, T.dev, (uint8_t*)p + 4033, 64, NULL, &err), EINVAL);
  assert_non_null(strstr(err.message, "past the end"));
  /* An address no allocation contains. */
  memset(&err, 0, sizeof(err));
  assert_int_equal(adr_copy(T.cpu, host, T.dev, (void*)(uintptr_t)0x10, 8, NULL, &err), EINVAL);
  assert_non_null(strstr(err.message, "[adr_copy][vulkan]"));
  memset(&err, 0, sizeof(err));
  assert_int_equal(adr_memset(T.dev, (uint8_t*)p + 4000, 1, 100, NULL, &err), EINVAL);
  assert_non_null(strstr(err.message, "[adr_memset][vulkan]"));
  /* Freeing an interior address fails and leaves the allocation usable. */
  assert_int_not_equal(adr_free(T.dev, (uint8_t*)p + 64, 4032, NULL, &err), 0);
  vkt_upload(&T, p, "abc", 3);
  char back[3];
  vkt_download(&T, back, p, 3);
  assert_memory_equal(back, "abc", 3);
  assert_int_equal(adr_free(T.dev, p, 4096, NULL, NULL), 0);
  struct adr_device* owner = NULL;
  assert_int_equal(adr_pointer_query(p, &owner, NULL), ENOENT);
  /* Freed after copies that were answered from the caches: a copy to it
   * now fails instead of writing into memory the pool may hand out. */
  memset(&err, 0, sizeof(err));
  assert_int_not_equal(adr_copy(T.dev, p, NULL, host, 8, NULL, &err), 0);
  assert_non_null(strstr(err.message, "[adr_copy][vulkan]"));
}

int main(void) {
  vkt_require_or_skip(&T);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_twenty_thousand_live_allocations),
      cmocka_unit_test(test_large_and_aligned),
      cmocka_unit_test(test_memset_edges),
      cmocka_unit_test(test_overlapping_device_copy),
      cmocka_unit_test(test_copy_larger_than_staging_ring),
      cmocka_unit_test(test_bad_addresses),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
