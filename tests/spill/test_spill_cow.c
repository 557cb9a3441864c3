/* SPDX-License-Identifier: Apache-2.0
 *
 * Copy-on-write on spillable buffers (adr/spill.h, docs/spill.md,
 * "Copy-on-write") on the device ADR_DEVICE names, in the spill runs of
 * tests/spill/meson.build: slices share their owner for reading, a write
 * acquire or an expose of a shared slice makes its private copy on the
 * device, a view of an exposed owner is a physical copy, and all of it
 * survives spills with byte-exact checks. On host-memory devices (cpu)
 * spilling is a no-op but copy-on-write works the same.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "adr/adr.h"
#include "adr/memory.h"
#include "adr/spill.h"
#include "spill_test.h"

#define KiB ((size_t)1 << 10)

static struct adr_device* dev;
static bool host_memory;

static struct adr_spill_slice* salloc(struct adr_spill_manager* m, size_t size) {
  struct adr_spill_slice* s = NULL;
  struct adr_error e;
  if (adr_spill_slice_alloc(m, size, &s, &e) != 0) fail_msg("slice alloc: %s", e.message);
  return s;
}

static struct adr_spill_slice* view(struct adr_spill_slice* s, size_t off, size_t n) {
  struct adr_spill_slice* v = NULL;
  struct adr_error e;
  if (adr_spill_slice_view(s, off, n, NULL, &v, &e) != 0) fail_msg("view: %s", e.message);
  return v;
}

static void* acq(struct adr_spill_slice* s, int mode, struct adr_stream* stream) {
  void* p = NULL;
  struct adr_error e;
  if (adr_spill_slice_acquire(s, mode, stream, &p, &e) != 0) fail_msg("acquire: %s", e.message);
  return p;
}

static void rel(struct adr_spill_slice* s, struct adr_stream* stream) {
  struct adr_error e;
  if (adr_spill_slice_release(s, stream, &e) != 0) fail_msg("release: %s", e.message);
}

/* The expected bytes of a slice: `n` bytes of the pattern of `seed`,
 * starting `off` bytes into it. */
static void expect(struct adr_spill_slice* s, uint32_t seed, size_t off) {
  size_t n = adr_spill_slice_size(s);
  uint8_t* want = malloc(off + n);
  uint8_t* got = malloc(n);
  assert_non_null(want);
  assert_non_null(got);
  spill_test_fill(want, off + n, seed);
  void* d = acq(s, ADR_SPILL_ACCESS_READ, NULL);
  assert_int_equal(adr_copy(NULL, got, dev, d, n, NULL, NULL), 0);
  rel(s, NULL);
  if (memcmp(got, want + off, n) != 0) {
    size_t i = 0;
    while (got[i] == want[off + i]) i++;
    fail_msg("byte %zu of %zu: 0x%02x, expected 0x%02x (seed %u at %zu)", i, n, got[i],
             want[off + i], seed, off);
  }
  free(want);
  free(got);
}

static void write_seed(struct adr_spill_slice* s, uint32_t seed, struct adr_stream* stream) {
  size_t n = adr_spill_slice_size(s);
  uint8_t* h = malloc(n);
  assert_non_null(h);
  spill_test_fill(h, n, seed);
  void* d = acq(s, ADR_SPILL_ACCESS_WRITE, stream);
  assert_int_equal(adr_copy(dev, d, NULL, h, n, stream, NULL), 0);
  if (stream != NULL) assert_int_equal(adr_stream_synchronize(stream, NULL), 0);
  rel(s, stream);
  free(h);
}

static void spill_all(struct adr_spill_manager* m) {
  struct adr_error e;
  if (adr_spill_manager_spill(m, UINT64_MAX, NULL, &e) != 0) fail_msg("spill: %s", e.message);
}

/* cuDF's example: s2 = s1.copy(deep=False); s3 = s2.copy(deep=False);
 * writing s2 copies s2 only; writing s1 then copies s1 (s3 still shares). */
