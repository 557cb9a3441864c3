/* SPDX-License-Identifier: Apache-2.0
 *
 * adr Vulkan interop: what the Vulkan backend (libadr_vulkan.so, serving
 * ARROW_DEVICE_VULKAN) hands out and accepts.
 *
 * This header does not include the Vulkan headers. Dispatchable handles
 * (VkInstance, VkPhysicalDevice, VkDevice, VkQueue) are pointers, so they
 * travel here as `void *`; assign them to and from the Vulkan types
 * directly. backends/vulkan/README.md has the full story.
 *
 * Addresses. adr_alloc on a Vulkan device returns the buffer device address
 * (vkGetBufferDeviceAddress) of the allocation, cast to a pointer. It is
 * valid in shaders of the device's VkDevice (GL_EXT_buffer_reference,
 * PhysicalStorageBuffer64), pointer arithmetic on it is valid within the
 * allocation, and it is NOT a host pointer: never dereference it on the host.
 *
 * Events. ArrowDeviceArray.sync_event / adr_event_native() is a `VkEvent *`
 * owned by the adr event. The VkEvent belongs to the adr device's VkDevice
 * (ADR_NATIVE_CONTEXT). adr sets it with vkCmdSetEvent(stageMask =
 * VK_PIPELINE_STAGE_ALL_COMMANDS_BIT) on the device's VkQueue
 * (ADR_NATIVE_QUEUE) after the recorded work, behind a barrier that makes
 * the work's writes available to all stages and to the host. A consumer
 * either waits in a command buffer submitted to that same VkQueue after
 * the export, with vkCmdWaitEvents(srcStageMask =
 * VK_PIPELINE_STAGE_ALL_COMMANDS_BIT), or polls vkGetEventStatus() ==
 * VK_EVENT_SET on the host. It must not reset, set or destroy the event.
 * A never-recorded event is in the set state (complete).
 *
 * Importing an application's VkEvent: adr_event_import assumes it is set
 * from the host (vkSetEvent); one set by device work (vkCmdSetEvent in a
 * command buffer submitted to adr's VkQueue) is imported with
 * adr_vulkan_event_import, which takes the producer's stage mask.
 */
#ifndef ADR_VULKAN_H
#define ADR_VULKAN_H

#include <stddef.h>
#include <stdint.h>

#include "adr/adr.h"

