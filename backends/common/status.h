/* SPDX-License-Identifier: Apache-2.0
 *
 * The two shapes of a backend's error message (DESIGN.md, "Errors"): a
 * backend writes only "NAME: description"; the core adds
 * "[operation][backend]" once.
 *   a driver's failure:   "CUDA_ERROR_INVALID_VALUE: invalid argument (what)"
 *   the backend's own:    "EINVAL: description"
 * Each backend's *_status.c wraps these as <b>_check(native, error, fmt, ...)
 * and <b>_errorf(error, status, fmt, ...). Header-only; backends do not
 * link libadr (whose adr_status_name names statuses the same way).
 */
#ifndef ADR_BACKENDS_COMMON_STATUS_H
#define ADR_BACKENDS_COMMON_STATUS_H

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "adr/backend.h"

static inline const char* adr_backend_status_name(int status) {
  switch (status) {
    case EINVAL:
      return "EINVAL";
    case ENOMEM:
      return "ENOMEM";
    case ENOTSUP:
      return "ENOTSUP";
    case ENODEV:
      return "ENODEV";
    case ENOENT:
      return "ENOENT";
    case EEXIST:
      return "EEXIST";
    case EBUSY:
      return "EBUSY";
    case EIO:
      return "EIO";
    case EOVERFLOW:
      return "EOVERFLOW";
    case ERANGE:
      return "ERANGE";
    case EPERM:
      return "EPERM";
    case EFAULT:
      return "EFAULT";
    case ETIMEDOUT:
      return "ETIMEDOUT";
    case EPROTO:
      return "EPROTO";
    default:
      return "EUNKNOWN";
  }
}

/* "NAME: description (what)", `what` formatted from fmt/ap (omitted with
 * its parentheses when fmt is NULL or formats to ""). Returns status. */
static inline int adr_backend_native_verror(struct adr_error* error, int status, const char* name,
                                            const char* description, const char* fmt, va_list ap) {
  if (error == NULL) return status;
  char what[768] = "";
  if (fmt != NULL) vsnprintf(what, sizeof(what), fmt, ap);
  if (what[0] == '\0') return adr_backend_error_set(error, status, "%s: %s", name, description);
  return adr_backend_error_set(error, status, "%s: %s (%s)", name, description, what);
}

/* "ENAME: detail" for an errno status. Returns status. */
static inline int adr_backend_verrorf(struct adr_error* error, int status, const char* fmt,
                                      va_list ap) {
  if (error == NULL) return status;
  char detail[900];
  vsnprintf(detail, sizeof(detail), fmt, ap);
  return adr_backend_error_set(error, status, "%s: %s", adr_backend_status_name(status), detail);
}

/* Defines `int NAME(struct adr_error* error, int status, const char* fmt,
 * ...)`: "ENAME: description" through adr_backend_verrorf, returns status.
 * Every backend's <b>_errorf is this (declare it with ADR_PRINTF(3, 4)). */
#define ADR_BACKEND_DEFINE_ERRORF(name)                                 \
  int name(struct adr_error* error, int status, const char* fmt, ...) { \
    va_list ap;                                                         \
    va_start(ap, fmt);                                                  \
    adr_backend_verrorf(error, status, fmt, ap);                        \
    va_end(ap);                                                         \
    return status;                                                      \
  }

/* Defines three static look-ups over an X-macro list of native results,
 * X(code, status, description):
 *   static int table_status(TYPE r)              the status; `fallback` for
 *                                                a code not in the list
 *   static const char* table_name(TYPE r)        "CODE" or NULL
 *   static const char* table_description(TYPE r) the description or NULL */
#define ADR_BACKEND_STATUS_CASE_(code, status, desc) \
  case code:                                         \
    return status;
#define ADR_BACKEND_NAME_CASE_(code, status, desc) \
  case code:                                       \
    return #code;
#define ADR_BACKEND_DESC_CASE_(code, status, desc) \
  case code:                                       \
    return desc;
#define ADR_BACKEND_DEFINE_STATUS_TABLE(TYPE, LIST, fallback) \
  static int table_status(TYPE r) {                           \
    switch (r) {                                              \
      LIST(ADR_BACKEND_STATUS_CASE_)                          \
      default:                                                \
        return fallback;                                      \
    }                                                         \
  }                                                           \
  static const char* table_name(TYPE r) {                     \
    switch (r) {                                              \
      LIST(ADR_BACKEND_NAME_CASE_)                            \
      default:                                                \
        return NULL;                                          \
    }                                                         \
  }                                                           \
  static const char* table_description(TYPE r) {              \
    switch (r) {                                              \
      LIST(ADR_BACKEND_DESC_CASE_)                            \
      default:                                                \
        return NULL;                                          \
    }                                                         \
  }

#endif /* ADR_BACKENDS_COMMON_STATUS_H */
