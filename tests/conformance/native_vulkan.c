/* SPDX-License-Identifier: Apache-2.0
 *
 * Native helper for Vulkan (see conf_native.h): a gate is a VkEvent the
 * host sets (vkSetEvent); application work is a command buffer submitted
 * to adr's VkQueue under adr's queue lock (ADR_VULKAN_NATIVE_QUEUE_LOCK):
 * vkCmdWaitEvents on the gate, then a compute shader (tests/vulkan/shaders/
 * scale.comp, dst[i] = src[i] * 2 + add on buffer device addresses) that
 * sets every byte to v from a zeroed source. Vulkan is reached through the
 * vkGetInstanceProcAddr adr hands out.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vulkan/vulkan_core.h>

#include <adr/vulkan.h>

#include "../vulkan/shaders/scale.spv.h"
#include "conf_native.h"

#define VKFN(X)                                                                                \
  X(vkCreateEvent)                                                                             \
  X(vkDestroyEvent)                                                                            \
  X(vkSetEvent)                                                                                \
  X(vkCreateShaderModule)                                                                      \
  X(vkDestroyShaderModule) X(vkCreatePipelineLayout) X(vkDestroyPipelineLayout)                \
      X(vkCreateComputePipelines) X(vkDestroyPipeline) X(vkCreateCommandPool)                  \
          X(vkDestroyCommandPool) X(vkAllocateCommandBuffers) X(vkBeginCommandBuffer)          \
              X(vkEndCommandBuffer) X(vkCmdWaitEvents) X(vkCmdPipelineBarrier)                 \
                  X(vkCmdBindPipeline) X(vkCmdPushConstants) X(vkCmdDispatch) X(vkCreateFence) \
                      X(vkDestroyFence) X(vkWaitForFences) X(vkQueueSubmit) X(vkDeviceWaitIdle)

struct push {
  uint64_t src;
  uint64_t dst;
  uint32_t count;
  uint32_t add;
};

struct work {
  VkCommandPool pool;
  VkFence fence;
  struct work* next;
};

static struct {
  struct adr_device* dev;
  VkDevice device;
  VkQueue queue;
  uint32_t family;
  const struct adr_vulkan_queue_lock* lock;
#define VK_MEMBER(name) PFN_##name name;
  VKFN(VK_MEMBER)
#undef VK_MEMBER
  VkShaderModule module;
  VkPipelineLayout layout;
  VkPipeline pipeline;
  void* zeros; /* adr allocation of zeros_size zero bytes: the shader's source */
  size_t zeros_size;
  struct work* work;
  struct conf_gate* gates; /* live gates: a case stopped early leaves some */
} V;

struct conf_gate {
  VkEvent event;
  _Atomic bool opened; /* vkSetEvent once: host access to an event is synchronised */
  struct conf_gate* next;
};

static int load(struct adr_device* dev, char* why, size_t n) {
  if (V.dev == dev) return 0;
  if (V.dev != NULL) {
    snprintf(why, n, "the helper serves one Vulkan device per process");
    return ENOTSUP;
  }
  void *gipa = NULL, *instance = NULL, *device = NULL, *queue = NULL, *family = NULL, *lock = NULL;
  struct adr_error err;
  int st = adr_device_native(dev, ADR_VULKAN_NATIVE_GET_INSTANCE_PROC_ADDR, &gipa, &err);
  if (st == 0) st = adr_device_native(dev, ADR_NATIVE_PLATFORM, &instance, &err);
  if (st == 0) st = adr_device_native(dev, ADR_NATIVE_CONTEXT, &device, &err);
  if (st == 0) st = adr_device_native(dev, ADR_NATIVE_QUEUE, &queue, &err);
  if (st == 0) st = adr_device_native(dev, ADR_NATIVE_QUEUE_FAMILY, &family, &err);
  if (st == 0) st = adr_device_native(dev, ADR_VULKAN_NATIVE_QUEUE_LOCK, &lock, &err);
  if (st != 0) {
    snprintf(why, n, "adr_device_native: %s", err.message);
    return st;
  }
  PFN_vkGetInstanceProcAddr get_instance = (PFN_vkGetInstanceProcAddr)(uintptr_t)gipa;
  PFN_vkGetDeviceProcAddr get_device =
      (PFN_vkGetDeviceProcAddr)get_instance((VkInstance)instance, "vkGetDeviceProcAddr");
  if (get_device == NULL) {
    snprintf(why, n, "no vkGetDeviceProcAddr");
    return ENOENT;
  }
  V.device = (VkDevice)device;
  V.queue = (VkQueue)queue;
  V.family = (uint32_t)(uintptr_t)family;
  V.lock = lock;
#define VK_LOAD(name)                                                 \
  V.name = (PFN_##name)get_device(V.device, #name);                   \
  if (V.name == NULL) {                                               \
    snprintf(why, n, "vkGetDeviceProcAddr(%s) returned NULL", #name); \
    return ENOENT;                                                    \
  }
  VKFN(VK_LOAD)
#undef VK_LOAD
  VkShaderModuleCreateInfo smci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                   .codeSize = sizeof(scale_spv),
                                   .pCode = scale_spv};
  VkPushConstantRange range = {VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(struct push)};
  VkPipelineLayoutCreateInfo plci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                     .pushConstantRangeCount = 1,
                                     .pPushConstantRanges = &range};
  if (V.vkCreateShaderModule(V.device, &smci, NULL, &V.module) != VK_SUCCESS ||
      V.vkCreatePipelineLayout(V.device, &plci, NULL, &V.layout) != VK_SUCCESS) {
    snprintf(why, n, "creating the shader module or pipeline layout failed");
    return EIO;
  }
  VkComputePipelineCreateInfo cpci = {
      .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = V.module,
                .pName = "main"},
      .layout = V.layout};
  if (V.vkCreateComputePipelines(V.device, VK_NULL_HANDLE, 1, &cpci, NULL, &V.pipeline) !=
      VK_SUCCESS) {
    snprintf(why, n, "vkCreateComputePipelines failed");
    return EIO;
  }
  V.dev = dev;
  return 0;
}

