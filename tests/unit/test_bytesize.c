/* SPDX-License-Identifier: Apache-2.0
 *
 * Unit test of the one byte-size grammar (backends/common/bytesize.c,
 * compiled into this test; the core's ADR_ALLOC parser and the backends'
 * size variables use it): every unit suffix in every case, fractions and
 * their rounding, the 2^64 - 1 limit, what is rejected and at which column,
 * and the wording of the shared syntax error.
 */
/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "bytesize.h"

static uint64_t parse_ok(const char* text) {
  struct adr_error e = {{0}};
  uint64_t v = 0;
  int st = adr_bytesize_parse("SIZE", text, &v, &e);
  if (st != 0) fail_msg("\"%s\" rejected: %s", text, e.message);
  return v;
}

/* Rejected, with the problem at 1-based `column`. */
static void parse_bad(const char* text, size_t column, const char* expected) {
  struct adr_error e = {{0}};
  uint64_t v = 12345;
  assert_int_equal(adr_bytesize_parse("SIZE", text, &v, &e), EINVAL);
  assert_int_equal(v, 12345); /* untouched */
  char want[128];
  snprintf(want, sizeof(want), "SIZE=\"%s\": column %zu: expected ", text, column);
  if (strncmp(e.message, want, strlen(want)) != 0)
    fail_msg("\"%s\": got \"%s\", want a message starting \"%s\"", text, e.message, want);
  if (strstr(e.message, expected) == NULL)
    fail_msg("\"%s\": \"%s\" does not say \"%s\"", text, e.message, expected);
}

static void test_every_unit(void** state) {
  (void)state;
  static const struct {
    const char* unit;
    uint64_t scale;
  } units[] = {
      {"", 1},
      {"B", 1},
      {"K", UINT64_C(1) << 10},
      {"KiB", UINT64_C(1) << 10},
      {"KB", 1000},
      {"M", UINT64_C(1) << 20},
      {"MiB", UINT64_C(1) << 20},
      {"MB", 1000000},
      {"G", UINT64_C(1) << 30},
      {"GiB", UINT64_C(1) << 30},
      {"GB", 1000000000},
      {"T", UINT64_C(1) << 40},
      {"TiB", UINT64_C(1) << 40},
      {"TB", UINT64_C(1000000000000)},
  };
  for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
    char text[32], lower[32], upper[32];
    snprintf(text, sizeof(text), "3%s", units[i].unit);
    for (size_t k = 0; k <= strlen(text); k++) {
      lower[k] = (char)(text[k] >= 'A' && text[k] <= 'Z' ? text[k] - 'A' + 'a' : text[k]);
      upper[k] = (char)(text[k] >= 'a' && text[k] <= 'z' ? text[k] - 'a' + 'A' : text[k]);
    }
    assert_int_equal(parse_ok(text), 3 * units[i].scale);
    assert_int_equal(parse_ok(lower), 3 * units[i].scale);
    assert_int_equal(parse_ok(upper), 3 * units[i].scale);
  }
}

static void test_fractions_are_exact_and_round_up(void** state) {
  (void)state;
  assert_int_equal(parse_ok("0.72KB"), 720);
  assert_int_equal(parse_ok("0.5B"), 1);
  assert_int_equal(parse_ok("0.3KiB"), 308); /* 307.2 rounds up */
  assert_int_equal(parse_ok("1.0001KiB"), 1025);
  assert_int_equal(parse_ok("1.5M"), 1572864);
  assert_int_equal(parse_ok("2.000G"), UINT64_C(2) << 30);
  assert_int_equal(parse_ok("0"), 0);
  assert_int_equal(parse_ok("007"), 7);
  assert_int_equal(parse_ok("0.0000000000000000000001TB"), 1);
}

