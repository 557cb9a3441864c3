/* SPDX-License-Identifier: Apache-2.0
 *
 * Transparent huge page advice as the kernel records it, for the memory
 * tests: the VmFlags of /proc/self/smaps.
 */
#ifndef ADR_TESTS_MEMORY_VMFLAGS_H
#define ADR_TESTS_MEMORY_VMFLAGS_H

#include <stdbool.h>
#include <stdint.h>

/* Whether this kernel takes MADV_HUGEPAGE at all (probed on a mapping of
 * its own); without THP support the advice is refused and nothing shows. */
bool vmflags_thp_supported(void);

/* Whether a mapping overlapping [lo, hi) carries VmFlags "hg" (advised
 * MADV_HUGEPAGE; a chunk's advised 2 MiB-aligned part is a mapping of its
 * own). */
bool vmflags_huge_advised(uintptr_t lo, uintptr_t hi);

#endif
