/* SPDX-License-Identifier: Apache-2.0
 *
 * The live-allocation table: insert, size-checked removal, unknown
 * pointers, growth and deletion keeping every other entry findable; the
 * interval index built late from the hash; the live figures (current and
 * peak bytes and count) kept in the shards.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "internal.h"

static void test_insert_remove(void** state) {
  (void)state;
  struct adr__alloc_table* t = adr__alloc_table_create();
  assert_non_null(t);
  void* p = (void*)(uintptr_t)0x10000;
  size_t got = 0;
  assert_int_equal(adr__alloc_table_remove(t, p, 8, &got), ENOENT);
  assert_int_equal(adr__alloc_table_insert(t, p, 8), 0);
  assert_int_equal(adr__alloc_table_count(t), 1);
  assert_int_equal(adr__alloc_table_remove(t, p, 9, &got), ERANGE);
  assert_int_equal(got, 8);
  assert_int_equal(adr__alloc_table_count(t), 1); /* nothing removed on error */
  assert_int_equal(adr__alloc_table_remove(t, p, 8, &got), 0);
  assert_int_equal(adr__alloc_table_remove(t, p, 8, &got), ENOENT); /* double free */
  assert_int_equal(adr__alloc_table_count(t), 0);
  adr__alloc_table_destroy(t);
}

static void test_many_entries(void** state) {
  (void)state;
  struct adr__alloc_table* t = adr__alloc_table_create();
  const size_t n = 100000;
  for (size_t i = 1; i <= n; i++)
    assert_int_equal(adr__alloc_table_insert(t, (void*)(uintptr_t)(i * 64), i), 0);
  assert_int_equal(adr__alloc_table_count(t), n);
  /* Remove every other entry, then check the rest are all still there. */
  for (size_t i = 1; i <= n; i += 2)
    assert_int_equal(adr__alloc_table_remove(t, (void*)(uintptr_t)(i * 64), i, NULL), 0);
  for (size_t i = 2; i <= n; i += 2) {
    size_t got = 0;
    assert_int_equal(adr__alloc_table_remove(t, (void*)(uintptr_t)(i * 64), i + 1, &got), ERANGE);
    assert_int_equal(got, i);
  }
  for (size_t i = 1; i <= n; i += 2)
    assert_int_equal(adr__alloc_table_remove(t, (void*)(uintptr_t)(i * 64), i, NULL), ENOENT);
  assert_int_equal(adr__alloc_table_count(t), n / 2);
  adr__alloc_table_destroy(t);
}

struct thread_arg {
  struct adr__alloc_table* t;
  uintptr_t base;
};

static void* hammer(void* p) {
  struct thread_arg* a = p;
  for (int round = 0; round < 20; round++) {
    for (uintptr_t i = 0; i < 2000; i++)
      if (adr__alloc_table_insert(a->t, (void*)(a->base + i * 64), 64) != 0) return (void*)1;
    for (uintptr_t i = 0; i < 2000; i++)
      if (adr__alloc_table_remove(a->t, (void*)(a->base + i * 64), 64, NULL) != 0) return (void*)1;
  }
  return NULL;
}

static void test_concurrent(void** state) {
  (void)state;
  struct adr__alloc_table* t = adr__alloc_table_create();
  pthread_t th[4];
  struct thread_arg args[4];
  for (int i = 0; i < 4; i++) {
    args[i].t = t;
    args[i].base = (uintptr_t)(i + 1) << 32;
    assert_int_equal(pthread_create(&th[i], NULL, hammer, &args[i]), 0);
  }
  for (int i = 0; i < 4; i++) {
    void* rv = (void*)1;
    pthread_join(th[i], &rv);
    assert_null(rv);
  }
  assert_int_equal(adr__alloc_table_count(t), 0);
  adr__alloc_table_destroy(t);
}

/* Shards follow chunks: a chunk assigned to an owner sends every address
 * in it to the owner's shard, also in the regions it shares with its
 * neighbours, whose addresses keep their shard; allocations recorded
 * before a neighbour's assignment stay findable. Addresses are never
 * dereferenced. */
