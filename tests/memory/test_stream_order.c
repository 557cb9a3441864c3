/* SPDX-License-Identifier: Apache-2.0
 *
 * Stream-ordered reuse on real asynchronous streams (the CPU backend's
 * created streams run on worker threads): a block freed on stream A while A
 * still has work that reads it must not be written by stream B, nor handed
 * to the host, before A has reached the free.
 *
 * Stream A is held back by a gate: it waits on an event recorded on a third
 * stream after a long memset. While A is held, B is handed A's block and
 * overwrites it. If the pool did not order B after A's free, B's write would
 * land before A's read and A would read the new bytes.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "adr/adr.h"
#include "adr/memory.h"

#define MiB ((size_t)1 << 20)
#define GATE_BYTES (256 * MiB)

static struct adr_device* dev;
static struct adr_device* host; /* the CPU: where host buffers live */
static void* gate_buf;

static int setup(void** state) {
  (void)state;
  struct adr_error err;
  if (adr_device_get(ARROW_DEVICE_CPU, 0, &host, &err) != 0 ||
      adr_device_default(&dev, &err) != 0) {
    fprintf(stderr, "no device: %s\n", err.message);
    return -1;
  }
  if (adr_alloc_with(dev, adr_allocator_backend(), GATE_BYTES, 0, NULL, &gate_buf, &err) != 0) {
    fprintf(stderr, "gate buffer: %s\n", err.message);
    return -1;
  }
  return 0;
}

static int teardown(void** state) {
  (void)state;
  return adr_free(dev, gate_buf, GATE_BYTES, NULL, NULL);
}

/* Holds `held` back behind a long stretch of work on `gate`. */
static struct adr_event* hold_back(struct adr_stream* gate, struct adr_stream* held) {
  struct adr_event* ev = NULL;
  for (int i = 0; i < 4; i++)
    assert_int_equal(adr_memset(dev, gate_buf, i, GATE_BYTES, gate, NULL), 0);
  assert_int_equal(adr_event_create(dev, &ev, NULL), 0);
  assert_int_equal(adr_event_record(ev, gate, NULL), 0);
  assert_int_equal(adr_stream_wait_event(held, ev, NULL), 0);
  return ev;
}

static void* xalloc(size_t size, struct adr_stream* s) {
  void* p = NULL;
  struct adr_error err;
  if (adr_alloc(dev, size, 0, s, &p, &err) != 0) fail_msg("adr_alloc: %s", err.message);
  return p;
}

static uint64_t stream_waits(void) {
  struct adr_memory_stats st;
  st.struct_size = sizeof(st);
  assert_int_equal(adr_memory_stats_get(dev, &st, NULL), 0);
  return st.stream_waits;
}

static void expect_all(const unsigned char* buf, size_t n, unsigned char v) {
  for (size_t i = 0; i < n; i++)
    if (buf[i] != v) fail_msg("byte %zu is 0x%02x, expected 0x%02x", i, buf[i], v);
}

static void test_other_stream_waits_for_free(void** state) {
  (void)state;
  struct adr_stream *gate, *a, *b;
  assert_int_equal(adr_stream_create(dev, &gate, NULL), 0);
  assert_int_equal(adr_stream_create(dev, &a, NULL), 0);
  assert_int_equal(adr_stream_create(dev, &b, NULL), 0);
  assert_int_equal(adr_memory_trim(dev, NULL, NULL), 0);
  /* A whole 2 MiB chunk, so the only block the pool can reuse is this one. */
  const size_t n = 2 * MiB;
  unsigned char* seen_by_a = malloc(n);
  memset(seen_by_a, 0, n);
  void* p = xalloc(n, NULL);
  assert_int_equal(adr_memset(dev, p, 0x11, n, NULL, NULL), 0);

  struct adr_event* ev = hold_back(gate, a);
  /* A reads p (once the gate opens), then frees it. */
  assert_int_equal(adr_copy(host, seen_by_a, dev, p, n, a, NULL), 0);
  assert_int_equal(adr_free(dev, p, n, a, NULL), 0);

  /* The host must not get p while A may still read it. */
  void* h = xalloc(n, NULL);
  assert_ptr_not_equal(h, p);

  /* B gets p, ordered after A's free, and overwrites it at once. */
  uint64_t waits = stream_waits();
  void* q = xalloc(n, b);
  assert_ptr_equal(q, p);
  assert_int_equal(stream_waits(), waits + 1);
  assert_int_equal(adr_memset(dev, q, 0x22, n, b, NULL), 0);

  assert_int_equal(adr_stream_synchronize(b, NULL), 0);
  assert_int_equal(adr_stream_synchronize(a, NULL), 0);
  expect_all(seen_by_a, n, 0x11);
  unsigned char* now = malloc(n);
  assert_int_equal(adr_copy(host, now, dev, q, n, NULL, NULL), 0);
  expect_all(now, n, 0x22);

  assert_int_equal(adr_free(dev, q, n, b, NULL), 0);
  assert_int_equal(adr_free(dev, h, n, NULL, NULL), 0);
  assert_int_equal(adr_event_destroy(ev, NULL), 0);
  assert_int_equal(adr_stream_destroy(gate, NULL), 0);
  assert_int_equal(adr_stream_destroy(a, NULL), 0);
  assert_int_equal(adr_stream_destroy(b, NULL), 0);
  free(now);
  free(seen_by_a);
}

