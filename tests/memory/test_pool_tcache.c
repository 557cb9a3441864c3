/* SPDX-License-Identifier: Apache-2.0
 *
 * The pool's per-thread caches (core/memory/pool.c, docs/memory.md "Per-
 * thread cache"): statistics stay exact while blocks sit in a thread's
 * cache, trim and statistics flush every thread's cache (also of a thread
 * that is still running), a block freed by another thread comes back to
 * its own arena, a thread's cache goes back when the thread exits, a pool
 * destroyed while a thread still holds a cache leaves that thread nothing
 * to touch, and a block freed on a stream is never handed to the host or
 * another stream without the pool's ordering. Driven through the pool's
 * internal API with a fake upstream and fake streams.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "memory/pool.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

/* ---- fakes --------------------------------------------------------------- */

struct up {
  pthread_mutex_t lock;
  size_t outstanding, allocs;
};

static int up_alloc(void* ctx, size_t size, size_t alignment, void** out, struct adr_error* e) {
  (void)e;
  struct up* u = ctx;
  pthread_mutex_lock(&u->lock);
  u->outstanding++;
  u->allocs++;
  pthread_mutex_unlock(&u->lock);
  *out = aligned_alloc(alignment, size);
  return *out ? 0 : ENOMEM;
}

static void up_free(void* ctx, void* ptr, size_t size) {
  (void)size;
  struct up* u = ctx;
  pthread_mutex_lock(&u->lock);
  u->outstanding--;
  pthread_mutex_unlock(&u->lock);
  free(ptr);
}

/* A stream is "busy" until the test says it got there: events recorded
 * while busy stay pending. */
struct stream {
  int busy;
};
struct event {
  struct stream* s;
  int pending;
};
struct sync {
  int waits;
};
static int ev_create(void* ctx, void** out) {
  (void)ctx;
  *out = calloc(1, sizeof(struct event));
  return *out ? 0 : ENOMEM;
}
static void ev_destroy(void* ctx, void* ev) {
  (void)ctx;
  free(ev);
}
static int ev_record(void* ctx, void* ev, void* stream) {
  (void)ctx;
  struct event* e = ev;
  e->s = stream;
  e->pending = e->s->busy;
  return 0;
}
static int ev_wait(void* ctx, void* ev, void* stream) {
  (void)ev;
  (void)stream;
  ((struct sync*)ctx)->waits++;
  return 0;
}
static int ev_query(void* ctx, void* ev) {
  (void)ctx;
  struct event* e = ev;
  if (e->pending && !e->s->busy) e->pending = 0;
  return e->pending ? EBUSY : 0;
}
static int ev_sync(void* ctx, void* ev) {
  (void)ctx;
  struct event* e = ev;
  if (e->s) e->s->busy = 0;
  e->pending = 0;
  return 0;
}

struct fixture {
  struct up up;
  struct sync sync;
  struct adr__pool* pool;
};

static struct fixture* make(unsigned arenas) {
  struct fixture* f = calloc(1, sizeof(*f));
  assert_non_null(f);
  pthread_mutex_init(&f->up.lock, NULL);
  struct adr__pool_options o;
  adr__pool_options_default(&o);
  o.arenas = arenas;
  o.max_cached = SIZE_MAX;
  struct adr__pool_upstream up = {&f->up, up_alloc, up_free, NULL};
  struct adr__pool_sync sync = {&f->sync, ev_create, ev_destroy, ev_record,
                                ev_wait,  ev_query,  ev_sync};
  assert_int_equal(adr__pool_create(&o, &up, &sync, &f->pool, NULL), 0);
  return f;
}

static void unmake(struct fixture* f) {
  assert_int_equal(adr__pool_destroy(f->pool), 0);
  assert_int_equal(f->up.outstanding, 0);
  pthread_mutex_destroy(&f->up.lock);
  free(f);
}

static struct adr__pool_stats stats(struct fixture* f) {
  struct adr__pool_stats s;
  adr__pool_stats_get(f->pool, &s);
  return s;
}

static void* xalloc(struct fixture* f, size_t size, void* stream) {
  void* p = NULL;
  struct adr_error err;
  int st = adr__pool_alloc(f->pool, size, 0, stream, &p, &err);
  if (st != 0) fail_msg("alloc %zu: %s", size, err.message);
  return p;
}

