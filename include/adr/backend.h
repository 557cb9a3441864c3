/* SPDX-License-Identifier: Apache-2.0
 *
 * adr backend plugin ABI.
 *
 * A backend is a shared object named libadr_<name>.so that exports exactly
 * one symbol, ADR_BACKEND_QUERY_SYMBOL:
 *
 *   const struct adr_backend *adr_backend_query(uint32_t host_abi_major,
 *                                               uint32_t host_abi_minor,
 *                                               const struct adr_backend_host *host);
 *
 * The core calls it once after dlopen. The backend returns NULL when it
 * cannot serve a host with that major version; otherwise its table, with
 * abi_major equal to the host's and abi_minor the version it was built with.
 * The core uses min(host minor, backend minor) and never calls a slot beyond
 * struct_size or a NULL slot (that operation is then ENOTSUP).
 *
 * Evolving the table (docs/backend-abi.md): slots are only appended, each
 * group of new slots bumps ADR_BACKEND_ABI_MINOR, reserved slots are consumed
 * from the front of `reserved`, and a layout change or removal bumps the
 * major version. The static assertions below pin the layout.
 *
 * Handles: struct adr_backend_device / _stream / _event are opaque to the
 * core; each backend defines them. Stream arguments are never NULL: the core
 * passes the device's default stream handle (from stream_create with
 * ADR_BACKEND_STREAM_DEFAULT) and itself synchronises when the application
 * asked for blocking behaviour.
 *
 * Errors: every slot returns 0 or a positive errno value and writes a
 * message with adr_backend_error_set() into `error` (which may be NULL),
 * formatted "NATIVE_NAME: description": the vendor result's name for a
 * vendor failure ("CL_OUT_OF_RESOURCES: clEnqueueSVMMemcpy failed",
 * "VK_ERROR_OUT_OF_DEVICE_MEMORY: ..."), the errno name for the backend's
 * own ("EINVAL: 0x40 is not an allocation"). No "[operation][backend]"
 * prefix: the core adds it, once, in its one checked call per slot. The
 * in-tree backends write both through two helpers, <b>_check(native,
 * error, fmt, ...) and <b>_errorf(error, status, fmt, ...), built on
 * backends/common/status.h.
 *
 * The default stream (the teardown contract). Every device has exactly
 * one default stream, owned by the device:
 *   - stream_create with ADR_BACKEND_STREAM_DEFAULT returns it; the core
 *     asks once, right after device_open / device_adopt, and keeps the
 *     handle until device_close. Asking again returns the same handle.
 *   - The core never passes it to stream_destroy. adr_stream_destroy() on
 *     adr_stream_default() returns EINVAL to the application, with the
 *     message "[adr_stream_destroy][<backend>] the default stream of
 *     <device> cannot be destroyed", without calling the backend; the
 *     stream stays usable.
 *   - At teardown (process exit, docs/lifetime.md) the core, per device:
 *     synchronises every stream and the default stream, destroys the
 *     device's other streams (stream_destroy), returns the device's cached
 *     memory (free), then calls device_close, which drains and releases
 *     the default stream together with the device. If a stream failed to
 *     drain, the core abandons the device instead: no stream_destroy,
 *     free, device_close or shutdown for that backend.
 *   - A backend asked to destroy its default stream anyway (a host that
 *     breaks this contract) leaves it untouched and usable and returns
 *     EINVAL with a message ("the default stream is released by
 *     device_close").
 *
 * Threads: every slot may be called concurrently from several threads.
 */
#ifndef ADR_BACKEND_H
#define ADR_BACKEND_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "adr/adr.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ADR_BACKEND_ABI_MAJOR 1
#define ADR_BACKEND_ABI_MINOR 2
#define ADR_BACKEND_QUERY_SYMBOL "adr_backend_query"

enum adr_log_level {
  ADR_LOG_ERROR = 0,
  ADR_LOG_WARN = 1,
  ADR_LOG_INFO = 2,
  ADR_LOG_DEBUG = 3,
  ADR_LOG_TRACE = 4,
};

