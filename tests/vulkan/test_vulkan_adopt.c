/* SPDX-License-Identifier: Apache-2.0
 *
 * adr_device_adopt over the application's own VkInstance / VkDevice /
 * VkQueue: bad descriptors are refused with reasons; the adopted device
 * allocates, copies and sets memory on the application's device, hands the
 * application's handles back, and copies to and from the enumerated
 * vulkan:0 (a different VkDevice: the peer path).
 *
 * The application objects must outlive the adr device, which lives until
 * exit: they are destroyed by an atexit handler registered before the
 * adoption, so it runs after the backend's exit handler has destroyed
 * adr's objects on the device. With ADR_VULKAN_VALIDATION set, the
 * application's instance enables the validation layer too, and any message
 * it reports fails the test (or the exit status, for ones at destruction).
 */
#include <unistd.h>

#include "vk_test.h"

static struct vkt T; /* the enumerated vulkan:0, for peer copies */

static struct {
  VkInstance instance;
  VkDebugUtilsMessengerEXT messenger;
  VkPhysicalDevice physical;
  VkDevice device;
  VkQueue queue;
  uint32_t family;
  uint32_t api_version;
  int messages;
} app;

static VKAPI_ATTR VkBool32 VKAPI_CALL app_messenger(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT types,
    const VkDebugUtilsMessengerCallbackDataEXT* data, void* user) {
  (void)user;
  if ((types & VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT) &&
      severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
    app.messages++;
    fprintf(stderr, "application instance validation: %s\n", data->pMessage);
  }
  return VK_FALSE;
}

static void app_destroy(void) {
  if (app.device != VK_NULL_HANDLE) vkDestroyDevice(app.device, NULL);
  if (app.messenger != VK_NULL_HANDLE) {
    PFN_vkDestroyDebugUtilsMessengerEXT destroy =
        (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(
            app.instance, "vkDestroyDebugUtilsMessengerEXT");
    destroy(app.instance, app.messenger, NULL);
  }
  if (app.instance != VK_NULL_HANDLE) vkDestroyInstance(app.instance, NULL);
  if (app.messages > 0) {
    fprintf(stderr, "%d validation message(s) on the application's instance\n", app.messages);
    fflush(NULL);
    _exit(70);
  }
}

/* The application: its own instance and device on the same physical
 * device as vulkan:0, with the features adr needs. */
static void app_create(void) {
  const char* validation = getenv("ADR_VULKAN_VALIDATION");
  bool layer = validation != NULL && validation[0] != '\0' && strcmp(validation, "off") != 0;
  const char* layers[] = {"VK_LAYER_KHRONOS_validation"};
  const char* exts[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
  app.api_version = VK_API_VERSION_1_2;
  VkApplicationInfo ai = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                          .pApplicationName = "adr-test-adopt",
                          .apiVersion = app.api_version};
  VkDebugUtilsMessengerCreateInfoEXT mci = {
      .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
      .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                         VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
      .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT,
      .pfnUserCallback = app_messenger};
  VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                              .pApplicationInfo = &ai,
                              .enabledLayerCount = layer ? 1 : 0,
                              .ppEnabledLayerNames = layers,
                              .enabledExtensionCount = layer ? 1 : 0,
                              .ppEnabledExtensionNames = exts};
  if (vkCreateInstance(&ici, NULL, &app.instance) != VK_SUCCESS) {
    fprintf(stderr, "application vkCreateInstance failed\n");
    exit(1);
  }
  if (layer) {
    PFN_vkCreateDebugUtilsMessengerEXT create =
        (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(app.instance,
                                                                  "vkCreateDebugUtilsMessengerEXT");
    if (create == NULL || create(app.instance, &mci, NULL, &app.messenger) != VK_SUCCESS) exit(1);
  }
  uint32_t n = 1;
  VkResult r = vkEnumeratePhysicalDevices(app.instance, &n, &app.physical);
  if ((r != VK_SUCCESS && r != VK_INCOMPLETE) || n == 0) exit(1);
  uint32_t nf = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(app.physical, &nf, NULL);
  VkQueueFamilyProperties q[16];
  if (nf > 16) nf = 16;
  vkGetPhysicalDeviceQueueFamilyProperties(app.physical, &nf, q);
  app.family = UINT32_MAX;
  for (uint32_t i = 0; i < nf && app.family == UINT32_MAX; i++)
    if (q[i].queueFlags & (VK_QUEUE_COMPUTE_BIT | VK_QUEUE_GRAPHICS_BIT)) app.family = i;
  if (app.family == UINT32_MAX) exit(1);
  float prio = 1.0f;
  VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                 .queueFamilyIndex = app.family,
                                 .queueCount = 1,
                                 .pQueuePriorities = &prio};
  VkPhysicalDeviceVulkan12Features f12 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
      .bufferDeviceAddress = VK_TRUE,
      .timelineSemaphore = VK_TRUE};
  VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                            .pNext = &f12,
                            .queueCreateInfoCount = 1,
                            .pQueueCreateInfos = &qci};
  if (vkCreateDevice(app.physical, &dci, NULL, &app.device) != VK_SUCCESS) exit(1);
  vkGetDeviceQueue(app.device, app.family, 0, &app.queue);
}