static void test_shallow_copies(void** state) {
  (void)state;
  const size_t n = 256 * KiB;
  struct adr_spill_manager* m = spill_test_manager(dev, 0, 0, 1);
  struct adr_spill_slice* s1 = salloc(m, n);
  write_seed(s1, 11, NULL);
  assert_int_equal(adr_spill_slice_shared(s1), 0);
  struct adr_spill_slice* s2 = view(s1, 0, n);
  struct adr_spill_slice* s3 = view(s2, 0, n);
  assert_int_equal(adr_spill_slice_shared(s1), 1);
  assert_ptr_equal(adr_spill_slice_buffer(s2), adr_spill_slice_buffer(s1));
  assert_ptr_equal(adr_spill_slice_buffer(s3), adr_spill_slice_buffer(s1));
  /* Read acquires share: one address. */
  void* p1 = acq(s1, ADR_SPILL_ACCESS_READ, NULL);
  void* p2 = acq(s2, ADR_SPILL_ACCESS_READ, NULL);
  void* p3 = acq(s3, ADR_SPILL_ACCESS_READ, NULL);
  assert_ptr_equal(p1, p2);
  assert_ptr_equal(p1, p3);
  /* A held shared slice cannot be written: its holder reads the owner. */
  void* w = NULL;
  struct adr_error e;
  assert_int_equal(adr_spill_slice_acquire(s2, ADR_SPILL_ACCESS_WRITE, NULL, &w, &e), EBUSY);
  assert_non_null(strstr(e.message, "release it before writing"));
  rel(s1, NULL);
  rel(s2, NULL);
  rel(s3, NULL);
  assert_int_equal(spill_test_stats(m).cow_copies, 0);
  /* Freeing the owner directly is refused. */
  assert_int_equal(adr_spill_buffer_free(adr_spill_slice_buffer(s1), &e), EBUSY);
  assert_non_null(strstr(e.message, "owner of 3 slices"));

  /* s2 is written: it gets its own copy, the others keep theirs. */
  write_seed(s2, 22, NULL);
  assert_ptr_not_equal(adr_spill_slice_buffer(s2), adr_spill_slice_buffer(s1));
  assert_ptr_equal(adr_spill_slice_buffer(s3), adr_spill_slice_buffer(s1));
  assert_int_equal(adr_spill_slice_shared(s2), 0);
  assert_int_equal(adr_spill_slice_shared(s1), 1);
  expect(s1, 11, 0);
  expect(s2, 22, 0);
  expect(s3, 11, 0);
  struct adr_spill_stats st = spill_test_stats(m);
  assert_int_equal(st.cow_copies, 1);
  assert_int_equal(st.cow_bytes, n);
  assert_int_equal(st.buffers, 2);

  /* s1 is written: s3 shares with it, so s1 copies too. */
  write_seed(s1, 33, NULL);
  assert_ptr_not_equal(adr_spill_slice_buffer(s1), adr_spill_slice_buffer(s3));
  assert_int_equal(adr_spill_slice_shared(s3), 0);
  expect(s1, 33, 0);
  expect(s2, 22, 0);
  expect(s3, 11, 0);
  /* s3, now alone, writes in place. */
  void* before = acq(s3, ADR_SPILL_ACCESS_READ, NULL);
  rel(s3, NULL);
  struct adr_spill_buffer* owner3 = adr_spill_slice_buffer(s3);
  write_seed(s3, 44, NULL);
  assert_ptr_equal(adr_spill_slice_buffer(s3), owner3);
  assert_ptr_equal(acq(s3, ADR_SPILL_ACCESS_READ, NULL), before);
  rel(s3, NULL);
  st = spill_test_stats(m);
  assert_int_equal(st.cow_copies, 2);
  assert_int_equal(st.buffers, 3);

  /* Everything through a spill and back. */
  spill_all(m);
  if (!host_memory)
    assert_int_equal(adr_spill_buffer_location(adr_spill_slice_buffer(s1)),
                     ADR_SPILL_LOCATION_HOST);
  expect(s1, 33, 0);
  expect(s2, 22, 0);
  expect(s3, 44, 0);
  assert_int_equal(adr_spill_slice_free(s1, NULL), 0);
  assert_int_equal(adr_spill_slice_free(s2, NULL), 0);
  assert_int_equal(adr_spill_slice_free(s3, NULL), 0);
  assert_int_equal(adr_spill_manager_destroy(m, NULL), 0);
}

/* Views of ranges: the copy of a write covers the view's range only, and
 * is made while the owner is spilled too (it is unspilled for the copy). */
