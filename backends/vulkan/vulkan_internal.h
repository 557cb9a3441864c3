/* SPDX-License-Identifier: Apache-2.0
 *
 * Internals of the Vulkan backend (libadr_vulkan.so). Nothing here is ABI.
 *
 * Files: vulkan_backend.c (the vtable only), vulkan_loader.c (libvulkan and
 * entry-point resolution), vulkan_instance.c (environment, host log and
 * getenv, instance, validation messenger, exit handling), vulkan_device.c
 * (physical and logical devices, adoption, info, properties, native
 * handles), vulkan_status.c (VkResult -> status + message, the only such
 * file), vulkan_memory.c (blocks, sub-allocation, address map),
 * vulkan_sync.c (streams, submissions, events), vulkan_copy.c (copy,
 * memset, staging ring).
 *
 * Locks, always taken in this order and never the other way round:
 *   staging_lock -> stream->lock -> queue_lock
 *   mem_lock is a leaf (nothing else is taken while it is held).
 *   g_devices_lock and g_events_lock are leaves.
 */
#ifndef ADR_VULKAN_INTERNAL_H
#define ADR_VULKAN_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <vulkan/vulkan_core.h>

#include "adr/backend.h"
#include "adr/vulkan.h"
#include "host.h"

#define VKB_NAME "vulkan"

/* ---- vendor symbols ------------------------------------------------------ */

/* X(name, required). Resolved with vkGetInstanceProcAddr(NULL, ...). */
#define VKB_GLOBAL_FNS(X)                      \
  X(vkCreateInstance, 1)                       \
  X(vkEnumerateInstanceExtensionProperties, 1) \
  X(vkEnumerateInstanceLayerProperties, 1)     \
  X(vkEnumerateInstanceVersion, 0)

/* Resolved per VkInstance with vkGetInstanceProcAddr(instance, ...). */
#define VKB_INSTANCE_FNS(X)                      \
  X(vkDestroyInstance, 1)                        \
  X(vkEnumeratePhysicalDevices, 1)               \
  X(vkGetPhysicalDeviceProperties, 1)            \
  X(vkGetPhysicalDeviceProperties2, 1)           \
  X(vkGetPhysicalDeviceFeatures2, 1)             \
  X(vkGetPhysicalDeviceMemoryProperties, 1)      \
  X(vkGetPhysicalDeviceMemoryProperties2, 1)     \
  X(vkGetPhysicalDeviceQueueFamilyProperties, 1) \
  X(vkEnumerateDeviceExtensionProperties, 1)     \
  X(vkCreateDevice, 1)                           \
  X(vkGetDeviceProcAddr, 1)                      \
  X(vkCreateDebugUtilsMessengerEXT, 0)           \
  X(vkDestroyDebugUtilsMessengerEXT, 0)

/* Resolved per VkDevice with vkGetDeviceProcAddr; all required (core 1.2). */
#define VKB_DEVICE_FNS(X)           \
  X(vkDestroyDevice)                \
  X(vkGetDeviceQueue)               \
  X(vkQueueSubmit)                  \
  X(vkCreateBuffer)                 \
  X(vkDestroyBuffer)                \
  X(vkGetBufferMemoryRequirements)  \
  X(vkAllocateMemory)               \
  X(vkFreeMemory)                   \
  X(vkBindBufferMemory)             \
  X(vkMapMemory)                    \
  X(vkUnmapMemory)                  \
  X(vkFlushMappedMemoryRanges)      \
  X(vkInvalidateMappedMemoryRanges) \
  X(vkGetBufferDeviceAddress)       \
  X(vkCreateCommandPool)            \
  X(vkDestroyCommandPool)           \
  X(vkAllocateCommandBuffers)       \
  X(vkFreeCommandBuffers)           \
  X(vkBeginCommandBuffer)           \
  X(vkEndCommandBuffer)             \
  X(vkCmdCopyBuffer)                \
  X(vkCmdFillBuffer)                \
  X(vkCmdUpdateBuffer)              \
  X(vkCmdPipelineBarrier)           \
  X(vkCmdSetEvent)                  \
  X(vkCmdWaitEvents)                \
  X(vkCreateSemaphore)              \
  X(vkDestroySemaphore)             \
  X(vkWaitSemaphores)               \
  X(vkGetSemaphoreCounterValue)     \
  X(vkCreateEvent)                  \
  X(vkDestroyEvent)                 \
  X(vkSetEvent)                     \
  X(vkResetEvent)                   \
  X(vkGetEventStatus)

