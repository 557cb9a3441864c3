/* SPDX-License-Identifier: Apache-2.0
 *
 * Spill managers and spillable buffers (adr/spill.h, docs/spill.md) on the
 * device ADR_DEVICE names, one registration per backend configuration
 * (tests/spill/meson.build). ADR_SPILL_TEST_CAPACITY is the bytes the
 * device can hold (the simulators' ADR_SIM_MEMORY_MIB, or ADR_ALLOC's
 * limit adaptor elsewhere), so on-demand spilling is driven by real
 * allocation failures. On host-memory devices (cpu) spilling is a no-op
 * and the tests check that instead.
 *
 * Every check of a buffer's bytes is byte-exact against a pattern that
 * depends on the buffer and on the last write, so a lost, stale or mixed-up
 * spill shows.
 */
#include <errno.h>
#include <pthread.h>
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
#include "adr/memory.h"
#include "adr/spill.h"
#include "spill_test.h"
#include "adr/testing.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static struct adr_device* dev;
static struct adr_device* cpu;
static bool host_memory; /* the no-op devices */
static size_t capacity;  /* ADR_SPILL_TEST_CAPACITY */

/* ---- helpers ------------------------------------------------------------ */

static struct adr_spill_buffer* balloc(struct adr_spill_manager* m, size_t size) {
  struct adr_spill_buffer* b = NULL;
  struct adr_error e;
  if (adr_spill_buffer_alloc(m, size, &b, &e) != 0) fail_msg("alloc(%zu): %s", size, e.message);
  return b;
}

static void* acquire(struct adr_spill_buffer* b, int mode) {
  void* p = NULL;
  struct adr_error e;
  if (adr_spill_buffer_acquire(b, mode, &p, &e) != 0) fail_msg("acquire: %s", e.message);
  assert_non_null(p);
  return p;
}

static void release(struct adr_spill_buffer* b) {
  struct adr_error e;
  if (adr_spill_buffer_release(b, NULL, &e) != 0) fail_msg("release: %s", e.message);
}

/* Writes the pattern of `seed` into the buffer (acquire, copy, release). */
static void write_seed(struct adr_spill_buffer* b, uint32_t seed) {
  size_t n = adr_spill_buffer_size(b);
  uint8_t* h = malloc(n);
  assert_non_null(h);
  spill_test_fill(h, n, seed);
  void* d = acquire(b, ADR_SPILL_ACCESS_WRITE);
  struct adr_error e;
  if (adr_copy(dev, d, cpu, h, n, NULL, &e) != 0) fail_msg("copy in: %s", e.message);
  release(b);
  free(h);
}

/* Byte-exact check of the pattern through a held pointer. */
static void check_ptr(void* d, size_t n, uint32_t seed) {
  uint8_t* h = malloc(n);
  uint8_t* want = malloc(n);
  assert_non_null(h);
  assert_non_null(want);
  spill_test_fill(want, n, seed);
  struct adr_error e;
  if (adr_copy(cpu, h, dev, d, n, NULL, &e) != 0) fail_msg("copy out: %s", e.message);
  if (memcmp(h, want, n) != 0) {
    size_t i = 0;
    while (h[i] == want[i]) i++;
    fail_msg("byte %zu of %zu: 0x%02x, expected 0x%02x (seed %u)", i, n, h[i], want[i], seed);
  }
  free(h);
  free(want);
}

static void check_seed(struct adr_spill_buffer* b, uint32_t seed) {
  void* d = acquire(b, ADR_SPILL_ACCESS_READ);
  check_ptr(d, adr_spill_buffer_size(b), seed);
  release(b);
}

static uint64_t device_allocated(void) {
  struct adr_memory_stats s;
  memset(&s, 0, sizeof(s));
  s.struct_size = sizeof(s);
  assert_int_equal(adr_memory_stats_get(dev, &s, NULL), 0);
  return s.allocated_bytes.current;
}

static void destroy(struct adr_spill_manager* m) {
  struct adr_error e;
  if (adr_spill_manager_destroy(m, &e) != 0) fail_msg("destroy: %s", e.message);
  /* Nothing the manager allocated on the device is left. */
  assert_int_equal(device_allocated(), 0);
}

#define SKIP_ON_HOST_MEMORY()                                                                    \
  do {                                                                                           \
    if (host_memory) {                                                                           \
      print_message("  (%s is host memory: spilling is a no-op there)\n", adr_device_name(dev)); \
      skip();                                                                                    \
    }                                                                                            \
  } while (0)

/* ---- tests -------------------------------------------------------------- */

