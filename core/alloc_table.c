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

struct adr__alloc_table {
  struct shard shards[SHARDS];
};

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
  return t;
}

void adr__alloc_table_destroy(struct adr__alloc_table* t) {
  if (t == NULL) return;
  for (int i = 0; i < SHARDS; i++) {
    pthread_mutex_destroy(&t->shards[i].lock);
    free(t->shards[i].slots);
  }
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
