/* SPDX-License-Identifier: Apache-2.0
 *
 * Copies and memset.
 *
 * Host <-> device takes the mapped fast path when the allocation's memory
 * is host-visible (lavapipe, integrated GPUs, ReBAR) and the copy mode
 * allows it (ADR_VULKAN_COPY=auto|mapped): a memcpy through the block's
 * persistent mapping, with a flush/invalidate when the memory is not
 * host-coherent. Stream order is kept: an upload runs on the host only
 * when the stream has nothing pending and the queue is adr's alone
 * (otherwise it goes through staging, asynchronously, in queue order
 * behind whatever the application submitted); a download waits for the
 * stream first, and on a queue the application can reach, for an empty
 * submission posted behind the application's work (vkb_queue_post).
 *
 * Otherwise (or with ADR_VULKAN_COPY=staging) a ring of host-visible
 * staging chunks and vkCmdCopyBuffer: uploads copy into a free chunk and
 * submit, so the host fills chunk i+1 while the device copies chunk i;
 * downloads keep every chunk in flight and drain the oldest. Both hold
 * staging_lock, so staged copies of one device are serialised.
 *
 * Downloads to host memory complete before the call returns (like CUDA's
 * copies to pageable memory): the host memory cannot be written by the
 * device, so the last step is always a host memcpy.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "vulkan_internal.h"

#define VKB_CHUNK_MAX (8u << 20)

static bool ranges_overlap(VkDeviceSize a, VkDeviceSize b, VkDeviceSize n) {
  return a < b + n && b < a + n;
}

/* ---- staging ring ---------------------------------------------------------- */

/* Creates the ring on first use. staging_lock held. */
static int staging_ensure(struct adr_backend_device* dev, struct adr_error* error) {
  if (dev->staging != NULL) return 0;
  VkDeviceSize chunk = VKB_CHUNK_MAX;
  while (chunk > 65536 && chunk * VKB_STAGING_CHUNKS > dev->max_alloc) chunk /= 2;
  int st = vkb_staging_block_create(dev, chunk * VKB_STAGING_CHUNKS, &dev->staging, error);
  if (st != 0) return st;
  dev->chunk_size = chunk;
  memset(dev->chunks, 0, sizeof(dev->chunks));
  dev->chunk_next = 0;
  return 0;
}

int vkb_staging_init(struct adr_backend_device* dev, struct adr_error* error) {
  pthread_mutex_lock(&dev->staging_lock);
  int st = staging_ensure(dev, error);
  pthread_mutex_unlock(&dev->staging_lock);
  return st;
}

void vkb_staging_release(struct adr_backend_device* dev) {
  vkb_block_destroy(dev, dev->staging);
  dev->staging = NULL;
}

/* A small upload whose staging chunk is still in use by queued work: its
 * bytes go into the command buffer (vkCmdUpdateBuffer, which copies them
 * when recorded) and from a temporary range to the destination, so the
 * caller does not wait for that work (a call with a stream never blocks;
 * five small uploads on streams held back by one event used to wait for
 * the fifth chunk). The temporary range is freed once the copy ran. */
#define VKB_INLINE_UPLOAD_MAX 65536u

static int inline_upload(struct adr_backend_device* dev, struct vkb_loc dst, const uint8_t* src,
                         size_t size, struct adr_backend_stream* s, struct adr_error* error) {
  VkDeviceSize padded = ((VkDeviceSize)size + 3) & ~(VkDeviceSize)3;
  const void* data = src;
  uint8_t* pad = NULL;
  if (padded != size) {
    pad = calloc(1, (size_t)padded);
    if (pad == NULL) return vkb_errorf(error, ENOMEM, "out of host memory");
    memcpy(pad, src, size);
    data = pad;
  }
  struct vkb_range* tmp = NULL;
  int st = vkb_range_alloc(dev, padded, 64, &tmp, error);
  struct vkb_cmd c;
  if (st == 0) st = vkb_cmd_begin(s, &c, error);
  uint64_t done = 0;
  if (st == 0) {
    dev->fn.vkCmdUpdateBuffer(c.cb, tmp->block->buffer, tmp->offset, padded, data);
    vkb_barrier_all(dev, c.cb);
    VkBufferCopy region = {.srcOffset = tmp->offset, .dstOffset = dst.offset, .size = size};
    dev->fn.vkCmdCopyBuffer(c.cb, tmp->block->buffer, dst.block->buffer, 1, &region);
    st = vkb_cmd_submit(&c, &done, error);
  }
  vkb_range_free(dev, tmp, st == 0 ? done : 0);
  free(pad);
  return st;
}

