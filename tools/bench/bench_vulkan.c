/* SPDX-License-Identifier: Apache-2.0
 *
 * Vulkan rows: H2D, D2H and D2D bandwidth at 4 KiB, 1 MiB and 64 MiB,
 * small-copy latency, and alloc+free of 4 KiB and 1 MiB, each next to the
 * same work written directly against Vulkan in the same run, on a VkDevice
 * and queue of their own on the adr device's VkPhysicalDevice (created in
 * adr's VkInstance). Taking adr's queue (ADR_NATIVE_QUEUE) would hand it to
 * the application and turn adr's host shortcuts off for the rest of the
 * process (docs/devices.md), measuring adr on a path no application that
 * leaves its queues alone takes. The baselines:
 *   copies: a host-visible staging buffer + vkCmdCopyBuffer + a fence
 *           (the textbook upload/readback), device buffers in device-local
 *           memory; D2D is vkCmdCopyBuffer + fence;
 *   alloc:  vkCreateBuffer + vkAllocateMemory (device-address flag) +
 *           vkBindBufferMemory and their destruction, per allocation,
 *           which is what one addressable buffer costs without adr.
 * For H2D and D2H a second baseline is what a programmer writes when the
 * memory is host-visible (it is on lavapipe and on every integrated GPU):
 * a memcpy into or out of mapped, device-local, host-visible memory.
 * adr's side goes through the public API with the NULL (blocking) stream.
 * Every row first checks the bytes each side moved (bench_expect).
 * The copy mode is the backend's (ADR_VULKAN_COPY, read once): run
 * `ADR_VULKAN_COPY=staging adr-bench vulkan` for the staging ring; group
 * names say which path adr took.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Vulkan is reached through dlopen("libvulkan.so.1") and the loader's
 * vkGetInstanceProcAddr, as the backend does: adr-bench does not link
 * the loader, and the area is skipped, with the reason, without it. */
#define VK_NO_PROTOTYPES 1
#include <vulkan/vulkan.h>

#include "adr/adr.h"
#include "adr/vulkan.h"
#include "bench.h"

void bench_run_vulkan(struct bench_ctx* ctx);

#define BENCH_VK_DEVICE_SYMBOLS(X)                                                              \
  X(vkAllocateCommandBuffers)                                                                   \
  X(vkAllocateMemory)                                                                           \
  X(vkBeginCommandBuffer) X(vkBindBufferMemory) X(vkCmdCopyBuffer) X(vkCmdPipelineBarrier)      \
      X(vkCreateBuffer) X(vkCreateCommandPool) X(vkCreateFence) X(vkDestroyBuffer)              \
          X(vkDestroyCommandPool) X(vkDestroyFence) X(vkEndCommandBuffer) X(vkFreeMemory)       \
              X(vkGetBufferMemoryRequirements) X(vkMapMemory) X(vkQueueSubmit) X(vkResetFences) \
                  X(vkUnmapMemory) X(vkWaitForFences) X(vkGetDeviceQueue) X(vkDestroyDevice)    \
                      X(vkDeviceWaitIdle)
#define BENCH_VK_INSTANCE_SYMBOLS(X) \
  X(vkGetPhysicalDeviceMemoryProperties) X(vkCreateDevice) X(vkGetDeviceProcAddr)

static struct {
#define BENCH_VK_MEMBER(name) PFN_##name name;
  BENCH_VK_DEVICE_SYMBOLS(BENCH_VK_MEMBER)
  BENCH_VK_INSTANCE_SYMBOLS(BENCH_VK_MEMBER)
#undef BENCH_VK_MEMBER
} V;

/* dlopens the loader and resolves the instance-level entry points in
 * adr's instance; false with the reason in why. */
static bool vk_load_instance(VkInstance instance, char* why, size_t n) {
  void* lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    const char* e = dlerror();
    snprintf(why, n, "libvulkan.so.1 not found (%s)", e ? e : "dlopen failed");
    return false;
  }
  void* p = dlsym(lib, "vkGetInstanceProcAddr");
  if (p == NULL) {
    snprintf(why, n, "libvulkan.so.1 lacks vkGetInstanceProcAddr");
    return false;
  }
  PFN_vkGetInstanceProcAddr gipa;
  memcpy(&gipa, &p, sizeof(p));