/* Services the core offers a backend. Valid until process exit. A 1.x
 * host's struct is at least ADR_BACKEND_HOST_MIN_STRUCT_SIZE bytes; new
 * services take `reserved` slots from the front with a minor bump (check
 * abi_minor before using one). */
struct adr_backend_host {
  uint32_t struct_size;
  uint32_t abi_major;
  uint32_t abi_minor;
  uint32_t reserved32;
  /* Logs through ADR_LOG's sink. `backend` is the backend's name. */
  void (*log)(int level, const char* backend, const char* fmt, ...) ADR_PRINTF(3, 4);
  /* Environment look-up that returns NULL in setuid/setgid processes
   * (secure_getenv). Backends read their own variables through it. */
  const char* (*getenv)(const char* name);
  /* The current ADR_LOG level, so a backend can skip formatting. */
  int (*log_level)(void);
  void* reserved[8];
};

struct adr_backend_device;
struct adr_backend_stream;
struct adr_backend_event;
struct adr_share_handle; /* adr/share.h */

enum adr_backend_stream_flags {
  /* Return the device's default stream: never passed to stream_destroy,
   * released by device_close (the teardown contract above). */
  ADR_BACKEND_STREAM_DEFAULT = 1u << 0,
};

/* The vtable. Field order is ABI. */
struct adr_backend {
  uint32_t abi_major;
  uint32_t abi_minor;
  uint32_t struct_size; /* sizeof(struct adr_backend) the backend was built with */
  uint32_t flags;       /* reserved, 0 */
  const char* name;     /* "cpu", "cuda" ...: [a-z0-9_]+ */
  const char* version;  /* backend's own version text */
  const ArrowDeviceType* device_types; /* the types it serves */
  uint32_t device_type_count;
  uint32_t reserved32;

  /* --- lifecycle (required: all but shutdown) --- */

  /* Called once before any other slot. ENODEV means "unavailable" (driver
   * or hardware missing) and must carry the reason; any other failure is a
   * rejection. Either way shutdown is not called. */
  int (*init)(struct adr_error* error);
  /* Called once at process exit after all devices were closed. */
  void (*shutdown)(void);
  /* Number of devices of `type` (one of device_types). */
  int (*device_count)(ArrowDeviceType type, int64_t* out, struct adr_error* error);
  /* Enumeration only: create no context, queue or logical device here;
   * open the native device on the first slot that needs it
   * (docs/backend-abi.md, "Opening devices lazily"). */
  int (*device_open)(ArrowDeviceType type, int64_t id, struct adr_backend_device** out,
                     struct adr_error* error);
  void (*device_close)(struct adr_backend_device* dev);
  /* Fill what it knows; the core pre-fills type, id, backend and zeroes.
   * That includes the identity (kind, uuid, PCI address, `identity`
   * bits), from enumeration queries only; a backend that leaves them
   * zero reports none (docs/backend-abi.md, "Device identity"). */
  int (*device_info)(struct adr_backend_device* dev, struct adr_device_info* out,
                     struct adr_error* error);

  /* --- memory (required: all) --- */

  /* size > 0, alignment a power of two >= 64 (checked by the core). */
  int (*alloc)(struct adr_backend_device* dev, size_t size, size_t alignment,
               struct adr_backend_stream* stream, void** out, struct adr_error* error);
  /* ptr/size were returned by alloc on this device (checked by the core). */
  int (*free)(struct adr_backend_device* dev, void* ptr, size_t size,
              struct adr_backend_stream* stream, struct adr_error* error);
  /* A NULL device means host memory. At most one of dst_dev/src_dev is NULL;
   * both non-NULL may be two devices of this backend (peer). `stream`
   * belongs to one of the devices. Queue the copy on the stream; the core
   * synchronises if the application asked for a blocking copy. A host
   * source or destination stays valid until the stream reaches the copy. */
  int (*copy)(struct adr_backend_device* dst_dev, void* dst, struct adr_backend_device* src_dev,
              const void* src, size_t size, struct adr_backend_stream* stream,
              struct adr_error* error);
  int (*memset)(struct adr_backend_device* dev, void* ptr, int value, size_t size,
                struct adr_backend_stream* stream, struct adr_error* error);