static int staged_upload(struct adr_backend_device* dev, struct vkb_loc dst, const uint8_t* src,
                         size_t size, struct adr_backend_stream* s, struct adr_error* error) {
  pthread_mutex_lock(&dev->staging_lock);
  int st = staging_ensure(dev, error);
  /* The cached completed value first: the driver is asked only when the
   * chunk looks busy. */
  uint64_t busy_until = dev->chunks[dev->chunk_next].busy_until;
  if (st == 0 && size <= VKB_INLINE_UPLOAD_MAX &&
      busy_until > atomic_load_explicit(&dev->completed, memory_order_relaxed) &&
      busy_until > vkb_timeline_value(dev)) {
    pthread_mutex_unlock(&dev->staging_lock);
    return inline_upload(dev, dst, src, size, s, error);
  }
  for (size_t off = 0; st == 0 && off < size;) {
    size_t n = size - off < dev->chunk_size ? size - off : dev->chunk_size;
    uint32_t k = dev->chunk_next;
    dev->chunk_next = (k + 1) % VKB_STAGING_CHUNKS;
    st = vkb_timeline_wait(dev, dev->chunks[k].busy_until, error);
    if (st != 0) break;
    VkDeviceSize soff = (VkDeviceSize)k * dev->chunk_size;
    memcpy(dev->staging->mapped + soff, src + off, n);
    st = vkb_flush(dev, dev->staging, soff, n, error);
    if (st != 0) break;
    struct vkb_cmd c;
    st = vkb_cmd_begin(s, &c, error);
    if (st != 0) break;
    VkBufferCopy region = {.srcOffset = soff, .dstOffset = dst.offset + off, .size = n};
    dev->fn.vkCmdCopyBuffer(c.cb, dev->staging->buffer, dst.block->buffer, 1, &region);
    st = vkb_cmd_submit(&c, &dev->chunks[k].busy_until, error);
    off += n;
  }
  pthread_mutex_unlock(&dev->staging_lock);
  return st;
}

static int staged_download(struct adr_backend_device* dev, uint8_t* dst, struct vkb_loc src,
                           size_t size, struct adr_backend_stream* s, struct adr_error* error) {
  struct inflight {
    uint32_t chunk;
    size_t off, n;
  } fly[VKB_STAGING_CHUNKS];
  uint32_t head = 0, count = 0;
  pthread_mutex_lock(&dev->staging_lock);
  int st = staging_ensure(dev, error);
  size_t off = 0;
  while (st == 0 && (off < size || count > 0)) {
    if (off < size && count < VKB_STAGING_CHUNKS) {
      size_t n = size - off < dev->chunk_size ? size - off : dev->chunk_size;
      uint32_t k = dev->chunk_next;
      dev->chunk_next = (k + 1) % VKB_STAGING_CHUNKS;
      st = vkb_timeline_wait(dev, dev->chunks[k].busy_until, error);
      if (st != 0) break;
      struct vkb_cmd c;
      st = vkb_cmd_begin(s, &c, error);
      if (st != 0) break;
      VkBufferCopy region = {
          .srcOffset = src.offset + off, .dstOffset = (VkDeviceSize)k * dev->chunk_size, .size = n};
      dev->fn.vkCmdCopyBuffer(c.cb, src.block->buffer, dev->staging->buffer, 1, &region);
      st = vkb_cmd_submit(&c, &dev->chunks[k].busy_until, error);
      if (st != 0) break;
      fly[(head + count) % VKB_STAGING_CHUNKS] = (struct inflight){k, off, n};
      count++;
      off += n;
      continue;
    }
    struct inflight* f = &fly[head];
    head = (head + 1) % VKB_STAGING_CHUNKS;
    count--;
    VkDeviceSize soff = (VkDeviceSize)f->chunk * dev->chunk_size;
    st = vkb_timeline_wait(dev, dev->chunks[f->chunk].busy_until, error);
    if (st == 0) st = vkb_invalidate(dev, dev->staging, soff, f->n, error);
    if (st == 0) memcpy(dst + f->off, dev->staging->mapped + soff, f->n);
  }
  /* On error, chunks still in flight stay tagged with their values and are
   * waited for by whoever takes them next. */
  pthread_mutex_unlock(&dev->staging_lock);
  return st;
}

