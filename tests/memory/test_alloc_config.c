/* SPDX-License-Identifier: Apache-2.0
 *
 * ADR_ALLOC parsing (core/memory/config.c): accepted forms, defaults, units,
 * and every malformed value reported with the variable, the column and what
 * was expected there.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "memory/memory_internal.h"

static struct adr__alloc_config parse_ok(const char* text) {
  struct adr__alloc_config c;
  struct adr_error err = {{0}};
  int st = adr__alloc_config_parse("ADR_ALLOC", text, &c, &err);
  if (st != 0) fail_msg("\"%s\": %s", text, err.message);
  return c;
}

static void expect_error(const char* text, const char* fragment) {
  struct adr__alloc_config c;
  struct adr_error err = {{0}};
  assert_int_equal(adr__alloc_config_parse("ADR_ALLOC", text, &c, &err), EINVAL);
  if (strstr(err.message, fragment) == NULL)
    fail_msg("\"%s\": message \"%s\" lacks \"%s\"", text, err.message, fragment);
  assert_non_null(strstr(err.message, "ADR_ALLOC=\""));
}

static void test_defaults(void** state) {
  (void)state;
  struct adr__alloc_config c = parse_ok(NULL);
  assert_true(c.use_pool);
  assert_false(c.has_limit);
  assert_false(c.track);
  /* docs/memory.md: the cap follows the device's memory; no threshold. */
  assert_int_equal(c.pool.max_cached, ADR__POOL_MAX_CACHED_AUTO);
  assert_int_equal(adr__pool_default_max_cached(0), (size_t)256 << 20);
  assert_int_equal(adr__pool_default_max_cached((uint64_t)1 << 30), (size_t)256 << 20);
  assert_int_equal(adr__pool_default_max_cached((uint64_t)16 << 30), (size_t)2 << 30);
  assert_int_equal(adr__pool_default_max_cached((uint64_t)80 << 30), (size_t)4 << 30);
  assert_int_equal(c.pool.release_threshold, SIZE_MAX);
  c = parse_ok("");
  assert_true(c.use_pool);
  c = parse_ok("pool");
  assert_true(c.use_pool);
}

static void test_handlers(void** state) {
  (void)state;
  assert_false(parse_ok("none").use_pool);
  assert_false(parse_ok("backend").use_pool);
  assert_false(parse_ok("BACKEND").use_pool);
  struct adr__alloc_config c = parse_ok("none:limit=1GiB,track");
  assert_false(c.use_pool);
  assert_true(c.has_limit);
  assert_int_equal(c.limit, UINT64_C(1) << 30);
  assert_true(c.track);
}

static void test_options_and_units(void** state) {
  (void)state;
  struct adr__alloc_config c =
      parse_ok("pool:max_cached=2GiB,release_threshold=1.5G,chunk=4MiB,arenas=3,limit=100MB");
  assert_int_equal(c.pool.max_cached, (size_t)2 << 30);
  assert_int_equal(c.pool.release_threshold, (size_t)3 << 29);
  assert_int_equal(c.pool.chunk_size, (size_t)4 << 20);
  assert_int_equal(c.pool.arenas, 3);
  assert_int_equal(c.limit, 100000000);
  assert_int_equal(parse_ok("pool:max_cached=0").pool.max_cached, 0);
  assert_int_equal(parse_ok("pool:max_cached=17").pool.max_cached, 17);
  assert_int_equal(parse_ok("pool:max_cached=17B").pool.max_cached, 17);
  assert_int_equal(parse_ok("pool:max_cached=2k").pool.max_cached, 2048);
  assert_int_equal(parse_ok("pool:max_cached=2KB").pool.max_cached, 2000);
  assert_int_equal(parse_ok("pool:max_cached=1TiB").pool.max_cached, (size_t)1 << 40);
  assert_int_equal(parse_ok("pool:max_cached=1tb").pool.max_cached, 1000000000000);
}

/* Decimals are exact (issue 11: "0.72KB" was 719 bytes through floating
 * point); fractions of a byte round up; the largest size is accepted. */
static void test_exact_decimals(void** state) {
  (void)state;
  assert_int_equal(parse_ok("backend:limit=0.72KB").limit, 720);
  assert_int_equal(parse_ok("backend:limit=0.72kb").limit, 720);
  assert_int_equal(parse_ok("pool:limit=1.1KB").limit, 1100);
  assert_int_equal(parse_ok("pool:limit=0.001KB").limit, 1);
  assert_int_equal(parse_ok("pool:limit=4.35GB").limit, UINT64_C(4350000000));
  assert_int_equal(parse_ok("pool:limit=0.1MB").limit, 100000);
  assert_int_equal(parse_ok("pool:limit=1.5KiB").limit, 1536);
  assert_int_equal(parse_ok("pool:limit=0.3KiB").limit, 308); /* 307.2 rounds up */
  assert_int_equal(parse_ok("pool:limit=0.5B").limit, 1);
  assert_int_equal(parse_ok("pool:limit=0.5").limit, 1);
  assert_int_equal(parse_ok("pool:limit=2.0").limit, 2);
  assert_int_equal(parse_ok("pool:limit=0.0").limit, 0);
  assert_int_equal(parse_ok("pool:limit=0.000000000000000000000000001B").limit, 1);
  assert_int_equal(parse_ok("pool:limit=1.000000000000000000000000000KiB").limit, 1024);
  assert_int_equal(parse_ok("pool:limit=1.0009765625KiB").limit, 1025); /* exactly 1025 */
  assert_int_equal(parse_ok("pool:limit=1.00097656250000000001KiB").limit, 1026);
  assert_int_equal(parse_ok("pool:limit=0.99999999999999999999TiB").limit, UINT64_C(1) << 40);
  assert_int_equal(parse_ok("pool:limit=1.1TB").limit, UINT64_C(1100000000000));
  /* 2^64 - 1, the largest size: a limit nothing reaches. */
  struct adr__alloc_config c = parse_ok("pool:limit=18446744073709551615");
  assert_true(c.has_limit);
  assert_int_equal(c.limit, UINT64_MAX);
  assert_int_equal(parse_ok("pool:max_cached=18446744073709551615").pool.max_cached, SIZE_MAX);
  assert_int_equal(parse_ok("pool:limit=18446744073709551615.0").limit, UINT64_MAX);
  /* 2^64 - 2^40 + ceil(0.99999999999 * 2^40) = 2^64 - 10 */
  assert_int_equal(parse_ok("pool:limit=16777215.99999999999TiB").limit, UINT64_MAX - 9);
}

