/* SPDX-License-Identifier: Apache-2.0
 *
 * Vulkan devices: physical device checks, logical devices adr creates and
 * VkDevices it adopts from the application, the list of open devices,
 * device info and properties, native handles, pointer queries.
 *
 * Lazy opening: init creates the instance and enumerates physical devices;
 * device_open reads only physical-device queries (properties, memory
 * properties, queue families, extensions), so adr-info and ADR_DEVICE
 * create no VkDevice. vkb_device_open_native makes the VkDevice, its
 * queue, the timeline, the memory types and the default stream's command
 * pool on the first call that needs them (the wrappers in
 * vulkan_backend.c). Locking: open_lock is taken only on that first use,
 * double-checked with `opened` (acquire/release).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vulkan_internal.h"

static pthread_mutex_t g_devices_lock = PTHREAD_MUTEX_INITIALIZER;
static struct adr_backend_device* g_devices;

void vkb_devices_lock(bool lock) {
  if (lock)
    pthread_mutex_lock(&g_devices_lock);
  else
    pthread_mutex_unlock(&g_devices_lock);
}

struct adr_backend_device* vkb_devices_first(void) {
  return g_devices;
}

/* ---- physical devices -------------------------------------------------------- */

struct vkb_caps {
  VkPhysicalDeviceProperties props;
  bool bda, timeline;
  char reason[256]; /* empty when usable */
};

static void physical_caps(struct vkb_instance* in, VkPhysicalDevice pd, struct vkb_caps* c) {
  memset(c, 0, sizeof(*c));
  in->vkGetPhysicalDeviceProperties(pd, &c->props);
  if (c->props.apiVersion < VK_API_VERSION_1_2) {
    snprintf(c->reason, sizeof(c->reason), "supports Vulkan %u.%u, adr needs 1.2",
             VK_API_VERSION_MAJOR(c->props.apiVersion), VK_API_VERSION_MINOR(c->props.apiVersion));
    return;
  }
  VkPhysicalDeviceVulkan12Features f12 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                  .pNext = &f12};
  in->vkGetPhysicalDeviceFeatures2(pd, &f2);
  c->bda = f12.bufferDeviceAddress;
  c->timeline = f12.timelineSemaphore;
  if (!c->bda && !c->timeline)
    snprintf(c->reason, sizeof(c->reason), "no bufferDeviceAddress and no timelineSemaphore");
  else if (!c->bda)
    snprintf(c->reason, sizeof(c->reason), "no bufferDeviceAddress");
  else if (!c->timeline)
    snprintf(c->reason, sizeof(c->reason), "no timelineSemaphore");
}

static bool family_transfers(VkQueueFlags f) {
  return (f & (VK_QUEUE_GRAPHICS_BIT | VK_QUEUE_COMPUTE_BIT | VK_QUEUE_TRANSFER_BIT)) != 0;
}

/* The queue family adr uses on its own devices: compute-capable first
 * (applications can then dispatch on adr's queue), else any transfer one. */
static int pick_family(struct vkb_instance* in, VkPhysicalDevice pd, uint32_t* out) {
  uint32_t n = 0;
  in->vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, NULL);
  VkQueueFamilyProperties q[32];
  if (n > 32) n = 32;
  in->vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, q);
  int best = -1;
  for (uint32_t i = 0; i < n; i++) {
    if (q[i].queueCount == 0 || !family_transfers(q[i].queueFlags)) continue;
    if (best < 0 ||
        ((q[i].queueFlags & VK_QUEUE_COMPUTE_BIT) && !(q[best].queueFlags & VK_QUEUE_COMPUTE_BIT)))
      best = (int)i;
  }
  if (best < 0) return ENODEV;
  *out = (uint32_t)best;
  return 0;
}

static bool device_has_extension(struct vkb_instance* in, VkPhysicalDevice pd, const char* name) {
  uint32_t n = 0;
  if (in->vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL) != VK_SUCCESS || n == 0)
    return false;
  VkExtensionProperties* p = calloc(n, sizeof(*p));
  if (p == NULL) return false;
  bool found = false;
  if (in->vkEnumerateDeviceExtensionProperties(pd, NULL, &n, p) == VK_SUCCESS)
    for (uint32_t i = 0; i < n && !found; i++) found = strcmp(p[i].extensionName, name) == 0;
  free(p);
  return found;
}

/* ---- logical devices --------------------------------------------------------- */

static void device_free(struct adr_backend_device* dev) {
  if (dev->inst != NULL && dev->inst != &vkb_g.instance) free(dev->inst);
  free(dev);
}