static void test_ranges_and_spill(void** state) {
  (void)state;
  const size_t n = 512 * KiB;
  struct adr_spill_manager* m = spill_test_manager(dev, 0, 0, 1);
  struct adr_spill_slice* whole = salloc(m, n);
  write_seed(whole, 5, NULL);
  struct adr_spill_slice* mid = view(whole, 100 * KiB + 3, 64 * KiB);
  struct adr_spill_slice* inner = view(mid, 1000, 4 * KiB + 1); /* a view of a view */
  void* pw = acq(whole, ADR_SPILL_ACCESS_READ, NULL);
  void* pm = acq(mid, ADR_SPILL_ACCESS_READ, NULL);
  void* pi = acq(inner, ADR_SPILL_ACCESS_READ, NULL);
  assert_ptr_equal((char*)pw + 100 * KiB + 3, pm);
  assert_ptr_equal((char*)pm + 1000, pi);
  rel(whole, NULL);
  rel(mid, NULL);
  rel(inner, NULL);
  expect(mid, 5, 100 * KiB + 3);
  expect(inner, 5, 100 * KiB + 3 + 1000);
  struct adr_error e;
  struct adr_spill_slice* bad = NULL;
  assert_int_equal(adr_spill_slice_view(mid, 64 * KiB - 10, 11, NULL, &bad, &e), EINVAL);
  assert_non_null(strstr(e.message, "outside the slice"));
  assert_int_equal(adr_spill_slice_view(mid, 0, 0, NULL, &bad, &e), EINVAL);
  assert_null(bad);

  /* Spilled, then written: the private copy comes from the unspilled owner. */
  spill_all(m);
  write_seed(mid, 6, NULL);
  assert_int_equal(adr_spill_buffer_size(adr_spill_slice_buffer(mid)), 64 * KiB);
  expect(mid, 6, 0);
  expect(whole, 5, 0);
  expect(inner, 5, 100 * KiB + 3 + 1000);
  struct adr_spill_stats st = spill_test_stats(m);
  assert_int_equal(st.cow_copies, 1);
  assert_int_equal(st.cow_bytes, 64 * KiB);
  if (!host_memory) assert_true(st.unspilled.bytes >= n);

  /* A write on a stream: the copy is queued on it, ready for its work. */
  struct adr_stream* s = NULL;
  assert_int_equal(adr_stream_create(dev, &s, NULL), 0);
  void* d = acq(inner, ADR_SPILL_ACCESS_WRITE, s);
  assert_int_equal(adr_memset(dev, d, 0x3c, 4 * KiB + 1, s, NULL), 0);
  rel(inner, s);
  spill_all(m); /* waits for the stream's work (the stream rule) */
  /* Where nothing spilled (cpu), reads are ordered by the application. */
  assert_int_equal(adr_stream_synchronize(s, NULL), 0);
  uint8_t* h = malloc(4 * KiB + 1);
  d = acq(inner, ADR_SPILL_ACCESS_READ, NULL);
  assert_int_equal(adr_copy(NULL, h, dev, d, 4 * KiB + 1, NULL, NULL), 0);
  rel(inner, NULL);
  for (size_t i = 0; i < 4 * KiB + 1; i++)
    if (h[i] != 0x3c) fail_msg("byte %zu: 0x%02x", i, h[i]);
  free(h);
  expect(whole, 5, 0);
  assert_int_equal(adr_stream_destroy(s, NULL), 0);
  assert_int_equal(adr_spill_slice_free(inner, NULL), 0);
  assert_int_equal(adr_spill_slice_free(whole, NULL), 0);
  assert_int_equal(adr_spill_slice_free(mid, NULL), 0);
  assert_int_equal(adr_spill_manager_destroy(m, NULL), 0);
}

/* Exposure: an exposed shared slice gets its private copy first; views of
 * an exposed owner are physical copies; deep copies always are. */
