/* SPDX-License-Identifier: Apache-2.0
 *
 * adr OpenCL interop: the structs and constants an application uses to mix
 * adr with its own OpenCL code (backends/opencl/README.md has the details).
 *
 * Include after (or instead of) <CL/cl.h>: this header includes it.
 *
 * Native handles (adr_device_native on an ARROW_DEVICE_OPENCL device):
 *   ADR_NATIVE_PLATFORM  -> cl_platform_id
 *   ADR_NATIVE_DEVICE    -> cl_device_id
 *   ADR_NATIVE_CONTEXT   -> cl_context
 *   ADR_NATIVE_QUEUE     -> cl_command_queue (the default stream's queue)
 *   ADR_OPENCL_NATIVE_ADDRESS_MODE -> enum adr_opencl_address_mode, as uintptr_t
 *   ADR_OPENCL_NATIVE_BUFFER       -> in/out; use adr_opencl_buffer() instead
 * All handles stay owned by adr (or by the application, for an adopted
 * device); retain them with clRetain* if they must outlive the device.
 *
 * Streams are in-order cl_command_queues (adr_stream_native returns the
 * cl_command_queue); events are cl_events (adr_event_native returns a
 * cl_event*, which is what ArrowDeviceArray.sync_event carries).
 */
#ifndef ADR_OPENCL_H
#define ADR_OPENCL_H

#include <stddef.h>
#include <stdint.h>

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
#include <CL/cl.h>

#include "adr/adr.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How the device's allocations are addressed (ADR_OPENCL_MEMORY selects). */
enum adr_opencl_address_mode {
  /* clSVMAlloc with CL_MEM_SVM_FINE_GRAIN_BUFFER: the address is a real
   * pointer the host may dereference (after the work on it completed) and
   * kernels take with clSetKernelArgSVMPointer. */
  ADR_OPENCL_ADDRESS_SVM_FINE = 1,
  /* clSVMAlloc, coarse-grained: a real device/host-shared address for
   * clSetKernelArgSVMPointer; the host must not dereference it. */
  ADR_OPENCL_ADDRESS_SVM_COARSE = 2,
  /* A cl_mem buffer per allocation; the address is taken from a reserved,
   * inaccessible range of the process's virtual memory and only means
   * something to adr. Kernels take the cl_mem plus the offset that
   * adr_opencl_buffer() returns (buffer, buffer_offset). */
  ADR_OPENCL_ADDRESS_BUFFER = 3,
};

/* adr_device_native kinds specific to OpenCL (beyond enum adr_native_kind). */
enum adr_opencl_native_kind {
  /* *out = (void*)(uintptr_t)enum adr_opencl_address_mode. */
  ADR_OPENCL_NATIVE_ADDRESS_MODE = 0x4f43,
  /* In/out, kept for older code: prefer adr_opencl_buffer(), which does the
   * same with types. *out must point to a struct adr_opencl_buffer whose
   * struct_size and address are set; on success it is filled as
   * adr_opencl_buffer() fills it and *out is left unchanged. (Also the
   * channel through which libadr asks the backend.) */
  ADR_OPENCL_NATIVE_BUFFER = 0x4f44,
};

/* What OpenCL code needs to use an adr address (any byte inside an
 * allocation): filled by adr_opencl_buffer(). */
struct adr_opencl_buffer {
  uint32_t struct_size; /* in: sizeof(struct adr_opencl_buffer) */
  uint32_t mode;        /* out: enum adr_opencl_address_mode */
  const void* address;  /* out: the address asked about (in, for the native kind) */
  /* out: the allocation `address` lies in, as the application made it
   * (adr_alloc's pointer and size, whatever the caching pool carved it
   * from), and address - base. */
  void* base;
  size_t size;
  size_t offset;
  /* out: the cl_mem holding the allocation in ADR_OPENCL_ADDRESS_BUFFER
   * mode (owned by adr, valid until adr_free), NULL in the SVM modes where
   * `address` itself goes to clSetKernelArgSVMPointer. */
  cl_mem buffer;
  /* out: byte offset of `address` inside `buffer`: what a kernel (or
   * clEnqueueCopyBuffer ...) takes beside the cl_mem. Under the caching
   * pool several allocations share one cl_mem, so this differs from
   * `offset`. In the SVM modes, the offset inside the SVM block that backs
   * the allocation (for information; `address` is what OpenCL takes). */
  uint64_t buffer_offset;
  uint64_t reserved[3];
};

/* Resolves `ptr`, any address inside a live allocation of `device` (an
 * ARROW_DEVICE_OPENCL device), to what OpenCL code needs: the caller sets
 * out->struct_size; on success every other field is written. Under any
 * allocator (ADR_ALLOC=pool or backend, adr_allocator_set) base and size
 * are the allocation adr_alloc returned, so one past its end is not inside
 * it.
 *
 * Errors: EINVAL for a NULL device, ptr or out, a struct_size smaller than
 * this struct's first layout, or a device that is not an OpenCL device;
 * ENOENT when ptr is not inside a live allocation of `device` (freed, one
 * past the end, another device's, host memory); ENOMEM when the core cannot
 * build its index of the device's allocations (the first call on a device
 * whose allocations are host-accessible builds it: O(n) once, after which
 * alloc/free keep it up to date at O(log n)); ESHUTDOWN after exit teardown.
 *
 * Ownership: the cl_mem stays owned by adr (clRetainMemObject it to keep
 * it beyond adr_free). Thread safety: any thread; a look-up takes the
 * device's index lock and the backend's table lock (shared); the answer is
 * stale once the allocation is freed. */
ADR_API int adr_opencl_buffer(struct adr_device* device, const void* ptr,
                              struct adr_opencl_buffer* out, struct adr_error* error);

/* Describes application-owned OpenCL objects for
 * adr_device_adopt(ARROW_DEVICE_OPENCL, &desc, ...). The context and queue
 * stay owned by the application (adr holds a reference while the device
 * lives) and the queue must be in-order and belong to the context. The
 * device defaults to the queue's device; the platform to the device's. */
struct adr_opencl_device_desc {
  uint32_t struct_size; /* sizeof(struct adr_opencl_device_desc) */
  uint32_t reserved32;
  cl_context context;     /* required */
  cl_command_queue queue; /* required: becomes the adr default stream */
  cl_device_id device;    /* optional (NULL = the queue's device) */
  uint64_t reserved[4];
};

#ifdef __cplusplus
}
#endif

#endif /* ADR_OPENCL_H */
