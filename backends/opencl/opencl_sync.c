/* SPDX-License-Identifier: Apache-2.0
 *
 * Streams (in-order cl_command_queues) and events (cl_events).
 *
 * A new adr event holds a user event already set to CL_COMPLETE, so the
 * cl_event* it exports is valid for raw OpenCL calls even before the first
 * record. Recording enqueues a marker (which completes when all earlier
 * commands of the in-order queue have) and flushes the queue, so that a
 * host waiting on or polling the event - through adr or through raw
 * clWaitForEvents / clGetEventInfo - sees it complete without anyone else
 * flushing. A device-side wait is a barrier with the event in its wait list;
 * an event of another context cannot be in a wait list, so it is bridged by
 * a user event of the waiting queue's context that a completion callback on
 * the foreign event sets.
 *
 * Each event has a mutex so that a re-record racing with a wait/query never
 * lets the other thread use a released cl_event: readers retain the current
 * cl_event under the lock and release it after use.
 */
#include <errno.h>
#include <stdlib.h>

#include "opencl_internal.h"

int ocl_queue_create(struct adr_backend_device* dev, cl_command_queue* out,
                     struct adr_error* error) {
  cl_int rc = CL_SUCCESS;
  cl_command_queue q;
  if (ocl.clCreateCommandQueueWithProperties != NULL && dev->version_major >= 2) {
    const cl_queue_properties props[] = {0};
    q = ocl.clCreateCommandQueueWithProperties(dev->context, dev->device, props, &rc);
  } else {
    q = ocl.clCreateCommandQueue(dev->context, dev->device, 0, &rc);
  }
  if (q == NULL || rc != CL_SUCCESS)
    return ocl_check(rc, error, "creating an in-order command queue on opencl:%lld failed",
                     (long long)dev->id);
  *out = q;
  return 0;
}

void ocl_stream_init(struct adr_backend_stream* s, struct adr_backend_device* dev,
                     cl_command_queue queue, uint32_t flags) {
  s->queue = queue;
  s->dev = dev;
  s->flags = flags;
  s->last = NULL;
  atomic_init(&s->shared, (flags & OCL_STREAM_IMPORTED) != 0);
  atomic_init(&s->busy, false);
  pthread_mutex_init(&s->lock, NULL);
}

void ocl_stream_share(struct adr_backend_stream* s) {
  atomic_store_explicit(&s->shared, true, memory_order_relaxed);
}

bool ocl_stream_host_ready(struct adr_backend_stream* s) {
  return !atomic_load_explicit(&s->shared, memory_order_relaxed) && ocl_stream_idle(s);
}

void ocl_stream_fini(struct adr_backend_stream* s) {
  if (s->last != NULL) ocl.clReleaseEvent(s->last);
  s->last = NULL;
  pthread_mutex_destroy(&s->lock);
}

void ocl_stream_track(struct adr_backend_stream* s, cl_event ev) {
  if (ev == NULL) return;
  pthread_mutex_lock(&s->lock);
  cl_event old = s->last;
  s->last = ev;
  atomic_store_explicit(&s->busy, true, memory_order_relaxed);
  pthread_mutex_unlock(&s->lock);
  if (old != NULL) ocl.clReleaseEvent(old);
}

bool ocl_stream_idle(struct adr_backend_stream* s) {
  /* Nothing tracked since the last command was seen complete. A command
   * another thread is tracking right now on the same stream is unordered
   * with this call anyway. */
  if (!atomic_load_explicit(&s->busy, memory_order_acquire)) return true;
  bool idle = true;
  cl_event done = NULL;
  pthread_mutex_lock(&s->lock);
  if (s->last != NULL) {
    cl_int status = CL_QUEUED;
    cl_int rc = ocl.clGetEventInfo(s->last, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status),
                                   &status, NULL);
    /* A failed command counts as finished: the queue has moved past it. */
    idle = rc != CL_SUCCESS || status <= CL_COMPLETE;
    if (idle) {
      done = s->last;
      s->last = NULL;
    }
  }
  if (idle) atomic_store_explicit(&s->busy, false, memory_order_release);
  pthread_mutex_unlock(&s->lock);
  if (done != NULL) ocl.clReleaseEvent(done);
  return idle;
}

int ocl_stream_create(struct adr_backend_device* dev, uint32_t flags,
                      struct adr_backend_stream** out, struct adr_error* error) {
  if (flags & ADR_BACKEND_STREAM_DEFAULT) {
    *out = &dev->default_stream;
    return 0;
  }
  struct adr_backend_stream* s = calloc(1, sizeof(*s));
  if (s == NULL) return ocl_errorf(error, ENOMEM, "out of host memory");
  cl_command_queue q = NULL;
  int st = ocl_queue_create(dev, &q, error);
  if (st != 0) {
    free(s);
    return st;
  }
  ocl_stream_init(s, dev, q, 0);
  *out = s;
  return 0;
}

