/* SPDX-License-Identifier: Apache-2.0
 *
 * HIP backend: allocation, copies, memset, host registration and pointer
 * queries.
 *
 * The backend keeps an interval map of the allocations it made (sorted by
 * address, binary search) so that pointer_query answers for any address
 * inside an allocation, including Arrow slices, and so that over-aligned
 * allocations free the address the runtime returned. Memory the
 * application allocated with HIP directly is identified with
 * hipPointerGetAttributes instead.
 *
 * Locking: the map (backends/common/range_map.h) has its own rwlock and
 * one mutex guards the list of registered host ranges; neither is held
 * across a runtime call. Allocation through adr's caching layer reaches this file only on a
 * cache miss.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hip_internal.h"
#include "host_copy.h"
#include "overlap.h"
#include "range_map.h"

struct allocation {
  uintptr_t base; /* address handed out */
  size_t size;
  void* raw; /* address the runtime returned (base rounded down) */
  ArrowDeviceType type;
  int64_t id;
  bool async; /* allocated with hipMallocAsync */
};

struct host_range {
  uintptr_t base;
  size_t size;
};

/* The allocations this backend made, by address (its own rwlock). */
static struct adr_range_map allocations = ADR_RANGE_MAP_INIT(struct allocation);

/* Host ranges registered with hipHostRegister, under memory_lock. */
static pthread_mutex_t memory_lock = PTHREAD_MUTEX_INITIALIZER;
static struct host_range* registered;
static size_t registered_count, registered_cap;
/* The registered-range list: the HIP-only part at the end of this file. */
static int registered_add(void* ptr, size_t size);
static bool registered_remove(void* ptr);
static bool in_registered(uintptr_t addr);

void hip_memory_shutdown(void) {
  adr_range_map_clear(&allocations);
  pthread_mutex_lock(&memory_lock);
  free(registered);
  registered = NULL;
  registered_count = registered_cap = 0;
  pthread_mutex_unlock(&memory_lock);
}

static const char* type_name(ArrowDeviceType type) {
  return type == ARROW_DEVICE_ROCM ? "hip" : "hip_host";
}

static size_t natural_alignment(const struct adr_backend_device* dev) {
  return dev->type == ARROW_DEVICE_ROCM ? 256 : 4096;
}

/* One allocation of `size` bytes of the device's kind. */
static hipError_t raw_alloc(struct adr_backend_device* dev, size_t size,
                            struct adr_backend_stream* stream, void** out) {
  switch (dev->type) {
    case ARROW_DEVICE_ROCM_HOST:
      /* Portable: the pinned memory may be copied with any ordinal's streams. */
      return hip_api.hipHostMalloc(out, size, hipHostMallocPortable);
    default:
      if (dev->async_alloc) return hip_api.hipMallocAsync(out, size, stream->stream);
      return hip_api.hipMalloc(out, size);
  }
}

/* Frees an address from raw_alloc: stream-ordered where it was allocated
 * so; hipFree and hipHostFree wait for the device's queued work. */
static hipError_t raw_free(const struct allocation* a, struct adr_backend_stream* stream) {
  if (a->type == ARROW_DEVICE_ROCM && a->async) return hip_api.hipFreeAsync(a->raw, stream->stream);
  if (a->type == ARROW_DEVICE_ROCM_HOST) return hip_api.hipHostFree(a->raw);
  return hip_api.hipFree(a->raw);
}

int hip_alloc(struct adr_backend_device* dev, size_t size, size_t alignment,
              struct adr_backend_stream* stream, void** out, struct adr_error* error) {
  /* Larger alignments than the runtime's over-allocate and round up. */
  size_t natural = natural_alignment(dev);
  size_t extra = alignment > natural ? alignment - 1 : 0;
  if (size > SIZE_MAX - extra)
    return hip_errorf(error, EOVERFLOW, "%zu bytes aligned to %zu overflow", size, alignment);
  struct hip_current_guard g;
  int st = hip_current_enter(dev, &g, error);
  if (st) return st;
  void* raw = NULL;
  hipError_t r = raw_alloc(dev, size + extra, stream, &raw);
  hip_current_leave(&g);
  if (r == hipSuccess && raw == NULL) r = hipErrorOutOfMemory;
  if (r != hipSuccess)
    return hip_check(r, error, "%zu bytes on HIP device %d (%s)", size + extra, dev->ordinal,
                     dev->type == ARROW_DEVICE_ROCM_HOST ? "hipHostMalloc"
                     : dev->async_alloc                  ? "hipMallocAsync"
                                                         : "hipMalloc");
  uintptr_t p = (uintptr_t)raw;
  if (extra != 0) p = (p + alignment - 1) & ~(uintptr_t)(alignment - 1);
  struct allocation a = {p, size, raw, dev->type, dev->id, dev->async_alloc};
  if (adr_range_map_insert(&allocations, &a) != 0) {
    if (hip_current_enter(dev, &g, NULL) == 0) {
      raw_free(&a, stream);
      hip_current_leave(&g);
    }
    return hip_errorf(error, ENOMEM, "out of host memory for bookkeeping");
  }
  *out = (void*)p;
  return 0;
}

