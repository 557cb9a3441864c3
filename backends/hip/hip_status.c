/* SPDX-License-Identifier: Apache-2.0
 *
 * hipError_t -> errno status and message: the one place the HIP backend
 * turns runtime results into adr errors. Messages are "NAME: description
 * (what)" (backends/common/status.h); the core adds "[operation][hip]".
 *
 * Names come from the loaded runtime (hipGetErrorName), so a newer
 * runtime's codes print correctly; the table below is the fallback for
 * codes reported before the runtime is loaded, gives each code its errno
 * status, and supplies the descriptions, because the AMD runtime's
 * hipGetErrorString returns the name again.
 */
#include <errno.h>
#include <stdarg.h>
#include <string.h>

#include "hip_internal.h"
#include "status.h"

/* X(code, status, description) */
#define HIP_ERRORS(X)                                                                             \
  X(hipSuccess, 0, "no error")                                                                    \
  X(hipErrorInvalidValue, EINVAL, "an argument is out of range or invalid")                       \
  X(hipErrorOutOfMemory, ENOMEM, "the device cannot allocate enough memory")                      \
  X(hipErrorNotInitialized, ENODEV, "the HIP runtime is not initialised")                         \
  X(hipErrorDeinitialized, ENODEV, "the HIP runtime is shutting down")                            \
  X(hipErrorInvalidConfiguration, EINVAL, "invalid configuration")                                \
  X(hipErrorInvalidDevicePointer, EINVAL, "the pointer is not a valid device pointer")            \
  X(hipErrorInvalidMemcpyDirection, EINVAL, "invalid copy direction")                             \
  X(hipErrorInsufficientDriver, ENODEV, "the installed driver is older than the runtime")         \
  X(hipErrorNoDevice, ENODEV, "no ROCm-capable device is detected")                               \
  X(hipErrorInvalidDevice, ENODEV, "the device ordinal is not a valid device")                    \
  X(hipErrorInvalidContext, EINVAL, "invalid device context")                                     \
  X(hipErrorMapFailed, EIO, "mapping memory failed")                                              \
  X(hipErrorUnmapFailed, EIO, "unmapping memory failed")                                          \
  X(hipErrorAlreadyMapped, EEXIST, "the memory is already mapped")                                \
  X(hipErrorNotMapped, EINVAL, "the memory is not mapped")                                        \
  X(hipErrorPeerAccessUnsupported, ENOTSUP, "peer access is not supported between these devices") \
  X(hipErrorOperatingSystem, EIO, "an operating system call failed")                              \
  X(hipErrorInvalidHandle, EINVAL, "invalid stream or event handle")                              \
  X(hipErrorIllegalState, EINVAL, "the operation is not allowed in the current state")            \
  X(hipErrorNotFound, ENOENT, "the named object was not found")                                   \
  X(hipErrorNotReady, EBUSY, "the work has not completed yet")                                    \
  X(hipErrorIllegalAddress, EFAULT, "the device accessed an illegal address")                     \
  X(hipErrorLaunchOutOfResources, ENOMEM, "too many resources requested for launch")              \
  X(hipErrorLaunchTimeOut, ETIMEDOUT, "the device timed out")                                     \
  X(hipErrorPeerAccessAlreadyEnabled, EEXIST, "peer access is already enabled")                   \
  X(hipErrorPeerAccessNotEnabled, ENOTSUP, "peer access has not been enabled")                    \
  X(hipErrorContextIsDestroyed, ENODEV, "the context is destroyed")                               \
  X(hipErrorHostMemoryAlreadyRegistered, EEXIST, "the host memory is already registered")         \
  X(hipErrorHostMemoryNotRegistered, EINVAL, "the host memory is not registered")                 \
  X(hipErrorLaunchFailure, EIO, "a device kernel failed")                                         \
  X(hipErrorNotSupported, ENOTSUP, "the operation is not supported by this device or runtime")    \
  X(hipErrorUnknown, EIO, "unknown HIP error")                                                    \
  X(hipErrorRuntimeMemory, ENOMEM, "the HIP runtime failed to allocate host memory")              \
  X(hipErrorRuntimeOther, EIO, "the HIP runtime failed internally")

ADR_BACKEND_DEFINE_STATUS_TABLE(hipError_t, HIP_ERRORS, EIO)

int hip_status(hipError_t e) {
  return table_status(e);
}

const char* hip_error_name(hipError_t e) {
  const char* name = hip_api.hipGetErrorName != NULL ? hip_api.hipGetErrorName(e) : NULL;
  /* The runtime answers "hipErrorUnknown" for codes it does not know;
   * prefer the table's name then, so a code is never misnamed. */
  if (name == NULL || name[0] == '\0' ||
      (strcmp(name, "hipErrorUnknown") == 0 && e != hipErrorUnknown)) {
    const char* t = table_name(e);
    return t != NULL ? t : "hipErrorUnrecognized";
  }
  return name;
}

const char* hip_error_description(hipError_t e) {
  const char* s = hip_api.hipGetErrorString != NULL ? hip_api.hipGetErrorString(e) : NULL;
  /* AMD's runtime returns the name again, which describes nothing. */
  if (s != NULL && s[0] != '\0' && strncmp(s, "hipError", 8) != 0 && strcmp(s, "unknown") != 0)
    return s;
  const char* t = table_description(e);
  return t != NULL ? t : "unrecognised HIP error code";
}

int hip_check(hipError_t e, struct adr_error* error, const char* fmt, ...) {
  if (e == hipSuccess) return 0;
  va_list ap;
  va_start(ap, fmt);
  int st = adr_backend_native_verror(error, hip_status(e), hip_error_name(e),
                                     hip_error_description(e), fmt, ap);
  va_end(ap);
  return st;
}

ADR_BACKEND_DEFINE_ERRORF(hip_errorf)
