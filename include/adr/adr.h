/* SPDX-License-Identifier: Apache-2.0
 *
 * adr — the Arrow Device Runtime: public API.
 *
 * One device-agnostic API to allocate, copy and synchronise Arrow-format data
 * on CPUs, CUDA and ROCm GPUs, OpenCL and Vulkan devices. Device code lives in
 * backends (shared objects loaded on first use); this header never changes
 * with the set of backends installed.
 *
 * Conventions that hold for every function below:
 *  - A fallible function returns an int status: 0 on success, otherwise a
 *    positive errno value (EINVAL, ENOMEM, ENOTSUP, ENODEV, EIO, EBUSY ...);
 *    ESHUTDOWN from any call on a device after the exit-time teardown
 *    (docs/lifetime.md).
 *  - Its last parameter is an optional `struct adr_error *` (may be NULL) that
 *    receives a message "[operation][backend] NATIVE_NAME: description" on
 *    failure. It is left untouched on success.
 *  - Output parameters are named out / out_*, placed just before the error.
 *  - A NULL `struct adr_device *` next to a pointer (adr_copy, adr_memset,
 *    the array functions of adr/array.h) means pageable host memory: the
 *    core handles it itself and loads no backend for it. The cpu backend is
 *    the device of ARROW_DEVICE_CPU allocations, streams and events.
 *  - A NULL `struct adr_stream *` means "the device's default stream, and
 *    wait for completion before returning". A non-NULL stream queues the work
 *    (the `Async` behaviour); the caller synchronises with events or
 *    adr_stream_synchronize().
 *  - Thread safety: every function may be called from any thread at any time.
 *    Destroying an object while another thread still uses it is undefined.
 *  - The library never aborts on user input and never writes to stdout.
 */
#ifndef ADR_ADR_H
#define ADR_ADR_H

#include <stddef.h>
#include <stdint.h>

#include "adr/arrow_c_device.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define ADR_API
#elif defined(__GNUC__)
#define ADR_API __attribute__((visibility("default")))
#else
#define ADR_API
#endif

#if defined(__GNUC__)
#define ADR_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define ADR_PRINTF(fmt, args)
#endif

#define ADR_VERSION_MAJOR 0
#define ADR_VERSION_MINOR 1
#define ADR_VERSION_PATCH 0
#define ADR_VERSION_STRING "0.1.0"

/* Arrow recommends 64-byte alignment for buffers; adr never hands out less. */
#define ADR_MIN_ALIGNMENT 64

/* ------------------------------------------------------------------------ */
/* Errors                                                                   */
/* ------------------------------------------------------------------------ */

/* Receives the message of a failed call. Caller-allocated; no release. */
struct adr_error {
  char message[1024];
};

/* "EINVAL", "ENOMEM" ... for a status returned by adr; "OK" for 0;
 * "EUNKNOWN" for a value it does not know. The string is static. */
ADR_API const char* adr_status_name(int status);

/* A short description ("invalid argument") of a status; static string. */
ADR_API const char* adr_status_string(int status);

/* Formats a message into `error` (if not NULL) and returns `status`, so that
 * callers write `return adr_error_set(error, EINVAL, "...")`. */
ADR_API int adr_error_set(struct adr_error* error, int status, const char* fmt, ...)
    ADR_PRINTF(3, 4);

/* ------------------------------------------------------------------------ */
/* Library                                                                  */
/* ------------------------------------------------------------------------ */

/* Reads the environment (ADR_LOG, ADR_BACKENDS, ADR_DEVICE, ADR_PLUGIN_PATH)
 * and prepares the registry. Optional: every other function initialises
 * implicitly on first use. Idempotent and thread-safe; the environment is
 * read once, so a malformed variable is reported by every call that needs
 * it (same status, same message). Any other failure while reading it
 * (ENOMEM) is not kept: the next call reads the environment again. Loads
 * no backend. */
ADR_API int adr_init(struct adr_error* error);

/* "0.1.0" */
ADR_API const char* adr_version(void);

/* ------------------------------------------------------------------------ */
/* Devices                                                                  */
/* ------------------------------------------------------------------------ */

