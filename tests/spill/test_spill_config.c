/* SPDX-License-Identifier: Apache-2.0
 *
 * The spill variables' parser (core/spill/config.c): defaults, every
 * accepted form, and the messages of malformed values, which name the
 * variable, the column and what was expected, like ADR_ALLOC's.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "spill/spill_internal.h"

static struct adr__spill_config parse_ok(const char* spill, const char* demand, const char* limit,
                                         const char* stats) {
  struct adr__spill_config c;
  struct adr_error e;
  e.message[0] = '\0';
  int st = adr__spill_config_parse(spill, demand, limit, stats, &c, &e);
  if (st != 0) fail_msg("unexpected error: %s", e.message);
  return c;
}

static void expect_error(const char* spill, const char* demand, const char* limit,
                         const char* stats, const char* message) {
  struct adr__spill_config c;
  struct adr_error e;
  e.message[0] = '\0';
  assert_int_equal(adr__spill_config_parse(spill, demand, limit, stats, &c, &e), EINVAL);
  if (strcmp(e.message, message) != 0) fail_msg("got      '%s'\nexpected '%s'", e.message, message);
}

static void test_defaults(void** state) {
  (void)state;
  struct adr__spill_config c = parse_ok(NULL, NULL, NULL, NULL);
  assert_false(c.enabled);
  assert_true(c.on_demand);
  assert_int_equal(c.limit, 0);
  assert_int_equal(c.limit_percent, 0);
  assert_int_equal(c.stats_level, 0);
  c = parse_ok("", "", "", "");
  assert_false(c.enabled);
  assert_true(c.on_demand);
}

static void test_accepted(void** state) {
  (void)state;
  struct adr__spill_config c = parse_ok("on", "off", "1.5GiB", "2");
  assert_true(c.enabled);
  assert_false(c.on_demand);
  assert_int_equal(c.limit, UINT64_C(3) << 29);
  assert_int_equal(c.stats_level, 2);
  c = parse_ok("ON", "On", "80%", "1");
  assert_true(c.enabled);
  assert_true(c.on_demand);
  assert_int_equal(c.limit, 0);
  assert_int_equal(c.limit_percent, 80);
  assert_int_equal(c.stats_level, 1);
  c = parse_ok("off", NULL, "100%", "0");
  assert_false(c.enabled);
  assert_int_equal(c.limit_percent, 100);
  c = parse_ok("on", NULL, "4096", NULL);
  assert_int_equal(c.limit, 4096);
  c = parse_ok("on", NULL, "0.72KB", NULL);
  assert_int_equal(c.limit, 720);
}

static void test_malformed(void** state) {
  (void)state;
  expect_error("yes", NULL, NULL, NULL,
               "ADR_SPILL=\"yes\": column 1: expected 'on' or 'off', found 'y'");
  expect_error("of", NULL, NULL, NULL,
               "ADR_SPILL=\"of\": column 3: expected 'on' or 'off', found end of text");
  expect_error("onn", NULL, NULL, NULL,
               "ADR_SPILL=\"onn\": column 3: expected the end (after 'on' or 'off'), found 'n'");
  expect_error("on", "maybe", NULL, NULL,
               "ADR_SPILL_ON_DEMAND=\"maybe\": column 1: expected 'on' or 'off', found 'm'");
  expect_error("on", NULL, "2XB", NULL,
               "ADR_SPILL_DEVICE_LIMIT=\"2XB\": column 2: expected a unit (B, K, KiB, KB, M, MiB, "
               "MB, G, GiB, GB, T, TiB, TB), found 'X'");
  expect_error("on", NULL, "101%", NULL,
               "ADR_SPILL_DEVICE_LIMIT=\"101%\": column 1: expected a percentage from 1% to 100%, "
               "found '1'");
  expect_error("on", NULL, "0%", NULL,
               "ADR_SPILL_DEVICE_LIMIT=\"0%\": column 1: expected a percentage from 1% to 100%, "
               "found '0'");
  expect_error("on", NULL, "50%x", NULL,
               "ADR_SPILL_DEVICE_LIMIT=\"50%x\": column 4: expected the end, found 'x'");
  expect_error("on", NULL, "-1", NULL,
               "ADR_SPILL_DEVICE_LIMIT=\"-1\": column 1: expected a size (digits, then a unit) or "
               "a percentage (N%), found '-'");
  expect_error("on", NULL, "0", NULL,
               "ADR_SPILL_DEVICE_LIMIT=\"0\": column 1: expected a size above 0 (unset it for no "
               "limit), found '0'");
  expect_error("on", NULL, "99999999999999999999", NULL,
               "ADR_SPILL_DEVICE_LIMIT=\"99999999999999999999\": column 1: expected a size of at "
               "most 18446744073709551615 bytes (16 EiB - 1), found '9'");
  expect_error("on", NULL, NULL, "3",
               "ADR_SPILL_STATS=\"3\": column 1: expected a level: 0, 1 or 2, found '3'");
  expect_error("on", NULL, NULL, "10",
               "ADR_SPILL_STATS=\"10\": column 2: expected the end (a level is one digit: 0, 1 or "
               "2), found '0'");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_defaults),
      cmocka_unit_test(test_accepted),
      cmocka_unit_test(test_malformed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
