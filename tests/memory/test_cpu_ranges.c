/* SPDX-License-Identifier: Apache-2.0
 *
 * The CPU backend's address map (backends/cpu/cpu_ranges.c, compiled into
 * this test): containing-range lookups of interior pointers, spans that run
 * past the end, gaps, overlap rejection, removal, a random workload checked
 * against a brute-force reference with the treap's invariants, ascending
 * addresses (the order an allocator hands them out in) at 200k entries in
 * a time that shows O(log n) rather than O(n) per operation, and readers
 * concurrent with a writer. The last case asks the real CPU backend, through
 * adr_pointer_query, about interior pointers of plain allocations.
 */
/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "adr/adr.h"
#include "adr/memory.h"
#include "cpu_ranges.h"

static void test_find_inside_and_outside(void** state) {
  (void)state;
  struct cpu_ranges map = CPU_RANGES_INIT;
  assert_int_equal(cpu_ranges_insert(&map, 0x30000, 0x100), 0);
  assert_int_equal(cpu_ranges_insert(&map, 0x10000, 0x1000), 0);
  uintptr_t base = 0;
  size_t size = 0;
  assert_int_equal(cpu_ranges_find(&map, 0x10000, 0x1000, &base, &size), 0);
  assert_true(base == 0x10000 && size == 0x1000);
  assert_int_equal(cpu_ranges_find(&map, 0x10800, 0x800, &base, &size), 0);
  assert_true(base == 0x10000);
  assert_int_equal(cpu_ranges_find(&map, 0x10fff, 1, &base, NULL), 0);
  assert_int_equal(cpu_ranges_find(&map, 0x300ff, 0, &base, NULL), 0);
  assert_true(base == 0x30000);
  base = 0;
  assert_int_equal(cpu_ranges_find(&map, 0x10800, 0x801, &base, &size), ERANGE);
  assert_true(base == 0x10000 && size == 0x1000);
  /* Gaps: before the first, between, just past an end, after the last. */
  assert_int_equal(cpu_ranges_find(&map, 0xffff, 0, NULL, NULL), ENOENT);
  assert_int_equal(cpu_ranges_find(&map, 0x11000, 0, NULL, NULL), ENOENT);
  assert_int_equal(cpu_ranges_find(&map, 0x20000, 1, NULL, NULL), ENOENT);
  assert_int_equal(cpu_ranges_find(&map, 0x30100, 0, NULL, NULL), ENOENT);
  assert_int_equal(cpu_ranges_find(&map, 0, 0, NULL, NULL), ENOENT);
  assert_int_equal(cpu_ranges_check(&map), 0);
  cpu_ranges_clear(&map);
  assert_int_equal(cpu_ranges_count(&map), 0);
  assert_int_equal(cpu_ranges_find(&map, 0x10000, 0, NULL, NULL), ENOENT);
}

static void test_insert_errors(void** state) {
  (void)state;
  struct cpu_ranges map = CPU_RANGES_INIT;
  assert_int_equal(cpu_ranges_insert(&map, 0x1000, 0x1000), 0);
  assert_int_equal(cpu_ranges_insert(&map, 0x1000, 0), EINVAL);
  assert_int_equal(cpu_ranges_insert(&map, UINTPTR_MAX - 10, 100), EOVERFLOW);
  /* Overlaps: same base, inside, straddling either end, enclosing. */
  assert_int_equal(cpu_ranges_insert(&map, 0x1000, 0x10), EEXIST);
  assert_int_equal(cpu_ranges_insert(&map, 0x1800, 0x10), EEXIST);
  assert_int_equal(cpu_ranges_insert(&map, 0x800, 0x801), EEXIST);
  assert_int_equal(cpu_ranges_insert(&map, 0x1fff, 0x10), EEXIST);
  assert_int_equal(cpu_ranges_insert(&map, 0x800, 0x2000), EEXIST);
  assert_int_equal(cpu_ranges_count(&map), 1);
  /* Touching ends are fine. */
  assert_int_equal(cpu_ranges_insert(&map, 0x800, 0x800), 0);
  assert_int_equal(cpu_ranges_insert(&map, 0x2000, 0x800), 0);
  assert_int_equal(cpu_ranges_count(&map), 3);
  size_t size = 0;
  assert_int_equal(cpu_ranges_remove(&map, 0x1800, &size), ENOENT); /* not a base */
  assert_int_equal(cpu_ranges_remove(&map, 0x1000, &size), 0);
  assert_int_equal(size, 0x1000);
  assert_int_equal(cpu_ranges_remove(&map, 0x1000, NULL), ENOENT);
  assert_int_equal(cpu_ranges_find(&map, 0x1800, 0, NULL, NULL), ENOENT);
  assert_int_equal(cpu_ranges_find(&map, 0x27ff, 0, NULL, NULL), 0);
  assert_int_equal(cpu_ranges_check(&map), 0);
  cpu_ranges_clear(&map);
}

