/* SPDX-License-Identifier: Apache-2.0
 *
 * HIP backend: initialisation, devices, device description and native
 * handles.
 *
 * Device ids are HIP ordinals. The runtime applies HIP_VISIBLE_DEVICES /
 * ROCR_VISIBLE_DEVICES itself when it initialises, so ordinal 0 is the
 * first visible device, as users of those variables expect; the backend
 * does not filter again (it reports the variables in device_properties).
 *
 * Lazy opening: init and device_open only enumerate (hipGetDeviceCount,
 * hipDeviceGet, hipGetDeviceProperties), so adr-info and ADR_DEVICE create
 * no stream and enable no peer access. hip_device_open_native does both on
 * the first call that needs the device (the wrappers in hip_backend.c);
 * open_lock is taken only then, double-checked with `opened`
 * (acquire/release). An adopted device is open from the start.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hip_internal.h"
#include "properties.h"

/* Defined further down (open_device) or in the HIP-only part at the end. */
static void version_text(int v, char* buf, size_t cap);
static void mark_exiting(void);
static void enable_peers(struct adr_backend_device* dev);
static int open_device(ArrowDeviceType type, int64_t id, int ordinal, hipStream_t stream,
                       struct adr_backend_device** out, struct adr_error* error);

struct hip_config hip_config;
int hip_devices;
static _Atomic bool g_exiting;

int hip_current_enter(struct adr_backend_device* dev, struct hip_current_guard* guard,
                      struct adr_error* error) {
  int cur = -1;
  guard->switched = false;
  if (hip_api.hipGetDevice(&cur) == hipSuccess && cur == dev->ordinal) return 0;
  hipError_t r = hip_api.hipSetDevice(dev->ordinal);
  if (r != hipSuccess)
    return hip_check(r, error, "cannot make HIP device %d current", dev->ordinal);
  guard->previous = cur;
  guard->switched = true;
  return 0;
}

void hip_current_leave(struct hip_current_guard* guard) {
  if (guard->switched) {
    if (guard->previous >= 0) hip_api.hipSetDevice(guard->previous);
    guard->switched = false;
  }
}

/* ADR_HIP_STAGING: "off", or "<threshold>[:<chunk>]" (byte counts with an
 * optional K, M or G suffix): pageable copies of at least <threshold> bytes
 * are staged through two pinned buffers of <chunk> bytes. Default 1M:4M.
 * ADR_HIP_NO_ASYNC_ALLOC=1: hipMalloc even where hipMallocAsync works. */
static int read_config(struct adr_error* error) {
  struct adr_error syntax = {{0}};
  if (adr_staging_config_parse(ADR_HIP_STAGING_ENV, adr_host_getenv(ADR_HIP_STAGING_ENV),
                               &hip_config.staging, &syntax) != 0)
    return hip_errorf(error, EINVAL, "%s", syntax.message);
  const char* no_async = adr_host_getenv(ADR_HIP_NO_ASYNC_ALLOC_ENV);
  hip_config.async_alloc_disabled = no_async != NULL && strcmp(no_async, "1") == 0;
  return 0;
}

int hip_init(struct adr_error* error) {
  int st = adr_host_init(HIP_BACKEND_NAME, error);
  if (st) return st;
  st = read_config(error);
  if (st) return st;
  st = hip_library_load(error);
  if (st) return st;
  hipError_t init_err = hip_api.hipInit(0);
  int n = 0;
  hipError_t r = hip_api.hipGetDeviceCount(&n);
  char version[32];
  version_text(hip_api.runtime_version, version, sizeof(version));
  /* The AMD runtime answers hipInit with hipErrorInvalidDevice when there
   * is no GPU and hipGetDeviceCount with hipErrorNoDevice; the count's
   * error is the one that says what is wrong, so it leads the message.
   * Only the absence of devices is "unavailable" (ENODEV); a runtime that
   * fails otherwise is rejected with its own status. */
  if (r != hipSuccess || n <= 0)
    return hip_check(r != hipSuccess ? r : hipErrorNoDevice, error,
                     "hipGetDeviceCount %s; hipInit returned %s; %s, HIP runtime %s",
                     r != hipSuccess ? "failed" : "returned 0 devices", hip_error_name(init_err),
                     hip_api.path, version);
  if (init_err != hipSuccess)
    return hip_check(init_err, error, "hipInit; %s, HIP runtime %s", hip_api.path, version);
  hip_devices = n;
  /* The runtime registered its exit-time teardown while it loaded; a
   * handler registered now runs before it (exit handlers run in reverse). */
  if (atexit(mark_exiting) != 0)
    return hip_errorf(error, ENOMEM, "cannot register the exit handler (atexit)");
  adr_host_log(ADR_LOG_INFO, "HIP runtime %s from %s: %d device%s", version, hip_api.path, n,
               n == 1 ? "" : "s");
  return 0;
}

