/* SPDX-License-Identifier: Apache-2.0
 *
 * Unit test of the backends' shared interval map (backends/common/
 * range_map.c, compiled into this test; the OpenCL, CUDA and HIP backends
 * use it, the CPU backend has its own treap in backends/cpu/cpu_ranges.c): lookups anywhere inside
 * an entry, ranges that run past the end, gaps, overlap rejection, removal, draining one owner,
 * growth, and concurrent readers.
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

#include "range_map.h"

/* An entry as a backend keeps one: the map's key (base, size) first. */
struct test_alloc {
  uintptr_t base;
  size_t size;
  void* owner;
  void* native;
};

static bool owned_by(const void* entry, const void* owner) {
  return ((const struct test_alloc*)entry)->owner == owner;
}

static struct test_alloc entry(uintptr_t base, size_t size, void* owner) {
  struct test_alloc a = {.base = base, .size = size, .owner = owner};
  return a;
}

static void test_find_inside_and_outside(void** state) {
  (void)state;
  struct adr_range_map map = ADR_RANGE_MAP_INIT(struct test_alloc);
  int owner;
  struct test_alloc a = entry(0x10000, 0x1000, &owner);
  struct test_alloc b = entry(0x30000, 0x100, &owner);
  assert_int_equal(adr_range_map_insert(&map, &b), 0);
  assert_int_equal(adr_range_map_insert(&map, &a), 0);
  struct test_alloc out;
  /* Start, middle and last byte of a. */
  assert_int_equal(adr_range_map_find(&map, 0x10000, 0x1000, &out), 0);
  assert_true(out.base == 0x10000 && out.size == 0x1000 && out.owner == &owner);
  assert_int_equal(adr_range_map_find(&map, 0x10800, 0x800, &out), 0);
  assert_true(out.base == 0x10000);
  assert_int_equal(adr_range_map_find(&map, 0x10fff, 1, &out), 0);
  /* Length 0 just checks the address. */
  assert_int_equal(adr_range_map_find(&map, 0x300ff, 0, &out), 0);
  assert_true(out.base == 0x30000);
  /* Past the end of a: ERANGE with the entry filled. */
  out.base = 0;
  assert_int_equal(adr_range_map_find(&map, 0x10800, 0x801, &out), ERANGE);
  assert_true(out.base == 0x10000);
  /* Gaps, before the first and after the last entry. */
  assert_int_equal(adr_range_map_find(&map, 0x11000, 1, &out), ENOENT);
  assert_int_equal(adr_range_map_find(&map, 0xffff, 1, &out), ENOENT);
  assert_int_equal(adr_range_map_find(&map, 0x30100, 1, &out), ENOENT);
  assert_int_equal(adr_range_map_find(&map, 0, 0, &out), ENOENT);
  assert_int_equal(adr_range_map_find(&map, UINTPTR_MAX, 1, &out), ENOENT);
  assert_int_equal(adr_range_map_count(&map), 2);
  adr_range_map_clear(&map);
}

