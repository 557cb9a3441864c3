/* SPDX-License-Identifier: Apache-2.0
 *
 * Unit test of the ADR_CUDA_STAGING / ADR_HIP_STAGING parser
 * (backends/common/staging.c, compiled into this test with bytesize.c):
 * "off", <threshold>[:<chunk>[:<threads>]] with sizes in the ADR_ALLOC
 * grammar (bytesize.h: B, K, KiB, KB, ... T, fractions), the 4 KiB chunk
 * minimum, the 1..64 threads, what is rejected at which column, and the
 * shared syntax-error wording (VAR="text": column N: expected ..., found
 * ...). Then the staged copies themselves over a driver of plain host
 * memory: every byte lands, with the memcpy split across threads, and
 * with several copies at once (one owns the workers, the others copy
 * alone).
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adr/adr.h"
#include "bytesize.h"
#include "staging.h"

#define VAR "ADR_CUDA_STAGING"

static struct adr_staging_config parse_ok(const char* text) {
  struct adr_error e = {{0}};
  struct adr_staging_config c = {0, 0, 0};
  if (adr_staging_config_parse(VAR, text, &c, &e) != 0)
    fail_msg("\"%s\" rejected: %s", text, e.message);
  return c;
}

/* Rejected with exactly `message` after the VAR="text": prefix. */
static void parse_bad(const char* text, const char* message) {
  struct adr_error e = {{0}};
  struct adr_staging_config c = {123, 456, 7};
  assert_int_equal(adr_staging_config_parse(VAR, text, &c, &e), EINVAL);
  assert_int_equal(c.threshold, 123); /* untouched */
  assert_int_equal(c.chunk, 456);
  assert_int_equal(c.threads, 7);
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
  parse_bad("1M:4M:", "column 7: expected a number of threads from 1 to 64, found end of text");
  parse_bad("1M:4M:0", "column 7: expected a number of threads from 1 to 64, found '0'");
  parse_bad("1M:4M:65", "column 7: expected a number of threads from 1 to 64, found '6'");
  parse_bad("1M:4M:99999999999", "column 7: expected a number of threads from 1 to 64, found '9'");
  parse_bad("1M:4M:x", "column 7: expected a number of threads from 1 to 64, found 'x'");
  parse_bad("1M:4M:2:", "column 8: expected ':' or the end, found ':'");
  parse_bad("1M 4M", "column 3: expected ':' or the end, found ' '");
  parse_bad("99999999999999999999",
            "column 1: expected a size of at most 18446744073709551615 bytes (16 EiB - 1), "
            "found '9'");
}

static void test_threads(void** state) {
  (void)state;
  struct adr_staging_config c = parse_ok("1M:4M:3");
  assert_int_equal(c.threshold, 1 << 20);
  assert_int_equal(c.chunk, 4 << 20);
  assert_int_equal(c.threads, 3);
  assert_int_equal(adr_staging_threads(&c), 3);
  c = parse_ok("64K:8K:64");
  assert_int_equal(c.threads, 64);
  c = parse_ok("1M:4M"); /* automatic: a quarter of the CPUs, 1 to 4 */
  assert_int_equal(c.threads, 0);
  unsigned n = adr_staging_threads(&c);
  assert_true(n >= 1 && n <= 4);
}

/* ---- staged copies over a host-memory "driver" -------------------------
 * copy_async copies at once and events are counters, so the test checks
 * the chunking, the buffer alternation and the split memcpy, not overlap. */

