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

uint32_t adr__device_kind_default(ArrowDeviceType type) {
  switch (type) {
    case ARROW_DEVICE_CPU:
    case ARROW_DEVICE_CUDA_HOST:
    case ARROW_DEVICE_ROCM_HOST:
      return ADR_DEVICE_KIND_CPU;
    case ARROW_DEVICE_CUDA:
    case ARROW_DEVICE_CUDA_MANAGED:
    case ARROW_DEVICE_ROCM:
      return ADR_DEVICE_KIND_GPU;
    default:
      return ADR_DEVICE_KIND_OTHER;
  }
}

/* What a backend reported, made consistent: a kind it left out (or one
 * adr does not know) is the type's, unknown identity bits are dropped and
 * fields without their bit are zero. */
static void identity_normalize(struct adr_device_info* info, ArrowDeviceType type) {
  if (info->kind == ADR_DEVICE_KIND_UNKNOWN || info->kind > ADR_DEVICE_KIND_OTHER)
    info->kind = adr__device_kind_default(type);
  info->identity &= ADR_DEVICE_HAS_UUID | ADR_DEVICE_HAS_PCI_BUS_ID;
  if (!(info->identity & ADR_DEVICE_HAS_UUID)) memset(info->uuid, 0, sizeof(info->uuid));
  if (!(info->identity & ADR_DEVICE_HAS_PCI_BUS_ID)) {
    info->pci_domain = 0;
    info->pci_bus = info->pci_device = info->pci_function = 0;
  }
}

const char* adr_device_kind_name(int kind) {
  switch (kind) {
    case ADR_DEVICE_KIND_GPU:
      return "gpu";
    case ADR_DEVICE_KIND_INTEGRATED_GPU:
      return "integrated-gpu";
    case ADR_DEVICE_KIND_CPU:
      return "cpu";
    case ADR_DEVICE_KIND_ACCELERATOR:
      return "accelerator";
    case ADR_DEVICE_KIND_OTHER:
      return "other";
    default:
      return "unknown";
  }
}

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
  /* The identity is an enumeration fact: kept once, compared by selectors
   * and adr_device_same_physical without calling the backend again. */
  identity_normalize(&info, type);
  dev->kind = info.kind;
  dev->identity = info.identity;
  memcpy(dev->uuid, info.uuid, sizeof(dev->uuid));
  dev->pci_domain = info.pci_domain;
  dev->pci_bus = info.pci_bus;
  dev->pci_device = info.pci_device;
  dev->pci_function = info.pci_function;
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
  if (out->struct_size < ADR_DEVICE_INFO_MIN_SIZE)
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
  identity_normalize(&info, device->type);
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

int adr_device_same_physical(struct adr_device* a, struct adr_device* b, int* out_same,
                             struct adr_error* error) {
  if (a == NULL || b == NULL || out_same == NULL)
    return adr__errorf(error, EINVAL, "adr_device_same_physical", NULL, "%s is NULL",
                       a == NULL   ? "a"
                       : b == NULL ? "b"
                                   : "out_same");
  if (!adr__device_known(a) || !adr__device_known(b))
    return adr__errorf(error, EINVAL, "adr_device_same_physical", NULL,
                       "%s (%p) is not an adr device", adr__device_known(a) ? "b" : "a",
                       adr__device_known(a) ? (void*)b : (void*)a);
  /* The rule of docs/devices.md ("One identity per physical device"), in
   * order. The fields read are immutable once the device is published. */
  bool same;
  bool a_pci = (a->identity & ADR_DEVICE_HAS_PCI_BUS_ID) != 0;
  bool b_pci = (b->identity & ADR_DEVICE_HAS_PCI_BUS_ID) != 0;
  if (a == b)
    same = true;
  else if ((a->identity & b->identity & ADR_DEVICE_HAS_UUID) &&
           memcmp(a->uuid, b->uuid, sizeof(a->uuid)) == 0)
    same = true;
  else if (a_pci && b_pci)
    same = a->pci_domain == b->pci_domain && a->pci_bus == b->pci_bus &&
           a->pci_device == b->pci_device && a->pci_function == b->pci_function;
  else
    same = a->kind == ADR_DEVICE_KIND_CPU && b->kind == ADR_DEVICE_KIND_CPU && !a_pci && !b_pci;
  *out_same = same ? 1 : 0;
  return 0;
}
