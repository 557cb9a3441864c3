/* SPDX-License-Identifier: Apache-2.0
 *
 * Native buffer interop: adr_opencl_buffer() and adr_vulkan_buffer(), and
 * the same look-ups reached through adr_device_native() with the backends'
 * in/out kinds.
 *
 * The two halves of the answer come from two places. The allocation as the
 * application made it (adr_alloc's pointer and size) is known only to the
 * core: the caching pool, an adaptor or an application handler may have
 * carved it from a larger backend allocation, which is all the backend
 * sees. The native objects (cl_mem, VkBuffer, VkDeviceMemory and offsets)
 * are known only to the backend, which the core asks through the existing
 * device_native slot with the backend's in/out kind (no new ABI slot). So
 * the core finds the user allocation in its interval index first (ENOENT
 * for anything outside one, one past the end included), then asks the
 * backend, then writes base/size/offset itself.
 *
 * The interval index is kept by alloc.c for range-checked devices (not
 * host-accessible, or the validation layer on). On other devices (OpenCL
 * fine-grained SVM) it is started by the first look-up: ranges_kept goes to
 * 1 (alloc.c maintains the index from then on), the allocations made
 * before are added from the hash table (alloc_table.c: build), then it goes
 * to 2. Allocation and the build both take the shard lock, so an
 * allocation the build misses sees the index live (the allocation table
 * reads that under the shard lock: insert_indexed) and adds itself; the
 * index ignores a start added twice. A failed build (ENOMEM) leaves 1 and
 * is redone by the next look-up. build_lock serialises builds only.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "adr/vulkan.h"
#include "internal.h"
#include "dispatch.h"
#include "validate.h"

#if defined(__has_include)
#if __has_include(<CL/cl.h>)
#include "adr/opencl.h"
#define ADR__HAVE_OPENCL_H 1
#endif
#endif

/* The fields the core writes, at the start of both structs. */
struct adr__buffer_head {
  uint32_t struct_size;
  uint32_t mode;
  const void* address;
  void* base;
  size_t size;
  size_t offset;
};

/* ADR_OPENCL_NATIVE_BUFFER and offsetof(struct adr_opencl_buffer,
 * reserved), without <CL/cl.h> (checked against it where it is there). */
#define ADR__OPENCL_NATIVE_BUFFER 0x4f44
#define ADR__OPENCL_BUFFER_MIN_SIZE 56u

#ifdef ADR__HAVE_OPENCL_H
_Static_assert(ADR__OPENCL_NATIVE_BUFFER == ADR_OPENCL_NATIVE_BUFFER, "OpenCL buffer kind");
_Static_assert(ADR__OPENCL_BUFFER_MIN_SIZE == offsetof(struct adr_opencl_buffer, reserved),
               "struct adr_opencl_buffer layout");
_Static_assert(offsetof(struct adr_opencl_buffer, offset) ==
                   offsetof(struct adr__buffer_head, offset),
               "struct adr_opencl_buffer head");
#endif
_Static_assert(offsetof(struct adr_vulkan_buffer, offset) ==
                   offsetof(struct adr__buffer_head, offset),
               "struct adr_vulkan_buffer head");

static pthread_mutex_t build_lock = PTHREAD_MUTEX_INITIALIZER;

static int ranges_ensure(const char* op, struct adr_device* dev, struct adr_error* error) {
  if (adr__range_checked(dev) || atomic_load_explicit(&dev->ranges_kept, memory_order_acquire) == 2)
    return 0;
  int st = 0;
  pthread_mutex_lock(&build_lock);
  if (atomic_load_explicit(&dev->ranges_kept, memory_order_relaxed) != 2) {
    atomic_store_explicit(&dev->ranges_kept, 1, memory_order_seq_cst);
    st = adr__alloc_table_ranges_build(dev->allocs);
    if (st == 0) atomic_store_explicit(&dev->ranges_kept, 2, memory_order_release);
  }
  pthread_mutex_unlock(&build_lock);
  if (st != 0)
    return adr__errorf(error, st, op, dev->backend->name,
                       "out of host memory for the index of %s's allocations", dev->name);
  return 0;
}

