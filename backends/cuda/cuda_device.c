/* SPDX-License-Identifier: Apache-2.0
 *
 * CUDA backend: initialisation, devices, their description and native
 * handles, and pointer queries.
 *
 * Device id N of every served type is CUDA ordinal N (after
 * CUDA_VISIBLE_DEVICES), bound to that device's primary context, which each
 * open device retains (cuDevicePrimaryCtxRetain) and releases on close: the
 * same context the CUDA runtime and most libraries use, so memory, streams
 * and events are shared with them without context juggling.
 *
 * Lazy opening: init (cuInit, cuDeviceGetCount) and device_open
 * (cuDeviceGet, attributes) only enumerate, so adr-info and ADR_DEVICE
 * retain no context. cuda_device_open_native retains the primary context
 * and creates the default stream on the first call that needs them (the
 * wrappers in cuda_backend.c); open_lock is taken only then, double-checked
 * with `opened` (acquire/release).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"
#include "properties.h"

struct cuda_config cuda_config;
int cuda_devices;

#define MIB ((size_t)1 << 20)

int cuda_current_enter(struct adr_backend_device* dev, struct cuda_current_guard* guard,
                       struct adr_error* error) {
  CUcontext cur = NULL;
  guard->pushed = false;
  if (cuda_api.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == dev->ctx) return 0;
  CUresult r = cuda_api.cuCtxPushCurrent(dev->ctx);
  if (r != CUDA_SUCCESS)
    return cuda_check(r, error, "cannot make the primary context of CUDA device %d current",
                      dev->ordinal);
  guard->pushed = true;
  return 0;
}

void cuda_current_leave(struct cuda_current_guard* guard) {
  if (guard->pushed) {
    CUcontext popped = NULL;
    cuda_api.cuCtxPopCurrent(&popped);
    guard->pushed = false;
  }
}

/* ADR_CUDA_STAGING: "off", or "<threshold>[:<chunk>]" (byte counts with an
 * optional K, M or G suffix): pageable copies of at least <threshold> bytes
 * are staged through two pinned buffers of <chunk> bytes. Default 1M:4M. */
static int read_config(struct adr_error* error) {
  struct adr_error syntax = {{0}};
  if (adr_staging_config_parse(ADR_CUDA_ENV_STAGING, adr_host_getenv(ADR_CUDA_ENV_STAGING),
                               &cuda_config.staging, &syntax) != 0)
    return cuda_errorf(error, EINVAL, "%s", syntax.message);
  return 0;
}

int cuda_init(struct adr_error* error) {
  int st = adr_host_init(CUDA_BACKEND_NAME, error);
  if (st) return st;
  st = read_config(error);
  if (st) return st;
  st = cuda_library_load(error);
  if (st) return st;
  int n = 0;
  CUresult r = cuda_api.cuDeviceGetCount(&n);
  if (r != CUDA_SUCCESS) return cuda_check(r, error, "cuDeviceGetCount failed");
  if (n <= 0)
    return adr_backend_error_set(error, ENODEV,
                                 "unavailable: the CUDA driver at %s "
                                 "reports no device",
                                 cuda_api.path);
  cuda_devices = n;
  return 0;
}

void cuda_shutdown(void) {
  /* libcuda stays loaded: its own atexit work may still run after ours,
   * and the core keeps plugins loaded for the life of the process. */
  cuda_devices = 0;
}

static bool served(ArrowDeviceType type) {
  return type == ARROW_DEVICE_CUDA || type == ARROW_DEVICE_CUDA_HOST ||
         type == ARROW_DEVICE_CUDA_MANAGED;
}

int cuda_device_count(ArrowDeviceType type, int64_t* out, struct adr_error* error) {
  if (!served(type))
    return cuda_errorf(error, EINVAL, "device type %d is not served by this backend", (int)type);
  *out = cuda_devices;
  return 0;
}