static void test_assign_regions(void** state) {
  (void)state;
  struct adr__alloc_table* t = adr__alloc_table_create();
  assert_non_null(t);
  const uintptr_t R = (uintptr_t)2 << 20, base = (uintptr_t)1 << 40;
  /* Chunk A: from 3 pages into one region to 5 pages into the third. */
  uintptr_t a_lo = base + 3 * 4096, a_hi = base + 2 * R + 5 * 4096;
  adr__alloc_table_assign(t, (void*)a_lo, a_hi - a_lo, 5);
  for (uintptr_t p = a_lo; p < a_hi; p += 4096)
    assert_int_equal(adr__alloc_table_shard(t, (void*)p), 5);
  /* Record allocations at A's first and last pages. */
  assert_int_equal(adr__alloc_table_insert(t, (void*)a_lo, 64), 0);
  assert_int_equal(adr__alloc_table_insert(t, (void*)(a_hi - 4096), 64), 0);
  /* Chunk B right after A (owner 9), chunk C right before A (owner 11). */
  uintptr_t b_hi = a_hi + 3 * R;
  adr__alloc_table_assign(t, (void*)a_hi, b_hi - a_hi, 9);
  uintptr_t c_lo = base + 4096;
  adr__alloc_table_assign(t, (void*)c_lo, a_lo - c_lo, 11);
  for (uintptr_t p = a_lo; p < a_hi; p += 4096)
    assert_int_equal(adr__alloc_table_shard(t, (void*)p), 5);
  for (uintptr_t p = a_hi; p < b_hi; p += 4096)
    assert_int_equal(adr__alloc_table_shard(t, (void*)p), 9);
  /* C lies inside one region (A's first): it is left alone. */
  assert_int_equal(adr__alloc_table_shard(t, (void*)a_lo), 5);
  assert_int_equal(adr__alloc_table_remove(t, (void*)a_lo, 64, NULL), 0);
  assert_int_equal(adr__alloc_table_remove(t, (void*)(a_hi - 4096), 64, NULL), 0);
  /* A's end and B's start are given back to a chunk D of owner 2 from two
   * pages before A's end to five pages into B's second region: the pages
   * of A before D keep shard 5, D's go to 2, B's after D keep 9. */
  uintptr_t d_lo = a_hi - 2 * 4096, d_hi = base + 4 * R + 5 * 4096;
  adr__alloc_table_assign(t, (void*)d_lo, d_hi - d_lo, 2);
  assert_int_equal(adr__alloc_table_shard(t, (void*)(d_lo - 4096)), 5);
  for (uintptr_t p = d_lo; p < d_hi; p += 4096)
    assert_int_equal(adr__alloc_table_shard(t, (void*)p), 2);
  for (uintptr_t p = d_hi; p < b_hi; p += 4096)
    assert_int_equal(adr__alloc_table_shard(t, (void*)p), 9);
  /* A chunk inside one region is left to the shards it had. */
  adr__alloc_table_assign(t, (void*)(d_hi + 4096), 2 * 4096, 4);
  assert_int_equal(adr__alloc_table_shard(t, (void*)(d_hi + 4096)), 9);
  /* Unaligned chunks are left alone. */
  unsigned before = adr__alloc_table_shard(t, (void*)(b_hi + 9 * R));
  adr__alloc_table_assign(t, (void*)(b_hi + 8 * R + 100), 4 * R, 3);
  assert_int_equal(adr__alloc_table_shard(t, (void*)(b_hi + 9 * R)), before);
  adr__alloc_table_destroy(t);
}

/* A directory with no room left (a chunk larger than it can describe)
 * sends the rest to the shards of the address hash: every allocation is
 * still found, with its size checked, and removed once. */
static void test_directory_full(void** state) {
  (void)state;
  struct adr__alloc_table* t = adr__alloc_table_create();
  assert_non_null(t);
  const uintptr_t R = (uintptr_t)2 << 20, base = (uintptr_t)1 << 44;
  const uintptr_t regions = (uintptr_t)1 << 17; /* twice the directory's slots */
  adr__alloc_table_assign(t, (void*)base, regions * R, 7);
  unsigned in_owner = 0;
  const uintptr_t step = 997 * R + 4096;
  for (uintptr_t p = base; p < base + regions * R; p += step) {
    assert_int_equal(adr__alloc_table_insert(t, (void*)p, 128), 0);
    in_owner += adr__alloc_table_shard(t, (void*)p) == 7;
  }
  /* Some regions made it into the directory, not all. */
  size_t n = adr__alloc_table_count(t);
  assert_true(in_owner > 0 && in_owner < n);
  for (uintptr_t p = base; p < base + regions * R; p += step) {
    size_t got = 0;
    assert_int_equal(adr__alloc_table_remove(t, (void*)p, 64, &got), ERANGE);
    assert_int_equal(got, 128);
    assert_int_equal(adr__alloc_table_remove(t, (void*)p, 128, NULL), 0);
    assert_int_equal(adr__alloc_table_remove(t, (void*)p, 128, NULL), ENOENT);
  }
  assert_int_equal(adr__alloc_table_count(t), 0);
  adr__alloc_table_destroy(t);
}

struct assign_arg {
  struct adr__alloc_table* t;
  uintptr_t lo, hi;
  unsigned owner;
  int errors;
};

/* Assigns its chunk, then records and removes allocations in it. */
static void* assign_and_hammer(void* p) {
  struct assign_arg* a = p;
  for (int round = 0; round < 50; round++) {
    adr__alloc_table_assign(a->t, (void*)a->lo, a->hi - a->lo, a->owner);
    for (uintptr_t q = a->lo; q < a->hi; q += 4096)
      if (adr__alloc_table_insert(a->t, (void*)q, 64) != 0 ||
          adr__alloc_table_shard(a->t, (void*)q) != a->owner)
        a->errors++;
    for (uintptr_t q = a->lo; q < a->hi; q += 4096)
      if (adr__alloc_table_remove(a->t, (void*)q, 64, NULL) != 0) a->errors++;
  }
  return NULL;
}

/* Neighbouring chunks that share regions, each assigned again and again
 * by its own thread while the other records allocations in its part: no
 * update of a shared region's entry loses the other chunk's shard. */
