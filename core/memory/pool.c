/* SPDX-License-Identifier: Apache-2.0
 *
 * The caching pool (interface and contract: pool.h, docs/memory.md).
 *
 * Layout. Memory comes from the upstream in chunks (>= chunk_size, 2 MiB by
 * default, growing with the pool). A chunk is cut into blocks kept in
 * address order (prev_phys/next_phys), with host-side metadata only: device
 * memory is never touched. A free block sits in exactly one *bin*: the bin of
 * the stream it was freed on (bin 0 = the host, i.e. freed with a NULL
 * stream, or a stream that has been retired). Within a bin, blocks of an
 * exact size-class size (<= 1 MiB; 4 classes per power of two) sit in LIFO
 * class lists, everything else in a treap ordered by (size, address), so a
 * best-fit lookup is O(log n). Class blocks are not coalesced when freed
 * (the fast path); a miss consolidates them into the treap, coalescing
 * address-neighbours of the same bin, before the pool grows.
 *
 * Stream order. A stream's frees go to its active bin; a batch of them is
 * sealed (the bin takes no more frees and one event is recorded on the
 * stream, covering all of them) every SEAL_BYTES freed and when a request
 * wants them. A request on stream S looks in S's own bins, then the host
 * bin, then other streams' bins: S waits (device-side) on a sealed bin's
 * event before it uses a block of it; the free path never waits. A host
 * request (NULL stream) moves sealed bins whose event has completed to the
 * host bin (queried, never waited for); a completed event stays completed,
 * so memory freed on any stream becomes the host's once the stream got
 * there (re-recording one event per bin, as before, made the host see only
 * just-recorded events, and the pool grew without bound).
 *
 * Cap. max_cached bounds the free bytes kept (by default an eighth of the
 * device's memory, 256 MiB to 4 GiB): a free
 * that leaves the pool above it (or above release_threshold reserved)
 * gives fully free host-bin chunks back at once, backing off when it
 * cannot get under.
 *
 * Concurrency. No lock is shared by all threads on the hot path. The pool
 * has up to 16 arenas, each with its own mutex, bins and chunks; a thread
 * uses the arena picked round-robin at its first allocation, so threads
 * mostly take different locks. Addresses handed out are found again through
 * a map split into 64 independently locked shards (by address hash), which
 * tells the free path which arena owns the block (frees from another thread
 * return the block to its own arena). Statistics are per-arena fields under
 * the arena lock, summed on request; only the reserved-bytes peak is a
 * pool-wide atomic, touched when the pool grows or shrinks.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#if defined(__linux__)
#include <linux/membarrier.h>
#endif

#include "adr/memory.h"
#include "internal.h"
#include "pool.h"

#ifndef MADV_HUGEPAGE
#define MADV_HUGEPAGE 14
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif
#define HUGE_PAGE ((uintptr_t)2 << 20)

#define MIN_ALIGN ((size_t)ADR_MIN_ALIGNMENT)
#define LARGE_GRANULE ((size_t)512)
#define MIN_SPLIT ((size_t)256) /* a smaller remainder stays with the block */
#define GROW_GRANULE ((size_t)2 << 20)
#define MAX_GROW ((size_t)64 << 20)
#define MAP_SHARDS 64u
#define MAX_ARENAS 16u
#define BLOCKS_PER_SLAB 256u
#define MAX_PENDING 16u              /* sealed bins per stream waiting for their event */
#define MAX_BACKOFF 256u             /* frees between failed attempts to trim to the cap */
#define SEAL_BYTES ((size_t)1 << 20) /* a stream's frees sealed per batch */
#define MIN_DEFAULT_CACHED ((size_t)256 << 20)
#define MAX_DEFAULT_CACHED ((size_t)4 << 30)

/* AddressSanitizer's manual poisoning, in sanitizer builds only: free and
 * not yet allocated memory of host-accessible pools is poisoned, so an
 * overrun of a pool allocation is reported as it would be for malloc. */
#if defined(__SANITIZE_ADDRESS__)
#define POOL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define POOL_ASAN 1
#endif
#endif
#ifdef POOL_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(pool, addr, size) \
  ((pool)->opts.poison ? ASAN_POISON_MEMORY_REGION((void*)(addr), (size)) : (void)0)
#define UNPOISON(pool, addr, size) \
  ((pool)->opts.poison ? ASAN_UNPOISON_MEMORY_REGION((void*)(addr), (size)) : (void)0)
#else
#define POISON(pool, addr, size) ((void)(pool), (void)(addr), (void)(size))
#define UNPOISON(pool, addr, size) ((void)(pool), (void)(addr), (void)(size))
#endif

enum { WHERE_NONE = 0, WHERE_CLASS = 1, WHERE_TREE = 2 };

#define CLASS_WORDS ((ADR__POOL_CLASS_COUNT + 63u) / 64u)

struct arena;
struct chunk;
struct tcache;

/* A block's record is written by the thread that allocates the block
 * (user, user_size, stream) and read by the one that frees it: each
 * record on lines of its own (ADR__APART), as records of one slab serve
 * blocks of several threads (a chunk adopted by another arena keeps the
 * record of its first block; records go back to the spare list of the
 * arena that frees them). Packed 112 bytes apart, two threads' 4 KiB
 * blocks shared a line often enough that two threads allocating and
 * freeing on OpenCL and Vulkan took 2-3x as long per pair as one. */
struct block {
  _Alignas(ADR__APART) struct arena* arena;
  uintptr_t addr;
  size_t size;
  struct chunk* chunk;
  struct block* prev_phys;
  struct block* next_phys;
  /* free state */
  struct bin* bin;
  uint8_t where;
  uint32_t prio;
  struct block* left; /* treap children, or class list prev/next */
  struct block* right;
  /* allocated state */
  uintptr_t user;
  size_t user_size;
  void* stream;
  struct block* hnext; /* map chain, or metadata free list */
};

struct chunk {
  uintptr_t base;
  size_t size;
  struct block* first; /* the block at base: never absorbed by a merge */
  size_t used;         /* bytes of its blocks handed out; 0 = fully free */
  struct chunk* next;
  struct chunk* prev;
};

/* Bins: bins[0] is the host bin; the others are, for one stream, its
 * active bin (takes the stream's frees) and its sealed bins (take no more
 * frees; their event, recorded when sealed, covers all their blocks), or
 * spares (empty, stream NULL, reusable). */
struct bin {
  void* stream; /* NULL: the host bin or a spare */
  bool sealed;
  bool spare;
  bool complete;                    /* sealed and its event has completed */
  void* event;                      /* kept for reuse when the bin becomes a spare */
  size_t seal_at;                   /* active: free_bytes at which a free seals it, */
  bool wanted;                      /* once the host or another stream looked for its blocks */
  uint64_t class_mask[CLASS_WORDS]; /* bit c: classes[c] is not empty */
  struct block* classes[ADR__POOL_CLASS_COUNT];
  struct block* tree;
  size_t free_bytes;
  size_t class_blocks;
};

struct arena {
  /* Apart from the next arena (ADR__APART): one arena's figures, written
   * on every operation, must not share a line with the next arena's lock. */
  _Alignas(ADR__APART) pthread_mutex_t lock;
  struct adr__pool* pool;
  struct bin** bins; /* bins[0] is the host bin */
  size_t nbins, capbins;
  struct bin* last_bin; /* active bin the last stream free went to, checked first */
  struct chunk* chunks;
  struct block* spare; /* free metadata */
  void** slabs;        /* metadata slabs, freed at destroy */
  size_t nslabs, capslabs;
  uint32_t rng;
  /* statistics, under lock */
  uint64_t reserved_bytes, reserved_count, reserved_bytes_total, reserved_count_total;
  uint64_t cached_bytes;
  _Atomic uint64_t cached_pub; /* cached_bytes, for other arenas' cap checks */
  unsigned collect_skip;       /* frees before the next attempt to trim to the cap, */
  unsigned collect_backoff;
  uint64_t collect_retry_at; /* or once cached_bytes reaches this */
  size_t free_chunks;        /* chunks with used == 0 */
  uint64_t hits, misses, stream_waits, trimmed;
  uint64_t adopted; /* chunks this arena took from another (fully free) */
  /* Threads with a cache of the pool that use this arena (made with their
   * first allocation, gone when they exit): another arena adopts chunks
   * only from an arena no live thread uses. */
  _Atomic unsigned threads;
  uint64_t allocated_bytes, allocated_count;
};

struct map_shard {
  pthread_mutex_t lock;
  struct block** buckets;
  size_t nbuckets;
  size_t count;
  char pad[64];
};

struct adr__pool {
  struct adr__pool_options opts;
  struct adr__pool_upstream up;
  struct adr__pool_sync sync;
  bool has_sync;
  unsigned narenas;
  struct arena arenas[MAX_ARENAS];
  struct map_shard map[MAP_SHARDS];
  _Atomic size_t max_cached; /* opts.max_cached, changeable at run time */
  _Atomic uint64_t reserved_now;
  _Atomic uint64_t reserved_peak;
  _Atomic uint64_t reserved_count_now;
  _Atomic uint64_t reserved_count_peak;
  uint64_t serial;        /* unique per pool, never reused: names it in threads' caches */
  struct tcache* tc_list; /* threads' caches of this pool (tc_global) */
};

static void bin_migrate_to_host(struct adr__pool* pool, struct arena* a, struct bin* bin);
static size_t tc_detach_all(struct adr__pool* pool);
static _Atomic uint64_t next_pool_serial = 1;
static void bin_release_to_host(struct adr__pool* pool, struct arena* a, struct bin* bin);

/* ---- size classes -------------------------------------------------------- */

static unsigned floor_log2(size_t v) {
  return (unsigned)(sizeof(unsigned long long) * CHAR_BIT - 1 -
                    (unsigned)__builtin_clzll((unsigned long long)v));
}

/* 64-byte steps up to 512 B, four classes per power of two up to 1 MiB
 * (waste <= 25 %), eight above (waste <= 12.5 %, on blocks where a
 * quarter would be megabytes). */
