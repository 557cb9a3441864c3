/* SPDX-License-Identifier: Apache-2.0
 *
 * Arrays on spillable buffers (adr/spill.h, docs/spill.md, "Arrays on
 * spillable buffers") on the device ADR_DEVICE names, one registration per
 * backend configuration (tests/spill/meson.build). The table is the sample
 * table fixture, struct<int64, utf8, list<int32>, struct<double, bool>>
 * with nulls, built in host memory; every check compares the spill array
 * with that source (adr_device_array_equal, which validates both fully).
 * On host-memory devices (cpu) spilling is a no-op and the tests check
 * that the table stays put instead.
 */
#include <errno.h>
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
#include "adr/array.h"
#include "adr/spill.h"
#include "spill_test.h"
#include "sample_table.h"

#define ROWS 1000

static struct adr_device* dev;
static bool host_memory; /* the no-op devices */
static struct ArrowSchema schema;
static struct ArrowDeviceArray source;

static struct adr_spill_array* copy(struct adr_spill_manager* m, const struct ArrowDeviceArray* a) {
  struct adr_spill_array* t = NULL;
  struct adr_error e;
  if (adr_spill_array_deep_copy(m, &schema, a, &t, &e) != 0) fail_msg("deep copy: %s", e.message);
  assert_non_null(t);
  return t;
}

static void destroy(struct adr_spill_manager* m, struct adr_spill_array* t) {
  struct adr_error e;
  if (t != NULL && adr_spill_array_destroy(t, &e) != 0) fail_msg("destroy: %s", e.message);
  if (adr_spill_manager_destroy(m, &e) != 0) fail_msg("manager destroy: %s", e.message);
}

static void expect_equal(const struct ArrowDeviceArray* want, const struct ArrowDeviceArray* got) {
  bool eq = false;
  struct adr_error diff, e;
  diff.message[0] = '\0';
  if (adr_device_array_equal(&schema, want, got, &eq, &diff, &e) != 0)
    fail_msg("equal: %s", e.message);
  if (!eq) fail_msg("differs: %s", diff.message);
  assert_int_equal(got->device_type, adr_device_type(dev));
}

/* Acquires the table, compares it with `want`, releases it. */
static void check_table(struct adr_spill_array* t, const struct ArrowDeviceArray* want) {
  struct ArrowDeviceArray a;
  struct adr_error e;
  if (adr_spill_array_acquire(t, ADR_SPILL_ACCESS_READ, &a, &e) != 0)
    fail_msg("acquire: %s", e.message);
  if (adr_device_array_validate(&schema, &a, ADR_VALIDATE_FULL, &e) != 0)
    fail_msg("validate: %s", e.message);
  expect_equal(want, &a);
  for (size_t i = 0; i < adr_spill_array_buffer_count(t); i++)
    assert_int_equal(adr_spill_buffer_location(adr_spill_array_buffer(t, i)),
                     ADR_SPILL_LOCATION_DEVICE);
  adr_device_array_release(&a);
  assert_null(a.array.release);
}

static uint64_t table_bytes(struct adr_spill_array* t) {
  uint64_t n = 0;
  for (size_t i = 0; i < adr_spill_array_buffer_count(t); i++)
    n += adr_spill_buffer_size(adr_spill_array_buffer(t, i));
  return n;
}

static void expect_location(struct adr_spill_array* t, int location) {
  assert_true(adr_spill_array_buffer_count(t) > 0);
  for (size_t i = 0; i < adr_spill_array_buffer_count(t); i++)
    assert_int_equal(adr_spill_buffer_location(adr_spill_array_buffer(t, i)), location);
}

/* The whole table moves at once, both ways, and keeps its values. */
static void test_spill_unspill(void** state) {
  (void)state;
  struct adr_spill_manager* m = spill_test_manager(dev, 0, 0, 1);
  struct adr_spill_array* t = copy(m, &source);
  struct adr_error e;
  check_table(t, &source);
  for (int round = 0; round < 2; round++) {
    uint64_t moved = 1;
    if (adr_spill_array_spill(t, &moved, &e) != 0) fail_msg("spill: %s", e.message);
    if (host_memory) {
      assert_int_equal(moved, 0);
      expect_location(t, ADR_SPILL_LOCATION_DEVICE);
    } else {
      assert_int_equal(moved, table_bytes(t));
      expect_location(t, ADR_SPILL_LOCATION_HOST);
    }
    /* Round 0 unspills explicitly, round 1 through the acquire. */
    if (round == 0) {
      if (adr_spill_array_unspill(t, &e) != 0) fail_msg("unspill: %s", e.message);
      expect_location(t, ADR_SPILL_LOCATION_DEVICE);
    }
    check_table(t, &source);
  }
  struct adr_spill_stats s;
  memset(&s, 0, sizeof(s));
  s.struct_size = sizeof(s);
  assert_int_equal(adr_spill_stats_get(m, &s, NULL), 0);
  assert_int_equal(s.buffers, adr_spill_array_buffer_count(t));
  if (!host_memory) {
    assert_int_equal(s.spilled[ADR_SPILL_TRIGGER_EXPLICIT].bytes, 2 * table_bytes(t));
    assert_int_equal(s.unspilled.bytes, 2 * table_bytes(t));
  }
  destroy(m, t);
}