/* A device: one (ArrowDeviceType, id) served by one backend. Device objects
 * are owned by the library and are never freed; pointers to them may be
 * kept and compared for the whole life of the process.
 *
 * Process exit (docs/lifetime.md): adr's atexit handler drains the work
 * queued on every live stream (created and default), then releases the
 * native objects and memory of every device. Calls made after it (from an
 * atexit handler registered before adr's first call, a C++ static
 * destructor, a destructor function) return ESHUTDOWN with a message and
 * touch no freed state: devices, streams, events and allocations stay valid
 * pointers, but nothing can be done with them any more, and destroy calls
 * free nothing. */
struct adr_device;
/* An ordered queue of work on one device. */
struct adr_stream;
/* A point in a stream's work that other streams or the host can wait for. */
struct adr_event;

/* Capability bits of struct adr_device_info.caps. */
enum adr_device_caps {
  /* Buffers may be dereferenced by the host (CPU, pinned, managed, SVM fine). */
  ADR_CAP_HOST_ACCESSIBLE = 1u << 0,
  /* Streams execute asynchronously with respect to the host. */
  ADR_CAP_ASYNC_STREAMS = 1u << 1,
  /* Allocation and free may be ordered on a stream. */
  ADR_CAP_STREAM_ORDERED_ALLOC = 1u << 2,
  /* Device-to-device copies between devices of this backend. */
  ADR_CAP_PEER_COPY = 1u << 3,
  /* Buffer addresses are real device addresses usable in device code. */
  ADR_CAP_DEVICE_ADDRESSES = 1u << 4,
  /* Allocations share one address space with the host (UVA). */
  ADR_CAP_UNIFIED_ADDRESSING = 1u << 5,
  /* adr_event_import / adr_stream_import accept native handles. */
  ADR_CAP_IMPORT_NATIVE = 1u << 6,
  /* A copy from this device into host memory has completed when adr_copy
   * returns, on any stream (Vulkan: the documented exception to the
   * stream contract in docs/devices.md). The bytes may be read at once. */
  ADR_CAP_SYNC_DOWNLOADS = 1u << 7,
};

/* What kind of device it is (struct adr_device_info.kind), and the names
 * selectors use for it (docs/environment.md). */
enum adr_device_kind {
  /* Only seen from a backend that says nothing: adr_device_info_get then
   * reports the kind the device type implies (cpu, cuda_host, hip_host:
   * CPU; cuda, cuda_managed, hip: GPU), else OTHER. Never returned. */
  ADR_DEVICE_KIND_UNKNOWN = 0,
  ADR_DEVICE_KIND_GPU = 1,            /* "gpu": a discrete (or virtual) GPU */
  ADR_DEVICE_KIND_INTEGRATED_GPU = 2, /* "integrated-gpu": shares the host's memory */
  ADR_DEVICE_KIND_CPU = 3,            /* "cpu": the host CPU (PoCL, lavapipe, pinned host memory) */
  ADR_DEVICE_KIND_ACCELERATOR = 4,    /* "accelerator": FPGA, DSP, NPU ... */
  ADR_DEVICE_KIND_OTHER = 5,          /* "other" */
};

/* Bits of struct adr_device_info.identity: which identity fields hold a
 * value (the others are zero). */
enum adr_device_identity {
  ADR_DEVICE_HAS_UUID = 1u << 0,       /* uuid */
  ADR_DEVICE_HAS_PCI_BUS_ID = 1u << 1, /* pci_domain, pci_bus, pci_device, pci_function */
};

/* What adr knows of a device. The caller sets struct_size to
 * sizeof(struct adr_device_info) before the call; newer fields are appended
 * so an old caller keeps working with a newer library.
 *
 * The identity fields (kind, uuid, PCI address) took the struct's reserved
 * space in adr 0.1 (the size, 656 bytes on LP64, and every older offset are
 * unchanged): kind is always set; uuid is the API's device UUID (CUDA/HIP
 * device UUID, Vulkan VkPhysicalDeviceIDProperties::deviceUUID, OpenCL
 * cl_khr_device_uuid) and the PCI address comes from the CUDA/HIP
 * attributes, VK_EXT_pci_bus_info or cl_khr_pci_bus_info, each only where
 * the API reports it (see `identity`). They come from the vendor's
 * enumeration queries: reading them opens no context. */

