/* SPDX-License-Identifier: Apache-2.0
 *
 * HIP backend: the plugin table and its one exported symbol.
 *
 * Thread safety: init/shutdown are serialised by the core; every other
 * slot may run concurrently. Device objects are immutable after open except
 * their staging-buffer list and overlap scratch, each behind its own mutex;
 * the backend's allocation map has its own lock; the HIP runtime itself is
 * thread-safe.
 */
#include <stddef.h>

#include "host.h"
#include "hip_internal.h"

/* Lazy opening (hip_device.c): the slots that need an open device open it
 * first; the check is one acquire load once it is open. The other slots
 * take an object (an allocation, a created stream or event, a registered
 * range) that only exists on an opened device. */
static int lazy_alloc(struct adr_backend_device* dev, size_t size, size_t alignment,
                      struct adr_backend_stream* stream, void** out, struct adr_error* error) {
  int st = hip_device_ensure(dev, error);
  return st != 0 ? st : hip_alloc(dev, size, alignment, stream, out, error);
}

static int lazy_copy(struct adr_backend_device* dst_dev, void* dst,
                     struct adr_backend_device* src_dev, const void* src, size_t size,
                     struct adr_backend_stream* stream, struct adr_error* error) {
  int st = dst_dev != NULL ? hip_device_ensure(dst_dev, error) : 0;
  if (st == 0 && src_dev != NULL) st = hip_device_ensure(src_dev, error);
  return st != 0 ? st : hip_copy(dst_dev, dst, src_dev, src, size, stream, error);
}

static int lazy_memset(struct adr_backend_device* dev, void* ptr, int value, size_t size,
                       struct adr_backend_stream* stream, struct adr_error* error) {
  int st = hip_device_ensure(dev, error);
  return st != 0 ? st : hip_memset(dev, ptr, value, size, stream, error);
}

/* The default stream is handed out unopened: the core asks for it right
 * after device_open. */
static int lazy_stream_create(struct adr_backend_device* dev, uint32_t flags,
                              struct adr_backend_stream** out, struct adr_error* error) {
  int st = (flags & ADR_BACKEND_STREAM_DEFAULT) ? 0 : hip_device_ensure(dev, error);
  return st != 0 ? st : hip_stream_create(dev, flags, out, error);
}

/* Nothing was ever queued on a device that was never opened. */
static int lazy_stream_synchronize(struct adr_backend_device* dev,
                                   struct adr_backend_stream* stream, struct adr_error* error) {
  if (!hip_device_opened(dev)) return 0;
  return hip_stream_synchronize(dev, stream, error);
}

static int lazy_stream_import(struct adr_backend_device* dev, void* native_stream,
                              struct adr_backend_stream** out, struct adr_error* error) {
  int st = hip_device_ensure(dev, error);
  return st != 0 ? st : hip_stream_import(dev, native_stream, out, error);
}

static void* lazy_stream_native(struct adr_backend_device* dev, struct adr_backend_stream* stream) {
  if (hip_device_ensure(dev, NULL) != 0) return NULL;
  return hip_stream_native(dev, stream);
}

static int lazy_event_create(struct adr_backend_device* dev, struct adr_backend_event** out,
                             struct adr_error* error) {
  int st = hip_device_ensure(dev, error);
  return st != 0 ? st : hip_event_create(dev, out, error);
}

static int lazy_event_record(struct adr_backend_device* dev, struct adr_backend_event* event,
                             struct adr_backend_stream* stream, struct adr_error* error) {
  int st = hip_device_ensure(dev, error);
  return st != 0 ? st : hip_event_record(dev, event, stream, error);
}

static int lazy_event_wait(struct adr_backend_device* dev, struct adr_backend_event* event,
                           struct adr_backend_stream* stream, struct adr_error* error) {
  int st = hip_device_ensure(dev, error);
  return st != 0 ? st : hip_event_wait(dev, event, stream, error);
}

static int lazy_event_import(struct adr_backend_device* dev, void* sync_event,
                             struct adr_backend_event** out, struct adr_error* error) {
  int st = hip_device_ensure(dev, error);
  return st != 0 ? st : hip_event_import(dev, sync_event, out, error);
}

static int lazy_host_register(struct adr_backend_device* dev, void* ptr, size_t size,
                              struct adr_error* error) {
  int st = hip_device_ensure(dev, error);
  return st != 0 ? st : hip_host_register(dev, ptr, size, error);
}

static const ArrowDeviceType k_types[] = {ARROW_DEVICE_ROCM, ARROW_DEVICE_ROCM_HOST};

static const struct adr_backend k_hip_backend = {
    .abi_major = ADR_BACKEND_ABI_MAJOR,
    .abi_minor = ADR_BACKEND_ABI_MINOR,
    .struct_size = sizeof(struct adr_backend),
    .flags = 0,
    .name = HIP_BACKEND_NAME,
    .version = "0.1.0 (HIP runtime API, 5.x and 6.x)",
    .device_types = k_types,
    .device_type_count = sizeof(k_types) / sizeof(k_types[0]),
    .init = hip_init,
    .shutdown = hip_shutdown,
    .device_count = hip_device_count,
    .device_open = hip_device_open,
    .device_close = hip_device_close,
    .device_info = hip_device_info,
    .alloc = lazy_alloc,
    .free = hip_free,
    .copy = lazy_copy,
    .memset = lazy_memset,
    .stream_create = lazy_stream_create,
    .stream_destroy = hip_stream_destroy,
    .stream_synchronize = lazy_stream_synchronize,
    .event_create = lazy_event_create,
    .event_destroy = hip_event_destroy,
    .event_record = lazy_event_record,
    .event_wait = lazy_event_wait,
    .event_synchronize = hip_event_synchronize,
    .event_query = hip_event_query,
    .event_native = hip_event_native,
    .event_import = lazy_event_import,
    .stream_import = lazy_stream_import,
    .stream_native = lazy_stream_native,
    .pointer_query = hip_pointer_query,
    .device_native = hip_device_native,
    .device_adopt = hip_device_adopt,
    .device_properties = hip_device_properties,
    .host_register = lazy_host_register,
    .host_unregister = hip_host_unregister,
    .share_caps = hip_share_caps,
    .share_alloc = hip_share_alloc,
    .share_export = hip_share_export,
    .share_import = hip_share_import,
    .share_close = hip_share_close,
    .event_share_export = hip_event_share_export,
    .event_share_import = hip_event_share_import,
};

ADR_BACKEND_DEFINE_QUERY(k_hip_backend, adr_host_set)
