/* SPDX-License-Identifier: Apache-2.0
 *
 * The CUDA front end of adr's driver simulator: a TEST DOUBLE built as
 * libcuda.so.1, implementing the subset of the CUDA driver API that
 * backends/cuda uses on top of sim_core (tests/sim/README.md).
 *
 * Contexts: only primary contexts exist (one per device, reference-counted
 * by cuDevicePrimaryCtxRetain/Release); each thread has its own stack of
 * current contexts. Calls that create something in "the current context"
 * fail with CUDA_ERROR_INVALID_CONTEXT when there is none, as the driver
 * does, so a backend that forgets to make its context current is caught.
 *
 * Knobs (read at cuInit): ADR_SIM_CUDA_STUB=1 makes cuInit return
 * CUDA_ERROR_STUB_LIBRARY; ADR_SIM_CUDA_DRIVER_VERSION=N is what
 * cuDriverGetVersion reports (default 12080); ADR_SIM_CUDA_NO_MEMPOOL=1
 * reports no stream-ordered allocator; ADR_SIM_LOG=1 prints every failing
 * call with its reason to stderr. The ADR_SIM_* core knobs are in
 * sim_core.h.
 */
#include <cuda.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_core.h"

#define SIM_EXPORT __attribute__((visibility("default")))

#define SIM_DEFAULT_DRIVER_VERSION 12080

struct CUctx_st {
  int device;
  int refs; /* primary context retain count; guarded by g_ctx_lock */
};

static struct CUctx_st g_ctx[SIM_MAX_DEVICES];
static pthread_mutex_t g_ctx_lock = PTHREAD_MUTEX_INITIALIZER;

static struct {
  pthread_once_t once;
  CUresult init_result;
  int driver_version;
  bool no_mempool;
  bool log;
  /* Built-in stream standing in for the NULL/legacy/per-thread stream. */
  pthread_mutex_t legacy_lock;
  struct sim_stream* legacy[SIM_MAX_DEVICES];
} g = {.once = PTHREAD_ONCE_INIT,
       .init_result = CUDA_ERROR_NOT_INITIALIZED,
       .driver_version = SIM_DEFAULT_DRIVER_VERSION,
       .legacy_lock = PTHREAD_MUTEX_INITIALIZER};

static _Thread_local CUcontext t_stack[32];
static _Thread_local int t_depth;

/* ---- errors ------------------------------------------------------------- */

static CUresult from_sim(int st) {
  switch (st) {
    case SIM_SUCCESS:
      return CUDA_SUCCESS;
    case SIM_ERROR_OUT_OF_MEMORY:
      return CUDA_ERROR_OUT_OF_MEMORY;
    case SIM_ERROR_NOT_INITIALIZED:
      return CUDA_ERROR_NOT_INITIALIZED;
    case SIM_ERROR_INVALID_DEVICE:
      return CUDA_ERROR_INVALID_DEVICE;
    case SIM_ERROR_INVALID_HANDLE:
      return CUDA_ERROR_INVALID_HANDLE;
    case SIM_ERROR_NOT_READY:
      return CUDA_ERROR_NOT_READY;
    case SIM_ERROR_ALREADY_REGISTERED:
      return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    case SIM_ERROR_NOT_REGISTERED:
      return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    case SIM_ERROR_NOT_SUPPORTED:
      return CUDA_ERROR_NOT_SUPPORTED;
    case SIM_ERROR_INVALID_CONTEXT:
      return CUDA_ERROR_INVALID_CONTEXT;
    default:
      return CUDA_ERROR_INVALID_VALUE; /* pointers, bounds, wrong device */
  }
}

static CUresult ret(const char* fn, CUresult r, const char* why) {
  if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY && g.log)
    fprintf(stderr, "[adr cuda sim] %s -> %d: %s\n", fn, (int)r, why);
  return r;
}
#define RET_SIM(st) ret(__func__, from_sim(st), sim_last_message())
#define RET(r, why) ret(__func__, (r), (why))

#define CHECK_INIT()                                               \
  do {                                                             \
    if (g.init_result != CUDA_SUCCESS)                             \
      return RET(CUDA_ERROR_NOT_INITIALIZED, "cuInit not called"); \
  } while (0)

struct err_entry {
  CUresult code;
  const char* name;
  const char* text;
};

