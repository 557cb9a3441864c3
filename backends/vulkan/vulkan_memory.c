/* SPDX-License-Identifier: Apache-2.0
 *
 * Device memory: VkDeviceMemory blocks, each with one VkBuffer bound over
 * all of it, cut into ranges by a segregated-fit sub-allocator; and the
 * address map from device addresses back to (block, offset).
 *
 * Why blocks: drivers cap the number of VkDeviceMemory objects
 * (maxMemoryAllocationCount, often 4096) and vkAllocateMemory costs
 * microseconds. A block is block_size bytes (64 MiB unless the heap is
 * small); an allocation larger than half a block gets a dedicated block of
 * its own. Every allocation's address is base-of-block-buffer + offset, so
 * (VkBuffer, offset) for any address inside it is a tree look-up away.
 *
 * The sub-allocator: free ranges live on one list per power-of-two size
 * class (bin = floor(log2(size))) with a bit mask of non-empty bins, so
 * finding a fit is a count-trailing-zeros; ranges tile the block in address
 * order so freeing coalesces with both neighbours in O(1). The address map
 * is glibc's tsearch red-black tree keyed by [addr, addr + size), O(log n)
 * for alloc, free and resolving an interior address.
 *
 * Everything here runs under dev->mem_lock (a leaf lock).
 */
#include <errno.h>
#include <inttypes.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>

#include "tls.h"
#include "vulkan_internal.h"

#define VKB_GRANULE 64u

static VkDeviceSize align_up(VkDeviceSize v, VkDeviceSize a) {
  return (v + a - 1) & ~(a - 1);
}

static int floor_log2(VkDeviceSize v) {
  return 63 - __builtin_clzll(v);
}

/* ---- bins ------------------------------------------------------------------ */

static void bin_insert(struct vkb_block* b, struct vkb_range* r) {
  int bin = floor_log2(r->size);
  r->bin = bin;
  r->free = true;
  r->fprev = NULL;
  r->fnext = b->bins[bin];
  if (r->fnext != NULL) r->fnext->fprev = r;
  b->bins[bin] = r;
  b->bin_mask |= 1ull << bin;
}

static void bin_remove(struct vkb_block* b, struct vkb_range* r) {
  if (r->fprev != NULL)
    r->fprev->fnext = r->fnext;
  else
    b->bins[r->bin] = r->fnext;
  if (r->fnext != NULL) r->fnext->fprev = r->fprev;
  if (b->bins[r->bin] == NULL) b->bin_mask &= ~(1ull << r->bin);
  r->free = false;
  r->bin = -1;
  r->fprev = r->fnext = NULL;
}

/* Bytes of padding needed before a range so that its address is aligned. */
static VkDeviceSize pad_for(const struct vkb_block* b, VkDeviceSize offset, VkDeviceSize align) {
  VkDeviceAddress a = b->base + offset;
  return align_up(a, align) - a;
}

/* Takes one of the two spare nodes (a split needs at most two). */
static struct vkb_range* spare_take(struct vkb_range* spare[2]) {
  struct vkb_range* r = spare[0] != NULL ? spare[0] : spare[1];
  if (spare[0] != NULL)
    spare[0] = NULL;
  else
    spare[1] = NULL;
  memset(r, 0, sizeof(*r));
  return r;
}

/* Carve [size] aligned bytes out of a free range of block b, or NULL. The
 * spare nodes are consumed (set to NULL) when the range must be split; the
 * caller frees the ones left. */
static struct vkb_range* block_take(struct vkb_block* b, VkDeviceSize size, VkDeviceSize align,
                                    struct vkb_range* spare[2]) {
  int start = floor_log2(size);
  for (int pass = 0; pass < 2; pass++) {
    /* Pass 0 walks the bin that may hold a fit (sizes [2^k, 2^(k+1))) a
     * little; pass 1 takes any range of the bins above, which always fit
     * unless alignment padding eats them. */
    uint64_t mask;
    if (pass == 0)
      mask = b->bin_mask & (1ull << start);
    else
      mask = start >= 63 ? 0 : b->bin_mask & (~0ull << (start + 1));
    while (mask != 0) {
      int bin = __builtin_ctzll(mask);
      mask &= mask - 1;
      int walked = 0;
      for (struct vkb_range* r = b->bins[bin]; r != NULL && walked < 16; r = r->fnext, walked++) {
        VkDeviceSize pad = pad_for(b, r->offset, align);
        if (r->size < pad + size) continue;
        bin_remove(b, r);
        if (pad > 0) {
          struct vkb_range* front = spare_take(spare);
          front->block = b;
          front->offset = r->offset;
          front->size = pad;
          front->prev = r->prev;
          front->next = r;
          if (r->prev != NULL)
            r->prev->next = front;
          else
            b->first = front;
          r->prev = front;
          r->offset += pad;
          r->size -= pad;
          bin_insert(b, front);
        }
        if (r->size > size) {
          struct vkb_range* back = spare_take(spare);
          back->block = b;
          back->offset = r->offset + size;
          back->size = r->size - size;
          back->prev = r;
          back->next = r->next;
          if (r->next != NULL) r->next->prev = back;
          r->next = back;
          r->size = size;
          bin_insert(b, back);
        }
        b->live++;
        return r;
      }
    }
  }
  return NULL;
}