static void xfree(struct fixture* f, void* p, size_t size, void* stream) {
  struct adr_error err;
  int st = adr__pool_free(f->pool, p, size, stream, &err);
  if (st != 0) fail_msg("free %zu: %s", size, err.message);
}

static void check(struct fixture* f) {
  char msg[256];
  if (adr__pool_check(f->pool, msg, sizeof(msg)) != 0) fail_msg("%s", msg);
}

/* ---- tests --------------------------------------------------------------- */

/* Hits, misses, allocated bytes (also when a cached block is handed out
 * for another size of its class) and cached bytes are exact while blocks
 * sit in the cache. */
static void test_stats_exact(void** state) {
  (void)state;
  struct fixture* f = make(1);
  void* p = xalloc(f, 4000, NULL); /* a miss: the pool grows */
  xfree(f, p, 4000, NULL);         /* into the thread's cache */
  struct adr__pool_stats s = stats(f);
  assert_int_equal(s.cache_misses, 1);
  assert_int_equal(s.cache_hits, 0);
  assert_int_equal(s.allocated_bytes, 0);
  assert_int_equal(s.allocated_count, 0);
  assert_int_equal(s.cached_bytes, s.reserved_bytes);
  uint64_t hits = 0;
  for (int i = 0; i < 100; i++) {
    size_t size = 3900 + (size_t)i; /* one class: 4 KiB */
    void* q = xalloc(f, size, NULL);
    hits++;
    s = stats(f);
    assert_int_equal(s.allocated_bytes, size);
    assert_int_equal(s.allocated_count, 1);
    assert_int_equal(s.cache_hits, hits);
    assert_int_equal(s.cached_bytes + 4096, s.reserved_bytes);
    xfree(f, q, size, NULL);
  }
  /* Without statistics in between, the hits are counted as well. */
  for (int i = 0; i < 1000; i++) {
    size_t size = 100 + (size_t)i % 3000;
    xfree(f, xalloc(f, size, NULL), size, NULL);
  }
  s = stats(f);
  assert_int_equal(s.cache_hits + s.cache_misses, 1 + 100 + 1000);
  assert_int_equal(s.allocated_bytes, 0);
  assert_int_equal(s.allocated_count, 0);
  assert_int_equal(s.cached_bytes, s.reserved_bytes);
  check(f);
  unmake(f);
}

/* Trim gives back chunks whose blocks sit in a thread's cache. */
static void test_trim_flushes(void** state) {
  (void)state;
  struct fixture* f = make(1);
  void* p[64];
  for (int i = 0; i < 64; i++) p[i] = xalloc(f, (size_t)(i % 8 + 1) * 512, NULL);
  for (int i = 0; i < 64; i++) xfree(f, p[i], (size_t)(i % 8 + 1) * 512, NULL);
  assert_true(adr__pool_trim(f->pool, false) > 0);
  struct adr__pool_stats s = stats(f);
  assert_int_equal(s.reserved_bytes, 0);
  assert_int_equal(s.cached_bytes, 0);
  assert_int_equal(f->up.outstanding, 0);
  unmake(f);
}

/* ---- threads ----------------------------------------------------------- */

enum { CROSS_N = 200 };

struct worker {
  struct fixture* f;
  void* blocks[CROSS_N];
  size_t sizes[CROSS_N];
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int step; /* main -> worker: 1 free them, 3 allocate again, 5 exit */
  int done; /* worker -> main: the step it finished */
};

static void wait_step(struct worker* w, int step) {
  pthread_mutex_lock(&w->lock);
  while (w->step < step) pthread_cond_wait(&w->cond, &w->lock);
  pthread_mutex_unlock(&w->lock);
}
static void set(struct worker* w, int* field, int v) {
  pthread_mutex_lock(&w->lock);
  *field = v;
  pthread_cond_broadcast(&w->cond);
  pthread_mutex_unlock(&w->lock);
}
static void wait_done(struct worker* w, int v) {
  pthread_mutex_lock(&w->lock);
  while (w->done < v) pthread_cond_wait(&w->cond, &w->lock);
  pthread_mutex_unlock(&w->lock);
}

