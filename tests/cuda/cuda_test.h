/* SPDX-License-Identifier: Apache-2.0
 *
 * Shared helpers of the CUDA backend tests: assertions on adr statuses and
 * messages, and direct access to the CUDA driver the backend loaded (the
 * simulator or a real libcuda.so.1), the way a foreign library would call it.
 */
#ifndef ADR_TEST_CUDA_H
#define ADR_TEST_CUDA_H

/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <adr/adr.h>

#define CT_OK(call)                                                                       \
  do {                                                                                    \
    struct adr_error ct_err_ = {{0}};                                                     \
    int ct_st_ = (call);                                                                  \
    if (ct_st_ != 0)                                                                      \
      fail_msg("%s\n  returned %s: %s", #call, adr_status_name(ct_st_), ct_err_.message); \
  } while (0)
#define CT_ERR (&ct_err_)

/* Requires status `want` and a message containing s1 and s2 (either may
 * be NULL). */
static inline void ct_check_fail(const char* expr, int status, int want,
                                 const struct adr_error* err, const char* s1, const char* s2) {
  if (status != want)
    fail_msg("%s\n  returned %s, expected %s: %s", expr, adr_status_name(status),
             adr_status_name(want), err->message);
  const char* subs[2] = {s1, s2};
  for (int i = 0; i < 2; i++)
    if (subs[i] != NULL && strstr(err->message, subs[i]) == NULL)
      fail_msg("%s\n  message lacks \"%s\": %s", expr, subs[i], err->message);
}
#define CT_FAILS(call, want, s1, s2)                            \
  do {                                                          \
    struct adr_error ct_err_ = {{0}};                           \
    int ct_st_ = (call);                                        \
    ct_check_fail(#call, ct_st_, (want), &ct_err_, (s1), (s2)); \
  } while (0)

#define CU_OK(call)                                                                       \
  do {                                                                                    \
    CUresult cu_r_ = (call);                                                              \
    if (cu_r_ != CUDA_SUCCESS) fail_msg("%s\n  returned CUresult %d", #call, (int)cu_r_); \
  } while (0)

/* The driver entry points the tests call directly (versioned ABI names). */
struct ct_driver {
  void* lib;
  CUresult (*CtxGetCurrent)(CUcontext*);
  CUresult (*CtxPushCurrent)(CUcontext);
  CUresult (*CtxPopCurrent)(CUcontext*);
  CUresult (*PrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*PrimaryCtxRelease)(CUdevice);
  CUresult (*StreamCreate)(CUstream*, unsigned int);
  CUresult (*StreamDestroy)(CUstream);
  CUresult (*StreamSynchronize)(CUstream);
  CUresult (*EventCreate)(CUevent*, unsigned int);
  CUresult (*EventDestroy)(CUevent);
  CUresult (*EventRecord)(CUevent, CUstream);
  CUresult (*EventSynchronize)(CUevent);
  CUresult (*EventQuery)(CUevent);
  CUresult (*MemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  /* Simulator hooks; NULL on a real driver. */
  void (*sim_alloc_fail)(unsigned long long nth, int once);
  void (*sim_delay)(unsigned microseconds);
  unsigned long long (*sim_live_allocations)(void);
};

static inline void ct_sym(void* lib, const char* name, void* slot, bool required) {
  void* p = dlsym(lib, name);
  if (p == NULL && required) {
    fprintf(stderr, "libcuda.so.1 lacks %s\n", name);
    exit(1);
  }
  memcpy(slot, &p, sizeof(p));
}

/* Binds to the libcuda.so.1 the backend already loaded (same soname, so
 * dlopen returns that handle). Call after the backend was initialised. */
static inline bool ct_driver_open(struct ct_driver* d) {
  memset(d, 0, sizeof(*d));
  d->lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (d->lib == NULL) return false;
  ct_sym(d->lib, "cuCtxGetCurrent", &d->CtxGetCurrent, true);
  ct_sym(d->lib, "cuCtxPushCurrent_v2", &d->CtxPushCurrent, true);
  ct_sym(d->lib, "cuCtxPopCurrent_v2", &d->CtxPopCurrent, true);
  ct_sym(d->lib, "cuDevicePrimaryCtxRetain", &d->PrimaryCtxRetain, true);
  ct_sym(d->lib, "cuDevicePrimaryCtxRelease_v2", &d->PrimaryCtxRelease, true);
  ct_sym(d->lib, "cuStreamCreate", &d->StreamCreate, true);
  ct_sym(d->lib, "cuStreamDestroy_v2", &d->StreamDestroy, true);
  ct_sym(d->lib, "cuStreamSynchronize", &d->StreamSynchronize, true);
  ct_sym(d->lib, "cuEventCreate", &d->EventCreate, true);
  ct_sym(d->lib, "cuEventDestroy_v2", &d->EventDestroy, true);
  ct_sym(d->lib, "cuEventRecord", &d->EventRecord, true);
  ct_sym(d->lib, "cuEventSynchronize", &d->EventSynchronize, true);
  ct_sym(d->lib, "cuEventQuery", &d->EventQuery, true);
  ct_sym(d->lib, "cuMemsetD8Async", &d->MemsetD8Async, true);
  ct_sym(d->lib, "adr_sim_cuda_alloc_fail", &d->sim_alloc_fail, false);
  ct_sym(d->lib, "adr_sim_cuda_delay", &d->sim_delay, false);
  ct_sym(d->lib, "adr_sim_cuda_live_allocations", &d->sim_live_allocations, false);
  return true;
}

static inline void ct_fill(void* buf, size_t n, unsigned seed) {
  unsigned char* b = buf;
  for (size_t i = 0; i < n; i++) b[i] = (unsigned char)((i * 131u + seed * 7u + (i >> 9)) ^ seed);
}

static inline void ct_expect(const void* buf, size_t n, unsigned seed, const char* what) {
  const unsigned char* b = buf;
  for (size_t i = 0; i < n; i++) {
    unsigned char want = (unsigned char)((i * 131u + seed * 7u + (i >> 9)) ^ seed);
    if (b[i] != want)
      fail_msg("%s: byte %zu of %zu is 0x%02x, expected 0x%02x", what, i, n, b[i], want);
  }
}

static inline void ct_expect_bytes(const void* buf, size_t n, unsigned char v, const char* what) {
  const unsigned char* b = buf;
  for (size_t i = 0; i < n; i++)
    if (b[i] != v) fail_msg("%s: byte %zu of %zu is 0x%02x, expected 0x%02x", what, i, n, b[i], v);
}

#endif /* ADR_TEST_CUDA_H */
