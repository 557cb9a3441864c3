/* SPDX-License-Identifier: Apache-2.0
 *
 * Internals of the HIP backend (libadr_hip.so), shared by its files:
 *   hip_loader.c    dlopen of libamdhip64 and the entry-point table
 *   hip_status.c    hipError_t -> errno status + message (the only place)
 *   hip_device.c    init, devices, info, properties, native handles, adoption
 *   hip_memory.c    alloc/free, copies (incl. staged pageable copies), memset, host register,
 *                   pointer query
 *   hip_sync.c      streams and events, import of foreign ones
 *   hip_backend.c   the vtable and adr_backend_query
 *
 * Current-device discipline: every call into the runtime that depends on
 * the calling thread's current device runs between hip_current_enter() and
 * hip_current_leave(), which switch to the device's ordinal only when it is
 * not already current and switch back afterwards, so the application's
 * current device is the same after every adr call as before it. Nothing is
 * cached per thread, so applications may change their current device at will.
 */
#ifndef ADR_HIP_INTERNAL_H
#define ADR_HIP_INTERNAL_H

#include <hip/hip_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "adr/backend.h"
#include "adr/hip.h"
#include "host.h"
#include "range_map.h"
#include "staging.h"

#define HIP_BACKEND_NAME "hip"

/* ---- the runtime entry points ------------------------------------------- */

/* Runtimes 6.0 and later changed the values of hipMemoryType (Host became
 * 1, Device 2 ...) and renamed the hipPointerAttribute_t field; the layout
 * stayed the same. The backend reads the struct through its own copy and
 * decodes the type by the loaded runtime's version, so one build works
 * with either runtime. */
struct hip_pointer_attributes {
  int type;
  int device;
  void* device_pointer;
  void* host_pointer;
  int is_managed;
  unsigned allocation_flags;
};
_Static_assert(sizeof(struct hip_pointer_attributes) == sizeof(hipPointerAttribute_t),
               "hipPointerAttribute_t layout");

/* The old-layout device properties: hipDeviceProp_t in HIP 5 headers; HIP 6
 * headers call it hipDeviceProp_tR0000 and map hipGetDeviceProperties to the
 * new layout's entry point. Runtimes 6 and later still export the
 * old-layout entry point under the name hipGetDeviceProperties (symbol
 * version hip_4.2), which is the one declared and resolved here. */
#if defined(HIP_VERSION_MAJOR) && HIP_VERSION_MAJOR >= 6
#include <hip/hip_deprecated.h>
typedef hipDeviceProp_tR0000 hip_props_t;
#undef hipGetDeviceProperties
hipError_t hipGetDeviceProperties(hip_props_t* prop, int device);
#else
typedef hipDeviceProp_t hip_props_t;
#endif

/* One list: X(symbol, required). The table's fields take the types the HIP
 * headers declare; #symbol is the name dlsym looks up. */
#define HIP_SYMBOLS(X)             \
  X(hipInit, 1)                    \
  X(hipGetDeviceCount, 1)          \
  X(hipDeviceGet, 1)               \
  X(hipSetDevice, 1)               \
  X(hipGetDevice, 1)               \
  X(hipGetDeviceProperties, 1)     \
  X(hipMemGetInfo, 1)              \
  X(hipRuntimeGetVersion, 1)       \
  X(hipDriverGetVersion, 1)        \
  X(hipGetErrorName, 1)            \
  X(hipGetErrorString, 1)          \
  X(hipMalloc, 1)                  \
  X(hipFree, 1)                    \
  X(hipHostMalloc, 1)              \
  X(hipHostFree, 1)                \
  X(hipHostRegister, 1)            \
  X(hipHostUnregister, 1)          \
  X(hipMemcpyAsync, 1)             \
  X(hipMemcpyPeerAsync, 1)         \
  X(hipMemsetAsync, 1)             \
  X(hipStreamCreateWithFlags, 1)   \
  X(hipStreamDestroy, 1)           \
  X(hipStreamSynchronize, 1)       \
  X(hipStreamWaitEvent, 1)         \
  X(hipEventCreateWithFlags, 1)    \
  X(hipEventDestroy, 1)            \
  X(hipEventRecord, 1)             \
  X(hipEventSynchronize, 1)        \
  X(hipEventQuery, 1)              \
  X(hipPointerGetAttributes, 1)    \
  X(hipDeviceCanAccessPeer, 1)     \
  X(hipDeviceEnablePeerAccess, 0)  \
  X(hipMallocAsync, 0)             \
  X(hipFreeAsync, 0)               \
  X(hipDeviceGetDefaultMemPool, 0) \
  X(hipDeviceGetUuid, 0)           \
  X(hipGetLastError, 0)            \
  X(hipPeekAtLastError, 0)         \
  X(hipLaunchHostFunc, 0)          \
  X(hipIpcGetMemHandle, 0)         \
  X(hipIpcOpenMemHandle, 0)        \
  X(hipIpcCloseMemHandle, 0)       \
  X(hipIpcGetEventHandle, 0)       \
  X(hipIpcOpenEventHandle, 0)

