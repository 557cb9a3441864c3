/* SPDX-License-Identifier: Apache-2.0
 *
 * Multithreaded stress of the allocation path on the default device
 * (ADR_DEVICE; registered once per backend configuration): several threads,
 * each with two streams, allocate mixed sizes on a stream or the host, copy
 * a pattern in and out, free stream-ordered (before the copies completed)
 * or later on the other stream after an event, and verify every byte that
 * comes back. Overlapping allocations, a block reused before its stream
 * reached the free, or a lost free show up as wrong bytes or wrong
 * statistics. Meant to run under ASan and TSan too.
 */
#include <errno.h>
#include <pthread.h>
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

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define THREADS 4
#define LIVE 6

static struct adr_device* dev;
static struct adr_device* host;
static int iterations = 150;

struct live_block {
  unsigned char* p;
  size_t size;
  unsigned char seed;
  struct adr_stream* stream;
};

struct worker {
  int id;
  char failure[1024];
};

static void fill(unsigned char* buf, size_t n, unsigned char seed) {
  for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)(seed + i * 131u + (i >> 9));
}

static int check(const unsigned char* buf, size_t n, unsigned char seed) {
  for (size_t i = 0; i < n; i++)
    if (buf[i] != (unsigned char)(seed + i * 131u + (i >> 9))) return (int)(i + 1);
  return 0;
}

