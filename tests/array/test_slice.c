/* SPDX-License-Identifier: Apache-2.0
 *
 * Deep copies of slices (docs/arrays.md, "What is copied"): for every
 * nesting (offset on a parent, on a child, lists of lists, list views,
 * maps, fixed-size lists, string views, dense and sparse unions, run-end
 * encoded), slices copied CPU -> CPU, CPU -> X, X -> X (a slice of a
 * device copy) and X -> CPU, on the device named by ADR_DEVICE (the CPU
 * when unset). Each copy must equal the source slice logically, be valid,
 * and allocate at most 1.1x the bytes the slice needs by its layout
 * (fixture_needed_bytes, computed from the source, not from the copy).
 * An empty slice is minimal: offset 0 everywhere, one 0 offset per
 * var-length node, no other buffer.
 *
 * Without the device: exit 77 (SKIP), or fail when ADR_ARRAY_REQUIRE=1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array_test.h"
#include "needed_bytes.h" /* tools/fixtures */

static struct adr_device* dut;

/* ---- builders: n-element CPU arrays of each nesting ----------------------- */

/* Strings "v<k>" padded to 3..29 bytes (short ones inline in views); every
 * `null_every`-th is null. The caller frees *pool. */
static const char** make_strings(int64_t n, int seed, int null_every, char** pool) {
  const char** v = calloc((size_t)n, sizeof(*v));
  *pool = calloc((size_t)n, 32);
  assert_non_null(v);
  assert_non_null(*pool);
  for (int64_t k = 0; k < n; k++) {
    if (null_every > 0 && k % null_every == 2) continue;
    char* s = *pool + 32 * k;
    int len = 3 + (int)((k * 7 + seed) % 27);
    static const char pad[] = "-abcdefghijklmnopqrstuvwxyz0123456789";
    int head = snprintf(s, 32, "v%lld-%d", (long long)k % 100000, seed % 10);
    for (int j = head; j < 31; j++) s[j] = pad[j - head];
    s[len > head ? len : head] = '\0';
    v[k] = s;
  }
  return v;
}

static void strings_node(struct ArrowArray* a, int64_t n, int seed, bool large) {
  char* pool;
  const char** v = make_strings(n, seed, 5, &pool);
  test_strings(a, v, n, 0, large);
  free(v);
  free(pool);
}

/* Offsets where element k has k % `mod` items; returns the child length. */
static int64_t offsets(struct ArrowArray* a, int64_t n, int mod, bool large) {
  void* o = test_buffer(a, 1, (size_t)(n + 1) * (large ? 8 : 4), NULL);
  int64_t pos = 0;
  for (int64_t k = 0; k <= n; k++) {
    if (large)
      ((int64_t*)o)[k] = pos;
    else
      ((int32_t*)o)[k] = (int32_t)pos;
    pos += k % mod;
  }
  return large ? ((int64_t*)o)[n] : ((int32_t*)o)[n];
}

static void build_sample(struct ArrowSchema* s, struct ArrowDeviceArray* out) {
  struct adr_error err;
  ASSERT_OK(fixture_sample_table(20000, s, out, &err), &err);
}

/* The sample table with every column starting at element 11. */
static void build_child_offsets(struct ArrowSchema* s, struct ArrowDeviceArray* out) {
  build_sample(s, out);
  struct ArrowArray* a = &out->array;
  for (int64_t i = 0; i < a->n_children; i++) {
    a->children[i]->offset += 11;
    a->children[i]->length -= 11;
    a->children[i]->null_count = -1;
  }
  a->length -= 11;
}

