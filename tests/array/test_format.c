/* SPDX-License-Identifier: Apache-2.0
 *
 * The format-string parser: every type of the columnar format, the buffer
 * layout each implies, and malformed strings (EINVAL naming the position).
 */
#include <string.h>

#include "array_test.h"

struct expect {
  const char* format;
  enum adr_type type;
  enum adr_layout layout;
  int bit_width;
  int n_buffers;
  int n_children;
};

static const struct expect good[] = {
    {"n", ADR_TYPE_NA, ADR_LAYOUT_NULL, 0, 0, 0},
    {"b", ADR_TYPE_BOOL, ADR_LAYOUT_FIXED, 1, 2, 0},
    {"c", ADR_TYPE_INT8, ADR_LAYOUT_FIXED, 8, 2, 0},
    {"C", ADR_TYPE_UINT8, ADR_LAYOUT_FIXED, 8, 2, 0},
    {"s", ADR_TYPE_INT16, ADR_LAYOUT_FIXED, 16, 2, 0},
    {"S", ADR_TYPE_UINT16, ADR_LAYOUT_FIXED, 16, 2, 0},
    {"i", ADR_TYPE_INT32, ADR_LAYOUT_FIXED, 32, 2, 0},
    {"I", ADR_TYPE_UINT32, ADR_LAYOUT_FIXED, 32, 2, 0},
    {"l", ADR_TYPE_INT64, ADR_LAYOUT_FIXED, 64, 2, 0},
    {"L", ADR_TYPE_UINT64, ADR_LAYOUT_FIXED, 64, 2, 0},
    {"e", ADR_TYPE_HALF_FLOAT, ADR_LAYOUT_FIXED, 16, 2, 0},
    {"f", ADR_TYPE_FLOAT, ADR_LAYOUT_FIXED, 32, 2, 0},
    {"g", ADR_TYPE_DOUBLE, ADR_LAYOUT_FIXED, 64, 2, 0},
    {"z", ADR_TYPE_BINARY, ADR_LAYOUT_VAR_BINARY, 0, 3, 0},
    {"Z", ADR_TYPE_LARGE_BINARY, ADR_LAYOUT_VAR_BINARY, 0, 3, 0},
    {"u", ADR_TYPE_STRING, ADR_LAYOUT_VAR_BINARY, 0, 3, 0},
    {"U", ADR_TYPE_LARGE_STRING, ADR_LAYOUT_VAR_BINARY, 0, 3, 0},
    {"vz", ADR_TYPE_BINARY_VIEW, ADR_LAYOUT_BINARY_VIEW, 0, 3, 0},
    {"vu", ADR_TYPE_STRING_VIEW, ADR_LAYOUT_BINARY_VIEW, 0, 3, 0},
    {"d:9,2,32", ADR_TYPE_DECIMAL32, ADR_LAYOUT_FIXED, 32, 2, 0},
    {"d:18,-3,64", ADR_TYPE_DECIMAL64, ADR_LAYOUT_FIXED, 64, 2, 0},
    {"d:38,10", ADR_TYPE_DECIMAL128, ADR_LAYOUT_FIXED, 128, 2, 0},
    {"d:76,5,256", ADR_TYPE_DECIMAL256, ADR_LAYOUT_FIXED, 256, 2, 0},
    {"w:16", ADR_TYPE_FIXED_SIZE_BINARY, ADR_LAYOUT_FIXED, 128, 2, 0},
    {"tdD", ADR_TYPE_DATE32, ADR_LAYOUT_FIXED, 32, 2, 0},
    {"tdm", ADR_TYPE_DATE64, ADR_LAYOUT_FIXED, 64, 2, 0},
    {"tts", ADR_TYPE_TIME32, ADR_LAYOUT_FIXED, 32, 2, 0},
    {"ttm", ADR_TYPE_TIME32, ADR_LAYOUT_FIXED, 32, 2, 0},
    {"ttu", ADR_TYPE_TIME64, ADR_LAYOUT_FIXED, 64, 2, 0},
    {"ttn", ADR_TYPE_TIME64, ADR_LAYOUT_FIXED, 64, 2, 0},
    {"tss:", ADR_TYPE_TIMESTAMP, ADR_LAYOUT_FIXED, 64, 2, 0},
    {"tsn:America/New_York", ADR_TYPE_TIMESTAMP, ADR_LAYOUT_FIXED, 64, 2, 0},
    {"tDm", ADR_TYPE_DURATION, ADR_LAYOUT_FIXED, 64, 2, 0},
    {"tiM", ADR_TYPE_INTERVAL_MONTHS, ADR_LAYOUT_FIXED, 32, 2, 0},
    {"tiD", ADR_TYPE_INTERVAL_DAY_TIME, ADR_LAYOUT_FIXED, 64, 2, 0},
    {"tin", ADR_TYPE_INTERVAL_MONTH_DAY_NANO, ADR_LAYOUT_FIXED, 128, 2, 0},
    {"+l", ADR_TYPE_LIST, ADR_LAYOUT_LIST, 0, 2, 1},
    {"+L", ADR_TYPE_LARGE_LIST, ADR_LAYOUT_LIST, 0, 2, 1},
    {"+vl", ADR_TYPE_LIST_VIEW, ADR_LAYOUT_LIST_VIEW, 0, 3, 1},
    {"+vL", ADR_TYPE_LARGE_LIST_VIEW, ADR_LAYOUT_LIST_VIEW, 0, 3, 1},
    {"+w:4", ADR_TYPE_FIXED_SIZE_LIST, ADR_LAYOUT_FIXED_LIST, 0, 1, 1},
    {"+s", ADR_TYPE_STRUCT, ADR_LAYOUT_STRUCT, 0, 1, -1},
    {"+m", ADR_TYPE_MAP, ADR_LAYOUT_LIST, 0, 2, 1},
    {"+us:0,1,2", ADR_TYPE_SPARSE_UNION, ADR_LAYOUT_SPARSE_UNION, 0, 1, 3},
    {"+ud:5,127", ADR_TYPE_DENSE_UNION, ADR_LAYOUT_DENSE_UNION, 0, 2, 2},
    {"+ud:", ADR_TYPE_DENSE_UNION, ADR_LAYOUT_DENSE_UNION, 0, 2, 0},
    {"+r", ADR_TYPE_RUN_END_ENCODED, ADR_LAYOUT_RUN_END, 0, 0, 2},
};

