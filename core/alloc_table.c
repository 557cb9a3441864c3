/* SPDX-License-Identifier: Apache-2.0
 *
 * The per-device table of live allocations (address -> size, and the
 * allocation handler each came from), which lets adr_free refuse unknown
 * pointers, double frees and wrong sizes before anything reaches a handler,
 * and return every allocation to the handler that made it.
 *
 * Concurrency: the table is split into shards by address hash, each an
 * open-addressing hash table (linear probing, backward-shift deletion, so
 * no tombstones accumulate) under its own mutex. Threads allocating on one
 * device contend only when their addresses hash to the same shard.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define SHARDS 64

struct entry {
  uintptr_t key; /* 0 = empty */
  size_t size;
  const void* data;
  void* cookie;
};

struct shard {
  pthread_mutex_t lock;
  struct entry* slots;
  size_t cap; /* power of two */
  size_t count;
  char pad[64 - sizeof(pthread_mutex_t) % 64];
};

struct adr__range_index;

struct adr__alloc_table {
  struct shard shards[SHARDS];
  struct adr__range_index* ranges; /* created with the table */
};

static struct adr__range_index* range_index_create(void);
static void range_index_destroy(struct adr__range_index* x);

static inline uint64_t mix(uintptr_t p) {
  uint64_t x = (uint64_t)p;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

struct adr__alloc_table* adr__alloc_table_create(void) {
  struct adr__alloc_table* t = calloc(1, sizeof(*t));
  if (t == NULL) return NULL;
  for (int i = 0; i < SHARDS; i++) pthread_mutex_init(&t->shards[i].lock, NULL);
  t->ranges = range_index_create();
  if (t->ranges == NULL) {
    adr__alloc_table_destroy(t);
    return NULL;
  }
  return t;
}

void adr__alloc_table_destroy(struct adr__alloc_table* t) {
  if (t == NULL) return;
  for (int i = 0; i < SHARDS; i++) {
    pthread_mutex_destroy(&t->shards[i].lock);
    free(t->shards[i].slots);
  }
  range_index_destroy(t->ranges);
  free(t);
}

static struct shard* shard_of(struct adr__alloc_table* t, uintptr_t key, uint64_t* hash) {
  *hash = mix(key);
  return &t->shards[*hash % SHARDS];
}

static int rehash(struct shard* s, size_t cap) {
  struct entry* slots = calloc(cap, sizeof(*slots));
  if (slots == NULL) return ENOMEM;
  for (size_t i = 0; i < s->cap; i++) {
    if (s->slots[i].key == 0) continue;
    size_t j = (mix(s->slots[i].key) / SHARDS) & (cap - 1);
    while (slots[j].key != 0) j = (j + 1) & (cap - 1);
    slots[j] = s->slots[i];
  }
  free(s->slots);
  s->slots = slots;
  s->cap = cap;
  return 0;
}

int adr__alloc_table_insert(struct adr__alloc_table* t, void* ptr, size_t size) {
  return adr__alloc_table_insert_data(t, ptr, size, NULL, NULL);
}

int adr__alloc_table_insert_data(struct adr__alloc_table* t, void* ptr, size_t size,
                                 const void* data, void* cookie) {
  uint64_t h;
  uintptr_t key = (uintptr_t)ptr;
  struct shard* s = shard_of(t, key, &h);
  pthread_mutex_lock(&s->lock);
  if ((s->count + 1) * 4 > s->cap * 3) {
    if (rehash(s, s->cap ? s->cap * 2 : 16) != 0) {
      pthread_mutex_unlock(&s->lock);
      return ENOMEM;
    }
  }
  size_t i = (h / SHARDS) & (s->cap - 1);
  while (s->slots[i].key != 0 && s->slots[i].key != key) i = (i + 1) & (s->cap - 1);
  if (s->slots[i].key == 0) s->count++;
  s->slots[i].key = key;
  s->slots[i].size = size;
  s->slots[i].data = data;
  s->slots[i].cookie = cookie;
  pthread_mutex_unlock(&s->lock);
  return 0;
}

int adr__alloc_table_remove(struct adr__alloc_table* t, void* ptr, size_t size, size_t* out_size) {
  return adr__alloc_table_remove_data(t, ptr, size, out_size, NULL, NULL);
}

int adr__alloc_table_remove_data(struct adr__alloc_table* t, void* ptr, size_t size,
                                 size_t* out_size, const void** out_data, void** out_cookie) {
  uint64_t h;
  uintptr_t key = (uintptr_t)ptr;
  struct shard* s = shard_of(t, key, &h);
  int st = ENOENT;
  pthread_mutex_lock(&s->lock);
  if (s->cap != 0) {
    size_t mask = s->cap - 1;
    size_t i = (h / SHARDS) & mask;
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
          size_t home = (mix(s->slots[j].key) / SHARDS) & mask;
          if (((j - home) & mask) >= ((j - hole) & mask)) {
            s->slots[hole] = s->slots[j];
            hole = j;
          }
        }
        s->slots[hole].key = 0;
        s->count--;
        st = 0;
      }
    }
  }
  pthread_mutex_unlock(&s->lock);
  return st;
}

