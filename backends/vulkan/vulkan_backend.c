/* SPDX-License-Identifier: Apache-2.0
 *
 * The Vulkan backend's vtable and entry point. The slots live in
 * vulkan_instance.c (init, shutdown), vulkan_device.c (devices),
 * vulkan_memory.c, vulkan_copy.c and vulkan_sync.c.
 */
#include "vulkan_internal.h"

/* ---- lazy opening ---------------------------------------------------------------- */

/* The slots that need the VkDevice open it first (vulkan_device.c); the
 * check is one acquire load once it is open. The other slots take an
 * object (an allocation, a created stream or event) that only exists on an
 * opened device. */
static int lazy_alloc(struct adr_backend_device* dev, size_t size, size_t alignment,
                      struct adr_backend_stream* stream, void** out, struct adr_error* error) {
  int st = vkb_device_ensure(dev, error);
  return st != 0 ? st : vkb_alloc(dev, size, alignment, stream, out, error);
}

static int lazy_copy(struct adr_backend_device* dst_dev, void* dst,
                     struct adr_backend_device* src_dev, const void* src, size_t size,
                     struct adr_backend_stream* stream, struct adr_error* error) {
  int st = dst_dev != NULL ? vkb_device_ensure(dst_dev, error) : 0;
  if (st == 0 && src_dev != NULL) st = vkb_device_ensure(src_dev, error);
  return st != 0 ? st : vkb_copy(dst_dev, dst, src_dev, src, size, stream, error);
}

static int lazy_memset(struct adr_backend_device* dev, void* ptr, int value, size_t size,
                       struct adr_backend_stream* stream, struct adr_error* error) {
  int st = vkb_device_ensure(dev, error);
  return st != 0 ? st : vkb_memset(dev, ptr, value, size, stream, error);
}

static int lazy_copy_sync(struct adr_backend_device* dst_dev, void* dst,
                          struct adr_backend_device* src_dev, const void* src, size_t size,
                          struct adr_backend_stream* stream, struct adr_error* error) {
  int st = dst_dev != NULL ? vkb_device_ensure(dst_dev, error) : 0;
  if (st == 0 && src_dev != NULL) st = vkb_device_ensure(src_dev, error);
  return st != 0 ? st : vkb_copy_sync(dst_dev, dst, src_dev, src, size, stream, error);
}

static int lazy_memset_sync(struct adr_backend_device* dev, void* ptr, int value, size_t size,
                            struct adr_backend_stream* stream, struct adr_error* error) {
  int st = vkb_device_ensure(dev, error);
  return st != 0 ? st : vkb_memset_sync(dev, ptr, value, size, stream, error);
}

/* The default stream is handed out unopened: the core asks for it right
 * after device_open. */
static int lazy_stream_create(struct adr_backend_device* dev, uint32_t flags,
                              struct adr_backend_stream** out, struct adr_error* error) {
  int st = (flags & ADR_BACKEND_STREAM_DEFAULT) ? 0 : vkb_device_ensure(dev, error);
  return st != 0 ? st : vkb_stream_create(dev, flags, out, error);
}

/* Nothing was ever queued on a device that was never opened. */
static int lazy_stream_synchronize(struct adr_backend_device* dev,
                                   struct adr_backend_stream* stream, struct adr_error* error) {
  if (!vkb_device_opened(dev)) return 0;
  return vkb_stream_synchronize(dev, stream, error);
}

static int lazy_stream_import(struct adr_backend_device* dev, void* native_stream,
                              struct adr_backend_stream** out, struct adr_error* error) {
  int st = vkb_device_ensure(dev, error);
  return st != 0 ? st : vkb_stream_import(dev, native_stream, out, error);
}

static void* lazy_stream_native(struct adr_backend_device* dev, struct adr_backend_stream* stream) {
  if (vkb_device_ensure(dev, NULL) != 0) return NULL;
  return vkb_stream_native(dev, stream);
}

static int lazy_event_create(struct adr_backend_device* dev, struct adr_backend_event** out,
                             struct adr_error* error) {
  int st = vkb_device_ensure(dev, error);
  return st != 0 ? st : vkb_event_create(dev, out, error);
}

static int lazy_event_record(struct adr_backend_device* dev, struct adr_backend_event* event,
                             struct adr_backend_stream* stream, struct adr_error* error) {
  int st = vkb_device_ensure(dev, error);
  return st != 0 ? st : vkb_event_record(dev, event, stream, error);
}

static int lazy_event_wait(struct adr_backend_device* dev, struct adr_backend_event* event,
                           struct adr_backend_stream* stream, struct adr_error* error) {
  int st = vkb_device_ensure(dev, error);
  return st != 0 ? st : vkb_event_wait(dev, event, stream, error);
}

static int lazy_event_import(struct adr_backend_device* dev, void* sync_event,
                             struct adr_backend_event** out, struct adr_error* error) {
  int st = vkb_device_ensure(dev, error);
  return st != 0 ? st : vkb_event_import(dev, sync_event, out, error);
}

/* ---- the table ----------------------------------------------------------------- */

static const ArrowDeviceType vkb_types[] = {ARROW_DEVICE_VULKAN};

static const struct adr_backend vkb_backend = {
    .abi_major = ADR_BACKEND_ABI_MAJOR,
    .abi_minor = ADR_BACKEND_ABI_MINOR,
    .struct_size = sizeof(struct adr_backend),
    .name = VKB_NAME,
    .version = ADR_VERSION_STRING,
    .device_types = vkb_types,
    .device_type_count = 1,
    .init = vkb_init,
    .shutdown = vkb_shutdown,
    .device_count = vkb_device_count,
    .device_open = vkb_device_open,
    .device_close = vkb_device_close,
    .device_info = vkb_device_info,
    .alloc = lazy_alloc,
    .free = vkb_free,
    .copy = lazy_copy,
    .memset = lazy_memset,
    .copy_sync = lazy_copy_sync,
    .memset_sync = lazy_memset_sync,
    .stream_create = lazy_stream_create,
    .stream_destroy = vkb_stream_destroy,
    .stream_synchronize = lazy_stream_synchronize,
    .event_create = lazy_event_create,
    .event_destroy = vkb_event_destroy,
    .event_record = lazy_event_record,
    .event_wait = lazy_event_wait,
    .event_synchronize = vkb_event_synchronize,
    .event_query = vkb_event_query,
    .event_native = vkb_event_native,
    .event_import = lazy_event_import,
    .stream_import = lazy_stream_import,
    .stream_native = lazy_stream_native,
    .pointer_query = vkb_pointer_query,
    .device_native = vkb_device_native,
    .device_adopt = vkb_device_adopt,
    .device_properties = vkb_device_properties,
    .share_caps = vkb_share_caps,
    .share_alloc = vkb_share_alloc,
    .share_export = vkb_share_export,
    .share_import = vkb_share_import,
    .share_close = vkb_share_close,
};

ADR_BACKEND_DEFINE_QUERY(vkb_backend, adr_host_set)