/* Everything after the VkDevice and its queue exist: dispatch table,
 * properties, semaphore, memory types, default stream. On failure the
 * caller destroys what this made with device_teardown. */
static int device_setup(struct adr_backend_device* dev, struct adr_error* error) {
#define VKB_X(name)                                                                              \
  dev->fn.name = (PFN_##name)(void (*)(void))dev->inst->vkGetDeviceProcAddr(dev->device, #name); \
  if (dev->fn.name == NULL)                                                                      \
    return vkb_errorf(error, ENOTSUP, "VK_ERROR_INITIALIZATION_FAILED: %s not available", #name);
  VKB_DEVICE_FNS(VKB_X)
#undef VKB_X
  if (dev->queue == VK_NULL_HANDLE)
    dev->fn.vkGetDeviceQueue(dev->device, dev->queue_family, dev->queue_index, &dev->queue);

  VkSemaphoreTypeCreateInfo sti = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                   .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE,
                                   .initialValue = 0};
  VkSemaphoreCreateInfo sci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &sti};
  VkResult r = dev->fn.vkCreateSemaphore(dev->device, &sci, NULL, &dev->timeline);
  if (r != VK_SUCCESS) {
    dev->timeline = VK_NULL_HANDLE;
    return vkb_check(r, error, "vkCreateSemaphore(timeline)");
  }
  int st = vkb_memory_init(dev, error);
  if (st != 0) return st;
  struct adr_backend_stream* s = dev->default_stream;
  if (s == NULL) return vkb_stream_create(dev, ADR_BACKEND_STREAM_DEFAULT, &s, error);
  /* The default stream handed out by device_open: give it its pool and
   * link it like vkb_stream_create does. */
  VkCommandPoolCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT |
                                         VK_COMMAND_POOL_CREATE_TRANSIENT_BIT,
                                .queueFamilyIndex = dev->queue_family};
  r = dev->fn.vkCreateCommandPool(dev->device, &ci, NULL, &s->pool);
  if (r != VK_SUCCESS) {
    s->pool = VK_NULL_HANDLE;
    return vkb_check(r, error, "vkCreateCommandPool");
  }
  pthread_mutex_lock(&dev->objects_lock);
  s->prev = NULL;
  s->next = dev->streams;
  if (s->next != NULL) s->next->prev = s;
  dev->streams = s;
  pthread_mutex_unlock(&dev->objects_lock);
  return 0;
}

/* What the physical device tells without a VkDevice: properties, driver,
 * memory heaps and types. */
static void device_describe(struct adr_backend_device* dev) {
  VkPhysicalDeviceDriverProperties drv = {.sType =
                                              VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                    .pNext = &drv};
  dev->inst->vkGetPhysicalDeviceProperties2(dev->physical, &p2);
  dev->props = p2.properties;
  snprintf(dev->driver_name, sizeof(dev->driver_name), "%s%s%s", drv.driverName,
           drv.driverInfo[0] ? " " : "", drv.driverInfo);
  dev->inst->vkGetPhysicalDeviceMemoryProperties(dev->physical, &dev->memprops);
}

/* The default stream of a device not opened yet: what vkb_stream_create
 * would make, without the command pool (device_setup adds it). */
static int default_stream_alloc(struct adr_backend_device* dev, struct adr_error* error) {
  struct adr_backend_stream* s = calloc(1, sizeof(*s));
  if (s == NULL) return vkb_errorf(error, ENOMEM, "out of host memory");
  s->dev = dev;
  pthread_mutex_init(&s->lock, NULL);
  s->is_default = true;
  dev->default_stream = s;
  return 0;
}

/* Frees the default stream if device_setup never linked it (no pool). */
static void default_stream_free_unlinked(struct adr_backend_device* dev) {
  struct adr_backend_stream* s = dev->default_stream;
  if (s == NULL || s->pool != VK_NULL_HANDLE) return;
  dev->default_stream = NULL;
  pthread_mutex_destroy(&s->lock);
  free(s);
}