/* The codes this driver returns, plus the common ones callers print. */
static const struct err_entry k_errors[] = {
#define E(code, text) \
  { code, #code, text }
    E(CUDA_SUCCESS, "no error"),
    E(CUDA_ERROR_INVALID_VALUE, "invalid argument"),
    E(CUDA_ERROR_OUT_OF_MEMORY, "out of memory"),
    E(CUDA_ERROR_NOT_INITIALIZED, "initialization error"),
    E(CUDA_ERROR_DEINITIALIZED, "driver shutting down"),
    E(CUDA_ERROR_STUB_LIBRARY, "CUDA driver is a stub library"),
    E(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected"),
    E(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal"),
    E(CUDA_ERROR_INVALID_CONTEXT, "invalid device context"),
    E(CUDA_ERROR_CONTEXT_IS_DESTROYED, "context is destroyed"),
    E(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle"),
    E(CUDA_ERROR_NOT_FOUND, "named symbol not found"),
    E(CUDA_ERROR_NOT_READY, "device not ready"),
    E(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered"),
    E(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
      "part or all of the requested memory range is already mapped"),
    E(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
      "pointer does not correspond to a registered memory region"),
    E(CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "peer access is already enabled"),
    E(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "peer access is not supported between these two devices"),
    E(CUDA_ERROR_NOT_SUPPORTED, "operation not supported"),
    E(CUDA_ERROR_NOT_PERMITTED, "operation not permitted"),
    E(CUDA_ERROR_UNKNOWN, "unknown error"),
#undef E
};

static const struct err_entry* find_error(CUresult r) {
  for (size_t i = 0; i < sizeof(k_errors) / sizeof(k_errors[0]); i++)
    if (k_errors[i].code == r) return &k_errors[i];
  return NULL;
}

#pragma GCC visibility push(default)

CUresult CUDAAPI cuGetErrorName(CUresult error, const char** pStr) {
  const struct err_entry* e = find_error(error);
  if (pStr == NULL) return CUDA_ERROR_INVALID_VALUE;
  *pStr = e ? e->name : NULL;
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char** pStr) {
  const struct err_entry* e = find_error(error);
  if (pStr == NULL) return CUDA_ERROR_INVALID_VALUE;
  *pStr = e ? e->text : NULL;
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

#pragma GCC visibility pop

/* ---- init and devices --------------------------------------------------- */

static bool env_flag(const char* name) {
  const char* v = getenv(name);
  return v != NULL && strcmp(v, "0") != 0 && v[0] != '\0';
}

static void init_once(void) {
  g.log = env_flag("ADR_SIM_LOG");
  g.no_mempool = env_flag("ADR_SIM_CUDA_NO_MEMPOOL");
  const char* v = getenv("ADR_SIM_CUDA_DRIVER_VERSION");
  if (v != NULL) {
    char* end = NULL;
    long n = strtol(v, &end, 10);
    if (end == v || *end != '\0' || n <= 0 || n > 99999) {
      if (g.log) fprintf(stderr, "[adr cuda sim] bad ADR_SIM_CUDA_DRIVER_VERSION=%s\n", v);
      g.init_result = CUDA_ERROR_INVALID_VALUE;
      return;
    }
    g.driver_version = (int)n;
  }
  if (env_flag("ADR_SIM_CUDA_STUB")) {
    g.init_result = CUDA_ERROR_STUB_LIBRARY;
    return;
  }
  int st = sim_init();
  if (st != SIM_SUCCESS) {
    if (g.log) fprintf(stderr, "[adr cuda sim] %s\n", sim_last_message());
    g.init_result = from_sim(st);
    return;
  }
  if (sim_device_count() == 0) {
    g.init_result = CUDA_ERROR_NO_DEVICE;
    return;
  }
  for (int i = 0; i < SIM_MAX_DEVICES; i++) g_ctx[i].device = i;
  g.init_result = CUDA_SUCCESS;
}

static CUresult check_device(CUdevice dev) {
  if (dev < 0 || dev >= sim_device_count()) return CUDA_ERROR_INVALID_DEVICE;
  return CUDA_SUCCESS;
}

static CUcontext current(void) {
  return t_depth > 0 ? t_stack[t_depth - 1] : NULL;
}

static bool ctx_valid(CUcontext c) {
  if (c < &g_ctx[0] || c >= &g_ctx[SIM_MAX_DEVICES]) return false;
  pthread_mutex_lock(&g_ctx_lock);
  bool ok = c->refs > 0;
  pthread_mutex_unlock(&g_ctx_lock);
  return ok;
}

/* The device of the current context, or an error. */
static CUresult current_device(int* out) {
  CUcontext c = current();
  if (c == NULL) return CUDA_ERROR_INVALID_CONTEXT;
  if (!ctx_valid(c)) return CUDA_ERROR_CONTEXT_IS_DESTROYED;
  *out = c->device;
  return CUDA_SUCCESS;
}

/* Maps a CUstream to the core stream; NULL/legacy/per-thread handles are
 * the current context's built-in stream. */
static CUresult resolve_stream(CUstream h, struct sim_stream** out) {
  if (h != NULL && h != CU_STREAM_LEGACY && h != CU_STREAM_PER_THREAD) {
    *out = (struct sim_stream*)h;
    return CUDA_SUCCESS;
  }
  int dev;
  CUresult r = current_device(&dev);
  if (r) return r;
  pthread_mutex_lock(&g.legacy_lock);
  int st = SIM_SUCCESS;
  if (g.legacy[dev] == NULL) st = sim_stream_create(dev, 0, &g.legacy[dev]);
  *out = g.legacy[dev];
  pthread_mutex_unlock(&g.legacy_lock);
  return from_sim(st);
}

#pragma GCC visibility push(default)

CUresult CUDAAPI cuInit(unsigned int Flags) {
  if (Flags != 0) return RET(CUDA_ERROR_INVALID_VALUE, "flags must be 0");
  pthread_once(&g.once, init_once);
  return RET(g.init_result, "cuInit failed");
}

CUresult CUDAAPI cuDriverGetVersion(int* driverVersion) {
  if (driverVersion == NULL) return RET(CUDA_ERROR_INVALID_VALUE, "NULL");
  /* Works before cuInit, like the real one. */
  const char* v = getenv("ADR_SIM_CUDA_DRIVER_VERSION");
  *driverVersion = v ? atoi(v) : SIM_DEFAULT_DRIVER_VERSION;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int* count) {
  CHECK_INIT();
  if (count == NULL) return RET(CUDA_ERROR_INVALID_VALUE, "NULL");
  *count = sim_device_count();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice* device, int ordinal) {
  CHECK_INIT();
  if (device == NULL) return RET(CUDA_ERROR_INVALID_VALUE, "NULL");
  if (check_device(ordinal)) return RET(CUDA_ERROR_INVALID_DEVICE, "ordinal out of range");
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice dev) {
  CHECK_INIT();
  if (name == NULL || len <= 0) return RET(CUDA_ERROR_INVALID_VALUE, "bad buffer");
  if (check_device(dev)) return RET(CUDA_ERROR_INVALID_DEVICE, "bad device");
  snprintf(name, (size_t)len, "%s", sim_device_props(dev)->name);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceTotalMem(size_t* bytes, CUdevice dev) {
  CHECK_INIT();
  if (bytes == NULL) return RET(CUDA_ERROR_INVALID_VALUE, "NULL");
  if (check_device(dev)) return RET(CUDA_ERROR_INVALID_DEVICE, "bad device");
  *bytes = (size_t)sim_device_props(dev)->memory_total;
  return CUDA_SUCCESS;
}

const char sim_frontend_name[] = "cuda";

CUresult CUDAAPI cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib, CUdevice dev) {
  CHECK_INIT();
  if (pi == NULL) return RET(CUDA_ERROR_INVALID_VALUE, "NULL");
  if (check_device(dev)) return RET(CUDA_ERROR_INVALID_DEVICE, "bad device");
  const struct sim_device_props* p = sim_device_props(dev);
  switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      *pi = p->cc_major;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      *pi = p->cc_minor;
      break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      *pi = p->multiprocessors;
      break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
      *pi = p->pci_bus;
      break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
      *pi = p->pci_device;
      break;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED:
      *pi = p->integrated;
      break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
      *pi = p->pci_domain;
      break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
      *pi = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
      *pi = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
      *pi = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
      *pi = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:
      *pi = 2;
      break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
      *pi = g.no_mempool ? 0 : 1;
      break;
    default:
      return RET(CUDA_ERROR_INVALID_VALUE, "attribute not modelled by the simulator");
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetPCIBusId(char* pciBusId, int len, CUdevice dev) {
  CHECK_INIT();
  if (pciBusId == NULL || len <= 0) return RET(CUDA_ERROR_INVALID_VALUE, "bad buffer");
  if (check_device(dev)) return RET(CUDA_ERROR_INVALID_DEVICE, "bad device");
  const struct sim_device_props* p = sim_device_props(dev);
  snprintf(pciBusId, (size_t)len, "%08X:%02X:%02X.0", p->pci_domain, p->pci_bus, p->pci_device);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  CHECK_INIT();
  if (uuid == NULL) return RET(CUDA_ERROR_INVALID_VALUE, "NULL");
  if (check_device(dev)) return RET(CUDA_ERROR_INVALID_DEVICE, "bad device");
  memcpy(uuid->bytes, sim_device_props(dev)->uuid, 16);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceCanAccessPeer(int* canAccessPeer, CUdevice dev, CUdevice peerDev) {
  CHECK_INIT();
  if (canAccessPeer == NULL) return RET(CUDA_ERROR_INVALID_VALUE, "NULL");
  if (check_device(dev) || check_device(peerDev))
    return RET(CUDA_ERROR_INVALID_DEVICE, "bad device");
  *canAccessPeer = dev != peerDev;
  return CUDA_SUCCESS;
}

/* ---- contexts ----------------------------------------------------------- */

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  CHECK_INIT();
  int fault = sim_fault_take("cuDevicePrimaryCtxRetain");
  if (fault != 0) return RET((CUresult)fault, "injected fault (adr_sim_cuda_fail_next)");
  if (pctx == NULL) return RET(CUDA_ERROR_INVALID_VALUE, "NULL");
  if (check_device(dev)) return RET(CUDA_ERROR_INVALID_DEVICE, "bad device");
  pthread_mutex_lock(&g_ctx_lock);
  g_ctx[dev].refs++;
  pthread_mutex_unlock(&g_ctx_lock);
  *pctx = &g_ctx[dev];
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev) {
  CHECK_INIT();
  if (check_device(dev)) return RET(CUDA_ERROR_INVALID_DEVICE, "bad device");
  pthread_mutex_lock(&g_ctx_lock);
  bool ok = g_ctx[dev].refs > 0;
  if (ok) g_ctx[dev].refs--;
  pthread_mutex_unlock(&g_ctx_lock);
  return ok ? CUDA_SUCCESS : RET(CUDA_ERROR_INVALID_CONTEXT, "primary context not retained");
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext* pctx) {
  CHECK_INIT();
  if (pctx == NULL) return RET(CUDA_ERROR_INVALID_VALUE, "NULL");
  *pctx = current();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  CHECK_INIT();
  if (ctx != NULL && !ctx_valid(ctx)) return RET(CUDA_ERROR_INVALID_CONTEXT, "unknown context");
  if (ctx == NULL) {
    if (t_depth > 0) t_depth--;
  } else if (t_depth == 0) {
    t_stack[t_depth++] = ctx;
  } else {
    t_stack[t_depth - 1] = ctx;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx) {
  CHECK_INIT();
  if (!ctx_valid(ctx)) return RET(CUDA_ERROR_INVALID_CONTEXT, "unknown context");
  if (t_depth == (int)(sizeof(t_stack) / sizeof(t_stack[0])))
    return RET(CUDA_ERROR_OUT_OF_MEMORY, "context stack full");
  t_stack[t_depth++] = ctx;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPopCurrent(CUcontext* pctx) {
  CHECK_INIT();
  if (t_depth == 0) return RET(CUDA_ERROR_INVALID_CONTEXT, "no current context");
  CUcontext c = t_stack[--t_depth];
  if (pctx) *pctx = c;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetDevice(CUdevice* device) {
  CHECK_INIT();
  if (device == NULL) return RET(CUDA_ERROR_INVALID_VALUE, "NULL");
  int dev;
  CUresult r = current_device(&dev);
  if (r) return RET(r, "no current context");
  *device = dev;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSynchronize(void) {
  CHECK_INIT();
  int dev;
  CUresult r = current_device(&dev);
  if (r) return RET(r, "no current context");
  return RET_SIM(sim_device_synchronize(dev));
}

CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags) {
  CHECK_INIT();
  int dev;
  CUresult r = current_device(&dev);
  if (r) return RET(r, "no current context");
  if (Flags != 0) return RET(CUDA_ERROR_INVALID_VALUE, "flags must be 0");
  if (!ctx_valid(peerContext)) return RET(CUDA_ERROR_INVALID_CONTEXT, "unknown peer context");
  if (peerContext->device == dev)
    return RET(CUDA_ERROR_INVALID_DEVICE, "a context cannot be its own peer");
  return CUDA_SUCCESS; /* the simulator's devices always reach each other */
}

/* ---- memory ------------------------------------------------------------- */

CUresult CUDAAPI cuMemGetInfo(size_t* free_bytes, size_t* total) {
  CHECK_INIT();
  int dev;
  CUresult r = current_device(&dev);
  if (r) return RET(r, "no current context");
  uint64_t f = 0, t = 0;
  int st = sim_mem_info(dev, &f, &t);
  if (st) return RET_SIM(st);
  if (free_bytes) *free_bytes = (size_t)f;
  if (total) *total = (size_t)t;
  return CUDA_SUCCESS;
}

static CUresult alloc_kind(enum sim_mem_kind kind, void** out, size_t size, const char* fn) {
  if (g.init_result != CUDA_SUCCESS)
    return ret(fn, CUDA_ERROR_NOT_INITIALIZED, "cuInit not called");
  if (out == NULL) return ret(fn, CUDA_ERROR_INVALID_VALUE, "NULL");
  int dev;
  CUresult r = current_device(&dev);
  if (r) return ret(fn, r, "no current context");
  int st = sim_mem_alloc(dev, kind, size, out);
  return st ? ret(fn, from_sim(st), sim_last_message()) : CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAlloc(CUdeviceptr* dptr, size_t bytesize) {
  void* p = NULL;
  CUresult r = alloc_kind(SIM_MEM_DEVICE, dptr ? &p : NULL, bytesize, __func__);
  if (r == CUDA_SUCCESS) *dptr = (CUdeviceptr)(uintptr_t)p;
  return r;
}

CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
    return RET(CUDA_ERROR_INVALID_VALUE, "bad flags");
  void* p = NULL;
  CUresult r = alloc_kind(SIM_MEM_MANAGED, dptr ? &p : NULL, bytesize, __func__);
  if (r == CUDA_SUCCESS) *dptr = (CUdeviceptr)(uintptr_t)p;
  return r;
}

CUresult CUDAAPI cuMemHostAlloc(void** pp, size_t bytesize, unsigned int Flags) {
  if (Flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                          CU_MEMHOSTALLOC_WRITECOMBINED))
    return RET(CUDA_ERROR_INVALID_VALUE, "bad flags");
  return alloc_kind(SIM_MEM_HOST, pp, bytesize, __func__);
}

CUresult CUDAAPI cuMemFree(CUdeviceptr dptr) {
  CHECK_INIT();
  if (dptr == 0) return CUDA_SUCCESS;
  return RET_SIM(sim_mem_free((void*)(uintptr_t)dptr, SIM_MEM_DEVICE));
}

CUresult CUDAAPI cuMemFreeHost(void* p) {
  CHECK_INIT();
  return RET_SIM(sim_mem_free(p, SIM_MEM_HOST));
}

CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  CHECK_INIT();
  if (g.no_mempool) return RET(CUDA_ERROR_NOT_SUPPORTED, "memory pools disabled");
  if (dptr == NULL) return RET(CUDA_ERROR_INVALID_VALUE, "NULL");
  struct sim_stream* s;
  CUresult r = resolve_stream(hStream, &s);
  if (r) return RET(r, "bad stream");
  void* p = NULL;
  int st = sim_mem_alloc_async(bytesize, s, &p);
  if (st) return RET_SIM(st);
  *dptr = (CUdeviceptr)(uintptr_t)p;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  CHECK_INIT();
  if (g.no_mempool) return RET(CUDA_ERROR_NOT_SUPPORTED, "memory pools disabled");
  struct sim_stream* s;
  CUresult r = resolve_stream(hStream, &s);
  if (r) return RET(r, "bad stream");
  return RET_SIM(sim_mem_free_async((void*)(uintptr_t)dptr, s));
}

CUresult CUDAAPI cuMemGetAddressRange(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr) {
  CHECK_INIT();
  struct sim_ptr_info info;
  int st = sim_ptr_query((void*)(uintptr_t)dptr, &info);
  if (st) return RET_SIM(st);
  if (info.kind == SIM_MEM_NONE) return RET(CUDA_ERROR_NOT_FOUND, "not an allocation");
  if (pbase) *pbase = (CUdeviceptr)(uintptr_t)info.base;
  if (psize) *psize = info.size;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemHostRegister(void* p, size_t bytesize, unsigned int Flags) {
  CHECK_INIT();
  if (Flags & ~(unsigned)(CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                          CU_MEMHOSTREGISTER_READ_ONLY))
    return RET(CUDA_ERROR_INVALID_VALUE, "bad flags");
  int dev;
  CUresult r = current_device(&dev);
  if (r) return RET(r, "no current context");
  return RET_SIM(sim_mem_register(dev, p, bytesize));
}

CUresult CUDAAPI cuMemHostUnregister(void* p) {
  CHECK_INIT();
  return RET_SIM(sim_mem_unregister(p));
}

/* ---- copies ------------------------------------------------------------- */

CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
                               CUstream hStream) {
  CHECK_INIT();
  struct sim_stream* s;
  CUresult r = resolve_stream(hStream, &s);
  if (r) return RET(r, "bad stream");
  return RET_SIM(
      sim_memcpy_async((void*)(uintptr_t)dst, (const void*)(uintptr_t)src, ByteCount, 1, s));
}

/* The typed and synchronous variants (adr-bench's direct baselines). The
 * synchronous ones run on the current context's built-in stream and wait. */
static CUresult copy_on(void* dst, const void* src, size_t n, CUstream h, bool wait,
                        const char* fn) {
  if (g.init_result != CUDA_SUCCESS)
    return ret(fn, CUDA_ERROR_NOT_INITIALIZED, "cuInit not called");
  struct sim_stream* s;
  CUresult r = resolve_stream(h, &s);
  if (r) return ret(fn, r, "bad stream or no current context");
  int st = sim_memcpy_async(dst, src, n, 1, s);
  if (st == SIM_SUCCESS && wait) st = sim_stream_synchronize(s);
  return st ? ret(fn, from_sim(st), sim_last_message()) : CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t n, CUstream h) {
  return copy_on((void*)(uintptr_t)dst, src, n, h, false, __func__);
}
CUresult CUDAAPI cuMemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t n, CUstream h) {
  return copy_on(dst, (const void*)(uintptr_t)src, n, h, false, __func__);
}
CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) {
  return copy_on((void*)(uintptr_t)dst, (const void*)(uintptr_t)src, n, h, false, __func__);
}
CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr dst, const void* src, size_t n) {
  return copy_on((void*)(uintptr_t)dst, src, n, NULL, true, __func__);
}
CUresult CUDAAPI cuMemcpyDtoH(void* dst, CUdeviceptr src, size_t n) {
  return copy_on(dst, (const void*)(uintptr_t)src, n, NULL, true, __func__);
}

/* A device pointer must belong to the context it is passed with. */
static CUresult check_owner(CUdeviceptr p, size_t n, CUcontext ctx) {
  if (!ctx_valid(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
  struct sim_ptr_info info;
  int st = sim_ptr_query((void*)(uintptr_t)p, &info);
  if (st) return from_sim(st);
  if (info.kind != SIM_MEM_NONE && info.kind != SIM_MEM_HOST && info.kind != SIM_MEM_REGISTERED &&
      info.device != ctx->device)
    return CUDA_ERROR_INVALID_VALUE;
  (void)n;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext,
                                   CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount,
                                   CUstream hStream) {
  CHECK_INIT();
  CUresult r = check_owner(dstDevice, ByteCount, dstContext);
  if (r) return RET(r, "destination does not belong to dstContext");
  r = check_owner(srcDevice, ByteCount, srcContext);
  if (r) return RET(r, "source does not belong to srcContext");
  struct sim_stream* s;
  r = resolve_stream(hStream, &s);
  if (r) return RET(r, "bad stream");
  return RET_SIM(sim_memcpy_async((void*)(uintptr_t)dstDevice, (const void*)(uintptr_t)srcDevice,
                                  ByteCount, 1, s));
}

CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N,
                                 CUstream hStream) {
  CHECK_INIT();
  struct sim_stream* s;
  CUresult r = resolve_stream(hStream, &s);
  if (r) return RET(r, "bad stream");
  return RET_SIM(sim_memset_async((void*)(uintptr_t)dstDevice, uc, N, s));
}

/* Runs fn(userData) on the stream's thread when the stream reaches it
 * (test programs use it as application work on adr's streams). */
CUresult CUDAAPI cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void* userData) {
  CHECK_INIT();
  if (fn == NULL) return RET(CUDA_ERROR_INVALID_VALUE, "NULL function");
  struct sim_stream* s;
  CUresult r = resolve_stream(hStream, &s);
  if (r) return RET(r, "bad stream");
  return RET_SIM(sim_host_func_async(s, fn, userData));
}

/* ---- streams and events ------------------------------------------------- */

CUresult CUDAAPI cuStreamCreate(CUstream* phStream, unsigned int Flags) {
  CHECK_INIT();
  if (phStream == NULL) return RET(CUDA_ERROR_INVALID_VALUE, "NULL");
  if (Flags & ~(unsigned)CU_STREAM_NON_BLOCKING) return RET(CUDA_ERROR_INVALID_VALUE, "bad flags");
  int dev;
  CUresult r = current_device(&dev);
  if (r) return RET(r, "no current context");
  struct sim_stream* s = NULL;
  int st = sim_stream_create(dev, Flags, &s);
  if (st) return RET_SIM(st);
  *phStream = (CUstream)s;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamDestroy(CUstream hStream) {
  CHECK_INIT();
  int fault = sim_fault_take("cuStreamDestroy");
  if (fault != 0) return RET((CUresult)fault, "injected fault (adr_sim_cuda_fail_next)");
  if (hStream == NULL || hStream == CU_STREAM_LEGACY || hStream == CU_STREAM_PER_THREAD)
    return RET(CUDA_ERROR_INVALID_HANDLE, "the default stream cannot be destroyed");
  return RET_SIM(sim_stream_destroy((struct sim_stream*)hStream));
}

CUresult CUDAAPI cuStreamSynchronize(CUstream hStream) {
  CHECK_INIT();
  struct sim_stream* s;
  CUresult r = resolve_stream(hStream, &s);
  if (r) return RET(r, "bad stream");
  return RET_SIM(sim_stream_synchronize(s));
}

CUresult CUDAAPI cuStreamQuery(CUstream hStream) {
  CHECK_INIT();
  struct sim_stream* s;
  CUresult r = resolve_stream(hStream, &s);
  if (r) return RET(r, "bad stream");
  return RET_SIM(sim_stream_query(s));
}

CUresult CUDAAPI cuStreamGetCtx(CUstream hStream, CUcontext* pctx) {
  CHECK_INIT();
  if (pctx == NULL) return RET(CUDA_ERROR_INVALID_VALUE, "NULL");
  struct sim_stream* s;
  CUresult r = resolve_stream(hStream, &s);
  if (r) return RET(r, "bad stream");
  int dev = -1;
  int st = sim_stream_info(s, &dev, NULL);
  if (st) return RET_SIM(st);
  *pctx = &g_ctx[dev];
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags) {
  CHECK_INIT();
  if (Flags != 0) return RET(CUDA_ERROR_INVALID_VALUE, "flags must be 0");
  struct sim_stream* s;
  CUresult r = resolve_stream(hStream, &s);
  if (r) return RET(r, "bad stream");
  return RET_SIM(sim_stream_wait_event(s, (struct sim_event*)hEvent));
}

CUresult CUDAAPI cuEventCreate(CUevent* phEvent, unsigned int Flags) {
  CHECK_INIT();
  if (phEvent == NULL) return RET(CUDA_ERROR_INVALID_VALUE, "NULL");
  if (Flags & ~(unsigned)(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS))
    return RET(CUDA_ERROR_INVALID_VALUE, "bad flags");
  int dev;
  CUresult r = current_device(&dev);
  if (r) return RET(r, "no current context");
  struct sim_event* e = NULL;
  int st = sim_event_create(dev, Flags, &e);
  if (st) return RET_SIM(st);
  *phEvent = (CUevent)e;
  return CUDA_SUCCESS;
}

/* ---- IPC (sim_core.h: memfds named through /proc/PID/fd) --------------- */

CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle* pHandle, CUdeviceptr dptr) {
  CHECK_INIT();
  if (pHandle == NULL) return RET(CUDA_ERROR_INVALID_VALUE, "NULL");
  _Static_assert(sizeof(pHandle->reserved) >= SIM_IPC_HANDLE_SIZE, "CUipcMemHandle size");
  return RET_SIM(sim_ipc_mem_get((void*)(uintptr_t)dptr, (unsigned char*)pHandle->reserved));
}

CUresult CUDAAPI cuIpcOpenMemHandle(CUdeviceptr* pdptr, CUipcMemHandle handle,
                                    unsigned int Flags) {
  CHECK_INIT();
  if (pdptr == NULL) return RET(CUDA_ERROR_INVALID_VALUE, "NULL");
  if (Flags & ~(unsigned)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)
    return RET(CUDA_ERROR_INVALID_VALUE, "bad flags");
  int dev;
  CUresult r = current_device(&dev);
  if (r) return RET(r, "no current context");
  void* p = NULL;
  int st = sim_ipc_mem_open(dev, (const unsigned char*)handle.reserved, &p);
  if (st) return RET_SIM(st);
  *pdptr = (CUdeviceptr)(uintptr_t)p;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuIpcCloseMemHandle(CUdeviceptr dptr) {
  CHECK_INIT();
  int dev;
  CUresult r = current_device(&dev);
  if (r) return RET(r, "no current context");
  return RET_SIM(sim_ipc_mem_close((void*)(uintptr_t)dptr));
}

CUresult CUDAAPI cuIpcGetEventHandle(CUipcEventHandle* pHandle, CUevent event) {
  CHECK_INIT();
  if (pHandle == NULL) return RET(CUDA_ERROR_INVALID_VALUE, "NULL");
  unsigned flags = 0;
  int st = sim_event_info((struct sim_event*)event, NULL, &flags);
  if (st) return RET_SIM(st);
  if (!(flags & CU_EVENT_INTERPROCESS) || !(flags & CU_EVENT_DISABLE_TIMING))
    return RET(CUDA_ERROR_INVALID_VALUE,
               "the event needs CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING");
  return RET_SIM(sim_event_ipc_get((struct sim_event*)event, (unsigned char*)pHandle->reserved));
}

CUresult CUDAAPI cuIpcOpenEventHandle(CUevent* phEvent, CUipcEventHandle handle) {
  CHECK_INIT();
  if (phEvent == NULL) return RET(CUDA_ERROR_INVALID_VALUE, "NULL");
  int dev;
  CUresult r = current_device(&dev);
  if (r) return RET(r, "no current context");
  struct sim_event* e = NULL;
  int st = sim_event_ipc_open(dev, (const unsigned char*)handle.reserved, &e);
  if (st) return RET_SIM(st);
  *phEvent = (CUevent)e;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventDestroy(CUevent hEvent) {
  CHECK_INIT();
  int fault = sim_fault_take("cuEventDestroy");
  if (fault != 0) return RET((CUresult)fault, "injected fault (adr_sim_cuda_fail_next)");
  return RET_SIM(sim_event_destroy((struct sim_event*)hEvent));
}

CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream) {
  CHECK_INIT();
  struct sim_stream* s;
  CUresult r = resolve_stream(hStream, &s);
  if (r) return RET(r, "bad stream");
  int edev = -1, sdev = -2;
  int st = sim_event_info((struct sim_event*)hEvent, &edev, NULL);
  if (st == SIM_SUCCESS) st = sim_stream_info(s, &sdev, NULL);
  if (st) return RET_SIM(st);
  if (edev != sdev)
    return RET(CUDA_ERROR_INVALID_HANDLE, "event and stream belong to different contexts");
  return RET_SIM(sim_event_record((struct sim_event*)hEvent, s));
}

CUresult CUDAAPI cuEventSynchronize(CUevent hEvent) {
  CHECK_INIT();
  return RET_SIM(sim_event_synchronize((struct sim_event*)hEvent));
}

CUresult CUDAAPI cuEventQuery(CUevent hEvent) {
  CHECK_INIT();
  return RET_SIM(sim_event_query((struct sim_event*)hEvent));
}

/* ---- pointer attributes ------------------------------------------------- */

/* Fills one attribute; `valid` is false for memory the driver does not know
 * (the attributes then take their "not a CUDA pointer" values). */
static CUresult pointer_attribute(void* data, CUpointer_attribute a, CUdeviceptr ptr,
                                  const struct sim_ptr_info* info, bool valid) {
  bool host = info->kind == SIM_MEM_HOST || info->kind == SIM_MEM_REGISTERED;
  switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      *(CUcontext*)data = valid ? &g_ctx[info->device] : NULL;
      break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *(unsigned int*)data = !valid ? 0u
                             : host ? (unsigned)CU_MEMORYTYPE_HOST
                                    : (unsigned)CU_MEMORYTYPE_DEVICE;
      break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      *(CUdeviceptr*)data = valid ? ptr : 0;
      break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      *(void**)data = valid && info->kind != SIM_MEM_DEVICE ? (void*)(uintptr_t)ptr : NULL;
      break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      *(bool*)data = valid && info->kind == SIM_MEM_MANAGED;
      break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *(int*)data = valid ? info->device : -2;
      break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *(CUdeviceptr*)data = valid ? (CUdeviceptr)(uintptr_t)info->base : 0;
      break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      *(size_t*)data = valid ? info->size : 0;
      break;
    case CU_POINTER_ATTRIBUTE_MAPPED:
      *(bool*)data = valid;
      break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
      *(unsigned long long*)data = valid ? info->alloc_id : 0;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute* attributes,
                                        void** data, CUdeviceptr ptr) {
  CHECK_INIT();
  if (numAttributes == 0 || attributes == NULL || data == NULL)
    return RET(CUDA_ERROR_INVALID_VALUE, "bad arguments");
  struct sim_ptr_info info = {SIM_MEM_NONE, -1, NULL, 0, 0};
  bool valid =
      sim_ptr_query((void*)(uintptr_t)ptr, &info) == SIM_SUCCESS && info.kind != SIM_MEM_NONE;
  for (unsigned i = 0; i < numAttributes; i++) {
    if (data[i] == NULL) return RET(CUDA_ERROR_INVALID_VALUE, "NULL data slot");
    CUresult r = pointer_attribute(data[i], attributes[i], ptr, &info, valid);
    if (r) return RET(r, "attribute not modelled by the simulator");
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  CHECK_INIT();
  if (data == NULL) return RET(CUDA_ERROR_INVALID_VALUE, "NULL");
  struct sim_ptr_info info = {SIM_MEM_NONE, -1, NULL, 0, 0};
  int st = sim_ptr_query((void*)(uintptr_t)ptr, &info);
  if (st) return RET_SIM(st);
  if (info.kind == SIM_MEM_NONE) return RET(CUDA_ERROR_INVALID_VALUE, "not a CUDA pointer");
  return RET(pointer_attribute(data, attribute, ptr, &info, true), "attribute");
}

/* ---- entry points ------------------------------------------------------- */

struct proc {
  const char* name;
  int version; /* first CUDA version with this entry point's ABI */
  void* fn;
};

static const struct proc k_procs[] = {
#define P(name, fn, version) \
  { name, version, (void*)&fn }
    P("cuInit", cuInit, 2000),
    P("cuDriverGetVersion", cuDriverGetVersion, 2020),
    P("cuGetErrorName", cuGetErrorName, 6000),
    P("cuGetErrorString", cuGetErrorString, 6000),
    P("cuGetProcAddress", cuGetProcAddress, 12000),
    P("cuDeviceGetCount", cuDeviceGetCount, 2000),
    P("cuDeviceGet", cuDeviceGet, 2000),
    P("cuDeviceGetName", cuDeviceGetName, 2000),
    P("cuDeviceTotalMem", cuDeviceTotalMem, 3020),
    P("cuDeviceGetAttribute", cuDeviceGetAttribute, 2000),
    P("cuDeviceGetPCIBusId", cuDeviceGetPCIBusId, 4010),
    P("cuDeviceGetUuid", cuDeviceGetUuid, 11040),
    P("cuDeviceCanAccessPeer", cuDeviceCanAccessPeer, 4000),
    P("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain, 7000),
    P("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease, 11000),
    P("cuCtxGetCurrent", cuCtxGetCurrent, 4000),
    P("cuCtxSetCurrent", cuCtxSetCurrent, 4000),
    P("cuCtxPushCurrent", cuCtxPushCurrent, 4000),
    P("cuCtxPopCurrent", cuCtxPopCurrent, 4000),
    P("cuCtxGetDevice", cuCtxGetDevice, 2000),
    P("cuCtxSynchronize", cuCtxSynchronize, 2000),
    P("cuCtxEnablePeerAccess", cuCtxEnablePeerAccess, 4000),
    P("cuMemGetInfo", cuMemGetInfo, 3020),
    P("cuMemAlloc", cuMemAlloc, 3020),
    P("cuMemFree", cuMemFree, 3020),
    P("cuMemAllocManaged", cuMemAllocManaged, 6000),
    P("cuMemHostAlloc", cuMemHostAlloc, 2020),
    P("cuMemFreeHost", cuMemFreeHost, 2000),
    P("cuMemAllocAsync", cuMemAllocAsync, 11020),
    P("cuMemFreeAsync", cuMemFreeAsync, 11020),
    P("cuMemGetAddressRange", cuMemGetAddressRange, 3020),
    P("cuMemHostRegister", cuMemHostRegister, 6050),
    P("cuMemHostUnregister", cuMemHostUnregister, 4000),
    P("cuMemcpyAsync", cuMemcpyAsync, 4000),
    P("cuMemcpyPeerAsync", cuMemcpyPeerAsync, 4000),
    P("cuMemcpyHtoDAsync", cuMemcpyHtoDAsync, 3020),
    P("cuMemcpyDtoHAsync", cuMemcpyDtoHAsync, 3020),
    P("cuMemcpyDtoDAsync", cuMemcpyDtoDAsync, 3020),
    P("cuMemcpyHtoD", cuMemcpyHtoD, 3020),
    P("cuMemcpyDtoH", cuMemcpyDtoH, 3020),
    P("cuMemsetD8Async", cuMemsetD8Async, 3020),
    P("cuLaunchHostFunc", cuLaunchHostFunc, 10000),
    P("cuStreamCreate", cuStreamCreate, 2000),
    P("cuStreamDestroy", cuStreamDestroy, 4000),
    P("cuStreamSynchronize", cuStreamSynchronize, 2000),
    P("cuStreamQuery", cuStreamQuery, 2000),
    P("cuStreamGetCtx", cuStreamGetCtx, 9020),
    P("cuStreamWaitEvent", cuStreamWaitEvent, 3020),
    P("cuEventCreate", cuEventCreate, 2000),
    P("cuEventDestroy", cuEventDestroy, 4000),
    P("cuEventRecord", cuEventRecord, 2000),
    P("cuEventSynchronize", cuEventSynchronize, 2000),
    P("cuEventQuery", cuEventQuery, 2000),
    P("cuPointerGetAttributes", cuPointerGetAttributes, 7000),
    P("cuPointerGetAttribute", cuPointerGetAttribute, 4000),
    P("cuIpcGetMemHandle", cuIpcGetMemHandle, 4010),
    P("cuIpcOpenMemHandle", cuIpcOpenMemHandle, 11000),
    P("cuIpcCloseMemHandle", cuIpcCloseMemHandle, 4010),
    P("cuIpcGetEventHandle", cuIpcGetEventHandle, 4010),
    P("cuIpcOpenEventHandle", cuIpcOpenEventHandle, 4010),
#undef P
};

CUresult CUDAAPI cuGetProcAddress(const char* symbol, void** pfn, int cudaVersion, cuuint64_t flags,
                                  CUdriverProcAddressQueryResult* symbolStatus) {
  if (symbol == NULL || pfn == NULL) return RET(CUDA_ERROR_INVALID_VALUE, "NULL");
  if (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                            CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
    return RET(CUDA_ERROR_INVALID_VALUE, "bad flags");
  *pfn = NULL;
  for (size_t i = 0; i < sizeof(k_procs) / sizeof(k_procs[0]); i++) {
    if (strcmp(k_procs[i].name, symbol) != 0) continue;
    if (cudaVersion < k_procs[i].version) {
      if (symbolStatus) *symbolStatus = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
      return RET(CUDA_ERROR_NOT_FOUND, "version not sufficient");
    }
    *pfn = k_procs[i].fn;
    if (symbolStatus) *symbolStatus = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
  }
  if (symbolStatus) *symbolStatus = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return RET(CUDA_ERROR_NOT_FOUND, symbol);
}

/* Test hooks (not part of the CUDA API): tests reach them with dlsym on the
 * already-loaded libcuda.so.1. */
void adr_sim_cuda_alloc_fail(unsigned long long nth, int once);
void adr_sim_cuda_delay(unsigned microseconds);
unsigned long long adr_sim_cuda_live_allocations(void);
void adr_sim_cuda_fail_next(const char* entry, int code);
int adr_sim_cuda_context_refs(int device);
/* The primary context's retain count of `device` (lazy-open tests). */
int adr_sim_cuda_context_refs(int device) {
  if (device < 0 || device >= SIM_MAX_DEVICES) return -1;
  pthread_mutex_lock(&g_ctx_lock);
  int refs = g_ctx[device].refs;
  pthread_mutex_unlock(&g_ctx_lock);
  return refs;
}
void adr_sim_cuda_alloc_fail(unsigned long long nth, int once) {
  sim_alloc_fail_set(nth, once);
}
void adr_sim_cuda_delay(unsigned microseconds) {
  sim_delay_set(microseconds);
}
unsigned long long adr_sim_cuda_live_allocations(void) {
  return sim_live_allocations();
}
/* The next call of `entry` (cuStreamDestroy, cuEventDestroy,
 * cuDevicePrimaryCtxRetain) fails with
 * `code` and does nothing. */
void adr_sim_cuda_fail_next(const char* entry, int code) {
  sim_fault_next(entry, code);
}

#pragma GCC visibility pop
