/* SPDX-License-Identifier: Apache-2.0
 *
 * Pageable host memory: the NULL device of adr_copy and adr_memset
 * (docs/devices.md, "Host memory"). The core handles it itself and loads
 * no backend for it; the cpu backend stays the device of ARROW_DEVICE_CPU
 * allocations, streams and events.
 *
 * Host memory has no allocation table, so the checks on a host range are
 * its sanity (NULL, size, wrap-around) and, where the core itself touches
 * the bytes (host memset, host-to-host copy) or the validation layer is
 * on, that it is not memory of a device the host cannot access: a device
 * pointer passed as host memory would otherwise be dereferenced. That
 * look-up asks the backends already loaded (adr__pointer_owner, under the
 * registry lock; nothing is loaded for it), so it is kept off the
 * host <-> device hot path.
 */
#include <errno.h>
#include <string.h>

#include "dispatch.h"
#include "host.h"
#include "validate.h"

int adr__host_range_check(const char* op, const char* what, const void* p, size_t size,
                          bool owner_check, struct adr_error* error) {
  if (__builtin_expect(size > (size_t)PTRDIFF_MAX || (uintptr_t)p + size < (uintptr_t)p, 0))
    return adr__errorf(error, EOVERFLOW, op, NULL,
                       size > (size_t)PTRDIFF_MAX
                           ? "%s %p (host memory): size %zu exceeds PTRDIFF_MAX"
                           : "%s %p (host memory): range of %zu bytes wraps around the address "
                             "space",
                       what, p, size);
  if (!owner_check) return 0;
  struct adr_device* owner = NULL;
  int st = adr__pointer_owner(op, p, &owner, error);
  if (st != 0 || owner == NULL || owner->host_accessible) return st;
  return adr__errorf(error, EINVAL, op, NULL,
                     "%s %p is memory of %s, which the host cannot access: a NULL device means "
                     "host memory; pass %s as the device",
                     what, p, owner->name, owner->name);
}

/* Work the stream queued before this call completes before the host
 * touches the bytes: a host operation has no queue of its own to join. */
static int host_order(const char* op, struct adr_stream* stream, struct adr_error* error) {
  if (stream == NULL) return 0;
  int st;
  if (ADR__VALIDATING() && (st = adr__validate_stream(op, stream, error)) != 0) return st;
  return adr__dispatch_stream_synchronize(stream->device, op, stream->handle, error);
}

int adr__host_copy(void* dst, const void* src, size_t size, struct adr_stream* stream,
                   struct adr_error* error) {
  int st = adr__host_range_check("adr_copy", "destination", dst, size, true, error);
  if (st == 0) st = adr__host_range_check("adr_copy", "source", src, size, true, error);
  if (st == 0) st = host_order("adr_copy", stream, error);
  if (st == 0) memmove(dst, src, size);
  return st;
}

int adr__host_memset(void* ptr, int value, size_t size, struct adr_stream* stream,
                     struct adr_error* error) {
  int st = adr__host_range_check("adr_memset", "memset", ptr, size, true, error);
  if (st == 0) st = host_order("adr_memset", stream, error);
  if (st == 0) memset(ptr, value, size);
  return st;
}