/* Destroys what adr made on the device; the VkDevice too unless adopted. */
static void device_release_vulkan(struct adr_backend_device* dev) {
  if (dev->released) return;
  dev->released = true;
  if (dev->timeline != VK_NULL_HANDLE && dev->fn.vkWaitSemaphores != NULL)
    vkb_timeline_wait(dev, dev->next_value, NULL);
  while (dev->events != NULL) vkb_event_release(dev->events);
  while (dev->streams != NULL) vkb_stream_release(dev->streams);
  if (dev->fn.vkDestroyBuffer != NULL) {
    vkb_staging_release(dev);
    vkb_memory_release(dev);
  }
  if (dev->timeline != VK_NULL_HANDLE) dev->fn.vkDestroySemaphore(dev->device, dev->timeline, NULL);
  dev->timeline = VK_NULL_HANDLE;
  if (!dev->adopted && dev->device != VK_NULL_HANDLE) {
    PFN_vkDestroyDevice destroy = dev->fn.vkDestroyDevice;
    if (destroy == NULL)
      destroy = (PFN_vkDestroyDevice)(void (*)(void))dev->inst->vkGetDeviceProcAddr(
          dev->device, "vkDestroyDevice");
    if (destroy != NULL) destroy(dev->device, NULL);
  }
  dev->device = VK_NULL_HANDLE;
}

static void device_teardown(struct adr_backend_device* dev) {
  device_release_vulkan(dev);
  default_stream_free_unlinked(dev);
  pthread_mutex_destroy(&dev->open_lock);
  pthread_mutex_destroy(&dev->queue_lock);
  pthread_mutex_destroy(&dev->mem_lock);
  pthread_mutex_destroy(&dev->staging_lock);
  pthread_mutex_destroy(&dev->objects_lock);
}

static struct adr_backend_device* device_alloc(int64_t id) {
  struct adr_backend_device* dev = calloc(1, sizeof(*dev));
  if (dev == NULL) return NULL;
  dev->id = id;
  pthread_mutex_init(&dev->queue_lock, NULL);
  vkb_queue_lock_init(dev);
  pthread_mutex_init(&dev->mem_lock, NULL);
  pthread_mutex_init(&dev->staging_lock, NULL);
  pthread_mutex_init(&dev->objects_lock, NULL);
  pthread_mutex_init(&dev->open_lock, NULL);
  atomic_init(&dev->opened, false);
  return dev;
}

static void device_register(struct adr_backend_device* dev) {
  pthread_mutex_lock(&g_devices_lock);
  dev->next_open = g_devices;
  g_devices = dev;
  pthread_mutex_unlock(&g_devices_lock);
  /* Again after the driver made its device (see vkb_atexit); the handler
   * runs its work once. */
  atexit(vkb_atexit);
}

int vkb_device_count(ArrowDeviceType type, int64_t* out, struct adr_error* error) {
  (void)error;
  *out = type == ARROW_DEVICE_VULKAN ? (int64_t)vkb_g.physical_count : 0;
  return 0;
}

