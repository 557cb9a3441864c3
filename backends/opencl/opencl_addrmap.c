/* SPDX-License-Identifier: Apache-2.0
 *
 * Interval map of the OpenCL backend's allocations (see opencl_addrmap.h).
 */
#include "opencl_addrmap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Index of the first entry whose base is > addr. Lock held. */
static size_t upper_bound(const struct ocl_addrmap* map, uintptr_t addr) {
  size_t lo = 0, hi = map->count;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (map->items[mid].base <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

void ocl_addrmap_clear(struct ocl_addrmap* map) {
  pthread_rwlock_wrlock(&map->lock);
  free(map->items);
  map->items = NULL;
  map->count = 0;
  map->capacity = 0;
  pthread_rwlock_unlock(&map->lock);
}

int ocl_addrmap_insert(struct ocl_addrmap* map, const struct ocl_alloc* a) {
  if (a->size == 0) return EINVAL;
  if (a->base + a->size < a->base) return EOVERFLOW;
  int st = 0;
  pthread_rwlock_wrlock(&map->lock);
  size_t pos = upper_bound(map, a->base);
  /* The previous entry must end at or before a->base, the next one must
   * start at or after a->base + a->size. */
  if (pos > 0) {
    const struct ocl_alloc* prev = &map->items[pos - 1];
    if (prev->base + prev->size > a->base) st = EEXIST;
  }
  if (st == 0 && pos < map->count && map->items[pos].base < a->base + a->size) st = EEXIST;
  if (st == 0 && map->count == map->capacity) {
    size_t cap = map->capacity ? map->capacity * 2 : 64;
    struct ocl_alloc* items = realloc(map->items, cap * sizeof(*items));
    if (items == NULL) {
      st = ENOMEM;
    } else {
      map->items = items;
      map->capacity = cap;
    }
  }
  if (st == 0) {
    memmove(&map->items[pos + 1], &map->items[pos], (map->count - pos) * sizeof(*a));
    map->items[pos] = *a;
    map->count++;
  }
  pthread_rwlock_unlock(&map->lock);
  return st;
}

/* Removes items[pos] into *out. Lock held exclusively. */
static void remove_at(struct ocl_addrmap* map, size_t pos, struct ocl_alloc* out) {
  if (out != NULL) *out = map->items[pos];
  memmove(&map->items[pos], &map->items[pos + 1], (map->count - pos - 1) * sizeof(*out));
  map->count--;
}

int ocl_addrmap_remove(struct ocl_addrmap* map, uintptr_t base, struct ocl_alloc* out) {
  int st = ENOENT;
  pthread_rwlock_wrlock(&map->lock);
  size_t pos = upper_bound(map, base);
  if (pos > 0 && map->items[pos - 1].base == base) {
    remove_at(map, pos - 1, out);
    st = 0;
  }
  pthread_rwlock_unlock(&map->lock);
  return st;
}

int ocl_addrmap_find(struct ocl_addrmap* map, uintptr_t addr, size_t len, struct ocl_alloc* out) {
  int st = ENOENT;
  pthread_rwlock_rdlock(&map->lock);
  size_t pos = upper_bound(map, addr);
  if (pos > 0) {
    const struct ocl_alloc* e = &map->items[pos - 1];
    size_t offset = addr - e->base;
    if (offset < e->size) {
      *out = *e;
      st = len <= e->size - offset ? 0 : ERANGE;
    }
  }
  pthread_rwlock_unlock(&map->lock);
  return st;
}

int ocl_addrmap_take_owner(struct ocl_addrmap* map, const void* owner, struct ocl_alloc* out) {
  int st = ENOENT;
  pthread_rwlock_wrlock(&map->lock);
  for (size_t i = 0; i < map->count; i++) {
    if (map->items[i].owner == owner) {
      remove_at(map, i, out);
      st = 0;
      break;
    }
  }
  pthread_rwlock_unlock(&map->lock);
  return st;
}

size_t ocl_addrmap_count(struct ocl_addrmap* map) {
  pthread_rwlock_rdlock(&map->lock);
  size_t n = map->count;
  pthread_rwlock_unlock(&map->lock);
  return n;
}
