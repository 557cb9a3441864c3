/* SPDX-License-Identifier: Apache-2.0
 *
 * The one place where a VkResult becomes an adr status and a message
 * "VK_NAME: what: description" (vkb_check), and an errno failure
 * "ENAME: description" (vkb_errorf); the core adds "[operation][vulkan]".
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "status.h"
#include "vulkan_internal.h"

/* X(result, status, description) */
#define VKB_RESULTS(X)                                                                 \
  X(VK_SUCCESS, 0, "success")                                                          \
  X(VK_NOT_READY, EBUSY, "not ready yet")                                              \
  X(VK_TIMEOUT, ETIMEDOUT, "wait timed out")                                           \
  X(VK_EVENT_SET, 0, "event is set")                                                   \
  X(VK_EVENT_RESET, EBUSY, "event is reset")                                           \
  X(VK_INCOMPLETE, ENOSPC, "result array too small")                                   \
  X(VK_ERROR_OUT_OF_HOST_MEMORY, ENOMEM, "host memory allocation failed")              \
  X(VK_ERROR_OUT_OF_DEVICE_MEMORY, ENOMEM, "device memory allocation failed")          \
  X(VK_ERROR_INITIALIZATION_FAILED, EIO, "initialization of an object failed")         \
  X(VK_ERROR_DEVICE_LOST, EIO, "the logical or physical device was lost")              \
  X(VK_ERROR_MEMORY_MAP_FAILED, EIO, "mapping memory failed")                          \
  X(VK_ERROR_LAYER_NOT_PRESENT, ENOENT, "a requested layer is not installed")          \
  X(VK_ERROR_EXTENSION_NOT_PRESENT, ENOTSUP, "a requested extension is not supported") \
  X(VK_ERROR_FEATURE_NOT_PRESENT, ENOTSUP, "a requested feature is not supported")     \
  X(VK_ERROR_INCOMPATIBLE_DRIVER, ENODEV, "no compatible Vulkan driver")               \
  X(VK_ERROR_TOO_MANY_OBJECTS, ENOMEM, "too many objects of this type")                \
  X(VK_ERROR_FORMAT_NOT_SUPPORTED, ENOTSUP, "format not supported")                    \
  X(VK_ERROR_FRAGMENTED_POOL, ENOMEM, "pool allocation failed (fragmentation)")        \
  X(VK_ERROR_UNKNOWN, EIO, "unknown driver error")                                     \
  X(VK_ERROR_OUT_OF_POOL_MEMORY, ENOMEM, "pool memory exhausted")                      \
  X(VK_ERROR_INVALID_EXTERNAL_HANDLE, EINVAL, "invalid external handle")               \
  X(VK_ERROR_FRAGMENTATION, ENOMEM, "allocation failed (fragmentation)")               \
  X(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS, EINVAL, "invalid opaque capture address") \
  X(VK_PIPELINE_COMPILE_REQUIRED, EAGAIN, "pipeline compile required")                 \
  X(VK_ERROR_SURFACE_LOST_KHR, EIO, "surface lost")                                    \
  X(VK_ERROR_NATIVE_WINDOW_IN_USE_KHR, EBUSY, "native window in use")                  \
  X(VK_SUBOPTIMAL_KHR, 0, "suboptimal")                                                \
  X(VK_ERROR_OUT_OF_DATE_KHR, EIO, "out of date")                                      \
  X(VK_ERROR_VALIDATION_FAILED_EXT, EINVAL, "validation failed")                       \
  X(VK_ERROR_INVALID_SHADER_NV, EINVAL, "invalid shader")                              \
  X(VK_ERROR_NOT_PERMITTED_KHR, EPERM, "not permitted")                                \
  X(VK_ERROR_COMPRESSION_EXHAUSTED_EXT, ENOMEM, "compression exhausted")

const char* vkb_result_name(VkResult r) {
  switch (r) {
#define VKB_X(res, st, desc) \
  case res:                  \
    return #res;
    VKB_RESULTS(VKB_X)
#undef VKB_X
    default:
      return r < 0 ? "VK_ERROR_(unknown)" : "VK_(unknown)";
  }
}

static const char* result_description(VkResult r) {
  switch (r) {
#define VKB_X(res, st, desc) \
  case res:                  \
    return desc;
    VKB_RESULTS(VKB_X)
#undef VKB_X
    default:
      return "unrecognised VkResult";
  }
}

int vkb_result_status(VkResult r) {
  switch (r) {
#define VKB_X(res, st, desc) \
  case res:                  \
    return st;
    VKB_RESULTS(VKB_X)
#undef VKB_X
    default:
      return r < 0 ? EIO : 0;
  }
}

int vkb_check(VkResult r, struct adr_error* error, const char* fmt, ...) {
  int status = vkb_result_status(r);
  if (status == 0) status = EIO; /* a non-error result reported as failure */
  if (error != NULL) {
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    if (vkb_result_status(r) == 0 || strchr(vkb_result_name(r), '(') != NULL)
      snprintf(error->message, sizeof(error->message), "%s (%d): %s: %s", vkb_result_name(r),
               (int)r, what, result_description(r));
    else
      snprintf(error->message, sizeof(error->message), "%s: %s: %s", vkb_result_name(r), what,
               result_description(r));
  }
  return status;
}

/* "ENAME: description": the errno names of backends/common/status.h. */
ADR_BACKEND_DEFINE_ERRORF(vkb_errorf)