static void test_basics(void** state) {
  (void)state;
  struct adr_spill_manager* m = spill_test_manager(dev, ADR_SPILL_ON_DEMAND, 0, 1);
  assert_ptr_equal(adr_spill_manager_device(m), dev);
  struct adr_spill_buffer* b = balloc(m, 100 * KiB + 3);
  assert_int_equal(adr_spill_buffer_size(b), 100 * KiB + 3);
  assert_int_equal(adr_spill_buffer_location(b), ADR_SPILL_LOCATION_DEVICE);
  write_seed(b, 1);
  /* Nested acquires: the same pointer, counted. */
  void* p1 = acquire(b, ADR_SPILL_ACCESS_READ);
  void* p2 = acquire(b, ADR_SPILL_ACCESS_WRITE);
  assert_ptr_equal(p1, p2);
  struct adr_error e;
  assert_int_equal(adr_spill_buffer_free(b, &e), EBUSY);
  assert_non_null(strstr(e.message, "2 holders"));
  release(b);
  assert_int_equal(adr_spill_buffer_free(b, &e), EBUSY);
  release(b);
  assert_int_equal(adr_spill_buffer_release(b, NULL, &e), EINVAL);
  assert_non_null(strstr(e.message, "not acquired"));
  assert_int_equal(adr_spill_buffer_acquire(b, 0, &p1, &e), EINVAL);
  assert_int_equal(adr_spill_buffer_alloc(m, 0, &b, &e), EINVAL);
  assert_int_equal(adr_spill_manager_destroy(m, &e), EBUSY);
  assert_non_null(strstr(e.message, "1 buffer is"));
  struct adr_spill_options bad;
  adr_spill_options_init(&bad);
  bad.device_limit_percent = 101;
  struct adr_spill_manager* m2 = NULL;
  assert_int_equal(adr_spill_manager_create(dev, &bad, &m2, &e), EINVAL);
  bad.device_limit_percent = 0;
  bad.stats_level = 3;
  assert_int_equal(adr_spill_manager_create(dev, &bad, &m2, &e), EINVAL);
  bad.stats_level = 0;
  bad.struct_size = 4;
  assert_int_equal(adr_spill_manager_create(dev, &bad, &m2, &e), EINVAL);

  uint64_t spilled = 0;
  assert_int_equal(adr_spill_manager_spill(m, UINT64_MAX, &spilled, &e), 0);
  struct adr_spill_stats s = spill_test_stats(m);
  if (host_memory) {
    assert_int_equal(spilled, 0);
    assert_int_equal(adr_spill_buffer_location(b), ADR_SPILL_LOCATION_DEVICE);
    assert_int_equal(s.spilled[ADR_SPILL_TRIGGER_EXPLICIT].bytes, 0);
  } else {
    assert_int_equal(spilled, 100 * KiB + 3);
    assert_int_equal(adr_spill_buffer_location(b), ADR_SPILL_LOCATION_HOST);
    assert_int_equal(s.spilled[ADR_SPILL_TRIGGER_EXPLICIT].bytes, 100 * KiB + 3);
    assert_int_equal(s.spilled[ADR_SPILL_TRIGGER_EXPLICIT].count, 1);
    assert_int_equal(s.host_bytes, 100 * KiB + 3);
    assert_int_equal(s.device_bytes, 0);
  }
  check_seed(b, 1);
  assert_int_equal(adr_spill_buffer_location(b), ADR_SPILL_LOCATION_DEVICE);
  s = spill_test_stats(m);
  assert_int_equal(s.unspilled.bytes, host_memory ? 0 : 100 * KiB + 3);
  assert_int_equal(s.buffers, 1);
  char text[1024];
  adr_spill_stats_format(&s, text, sizeof(text));
  assert_non_null(strstr(text, "Spill Statistics (level=1)"));
  assert_non_null(strstr(text, "gpu => cpu"));
  assert_int_equal(adr_spill_buffer_free(b, NULL), 0);
  destroy(m);
}

/* A working set three times the soft limit, processed in a loop. */
static void test_working_set_3x_limit(void** state) {
  (void)state;
  SKIP_ON_HOST_MEMORY();
  const size_t limit = 4 * MiB, size = 256 * KiB, n = 3 * limit / size;
  struct adr_spill_manager* m = spill_test_manager(dev, 0, limit, 1);
  assert_int_equal(adr_spill_manager_device_limit(m), limit);
  struct adr_spill_buffer* b[48];
  uint32_t seed[48];
  assert_true(n <= 48);
  for (size_t i = 0; i < n; i++) {
    b[i] = balloc(m, size);
    seed[i] = (uint32_t)i + 1;
    write_seed(b[i], seed[i]);
    assert_true(spill_test_stats(m).device_bytes <= limit);
  }
  uint32_t rng = 12345;
  for (int pass = 0; pass < 4; pass++) {
    for (size_t k = 0; k < n; k++) {
      size_t i = k;
      if (pass >= 2) { /* random order */
        rng = rng * 1103515245u + 12345u;
        i = (rng >> 8) % n;
      }
      bool was_host = adr_spill_buffer_location(b[i]) == ADR_SPILL_LOCATION_HOST;
      void* d = acquire(b[i], pass % 2 ? ADR_SPILL_ACCESS_WRITE : ADR_SPILL_ACCESS_READ);
      check_ptr(d, size, seed[i]); /* after every unspill: byte-exact */
      if (pass % 2) {
        uint8_t* h = malloc(size);
        seed[i] += 1000;
        spill_test_fill(h, size, seed[i]);
        assert_int_equal(adr_copy(dev, d, cpu, h, size, NULL, NULL), 0);
        free(h);
      }
      release(b[i]);
      (void)was_host;
      assert_true(spill_test_stats(m).device_bytes <= limit);
    }
  }
  for (size_t i = 0; i < n; i++) check_seed(b[i], seed[i]);
  struct adr_spill_stats s = spill_test_stats(m);
  assert_true(s.spilled[ADR_SPILL_TRIGGER_LIMIT].bytes >= 2 * limit);
  assert_true(s.unspilled.bytes >= 2 * limit);
  assert_int_equal(s.spilled[ADR_SPILL_TRIGGER_ON_DEMAND].bytes, 0);
  assert_int_equal(s.limit_exceeded, 0);
  assert_true(s.peak_device_bytes <= limit);
  assert_int_equal(s.device_bytes + s.host_bytes, n * size);
  for (size_t i = 0; i < n; i++) assert_int_equal(adr_spill_buffer_free(b[i], NULL), 0);
  destroy(m);
}

