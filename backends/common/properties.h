/* SPDX-License-Identifier: Apache-2.0
 *
 * device_properties helper shared by backends (header-only): one
 * printf-formatted key/value through the core's adr_property_fn.
 */
#ifndef ADR_BACKENDS_COMMON_PROPERTIES_H
#define ADR_BACKENDS_COMMON_PROPERTIES_H

#include <stdarg.h>
#include <stdio.h>

#include "adr/backend.h"

static inline void adr_property_emitf(adr_property_fn emit, void* ctx, const char* key,
                                      const char* fmt, ...) ADR_PRINTF(4, 5);
static inline void adr_property_emitf(adr_property_fn emit, void* ctx, const char* key,
                                      const char* fmt, ...) {
  char v[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(v, sizeof(v), fmt, ap);
  va_end(ap);
  emit(ctx, key, v);
}

#endif /* ADR_BACKENDS_COMMON_PROPERTIES_H */
