/* SPDX-License-Identifier: Apache-2.0
 *
 * The allocation table's interval index (core/alloc_table.c): lookups of
 * addresses inside, at the edges of and between allocations, against a
 * reference list through random inserts and removes; the per-thread cache
 * never answers for an index that changed; and lookups stay logarithmic
 * (100k live ranges cost about what 100 do, not 1000x).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cmocka.h>

#include "internal.h"

static void test_edges(void** state) {
  (void)state;
  struct adr__alloc_table* t = adr__alloc_table_create();
  assert_non_null(t);
  struct adr__range r;
  assert_false(adr__alloc_table_ranges_find(t, (void*)0x1000, &r));
  assert_int_equal(adr__alloc_table_ranges_insert(t, (void*)0x1000, 0x100, (void*)0x1), 0);
  assert_int_equal(adr__alloc_table_ranges_insert(t, (void*)0x1100, 0, (void*)0x2), 0);
  assert_int_equal(adr__alloc_table_ranges_insert(t, (void*)0x1200, 0x40, (void*)0x3), 0);
  assert_true(adr__alloc_table_ranges_find(t, (void*)0x1000, &r));
  assert_int_equal(r.start, 0x1000);
  assert_int_equal(r.size, 0x100);
  assert_ptr_equal(r.site, (void*)0x1);
  assert_true(adr__alloc_table_ranges_find(t, (void*)0x10ff, &r));
  assert_int_equal(r.start, 0x1000);
  /* A zero-byte allocation owns its one address. */
  assert_true(adr__alloc_table_ranges_find(t, (void*)0x1100, &r));
  assert_int_equal(r.start, 0x1100);
  assert_int_equal(r.size, 0);
  assert_false(adr__alloc_table_ranges_find(t, (void*)0x1101, &r));
  assert_false(adr__alloc_table_ranges_find(t, (void*)0x1240, &r));
  assert_false(adr__alloc_table_ranges_find(t, (void*)0xfff, &r));
  assert_int_equal(adr__alloc_table_ranges_foreach(t, NULL, NULL), 3);
  /* The cached answer for a copy's range check: only a found range, only
   * for a range inside it, only while its index is unchanged. */
  assert_true(adr__alloc_table_ranges_find(t, (void*)0x1200, &r));
  assert_true(adr__alloc_table_ranges_cached_fit(t, (void*)0x1200, 0x40));
  assert_true(adr__alloc_table_ranges_cached_fit(t, (void*)0x123f, 1));
  assert_false(adr__alloc_table_ranges_cached_fit(t, (void*)0x1200, 0x41));
  assert_false(adr__alloc_table_ranges_cached_fit(t, (void*)0x123f, 2));
  assert_false(adr__alloc_table_ranges_cached_fit(t, (void*)0x1240, 1));
  assert_false(adr__alloc_table_ranges_cached_fit(t, (void*)0x11ff, 2));
  assert_false(adr__alloc_table_ranges_find(t, (void*)0x1300, &r)); /* a negative answer */
  assert_false(adr__alloc_table_ranges_cached_fit(t, (void*)0x1300, 1));
  assert_int_equal(adr__alloc_table_ranges_insert(t, (void*)0x1400, 0x40, NULL), 0);
  assert_false(adr__alloc_table_ranges_cached_fit(t, (void*)0x1200, 0x40));
  assert_true(adr__alloc_table_ranges_find(t, (void*)0x1200, &r));
  assert_true(adr__alloc_table_ranges_cached_fit(t, (void*)0x1200, 0x40));
  assert_ptr_equal(adr__alloc_table_ranges_remove(t, (void*)0x1400), NULL);
  /* The cache must not keep answering for a removed range. */
  assert_true(adr__alloc_table_ranges_find(t, (void*)0x1010, &r));
  assert_ptr_equal(adr__alloc_table_ranges_remove(t, (void*)0x1000), (void*)0x1);
  assert_false(adr__alloc_table_ranges_find(t, (void*)0x1010, &r));
  assert_null(adr__alloc_table_ranges_remove(t, (void*)0x1000));
  /* Nor keep a negative answer once a range covers the address. */
  assert_int_equal(adr__alloc_table_ranges_insert(t, (void*)0x1000, 0x20, NULL), 0);
  assert_true(adr__alloc_table_ranges_find(t, (void*)0x1010, &r));
  assert_int_equal(r.size, 0x20);
  adr__alloc_table_destroy(t);
}

#define SLOTS 4096

static void test_random_against_reference(void** state) {
  (void)state;
  struct adr__alloc_table* t = adr__alloc_table_create();
  /* Slot i may hold a range [base + i*256, +size) with size in 0..256. */
  static size_t size[SLOTS];
  static bool live[SLOTS];
  const uintptr_t base = 0x100000;
  srand(11);
  for (int step = 0; step < 200000; step++) {
    int i = rand() % SLOTS;
    void* p = (void*)(base + (uintptr_t)i * 256);
    if (live[i]) {
      adr__alloc_table_ranges_remove(t, p);
      live[i] = false;
    } else {
      size[i] = (size_t)(rand() % 257);
      assert_int_equal(adr__alloc_table_ranges_insert(t, p, size[i], NULL), 0);
      live[i] = true;
    }
    uintptr_t q = base + (uintptr_t)(rand() % (SLOTS * 256));
    int k = (int)((q - base) / 256);
    size_t off = (q - base) % 256;
    bool want = live[k] && off < (size[k] ? size[k] : 1);
    struct adr__range r;
    bool got = adr__alloc_table_ranges_find(t, (void*)q, &r);
    if (got != want)
      fail_msg("step %d: find(%#lx) = %d, expected %d", step, (unsigned long)q, got, want);
    if (got) assert_int_equal(r.start, base + (uintptr_t)k * 256);
  }
  size_t n = 0;
  for (int i = 0; i < SLOTS; i++) n += live[i];
  assert_int_equal(adr__alloc_table_ranges_foreach(t, NULL, NULL), n);
  adr__alloc_table_destroy(t);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ns per insert+lookup+remove cycle with `live` ranges in the index. */
static double cycle_ns(size_t live) {
  struct adr__alloc_table* t = adr__alloc_table_create();
  for (size_t i = 0; i < live; i++)
    adr__alloc_table_ranges_insert(t, (void*)(0x10000 + i * 128), 64, NULL);
  const int reps = 100000;
  double best = 1e9;
  for (int round = 0; round < 3; round++) {
    double t0 = now();
    for (int i = 0; i < reps; i++) {
      void* p = (void*)(0x10000 + (uintptr_t)((i * 7919u) % live) * 128 + 64);
      struct adr__range r;
      adr__alloc_table_ranges_insert(t, p, 32, NULL);
      if (!adr__alloc_table_ranges_find(t, (char*)p + 8, &r)) fail_msg("lost a range");
      adr__alloc_table_ranges_remove(t, p);
    }
    double ns = (now() - t0) / reps * 1e9;
    if (ns < best) best = ns;
  }
  adr__alloc_table_destroy(t);
  return best;
}

static void test_logarithmic(void** state) {
  (void)state;
  double small = cycle_ns(100), large = cycle_ns(100000);
  printf("insert+find+remove: %.0f ns with 100 live ranges, %.0f ns with 100000\n", small, large);
  /* log2(100000)/log2(100) = 2.5; a linear structure would be ~1000x.
   * Generous for cache misses and a loaded machine. */
  assert_true(large < small * 20);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_edges),
      cmocka_unit_test(test_random_against_reference),
      cmocka_unit_test(test_logarithmic),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