int vkb_device_open(ArrowDeviceType type, int64_t id, struct adr_backend_device** out,
                    struct adr_error* error) {
  if (type != ARROW_DEVICE_VULKAN || id < 0 || (uint64_t)id >= vkb_g.physical_count)
    return vkb_errorf(error, ENODEV, "vulkan:%" PRId64 " does not exist (%u device(s))", id,
                      vkb_g.physical_count);
  struct vkb_instance* in = &vkb_g.instance;
  VkPhysicalDevice pd = vkb_g.physical[id];
  struct vkb_caps caps;
  physical_caps(in, pd, &caps);
  if (caps.reason[0] != '\0')
    return vkb_errorf(error, ENODEV, "vulkan:%" PRId64 " (%s) is unusable: %s", id,
                      caps.props.deviceName, caps.reason);
  uint32_t family = 0;
  if (pick_family(in, pd, &family) != 0)
    return vkb_errorf(error, ENODEV, "vulkan:%" PRId64 " (%s) is unusable: %s", id,
                      caps.props.deviceName, "no queue family supports transfers");

  struct adr_backend_device* dev = device_alloc(id);
  if (dev == NULL) return vkb_errorf(error, ENOMEM, "out of host memory");
  dev->inst = in;
  dev->physical = pd;
  dev->queue_family = family;
  dev->has_budget = device_has_extension(in, pd, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
  dev->has_memory_fd = device_has_extension(in, pd, VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME);
  device_describe(dev);
  int st = default_stream_alloc(dev, error);
  if (st != 0) {
    device_teardown(dev);
    device_free(dev);
    return st;
  }
  device_register(dev);
  *out = dev;
  return 0;
}

/* The slow path of vkb_device_ensure: the logical device and what hangs on
 * it. A failure releases what was made and is kept for later calls. */
int vkb_device_open_native(struct adr_backend_device* dev, struct adr_error* error) {
  pthread_mutex_lock(&dev->open_lock);
  if (atomic_load_explicit(&dev->opened, memory_order_relaxed)) {
    pthread_mutex_unlock(&dev->open_lock);
    return 0;
  }
  if (dev->open_status == 0) {
    struct adr_error e = {{0}};
    float priority = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                   .queueFamilyIndex = dev->queue_family,
                                   .queueCount = 1,
                                   .pQueuePriorities = &priority};
    VkPhysicalDeviceVulkan12Features f12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
        .bufferDeviceAddress = VK_TRUE,
        .timelineSemaphore = VK_TRUE};
    const char* exts[2];
    uint32_t ext_count = 0;
    if (dev->has_budget) exts[ext_count++] = VK_EXT_MEMORY_BUDGET_EXTENSION_NAME;
    /* Sharing with other processes (vulkan_share.c); VK_KHR_external_memory
     * itself is core since Vulkan 1.1. */
    if (dev->has_memory_fd) exts[ext_count++] = VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME;
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                              .pNext = &f12,
                              .queueCreateInfoCount = 1,
                              .pQueueCreateInfos = &qci,
                              .enabledExtensionCount = ext_count,
                              .ppEnabledExtensionNames = exts};
    VkResult r = dev->inst->vkCreateDevice(dev->physical, &dci, NULL, &dev->device);
    int st;
    if (r != VK_SUCCESS) {
      dev->device = VK_NULL_HANDLE;
      st = vkb_check(r, &e, "vkCreateDevice(vulkan:%" PRId64 ", %s)", dev->id,
                     dev->props.deviceName);
    } else {
      st = device_setup(dev, &e);
      if (st != 0) device_release_vulkan(dev);
      if (st == 0 && dev->has_memory_fd)
        dev->get_memory_fd = (PFN_vkGetMemoryFdKHR)(void (*)(void))dev->inst->vkGetDeviceProcAddr(
            dev->device, "vkGetMemoryFdKHR");
    }
    if (st == 0) {
      atomic_store_explicit(&dev->opened, true, memory_order_release);
      /* Again after the driver made its device (see vkb_atexit). */
      atexit(vkb_atexit);
      adr_host_log(ADR_LOG_INFO, "vulkan:%" PRId64 ": VkDevice created on first use", dev->id);
    } else {
      dev->open_status = st;
      snprintf(dev->open_message, sizeof(dev->open_message), "%s", e.message);
    }
  }
  int st = dev->open_status;
  if (st != 0 && error != NULL)
    snprintf(error->message, sizeof(error->message), "%s", dev->open_message);
  pthread_mutex_unlock(&dev->open_lock);
  return st;
}

