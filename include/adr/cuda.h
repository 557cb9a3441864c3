/* SPDX-License-Identifier: Apache-2.0
 *
 * adr CUDA interop: what an application needs to mix adr with its own CUDA
 * code (backends/cuda/README.md has the details). This header does not
 * include <cuda.h>; the types named below are the CUDA driver API's.
 *
 * Devices: ARROW_DEVICE_CUDA (device memory), ARROW_DEVICE_CUDA_HOST (pinned
 * host memory, cuMemHostAlloc portable) and ARROW_DEVICE_CUDA_MANAGED
 * (cuMemAllocManaged); id N of each is CUDA ordinal N (so
 * CUDA_VISIBLE_DEVICES applies) and uses that device's primary context,
 * which adr retains while the device lives.
 *
 * Native handles (adr_device_native), all owned by adr:
 *   ADR_NATIVE_DEVICE  -> CUdevice, as (void*)(intptr_t)ordinal
 *   ADR_NATIVE_CONTEXT -> CUcontext: the device's primary context (the one
 *                         the CUDA runtime uses, so cudart code interoperates)
 *   ADR_NATIVE_QUEUE   -> CUstream: adr's default stream for the device, a
 *                         non-blocking stream created by adr (not the legacy
 *                         NULL stream)
 *
 * Streams: adr_stream_native returns the CUstream (cudaStream_t);
 * adr_stream_import wraps an application CUstream of the same device.
 * Events: adr_event_native returns a CUevent* (= cudaEvent_t*), which is what
 * ArrowDeviceArray.sync_event carries; adr_event_import takes such a pointer.
 * Events are created with CU_EVENT_DISABLE_TIMING.
 *
 * Addresses: CUdeviceptr values (unified addressing), so pointer arithmetic
 * on ArrowArray buffers is valid and the addresses go straight to kernels.
 */
#ifndef ADR_CUDA_H
#define ADR_CUDA_H

#include "adr/adr.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The CUDA driver API version the backend pins its entry points to
 * (cuGetProcAddress); older drivers are reported unavailable. */
#define ADR_CUDA_API_VERSION 12000

/* Environment variables the backend reads (secure_getenv; docs in
 * backends/cuda/README.md). */
#define ADR_CUDA_ENV_DRIVER "ADR_CUDA_DRIVER"   /* path of libcuda.so.1 to load */
#define ADR_CUDA_ENV_STAGING "ADR_CUDA_STAGING" /* "off" or <threshold>[:<chunk>] */

#ifdef __cplusplus
}
#endif

#endif /* ADR_CUDA_H */
