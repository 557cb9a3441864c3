/* SPDX-License-Identifier: Apache-2.0
 *
 * Allocation front end: argument checks, then the device's allocation
 * handler (the caching pool by default, core/memory/), recording each
 * allocation with its handler in the per-device table so adr_free can refuse
 * unknown pointers and wrong sizes and return the memory to the handler
 * that made it. Also memset (a NULL device: host memory, host.c) and host
 * registration.
 *
 * Hot path: one atomic load of the handler, one sharded-table insert or
 * remove (a spin lock; the table also keeps the allocation totals and the
 * current and peak bytes and count), the pool's per-thread cache; no lock
 * or counter shared by all threads. Devices whose
 * copies are range-checked (not host-accessible, or the validation layer
 * on), and devices an interop call asked about (interop.c), also keep the
 * interval index once its first look-up built it (sharded like the table:
 * a spin lock per shard); the validation layer's hooks are marked
 * "validation".
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "dispatch.h"
#include "host.h"
#include "memory/memory_internal.h"
#include "validate.h"

static int check_stream(const char* op, struct adr_device* dev, struct adr_stream* stream,
                        struct adr_error* error) {
  if (stream != NULL && stream->device != dev)
    return adr__errorf(error, EINVAL, op, dev->backend->name, "stream belongs to %s, not to %s",
                       stream->device->name, dev->name);
  return 0;
}

int adr__alloc_common(const char* op, struct adr_device* device,
                        const struct adr_allocator* handler, size_t size, size_t alignment,
                        struct adr_stream* stream, const void* site, void** out,
                        struct adr_error* error) {
  bool validating = adr__validate_begin();
  if (device == NULL || out == NULL)
    return adr__errorf(error, EINVAL, op, NULL, "%s is NULL", device ? "out" : "device");
  if (adr__shut_down()) return adr__shutdown_error(error, op, device);
  if (alignment == 0) alignment = ADR_MIN_ALIGNMENT;
  if ((alignment & (alignment - 1)) != 0)
    return adr__errorf(error, EINVAL, op, device->backend->name,
                       "alignment %zu is not a power of two", alignment);
  if (alignment < ADR_MIN_ALIGNMENT) alignment = ADR_MIN_ALIGNMENT;
  /* No object may exceed PTRDIFF_MAX bytes (pointer differences must be
   * representable), so larger requests are refused here for every backend. */
  if (alignment > (size_t)PTRDIFF_MAX || size > (size_t)PTRDIFF_MAX - alignment)
    return adr__errorf(error, EOVERFLOW, op, device->backend->name,
                       "size %zu with alignment %zu exceeds PTRDIFF_MAX", size, alignment);
  /* validation first: a destroyed stream's fields are not to be trusted. */
  int st;
  if (validating && (st = adr__validate_stream(op, stream, error)) != 0) return st;
  if ((st = check_stream(op, device, stream, error)) != 0) return st;
  struct adr__device_memory* m = device->memory;
  if (m == NULL && atomic_load_explicit(&device->released, memory_order_relaxed))
    return adr__errorf(error, ENODEV, op, device->backend->name,
                       "ENODEV: %s was released (adr_device_release)", device->name);
  if (m == NULL)
    return adr__errorf(error, ENOMEM, op, device->backend->name,
                       "ENOMEM: no memory state for %s (out of host memory at creation)",
                       device->name);
  if (m->status != 0) {
    if (error != NULL) *error = m->error;
    return m->status;
  }
  if (handler == NULL) handler = atomic_load_explicit(&m->handler, memory_order_acquire);
  /* A zero-byte request still gets a unique address, so that it can be
   * freed like any other; the handler sees one byte. */
  size_t handler_size = size ? size : 1;
  void* ptr = NULL;
  void* cookie = NULL;
  st = adr__memory_alloc(device, handler, handler_size, alignment, stream, &ptr, &cookie, error);
  if (st == ENOMEM && validating) {
    /* validation: the quarantine may hold what is missing. */
    adr__validate_flush(device);
    st = adr__memory_alloc(device, handler, handler_size, alignment, stream, &ptr, &cookie, error);
  }
  if (st) {
    /* The pool or an application handler may write "[pool] ..." or no
     * prefix at all: the message names the public operation. A handler of
     * the core's own that named it already (share.c) is left alone. */
    if (error == NULL || strncmp(error->message, "[adr_share_alloc]", 17) != 0)
      adr__error_context(error, st, op, device->backend->name);
    return st;
  }
  /* The interval index too, under the same shard lock, once it is live
   * (a look-up or an interop call built it: it then holds this allocation
   * either from the build or from here) or for the validation layer. */
  int rst =
      adr__alloc_table_insert_indexed(device->allocs, ptr, size, handler, cookie, site, validating);
  if (rst != 0) {
    adr__memory_free(device, handler, ptr, handler_size, stream, cookie, NULL);
    return adr__errorf(error, ENOMEM, op, device->backend->name,
                       "out of host memory for the allocation table");
  }
  if (validating) adr__validate_note_device(device);
  *out = ptr;
  return 0;
}