static int native_buffer(const char* op, struct adr_device* dev, ArrowDeviceType type,
                         const char* type_text, int kind, const void* ptr,
                         struct adr__buffer_head* out, uint32_t min_size, const char* struct_name,
                         struct adr_error* error) {
  if (dev == NULL || out == NULL)
    return adr__errorf(error, EINVAL, op, NULL, "%s is NULL", dev ? "out" : "device");
  const char* bname = dev->backend->name;
  if (adr__shut_down()) return adr__shutdown_error(error, op, dev);
  if (dev->type != type)
    return adr__errorf(error, EINVAL, op, bname, "%s is not %s device", dev->name, type_text);
  if (out->struct_size < min_size)
    return adr__errorf(error, EINVAL, op, bname,
                       "out->struct_size %u is too small (set it to sizeof(struct %s))",
                       out->struct_size, struct_name);
  if (ptr == NULL) return adr__errorf(error, EINVAL, op, bname, "ptr is NULL");
  int st = ranges_ensure(op, dev, error);
  if (st) return st;
  struct adr__range r;
  if (!adr__alloc_table_ranges_find(dev->allocs, ptr, &r))
    return adr__errorf(error, ENOENT, op, bname,
                       "%p is not inside an allocation of %s (no live one holds it: freed, "
                       "one past the end, or another device's memory)",
                       ptr, dev->name);
  out->address = ptr;
  void* inout = out;
  st = adr__dispatch_device_native(dev, op, kind, &inout, error);
  if (st) return st;
  out->base = (void*)r.start;
  out->size = r.size;
  out->offset = (uintptr_t)ptr - r.start;
  return 0;
}

int adr_opencl_buffer(struct adr_device* device, const void* ptr, struct adr_opencl_buffer* out,
                      struct adr_error* error) {
  return native_buffer("adr_opencl_buffer", device, ARROW_DEVICE_OPENCL, "an OpenCL",
                       ADR__OPENCL_NATIVE_BUFFER, ptr, (struct adr__buffer_head*)(void*)out,
                       ADR__OPENCL_BUFFER_MIN_SIZE, "adr_opencl_buffer", error);
}

int adr_vulkan_buffer(struct adr_device* device, const void* ptr, struct adr_vulkan_buffer* out,
                      struct adr_error* error) {
  return native_buffer("adr_vulkan_buffer", device, ARROW_DEVICE_VULKAN, "a Vulkan",
                       ADR_VULKAN_NATIVE_BUFFER, ptr, (struct adr__buffer_head*)(void*)out,
                       (uint32_t)offsetof(struct adr_vulkan_buffer, reserved), "adr_vulkan_buffer",
                       error);
}

int adr_vulkan_event_import(struct adr_device* device, void* sync_event, uint32_t src_stage_mask,
                            struct adr_event** out, struct adr_error* error) {
  static const char op[] = "adr_vulkan_event_import";
  if (device == NULL || sync_event == NULL || out == NULL)
    return adr__errorf(error, EINVAL, op, NULL, "%s is NULL",
                       device == NULL       ? "device"
                       : sync_event == NULL ? "sync_event"
                                            : "out");
  const char* bname = device->backend->name;
  if (device->type != ARROW_DEVICE_VULKAN)
    return adr__errorf(error, EINVAL, op, bname, "%s is not a Vulkan device", device->name);
  if (src_stage_mask == 0)
    return adr__errorf(error, EINVAL, op, bname,
                       "src_stage_mask is 0 (VK_PIPELINE_STAGE_HOST_BIT for vkSetEvent, else "
                       "the stageMask of the producer's vkCmdSetEvent)");
  struct adr_event* e = NULL;
  struct adr_error local;
  int st = adr_event_import(device, sync_event, &e, error ? &local : NULL);
  if (st) {
    /* adr_event_import's message names adr_event_import: say ours. */
    if (error) {
      const char* rest = strstr(local.message, "] ");
      adr__errorf(error, st, op, bname, "%s", rest ? rest + 2 : local.message);
    }
    return st;
  }
  struct adr_vulkan_event_source q = {
      .struct_size = sizeof(q), .src_stage_mask = src_stage_mask, .event = e->handle};
  void* inout = &q;
  st = adr__dispatch_device_native(device, op, ADR_VULKAN_NATIVE_EVENT_SOURCE, &inout, error);
  if (st) {
    adr_event_destroy(e, NULL);
    return st;
  }
  *out = e;
  return 0;
}

