/* SPDX-License-Identifier: Apache-2.0
 *
 * Unit test of the ADR_CUDA_STAGING / ADR_HIP_STAGING parser
 * (backends/common/staging.c, compiled into this test with bytesize.c):
 * "off", <threshold>[:<chunk>] with sizes in the ADR_ALLOC grammar
 * (bytesize.h: B, K, KiB, KB, ... T, fractions), the 4 KiB chunk minimum,
 * what is rejected at which column, and the shared syntax-error wording
 * (VAR="text": column N: expected ..., found ...).
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

#include "adr/adr.h"
#include "bytesize.h"
#include "staging.h"

#define VAR "ADR_CUDA_STAGING"

static struct adr_staging_config parse_ok(const char* text) {
  struct adr_error e = {{0}};
  struct adr_staging_config c = {0, 0};
  if (adr_staging_config_parse(VAR, text, &c, &e) != 0)
    fail_msg("\"%s\" rejected: %s", text, e.message);
  return c;
}

/* Rejected with exactly `message` after the VAR="text": prefix. */
static void parse_bad(const char* text, const char* message) {
  struct adr_error e = {{0}};
  struct adr_staging_config c = {123, 456};
  assert_int_equal(adr_staging_config_parse(VAR, text, &c, &e), EINVAL);
  assert_int_equal(c.threshold, 123); /* untouched */
  assert_int_equal(c.chunk, 456);
  char want[512];
  snprintf(want, sizeof(want), VAR "=\"%s\": %s", text, message);
  if (strcmp(e.message, want) != 0) fail_msg("got \"%s\", want \"%s\"", e.message, want);
}

static void test_defaults_and_off(void** state) {
  (void)state;
  struct adr_staging_config c = parse_ok(NULL);
  assert_int_equal(c.threshold, ADR_STAGING_DEFAULT_THRESHOLD);
  assert_int_equal(c.chunk, ADR_STAGING_DEFAULT_CHUNK);
  c = parse_ok("");
  assert_int_equal(c.threshold, 1 << 20);
  assert_int_equal(c.chunk, 4 << 20);
  c = parse_ok("off");
  assert_int_equal(c.threshold, 0);
  assert_int_equal(c.chunk, ADR_STAGING_DEFAULT_CHUNK);
}

/* Forms the old K/M/G-only parser accepted keep their meaning. */
static void test_old_forms(void** state) {
  (void)state;
  struct adr_staging_config c = parse_ok("1M:4M");
  assert_int_equal(c.threshold, 1 << 20);
  assert_int_equal(c.chunk, 4 << 20);
  c = parse_ok("64k:16k");
  assert_int_equal(c.threshold, 64 << 10);
  assert_int_equal(c.chunk, 16 << 10);
  c = parse_ok("2G");
  assert_int_equal(c.threshold, (size_t)2 << 30);
  assert_int_equal(c.chunk, ADR_STAGING_DEFAULT_CHUNK);
  c = parse_ok("8192:4096");
  assert_int_equal(c.threshold, 8192);
  assert_int_equal(c.chunk, 4096);
  c = parse_ok("0");
  assert_int_equal(c.threshold, 0);
}

/* Newly accepted: the whole ADR_ALLOC grammar. */
static void test_new_forms(void** state) {
  (void)state;
  struct adr_staging_config c = parse_ok("64KiB:16KiB");
  assert_int_equal(c.threshold, 64 << 10);
  assert_int_equal(c.chunk, 16 << 10);
  c = parse_ok("1MB:8KB");
  assert_int_equal(c.threshold, 1000000);
  assert_int_equal(c.chunk, 8000);
  c = parse_ok("1.5MiB:0.5MiB");
  assert_int_equal(c.threshold, 3 << 19);
  assert_int_equal(c.chunk, 1 << 19);
  c = parse_ok("100B:4096b");
  assert_int_equal(c.threshold, 100);
  assert_int_equal(c.chunk, 4096);
  c = parse_ok("1T");
  assert_int_equal(c.threshold, (size_t)1 << 40);
  c = parse_ok("4.0001KiB:4KiB"); /* a fraction of a byte rounds up */
  assert_int_equal(c.threshold, 4097);
}

static void test_rejected(void** state) {
  (void)state;
  parse_bad("4X", "column 2: expected a unit (" ADR_BYTESIZE_UNITS "), found 'X'");
  parse_bad("x", "column 1: expected off or a size (digits, then a unit: " ADR_BYTESIZE_UNITS
                 "), found 'x'");
  parse_bad("OFF", "column 1: expected off or a size (digits, then a unit: " ADR_BYTESIZE_UNITS
                   "), found 'O'");
  parse_bad("-1", "column 1: expected off or a size (digits, then a unit: " ADR_BYTESIZE_UNITS
                  "), found '-'");
  parse_bad("1.", "column 3: expected digits after '.', found end of text");
  parse_bad("1M:", "column 4: expected a size (digits, then a unit), found end of text");
  parse_bad("64K:1K", "column 5: expected a chunk size of at least 4 KiB, found '1'");
  parse_bad("64K:4095", "column 5: expected a chunk size of at least 4 KiB, found '4'");
  parse_bad("1M:4M:", "column 6: expected ':' or the end, found ':'");
  parse_bad("1M 4M", "column 3: expected ':' or the end, found ' '");
  parse_bad("99999999999999999999",
            "column 1: expected a size of at most 18446744073709551615 bytes (16 EiB - 1), "
            "found '9'");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_defaults_and_off),
      cmocka_unit_test(test_old_forms),
      cmocka_unit_test(test_new_forms),
      cmocka_unit_test(test_rejected),
  };
  return cmocka_run_group_tests_name("staging-config", tests, NULL, NULL);
}
