/* SPDX-License-Identifier: Apache-2.0
 *
 * Allocation front end: argument checks, the per-device table of live
 * allocations, then the backend's alloc/free slots. A caching layer and
 * pluggable handlers sit here too (core/memory/, when present).
 */
#include <errno.h>
#include <stdint.h>

#include "internal.h"

void adr__memory_device_init(struct adr_device* dev) {
  (void)dev;
}

void adr__memory_device_teardown(struct adr_device* dev) {
  size_t live = adr__alloc_table_count(dev->allocs);
  if (live != 0)
    adr__log(ADR_LOG_DEBUG, dev->name, "%zu allocation%s still live at exit", live,
             live == 1 ? "" : "s");
}

/* Resolve a stream argument: NULL means the device's default stream. */
static inline struct adr_backend_stream* stream_handle(struct adr_device* dev,
                                                       struct adr_stream* stream) {
  return stream ? stream->handle : dev->default_stream.handle;
}

static int check_stream(const char* op, struct adr_device* dev, struct adr_stream* stream,
                        struct adr_error* error) {
  if (stream != NULL && stream->device != dev)
    return adr__errorf(error, EINVAL, op, dev->backend->name,
                       "stream belongs to %s, not to %s", stream->device->name, dev->name);
  return 0;
}

static int sync_default(const char* op, struct adr_device* dev, struct adr_error* error) {
  return ADR__DISPATCH(dev, op, "stream_synchronize",
                       dev->vt->stream_synchronize(dev->handle, dev->default_stream.handle, error),
                       "%s", "default stream");
}

int adr_alloc(struct adr_device* device, size_t size, size_t alignment, struct adr_stream* stream,
              void** out, struct adr_error* error) {
  if (device == NULL || out == NULL)
    return adr__errorf(error, EINVAL, "adr_alloc", NULL, "%s is NULL", device ? "out" : "device");
  if (alignment == 0) alignment = ADR_MIN_ALIGNMENT;
  if ((alignment & (alignment - 1)) != 0)
    return adr__errorf(error, EINVAL, "adr_alloc", device->backend->name,
                       "alignment %zu is not a power of two", alignment);
  if (alignment < ADR_MIN_ALIGNMENT) alignment = ADR_MIN_ALIGNMENT;
  if (size > SIZE_MAX - alignment || size > (size_t)INT64_MAX)
    return adr__errorf(error, EOVERFLOW, "adr_alloc", device->backend->name,
                       "size %zu with alignment %zu overflows", size, alignment);
  int st = check_stream("adr_alloc", device, stream, error);
  if (st) return st;
  /* A zero-byte request still gets a unique address, so that it can be
   * freed like any other; the backend sees one byte. */
  size_t backend_size = size ? size : 1;
  void* ptr = NULL;
  st = ADR__DISPATCH(device, "adr_alloc", "alloc",
                     device->vt->alloc(device->handle, backend_size, alignment,
                                       stream_handle(device, stream), &ptr, error),
                     "size=%zu align=%zu", size, alignment);
  if (st) return st;
  if (adr__alloc_table_insert(device->allocs, ptr, size) != 0) {
    device->vt->free(device->handle, ptr, backend_size, stream_handle(device, stream), NULL);
    return adr__errorf(error, ENOMEM, "adr_alloc", device->backend->name,
                       "out of host memory for the allocation table");
  }
  if (stream == NULL && (st = sync_default("adr_alloc", device, error)) != 0) {
    size_t ignored;
    adr__alloc_table_remove(device->allocs, ptr, size, &ignored);
    device->vt->free(device->handle, ptr, backend_size, device->default_stream.handle, NULL);
    return st;
  }
  *out = ptr;
  return 0;
}

int adr_free(struct adr_device* device, void* ptr, size_t size, struct adr_stream* stream,
             struct adr_error* error) {
  if (device == NULL)
    return adr__errorf(error, EINVAL, "adr_free", NULL, "device is NULL");
  if (ptr == NULL)
    return adr__errorf(error, EINVAL, "adr_free", device->backend->name, "ptr is NULL");
  int st = check_stream("adr_free", device, stream, error);
  if (st) return st;
  size_t recorded = 0;
  st = adr__alloc_table_remove(device->allocs, ptr, size, &recorded);
  if (st == ENOENT)
    return adr__errorf(error, EINVAL, "adr_free", device->backend->name,
                       "%p was not allocated on %s (or was already freed)", ptr, device->name);
  if (st == ERANGE)
    return adr__errorf(error, EINVAL, "adr_free", device->backend->name,
                       "%p was allocated with size %zu, freed with size %zu", ptr, recorded,
                       size);
  st = ADR__DISPATCH(device, "adr_free", "free",
                     device->vt->free(device->handle, ptr, size ? size : 1,
                                      stream_handle(device, stream), error),
                     "ptr=%p size=%zu", ptr, size);
  if (st) return st;
  if (stream == NULL) return sync_default("adr_free", device, error);
  return 0;
}

int adr_memset(struct adr_device* device, void* ptr, int value, size_t size,
               struct adr_stream* stream, struct adr_error* error) {
  if (device == NULL)
    return adr__errorf(error, EINVAL, "adr_memset", NULL, "device is NULL");
  if (size == 0) return 0;
  if (ptr == NULL)
    return adr__errorf(error, EINVAL, "adr_memset", device->backend->name, "ptr is NULL");
  int st = check_stream("adr_memset", device, stream, error);
  if (st) return st;
  st = ADR__DISPATCH(device, "adr_memset", "memset",
                     device->vt->memset(device->handle, ptr, value, size,
                                        stream_handle(device, stream), error),
                     "ptr=%p value=%d size=%zu", ptr, value, size);
  if (st == 0 && stream == NULL) st = sync_default("adr_memset", device, error);
  return st;
}

int adr_host_register(struct adr_device* device, void* ptr, size_t size,
                      struct adr_error* error) {
  if (device == NULL || ptr == NULL || size == 0)
    return adr__errorf(error, EINVAL, "adr_host_register", NULL, "%s",
                       device == NULL ? "device is NULL" : ptr == NULL ? "ptr is NULL" : "size is 0");
  if (!ADR__HAS_SLOT(device->vt, host_register))
    return adr__errorf(error, ENOTSUP, "adr_host_register", device->backend->name,
                       "the backend cannot page-lock host memory");
  return device->vt->host_register(device->handle, ptr, size, error);
}

int adr_host_unregister(struct adr_device* device, void* ptr, struct adr_error* error) {
  if (device == NULL || ptr == NULL)
    return adr__errorf(error, EINVAL, "adr_host_unregister", NULL, "%s is NULL",
                       device ? "ptr" : "device");
  if (!ADR__HAS_SLOT(device->vt, host_unregister))
    return adr__errorf(error, ENOTSUP, "adr_host_unregister", device->backend->name,
                       "the backend cannot page-lock host memory");
  return device->vt->host_unregister(device->handle, ptr, error);
}