static void test_overlaps_are_refused(void** state) {
  (void)state;
  struct adr_range_map map = ADR_RANGE_MAP_INIT(struct test_alloc);
  struct test_alloc a = entry(0x10000, 0x1000, NULL);
  assert_int_equal(adr_range_map_insert(&map, &a), 0);
  struct test_alloc bad[] = {
      entry(0x10000, 0x1000, NULL), /* same */
      entry(0x0ff00, 0x101, NULL),  /* ends one byte inside */
      entry(0x10fff, 0x10, NULL),   /* starts at the last byte */
      entry(0x10100, 0x10, NULL),   /* inside */
      entry(0x0f000, 0x3000, NULL), /* covers */
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    assert_int_equal(adr_range_map_insert(&map, &bad[i]), EEXIST);
  struct test_alloc zero = entry(0x50000, 0, NULL);
  assert_int_equal(adr_range_map_insert(&map, &zero), EINVAL);
  struct test_alloc wrap = entry(UINTPTR_MAX - 10, 100, NULL);
  assert_int_equal(adr_range_map_insert(&map, &wrap), EOVERFLOW);
  /* Adjacent on both sides is fine. */
  struct test_alloc before = entry(0x0f000, 0x1000, NULL);
  struct test_alloc after = entry(0x11000, 0x1000, NULL);
  assert_int_equal(adr_range_map_insert(&map, &before), 0);
  assert_int_equal(adr_range_map_insert(&map, &after), 0);
  assert_int_equal(adr_range_map_count(&map), 3);
  adr_range_map_clear(&map);
}

static void test_remove_and_take_owner(void** state) {
  (void)state;
  struct adr_range_map map = ADR_RANGE_MAP_INIT(struct test_alloc);
  int o1, o2;
  for (uintptr_t i = 0; i < 10; i++) {
    struct test_alloc a = entry(0x100000 + i * 0x1000, 0x800, (i % 2) ? (void*)&o1 : (void*)&o2);
    a.native = (void*)(i + 1);
    assert_int_equal(adr_range_map_insert(&map, &a), 0);
  }
  struct test_alloc out;
  /* Only the exact base removes. */
  assert_int_equal(adr_range_map_remove(&map, 0x100001, &out), ENOENT);
  assert_int_equal(adr_range_map_remove(&map, 0x103000, &out), 0);
  assert_true(out.native == (void*)4 && out.owner == &o1);
  assert_int_equal(adr_range_map_remove(&map, 0x103000, &out), ENOENT);
  assert_int_equal(adr_range_map_find(&map, 0x103100, 0, &out), ENOENT);
  /* Neighbours are intact. */
  assert_int_equal(adr_range_map_find(&map, 0x102100, 0, &out), 0);
  assert_true(out.native == (void*)3);
  assert_int_equal(adr_range_map_find(&map, 0x104100, 0, &out), 0);
  assert_true(out.native == (void*)5);
  /* Drain o1: four entries remain of its five. */
  int n = 0;
  while (adr_range_map_take_first(&map, owned_by, &o1, &out) == 0) {
    assert_true(out.owner == &o1);
    n++;
  }
  assert_int_equal(n, 4);
  assert_int_equal(adr_range_map_count(&map), 5);
  while (adr_range_map_take_first(&map, owned_by, &o2, &out) == 0) n++;
  assert_int_equal(n, 9);
  assert_int_equal(adr_range_map_count(&map), 0);
  adr_range_map_clear(&map);
}

static void test_many_entries_random_order(void** state) {
  (void)state;
  struct adr_range_map map = ADR_RANGE_MAP_INIT(struct test_alloc);
  enum { N = 5000 };
  size_t* order = malloc(N * sizeof(*order));
  assert_non_null(order);
  for (size_t i = 0; i < N; i++) order[i] = i;
  srand(42);
  for (size_t i = N - 1; i > 0; i--) {
    size_t j = (size_t)rand() % (i + 1);
    size_t t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  for (size_t i = 0; i < N; i++) {
    struct test_alloc a = entry(0x1000000 + order[i] * 256, 100 + order[i] % 150, NULL);
    a.native = (void*)(order[i] + 1);
    assert_int_equal(adr_range_map_insert(&map, &a), 0);
  }
  assert_int_equal(adr_range_map_count(&map), N);
  for (size_t i = 0; i < N; i++) {
    struct test_alloc out;
    uintptr_t base = 0x1000000 + i * 256;
    size_t size = 100 + i % 150;
    assert_int_equal(adr_range_map_find(&map, base + size - 1, 1, &out), 0);
    assert_true(out.native == (void*)(i + 1));
    assert_int_equal(adr_range_map_find(&map, base + size, 1, &out), ENOENT);
  }
  /* Remove every other one and check the rest still resolve. */
  for (size_t i = 0; i < N; i += 2)
    assert_int_equal(adr_range_map_remove(&map, 0x1000000 + i * 256, NULL), 0);
  for (size_t i = 0; i < N; i++) {
    struct test_alloc out;
    assert_int_equal(adr_range_map_find(&map, 0x1000000 + i * 256 + 50, 0, &out),
                     i % 2 ? 0 : ENOENT);
  }
  free(order);
  adr_range_map_clear(&map);
}

struct reader_arg {
  struct adr_range_map* map;
  int failures;
};

static void* reader(void* p) {
  struct reader_arg* r = p;
  for (int round = 0; round < 20000; round++) {
    struct test_alloc out;
    /* The fixed entry is always there, whatever the writer does. */
    if (adr_range_map_find(r->map, 0x500 + (uintptr_t)(round % 0x100), 1, &out) != 0 ||
        out.base != 0x500)
      r->failures++;
  }
  return NULL;
}

static void test_concurrent_readers_and_writer(void** state) {
  (void)state;
  struct adr_range_map map = ADR_RANGE_MAP_INIT(struct test_alloc);
  struct test_alloc fixed = entry(0x500, 0x100, NULL);
  assert_int_equal(adr_range_map_insert(&map, &fixed), 0);
  struct reader_arg args[3] = {{&map, 0}, {&map, 0}, {&map, 0}};
  pthread_t threads[3];
  for (int i = 0; i < 3; i++)
    assert_int_equal(pthread_create(&threads[i], NULL, reader, &args[i]), 0);
  for (int round = 0; round < 2000; round++) {
    struct test_alloc a = entry(0x10000 + (uintptr_t)(round % 50) * 0x100, 0x80, NULL);
    int st = adr_range_map_insert(&map, &a);
    assert_true(st == 0 || st == EEXIST);
    if (round % 3 == 0) adr_range_map_remove(&map, a.base, NULL);
  }
  for (int i = 0; i < 3; i++) {
    pthread_join(threads[i], NULL);
    assert_int_equal(args[i].failures, 0);
  }
  adr_range_map_clear(&map);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_find_inside_and_outside),
      cmocka_unit_test(test_overlaps_are_refused),
      cmocka_unit_test(test_remove_and_take_owner),
      cmocka_unit_test(test_many_entries_random_order),
      cmocka_unit_test(test_concurrent_readers_and_writer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
