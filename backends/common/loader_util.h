/* SPDX-License-Identifier: Apache-2.0
 *
 * What the CUDA and HIP backends' loaders share (header-only): the
 * dlopen of a library from an override or a list of defaults, and the
 * "tried: a; b" list of a library search. Logging and getenv: host.h.
 */
#ifndef ADR_BACKENDS_COMMON_LOADER_UTIL_H
#define ADR_BACKENDS_COMMON_LOADER_UTIL_H

#include <dlfcn.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "adr/backend.h"

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

#endif /* ADR_BACKENDS_COMMON_LOADER_UTIL_H */
