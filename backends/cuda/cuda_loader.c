/* SPDX-License-Identifier: Apache-2.0
 *
 * Loads the CUDA driver (libcuda.so.1) with dlopen and resolves the entry
 * points of CUDA_SYMBOLS through cuGetProcAddress pinned to
 * ADR_CUDA_API_VERSION, so the ABI of every entry point is the one this
 * backend was written against whatever newer driver is installed; dlsym of
 * the versioned name is the fallback. The backend never links libcuda.
 *
 * Runs once, from init (the core serialises init), and only writes
 * cuda_api; afterwards the table is read-only and shared by all threads.
 * A library that was opened but refused stays open (as the core keeps
 * plugins): unloading a driver that may have started threads is unsafe.
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cuda_internal.h"
#include "loader_util.h"

struct cuda_api cuda_api;

#define XSTR_(x) #x
#define XSTR(x) XSTR_(x)

static int open_library(struct adr_error* error) {
  static const char* const k_default[] = {"libcuda.so.1", "/usr/lib/wsl/lib/libcuda.so.1"};
  return adr_loader_open_library(ADR_CUDA_ENV_DRIVER, k_default,
                                 sizeof(k_default) / sizeof(k_default[0]), &cuda_api.lib,
                                 cuda_api.path, sizeof(cuda_api.path), error);
}

static bool sym(const char* name, void* slot) {
  return adr_loader_sym(cuda_api.lib, name, slot);
}

static int unavailable(struct adr_error* error, const char* fmt, ...) ADR_PRINTF(2, 3);
static int unavailable(struct adr_error* error, const char* fmt, ...) {
  char msg[900];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  return adr_backend_error_set(error, ENODEV, "unavailable: %s", msg);
}

/* One entry point: cuGetProcAddress at the pinned version, else dlsym. */
static bool resolve(const char* base, const char* versioned, void* slot, char* why, size_t cap) {
  void* p = NULL;
  why[0] = '\0';
  if (cuda_api.cuGetProcAddress_v2 != NULL) {
    CUdriverProcAddressQueryResult qr = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r = cuda_api.cuGetProcAddress_v2(base, &p, ADR_CUDA_API_VERSION,
                                              CU_GET_PROC_ADDRESS_DEFAULT, &qr);
    if (r != CUDA_SUCCESS || qr != CU_GET_PROC_ADDRESS_SUCCESS) {
      p = NULL;
      snprintf(why, cap, "cuGetProcAddress(\"%s\", %d): %s, query status %d", base,
               ADR_CUDA_API_VERSION, cuda_error_name(r), (int)qr);
    }
  }
  if (p == NULL) p = dlsym(cuda_api.lib, versioned);
  memcpy(slot, &p, sizeof(p));
  return p != NULL;
}

int cuda_library_load(struct adr_error* error) {
  int st = open_library(error);
  if (st) return st;
  const char* path = cuda_api.path;
  if (!sym("cuInit", &cuda_api.cuInit) || !sym("cuDriverGetVersion", &cuda_api.cuDriverGetVersion))
    return unavailable(error, "%s does not export cuInit/cuDriverGetVersion: not a CUDA driver",
                       path);
  sym("cuGetErrorName", &cuda_api.cuGetErrorName);
  sym("cuGetErrorString", &cuda_api.cuGetErrorString);
  sym("cuGetProcAddress_v2", &cuda_api.cuGetProcAddress_v2);

  int version = 0;
  if (cuda_api.cuDriverGetVersion(&version) != CUDA_SUCCESS) version = 0;
  cuda_api.driver_version = version;
  CUresult r = cuda_api.cuInit(0);
  if (r == CUDA_ERROR_STUB_LIBRARY)
    return unavailable(error,
                       "%s is the CUDA toolkit's stub library (cuInit: CUDA_ERROR_STUB_LIBRARY), "
                       "not a driver: install the NVIDIA driver or put its libcuda.so.1 first on "
                       "the library path",
                       path);
  if (r == CUDA_ERROR_NO_DEVICE)
    return unavailable(
        error, "no CUDA device (cuInit: CUDA_ERROR_NO_DEVICE; driver %d.%d at %s%s)",
        version / 1000, (version % 1000) / 10, path,
        adr_host_getenv("CUDA_VISIBLE_DEVICES") ? ", CUDA_VISIBLE_DEVICES is set" : "");
  if (r != CUDA_SUCCESS)
    return cuda_check(r, error, "cuInit failed for the driver at %s (driver version %d)", path,
                      version);
  if (version < ADR_CUDA_API_VERSION)
    return unavailable(error,
                       "CUDA driver %d.%d at %s is older than %d.%d, the version the backend "
                       "needs",
                       version / 1000, (version % 1000) / 10, path, ADR_CUDA_API_VERSION / 1000,
                       (ADR_CUDA_API_VERSION % 1000) / 10);

  char why[256];
#define CUDA_RESOLVE(s, required)                                                              \
  if (!resolve(#s, XSTR(s), &cuda_api.s, why, sizeof(why))) {                                  \
    if (required)                                                                              \
      return unavailable(error, "CUDA driver %d.%d at %s lacks %s (%s)", version / 1000,       \
                         (version % 1000) / 10, path, XSTR(s), why[0] ? why : "not exported"); \
    adr_host_log(ADR_LOG_DEBUG, "optional entry point %s not available (%s)", XSTR(s),         \
                 why[0] ? why : "not exported");                                               \
  }
  CUDA_SYMBOLS(CUDA_RESOLVE)
#undef CUDA_RESOLVE
  adr_host_log(ADR_LOG_INFO, "loaded %s, CUDA driver %d.%d, entry points pinned to %d", path,
               version / 1000, (version % 1000) / 10, ADR_CUDA_API_VERSION);
  return 0;
}