int hip_alloc_plain(struct adr_backend_device* dev, size_t size, void** out,
                    struct adr_error* error) {
  struct hip_current_guard g;
  int st = hip_current_enter(dev, &g, error);
  if (st) return st;
  void* raw = NULL;
  hipError_t r = hip_api.hipMalloc(&raw, size);
  hip_current_leave(&g);
  if (r == hipSuccess && raw == NULL) r = hipErrorOutOfMemory;
  if (r != hipSuccess)
    return hip_check(r, error, "%zu shareable bytes on HIP device %d (hipMalloc)", size,
                     dev->ordinal);
  struct allocation a = {(uintptr_t)raw, size, raw, dev->type, dev->id, false};
  if (adr_range_map_insert(&allocations, &a) != 0) {
    if (hip_current_enter(dev, &g, NULL) == 0) {
      hip_api.hipFree(raw);
      hip_current_leave(&g);
    }
    return hip_errorf(error, ENOMEM, "out of host memory for bookkeeping");
  }
  *out = raw;
  return 0;
}

int hip_free(struct adr_backend_device* dev, void* ptr, size_t size,
             struct adr_backend_stream* stream, struct adr_error* error) {
  hip_share_forget(ptr);
  struct allocation a;
  if (adr_range_map_remove(&allocations, (uintptr_t)ptr, &a) != 0)
    return hip_errorf(error, EINVAL, "%p was not allocated by the HIP backend", ptr);
  int st = 0;
  if (a.type != dev->type || a.id != dev->id || a.size != size) {
    st = hip_errorf(error, EINVAL,
                    "%p is a %zu-byte allocation of %s:%" PRId64 ", not %zu bytes of %s:%" PRId64,
                    ptr, a.size, type_name(a.type), a.id, size, type_name(dev->type), dev->id);
  } else {
    struct hip_current_guard g;
    st = hip_current_enter(dev, &g, error);
    if (st == 0) {
      hipError_t r = raw_free(&a, stream);
      hip_current_leave(&g);
      st = hip_check(r, error, "%p (%zu bytes) on HIP device %d", ptr, size, dev->ordinal);
    }
  }
  if (st != 0) {
    /* Nothing was freed: keep the record so a retry and pointer queries
     * still find it. */
    adr_range_map_insert(&allocations, &a);
  }
  return st;
}

/* ---- staged pageable copies (backends/common/staging.h) ----------------
 *
 * At exit (hip_exiting) the runtime may already be gone: the release calls
 * then free nothing of the runtime's. */

static int hip_stage_host_alloc(size_t size, void** out) {
  return (int)hip_api.hipHostMalloc(out, size, hipHostMallocPortable);
}

static void hip_stage_host_free(void* ptr) {
  if (!hip_exiting()) hip_api.hipHostFree(ptr);
}

static int hip_stage_event_create(void** out) {
  hipEvent_t event = NULL;
  hipError_t e = hip_api.hipEventCreateWithFlags(&event, hipEventDisableTiming);
  *out = event;
  return (int)e;
}

static void hip_stage_event_destroy(void* event) {
  if (hip_exiting()) return;
  hip_api.hipEventSynchronize(event);
  hip_api.hipEventDestroy(event);
}

static int hip_stage_event_record(void* event, void* stream) {
  return (int)hip_api.hipEventRecord(event, stream);
}

static int hip_stage_event_synchronize(void* event) {
  return (int)hip_api.hipEventSynchronize(event);
}

static int hip_stage_copy_async(uintptr_t dst, uintptr_t src, size_t len, bool to_device,
                                void* stream) {
  return (int)hip_api.hipMemcpyAsync((void*)dst, (const void*)src, len,
                                     to_device ? hipMemcpyHostToDevice : hipMemcpyDeviceToHost,
                                     stream);
}