unsigned adr__pool_class_index(size_t size) {
  if (size <= 512) return size == 0 ? 0 : (unsigned)((size + 63) / 64 - 1);
  unsigned p = floor_log2(size - 1);
  if (p < 20) return 8 + (p - 9) * 4 + (unsigned)(((size - 1) >> (p - 2)) & 3);
  return 52 + (p - 20) * 8 + (unsigned)(((size - 1) >> (p - 3)) & 7);
}

size_t adr__pool_class_size(unsigned index) {
  if (index < 8) return (size_t)(index + 1) * 64;
  if (index < 52) {
    unsigned p = (index - 8) / 4 + 9;
    return (size_t)(5 + (index - 8) % 4) << (p - 2);
  }
  unsigned p = (index - 52) / 8 + 20;
  return (size_t)(9 + (index - 52) % 8) << (p - 3);
}

/* The class bitmap of a bin. */
static void mask_set(struct bin* bin, unsigned c) {
  bin->class_mask[c / 64] |= (uint64_t)1 << (c % 64);
}
static void mask_clear(struct bin* bin, unsigned c) {
  bin->class_mask[c / 64] &= ~((uint64_t)1 << (c % 64));
}
/* The lowest non-empty class >= c, or ADR__POOL_CLASS_COUNT. */
static unsigned mask_next(const struct bin* bin, unsigned c) {
  if (c >= ADR__POOL_CLASS_COUNT) return ADR__POOL_CLASS_COUNT;
  unsigned w = c / 64;
  uint64_t bits = bin->class_mask[w] & (~(uint64_t)0 << (c % 64));
  while (bits == 0) {
    if (++w == CLASS_WORDS) return ADR__POOL_CLASS_COUNT;
    bits = bin->class_mask[w];
  }
  return w * 64 + (unsigned)__builtin_ctzll(bits);
}
/* The highest non-empty class, or ADR__POOL_CLASS_COUNT when none. */
static unsigned mask_last(const struct bin* bin) {
  for (unsigned w = CLASS_WORDS; w-- > 0;)
    if (bin->class_mask[w] != 0) return w * 64 + floor_log2(bin->class_mask[w]);
  return ADR__POOL_CLASS_COUNT;
}

static bool is_class_size(size_t size) {
  return size <= ADR__POOL_CLASS_MAX && adr__pool_class_size(adr__pool_class_index(size)) == size;
}

static size_t align_up(size_t v, size_t a) {
  return (v + a - 1) & ~(a - 1);
}

/* ---- metadata ------------------------------------------------------------ */

/* Zeroed memory apart from other objects' (ADR__APART), for metadata written on the hot
 * path (chunks' `used`, bins, block slabs, threads' caches): from calloc,
 * two arenas' chunk records could share a line, and two threads each
 * working in its own arena wrote it in turn (a cache miss per operation;
 * allocating 1 MiB blocks on two threads was 2.3x slower per operation than
 * on one). Freed with free(). */
static void* line_calloc(size_t n, size_t size) {
  const size_t apart = ADR__APART;
  if (size != 0 && n > (SIZE_MAX - apart) / size) return NULL;
  size_t bytes = (n * size + apart - 1) & ~(apart - 1);
  if (bytes == 0) bytes = apart;
  void* p = aligned_alloc(apart, bytes);
  if (p != NULL) memset(p, 0, bytes);
  return p;
}

static struct block* block_new(struct arena* a) {
  if (a->spare == NULL) {
    if (a->nslabs == a->capslabs) {
      size_t ncap = a->capslabs ? a->capslabs * 2 : 8;
      void** n = realloc(a->slabs, ncap * sizeof(*n));
      if (n == NULL) return NULL;
      a->slabs = n;
      a->capslabs = ncap;
    }
    struct block* slab = line_calloc(BLOCKS_PER_SLAB, sizeof(*slab));
    if (slab == NULL) return NULL;
    a->slabs[a->nslabs++] = slab;
    for (unsigned i = 0; i < BLOCKS_PER_SLAB; i++) {
      slab[i].hnext = a->spare;
      a->spare = &slab[i];
    }
  }
  struct block* b = a->spare;
  a->spare = b->hnext;
  memset(b, 0, sizeof(*b));
  b->arena = a;
  a->rng ^= a->rng << 13;
  a->rng ^= a->rng >> 17;
  a->rng ^= a->rng << 5;
  b->prio = a->rng;
  return b;
}

static void block_release(struct arena* a, struct block* b) {
  b->hnext = a->spare;
  a->spare = b;
}

/* ---- treap keyed by (size, addr) ---------------------------------------- */

static bool key_less(const struct block* x, const struct block* y) {
  return x->size < y->size || (x->size == y->size && x->addr < y->addr);
}

/* Iterative treap operations (a max-heap on prio): insert descends to the
 * first node of lower priority and splits that subtree around the new key;
 * remove replaces the node by the merge of its children. */
static void treap_insert(struct block** root, struct block* n) {
  struct block** link = root;
  while (*link != NULL && (*link)->prio >= n->prio)
    link = key_less(n, *link) ? &(*link)->left : &(*link)->right;
  struct block* t = *link;
  struct block** l = &n->left;
  struct block** r = &n->right;
  while (t != NULL) {
    if (key_less(t, n)) {
      *l = t;
      l = &t->right;
      t = t->right;
    } else {
      *r = t;
      r = &t->left;
      t = t->left;
    }
  }
  *l = *r = NULL;
  *link = n;
}

static struct block* treap_merge(struct block* l, struct block* r) {
  struct block* root = NULL;
  struct block** link = &root;
  while (l != NULL && r != NULL) {
    if (l->prio > r->prio) {
      *link = l;
      link = &l->right;
      l = l->right;
    } else {
      *link = r;
      link = &r->left;
      r = r->left;
    }
  }
  *link = l != NULL ? l : r;
  return root;
}

static void treap_remove(struct block** root, struct block* n) {
  struct block** link = root;
  while (*link != n) link = key_less(n, *link) ? &(*link)->left : &(*link)->right;
  *link = treap_merge(n->left, n->right);
}

/* Smallest block with size >= size (best fit; lowest address on ties). */
static struct block* treap_lower_bound(struct block* root, size_t size) {
  struct block* best = NULL;
  while (root != NULL) {
    if (root->size >= size) {
      best = root;
      root = root->left;
    } else {
      root = root->right;
    }
  }
  return best;
}

/* The link (parent's child pointer, or the root) to the best fit, so the
 * caller can unlink it without a second descent. NULL if none fits. */
static struct block** treap_lower_bound_link(struct block** root, size_t size) {
  struct block** best = NULL;
  struct block** link = root;
  while (*link != NULL) {
    if ((*link)->size >= size) {
      best = link;
      link = &(*link)->left;
    } else {
      link = &(*link)->right;
    }
  }
  return best;
}

static size_t treap_max(struct block* root) {
  while (root != NULL && root->right != NULL) root = root->right;
  return root ? root->size : 0;
}

/* ---- bins ---------------------------------------------------------------- */

static void bin_insert(struct arena* a, struct bin* bin, struct block* b) {
  b->bin = bin;
  bin->free_bytes += b->size;
  a->cached_bytes += b->size;
  if (is_class_size(b->size)) {
    unsigned c = adr__pool_class_index(b->size);
    b->where = WHERE_CLASS;
    b->left = NULL;
    b->right = bin->classes[c];
    if (b->right) b->right->left = b;
    bin->classes[c] = b;
    mask_set(bin, c);
    bin->class_blocks++;
  } else {
    b->where = WHERE_TREE;
    treap_insert(&bin->tree, b);
  }
}

static void bin_remove(struct arena* a, struct block* b) {
  struct bin* bin = b->bin;
  bin->free_bytes -= b->size;
  a->cached_bytes -= b->size;
  if (b->where == WHERE_CLASS) {
    unsigned c = adr__pool_class_index(b->size);
    if (b->left)
      b->left->right = b->right;
    else
      bin->classes[c] = b->right;
    if (b->right) b->right->left = b->left;
    if (bin->classes[c] == NULL) mask_clear(bin, c);
    bin->class_blocks--;
  } else {
    treap_remove(&bin->tree, b);
  }
  b->where = WHERE_NONE;
  b->bin = NULL;
  b->left = b->right = NULL;
}

/* Merges b (not in a bin) with free neighbours of the same bin, then files
 * it. Used for large frees and for consolidation. */
/* Merges b (not in a bin) with the free blocks of `bin` around it and
 * returns the merged block, not filed. Uncoalesced class blocks can form
 * runs of free neighbours, hence the loops. */
static struct block* merge_neighbours(struct arena* a, struct bin* bin, struct block* b) {
  struct block* p;
  while ((p = b->prev_phys) != NULL && p->where != WHERE_NONE && p->bin == bin) {
    bin_remove(a, p);
    p->size += b->size;
    p->next_phys = b->next_phys;
    if (b->next_phys) b->next_phys->prev_phys = p;
    block_release(a, b);
    b = p;
  }
  struct block* n;
  while ((n = b->next_phys) != NULL && n->where != WHERE_NONE && n->bin == bin) {
    bin_remove(a, n);
    b->size += n->size;
    b->next_phys = n->next_phys;
    if (n->next_phys) n->next_phys->prev_phys = b;
    block_release(a, n);
  }
  return b;
}

/* Files b (not in a bin) in `bin`, merged with its free neighbours there.
 * Used for large frees, remainders of splits and migrations. */
static void bin_insert_coalesce(struct arena* a, struct bin* bin, struct block* b) {
  bin_insert(a, bin, merge_neighbours(a, bin, b));
}

/* Moves the bin's class blocks into its treap, coalescing. The result goes
 * to the treap even when its size happens to be a class size, so the loop
 * ends. */
static void bin_consolidate(struct arena* a, struct bin* bin) {
  unsigned c;
  while ((c = mask_next(bin, 0)) != ADR__POOL_CLASS_COUNT) {
    struct block* b = bin->classes[c];
    bin_remove(a, b);
    b = merge_neighbours(a, bin, b);
    b->bin = bin;
    b->where = WHERE_TREE;
    bin->free_bytes += b->size;
    a->cached_bytes += b->size;
    treap_insert(&bin->tree, b);
  }
}

