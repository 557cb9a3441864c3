/* SPDX-License-Identifier: Apache-2.0
 *
 * HIP backend: the plugin table and its one exported symbol.
 *
 * Serves ARROW_DEVICE_ROCM (device memory: hipMalloc / hipMallocAsync) and
 * ARROW_DEVICE_ROCM_HOST (pinned host memory: hipHostMalloc). See
 * backends/hip/README.md and include/adr/hip.h.
 */
#include <stddef.h>

#include "hip_internal.h"

static const ArrowDeviceType served_types[] = {ARROW_DEVICE_ROCM, ARROW_DEVICE_ROCM_HOST};

static const struct adr_backend hip_backend = {
    .abi_major = ADR_BACKEND_ABI_MAJOR,
    .abi_minor = ADR_BACKEND_ABI_MINOR,
    .struct_size = sizeof(struct adr_backend),
    .name = "hip",
    .version = ADR_VERSION_STRING,
    .device_types = served_types,
    .device_type_count = sizeof(served_types) / sizeof(served_types[0]),
    .init = adr_hip_init,
    .shutdown = adr_hip_shutdown,
    .device_count = adr_hip_device_count,
    .device_open = adr_hip_device_open,
    .device_close = adr_hip_device_close,
    .device_info = adr_hip_device_info,
    .alloc = adr_hip_alloc,
    .free = adr_hip_free,
    .copy = adr_hip_copy,
    .memset = adr_hip_memset,
    .stream_create = adr_hip_stream_create,
    .stream_destroy = adr_hip_stream_destroy,
    .stream_synchronize = adr_hip_stream_synchronize,
    .event_create = adr_hip_event_create,
    .event_destroy = adr_hip_event_destroy,
    .event_record = adr_hip_event_record,
    .event_wait = adr_hip_event_wait,
    .event_synchronize = adr_hip_event_synchronize,
    .event_query = adr_hip_event_query,
    .event_native = adr_hip_event_native,
    .event_import = adr_hip_event_import,
    .stream_import = adr_hip_stream_import,
    .stream_native = adr_hip_stream_native,
    .pointer_query = adr_hip_pointer_query,
    .device_native = adr_hip_device_native,
    .device_adopt = adr_hip_device_adopt,
    .device_properties = adr_hip_device_properties,
    .host_register = adr_hip_host_register,
    .host_unregister = adr_hip_host_unregister,
};

const struct adr_backend* adr_backend_query(uint32_t host_abi_major, uint32_t host_abi_minor,
                                            const struct adr_backend_host* host) {
  if (host_abi_major != ADR_BACKEND_ABI_MAJOR) return NULL;
  /* The host table may be older than ours: use only what it covers. */
  if (host != NULL && host->struct_size >= offsetof(struct adr_backend_host, reserved))
    adr_hip_rt.host = host;
  return &hip_backend;
}
