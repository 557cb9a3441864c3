/* SPDX-License-Identifier: Apache-2.0
 *
 * The OpenCL backend's thread-safety promises under load: several threads
 * allocate, copy through their own streams (device-side waits between two
 * streams each) and free at the same time, so the shared interval map and
 * the per-stream fast-path state are hit concurrently; and one event is
 * re-recorded by one thread while others query, wait on and synchronise
 * with it (the per-event lock). Data is checked every round.
 */
#include <pthread.h>

#include "ocl_test.h"

static struct adr_device* dev;
static struct adr_device* cpu;

enum { THREADS = 4, ROUNDS = 40, SIZE = 48 * 1024 };

struct worker {
  int index;
  int failures;
  char message[2048];
};

#define WORKER_CHECK(w, call)                                                        \
  do {                                                                               \
    struct adr_error e_ = {{0}};                                                     \
    int st_ = (call);                                                                \
    if (st_ != 0 && (w)->failures++ == 0)                                            \
      snprintf((w)->message, sizeof((w)->message), "%s: %s", #call, e_.message);     \
  } while (0)
#define W_ERR (&e_)

static void* copy_worker(void* arg) {
  struct worker* w = arg;
  unsigned char* in = malloc(SIZE);
  unsigned char* out = malloc(SIZE);
  struct adr_stream* up = NULL;
  struct adr_stream* down = NULL;
  struct adr_event* ev = NULL;
  if (in == NULL || out == NULL) {
    w->failures++;
    goto done;
  }
  WORKER_CHECK(w, adr_stream_create(dev, &up, W_ERR));
  WORKER_CHECK(w, adr_stream_create(dev, &down, W_ERR));
  WORKER_CHECK(w, adr_event_create(dev, &ev, W_ERR));
  if (w->failures) goto done;
  for (int round = 0; round < ROUNDS; round++) {
    for (size_t i = 0; i < SIZE; i++) in[i] = (unsigned char)(i * 7 + (size_t)round * 31 + (size_t)w->index);
    memset(out, 0, SIZE);
    size_t off = (size_t)(round % 7) * 128;
    void* buf = NULL;
    WORKER_CHECK(w, adr_alloc(dev, SIZE + 1024, 0, up, &buf, W_ERR));
    if (w->failures) break;
    WORKER_CHECK(w, adr_copy(dev, (char*)buf + off, cpu, in, SIZE, up, W_ERR));
    WORKER_CHECK(w, adr_event_record(ev, up, W_ERR));
    WORKER_CHECK(w, adr_stream_wait_event(down, ev, W_ERR));
    WORKER_CHECK(w, adr_copy(cpu, out, dev, (char*)buf + off, SIZE, down, W_ERR));
    WORKER_CHECK(w, adr_free(dev, buf, SIZE + 1024, down, W_ERR));
    WORKER_CHECK(w, adr_stream_synchronize(down, W_ERR));
    if (w->failures) break;
    if (memcmp(in, out, SIZE) != 0) {
      w->failures++;
      snprintf(w->message, sizeof(w->message), "thread %d round %d: data differs", w->index,
               round);
      break;
    }
  }
done:
  if (ev != NULL) WORKER_CHECK(w, adr_event_destroy(ev, W_ERR));
  if (up != NULL) WORKER_CHECK(w, adr_stream_destroy(up, W_ERR));
  if (down != NULL) WORKER_CHECK(w, adr_stream_destroy(down, W_ERR));
  free(in);
  free(out);
  return NULL;
}

static void test_concurrent_copies_on_own_streams(void** state) {
  (void)state;
  pthread_t threads[THREADS];
  struct worker workers[THREADS];
  for (int i = 0; i < THREADS; i++) {
    workers[i] = (struct worker){.index = i};
    assert_int_equal(pthread_create(&threads[i], NULL, copy_worker, &workers[i]), 0);
  }
  for (int i = 0; i < THREADS; i++) {
    pthread_join(threads[i], NULL);
    if (workers[i].failures) fail_msg("thread %d: %s", i, workers[i].message);
  }
}

struct shared_event {
  struct adr_event* ev;
  struct adr_stream* stream;
  int done;
  pthread_mutex_t lock;
  struct worker w;
};

static void* recorder(void* arg) {
  struct shared_event* s = arg;
  for (int i = 0; i < 300; i++) WORKER_CHECK(&s->w, adr_event_record(s->ev, s->stream, W_ERR));
  WORKER_CHECK(&s->w, adr_stream_synchronize(s->stream, W_ERR));
  pthread_mutex_lock(&s->lock);
  s->done = 1;
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

static void* waiter(void* arg) {
  struct shared_event* s = arg;
  struct worker w = {0};
  struct adr_stream* mine = NULL;
  WORKER_CHECK(&w, adr_stream_create(dev, &mine, W_ERR));
  for (;;) {
    pthread_mutex_lock(&s->lock);
    int done = s->done;
    pthread_mutex_unlock(&s->lock);
    struct adr_error e = {{0}};
    int st = adr_event_query(s->ev, &e);
    if (st != 0 && st != EBUSY && w.failures++ == 0)
      snprintf(w.message, sizeof(w.message), "adr_event_query: %s", e.message);
    WORKER_CHECK(&w, adr_event_synchronize(s->ev, W_ERR));
    if (mine != NULL) WORKER_CHECK(&w, adr_stream_wait_event(mine, s->ev, W_ERR));
    if (done || w.failures) break;
  }
  if (mine != NULL) {
    WORKER_CHECK(&w, adr_stream_synchronize(mine, W_ERR));
    WORKER_CHECK(&w, adr_stream_destroy(mine, W_ERR));
  }
  if (w.failures) {
    pthread_mutex_lock(&s->lock);
    if (s->w.failures++ == 0) memcpy(s->w.message, w.message, sizeof(w.message));
    pthread_mutex_unlock(&s->lock);
  }
  return NULL;
}

static void test_event_rerecorded_while_waited_on(void** state) {
  (void)state;
  struct shared_event s = {.done = 0};
  pthread_mutex_init(&s.lock, NULL);
  ASSERT_ADR(adr_event_create(dev, &s.ev, OCL_ERR));
  ASSERT_ADR(adr_stream_create(dev, &s.stream, OCL_ERR));
  pthread_t rec, wait[2];
  assert_int_equal(pthread_create(&rec, NULL, recorder, &s), 0);
  for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&wait[i], NULL, waiter, &s), 0);
  pthread_join(rec, NULL);
  for (int i = 0; i < 2; i++) pthread_join(wait[i], NULL);
  if (s.w.failures) fail_msg("%s", s.w.message);
  ASSERT_ADR(adr_event_query(s.ev, OCL_ERR));
  ASSERT_ADR(adr_stream_destroy(s.stream, OCL_ERR));
  ASSERT_ADR(adr_event_destroy(s.ev, OCL_ERR));
  pthread_mutex_destroy(&s.lock);
}

int main(void) {
  ocl_test_devices(&dev, &cpu);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_concurrent_copies_on_own_streams),
      cmocka_unit_test(test_event_rerecorded_while_waited_on),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
