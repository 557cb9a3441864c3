/* SPDX-License-Identifier: Apache-2.0
 *
 * ArrowDeviceArrayStream: producers over a list of arrays or a callback,
 * consumer helpers, and the transfer stream that moves every batch of a
 * source stream to another device with a prefetch depth.
 *
 * Locking: a stream object is used by one consumer thread at a time (the
 * Arrow rule). The transfer stream's worker thread shares the queue with
 * the consumer under `mu`; the source stream is only ever called by the
 * worker (or, with prefetch 0, by the consumer), never by both.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array_internal.h"

/* ---- producers -------------------------------------------------------------- */

struct list_stream {
  struct ArrowSchema schema;
  struct ArrowDeviceArray* arrays;
  size_t count, next;
  /* callback producers */
  adr_array_source_fn fn;
  void (*ctx_release)(void*);
  void* ctx;
  int failed;
  char last_error[1024];
};

static int producer_get_schema(struct ArrowDeviceArrayStream* self, struct ArrowSchema* out) {
  struct list_stream* s = self->private_data;
  struct adr_error err;
  int st = adr_schema_copy(&s->schema, out, &err);
  if (st) snprintf(s->last_error, sizeof(s->last_error), "%s", err.message);
  return st;
}

static int producer_get_next(struct ArrowDeviceArrayStream* self, struct ArrowDeviceArray* out) {
  struct list_stream* s = self->private_data;
  /* After an error the stream stays failed: the Arrow rule is that the
   * consumer releases it, so every later call repeats the error. */
  if (s->failed) return s->failed;
  if (s->fn == NULL) {
    if (s->next < s->count) adr_device_array_move(&s->arrays[s->next++], out);
    else memset(out, 0, sizeof(*out));
    return 0;
  }
  struct adr_error err;
  err.message[0] = '\0';
  memset(out, 0, sizeof(*out));
  int st = s->fn(s->ctx, out, &err);
  if (st != 0) {
    adr_device_array_release(out);
    s->failed = st;
    snprintf(s->last_error, sizeof(s->last_error), "%s",
             err.message[0] ? err.message : "(source callback gave no message)");
  }
  return st;
}

static const char* producer_last_error(struct ArrowDeviceArrayStream* self) {
  struct list_stream* s = self->private_data;
  return s->last_error[0] ? s->last_error : NULL;
}

static void producer_release(struct ArrowDeviceArrayStream* self) {
  if (self == NULL || self->release == NULL) return;
  struct list_stream* s = self->private_data;
  for (size_t i = s->next; i < s->count; i++) adr_device_array_release(&s->arrays[i]);
  free(s->arrays);
  if (s->schema.release != NULL) s->schema.release(&s->schema);
  if (s->ctx_release != NULL) s->ctx_release(s->ctx);
  free(s);
  self->release = NULL;
  self->private_data = NULL;
}

static void producer_setup(struct ArrowDeviceArrayStream* out, struct list_stream* s,
                           ArrowDeviceType device_type) {
  memset(out, 0, sizeof(*out));
  out->device_type = device_type;
  out->get_schema = producer_get_schema;
  out->get_next = producer_get_next;
  out->get_last_error = producer_last_error;
  out->release = producer_release;
  out->private_data = s;
}

