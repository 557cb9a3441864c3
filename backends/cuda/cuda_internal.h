/* SPDX-License-Identifier: Apache-2.0
 *
 * Internals of the CUDA backend (libadr_cuda.so), shared by its files:
 *   cuda_loader.c   dlopen of libcuda.so.1 and the entry-point table
 *   cuda_status.c   CUresult -> errno status + message (the only place)
 *   cuda_device.c   init, devices, info, properties, native handles
 *   cuda_memory.c   alloc/free, copies (incl. staged pageable copies), memset, host register,
 *                   pointer query
 *   cuda_sync.c     streams and events, import of foreign ones
 *   cuda_share.c    sharing with other processes: IPC memory and event handles
 *   cuda_backend.c  the vtable and adr_backend_query
 *
 * Current-context discipline: every call into the driver that depends on
 * the calling thread's current context runs between cuda_current_enter() and
 * cuda_current_leave(), which push the device's primary context only when it is
 * not already current and pop it afterwards, so the application's current
 * context is the same after every adr call as before it. Nothing is cached
 * per thread, so applications may change their current context at will.
 */
#ifndef ADR_CUDA_INTERNAL_H
#define ADR_CUDA_INTERNAL_H

#include <cuda.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "adr/backend.h"
#include "adr/cuda.h"
#include "host.h"
#include "range_map.h"
#include "staging.h"

#define CUDA_BACKEND_NAME "cuda"

/* ---- the driver entry points -------------------------------------------- */

/* One list: X(symbol, required). `symbol` is written unversioned; cuda.h's
 * macros turn it into the versioned ABI name (cuMemAlloc -> cuMemAlloc_v2)
 * wherever it is expanded, so the table's fields carry the versioned names
 * and `cuda_api.cuMemAlloc(...)` calls the right one. The unversioned
 * spelling (#symbol) is what cuGetProcAddress takes; the versioned one is
 * the dlsym fallback. */
#define CUDA_SYMBOLS(X)           \
  X(cuDeviceGetCount, 1)          \
  X(cuDeviceGet, 1)               \
  X(cuDeviceGetName, 1)           \
  X(cuDeviceGetAttribute, 1)      \
  X(cuDeviceTotalMem, 1)          \
  X(cuDeviceGetPCIBusId, 1)       \
  X(cuDeviceGetUuid, 1)           \
  X(cuDevicePrimaryCtxRetain, 1)  \
  X(cuDevicePrimaryCtxRelease, 1) \
  X(cuCtxGetCurrent, 1)           \
  X(cuCtxPushCurrent, 1)          \
  X(cuCtxPopCurrent, 1)           \
  X(cuMemGetInfo, 1)              \
  X(cuMemAlloc, 1)                \
  X(cuMemFree, 1)                 \
  X(cuMemAllocManaged, 1)         \
  X(cuMemHostAlloc, 1)            \
  X(cuMemFreeHost, 1)             \
  X(cuMemGetAddressRange, 1)      \
  X(cuMemHostRegister, 1)         \
  X(cuMemHostUnregister, 1)       \
  X(cuMemcpyAsync, 1)             \
  X(cuMemcpyPeerAsync, 1)         \
  X(cuMemsetD8Async, 1)           \
  X(cuStreamCreate, 1)            \
  X(cuStreamDestroy, 1)           \
  X(cuStreamSynchronize, 1)       \
  X(cuStreamWaitEvent, 1)         \
  X(cuStreamGetCtx, 1)            \
  X(cuEventCreate, 1)             \
  X(cuEventDestroy, 1)            \
  X(cuEventRecord, 1)             \
  X(cuEventSynchronize, 1)        \
  X(cuEventQuery, 1)              \
  X(cuPointerGetAttributes, 1)    \
  X(cuMemAllocAsync, 0)           \
  X(cuMemFreeAsync, 0)            \
  X(cuLaunchHostFunc, 0)           \
  X(cuIpcGetMemHandle, 0)          \
  X(cuIpcOpenMemHandle, 0)         \
  X(cuIpcCloseMemHandle, 0)        \
  X(cuIpcGetEventHandle, 0)        \
  X(cuIpcOpenEventHandle, 0)

struct cuda_api {
  void* lib;
  char path[512]; /* the library actually opened */
  int driver_version;
  /* Resolved with dlsym before the table: they decide whether the driver
   * is usable at all. */
  CUresult (*cuInit)(unsigned int);
  CUresult (*cuDriverGetVersion)(int*);
  CUresult (*cuGetErrorName)(CUresult, const char**);
  CUresult (*cuGetErrorString)(CUresult, const char**);
  CUresult (*cuGetProcAddress_v2)(const char*, void**, int, cuuint64_t,
                                  CUdriverProcAddressQueryResult*);
#define CUDA_FIELD(sym, required) __typeof__(sym)* sym;
  CUDA_SYMBOLS(CUDA_FIELD)
#undef CUDA_FIELD
};