/* Slots of 1 KiB, each holding one range [slot*1024 + off, + len) or none;
 * random inserts, removals and lookups, each answer compared with the
 * reference, the invariants checked as it goes. */
static void test_random_against_reference(void** state) {
  (void)state;
  enum { SLOTS = 2048, STEPS = 60000 };
  struct {
    uintptr_t base;
    size_t size;
  } ref[SLOTS];
  memset(ref, 0, sizeof(ref));
  struct cpu_ranges map = CPU_RANGES_INIT;
  uint64_t rng = 88172645463325252ull;
  size_t live = 0;
  for (int step = 0; step < STEPS; step++) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    size_t slot = (size_t)(rng % SLOTS);
    uintptr_t slot_base = 0x100000 + (uintptr_t)slot * 1024;
    int op = (int)((rng >> 20) % 3);
    if (op == 0 && ref[slot].size == 0) {
      uintptr_t off = (uintptr_t)((rng >> 32) % 512);
      size_t len = 1 + (size_t)((rng >> 42) % (1024 - off));
      assert_int_equal(cpu_ranges_insert(&map, slot_base + off, len), 0);
      ref[slot].base = slot_base + off;
      ref[slot].size = len;
      live++;
    } else if (op == 1 && ref[slot].size != 0) {
      size_t size = 0;
      assert_int_equal(cpu_ranges_remove(&map, ref[slot].base, &size), 0);
      assert_int_equal(size, ref[slot].size);
      ref[slot].size = 0;
      live--;
    } else {
      uintptr_t addr = slot_base + (uintptr_t)((rng >> 32) % 1024);
      uintptr_t base = 0;
      size_t size = 0;
      int st = cpu_ranges_find(&map, addr, 0, &base, &size);
      bool inside =
          ref[slot].size != 0 && addr >= ref[slot].base && addr < ref[slot].base + ref[slot].size;
      assert_int_equal(st, inside ? 0 : ENOENT);
      if (inside) assert_true(base == ref[slot].base && size == ref[slot].size);
    }
    if (step % 5000 == 0) assert_int_equal(cpu_ranges_check(&map), 0);
  }
  assert_int_equal(cpu_ranges_count(&map), live);
  assert_int_equal(cpu_ranges_check(&map), 0);
  cpu_ranges_clear(&map);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Inserting n ascending ranges then removing them front first: a sorted
 * array moves its whole tail each time (n^2 / 2 element moves: 2e10 at
 * 200k, minutes), a balanced tree does n log n steps. The bound compares
 * the per-operation time at 200k with that at 2k (a ratio, so the load of
 * the machine largely cancels) and is loose: O(log n) gives about 2-4x
 * (cache misses), O(n) gives about 100x. */
static double per_op(size_t n) {
  struct cpu_ranges map = CPU_RANGES_INIT;
  double best = 1e9;
  for (int round = 0; round < 3; round++) {
    double t0 = now_s();
    for (size_t i = 0; i < n; i++)
      assert_int_equal(cpu_ranges_insert(&map, 0x10000000 + i * 128, 64), 0);
    for (size_t i = 0; i < n; i += 7)
      assert_int_equal(cpu_ranges_find(&map, 0x10000020 + i * 128, 0, NULL, NULL), 0);
    for (size_t i = 0; i < n; i++)
      assert_int_equal(cpu_ranges_remove(&map, 0x10000000 + i * 128, NULL), 0);
    double t = (now_s() - t0) / (double)n;
    if (t < best) best = t;
  }
  cpu_ranges_clear(&map);
  return best;
}

