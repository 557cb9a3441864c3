/* SPDX-License-Identifier: Apache-2.0
 *
 * Streams and events: checked wrappers over the backend slots. With the
 * validation layer on (validate.h), every handle is checked before use and
 * destroyed objects go to its quarantine instead of free().
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "share/share_internal.h"
#include "validate.h"

/* Objects are made and released under the layer's regime, which is fixed
 * by the first creating call. */
static void* obj_new(bool validating, int kind, size_t size, const void* site) {
  return validating ? adr__validate_obj_create(kind, size, site) : calloc(1, size);
}

static void obj_discard(bool validating, void* obj) {
  if (validating)
    adr__validate_obj_discard(obj);
  else
    free(obj);
}

static void obj_release(void* obj, const void* site) {
  if (ADR__VALIDATING())
    adr__validate_obj_destroy(obj, site);
  else
    free(obj);
}

#define CHECK_STREAM(op, s)                               \
  do {                                                    \
    if (ADR__VALIDATING()) {                              \
      int adr__vst_ = adr__validate_stream(op, s, error); \
      if (adr__vst_) return adr__vst_;                    \
    }                                                     \
  } while (0)
#define CHECK_EVENT(op, e)                               \
  do {                                                   \
    if (ADR__VALIDATING()) {                             \
      int adr__vst_ = adr__validate_event(op, e, error); \
      if (adr__vst_) return adr__vst_;                   \
    }                                                    \
  } while (0)

#define BACKEND(dev) ((dev)->backend->name)

int adr_stream_create(struct adr_device* device, struct adr_stream** out, struct adr_error* error) {
  if (device == NULL || out == NULL)
    return adr__errorf(error, EINVAL, "adr_stream_create", NULL, "%s is NULL",
                       device ? "out" : "device");
  bool v = adr__validate_begin();
  struct adr_stream* s = obj_new(v, ADR__VOBJ_STREAM, sizeof(*s), ADR__CALL_SITE());
  if (s == NULL)
    return adr__errorf(error, ENOMEM, "adr_stream_create", BACKEND(device), "out of memory");
  int st = adr__dispatch_stream_create(device, "adr_stream_create", 0, &s->handle, error);
  if (st) {
    obj_discard(v, s);
    return st;
  }
  s->device = device;
  atomic_fetch_add_explicit(&device->live_objects, 1, memory_order_relaxed);
  if (v) adr__validate_obj_live(s);
  adr__stream_track(s);
  *out = s;
  return 0;
}

int adr_stream_destroy(struct adr_stream* stream, struct adr_error* error) {
  if (stream == NULL)
    return adr__errorf(error, EINVAL, "adr_stream_destroy", NULL, "stream is NULL");
  CHECK_STREAM("adr_stream_destroy", stream);
  struct adr_device* dev = stream->device;
  if (stream->flags & ADR__STREAM_DEFAULT)
    return adr__errorf(error, EINVAL, "adr_stream_destroy", BACKEND(dev),
                       "the default stream of %s cannot be destroyed", dev->name);
  /* After the teardown nothing is destroyed and the wrapper stays valid
   * (docs/lifetime.md). */
  if (adr__shut_down()) return adr__shutdown_error(error, "adr_stream_destroy", dev);
  adr__memory_stream_retire(stream);
  /* The backend's stream is gone whatever the status (adr/backend.h): the
   * wrapper goes too, and a driver error is reported. */
  int st = adr__dispatch_stream_destroy(dev, "adr_stream_destroy", stream->handle, error);
  atomic_fetch_sub_explicit(&dev->live_objects, 1, memory_order_relaxed);
  adr__stream_untrack(stream);
  obj_release(stream, ADR__CALL_SITE());
  return st;
}

int adr_stream_synchronize(struct adr_stream* stream, struct adr_error* error) {
  if (stream == NULL)
    return adr__errorf(error, EINVAL, "adr_stream_synchronize", NULL, "stream is NULL");
  CHECK_STREAM("adr_stream_synchronize", stream);
  struct adr_device* dev = stream->device;
  return adr__dispatch_stream_synchronize(dev, "adr_stream_synchronize", stream->handle, error);
}

struct adr_stream* adr_stream_default(struct adr_device* device) {
  return device ? &device->default_stream : NULL;
}

struct adr_device* adr_stream_device(const struct adr_stream* stream) {
  return stream ? stream->device : NULL;
}

