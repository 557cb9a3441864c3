/* SPDX-License-Identifier: Apache-2.0
 *
 * The Vulkan backend's entry point and vtable: loading libvulkan.so.1,
 * the instance (with the validation layer on request), physical devices in
 * loader order as device ids, logical devices, adoption of an
 * application's VkDevice, device info and properties, native handles.
 *
 * Environment (read once in init through the host's getenv):
 *   ADR_VULKAN_VALIDATION  off (default) | on | fatal
 *       on: enable VK_LAYER_KHRONOS_validation and a VK_EXT_debug_utils
 *       messenger; validation warnings/errors are logged and counted.
 *       fatal: as on, and a process that saw any validation message exits
 *       with status 70 when adr shuts down (at exit, after every device
 *       was closed, so leak reports from vkDestroyDevice count too).
 *   ADR_VULKAN_COPY        auto (default) | mapped | staging
 *       staging forces host <-> device copies through the staging ring
 *       even where device memory is host-visible.
 *   ADR_VULKAN_BLOCK_SIZE  bytes per VkDeviceMemory block (K/M/G suffix
 *       allowed, a power of two from 64K); default 64M or less on small
 *       heaps.
 */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vk_internal.h"

#define VKB_LIBVULKAN "libvulkan.so.1"
#define VKB_VALIDATION_LAYER "VK_LAYER_KHRONOS_validation"
#define VKB_FATAL_EXIT_STATUS 70

struct vkb_globals vkb_g;

static pthread_mutex_t g_devices_lock = PTHREAD_MUTEX_INITIALIZER;
static void vk_atexit(void);
static void device_release_vulkan(struct adr_backend_device* dev);
static struct adr_backend_device* g_devices;
static bool g_shut_down;

void vkb_devices_lock(bool lock) {
  if (lock)
    pthread_mutex_lock(&g_devices_lock);
  else
    pthread_mutex_unlock(&g_devices_lock);
}

struct adr_backend_device* vkb_devices_first(void) {
  return g_devices;
}

void vkb_log(int level, const char* fmt, ...) {
  const struct adr_backend_host* h = vkb_g.host;
  if (h == NULL || h->log == NULL) return;
  if (h->log_level != NULL && level > h->log_level()) return;
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  h->log(level, VKB_NAME, "%s", buf);
}

static const char* env(const char* name) {
  const struct adr_backend_host* h = vkb_g.host;
  if (h == NULL || h->struct_size < offsetof(struct adr_backend_host, log_level) ||
      h->getenv == NULL)
    return NULL;
  return h->getenv(name);
}

/* ---- environment ------------------------------------------------------------ */

