/* SPDX-License-Identifier: Apache-2.0
 *
 * CUDA backend: allocation, copies, memset and host registration.
 *
 * Copies use cuMemcpyAsync with unified addressing for every direction,
 * and cuMemcpyPeerAsync between the device memory of two ordinals. A copy
 * between pageable host memory and device memory of at least
 * cuda_config.stage_threshold bytes is staged through two pinned buffers in
 * chunks: the host memcpy of one chunk overlaps the DMA of the other. The
 * driver's own pageable path does one bounce at a time and, for
 * device->host, blocks the calling thread anyway.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"
#include "host_copy.h"
#include "overlap.h"

static size_t natural_alignment(const struct adr_backend_device* dev) {
  return dev->type == ARROW_DEVICE_CUDA ? 256 : 4096;
}

/* One allocation of `size` bytes of the device's kind. */
static CUresult raw_alloc(struct adr_backend_device* dev, size_t size,
                          struct adr_backend_stream* stream, CUdeviceptr* out) {
  switch (dev->type) {
    case ARROW_DEVICE_CUDA_HOST: {
      void* p = NULL;
      CUresult r = cuda_api.cuMemHostAlloc(&p, size, CU_MEMHOSTALLOC_PORTABLE);
      *out = (CUdeviceptr)(uintptr_t)p;
      return r;
    }
    case ARROW_DEVICE_CUDA_MANAGED:
      return cuda_api.cuMemAllocManaged(out, size, CU_MEM_ATTACH_GLOBAL);
    default:
      if (dev->mempools) return cuda_api.cuMemAllocAsync(out, size, stream->stream);
      return cuda_api.cuMemAlloc(out, size);
  }
}

/* Frees a base address from raw_alloc. With a stream, the memory goes
 * once the stream's queued work is done: stream-ordered where the driver
 * has pools, else after synchronising the stream. */
static CUresult raw_free(struct adr_backend_device* dev, CUdeviceptr base,
                         struct adr_backend_stream* stream) {
  if (dev->type == ARROW_DEVICE_CUDA && dev->mempools)
    return cuda_api.cuMemFreeAsync(base, stream->stream);
  CUresult r = cuda_api.cuStreamSynchronize(stream->stream);
  if (r != CUDA_SUCCESS) return r;
  if (dev->type == ARROW_DEVICE_CUDA_HOST) return cuda_api.cuMemFreeHost((void*)(uintptr_t)base);
  return cuda_api.cuMemFree(base);
}

int cuda_alloc(struct adr_backend_device* dev, size_t size, size_t alignment,
               struct adr_backend_stream* stream, void** out, struct adr_error* error) {
  /* Larger alignments than the driver's over-allocate and round up. */
  size_t natural = natural_alignment(dev);
  size_t extra = alignment > natural ? alignment - natural : 0;
  if (size > SIZE_MAX - extra)
    return cuda_errorf(error, EOVERFLOW, "%zu bytes aligned to %zu overflow", size, alignment);
  struct cuda_current_guard g;
  int st = cuda_current_enter(dev, &g, error);
  if (st) return st;
  CUdeviceptr raw = 0;
  CUresult r = raw_alloc(dev, size + extra, stream, &raw);
  cuda_current_leave(&g);
  if (r != CUDA_SUCCESS)
    return cuda_check(r, error, "%zu bytes on CUDA device %d (%s)", size + extra, dev->ordinal,
                      dev->type == ARROW_DEVICE_CUDA_HOST      ? "cuMemHostAlloc"
                      : dev->type == ARROW_DEVICE_CUDA_MANAGED ? "cuMemAllocManaged"
                      : dev->mempools                          ? "cuMemAllocAsync"
                                                               : "cuMemAlloc");
  uintptr_t p = (uintptr_t)raw;
  if (extra != 0) {
    uintptr_t aligned = (p + alignment - 1) & ~(uintptr_t)(alignment - 1);
    struct cuda_aligned a = {{aligned, size ? size : 1}, p};
    if (aligned != p) {
      if (adr_range_map_insert(&dev->aligned, &a) != 0) {
        if (cuda_current_enter(dev, &g, NULL) == 0) {
          raw_free(dev, raw, stream);
          cuda_current_leave(&g);
        }
        return cuda_errorf(error, ENOMEM, "out of host memory for bookkeeping");
      }
      atomic_fetch_add(&dev->aligned_count, 1);
      p = aligned;
    }
  }
  *out = (void*)p;
  return 0;
}

