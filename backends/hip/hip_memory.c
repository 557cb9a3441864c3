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
 * Locking: one mutex guards the map and the list of registered host
 * ranges; it is held only for the bookkeeping, never across a runtime
 * call. Allocation through adr's caching layer reaches this file only on a
 * cache miss.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hip_internal.h"

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

static pthread_mutex_t memory_lock = PTHREAD_MUTEX_INITIALIZER;
static struct allocation* allocations; /* sorted by base */
static size_t allocation_count, allocation_cap;
static struct host_range* registered;
static size_t registered_count, registered_cap;

/* Index of the first allocation with base > addr. Lock held. */
static size_t upper_bound(uintptr_t addr) {
  size_t lo = 0, hi = allocation_count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (allocations[mid].base <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static int map_insert(const struct allocation* a) {
  pthread_mutex_lock(&memory_lock);
  if (allocation_count == allocation_cap) {
    size_t cap = allocation_cap ? allocation_cap * 2 : 64;
    struct allocation* grown = realloc(allocations, cap * sizeof(*grown));
    if (grown == NULL) {
      pthread_mutex_unlock(&memory_lock);
      return ENOMEM;
    }
    allocations = grown;
    allocation_cap = cap;
  }
  size_t i = upper_bound(a->base);
  memmove(&allocations[i + 1], &allocations[i], (allocation_count - i) * sizeof(*allocations));
  allocations[i] = *a;
  allocation_count++;
  pthread_mutex_unlock(&memory_lock);
  return 0;
}

/* Removes the allocation starting exactly at `base` into *out. */
static bool map_remove(uintptr_t base, struct allocation* out) {
  pthread_mutex_lock(&memory_lock);
  size_t i = upper_bound(base);
  bool found = i > 0 && allocations[i - 1].base == base;
  if (found) {
    *out = allocations[i - 1];
    memmove(&allocations[i - 1], &allocations[i], (allocation_count - i) * sizeof(*allocations));
    allocation_count--;
  }
  pthread_mutex_unlock(&memory_lock);
  return found;
}

/* The allocation containing addr, if any. */
static bool map_find(uintptr_t addr, struct allocation* out) {
  pthread_mutex_lock(&memory_lock);
  size_t i = upper_bound(addr);
  bool found = i > 0 && addr - allocations[i - 1].base < allocations[i - 1].size;
  if (found) *out = allocations[i - 1];
  pthread_mutex_unlock(&memory_lock);
  return found;
}

void adr_hip_memory_shutdown(void) {
  pthread_mutex_lock(&memory_lock);
  free(allocations);
  allocations = NULL;
  allocation_count = allocation_cap = 0;
  free(registered);
  registered = NULL;
  registered_count = registered_cap = 0;
  pthread_mutex_unlock(&memory_lock);
}

static const char* type_name(ArrowDeviceType type) {
  return type == ARROW_DEVICE_ROCM ? "hip" : "hip_host";
}

int adr_hip_alloc(struct adr_backend_device* dev, size_t size, size_t alignment,
                  struct adr_backend_stream* stream, void** out, struct adr_error* error) {
  /* hipMalloc returns 256-byte aligned memory, hipHostMalloc whole pages;
   * larger alignments over-allocate and round up. */
  size_t natural = dev->type == ARROW_DEVICE_ROCM ? 256 : 4096;
  size_t extra = alignment > natural ? alignment - 1 : 0;
  if (size > SIZE_MAX - extra)
    return adr_backend_error_set(
        error, EOVERFLOW, "[alloc][hip] size %zu plus alignment %zu overflows", size, alignment);
  int st = adr_hip_set_device(dev, "alloc", error);
  if (st != 0) return st;
  size_t total = size + extra;
  void* raw = NULL;
  hipError_t e;
  const char* fn;
  bool async = false;
  if (dev->type == ARROW_DEVICE_ROCM_HOST) {
    fn = "hipHostMalloc";
    e = adr_hip.hipHostMalloc(&raw, total, hipHostMallocDefault);
  } else if (dev->async_alloc) {
    fn = "hipMallocAsync";
    async = true;
    e = adr_hip.hipMallocAsync(&raw, total, stream->stream);
  } else {
    fn = "hipMalloc";
    e = adr_hip.hipMalloc(&raw, total);
  }
  if (e != hipSuccess || raw == NULL) {
    char what[160];
    snprintf(what, sizeof(what), "%s of %zu bytes on %s:%" PRId64, fn, total, type_name(dev->type),
             dev->id);
    return adr_hip_fail(error, "alloc", e != hipSuccess ? e : hipErrorOutOfMemory, what);
  }
  uintptr_t base = ((uintptr_t)raw + extra) & ~(uintptr_t)(alignment > natural ? alignment - 1 : 0);
  struct allocation a = {base, size, raw, dev->type, dev->id, async};
  if (map_insert(&a) != 0) {
    if (dev->type == ARROW_DEVICE_ROCM_HOST)
      adr_hip.hipHostFree(raw);
    else if (async)
      adr_hip.hipFreeAsync(raw, stream->stream);
    else
      adr_hip.hipFree(raw);
    return adr_backend_error_set(error, ENOMEM, "[alloc][hip] out of host memory for bookkeeping");
  }
  *out = (void*)base;
  return 0;
}

int adr_hip_free(struct adr_backend_device* dev, void* ptr, size_t size,
                 struct adr_backend_stream* stream, struct adr_error* error) {
  struct allocation a;
  if (!map_remove((uintptr_t)ptr, &a))
    return adr_backend_error_set(error, EINVAL,
                                 "[free][hip] %p was not allocated by the HIP backend", ptr);
  if (a.type != dev->type || a.id != dev->id || a.size != size) {
    /* Put it back: nothing is freed on error. */
    map_insert(&a);
    return adr_backend_error_set(
        error, EINVAL,
        "[free][hip] %p is a %zu-byte allocation of %s:%" PRId64 ", not %zu bytes of %s:%" PRId64,
        ptr, a.size, type_name(a.type), a.id, size, type_name(dev->type), dev->id);
  }
  int st = adr_hip_set_device(dev, "free", error);
  if (st != 0) {
    map_insert(&a);
    return st;
  }
  hipError_t e;
  const char* fn;
  if (a.type == ARROW_DEVICE_ROCM_HOST) {
    fn = "hipHostFree";
    e = adr_hip.hipHostFree(a.raw);
  } else if (a.async) {
    fn = "hipFreeAsync";
    e = adr_hip.hipFreeAsync(a.raw, stream->stream);
  } else {
    fn = "hipFree";
    e = adr_hip.hipFree(a.raw);
  }
  if (e != hipSuccess) {
    /* The runtime still owns the memory; keep the record so a retry and
     * pointer queries stay consistent. */
    map_insert(&a);
    return adr_hip_fail(error, "free", e, fn);
  }
  return 0;
}

static bool is_device_memory(const struct adr_backend_device* dev) {
  return dev != NULL && dev->type == ARROW_DEVICE_ROCM;
}

int adr_hip_copy(struct adr_backend_device* dst_dev, void* dst, struct adr_backend_device* src_dev,
                 const void* src, size_t size, struct adr_backend_stream* stream,
                 struct adr_error* error) {
  if (size == 0) return 0;
  int st = adr_hip_set_device(stream->device, "copy", error);
  if (st != 0) return st;
  hipError_t e;
  const char* fn;
  if (is_device_memory(dst_dev) && is_device_memory(src_dev) &&
      dst_dev->ordinal != src_dev->ordinal) {
    fn = "hipMemcpyPeerAsync";
    e = adr_hip.hipMemcpyPeerAsync(dst, dst_dev->ordinal, src, src_dev->ordinal, size,
                                   stream->stream);
  } else {
    /* Pinned host memory (rocm_host) is host memory for the direction;
     * pageable host memory is handed to the runtime as it is, which stages
     * it through its own pinned buffers. */
    bool d = is_device_memory(dst_dev), s = is_device_memory(src_dev);
    hipMemcpyKind kind = s ? (d ? hipMemcpyDeviceToDevice : hipMemcpyDeviceToHost)
                           : (d ? hipMemcpyHostToDevice : hipMemcpyHostToHost);
    /* A stream of another ordinal than the device memory's (a rocm_host
     * stream of ordinal 0 filling hip:1): let unified addressing route it. */
    const struct adr_backend_device* mem_dev = d ? dst_dev : s ? src_dev : NULL;
    if (mem_dev != NULL && mem_dev->ordinal != stream->device->ordinal) kind = hipMemcpyDefault;
    fn = "hipMemcpyAsync";
    e = adr_hip.hipMemcpyAsync(dst, src, size, kind, stream->stream);
  }
  if (e != hipSuccess) {
    char what[128];
    snprintf(what, sizeof(what), "%s of %zu bytes", fn, size);
    return adr_hip_fail(error, "copy", e, what);
  }
  return 0;
}

int adr_hip_memset(struct adr_backend_device* dev, void* ptr, int value, size_t size,
                   struct adr_backend_stream* stream, struct adr_error* error) {
  if (size == 0) return 0;
  int st = adr_hip_set_device(dev, "memset", error);
  if (st != 0) return st;
  hipError_t e = adr_hip.hipMemsetAsync(ptr, value & 0xff, size, stream->stream);
  if (e != hipSuccess) {
    char what[128];
    snprintf(what, sizeof(what), "hipMemsetAsync of %zu bytes", size);
    return adr_hip_fail(error, "memset", e, what);
  }
  return 0;
}

static bool in_registered(uintptr_t addr) {
  bool found = false;
  pthread_mutex_lock(&memory_lock);
  for (size_t i = 0; i < registered_count && !found; i++)
    found = addr - registered[i].base < registered[i].size;
  pthread_mutex_unlock(&memory_lock);
  return found;
}

/* hipMemoryType values: runtimes before 6.0 numbered them Host 0, Device
 * 1, Array 2, Unified 3; 6.0 and later Unregistered 0, Host 1, Device 2,
 * Managed 3, Array 10, Unified 11. */
static bool decode_type(int type, bool* out_device) {
  if (adr_hip_runtime_major() >= 6) {
    if (type == 0) return false;
    *out_device = type != 1;
    return true;
  }
  *out_device = type != 0;
  return true;
}

int adr_hip_pointer_query(const void* ptr, ArrowDeviceType* out_type, int64_t* out_id,
                          struct adr_error* error) {
  uintptr_t addr = (uintptr_t)ptr;
  struct allocation a;
  if (map_find(addr, &a)) {
    *out_type = a.type;
    *out_id = a.id;
    return 0;
  }
  /* Host memory the application registered through adr stays the
   * application's: it is not a HIP device's memory. */
  if (ptr != NULL && !in_registered(addr)) {
    struct adr_hip_pointer_attributes attr;
    memset(&attr, 0, sizeof(attr));
    bool device = false;
    if (adr_hip.hipPointerGetAttributes(&attr, ptr) == hipSuccess &&
        decode_type(attr.type, &device) && attr.device >= 0 &&
        attr.device < adr_hip_rt.device_count) {
      *out_type = device ? ARROW_DEVICE_ROCM : ARROW_DEVICE_ROCM_HOST;
      *out_id = attr.device;
      return 0;
    }
  }
  return adr_backend_error_set(error, ENOENT, "[pointer_query][hip] %p is not HIP memory", ptr);
}

int adr_hip_host_register(struct adr_backend_device* dev, void* ptr, size_t size,
                          struct adr_error* error) {
  if (ptr == NULL || size == 0)
    return adr_backend_error_set(error, EINVAL,
                                 "[host_register][hip] ptr must be non-NULL and size > 0");
  int st = adr_hip_set_device(dev, "host_register", error);
  if (st != 0) return st;
  hipError_t e = adr_hip.hipHostRegister(ptr, size, hipHostRegisterDefault);
  if (e != hipSuccess) {
    char what[128];
    snprintf(what, sizeof(what), "hipHostRegister of %zu bytes at %p", size, ptr);
    return adr_hip_fail(error, "host_register", e, what);
  }
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
  if (st != 0) {
    adr_hip.hipHostUnregister(ptr);
    return adr_backend_error_set(error, ENOMEM, "[host_register][hip] out of memory");
  }
  return 0;
}

int adr_hip_host_unregister(struct adr_backend_device* dev, void* ptr, struct adr_error* error) {
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
  if (!found)
    return adr_backend_error_set(error, EINVAL,
                                 "[host_unregister][hip] %p was not registered with "
                                 "adr_host_register",
                                 ptr);
  int st = adr_hip_set_device(dev, "host_unregister", error);
  if (st != 0) return st;
  hipError_t e = adr_hip.hipHostUnregister(ptr);
  if (e != hipSuccess) return adr_hip_fail(error, "host_unregister", e, "hipHostUnregister");
  return 0;
}