#define TRY(w, expr)                                                                 \
  do {                                                                               \
    struct adr_error e_;                                                             \
    int st_ = (expr);                                                                \
    if (st_ != 0) {                                                                  \
      snprintf((w)->failure, sizeof((w)->failure), "%s: %.400s", #expr, e_.message); \
      goto out;                                                                      \
    }                                                                                \
    (void)e_;                                                                        \
  } while (0)

static void* work(void* arg) {
  struct worker* w = arg;
  struct adr_stream* s[2] = {NULL, NULL};
  struct live_block live[LIVE];
  memset(live, 0, sizeof(live));
  unsigned char* h_in = malloc(4 * MiB);
  unsigned char* h_out = malloc(4 * MiB);
  uint32_t rng = 0x9e3779b9u * (uint32_t)(w->id + 1);
  if (h_in == NULL || h_out == NULL) {
    snprintf(w->failure, sizeof(w->failure), "out of host memory");
    goto out;
  }
  TRY(w, adr_stream_create(dev, &s[0], &e_));
  TRY(w, adr_stream_create(dev, &s[1], &e_));
  for (int it = 0; it < iterations; it++) {
    rng = rng * 1664525u + 1013904223u;
    unsigned kind = (rng >> 24) % 100;
    size_t size = kind < 70   ? 1 + (rng >> 4) % (64 * KiB)
                  : kind < 95 ? 1 + (rng >> 4) % MiB
                              : 1 + (rng >> 4) % (4 * MiB);
    unsigned pick = (rng >> 8) % 3;
    struct adr_stream* st = pick == 2 ? NULL : s[pick];
    unsigned char seed = (unsigned char)(w->id * 37 + it);
    void* p = NULL;
    TRY(w, adr_alloc(dev, size, 0, st, &p, &e_));
    fill(h_in, size, seed);
    TRY(w, adr_copy(dev, p, host, h_in, size, st, &e_));
    memset(h_out, 0, size);
    TRY(w, adr_copy(host, h_out, dev, p, size, st, &e_));
    int slot = (int)((rng >> 12) % LIVE);
    if (live[slot].p == NULL && (rng & 1)) {
      /* Keep it for a later iteration. */
      live[slot] = (struct live_block){p, size, seed, st};
      if (st) TRY(w, adr_stream_synchronize(st, &e_));
    } else {
      /* Free before the copies finished: the stream orders the free. */
      TRY(w, adr_free(dev, p, size, st, &e_));
      if (st) TRY(w, adr_stream_synchronize(st, &e_));
    }
    int bad = check(h_out, size, seed);
    if (bad) {
      snprintf(w->failure, sizeof(w->failure), "iteration %d: byte %d of %zu wrong", it, bad - 1,
               size);
      goto out;
    }
    /* Retire an older block: check it was not touched, then free it on
     * the other stream, ordered after its own with an event. */
    int old = (int)((rng >> 16) % LIVE);
    if (live[old].p != NULL && live[old].p != p) {
      struct live_block* b = &live[old];
      memset(h_out, 0, b->size);
      TRY(w, adr_copy(host, h_out, dev, b->p, b->size, NULL, &e_));
      bad = check(h_out, b->size, b->seed);
      if (bad) {
        snprintf(w->failure, sizeof(w->failure), "live block of %zu: byte %d changed", b->size,
                 bad - 1);
        goto out;
      }
      struct adr_stream* other = b->stream == s[0] ? s[1] : s[0];
      struct adr_event* ev = NULL;
      TRY(w, adr_event_create(dev, &ev, &e_));
      TRY(w, adr_event_record(ev, b->stream, &e_));
      TRY(w, adr_stream_wait_event(other, ev, &e_));
      TRY(w, adr_free(dev, b->p, b->size, other, &e_));
      TRY(w, adr_event_destroy(ev, &e_));
      b->p = NULL;
    }
  }
out:
  for (int i = 0; i < LIVE; i++)
    if (live[i].p != NULL) adr_free(dev, live[i].p, live[i].size, NULL, NULL);
  for (int i = 0; i < 2; i++)
    if (s[i] != NULL) adr_stream_destroy(s[i], NULL);
  free(h_in);
  free(h_out);
  return NULL;
}

static void run_threads(void) {
  struct adr_memory_stats before, after;
  before.struct_size = after.struct_size = sizeof(before);
  assert_int_equal(adr_memory_stats_get(dev, &before, NULL), 0);
  pthread_t th[THREADS];
  struct worker w[THREADS];
  for (int i = 0; i < THREADS; i++) {
    memset(&w[i], 0, sizeof(w[i]));
    w[i].id = i;
    assert_int_equal(pthread_create(&th[i], NULL, work, &w[i]), 0);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < THREADS; i++)
    if (w[i].failure[0]) fail_msg("thread %d: %s", i, w[i].failure);
  assert_int_equal(adr_memory_stats_get(dev, &after, NULL), 0);
  assert_int_equal(after.allocated_bytes.current, before.allocated_bytes.current);
  assert_int_equal(after.allocated_count.current, before.allocated_count.current);
  assert_true(after.allocated_count.total > before.allocated_count.total);
}

static void test_stress_pool(void** state) {
  (void)state;
  assert_int_equal(adr_allocator_set(dev, adr_allocator_pool(), NULL, NULL), 0);
  run_threads();
  /* Everything came back: the pool can give all of it to the backend. */
  size_t released = 0;
  assert_int_equal(adr_memory_trim(dev, &released, NULL), 0);
  struct adr_memory_stats s;
  s.struct_size = sizeof(s);
  assert_int_equal(adr_memory_stats_get(dev, &s, NULL), 0);
  assert_int_equal(s.reserved_bytes.current, 0);
  assert_int_equal(s.cached_bytes, 0);
}

static void test_stress_backend_handler(void** state) {
  (void)state;
  assert_int_equal(adr_allocator_set(dev, adr_allocator_backend(), NULL, NULL), 0);
  run_threads();
  assert_int_equal(adr_allocator_set(dev, adr_allocator_pool(), NULL, NULL), 0);
}

static void test_stress_adaptor_stack(void** state) {
  (void)state;
  struct adr_allocator *stats = NULL, *limit = NULL, *track = NULL;
  assert_int_equal(adr_allocator_stats_create(adr_allocator_pool(), &stats, NULL), 0);
  assert_int_equal(adr_allocator_limit_create(stats, UINT64_C(1) << 40, &limit, NULL), 0);
  assert_int_equal(adr_allocator_tracking_create(limit, &track, NULL), 0);
  assert_int_equal(adr_allocator_set(dev, track, NULL, NULL), 0);
  run_threads();
  assert_int_equal(adr_allocator_set(dev, adr_allocator_pool(), NULL, NULL), 0);
  struct adr_memory_stats s;
  s.struct_size = sizeof(s);
  assert_int_equal(adr_allocator_stats_get(stats, &s, NULL), 0);
  assert_int_equal(s.allocated_count.current, 0);
  assert_int_equal(s.allocated_count.total, (uint64_t)THREADS * (uint64_t)iterations);
  assert_int_equal(adr_allocator_destroy(track, NULL), 0);
  assert_int_equal(adr_allocator_destroy(limit, NULL), 0);
  assert_int_equal(adr_allocator_destroy(stats, NULL), 0);
}

int main(void) {
  struct adr_error err;
  const char* iters = getenv("ADR_STRESS_ITERATIONS");
  if (iters != NULL && atoi(iters) > 0) iterations = atoi(iters);
  if (adr_device_default(&dev, &err) != 0 || adr_device_get(ARROW_DEVICE_CPU, 0, &host, &err)) {
    const char* require = getenv("ADR_MEMORY_REQUIRE");
    printf("test_stress: no device (%s)%s\n", err.message,
           require && require[0] == '1' ? "" : ": skipped");
    return require && require[0] == '1' ? 1 : 77;
  }
  printf("test_stress: %s, %d threads x %d iterations\n", adr_device_name(dev), THREADS,
         iterations);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stress_pool),
      cmocka_unit_test(test_stress_backend_handler),
      cmocka_unit_test(test_stress_adaptor_stack),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
