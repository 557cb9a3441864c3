/* SPDX-License-Identifier: Apache-2.0
 *
 * The per-device table of live allocations (address -> size, and the
 * allocation handler each came from), which lets adr_free refuse unknown
 * pointers, double frees and wrong sizes before anything reaches a handler,
 * and return every allocation to the handler that made it.
 *
 * Concurrency: the table is split into shards, each an open-addressing
 * hash table (linear probing, backward-shift deletion, so no tombstones
 * accumulate) under its own spin lock (internal.h: the sections are a few
 * probes long), apart from the others' (ADR__APART). An address's shard is found
 * in a directory of 2 MiB regions. A pool's new chunk is assigned to the
 * shard of the arena that owns it (adr__alloc_table_assign: a chunk holds
 * no recorded allocation then, so the shard of its addresses may change;
 * a region a chunk starts or ends in is split at that page), and a pool
 * hands each thread blocks from chunks of the thread's own arena, so
 * threads allocating and freeing on one device mostly write shards of
 * their own. A region no chunk was assigned to goes to the shard of the
 * first thread that records an allocation in it (its ordinal modulo the
 * shard count). With shards picked by address hash two threads wrote the
 * same shards' lines all the time (each free and allocation a cache miss,
 * 3-5x slower per operation than one thread); regions of 64 KiB made the
 * directory itself miss the cache on large working sets (a 2.5 GB one:
 * 40k entries), 2 MiB ones keep it to a few KiB. A directory neighbourhood
 * that is full sends its regions to the shard of their address hash.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define SHARDS 64
#define REGION_SHIFT 21 /* 2 MiB */
#define DIR_BITS 16
#define DIR_SLOTS ((size_t)1 << DIR_BITS) /* 512 KiB, touched as used: 128 GiB of regions */
#define DIR_PROBES 32

struct entry {
  uintptr_t key; /* 0 = empty */
  size_t size;
  const void* data;
  void* cookie;
};

/* An interval index (design at "interval index" below): the live ranges
 * sorted by start in blocks of at most BLOCK entries, with each block's
 * first start in a sorted array on top. */
#define BLOCK 32

struct block {
  uint32_t count;
  struct adr__range e[BLOCK];
};

struct range_index {
  /* The index's lock: a shard's index is guarded by the shard's spin lock,
   * so that adr_alloc and adr_free change a shard's hash and its index
   * under one lock (insert_indexed, remove_indexed); the spanning index
   * has a lock of its own (`own`). */
  struct adr__spin* lock;
  /* Bumped by every insert and remove (under the lock), so that a thread's
   * cached answer stays valid exactly while the index has not changed.
   * Starts at a value no other index of the process started at, so an
   * answer cached for a destroyed table is never taken for a new one's. */
  _Atomic uint64_t version;
  struct block** blocks; /* sorted; none empty */
  uintptr_t* mins;       /* mins[i] == blocks[i]->e[0].start */
  size_t nblocks, cap;
  size_t count;
  struct block* spare; /* the last block that emptied, kept for the next split or insert */
  _Alignas(ADR__APART) struct adr__spin own; /* the spanning index's lock */
};

struct shard {
  _Alignas(ADR__APART) struct adr__spin lock;
  struct entry* slots;
  size_t cap; /* power of two */
  size_t count;
  /* Totals of the allocations recorded with insert_counted: the device's
   * allocated_bytes/count totals, kept here under the lock the insert
   * takes anyway (two atomic additions fewer per adr_alloc). */
  uint64_t bytes_total, count_total;
  /* The live figures' share of this shard ("live figures" below): bytes
   * and count of the counted allocations recorded here, written under the
   * lock, read by statistics without it; and how far they may grow before
   * the peaks must be looked at. */
  _Atomic int64_t live_bytes, live_count;
  int64_t bytes_budget, count_budget;
  /* The ranges of the live allocations all of whose addresses this shard
   * holds, under `lock` too. */
  struct range_index ranges;
};

struct adr__alloc_table {
  struct shard shards[SHARDS];
  /* Region directory (entry layout at entry_make), 0 = empty. An entry is
   * claimed by a compare-and-swap from 0 (so a region has at most one) and
   * never removed; the shard of an address in it changes only while the
   * address's chunk holds no recorded allocation (adr__alloc_table_assign). */
  _Atomic uint64_t* dir;
  /* The ranges of live allocations whose addresses are not all in one
   * shard: across a chunk boundary, or in a region with no directory
   * entry (foreign memory, a full neighbourhood). */
  struct range_index spanning;
  /* The index is kept up to date by alloc.c (1) or not yet (0): it goes
   * live when the first look-up starts building it from the hash
   * (ranges_build), and look-ups trust it only once that build has
   * finished (ranges_built), so a look-up racing the build waits for it
   * instead of reading a partial index. */
  _Atomic int ranges_live;
  _Atomic int ranges_built;
  pthread_mutex_t build_lock;
  /* Live figures: bit i of `used` is set once shard i counted an
   * allocation; live_lock orders the slow paths and peak resets, which
   * write the peaks with every used shard's lock held. */
  _Alignas(ADR__APART) _Atomic uint64_t used;
  pthread_mutex_t live_lock;
  _Atomic uint64_t bytes_peak, count_peak;
  _Atomic uint64_t slow_paths; /* live_add_slow calls (tests) */
};

static void range_index_init(struct range_index* x, struct adr__spin* lock);
static void range_index_destroy(struct range_index* x);

