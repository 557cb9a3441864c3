/* SPDX-License-Identifier: Apache-2.0
 *
 * The OpenCL entry points the backend uses, as one X-macro list, resolved
 * once by opencl_loader.c from libOpenCL.so.1 (the ICD loader).
 *
 * ADR_OCL_REQUIRED: OpenCL 1.2 API; a loader without one of them is refused.
 * ADR_OCL_OPTIONAL: OpenCL 2.0 (SVM, queue properties); NULL when the loader
 * predates 2.0, in which case every device uses the cl_mem address mode.
 */
#ifndef ADR_OPENCL_SYMBOLS_H
#define ADR_OPENCL_SYMBOLS_H

#define ADR_OCL_REQUIRED(X)       \
  X(clGetPlatformIDs)             \
  X(clGetPlatformInfo)            \
  X(clGetDeviceIDs)               \
  X(clGetDeviceInfo)              \
  X(clCreateContext)              \
  X(clRetainContext)              \
  X(clReleaseContext)             \
  X(clGetContextInfo)             \
  X(clCreateCommandQueue)         \
  X(clRetainCommandQueue)         \
  X(clReleaseCommandQueue)        \
  X(clGetCommandQueueInfo)        \
  X(clCreateBuffer)               \
  X(clReleaseMemObject)           \
  X(clEnqueueReadBuffer)          \
  X(clEnqueueWriteBuffer)         \
  X(clEnqueueCopyBuffer)          \
  X(clEnqueueFillBuffer)          \
  X(clEnqueueMarkerWithWaitList)  \
  X(clEnqueueBarrierWithWaitList) \
  X(clWaitForEvents)              \
  X(clGetEventInfo)               \
  X(clRetainEvent)                \
  X(clReleaseEvent)               \
  X(clCreateUserEvent)            \
  X(clSetUserEventStatus)         \
  X(clSetEventCallback)           \
  X(clFlush)                      \
  X(clFinish)

#define ADR_OCL_OPTIONAL(X)             \
  X(clCreateCommandQueueWithProperties) \
  X(clSVMAlloc)                         \
  X(clSVMFree)                          \
  X(clEnqueueSVMMemcpy)                 \
  X(clEnqueueSVMMemFill)                \
  X(clEnqueueSVMFree)

#endif /* ADR_OPENCL_SYMBOLS_H */
