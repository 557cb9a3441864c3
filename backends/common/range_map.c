/* SPDX-License-Identifier: Apache-2.0
 *
 * The backends' interval map (see range_map.h).
 */
#include "range_map.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static inline void* at(const struct adr_range_map* map, size_t i) {
  return map->items + i * map->elem_size;
}

/* The range at the start of an entry, read without aliasing assumptions. */
static inline struct adr_range range_of(const void* entry) {
  struct adr_range r;
  memcpy(&r, entry, sizeof(r));
  return r;
}

/* Index of the first entry whose base is > addr. Lock held. */
static size_t upper_bound(const struct adr_range_map* map, uintptr_t addr) {
  size_t lo = 0, hi = map->count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (range_of(at(map, mid)).base <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

void adr_range_map_clear(struct adr_range_map* map) {
  pthread_rwlock_wrlock(&map->lock);
  free(map->items);
  map->items = NULL;
  map->count = 0;
  map->capacity = 0;
  pthread_rwlock_unlock(&map->lock);
}

int adr_range_map_insert(struct adr_range_map* map, const void* entry) {
  struct adr_range r = range_of(entry);
  if (r.size == 0) return EINVAL;
  if (r.base + r.size < r.base) return EOVERFLOW;
  int st = 0;
  pthread_rwlock_wrlock(&map->lock);
  size_t pos = upper_bound(map, r.base);
  /* The previous entry must end at or before r.base, the next one must
   * start at or after its end. */
  if (pos > 0) {
    struct adr_range prev = range_of(at(map, pos - 1));
    if (prev.base + prev.size > r.base) st = EEXIST;
  }
  if (st == 0 && pos < map->count && range_of(at(map, pos)).base < r.base + r.size) st = EEXIST;
  if (st == 0 && map->count == map->capacity) {
    size_t cap = map->capacity ? map->capacity * 2 : 64;
    unsigned char* items = realloc(map->items, cap * map->elem_size);
    if (items == NULL) {
      st = ENOMEM;
    } else {
      map->items = items;
      map->capacity = cap;
    }
  }
  if (st == 0) {
    memmove(at(map, pos + 1), at(map, pos), (map->count - pos) * map->elem_size);
    memcpy(at(map, pos), entry, map->elem_size);
    map->count++;
  }
  pthread_rwlock_unlock(&map->lock);
  return st;
}

/* Removes entry pos into out (if not NULL). Lock held exclusively. */
static void remove_at(struct adr_range_map* map, size_t pos, void* out) {
  if (out != NULL) memcpy(out, at(map, pos), map->elem_size);
  memmove(at(map, pos), at(map, pos + 1), (map->count - pos - 1) * map->elem_size);
  map->count--;
}

int adr_range_map_remove(struct adr_range_map* map, uintptr_t base, void* out) {
  int st = ENOENT;
  pthread_rwlock_wrlock(&map->lock);
  size_t pos = upper_bound(map, base);
  if (pos > 0 && range_of(at(map, pos - 1)).base == base) {
    remove_at(map, pos - 1, out);
    st = 0;
  }
  pthread_rwlock_unlock(&map->lock);
  return st;
}

int adr_range_map_find(struct adr_range_map* map, uintptr_t addr, size_t len, void* out) {
  int st = ENOENT;
  pthread_rwlock_rdlock(&map->lock);
  size_t pos = upper_bound(map, addr);
  if (pos > 0) {
    struct adr_range r = range_of(at(map, pos - 1));
    size_t offset = addr - r.base;
    if (offset < r.size) {
      memcpy(out, at(map, pos - 1), map->elem_size);
      st = len <= r.size - offset ? 0 : ERANGE;
    }
  }
  pthread_rwlock_unlock(&map->lock);
  return st;
}

int adr_range_map_take_first(struct adr_range_map* map,
                             bool (*match)(const void* entry, const void* arg), const void* arg,
                             void* out) {
  int st = ENOENT;
  pthread_rwlock_wrlock(&map->lock);
  for (size_t i = 0; i < map->count; i++) {
    if (match(at(map, i), arg)) {
      remove_at(map, i, out);
      st = 0;
      break;
    }
  }
  pthread_rwlock_unlock(&map->lock);
  return st;
}

size_t adr_range_map_count(struct adr_range_map* map) {
  pthread_rwlock_rdlock(&map->lock);
  size_t n = map->count;
  pthread_rwlock_unlock(&map->lock);
  return n;
}