/* ---- blocks ---------------------------------------------------------------- */

static VkBufferUsageFlags device_usage(void) {
  return VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT |
         VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
}

void vkb_block_destroy(struct adr_backend_device* dev, struct vkb_block* b) {
  if (b == NULL) return;
  if (b->mapped != NULL) dev->fn.vkUnmapMemory(dev->device, b->memory);
  if (b->buffer != VK_NULL_HANDLE) dev->fn.vkDestroyBuffer(dev->device, b->buffer, NULL);
  if (b->memory != VK_NULL_HANDLE) dev->fn.vkFreeMemory(dev->device, b->memory, NULL);
  struct vkb_range* r = b->first;
  while (r != NULL) {
    struct vkb_range* n = r->next;
    free(r);
    r = n;
  }
  free(b);
}

/* Creates a block: buffer of `size`, memory of the first type of `types`
 * that the buffer accepts and the driver can allocate, mapped when
 * host-visible. */
static int block_create(struct adr_backend_device* dev, VkDeviceSize size, bool device_address,
                        const uint32_t* types, uint32_t type_count,
                        const struct vkb_external* ext, struct vkb_block** out,
                        struct adr_error* error) {
  struct vkb_block* b = calloc(1, sizeof(*b));
  struct vkb_range* whole = calloc(1, sizeof(*whole));
  if (b == NULL || whole == NULL) {
    free(b);
    free(whole);
    return vkb_errorf(error, ENOMEM, "out of host memory for a block descriptor");
  }
  VkExternalMemoryBufferCreateInfo ebci = {
      .sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO,
      .handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT};
  VkBufferCreateInfo bci = {
      .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
      .pNext = ext != NULL ? &ebci : NULL,
      .size = size,
      .usage = device_address ? device_usage()
                              : VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
      .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
  };
  VkResult r = dev->fn.vkCreateBuffer(dev->device, &bci, NULL, &b->buffer);
  if (r != VK_SUCCESS) {
    free(b);
    free(whole);
    return vkb_check(r, error, "vkCreateBuffer(%" PRIu64 " bytes)", (uint64_t)size);
  }
  VkMemoryRequirements req;
  dev->fn.vkGetBufferMemoryRequirements(dev->device, b->buffer, &req);
  VkMemoryAllocateFlagsInfo flags = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
      .flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT,
  };
  VkMemoryAllocateInfo mai = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
      .pNext = device_address ? &flags : NULL,
      .allocationSize = req.size,
  };
  /* Shared memory: exported at allocation time (the only time Vulkan asks),
   * or imported with the exporter's size and memory type. */
  VkExportMemoryAllocateInfo export_info = {
      .sType = VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO,
      .handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT};
  VkImportMemoryFdInfoKHR import_info = {.sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_FD_INFO_KHR,
                                         .handleType =
                                             VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT};
  uint32_t import_type = 0;
  if (ext != NULL) {
    void* chain = (void*)mai.pNext;
    if (ext->import_fd >= 0) {
      import_info.fd = ext->import_fd;
      import_info.pNext = chain;
      mai.pNext = &import_info;
      mai.allocationSize = ext->import_size;
      import_type = ext->import_type;
      types = &import_type;
      type_count = 1;
    } else {
      export_info.pNext = chain;
      mai.pNext = &export_info;
    }
  }
  r = VK_ERROR_OUT_OF_DEVICE_MEMORY;
  bool any_type = false;
  for (uint32_t i = 0; i < type_count && r != VK_SUCCESS; i++) {
    if (!(req.memoryTypeBits & (1u << types[i]))) continue;
    any_type = true;
    mai.memoryTypeIndex = types[i];
    r = dev->fn.vkAllocateMemory(dev->device, &mai, NULL, &b->memory);
    /* Only out-of-memory moves on to the next type. */
    if (r != VK_SUCCESS && r != VK_ERROR_OUT_OF_DEVICE_MEMORY && r != VK_ERROR_OUT_OF_HOST_MEMORY)
      break;
  }
  if (r != VK_SUCCESS) {
    dev->fn.vkDestroyBuffer(dev->device, b->buffer, NULL);
    free(b);
    free(whole);
    if (!any_type)
      return vkb_errorf(error, ENOMEM,
                        "no memory type fits a buffer of %" PRIu64 " bytes (memoryTypeBits 0x%x)",
                        (uint64_t)size, req.memoryTypeBits);
    return vkb_check(r, error, "vkAllocateMemory(%" PRIu64 " bytes)", (uint64_t)req.size);
  }
  b->type_index = mai.memoryTypeIndex;
  b->exportable = ext != NULL && ext->import_fd < 0;
  b->imported = ext != NULL && ext->import_fd >= 0;
  b->size = size;
  b->mem_size = req.size;
  VkMemoryPropertyFlags pf = dev->memprops.memoryTypes[b->type_index].propertyFlags;
  b->coherent = (pf & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) != 0;
  r = dev->fn.vkBindBufferMemory(dev->device, b->buffer, b->memory, 0);
  if (r == VK_SUCCESS && (pf & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT)) {
    void* p = NULL;
    r = dev->fn.vkMapMemory(dev->device, b->memory, 0, VK_WHOLE_SIZE, 0, &p);
    b->mapped = p;
  }
  if (r != VK_SUCCESS) {
    int st = vkb_check(r, error, "binding/mapping a block of %" PRIu64 " bytes", (uint64_t)size);
    free(whole);
    vkb_block_destroy(dev, b);
    return st;
  }
  if (device_address) {
    VkBufferDeviceAddressInfo ai = {.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO,
                                    .buffer = b->buffer};
    b->base = dev->fn.vkGetBufferDeviceAddress(dev->device, &ai);
  }
  whole->block = b;
  whole->offset = 0;
  whole->size = size;
  b->first = whole;
  bin_insert(b, whole);
  *out = b;
  return 0;
}