struct adr_device_info {
  uint32_t struct_size;
  ArrowDeviceType device_type;
  int64_t device_id;
  char name[256];        /* "NVIDIA H100", "pthread-x86_64", "llvmpipe ..." */
  char vendor[128];      /* "NVIDIA", "AMD", "Mesa", "The pocl project" */
  char backend[32];      /* backend name: "cuda", "opencl" ... */
  char driver[128];      /* driver / runtime version text, may be empty */
  uint64_t memory_total; /* bytes; 0 when unknown */
  uint64_t memory_free;  /* bytes; 0 when unknown */
  uint64_t caps;         /* enum adr_device_caps bits */
  uint32_t alignment;    /* natural alignment of allocations (>= 64) */
  uint32_t kind;         /* enum adr_device_kind, never UNKNOWN */
  uint8_t uuid[16];      /* with ADR_DEVICE_HAS_UUID, in the API's byte order */
  uint32_t pci_domain;   /* with ADR_DEVICE_HAS_PCI_BUS_ID: domain:bus:device.function */
  uint8_t pci_bus;
  uint8_t pci_device;
  uint8_t pci_function;
  uint8_t identity;      /* enum adr_device_identity bits */
  uint64_t reserved[5];
};

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && UINTPTR_MAX == UINT64_MAX
/* The identity fields live in what was reserved32 and reserved[8]. */
_Static_assert(offsetof(struct adr_device_info, alignment) == 584, "adr_device_info layout");
_Static_assert(offsetof(struct adr_device_info, kind) == 588, "adr_device_info kind");
_Static_assert(offsetof(struct adr_device_info, uuid) == 592, "adr_device_info uuid");
_Static_assert(offsetof(struct adr_device_info, pci_domain) == 608, "adr_device_info pci");
_Static_assert(offsetof(struct adr_device_info, identity) == 615, "adr_device_info identity");
_Static_assert(offsetof(struct adr_device_info, reserved) == 616, "adr_device_info reserved");
_Static_assert(sizeof(struct adr_device_info) == 656, "adr_device_info size");
#endif

/* The smallest struct_size adr_device_info_get accepts: every field before
 * uuid (what adr 0.1 callers had before the reserved space). */
#define ADR_DEVICE_INFO_MIN_SIZE 592u

/* "gpu", "integrated-gpu", "cpu", "accelerator", "other"; "unknown" for
 * ADR_DEVICE_KIND_UNKNOWN and any other value. Static string. */
ADR_API const char* adr_device_kind_name(int kind);

/* Returns the device (type, id), loading its backend if needed. ENODEV with
 * the reason (backend absent, excluded by ADR_BACKENDS, rejected, driver
 * unavailable, id out of range) when it cannot be had. */
ADR_API int adr_device_get(ArrowDeviceType type, int64_t id, struct adr_device** out,
                           struct adr_error* error);

/* The default device: the first available entry of ADR_DEVICE's preference
 * list (see docs/environment.md); the CPU when ADR_DEVICE is unset. A
 * malformed ADR_DEVICE is EINVAL naming the offending position. */
ADR_API int adr_device_default(struct adr_device** out, struct adr_error* error);

/* The first available device a selector names, with the grammar, the
 * preference order and the messages of ADR_DEVICE (docs/environment.md):
 * "cuda:1,hip:0,cpu", "opencl:gpu", "*:accelerator", "*",
 * "cuda:GPU-<uuid>", "uuid=<uuid>" ... The list is a preference order:
 * the first entry that matches an available device wins; within an entry
 * that matches several ("*", "name:*", "*:gpu", "uuid=..."), discrete GPUs
 * come first, then integrated GPUs, accelerators, other devices and CPUs,
 * each in enumeration order. Lets an application with a --device flag
 * choose without setenv; ADR_DEVICE and adr_device_default are not
 * involved. Loads only the backends the entries need ("*", "*:kind" and
 * "uuid=" load every allowed backend) and opens no device context.
 * `selector` is only read during the call; the device is owned by adr.
 * Errors: EINVAL for NULL arguments or a malformed selector (the message
 * names the column, as for ADR_DEVICE: `selector="cuda:x": column 6:
 * expected ...`); ENODEV with every entry's reason when none is
 * available; ESHUTDOWN after exit. Thread-safe (takes the registry lock). */