/* list<list<utf8>> (and large): nulls at both list levels. */
static void build_list_of_lists(struct ArrowSchema* s, struct ArrowDeviceArray* out) {
  const int64_t n = 6000;
  test_schema(s, "+L", "outer", ARROW_FLAG_NULLABLE, 1);
  test_schema(s->children[0], "+l", "inner", ARROW_FLAG_NULLABLE, 1);
  test_schema(s->children[0]->children[0], "U", "s", ARROW_FLAG_NULLABLE, 0);
  struct ArrowArray a;
  test_node(&a, 2, 1, n, 0, 0);
  a.null_count = test_validity(&a, n, 9, 4, 0, n);
  int64_t m = offsets(&a, n, 4, true);
  struct ArrowArray* inner = a.children[0];
  test_node(inner, 2, 1, m, 0, 0);
  inner->null_count = test_validity(inner, m, 7, 1, 0, m);
  int64_t strings = offsets(inner, m, 3, false);
  strings_node(inner->children[0], strings, 1, true);
  test_export(&a, out);
}

/* list_view<int32> with views in scrambled order over a longer child and
 * nulls whose offset and size point anywhere (they must not be followed). */
static void build_list_view(struct ArrowSchema* s, struct ArrowDeviceArray* out) {
  const int64_t n = 6000, m = 30000;
  test_schema(s, "+vl", "lv", ARROW_FLAG_NULLABLE, 1);
  test_schema(s->children[0], "i", "item", ARROW_FLAG_NULLABLE, 0);
  struct ArrowArray a;
  test_node(&a, 3, 1, n, 0, 0);
  a.null_count = test_validity(&a, n, 6, 3, 0, n);
  int32_t* o = test_buffer(&a, 1, (size_t)n * 4, NULL);
  int32_t* z = test_buffer(&a, 2, (size_t)n * 4, NULL);
  for (int64_t k = 0; k < n; k++) {
    /* a window that moves with k, visited back and forth */
    int64_t base = (k / 2) * 4 + (k % 2 ? 3 : 0);
    o[k] = (int32_t)(base % (m - 8));
    z[k] = (int32_t)(k % 6);
    if (k % 6 == 3) {
      o[k] = -77;
      z[k] = 123456;
    }
  }
  test_int32s(a.children[0], m, 1000, 11, 0);
  test_export(&a, out);
}

/* map<utf8, int32>: k % 4 entries per element. */
static void build_map(struct ArrowSchema* s, struct ArrowDeviceArray* out) {
  const int64_t n = 6000;
  test_schema(s, "+m", "map", ARROW_FLAG_NULLABLE, 1);
  test_schema(s->children[0], "+s", "entries", 0, 2);
  test_schema(s->children[0]->children[0], "u", "key", 0, 0);
  test_schema(s->children[0]->children[1], "i", "value", ARROW_FLAG_NULLABLE, 0);
  struct ArrowArray a;
  test_node(&a, 2, 1, n, 0, 0);
  a.null_count = test_validity(&a, n, 10, 7, 0, n);
  int64_t m = offsets(&a, n, 4, false);
  struct ArrowArray* e = a.children[0];
  test_node(e, 1, 2, m, 0, 0);
  char* pool;
  const char** keys = make_strings(m, 2, 0, &pool);
  test_strings(e->children[0], keys, m, 0, false);
  free(keys);
  free(pool);
  test_int32s(e->children[1], m, 5, 4, 0);
  test_export(&a, out);
}

/* fixed_size_list<utf8>[3] beside fixed_size_list<int32>[2] in a struct. */
static void build_fixed_list(struct ArrowSchema* s, struct ArrowDeviceArray* out) {
  const int64_t n = 6000;
  test_schema(s, "+s", "", 0, 2);
  test_schema(s->children[0], "+w:3", "fs", ARROW_FLAG_NULLABLE, 1);
  test_schema(s->children[0]->children[0], "u", "item", ARROW_FLAG_NULLABLE, 0);
  test_schema(s->children[1], "+w:2", "fi", ARROW_FLAG_NULLABLE, 1);
  test_schema(s->children[1]->children[0], "i", "item", ARROW_FLAG_NULLABLE, 0);
  struct ArrowArray a;
  test_node(&a, 1, 2, n, 0, 0);
  struct ArrowArray* fs = a.children[0];
  test_node(fs, 1, 1, n, 0, 0);
  fs->null_count = test_validity(fs, n, 8, 5, 0, n);
  strings_node(fs->children[0], 3 * n, 3, false);
  struct ArrowArray* fi = a.children[1];
  test_node(fi, 1, 1, n, 0, 0);
  test_int32s(fi->children[0], 2 * n, 0, 3, 0);
  test_export(&a, out);
}

