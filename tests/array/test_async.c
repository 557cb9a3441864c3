/* SPDX-License-Identifier: Apache-2.0
 *
 * The async device stream interface, both sides, one test per rule of the
 * specification:
 *  - adr's producer driven by a handler written here against the ABI;
 *  - adr's consumer handler driven by a producer written here against the
 *    ABI;
 *  - adr's producer feeding adr's consumer.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "array_test.h"

/* ---- a batch source ---------------------------------------------------------- */

struct source {
  int n;       /* batches before the end; -1 endless */
  int fail_at; /* -1 never */
  int produced;
};

static int source_next(void* ctx, struct ArrowDeviceArray* out, struct adr_error* error) {
  struct source* s = ctx;
  int k = s->produced++;
  if (k == s->fail_at) return adr_error_set(error, ENOSPC, "source broke at batch %d", k);
  if (s->n >= 0 && k >= s->n) return 0;
  struct ArrowSchema schema;
  int st = fixture_sample_table(10 + k, &schema, out, error);
  if (st == 0) schema.release(&schema);
  return st;
}

static void make_source(struct source* s, int n, int fail_at, struct ArrowDeviceArrayStream* out) {
  struct adr_error err;
  s->n = n;
  s->fail_at = fail_at;
  s->produced = 0;
  struct ArrowSchema schema;
  struct ArrowDeviceArray a;
  ASSERT_OK(fixture_sample_table(1, &schema, &a, &err), &err);
  adr_device_array_release(&a);
  ASSERT_OK(adr_device_array_stream_from_callback(&schema, ARROW_DEVICE_CPU, source_next, NULL, s,
                                                  out, &err),
            &err);
}

/* ---- a handler written against the ABI ----------------------------------------- */

struct th {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int in_callback;    /* > 0 while one of ours runs */
  bool overlapped;    /* a callback started while another ran */
  bool after_release; /* a callback came after release */
  bool schema_first;
  bool producer_set;
  int schema_calls, task_calls, null_tasks, error_calls, release_calls;
  int error_code;
  char error_msg[256];
  int64_t request_at_schema; /* 0: none */
  int64_t request_per_task;
  int fail_schema;
  int fail_task_at; /* -1 */
  bool discard;
  bool leave_task_at_fail; /* return non-zero without extracting */
  int second_extract;
  int64_t lengths[64];
  int ngot;
};

static void th_enter(struct th* t) {
  pthread_mutex_lock(&t->mu);
  if (t->in_callback > 0) t->overlapped = true;
  if (t->release_calls > 0) t->after_release = true;
  t->in_callback++;
  pthread_mutex_unlock(&t->mu);
}

static void th_leave(struct th* t) {
  pthread_mutex_lock(&t->mu);
  t->in_callback--;
  pthread_cond_broadcast(&t->cv);
  pthread_mutex_unlock(&t->mu);
}

static int th_on_schema(struct ArrowAsyncDeviceStreamHandler* self, struct ArrowSchema* schema) {
  struct th* t = self->private_data;
  th_enter(t);
  t->schema_first = t->task_calls == 0 && t->error_calls == 0;
  t->producer_set = self->producer != NULL && self->producer->request != NULL;
  t->schema_calls++;
  assert_string_equal(schema->format, "+s");
  struct ArrowSchema mine = *schema; /* moved to us */
  schema->release = NULL;
  mine.release(&mine);
  if (t->request_at_schema != 0 && t->fail_schema == 0)
    self->producer->request(self->producer, t->request_at_schema);
  th_leave(t);
  return t->fail_schema;
}

static int th_on_next_task(struct ArrowAsyncDeviceStreamHandler* self, struct ArrowAsyncTask* task,
                           const char* metadata) {
  (void)metadata;
  struct th* t = self->private_data;
  th_enter(t);
  int rc = 0;
  if (task == NULL) {
    t->null_tasks++;
  } else {
    int k = t->task_calls++;
    struct ArrowDeviceArray a;
    if (k == t->fail_task_at && t->leave_task_at_fail) {
      th_leave(t);
      return ECANCELED;
    }
    if (t->discard) {
      assert_int_equal(task->extract_data(task, NULL), 0);
    } else {
      assert_int_equal(task->extract_data(task, &a), 0);
      if (t->ngot < 64) t->lengths[t->ngot++] = a.array.length;
      adr_device_array_release(&a);
    }
    t->second_extract = task->extract_data(task, &a);
    if (k == t->fail_task_at)
      rc = ECANCELED;
    else if (t->request_per_task > 0)
      self->producer->request(self->producer, t->request_per_task);
  }
  th_leave(t);
  return rc;
}