int ocl_stream_destroy(struct adr_backend_device* dev, struct adr_backend_stream* stream,
                       struct adr_error* error) {
  (void)dev;
  if (stream->flags & OCL_STREAM_DEFAULT)
    return ocl_errorf(error, EINVAL, "the default stream is released by device_close");
  /* Imported queues are the application's: only our reference goes. */
  cl_int rc = ocl.clFinish(stream->queue);
  cl_int rc2 = ocl.clReleaseCommandQueue(stream->queue);
  ocl_stream_fini(stream);
  free(stream);
  if (rc != CL_SUCCESS) return ocl_check(rc, error, "waiting for the stream's work failed");
  if (rc2 != CL_SUCCESS) return ocl_check(rc2, error, "releasing the queue failed");
  return 0;
}

int ocl_stream_synchronize(struct adr_backend_device* dev, struct adr_backend_stream* stream,
                           struct adr_error* error) {
  (void)dev;
  cl_int rc = ocl.clFinish(stream->queue);
  if (rc != CL_SUCCESS) return ocl_check(rc, error, "clFinish failed");
  return 0;
}

int ocl_stream_import(struct adr_backend_device* dev, void* native_stream,
                      struct adr_backend_stream** out, struct adr_error* error) {
  cl_command_queue q = native_stream;
  int st = ocl_handle_check(q, "cl_command_queue", error);
  if (st != 0) return st;
  cl_context ctx = NULL;
  cl_device_id qdev = NULL;
  cl_uint refs = 0;
  cl_command_queue_properties props = 0;
  cl_int rc = ocl.clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof(ctx), &ctx, NULL);
  if (rc == CL_SUCCESS)
    rc = ocl.clGetCommandQueueInfo(q, CL_QUEUE_DEVICE, sizeof(qdev), &qdev, NULL);
  if (rc == CL_SUCCESS)
    rc = ocl.clGetCommandQueueInfo(q, CL_QUEUE_REFERENCE_COUNT, sizeof(refs), &refs, NULL);
  if (rc == CL_SUCCESS)
    rc = ocl.clGetCommandQueueInfo(q, CL_QUEUE_PROPERTIES, sizeof(props), &props, NULL);
  if (rc != CL_SUCCESS) return ocl_check(rc, error, "the queue cannot be queried");
  /* The driver may not check the object's type: a context and a device
   * that are adr's own (and a live reference count) are what a queue of
   * this device has, and what another object read as a queue has not. */
  if (ctx != dev->context)
    return ocl_errorf(error, EINVAL,
                      "%p belongs to another context than opencl:%lld's (it reports context "
                      "%p), or is not a cl_command_queue",
                      (void*)q, (long long)dev->id, (void*)ctx);
  if (qdev != dev->device || refs == 0)
    return ocl_errorf(error, EINVAL, "%p is not a cl_command_queue of opencl:%lld's device",
                      (void*)q, (long long)dev->id);
  if (props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)
    return ocl_errorf(error, EINVAL,
                      "the queue is out-of-order; adr streams need an in-order queue");
  struct adr_backend_stream* s = calloc(1, sizeof(*s));
  if (s == NULL) return ocl_errorf(error, ENOMEM, "out of host memory");
  ocl.clRetainCommandQueue(q);
  ocl_stream_init(s, dev, q, OCL_STREAM_IMPORTED);
  *out = s;
  return 0;
}

void* ocl_stream_native(struct adr_backend_device* dev, struct adr_backend_stream* stream) {
  (void)dev;
  ocl_stream_share(stream);
  return stream->queue;
}

/* A user event of `ctx` that is already complete. */
static cl_int completed_event(cl_context ctx, cl_event* out) {
  cl_int rc = CL_SUCCESS;
  cl_event e = ocl.clCreateUserEvent(ctx, &rc);
  if (e == NULL || rc != CL_SUCCESS) return rc != CL_SUCCESS ? rc : CL_OUT_OF_HOST_MEMORY;
  rc = ocl.clSetUserEventStatus(e, CL_COMPLETE);
  if (rc != CL_SUCCESS) {
    ocl.clReleaseEvent(e);
    return rc;
  }
  *out = e;
  return CL_SUCCESS;
}

