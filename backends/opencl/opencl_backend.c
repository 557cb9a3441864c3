/* SPDX-License-Identifier: Apache-2.0
 *
 * The OpenCL backend's entry point: ABI negotiation, the vtable, init and
 * shutdown, and the environment switches (read once, at init, through the
 * host's getenv):
 *
 *   ADR_OPENCL_MEMORY     auto (default) | svm | svm-fine | svm-coarse | buffer
 *   ADR_OPENCL_HOST_COPY  1 (default) | 0: memcpy fast path in svm-fine mode
 *   ADR_OPENCL_LIBRARY    file name or path of the ICD loader to dlopen
 *                         (default libOpenCL.so.1, then libOpenCL.so)
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "bytesize.h"
#include "opencl_internal.h"

int ocl_forced_mode;
bool ocl_host_copy_enabled = true;

static int read_environment(struct adr_error* error) {
  const char* memory = adr_host_getenv("ADR_OPENCL_MEMORY");
  ocl_forced_mode = 0;
  if (memory != NULL && memory[0] != '\0' && strcmp(memory, "auto") != 0) {
    if (strcmp(memory, "svm-fine") == 0)
      ocl_forced_mode = ADR_OPENCL_ADDRESS_SVM_FINE;
    else if (strcmp(memory, "svm-coarse") == 0)
      ocl_forced_mode = ADR_OPENCL_ADDRESS_SVM_COARSE;
    else if (strcmp(memory, "svm") == 0)
      ocl_forced_mode = OCL_MODE_ANY_SVM;
    else if (strcmp(memory, "buffer") == 0)
      ocl_forced_mode = ADR_OPENCL_ADDRESS_BUFFER;
    else
      return adr_syntax_error(error, "ADR_OPENCL_MEMORY", memory, 0,
                              "auto, svm, svm-fine, svm-coarse or buffer");
  }
  const char* host_copy = adr_host_getenv("ADR_OPENCL_HOST_COPY");
  ocl_host_copy_enabled = true;
  if (host_copy != NULL && host_copy[0] != '\0') {
    if (strcmp(host_copy, "1") == 0)
      ocl_host_copy_enabled = true;
    else if (strcmp(host_copy, "0") == 0)
      ocl_host_copy_enabled = false;
    else
      return adr_syntax_error(error, "ADR_OPENCL_HOST_COPY", host_copy, 0, "0 or 1");
  }
  return 0;
}

static int backend_init(struct adr_error* error) {
  int st = adr_host_init(OCL_NAME, error);
  if (st != 0) return st;
  st = read_environment(error);
  if (st != 0) return st;
  st = ocl_loader_open(adr_host_getenv("ADR_OPENCL_LIBRARY"), error);
  if (st != 0) return st;
  st = ocl_devices_enumerate(error);
  if (st != 0) return st;
  adr_host_log(ADR_LOG_INFO, "%lld device(s); SVM entry points %s; ADR_OPENCL_MEMORY=%s",
               (long long)ocl_devices_count(), ocl_loader_has_svm() ? "present" : "absent",
               ocl_forced_mode == 0                  ? "auto"
               : ocl_forced_mode == OCL_MODE_ANY_SVM ? "svm"
                                                     : ocl_mode_name(ocl_forced_mode));
  return 0;
}

static void backend_shutdown(void) {
  ocl_devices_release();
  adr_range_map_clear(&ocl_allocations);
}

static int backend_device_count(ArrowDeviceType type, int64_t* out, struct adr_error* error) {
  if (type != ARROW_DEVICE_OPENCL)
    return ocl_errorf(error, EINVAL, "device type %d is not OpenCL", (int)type);
  *out = ocl_devices_count();
  return 0;
}

/* Lazy opening (opencl_device.c): the slots that need a device's context or
 * queue open it first; the check is one acquire load once it is open. The
 * other slots take an object (an allocation, a created stream or event)
 * that only exists on an opened device. */
static int lazy_alloc(struct adr_backend_device* dev, size_t size, size_t alignment,
                      struct adr_backend_stream* stream, void** out, struct adr_error* error) {
  int st = ocl_device_ensure(dev, error);
  return st != 0 ? st : ocl_alloc(dev, size, alignment, stream, out, error);
}

static int lazy_copy(struct adr_backend_device* dst_dev, void* dst,
                     struct adr_backend_device* src_dev, const void* src, size_t size,
                     struct adr_backend_stream* stream, struct adr_error* error) {
  int st = dst_dev != NULL ? ocl_device_ensure(dst_dev, error) : 0;
  if (st == 0 && src_dev != NULL) st = ocl_device_ensure(src_dev, error);
  return st != 0 ? st : ocl_copy(dst_dev, dst, src_dev, src, size, stream, error);
}

static int lazy_memset(struct adr_backend_device* dev, void* ptr, int value, size_t size,
                       struct adr_backend_stream* stream, struct adr_error* error) {
  int st = ocl_device_ensure(dev, error);
  return st != 0 ? st : ocl_memset(dev, ptr, value, size, stream, error);
}

