/* SPDX-License-Identifier: Apache-2.0
 *
 * A device's live counters: striped current values with exact peaks (the
 * scheme is described at struct adr__live_counters, memory_internal.h), and
 * the thread ordinal that picks a thread's stripe and pool arena.
 */
#include <stdatomic.h>
#include <stdint.h>

#include "memory_internal.h"

_Thread_local ADR__TLS_HOT unsigned adr__thread_index = UINT32_MAX;
static _Atomic unsigned next_thread_index;

unsigned adr__thread_index_assign(void) {
  unsigned i = atomic_fetch_add_explicit(&next_thread_index, 1, memory_order_relaxed);
  /* UINT32_MAX means "not yet": the 2^32-th thread takes 0 again. */
  if (i == UINT32_MAX) i = 0;
  adr__thread_index = i;
  return i;
}

void adr__live_init(struct adr__live_counters* c) {
  for (unsigned i = 0; i < ADR__LIVE_STRIPES; i++) {
    struct adr__live_stripe* s = &c->stripes[i];
    s->lock = (struct adr__spin){0};
    atomic_init(&s->bytes, 0);
    atomic_init(&s->count, 0);
    s->bytes_budget = 0;
    s->count_budget = 0;
  }
  atomic_init(&c->used, 0);
  pthread_mutex_init(&c->lock, NULL);
  atomic_init(&c->bytes_peak, 0);
  atomic_init(&c->count_peak, 0);
}

void adr__live_destroy(struct adr__live_counters* c) {
  pthread_mutex_destroy(&c->lock);
}

/* Set before the stripe's first addition or subtraction (a stripe that
 * only frees holds spare budget a slow path must see). A slow path that
 * read the mask just before a thread set its bit does not hold that
 * stripe, but that thread's first change then overlaps the slow path and
 * may be ordered after it: the peak is still exact for that order. */
void adr__live_mark_used(struct adr__live_counters* c, unsigned stripe) {
  atomic_fetch_or_explicit(&c->used, 1u << stripe, memory_order_relaxed);
}

static int64_t min64(int64_t a, int64_t b) {
  return a < b ? a : b;
}

/* Moves spare budget (budget above the current value) of stripe `from` to
 * cover *need_bytes / *need_count of stripe `to`: what is needed plus half
 * of what is left over, so that a thread allocating what another frees
 * comes here once per batch, not once per allocation, and the other keeps
 * some spare for itself. */
static void move_budget(int64_t spare, int64_t* need, int64_t* from, int64_t* to) {
  if (*need <= 0 || spare <= 0) return;
  int64_t t = min64(spare, *need + (spare - *need) / 2);
  *from -= t;
  *to += t;
  *need -= t;
}

static void take_spare(struct adr__live_stripe* from, struct adr__live_stripe* to,
                       int64_t* need_bytes, int64_t* need_count) {
  move_budget(from->bytes_budget - atomic_load_explicit(&from->bytes, memory_order_relaxed),
              need_bytes, &from->bytes_budget, &to->bytes_budget);
  move_budget(from->count_budget - atomic_load_explicit(&from->count, memory_order_relaxed),
              need_count, &from->count_budget, &to->count_budget);
}

/* Raises stripe s's budgets and the peaks by what b / n exceed the budgets
 * by, and stores them as s's values. Under s's lock, and either every
 * stripe in use held too or s the only stripe ever used. */
static void raise_and_store(struct adr__live_counters* c, struct adr__live_stripe* s, int64_t b,
                            int64_t n, int64_t need_b, int64_t need_n) {
  if (need_b > 0) {
    s->bytes_budget += need_b;
    atomic_store_explicit(
        &c->bytes_peak,
        atomic_load_explicit(&c->bytes_peak, memory_order_relaxed) + (uint64_t)need_b,
        memory_order_relaxed);
  }
  if (need_n > 0) {
    s->count_budget += need_n;
    atomic_store_explicit(
        &c->count_peak,
        atomic_load_explicit(&c->count_peak, memory_order_relaxed) + (uint64_t)need_n,
        memory_order_relaxed);
  }
  atomic_store_explicit(&s->bytes, b, memory_order_relaxed);
  atomic_store_explicit(&s->count, n, memory_order_relaxed);
}