int vkb_staging_block_create(struct adr_backend_device* dev, VkDeviceSize size,
                             struct vkb_block** out, struct adr_error* error) {
  return block_create(dev, size, false, &dev->staging_type, 1, NULL, out, error);
}

static void block_link(struct adr_backend_device* dev, struct vkb_block* b) {
  b->prev = NULL;
  b->next = dev->blocks;
  if (dev->blocks != NULL) dev->blocks->prev = b;
  dev->blocks = b;
  dev->block_count++;
  dev->bytes_reserved += b->mem_size;
}

static void block_unlink_destroy(struct adr_backend_device* dev, struct vkb_block* b) {
  if (b->prev != NULL)
    b->prev->next = b->next;
  else
    dev->blocks = b->next;
  if (b->next != NULL) b->next->prev = b->prev;
  dev->block_count--;
  dev->bytes_reserved -= b->mem_size;
  vkb_block_destroy(dev, b);
}

/* ---- address map ------------------------------------------------------------ */

static int range_cmp(const void* pa, const void* pb) {
  const struct vkb_range* a = pa;
  const struct vkb_range* b = pb;
  if (a->addr + a->user_size <= b->addr) return -1;
  if (a->addr >= b->addr + b->user_size) return 1;
  return 0;
}

static struct vkb_range* map_find(struct adr_backend_device* dev, VkDeviceAddress addr) {
  struct vkb_range key = {.addr = addr, .user_size = 1};
  void* node = tfind(&key, &dev->live_tree, range_cmp);
  return node != NULL ? *(struct vkb_range**)node : NULL;
}

/* ---- release ------------------------------------------------------------------ */

/* Returns a live range to its block's free lists, coalescing; drops the
 * block when it is empty and either dedicated or not the only empty one. */
static void range_release(struct adr_backend_device* dev, struct vkb_range* r) {
  struct vkb_block* b = r->block;
  b->live--;
  if (r->prev != NULL && r->prev->free) {
    struct vkb_range* p = r->prev;
    bin_remove(b, p);
    p->size += r->size;
    p->next = r->next;
    if (r->next != NULL) r->next->prev = p;
    free(r);
    r = p;
  }
  if (r->next != NULL && r->next->free) {
    struct vkb_range* n = r->next;
    bin_remove(b, n);
    r->size += n->size;
    r->next = n->next;
    if (n->next != NULL) n->next->prev = r;
    free(n);
  }
  bin_insert(b, r);
  if (b->live > 0) return;
  bool keep = !b->dedicated;
  if (keep) {
    for (struct vkb_block* o = dev->blocks; o != NULL; o = o->next)
      if (o != b && !o->dedicated && o->live == 0) keep = false;
  }
  if (!keep) block_unlink_destroy(dev, b);
}

