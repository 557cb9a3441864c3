/* SPDX-License-Identifier: Apache-2.0
 *
 * Allocation, copies and fills.
 *
 * Address model (backends/opencl/README.md):
 *  - svm-fine / svm-coarse: the address is the clSVMAlloc pointer itself.
 *  - buffer: each allocation is a cl_mem; its address is the start of a
 *    private PROT_NONE mapping of the allocation's size (rounded up to pages
 *    and aligned as requested). The kernel guarantees such ranges never
 *    overlap each other or any real host memory, touching one faults
 *    instead of corrupting data, and they cost address space only (no RAM,
 *    MAP_NORESERVE). base + k maps back to (cl_mem, k).
 * An SVM allocation whose alignment exceeds the device's base alignment is
 * carved out of a larger clSVMAlloc block (the block is kept as its
 * `reservation`).
 * Every allocation of every device is recorded in ocl_allocations, so an
 * address anywhere inside an allocation (an Arrow slice) resolves to its
 * device, native object and offset in O(log n), and bad pointers are
 * reported instead of handed to the driver.
 *
 * Copy fast path (svm-fine, ADR_OPENCL_HOST_COPY=1): the host can address
 * fine-grained SVM directly, so when the stream's queue is adr's alone
 * (never handed to the application) and everything adr queued on it has
 * completed, a copy or fill is a memmove/memset on the calling thread and
 * has completed on return; it is in queue order without waiting for
 * anything. Otherwise it is queued like in the svm-coarse mode
 * (clEnqueueSVMMemcpy/MemFill), so an asynchronous call never blocks the
 * host, and work the application queued itself is ordered before it.
 *
 * Overlapping ranges of one allocation have memmove semantics on every
 * path: queued copies go through a temporary object (two commands).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "opencl_internal.h"
#include "tls.h"

struct adr_range_map ocl_allocations = ADR_RANGE_MAP_INIT(struct ocl_alloc);

/* Bumped after every removal from ocl_allocations: a thread's cached
 * look-up (resolve) is good while the count it saw is unchanged, so
 * repeated copies on one allocation skip the map's lock. */
static _Atomic uint64_t removals;
/* Initial-exec (tls.h): a __tls_get_addr call per look-up was an eighth
 * of a 64-byte svm-fine copy's time. */
static _Thread_local ADR_TLS_HOT struct {
  uint64_t removals;
  struct ocl_alloc a; /* a.size == 0: empty */
} last_found[2];      /* two: a device-to-device copy resolves both sides */
static _Thread_local ADR_TLS_HOT unsigned last_next;

static bool alloc_owned_by(const void* entry, const void* owner) {
  return ((const struct ocl_alloc*)entry)->owner == owner;
}

/* Staging chunk for copies between devices in different contexts. */
#define OCL_STAGING_CHUNK ((size_t)8 << 20)

static size_t page_size(void) {
  long p = sysconf(_SC_PAGESIZE);
  return p > 0 ? (size_t)p : 4096;
}

/* Reserves an inaccessible, page-aligned range of at least `size` bytes
 * whose start is aligned to `alignment`. */