static void th_on_error(struct ArrowAsyncDeviceStreamHandler* self, int code, const char* message,
                        const char* metadata) {
  (void)metadata;
  struct th* t = self->private_data;
  th_enter(t);
  t->error_calls++;
  t->error_code = code;
  snprintf(t->error_msg, sizeof(t->error_msg), "%s", message ? message : "");
  th_leave(t);
}

static void th_release(struct ArrowAsyncDeviceStreamHandler* self) {
  struct th* t = self->private_data;
  th_enter(t);
  pthread_mutex_lock(&t->mu);
  t->release_calls++;
  pthread_mutex_unlock(&t->mu);
  th_leave(t);
}

static void th_init(struct th* t, struct ArrowAsyncDeviceStreamHandler* h) {
  memset(t, 0, sizeof(*t));
  pthread_mutex_init(&t->mu, NULL);
  pthread_cond_init(&t->cv, NULL);
  t->fail_task_at = -1;
  memset(h, 0, sizeof(*h));
  h->on_schema = th_on_schema;
  h->on_next_task = th_on_next_task;
  h->on_error = th_on_error;
  h->release = th_release;
  h->private_data = t;
}

/* Waits (bounded, for liveness) until pred holds. */
static bool th_wait(struct th* t, bool (*pred)(struct th*)) {
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 20;
  pthread_mutex_lock(&t->mu);
  bool ok = true;
  while (!pred(t) && ok) ok = pthread_cond_timedwait(&t->cv, &t->mu, &deadline) == 0;
  ok = pred(t);
  pthread_mutex_unlock(&t->mu);
  return ok;
}

static bool released(struct th* t) {
  return t->release_calls > 0 && t->in_callback == 0;
}
static bool two_tasks(struct th* t) {
  return t->task_calls >= 2 && t->in_callback == 0;
}

static struct adr_async_producer* start(struct ArrowDeviceArrayStream* src,
                                        struct ArrowAsyncDeviceStreamHandler* h) {
  struct adr_error err;
  struct adr_async_producer* p = NULL;
  ASSERT_OK(adr_async_producer_start(src, h, &p, &err), &err);
  assert_null(src->release);
  return p;
}

static void th_check_serial(struct th* t) {
  assert_false(t->overlapped);
  assert_false(t->after_release);
  assert_int_equal(t->release_calls, 1);
}

/* ---- adr's producer ----------------------------------------------------------- */

static void test_producer_full_stream(void** state) {
  (void)state;
  struct source s;
  struct ArrowDeviceArrayStream src;
  make_source(&s, 5, -1, &src);
  struct th t;
  struct ArrowAsyncDeviceStreamHandler h;
  th_init(&t, &h);
  t.request_at_schema = 1;
  t.request_per_task = 1; /* re-requests from inside on_next_task */
  struct adr_async_producer* p = start(&src, &h);
  assert_true(th_wait(&t, released));
  adr_async_producer_join(p);
  th_check_serial(&t);
  assert_true(t.schema_first);
  assert_true(t.producer_set);
  assert_int_equal(t.schema_calls, 1);
  assert_int_equal(t.task_calls, 5);
  assert_int_equal(t.null_tasks, 1); /* NULL task = end */
  assert_int_equal(t.error_calls, 0);
  assert_int_equal(t.second_extract, EINVAL); /* extract_data works once */
  for (int k = 0; k < 5; k++) assert_int_equal(t.lengths[k], 10 + k);
}

static void test_producer_backpressure_and_cancel(void** state) {
  (void)state;
  struct source s;
  struct ArrowDeviceArrayStream src;
  make_source(&s, -1, -1, &src); /* endless */
  struct th t;
  struct ArrowAsyncDeviceStreamHandler h;
  th_init(&t, &h);
  t.request_at_schema = 2; /* and never more */
  t.discard = true;        /* NULL out-array: the task cleans up */
  struct adr_async_producer* p = start(&src, &h);
  assert_true(th_wait(&t, two_tasks));
  /* Only what was requested came; cancel is idempotent; after it the
   * producer ends with release only, no on_error. */
  h.producer->cancel(h.producer);
  h.producer->cancel(h.producer);
  assert_true(th_wait(&t, released));
  adr_async_producer_join(p);
  th_check_serial(&t);
  assert_int_equal(t.task_calls, 2);
  assert_int_equal(s.produced, 2);
  assert_int_equal(t.error_calls, 0);
  assert_int_equal(t.null_tasks, 0);
}