static int gate_create(struct adr_device* dev, struct conf_gate** out, void** out_sync_event,
                       char* why, size_t n) {
  int st = load(dev, why, n);
  if (st != 0) return st;
  struct conf_gate* g = calloc(1, sizeof(*g));
  if (g == NULL) return ENOMEM;
  VkEventCreateInfo eci = {.sType = VK_STRUCTURE_TYPE_EVENT_CREATE_INFO};
  if (V.vkCreateEvent(V.device, &eci, NULL, &g->event) != VK_SUCCESS) {
    free(g);
    snprintf(why, n, "vkCreateEvent failed");
    return EIO;
  }
  g->next = V.gates;
  V.gates = g;
  *out = g;
  *out_sync_event = &g->event;
  return 0;
}

static void gate_open(struct conf_gate* g) {
  if (!atomic_exchange(&g->opened, true)) V.vkSetEvent(V.device, g->event);
}

static void open_gates(struct adr_device* dev) {
  (void)dev;
  for (struct conf_gate* g = V.gates; g != NULL; g = g->next) gate_open(g);
}

static void gate_destroy(struct conf_gate* g) {
  if (g == NULL) return;
  for (struct conf_gate** p = &V.gates; *p != NULL; p = &(*p)->next)
    if (*p == g) {
      *p = g->next;
      break;
    }
  V.vkDestroyEvent(V.device, g->event, NULL);
  free(g);
}