size_t adr__alloc_table_count(struct adr__alloc_table* t) {
  size_t n = 0;
  for (int i = 0; i < SHARDS; i++) {
    pthread_mutex_lock(&t->shards[i].lock);
    n += t->shards[i].count;
    pthread_mutex_unlock(&t->shards[i].lock);
  }
  return n;
}

/* ---- interval index ------------------------------------------------------
 *
 * "Which live allocation contains [p, p+n)?" is answered by an ordered index
 * beside the hash: a treap keyed by start address, O(log n) expected per
 * insert, remove and lookup. Nodes live in one array linked by 32-bit
 * indices (index 0 is the empty tree), so an insert allocates nothing but
 * an occasional doubling of the array. One mutex per table (glibc's
 * reader-writer lock costs several times a mutex uncontended, and the
 * critical sections are a few dozen loads), and each thread's last answers
 * are cached while the index is unchanged, so repeated copies on one
 * buffer take no lock at all. The core maintains the index only where a
 * copy is checked against it (memory.c decides). */

struct rnode {
  uintptr_t start;
  size_t size;
  const void* site;
  uint32_t left, right, prio;
};

struct adr__range_index {
  pthread_mutex_t lock;
  /* Bumped by every insert and remove (under the lock), so that a
   * thread's cached answer stays valid exactly while the index has not
   * changed. */
  _Atomic uint64_t version;
  struct rnode* nodes; /* nodes[0] unused: index 0 is "no node" */
  uint32_t cap, count, free_head, root;
  uint32_t seed;
};

static uint32_t next_prio(struct adr__range_index* x) {
  uint32_t v = x->seed;
  v ^= v << 13;
  v ^= v >> 17;
  v ^= v << 5;
  x->seed = v;
  return v;
}

/* Splits tree t into keys < key (*l) and keys >= key (*r). */
static void tsplit(struct rnode* n, uint32_t t, uintptr_t key, uint32_t* l, uint32_t* r) {
  while (t != 0) {
    if (n[t].start < key) {
      *l = t;
      l = &n[t].right;
      t = n[t].right;
    } else {
      *r = t;
      r = &n[t].left;
      t = n[t].left;
    }
  }
  *l = 0;
  *r = 0;
}

/* Joins a (all keys smaller) and b. */
static uint32_t tmerge(struct rnode* n, uint32_t a, uint32_t b) {
  uint32_t root = 0;
  uint32_t* link = &root;
  while (a != 0 && b != 0) {
    if (n[a].prio > n[b].prio) {
      *link = a;
      link = &n[a].right;
      a = n[a].right;
    } else {
      *link = b;
      link = &n[b].left;
      b = n[b].left;
    }
  }
  *link = a ? a : b;
  return root;
}

static struct adr__range_index* range_index_create(void) {
  struct adr__range_index* x = calloc(1, sizeof(*x));
  if (x == NULL) return NULL;
  pthread_mutex_init(&x->lock, NULL);
  x->seed = 0x9e3779b9u;
  return x;
}

static void range_index_destroy(struct adr__range_index* x) {
  if (x == NULL) return;
  pthread_mutex_destroy(&x->lock);
  free(x->nodes);
  free(x);
}

static inline struct adr__range_index* ranges_of(struct adr__alloc_table* t) {
  return t ? t->ranges : NULL;
}

int adr__alloc_table_ranges_insert(struct adr__alloc_table* t, void* ptr, size_t size,
                                   const void* site) {
  struct adr__range_index* x = ranges_of(t);
  if (x == NULL) return ENOMEM;
  pthread_mutex_lock(&x->lock);
  if (x->free_head == 0 && x->count + 1 >= x->cap) {
    uint32_t cap = x->cap ? x->cap * 2 : 64;
    struct rnode* nodes = cap > x->cap ? realloc(x->nodes, (size_t)cap * sizeof(*nodes)) : NULL;
    if (nodes == NULL) {
      pthread_mutex_unlock(&x->lock);
      return ENOMEM;
    }
    x->nodes = nodes;
    x->cap = cap;
  }
  uint32_t id;
  if (x->free_head != 0) {
    id = x->free_head;
    x->free_head = x->nodes[id].left;
  } else {
    id = x->count + 1;
  }
  struct rnode* n = x->nodes;
  n[id] = (struct rnode){(uintptr_t)ptr, size, site, 0, 0, next_prio(x)};
  /* Down to where the new node's priority puts it (expected near the
   * leaves), then split only the subtree below it. */
  uint32_t* link = &x->root;
  while (*link != 0 && n[*link].prio > n[id].prio)
    link = (uintptr_t)ptr < n[*link].start ? &n[*link].left : &n[*link].right;
  tsplit(n, *link, (uintptr_t)ptr, &n[id].left, &n[id].right);
  *link = id;
  x->count++;
  atomic_fetch_add_explicit(&x->version, 1, memory_order_release);
  pthread_mutex_unlock(&x->lock);
  return 0;
}

