/* SPDX-License-Identifier: Apache-2.0
 *
 * Validation: every catalogue array is valid; each kind of bad input is
 * EINVAL with a message naming the path to the bad child and the problem.
 */
#include <string.h>

#include "array_test.h"

static void expect_invalid(const struct ArrowSchema* s, const struct ArrowDeviceArray* a,
                           enum adr_validate_level level, const char* needle) {
  struct adr_error err;
  memset(&err, 0, sizeof(err));
  int st = adr_device_array_validate(s, a, level, &err);
  if (st != EINVAL) fail_msg("expected EINVAL for \"%s\", got %d (%s)", needle, st, err.message);
  if (strstr(err.message, needle) == NULL)
    fail_msg("message \"%s\" lacks \"%s\"", err.message, needle);
  assert_non_null(strstr(err.message, "[adr_device_array_validate]"));
}

static void test_catalogue_valid(void** state) {
  (void)state;
  struct adr_error err;
  for (size_t i = 0; i < test_case_count; i++) {
    struct ArrowSchema s;
    struct ArrowDeviceArray a;
    test_cases[i].build(&s, &a);
    ASSERT_OK(adr_device_array_validate(&s, &a, ADR_VALIDATE_STRUCTURE, &err), &err);
    ASSERT_OK(adr_device_array_validate(&s, &a, ADR_VALIDATE_FULL, &err), &err);
    adr_device_array_release(&a);
    s.release(&s);
  }
}

/* A struct<i: int32, s: utf8, l: list<int32>> of 8 rows to break. */
static void make_table(struct ArrowSchema* s, struct ArrowDeviceArray* out) {
  test_schema(s, "+s", "", 0, 3);
  test_schema(s->children[0], "i", "i", ARROW_FLAG_NULLABLE, 0);
  test_schema(s->children[1], "u", "s", ARROW_FLAG_NULLABLE, 0);
  test_schema(s->children[2], "+l", "l", ARROW_FLAG_NULLABLE, 1);
  test_schema(s->children[2]->children[0], "i", "item", ARROW_FLAG_NULLABLE, 0);
  struct ArrowArray a;
  test_node(&a, 1, 3, 8, 0, 0);
  test_int32s(a.children[0], 8, 0, 3, 0);
  const char* v[] = {"a", "bb", NULL, "dddd", "e", "", "ggg", "h"};
  test_strings(a.children[1], v, 8, 0, false);
  struct ArrowArray* l = a.children[2];
  test_node(l, 2, 1, 8, 0, 0);
  int32_t* o = test_buffer(l, 1, 9 * 4, NULL);
  for (int k = 0; k <= 8; k++) o[k] = k * 2;
  test_int32s(l->children[0], 16, 0, 0, 0);
  test_export(&a, out);
}

