/* SPDX-License-Identifier: Apache-2.0
 *
 * Internal declarations shared by the files of core/. Nothing here is ABI.
 */
#ifndef ADR_CORE_INTERNAL_H
#define ADR_CORE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "adr/adr.h"
#include "adr/backend.h"

/* Every symbol of the core is hidden unless its declaration says ADR_API
 * (-fvisibility=hidden in meson.build), so internal declarations carry no
 * visibility mark. The exception is the five extern variables read on hot
 * paths (adr__log_level_value, adr__shutdown_flag, adr__fault_armed,
 * adr__validate_state, adr__thread_index): the flag does not reach extern declarations, and
 * marked hidden they are read PC-relative instead of through the GOT.
 * ADR_INTERNAL is kept empty only for core/array/array_internal.h until its
 * declarations drop it. */
#define ADR_INTERNAL

/* Thread-local state on a hot path (the range cache, the pool's thread
 * caches and arena index): initial-exec, so that no __tls_get_addr call
 * is made per access when libadr is opened with dlopen. It comes out of
 * glibc's static TLS surplus, which libadr and the modules keep within a
 * budget (docs/backend-abi.md "Threads"; the static-tls-budget test). */
#define ADR__TLS_HOT __attribute__((tls_model("initial-exec")))

#include "fault.h" /* the fault-injection hook of dispatch.c */

/* Alignment of what one thread writes on a hot path and others should not
 * touch (allocation-table shards, interval indexes, pool arenas and their
 * metadata): two cache lines, not one. x86's prefetchers
 * pull in a line's neighbour (the next line, the other half of an aligned
 * pair), so two threads writing neighbouring lines still trade them: on
 * this project's 2-core VM, two threads using neighbouring table shards
 * 64 bytes apart took 1.3x as long per allocation as with 128. */
#define ADR__APART 128

/* ---- spin lock (hot-path critical sections) ----------------------------- */

/* A lock for critical sections of a few dozen instructions on the
 * allocation hot path (the allocation table's shards, the interval index,
 * the pool's per-thread caches): taking it is one atomic exchange and
 * giving it back one release store, where a pthread mutex costs two atomic
 * read-modify-writes and two calls (44 % of an adr_alloc + adr_free pair
 * went to pthread_mutex_lock/unlock). A waiter spins a little, then yields
 * the CPU, so a holder that was preempted gets to run. Zero-initialised =
 * unlocked; nothing to destroy. */
struct adr__spin {
  _Atomic int held;
};

void adr__spin_lock_slow(struct adr__spin* s);

static inline bool adr__spin_trylock(struct adr__spin* s) {
  return atomic_load_explicit(&s->held, memory_order_relaxed) == 0 &&
         atomic_exchange_explicit(&s->held, 1, memory_order_acquire) == 0;
}
static inline void adr__spin_lock(struct adr__spin* s) {
  if (__builtin_expect(atomic_exchange_explicit(&s->held, 1, memory_order_acquire) != 0, 0))
    adr__spin_lock_slow(s);
}
static inline void adr__spin_unlock(struct adr__spin* s) {
  atomic_store_explicit(&s->held, 0, memory_order_release);
}

/* ---- thread ordinal (memory/thread_ordinal.c) ---------------------------- */

/* A small number per thread, given in the order threads first ask (0, 1,
 * 2 ...): the pool's arena is picked by it (and with the arena, the
 * allocation table's shard), so that threads mostly write cache lines of
 * their own. */
extern __attribute__((visibility("hidden"))) _Thread_local ADR__TLS_HOT unsigned
    adr__thread_index; /* UINT32_MAX until assigned */
unsigned adr__thread_index_assign(void);

static inline unsigned adr__thread_ordinal(void) {
  unsigned i = adr__thread_index;
  return __builtin_expect(i != UINT32_MAX, 1) ? i : adr__thread_index_assign();
}

/* ---- logging (log.c) ---------------------------------------------------- */