static int hip_stage_stream_synchronize(void* stream) {
  return (int)hip_api.hipStreamSynchronize(stream);
}

const struct adr_staging_ops hip_staging_ops = {
    .host_alloc = hip_stage_host_alloc,
    .host_free = hip_stage_host_free,
    .event_create = hip_stage_event_create,
    .event_destroy = hip_stage_event_destroy,
    .event_record = hip_stage_event_record,
    .event_synchronize = hip_stage_event_synchronize,
    .copy_async = hip_stage_copy_async,
    .stream_synchronize = hip_stage_stream_synchronize,
    .out_of_memory = hipErrorOutOfMemory,
};

/* hipMemoryType values: runtimes before 6.0 numbered them Host 0, Device
 * 1, Array 2, Unified 3; 6.0 and later Unregistered 0, Host 1, Device 2,
 * Managed 3, Array 10, Unified 11. */
static bool decode_type(int type, bool* out_device) {
  if (hip_runtime_major() >= 6) {
    if (type == 0) return false;
    *out_device = type != 1;
    return true;
  }
  *out_device = type != 0;
  return true;
}

/* hipPointerGetAttributes for a pointer that may be unknown to the runtime.
 * A failure there sets the thread's HIP "last error", which an application
 * checking hipGetLastError after its own work would then see; it is cleared
 * again when nothing was pending before the call. */
static hipError_t query_attributes(struct hip_pointer_attributes* attr, const void* p) {
  memset(attr, 0, sizeof(*attr));
  hipError_t pending =
      hip_api.hipPeekAtLastError != NULL ? hip_api.hipPeekAtLastError() : hipSuccess;
  hipError_t e = hip_api.hipPointerGetAttributes((hipPointerAttribute_t*)attr, p);
  if (e != hipSuccess && pending == hipSuccess && hip_api.hipGetLastError != NULL &&
      hip_api.hipPeekAtLastError != NULL)
    hip_api.hipGetLastError();
  return e;
}

/* Host memory the runtime does not know (neither pinned nor registered). */
static bool is_pageable(const void* p) {
  struct hip_pointer_attributes attr;
  bool device = false;
  return query_attributes(&attr, p) != hipSuccess || !decode_type(attr.type, &device);
}

static bool is_device_memory(const struct adr_backend_device* dev) {
  return dev != NULL && dev->type == ARROW_DEVICE_ROCM;
}

/* Host memory for the runtime's copy rules: pageable (no adr device) or
 * pinned (hip_host). */
static bool is_host_memory(const struct adr_backend_device* dev) {
  return dev == NULL || dev->type == ARROW_DEVICE_ROCM_HOST;
}

/* Host to host: hipMemcpyAsync would wait for the stream's earlier work
 * (such copies are synchronous with respect to the host), so the copy is a
 * host function in stream order instead (backends/common/host_copy.h). */
static hipError_t queue_host_copy(void* dst, const void* src, size_t size,
                                  struct adr_backend_stream* stream) {
  struct adr_host_copy* c = adr_host_copy_new(dst, src, size);
  if (c == NULL) return hipErrorOutOfMemory;
  hipError_t r = hip_api.hipLaunchHostFunc(stream->stream, adr_host_copy_run, c);
  if (r != hipSuccess) free(c);
  return r;
}

/* Overlapping ranges of one allocation: the runtime does not promise
 * memmove semantics, adr does (adr.h); backends/common/overlap.h orders
 * the pieces. The scratch buffer is device memory of the stream's device,
 * made on first use and freed with the stream. Queued, never waited for;
 * the device's scratch_lock keeps two threads' pieces on one stream from
 * interleaving. */
struct piece_ctx {
  struct adr_backend_stream* stream;
  hipMemcpyKind kind; /* for direct pieces; scratch legs use hipMemcpyDefault */
  uintptr_t scratch;
};

static int queue_piece(void* ctx, uintptr_t dst, uintptr_t src, size_t len) {
  const struct piece_ctx* c = ctx;
  hipMemcpyKind kind = dst == c->scratch || src == c->scratch ? hipMemcpyDefault : c->kind;
  return (int)hip_api.hipMemcpyAsync((void*)dst, (const void*)src, len, kind, c->stream->stream);
}