/* No soft limit: three times what the device holds, so allocations and
 * unspills fail for real and the out-of-memory chain spills. */
static void test_on_demand_real_failure(void** state) {
  (void)state;
  SKIP_ON_HOST_MEMORY();
  const size_t size = 512 * KiB, n = 3 * capacity / size;
  struct adr_spill_manager* m = spill_test_manager(dev, ADR_SPILL_ON_DEMAND, 0, 1);
  struct adr_spill_buffer** b = calloc(n, sizeof(*b));
  uint32_t* seed = calloc(n, sizeof(*seed));
  for (size_t i = 0; i < n; i++) {
    b[i] = balloc(m, size);
    seed[i] = (uint32_t)(7 * i + 3);
    write_seed(b[i], seed[i]);
  }
  struct adr_spill_stats s = spill_test_stats(m);
  assert_true(s.spilled[ADR_SPILL_TRIGGER_ON_DEMAND].bytes >= capacity);
  assert_true(s.device_bytes <= capacity);
  for (int pass = 0; pass < 2; pass++)
    for (size_t i = 0; i < n; i++) check_seed(b[i], seed[i]);
  /* A plain adr_alloc on the full device makes room by spilling too. */
  void* big = NULL;
  struct adr_error e;
  if (adr_alloc(dev, capacity / 2, 0, NULL, &big, &e) != 0) fail_msg("adr_alloc: %s", e.message);
  assert_int_equal(adr_free(dev, big, capacity / 2, NULL, NULL), 0);
  s = spill_test_stats(m);
  assert_true(s.unspilled.bytes >= 2 * capacity);
  assert_int_equal(s.spill_failures, 0);
  for (size_t i = 0; i < n; i++) check_seed(b[i], seed[i]);
  for (size_t i = 0; i < n; i++) assert_int_equal(adr_spill_buffer_free(b[i], NULL), 0);
  free(b);
  free(seed);
  destroy(m);
}

/* What does not fit even after spilling everything is ENOMEM, and the
 * message says how much was spillable. Held and exposed buffers stay. */
static void test_cannot_fit(void** state) {
  (void)state;
  SKIP_ON_HOST_MEMORY();
  struct adr_spill_manager* m = spill_test_manager(dev, ADR_SPILL_ON_DEMAND, 0, 1);
  struct adr_spill_buffer* b[4];
  for (int i = 0; i < 4; i++) {
    b[i] = balloc(m, MiB);
    write_seed(b[i], 50u + (uint32_t)i);
  }
  void* held = acquire(b[0], ADR_SPILL_ACCESS_READ);
  void* exposed = NULL;
  assert_int_equal(adr_spill_buffer_expose(b[1], "test: handed out", &exposed, NULL), 0);
  struct adr_spill_buffer* big = NULL;
  struct adr_error e;
  assert_int_equal(adr_spill_buffer_alloc(m, 2 * capacity, &big, &e), ENOMEM);
  assert_null(big);
  print_message("  %s\n", e.message);
  assert_non_null(strstr(e.message, "[adr_spill_buffer_alloc]"));
  assert_non_null(strstr(e.message, "even after spilling"));
  assert_non_null(strstr(e.message, "2 MiB of this manager's buffers were spillable"));
  assert_non_null(strstr(e.message, "1 MiB exposed"));
  assert_int_equal(adr_spill_buffer_location(b[0]), ADR_SPILL_LOCATION_DEVICE);
  assert_int_equal(adr_spill_buffer_location(b[1]), ADR_SPILL_LOCATION_DEVICE);
  assert_int_equal(adr_spill_buffer_location(b[2]), ADR_SPILL_LOCATION_HOST);
  assert_int_equal(adr_spill_buffer_location(b[3]), ADR_SPILL_LOCATION_HOST);
  check_ptr(held, MiB, 50);
  check_ptr(exposed, MiB, 51);
  release(b[0]);
  struct adr_spill_stats s = spill_test_stats(m);
  assert_int_equal(s.buffers, 4);
  assert_int_equal(s.exposed_buffers, 1);
  assert_int_equal(s.exposed_bytes, MiB);
  assert_int_equal(s.device_bytes, 2 * MiB);
  for (int i = 0; i < 4; i++) check_seed(b[i], 50u + (uint32_t)i);
  for (int i = 0; i < 4; i++) assert_int_equal(adr_spill_buffer_free(b[i], NULL), 0);
  destroy(m);
}