int cuda_free(struct adr_backend_device* dev, void* ptr, size_t size,
              struct adr_backend_stream* stream, struct adr_error* error) {
  if (cuda_share_forget(ptr)) {
    /* Shareable memory came from cuMemAlloc, never from a pool. */
    struct cuda_current_guard g;
    int st = cuda_current_enter(dev, &g, error);
    if (st) return st;
    CUresult r = cuda_api.cuStreamSynchronize(stream->stream);
    if (r == CUDA_SUCCESS) r = cuda_api.cuMemFree((CUdeviceptr)(uintptr_t)ptr);
    cuda_current_leave(&g);
    return cuda_check(r, error, "%p (%zu shareable bytes) on CUDA device %d", ptr, size,
                      dev->ordinal);
  }
  uintptr_t raw = (uintptr_t)ptr;
  struct cuda_aligned a;
  bool aligned = atomic_load_explicit(&dev->aligned_count, memory_order_relaxed) != 0 &&
                 adr_range_map_remove(&dev->aligned, raw, &a) == 0;
  if (aligned) {
    atomic_fetch_sub(&dev->aligned_count, 1);
    raw = a.raw;
  }
  struct cuda_current_guard g;
  int st = cuda_current_enter(dev, &g, error);
  if (st == 0) {
    CUresult r = raw_free(dev, (CUdeviceptr)raw, stream);
    cuda_current_leave(&g);
    st = cuda_check(r, error, "%p (%zu bytes) on CUDA device %d", ptr, size, dev->ordinal);
  }
  if (st != 0 && aligned && adr_range_map_insert(&dev->aligned, &a) == 0) {
    /* Nothing was freed: keep the record so a retry still finds the base. */
    atomic_fetch_add(&dev->aligned_count, 1);
  }
  return st;
}

/* ---- staged pageable copies (backends/common/staging.h) ---------------- */

static int cuda_stage_host_alloc(size_t size, void** out) {
  return (int)cuda_api.cuMemHostAlloc(out, size, CU_MEMHOSTALLOC_PORTABLE);
}

static void cuda_stage_host_free(void* ptr) {
  cuda_api.cuMemFreeHost(ptr);
}

static int cuda_stage_event_create(void** out) {
  CUevent event = NULL;
  CUresult r = cuda_api.cuEventCreate(&event, CU_EVENT_DISABLE_TIMING);
  *out = event;
  return (int)r;
}

static void cuda_stage_event_destroy(void* event) {
  cuda_api.cuEventSynchronize(event);
  cuda_api.cuEventDestroy(event);
}

static int cuda_stage_event_record(void* event, void* stream) {
  return (int)cuda_api.cuEventRecord(event, stream);
}

static int cuda_stage_event_synchronize(void* event) {
  return (int)cuda_api.cuEventSynchronize(event);
}

static int cuda_stage_copy_async(uintptr_t dst, uintptr_t src, size_t len, bool to_device,
                                 void* stream) {
  (void)to_device; /* unified addressing */
  return (int)cuda_api.cuMemcpyAsync((CUdeviceptr)dst, (CUdeviceptr)src, len, stream);
}

static int cuda_stage_stream_synchronize(void* stream) {
  return (int)cuda_api.cuStreamSynchronize(stream);
}

const struct adr_staging_ops cuda_staging_ops = {
    .host_alloc = cuda_stage_host_alloc,
    .host_free = cuda_stage_host_free,
    .event_create = cuda_stage_event_create,
    .event_destroy = cuda_stage_event_destroy,
    .event_record = cuda_stage_event_record,
    .event_synchronize = cuda_stage_event_synchronize,
    .copy_async = cuda_stage_copy_async,
    .stream_synchronize = cuda_stage_stream_synchronize,
    .out_of_memory = CUDA_ERROR_OUT_OF_MEMORY,
};

/* True when `p` is host memory the driver does not know (pageable). */
static bool is_pageable(const void* p) {
  unsigned int mem_type = 0;
  CUpointer_attribute attr = CU_POINTER_ATTRIBUTE_MEMORY_TYPE;
  void* data = &mem_type;
  return cuda_api.cuPointerGetAttributes(1, &attr, &data, (CUdeviceptr)(uintptr_t)p) ==
             CUDA_SUCCESS &&
         mem_type == 0;
}