static void test_assign_concurrent(void** state) {
  (void)state;
  struct adr__alloc_table* t = adr__alloc_table_create();
  assert_non_null(t);
  const uintptr_t R = (uintptr_t)2 << 20, base = (uintptr_t)1 << 42;
  enum { N = 4 };
  struct assign_arg args[N];
  pthread_t th[N];
  for (int i = 0; i < N; i++) {
    /* Boundaries at odd pages: every chunk shares a region each side. */
    args[i] = (struct assign_arg){t, base + (uintptr_t)i * (R + 3 * 4096) + 4096,
                                  base + (uintptr_t)(i + 1) * (R + 3 * 4096) + 4096,
                                  (unsigned)(10 + i), 0};
    assert_int_equal(pthread_create(&th[i], NULL, assign_and_hammer, &args[i]), 0);
  }
  for (int i = 0; i < N; i++) {
    pthread_join(th[i], NULL);
    assert_int_equal(args[i].errors, 0);
  }
  assert_int_equal(adr__alloc_table_count(t), 0);
  adr__alloc_table_destroy(t);
}

/* The interval index built late from the hash (by its first look-up, or
 * interop.c on a device whose index was not kept), racing nothing here:
 * every allocation is
 * found with its own bounds, one past the end is not, and a start added
 * twice (the build and alloc.c both) is one entry. */
static void test_ranges_build_and_duplicates(void** state) {
  (void)state;
  struct adr__alloc_table* t = adr__alloc_table_create();
  assert_non_null(t);
  const size_t n = 5000;
  for (size_t i = 1; i <= n; i++)
    assert_int_equal(adr__alloc_table_insert(t, (void*)(uintptr_t)(i * 256), 100 + i % 100), 0);
  struct adr__range r;
  /* The first look-up builds the index from the hash (it is lazy). */
  assert_false(adr__alloc_table_ranges_live(t));
  assert_true(adr__alloc_table_ranges_find(t, (void*)(uintptr_t)256, &r));
  assert_true(adr__alloc_table_ranges_live(t));
  /* Some already in the index (as alloc.c adds them once it keeps it). */
  for (size_t i = 1; i <= n; i += 7)
    assert_int_equal(
        adr__alloc_table_ranges_insert(t, (void*)(uintptr_t)(i * 256), 100 + i % 100, NULL), 0);
  assert_int_equal(adr__alloc_table_ranges_build(t), 0);
  assert_int_equal(adr__alloc_table_ranges_foreach(t, NULL, NULL), n);
  for (size_t i = 1; i <= n; i++) {
    uintptr_t base = i * 256;
    size_t size = 100 + i % 100;
    assert_true(adr__alloc_table_ranges_find(t, (void*)(base + size - 1), &r));
    assert_int_equal(r.start, base);
    assert_int_equal(r.size, size);
    assert_false(adr__alloc_table_ranges_find(t, (void*)(base + size), &r));
  }
  /* Added again: still one entry. */
  assert_int_equal(adr__alloc_table_ranges_insert(t, (void*)(uintptr_t)256, 101, NULL), 0);
  assert_int_equal(adr__alloc_table_ranges_foreach(t, NULL, NULL), n);
  assert_int_equal(adr__alloc_table_ranges_build(t), 0);
  assert_int_equal(adr__alloc_table_ranges_foreach(t, NULL, NULL), n);
  adr__alloc_table_ranges_remove(t, (void*)(uintptr_t)256);
  assert_false(adr__alloc_table_ranges_find(t, (void*)(uintptr_t)256, &r));
  adr__alloc_table_destroy(t);
}

/* The lazy build racing allocations and frees done as alloc.c does them
 * (insert_indexed, remove_indexed: the hash, and the index once it is
 * live, under the shard's lock): afterwards the index holds exactly what
 * the hash holds, and every free that found the index live took its range
 * out. */
struct race_arg {
  struct adr__alloc_table* t;
  uintptr_t base;
  char site; /* its address: the writer's call site */
  int ranged; /* frees that found the index live */
};

static void* race_writer(void* p) {
  struct race_arg* a = p;
  for (int round = 0; round < 10; round++) {
    /* The build races the first rounds; the last ones run after it. */
    if (round == 5)
      while (!adr__alloc_table_ranges_live(a->t)) sched_yield();
    for (uintptr_t i = 0; i < 1000; i++) {
      void* q = (void*)(a->base + i * 128);
      if (adr__alloc_table_insert_indexed(a->t, q, 100, NULL, NULL, &a->site, false) != 0)
        return (void*)1;
    }
    for (uintptr_t i = 0; i < 1000; i++) {
      if (round == 9 && i % 2 == 1) continue;
      void* q = (void*)(a->base + i * 128);
      const void* site = NULL;
      bool ranged = false;
      if (adr__alloc_table_remove_indexed(a->t, q, 100, NULL, NULL, NULL, false, &site,
                                          &ranged) != 0)
        return (void*)1;
      /* Live when it was removed: its range was there, from the insert
       * (with the site) or from the build (none). */
      if (ranged && adr__alloc_table_ranges_live(a->t) && site != &a->site && site != NULL)
        return (void*)1;
      if (ranged) a->ranged++;
    }
  }
  return NULL;
}