int vkb_device_adopt(ArrowDeviceType type, int64_t id, const void* native_desc,
                     struct adr_backend_device** out, struct adr_error* error) {
  const struct adr_vulkan_adopt_desc* d = native_desc;
  if (type != ARROW_DEVICE_VULKAN)
    return vkb_errorf(error, EINVAL, "the Vulkan backend adopts only ARROW_DEVICE_VULKAN");
  if (d == NULL) return vkb_errorf(error, EINVAL, "native_desc is NULL");
  if (d->struct_size < offsetof(struct adr_vulkan_adopt_desc, reserved))
    return vkb_errorf(error, EINVAL,
                      "struct_size %u is smaller than struct adr_vulkan_adopt_desc (%zu)",
                      d->struct_size, offsetof(struct adr_vulkan_adopt_desc, reserved));
  if (d->instance == NULL || d->physical_device == NULL || d->device == NULL || d->queue == NULL)
    return vkb_errorf(error, EINVAL, "instance, physical_device, device and queue must all be set");
  if (d->api_version < VK_API_VERSION_1_2)
    return vkb_errorf(error, ENOTSUP, "api_version %u.%u: adr needs an instance of Vulkan 1.2+",
                      VK_API_VERSION_MAJOR(d->api_version), VK_API_VERSION_MINOR(d->api_version));
  struct vkb_instance* in = calloc(1, sizeof(*in));
  if (in == NULL) return vkb_errorf(error, ENOMEM, "out of host memory");
  in->handle = (VkInstance)d->instance;
  in->owned = false;
  in->api_version = d->api_version;
  in->gipa = d->get_instance_proc_addr != NULL
                 ? (PFN_vkGetInstanceProcAddr)(void (*)(void))d->get_instance_proc_addr
                 : vkb_g.gipa;
  const char* missing = NULL;
  if (in->gipa == NULL || !vkb_resolve_instance(in, &missing)) {
    free(in);
    return vkb_errorf(error, EINVAL, "cannot resolve %s on the given instance",
                      missing ? missing : "vkGetInstanceProcAddr");
  }
  VkPhysicalDevice pd = (VkPhysicalDevice)d->physical_device;
  struct vkb_caps caps;
  physical_caps(in, pd, &caps);
  if (caps.reason[0] != '\0') {
    free(in);
    return vkb_errorf(error, ENOTSUP, "%s is unusable: %s", caps.props.deviceName, caps.reason);
  }
  uint32_t nf = 0;
  in->vkGetPhysicalDeviceQueueFamilyProperties(pd, &nf, NULL);
  VkQueueFamilyProperties q[32];
  if (nf > 32) nf = 32;
  in->vkGetPhysicalDeviceQueueFamilyProperties(pd, &nf, q);
  if (d->queue_family_index >= nf || d->queue_index >= q[d->queue_family_index].queueCount ||
      !family_transfers(q[d->queue_family_index].queueFlags)) {
    free(in);
    return vkb_errorf(error, EINVAL,
                      "queue family %u index %u does not exist or cannot transfer (%u families)",
                      d->queue_family_index, d->queue_index, nf);
  }
  /* Two adr devices on one queue would submit to it under two different
   * locks: refuse adopting a queue adr already uses. */
  pthread_mutex_lock(&g_devices_lock);
  int64_t taken = -1;
  for (struct adr_backend_device* o = g_devices; o != NULL && taken < 0; o = o->next_open)
    if (o->queue == (VkQueue)d->queue) taken = o->id;
  pthread_mutex_unlock(&g_devices_lock);
  if (taken >= 0) {
    free(in);
    return vkb_errorf(error, EINVAL,
                      "the queue %p is already used by vulkan:%" PRId64
                      " (use that device, or give adr a queue of its own)",
                      d->queue, taken);
  }
  struct adr_backend_device* dev = device_alloc(id);
  if (dev == NULL) {
    free(in);
    return vkb_errorf(error, ENOMEM, "out of host memory");
  }
  dev->adopted = true;
  vkb_queue_share(dev);
  dev->inst = in;
  dev->physical = pd;
  dev->device = (VkDevice)d->device;
  dev->queue = (VkQueue)d->queue;
  dev->queue_family = d->queue_family_index;
  dev->queue_index = d->queue_index;
  device_describe(dev);
  atomic_init(&dev->opened, true); /* the application's VkDevice is open */
  int st = device_setup(dev, error);
  if (st != 0) {
    device_teardown(dev);
    device_free(dev);
    return st;
  }
  device_register(dev);
  *out = dev;
  return 0;
}

void vkb_device_close(struct adr_backend_device* dev) {
  pthread_mutex_lock(&g_devices_lock);
  for (struct adr_backend_device** p = &g_devices; *p != NULL; p = &(*p)->next_open) {
    if (*p == dev) {
      *p = dev->next_open;
      break;
    }
  }
  pthread_mutex_unlock(&g_devices_lock);
  device_teardown(dev);
  device_free(dev);
}

/* ---- info and properties ----------------------------------------------------- */

static const char* vendor_name(uint32_t id) {
  switch (id) {
    case 0x1002:
      return "AMD";
    case 0x1010:
      return "ImgTec";
    case 0x10DE:
      return "NVIDIA";
    case 0x13B5:
      return "ARM";
    case 0x5143:
      return "Qualcomm";
    case 0x8086:
      return "Intel";
    case VK_VENDOR_ID_MESA:
      return "Mesa";
    default:
      return NULL;
  }
}

static const char* type_name(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return "integrated-gpu";
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return "discrete-gpu";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return "virtual-gpu";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return "cpu";
    default:
      return "other";
  }
}

static void budget(struct adr_backend_device* dev, uint64_t* out_total, uint64_t* out_free) {
  VkPhysicalDeviceMemoryBudgetPropertiesEXT b = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
  VkPhysicalDeviceMemoryProperties2 m2 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2,
      .pNext = dev->has_budget ? &b : NULL};
  dev->inst->vkGetPhysicalDeviceMemoryProperties2(dev->physical, &m2);
  const VkPhysicalDeviceMemoryProperties* mp = &m2.memoryProperties;
  bool any_local = false;
  for (uint32_t h = 0; h < mp->memoryHeapCount; h++)
    any_local |= (mp->memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0;
  uint64_t total = 0, free_bytes = 0;
  for (uint32_t h = 0; h < mp->memoryHeapCount; h++) {
    if (any_local && !(mp->memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)) continue;
    total += mp->memoryHeaps[h].size;
    if (dev->has_budget && b.heapBudget[h] > b.heapUsage[h])
      free_bytes += b.heapBudget[h] - b.heapUsage[h];
  }
  *out_total = total;
  *out_free = free_bytes > total ? total : free_bytes;
}

