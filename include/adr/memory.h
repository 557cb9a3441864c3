/* SPDX-License-Identifier: Apache-2.0
 *
 * adr memory management: allocation handlers, the caching pool, adaptors,
 * statistics, limits and out-of-memory callbacks (docs/memory.md).
 *
 * Every adr_alloc() on a device goes through the device's current
 * *allocation handler* (the idea of NumPy's NEP 49, applied per device). Two
 * handlers are built in:
 *   - the caching pool (adr_allocator_pool(), the default): per device, size
 *     classes for small blocks, best fit for large ones, stream-ordered reuse;
 *   - the plain backend allocator (adr_allocator_backend()): every call goes
 *     to the backend's native allocator.
 * Applications can install their own (RMM-backed, arena ...) and stack the
 * adaptors below on any handler. Each allocation remembers the handler it
 * came from and adr_free() returns it there, even after the device's
 * handler was changed.
 *
 * The ADR_ALLOC environment variable picks the initial handler of every
 * device and configures the pool (docs/environment.md).
 *
 * Thread safety: every function may be called from any thread at any time.
 * Handler callbacks are called concurrently from any thread that allocates.
 */
#ifndef ADR_MEMORY_H
#define ADR_MEMORY_H

#include <stddef.h>
#include <stdint.h>

#include "adr/adr.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Allocation handlers                                                      */
/* ------------------------------------------------------------------------ */

#define ADR_ALLOCATOR_VERSION 1

/* An allocation handler. Fill every field, set struct_size to
 * sizeof(struct adr_allocator) and version to ADR_ALLOCATOR_VERSION; adr
 * reads only the fields struct_size covers, so the struct can grow.
 *
 * alloc: allocate `size` (> 0) bytes on `device` aligned to `alignment` (a
 *   power of two >= ADR_MIN_ALIGNMENT), ready for work on `stream` (NULL:
 *   ready for the host and every stream when it returns). Store the address
 *   in *out. Return 0 or an errno value (ENOMEM when out of memory) and a
 *   message through `error` (adr_error_set).
 * free: release memory alloc returned, with the same size. With a stream the
 *   memory may still be in use by work queued on it before the call; with
 *   NULL no queued work uses it any more. Called exactly once per alloc.
 * trim: optional (NULL): release cached memory of `device` to the layer
 *   below and add the bytes released to *out_released.
 *
 * Ownership: the struct and its ctx belong to the application. They must stay
 * valid while the handler is installed on a device, stacked under an adaptor
 * or has allocations outstanding (adr frees through the handler that made
 * each allocation). Handlers made by adr_allocator_*_create() are owned by
 * adr and released with adr_allocator_destroy(). */
struct adr_allocator {
  uint32_t struct_size;
  uint32_t version;
  const char* name; /* for messages and adr-info: "pool", "rmm" ... */
  void* ctx;
  int (*alloc)(void* ctx, struct adr_device* device, size_t size, size_t alignment,
               struct adr_stream* stream, void** out, struct adr_error* error);
  int (*free)(void* ctx, struct adr_device* device, void* ptr, size_t size,
              struct adr_stream* stream, struct adr_error* error);
  int (*trim)(void* ctx, struct adr_device* device, size_t* out_released, struct adr_error* error);
  void* reserved[4]; /* NULL */
};

/* The built-in caching pool: one pool per device, configured by ADR_ALLOC.
 * Memory freed on a stream is reused by any stream or the host once that
 * stream has reached the free; the pool keeps at most max_cached free
 * bytes (by default an eighth of the device's memory, from 256 MiB to
 * 4 GiB; adr_memory_stats.max_cached) and gives the excess back to the backend at
 * the free (docs/memory.md). Static; never destroyed. */
ADR_API const struct adr_allocator* adr_allocator_pool(void);

/* The built-in plain allocator: the backend's alloc/free slots. Static. */
ADR_API const struct adr_allocator* adr_allocator_backend(void);

/* Installs `handler` as the handler of later adr_alloc() calls on `device`
 * and stores the one it replaces in *out_previous (may be NULL). Allocations
 * made before stay with their handler. EINVAL for a NULL or malformed
 * handler (struct_size too small, unknown version, no alloc or free). */
ADR_API int adr_allocator_set(struct adr_device* device, const struct adr_allocator* handler,
                              const struct adr_allocator** out_previous, struct adr_error* error);

/* The handler later adr_alloc() calls on `device` use. */
ADR_API const struct adr_allocator* adr_allocator_get(struct adr_device* device);

/* Allocates and frees through `handler` directly, with the same checks and
 * bookkeeping as adr_alloc()/adr_free() (the allocation is recorded, so
 * adr_free() also works on it, and vice versa). */