static void test_structure_errors(void** state) {
  (void)state;
  struct ArrowSchema s;
  struct ArrowDeviceArray a;
  make_table(&s, &a);
  struct ArrowArray* i = a.array.children[0];
  struct ArrowArray* str = a.array.children[1];
  struct ArrowArray* l = a.array.children[2];

  a.array.length = -1;
  expect_invalid(&s, &a, ADR_VALIDATE_STRUCTURE, "array: negative length -1");
  a.array.length = 8;
  a.array.offset = -2;
  expect_invalid(&s, &a, ADR_VALIDATE_STRUCTURE, "array: negative offset -2");
  a.array.offset = 0;
  i->null_count = 9;
  expect_invalid(&s, &a, ADR_VALIDATE_STRUCTURE, "children[0]: null_count 9 out of range");
  i->null_count = -1;
  str->n_buffers = 2;
  expect_invalid(&s, &a, ADR_VALIDATE_STRUCTURE, "children[1]: string has 3 buffers, not 2");
  str->n_buffers = 3;
  const void* saved = l->buffers[1];
  l->buffers[1] = NULL;
  expect_invalid(&s, &a, ADR_VALIDATE_STRUCTURE, "children[2]: buffer 1 is NULL");
  l->buffers[1] = saved;
  l->children[0]->length = -4;
  expect_invalid(&s, &a, ADR_VALIDATE_STRUCTURE, "children[2].children[0]: negative length -4");
  l->children[0]->length = 16;
  i->length = 5;
  expect_invalid(&s, &a, ADR_VALIDATE_STRUCTURE, "children[0] has length 5, needs");
  i->length = 8;
  a.array.n_children = 2;
  expect_invalid(&s, &a, ADR_VALIDATE_STRUCTURE, "schema has 3 children, array has 2");
  a.array.n_children = 3;
  /* a released child */
  struct ArrowArray moved = *l->children[0];
  l->children[0]->release = NULL;
  expect_invalid(&s, &a, ADR_VALIDATE_STRUCTURE, "children[2].children[0]: array is released");
  *l->children[0] = moved;
  /* NULL validity with nulls */
  const void* bits = i->buffers[0];
  i->buffers[0] = NULL;
  i->null_count = 2;
  expect_invalid(&s, &a, ADR_VALIDATE_STRUCTURE, "null_count 2 but no validity buffer");
  i->buffers[0] = bits;
  i->null_count = -1;
  /* unknown device type */
  a.device_type = 99;
  expect_invalid(&s, &a, ADR_VALIDATE_STRUCTURE, "unknown device_type 99");
  a.device_type = ARROW_DEVICE_CPU;
  /* malformed format in a child */
  struct ArrowSchema* cs = s.children[1];
  const char* fmt = cs->format;
  cs->format = "+w:";
  expect_invalid(&s, &a, ADR_VALIDATE_STRUCTURE, "children[1]: format \"+w:\"");
  cs->format = fmt;
  /* dictionary mismatch */
  struct ArrowArray dict;
  test_int32s(&dict, 2, 0, 0, 0);
  i->dictionary = &dict;
  expect_invalid(&s, &a, ADR_VALIDATE_STRUCTURE, "children[0]: the schema has no a dictionary");
  i->dictionary = NULL;
  dict.release(&dict);
  /* bad level, NULLs, released */
  struct adr_error err;
  assert_int_equal(adr_device_array_validate(&s, &a, (enum adr_validate_level)7, &err), EINVAL);
  assert_int_equal(adr_device_array_validate(&s, NULL, ADR_VALIDATE_FULL, &err), EINVAL);
  expect_invalid(NULL, &a, ADR_VALIDATE_STRUCTURE, "array: schema is NULL");
  /* all restored: valid again */
  ASSERT_OK(adr_device_array_validate(&s, &a, ADR_VALIDATE_FULL, &err), &err);
  adr_device_array_release(&a);
  expect_invalid(&s, &a, ADR_VALIDATE_STRUCTURE, "array: array is released");
  s.release(&s);
  expect_invalid(&s, &a, ADR_VALIDATE_STRUCTURE, "array: schema is released");
}

static void test_data_errors(void** state) {
  (void)state;
  struct ArrowSchema s;
  struct ArrowDeviceArray a;
  make_table(&s, &a);
  struct adr_error err;
  struct ArrowArray* i = a.array.children[0];
  struct ArrowArray* str = a.array.children[1];
  struct ArrowArray* l = a.array.children[2];
  int32_t* so = (int32_t*)str->buffers[1];
  int32_t* lo = (int32_t*)l->buffers[1];
  char* sd = (char*)str->buffers[2];

  /* structure is fine, data is not */
  lo[6] = 20;
  ASSERT_OK(adr_device_array_validate(&s, &a, ADR_VALIDATE_STRUCTURE, &err), &err);
  expect_invalid(&s, &a, ADR_VALIDATE_FULL, "children[2]: offsets not monotonic at 6");
  lo[6] = 12;
  lo[8] = 17;
  expect_invalid(&s, &a, ADR_VALIDATE_FULL,
                 "children[2]: last offset 17 beyond the child's length 16");
  lo[8] = 16;
  so[3] = 9;
  expect_invalid(&s, &a, ADR_VALIDATE_FULL, "children[1]: offsets not monotonic at 3");
  so[3] = 3;
  char saved = sd[4];
  sd[4] = (char)0xC3; /* "dddd" -> a truncated two-byte sequence */
  expect_invalid(&s, &a, ADR_VALIDATE_FULL, "children[1]: invalid UTF-8 in value 3 at byte 1");
  sd[4] = saved;
  i->null_count = 0;
  expect_invalid(&s, &a, ADR_VALIDATE_FULL,
                 "children[0]: null_count 0 but the validity bitmap has 3 nulls");
  i->null_count = 3;
  ASSERT_OK(adr_device_array_validate(&s, &a, ADR_VALIDATE_FULL, &err), &err);
  /* a slice: indices are logical */
  a.array.offset = 2;
  a.array.length = 6;
  lo[5] = 1;
  expect_invalid(&s, &a, ADR_VALIDATE_FULL, "children[2]: offsets not monotonic at 4");
  lo[5] = 10;
  adr_device_array_release(&a);
  s.release(&s);
}

