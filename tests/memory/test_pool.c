/* SPDX-License-Identifier: Apache-2.0
 *
 * Unit tests of the caching pool (core/memory/pool.c) in isolation: a fake
 * upstream (host memory with a byte cap and counters) and fake streams whose
 * "busy" state the test controls, so every stream-ordering decision of the
 * pool is observable and deterministic.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sys/mman.h>
#include <unistd.h>

#include "memory/pool.h"
#include "vmflags.h"

#define MiB ((size_t)1 << 20)

/* ---- fake upstream ------------------------------------------------------- */

struct fake_up {
  pthread_mutex_t lock;
  size_t cap; /* bytes; 0 = unlimited */
  size_t outstanding_bytes;
  size_t outstanding;
  size_t allocs, frees;
};

static int up_alloc(void* ctx, size_t size, size_t alignment, void** out, struct adr_error* error) {
  struct fake_up* u = ctx;
  pthread_mutex_lock(&u->lock);
  if (u->cap != 0 && u->outstanding_bytes + size > u->cap) {
    pthread_mutex_unlock(&u->lock);
    return adr_error_set(error, ENOMEM, "[alloc][fake] ENOMEM: cap %zu reached", u->cap);
  }
  u->outstanding_bytes += size;
  u->outstanding++;
  u->allocs++;
  pthread_mutex_unlock(&u->lock);
  *out = aligned_alloc(alignment, size);
  assert_non_null(*out);
  return 0;
}

static void up_free(void* ctx, void* ptr, size_t size) {
  struct fake_up* u = ctx;
  pthread_mutex_lock(&u->lock);
  u->outstanding_bytes -= size;
  u->outstanding--;
  u->frees++;
  pthread_mutex_unlock(&u->lock);
  free(ptr);
}

/* ---- fake streams and events --------------------------------------------- */

struct fake_stream {
  int busy; /* work queued before now has not completed */
  /* Like a real device: an event recorded now completes only once the test
   * says the stream got there (reach()), even when it has no work. */
  int lag;
  unsigned long recorded, reached;
};

struct fake_event {
  struct fake_stream* stream;
  int pending; /* recorded while the stream was busy (or lagging) */
  unsigned long seq;
};

/* The stream has executed everything queued so far. */
static void reach(struct fake_stream* s) {
  s->reached = s->recorded;
}

struct fake_sync {
  int records, waits, queries, syncs, creates, destroys;
  struct fake_stream* last_waiter;
  struct fake_event* last_waited;
};

static int ev_create(void* ctx, void** out) {
  struct fake_sync* f = ctx;
  f->creates++;
  *out = calloc(1, sizeof(struct fake_event));
  return 0;
}
static void ev_destroy(void* ctx, void* ev) {
  struct fake_sync* f = ctx;
  f->destroys++;
  free(ev);
}
static int ev_record(void* ctx, void* ev, void* stream) {
  struct fake_sync* f = ctx;
  struct fake_event* e = ev;
  f->records++;
  e->stream = stream;
  e->pending = e->stream->busy || e->stream->lag;
  e->seq = ++e->stream->recorded;
  return 0;
}
static int ev_wait(void* ctx, void* ev, void* stream) {
  struct fake_sync* f = ctx;
  f->waits++;
  f->last_waiter = stream;
  f->last_waited = ev;
  return 0;
}
static int ev_query(void* ctx, void* ev) {
  struct fake_sync* f = ctx;
  struct fake_event* e = ev;
  f->queries++;
  if (e->pending && !e->stream->busy && (!e->stream->lag || e->seq <= e->stream->reached))
    e->pending = 0;
  return e->pending ? EBUSY : 0;
}
static int ev_sync(void* ctx, void* ev) {
  struct fake_sync* f = ctx;
  struct fake_event* e = ev;
  f->syncs++;
  if (e->stream) { /* the host waited: the stream drained */
    e->stream->busy = 0;
    e->stream->reached = e->stream->recorded;
  }
  e->pending = 0;
  return 0;
}

struct fixture {
  struct fake_up up;
  struct fake_sync sync;
  struct adr__pool* pool;
};

static struct fixture* make(struct adr__pool_options* opts) {
  struct fixture* f = calloc(1, sizeof(*f));
  pthread_mutex_init(&f->up.lock, NULL);
  struct adr__pool_options o;
  adr__pool_options_default(&o);
  o.arenas = 1;
  if (opts != NULL) o = *opts;
  struct adr__pool_upstream up = {&f->up, up_alloc, up_free, NULL};
  struct adr__pool_sync sync = {&f->sync, ev_create, ev_destroy, ev_record,
                                ev_wait,  ev_query,  ev_sync};
  struct adr_error err;
  assert_int_equal(adr__pool_create(&o, &up, &sync, &f->pool, &err), 0);
  return f;
}

static void unmake(struct fixture* f) {
  adr__pool_destroy(f->pool);
  assert_int_equal(f->up.outstanding, 0);
  assert_int_equal(f->sync.creates, f->sync.destroys);
  pthread_mutex_destroy(&f->up.lock);
  free(f);
}

static struct adr__pool_stats stats(struct fixture* f) {
  struct adr__pool_stats s;
  adr__pool_stats_get(f->pool, &s);
  return s;
}

static void* xalloc(struct fixture* f, size_t size, size_t align, void* stream) {
  void* p = NULL;
  struct adr_error err;
  int st = adr__pool_alloc(f->pool, size, align, stream, &p, &err);
  if (st != 0) fail_msg("alloc %zu: %s", size, err.message);
  assert_non_null(p);
  return p;
}

static void xfree(struct fixture* f, void* p, size_t size, void* stream) {
  struct adr_error err;
  int st = adr__pool_free(f->pool, p, size, stream, &err);
  if (st != 0) fail_msg("free %zu: %s", size, err.message);
}

/* ---- tests --------------------------------------------------------------- */