static void test_ranges_lazy_build_race(void** state) {
  (void)state;
  struct adr__alloc_table* t = adr__alloc_table_create();
  assert_non_null(t);
  pthread_t th[2];
  struct race_arg args[2];
  for (int i = 0; i < 2; i++) {
    args[i] = (struct race_arg){t, (uintptr_t)(i + 1) << 32, 0, 0};
    assert_int_equal(pthread_create(&th[i], NULL, race_writer, &args[i]), 0);
  }
  struct adr__range r;
  (void)adr__alloc_table_ranges_find(t, (void*)(uintptr_t)1, &r); /* builds it */
  for (int i = 0; i < 2; i++) {
    void* rv = (void*)1;
    pthread_join(th[i], &rv);
    assert_null(rv);
  }
  /* Left: the odd entries of the last round, 500 per writer. */
  assert_int_equal(adr__alloc_table_count(t), 1000);
  assert_int_equal(adr__alloc_table_ranges_foreach(t, NULL, NULL), 1000);
  for (int w = 0; w < 2; w++) {
    assert_true(args[w].ranged > 0);
    for (uintptr_t i = 0; i < 1000; i++) {
      bool found = adr__alloc_table_ranges_find(t, (void*)(args[w].base + i * 128 + 5), &r);
      assert_int_equal(found, (i % 2) == 1);
      if (found) assert_true(r.site == &args[w].site || r.site == NULL);
    }
  }
  /* The validation layer's records go to the index before it is built
   * (sites kept); the build then adds nothing twice. */
  struct adr__alloc_table* v = adr__alloc_table_create();
  assert_non_null(v);
  assert_int_equal(adr__alloc_table_insert_indexed(v, (void*)(uintptr_t)0x10000, 64, NULL, NULL,
                                                   &args[0].site, true),
                   0);
  assert_false(adr__alloc_table_ranges_live(v));
  assert_true(adr__alloc_table_ranges_find(v, (void*)(uintptr_t)0x10020, &r)); /* builds */
  assert_ptr_equal(r.site, &args[0].site);
  assert_int_equal(adr__alloc_table_ranges_foreach(v, NULL, NULL), 1);
  const void* site = NULL;
  bool ranged = false;
  assert_int_equal(adr__alloc_table_remove_indexed(v, (void*)(uintptr_t)0x10000, 64, NULL, NULL,
                                                   NULL, true, &site, &ranged),
                   0);
  assert_true(ranged);
  assert_ptr_equal(site, &args[0].site);
  assert_int_equal(adr__alloc_table_ranges_foreach(v, NULL, NULL), 0);
  adr__alloc_table_destroy(v);
  adr__alloc_table_destroy(t);
}

/* A free whose handler failed puts the allocation back (insert_live, as
 * adr_free does): into the index too when the index went live between the
 * removal and the re-insert (the build did not see the allocation: it was
 * out of the hash), and with its site when the layer kept one. */
static void test_ranges_free_undone(void** state) {
  (void)state;
  struct adr__alloc_table* t = adr__alloc_table_create();
  assert_non_null(t);
  void* p = (void*)(uintptr_t)0x40000;
  struct adr__range r;
  const void* site = NULL;
  bool ranged = true;
  assert_int_equal(adr__alloc_table_insert_indexed(t, p, 256, NULL, NULL, NULL, false), 0);
  assert_int_equal(
      adr__alloc_table_remove_indexed(t, p, 256, NULL, NULL, NULL, false, &site, &ranged), 0);
  assert_false(ranged);                                            /* not live yet */
  assert_false(adr__alloc_table_ranges_find(t, (char*)p + 8, &r)); /* builds it, empty */
  assert_int_equal(adr__alloc_table_insert_live(t, p, 256, NULL, NULL, NULL, false), 0);
  assert_true(adr__alloc_table_ranges_find(t, (char*)p + 8, &r));
  assert_int_equal(r.start, (uintptr_t)p);
  assert_int_equal(r.size, 256);
  /* Live: out and back with the site the removal returned. */
  static const char where = 0;
  assert_int_equal(
      adr__alloc_table_remove_indexed(t, p, 256, NULL, NULL, NULL, false, &site, &ranged), 0);
  assert_true(ranged);
  assert_false(adr__alloc_table_ranges_find(t, (char*)p + 8, &r));
  assert_int_equal(adr__alloc_table_insert_live(t, p, 256, NULL, NULL, &where, false), 0);
  assert_true(adr__alloc_table_ranges_find(t, (char*)p + 8, &r));
  assert_ptr_equal(r.site, &where);
  assert_int_equal(adr__alloc_table_ranges_foreach(t, NULL, NULL), 1);
  assert_int_equal(adr__alloc_table_count(t), 1);
  adr__alloc_table_destroy(t);
}

/* Records an allocation as alloc.c does (the index is live in the tests
 * that use these). */
static int record(struct adr__alloc_table* t, uintptr_t p, size_t size) {
  return adr__alloc_table_insert_indexed(t, (void*)p, size, NULL, NULL, NULL, false);
}
static int unrecord(struct adr__alloc_table* t, uintptr_t p, size_t size) {
  const void* site;
  bool ranged;
  int st = adr__alloc_table_remove_indexed(t, (void*)p, size, NULL, NULL, NULL, false, &site,
                                           &ranged);
  return st == 0 && !ranged ? EINVAL : st;
}

struct order_ctx {
  uintptr_t last;
  size_t n;
  int unordered;
};
static void on_range(void* p, const struct adr__range* r) {
  struct order_ctx* o = p;
  if (o->n++ > 0 && r->start <= o->last) o->unordered++;
  o->last = r->start;
}

/* The index is sharded like the hash: an allocation inside a chunk is in
 * the index of the chunk's shard, one across two chunks of different
 * shards (or over a region with no directory entry) in the index of
 * ranges that span shards, and each is found from every address it
 * holds, removed from where it is, listed in address order. */