void hip_shutdown(void) {
  hip_memory_shutdown();
}

static bool served(ArrowDeviceType type) {
  return type == ARROW_DEVICE_ROCM || type == ARROW_DEVICE_ROCM_HOST;
}

int hip_device_count(ArrowDeviceType type, int64_t* out, struct adr_error* error) {
  if (!served(type))
    return hip_errorf(error, EINVAL, "device type %d is not served by this backend", (int)type);
  *out = hip_devices;
  return 0;
}

int hip_device_open(ArrowDeviceType type, int64_t id, struct adr_backend_device** out,
                    struct adr_error* error) {
  if (!served(type))
    return hip_errorf(error, EINVAL, "device type %d is not served by this backend", (int)type);
  if (id < 0 || id >= hip_devices)
    return hip_errorf(error, ENODEV, "no HIP device %" PRId64 " (%d visible)", id, hip_devices);
  return open_device(type, id, (int)id, NULL, out, error);
}

/* Opens ordinal `ordinal` as adr device `id`; its default stream is
 * `stream` (the application's, adopted) or a new one. */
static int open_device(ArrowDeviceType type, int64_t id, int ordinal, hipStream_t stream,
                       struct adr_backend_device** out, struct adr_error* error) {
  struct adr_backend_device* dev = calloc(1, sizeof(*dev));
  if (dev == NULL) return hip_errorf(error, ENOMEM, "out of memory");
  dev->type = type;
  dev->ordinal = ordinal;
  dev->id = id;
  adr_staging_init(&dev->staging, &hip_staging_ops, &hip_config.staging);
  pthread_mutex_init(&dev->scratch_lock, NULL);
  hipError_t r = hip_api.hipDeviceGet(&dev->hip_dev, dev->ordinal);
  if (r == hipSuccess) r = hip_api.hipGetDeviceProperties(&dev->props, dev->ordinal);
  if (r != hipSuccess) {
    int st = hip_check(r, error, "HIP device %d: cannot read its properties", dev->ordinal);
    adr_staging_fini(&dev->staging);
    pthread_mutex_destroy(&dev->scratch_lock);
    free(dev);
    return st;
  }
  dev->props.name[sizeof(dev->props.name) - 1] = '\0';
  dev->props.gcnArchName[sizeof(dev->props.gcnArchName) - 1] = '\0';
  hipMemPool_t pool = NULL;
  dev->async_alloc = type == ARROW_DEVICE_ROCM && !hip_config.async_alloc_disabled &&
                     hip_api.hipMallocAsync != NULL && hip_api.hipFreeAsync != NULL &&
                     hip_api.hipDeviceGetDefaultMemPool != NULL &&
                     hip_api.hipDeviceGetDefaultMemPool(&pool, dev->ordinal) == hipSuccess;
  dev->default_stream.dev = dev;
  dev->default_stream.is_default = true;
  dev->default_stream.stream = stream;
  dev->default_stream.imported = stream != NULL;
  pthread_mutex_init(&dev->open_lock, NULL);
  atomic_init(&dev->opened, false);
  if (stream != NULL) {
    /* Adopted: the application's stream; open now. */
    int st = hip_device_open_native(dev, error);
    if (st) {
      adr_staging_fini(&dev->staging);
      pthread_mutex_destroy(&dev->scratch_lock);
      pthread_mutex_destroy(&dev->open_lock);
      free(dev);
      return st;
    }
  }
  *out = dev;
  return 0;
}