ADR_API int adr_device_select(const char* selector, struct adr_device** out,
                              struct adr_error* error);

/* Every device a selector matches, in the order adr_device_select would
 * try them (entry by entry, each entry's matches in the preference order
 * above), each device once. Writes the first min(count, capacity) devices
 * to `out_devices` (caller-allocated; may be NULL when capacity is 0) and the number of matches
 * to *out_count; call with capacity 0 to size the array. No match is not
 * an error (*out_count = 0). Same loading, errors, ownership and thread
 * safety as adr_device_select. */
ADR_API int adr_device_enumerate(const char* selector, struct adr_device** out_devices,
                                 size_t capacity, size_t* out_count, struct adr_error* error);

/* Whether two devices are the same physical device seen through two APIs
 * or device types (cuda:0 and vulkan:1 on one NVIDIA GPU; cuda:0 and
 * cuda_managed:0; hip:0 and opencl:0 on one AMD GPU): *out_same is 1 when
 * they are, else 0. The rule, in order (docs/devices.md, "One identity per
 * physical device"): the same device object; equal UUIDs; equal PCI
 * addresses (different PCI addresses: not the same); two CPU-kind devices
 * without a PCI address are the host CPU, so the same (cpu:0, PoCL,
 * lavapipe, cuda_host:0). Anything else is not the same. Uses only the
 * identity the devices reported when they were enumerated. EINVAL for
 * NULL arguments or a pointer that is not an adr device. Thread-safe. */
ADR_API int adr_device_same_physical(struct adr_device* a, struct adr_device* b, int* out_same,
                                     struct adr_error* error);

/* Loads every backend ADR_BACKENDS allows and counts their devices. */
ADR_API int adr_device_count(size_t* out, struct adr_error* error);

/* The index-th device of the enumeration (backend order, then device type,
 * then id); index < adr_device_count(). */
ADR_API int adr_device_at(size_t index, struct adr_device** out, struct adr_error* error);

ADR_API ArrowDeviceType adr_device_type(const struct adr_device* device);
ADR_API int64_t adr_device_id(const struct adr_device* device);
/* "cpu:0", "cuda:1" ... static for the device's lifetime. */
ADR_API const char* adr_device_name(const struct adr_device* device);

/* Fills `out` (caller sets out->struct_size). memory_free is read now. */
ADR_API int adr_device_info_get(struct adr_device* device, struct adr_device_info* out,
                                struct adr_error* error);

/* Native handles of a device, for interop with the vendor API. The kinds a
 * backend serves are listed in its README and in adr/<backend>.h. */
enum adr_native_kind {
  ADR_NATIVE_DEVICE = 1,   /* CUdevice, hipDevice_t, cl_device_id, VkPhysicalDevice */
  ADR_NATIVE_CONTEXT = 2,  /* CUcontext, cl_context, VkDevice */
  ADR_NATIVE_QUEUE = 3,    /* default CUstream, hipStream_t, cl_command_queue, VkQueue */
  ADR_NATIVE_PLATFORM = 4, /* cl_platform_id, VkInstance */
  ADR_NATIVE_QUEUE_FAMILY = 5, /* Vulkan queue family index (as uintptr_t) */
};

/* Stores the native handle of `kind` in *out (a pointer-sized value; the
 * backend's header says what it is). The handle stays owned by adr. ENOTSUP
 * for a kind the backend does not have. */
ADR_API int adr_device_native(struct adr_device* device, int kind, void** out,
                              struct adr_error* error);

