/* SPDX-License-Identifier: Apache-2.0
 *
 * The OpenCL backend's allocations by address: the backends' shared
 * interval map (backends/common/range_map.h) holding struct ocl_alloc
 * records, shared by every device of the backend. Lookups (every copy and
 * memset, and pointer_query) take its lock shared; alloc/free/device close
 * exclusively.
 */
#ifndef ADR_OPENCL_ADDRMAP_H
#define ADR_OPENCL_ADDRMAP_H

#include <stddef.h>
#include <stdint.h>

#include "range_map.h"

struct ocl_alloc {
  /* The same two leading fields as struct adr_range (the map's key). */
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
  struct adr_range_map map;
};

#define OCL_ADDRMAP_INIT {ADR_RANGE_MAP_INIT(struct ocl_alloc)}

/* Frees the array (entries are not released: the caller does that). */
static inline void ocl_addrmap_clear(struct ocl_addrmap* m) {
  adr_range_map_clear(&m->map);
}

/* Adds `a` (size > 0). EEXIST if it overlaps an entry, ENOMEM if the array
 * cannot grow, EOVERFLOW if base+size wraps; the map is unchanged then. */
static inline int ocl_addrmap_insert(struct ocl_addrmap* m, const struct ocl_alloc* a) {
  return adr_range_map_insert(&m->map, a);
}

/* Removes the entry that starts exactly at `base` and, when out is not NULL,
 * copies it there. ENOENT if no entry starts there. */
static inline int ocl_addrmap_remove(struct ocl_addrmap* m, uintptr_t base,
                                     struct ocl_alloc* out) {
  return adr_range_map_remove(&m->map, base, out);
}

/* Finds the entry containing [addr, addr+len) (len 0 = just addr) and copies
 * it to *out. ENOENT if addr is in no entry, ERANGE if it is but the range
 * runs past the entry's end (*out is filled in that case too). */
static inline int ocl_addrmap_find(struct ocl_addrmap* m, uintptr_t addr, size_t len,
                                   struct ocl_alloc* out) {
  return adr_range_map_find(&m->map, addr, len, out);
}

static inline bool ocl_alloc_owned_by(const void* entry, const void* owner) {
  return ((const struct ocl_alloc*)entry)->owner == owner;
}

/* Removes the first entry owned by `owner` into *out: 0, or ENOENT when the
 * owner has none left. Used to drain a device being closed. */
static inline int ocl_addrmap_take_owner(struct ocl_addrmap* m, const void* owner,
                                         struct ocl_alloc* out) {
  return adr_range_map_take_first(&m->map, ocl_alloc_owned_by, owner, out);
}

static inline size_t ocl_addrmap_count(struct ocl_addrmap* m) {
  return adr_range_map_count(&m->map);
}

#endif /* ADR_OPENCL_ADDRMAP_H */