static void test_ranges_sharded(void** state) {
  (void)state;
  struct adr__alloc_table* t = adr__alloc_table_create();
  assert_non_null(t);
  struct adr__range r;
  (void)adr__alloc_table_ranges_find(t, (void*)(uintptr_t)1, &r); /* live from here on */
  const uintptr_t R = (uintptr_t)2 << 20, base = (uintptr_t)1 << 41;
  /* Chunk A (owner 3) ends 7 pages into a region where chunk B (owner 5)
   * starts and goes on for two regions more. */
  uintptr_t a_lo = base, a_hi = base + R + 7 * 4096, b_hi = a_hi + 2 * R;
  adr__alloc_table_assign(t, (void*)a_lo, a_hi - a_lo, 3);
  adr__alloc_table_assign(t, (void*)a_hi, b_hi - a_hi, 5);
  assert_int_equal(record(t, a_lo + 4096, 4096), 0);
  assert_int_equal(record(t, a_hi - 3 * 4096, 4096), 0);     /* A, in the region B starts in */
  assert_int_equal(record(t, a_hi + 2 * 4096, 3 * 4096), 0); /* B, in that region too */
  assert_int_equal(record(t, a_hi + R, R), 0);               /* B, across a region boundary */
  uintptr_t across = a_hi - 2 * 4096;                        /* A's and B's pages: two shards */
  assert_int_equal(record(t, across, 4 * 4096), 0);
  uintptr_t foreign = (uintptr_t)1 << 45; /* a region nobody assigned: claimed */
  assert_int_equal(record(t, foreign, 64), 0);
  assert_int_equal(adr__alloc_table_ranges_home(t, (void*)(a_lo + 4096)), 3);
  assert_int_equal(adr__alloc_table_ranges_home(t, (void*)(a_hi - 3 * 4096)), 3);
  assert_int_equal(adr__alloc_table_ranges_home(t, (void*)(a_hi + 2 * 4096)), 5);
  assert_int_equal(adr__alloc_table_ranges_home(t, (void*)(a_hi + R)), 5);
  assert_int_equal(adr__alloc_table_ranges_home(t, (void*)across), 64);
  assert_int_equal(adr__alloc_table_ranges_home(t, (void*)foreign),
                   (int)adr__alloc_table_shard(t, (void*)foreign));
  /* Larger than the walk: spans shards without one. */
  uintptr_t huge = (uintptr_t)1 << 46;
  assert_int_equal(record(t, huge, 65 * R), 0);
  assert_int_equal(adr__alloc_table_ranges_home(t, (void*)huge), 64);
  /* Every address found, in its own allocation. */
  const uintptr_t starts[] = {
      a_lo + 4096, a_hi - 3 * 4096, a_hi + 2 * 4096, a_hi + R, across, foreign, huge};
  const size_t sizes[] = {4096, 4096, 3 * 4096, R, 4 * 4096, 64, 65 * R};
  for (size_t i = 0; i < 7; i++) {
    uintptr_t probes[] = {starts[i], starts[i] + sizes[i] / 2, starts[i] + sizes[i] - 1};
    for (int k = 0; k < 3; k++) {
      assert_true(adr__alloc_table_ranges_find(t, (void*)probes[k], &r));
      assert_int_equal(r.start, starts[i]);
      assert_int_equal(r.size, sizes[i]);
    }
  }
  /* Address order across the indexes. */
  struct order_ctx o = {0, 0, 0};
  assert_int_equal(adr__alloc_table_ranges_foreach(t, on_range, &o), 7);
  assert_int_equal(o.n, 7);
  assert_int_equal(o.unordered, 0);
  /* Removed from where they are: not found afterwards, nothing left. */
  for (size_t i = 0; i < 7; i++) {
    assert_int_equal(unrecord(t, starts[i], sizes[i]), 0);
    assert_false(adr__alloc_table_ranges_find(t, (void*)(starts[i] + sizes[i] / 2), &r));
    assert_int_equal(adr__alloc_table_ranges_home(t, (void*)starts[i]), -1);
  }
  assert_int_equal(adr__alloc_table_ranges_foreach(t, NULL, NULL), 0);
  adr__alloc_table_destroy(t);
}

/* A thread's cached "not found" is not trusted once an allocation holding
 * the address was added: in the address's shard, in the index of ranges
 * that span shards, or in a shard the address was not in when asked (a
 * new chunk's addresses change shard while it holds nothing). */
static void test_ranges_negative_cache(void** state) {
  (void)state;
  struct adr__alloc_table* t = adr__alloc_table_create();
  assert_non_null(t);
  struct adr__range r;
  const uintptr_t R = (uintptr_t)2 << 20, base = (uintptr_t)1 << 42;
  (void)adr__alloc_table_ranges_find(t, (void*)(uintptr_t)1, &r);
  /* 1. A region nobody has seen: no shard yet. */
  uintptr_t p = base + R / 2;
  assert_false(adr__alloc_table_ranges_find(t, (void*)p, &r));
  assert_false(adr__alloc_table_ranges_find(t, (void*)p, &r)); /* cached */
  /* It becomes a chunk of owner 6 and an allocation holds p. */
  adr__alloc_table_assign(t, (void*)base, R, 6);
  assert_int_equal(record(t, p - 64, 128), 0);
  assert_int_equal(adr__alloc_table_ranges_home(t, (void*)(p - 64)), 6);
  assert_true(adr__alloc_table_ranges_find(t, (void*)p, &r));
  assert_int_equal(r.start, p - 64);
  /* 2. Freed: not found; an allocation across this chunk and the next
   * (owner 8) then holds it, from the index of ranges that span shards. */
  assert_int_equal(unrecord(t, p - 64, 128), 0);
  assert_false(adr__alloc_table_ranges_find(t, (void*)p, &r));
  assert_false(adr__alloc_table_ranges_find(t, (void*)p, &r));
  adr__alloc_table_assign(t, (void*)(base + R), R, 8);
  assert_int_equal(record(t, p, R), 0);
  assert_int_equal(adr__alloc_table_ranges_home(t, (void*)p), 64);
  assert_true(adr__alloc_table_ranges_find(t, (void*)p, &r));
  assert_int_equal(r.start, p);
  assert_true(adr__alloc_table_ranges_find(t, (void*)(p + R / 2 + 8), &r));
  /* 3. A found answer is dropped once its allocation is freed. */
  assert_int_equal(unrecord(t, p, R), 0);
  assert_false(adr__alloc_table_ranges_find(t, (void*)(p + 8), &r));
  adr__alloc_table_destroy(t);
}