static void test_every_type(void** state) {
  (void)state;
  struct adr_error err;
  bool seen[ADR_TYPE_COUNT_] = {false};
  for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
    struct adr_format f;
    ASSERT_OK(adr_format_parse(good[i].format, &f, &err), &err);
    if (f.type != good[i].type || f.layout != good[i].layout || f.bit_width != good[i].bit_width ||
        f.n_buffers != good[i].n_buffers || f.n_children != good[i].n_children)
      fail_msg("%s: type %d layout %d bits %d buffers %d children %d", good[i].format, f.type,
               f.layout, f.bit_width, f.n_buffers, f.n_children);
    assert_non_null(adr_type_name(f.type));
    seen[f.type] = true;
  }
  for (int t = 0; t < ADR_TYPE_COUNT_; t++)
    if (!seen[t]) fail_msg("type %s not covered", adr_type_name((enum adr_type)t));
  assert_null(adr_type_name(ADR_TYPE_COUNT_));
}

static void test_parameters(void** state) {
  (void)state;
  struct adr_error err;
  struct adr_format f;
  ASSERT_OK(adr_format_parse("d:18,-3,64", &f, &err), &err);
  assert_int_equal(f.precision, 18);
  assert_int_equal(f.scale, -3);
  ASSERT_OK(adr_format_parse("tsn:America/New_York", &f, &err), &err);
  assert_int_equal(f.unit, ADR_TIME_UNIT_NANO);
  assert_int_equal(f.timezone_length, strlen("America/New_York"));
  assert_memory_equal(f.timezone, "America/New_York", f.timezone_length);
  ASSERT_OK(adr_format_parse("tsu:", &f, &err), &err);
  assert_null(f.timezone);
  ASSERT_OK(adr_format_parse("ttm", &f, &err), &err);
  assert_int_equal(f.unit, ADR_TIME_UNIT_MILLI);
  ASSERT_OK(adr_format_parse("w:3", &f, &err), &err);
  assert_int_equal(f.fixed_size, 3);
  assert_int_equal(f.bit_width, 24);
  ASSERT_OK(adr_format_parse("+w:7", &f, &err), &err);
  assert_int_equal(f.fixed_size, 7);
  ASSERT_OK(adr_format_parse("+ud:5,127,0", &f, &err), &err);
  assert_int_equal(f.n_type_ids, 3);
  assert_int_equal(f.type_ids[0], 5);
  assert_int_equal(f.type_ids[1], 127);
  assert_int_equal(f.type_ids[2], 0);
  assert_int_equal(f.offset_bytes, 4);
  ASSERT_OK(adr_format_parse("U", &f, &err), &err);
  assert_int_equal(f.offset_bytes, 8);
}

