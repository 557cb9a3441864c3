/* SPDX-License-Identifier: Apache-2.0
 *
 * The one place where OpenCL results become adr statuses and messages:
 * "CL_NAME: description" (ocl_check) or "ENAME: description" (ocl_errorf);
 * the core adds "[operation][opencl]".
 *
 * Mapping rules: allocation failures -> ENOMEM; "no such device/platform"
 * and unavailable compilers -> ENODEV/ENOTSUP; CL_INVALID_* (bad handles,
 * values, sizes, contexts mixed up) -> EINVAL; CL_INVALID_OPERATION and
 * CL_INVALID_DEVICE_QUEUE-style "not possible here" -> ENOTSUP; failed
 * commands (CL_EXEC_STATUS_ERROR..., negative event status) -> EIO; codes
 * this table does not know -> EIO with the number in the name.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "opencl_internal.h"
#include "status.h"

#ifndef CL_PLATFORM_NOT_FOUND_KHR
#define CL_PLATFORM_NOT_FOUND_KHR -1001
#endif

#define OCL_ERRORS(X)                                        \
  X(CL_SUCCESS, 0)                                           \
  X(CL_DEVICE_NOT_FOUND, ENODEV)                             \
  X(CL_DEVICE_NOT_AVAILABLE, ENODEV)                         \
  X(CL_COMPILER_NOT_AVAILABLE, ENOTSUP)                      \
  X(CL_MEM_OBJECT_ALLOCATION_FAILURE, ENOMEM)                \
  X(CL_OUT_OF_RESOURCES, ENOMEM)                             \
  X(CL_OUT_OF_HOST_MEMORY, ENOMEM)                           \
  X(CL_PROFILING_INFO_NOT_AVAILABLE, ENOTSUP)                \
  X(CL_MEM_COPY_OVERLAP, EINVAL)                             \
  X(CL_IMAGE_FORMAT_MISMATCH, EINVAL)                        \
  X(CL_IMAGE_FORMAT_NOT_SUPPORTED, ENOTSUP)                  \
  X(CL_BUILD_PROGRAM_FAILURE, EINVAL)                        \
  X(CL_MAP_FAILURE, EIO)                                     \
  X(CL_MISALIGNED_SUB_BUFFER_OFFSET, EINVAL)                 \
  X(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST, EIO)       \
  X(CL_COMPILE_PROGRAM_FAILURE, EINVAL)                      \
  X(CL_LINKER_NOT_AVAILABLE, ENOTSUP)                        \
  X(CL_LINK_PROGRAM_FAILURE, EINVAL)                         \
  X(CL_DEVICE_PARTITION_FAILED, EINVAL)                      \
  X(CL_KERNEL_ARG_INFO_NOT_AVAILABLE, ENOTSUP)               \
  X(CL_INVALID_VALUE, EINVAL)                                \
  X(CL_INVALID_DEVICE_TYPE, EINVAL)                          \
  X(CL_INVALID_PLATFORM, EINVAL)                             \
  X(CL_INVALID_DEVICE, EINVAL)                               \
  X(CL_INVALID_CONTEXT, EINVAL)                              \
  X(CL_INVALID_QUEUE_PROPERTIES, ENOTSUP)                    \
  X(CL_INVALID_COMMAND_QUEUE, EINVAL)                        \
  X(CL_INVALID_HOST_PTR, EINVAL)                             \
  X(CL_INVALID_MEM_OBJECT, EINVAL)                           \
  X(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR, EINVAL)              \
  X(CL_INVALID_IMAGE_SIZE, EINVAL)                           \
  X(CL_INVALID_SAMPLER, EINVAL)                              \
  X(CL_INVALID_BINARY, EINVAL)                               \
  X(CL_INVALID_BUILD_OPTIONS, EINVAL)                        \
  X(CL_INVALID_PROGRAM, EINVAL)                              \
  X(CL_INVALID_PROGRAM_EXECUTABLE, EINVAL)                   \
  X(CL_INVALID_KERNEL_NAME, EINVAL)                          \
  X(CL_INVALID_KERNEL_DEFINITION, EINVAL)                    \
  X(CL_INVALID_KERNEL, EINVAL)                               \
  X(CL_INVALID_ARG_INDEX, EINVAL)                            \
  X(CL_INVALID_ARG_VALUE, EINVAL)                            \
  X(CL_INVALID_ARG_SIZE, EINVAL)                             \
  X(CL_INVALID_KERNEL_ARGS, EINVAL)                          \
  X(CL_INVALID_WORK_DIMENSION, EINVAL)                       \
  X(CL_INVALID_WORK_GROUP_SIZE, EINVAL)                      \
  X(CL_INVALID_WORK_ITEM_SIZE, EINVAL)                       \
  X(CL_INVALID_GLOBAL_OFFSET, EINVAL)                        \
  X(CL_INVALID_EVENT_WAIT_LIST, EINVAL)                      \
  X(CL_INVALID_EVENT, EINVAL)                                \
  X(CL_INVALID_OPERATION, ENOTSUP)                           \
  X(CL_INVALID_GL_OBJECT, EINVAL)                            \
  X(CL_INVALID_BUFFER_SIZE, EINVAL)                          \
  X(CL_INVALID_MIP_LEVEL, EINVAL)                            \
  X(CL_INVALID_GLOBAL_WORK_SIZE, EINVAL)                     \
  X(CL_INVALID_PROPERTY, EINVAL)                             \
  X(CL_INVALID_IMAGE_DESCRIPTOR, EINVAL)                     \
  X(CL_INVALID_COMPILER_OPTIONS, EINVAL)                     \
  X(CL_INVALID_LINKER_OPTIONS, EINVAL)                       \
  X(CL_INVALID_DEVICE_PARTITION_COUNT, EINVAL)               \
  X(CL_INVALID_PIPE_SIZE, EINVAL)                            \
  X(CL_INVALID_DEVICE_QUEUE, EINVAL)                         \
  X(CL_INVALID_SPEC_ID, EINVAL)                              \
  X(CL_MAX_SIZE_RESTRICTION_EXCEEDED, EINVAL)                \
  X(CL_PLATFORM_NOT_FOUND_KHR, ENODEV)

static const char unknown_name[] = "CL_UNKNOWN_ERROR";

const char* ocl_error_name(cl_int code) {
  switch (code) {
#define OCL_NAME_CASE(name, status) \
  case name:                        \
    return #name;
    OCL_ERRORS(OCL_NAME_CASE)
#undef OCL_NAME_CASE
    default:
      return unknown_name;
  }
}

int ocl_status(cl_int code) {
  switch (code) {
#define OCL_STATUS_CASE(name, status) \
  case name:                          \
    return status;
    OCL_ERRORS(OCL_STATUS_CASE)
#undef OCL_STATUS_CASE
    default:
      /* Negative execution statuses of failed commands land here too. */
      return EIO;
  }
}

int ocl_check(cl_int code, struct adr_error* error, const char* fmt, ...) {
  int status = ocl_status(code);
  if (status == 0) status = EIO; /* a caller reporting CL_SUCCESS as a failure */
  if (error == NULL) return status;
  char detail[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof(detail), fmt, ap);
  va_end(ap);
  const char* name = ocl_error_name(code);
  if (name == unknown_name) /* keep the number of a code the table lacks */
    return adr_backend_error_set(error, status, "CL_ERROR(%d): %s", (int)code, detail);
  return adr_backend_error_set(error, status, "%s: %s", name, detail);
}

/* "ENAME: description": the errno names of backends/common/status.h. */
ADR_BACKEND_DEFINE_ERRORF(ocl_errorf)
