/* SPDX-License-Identifier: Apache-2.0
 *
 * Device enumeration, open/close/adopt, info, properties and native handles.
 *
 * Device ids: init lists every device of every platform, platforms in the
 * order clGetPlatformIDs returns them and, within a platform, devices in the
 * order clGetDeviceIDs(CL_DEVICE_TYPE_ALL) returns them. That order comes
 * from the ICD loader's vendor files and the drivers, so ids are stable for
 * a given installation (OCL_ICD_VENDORS pins the platform). Adopted
 * devices get ids after these (the core assigns them).
 *
 * Each opened device owns one cl_context over its single cl_device_id and
 * one in-order cl_command_queue, its default stream.
 *
 * Lazy opening: init enumerates (clGetPlatformIDs, clGetDeviceIDs) and
 * device_open reads only clGetDeviceInfo, so listing devices and their
 * properties (adr-info, ADR_DEVICE) creates no context. The context and the
 * default queue are made by ocl_device_open_native on the first call that
 * needs them (alloc, copy, memset, a stream or event, a native context or
 * queue); the vtable's wrappers in opencl_backend.c call it. Locking:
 * open_lock is taken only on that first use (double-checked with the
 * `opened` flag, acquire/release); afterwards the check is one load.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opencl_internal.h"

/* cl_khr_device_uuid and cl_khr_pci_bus_info, spelled here so the backend
 * builds with headers older than the extensions (values from the
 * registry; the extension is checked at run time). */
#ifndef CL_DEVICE_UUID_KHR
#define CL_DEVICE_UUID_KHR 0x106A
#endif
#ifndef CL_DEVICE_PCI_BUS_INFO_KHR
#define CL_DEVICE_PCI_BUS_INFO_KHR 0x410F
#endif

#ifndef CL_PLATFORM_NOT_FOUND_KHR
#define CL_PLATFORM_NOT_FOUND_KHR -1001
#endif

/* Written once by init, read-only afterwards. */
static struct ocl_device_entry* entries;
static int64_t entry_count;

int ocl_devices_enumerate(struct adr_error* error) {
  cl_uint platform_count = 0;
  cl_int rc = ocl.clGetPlatformIDs(0, NULL, &platform_count);
  if (rc == CL_PLATFORM_NOT_FOUND_KHR || (rc == CL_SUCCESS && platform_count == 0))
    return adr_backend_error_set(error, ENODEV,
                                 "unavailable: the ICD loader found no "
                                 "OpenCL platform (%s; see /etc/OpenCL/vendors and "
                                 "OCL_ICD_VENDORS)",
                                 rc == CL_SUCCESS ? "0 platforms" : ocl_error_name(rc));
  if (rc != CL_SUCCESS) return ocl_check(rc, error, "clGetPlatformIDs failed");
  cl_platform_id* platforms = calloc(platform_count, sizeof(*platforms));
  if (platforms == NULL) return ocl_errorf(error, ENOMEM, "out of host memory");
  rc = ocl.clGetPlatformIDs(platform_count, platforms, NULL);
  if (rc != CL_SUCCESS) {
    free(platforms);
    return ocl_check(rc, error, "clGetPlatformIDs failed");
  }
  struct ocl_device_entry* list = NULL;
  int64_t count = 0;
  for (cl_uint p = 0; p < platform_count; p++) {
    cl_uint n = 0;
    rc = ocl.clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, 0, NULL, &n);
    if (rc == CL_DEVICE_NOT_FOUND || n == 0) continue;
    if (rc != CL_SUCCESS) {
      adr_host_log(ADR_LOG_WARN, "platform %u: clGetDeviceIDs failed with %s; skipped", p,
                   ocl_error_name(rc));
      continue;
    }
    cl_device_id* ids = calloc(n, sizeof(*ids));
    struct ocl_device_entry* grown = realloc(list, (size_t)(count + n) * sizeof(*list));
    if (ids == NULL || grown == NULL) {
      free(ids);
      free(grown != NULL ? grown : list);
      free(platforms);
      return ocl_errorf(error, ENOMEM, "out of host memory");
    }
    list = grown;
    rc = ocl.clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, n, ids, NULL);
    if (rc != CL_SUCCESS) n = 0;
    ocl_handle_learn(platforms[p]);
    for (cl_uint d = 0; d < n; d++) {
      ocl_handle_learn(ids[d]);
      list[count].platform = platforms[p];
      list[count].device = ids[d];
      list[count].platform_index = (int)p;
      list[count].device_index = (int)d;
      count++;
    }
    free(ids);
  }
  free(platforms);
  if (count == 0) {
    free(list);
    return adr_backend_error_set(error, ENODEV,
                                 "unavailable: %u OpenCL platform(s) but "
                                 "no device",
                                 platform_count);
  }
  entries = list;
  entry_count = count;
  return 0;
}