int adr_vulkan_queue_lock(struct adr_device* device, const struct adr_vulkan_queue_lock** out,
                          struct adr_error* error) {
  static const char op[] = "adr_vulkan_queue_lock";
  if (device == NULL || out == NULL)
    return adr__errorf(error, EINVAL, op, NULL, "%s is NULL", device ? "out" : "device");
  if (device->type != ARROW_DEVICE_VULKAN)
    return adr__errorf(error, EINVAL, op, device->backend->name, "%s is not a Vulkan device",
                       device->name);
  void* h = NULL;
  int st = adr__dispatch_device_native(device, op, ADR_VULKAN_NATIVE_QUEUE_LOCK, &h, error);
  if (st) return st;
  *out = h;
  return 0;
}

int adr_vulkan_stream_import(struct adr_device* device, void* queue, uint32_t queue_family_index,
                             struct adr_stream** out, struct adr_error* error) {
  static const char op[] = "adr_vulkan_stream_import";
  if (device == NULL || queue == NULL || out == NULL)
    return adr__errorf(error, EINVAL, op, NULL, "%s is NULL",
                       device == NULL  ? "device"
                       : queue == NULL ? "queue"
                                       : "out");
  const char* bname = device->backend->name;
  if (device->type != ARROW_DEVICE_VULKAN)
    return adr__errorf(error, EINVAL, op, bname, "%s is not a Vulkan device", device->name);
  void *q = NULL, *family = NULL;
  int st = adr__dispatch_device_native(device, op, ADR_NATIVE_QUEUE, &q, error);
  if (st == 0)
    st = adr__dispatch_device_native(device, op, ADR_NATIVE_QUEUE_FAMILY, &family, error);
  if (st) return st;
  if (queue != q)
    return adr__errorf(error, ENOTSUP, op, bname,
                       "VkQueue %p is not the queue of %s (%p): adr submits every stream of a "
                       "device to its one queue, under one timeline; adopt a device over that "
                       "queue (adr_device_adopt) to use it",
                       queue, device->name, q);
  if ((uintptr_t)family != queue_family_index)
    return adr__errorf(error, EINVAL, op, bname,
                       "queue family %u given, but %s's queue is of family %u", queue_family_index,
                       device->name, (unsigned)(uintptr_t)family);
  return adr_stream_import(device, queue, out, error);
}

bool adr__device_native_intercepted(const struct adr_device* dev, int kind) {
  return (kind == ADR__OPENCL_NATIVE_BUFFER && dev->type == ARROW_DEVICE_OPENCL) ||
         (dev->type == ARROW_DEVICE_VULKAN &&
          (kind == ADR_VULKAN_NATIVE_BUFFER || kind == ADR_VULKAN_NATIVE_EVENT_SOURCE));
}

int adr__device_native_interop(struct adr_device* dev, int kind, void** out,
                               struct adr_error* error) {
  if (kind == ADR_VULKAN_NATIVE_EVENT_SOURCE)
    return adr__errorf(error, EINVAL, "adr_device_native", dev->backend->name,
                       "ADR_VULKAN_NATIVE_EVENT_SOURCE is libadr's own channel to the backend "
                       "(call adr_vulkan_event_import)");
  struct adr__buffer_head* q = *out;
  if (q == NULL)
    return adr__errorf(
        error, EINVAL, "adr_device_native", dev->backend->name,
        "kind %#x needs *out to point to a struct %s", (unsigned)kind,
        kind == ADR_VULKAN_NATIVE_BUFFER ? "adr_vulkan_buffer" : "adr_opencl_buffer");
  if (kind == ADR_VULKAN_NATIVE_BUFFER)
    return native_buffer("adr_device_native", dev, ARROW_DEVICE_VULKAN, "a Vulkan", kind,
                         q->address, q, (uint32_t)offsetof(struct adr_vulkan_buffer, reserved),
                         "adr_vulkan_buffer", error);
  return native_buffer("adr_device_native", dev, ARROW_DEVICE_OPENCL, "an OpenCL", kind, q->address,
                       q, ADR__OPENCL_BUFFER_MIN_SIZE, "adr_opencl_buffer", error);
}