void adr__live_add_slow(struct adr__live_counters* c, unsigned stripe, int64_t size) {
  struct adr__live_stripe* own = &c->stripes[stripe];
  if (atomic_load_explicit(&c->used, memory_order_acquire) == 1u << stripe) {
    /* Only this stripe was ever used (one thread, or threads sharing it):
     * no other stripe holds spare budget, so the peak rises by the need
     * without the mutex. A thread that starts on another stripe from now
     * on takes the mutex and this stripe's lock for its slow paths, and
     * every other writer of the peaks holds this stripe's lock too; a
     * first free on another stripe racing this overlaps it and may be
     * ordered after it. The ramp-up of a single-threaded program (every
     * allocation a new peak) stays a few dozen instructions a call. */
    adr__spin_lock(&own->lock);
    int64_t b = atomic_load_explicit(&own->bytes, memory_order_relaxed) + size;
    int64_t n = atomic_load_explicit(&own->count, memory_order_relaxed) + 1;
    raise_and_store(c, own, b, n, b - own->bytes_budget, n - own->count_budget);
    adr__spin_unlock(&own->lock);
    return;
  }
  pthread_mutex_lock(&c->lock);
  uint32_t used = atomic_load_explicit(&c->used, memory_order_relaxed) | (1u << stripe);
  /* Every stripe in use is held from here to the end (c->lock orders the
   * slow paths; a fast path holds only its own stripe), so the sum the
   * peak may be raised to is the sum at one instant. */
  for (unsigned i = 0; i < ADR__LIVE_STRIPES; i++)
    if (used & (1u << i)) adr__spin_lock(&c->stripes[i].lock);
  int64_t b = atomic_load_explicit(&own->bytes, memory_order_relaxed) + size;
  int64_t n = atomic_load_explicit(&own->count, memory_order_relaxed) + 1;
  int64_t need_b = b - own->bytes_budget, need_n = n - own->count_budget;
  for (unsigned i = 0; i < ADR__LIVE_STRIPES && (need_b > 0 || need_n > 0); i++)
    if (i != stripe && (used & (1u << i))) take_spare(&c->stripes[i], own, &need_b, &need_n);
  /* No spare left anywhere: every other stripe is at its budget, so the
   * sum after this addition exceeds the peak by exactly the need. */
  raise_and_store(c, own, b, n, need_b, need_n);
  for (unsigned i = ADR__LIVE_STRIPES; i-- > 0;)
    if (used & (1u << i)) adr__spin_unlock(&c->stripes[i].lock);
  pthread_mutex_unlock(&c->lock);
}

static uint64_t clamp_sum(int64_t v) {
  return v < 0 ? 0 : (uint64_t)v;
}

void adr__live_read(struct adr__live_counters* c, struct adr_memory_stats* out) {
  int64_t bytes = 0, count = 0;
  for (unsigned i = 0; i < ADR__LIVE_STRIPES; i++) {
    bytes += atomic_load_explicit(&c->stripes[i].bytes, memory_order_relaxed);
    count += atomic_load_explicit(&c->stripes[i].count, memory_order_relaxed);
  }
  /* Read unlocked while other threads allocate and free, the sum may mix
   * a free counted on one stripe with its allocation not yet seen on
   * another: never below zero, and a peak is never below its current. */
  out->allocated_bytes.current = clamp_sum(bytes);
  out->allocated_count.current = clamp_sum(count);
  out->allocated_bytes.peak = atomic_load_explicit(&c->bytes_peak, memory_order_relaxed);
  out->allocated_count.peak = atomic_load_explicit(&c->count_peak, memory_order_relaxed);
  if (out->allocated_bytes.peak < out->allocated_bytes.current)
    out->allocated_bytes.peak = out->allocated_bytes.current;
  if (out->allocated_count.peak < out->allocated_count.current)
    out->allocated_count.peak = out->allocated_count.current;
}

void adr__live_reset_peaks(struct adr__live_counters* c) {
  pthread_mutex_lock(&c->lock);
  uint32_t used = atomic_load_explicit(&c->used, memory_order_relaxed);
  int64_t bytes = 0, count = 0;
  for (unsigned i = 0; i < ADR__LIVE_STRIPES; i++)
    if (used & (1u << i)) adr__spin_lock(&c->stripes[i].lock);
  for (unsigned i = 0; i < ADR__LIVE_STRIPES; i++) {
    struct adr__live_stripe* s = &c->stripes[i];
    s->bytes_budget = atomic_load_explicit(&s->bytes, memory_order_relaxed);
    s->count_budget = atomic_load_explicit(&s->count, memory_order_relaxed);
    bytes += s->bytes_budget;
    count += s->count_budget;
  }
  /* A stripe's value may be negative (it freed what others allocated);
   * the budgets still add up to the peak, which is the sum. */
  atomic_store_explicit(&c->bytes_peak, clamp_sum(bytes), memory_order_relaxed);
  atomic_store_explicit(&c->count_peak, clamp_sum(count), memory_order_relaxed);
  for (unsigned i = ADR__LIVE_STRIPES; i-- > 0;)
    if (used & (1u << i)) adr__spin_unlock(&c->stripes[i].lock);
  pthread_mutex_unlock(&c->lock);
}