void ocl_devices_release(void) {
  free(entries);
  entries = NULL;
  entry_count = 0;
}

int64_t ocl_devices_count(void) {
  return entry_count;
}

const char* ocl_mode_name(enum adr_opencl_address_mode mode) {
  switch (mode) {
    case ADR_OPENCL_ADDRESS_SVM_FINE:
      return "svm-fine";
    case ADR_OPENCL_ADDRESS_SVM_COARSE:
      return "svm-coarse";
    case ADR_OPENCL_ADDRESS_BUFFER:
      return "buffer";
  }
  return "unknown";
}

static void device_string(cl_device_id d, cl_device_info what, char* out, size_t cap) {
  out[0] = '\0';
  if (ocl.clGetDeviceInfo(d, what, cap, out, NULL) != CL_SUCCESS) out[0] = '\0';
  out[cap - 1] = '\0';
}

static void platform_string(cl_platform_id p, cl_platform_info what, char* out, size_t cap) {
  out[0] = '\0';
  if (ocl.clGetPlatformInfo(p, what, cap, out, NULL) != CL_SUCCESS) out[0] = '\0';
  out[cap - 1] = '\0';
}

/* Fills what both open and adopt need once platform/device/context/queue
 * are set, and picks the address mode. */
static int device_setup(struct adr_backend_device* dev, struct adr_error* error) {
  device_string(dev->device, CL_DEVICE_NAME, dev->name, sizeof(dev->name));
  device_string(dev->device, CL_DEVICE_VENDOR, dev->vendor, sizeof(dev->vendor));
  device_string(dev->device, CL_DRIVER_VERSION, dev->driver, sizeof(dev->driver));
  cl_ulong mem = 0, max_alloc = 0;
  cl_uint align_bits = 0;
  cl_bool unified = CL_FALSE;
  ocl.clGetDeviceInfo(dev->device, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof(mem), &mem, NULL);
  ocl.clGetDeviceInfo(dev->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof(max_alloc), &max_alloc,
                      NULL);
  ocl.clGetDeviceInfo(dev->device, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof(align_bits), &align_bits,
                      NULL);
  ocl.clGetDeviceInfo(dev->device, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof(unified), &unified, NULL);
  dev->global_mem = mem;
  dev->max_alloc = max_alloc;
  dev->host_unified = unified == CL_TRUE;
  /* A power of two >= 64 (the address arithmetic in alloc relies on it). */
  dev->alignment = ADR_MIN_ALIGNMENT;
  while (dev->alignment < align_bits / 8 && dev->alignment < (1u << 30)) dev->alignment *= 2;

  char version[128];
  int minor = 0;
  device_string(dev->device, CL_DEVICE_VERSION, version, sizeof(version));
  if (sscanf(version, "OpenCL %d.%d", &dev->version_major, &minor) != 2) dev->version_major = 1;

  /* SVM needs a 2.0+ device and loader; a 1.x driver behind a newer ICD
   * loader must never see 2.0 calls (its dispatch slots may be empty). */
  cl_device_svm_capabilities svm = 0;
  if (dev->version_major < 2 || !ocl_loader_has_svm() ||
      ocl.clGetDeviceInfo(dev->device, CL_DEVICE_SVM_CAPABILITIES, sizeof(svm), &svm, NULL) !=
          CL_SUCCESS)
    svm = 0;
  dev->svm_caps = svm;
  bool fine = (svm & CL_DEVICE_SVM_FINE_GRAIN_BUFFER) != 0;
  bool coarse = (svm & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER) != 0;

  switch (ocl_forced_mode) {
    case ADR_OPENCL_ADDRESS_SVM_FINE:
      if (!fine)
        return ocl_errorf(error, ENOTSUP,
                          "ADR_OPENCL_MEMORY=svm-fine but '%s' has no fine-grained buffer SVM",
                          dev->name);
      dev->mode = ADR_OPENCL_ADDRESS_SVM_FINE;
      break;
    case ADR_OPENCL_ADDRESS_SVM_COARSE:
      if (!coarse)
        return ocl_errorf(error, ENOTSUP,
                          "ADR_OPENCL_MEMORY=svm-coarse but '%s' has no coarse-grained buffer "
                          "SVM",
                          dev->name);
      dev->mode = ADR_OPENCL_ADDRESS_SVM_COARSE;
      break;
    case OCL_MODE_ANY_SVM:
      if (!fine && !coarse)
        return ocl_errorf(error, ENOTSUP, "ADR_OPENCL_MEMORY=svm but '%s' has no buffer SVM",
                          dev->name);
      dev->mode = fine && dev->host_unified
                      ? ADR_OPENCL_ADDRESS_SVM_FINE
                      : (coarse ? ADR_OPENCL_ADDRESS_SVM_COARSE : ADR_OPENCL_ADDRESS_SVM_FINE);
      break;
    case ADR_OPENCL_ADDRESS_BUFFER:
      dev->mode = ADR_OPENCL_ADDRESS_BUFFER;
      break;
    default:
      /* Fine-grained SVM is free on devices that share host memory (CPUs,
       * integrated GPUs) and makes host copies a memcpy; on discrete GPUs it
       * lives in host memory, so coarse-grained (device memory) wins. */
      if (fine && dev->host_unified)
        dev->mode = ADR_OPENCL_ADDRESS_SVM_FINE;
      else if (coarse)
        dev->mode = ADR_OPENCL_ADDRESS_SVM_COARSE;
      else
        dev->mode = ADR_OPENCL_ADDRESS_BUFFER;
      break;
  }
  dev->host_copy = dev->mode == ADR_OPENCL_ADDRESS_SVM_FINE && ocl_host_copy_enabled;
  adr_host_log(ADR_LOG_INFO, "opencl:%lld '%s': address mode %s%s", (long long)dev->id, dev->name,
               ocl_mode_name(dev->mode), dev->host_copy ? " (host copies by memcpy)" : "");
  return 0;
}

