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
    .alloc = ocl_alloc,
    .free = ocl_free,
    .copy = ocl_copy,
    .memset = ocl_memset,
    .copy_sync = ocl_copy_sync,
    .memset_sync = ocl_memset_sync,
    .stream_create = ocl_stream_create,
    .stream_destroy = ocl_stream_destroy,
    .stream_synchronize = ocl_stream_synchronize,
    .event_create = ocl_event_create,
    .event_destroy = ocl_event_destroy,
    .event_record = ocl_event_record,
    .event_wait = ocl_event_wait,
    .event_synchronize = ocl_event_synchronize,
    .event_query = ocl_event_query,
    .event_native = ocl_event_native,
    .event_import = ocl_event_import,
    .stream_import = ocl_stream_import,
    .stream_native = ocl_stream_native,
    .pointer_query = ocl_pointer_query,
    .device_native = ocl_device_native,
    .device_adopt = ocl_device_adopt,
    .device_properties = ocl_device_properties,
    .host_register = NULL, /* OpenCL has no page-locking of existing memory */
    .host_unregister = NULL,
};

ADR_BACKEND_DEFINE_QUERY(table, adr_host_set)