/* A table acquired is locked: spilling it moves nothing until release. */
static void test_acquired_stays(void** state) {
  (void)state;
  struct adr_spill_manager* m = spill_test_manager(dev, 0, 0, 0);
  struct adr_spill_array* t = copy(m, &source);
  struct ArrowDeviceArray a;
  assert_int_equal(adr_spill_array_acquire(t, ADR_SPILL_ACCESS_WRITE, &a, NULL), 0);
  uint64_t moved = 1;
  assert_int_equal(adr_spill_array_spill(t, &moved, NULL), 0);
  assert_int_equal(moved, 0);
  assert_int_equal(adr_spill_manager_spill(m, UINT64_MAX, &moved, NULL), 0);
  assert_int_equal(moved, 0);
  expect_location(t, ADR_SPILL_LOCATION_DEVICE);
  /* The caller's reference may go first: the acquired array keeps the
   * table, and its release frees it. */
  struct adr_error e;
  assert_int_equal(adr_spill_manager_destroy(m, &e), EBUSY);
  assert_int_equal(adr_spill_array_destroy(t, NULL), 0);
  expect_equal(&source, &a);
  adr_device_array_release(&a);
  assert_int_equal(adr_spill_manager_destroy(m, NULL), 0);
}

/* Sliced sources (offset != 0, also empty) keep their values through a
 * spill and an unspill. */
static void test_slices(void** state) {
  (void)state;
  static const int64_t slices[][2] = {{3, 500}, {13, 987}, {999, 1}, {517, 0}};
  struct adr_spill_manager* m = spill_test_manager(dev, 0, 0, 0);
  for (size_t k = 0; k < sizeof(slices) / sizeof(slices[0]); k++) {
    struct ArrowDeviceArray sliced = source; /* a view: never released */
    sliced.array.offset = slices[k][0];
    sliced.array.length = slices[k][1];
    sliced.array.null_count = -1;
    struct adr_spill_array* t = copy(m, &sliced);
    check_table(t, &sliced);
    assert_int_equal(adr_spill_array_spill(t, NULL, NULL), 0);
    check_table(t, &sliced);
    assert_int_equal(adr_spill_array_destroy(t, NULL), 0);
  }
  destroy(m, NULL);
}

static void on_exposure(void* ctx, const struct adr_spill_exposure* x) {
  if (strcmp(x->reason, "test export") == 0) *(uint64_t*)ctx += x->count;
}

/* An exported table is exposed: it never spills, and stays valid for its
 * consumer after the table itself is destroyed. */
static void test_export(void** state) {
  (void)state;
  struct adr_spill_manager* m = spill_test_manager(dev, 0, 0, 2);
  struct adr_spill_array* t = copy(m, &source);
  struct adr_error e;
  assert_int_equal(adr_spill_array_spill(t, NULL, NULL), 0);
  struct ArrowDeviceArray x;
  if (adr_spill_array_export(t, "test export", &x, &e) != 0) fail_msg("export: %s", e.message);
  assert_null(x.sync_event);
  expect_location(t, ADR_SPILL_LOCATION_DEVICE);
  for (size_t i = 0; i < adr_spill_array_buffer_count(t); i++)
    assert_int_equal(adr_spill_buffer_exposed(adr_spill_array_buffer(t, i)), 1);
  uint64_t moved = 1;
  assert_int_equal(adr_spill_manager_spill(m, UINT64_MAX, &moved, NULL), 0);
  assert_int_equal(moved, 0);
  assert_int_equal(adr_spill_array_spill(t, &moved, NULL), 0);
  assert_int_equal(moved, 0);
  expect_location(t, ADR_SPILL_LOCATION_DEVICE);
  uint64_t recorded = 0;
  assert_int_equal(adr_spill_exposures_list(m, on_exposure, &recorded, NULL, NULL), 0);
  assert_int_equal(recorded, adr_spill_array_buffer_count(t));
  /* A second export shares the buffers; acquiring still works. */
  struct ArrowDeviceArray y;
  assert_int_equal(adr_spill_array_export(t, NULL, &y, NULL), 0);
  check_table(t, &source);
  assert_int_equal(adr_spill_array_destroy(t, NULL), 0);
  if (adr_device_array_validate(&schema, &x, ADR_VALIDATE_FULL, &e) != 0)
    fail_msg("validate: %s", e.message);
  expect_equal(&source, &x);
  adr_device_array_release(&x);
  assert_null(x.array.release);
  expect_equal(&source, &y);
  adr_device_array_release(&y);
  destroy(m, NULL);
}