ADR_API int adr_alloc_with(struct adr_device* device, const struct adr_allocator* handler,
                           size_t size, size_t alignment, struct adr_stream* stream, void** out,
                           struct adr_error* error);

/* ------------------------------------------------------------------------ */
/* Statistics                                                               */
/* ------------------------------------------------------------------------ */

/* Current / peak / total of a quantity. `total` counts every increase
 * since creation (bytes ever allocated, allocations ever made). */
struct adr_memory_counter {
  uint64_t current;
  uint64_t peak;
  uint64_t total;
};

/* Statistics of a device (adr_memory_stats_get) or of a statistics adaptor
 * (adr_allocator_stats_get). The caller sets struct_size. Fields a source
 * does not know stay 0 (an adaptor has no reserved or cache figures). */
/* How a pool of host memory (the CPU device's) treats its chunks' pages
 * (adr_memory_stats.host_pages; ADR_ALLOC's hugepages, nohugepages and
 * populate, docs/memory.md "Host pages"). 0: no advice, or a pool of
 * device memory. */
/* Transparent huge pages for chunks made for a request of 4 MiB or more
 * (the default). */
#define ADR_HOST_PAGES_HUGE_LARGE 1u
/* Transparent huge pages for every chunk (hugepages). */
#define ADR_HOST_PAGES_HUGE_ALL 2u
/* Chunks faulted in when they are made (populate). */
#define ADR_HOST_PAGES_POPULATE 4u

/* How a thread enters its per-thread cache of the built-in pool
 * (adr_memory_stats.thread_cache; docs/memory.md "Per-thread cache"), the
 * same for every pool of the process; reported for the device's built-in
 * pool whatever handler is in use, like host_pages. 0: the device has no
 * pool. */
/* With plain stores; a flush by another thread pays a process-wide memory
 * barrier (membarrier(2)). */
#define ADR_THREAD_CACHE_BIASED 1u
/* With a spin lock on every use (membarrier refused or missing, or a
 * ThreadSanitizer build). */
#define ADR_THREAD_CACHE_LOCKED 2u

struct adr_memory_stats {
  uint32_t struct_size;
  uint32_t host_pages; /* ADR_HOST_PAGES_* flags of the device's pool (0: none) */
  struct adr_memory_counter allocated_bytes; /* handed to the application */
  struct adr_memory_counter allocated_count;
  struct adr_memory_counter reserved_bytes; /* taken from the backend by the pool */
  struct adr_memory_counter reserved_count; /* pool chunks */
  uint64_t cached_bytes;                    /* reserved, free in the pool */
  uint64_t largest_free_block;              /* largest cached block, bytes */
  uint64_t cache_hits;                      /* pool requests served from cache */
  uint64_t cache_misses;                    /* pool requests that grew the pool */
  uint64_t stream_waits;                    /* reuse across streams via an event */
  uint64_t oom_retries;                     /* retries of the out-of-memory chain */
  uint64_t oom_failures;                    /* ENOMEM returned to the caller */
  uint64_t trimmed_bytes;                   /* released by trim, total */
  uint64_t max_cached;                      /* the pool's cap on cached bytes (UINT64_MAX: none) */
  uint32_t thread_cache;                    /* ADR_THREAD_CACHE_* of the pool (0: no pool) */
  uint32_t reserved32;
  uint64_t reserved[6];
};

/* Statistics of everything allocated on `device` through adr_alloc, plus its
 * pool's figures. Cheap: sums per-thread-shard counters. The allocated
 * peaks are exact, also when threads allocate what others free (the
 * highest the current values reached); current values read while other
 * threads allocate or free may miss the calls in flight, and are exact
 * once they return. */
ADR_API int adr_memory_stats_get(struct adr_device* device, struct adr_memory_stats* out,
                                 struct adr_error* error);

/* Sets every peak of the device's statistics to its current value. */
ADR_API int adr_memory_stats_reset_peaks(struct adr_device* device, struct adr_error* error);

/* Formats statistics as one line ("allocated 1.5 MiB in 12 (peak ...)")
 * into buf (always NUL-terminated); returns buf. */
ADR_API const char* adr_memory_stats_format(const struct adr_memory_stats* stats, char* buf,
                                            size_t size);

/* Releases the device's cached memory (its pool's free chunks, and what the
 * current handler's trim releases) to the backend. Blocks that are free but
 * whose stream has not reached the free yet are kept. *out_released (may be
 * NULL) receives the bytes released. */
ADR_API int adr_memory_trim(struct adr_device* device, size_t* out_released,
                            struct adr_error* error);