static void test_union_ree_view_dict_errors(void** state) {
  (void)state;
  struct adr_error err;
  struct ArrowSchema s;
  struct ArrowDeviceArray a;
  for (size_t c = 0; c < test_case_count; c++) {
    const char* name = test_cases[c].name;
    test_cases[c].build(&s, &a);
    struct ArrowArray* root = &a.array;
    if (strcmp(name, "unions") == 0) {
      int8_t* types = (int8_t*)root->children[1]->buffers[0];
      int32_t* offs = (int32_t*)root->children[1]->buffers[1];
      types[5] = 6;
      expect_invalid(&s, &a, ADR_VALIDATE_FULL,
                     "children[1]: type id 6 at 5 is not one of the union's");
      types[5] = 7;
      offs[4] = 99;
      expect_invalid(&s, &a, ADR_VALIDATE_FULL, "children[1]: dense union offset 99 at 4");
      offs[4] = 2;
      int8_t* stypes = (int8_t*)root->children[0]->buffers[0];
      stypes[4] = -1;
      expect_invalid(&s, &a, ADR_VALIDATE_FULL, "children[0]: type id -1 at 4");
      stypes[4] = 0;
      root->children[0]->null_count = 1;
      expect_invalid(&s, &a, ADR_VALIDATE_STRUCTURE, "null_count must be 0");
      root->children[0]->null_count = 0;
    } else if (strcmp(name, "run-end-encoded") == 0) {
      int32_t* ends = (int32_t*)root->children[0]->buffers[1];
      ends[2] = 5;
      expect_invalid(&s, &a, ADR_VALIDATE_FULL, "array: run ends not strictly increasing at run 2");
      ends[2] = 6;
      ends[4] = 11;
      expect_invalid(&s, &a, ADR_VALIDATE_FULL,
                     "run ends cover 11 values, the array needs offset + length = 12");
      ends[4] = 12;
      root->children[1]->length = 4;
      expect_invalid(&s, &a, ADR_VALIDATE_STRUCTURE,
                     "run ends child has length 5, more than the values' 4");
      root->children[1]->length = 5;
    } else if (strcmp(name, "views") == 0) {
      uint8_t* views = (uint8_t*)root->children[0]->buffers[1];
      int32_t bad = 7;
      memcpy(views + 16 * 1 + 8, &bad, 4); /* buffer index of view 1 */
      expect_invalid(&s, &a, ADR_VALIDATE_FULL, "children[0]: view 1 references buffer 7 of 2");
      bad = 0;
      memcpy(views + 16 * 1 + 8, &bad, 4);
      bad = 40;
      memcpy(views + 16 * 1 + 12, &bad, 4);
      expect_invalid(&s, &a, ADR_VALIDATE_FULL,
                     "children[0]: view 1 range [40, 63) outside buffer 0");
      bad = 0;
      memcpy(views + 16 * 1 + 12, &bad, 4);
      views[16 * 1 + 4] = 'X';
      expect_invalid(&s, &a, ADR_VALIDATE_FULL, "children[0]: view 1 prefix does not match");
      views[16 * 1 + 4] = 't';
    } else if (strcmp(name, "dictionary") == 0) {
      int8_t* idx = (int8_t*)root->children[0]->buffers[1];
      idx[3] = 6;
      expect_invalid(&s, &a, ADR_VALIDATE_FULL,
                     "children[0]: dictionary index 6 at 3 outside the dictionary of length 6");
      idx[3] = 3;
      struct ArrowArray* dv = root->children[0]->dictionary;
      ((int32_t*)dv->buffers[1])[3] = 100;
      expect_invalid(&s, &a, ADR_VALIDATE_FULL,
                     "children[0].dictionary: offsets not monotonic at 2");
    } else if (strcmp(name, "lists") == 0) {
      struct ArrowArray* lv = root->children[2];
      int32_t* sizes = (int32_t*)lv->buffers[2];
      sizes[1] = 9; /* offset (16-1)%7 = 1, size 9 > 9 - 1 */
      expect_invalid(&s, &a, ADR_VALIDATE_FULL,
                     "children[2]: list view 1 (offset 1, size 9) outside the child's length 9");
      sizes[1] = 1;
      root->children[4]->children[0]->length = 10;
      expect_invalid(&s, &a, ADR_VALIDATE_STRUCTURE,
                     "children[4]: fixed-size list child has length 10, needs 48");
      root->children[4]->children[0]->length = 48;
    } else if (strcmp(name, "map") == 0) {
      struct ArrowArray* keys = root->children[0]->children[0];
      ((uint8_t*)keys->buffers[0])[0] &= (uint8_t)~1u;
      expect_invalid(&s, &a, ADR_VALIDATE_FULL, "array: map keys contain nulls");
      ((uint8_t*)keys->buffers[0])[0] |= 1u;
      s.children[0]->children[0]->flags |= ARROW_FLAG_NULLABLE;
      expect_invalid(&s, &a, ADR_VALIDATE_STRUCTURE, "map keys must not be nullable");
      s.children[0]->children[0]->flags = 0;
    } else {
      ASSERT_OK(adr_device_array_validate(&s, &a, ADR_VALIDATE_FULL, &err), &err);
    }
    if (strcmp(name, "dictionary") != 0)
      ASSERT_OK(adr_device_array_validate(&s, &a, ADR_VALIDATE_FULL, &err), &err);
    adr_device_array_release(&a);
    s.release(&s);
  }
}

