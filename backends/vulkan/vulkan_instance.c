/* SPDX-License-Identifier: Apache-2.0
 *
 * The Vulkan instance: the backend's environment variables, instance
 * creation (with the validation layer and its messenger on request), the
 * physical devices in loader order as device ids, and exit handling.
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
 *   ADR_VULKAN_BLOCK_SIZE  bytes per VkDeviceMemory block, in the byte-size
 *       grammar of ADR_ALLOC (backends/common/bytesize.h), a power of two
 *       from 64K to 1T; default 64M or less on small heaps.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bytesize.h"
#include "vulkan_internal.h"

#define VKB_VALIDATION_LAYER "VK_LAYER_KHRONOS_validation"
#define VKB_FATAL_EXIT_STATUS 70

struct vkb_globals vkb_g;

static bool g_shut_down;

/* ---- environment ------------------------------------------------------------ */

static int parse_environment(struct adr_error* error) {
  const char* v = adr_host_getenv("ADR_VULKAN_VALIDATION");
  vkb_g.validation = VKB_VALIDATION_OFF;
  if (v != NULL && v[0] != '\0') {
    if (strcmp(v, "off") == 0 || strcmp(v, "0") == 0)
      vkb_g.validation = VKB_VALIDATION_OFF;
    else if (strcmp(v, "on") == 0 || strcmp(v, "1") == 0)
      vkb_g.validation = VKB_VALIDATION_ON;
    else if (strcmp(v, "fatal") == 0)
      vkb_g.validation = VKB_VALIDATION_FATAL;
    else
      return adr_syntax_error(error, "ADR_VULKAN_VALIDATION", v, 0, "off, on or fatal");
  }
  v = adr_host_getenv("ADR_VULKAN_COPY");
  vkb_g.copy_mode = VKB_COPY_AUTO;
  if (v != NULL && v[0] != '\0') {
    if (strcmp(v, "auto") == 0)
      vkb_g.copy_mode = VKB_COPY_AUTO;
    else if (strcmp(v, "mapped") == 0)
      vkb_g.copy_mode = VKB_COPY_MAPPED;
    else if (strcmp(v, "staging") == 0)
      vkb_g.copy_mode = VKB_COPY_STAGING;
    else
      return adr_syntax_error(error, "ADR_VULKAN_COPY", v, 0, "auto, mapped or staging");
  }
  v = adr_host_getenv("ADR_VULKAN_BLOCK_SIZE");
  vkb_g.block_size_env = 0;
  if (v != NULL && v[0] != '\0') {
    uint64_t n = 0;
    int st = adr_bytesize_parse("ADR_VULKAN_BLOCK_SIZE", v, &n, error);
    if (st != 0) return st;
    if (n < 65536 || n > (UINT64_C(1) << 40) || (n & (n - 1)) != 0)
      return vkb_errorf(error, EINVAL,
                        "ADR_VULKAN_BLOCK_SIZE=\"%s\": must be a power of two from 64K to 1T", v);
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
  adr_host_log(level, "validation%s: %s", counts ? "" : " (not counted)",
               data != NULL && data->pMessage != NULL ? data->pMessage : "(no message)");
  return VK_FALSE;
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
    return vkb_errorf(error, ENODEV, "unavailable: the Vulkan loader supports %u.%u, adr needs 1.2",
                      VK_API_VERSION_MAJOR(loader_version), VK_API_VERSION_MINOR(loader_version));

  const char* layers[1];
  const char* exts[1];
  uint32_t layer_count = 0, ext_count = 0;
  bool debug_utils = false;
  if (vkb_g.validation != VKB_VALIDATION_OFF) {
    if (!has_layer(VKB_VALIDATION_LAYER))
      return vkb_errorf(
          error, ENOENT,
          "VK_ERROR_LAYER_NOT_PRESENT: ADR_VULKAN_VALIDATION is set but " VKB_VALIDATION_LAYER
          " is not installed (Debian: vulkan-validationlayers)");
    layers[layer_count++] = VKB_VALIDATION_LAYER;
    if (!has_instance_extension(NULL, VK_EXT_DEBUG_UTILS_EXTENSION_NAME) &&
        !has_instance_extension(VKB_VALIDATION_LAYER, VK_EXT_DEBUG_UTILS_EXTENSION_NAME))
      return vkb_errorf(error, ENOTSUP,
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
    return vkb_errorf(
        error, ENODEV,
        "unavailable: no Vulkan driver (vkCreateInstance: VK_ERROR_INCOMPATIBLE_DRIVER)");
  if (r != VK_SUCCESS) return vkb_check(r, error, "vkCreateInstance");

  struct vkb_instance* in = &vkb_g.instance;
  in->handle = instance;
  in->owned = true;
  in->api_version = VK_API_VERSION_1_2;
  in->gipa = vkb_g.gipa;
  const char* missing = NULL;
  if (!vkb_resolve_instance(in, &missing)) {
    PFN_vkDestroyInstance destroy =
        (PFN_vkDestroyInstance)(void (*)(void))vkb_g.gipa(instance, "vkDestroyInstance");
    if (destroy != NULL) destroy(instance, NULL);
    memset(in, 0, sizeof(*in));
    return vkb_errorf(error, ENODEV, "unavailable: the Vulkan loader lacks %s", missing);
  }
  if (debug_utils && in->vkCreateDebugUtilsMessengerEXT != NULL) {
    r = in->vkCreateDebugUtilsMessengerEXT(instance, &mci, NULL, &vkb_g.messenger);
    if (r != VK_SUCCESS) {
      in->vkDestroyInstance(instance, NULL);
      memset(in, 0, sizeof(*in));
      return vkb_check(r, error, "vkCreateDebugUtilsMessengerEXT");
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
    return vkb_check(r, error, "vkEnumeratePhysicalDevices");
  }
  vkb_g.physical_count = n;
  return 0;
}

int vkb_init(struct adr_error* error) {
  int st = adr_host_init(VKB_NAME, error);
  if (st != 0) return st;
  st = parse_environment(error);
  if (st != 0) return st;
  atomic_store(&vkb_g.validation_messages, 0);
  st = vkb_loader_open(error);
  if (st != 0) return st;
  st = create_instance(error);
  if (st != 0) {
    /* libvulkan stays loaded: drivers it loaded may have registered
     * handlers that must not be unmapped. */
    return st;
  }
  atexit(vkb_atexit);
  adr_host_log(ADR_LOG_DEBUG, "instance created: %u physical device(s), validation %s, copies %s",
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
  adr_host_log(ADR_LOG_ERROR,
               "%" PRIu64 " Vulkan validation message(s) were reported in this process", n);
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
void vkb_atexit(void) {
  if (atomic_exchange(&vkb_g.exited, true)) return;
  vkb_devices_release_all();
  instance_destroy();
  g_shut_down = true;
  fatal_check();
}

void vkb_shutdown(void) {
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
__attribute__((destructor)) static void vkb_module_fini(void) {
  if (!g_shut_down) fatal_check();
}