static int fill(struct adr_device* dev, struct adr_stream* stream, struct conf_gate* gate,
                void* ptr, size_t size, uint8_t v, char* why, size_t n) {
  (void)stream; /* every stream of a Vulkan device submits to its one queue */
  int st = load(dev, why, n);
  if (st != 0) return st;
  struct adr_error err;
  if (V.zeros_size < size) {
    if (V.zeros != NULL) adr_free(dev, V.zeros, V.zeros_size, NULL, NULL);
    V.zeros = NULL;
    V.zeros_size = 0;
    if ((st = adr_alloc(dev, size, 0, NULL, &V.zeros, &err)) != 0 ||
        (st = adr_memset(dev, V.zeros, 0, size, NULL, &err)) != 0) {
      snprintf(why, n, "zeroed source: %s", err.message);
      return st;
    }
    V.zeros_size = size;
  }
  struct work* w = calloc(1, sizeof(*w));
  if (w == NULL) return ENOMEM;
  VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                 .queueFamilyIndex = V.family};
  VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  VkCommandBuffer cb = VK_NULL_HANDLE;
  VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                     .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                     .commandBufferCount = 1};
  if (V.vkCreateCommandPool(V.device, &pci, NULL, &w->pool) != VK_SUCCESS ||
      V.vkCreateFence(V.device, &fci, NULL, &w->fence) != VK_SUCCESS ||
      (cai.commandPool = w->pool, V.vkAllocateCommandBuffers(V.device, &cai, &cb) != VK_SUCCESS)) {
    snprintf(why, n, "creating a command buffer failed");
    st = EIO;
  }
  w->next = V.work;
  V.work = w;
  if (st != 0) return st;
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                 .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  V.vkBeginCommandBuffer(cb, &bi);
  VkMemoryBarrier before = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
      .srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
      .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
  V.vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &before, 0, NULL, 0, NULL);
  if (gate != NULL) {
    VkMemoryBarrier host = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                            .srcAccessMask = VK_ACCESS_HOST_WRITE_BIT,
                            .dstAccessMask = VK_ACCESS_SHADER_READ_BIT};
    V.vkCmdWaitEvents(cb, 1, &gate->event, VK_PIPELINE_STAGE_HOST_BIT,
                      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 1, &host, 0, NULL, 0, NULL);
  }
  struct push pc = {.src = (uint64_t)(uintptr_t)V.zeros,
                    .dst = (uint64_t)(uintptr_t)ptr,
                    .count = (uint32_t)(size / 4),
                    .add = 0x01010101u * v};
  V.vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, V.pipeline);
  V.vkCmdPushConstants(cb, V.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(pc), &pc);
  V.vkCmdDispatch(cb, (pc.count + 63) / 64, 1, 1);
  VkMemoryBarrier after = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                           .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                           .dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT |
                                            VK_ACCESS_HOST_READ_BIT};
  V.vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                         VK_PIPELINE_STAGE_ALL_COMMANDS_BIT | VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                         &after, 0, NULL, 0, NULL);
  V.vkEndCommandBuffer(cb);
  VkSubmitInfo si = {
      .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cb};
  V.lock->lock(V.lock->ctx);
  VkResult r = V.vkQueueSubmit(V.queue, 1, &si, w->fence);
  V.lock->unlock(V.lock->ctx);
  if (r != VK_SUCCESS) {
    snprintf(why, n, "vkQueueSubmit failed (%d)", (int)r);
    return EIO;
  }
  return 0;
}

static void finish(struct adr_device* dev) {
  if (V.dev != dev) return;
  while (V.work != NULL) {
    struct work* w = V.work;
    V.work = w->next;
    if (w->fence != VK_NULL_HANDLE) {
      V.vkWaitForFences(V.device, 1, &w->fence, VK_TRUE, UINT64_MAX);
      V.vkDestroyFence(V.device, w->fence, NULL);
    }
    if (w->pool != VK_NULL_HANDLE) V.vkDestroyCommandPool(V.device, w->pool, NULL);
    free(w);
  }
  if (V.zeros != NULL) adr_free(dev, V.zeros, V.zeros_size, NULL, NULL);
  V.zeros = NULL;
  V.zeros_size = 0;
  /* Nothing of the application's may outlive the test: adr's exit handler
   * destroys the VkDevice, and the validation layer reports leaks. */
  V.vkDestroyPipeline(V.device, V.pipeline, NULL);
  V.vkDestroyPipelineLayout(V.device, V.layout, NULL);
  V.vkDestroyShaderModule(V.device, V.module, NULL);
  V.pipeline = VK_NULL_HANDLE;
  V.layout = VK_NULL_HANDLE;
  V.module = VK_NULL_HANDLE;
  V.dev = NULL;
}

/* After a case stopped early (fault mode): gates it never destroyed are
 * opened, so nothing waits on them, and destroyed once the device is idle
 * (the process is single-threaded by now); then as finish. */
static void abandon(struct adr_device* dev) {
  if (V.gates != NULL) { /* finish may have run since they were made */
    open_gates(dev);
    V.vkDeviceWaitIdle(V.device);
    while (V.gates != NULL) gate_destroy(V.gates);
  }
  finish(dev);
}

static int buffer(struct adr_device* dev, const void* ptr, void** out_base, size_t* out_size,
                  size_t* out_offset, struct adr_error* error) {
  struct adr_vulkan_buffer q = {.struct_size = sizeof(q)};
  int st = adr_vulkan_buffer(dev, ptr, &q, error);
  if (st != 0) return st;
  if (q.address != ptr || q.buffer == 0 || q.memory == 0)
    return adr_error_set(error, EPROTO, "[adr_vulkan_buffer] inconsistent answer for %p", ptr);
  *out_base = q.base;
  *out_size = q.size;
  *out_offset = q.offset;
  return 0;
}

const struct conf_native conf_native_vulkan = {
    .backend = "vulkan",
    .gate_create = gate_create,
    .gate_open = gate_open,
    .gate_destroy = gate_destroy,
    .fill = fill,
    .finish = finish,
    .abandon = abandon,
    .open_gates = open_gates,
    .buffer_op = "adr_vulkan_buffer",
    .buffer = buffer,
};