static void test_exposure(void** state) {
  (void)state;
  const size_t n = 128 * KiB;
  struct adr_spill_manager* m = spill_test_manager(dev, 0, 0, 2);
  struct adr_spill_slice* a = salloc(m, n);
  write_seed(a, 71, NULL);
  struct adr_spill_slice* b = view(a, 0, n);
  void* pa = acq(a, ADR_SPILL_ACCESS_READ, NULL);
  rel(a, NULL);
  void* px = NULL;
  struct adr_error e;
  if (adr_spill_slice_expose(b, "to a consumer", &px, &e) != 0) fail_msg("expose: %s", e.message);
  assert_ptr_not_equal(px, pa);
  assert_int_equal(adr_spill_slice_shared(a), 0);
  assert_int_equal(adr_spill_buffer_exposed(adr_spill_slice_buffer(b)), 1);
  assert_int_equal(adr_spill_buffer_exposed(adr_spill_slice_buffer(a)), 0);
  /* The consumer writes through the exposed pointer: a is untouched. */
  assert_int_equal(adr_memset(dev, px, 0xee, n, NULL, NULL), 0);
  expect(a, 71, 0);
  /* A view of the exposed slice is a copy, taken now. */
  struct adr_spill_slice* c = view(b, 16, n - 16);
  assert_ptr_not_equal(adr_spill_slice_buffer(c), adr_spill_slice_buffer(b));
  assert_int_equal(adr_spill_buffer_exposed(adr_spill_slice_buffer(c)), 0);
  assert_int_equal(spill_test_stats(m).cow_copies, 2);
  assert_int_equal(adr_memset(dev, px, 0x11, n, NULL, NULL), 0);
  uint8_t* h = malloc(n);
  void* d = acq(c, ADR_SPILL_ACCESS_READ, NULL);
  assert_int_equal(adr_copy(NULL, h, dev, d, n - 16, NULL, NULL), 0);
  rel(c, NULL);
  for (size_t i = 0; i < n - 16; i++)
    if (h[i] != 0xee) fail_msg("view of the exposed slice, byte %zu: 0x%02x", i, h[i]);
  /* A deep copy of a (not exposed) slice. */
  struct adr_spill_slice* dc = NULL;
  assert_int_equal(adr_spill_slice_copy(a, NULL, &dc, NULL), 0);
  assert_ptr_not_equal(adr_spill_slice_buffer(dc), adr_spill_slice_buffer(a));
  expect(dc, 71, 0);
  assert_int_equal(spill_test_stats(m).cow_copies, 2); /* a requested copy is not copy-on-write's */
  /* The exposed one never spills; the others do. */
  spill_all(m);
  assert_int_equal(adr_spill_buffer_location(adr_spill_slice_buffer(b)), ADR_SPILL_LOCATION_DEVICE);
  if (!host_memory)
    assert_int_equal(adr_spill_buffer_location(adr_spill_slice_buffer(a)), ADR_SPILL_LOCATION_HOST);
  expect(a, 71, 0);
  expect(dc, 71, 0);
  size_t records = 0;
  assert_int_equal(adr_spill_exposures_list(m, NULL, NULL, &records, NULL), 0);
  assert_int_equal(records, 1);
  free(h);
  assert_int_equal(adr_spill_slice_free(a, NULL), 0);
  assert_int_equal(adr_spill_slice_free(b, NULL), 0);
  assert_int_equal(adr_spill_slice_free(c, NULL), 0);
  assert_int_equal(adr_spill_slice_free(dc, NULL), 0);
  assert_int_equal(adr_spill_manager_destroy(m, NULL), 0);
}

/* Many threads: views, read acquires, write acquires (copies), exposes and
 * frees of slices of a few shared owners, under a limit that spills. */
#define THREADS 6
#define ROUNDS 60
#define BASES 4
#define BSIZE (32 * KiB)

struct cow_worker {
  struct adr_spill_slice** bases;
  int id;
  char failure[600];
};

static void* cow_work(void* arg) {
  struct cow_worker* w = arg;
  uint8_t* h = malloc(BSIZE);
  uint8_t* want = malloc(BSIZE);
  uint32_t rng = 0x2545f491u * (uint32_t)(w->id + 1);
  struct adr_error e;
  for (int r = 0; r < ROUNDS && w->failure[0] == '\0'; r++) {
    rng = rng * 1103515245u + 12345u;
    int k = (int)((rng >> 8) % BASES);
    size_t off = (rng >> 12) % 1024;
    size_t n = BSIZE - off;
    struct adr_spill_slice* v = NULL;
    if (adr_spill_slice_view(w->bases[k], off, n, NULL, &v, &e) != 0) {
      snprintf(w->failure, sizeof(w->failure), "view: %.500s", e.message);
      break;
    }
    void* d = NULL;
    /* Read: the base's pattern. */
    spill_test_fill(want, BSIZE, 9000u + (uint32_t)k);
    if (adr_spill_slice_acquire(v, ADR_SPILL_ACCESS_READ, NULL, &d, &e) != 0 ||
        adr_copy(NULL, h, dev, d, n, NULL, &e) != 0) {
      snprintf(w->failure, sizeof(w->failure), "read: %.500s", e.message);
      break;
    }
    adr_spill_slice_release(v, NULL, NULL);
    if (memcmp(h, want + off, n) != 0)
      snprintf(w->failure, sizeof(w->failure), "view of base %d at %zu: bytes differ", k, off);
    /* Write: a private copy; the base must not see it. */
    if (w->failure[0] == '\0' && (rng & 1)) {
      if (adr_spill_slice_acquire(v, ADR_SPILL_ACCESS_WRITE, NULL, &d, &e) != 0 ||
          adr_memset(dev, d, w->id + 1, n, NULL, &e) != 0 ||
          adr_copy(NULL, h, dev, d, n, NULL, &e) != 0) {
        snprintf(w->failure, sizeof(w->failure), "write: %.500s", e.message);
        break;
      }
      adr_spill_slice_release(v, NULL, NULL);
      for (size_t i = 0; i < n; i++)
        if (h[i] != (uint8_t)(w->id + 1)) {
          snprintf(w->failure, sizeof(w->failure), "private copy byte %zu", i);
          break;
        }
    } else if (w->failure[0] == '\0' && (rng & 6) == 6) {
      if (adr_spill_slice_expose(v, "thread", NULL, &e) != 0)
        snprintf(w->failure, sizeof(w->failure), "expose: %.500s", e.message);
    }
    if (adr_spill_slice_free(v, &e) != 0)
      snprintf(w->failure, sizeof(w->failure), "free: %.500s", e.message);
  }
  free(h);
  free(want);
  return NULL;
}

