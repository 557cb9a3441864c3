/* SPDX-License-Identifier: Apache-2.0
 *
 * The Vulkan loader library: libvulkan.so.1 is opened with dlopen (never
 * linked), the global entry points are resolved through its
 * vkGetInstanceProcAddr, and instance-level ones for any instance (adr's or
 * an adopted application's).
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>

#include "vulkan_internal.h"

#define VKB_LIBVULKAN "libvulkan.so.1"

int vkb_loader_open(struct adr_error* error) {
  snprintf(vkb_g.libvulkan_path, sizeof(vkb_g.libvulkan_path), "%s", VKB_LIBVULKAN);
  vkb_g.libvulkan = dlopen(VKB_LIBVULKAN, RTLD_NOW | RTLD_LOCAL);
  if (vkb_g.libvulkan == NULL) {
    const char* why = dlerror();
    return vkb_errorf(error, ENODEV, "unavailable: %s not found (tried: %s)", VKB_LIBVULKAN,
                      why != NULL ? why : VKB_LIBVULKAN);
  }
  vkb_g.gipa = (PFN_vkGetInstanceProcAddr)dlsym(vkb_g.libvulkan, "vkGetInstanceProcAddr");
  if (vkb_g.gipa == NULL) {
    dlclose(vkb_g.libvulkan);
    vkb_g.libvulkan = NULL;
    return vkb_errorf(error, ENODEV, "unavailable: %s does not export vkGetInstanceProcAddr",
                      VKB_LIBVULKAN);
  }
#define VKB_X(name, req)                                                                \
  vkb_g.g.name = (PFN_##name)(void (*)(void))vkb_g.gipa(VK_NULL_HANDLE, #name);         \
  if (vkb_g.g.name == NULL && (req)) {                                                  \
    dlclose(vkb_g.libvulkan);                                                           \
    vkb_g.libvulkan = NULL;                                                             \
    return vkb_errorf(error, ENODEV, "unavailable: %s lacks %s", VKB_LIBVULKAN, #name); \
  }
  VKB_GLOBAL_FNS(VKB_X)
#undef VKB_X
  return 0;
}

bool vkb_resolve_instance(struct vkb_instance* in, const char** missing) {
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