static int lazy_copy_sync(struct adr_backend_device* dst_dev, void* dst,
                          struct adr_backend_device* src_dev, const void* src, size_t size,
                          struct adr_backend_stream* stream, struct adr_error* error) {
  int st = dst_dev != NULL ? ocl_device_ensure(dst_dev, error) : 0;
  if (st == 0 && src_dev != NULL) st = ocl_device_ensure(src_dev, error);
  return st != 0 ? st : ocl_copy_sync(dst_dev, dst, src_dev, src, size, stream, error);
}

static int lazy_memset_sync(struct adr_backend_device* dev, void* ptr, int value, size_t size,
                            struct adr_backend_stream* stream, struct adr_error* error) {
  int st = ocl_device_ensure(dev, error);
  return st != 0 ? st : ocl_memset_sync(dev, ptr, value, size, stream, error);
}

/* The default stream is handed out unopened: the core asks for it right
 * after device_open. */
static int lazy_stream_create(struct adr_backend_device* dev, uint32_t flags,
                              struct adr_backend_stream** out, struct adr_error* error) {
  int st = (flags & ADR_BACKEND_STREAM_DEFAULT) ? 0 : ocl_device_ensure(dev, error);
  return st != 0 ? st : ocl_stream_create(dev, flags, out, error);
}

/* Nothing was ever queued on a device that was never opened. */
static int lazy_stream_synchronize(struct adr_backend_device* dev,
                                   struct adr_backend_stream* stream, struct adr_error* error) {
  if (!ocl_device_opened(dev)) return 0;
  return ocl_stream_synchronize(dev, stream, error);
}

static int lazy_stream_import(struct adr_backend_device* dev, void* native_stream,
                              struct adr_backend_stream** out, struct adr_error* error) {
  int st = ocl_device_ensure(dev, error);
  return st != 0 ? st : ocl_stream_import(dev, native_stream, out, error);
}

static void* lazy_stream_native(struct adr_backend_device* dev, struct adr_backend_stream* stream) {
  if (ocl_device_ensure(dev, NULL) != 0) return NULL;
  return ocl_stream_native(dev, stream);
}

static int lazy_event_create(struct adr_backend_device* dev, struct adr_backend_event** out,
                             struct adr_error* error) {
  int st = ocl_device_ensure(dev, error);
  return st != 0 ? st : ocl_event_create(dev, out, error);
}

static int lazy_event_record(struct adr_backend_device* dev, struct adr_backend_event* event,
                             struct adr_backend_stream* stream, struct adr_error* error) {
  int st = ocl_device_ensure(dev, error);
  return st != 0 ? st : ocl_event_record(dev, event, stream, error);
}

static int lazy_event_wait(struct adr_backend_device* dev, struct adr_backend_event* event,
                           struct adr_backend_stream* stream, struct adr_error* error) {
  int st = ocl_device_ensure(dev, error);
  return st != 0 ? st : ocl_event_wait(dev, event, stream, error);
}

static int lazy_event_import(struct adr_backend_device* dev, void* sync_event,
                             struct adr_backend_event** out, struct adr_error* error) {
  int st = ocl_device_ensure(dev, error);
  return st != 0 ? st : ocl_event_import(dev, sync_event, out, error);
}

static const ArrowDeviceType device_types[] = {ARROW_DEVICE_OPENCL};

static const struct adr_backend table = {
    .abi_major = ADR_BACKEND_ABI_MAJOR,
    .abi_minor = ADR_BACKEND_ABI_MINOR,
    .struct_size = sizeof(struct adr_backend),
    .flags = 0,
    .name = OCL_NAME,
    .version = "0.1.0",
    .device_types = device_types,
    .device_type_count = 1,
    .init = backend_init,
    .shutdown = backend_shutdown,
    .device_count = backend_device_count,
    .device_open = ocl_device_open,
    .device_close = ocl_device_close,
    .device_info = ocl_device_info,
    .alloc = lazy_alloc,
    .free = ocl_free,
    .copy = lazy_copy,
    .memset = lazy_memset,
    .copy_sync = lazy_copy_sync,
    .memset_sync = lazy_memset_sync,
    .stream_create = lazy_stream_create,
    .stream_destroy = ocl_stream_destroy,
    .stream_synchronize = lazy_stream_synchronize,
    .event_create = lazy_event_create,
    .event_destroy = ocl_event_destroy,
    .event_record = lazy_event_record,
    .event_wait = lazy_event_wait,
    .event_synchronize = ocl_event_synchronize,
    .event_query = ocl_event_query,
    .event_native = ocl_event_native,
    .event_import = lazy_event_import,
    .stream_import = lazy_stream_import,
    .stream_native = lazy_stream_native,
    .pointer_query = ocl_pointer_query,
    .device_native = ocl_device_native,
    .device_adopt = ocl_device_adopt,
    .device_properties = ocl_device_properties,
    .host_register = NULL, /* OpenCL has no page-locking of existing memory */
    .host_unregister = NULL,
};

ADR_BACKEND_DEFINE_QUERY(table, adr_host_set)