int hip_device_open_native(struct adr_backend_device* dev, struct adr_error* error) {
  pthread_mutex_lock(&dev->open_lock);
  if (!atomic_load_explicit(&dev->opened, memory_order_relaxed) && dev->open_status == 0) {
    struct adr_error e = {{0}};
    struct hip_current_guard g;
    int st = hip_current_enter(dev, &g, &e);
    if (st == 0) {
      if (dev->type == ARROW_DEVICE_ROCM) enable_peers(dev);
      hipError_t r =
          dev->default_stream.stream != NULL
              ? hipSuccess
              : hip_api.hipStreamCreateWithFlags(&dev->default_stream.stream, hipStreamNonBlocking);
      hip_current_leave(&g);
      st = hip_check(r, &e, "HIP device %d: cannot create the default stream", dev->ordinal);
    }
    if (st == 0) {
      atomic_store_explicit(&dev->opened, true, memory_order_release);
      adr_host_log(ADR_LOG_INFO, "HIP device %d: default stream created on first use",
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

void hip_device_close(struct adr_backend_device* dev) {
  if (dev == NULL) return;
  struct hip_current_guard g;
  bool live = hip_device_opened(dev) && !hip_exiting() && hip_current_enter(dev, &g, NULL) == 0;
  adr_staging_fini(&dev->staging);
  pthread_mutex_destroy(&dev->scratch_lock);
  if (live && dev->default_stream.stream != NULL && !dev->default_stream.imported) {
    hip_api.hipStreamSynchronize(dev->default_stream.stream);
    hip_api.hipStreamDestroy(dev->default_stream.stream);
  }
  if (live) {
    hip_stream_scratch_free(&dev->default_stream);
    hip_current_leave(&g);
  }
  pthread_mutex_destroy(&dev->open_lock);
  free(dev);
}

static void copy_text(char* dst, size_t cap, const char* src) {
  snprintf(dst, cap, "%s", src);
}

/* Kind, UUID and PCI address from enumeration queries (no stream). The
 * pinned-host type is host memory: the CPU kind, no GPU identity. A query
 * the runtime refuses (or lacks: hipDeviceGetUuid is optional) leaves its
 * field out. */
static void hip_device_identity(struct adr_backend_device* dev, struct adr_device_info* out) {
  if (dev->type == ARROW_DEVICE_ROCM_HOST) {
    out->kind = ADR_DEVICE_KIND_CPU;
    return;
  }
  out->kind = dev->props.integrated ? ADR_DEVICE_KIND_INTEGRATED_GPU : ADR_DEVICE_KIND_GPU;
  hipUUID uuid;
  if (hip_api.hipDeviceGetUuid != NULL &&
      hip_api.hipDeviceGetUuid(&uuid, dev->hip_dev) == hipSuccess) {
    memcpy(out->uuid, uuid.bytes, sizeof(out->uuid));
    out->identity |= ADR_DEVICE_HAS_UUID;
  }
  out->pci_domain = (uint32_t)dev->props.pciDomainID;
  out->pci_bus = (uint8_t)dev->props.pciBusID;
  out->pci_device = (uint8_t)dev->props.pciDeviceID;
  out->pci_function = 0; /* HIP reports none: a GPU is function 0 */
  out->identity |= ADR_DEVICE_HAS_PCI_BUS_ID;
}

int hip_device_info(struct adr_backend_device* dev, struct adr_device_info* out,
                    struct adr_error* error) {
  char version[32];
  version_text(hip_api.runtime_version, version, sizeof(version));
  if (dev->type == ARROW_DEVICE_ROCM) {
    copy_text(out->name, sizeof(out->name), dev->props.name);
  } else {
    snprintf(out->name, sizeof(out->name), "%.200s (pinned host memory)", dev->props.name);
  }
  copy_text(out->vendor, sizeof(out->vendor), "AMD");
  copy_text(out->backend, sizeof(out->backend), "hip");
  snprintf(out->driver, sizeof(out->driver), "HIP runtime %s (%.80s)", version, hip_api.path);
  uint64_t caps = ADR_CAP_ASYNC_STREAMS | ADR_CAP_UNIFIED_ADDRESSING | ADR_CAP_IMPORT_NATIVE;
  if (dev->type == ARROW_DEVICE_ROCM) {
    caps |= ADR_CAP_DEVICE_ADDRESSES;
    if (dev->async_alloc) caps |= ADR_CAP_STREAM_ORDERED_ALLOC;
    if (hip_devices > 1) caps |= ADR_CAP_PEER_COPY;
    out->memory_total = dev->props.totalGlobalMem;
    size_t free_bytes = 0, total_bytes = 0;
    struct hip_current_guard g;
    /* The free figure needs the device current: only once it is open. */
    if (hip_device_opened(dev) && hip_current_enter(dev, &g, NULL) == 0) {
      if (hip_api.hipMemGetInfo(&free_bytes, &total_bytes) == hipSuccess) {
        out->memory_free = free_bytes;
        if (total_bytes != 0) out->memory_total = total_bytes;
      }
      hip_current_leave(&g);
    }
    out->alignment = 256;
  } else {
    caps |= ADR_CAP_HOST_ACCESSIBLE;
    out->alignment = 4096;
  }
  out->caps = caps;
  hip_device_identity(dev, out);
  return 0;
}

int hip_device_properties(struct adr_backend_device* dev, adr_property_fn emit, void* ctx,
                          struct adr_error* error) {
  const hip_props_t* p = &dev->props;
  char buf[512];
  emit(ctx, "name", p->name);
  emit(ctx, "gcnArch", p->gcnArchName[0] ? p->gcnArchName : "unknown");
  snprintf(buf, sizeof(buf), "%04x:%02x:%02x.0", (unsigned)p->pciDomainID, (unsigned)p->pciBusID,
           (unsigned)p->pciDeviceID);
  emit(ctx, "pci_bus_id", buf);
  adr_property_emitf(emit, ctx, "ordinal", "%lld", (long long)dev->ordinal);
  snprintf(buf, sizeof(buf), "%llu MiB", (unsigned long long)(p->totalGlobalMem >> 20));
  emit(ctx, "global_memory", buf);
  adr_property_emitf(emit, ctx, "compute_units", "%lld", (long long)p->multiProcessorCount);
  adr_property_emitf(emit, ctx, "clock_khz", "%lld", (long long)p->clockRate);
  adr_property_emitf(emit, ctx, "memory_clock_khz", "%lld", (long long)p->memoryClockRate);
  adr_property_emitf(emit, ctx, "memory_bus_width", "%lld", (long long)p->memoryBusWidth);
  adr_property_emitf(emit, ctx, "l2_cache_bytes", "%lld", (long long)p->l2CacheSize);
  snprintf(buf, sizeof(buf), "%d.%d", p->major, p->minor);
  emit(ctx, "compute_capability", buf);
  emit(ctx, "managed_memory", p->managedMemory ? "yes" : "no");
  emit(ctx, "can_map_host_memory", p->canMapHostMemory ? "yes" : "no");
  if (hip_config.staging.threshold == 0)
    snprintf(buf, sizeof(buf), "off");
  else
    snprintf(buf, sizeof(buf), "pageable copies >= %zu KiB, 2 x %zu KiB pinned, %u memcpy threads",
             hip_config.staging.threshold >> 10, hip_config.staging.chunk >> 10,
             adr_staging_threads(&hip_config.staging));
  emit(ctx, "pageable_staging", buf);
  emit(ctx, "stream_ordered_alloc", dev->async_alloc ? "hipMallocAsync" : "no (hipMalloc/hipFree)");
  buf[0] = '\0';
  for (int q = 0; q < hip_devices; q++) {
    int can = 0;
    if (q == dev->ordinal || hip_api.hipDeviceCanAccessPeer(&can, dev->ordinal, q) != hipSuccess ||
        !can)
      continue;
    size_t len = strlen(buf);
    snprintf(buf + len, sizeof(buf) - len, "%s%d", len ? "," : "", q);
  }
  emit(ctx, "peer_access", buf[0] ? buf : "none");
  char version[32];
  version_text(hip_api.runtime_version, version, sizeof(version));
  emit(ctx, "runtime_version", version);
  version_text(hip_api.driver_version, version, sizeof(version));
  emit(ctx, "driver_version", version);
  emit(ctx, "library", hip_api.path);
  const char* vars[] = {"HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"};
  for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
    const char* v = adr_host_getenv(vars[i]);
    if (v != NULL) emit(ctx, vars[i], v);
  }
  if (dev->adopted) emit(ctx, "adopted", "yes");
  emit(ctx, "default_stream",
       hip_device_opened(dev) ? "created" : "not created yet (made on first use)");
  return 0;
}

int hip_device_native(struct adr_backend_device* dev, int kind, void** out,
                      struct adr_error* error) {
  if (kind == ADR_NATIVE_QUEUE) {
    int st = hip_device_ensure(dev, error);
    if (st != 0) return st;
  }
  switch (kind) {
    case ADR_NATIVE_DEVICE:
      *out = (void*)(intptr_t)dev->hip_dev;
      return 0;
    case ADR_NATIVE_QUEUE:
      *out = (void*)dev->default_stream.stream;
      return 0;
    default:
      return hip_errorf(error, ENOTSUP,
                        "native kind %d is not served (HIP has "
                        "ADR_NATIVE_DEVICE and ADR_NATIVE_QUEUE)",
                        kind);
  }
}

/* ---- HIP only: runtime version text, exit detection, peer access, device
 * adoption (CUDA has none of these) --------------------------------------- */

static void version_text(int v, char* buf, size_t cap) {
  if (v <= 0) {
    snprintf(buf, cap, "unknown");
    return;
  }
  snprintf(buf, cap, "%d.%d.%d", v / 10000000, (v / 100000) % 100, v % 100000);
}

bool hip_exiting(void) {
  return atomic_load_explicit(&g_exiting, memory_order_acquire);
}

static void mark_exiting(void) {
  atomic_store_explicit(&g_exiting, true, memory_order_release);
}

/* Makes every peer this device can reach directly accessible, so peer
 * copies go over the fabric instead of being staged by the runtime. */
static void enable_peers(struct adr_backend_device* dev) {
  if (hip_api.hipDeviceEnablePeerAccess == NULL) return;
  for (int p = 0; p < hip_devices; p++) {
    if (p == dev->ordinal) continue;
    int can = 0;
    if (hip_api.hipDeviceCanAccessPeer(&can, dev->ordinal, p) != hipSuccess || !can) continue;
    hipError_t e = hip_api.hipDeviceEnablePeerAccess(p, 0);
    if (e != hipSuccess && e != hipErrorPeerAccessAlreadyEnabled)
      adr_host_log(ADR_LOG_WARN, "hipDeviceEnablePeerAccess(%d -> %d): %s", dev->ordinal, p,
                   hip_error_name(e));
  }
}

int hip_device_adopt(ArrowDeviceType type, int64_t id, const void* native_desc,
                     struct adr_backend_device** out, struct adr_error* error) {
  const struct adr_hip_device_desc* desc = native_desc;
  if (!served(type))
    return hip_errorf(error, EINVAL, "device type %d is not served by this backend", (int)type);
  if (desc == NULL)
    return hip_errorf(error, EINVAL,
                      "native_desc is NULL (expected a struct "
                      "adr_hip_device_desc)");
  if (desc->struct_size < sizeof(struct adr_hip_device_desc))
    return hip_errorf(error, EINVAL,
                      "struct_size %u is smaller than struct "
                      "adr_hip_device_desc (%zu bytes)",
                      desc->struct_size, sizeof(struct adr_hip_device_desc));
  for (size_t i = 0; i < sizeof(desc->reserved) / sizeof(desc->reserved[0]); i++)
    if (desc->reserved[i] != 0) return hip_errorf(error, EINVAL, "reserved[%zu] is not 0", i);
  if (desc->device < 0 || desc->device >= hip_devices)
    return hip_errorf(error, ENODEV,
                      "no HIP device %d (%d "
                      "visible)",
                      (int)desc->device, hip_devices);
  struct adr_backend_device* dev = NULL;
  int st = open_device(type, id, desc->device, (hipStream_t)desc->stream, &dev, error);
  if (st != 0) return st;
  dev->adopted = true;
  *out = dev;
  return 0;
}
