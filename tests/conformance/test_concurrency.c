/* SPDX-License-Identifier: Apache-2.0
 *
 * Conformance: several threads use one device at once, each with its own
 * stream (and, every other round, the shared NULL stream). adr.h promises
 * that every function may be called from any thread at any time.
 *
 * cmocka's assertions must not run off the main thread, so the workers
 * record their first failure as text and the main thread asserts on it.
 */
#include <pthread.h>
#include <stdlib.h>

#include "conformance.h"

enum { THREADS = 4, ROUNDS = 40, MAX_SIZE = 256 * 1024 };

struct worker {
  pthread_t thread;
  unsigned index;
  pthread_barrier_t* start;
  char failure[1200];
};

#define WORKER_CHECK(w, call, what)                                                               \
  do {                                                                                            \
    struct adr_error werr_ = {{0}};                                                               \
    int wst_ = (call);                                                                            \
    if (wst_ != 0) {                                                                              \
      snprintf((w)->failure, sizeof((w)->failure), "thread %u round %u: %s: %s (%s)", (w)->index, \
               round, what, adr_status_name(wst_), werr_.message);                                \
      goto out;                                                                                   \
    }                                                                                             \
  } while (0)
#define WERR (&werr_)

static void* worker_main(void* arg) {
  struct worker* w = arg;
  struct adr_device* dev = g_conf.dev;
  struct adr_stream* s = NULL;
  struct adr_event* e = NULL;
  uint8_t* h = malloc(MAX_SIZE);
  uint8_t* back = malloc(MAX_SIZE);
  void* d = NULL;
  size_t n = 0;
  unsigned round = 0;
  if (h == NULL || back == NULL) {
    snprintf(w->failure, sizeof(w->failure), "thread %u: malloc failed", w->index);
    pthread_barrier_wait(w->start);
    goto out;
  }
  pthread_barrier_wait(w->start);

  WORKER_CHECK(w, adr_stream_create(dev, &s, WERR), "adr_stream_create");
  WORKER_CHECK(w, adr_event_create(dev, &e, WERR), "adr_event_create");
  for (round = 0; round < ROUNDS; round++) {
    /* Odd rounds on the worker's stream, even rounds on the NULL stream. */
    struct adr_stream* q = (round % 2) ? s : NULL;
    n = 1 + ((size_t)round * 7919u + (size_t)w->index * 104729u) % MAX_SIZE;
    uint32_t seed = 5000 + w->index * 1000 + round;
    size_t hole = n / 3, hole_len = n / 4;
    conf_fill(h, n, seed);
    memset(back, 0, n);

    WORKER_CHECK(w, adr_alloc(dev, n, (round % 3) ? 0 : 4096, q, &d, WERR), "adr_alloc");
    WORKER_CHECK(w, adr_copy(dev, d, g_conf.host, h, n, q, WERR), "adr_copy to the device");
    WORKER_CHECK(w, adr_memset(dev, (uint8_t*)d + hole, 0xAB, hole_len, q, WERR), "adr_memset");
    WORKER_CHECK(w, adr_copy(g_conf.host, back, dev, d, n, q, WERR), "adr_copy to the host");
    WORKER_CHECK(w, adr_event_record(e, q, WERR), "adr_event_record");
    WORKER_CHECK(w, adr_free(dev, d, n, q, WERR), "adr_free");
    d = NULL;
    WORKER_CHECK(w, adr_event_synchronize(e, WERR), "adr_event_synchronize");

    for (size_t i = 0; i < n; i++) {
      uint8_t want = (i >= hole && i < hole + hole_len) ? 0xAB : conf_pattern_byte(seed, i);
      if (back[i] != want) {
        snprintf(w->failure, sizeof(w->failure),
                 "thread %u round %u: byte %zu of %zu is 0x%02x, expected 0x%02x", w->index, round,
                 i, n, back[i], want);
        goto out;
      }
    }
  }

out:
  if (s != NULL) adr_stream_synchronize(s, NULL);
  if (d != NULL) adr_free(dev, d, n, NULL, NULL);
  if (e != NULL) adr_event_destroy(e, NULL);
  if (s != NULL) adr_stream_destroy(s, NULL);
  free(back);
  free(h);
  return NULL;
}

void test_concurrent_threads(void** state) {
  (void)state;
  struct worker* w = conf_host_alloc(THREADS * sizeof(*w));
  pthread_barrier_t start;
  assert_int_equal(pthread_barrier_init(&start, NULL, THREADS), 0);
  unsigned started = 0;
  for (unsigned i = 0; i < THREADS; i++) {
    w[i] = (struct worker){.index = i, .start = &start};
    if (pthread_create(&w[i].thread, NULL, worker_main, &w[i]) != 0) break;
    started++;
  }
  if (started != THREADS) {
    /* The barrier would never open: nothing to join safely. */
    fail_msg("pthread_create failed after %u threads", started);
  }
  for (unsigned i = 0; i < THREADS; i++) pthread_join(w[i].thread, NULL);
  pthread_barrier_destroy(&start);
  for (unsigned i = 0; i < THREADS; i++)
    if (w[i].failure[0] != '\0') conf_fault_accept_text(w[i].failure);
  for (unsigned i = 0; i < THREADS; i++)
    if (w[i].failure[0] != '\0') fail_msg("%s", w[i].failure);
  conf_host_free(w);
}