static void test_size_classes(void** state) {
  (void)state;
  size_t prev = 0;
  for (unsigned i = 0; i < ADR__POOL_CLASS_COUNT; i++) {
    size_t c = adr__pool_class_size(i);
    assert_true(c > prev);
    assert_int_equal(c % 64, 0);
    assert_int_equal(adr__pool_class_index(c), i);
    assert_int_equal(adr__pool_class_index(prev + 1), i);
    prev = c;
  }
  assert_int_equal(prev, ADR__POOL_CLASS_MAX);
  /* Rounding wastes at most a quarter above 512 bytes, an eighth above
   * 1 MiB (sizes spread geometrically up to the largest class). */
  for (size_t s = 513; s <= ADR__POOL_CLASS_MAX; s += s / 61 + 4093) {
    size_t c = adr__pool_class_size(adr__pool_class_index(s));
    assert_true(c >= s);
    assert_true(c - s <= (s > ((size_t)1 << 20) ? s / 8 : s / 4));
  }
  assert_int_equal(adr__pool_class_size(adr__pool_class_index((size_t)1 << 20)), (size_t)1 << 20);
  assert_int_equal(adr__pool_class_size(adr__pool_class_index(((size_t)1 << 20) + 1)),
                   (size_t)9 << 17);
  assert_int_equal(adr__pool_class_size(adr__pool_class_index(1)), 64);
  assert_int_equal(adr__pool_class_size(adr__pool_class_index(640)), 640);
  assert_int_equal(adr__pool_class_size(adr__pool_class_index(641)), 768);
}

static void test_alignment(void** state) {
  (void)state;
  struct fixture* f = make(NULL);
  void* ptrs[12];
  size_t sizes[12];
  for (int i = 0; i < 12; i++) {
    size_t align = (size_t)64 << i; /* 64 B .. 128 KiB */
    sizes[i] = 100 + (size_t)i * 777;
    ptrs[i] = xalloc(f, sizes[i], align, NULL);
    assert_int_equal((uintptr_t)ptrs[i] % align, 0);
    memset(ptrs[i], i, sizes[i]);
  }
  for (int i = 0; i < 12; i++) {
    unsigned char* p = ptrs[i];
    for (size_t k = 0; k < sizes[i]; k++) assert_int_equal(p[k], i);
    xfree(f, ptrs[i], sizes[i], NULL);
  }
  assert_int_equal(stats(f).allocated_count, 0);
  assert_int_equal(stats(f).allocated_bytes, 0);
  unmake(f);
}

static void test_same_size_reuse_is_a_hit(void** state) {
  (void)state;
  struct fixture* f = make(NULL);
  void* p = xalloc(f, 1000, 0, NULL);
  struct adr__pool_stats s0 = stats(f);
  assert_int_equal(s0.cache_misses, 1);
  xfree(f, p, 1000, NULL);
  void* q = xalloc(f, 1000, 0, NULL);
  assert_ptr_equal(p, q);
  struct adr__pool_stats s1 = stats(f);
  assert_int_equal(s1.cache_hits, s0.cache_hits + 1);
  assert_int_equal(s1.cache_misses, 1);
  assert_int_equal(f->up.allocs, 1);
  xfree(f, q, 1000, NULL);
  unmake(f);
}

static void test_split_and_coalesce(void** state) {
  (void)state;
  struct adr__pool_options o;
  adr__pool_options_default(&o);
  o.arenas = 1;
  o.chunk_size = 16 * MiB;
  struct fixture* f = make(&o);
  size_t sz = 2 * MiB + 4096; /* rounded up to its class, 2.25 MiB */
  size_t csz = 9 * MiB / 4;
  assert_int_equal(adr__pool_class_size(adr__pool_class_index(sz)), csz);
  char* a = xalloc(f, sz, 0, NULL);
  char* b = xalloc(f, sz, 0, NULL);
  char* c = xalloc(f, sz, 0, NULL);
  /* One chunk, split in address order. */
  assert_int_equal(stats(f).reserved_count, 1);
  assert_int_equal(stats(f).reserved_bytes, 16 * MiB);
  assert_ptr_equal(b, a + csz);
  assert_ptr_equal(c, b + csz);
  assert_int_equal(stats(f).largest_free_block, 16 * MiB - 3 * csz);
  xfree(f, a, sz, NULL);
  xfree(f, c, sz, NULL);
  xfree(f, b, sz, NULL);
  /* Class blocks are cached as they are (reused at once by their class)... */
  assert_int_equal(stats(f).largest_free_block, 16 * MiB - 3 * csz);
  assert_int_equal(stats(f).cached_bytes, 16 * MiB);
  void* again = xalloc(f, sz + 1000, 0, NULL);
  assert_ptr_equal(again, b); /* LIFO within the class */
  xfree(f, again, sz + 1000, NULL);
  /* ...and coalesced when a request finds nothing that fits: the whole
   * chunk serves it without growing. */
  uint64_t misses = stats(f).cache_misses;
  void* all = xalloc(f, 16 * MiB, 0, NULL);
  assert_ptr_equal(all, a);
  assert_int_equal(stats(f).cache_misses, misses);
  xfree(f, all, 16 * MiB, NULL);
  unmake(f);
}

static void test_small_blocks_consolidate(void** state) {
  (void)state;
  struct adr__pool_options o;
  adr__pool_options_default(&o);
  o.arenas = 1;
  o.chunk_size = 4 * MiB;
  struct fixture* f = make(&o);
  enum { N = 1000 };
  void* p[N];
  for (int i = 0; i < N; i++) p[i] = xalloc(f, 4000, 0, NULL); /* class 4096 */
  assert_int_equal(stats(f).reserved_count, 1);
  for (int i = 0; i < N; i++) xfree(f, p[i], 4000, NULL);
  /* The class blocks sit in their list; a request larger than any of them
   * merges them back into the chunk instead of growing the pool. */
  void* big = xalloc(f, 4 * MiB, 0, NULL);
  assert_int_equal(stats(f).reserved_count, 1);
  assert_int_equal(f->up.allocs, 1);
  xfree(f, big, 4 * MiB, NULL);
  unmake(f);
}

