/* SPDX-License-Identifier: Apache-2.0
 *
 * The host services, kept and checked once (host.h).
 */
#include "host.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

/* Written by adr_backend_query and init, before any other slot can run
 * (host.h: thread safety); read-only afterwards. */
static const struct adr_backend_host* offered;
static const struct adr_backend_host* host;
static const char* backend_name = "backend";

void adr_host_set(const struct adr_backend_host* h) {
  offered = h;
  host = NULL;
}

int adr_host_init(const char* backend, struct adr_error* error) {
  host = NULL;
  if (offered == NULL) return adr_backend_error_set(error, EPROTO, "the host offered no services");
  if (offered->struct_size < ADR_BACKEND_HOST_MIN_STRUCT_SIZE)
    return adr_backend_error_set(error, EPROTO,
                                 "the host services struct is %u bytes, less than the %u "
                                 "bytes of ABI %d.0",
                                 offered->struct_size, ADR_BACKEND_HOST_MIN_STRUCT_SIZE,
                                 ADR_BACKEND_ABI_MAJOR);
  backend_name = backend;
  host = offered;
  return 0;
}

const char* adr_host_getenv(const char* name) {
  if (host == NULL || host->getenv == NULL) return NULL;
  return host->getenv(name);
}

bool adr_host_log_enabled(int level) {
  if (host == NULL || host->log == NULL) return false;
  return host->log_level == NULL || level <= host->log_level();
}

void adr_host_log(int level, const char* fmt, ...) {
  if (!adr_host_log_enabled(level)) return;
  char line[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  host->log(level, backend_name, "%s", line);
}
