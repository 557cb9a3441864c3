/* SPDX-License-Identifier: Apache-2.0
 *
 * Pageable host memory, the NULL device of adr_copy and adr_memset
 * (host.c). Nothing here is ABI.
 */
#ifndef ADR_CORE_HOST_H
#define ADR_CORE_HOST_H

#include "internal.h"

/* EOVERFLOW for a host range [p, p+size) whose size exceeds PTRDIFF_MAX or
 * that wraps; with owner_check, EINVAL when p is memory of a loaded device
 * that is not host-accessible (a device pointer passed as host memory).
 * `what` names the pointer ("destination"). p is not NULL. */
int adr__host_range_check(const char* op, const char* what, const void* p, size_t size,
                          bool owner_check, struct adr_error* error);

/* Host to host (memmove) and host memset, done by the core. dst/src/ptr
 * are not NULL and size > 0. With a stream (of any device) the stream's
 * queued work completes first (a host wait), then the bytes move; the
 * operation has completed when these return. */
int adr__host_copy(void* dst, const void* src, size_t size, struct adr_stream* stream,
                   struct adr_error* error);
int adr__host_memset(void* ptr, int value, size_t size, struct adr_stream* stream,
                     struct adr_error* error);

#endif /* ADR_CORE_HOST_H */