/* Kind (deviceType; a virtual GPU counts as a GPU), UUID
 * (VkPhysicalDeviceIDProperties::deviceUUID, core since 1.1) and PCI
 * address (VK_EXT_pci_bus_info, where the driver has it), from physical
 * device queries only: no VkDevice. An all-zero deviceUUID is no UUID. */
static void device_identity(struct adr_backend_device* dev, struct adr_device_info* out) {
  switch (dev->props.deviceType) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      out->kind = ADR_DEVICE_KIND_GPU;
      break;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      out->kind = ADR_DEVICE_KIND_INTEGRATED_GPU;
      break;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      out->kind = ADR_DEVICE_KIND_CPU;
      break;
    default:
      out->kind = ADR_DEVICE_KIND_OTHER;
      break;
  }
  VkPhysicalDevicePCIBusInfoPropertiesEXT pci = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PCI_BUS_INFO_PROPERTIES_EXT};
  bool has_pci = device_has_extension(dev->inst, dev->physical, VK_EXT_PCI_BUS_INFO_EXTENSION_NAME);
  VkPhysicalDeviceIDProperties id = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES,
                                     .pNext = has_pci ? &pci : NULL};
  VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                    .pNext = &id};
  dev->inst->vkGetPhysicalDeviceProperties2(dev->physical, &p2);
  static const uint8_t zero[VK_UUID_SIZE];
  if (memcmp(id.deviceUUID, zero, VK_UUID_SIZE) != 0) {
    memcpy(out->uuid, id.deviceUUID, sizeof(out->uuid));
    out->identity |= ADR_DEVICE_HAS_UUID;
  }
  if (has_pci) {
    out->pci_domain = pci.pciDomain;
    out->pci_bus = (uint8_t)pci.pciBus;
    out->pci_device = (uint8_t)pci.pciDevice;
    out->pci_function = (uint8_t)pci.pciFunction;
    out->identity |= ADR_DEVICE_HAS_PCI_BUS_ID;
  }
}

int vkb_device_info(struct adr_backend_device* dev, struct adr_device_info* out,
                    struct adr_error* error) {
  (void)error;
  snprintf(out->name, sizeof(out->name), "%s", dev->props.deviceName);
  const char* v = vendor_name(dev->props.vendorID);
  if (v != NULL)
    snprintf(out->vendor, sizeof(out->vendor), "%s", v);
  else
    snprintf(out->vendor, sizeof(out->vendor), "0x%04x", dev->props.vendorID);
  snprintf(out->driver, sizeof(out->driver), "%.*s", (int)sizeof(out->driver) - 1,
           dev->driver_name);
  budget(dev, &out->memory_total, &out->memory_free);
  out->caps = ADR_CAP_ASYNC_STREAMS | ADR_CAP_STREAM_ORDERED_ALLOC | ADR_CAP_DEVICE_ADDRESSES |
              ADR_CAP_IMPORT_NATIVE | ADR_CAP_SYNC_DOWNLOADS;
  out->alignment = 64;
  device_identity(dev, out);
  return 0;
}

static void emitf(adr_property_fn emit, void* ctx, const char* key, const char* fmt, ...)
    ADR_PRINTF(4, 5);
static void emitf(adr_property_fn emit, void* ctx, const char* key, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  emit(ctx, key, buf);
}

static void format_bytes(char* buf, size_t n, uint64_t v) {
  if (v >= (1ull << 30) && v % (1ull << 20) == 0)
    snprintf(buf, n, "%.2f GiB", (double)v / (double)(1ull << 30));
  else if (v >= (1ull << 20))
    snprintf(buf, n, "%.2f MiB", (double)v / (double)(1ull << 20));
  else
    snprintf(buf, n, "%" PRIu64 " bytes", v);
}

