/* SPDX-License-Identifier: Apache-2.0
 *
 * Interval map from address ranges to allocations, shared by every device
 * of the OpenCL backend. A sorted array of non-overlapping [base, base+size)
 * ranges: lookups are a binary search (O(log n)), inserts and removals move
 * the tail (O(n) memmove of small records, at alloc/free time only).
 *
 * Lock: one pthread rwlock per map. Lookups (every copy and memset, and
 * pointer_query) take it shared; insert/remove (alloc/free/device close)
 * take it exclusive. Entries are copied out under the lock, so a caller
 * never holds a pointer into the array.
 *
 * Independent of OpenCL (the native object is a void*) so that it is unit
 * tested on its own (tests/opencl/test_opencl_addrmap.c).
 */
#ifndef ADR_OPENCL_ADDRMAP_H
#define ADR_OPENCL_ADDRMAP_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct ocl_alloc {
  uintptr_t base;
  size_t size;
  void* owner;  /* the struct adr_backend_device */
  void* native; /* cl_mem in buffer mode, NULL for SVM */
  /* Buffer mode: the PROT_NONE mapping the address comes from. SVM: the
   * pointer clSVMAlloc returned (base may lie inside it when the requested
   * alignment exceeded the driver's) and the size asked of it. */
  void* reservation;
  size_t reservation_size;
};

struct ocl_addrmap {
  pthread_rwlock_t lock;
  struct ocl_alloc* items; /* sorted by base */
  size_t count;
  size_t capacity;
};

#define OCL_ADDRMAP_INIT {PTHREAD_RWLOCK_INITIALIZER, NULL, 0, 0}

/* Frees the array (entries are not released: the caller does that). */
void ocl_addrmap_clear(struct ocl_addrmap* map);

/* Adds `a` (size > 0). EEXIST if it overlaps an entry, ENOMEM if the array
 * cannot grow, EOVERFLOW if base+size wraps; the map is unchanged then. */
int ocl_addrmap_insert(struct ocl_addrmap* map, const struct ocl_alloc* a);

/* Removes the entry that starts exactly at `base` and, when out is not NULL,
 * copies it there. ENOENT if no entry starts there. */
int ocl_addrmap_remove(struct ocl_addrmap* map, uintptr_t base, struct ocl_alloc* out);

/* Finds the entry containing [addr, addr+len) (len 0 = just addr) and copies
 * it to *out. ENOENT if addr is in no entry, ERANGE if it is but the range
 * runs past the entry's end (*out is filled in that case too). */
int ocl_addrmap_find(struct ocl_addrmap* map, uintptr_t addr, size_t len, struct ocl_alloc* out);

/* Removes the first entry owned by `owner` into *out: 0, or ENOENT when the
 * owner has none left. Used to drain a device being closed. */
int ocl_addrmap_take_owner(struct ocl_addrmap* map, const void* owner, struct ocl_alloc* out);

size_t ocl_addrmap_count(struct ocl_addrmap* map);

#endif /* ADR_OPENCL_ADDRMAP_H */