int ocl_device_open(ArrowDeviceType type, int64_t id, struct adr_backend_device** out,
                    struct adr_error* error) {
  if (type != ARROW_DEVICE_OPENCL)
    return ocl_errorf(error, EINVAL, "device type %d is not OpenCL", (int)type);
  if (id < 0 || id >= entry_count)
    return ocl_errorf(error, ENODEV, "opencl:%lld does not exist (%lld OpenCL device(s))",
                      (long long)id, (long long)entry_count);
  struct adr_backend_device* dev = calloc(1, sizeof(*dev));
  if (dev == NULL) return ocl_errorf(error, ENOMEM, "out of host memory");
  const struct ocl_device_entry* e = &entries[id];
  dev->id = id;
  dev->platform = e->platform;
  dev->device = e->device;
  dev->platform_index = e->platform_index;
  dev->device_index = e->device_index;
  int st = device_setup(dev, error);
  if (st != 0) {
    free(dev);
    return st;
  }
  pthread_mutex_init(&dev->open_lock, NULL);
  atomic_init(&dev->opened, false);
  ocl_stream_init(&dev->default_stream, dev, NULL, OCL_STREAM_DEFAULT);
  *out = dev;
  return 0;
}

int ocl_device_open_native(struct adr_backend_device* dev, struct adr_error* error) {
  pthread_mutex_lock(&dev->open_lock);
  if (!atomic_load_explicit(&dev->opened, memory_order_relaxed) && dev->open_status == 0) {
    struct adr_error e = {{0}};
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)dev->platform, 0};
    cl_int rc = CL_SUCCESS;
    int st = 0;
    cl_context context = ocl.clCreateContext(props, 1, &dev->device, NULL, NULL, &rc);
    if (context == NULL || rc != CL_SUCCESS) {
      st = ocl_check(rc, &e, "clCreateContext for opencl:%lld failed", (long long)dev->id);
    } else {
      dev->context = context;
      cl_command_queue queue = NULL;
      st = ocl_queue_create(dev, &queue, &e);
      if (st != 0) {
        ocl.clReleaseContext(context);
        dev->context = NULL;
      } else {
        dev->default_stream.queue = queue;
      }
    }
    if (st == 0) {
      atomic_store_explicit(&dev->opened, true, memory_order_release);
      adr_host_log(ADR_LOG_INFO, "opencl:%lld: context and queue created on first use",
                   (long long)dev->id);
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

static int find_entry(cl_device_id device, int* out_platform, int* out_device) {
  for (int64_t i = 0; i < entry_count; i++) {
    if (entries[i].device == device) {
      *out_platform = entries[i].platform_index;
      *out_device = entries[i].device_index;
      return 0;
    }
  }
  *out_platform = -1;
  *out_device = -1;
  return ENOENT;
}

int ocl_device_adopt(ArrowDeviceType type, int64_t id, const void* native_desc,
                     struct adr_backend_device** out, struct adr_error* error) {
  const struct adr_opencl_device_desc* desc = native_desc;
  if (type != ARROW_DEVICE_OPENCL)
    return ocl_errorf(error, EINVAL, "device type %d is not OpenCL", (int)type);
  if (desc == NULL)
    return ocl_errorf(error, EINVAL,
                      "native_desc is NULL (expected struct "
                      "adr_opencl_device_desc)");
  if (desc->struct_size < offsetof(struct adr_opencl_device_desc, reserved))
    return ocl_errorf(error, EINVAL,
                      "struct adr_opencl_device_desc.struct_size is %u, expected at least %zu",
                      desc->struct_size, offsetof(struct adr_opencl_device_desc, reserved));
  if (desc->context == NULL || desc->queue == NULL)
    return ocl_errorf(error, EINVAL,
                      "the descriptor needs both a cl_context and a "
                      "cl_command_queue");
  int hst = ocl_handle_check(desc->context, "cl_context", error);
  if (hst == 0) hst = ocl_handle_check(desc->queue, "cl_command_queue", error);
  if (hst != 0) return hst;
  cl_context queue_context = NULL;
  cl_device_id queue_device = NULL;
  cl_command_queue_properties qprops = 0;
  cl_int rc = ocl.clGetCommandQueueInfo(desc->queue, CL_QUEUE_CONTEXT, sizeof(queue_context),
                                        &queue_context, NULL);
  if (rc == CL_SUCCESS)
    rc = ocl.clGetCommandQueueInfo(desc->queue, CL_QUEUE_DEVICE, sizeof(queue_device),
                                   &queue_device, NULL);
  if (rc == CL_SUCCESS)
    rc = ocl.clGetCommandQueueInfo(desc->queue, CL_QUEUE_PROPERTIES, sizeof(qprops), &qprops, NULL);
  if (rc != CL_SUCCESS) return ocl_check(rc, error, "the queue cannot be queried");
  if (queue_context != desc->context)
    return ocl_errorf(error, EINVAL, "the queue does not belong to the given context");
  if (desc->device != NULL && desc->device != queue_device)
    return ocl_errorf(error, EINVAL, "the queue does not belong to the given device");
  if (qprops & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)
    return ocl_errorf(error, EINVAL,
                      "the queue is out-of-order; adr streams need an in-order queue");
  cl_platform_id platform = NULL;
  rc = ocl.clGetDeviceInfo(queue_device, CL_DEVICE_PLATFORM, sizeof(platform), &platform, NULL);
  if (rc != CL_SUCCESS) return ocl_check(rc, error, "the queue's device cannot be queried");

  struct adr_backend_device* dev = calloc(1, sizeof(*dev));
  if (dev == NULL) return ocl_errorf(error, ENOMEM, "out of host memory");
  dev->id = id;
  dev->adopted = true;
  dev->platform = platform;
  dev->device = queue_device;
  dev->context = desc->context;
  find_entry(queue_device, &dev->platform_index, &dev->device_index);
  int st = device_setup(dev, error);
  if (st != 0) {
    free(dev);
    return st;
  }
  /* Application-owned: hold a reference so that our release balances it. */
  ocl.clRetainContext(desc->context);
  ocl.clRetainCommandQueue(desc->queue);
  ocl_stream_init(&dev->default_stream, dev, desc->queue, OCL_STREAM_DEFAULT | OCL_STREAM_IMPORTED);
  pthread_mutex_init(&dev->open_lock, NULL);
  atomic_init(&dev->opened, true); /* the application's context is open */
  *out = dev;
  return 0;
}

void ocl_device_close(struct adr_backend_device* dev) {
  if (dev == NULL) return;
  if (ocl_device_opened(dev)) {
    ocl.clFinish(dev->default_stream.queue);
    ocl_memory_release_device(dev);
  }
  ocl_stream_fini(&dev->default_stream);
  if (ocl_device_opened(dev)) {
    ocl.clReleaseCommandQueue(dev->default_stream.queue);
    ocl.clReleaseContext(dev->context);
  }
  pthread_mutex_destroy(&dev->open_lock);
  free(dev);
}

/* Whether the device lists `name` among its extensions (a whole word). */
static bool device_has_extension(cl_device_id d, const char* name) {
  size_t size = 0;
  if (ocl.clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, NULL, &size) != CL_SUCCESS || size == 0)
    return false;
  char* text = malloc(size + 1);
  if (text == NULL) return false;
  bool found = false;
  if (ocl.clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, size, text, NULL) == CL_SUCCESS) {
    text[size] = '\0';
    size_t n = strlen(name);
    for (const char* p = strstr(text, name); p != NULL && !found; p = strstr(p + 1, name))
      found = (p == text || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0');
  }
  free(text);
  return found;
}