/* Threads each recording, finding and removing allocations in chunks of
 * their own shards (as alloc.c and copy.c do), while all of them find an
 * allocation that spans two of the chunks: every answer right, every
 * range in its chunk's index. */
struct shard_arg {
  struct adr__alloc_table* t;
  uintptr_t lo;
  int owner;
  uintptr_t span;
  int errors;
};

static void* shard_worker(void* p) {
  struct shard_arg* a = p;
  struct adr__range r;
  for (int round = 0; round < 200; round++) {
    for (uintptr_t i = 0; i < 16; i++)
      if (record(a->t, a->lo + i * 8192, 4096 + i) != 0 ||
          adr__alloc_table_ranges_home(a->t, (void*)(a->lo + i * 8192)) != a->owner)
        a->errors++;
    for (uintptr_t i = 0; i < 16; i++) {
      if (!adr__alloc_table_ranges_find(a->t, (void*)(a->lo + i * 8192 + 4000), &r) ||
          r.start != a->lo + i * 8192)
        a->errors++;
      if (adr__alloc_table_ranges_find(a->t, (void*)(a->lo + i * 8192 + 4096 + i), &r))
        a->errors++; /* one past the end */
      if (!adr__alloc_table_ranges_find(a->t, (void*)(a->span + 4096 * (uintptr_t)round), &r) ||
          r.start != a->span)
        a->errors++;
    }
    for (uintptr_t i = 0; i < 16; i++)
      if (unrecord(a->t, a->lo + i * 8192, 4096 + i) != 0) a->errors++;
  }
  return NULL;
}

static void test_ranges_concurrent_shards(void** state) {
  (void)state;
  struct adr__alloc_table* t = adr__alloc_table_create();
  assert_non_null(t);
  struct adr__range r;
  (void)adr__alloc_table_ranges_find(t, (void*)(uintptr_t)1, &r);
  const uintptr_t R = (uintptr_t)2 << 20, base = (uintptr_t)1 << 43;
  enum { N = 4 };
  for (int i = 0; i < N; i++)
    adr__alloc_table_assign(t, (void*)(base + (uintptr_t)i * 4 * R), 4 * R, (unsigned)(20 + i));
  /* The last MiB of chunk 0 and the first of chunk 1. */
  uintptr_t span = base + 4 * R - R / 2;
  assert_int_equal(record(t, span, R), 0);
  assert_int_equal(adr__alloc_table_ranges_home(t, (void*)span), 64);
  struct shard_arg args[N];
  pthread_t th[N];
  for (int i = 0; i < N; i++) {
    args[i] = (struct shard_arg){t, base + (uintptr_t)i * 4 * R + R, 20 + i, span, 0};
    assert_int_equal(pthread_create(&th[i], NULL, shard_worker, &args[i]), 0);
  }
  for (int i = 0; i < N; i++) {
    pthread_join(th[i], NULL);
    assert_int_equal(args[i].errors, 0);
  }
  assert_int_equal(adr__alloc_table_ranges_foreach(t, NULL, NULL), 1);
  assert_int_equal(unrecord(t, span, R), 0);
  assert_int_equal(adr__alloc_table_count(t), 0);
  adr__alloc_table_destroy(t);
}

/* ---- live figures: current and peak bytes and count, kept in the shards */

static struct adr__live_figures live_of(struct adr__alloc_table* t) {
  struct adr__live_figures f;
  adr__alloc_table_live(t, &f);
  return f;
}

/* Allocations counted in one shard and freed, then counted in another:
 * the second shard takes the first one's spare budget (the peak stays),
 * and rises only by what the sum exceeds it by. */