static void test_best_fit(void** state) {
  (void)state;
  struct adr__pool_options o;
  adr__pool_options_default(&o);
  o.arenas = 1;
  o.chunk_size = 32 * MiB;
  struct fixture* f = make(&o);
  size_t s5 = 5 * MiB, s3 = 3 * MiB, sep = 2 * MiB;
  char* h5 = xalloc(f, s5, 0, NULL);
  char* g1 = xalloc(f, sep, 0, NULL);
  char* h3 = xalloc(f, s3, 0, NULL);
  char* g2 = xalloc(f, sep, 0, NULL);
  xfree(f, h5, s5, NULL);
  xfree(f, h3, s3, NULL);
  /* 2.5 MiB fits both holes and the tail: best fit is the 3 MiB hole. */
  char* r = xalloc(f, 2 * MiB + MiB / 2, 0, NULL);
  assert_ptr_equal(r, h3);
  /* 4 MiB fits only the 5 MiB hole and the tail: the hole is smaller. */
  char* r2 = xalloc(f, 4 * MiB, 0, NULL);
  assert_ptr_equal(r2, h5);
  xfree(f, r, 2 * MiB + MiB / 2, NULL);
  xfree(f, r2, 4 * MiB, NULL);
  xfree(f, g1, sep, NULL);
  xfree(f, g2, sep, NULL);
  /* Everything coalesces back into the chunk for a request of its size. */
  uint64_t misses = stats(f).cache_misses;
  char* all = xalloc(f, 32 * MiB, 0, NULL);
  assert_ptr_equal(all, h5);
  assert_int_equal(stats(f).cache_misses, misses);
  assert_int_equal(stats(f).reserved_count, 1);
  xfree(f, all, 32 * MiB, NULL);
  unmake(f);
}

static void test_trim_releases_free_chunks(void** state) {
  (void)state;
  struct fixture* f = make(NULL);
  void* keep = xalloc(f, 1000, 0, NULL);
  void* big = xalloc(f, 40 * MiB, 0, NULL);
  assert_int_equal(stats(f).reserved_count, 2);
  xfree(f, big, 40 * MiB, NULL);
  size_t released = adr__pool_trim(f->pool, false);
  struct adr__pool_stats s = stats(f);
  assert_true(released >= 40 * MiB);
  assert_int_equal(s.trimmed_bytes, released);
  assert_int_equal(s.reserved_count, 1); /* the chunk holding `keep` stays */
  assert_int_equal(f->up.outstanding, 1);
  xfree(f, keep, 1000, NULL);
  adr__pool_trim(f->pool, false);
  s = stats(f);
  assert_int_equal(s.reserved_bytes, 0);
  assert_int_equal(s.cached_bytes, 0);
  assert_int_equal(f->up.outstanding, 0);
  assert_true(s.reserved_bytes_peak >= 40 * MiB);
  adr__pool_stats_reset_peaks(f->pool);
  assert_int_equal(stats(f).reserved_bytes_peak, 0);
  unmake(f);
}

static void test_max_cached_zero_returns_at_once(void** state) {
  (void)state;
  struct adr__pool_options o;
  adr__pool_options_default(&o);
  o.arenas = 1;
  o.max_cached = 0;
  struct fixture* f = make(&o);
  void* p = xalloc(f, 8 * MiB, 0, NULL);
  xfree(f, p, 8 * MiB, NULL);
  assert_int_equal(stats(f).reserved_bytes, 0);
  assert_int_equal(f->up.outstanding, 0);
  unmake(f);
}

static void test_release_threshold(void** state) {
  (void)state;
  struct adr__pool_options o;
  adr__pool_options_default(&o);
  o.arenas = 1;
  o.release_threshold = 8 * MiB;
  struct fixture* f = make(&o);
  void* a = xalloc(f, 6 * MiB, 0, NULL);
  void* b = xalloc(f, 6 * MiB, 0, NULL);
  assert_true(stats(f).reserved_bytes >= 12 * MiB);
  xfree(f, a, 6 * MiB, NULL);
  xfree(f, b, 6 * MiB, NULL);
  /* Free chunks beyond the threshold went back. */
  assert_true(stats(f).reserved_bytes <= 8 * MiB);
  unmake(f);
}

static void test_stream_reuse_same_stream_no_wait(void** state) {
  (void)state;
  struct fixture* f = make(NULL);
  struct fake_stream s1 = {.busy = 1};
  void* p = xalloc(f, 5000, 0, &s1);
  xfree(f, p, 5000, &s1);
  /* The free path neither records nor waits. */
  assert_int_equal(f->sync.records + f->sync.waits + f->sync.syncs + f->sync.queries, 0);
  void* q = xalloc(f, 5000, 0, &s1);
  assert_ptr_equal(p, q);
  assert_int_equal(f->sync.waits, 0);
  assert_int_equal(f->sync.syncs, 0);
  xfree(f, q, 5000, &s1);
  s1.busy = 0;
  unmake(f);
}

static void test_stream_reuse_other_stream_waits(void** state) {
  (void)state;
  struct fixture* f = make(NULL);
  struct fake_stream s1 = {.busy = 1}, s2 = {.busy = 0};
  size_t sz = 2 * MiB; /* a whole chunk: the host bin stays empty */
  void* p = xalloc(f, sz, 0, &s1);
  xfree(f, p, sz, &s1);
  void* q = xalloc(f, sz, 0, &s2);
  /* Reused, but only after s2 waits on an event recorded on s1 after the
   * free; the host never blocked. */
  assert_ptr_equal(p, q);
  assert_int_equal(f->sync.records, 1);
  assert_int_equal(f->sync.waits, 1);
  assert_ptr_equal(f->sync.last_waiter, &s2);
  assert_ptr_equal(f->sync.last_waited->stream, &s1);
  assert_int_equal(f->sync.syncs, 0);
  assert_int_equal(stats(f).stream_waits, 1);
  assert_int_equal(f->up.allocs, 1);
  xfree(f, q, sz, &s2);
  s1.busy = 0;
  unmake(f);
}