/* Kind (CL_DEVICE_TYPE; a GPU that shares the host's memory is an
 * integrated one), UUID (cl_khr_device_uuid) and PCI address
 * (cl_khr_pci_bus_info), from clGetDeviceInfo only: no context. */
static void ocl_device_identity(struct adr_backend_device* dev, struct adr_device_info* out) {
  cl_device_type type = 0;
  ocl.clGetDeviceInfo(dev->device, CL_DEVICE_TYPE, sizeof(type), &type, NULL);
  if (type & CL_DEVICE_TYPE_GPU)
    out->kind = dev->host_unified ? ADR_DEVICE_KIND_INTEGRATED_GPU : ADR_DEVICE_KIND_GPU;
  else if (type & CL_DEVICE_TYPE_CPU)
    out->kind = ADR_DEVICE_KIND_CPU;
  else if (type & CL_DEVICE_TYPE_ACCELERATOR)
    out->kind = ADR_DEVICE_KIND_ACCELERATOR;
  else
    out->kind = ADR_DEVICE_KIND_OTHER;
  cl_uchar uuid[16]; /* CL_UUID_SIZE_KHR */
  if (device_has_extension(dev->device, "cl_khr_device_uuid") &&
      ocl.clGetDeviceInfo(dev->device, CL_DEVICE_UUID_KHR, sizeof(uuid), uuid, NULL) ==
          CL_SUCCESS) {
    memcpy(out->uuid, uuid, sizeof(out->uuid));
    out->identity |= ADR_DEVICE_HAS_UUID;
  }
  struct {
    cl_uint pci_domain, pci_bus, pci_device, pci_function;
  } pci; /* cl_device_pci_bus_info_khr */
  if (device_has_extension(dev->device, "cl_khr_pci_bus_info") &&
      ocl.clGetDeviceInfo(dev->device, CL_DEVICE_PCI_BUS_INFO_KHR, sizeof(pci), &pci, NULL) ==
          CL_SUCCESS) {
    out->pci_domain = pci.pci_domain;
    out->pci_bus = (uint8_t)pci.pci_bus;
    out->pci_device = (uint8_t)pci.pci_device;
    out->pci_function = (uint8_t)pci.pci_function;
    out->identity |= ADR_DEVICE_HAS_PCI_BUS_ID;
  }
}

