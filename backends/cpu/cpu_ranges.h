/* SPDX-License-Identifier: Apache-2.0
 *
 * The CPU backend's address map: live allocations as non-overlapping
 * [base, base + size) ranges, so pointer_query answers for any address
 * inside one (an Arrow slice points into the middle of a buffer).
 *
 * A treap keyed by base with node priorities drawn from a hash of the
 * base: insert, remove and the containing-range lookup are O(log n)
 * expected, whatever the order of the addresses (the shared sorted array
 * of backends/common/range_map.c moves its tail on every insert and
 * removal, O(n), which showed with 10k+ live plain allocations).
 *
 * Lock: one rwlock per map; lookups take it shared, insert and remove
 * exclusively. Nodes are the map's, carved from slabs of 1024 (dense, so a
 * descent touches few cache lines and pages, unlike nodes malloc'd between
 * the allocations they describe) and kept for reuse until clear; callers
 * get copies of base and size, never a node.
 */
#ifndef ADR_CPU_RANGES_H
#define ADR_CPU_RANGES_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct cpu_range_node;

struct cpu_ranges {
  pthread_rwlock_t lock;
  struct cpu_range_node* root;
  size_t count;
  struct cpu_range_node* spare; /* free nodes */
  void* slabs;                  /* the node slabs, in a list */
};

#define CPU_RANGES_INIT \
  { PTHREAD_RWLOCK_INITIALIZER, NULL, 0, NULL, NULL }

/* Adds [base, base + size). EINVAL for size 0, EOVERFLOW if it wraps,
 * EEXIST if it overlaps a range in the map, ENOMEM; unchanged on error. */
int cpu_ranges_insert(struct cpu_ranges* map, uintptr_t base, size_t size);

/* Removes the range starting exactly at base, storing its size in
 * *out_size when not NULL. ENOENT if no range starts there. */
int cpu_ranges_remove(struct cpu_ranges* map, uintptr_t base, size_t* out_size);

/* The range containing [addr, addr + len) (len 0: just addr) into
 * *out_base / *out_size (either may be NULL). ENOENT if addr is in no
 * range; ERANGE if it is but the span runs past the range's end (the
 * outputs are filled then too). */
int cpu_ranges_find(struct cpu_ranges* map, uintptr_t addr, size_t len, uintptr_t* out_base,
                    size_t* out_size);

size_t cpu_ranges_count(struct cpu_ranges* map);

/* Frees every node (the memory the ranges describe is the caller's). */
void cpu_ranges_clear(struct cpu_ranges* map);

/* Checks the invariants (search order, heap order of priorities, no
 * overlap, the count) for the tests: 0 or EPROTO. */
int cpu_ranges_check(struct cpu_ranges* map);

#endif /* ADR_CPU_RANGES_H */