static void test_same_stream_reuses_without_wait(void** state) {
  (void)state;
  struct adr_stream *gate, *a;
  assert_int_equal(adr_stream_create(dev, &gate, NULL), 0);
  assert_int_equal(adr_stream_create(dev, &a, NULL), 0);
  const size_t n = 64 * 1024;
  unsigned char* seen = malloc(n);
  void* p = xalloc(n, a);
  assert_int_equal(adr_memset(dev, p, 0x33, n, a, NULL), 0);
  struct adr_event* ev = hold_back(gate, a);
  assert_int_equal(adr_copy(host, seen, dev, p, n, a, NULL), 0);
  assert_int_equal(adr_free(dev, p, n, a, NULL), 0);
  /* Same stream: reusable at once, stream order protects it. */
  uint64_t waits = stream_waits();
  void* q = xalloc(n, a);
  assert_ptr_equal(q, p);
  assert_int_equal(stream_waits(), waits);
  assert_int_equal(adr_memset(dev, q, 0x44, n, a, NULL), 0);
  assert_int_equal(adr_stream_synchronize(a, NULL), 0);
  expect_all(seen, n, 0x33);
  assert_int_equal(adr_free(dev, q, n, a, NULL), 0);
  assert_int_equal(adr_event_destroy(ev, NULL), 0);
  assert_int_equal(adr_stream_destroy(gate, NULL), 0);
  assert_int_equal(adr_stream_destroy(a, NULL), 0);
  free(seen);
}

static void test_destroyed_stream_blocks_go_to_host(void** state) {
  (void)state;
  struct adr_stream *gate, *a;
  assert_int_equal(adr_stream_create(dev, &gate, NULL), 0);
  assert_int_equal(adr_stream_create(dev, &a, NULL), 0);
  assert_int_equal(adr_memory_trim(dev, NULL, NULL), 0);
  const size_t n = 2 * MiB;
  unsigned char* seen = malloc(n);
  void* p = xalloc(n, NULL);
  assert_int_equal(adr_memset(dev, p, 0x55, n, NULL, NULL), 0);
  struct adr_event* ev = hold_back(gate, a);
  assert_int_equal(adr_copy(host, seen, dev, p, n, a, NULL), 0);
  assert_int_equal(adr_free(dev, p, n, a, NULL), 0);
  /* Destroying A waits for its work; then its cached block is the host's. */
  assert_int_equal(adr_stream_destroy(a, NULL), 0);
  expect_all(seen, n, 0x55);
  void* q = xalloc(n, NULL);
  assert_ptr_equal(q, p);
  assert_int_equal(adr_free(dev, q, n, NULL, NULL), 0);
  assert_int_equal(adr_event_destroy(ev, NULL), 0);
  assert_int_equal(adr_stream_destroy(gate, NULL), 0);
  free(seen);
}

int main(void) {
  adr_init(NULL);
  struct adr_device* d = NULL;
  struct adr_device_info info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  if (adr_device_default(&d, NULL) != 0 || adr_device_info_get(d, &info, NULL) != 0 ||
      !(info.caps & ADR_CAP_ASYNC_STREAMS)) {
    printf("test_stream_order: the default device has no asynchronous streams: skipped\n");
    return 77;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_other_stream_waits_for_free),
      cmocka_unit_test(test_same_stream_reuses_without_wait),
      cmocka_unit_test(test_destroyed_stream_blocks_go_to_host),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