struct vkb_global_fns {
#define VKB_X(name, req) PFN_##name name;
  VKB_GLOBAL_FNS(VKB_X)
#undef VKB_X
};

/* A VkInstance with its dispatch table: the backend's own, or an adopted
 * one (one per adopted device). */
struct vkb_instance {
  VkInstance handle;
  bool owned;
  uint32_t api_version;
  PFN_vkGetInstanceProcAddr gipa;
#define VKB_X(name, req) PFN_##name name;
  VKB_INSTANCE_FNS(VKB_X)
#undef VKB_X
};

struct vkb_device_fns {
#define VKB_X(name) PFN_##name name;
  VKB_DEVICE_FNS(VKB_X)
#undef VKB_X
};

/* ---- global state (vulkan_instance.c) ----------------------------------- */

enum vkb_copy_mode { VKB_COPY_AUTO = 0, VKB_COPY_MAPPED = 1, VKB_COPY_STAGING = 2 };
enum vkb_validation { VKB_VALIDATION_OFF = 0, VKB_VALIDATION_ON = 1, VKB_VALIDATION_FATAL = 2 };

/* Set once in init (before any other slot can run), read-only after. */
struct vkb_globals {
  void* libvulkan;
  char libvulkan_path[64];
  PFN_vkGetInstanceProcAddr gipa;
  struct vkb_global_fns g;
  struct vkb_instance instance; /* the backend's own */
  VkDebugUtilsMessengerEXT messenger;
  uint32_t physical_count;
  VkPhysicalDevice* physical;
  enum vkb_copy_mode copy_mode;
  enum vkb_validation validation;
  uint64_t block_size_env; /* ADR_VULKAN_BLOCK_SIZE, 0 = default */
  _Atomic uint64_t validation_messages;
  /* Set by the backend's own exit handler, which tears every Vulkan object
   * down before the driver's and the validation layer's exit handlers run
   * (they are registered after the core's teardown, so they run before
   * it). After that, the core's teardown calls only free host memory. */
  _Atomic bool exited;
};
extern struct vkb_globals vkb_g;

/* True once the exit handler has destroyed the Vulkan objects: the slots
 * the core's teardown still calls (free, stream/event destroy and
 * synchronize) then return 0 without touching them. */
static inline bool vkb_exited(void) {
  return atomic_load_explicit(&vkb_g.exited, memory_order_acquire);
}

/* ---- loader (vulkan_loader.c) -------------------------------------------- */

/* dlopens libvulkan.so.1 and resolves the global entry points into vkb_g. */
int vkb_loader_open(struct adr_error* error);
/* Resolves the instance-level entry points of in->handle through in->gipa;
 * false with the first missing required name in *missing. */
bool vkb_resolve_instance(struct vkb_instance* in, const char** missing);

/* ---- instance (vulkan_instance.c) ---------------------------------------- */

/* Checks the host services first (adr_host_init); logging and getenv are
 * adr_host_log / adr_host_getenv (backends/common/host.h). */
int vkb_init(struct adr_error* error);
void vkb_shutdown(void);
/* The backend's exit handler (registered again after each device is made,
 * so it runs before the driver's own handlers); runs once. */
void vkb_atexit(void);

/* ---- devices (vulkan_device.c) ------------------------------------------- */

/* Open devices (for pointer_query and event import): lock, walk from
 * vkb_devices_first() along next_open, unlock. */
void vkb_devices_lock(bool lock);
struct adr_backend_device* vkb_devices_first(void);
/* Destroys every open device's Vulkan objects (exit handler). */
void vkb_devices_release_all(void);
int vkb_device_count(ArrowDeviceType type, int64_t* out, struct adr_error* error);
int vkb_device_open(ArrowDeviceType type, int64_t id, struct adr_backend_device** out,
                    struct adr_error* error);
int vkb_device_adopt(ArrowDeviceType type, int64_t id, const void* native_desc,
                     struct adr_backend_device** out, struct adr_error* error);
void vkb_device_close(struct adr_backend_device* dev);
int vkb_device_info(struct adr_backend_device* dev, struct adr_device_info* out,
                    struct adr_error* error);
