/* SPDX-License-Identifier: Apache-2.0
 *
 * CUresult -> errno status and message: the one place the CUDA backend
 * interprets driver results. Names and descriptions come from the driver
 * (cuGetErrorName / cuGetErrorString) when it is loaded, so codes newer
 * than this file still print their real name.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "cuda_internal.h"

int cuda_status(CUresult r) {
  switch (r) {
    case CUDA_SUCCESS:
      return 0;
    case CUDA_ERROR_OUT_OF_MEMORY:
      return ENOMEM;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE:
    case CUDA_ERROR_INVALID_CONTEXT:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CUDA_ERROR_INVALID_DEVICE:
      return EINVAL;
    case CUDA_ERROR_NOT_READY:
      return EBUSY;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_STUB_LIBRARY:
    case CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
    case CUDA_ERROR_DEVICE_NOT_LICENSED:
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_DEINITIALIZED:
      return ENODEV;
    case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED:
    case CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED:
      return EEXIST;
    case CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED:
    case CUDA_ERROR_NOT_FOUND:
      return ENOENT;
    case CUDA_ERROR_NOT_SUPPORTED:
    case CUDA_ERROR_PEER_ACCESS_UNSUPPORTED:
      return ENOTSUP;
    case CUDA_ERROR_NOT_PERMITTED:
    case CUDA_ERROR_OPERATING_SYSTEM:
      return EPERM;
    default:
      /* Sticky device faults (illegal address, ECC, launch failure) and
       * anything unknown: the operation failed on the device. */
      return EIO;
  }
}

const char* cuda_result_name(CUresult r) {
  const char* name = NULL;
  if (cuda_api.cuGetErrorName != NULL && cuda_api.cuGetErrorName(r, &name) == CUDA_SUCCESS &&
      name != NULL)
    return name;
  switch (r) {
    case CUDA_ERROR_STUB_LIBRARY:
      return "CUDA_ERROR_STUB_LIBRARY";
    case CUDA_ERROR_NO_DEVICE:
      return "CUDA_ERROR_NO_DEVICE";
    case CUDA_ERROR_NOT_INITIALIZED:
      return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER:
      return "CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER";
    case CUDA_ERROR_NOT_FOUND:
      return "CUDA_ERROR_NOT_FOUND";
    default:
      return "CUDA_ERROR_UNRECOGNIZED";
  }
}

int cuda_error(struct adr_error* error, CUresult r, const char* op, const char* fmt, ...) {
  int status = cuda_status(r);
  if (status == 0) status = EIO; /* a caller bug; never report success as a failure */
  if (error == NULL) return status;
  const char* text = NULL;
  if (cuda_api.cuGetErrorString == NULL || cuda_api.cuGetErrorString(r, &text) != CUDA_SUCCESS ||
      text == NULL)
    text = "no description from the driver";
  char detail[640] = "";
  if (fmt != NULL) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
  }
  const char* name = cuda_result_name(r);
  if (detail[0] != '\0')
    return adr_backend_error_set(error, status,
                                 "[%s][" CUDA_BACKEND_NAME "] %s: %s (%s, CUresult %d)", op, name,
                                 detail, text, (int)r);
  return adr_backend_error_set(error, status, "[%s][" CUDA_BACKEND_NAME "] %s: %s (CUresult %d)",
                               op, name, text, (int)r);
}