/* Sets the cap on the free bytes the device's pool keeps (max_cached: by
 * default an eighth of the device's memory, 256 MiB to 4 GiB, or ADR_ALLOC's
 * max_cached) for later frees, like cudaMemPoolSetAttribute. UINT64_MAX
 * removes the cap (the pool keeps all it has, as RMM's pool does); 0 keeps
 * nothing. A lower cap takes effect at the next free or adr_memory_trim.
 * *out_previous (may be NULL) receives the cap it replaces. ENOMEM if the
 * device has no pool. Thread-safe. */
ADR_API int adr_memory_max_cached_set(struct adr_device* device, uint64_t max_cached,
                                      uint64_t* out_previous, struct adr_error* error);

/* ------------------------------------------------------------------------ */
/* Out of memory                                                            */
/* ------------------------------------------------------------------------ */

/* Called when an allocation of `size` bytes on `device` fails with ENOMEM
 * after the device's cache was released. Return non-zero if memory was
 * freed (the allocation is retried and the callbacks are called again with
 * attempt + 1), 0 if not. It may call adr_free() and adr_memory_trim() on
 * any device; it must not call adr_alloc() on `device`. */
typedef int (*adr_oom_fn)(void* ctx, struct adr_device* device, size_t size, uint32_t attempt);

/* Registers a callback for `device`; callbacks run in registration order.
 * EEXIST if (fn, ctx) is registered already. */
ADR_API int adr_oom_callback_add(struct adr_device* device, adr_oom_fn fn, void* ctx,
                                 struct adr_error* error);
/* ENOENT if (fn, ctx) is not registered. Waits for running calls of it. */
ADR_API int adr_oom_callback_remove(struct adr_device* device, adr_oom_fn fn, void* ctx,
                                    struct adr_error* error);

/* ------------------------------------------------------------------------ */
/* Adaptors                                                                 */
/* ------------------------------------------------------------------------ */

/* Every adaptor wraps an `upstream` handler (any handler, adaptors
 * included), which must outlive it. An adaptor made here belongs to adr:
 * release it with adr_allocator_destroy(). */

/* Counts what passes through (allocated bytes and counts). */
ADR_API int adr_allocator_stats_create(const struct adr_allocator* upstream,
                                       struct adr_allocator** out, struct adr_error* error);
/* The statistics of a statistics adaptor; EINVAL for another handler. */
ADR_API int adr_allocator_stats_get(const struct adr_allocator* stats_adaptor,
                                    struct adr_memory_stats* out, struct adr_error* error);

/* Caps the bytes allocated through it at `limit` (per adaptor, so install
 * one per device for a per-device cap): beyond it, alloc fails with ENOMEM
 * and a message with the requested, used and limit byte counts. */
ADR_API int adr_allocator_limit_create(const struct adr_allocator* upstream, uint64_t limit,
                                       struct adr_allocator** out, struct adr_error* error);

/* Records every outstanding allocation (address, size, device, stream and
 * the calling thread's tag, see adr_memory_tag_set). Outstanding ones are
 * logged as leaks by adr_allocator_destroy and, at ADR_LOG=debug, at process
 * exit. */
ADR_API int adr_allocator_tracking_create(const struct adr_allocator* upstream,
                                          struct adr_allocator** out, struct adr_error* error);

struct adr_allocation_record {
  void* ptr;
  size_t size;
  struct adr_device* device;
  struct adr_stream* stream; /* as passed to alloc; may be NULL */
  char tag[32];              /* the thread's tag at allocation time, "" if none */
};
typedef void (*adr_allocation_fn)(void* ctx, const struct adr_allocation_record* record);

/* Calls fn once per outstanding allocation of a tracking adaptor (under its
 * lock: fn must not allocate through it); *out_count (may be NULL) receives
 * how many. EINVAL for another handler. */
ADR_API int adr_allocator_tracking_list(const struct adr_allocator* tracking_adaptor,
                                        adr_allocation_fn fn, void* ctx, size_t* out_count,
                                        struct adr_error* error);

/* Sets the calling thread's tag (copied, truncated to 31 bytes; NULL
 * clears it) that tracking adaptors record with each allocation. */
ADR_API void adr_memory_tag_set(const char* tag);

/* Destroys an adaptor made by adr_allocator_*_create(). EBUSY (nothing
 * destroyed) while it is installed on a device, stacked under another
 * adaptor or has outstanding allocations; EINVAL for a handler adr did not
 * create. */
ADR_API int adr_allocator_destroy(struct adr_allocator* adaptor, struct adr_error* error);

#ifdef __cplusplus
}
#endif

#endif /* ADR_MEMORY_H */