const void* adr__alloc_table_ranges_remove(struct adr__alloc_table* t, void* ptr) {
  struct adr__range_index* x = ranges_of(t);
  const void* site = NULL;
  if (x == NULL) return NULL;
  uintptr_t key = (uintptr_t)ptr;
  pthread_mutex_lock(&x->lock);
  struct rnode* n = x->nodes;
  uint32_t* link = &x->root;
  while (*link != 0 && n[*link].start != key)
    link = key < n[*link].start ? &n[*link].left : &n[*link].right;
  uint32_t id = *link;
  if (id != 0) {
    site = n[id].site;
    *link = tmerge(n, n[id].left, n[id].right);
    n[id].left = x->free_head;
    x->free_head = id;
    x->count--;
    /* The array's tail is the next fresh slot only while nothing is free. */
    if (x->count == 0) x->free_head = 0;
    atomic_fetch_add_explicit(&x->version, 1, memory_order_release);
  }
  pthread_mutex_unlock(&x->lock);
  return site;
}

/* The last answers of this thread (found or not), valid while their
 * index's version is unchanged: repeated copies on one buffer take no
 * lock. */
struct range_cache {
  const struct adr__range_index* index;
  uint64_t version;
  uintptr_t key; /* the address asked about, for a negative answer */
  bool found;
  struct adr__range r;
};
/* initial-exec: no __tls_get_addr call per lookup; ~100 bytes fit in the
 * static TLS that glibc keeps for libraries opened with dlopen. */
#define TLS_IE __attribute__((tls_model("initial-exec")))
static _Thread_local TLS_IE struct range_cache cache[2];
static _Thread_local TLS_IE unsigned cache_next;

bool adr__alloc_table_ranges_find(struct adr__alloc_table* t, const void* p,
                                  struct adr__range* out) {
  struct adr__range_index* x = ranges_of(t);
  if (x == NULL) return false;
  uintptr_t key = (uintptr_t)p;
  uint64_t v = atomic_load_explicit(&x->version, memory_order_acquire);
  for (int i = 0; i < 2; i++) {
    const struct range_cache* c = &cache[i];
    if (c->index != x || c->version != v) continue;
    if (c->found && key - c->r.start < (c->r.size ? c->r.size : 1)) {
      *out = c->r;
      return true;
    }
    if (!c->found && c->key == key) return false;
  }
  bool found = false;
  pthread_mutex_lock(&x->lock);
  v = atomic_load_explicit(&x->version, memory_order_relaxed);
  const struct rnode* n = x->nodes;
  uint32_t best = 0;
  for (uint32_t i = x->root; i != 0;) {
    if (n[i].start <= key) {
      best = i;
      i = n[i].right;
    } else {
      i = n[i].left;
    }
  }
  /* A zero-byte allocation owns its one address. */
  if (best != 0 && key - n[best].start < (n[best].size ? n[best].size : 1)) {
    out->start = n[best].start;
    out->size = n[best].size;
    out->site = n[best].site;
    found = true;
  }
  pthread_mutex_unlock(&x->lock);
  struct range_cache* c = &cache[cache_next++ & 1];
  c->index = x;
  c->version = v;
  c->key = key;
  c->found = found;
  if (found) c->r = *out;
  return found;
}

static void walk(const struct rnode* n, uint32_t i, void (*fn)(void*, const struct adr__range*),
                 void* ctx) {
  while (i != 0) {
    walk(n, n[i].left, fn, ctx);
    struct adr__range r = {n[i].start, n[i].size, n[i].site};
    fn(ctx, &r);
    i = n[i].right;
  }
}

size_t adr__alloc_table_ranges_foreach(struct adr__alloc_table* t,
                                       void (*fn)(void* ctx, const struct adr__range* r),
                                       void* ctx) {
  struct adr__range_index* x = ranges_of(t);
  if (x == NULL) return 0;
  pthread_mutex_lock(&x->lock);
  size_t count = x->count;
  if (fn != NULL) walk(x->nodes, x->root, fn, ctx);
  pthread_mutex_unlock(&x->lock);
  return count;
}