/* The table is copied again from a device array: the source may be a
 * spill array's own acquired tree (device to device). */
static void test_copy_from_device(void** state) {
  (void)state;
  struct adr_spill_manager* m = spill_test_manager(dev, 0, 0, 0);
  struct adr_spill_array* t = copy(m, &source);
  struct ArrowDeviceArray a;
  assert_int_equal(adr_spill_array_acquire(t, ADR_SPILL_ACCESS_READ, &a, NULL), 0);
  struct adr_spill_array* t2 = copy(m, &a);
  adr_device_array_release(&a);
  assert_int_equal(adr_spill_array_spill(t2, NULL, NULL), 0);
  check_table(t2, &source);
  assert_int_equal(adr_spill_array_destroy(t2, NULL), 0);
  destroy(m, t);
}

static bool no_buffer_shared(struct adr_spill_array* a, struct adr_spill_array* b);

static void expect_equal_on(struct adr_spill_array* t, struct adr_device* d) {
  struct ArrowDeviceArray b;
  assert_int_equal(adr_spill_array_acquire(t, ADR_SPILL_ACCESS_READ, &b, NULL), 0);
  assert_int_equal(b.device_type, adr_device_type(d));
  bool eq = false;
  struct adr_error diff, e;
  if (adr_device_array_equal(&schema, &source, &b, &eq, &diff, &e) != 0)
    fail_msg("equal: %s", e.message);
  if (!eq) fail_msg("differs on %s: %s", adr_device_name(d), diff.message);
  adr_device_array_release(&b);
}

/* A table moves to a manager of another device (the CPU, and
 * ADR_SPILL_TEST_PEER where the run names one) without a detour: spilled,
 * its host copies are uploaded straight to the target (it is not
 * unspilled); resident, device to device; from its acquired tree too. */
static void test_copy_to_other_device(void** state) {
  (void)state;
  const char* peer_name = getenv("ADR_SPILL_TEST_PEER");
  struct adr_device* peers[3];
  size_t np = 0;
  struct adr_error e;
  peers[np++] = dev; /* the same device, another table */
  if (adr_device_get(ARROW_DEVICE_CPU, 0, &peers[np], &e) == 0 && peers[np] != dev) np++;
  if (peer_name != NULL && adr_device_select(peer_name, &peers[np], &e) == 0) np++;
  struct adr_spill_manager* m = spill_test_manager(dev, 0, 0, 1);
  struct adr_spill_array* t = copy(m, &source);
  for (size_t k = 0; k < np; k++) {
    struct adr_spill_manager* pm = NULL;
    if (adr_spill_manager_create(peers[k], NULL, &pm, &e) != 0) fail_msg("peer: %s", e.message);
    /* Spilled: copied from the host copies. */
    assert_int_equal(adr_spill_array_spill(t, NULL, NULL), 0);
    uint64_t unspilled = spill_test_stats(m).unspilled.bytes;
    struct adr_spill_array* pt = NULL;
    if (adr_spill_array_copy(t, pm, &pt, &e) != 0)
      fail_msg("copy of the spilled table to %s: %s", adr_device_name(peers[k]), e.message);
    if (!host_memory) expect_location(t, ADR_SPILL_LOCATION_HOST);
    assert_int_equal(spill_test_stats(m).unspilled.bytes, unspilled);
    expect_equal_on(pt, peers[k]);
    assert_true(no_buffer_shared(t, pt));
    assert_int_equal(adr_spill_array_destroy(pt, NULL), 0);
    /* Resident: device to device. */
    assert_int_equal(adr_spill_array_unspill(t, NULL), 0);
    if (adr_spill_array_copy(t, pm, &pt, &e) != 0)
      fail_msg("copy of the resident table to %s: %s", adr_device_name(peers[k]), e.message);
    expect_equal_on(pt, peers[k]);
    assert_int_equal(adr_spill_array_destroy(pt, NULL), 0);
    /* From the acquired tree, as any device array. */
    struct ArrowDeviceArray a;
    assert_int_equal(adr_spill_array_acquire(t, ADR_SPILL_ACCESS_READ, &a, NULL), 0);
    if (adr_spill_array_deep_copy(pm, &schema, &a, &pt, &e) != 0)
      fail_msg("deep copy to %s: %s", adr_device_name(peers[k]), e.message);
    adr_device_array_release(&a);
    print_message("  copied from %s to %s\n", adr_device_name(dev), adr_device_name(peers[k]));
    expect_equal_on(pt, peers[k]);
    assert_int_equal(adr_spill_array_destroy(pt, NULL), 0);
    assert_int_equal(adr_spill_manager_destroy(pm, NULL), 0);
  }
  struct adr_spill_array* bad = NULL;
  assert_int_equal(adr_spill_array_copy(t, NULL, &bad, &e), EINVAL);
  assert_null(bad);
  destroy(m, t);
}