struct canceller {
  struct ArrowAsyncProducer* producer;
};

static void* cancel_thread(void* arg) {
  struct canceller* c = arg;
  c->producer->cancel(c->producer);
  c->producer->cancel(c->producer);
  return NULL;
}

static bool one_task(struct th* t) {
  return t->task_calls >= 1;
}

static void test_producer_cancel_from_other_threads(void** state) {
  (void)state;
  struct source s;
  struct ArrowDeviceArrayStream src;
  make_source(&s, -1, -1, &src);
  struct th t;
  struct ArrowAsyncDeviceStreamHandler h;
  th_init(&t, &h);
  t.request_at_schema = 1;
  t.request_per_task = 1; /* keeps going until cancelled */
  struct adr_async_producer* p = start(&src, &h);
  assert_true(th_wait(&t, one_task));
  struct canceller c = {h.producer};
  pthread_t th[4];
  for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, cancel_thread, &c);
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  assert_true(th_wait(&t, released));
  adr_async_producer_join(p);
  th_check_serial(&t);
  assert_int_equal(t.error_calls, 0);
  assert_true(t.task_calls >= 1);
}

static void test_producer_source_error(void** state) {
  (void)state;
  struct source s;
  struct ArrowDeviceArrayStream src;
  make_source(&s, 10, 3, &src);
  struct th t;
  struct ArrowAsyncDeviceStreamHandler h;
  th_init(&t, &h);
  t.request_at_schema = 100;
  struct adr_async_producer* p = start(&src, &h);
  assert_true(th_wait(&t, released));
  adr_async_producer_join(p);
  th_check_serial(&t);
  assert_int_equal(t.task_calls, 3);
  assert_int_equal(t.error_calls, 1); /* on_error, then release */
  assert_int_equal(t.error_code, ENOSPC);
  assert_non_null(strstr(t.error_msg, "source broke at batch 3"));
  assert_int_equal(t.null_tasks, 0);
}

static void test_producer_consumer_error_no_on_error(void** state) {
  (void)state;
  /* on_next_task returns non-zero: release without on_error */
  struct source s;
  struct ArrowDeviceArrayStream src;
  make_source(&s, 10, -1, &src);
  struct th t;
  struct ArrowAsyncDeviceStreamHandler h;
  th_init(&t, &h);
  t.request_at_schema = 100;
  t.fail_task_at = 1;
  struct adr_async_producer* p = start(&src, &h);
  assert_true(th_wait(&t, released));
  adr_async_producer_join(p);
  th_check_serial(&t);
  assert_int_equal(t.task_calls, 2);
  assert_int_equal(t.error_calls, 0);
  /* on_schema returns non-zero: release only, no task */
  make_source(&s, 10, -1, &src);
  th_init(&t, &h);
  t.fail_schema = EPERM;
  t.request_at_schema = 100;
  p = start(&src, &h);
  assert_true(th_wait(&t, released));
  adr_async_producer_join(p);
  th_check_serial(&t);
  assert_int_equal(t.schema_calls, 1);
  assert_int_equal(t.task_calls, 0);
  assert_int_equal(t.error_calls, 0);
}

static void test_producer_request_zero(void** state) {
  (void)state;
  struct source s;
  struct ArrowDeviceArrayStream src;
  make_source(&s, 10, -1, &src);
  struct th t;
  struct ArrowAsyncDeviceStreamHandler h;
  th_init(&t, &h);
  t.request_at_schema = -3; /* n <= 0 is invalid */
  struct adr_async_producer* p = start(&src, &h);
  assert_true(th_wait(&t, released));
  adr_async_producer_join(p);
  th_check_serial(&t);
  assert_int_equal(t.error_calls, 1);
  assert_int_equal(t.error_code, EINVAL);
  assert_non_null(strstr(t.error_msg, "request(-3)"));
  assert_int_equal(t.task_calls, 0);
}