/* Held and exposed buffers are never spilled, whatever the trigger. */
static void test_locked_and_exposed_stay(void** state) {
  (void)state;
  SKIP_ON_HOST_MEMORY();
  const size_t size = 512 * KiB;
  struct adr_spill_manager* m = spill_test_manager(dev, ADR_SPILL_ON_DEMAND, 2 * MiB, 1);
  struct adr_spill_buffer* a = balloc(m, size);
  struct adr_spill_buffer* x = balloc(m, size);
  write_seed(a, 901);
  write_seed(x, 902);
  void* pa = acquire(a, ADR_SPILL_ACCESS_WRITE);
  void* px = NULL;
  assert_int_equal(adr_spill_buffer_expose(x, "test", &px, NULL), 0);
  assert_int_equal(adr_spill_buffer_exposed(x), 1);
  /* The least recently used of all: still skipped. */
  struct adr_spill_buffer* others[12];
  for (int i = 0; i < 12; i++) {
    others[i] = balloc(m, size);
    write_seed(others[i], 1000u + (uint32_t)i);
  }
  uint64_t spilled = 0;
  assert_int_equal(adr_spill_manager_spill(m, UINT64_MAX, &spilled, NULL), 0);
  assert_int_equal(adr_spill_buffer_location(a), ADR_SPILL_LOCATION_DEVICE);
  assert_int_equal(adr_spill_buffer_location(x), ADR_SPILL_LOCATION_DEVICE);
  /* Pressure on demand too: a plain allocation as big as the device. */
  void* p = NULL;
  if (adr_alloc(dev, capacity - 2 * size - 64 * KiB, 0, NULL, &p, NULL) == 0)
    adr_free(dev, p, capacity - 2 * size - 64 * KiB, NULL, NULL);
  assert_int_equal(adr_spill_buffer_location(a), ADR_SPILL_LOCATION_DEVICE);
  assert_int_equal(adr_spill_buffer_location(x), ADR_SPILL_LOCATION_DEVICE);
  void* again = NULL;
  assert_int_equal(adr_spill_buffer_expose(x, "second reason", &again, NULL), 0);
  assert_ptr_equal(again, px);
  assert_ptr_equal(acquire(a, ADR_SPILL_ACCESS_READ), pa);
  release(a);
  check_ptr(pa, size, 901);
  check_ptr(px, size, 902);
  release(a);
  /* Released, it may go; exposed, never. */
  assert_int_equal(adr_spill_manager_spill(m, UINT64_MAX, &spilled, NULL), 0);
  assert_int_equal(adr_spill_buffer_location(a), ADR_SPILL_LOCATION_HOST);
  assert_int_equal(adr_spill_buffer_location(x), ADR_SPILL_LOCATION_DEVICE);
  check_seed(a, 901);
  for (int i = 0; i < 12; i++) check_seed(others[i], 1000u + (uint32_t)i);
  assert_int_equal(adr_spill_buffer_free(a, NULL), 0);
  assert_int_equal(adr_spill_buffer_free(x, NULL), 0);
  for (int i = 0; i < 12; i++) assert_int_equal(adr_spill_buffer_free(others[i], NULL), 0);
  destroy(m);
}

/* A soft limit: exceeded, and counted, only when too little can spill. */
static void test_limit_exceeded(void** state) {
  (void)state;
  SKIP_ON_HOST_MEMORY();
  struct adr_spill_manager* m = spill_test_manager(dev, 0, MiB, 1);
  struct adr_spill_buffer* x = balloc(m, MiB);
  write_seed(x, 5);
  assert_int_equal(adr_spill_buffer_expose(x, "limit test", NULL, NULL), 0);
  struct adr_spill_buffer* y = balloc(m, 512 * KiB); /* nothing can make room */
  write_seed(y, 6);
  struct adr_spill_stats s = spill_test_stats(m);
  assert_true(s.limit_exceeded >= 1);
  assert_int_equal(s.device_bytes, MiB + 512 * KiB);
  assert_int_equal(s.spillable_bytes, 512 * KiB);
  /* The next request spills y, the only candidate. */
  struct adr_spill_buffer* z = balloc(m, 256 * KiB);
  assert_int_equal(adr_spill_buffer_location(y), ADR_SPILL_LOCATION_HOST);
  assert_int_equal(adr_spill_buffer_location(x), ADR_SPILL_LOCATION_DEVICE);
  s = spill_test_stats(m);
  assert_int_equal(s.spilled[ADR_SPILL_TRIGGER_LIMIT].bytes, 512 * KiB);
  check_seed(y, 6);
  check_seed(x, 5);
  assert_int_equal(adr_spill_buffer_free(x, NULL), 0);
  assert_int_equal(adr_spill_buffer_free(y, NULL), 0);
  assert_int_equal(adr_spill_buffer_free(z, NULL), 0);
  destroy(m);
}

/* The stream rule: work queued on a stream before the release is in the
 * spilled bytes. */