static void test_ascending_scales(void** state) {
  (void)state;
  struct cpu_ranges map = CPU_RANGES_INIT;
  for (size_t i = 0; i < 200000; i++)
    assert_int_equal(cpu_ranges_insert(&map, 0x10000000 + i * 128, 64), 0);
  assert_int_equal(cpu_ranges_check(&map), 0);
  assert_int_equal(cpu_ranges_count(&map), 200000);
  cpu_ranges_clear(&map);
  double small = per_op(2000), large = per_op(200000);
  print_message("per operation: %.0f ns at 2k, %.0f ns at 200k (%.1fx)\n", small * 1e9, large * 1e9,
                large / small);
  assert_true(large < small * 25);
}

struct reader_arg {
  struct cpu_ranges* map;
  int errors;
};

static void* reader(void* p) {
  struct reader_arg* a = p;
  for (int i = 0; i < 200000; i++) {
    uintptr_t base = 0;
    /* The pinned ranges are never removed: always found, whatever moves. */
    uintptr_t addr = 0x1000 + (uintptr_t)(i % 64) * 0x1000 + 0x7ff;
    if (cpu_ranges_find(a->map, addr, 1, &base, NULL) != 0 || base != addr - 0x7ff) a->errors++;
  }
  return NULL;
}

static void test_concurrent_readers(void** state) {
  (void)state;
  struct cpu_ranges map = CPU_RANGES_INIT;
  for (uintptr_t i = 0; i < 64; i++)
    assert_int_equal(cpu_ranges_insert(&map, 0x1000 + i * 0x1000, 0x800), 0);
  struct reader_arg args[2] = {{&map, 0}, {&map, 0}};
  pthread_t th[2];
  for (int t = 0; t < 2; t++) assert_int_equal(pthread_create(&th[t], NULL, reader, &args[t]), 0);
  for (int round = 0; round < 200; round++) {
    for (uintptr_t i = 0; i < 64; i++)
      assert_int_equal(cpu_ranges_insert(&map, 0x100000 + i * 0x100, 0x80), 0);
    for (uintptr_t i = 0; i < 64; i++)
      assert_int_equal(cpu_ranges_remove(&map, 0x100000 + i * 0x100, NULL), 0);
  }
  for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
  assert_int_equal(args[0].errors + args[1].errors, 0);
  assert_int_equal(cpu_ranges_check(&map), 0);
  cpu_ranges_clear(&map);
}

/* The backend itself: interior pointers of plain (backend) allocations are
 * the CPU's, a freed allocation's are not. */
static void test_backend_pointer_query(void** state) {
  (void)state;
  struct adr_device* dev = NULL;
  assert_int_equal(adr_device_get(ARROW_DEVICE_CPU, 0, &dev, NULL), 0);
  enum { N = 3000 };
  static void* ptrs[N];
  for (int i = 0; i < N; i++)
    assert_int_equal(
        adr_alloc_with(dev, adr_allocator_backend(), 100 + (size_t)i, 0, NULL, &ptrs[i], NULL), 0);
  for (int i = 0; i < N; i += 37) {
    struct adr_device* owner = NULL;
    assert_int_equal(adr_pointer_query((char*)ptrs[i] + 50 + i, &owner, NULL), 0);
    assert_ptr_equal(owner, dev);
  }
  /* Free every other one (out of address order), query again. */
  for (int i = 0; i < N; i += 2)
    assert_int_equal(adr_free(dev, ptrs[i], 100 + (size_t)i, NULL, NULL), 0);
  for (int i = 1; i < N; i += 74) {
    struct adr_device* owner = NULL;
    assert_int_equal(adr_pointer_query((char*)ptrs[i] + 99 + i, &owner, NULL), 0);
    assert_ptr_equal(owner, dev);
  }
  for (int i = 1; i < N; i += 2)
    assert_int_equal(adr_free(dev, ptrs[i], 100 + (size_t)i, NULL, NULL), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_find_inside_and_outside),  cmocka_unit_test(test_insert_errors),
      cmocka_unit_test(test_random_against_reference), cmocka_unit_test(test_ascending_scales),
      cmocka_unit_test(test_concurrent_readers),       cmocka_unit_test(test_backend_pointer_query),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