static void test_host_alloc_skips_pending_blocks(void** state) {
  (void)state;
  struct adr__pool_options o;
  adr__pool_options_default(&o);
  o.arenas = 1;
  o.chunk_size = 2 * MiB;
  struct fixture* f = make(&o);
  struct fake_stream s1 = {.busy = 1};
  size_t sz = 2 * MiB; /* the whole chunk: nothing else to hand out */
  void* p = xalloc(f, sz, 0, &s1);
  xfree(f, p, sz, &s1);
  /* The host cannot have it while s1 may still use it. */
  void* q = xalloc(f, sz, 0, NULL);
  assert_ptr_not_equal(p, q);
  assert_int_equal(f->sync.waits, 0);
  assert_int_equal(f->sync.syncs, 0);
  xfree(f, q, sz, NULL);
  /* Once s1 has drained, the host gets it back. */
  s1.busy = 0;
  void* r = xalloc(f, sz, 0, NULL);
  assert_true(r == p || r == q);
  void* t = xalloc(f, sz, 0, NULL);
  assert_true((t == p || t == q) && t != r);
  assert_int_equal(f->up.allocs, 2);
  xfree(f, r, sz, NULL);
  xfree(f, t, sz, NULL);
  unmake(f);
}

static void test_dirty_bin_rerecords(void** state) {
  (void)state;
  struct fixture* f = make(NULL);
  struct fake_stream s1 = {.busy = 1}, s2 = {0}, s3 = {0};
  size_t sz = 2 * MiB; /* one chunk each */
  void* a = xalloc(f, sz, 0, &s1);
  void* b = xalloc(f, sz, 0, &s1);
  xfree(f, a, sz, &s1);
  void* x = xalloc(f, sz, 0, &s2); /* records on s1, s2 waits */
  assert_ptr_equal(x, a);
  assert_int_equal(f->sync.records, 1);
  xfree(f, b, sz, &s1); /* after the record: needs a new one */
  void* y = xalloc(f, sz, 0, &s3);
  assert_ptr_equal(y, b);
  assert_int_equal(f->sync.records, 2);
  assert_int_equal(f->sync.waits, 2);
  assert_ptr_equal(f->sync.last_waiter, &s3);
  assert_int_equal(f->up.allocs, 2);
  xfree(f, x, sz, &s2);
  xfree(f, y, sz, &s3);
  s1.busy = 0;
  unmake(f);
}

/* Issue 11: allocate on the host, free on a stream, repeat. The host must
 * get the stream's frees back once the stream reached them, although every
 * event it records completes only later (the old pool re-recorded the
 * bin's event at each host look and never saw it complete: it grew by a
 * chunk every few iterations). */
static void test_host_reuses_stream_frees(void** state) {
  (void)state;
  struct fixture* f = make(NULL);
  struct fake_stream t = {.lag = 1};
  enum { RING = 16 };
  void* ring[RING] = {0};
  size_t size[RING] = {0};
  uint32_t rng = 7;
  size_t live = 0, live_peak = 0;
  for (int it = 0; it < 5000; it++) {
    int k = it % RING;
    if (ring[k] != NULL) {
      xfree(f, ring[k], size[k], &t);
      live -= size[k];
    }
    rng = rng * 1664525u + 1013904223u;
    size[k] = 32 * 1024 + (rng >> 8) % (144 * 1024);
    ring[k] = xalloc(f, size[k], 0, NULL);
    live += size[k];
    if (live > live_peak) live_peak = live;
    reach(&t); /* the stream keeps up, one step behind the host */
  }
  struct adr__pool_stats s = stats(f);
  if (s.reserved_bytes_peak > 4 * live_peak + 8 * MiB)
    fail_msg("reserved %llu bytes with %zu live at most", (unsigned long long)s.reserved_bytes_peak,
             live_peak);
  assert_int_equal(f->sync.waits, 0);
  assert_int_equal(f->sync.syncs, 0); /* never blocked */
  /* One event record per sealed batch, not one per host allocation. */
  assert_true(f->sync.records < 1000);
  for (int k = 0; k < RING; k++) xfree(f, ring[k], size[k], &t);
  char msg[256];
  assert_int_equal(adr__pool_check(f->pool, msg, sizeof(msg)), 0);
  unmake(f);
}

/* The cap applies pool-wide at the free, to host frees at once and to a
 * stream's frees once the stream reached them. */
static void test_max_cached_cap(void** state) {
  (void)state;
  struct adr__pool_options o;
  adr__pool_options_default(&o);
  o.arenas = 1;
  o.max_cached = 8 * MiB;
  struct fixture* f = make(&o);
  enum { N = 24 };
  void* p[N];
  for (int i = 0; i < N; i++) p[i] = xalloc(f, 2 * MiB, 0, NULL);
  for (int i = 0; i < N; i++) xfree(f, p[i], 2 * MiB, NULL);
  assert_true(stats(f).cached_bytes <= 8 * MiB);
  assert_true(f->up.outstanding_bytes <= 8 * MiB);
  struct fake_stream t = {.lag = 1};
  for (int i = 0; i < N; i++) p[i] = xalloc(f, 2 * MiB, 0, NULL);
  for (int i = 0; i < N; i++) xfree(f, p[i], 2 * MiB, &t);
  /* Not reached yet: nothing may go back. */
  assert_true(f->up.outstanding_bytes >= (size_t)N * 2 * MiB);
  reach(&t);
  for (int i = 0; i < 600 && stats(f).cached_bytes > 8 * MiB; i++) {
    void* q = xalloc(f, 64, 0, NULL);
    xfree(f, q, 64, NULL);
    reach(&t);
  }
  assert_true(stats(f).cached_bytes <= 8 * MiB);
  assert_true(f->up.outstanding_bytes <= 8 * MiB);
  assert_int_equal(f->sync.syncs, 0);
  unmake(f);
}

