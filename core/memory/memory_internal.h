/* SPDX-License-Identifier: Apache-2.0
 *
 * Internals of core/memory/: the per-device memory state, the ADR_ALLOC
 * configuration, the counters shared by device statistics and the
 * statistics adaptor, and the adaptor bookkeeping the front end needs.
 */
#ifndef ADR_CORE_MEMORY_INTERNAL_H
#define ADR_CORE_MEMORY_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "adr/memory.h"
#include "internal.h"
#include "pool.h"

/* ---- counters of the statistics adaptor (adaptors.c) --------------------- */

/* Lock-free, one cache line shared by every thread that allocates through
 * the adaptor (an opt-in layer; the device's own figures are kept in the
 * allocation table's shards, alloc_table.c). */
struct adr__counters {
  _Atomic uint64_t bytes, bytes_peak, bytes_total;
  _Atomic uint64_t count, count_peak, count_total;
};

static inline void adr__counter_raise_peak(_Atomic uint64_t* peak, uint64_t v) {
  uint64_t p = atomic_load_explicit(peak, memory_order_relaxed);
  while (v > p && !atomic_compare_exchange_weak_explicit(peak, &p, v, memory_order_relaxed,
                                                         memory_order_relaxed)) {
  }
}

static inline void adr__counters_add(struct adr__counters* c, uint64_t size) {
  uint64_t b = atomic_fetch_add_explicit(&c->bytes, size, memory_order_relaxed) + size;
  uint64_t n = atomic_fetch_add_explicit(&c->count, 1, memory_order_relaxed) + 1;
  atomic_fetch_add_explicit(&c->bytes_total, size, memory_order_relaxed);
  atomic_fetch_add_explicit(&c->count_total, 1, memory_order_relaxed);
  adr__counter_raise_peak(&c->bytes_peak, b);
  adr__counter_raise_peak(&c->count_peak, n);
}

static inline void adr__counters_sub(struct adr__counters* c, uint64_t size) {
  atomic_fetch_sub_explicit(&c->bytes, size, memory_order_relaxed);
  atomic_fetch_sub_explicit(&c->count, 1, memory_order_relaxed);
}

void adr__counters_read(struct adr__counters* c, struct adr_memory_stats* out);

/* ---- ADR_ALLOC (config.c) ------------------------------------------------ */

struct adr__alloc_config {
  int status; /* 0, or EINVAL for a malformed ADR_ALLOC (every alloc reports it) */
  struct adr_error error;
  bool use_pool; /* pool (default) or the plain backend allocator */
  struct adr__pool_options pool;
  bool has_limit;
  uint64_t limit;
  bool track;
};

/* Parses `text` (NULL or "" = defaults). EINVAL with a message naming
 * `variable`, the 1-based column and what was expected. */
int adr__alloc_config_parse(const char* variable, const char* text, struct adr__alloc_config* out,
                            struct adr_error* error);
/* ADR_ALLOC, parsed once. */
const struct adr__alloc_config* adr__alloc_config(void);

/* ---- per-device state (device_memory.c) ----------------------------------------- */

struct adr__oom_entry {
  adr_oom_fn fn;
  void* ctx;
};

struct adr__device_memory {
  struct adr_device* device;
  int status; /* why the device cannot allocate (ADR_ALLOC malformed ...) */
  struct adr_error error;
  bool stream_ordered_alloc; /* backend alloc/free are stream-ordered */
  _Atomic(const struct adr_allocator*) handler;
  struct adr__pool* pool;                 /* the built-in pool; created with the state */
  struct adr_allocator* default_stack[2]; /* adaptors ADR_ALLOC stacked, owned */
  _Atomic uint64_t oom_retries;
  _Atomic uint64_t oom_failures;
  pthread_rwlock_t oom_lock; /* read: calling callbacks; write: changing them */
  struct adr__oom_entry* oom;
  size_t oom_count, oom_cap;
};

/* Allocation through `handler` with the OOM chain: on ENOMEM release the
 * device's cache and retry, then run the OOM callbacks while they make
 * progress, then fail with the device's statistics in the message. */
/* out_cookie (may be NULL): receives the pool's block handle when the
 * built-in pool served the request directly, else NULL; pass it back to
 * adr__memory_free. */
int adr__memory_alloc(struct adr_device* dev, const struct adr_allocator* handler, size_t size,
                      size_t alignment, struct adr_stream* stream, void** out, void** out_cookie,
                      struct adr_error* error);
int adr__memory_free(struct adr_device* dev, const struct adr_allocator* handler, void* ptr,
                     size_t size, struct adr_stream* stream, void* cookie, struct adr_error* error);
/* Checks a handler's struct_size, version and slots. */
int adr__allocator_check(const char* op, const struct adr_allocator* h, struct adr_error* error);

/* ---- adaptors (adaptors.c) ----------------------------------------------- */

/* Whether h was made by adr_allocator_*_create. */
bool adr__adaptor_is(const struct adr_allocator* h);
/* Counts one more (or one fewer) place that holds the adaptor (a device
 * it is installed on, an adaptor stacked over it). No-op for others. */
void adr__adaptor_hold(const struct adr_allocator* h, int delta);
/* Destroys an adaptor whatever holds it (device teardown at exit). */
void adr__adaptor_destroy_force(struct adr_allocator* adaptor);

#endif /* ADR_CORE_MEMORY_INTERNAL_H */