static struct adr_vulkan_adopt_desc good_desc(void) {
  struct adr_vulkan_adopt_desc d;
  memset(&d, 0, sizeof(d));
  d.struct_size = sizeof(d);
  d.api_version = app.api_version;
  d.instance = app.instance;
  d.physical_device = app.physical;
  d.device = app.device;
  d.queue = app.queue;
  d.queue_family_index = app.family;
  d.queue_index = 0;
  return d;
}

static void expect_refused(struct adr_vulkan_adopt_desc* d, int status, const char* words) {
  struct adr_device* dev = NULL;
  struct adr_error err = {{0}};
  assert_int_equal(adr_device_adopt(ARROW_DEVICE_VULKAN, d, &dev, &err), status);
  assert_null(dev);
  assert_non_null(strstr(err.message, "[adr_device_adopt]"));
  if (strstr(err.message, words) == NULL)
    fail_msg("message \"%s\" lacks \"%s\"", err.message, words);
}

static void test_adopt_refuses_bad_descriptors(void** state) {
  (void)state;
  struct adr_device* dev = NULL;
  struct adr_error err = {{0}};
  assert_int_not_equal(adr_device_adopt(ARROW_DEVICE_VULKAN, NULL, &dev, &err), 0);
  assert_null(dev);
  struct adr_vulkan_adopt_desc d = good_desc();
  d.struct_size = 8;
  expect_refused(&d, EINVAL, "struct_size");
  d = good_desc();
  d.api_version = VK_API_VERSION_1_1;
  expect_refused(&d, ENOTSUP, "1.2");
  d = good_desc();
  d.device = NULL;
  expect_refused(&d, EINVAL, "must all be set");
  d = good_desc();
  d.queue_family_index = 99;
  expect_refused(&d, EINVAL, "queue family 99");
  d = good_desc();
  d.queue_index = 5;
  expect_refused(&d, EINVAL, "index 5");
}

static struct adr_device* adopted;