int vkb_device_properties(struct adr_backend_device* dev, adr_property_fn emit, void* ctx,
                          struct adr_error* error);
int vkb_device_native(struct adr_backend_device* dev, int kind, void** out,
                      struct adr_error* error);
int vkb_pointer_query(const void* ptr, ArrowDeviceType* out_type, int64_t* out_id,
                      struct adr_error* error);

/* ---- errors (vulkan_status.c) ------------------------------------------- */

/* "VK_ERROR_OUT_OF_DEVICE_MEMORY" ...; static. */
const char* vkb_result_name(VkResult r);
/* errno value for a VkResult (0 for VK_SUCCESS). */
int vkb_result_status(VkResult r);
/* Writes "VK_NAME: <what>: <description>" (no "[operation][backend]": the
 * core adds it) and returns the status for `r`, EIO for a success code. */
int vkb_check(VkResult r, struct adr_error* error, const char* fmt, ...) ADR_PRINTF(3, 4);
/* Writes "ENAME: <message>" and returns status (failures with no VkResult). */
int vkb_errorf(struct adr_error* error, int status, const char* fmt, ...) ADR_PRINTF(3, 4);

/* ---- memory (vulkan_memory.c) ------------------------------------------------ */

struct vkb_block;

/* One range of a block: free, or one live allocation. Ranges of a block
 * tile it in address order (prev/next); free ranges are also on a size bin
 * list (fprev/fnext). A live range's user part [addr, addr + user_size) is
 * what adr_alloc returned; it is the key of the device's address map. */
struct vkb_range {
  struct vkb_block* block;
  VkDeviceSize offset, size; /* within the block */
  struct vkb_range *prev, *next;
  struct vkb_range *fprev, *fnext;
  VkDeviceAddress addr;   /* live: device address handed out */
  VkDeviceSize user_size; /* live: size asked for */
  uint64_t free_after;    /* deferred free: timeline value */
  struct vkb_range* deferred_next;
  int bin;   /* free: bin index; live: -1 */
  bool free; /* on a bin list */
};

#define VKB_BINS 64

struct vkb_block {
  VkDeviceMemory memory;
  VkBuffer buffer;
  VkDeviceAddress base;
  VkDeviceSize size;     /* of the buffer */
  VkDeviceSize mem_size; /* of the memory (>= size) */
  uint8_t* mapped;       /* persistent mapping, NULL when not host-visible */
  uint32_t type_index;
  bool dedicated;
  bool coherent;
  bool exportable; /* allocated with VkExportMemoryAllocateInfo (opaque fd) */
  bool imported;   /* memory of another process (VkImportMemoryFdInfoKHR) */
  size_t live; /* live ranges */
  struct vkb_range* first;
  struct vkb_range* bins[VKB_BINS];
  uint64_t bin_mask;
  struct vkb_block *prev, *next;
};

/* A resolved device address: the block's buffer and an offset in it. */
struct vkb_loc {
  struct vkb_block* block;
  VkDeviceSize offset;
};

/* ---- device --------------------------------------------------------------- */

struct adr_backend_stream;
struct adr_backend_event;

struct vkb_staging_chunk {
  uint64_t busy_until; /* timeline value after which it may be reused */
};

#define VKB_STAGING_CHUNKS 4

struct adr_backend_device {
  int64_t id;
  bool adopted;
  struct vkb_instance* inst; /* &vkb_g.instance or an adopted one (owned) */
  VkPhysicalDevice physical;
  VkDevice device;
  VkQueue queue;
  uint32_t queue_family;
  uint32_t queue_index;
  struct vkb_device_fns fn;
  VkPhysicalDeviceProperties props;
  VkPhysicalDeviceMemoryProperties memprops;
  char driver_name[VK_MAX_DRIVER_NAME_SIZE + VK_MAX_DRIVER_INFO_SIZE + 4];
  bool has_budget;
  /* VK_KHR_external_memory_fd enabled on the logical device (sharing with
   * other processes, vulkan_share.c), and its entry point once open. */
  bool has_memory_fd;
  PFN_vkGetMemoryFdKHR get_memory_fd;

