/* SPDX-License-Identifier: Apache-2.0
 *
 * HIP backend: the plugin table and its one exported symbol.
 *
 * Thread safety: init/shutdown are serialised by the core; every other
 * slot may run concurrently. Device objects are immutable after open except
 * their staging-buffer list and overlap scratch, each behind its own mutex;
 * the backend's allocation map has its own lock; the HIP runtime itself is
 * thread-safe.
 */
#include <stddef.h>

#include "host.h"
#include "hip_internal.h"

static const ArrowDeviceType k_types[] = {ARROW_DEVICE_ROCM, ARROW_DEVICE_ROCM_HOST};

static const struct adr_backend k_hip_backend = {
    .abi_major = ADR_BACKEND_ABI_MAJOR,
    .abi_minor = ADR_BACKEND_ABI_MINOR,
    .struct_size = sizeof(struct adr_backend),
    .flags = 0,
    .name = HIP_BACKEND_NAME,
    .version = "0.1.0 (HIP runtime API, 5.x and 6.x)",
    .device_types = k_types,
    .device_type_count = sizeof(k_types) / sizeof(k_types[0]),
    .init = hip_init,
    .shutdown = hip_shutdown,
    .device_count = hip_device_count,
    .device_open = hip_device_open,
    .device_close = hip_device_close,
    .device_info = hip_device_info,
    .alloc = hip_alloc,
    .free = hip_free,
    .copy = hip_copy,
    .memset = hip_memset,
    .stream_create = hip_stream_create,
    .stream_destroy = hip_stream_destroy,
    .stream_synchronize = hip_stream_synchronize,
    .event_create = hip_event_create,
    .event_destroy = hip_event_destroy,
    .event_record = hip_event_record,
    .event_wait = hip_event_wait,
    .event_synchronize = hip_event_synchronize,
    .event_query = hip_event_query,
    .event_native = hip_event_native,
    .event_import = hip_event_import,
    .stream_import = hip_stream_import,
    .stream_native = hip_stream_native,
    .pointer_query = hip_pointer_query,
    .device_native = hip_device_native,
    .device_adopt = hip_device_adopt,
    .device_properties = hip_device_properties,
    .host_register = hip_host_register,
    .host_unregister = hip_host_unregister,
};

ADR_BACKEND_DEFINE_QUERY(k_hip_backend, adr_host_set)