/* utf8_view: short strings inline, long ones in two variadic buffers
 * (alternating), nulls whose views point anywhere. */
static void build_views(struct ArrowSchema* s, struct ArrowDeviceArray* out) {
  const int64_t n = 6000;
  test_schema(s, "vu", "sv", ARROW_FLAG_NULLABLE, 0);
  char* pool;
  const char** v = make_strings(n, 4, 0, &pool);
  struct ArrowArray a;
  test_node(&a, 5, 0, n, 0, 0);
  a.null_count = test_validity(&a, n, 7, 6, 0, n);
  unsigned char* views = test_buffer(&a, 1, (size_t)n * 16, NULL);
  char* data[2];
  data[0] = test_buffer(&a, 2, (size_t)n * 32, NULL);
  data[1] = test_buffer(&a, 3, (size_t)n * 32, NULL);
  int64_t used[2] = {0, 0};
  for (int64_t k = 0; k < n; k++) {
    unsigned char* view = views + 16 * k;
    int32_t len = (int32_t)strlen(v[k]);
    if (k % 7 == 6) { /* null: garbage */
      int32_t junk[4] = {500, 0x41414141, 9, 1 << 30};
      memcpy(view, junk, 16);
      continue;
    }
    memcpy(view, &len, 4);
    if (len <= 12) {
      memcpy(view + 4, v[k], (size_t)len);
      continue;
    }
    int32_t b = (int32_t)(k % 2), off = (int32_t)used[b];
    memcpy(data[b] + off, v[k], (size_t)len);
    used[b] += len;
    memcpy(view + 4, v[k], 4);
    memcpy(view + 8, &b, 4);
    memcpy(view + 12, &off, 4);
  }
  int64_t* sizes = test_buffer(&a, 4, 16, NULL);
  sizes[0] = n * 32;
  sizes[1] = n * 32;
  free(v);
  free(pool);
  test_export(&a, out);
}

/* dense_union<int32 (id 5), utf8 (id 9)>: every third element a string. */
static void build_dense_union(struct ArrowSchema* s, struct ArrowDeviceArray* out) {
  const int64_t n = 6000;
  test_schema(s, "+ud:5,9", "du", 0, 2);
  test_schema(s->children[0], "i", "i", ARROW_FLAG_NULLABLE, 0);
  test_schema(s->children[1], "u", "s", ARROW_FLAG_NULLABLE, 0);
  struct ArrowArray a;
  test_node(&a, 2, 2, n, 0, 0);
  int8_t* t = test_buffer(&a, 0, (size_t)n, NULL);
  int32_t* o = test_buffer(&a, 1, (size_t)n * 4, NULL);
  int32_t count[2] = {0, 0};
  for (int64_t k = 0; k < n; k++) {
    int c = k % 3 == 0;
    t[k] = c ? 9 : 5;
    o[k] = count[c]++;
  }
  test_int32s(a.children[0], count[0], 100, 6, 0);
  strings_node(a.children[1], count[1], 5, false);
  test_export(&a, out);
}