  /* --- streams (required: all) --- */
  int (*stream_create)(struct adr_backend_device* dev, uint32_t flags,
                       struct adr_backend_stream** out, struct adr_error* error);
  /* Waits for the stream's work, then frees it. The handle is gone when
   * this returns, whatever it returns: a driver error while destroying is
   * reported, but the backend frees its wrapper all the same (the core
   * drops its own object). Only the default stream is refused (EINVAL,
   * untouched; the teardown contract above). event_destroy is alike. */
  int (*stream_destroy)(struct adr_backend_device* dev, struct adr_backend_stream* stream,
                        struct adr_error* error);
  int (*stream_synchronize)(struct adr_backend_device* dev, struct adr_backend_stream* stream,
                            struct adr_error* error);

  /* --- events (required: all but event_import) --- */
  int (*event_create)(struct adr_backend_device* dev, struct adr_backend_event** out,
                      struct adr_error* error);
  int (*event_destroy)(struct adr_backend_device* dev, struct adr_backend_event* event,
                       struct adr_error* error);
  int (*event_record)(struct adr_backend_device* dev, struct adr_backend_event* event,
                      struct adr_backend_stream* stream, struct adr_error* error);
  /* Device-side: `stream` waits for `event`. */
  int (*event_wait)(struct adr_backend_device* dev, struct adr_backend_event* event,
                    struct adr_backend_stream* stream, struct adr_error* error);
  int (*event_synchronize)(struct adr_backend_device* dev, struct adr_backend_event* event,
                           struct adr_error* error);
  /* 0 complete, EBUSY pending, other = error. */
  int (*event_query)(struct adr_backend_device* dev, struct adr_backend_event* event,
                     struct adr_error* error);
  /* Pointer to the native event for ArrowDeviceArray.sync_event (NULL if
   * the backend has none, like the CPU). */
  void* (*event_native)(struct adr_backend_device* dev, struct adr_backend_event* event);

  /* --- interop (optional) --- */
  /* Wrap a foreign sync_event (pointer to a native event); not owned. */
  int (*event_import)(struct adr_backend_device* dev, void* sync_event,
                      struct adr_backend_event** out, struct adr_error* error);
  /* Wrap a foreign native stream; not owned. */
  int (*stream_import)(struct adr_backend_device* dev, void* native_stream,
                       struct adr_backend_stream** out, struct adr_error* error);
  void* (*stream_native)(struct adr_backend_device* dev, struct adr_backend_stream* stream);
  /* Which of this backend's devices owns ptr: ENOENT if none. */
  int (*pointer_query)(const void* ptr, ArrowDeviceType* out_type, int64_t* out_id,
                       struct adr_error* error);
  int (*device_native)(struct adr_backend_device* dev, int kind, void** out,
                       struct adr_error* error);
  /* Create a device over application-owned native objects (see
   * adr_device_adopt); `id` is the id the core assigns. */
  int (*device_adopt)(ArrowDeviceType type, int64_t id, const void* native_desc,
                      struct adr_backend_device** out, struct adr_error* error);
  /* Describe the device as key/value pairs for adr-info ("svm": "coarse,fine",
   * "heap[0]": "2 GiB device-local" ...). Call emit once per pair. */
  int (*device_properties)(struct adr_backend_device* dev, adr_property_fn emit, void* ctx,
                           struct adr_error* error);
  /* Page-lock existing host memory for faster copies, and undo it. */
  int (*host_register)(struct adr_backend_device* dev, void* ptr, size_t size,
                       struct adr_error* error);
  int (*host_unregister)(struct adr_backend_device* dev, void* ptr, struct adr_error* error);