static void test_adopt_and_use(void** state) {
  (void)state;
  struct adr_vulkan_adopt_desc d = good_desc();
  struct adr_error err = {{0}};
  if (adr_device_adopt(ARROW_DEVICE_VULKAN, &d, &adopted, &err) != 0)
    fail_msg("adopt: %s", err.message);
  assert_non_null(adopted);
  assert_int_equal(adr_device_type(adopted), ARROW_DEVICE_VULKAN);
  assert_true(adr_device_id(adopted) >= 1);
  struct adr_device* again = NULL;
  assert_int_equal(adr_device_get(ARROW_DEVICE_VULKAN, adr_device_id(adopted), &again, NULL), 0);
  assert_ptr_equal(again, adopted);

  void* h = NULL;
  assert_int_equal(adr_device_native(adopted, ADR_NATIVE_CONTEXT, &h, NULL), 0);
  assert_ptr_equal(h, app.device);
  assert_int_equal(adr_device_native(adopted, ADR_NATIVE_QUEUE, &h, NULL), 0);
  assert_ptr_equal(h, app.queue);
  assert_int_equal(adr_device_native(adopted, ADR_NATIVE_PLATFORM, &h, NULL), 0);
  assert_ptr_equal(h, app.instance);
  assert_int_equal(adr_device_native(adopted, ADR_NATIVE_DEVICE, &h, NULL), 0);
  assert_ptr_equal(h, app.physical);
  assert_int_equal(adr_device_native(adopted, ADR_NATIVE_QUEUE_FAMILY, &h, NULL), 0);
  assert_int_equal((uintptr_t)h, app.family);
  char buf[64];
  assert_string_equal(vkt_property(adopted, "adopted", buf, sizeof(buf)), "yes");

  /* The same queue twice, or adr's own device's queue: refused. */
  expect_refused(&d, EINVAL, "already used by");
  struct adr_vulkan_adopt_desc own = {.struct_size = sizeof(own),
                                      .api_version = VK_API_VERSION_1_2,
                                      .instance = T.instance,
                                      .physical_device = T.physical,
                                      .device = T.device,
                                      .queue = T.queue,
                                      .queue_family_index = T.family};
  expect_refused(&own, EINVAL, "already used by vulkan:0");

  enum { SIZE = (1 << 20) + 77 };
  uint8_t* host = malloc(SIZE);
  uint8_t* back = malloc(SIZE);
  assert_non_null(host);
  assert_non_null(back);
  for (size_t i = 0; i < SIZE; i++) host[i] = (uint8_t)(i * 5 + 1);
  void *a = NULL, *b = NULL;
  assert_int_equal(adr_alloc(adopted, SIZE, 0, NULL, &a, NULL), 0);
  assert_int_equal(adr_alloc(adopted, SIZE, 0, NULL, &b, NULL), 0);
  struct adr_stream* s = NULL;
  assert_int_equal(adr_stream_create(adopted, &s, NULL), 0);
  assert_int_equal(adr_copy(adopted, a, T.cpu, host, SIZE, s, NULL), 0);
  assert_int_equal(adr_copy(adopted, b, adopted, a, SIZE, s, NULL), 0);
  assert_int_equal(adr_memset(adopted, (uint8_t*)b + 10, 0x7E, 1001, s, NULL), 0);
  assert_int_equal(adr_stream_synchronize(s, NULL), 0);
  assert_int_equal(adr_copy(T.cpu, back, adopted, b, SIZE, NULL, NULL), 0);
  memset(host + 10, 0x7E, 1001);
  assert_memory_equal(back, host, SIZE);
  struct adr_device* owner = NULL;
  assert_int_equal(adr_pointer_query((uint8_t*)a + 100, &owner, NULL), 0);
  assert_ptr_equal(owner, adopted);
  assert_int_equal(adr_stream_destroy(s, NULL), 0);
  assert_int_equal(adr_free(adopted, a, SIZE, NULL, NULL), 0);
  assert_int_equal(adr_free(adopted, b, SIZE, NULL, NULL), 0);
  free(host);
  free(back);
  assert_int_equal(app.messages, 0);
  vkt_assert_no_validation_messages(&T);
}

static void test_peer_copies_with_enumerated_device(void** state) {
  (void)state;
  assert_non_null(adopted);
  enum { SIZE = (9 << 20) + 5 }; /* more than one bounce piece */
  uint8_t* host = malloc(SIZE);
  uint8_t* back = malloc(SIZE);
  assert_non_null(host);
  assert_non_null(back);
  for (size_t i = 0; i < SIZE; i++) host[i] = (uint8_t)(i ^ (i >> 9));
  void *x = NULL, *y = NULL;
  assert_int_equal(adr_alloc(T.dev, SIZE + 8, 0, NULL, &x, NULL), 0);
  assert_int_equal(adr_alloc(adopted, SIZE + 8, 0, NULL, &y, NULL), 0);
  vkt_upload(&T, (uint8_t*)x + 3, host, SIZE);
  struct adr_error err = {{0}};
  if (adr_copy(adopted, (uint8_t*)y + 1, T.dev, (uint8_t*)x + 3, SIZE, NULL, &err) != 0)
    fail_msg("vulkan:0 -> adopted: %s", err.message);
  assert_int_equal(adr_memset(T.dev, x, 0, SIZE + 8, NULL, NULL), 0);
  struct adr_stream* s = NULL;
  assert_int_equal(adr_stream_create(T.dev, &s, NULL), 0);
  if (adr_copy(T.dev, (uint8_t*)x + 7, adopted, (uint8_t*)y + 1, SIZE, s, &err) != 0)
    fail_msg("adopted -> vulkan:0: %s", err.message);
  assert_int_equal(adr_stream_synchronize(s, NULL), 0);
  vkt_download(&T, back, (uint8_t*)x + 7, SIZE);
  assert_memory_equal(back, host, SIZE);
  assert_int_equal(adr_stream_destroy(s, NULL), 0);
  assert_int_equal(adr_free(T.dev, x, SIZE + 8, NULL, NULL), 0);
  assert_int_equal(adr_free(adopted, y, SIZE + 8, NULL, NULL), 0);
  free(host);
  free(back);
  assert_int_equal(app.messages, 0);
}

