/* SPDX-License-Identifier: Apache-2.0
 *
 * Both sides of the Arrow C Device async stream interface.
 *
 * Producer: one thread per producer calls the handler's callbacks, so they
 * are serialised by construction. request() and cancel() only update
 * counters under `mu` and wake the thread; they never call the handler,
 * which makes them safe from inside on_schema / on_next_task and from any
 * other thread.
 *
 * Consumer: the handler's callbacks fill a queue under `mu`; the pull
 * stream's get_next waits on it. The state is shared by the handler and the
 * stream and freed by whichever of the two is released last (`refs`).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array_internal.h"

/* ---- producer --------------------------------------------------------------- */

struct task_data {
  struct adr_async_producer* producer;
  struct ArrowDeviceArray array;
  struct task_data* prev;
  struct task_data* next;
};

struct adr_async_producer {
  struct ArrowAsyncProducer producer; /* handed out as handler->producer */
  struct ArrowAsyncDeviceStreamHandler* handler;
  struct ArrowDeviceArrayStream source;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int64_t requested;
  bool cancelled;
  bool bad_request;
  int64_t bad_n;
  struct task_data* tasks; /* not yet extracted */
};

static struct adr_async_producer* producer_of(struct ArrowAsyncProducer* self) {
  return (struct adr_async_producer*)self->private_data;
}

static void producer_request(struct ArrowAsyncProducer* self, int64_t n) {
  struct adr_async_producer* p = producer_of(self);
  pthread_mutex_lock(&p->mu);
  if (!p->cancelled) {
    if (n <= 0) {
      if (!p->bad_request) p->bad_n = n;
      p->bad_request = true;
    } else {
      p->requested = p->requested > INT64_MAX - n ? INT64_MAX : p->requested + n;
    }
    pthread_cond_broadcast(&p->cv);
  }
  pthread_mutex_unlock(&p->mu);
}