/* sparse_union<int64 (id 0), utf8 (id 1)>. */
static void build_sparse_union(struct ArrowSchema* s, struct ArrowDeviceArray* out) {
  const int64_t n = 6000;
  test_schema(s, "+us:0,1", "su", 0, 2);
  test_schema(s->children[0], "l", "l", ARROW_FLAG_NULLABLE, 0);
  test_schema(s->children[1], "u", "s", ARROW_FLAG_NULLABLE, 0);
  struct ArrowArray a;
  test_node(&a, 1, 2, n, 0, 0);
  int8_t* t = test_buffer(&a, 0, (size_t)n, NULL);
  for (int64_t k = 0; k < n; k++) t[k] = (int8_t)(k % 4 == 1);
  struct ArrowArray* l = a.children[0];
  test_node(l, 2, 0, n, 0, 0);
  l->null_count = test_validity(l, n, 5, 0, 0, n);
  int64_t* lv = test_buffer(l, 1, (size_t)n * 8, NULL);
  for (int64_t k = 0; k < n; k++) lv[k] = k * 1000003;
  strings_node(a.children[1], n, 6, false);
  test_export(&a, out);
}

/* run_end_encoded<int32, utf8>: run k is (k % 7) + 1 long. */
static void build_run_end(struct ArrowSchema* s, struct ArrowDeviceArray* out) {
  const int64_t runs = 3000;
  test_schema(s, "+r", "ree", 0, 2);
  test_schema(s->children[0], "i", "run_ends", 0, 0);
  test_schema(s->children[1], "u", "values", ARROW_FLAG_NULLABLE, 0);
  struct ArrowArray a;
  test_node(&a, 0, 2, 0, 0, 0);
  struct ArrowArray* e = a.children[0];
  test_node(e, 2, 0, runs, 0, 0);
  int32_t* ev = test_buffer(e, 1, (size_t)runs * 4, NULL);
  int32_t end = 0;
  for (int64_t k = 0; k < runs; k++) ev[k] = end += (int32_t)(k % 7) + 1;
  a.length = end;
  strings_node(a.children[1], runs, 7, false);
  test_export(&a, out);
}

struct slice_case {
  const char* name;
  void (*build)(struct ArrowSchema* s, struct ArrowDeviceArray* out);
};

static const struct slice_case cases[] = {
    {"offset on the parent (sample table)", build_sample},
    {"offset on the children", build_child_offsets},
    {"list of lists", build_list_of_lists},
    {"list view", build_list_view},
    {"map", build_map},
    {"fixed-size lists", build_fixed_list},
    {"string views", build_views},
    {"dense union", build_dense_union},
    {"sparse union", build_sparse_union},
    {"run-end encoded", build_run_end},
};

/* ---- checks ------------------------------------------------------------------ */

/* Copies `src` (a slice) to `to`, checks it against `expect` (the slice on
 * the CPU) and its bytes against `needed`. */
static void copy_and_check(const char* what, const struct ArrowSchema* schema,
                           const struct ArrowDeviceArray* src,
                           const struct ArrowDeviceArray* expect, struct adr_device* to,
                           int64_t needed) {
  struct adr_error err;
  struct ArrowDeviceArray out;
  struct adr_copy_stats st = {.struct_size = sizeof(st)};
  ASSERT_OK(adr_device_array_deep_copy(schema, src, to, NULL, &out, &st, &err), &err);
  ASSERT_OK(adr_device_array_validate(schema, &out, ADR_VALIDATE_FULL, &err), &err);
  test_assert_equal(schema, expect, &out);
  print_message(
      "    %-8s needed %8lld allocated %8lld (%.3fx) copied %8lld read %7lld waits %lld\n", what,
      (long long)needed, (long long)st.bytes_allocated,
      needed ? (double)st.bytes_allocated / (double)needed : 0.0, (long long)st.bytes,
      (long long)st.read_bytes, (long long)st.host_syncs);
  if (st.bytes_allocated < needed || (double)st.bytes_allocated > 1.1 * (double)needed)
    fail_msg("%s: %lld bytes allocated for %lld needed", what, (long long)st.bytes_allocated,
             (long long)needed);
  if (st.bytes > st.bytes_allocated)
    fail_msg("%s: %lld bytes copied into %lld allocated", what, (long long)st.bytes,
             (long long)st.bytes_allocated);
  adr_device_array_release(&out);
}

