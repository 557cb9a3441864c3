/* SPDX-License-Identifier: Apache-2.0
 *
 * HIP runtime simulator: a TEST DOUBLE of libamdhip64, built on the shared
 * simulator core (tests/sim/sim_core.h), so the HIP backend and the whole
 * conformance suite run on a machine without an AMD GPU. It implements the
 * subset of the HIP runtime API that backends/hip uses (plus the few
 * calls the HIP tests and benchmark make directly), with the runtime's
 * result codes. It is not a HIP implementation: no kernels, no modules, no
 * graphs. See tests/sim/hip/README.md.
 *
 * Handles: hipStream_t is a struct sim_stream*, hipEvent_t a struct
 * sim_event*, hipDevice_t the ordinal. The NULL stream is one lazily
 * created simulator stream per device; the legacy NULL stream's implicit
 * synchronisation with blocking streams is not modelled (adr never uses
 * it).
 *
 * Knobs beyond the core's ADR_SIM_* variables:
 *   HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES  as the runtime applies them:
 *       a comma list of simulator ordinals; the list stops at the first
 *       entry that is not a valid ordinal.
 *   ADR_SIM_HIP_VERSION  runtime version to report, "MAJOR.MINOR" (default
 *       6.2). It also selects the hipMemoryType numbering
 *       hipPointerGetAttributes uses (before 6.0: Host 0, Device 1; from
 *       6.0: Host 1, Device 2), as the real runtimes differ.
 *   ADR_SIM_HIP_NO_MEMPOOL=1  hipDeviceGetDefaultMemPool fails with
 *       hipErrorNotSupported (a runtime/device without stream-ordered
 *       allocation).
 *
 * Test hooks (not HIP API): adr_sim_hip_calls(name) returns how often an
 * entry point was called (hipSetDevice, hipMallocAsync, hipMalloc ...);
 * adr_sim_hip_alloc_fail(nth, once) is the core's allocation-failure knob
 * (ADR_SIM_ALLOC_FAIL) at run time.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_core.h"

/* The HIP declarations get default visibility so the definitions below
 * are exported although the project builds with -fvisibility=hidden. */
#pragma GCC visibility push(default)
#include <hip/hip_runtime_api.h>
int adr_sim_hip_calls(const char* name);
unsigned long long adr_sim_hip_live_allocations(void);
void adr_sim_hip_alloc_fail(unsigned long long nth, int once);
void adr_sim_hip_fail_next(const char* entry, int code);
#pragma GCC visibility pop

/* ---- call counters ------------------------------------------------------ */

/* clang-format off */
#define COUNTED(X)                                                                  \
  X(hipSetDevice) X(hipMalloc) X(hipMallocAsync) X(hipFree) X(hipFreeAsync)         \
  X(hipHostMalloc) X(hipMemcpyAsync) X(hipMemcpyPeerAsync) X(hipStreamWaitEvent)    \
  X(hipDeviceEnablePeerAccess) X(hipInit) X(hipStreamCreateWithFlags)
/* clang-format on */

enum counter_id {
#define COUNTER_ENUM(name) counter_##name,
  COUNTED(COUNTER_ENUM)
#undef COUNTER_ENUM
      counter_count
};
static _Atomic int counters[counter_count];
#define COUNT(name) atomic_fetch_add_explicit(&counters[counter_##name], 1, memory_order_relaxed)

unsigned long long adr_sim_hip_live_allocations(void) {
  return sim_live_allocations();
}

