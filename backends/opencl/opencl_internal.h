/* SPDX-License-Identifier: Apache-2.0
 *
 * Declarations shared by the files of the OpenCL backend. Nothing here is
 * ABI; the only exported symbol is adr_backend_query (opencl_backend.c).
 *
 * Files:
 *   opencl_backend.c  the vtable, init/shutdown, environment switches
 *   opencl_loader.c   dlopen of libOpenCL.so.1 and the symbol table
 *   opencl_status.c   cl_int -> errno status + CL error name (the one file)
 *   opencl_device.c   enumeration, open/close/adopt, info, properties, natives
 *   opencl_memory.c   alloc/free/copy/memset, pointer_query, the allocation map
 *   opencl_sync.c     streams and events
 *   opencl_handle.c   checks of native handles the application passes in
 */
#ifndef ADR_OPENCL_INTERNAL_H
#define ADR_OPENCL_INTERNAL_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif
/* clCreateCommandQueue is the 1.2 entry point used when the loader has no
 * clCreateCommandQueueWithProperties. */
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS 1
#include <CL/cl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "adr/backend.h"
#include "adr/opencl.h"
#include "host.h"
#include "range_map.h"
#include "opencl_symbols.h"

#define OCL_NAME "opencl"

/* ---- vendor symbols (opencl_loader.c) ----------------------------------- */

struct ocl_api {
#define OCL_API_MEMBER(name) __typeof__(&name) name;
  ADR_OCL_REQUIRED(OCL_API_MEMBER)
  ADR_OCL_OPTIONAL(OCL_API_MEMBER)
#undef OCL_API_MEMBER
};

/* Filled once by ocl_loader_open() during init (single-threaded: the core
 * calls init once, before any other slot); read-only afterwards. */
extern struct ocl_api ocl;

/* dlopen the ICD loader (ADR_OPENCL_LIBRARY overrides the name) and resolve
 * the symbols. ENODEV with "unavailable: ..." when the library is missing,
 * EIO when a required symbol is. */
int ocl_loader_open(const char* override, struct adr_error* error);
/* Whether the 2.0 SVM entry points were all found. */
bool ocl_loader_has_svm(void);

/* ---- host services and configuration (opencl_backend.c) --------------- */

/* Logging and getenv: adr_host_log / adr_host_getenv (backends/common/host.h). */

/* ADR_OPENCL_MEMORY: 0 = auto, OCL_MODE_ANY_SVM = "svm" (the best SVM the
 * device has), otherwise the forced enum adr_opencl_address_mode. */
#define OCL_MODE_ANY_SVM 100
extern int ocl_forced_mode;
/* ADR_OPENCL_HOST_COPY=0 disables the memcpy fast path of the SVM-fine mode. */
extern bool ocl_host_copy_enabled;

/* ---- errors (opencl_status.c) ------------------------------------------- */

/* "CL_MEM_OBJECT_ALLOCATION_FAILURE" ...; "CL_UNKNOWN_ERROR" when unknown. */
const char* ocl_error_name(cl_int code);
/* errno status for a cl_int (0 for CL_SUCCESS). */
int ocl_status(cl_int code);
/* Writes "CL_NAME: <fmt...>" (no "[operation][backend]": the core adds it)
 * and returns ocl_status(code), EIO for CL_SUCCESS. */
int ocl_check(cl_int code, struct adr_error* error, const char* fmt, ...) ADR_PRINTF(3, 4);
/* Writes "ENAME: <fmt...>" for failures that are not a cl_int and returns
 * status. */
int ocl_errorf(struct adr_error* error, int status, const char* fmt, ...) ADR_PRINTF(3, 4);

/* ---- devices (opencl_device.c) ------------------------------------------ */

#define OCL_STREAM_DEFAULT 1u
#define OCL_STREAM_IMPORTED 2u

struct adr_backend_stream {
  cl_command_queue queue; /* one reference held by this stream */
  struct adr_backend_device* dev;
  uint32_t flags; /* OCL_STREAM_* */
  /* Devices with the memcpy fast path (host_copy) track the event of the
   * last command adr queued here, so a copy can tell whether the stream
   * still has adr work pending (then it is queued too, never blocking the
   * host) or not (then it is done by memcpy). `lock` guards `last`. */
  pthread_mutex_t lock;
  cl_event last;
  /* Set once the application can hold the queue (adr_stream_native,
   * ADR_NATIVE_QUEUE, an imported or adopted queue): from then on the
   * queue may hold commands adr does not know about, so the fast path's
   * "adr's last command completed" no longer means "the queue is idle" and
   * copies and fills are always queued. */
  atomic_bool shared;
  /* True while `last` may be a command that has not completed: set with
   * `last`, cleared when ocl_stream_idle finds it complete, so the idle
   * check of an idle stream reads one flag instead of taking `lock`. */
  atomic_bool busy;
};

