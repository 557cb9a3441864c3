/* SPDX-License-Identifier: Apache-2.0
 *
 * The fault-injection layer (docs/lifetime.md, adr/testing.h): makes the Nth
 * dispatched backend call of a chosen slot, or the Nth allocation the core
 * makes for itself, fail with a chosen status. For tests.
 *
 * Off (the default) it costs one relaxed atomic load and a predictable branch
 * per dispatched call (core/dispatch.c). Nothing here is ABI.
 */
#ifndef ADR_CORE_FAULT_H
#define ADR_CORE_FAULT_H

#include <stdatomic.h>

#include "adr/adr.h"

/* 0: off; ADR__FAULT_DISPATCH: backend slots armed; ADR__FAULT_MALLOC: the
 * core's own allocations armed. Read relaxed on the hot path. */
#define ADR__FAULT_DISPATCH 1
#define ADR__FAULT_MALLOC 2
extern __attribute__((visibility("hidden"))) _Atomic int adr__fault_armed;

/* Counts a dispatched call of `slot` ("alloc", "copy", "stream_synchronize"
 * ...) and, when it is the chosen one, writes "NAME: injected fault ..." to
 * `error` (may be NULL) and returns the chosen status; else 0. */
int adr__fault_dispatch(const char* slot, struct adr_error* error);

/* Reads ADR_FAULT once (secure_getenv: ignored in elevated processes). A
 * malformed value is returned every time (EINVAL, message naming the
 * variable and the column). */
int adr__fault_env(struct adr_error* error);

/* Turns injection off (process teardown: nothing may fail there). */
void adr__fault_disarm(void);

#endif /* ADR_CORE_FAULT_H */