/* Without a device's memory size the default cap is 256 MiB
 * (docs/memory.md). */
static void test_default_cap(void** state) {
  (void)state;
  struct fixture* f = make(NULL);
  assert_int_equal(stats(f).max_cached, 256 * MiB);
  unmake(f);
  struct adr__pool_options o;
  adr__pool_options_default(&o);
  assert_int_equal(o.release_threshold, SIZE_MAX);
  o.max_cached = SIZE_MAX;
  f = make(&o);
  assert_int_equal(stats(f).max_cached, UINT64_MAX);
  unmake(f);
}

static void test_retire_stream(void** state) {
  (void)state;
  struct fixture* f = make(NULL);
  struct fake_stream s1 = {.busy = 1};
  size_t sz = 2 * MiB;
  void* p = xalloc(f, sz, 0, &s1);
  xfree(f, p, sz, &s1);
  adr__pool_stream_retire(f->pool, &s1);
  /* Retiring waited for the stream: its blocks are everybody's now. */
  assert_int_equal(s1.busy, 0);
  assert_true(f->sync.syncs >= 1);
  int waits = f->sync.waits;
  void* q = xalloc(f, sz, 0, NULL);
  assert_ptr_equal(p, q);
  assert_int_equal(f->sync.waits, waits);
  xfree(f, q, sz, NULL);
  /* A new stream at the same address starts clean. */
  s1.busy = 1;
  void* r = xalloc(f, 100, 0, &s1);
  xfree(f, r, 100, &s1);
  s1.busy = 0;
  unmake(f);
}

static void test_trim_keeps_pending_blocks(void** state) {
  (void)state;
  struct fixture* f = make(NULL);
  struct fake_stream s1 = {.busy = 1};
  void* p = xalloc(f, 8 * MiB, 0, &s1);
  xfree(f, p, 8 * MiB, &s1);
  assert_int_equal(adr__pool_trim(f->pool, false), 0);
  assert_int_equal(f->up.outstanding, 1);
  /* With wait (the out-of-memory path) the host waits and releases. */
  assert_true(adr__pool_trim(f->pool, true) >= 8 * MiB);
  assert_int_equal(f->up.outstanding, 0);
  unmake(f);
}

static void test_bad_free(void** state) {
  (void)state;
  struct fixture* f = make(NULL);
  char* p = xalloc(f, 1000, 0, NULL);
  struct adr_error err;
  assert_int_equal(adr__pool_free(f->pool, p + 64, 1000, NULL, &err), EINVAL);
  assert_non_null(strstr(err.message, "not allocated by this pool"));
  assert_int_equal(adr__pool_free(f->pool, p, 999, NULL, &err), ERANGE);
  assert_non_null(strstr(err.message, "allocated with size 1000, freed with size 999"));
  assert_int_equal(stats(f).allocated_count, 1);
  xfree(f, p, 1000, NULL);
  assert_int_equal(adr__pool_free(f->pool, p, 1000, NULL, &err), EINVAL);
  unmake(f);
}

static void test_upstream_failure(void** state) {
  (void)state;
  struct fixture* f = make(NULL);
  f->up.cap = 64 * MiB;
  void* a = xalloc(f, 40 * MiB, 0, NULL);
  xfree(f, a, 40 * MiB, NULL);
  void* small = xalloc(f, 1000, 0, NULL); /* from the cached chunk */
  void* p = NULL;
  struct adr_error err;
  /* 40 MiB are cached but split by `small`; 50 more do not fit the cap. */
  assert_int_equal(adr__pool_alloc(f->pool, 50 * MiB, 0, NULL, &p, &err), ENOMEM);
  assert_non_null(strstr(err.message, "[alloc][fake] ENOMEM"));
  xfree(f, small, 1000, NULL);
  assert_true(adr__pool_trim(f->pool, true) >= 40 * MiB);
  assert_int_equal(adr__pool_alloc(f->pool, 50 * MiB, 0, NULL, &p, &err), 0);
  xfree(f, p, 50 * MiB, NULL);
  assert_int_equal(adr__pool_alloc(f->pool, SIZE_MAX - 10, 0, NULL, &p, &err), EOVERFLOW);
  unmake(f);
}

/* Random operations against a shadow list: no two live blocks overlap, the
 * contents survive, and the statistics add up. */
static void test_random_model(void** state) {
  (void)state;
  struct adr__pool_options o;
  adr__pool_options_default(&o);
  o.arenas = 2;
  struct fixture* f = make(&o);
  enum { LIVE = 300 };
  struct {
    unsigned char* p;
    size_t size;
  } live[LIVE] = {{0}};
  uint32_t rng = 12345;
  size_t bytes = 0, count = 0;
  for (int step = 0; step < 20000; step++) {
    rng = rng * 1103515245u + 12345u;
    int i = (int)((rng >> 8) % LIVE);
    if (live[i].p == NULL) {
      rng = rng * 1103515245u + 12345u;
      size_t size = (rng >> 4) % 4 == 0 ? 1 + (rng >> 6) % (3 * MiB) : 1 + (rng >> 6) % 9000;
      size_t align = (size_t)64 << ((rng >> 3) % 4);
      live[i].p = xalloc(f, size, align, NULL);
      live[i].size = size;
      assert_int_equal((uintptr_t)live[i].p % align, 0);
      memset(live[i].p, i & 0xff, size < 256 ? size : 256);
      bytes += size;
      count++;
    } else {
      size_t n = live[i].size < 256 ? live[i].size : 256;
      for (size_t k = 0; k < n; k++) assert_int_equal(live[i].p[k], i & 0xff);
      xfree(f, live[i].p, live[i].size, NULL);
      bytes -= live[i].size;
      count--;
      live[i].p = NULL;
    }
  }
  struct adr__pool_stats s = stats(f);
  assert_int_equal(s.allocated_bytes, bytes);
  assert_int_equal(s.allocated_count, count);
  assert_true(s.reserved_bytes >= s.cached_bytes + bytes);
  for (int i = 0; i < LIVE; i++)
    for (int j = i + 1; j < LIVE; j++)
      if (live[i].p && live[j].p)
        assert_true(live[i].p + live[i].size <= live[j].p || live[j].p + live[j].size <= live[i].p);
  char msg[256];
  if (adr__pool_check(f->pool, msg, sizeof(msg)) != 0) fail_msg("%s", msg);
  for (int i = 0; i < LIVE; i++)
    if (live[i].p) xfree(f, live[i].p, live[i].size, NULL);
  adr__pool_trim(f->pool, false);
  assert_int_equal(stats(f).reserved_bytes, 0);
  unmake(f);
}