/* Current ADR_LOG level; read without a lock on every dispatch, so it is a
 * relaxed atomic set once by the environment reader. */
extern __attribute__((visibility("hidden"))) _Atomic int adr__log_level_value;

static inline int adr__log_level(void) {
  return atomic_load_explicit(&adr__log_level_value, memory_order_relaxed);
}
void adr__log(int level, const char* component, const char* fmt, ...) ADR_PRINTF(3, 4);
void adr__log_configure(int level, const char* file_path);
/* Monotonic nanoseconds, for trace durations. */
uint64_t adr__now_ns(void);

/* ---- errors (error.c) --------------------------------------------------- */

/* Prefixes "[op]" (and "[backend]" when given) to a formatted message. */
int adr__errorf(struct adr_error* error, int status, const char* op, const char* backend,
                const char* fmt, ...) ADR_PRINTF(5, 6);

/* ---- environment (env.c) ------------------------------------------------ */

/* Parsed once under a once-guard by adr__ensure_init(); immutable after.
 * A malformed ADR_LOG, ADR_BACKENDS or ADR_PLUGIN_PATH fails every call that
 * needs the registry (status/error); a malformed ADR_DEVICE fails only
 * adr_device_default (device_status/device_error). */
struct adr__config {
  int status;
  struct adr_error error;
  int device_status;
  struct adr_error device_error;
  struct adr__selector* backends_filter; /* ADR_BACKENDS, NULL = all */
  struct adr__selector* device_list;     /* ADR_DEVICE, NULL = unset */
  char* plugin_path;                     /* ADR_PLUGIN_PATH (secure), may be NULL */
};
/* Read only after adr__ensure_init returned 0 (or through adr__config(),
 * which calls it): before the configuration is published, its fields are
 * empty. */
const struct adr__config* adr__config(void);
/* Reads and publishes the environment on first success. EINVAL (a
 * malformed variable) is sticky; any other status (ENOMEM) is not: nothing
 * is published and the next call reads again. */
int adr__ensure_init(struct adr_error* error);
/* Whether the process runs with elevated privileges (AT_SECURE: setuid,
 * setgid or file capabilities), i.e. whether secure_getenv returns NULL. */
bool adr__elevated(void);

/* ---- selector (selector.c) ---------------------------------------------- */

struct adr__device_spec {
  ArrowDeviceType type; /* 0 = "*" or "uuid=" (any type) */
  int64_t id;           /* -1 = any id ("*", a kind or a uuid) */
  uint32_t kinds;       /* bits 1 << enum adr_device_kind; 0 = any kind */
  bool has_uuid;        /* "uuid=..." or "GPU-...": match this uuid */
  uint8_t uuid[16];
  char name[64]; /* the type name as written (lowered), or "*" */
  char text[96]; /* the whole entry as written, for messages */
};

struct adr__backend_rule {
  char name[64]; /* backend name or "*" */
  bool negated;
};

struct adr__selector {
  size_t count;
  union {
    struct adr__device_spec* devices;
    struct adr__backend_rule* rules;
  } u;
};

/* Parse ADR_DEVICE / ADR_BACKENDS text. On error: EINVAL and a message
 * naming `variable`, the 1-based column and what was expected. */
int adr__parse_device_list(const char* variable, const char* text, struct adr__selector** out,
                           struct adr_error* error);
int adr__parse_backend_list(const char* variable, const char* text, struct adr__selector** out,
                            struct adr_error* error);
void adr__selector_free(struct adr__selector* sel);
/* Whether ADR_BACKENDS (NULL = everything) lets backend `name` load. */
bool adr__backend_allowed(const struct adr__selector* rules, const char* name);
/* Device type for a selector name ("cuda", "hip_host" ...), 0 if unknown. */
ArrowDeviceType adr__device_type_from_name(const char* name, size_t len);

/* ---- registry, loader and devices (registry.c, loader.c, device.c) ------- */

struct adr_device;