/* ---- directions ------------------------------------------------------------- */

static int copy_h2d(struct adr_backend_device* dev, void* dst, const void* src, size_t size,
                    struct adr_backend_stream* s, struct adr_error* error) {
  struct vkb_loc d;
  int st = vkb_resolve(dev, dst, size, &d, error);
  if (st != 0) return st;
  if (dev->mapped_copies && d.block->mapped != NULL && vkb_stream_host_ready(s)) {
    memcpy(d.block->mapped + d.offset, src, size);
    return vkb_flush(dev, d.block, d.offset, size, error);
  }
  return staged_upload(dev, d, src, size, s, error);
}

static int copy_d2h(struct adr_backend_device* dev, void* dst, const void* src, size_t size,
                    struct adr_backend_stream* s, struct adr_error* error) {
  struct vkb_loc l;
  int st = vkb_resolve(dev, src, size, &l, error);
  if (st != 0) return st;
  if (dev->mapped_reads && l.block->mapped != NULL) {
    /* Idle and adr's alone: nothing to wait for, without the lock. */
    st = vkb_stream_host_ready(s) ? 0 : vkb_stream_wait_idle(s, error);
    if (st == 0) st = vkb_invalidate(dev, l.block, l.offset, size, error);
    if (st == 0) memcpy(dst, l.block->mapped + l.offset, size);
    return st;
  }
  return staged_download(dev, dst, l, size, s, error);
}

static int copy_d2d(struct adr_backend_device* dev, void* dst, const void* src, size_t size,
                    struct adr_backend_stream* s, struct adr_error* error) {
  struct vkb_loc d, l;
  int st = vkb_resolve(dev, dst, size, &d, error);
  if (st == 0) st = vkb_resolve(dev, src, size, &l, error);
  if (st != 0) return st;
  if (d.block == l.block && d.offset == l.offset) return 0;
  if (dev->host_is_device && d.block->mapped != NULL && l.block->mapped != NULL &&
      vkb_stream_host_ready(s)) {
    /* A CPU device: the copy command would be a memcpy on a driver thread;
     * on an idle stream the calling thread does it without the hand-off. */
    st = vkb_invalidate(dev, l.block, l.offset, size, error);
    if (st != 0) return st;
    memmove(d.block->mapped + d.offset, l.block->mapped + l.offset, size);
    return vkb_flush(dev, d.block, d.offset, size, error);
  }
  struct vkb_range* tmp = NULL;
  if (d.block == l.block && ranges_overlap(d.offset, l.offset, size)) {
    /* vkCmdCopyBuffer forbids overlapping regions: go through a temporary
     * allocation (two copies, a barrier between). */
    st = vkb_range_alloc(dev, size, 64, &tmp, error);
    if (st != 0) return st;
  }
  struct vkb_cmd c;
  st = vkb_cmd_begin(s, &c, error);
  if (st != 0) {
    vkb_range_free(dev, tmp, 0);
    return st;
  }
  if (tmp != NULL) {
    VkBufferCopy r1 = {.srcOffset = l.offset, .dstOffset = tmp->offset, .size = size};
    dev->fn.vkCmdCopyBuffer(c.cb, l.block->buffer, tmp->block->buffer, 1, &r1);
    vkb_barrier_all(dev, c.cb);
    VkBufferCopy r2 = {.srcOffset = tmp->offset, .dstOffset = d.offset, .size = size};
    dev->fn.vkCmdCopyBuffer(c.cb, tmp->block->buffer, d.block->buffer, 1, &r2);
  } else {
    VkBufferCopy r = {.srcOffset = l.offset, .dstOffset = d.offset, .size = size};
    dev->fn.vkCmdCopyBuffer(c.cb, l.block->buffer, d.block->buffer, 1, &r);
  }
  uint64_t value = 0;
  st = vkb_cmd_submit(&c, &value, error);
  vkb_range_free(dev, tmp, st == 0 ? value : 0);
  return st;
}

