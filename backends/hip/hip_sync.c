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
  struct hip_current_guard g;
  int st = hip_current_enter(dev, &g, error);
  if (st != 0) return st;
  hipError_t e = hip_api.hipStreamCreateWithFlags(out, hipStreamNonBlocking);
  hip_current_leave(&g);
  return hip_check(e, error, "hipStreamCreateWithFlags on HIP device %d", dev->ordinal);
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
    st = hip_check(r, error, "HIP device %d", dev->ordinal);
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
  struct adr_backend_event* e = calloc(1, sizeof(*e));
  if (e == NULL) return hip_errorf(error, ENOMEM, "out of memory");
  struct hip_current_guard g;
  int st = hip_current_enter(dev, &g, error);
  if (st == 0) {
    hipError_t r = hip_api.hipEventCreateWithFlags(&e->event, hipEventDisableTiming);
    hip_current_leave(&g);
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
    /* hipEventDestroy may be called with work pending: the runtime
     * releases the event once it completes. */
    hipError_t r = hip_api.hipEventDestroy(event->event);
    st = hip_check(r, error, "HIP device %d", dev->ordinal);
  }
  /* Freed even when the runtime failed: the handle is not usable again. */
  free(event);
  return st;
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