/* Creates a device over an application's existing native objects (an
 * OpenCL context and queue, a VkDevice and queue ...), described by a
 * backend-specific struct from adr/<backend>.h. The native objects stay
 * owned by the application and must outlive the device. The new device gets
 * an id after the enumerated ones and is returned by adr_device_get too. */
ADR_API int adr_device_adopt(ArrowDeviceType type, const void* native_desc,
                             struct adr_device** out, struct adr_error* error);

/* Called once per property by adr_device_properties. */
typedef void (*adr_property_fn)(void* ctx, const char* key, const char* value);

/* Backend-specific description of the device as key/value pairs (OpenCL
 * platform and SVM capabilities, Vulkan heaps and queue families, CUDA
 * compute capability ...), as adr-info prints them. ENOTSUP when the
 * backend has none. */
ADR_API int adr_device_properties(struct adr_device* device, adr_property_fn emit, void* ctx,
                                  struct adr_error* error);

/* ------------------------------------------------------------------------ */
/* Memory                                                                   */
/* ------------------------------------------------------------------------ */

/* Allocates `size` bytes on `device`, aligned to max(alignment, 64)
 * (alignment 0 = 64; otherwise a power of two). The address is what goes in
 * ArrowArray.buffers: pointer arithmetic on it is valid (docs/devices.md says
 * what it is per backend). size 0 returns a unique non-NULL address. With a
 * stream the memory is ready for work on that stream (stream-ordered); use
 * on other streams needs an event. The caller owns the memory and frees it
 * with adr_free(device, ptr, size, ...). EOVERFLOW when size plus alignment
 * overflows; ENOMEM when the device has no room. */
ADR_API int adr_alloc(struct adr_device* device, size_t size, size_t alignment,
                      struct adr_stream* stream, void** out, struct adr_error* error);

/* Frees memory from adr_alloc on the same device; `size` must be the size it
 * was allocated with. With a stream, the memory is reused or released only
 * after the work queued on that stream before the call has completed (no
 * host wait). With a NULL stream the caller guarantees that no queued work
 * still uses the memory (synchronise first); adr does not wait. EINVAL
 * (nothing freed) for a pointer this device did not allocate or a wrong
 * size. */
ADR_API int adr_free(struct adr_device* device, void* ptr, size_t size,
                     struct adr_stream* stream, struct adr_error* error);

/* Copies `size` bytes from (src_device, src) to (dst_device, dst); the
 * pointers may point into the middle of allocations. Any pair of devices:
 * same device, host <-> device, two devices of one backend, or devices of
 * two backends (staged through host memory by the core). `stream` may be
 * NULL (synchronous) or a stream of dst_device or src_device on which the
 * copy is ordered. A CPU source must stay valid until the copy completes.
 *
 * A NULL device is pageable host memory (docs/devices.md, "Host memory"),
 * for which no backend is loaded: host <-> X is X's own copy, and `stream`
 * must then be X's (EINVAL otherwise); host <-> host (both NULL) is a
 * memmove by the core, and with a stream of any device it runs after that
 * stream's queued work (a host wait), so it has completed when adr_copy
 * returns. The caller keeps ownership of host memory; with a stream it must
 * stay valid until the stream reaches the copy. Errors: EINVAL for a NULL
 * pointer (either device), for a stream of neither device, and, on a host
 * to host copy (on every copy with the validation layer on), for a host
 * pointer inside an allocation of a loaded device that is not
 * host-accessible (a device pointer passed as host memory); EOVERFLOW for
 * a size above PTRDIFF_MAX or a range that wraps. size 0 does nothing.
 * Ordering includes work the application queued itself on adr's native
 * queues: with a stream the copy is queued behind it and the call does not
 * wait for it; with NULL the call returns after it and the copy completed
 * (docs/devices.md lists the backends' pageable-memory exceptions).
 * Overlapping source and destination ranges (within one allocation) have
 * memmove semantics on every backend, stream or not. */
ADR_API int adr_copy(struct adr_device* dst_device, void* dst, struct adr_device* src_device,
                     const void* src, size_t size, struct adr_stream* stream,
                     struct adr_error* error);