int adr_alloc(struct adr_device* device, size_t size, size_t alignment, struct adr_stream* stream,
              void** out, struct adr_error* error) {
  return adr__alloc_common("adr_alloc", device, NULL, size, alignment, stream, ADR__CALL_SITE(), out,
                      error);
}

int adr_alloc_with(struct adr_device* device, const struct adr_allocator* handler, size_t size,
                   size_t alignment, struct adr_stream* stream, void** out,
                   struct adr_error* error) {
  int st = adr__allocator_check("adr_alloc_with", handler, error);
  if (st) return st;
  return adr__alloc_common("adr_alloc_with", device, handler, size, alignment, stream, ADR__CALL_SITE(),
                      out, error);
}

/* A NULL stream needs no host synchronisation here: the caller promises that
 * no queued work still uses the memory (docs/memory.md), and each handler
 * makes the memory reusable accordingly. */
int adr_free(struct adr_device* device, void* ptr, size_t size, struct adr_stream* stream,
             struct adr_error* error) {
  if (device == NULL) return adr__errorf(error, EINVAL, "adr_free", NULL, "device is NULL");
  if (adr__shut_down()) return adr__shutdown_error(error, "adr_free", device);
  if (ptr == NULL)
    return adr__errorf(error, EINVAL, "adr_free", device->backend->name, "ptr is NULL");
  bool validating = ADR__VALIDATING();
  int st;
  if (validating && (st = adr__validate_stream("adr_free", stream, error)) != 0) return st;
  if ((st = check_stream("adr_free", device, stream, error)) != 0) return st;
  size_t recorded = 0;
  const void* handler = NULL;
  void* cookie = NULL;
  struct adr__range range = {0, 0, NULL};
  st = adr__alloc_table_remove_indexed(device->allocs, ptr, size, &recorded, &handler, &cookie,
                                       validating, &range.site, NULL);
  if (st == ENOENT && validating) {
    int vst = adr__validate_free_unknown(device, ptr, error);
    if (vst) return vst;
  }
  if (st == ENOENT)
    return adr__errorf(error, EINVAL, "adr_free", device->backend->name,
                       "%p was not allocated on %s (or was already freed)", ptr, device->name);
  if (st == ERANGE)
    return adr__errorf(error, EINVAL, "adr_free", device->backend->name,
                       "%p was allocated with size %zu, freed with size %zu", ptr, recorded, size);
  /* validation: the handler sees the free only when it leaves the
   * quarantine, so the address is not handed out again before that. */
  if (validating && adr__validate_free_defer(device, handler, ptr, size, cookie, stream, range.site,
                                             ADR__CALL_SITE()))
    return 0;
  st = adr__memory_free(device, handler, ptr, size ? size : 1, stream, cookie, error);
  if (st) {
    adr__error_context(error, st, "adr_free", device->backend->name);
    /* Nothing was freed: keep the allocation known (in the interval index
     * too, if it is live now, whether or not it was when the free began). */
    (void)adr__alloc_table_insert_live(device->allocs, ptr, size, handler, cookie, range.site,
                                       validating);
    return st;
  }
  return 0;
}

int adr_memset(struct adr_device* device, void* ptr, int value, size_t size,
               struct adr_stream* stream, struct adr_error* error) {
  if (size == 0) return 0;
  if (ptr == NULL)
    return adr__errorf(error, EINVAL, "adr_memset", device ? device->backend->name : NULL,
                       "ptr is NULL%s", device ? "" : " (host memory: NULL device)");
  if (device == NULL) return adr__host_memset(ptr, value, size, stream, error);
  int st;
  if (ADR__VALIDATING() && (st = adr__validate_stream("adr_memset", stream, error)) != 0) return st;
  if ((st = check_stream("adr_memset", device, stream, error)) != 0) return st;
  if ((st = adr__range_check("adr_memset", device, "memset", ptr, size, error)) != 0) return st;
  if (stream == NULL) /* blocking: one call (memset_sync, dispatch.h) */
    return adr__dispatch_memset_sync(device, "adr_memset", ptr, value, size,
                                     device->default_stream.handle, error);
  return adr__dispatch_memset(device, "adr_memset", ptr, value, size, stream->handle, error);
}

int adr_host_register(struct adr_device* device, void* ptr, size_t size, struct adr_error* error) {
  if (device == NULL || ptr == NULL || size == 0)
    return adr__errorf(error, EINVAL, "adr_host_register", NULL, "%s",
                       device == NULL ? "device is NULL"
                       : ptr == NULL  ? "ptr is NULL"
                                      : "size is 0");
  return adr__dispatch_host_register(device, "adr_host_register", ptr, size, error);
}

int adr_host_unregister(struct adr_device* device, void* ptr, struct adr_error* error) {
  if (device == NULL || ptr == NULL)
    return adr__errorf(error, EINVAL, "adr_host_unregister", NULL, "%s is NULL",
                       device ? "ptr" : "device");
  return adr__dispatch_host_unregister(device, "adr_host_unregister", ptr, error);
}