static void test_producer_unextracted_tasks(void** state) {
  (void)state;
  /* A handler that keeps tasks without extracting: join frees them. */
  struct source s;
  struct ArrowDeviceArrayStream src;
  make_source(&s, 3, -1, &src);
  struct th t;
  struct ArrowAsyncDeviceStreamHandler h;
  th_init(&t, &h);
  t.request_at_schema = 10;
  t.fail_task_at = 0; /* returns non-zero on the first, never extracting it */
  t.leave_task_at_fail = true;
  struct adr_async_producer* p = start(&src, &h);
  assert_true(th_wait(&t, released));
  adr_async_producer_join(p); /* ASan: nothing leaks */
  assert_int_equal(t.task_calls, 1);
  struct adr_error err;
  assert_int_equal(adr_async_producer_start(NULL, &h, &p, &err), EINVAL);
  struct ArrowAsyncDeviceStreamHandler empty = {0};
  make_source(&s, 1, -1, &src);
  assert_int_equal(adr_async_producer_start(&src, &empty, &p, &err), EINVAL);
  assert_non_null(strstr(err.message, "NULL callback"));
  src.release(&src);
}

/* ---- adr's consumer, fed by a producer written against the ABI ------------------ */

struct raw_producer {
  struct ArrowAsyncProducer producer;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int64_t requested;
  int cancels;
  int batches; /* to deliver */
  int fail_at; /* on_error at this batch, -1 never */
  int discarded;
  int delivered;
};

static void raw_request(struct ArrowAsyncProducer* self, int64_t n) {
  struct raw_producer* r = self->private_data;
  pthread_mutex_lock(&r->mu);
  r->requested += n;
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
}

static void raw_cancel(struct ArrowAsyncProducer* self) {
  struct raw_producer* r = self->private_data;
  pthread_mutex_lock(&r->mu);
  r->cancels++;
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
}

static int raw_extract(struct ArrowAsyncTask* task, struct ArrowDeviceArray* out) {
  struct raw_producer* r = task->private_data;
  struct ArrowSchema s;
  struct ArrowDeviceArray a;
  struct adr_error err;
  if (fixture_sample_table(20 + r->delivered, &s, &a, &err) != 0) return ENOMEM;
  s.release(&s);
  if (out != NULL)
    *out = a;
  else {
    adr_device_array_release(&a);
    r->discarded++;
  }
  return 0;
}

struct raw_run {
  struct raw_producer* r;
  struct ArrowAsyncDeviceStreamHandler* h;
};

/* The raw producer's thread: the spec's sequence, by hand. */
static void* raw_main(void* arg) {
  struct raw_run* run = arg;
  struct raw_producer* r = run->r;
  struct ArrowAsyncDeviceStreamHandler* h = run->h;
  h->producer = &r->producer;
  struct ArrowSchema schema;
  struct ArrowDeviceArray tmp;
  struct adr_error err;
  fixture_sample_table(1, &schema, &tmp, &err);
  adr_device_array_release(&tmp);
  int rc = h->on_schema(h, &schema);
  if (schema.release) schema.release(&schema);
  if (rc != 0) {
    h->release(h);
    return NULL;
  }
  for (int k = 0;; k++) {
    pthread_mutex_lock(&r->mu);
    while (r->requested == 0 && r->cancels == 0) pthread_cond_wait(&r->cv, &r->mu);
    bool cancelled = r->cancels > 0;
    if (!cancelled) r->requested--;
    pthread_mutex_unlock(&r->mu);
    if (cancelled) {
      /* still deliver one pending task after cancel: the consumer must
       * cope (it discards it with a NULL extract) */
      struct ArrowAsyncTask task = {raw_extract, r};
      h->on_next_task(h, &task, NULL);
      break;
    }
    if (k == r->fail_at) {
      h->on_error(h, EBADMSG, "raw producer: checksum mismatch", NULL);
      break;
    }
    if (k == r->batches) {
      h->on_next_task(h, NULL, NULL);
      break;
    }
    struct ArrowAsyncTask task = {raw_extract, r};
    if (h->on_next_task(h, &task, "k=v") != 0) break;
    r->delivered++;
  }
  h->release(h);
  return NULL;
}

static void raw_start(struct raw_producer* r, struct raw_run* run, pthread_t* thread,
                      struct ArrowAsyncDeviceStreamHandler* h, int batches, int fail_at) {
  memset(r, 0, sizeof(*r));
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->cv, NULL);
  r->producer.device_type = ARROW_DEVICE_CPU;
  r->producer.request = raw_request;
  r->producer.cancel = raw_cancel;
  r->producer.private_data = r;
  r->batches = batches;
  r->fail_at = fail_at;
  run->r = r;
  run->h = h;
  pthread_create(thread, NULL, raw_main, run);
}