/* Frees what the main thread allocated (into this thread's cache), lets
 * the main thread look while it is still running, then allocates and frees
 * again. */
static void* cross_worker(void* arg) {
  struct worker* w = arg;
  wait_step(w, 1);
  for (int i = 0; i < CROSS_N; i++) xfree(w->f, w->blocks[i], w->sizes[i], NULL);
  set(w, &w->done, 2);
  wait_step(w, 3);
  for (int i = 0; i < CROSS_N; i++) {
    void* p = xalloc(w->f, w->sizes[i], NULL);
    memset(p, 0x5a, w->sizes[i]);
    xfree(w->f, p, w->sizes[i], NULL);
  }
  set(w, &w->done, 4);
  wait_step(w, 5);
  return NULL;
}

static void test_cross_thread_free(void** state) {
  (void)state;
  struct fixture* f = make(2);
  struct worker w;
  memset(&w, 0, sizeof(w));
  w.f = f;
  pthread_mutex_init(&w.lock, NULL);
  pthread_cond_init(&w.cond, NULL);
  for (int i = 0; i < CROSS_N; i++) {
    w.sizes[i] = 64 + (size_t)i * 97 % (16 * KiB);
    w.blocks[i] = xalloc(f, w.sizes[i], NULL);
  }
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, cross_worker, &w), 0);
  set(&w, &w.step, 1);
  wait_done(&w, 2);
  /* The worker is alive, some of the blocks in its cache: the statistics
   * see them free, the invariants hold, and trim gives everything back. */
  struct adr__pool_stats s = stats(f);
  assert_int_equal(s.allocated_count, 0);
  assert_int_equal(s.allocated_bytes, 0);
  assert_int_equal(s.cached_bytes, s.reserved_bytes);
  check(f);
  adr__pool_trim(f->pool, false);
  assert_int_equal(stats(f).reserved_bytes, 0);
  set(&w, &w.step, 3);
  wait_done(&w, 4);
  s = stats(f);
  assert_int_equal(s.allocated_count, 0);
  assert_int_equal(s.cached_bytes, s.reserved_bytes);
  check(f);
  set(&w, &w.step, 5);
  pthread_join(t, NULL);
  pthread_cond_destroy(&w.cond);
  pthread_mutex_destroy(&w.lock);
  unmake(f);
}

struct exit_arg {
  struct fixture* f;
  void* last; /* the address the thread freed last */
};

static void* exiting_worker(void* arg) {
  struct exit_arg* a = arg;
  void* p = xalloc(a->f, 2 * KiB, NULL);
  xfree(a->f, p, 2 * KiB, NULL);
  a->last = xalloc(a->f, 2 * KiB, NULL); /* a hit: the same block */
  assert_ptr_equal(a->last, p);
  xfree(a->f, a->last, 2 * KiB, NULL);
  return NULL; /* the cache holds it: goes back at exit */
}

/* A thread's cache goes back to the arena when the thread exits: with one
 * arena, the next request of the class gets the block it freed last. */
static void test_thread_exit_flushes(void** state) {
  (void)state;
  struct fixture* f = make(1);
  struct exit_arg a = {f, NULL};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, exiting_worker, &a), 0);
  pthread_join(t, NULL);
  check(f);
  void* p = xalloc(f, 2 * KiB, NULL);
  assert_ptr_equal(p, a.last);
  xfree(f, p, 2 * KiB, NULL);
  unmake(f);
}

static void* destroy_worker(void* arg) {
  struct worker* w = arg;
  for (int i = 0; i < 8; i++) xfree(w->f, xalloc(w->f, 1 * KiB, NULL), 1 * KiB, NULL);
  set(w, &w->done, 2);
  wait_step(w, 3); /* the pool is gone; exiting must not touch it */
  return NULL;
}

/* A pool destroyed while a thread's cache of it holds blocks: destroy
 * counts nothing outstanding, and the thread's exit touches nothing freed
 * (AddressSanitizer would report it). */