struct adr__backend {
  char name[64];
  char library[96]; /* "libadr_cpu.so" */
  ArrowDeviceType types[ADR_MAX_DEVICE_TYPES];
  uint32_t type_count;
  bool in_manifest;
  /* Guarded by the registry lock until state leaves NOT_LOADED. */
  int state; /* enum adr_backend_state */
  char path[1024];
  char reason[1024];
  void* dl;
  const struct adr_backend* vt;
  uint32_t abi_minor; /* negotiated */
  int64_t device_count[ADR_MAX_DEVICE_TYPES];
};

/* The loader's checks of a backend's table (ABI, struct_size, name, device
 * types, ADR_BACKEND_REQUIRED_SLOTS): false with b->state REJECTED and
 * b->reason set when one fails. */
bool adr__loader_check_table(struct adr__backend* b, const struct adr_backend* vt);

/* A slot of the vtable is usable if the backend's struct covers it and it
 * is not NULL. */
#define ADR__HAS_SLOT(vt, slot)                                                    \
  ((vt)->struct_size >= offsetof(struct adr_backend, slot) + sizeof((vt)->slot) && \
   (vt)->slot != NULL)

struct adr_stream {
  struct adr_device* device;
  struct adr_backend_stream* handle;
  uint32_t flags; /* ADR__STREAM_* */
  /* Live created streams of all devices (registry.c), for the drain at
   * process exit; guarded by the stream-list lock, not read on the hot path. */
  struct adr_stream* live_prev;
  struct adr_stream* live_next;
};
#define ADR__STREAM_DEFAULT 1u
#define ADR__STREAM_IMPORTED 2u

struct adr_event {
  struct adr_device* device;
  struct adr_backend_event* handle;
  uint32_t flags; /* ADR__EVENT_* */
};
#define ADR__EVENT_IMPORTED 1u

struct adr__alloc_table;   /* alloc_table.c */
struct adr__device_memory; /* core/memory/: handler, pool, statistics */

/* A device. Immutable after creation except the memory state, which has its
 * own locks. The first two fields are all the hot path reads. */
struct adr_device {
  const struct adr_backend* vt;
  struct adr_backend_device* handle;
  struct adr__backend* backend;
  ArrowDeviceType type;
  int64_t id;
  struct adr_stream default_stream;
  char name[48];
  struct adr__alloc_table* allocs; /* live allocations: ptr -> size */
  bool host_accessible;            /* caps & ADR_CAP_HOST_ACCESSIBLE */
  /* Identity from the device_info call at creation (immutable after):
   * what selectors and adr_device_same_physical compare. */
  uint32_t kind; /* enum adr_device_kind, never UNKNOWN */
  uint8_t identity;
  uint8_t uuid[16];
  uint32_t pci_domain;
  uint8_t pci_bus, pci_device, pci_function;
  struct adr__device_memory* memory; /* set by adr__memory_device_init */
  /* Interval index kept beyond the range checks' needs (interop.c): 0 no,
   * 1 alloc.c maintains it, 2 and the allocations made before are in it. */
  _Atomic int ranges_kept;
  bool adopted;                   /* made by adr_device_adopt (registry.c) */
  _Atomic bool released;          /* adr_device_release closed it (registry.c) */
  _Atomic int64_t live_objects;   /* streams and events made or imported (sync.c) */
};

/* Device objects (device.c). adr__device_create wraps a device the backend
 * opened or adopted: its default stream, capabilities and memory state;
 * on failure the backend's device is closed and nothing is kept. Registry
 * lock held. adr__device_release gives back its memory state and closes
 * the native device, which releases its default stream, at process exit
 * (the struct stays). */
int adr__device_create(struct adr__backend* b, const char* api, ArrowDeviceType type, int64_t id,
                       struct adr_backend_device* handle, struct adr_device** out,
                       struct adr_error* error);
void adr__device_release(struct adr_device* dev);
/* The kind a device type implies when its backend reports none. */
uint32_t adr__device_kind_default(ArrowDeviceType type);
/* Whether `dev` is a device object of this registry (not a foreign
 * pointer). Takes the registry lock. */