int cuda_device_open(ArrowDeviceType type, int64_t id, struct adr_backend_device** out,
                     struct adr_error* error) {
  if (!served(type))
    return cuda_errorf(error, EINVAL, "device type %d is not served by this backend", (int)type);
  if (id < 0 || id >= cuda_devices)
    return cuda_errorf(error, ENODEV, "no CUDA device %" PRId64 " (%d visible)", id, cuda_devices);
  struct adr_backend_device* dev = calloc(1, sizeof(*dev));
  if (dev == NULL) return cuda_errorf(error, ENOMEM, "out of memory");
  dev->type = type;
  dev->ordinal = (int)id;
  adr_staging_init(&dev->staging, &cuda_staging_ops, &cuda_config.staging);
  pthread_mutex_init(&dev->scratch_lock, NULL);
  dev->aligned = (struct adr_range_map)ADR_RANGE_MAP_INIT(struct cuda_aligned);
  atomic_init(&dev->aligned_count, 0);
  pthread_mutex_init(&dev->open_lock, NULL);
  atomic_init(&dev->opened, false);
  CUresult r = cuda_api.cuDeviceGet(&dev->cuda_dev, dev->ordinal);
  if (r != CUDA_SUCCESS) {
    int st = cuda_check(r, error, "CUDA device %d: cuDeviceGet", dev->ordinal);
    pthread_mutex_destroy(&dev->open_lock);
    adr_staging_fini(&dev->staging);
    pthread_mutex_destroy(&dev->scratch_lock);
    free(dev);
    return st;
  }
  int v = 0;
  cuda_api.cuDeviceGetAttribute(&dev->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                dev->cuda_dev);
  cuda_api.cuDeviceGetAttribute(&dev->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                dev->cuda_dev);
  dev->mempools = cuda_api.cuMemAllocAsync != NULL && cuda_api.cuMemFreeAsync != NULL &&
                  cuda_api.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
                                                dev->cuda_dev) == CUDA_SUCCESS &&
                  v != 0;
  v = 0;
  dev->concurrent_managed =
      cuda_api.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS,
                                    dev->cuda_dev) == CUDA_SUCCESS &&
      v != 0;
  dev->default_stream.dev = dev;
  dev->default_stream.is_default = true;
  *out = dev;
  return 0;
}

int cuda_device_open_native(struct adr_backend_device* dev, struct adr_error* error) {
  pthread_mutex_lock(&dev->open_lock);
  if (!atomic_load_explicit(&dev->opened, memory_order_relaxed) && dev->open_status == 0) {
    struct adr_error e = {{0}};
    CUresult r = cuda_api.cuDevicePrimaryCtxRetain(&dev->ctx, dev->cuda_dev);
    int st = 0;
    if (r != CUDA_SUCCESS) {
      st = cuda_check(r, &e, "CUDA device %d: cannot retain the primary context", dev->ordinal);
    } else {
      struct cuda_current_guard g;
      st = cuda_current_enter(dev, &g, &e);
      if (st == 0) {
        r = cuda_api.cuStreamCreate(&dev->default_stream.stream, CU_STREAM_NON_BLOCKING);
        cuda_current_leave(&g);
        if (r != CUDA_SUCCESS)
          st = cuda_check(r, &e, "CUDA device %d: cannot create the default stream", dev->ordinal);
      }
      if (st != 0) {
        cuda_api.cuDevicePrimaryCtxRelease(dev->cuda_dev);
        dev->ctx = NULL;
      }
    }
    if (st == 0) {
      atomic_store_explicit(&dev->opened, true, memory_order_release);
      adr_host_log(ADR_LOG_INFO, "CUDA device %d: primary context retained on first use",
                   dev->ordinal);
    } else {
      dev->open_status = st;
      snprintf(dev->open_message, sizeof(dev->open_message), "%s", e.message);
    }
  }
  int st = atomic_load_explicit(&dev->opened, memory_order_relaxed) ? 0 : dev->open_status;
  if (st != 0 && error != NULL)
    snprintf(error->message, sizeof(error->message), "%s", dev->open_message);
  pthread_mutex_unlock(&dev->open_lock);
  return st;
}

void cuda_device_close(struct adr_backend_device* dev) {
  if (dev == NULL) return;
  bool opened = cuda_device_opened(dev);
  struct cuda_current_guard g;
  if (!opened) {
    adr_staging_fini(&dev->staging);
  } else if (cuda_current_enter(dev, &g, NULL) == 0) {
    cuda_api.cuStreamSynchronize(dev->default_stream.stream);
    cuda_api.cuStreamDestroy(dev->default_stream.stream);
    cuda_stream_scratch_free(&dev->default_stream);
    adr_staging_fini(&dev->staging);
    cuda_current_leave(&g);
  }
  adr_range_map_clear(&dev->aligned);
  if (opened) cuda_api.cuDevicePrimaryCtxRelease(dev->cuda_dev);
  pthread_mutex_destroy(&dev->scratch_lock);
  pthread_mutex_destroy(&dev->open_lock);
  free(dev);
}

