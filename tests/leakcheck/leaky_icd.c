/* A test double of a Vulkan driver (ICD) that behaves like Mesa lavapipe
 * on the AMD machine of issue 11: in vkEnumeratePhysicalDevices, once per
 * process (pthread_once), it reallocs 128 bytes it never frees. It
 * reports no physical device, so adr keeps using the real drivers listed
 * beside it in VK_DRIVER_FILES. The Vulkan loader dlclose()s it in
 * vkDestroyInstance, like any driver.
 *
 * leaky_icd_leaks() counts the leaks made, for the test to check that the
 * leak really happened. tests/lsan.supp names this module
 * (libadr_test_leaky_icd.so). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vulkan/vk_icd.h>
#include <vulkan/vulkan.h>

#define EXPORT __attribute__((visibility("default")))

static int leaks;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void leak_once(void) {
  /* Stored through a volatile local only: no reference survives. */
  void* volatile p = malloc(16);
  p = realloc(p, 128);
  if (p != NULL) {
    memset(p, 0xa5, 128);
    leaks++;
  }
}

static VKAPI_ATTR VkResult VKAPI_CALL create_instance(const VkInstanceCreateInfo* info,
                                                      const VkAllocationCallbacks* alloc,
                                                      VkInstance* out) {
  (void)info;
  (void)alloc;
  VK_LOADER_DATA* object = calloc(1, sizeof(*object) + 64);
  if (object == NULL) return VK_ERROR_OUT_OF_HOST_MEMORY;
  object->loaderMagic = ICD_LOADER_MAGIC;
  *out = (VkInstance)object;
  return VK_SUCCESS;
}

static VKAPI_ATTR void VKAPI_CALL destroy_instance(VkInstance instance,
                                                   const VkAllocationCallbacks* alloc) {
  (void)alloc;
  free((void*)instance);
}

static VKAPI_ATTR VkResult VKAPI_CALL enumerate_extensions(const char* layer, uint32_t* count,
                                                           VkExtensionProperties* out) {
  (void)layer;
  (void)out;
  *count = 0;
  return VK_SUCCESS;
}

static VKAPI_ATTR VkResult VKAPI_CALL enumerate_physical_devices(VkInstance instance,
                                                                 uint32_t* count,
                                                                 VkPhysicalDevice* out) {
  (void)instance;
  (void)out;
  pthread_once(&once, leak_once);
  *count = 0;
  return VK_SUCCESS;
}

static VKAPI_ATTR VkResult VKAPI_CALL enumerate_groups(VkInstance instance, uint32_t* count,
                                                       VkPhysicalDeviceGroupProperties* out) {
  (void)instance;
  (void)out;
  *count = 0;
  return VK_SUCCESS;
}

EXPORT VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL vk_icdGetInstanceProcAddr(VkInstance instance,
                                                                          const char* name);
EXPORT VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL vk_icdGetPhysicalDeviceProcAddr(VkInstance instance,
                                                                                const char* name);

static VKAPI_ATTR void VKAPI_CALL never_called(void) {
  fprintf(stderr, "leaky_icd: an entry point of a driver without devices was called\n");
  abort();
}

static VKAPI_ATTR VkResult VKAPI_CALL enumerate_version(uint32_t* version) {
  *version = VK_API_VERSION_1_3;
  return VK_SUCCESS;
}

EXPORT VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL vk_icdGetPhysicalDeviceProcAddr(VkInstance instance,
                                                                                const char* name) {
  (void)instance;
  return NULL;
}

EXPORT VKAPI_ATTR VkResult VKAPI_CALL vk_icdNegotiateLoaderICDInterfaceVersion(uint32_t* version) {
  if (*version > 5) *version = 5;
  return VK_SUCCESS;
}

EXPORT VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL vk_icdGetInstanceProcAddr(VkInstance instance,
                                                                          const char* name) {
  (void)instance;
  if (strcmp(name, "vkCreateInstance") == 0) return (PFN_vkVoidFunction)create_instance;
  if (strcmp(name, "vkDestroyInstance") == 0) return (PFN_vkVoidFunction)destroy_instance;
  if (strcmp(name, "vkEnumerateInstanceExtensionProperties") == 0)
    return (PFN_vkVoidFunction)enumerate_extensions;
  if (strcmp(name, "vkEnumeratePhysicalDevices") == 0)
    return (PFN_vkVoidFunction)enumerate_physical_devices;
  if (strcmp(name, "vkEnumeratePhysicalDeviceGroups") == 0)
    return (PFN_vkVoidFunction)enumerate_groups;
  if (strcmp(name, "vk_icdGetPhysicalDeviceProcAddr") == 0)
    return (PFN_vkVoidFunction)vk_icdGetPhysicalDeviceProcAddr;
  if (strcmp(name, "vkEnumerateInstanceVersion") == 0) return (PFN_vkVoidFunction)enumerate_version;
  if (strcmp(name, "vkGetInstanceProcAddr") == 0)
    return (PFN_vkVoidFunction)vk_icdGetInstanceProcAddr;
  /* The loader (1.3.239) crashes on a NULL core function; with no physical
   * device none of them is ever called. Extension functions (names ending
   * in the vendor suffix: KHR, EXT ...) are absent, so the loader does not
   * forward them here. */
  size_t len = strlen(name);
  if (strncmp(name, "vk", 2) == 0 && !(name[len - 1] >= 'A' && name[len - 1] <= 'Z'))
    return (PFN_vkVoidFunction)never_called;
  return NULL;
}

EXPORT int leaky_icd_leaks(void);
EXPORT int leaky_icd_leaks(void) {
  return leaks;
}