  /* Memory types for allocations, best first; the staging type. */
  uint32_t alloc_types[VK_MAX_MEMORY_TYPES];
  uint32_t alloc_type_count;
  uint32_t staging_type;
  bool mapped_copies; /* copy mode allows the mapped fast path */
  /* Host reads through the mapping are fast (cached memory, or the
   * "device" is the CPU / shares its memory): D2H may use the mapping. */
  bool mapped_reads;
  /* The device is the CPU (lavapipe, SwiftShader): device-to-device copies
   * on an idle stream run as a host memmove in the calling thread. */
  bool host_is_device;
  VkDeviceSize block_size;
  VkDeviceSize max_alloc;
  VkDeviceSize atom;    /* nonCoherentAtomSize */
  VkDeviceSize granule; /* allocation granularity: 64, or the atom if larger */

  /* Submission: one timeline semaphore counts every submission on the
   * queue; next_value is the last value handed out. */
  pthread_mutex_t queue_lock;
  VkSemaphore timeline;
  uint64_t next_value;
  /* The highest timeline value seen complete: checks against it need no
   * Vulkan call. Only grows. */
  _Atomic uint64_t completed;
  /* Set once the application can submit to the queue (ADR_NATIVE_QUEUE,
   * ADR_VULKAN_NATIVE_QUEUE_LOCK, adr_stream_native/import, adoption).
   * From then on the timeline no longer describes everything on the
   * queue: host fast paths of uploads, fills and device copies are off
   * (the work is queued, in queue order behind the application's), and a
   * host wait first posts an empty submission that signals the timeline
   * behind whatever the application submitted (vkb_queue_post). */
  atomic_bool queue_shared;
  /* What ADR_VULKAN_NATIVE_QUEUE_LOCK hands out: lock/unlock of queue_lock. */
  struct adr_vulkan_queue_lock queue_lock_api;

  /* Memory: blocks, the address map (tsearch tree of live ranges keyed by
   * [addr, addr + user_size)), deferred frees. Guarded by mem_lock. */
  pthread_mutex_t mem_lock;
  struct vkb_block* blocks;
  void* live_tree;
  size_t live_count;
  size_t block_count;
  VkDeviceSize bytes_reserved;
  struct vkb_range* deferred;

  /* Staging ring: one host-visible buffer cut in chunks. */
  pthread_mutex_t staging_lock;
  struct vkb_block* staging;
  VkDeviceSize chunk_size;
  struct vkb_staging_chunk chunks[VKB_STAGING_CHUNKS];
  uint32_t chunk_next;

  /* Streams and events alive on the device (destroyed at close if the
   * application leaked them). Guarded by objects_lock. */
  pthread_mutex_t objects_lock;
  struct adr_backend_stream* streams;
  struct adr_backend_event* events;
  struct adr_backend_stream* default_stream;

  /* Lazy opening (vulkan_device.c): device_open reads only physical-device
   * queries and hands out an unlinked default stream; the VkDevice, queue,
   * timeline, memory types and the default stream's pool are made by the
   * first call that needs them (vkb_device_ensure). `opened` is stored with
   * release order once they exist; open_lock serialises first uses; a
   * failure is kept (open_status, open_message) and repeated. */
  pthread_mutex_t open_lock;
  atomic_bool opened;
  int open_status;
  char open_message[sizeof(((struct adr_error*)0)->message)];

  struct adr_backend_device* next_open; /* g_devices list */
  bool released;                        /* Vulkan objects destroyed (at exit) */
};

/* Creates the device's Vulkan objects unless done (see `opened` above):
 * 0, or the status and message of the failed first opening. */
int vkb_device_open_native(struct adr_backend_device* dev, struct adr_error* error);
static inline bool vkb_device_opened(struct adr_backend_device* dev) {
  return atomic_load_explicit(&dev->opened, memory_order_acquire);
}
static inline int vkb_device_ensure(struct adr_backend_device* dev, struct adr_error* error) {
  return vkb_device_opened(dev) ? 0 : vkb_device_open_native(dev, error);
}

/* ---- streams and events (vulkan_sync.c) ------------------------------------- */

#define VKB_MAX_COMMAND_BUFFERS 32

struct vkb_cb {
  VkCommandBuffer cb;
  uint64_t value; /* submission value, 0 when never submitted */
};

/* An imported event a stream's next submission waits for, with the
 * srcStageMask to wait with. */
struct vkb_foreign_wait {
  VkEvent event;
  VkPipelineStageFlags src_stage;
};