static void reclaim_deferred(struct adr_backend_device* dev) {
  if (dev->deferred == NULL) return;
  uint64_t done = vkb_timeline_value(dev);
  struct vkb_range** link = &dev->deferred;
  while (*link != NULL) {
    struct vkb_range* r = *link;
    if (r->free_after <= done) {
      *link = r->deferred_next;
      r->deferred_next = NULL;
      range_release(dev, r);
    } else {
      link = &r->deferred_next;
    }
  }
}

/* ---- allocation ---------------------------------------------------------------- */

static int range_alloc_locked(struct adr_backend_device* dev, VkDeviceSize size, VkDeviceSize align,
                              struct vkb_range** out, struct adr_error* error) {
  if (size > dev->max_alloc)
    return vkb_errorf(error, ENOMEM,
                      "VK_ERROR_OUT_OF_DEVICE_MEMORY: %" PRIu64
                      " bytes exceed the device's largest allocation (%" PRIu64 " bytes)",
                      (uint64_t)size, (uint64_t)dev->max_alloc);
  VkDeviceSize granule = dev->granule;
  VkDeviceSize need = align_up(size, granule);
  if (align < granule) align = granule;
  struct vkb_range* spare[2] = {malloc(sizeof(struct vkb_range)), malloc(sizeof(struct vkb_range))};
  if (spare[0] == NULL || spare[1] == NULL) {
    free(spare[0]);
    free(spare[1]);
    return vkb_errorf(error, ENOMEM, "out of host memory for the allocation map");
  }
  struct vkb_range* r = NULL;
  int st = 0;
  /* Room for the worst-case alignment padding too, or a dedicated block. */
  if (need + (align > granule ? align : 0) <= dev->block_size / 2) {
    for (struct vkb_block* b = dev->blocks; b != NULL && r == NULL; b = b->next)
      if (!b->dedicated) r = block_take(b, need, align, spare);
    if (r == NULL) {
      struct vkb_block* b = NULL;
      st = block_create(dev, dev->block_size, true, dev->alloc_types, dev->alloc_type_count, NULL,
                        &b, error);
      if (st == 0) {
        block_link(dev, b);
        r = block_take(b, need, align, spare);
      }
    }
  } else {
    struct vkb_block* b = NULL;
    VkDeviceSize bsize = need + (align > granule ? align : 0);
    if (bsize > dev->max_alloc) bsize = need;
    st = block_create(dev, bsize, true, dev->alloc_types, dev->alloc_type_count, NULL, &b, error);
    if (st == 0) {
      b->dedicated = true;
      block_link(dev, b);
      r = block_take(b, need, align, spare);
      if (r == NULL) {
        block_unlink_destroy(dev, b);
        st = vkb_errorf(error, ENOMEM,
                        "dedicated block of %" PRIu64 " bytes cannot hold %" PRIu64
                        " bytes aligned to %" PRIu64,
                        (uint64_t)bsize, (uint64_t)need, (uint64_t)align);
      }
    }
  }
  free(spare[0]);
  free(spare[1]);
  if (st != 0) return st;
  if (r == NULL)
    return vkb_errorf(error, ENOMEM, "no room for %" PRIu64 " bytes in a fresh block",
                      (uint64_t)need);
  r->addr = r->block->base + r->offset;
  r->user_size = size;
  r->free_after = 0;
  r->deferred_next = NULL;
  void* node = tsearch(r, &dev->live_tree, range_cmp);
  if (node == NULL || *(struct vkb_range**)node != r) {
    /* Out of memory in tsearch (an overlap cannot happen: ranges are
     * disjoint by construction). */
    range_release(dev, r);
    return vkb_errorf(error, ENOMEM, "out of host memory for the address map");
  }
  dev->live_count++;
  *out = r;
  return 0;
}

int vkb_range_alloc(struct adr_backend_device* dev, VkDeviceSize size, VkDeviceSize alignment,
                    struct vkb_range** out, struct adr_error* error) {
  pthread_mutex_lock(&dev->mem_lock);
  reclaim_deferred(dev);
  int st = range_alloc_locked(dev, size, alignment, out, error);
  pthread_mutex_unlock(&dev->mem_lock);
  return st;
}

/* Bumped after every removal from a device's address map: a thread's
 * cached look-up (vkb_resolve) is good while the count it saw holds, so
 * repeated copies on one allocation skip mem_lock. */
static _Atomic uint64_t removals;
/* Initial-exec (tls.h): a __tls_get_addr call per look-up was a twentieth
 * of a 64-byte mapped copy's time. */
static _Thread_local ADR_TLS_HOT struct {
  struct adr_backend_device* dev; /* NULL: empty */
  uint64_t removals;
  VkDeviceAddress addr;
  VkDeviceSize user_size;
  struct vkb_block* block;
  VkDeviceSize offset;
} last_found[2]; /* two: a device-to-device copy resolves both sides */
static _Thread_local ADR_TLS_HOT unsigned last_next;