int adr_sim_hip_calls(const char* name) {
#define COUNTER_LOOKUP(n) \
  if (strcmp(name, #n) == 0) return atomic_load(&counters[counter_##n]);
  COUNTED(COUNTER_LOOKUP)
#undef COUNTER_LOOKUP
  return -1;
}

void adr_sim_hip_alloc_fail(unsigned long long nth, int once) {
  sim_alloc_fail_set(nth, once);
}

/* The next call of `entry` (hipStreamDestroy, hipEventDestroy,
 * hipStreamCreateWithFlags) fails with
 * `code` and does nothing. */
void adr_sim_hip_fail_next(const char* entry, int code) {
  sim_fault_next(entry, code);
}

/* ---- configuration (read once) ----------------------------------------- */

static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static int visible[SIM_MAX_DEVICES]; /* HIP ordinal -> simulator device */
static int visible_count;
static int runtime_version = 60200000;
static bool no_mempool;
static int init_status; /* sim_init's status */

static int parse_int(const char* s, char** end) {
  errno = 0;
  long v = strtol(s, end, 10);
  if (errno != 0 || *end == s || v < 0 || v > 1000000) return -1;
  return (int)v;
}

static void configure(void) {
  init_status = sim_init();
  int n = init_status == SIM_SUCCESS ? sim_device_count() : 0;
  const char* list = getenv("HIP_VISIBLE_DEVICES");
  if (list == NULL) list = getenv("ROCR_VISIBLE_DEVICES");
  if (list == NULL) {
    for (int i = 0; i < n; i++) visible[visible_count++] = i;
  } else {
    const char* p = list;
    while (*p != '\0' && visible_count < SIM_MAX_DEVICES) {
      char* end;
      int d = parse_int(p, &end);
      if (d < 0 || d >= n || (*end != ',' && *end != '\0')) break;
      bool dup = false;
      for (int i = 0; i < visible_count; i++) dup |= visible[i] == d;
      if (dup) break;
      visible[visible_count++] = d;
      p = *end == ',' ? end + 1 : end;
    }
  }
  const char* v = getenv("ADR_SIM_HIP_VERSION");
  if (v != NULL) {
    char* end;
    int major = parse_int(v, &end);
    int minor = 0;
    if (major >= 0 && *end == '.') minor = parse_int(end + 1, &end);
    if (major >= 1 && minor >= 0 && minor < 100)
      runtime_version = major * 10000000 + minor * 100000;
  }
  const char* m = getenv("ADR_SIM_HIP_NO_MEMPOOL");
  no_mempool = m != NULL && strcmp(m, "1") == 0;
}

static void ensure_config(void) {
  pthread_once(&config_once, configure);
}

static _Thread_local int current_device;

/* ---- status mapping ----------------------------------------------------- */

static hipError_t map(int st) {
  switch (st) {
    case SIM_SUCCESS:
      return hipSuccess;
    case SIM_ERROR_INVALID_VALUE:
      return hipErrorInvalidValue;
    case SIM_ERROR_OUT_OF_MEMORY:
      return hipErrorOutOfMemory;
    case SIM_ERROR_NOT_INITIALIZED:
      return hipErrorNotInitialized;
    case SIM_ERROR_INVALID_DEVICE:
      return hipErrorInvalidDevice;
    case SIM_ERROR_INVALID_HANDLE:
      return hipErrorInvalidHandle;
    case SIM_ERROR_NOT_READY:
      return hipErrorNotReady;
    case SIM_ERROR_UNKNOWN_POINTER:
      return hipErrorInvalidValue;
    case SIM_ERROR_FREED_POINTER:
      return hipErrorInvalidDevicePointer;
    case SIM_ERROR_OUT_OF_BOUNDS:
      return hipErrorInvalidValue;
    case SIM_ERROR_WRONG_DEVICE:
      return hipErrorInvalidDevice;
    case SIM_ERROR_ALREADY_REGISTERED:
      return hipErrorHostMemoryAlreadyRegistered;
    case SIM_ERROR_NOT_REGISTERED:
      return hipErrorHostMemoryNotRegistered;
    case SIM_ERROR_NOT_SUPPORTED:
      return hipErrorNotSupported;
    case SIM_ERROR_INVALID_CONTEXT:
      return hipErrorInvalidContext;
    default:
      return hipErrorUnknown;
  }
}

/* The thread's "last error" (hipGetLastError / hipPeekAtLastError): set by
 * failures that come from the simulator core and by hipPointerGetAttributes
 * on unknown memory (as the runtime does); argument checks the front end
 * answers itself do not set it. */
static _Thread_local hipError_t last_error;

static hipError_t set_last(hipError_t e) {
  if (e != hipSuccess) last_error = e;
  return e;
}

hipError_t hipGetLastError(void) {
  hipError_t e = last_error;
  last_error = hipSuccess;
  return e;
}

hipError_t hipPeekAtLastError(void) {
  return last_error;
}

/* Logs the core's detail for a failure when ADR_SIM_VERBOSE=1, since HIP
 * has no channel for it. */
static hipError_t result(int st, const char* fn) {
  if (st != SIM_SUCCESS && st != SIM_ERROR_NOT_READY) set_last(map(st));
  if (st != SIM_SUCCESS) {
    const char* verbose = getenv("ADR_SIM_VERBOSE");
    if (verbose != NULL && strcmp(verbose, "1") == 0)
      fprintf(stderr, "hip-sim: %s: %s: %s\n", fn, sim_status_name(st), sim_last_message());
  }
  return map(st);
}

static int sim_device(int ordinal) {
  ensure_config();
  if (ordinal < 0 || ordinal >= visible_count) return -1;
  return visible[ordinal];
}

static int ordinal_of(int sim_dev) {
  for (int i = 0; i < visible_count; i++)
    if (visible[i] == sim_dev) return i;
  return -1;
}

/* The NULL stream of each device, created on first use. */
static pthread_mutex_t null_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sim_stream* null_streams[SIM_MAX_DEVICES];

static int resolve_stream(hipStream_t s, struct sim_stream** out) {
  if (s != NULL) {
    *out = (struct sim_stream*)s;
    return SIM_SUCCESS;
  }
  int d = sim_device(current_device);
  if (d < 0) return SIM_ERROR_INVALID_DEVICE;
  pthread_mutex_lock(&null_lock);
  int st = SIM_SUCCESS;
  if (null_streams[d] == NULL) st = sim_stream_create(d, 0, &null_streams[d]);
  *out = null_streams[d];
  pthread_mutex_unlock(&null_lock);
  return st;
}

/* ---- errors ------------------------------------------------------------- */

const char* hipGetErrorName(hipError_t e) {
  switch (e) {
#define NAME(code) \
  case code:       \
    return #code;
    /* clang-format off */
    NAME(hipSuccess) NAME(hipErrorInvalidValue) NAME(hipErrorOutOfMemory)
    NAME(hipErrorNotInitialized) NAME(hipErrorInvalidDevicePointer) NAME(hipErrorNoDevice)
    NAME(hipErrorInvalidDevice) NAME(hipErrorInvalidHandle) NAME(hipErrorNotReady)
    NAME(hipErrorHostMemoryAlreadyRegistered) NAME(hipErrorHostMemoryNotRegistered)
    NAME(hipErrorNotSupported) NAME(hipErrorPeerAccessAlreadyEnabled)
    NAME(hipErrorInvalidMemcpyDirection) NAME(hipErrorPeerAccessNotEnabled)
    /* clang-format on */
#undef NAME
                            default : return "hipErrorUnknown";
  }
}

/* Like AMD's runtime, the "string" is the name again. */
const char* hipGetErrorString(hipError_t e) {
  return hipGetErrorName(e);
}

/* ---- init, devices ------------------------------------------------------ */

hipError_t hipInit(unsigned int flags) {
  COUNT(hipInit);
  ensure_config();
  if (flags != 0) return hipErrorInvalidValue;
  if (init_status != SIM_SUCCESS) return result(init_status, "hipInit");
  return visible_count > 0 ? hipSuccess : hipErrorInvalidDevice;
}

hipError_t hipGetDeviceCount(int* count) {
  ensure_config();
  if (count == NULL) return hipErrorInvalidValue;
  *count = visible_count;
  return visible_count > 0 ? hipSuccess : hipErrorNoDevice;
}

hipError_t hipDeviceGet(hipDevice_t* device, int ordinal) {
  if (device == NULL) return hipErrorInvalidValue;
  if (sim_device(ordinal) < 0) return hipErrorInvalidDevice;
  *device = ordinal;
  return hipSuccess;
}

hipError_t hipSetDevice(int device) {
  COUNT(hipSetDevice);
  if (sim_device(device) < 0) return hipErrorInvalidDevice;
  current_device = device;
  return hipSuccess;
}

hipError_t hipGetDevice(int* device) {
  if (device == NULL) return hipErrorInvalidValue;
  *device = current_device;
  return hipSuccess;
}

const char sim_frontend_name[] = "hip";

hipError_t hipDeviceGetUuid(hipUUID* uuid, hipDevice_t device) {
  int d = sim_device(device);
  if (uuid == NULL) return hipErrorInvalidValue;
  if (d < 0) return hipErrorInvalidDevice;
  memcpy(uuid->bytes, sim_device_props(d)->uuid, sizeof(uuid->bytes));
  return hipSuccess;
}

hipError_t hipGetDeviceProperties(hipDeviceProp_t* prop, int device) {
  int d = sim_device(device);
  if (prop == NULL) return hipErrorInvalidValue;
  if (d < 0) return hipErrorInvalidDevice;
  const struct sim_device_props* p = sim_device_props(d);
  if (p == NULL) return hipErrorInvalidDevice;
  memset(prop, 0, sizeof(*prop));
  snprintf(prop->name, sizeof(prop->name), "%s (HIP simulator)", p->name);
  snprintf(prop->gcnArchName, sizeof(prop->gcnArchName), "gfx000-sim");
  prop->totalGlobalMem = p->memory_total;
  prop->pciDomainID = p->pci_domain;
  prop->pciBusID = p->pci_bus;
  prop->pciDeviceID = p->pci_device;
  prop->integrated = p->integrated;
  prop->major = p->cc_major;
  prop->minor = p->cc_minor;
  prop->multiProcessorCount = p->multiprocessors;
  prop->clockRate = 1000000;
  prop->memoryClockRate = 1000000;
  prop->memoryBusWidth = 4096;
  prop->l2CacheSize = 8 << 20;
  prop->managedMemory = 1;
  prop->canMapHostMemory = 1;
  return hipSuccess;
}

hipError_t hipMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  int d = sim_device(current_device);
  if (free_bytes == NULL || total_bytes == NULL) return hipErrorInvalidValue;
  if (d < 0) return hipErrorInvalidDevice;
  uint64_t f = 0, t = 0;
  int st = sim_mem_info(d, &f, &t);
  *free_bytes = (size_t)f;
  *total_bytes = (size_t)t;
  return result(st, "hipMemGetInfo");
}

hipError_t hipRuntimeGetVersion(int* version) {
  ensure_config();
  if (version == NULL) return hipErrorInvalidValue;
  *version = runtime_version;
  return hipSuccess;
}

hipError_t hipDriverGetVersion(int* version) {
  return hipRuntimeGetVersion(version);
}

hipError_t hipDeviceCanAccessPeer(int* can, int device, int peer) {
  if (can == NULL) return hipErrorInvalidValue;
  if (sim_device(device) < 0 || sim_device(peer) < 0) return hipErrorInvalidDevice;
  *can = device != peer;
  return hipSuccess;
}

static pthread_mutex_t peer_lock = PTHREAD_MUTEX_INITIALIZER;
static bool peer_enabled[SIM_MAX_DEVICES][SIM_MAX_DEVICES];

hipError_t hipDeviceEnablePeerAccess(int peer, unsigned int flags) {
  COUNT(hipDeviceEnablePeerAccess);
  int d = sim_device(current_device), p = sim_device(peer);
  if (flags != 0) return hipErrorInvalidValue;
  if (d < 0 || p < 0 || d == p) return hipErrorInvalidDevice;
  pthread_mutex_lock(&peer_lock);
  bool was = peer_enabled[d][p];
  peer_enabled[d][p] = true;
  pthread_mutex_unlock(&peer_lock);
  return was ? hipErrorPeerAccessAlreadyEnabled : hipSuccess;
}

hipError_t hipDeviceSynchronize(void) {
  int d = sim_device(current_device);
  if (d < 0) return hipErrorInvalidDevice;
  return result(sim_device_synchronize(d), "hipDeviceSynchronize");
}

/* ---- memory ------------------------------------------------------------- */

hipError_t hipMalloc(void** ptr, size_t size) {
  COUNT(hipMalloc);
  if (ptr == NULL) return hipErrorInvalidValue;
  *ptr = NULL;
  if (size == 0) return hipSuccess;
  int d = sim_device(current_device);
  if (d < 0) return hipErrorInvalidDevice;
  return result(sim_mem_alloc(d, SIM_MEM_DEVICE, size, ptr), "hipMalloc");
}

hipError_t hipFree(void* ptr) {
  COUNT(hipFree);
  if (ptr == NULL) return hipSuccess;
  return result(sim_mem_free(ptr, SIM_MEM_DEVICE), "hipFree");
}

hipError_t hipHostMalloc(void** ptr, size_t size, unsigned int flags) {
  COUNT(hipHostMalloc);
  if (ptr == NULL) return hipErrorInvalidValue;
  *ptr = NULL;
  if (size == 0) return hipSuccess;
  int d = sim_device(current_device);
  if (d < 0) return hipErrorInvalidDevice;
  return result(sim_mem_alloc(d, SIM_MEM_HOST, size, ptr), "hipHostMalloc");
}

hipError_t hipHostFree(void* ptr) {
  if (ptr == NULL) return hipSuccess;
  return result(sim_mem_free(ptr, SIM_MEM_HOST), "hipHostFree");
}

hipError_t hipHostRegister(void* ptr, size_t size, unsigned int flags) {
  if (ptr == NULL || size == 0) return hipErrorInvalidValue;
  int d = sim_device(current_device);
  if (d < 0) return hipErrorInvalidDevice;
  return result(sim_mem_register(d, ptr, size), "hipHostRegister");
}

hipError_t hipHostUnregister(void* ptr) {
  if (ptr == NULL) return hipErrorInvalidValue;
  return result(sim_mem_unregister(ptr), "hipHostUnregister");
}

hipError_t hipDeviceGetDefaultMemPool(hipMemPool_t* pool, int device) {
  static char pools[SIM_MAX_DEVICES];
  if (pool == NULL) return hipErrorInvalidValue;
  int d = sim_device(device);
  if (d < 0) return hipErrorInvalidDevice;
  if (no_mempool) return hipErrorNotSupported;
  *pool = (hipMemPool_t)(void*)&pools[d];
  return hipSuccess;
}

hipError_t hipMallocAsync(void** ptr, size_t size, hipStream_t stream) {
  COUNT(hipMallocAsync);
  if (ptr == NULL) return hipErrorInvalidValue;
  *ptr = NULL;
  if (no_mempool) return hipErrorNotSupported;
  if (size == 0) return hipSuccess;
  struct sim_stream* s;
  int st = resolve_stream(stream, &s);
  if (st == SIM_SUCCESS) st = sim_mem_alloc_async(size, s, ptr);
  return result(st, "hipMallocAsync");
}

hipError_t hipFreeAsync(void* ptr, hipStream_t stream) {
  COUNT(hipFreeAsync);
  if (ptr == NULL) return hipSuccess;
  struct sim_stream* s;
  int st = resolve_stream(stream, &s);
  if (st == SIM_SUCCESS) st = sim_mem_free_async(ptr, s);
  return result(st, "hipFreeAsync");
}

hipError_t hipPointerGetAttributes(hipPointerAttribute_t* attr, const void* ptr) {
  ensure_config();
  if (attr == NULL || ptr == NULL) return hipErrorInvalidValue;
  struct sim_ptr_info info;
  int st = sim_ptr_query(ptr, &info);
  if (st != SIM_SUCCESS) return result(st, "hipPointerGetAttributes");
  if (info.kind == SIM_MEM_NONE) return set_last(hipErrorInvalidValue);
  bool v6 = runtime_version >= 60000000;
  int type;
  switch (info.kind) {
    case SIM_MEM_DEVICE:
      type = v6 ? 2 : 1;
      break;
    case SIM_MEM_MANAGED:
      type = 3;
      break; /* Unified (5.x), Managed (6.x) */
    default:
      type = v6 ? 1 : 0;
      break; /* pinned or registered host */
  }
  memset(attr, 0, sizeof(*attr));
  memcpy(attr, &type, sizeof(type)); /* the first member: memoryType / type */
  attr->device = ordinal_of(info.device);
  attr->devicePointer = (void*)ptr;
  attr->hostPointer = info.kind == SIM_MEM_DEVICE ? NULL : (void*)ptr;
  attr->isManaged = info.kind == SIM_MEM_MANAGED;
  return hipSuccess;
}

/* ---- copies ------------------------------------------------------------- */

hipError_t hipMemcpyAsync(void* dst, const void* src, size_t size, hipMemcpyKind kind,
                          hipStream_t stream) {
  COUNT(hipMemcpyAsync);
  if ((int)kind < (int)hipMemcpyHostToHost || (int)kind > (int)hipMemcpyDefault)
    return hipErrorInvalidMemcpyDirection;
  if (size == 0) return hipSuccess;
  if (dst == NULL || src == NULL) return hipErrorInvalidValue;
  struct sim_stream* s;
  int st = resolve_stream(stream, &s);
  /* Cross-device copies must go through hipMemcpyPeerAsync (or Default):
   * the simulator is strict here so a backend that gets it wrong fails. */
  if (st == SIM_SUCCESS) st = sim_memcpy_async(dst, src, size, kind == hipMemcpyDefault, s);
  return result(st, "hipMemcpyAsync");
}

hipError_t hipMemcpyPeerAsync(void* dst, int dst_device, const void* src, int src_device,
                              size_t size, hipStream_t stream) {
  COUNT(hipMemcpyPeerAsync);
  int dd = sim_device(dst_device), sd = sim_device(src_device);
  if (dd < 0 || sd < 0) return hipErrorInvalidDevice;
  if (size == 0) return hipSuccess;
  struct sim_ptr_info di, si;
  if (sim_ptr_query(dst, &di) != SIM_SUCCESS || sim_ptr_query(src, &si) != SIM_SUCCESS ||
      di.device != dd || si.device != sd)
    return hipErrorInvalidValue;
  struct sim_stream* s;
  int st = resolve_stream(stream, &s);
  if (st == SIM_SUCCESS) st = sim_memcpy_async(dst, src, size, 1, s);
  return result(st, "hipMemcpyPeerAsync");
}

hipError_t hipMemsetAsync(void* dst, int value, size_t size, hipStream_t stream) {
  if (size == 0) return hipSuccess;
  struct sim_stream* s;
  int st = resolve_stream(stream, &s);
  if (st == SIM_SUCCESS) st = sim_memset_async(dst, (unsigned char)value, size, s);
  return result(st, "hipMemsetAsync");
}

/* ---- streams ------------------------------------------------------------ */

hipError_t hipStreamCreateWithFlags(hipStream_t* stream, unsigned int flags) {
  if (stream == NULL || (flags & ~(unsigned)hipStreamNonBlocking) != 0) return hipErrorInvalidValue;
  COUNT(hipStreamCreateWithFlags);
  int fault = sim_fault_take("hipStreamCreateWithFlags");
  if (fault != 0) return set_last((hipError_t)fault);
  int d = sim_device(current_device);
  if (d < 0) return hipErrorInvalidDevice;
  struct sim_stream* s = NULL;
  int st = sim_stream_create(d, flags, &s);
  *stream = (hipStream_t)s;
  return result(st, "hipStreamCreateWithFlags");
}

hipError_t hipStreamCreate(hipStream_t* stream) {
  return hipStreamCreateWithFlags(stream, 0);
}

hipError_t hipStreamDestroy(hipStream_t stream) {
  int fault = sim_fault_take("hipStreamDestroy");
  if (fault != 0) return set_last((hipError_t)fault);
  if (stream == NULL) return hipErrorInvalidHandle;
  return result(sim_stream_destroy((struct sim_stream*)stream), "hipStreamDestroy");
}

hipError_t hipStreamSynchronize(hipStream_t stream) {
  struct sim_stream* s;
  int st = resolve_stream(stream, &s);
  if (st == SIM_SUCCESS) st = sim_stream_synchronize(s);
  return result(st, "hipStreamSynchronize");
}

hipError_t hipStreamQuery(hipStream_t stream) {
  struct sim_stream* s;
  int st = resolve_stream(stream, &s);
  if (st == SIM_SUCCESS) st = sim_stream_query(s);
  return map(st);
}

hipError_t hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned int flags) {
  COUNT(hipStreamWaitEvent);
  if (event == NULL || flags != 0) return hipErrorInvalidValue;
  struct sim_stream* s;
  int st = resolve_stream(stream, &s);
  if (st == SIM_SUCCESS) st = sim_stream_wait_event(s, (struct sim_event*)event);
  return result(st, "hipStreamWaitEvent");
}