int adr_stream_import(struct adr_device* device, void* native_stream, struct adr_stream** out,
                      struct adr_error* error) {
  if (device == NULL || native_stream == NULL || out == NULL)
    return adr__errorf(error, EINVAL, "adr_stream_import", NULL, "%s is NULL",
                       device == NULL          ? "device"
                       : native_stream == NULL ? "native_stream"
                                               : "out");
  bool v = adr__validate_begin();
  struct adr_stream* s = obj_new(v, ADR__VOBJ_STREAM, sizeof(*s), ADR__CALL_SITE());
  if (s == NULL)
    return adr__errorf(error, ENOMEM, "adr_stream_import", BACKEND(device), "out of memory");
  int st =
      adr__dispatch_stream_import(device, "adr_stream_import", native_stream, &s->handle, error);
  if (st) {
    obj_discard(v, s);
    return st;
  }
  s->device = device;
  s->flags = ADR__STREAM_IMPORTED;
  atomic_fetch_add_explicit(&device->live_objects, 1, memory_order_relaxed);
  if (v) adr__validate_obj_live(s);
  *out = s;
  return 0;
}

void* adr_stream_native(struct adr_stream* stream) {
  if (stream == NULL) return NULL;
  if (ADR__VALIDATING() && adr__validate_stream("adr_stream_native", stream, NULL) != 0) {
    adr__log(ADR_LOG_ERROR, "validate", "adr_stream_native: stream %p is not live", (void*)stream);
    return NULL;
  }
  struct adr_device* dev = stream->device;
  return adr__dispatch_stream_native(dev, stream->handle);
}

/* The end of every call that makes an event: the object is live. */
static int event_publish(bool validating, struct adr_device* dev, struct adr_event* e,
                         uint32_t flags, struct adr_event** out) {
  e->device = dev;
  e->flags = flags;
  atomic_fetch_add_explicit(&dev->live_objects, 1, memory_order_relaxed);
  if (validating) adr__validate_obj_live(e);
  *out = e;
  return 0;
}

int adr_event_create(struct adr_device* device, struct adr_event** out, struct adr_error* error) {
  if (device == NULL || out == NULL)
    return adr__errorf(error, EINVAL, "adr_event_create", NULL, "%s is NULL",
                       device ? "out" : "device");
  bool v = adr__validate_begin();
  struct adr_event* e = obj_new(v, ADR__VOBJ_EVENT, sizeof(*e), ADR__CALL_SITE());
  if (e == NULL)
    return adr__errorf(error, ENOMEM, "adr_event_create", BACKEND(device), "out of memory");
  int st = adr__dispatch_event_create(device, "adr_event_create", &e->handle, error);
  if (st) {
    obj_discard(v, e);
    return st;
  }
  return event_publish(v, device, e, 0, out);
}

int adr_event_destroy(struct adr_event* event, struct adr_error* error) {
  if (event == NULL) return adr__errorf(error, EINVAL, "adr_event_destroy", NULL, "event is NULL");
  CHECK_EVENT("adr_event_destroy", event);
  struct adr_device* dev = event->device;
  if (adr__shut_down()) return adr__shutdown_error(error, "adr_event_destroy", dev);
  /* As for streams: the event is gone whatever the status. */
  int st = adr__dispatch_event_destroy(dev, "adr_event_destroy", event->handle, error);
  atomic_fetch_sub_explicit(&dev->live_objects, 1, memory_order_relaxed);
  obj_release(event, ADR__CALL_SITE());
  return st;
}

int adr_event_record(struct adr_event* event, struct adr_stream* stream, struct adr_error* error) {
  if (event == NULL) return adr__errorf(error, EINVAL, "adr_event_record", NULL, "event is NULL");
  CHECK_EVENT("adr_event_record", event);
  CHECK_STREAM("adr_event_record", stream);
  struct adr_device* dev = event->device;
  if (stream != NULL && stream->device != dev)
    return adr__errorf(error, EINVAL, "adr_event_record", BACKEND(dev),
                       "event of %s cannot be recorded on a stream of %s", dev->name,
                       stream->device->name);
  if (event->flags & ADR__EVENT_IMPORTED)
    return adr__errorf(error, EINVAL, "adr_event_record", BACKEND(dev),
                       "an imported event belongs to its producer and cannot be re-recorded");
  struct adr_backend_stream* s = stream ? stream->handle : dev->default_stream.handle;
  return adr__dispatch_event_record(dev, "adr_event_record", event->handle, s, error);
}

int adr_stream_wait_event(struct adr_stream* stream, struct adr_event* event,
                          struct adr_error* error) {
  if (event == NULL)
    return adr__errorf(error, EINVAL, "adr_stream_wait_event", NULL, "event is NULL");
  CHECK_EVENT("adr_stream_wait_event", event);
  CHECK_STREAM("adr_stream_wait_event", stream);
  struct adr_device* edev = event->device;
  struct adr_device* sdev = stream ? stream->device : edev;
  /* A stream of another backend cannot wait on this event device-side:
   * the host waits instead, which orders the work just as well. */
  if (sdev->backend != edev->backend || stream == NULL) return adr_event_synchronize(event, error);
  return adr__dispatch_event_wait(sdev, "adr_stream_wait_event", event->handle, stream->handle,
                                  error);
}

