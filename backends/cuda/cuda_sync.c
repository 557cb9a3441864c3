/* SPDX-License-Identifier: Apache-2.0
 *
 * CUDA backend: streams (non-blocking CUstreams) and events
 * (CU_EVENT_DISABLE_TIMING CUevents), and wrapping foreign ones.
 *
 * An adr event exports &event->event, a CUevent* (= cudaEvent_t*), as the
 * ArrowDeviceArray.sync_event; importing takes such a pointer and copies
 * the handle out of it, so the producer's storage need not outlive the
 * import (the CUevent itself must).
 */
#include <errno.h>
#include <stdlib.h>

#include "cuda_internal.h"

int cuda_stream_create(struct adr_backend_device* dev, uint32_t flags,
                       struct adr_backend_stream** out, struct adr_error* error) {
  if (flags & ADR_BACKEND_STREAM_DEFAULT) {
    *out = &dev->default_stream;
    return 0;
  }
  struct adr_backend_stream* s = calloc(1, sizeof(*s));
  if (s == NULL) return cuda_errorf(error, ENOMEM, "out of memory");
  s->dev = dev;
  struct cuda_current_guard g;
  int st = cuda_current_enter(dev, &g, error);
  if (st == 0) {
    CUresult r = cuda_api.cuStreamCreate(&s->stream, CU_STREAM_NON_BLOCKING);
    cuda_current_leave(&g);
    if (r != CUDA_SUCCESS)
      st = cuda_check(r, error, "cuStreamCreate on CUDA device %d", dev->ordinal);
  }
  if (st) {
    free(s);
    return st;
  }
  *out = s;
  return 0;
}

int cuda_stream_destroy(struct adr_backend_device* dev, struct adr_backend_stream* stream,
                        struct adr_error* error) {
  if (stream->is_default)
    return cuda_errorf(error, EINVAL,
                       "the default stream of CUDA device %d is never destroyed (device_close "
                       "releases it)",
                       dev->ordinal);
  int st = 0;
  if (!stream->imported) {
    /* The API promises the queued work completes before the stream goes. */
    CUresult r = cuda_api.cuStreamSynchronize(stream->stream);
    if (r == CUDA_SUCCESS) r = cuda_api.cuStreamDestroy(stream->stream);
    if (r != CUDA_SUCCESS) st = cuda_check(r, error, "CUDA device %d", dev->ordinal);
  } else if (stream->scratch != 0) {
    cuda_api.cuStreamSynchronize(stream->stream); /* its copies may still read it */
  }
  if (stream->scratch != 0) {
    struct cuda_current_guard g;
    if (cuda_current_enter(stream->dev, &g, NULL) == 0) {
      cuda_stream_scratch_free(stream);
      cuda_current_leave(&g);
    }
  }
  /* Freed even when the driver failed: the handle is not usable again. */
  free(stream);
  return st;
}

/* NULL, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD (an imported handle may
 * be one of them) name the default stream of the calling thread's current
 * context: a call on them runs with the stream's device context pushed, or
 * the driver answers CUDA_ERROR_INVALID_CONTEXT (no context current) or
 * queues on another device. Other handles carry their context. */
static bool names_current_default(CUstream s) {
  return s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD;
}

int cuda_stream_synchronize(struct adr_backend_device* dev, struct adr_backend_stream* stream,
                            struct adr_error* error) {
  struct cuda_current_guard g;
  bool push = names_current_default(stream->stream);
  int st = push ? cuda_current_enter(stream->dev, &g, error) : 0;
  if (st) return st;
  CUresult r = cuda_api.cuStreamSynchronize(stream->stream);
  if (push) cuda_current_leave(&g);
  return cuda_check(r, error, "CUDA device %d", dev->ordinal);
}

int cuda_stream_import(struct adr_backend_device* dev, void* native_stream,
                       struct adr_backend_stream** out, struct adr_error* error) {
  CUstream cs = (CUstream)native_stream;
  CUcontext owner = NULL;
  struct cuda_current_guard g;
  int st = cuda_current_enter(dev, &g, error);
  if (st) return st;
  /* The legacy and per-thread handles name the current context's default
   * stream, which is this device's while its context is pushed. */
  CUresult r = cuda_api.cuStreamGetCtx(cs, &owner);
  cuda_current_leave(&g);
  if (r != CUDA_SUCCESS)
    return cuda_check(r, error, "%p is not a CUstream the driver knows", native_stream);
  if (owner != dev->ctx)
    return cuda_errorf(error, EINVAL,
                       "CUstream %p "
                       "belongs to another context than CUDA device %d's primary context",
                       native_stream, dev->ordinal);
  struct adr_backend_stream* s = calloc(1, sizeof(*s));
  if (s == NULL) return cuda_errorf(error, ENOMEM, "out of memory");
  s->dev = dev;
  s->stream = cs;
  s->imported = true;
  *out = s;
  return 0;
}