static struct ArrowDeviceArray sliced(const struct ArrowDeviceArray* a, int64_t offset,
                                      int64_t length) {
  struct ArrowDeviceArray v = *a; /* borrowed: never released */
  v.array.offset = offset;
  v.array.length = length;
  if (v.array.null_count != 0) v.array.null_count = -1; /* unknown for the slice */
  return v;
}

static void slice_case(const struct slice_case* c) {
  struct adr_error err;
  struct ArrowSchema schema;
  struct ArrowDeviceArray host, dev;
  c->build(&schema, &host);
  ASSERT_OK(adr_device_array_validate(&schema, &host, ADR_VALIDATE_FULL, &err), &err);
  const int64_t n = host.array.length;
  /* a whole copy on the device, sliced there for X -> X and X -> CPU */
  ASSERT_OK(adr_device_array_deep_copy(&schema, &host, dut, NULL, &dev, NULL, &err), &err);
  const int64_t at[][2] = {{1501, 1000}, {3, n - 3}, {n - 777, 777}};
  for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
    struct ArrowDeviceArray hs = sliced(&host, host.array.offset + at[i][0], at[i][1]);
    struct ArrowDeviceArray ds = sliced(&dev, dev.array.offset + at[i][0], at[i][1]);
    int64_t needed = fixture_needed_bytes(&schema, &hs.array);
    assert_true(needed > 0);
    print_message("  %s [%lld, +%lld)\n", c->name, (long long)at[i][0], (long long)at[i][1]);
    copy_and_check("CPU->CPU", &schema, &hs, &hs, test_cpu(), needed);
    copy_and_check("CPU->X", &schema, &hs, &hs, dut, needed);
    copy_and_check("X->X", &schema, &ds, &hs, dut, needed);
    copy_and_check("X->CPU", &schema, &ds, &hs, test_cpu(), needed);
  }
  adr_device_array_release(&dev);
  adr_device_array_release(&host);
  schema.release(&schema);
}

#define SLICE_TEST(i)                    \
  static void test_slice_##i(void** s) { \
    (void)s;                             \
    slice_case(&cases[i]);               \
  }
SLICE_TEST(0)
SLICE_TEST(1)
SLICE_TEST(2)
SLICE_TEST(3)
SLICE_TEST(4)
SLICE_TEST(5)
SLICE_TEST(6)
SLICE_TEST(7)
SLICE_TEST(8)
SLICE_TEST(9)

/* Every node of an empty slice's copy: offset 0, length 0, null count 0,
 * one 0 offset in var-binary and list nodes, 0 sizes for the (empty,
 * NULL) variadic buffers of views, every other buffer NULL. */
static void assert_minimal(const struct ArrowSchema* s, const struct ArrowArray* a) {
  struct adr_format f;
  ASSERT_OK(adr_format_parse(s->format, &f, NULL), &(struct adr_error){0});
  assert_int_equal(a->offset, 0);
  assert_int_equal(a->length, 0);
  assert_int_equal(a->null_count, 0);
  for (int64_t i = 0; i < a->n_buffers; i++) {
    bool one_offset = i == 1 && (f.layout == ADR_LAYOUT_VAR_BINARY || f.layout == ADR_LAYOUT_LIST);
    bool sizes = f.layout == ADR_LAYOUT_BINARY_VIEW && i == a->n_buffers - 1 && i > 2;
    if (sizes) { /* the variadic buffers are kept (empty), so are their sizes: 0 */
      assert_non_null(a->buffers[i]);
      for (int64_t v = 0; v < a->n_buffers - 3; v++)
        assert_int_equal(((const int64_t*)a->buffers[i])[v], 0);
      continue;
    }
    if (!one_offset) {
      assert_null(a->buffers[i]);
      continue;
    }
    assert_non_null(a->buffers[i]);
    if (f.offset_bytes == 4)
      assert_int_equal(((const int32_t*)a->buffers[i])[0], 0);
    else
      assert_int_equal(((const int64_t*)a->buffers[i])[0], 0);
  }
  for (int64_t i = 0; i < a->n_children; i++) assert_minimal(s->children[i], a->children[i]);
}