void adr__spin_lock_slow(struct adr__spin* s) {
  for (;;) {
    for (int i = 0; i < 64; i++) {
      if (adr__spin_trylock(s)) return;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    sched_yield();
  }
}

static inline uint64_t mix(uintptr_t p) {
  uint64_t x = (uint64_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

struct adr__alloc_table* adr__alloc_table_create(void) {
  size_t size = (sizeof(struct adr__alloc_table) + ADR__APART - 1) & ~(size_t)(ADR__APART - 1);
  struct adr__alloc_table* t = aligned_alloc(ADR__APART, size);
  if (t == NULL) return NULL;
  memset(t, 0, size);
  pthread_mutex_init(&t->build_lock, NULL);
  pthread_mutex_init(&t->live_lock, NULL);
  t->dir = calloc(DIR_SLOTS, sizeof(*t->dir));
  if (t->dir == NULL) {
    pthread_mutex_destroy(&t->build_lock);
    pthread_mutex_destroy(&t->live_lock);
    free(t);
    return NULL;
  }
  for (int i = 0; i < SHARDS; i++) range_index_init(&t->shards[i].ranges, &t->shards[i].lock);
  range_index_init(&t->spanning, NULL);
  return t;
}

void adr__alloc_table_destroy(struct adr__alloc_table* t) {
  if (t == NULL) return;
  for (int i = 0; i < SHARDS; i++) {
    free(t->shards[i].slots);
    range_index_destroy(&t->shards[i].ranges);
  }
  range_index_destroy(&t->spanning);
  free((void*)t->dir);
  pthread_mutex_destroy(&t->build_lock);
  pthread_mutex_destroy(&t->live_lock);
  free(t);
}

/* Directory entries: bits 21-63 the region + 1, bits 12-20 a split page
 * (0: none), bits 6-11 the shard of the region's addresses below the split
 * page, bits 0-5 the shard of those at or above it. A split lets a region
 * that a chunk starts or ends in send the chunk's part to the chunk's
 * shard and the rest where it went before (chunks are page-aligned; a
 * region with more than one boundary keeps its entry). */
#define ENTRY_TAG_MASK (~(((uint64_t)1 << 21) - 1))
#define REGION_PAGES (1u << (REGION_SHIFT - 12))
_Static_assert(SHARDS <= 64 && REGION_PAGES <= 512, "directory entry fields");

static inline uint64_t entry_tag(uintptr_t region) {
  return ((uint64_t)region + 1) << 21;
}
static inline uint64_t entry_make(uint64_t tag, unsigned split, uint64_t below, uint64_t above) {
  return tag | (uint64_t)split << 12 | below << 6 | above;
}
static inline unsigned entry_split(uint64_t v) {
  return (unsigned)(v >> 12) & 511;
}
static inline unsigned entry_below(uint64_t v) {
  return (unsigned)(v >> 6) & 63;
}
static inline unsigned entry_above(uint64_t v) {
  return (unsigned)v & 63;
}
static inline unsigned entry_shard(uint64_t v, uintptr_t key) {
  unsigned page = (unsigned)(key >> 12) & (REGION_PAGES - 1);
  return page < entry_split(v) ? entry_below(v) : entry_above(v);
}

/* A region's first directory slot (Fibonacci hashing: a multiply). */
static inline size_t dir_home(uintptr_t region) {
  return (size_t)(((uint64_t)region * 0x9E3779B97F4A7C15ull) >> (64 - DIR_BITS));
}

/* The directory slot of `region`, with its entry in *out. When the region
 * has none: with `claim` != 0, claims the first free slot for it with that
 * entry (a compare-and-swap, so a region never gets two), else NULL. NULL
 * too when its neighbourhood is full (entries never leave, so a region
 * not found there never will be). */
static __attribute__((noinline)) _Atomic uint64_t* dir_find(struct adr__alloc_table* t,
                                                            uintptr_t region, uint64_t claim,
                                                            uint64_t* out) {
  uint64_t tag = entry_tag(region);
  size_t at = dir_home(region);
  for (unsigned probe = 0; probe < DIR_PROBES; probe++, at = (at + 1) & (DIR_SLOTS - 1)) {
    uint64_t v = atomic_load_explicit(&t->dir[at], memory_order_acquire);
    if (v == 0) {
      if (claim == 0) return NULL;
      if (atomic_compare_exchange_strong_explicit(&t->dir[at], &v, claim, memory_order_acq_rel,
                                                  memory_order_acquire)) {
        *out = claim;
        return &t->dir[at];
      }
      /* another thread took the slot: v is its entry, maybe this region's */
    }
    if ((v & ENTRY_TAG_MASK) == tag) {
      *out = v;
      return &t->dir[at];
    }
  }
  return NULL;
}

/* The shard of key: its region's, by the directory; `claim`: a region not
 * yet there is claimed for the calling thread's shard. A region the
 * directory has no room for goes to the shard of the address hash. */
static inline __attribute__((always_inline)) struct shard* shard_of(struct adr__alloc_table* t,
                                                                    uintptr_t key, bool claim,
                                                                    uint64_t* hash) {
  *hash = mix(key);
  uintptr_t region = key >> REGION_SHIFT;
  /* Most regions sit in their first slot: one load. */
  uint64_t v = atomic_load_explicit(&t->dir[dir_home(region)], memory_order_acquire);
  if (__builtin_expect((v & ENTRY_TAG_MASK) == entry_tag(region), 1))
    return &t->shards[entry_shard(v, key)];
  uint64_t mine = claim ? entry_make(entry_tag(region), 0, 0, adr__thread_ordinal() % SHARDS) : 0;
  if (dir_find(t, region, mine, &v) != NULL) return &t->shards[entry_shard(v, key)];
  return &t->shards[(*hash >> 58) % SHARDS]; /* top bits: slots use the low ones */
}

/* Sets the entry of `region` to what make() computes from the present one
 * (retried while another thread changes it; make returns 0 to leave it).
 * `fresh`: the entry to claim with when the region has none. */
static void dir_update(struct adr__alloc_table* t, uintptr_t region, uint64_t fresh,
                       uint64_t (*make)(uint64_t v, uint64_t arg), uint64_t arg) {
  uint64_t v;
  _Atomic uint64_t* slot = dir_find(t, region, fresh, &v);
  if (slot == NULL || v == fresh) return;
  for (;;) {
    uint64_t n = make(v, arg);
    if (n == 0 || n == v) return;
    if (atomic_compare_exchange_weak_explicit(slot, &v, n, memory_order_acq_rel,
                                              memory_order_acquire))
      return;
  }
}

/* arg: the owner shard. */
static uint64_t make_whole(uint64_t v, uint64_t arg) {
  return entry_make(v & ENTRY_TAG_MASK, 0, 0, arg);
}
/* A chunk starts in the region at split page arg >> 8 (owner shard arg &
 * 0xff): the pages below keep their shard if they have one. */
static uint64_t make_start(uint64_t v, uint64_t arg) {
  unsigned split = (unsigned)(arg >> 8), sv = entry_split(v);
  if (sv != 0 && sv < split && entry_below(v) != entry_above(v)) return 0; /* two below */
  unsigned below = sv >= split ? entry_below(v) : entry_above(v);
  return entry_make(v & ENTRY_TAG_MASK, split, below, arg & 0xff);
}
/* A chunk ends in the region at split page arg >> 8: the pages from there
 * on keep their shard if they have one. */
static uint64_t make_end(uint64_t v, uint64_t arg) {
  unsigned split = (unsigned)(arg >> 8), sv = entry_split(v);
  if (sv > split && entry_below(v) != entry_above(v)) return 0; /* two above */
  unsigned above = sv > split ? entry_below(v) : entry_above(v);
  return entry_make(v & ENTRY_TAG_MASK, split, arg & 0xff, above);
}

unsigned adr__alloc_table_shard(struct adr__alloc_table* t, const void* ptr) {
  uint64_t h;
  return (unsigned)(shard_of(t, (uintptr_t)ptr, false, &h) - t->shards);
}

void adr__alloc_table_assign(struct adr__alloc_table* t, void* base, size_t size, unsigned owner) {
  uintptr_t lo = (uintptr_t)base, hi = lo + size;
  const uintptr_t region_size = (uintptr_t)1 << REGION_SHIFT;
  if (hi <= lo || ((lo | hi) & 4095) != 0) return;
  uint64_t shard = owner % SHARDS;
  uintptr_t first = (lo + region_size - 1) >> REGION_SHIFT; /* first region wholly inside */
  uintptr_t end = hi >> REGION_SHIFT;                       /* past the last one */
  if (first > end) return; /* the chunk starts and ends inside one region: leave it */
  for (uintptr_t r = first; r < end; r++)
    dir_update(t, r, entry_make(entry_tag(r), 0, 0, shard), make_whole, shard);
  unsigned start_page = (unsigned)(lo >> 12) & (REGION_PAGES - 1);
  if (start_page != 0) {
    uintptr_t r = lo >> REGION_SHIFT;
    dir_update(t, r, entry_make(entry_tag(r), start_page, shard, shard), make_start,
               (uint64_t)start_page << 8 | shard);
  }
  unsigned end_page = (unsigned)(hi >> 12) & (REGION_PAGES - 1);
  if (end_page != 0) {
    uintptr_t r = hi >> REGION_SHIFT;
    dir_update(t, r, entry_make(entry_tag(r), end_page, shard, shard), make_end,
               (uint64_t)end_page << 8 | shard);
  }
}

/* What a shard's owner writes on every insert or remove (its hash slots,
 * its index's blocks and top arrays) is kept apart from what other
 * threads write (ADR__APART), not wherever malloc puts it: two shards'
 * small slot arrays from calloc could share a line, or neighbour one. */
static void* apart_alloc(size_t bytes) {
  return aligned_alloc(ADR__APART, (bytes + ADR__APART - 1) & ~(size_t)(ADR__APART - 1));
}

static int rehash(struct shard* s, size_t cap) {
  struct entry* slots = apart_alloc(cap * sizeof(*slots));
  if (slots == NULL) return ENOMEM;
  memset(slots, 0, cap * sizeof(*slots));
  for (size_t i = 0; i < s->cap; i++) {
    if (s->slots[i].key == 0) continue;
    size_t j = mix(s->slots[i].key) & (cap - 1);
    while (slots[j].key != 0) j = (j + 1) & (cap - 1);
    slots[j] = s->slots[i];
  }
  free(s->slots);
  s->slots = slots;
  s->cap = cap;
  return 0;
}

/* ---- live figures ----------------------------------------------------------
 *
 * The device's current and peak allocated bytes and count (adr_memory_stats)
 * are kept in the shards, under the lock an insert or remove takes anyway: an
 * adr_alloc + adr_free pair does no other atomic read-modify-write for them
 * (a stripe of counters per thread with a spin lock of its own cost two more
 * per pair, a quarter of a tight pair's time on this project's machine). An
 * allocation is counted in the shard it is recorded in and uncounted there
 * when it is freed (the shard of an address does not change while an
 * allocation holds it), so threads that allocate and free in shards of their
 * own write no line in common, and a shard's share is never below zero.
 *
 * The peaks stay exact: every shard has a budget, the budgets add up to the
 * peaks, and a shard's share never exceeds its budget, so the sum never
 * exceeds the peak while every addition fits its shard's budget (the hot
 * path: two additions and a comparison). An addition that does not fit is
 * left out of the insert and made by live_add_slow: under live_lock, with
 * every used shard's lock held, it moves spare budget (a shard's budget above
 * its share, which frees leave there) to its own shard and only when none is
 * left raises the peaks, by exactly what the sum then exceeds them by; all
 * shards are held, so the sum is the sum at one instant. A thread whose frees
 * balance its allocations never leaves its shard; one that allocates what
 * another frees takes that spare in bulk now and then. While one shard alone
 * has ever counted (one thread, or threads sharing an arena), no other shard
 * holds spare, and the insert raises the peaks itself under that shard's lock
 * (every other writer of the peaks holds it too): a single-threaded program's
 * ramp-up, every allocation a new peak, costs a few instructions more. */

enum { COUNT_TOTALS = 1, COUNT_LIVE = 2 };

static int64_t min64(int64_t a, int64_t b) {
  return a < b ? a : b;
}

/* Moves spare budget (spare > 0) of shard `from` to cover *need: what is
 * needed, and more (half of what is left over) while the donor keeps at
 * least as much spare as was needed. The more: a thread that ramps up
 * where another freed comes here once a batch, not once an allocation.
 * The limit: two threads taking turns at one working set would otherwise
 * hand the spare back and forth on every allocation (with the budgets
 * adding up to exactly what both hold at once, "half of the rest" always
 * left the donor short for its own next allocation). */
static void move_budget(int64_t spare, int64_t* need, int64_t* from, int64_t* to) {
  if (*need <= 0 || spare <= 0) return;
  int64_t m = min64(spare, *need);
  int64_t extra = min64((spare - m) / 2, spare - m - *need);
  if (extra > 0) m += extra;
  *from -= m;
  *to += m;
  *need -= m;
}

/* Raises a budget and its peak by need, if positive. */
static void raise_by(int64_t need, int64_t* budget, _Atomic uint64_t* peak) {
  if (need <= 0) return;
  *budget += need;
  atomic_store_explicit(peak, atomic_load_explicit(peak, memory_order_relaxed) + (uint64_t)need,
                        memory_order_relaxed);
}

/* Raises s's budgets and the peaks by need_b / need_n (if positive) and
 * stores b / n as s's share. Under s's lock, with every used shard's lock
 * held too or s the only shard that ever counted. */
static void raise_and_store(struct adr__alloc_table* t, struct shard* s, int64_t b, int64_t n,
                            int64_t need_b, int64_t need_n) {
  raise_by(need_b, &s->bytes_budget, &t->bytes_peak);
  raise_by(need_n, &s->count_budget, &t->count_peak);
  atomic_store_explicit(&s->live_bytes, b, memory_order_relaxed);
  atomic_store_explicit(&s->live_count, n, memory_order_relaxed);
}

/* Counts one allocation of `size` in s if it fits s's budget, or raises the
 * peaks there when s is the only shard that ever counted (s's lock held);
 * false: live_add_slow must count it. */
static inline bool live_add_locked(struct adr__alloc_table* t, struct shard* s, size_t size) {
  uint64_t bit = (uint64_t)1 << (s - t->shards);
  uint64_t used = atomic_load_explicit(&t->used, memory_order_relaxed);
  if (__builtin_expect(!(used & bit), 0))
    used = atomic_fetch_or_explicit(&t->used, bit, memory_order_relaxed) | bit;
  int64_t b = atomic_load_explicit(&s->live_bytes, memory_order_relaxed) + (int64_t)size;
  int64_t n = atomic_load_explicit(&s->live_count, memory_order_relaxed) + 1;
  if (__builtin_expect(b <= s->bytes_budget && n <= s->count_budget, 1)) {
    atomic_store_explicit(&s->live_bytes, b, memory_order_relaxed);
    atomic_store_explicit(&s->live_count, n, memory_order_relaxed);
    return true;
  }
  if (used != bit) return false;
  raise_and_store(t, s, b, n, b - s->bytes_budget, n - s->count_budget);
  return true;
}

static __attribute__((noinline)) void live_add_slow(struct adr__alloc_table* t, struct shard* own,
                                                    size_t size) {
  pthread_mutex_lock(&t->live_lock);
  atomic_fetch_add_explicit(&t->slow_paths, 1, memory_order_relaxed);
  uint64_t used = atomic_load_explicit(&t->used, memory_order_relaxed);
  /* Every used shard is held from here to the end (live_lock orders the
   * slow paths; an insert or remove holds one shard), so the sum the peak
   * may be raised to is the sum at one instant. */
  for (int i = 0; i < SHARDS; i++)
    if (used & ((uint64_t)1 << i)) adr__spin_lock(&t->shards[i].lock);
  int64_t b = atomic_load_explicit(&own->live_bytes, memory_order_relaxed) + (int64_t)size;
  int64_t n = atomic_load_explicit(&own->live_count, memory_order_relaxed) + 1;
  int64_t need_b = b - own->bytes_budget, need_n = n - own->count_budget;
  for (int i = 0; i < SHARDS && (need_b > 0 || need_n > 0); i++) {
    struct shard* from = &t->shards[i];
    if (from == own || !(used & ((uint64_t)1 << i))) continue;
    move_budget(from->bytes_budget - atomic_load_explicit(&from->live_bytes, memory_order_relaxed),
                &need_b, &from->bytes_budget, &own->bytes_budget);
    move_budget(from->count_budget - atomic_load_explicit(&from->live_count, memory_order_relaxed),
                &need_n, &from->count_budget, &own->count_budget);
  }
  /* No spare left anywhere: every other shard is at its budget, so the sum
   * after this addition exceeds the peaks by exactly the need. */
  raise_and_store(t, own, b, n, need_b, need_n);
  for (int i = SHARDS; i-- > 0;)
    if (used & ((uint64_t)1 << i)) adr__spin_unlock(&t->shards[i].lock);
  pthread_mutex_unlock(&t->live_lock);
}

static uint64_t clamp_sum(int64_t v) {
  return v < 0 ? 0 : (uint64_t)v;
}

void adr__alloc_table_live(struct adr__alloc_table* t, struct adr__live_figures* out) {
  int64_t bytes = 0, count = 0;
  for (int i = 0; i < SHARDS; i++) {
    bytes += atomic_load_explicit(&t->shards[i].live_bytes, memory_order_relaxed);
    count += atomic_load_explicit(&t->shards[i].live_count, memory_order_relaxed);
  }
  /* Read without locks while other threads allocate and free: the sum is
   * the sum at no one instant, but never below zero, and a peak is never
   * reported below its current value. */
  out->bytes = clamp_sum(bytes);
  out->count = clamp_sum(count);
  out->bytes_peak = atomic_load_explicit(&t->bytes_peak, memory_order_relaxed);
  out->count_peak = atomic_load_explicit(&t->count_peak, memory_order_relaxed);
  if (out->bytes_peak < out->bytes) out->bytes_peak = out->bytes;
  if (out->count_peak < out->count) out->count_peak = out->count;
}

uint64_t adr__alloc_table_live_slow_paths(struct adr__alloc_table* t) {
  return atomic_load_explicit(&t->slow_paths, memory_order_relaxed);
}

void adr__alloc_table_live_reset_peaks(struct adr__alloc_table* t) {
  pthread_mutex_lock(&t->live_lock);
  uint64_t used = atomic_load_explicit(&t->used, memory_order_relaxed);
  int64_t bytes = 0, count = 0;
  for (int i = 0; i < SHARDS; i++)
    if (used & ((uint64_t)1 << i)) adr__spin_lock(&t->shards[i].lock);
  for (int i = 0; i < SHARDS; i++) {
    struct shard* s = &t->shards[i];
    s->bytes_budget = atomic_load_explicit(&s->live_bytes, memory_order_relaxed);
    s->count_budget = atomic_load_explicit(&s->live_count, memory_order_relaxed);
    bytes += s->bytes_budget;
    count += s->count_budget;
  }
  atomic_store_explicit(&t->bytes_peak, clamp_sum(bytes), memory_order_relaxed);
  atomic_store_explicit(&t->count_peak, clamp_sum(count), memory_order_relaxed);
  for (int i = SHARDS; i-- > 0;)
    if (used & ((uint64_t)1 << i)) adr__spin_unlock(&t->shards[i].lock);
  pthread_mutex_unlock(&t->live_lock);
}

/* ---- insert and remove --------------------------------------------------- */

int adr__alloc_table_insert(struct adr__alloc_table* t, void* ptr, size_t size) {
  return adr__alloc_table_insert_data(t, ptr, size, NULL, NULL);
}

static struct range_index* home_in_shard(struct adr__alloc_table* t, struct shard* s,
                                         uintptr_t start, size_t size);
static int insert_in_shard(struct adr__alloc_table* t, struct range_index* x, uintptr_t key,
                           size_t size, const void* site);
static bool remove_from_index(struct adr__alloc_table* t, struct shard* s, uintptr_t key,
                              const void** site);

/* Whether an insert or remove under s's lock updates the interval index
 * too (ranges: RANGES_* below): always for the validation layer, else once
 * the index is live. Read under the shard's lock, which a build holds
 * while it reads the shard (ranges_build). */
enum { RANGES_NEVER = 0, RANGES_IF_LIVE = 1, RANGES_ALWAYS = 2 };
static inline bool ranges_now(struct adr__alloc_table* t, int ranges) {
  return ranges == RANGES_ALWAYS ||
         (ranges == RANGES_IF_LIVE && atomic_load_explicit(&t->ranges_live, memory_order_acquire));
}

static int insert_locked_data(struct adr__alloc_table* t, void* ptr, size_t size, const void* data,
                              void* cookie, unsigned count, int ranges, const void* site,
                              bool* out_ranged) {
  uint64_t h;
  uintptr_t key = (uintptr_t)ptr;
  struct shard* s = shard_of(t, key, true, &h);
  adr__spin_lock(&s->lock);
  if ((s->count + 1) * 4 > s->cap * 3) {
    if (rehash(s, s->cap ? s->cap * 2 : 16) != 0) {
      adr__spin_unlock(&s->lock);
      return ENOMEM;
    }
  }
  /* The index first: when it cannot grow, nothing was recorded. */
  bool ranged = ranges_now(t, ranges);
  if (ranged && insert_in_shard(t, home_in_shard(t, s, key, size), key, size, site) != 0) {
    adr__spin_unlock(&s->lock);
    return ENOMEM;
  }
  size_t i = h & (s->cap - 1);
  while (s->slots[i].key != 0 && s->slots[i].key != key) i = (i + 1) & (s->cap - 1);
  if (s->slots[i].key == 0) s->count++;
  s->slots[i].key = key;
  s->slots[i].size = size;
  s->slots[i].data = data;
  s->slots[i].cookie = cookie;
  if (count & COUNT_TOTALS) {
    s->bytes_total += size;
    s->count_total++;
  }
  bool counted = !(count & COUNT_LIVE) || live_add_locked(t, s, size);
  adr__spin_unlock(&s->lock);
  if (!counted) live_add_slow(t, s, size);
  if (out_ranged != NULL) *out_ranged = ranged;
  return 0;
}

int adr__alloc_table_insert_data(struct adr__alloc_table* t, void* ptr, size_t size,
                                 const void* data, void* cookie) {
  return insert_locked_data(t, ptr, size, data, cookie, 0, RANGES_NEVER, NULL, NULL);
}

int adr__alloc_table_insert_counted(struct adr__alloc_table* t, void* ptr, size_t size,
                                    const void* data, void* cookie) {
  return insert_locked_data(t, ptr, size, data, cookie, COUNT_TOTALS | COUNT_LIVE, RANGES_NEVER,
                            NULL, NULL);
}

int adr__alloc_table_insert_indexed(struct adr__alloc_table* t, void* ptr, size_t size,
                                    const void* data, void* cookie, const void* site,
                                    bool validating) {
  return insert_locked_data(t, ptr, size, data, cookie, COUNT_TOTALS | COUNT_LIVE,
                            validating ? RANGES_ALWAYS : RANGES_IF_LIVE, site, NULL);
}

int adr__alloc_table_insert_live(struct adr__alloc_table* t, void* ptr, size_t size,
                                 const void* data, void* cookie, const void* site,
                                 bool validating) {
  return insert_locked_data(t, ptr, size, data, cookie, COUNT_LIVE,
                            validating ? RANGES_ALWAYS : RANGES_IF_LIVE, site, NULL);
}

void adr__alloc_table_totals(struct adr__alloc_table* t, uint64_t* out_bytes, uint64_t* out_count) {
  uint64_t bytes = 0, count = 0;
  for (int i = 0; i < SHARDS; i++) {
    adr__spin_lock(&t->shards[i].lock);
    bytes += t->shards[i].bytes_total;
    count += t->shards[i].count_total;
    adr__spin_unlock(&t->shards[i].lock);
  }
  *out_bytes = bytes;
  *out_count = count;
}

int adr__alloc_table_remove(struct adr__alloc_table* t, void* ptr, size_t size, size_t* out_size) {
  return adr__alloc_table_remove_data(t, ptr, size, out_size, NULL, NULL);
}

static int remove_locked_data(struct adr__alloc_table* t, void* ptr, size_t size, size_t* out_size,
                              const void** out_data, void** out_cookie, bool live, int ranges,
                              const void** out_site, bool* out_ranged) {
  uint64_t h;
  uintptr_t key = (uintptr_t)ptr;
  struct shard* s = shard_of(t, key, false, &h);
  int st = ENOENT;
  adr__spin_lock(&s->lock);
  if (s->cap != 0) {
    size_t mask = s->cap - 1;
    size_t i = h & mask;
    while (s->slots[i].key != 0 && s->slots[i].key != key) i = (i + 1) & mask;
    if (s->slots[i].key == key) {
      if (out_size) *out_size = s->slots[i].size;
      if (s->slots[i].size != size) {
        st = ERANGE;
      } else {
        if (out_data) *out_data = s->slots[i].data;
        if (out_cookie) *out_cookie = s->slots[i].cookie;
        /* Backward-shift deletion keeps every probe chain unbroken. */
        size_t hole = i;
        for (size_t j = (i + 1) & mask; s->slots[j].key != 0; j = (j + 1) & mask) {
          size_t home = mix(s->slots[j].key) & mask;
          if (((j - home) & mask) >= ((j - hole) & mask)) {
            s->slots[hole] = s->slots[j];
            hole = j;
          }
        }
        s->slots[hole].key = 0;
        s->count--;
        if (live) {
          /* Its budget stays with the shard. */
          atomic_store_explicit(
              &s->live_bytes,
              atomic_load_explicit(&s->live_bytes, memory_order_relaxed) - (int64_t)size,
              memory_order_relaxed);
          atomic_store_explicit(&s->live_count,
                                atomic_load_explicit(&s->live_count, memory_order_relaxed) - 1,
                                memory_order_relaxed);
        }
        if (ranges_now(t, ranges)) {
          if (out_ranged != NULL) *out_ranged = true;
          (void)remove_from_index(t, s, key, out_site);
        }
        st = 0;
      }
    }
  }
  adr__spin_unlock(&s->lock);
  return st;
}

int adr__alloc_table_remove_data(struct adr__alloc_table* t, void* ptr, size_t size,
                                 size_t* out_size, const void** out_data, void** out_cookie) {
  return remove_locked_data(t, ptr, size, out_size, out_data, out_cookie, false, RANGES_NEVER, NULL,
                            NULL);
}

int adr__alloc_table_remove_counted(struct adr__alloc_table* t, void* ptr, size_t size,
                                    size_t* out_size, const void** out_data, void** out_cookie) {
  return remove_locked_data(t, ptr, size, out_size, out_data, out_cookie, true, RANGES_NEVER, NULL,
                            NULL);
}

int adr__alloc_table_remove_indexed(struct adr__alloc_table* t, void* ptr, size_t size,
                                    size_t* out_size, const void** out_data, void** out_cookie,
                                    bool validating, const void** out_site, bool* out_ranged) {
  *out_site = NULL;
  if (out_ranged != NULL) *out_ranged = false;
  return remove_locked_data(t, ptr, size, out_size, out_data, out_cookie, true,
                            validating ? RANGES_ALWAYS : RANGES_IF_LIVE, out_site, out_ranged);
}

size_t adr__alloc_table_count(struct adr__alloc_table* t) {
  size_t n = 0;
  for (int i = 0; i < SHARDS; i++) {
    adr__spin_lock(&t->shards[i].lock);
    n += t->shards[i].count;
    adr__spin_unlock(&t->shards[i].lock);
  }
  return n;
}

/* ---- interval index ------------------------------------------------------
 *
 * "Which live allocation contains [p, p+n)?" is answered by ordered indexes
 * beside the hash: the live ranges sorted by start address in blocks of at
 * most BLOCK entries, with a sorted array of each block's first start on
 * top (a two-level B+-tree). A lookup is two binary searches over
 * contiguous memory, O(log n) with a handful of cache misses even at 100k
 * live allocations (a pointer-linked balanced tree takes ~20 dependent
 * misses there, which made adr_alloc several times slower); an insert or
 * remove moves at most one block's entries, plus the top array when a block
 * splits or empties.
 *
 * Sharded like the hash: each shard has an index of the allocations all of
 * whose addresses the directory sends to that shard, which is nearly every
 * allocation (one lies in one pool block of one chunk, and a chunk's
 * addresses go to its arena's shard), and the table has one more,
 * `spanning`, for the rest: an allocation across chunks of two arenas, one
 * larger than SPAN_REGIONS regions, or one over a region the directory has
 * no room for. A look-up of p searches the index of p's shard, then
 * `spanning`. Threads allocating on one device so write indexes of their
 * own: with one index per device, an adr_alloc + adr_free pair on two
 * threads took 25 times as long as on one once the index was live.
 *
 * Where an allocation's range goes is decided once, when it is inserted
 * (home_index): its regions are claimed in the directory then (as the
 * hash claims the region of its start), and the shard of an address that
 * a live allocation holds never changes afterwards (the directory changes
 * a shard only for a chunk that holds no allocation, adr__alloc_table_assign),
 * so a look-up inside it searches its index, an insert of it again (the
 * lazy build and alloc.c may both add one) finds it there, and a remove
 * finds it in its start's shard or in `spanning`.
 *
 * One spin lock per index (glibc's reader-writer lock costs several times
 * a mutex uncontended, and the critical sections are short), and each
 * thread's last answers are cached while the indexes they came from are
 * unchanged (a version each), so repeated copies on one buffer take no
 * lock at all. The core maintains the indexes only where a copy is
 * checked against them (alloc.c decides). */

#define SPAN_REGIONS 64 /* 128 MiB: a larger allocation goes to `spanning` without a walk */

static _Atomic uint64_t version_seed;

static void range_index_init(struct range_index* x, struct adr__spin* lock) {
  x->lock = lock != NULL ? lock : &x->own;
  /* 2^32 changes of one index before its versions reach the next one's */
  uint64_t seed = atomic_fetch_add_explicit(&version_seed, 1, memory_order_relaxed) + 1;
  atomic_store_explicit(&x->version, seed << 32, memory_order_relaxed);
}

static void range_index_destroy(struct range_index* x) {
  for (size_t i = 0; i < x->nblocks; i++) free(x->blocks[i]);
  free(x->blocks);
  free(x->mins);
  free(x->spare);
}

/* Writers hold the lock, so a store (no read-modify-write) is enough. */
static inline void bump(struct range_index* x) {
  uint64_t v = atomic_load_explicit(&x->version, memory_order_relaxed);
  atomic_store_explicit(&x->version, v + 1, memory_order_release);
}

/* The directory entry of region in *v; false when it has none. */
static inline bool dir_entry(struct adr__alloc_table* t, uintptr_t region, uint64_t* v) {
  *v = atomic_load_explicit(&t->dir[dir_home(region)], memory_order_acquire);
  if (__builtin_expect((*v & ENTRY_TAG_MASK) == entry_tag(region), 1)) return true;
  return dir_find(t, region, 0, v) != NULL;
}

/* The directory entry of region in *v, claimed for the calling thread's
 * shard when it has none; false when its neighbourhood is full. */
static inline bool dir_entry_claim(struct adr__alloc_table* t, uintptr_t region, uint64_t* v) {
  if (dir_entry(t, region, v)) return true;
  uint64_t mine = entry_make(entry_tag(region), 0, 0, adr__thread_ordinal() % SHARDS);
  return dir_find(t, region, mine, v) != NULL;
}

/* The index a look-up of key searches first: its shard's; NULL when its
 * region has no directory entry (then only `spanning` can hold it). */
static inline struct range_index* index_of(struct adr__alloc_table* t, uintptr_t key) {
  uint64_t v;
  return dir_entry(t, key >> REGION_SHIFT, &v) ? &t->shards[entry_shard(v, key)].ranges : NULL;
}

/* The index an allocation of [start, start + size) goes to: the shard's
 * that holds every address of it, or `spanning`. Claims the regions it
 * covers for the calling thread's shard where they have no entry (so that
 * no claim can change the answer while the allocation lives). */
static struct range_index* home_index(struct adr__alloc_table* t, uintptr_t start, size_t size) {
  uintptr_t last = start + (size ? size - 1 : 0);
  if (last < start) return &t->spanning;
  uintptr_t r = start >> REGION_SHIFT, last_r = last >> REGION_SHIFT;
  if (last_r - r >= SPAN_REGIONS) return &t->spanning;
  uint64_t v;
  if (!dir_entry_claim(t, r, &v)) return &t->spanning;
  unsigned s = entry_shard(v, start);
  /* A region's addresses go to at most two shards, split at one page:
   * the ends of the part an allocation covers tell whether it has both. */
  for (;;) {
    uintptr_t hi = r == last_r ? last : ((r + 1) << REGION_SHIFT) - 1;
    if (entry_shard(v, hi) != s) return &t->spanning;
    if (r == last_r) return &t->shards[s].ranges;
    r++;
    if (!dir_entry_claim(t, r, &v) || entry_shard(v, r << REGION_SHIFT) != s) return &t->spanning;
  }
}

/* Index of the last block whose first start is <= key; nblocks if none.
 * Branch-free (the compiler emits conditional moves): lookups of random
 * addresses would mispredict half of a branching search's steps. */
static size_t block_of(const struct range_index* x, uintptr_t key) {
  size_t n = x->nblocks;
  if (n == 0) return 0;
  const uintptr_t* base = x->mins;
  while (n > 1) {
    size_t half = n / 2;
    base = base[half] <= key ? base + half : base;
    n -= half;
  }
  return *base <= key ? (size_t)(base - x->mins) : x->nblocks;
}

/* Number of entries of b whose start is <= key. */
static uint32_t upper(const struct block* b, uintptr_t key) {
  uint32_t n = b->count;
  if (n == 0) return 0;
  const struct adr__range* base = b->e;
  while (n > 1) {
    uint32_t half = n / 2;
    base = base[half].start <= key ? base + half : base;
    n -= half;
  }
  return (uint32_t)(base - b->e) + (base->start <= key);
}

/* An index whose allocations come and go empties a block and needs one
 * again all the time: the last one that emptied is kept. */
static struct block* block_alloc(struct range_index* x) {
  struct block* b = x->spare;
  if (b == NULL) return apart_alloc(sizeof(struct block));
  x->spare = NULL;
  return b;
}

static void block_free(struct range_index* x, struct block* b) {
  if (x->spare == NULL) {
    x->spare = b;
    return;
  }
  free(b);
}

/* *array (count elements of size) moved to a new array of cap elements. */
static int array_grow(void** array, size_t count, size_t cap, size_t size) {
  void* grown = apart_alloc(cap * size);
  if (grown == NULL) return ENOMEM;
  if (count != 0) memcpy(grown, *array, count * size);
  free(*array);
  *array = grown;
  return 0;
}

/* Makes room for a block at position at. */
static int top_insert(struct range_index* x, size_t at, struct block* b) {
  if (x->nblocks == x->cap) {
    size_t cap = x->cap ? x->cap * 2 : 8;
    if (array_grow((void**)&x->blocks, x->nblocks, cap, sizeof(*x->blocks)) != 0 ||
        array_grow((void**)&x->mins, x->nblocks, cap, sizeof(*x->mins)) != 0)
      return ENOMEM;
    x->cap = cap;
  }
  memmove(&x->blocks[at + 1], &x->blocks[at], (x->nblocks - at) * sizeof(*x->blocks));
  memmove(&x->mins[at + 1], &x->mins[at], (x->nblocks - at) * sizeof(*x->mins));
  x->blocks[at] = b;
  x->mins[at] = b->e[0].start;
  x->nblocks++;
  return 0;
}

/* Adds or updates (an allocation added twice: interop.c's build and alloc.c
 * may both add one) the range at key, counts it and bumps the version. */
static int insert_locked(struct range_index* x, uintptr_t key, size_t size, const void* site) {
  if (x->nblocks != 0) {
    size_t k = block_of(x, key);
    if (k < x->nblocks) {
      struct block* kb = x->blocks[k];
      uint32_t at = upper(kb, key);
      if (at > 0 && kb->e[at - 1].start == key) {
        kb->e[at - 1].size = size;
        if (site != NULL) kb->e[at - 1].site = site;
        bump(x);
        return 0;
      }
    }
  }
  if (x->nblocks == 0) {
    struct block* b = block_alloc(x);
    if (b == NULL) return ENOMEM;
    b->count = 1;
    b->e[0] = (struct adr__range){key, size, site};
    if (top_insert(x, 0, b) != 0) {
      block_free(x, b);
      return ENOMEM;
    }
    x->count++;
    bump(x);
    return 0;
  }
  size_t i = block_of(x, key);
  if (i == x->nblocks) i = 0; /* before every range: the first block */
  struct block* b = x->blocks[i];
  if (b->count == BLOCK) {
    /* Split: the upper half moves to a new block right after. */
    struct block* nb = block_alloc(x);
    if (nb == NULL) return ENOMEM;
    nb->count = BLOCK / 2;
    memcpy(nb->e, &b->e[BLOCK / 2], (BLOCK / 2) * sizeof(b->e[0]));
    if (top_insert(x, i + 1, nb) != 0) {
      block_free(x, nb);
      return ENOMEM;
    }
    b->count = BLOCK / 2;
    if (key >= nb->e[0].start) {
      i++;
      b = nb;
    }
  }
  uint32_t at = upper(b, key);
  memmove(&b->e[at + 1], &b->e[at], (b->count - at) * sizeof(b->e[0]));
  b->e[at] = (struct adr__range){key, size, site};
  b->count++;
  x->mins[i] = b->e[0].start;
  x->count++;
  bump(x);
  return 0;
}

/* Removes the range starting at key; false if x has none. */
static inline __attribute__((always_inline)) bool remove_locked(struct range_index* x,
                                                                uintptr_t key, const void** site) {
  size_t i = block_of(x, key);
  if (i >= x->nblocks) return false;
  struct block* b = x->blocks[i];
  uint32_t at = upper(b, key);
  if (at == 0 || b->e[at - 1].start != key) return false;
  *site = b->e[at - 1].site;
  memmove(&b->e[at - 1], &b->e[at], (b->count - at) * sizeof(b->e[0]));
  b->count--;
  if (b->count == 0) {
    block_free(x, b);
    memmove(&x->blocks[i], &x->blocks[i + 1], (x->nblocks - i - 1) * sizeof(*x->blocks));
    memmove(&x->mins[i], &x->mins[i + 1], (x->nblocks - i - 1) * sizeof(*x->mins));
    x->nblocks--;
  } else {
    x->mins[i] = b->e[0].start;
  }
  x->count--;
  bump(x);
  return true;
}

int adr__alloc_table_ranges_insert(struct adr__alloc_table* t, void* ptr, size_t size,
                                   const void* site) {
  struct range_index* x = home_index(t, (uintptr_t)ptr, size);
  adr__spin_lock(x->lock);
  int st = insert_locked(x, (uintptr_t)ptr, size, site);
  adr__spin_unlock(x->lock);
  return st;
}

bool adr__alloc_table_ranges_live(struct adr__alloc_table* t) {
  return atomic_load_explicit(&t->ranges_live, memory_order_acquire) != 0;
}

/* Where an allocation recorded in shard s goes in the index, s's lock
 * held: s's own index, guarded by that lock, when home_index says so, else
 * the spanning index, whose lock the caller takes (a shard's lock, then
 * the spanning index's: nothing takes them in the other order). The home
 * of an address recorded in s is s's index or the spanning one (its
 * directory entry cannot move while s records it); were it another
 * shard's, the spanning index is still right: look-ups and removes try
 * it after the shard's. */
static struct range_index* home_in_shard(struct adr__alloc_table* t, struct shard* s,
                                         uintptr_t start, size_t size) {
  struct range_index* x = home_index(t, start, size);
  return x == &s->ranges ? x : &t->spanning;
}

/* Adds [key, key + size) to x, which is s's index (its lock is held) or the
 * spanning index (taken here). */
static int insert_in_shard(struct adr__alloc_table* t, struct range_index* x, uintptr_t key,
                           size_t size, const void* site) {
  if (x != &t->spanning) return insert_locked(x, key, size, site);
  adr__spin_lock(x->lock);
  int st = insert_locked(x, key, size, site);
  adr__spin_unlock(x->lock);
  return st;
}

/* Marks the indexes live, then adds what the hash holds, shard by shard,
 * under each shard's lock (which guards its index too). An allocation
 * recorded concurrently is either in its shard when the shard is read, or
 * its recorder (which reads the flag under the shard's lock,
 * insert_indexed) sees the flag and adds it itself; a free likewise. */
int adr__alloc_table_ranges_build(struct adr__alloc_table* t) {
  pthread_mutex_lock(&t->build_lock);
  if (atomic_load_explicit(&t->ranges_built, memory_order_relaxed) != 0) {
    pthread_mutex_unlock(&t->build_lock); /* complete already */
    return 0;
  }
  /* A failed (out of memory) earlier build left it live: copying again
   * adds what is missing (insert_locked updates what is there). */
  atomic_store_explicit(&t->ranges_live, 1, memory_order_seq_cst);
  int st = 0;
  for (int i = 0; i < SHARDS && st == 0; i++) {
    struct shard* s = &t->shards[i];
    adr__spin_lock(&s->lock);
    for (size_t j = 0; j < s->cap && st == 0; j++) {
      if (s->slots[j].key == 0) continue;
      struct range_index* x = home_in_shard(t, s, s->slots[j].key, s->slots[j].size);
      st = insert_in_shard(t, x, s->slots[j].key, s->slots[j].size, NULL);
    }
    adr__spin_unlock(&s->lock);
  }
  if (st == 0) atomic_store_explicit(&t->ranges_built, 1, memory_order_release);
  pthread_mutex_unlock(&t->build_lock);
  return st;
}

/* The first look-up of a table whose index is not built builds it; a
 * look-up while another thread builds waits for that build (build_lock).
 * Out of host memory, the index stays partial (live: later allocations
 * are added), the look-ups miss what is not in it, and the next look-up
 * tries the build again. */
static void ranges_ensure(struct adr__alloc_table* t) {
  if (__builtin_expect(atomic_load_explicit(&t->ranges_built, memory_order_acquire) == 0, 0))
    (void)adr__alloc_table_ranges_build(t);
}

const void* adr__alloc_table_ranges_remove(struct adr__alloc_table* t, void* ptr) {
  uintptr_t key = (uintptr_t)ptr;
  const void* site = NULL;
  struct range_index* x = index_of(t, key);
  if (x != NULL) {
    adr__spin_lock(x->lock);
    bool removed = remove_locked(x, key, &site);
    adr__spin_unlock(x->lock);
    if (removed) return site;
  }
  adr__spin_lock(t->spanning.lock);
  (void)remove_locked(&t->spanning, key, &site);
  adr__spin_unlock(t->spanning.lock);
  return site;
}

/* ranges_remove for an address recorded in s, s's lock held: where
 * insert_indexed and the build put it (home_in_shard), s's index (guarded
 * by that lock) or the spanning index. */
static bool remove_from_index(struct adr__alloc_table* t, struct shard* s, uintptr_t key,
                              const void** site) {
  if (remove_locked(&s->ranges, key, site)) return true;
  adr__spin_lock(t->spanning.lock);
  bool removed = remove_locked(&t->spanning, key, site);
  adr__spin_unlock(t->spanning.lock);
  return removed;
}

/* The last answers of this thread (found or not). A found range stays
 * valid while the index it came from is unchanged; "none" while both
 * indexes searched are, and while key's shard is the one searched (a
 * chunk's addresses may move to another shard while it holds nothing).
 * initial-exec TLS: no __tls_get_addr call per lookup; ~150 bytes fit in
 * the static TLS that glibc keeps for libraries opened with dlopen. */
struct range_cache {
  const struct adr__alloc_table* table;
  const struct range_index* index; /* found: where; none: key's shard's (or NULL) */
  uint64_t version;                /* of index */
  uint64_t spanning_version;       /* none: of the table's spanning index */
  uintptr_t key;                   /* the address asked about, for a negative answer */
  bool found;
  struct adr__range r;
};
static _Thread_local ADR__TLS_HOT struct range_cache cache[2];
static _Thread_local ADR__TLS_HOT unsigned cache_next;

static inline bool contains(const struct adr__range* r, uintptr_t key) {
  /* A zero-byte allocation owns its one address. */
  return key - r->start < (r->size ? r->size : 1);
}

static inline uint64_t version_of(const struct range_index* x) {
  return x ? atomic_load_explicit(&x->version, memory_order_acquire) : 0;
}

/* The range of x that contains key, if any. */
static bool search_locked(const struct range_index* x, uintptr_t key, struct adr__range* out) {
  size_t i = block_of(x, key);
  if (i >= x->nblocks) return false;
  const struct block* b = x->blocks[i];
  const struct adr__range* r = &b->e[upper(b, key) - 1]; /* >= 1: mins[i] <= key */
  if (!contains(r, key)) return false;
  *out = *r;
  return true;
}

/* Searches x under its lock; *version: x's version the answer holds for. */
static bool search(struct range_index* x, uintptr_t key, struct adr__range* out,
                   uint64_t* version) {
  adr__spin_lock(x->lock);
  *version = atomic_load_explicit(&x->version, memory_order_relaxed);
  bool found = search_locked(x, key, out);
  adr__spin_unlock(x->lock);
  return found;
}

bool adr__alloc_table_ranges_cached_fit(const struct adr__alloc_table* t, const void* p,
                                        size_t size) {
  uintptr_t key = (uintptr_t)p;
  for (int i = 0; i < 2; i++) {
    const struct range_cache* c = &cache[i];
    if (c->table == t && c->found && key - c->r.start < c->r.size &&
        size <= c->r.size - (key - c->r.start) && c->version == version_of(c->index))
      return true;
  }
  return false;
}

bool adr__alloc_table_ranges_find(struct adr__alloc_table* t, const void* p,
                                  struct adr__range* out) {
  ranges_ensure(t);
  uintptr_t key = (uintptr_t)p;
  for (int i = 0; i < 2; i++) {
    const struct range_cache* c = &cache[i];
    if (c->table == t && c->found && contains(&c->r, key) && c->version == version_of(c->index)) {
      *out = c->r;
      return true;
    }
  }
  struct range_index* x = index_of(t, key);
  for (int i = 0; i < 2; i++) {
    const struct range_cache* c = &cache[i];
    if (c->table == t && !c->found && c->key == key && c->index == x &&
        c->version == version_of(x) && c->spanning_version == version_of(&t->spanning))
      return false;
  }
  struct range_cache* c = &cache[cache_next++ & 1];
  c->table = t;
  c->key = key;
  c->spanning_version = 0;
  uint64_t v = 0;
  bool found = x != NULL && search(x, key, out, &v);
  c->index = x;
  c->version = v;
  if (!found) {
    found = search(&t->spanning, key, out, &c->spanning_version);
    if (found) {
      c->index = &t->spanning;
      c->version = c->spanning_version;
    }
  }
  c->found = found;
  if (found) c->r = *out;
  return found;
}

int adr__alloc_table_ranges_home(struct adr__alloc_table* t, const void* ptr) {
  uintptr_t key = (uintptr_t)ptr;
  struct range_index* xs[2] = {index_of(t, key), &t->spanning};
  for (int k = 0; k < 2; k++) {
    if (xs[k] == NULL) continue;
    struct adr__range r;
    uint64_t v;
    if (search(xs[k], key, &r, &v) && r.start == key)
      return k == 0
                 ? (int)((struct shard*)((char*)xs[k] - offsetof(struct shard, ranges)) - t->shards)
                 : SHARDS;
  }
  return -1;
}

size_t adr__alloc_table_ranges_foreach(struct adr__alloc_table* t,
                                       void (*fn)(void* ctx, const struct adr__range* r),
                                       void* ctx) {
  ranges_ensure(t);
  enum { N = SHARDS + 1 };
  struct range_index* xs[N];
  size_t at_block[N];
  uint32_t at_entry[N];
  size_t count = 0;
  for (int k = 0; k < N; k++) {
    xs[k] = k < SHARDS ? &t->shards[k].ranges : &t->spanning;
    at_block[k] = 0;
    at_entry[k] = 0;
    adr__spin_lock(xs[k]->lock);
    count += xs[k]->count;
  }
  /* Address order across the indexes: each step takes the lowest start of
   * their heads (a leak report's pace, not a hot path's). */
  while (fn != NULL) {
    int best = -1;
    for (int k = 0; k < N; k++) {
      if (at_block[k] == xs[k]->nblocks) continue;
      uintptr_t start = xs[k]->blocks[at_block[k]]->e[at_entry[k]].start;
      if (best < 0 || start < xs[best]->blocks[at_block[best]]->e[at_entry[best]].start) best = k;
    }
    if (best < 0) break;
    fn(ctx, &xs[best]->blocks[at_block[best]]->e[at_entry[best]]);
    if (++at_entry[best] == xs[best]->blocks[at_block[best]]->count) {
      at_entry[best] = 0;
      at_block[best]++;
    }
  }
  for (int k = N - 1; k >= 0; k--) adr__spin_unlock(xs[k]->lock);
  return count;
}
