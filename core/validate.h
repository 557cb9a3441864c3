/* SPDX-License-Identifier: Apache-2.0
 *
 * Range checks and the validation layer (validate.c): the hooks the entry
 * points in sync.c, copy.c and alloc.c call. docs/validation.md describes
 * what is checked and when.
 *
 * Two tiers:
 *  - always: sizes that cannot be valid (> PTRDIFF_MAX, a range that wraps
 *    around the address space), and on devices that are not host-accessible
 *    (their backend resolves every address anyway) copy/memset ranges
 *    against the application's allocation they start in;
 *  - ADR_VALIDATE=1 / adr_validation_enable(): the same range checks on
 *    every device, generation-checked stream and event handles (destroyed
 *    objects are quarantined, not freed), a free quarantine, the creation
 *    and destruction call sites, and a leak report at exit.
 *
 * The layer's state is decided once, by the first call that creates an
 * allocation, stream or event (every object is made under one regime), and
 * read on the hot path as one relaxed atomic load: off costs one predictable
 * branch per call.
 */
#ifndef ADR_CORE_VALIDATE_H
#define ADR_CORE_VALIDATE_H

#include <errno.h>
#include <stdint.h>

#include "internal.h"

/* -1 undecided, 0 off, 1 on. Written once under a once-guard. */
extern __attribute__((visibility("hidden"))) _Atomic int adr__validate_state;

/* The layer is on. For calls that only use existing objects: while the
 * state is undecided no object exists that it would have to know about. */
#define ADR__VALIDATING() \
  __builtin_expect(atomic_load_explicit(&adr__validate_state, memory_order_relaxed) > 0, 0)

/* Decides the state (reads ADR_VALIDATE) if nobody did; returns it. */
bool adr__validate_decide(void);

/* For calls that create objects: the layer is on, deciding it first if
 * this is the first such call. */
static inline bool adr__validate_begin(void) {
  int s = atomic_load_explicit(&adr__validate_state, memory_order_relaxed);
  if (__builtin_expect(s == 0, 1)) return false;
  return s > 0 || adr__validate_decide();
}

/* The call site recorded for objects: the return address of the public
 * entry point (symbolised with dladdr when a message needs it). */
#define ADR__CALL_SITE() __builtin_return_address(0)

/* ---- ranges (always) ----------------------------------------------------- */

/* Whether copies and memsets on dev are checked against the allocation
 * they start in (and so whether alloc.c keeps dev's interval index). */
static inline bool adr__range_checked(const struct adr_device* dev) {
  return !dev->host_accessible || ADR__VALIDATING();
}

/* Whether alloc.c keeps dev's interval index: where copies are checked,
 * and on any device once an interop call (adr_opencl_buffer ...) needed
 * the allocation an address lies in (interop.c). */
static inline bool adr__range_indexed(const struct adr_device* dev) {
  return adr__range_checked(dev) ||
         atomic_load_explicit(&dev->ranges_kept, memory_order_acquire) != 0;
}

/* EOVERFLOW for a size above PTRDIFF_MAX or a range [p, p+size) that wraps
 * around the address space. `what` names the pointer ("destination"). */
static inline int adr__range_sane(const char* op, const struct adr_device* dev, const char* what,
                                  const void* p, size_t size, struct adr_error* error) {
  if (__builtin_expect(size > (size_t)PTRDIFF_MAX || (uintptr_t)p + size < (uintptr_t)p, 0))
    return adr__errorf(error, EOVERFLOW, op, dev->backend->name,
                       size > (size_t)PTRDIFF_MAX
                           ? "%s %p: size %zu exceeds PTRDIFF_MAX"
                           : "%s %p: range of %zu bytes wraps around the address space",
                       what, p, size);
  return 0;
}

/* EINVAL when [p, p+size) starts inside a live allocation of dev and runs
 * past its end. An address in no allocation adr made (memory of an
 * imported array, host memory on the CPU device) is not checked here. */
int adr__range_check_slow(const char* op, struct adr_device* dev, const char* what, const void* p,
                          size_t size, struct adr_error* error);

/* The index part of adr__range_check, for a device that is range-checked
 * and a range already known to be sane: this thread's cached answer first
 * (no call into the search), the search otherwise. */
static inline int adr__range_check_indexed(const char* op, struct adr_device* dev, const char* what,
                                           const void* p, size_t size, struct adr_error* error) {
  if (__builtin_expect(adr__alloc_table_ranges_cached_fit(dev->allocs, p, size), 1)) return 0;
  return adr__range_check_slow(op, dev, what, p, size, error);
}

static inline int adr__range_check(const char* op, struct adr_device* dev, const char* what,
                                   const void* p, size_t size, struct adr_error* error) {
  int st = adr__range_sane(op, dev, what, p, size, error);
  if (st == 0 && adr__range_checked(dev))
    st = adr__range_check_indexed(op, dev, what, p, size, error);
  return st;
}

/* ---- handles (layer on) -------------------------------------------------- */

enum { ADR__VOBJ_STREAM = 1, ADR__VOBJ_EVENT = 2 };

/* A stream or event with the layer's header in front (zeroed object). */
void* adr__validate_obj_create(int kind, size_t size, const void* site);
/* Object is live now (its device is set): it enters the leak list. */
void adr__validate_obj_live(void* obj);
/* Creation failed: freed at once. */
void adr__validate_obj_discard(void* obj);
/* Destroyed: marked dead with the site and quarantined (freed later, in
 * creation-independent FIFO order, once the quarantine is full). */
void adr__validate_obj_destroy(void* obj, const void* site);

/* 0 for NULL, a default stream or a live stream; EINVAL naming the stream
 * and where it was destroyed otherwise. */
int adr__validate_stream_slow(const char* op, const struct adr_stream* stream,
                              struct adr_error* error);
static inline int adr__validate_stream(const char* op, const struct adr_stream* stream,
                                       struct adr_error* error) {
  if (stream == NULL || (stream->flags & ADR__STREAM_DEFAULT)) return 0;
  return adr__validate_stream_slow(op, stream, error);
}
int adr__validate_event(const char* op, const struct adr_event* event, struct adr_error* error);

/* ---- frees (layer on) ---------------------------------------------------- */

/* alloc.c: the allocation (already out of the table) goes to the
 * quarantine instead of its handler; true when it did (false: hand it to
 * the handler now). */
bool adr__validate_free_defer(struct adr_device* dev, const void* handler, void* ptr, size_t size,
                              void* cookie, struct adr_stream* stream, const void* alloc_site,
                              const void* free_site);
/* alloc.c, for a pointer the table does not know: EINVAL with a double
 * free message when ptr is in the quarantine, else 0. */
int adr__validate_free_unknown(struct adr_device* dev, void* ptr, struct adr_error* error);
/* Releases dev's quarantined allocations to their handlers (an allocation
 * failed for lack of memory, or exit). */
void adr__validate_flush(struct adr_device* dev);
/* A validated allocation was made on dev (for the leak report). */
void adr__validate_note_device(struct adr_device* dev);

#endif /* ADR_CORE_VALIDATE_H */