/* An empty slice at offset 50: minimal on the CPU, and after a trip
 * through the device and back. */
static void test_empty_slice(void** state) {
  (void)state;
  struct adr_error err;
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
    struct ArrowSchema schema;
    struct ArrowDeviceArray host, out, dev, back;
    cases[c].build(&schema, &host);
    struct ArrowDeviceArray empty = sliced(&host, host.array.offset + 50, 0);
    int64_t needed = fixture_needed_bytes(&schema, &empty.array);
    struct adr_copy_stats st = {.struct_size = sizeof(st)};
    ASSERT_OK(adr_device_array_deep_copy(&schema, &empty, test_cpu(), NULL, &out, &st, &err), &err);
    print_message("  empty %s: %lld bytes allocated, %lld needed\n", cases[c].name,
                  (long long)st.bytes_allocated, (long long)needed);
    assert_int_equal(st.bytes_allocated, needed);
    ASSERT_OK(adr_device_array_validate(&schema, &out, ADR_VALIDATE_FULL, &err), &err);
    assert_minimal(&schema, &out.array);
    ASSERT_OK(adr_device_array_deep_copy(&schema, &empty, dut, NULL, &dev, NULL, &err), &err);
    ASSERT_OK(adr_device_array_deep_copy(&schema, &dev, test_cpu(), NULL, &back, NULL, &err), &err);
    assert_minimal(&schema, &back.array);
    test_assert_equal(&schema, &empty, &back);
    adr_device_array_release(&back);
    adr_device_array_release(&dev);
    adr_device_array_release(&out);
    adr_device_array_release(&host);
    schema.release(&schema);
  }
}

/* The yardstick itself: a hand count for a small sliced string array. */
static void test_needed_bytes_by_hand(void** state) {
  (void)state;
  struct ArrowSchema schema;
  test_schema(&schema, "u", "s", ARROW_FLAG_NULLABLE, 0);
  const char* v[] = {"aa", "bbb", NULL, "c", "dddd", "ee"};
  struct ArrowArray a;
  test_strings(&a, v, 6, 0, false);
  a.offset = 1;
  a.length = 4; /* "bbb", null, "c", "dddd": 1 + 5 * 4 + 8 */
  a.null_count = 1;
  assert_int_equal(fixture_needed_bytes(&schema, &a), 1 + 5 * 4 + 8);
  a.release(&a);
  schema.release(&schema);
}

int main(void) {
  struct adr_error err;
  int st = adr_device_default(&dut, &err);
  if (st != 0) {
    const char* req = getenv("ADR_ARRAY_REQUIRE");
    fprintf(stderr, "device under test unavailable: %s\n", err.message);
    return req && strcmp(req, "1") == 0 ? 1 : 77;
  }
  fprintf(stderr, "device under test: %s\n", adr_device_name(dut));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_needed_bytes_by_hand),
      cmocka_unit_test(test_slice_0),
      cmocka_unit_test(test_slice_1),
      cmocka_unit_test(test_slice_2),
      cmocka_unit_test(test_slice_3),
      cmocka_unit_test(test_slice_4),
      cmocka_unit_test(test_slice_5),
      cmocka_unit_test(test_slice_6),
      cmocka_unit_test(test_slice_7),
      cmocka_unit_test(test_slice_8),
      cmocka_unit_test(test_slice_9),
      cmocka_unit_test(test_empty_slice),
  };
  return cmocka_run_group_tests_name("array-slice", tests, NULL, NULL);
}