struct adr_backend_stream {
  struct adr_backend_device* dev;
  pthread_mutex_t lock;
  VkCommandPool pool;
  struct vkb_cb cbs[VKB_MAX_COMMAND_BUFFERS];
  uint32_t cb_count;
  uint32_t cb_next;
  uint64_t last_value;    /* last submission of this stream */
  uint64_t wait_value;    /* next submission waits for the timeline >= this */
  struct vkb_foreign_wait* foreign_waits; /* next submission waits for these (imported) */
  uint32_t foreign_count, foreign_cap;
  struct vkb_range* scratch; /* 64 bytes for memset head/tail, lazily */
  bool is_default;
  struct adr_backend_stream *prev, *next;
  /* max(last_value, wait_value), or UINT64_MAX while foreign waits are
   * pending: written under `lock` with them, read without it by the idle
   * check (vkb_stream_idle), so an idle stream costs no lock. */
  _Atomic uint64_t pending;
};

enum vkb_event_kind {
  VKB_EVENT_OWN = 0,      /* created by adr on this device */
  VKB_EVENT_SNAPSHOT = 1, /* import of an adr event: its value at import */
  VKB_EVENT_FOREIGN = 2,  /* import of an application's VkEvent */
};

struct adr_backend_event {
  struct adr_backend_device* dev;
  enum vkb_event_kind kind;
  VkEvent vk; /* &vk is what event_native returns */
  /* FOREIGN: the stageMask its producer sets it with (vkCmdSetEvent's, or
   * HOST for vkSetEvent): the srcStageMask of adr's vkCmdWaitEvents on it.
   * HOST unless adr_vulkan_event_import said otherwise. */
  VkPipelineStageFlags src_stage;
  /* OWN/SNAPSHOT: complete when source->timeline >= value (0 = complete). */
  struct adr_backend_device* source;
  uint64_t value;
  struct adr_backend_event *prev, *next;
};

/* A command buffer being recorded on a stream. vkb_cmd_begin locks the
 * stream; vkb_cmd_submit / vkb_cmd_abort unlock it. */
struct vkb_cmd {
  struct adr_backend_stream* s;
  struct vkb_cb* slot;
  VkCommandBuffer cb;
};

int vkb_cmd_begin(struct adr_backend_stream* s, struct vkb_cmd* out, struct adr_error* error);
/* Ends, submits (signal value returned in *out_value) and unlocks. */
int vkb_cmd_submit(struct vkb_cmd* c, uint64_t* out_value, struct adr_error* error);
void vkb_cmd_abort(struct vkb_cmd* c);

uint64_t vkb_timeline_value(struct adr_backend_device* dev);
/* Host wait until the device's timeline reaches `value`. */
int vkb_timeline_wait(struct adr_backend_device* dev, uint64_t value, struct adr_error* error);
/* Host wait for everything queued on the stream, including device-side
 * waits registered for its next submission. */
int vkb_stream_wait_idle(struct adr_backend_stream* s, struct adr_error* error);
/* True when nothing of the stream is pending and no device-side wait is
 * registered (the mapped fast path may then run on the host at once).
 * Lock-free when nothing is pending or the timeline passed it (the common
 * case of a blocking call after blocking calls, inline); the rest under
 * the stream's lock. */
bool vkb_stream_idle_locked(struct adr_backend_stream* s);
static inline bool vkb_stream_idle(struct adr_backend_stream* s) {
  uint64_t p = atomic_load_explicit(&s->pending, memory_order_acquire);
  return p == 0 || p <= atomic_load_explicit(&s->dev->completed, memory_order_acquire) ||
         vkb_stream_idle_locked(s);
}
/* True when the calling thread may copy or fill through the mapping now
 * and be in queue order: the queue is adr's alone (not shared) and the
 * stream is idle. Never blocks. */
static inline bool vkb_stream_host_ready(struct adr_backend_stream* s) {
  return !atomic_load_explicit(&s->dev->queue_shared, memory_order_relaxed) && vkb_stream_idle(s);
}
/* Marks the device's queue as reachable by the application. */
void vkb_queue_share(struct adr_backend_device* dev);
/* Submits an empty batch signalling the next timeline value (so the
 * timeline covers everything submitted to the queue before, the
 * application's work included) and returns that value. */