/* Two devices of this backend (two VkDevices cannot see each other's
 * memory without external-memory extensions): through a host bounce
 * buffer, in pieces. The stream belongs to one of them; the other device
 * uses its default stream. */
static int copy_peer(struct adr_backend_device* dst_dev, void* dst,
                     struct adr_backend_device* src_dev, const void* src, size_t size,
                     struct adr_backend_stream* s, struct adr_error* error) {
  struct adr_backend_stream* ss = s->dev == src_dev ? s : src_dev->default_stream;
  struct adr_backend_stream* ds = s->dev == dst_dev ? s : dst_dev->default_stream;
  size_t piece = size < VKB_CHUNK_MAX ? size : VKB_CHUNK_MAX;
  uint8_t* bounce = malloc(piece);
  if (bounce == NULL) return vkb_errorf(error, ENOMEM, "out of host memory for a bounce buffer");
  int st = 0;
  for (size_t off = 0; st == 0 && off < size; off += piece) {
    size_t n = size - off < piece ? size - off : piece;
    st = copy_d2h(src_dev, bounce, (const uint8_t*)src + off, n, ss, error);
    if (st == 0) st = copy_h2d(dst_dev, (uint8_t*)dst + off, bounce, n, ds, error);
  }
  free(bounce);
  return st;
}

int vkb_copy(struct adr_backend_device* dst_dev, void* dst, struct adr_backend_device* src_dev,
             const void* src, size_t size, struct adr_backend_stream* stream,
             struct adr_error* error) {
  if (size == 0) return 0;
  if (dst_dev == NULL) return copy_d2h(src_dev, dst, src, size, stream, error);
  if (src_dev == NULL) return copy_h2d(dst_dev, dst, src, size, stream, error);
  if (dst_dev != src_dev) return copy_peer(dst_dev, dst, src_dev, src, size, stream, error);
  return copy_d2d(dst_dev, dst, src, size, stream, error);
}

/* ---- memset ------------------------------------------------------------------ */

int vkb_memset(struct adr_backend_device* dev, void* ptr, int value, size_t size,
               struct adr_backend_stream* s, struct adr_error* error) {
  if (size == 0) return 0;
  struct vkb_loc d;
  int st = vkb_resolve(dev, ptr, size, &d, error);
  if (st != 0) return st;
  uint8_t byte = (uint8_t)value;
  if (dev->mapped_copies && d.block->mapped != NULL && vkb_stream_host_ready(s)) {
    memset(d.block->mapped + d.offset, byte, size);
    return vkb_flush(dev, d.block, d.offset, size, error);
  }
  /* vkCmdFillBuffer needs 4-byte aligned offset and size: fill the aligned
   * middle; the unaligned head and tail (up to 3 bytes each) are copied
   * from a per-stream scratch word written with vkCmdUpdateBuffer. */
  VkDeviceSize begin = d.offset, end = d.offset + size;
  VkDeviceSize mid_begin = (begin + 3) & ~(VkDeviceSize)3;
  VkDeviceSize mid_end = end & ~(VkDeviceSize)3;
  if (mid_end < mid_begin) mid_begin = mid_end = end; /* inside one word */
  bool edges = begin < mid_begin || mid_end < end;
  if (edges) {
    pthread_mutex_lock(&s->lock);
    bool need = s->scratch == NULL;
    pthread_mutex_unlock(&s->lock);
    if (need) {
      struct vkb_range* r = NULL;
      st = vkb_range_alloc(dev, 64, 64, &r, error);
      if (st != 0) return st;
      pthread_mutex_lock(&s->lock);
      if (s->scratch == NULL) {
        s->scratch = r;
        r = NULL;
      }
      pthread_mutex_unlock(&s->lock);
      vkb_range_free(dev, r, 0);
    }
  }
  struct vkb_cmd c;
  st = vkb_cmd_begin(s, &c, error);
  if (st != 0) return st;
  if (mid_end > mid_begin) {
    uint32_t pattern = 0x01010101u * byte;
    dev->fn.vkCmdFillBuffer(c.cb, d.block->buffer, mid_begin, mid_end - mid_begin, pattern);
  }
  if (edges) {
    struct vkb_range* scr = s->scratch;
    uint8_t pattern[8];
    memset(pattern, byte, sizeof(pattern));
    dev->fn.vkCmdUpdateBuffer(c.cb, scr->block->buffer, scr->offset, sizeof(pattern), pattern);
    vkb_barrier_all(dev, c.cb);
    VkBufferCopy regions[2];
    uint32_t n = 0;
    if (begin < mid_begin)
      regions[n++] =
          (VkBufferCopy){.srcOffset = scr->offset, .dstOffset = begin, .size = mid_begin - begin};
    if (mid_end < end && !(mid_begin == end))
      regions[n++] =
          (VkBufferCopy){.srcOffset = scr->offset, .dstOffset = mid_end, .size = end - mid_end};
    dev->fn.vkCmdCopyBuffer(c.cb, scr->block->buffer, d.block->buffer, n, regions);
  }
  return vkb_cmd_submit(&c, NULL, error);
}