/* Host memory for the driver's copy rules: pageable (no adr device) or
 * pinned (cuda_host). */
static bool is_host_memory(const struct adr_backend_device* dev) {
  return dev == NULL || dev->type == ARROW_DEVICE_CUDA_HOST;
}

/* Managed memory the CPU may copy in stream order. The driver treats a
 * copy between host memory and managed memory like one between two host
 * buffers (on an H200 with driver 580 a 64-byte upload from pageable
 * memory into managed memory on a stream held back by an event waited for
 * the event), so such copies take the host-function path too. */
static bool is_cpu_copyable_managed(const struct adr_backend_device* dev) {
  return dev != NULL && dev->type == ARROW_DEVICE_CUDA_MANAGED && dev->concurrent_managed;
}

/* Host to host: cuMemcpyAsync would wait for the stream's earlier work
 * (the driver documents such copies as fully synchronous), so the copy is
 * a host function in stream order instead (backends/common/host_copy.h). */
static CUresult queue_host_copy(void* dst, const void* src, size_t size,
                                struct adr_backend_stream* stream) {
  struct adr_host_copy* c = adr_host_copy_new(dst, src, size);
  if (c == NULL) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = cuda_api.cuLaunchHostFunc(stream->stream, adr_host_copy_run, c);
  if (r != CUDA_SUCCESS) free(c);
  return r;
}

/* Overlapping ranges of one allocation: the driver does not promise
 * memmove semantics, adr does (adr.h); backends/common/overlap.h orders
 * the pieces. The scratch buffer is device memory of the stream's device,
 * made on first use and freed with the stream. Queued, never waited for;
 * the device's scratch_lock keeps two threads' pieces on one stream from
 * interleaving. */
static int queue_piece(void* ctx, uintptr_t dst, uintptr_t src, size_t len) {
  struct adr_backend_stream* stream = ctx;
  return (int)cuda_api.cuMemcpyAsync((CUdeviceptr)dst, (CUdeviceptr)src, len, stream->stream);
}

static CUresult copy_overlapping(struct adr_backend_device* owner, CUdeviceptr d, CUdeviceptr s,
                                 size_t size, struct adr_backend_stream* stream) {
  CUresult r = CUDA_SUCCESS;
  pthread_mutex_lock(&owner->scratch_lock);
  if (adr_overlap_needs_scratch(d, s, size) && stream->scratch == 0) {
    r = cuda_api.cuMemAlloc(&stream->scratch, ADR_OVERLAP_SCRATCH);
    if (r != CUDA_SUCCESS) stream->scratch = 0;
  }
  if (r == CUDA_SUCCESS)
    r = (CUresult)adr_overlap_copy(d, s, size, stream->scratch, queue_piece, stream);
  pthread_mutex_unlock(&owner->scratch_lock);
  return r;
}

/* Frees a stream's overlap scratch buffer (its work has completed). */
void cuda_stream_scratch_free(struct adr_backend_stream* stream) {
  if (stream->scratch != 0) cuda_api.cuMemFree(stream->scratch);
  stream->scratch = 0;
}