int ocl_event_create(struct adr_backend_device* dev, struct adr_backend_event** out,
                     struct adr_error* error) {
  struct adr_backend_event* e = calloc(1, sizeof(*e));
  if (e == NULL) return ocl_errorf(error, ENOMEM, "out of host memory");
  cl_int rc = completed_event(dev->context, &e->event);
  if (rc != CL_SUCCESS) {
    free(e);
    return ocl_check(rc, error, "clCreateUserEvent failed");
  }
  pthread_mutex_init(&e->lock, NULL);
  e->dev = dev;
  *out = e;
  return 0;
}

/* Checks a foreign cl_event before adr relies on it: a readable object of
 * a known platform (ocl_handle_check), which OpenCL can query, whose
 * context is a context, and whose fields have values an event can have
 * (the driver may not check the object's type). Events of other contexts
 * are fine: a wait bridges them. */
static int check_event(cl_event e, struct adr_error* error) {
  int st = ocl_handle_check(e, "cl_event", error);
  if (st != 0) return st;
  cl_context ctx = NULL;
  cl_uint refs = 0, ndev = 0;
  cl_command_type type = 0;
  cl_int status = CL_COMPLETE;
  cl_int rc = ocl.clGetEventInfo(e, CL_EVENT_CONTEXT, sizeof(ctx), &ctx, NULL);
  if (rc == CL_SUCCESS)
    rc = ocl.clGetEventInfo(e, CL_EVENT_REFERENCE_COUNT, sizeof(refs), &refs, NULL);
  if (rc == CL_SUCCESS)
    rc = ocl.clGetEventInfo(e, CL_EVENT_COMMAND_TYPE, sizeof(type), &type, NULL);
  if (rc == CL_SUCCESS)
    rc = ocl.clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status, NULL);
  if (rc != CL_SUCCESS) return ocl_check(rc, error, "*sync_event is not a valid cl_event");
  if (ocl_handle_check(ctx, "event's context", NULL) != 0 ||
      ocl.clGetContextInfo(ctx, CL_CONTEXT_NUM_DEVICES, sizeof(ndev), &ndev, NULL) != CL_SUCCESS ||
      ndev == 0)
    return ocl_errorf(error, EINVAL, "*sync_event %p is not a cl_event (no valid context)",
                      (void*)e);
  /* Command types of OpenCL 1.0-3.0 and of the extensions (0x1xxx-0x4xxx),
   * execution status CL_COMPLETE..CL_QUEUED or a (negative) error. */
  if (refs == 0 || type < 0x1100 || type > 0x4fff || status > CL_QUEUED)
    return ocl_errorf(error, EINVAL,
                      "*sync_event %p is not a cl_event (reference count %u, command type "
                      "0x%x, execution status %d)",
                      (void*)e, (unsigned)refs, (unsigned)type, (int)status);
  return 0;
}

int ocl_event_import(struct adr_backend_device* dev, void* sync_event,
                     struct adr_backend_event** out, struct adr_error* error) {
  if (sync_event == NULL)
    return ocl_errorf(error, EINVAL, "sync_event is NULL (expected a cl_event*)");
  void* word = NULL;
  if (!ocl_peek_pointer(sync_event, &word))
    return ocl_errorf(error, EINVAL, "sync_event %p is not readable memory", sync_event);
  cl_event native = word;
  if (native != NULL) {
    int st = check_event(native, error);
    if (st != 0) return st;
  }
  struct adr_backend_event* e = calloc(1, sizeof(*e));
  if (e == NULL) return ocl_errorf(error, ENOMEM, "out of host memory");
  /* The producer owns its event; our reference keeps it valid for as long
   * as the wrapper lives. A NULL cl_event means "nothing to wait for". */
  if (native != NULL) ocl.clRetainEvent(native);
  pthread_mutex_init(&e->lock, NULL);
  e->event = native;
  e->dev = dev;
  e->imported = true;
  *out = e;
  return 0;
}

int ocl_event_destroy(struct adr_backend_device* dev, struct adr_backend_event* event,
                      struct adr_error* error) {
  (void)dev;
  (void)error;
  if (event->event != NULL) ocl.clReleaseEvent(event->event);
  pthread_mutex_destroy(&event->lock);
  free(event);
  return 0;
}