/* Sets `size` bytes at ptr to (unsigned char)value. A NULL device is
 * pageable host memory: a memset by the core, with no backend loaded; with
 * a stream (of any device) it runs after that stream's queued work (a host
 * wait) and has completed when the call returns. EINVAL for a NULL ptr and,
 * with a NULL device, for ptr inside an allocation of a loaded device that
 * is not host-accessible; EOVERFLOW as for adr_copy. Host memset asks the
 * loaded backends about ptr (the registry lock): not for hot loops. */
ADR_API int adr_memset(struct adr_device* device, void* ptr, int value, size_t size,
                       struct adr_stream* stream, struct adr_error* error);

/* Page-locks `size` bytes of existing host memory at ptr with `device`'s
 * driver so copies from/to it are faster and truly asynchronous; undo with
 * adr_host_unregister before freeing it. ENOTSUP where the backend has no
 * such notion (CPU, OpenCL, Vulkan). */
ADR_API int adr_host_register(struct adr_device* device, void* ptr, size_t size,
                              struct adr_error* error);
ADR_API int adr_host_unregister(struct adr_device* device, void* ptr, struct adr_error* error);

/* Which device owns `ptr` (any address inside an allocation). Asks the
 * backends that are loaded; ENOENT when none claims it. Not a hot-path
 * call: backends may take a lock. */
ADR_API int adr_pointer_query(const void* ptr, struct adr_device** out,
                              struct adr_error* error);

/* ------------------------------------------------------------------------ */
/* Streams                                                                  */
/* ------------------------------------------------------------------------ */

/* Creates a stream: work queued on it runs in order, asynchronously with
 * respect to the host and other streams. Destroy with adr_stream_destroy. */
ADR_API int adr_stream_create(struct adr_device* device, struct adr_stream** out,
                              struct adr_error* error);

/* Waits for the stream's queued work, then destroys it. The default stream
 * and imported streams' native handles are not destroyed (EINVAL for the
 * default stream, which stays usable). Any other status reports a driver
 * error during the destroy: the stream is destroyed all the same and must
 * not be used again. */
ADR_API int adr_stream_destroy(struct adr_stream* stream, struct adr_error* error);

/* Blocks until all work queued on the stream has completed. */
ADR_API int adr_stream_synchronize(struct adr_stream* stream, struct adr_error* error);

/* The device's default stream (owned by adr; never destroyed). Work queued
 * on it is asynchronous like any stream's; only a NULL stream argument
 * blocks. */
ADR_API struct adr_stream* adr_stream_default(struct adr_device* device);

ADR_API struct adr_device* adr_stream_device(const struct adr_stream* stream);

/* Wraps an application's native stream (CUstream, hipStream_t,
 * cl_command_queue ...). adr does not own it: adr_stream_destroy frees only
 * the wrapper. */
ADR_API int adr_stream_import(struct adr_device* device, void* native_stream,
                              struct adr_stream** out, struct adr_error* error);

/* The native stream handle (CUstream, cl_command_queue ...), owned by adr. */
ADR_API void* adr_stream_native(struct adr_stream* stream);

/* ------------------------------------------------------------------------ */
/* Events                                                                   */
/* ------------------------------------------------------------------------ */

/* Creates an event on `device`. A never-recorded event is complete. */
ADR_API int adr_event_create(struct adr_device* device, struct adr_event** out,
                             struct adr_error* error);

/* Destroys the event (and its native event unless it was imported). A
 * status other than EINVAL for a bad handle reports a driver error during
 * the destroy: the event is destroyed all the same. */
ADR_API int adr_event_destroy(struct adr_event* event, struct adr_error* error);

/* Captures the work queued on `stream` so far (NULL = default stream).
 * Re-recording moves the event to the new point. */
ADR_API int adr_event_record(struct adr_event* event, struct adr_stream* stream,
                             struct adr_error* error);

/* Device-side wait: work queued on `stream` after this call starts only
 * after `event` completes. The host does not block (unless stream is NULL). */