/* Kind, UUID and PCI address from enumeration queries (no context). The
 * pinned-host type is host memory: the CPU kind, no GPU identity. A query
 * the driver refuses leaves its field out. */
static void cuda_device_identity(struct adr_backend_device* dev, struct adr_device_info* out) {
  if (dev->type == ARROW_DEVICE_CUDA_HOST) {
    out->kind = ADR_DEVICE_KIND_CPU;
    return;
  }
  int integrated = 0;
  if (cuda_api.cuDeviceGetAttribute(&integrated, CU_DEVICE_ATTRIBUTE_INTEGRATED, dev->cuda_dev) !=
      CUDA_SUCCESS)
    integrated = 0;
  out->kind = integrated ? ADR_DEVICE_KIND_INTEGRATED_GPU : ADR_DEVICE_KIND_GPU;
  CUuuid uuid;
  if (cuda_api.cuDeviceGetUuid(&uuid, dev->cuda_dev) == CUDA_SUCCESS) {
    memcpy(out->uuid, uuid.bytes, sizeof(out->uuid));
    out->identity |= ADR_DEVICE_HAS_UUID;
  }
  int domain = 0, bus = 0, device = 0;
  if (cuda_api.cuDeviceGetAttribute(&domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, dev->cuda_dev) ==
          CUDA_SUCCESS &&
      cuda_api.cuDeviceGetAttribute(&bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, dev->cuda_dev) ==
          CUDA_SUCCESS &&
      cuda_api.cuDeviceGetAttribute(&device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, dev->cuda_dev) ==
          CUDA_SUCCESS) {
    out->pci_domain = (uint32_t)domain;
    out->pci_bus = (uint8_t)bus;
    out->pci_device = (uint8_t)device;
    out->pci_function = 0; /* CUDA reports none: a GPU is function 0 */
    out->identity |= ADR_DEVICE_HAS_PCI_BUS_ID;
  }
}

int cuda_device_info(struct adr_backend_device* dev, struct adr_device_info* out,
                     struct adr_error* error) {
  char name[256] = "";
  CUresult r = cuda_api.cuDeviceGetName(name, (int)sizeof(name), dev->cuda_dev);
  if (r != CUDA_SUCCESS)
    return cuda_check(r, error, "CUDA device %d: cuDeviceGetName", dev->ordinal);
  const char* kind = dev->type == ARROW_DEVICE_CUDA_HOST      ? " (pinned host memory)"
                     : dev->type == ARROW_DEVICE_CUDA_MANAGED ? " (managed memory)"
                                                              : "";
  snprintf(out->name, sizeof(out->name), "%.200s%s", name, kind);
  snprintf(out->vendor, sizeof(out->vendor), "NVIDIA");
  snprintf(out->driver, sizeof(out->driver), "CUDA driver %d.%d", cuda_api.driver_version / 1000,
           (cuda_api.driver_version % 1000) / 10);
  size_t total = 0, free_bytes = 0;
  if (cuda_api.cuDeviceTotalMem(&total, dev->cuda_dev) == CUDA_SUCCESS) out->memory_total = total;
  struct cuda_current_guard g;
  /* The free figure needs a current context: only once the device is open. */
  if (cuda_device_opened(dev) && cuda_current_enter(dev, &g, NULL) == 0) {
    size_t t2 = 0;
    if (cuda_api.cuMemGetInfo(&free_bytes, &t2) == CUDA_SUCCESS) out->memory_free = free_bytes;
    cuda_current_leave(&g);
  }
  uint64_t caps = ADR_CAP_ASYNC_STREAMS | ADR_CAP_UNIFIED_ADDRESSING | ADR_CAP_IMPORT_NATIVE;
  if (cuda_devices > 1) caps |= ADR_CAP_PEER_COPY;
  switch (dev->type) {
    case ARROW_DEVICE_CUDA:
      caps |= ADR_CAP_DEVICE_ADDRESSES;
      if (dev->mempools) caps |= ADR_CAP_STREAM_ORDERED_ALLOC;
      out->alignment = 256;
      break;
    case ARROW_DEVICE_CUDA_MANAGED:
      caps |= ADR_CAP_DEVICE_ADDRESSES | ADR_CAP_HOST_ACCESSIBLE;
      out->alignment = 4096;
      break;
    default: /* CUDA_HOST: portable pinned memory, mapped for every device */
      caps |= ADR_CAP_HOST_ACCESSIBLE | ADR_CAP_DEVICE_ADDRESSES;
      out->alignment = 4096;
      break;
  }
  out->caps = caps;
  cuda_device_identity(dev, out);
  return 0;
}

