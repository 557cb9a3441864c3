/* SPDX-License-Identifier: Apache-2.0
 *
 * Thread-local state on a hot path (the per-thread address look-up caches
 * of the copy slots) is initial-exec: with the default model a module
 * opened with dlopen reaches it through a __tls_get_addr call on every
 * access. It comes out of glibc's static TLS surplus, which adr keeps
 * within a budget (docs/backend-abi.md "Threads"; the static-tls-budget
 * test). Header-only.
 */
#ifndef ADR_BACKENDS_COMMON_TLS_H
#define ADR_BACKENDS_COMMON_TLS_H

#define ADR_TLS_HOT __attribute__((tls_model("initial-exec")))

#endif
