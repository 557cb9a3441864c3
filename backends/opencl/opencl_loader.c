/* SPDX-License-Identifier: Apache-2.0
 *
 * Loads the OpenCL ICD loader with dlopen and resolves the symbol table of
 * opencl_symbols.h. The backend is never linked against libOpenCL, so it
 * builds on machines without it and reports a clean "unavailable" there.
 *
 * The library stays loaded for the life of the process: ICDs start threads
 * (PoCL's pthread device does) that must not outlive their code.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "opencl_internal.h"

struct ocl_api ocl;

static void* library;

static bool try_open(const char* name, char* tried, size_t cap) {
  dlerror();
  library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (library != NULL) return true;
  const char* why = dlerror();
  size_t n = strlen(tried);
  if (n < cap)
    snprintf(tried + n, cap - n, "%s%s (%s)", n ? ", " : "", name, why ? why : "not found");
  return false;
}

int ocl_loader_open(const char* override, struct adr_error* error) {
  if (library != NULL) return 0;
  char tried[900] = "";
  const char* names[] = {"libOpenCL.so.1", "libOpenCL.so"};
  bool ok = false;
  if (override != NULL && override[0] != '\0') {
    ok = try_open(override, tried, sizeof(tried));
  } else {
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !ok; i++)
      ok = try_open(names[i], tried, sizeof(tried));
  }
  if (!ok)
    return adr_backend_error_set(error, ENODEV,
                                 "[init][" OCL_NAME "] unavailable: %s not found (tried: %s)",
                                 override && override[0] ? override : "libOpenCL.so.1", tried);

#define OCL_RESOLVE_REQUIRED(name)                                      \
  ocl.name = (__typeof__(ocl.name))dlsym(library, #name);               \
  if (ocl.name == NULL) {                                               \
    dlclose(library);                                                   \
    library = NULL;                                                     \
    memset(&ocl, 0, sizeof(ocl));                                       \
    return adr_backend_error_set(error, EIO,                            \
                                 "[init][" OCL_NAME                     \
                                 "] EIO: the OpenCL library lacks the " \
                                 "OpenCL 1.2 entry point %s",           \
                                 #name);                                \
  }
  ADR_OCL_REQUIRED(OCL_RESOLVE_REQUIRED)
#undef OCL_RESOLVE_REQUIRED

#define OCL_RESOLVE_OPTIONAL(name) ocl.name = (__typeof__(ocl.name))dlsym(library, #name);
  ADR_OCL_OPTIONAL(OCL_RESOLVE_OPTIONAL)
#undef OCL_RESOLVE_OPTIONAL
  return 0;
}

bool ocl_loader_has_svm(void) {
  return ocl.clSVMAlloc != NULL && ocl.clSVMFree != NULL && ocl.clEnqueueSVMMemcpy != NULL &&
         ocl.clEnqueueSVMMemFill != NULL && ocl.clEnqueueSVMFree != NULL;
}
