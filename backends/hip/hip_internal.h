/* SPDX-License-Identifier: Apache-2.0
 *
 * Internals shared by the files of the HIP backend. Nothing here is ABI.
 *
 * The backend builds against the HIP headers (libamdhip64-dev) for types
 * and constants but never links libamdhip64: every runtime function is
 * called through `hip_api`, filled once by hip_library_load()
 * from the X-macro list below.
 */
#ifndef HIP_INTERNAL_H
#define HIP_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <hip/hip_runtime_api.h>

#include "adr/backend.h"
#include "adr/hip.h"
#include "staging.h"

/* Runtimes 6.0 and later changed the values of hipMemoryType (hipMemoryType
 * Host became 1, Device 2 ...) and renamed the hipPointerAttribute_t field;
 * the layout stayed the same. The backend reads the struct through its own
 * copy and decodes the type by the loaded runtime's version, so one build
 * works with either runtime. */
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
 * headers call it hipDeviceProp_tR0000. Runtimes 6 and later still export
 * the old-layout entry point under the name hipGetDeviceProperties
 * (symbol version hip_4.2), which is the name resolved below. */
#if defined(HIP_VERSION_MAJOR) && HIP_VERSION_MAJOR >= 6
#include <hip/hip_deprecated.h>
typedef hipDeviceProp_tR0000 hip_props_t;
#else
typedef hipDeviceProp_t hip_props_t;
#endif

/* X(name, return type, parameter list, required) */
#define HIP_SYMBOLS(X)                                                                             \
  X(hipInit, hipError_t, (unsigned int flags), true)                                               \
  X(hipGetDeviceCount, hipError_t, (int* count), true)                                             \
  X(hipDeviceGet, hipError_t, (hipDevice_t * device, int ordinal), true)                           \
  X(hipSetDevice, hipError_t, (int device), true)                                                  \
  X(hipGetDevice, hipError_t, (int* device), true)                                                 \
  X(hipGetDeviceProperties, hipError_t, (hip_props_t * prop, int device), true)                    \
  X(hipMemGetInfo, hipError_t, (size_t * free, size_t * total), true)                              \
  X(hipRuntimeGetVersion, hipError_t, (int* version), true)                                        \
  X(hipDriverGetVersion, hipError_t, (int* version), true)                                         \
  X(hipGetErrorName, const char*, (hipError_t error), true)                                        \
  X(hipGetErrorString, const char*, (hipError_t error), true)                                      \
  X(hipMalloc, hipError_t, (void** ptr, size_t size), true)                                        \
  X(hipFree, hipError_t, (void* ptr), true)                                                        \
  X(hipHostMalloc, hipError_t, (void** ptr, size_t size, unsigned int flags), true)                \
  X(hipHostFree, hipError_t, (void* ptr), true)                                                    \
  X(hipHostRegister, hipError_t, (void* ptr, size_t size, unsigned int flags), true)               \
  X(hipHostUnregister, hipError_t, (void* ptr), true)                                              \
  X(hipMemcpyAsync, hipError_t,                                                                    \
    (void* dst, const void* src, size_t size, hipMemcpyKind kind, hipStream_t stream), true)       \
  X(hipMemcpyPeerAsync, hipError_t,                                                                \
    (void* dst, int dst_device, const void* src, int src_device, size_t size, hipStream_t stream), \
    true)                                                                                          \
  X(hipMemsetAsync, hipError_t, (void* dst, int value, size_t size, hipStream_t stream), true)     \
  X(hipStreamCreateWithFlags, hipError_t, (hipStream_t * stream, unsigned int flags), true)        \
  X(hipStreamDestroy, hipError_t, (hipStream_t stream), true)                                      \
  X(hipStreamSynchronize, hipError_t, (hipStream_t stream), true)                                  \
  X(hipStreamWaitEvent, hipError_t, (hipStream_t stream, hipEvent_t event, unsigned int flags),    \
    true)                                                                                          \
  X(hipEventCreateWithFlags, hipError_t, (hipEvent_t * event, unsigned flags), true)               \
  X(hipEventDestroy, hipError_t, (hipEvent_t event), true)                                         \
  X(hipEventRecord, hipError_t, (hipEvent_t event, hipStream_t stream), true)                      \
  X(hipEventSynchronize, hipError_t, (hipEvent_t event), true)                                     \
  X(hipEventQuery, hipError_t, (hipEvent_t event), true)                                           \
  X(hipPointerGetAttributes, hipError_t,                                                           \
    (struct hip_pointer_attributes * attributes, const void* ptr), true)                           \
  X(hipDeviceCanAccessPeer, hipError_t, (int* can, int device, int peer), true)                    \
  X(hipDeviceEnablePeerAccess, hipError_t, (int peer, unsigned int flags), false)                  \
  X(hipMallocAsync, hipError_t, (void** ptr, size_t size, hipStream_t stream), false)              \
  X(hipFreeAsync, hipError_t, (void* ptr, hipStream_t stream), false)                              \
  X(hipDeviceGetDefaultMemPool, hipError_t, (hipMemPool_t * pool, int device), false)              \
  X(hipGetLastError, hipError_t, (void), false)                                                    \
  X(hipPeekAtLastError, hipError_t, (void), false)