int vkb_device_properties(struct adr_backend_device* dev, adr_property_fn emit, void* ctx,
                          struct adr_error* error) {
  (void)error;
  const VkPhysicalDeviceProperties* p = &dev->props;
  char a[64], b[64];
  emitf(emit, ctx, "device_name", "%s", p->deviceName);
  emitf(emit, ctx, "device_type", "%s", type_name(p->deviceType));
  emitf(emit, ctx, "api_version", "%u.%u.%u", VK_API_VERSION_MAJOR(p->apiVersion),
        VK_API_VERSION_MINOR(p->apiVersion), VK_API_VERSION_PATCH(p->apiVersion));
  emitf(emit, ctx, "driver_version", "0x%08x", p->driverVersion);
  emitf(emit, ctx, "driver", "%s", dev->driver_name);
  emitf(emit, ctx, "vendor_id", "0x%04x", p->vendorID);
  emitf(emit, ctx, "device_id", "0x%04x", p->deviceID);
  struct vkb_caps caps;
  physical_caps(dev->inst, dev->physical, &caps);
  emit(ctx, "usable", caps.reason[0] ? caps.reason : "yes");
  emit(ctx, "buffer_device_address", caps.bda ? "yes" : "no");
  emit(ctx, "timeline_semaphore", caps.timeline ? "yes" : "no");
  emit(ctx, "adopted", dev->adopted ? "yes" : "no");
  for (uint32_t h = 0; h < dev->memprops.memoryHeapCount; h++) {
    char key[32];
    snprintf(key, sizeof(key), "heap[%u]", h);
    format_bytes(a, sizeof(a), dev->memprops.memoryHeaps[h].size);
    emitf(emit, ctx, key, "%s%s%s", a,
          (dev->memprops.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) ? " device-local"
                                                                                 : "",
          (dev->memprops.memoryHeaps[h].flags & VK_MEMORY_HEAP_MULTI_INSTANCE_BIT)
              ? " multi-instance"
              : "");
  }
  for (uint32_t t = 0; t < dev->memprops.memoryTypeCount; t++) {
    char key[40];
    snprintf(key, sizeof(key), "memory_type[%u]", t);
    VkMemoryPropertyFlags f = dev->memprops.memoryTypes[t].propertyFlags;
    emitf(emit, ctx, key, "heap %u:%s%s%s%s%s%s", dev->memprops.memoryTypes[t].heapIndex,
          (f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) ? " device-local" : "",
          (f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) ? " host-visible" : "",
          (f & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) ? " host-coherent" : "",
          (f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT) ? " host-cached" : "",
          (f & VK_MEMORY_PROPERTY_LAZILY_ALLOCATED_BIT) ? " lazily-allocated" : "",
          (f & VK_MEMORY_PROPERTY_PROTECTED_BIT) ? " protected" : "");
  }
  uint32_t nf = 0;
  dev->inst->vkGetPhysicalDeviceQueueFamilyProperties(dev->physical, &nf, NULL);
  VkQueueFamilyProperties q[32];
  if (nf > 32) nf = 32;
  dev->inst->vkGetPhysicalDeviceQueueFamilyProperties(dev->physical, &nf, q);
  for (uint32_t i = 0; i < nf; i++) {
    char key[40];
    snprintf(key, sizeof(key), "queue_family[%u]", i);
    VkQueueFlags f = q[i].queueFlags;
    emitf(emit, ctx, key, "%u queue(s):%s%s%s%s%s", q[i].queueCount,
          (f & VK_QUEUE_GRAPHICS_BIT) ? " graphics" : "",
          (f & VK_QUEUE_COMPUTE_BIT) ? " compute" : "",
          (f & VK_QUEUE_TRANSFER_BIT) ? " transfer" : "",
          (f & VK_QUEUE_SPARSE_BINDING_BIT) ? " sparse" : "",
          i == dev->queue_family ? " (used by adr)" : "");
  }
  emitf(emit, ctx, "max_memory_allocation_count", "%u", p->limits.maxMemoryAllocationCount);
  emit(ctx, "logical_device",
       vkb_device_opened(dev) ? "created" : "not created yet (made on first use)");
  if (!vkb_device_opened(dev)) {
    /* Block size, memory types and copy paths are chosen with the VkDevice. */
    emit(ctx, "copy_path", "chosen when the device is created");
  } else {
    format_bytes(a, sizeof(a), dev->max_alloc);
    emit(ctx, "max_allocation", a);
    format_bytes(b, sizeof(b), dev->block_size);
    emit(ctx, "block_size", b);
    emitf(emit, ctx, "allocation_memory_type", "%u", dev->alloc_types[0]);
    emitf(emit, ctx, "staging_memory_type", "%u", dev->staging_type);
    emit(ctx, "copy_path", dev->mapped_copies ? "mapped" : "staging");
    emit(ctx, "download_path", dev->mapped_reads ? "mapped" : "staging");
    emit(ctx, "device_copy_path",
         dev->host_is_device ? "host memmove when the stream is idle, else vkCmdCopyBuffer"
                             : "vkCmdCopyBuffer");
  }
  pthread_mutex_lock(&dev->mem_lock);
  size_t blocks = dev->block_count, live = dev->live_count;
  uint64_t reserved = dev->bytes_reserved;
  pthread_mutex_unlock(&dev->mem_lock);
  emitf(emit, ctx, "memory_blocks", "%zu", blocks);
  emitf(emit, ctx, "live_allocations", "%zu", live);
  format_bytes(a, sizeof(a), reserved);
  emit(ctx, "memory_reserved", a);
  emit(ctx, "validation",
       vkb_g.validation == VKB_VALIDATION_OFF  ? "off"
       : vkb_g.validation == VKB_VALIDATION_ON ? "on"
                                               : "fatal");
  emitf(emit, ctx, "validation_messages", "%" PRIu64, atomic_load(&vkb_g.validation_messages));
  /* Devices of the instance adr could not use, with the reason. */
  if (!dev->adopted) {
    for (uint32_t i = 0; i < vkb_g.physical_count; i++) {
      struct vkb_caps c;
      physical_caps(&vkb_g.instance, vkb_g.physical[i], &c);
      if (c.reason[0] == '\0') continue;
      char key[40];
      snprintf(key, sizeof(key), "unusable[vulkan:%u]", i);
      emitf(emit, ctx, key, "%s: %s", c.props.deviceName, c.reason);
    }
  }
  return 0;
}