#ifdef __cplusplus
extern "C" {
#endif

struct adr_backend_event; /* adr/backend.h */

/* Native kinds for adr_device_native() on a Vulkan device, in addition to
 * the generic ones, which are:
 *   ADR_NATIVE_PLATFORM     VkInstance
 *   ADR_NATIVE_DEVICE       VkPhysicalDevice
 *   ADR_NATIVE_CONTEXT      VkDevice
 *   ADR_NATIVE_QUEUE        VkQueue (adr submits to it under its own lock;
 *                           an application that submits to it too takes
 *                           that lock: ADR_VULKAN_NATIVE_QUEUE_LOCK)
 *   ADR_NATIVE_QUEUE_FAMILY queue family index, as (void *)(uintptr_t)
 * All handles stay owned by adr (or by the application, for an adopted
 * device). */
enum adr_vulkan_native_kind {
  /* PFN_vkGetInstanceProcAddr of the libvulkan.so.1 adr loaded (or the one
   * given at adoption), so an application can call Vulkan without linking
   * the loader. Cast the void * to PFN_vkGetInstanceProcAddr. */
  ADR_VULKAN_NATIVE_GET_INSTANCE_PROC_ADDR = 0x5601,
  /* The VkSemaphore (timeline) that counts the device's submissions. An
   * adr event recorded on the device completes when this semaphore
   * reaches the event's value; adr only ever signals it. */
  ADR_VULKAN_NATIVE_TIMELINE_SEMAPHORE = 0x5602,
  /* const struct adr_vulkan_queue_lock *: how an application serialises
   * its own use of the device's VkQueue with adr's (below). */
  ADR_VULKAN_NATIVE_QUEUE_LOCK = 0x5603,
  /* In/out, like ADR_OPENCL_NATIVE_BUFFER: *out points to a struct
   * adr_vulkan_buffer with struct_size and address set, filled as
   * adr_vulkan_buffer() fills it. Prefer adr_vulkan_buffer(). (Also the
   * channel through which libadr asks the backend.) */
  ADR_VULKAN_NATIVE_BUFFER = 0x5604,
  /* libadr's own channel to the backend for adr_vulkan_event_import (a
   * struct adr_vulkan_event_source): adr_device_native refuses it from
   * applications with EINVAL. */
  ADR_VULKAN_NATIVE_EVENT_SOURCE = 0x5605,
};

/* Submitting to adr's VkQueue (ADR_NATIVE_QUEUE). Vulkan requires the
 * queue's users to synchronise externally; adr submits under an internal
 * lock, which this struct hands out:
 *
 *   const struct adr_vulkan_queue_lock* ql;
 *   adr_device_native(dev, ADR_VULKAN_NATIVE_QUEUE_LOCK, (void**)&ql, &err);
 *   ql->lock(ql->ctx);
 *   vkQueueSubmit(queue, ...);      // no adr call between lock and unlock
 *   ql->unlock(ql->ctx);
 *
 * A single-threaded application that never submits while an adr call runs
 * needs no lock. Either way, queue order holds: work submitted to the queue
 * before an adr call on the device is ordered before that call (adr stops
 * using host-side shortcuts once the queue was handed out, and host waits
 * cover the application's submissions). The struct is owned by adr and
 * valid while the device lives; lock/unlock may be called from any thread;
 * the lock is not recursive and adr calls made while holding it deadlock. */
struct adr_vulkan_queue_lock {
  uint32_t struct_size; /* sizeof(struct adr_vulkan_queue_lock) */
  uint32_t reserved32;
  void (*lock)(void* ctx);
  void (*unlock)(void* ctx);
  void* ctx;
  void* reserved[4];
};

/* The Vulkan objects behind an adr address: filled by adr_vulkan_buffer().
 * Non-dispatchable handles (VkBuffer, VkDeviceMemory) travel as 64-bit
 * values: on 64-bit platforms, where the Vulkan headers make them
 * pointers, convert with (VkBuffer)(uintptr_t)q.buffer; on 32-bit ones they
 * are uint64_t already. */
struct adr_vulkan_buffer {
  uint32_t struct_size; /* in: sizeof(struct adr_vulkan_buffer) */
  uint32_t reserved32;
  const void* address; /* out: the address asked about (in, for the native kind) */
  /* out: the allocation `address` lies in, as the application made it
   * (adr_alloc's pointer and size, whatever the caching pool carved it
   * from), and address - base. */
  void* base;
  size_t size;
  size_t offset;
  /* out: the VkBuffer that holds the allocation and the byte offset of
   * `address` in it, for vkCmdCopyBuffer, VkDescriptorBufferInfo (offset
   * buffer_offset, range at most size - offset) ... The buffer was created
   * with TRANSFER_SRC | TRANSFER_DST | STORAGE_BUFFER | SHADER_DEVICE_ADDRESS
   * usage and is shared by other allocations: touch only
   * [buffer_offset, buffer_offset + size - offset). */
  uint64_t buffer;        /* VkBuffer */
  uint64_t buffer_offset; /* VkDeviceSize */
  /* out: the VkDeviceMemory the buffer is bound to and the byte offset of
   * `address` in it (for vkMapMemory, aliasing, external tools). */
  uint64_t memory;        /* VkDeviceMemory */
  uint64_t memory_offset; /* VkDeviceSize */
  uint64_t reserved[4];
};

/* Resolves `ptr`, any address inside a live allocation of `device` (an
 * ARROW_DEVICE_VULKAN device), to its VkBuffer and VkDeviceMemory with
 * offsets: the caller sets out->struct_size; on success every other field
 * is written. base and size are the allocation as adr_alloc returned it,
 * under any allocator (ADR_ALLOC=pool or backend, adr_allocator_set).
 *
 * The objects belong to the device's VkDevice (ADR_NATIVE_CONTEXT). Work an
 * application records on them is ordered with adr's by the usual rules
 * (docs/devices.md): submit it to adr's VkQueue (ADR_NATIVE_QUEUE, under
 * ADR_VULKAN_NATIVE_QUEUE_LOCK when threads may overlap) and queue order
 * holds; on another queue, synchronise with events or semaphores.
 *
 * Errors: EINVAL for a NULL device, ptr or out, a struct_size smaller than
 * this struct's first layout, or a device that is not a Vulkan device;
 * ENOENT when ptr is not inside a live allocation of `device` (freed, one
 * past the end, another device's); ENOMEM when the core cannot build its
 * index of the device's allocations; ESHUTDOWN after exit teardown.
 *
 * Ownership: both handles stay owned by adr, valid until the allocation
 * is freed (the pool may keep them longer; do not rely on it). Thread
 * safety: any thread; a look-up takes the device's index lock and the
 * backend's memory lock. */
ADR_API int adr_vulkan_buffer(struct adr_device* device, const void* ptr,
                              struct adr_vulkan_buffer* out, struct adr_error* error);

/* Imports an application's VkEvent (sync_event points to it, as
 * ArrowDeviceArray.sync_event does) like adr_event_import, saying how it is
 * set: src_stage_mask is the stageMask its producer passes to
 * vkCmdSetEvent (a VkPipelineStageFlags value), or
 * VK_PIPELINE_STAGE_HOST_BIT (0x4000) for an event set with vkSetEvent,
 * which is what adr_event_import assumes.
 *
 * Device-set events: the vkCmdSetEvent must be in a command buffer
 * submitted to the adr device's VkQueue (ADR_NATIVE_QUEUE; Vulkan events do
 * not work across queues) before the adr call that waits on the event
 * (adr_stream_wait_event, then work on that stream) is made; Vulkan
 * requires a vkCmdWaitEvents' srcStageMask to be exactly the producer's,
 * and adr cannot query it, hence the parameter. adr_event_synchronize and
 * adr_event_query poll vkGetEventStatus, which sees device sets too. With
 * the wrong mask, or with adr_event_import on a device-set event, the
 * validation layer reports VUID-vkCmdWaitEvents-srcStageMask-parameter.
 *
 * Ownership: the VkEvent stays the application's (adr_event_destroy frees
 * only the wrapper); it must not be reset while adr may still wait on it.
 * An adr event's own sync_event (adr_event_native) is recognised as with
 * adr_event_import; the mask is then unused. Errors: EINVAL for a NULL
 * argument, a mask of 0, a device that is not Vulkan, and what
 * adr_event_import refuses. Thread safety: any thread. */
ADR_API int adr_vulkan_event_import(struct adr_device* device, void* sync_event,
                                    uint32_t src_stage_mask, struct adr_event** out,
                                    struct adr_error* error);

/* What libadr passes with ADR_VULKAN_NATIVE_EVENT_SOURCE: the backend's
 * event just made by event_import, and the producer's stage mask. */
struct adr_vulkan_event_source {
  uint32_t struct_size;
  uint32_t src_stage_mask;
  struct adr_backend_event* event;
  uint64_t reserved[2];
};

/* Typed ADR_VULKAN_NATIVE_QUEUE_LOCK: *out = the lock adr submits to the
 * device's VkQueue under (struct above). Opens the device if needed and
 * marks its queue as shared (adr then keeps queue order with the
 * application's submissions, see docs/devices.md). The struct is owned by
 * adr and valid until the device is closed (process exit, or
 * adr_device_release for an adopted device). EINVAL for NULL arguments or
 * a device that is not Vulkan. Thread safety: any thread. */
ADR_API int adr_vulkan_queue_lock(struct adr_device* device,
                                  const struct adr_vulkan_queue_lock** out,
                                  struct adr_error* error);

/* adr_stream_import for a Vulkan device, with the queue's family: wraps
 * `queue` (a VkQueue) in a new adr stream (a submission context of its
 * own: command pool and buffers) whose work is submitted to that queue.
 * adr submits every stream of a device to the device's one VkQueue, under
 * one timeline, so `queue` must be that queue (ADR_NATIVE_QUEUE: on an
 * adopted device, the application's own queue it was adopted with) and
 * `queue_family_index` its family (ADR_NATIVE_QUEUE_FAMILY). Another queue
 * of the same VkDevice is refused with ENOTSUP: adopt a second adr device
 * over it (adr_device_adopt) instead. The queue stays the application's
 * (or adr's); adr_stream_destroy frees only the wrapper. The application
 * may submit to the queue itself, under adr_vulkan_queue_lock when threads
 * may overlap. Errors: EINVAL for NULL arguments, a device that is not
 * Vulkan, a family that is not the queue's; ENOTSUP as above. */
ADR_API int adr_vulkan_stream_import(struct adr_device* device, void* queue,
                                     uint32_t queue_family_index, struct adr_stream** out,
                                     struct adr_error* error);

/* Describes an application's Vulkan objects for adr_device_adopt(
 * ARROW_DEVICE_VULKAN, &desc, ...). Zero it, set struct_size to
 * sizeof(struct adr_vulkan_adopt_desc), then the fields.
 *
 * Requirements (checked where Vulkan lets adr check them, EINVAL/ENOTSUP
 * with the reason otherwise): the instance was created with apiVersion >=
 * 1.2 and `api_version` says which; the VkDevice was created on
 * `physical_device` with VkPhysicalDeviceVulkan12Features::
 * bufferDeviceAddress and ::timelineSemaphore enabled (adr cannot query
 * enabled features: without them behaviour is undefined and the validation
 * layer reports it); `queue_family_index`/`queue_index` name a queue that
 * was created with the device and whose family supports transfer (any
 * graphics, compute or transfer family does).
 *
 * Ownership: the handles stay owned by the application and must outlive the
 * adr device (adr never destroys them). adr creates its own command pools,
 * semaphore, events, buffers and memory on the VkDevice and destroys them
 * when the adr device is closed (at process exit). The application must
 * externally synchronise its own use of the queue with adr's, through
 * ADR_VULKAN_NATIVE_QUEUE_LOCK (or by never submitting while an adr call on
 * the device runs).
 */
struct adr_vulkan_adopt_desc {
  uint32_t struct_size;
  /* VkApplicationInfo::apiVersion of the instance (VK_MAKE_API_VERSION). */
  uint32_t api_version;
  void* instance;        /* VkInstance */
  void* physical_device; /* VkPhysicalDevice */
  void* device;          /* VkDevice */
  void* queue;           /* VkQueue from vkGetDeviceQueue(device, family, index) */
  uint32_t queue_family_index;
  uint32_t queue_index;
  /* PFN_vkGetInstanceProcAddr to resolve the instance's functions with; NULL
   * means the one from the libvulkan.so.1 that adr loads. */
  void* get_instance_proc_addr;
  uint64_t reserved[4]; /* zero */
};

#ifdef __cplusplus
}
#endif

#endif /* ADR_VULKAN_H */