ADR_API int adr_stream_wait_event(struct adr_stream* stream, struct adr_event* event,
                                  struct adr_error* error);

/* Host-side wait for the event. */
ADR_API int adr_event_synchronize(struct adr_event* event, struct adr_error* error);

/* 0 when the event has completed, EBUSY when not yet; other statuses are
 * errors. Never blocks. */
ADR_API int adr_event_query(struct adr_event* event, struct adr_error* error);

/* Pointer to the native event, as ArrowDeviceArray.sync_event carries it
 * (CUevent*, hipEvent_t*, cl_event*, VkEvent*); NULL for the CPU. The
 * pointee is owned by the adr event. */
ADR_API void* adr_event_native(struct adr_event* event);

/* Wraps a foreign sync_event (a pointer to a native event of `device`'s
 * backend) so streams and the host can wait on it. adr does not own the
 * native event: adr_event_destroy frees only the wrapper. */
ADR_API int adr_event_import(struct adr_device* device, void* sync_event,
                             struct adr_event** out, struct adr_error* error);

ADR_API struct adr_device* adr_event_device(const struct adr_event* event);

/* ------------------------------------------------------------------------ */
/* Backends (for tools such as adr-info)                                    */
/* ------------------------------------------------------------------------ */

enum adr_backend_state {
  ADR_BACKEND_NOT_LOADED = 0, /* allowed, not needed yet */
  ADR_BACKEND_LOADED = 1,     /* loaded and initialised */
  ADR_BACKEND_ABSENT = 2,     /* no library file found */
  ADR_BACKEND_EXCLUDED = 3,   /* excluded by ADR_BACKENDS (never opened) */
  ADR_BACKEND_REJECTED = 4,   /* found but refused: dlopen, ABI, init ... */
  ADR_BACKEND_UNAVAILABLE = 5 /* loaded, but its driver/devices are missing */
};

#define ADR_MAX_DEVICE_TYPES 8

struct adr_backend_info {
  uint32_t struct_size;
  int32_t state; /* enum adr_backend_state */
  char name[64];
  char path[1024];   /* resolved library path, empty when absent */
  char reason[1024]; /* why absent/rejected/unavailable/excluded */
  uint32_t abi_major, abi_minor; /* negotiated, when loaded */
  uint32_t device_type_count;
  ArrowDeviceType device_types[ADR_MAX_DEVICE_TYPES];
  int64_t device_count; /* over all its types, when loaded */
  uint64_t reserved[8];
};

/* Loads every backend ADR_BACKENDS allows (in-tree ones and libadr_*.so
 * found in ADR_PLUGIN_PATH). Failures are recorded, not returned: a
 * rejected backend does not make this fail. */
ADR_API int adr_backends_load_all(struct adr_error* error);

/* Number of backends known (loaded or not). */
ADR_API size_t adr_backend_count(void);

/* Describes backend `index` (caller sets out->struct_size). */
ADR_API int adr_backend_info_get(size_t index, struct adr_backend_info* out,
                                 struct adr_error* error);

/* The backend search path as a colon-separated list, in order. Static. */
ADR_API const char* adr_backend_search_path(void);

/* Elevated processes (setuid/setgid or file capabilities: AT_SECURE, where
 * secure_getenv returns NULL). There, no environment variable may name a
 * file or a library, and the in-tree backends whose vendor stack takes
 * files or libraries from the environment without checking for elevation
 * (opencl, cuda and hip; see docs/environment.md) are not loaded: they
 * are listed as ADR_BACKEND_EXCLUDED with the reason, and adr_device_get
 * on their types is ENODEV naming it. cpu and vulkan load as usual.
 *
 * adr_backend_allow_elevated lets backend `name` ("opencl", "cuda" or
 * "hip") load in an elevated process all the same: the application takes
 * on that the vendor loader then honours its environment (clear it first
 * if that matters). There is no environment variable for this, on purpose.
 * In a process that is not elevated the call only records the choice, so
 * a program behaves the same whether or not it runs elevated.
 *
 * Call it before the first call that needs the backend (adr_device_get of
 * one of its types, a default device naming it, adr_device_count,
 * adr_backends_load_all ...). Returns 0 (also for "cpu" and "vulkan",
 * which need no opt-in, and when called again for the same backend);
 * EBUSY when the backend was already needed without the opt-in, so its
 * state is decided (nothing changes); EINVAL for NULL or an unknown name.
 * `name` is only read during the call. Thread-safe; it takes the registry
 * lock. */