int adr_device_array_stream_from_arrays(struct ArrowSchema* schema,
                                        struct ArrowDeviceArray* arrays, size_t count,
                                        ArrowDeviceType device_type,
                                        struct ArrowDeviceArrayStream* out,
                                        struct adr_error* error) {
  const char* op = "adr_device_array_stream_from_arrays";
  if (schema == NULL || out == NULL || (arrays == NULL && count > 0))
    return adr__errorf(error, EINVAL, op, NULL, "%s is NULL",
                       schema == NULL ? "schema" : out == NULL ? "out" : "arrays");
  if (schema->release == NULL) return adr__errorf(error, EINVAL, op, NULL, "schema is released");
  for (size_t i = 0; i < count; i++) {
    if (arrays[i].array.release == NULL)
      return adr__errorf(error, EINVAL, op, NULL, "arrays[%zu] is released", i);
    if (arrays[i].device_type != device_type)
      return adr__errorf(error, EINVAL, op, NULL, "arrays[%zu] is on device type %d, not %d", i,
                         (int)arrays[i].device_type, (int)device_type);
  }
  struct list_stream* s = calloc(1, sizeof(*s));
  if (s == NULL) return adr__errorf(error, ENOMEM, op, NULL, "out of memory");
  if (count > 0) {
    s->arrays = malloc(count * sizeof(*s->arrays));
    if (s->arrays == NULL) {
      free(s);
      return adr__errorf(error, ENOMEM, op, NULL, "out of memory");
    }
  }
  for (size_t i = 0; i < count; i++) adr_device_array_move(&arrays[i], &s->arrays[i]);
  s->count = count;
  s->schema = *schema;
  schema->release = NULL;
  producer_setup(out, s, device_type);
  return 0;
}

int adr_device_array_stream_from_callback(struct ArrowSchema* schema, ArrowDeviceType device_type,
                                          adr_array_source_fn next,
                                          void (*ctx_release)(void* ctx), void* ctx,
                                          struct ArrowDeviceArrayStream* out,
                                          struct adr_error* error) {
  const char* op = "adr_device_array_stream_from_callback";
  if (schema == NULL || out == NULL || next == NULL)
    return adr__errorf(error, EINVAL, op, NULL, "%s is NULL",
                       schema == NULL ? "schema" : out == NULL ? "out" : "next");
  if (schema->release == NULL) return adr__errorf(error, EINVAL, op, NULL, "schema is released");
  struct list_stream* s = calloc(1, sizeof(*s));
  if (s == NULL) return adr__errorf(error, ENOMEM, op, NULL, "out of memory");
  s->fn = next;
  s->ctx_release = ctx_release;
  s->ctx = ctx;
  s->schema = *schema;
  schema->release = NULL;
  producer_setup(out, s, device_type);
  return 0;
}

/* ---- consumer helpers ------------------------------------------------------- */

static int stream_failure(struct ArrowDeviceArrayStream* stream, const char* op, const char* call,
                          int st, struct adr_error* error) {
  const char* msg = stream->get_last_error ? stream->get_last_error(stream) : NULL;
  return adr__errorf(error, st, op, NULL, "%s failed (%s): %s", call, adr_status_name(st),
                     msg ? msg : "(no message)");
}

int adr_device_array_stream_get_schema(struct ArrowDeviceArrayStream* stream,
                                       struct ArrowSchema* out, struct adr_error* error) {
  const char* op = "adr_device_array_stream_get_schema";
  if (stream == NULL || out == NULL)
    return adr__errorf(error, EINVAL, op, NULL, "%s is NULL", stream ? "out" : "stream");
  if (stream->release == NULL) return adr__errorf(error, EINVAL, op, NULL, "stream is released");
  memset(out, 0, sizeof(*out));
  int st = stream->get_schema(stream, out);
  if (st != 0) return stream_failure(stream, op, "get_schema", st, error);
  if (out->release == NULL)
    return adr__errorf(error, EPROTO, op, NULL, "get_schema returned a released schema");
  return 0;
}

int adr_device_array_stream_next(struct ArrowDeviceArrayStream* stream,
                                 struct ArrowDeviceArray* out, struct adr_error* error) {
  const char* op = "adr_device_array_stream_next";
  if (stream == NULL || out == NULL)
    return adr__errorf(error, EINVAL, op, NULL, "%s is NULL", stream ? "out" : "stream");
  if (stream->release == NULL) return adr__errorf(error, EINVAL, op, NULL, "stream is released");
  memset(out, 0, sizeof(*out));
  int st = stream->get_next(stream, out);
  if (st != 0) {
    adr_device_array_release(out);
    return stream_failure(stream, op, "get_next", st, error);
  }
  if (out->array.release != NULL && out->device_type != stream->device_type) {
    int t = out->device_type;
    adr_device_array_release(out);
    return adr__errorf(error, EPROTO, op, NULL,
                       "get_next returned an array on device type %d in a stream of type %d", t,
                       (int)stream->device_type);
  }
  return 0;
}

