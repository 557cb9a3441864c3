/* SPDX-License-Identifier: Apache-2.0
 *
 * The caching pool (pool.c): a per-device cache of memory taken from an
 * upstream allocator, with size classes for small blocks, a best-fit treap
 * for large ones, splitting and coalescing, stream-ordered reuse, a cap on
 * what it caches and, in AddressSanitizer builds, poisoning of what it has
 * not handed out (host memory only, opts.poison).
 *
 * The pool knows neither devices nor backends: it allocates chunks through
 * `struct adr__pool_upstream` and orders reuse across streams through
 * `struct adr__pool_sync`, whose streams are opaque keys (NULL = the host:
 * memory freed with a NULL stream is unused by any queued work). The device
 * glue lives in device_memory.c; the unit tests drive the pool with fakes.
 */
#ifndef ADR_CORE_MEMORY_POOL_H
#define ADR_CORE_MEMORY_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "adr/adr.h"

/* Where chunks come from. alloc returns 0/ENOMEM/... with a message; the
 * memory needs no stream ordering (it is host-ordered). */
struct adr__pool_upstream {
  void* ctx;
  int (*alloc)(void* ctx, size_t size, size_t alignment, void** out, struct adr_error* error);
  void (*free)(void* ctx, void* ptr, size_t size);
  /* May be NULL. Told of each new chunk before any block of it is handed
   * out, with the index of the arena that owns it (the device glue sends
   * the chunk's addresses to that arena's allocation-table shard). */
  void (*placed)(void* ctx, void* ptr, size_t size, unsigned arena);
};

/* Events on opaque streams. All may fail with an errno value; a failure
 * makes the pool fall back to not reusing the block. May be absent (NULL
 * struct): then every stream is taken to be synchronous with the host. */
struct adr__pool_sync {
  void* ctx;
  int (*event_create)(void* ctx, void** out);
  void (*event_destroy)(void* ctx, void* event);
  int (*event_record)(void* ctx, void* event, void* stream);
  /* stream waits (device-side) for event */
  int (*event_wait)(void* ctx, void* event, void* stream);
  /* 0 complete, EBUSY pending */
  int (*event_query)(void* ctx, void* event);
  int (*event_synchronize)(void* ctx, void* event);
};

/* Which new host chunks are advised transparent huge pages. */
enum adr__pool_thp {
  ADR__POOL_THP_LARGE = 0, /* those made for a request of ADR__POOL_THP_MIN or more (default,
                              NumPy's rule) */
  ADR__POOL_THP_ALL,       /* every chunk (ADR_ALLOC option hugepages) */
  ADR__POOL_THP_OFF,       /* none (option nohugepages) */
};
#define ADR__POOL_THP_MIN ((size_t)4 << 20)

struct adr__pool_options {
  /* Cap on the free bytes kept (by default 1/8 of the device's memory,
   * from 256 MiB to 4 GiB; SIZE_MAX = no cap) and
   * on the reserved bytes (CUDA's cudaMemPoolAttrReleaseThreshold: the
   * reservation the pool may hold; SIZE_MAX by default). A free that leaves
   * the pool over either gives fully free chunks back at once. */
  size_t max_cached; /* ADR__POOL_MAX_CACHED_AUTO: adr__pool_default_max_cached(0) */
  size_t release_threshold;
  size_t chunk_size; /* smallest growth step (bytes); 0 = 2 MiB */
  unsigned arenas;   /* independent shards; 0 = one per CPU (max 16) */
  /* The chunks are host memory adr's own code may touch: in an
   * AddressSanitizer build, poison what is not allocated. */
  bool poison;
  /* The chunks are ordinary anonymous host pages (the CPU device): a new
   * chunk may be given transparent huge pages (MADV_HUGEPAGE on its 2
   * MiB-aligned part; `hugepages`, below) and be faulted in before it is
   * carved (populate: MADV_POPULATE_WRITE, off by default), outside the
   * arena lock (docs/memory.md: what they cost and gain on this kind of
   * host). */
  bool host_pages;
  enum adr__pool_thp hugepages;
  bool populate;
};