int cuda_copy(struct adr_backend_device* dst_dev, void* dst, struct adr_backend_device* src_dev,
              const void* src, size_t size, struct adr_backend_stream* stream,
              struct adr_error* error) {
  struct adr_backend_device* owner = stream->dev;
  struct cuda_current_guard g;
  int st = cuda_current_enter(owner, &g, error);
  if (st) return st;
  CUdeviceptr d = (CUdeviceptr)(uintptr_t)dst, s = (CUdeviceptr)(uintptr_t)src;
  CUresult r;
  const char* how = "cuMemcpyAsync";
  if (dst_dev != NULL && src_dev != NULL && dst_dev->ordinal != src_dev->ordinal &&
      dst_dev->type == ARROW_DEVICE_CUDA && src_dev->type == ARROW_DEVICE_CUDA) {
    how = "cuMemcpyPeerAsync";
    r = cuda_api.cuMemcpyPeerAsync(d, dst_dev->ctx, s, src_dev->ctx, size, stream->stream);
  } else if ((dst_dev == NULL) != (src_dev == NULL) && adr_staging_wanted(&owner->staging, size) &&
             (dst_dev ? dst_dev : src_dev)->type == ARROW_DEVICE_CUDA &&
             is_pageable(dst_dev ? src : dst)) {
    how = "staged pageable copy";
    r = dst_dev
            ? (CUresult)adr_staging_copy_to_device(&owner->staging, d, src, size, stream->stream)
            : (CUresult)adr_staging_copy_to_host(&owner->staging, dst, s, size, stream->stream);
  } else if ((is_host_memory(dst_dev) || is_host_memory(src_dev)) &&
             (is_host_memory(dst_dev) || is_cpu_copyable_managed(dst_dev)) &&
             (is_host_memory(src_dev) || is_cpu_copyable_managed(src_dev)) &&
             cuda_api.cuLaunchHostFunc != NULL) {
    how = "host copy (cuLaunchHostFunc)";
    r = queue_host_copy(dst, src, size, stream);
  } else if (dst_dev != NULL && dst_dev == src_dev && adr_overlap(d, s, size)) {
    how = "overlapping cuMemcpyAsync";
    r = copy_overlapping(owner, d, s, size, stream);
  } else {
    r = cuda_api.cuMemcpyAsync(d, s, size, stream->stream);
  }
  cuda_current_leave(&g);
  return cuda_check(r, error, "%s of %zu bytes from %p to %p", how, size, src, dst);
}

int cuda_memset(struct adr_backend_device* dev, void* ptr, int value, size_t size,
                struct adr_backend_stream* stream, struct adr_error* error) {
  struct cuda_current_guard g;
  int st = cuda_current_enter(stream->dev, &g, error);
  if (st) return st;
  CUresult r = cuda_api.cuMemsetD8Async((CUdeviceptr)(uintptr_t)ptr, (unsigned char)value, size,
                                        stream->stream);
  cuda_current_leave(&g);
  return cuda_check(r, error, "cuMemsetD8Async of %zu bytes at %p on CUDA device %d", size, ptr,
                    dev->ordinal);
}

int cuda_host_register(struct adr_backend_device* dev, void* ptr, size_t size,
                       struct adr_error* error) {
  struct cuda_current_guard g;
  int st = cuda_current_enter(dev, &g, error);
  if (st) return st;
  CUresult r = cuda_api.cuMemHostRegister(ptr, size, CU_MEMHOSTREGISTER_PORTABLE);
  cuda_current_leave(&g);
  if (r != CUDA_SUCCESS) return cuda_check(r, error, "cuMemHostRegister(%p, %zu)", ptr, size);
  return 0;
}

int cuda_host_unregister(struct adr_backend_device* dev, void* ptr, struct adr_error* error) {
  struct cuda_current_guard g;
  int st = cuda_current_enter(dev, &g, error);
  if (st) return st;
  CUresult r = cuda_api.cuMemHostUnregister(ptr);
  cuda_current_leave(&g);
  if (r != CUDA_SUCCESS) return cuda_check(r, error, "cuMemHostUnregister(%p)", ptr);
  return 0;
}

int cuda_pointer_query(const void* ptr, ArrowDeviceType* out_type, int64_t* out_id,
                       struct adr_error* error) {
  unsigned int mem_type = 0;
  unsigned int managed = 0; /* the driver writes a bool; zeroed so either width reads right */
  int ordinal = -1;
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                 CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
  void* data[] = {&mem_type, &managed, &ordinal};
  CUresult r = cuda_api.cuPointerGetAttributes(3, attrs, data, (CUdeviceptr)(uintptr_t)ptr);
  if (r != CUDA_SUCCESS) return cuda_check(r, error, "cuPointerGetAttributes(%p)", ptr);
  if (mem_type == 0 || ordinal < 0 || ordinal >= cuda_devices)
    return cuda_errorf(error, ENOENT,
                       "%p is not memory "
                       "the CUDA driver knows",
                       ptr);
  if (managed != 0)
    *out_type = ARROW_DEVICE_CUDA_MANAGED;
  else if (mem_type == CU_MEMORYTYPE_HOST)
    *out_type = ARROW_DEVICE_CUDA_HOST;
  else
    *out_type = ARROW_DEVICE_CUDA;
  *out_id = ordinal;
  return 0;
}