static void producer_cancel(struct ArrowAsyncProducer* self) {
  struct adr_async_producer* p = producer_of(self);
  pthread_mutex_lock(&p->mu);
  p->cancelled = true;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

/* The producer object is owned by adr (freed by adr_async_producer_join);
 * there is nothing for a consumer to release. */
static void producer_object_release(struct ArrowAsyncProducer* self) {
  (void)self;
}

static int task_extract(struct ArrowAsyncTask* self, struct ArrowDeviceArray* out) {
  struct task_data* td = self->private_data;
  if (td == NULL) return EINVAL; /* extract_data works once */
  self->private_data = NULL;
  struct adr_async_producer* p = td->producer;
  pthread_mutex_lock(&p->mu);
  if (td->prev) td->prev->next = td->next;
  else p->tasks = td->next;
  if (td->next) td->next->prev = td->prev;
  pthread_mutex_unlock(&p->mu);
  if (out != NULL) adr_device_array_move(&td->array, out);
  else adr_device_array_release(&td->array);
  free(td);
  return 0;
}

static void* producer_main(void* arg) {
  struct adr_async_producer* p = arg;
  struct ArrowAsyncDeviceStreamHandler* h = p->handler;
  struct adr_error err;
  struct ArrowSchema schema;
  h->producer = &p->producer;
  int st = adr_device_array_stream_get_schema(&p->source, &schema, &err);
  if (st != 0) {
    h->on_error(h, st, err.message, NULL);
    h->release(h);
    return NULL;
  }
  st = h->on_schema(h, &schema);
  if (schema.release != NULL) schema.release(&schema); /* not moved by the consumer */
  if (st != 0) {
    h->release(h);
    return NULL;
  }
  for (;;) {
    pthread_mutex_lock(&p->mu);
    while (!p->cancelled && !p->bad_request && p->requested == 0)
      pthread_cond_wait(&p->cv, &p->mu);
    bool cancelled = p->cancelled, bad = p->bad_request;
    int64_t bad_n = p->bad_n;
    if (!cancelled && !bad) p->requested--;
    pthread_mutex_unlock(&p->mu);
    if (cancelled) break; /* a successful cancel ends with release only */
    if (bad) {
      snprintf(err.message, sizeof(err.message),
               "[ArrowAsyncProducer.request] request(%lld): n must be positive",
               (long long)bad_n);
      h->on_error(h, EINVAL, err.message, NULL);
      break;
    }
    struct task_data* td = calloc(1, sizeof(*td));
    if (td == NULL) {
      h->on_error(h, ENOMEM, "[adr_async_producer] out of memory", NULL);
      break;
    }
    st = adr_device_array_stream_next(&p->source, &td->array, &err);
    if (st != 0) {
      free(td);
      h->on_error(h, st, err.message, NULL);
      break;
    }
    if (td->array.array.release == NULL) {
      free(td);
      h->on_next_task(h, NULL, NULL);
      break;
    }
    td->producer = p;
    pthread_mutex_lock(&p->mu);
    td->next = p->tasks;
    if (p->tasks) p->tasks->prev = td;
    p->tasks = td;
    pthread_mutex_unlock(&p->mu);
    struct ArrowAsyncTask task = {.extract_data = task_extract, .private_data = td};
    st = h->on_next_task(h, &task, NULL);
    if (st != 0) break; /* consumer error: release without on_error */
  }
  h->release(h);
  return NULL;
}

int adr_async_producer_start(struct ArrowDeviceArrayStream* source,
                             struct ArrowAsyncDeviceStreamHandler* handler,
                             struct adr_async_producer** out, struct adr_error* error) {
  const char* op = "adr_async_producer_start";
  if (source == NULL || handler == NULL || out == NULL)
    return adr__errorf(error, EINVAL, op, NULL, "%s is NULL",
                       source == NULL ? "source" : handler == NULL ? "handler" : "out");
  if (source->release == NULL) return adr__errorf(error, EINVAL, op, NULL, "source is released");
  if (handler->on_schema == NULL || handler->on_next_task == NULL || handler->on_error == NULL ||
      handler->release == NULL)
    return adr__errorf(error, EINVAL, op, NULL, "handler has a NULL callback");
  struct adr_async_producer* p = calloc(1, sizeof(*p));
  if (p == NULL) return adr__errorf(error, ENOMEM, op, NULL, "out of memory");
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  p->producer.device_type = source->device_type;
  p->producer.request = producer_request;
  p->producer.cancel = producer_cancel;
  p->producer.release = producer_object_release;
  p->producer.private_data = p;
  p->handler = handler;
  p->source = *source;
  source->release = NULL;
  if (pthread_create(&p->thread, NULL, producer_main, p) != 0) {
    *source = p->source;
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
    return adr__errorf(error, EAGAIN, op, NULL, "cannot start the producer thread");
  }
  *out = p;
  return 0;
}

void adr_async_producer_join(struct adr_async_producer* producer) {
  if (producer == NULL) return;
  pthread_join(producer->thread, NULL);
  /* Tasks the consumer never extracted: their batches go with the producer. */
  while (producer->tasks != NULL) {
    struct task_data* td = producer->tasks;
    producer->tasks = td->next;
    adr_device_array_release(&td->array);
    free(td);
  }
  if (producer->source.release != NULL) producer->source.release(&producer->source);
  pthread_mutex_destroy(&producer->mu);
  pthread_cond_destroy(&producer->cv);
  free(producer);
}

/* ---- consumer --------------------------------------------------------------- */

struct consumer {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int refs;
  int64_t depth;
  ArrowDeviceType device_type;
  struct ArrowAsyncProducer* producer;
  bool have_schema;
  struct ArrowSchema schema;
  struct ArrowDeviceArray* queue;
  int64_t head, count, capacity;
  bool ended;            /* NULL task, error or handler released */
  bool handler_released;
  bool stream_released;
  bool in_cancel;
  int status;
  char message[1024];
  char last_error[1024];
};

static void consumer_unref(struct consumer* c) {
  /* mu held */
  if (--c->refs > 0) {
    pthread_mutex_unlock(&c->mu);
    return;
  }
  pthread_mutex_unlock(&c->mu);
  for (int64_t i = 0; i < c->count; i++)
    adr_device_array_release(&c->queue[(c->head + i) % c->capacity]);
  free(c->queue);
  if (c->schema.release != NULL) c->schema.release(&c->schema);
  pthread_mutex_destroy(&c->mu);
  pthread_cond_destroy(&c->cv);
  free(c);
}

static void consumer_fail(struct consumer* c, int status, const char* fmt, const char* msg) {
  /* mu held; the first failure wins */
  if (c->status == 0) {
    c->status = status;
    snprintf(c->message, sizeof(c->message), fmt, msg ? msg : "(no message)");
  }
  c->ended = true;
  pthread_cond_broadcast(&c->cv);
}

static int handler_on_schema(struct ArrowAsyncDeviceStreamHandler* self,
                             struct ArrowSchema* schema) {
  struct consumer* c = self->private_data;
  pthread_mutex_lock(&c->mu);
  if (c->have_schema) {
    consumer_fail(c, EPROTO, "%s", "on_schema called twice");
    pthread_mutex_unlock(&c->mu);
    return EPROTO;
  }
  c->producer = self->producer;
  if (c->producer == NULL || c->producer->device_type != c->device_type) {
    char what[96];
    if (c->producer == NULL) snprintf(what, sizeof(what), "handler->producer is NULL");
    else snprintf(what, sizeof(what), "the producer serves device type %d, the stream expects %d",
                  (int)c->producer->device_type, (int)c->device_type);
    consumer_fail(c, EPROTO, "%s", what);
    pthread_mutex_unlock(&c->mu);
    return EPROTO;
  }
  c->schema = *schema;
  schema->release = NULL;
  c->have_schema = true;
  bool released = c->stream_released;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
  /* Both calls are allowed from inside on_schema. */
  if (released) c->producer->cancel(c->producer);
  else c->producer->request(c->producer, c->depth);
  return 0;
}

static int handler_on_next_task(struct ArrowAsyncDeviceStreamHandler* self,
                                struct ArrowAsyncTask* task, const char* metadata) {
  (void)metadata;
  struct consumer* c = self->private_data;
  if (task == NULL) {
    pthread_mutex_lock(&c->mu);
    c->ended = true;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return 0;
  }
  pthread_mutex_lock(&c->mu);
  bool discard = c->stream_released;
  pthread_mutex_unlock(&c->mu);
  if (discard) return task->extract_data(task, NULL);
  struct ArrowDeviceArray array;
  memset(&array, 0, sizeof(array));
  int st = task->extract_data(task, &array);
  pthread_mutex_lock(&c->mu);
  if (st != 0) {
    consumer_fail(c, st, "extract_data failed: %s", adr_status_name(st));
    pthread_mutex_unlock(&c->mu);
    return st;
  }
  if (c->count == c->capacity) {
    int64_t cap = c->capacity * 2;
    struct ArrowDeviceArray* q = malloc((size_t)cap * sizeof(*q));
    if (q == NULL) {
      consumer_fail(c, ENOMEM, "%s", "out of memory queueing a batch");
      pthread_mutex_unlock(&c->mu);
      adr_device_array_release(&array);
      return ENOMEM;
    }
    for (int64_t i = 0; i < c->count; i++) q[i] = c->queue[(c->head + i) % c->capacity];
    free(c->queue);
    c->queue = q;
    c->head = 0;
    c->capacity = cap;
  }
  adr_device_array_move(&array, &c->queue[(c->head + c->count) % c->capacity]);
  c->count++;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
  return 0;
}

static void handler_on_error(struct ArrowAsyncDeviceStreamHandler* self, int code,
                             const char* message, const char* metadata) {
  (void)metadata;
  struct consumer* c = self->private_data;
  pthread_mutex_lock(&c->mu);
  consumer_fail(c, code ? code : EIO, "%s", message);
  pthread_mutex_unlock(&c->mu);
}

static void handler_release(struct ArrowAsyncDeviceStreamHandler* self) {
  if (self == NULL || self->release == NULL) return;
  struct consumer* c = self->private_data;
  pthread_mutex_lock(&c->mu);
  /* The stream may be calling the producer's cancel: it stays valid until
   * this release returns, so wait for that call to finish. */
  while (c->in_cancel) pthread_cond_wait(&c->cv, &c->mu);
  c->handler_released = true;
  if (!c->ended && !c->stream_released)
    consumer_fail(c, EPIPE, "%s", "the producer released the handler before the end of the stream");
  c->ended = true;
  pthread_cond_broadcast(&c->cv);
  self->release = NULL;
  consumer_unref(c);
}

static int consumer_get_schema(struct ArrowDeviceArrayStream* self, struct ArrowSchema* out) {
  struct consumer* c = self->private_data;
  pthread_mutex_lock(&c->mu);
  while (!c->have_schema && !c->ended) pthread_cond_wait(&c->cv, &c->mu);
  int st;
  if (c->have_schema) {
    struct adr_error err;
    st = adr_schema_copy(&c->schema, out, &err);
    if (st) snprintf(c->last_error, sizeof(c->last_error), "%s", err.message);
  } else {
    st = c->status ? c->status : EPIPE;
    snprintf(c->last_error, sizeof(c->last_error), "%s",
             c->status ? c->message : "the stream ended without a schema");
  }
  pthread_mutex_unlock(&c->mu);
  return st;
}

static int consumer_get_next(struct ArrowDeviceArrayStream* self, struct ArrowDeviceArray* out) {
  struct consumer* c = self->private_data;
  pthread_mutex_lock(&c->mu);
  while (c->count == 0 && !c->ended) pthread_cond_wait(&c->cv, &c->mu);
  int st = 0;
  if (c->count > 0) {
    adr_device_array_move(&c->queue[c->head], out);
    c->head = (c->head + 1) % c->capacity;
    c->count--;
    /* Holding mu keeps the handler (and so the producer) alive; request
     * never calls back into the handler. */
    if (!c->handler_released && c->producer != NULL) c->producer->request(c->producer, 1);
  } else if (c->status != 0) {
    st = c->status;
    snprintf(c->last_error, sizeof(c->last_error), "%s", c->message);
  } else {
    memset(out, 0, sizeof(*out));
  }
  pthread_mutex_unlock(&c->mu);
  return st;
}

static const char* consumer_last_error(struct ArrowDeviceArrayStream* self) {
  struct consumer* c = self->private_data;
  return c->last_error[0] ? c->last_error : NULL;
}

static void consumer_stream_release(struct ArrowDeviceArrayStream* self) {
  if (self == NULL || self->release == NULL) return;
  struct consumer* c = self->private_data;
  pthread_mutex_lock(&c->mu);
  c->stream_released = true;
  if (!c->handler_released && c->producer != NULL && !c->ended) {
    /* cancel may call on_error, which takes mu: call it unlocked while
     * in_cancel holds the handler's release back. */
    c->in_cancel = true;
    pthread_mutex_unlock(&c->mu);
    c->producer->cancel(c->producer);
    pthread_mutex_lock(&c->mu);
    c->in_cancel = false;
    pthread_cond_broadcast(&c->cv);
  }
  for (int64_t i = 0; i < c->count; i++)
    adr_device_array_release(&c->queue[(c->head + i) % c->capacity]);
  c->count = 0;
  self->release = NULL;
  consumer_unref(c);
}

int adr_async_consumer_init(ArrowDeviceType device_type, int64_t queue_depth,
                            struct ArrowAsyncDeviceStreamHandler* out_handler,
                            struct ArrowDeviceArrayStream* out_stream, struct adr_error* error) {
  const char* op = "adr_async_consumer_init";
  if (out_handler == NULL || out_stream == NULL)
    return adr__errorf(error, EINVAL, op, NULL, "%s is NULL",
                       out_handler ? "out_stream" : "out_handler");
  if (queue_depth < 1 || queue_depth > (1 << 20))
    return adr__errorf(error, EINVAL, op, NULL, "queue_depth %lld outside [1, 1048576]",
                       (long long)queue_depth);
  struct consumer* c = calloc(1, sizeof(*c));
  if (c == NULL) return adr__errorf(error, ENOMEM, op, NULL, "out of memory");
  c->capacity = queue_depth;
  c->queue = calloc((size_t)queue_depth, sizeof(*c->queue));
  if (c->queue == NULL) {
    free(c);
    return adr__errorf(error, ENOMEM, op, NULL, "out of memory");
  }
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->cv, NULL);
  c->refs = 2;
  c->depth = queue_depth;
  c->device_type = device_type;
  memset(out_handler, 0, sizeof(*out_handler));
  out_handler->on_schema = handler_on_schema;
  out_handler->on_next_task = handler_on_next_task;
  out_handler->on_error = handler_on_error;
  out_handler->release = handler_release;
  out_handler->private_data = c;
  memset(out_stream, 0, sizeof(*out_stream));
  out_stream->device_type = device_type;
  out_stream->get_schema = consumer_get_schema;
  out_stream->get_next = consumer_get_next;
  out_stream->get_last_error = consumer_last_error;
  out_stream->release = consumer_stream_release;
  out_stream->private_data = c;
  return 0;
}