static void test_malformed(void** state) {
  (void)state;
  expect_error("heap", "column 1: expected a handler (pool, backend, none), found 'h'");
  expect_error("9pool", "column 1: expected a handler");
  expect_error("pool;", "column 5: expected ':' and options, or the end, found ';'");
  expect_error("pool:", "column 6: expected an option");
  expect_error("pool:max_cached", "column 16: expected '=' and a value, found end of text");
  expect_error("pool:max_cached=", "column 17: expected a size (digits, then a unit)");
  expect_error("pool:max_cached=2XB", "column 18: expected a unit (B, K, KiB");
  expect_error("pool:max_cached=2.", "column 19: expected digits after '.'");
  expect_error("pool:max_cached=99999999999TiB",
               "column 17: expected a size of at most 18446744073709551615 bytes (16 EiB - 1)");
  expect_error("pool:limit=18446744073709551616",
               "column 12: expected a size of at most 18446744073709551615 bytes");
  expect_error("pool:limit=16EiB", "column 14: expected a unit");
  expect_error("pool:limit=16777216TiB", "column 12: expected a size of at most");
  /* Rounding the fraction up reaches 2^64. */
  expect_error("pool:limit=16777215.999999999999999999999TiB",
               "column 12: expected a size of at most");
  expect_error("pool:limit=99999999999999999999999", "column 12: expected a size of at most");
  expect_error("pool:colour=red", "column 6: expected an option (max_cached=");
  expect_error("pool:limit=1G,", "column 15: expected an option");
  expect_error("pool:limit=1G;track", "column 14: expected ',' and an option, or the end");
  expect_error("pool:arenas=0", "column 13: expected a count from 1 to 16");
  expect_error("pool:arenas=17", "column 13: expected a count from 1 to 16");
  expect_error("pool:chunk=1K", "column 12: expected a chunk size from 4 KiB to 1 TiB");
  expect_error("none:max_cached=1G",
               "column 6: option 'max_cached' applies only to the pool handler");
  expect_error("pool:limit=1G\x01",
               "column 14: expected ',' and an option, or the end, found "
               "byte 0x01");
}

/* The host-page options: huge pages for large chunks and no populate by
 * default, changed by name, pool only. */
static void test_host_page_options(void** state) {
  (void)state;
  struct adr__alloc_config c = parse_ok(NULL);
  assert_int_equal(c.pool.hugepages, ADR__POOL_THP_LARGE);
  assert_false(c.pool.populate);
  c = parse_ok("pool:populate");
  assert_true(c.pool.populate);
  assert_int_equal(c.pool.hugepages, ADR__POOL_THP_LARGE);
  c = parse_ok("pool:nohugepages");
  assert_int_equal(c.pool.hugepages, ADR__POOL_THP_OFF);
  c = parse_ok("pool:HugePages,max_cached=1GiB,populate");
  assert_int_equal(c.pool.hugepages, ADR__POOL_THP_ALL);
  assert_true(c.pool.populate);
  assert_int_equal(c.pool.max_cached, (size_t)1 << 30);
  expect_error("backend:populate", "column 9: option 'populate' applies only to the pool");
  expect_error("none:hugepages", "option 'hugepages' applies only to the pool");
  expect_error("backend:nohugepages", "option 'nohugepages' applies only to the pool");
  expect_error("pool:populate=1", "',' and an option, or the end");
}

static void test_format_bytes(void** state) {
  (void)state;
  char b[32];
  assert_string_equal(adr__format_bytes(0, b, sizeof(b)), "0 B");
  assert_string_equal(adr__format_bytes(1023, b, sizeof(b)), "1023 B");
  assert_string_equal(adr__format_bytes(1024, b, sizeof(b)), "1 KiB");
  assert_string_equal(adr__format_bytes(1536, b, sizeof(b)), "1.5 KiB");
  assert_string_equal(adr__format_bytes((uint64_t)3 << 30, b, sizeof(b)), "3 GiB");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_defaults),          cmocka_unit_test(test_handlers),
      cmocka_unit_test(test_options_and_units), cmocka_unit_test(test_malformed),
      cmocka_unit_test(test_format_bytes),      cmocka_unit_test(test_exact_decimals),
      cmocka_unit_test(test_host_page_options),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
