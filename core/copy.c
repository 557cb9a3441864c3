/* SPDX-License-Identifier: Apache-2.0
 *
 * adr_copy routing.
 *
 *   host memory (NULL device) <-> X       -> X's copy slot with a NULL
 *                                            device on the host side; no
 *                                            backend loaded for the host
 *   host <-> host (both NULL)             -> memmove by the core (host.c)
 *   same backend (incl. CPU<->CPU, peer)  -> that backend's copy slot
 *   CPU <-> X                             -> X's copy slot with a NULL
 *                                            device on the host side
 *   X <-> Y, different backends           -> host-accessible side used
 *                                            directly when it can be, else
 *                                            staged through host memory in
 *                                            chunks, double-buffered so the
 *                                            read from X overlaps the write
 *                                            to Y
 *
 * The hot path (host<->device, device<->device on one backend) is checks
 * plus one indirect call: a blocking (NULL-stream) copy goes to the
 * backend's copy_sync slot, which waits for the copy itself (and may skip
 * the queue when the stream is idle), instead of copy + stream_synchronize. The range checks
 * (validate.h) cost two compares; on a device that is not host-accessible (or with the validation
 * layer on) they also look the range up in the device's interval index (answered from a per-thread
 * cache while the index is unchanged, else under its lock): the user's allocation, which the
 * backend's own map cannot see inside a pool chunk.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "host.h"
#include "validate.h"

#define STAGING_CHUNK ((size_t)8 << 20)

static inline bool is_cpu(const struct adr_device* d) {
  return d->type == ARROW_DEVICE_CPU;
}

static int backend_copy(struct adr_device* owner, struct adr_backend_device* dst_h, void* dst,
                        struct adr_backend_device* src_h, const void* src, size_t size,
                        struct adr_backend_stream* stream, struct adr_error* error) {
  return adr__dispatch_copy(owner, "adr_copy", dst_h, dst, src_h, src, size, stream, error);
}

/* Queue the copy on `s` and wait for it and everything before it: one
 * call into the backend (copy_sync, dispatch.h). */
static int backend_copy_sync(struct adr_device* owner, struct adr_backend_device* dst_h, void* dst,
                             struct adr_backend_device* src_h, const void* src, size_t size,
                             struct adr_backend_stream* stream, struct adr_error* error) {
  return adr__dispatch_copy_sync(owner, "adr_copy", dst_h, dst, src_h, src, size, stream, error);
}

static int synchronize(struct adr_device* dev, struct adr_backend_stream* s,
                       struct adr_error* error) {
  return adr__dispatch_stream_synchronize(dev, "adr_copy", s, error);
}

/* X -> Y through host memory. Both sides run on their own streams; the
 * copy has completed when this returns (the staging memory is freed). */
static int staged_copy(struct adr_device* dst_dev, void* dst, struct adr_device* src_dev,
                       const void* src, size_t size, struct adr_backend_stream* ds,
                       struct adr_backend_stream* ss, struct adr_error* error) {
  size_t chunk = size < STAGING_CHUNK ? size : STAGING_CHUNK;
  unsigned char* stage[2] = {NULL, NULL};
  stage[0] = aligned_alloc(4096, (chunk + 4095) & ~(size_t)4095);
  stage[1] = size > chunk ? aligned_alloc(4096, (chunk + 4095) & ~(size_t)4095) : NULL;
  if (stage[0] == NULL || (size > chunk && stage[1] == NULL)) {
    free(stage[0]);
    free(stage[1]);
    return adr__errorf(error, ENOMEM, "adr_copy", NULL,
                       "cannot allocate %zu bytes of staging memory", 2 * chunk);
  }
  size_t n = (size + chunk - 1) / chunk;
  int st = backend_copy(src_dev, NULL, stage[0], src_dev->handle, src, chunk, ss, error);
  if (st == 0) st = synchronize(src_dev, ss, error);
  for (size_t i = 0; st == 0 && i < n; i++) {
    size_t off = i * chunk, len = size - off < chunk ? size - off : chunk;
    /* Chunk i goes up while chunk i+1 comes down into the other buffer,
     * whose last reader (chunk i-1) finished in the previous round. */
    st = backend_copy(dst_dev, dst_dev->handle, (char*)dst + off, NULL, stage[i % 2], len, ds,
                      error);
    if (st == 0 && i + 1 < n) {
      size_t noff = off + chunk, nlen = size - noff < chunk ? size - noff : chunk;
      st = backend_copy(src_dev, NULL, stage[(i + 1) % 2], src_dev->handle, (const char*)src + noff,
                        nlen, ss, error);
      if (st == 0) st = synchronize(src_dev, ss, error);
    }
    if (st == 0) st = synchronize(dst_dev, ds, error);
  }
  if (st != 0) {
    /* Drain whatever is still queued before the staging memory goes. */
    synchronize(src_dev, ss, NULL);
    synchronize(dst_dev, ds, NULL);
  }
  free(stage[0]);
  free(stage[1]);
  return st;
}