static int reserve_range(size_t size, size_t alignment, void** out, size_t* out_len) {
  size_t page = page_size();
  size_t align = alignment > page ? alignment : page;
  if (size > SIZE_MAX - page || size + page > SIZE_MAX - align) return EOVERFLOW;
  size_t body = (size + page - 1) & ~(page - 1);
  size_t extra = align > page ? align : 0;
  void* p = mmap(NULL, body + extra, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return ENOMEM;
  uintptr_t start = ((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1);
  size_t head = start - (uintptr_t)p;
  size_t tail = body + extra - head - body;
  if (head > 0) munmap(p, head);
  if (tail > 0) munmap((char*)start + body, tail);
  *out = (void*)start;
  *out_len = body;
  return 0;
}

/* Releases the native side of an allocation removed from the map. With a
 * queue, an SVM free is ordered after the queue's earlier work. */
static cl_int release_native(const struct ocl_alloc* a, struct adr_backend_stream* stream) {
  cl_int rc = CL_SUCCESS;
  const struct adr_backend_device* owner = a->owner;
  if (a->native != NULL) {
    /* OpenCL keeps the object alive until commands using it complete. */
    rc = ocl.clReleaseMemObject((cl_mem)a->native);
    munmap(a->reservation, a->reservation_size);
  } else if (stream != NULL) {
    void* p = a->reservation;
    cl_event ev;
    rc = ocl.clEnqueueSVMFree(stream->queue, 1, &p, NULL, NULL, 0, NULL,
                              ocl_track_slot(stream, &ev));
    if (rc == CL_SUCCESS) {
      ocl_stream_track(stream, ev);
      rc = ocl.clFlush(stream->queue);
    } else {
      /* Could not queue it: free it once the stream is done instead, so
       * that the memory is not lost with its map entry. */
      ocl.clFinish(stream->queue);
      ocl.clSVMFree(owner->context, a->reservation);
    }
  } else {
    ocl.clSVMFree(owner->context, a->reservation);
  }
  return rc;
}

int ocl_alloc(struct adr_backend_device* dev, size_t size, size_t alignment,
              struct adr_backend_stream* stream, void** out, struct adr_error* error) {
  (void)stream; /* allocation is immediate, so it is ready on every stream */
  if (size > dev->max_alloc && dev->max_alloc != 0)
    return ocl_errorf(error, ENOMEM,
                      "%zu bytes exceed CL_DEVICE_MAX_MEM_ALLOC_SIZE (%" PRIu64 ") of opencl:%lld",
                      size, dev->max_alloc, (long long)dev->id);
  if (alignment < dev->alignment) alignment = dev->alignment;
  struct ocl_alloc a = {.size = size, .owner = dev};
  if (dev->mode == ADR_OPENCL_ADDRESS_BUFFER) {
    cl_int rc = CL_SUCCESS;
    cl_mem mem = ocl.clCreateBuffer(dev->context, CL_MEM_READ_WRITE, size, NULL, &rc);
    if (mem == NULL || rc != CL_SUCCESS)
      return ocl_check(rc, error, "clCreateBuffer of %zu bytes on opencl:%lld failed", size,
                       (long long)dev->id);
    void* addr = NULL;
    int st = reserve_range(size, alignment, &addr, &a.reservation_size);
    if (st != 0) {
      ocl.clReleaseMemObject(mem);
      return ocl_errorf(error, st,
                        "cannot reserve %zu bytes of address space (alignment %zu) for a cl_mem",
                        size, alignment);
    }
    a.base = (uintptr_t)addr;
    a.native = mem;
    a.reservation = addr;
  } else {
    /* Drivers cap clSVMAlloc's alignment (PoCL at the largest data type), so
     * a larger one is honoured by over-allocating and aligning inside: the
     * inner pointer is as valid for kernels and SVM calls as the base. */
    size_t extra = alignment - dev->alignment;
    if (size > SIZE_MAX - extra)
      return ocl_errorf(error, EOVERFLOW, "%zu bytes aligned to %zu overflow size_t", size,
                        alignment);
    size_t total = size + extra;
    if (total > dev->max_alloc && dev->max_alloc != 0)
      return ocl_errorf(error, ENOMEM,
                        "%zu bytes aligned to %zu exceed CL_DEVICE_MAX_MEM_ALLOC_SIZE (%" PRIu64
                        ") of opencl:%lld",
                        size, alignment, dev->max_alloc, (long long)dev->id);
    cl_svm_mem_flags flags = CL_MEM_READ_WRITE;
    if (dev->mode == ADR_OPENCL_ADDRESS_SVM_FINE) flags |= CL_MEM_SVM_FINE_GRAIN_BUFFER;
    void* p = ocl.clSVMAlloc(dev->context, flags, total, dev->alignment);
    if (p == NULL)
      return ocl_check(CL_MEM_OBJECT_ALLOCATION_FAILURE, error,
                       "clSVMAlloc(%zu bytes, alignment %u) on opencl:%lld returned NULL", total,
                       dev->alignment, (long long)dev->id);
    a.base = ((uintptr_t)p + alignment - 1) & ~(uintptr_t)(alignment - 1);
    a.reservation = p;
    a.reservation_size = total;
  }
  int st = adr_range_map_insert(&ocl_allocations, &a);
  if (st != 0) {
    release_native(&a, NULL);
    return ocl_errorf(error, st == EEXIST ? EIO : st,
                      st == EEXIST ? "the driver returned address %p, which overlaps a live "
                                     "allocation"
                                   : "cannot record allocation %p",
                      (void*)a.base);
  }
  *out = (void*)a.base;
  return 0;
}

int ocl_free(struct adr_backend_device* dev, void* ptr, size_t size,
             struct adr_backend_stream* stream, struct adr_error* error) {
  struct ocl_alloc a;
  int st = adr_range_map_find(&ocl_allocations, (uintptr_t)ptr, 0, &a);
  if (st != 0 || a.base != (uintptr_t)ptr || a.owner != dev)
    return ocl_errorf(error, EINVAL, "%p is not an allocation of opencl:%lld", ptr,
                      (long long)dev->id);
  if (a.size != size)
    return ocl_errorf(error, EINVAL, "%p was allocated with %zu bytes, not %zu", ptr, a.size, size);
  if (stream->dev->context != dev->context)
    return ocl_errorf(error, EINVAL, "the stream belongs to opencl:%lld, not to opencl:%lld",
                      (long long)stream->dev->id, (long long)dev->id);
  if (adr_range_map_remove(&ocl_allocations, a.base, &a) != 0)
    return ocl_errorf(error, EINVAL, "%p was freed concurrently", ptr);
  atomic_fetch_add_explicit(&removals, 1, memory_order_release);
  /* The core passes the default stream for a free with a NULL stream (the
   * caller guarantees no queued work uses the memory) and for the pool
   * giving chunks back (adr_memory_trim, the cap): when adr has nothing
   * pending there, release at once. A queued clEnqueueSVMFree is carried
   * out whenever the driver gets to it (PoCL: hundreds of milliseconds for
   * 2 GiB, or not before the queue is next waited for), so memory freed
   * on the host's behalf was not back in the system when adr_free or
   * adr_memory_trim returned. */
  if (stream == &dev->default_stream && ocl_stream_idle(stream)) stream = NULL;
  cl_int rc = release_native(&a, stream);
  if (rc != CL_SUCCESS) return ocl_check(rc, error, "releasing %p failed", ptr);
  return 0;
}

void ocl_memory_release_device(struct adr_backend_device* dev) {
  struct ocl_alloc a;
  size_t n = 0;
  while (adr_range_map_take_first(&ocl_allocations, alloc_owned_by, dev, &a) == 0) {
    atomic_fetch_add_explicit(&removals, 1, memory_order_release);
    release_native(&a, NULL);
    n++;
  }
  if (n > 0)
    adr_host_log(ADR_LOG_WARN, "opencl:%lld closed with %zu live allocation(s); released them",
                 (long long)dev->id, n);
}

/* One side of a copy: host memory (dev NULL), an SVM pointer, or a cl_mem
 * plus offset. */
struct side {
  struct adr_backend_device* dev; /* owner of the allocation; NULL = host */
  void* addr;
  cl_mem mem;
  size_t offset;
};

static bool host_addressable(const struct side* s) {
  return s->dev == NULL || (s->mem == NULL && s->dev->host_copy);
}

/* resolve() for an address the thread's cache does not answer: the map
 * look-up, under its lock, which refills the cache. */
__attribute__((noinline)) static int resolve_slow(struct adr_backend_device* dev, const void* ptr,
                                                  size_t size, const char* what, struct side* out,
                                                  struct adr_error* error) {
  struct ocl_alloc a;
  uint64_t seen = atomic_load_explicit(&removals, memory_order_acquire);
  int st = adr_range_map_find(&ocl_allocations, (uintptr_t)ptr, size, &a);
  if (st == ENOENT)
    return ocl_errorf(error, EINVAL, "%s %p is not inside an allocation of opencl:%lld", what, ptr,
                      (long long)dev->id);
  if (st == ERANGE)
    return ocl_errorf(error, EINVAL,
                      "%s range [%p, +%zu) runs past the end of its %zu-byte allocation at %p",
                      what, ptr, size, a.size, (void*)a.base);
  last_found[last_next].a = a;
  last_found[last_next].removals = seen;
  last_next ^= 1;
  struct adr_backend_device* owner = a.owner;
  if (owner != dev && owner->context != dev->context)
    return ocl_errorf(error, EINVAL, "%s %p belongs to opencl:%lld, not opencl:%lld", what, ptr,
                      (long long)owner->id, (long long)dev->id);
  out->dev = owner;
  out->mem = a.native;
  out->offset = (uintptr_t)ptr - a.base;
  return 0;
}

static inline int resolve(struct adr_backend_device* dev, const void* ptr, size_t size,
                          const char* what, struct side* out, struct adr_error* error) {
  out->dev = NULL;
  out->addr = (void*)ptr;
  out->mem = NULL;
  out->offset = 0;
  if (dev == NULL) return 0;
  uintptr_t p = (uintptr_t)ptr;
  uint64_t seen = atomic_load_explicit(&removals, memory_order_acquire);
  for (int i = 0; i < 2; i++) {
    __typeof__(last_found[0])* c = &last_found[i];
    /* A hit: inside the cached allocation (off < size also rules out an
     * address below its base), which belongs to dev's context. */
    size_t off = p - c->a.base;
    struct adr_backend_device* owner = c->a.owner;
    if (c->removals == seen && off < c->a.size && size <= c->a.size - off && owner != NULL &&
        (owner == dev || owner->context == dev->context)) {
      out->dev = owner;
      out->mem = c->a.native;
      out->offset = off;
      return 0;
    }
  }
  return resolve_slow(dev, ptr, size, what, out, error);
}

/* Queues (or, blocking, performs) a copy between two sides that live in
 * the queue's context (or on the host). */
static cl_int enqueue_copy(cl_command_queue q, const struct side* dst, const struct side* src,
                           size_t size, cl_bool blocking, cl_event* ev) {
  if (dst->mem != NULL && src->mem != NULL) {
    cl_int rc =
        ocl.clEnqueueCopyBuffer(q, src->mem, dst->mem, src->offset, dst->offset, size, 0, NULL, ev);
    if (rc == CL_SUCCESS && blocking) rc = ocl.clFinish(q);
    return rc;
  }
  /* A cl_mem against host memory or a fine-grained SVM pointer, which a
   * read/write may take as its host pointer. */
  if (dst->mem != NULL) {
    if (src->dev != NULL && src->dev->mode == ADR_OPENCL_ADDRESS_SVM_COARSE)
      return CL_INVALID_OPERATION;
    return ocl.clEnqueueWriteBuffer(q, dst->mem, blocking, dst->offset, size, src->addr, 0, NULL,
                                    ev);
  }
  if (src->mem != NULL) {
    if (dst->dev != NULL && dst->dev->mode == ADR_OPENCL_ADDRESS_SVM_COARSE)
      return CL_INVALID_OPERATION;
    return ocl.clEnqueueReadBuffer(q, src->mem, blocking, src->offset, size, dst->addr, 0, NULL,
                                   ev);
  }
  return ocl.clEnqueueSVMMemcpy(q, blocking, dst->addr, src->addr, size, 0, NULL, ev);
}

/* The queue a blocking staging step on `dev` uses: the copy's stream when
 * it belongs to that device's context, else the device's default queue. */
static cl_command_queue queue_for(struct adr_backend_device* dev,
                                  struct adr_backend_stream* stream) {
  return stream->dev->context == dev->context ? stream->queue : dev->default_stream.queue;
}

/* Devices in different contexts share no memory objects: wait for the
 * stream's earlier work, then copy through host memory (directly when both
 * sides are host-addressable). Completes before returning. */
static int peer_copy(struct side* dst, struct side* src, size_t size,
                     struct adr_backend_stream* stream, struct adr_error* error) {
  cl_int rc = ocl.clFinish(stream->queue);
  if (rc != CL_SUCCESS) return ocl_check(rc, error, "waiting for the stream failed");
  if (host_addressable(dst) && host_addressable(src)) {
    /* Both sides' queues (one of them is the stream's, already idle). */
    rc = ocl.clFinish(queue_for(src->dev, stream));
    if (rc == CL_SUCCESS) rc = ocl.clFinish(queue_for(dst->dev, stream));
    if (rc != CL_SUCCESS) return ocl_check(rc, error, "waiting for the peer device failed");
    memmove(dst->addr, src->addr, size);
    return 0;
  }
  size_t chunk = size < OCL_STAGING_CHUNK ? size : OCL_STAGING_CHUNK;
  unsigned char* staging = malloc(chunk);
  if (staging == NULL)
    return ocl_errorf(error, ENOMEM, "cannot allocate a %zu-byte staging buffer", chunk);
  cl_command_queue src_q = queue_for(src->dev, stream);
  cl_command_queue dst_q = queue_for(dst->dev, stream);
  for (size_t done = 0; done < size && rc == CL_SUCCESS; done += chunk) {
    size_t n = size - done < chunk ? size - done : chunk;
    struct side host = {.addr = staging};
    struct side s = *src, d = *dst;
    s.addr = (char*)src->addr + done;
    s.offset += done;
    d.addr = (char*)dst->addr + done;
    d.offset += done;
    rc = enqueue_copy(src_q, &host, &s, n, CL_TRUE, NULL);
    if (rc == CL_SUCCESS) rc = enqueue_copy(dst_q, &d, &host, n, CL_TRUE, NULL);
  }
  free(staging);
  if (rc != CL_SUCCESS)
    return ocl_check(rc, error, "staged copy from opencl:%lld to opencl:%lld failed",
                     (long long)src->dev->id, (long long)dst->dev->id);
  return 0;
}

static bool ranges_overlap(const void* a, const void* b, size_t n) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return x < y + n && y < x + n;
}

/* Overlapping ranges of one allocation: clEnqueueSVMMemcpy and
 * clEnqueueCopyBuffer refuse them (CL_MEM_COPY_OVERLAP), so the copy is
 * queued as two, through a temporary object of the same kind that OpenCL
 * releases once the second copy is done: memmove semantics, still queued
 * (asynchronous). */
static int enqueue_overlapping(struct adr_backend_stream* stream, struct adr_backend_device* dev,
                               const struct side* d, const struct side* s, size_t size,
                               struct adr_error* error) {
  cl_int rc = CL_SUCCESS;
  cl_event ev;
  if (d->mem != NULL) {
    cl_mem tmp = ocl.clCreateBuffer(dev->context, CL_MEM_READ_WRITE, size, NULL, &rc);
    if (tmp == NULL || rc != CL_SUCCESS)
      return ocl_check(rc != CL_SUCCESS ? rc : CL_MEM_OBJECT_ALLOCATION_FAILURE, error,
                       "a %zu-byte temporary cl_mem for an overlapping copy on opencl:%lld", size,
                       (long long)dev->id);
    rc = ocl.clEnqueueCopyBuffer(stream->queue, s->mem, tmp, s->offset, 0, size, 0, NULL, NULL);
    if (rc == CL_SUCCESS)
      rc = ocl.clEnqueueCopyBuffer(stream->queue, tmp, d->mem, 0, d->offset, size, 0, NULL,
                                   ocl_track_slot(stream, &ev));
    if (rc == CL_SUCCESS) ocl_stream_track(stream, ev);
    ocl.clReleaseMemObject(tmp); /* deferred by OpenCL until the copies are done */
  } else {
    cl_svm_mem_flags flags = CL_MEM_READ_WRITE;
    if (dev->mode == ADR_OPENCL_ADDRESS_SVM_FINE) flags |= CL_MEM_SVM_FINE_GRAIN_BUFFER;
    void* tmp = ocl.clSVMAlloc(dev->context, flags, size, 0);
    if (tmp == NULL)
      return ocl_check(CL_MEM_OBJECT_ALLOCATION_FAILURE, error,
                       "a %zu-byte temporary SVM block for an overlapping copy on opencl:%lld",
                       size, (long long)dev->id);
    rc = ocl.clEnqueueSVMMemcpy(stream->queue, CL_FALSE, tmp, s->addr, size, 0, NULL, NULL);
    if (rc == CL_SUCCESS)
      rc = ocl.clEnqueueSVMMemcpy(stream->queue, CL_FALSE, d->addr, tmp, size, 0, NULL, NULL);
    if (rc == CL_SUCCESS)
      rc = ocl.clEnqueueSVMFree(stream->queue, 1, &tmp, NULL, NULL, 0, NULL,
                                ocl_track_slot(stream, &ev));
    if (rc == CL_SUCCESS) {
      ocl_stream_track(stream, ev);
    } else {
      /* Whatever was queued must finish before the block goes. */
      ocl.clFinish(stream->queue);
      ocl.clSVMFree(dev->context, tmp);
    }
  }
  if (rc == CL_SUCCESS) rc = ocl.clFlush(stream->queue);
  if (rc != CL_SUCCESS)
    return ocl_check(rc, error, "overlapping copy of %zu bytes from %p to %p on opencl:%lld", size,
                     s->addr, d->addr, (long long)dev->id);
  return 0;
}

int ocl_copy(struct adr_backend_device* dst_dev, void* dst, struct adr_backend_device* src_dev,
             const void* src, size_t size, struct adr_backend_stream* stream,
             struct adr_error* error) {
  if (size == 0) return 0;
  struct side d, s;
  int st = resolve(dst_dev, dst, size, "destination", &d, error);
  if (st == 0) st = resolve(src_dev, src, size, "source", &s, error);
  if (st != 0) return st;
  if (d.dev != NULL && s.dev != NULL && d.dev->context != s.dev->context)
    return peer_copy(&d, &s, size, stream, error);
  struct adr_backend_device* dev = d.dev != NULL ? d.dev : s.dev;
  if (stream->dev->context != dev->context)
    return ocl_errorf(error, EINVAL, "the stream belongs to opencl:%lld, not to opencl:%lld",
                      (long long)stream->dev->id, (long long)dev->id);
  cl_int rc;
  /* The fast path runs only when the queue is adr's alone and everything
   * adr queued on it has completed: then the host copy is in queue order
   * without waiting for anything, whatever the caller does next. */
  if (host_addressable(&d) && host_addressable(&s) && ocl_stream_host_ready(stream)) {
    memmove(d.addr, s.addr, size);
    return 0;
  }
  if (d.dev != NULL && s.dev != NULL && ranges_overlap(d.addr, s.addr, size))
    return enqueue_overlapping(stream, dev, &d, &s, size, error);
  cl_event ev;
  rc = enqueue_copy(stream->queue, &d, &s, size, CL_FALSE, ocl_track_slot(stream, &ev));
  if (rc == CL_SUCCESS) ocl_stream_track(stream, ev);
  if (rc != CL_SUCCESS)
    return ocl_check(rc, error, "copying %zu bytes from %p to %p on opencl:%lld failed", size, src,
                     dst, (long long)dev->id);
  return 0;
}

int ocl_memset(struct adr_backend_device* dev, void* ptr, int value, size_t size,
               struct adr_backend_stream* stream, struct adr_error* error) {
  if (size == 0) return 0;
  struct side d;
  int st = resolve(dev, ptr, size, "destination", &d, error);
  if (st != 0) return st;
  if (stream->dev->context != d.dev->context)
    return ocl_errorf(error, EINVAL, "the stream belongs to opencl:%lld, not to opencl:%lld",
                      (long long)stream->dev->id, (long long)dev->id);
  unsigned char pattern = (unsigned char)value;
  cl_int rc;
  cl_event ev;
  if (host_addressable(&d) && ocl_stream_host_ready(stream)) {
    memset(ptr, pattern, size);
    rc = CL_SUCCESS;
  } else if (d.mem != NULL) {
    rc = ocl.clEnqueueFillBuffer(stream->queue, d.mem, &pattern, 1, d.offset, size, 0, NULL,
                                 ocl_track_slot(stream, &ev));
    if (rc == CL_SUCCESS) ocl_stream_track(stream, ev);
  } else {
    rc = ocl.clEnqueueSVMMemFill(stream->queue, ptr, &pattern, 1, size, 0, NULL,
                                 ocl_track_slot(stream, &ev));
    if (rc == CL_SUCCESS) ocl_stream_track(stream, ev);
  }
  if (rc != CL_SUCCESS)
    return ocl_check(rc, error, "filling %zu bytes at %p on opencl:%lld failed", size, ptr,
                     (long long)dev->id);
  return 0;
}

/* ---- blocking copies and fills (the copy_sync / memset_sync slots) ------
 * They return once the work and everything queued before it on the stream
 * has completed. Host-addressable sides (svm-fine with the fast path, host
 * memory) are a memmove on the calling thread: at once when the stream is
 * host-ready (ocl_stream_host_ready: adr's queue alone, nothing pending),
 * otherwise after clFinish on the queue, which also covers commands the
 * application queued itself on a shared queue. Everything else is queued
 * like ocl_copy / ocl_memset and waited for: a blocking read/write, whose
 * completion implies the earlier commands' (adr's queues and the queues it
 * accepts are in order), or clFinish. */

static int finish(struct adr_backend_stream* stream, struct adr_error* error) {
  cl_int rc = ocl.clFinish(stream->queue);
  if (rc != CL_SUCCESS) return ocl_check(rc, error, "clFinish failed");
  return 0;
}

/* Host-side copy or fill after the stream's earlier work. */
static int host_ready_or_finish(struct adr_backend_stream* stream, struct adr_error* error) {
  return ocl_stream_host_ready(stream) ? 0 : finish(stream, error);
}

int ocl_copy_sync(struct adr_backend_device* dst_dev, void* dst, struct adr_backend_device* src_dev,
                  const void* src, size_t size, struct adr_backend_stream* stream,
                  struct adr_error* error) {
  if (size == 0) return 0;
  struct side d, s;
  int st = resolve(dst_dev, dst, size, "destination", &d, error);
  if (st == 0) st = resolve(src_dev, src, size, "source", &s, error);
  if (st != 0) return st;
  if (d.dev != NULL && s.dev != NULL && d.dev->context != s.dev->context)
    return peer_copy(&d, &s, size, stream, error); /* waits for the stream, completes */
  struct adr_backend_device* dev = d.dev != NULL ? d.dev : s.dev;
  if (stream->dev->context != dev->context)
    return ocl_errorf(error, EINVAL, "the stream belongs to opencl:%lld, not to opencl:%lld",
                      (long long)stream->dev->id, (long long)dev->id);
  if (host_addressable(&d) && host_addressable(&s)) {
    st = host_ready_or_finish(stream, error);
    if (st == 0) memmove(d.addr, s.addr, size);
    return st;
  }
  if (d.dev != NULL && s.dev != NULL && ranges_overlap(d.addr, s.addr, size)) {
    st = enqueue_overlapping(stream, dev, &d, &s, size, error);
    return st != 0 ? st : finish(stream, error);
  }
  /* Blocking: returns after the command, so after every earlier one. */
  cl_int rc = enqueue_copy(stream->queue, &d, &s, size, CL_TRUE, NULL);
  if (rc != CL_SUCCESS)
    return ocl_check(rc, error, "copying %zu bytes from %p to %p on opencl:%lld failed", size, src,
                     dst, (long long)dev->id);
  return 0;
}

int ocl_memset_sync(struct adr_backend_device* dev, void* ptr, int value, size_t size,
                    struct adr_backend_stream* stream, struct adr_error* error) {
  if (size == 0) return 0;
  struct side d;
  int st = resolve(dev, ptr, size, "destination", &d, error);
  if (st != 0) return st;
  if (stream->dev->context != d.dev->context)
    return ocl_errorf(error, EINVAL, "the stream belongs to opencl:%lld, not to opencl:%lld",
                      (long long)stream->dev->id, (long long)dev->id);
  if (host_addressable(&d)) {
    st = host_ready_or_finish(stream, error);
    if (st == 0) memset(ptr, (unsigned char)value, size);
    return st;
  }
  st = ocl_memset(dev, ptr, value, size, stream, error);
  return st != 0 ? st : finish(stream, error);
}

int ocl_pointer_query(const void* ptr, ArrowDeviceType* out_type, int64_t* out_id,
                      struct adr_error* error) {
  struct ocl_alloc a;
  if (adr_range_map_find(&ocl_allocations, (uintptr_t)ptr, 0, &a) != 0)
    return ocl_errorf(error, ENOENT, "%p is not inside an OpenCL allocation", ptr);
  *out_type = ARROW_DEVICE_OPENCL;
  *out_id = ((const struct adr_backend_device*)a.owner)->id;
  return 0;
}

int ocl_buffer_lookup(struct adr_backend_device* dev, struct adr_opencl_buffer* q,
                      struct adr_error* error) {
  if (q->struct_size < offsetof(struct adr_opencl_buffer, reserved))
    return ocl_errorf(error, EINVAL,
                      "struct adr_opencl_buffer.struct_size is %u, expected at least %zu",
                      q->struct_size, offsetof(struct adr_opencl_buffer, reserved));
  struct ocl_alloc a;
  if (adr_range_map_find(&ocl_allocations, (uintptr_t)q->address, 0, &a) != 0 || a.owner != dev)
    return ocl_errorf(error, ENOENT, "%p is not inside an allocation of opencl:%lld", q->address,
                      (long long)dev->id);
  q->mode = (uint32_t)dev->mode;
  q->base = (void*)a.base;
  q->size = a.size;
  q->offset = (uintptr_t)q->address - a.base;
  q->buffer = (cl_mem)a.native;
  /* The backend's allocation is the cl_mem (or SVM block) itself; the core
   * replaces base/size/offset with the user's allocation inside it. */
  q->buffer_offset = q->offset;
  return 0;
}