static struct bin* bin_find(struct arena* a, void* stream) {
  if (stream == NULL) return a->bins[0];
  if (a->last_bin != NULL && a->last_bin->stream == stream) return a->last_bin;
  for (size_t i = 1; i < a->nbins; i++)
    if (a->bins[i]->stream == stream && !a->bins[i]->sealed) return a->bins[i];
  return NULL;
}

/* Whether a sealed bin's event has completed; with wait, waits for it. */
static bool bin_complete(struct adr__pool* pool, struct bin* bin, bool wait) {
  if (bin->complete) return true;
  int st = pool->sync.event_query(pool->sync.ctx, bin->event);
  if (st != 0 && wait) st = pool->sync.event_synchronize(pool->sync.ctx, bin->event);
  if (st == 0) bin->complete = true;
  return bin->complete;
}

/* A bin for `stream`'s later frees: a spare, or an empty sealed bin whose
 * event has completed (re-recording a pending event may block on some
 * backends), else a new one. NULL when out of host memory. */
static struct bin* bin_new(struct adr__pool* pool, struct arena* a, void* stream) {
  for (size_t i = 1; i < a->nbins; i++) {
    struct bin* r = a->bins[i];
    if (r->free_bytes == 0 && (r->spare || (r->sealed && bin_complete(pool, r, false)))) {
      if (a->last_bin == r) a->last_bin = NULL;
      r->stream = stream;
      r->spare = r->sealed = r->complete = r->wanted = false;
      r->seal_at = SEAL_BYTES;
      return r;
    }
  }
  if (a->nbins == a->capbins) {
    size_t ncap = a->capbins * 2;
    struct bin** n = realloc(a->bins, ncap * sizeof(*n));
    if (n == NULL) return NULL;
    a->bins = n;
    a->capbins = ncap;
  }
  struct bin* bin = line_calloc(1, sizeof(*bin));
  if (bin == NULL) return NULL;
  bin->stream = stream;
  bin->seal_at = SEAL_BYTES;
  a->bins[a->nbins++] = bin;
  return bin;
}

static struct bin* bin_get(struct adr__pool* pool, struct arena* a, void* stream) {
  struct bin* bin = bin_find(a, stream);
  return bin != NULL ? bin : bin_new(pool, a, stream);
}

/* Seals the active bin of a stream: records the bin's event on the stream,
 * so the event covers every block in it, and gives the stream a fresh
 * active bin for later frees. A sealed bin takes no more frees, so its
 * event's completion tells for good that the stream reached all of them.
 * False (nothing changed) if that cannot be done now. */
static bool bin_seal(struct adr__pool* pool, struct arena* a, struct bin* bin) {
  if (bin->event == NULL && pool->sync.event_create(pool->sync.ctx, &bin->event) != 0) {
    bin->event = NULL;
    return false;
  }
  struct bin* fresh = bin_new(pool, a, bin->stream);
  if (fresh == NULL) return false;
  if (pool->sync.event_record(pool->sync.ctx, bin->event, bin->stream) != 0) {
    fresh->stream = NULL;
    fresh->spare = true;
    return false;
  }
  bin->sealed = true;
  bin->complete = false;
  fresh->wanted = bin->wanted;
  if (a->last_bin == bin) a->last_bin = fresh;
  return true;
}

/* Sealed bins of `stream` still holding blocks whose event has not
 * completed (those found complete go to the host bin on the way). */
static unsigned stream_pending(struct adr__pool* pool, struct arena* a, void* stream) {
  unsigned n = 0;
  for (size_t i = 1; i < a->nbins; i++) {
    struct bin* s = a->bins[i];
    if (s->sealed && s->stream == stream && s->free_bytes != 0) {
      if (bin_complete(pool, s, false))
        bin_release_to_host(pool, a, s);
      else
        n++;
    }
  }
  return n;
}

/* For the host: moves the blocks of `bin` (a stream's active or sealed
 * bin) to the host bin if the stream has reached their frees; without
 * wait, never blocks. An active bin is sealed first, unless a sealed bin
 * of its stream is still pending (then its newer frees cannot be reached
 * either: events on one stream complete in order). */
static bool bin_settle(struct adr__pool* pool, struct arena* a, struct bin* bin, bool wait) {
  if (!pool->has_sync) {
    bin_migrate_to_host(pool, a, bin);
    if (bin->sealed) {
      bin->stream = NULL;
      bin->sealed = false;
      bin->spare = true;
    }
    return true;
  }
  if (!bin->sealed) {
    if (stream_pending(pool, a, bin->stream) != 0 && !wait) return false;
    if (!bin_seal(pool, a, bin)) return false;
  }
  if (!bin_complete(pool, bin, wait)) return false;
  bin_release_to_host(pool, a, bin);
  return true;
}

/* Orders `stream` after the frees queued on another stream's bin, without
 * blocking the host: seals an active bin (at most MAX_PENDING sealed bins
 * per stream wait for their event) and makes `stream` wait on the event
 * device-side. False if that cannot be done now. */
static bool bin_order_after(struct adr__pool* pool, struct arena* a, struct bin* bin,
                            void* stream) {
  if (!pool->has_sync) return true;
  if (!bin->sealed) {
    if (stream_pending(pool, a, bin->stream) >= MAX_PENDING) return false;
    if (!bin_seal(pool, a, bin)) return false;
  }
  if (bin->complete) return true;
  if (pool->sync.event_wait(pool->sync.ctx, bin->event, stream) != 0) return false;
  a->stream_waits++;
  return true;
}

/* ---- arena allocation ---------------------------------------------------- */

/* Takes a block of at least `need` bytes (exactly `csize` for a class
 * request) from one bin, split to size. */
static struct block* bin_take(struct arena* a, struct bin* bin, size_t need, size_t csize) {
  struct block* b = NULL;
  if (csize != 0) {
    unsigned c = adr__pool_class_index(csize);
    if (bin->classes[c] != NULL) {
      b = bin->classes[c];
      bin_remove(a, b);
      return b;
    }
    need = csize;
  }
  struct block** link = treap_lower_bound_link(&bin->tree, need);
  /* Best fit between the tree and the smallest larger class block. */
  if (csize != 0 && bin->class_blocks != 0) {
    unsigned larger = mask_next(bin, adr__pool_class_index(csize) + 1);
    if (larger != ADR__POOL_CLASS_COUNT &&
        (link == NULL || bin->classes[larger]->size < (*link)->size))
      link = NULL;
  }
  if (link != NULL) {
    /* Unlink through the link found (bin_remove would descend again). */
    b = *link;
    *link = treap_merge(b->left, b->right);
    bin->free_bytes -= b->size;
    a->cached_bytes -= b->size;
    b->where = WHERE_NONE;
    b->bin = NULL;
    b->left = b->right = NULL;
  } else {
    if (csize != 0) {
      unsigned c = adr__pool_class_index(csize);
      unsigned larger = mask_next(bin, c + 1);
      if (larger != ADR__POOL_CLASS_COUNT) b = bin->classes[larger];
    }
    if (b == NULL) return NULL;
    bin_remove(a, b);
  }
  if (b->size - need >= MIN_SPLIT) {
    struct block* r = block_new(a);
    if (r != NULL) {
      r->addr = b->addr + need;
      r->size = b->size - need;
      r->chunk = b->chunk;
      r->prev_phys = b;
      r->next_phys = b->next_phys;
      if (b->next_phys) b->next_phys->prev_phys = r;
      b->next_phys = r;
      b->size = need;
      /* b may have been an uncoalesced class block: r can have a free
       * neighbour in the bin. */
      bin_insert_coalesce(a, bin, r);
    }
  }
  return b;
}

static size_t bin_largest(const struct bin* bin) {
  size_t m = treap_max(bin->tree);
  unsigned last = mask_last(bin);
  if (last != ADR__POOL_CLASS_COUNT) {
    size_t c = adr__pool_class_size(last);
    if (c > m) m = c;
  }
  return m;
}

/* Moves every block of a bin whose stream has reached its frees into the
 * host bin, coalescing, so chunks split across bins can become whole. The
 * blocks are poisoned now: no queued work uses them any more. */
static void bin_migrate_to_host(struct adr__pool* pool, struct arena* a, struct bin* bin) {
  struct bin* hostbin = a->bins[0];
  if (bin == hostbin) return;
  if (bin->class_blocks != 0) bin_consolidate(a, bin);
  while (bin->tree != NULL) {
    struct block* b = bin->tree;
    bin_remove(a, b);
    POISON(pool, b->addr, b->size);
    bin_insert_coalesce(a, hostbin, b);
  }
  (void)pool;
}

/* A sealed bin whose event completed: its blocks to the host bin, the bin
 * becomes a spare (it keeps its event object for reuse). */
static void bin_release_to_host(struct adr__pool* pool, struct arena* a, struct bin* bin) {
  bin_migrate_to_host(pool, a, bin);
  if (a->last_bin == bin) a->last_bin = NULL;
  bin->stream = NULL;
  bin->sealed = bin->complete = false;
  bin->spare = true;
}

/* Whether every block of a fully free chunk may go back: each sits in the
 * host bin, or in a bin whose stream reached it (moved to the host bin
 * now; waiting for it with wait). */
static bool chunk_ready(struct adr__pool* pool, struct arena* a, struct chunk* c, bool wait) {
  struct bin* hostbin = a->bins[0];
  struct block* b = c->first;
  while (b != NULL) {
    if (b->bin == hostbin) {
      b = b->next_phys;
      continue;
    }
    if (!bin_settle(pool, a, b->bin, wait)) return false;
    b = c->first; /* the move coalesced: walk again (the first block stays) */
  }
  return true;
}

/* Releases fully free chunks (found by their `used` count, so the cost is
 * the number of chunks, not of blocks) while `excess` says so. Returns the
 * chunks unlinked (their memory still to be given back). */