static int fake_host_alloc(size_t size, void** out) {
  *out = malloc(size);
  return *out == NULL ? ENOMEM : 0;
}
static int fake_event_create(void** out) {
  *out = malloc(1);
  return *out == NULL ? ENOMEM : 0;
}
static int fake_ok_event(void* event) {
  (void)event;
  return 0;
}
static int fake_event_record(void* event, void* stream) {
  (void)event;
  (void)stream;
  return 0;
}
static int fake_copy_async(uintptr_t dst, uintptr_t src, size_t len, bool to_device,
                           void* stream) {
  (void)to_device;
  (void)stream;
  memcpy((void*)dst, (const void*)src, len);
  return 0;
}
static int fake_stream_synchronize(void* stream) {
  (void)stream;
  return 0;
}
static const struct adr_staging_ops fake_ops = {
    .host_alloc = fake_host_alloc,
    .host_free = free,
    .event_create = fake_event_create,
    .event_destroy = free,
    .event_record = fake_event_record,
    .event_synchronize = fake_ok_event,
    .copy_async = fake_copy_async,
    .stream_synchronize = fake_stream_synchronize,
    .out_of_memory = ENOMEM,
};

/* Both directions of `size` bytes at misaligned offsets, every byte checked. */
static void round_trip(struct adr_staging* staging, size_t size, unsigned seed) {
  unsigned char* src = malloc(size + 3);
  unsigned char* dev = malloc(size + 5);
  unsigned char* back = malloc(size + 7);
  assert_non_null(src);
  assert_non_null(dev);
  assert_non_null(back);
  for (size_t i = 0; i < size + 3; i++) src[i] = (unsigned char)(i * 131u + seed);
  memset(back, 0, size + 7);
  assert_int_equal(adr_staging_copy_to_device(staging, (uintptr_t)(dev + 5), src + 3, size, NULL),
                   0);
  assert_memory_equal(dev + 5, src + 3, size);
  assert_int_equal(adr_staging_copy_to_host(staging, back + 7, (uintptr_t)(dev + 5), size, NULL),
                   0);
  assert_memory_equal(back + 7, src + 3, size);
  free(src);
  free(dev);
  free(back);
}

static void test_staged_copies(void** state) {
  (void)state;
  static const char* configs[] = {"4K:8K", "4K:1M:1", "4K:1M:4", "4K:3M:3", "4K:64K:8"};
  for (size_t k = 0; k < sizeof(configs) / sizeof(configs[0]); k++) {
    struct adr_staging_config c = parse_ok(configs[k]);
    struct adr_staging staging;
    adr_staging_init(&staging, &fake_ops, &c);
    static const size_t sizes[] = {4096, 100000, (1u << 20) + 13, (7u << 20) + 1001};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
      round_trip(&staging, sizes[i], (unsigned)(k * 7 + i));
    adr_staging_fini(&staging);
  }
}

struct copier {
  struct adr_staging* staging;
  unsigned seed;
};

static void* copier_main(void* arg) {
  struct copier* c = arg;
  for (unsigned i = 0; i < 6; i++) round_trip(c->staging, (3u << 20) + i * 4099, c->seed + i);
  return NULL;
}

/* Four copies at once on one device: the workers serve one, the others
 * copy alone, and every byte of all of them lands. */
static void test_concurrent_staged_copies(void** state) {
  (void)state;
  struct adr_staging_config c = parse_ok("4K:1M:3");
  struct adr_staging staging;
  adr_staging_init(&staging, &fake_ops, &c);
  pthread_t threads[4];
  struct copier copiers[4];
  for (unsigned i = 0; i < 4; i++) {
    copiers[i] = (struct copier){&staging, i * 100};
    assert_int_equal(pthread_create(&threads[i], NULL, copier_main, &copiers[i]), 0);
  }
  for (unsigned i = 0; i < 4; i++) pthread_join(threads[i], NULL);
  adr_staging_fini(&staging);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_defaults_and_off),
      cmocka_unit_test(test_old_forms),
      cmocka_unit_test(test_new_forms),
      cmocka_unit_test(test_rejected),
      cmocka_unit_test(test_threads),
      cmocka_unit_test(test_staged_copies),
      cmocka_unit_test(test_concurrent_staged_copies),
  };
  return cmocka_run_group_tests_name("staging-config", tests, NULL, NULL);
}