int vkb_device_native(struct adr_backend_device* dev, int kind, void** out,
                      struct adr_error* error) {
  if (kind == ADR_NATIVE_CONTEXT || kind == ADR_NATIVE_QUEUE ||
      kind == ADR_VULKAN_NATIVE_QUEUE_LOCK || kind == ADR_VULKAN_NATIVE_TIMELINE_SEMAPHORE ||
      kind == ADR_VULKAN_NATIVE_BUFFER) {
    int st = vkb_device_ensure(dev, error);
    if (st != 0) return st;
  }
  switch (kind) {
    case ADR_NATIVE_PLATFORM:
      *out = (void*)dev->inst->handle;
      return 0;
    case ADR_NATIVE_DEVICE:
      *out = (void*)dev->physical;
      return 0;
    case ADR_NATIVE_CONTEXT:
      *out = (void*)dev->device;
      return 0;
    case ADR_NATIVE_QUEUE:
      vkb_queue_share(dev);
      *out = (void*)dev->queue;
      return 0;
    case ADR_VULKAN_NATIVE_QUEUE_LOCK:
      vkb_queue_share(dev);
      *out = (void*)&dev->queue_lock_api;
      return 0;
    case ADR_NATIVE_QUEUE_FAMILY:
      *out = (void*)(uintptr_t)dev->queue_family;
      return 0;
    case ADR_VULKAN_NATIVE_GET_INSTANCE_PROC_ADDR:
      *out = (void*)(uintptr_t)dev->inst->gipa;
      return 0;
    case ADR_VULKAN_NATIVE_TIMELINE_SEMAPHORE:
      *out = (void*)dev->timeline;
      return 0;
    case ADR_VULKAN_NATIVE_BUFFER:
      if (*out == NULL)
        return vkb_errorf(error, EINVAL,
                          "ADR_VULKAN_NATIVE_BUFFER needs *out to point to a struct "
                          "adr_vulkan_buffer");
      return vkb_buffer_lookup(dev, (struct adr_vulkan_buffer*)*out, error);
    case ADR_VULKAN_NATIVE_EVENT_SOURCE:
      if (*out == NULL)
        return vkb_errorf(error, EINVAL,
                          "ADR_VULKAN_NATIVE_EVENT_SOURCE needs *out to point to a struct "
                          "adr_vulkan_event_source");
      return vkb_event_source_set(dev, (struct adr_vulkan_event_source*)*out, error);
    default:
      return vkb_errorf(error, ENOTSUP,
                        "native kind %d is not one the Vulkan backend has (see adr/vulkan.h)",
                        kind);
  }
}

int vkb_pointer_query(const void* ptr, ArrowDeviceType* out_type, int64_t* out_id,
                      struct adr_error* error) {
  pthread_mutex_lock(&g_devices_lock);
  struct adr_backend_device* found = NULL;
  for (struct adr_backend_device* d = g_devices; d != NULL && found == NULL; d = d->next_open)
    if (vkb_owns(d, ptr)) found = d;
  if (found != NULL) {
    *out_type = ARROW_DEVICE_VULKAN;
    *out_id = found->id;
  }
  pthread_mutex_unlock(&g_devices_lock);
  if (found == NULL) return vkb_errorf(error, ENOENT, "%p is not a Vulkan allocation", ptr);
  return 0;
}

void vkb_devices_release_all(void) {
  pthread_mutex_lock(&g_devices_lock);
  for (struct adr_backend_device* d = g_devices; d != NULL; d = d->next_open)
    device_release_vulkan(d);
  pthread_mutex_unlock(&g_devices_lock);
}