ADR_API int adr_backend_allow_elevated(const char* name, struct adr_error* error);

/* Names for device types: "cpu", "cuda", "cuda_host", "hip", "opencl" ...;
 * NULL for an unknown type. */
ADR_API const char* adr_device_type_name(ArrowDeviceType type);

/* ------------------------------------------------------------------------ */
/* Validation layer (docs/validation.md)                                    */
/* ------------------------------------------------------------------------ */

/* Always checked, on every device: adr_copy/adr_memset sizes above
 * PTRDIFF_MAX and ranges that wrap around the address space (EOVERFLOW).
 * On devices that are not host-accessible (OpenCL buffer and svm-coarse,
 * Vulkan, CUDA, HIP device memory) a copy or memset range that starts in an
 * allocation adr made and runs past the end of it is EINVAL, also when the
 * caching pool put a neighbour right behind it.
 *
 * The validation layer, off by default, in the spirit of the Vulkan
 * validation layers and compute-sanitizer memcheck, checks every call (see
 * docs/validation.md for the list and the messages): stream and event
 * handles (use after destroy and double destroy are EINVAL naming the object
 * and where it was created and destroyed: destroyed objects are kept in a
 * quarantine, not freed), copy/memset ranges against the allocation they
 * start in on every device, frees against a quarantine (a stale double free
 * is EINVAL "double free" and never frees the allocation now at that
 * address: freed memory goes back to the pool only after 1024 later frees
 * or 256 MiB), and at exit a leak report (allocations, streams and events
 * still alive, with the call site that made each) at ADR_LOG=warn. It costs
 * one predictable branch per call when off.
 *
 * Turns the layer on for this process, like ADR_VALIDATE=1. Call it before
 * the first allocation, stream or event is made (the layer's state is fixed
 * by that call); EBUSY after that unless the layer is already on. */
ADR_API int adr_validation_enable(struct adr_error* error);

/* 1 when the layer is (or, if nothing was created yet, will be) on. */
ADR_API int adr_validation_enabled(void);

/* What adr_validation_report found. The caller sets struct_size. */
struct adr_validation_counts {
  uint32_t struct_size;
  uint32_t reserved32;
  uint64_t allocations;      /* live allocations */
  uint64_t allocation_bytes; /* their sizes as requested */
  uint64_t streams;          /* live streams (created or imported; not default streams) */
  uint64_t events;           /* live events (created or imported) */
  uint64_t errors;           /* calls the checks refused so far */
  uint64_t reserved[4];
};

enum adr_validation_kind {
  ADR_VALIDATION_ALLOCATION = 1,
  ADR_VALIDATION_STREAM = 2,
  ADR_VALIDATION_EVENT = 3,
};

/* One live object: `object` is the allocation's address (size in bytes) or
 * the struct adr_stream / adr_event pointer (size 0); created_at is the call
 * site that made it ("function+0x1c (module)"), valid during the call. */
typedef void (*adr_validation_leak_fn)(void* ctx, int kind, struct adr_device* device,
                                       const void* object, size_t size, const char* created_at);

/* Lists the objects still alive now (what the exit report would list) to fn
 * (may be NULL) and counts them into out (may be NULL). fn runs with the
 * layer's locks held and must not call adr. ENOTSUP when the layer is off. */
ADR_API int adr_validation_report(adr_validation_leak_fn fn, void* ctx,
                                  struct adr_validation_counts* out, struct adr_error* error);

#ifdef __cplusplus
}
#endif

/* Arrow device arrays: format parsing, export/import, validation, deep copy
 * and device streams (it includes this header itself, hence last). */
#include "adr/array.h"

#endif /* ADR_ADR_H */