/* ---- blocking copies and fills (the copy_sync / memset_sync slots) ------
 * They return once the work and everything queued before it on the stream
 * has completed. On mapped memory they are a memcpy/memset on the calling
 * thread: at once when the stream is host-ready (adr's queue alone,
 * nothing pending), otherwise after vkb_stream_wait_idle, which on a queue
 * the application can reach first posts a timeline signal behind its
 * submissions. Downloads complete in vkb_copy already. Everything else is
 * vkb_copy / vkb_memset followed by the wait. */

static int wait_unless_ready(struct adr_backend_stream* s, struct adr_error* error) {
  return vkb_stream_host_ready(s) ? 0 : vkb_stream_wait_idle(s, error);
}

int vkb_copy_sync(struct adr_backend_device* dst_dev, void* dst, struct adr_backend_device* src_dev,
                  const void* src, size_t size, struct adr_backend_stream* stream,
                  struct adr_error* error) {
  if (size == 0) return 0;
  if (dst_dev == NULL) return copy_d2h(src_dev, dst, src, size, stream, error);
  int st;
  if (src_dev == NULL) {
    struct vkb_loc d;
    st = vkb_resolve(dst_dev, dst, size, &d, error);
    if (st != 0) return st;
    if (dst_dev->mapped_copies && d.block->mapped != NULL) {
      st = wait_unless_ready(stream, error);
      if (st == 0) memcpy(d.block->mapped + d.offset, src, size);
      return st != 0 ? st : vkb_flush(dst_dev, d.block, d.offset, size, error);
    }
  } else if (dst_dev == src_dev && dst_dev->host_is_device) {
    struct vkb_loc d, l;
    st = vkb_resolve(dst_dev, dst, size, &d, error);
    if (st == 0) st = vkb_resolve(dst_dev, src, size, &l, error);
    if (st != 0) return st;
    if (d.block->mapped != NULL && l.block->mapped != NULL) {
      st = wait_unless_ready(stream, error);
      if (st == 0) st = vkb_invalidate(dst_dev, l.block, l.offset, size, error);
      if (st == 0) memmove(d.block->mapped + d.offset, l.block->mapped + l.offset, size);
      return st != 0 ? st : vkb_flush(dst_dev, d.block, d.offset, size, error);
    }
  }
  st = vkb_copy(dst_dev, dst, src_dev, src, size, stream, error);
  return st != 0 ? st : vkb_stream_synchronize(stream->dev, stream, error);
}

int vkb_memset_sync(struct adr_backend_device* dev, void* ptr, int value, size_t size,
                    struct adr_backend_stream* s, struct adr_error* error) {
  if (size == 0) return 0;
  if (dev->mapped_copies) {
    struct vkb_loc d;
    int st = vkb_resolve(dev, ptr, size, &d, error);
    if (st != 0) return st;
    if (d.block->mapped != NULL) {
      st = wait_unless_ready(s, error);
      if (st == 0) memset(d.block->mapped + d.offset, (uint8_t)value, size);
      return st != 0 ? st : vkb_flush(dev, d.block, d.offset, size, error);
    }
  }
  int st = vkb_memset(dev, ptr, value, size, s, error);
  return st != 0 ? st : vkb_stream_synchronize(dev, s, error);
}
