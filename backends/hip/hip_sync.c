/* SPDX-License-Identifier: Apache-2.0
 *
 * HIP backend: streams (hipStreamNonBlocking streams) and events
 * (hipEventDisableTiming events), and wrapping foreign ones.
 *
 * An adr event exports &event->event, a hipEvent_t*, as the
 * ArrowDeviceArray.sync_event; importing takes such a pointer and copies
 * the handle out of it, so the producer's storage need not outlive the
 * import (the hipEvent_t itself must).
 */
#include <errno.h>
#include <stdlib.h>

#include "hip_internal.h"

int hip_stream_create(struct adr_backend_device* dev, uint32_t flags,
                      struct adr_backend_stream** out, struct adr_error* error) {
  if (flags & ADR_BACKEND_STREAM_DEFAULT) {
    *out = &dev->default_stream;
    return 0;
  }
  struct adr_backend_stream* s = calloc(1, sizeof(*s));
  if (s == NULL) return hip_errorf(error, ENOMEM, "out of memory");
  s->dev = dev;
  struct hip_current_guard g;
  int st = hip_current_enter(dev, &g, error);
  if (st == 0) {
    hipError_t r = hip_api.hipStreamCreateWithFlags(&s->stream, hipStreamNonBlocking);
    hip_current_leave(&g);
    if (r != hipSuccess)
      st = hip_check(r, error, "hipStreamCreateWithFlags on HIP device %d", dev->ordinal);
  }
  if (st) {
    free(s);
    return st;
  }
  *out = s;
  return 0;
}

int hip_stream_destroy(struct adr_backend_device* dev, struct adr_backend_stream* stream,
                       struct adr_error* error) {
  if (stream->is_default)
    return hip_errorf(error, EINVAL,
                      "the default stream of HIP device %d is never destroyed (device_close "
                      "releases it)",
                      dev->ordinal);
  int st = 0;
  if (!stream->imported) {
    /* The API promises the queued work completes before the stream goes. */
    hipError_t r = hip_api.hipStreamSynchronize(stream->stream);
    if (r == hipSuccess) r = hip_api.hipStreamDestroy(stream->stream);
    if (r != hipSuccess) st = hip_check(r, error, "HIP device %d", dev->ordinal);
  } else if (stream->scratch != NULL) {
    hip_api.hipStreamSynchronize(stream->stream); /* its copies may still read it */
  }
  if (stream->scratch != NULL) {
    struct hip_current_guard g;
    if (hip_current_enter(stream->dev, &g, NULL) == 0) {
      hip_stream_scratch_free(stream);
      hip_current_leave(&g);
    }
  }
  /* Freed even when the runtime failed: the handle is not usable again. */
  free(stream);
  return st;
}

/* NULL and hipStreamPerThread (an imported handle may be one of them)
 * name the default stream of the calling thread's current device: a call
 * on them runs with the stream's device made current, or it queues on
 * another device. Other handles carry their device. */
static bool names_current_default(hipStream_t s) {
  return s == NULL || s == hipStreamPerThread;
}

int hip_stream_synchronize(struct adr_backend_device* dev, struct adr_backend_stream* stream,
                           struct adr_error* error) {
  struct hip_current_guard g;
  bool push = names_current_default(stream->stream);
  int st = push ? hip_current_enter(stream->dev, &g, error) : 0;
  if (st) return st;
  hipError_t r = hip_api.hipStreamSynchronize(stream->stream);
  if (push) hip_current_leave(&g);
  return hip_check(r, error, "HIP device %d", dev->ordinal);
}

int hip_stream_import(struct adr_backend_device* dev, void* native_stream,
                      struct adr_backend_stream** out, struct adr_error* error) {
  /* NULL is HIP's legacy default stream, a valid hipStream_t. The runtime
   * has no portable way to ask a stream's device, so the application's
   * word (the adr device it imports into) is taken. */
  hipStream_t cs = (hipStream_t)native_stream;
  struct adr_backend_stream* s = calloc(1, sizeof(*s));
  if (s == NULL) return hip_errorf(error, ENOMEM, "out of memory");
  s->dev = dev;
  s->stream = cs;
  s->imported = true;
  *out = s;
  return 0;
}

