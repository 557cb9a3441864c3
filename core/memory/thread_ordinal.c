/* SPDX-License-Identifier: Apache-2.0
 *
 * The thread ordinal (internal.h): a small number per thread, in the order
 * threads first ask, which picks a thread's pool arena (and so the
 * allocation table's shard its allocations are recorded in).
 */
#include <stdatomic.h>
#include <stdint.h>

#include "internal.h"

_Thread_local ADR__TLS_HOT unsigned adr__thread_index = UINT32_MAX;
static _Atomic unsigned next_thread_index;

unsigned adr__thread_index_assign(void) {
  unsigned i = atomic_fetch_add_explicit(&next_thread_index, 1, memory_order_relaxed);
  /* UINT32_MAX means "not yet": the 2^32-th thread takes 0 again. */
  if (i == UINT32_MAX) i = 0;
  adr__thread_index = i;
  return i;
}