bool adr__device_known(const struct adr_device* dev);

/* Kinds of adr_device_native the core answers itself (interop.c):
 * ADR_OPENCL_NATIVE_BUFFER / ADR_VULKAN_NATIVE_BUFFER on a device of that
 * backend answer as adr_opencl_buffer / adr_vulkan_buffer do; libadr's own
 * channels (ADR_VULKAN_NATIVE_EVENT_SOURCE) are refused. */
bool adr__device_native_intercepted(const struct adr_device* dev, int kind);
int adr__device_native_interop(struct adr_device* dev, int kind, void** out,
                               struct adr_error* error);

/* Registry lock: guards backend loading and device creation only. */
pthread_mutex_t* adr__registry_lock(void);
/* Load (if needed) the backend that serves `type`; NULL + error if none. */
struct adr__backend* adr__backend_for_type(ArrowDeviceType type, struct adr_error* error);
/* Loader: fill b->dl/vt/state from the search path. Registry lock held. */
void adr__loader_load(struct adr__backend* b);
/* Loader: find third-party libadr_*.so in ADR_PLUGIN_PATH and append them
 * to the registry (not loaded). Registry lock held. */
void adr__loader_discover(void);
const char* adr__loader_search_path(void);
/* The directory libadr.so was loaded from ("" if unknown). Registry lock
 * held (core/ucx.c looks for the UCX module beside the backends). */
const char* adr__loader_core_dir(void);
const struct adr_backend_host* adr__host_services(void);
/* The loaded device whose allocation contains ptr (*out NULL when none):
 * asks only the backends already loaded (registry lock held meanwhile);
 * a backend's failure other than ENOENT/ENOTSUP is returned (host.c). */
int adr__pointer_owner(const char* api, const void* ptr, struct adr_device** out,
                       struct adr_error* error);
/* Registry internals for the loader. */
struct adr__backend* adr__registry_add(const char* name, const char* library, bool in_manifest);
struct adr__backend* adr__registry_find(const char* name);

/* ---- memory front end (alloc.c) ----------------------------------------- */

/* Called once per device after it is created (registry lock held) and at
 * process exit before the device is closed. */
void adr__memory_device_init(struct adr_device* dev);
void adr__memory_device_teardown(struct adr_device* dev);
/* Called by adr_stream_destroy before the backend destroys the stream: the
 * pool stops keying cached blocks by it. */
void adr__memory_stream_retire(struct adr_stream* stream);

struct adr_allocator;
/* adr_alloc / adr_alloc_with under the name `op`, through `handler`
 * (NULL: the device's), recorded with the call site `site`. */
int adr__alloc_common(const char* op, struct adr_device* device,
                      const struct adr_allocator* handler, size_t size, size_t alignment,
                      struct adr_stream* stream, const void* site, void** out,
                      struct adr_error* error);

/* ---- allocation table (alloc_table.c) ----------------------------------- */

struct adr__alloc_table* adr__alloc_table_create(void);
void adr__alloc_table_destroy(struct adr__alloc_table* t);
/* Record ptr -> size; ENOMEM if the table cannot grow. */
int adr__alloc_table_insert(struct adr__alloc_table* t, void* ptr, size_t size);
/* Remove ptr if it is recorded with `size`: 0; ENOENT unknown pointer;
 * ERANGE recorded with another size (*out_size tells which); nothing
 * removed on error. */
int adr__alloc_table_remove(struct adr__alloc_table* t, void* ptr, size_t size, size_t* out_size);
size_t adr__alloc_table_count(struct adr__alloc_table* t);
/* The same, carrying two words per allocation (the allocation handler it
 * came from, and the pool's block for the built-in pool); remove returns
 * them in *out_data / *out_cookie (either may be NULL). */
int adr__alloc_table_insert_data(struct adr__alloc_table* t, void* ptr, size_t size,
                                 const void* data, void* cookie);