static bool same_buffers(struct adr_spill_array* a, struct adr_spill_array* b) {
  assert_int_equal(adr_spill_array_buffer_count(a), adr_spill_array_buffer_count(b));
  for (size_t i = 0; i < adr_spill_array_buffer_count(a); i++)
    if (adr_spill_array_buffer(a, i) != adr_spill_array_buffer(b, i)) return false;
  return true;
}

static bool no_buffer_shared(struct adr_spill_array* a, struct adr_spill_array* b) {
  for (size_t i = 0; i < adr_spill_array_buffer_count(a); i++)
    if (adr_spill_array_buffer(a, i) == adr_spill_array_buffer(b, i)) return false;
  return true;
}

static bool equal(const struct ArrowDeviceArray* want, struct adr_spill_array* t) {
  struct ArrowDeviceArray a;
  assert_int_equal(adr_spill_array_acquire(t, ADR_SPILL_ACCESS_READ, &a, NULL), 0);
  bool eq = false;
  struct adr_error diff, e;
  if (adr_device_array_equal(&schema, want, &a, &eq, &diff, &e) != 0)
    fail_msg("equal: %s", e.message);
  adr_device_array_release(&a);
  return eq;
}

/* Copy-on-write on sliced arrays: a slice of a table shares its buffers
 * (no copy, through spills too); a write acquire gives the slice private
 * copies the table never sees; an exported table's later slices copy. */
static void test_cow_slices(void** state) {
  (void)state;
  struct adr_spill_manager* m = spill_test_manager(dev, 0, 0, 2);
  struct adr_spill_array* t = copy(m, &source);
  size_t n = adr_spill_array_buffer_count(t);
  struct adr_spill_array* sl = NULL;
  struct adr_error e;
  if (adr_spill_array_slice(t, 3, 500, &sl, &e) != 0) fail_msg("slice: %s", e.message);
  struct ArrowDeviceArray want = source; /* views: never released */
  want.array.offset = 3;
  want.array.length = 500;
  want.array.null_count = -1;
  assert_true(same_buffers(t, sl));
  assert_int_equal(spill_test_stats(m).buffers, n);
  check_table(sl, &want);
  /* Spilling the slice moves the shared buffers: the table's too. */
  assert_int_equal(adr_spill_array_spill(sl, NULL, NULL), 0);
  if (!host_memory) expect_location(t, ADR_SPILL_LOCATION_HOST);
  check_table(t, &source);
  check_table(sl, &want);
  assert_int_equal(spill_test_stats(m).cow_copies, 0);
  struct adr_spill_array* bad = NULL;
  assert_int_equal(adr_spill_array_slice(t, 999, 2, &bad, &e), EINVAL);
  assert_non_null(strstr(e.message, "outside the table's 1000"));
  assert_null(bad);

  /* A write acquire of the slice: private copies, then a write through
   * them (the int64 column's values of the slice's rows set to zero). */
  struct ArrowDeviceArray w;
  if (adr_spill_array_acquire(sl, ADR_SPILL_ACCESS_WRITE, &w, &e) != 0)
    fail_msg("write acquire: %s", e.message);
  assert_true(no_buffer_shared(t, sl));
  struct adr_spill_stats st = spill_test_stats(m);
  assert_int_equal(st.cow_copies, n);
  assert_int_equal(st.buffers, 2 * n);
  const struct ArrowArray* ints = w.array.children[0];
  assert_int_equal(adr_memset(dev, (int64_t*)ints->buffers[1] + ints->offset + 3, 0,
                              500 * sizeof(int64_t), NULL, NULL),
                   0);
  adr_device_array_release(&w);
  check_table(t, &source); /* the table never saw the write */
  assert_false(equal(&want, sl));
  /* Spilled and back, the slice keeps its own bytes. */
  assert_int_equal(adr_spill_manager_spill(m, UINT64_MAX, NULL, NULL), 0);
  assert_false(equal(&want, sl));
  check_table(t, &source);

  /* A shared table exported: its buffers are copied first, so what the
   * consumer writes reaches no slice. */
  struct adr_spill_array* sl2 = NULL;
  assert_int_equal(adr_spill_array_slice(t, 0, 1000, &sl2, NULL), 0);
  assert_true(same_buffers(t, sl2));
  struct ArrowDeviceArray x;
  if (adr_spill_array_export(t, "test export", &x, &e) != 0) fail_msg("export: %s", e.message);
  assert_true(no_buffer_shared(t, sl2));
  assert_int_equal(spill_test_stats(m).cow_copies, 2 * n);
  ints = x.array.children[0];
  assert_int_equal(adr_memset(dev, (int64_t*)ints->buffers[1] + ints->offset, 0,
                              1000 * sizeof(int64_t), NULL, NULL),
                   0);
  check_table(sl2, &source);
  assert_false(equal(&source, t));
  /* A slice of the exported table is a copy, made now. */
  struct adr_spill_array* sl3 = NULL;
  assert_int_equal(adr_spill_array_slice(t, 10, 20, &sl3, NULL), 0);
  assert_true(no_buffer_shared(t, sl3));
  assert_int_equal(spill_test_stats(m).cow_copies, 3 * n);
  for (size_t i = 0; i < n; i++)
    assert_int_equal(adr_spill_buffer_exposed(adr_spill_array_buffer(sl3, i)), 0);
  uint64_t moved = 0;
  assert_int_equal(adr_spill_array_spill(sl3, &moved, NULL), 0);
  if (!host_memory) assert_int_equal(moved, table_bytes(sl3));
  adr_device_array_release(&x);
  assert_int_equal(adr_spill_array_destroy(sl3, NULL), 0);
  assert_int_equal(adr_spill_array_destroy(sl2, NULL), 0);
  assert_int_equal(adr_spill_array_destroy(sl, NULL), 0);
  destroy(m, t);
}