int ocl_event_record(struct adr_backend_device* dev, struct adr_backend_event* event,
                     struct adr_backend_stream* stream, struct adr_error* error) {
  (void)dev;
  if (event->imported)
    return ocl_errorf(error, ENOTSUP,
                      "an imported cl_event belongs to its producer and cannot be re-recorded");
  cl_event marker = NULL;
  cl_int rc = ocl.clEnqueueMarkerWithWaitList(stream->queue, 0, NULL, &marker);
  if (rc == CL_SUCCESS && stream->dev->host_copy) {
    ocl.clRetainEvent(marker);
    ocl_stream_track(stream, marker);
  }
  if (rc != CL_SUCCESS) return ocl_check(rc, error, "clEnqueueMarkerWithWaitList failed");
  rc = ocl.clFlush(stream->queue);
  if (rc != CL_SUCCESS) {
    ocl.clReleaseEvent(marker);
    return ocl_check(rc, error, "clFlush failed");
  }
  pthread_mutex_lock(&event->lock);
  cl_event old = event->event;
  event->event = marker;
  pthread_mutex_unlock(&event->lock);
  if (old != NULL) ocl.clReleaseEvent(old);
  return 0;
}

/* The current cl_event with a reference the caller releases (NULL when the
 * event is an imported "nothing to wait for"). */
static cl_event current(struct adr_backend_event* event) {
  pthread_mutex_lock(&event->lock);
  cl_event e = event->event;
  if (e != NULL) ocl.clRetainEvent(e);
  pthread_mutex_unlock(&event->lock);
  return e;
}

static void CL_CALLBACK bridge_complete(cl_event source, cl_int status, void* user) {
  (void)source;
  cl_event bridge = user;
  /* A failed source fails the bridge, so the waiting queue sees the error. */
  ocl.clSetUserEventStatus(bridge, status < 0 ? status : CL_COMPLETE);
  ocl.clReleaseEvent(bridge);
}

int ocl_event_wait(struct adr_backend_device* dev, struct adr_backend_event* event,
                   struct adr_backend_stream* stream, struct adr_error* error) {
  (void)dev;
  cl_event e = current(event);
  if (e == NULL) return 0;
  cl_event barrier = NULL;
  cl_context ctx = NULL;
  cl_int rc = ocl.clGetEventInfo(e, CL_EVENT_CONTEXT, sizeof(ctx), &ctx, NULL);
  if (rc == CL_SUCCESS && ctx != stream->dev->context) {
    cl_event bridge = ocl.clCreateUserEvent(stream->dev->context, &rc);
    if (bridge != NULL && rc == CL_SUCCESS) {
      ocl.clRetainEvent(bridge); /* the callback's reference */
      rc = ocl.clSetEventCallback(e, CL_COMPLETE, bridge_complete, bridge);
      if (rc != CL_SUCCESS) ocl.clReleaseEvent(bridge);
      if (rc == CL_SUCCESS)
        rc = ocl.clEnqueueBarrierWithWaitList(stream->queue, 1, &bridge,
                                              ocl_track_slot(stream, &barrier));
      ocl.clReleaseEvent(bridge);
    }
  } else if (rc == CL_SUCCESS) {
    rc = ocl.clEnqueueBarrierWithWaitList(stream->queue, 1, &e, ocl_track_slot(stream, &barrier));
  }
  if (rc == CL_SUCCESS) ocl_stream_track(stream, barrier);
  ocl.clReleaseEvent(e);
  if (rc != CL_SUCCESS) return ocl_check(rc, error, "making the stream wait failed");
  return 0;
}

int ocl_event_synchronize(struct adr_backend_device* dev, struct adr_backend_event* event,
                          struct adr_error* error) {
  (void)dev;
  cl_event e = current(event);
  if (e == NULL) return 0;
  cl_int rc = ocl.clWaitForEvents(1, &e);
  ocl.clReleaseEvent(e);
  if (rc != CL_SUCCESS) return ocl_check(rc, error, "clWaitForEvents failed");
  return 0;
}

int ocl_event_query(struct adr_backend_device* dev, struct adr_backend_event* event,
                    struct adr_error* error) {
  (void)dev;
  cl_event e = current(event);
  if (e == NULL) return 0;
  cl_int status = CL_COMPLETE;
  cl_int rc =
      ocl.clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status, NULL);
  ocl.clReleaseEvent(e);
  if (rc != CL_SUCCESS) return ocl_check(rc, error, "clGetEventInfo failed");
  /* A negative execution status is the error the failed command ended
   * with: name it, but report EIO whatever it was. */
  if (status < 0)
    return adr_backend_error_set(error, EIO,
                                 "%s: the awaited work failed "
                                 "(execution status %d)",
                                 ocl_error_name(status), (int)status);
  return status == CL_COMPLETE ? 0 : EBUSY;
}

void* ocl_event_native(struct adr_backend_device* dev, struct adr_backend_event* event) {
  (void)dev;
  return &event->event;
}