static void test_threads(void** state) {
  (void)state;
  struct adr_spill_options o;
  adr_spill_options_init(&o);
  o.device_limit = 4 * BSIZE;
  o.stats_level = 1;
  struct adr_spill_manager* m = NULL;
  assert_int_equal(adr_spill_manager_create(dev, &o, &m, NULL), 0);
  struct adr_spill_slice* bases[BASES];
  for (int k = 0; k < BASES; k++) {
    bases[k] = salloc(m, BSIZE);
    write_seed(bases[k], 9000u + (uint32_t)k, NULL);
  }
  pthread_t t[THREADS];
  struct cow_worker w[THREADS];
  for (int i = 0; i < THREADS; i++) {
    w[i] = (struct cow_worker){bases, i, ""};
    assert_int_equal(pthread_create(&t[i], NULL, cow_work, &w[i]), 0);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < THREADS; i++)
    if (w[i].failure[0] != '\0') fail_msg("thread %d: %s", i, w[i].failure);
  for (int k = 0; k < BASES; k++) {
    expect(bases[k], 9000u + (uint32_t)k, 0);
    assert_int_equal(adr_spill_slice_shared(bases[k]), 0);
  }
  struct adr_spill_stats s = spill_test_stats(m);
  assert_int_equal(s.buffers, BASES);
  assert_true(s.cow_copies > 0);
  for (int k = 0; k < BASES; k++) assert_int_equal(adr_spill_slice_free(bases[k], NULL), 0);
  assert_int_equal(adr_spill_manager_destroy(m, NULL), 0);
}

static void test_errors(void** state) {
  (void)state;
  struct adr_spill_manager* m = spill_test_manager(dev, 0, 0, 0);
  struct adr_spill_slice* s = NULL;
  struct adr_error e;
  assert_int_equal(adr_spill_slice_alloc(m, 0, &s, &e), EINVAL);
  assert_null(s);
  assert_int_equal(adr_spill_slice_alloc(m, 64, NULL, &e), EINVAL);
  s = salloc(m, 64);
  void* p = NULL;
  assert_int_equal(adr_spill_slice_acquire(s, 9, NULL, &p, &e), EINVAL);
  assert_int_equal(adr_spill_slice_release(s, NULL, &e), EINVAL);
  assert_non_null(strstr(e.message, "not acquired"));
  (void)acq(s, ADR_SPILL_ACCESS_WRITE, NULL);
  assert_int_equal(adr_spill_slice_free(s, &e), EBUSY);
  rel(s, NULL);
  assert_int_equal(adr_spill_slice_view(NULL, 0, 1, NULL, &s, &e), EINVAL);
  assert_int_equal(adr_spill_slice_copy(s, NULL, NULL, &e), EINVAL);
  assert_int_equal(adr_spill_slice_free(NULL, NULL), 0);
  assert_int_equal(adr_spill_slice_size(s), 64);
  assert_int_equal(adr_spill_slice_free(s, NULL), 0);
  assert_int_equal(adr_spill_manager_destroy(m, NULL), 0);
}

int main(void) {
  int missing = spill_test_device(&dev, &host_memory);
  if (missing) return missing;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shallow_copies), cmocka_unit_test(test_ranges_and_spill),
      cmocka_unit_test(test_exposure),       cmocka_unit_test(test_threads),
      cmocka_unit_test(test_errors),
  };
  return cmocka_run_group_tests_name(adr_device_name(dev), tests, NULL, NULL);
}