int ocl_device_info(struct adr_backend_device* dev, struct adr_device_info* out,
                    struct adr_error* error) {
  (void)error;
  snprintf(out->name, sizeof(out->name), "%s", dev->name);
  snprintf(out->vendor, sizeof(out->vendor), "%s", dev->vendor);
  snprintf(out->driver, sizeof(out->driver), "%s", dev->driver);
  out->memory_total = dev->global_mem;
  out->memory_free = 0; /* OpenCL has no portable query */
  uint64_t caps = ADR_CAP_ASYNC_STREAMS | ADR_CAP_PEER_COPY | ADR_CAP_IMPORT_NATIVE;
  if (dev->mode != ADR_OPENCL_ADDRESS_BUFFER)
    caps |= ADR_CAP_DEVICE_ADDRESSES | ADR_CAP_UNIFIED_ADDRESSING;
  if (dev->mode == ADR_OPENCL_ADDRESS_SVM_FINE) caps |= ADR_CAP_HOST_ACCESSIBLE;
  out->caps = caps;
  out->alignment = dev->alignment;
  ocl_device_identity(dev, out);
  return 0;
}

int ocl_device_native(struct adr_backend_device* dev, int kind, void** out,
                      struct adr_error* error) {
  if (kind == ADR_NATIVE_CONTEXT || kind == ADR_NATIVE_QUEUE || kind == ADR_OPENCL_NATIVE_BUFFER) {
    int st = ocl_device_ensure(dev, error);
    if (st != 0) return st;
  }
  switch (kind) {
    case ADR_NATIVE_PLATFORM:
      *out = (void*)dev->platform;
      return 0;
    case ADR_NATIVE_DEVICE:
      *out = (void*)dev->device;
      return 0;
    case ADR_NATIVE_CONTEXT:
      *out = (void*)dev->context;
      return 0;
    case ADR_NATIVE_QUEUE:
      ocl_stream_share(&dev->default_stream);
      *out = (void*)dev->default_stream.queue;
      return 0;
    case ADR_OPENCL_NATIVE_ADDRESS_MODE:
      *out = (void*)(uintptr_t)dev->mode;
      return 0;
    case ADR_OPENCL_NATIVE_BUFFER:
      if (*out == NULL)
        return ocl_errorf(error, EINVAL,
                          "ADR_OPENCL_NATIVE_BUFFER needs *out to point to a struct "
                          "adr_opencl_buffer");
      return ocl_buffer_lookup(dev, (struct adr_opencl_buffer*)*out, error);
    default:
      return ocl_errorf(error, ENOTSUP, "native kind %d is not an OpenCL kind (see adr/opencl.h)",
                        kind);
  }
}