struct adr__pool_stats {
  uint64_t reserved_bytes, reserved_bytes_peak, reserved_bytes_total;
  uint64_t reserved_count, reserved_count_peak, reserved_count_total;
  uint64_t cached_bytes;
  uint64_t largest_free_block;
  uint64_t cache_hits, cache_misses, stream_waits, trimmed_bytes;
  uint64_t adopted; /* of the hits, served by a fully free chunk moved from another arena */
  uint64_t allocated_bytes, allocated_count; /* outstanding, as handed out */
  uint64_t max_cached;                       /* the cap in force (UINT64_MAX: none) */
  uint32_t host_pages;                       /* ADR_HOST_PAGES_* of the options */
  uint32_t thread_cache;                     /* ADR_THREAD_CACHE_* (the process's) */
};

/* max_cached's default: "an eighth of the device" (from memory_total, bytes;
 * 0 = unknown), at least 256 MiB, at most 4 GiB; 256 MiB when unknown. */
#define ADR__POOL_MAX_CACHED_AUTO (SIZE_MAX - 1)
size_t adr__pool_default_max_cached(uint64_t memory_total);

struct adr__pool;

/* Requests at most this large are rounded up to a size class (64-byte
 * steps to 512 B, 4 classes per power of two to 1 MiB, 8 above) and cached
 * in per-class lists; larger ones are served best-fit, 512-byte granular. */
#define ADR__POOL_CLASS_MAX ((size_t)1 << 46)

void adr__pool_options_default(struct adr__pool_options* opts);
/* Copies *up and *sync (sync may be NULL). */
int adr__pool_create(const struct adr__pool_options* opts, const struct adr__pool_upstream* up,
                     const struct adr__pool_sync* sync, struct adr__pool** out,
                     struct adr_error* error);
/* Returns every chunk upstream (outstanding allocations included) without
 * waiting for any stream: the caller guarantees no queued work uses the
 * memory (process exit, tests). Returns how many allocations were
 * outstanding. */
size_t adr__pool_destroy(struct adr__pool* pool);

/* size > 0, alignment a power of two >= 64. ENOMEM (message from upstream)
 * when the pool cannot grow: the caller trims and retries. */
int adr__pool_alloc(struct adr__pool* pool, size_t size, size_t alignment, void* stream, void** out,
                    struct adr_error* error);
/* The same without the pool's address map: *out_block identifies the
 * allocation and must be passed to adr__pool_free_block (the front end keeps
 * it in its allocation table, saving a second hash lookup per call). */
int adr__pool_alloc_block(struct adr__pool* pool, size_t size, size_t alignment, void* stream,
                          void** out, void** out_block, struct adr_error* error);
int adr__pool_free_block(struct adr__pool* pool, void* block, size_t size, void* stream,
                         struct adr_error* error);
/* EINVAL for an address the pool did not hand out, ERANGE for a wrong size
 * (nothing freed). */
int adr__pool_free(struct adr__pool* pool, void* ptr, size_t size, void* stream,
                   struct adr_error* error);
/* Releases free chunks upstream. wait: host-wait for streams whose frees
 * are still pending, so their blocks can be released too. Returns bytes. */
size_t adr__pool_trim(struct adr__pool* pool, bool wait);
/* The stream is going away (its work has completed): its cached blocks
 * become usable by everyone. */
void adr__pool_stream_retire(struct adr__pool* pool, void* stream);
void adr__pool_stats_get(struct adr__pool* pool, struct adr__pool_stats* out);
void adr__pool_stats_reset_peaks(struct adr__pool* pool);
/* Replaces max_cached (SIZE_MAX: no cap) for later frees; returns the
 * previous value. */
size_t adr__pool_max_cached_set(struct adr__pool* pool, size_t max_cached);

/* Checks the pool's invariants (for the tests): 0, or EPROTO with a
 * description in msg. */
int adr__pool_check(struct adr__pool* pool, char* msg, size_t size);

/* Size-class helpers (exposed for the unit tests). */
unsigned adr__pool_class_index(size_t size);
size_t adr__pool_class_size(unsigned index);
#define ADR__POOL_CLASS_COUNT 260u /* 52 up to 1 MiB, then 8 per power of two */

#endif /* ADR_CORE_MEMORY_POOL_H */