/* One side (or both) is pageable host memory, a NULL device. Host <-> X is
 * X's copy slot with a NULL device on the host side, on X's stream (or its
 * default stream, blocking); no backend is loaded for the host side. Host
 * <-> host is the core's memmove (host.c). */
static int host_side_copy(struct adr_device* dst_device, void* dst, struct adr_device* src_device,
                          const void* src, size_t size, struct adr_stream* stream,
                          struct adr_error* error) {
  if (dst_device == NULL && src_device == NULL)
    return adr__host_copy(dst, src, size, stream, error);
  bool to_host = dst_device == NULL;
  struct adr_device* x = to_host ? src_device : dst_device;
  bool validating = ADR__VALIDATING();
  int st;
  if (validating && (st = adr__validate_stream("adr_copy", stream, error)) != 0) return st;
  if (stream != NULL && stream->device != x)
    return adr__errorf(error, EINVAL, "adr_copy", NULL,
                       "stream belongs to %s, not to %s (the %s is host memory: NULL device)",
                       stream->device->name, x->name, to_host ? "destination" : "source");
  if ((st = adr__range_check("adr_copy", x, to_host ? "source" : "destination", to_host ? src : dst,
                             size, error)) != 0 ||
      (st = adr__host_range_check("adr_copy", to_host ? "destination" : "source",
                                  to_host ? dst : src, size, validating, error)) != 0)
    return st;
  struct adr_backend_device* dh = to_host ? NULL : x->handle;
  struct adr_backend_device* sh = to_host ? x->handle : NULL;
  if (stream != NULL) return backend_copy(x, dh, dst, sh, src, size, stream->handle, error);
  return backend_copy_sync(x, dh, dst, sh, src, size, x->default_stream.handle, error);
}

/* A released device's handle must not reach a backend. */
static int released_error(const struct adr_device* dev, struct adr_error* error) {
  return adr__errorf(error, ENODEV, "adr_copy", NULL, "ENODEV: %s was released", dev->name);
}

/* Every case but the hot one (adr_copy below), out of line so that the hot
 * case's frame stays small. */
__attribute__((noinline)) static int copy_any(struct adr_device* dst_device, void* dst,
                                              struct adr_device* src_device, const void* src,
                                              size_t size, struct adr_stream* stream,
                                              struct adr_error* error) {
  if (size == 0) return 0;
  if (dst == NULL || src == NULL)
    return adr__errorf(
        error, EINVAL, "adr_copy", NULL, "%s pointer is NULL%s", dst ? "source" : "destination",
        (dst ? src_device : dst_device) == NULL ? " (host memory: NULL device)" : "");
  struct adr_device* released =
      dst_device != NULL && atomic_load_explicit(&dst_device->released, memory_order_relaxed)
          ? dst_device
      : src_device != NULL && atomic_load_explicit(&src_device->released, memory_order_relaxed)
          ? src_device
          : NULL;
  if (released != NULL) return released_error(released, error);
  if (dst_device == NULL || src_device == NULL)
    return host_side_copy(dst_device, dst, src_device, src, size, stream, error);
  int cst;
  if (ADR__VALIDATING() && (cst = adr__validate_stream("adr_copy", stream, error)) != 0) return cst;
  if (stream != NULL && stream->device != dst_device && stream->device != src_device)
    return adr__errorf(error, EINVAL, "adr_copy", NULL,
                       "stream belongs to %s, which is neither %s nor %s", stream->device->name,
                       dst_device->name, src_device->name);
  if ((cst = adr__range_check("adr_copy", dst_device, "destination", dst, size, error)) != 0 ||
      (cst = adr__range_check("adr_copy", src_device, "source", src, size, error)) != 0)
    return cst;

  /* Same backend: one call, on the given stream or the default stream of
   * the device side (the destination unless it is the host). */
  if (dst_device->backend == src_device->backend) {
    if (stream != NULL)
      return backend_copy(stream->device, dst_device->handle, dst, src_device->handle, src, size,
                          stream->handle, error);
    struct adr_device* owner = is_cpu(dst_device) ? src_device : dst_device;
    return backend_copy_sync(owner, dst_device->handle, dst, src_device->handle, src, size,
                             owner->default_stream.handle, error);
  }

  /* CPU <-> X: X's copy with the host side as a NULL device. A CPU stream
   * orders nothing on X, so its queued work is drained first. */
  if (is_cpu(src_device) || is_cpu(dst_device)) {
    struct adr_device* x = is_cpu(src_device) ? dst_device : src_device;
    struct adr_device* cpu = is_cpu(src_device) ? src_device : dst_device;
    struct adr_stream* xs = stream;
    if (stream != NULL && stream->device == cpu) {
      int st = synchronize(cpu, stream->handle, error);
      if (st) return st;
      xs = NULL;
    }
    struct adr_backend_device* dh = is_cpu(src_device) ? x->handle : NULL;
    struct adr_backend_device* sh = is_cpu(src_device) ? NULL : x->handle;
    if (xs != NULL) return backend_copy(x, dh, dst, sh, src, size, xs->handle, error);
    return backend_copy_sync(x, dh, dst, sh, src, size, x->default_stream.handle, error);
  }

  /* Two backends. Each side works on the given stream if it is its own,
   * else on its default stream. */
  struct adr_backend_stream* ds =
      (stream && stream->device == dst_device) ? stream->handle : dst_device->default_stream.handle;
  struct adr_backend_stream* ss =
      (stream && stream->device == src_device) ? stream->handle : src_device->default_stream.handle;
  if (src_device->host_accessible) {
    /* Pinned/managed/SVM source: Y reads it directly once X is done. */
    int st = synchronize(src_device, ss, error);
    if (st == 0)
      st = backend_copy_sync(dst_device, dst_device->handle, dst, NULL, src, size, ds, error);
    return st;
  }
  if (dst_device->host_accessible) {
    int st = synchronize(dst_device, ds, error);
    if (st == 0)
      st = backend_copy_sync(src_device, NULL, dst, src_device->handle, src, size, ss, error);
    return st;
  }
  return staged_copy(dst_device, dst, src_device, src, size, ds, ss, error);
}