/* Children without buffers (buffers == NULL, n_buffers 0) on every path
 * that reads buffers: map keys of the null type hold nulls, so full
 * validation refuses a map that has entries (it used to read
 * keys->buffers[0]), the comparison refuses it with the same message, the
 * deep copy (which needs only the structure) copies it. */
static void test_map_null_keys(void** state) {
  (void)state;
  struct adr_error err;
  struct ArrowSchema s;
  test_schema(&s, "+m", "map", 0, 1);
  test_schema(s.children[0], "+s", "entries", 0, 2);
  test_schema(s.children[0]->children[0], "n", "key", 0, 0);
  test_schema(s.children[0]->children[1], "i", "value", ARROW_FLAG_NULLABLE, 0);
  struct ArrowArray a;
  test_node(&a, 2, 1, 2, 0, 0);
  int32_t* o = test_buffer(&a, 1, 3 * 4, NULL);
  o[1] = 1;
  o[2] = 3;
  struct ArrowArray* e = a.children[0];
  test_node(e, 1, 2, 3, 0, 0);
  test_node(e->children[0], 0, 0, 3, 0, 3);
  e->children[0]->buffers = NULL;
  test_int32s(e->children[1], 3, 1, 0, 0);
  struct ArrowDeviceArray d;
  test_export(&a, &d);
  ASSERT_OK(adr_device_array_validate(&s, &d, ADR_VALIDATE_STRUCTURE, &err), &err);
  expect_invalid(&s, &d, ADR_VALIDATE_FULL, "array: map keys contain nulls");
  bool eq = true;
  assert_int_equal(adr_device_array_equal(&s, &d, &d, &eq, NULL, &err), EINVAL);
  assert_non_null(strstr(err.message, "[adr_device_array_equal] array: map keys contain nulls"));
  struct ArrowDeviceArray copy;
  ASSERT_OK(adr_device_array_deep_copy(&s, &d, test_cpu(), NULL, &copy, NULL, &err), &err);
  assert_int_equal(copy.array.children[0]->children[0]->length, 3);
  expect_invalid(&s, &copy, ADR_VALIDATE_FULL, "array: map keys contain nulls");
  adr_device_array_release(&copy);
  /* without entries the same map is valid */
  o[1] = o[2] = 0;
  e->length = e->children[0]->length = e->children[1]->length = 0;
  e->children[0]->null_count = 0;
  ASSERT_OK(adr_device_array_validate(&s, &d, ADR_VALIDATE_FULL, &err), &err);
  test_assert_equal(&s, &d, &d);
  adr_device_array_release(&d);
  s.release(&s);
}

/* A NULL validity buffer means "all valid" (docs/arrays.md): with
 * null_count 0 or -1 (unknown) the array is valid for both validation
 * levels and the deep copy, whose copy says null_count 0; with a positive
 * null_count both refuse it with one message. */