int adr__alloc_table_remove_data(struct adr__alloc_table* t, void* ptr, size_t size,
                                 size_t* out_size, const void** out_data, void** out_cookie);
/* insert_data that also adds the allocation to the table's totals (bytes and
 * count ever recorded: the device's allocated_* totals, alloc.c); totals
 * sums them (exact: every shard's lock is taken in turn). */
int adr__alloc_table_insert_counted(struct adr__alloc_table* t, void* ptr, size_t size,
                                    const void* data, void* cookie);
/* The device's live figures (adr_memory_stats' allocated_* current and
 * peak), kept in the table's shards (alloc_table.c, "live figures"):
 * insert_counted counts an allocation, remove_counted uncounts it (and
 * removes it as remove_data does), insert_live counts it again without
 * the totals (an allocation kept after its free failed) and, like
 * insert_indexed, puts it back in the interval index when that is live
 * now (it may have been built since the free took it out) or
 * `validating`, with its call site. */
int adr__alloc_table_insert_live(struct adr__alloc_table* t, void* ptr, size_t size,
                                 const void* data, void* cookie, const void* site, bool validating);
int adr__alloc_table_remove_counted(struct adr__alloc_table* t, void* ptr, size_t size,
                                    size_t* out_size, const void** out_data, void** out_cookie);
struct adr__live_figures {
  uint64_t bytes, count, bytes_peak, count_peak;
};
/* Current values read without locks (exact when no allocation or free is
 * in flight) and the exact peaks (never reported below the current). */
void adr__alloc_table_live(struct adr__alloc_table* t, struct adr__live_figures* out);
/* Sets the peaks to the current values (every used shard held). */
void adr__alloc_table_live_reset_peaks(struct adr__alloc_table* t);
/* How many additions took the slow path (budget moved or peak raised
 * with every used shard held): tests. */
uint64_t adr__alloc_table_live_slow_paths(struct adr__alloc_table* t);
/* Sends the addresses of [base, base + size), which hold no recorded
 * allocation (a pool's new chunk), to shard `owner` (modulo the shard
 * count) from now on: the pool's arena that owns the chunk. */
void adr__alloc_table_assign(struct adr__alloc_table* t, void* base, size_t size, unsigned owner);
/* The shard an allocation at ptr is recorded in (tests). */
unsigned adr__alloc_table_shard(struct adr__alloc_table* t, const void* ptr);
void adr__alloc_table_totals(struct adr__alloc_table* t, uint64_t* out_bytes,
                             uint64_t* out_count);

/* ---- tracing and error context of dispatched calls (dispatch.c) --------- */

/* The calls into a backend are the functions of dispatch.h; these are the
 * pieces they share with the rest of the core. */
/* "512 B", "4 KiB", "1.5 GiB" into buf (core/error.c); returns buf. */
const char* adr__format_bytes(uint64_t bytes, char* buf, size_t size);

/* Turns a backend's (or an allocation handler's) message in `error` into the
 * core's: "[api][backend] NATIVE: description" (error.c). The one place a
 * backend's failure text is rewritten; error may be NULL. */
void adr__error_context(struct adr_error* error, int status, const char* api, const char* backend);
int adr__dispatch_traced_end(uint64_t start_ns, int status, const char* dev, const char* op,
                             const char* fmt, ...) ADR_PRINTF(5, 6);

/* ---- interval index of live allocations (alloc_table.c) ----------------- */

/* One live allocation as the application asked for it (pool-aware: the
 * user's size, not the pool block's or chunk's). */
struct adr__range {
  uintptr_t start;
  size_t size;
  const void* site; /* return address of the adr_alloc call, or NULL */
};

/* Ordered index beside the hash, maintained by alloc.c only once built
 * (the first look-up builds it: range-checked copies, adr__range_checked,
 * or an interop call, adr__range_indexed) or under the validation layer.
 * O(log n) expected; sharded like the hash, under the hash shards' spin
 * locks, plus one index with its own lock for allocations whose
 * addresses span shards. insert: ENOMEM when it cannot grow; inserting a
 * start that is already there updates it. */