static void test_destroy_with_live_cache(void** state) {
  (void)state;
  struct fixture* f = make(1);
  struct worker w;
  memset(&w, 0, sizeof(w));
  w.f = f;
  pthread_mutex_init(&w.lock, NULL);
  pthread_cond_init(&w.cond, NULL);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, destroy_worker, &w), 0);
  wait_done(&w, 2);
  unmake(f); /* asserts destroy's count of outstanding blocks is 0 */
  /* A new pool, possibly at the same address: the thread's old cache is
   * not taken for it. */
  struct fixture* g = make(1);
  void* p = xalloc(g, 1 * KiB, NULL);
  xfree(g, p, 1 * KiB, NULL);
  set(&w, &w.step, 3);
  pthread_join(t, NULL);
  unmake(g);
  pthread_cond_destroy(&w.cond);
  pthread_mutex_destroy(&w.lock);
}

/* Stream order: a block freed on a busy stream S is not handed to the host
 * nor to stream T without the pool's ordering (T waits on S's event); S
 * itself takes it back at once. */
static void test_stream_tagged(void** state) {
  (void)state;
  struct fixture* f = make(1);
  struct stream s = {1}, t = {0};
  void* p = xalloc(f, 4 * KiB, &s);
  xfree(f, p, 4 * KiB, &s);
  void* q = xalloc(f, 4 * KiB, &s); /* S's own order protects it */
  assert_ptr_equal(q, p);
  xfree(f, q, 4 * KiB, &s);
  void* h = xalloc(f, 4 * KiB, NULL); /* the host: not while S is behind */
  assert_ptr_not_equal(h, p);
  int waits = f->sync.waits;
  void* r = xalloc(f, 4 * KiB, &t); /* T: only after a device-side wait */
  if (r == p) assert_int_equal(f->sync.waits, waits + 1);
  xfree(f, r, 4 * KiB, &t);
  xfree(f, h, 4 * KiB, NULL);
  s.busy = 0;
  t.busy = 0;
  adr__pool_stream_retire(f->pool, &s);
  adr__pool_stream_retire(f->pool, &t);
  check(f);
  struct adr__pool_stats st = stats(f);
  assert_int_equal(st.allocated_count, 0);
  assert_int_equal(st.cached_bytes, st.reserved_bytes);
  unmake(f);
}

/* Many threads allocating, freeing each other's blocks and reading the
 * statistics at once (for ThreadSanitizer): nothing lost, counts exact at
 * the end. The slots are swapped under the test's lock; the pool calls
 * run outside it. */
enum { STORM_THREADS = 4, STORM_OPS = 4000, STORM_SLOTS = 64 };
struct storm {
  struct fixture* f;
  pthread_mutex_t lock;
  void* slots[STORM_SLOTS];
  size_t sizes[STORM_SLOTS];
};
struct storm_arg {
  struct storm* s;
  unsigned seed;
};

static void* storm_worker(void* arg) {
  struct storm_arg* a = arg;
  struct storm* s = a->s;
  unsigned x = a->seed;
  for (int i = 0; i < STORM_OPS; i++) {
    x = x * 1103515245u + 12345u;
    unsigned k = (x >> 8) % STORM_SLOTS;
    size_t size = 64 + (x >> 16) % (8 * KiB);
    void* p = xalloc(s->f, size, NULL);
    memset(p, (int)k, size);
    pthread_mutex_lock(&s->lock);
    void* old = s->slots[k];
    size_t old_size = s->sizes[k];
    s->slots[k] = p;
    s->sizes[k] = size;
    pthread_mutex_unlock(&s->lock);
    if (old != NULL) xfree(s->f, old, old_size, NULL);
    if (i % 500 == 0) {
      struct adr__pool_stats st;
      adr__pool_stats_get(s->f->pool, &st);
      if (i % 1000 == 0) adr__pool_trim(s->f->pool, false);
    }
  }
  return NULL;
}

