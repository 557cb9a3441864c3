/* SPDX-License-Identifier: Apache-2.0
 *
 * The Vulkan backend's vtable and entry point. The slots live in
 * vulkan_instance.c (init, shutdown), vulkan_device.c (devices),
 * vulkan_memory.c, vulkan_copy.c and vulkan_sync.c.
 */
#include "vulkan_internal.h"

/* ---- the table ----------------------------------------------------------------- */

static const ArrowDeviceType vkb_types[] = {ARROW_DEVICE_VULKAN};

static const struct adr_backend vkb_backend = {
    .abi_major = ADR_BACKEND_ABI_MAJOR,
    .abi_minor = ADR_BACKEND_ABI_MINOR,
    .struct_size = sizeof(struct adr_backend),
    .name = VKB_NAME,
    .version = ADR_VERSION_STRING,
    .device_types = vkb_types,
    .device_type_count = 1,
    .init = vkb_init,
    .shutdown = vkb_shutdown,
    .device_count = vkb_device_count,
    .device_open = vkb_device_open,
    .device_close = vkb_device_close,
    .device_info = vkb_device_info,
    .alloc = vkb_alloc,
    .free = vkb_free,
    .copy = vkb_copy,
    .memset = vkb_memset,
    .copy_sync = vkb_copy_sync,
    .memset_sync = vkb_memset_sync,
    .stream_create = vkb_stream_create,
    .stream_destroy = vkb_stream_destroy,
    .stream_synchronize = vkb_stream_synchronize,
    .event_create = vkb_event_create,
    .event_destroy = vkb_event_destroy,
    .event_record = vkb_event_record,
    .event_wait = vkb_event_wait,
    .event_synchronize = vkb_event_synchronize,
    .event_query = vkb_event_query,
    .event_native = vkb_event_native,
    .event_import = vkb_event_import,
    .stream_import = vkb_stream_import,
    .stream_native = vkb_stream_native,
    .pointer_query = vkb_pointer_query,
    .device_native = vkb_device_native,
    .device_adopt = vkb_device_adopt,
    .device_properties = vkb_device_properties,
};

ADR_BACKEND_DEFINE_QUERY(vkb_backend, adr_host_set)