int adr_event_synchronize(struct adr_event* event, struct adr_error* error) {
  if (event == NULL)
    return adr__errorf(error, EINVAL, "adr_event_synchronize", NULL, "event is NULL");
  CHECK_EVENT("adr_event_synchronize", event);
  struct adr_device* dev = event->device;
  return adr__dispatch_event_synchronize(dev, "adr_event_synchronize", event->handle, error);
}

int adr_event_query(struct adr_event* event, struct adr_error* error) {
  if (event == NULL) return adr__errorf(error, EINVAL, "adr_event_query", NULL, "event is NULL");
  CHECK_EVENT("adr_event_query", event);
  struct adr_device* dev = event->device;
  return adr__dispatch_event_query(dev, "adr_event_query", event->handle, error);
}

void* adr_event_native(struct adr_event* event) {
  if (event == NULL) return NULL;
  if (ADR__VALIDATING() && adr__validate_event("adr_event_native", event, NULL) != 0) {
    adr__log(ADR_LOG_ERROR, "validate", "adr_event_native: event %p is not live", (void*)event);
    return NULL;
  }
  struct adr_device* dev = event->device;
  return adr__dispatch_event_native(dev, event->handle);
}

int adr_event_import(struct adr_device* device, void* sync_event, struct adr_event** out,
                     struct adr_error* error) {
  if (device == NULL || sync_event == NULL || out == NULL)
    return adr__errorf(error, EINVAL, "adr_event_import", NULL, "%s is NULL",
                       device == NULL       ? "device"
                       : sync_event == NULL ? "sync_event"
                                            : "out");
  bool v = adr__validate_begin();
  struct adr_event* e = obj_new(v, ADR__VOBJ_EVENT, sizeof(*e), ADR__CALL_SITE());
  if (e == NULL)
    return adr__errorf(error, ENOMEM, "adr_event_import", BACKEND(device), "out of memory");
  int st = adr__dispatch_event_import(device, "adr_event_import", sync_event, &e->handle, error);
  if (st) {
    obj_discard(v, e);
    return st;
  }
  return event_publish(v, device, e, ADR__EVENT_IMPORTED, out);
}

struct adr_device* adr_event_device(const struct adr_event* event) {
  return event ? event->device : NULL;
}

/* ---- shared events (adr/share.h; core/share/ checks the handles) ---------- */

int adr_share_event_export(struct adr_stream* stream, struct adr_event** out_event,
                           struct adr_share_handle* out, int* out_fd, struct adr_error* error) {
  if (stream == NULL || out_event == NULL || out == NULL || out_fd == NULL)
    return adr__errorf(error, EINVAL, "adr_share_event_export", NULL, "%s is NULL",
                       stream == NULL ? "stream" : "an output");
  CHECK_STREAM("adr_share_event_export", stream);
  struct adr_device* dev = stream->device;
  if (adr__shut_down()) return adr__shutdown_error(error, "adr_share_event_export", dev);
  bool v = adr__validate_begin();
  struct adr_event* e = obj_new(v, ADR__VOBJ_EVENT, sizeof(*e), ADR__CALL_SITE());
  if (e == NULL)
    return adr__errorf(error, ENOMEM, "adr_share_event_export", BACKEND(dev), "out of memory");
  struct adr_share_handle h;
  memset(&h, 0, sizeof(h));
  int fd = -1;
  int st = adr__dispatch_event_share_export(dev, "adr_share_event_export", stream->handle,
                                            &e->handle, &h, &fd, error);
  if (st) {
    obj_discard(v, e);
    return st;
  }
  adr__share_fill_common(dev, &h, ADR_SHARE_OBJECT_EVENT);
  h.fd_count = fd >= 0 ? 1 : 0;
  *out = h;
  *out_fd = fd;
  return event_publish(v, dev, e, 0, out_event);
}

int adr_share_event_import(struct adr_device* device, const struct adr_share_handle* handle,
                           int fd, struct adr_event** out, struct adr_error* error) {
  if (device == NULL || handle == NULL || out == NULL)
    return adr__errorf(error, EINVAL, "adr_share_event_import", NULL, "%s is NULL",
                       device == NULL ? "device" : handle == NULL ? "handle" : "out");
  if (adr__shut_down()) return adr__shutdown_error(error, "adr_share_event_import", device);
  int st = adr__share_check_handle("adr_share_event_import", device, handle,
                                   ADR_SHARE_OBJECT_EVENT, fd, error);
  if (st) return st;
  bool v = adr__validate_begin();
  struct adr_event* e = obj_new(v, ADR__VOBJ_EVENT, sizeof(*e), ADR__CALL_SITE());
  if (e == NULL)
    return adr__errorf(error, ENOMEM, "adr_share_event_import", BACKEND(device), "out of memory");
  st = adr__dispatch_event_share_import(device, "adr_share_event_import", handle,
                                        handle->fd_count ? fd : -1, &e->handle, error);
  if (st) {
    obj_discard(v, e);
    return st;
  }
  /* Its producer is the other process: it cannot be re-recorded here. */
  return event_publish(v, device, e, ADR__EVENT_IMPORTED, out);
}