/* ---- transfer stream -------------------------------------------------------- */

struct transfer {
  struct ArrowDeviceArrayStream source;
  struct ArrowSchema schema;
  struct adr_device* target;
  struct adr_stream* stream;
  int prefetch;
  char last_error[1024];
  /* prefetch > 0 */
  pthread_t thread;
  bool thread_started;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct ArrowDeviceArray* queue;
  int head, count;
  bool end, stop;
  int status;
  char message[1024];
};

/* Keeps a source batch alive until the copy made from it is released (the
 * copy's own release waits for its event first). */
struct keep_source {
  void (*release)(struct ArrowArray*);
  void* private_data;
  struct ArrowDeviceArray source;
};

static void keep_release(struct ArrowArray* array) {
  if (array == NULL || array->release == NULL) return;
  struct keep_source* k = array->private_data;
  array->release = k->release;
  array->private_data = k->private_data;
  array->release(array);
  array->release = NULL;
  adr_device_array_release(&k->source);
  free(k);
}

/* Pulls the next source batch and copies it to the target. */
static int transfer_one(struct transfer* t, struct ArrowDeviceArray* out,
                        struct adr_error* error) {
  struct ArrowDeviceArray batch;
  int st = adr_device_array_stream_next(&t->source, &batch, error);
  if (st != 0) return st;
  if (batch.array.release == NULL) {
    memset(out, 0, sizeof(*out));
    return 0;
  }
  st = adr_device_array_deep_copy(&t->schema, &batch, t->target, t->stream, out, NULL, error);
  if (st != 0) {
    adr_device_array_release(&batch);
    return st;
  }
  if (out->sync_event == NULL) {
    adr_device_array_release(&batch); /* the copy is complete */
    return 0;
  }
  struct keep_source* k = malloc(sizeof(*k));
  if (k == NULL) {
    adr_device_array_release(out);
    adr_device_array_release(&batch);
    return adr__errorf(error, ENOMEM, "adr_transfer_stream", NULL, "out of memory");
  }
  k->release = out->array.release;
  k->private_data = out->array.private_data;
  adr_device_array_move(&batch, &k->source);
  out->array.release = keep_release;
  out->array.private_data = k;
  return 0;
}

static void* transfer_worker(void* arg) {
  struct transfer* t = arg;
  for (;;) {
    pthread_mutex_lock(&t->mu);
    while (!t->stop && t->count == t->prefetch) pthread_cond_wait(&t->cv, &t->mu);
    bool stop = t->stop;
    pthread_mutex_unlock(&t->mu);
    if (stop) break;
    struct ArrowDeviceArray batch;
    struct adr_error err;
    int st = transfer_one(t, &batch, &err);
    pthread_mutex_lock(&t->mu);
    if (st != 0) {
      t->status = st;
      snprintf(t->message, sizeof(t->message), "%s", err.message);
      t->end = true;
    } else if (batch.array.release == NULL) {
      t->end = true;
    } else if (t->stop) {
      adr_device_array_release(&batch);
    } else {
      adr_device_array_move(&batch, &t->queue[(t->head + t->count) % t->prefetch]);
      t->count++;
    }
    bool done = t->end || t->stop;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    if (done) break;
  }
  return NULL;
}

static int transfer_get_schema(struct ArrowDeviceArrayStream* self, struct ArrowSchema* out) {
  struct transfer* t = self->private_data;
  struct adr_error err;
  int st = adr_schema_copy(&t->schema, out, &err);
  if (st) snprintf(t->last_error, sizeof(t->last_error), "%s", err.message);
  return st;
}