static int parse_environment(struct adr_error* error) {
  const char* v = env("ADR_VULKAN_VALIDATION");
  vkb_g.validation = VKB_VALIDATION_OFF;
  if (v != NULL && v[0] != '\0') {
    if (strcmp(v, "off") == 0 || strcmp(v, "0") == 0)
      vkb_g.validation = VKB_VALIDATION_OFF;
    else if (strcmp(v, "on") == 0 || strcmp(v, "1") == 0)
      vkb_g.validation = VKB_VALIDATION_ON;
    else if (strcmp(v, "fatal") == 0)
      vkb_g.validation = VKB_VALIDATION_FATAL;
    else
      return vkb_fail(error, EINVAL, "init",
                      "ADR_VULKAN_VALIDATION=\"%s\": column 1: expected off, on or fatal", v);
  }
  v = env("ADR_VULKAN_COPY");
  vkb_g.copy_mode = VKB_COPY_AUTO;
  if (v != NULL && v[0] != '\0') {
    if (strcmp(v, "auto") == 0)
      vkb_g.copy_mode = VKB_COPY_AUTO;
    else if (strcmp(v, "mapped") == 0)
      vkb_g.copy_mode = VKB_COPY_MAPPED;
    else if (strcmp(v, "staging") == 0)
      vkb_g.copy_mode = VKB_COPY_STAGING;
    else
      return vkb_fail(error, EINVAL, "init",
                      "ADR_VULKAN_COPY=\"%s\": column 1: expected auto, mapped or staging", v);
  }
  v = env("ADR_VULKAN_BLOCK_SIZE");
  vkb_g.block_size_env = 0;
  if (v != NULL && v[0] != '\0') {
    char* end = NULL;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    size_t col = (size_t)(end - v) + 1;
    if (end == v || errno != 0 || v[0] == '-')
      return vkb_fail(error, EINVAL, "init",
                      "ADR_VULKAN_BLOCK_SIZE=\"%s\": column 1: expected a number of bytes", v);
    int shift = 0;
    if (*end == 'K' || *end == 'k') shift = 10;
    if (*end == 'M' || *end == 'm') shift = 20;
    if (*end == 'G' || *end == 'g') shift = 30;
    if (shift != 0) end++;
    if (*end != '\0')
      return vkb_fail(error, EINVAL, "init",
                      "ADR_VULKAN_BLOCK_SIZE=\"%s\": column %zu: expected K, M, G or the end", v,
                      col);
    if (n > (1ull << 40) >> shift)
      return vkb_fail(error, EINVAL, "init", "ADR_VULKAN_BLOCK_SIZE=\"%s\": too large", v);
    n <<= shift;
    if (n < 65536 || (n & (n - 1)) != 0)
      return vkb_fail(error, EINVAL, "init",
                      "ADR_VULKAN_BLOCK_SIZE=\"%s\": must be a power of two of at least 64K", v);
    vkb_g.block_size_env = n;
  }
  return 0;
}

/* ---- instance --------------------------------------------------------------- */

static VKAPI_ATTR VkBool32 VKAPI_CALL messenger_cb(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                   VkDebugUtilsMessageTypeFlagsEXT types,
                                                   const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                   void* user) {
  (void)user;
  bool counts = (types & (VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                          VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT)) &&
                severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT;
  int level = ADR_LOG_DEBUG;
  if (severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) level = ADR_LOG_WARN;
  if (severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) level = ADR_LOG_ERROR;
  if (counts) {
    atomic_fetch_add(&vkb_g.validation_messages, 1);
    if (vkb_g.validation == VKB_VALIDATION_FATAL) level = ADR_LOG_ERROR;
  }
  vkb_log(level, "validation%s: %s", counts ? "" : " (not counted)",
          data != NULL && data->pMessage != NULL ? data->pMessage : "(no message)");
  return VK_FALSE;
}