int cuda_device_properties(struct adr_backend_device* dev, adr_property_fn emit, void* ctx,
                           struct adr_error* error) {
  char bus[32] = "";
  CUuuid uuid;
  size_t total = 0;
  int sms = 0;
  CUresult r = cuda_api.cuDeviceGetPCIBusId(bus, (int)sizeof(bus), dev->cuda_dev);
  if (r == CUDA_SUCCESS) r = cuda_api.cuDeviceGetUuid(&uuid, dev->cuda_dev);
  if (r == CUDA_SUCCESS) r = cuda_api.cuDeviceTotalMem(&total, dev->cuda_dev);
  if (r != CUDA_SUCCESS) return cuda_check(r, error, "CUDA device %d", dev->ordinal);
  const unsigned char* u = (const unsigned char*)uuid.bytes;
  adr_property_emitf(emit, ctx, "ordinal", "%d", dev->ordinal);
  adr_property_emitf(emit, ctx, "compute_capability", "%d.%d", dev->cc_major, dev->cc_minor);
  adr_property_emitf(emit, ctx, "pci_bus_id", "%s", bus);
  adr_property_emitf(emit, ctx, "uuid",
                     "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                     u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11],
                     u[12], u[13], u[14], u[15]);
  adr_property_emitf(emit, ctx, "memory_total", "%zu bytes (%.1f GiB)", total,
                     (double)total / (1024.0 * 1024.0 * 1024.0));
  if (cuda_api.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                    dev->cuda_dev) == CUDA_SUCCESS)
    adr_property_emitf(emit, ctx, "multiprocessors", "%d", sms);
  adr_property_emitf(emit, ctx, "driver_version", "%d.%d", cuda_api.driver_version / 1000,
                     (cuda_api.driver_version % 1000) / 10);
  adr_property_emitf(emit, ctx, "driver_library", "%s", cuda_api.path);
  adr_property_emitf(emit, ctx, "api_version_pinned", "%d", ADR_CUDA_API_VERSION);
  adr_property_emitf(emit, ctx, "memory", "%s",
                     dev->type == ARROW_DEVICE_CUDA_HOST      ? "cuMemHostAlloc (portable pinned)"
                     : dev->type == ARROW_DEVICE_CUDA_MANAGED ? "cuMemAllocManaged (global)"
                     : dev->mempools ? "cuMemAllocAsync (stream-ordered pool)"
                                     : "cuMemAlloc");
  adr_property_emitf(
      emit, ctx, "context", "%s",
      cuda_device_opened(dev) ? "primary (retained)" : "primary, not retained yet (on first use)");
  if (cuda_config.staging.threshold == 0)
    adr_property_emitf(emit, ctx, "pageable_staging", "off");
  else
    adr_property_emitf(emit, ctx, "pageable_staging",
                       "from %zu bytes, %zu-byte chunks, double-buffered, %u memcpy threads",
                       cuda_config.staging.threshold, cuda_config.staging.chunk,
                       adr_staging_threads(&cuda_config.staging));
  return 0;
}

int cuda_device_native(struct adr_backend_device* dev, int kind, void** out,
                       struct adr_error* error) {
  if (kind == ADR_NATIVE_CONTEXT || kind == ADR_NATIVE_QUEUE) {
    int st = cuda_device_ensure(dev, error);
    if (st != 0) return st;
  }
  switch (kind) {
    case ADR_NATIVE_DEVICE:
      *out = (void*)(intptr_t)dev->cuda_dev;
      return 0;
    case ADR_NATIVE_CONTEXT:
      *out = (void*)dev->ctx;
      return 0;
    case ADR_NATIVE_QUEUE:
      *out = (void*)dev->default_stream.stream;
      return 0;
    default:
      return cuda_errorf(error, ENOTSUP,
                         "native kind %d is not served (CUDA has ADR_NATIVE_DEVICE, "
                         "ADR_NATIVE_CONTEXT and ADR_NATIVE_QUEUE)",
                         kind);
  }
}
