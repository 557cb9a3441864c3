/* SPDX-License-Identifier: Apache-2.0
 *
 * CUresult -> errno status and message: the one place the CUDA backend
 * turns driver results into adr errors. Messages are "NAME: description
 * (what)" (backends/common/status.h); the core adds "[operation][cuda]".
 *
 * Names and descriptions come from the loaded driver (cuGetErrorName /
 * cuGetErrorString), so codes newer than this file still print their real
 * name; the table below is the fallback for codes reported before the
 * driver is loaded, and gives each code its errno status.
 */
#include <errno.h>
#include <stdarg.h>
#include <string.h>

#include "cuda_internal.h"
#include "status.h"

/* X(code, status, description) */
#define CUDA_ERRORS(X)                                                                           \
  X(CUDA_SUCCESS, 0, "no error")                                                                 \
  X(CUDA_ERROR_INVALID_VALUE, EINVAL, "invalid argument")                                        \
  X(CUDA_ERROR_OUT_OF_MEMORY, ENOMEM, "out of memory")                                           \
  X(CUDA_ERROR_NOT_INITIALIZED, ENODEV, "initialization error")                                  \
  X(CUDA_ERROR_DEINITIALIZED, ENODEV, "driver shutting down")                                    \
  X(CUDA_ERROR_STUB_LIBRARY, ENODEV, "CUDA driver is a stub library")                            \
  X(CUDA_ERROR_NO_DEVICE, ENODEV, "no CUDA-capable device is detected")                          \
  X(CUDA_ERROR_INVALID_DEVICE, EINVAL, "invalid device ordinal")                                 \
  X(CUDA_ERROR_DEVICE_UNAVAILABLE, ENODEV, "CUDA-capable device(s) is/are busy or unavailable")  \
  X(CUDA_ERROR_DEVICE_NOT_LICENSED, ENODEV, "the device is not licensed")                        \
  X(CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER, ENODEV, "the call requires a newer driver")           \
  X(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, ENODEV, "system has unsupported display driver")          \
  X(CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE, ENODEV, "forward compatibility not supported")    \
  X(CUDA_ERROR_INVALID_CONTEXT, EINVAL, "invalid device context")                                \
  X(CUDA_ERROR_CONTEXT_IS_DESTROYED, EINVAL, "context is destroyed")                             \
  X(CUDA_ERROR_INVALID_HANDLE, EINVAL, "invalid resource handle")                                \
  X(CUDA_ERROR_NOT_FOUND, ENOENT, "named symbol not found")                                      \
  X(CUDA_ERROR_NOT_READY, EBUSY, "device not ready")                                             \
  X(CUDA_ERROR_ILLEGAL_ADDRESS, EIO, "an illegal memory access was encountered")                 \
  X(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, EEXIST,                                           \
    "part or all of the requested memory range is already mapped")                               \
  X(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, ENOENT,                                               \
    "pointer does not correspond to a registered memory region")                                 \
  X(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, EEXIST, "peer access is already enabled")            \
  X(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, ENOTSUP, "peer access is not supported between devices") \
  X(CUDA_ERROR_NOT_SUPPORTED, ENOTSUP, "operation not supported")                                \
  X(CUDA_ERROR_NOT_PERMITTED, EPERM, "operation not permitted")                                  \
  X(CUDA_ERROR_OPERATING_SYSTEM, EPERM, "OS call failed or operation not supported on this OS")  \
  X(CUDA_ERROR_UNKNOWN, EIO, "unknown error")

/* Sticky device faults (ECC, launch failure) and anything unknown: the
 * operation failed on the device (EIO). */
ADR_BACKEND_DEFINE_STATUS_TABLE(CUresult, CUDA_ERRORS, EIO)

int cuda_status(CUresult r) {
  return table_status(r);
}

const char* cuda_error_name(CUresult r) {
  const char* name = NULL;
  if (cuda_api.cuGetErrorName == NULL || cuda_api.cuGetErrorName(r, &name) != CUDA_SUCCESS ||
      name == NULL || name[0] == '\0') {
    const char* t = table_name(r);
    return t != NULL ? t : "CUDA_ERROR_UNRECOGNIZED";
  }
  return name;
}

const char* cuda_error_description(CUresult r) {
  const char* s = NULL;
  if (cuda_api.cuGetErrorString != NULL && cuda_api.cuGetErrorString(r, &s) == CUDA_SUCCESS &&
      s != NULL && s[0] != '\0')
    return s;
  const char* t = table_description(r);
  return t != NULL ? t : "unrecognised CUDA error code";
}

int cuda_check(CUresult r, struct adr_error* error, const char* fmt, ...) {
  if (r == CUDA_SUCCESS) return 0;
  va_list ap;
  va_start(ap, fmt);
  int st = adr_backend_native_verror(error, cuda_status(r), cuda_error_name(r),
                                     cuda_error_description(r), fmt, ap);
  va_end(ap);
  return st;
}

ADR_BACKEND_DEFINE_ERRORF(cuda_errorf)
