/* SPDX-License-Identifier: Apache-2.0
 *
 * Copies between overlapping ranges of one allocation with memmove
 * semantics (adr.h) on drivers that promise nothing for them (CUDA, HIP):
 * the copy is queued as pieces in the order that reads every byte before it
 * is overwritten. Pieces no longer than the distance never overlap and go
 * directly; when that would take more than ADR_OVERLAP_MAX_PIECES pieces,
 * each piece goes out to a scratch buffer and back (ADR_OVERLAP_SCRATCH
 * bytes at most). Header-only: the backends pass their async copy.
 */
#ifndef ADR_BACKENDS_COMMON_OVERLAP_H
#define ADR_BACKENDS_COMMON_OVERLAP_H

#include <stddef.h>
#include <stdint.h>

#define ADR_OVERLAP_MAX_PIECES 16
#define ADR_OVERLAP_SCRATCH ((size_t)1 << 20)

/* Whether [d, d+size) and [s, s+size) overlap without being the same. */
static inline int adr_overlap(uintptr_t d, uintptr_t s, size_t size) {
  return d != s && d < s + size && s < d + size;
}

/* Whether adr_overlap_copy needs a scratch buffer for this copy. */
static inline int adr_overlap_needs_scratch(uintptr_t d, uintptr_t s, size_t size) {
  size_t dist = d > s ? d - s : s - d;
  return size / dist >= ADR_OVERLAP_MAX_PIECES;
}

/* Queues the pieces through copy(ctx, dst, src, len), which returns 0 or a
 * vendor error code (returned as is, after which nothing more is queued).
 * scratch: ADR_OVERLAP_SCRATCH bytes of device memory on the copy's queue
 * when adr_overlap_needs_scratch, else unused. */
static inline int adr_overlap_copy(uintptr_t d, uintptr_t s, size_t size, uintptr_t scratch,
                                   int (*copy)(void* ctx, uintptr_t dst, uintptr_t src, size_t len),
                                   void* ctx) {
  size_t dist = d > s ? d - s : s - d;
  int staged = adr_overlap_needs_scratch(d, s, size);
  size_t piece = staged ? ADR_OVERLAP_SCRATCH : dist;
  size_t pieces = (size + piece - 1) / piece;
  int r = 0;
  for (size_t i = 0; i < pieces && r == 0; i++) {
    size_t k = d < s ? i : pieces - 1 - i; /* down: low first; up: high first */
    size_t off = k * piece, len = size - off < piece ? size - off : piece;
    if (!staged) {
      r = copy(ctx, d + off, s + off, len);
    } else {
      r = copy(ctx, scratch, s + off, len);
      if (r == 0) r = copy(ctx, d + off, scratch, len);
    }
  }
  return r;
}

#endif /* ADR_BACKENDS_COMMON_OVERLAP_H */