/* Sets up / tears down the tracking fields of a stream. */
void ocl_stream_init(struct adr_backend_stream* s, struct adr_backend_device* dev,
                     cl_command_queue queue, uint32_t flags);
void ocl_stream_fini(struct adr_backend_stream* s);
/* Where an enqueue on `s` should put its event: &tmp when the stream is
 * tracked, else NULL (no event created). */
static inline cl_event* ocl_track_slot(const struct adr_backend_stream* s, cl_event* tmp);
/* Records `ev` (from ocl_track_slot) as the stream's last command. */
void ocl_stream_track(struct adr_backend_stream* s, cl_event ev);
/* True when every command adr queued on `s` has completed. */
bool ocl_stream_idle(struct adr_backend_stream* s);
/* Marks the stream's queue as reachable by the application. */
void ocl_stream_share(struct adr_backend_stream* s);
/* True when the calling thread may do a copy or fill on `s` itself, now,
 * and still be in queue order: the queue is adr's alone and everything
 * adr queued on it has completed. Never blocks. */
bool ocl_stream_host_ready(struct adr_backend_stream* s);

struct adr_backend_device {
  int64_t id;
  bool adopted;
  cl_platform_id platform;
  cl_device_id device;
  cl_context context; /* one reference held by the device; NULL until opened */
  struct adr_backend_stream default_stream; /* its queue: NULL until opened */
  /* Lazy opening (opencl_device.c): device_open only reads enumeration
   * queries; the context and default queue are made by the first call that
   * needs them (ocl_device_ensure). `opened` is stored with release order
   * after both exist; open_lock serialises concurrent first uses; a
   * failure is kept (open_status, open_message) and repeated. */
  pthread_mutex_t open_lock;
  atomic_bool opened;
  int open_status;
  char open_message[sizeof(((struct adr_error*)0)->message)];
  enum adr_opencl_address_mode mode;
  cl_device_svm_capabilities svm_caps;
  bool host_unified; /* CL_DEVICE_HOST_UNIFIED_MEMORY */
  bool host_copy;    /* host<->device copies are a memcpy (SVM fine + switch) */
  uint32_t alignment;
  int version_major; /* from CL_DEVICE_VERSION "OpenCL X.Y ..." */
  uint64_t global_mem;
  uint64_t max_alloc;
  int platform_index; /* -1 for an adopted device */
  int device_index;
  char name[256];
  char vendor[128];
  char driver[128];
};

static inline cl_event* ocl_track_slot(const struct adr_backend_stream* s, cl_event* tmp) {
  *tmp = NULL;
  return s->dev->host_copy ? tmp : NULL;
}

/* Enumerated (platform, device) pairs, in id order. Built by init. */
struct ocl_device_entry {
  cl_platform_id platform;
  cl_device_id device;
  int platform_index;
  int device_index;
};

int ocl_devices_enumerate(struct adr_error* error);
void ocl_devices_release(void);
int64_t ocl_devices_count(void);

int ocl_device_open(ArrowDeviceType type, int64_t id, struct adr_backend_device** out,
                    struct adr_error* error);
void ocl_device_close(struct adr_backend_device* dev);
/* Creates the context and the default queue of `dev` unless done: the
 * first call that needs them opens the device (once, whichever thread
 * comes first); a failure is returned to that call with its message and
 * repeated to every later one. Never needed for info, properties, or the
 * platform/device handles. */
int ocl_device_open_native(struct adr_backend_device* dev, struct adr_error* error);
static inline bool ocl_device_opened(struct adr_backend_device* dev) {
  return atomic_load_explicit(&dev->opened, memory_order_acquire);
}
static inline int ocl_device_ensure(struct adr_backend_device* dev, struct adr_error* error) {
  return ocl_device_opened(dev) ? 0 : ocl_device_open_native(dev, error);
}
int ocl_device_adopt(ArrowDeviceType type, int64_t id, const void* native_desc,
                     struct adr_backend_device** out, struct adr_error* error);
int ocl_device_info(struct adr_backend_device* dev, struct adr_device_info* out,
                    struct adr_error* error);
int ocl_device_native(struct adr_backend_device* dev, int kind, void** out,
                      struct adr_error* error);
int ocl_device_properties(struct adr_backend_device* dev, adr_property_fn emit, void* ctx,
                          struct adr_error* error);
const char* ocl_mode_name(enum adr_opencl_address_mode mode);

/* ---- memory (opencl_memory.c) ------------------------------------------- */

/* The process-wide map of live allocations of every OpenCL device. */
/* Every allocation of the backend by address (backends/common/range_map.h),
 * shared by all its devices: lookups (every copy and memset, pointer_query)
 * take the map's lock shared; alloc, free and device close exclusively. */
struct ocl_alloc {
  /* The same two leading fields as struct adr_range (the map's key). */
  uintptr_t base;
  size_t size;
  void* owner;  /* the struct adr_backend_device */
  void* native; /* cl_mem in buffer mode, NULL for SVM */
  /* Buffer mode: the PROT_NONE mapping the address comes from. SVM: the
   * pointer clSVMAlloc returned (base may lie inside it when the requested
   * alignment exceeded the driver's) and the size asked of it. */
  void* reservation;
  size_t reservation_size;
};
extern struct adr_range_map ocl_allocations;

