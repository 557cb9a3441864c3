/* SPDX-License-Identifier: Apache-2.0
 *
 * Zero-copy sharing of device memory between processes on one host
 * (docs/sharing.md).
 *
 * Two levels:
 *
 *  - Buffers. Memory from adr_share_alloc() (on any device whose backend
 *    can share) is exported as a handle: a fixed-size, plain struct (struct
 *    adr_share_handle, copied as bytes) plus at most one file descriptor.
 *    Another process maps it with adr_share_import() and unmaps it with
 *    adr_share_close(). adr_share_handle_send() / _recv() move one handle
 *    and its descriptor over a connected Unix socket (SCM_RIGHTS).
 *
 *  - Arrays. A channel (adr_share_channel_create) over a connected Unix
 *    stream socket sends whole ArrowDeviceArrays with their schema; the
 *    receiver gets an ArrowDeviceArray whose buffers are the mapped memory
 *    (no copy) and whose sync_event is the sender's event where the
 *    backend can share events.
 *
 * What each backend shares (docs/sharing.md has the details):
 *
 *   backend  memory handle                         event handle
 *   cpu      memfd (one fd), mmap'd MAP_SHARED      none (nothing to wait for)
 *   cuda     CUipcMemHandle (cuIpc*MemHandle)       CUipcEventHandle
 *   hip      hipIpcMemHandle_t                      hipIpcEventHandle_t
 *   vulkan   VK_KHR_external_memory_fd opaque fd    none (the sender waits)
 *   opencl   none: ENOTSUP; arrays are staged through shareable CPU memory
 *
 * Lifetime. An importer's mapping is valid until adr_share_close. For the
 * fd-based kinds (cpu, vulkan) the kernel keeps the pages while either side
 * maps them, so the exporter may free at any time. For CUDA and HIP the
 * exporter's allocation must outlive every importer's mapping (the
 * drivers' rule): at the array level the channel does this for you, the
 * sender keeps each array until the receiver released it, closed the
 * channel or died (its end of the socket closes).
 *
 * Thread safety: every function may be called from any thread. A channel
 * may be used by several threads at once (sends are serialised).
 */
#ifndef ADR_SHARE_H
#define ADR_SHARE_H

#include <stddef.h>
#include <stdint.h>

#include "adr/adr.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ADR_SHARE_MAGIC 0x53524441u /* "ADRS" little-endian */
#define ADR_SHARE_HANDLE_VERSION 1
#define ADR_SHARE_NATIVE_SIZE 64

/* What a handle names (struct adr_share_handle.kind). */
enum adr_share_kind {
  ADR_SHARE_KIND_NONE = 0,
  ADR_SHARE_KIND_MEMFD = 1,     /* cpu memory: a memfd, one descriptor */
  ADR_SHARE_KIND_CUDA_IPC = 2,  /* native: CUipcMemHandle / CUipcEventHandle */
  ADR_SHARE_KIND_HIP_IPC = 3,   /* native: hipIpcMemHandle_t / hipIpcEventHandle_t */
  ADR_SHARE_KIND_VULKAN_FD = 4, /* VK_KHR_external_memory_fd opaque fd, one descriptor */
};

/* What a handle is of (struct adr_share_handle.object). */
enum adr_share_object {
  ADR_SHARE_OBJECT_MEMORY = 1,
  ADR_SHARE_OBJECT_EVENT = 2,
};

/* A shareable handle: plain bytes, the same layout in every process of the
 * host (it never leaves the host: native byte order). The file descriptor
 * that goes with it (fd_count 1) travels beside it: adr_share_handle_send
 * passes it with SCM_RIGHTS. Filled by adr_share_export /
 * adr_share_event_export; read by the import functions, which check magic,
 * version and kind. */
struct adr_share_handle {
  uint32_t magic;       /* ADR_SHARE_MAGIC */
  uint16_t version;     /* ADR_SHARE_HANDLE_VERSION */
  uint16_t kind;        /* enum adr_share_kind */
  int32_t device_type;  /* ArrowDeviceType of the exporting device */
  uint16_t object;      /* enum adr_share_object */
  uint16_t fd_count;    /* descriptors that go with it: 0 or 1 */
  int64_t device_id;    /* the exporting device's id */
  uint64_t object_id;   /* the exporter's name for the native object (same object, same id) */
  uint64_t object_size; /* bytes of the exported native allocation (memory) */
  uint64_t offset;      /* where the exported address lies in it */
  int32_t pid;          /* exporting process */
  uint32_t flags;       /* reserved, 0 */
  uint8_t uuid[16];     /* exporting device's UUID when it has one (else zero) */
  uint8_t native[ADR_SHARE_NATIVE_SIZE]; /* backend data (the IPC handle ...) */
  uint64_t value;                        /* event: the payload a wait waits for (backend-defined) */
  uint64_t reserved[3];
};