hipError_t hipLaunchHostFunc(hipStream_t stream, hipHostFn_t fn, void* user_data) {
  if (fn == NULL) return hipErrorInvalidValue;
  struct sim_stream* s;
  int st = resolve_stream(stream, &s);
  if (st == SIM_SUCCESS) st = sim_host_func_async(s, fn, user_data);
  return result(st, "hipLaunchHostFunc");
}

/* ---- events ------------------------------------------------------------- */

hipError_t hipEventCreateWithFlags(hipEvent_t* event, unsigned flags) {
  if (event == NULL) return hipErrorInvalidValue;
  int d = sim_device(current_device);
  if (d < 0) return hipErrorInvalidDevice;
  struct sim_event* e = NULL;
  int st = sim_event_create(d, flags, &e);
  *event = (hipEvent_t)e;
  return result(st, "hipEventCreateWithFlags");
}

/* ---- IPC (sim_core.h: memfds named through /proc/PID/fd) --------------- */

hipError_t hipIpcGetMemHandle(hipIpcMemHandle_t* handle, void* devPtr) {
  if (handle == NULL) return hipErrorInvalidValue;
  _Static_assert(sizeof(handle->reserved) >= SIM_IPC_HANDLE_SIZE, "hipIpcMemHandle_t size");
  return result(sim_ipc_mem_get(devPtr, (unsigned char*)handle->reserved), "hipIpcGetMemHandle");
}