#define BENCH_VK_BIND_INSTANCE(name)                                    \
  if ((V.name = (PFN_##name)gipa(instance, #name)) == NULL) {           \
    snprintf(why, n, "vkGetInstanceProcAddr(%s) returned NULL", #name); \
    return false;                                                       \
  }
  BENCH_VK_INSTANCE_SYMBOLS(BENCH_VK_BIND_INSTANCE)
#undef BENCH_VK_BIND_INSTANCE
  return true; /* the loader stays open for the life of the process */
}

static bool vk_load_device(VkDevice device, char* why, size_t n) {
#define BENCH_VK_BIND_DEVICE(name)                                           \
  if ((V.name = (PFN_##name)V.vkGetDeviceProcAddr(device, #name)) == NULL) { \
    snprintf(why, n, "vkGetDeviceProcAddr(%s) returned NULL", #name);        \
    return false;                                                            \
  }
  BENCH_VK_DEVICE_SYMBOLS(BENCH_VK_BIND_DEVICE)
#undef BENCH_VK_BIND_DEVICE
  return true;
}

enum dir { H2D, D2H, D2D };

struct vk_direct {
  VkDevice device;
  VkQueue queue;
  VkPhysicalDevice physical;
  VkPhysicalDeviceMemoryProperties mp;
  VkCommandPool pool;
  VkCommandBuffer cb;
  VkFence fence;
  int failures;
};

struct vk_buf {
  VkBuffer buffer;
  VkDeviceMemory memory;
  void* mapped;
};

static int find_type(const struct vk_direct* d, uint32_t bits, VkMemoryPropertyFlags want,
                     VkMemoryPropertyFlags prefer) {
  int fallback = -1;
  for (uint32_t t = 0; t < d->mp.memoryTypeCount; t++) {
    VkMemoryPropertyFlags f = d->mp.memoryTypes[t].propertyFlags;
    if (!(bits & (1u << t)) || (f & want) != want) continue;
    if ((f & prefer) == prefer) return (int)t;
    if (fallback < 0) fallback = (int)t;
  }
  return fallback;
}

static void buf_destroy(struct vk_direct* d, struct vk_buf* b);

enum buf_kind { BUF_STAGING, BUF_DEVICE, BUF_DEVICE_MAPPED };

static int buf_create(struct vk_direct* d, VkDeviceSize size, enum buf_kind kind,
                      struct vk_buf* out) {
  bool host = kind == BUF_STAGING;
  bool mapped = kind != BUF_DEVICE;
  memset(out, 0, sizeof(*out));
  VkBufferCreateInfo bci = {
      .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
      .size = size,
      .usage =
          VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT |
          (host ? 0
                : VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT | VK_BUFFER_USAGE_STORAGE_BUFFER_BIT),
      .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
  if (V.vkCreateBuffer(d->device, &bci, NULL, &out->buffer) != VK_SUCCESS) return -1;
  VkMemoryRequirements req;
  V.vkGetBufferMemoryRequirements(d->device, out->buffer, &req);
  const VkMemoryPropertyFlags visible =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  int type =
      kind == BUF_STAGING
          ? find_type(d, req.memoryTypeBits, visible, VK_MEMORY_PROPERTY_HOST_CACHED_BIT)
      : kind == BUF_DEVICE_MAPPED
          ? find_type(d, req.memoryTypeBits, visible | VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0)
          : find_type(d, req.memoryTypeBits, 0, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
  VkMemoryAllocateFlagsInfo fi = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
                                  .flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT};
  VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                              .pNext = host ? NULL : &fi,
                              .allocationSize = req.size,
                              .memoryTypeIndex = (uint32_t)type};
  if (type < 0 || V.vkAllocateMemory(d->device, &mai, NULL, &out->memory) != VK_SUCCESS ||
      V.vkBindBufferMemory(d->device, out->buffer, out->memory, 0) != VK_SUCCESS) {
    V.vkDestroyBuffer(d->device, out->buffer, NULL);
    if (out->memory != VK_NULL_HANDLE) V.vkFreeMemory(d->device, out->memory, NULL);
    return -1;
  }
  if (mapped &&
      V.vkMapMemory(d->device, out->memory, 0, VK_WHOLE_SIZE, 0, &out->mapped) != VK_SUCCESS) {
    buf_destroy(d, out);
    return -1;
  }
  return 0;
}

static void buf_destroy(struct vk_direct* d, struct vk_buf* b) {
  if (b->mapped != NULL) V.vkUnmapMemory(d->device, b->memory);
  if (b->buffer != VK_NULL_HANDLE) V.vkDestroyBuffer(d->device, b->buffer, NULL);
  if (b->memory != VK_NULL_HANDLE) V.vkFreeMemory(d->device, b->memory, NULL);
  memset(b, 0, sizeof(*b));
}

/* Records one copy (plus the barrier a host readback needs), submits it
 * with the fence and waits. */
static void submit_copy(struct vk_direct* d, VkBuffer src, VkBuffer dst, VkDeviceSize size,
                        bool host_read) {
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                 .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  if (V.vkBeginCommandBuffer(d->cb, &bi) != VK_SUCCESS) {
    d->failures++;
    return;
  }
  VkBufferCopy r = {0, 0, size};
  V.vkCmdCopyBuffer(d->cb, src, dst, 1, &r);
  if (host_read) {
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    V.vkCmdPipelineBarrier(d->cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 1,
                           &mb, 0, NULL, 0, NULL);
  }
  V.vkEndCommandBuffer(d->cb);
  VkSubmitInfo si = {
      .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &d->cb};
  if (V.vkQueueSubmit(d->queue, 1, &si, d->fence) != VK_SUCCESS ||
      V.vkWaitForFences(d->device, 1, &d->fence, VK_TRUE, UINT64_MAX) != VK_SUCCESS)
    d->failures++;
  V.vkResetFences(d->device, 1, &d->fence);
}

struct copy_arg {
  struct adr_device* dev;
  struct adr_device* cpu;
  struct vk_direct* d;
  void* dev_a;
  void* dev_b;
  struct vk_buf staging, buf_a, buf_b;
  struct vk_buf mapped; /* device-local, host-visible: the memcpy baseline */
  void* host_a;
  void* host_b;
  size_t size;
  enum dir dir;
  int reps; /* calls per timed call of adr_copy_fn / mapped_copy_fn (0: 1) */
  int failures;
};

static void adr_copy_fn(void* p) {
  struct copy_arg* a = p;
  int reps = a->reps > 0 ? a->reps : 1;
  for (int i = 0; i < reps; i++) {
    int st;
    switch (a->dir) {
      case H2D:
        st = adr_copy(a->dev, a->dev_a, a->cpu, a->host_a, a->size, NULL, NULL);
        break;
      case D2H:
        st = adr_copy(a->cpu, a->host_b, a->dev, a->dev_a, a->size, NULL, NULL);
        break;
      default:
        st = adr_copy(a->dev, a->dev_b, a->dev, a->dev_a, a->size, NULL, NULL);
        break;
    }
    if (st != 0) a->failures++;
  }
  bench_sink(a->host_b);
}

static void direct_copy_fn(void* p) {
  struct copy_arg* a = p;
  switch (a->dir) {
    case H2D:
      memcpy(a->staging.mapped, a->host_a, a->size);
      submit_copy(a->d, a->staging.buffer, a->buf_a.buffer, a->size, false);
      break;
    case D2H:
      submit_copy(a->d, a->buf_a.buffer, a->staging.buffer, a->size, true);
      memcpy(a->host_b, a->staging.mapped, a->size);
      break;
    default:
      submit_copy(a->d, a->buf_a.buffer, a->buf_b.buffer, a->size, false);
      break;
  }
  bench_sink(a->host_b);
}

/* memcpy through a pointer the compiler cannot see through, so the
 * baseline is a real call like adr's. */
static void* (*volatile memcpy_ptr)(void*, const void*, size_t) = memcpy;

static void mapped_copy_fn(void* p) {
  struct copy_arg* a = p;
  int reps = a->reps > 0 ? a->reps : 1;
  for (int i = 0; i < reps; i++) {
    if (a->dir == H2D)
      memcpy_ptr(a->mapped.mapped, a->host_a, a->size);
    else
      memcpy_ptr(a->host_b, a->mapped.mapped, a->size);
  }
  bench_sink(a->host_b);
}

/* Seconds per copy of fn (adr_copy_fn or mapped_copy_fn) timed `reps`
 * copies at a time: one clock read per copy (about 20-40 ns on this
 * project's VM) would weigh on a 64 B or 4 KiB copy as much as the copy. */
static double time_reps(void (*fn)(void*), struct copy_arg* a, double min_s, int reps) {
  a->reps = reps;
  double t = bench_time(fn, a, min_s, 3) / reps;
  a->reps = 1;
  return t;
}

/* Fills a device-only buffer through the staging buffer. */
static void buf_fill(struct vk_direct* d, struct copy_arg* a, VkBuffer dst, int byte) {
  memset(a->staging.mapped, byte, a->size);
  submit_copy(d, a->staging.buffer, dst, a->size, false);
}

/* Runs each side once with its source holding `byte` and its destination
 * holding something else, then reads every destination back and checks
 * it. */
static void check_copies(struct bench_ctx* ctx, struct copy_arg* a, int byte, const char* what) {
  size_t n = a->size;
  int other = byte ^ 0xff;
  struct vk_direct* d = a->d;
  char msg[96];
  /* Destinations first (they share the staging buffer), then sources. */
  if (a->dir == H2D) {
    adr_memset(a->dev, a->dev_a, other, n, NULL, NULL);
    buf_fill(d, a, a->buf_a.buffer, other);
  } else if (a->dir == D2D) {
    adr_memset(a->dev, a->dev_b, other, n, NULL, NULL);
    buf_fill(d, a, a->buf_b.buffer, other);
  }
  memset(a->host_a, byte, n);
  if (a->dir != H2D) {
    adr_copy(a->dev, a->dev_a, a->cpu, a->host_a, n, NULL, NULL);
    buf_fill(d, a, a->buf_a.buffer, byte);
  }
  if (a->mapped.mapped != NULL) memset(a->mapped.mapped, a->dir == H2D ? other : byte, n);

  memset(a->host_b, other, n);
  adr_copy_fn(a);
  snprintf(msg, sizeof(msg), "adr %s", what);
  if (a->dir == D2H) {
    bench_expect_fill(ctx, a->host_b, byte, n, msg);
  } else {
    memset(a->host_b, other, n);
    adr_copy(a->cpu, a->host_b, a->dev, a->dir == H2D ? a->dev_a : a->dev_b, n, NULL, NULL);
    bench_expect_fill(ctx, a->host_b, byte, n, msg);
  }

  memset(a->host_b, other, n);
  direct_copy_fn(a);
  snprintf(msg, sizeof(msg), "vkCmdCopyBuffer %s", what);
  if (a->dir == D2H) {
    bench_expect_fill(ctx, a->host_b, byte, n, msg);
  } else {
    memset(a->staging.mapped, other, n);
    submit_copy(d, a->dir == H2D ? a->buf_a.buffer : a->buf_b.buffer, a->staging.buffer, n, true);
    bench_expect_fill(ctx, a->staging.mapped, byte, n, msg);
  }

  if (a->mapped.mapped != NULL && a->dir != D2D) {
    memset(a->host_b, other, n);
    mapped_copy_fn(a);
    snprintf(msg, sizeof(msg), "mapped memcpy %s", what);
    bench_expect_fill(ctx, a->dir == H2D ? a->mapped.mapped : a->host_b, byte, n, msg);
  }
}

static const char* size_label(size_t size, char* buf, size_t n) {
  if (size >= (1u << 20))
    snprintf(buf, n, "%zu MiB", size >> 20);
  else if (size >= 1024)
    snprintf(buf, n, "%zu KiB", size >> 10);
  else
    snprintf(buf, n, "%zu B", size);
  return buf;
}

static void copy_rows(struct bench_ctx* ctx, struct adr_device* dev, struct adr_device* cpu,
                      struct vk_direct* d, const char* path) {
  static const size_t sizes[] = {4096, 1u << 20, 64u << 20};
  static const char* const names[] = {"H2D", "D2H", "D2D"};
  size_t nsizes = bench_quick(ctx) ? 2 : 3;
  for (size_t si = 0; si < nsizes; si++) {
    size_t size = sizes[si];
    struct copy_arg a = {.dev = dev, .cpu = cpu, .d = d, .size = size};
    a.host_a = malloc(size);
    a.host_b = malloc(size);
    bool ok = a.host_a != NULL && a.host_b != NULL &&
              adr_alloc(dev, size, 0, NULL, &a.dev_a, NULL) == 0 &&
              adr_alloc(dev, size, 0, NULL, &a.dev_b, NULL) == 0 &&
              buf_create(d, size, BUF_STAGING, &a.staging) == 0 &&
              buf_create(d, size, BUF_DEVICE, &a.buf_a) == 0 &&
              buf_create(d, size, BUF_DEVICE, &a.buf_b) == 0;
    /* No device-local host-visible type on this device: no memcpy row. */
    if (ok) buf_create(d, size, BUF_DEVICE_MAPPED, &a.mapped);
    if (ok) {
      for (int dir = H2D; dir <= D2D; dir++) {
        a.dir = (enum dir)dir;
        char group[64], label[32], what[48];
        size_label(size, label, sizeof(label));
        snprintf(what, sizeof(what), "%s %s", names[dir], label);
        check_copies(ctx, &a, 0x10 + dir, what);
        double min_s = bench_quick(ctx) ? 0.05 : 0.2;
        int reps = size <= 4096 ? 100 : 1;
        double t_adr = time_reps(adr_copy_fn, &a, min_s, reps);
        double t_vk = bench_time(direct_copy_fn, &a, min_s, 3);
        snprintf(group, sizeof(group), "vulkan %s (%s)", names[dir], path);
        bench_report(ctx, group, label, size / t_adr / 1e9, size / t_vk / 1e9, "GB/s",
                     "staging+vkCmdCopyBuffer+fence", BENCH_HIGHER_IS_BETTER);
        if (a.mapped.mapped != NULL && dir != D2D) {
          double t_map = time_reps(mapped_copy_fn, &a, min_s, reps);
          double t_adr2 = time_reps(adr_copy_fn, &a, min_s, reps);
          if (t_adr2 < t_adr) t_adr = t_adr2;
          check_copies(ctx, &a, 0x20 + dir, what);
          bench_report(ctx, group, label, size / t_adr / 1e9, size / t_map / 1e9, "GB/s",
                       "memcpy on mapped device-local", BENCH_HIGHER_IS_BETTER);
        }
      }
    } else {
      bench_note(ctx, "vulkan copies", "setup failed", (double)size, "bytes");
    }
    if (a.failures + d->failures > 0)
      bench_note(ctx, "vulkan copies", "failed calls", a.failures + d->failures, "calls");
    buf_destroy(d, &a.staging);
    buf_destroy(d, &a.buf_a);
    buf_destroy(d, &a.buf_b);
    buf_destroy(d, &a.mapped);
    if (a.dev_a != NULL) adr_free(dev, a.dev_a, size, NULL, NULL);
    if (a.dev_b != NULL) adr_free(dev, a.dev_b, size, NULL, NULL);
    free(a.host_a);
    free(a.host_b);
  }

  /* Small-copy latency: 64 bytes up and back down. */
  struct copy_arg a = {.dev = dev, .cpu = cpu, .d = d, .size = 64};
  a.host_a = calloc(1, 64);
  a.host_b = calloc(1, 64);
  if (a.host_a != NULL && a.host_b != NULL && adr_alloc(dev, 64, 0, NULL, &a.dev_a, NULL) == 0 &&
      buf_create(d, 64, BUF_STAGING, &a.staging) == 0 &&
      buf_create(d, 64, BUF_DEVICE, &a.buf_a) == 0) {
    buf_create(d, 64, BUF_DEVICE_MAPPED, &a.mapped);
    for (int dir = H2D; dir <= D2H; dir++) {
      a.dir = (enum dir)dir;
      const char* label = dir == H2D ? "64 B H2D" : "64 B D2H";
      check_copies(ctx, &a, 0x30 + dir, label);
      double t_adr = time_reps(adr_copy_fn, &a, 0.1, 1000);
      double t_vk = bench_time(direct_copy_fn, &a, 0.1, 10);
      char group[64];
      snprintf(group, sizeof(group), "vulkan latency (%s)", path);
      bench_report(ctx, group, label, t_adr * 1e6, t_vk * 1e6, "us/op",
                   "staging+vkCmdCopyBuffer+fence", BENCH_LOWER_IS_BETTER);
      if (a.mapped.mapped != NULL) {
        double t_map = time_reps(mapped_copy_fn, &a, 0.1, 1000);
        double t_adr2 = time_reps(adr_copy_fn, &a, 0.1, 1000);
        if (t_adr2 < t_adr) t_adr = t_adr2;
        check_copies(ctx, &a, 0x40 + dir, label);
        bench_report(ctx, group, label, t_adr * 1e6, t_map * 1e6, "us/op",
                     "memcpy on mapped device-local", BENCH_LOWER_IS_BETTER);
      }
    }
  }
  buf_destroy(d, &a.staging);
  buf_destroy(d, &a.buf_a);
  buf_destroy(d, &a.mapped);
  if (a.dev_a != NULL) adr_free(dev, a.dev_a, 64, NULL, NULL);
  free(a.host_a);
  free(a.host_b);
}

struct alloc_arg {
  struct adr_device* dev;
  struct vk_direct* d;
  size_t size;
  uint32_t type; /* memory type for the vkAllocateMemory-only baseline */
  int failures;
};

static void adr_alloc_fn(void* p) {
  struct alloc_arg* a = p;
  void* ptr = NULL;
  if (adr_alloc(a->dev, a->size, 0, NULL, &ptr, NULL) != 0 ||
      adr_free(a->dev, ptr, a->size, NULL, NULL) != 0)
    a->failures++;
}

static void direct_alloc_fn(void* p) {
  struct alloc_arg* a = p;
  struct vk_buf b;
  if (buf_create(a->d, a->size, BUF_DEVICE, &b) != 0) a->failures++;
  buf_destroy(a->d, &b);
}

/* vkAllocateMemory + vkFreeMemory alone (no buffer), as the issue's
 * baseline names it; the row above adds what an addressable buffer costs. */
static void memory_only_fn(void* p) {
  struct alloc_arg* a = p;
  VkMemoryAllocateFlagsInfo fi = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
                                  .flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT};
  VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                              .pNext = &fi,
                              .allocationSize = a->size,
                              .memoryTypeIndex = a->type};
  VkDeviceMemory m = VK_NULL_HANDLE;
  if (V.vkAllocateMemory(a->d->device, &mai, NULL, &m) != VK_SUCCESS) a->failures++;
  V.vkFreeMemory(a->d->device, m, NULL);
}

static void alloc_rows(struct bench_ctx* ctx, struct adr_device* dev, struct vk_direct* d) {
  static const size_t sizes[] = {4096, 1u << 20};
  for (size_t i = 0; i < 2; i++) {
    struct alloc_arg a = {.dev = dev, .d = d, .size = sizes[i]};
    int type = find_type(d, ~0u, 0, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    a.type = type < 0 ? 0 : (uint32_t)type;
    double t_adr = bench_time(adr_alloc_fn, &a, 0.1, 100);
    double t_vk = bench_time(direct_alloc_fn, &a, 0.1, 100);
    double t_mem = bench_time(memory_only_fn, &a, 0.1, 100);
    char label[32];
    size_label(sizes[i], label, sizeof(label));
    bench_report(ctx, "vulkan alloc+free", label, t_adr * 1e9, t_vk * 1e9, "ns/op",
                 "vkCreateBuffer+vkAllocateMemory+bind", BENCH_LOWER_IS_BETTER);
    bench_report(ctx, "vulkan alloc+free", label, t_adr * 1e9, t_mem * 1e9, "ns/op",
                 "vkAllocateMemory only", BENCH_LOWER_IS_BETTER);
    if (a.failures > 0) bench_note(ctx, "vulkan alloc+free", "failed calls", a.failures, "calls");
  }
}

static void prop_fn(void* ctx, const char* key, const char* value) {
  if (strcmp(key, "copy_path") == 0) snprintf((char*)ctx, 32, "%s", value);
}

void bench_run_vulkan(struct bench_ctx* ctx) {
  struct adr_device* dev = NULL;
  struct adr_device* cpu = NULL;
  struct adr_error err;
  if (adr_device_get(ARROW_DEVICE_VULKAN, 0, &dev, &err) != 0) {
    fprintf(stderr, "adr-bench vulkan: skipped: no device: %s\n", err.message);
    return;
  }
  if (adr_device_get(ARROW_DEVICE_CPU, 0, &cpu, &err) != 0) return;
  struct vk_direct d = {0};
  void* h = NULL;
  if (adr_device_native(dev, ADR_NATIVE_PLATFORM, &h, &err) != 0) {
    fprintf(stderr, "adr-bench vulkan: skipped: %s\n", err.message);
    return;
  }
  VkInstance instance = (VkInstance)h;
  char why[256];
  if (!vk_load_instance(instance, why, sizeof(why))) {
    fprintf(stderr, "adr-bench vulkan: skipped: %s\n", why);
    return;
  }
  adr_device_native(dev, ADR_NATIVE_DEVICE, &h, NULL);
  d.physical = (VkPhysicalDevice)h;
  adr_device_native(dev, ADR_NATIVE_QUEUE_FAMILY, &h, NULL);
  uint32_t family = (uint32_t)(uintptr_t)h;
  V.vkGetPhysicalDeviceMemoryProperties(d.physical, &d.mp);
  /* The baselines' own device and queue (buffer device addresses on, as
   * adr's allocations have them). */
  float priority = 1.0f;
  VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                 .queueFamilyIndex = family,
                                 .queueCount = 1,
                                 .pQueuePriorities = &priority};
  VkPhysicalDeviceBufferDeviceAddressFeatures bda = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_BUFFER_DEVICE_ADDRESS_FEATURES,
      .bufferDeviceAddress = VK_TRUE};
  VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                            .pNext = &bda,
                            .queueCreateInfoCount = 1,
                            .pQueueCreateInfos = &qci};
  VkResult r = V.vkCreateDevice(d.physical, &dci, NULL, &d.device);
  if (r != VK_SUCCESS) {
    fprintf(stderr, "adr-bench vulkan: skipped: vkCreateDevice for the baselines failed (%d)\n",
            (int)r);
    return;
  }
  if (!vk_load_device(d.device, why, sizeof(why))) {
    fprintf(stderr, "adr-bench vulkan: skipped: %s\n", why);
    return;
  }
  V.vkGetDeviceQueue(d.device, family, 0, &d.queue);
  VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                 .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                 .queueFamilyIndex = family};
  VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                     .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                     .commandBufferCount = 1};
  VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  if (V.vkCreateCommandPool(d.device, &pci, NULL, &d.pool) != VK_SUCCESS) {
    V.vkDestroyDevice(d.device, NULL);
    return;
  }
  cai.commandPool = d.pool;
  if (V.vkAllocateCommandBuffers(d.device, &cai, &d.cb) != VK_SUCCESS ||
      V.vkCreateFence(d.device, &fci, NULL, &d.fence) != VK_SUCCESS) {
    V.vkDestroyCommandPool(d.device, d.pool, NULL);
    V.vkDestroyDevice(d.device, NULL);
    return;
  }
  /* The copy path is chosen when adr opens the device, on its first use
   * (docs/devices.md): one allocation opens it before the label is read. */
  void* first = NULL;
  if (adr_alloc(dev, 64, 0, NULL, &first, NULL) == 0) adr_free(dev, first, 64, NULL, NULL);
  char path[32] = "?";
  adr_device_properties(dev, prop_fn, path, NULL);
  copy_rows(ctx, dev, cpu, &d, path);
  alloc_rows(ctx, dev, &d);
  V.vkDeviceWaitIdle(d.device);
  V.vkDestroyFence(d.device, d.fence, NULL);
  V.vkDestroyCommandPool(d.device, d.pool, NULL);
  V.vkDestroyDevice(d.device, NULL);
}