static void test_consumer_full_stream(void** state) {
  (void)state;
  struct adr_error err;
  struct ArrowAsyncDeviceStreamHandler h;
  struct ArrowDeviceArrayStream st;
  ASSERT_OK(adr_async_consumer_init(ARROW_DEVICE_CPU, 2, &h, &st, &err), &err);
  struct raw_producer r;
  struct raw_run run;
  pthread_t thread;
  raw_start(&r, &run, &thread, &h, 6, -1);
  struct ArrowSchema schema;
  ASSERT_OK(adr_device_array_stream_get_schema(&st, &schema, &err), &err);
  assert_string_equal(schema.format, "+s");
  for (int k = 0; k < 6; k++) {
    struct ArrowDeviceArray b;
    ASSERT_OK(adr_device_array_stream_next(&st, &b, &err), &err);
    assert_int_equal(b.array.length, 20 + k);
    ASSERT_OK(adr_device_array_validate(&schema, &b, ADR_VALIDATE_FULL, &err), &err);
    adr_device_array_release(&b);
  }
  struct ArrowDeviceArray end;
  ASSERT_OK(adr_device_array_stream_next(&st, &end, &err), &err);
  assert_null(end.array.release);
  pthread_join(thread, NULL);
  /* depth 2 up front, one more per batch taken: never more than asked */
  assert_int_equal(r.delivered, 6);
  assert_int_equal(r.cancels, 0);
  st.release(&st);
  schema.release(&schema);
}

static void test_consumer_error(void** state) {
  (void)state;
  struct adr_error err;
  struct ArrowAsyncDeviceStreamHandler h;
  struct ArrowDeviceArrayStream st;
  ASSERT_OK(adr_async_consumer_init(ARROW_DEVICE_CPU, 1, &h, &st, &err), &err);
  struct raw_producer r;
  struct raw_run run;
  pthread_t thread;
  raw_start(&r, &run, &thread, &h, 6, 2);
  struct ArrowDeviceArray b;
  for (int k = 0; k < 2; k++) {
    ASSERT_OK(adr_device_array_stream_next(&st, &b, &err), &err);
    adr_device_array_release(&b);
  }
  assert_int_equal(adr_device_array_stream_next(&st, &b, &err), EBADMSG);
  assert_non_null(strstr(err.message, "raw producer: checksum mismatch"));
  pthread_join(thread, NULL);
  st.release(&st);
}

static void test_consumer_early_release_cancels(void** state) {
  (void)state;
  struct adr_error err;
  struct ArrowAsyncDeviceStreamHandler h;
  struct ArrowDeviceArrayStream st;
  ASSERT_OK(adr_async_consumer_init(ARROW_DEVICE_CPU, 3, &h, &st, &err), &err);
  struct raw_producer r;
  struct raw_run run;
  pthread_t thread;
  raw_start(&r, &run, &thread, &h, 1000, -1);
  struct ArrowDeviceArray b;
  ASSERT_OK(adr_device_array_stream_next(&st, &b, &err), &err);
  adr_device_array_release(&b);
  st.release(&st); /* cancels; what still comes is discarded */
  pthread_join(thread, NULL);
  assert_int_equal(r.cancels, 1);
  assert_true(r.discarded >= 1);
}

static void test_consumer_refuses_wrong_device(void** state) {
  (void)state;
  struct adr_error err;
  struct ArrowAsyncDeviceStreamHandler h;
  struct ArrowDeviceArrayStream st;
  ASSERT_OK(adr_async_consumer_init(ARROW_DEVICE_OPENCL, 1, &h, &st, &err), &err);
  struct raw_producer r;
  struct raw_run run;
  pthread_t thread;
  raw_start(&r, &run, &thread, &h, 3, -1);
  struct ArrowSchema schema;
  assert_int_equal(adr_device_array_stream_get_schema(&st, &schema, &err), EPROTO);
  assert_non_null(strstr(err.message, "serves device type 1, the stream expects 4"));
  pthread_join(thread, NULL);
  st.release(&st);
  assert_int_equal(adr_async_consumer_init(ARROW_DEVICE_CPU, 0, &h, &st, &err), EINVAL);
}

/* ---- adr to adr ------------------------------------------------------------------ */