/* Random operations over three streams and the host, with retirements and
 * trims, checking the pool's invariants after every step. */
static void test_random_streams_invariants(void** state) {
  (void)state;
  struct fixture* f = make(NULL);
  struct fake_stream streams[3] = {{0}, {0}, {0}};
  enum { LIVE = 100 };
  struct {
    void* p;
    size_t size;
  } live[LIVE] = {{0}};
  uint32_t rng = 99;
  char msg[256];
  for (int step = 0; step < 20000; step++) {
    rng = rng * 1103515245u + 12345u;
    unsigned r = rng >> 8;
    void* stream = r % 4 == 3 ? NULL : &streams[r % 4];
    int i = (int)((r >> 4) % LIVE);
    unsigned op = (r >> 12) % 100;
    if (op < 2) {
      struct fake_stream* s = &streams[(r >> 16) % 3];
      adr__pool_stream_retire(f->pool, s);
    } else if (op < 3) {
      adr__pool_trim(f->pool, (r >> 16) & 1);
    } else if (op < 10) {
      for (int k = 0; k < 3; k++) streams[k].busy = (int)((r >> (17 + k)) & 1);
    } else if (live[i].p == NULL) {
      size_t size = (r >> 14) % 3 == 0 ? 1 + (rng % (3 * MiB)) : 1 + rng % 20000;
      live[i].p = xalloc(f, size, 0, stream);
      live[i].size = size;
    } else {
      xfree(f, live[i].p, live[i].size, stream);
      live[i].p = NULL;
    }
    if (adr__pool_check(f->pool, msg, sizeof(msg)) != 0) fail_msg("step %d: %s", step, msg);
  }
  for (int i = 0; i < LIVE; i++)
    if (live[i].p) xfree(f, live[i].p, live[i].size, NULL);
  for (int k = 0; k < 3; k++) streams[k].busy = 0;
  for (int k = 0; k < 3; k++) adr__pool_stream_retire(f->pool, &streams[k]);
  adr__pool_trim(f->pool, true);
  if (adr__pool_check(f->pool, msg, sizeof(msg)) != 0) fail_msg("end: %s", msg);
  struct adr__pool_stats st = stats(f);
  assert_int_equal(st.reserved_bytes, 0);
  assert_int_equal(st.cached_bytes, 0);
  unmake(f);
}

struct thread_arg {
  struct fixture* f;
  int id;
  int errors;
};

static void* hammer(void* arg) {
  struct thread_arg* t = arg;
  enum { LIVE = 64 };
  unsigned char* p[LIVE] = {0};
  size_t size[LIVE] = {0};
  uint32_t rng = 777u + (uint32_t)t->id;
  for (int step = 0; step < 20000; step++) {
    rng = rng * 1664525u + 1013904223u;
    int i = (int)((rng >> 10) % LIVE);
    if (p[i] == NULL) {
      size[i] = 1 + (rng >> 4) % ((rng & 1) ? 200000 : 2000);
      struct adr_error err;
      void* q;
      if (adr__pool_alloc(t->f->pool, size[i], 0, NULL, &q, &err) != 0) {
        t->errors++;
        continue;
      }
      p[i] = q;
      memset(p[i], t->id, size[i]);
    } else {
      for (size_t k = 0; k < size[i]; k += 97)
        if (p[i][k] != (unsigned char)t->id) t->errors++;
      if (adr__pool_free(t->f->pool, p[i], size[i], NULL, NULL) != 0) t->errors++;
      p[i] = NULL;
    }
  }
  for (int i = 0; i < LIVE; i++)
    if (p[i] && adr__pool_free(t->f->pool, p[i], size[i], NULL, NULL) != 0) t->errors++;
  return NULL;
}

static void test_threads(void** state) {
  (void)state;
  struct adr__pool_options o;
  adr__pool_options_default(&o);
  o.arenas = 4;
  struct fixture* f = make(&o);
  enum { T = 6 };
  pthread_t th[T];
  struct thread_arg args[T];
  for (int i = 0; i < T; i++) {
    args[i] = (struct thread_arg){f, i + 1, 0};
    pthread_create(&th[i], NULL, hammer, &args[i]);
  }
  for (int i = 0; i < T; i++) {
    pthread_join(th[i], NULL);
    assert_int_equal(args[i].errors, 0);
  }
  assert_int_equal(stats(f).allocated_count, 0);
  unmake(f);
}

struct one_alloc {
  struct fixture* f;
  size_t size;
  int status;
};

/* An allocation and its free on a thread of its own (so in the arena the
 * next thread gets). */
static void* alloc_free_thread(void* p) {
  struct one_alloc* a = p;
  void* mem = NULL;
  struct adr_error err;
  a->status = adr__pool_alloc(a->f->pool, a->size, 0, NULL, &mem, &err);
  if (a->status == 0) a->status = adr__pool_free(a->f->pool, mem, a->size, NULL, &err);
  return NULL;
}

/* A pool of two arenas: consecutive threads get different ones. */
static struct fixture* make_two_arenas(size_t chunk_size) {
  struct adr__pool_options o;
  adr__pool_options_default(&o);
  o.arenas = 2;
  o.chunk_size = chunk_size;
  return make(&o);
}

/* Runs fn(arg) on a thread of its own (the next thread ordinal, so the
 * next arena) and waits for it. */
static void run_on_thread(void* (*fn)(void*), void* arg) {
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, fn, arg), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
}

