/* SPDX-License-Identifier: Apache-2.0
 *
 * adr/testing.h: hooks for TESTS of adr and of applications that want to see
 * how they handle adr's failures. Not for production use: these functions
 * change the behaviour of every device in the process. Exported by libadr,
 * but outside the stable API (they may change with any release).
 *
 * Fault injection (docs/lifetime.md, "Fault injection"), in the spirit of
 * SQLite's test VFS: the Nth call of a chosen backend slot, or the Nth
 * allocation the core makes for itself, fails.
 */
#ifndef ADR_TESTING_H
#define ADR_TESTING_H

#include <stdbool.h>
#include <stdint.h>

#include "adr/adr.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Arms the countdown, replacing any earlier setting and resetting the
 * counts.
 *
 * slot: the backend slot whose calls are counted, as named in
 *   include/adr/backend.h: "alloc", "free", "copy", "memset",
 *   "stream_create", "stream_destroy", "stream_synchronize", "event_create",
 *   "event_destroy", "event_record", "event_wait", "event_synchronize",
 *   "event_query", "event_import", "stream_import", "device_open",
 *   "device_adopt", "pointer_query", "device_info", "device_native",
 *   "device_properties", "host_register", "host_unregister"; "any" counts
 *   every dispatched call (the pool's chunk allocations and events and the
 *   core's internal synchronisations included); "malloc" counts the core's own
 *   host allocations (malloc, calloc, realloc, aligned_alloc, strdup,
 *   strndup in core/) instead, which then fail as out of memory.
 * nth: the 1-based number of the matching call, counted from now, that
 *   fails; 0 only counts (adr_test_fault_counts tells how many calls a
 *   workload makes).
 * status: the errno value the failing backend call returns (for "malloc"
 *   the allocation returns NULL and the core reports its own status).
 * persistent: every matching call from the nth on fails, not only the nth.
 *
 * An injected failure looks like the backend's: the public call returns
 * `status` and a message "[operation][backend] NAME: injected fault (call N
 * of slot 'S')"; the backend is not called.
 *
 * Thread safety: calls on any thread are counted; arm and clear while no
 * other thread arms or clears. Errors: EINVAL for an unknown slot or a
 * status that is not positive. The environment variable ADR_FAULT =
 * slot:N:STATUS[:persistent] (STATUS a name like EIO or a number) arms it at
 * the first adr call of the process (ignored in elevated processes). */
ADR_API int adr_test_fault_set(const char* slot, uint64_t nth, int status, bool persistent,
                               struct adr_error* error);
/* Disarms: no call fails from now on. The counts are kept. */
ADR_API void adr_test_fault_clear(void);
/* Matching calls counted and failures injected since the last arm (either
 * pointer may be NULL). */
ADR_API void adr_test_fault_counts(uint64_t* out_calls, uint64_t* out_fired);

#ifdef __cplusplus
}
#endif

#endif /* ADR_TESTING_H */
