/* SPDX-License-Identifier: Apache-2.0
 *
 * adr HIP/ROCm backend: interop types and constants.
 *
 * The HIP backend (libadr_hip.so) serves ARROW_DEVICE_ROCM (device memory)
 * and ARROW_DEVICE_ROCM_HOST (pinned host memory from hipHostMalloc). Device
 * ids are HIP ordinals as the runtime numbers them after HIP_VISIBLE_DEVICES
 * / ROCR_VISIBLE_DEVICES; rocm_host:N is pinned memory allocated with
 * ordinal N current and copied with N's streams.
 *
 * This header needs no HIP header: handles are passed as pointer-sized
 * values. What they are:
 *
 *   adr_device_native(dev, ADR_NATIVE_DEVICE, &p)  p = (void*)(intptr_t)hipDevice_t
 *   adr_device_native(dev, ADR_NATIVE_QUEUE, &p)   p = the device's default
 *                                                  hipStream_t (non-blocking,
 *                                                  owned by adr)
 *   adr_stream_native(stream)                      a hipStream_t
 *   adr_event_native(event), sync_event            a hipEvent_t* (pointer to
 *                                                  the handle, as the Arrow
 *                                                  C device interface says)
 *   adr_stream_import(dev, (void*)hip_stream, ...) wraps an application's
 *                                                  hipStream_t (not owned)
 *   adr_event_import(dev, &hip_event, ...)         wraps a hipEvent_t* (the
 *                                                  handle is read at import;
 *                                                  not owned)
 *
 * Other kinds (ADR_NATIVE_CONTEXT ...) are ENOTSUP: HIP has no context
 * object an application needs.
 */
#ifndef ADR_HIP_H
#define ADR_HIP_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Environment variable naming the HIP runtime library to load instead of
 * the default search (libamdhip64.so, then .so.6, then .so.5). Read with
 * secure_getenv. */
#define ADR_HIP_LIBRARY_ENV "ADR_HIP_LIBRARY"

/* Environment variable that turns off stream-ordered allocation
 * (hipMallocAsync/hipFreeAsync) when set to "1": allocations then use
 * hipMalloc/hipFree. */
#define ADR_HIP_NO_ASYNC_ALLOC_ENV "ADR_HIP_NO_ASYNC_ALLOC"

/* Environment variable tuning how copies between pageable host memory and
 * device memory are staged through two pinned buffers (so the host memcpy
 * of one chunk overlaps the transfer of the other): "off", or
 * "<threshold>[:<chunk>]" in bytes with optional K/M/G suffixes (chunk at
 * least 4K). Default 1M:4M: copies of 1 MiB or more are staged in 4 MiB
 * chunks. A malformed value makes the backend's init fail with EINVAL. */
#define ADR_HIP_STAGING_ENV "ADR_HIP_STAGING"

/* adr_device_adopt(ARROW_DEVICE_ROCM, &desc, ...): a device over HIP
 * ordinal `device` whose default stream is the application's `stream` (a
 * hipStream_t; NULL means adr creates a non-blocking stream of its own).
 * The stream stays owned by the application and must outlive the adr
 * device (which lives until process exit). Set struct_size to
 * sizeof(struct adr_hip_device_desc) and the reserved words to 0. */
struct adr_hip_device_desc {
  uint32_t struct_size;
  int32_t device; /* HIP ordinal */
  void* stream;   /* hipStream_t or NULL */
  uint64_t reserved[4];
};

#ifdef __cplusplus
}
#endif

#endif /* ADR_HIP_H */
