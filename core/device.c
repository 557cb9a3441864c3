/* SPDX-License-Identifier: Apache-2.0
 *
 * Device objects: wrapping a device the backend opened (or adopted) into a
 * struct adr_device with its default stream and memory state, releasing its
 * native objects at process exit, and the public calls about one device
 * (type, id, name, info, native handles, properties).
 *
 * Which devices exist, and the lookups that create them (adr_device_get,
 * adr_device_default, adr_device_adopt, the enumeration), belong to the
 * registry (registry.c), under its lock; the public calls here take no lock
 * and read only fields that are immutable once the device is published.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"

int adr__device_create(struct adr__backend* b, const char* api, ArrowDeviceType type, int64_t id,
                       struct adr_backend_device* handle, struct adr_device** out,
                       struct adr_error* error) {
  const char* tname = adr_device_type_name(type);
  struct adr_device* dev = calloc(1, sizeof(*dev));
  struct adr__alloc_table* table = adr__alloc_table_create();
  /* Without memory for the device, a stand-in on the stack carries what
   * closing the backend's device needs. */
  struct adr_device stand_in;
  struct adr_device* d = dev;
  if (d == NULL) {
    memset(&stand_in, 0, sizeof(stand_in));
    d = &stand_in;
  }
  d->vt = b->vt;
  d->handle = handle;
  d->backend = b;
  d->type = type;
  d->id = id;
  snprintf(d->name, sizeof(d->name), "%.24s:%lld", tname ? tname : b->name, (long long)id);
  struct adr_backend_stream* stream = NULL;
  int st;
  if (dev == NULL || table == NULL)
    st = adr__errorf(error, ENOMEM, api, b->name, "out of memory");
  else
    st = adr__dispatch_stream_create(dev, api, ADR_BACKEND_STREAM_DEFAULT, &stream, error);
  if (st) {
    adr__dispatch_device_close(d);
    free(dev);
    if (table) adr__alloc_table_destroy(table);
    return st;
  }
  dev->allocs = table;
  dev->default_stream.device = dev;
  dev->default_stream.handle = stream;
  dev->default_stream.flags = ADR__STREAM_DEFAULT;

  struct adr_device_info info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  if (adr__dispatch_device_info(dev, api, &info, NULL) == 0)
    dev->host_accessible = (info.caps & ADR_CAP_HOST_ACCESSIBLE) != 0;
  adr__memory_device_init(dev);
  *out = dev;
  return 0;
}

void adr__device_release(struct adr_device* dev) {
  adr__memory_device_teardown(dev);
  /* The default stream goes with the device: device_close releases it
   * (the teardown contract in adr/backend.h). */
  adr__dispatch_device_close(dev);
}

ArrowDeviceType adr_device_type(const struct adr_device* device) {
  return device ? device->type : 0;
}

int64_t adr_device_id(const struct adr_device* device) {
  return device ? device->id : -1;
}

const char* adr_device_name(const struct adr_device* device) {
  return device ? device->name : "(null)";
}

int adr_device_info_get(struct adr_device* device, struct adr_device_info* out,
                        struct adr_error* error) {
  if (device == NULL || out == NULL)
    return adr__errorf(error, EINVAL, "adr_device_info_get", NULL, "%s is NULL",
                       device ? "out" : "device");
  if (out->struct_size < offsetof(struct adr_device_info, reserved))
    return adr__errorf(error, EINVAL, "adr_device_info_get", NULL,
                       "out->struct_size %u is too small (set it to sizeof(struct "
                       "adr_device_info))",
                       out->struct_size);
  /* Fill a full-size copy and hand back what the caller's struct holds, so
   * a backend never writes past an older caller's struct. */
  struct adr_device_info info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  info.device_type = device->type;
  info.device_id = device->id;
  info.alignment = ADR_MIN_ALIGNMENT;
  snprintf(info.backend, sizeof(info.backend), "%.31s", device->backend->name);
  int st = adr__dispatch_device_info(device, "adr_device_info_get", &info, error);
  if (st) return st;
  uint32_t size = out->struct_size < sizeof(info) ? out->struct_size : (uint32_t)sizeof(info);
  memcpy(out, &info, size);
  out->struct_size = size;
  return 0;
}

int adr_device_native(struct adr_device* device, int kind, void** out, struct adr_error* error) {
  if (device == NULL || out == NULL)
    return adr__errorf(error, EINVAL, "adr_device_native", NULL, "%s is NULL",
                       device ? "out" : "device");
  if (adr__device_native_intercepted(device, kind))
    return adr__device_native_interop(device, kind, out, error);
  return adr__dispatch_device_native(device, "adr_device_native", kind, out, error);
}

int adr_device_properties(struct adr_device* device, adr_property_fn emit, void* ctx,
                          struct adr_error* error) {
  if (device == NULL || emit == NULL)
    return adr__errorf(error, EINVAL, "adr_device_properties", NULL, "%s is NULL",
                       device ? "emit" : "device");
  return adr__dispatch_device_properties(device, "adr_device_properties", emit, ctx, error);
}