static hipError_t copy_overlapping(char* d, const char* s, size_t size, hipMemcpyKind kind,
                                   struct adr_backend_stream* stream) {
  struct adr_backend_device* owner = stream->dev;
  hipError_t e = hipSuccess;
  pthread_mutex_lock(&owner->scratch_lock);
  if (adr_overlap_needs_scratch((uintptr_t)d, (uintptr_t)s, size) && stream->scratch == NULL) {
    e = hip_api.hipMalloc(&stream->scratch, ADR_OVERLAP_SCRATCH);
    if (e != hipSuccess) stream->scratch = NULL;
  }
  if (e == hipSuccess) {
    struct piece_ctx c = {stream, kind, (uintptr_t)stream->scratch};
    e = (hipError_t)adr_overlap_copy((uintptr_t)d, (uintptr_t)s, size, c.scratch, queue_piece, &c);
  }
  pthread_mutex_unlock(&owner->scratch_lock);
  return e;
}

void hip_stream_scratch_free(struct adr_backend_stream* stream) {
  if (stream->scratch != NULL) hip_api.hipFree(stream->scratch);
  stream->scratch = NULL;
}

int hip_copy(struct adr_backend_device* dst_dev, void* dst, struct adr_backend_device* src_dev,
             const void* src, size_t size, struct adr_backend_stream* stream,
             struct adr_error* error) {
  if (size == 0) return 0;
  struct adr_backend_device* owner = stream->dev;
  struct hip_current_guard g;
  int st = hip_current_enter(owner, &g, error);
  if (st) return st;
  hipError_t r;
  const char* how = "hipMemcpyAsync";
  if (is_device_memory(dst_dev) && is_device_memory(src_dev) &&
      dst_dev->ordinal != src_dev->ordinal) {
    how = "hipMemcpyPeerAsync";
    r = hip_api.hipMemcpyPeerAsync(dst, dst_dev->ordinal, src, src_dev->ordinal, size,
                                   stream->stream);
  } else if ((dst_dev == NULL) != (src_dev == NULL) && adr_staging_wanted(&owner->staging, size) &&
             is_device_memory(dst_dev ? dst_dev : src_dev) &&
             (dst_dev ? dst_dev : src_dev)->ordinal == owner->ordinal &&
             is_pageable(dst_dev ? src : dst)) {
    how = "staged pageable copy";
    r = dst_dev ? (hipError_t)adr_staging_copy_to_device(&owner->staging, (uintptr_t)dst, src, size,
                                                         stream->stream)
                : (hipError_t)adr_staging_copy_to_host(&owner->staging, dst, (uintptr_t)src, size,
                                                       stream->stream);
  } else if (is_host_memory(dst_dev) && is_host_memory(src_dev) &&
             hip_api.hipLaunchHostFunc != NULL) {
    how = "host copy (hipLaunchHostFunc)";
    r = queue_host_copy(dst, src, size, stream);
  } else {
    /* Pinned host memory (rocm_host) is host memory for the direction;
     * pageable host memory is handed to the runtime as it is, which stages
     * it through its own pinned buffers. A stream of another ordinal than
     * the device memory's (a rocm_host stream of ordinal 0 filling hip:1):
     * unified addressing routes it (hipMemcpyDefault). */
    bool d = is_device_memory(dst_dev), s = is_device_memory(src_dev);
    hipMemcpyKind kind = s ? (d ? hipMemcpyDeviceToDevice : hipMemcpyDeviceToHost)
                           : (d ? hipMemcpyHostToDevice : hipMemcpyHostToHost);
    const struct adr_backend_device* mem_dev = d ? dst_dev : s ? src_dev : NULL;
    if (mem_dev != NULL && mem_dev->ordinal != owner->ordinal) kind = hipMemcpyDefault;
    if (dst_dev != NULL && dst_dev == src_dev &&
        adr_overlap((uintptr_t)dst, (uintptr_t)src, size)) {
      how = "overlapping hipMemcpyAsync";
      r = copy_overlapping(dst, src, size, kind, stream);
    } else {
      r = hip_api.hipMemcpyAsync(dst, src, size, kind, stream->stream);
    }
  }
  hip_current_leave(&g);
  return hip_check(r, error, "%s of %zu bytes from %p to %p", how, size, src, dst);
}

int hip_memset(struct adr_backend_device* dev, void* ptr, int value, size_t size,
               struct adr_backend_stream* stream, struct adr_error* error) {
  if (size == 0) return 0;
  struct hip_current_guard g;
  int st = hip_current_enter(stream->dev, &g, error);
  if (st) return st;
  hipError_t r = hip_api.hipMemsetAsync(ptr, (unsigned char)value, size, stream->stream);
  hip_current_leave(&g);
  return hip_check(r, error, "hipMemsetAsync of %zu bytes at %p on HIP device %d", size, ptr,
                   dev->ordinal);
}