static struct chunk* arena_collect(struct adr__pool* pool, struct arena* a, bool wait,
                                   bool (*excess)(struct adr__pool*, struct arena*),
                                   size_t* out_bytes) {
  struct chunk* out = NULL;
  *out_bytes = 0;
  for (struct chunk* c = a->chunks; c != NULL && a->free_chunks != 0;) {
    struct chunk* next = c->next;
    if (excess != NULL && !excess(pool, a)) break;
    if (c->used == 0 && chunk_ready(pool, a, c, wait)) {
      for (struct block* b = c->first; b != NULL;) {
        struct block* n = b->next_phys;
        bin_remove(a, b);
        block_release(a, b);
        b = n;
      }
      if (c->prev)
        c->prev->next = c->next;
      else
        a->chunks = c->next;
      if (c->next) c->next->prev = c->prev;
      a->free_chunks--;
      a->reserved_bytes -= c->size;
      a->reserved_count--;
      a->trimmed += c->size;
      atomic_fetch_sub_explicit(&pool->reserved_now, c->size, memory_order_relaxed);
      atomic_fetch_sub_explicit(&pool->reserved_count_now, 1, memory_order_relaxed);
      *out_bytes += c->size;
      c->next = out;
      out = c;
    }
    c = next;
  }
  atomic_store_explicit(&a->cached_pub, a->cached_bytes, memory_order_relaxed);
  return out;
}

static void chunks_give_back(struct adr__pool* pool, struct chunk* list) {
  while (list != NULL) {
    struct chunk* next = list->next;
    UNPOISON(pool, list->base, list->size);
    pool->up.free(pool->up.ctx, (void*)list->base, list->size);
    free(list);
    list = next;
  }
}

/* Whether the pool holds more than its options allow: reserved bytes over
 * release_threshold, or cached bytes over max_cached. The cached check
 * costs one comparison while this arena holds at most its share of the
 * cap; beyond that it sums every arena's published figure. */
static bool over_limits(struct adr__pool* pool, struct arena* a) {
  if (pool->opts.release_threshold != SIZE_MAX &&
      atomic_load_explicit(&pool->reserved_now, memory_order_relaxed) >
          pool->opts.release_threshold)
    return true;
  size_t cap = atomic_load_explicit(&pool->max_cached, memory_order_relaxed);
  if (cap == SIZE_MAX || a->cached_bytes <= cap / pool->narenas) return false;
  uint64_t total = 0;
  for (unsigned i = 0; i < pool->narenas; i++)
    total += &pool->arenas[i] == a
                 ? a->cached_bytes
                 : atomic_load_explicit(&pool->arenas[i].cached_pub, memory_order_relaxed);
  return total > cap;
}

/* ---- address map --------------------------------------------------------- */

static size_t addr_hash(uintptr_t p) {
  uint64_t h = (uint64_t)(p >> 6) * UINT64_C(0x9E3779B97F4A7C15);
  return (size_t)(h >> 32);
}

static int map_insert(struct adr__pool* pool, struct block* b) {
  size_t h = addr_hash(b->user);
  struct map_shard* s = &pool->map[h % MAP_SHARDS];
  pthread_mutex_lock(&s->lock);
  if (s->count >= s->nbuckets) {
    size_t ncap = s->nbuckets ? s->nbuckets * 2 : 64;
    struct block** nb = calloc(ncap, sizeof(*nb));
    if (nb == NULL) {
      pthread_mutex_unlock(&s->lock);
      return ENOMEM;
    }
    for (size_t i = 0; i < s->nbuckets; i++) {
      struct block* e = s->buckets[i];
      while (e != NULL) {
        struct block* nx = e->hnext;
        size_t k = (addr_hash(e->user) / MAP_SHARDS) & (ncap - 1);
        e->hnext = nb[k];
        nb[k] = e;
        e = nx;
      }
    }
    free(s->buckets);
    s->buckets = nb;
    s->nbuckets = ncap;
  }
  size_t k = (h / MAP_SHARDS) & (s->nbuckets - 1);
  b->hnext = s->buckets[k];
  s->buckets[k] = b;
  s->count++;
  pthread_mutex_unlock(&s->lock);
  return 0;
}

/* Removes and returns the block handed out at ptr if its size matches. */
static struct block* map_remove(struct adr__pool* pool, uintptr_t ptr, size_t size, int* status,
                                size_t* out_size) {
  size_t h = addr_hash(ptr);
  struct map_shard* s = &pool->map[h % MAP_SHARDS];
  pthread_mutex_lock(&s->lock);
  struct block* found = NULL;
  *status = EINVAL;
  if (s->nbuckets != 0) {
    struct block** pp = &s->buckets[(h / MAP_SHARDS) & (s->nbuckets - 1)];
    while (*pp != NULL) {
      if ((*pp)->user == ptr) {
        *out_size = (*pp)->user_size;
        if ((*pp)->user_size != size) {
          *status = ERANGE;
          break;
        }
        found = *pp;
        *pp = found->hnext;
        s->count--;
        *status = 0;
        break;
      }
      pp = &(*pp)->hnext;
    }
  }
  pthread_mutex_unlock(&s->lock);
  return found;
}

/* ---- public (internal) API ----------------------------------------------- */

size_t adr__pool_default_max_cached(uint64_t memory_total) {
  uint64_t v = memory_total / 8;
  if (v < MIN_DEFAULT_CACHED) v = MIN_DEFAULT_CACHED;
  if (v > MAX_DEFAULT_CACHED) v = MAX_DEFAULT_CACHED;
  return (size_t)v;
}

void adr__pool_options_default(struct adr__pool_options* opts) {
  opts->max_cached = ADR__POOL_MAX_CACHED_AUTO;
  opts->release_threshold = SIZE_MAX;
  opts->chunk_size = 0;
  opts->arenas = 0;
  opts->poison = false;
  opts->host_pages = false;
  opts->hugepages = ADR__POOL_THP_LARGE;
  opts->populate = false;
}

int adr__pool_create(const struct adr__pool_options* opts, const struct adr__pool_upstream* up,
                     const struct adr__pool_sync* sync, struct adr__pool** out,
                     struct adr_error* error) {
  size_t pool_size = (sizeof(struct adr__pool) + ADR__APART - 1) & ~(size_t)(ADR__APART - 1);
  struct adr__pool* pool = aligned_alloc(ADR__APART, pool_size); /* for the arenas */
  if (pool != NULL) memset(pool, 0, pool_size);
  if (pool == NULL) return adr_error_set(error, ENOMEM, "[pool] out of host memory");
  pool->opts = *opts;
  if (pool->opts.max_cached == ADR__POOL_MAX_CACHED_AUTO)
    pool->opts.max_cached = adr__pool_default_max_cached(0);
  atomic_init(&pool->max_cached, pool->opts.max_cached);
  if (pool->opts.chunk_size == 0) pool->opts.chunk_size = GROW_GRANULE;
  pool->opts.chunk_size = align_up(pool->opts.chunk_size, 4096);
  unsigned n = opts->arenas;
  if (n == 0) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    n = cpus < 1 ? 1 : (unsigned)cpus;
  }
  if (n > MAX_ARENAS) n = MAX_ARENAS;
  pool->narenas = n;
  pool->serial = atomic_fetch_add_explicit(&next_pool_serial, 1, memory_order_relaxed);
  pool->up = *up;
  if (sync != NULL) {
    pool->sync = *sync;
    pool->has_sync = true;
  }
  for (unsigned i = 0; i < MAP_SHARDS; i++) pthread_mutex_init(&pool->map[i].lock, NULL);
  for (unsigned i = 0; i < n; i++) {
    struct arena* a = &pool->arenas[i];
    pthread_mutex_init(&a->lock, NULL);
    a->pool = pool;
    a->rng = 0x9E3779B9u ^ (i * 0x85EBCA6Bu) ^ 1u;
    a->capbins = 4;
    a->bins = calloc(a->capbins, sizeof(*a->bins));
    struct bin* host = line_calloc(1, sizeof(*host));
    if (a->bins == NULL || host == NULL) {
      free(host);
      pool->narenas = i + (a->bins != NULL ? 1 : 0);
      if (a->bins != NULL) a->nbins = 0;
      adr__pool_destroy(pool);
      return adr_error_set(error, ENOMEM, "[pool] out of host memory");
    }
    a->bins[0] = host;
    a->nbins = 1;
  }
  *out = pool;
  return 0;
}

size_t adr__pool_destroy(struct adr__pool* pool) {
  if (pool == NULL) return 0;
  size_t outstanding = 0;
  size_t cached = tc_detach_all(pool); /* counted as handed out by the arenas */
  for (unsigned i = 0; i < pool->narenas; i++) {
    struct arena* a = &pool->arenas[i];
    pthread_mutex_lock(&a->lock);
    outstanding += a->allocated_count;
    for (size_t j = 0; j < a->nbins; j++) {
      struct bin* bin = a->bins[j];
      /* No wait: destroy runs at process exit (or in tests) when no
       * stream works any more, and some drivers are half torn down by then. */
      if (bin->event != NULL) pool->sync.event_destroy(pool->sync.ctx, bin->event);
      free(bin);
    }
    free(a->bins);
    struct chunk* c = a->chunks;
    a->chunks = NULL;
    pthread_mutex_unlock(&a->lock);
    chunks_give_back(pool, c);
    for (size_t j = 0; j < a->nslabs; j++) free(a->slabs[j]);
    free(a->slabs);
    pthread_mutex_destroy(&a->lock);
  }
  for (unsigned i = 0; i < MAP_SHARDS; i++) {
    free(pool->map[i].buckets);
    pthread_mutex_destroy(&pool->map[i].lock);
  }
  free(pool);
  return outstanding - cached;
}

static struct arena* pick_arena(struct adr__pool* pool) {
  return &pool->arenas[adr__thread_ordinal() % pool->narenas];
}

static void note_peak(_Atomic uint64_t* now, _Atomic uint64_t* peak, uint64_t add) {
  uint64_t v = atomic_fetch_add_explicit(now, add, memory_order_relaxed) + add;
  uint64_t p = atomic_load_explicit(peak, memory_order_relaxed);
  while (v > p && !atomic_compare_exchange_weak_explicit(peak, &p, v, memory_order_relaxed,
                                                         memory_order_relaxed)) {
  }
}

/* Whether a bin can serve the request (without taking anything). */
static bool bin_fits(const struct bin* bin, size_t need, size_t csize) {
  if (treap_lower_bound(bin->tree, csize ? csize : need) != NULL) return true;
  return csize != 0 && mask_next(bin, adr__pool_class_index(csize)) != ADR__POOL_CLASS_COUNT;
}

/* Search order of bins for a request on `stream`: its own bins (active,
 * then sealed), the host bin, then what other streams freed: for the host
 * once their event has completed (queried, never waited for), for a stream
 * after a device-side wait on their event. */
