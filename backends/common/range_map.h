/* SPDX-License-Identifier: Apache-2.0
 *
 * An interval map from address ranges to a backend's allocations, compiled
 * into each backend that needs one (backends never share code at run
 * time). A sorted array of non-overlapping [base, base+size) entries:
 * lookups are a binary search (O(log n)); inserts and removals move the
 * tail (an O(n) memmove of small records, at alloc/free time only, which
 * the core's caching pool keeps rare).
 *
 * Entries are caller-defined records of `elem_size` bytes whose first
 * member is a struct adr_range; they are copied in and out, so a caller
 * never holds a pointer into the array.
 *
 * Lock: one pthread rwlock per map; lookups take it shared, insert and
 * remove exclusively.
 */
#ifndef ADR_BACKEND_RANGE_MAP_H
#define ADR_BACKEND_RANGE_MAP_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct adr_range {
  uintptr_t base;
  size_t size;
};

struct adr_range_map {
  pthread_rwlock_t lock;
  unsigned char* items; /* sorted by base */
  size_t elem_size;
  size_t count;
  size_t capacity;
};

#define ADR_RANGE_MAP_INIT(type) \
  { PTHREAD_RWLOCK_INITIALIZER, NULL, sizeof(type), 0, 0 }

/* Frees the array (what the entries refer to is the caller's). */
void adr_range_map_clear(struct adr_range_map* map);

/* Adds `entry` (its range's size > 0). EINVAL for size 0, EOVERFLOW if
 * base+size wraps, EEXIST if it overlaps an entry, ENOMEM if the array
 * cannot grow; the map is unchanged on error. */
int adr_range_map_insert(struct adr_range_map* map, const void* entry);

/* Removes the entry that starts exactly at `base`, copying it to `out`
 * when not NULL. ENOENT if no entry starts there. */
int adr_range_map_remove(struct adr_range_map* map, uintptr_t base, void* out);

/* Copies the entry containing [addr, addr+len) (len 0 = just addr) to
 * `out`. ENOENT if addr is in no entry; ERANGE if it is but the range runs
 * past the entry's end (`out` is filled then too). */
int adr_range_map_find(struct adr_range_map* map, uintptr_t addr, size_t len, void* out);

/* Removes the first entry for which match(entry, arg) holds into `out`:
 * 0, or ENOENT when none does. Used to drain a device being closed. */
int adr_range_map_take_first(struct adr_range_map* map,
                             bool (*match)(const void* entry, const void* arg), const void* arg,
                             void* out);

size_t adr_range_map_count(struct adr_range_map* map);

#endif /* ADR_BACKEND_RANGE_MAP_H */