static void range_free_locked(struct adr_backend_device* dev, struct vkb_range* r, uint64_t after) {
  tdelete(r, &dev->live_tree, range_cmp);
  atomic_fetch_add_explicit(&removals, 1, memory_order_release);
  dev->live_count--;
  if (after > 0 && after > vkb_timeline_value(dev)) {
    r->free_after = after;
    r->deferred_next = dev->deferred;
    dev->deferred = r;
  } else {
    range_release(dev, r);
  }
}

void vkb_range_free(struct adr_backend_device* dev, struct vkb_range* r, uint64_t after) {
  if (r == NULL) return;
  pthread_mutex_lock(&dev->mem_lock);
  range_free_locked(dev, r, after);
  pthread_mutex_unlock(&dev->mem_lock);
}

int vkb_alloc(struct adr_backend_device* dev, size_t size, size_t alignment,
              struct adr_backend_stream* stream, void** out, struct adr_error* error) {
  (void)stream; /* sub-allocated memory is ready at once for any stream */
  struct vkb_range* r = NULL;
  int st = vkb_range_alloc(dev, size, alignment, &r, error);
  if (st == 0) *out = (void*)(uintptr_t)r->addr;
  return st;
}

int vkb_free(struct adr_backend_device* dev, void* ptr, size_t size,
             struct adr_backend_stream* stream, struct adr_error* error) {
  if (vkb_exited()) return 0;
  uint64_t after = 0;
  if (stream != NULL) {
    pthread_mutex_lock(&stream->lock);
    after = stream->last_value;
    pthread_mutex_unlock(&stream->lock);
  }
  pthread_mutex_lock(&dev->mem_lock);
  struct vkb_range* r = map_find(dev, (VkDeviceAddress)(uintptr_t)ptr);
  int st = 0;
  if (r == NULL || r->addr != (VkDeviceAddress)(uintptr_t)ptr)
    st = vkb_errorf(error, EINVAL, "%p is not an allocation of vulkan:%" PRId64, ptr, dev->id);
  else if (r->user_size != size)
    st = vkb_errorf(error, EINVAL, "%p was allocated with %" PRIu64 " bytes, not %zu", ptr,
                    (uint64_t)r->user_size, size);
  else
    range_free_locked(dev, r, after);
  if (st == 0) reclaim_deferred(dev);
  pthread_mutex_unlock(&dev->mem_lock);
  return st;
}

/* ---- external memory (vulkan_share.c) ------------------------------------------ */

int vkb_range_alloc_external(struct adr_backend_device* dev, VkDeviceSize size,
                             const struct vkb_external* ext, struct vkb_range** out,
                             struct adr_error* error) {
  VkDeviceSize need = align_up(size, dev->granule);
  struct vkb_range* spare[2] = {malloc(sizeof(struct vkb_range)), malloc(sizeof(struct vkb_range))};
  if (spare[0] == NULL || spare[1] == NULL) {
    free(spare[0]);
    free(spare[1]);
    return vkb_errorf(error, ENOMEM, "out of host memory for the allocation map");
  }
  pthread_mutex_lock(&dev->mem_lock);
  struct vkb_block* b = NULL;
  struct vkb_range* r = NULL;
  int st = block_create(dev, need, true, dev->alloc_types, dev->alloc_type_count, ext, &b, error);
  if (st == 0) {
    b->dedicated = true;
    block_link(dev, b);
    r = block_take(b, need, dev->granule, spare);
    if (r == NULL) {
      block_unlink_destroy(dev, b);
      st = vkb_errorf(error, ENOMEM, "a dedicated block cannot hold %" PRIu64 " bytes",
                      (uint64_t)need);
    }
  }
  if (st == 0) {
    r->addr = r->block->base + r->offset;
    r->user_size = size;
    r->free_after = 0;
    r->deferred_next = NULL;
    void* node = tsearch(r, &dev->live_tree, range_cmp);
    if (node == NULL || *(struct vkb_range**)node != r) {
      range_release(dev, r);
      st = vkb_errorf(error, ENOMEM, "out of host memory for the address map");
    } else {
      dev->live_count++;
      *out = r;
    }
  }
  pthread_mutex_unlock(&dev->mem_lock);
  free(spare[0]);
  free(spare[1]);
  return st;
}

int vkb_range_lookup(struct adr_backend_device* dev, const void* addr, struct vkb_range* out_range,
                     struct vkb_block* out_block, struct adr_error* error) {
  pthread_mutex_lock(&dev->mem_lock);
  struct vkb_range* r = map_find(dev, (VkDeviceAddress)(uintptr_t)addr);
  if (r != NULL) {
    *out_range = *r;
    *out_block = *r->block;
  }
  pthread_mutex_unlock(&dev->mem_lock);
  if (r == NULL)
    return vkb_errorf(error, EINVAL, "%p is not inside an allocation of vulkan:%" PRId64, addr,
                      dev->id);
  return 0;
}