/* Resolved once by cuda_library_load() from init; read-only afterwards. */
extern struct cuda_api cuda_api;

/* Host services (getenv, log): backends/common/host.h, checked first in
 * init. */

/* dlopen + entry points + cuInit + version check. ENODEV with the reason
 * when the driver is missing, a stub, too old or incomplete. */
int cuda_library_load(struct adr_error* error);

/* ---- status (cuda_status.c) ---------------------------------------------- */

/* errno value for a CUresult (CUDA_SUCCESS -> 0). */
int cuda_status(CUresult r);
/* "CUDA_ERROR_OUT_OF_MEMORY": from the driver when it is loaded, else from the
 * backend's own table; never NULL. */
const char* cuda_error_name(CUresult r);
/* A description of `r` (the driver's when it has a real one); never NULL. */
const char* cuda_error_description(CUresult r);
/* 0 when `r` is CUDA_SUCCESS; otherwise writes "NAME: description (what)",
 * what formatted from fmt (NULL: none), and returns the errno status. */
int cuda_check(CUresult r, struct adr_error* error, const char* fmt, ...) ADR_PRINTF(3, 4);
/* Writes "ENAME: text" (text formatted from fmt) and returns `status`: for
 * failures that are the backend's own, not the driver's. */
int cuda_errorf(struct adr_error* error, int status, const char* fmt, ...) ADR_PRINTF(3, 4);

/* ---- objects ------------------------------------------------------------ */

struct adr_backend_stream {
  struct adr_backend_device* dev; /* the device whose context owns it */
  CUstream stream;
  bool imported; /* not ours to destroy */
  bool is_default;
  CUdeviceptr scratch; /* overlapping copies (cuda_memory.c); 0 until needed */
};

struct adr_backend_event {
  CUevent event;
  bool imported;
};

/* An over-aligned allocation: the aligned address handed out and the
 * address the driver returned (for free). */
struct cuda_aligned {
  struct adr_range range; /* aligned address, size */
  uintptr_t raw;
};

struct adr_backend_device {
  ArrowDeviceType type;
  int ordinal;
  CUdevice cuda_dev;
  CUcontext ctx; /* primary context, retained for the device's life */
  struct adr_backend_stream default_stream;
  /* Lazy opening (cuda_device.c): device_open only reads enumeration
   * queries; the first call that needs the device (primary context retained, default stream
   * created) opens it (cuda_device_ensure). `opened` is stored with release order; open_lock
   * serialises first uses; a failure is kept and repeated. */
  pthread_mutex_t open_lock;
  atomic_bool opened;
  int open_status;
  char open_message[sizeof(((struct adr_error*)0)->message)];
  bool mempools; /* cuMemAllocAsync usable */
  int cc_major, cc_minor;
  /* CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: the CPU may touch
   * managed memory while the device runs work (so a host function may copy
   * it in stream order). */
  bool concurrent_managed;

  /* Pinned staging of pageable copies (backends/common/staging.h). */
  struct adr_staging staging;
  /* Keeps two threads' overlapping-copy pieces on one stream apart. */
  pthread_mutex_t scratch_lock;

  /* Over-aligned allocations (struct cuda_aligned), by aligned address.
   * Rare (alignment above what the driver guarantees); `aligned_count`
   * lets free skip the map's lock when there are none. */
  struct adr_range_map aligned;
  _Atomic size_t aligned_count;
};

/* Opens `dev` unless done: 0, or the status and message of the failed
 * first opening. */
int cuda_device_open_native(struct adr_backend_device* dev, struct adr_error* error);
static inline bool cuda_device_opened(struct adr_backend_device* dev) {
  return atomic_load_explicit(&dev->opened, memory_order_acquire);
}
static inline int cuda_device_ensure(struct adr_backend_device* dev, struct adr_error* error) {
  return cuda_device_opened(dev) ? 0 : cuda_device_open_native(dev, error);
}

/* Current-context guard (see the top of this file). */
struct cuda_current_guard {
  bool pushed;
};
int cuda_current_enter(struct adr_backend_device* dev, struct cuda_current_guard* guard,
                       struct adr_error* error);
void cuda_current_leave(struct cuda_current_guard* guard);

/* Configuration read at init; read-only afterwards. */
struct cuda_config {
  struct adr_staging_config staging; /* ADR_CUDA_STAGING */
};
extern struct cuda_config cuda_config;
/* The driver calls of staged pageable copies (cuda_memory.c). */
extern const struct adr_staging_ops cuda_staging_ops;
/* Devices the driver reports (ordinals 0 .. cuda_devices - 1). */
extern int cuda_devices;