struct hip_api {
  void* lib;
  char path[512];      /* the library actually opened */
  int runtime_version; /* hipRuntimeGetVersion: major*10^7 + minor*10^5 + patch */
  int driver_version;  /* hipDriverGetVersion */
#define HIP_FIELD(sym, required) __typeof__(sym)* sym;
  HIP_SYMBOLS(HIP_FIELD)
#undef HIP_FIELD
};

/* Resolved once by hip_library_load() from init; read-only afterwards. */
extern struct hip_api hip_api;

/* Host services (getenv, log): backends/common/host.h, checked first in
 * init. */

/* dlopen + entry points. ENODEV "unavailable: ... not found (tried: ...)"
 * when no candidate opens; ENOTSUP when one opens but lacks a required
 * entry point (it is then closed again). */
int hip_library_load(struct adr_error* error);

/* Runtime major version (5, 6 ...) of the loaded library. */
static inline int hip_runtime_major(void) {
  return hip_api.runtime_version / 10000000;
}

/* Set by an exit handler registered after the runtime loaded, so it runs
 * before the runtime's own exit-time teardown (and before the core closes
 * devices): from then on the backend frees only its own memory and makes
 * no runtime calls. */
bool hip_exiting(void);

/* ---- status (hip_status.c) ---------------------------------------------- */

/* errno value for a hipError_t (hipSuccess -> 0). */
int hip_status(hipError_t e);
/* "hipErrorOutOfMemory": from the runtime when it is loaded, else from the
 * backend's own table; never NULL. */
const char* hip_error_name(hipError_t e);
/* A description of `e` (the runtime's when it has a real one); never NULL. */
const char* hip_error_description(hipError_t e);
/* 0 when `e` is hipSuccess; otherwise writes "NAME: description (what)",
 * what formatted from fmt (NULL: none), and returns the errno status. */
int hip_check(hipError_t e, struct adr_error* error, const char* fmt, ...) ADR_PRINTF(3, 4);
/* Writes "ENAME: text" (text formatted from fmt) and returns `status`: for
 * failures that are the backend's own, not the runtime's. */
int hip_errorf(struct adr_error* error, int status, const char* fmt, ...) ADR_PRINTF(3, 4);

/* ---- objects ------------------------------------------------------------ */

struct adr_backend_stream {
  struct adr_backend_device* dev; /* the device whose ordinal owns it */
  hipStream_t stream;
  bool imported;   /* not ours to destroy */
  bool is_default; /* never destroyed by stream_destroy; device_close releases it */
  void* scratch;   /* overlapping copies (hip_memory.c); NULL until needed */
};

struct adr_backend_event {
  hipEvent_t event;
  bool imported; /* not ours to destroy */
};

struct adr_backend_device {
  ArrowDeviceType type;
  int ordinal;
  hipDevice_t hip_dev;
  int64_t id;   /* adr id (= ordinal unless adopted) */
  bool adopted; /* device_adopt: the application's ordinal and stream */
  struct adr_backend_stream default_stream;
  /* Lazy opening (hip_device.c): device_open only reads enumeration
   * queries; the first call that needs the device (peer access enabled, default stream created)
   * opens it (hip_device_ensure). `opened` is stored with release order; open_lock serialises first
   * uses; a failure is kept and repeated. */
  pthread_mutex_t open_lock;
  atomic_bool opened;
  int open_status;
  char open_message[sizeof(((struct adr_error*)0)->message)];
  bool async_alloc; /* hipMallocAsync usable */
  hip_props_t props;

  /* Pinned staging of pageable copies (backends/common/staging.h). */
  struct adr_staging staging;
  /* Keeps two threads' overlapping-copy pieces on one stream apart. */
  pthread_mutex_t scratch_lock;
};

/* Opens `dev` unless done: 0, or the status and message of the failed
 * first opening. */
int hip_device_open_native(struct adr_backend_device* dev, struct adr_error* error);
static inline bool hip_device_opened(struct adr_backend_device* dev) {
  return atomic_load_explicit(&dev->opened, memory_order_acquire);
}
static inline int hip_device_ensure(struct adr_backend_device* dev, struct adr_error* error) {
  return hip_device_opened(dev) ? 0 : hip_device_open_native(dev, error);
}

/* Current-device guard (see the top of this file). */
struct hip_current_guard {
  int previous;
  bool switched;
};
int hip_current_enter(struct adr_backend_device* dev, struct hip_current_guard* guard,
                      struct adr_error* error);
void hip_current_leave(struct hip_current_guard* guard);

/* Configuration read at init; read-only afterwards. */
struct hip_config {
  struct adr_staging_config staging; /* ADR_HIP_STAGING */
  bool async_alloc_disabled;         /* ADR_HIP_NO_ASYNC_ALLOC=1 */
};
extern struct hip_config hip_config;
/* The runtime calls of staged pageable copies (hip_memory.c). */
extern const struct adr_staging_ops hip_staging_ops;
/* Devices the runtime reports (ordinals 0 .. hip_devices - 1). */
extern int hip_devices;

/* ---- slots (one per vtable entry) ---------------------------------------- */