int vkb_range_free_imported(struct adr_backend_device* dev, const void* addr,
                            struct adr_error* error) {
  pthread_mutex_lock(&dev->default_stream->lock);
  uint64_t after = dev->default_stream->last_value;
  pthread_mutex_unlock(&dev->default_stream->lock);
  pthread_mutex_lock(&dev->mem_lock);
  struct vkb_range* r = map_find(dev, (VkDeviceAddress)(uintptr_t)addr);
  int st = 0;
  if (r == NULL || !r->block->imported)
    st = vkb_errorf(error, EINVAL, "%p is not memory adr_share_import mapped on vulkan:%" PRId64,
                    addr, dev->id);
  else
    range_free_locked(dev, r, after);
  if (st == 0) reclaim_deferred(dev);
  pthread_mutex_unlock(&dev->mem_lock);
  return st;
}

/* The look-up under mem_lock, and the remembering: out of line, so that
 * the cached answer (vkb_resolve) is a leaf with no frame to set up. */
__attribute__((noinline)) static int resolve_locked(struct adr_backend_device* dev,
                                                    const void* addr, size_t size,
                                                    struct vkb_loc* out, uint64_t seen,
                                                    struct adr_error* error) {
  VkDeviceAddress a = (VkDeviceAddress)(uintptr_t)addr;
  pthread_mutex_lock(&dev->mem_lock);
  struct vkb_range* r = map_find(dev, a);
  int st = 0;
  if (r == NULL) {
    st = vkb_errorf(error, EINVAL, "%p is not inside an allocation of vulkan:%" PRId64, addr,
                    dev->id);
  } else if (size > r->addr + r->user_size - a) {
    st = vkb_errorf(error, EINVAL,
                    "[%p, +%zu) runs past the end of its allocation (%p, %" PRIu64 " bytes)", addr,
                    size, (void*)(uintptr_t)r->addr, (uint64_t)r->user_size);
  } else {
    out->block = r->block;
    out->offset = r->offset + (a - r->addr);
    __typeof__(last_found[0])* c = &last_found[last_next];
    last_next ^= 1;
    c->dev = dev;
    c->removals = seen;
    c->addr = r->addr;
    c->user_size = r->user_size;
    c->block = r->block;
    c->offset = r->offset;
  }
  pthread_mutex_unlock(&dev->mem_lock);
  return st;
}

int vkb_resolve(struct adr_backend_device* dev, const void* addr, size_t size, struct vkb_loc* out,
                struct adr_error* error) {
  VkDeviceAddress a = (VkDeviceAddress)(uintptr_t)addr;
  uint64_t seen = atomic_load_explicit(&removals, memory_order_acquire);
  for (int i = 0; i < 2; i++) {
    __typeof__(last_found[0])* c = &last_found[i];
    if (c->dev == dev && c->removals == seen && a - c->addr < c->user_size &&
        size <= c->user_size - (a - c->addr)) {
      out->block = c->block;
      out->offset = c->offset + (a - c->addr);
      return 0;
    }
  }
  return resolve_locked(dev, addr, size, out, seen, error);
}

int vkb_buffer_lookup(struct adr_backend_device* dev, struct adr_vulkan_buffer* q,
                      struct adr_error* error) {
  if (q->struct_size < offsetof(struct adr_vulkan_buffer, reserved))
    return vkb_errorf(error, EINVAL,
                      "struct adr_vulkan_buffer.struct_size is %u, expected at least %zu",
                      q->struct_size, offsetof(struct adr_vulkan_buffer, reserved));
  VkDeviceAddress a = (VkDeviceAddress)(uintptr_t)q->address;
  pthread_mutex_lock(&dev->mem_lock);
  struct vkb_range* r = map_find(dev, a);
  if (r != NULL) {
    q->base = (void*)(uintptr_t)r->addr;
    q->size = (size_t)r->user_size;
    q->offset = (size_t)(a - r->addr);
    q->buffer = (uint64_t)(uintptr_t)r->block->buffer;
    q->buffer_offset = r->offset + (a - r->addr);
    q->memory = (uint64_t)(uintptr_t)r->block->memory;
    /* block_create binds the buffer at offset 0 of its memory. */
    q->memory_offset = q->buffer_offset;
  }
  pthread_mutex_unlock(&dev->mem_lock);
  if (r == NULL)
    return vkb_errorf(error, ENOENT, "%p is not inside an allocation of vulkan:%" PRId64,
                      q->address, dev->id);
  return 0;
}