static void test_absent_validity(void** state) {
  (void)state;
  struct adr_error err;
  struct ArrowSchema s;
  test_schema(&s, "i", "i", ARROW_FLAG_NULLABLE, 0);
  struct ArrowArray a;
  test_node(&a, 2, 0, 6, 2, -1);
  int32_t* v = test_buffer(&a, 1, 8 * 4, NULL);
  for (int k = 0; k < 8; k++) v[k] = k * 10;
  struct ArrowDeviceArray d;
  test_export(&a, &d);
  ASSERT_OK(adr_device_array_validate(&s, &d, ADR_VALIDATE_STRUCTURE, &err), &err);
  ASSERT_OK(adr_device_array_validate(&s, &d, ADR_VALIDATE_FULL, &err), &err);
  struct ArrowDeviceArray copy;
  ASSERT_OK(adr_device_array_deep_copy(&s, &d, test_cpu(), NULL, &copy, NULL, &err), &err);
  assert_null(copy.array.buffers[0]);
  assert_int_equal(copy.array.null_count, 0);
  assert_int_equal(copy.array.length, 6);
  assert_int_equal(((const int32_t*)copy.array.buffers[1])[copy.array.offset], 20);
  ASSERT_OK(adr_device_array_validate(&s, &copy, ADR_VALIDATE_FULL, &err), &err);
  test_assert_equal(&s, &d, &copy);
  adr_device_array_release(&copy);
  d.array.null_count = 2;
  expect_invalid(&s, &d, ADR_VALIDATE_STRUCTURE, "array: null_count 2 but no validity buffer");
  assert_int_equal(adr_device_array_deep_copy(&s, &d, test_cpu(), NULL, &copy, NULL, &err), EINVAL);
  assert_non_null(strstr(
      err.message, "[adr_device_array_deep_copy] array: null_count 2 but no validity buffer"));
  adr_device_array_release(&d);
  s.release(&s);
}

/* Deep nesting is refused, not a stack overflow. */
static void test_depth_limit(void** state) {
  (void)state;
  enum { DEPTH = 70 };
  struct ArrowSchema s[DEPTH];
  struct ArrowSchema* sp[DEPTH];
  struct ArrowArray a[DEPTH];
  struct ArrowArray* ap[DEPTH];
  const void* bufs[1] = {NULL};
  for (int k = 0; k < DEPTH; k++) {
    memset(&s[k], 0, sizeof(s[k]));
    memset(&a[k], 0, sizeof(a[k]));
    s[k].format = "+s";
    s[k].n_children = k + 1 < DEPTH ? 1 : 0;
    sp[k] = k + 1 < DEPTH ? &s[k + 1] : NULL;
    s[k].children = k + 1 < DEPTH ? &sp[k] : NULL;
    s[k].release = (void (*)(struct ArrowSchema*))1; /* never called */
    a[k].n_buffers = 1;
    a[k].buffers = bufs;
    a[k].n_children = s[k].n_children;
    ap[k] = k + 1 < DEPTH ? &a[k + 1] : NULL;
    a[k].children = k + 1 < DEPTH ? &ap[k] : NULL;
    a[k].release = (void (*)(struct ArrowArray*))1;
  }
  struct ArrowDeviceArray d;
  memset(&d, 0, sizeof(d));
  d.array = a[0];
  d.device_type = ARROW_DEVICE_CPU;
  d.device_id = -1;
  expect_invalid(&s[0], &d, ADR_VALIDATE_STRUCTURE, "nested deeper than 64 levels");
}

/* The sample-table fixture (tools/fixtures/sample_table.h) the other array
 * tests build on: valid, with the shape its header promises. */
static void test_sample_table_fixture(void** state) {
  (void)state;
  struct adr_error err;
  struct ArrowSchema s;
  struct ArrowDeviceArray a;
  ASSERT_OK(fixture_sample_table(15, &s, &a, &err), &err);
  ASSERT_OK(adr_device_array_validate(&s, &a, ADR_VALIDATE_FULL, &err), &err);
  assert_int_equal(a.device_type, ARROW_DEVICE_CPU);
  assert_int_equal(a.array.length, 15);
  assert_int_equal(a.array.n_children, 4);
  assert_string_equal(s.children[1]->name, "name");
  assert_int_equal(a.array.children[1]->null_count, 2); /* rows 3 and 10 */
  const int64_t* ids = a.array.children[0]->buffers[1];
  assert_int_equal(ids[14], 14 * 3 - 7);
  assert_int_equal(a.array.children[2]->children[0]->length, 21); /* sum of i % 4 */
  adr_device_array_release(&a);
  s.release(&s);
  memset(&err, 0, sizeof(err));
  assert_int_equal(fixture_sample_table(-1, &s, &a, &err), EINVAL);
  assert_string_equal(err.message, "[fixture_sample_table] rows -1 outside [0, 100000000]");
  assert_int_equal(fixture_sample_table(1, NULL, &a, &err), EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_catalogue_valid), cmocka_unit_test(test_structure_errors),
      cmocka_unit_test(test_data_errors),     cmocka_unit_test(test_union_ree_view_dict_errors),
      cmocka_unit_test(test_depth_limit),     cmocka_unit_test(test_map_null_keys),
      cmocka_unit_test(test_absent_validity), cmocka_unit_test(test_sample_table_fixture),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