/* ---- slots (one per vtable entry) ---------------------------------------- */

int cuda_init(struct adr_error* error);
void cuda_shutdown(void);
int cuda_device_count(ArrowDeviceType type, int64_t* out, struct adr_error* error);
int cuda_device_open(ArrowDeviceType type, int64_t id, struct adr_backend_device** out,
                     struct adr_error* error);
void cuda_device_close(struct adr_backend_device* dev);
int cuda_device_info(struct adr_backend_device* dev, struct adr_device_info* out,
                     struct adr_error* error);
int cuda_device_properties(struct adr_backend_device* dev, adr_property_fn emit, void* ctx,
                           struct adr_error* error);
int cuda_device_native(struct adr_backend_device* dev, int kind, void** out,
                       struct adr_error* error);
int cuda_pointer_query(const void* ptr, ArrowDeviceType* out_type, int64_t* out_id,
                       struct adr_error* error);

int cuda_alloc(struct adr_backend_device* dev, size_t size, size_t alignment,
               struct adr_backend_stream* stream, void** out, struct adr_error* error);
int cuda_free(struct adr_backend_device* dev, void* ptr, size_t size,
              struct adr_backend_stream* stream, struct adr_error* error);
int cuda_copy(struct adr_backend_device* dst_dev, void* dst, struct adr_backend_device* src_dev,
              const void* src, size_t size, struct adr_backend_stream* stream,
              struct adr_error* error);
int cuda_memset(struct adr_backend_device* dev, void* ptr, int value, size_t size,
                struct adr_backend_stream* stream, struct adr_error* error);
int cuda_host_register(struct adr_backend_device* dev, void* ptr, size_t size,
                       struct adr_error* error);
int cuda_host_unregister(struct adr_backend_device* dev, void* ptr, struct adr_error* error);
void cuda_stream_scratch_free(struct adr_backend_stream* stream);

/* Sharing (cuda_share.c). */
int cuda_share_caps(struct adr_backend_device* dev, uint32_t* out, struct adr_error* error);
int cuda_share_alloc(struct adr_backend_device* dev, size_t size, size_t alignment, void** out,
                     struct adr_error* error);
int cuda_share_export(struct adr_backend_device* dev, const void* ptr, struct adr_share_handle* out,
                      int* out_fd, struct adr_error* error);
int cuda_share_import(struct adr_backend_device* dev, const struct adr_share_handle* handle, int fd,
                      void** out, struct adr_error* error);
int cuda_share_close(struct adr_backend_device* dev, void* ptr, struct adr_error* error);
int cuda_event_share_export(struct adr_backend_device* dev, struct adr_backend_stream* stream,
                            struct adr_backend_event** out_event, struct adr_share_handle* out,
                            int* out_fd, struct adr_error* error);
int cuda_event_share_import(struct adr_backend_device* dev, const struct adr_share_handle* handle,
                            int fd, struct adr_backend_event** out, struct adr_error* error);
/* For free: forgets a shareable allocation (true when `ptr` was one). */
bool cuda_share_forget(const void* ptr);

int cuda_stream_create(struct adr_backend_device* dev, uint32_t flags,
                       struct adr_backend_stream** out, struct adr_error* error);
int cuda_stream_destroy(struct adr_backend_device* dev, struct adr_backend_stream* stream,
                        struct adr_error* error);
int cuda_stream_synchronize(struct adr_backend_device* dev, struct adr_backend_stream* stream,
                            struct adr_error* error);
int cuda_stream_import(struct adr_backend_device* dev, void* native_stream,
                       struct adr_backend_stream** out, struct adr_error* error);
void* cuda_stream_native(struct adr_backend_device* dev, struct adr_backend_stream* stream);
int cuda_event_create(struct adr_backend_device* dev, struct adr_backend_event** out,
                      struct adr_error* error);
int cuda_event_destroy(struct adr_backend_device* dev, struct adr_backend_event* event,
                       struct adr_error* error);
int cuda_event_record(struct adr_backend_device* dev, struct adr_backend_event* event,
                      struct adr_backend_stream* stream, struct adr_error* error);
int cuda_event_wait(struct adr_backend_device* dev, struct adr_backend_event* event,
                    struct adr_backend_stream* stream, struct adr_error* error);
int cuda_event_synchronize(struct adr_backend_device* dev, struct adr_backend_event* event,
                           struct adr_error* error);
int cuda_event_query(struct adr_backend_device* dev, struct adr_backend_event* event,
                     struct adr_error* error);
void* cuda_event_native(struct adr_backend_device* dev, struct adr_backend_event* event);
int cuda_event_import(struct adr_backend_device* dev, void* sync_event,
                      struct adr_backend_event** out, struct adr_error* error);

#endif /* ADR_CUDA_INTERNAL_H */