bool vkb_owns(struct adr_backend_device* dev, const void* addr) {
  pthread_mutex_lock(&dev->mem_lock);
  bool found = map_find(dev, (VkDeviceAddress)(uintptr_t)addr) != NULL;
  pthread_mutex_unlock(&dev->mem_lock);
  return found;
}

/* ---- coherency --------------------------------------------------------------- */

static VkMappedMemoryRange mapped_range(struct adr_backend_device* dev, struct vkb_block* b,
                                        VkDeviceSize off, VkDeviceSize size) {
  VkDeviceSize atom = dev->atom ? dev->atom : 1;
  VkDeviceSize start = off / atom * atom;
  VkDeviceSize end = (off + size + atom - 1) / atom * atom;
  VkMappedMemoryRange mr = {.sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE,
                            .memory = b->memory,
                            .offset = start,
                            .size = end >= b->mem_size ? VK_WHOLE_SIZE : end - start};
  return mr;
}

int vkb_flush_noncoherent(struct adr_backend_device* dev, struct vkb_block* b, VkDeviceSize off,
                          VkDeviceSize size, struct adr_error* error) {
  VkMappedMemoryRange mr = mapped_range(dev, b, off, size);
  VkResult r = dev->fn.vkFlushMappedMemoryRanges(dev->device, 1, &mr);
  return r == VK_SUCCESS ? 0 : vkb_check(r, error, "vkFlushMappedMemoryRanges");
}

int vkb_invalidate_noncoherent(struct adr_backend_device* dev, struct vkb_block* b,
                               VkDeviceSize off, VkDeviceSize size, struct adr_error* error) {
  VkMappedMemoryRange mr = mapped_range(dev, b, off, size);
  VkResult r = dev->fn.vkInvalidateMappedMemoryRanges(dev->device, 1, &mr);
  return r == VK_SUCCESS ? 0 : vkb_check(r, error, "vkInvalidateMappedMemoryRanges");
}

/* ---- set-up and tear-down --------------------------------------------------------- */

/* Memory type ranking for allocations: device-local first; among those,
 * host-visible when it sits on the largest device-local heap (ReBAR, UMA,
 * lavapipe) so the mapped fast path applies; then coherent. */
static int type_score(struct adr_backend_device* dev, uint32_t t, VkDeviceSize largest_local) {
  VkMemoryType mt = dev->memprops.memoryTypes[t];
  VkDeviceSize heap = dev->memprops.memoryHeaps[mt.heapIndex].size;
  int s = 0;
  if (mt.propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) s += 8;
  if ((mt.propertyFlags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) && heap >= largest_local) s += 4;
  if (mt.propertyFlags & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) s += 2;
  if (mt.propertyFlags & VK_MEMORY_PROPERTY_HOST_CACHED_BIT) s += 1;
  /* Protected or lazily allocated memory cannot back buffers we copy. */
  if (mt.propertyFlags &
      (VK_MEMORY_PROPERTY_PROTECTED_BIT | VK_MEMORY_PROPERTY_LAZILY_ALLOCATED_BIT))
    s = -1;
  return s;
}

static int probe_type_bits(struct adr_backend_device* dev, VkBufferUsageFlags usage,
                           uint32_t* out_bits, struct adr_error* error) {
  VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                            .size = 65536,
                            .usage = usage,
                            .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
  VkBuffer buf;
  VkResult r = dev->fn.vkCreateBuffer(dev->device, &bci, NULL, &buf);
  if (r != VK_SUCCESS) return vkb_check(r, error, "vkCreateBuffer (probe)");
  VkMemoryRequirements req;
  dev->fn.vkGetBufferMemoryRequirements(dev->device, buf, &req);
  dev->fn.vkDestroyBuffer(dev->device, buf, NULL);
  *out_bits = req.memoryTypeBits;
  return 0;
}

