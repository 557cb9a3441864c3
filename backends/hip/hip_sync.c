/* SPDX-License-Identifier: Apache-2.0
 *
 * HIP backend: streams and events.
 *
 * Every stream adr creates, the device's default stream included, is a
 * hipStreamNonBlocking stream, so adr's work never serialises with the
 * legacy NULL stream an application may be using. Events are created with
 * hipEventDisableTiming (no timestamps: cheaper to record and wait on).
 * ArrowDeviceArray.sync_event is a hipEvent_t* pointing into the wrapper.
 *
 * Wrappers are plain heap objects; HIP streams and events are themselves
 * safe to use from several threads, so nothing here takes a lock.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "hip_internal.h"

static int create_native_stream(struct adr_backend_device* dev, hipStream_t* out,
                                struct adr_error* error) {
  int st = hip_set_device(dev, "stream_create", error);
  if (st != 0) return st;
  hipError_t e = hip_api.hipStreamCreateWithFlags(out, hipStreamNonBlocking);
  if (e != hipSuccess) return hip_check(e, error, "hipStreamCreateWithFlags");
  return 0;
}

int hip_stream_create(struct adr_backend_device* dev, uint32_t flags,
                      struct adr_backend_stream** out, struct adr_error* error) {
  if (flags & ADR_BACKEND_STREAM_DEFAULT) {
    /* The core asks once, while it creates the device (registry lock
     * held); an adopted device may already carry the application's. */
    if (dev->default_stream.stream == NULL) {
      int st = create_native_stream(dev, &dev->default_stream.stream, error);
      if (st != 0) return st;
      dev->default_stream.dev = dev;
      dev->default_stream.is_default = true;
    }
    *out = &dev->default_stream;
    return 0;
  }
  struct adr_backend_stream* s = calloc(1, sizeof(*s));
  if (s == NULL) return hip_errorf(error, ENOMEM, "out of memory");
  int st = create_native_stream(dev, &s->stream, error);
  if (st != 0) {
    free(s);
    return st;
  }
  s->dev = dev;
  *out = s;
  return 0;
}

int hip_stream_destroy(struct adr_backend_device* dev, struct adr_backend_stream* stream,
                       struct adr_error* error) {
  if (stream->is_default) return hip_errorf(error, EINVAL, "the default stream is not destroyed");
  if (!stream->imported) {
    hipError_t e = hip_api.hipStreamSynchronize(stream->stream);
    if (e != hipSuccess) return hip_check(e, error, "hipStreamSynchronize");
    e = hip_api.hipStreamDestroy(stream->stream);
    if (e != hipSuccess) return hip_check(e, error, "hipStreamDestroy");
  } else if (stream->scratch != NULL) {
    hip_api.hipStreamSynchronize(stream->stream); /* its copies may still read it */
  }
  if (stream->scratch != NULL && hip_set_device(stream->dev, "stream_destroy", NULL) == 0)
    hip_stream_scratch_free(stream);
  free(stream);
  return 0;
}

int hip_stream_synchronize(struct adr_backend_device* dev, struct adr_backend_stream* stream,
                           struct adr_error* error) {
  hipError_t e = hip_api.hipStreamSynchronize(stream->stream);
  if (e != hipSuccess) return hip_check(e, error, "hipStreamSynchronize");
  return 0;
}

int hip_stream_import(struct adr_backend_device* dev, void* native, struct adr_backend_stream** out,
                      struct adr_error* error) {
  /* NULL is HIP's legacy default stream, a valid hipStream_t. */
  struct adr_backend_stream* s = calloc(1, sizeof(*s));
  if (s == NULL) return hip_errorf(error, ENOMEM, "out of memory");
  s->stream = (hipStream_t)native;
  s->dev = dev;
  s->imported = true;
  *out = s;
  return 0;
}

void* hip_stream_native(struct adr_backend_device* dev, struct adr_backend_stream* stream) {
  return (void*)stream->stream;
}

int hip_event_create(struct adr_backend_device* dev, struct adr_backend_event** out,
                     struct adr_error* error) {
  struct adr_backend_event* ev = calloc(1, sizeof(*ev));
  if (ev == NULL) return hip_errorf(error, ENOMEM, "out of memory");
  int st = hip_set_device(dev, "event_create", error);
  hipError_t e = hipSuccess;
  if (st == 0 &&
      (e = hip_api.hipEventCreateWithFlags(&ev->event, hipEventDisableTiming)) != hipSuccess)
    st = hip_check(e, error, "hipEventCreateWithFlags");
  if (st != 0) {
    free(ev);
    return st;
  }
  *out = ev;
  return 0;
}

int hip_event_destroy(struct adr_backend_device* dev, struct adr_backend_event* event,
                      struct adr_error* error) {
  if (!event->imported) {
    hipError_t e = hip_api.hipEventDestroy(event->event);
    if (e != hipSuccess) return hip_check(e, error, "hipEventDestroy");
  }
  free(event);
  return 0;
}

int hip_event_record(struct adr_backend_device* dev, struct adr_backend_event* event,
                     struct adr_backend_stream* stream, struct adr_error* error) {
  hipError_t e = hip_api.hipEventRecord(event->event, stream->stream);
  if (e != hipSuccess) return hip_check(e, error, "hipEventRecord");
  return 0;
}

int hip_event_wait(struct adr_backend_device* dev, struct adr_backend_event* event,
                   struct adr_backend_stream* stream, struct adr_error* error) {
  hipError_t e = hip_api.hipStreamWaitEvent(stream->stream, event->event, 0);
  if (e != hipSuccess) return hip_check(e, error, "hipStreamWaitEvent");
  return 0;
}

int hip_event_synchronize(struct adr_backend_device* dev, struct adr_backend_event* event,
                          struct adr_error* error) {
  hipError_t e = hip_api.hipEventSynchronize(event->event);
  if (e != hipSuccess) return hip_check(e, error, "hipEventSynchronize");
  return 0;
}

int hip_event_query(struct adr_backend_device* dev, struct adr_backend_event* event,
                    struct adr_error* error) {
  hipError_t e = hip_api.hipEventQuery(event->event);
  if (e == hipSuccess) return 0;
  if (e == hipErrorNotReady) return EBUSY;
  return hip_check(e, error, "hipEventQuery");
}

void* hip_event_native(struct adr_backend_device* dev, struct adr_backend_event* event) {
  return &event->event;
}

int hip_event_import(struct adr_backend_device* dev, void* sync_event,
                     struct adr_backend_event** out, struct adr_error* error) {
  if (sync_event == NULL)
    return hip_errorf(error, EINVAL, "sync_event is NULL (expected a hipEvent_t*)");
  hipEvent_t native = *(hipEvent_t*)sync_event;
  if (native == NULL) return hip_errorf(error, EINVAL, "*sync_event is a NULL hipEvent_t");
  struct adr_backend_event* ev = calloc(1, sizeof(*ev));
  if (ev == NULL) return hip_errorf(error, ENOMEM, "out of memory");
  ev->event = native;
  ev->imported = true;
  *out = ev;
  return 0;
}