void* cuda_stream_native(struct adr_backend_device* dev, struct adr_backend_stream* stream) {
  (void)dev;
  return (void*)stream->stream;
}

int cuda_event_create(struct adr_backend_device* dev, struct adr_backend_event** out,
                      struct adr_error* error) {
  struct adr_backend_event* e = calloc(1, sizeof(*e));
  if (e == NULL) return cuda_errorf(error, ENOMEM, "out of memory");
  struct cuda_current_guard g;
  int st = cuda_current_enter(dev, &g, error);
  if (st == 0) {
    CUresult r = cuda_api.cuEventCreate(&e->event, CU_EVENT_DISABLE_TIMING);
    cuda_current_leave(&g);
    if (r != CUDA_SUCCESS)
      st = cuda_check(r, error, "cuEventCreate on CUDA device %d", dev->ordinal);
  }
  if (st) {
    free(e);
    return st;
  }
  *out = e;
  return 0;
}

int cuda_event_destroy(struct adr_backend_device* dev, struct adr_backend_event* event,
                       struct adr_error* error) {
  int st = 0;
  if (!event->imported) {
    /* cuEventDestroy may be called with work pending: the driver releases
     * the event once it completes. */
    CUresult r = cuda_api.cuEventDestroy(event->event);
    if (r != CUDA_SUCCESS) st = cuda_check(r, error, "CUDA device %d", dev->ordinal);
  }
  free(event);
  return st;
}

int cuda_event_record(struct adr_backend_device* dev, struct adr_backend_event* event,
                      struct adr_backend_stream* stream, struct adr_error* error) {
  struct cuda_current_guard g;
  bool push = names_current_default(stream->stream);
  int st = push ? cuda_current_enter(stream->dev, &g, error) : 0;
  if (st) return st;
  CUresult r = cuda_api.cuEventRecord(event->event, stream->stream);
  if (push) cuda_current_leave(&g);
  return cuda_check(r, error, "cuEventRecord on CUDA device %d", dev->ordinal);
}

int cuda_event_wait(struct adr_backend_device* dev, struct adr_backend_event* event,
                    struct adr_backend_stream* stream, struct adr_error* error) {
  struct cuda_current_guard g;
  bool push = names_current_default(stream->stream);
  int st = push ? cuda_current_enter(stream->dev, &g, error) : 0;
  if (st) return st;
  CUresult r = cuda_api.cuStreamWaitEvent(stream->stream, event->event, 0);
  if (push) cuda_current_leave(&g);
  return cuda_check(r, error, "cuStreamWaitEvent on CUDA device %d", dev->ordinal);
}

int cuda_event_synchronize(struct adr_backend_device* dev, struct adr_backend_event* event,
                           struct adr_error* error) {
  CUresult r = cuda_api.cuEventSynchronize(event->event);
  return cuda_check(r, error, "CUDA device %d", dev->ordinal);
}

int cuda_event_query(struct adr_backend_device* dev, struct adr_backend_event* event,
                     struct adr_error* error) {
  CUresult r = cuda_api.cuEventQuery(event->event);
  if (r == CUDA_SUCCESS) return 0;
  if (r == CUDA_ERROR_NOT_READY) return EBUSY;
  return cuda_check(r, error, "CUDA device %d", dev->ordinal);
}

void* cuda_event_native(struct adr_backend_device* dev, struct adr_backend_event* event) {
  (void)dev;
  return &event->event;
}

int cuda_event_import(struct adr_backend_device* dev, void* sync_event,
                      struct adr_backend_event** out, struct adr_error* error) {
  CUevent ev = *(CUevent*)sync_event;
  if (ev == NULL)
    return cuda_errorf(error, EINVAL,
                       "sync_event points "
                       "to a NULL CUevent");
  /* A query validates the handle without waiting (NOT_READY is fine). */
  CUresult r = cuda_api.cuEventQuery(ev);
  if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY)
    return cuda_check(r, error, "%p is not a CUevent the driver knows", (void*)ev);
  struct adr_backend_event* e = calloc(1, sizeof(*e));
  if (e == NULL) return cuda_errorf(error, ENOMEM, "out of memory");
  (void)dev;
  e->event = ev;
  e->imported = true;
  *out = e;
  return 0;
}