/* The typed queue accessors on the adopted device: the application's own
 * queue imported as an adr stream (with its family), adr's queue lock. */
static void test_stream_import_and_queue_lock(void** state) {
  (void)state;
  assert_non_null(adopted);
  struct adr_error err = {{0}};
  struct adr_stream* s = NULL;
  if (adr_vulkan_stream_import(adopted, app.queue, app.family, &s, &err) != 0)
    fail_msg("stream import: %s", err.message);
  assert_ptr_equal(adr_stream_native(s), app.queue);
  enum { SIZE = 4096 + 3 };
  uint8_t host[SIZE], back[SIZE];
  for (size_t i = 0; i < SIZE; i++) host[i] = (uint8_t)(i * 3 + 2);
  void* a = NULL;
  assert_int_equal(adr_alloc(adopted, SIZE, 0, s, &a, NULL), 0);
  assert_int_equal(adr_copy(adopted, a, T.cpu, host, SIZE, s, NULL), 0);
  assert_int_equal(adr_stream_synchronize(s, NULL), 0);
  assert_int_equal(adr_copy(T.cpu, back, adopted, a, SIZE, NULL, NULL), 0);
  assert_memory_equal(back, host, SIZE);
  assert_int_equal(adr_free(adopted, a, SIZE, s, NULL), 0);
  assert_int_equal(adr_stream_destroy(s, NULL), 0);

  /* Refusals. */
  s = NULL;
  assert_int_equal(adr_vulkan_stream_import(adopted, app.queue, app.family + 1, &s, &err), EINVAL);
  assert_non_null(strstr(err.message, "queue family"));
  assert_int_equal(adr_vulkan_stream_import(adopted, T.queue, T.family, &s, &err), ENOTSUP);
  assert_non_null(strstr(err.message, "is not the queue of"));
  assert_int_equal(adr_vulkan_stream_import(adopted, NULL, app.family, &s, &err), EINVAL);
  assert_non_null(strstr(err.message, "queue is NULL"));
  assert_int_equal(adr_vulkan_stream_import(T.cpu, app.queue, app.family, &s, &err), EINVAL);
  assert_non_null(strstr(err.message, "not a Vulkan device"));
  assert_null(s);

  /* The typed lock is the one ADR_VULKAN_NATIVE_QUEUE_LOCK hands out. */
  const struct adr_vulkan_queue_lock* ql = NULL;
  assert_int_equal(adr_vulkan_queue_lock(adopted, &ql, &err), 0);
  void* raw = NULL;
  assert_int_equal(adr_device_native(adopted, ADR_VULKAN_NATIVE_QUEUE_LOCK, &raw, NULL), 0);
  assert_ptr_equal(ql, raw);
  assert_true(ql->struct_size >= sizeof(*ql));
  ql->lock(ql->ctx);
  ql->unlock(ql->ctx);
  assert_int_equal(adr_vulkan_queue_lock(T.cpu, &ql, &err), EINVAL);
  assert_int_equal(adr_vulkan_queue_lock(adopted, NULL, &err), EINVAL);
  assert_int_equal(app.messages, 0);
}

/* adr_device_release: refused while anything of the device lives and for
 * enumerated devices; then the device answers ENODEV, the same VkDevice and
 * queue can be adopted again, and the application destroys its objects
 * itself, before exit, with the validation layer (on its own instance)
 * reporting nothing left behind on the VkDevice. */