static void test_spill_waits_for_last_use(void** state) {
  (void)state;
  const size_t size = 4 * MiB;
  struct adr_spill_manager* m = spill_test_manager(dev, 0, 0, 1);
  struct adr_spill_buffer* b = balloc(m, size);
  struct adr_stream* s = NULL;
  assert_int_equal(adr_stream_create(dev, &s, NULL), 0);
  for (int round = 0; round < 3; round++) {
    void* d = acquire(b, ADR_SPILL_ACCESS_WRITE);
    /* Several memsets queued: the last one decides. */
    for (int k = 0; k < 8; k++)
      assert_int_equal(adr_memset(dev, d, 0x10 * round + k, size, s, NULL), 0);
    assert_int_equal(adr_spill_buffer_release(b, s, NULL), 0);
    assert_int_equal(adr_spill_manager_spill(m, UINT64_MAX, NULL, NULL), 0);
    /* Reads of a buffer that was not spilled (the no-op devices) are
     * ordered by the application as for any pointer; a spill that did not
     * wait would have copied stale bytes, which no later wait repairs. */
    assert_int_equal(adr_stream_synchronize(s, NULL), 0);
    d = acquire(b, ADR_SPILL_ACCESS_READ);
    uint8_t* h = malloc(size);
    assert_int_equal(adr_copy(cpu, h, dev, d, size, NULL, NULL), 0);
    for (size_t i = 0; i < size; i += 4093)
      if (h[i] != 0x10 * round + 7) fail_msg("round %d byte %zu: 0x%02x", round, i, h[i]);
    free(h);
    release(b);
  }
  /* Released on a stream and freed at once: the free waits for it. */
  void* d = acquire(b, ADR_SPILL_ACCESS_WRITE);
  assert_int_equal(adr_memset(dev, d, 0x5a, size, s, NULL), 0);
  assert_int_equal(adr_spill_buffer_release(b, s, NULL), 0);
  assert_int_equal(adr_spill_buffer_free(b, NULL), 0);
  struct adr_error e;
  struct adr_stream* other = NULL;
  if (!host_memory && adr_stream_create(cpu, &other, NULL) == 0) {
    b = balloc(m, 64);
    (void)acquire(b, ADR_SPILL_ACCESS_READ);
    assert_int_equal(adr_spill_buffer_release(b, other, &e), EINVAL);
    assert_non_null(strstr(e.message, "belongs to"));
    release(b);
    assert_int_equal(adr_spill_buffer_free(b, NULL), 0);
    adr_stream_destroy(other, NULL);
  }
  assert_int_equal(adr_stream_destroy(s, NULL), 0);
  destroy(m);
}

/* Faults during a spill or an unspill: the buffer stays where it was,
 * usable, its bytes intact, and nothing leaks. */
static void spill_fault(struct adr_spill_manager* m, const char* slot, int status,
                        bool persistent) {
  struct adr_spill_buffer* b = balloc(m, 256 * KiB);
  write_seed(b, 77);
  void* before = acquire(b, ADR_SPILL_ACCESS_READ);
  release(b);
  uint64_t dev_before = device_allocated();
  uint64_t spilled = 1;
  struct adr_error e;
  assert_int_equal(adr_test_fault_set(slot, 1, status, persistent, NULL), 0);
  int st = adr_spill_manager_spill(m, UINT64_MAX, &spilled, &e);
  uint64_t fired = 0;
  adr_test_fault_counts(NULL, &fired);
  adr_test_fault_clear();
  assert_true(fired >= 1);
  assert_int_equal(st, status);
  print_message("  spill with '%s' failing: %s\n", slot, e.message);
  assert_int_equal(spilled, 0);
  assert_int_equal(adr_spill_buffer_location(b), ADR_SPILL_LOCATION_DEVICE);
  assert_int_equal(device_allocated(), dev_before);
  assert_ptr_equal(acquire(b, ADR_SPILL_ACCESS_READ), before);
  check_ptr(before, 256 * KiB, 77);
  release(b);
  /* And the next spill works. */
  assert_int_equal(adr_spill_manager_spill(m, UINT64_MAX, &spilled, NULL), 0);
  assert_int_equal(spilled, 256 * KiB);
  check_seed(b, 77);
  assert_int_equal(adr_spill_buffer_free(b, NULL), 0);
}

