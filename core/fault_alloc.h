/* SPDX-License-Identifier: Apache-2.0
 *
 * Forced into every core/ source by core/meson.build (-include), so that the
 * core's own allocations go through the fault-injection countdown
 * (core/fault.c) without an edit in each file: malloc, calloc, realloc,
 * aligned_alloc, strdup and strndup become adr__ wrappers. free is untouched.
 * Disarmed, a wrapper is one relaxed atomic load and a predictable branch
 * before the libc call. Not included by backends, tools or tests.
 */
#ifndef ADR_CORE_FAULT_ALLOC_H
#define ADR_CORE_FAULT_ALLOC_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

void* adr__malloc(size_t size);
void* adr__calloc(size_t n, size_t size);
void* adr__realloc(void* ptr, size_t size);
void* adr__aligned_alloc(size_t alignment, size_t size);
char* adr__strdup(const char* s);
char* adr__strndup(const char* s, size_t n);

#ifndef ADR__FAULT_NO_REDIRECT
#define malloc(size) adr__malloc(size)
#define calloc(n, size) adr__calloc(n, size)
#define realloc(ptr, size) adr__realloc(ptr, size)
#define aligned_alloc(alignment, size) adr__aligned_alloc(alignment, size)
#define strdup(s) adr__strdup(s)
#define strndup(s, n) adr__strndup(s, n)
#endif

#endif /* ADR_CORE_FAULT_ALLOC_H */