  /* --- blocking variants (optional, ABI 1.1) ---
   * copy / memset on `stream`, returning once the operation and everything
   * queued on the stream before it (by adr or by the application on the
   * stream's native queue) has completed: the effect of the plain slot
   * followed by stream_synchronize, in one call. The core calls these for
   * the application's blocking calls (NULL stream); a backend may skip the
   * queue when it knows the stream is idle (a memcpy on host-visible
   * memory). NULL or not covered by struct_size: the core calls copy /
   * memset and then stream_synchronize. */
  int (*copy_sync)(struct adr_backend_device* dst_dev, void* dst,
                   struct adr_backend_device* src_dev, const void* src, size_t size,
                   struct adr_backend_stream* stream, struct adr_error* error);
  int (*memset_sync)(struct adr_backend_device* dev, void* ptr, int value, size_t size,
                     struct adr_backend_stream* stream, struct adr_error* error);

  /* --- sharing between processes (optional, ABI 1.2; adr/share.h,
   * docs/sharing.md) ---
   * share_caps: enum adr_share_caps bits the device supports (it may open
   *   the device). Without the slot the core reports 0.
   * share_alloc: `size` bytes (alignment as alloc) that share_export can
   *   export; freed through the ordinary free slot, which must recognise
   *   them. Not stream-ordered.
   * share_export: fill kind, object_id, object_size, offset, native, value
   *   and fd_count of *out for the shareable allocation containing `ptr`
   *   (the core fills the rest) and store a new descriptor the caller owns
   *   in *out_fd (-1 for none). EINVAL for memory that is not shareable.
   * share_import: map the memory `handle` names (the core checked magic,
   *   version, object and device type); `fd` is the descriptor that came
   *   with it (or -1), not taken. *out = the mapping's base + offset.
   * share_close: unmap what share_import returned.
   * event_share_export: make a shareable event, record it on `stream`,
   *   fill *out as share_export does; the event belongs to the caller
   *   (event_destroy).
   * event_share_import: open the event `handle` names; destroyed with
   *   event_destroy (which then closes, not destroys, the native event). */
  int (*share_caps)(struct adr_backend_device* dev, uint32_t* out, struct adr_error* error);
  int (*share_alloc)(struct adr_backend_device* dev, size_t size, size_t alignment, void** out,
                     struct adr_error* error);
  int (*share_export)(struct adr_backend_device* dev, const void* ptr,
                      struct adr_share_handle* out, int* out_fd, struct adr_error* error);
  int (*share_import)(struct adr_backend_device* dev, const struct adr_share_handle* handle,
                      int fd, void** out, struct adr_error* error);
  int (*share_close)(struct adr_backend_device* dev, void* ptr, struct adr_error* error);
  int (*event_share_export)(struct adr_backend_device* dev, struct adr_backend_stream* stream,
                            struct adr_backend_event** out_event, struct adr_share_handle* out,
                            int* out_fd, struct adr_error* error);
  int (*event_share_import)(struct adr_backend_device* dev,
                            const struct adr_share_handle* handle, int fd,
                            struct adr_backend_event** out, struct adr_error* error);

  /* Room to grow: new slots take these from the front, with a minor bump. */
  void (*reserved[7])(void);
};

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && UINTPTR_MAX == UINT64_MAX
_Static_assert(offsetof(struct adr_backend, init) == 48, "adr_backend header layout");
_Static_assert(offsetof(struct adr_backend, alloc) == 96, "adr_backend memory slots");
_Static_assert(offsetof(struct adr_backend, stream_create) == 128, "adr_backend streams");
_Static_assert(offsetof(struct adr_backend, event_create) == 152, "adr_backend events");
_Static_assert(offsetof(struct adr_backend, event_import) == 208, "adr_backend interop");
_Static_assert(offsetof(struct adr_backend, copy_sync) == 280, "adr_backend blocking slots");
_Static_assert(offsetof(struct adr_backend, share_caps) == 296, "adr_backend sharing slots");
_Static_assert(offsetof(struct adr_backend, reserved) == 352, "adr_backend reserved");
_Static_assert(sizeof(struct adr_backend) == 408, "adr_backend size");
_Static_assert(sizeof(struct adr_backend_host) == 104, "adr_backend_host size");
#endif