static void test_limit_and_overflow(void** state) {
  (void)state;
  assert_true(parse_ok("18446744073709551615") == UINT64_MAX);
  /* 2^64 - 2^40 * 1e-9 = 2^64 - 1099.51...: fits, the fraction rounded up */
  assert_true(parse_ok("16777215.999999999TiB") == UINT64_MAX - 1098);
  assert_true(parse_ok("16777215T") == (UINT64_C(16777215) << 40));
  const char* max = "a size of at most 18446744073709551615 bytes";
  parse_bad("18446744073709551616", 1, max);
  parse_bad("16777216T", 1, max);
  parse_bad("18446744073709551615.1", 1, max);
  parse_bad("99999999999999999999999999", 1, max);
  parse_bad("18446744073.709551616GB", 1, max);
}

static void test_rejected(void** state) {
  (void)state;
  parse_bad("", 1, "a size (digits, then a unit)");
  parse_bad("K", 1, "a size (digits, then a unit)");
  parse_bad("-1", 1, "a size");
  parse_bad("+1", 1, "a size");
  parse_bad(" 1", 1, "a size");
  parse_bad(".5K", 1, "a size");
  parse_bad("1.", 3, "digits after '.'");
  parse_bad("1.K", 3, "digits after '.'");
  parse_bad("2XB", 2, "a unit (B, K, KiB, KB, M, MiB, MB, G, GiB, GB, T, TiB, TB)");
  parse_bad("1KIBB", 2, "a unit");
  parse_bad("1Mi", 2, "a unit");
  parse_bad("1P", 2, "a unit");
  parse_bad("1 K", 2, "a unit or the end");
  parse_bad("1K ", 3, "a unit or the end");
  parse_bad("1K:", 3, "a unit or the end");
  parse_bad("1.2.3", 4, "a unit or the end");
  parse_bad("1e6", 2, "a unit");
  parse_bad("0x10", 2, "a unit");
}

/* The scanner stops after the size, for grammars that embed one. */
static void test_scan_embedded(void** state) {
  (void)state;
  const char* text = "pool:chunk=4MiB,track";
  size_t pos = 11;
  uint64_t v = 0;
  const char* expected = NULL;
  assert_int_equal(adr_bytesize_scan(text, &pos, &v, &expected), 0);
  assert_int_equal(v, UINT64_C(4) << 20);
  assert_int_equal(pos, 15);
  text = "1M:4Q";
  pos = 0;
  assert_int_equal(adr_bytesize_scan(text, &pos, &v, &expected), 0);
  assert_int_equal(pos, 2);
  pos = 3;
  assert_int_equal(adr_bytesize_scan(text, &pos, &v, &expected), EINVAL);
  assert_int_equal(pos, 4);
  assert_non_null(strstr(expected, "a unit"));
  assert_int_equal(v, UINT64_C(1) << 20); /* untouched on failure */
  /* NULL expected and NULL error are allowed. */
  pos = 0;
  assert_int_equal(adr_bytesize_scan("x", &pos, &v, NULL), EINVAL);
  assert_int_equal(adr_bytesize_parse("SIZE", "x", &v, NULL), EINVAL);
}

static void test_syntax_error_wording(void** state) {
  (void)state;
  struct adr_error e = {{0}};
  assert_int_equal(adr_syntax_error(&e, "ADR_X", "ab", 1, "a digit"), EINVAL);
  assert_string_equal(e.message, "ADR_X=\"ab\": column 2: expected a digit, found 'b'");
  assert_int_equal(adr_syntax_error(&e, "ADR_X", "ab", 2, "a digit"), EINVAL);
  assert_string_equal(e.message, "ADR_X=\"ab\": column 3: expected a digit, found end of text");
  assert_int_equal(adr_syntax_error(&e, "ADR_X", "a\033", 1, "a digit"), EINVAL);
  assert_string_equal(e.message, "ADR_X=\"a\033\": column 2: expected a digit, found byte 0x1b");
  assert_int_equal(adr_syntax_error(NULL, "ADR_X", "a", 0, "b"), EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_unit),
      cmocka_unit_test(test_fractions_are_exact_and_round_up),
      cmocka_unit_test(test_limit_and_overflow),
      cmocka_unit_test(test_rejected),
      cmocka_unit_test(test_scan_embedded),
      cmocka_unit_test(test_syntax_error_wording),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