#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
_Static_assert(sizeof(struct adr_share_handle) == 168, "adr_share_handle size");
#endif

/* Bits of adr_share_caps(). */
enum adr_share_caps {
  ADR_SHARE_CAP_EXPORT_MEMORY = 1u << 0, /* adr_share_alloc + adr_share_export */
  ADR_SHARE_CAP_IMPORT_MEMORY = 1u << 1, /* adr_share_import */
  ADR_SHARE_CAP_EXPORT_EVENT = 1u << 2,  /* adr_share_event_export */
  ADR_SHARE_CAP_IMPORT_EVENT = 1u << 3,  /* adr_share_event_import */
  /* Arrays on the device can be sent, staged through shareable CPU memory
   * (one copy) since the device's memory itself cannot be shared. */
  ADR_SHARE_CAP_STAGED = 1u << 4,
};

/* What `device` can share: enum adr_share_caps bits (every device can at
 * least send arrays staged). From the backend's enumeration queries only:
 * opens no context. ESHUTDOWN after exit. */
ADR_API int adr_share_caps(struct adr_device* device, uint32_t* out_caps, struct adr_error* error);

/* "memory export/import, events export/import" style text of caps bits
 * for tools (writes at most `capacity` bytes, NUL-terminated; "none"). */
ADR_API void adr_share_caps_text(uint32_t caps, char* out, size_t capacity);

/* ---- buffers ------------------------------------------------------------ */

/* Allocates `size` bytes of memory on `device` that can be exported: cpu
 * memory in a memfd, CUDA/HIP memory from cuMemAlloc/hipMalloc (never the
 * stream-ordered pools, which IPC does not cover), Vulkan memory allocated
 * with VkExportMemoryAllocateInfo. It bypasses the caching pool (one
 * native allocation each). Free it with adr_free(device, ptr, size, ...)
 * like any allocation; importers' mappings of fd-based memory stay valid
 * after that, those of CUDA/HIP memory do not (close them first). ENOTSUP
 * with a message when the device cannot share memory (OpenCL). */
ADR_API int adr_share_alloc(struct adr_device* device, size_t size, size_t alignment, void** out,
                            struct adr_error* error);

/* Exports the shareable allocation containing `ptr` (any address inside
 * one from adr_share_alloc) as a handle: out->offset says where ptr lies
 * in it. *out_fd receives a new descriptor owned by the caller (close it
 * after sending it) or -1 when the kind has none. EINVAL with a message
 * for memory that is not shareable ("allocate it with adr_share_alloc");
 * ENOTSUP when the backend cannot export. */
ADR_API int adr_share_export(struct adr_device* device, const void* ptr,
                             struct adr_share_handle* out, int* out_fd, struct adr_error* error);

/* Maps the memory a handle names (exported by another process of this
 * host) on `device`, a device of the exporter's type (it must be the same
 * physical device: the UUID is compared where both have one). *out is the
 * address corresponding to the exporter's pointer (base + offset); the
 * whole exported allocation is mapped. `fd` (with fd_count 1) is not
 * taken: the caller closes it after the call. Unmap with adr_share_close.
 * The mapping is not an adr allocation: do not adr_free it. EINVAL for a
 * malformed handle or one of another kind/device type, EBADF for a
 * missing descriptor, ENOTSUP when the backend cannot import; CUDA/HIP:
 * the driver's error when the exporter is gone or the handle was made in
 * this very process (which the drivers refuse). */
ADR_API int adr_share_import(struct adr_device* device, const struct adr_share_handle* handle,
                             int fd, void** out, struct adr_error* error);

/* Unmaps memory from adr_share_import (`ptr` is what it returned). Work
 * queued on the device's streams must be done with it. EINVAL for a
 * pointer that is not a live import. */
ADR_API int adr_share_close(struct adr_device* device, void* ptr, struct adr_error* error);

/* Records a shareable event on `stream` (of a device with
 * ADR_SHARE_CAP_EXPORT_EVENT) and exports it: *out_event is the event
 * (owned by the caller, adr_event_destroy; keep it until the importer is
 * done with it), *out the handle, *out_fd a descriptor or -1. ENOTSUP
 * when the backend cannot share events (cpu, vulkan, opencl): wait on the
 * host before sending instead. */