int vkb_memory_init(struct adr_backend_device* dev, struct adr_error* error) {
  uint32_t bits = 0, staging_bits = 0;
  int st = probe_type_bits(dev, device_usage(), &bits, error);
  if (st == 0)
    st = probe_type_bits(dev, VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                         &staging_bits, error);
  if (st != 0) return st;

  VkDeviceSize largest_local = 0;
  for (uint32_t h = 0; h < dev->memprops.memoryHeapCount; h++)
    if ((dev->memprops.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) &&
        dev->memprops.memoryHeaps[h].size > largest_local)
      largest_local = dev->memprops.memoryHeaps[h].size;

  int scores[VK_MAX_MEMORY_TYPES];
  dev->alloc_type_count = 0;
  for (uint32_t t = 0; t < dev->memprops.memoryTypeCount; t++) {
    scores[t] = (bits & (1u << t)) ? type_score(dev, t, largest_local) : -1;
    if (scores[t] < 0) continue;
    /* insertion sort, best first, stable in type order */
    uint32_t i = dev->alloc_type_count++;
    while (i > 0 && scores[dev->alloc_types[i - 1]] < scores[t]) {
      dev->alloc_types[i] = dev->alloc_types[i - 1];
      i--;
    }
    dev->alloc_types[i] = t;
  }
  if (dev->alloc_type_count == 0)
    return vkb_errorf(error, ENODEV,
                      "no memory type can back device-address buffers (memoryTypeBits 0x%x)", bits);

  int best = -1, best_score = -1;
  for (uint32_t t = 0; t < dev->memprops.memoryTypeCount; t++) {
    VkMemoryPropertyFlags f = dev->memprops.memoryTypes[t].propertyFlags;
    if (!(staging_bits & (1u << t)) || !(f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT)) continue;
    int s = ((f & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) ? 2 : 0) +
            ((f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT) ? 1 : 0);
    if (s > best_score) {
      best = (int)t;
      best_score = s;
    }
  }
  if (best < 0) return vkb_errorf(error, ENODEV, "no host-visible memory type for staging");
  dev->staging_type = (uint32_t)best;

  /* maxBufferSize (1.3) may be below maxMemoryAllocationSize: a block is
   * one buffer, so both bound an allocation. */
  VkPhysicalDeviceMaintenance4Properties m4 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES};
  VkPhysicalDeviceMaintenance3Properties m3 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES,
      .pNext = dev->props.apiVersion >= VK_API_VERSION_1_3 ? &m4 : NULL};
  VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                    .pNext = &m3};
  dev->inst->vkGetPhysicalDeviceProperties2(dev->physical, &p2);
  VkDeviceSize heap =
      dev->memprops.memoryHeaps[dev->memprops.memoryTypes[dev->alloc_types[0]].heapIndex].size;
  dev->max_alloc = m3.maxMemoryAllocationSize ? m3.maxMemoryAllocationSize : heap;
  if (dev->max_alloc > heap) dev->max_alloc = heap;
  if (m4.maxBufferSize != 0 && dev->max_alloc > m4.maxBufferSize) dev->max_alloc = m4.maxBufferSize;
  VkDeviceSize bs = vkb_g.block_size_env ? vkb_g.block_size_env : 64u << 20;
  if (!vkb_g.block_size_env) {
    while (bs > (1u << 20) && bs > heap / 8) bs /= 2;
  }
  if (bs > dev->max_alloc) bs = dev->max_alloc;
  dev->block_size = bs;
  dev->atom = dev->props.limits.nonCoherentAtomSize;
  /* On memory that is not host-coherent, flushes and invalidations work in
   * nonCoherentAtomSize units: no two allocations may share one, or an
   * invalidate for one could drop another's unflushed host writes. */
  dev->granule = VKB_GRANULE;
  VkMemoryPropertyFlags af = dev->memprops.memoryTypes[dev->alloc_types[0]].propertyFlags;
  if ((af & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) && !(af & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) &&
      dev->atom > VKB_GRANULE && (dev->atom & (dev->atom - 1)) == 0)
    dev->granule = dev->atom;

  VkMemoryPropertyFlags f = dev->memprops.memoryTypes[dev->alloc_types[0]].propertyFlags;
  dev->mapped_copies =
      vkb_g.copy_mode != VKB_COPY_STAGING && (f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT);
  /* Reading write-combined memory across PCIe (ReBAR without HOST_CACHED)
   * runs at a fraction of the copy engine's speed: downloads then take the
   * staging path unless ADR_VULKAN_COPY=mapped insists. */
  bool shares_memory = dev->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ||
                       dev->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU;
  dev->mapped_reads = dev->mapped_copies && ((f & VK_MEMORY_PROPERTY_HOST_CACHED_BIT) ||
                                             shares_memory || vkb_g.copy_mode == VKB_COPY_MAPPED);
  dev->host_is_device = dev->mapped_copies && dev->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  return 0;
}

static void noop_free(void* p) {
  (void)p;
}

void vkb_memory_release(struct adr_backend_device* dev) {
  pthread_mutex_lock(&dev->mem_lock);
  /* The device is idle here (device_close waited), so every deferred free
   * is due and every block goes, leaked allocations included. */
  dev->deferred = NULL;
  atomic_fetch_add_explicit(&removals, 1, memory_order_release);
  tdestroy(dev->live_tree, noop_free);
  dev->live_tree = NULL;
  while (dev->blocks != NULL) block_unlink_destroy(dev, dev->blocks);
  pthread_mutex_unlock(&dev->mem_lock);
}
