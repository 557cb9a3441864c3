/* SPDX-License-Identifier: Apache-2.0
 *
 * Helpers shared by the Vulkan backend's own tests (tests/vulkan/). These
 * tests link libvulkan themselves (the backend never does) to act as the
 * "application" side of interop: raw Vulkan calls on adr's VkDevice, or a
 * VkDevice of their own that adr adopts.
 */
#ifndef ADR_TESTS_VK_TEST_H
#define ADR_TESTS_VK_TEST_H

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <vulkan/vulkan.h>

#include "adr/adr.h"
#include "adr/vulkan.h"

/* The test's view of the adr device under test. */
struct vkt {
  struct adr_device* dev;
  struct adr_device* cpu;
  VkInstance instance;
  VkPhysicalDevice physical;
  VkDevice device;
  VkQueue queue;
  uint32_t family;
};

/* Gets vulkan:0 and its native handles; exits 77 (SKIP) when the device
 * does not exist and ADR_VKTEST_REQUIRE is unset, fails otherwise. */
static inline int vkt_open(struct vkt* t) {
  struct adr_error err = {{0}};
  memset(t, 0, sizeof(*t));
  int st = adr_device_get(ARROW_DEVICE_VULKAN, 0, &t->dev, &err);
  if (st != 0) {
    fprintf(stderr, "no vulkan:0: %s\n", err.message);
    return st;
  }
  if (adr_device_get(ARROW_DEVICE_CPU, 0, &t->cpu, &err) != 0) return EIO;
  void* h = NULL;
  if (adr_device_native(t->dev, ADR_NATIVE_PLATFORM, &h, &err) != 0) return EIO;
  t->instance = (VkInstance)h;
  if (adr_device_native(t->dev, ADR_NATIVE_DEVICE, &h, &err) != 0) return EIO;
  t->physical = (VkPhysicalDevice)h;
  if (adr_device_native(t->dev, ADR_NATIVE_CONTEXT, &h, &err) != 0) return EIO;
  t->device = (VkDevice)h;
  if (adr_device_native(t->dev, ADR_NATIVE_QUEUE, &h, &err) != 0) return EIO;
  t->queue = (VkQueue)h;
  if (adr_device_native(t->dev, ADR_NATIVE_QUEUE_FAMILY, &h, &err) != 0) return EIO;
  t->family = (uint32_t)(uintptr_t)h;
  return 0;
}

/* main() prologue: exit 77 when Vulkan is not there (nothing to test). */
static inline void vkt_require_or_skip(struct vkt* t) {
  int st = vkt_open(t);
  if (st == ENODEV && getenv("ADR_VKTEST_REQUIRE") == NULL) {
    fprintf(stderr, "no Vulkan device: skipping (set ADR_VKTEST_REQUIRE=1 to fail instead)\n");
    exit(77);
  }
  if (st != 0) {
    fprintf(stderr, "cannot open vulkan:0 (status %d)\n", st);
    exit(1);
  }
}

/* One property of the device, or "" when absent. */
struct vkt_prop {
  const char* key;
  char value[256];
  int found;
};

static inline void vkt_prop_cb(void* ctx, const char* key, const char* value) {
  struct vkt_prop* p = ctx;
  if (strcmp(key, p->key) == 0) {
    snprintf(p->value, sizeof(p->value), "%s", value);
    p->found = 1;
  }
}

static inline const char* vkt_property(struct adr_device* dev, const char* key, char* buf,
                                       size_t n) {
  struct vkt_prop p = {.key = key};
  assert_int_equal(adr_device_properties(dev, vkt_prop_cb, &p, NULL), 0);
  size_t len = p.found ? strlen(p.value) : 0;
  if (len >= n) len = n - 1;
  memcpy(buf, p.value, len);
  buf[len] = '\0';
  return buf;
}

static inline long long vkt_property_int(struct adr_device* dev, const char* key) {
  char buf[256];
  vkt_property(dev, key, buf, sizeof(buf));
  assert_true(buf[0] != '\0');
  return strtoll(buf, NULL, 10);
}

/* Host <-> device helpers on the NULL (blocking) stream. */
static inline void vkt_upload(struct vkt* t, void* dst, const void* src, size_t n) {
  struct adr_error err;
  int st = adr_copy(t->dev, dst, t->cpu, src, n, NULL, &err);
  if (st != 0) fail_msg("upload: %s", err.message);
}

static inline void vkt_download(struct vkt* t, void* dst, const void* src, size_t n) {
  struct adr_error err;
  int st = adr_copy(t->cpu, dst, t->dev, src, n, NULL, &err);
  if (st != 0) fail_msg("download: %s", err.message);
}

/* The validation layer is on in the registered runs (ADR_VULKAN_VALIDATION
 * =fatal); assert nothing was reported so far. */
static inline void vkt_assert_no_validation_messages(struct vkt* t) {
  char buf[64];
  vkt_property(t->dev, "validation_messages", buf, sizeof(buf));
  if (strcmp(buf, "0") != 0) fail_msg("validation messages so far: %s", buf);
}

#endif /* ADR_TESTS_VK_TEST_H */