ADR_API int adr_share_event_export(struct adr_stream* stream, struct adr_event** out_event,
                                   struct adr_share_handle* out, int* out_fd,
                                   struct adr_error* error);

/* Opens an exported event on `device`: *out is an adr event that streams
 * and the host can wait on (adr_stream_wait_event, adr_event_synchronize;
 * it completes when the exporter's recording does) and whose
 * adr_event_native is the native event (for ArrowDeviceArray.sync_event).
 * Destroy it with adr_event_destroy. `fd` is not taken. */
ADR_API int adr_share_event_import(struct adr_device* device, const struct adr_share_handle* handle,
                                   int fd, struct adr_event** out, struct adr_error* error);

/* Sends one handle and its descriptor (`fd`, -1 for none; not closed) over
 * a connected Unix socket; blocks until written. EPIPE when the peer is
 * gone. */
ADR_API int adr_share_handle_send(int socket_fd, const struct adr_share_handle* handle, int fd,
                                  struct adr_error* error);

/* Receives one handle sent with adr_share_handle_send; *out_fd receives
 * its descriptor (owned by the caller) or -1. Waits at most timeout_ms
 * milliseconds (-1: no limit): ETIMEDOUT. EPIPE when the peer closed the
 * socket, EPROTO for a malformed message. */
ADR_API int adr_share_handle_recv(int socket_fd, int timeout_ms, struct adr_share_handle* out,
                                  int* out_fd, struct adr_error* error);

/* ---- arrays ------------------------------------------------------------- */

/* One end of a connection that carries arrays both ways. */
struct adr_share_channel;

/* Makes a channel over a connected Unix stream socket (socketpair or
 * connect/accept), which the channel owns on success (closed by
 * adr_share_channel_destroy) and the caller keeps on failure. A thread of
 * the channel reads the socket: the peer's releases of arrays this side
 * sent, arrays the peer sends (queued for adr_share_array_recv), and the
 * peer's death (end of file or a reset: SO_PEERCRED names the peer's pid
 * for messages), after which every array this side sent is released. */
ADR_API int adr_share_channel_create(int socket_fd, struct adr_share_channel** out,
                                     struct adr_error* error);

/* Closes the socket (the peer sees the end of the channel), releases every
 * array this side sent (the peer's mappings of CUDA/HIP memory become
 * invalid: it must have released them, as when this process dies), drops
 * arrays received but not taken, and frees the channel once the arrays
 * this side received and still holds are released (they stay valid). */
ADR_API void adr_share_channel_destroy(struct adr_share_channel* channel);

/* Sends `array` (described by `schema`, which is only read) to the peer.
 * The array is moved: the channel keeps it until the peer releases its
 * copy, closes the channel or dies, and then releases it; on failure the
 * caller keeps it. Buffers in shareable memory (adr_share_alloc) travel as
 * handles; if any buffer is not shareable, the whole array is first
 * deep-copied into shareable memory (on the array's device when it can
 * share, else on the CPU: OpenCL, host memory), one copy, waited for. The
 * sync_event: shared as an event handle where the backend can (CUDA, HIP),
 * else waited for on the host before sending. The schema travels as an
 * Arrow IPC Schema message. EPIPE when the peer is gone, E2BIG for more
 * than 250 descriptors in one array. */
ADR_API int adr_share_array_send(struct adr_share_channel* channel,
                                 const struct ArrowSchema* schema, struct ArrowDeviceArray* array,
                                 struct adr_error* error);

/* Receives the next array the peer sent, waiting at most timeout_ms
 * milliseconds (-1: no limit; ETIMEDOUT). *out_schema is an adr-owned
 * schema; *out an ArrowDeviceArray on the local device of the sender's
 * device type and id whose buffers are the mapped memory (no copy) and
 * whose sync_event, if any, is the sender's event (wait on it with
 * adr_device_array_wait before reading). Releasing *out unmaps the memory
 * and tells the sender, which then releases its array. EPIPE when the peer
 * is gone and nothing is queued. */
ADR_API int adr_share_array_recv(struct adr_share_channel* channel, int timeout_ms,
                                 struct ArrowSchema* out_schema, struct ArrowDeviceArray* out,
                                 struct adr_error* error);

/* Number of arrays this side sent that the peer still holds. */
ADR_API size_t adr_share_channel_outstanding(struct adr_share_channel* channel);

/* The peer's process id (SO_PEERCRED: for connect/accept the peer; for a
 * socketpair the process that created the pair), or 0 when unknown. */
ADR_API int adr_share_channel_peer_pid(const struct adr_share_channel* channel);

#ifdef __cplusplus
}
#endif

#endif /* ADR_SHARE_H */