struct hip_api {
#define HIP_FIELD(name, ret, params, required) ret(*name) params;
  HIP_SYMBOLS(HIP_FIELD)
#undef HIP_FIELD
};

/* Filled once by hip_library_load() during init; read-only after. */
extern struct hip_api hip_api;

struct hip_runtime {
  void* handle;        /* dlopen handle, never closed */
  char path[256];      /* the name or path that opened */
  int runtime_version; /* hipRuntimeGetVersion: major*10^7 + minor*10^5 + patch */
  int driver_version;  /* hipDriverGetVersion */
  int device_count;    /* ordinals 0..device_count-1 */
  /* Set by an exit handler registered after the runtime loaded, so it runs
   * before the runtime's own exit-time teardown (and before the core closes
   * devices): from then on the backend frees only its own memory and makes
   * no runtime calls. */
  _Atomic bool exiting;
  const struct adr_backend_host* host;
};
/* Written by init, read-only after. */
extern struct hip_runtime hip_rt;

/* Configuration read at init; read-only afterwards. */
struct hip_config {
  struct adr_staging_config staging; /* ADR_HIP_STAGING */
  bool async_alloc_disabled;         /* ADR_HIP_NO_ASYNC_ALLOC=1 */
};
extern struct hip_config hip_config;
/* The runtime calls of staged pageable copies (hip_memory.c). */
extern const struct adr_staging_ops hip_staging_ops;

static inline bool hip_exiting(void) {
  return atomic_load_explicit(&hip_rt.exiting, memory_order_acquire);
}

/* Runtime major version (5, 6 ...) of the loaded library. */
static inline int hip_runtime_major(void) {
  return hip_rt.runtime_version / 10000000;
}

/* ---- library loading (hip_loader.c) ----------------------------------- */

/* Opens the runtime (ADR_HIP_LIBRARY, else libamdhip64.so, .so.6, .so.5)
 * and resolves the symbol table. ENODEV "unavailable: ... not found (tried:
 * ...)" when no candidate opens; ENOTSUP when one opens but lacks a
 * required symbol (it is then closed again). */
int hip_library_load(const struct adr_backend_host* host, struct adr_error* error);

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
  bool is_default; /* the device's default stream: never destroyed by stream_destroy */
  void* scratch;   /* overlapping copies (hip_memory.c); NULL until needed */
};

struct adr_backend_event {
  hipEvent_t event;
  bool imported; /* not ours to destroy */
};

struct adr_backend_device {
  ArrowDeviceType type; /* ARROW_DEVICE_ROCM or ARROW_DEVICE_ROCM_HOST */
  int64_t id;           /* adr id (= ordinal unless adopted) */
  int ordinal;          /* HIP ordinal */
  hipDevice_t hip_dev;
  bool async_alloc; /* hipMallocAsync usable on this device */
  bool adopted;
  struct adr_backend_stream default_stream;
  /* Pinned staging of pageable copies (backends/common/staging.h). */
  struct adr_staging staging;
  /* Keeps two threads' overlapping-copy pieces on one stream apart. */
  pthread_mutex_t scratch_lock;
  hip_props_t props;
};

/* Current-device guard (HIP keeps the current device per thread): every
 * call into the runtime that depends on it runs between hip_current_enter()
 * and hip_current_leave(), which switch to the device's ordinal only when it
 * is not already current and switch back afterwards, so the application's
 * current device is the same after every adr call as before it. */
struct hip_current_guard {
  int previous;
  bool switched;
};
int hip_current_enter(struct adr_backend_device* dev, struct hip_current_guard* guard,
                      struct adr_error* error);
void hip_current_leave(struct hip_current_guard* guard);

/* ---- slots (hip_device.c, hip_memory.c, hip_sync.c) --------------------- */

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

#endif /* HIP_INTERNAL_H */