int ocl_alloc(struct adr_backend_device* dev, size_t size, size_t alignment,
              struct adr_backend_stream* stream, void** out, struct adr_error* error);
int ocl_free(struct adr_backend_device* dev, void* ptr, size_t size,
             struct adr_backend_stream* stream, struct adr_error* error);
int ocl_copy(struct adr_backend_device* dst_dev, void* dst, struct adr_backend_device* src_dev,
             const void* src, size_t size, struct adr_backend_stream* stream,
             struct adr_error* error);
int ocl_memset(struct adr_backend_device* dev, void* ptr, int value, size_t size,
               struct adr_backend_stream* stream, struct adr_error* error);
/* The blocking slots (ABI 1.1): the copy / fill and everything queued
 * before it on `stream` has completed when they return. */
int ocl_copy_sync(struct adr_backend_device* dst_dev, void* dst, struct adr_backend_device* src_dev,
                  const void* src, size_t size, struct adr_backend_stream* stream,
                  struct adr_error* error);
int ocl_memset_sync(struct adr_backend_device* dev, void* ptr, int value, size_t size,
                    struct adr_backend_stream* stream, struct adr_error* error);
int ocl_pointer_query(const void* ptr, ArrowDeviceType* out_type, int64_t* out_id,
                      struct adr_error* error);
/* Frees whatever `dev` still has allocated (device_close). */
void ocl_memory_release_device(struct adr_backend_device* dev);
/* Resolves ADR_OPENCL_NATIVE_BUFFER. */
int ocl_buffer_lookup(struct adr_backend_device* dev, struct adr_opencl_buffer* q,
                      struct adr_error* error);

/* ---- native handles from the application (opencl_handle.c) ------------- */

/* Checks that `handle` can be handed to the ICD loader without crashing
 * it: not NULL, its first pointer-sized word is readable, and that word is
 * the ICD dispatch table of an enumerated platform (every OpenCL object
 * starts with it, cl_khr_icd). `what` names the handle in the message.
 * EINVAL with a message otherwise. A pointer into readable memory that
 * happens to start with the dispatch word is not caught (see README). */
int ocl_handle_check(const void* handle, const char* what, struct adr_error* error);
/* Reads *(void**)ptr without faulting; false when it is not readable. */
bool ocl_peek_pointer(const void* ptr, void** out);
/* Records the dispatch table of an enumerated object (init). */
void ocl_handle_learn(const void* object);

/* ---- streams and events (opencl_sync.c) --------------------------------- */

struct adr_backend_event {
  /* Guards `event` against a concurrent re-record: readers take a
   * reference to the current cl_event under the lock and use it outside. */
  pthread_mutex_t lock;
  cl_event event; /* &event is the sync_event handed to Arrow consumers */
  struct adr_backend_device* dev;
  bool imported;
};

/* Creates the in-order queue for a stream of dev. */
int ocl_queue_create(struct adr_backend_device* dev, cl_command_queue* out,
                     struct adr_error* error);
int ocl_stream_create(struct adr_backend_device* dev, uint32_t flags,
                      struct adr_backend_stream** out, struct adr_error* error);
int ocl_stream_destroy(struct adr_backend_device* dev, struct adr_backend_stream* stream,
                       struct adr_error* error);
int ocl_stream_synchronize(struct adr_backend_device* dev, struct adr_backend_stream* stream,
                           struct adr_error* error);
int ocl_stream_import(struct adr_backend_device* dev, void* native_stream,
                      struct adr_backend_stream** out, struct adr_error* error);
void* ocl_stream_native(struct adr_backend_device* dev, struct adr_backend_stream* stream);
int ocl_event_create(struct adr_backend_device* dev, struct adr_backend_event** out,
                     struct adr_error* error);
int ocl_event_destroy(struct adr_backend_device* dev, struct adr_backend_event* event,
                      struct adr_error* error);
int ocl_event_record(struct adr_backend_device* dev, struct adr_backend_event* event,
                     struct adr_backend_stream* stream, struct adr_error* error);
int ocl_event_wait(struct adr_backend_device* dev, struct adr_backend_event* event,
                   struct adr_backend_stream* stream, struct adr_error* error);
int ocl_event_synchronize(struct adr_backend_device* dev, struct adr_backend_event* event,
                          struct adr_error* error);
int ocl_event_query(struct adr_backend_device* dev, struct adr_backend_event* event,
                    struct adr_error* error);
void* ocl_event_native(struct adr_backend_device* dev, struct adr_backend_event* event);
int ocl_event_import(struct adr_backend_device* dev, void* sync_event,
                     struct adr_backend_event** out, struct adr_error* error);

#endif /* ADR_OPENCL_INTERNAL_H */