static bool resolve_instance(struct vkb_instance* in, const char** missing) {
#define VKB_X(name, req)                                              \
  in->name = (PFN_##name)(void (*)(void))in->gipa(in->handle, #name); \
  if (in->name == NULL && (req)) {                                    \
    *missing = #name;                                                 \
    return false;                                                     \
  }
  VKB_INSTANCE_FNS(VKB_X)
#undef VKB_X
  return true;
}

static bool has_layer(const char* name) {
  uint32_t n = 0;
  if (vkb_g.g.vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || n == 0) return false;
  VkLayerProperties* p = calloc(n, sizeof(*p));
  if (p == NULL) return false;
  bool found = false;
  if (vkb_g.g.vkEnumerateInstanceLayerProperties(&n, p) == VK_SUCCESS)
    for (uint32_t i = 0; i < n && !found; i++) found = strcmp(p[i].layerName, name) == 0;
  free(p);
  return found;
}

static bool has_instance_extension(const char* layer, const char* name) {
  uint32_t n = 0;
  if (vkb_g.g.vkEnumerateInstanceExtensionProperties(layer, &n, NULL) != VK_SUCCESS || n == 0)
    return false;
  VkExtensionProperties* p = calloc(n, sizeof(*p));
  if (p == NULL) return false;
  bool found = false;
  if (vkb_g.g.vkEnumerateInstanceExtensionProperties(layer, &n, p) == VK_SUCCESS)
    for (uint32_t i = 0; i < n && !found; i++) found = strcmp(p[i].extensionName, name) == 0;
  free(p);
  return found;
}

static int create_instance(struct adr_error* error) {
  uint32_t loader_version = VK_API_VERSION_1_0;
  if (vkb_g.g.vkEnumerateInstanceVersion != NULL)
    vkb_g.g.vkEnumerateInstanceVersion(&loader_version);
  if (loader_version < VK_API_VERSION_1_2)
    return vkb_fail(error, ENODEV, "init",
                    "unavailable: the Vulkan loader supports %u.%u, adr needs 1.2",
                    VK_API_VERSION_MAJOR(loader_version), VK_API_VERSION_MINOR(loader_version));

  const char* layers[1];
  const char* exts[1];
  uint32_t layer_count = 0, ext_count = 0;
  bool debug_utils = false;
  if (vkb_g.validation != VKB_VALIDATION_OFF) {
    if (!has_layer(VKB_VALIDATION_LAYER))
      return vkb_fail(
          error, ENOENT, "init",
          "VK_ERROR_LAYER_NOT_PRESENT: ADR_VULKAN_VALIDATION is set but " VKB_VALIDATION_LAYER
          " is not installed (Debian: vulkan-validationlayers)");
    layers[layer_count++] = VKB_VALIDATION_LAYER;
    if (!has_instance_extension(NULL, VK_EXT_DEBUG_UTILS_EXTENSION_NAME) &&
        !has_instance_extension(VKB_VALIDATION_LAYER, VK_EXT_DEBUG_UTILS_EXTENSION_NAME))
      return vkb_fail(error, ENOTSUP, "init",
                      "VK_ERROR_EXTENSION_NOT_PRESENT: ADR_VULKAN_VALIDATION "
                      "needs " VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    exts[ext_count++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
    debug_utils = true;
  }
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                           .pApplicationName = "adr",
                           .applicationVersion = VK_MAKE_API_VERSION(
                               0, ADR_VERSION_MAJOR, ADR_VERSION_MINOR, ADR_VERSION_PATCH),
                           .pEngineName = "adr",
                           .apiVersion = VK_API_VERSION_1_2};
  VkDebugUtilsMessengerCreateInfoEXT mci = {
      .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
      .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                         VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
      .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
      .pfnUserCallback = messenger_cb};
  VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                             .pNext = debug_utils ? &mci : NULL,
                             .pApplicationInfo = &app,
                             .enabledLayerCount = layer_count,
                             .ppEnabledLayerNames = layers,
                             .enabledExtensionCount = ext_count,
                             .ppEnabledExtensionNames = exts};
  VkInstance instance = VK_NULL_HANDLE;
  VkResult r = vkb_g.g.vkCreateInstance(&ci, NULL, &instance);
  if (r == VK_ERROR_INCOMPATIBLE_DRIVER)
    return vkb_fail(
        error, ENODEV, "init",
        "unavailable: no Vulkan driver (vkCreateInstance: VK_ERROR_INCOMPATIBLE_DRIVER)");
  if (r != VK_SUCCESS) return vkb_error(error, "init", r, "vkCreateInstance");

  struct vkb_instance* in = &vkb_g.instance;
  in->handle = instance;
  in->owned = true;
  in->api_version = VK_API_VERSION_1_2;
  in->gipa = vkb_g.gipa;
  const char* missing = NULL;
  if (!resolve_instance(in, &missing)) {
    PFN_vkDestroyInstance destroy =
        (PFN_vkDestroyInstance)(void (*)(void))vkb_g.gipa(instance, "vkDestroyInstance");
    if (destroy != NULL) destroy(instance, NULL);
    memset(in, 0, sizeof(*in));
    return vkb_fail(error, ENODEV, "init", "unavailable: the Vulkan loader lacks %s", missing);
  }
  if (debug_utils && in->vkCreateDebugUtilsMessengerEXT != NULL) {
    r = in->vkCreateDebugUtilsMessengerEXT(instance, &mci, NULL, &vkb_g.messenger);
    if (r != VK_SUCCESS) {
      in->vkDestroyInstance(instance, NULL);
      memset(in, 0, sizeof(*in));
      return vkb_error(error, "init", r, "vkCreateDebugUtilsMessengerEXT");
    }
  }
  uint32_t n = 0;
  r = in->vkEnumeratePhysicalDevices(instance, &n, NULL);
  if (r == VK_SUCCESS && n > 0) {
    vkb_g.physical = calloc(n, sizeof(VkPhysicalDevice));
    if (vkb_g.physical == NULL) r = VK_ERROR_OUT_OF_HOST_MEMORY;
    if (r == VK_SUCCESS) r = in->vkEnumeratePhysicalDevices(instance, &n, vkb_g.physical);
    if (r == VK_INCOMPLETE) r = VK_SUCCESS;
  }
  if (r != VK_SUCCESS) {
    free(vkb_g.physical);
    vkb_g.physical = NULL;
    if (vkb_g.messenger != VK_NULL_HANDLE)
      in->vkDestroyDebugUtilsMessengerEXT(instance, vkb_g.messenger, NULL);
    vkb_g.messenger = VK_NULL_HANDLE;
    in->vkDestroyInstance(instance, NULL);
    memset(in, 0, sizeof(*in));
    return vkb_error(error, "init", r, "vkEnumeratePhysicalDevices");
  }
  vkb_g.physical_count = n;
  return 0;
}

static int vk_init(struct adr_error* error) {
  int st = parse_environment(error);
  if (st != 0) return st;
  atomic_store(&vkb_g.validation_messages, 0);
  snprintf(vkb_g.libvulkan_path, sizeof(vkb_g.libvulkan_path), "%s", VKB_LIBVULKAN);
  vkb_g.libvulkan = dlopen(VKB_LIBVULKAN, RTLD_NOW | RTLD_LOCAL);
  if (vkb_g.libvulkan == NULL) {
    const char* why = dlerror();
    return vkb_fail(error, ENODEV, "init", "unavailable: %s not found (tried: %s)", VKB_LIBVULKAN,
                    why != NULL ? why : VKB_LIBVULKAN);
  }
  vkb_g.gipa = (PFN_vkGetInstanceProcAddr)dlsym(vkb_g.libvulkan, "vkGetInstanceProcAddr");
  if (vkb_g.gipa == NULL) {
    dlclose(vkb_g.libvulkan);
    vkb_g.libvulkan = NULL;
    return vkb_fail(error, ENODEV, "init", "unavailable: %s does not export vkGetInstanceProcAddr",
                    VKB_LIBVULKAN);
  }
#define VKB_X(name, req)                                                                      \
  vkb_g.g.name = (PFN_##name)(void (*)(void))vkb_g.gipa(VK_NULL_HANDLE, #name);               \
  if (vkb_g.g.name == NULL && (req)) {                                                        \
    dlclose(vkb_g.libvulkan);                                                                 \
    vkb_g.libvulkan = NULL;                                                                   \
    return vkb_fail(error, ENODEV, "init", "unavailable: %s lacks %s", VKB_LIBVULKAN, #name); \
  }
  VKB_GLOBAL_FNS(VKB_X)
#undef VKB_X
  st = create_instance(error);
  if (st != 0) {
    /* libvulkan stays loaded: drivers it loaded may have registered
     * handlers that must not be unmapped. */
    return st;
  }
  atexit(vk_atexit);
  vkb_log(ADR_LOG_DEBUG, "instance created: %u physical device(s), validation %s, copies %s",
          vkb_g.physical_count,
          vkb_g.validation == VKB_VALIDATION_OFF  ? "off"
          : vkb_g.validation == VKB_VALIDATION_ON ? "on"
                                                  : "fatal",
          vkb_g.copy_mode == VKB_COPY_STAGING  ? "staging"
          : vkb_g.copy_mode == VKB_COPY_MAPPED ? "mapped"
                                               : "auto");
  return 0;
}

static void fatal_check(void) {
  uint64_t n = atomic_load(&vkb_g.validation_messages);
  if (n == 0) return;
  vkb_log(ADR_LOG_ERROR, "%" PRIu64 " Vulkan validation message(s) were reported in this process",
          n);
  if (vkb_g.validation == VKB_VALIDATION_FATAL) {
    /* The contract of ADR_VULKAN_VALIDATION=fatal: a test process that
     * produced validation messages must not exit 0. Called at exit (from
     * the core's teardown or this module's destructor). */
    fprintf(stderr,
            "adr vulkan: ADR_VULKAN_VALIDATION=fatal: %" PRIu64
            " validation message(s); exiting with status %d\n",
            n, VKB_FATAL_EXIT_STATUS);
    fflush(NULL);
    _exit(VKB_FATAL_EXIT_STATUS);
  }
}

static void instance_destroy(void) {
  struct vkb_instance* in = &vkb_g.instance;
  if (in->handle != VK_NULL_HANDLE) {
    if (vkb_g.messenger != VK_NULL_HANDLE)
      in->vkDestroyDebugUtilsMessengerEXT(in->handle, vkb_g.messenger, NULL);
    vkb_g.messenger = VK_NULL_HANDLE;
    in->vkDestroyInstance(in->handle, NULL);
    in->handle = VK_NULL_HANDLE;
  }
}

/* Registered with atexit after the instance and after every device is
 * created, i.e. after the Vulkan driver and layers registered theirs
 * (Mesa's util_queue exit handler stops lavapipe's queue threads; the
 * validation layer's static destructors free its state), so it runs before
 * them: it destroys every Vulkan object while the driver still works,
 * then the instance, then applies the fatal-validation check. */
static void vk_atexit(void) {
  if (atomic_exchange(&vkb_g.exited, true)) return;
  pthread_mutex_lock(&g_devices_lock);
  for (struct adr_backend_device* d = g_devices; d != NULL; d = d->next_open)
    device_release_vulkan(d);
  pthread_mutex_unlock(&g_devices_lock);
  instance_destroy();
  g_shut_down = true;
  fatal_check();
}

static void vk_shutdown(void) {
  instance_destroy();
  free(vkb_g.physical);
  vkb_g.physical = NULL;
  vkb_g.physical_count = 0;
  if (!g_shut_down) {
    g_shut_down = true;
    fatal_check();
  }
}

/* If the process exits without the core's teardown (it always runs it from
 * atexit, but a host could differ), still honour the fatal switch. */
__attribute__((destructor)) static void vk_module_fini(void) {
  if (!g_shut_down) fatal_check();
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
static int device_setup(struct adr_backend_device* dev, const char* op, struct adr_error* error) {
#define VKB_X(name)                                                                              \
  dev->fn.name = (PFN_##name)(void (*)(void))dev->inst->vkGetDeviceProcAddr(dev->device, #name); \
  if (dev->fn.name == NULL)                                                                      \
    return vkb_fail(error, ENOTSUP, op, "VK_ERROR_INITIALIZATION_FAILED: %s not available", #name);
  VKB_DEVICE_FNS(VKB_X)
#undef VKB_X
  if (dev->queue == VK_NULL_HANDLE)
    dev->fn.vkGetDeviceQueue(dev->device, dev->queue_family, dev->queue_index, &dev->queue);

  VkPhysicalDeviceDriverProperties drv = {.sType =
                                              VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                    .pNext = &drv};
  dev->inst->vkGetPhysicalDeviceProperties2(dev->physical, &p2);
  dev->props = p2.properties;
  snprintf(dev->driver_name, sizeof(dev->driver_name), "%s%s%s", drv.driverName,
           drv.driverInfo[0] ? " " : "", drv.driverInfo);
  dev->inst->vkGetPhysicalDeviceMemoryProperties(dev->physical, &dev->memprops);

  VkSemaphoreTypeCreateInfo sti = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                   .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE,
                                   .initialValue = 0};
  VkSemaphoreCreateInfo sci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &sti};
  VkResult r = dev->fn.vkCreateSemaphore(dev->device, &sci, NULL, &dev->timeline);
  if (r != VK_SUCCESS) {
    dev->timeline = VK_NULL_HANDLE;
    return vkb_error(error, op, r, "vkCreateSemaphore(timeline)");
  }
  int st = vkb_memory_init(dev, error);
  if (st != 0) return st;
  struct adr_backend_stream* s = NULL;
  return vkb_stream_create(dev, ADR_BACKEND_STREAM_DEFAULT, &s, error);
}

/* Destroys what adr made on the device; the VkDevice too unless adopted. */
static void device_release_vulkan(struct adr_backend_device* dev) {
  if (dev->released) return;
  dev->released = true;
  if (dev->timeline != VK_NULL_HANDLE && dev->fn.vkWaitSemaphores != NULL)
    vkb_timeline_wait(dev, dev->next_value, "device_close", NULL);
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
  return dev;
}

static void device_register(struct adr_backend_device* dev) {
  pthread_mutex_lock(&g_devices_lock);
  dev->next_open = g_devices;
  g_devices = dev;
  pthread_mutex_unlock(&g_devices_lock);
  /* Again after the driver made its device (see vk_atexit); the handler
   * runs its work once. */
  atexit(vk_atexit);
}

static int vk_device_count(ArrowDeviceType type, int64_t* out, struct adr_error* error) {
  (void)error;
  *out = type == ARROW_DEVICE_VULKAN ? (int64_t)vkb_g.physical_count : 0;
  return 0;
}

static int vk_device_open(ArrowDeviceType type, int64_t id, struct adr_backend_device** out,
                          struct adr_error* error) {
  static const char op[] = "adr_device_get";
  if (type != ARROW_DEVICE_VULKAN || id < 0 || (uint64_t)id >= vkb_g.physical_count)
    return vkb_fail(error, ENODEV, op, "vulkan:%" PRId64 " does not exist (%u device(s))", id,
                    vkb_g.physical_count);
  struct vkb_instance* in = &vkb_g.instance;
  VkPhysicalDevice pd = vkb_g.physical[id];
  struct vkb_caps caps;
  physical_caps(in, pd, &caps);
  if (caps.reason[0] != '\0')
    return vkb_fail(error, ENODEV, op, "vulkan:%" PRId64 " (%s) is unusable: %s", id,
                    caps.props.deviceName, caps.reason);
  uint32_t family = 0;
  if (pick_family(in, pd, &family) != 0)
    return vkb_fail(error, ENODEV, op, "vulkan:%" PRId64 " (%s) is unusable: %s", id,
                    caps.props.deviceName, "no queue family supports transfers");

  struct adr_backend_device* dev = device_alloc(id);
  if (dev == NULL) return vkb_fail(error, ENOMEM, op, "out of host memory");
  dev->inst = in;
  dev->physical = pd;
  dev->queue_family = family;
  dev->has_budget = device_has_extension(in, pd, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);

  float priority = 1.0f;
  VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                 .queueFamilyIndex = family,
                                 .queueCount = 1,
                                 .pQueuePriorities = &priority};
  VkPhysicalDeviceVulkan12Features f12 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
      .bufferDeviceAddress = VK_TRUE,
      .timelineSemaphore = VK_TRUE};
  const char* exts[1];
  uint32_t ext_count = 0;
  if (dev->has_budget) exts[ext_count++] = VK_EXT_MEMORY_BUDGET_EXTENSION_NAME;
  VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                            .pNext = &f12,
                            .queueCreateInfoCount = 1,
                            .pQueueCreateInfos = &qci,
                            .enabledExtensionCount = ext_count,
                            .ppEnabledExtensionNames = exts};
  VkResult r = in->vkCreateDevice(pd, &dci, NULL, &dev->device);
  if (r != VK_SUCCESS) {
    int st = vkb_error(error, op, r, "vkCreateDevice(vulkan:%" PRId64 ", %s)", id,
                       caps.props.deviceName);
    dev->device = VK_NULL_HANDLE;
    device_teardown(dev);
    device_free(dev);
    return st;
  }
  int st = device_setup(dev, op, error);
  if (st != 0) {
    device_teardown(dev);
    device_free(dev);
    return st;
  }
  device_register(dev);
  *out = dev;
  return 0;
}

static int vk_device_adopt(ArrowDeviceType type, int64_t id, const void* native_desc,
                           struct adr_backend_device** out, struct adr_error* error) {
  static const char op[] = "adr_device_adopt";
  const struct adr_vulkan_adopt_desc* d = native_desc;
  if (type != ARROW_DEVICE_VULKAN)
    return vkb_fail(error, EINVAL, op, "the Vulkan backend adopts only ARROW_DEVICE_VULKAN");
  if (d == NULL) return vkb_fail(error, EINVAL, op, "native_desc is NULL");
  if (d->struct_size < offsetof(struct adr_vulkan_adopt_desc, reserved))
    return vkb_fail(error, EINVAL, op,
                    "struct_size %u is smaller than struct adr_vulkan_adopt_desc (%zu)",
                    d->struct_size, offsetof(struct adr_vulkan_adopt_desc, reserved));
  if (d->instance == NULL || d->physical_device == NULL || d->device == NULL || d->queue == NULL)
    return vkb_fail(error, EINVAL, op,
                    "instance, physical_device, device and queue must all be set");
  if (d->api_version < VK_API_VERSION_1_2)
    return vkb_fail(error, ENOTSUP, op, "api_version %u.%u: adr needs an instance of Vulkan 1.2+",
                    VK_API_VERSION_MAJOR(d->api_version), VK_API_VERSION_MINOR(d->api_version));
  struct vkb_instance* in = calloc(1, sizeof(*in));
  if (in == NULL) return vkb_fail(error, ENOMEM, op, "out of host memory");
  in->handle = (VkInstance)d->instance;
  in->owned = false;
  in->api_version = d->api_version;
  in->gipa = d->get_instance_proc_addr != NULL
                 ? (PFN_vkGetInstanceProcAddr)(void (*)(void))d->get_instance_proc_addr
                 : vkb_g.gipa;
  const char* missing = NULL;
  if (in->gipa == NULL || !resolve_instance(in, &missing)) {
    free(in);
    return vkb_fail(error, EINVAL, op, "cannot resolve %s on the given instance",
                    missing ? missing : "vkGetInstanceProcAddr");
  }
  VkPhysicalDevice pd = (VkPhysicalDevice)d->physical_device;
  struct vkb_caps caps;
  physical_caps(in, pd, &caps);
  if (caps.reason[0] != '\0') {
    free(in);
    return vkb_fail(error, ENOTSUP, op, "%s is unusable: %s", caps.props.deviceName, caps.reason);
  }
  uint32_t nf = 0;
  in->vkGetPhysicalDeviceQueueFamilyProperties(pd, &nf, NULL);
  VkQueueFamilyProperties q[32];
  if (nf > 32) nf = 32;
  in->vkGetPhysicalDeviceQueueFamilyProperties(pd, &nf, q);
  if (d->queue_family_index >= nf || d->queue_index >= q[d->queue_family_index].queueCount ||
      !family_transfers(q[d->queue_family_index].queueFlags)) {
    free(in);
    return vkb_fail(error, EINVAL, op,
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
    return vkb_fail(error, EINVAL, op,
                    "the queue %p is already used by vulkan:%" PRId64
                    " (use that device, or give adr a queue of its own)",
                    d->queue, taken);
  }
  struct adr_backend_device* dev = device_alloc(id);
  if (dev == NULL) {
    free(in);
    return vkb_fail(error, ENOMEM, op, "out of host memory");
  }
  dev->adopted = true;
  vkb_queue_share(dev);
  dev->inst = in;
  dev->physical = pd;
  dev->device = (VkDevice)d->device;
  dev->queue = (VkQueue)d->queue;
  dev->queue_family = d->queue_family_index;
  dev->queue_index = d->queue_index;
  int st = device_setup(dev, op, error);
  if (st != 0) {
    device_teardown(dev);
    device_free(dev);
    return st;
  }
  device_register(dev);
  *out = dev;
  return 0;
}

static void vk_device_close(struct adr_backend_device* dev) {
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

static int vk_device_info(struct adr_backend_device* dev, struct adr_device_info* out,
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
              ADR_CAP_IMPORT_NATIVE;
  out->alignment = 64;
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

static int vk_device_properties(struct adr_backend_device* dev, adr_property_fn emit, void* ctx,
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

static int vk_device_native(struct adr_backend_device* dev, int kind, void** out,
                            struct adr_error* error) {
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
    default:
      return vkb_fail(error, ENOTSUP, "adr_device_native",
                      "native kind %d is not one the Vulkan backend has (see adr/vulkan.h)", kind);
  }
}

static int vk_pointer_query(const void* ptr, ArrowDeviceType* out_type, int64_t* out_id,
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
  if (found == NULL)
    return vkb_fail(error, ENOENT, "adr_pointer_query", "%p is not a Vulkan allocation", ptr);
  return 0;
}

/* ---- the table ----------------------------------------------------------------- */

static const ArrowDeviceType vk_types[] = {ARROW_DEVICE_VULKAN};

static const struct adr_backend vk_backend = {
    .abi_major = ADR_BACKEND_ABI_MAJOR,
    .abi_minor = ADR_BACKEND_ABI_MINOR,
    .struct_size = sizeof(struct adr_backend),
    .name = VKB_NAME,
    .version = ADR_VERSION_STRING,
    .device_types = vk_types,
    .device_type_count = 1,
    .init = vk_init,
    .shutdown = vk_shutdown,
    .device_count = vk_device_count,
    .device_open = vk_device_open,
    .device_close = vk_device_close,
    .device_info = vk_device_info,
    .alloc = vkb_alloc,
    .free = vkb_free,
    .copy = vkb_copy,
    .memset = vkb_memset,
    .stream_create = vkb_stream_create,
    .stream_destroy = vkb_stream_destroy,
    .stream_synchronize = vkb_stream_synchronize,
    .event_create = vkb_event_create,
    .event_destroy = vkb_event_destroy,
    .event_record = vkb_event_record,
    .event_wait = vkb_event_wait,
    .event_synchronize = vkb_event_synchronize,
    .event_query = vkb_event_query,
    .event_native = vkb_event_native,
    .event_import = vkb_event_import,
    .stream_import = vkb_stream_import,
    .stream_native = vkb_stream_native,
    .pointer_query = vk_pointer_query,
    .device_native = vk_device_native,
    .device_adopt = vk_device_adopt,
    .device_properties = vk_device_properties,
};

ADR_BACKEND_EXPORT const struct adr_backend* adr_backend_query(uint32_t host_abi_major,
                                                               uint32_t host_abi_minor,
                                                               const struct adr_backend_host* host);

ADR_BACKEND_EXPORT const struct adr_backend* adr_backend_query(
    uint32_t host_abi_major, uint32_t host_abi_minor, const struct adr_backend_host* host) {
  (void)host_abi_minor;
  if (host_abi_major != ADR_BACKEND_ABI_MAJOR) return NULL;
  vkb_g.host = host;
  return &vk_backend;
}