static void test_live_peaks_across_shards(void** state) {
  (void)state;
  struct adr__alloc_table* t = adr__alloc_table_create();
  assert_non_null(t);
  const uintptr_t R = (uintptr_t)2 << 20, base = (uintptr_t)1 << 44;
  uintptr_t a = base, b = base + 4 * R; /* chunks of owners 7 and 8 */
  adr__alloc_table_assign(t, (void*)a, 4 * R, 7);
  adr__alloc_table_assign(t, (void*)b, 4 * R, 8);
  const size_t MiB = (size_t)1 << 20;
  /* One shard alone: every insert raises the peak under its lock. */
  for (int i = 0; i < 4; i++)
    assert_int_equal(
        adr__alloc_table_insert_counted(t, (void*)(a + (uintptr_t)i * MiB), MiB, NULL, NULL), 0);
  struct adr__live_figures f = live_of(t);
  assert_int_equal(f.bytes, 4 * MiB);
  assert_int_equal(f.count, 4);
  assert_int_equal(f.bytes_peak, 4 * MiB);
  assert_int_equal(f.count_peak, 4);
  for (int i = 0; i < 4; i++)
    assert_int_equal(
        adr__alloc_table_remove_counted(t, (void*)(a + (uintptr_t)i * MiB), MiB, NULL, NULL, NULL),
        0);
  f = live_of(t);
  assert_int_equal(f.bytes, 0);
  assert_int_equal(f.bytes_peak, 4 * MiB);
  /* Three in the other shard: below the peak, which stays. */
  for (int i = 0; i < 3; i++)
    assert_int_equal(
        adr__alloc_table_insert_counted(t, (void*)(b + (uintptr_t)i * MiB), MiB, NULL, NULL), 0);
  f = live_of(t);
  assert_int_equal(f.bytes, 3 * MiB);
  assert_int_equal(f.bytes_peak, 4 * MiB);
  assert_int_equal(f.count_peak, 4);
  /* Two more in the first: 5 live, the peak rises by exactly one. */
  for (int i = 0; i < 2; i++)
    assert_int_equal(
        adr__alloc_table_insert_counted(t, (void*)(a + (uintptr_t)i * MiB), MiB, NULL, NULL), 0);
  f = live_of(t);
  assert_int_equal(f.bytes, 5 * MiB);
  assert_int_equal(f.count, 5);
  assert_int_equal(f.bytes_peak, 5 * MiB);
  assert_int_equal(f.count_peak, 5);
  /* Uncounted entries (remove_data, insert_data) leave the figures alone;
   * insert_live counts again without the totals. */
  uint64_t tb = 0, tc = 0;
  adr__alloc_table_totals(t, &tb, &tc);
  assert_int_equal(tb, 9 * MiB);
  assert_int_equal(tc, 9);
  assert_int_equal(adr__alloc_table_remove_counted(t, (void*)b, MiB, NULL, NULL, NULL), 0);
  assert_int_equal(adr__alloc_table_insert_live(t, (void*)b, MiB, NULL, NULL, NULL, false), 0);
  assert_int_equal(adr__alloc_table_insert_data(t, (void*)(b + 3 * MiB), 64, NULL, NULL), 0);
  f = live_of(t);
  assert_int_equal(f.bytes, 5 * MiB);
  assert_int_equal(f.count, 5);
  adr__alloc_table_totals(t, &tb, &tc);
  assert_int_equal(tc, 9);
  assert_int_equal(adr__alloc_table_remove_data(t, (void*)(b + 3 * MiB), 64, NULL, NULL, NULL), 0);
  /* A size mismatch removes and uncounts nothing. */
  size_t got = 0;
  assert_int_equal(adr__alloc_table_remove_counted(t, (void*)b, 64, &got, NULL, NULL), ERANGE);
  assert_int_equal(got, MiB);
  assert_int_equal(live_of(t).bytes, 5 * MiB);
  /* Reset: the peaks become the current values, exactly. */
  for (int i = 0; i < 3; i++)
    assert_int_equal(
        adr__alloc_table_remove_counted(t, (void*)(b + (uintptr_t)i * MiB), MiB, NULL, NULL, NULL),
        0);
  adr__alloc_table_live_reset_peaks(t);
  f = live_of(t);
  assert_int_equal(f.bytes, 2 * MiB);
  assert_int_equal(f.bytes_peak, 2 * MiB);
  assert_int_equal(f.count_peak, 2);
  /* After the reset the shard that freed has no spare: a new one there
   * raises the peak. */
  assert_int_equal(adr__alloc_table_insert_counted(t, (void*)b, MiB, NULL, NULL), 0);
  f = live_of(t);
  assert_int_equal(f.bytes_peak, 3 * MiB);
  assert_int_equal(f.count_peak, 3);
  assert_int_equal(adr__alloc_table_remove_counted(t, (void*)b, MiB, NULL, NULL, NULL), 0);
  for (int i = 0; i < 2; i++)
    assert_int_equal(
        adr__alloc_table_remove_counted(t, (void*)(a + (uintptr_t)i * MiB), MiB, NULL, NULL, NULL),
        0);
  assert_int_equal(live_of(t).bytes, 0);
  assert_int_equal(adr__alloc_table_count(t), 0);
  adr__alloc_table_destroy(t);
}

/* Two threads taking turns at one working set (never holding at once)
 * after the peak made room for both: the budget moves once, not on every
 * allocation (the rule that gave the donor's spare away by halves left
 * the donor short each time, and every allocation took the slow path
 * with every shard held). */