static struct block* arena_take(struct adr__pool* pool, struct arena* a, void* stream, size_t need,
                                size_t csize, size_t* pending) {
  struct bin* own = bin_find(a, stream);
  struct block* b = NULL;
  if (own != NULL && own->free_bytes != 0) b = bin_take(a, own, need, csize);
  if (b != NULL) return b;
  if (stream != NULL) {
    for (size_t i = 1; b == NULL && i < a->nbins; i++) {
      struct bin* s = a->bins[i];
      if (s->sealed && s->stream == stream && s->free_bytes != 0) b = bin_take(a, s, need, csize);
    }
    if (b == NULL && a->bins[0]->free_bytes != 0) b = bin_take(a, a->bins[0], need, csize);
    if (b != NULL) return b;
  } else if (pool->has_sync) {
    /* Sealed bins whose stream got there go to the host bin, fitting or
     * not: they coalesce there. */
    bool moved = false;
    for (size_t i = 1; i < a->nbins; i++) {
      struct bin* s = a->bins[i];
      if (s->sealed && s->free_bytes != 0) {
        if (bin_complete(pool, s, false)) {
          bin_release_to_host(pool, a, s);
          moved = true;
        } else {
          *pending += s->free_bytes;
        }
      }
    }
    if (moved) b = bin_take(a, a->bins[0], need, csize);
    if (b != NULL) return b;
  }
  /* bins[] may grow (a seal makes a fresh bin): index, do not cache. */
  for (size_t i = 1; b == NULL && i < a->nbins; i++) {
    struct bin* other = a->bins[i];
    if (other->stream == stream || other->free_bytes == 0) continue;
    if (!other->sealed) other->wanted = true;
    if (!bin_fits(other, need, csize)) continue;
    if (stream == NULL ? bin_settle(pool, a, other, false)
                       : bin_order_after(pool, a, other, stream))
      b = bin_take(a, stream == NULL ? a->bins[0] : other, need, csize);
    else if (!other->sealed)
      *pending += other->free_bytes;
  }
  return b;
}

/* A new host chunk's pages (options host_pages, hugepages, populate), made
 * for a request of `want` bytes. Advice only: a kernel without THP (or
 * with it "never") or without MADV_POPULATE_WRITE refuses, and the pages
 * fault in on first touch as usual. */