static void test_threads_storm(void** state) {
  (void)state;
  struct fixture* f = make(2);
  struct storm s;
  memset(&s, 0, sizeof(s));
  s.f = f;
  pthread_mutex_init(&s.lock, NULL);
  pthread_t t[STORM_THREADS];
  struct storm_arg args[STORM_THREADS];
  for (int i = 0; i < STORM_THREADS; i++) {
    args[i] = (struct storm_arg){&s, 77u + (unsigned)i * 131u};
    assert_int_equal(pthread_create(&t[i], NULL, storm_worker, &args[i]), 0);
  }
  for (int i = 0; i < STORM_THREADS; i++) pthread_join(t[i], NULL);
  for (int k = 0; k < STORM_SLOTS; k++)
    if (s.slots[k] != NULL) xfree(f, s.slots[k], s.sizes[k], NULL);
  struct adr__pool_stats st = stats(f);
  assert_int_equal(st.allocated_count, 0);
  assert_int_equal(st.allocated_bytes, 0);
  assert_int_equal(st.cached_bytes, st.reserved_bytes);
  check(f);
  pthread_mutex_destroy(&s.lock);
  unmake(f);
}

/* Owners hitting their caches on every call while another thread flushes
 * them (statistics and trim) over and over: a flush takes a cache only
 * once its owner is out of it (biased where membarrier(2) is available, a
 * spin lock otherwise: docs/memory.md "Per-thread cache"), so no block is
 * ever handed to two users at once. Each owner writes its mark into every
 * block it holds and finds it intact before freeing it; nothing is lost
 * and the counts are exact at the end. */
enum { RACE_OWNERS = 2, RACE_HELD = 4, RACE_OPS = 1000000, RACE_SIZE = 200 };
struct race_arg {
  struct fixture* f;
  uint64_t id;
  _Atomic int* done;
  int errors;
};

static void* race_owner(void* p) {
  struct race_arg* a = p;
  void* held[RACE_HELD] = {NULL};
  uint64_t mark[RACE_HELD] = {0};
  for (int i = 0; i < RACE_OPS + RACE_HELD; i++) {
    int k = i % RACE_HELD;
    if (held[k] != NULL) {
      if (memcmp(held[k], &mark[k], sizeof(mark[k])) != 0) a->errors++;
      if (adr__pool_free(a->f->pool, held[k], RACE_SIZE, NULL, NULL) != 0) a->errors++;
      held[k] = NULL;
    }
    if (i >= RACE_OPS) continue;
    if (adr__pool_alloc(a->f->pool, RACE_SIZE, 0, NULL, &held[k], NULL) != 0) {
      a->errors++;
      held[k] = NULL;
      continue;
    }
    mark[k] = a->id << 32 | (uint64_t)i;
    memcpy(held[k], &mark[k], sizeof(mark[k]));
  }
  atomic_fetch_add(a->done, 1);
  return NULL;
}

static void test_flush_races_owners(void** state) {
  (void)state;
  struct fixture* f = make(2);
  _Atomic int done = 0;
  struct race_arg args[RACE_OWNERS];
  pthread_t t[RACE_OWNERS];
  for (int i = 0; i < RACE_OWNERS; i++) {
    args[i] = (struct race_arg){f, (uint64_t)i + 1, &done, 0};
    assert_int_equal(pthread_create(&t[i], NULL, race_owner, &args[i]), 0);
  }
  unsigned flushes = 0;
  uint64_t hits = 0;
  while (atomic_load(&done) < RACE_OWNERS) {
    struct adr__pool_stats s = stats(f);
    hits = s.cache_hits;
    if (++flushes % 8 == 0) adr__pool_trim(f->pool, false);
  }
  for (int i = 0; i < RACE_OWNERS; i++) {
    pthread_join(t[i], NULL);
    assert_int_equal(args[i].errors, 0);
  }
  struct adr__pool_stats s = stats(f);
  assert_true(flushes > 0);
  assert_true(s.cache_hits >= hits);
  assert_true(s.cache_hits > 0);
  assert_int_equal(s.cache_hits + s.cache_misses, (uint64_t)RACE_OWNERS * RACE_OPS);
  assert_int_equal(s.allocated_count, 0);
  assert_int_equal(s.allocated_bytes, 0);
  assert_int_equal(s.cached_bytes, s.reserved_bytes);
  check(f);
  unmake(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stats_exact),
      cmocka_unit_test(test_trim_flushes),
      cmocka_unit_test(test_cross_thread_free),
      cmocka_unit_test(test_thread_exit_flushes),
      cmocka_unit_test(test_destroy_with_live_cache),
      cmocka_unit_test(test_stream_tagged),
      cmocka_unit_test(test_threads_storm),
      cmocka_unit_test(test_flush_races_owners),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