static void test_faults(void** state) {
  (void)state;
  SKIP_ON_HOST_MEMORY();
  /* Pageable host memory: the core's host allocation fails. */
  struct adr_spill_manager* m = spill_test_manager(dev, ADR_SPILL_PAGEABLE, 0, 1);
  spill_fault(m, "malloc", ENOMEM, false);
  spill_fault(m, "copy", EIO, false);
  struct adr_spill_stats s = spill_test_stats(m);
  assert_int_equal(s.spill_failures, 2);

  /* Unspill: the copy back fails; the buffer stays spilled, usable. */
  struct adr_spill_buffer* b = balloc(m, 256 * KiB);
  write_seed(b, 78);
  assert_int_equal(adr_spill_manager_spill(m, UINT64_MAX, NULL, NULL), 0);
  uint64_t dev_before = device_allocated();
  void* p = NULL;
  struct adr_error e;
  assert_int_equal(adr_test_fault_set("copy", 1, EIO, false, NULL), 0);
  assert_int_equal(adr_spill_buffer_acquire(b, ADR_SPILL_ACCESS_READ, &p, &e), EIO);
  adr_test_fault_clear();
  print_message("  unspill with 'copy' failing: %s\n", e.message);
  assert_int_equal(adr_spill_buffer_location(b), ADR_SPILL_LOCATION_HOST);
  assert_int_equal(device_allocated(), dev_before);
  s = spill_test_stats(m);
  assert_int_equal(s.unspill_failures, 1);
  assert_int_equal(s.device_bytes, 0);
  check_seed(b, 78);
  assert_int_equal(adr_spill_buffer_free(b, NULL), 0);
  destroy(m);

  /* Pinned host memory where the backend has it (cuda, hip): its
   * allocation fails (the pinned pool emptied first, so the backend is
   * asked). */
  ArrowDeviceType t = adr_device_type(dev);
  ArrowDeviceType pt = t == ARROW_DEVICE_CUDA   ? ARROW_DEVICE_CUDA_HOST
                       : t == ARROW_DEVICE_ROCM ? ARROW_DEVICE_ROCM_HOST
                                                : ARROW_DEVICE_CPU;
  struct adr_device* pinned = NULL;
  if (pt != ARROW_DEVICE_CPU && adr_device_get(pt, adr_device_id(dev), &pinned, NULL) == 0) {
    m = spill_test_manager(dev, 0, 0, 1);
    struct adr_memory_stats ps;
    memset(&ps, 0, sizeof(ps));
    ps.struct_size = sizeof(ps);
    assert_int_equal(adr_memory_trim(pinned, NULL, NULL), 0);
    assert_int_equal(adr_memory_stats_get(pinned, &ps, NULL), 0);
    uint64_t pinned_before = ps.allocated_bytes.current;
    /* "alloc" counts every device's allocations: the spill makes only the
     * pinned one. */
    /* Persistent: the pinned pool retries a failed growth at the exact
     * size; EIO, since the OOM chain would retry ENOMEM. */
    spill_fault(m, "alloc", EIO, true);
    assert_int_equal(adr_memory_stats_get(pinned, &ps, NULL), 0);
    assert_int_equal(ps.allocated_bytes.current, pinned_before);
    destroy(m);
  }
}

/* Eight threads acquire, verify, write, release, expose, free and spill
 * buffers of one manager at once, with a working set three times its
 * limit. */
#define THREADS 8
#define PER_THREAD 12
#define SHARED 8
#define TSIZE (64 * KiB)

struct worker {
  struct adr_spill_manager* m;
  struct adr_spill_buffer** shared;
  int id;
  int iterations;
  char failure[1200];
};

/* A seed above 0xffffff00 stands for a buffer memset to its low byte. */
#define UNIFORM(v) (0xffffff00u | (uint32_t)(v))

static bool verify(struct adr_spill_buffer* b, void* d, uint32_t seed, uint8_t* h, uint8_t* want,
                   char* why, size_t whysize) {
  if (seed >= UNIFORM(0))
    memset(want, (int)(seed & 0xff), TSIZE);
  else
    spill_test_fill(want, TSIZE, seed);
  struct adr_error e;
  if (adr_copy(cpu, h, dev, d, TSIZE, NULL, &e) != 0) {
    snprintf(why, whysize, "copy out: %.400s", e.message);
    return false;
  }
  if (memcmp(h, want, TSIZE) != 0) {
    snprintf(why, whysize, "buffer %p: bytes differ from seed %u", (void*)b, seed);
    return false;
  }
  return true;
}

