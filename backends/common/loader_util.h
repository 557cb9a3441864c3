/* SPDX-License-Identifier: Apache-2.0
 *
 * What the CUDA and HIP backends' loaders share (header-only): the
 * dlopen of a library from an override variable or a list of defaults
 * with the "tried: a; b" list of the search, and dlsym into a slot. Logging and getenv: host.h.
 */
#ifndef ADR_BACKENDS_COMMON_LOADER_UTIL_H
#define ADR_BACKENDS_COMMON_LOADER_UTIL_H

#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "adr/backend.h"
#include "host.h"

/* Appends to the string in buf (cap bytes); cut at the end. */
static inline void adr_loader_append(char* buf, size_t cap, const char* fmt, ...) ADR_PRINTF(3, 4);
static inline void adr_loader_append(char* buf, size_t cap, const char* fmt, ...) {
  size_t len = strlen(buf);
  if (len + 1 >= cap) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + len, cap - len, fmt, ap);
  va_end(ap);
}

/* dlopen (RTLD_NOW | RTLD_LOCAL) of `override` when it is set (not NULL,
 * not empty), else of the first of defaults[0 .. count) that opens; the file
 * the dynamic linker mapped is written to path. NULL when nothing opens;
 * `tried` then lists every dlerror() text, "; " between. */
static inline void* adr_loader_open(const char* override, const char* const* defaults, size_t count,
                                    char* path, size_t path_cap, char* tried, size_t tried_cap) {
  const char* const* names = defaults;
  if (override != NULL && override[0] != '\0') {
    names = &override;
    count = 1;
  }
  tried[0] = '\0';
  for (size_t i = 0; i < count; i++) {
    dlerror();
    void* lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (lib != NULL) {
      struct link_map* map = NULL;
      if (dlinfo(lib, RTLD_DI_LINKMAP, &map) == 0 && map != NULL && map->l_name != NULL &&
          map->l_name[0] != '\0')
        snprintf(path, path_cap, "%s", map->l_name);
      else
        snprintf(path, path_cap, "%s", names[i]);
      return lib;
    }
    const char* why = dlerror();
    adr_loader_append(tried, tried_cap, "%s%s", i ? "; " : "", why ? why : names[i]);
  }
  return NULL;
}

/* dlsym into a function-pointer slot (ISO C has no void* -> function
 * pointer conversion; the bytes are copied instead). */
static inline bool adr_loader_sym(void* lib, const char* name, void* slot) {
  void* p = dlsym(lib, name);
  memcpy(slot, &p, sizeof(p));
  return p != NULL;
}

/* Opens the library named by the environment variable `variable` when it
 * is set, else the first of defaults[0 .. count) that opens; stores the
 * handle in *lib and the file mapped in path. ENODEV with
 * "unavailable: NAME not found (tried: ...)" (and "(from VARIABLE)" for an
 * override) when nothing opens. */
static inline int adr_loader_open_library(const char* variable, const char* const* defaults,
                                          size_t count, void** lib, char* path, size_t path_cap,
                                          struct adr_error* error) {
  const char* override = adr_host_getenv(variable);
  char tried[768];
  *lib = adr_loader_open(override, defaults, count, path, path_cap, tried, sizeof(tried));
  if (*lib != NULL) return 0;
  bool named = override != NULL && override[0] != '\0';
  return adr_backend_error_set(error, ENODEV, "unavailable: %s not found (tried: %s)%s%s%s",
                               named ? override : defaults[0], tried, named ? " (from " : "",
                               named ? variable : "", named ? ")" : "");
}

#endif /* ADR_BACKENDS_COMMON_LOADER_UTIL_H */
