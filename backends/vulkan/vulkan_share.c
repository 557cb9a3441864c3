/* SPDX-License-Identifier: Apache-2.0
 *
 * Vulkan backend: sharing memory with other processes of the host
 * (adr/share.h, docs/sharing.md) through VK_KHR_external_memory_fd.
 *
 * Vulkan decides at allocation time whether memory can be exported
 * (VkExportMemoryAllocateInfo), so shareable memory is a dedicated block
 * of its own (never a sub-range of a pooled block: exporting that would
 * hand the peer its neighbours). Its handle is an opaque fd from
 * vkGetMemoryFdKHR (a new one per export) plus the memory's size and type
 * index; the importer allocates memory of that type and size with
 * VkImportMemoryFdInfoKHR, binds a buffer to it and reads its device
 * address, which goes into the backend's address map like any
 * allocation. The kernel keeps the memory while either side holds it.
 *
 * Events are not shared: a VkEvent cannot leave its device, and the
 * timeline semaphore would need VK_KHR_external_semaphore_fd, which
 * lavapipe (Mesa 22.3, Debian 12) does not offer; the sender waits on the
 * host instead (share_caps reports no event bits).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#include "adr/share.h"
#include "vulkan_internal.h"

/* What the handle's native bytes carry. */
struct vkb_share_native {
  uint64_t buffer_size;
  uint32_t type_index;
  uint32_t reserved;
};
_Static_assert(sizeof(struct vkb_share_native) <= ADR_SHARE_NATIVE_SIZE, "native fits");

static int unsupported(struct adr_backend_device* dev, struct adr_error* error) {
  return vkb_errorf(error, ENOTSUP,
                    "vulkan:%" PRId64 " (%s) does not offer VK_KHR_external_memory_fd%s", dev->id,
                    dev->props.deviceName, dev->adopted ? " on the adopted device" : "");
}

static bool usable(struct adr_backend_device* dev) {
  return dev->has_memory_fd && !dev->adopted;
}

/* From enumeration only (adr-info asks; docs/backend-abi.md, "Opening
 * devices lazily"): the extension is enabled whenever it is offered. */
int vkb_share_caps(struct adr_backend_device* dev, uint32_t* out, struct adr_error* error) {
  (void)error;
  *out = usable(dev) ? ADR_SHARE_CAP_EXPORT_MEMORY | ADR_SHARE_CAP_IMPORT_MEMORY : 0;
  return 0;
}

int vkb_share_alloc(struct adr_backend_device* dev, size_t size, size_t alignment, void** out,
                    struct adr_error* error) {
  if (!usable(dev)) return unsupported(dev, error);
  int st = vkb_device_ensure(dev, error);
  if (st) return st;
  if (dev->get_memory_fd == NULL) return unsupported(dev, error);
  if (alignment > dev->granule && alignment > 256)
    return vkb_errorf(error, EINVAL, "shareable Vulkan memory is aligned to %" PRIu64 ", not %zu",
                      (uint64_t)(dev->granule > 256 ? dev->granule : 256), alignment);
  struct vkb_external ext = {.import_fd = -1};
  struct vkb_range* r = NULL;
  st = vkb_range_alloc_external(dev, size, &ext, &r, error);
  if (st == 0) *out = (void*)(uintptr_t)r->addr;
  return st;
}

int vkb_share_export(struct adr_backend_device* dev, const void* ptr, struct adr_share_handle* out,
                     int* out_fd, struct adr_error* error) {
  if (!usable(dev)) return unsupported(dev, error);
  int st = vkb_device_ensure(dev, error);
  if (st) return st;
  struct vkb_range r;
  struct vkb_block b;
  st = vkb_range_lookup(dev, ptr, &r, &b, error);
  if (st == 0 && !b.exportable)
    st = vkb_errorf(error, EINVAL, "%p is not shareable memory (allocate it with adr_share_alloc)",
                    ptr);
  if (st) return st;
  VkMemoryGetFdInfoKHR gi = {.sType = VK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR,
                             .memory = b.memory,
                             .handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT};
  int fd = -1;
  VkResult vr = dev->get_memory_fd(dev->device, &gi, &fd);
  if (vr != VK_SUCCESS) return vkb_check(vr, error, "vkGetMemoryFdKHR of %p", ptr);
  struct vkb_share_native n = {(uint64_t)b.size, b.type_index, 0};
  out->kind = ADR_SHARE_KIND_VULKAN_FD;
  out->object_id = (uint64_t)(uintptr_t)b.memory;
  out->object_size = b.mem_size;
  out->offset = (uint64_t)((VkDeviceAddress)(uintptr_t)ptr - b.base);
  memcpy(out->native, &n, sizeof(n));
  *out_fd = fd;
  return 0;
}

int vkb_share_import(struct adr_backend_device* dev, const struct adr_share_handle* h, int fd,
                     void** out, struct adr_error* error) {
  if (!usable(dev)) return unsupported(dev, error);
  int st = vkb_device_ensure(dev, error);
  if (st) return st;
  struct vkb_share_native n;
  memcpy(&n, h->native, sizeof(n));
  if (h->kind != ADR_SHARE_KIND_VULKAN_FD || n.buffer_size == 0 || h->offset >= n.buffer_size ||
      n.buffer_size > h->object_size || n.type_index >= dev->memprops.memoryTypeCount)
    return vkb_errorf(error, EINVAL, "not a Vulkan opaque-fd handle this device can import");
  if (fd < 0) return vkb_errorf(error, EBADF, "the handle's descriptor is missing");
  /* The driver takes the descriptor on success: give it a duplicate. */
  int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (own < 0) return vkb_errorf(error, EMFILE, "cannot duplicate descriptor %d", fd);
  struct vkb_external ext = {own, h->object_size, n.type_index};
  struct vkb_range* r = NULL;
  st = vkb_range_alloc_external(dev, n.buffer_size, &ext, &r, error);
  if (st) {
    close(own);
    return st;
  }
  *out = (void*)(uintptr_t)(r->block->base + h->offset);
  return 0;
}

int vkb_share_close(struct adr_backend_device* dev, void* ptr, struct adr_error* error) {
  if (!usable(dev)) return unsupported(dev, error);
  return vkb_range_free_imported(dev, ptr, error);
}