static void* work(void* arg) {
  struct worker* w = arg;
  struct adr_spill_buffer* own[PER_THREAD];
  uint32_t seed[PER_THREAD];
  uint8_t* h = malloc(TSIZE);
  uint8_t* want = malloc(TSIZE);
  struct adr_error e;
  uint32_t rng = 0x9e3779b9u * (uint32_t)(w->id + 1);
  /* Work queued on the thread's stream before a release is the buffer's
   * last use: other threads' spills of it go to the background (where the
   * backend allows) behind it. This thread orders its own later reads. */
  struct adr_stream* stream = NULL;
  bool queued = false;
  if (adr_stream_create(dev, &stream, &e) != 0) {
    snprintf(w->failure, sizeof(w->failure), "stream: %.400s", e.message);
    stream = NULL;
  }
#define NEXT() (rng = rng * 1103515245u + 12345u, rng >> 8)
#define FAIL(...)                                          \
  do {                                                     \
    snprintf(w->failure, sizeof(w->failure), __VA_ARGS__); \
    goto out;                                              \
  } while (0)
  for (int i = 0; i < PER_THREAD; i++) {
    own[i] = NULL;
    if (adr_spill_buffer_alloc(w->m, TSIZE, &own[i], &e) != 0) FAIL("alloc: %s", e.message);
    seed[i] = (uint32_t)(w->id * 1000 + i);
    void* d = NULL;
    if (adr_spill_buffer_acquire(own[i], ADR_SPILL_ACCESS_WRITE, &d, &e) != 0)
      FAIL("acquire: %s", e.message);
    spill_test_fill(h, TSIZE, seed[i]);
    if (adr_copy(dev, d, cpu, h, TSIZE, NULL, &e) != 0) FAIL("copy in: %s", e.message);
    adr_spill_buffer_release(own[i], NULL, NULL);
  }
  for (int it = 0; it < w->iterations && stream != NULL; it++) {
    unsigned op = NEXT() % 100;
    int i = (int)(NEXT() % PER_THREAD);
    void* d = NULL;
    if (queued) {
      if (adr_stream_synchronize(stream, &e) != 0) FAIL("synchronize: %s", e.message);
      queued = false;
    }
    if (op < 12) { /* own: verify, then a memset queued on the stream */
      if (adr_spill_buffer_acquire(own[i], ADR_SPILL_ACCESS_WRITE, &d, &e) != 0)
        FAIL("acquire: %s", e.message);
      if (!verify(own[i], d, seed[i], h, want, w->failure, sizeof(w->failure))) goto out;
      seed[i] = UNIFORM(NEXT() & 0xff);
      if (adr_memset(dev, d, (int)(seed[i] & 0xff), TSIZE, stream, &e) != 0)
        FAIL("memset: %s", e.message);
      if (adr_spill_buffer_release(own[i], stream, &e) != 0) FAIL("release: %s", e.message);
      queued = true;
    } else if (op < 50) { /* own: verify, rewrite */
      if (adr_spill_buffer_acquire(own[i], ADR_SPILL_ACCESS_WRITE, &d, &e) != 0)
        FAIL("acquire: %s", e.message);
      if (!verify(own[i], d, seed[i], h, want, w->failure, sizeof(w->failure))) goto out;
      seed[i] += 100000;
      spill_test_fill(h, TSIZE, seed[i]);
      if (adr_copy(dev, d, cpu, h, TSIZE, NULL, &e) != 0) FAIL("copy in: %s", e.message);
      if (adr_spill_buffer_release(own[i], NULL, &e) != 0) FAIL("release: %s", e.message);
    } else if (op < 80) { /* shared: nested read acquires from every thread */
      struct adr_spill_buffer* s = w->shared[NEXT() % SHARED];
      void* d2 = NULL;
      if (adr_spill_buffer_acquire(s, ADR_SPILL_ACCESS_READ, &d, &e) != 0 ||
          adr_spill_buffer_acquire(s, ADR_SPILL_ACCESS_READ, &d2, &e) != 0)
        FAIL("acquire shared: %s", e.message);
      if (d != d2) FAIL("nested acquires gave %p and %p", d, d2);
      uint32_t sseed = 0;
      for (int k = 0; k < SHARED; k++)
        if (w->shared[k] == s) sseed = 424242u + (uint32_t)k;
      if (!verify(s, d, sseed, h, want, w->failure, sizeof(w->failure))) goto out;
      adr_spill_buffer_release(s, NULL, NULL);
      adr_spill_buffer_release(s, NULL, NULL);
    } else if (op < 90) { /* free and reallocate */
      if (adr_spill_buffer_free(own[i], &e) != 0) FAIL("free: %s", e.message);
      own[i] = NULL;
      if (adr_spill_buffer_alloc(w->m, TSIZE, &own[i], &e) != 0) FAIL("alloc: %s", e.message);
      seed[i] = (uint32_t)(w->id * 1000 + i + it * 17);
      if (adr_spill_buffer_acquire(own[i], ADR_SPILL_ACCESS_WRITE, &d, &e) != 0)
        FAIL("acquire: %s", e.message);
      spill_test_fill(h, TSIZE, seed[i]);
      if (adr_copy(dev, d, cpu, h, TSIZE, NULL, &e) != 0) FAIL("copy in: %s", e.message);
      adr_spill_buffer_release(own[i], NULL, NULL);
    } else if (op < 97) { /* explicit spill from this thread */
      if (adr_spill_manager_spill(w->m, 3 * TSIZE, NULL, &e) != 0) FAIL("spill: %s", e.message);
    } else { /* expose one of its own (it leaves the spillable set) */
      if (adr_spill_buffer_expose(own[i], "thread", &d, &e) != 0) FAIL("expose: %s", e.message);
      if (!verify(own[i], d, seed[i], h, want, w->failure, sizeof(w->failure))) goto out;
      if (adr_spill_buffer_location(own[i]) != ADR_SPILL_LOCATION_DEVICE) FAIL("exposed moved");
    }
  }
out:
  for (int i = 0; i < PER_THREAD; i++) adr_spill_buffer_free(own[i], NULL);
  if (stream != NULL) adr_stream_destroy(stream, NULL);
  free(h);
  free(want);
  return NULL;
#undef NEXT
#undef FAIL
}

