/* SPDX-License-Identifier: Apache-2.0
 *
 * CUDA backend: the plugin table and its one exported symbol.
 *
 * Thread safety: init/shutdown are serialised by the core; every other
 * slot may run concurrently. Device objects are immutable after open except
 * their staging-buffer list and over-aligned allocation list, each behind
 * its own mutex; the CUDA driver itself is thread-safe.
 */
#include <stddef.h>

#include "host.h"
#include "cuda_internal.h"

static const ArrowDeviceType k_types[] = {ARROW_DEVICE_CUDA, ARROW_DEVICE_CUDA_HOST,
                                          ARROW_DEVICE_CUDA_MANAGED};

static const struct adr_backend k_cuda_backend = {
    .abi_major = ADR_BACKEND_ABI_MAJOR,
    .abi_minor = ADR_BACKEND_ABI_MINOR,
    .struct_size = sizeof(struct adr_backend),
    .flags = 0,
    .name = CUDA_BACKEND_NAME,
    .version = "0.1.0 (CUDA driver API, entry points pinned to 12.0)",
    .device_types = k_types,
    .device_type_count = sizeof(k_types) / sizeof(k_types[0]),
    .init = cuda_init,
    .shutdown = cuda_shutdown,
    .device_count = cuda_device_count,
    .device_open = cuda_device_open,
    .device_close = cuda_device_close,
    .device_info = cuda_device_info,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .copy = cuda_copy,
    .memset = cuda_memset,
    .stream_create = cuda_stream_create,
    .stream_destroy = cuda_stream_destroy,
    .stream_synchronize = cuda_stream_synchronize,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .event_wait = cuda_event_wait,
    .event_synchronize = cuda_event_synchronize,
    .event_query = cuda_event_query,
    .event_native = cuda_event_native,
    .event_import = cuda_event_import,
    .stream_import = cuda_stream_import,
    .stream_native = cuda_stream_native,
    .pointer_query = cuda_pointer_query,
    .device_native = cuda_device_native,
    .device_adopt = NULL, /* ENOTSUP: devices are the primary contexts */
    .device_properties = cuda_device_properties,
    .host_register = cuda_host_register,
    .host_unregister = cuda_host_unregister,
};

ADR_BACKEND_DEFINE_QUERY(k_cuda_backend, adr_host_set)
