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
 * the adaptor (an opt-in layer; the device's own counters are striped,
 * below). */
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

/* ---- a device's live counters (live_counters.c) ------------------------- */

/* The current and peak bytes and count of what adr_alloc handed out on a
 * device, kept without a cache line that every allocating thread writes
 * (one shared atomic made two threads allocating on one device 4-7x
 * slower per operation than one).
 *
 * Each thread adds to and subtracts from a stripe of its own (a thread's
 * ordinal modulo the stripe count; threads beyond it share stripes under
 * the stripe's spin lock); the current values are the stripes' sums. The
 * peaks stay exact: every stripe has a budget, the budgets add up to the
 * peak, and a stripe's current value never exceeds its budget, so the sum
 * never exceeds the peak while every addition fits its stripe's budget
 * (the hot path: the stripe's lock, two additions, one comparison). An
 * addition that does not fit takes the slow path under the device's mutex:
 * it locks every stripe in use, moves spare budget (a stripe's budget
 * above its current value, which its frees leave there) to its own
 * stripe, and only when no spare is left raises the peak, by exactly what
 * the sum then exceeds it by, all stripes held so that the sum it raises
 * the peak to is the sum at that instant. A thread whose frees balance its
 * allocations therefore never leaves its stripe; a thread that allocates
 * what another frees takes that spare in bulk now and then. */
#define ADR__LIVE_STRIPES 16u

struct adr__live_stripe {
  _Alignas(ADR__APART) struct adr__spin lock;
  _Atomic int64_t bytes, count;       /* this stripe's share of the current values (may be < 0) */
  int64_t bytes_budget, count_budget; /* how far they may grow; under lock */
};

struct adr__live_counters {
  struct adr__live_stripe stripes[ADR__LIVE_STRIPES];
  /* bit i: stripe i was used (written once per stripe) */
  _Alignas(ADR__APART) _Atomic uint32_t used;
  _Alignas(ADR__APART) pthread_mutex_t lock; /* the slow path and peak resets */
  _Atomic uint64_t bytes_peak, count_peak;   /* written under lock */
};

void adr__live_init(struct adr__live_counters* c);
void adr__live_destroy(struct adr__live_counters* c);
void adr__live_add_slow(struct adr__live_counters* c, unsigned stripe, int64_t size);
void adr__live_mark_used(struct adr__live_counters* c, unsigned stripe);

static inline unsigned adr__live_stripe_of(struct adr__live_counters* c) {
  unsigned i = adr__thread_ordinal() % ADR__LIVE_STRIPES;
  if (__builtin_expect(!(atomic_load_explicit(&c->used, memory_order_relaxed) & (1u << i)), 0))
    adr__live_mark_used(c, i);
  return i;
}

/* One more allocation of `size` bytes. */
static inline void adr__live_add(struct adr__live_counters* c, uint64_t size) {
  unsigned i = adr__live_stripe_of(c);
  struct adr__live_stripe* s = &c->stripes[i];
  adr__spin_lock(&s->lock);
  int64_t b = atomic_load_explicit(&s->bytes, memory_order_relaxed) + (int64_t)size;
  int64_t n = atomic_load_explicit(&s->count, memory_order_relaxed) + 1;
  if (__builtin_expect(b <= s->bytes_budget && n <= s->count_budget, 1)) {
    atomic_store_explicit(&s->bytes, b, memory_order_relaxed);
    atomic_store_explicit(&s->count, n, memory_order_relaxed);
    adr__spin_unlock(&s->lock);
    return;
  }
  adr__spin_unlock(&s->lock);
  adr__live_add_slow(c, i, (int64_t)size);
}

/* One allocation of `size` bytes fewer (its budget stays with the stripe). */
static inline void adr__live_sub(struct adr__live_counters* c, uint64_t size) {
  struct adr__live_stripe* s = &c->stripes[adr__live_stripe_of(c)];
  adr__spin_lock(&s->lock);
  atomic_store_explicit(&s->bytes,
                        atomic_load_explicit(&s->bytes, memory_order_relaxed) - (int64_t)size,
                        memory_order_relaxed);
  atomic_store_explicit(&s->count, atomic_load_explicit(&s->count, memory_order_relaxed) - 1,
                        memory_order_relaxed);
  adr__spin_unlock(&s->lock);
}

/* Current values (the stripes' sums, read without locks: exact when no
 * allocation is in flight) and peaks (never below the current values). */
void adr__live_read(struct adr__live_counters* c, struct adr_memory_stats* out);
/* Sets the peaks to the current values (exactly: every stripe held). */
void adr__live_reset_peaks(struct adr__live_counters* c);

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
  struct adr__live_counters live;         /* allocated bytes and count: current, peak */
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