int hip_host_register(struct adr_backend_device* dev, void* ptr, size_t size,
                      struct adr_error* error) {
  struct hip_current_guard g;
  int st = hip_current_enter(dev, &g, error);
  if (st) return st;
  if (ptr == NULL || size == 0) {
    hip_current_leave(&g);
    return hip_errorf(error, EINVAL, "ptr must be non-NULL and size > 0");
  }
  hipError_t r = hip_api.hipHostRegister(ptr, size, hipHostRegisterDefault);
  if (r == hipSuccess && registered_add(ptr, size) != 0) {
    hip_api.hipHostUnregister(ptr);
    hip_current_leave(&g);
    return hip_errorf(error, ENOMEM, "out of memory");
  }
  hip_current_leave(&g);
  if (r != hipSuccess) return hip_check(r, error, "hipHostRegister(%p, %zu)", ptr, size);
  return 0;
}

int hip_host_unregister(struct adr_backend_device* dev, void* ptr, struct adr_error* error) {
  struct hip_current_guard g;
  int st = hip_current_enter(dev, &g, error);
  if (st) return st;
  if (!registered_remove(ptr)) {
    hip_current_leave(&g);
    return hip_errorf(error, EINVAL, "%p was not registered with adr_host_register", ptr);
  }
  hipError_t r = hip_api.hipHostUnregister(ptr);
  hip_current_leave(&g);
  if (r != hipSuccess) return hip_check(r, error, "hipHostUnregister(%p)", ptr);
  return 0;
}

int hip_pointer_query(const void* ptr, ArrowDeviceType* out_type, int64_t* out_id,
                      struct adr_error* error) {
  uintptr_t addr = (uintptr_t)ptr;
  struct allocation a;
  if (adr_range_map_find(&allocations, addr, 0, &a) == 0) {
    *out_type = a.type;
    *out_id = a.id;
    return 0;
  }
  /* Host memory the application registered through adr stays the
   * application's: it is not a HIP device's memory. */
  if (ptr != NULL && !in_registered(addr)) {
    struct hip_pointer_attributes attr;
    memset(&attr, 0, sizeof(attr));
    bool device = false;
    if (query_attributes(&attr, ptr) == hipSuccess && decode_type(attr.type, &device) &&
        attr.device >= 0 && attr.device < hip_devices) {
      *out_type = device ? ARROW_DEVICE_ROCM : ARROW_DEVICE_ROCM_HOST;
      *out_id = attr.device;
      return 0;
    }
  }
  return hip_errorf(error, ENOENT, "%p is not HIP memory", ptr);
}

/* ---- HIP only: the registered-range list ---------------------------------
 *
 * Host ranges the application registered through adr (hipHostRegister):
 * pointer_query answers ENOENT for them (the memory stays the
 * application's), so the backend remembers them; CUDA asks the driver. */

/* 0, or ENOMEM when the list cannot grow. */
static int registered_add(void* ptr, size_t size) {
  int st = 0;
  pthread_mutex_lock(&memory_lock);
  if (registered_count == registered_cap) {
    size_t cap = registered_cap ? registered_cap * 2 : 16;
    struct host_range* grown = realloc(registered, cap * sizeof(*grown));
    if (grown == NULL) {
      st = ENOMEM;
    } else {
      registered = grown;
      registered_cap = cap;
    }
  }
  if (st == 0) {
    registered[registered_count].base = (uintptr_t)ptr;
    registered[registered_count].size = size;
    registered_count++;
  }
  pthread_mutex_unlock(&memory_lock);
  return st;
}

/* Whether `ptr` was registered (and is now no longer listed). */
static bool registered_remove(void* ptr) {
  bool found = false;
  pthread_mutex_lock(&memory_lock);
  for (size_t i = 0; i < registered_count; i++) {
    if (registered[i].base == (uintptr_t)ptr) {
      registered[i] = registered[--registered_count];
      found = true;
      break;
    }
  }
  pthread_mutex_unlock(&memory_lock);
  return found;
}

static bool in_registered(uintptr_t addr) {
  bool found = false;
  pthread_mutex_lock(&memory_lock);
  for (size_t i = 0; i < registered_count && !found; i++)
    found = addr - registered[i].base < registered[i].size;
  pthread_mutex_unlock(&memory_lock);
  return found;
}