static void test_malformed(void** state) {
  (void)state;
  struct adr_error err;
  struct {
    const char* format;
    const char* message;
  } bad[] = {
      {"", "format is empty"},
      {"x", "unknown type character at position 1"},
      {"ii", "unexpected trailing characters at position 2"},
      {"v", "expected z or u after v at position 2"},
      {"vuu", "unexpected trailing characters at position 3"},
      {"w", "expected ':' after w"},
      {"w:", "expected a byte width"},
      {"w:0", "expected a byte width"},
      {"w:12x", "unexpected trailing characters at position 5"},
      {"d:", "expected a decimal precision"},
      {"d:10", "expected ',' after the decimal precision"},
      {"d:10,", "expected a decimal scale"},
      {"d:10,2,48", "decimal bit width must be 32, 64, 128 or 256"},
      {"d:39,2", "decimal precision too large"},
      {"d:10,2,32", "decimal precision too large"},
      {"d:99999999999999999999,1", "expected a decimal precision"},
      {"t", "missing temporal kind"},
      {"td", "missing temporal unit"},
      {"tdX", "unknown date unit"},
      {"ttx", "unknown time unit"},
      {"tsu", "expected ':' before the time zone"},
      {"tDq", "unknown duration unit"},
      {"tix", "unknown interval unit"},
      {"tqs", "unknown temporal kind"},
      {"tdDD", "unexpected trailing characters at position 4"},
      {"+", "missing nested type"},
      {"+q", "unknown nested type"},
      {"+lx", "unexpected trailing characters at position 3"},
      {"+v", "expected l or L after +v"},
      {"+w", "expected ':' after +w"},
      {"+w:-1", "expected a list size"},
      {"+u", "expected d or s after +u"},
      {"+ud", "expected ':' before the union type ids"},
      {"+ud:1,,2", "expected a union type id"},
      {"+ud:1,1", "duplicate union type id"},
      {"+us:128", "expected a union type id in 0..127"},
      {"+us:1;2", "expected ',' between union type ids"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    struct adr_format f;
    memset(&err, 0, sizeof(err));
    int st = adr_format_parse(bad[i].format, &f, &err);
    if (st != EINVAL) fail_msg("\"%s\" returned %d", bad[i].format, st);
    if (strstr(err.message, bad[i].message) == NULL)
      fail_msg("\"%s\": message \"%s\" lacks \"%s\"", bad[i].format, err.message, bad[i].message);
    assert_non_null(strstr(err.message, "[adr_format_parse]"));
  }
  struct adr_format f;
  assert_int_equal(adr_format_parse(NULL, &f, &err), EINVAL);
  assert_non_null(strstr(err.message, "format is NULL"));
  assert_int_equal(adr_format_parse("i", NULL, &err), EINVAL);
}

static void test_buffer_sizes(void** state) {
  (void)state;
  struct adr_error err;
  struct adr_format f;
  int64_t sz[6];
  ASSERT_OK(adr_format_parse("i", &f, &err), &err);
  ASSERT_OK(adr_format_buffer_sizes(&f, 3, 10, 2, sz, &err), &err);
  assert_int_equal(sz[0], 2);
  assert_int_equal(sz[1], 52);
  ASSERT_OK(adr_format_parse("b", &f, &err), &err);
  ASSERT_OK(adr_format_buffer_sizes(&f, 0, 17, 2, sz, &err), &err);
  assert_int_equal(sz[0], 3);
  assert_int_equal(sz[1], 3);
  ASSERT_OK(adr_format_parse("U", &f, &err), &err);
  ASSERT_OK(adr_format_buffer_sizes(&f, 1, 4, 3, sz, &err), &err);
  assert_int_equal(sz[1], 48);
  assert_int_equal(sz[2], ADR_BUFFER_SIZE_DATA_DEPENDENT);
  ASSERT_OK(adr_format_parse("vu", &f, &err), &err);
  ASSERT_OK(adr_format_buffer_sizes(&f, 0, 5, 5, sz, &err), &err);
  assert_int_equal(sz[1], 80);
  assert_int_equal(sz[2], ADR_BUFFER_SIZE_DATA_DEPENDENT);
  assert_int_equal(sz[3], ADR_BUFFER_SIZE_DATA_DEPENDENT);
  assert_int_equal(sz[4], 16);
  ASSERT_OK(adr_format_parse("+vl", &f, &err), &err);
  ASSERT_OK(adr_format_buffer_sizes(&f, 2, 2, 3, sz, &err), &err);
  assert_int_equal(sz[1], 16);
  assert_int_equal(sz[2], 16);
  ASSERT_OK(adr_format_parse("+ud:1,2", &f, &err), &err);
  ASSERT_OK(adr_format_buffer_sizes(&f, 0, 9, 2, sz, &err), &err);
  assert_int_equal(sz[0], 9);
  assert_int_equal(sz[1], 36);
  ASSERT_OK(adr_format_parse("tin", &f, &err), &err);
  ASSERT_OK(adr_format_buffer_sizes(&f, 0, 2, 2, sz, &err), &err);
  assert_int_equal(sz[1], 32);
  ASSERT_OK(adr_format_parse("+r", &f, &err), &err);
  ASSERT_OK(adr_format_buffer_sizes(&f, 0, 2, 0, NULL, &err), &err);
  /* errors */
  ASSERT_OK(adr_format_parse("i", &f, &err), &err);
  assert_int_equal(adr_format_buffer_sizes(&f, 0, 1, 3, sz, &err), EINVAL);
  assert_non_null(strstr(err.message, "int32 has 2 buffers, not 3"));
  assert_int_equal(adr_format_buffer_sizes(&f, -1, 1, 2, sz, &err), EINVAL);
  assert_non_null(strstr(err.message, "negative offset"));
  assert_int_equal(adr_format_buffer_sizes(&f, INT64_MAX, 1, 2, sz, &err), EOVERFLOW);
  ASSERT_OK(adr_format_parse("tin", &f, &err), &err);
  assert_int_equal(adr_format_buffer_sizes(&f, 0, INT64_MAX / 8, 2, sz, &err), EOVERFLOW);
  ASSERT_OK(adr_format_parse("vz", &f, &err), &err);
  assert_int_equal(adr_format_buffer_sizes(&f, 0, 1, 2, sz, &err), EINVAL);
}

static void test_schema_builders(void** state) {
  (void)state;
  struct adr_error err;
  struct ArrowSchema s;
  assert_int_equal(adr_schema_init(&s, "q", "bad", 0, 0, &err), EINVAL);
  assert_non_null(strstr(err.message, "unknown type character"));
  test_schema(&s, "+s", "root", 0, 1);
  test_schema(s.children[0], "i", "idx", ARROW_FLAG_NULLABLE, 0);
  ASSERT_OK(adr_schema_alloc_dictionary(s.children[0], &err), &err);
  assert_int_equal(adr_schema_alloc_dictionary(s.children[0], &err), EINVAL);
  test_schema(s.children[0]->dictionary, "u", NULL, 0, 0);
  /* metadata: {"k": "v"} */
  const char md[] = {1, 0, 0, 0, 1, 0, 0, 0, 'k', 1, 0, 0, 0, 'v'};
  ASSERT_OK(adr_schema_set_metadata(&s, md, &err), &err);
  struct ArrowSchema c;
  ASSERT_OK(adr_schema_copy(&s, &c, &err), &err);
  assert_string_equal(c.format, "+s");
  assert_string_equal(c.name, "root");
  assert_memory_equal(c.metadata, md, sizeof(md));
  assert_string_equal(c.children[0]->format, "i");
  assert_int_equal(c.children[0]->flags, ARROW_FLAG_NULLABLE);
  assert_string_equal(c.children[0]->dictionary->format, "u");
  assert_null(c.children[0]->dictionary->name);
  c.release(&c);
  assert_null(c.release);
  s.release(&s);
  struct ArrowSchema released = {0};
  assert_int_equal(adr_schema_copy(&released, &c, &err), EINVAL);
  assert_non_null(strstr(err.message, "released"));
  assert_int_equal(adr_schema_set_metadata(&released, md, &err), EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_type),    cmocka_unit_test(test_parameters),
      cmocka_unit_test(test_malformed),     cmocka_unit_test(test_buffer_sizes),
      cmocka_unit_test(test_schema_builders),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