static void format_bytes(uint64_t bytes, char* out, size_t cap) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)bytes;
  size_t u = 0;
  while (v >= 1024.0 && u + 1 < sizeof(units) / sizeof(units[0])) {
    v /= 1024.0;
    u++;
  }
  snprintf(out, cap, u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
}

int ocl_device_properties(struct adr_backend_device* dev, adr_property_fn emit, void* ctx,
                          struct adr_error* error) {
  (void)error;
  char text[512], num[64];
  platform_string(dev->platform, CL_PLATFORM_NAME, text, sizeof(text));
  emit(ctx, "platform", text);
  platform_string(dev->platform, CL_PLATFORM_VENDOR, text, sizeof(text));
  emit(ctx, "platform.vendor", text);
  platform_string(dev->platform, CL_PLATFORM_VERSION, text, sizeof(text));
  emit(ctx, "platform.version", text);
  if (dev->platform_index >= 0) {
    snprintf(text, sizeof(text), "platform %d, device %d", dev->platform_index, dev->device_index);
    emit(ctx, "index", text);
  }
  emit(ctx, "device", dev->name);
  cl_device_type type = 0;
  ocl.clGetDeviceInfo(dev->device, CL_DEVICE_TYPE, sizeof(type), &type, NULL);
  text[0] = '\0';
  if (type & CL_DEVICE_TYPE_CPU) strcat(text, "CPU ");
  if (type & CL_DEVICE_TYPE_GPU) strcat(text, "GPU ");
  if (type & CL_DEVICE_TYPE_ACCELERATOR) strcat(text, "accelerator ");
  if (type & CL_DEVICE_TYPE_CUSTOM) strcat(text, "custom ");
  if (text[0] == '\0') strcat(text, "unknown ");
  text[strlen(text) - 1] = '\0';
  emit(ctx, "device.type", text);
  device_string(dev->device, CL_DEVICE_VERSION, text, sizeof(text));
  emit(ctx, "device.version", text);
  device_string(dev->device, CL_DEVICE_OPENCL_C_VERSION, text, sizeof(text));
  emit(ctx, "device.opencl_c", text);
  emit(ctx, "driver.version", dev->driver);
  cl_uint units = 0;
  ocl.clGetDeviceInfo(dev->device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof(units), &units, NULL);
  snprintf(num, sizeof(num), "%u", units);
  emit(ctx, "compute_units", num);
  format_bytes(dev->global_mem, num, sizeof(num));
  emit(ctx, "memory.global", num);
  format_bytes(dev->max_alloc, num, sizeof(num));
  emit(ctx, "memory.max_alloc", num);
  cl_ulong local = 0;
  ocl.clGetDeviceInfo(dev->device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof(local), &local, NULL);
  format_bytes(local, num, sizeof(num));
  emit(ctx, "memory.local", num);
  emit(ctx, "memory.host_unified", dev->host_unified ? "yes" : "no");
  text[0] = '\0';
  if (dev->svm_caps & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER) strcat(text, "coarse,");
  if (dev->svm_caps & CL_DEVICE_SVM_FINE_GRAIN_BUFFER) strcat(text, "fine,");
  if (dev->svm_caps & CL_DEVICE_SVM_FINE_GRAIN_SYSTEM) strcat(text, "system,");
  if (dev->svm_caps & CL_DEVICE_SVM_ATOMICS) strcat(text, "atomics,");
  if (text[0] == '\0')
    strcat(text, ocl_loader_has_svm() ? "none" : "none (ICD loader predates OpenCL 2.0)");
  else
    text[strlen(text) - 1] = '\0';
  emit(ctx, "svm", text);
  emit(ctx, "address_mode", ocl_mode_name(dev->mode));
  emit(ctx, "copy_path",
       dev->host_copy                           ? "memcpy once the stream's earlier work is done"
       : dev->mode == ADR_OPENCL_ADDRESS_BUFFER ? "clEnqueueRead/Write/CopyBuffer"
                                                : "clEnqueueSVMMemcpy");
  snprintf(num, sizeof(num), "%u", dev->alignment);
  emit(ctx, "alignment", num);
  emit(ctx, "adopted", dev->adopted ? "yes (application context and queue)" : "no");
  emit(ctx, "context", ocl_device_opened(dev) ? "created" : "not created yet (made on first use)");
  return 0;
}