static int transfer_get_next(struct ArrowDeviceArrayStream* self, struct ArrowDeviceArray* out) {
  struct transfer* t = self->private_data;
  if (t->prefetch == 0) {
    struct adr_error err;
    int st = transfer_one(t, out, &err);
    if (st) snprintf(t->last_error, sizeof(t->last_error), "%s", err.message);
    return st;
  }
  pthread_mutex_lock(&t->mu);
  while (t->count == 0 && !t->end) pthread_cond_wait(&t->cv, &t->mu);
  int st = 0;
  if (t->count > 0) {
    adr_device_array_move(&t->queue[t->head], out);
    t->head = (t->head + 1) % t->prefetch;
    t->count--;
    pthread_cond_broadcast(&t->cv);
  } else if (t->status != 0) {
    st = t->status;
    snprintf(t->last_error, sizeof(t->last_error), "%s", t->message);
  } else {
    memset(out, 0, sizeof(*out));
  }
  pthread_mutex_unlock(&t->mu);
  return st;
}

static const char* transfer_last_error(struct ArrowDeviceArrayStream* self) {
  struct transfer* t = self->private_data;
  return t->last_error[0] ? t->last_error : NULL;
}

static void transfer_free(struct transfer* t) {
  if (t->thread_started) {
    pthread_mutex_lock(&t->mu);
    t->stop = true;
    pthread_cond_broadcast(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->thread, NULL);
  }
  for (int i = 0; i < t->count; i++)
    adr_device_array_release(&t->queue[(t->head + i) % t->prefetch]);
  if (t->prefetch > 0) {
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->cv);
  }
  free(t->queue);
  if (t->source.release != NULL) t->source.release(&t->source);
  if (t->schema.release != NULL) t->schema.release(&t->schema);
  if (t->stream != NULL) adr_stream_destroy(t->stream, NULL);
  free(t);
}

static void transfer_release(struct ArrowDeviceArrayStream* self) {
  if (self == NULL || self->release == NULL) return;
  transfer_free(self->private_data);
  self->release = NULL;
  self->private_data = NULL;
}

int adr_transfer_stream_init(struct ArrowDeviceArrayStream* source, struct adr_device* target,
                             int prefetch, struct ArrowDeviceArrayStream* out,
                             struct adr_error* error) {
  const char* op = "adr_transfer_stream_init";
  if (source == NULL || out == NULL)
    return adr__errorf(error, EINVAL, op, NULL, "%s is NULL", source == NULL ? "source" : "out");
  if (source->release == NULL) return adr__errorf(error, EINVAL, op, NULL, "source is released");
  if (prefetch < 0 || prefetch > 1024)
    return adr__errorf(error, EINVAL, op, NULL, "prefetch %d outside [0, 1024]", prefetch);
  struct transfer* t = calloc(1, sizeof(*t));
  if (t == NULL) return adr__errorf(error, ENOMEM, op, NULL, "out of memory");
  t->target = target;
  t->prefetch = prefetch;
  if (prefetch > 0) {
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->cv, NULL);
  }
  int st = adr_device_array_stream_get_schema(source, &t->schema, error);
  /* A NULL target is host memory: CPU batches, each complete when handed
   * out, with no stream of their own. */
  if (st == 0 && target != NULL) st = adr_stream_create(target, &t->stream, error);
  if (st == 0 && prefetch > 0) {
    t->queue = calloc((size_t)prefetch, sizeof(*t->queue));
    if (t->queue == NULL) st = adr__errorf(error, ENOMEM, op, NULL, "out of memory");
  }
  if (st != 0) {
    transfer_free(t); /* the source is not moved yet */
    return st;
  }
  t->source = *source;
  source->release = NULL;
  if (prefetch > 0) {
    if (pthread_create(&t->thread, NULL, transfer_worker, t) != 0) {
      *source = t->source; /* give the source back */
      t->source.release = NULL;
      transfer_free(t);
      return adr__errorf(error, EAGAIN, op, NULL, "cannot start the prefetch thread");
    }
    t->thread_started = true;
  }
  memset(out, 0, sizeof(*out));
  out->device_type = target != NULL ? adr_device_type(target) : ARROW_DEVICE_CPU;
  out->get_schema = transfer_get_schema;
  out->get_next = transfer_get_next;
  out->get_last_error = transfer_last_error;
  out->release = transfer_release;
  out->private_data = t;
  return 0;
}