static void chunk_prepare(struct adr__pool* pool, void* mem, size_t size, size_t want) {
  if (!pool->opts.host_pages) return;
  uintptr_t lo = ((uintptr_t)mem + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
  uintptr_t hi = ((uintptr_t)mem + size) & ~(HUGE_PAGE - 1);
  bool huge = pool->opts.hugepages == ADR__POOL_THP_ALL ||
              (pool->opts.hugepages == ADR__POOL_THP_LARGE && want >= ADR__POOL_THP_MIN);
  if (huge && hi > lo) (void)madvise((void*)lo, hi - lo, MADV_HUGEPAGE);
  if (pool->opts.populate) (void)madvise(mem, size, MADV_POPULATE_WRITE);
}

/* A fully free chunk of an arena no live thread uses before new memory:
 * threads come and go (a transfer stream's worker, a thread pool's
 * threads each get the next arena), and an arena each would otherwise
 * grow, and fault in fresh pages, while the arena of a thread that exited
 * sits on chunks nothing uses any more. The chunk moves to `own` (one
 * arena lock at a time; an arena with a live thread, or whose published
 * cache is smaller than the request, is skipped without its lock), and
 * with it the allocation-table shard of its addresses (up.placed). The
 * arenas of live threads are left alone: taking free blocks from them (the
 * first version of this) made two threads share one arena's lock and
 * cache lines, and taking their free chunks made two threads that each
 * free all they allocated hand chunks back and forth; either way
 * allocating on two threads was 4-10x slower per operation than on one.
 * Returns the block taken from the adopted chunk (own's lock held on
 * return when not NULL), or NULL with own's lock not held. */
static struct block* adopt_chunk(struct adr__pool* pool, struct arena* own, size_t need,
                                 size_t csize, size_t want) {
  unsigned first = (unsigned)(own - pool->arenas);
  for (unsigned k = 1; k < pool->narenas; k++) {
    struct arena* o = &pool->arenas[(first + k) % pool->narenas];
    if (atomic_load_explicit(&o->threads, memory_order_relaxed) != 0 ||
        atomic_load_explicit(&o->cached_pub, memory_order_relaxed) < want)
      continue;
    pthread_mutex_lock(&o->lock);
    struct chunk* c = o->chunks;
    while (c != NULL && (c->used != 0 || c->size < want || !chunk_ready(pool, o, c, false)))
      c = c->next;
    if (c == NULL) {
      pthread_mutex_unlock(&o->lock);
      continue;
    }
    /* The chunk's blocks move as they are (split into the classes the
     * last thread used, which the next one most likely wants too): their
     * metadata stays valid (slabs live as long as the pool). */
    for (struct block* b = c->first; b != NULL; b = b->next_phys) bin_remove(o, b);
    if (c->prev)
      c->prev->next = c->next;
    else
      o->chunks = c->next;
    if (c->next) c->next->prev = c->prev;
    c->prev = c->next = NULL;
    o->free_chunks--;
    o->reserved_bytes -= c->size;
    o->reserved_count--;
    atomic_store_explicit(&o->cached_pub, o->cached_bytes, memory_order_relaxed);
    pthread_mutex_unlock(&o->lock);

    if (pool->up.placed != NULL) pool->up.placed(pool->up.ctx, (void*)c->base, c->size, first);
    pthread_mutex_lock(&own->lock);
    c->next = own->chunks;
    if (own->chunks) own->chunks->prev = c;
    own->chunks = c;
    own->free_chunks++;
    own->reserved_bytes += c->size;
    own->reserved_count++;
    for (struct block* b = c->first; b != NULL; b = b->next_phys) {
      b->arena = own;
      bin_insert(own, own->bins[0], b);
    }
    /* NULL stream: the moved blocks are the host's (chunk_ready). */
    size_t pending = 0;
    struct block* got = arena_take(pool, own, NULL, need, csize, &pending);
    if (got == NULL && own->bins[0]->class_blocks != 0) {
      /* Split for other sizes: merge the host bin's class blocks (the
       * chunk as a whole holds the request). */
      bin_consolidate(own, own->bins[0]);
      got = arena_take(pool, own, NULL, need, csize, &pending);
    }
    if (got != NULL) return got;
    pthread_mutex_unlock(&own->lock);
    return NULL;
  }
  return NULL;
}

/* no_grow: EAGAIN instead of growing the pool (the caller's thread cache
 * holds blocks to give back first). */
static int pool_alloc_block(struct adr__pool* pool, size_t size, size_t alignment, void* stream,
                            bool no_grow, struct block** out, struct adr_error* error) {
  if (alignment < MIN_ALIGN) alignment = MIN_ALIGN;
  size_t pad = alignment - MIN_ALIGN;
  if (size > SIZE_MAX - pad - LARGE_GRANULE)
    return adr_error_set(error, EOVERFLOW, "[pool] size %zu with alignment %zu overflows", size,
                         alignment);
  size_t need = size + pad;
  size_t csize = 0;
  if (need <= ADR__POOL_CLASS_MAX)
    csize = adr__pool_class_size(adr__pool_class_index(need));
  else
    need = align_up(need, LARGE_GRANULE);
  size_t want = csize ? csize : need;

  struct arena* a = pick_arena(pool);
  pthread_mutex_lock(&a->lock);
  size_t pending = 0;
  struct block* b = arena_take(pool, a, stream, need, csize, &pending);
  if (b == NULL) {
    bool any_class = false;
    for (size_t i = 0; i < a->nbins; i++) any_class |= a->bins[i]->class_blocks != 0;
    if (any_class) {
      for (size_t i = 0; i < a->nbins; i++)
        if (a->bins[i]->class_blocks != 0) bin_consolidate(a, a->bins[i]);
      pending = 0;
      b = arena_take(pool, a, stream, need, csize, &pending);
    }
  }
  if (b == NULL && pool->narenas > 1) {
    pthread_mutex_unlock(&a->lock);
    b = adopt_chunk(pool, a, need, csize, want);
    if (b != NULL)
      a->adopted++;
    else
      pthread_mutex_lock(&a->lock);
  }
  if (b != NULL) {
    a->hits++;
  } else if (no_grow) {
    pthread_mutex_unlock(&a->lock);
    return EAGAIN;
  } else {
    a->misses++;
    /* Grow: at least the request, at least chunk_size, and half the arena's
     * reservation (capped) so the number of chunks stays logarithmic. */
    size_t grow = a->reserved_bytes / 2;
    if (grow > MAX_GROW) grow = MAX_GROW;
    /* Memory freed on streams that have not reached the frees yet will be
     * reusable soon: bridge the gap with the smallest step. */
    if (pending >= want) grow = 0;
    if (grow < pool->opts.chunk_size) grow = pool->opts.chunk_size;
    if (grow < want) grow = align_up(want, GROW_GRANULE);
    if (pool->opts.release_threshold != SIZE_MAX && grow > want) {
      size_t room = pool->opts.release_threshold / pool->narenas;
      room = room > a->reserved_bytes ? room - a->reserved_bytes : 0;
      if (grow > room) grow = room > want ? align_up(room, 4096) : align_up(want, 4096);
    }
    pthread_mutex_unlock(&a->lock);
    struct chunk* c = line_calloc(1, sizeof(*c));
    void* mem = NULL;
    int st = c == NULL ? adr_error_set(error, ENOMEM, "[pool] out of host memory")
                       : pool->up.alloc(pool->up.ctx, grow, 4096, &mem, error);
    if (st != 0 && grow > want && c != NULL)
      st = pool->up.alloc(pool->up.ctx, grow = align_up(want, 4096), 4096, &mem, error);
    if (st != 0) {
      free(c);
      return st;
    }
    chunk_prepare(pool, mem, grow, want);
    if (pool->up.placed != NULL)
      pool->up.placed(pool->up.ctx, mem, grow, (unsigned)(a - pool->arenas));
    c->base = (uintptr_t)mem;
    c->size = grow;
    pthread_mutex_lock(&a->lock);
    struct block* whole = block_new(a);
    if (whole == NULL) {
      pthread_mutex_unlock(&a->lock);
      pool->up.free(pool->up.ctx, mem, grow);
      free(c);
      return adr_error_set(error, ENOMEM, "[pool] out of host memory");
    }
    c->next = a->chunks;
    if (a->chunks) a->chunks->prev = c;
    a->chunks = c;
    a->free_chunks++;
    a->reserved_bytes += grow;
    a->reserved_count++;
    a->reserved_bytes_total += grow;
    a->reserved_count_total++;
    note_peak(&pool->reserved_now, &pool->reserved_peak, grow);
    note_peak(&pool->reserved_count_now, &pool->reserved_count_peak, 1);
    whole->addr = c->base;
    whole->size = grow;
    whole->chunk = c;
    c->first = whole;
    /* Fresh memory is host-ordered: carve from it in the host bin. */
    POISON(pool, c->base, grow);
    bin_insert(a, a->bins[0], whole);
    b = bin_take(a, a->bins[0], need, csize);
  }
  if (b->chunk->used == 0) a->free_chunks--;
  b->chunk->used += b->size;
  b->user = align_up(b->addr, alignment);
  b->user_size = size;
  b->stream = stream;
  UNPOISON(pool, b->user, size);
  a->allocated_bytes += size;
  a->allocated_count++;
  atomic_store_explicit(&a->cached_pub, a->cached_bytes, memory_order_relaxed);
  pthread_mutex_unlock(&a->lock);
  *out = b;
  return 0;
}

/* Gives an allocated block back to its arena, filed under `stream`. */
static int pool_release(struct adr__pool* pool, struct block* b, void* stream,
                        struct adr_error* error) {
  struct arena* a = b->arena;
  pthread_mutex_lock(&a->lock);
  struct bin* bin = bin_get(pool, a, stream);
  if (bin == NULL) {
    /* No host memory to track a new stream: the block stays allocated
     * (the caller keeps it recorded) rather than be reused too early. */
    pthread_mutex_unlock(&a->lock);
    return adr_error_set(error, ENOMEM, "[pool] out of host memory tracking stream %p", stream);
  }
  a->allocated_bytes -= b->user_size;
  a->allocated_count--;
  b->chunk->used -= b->size;
  if (b->chunk->used == 0) a->free_chunks++;
  if (stream != NULL)
    a->last_bin = bin;
  else
    POISON(pool, b->addr, b->size); /* a stream's blocks: once it got there */
  if (is_class_size(b->size))
    bin_insert(a, bin, b);
  else
    bin_insert_coalesce(a, bin, b);
  /* Every SEAL_BYTES freed on a stream whose memory others have looked
   * for, seal its batch (one event record) unless an older batch is still
   * pending: by the time the host runs out, the stream has usually reached
   * it, so the host can reuse it without waiting (otherwise it would find
   * only just-recorded events). A stream that reuses its own frees never
   * pays for a record. */
  if (stream != NULL && bin->wanted && pool->has_sync && bin->free_bytes >= bin->seal_at) {
    bin->seal_at = bin->free_bytes + SEAL_BYTES;
    if (stream_pending(pool, a, stream) == 0) bin_seal(pool, a, bin);
  }
  /* Over the cap: give fully free chunks back now. An attempt that cannot
   * get under it (fragmentation, streams still behind) backs off for a
   * growing number of frees (4 to 256) unless another chunk_size was freed
   * meanwhile, so the free path stays O(1) amortised. */
  struct chunk* released = NULL;
  size_t bytes = 0;
  if ((atomic_load_explicit(&pool->max_cached, memory_order_relaxed) != SIZE_MAX ||
       pool->opts.release_threshold != SIZE_MAX) &&
      a->free_chunks != 0 && over_limits(pool, a)) {
    if (a->collect_skip > 0 && a->cached_bytes < a->collect_retry_at) {
      a->collect_skip--;
    } else {
      released = arena_collect(pool, a, false, over_limits, &bytes);
      if (over_limits(pool, a)) {
        a->collect_backoff = a->collect_backoff == 0             ? 4
                             : a->collect_backoff >= MAX_BACKOFF ? MAX_BACKOFF
                                                                 : a->collect_backoff * 2;
        a->collect_skip = a->collect_backoff;
        a->collect_retry_at = a->cached_bytes + pool->opts.chunk_size;
      } else {
        a->collect_backoff = 0;
      }
    }
  }
  atomic_store_explicit(&a->cached_pub, a->cached_bytes, memory_order_relaxed);
  pthread_mutex_unlock(&a->lock);
  chunks_give_back(pool, released);
  return 0;
}

/* ---- per-thread caches ---------------------------------------------------
 *
 * In front of the arenas, each thread keeps a small cache per pool of the
 * class blocks it freed (classes up to TC_MAX_SIZE, at most TC_SLOTS blocks
 * per class and TC_MAX_BYTES in all), LIFO, so an allocation that follows a
 * free of its class takes no arena lock and does no bin work. The arenas
 * see a cached block as still handed out (its chunk's `used`, the arena's
 * allocated counts); the cache keeps its hits and the difference between
 * the sizes handed out and those the arena recorded, and folds both into
 * the arena when it is flushed.
 *
 * Stream order: each cached block keeps the stream it was freed on. An
 * allocation on stream S takes a block freed on S (S's own order protects
 * it, as for S's bins) or with a NULL stream; a host allocation takes only
 * the latter. When the blocks of the requested class are all unusable, the
 * class goes back to the arena first, where the bins order it (event
 * waits, seals), so no block is hidden from the stream-ordered search; and
 * before the pool grows, the thread's whole cache goes back.
 *
 * Flushes: every cache of the pool on trim, statistics, the invariant check
 * and stream retirement; the thread's own when it exits (a pthread key's
 * destructor). A destroyed pool detaches its caches (their blocks die with
 * the chunks); the memory of a cache belongs to its thread.
 *
 * Locks: a cache belongs to its thread, which enters it on every use
 * (tc_enter) without an atomic read-modify-write where the kernel offers
 * process-wide memory barriers (membarrier(2), Linux 4.14): the thread marks
 * itself busy with a plain store and checks that no flush wants the cache
 * (tc->busy, tc->wanted); a flush takes the cache's spin lock, marks it
 * wanted, has every running thread of the process execute a memory barrier
 * (MEMBARRIER_CMD_PRIVATE_EXPEDITED), then waits until the owner is not
 * busy. After that barrier the owner either was seen busy or sees `wanted`
 * and goes to the arena instead, as it does when a flush holds the cache
 * (the asymmetric barrier of userspace RCU and of folly's hazard pointers:
 * the frequent side pays nothing, the rare one a system call). A spin lock
 * taken on every use cost two atomic exchanges per adr_alloc + adr_free
 * pair, about 14 ns of the tight pair's 46 on this project's machine.
 * Without membarrier (other kernels, seccomp, valgrind) and under
 * ThreadSanitizer, which does not model it, the thread takes the spin lock
 * (trylock: a flush holding it sends the thread to the arena). The owner's
 * own slow paths (its flush before the pool grows, its exit) take the spin
 * lock, which excludes flushes. tc_global guards which caches exist
 * (attach, detach, thread exit, flush of all). Order: tc_global, then a
 * cache, then an arena. */

#define TC_SLOTS 16u
#define TC_MAX_SIZE ((size_t)64 << 10)
#define TC_CLASSES 36u /* adr__pool_class_index(TC_MAX_SIZE) + 1 */
#define TC_MAX_BYTES ((size_t)1 << 20)

struct tc_entry {
  struct block* b;
  void* stream; /* what it was freed on (NULL: the host) */
};

struct tcache {
  struct adr__spin lock;    /* flushes; the owner's slow paths; the owner's every use unbiased */
  _Atomic int busy;         /* biased: the owner is inside (written by the owner only) */
  _Atomic int wanted;       /* biased: a flush holding `lock` waits for the owner to leave */
  _Atomic uint64_t serial;  /* the pool's; written by the owner under tc_global */
  struct adr__pool* pool;   /* NULL once detached (tc_global) */
  struct tcache* pool_prev; /* the pool's list (tc_global) */
  struct tcache* pool_next;
  struct tcache* thread_next; /* the owner's list */
  unsigned arena;             /* the owner's arena in pool (counted in its `threads`) */
  size_t bytes;
  uint64_t hits;
  int64_t size_delta; /* sizes handed out minus those the arenas recorded */
  uint8_t count[TC_CLASSES];
  struct tc_entry slots[TC_CLASSES][TC_SLOTS];
};

_Static_assert(TC_CLASSES == 36u, "TC_CLASSES must cover TC_MAX_SIZE");

static pthread_mutex_t tc_global = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t tc_once = PTHREAD_ONCE_INIT;
static pthread_key_t tc_key;
static bool tc_key_ok;
static _Thread_local ADR__TLS_HOT struct tcache* tc_last; /* checked first */
static _Thread_local ADR__TLS_HOT struct tcache* tc_mine; /* every cache of this thread */

/* Biased caches (above): membarrier is registered. Set once under tc_once,
 * before any cache exists, so every thread with a cache reads it set. */
#if defined(__SANITIZE_THREAD__)
#define TC_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TC_TSAN 1
#endif
#endif
static bool tc_biased;

static void tc_bias_init(void) {
#if defined(__linux__) && defined(SYS_membarrier) && !defined(TC_TSAN)
  long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  tc_biased = cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
              syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
#endif
}

/* Every running thread of the process executes a full memory barrier
 * before this returns. A child of fork() that is not registered (the
 * registration is the process's) registers and retries; the global
 * command, slower but needing no registration, is the last resort. */
static void tc_membarrier(void) {
#if defined(__linux__) && defined(SYS_membarrier)
  if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0) return;
  if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 &&
      syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
    return;
  if (syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) == 0) return;
  abort(); /* the query said it works: the kernel took it back */
#endif
}

/* The owner enters its cache: false when a flush has it (the caller goes
 * to the arena). */
