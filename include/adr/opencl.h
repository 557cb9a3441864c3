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
 *   ADR_OPENCL_NATIVE_BUFFER       -> in/out: see struct adr_opencl_buffer
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
   * ADR_OPENCL_NATIVE_BUFFER returns. */
  ADR_OPENCL_ADDRESS_BUFFER = 3,
};

/* adr_device_native kinds specific to OpenCL (beyond enum adr_native_kind). */
enum adr_opencl_native_kind {
  /* *out = (void*)(uintptr_t)enum adr_opencl_address_mode. */
  ADR_OPENCL_NATIVE_ADDRESS_MODE = 0x4f43,
  /* In/out. *out must point to a struct adr_opencl_buffer whose struct_size
   * and address are set; on success the backend fills the other fields and
   * leaves *out unchanged. ENOENT when the address is not inside an
   * allocation of this device. */
  ADR_OPENCL_NATIVE_BUFFER = 0x4f44,
};

/* Resolves an adr address (any byte inside an allocation) to what OpenCL
 * code needs to use it. */
struct adr_opencl_buffer {
  uint32_t struct_size; /* in: sizeof(struct adr_opencl_buffer) */
  uint32_t mode;        /* out: enum adr_opencl_address_mode */
  const void* address;  /* in: the adr address */
  void* base;           /* out: address the allocation starts at */
  size_t size;          /* out: allocation size in bytes */
  size_t offset;        /* out: address - base */
  /* out: the cl_mem holding the allocation in ADR_OPENCL_ADDRESS_BUFFER
   * mode (owned by adr, valid until adr_free), NULL in the SVM modes where
   * `address` itself goes to clSetKernelArgSVMPointer. */
  cl_mem buffer;
  uint64_t reserved[4];
};

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
