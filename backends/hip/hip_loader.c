/* SPDX-License-Identifier: Apache-2.0
 *
 * Loads the HIP runtime (libamdhip64) with dlopen and resolves the entry
 * points of HIP_SYMBOLS with dlsym. The backend never links libamdhip64,
 * so it loads on machines without ROCm and a missing runtime is a clean
 * "unavailable" with every name tried.
 *
 * Runs once, from init (the core serialises init), and only writes
 * hip_api; afterwards the table is read-only and shared by all threads.
 * The runtime starts threads and registers exit handlers, so a library
 * that was used stays open for the life of the process; one refused for a
 * missing entry point is closed again, since nothing in it was called.
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "hip_internal.h"
#include "loader_util.h"

struct hip_api hip_api;

/* Candidates, in order: the development symlink first (what a ROCm
 * install or LD_LIBRARY_PATH points at), then the runtime sonames. */
static int open_library(struct adr_error* error) {
  static const char* const k_default[] = {"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5"};
  return adr_loader_open_library(ADR_HIP_LIBRARY_ENV, k_default,
                                 sizeof(k_default) / sizeof(k_default[0]), &hip_api.lib,
                                 hip_api.path, sizeof(hip_api.path), error);
}

static bool sym(const char* name, void* slot) {
  return adr_loader_sym(hip_api.lib, name, slot);
}

int hip_library_load(struct adr_error* error) {
  int st = open_library(error);
  if (st) return st;
  const char* path = hip_api.path;
#define HIP_RESOLVE(s, required)                                                         \
  if (!sym(#s, &hip_api.s)) {                                                            \
    if (required) {                                                                      \
      dlclose(hip_api.lib);                                                              \
      hip_api.lib = NULL;                                                                \
      return hip_errorf(error, ENOTSUP,                                                  \
                        "%s lacks the required symbol %s (runtime too old or not a HIP " \
                        "runtime)",                                                      \
                        path, #s);                                                       \
    }                                                                                    \
    adr_host_log(ADR_LOG_DEBUG, "optional entry point %s not available", #s);            \
  }
  HIP_SYMBOLS(HIP_RESOLVE)
#undef HIP_RESOLVE
  if (hip_api.hipRuntimeGetVersion(&hip_api.runtime_version) != hipSuccess)
    hip_api.runtime_version = 0;
  if (hip_api.hipDriverGetVersion(&hip_api.driver_version) != hipSuccess)
    hip_api.driver_version = 0;
  adr_host_log(ADR_LOG_INFO, "loaded %s, HIP runtime %d.%d", path, hip_runtime_major(),
               (hip_api.runtime_version / 100000) % 100);
  return 0;
}