/* The range check of one side of the hot case: nothing on a
 * host-accessible device; on any other (or a released one, which reads as
 * not host-accessible) the released check copy_any makes and the device's
 * interval index (validate.h), whose per-thread answer makes a repeated
 * copy on one allocation a few compares. */
static inline int hot_range_check(struct adr_device* dev, const char* what, const void* p,
                                  size_t size, struct adr_error* error) {
  if (__builtin_expect(dev->host_accessible, 1)) return 0;
  if (__builtin_expect(atomic_load_explicit(&dev->released, memory_order_relaxed), 0))
    return released_error(dev, error);
  return adr__range_check_indexed("adr_copy", dev, what, p, size, error);
}

/* The hot case: a blocking copy (NULL stream) with the validation layer
 * off between host memory (a NULL device) and a device, or two devices of
 * one backend, or the CPU device and another. Sizes and ranges are sane
 * (no wrap, at most PTRDIFF_MAX), so the checks copy_any would make are
 * the range checks of the sides that need them (hot_range_check), and the
 * copy is one call into the owning backend's copy_sync slot. Anything
 * else (a stream, two backends neither of which is the CPU's, host to
 * host), and every failed check, goes to copy_any, which reports it. */
int adr_copy(struct adr_device* dst_device, void* dst, struct adr_device* src_device,
             const void* src, size_t size, struct adr_stream* stream, struct adr_error* error) {
  if (__builtin_expect(stream == NULL && dst != NULL && src != NULL &&
                           size - 1 < (size_t)PTRDIFF_MAX &&
                           (uintptr_t)dst + size > (uintptr_t)dst &&
                           (uintptr_t)src + size > (uintptr_t)src && !ADR__VALIDATING(),
                       1)) {
    int st;
    if (dst_device == NULL) {
      /* Host memory <- X: X's copy, host side NULL. */
      if (src_device == NULL)
        return copy_any(dst_device, dst, src_device, src, size, stream, error);
      if ((st = hot_range_check(src_device, "source", src, size, error)) != 0) return st;
      return backend_copy_sync(src_device, NULL, dst, src_device->handle, src, size,
                               src_device->default_stream.handle, error);
    }
    if (src_device == NULL) {
      if ((st = hot_range_check(dst_device, "destination", dst, size, error)) != 0) return st;
      return backend_copy_sync(dst_device, dst_device->handle, dst, NULL, src, size,
                               dst_device->default_stream.handle, error);
    }
    struct adr_device* owner = dst_device;
    struct adr_backend_device *dh = dst_device->handle, *sh = src_device->handle;
    if (__builtin_expect(dst_device->backend == src_device->backend, 1)) {
      if (is_cpu(dst_device)) owner = src_device;
    } else if (is_cpu(dst_device)) {
      owner = src_device;
      dh = NULL;
    } else if (is_cpu(src_device)) {
      sh = NULL;
    } else {
      return copy_any(dst_device, dst, src_device, src, size, stream, error);
    }
    if ((st = hot_range_check(dst_device, "destination", dst, size, error)) != 0 ||
        (st = hot_range_check(src_device, "source", src, size, error)) != 0)
      return st;
    return backend_copy_sync(owner, dh, dst, sh, src, size, owner->default_stream.handle, error);
  }
  return copy_any(dst_device, dst, src_device, src, size, stream, error);
}