/* A thread whose arena has nothing cached takes another arena's fully
 * free chunk rather than growing the pool: a transfer stream's worker
 * thread, new for every stream, reuses the memory the previous one left. */
static void test_other_arena_reused(void** state) {
  (void)state;
  struct fixture* f = make_two_arenas((size_t)1 << 20);
  size_t size = (size_t)8 << 20;
  for (int i = 0; i < 2; i++) {
    struct one_alloc a = {f, size, -1};
    run_on_thread(alloc_free_thread, &a);
    assert_int_equal(a.status, 0);
    struct adr__pool_stats s = stats(f);
    assert_int_equal(s.reserved_count, 1);
    assert_int_equal(s.cache_misses, 1);
    assert_int_equal(s.adopted, (uint64_t)i);
  }
  /* A request larger than anything cached still grows the pool. */
  struct one_alloc big = {f, (size_t)32 << 20, -1};
  run_on_thread(alloc_free_thread, &big);
  assert_int_equal(big.status, 0);
  assert_int_equal(stats(f).reserved_count, 2);
  unmake(f);
}

struct keep_alloc {
  struct fixture* f;
  size_t size;
  void* mem;
  int status;
};

static void* alloc_keep_thread(void* p) {
  struct keep_alloc* a = p;
  struct adr_error err;
  a->status = adr__pool_alloc(a->f->pool, a->size, 0, NULL, &a->mem, &err);
  return NULL;
}

/* Free space in a chunk another arena still hands blocks out of is not
 * taken: the thread grows its own arena, so that two threads allocating at
 * once do not share one arena's lock and cache lines. */
static void test_busy_arena_left_alone(void** state) {
  (void)state;
  struct fixture* f = make_two_arenas((size_t)8 << 20);
  size_t size = (size_t)1 << 20;
  struct keep_alloc keep = {f, size, NULL, -1};
  run_on_thread(alloc_keep_thread, &keep);
  assert_int_equal(keep.status, 0);
  /* The next thread (the other arena) wants what the first chunk has free. */
  struct one_alloc a = {f, size, -1};
  run_on_thread(alloc_free_thread, &a);
  assert_int_equal(a.status, 0);
  struct adr__pool_stats s = stats(f);
  assert_int_equal(s.reserved_count, 2);
  assert_int_equal(s.cache_misses, 2);
  assert_int_equal(s.adopted, 0);
  /* Freed from here, the first chunk is wholly free: a thread of the
   * first arena (two threads on) takes its own cache. The one after, in
   * the second arena, finds its own chunk free too: nothing adopted. */
  struct adr_error err;
  assert_int_equal(adr__pool_free(f->pool, keep.mem, size, NULL, &err), 0);
  for (int i = 0; i < 2; i++) {
    struct one_alloc b = {f, size, -1};
    run_on_thread(alloc_free_thread, &b);
    assert_int_equal(b.status, 0);
  }
  s = stats(f);
  assert_int_equal(s.reserved_count, 2);
  assert_int_equal(s.cache_misses, 2);
  assert_int_equal(s.adopted, 0);
  unmake(f);
}

struct live_thread {
  struct fixture* f;
  size_t size;
  int status;
  pthread_barrier_t* freed; /* reached once its block is freed */
  pthread_barrier_t* go;    /* waited for before the thread exits */
};

static void* alloc_free_wait_thread(void* p) {
  struct live_thread* a = p;
  void* mem = NULL;
  struct adr_error err;
  a->status = adr__pool_alloc(a->f->pool, a->size, 0, NULL, &mem, &err);
  if (a->status == 0) a->status = adr__pool_free(a->f->pool, mem, a->size, NULL, &err);
  pthread_barrier_wait(a->freed);
  pthread_barrier_wait(a->go);
  return NULL;
}

/* The fully free chunks of an arena whose thread is alive stay with it:
 * that thread allocates again soon, and two threads that each free what
 * they allocate would otherwise hand chunks back and forth. Once the
 * thread has exited, its chunk is adopted (test_other_arena_reused). */
static void test_live_arena_left_alone(void** state) {
  (void)state;
  struct fixture* f = make_two_arenas((size_t)4 << 20);
  pthread_barrier_t freed, go;
  pthread_barrier_init(&freed, NULL, 2);
  pthread_barrier_init(&go, NULL, 2);
  size_t size = (size_t)1 << 20;
  struct live_thread live = {f, size, -1, &freed, &go};
  pthread_t lt;
  assert_int_equal(pthread_create(&lt, NULL, alloc_free_wait_thread, &live), 0);
  pthread_barrier_wait(&freed);
  assert_int_equal(live.status, 0);
  /* The next thread, in the other arena, grows its own. */
  struct one_alloc a = {f, size, -1};
  run_on_thread(alloc_free_thread, &a);
  assert_int_equal(a.status, 0);
  struct adr__pool_stats s = stats(f);
  assert_int_equal(s.reserved_count, 2);
  assert_int_equal(s.cache_misses, 2);
  assert_int_equal(s.adopted, 0);
  pthread_barrier_wait(&go);
  pthread_join(lt, NULL);
  pthread_barrier_destroy(&freed);
  pthread_barrier_destroy(&go);
  unmake(f);
}

/* Resident 4 KiB pages of [p, p + size) (p page-aligned). */
static size_t resident_pages(void* p, size_t size) {
  size_t n = size / 4096, count = 0;
  unsigned char* v = malloc(n);
  assert_non_null(v);
  assert_int_equal(mincore(p, size, v), 0);
  for (size_t i = 0; i < n; i++) count += v[i] & 1;
  free(v);
  return count;
}

static uintptr_t last_chunk, last_chunk_end; /* the last mapping mmap_alloc made */

/* Fresh anonymous mappings, so untouched pages are not resident whatever
 * malloc does (MALLOC_PERTURB_ fills what aligned_alloc returns). */
