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
 */
#ifndef ADR_VULKAN_H
#define ADR_VULKAN_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

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