int adr__alloc_table_ranges_insert(struct adr__alloc_table* t, void* ptr, size_t size,
                                   const void* site);
/* Makes the index live and adds every allocation of the hash that it
 * lacks (site NULL); ENOMEM when it cannot grow. The index is built
 * lazily: until this runs (explicitly, or by the first find or foreach),
 * alloc.c need not maintain it (ranges_live says whether it must). */
int adr__alloc_table_ranges_build(struct adr__alloc_table* t);
bool adr__alloc_table_ranges_live(struct adr__alloc_table* t);
/* Returns the removed range's site (NULL if ptr was not in the index). */
const void* adr__alloc_table_ranges_remove(struct adr__alloc_table* t, void* ptr);
/* adr_alloc's and adr_free's record: insert_counted / remove_counted that
 * also add the range to / remove it from the interval index, under the
 * one lock of the shard (a shard's index is guarded by the shard's lock),
 * when the index is live or `validating` (the layer keeps it from the
 * start). insert_indexed: ENOMEM with nothing recorded when the hash or
 * the index cannot grow. remove_indexed: *out_ranged (may be NULL) says
 * whether the index was updated, *out_site is the removed range's site
 * (NULL when the index had none). */
int adr__alloc_table_insert_indexed(struct adr__alloc_table* t, void* ptr, size_t size,
                                    const void* data, void* cookie, const void* site,
                                    bool validating);
int adr__alloc_table_remove_indexed(struct adr__alloc_table* t, void* ptr, size_t size,
                                    size_t* out_size, const void** out_data, void** out_cookie,
                                    bool validating, const void** out_site, bool* out_ranged);
/* The live allocation whose [start, start + max(size, 1)) contains p.
 * Each thread remembers its last two answers while the index shards they
 * came from are unchanged (a version counter each), so repeated lookups
 * take no lock. */
bool adr__alloc_table_ranges_find(struct adr__alloc_table* t, const void* p,
                                  struct adr__range* out);
/* True when [p, p + size) lies inside the live allocation one of this
 * thread's last two found answers holds (still current): the copy's range
 * check answered without a search. False says nothing (search with
 * adr__alloc_table_ranges_find). */
bool adr__alloc_table_ranges_cached_fit(const struct adr__alloc_table* t, const void* p,
                                        size_t size);
/* Which index holds the range that starts at ptr (tests): its shard's
 * number, 64 for the one of ranges that span shards, -1 for none. */
int adr__alloc_table_ranges_home(struct adr__alloc_table* t, const void* ptr);
/* Calls fn (may be NULL) for each range in address order under the
 * indexes' locks (fn must not call back into the table); returns the
 * count. */
size_t adr__alloc_table_ranges_foreach(struct adr__alloc_table* t,
                                       void (*fn)(void* ctx, const struct adr__range* r),
                                       void* ctx);

/* ---- process lifetime (registry.c, docs/lifetime.md) --------------------- */

/* Set (never cleared) when the exit-time teardown starts. Every public call
 * that would touch device state checks it and returns ESHUTDOWN. */
extern __attribute__((visibility("hidden"))) _Atomic int adr__shutdown_flag;
static inline bool adr__shut_down(void) {
  return __builtin_expect(atomic_load_explicit(&adr__shutdown_flag, memory_order_acquire) != 0, 0);
}
/* ESHUTDOWN with "[op][backend] ESHUTDOWN: ..." (dev may be NULL). */
int adr__shutdown_error(struct adr_error* error, const char* op, const struct adr_device* dev);
/* Created (not imported, not default) streams are listed so the teardown
 * can drain them; adr_stream_create / adr_stream_destroy call these. */
void adr__stream_track(struct adr_stream* stream);
void adr__stream_untrack(struct adr_stream* stream);

#endif /* ADR_CORE_INTERNAL_H */