static void test_release_adopted(void** state) {
  (void)state;
  assert_non_null(adopted);
  struct adr_error err = {{0}};
  assert_int_equal(adr_device_release(T.dev, &err), EINVAL);
  assert_non_null(strstr(err.message, "not an adopted device"));
  assert_int_equal(adr_device_release(NULL, &err), EINVAL);

  void* a = NULL;
  assert_int_equal(adr_alloc(adopted, 1000, 0, NULL, &a, NULL), 0);
  assert_int_equal(adr_device_release(adopted, &err), EBUSY);
  assert_non_null(strstr(err.message, "1 allocation of vulkan:1 is still live"));
  assert_int_equal(adr_free(adopted, a, 1000, NULL, NULL), 0);
  struct adr_stream* s = NULL;
  struct adr_event* e = NULL;
  assert_int_equal(adr_stream_create(adopted, &s, NULL), 0);
  assert_int_equal(adr_event_create(adopted, &e, NULL), 0);
  assert_int_equal(adr_device_release(adopted, &err), EBUSY);
  assert_non_null(strstr(err.message, "2 streams or events"));
  assert_int_equal(adr_stream_destroy(s, NULL), 0);
  assert_int_equal(adr_event_destroy(e, NULL), 0);

  if (adr_device_release(adopted, &err) != 0) fail_msg("release: %s", err.message);
  assert_int_equal(adr_device_release(adopted, &err), EINVAL);
  assert_non_null(strstr(err.message, "already released"));
  assert_int_equal(adr_alloc(adopted, 64, 0, NULL, &a, &err), ENODEV);
  assert_non_null(strstr(err.message, "released"));
  assert_int_equal(adr_stream_create(adopted, &s, &err), ENODEV);
  assert_int_equal(adr_memset(adopted, (void*)(uintptr_t)0x1000, 0, 4, NULL, &err), ENODEV);
  uint8_t host[64] = {0};
  assert_int_equal(adr_copy(adopted, (void*)(uintptr_t)0x1000, T.cpu, host, 4, NULL, &err), ENODEV);
  assert_int_equal(adr_copy(adopted, (void*)(uintptr_t)0x1000, NULL, host, 4, NULL, &err), ENODEV);
  assert_non_null(strstr(err.message, "released"));
  assert_int_equal(adr_copy(NULL, host, adopted, (void*)(uintptr_t)0x1000, 4, NULL, &err), ENODEV);
  void* x = NULL;
  assert_int_equal(adr_alloc(T.dev, 64, 0, NULL, &x, NULL), 0);
  assert_int_equal(adr_copy(adopted, (void*)(uintptr_t)0x1000, T.dev, x, 4, NULL, &err), ENODEV);
  assert_int_equal(adr_free(T.dev, x, 64, NULL, NULL), 0);
  void* h = NULL;
  assert_int_equal(adr_device_native(adopted, ADR_NATIVE_CONTEXT, &h, &err), ENODEV);

  /* The same objects can be adopted again (a new id), used and released. */
  struct adr_vulkan_adopt_desc d = good_desc();
  struct adr_device* again = NULL;
  if (adr_device_adopt(ARROW_DEVICE_VULKAN, &d, &again, &err) != 0)
    fail_msg("adopt again: %s", err.message);
  assert_true(adr_device_id(again) > adr_device_id(adopted));
  assert_int_equal(adr_alloc(again, 4096, 0, NULL, &a, NULL), 0);
  assert_int_equal(adr_copy(again, a, T.cpu, host, 64, NULL, NULL), 0);
  assert_int_equal(adr_free(again, a, 4096, NULL, NULL), 0);
  if (adr_device_release(again, &err) != 0) fail_msg("release again: %s", err.message);

  /* No atexit handler needed any more: the application tears down now. */
  int before = app.messages;
  vkDestroyDevice(app.device, NULL);
  app.device = VK_NULL_HANDLE;
  assert_int_equal(app.messages, before);
  assert_int_equal(app.messages, 0);
  vkt_assert_no_validation_messages(&T);
}

int main(void) {
  /* adr first (its exit teardown is then registered first and runs last),
   * then the application's objects, then their destruction handler, then
   * the adoption (the backend registers its own exit handler again). */
  vkt_require_or_skip(&T);
  app_create();
  atexit(app_destroy);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_adopt_refuses_bad_descriptors),
      cmocka_unit_test(test_adopt_and_use),
      cmocka_unit_test(test_peer_copies_with_enumerated_device),
      cmocka_unit_test(test_stream_import_and_queue_lock),
      cmocka_unit_test(test_release_adopted),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