int hip_init(struct adr_error* error);
void hip_shutdown(void);
int hip_device_count(ArrowDeviceType type, int64_t* out, struct adr_error* error);
int hip_device_open(ArrowDeviceType type, int64_t id, struct adr_backend_device** out,
                    struct adr_error* error);
void hip_device_close(struct adr_backend_device* dev);
int hip_device_info(struct adr_backend_device* dev, struct adr_device_info* out,
                    struct adr_error* error);
int hip_device_native(struct adr_backend_device* dev, int kind, void** out,
                      struct adr_error* error);
int hip_device_adopt(ArrowDeviceType type, int64_t id, const void* desc,
                     struct adr_backend_device** out, struct adr_error* error);
int hip_device_properties(struct adr_backend_device* dev, adr_property_fn emit, void* ctx,
                          struct adr_error* error);

int hip_alloc(struct adr_backend_device* dev, size_t size, size_t alignment,
              struct adr_backend_stream* stream, void** out, struct adr_error* error);
int hip_free(struct adr_backend_device* dev, void* ptr, size_t size,
             struct adr_backend_stream* stream, struct adr_error* error);
int hip_copy(struct adr_backend_device* dst_dev, void* dst, struct adr_backend_device* src_dev,
             const void* src, size_t size, struct adr_backend_stream* stream,
             struct adr_error* error);
int hip_memset(struct adr_backend_device* dev, void* ptr, int value, size_t size,
               struct adr_backend_stream* stream, struct adr_error* error);
int hip_pointer_query(const void* ptr, ArrowDeviceType* out_type, int64_t* out_id,
                      struct adr_error* error);
int hip_host_register(struct adr_backend_device* dev, void* ptr, size_t size,
                      struct adr_error* error);
int hip_host_unregister(struct adr_backend_device* dev, void* ptr, struct adr_error* error);
void hip_memory_shutdown(void);
/* Frees a stream's overlap scratch buffer; its work must have completed. */
void hip_stream_scratch_free(struct adr_backend_stream* stream);
/* Sharing (hip_share.c). */
int hip_share_caps(struct adr_backend_device* dev, uint32_t* out, struct adr_error* error);
int hip_share_alloc(struct adr_backend_device* dev, size_t size, size_t alignment, void** out,
                    struct adr_error* error);
int hip_share_export(struct adr_backend_device* dev, const void* ptr, struct adr_share_handle* out,
                     int* out_fd, struct adr_error* error);
int hip_share_import(struct adr_backend_device* dev, const struct adr_share_handle* handle, int fd,
                     void** out, struct adr_error* error);
int hip_share_close(struct adr_backend_device* dev, void* ptr, struct adr_error* error);
int hip_event_share_export(struct adr_backend_device* dev, struct adr_backend_stream* stream,
                           struct adr_backend_event** out_event, struct adr_share_handle* out,
                           int* out_fd, struct adr_error* error);
int hip_event_share_import(struct adr_backend_device* dev, const struct adr_share_handle* handle,
                           int fd, struct adr_backend_event** out, struct adr_error* error);
/* For free: forgets a shareable allocation (nothing when `ptr` is none). */
void hip_share_forget(const void* ptr);
/* hipMalloc (never the stream-ordered pool), recorded like hip_alloc's. */
int hip_alloc_plain(struct adr_backend_device* dev, size_t size, void** out,
                    struct adr_error* error);

int hip_stream_create(struct adr_backend_device* dev, uint32_t flags,
                      struct adr_backend_stream** out, struct adr_error* error);
int hip_stream_destroy(struct adr_backend_device* dev, struct adr_backend_stream* stream,
                       struct adr_error* error);
int hip_stream_synchronize(struct adr_backend_device* dev, struct adr_backend_stream* stream,
                           struct adr_error* error);
int hip_stream_import(struct adr_backend_device* dev, void* native, struct adr_backend_stream** out,
                      struct adr_error* error);
void* hip_stream_native(struct adr_backend_device* dev, struct adr_backend_stream* stream);
int hip_event_create(struct adr_backend_device* dev, struct adr_backend_event** out,
                     struct adr_error* error);
int hip_event_destroy(struct adr_backend_device* dev, struct adr_backend_event* event,
                      struct adr_error* error);
int hip_event_record(struct adr_backend_device* dev, struct adr_backend_event* event,
                     struct adr_backend_stream* stream, struct adr_error* error);
int hip_event_wait(struct adr_backend_device* dev, struct adr_backend_event* event,
                   struct adr_backend_stream* stream, struct adr_error* error);
int hip_event_synchronize(struct adr_backend_device* dev, struct adr_backend_event* event,
                          struct adr_error* error);
int hip_event_query(struct adr_backend_device* dev, struct adr_backend_event* event,
                    struct adr_error* error);
void* hip_event_native(struct adr_backend_device* dev, struct adr_backend_event* event);
int hip_event_import(struct adr_backend_device* dev, void* sync_event,
                     struct adr_backend_event** out, struct adr_error* error);

#endif /* ADR_HIP_INTERNAL_H */