void* hip_stream_native(struct adr_backend_device* dev, struct adr_backend_stream* stream) {
  (void)dev;
  return (void*)stream->stream;
}

int hip_event_create(struct adr_backend_device* dev, struct adr_backend_event** out,
                     struct adr_error* error) {
  struct adr_backend_event* e = calloc(1, sizeof(*e));
  if (e == NULL) return hip_errorf(error, ENOMEM, "out of memory");
  struct hip_current_guard g;
  int st = hip_current_enter(dev, &g, error);
  if (st == 0) {
    hipError_t r = hip_api.hipEventCreateWithFlags(&e->event, hipEventDisableTiming);
    hip_current_leave(&g);
    if (r != hipSuccess)
      st = hip_check(r, error, "hipEventCreateWithFlags on HIP device %d", dev->ordinal);
  }
  if (st) {
    free(e);
    return st;
  }
  *out = e;
  return 0;
}

int hip_event_destroy(struct adr_backend_device* dev, struct adr_backend_event* event,
                      struct adr_error* error) {
  int st = 0;
  if (!event->imported) {
    /* cuEventDestroy may be called with work pending: the runtime releases
     * the event once it completes. */
    hipError_t r = hip_api.hipEventDestroy(event->event);
    if (r != hipSuccess) st = hip_check(r, error, "HIP device %d", dev->ordinal);
  }
  free(event);
  return st;
}

int hip_event_record(struct adr_backend_device* dev, struct adr_backend_event* event,
                     struct adr_backend_stream* stream, struct adr_error* error) {
  struct hip_current_guard g;
  bool push = names_current_default(stream->stream);
  int st = push ? hip_current_enter(stream->dev, &g, error) : 0;
  if (st) return st;
  hipError_t r = hip_api.hipEventRecord(event->event, stream->stream);
  if (push) hip_current_leave(&g);
  return hip_check(r, error, "hipEventRecord on HIP device %d", dev->ordinal);
}

int hip_event_wait(struct adr_backend_device* dev, struct adr_backend_event* event,
                   struct adr_backend_stream* stream, struct adr_error* error) {
  struct hip_current_guard g;
  bool push = names_current_default(stream->stream);
  int st = push ? hip_current_enter(stream->dev, &g, error) : 0;
  if (st) return st;
  hipError_t r = hip_api.hipStreamWaitEvent(stream->stream, event->event, 0);
  if (push) hip_current_leave(&g);
  return hip_check(r, error, "hipStreamWaitEvent on HIP device %d", dev->ordinal);
}

int hip_event_synchronize(struct adr_backend_device* dev, struct adr_backend_event* event,
                          struct adr_error* error) {
  hipError_t r = hip_api.hipEventSynchronize(event->event);
  return hip_check(r, error, "HIP device %d", dev->ordinal);
}

int hip_event_query(struct adr_backend_device* dev, struct adr_backend_event* event,
                    struct adr_error* error) {
  hipError_t r = hip_api.hipEventQuery(event->event);
  if (r == hipSuccess) return 0;
  if (r == hipErrorNotReady) return EBUSY;
  return hip_check(r, error, "HIP device %d", dev->ordinal);
}

void* hip_event_native(struct adr_backend_device* dev, struct adr_backend_event* event) {
  (void)dev;
  return &event->event;
}

int hip_event_import(struct adr_backend_device* dev, void* sync_event,
                     struct adr_backend_event** out, struct adr_error* error) {
  hipEvent_t ev = *(hipEvent_t*)sync_event;
  if (ev == NULL)
    return hip_errorf(error, EINVAL,
                      "sync_event points "
                      "to a NULL hipEvent_t");
  /* A query validates the handle without waiting (NOT_READY is fine). */
  hipError_t r = hip_api.hipEventQuery(ev);
  if (r != hipSuccess && r != hipErrorNotReady)
    return hip_check(r, error, "%p is not a hipEvent_t the runtime knows", (void*)ev);
  struct adr_backend_event* e = calloc(1, sizeof(*e));
  if (e == NULL) return hip_errorf(error, ENOMEM, "out of memory");
  (void)dev;
  e->event = ev;
  e->imported = true;
  *out = e;
  return 0;
}