static void test_adr_to_adr(void** state) {
  (void)state;
  struct adr_error err;
  for (int depth = 1; depth <= 4; depth += 3) {
    struct source s;
    struct ArrowDeviceArrayStream src, st;
    make_source(&s, 7, -1, &src);
    struct ArrowAsyncDeviceStreamHandler h;
    ASSERT_OK(adr_async_consumer_init(ARROW_DEVICE_CPU, depth, &h, &st, &err), &err);
    struct adr_async_producer* p = start(&src, &h);
    for (int k = 0; k < 7; k++) {
      struct ArrowDeviceArray b;
      ASSERT_OK(adr_device_array_stream_next(&st, &b, &err), &err);
      assert_int_equal(b.array.length, 10 + k);
      adr_device_array_release(&b);
    }
    struct ArrowDeviceArray end;
    ASSERT_OK(adr_device_array_stream_next(&st, &end, &err), &err);
    assert_null(end.array.release);
    st.release(&st);
    adr_async_producer_join(p);
  }
  /* early release on the consumer side cancels adr's producer */
  struct source s;
  struct ArrowDeviceArrayStream src, st;
  make_source(&s, -1, -1, &src);
  struct ArrowAsyncDeviceStreamHandler h;
  ASSERT_OK(adr_async_consumer_init(ARROW_DEVICE_CPU, 2, &h, &st, &err), &err);
  struct adr_async_producer* p = start(&src, &h);
  struct ArrowDeviceArray b;
  ASSERT_OK(adr_device_array_stream_next(&st, &b, &err), &err);
  adr_device_array_release(&b);
  st.release(&st);
  adr_async_producer_join(p); /* returns: the producer saw the cancel */
}

/* Arrays with buffer-less children (buffers == NULL) and absent validity
 * from adr's producer to adr's consumer. */
static void test_adr_to_adr_no_buffers(void** state) {
  (void)state;
  struct adr_error err;
  const char* names[] = {"map-null-values", "map-null-keys", "validity-absent"};
  for (size_t n = 0; n < sizeof(names) / sizeof(names[0]); n++) {
    const struct test_case* tc = NULL;
    for (size_t i = 0; i < test_case_count; i++)
      if (strcmp(test_cases[i].name, names[n]) == 0) tc = &test_cases[i];
    assert_non_null(tc);
    struct ArrowSchema schema, ref_schema, tmp;
    struct ArrowDeviceArray arrays[2], ref;
    tc->build(&schema, &arrays[0]);
    tc->build(&tmp, &arrays[1]);
    tmp.release(&tmp);
    tc->build(&ref_schema, &ref);
    struct ArrowDeviceArrayStream src, st;
    ASSERT_OK(adr_device_array_stream_from_arrays(&schema, arrays, 2, ARROW_DEVICE_CPU, &src, &err),
              &err);
    struct ArrowAsyncDeviceStreamHandler h;
    ASSERT_OK(adr_async_consumer_init(ARROW_DEVICE_CPU, 2, &h, &st, &err), &err);
    struct adr_async_producer* p = start(&src, &h);
    for (int k = 0; k < 2; k++) {
      struct ArrowDeviceArray b;
      ASSERT_OK(adr_device_array_stream_next(&st, &b, &err), &err);
      assert_non_null(b.array.release);
      ASSERT_OK(adr_device_array_validate(&ref_schema, &b, ADR_VALIDATE_FULL, &err), &err);
      test_assert_equal(&ref_schema, &ref, &b);
      adr_device_array_release(&b);
    }
    struct ArrowDeviceArray end;
    ASSERT_OK(adr_device_array_stream_next(&st, &end, &err), &err);
    assert_null(end.array.release);
    st.release(&st);
    adr_async_producer_join(p);
    adr_device_array_release(&ref);
    ref_schema.release(&ref_schema);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_producer_full_stream),
      cmocka_unit_test(test_producer_backpressure_and_cancel),
      cmocka_unit_test(test_producer_cancel_from_other_threads),
      cmocka_unit_test(test_producer_source_error),
      cmocka_unit_test(test_producer_consumer_error_no_on_error),
      cmocka_unit_test(test_producer_request_zero),
      cmocka_unit_test(test_producer_unextracted_tasks),
      cmocka_unit_test(test_consumer_full_stream),
      cmocka_unit_test(test_consumer_error),
      cmocka_unit_test(test_consumer_early_release_cancels),
      cmocka_unit_test(test_consumer_refuses_wrong_device),
      cmocka_unit_test(test_adr_to_adr),
      cmocka_unit_test(test_adr_to_adr_no_buffers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