int vkb_queue_post(struct adr_backend_device* dev, uint64_t* out_value, struct adr_error* error);
/* The ADR_VULKAN_NATIVE_QUEUE_LOCK functions (ctx = the device). */
void vkb_queue_lock_init(struct adr_backend_device* dev);

int vkb_stream_create(struct adr_backend_device* dev, uint32_t flags,
                      struct adr_backend_stream** out, struct adr_error* error);
int vkb_stream_destroy(struct adr_backend_device* dev, struct adr_backend_stream* s,
                       struct adr_error* error);
int vkb_stream_synchronize(struct adr_backend_device* dev, struct adr_backend_stream* s,
                           struct adr_error* error);
void vkb_stream_release(struct adr_backend_stream* s);
void* vkb_stream_native(struct adr_backend_device* dev, struct adr_backend_stream* s);
int vkb_stream_import(struct adr_backend_device* dev, void* native_stream,
                      struct adr_backend_stream** out, struct adr_error* error);
int vkb_event_create(struct adr_backend_device* dev, struct adr_backend_event** out,
                     struct adr_error* error);
int vkb_event_destroy(struct adr_backend_device* dev, struct adr_backend_event* e,
                      struct adr_error* error);
void vkb_event_release(struct adr_backend_event* e);
int vkb_event_record(struct adr_backend_device* dev, struct adr_backend_event* e,
                     struct adr_backend_stream* s, struct adr_error* error);
int vkb_event_wait(struct adr_backend_device* dev, struct adr_backend_event* e,
                   struct adr_backend_stream* s, struct adr_error* error);
int vkb_event_synchronize(struct adr_backend_device* dev, struct adr_backend_event* e,
                          struct adr_error* error);
int vkb_event_query(struct adr_backend_device* dev, struct adr_backend_event* e,
                    struct adr_error* error);
void* vkb_event_native(struct adr_backend_device* dev, struct adr_backend_event* e);
int vkb_event_import(struct adr_backend_device* dev, void* sync_event,
                     struct adr_backend_event** out, struct adr_error* error);

/* ---- memory slots (vulkan_memory.c) ------------------------------------------ */

int vkb_memory_init(struct adr_backend_device* dev, struct adr_error* error);
void vkb_memory_release(struct adr_backend_device* dev);
/* External memory (vulkan_share.c): a dedicated block whose memory is
 * exportable (import_fd < 0) or imported from `import_fd` (a descriptor
 * the call takes only on success) of `import_size` bytes of memory type
 * `import_type`; its one range spans the buffer. */
struct vkb_external {
  int import_fd;
  VkDeviceSize import_size;
  uint32_t import_type;
};
int vkb_range_alloc_external(struct adr_backend_device* dev, VkDeviceSize size,
                             const struct vkb_external* ext, struct vkb_range** out,
                             struct adr_error* error);
/* The live range containing `addr` and its block (under mem_lock inside):
 * 0, or EINVAL when addr is in none. */
int vkb_range_lookup(struct adr_backend_device* dev, const void* addr, struct vkb_range* out_range,
                     struct vkb_block* out_block, struct adr_error* error);
/* Frees the range of an imported block containing `addr` once the default
 * stream's work is done (the block goes with it). */
int vkb_range_free_imported(struct adr_backend_device* dev, const void* addr,
                            struct adr_error* error);

/* Sharing (vulkan_share.c). */
int vkb_share_caps(struct adr_backend_device* dev, uint32_t* out, struct adr_error* error);
int vkb_share_alloc(struct adr_backend_device* dev, size_t size, size_t alignment, void** out,
                    struct adr_error* error);
int vkb_share_export(struct adr_backend_device* dev, const void* ptr, struct adr_share_handle* out,
                     int* out_fd, struct adr_error* error);
int vkb_share_import(struct adr_backend_device* dev, const struct adr_share_handle* h, int fd,
                     void** out, struct adr_error* error);
int vkb_share_close(struct adr_backend_device* dev, void* ptr, struct adr_error* error);

int vkb_alloc(struct adr_backend_device* dev, size_t size, size_t alignment,
              struct adr_backend_stream* stream, void** out, struct adr_error* error);
int vkb_free(struct adr_backend_device* dev, void* ptr, size_t size,
             struct adr_backend_stream* stream, struct adr_error* error);
