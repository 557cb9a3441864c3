/* SPDX-License-Identifier: Apache-2.0
 *
 * The host services (struct adr_backend_host) as a backend uses them:
 * kept once from adr_backend_query, checked once in init, then logging and
 * environment look-ups through short calls. Compiled into each backend:
 * every backend is its own shared object, so each has its own copy of the
 * state below.
 *
 * Use:
 *   ADR_BACKEND_DEFINE_QUERY(table, adr_host_set)      (file scope)
 *   int init(struct adr_error* error) {
 *     int st = adr_host_init("mybackend", error);       (first thing)
 *     ...
 *
 * Thread safety: adr_host_set and adr_host_init run before any other slot
 * (the core calls query, then init, once, under its registry lock); after
 * that the state is only read, so every function may be called from any
 * thread.
 */
#ifndef ADR_BACKEND_HOST_H
#define ADR_BACKEND_HOST_H

#include <stdbool.h>

#include "adr/backend.h"

/* Keeps `host` (may be NULL) for adr_host_init to check. */
void adr_host_set(const struct adr_backend_host* host);

/* Checks the kept host services: a NULL host or one whose struct_size is
 * below ADR_BACKEND_HOST_MIN_STRUCT_SIZE (the ABI 1.0 struct) is refused
 * with EPROTO and a message, and no service is used afterwards. On success
 * `backend` (a string literal: the backend's name) names the backend in
 * its log lines. */
int adr_host_init(const char* backend, struct adr_error* error);

/* The host's secure getenv: NULL when unset, in an elevated process, or
 * before a successful adr_host_init. The string is the environment's. */
const char* adr_host_getenv(const char* name);

/* Whether a line at `level` (enum adr_log_level) would be written, so a
 * caller can skip costly formatting. */
bool adr_host_log_enabled(int level);

/* Formats one log line (up to 2 KiB, longer is cut) and hands it to the
 * host's log sink under the backend's name, if ADR_LOG lets `level`
 * through. Nothing before a successful adr_host_init. */
void adr_host_log(int level, const char* fmt, ...) ADR_PRINTF(2, 3);

#endif /* ADR_BACKEND_HOST_H */