static void test_threads(void** state) {
  (void)state;
  /* 8 x 12 x 64 KiB own + 8 x 64 KiB shared = 6.5 MiB: 3x a 2 MiB limit. */
  struct adr_spill_manager* m = spill_test_manager(dev, ADR_SPILL_ON_DEMAND, 2 * MiB, 1);
  struct adr_spill_buffer* shared[SHARED];
  for (int k = 0; k < SHARED; k++) {
    shared[k] = balloc(m, TSIZE);
    write_seed(shared[k], 424242u + (uint32_t)k);
  }
  pthread_t t[THREADS];
  struct worker w[THREADS];
  const char* iters = getenv("ADR_SPILL_TEST_ITERATIONS");
  for (int i = 0; i < THREADS; i++) {
    w[i] = (struct worker){m, shared, i, iters ? atoi(iters) : 150, ""};
    assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < THREADS; i++)
    if (w[i].failure[0] != '\0') fail_msg("thread %d: %s", i, w[i].failure);
  for (int k = 0; k < SHARED; k++) check_seed(shared[k], 424242u + (uint32_t)k);
  struct adr_spill_stats s = spill_test_stats(m);
  char text[1024];
  print_message("%s", adr_spill_stats_format(&s, text, sizeof(text)));
  assert_int_equal(s.buffers, SHARED);
  if (!host_memory) {
    assert_true(s.spilled[ADR_SPILL_TRIGGER_LIMIT].bytes > 0);
    assert_true(s.unspilled.bytes > 0);
  }
  assert_int_equal(s.spill_failures, 0);
  for (int k = 0; k < SHARED; k++) assert_int_equal(adr_spill_buffer_free(shared[k], NULL), 0);
  destroy(m);
}

/* Statistics level 2: exposures grouped by reason and call stack. */
struct seen {
  int records;
  uint64_t count, bytes;
  bool has_frames;
};
static void on_exposure(void* ctx, const struct adr_spill_exposure* x) {
  struct seen* s = ctx;
  s->records++;
  s->count += x->count;
  s->bytes += x->bytes;
  if (strlen(x->backtrace) > 0) s->has_frames = true;
}

__attribute__((noinline)) static void expose_here(struct adr_spill_buffer* b, const char* why) {
  assert_int_equal(adr_spill_buffer_expose(b, why, NULL, NULL), 0);
}

static void* expose_export(void* b) {
  adr_spill_buffer_expose(b, "export", NULL, NULL);
  return NULL;
}

static void test_exposure_records(void** state) {
  (void)state;
  struct adr_spill_manager* m = spill_test_manager(dev, 0, 0, 1);
  struct adr_error e;
  assert_int_equal(adr_spill_exposures_list(m, on_exposure, NULL, NULL, &e), ENOTSUP);
  destroy(m);
  m = spill_test_manager(dev, 0, 0, 2);
  struct adr_spill_buffer* b[3];
  for (int i = 0; i < 3; i++) b[i] = balloc(m, 1000);
  /* The same stack twice: one thread function, run twice (two call sites
   * in one function are two stacks, and compilers duplicate call sites
   * when they unroll or peel loops). */
  for (int i = 0; i < 2; i++) {
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, expose_export, b[i]), 0);
    pthread_join(t, NULL);
  }
  expose_here(b[2], "interop");
  expose_here(b[2], "again"); /* idempotent: not recorded twice */
  struct seen s = {0, 0, 0, false};
  size_t n = 0;
  assert_int_equal(adr_spill_exposures_list(m, on_exposure, &s, &n, NULL), 0);
  assert_int_equal(n, 2);
  assert_int_equal(s.records, 2);
  assert_int_equal(s.count, 3);
  assert_int_equal(s.bytes, 3000);
  assert_true(s.has_frames);
  for (int i = 0; i < 3; i++) assert_int_equal(adr_spill_buffer_free(b[i], NULL), 0);
  destroy(m);
}

/* ADR_SPILL is unset in these runs: no global manager. */
static void test_global_off(void** state) {
  (void)state;
  struct adr_spill_manager* m = (struct adr_spill_manager*)1;
  assert_int_equal(adr_spill_manager_global(dev, &m, NULL), 0);
  assert_null(m);
}

static int setup(void** state) {
  (void)state;
  const char* c = getenv("ADR_SPILL_TEST_CAPACITY");
  capacity = c ? (size_t)strtoull(c, NULL, 10) : 16 * MiB;
  return 0;
}

int main(void) {
  int missing = spill_test_device(&dev, &host_memory);
  if (missing) return missing;
  struct adr_error e;
  if (adr_device_get(ARROW_DEVICE_CPU, 0, &cpu, &e) != 0) {
    fprintf(stderr, "no cpu device: %s\n", e.message);
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_basics),
      cmocka_unit_test(test_working_set_3x_limit),
      cmocka_unit_test(test_on_demand_real_failure),
      cmocka_unit_test(test_cannot_fit),
      cmocka_unit_test(test_locked_and_exposed_stay),
      cmocka_unit_test(test_limit_exceeded),
      cmocka_unit_test(test_spill_waits_for_last_use),
      cmocka_unit_test(test_faults),
      cmocka_unit_test(test_threads),
      cmocka_unit_test(test_exposure_records),
      cmocka_unit_test(test_global_off),
  };
  return cmocka_run_group_tests_name(adr_device_name(dev), tests, setup, NULL);
}
