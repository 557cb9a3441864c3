/* SPDX-License-Identifier: Apache-2.0
 *
 * Opens the HIP runtime with dlopen and resolves the symbol table.
 *
 * The backend never links libamdhip64, so it loads on machines without
 * ROCm and a missing runtime is a clean "unavailable" with every name
 * tried. The handle is kept for the life of the process: the runtime
 * starts threads and registers exit handlers, so unloading it is unsafe.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "hip_internal.h"

struct hip_api hip_api;

/* Default candidates, in order: the development symlink first (what a
 * ROCm install or LD_LIBRARY_PATH points at), then the runtime sonames. */
static const char* const default_names[] = {"libamdhip64.so", "libamdhip64.so.6",
                                            "libamdhip64.so.5"};

static void append(char* buf, size_t cap, const char* text) {
  size_t len = strlen(buf);
  if (len + 1 >= cap) return;
  snprintf(buf + len, cap - len, "%s%s", len ? ", " : "", text);
}

static int resolve(void* handle, const char* path, struct adr_error* error) {
  struct hip_api api;
  memset(&api, 0, sizeof(api));
  /* Casting through void* is how POSIX says dlsym results are used. */
#define HIP_RESOLVE(name, ret, params, required)                        \
  {                                                                     \
    void* sym = dlsym(handle, #name);                                   \
    if (sym == NULL && (required))                                      \
      return hip_errorf(error, ENOTSUP,                                 \
                        "%s lacks the required symbol %s (runtime too " \
                        "old or not a HIP runtime)",                    \
                        path, #name);                                   \
    memcpy(&api.name, &sym, sizeof(sym));                               \
  }
  HIP_SYMBOLS(HIP_RESOLVE)
#undef HIP_RESOLVE
  hip_api = api;
  return 0;
}

int hip_library_load(const struct adr_backend_host* host, struct adr_error* error) {
  const char* override =
      host != NULL && host->getenv != NULL ? host->getenv(ADR_HIP_LIBRARY_ENV) : NULL;
  const char* const* names = default_names;
  size_t count = sizeof(default_names) / sizeof(default_names[0]);
  if (override != NULL && override[0] != '\0') {
    names = &override;
    count = 1;
  }
  char tried[1024] = "";
  char last_error[512] = "";
  for (size_t i = 0; i < count; i++) {
    dlerror();
    void* handle = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
      const char* msg = dlerror();
      append(tried, sizeof(tried), names[i]);
      /* "cannot open shared object file" is the ordinary absent case; any
       * other failure (missing dependency, wrong ELF class) is worth
       * showing. */
      if (msg != NULL && strstr(msg, "No such file") == NULL)
        snprintf(last_error, sizeof(last_error), "; %s", msg);
      if (host != NULL && host->log != NULL)
        host->log(ADR_LOG_DEBUG, "hip", "dlopen(%s) failed: %s", names[i], msg ? msg : "?");
      continue;
    }
    int st = resolve(handle, names[i], error);
    if (st != 0) {
      /* A library lacking symbols is not used; closing it is safe because
       * nothing in it was called. */
      dlclose(handle);
      return st;
    }
    hip_rt.handle = handle;
    snprintf(hip_rt.path, sizeof(hip_rt.path), "%s", names[i]);
    if (host != NULL && host->log != NULL)
      host->log(ADR_LOG_INFO, "hip", "loaded HIP runtime %s", names[i]);
    return 0;
  }
  return adr_backend_error_set(
      error, ENODEV, "unavailable: %s not found (tried: %s%s%s)", names[0], tried,
      names == default_names ? "" : ", named by " ADR_HIP_LIBRARY_ENV, last_error);
}