static int mmap_alloc(void* ctx, size_t size, size_t alignment, void** out,
                      struct adr_error* error) {
  (void)ctx;
  (void)alignment; /* 4096: page-aligned anyway */
  void* p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return adr_error_set(error, ENOMEM, "[alloc][mmap] ENOMEM");
  last_chunk = (uintptr_t)p;
  last_chunk_end = last_chunk + size;
  *out = p;
  return 0;
}

static void mmap_free(void* ctx, void* ptr, size_t size) {
  (void)ctx;
  munmap(ptr, size);
}

/* Options populate and hugepages on host chunks: with populate a new
 * chunk is resident before anything touches it; without, it is not;
 * hugepages is advice, and the memory works either way. */
static void test_host_pages(void** state) {
  (void)state;
  const size_t chunk = 16 * MiB, size = 8 * MiB;
  for (int populate = 0; populate <= 1; populate++) {
    struct adr__pool_options o;
    adr__pool_options_default(&o);
    o.arenas = 1;
    o.chunk_size = chunk;
    o.host_pages = true;
    o.populate = populate;
    o.hugepages = populate ? ADR__POOL_THP_ALL : ADR__POOL_THP_OFF;
    struct adr__pool_upstream up = {NULL, mmap_alloc, mmap_free, NULL};
    struct adr__pool* pool = NULL;
    assert_int_equal(adr__pool_create(&o, &up, NULL, &pool, NULL), 0);
    char* p = NULL;
    struct adr_error err;
    assert_int_equal(adr__pool_alloc(pool, size, 4096, NULL, (void**)&p, &err), 0);
    size_t pages = resident_pages(p, size);
    if (populate) {
      void* probe = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      assert_true(probe != MAP_FAILED);
      bool supported = madvise(probe, 4096, 23 /* MADV_POPULATE_WRITE */) == 0;
      munmap(probe, 4096);
      if (supported)
        assert_int_equal(pages, size / 4096);
      else
        print_message("kernel without MADV_POPULATE_WRITE: %zu of %zu pages resident\n", pages,
                      size / 4096);
    } else {
      assert_true(pages < size / 4096 / 2);
    }
    memset(p, 0x5a, size);
    assert_int_equal(p[size - 1], 0x5a);
    assert_int_equal(adr__pool_free(pool, p, size, NULL, &err), 0);
    assert_int_equal(adr__pool_destroy(pool), 0);
  }
}

/* Which chunks are advised transparent huge pages: by default those made
 * for a request of 4 MiB or more (NumPy's rule), with "hugepages" every
 * chunk, with "nohugepages" none. Advice on a kernel that has THP at all
 * (probed), whatever its mode. */
static void test_huge_page_advice(void** state) {
  (void)state;
  if (!vmflags_thp_supported()) {
    print_message("kernel without transparent huge pages: the advice is refused\n");
    return;
  }
  const enum adr__pool_thp modes[] = {ADR__POOL_THP_LARGE, ADR__POOL_THP_ALL, ADR__POOL_THP_OFF};
  for (int m = 0; m < 3; m++) {
    for (int large = 0; large <= 1; large++) {
      struct adr__pool_options o;
      adr__pool_options_default(&o);
      assert_int_equal(o.hugepages, ADR__POOL_THP_LARGE);
      o.arenas = 1;
      o.chunk_size = 8 * MiB; /* a 2 MiB-aligned part whatever the request */
      o.host_pages = true;
      o.hugepages = modes[m];
      struct adr__pool_upstream up = {NULL, mmap_alloc, mmap_free, NULL};
      struct adr__pool* pool = NULL;
      assert_int_equal(adr__pool_create(&o, &up, NULL, &pool, NULL), 0);
      size_t size = large ? 4 * MiB : 64 * 1024;
      void* p = NULL;
      struct adr_error err;
      assert_int_equal(adr__pool_alloc(pool, size, 4096, NULL, &p, &err), 0);
      bool want = modes[m] == ADR__POOL_THP_ALL || (modes[m] == ADR__POOL_THP_LARGE && large);
      assert_true((uintptr_t)p >= last_chunk && (uintptr_t)p + size <= last_chunk_end);
      if (vmflags_huge_advised(last_chunk, last_chunk_end) != want)
        fail_msg("mode %d, %zu bytes: huge page advice %s", m, size, want ? "missing" : "given");
      memset(p, 1, size);
      assert_int_equal(adr__pool_free(pool, p, size, NULL, &err), 0);
      assert_int_equal(adr__pool_destroy(pool), 0);
    }
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_size_classes),
      cmocka_unit_test(test_host_pages),
      cmocka_unit_test(test_huge_page_advice),
      cmocka_unit_test(test_alignment),
      cmocka_unit_test(test_same_size_reuse_is_a_hit),
      cmocka_unit_test(test_split_and_coalesce),
      cmocka_unit_test(test_small_blocks_consolidate),
      cmocka_unit_test(test_best_fit),
      cmocka_unit_test(test_trim_releases_free_chunks),
      cmocka_unit_test(test_max_cached_zero_returns_at_once),
      cmocka_unit_test(test_release_threshold),
      cmocka_unit_test(test_stream_reuse_same_stream_no_wait),
      cmocka_unit_test(test_stream_reuse_other_stream_waits),
      cmocka_unit_test(test_host_alloc_skips_pending_blocks),
      cmocka_unit_test(test_dirty_bin_rerecords),
      cmocka_unit_test(test_host_reuses_stream_frees),
      cmocka_unit_test(test_max_cached_cap),
      cmocka_unit_test(test_default_cap),
      cmocka_unit_test(test_retire_stream),
      cmocka_unit_test(test_trim_keeps_pending_blocks),
      cmocka_unit_test(test_bad_free),
      cmocka_unit_test(test_upstream_failure),
      cmocka_unit_test(test_random_model),
      cmocka_unit_test(test_random_streams_invariants),
      cmocka_unit_test(test_threads),
      cmocka_unit_test(test_other_arena_reused),
      cmocka_unit_test(test_busy_arena_left_alone),
      cmocka_unit_test(test_live_arena_left_alone),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