static void test_live_turns_settle(void** state) {
  (void)state;
  struct adr__alloc_table* t = adr__alloc_table_create();
  assert_non_null(t);
  const uintptr_t R = (uintptr_t)2 << 20, base = (uintptr_t)1 << 46;
  uintptr_t a = base, b = base + R;
  adr__alloc_table_assign(t, (void*)a, R, 3);
  adr__alloc_table_assign(t, (void*)b, R, 4);
  /* Shard A holds two blocks at once: the peak (and A's budget) is 8 KiB. */
  for (int i = 0; i < 2; i++)
    assert_int_equal(
        adr__alloc_table_insert_counted(t, (void*)(a + (uintptr_t)i * 4096), 4096, NULL, NULL), 0);
  for (int i = 0; i < 2; i++)
    assert_int_equal(adr__alloc_table_remove_counted(t, (void*)(a + (uintptr_t)i * 4096), 4096,
                                                     NULL, NULL, NULL),
                     0);
  uint64_t before = adr__alloc_table_live_slow_paths(t);
  for (int round = 0; round < 100; round++) {
    assert_int_equal(adr__alloc_table_insert_counted(t, (void*)b, 4096, NULL, NULL), 0);
    assert_int_equal(adr__alloc_table_remove_counted(t, (void*)b, 4096, NULL, NULL, NULL), 0);
    assert_int_equal(adr__alloc_table_insert_counted(t, (void*)a, 4096, NULL, NULL), 0);
    assert_int_equal(adr__alloc_table_remove_counted(t, (void*)a, 4096, NULL, NULL, NULL), 0);
  }
  assert_true(adr__alloc_table_live_slow_paths(t) - before <= 1);
  struct adr__live_figures f = live_of(t);
  assert_int_equal(f.bytes, 0);
  assert_int_equal(f.bytes_peak, 8192);
  assert_int_equal(f.count_peak, 2);
  adr__alloc_table_destroy(t);
}

struct live_arg {
  struct adr__alloc_table* t;
  uintptr_t base;
  pthread_barrier_t* start;
  int errors;
};

enum { LIVE_THREADS = 4, LIVE_HELD = 16, LIVE_ROUNDS = 2000 };

/* Counts LIVE_HELD allocations of 4 KiB in its chunk and frees them,
 * LIVE_ROUNDS times: a shard that grows while another has freed takes
 * that one's spare budget, so budgets move between shards all the time. */
static void* live_worker(void* p) {
  struct live_arg* a = p;
  pthread_barrier_wait(a->start);
  for (int r = 0; r < LIVE_ROUNDS; r++) {
    for (int i = 0; i < LIVE_HELD; i++)
      if (adr__alloc_table_insert_counted(a->t, (void*)(a->base + (uintptr_t)i * 4096), 4096, NULL,
                                          NULL) != 0)
        a->errors++;
    struct adr__live_figures f;
    adr__alloc_table_live(a->t, &f);
    if (f.bytes_peak < f.bytes || f.count_peak < f.count) a->errors++;
    for (int i = 0; i < LIVE_HELD; i++)
      if (adr__alloc_table_remove_counted(a->t, (void*)(a->base + (uintptr_t)i * 4096), 4096, NULL,
                                          NULL, NULL) != 0)
        a->errors++;
  }
  return NULL;
}

/* Threads counting in shards of their own: afterwards nothing is live,
 * and the peak lies between what one thread held and what all held. */
static void test_live_concurrent(void** state) {
  (void)state;
  struct adr__alloc_table* t = adr__alloc_table_create();
  assert_non_null(t);
  const uintptr_t R = (uintptr_t)2 << 20, base = (uintptr_t)1 << 45;
  pthread_barrier_t start;
  pthread_barrier_init(&start, NULL, LIVE_THREADS);
  struct live_arg args[LIVE_THREADS];
  pthread_t th[LIVE_THREADS];
  for (int i = 0; i < LIVE_THREADS; i++) {
    uintptr_t chunk = base + (uintptr_t)i * R;
    adr__alloc_table_assign(t, (void*)chunk, R, (unsigned)(30 + i));
    args[i] = (struct live_arg){t, chunk, &start, 0};
  }
  for (int i = 0; i < LIVE_THREADS; i++)
    assert_int_equal(pthread_create(&th[i], NULL, live_worker, &args[i]), 0);
  for (int i = 0; i < LIVE_THREADS; i++) {
    pthread_join(th[i], NULL);
    assert_int_equal(args[i].errors, 0);
  }
  pthread_barrier_destroy(&start);
  struct adr__live_figures f = live_of(t);
  assert_int_equal(f.bytes, 0);
  assert_int_equal(f.count, 0);
  assert_true(f.count_peak >= LIVE_HELD);
  assert_true(f.count_peak <= LIVE_THREADS * LIVE_HELD);
  assert_true(f.bytes_peak >= LIVE_HELD * 4096);
  assert_true(f.bytes_peak <= LIVE_THREADS * LIVE_HELD * 4096);
  uint64_t tb = 0, tc = 0;
  adr__alloc_table_totals(t, &tb, &tc);
  assert_int_equal(tc, (uint64_t)LIVE_THREADS * LIVE_HELD * LIVE_ROUNDS);
  adr__alloc_table_destroy(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_insert_remove),
      cmocka_unit_test(test_many_entries),
      cmocka_unit_test(test_concurrent),
      cmocka_unit_test(test_assign_regions),
      cmocka_unit_test(test_directory_full),
      cmocka_unit_test(test_assign_concurrent),
      cmocka_unit_test(test_ranges_build_and_duplicates),
      cmocka_unit_test(test_ranges_lazy_build_race),
      cmocka_unit_test(test_ranges_free_undone),
      cmocka_unit_test(test_ranges_sharded),
      cmocka_unit_test(test_ranges_negative_cache),
      cmocka_unit_test(test_ranges_concurrent_shards),
      cmocka_unit_test(test_live_peaks_across_shards),
      cmocka_unit_test(test_live_turns_settle),
      cmocka_unit_test(test_live_concurrent),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