/* The slots a backend must fill (non-NULL), listed once: the loader
 * rejects a table that leaves one NULL, docs/backend-abi.md's table says
 * the same and tests/unit/test_required_slots.c checks both. Every other
 * slot is optional (NULL: ENOTSUP, or nothing to do for shutdown). */
#define ADR_BACKEND_REQUIRED_SLOTS(X)                                                              \
  X(init)                                                                                          \
  X(device_count) X(device_open) X(device_close) X(device_info) X(alloc) X(free) X(copy) X(memset) \
      X(stream_create) X(stream_destroy) X(stream_synchronize) X(event_create) X(event_destroy)    \
          X(event_record) X(event_wait) X(event_synchronize) X(event_query) X(event_native)

/* Smallest struct_size the core accepts: the ABI 1.0 slots up to
 * event_native (the required ones). Later optional slots are checked
 * against struct_size one by one. */
#define ADR_BACKEND_MIN_STRUCT_SIZE offsetof(struct adr_backend, event_import)

/* The size of struct adr_backend_host in ABI 1.0 (every service up to and
 * including `reserved`). A backend refuses to use a host struct that is
 * NULL or smaller: its init fails, with no service called
 * (backends/common/host.c: adr_host_init). */
#define ADR_BACKEND_HOST_MIN_STRUCT_SIZE 104u
#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && UINTPTR_MAX == UINT64_MAX
_Static_assert(ADR_BACKEND_HOST_MIN_STRUCT_SIZE == sizeof(struct adr_backend_host),
               "ADR_BACKEND_HOST_MIN_STRUCT_SIZE is the ABI 1.0 host struct");
#endif

/* The one symbol a backend exports. */
typedef const struct adr_backend* (*adr_backend_query_fn)(uint32_t host_abi_major,
                                                         uint32_t host_abi_minor,
                                                         const struct adr_backend_host* host);

#if defined(__GNUC__)
#define ADR_BACKEND_EXPORT __attribute__((visibility("default")))
#else
#define ADR_BACKEND_EXPORT
#endif

/* The entry point, declared here so every backend's definition is checked
 * against it. Backends define it with ADR_BACKEND_EXPORT. */
ADR_BACKEND_EXPORT const struct adr_backend* adr_backend_query(
    uint32_t host_abi_major, uint32_t host_abi_minor, const struct adr_backend_host* host);

/* Defines the entry point for a backend whose vtable is `table` (a
 * `static const struct adr_backend`): it returns NULL to a host of another
 * major version; otherwise it calls `keep_host(host)` (a function taking
 * `const struct adr_backend_host*`, which stores the host services for
 * init to check) and returns &table. Use once, at file scope:
 *
 *   ADR_BACKEND_DEFINE_QUERY(table, adr_host_set)
 *
 * The table's abi_minor is what the backend was built with; the core uses
 * min(host minor, table minor), so the host's minor is not looked at. */
#define ADR_BACKEND_DEFINE_QUERY(table, keep_host)                                             \
  ADR_BACKEND_EXPORT const struct adr_backend* adr_backend_query(                              \
      uint32_t host_abi_major, uint32_t host_abi_minor, const struct adr_backend_host* host) { \
    (void)host_abi_minor;                                                                      \
    if (host_abi_major != ADR_BACKEND_ABI_MAJOR) return NULL;                                  \
    keep_host(host);                                                                           \
    return &(table);                                                                           \
  }

/* For backends (which do not link libadr): format a message into `error`
 * (may be NULL) and return `status`. */
static inline int adr_backend_error_set(struct adr_error* error, int status, const char* fmt,
                                        ...) ADR_PRINTF(3, 4);
static inline int adr_backend_error_set(struct adr_error* error, int status, const char* fmt,
                                        ...) {
  if (error != NULL) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error->message, sizeof(error->message), fmt, ap);
    va_end(ap);
  }
  return status;
}

#ifdef __cplusplus
}
#endif

#endif /* ADR_BACKEND_H */
