/* SPDX-License-Identifier: Apache-2.0
 *
 * Copies between two host buffers (pageable or pinned) queued on a driver
 * stream as a host function, for drivers whose own "asynchronous" copy is
 * fully synchronous with respect to the host when both ends are host memory
 * (CUDA's and HIP's memcpy waits for the stream's earlier work first, so a
 * stream held back by an event would block the caller: adr.h promises that
 * a call with a stream never does). The host function runs after the
 * stream's earlier work, memmoves (overlapping ranges of one allocation
 * have memmove semantics, as adr.h promises) and frees its closure.
 *
 * Header-only: the backends pass adr_host_copy_run to cuLaunchHostFunc /
 * hipLaunchHostFunc. The source must stay valid until the copy completes,
 * which adr_copy already asks of a CPU source.
 */
#ifndef ADR_BACKENDS_COMMON_HOST_COPY_H
#define ADR_BACKENDS_COMMON_HOST_COPY_H

#include <stdlib.h>
#include <string.h>

struct adr_host_copy {
  void* dst;
  const void* src;
  size_t size;
};

/* A closure for adr_host_copy_run, or NULL when out of memory. */
static inline struct adr_host_copy* adr_host_copy_new(void* dst, const void* src, size_t size) {
  struct adr_host_copy* c = malloc(sizeof(*c));
  if (c != NULL) *c = (struct adr_host_copy){dst, src, size};
  return c;
}

/* The host function: copies and frees the closure. Makes no driver call. */
static inline void adr_host_copy_run(void* arg) {
  struct adr_host_copy* c = arg;
  memmove(c->dst, c->src, c->size);
  free(c);
}

#endif