static inline bool tc_enter(struct tcache* tc) {
  if (!tc_biased) return adr__spin_trylock(&tc->lock);
  atomic_store_explicit(&tc->busy, 1, memory_order_relaxed);
  /* No fence: a flush's membarrier orders this store before its check. */
  atomic_signal_fence(memory_order_seq_cst);
  if (__builtin_expect(atomic_load_explicit(&tc->wanted, memory_order_acquire) == 0, 1))
    return true;
  atomic_store_explicit(&tc->busy, 0, memory_order_release);
  return false;
}

static inline void tc_leave(struct tcache* tc) {
  if (!tc_biased)
    adr__spin_unlock(&tc->lock);
  else
    atomic_store_explicit(&tc->busy, 0, memory_order_release);
}

/* A flush (any thread) takes the cache: its lock, and biased, the owner out
 * of it. tc_wait_owner after tc_want lets tc_flush_all mark every cache
 * before one barrier. */
static void tc_want(struct tcache* tc) {
  adr__spin_lock(&tc->lock);
  if (tc_biased) atomic_store_explicit(&tc->wanted, 1, memory_order_relaxed);
}

static void tc_wait_owner(struct tcache* tc) {
  if (!tc_biased) return;
  /* The owner is inside for a few dozen instructions, unless it was
   * preempted there: then give it the core. */
  for (unsigned i = 1; atomic_load_explicit(&tc->busy, memory_order_acquire) != 0; i++) {
    if (i % 64 == 0) sched_yield();
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
}

static void tc_take_over(struct tcache* tc) {
  tc_want(tc);
  if (tc_biased) tc_membarrier();
  tc_wait_owner(tc);
}

static void tc_give_back(struct tcache* tc) {
  if (tc_biased) atomic_store_explicit(&tc->wanted, 0, memory_order_release);
  adr__spin_unlock(&tc->lock);
}

/* Gives the cache's blocks of classes [lo, hi) back to their arenas and
 * folds its counts in (cache lock held). A block whose stream cannot be
 * tracked (no host memory for a bin) stays cached. */
static void tc_flush_locked(struct adr__pool* pool, struct tcache* tc, unsigned lo, unsigned hi) {
  for (unsigned c = lo; c < hi; c++) {
    unsigned kept = 0;
    for (unsigned i = 0; i < tc->count[c]; i++) {
      struct tc_entry e = tc->slots[c][i];
      size_t size = e.b->size;
      if (pool_release(pool, e.b, e.stream, NULL) != 0)
        tc->slots[c][kept++] = e;
      else
        tc->bytes -= size;
    }
    tc->count[c] = (uint8_t)kept;
  }
  if (tc->hits != 0 || tc->size_delta != 0) {
    struct arena* a = &pool->arenas[0];
    pthread_mutex_lock(&a->lock);
    a->hits += tc->hits;
    a->allocated_bytes += (uint64_t)tc->size_delta;
    pthread_mutex_unlock(&a->lock);
    tc->hits = 0;
    tc->size_delta = 0;
  }
}

/* Flushes every thread's cache of the pool. */
static void tc_flush_all(struct adr__pool* pool) {
  pthread_mutex_lock(&tc_global);
  /* Every cache marked, then one barrier for all of them. */
  for (struct tcache* tc = pool->tc_list; tc != NULL; tc = tc->pool_next) tc_want(tc);
  if (tc_biased && pool->tc_list != NULL) tc_membarrier();
  for (struct tcache* tc = pool->tc_list; tc != NULL; tc = tc->pool_next) {
    tc_wait_owner(tc);
    tc_flush_locked(pool, tc, 0, TC_CLASSES);
    tc_give_back(tc);
  }
  pthread_mutex_unlock(&tc_global);
}

static void tc_unlink(struct adr__pool* pool, struct tcache* tc) {
  if (tc->pool_prev != NULL)
    tc->pool_prev->pool_next = tc->pool_next;
  else
    pool->tc_list = tc->pool_next;
  if (tc->pool_next != NULL) tc->pool_next->pool_prev = tc->pool_prev;
  tc->pool_prev = tc->pool_next = NULL;
  tc->pool = NULL;
}

/* Thread exit: the caches go back to their pools and are freed. */
static void tc_thread_exit(void* value) {
  (void)value;
  pthread_mutex_lock(&tc_global);
  struct tcache* tc = tc_mine;
  tc_mine = tc_last = NULL;
  while (tc != NULL) {
    struct tcache* next = tc->thread_next;
    if (tc->pool != NULL) {
      struct adr__pool* pool = tc->pool;
      adr__spin_lock(&tc->lock);
      tc_flush_locked(pool, tc, 0, TC_CLASSES);
      adr__spin_unlock(&tc->lock);
      atomic_fetch_sub_explicit(&pool->arenas[tc->arena].threads, 1, memory_order_relaxed);
      tc_unlink(pool, tc);
    }
    free(tc);
    tc = next;
  }
  pthread_mutex_unlock(&tc_global);
}

static void tc_key_create(void) {
  tc_key_ok = pthread_key_create(&tc_key, tc_thread_exit) == 0;
  tc_bias_init();
}

/* Drops the caches of a pool being destroyed (their blocks go with the
 * chunks); returns how many blocks they held. */
static size_t tc_detach_all(struct adr__pool* pool) {
  size_t blocks = 0;
  pthread_mutex_lock(&tc_global);
  while (pool->tc_list != NULL) {
    struct tcache* tc = pool->tc_list;
    tc_take_over(tc);
    for (unsigned c = 0; c < TC_CLASSES; c++) {
      blocks += tc->count[c];
      tc->count[c] = 0;
    }
    tc->bytes = 0;
    tc->hits = 0;
    tc->size_delta = 0;
    tc_unlink(pool, tc);
    tc_give_back(tc);
  }
  pthread_mutex_unlock(&tc_global);
  return blocks;
}

/* The calling thread's cache of the pool, made on first use; NULL when out
 * of host memory (the thread then uses the arenas only). */
static struct tcache* tc_get(struct adr__pool* pool) {
  struct tcache* tc = tc_last;
  if (__builtin_expect(tc != NULL, 1) &&
      atomic_load_explicit(&tc->serial, memory_order_relaxed) == pool->serial)
    return tc;
  for (tc = tc_mine; tc != NULL; tc = tc->thread_next)
    if (atomic_load_explicit(&tc->serial, memory_order_relaxed) == pool->serial) {
      tc_last = tc;
      return tc;
    }
  pthread_once(&tc_once, tc_key_create);
  if (!tc_key_ok || pthread_setspecific(tc_key, (void*)1) != 0) return NULL;
  pthread_mutex_lock(&tc_global);
  for (tc = tc_mine; tc != NULL && tc->pool != NULL; tc = tc->thread_next) {
  }
  if (tc == NULL) {
    tc = line_calloc(1, sizeof(*tc));
    if (tc == NULL) {
      pthread_mutex_unlock(&tc_global);
      return NULL;
    }
    tc->thread_next = tc_mine;
    tc_mine = tc;
  }
  tc->pool = pool;
  tc->arena = (unsigned)(pick_arena(pool) - pool->arenas);
  atomic_fetch_add_explicit(&pool->arenas[tc->arena].threads, 1, memory_order_relaxed);
  atomic_store_explicit(&tc->serial, pool->serial, memory_order_relaxed);
  tc->pool_prev = NULL;
  tc->pool_next = pool->tc_list;
  if (pool->tc_list != NULL) pool->tc_list->pool_prev = tc;
  pool->tc_list = tc;
  pthread_mutex_unlock(&tc_global);
  tc_last = tc;
  return tc;
}

/* A cached block of class c usable on `stream`, removed from the cache;
 * NULL if none. Cache lock held. */
static struct block* tc_take(struct tcache* tc, unsigned c, void* stream) {
  unsigned n = tc->count[c];
  for (unsigned i = n; i-- > 0;) {
    void* s = tc->slots[c][i].stream;
    if (s != NULL && s != stream) continue;
    struct block* b = tc->slots[c][i].b;
    memmove(&tc->slots[c][i], &tc->slots[c][i + 1], (n - i - 1) * sizeof(tc->slots[c][0]));
    tc->count[c] = (uint8_t)(n - 1);
    tc->bytes -= b->size;
    return b;
  }
  return NULL;
}

/* Allocation: the thread's cache, then the arena (which grows only once
 * the thread's cache has gone back). */
static int pool_get(struct adr__pool* pool, size_t size, size_t alignment, void* stream,
                    struct block** out, struct adr_error* error) {
  struct tcache* tc = tc_get(pool);
  bool cached = false;
  if (tc != NULL && tc_enter(tc)) {
    struct block* b = NULL;
    if (alignment <= MIN_ALIGN && size <= TC_MAX_SIZE) {
      unsigned c = adr__pool_class_index(size);
      if (tc->count[c] != 0) {
        b = tc_take(tc, c, stream);
        /* Only blocks of other streams: the arena orders them. */
        if (b == NULL) tc_flush_locked(pool, tc, c, c + 1);
      }
    }
    if (b != NULL) {
      tc->hits++;
      tc->size_delta += (int64_t)size - (int64_t)b->user_size;
      tc_leave(tc);
      b->user = b->addr;
      b->user_size = size;
      b->stream = stream;
      UNPOISON(pool, b->user, size);
      *out = b;
      return 0;
    }
    cached = tc->bytes != 0;
    tc_leave(tc);
  }
  if (cached) {
    int st = pool_alloc_block(pool, size, alignment, stream, true, out, error);
    if (st != EAGAIN) return st;
    adr__spin_lock(&tc->lock);
    tc_flush_locked(pool, tc, 0, TC_CLASSES);
    adr__spin_unlock(&tc->lock);
  }
  return pool_alloc_block(pool, size, alignment, stream, false, out, error);
}

/* Free: into the thread's cache when the block is a cached class and the
 * cache has room (a full class gives its older half back), else to the
 * block's arena. */
static int pool_put(struct adr__pool* pool, struct block* b, void* stream,
                    struct adr_error* error) {
  struct tcache* tc = NULL;
  if (b->size <= TC_MAX_SIZE && is_class_size(b->size) && (tc = tc_get(pool)) != NULL &&
      tc_enter(tc)) {
    unsigned c = adr__pool_class_index(b->size);
    if (tc->count[c] == TC_SLOTS) {
      unsigned half = TC_SLOTS / 2, kept = 0;
      for (unsigned i = 0; i < TC_SLOTS; i++) {
        struct tc_entry e = tc->slots[c][i];
        if (i < half && pool_release(pool, e.b, e.stream, NULL) == 0)
          tc->bytes -= e.b->size;
        else
          tc->slots[c][kept++] = e;
      }
      tc->count[c] = (uint8_t)kept;
    }
    if (tc->count[c] < TC_SLOTS && tc->bytes + b->size <= TC_MAX_BYTES) {
      /* A block freed on a stream is poisoned once the stream got there
       * (in the arena), as in pool_release. */
      if (stream == NULL) POISON(pool, b->addr, b->size);
      tc->slots[c][tc->count[c]++] = (struct tc_entry){b, stream};
      tc->bytes += b->size;
      tc_leave(tc);
      return 0;
    }
    tc_leave(tc);
  }
  return pool_release(pool, b, stream, error);
}

int adr__pool_alloc(struct adr__pool* pool, size_t size, size_t alignment, void* stream, void** out,
                    struct adr_error* error) {
  struct block* b = NULL;
  int st = pool_get(pool, size, alignment, stream, &b, error);
  if (st != 0) return st;
  if (map_insert(pool, b) != 0) {
    pool_release(pool, b, NULL, NULL);
    return adr_error_set(error, ENOMEM, "[pool] out of host memory");
  }
  *out = (void*)b->user;
  return 0;
}

int adr__pool_alloc_block(struct adr__pool* pool, size_t size, size_t alignment, void* stream,
                          void** out, void** out_block, struct adr_error* error) {
  struct block* b = NULL;
  int st = pool_get(pool, size, alignment, stream, &b, error);
  if (st != 0) return st;
  *out = (void*)b->user;
  *out_block = b;
  return 0;
}

int adr__pool_free_block(struct adr__pool* pool, void* block, size_t size, void* stream,
                         struct adr_error* error) {
  struct block* b = block;
  if (b->user_size != size)
    return adr_error_set(error, ERANGE,
                         "[pool] %p was allocated with size %zu, freed with size %zu",
                         (void*)b->user, b->user_size, size);
  return pool_put(pool, b, stream, error);
}

int adr__pool_free(struct adr__pool* pool, void* ptr, size_t size, void* stream,
                   struct adr_error* error) {
  int st;
  size_t actual = 0;
  struct block* b = map_remove(pool, (uintptr_t)ptr, size, &st, &actual);
  if (b == NULL) {
    if (st == ERANGE)
      return adr_error_set(error, ERANGE,
                           "[pool] %p was allocated with size %zu, freed with size %zu", ptr,
                           actual, size);
    return adr_error_set(error, EINVAL, "[pool] %p was not allocated by this pool", ptr);
  }
  st = pool_put(pool, b, stream, error);
  if (st != 0) map_insert(pool, b); /* still allocated: keep it findable */
  return st;
}

size_t adr__pool_trim(struct adr__pool* pool, bool wait) {
  size_t total = 0;
  tc_flush_all(pool);
  for (unsigned i = 0; i < pool->narenas; i++) {
    struct arena* a = &pool->arenas[i];
    size_t bytes = 0;
    pthread_mutex_lock(&a->lock);
    struct chunk* list = arena_collect(pool, a, wait, NULL, &bytes);
    pthread_mutex_unlock(&a->lock);
    chunks_give_back(pool, list);
    total += bytes;
  }
  return total;
}

void adr__pool_stream_retire(struct adr__pool* pool, void* stream) {
  if (stream == NULL) return;
  tc_flush_all(pool); /* the stream's cached blocks, into its bins */
  for (unsigned i = 0; i < pool->narenas; i++) {
    struct arena* a = &pool->arenas[i];
    pthread_mutex_lock(&a->lock);
    for (size_t j = 1; j < a->nbins; j++) {
      struct bin* bin = a->bins[j];
      if (bin->stream != stream) continue;
      /* Wait (while the stream exists) until it reached the frees of its
       * bins; the active bin's are covered by a last record. */
      if (pool->has_sync && bin->free_bytes != 0 && !bin->complete) {
        if (bin->sealed) {
          pool->sync.event_synchronize(pool->sync.ctx, bin->event);
        } else if (bin->event != NULL ||
                   pool->sync.event_create(pool->sync.ctx, &bin->event) == 0) {
          if (pool->sync.event_record(pool->sync.ctx, bin->event, stream) == 0)
            pool->sync.event_synchronize(pool->sync.ctx, bin->event);
        } else {
          bin->event = NULL;
        }
      }
      if (bin->event != NULL) {
        pool->sync.event_destroy(pool->sync.ctx, bin->event);
        bin->event = NULL;
      }
      bin_release_to_host(pool, a, bin);
    }
    atomic_store_explicit(&a->cached_pub, a->cached_bytes, memory_order_relaxed);
    pthread_mutex_unlock(&a->lock);
  }
}

void adr__pool_stats_get(struct adr__pool* pool, struct adr__pool_stats* out) {
  memset(out, 0, sizeof(*out));
  tc_flush_all(pool); /* exact: cached blocks and hits as the arenas count them */
  for (unsigned i = 0; i < pool->narenas; i++) {
    struct arena* a = &pool->arenas[i];
    pthread_mutex_lock(&a->lock);
    out->reserved_bytes += a->reserved_bytes;
    out->reserved_count += a->reserved_count;
    out->reserved_bytes_total += a->reserved_bytes_total;
    out->reserved_count_total += a->reserved_count_total;
    out->cached_bytes += a->cached_bytes;
    out->cache_hits += a->hits;
    out->cache_misses += a->misses;
    out->adopted += a->adopted;
    out->stream_waits += a->stream_waits;
    out->trimmed_bytes += a->trimmed;
    out->allocated_bytes += a->allocated_bytes;
    out->allocated_count += a->allocated_count;
    for (size_t j = 0; j < a->nbins; j++) {
      size_t m = bin_largest(a->bins[j]);
      if (m > out->largest_free_block) out->largest_free_block = m;
    }
    pthread_mutex_unlock(&a->lock);
  }
  size_t cap = atomic_load_explicit(&pool->max_cached, memory_order_relaxed);
  out->max_cached = cap == SIZE_MAX ? UINT64_MAX : cap;
  if (pool->opts.host_pages) {
    out->host_pages = pool->opts.hugepages == ADR__POOL_THP_ALL     ? ADR_HOST_PAGES_HUGE_ALL
                      : pool->opts.hugepages == ADR__POOL_THP_LARGE ? ADR_HOST_PAGES_HUGE_LARGE
                                                                    : 0;
    if (pool->opts.populate) out->host_pages |= ADR_HOST_PAGES_POPULATE;
  }
  out->reserved_bytes_peak = atomic_load_explicit(&pool->reserved_peak, memory_order_relaxed);
  out->reserved_count_peak = atomic_load_explicit(&pool->reserved_count_peak, memory_order_relaxed);
  /* Decided once for the process, with the first cache (or here). */
  pthread_once(&tc_once, tc_key_create);
  out->thread_cache = tc_biased ? ADR_THREAD_CACHE_BIASED : ADR_THREAD_CACHE_LOCKED;
}

size_t adr__pool_max_cached_set(struct adr__pool* pool, size_t max_cached) {
  return atomic_exchange_explicit(&pool->max_cached, max_cached, memory_order_relaxed);
}

void adr__pool_stats_reset_peaks(struct adr__pool* pool) {
  atomic_store_explicit(&pool->reserved_peak,
                        atomic_load_explicit(&pool->reserved_now, memory_order_relaxed),
                        memory_order_relaxed);
  atomic_store_explicit(&pool->reserved_count_peak,
                        atomic_load_explicit(&pool->reserved_count_now, memory_order_relaxed),
                        memory_order_relaxed);
}

/* Invariants, for the tests: the blocks of each chunk tile it; a free block
 * sits in a bin of its arena and no two address-neighbours of one bin are
 * both free in its treap (they would have been merged); the byte counts
 * agree with the blocks. Returns 0 or EPROTO with what is wrong in msg. */
int adr__pool_check(struct adr__pool* pool, char* msg, size_t size) {
  int st = 0;
  tc_flush_all(pool);
  for (unsigned i = 0; i < pool->narenas && st == 0; i++) {
    struct arena* a = &pool->arenas[i];
    pthread_mutex_lock(&a->lock);
    uint64_t reserved = 0, cached = 0;
    for (struct chunk* c = a->chunks; c != NULL && st == 0; c = c->next) {
      reserved += c->size;
      uintptr_t at = c->base;
      for (struct block* b = c->first; b != NULL && st == 0; b = b->next_phys) {
        if (b->addr != at || b->chunk != c || b->arena != a) {
          snprintf(msg, size, "arena %u: block %#lx does not tile its chunk", i,
                   (unsigned long)b->addr);
          st = EPROTO;
        }
        at += b->size;
        if (b->where != WHERE_NONE) {
          cached += b->size;
          struct block* n = b->next_phys;
          if (b->where == WHERE_TREE && n != NULL && n->where == WHERE_TREE && n->bin == b->bin) {
            snprintf(msg, size, "arena %u: neighbours of %zu and %zu bytes in one bin not merged",
                     i, b->size, n->size);
            st = EPROTO;
          }
        }
      }
      size_t used = 0;
      for (struct block* b = c->first; b != NULL; b = b->next_phys)
        if (b->where == WHERE_NONE) used += b->size;
      if (st == 0 && used != c->used) {
        snprintf(msg, size, "arena %u: chunk used %zu, blocks handed out %zu", i, c->used, used);
        st = EPROTO;
      }
      if (st == 0 && at != c->base + c->size) {
        snprintf(msg, size, "arena %u: blocks do not cover their chunk", i);
        st = EPROTO;
      }
    }
    if (st == 0 && (reserved != a->reserved_bytes || cached != a->cached_bytes)) {
      snprintf(msg, size, "arena %u: reserved %llu/%llu cached %llu/%llu disagree", i,
               (unsigned long long)reserved, (unsigned long long)a->reserved_bytes,
               (unsigned long long)cached, (unsigned long long)a->cached_bytes);
      st = EPROTO;
    }
    pthread_mutex_unlock(&a->lock);
  }
  return st;
}