/* Internal allocation (scratch, temporaries) and its release: `after` is a
 * timeline value the range may still be used until (0 = now). */
int vkb_range_alloc(struct adr_backend_device* dev, VkDeviceSize size, VkDeviceSize alignment,
                    struct vkb_range** out, struct adr_error* error);
void vkb_range_free(struct adr_backend_device* dev, struct vkb_range* r, uint64_t after);
/* Resolve [addr, addr + size) to the allocation containing it: EINVAL with
 * a message when no live allocation of the device contains it all. */
int vkb_resolve(struct adr_backend_device* dev, const void* addr, size_t size, struct vkb_loc* out,
                struct adr_error* error);
/* Whether `addr` lies in a live allocation of dev (for pointer_query). */
bool vkb_owns(struct adr_backend_device* dev, const void* addr);
/* Resolves ADR_VULKAN_NATIVE_BUFFER: q->address to its range, VkBuffer and
 * VkDeviceMemory with offsets (ENOENT outside every live range). */
int vkb_buffer_lookup(struct adr_backend_device* dev, struct adr_vulkan_buffer* q,
                      struct adr_error* error);
/* Resolves ADR_VULKAN_NATIVE_EVENT_SOURCE: the producer stage of an
 * imported event (adr_vulkan_event_import). */
int vkb_event_source_set(struct adr_backend_device* dev, struct adr_vulkan_event_source* q,
                         struct adr_error* error);
/* Host-visible block for staging (not in the address map). */
int vkb_staging_block_create(struct adr_backend_device* dev, VkDeviceSize size,
                             struct vkb_block** out, struct adr_error* error);
void vkb_block_destroy(struct adr_backend_device* dev, struct vkb_block* b);
/* Make host writes to a mapped range visible / device writes readable:
 * nothing to do on host-coherent memory (inline: the mapped copies' common
 * case), a vkFlush/vkInvalidateMappedMemoryRanges call otherwise. */
int vkb_flush_noncoherent(struct adr_backend_device* dev, struct vkb_block* b, VkDeviceSize off,
                          VkDeviceSize size, struct adr_error* error);
int vkb_invalidate_noncoherent(struct adr_backend_device* dev, struct vkb_block* b,
                               VkDeviceSize off, VkDeviceSize size, struct adr_error* error);
static inline int vkb_flush(struct adr_backend_device* dev, struct vkb_block* b, VkDeviceSize off,
                            VkDeviceSize size, struct adr_error* error) {
  return b->coherent ? 0 : vkb_flush_noncoherent(dev, b, off, size, error);
}
static inline int vkb_invalidate(struct adr_backend_device* dev, struct vkb_block* b,
                                 VkDeviceSize off, VkDeviceSize size, struct adr_error* error) {
  return b->coherent ? 0 : vkb_invalidate_noncoherent(dev, b, off, size, error);
}

/* ---- copies (vulkan_copy.c) --------------------------------------------------- */

int vkb_copy(struct adr_backend_device* dst_dev, void* dst, struct adr_backend_device* src_dev,
             const void* src, size_t size, struct adr_backend_stream* stream,
             struct adr_error* error);
int vkb_memset(struct adr_backend_device* dev, void* ptr, int value, size_t size,
               struct adr_backend_stream* stream, struct adr_error* error);
/* The blocking slots (ABI 1.1): the copy / fill and everything queued
 * before it on the stream has completed when they return. */
int vkb_copy_sync(struct adr_backend_device* dst_dev, void* dst, struct adr_backend_device* src_dev,
                  const void* src, size_t size, struct adr_backend_stream* stream,
                  struct adr_error* error);
int vkb_memset_sync(struct adr_backend_device* dev, void* ptr, int value, size_t size,
                    struct adr_backend_stream* s, struct adr_error* error);
int vkb_staging_init(struct adr_backend_device* dev, struct adr_error* error);
void vkb_staging_release(struct adr_backend_device* dev);

/* Barriers every submission carries: everything earlier in queue order is
 * complete and visible before the commands, and the commands' writes are
 * visible to the host after. */
void vkb_barrier_all(struct adr_backend_device* dev, VkCommandBuffer cb);
void vkb_barrier_host(struct adr_backend_device* dev, VkCommandBuffer cb);

#endif /* ADR_VULKAN_INTERNAL_H */