static void test_errors(void** state) {
  (void)state;
  struct adr_spill_manager* m = spill_test_manager(dev, 0, 0, 0);
  struct adr_spill_array* t = NULL;
  struct adr_error e;
  assert_int_equal(adr_spill_array_deep_copy(m, &schema, NULL, &t, &e), EINVAL);
  assert_non_null(strstr(e.message, "src is NULL"));
  assert_int_equal(adr_spill_array_deep_copy(NULL, &schema, &source, &t, NULL), EINVAL);
  assert_null(t);
  assert_int_equal(adr_spill_array_spill(NULL, NULL, NULL), EINVAL);
  assert_int_equal(adr_spill_array_unspill(NULL, NULL), EINVAL);
  assert_int_equal(adr_spill_array_acquire(NULL, ADR_SPILL_ACCESS_READ, NULL, NULL), EINVAL);
  assert_int_equal(adr_spill_array_export(NULL, NULL, NULL, NULL), EINVAL);
  assert_int_equal(adr_spill_array_destroy(NULL, NULL), 0);
  t = copy(m, &source);
  struct ArrowDeviceArray a;
  a.array.release = NULL;
  assert_int_equal(adr_spill_array_acquire(t, 7, &a, NULL), EINVAL);
  assert_null(a.array.release);
  /* No lock is left behind by the failed acquire. */
  if (!host_memory) {
    uint64_t moved = 0;
    assert_int_equal(adr_spill_array_spill(t, &moved, NULL), 0);
    assert_int_equal(moved, table_bytes(t));
  }
  destroy(m, t);
}

int main(void) {
  int missing = spill_test_device(&dev, &host_memory);
  if (missing) return missing;
  struct adr_error e;
  if (fixture_sample_table(ROWS, &schema, &source, &e) != 0) {
    fprintf(stderr, "sample table: %s\n", e.message);
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_spill_unspill),    cmocka_unit_test(test_acquired_stays),
      cmocka_unit_test(test_slices),           cmocka_unit_test(test_export),
      cmocka_unit_test(test_copy_from_device), cmocka_unit_test(test_copy_to_other_device),
      cmocka_unit_test(test_cow_slices),       cmocka_unit_test(test_errors),
  };
  int rc = cmocka_run_group_tests_name(adr_device_name(dev), tests, NULL, NULL);
  adr_device_array_release(&source);
  schema.release(&schema);
  return rc;
}
