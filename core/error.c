/* SPDX-License-Identifier: Apache-2.0
 *
 * Status names and messages. One X-macro list feeds both tables.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define ADR__STATUS_LIST(X)                                  \
  X(EINVAL, "invalid argument")                              \
  X(ENOMEM, "out of memory")                                 \
  X(ENOTSUP, "operation not supported by this backend")      \
  X(ENODEV, "no such device, or its backend is unavailable") \
  X(EIO, "device or driver error")                           \
  X(EBUSY, "not ready yet")                                  \
  X(ENOENT, "not found")                                     \
  X(EOVERFLOW, "size overflows")                             \
  X(ERANGE, "out of range")                                  \
  X(EAGAIN, "resource temporarily unavailable")              \
  X(EPERM, "operation not permitted")                        \
  X(EFAULT, "bad address")                                   \
  X(ENOSYS, "function not implemented")                      \
  X(ECANCELED, "operation canceled")                         \
  X(ETIMEDOUT, "timed out")                                  \
  X(EPROTO, "protocol error")                                \
  X(ENOEXEC, "not a loadable backend")                       \
  X(EEXIST, "already exists")                                \
  X(ESHUTDOWN, "adr was shut down at process exit")

const char* adr_status_name(int status) {
  if (status == 0) return "OK";
  switch (status) {
#define ADR__NAME_CASE(code, text) \
  case code:                       \
    return #code;
    ADR__STATUS_LIST(ADR__NAME_CASE)
#undef ADR__NAME_CASE
    default:
      return "EUNKNOWN";
  }
}

const char* adr_status_string(int status) {
  if (status == 0) return "success";
  switch (status) {
#define ADR__TEXT_CASE(code, text) \
  case code:                       \
    return text;
    ADR__STATUS_LIST(ADR__TEXT_CASE)
#undef ADR__TEXT_CASE
    default:
      return "unknown status";
  }
}

int adr_error_set(struct adr_error* error, int status, const char* fmt, ...) {
  if (error != NULL) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error->message, sizeof(error->message), fmt, ap);
    va_end(ap);
  }
  return status;
}

int adr__errorf(struct adr_error* error, int status, const char* op, const char* backend,
                const char* fmt, ...) {
  if (error == NULL) return status;
  int n;
  if (backend != NULL)
    n = snprintf(error->message, sizeof(error->message), "[%s][%s] ", op, backend);
  else
    n = snprintf(error->message, sizeof(error->message), "[%s] ", op);
  if (n < 0 || (size_t)n >= sizeof(error->message)) return status;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(error->message + n, sizeof(error->message) - (size_t)n, fmt, ap);
  va_end(ap);
  return status;
}

void adr__error_context(struct adr_error* error, int status, const char* api, const char* backend) {
  if (error == NULL) return;
  /* Backends write "NATIVE: description" (adr/backend.h); the operation and
   * the backend's name are added here, once. */
  char body[sizeof(error->message)];
  if (error->message[0] == '\0')
    snprintf(body, sizeof(body), "%s: the backend gave no message", adr_status_name(status));
  else
    memcpy(body, error->message, sizeof(body));
  adr__errorf(error, status, api, backend, "%s", body);
}

/* "512 B", "4 KiB", "1.5 GiB": binary units, one decimal when not whole. */
const char* adr__format_bytes(uint64_t bytes, char* buf, size_t size) {
  static const char* const names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) {
    snprintf(buf, size, "%llu B", (unsigned long long)bytes);
    return buf;
  }
  double v = (double)bytes;
  unsigned u = 0;
  while (v >= 1024 && u + 1 < sizeof(names) / sizeof(names[0])) {
    v /= 1024;
    u++;
  }
  if (v == (double)(uint64_t)v)
    snprintf(buf, size, "%llu %s", (unsigned long long)v, names[u]);
  else
    snprintf(buf, size, "%.1f %s", v, names[u]);
  return buf;
}