hipError_t hipIpcOpenMemHandle(void** devPtr, hipIpcMemHandle_t handle, unsigned int flags) {
  if (devPtr == NULL || flags != hipIpcMemLazyEnablePeerAccess) return hipErrorInvalidValue;
  int d = sim_device(current_device);
  if (d < 0) return hipErrorInvalidDevice;
  return result(sim_ipc_mem_open(d, (const unsigned char*)handle.reserved, devPtr),
                "hipIpcOpenMemHandle");
}

hipError_t hipIpcCloseMemHandle(void* devPtr) {
  return result(sim_ipc_mem_close(devPtr), "hipIpcCloseMemHandle");
}

hipError_t hipIpcGetEventHandle(hipIpcEventHandle_t* handle, hipEvent_t event) {
  if (handle == NULL) return hipErrorInvalidValue;
  unsigned flags = 0;
  int st = sim_event_info((struct sim_event*)event, NULL, &flags);
  if (st) return result(st, "hipIpcGetEventHandle");
  if (!(flags & hipEventInterprocess) || !(flags & hipEventDisableTiming)) return hipErrorInvalidValue;
  return result(sim_event_ipc_get((struct sim_event*)event, (unsigned char*)handle->reserved),
                "hipIpcGetEventHandle");
}

hipError_t hipIpcOpenEventHandle(hipEvent_t* event, hipIpcEventHandle_t handle) {
  if (event == NULL) return hipErrorInvalidValue;
  int d = sim_device(current_device);
  if (d < 0) return hipErrorInvalidDevice;
  struct sim_event* e = NULL;
  int st = sim_event_ipc_open(d, (const unsigned char*)handle.reserved, &e);
  if (st == 0) *event = (hipEvent_t)e;
  return result(st, "hipIpcOpenEventHandle");
}

hipError_t hipEventCreate(hipEvent_t* event) {
  return hipEventCreateWithFlags(event, 0);
}

hipError_t hipEventDestroy(hipEvent_t event) {
  int fault = sim_fault_take("hipEventDestroy");
  if (fault != 0) return set_last((hipError_t)fault);
  if (event == NULL) return hipErrorInvalidHandle;
  return result(sim_event_destroy((struct sim_event*)event), "hipEventDestroy");
}

hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream) {
  if (event == NULL) return hipErrorInvalidHandle;
  struct sim_stream* s;
  int st = resolve_stream(stream, &s);
  if (st == SIM_SUCCESS) st = sim_event_record((struct sim_event*)event, s);
  return result(st, "hipEventRecord");
}

hipError_t hipEventSynchronize(hipEvent_t event) {
  if (event == NULL) return hipErrorInvalidHandle;
  return result(sim_event_synchronize((struct sim_event*)event), "hipEventSynchronize");
}

hipError_t hipEventQuery(hipEvent_t event) {
  if (event == NULL) return hipErrorInvalidHandle;
  return map(sim_event_query((struct sim_event*)event));
}
