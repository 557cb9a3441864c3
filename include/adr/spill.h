/* SPDX-License-Identifier: Apache-2.0
 *
 * adr spilling: device memory beyond the device's size (docs/spill.md).
 *
 * The design is cuDF's (its "Spilling to host memory" section): a *spill
 * manager* per device tracks *spillable buffers*, whose bytes move in place
 * between device memory and host memory. A buffer is spilled (copied to
 * host memory, its device memory freed) when the manager needs room: on
 * demand, when an allocation on the device fails (the manager sits in the
 * device's out-of-memory chain, adr/memory.h), under a soft device limit,
 * or when the application asks. It is unspilled (device memory allocated,
 * bytes copied back) by the next acquire.
 *
 *   - acquire/release is the *spill lock*: the device pointer acquire
 *     returns is valid until the matching release; acquires nest and may
 *     come from many threads (counted); no spill while one is held.
 *   - expose makes a buffer permanently unspillable (its pointer has left
 *     adr's control) and records why.
 *   - Victims are chosen least recently used first (acquire, expose,
 *     allocation and unspill count as uses), skipping held and exposed
 *     buffers.
 *
 * Ordering with streams (the rule): work that uses an acquired pointer may
 * be queued on streams; pass the stream it was queued on to
 * adr_spill_buffer_release (NULL: nothing is queued any more, as after a
 * blocking call). The release records the buffer's *last-use event* on
 * that stream. A free of the buffer first waits for every last-use event
 * on the host; a spill either does the same (blocking) or, where the
 * backend's downloads are asynchronous and a last-use event has not
 * completed, queues its copy on the manager's spill stream behind those
 * events and returns at once (a background spill: the device memory is
 * freed on that stream, and whoever needs the host bytes waits for the
 * copy; on Vulkan an explicit spill of such a buffer is run by the
 * manager's spill thread instead). So a spill never copies bytes that queued work has yet to write,
 * nor frees memory queued work still reads. Unspilling is a blocking
 * copy: the bytes are in place, for every stream, when acquire returns.
 *
 * Host-memory devices (cpu, cuda_host, hip_host): their memory is the
 * host's already, so spilling is a no-op there: managers and buffers work,
 * buffers always stay on the device, nothing is ever copied, the limit is
 * not enforced and no out-of-memory callback is registered.
 *
 * Thread safety: every function may be called from any thread at any time,
 * on the same manager and the same buffers (docs/spill.md, "Locks").
 * Destroying a manager or freeing a buffer while another thread still uses
 * it is undefined, like destroying any adr object in use.
 *
 * Errors: as everywhere in adr, an errno value and a message in the
 * optional struct adr_error.
 */
#ifndef ADR_SPILL_H
#define ADR_SPILL_H

#include <stddef.h>
#include <stdint.h>

#include "adr/adr.h"

#ifdef __cplusplus
extern "C" {
#endif

struct adr_spill_manager;
struct adr_spill_buffer;

/* Where a buffer's bytes are (adr_spill_buffer_location). */
enum adr_spill_location {
  ADR_SPILL_LOCATION_DEVICE = 1, /* in device memory */
  ADR_SPILL_LOCATION_HOST = 2,   /* spilled to host memory */
};

/* How an acquire will use the bytes. For a buffer both modes behave the
 * same; for a slice (copy-on-write) a write acquire of a shared slice first
 * makes its private copy (adr_spill_slice_acquire). */
enum adr_spill_access {
  ADR_SPILL_ACCESS_READ = 1,
  ADR_SPILL_ACCESS_WRITE = 2, /* read and write */
};

/* Why a spill happened (statistics). */
enum adr_spill_trigger {
  ADR_SPILL_TRIGGER_ON_DEMAND = 0, /* an allocation on the device failed */
  ADR_SPILL_TRIGGER_LIMIT = 1,     /* to stay under the soft device limit */
  ADR_SPILL_TRIGGER_EXPLICIT = 2,  /* adr_spill_manager_spill */
  ADR_SPILL_TRIGGER_COUNT = 3,
};

/* Bits of adr_spill_options.flags. */
enum adr_spill_flags {
  /* Register in the device's out-of-memory chain: a failing allocation on
   * the device (adr_alloc or a buffer's) spills until it fits. */
  ADR_SPILL_ON_DEMAND = 1u << 0,
  /* Spill to pageable host memory even where the backend offers pinned
   * memory (cuda_host, hip_host). */
  ADR_SPILL_PAGEABLE = 1u << 1,
  /* Every spill blocks until its copy completed, also where the backend
   * could spill in the background (docs/spill.md). */
  ADR_SPILL_SYNCHRONOUS = 1u << 2,
};

/* Options of adr_spill_manager_create. The caller sets struct_size to
 * sizeof(struct adr_spill_options); later fields are appended. */
struct adr_spill_options {
  uint32_t struct_size;
  uint32_t flags; /* enum adr_spill_flags */
  /* Soft limit on the manager's bytes in device memory; 0: none. Exceeded
   * only when too few buffers can spill (counted in limit_exceeded and
   * logged once at ADR_LOG=warn). */
  uint64_t device_limit;
  /* The same as a percentage (1 to 100) of the device's memory_total;
   * used when device_limit is 0. 0: none. */
  uint32_t device_limit_percent;
  uint32_t stats_level; /* 0: none, 1: bytes and times, 2: and exposures */
  uint64_t reserved[4]; /* 0 */
};

/* Defaults: on demand, no limit, statistics level 0. */
ADR_API void adr_spill_options_init(struct adr_spill_options* out);

/* Creates a spill manager for `device` (owned by the caller: destroy it with
 * adr_spill_manager_destroy). `options` may be NULL (the defaults). With
 * ADR_SPILL_ON_DEMAND it registers an out-of-memory callback on the
 * device. EINVAL for bad arguments (NULL device, struct_size too small, a
 * percentage over 100, a level over 2). */
ADR_API int adr_spill_manager_create(struct adr_device* device,
                                     const struct adr_spill_options* options,
                                     struct adr_spill_manager** out, struct adr_error* error);

/* Removes the out-of-memory callback (waiting for running calls of it) and
 * destroys the manager. EBUSY (nothing destroyed) while buffers of it are
 * not freed. NULL is a no-op. Not for the global managers (EINVAL). */
ADR_API int adr_spill_manager_destroy(struct adr_spill_manager* manager, struct adr_error* error);

/* The process-wide manager of `device` configured by the environment:
 * ADR_SPILL=on|off (default off), ADR_SPILL_ON_DEMAND=on|off (default on),
 * ADR_SPILL_DEVICE_LIMIT=<size|N%> (default none), ADR_SPILL_STATS=0|1|2
 * (default 0); docs/environment.md. Read once. With spilling off, *out is
 * NULL and the call returns 0. Created at the first call for a device and
 * owned by adr (never destroyed). EINVAL with a message naming the
 * variable and the column for a malformed value, at every call. */
ADR_API int adr_spill_manager_global(struct adr_device* device, struct adr_spill_manager** out,
                                     struct adr_error* error);

/* The manager's device. */
ADR_API struct adr_device* adr_spill_manager_device(const struct adr_spill_manager* manager);

/* The soft limit in force, in bytes (0: none). */
ADR_API uint64_t adr_spill_manager_device_limit(const struct adr_spill_manager* manager);

/* Spills least recently used buffers until at least `bytes` were moved to
 * host memory or nothing else can spill (UINT64_MAX: everything that
 * can). *out_spilled (may be NULL) receives the bytes moved. A spill that
 * fails leaves its buffer on the device, usable, and the call returns the
 * failure after trying the others. Trigger "explicit". */
ADR_API int adr_spill_manager_spill(struct adr_spill_manager* manager, uint64_t bytes,
                                    uint64_t* out_spilled, struct adr_error* error);

/* Waits until every spill queued in the background so far has completed
 * (its copy in host memory, its device memory freed): a host wait on the
 * manager's spill stream. A no-op where spills block (docs/spill.md,
 * "Spilling in the background"). */
ADR_API int adr_spill_manager_synchronize(struct adr_spill_manager* manager,
                                          struct adr_error* error);

/* ------------------------------------------------------------------------ */
/* Spillable buffers                                                        */
/* ------------------------------------------------------------------------ */

/* Allocates a spillable buffer of `size` (> 0) bytes in device memory
 * (uninitialised, 64-byte aligned), spilling others first when the soft
 * limit requires it. The caller owns it: adr_spill_buffer_free. ENOMEM
 * when it does not fit even after spilling every spillable buffer, with a
 * message that says how much was spillable. */
ADR_API int adr_spill_buffer_alloc(struct adr_spill_manager* manager, size_t size,
                                   struct adr_spill_buffer** out, struct adr_error* error);

/* Waits for the buffer's last-use events, frees its device or host memory
 * and the buffer. EBUSY (nothing freed) while it is acquired. NULL is a
 * no-op. */
ADR_API int adr_spill_buffer_free(struct adr_spill_buffer* buffer, struct adr_error* error);

ADR_API size_t adr_spill_buffer_size(const struct adr_spill_buffer* buffer);

/* enum adr_spill_location, read now (another thread may move it unless the
 * caller holds an acquire). */
ADR_API int adr_spill_buffer_location(struct adr_spill_buffer* buffer);

/* Whether the buffer was exposed (1) or not (0). */
ADR_API int adr_spill_buffer_exposed(struct adr_spill_buffer* buffer);

/* Takes the spill lock and stores the device address in *out_ptr (valid
 * until the matching release; the same address for as long as the buffer
 * stays on the device). A spilled buffer is unspilled first (which may
 * spill others). `mode` is an enum adr_spill_access. Every successful
 * acquire needs one release. */
ADR_API int adr_spill_buffer_acquire(struct adr_spill_buffer* buffer, int mode, void** out_ptr,
                                     struct adr_error* error);

/* Drops one spill lock. `stream` (may be NULL) is the stream on which work
 * using the pointer was queued: a last-use event is recorded on it, which
 * spills and the free wait for. EINVAL when the buffer is not acquired or
 * the stream belongs to another device. */
ADR_API int adr_spill_buffer_release(struct adr_spill_buffer* buffer, struct adr_stream* stream,
                                     struct adr_error* error);

/* Makes the buffer permanently unspillable (unspilling it first when it is
 * on the host) and stores its device address, valid until the buffer is
 * freed, in *out_ptr (may be NULL). `reason` (may be NULL; copied, at most
 * 63 bytes kept) says why, for statistics level 2. Idempotent; the first
 * reason is kept. */
ADR_API int adr_spill_buffer_expose(struct adr_spill_buffer* buffer, const char* reason,
                                    void** out_ptr, struct adr_error* error);

/* ------------------------------------------------------------------------ */
/* Copy-on-write: slices of shared spillable buffers                        */
/* ------------------------------------------------------------------------ */

/* A slice is a view of a range of a spillable buffer, its *owner*, which
 * it may share with other slices (cuDF's ExposureTrackedBuffer and
 * BufferOwner; docs/spill.md, "Copy-on-write"). The owner is a spillable
 * buffer like any other (it spills and unspills), freed with its last
 * slice; adr_spill_buffer_free refuses it (EBUSY).
 *   - A read acquire shares: every slice of an owner reads its memory.
 *   - A write acquire, or an expose, of a slice whose owner other slices
 *     share first gives the slice a private owner holding a copy of its
 *     range, made on the device (queued on the acquire's stream where one
 *     is given); the others keep the old owner.
 *   - A view of a slice whose owner was exposed is a physical copy: adr
 *     cannot track writes made through an exposed pointer.
 * Thread safety: as buffers; the functions may be called on one slice
 * from several threads (acquires counted). Freeing a slice another thread
 * still uses is undefined. */
struct adr_spill_slice;

/* Allocates a new owner of `size` (> 0) bytes (adr_spill_buffer_alloc)
 * and a slice covering it. The caller owns the slice: adr_spill_slice_free. */
ADR_API int adr_spill_slice_alloc(struct adr_spill_manager* manager, size_t size,
                                  struct adr_spill_slice** out, struct adr_error* error);

/* A shallow copy: a new slice of [offset, offset + size) of `slice`'s range
 * (size > 0; EINVAL outside the range) sharing its owner, or, when the
 * owner is exposed, a physical copy into a new owner (queued on `stream`,
 * which may be NULL: completed on return). The caller owns *out. */
ADR_API int adr_spill_slice_view(struct adr_spill_slice* slice, size_t offset, size_t size,
                                 struct adr_stream* stream, struct adr_spill_slice** out,
                                 struct adr_error* error);

/* A deep copy: a new slice with a private owner holding a copy of
 * `slice`'s range (queued on `stream`, NULL: completed on return). */
ADR_API int adr_spill_slice_copy(struct adr_spill_slice* slice, struct adr_stream* stream,
                                 struct adr_spill_slice** out, struct adr_error* error);

/* Frees the slice, and its owner when it was the owner's last slice (as
 * adr_spill_buffer_free: waits for last-use events). EBUSY (nothing freed)
 * while the slice is acquired. NULL is a no-op. */
ADR_API int adr_spill_slice_free(struct adr_spill_slice* slice, struct adr_error* error);

ADR_API size_t adr_spill_slice_size(const struct adr_spill_slice* slice);

/* The slice's owner now (a write acquire may give it another), for
 * adr_spill_buffer_location / _exposed / _size; owned by its slices. */
ADR_API struct adr_spill_buffer* adr_spill_slice_buffer(struct adr_spill_slice* slice);

/* 1 when the slice's owner has other slices, 0 otherwise. */
ADR_API int adr_spill_slice_shared(struct adr_spill_slice* slice);

/* Takes the spill lock of the slice's owner (unspilling it as needed) and
 * stores the address of the slice's first byte in *out_ptr, valid until
 * the matching adr_spill_slice_release. ADR_SPILL_ACCESS_WRITE on a shared
 * slice first makes its private copy: queued on `stream` (a stream of the
 * manager's device; the pointer is then ready for work on that stream
 * only, and the release should name it) or, with NULL, completed on
 * return. EBUSY for a write acquire of a shared slice that is already
 * acquired (its holders would keep reading the old owner): release it
 * first. Every successful acquire needs one release. */
ADR_API int adr_spill_slice_acquire(struct adr_spill_slice* slice, int mode,
                                    struct adr_stream* stream, void** out_ptr,
                                    struct adr_error* error);

/* Drops one acquire: adr_spill_buffer_release of the owner, with the same
 * stream rule. EINVAL when the slice is not acquired. */
ADR_API int adr_spill_slice_release(struct adr_spill_slice* slice, struct adr_stream* stream,
                                    struct adr_error* error);

/* Exposes the slice: a shared slice first gets its private copy (blocking;
 * EBUSY while it is acquired, as for a write acquire), then its owner is
 * exposed (adr_spill_buffer_expose with `reason`) and the address of the
 * slice's first byte stored in *out_ptr (may be NULL). Later views of it
 * are physical copies. */
ADR_API int adr_spill_slice_expose(struct adr_spill_slice* slice, const char* reason,
                                   void** out_ptr, struct adr_error* error);

/* ------------------------------------------------------------------------ */
/* Arrays on spillable buffers                                              */
/* ------------------------------------------------------------------------ */

/* An Arrow array tree (a table) whose every buffer is a spillable buffer of
 * one manager; docs/spill.md, "Arrays on spillable buffers". */
struct adr_spill_array;

/* Deep-copies `src` (not consumed; described by `schema`; on any device)
 * into spillable buffers of `manager`, on its device, as
 * adr_device_array_deep_copy does (a slice holds only what it uses; waits
 * for src's sync_event): a host source is narrowed in host memory and
 * uploaded, a device source is narrowed onto the manager's device and
 * copied from there on the device (device to device wherever the backends
 * copy directly; the device holds the table twice meanwhile). The caller owns *out:
 * adr_spill_array_destroy. Errors: those of the deep copy, and ENOMEM when
 * a buffer does not fit even after spilling (nothing is left allocated). */
ADR_API int adr_spill_array_deep_copy(struct adr_spill_manager* manager,
                                      const struct ArrowSchema* schema,
                                      const struct ArrowDeviceArray* src,
                                      struct adr_spill_array** out, struct adr_error* error);

/* A slice of the table: rows [offset, offset + length) of its top-level
 * array, sharing every buffer (copy-on-write, "Copy-on-write" in
 * docs/spill.md): no bytes are copied, except for buffers that were
 * exposed (adr_spill_array_export), which are copied at once. A write
 * acquire of either table later gives it private copies of the buffers it
 * shares. The top-level array's offset grows by `offset` (its null_count
 * is -1 unless the slice is the whole table). The caller owns *out
 * (adr_spill_array_destroy). EINVAL for rows outside the table. */
ADR_API int adr_spill_array_slice(struct adr_spill_array* array, int64_t offset, int64_t length,
                                  struct adr_spill_array** out, struct adr_error* error);

/* A deep copy of the table into spillable buffers of `manager` (any
 * device, the table's own included), each buffer copied from where its
 * bytes are now: device to device when it is in device memory (a peer
 * copy, or the core's routing between backends), straight from its host
 * copy when it is spilled (uploaded to the target, never unspilled onto
 * its own device first). Nothing is shared with `array`; its buffers are
 * not moved. The caller owns *out (adr_spill_array_destroy). */
ADR_API int adr_spill_array_copy(struct adr_spill_array* array, struct adr_spill_manager* manager,
                                 struct adr_spill_array** out, struct adr_error* error);

/* Drops the caller's reference. The buffers are freed (once) when the
 * arrays handed out by acquire and export are released too; the status of
 * those frees is returned when this is the last reference. NULL is a
 * no-op. */
ADR_API int adr_spill_array_destroy(struct adr_spill_array* array, struct adr_error* error);

/* Spills every buffer of the table that can spill now (on the device, not
 * acquired, not exposed); *out_spilled (may be NULL) receives the bytes
 * moved. Trigger "explicit". A failed spill leaves its buffer on the
 * device, usable; the first failure is returned after trying the rest.
 * A no-op on host-memory devices. */
ADR_API int adr_spill_array_spill(struct adr_spill_array* array, uint64_t* out_spilled,
                                  struct adr_error* error);

/* Moves every spilled buffer of the table back to the device (which may
 * spill other buffers); stops at the first failure. */
ADR_API int adr_spill_array_unspill(struct adr_spill_array* array, struct adr_error* error);

/* Takes the spill lock of every buffer (unspilling them as needed; `mode`
 * is an enum adr_spill_access: ADR_SPILL_ACCESS_WRITE first gives the
 * table private copies of the buffers it shares with its slices; EBUSY
 * for a shared buffer the table already holds) and initialises *out as a standard
 * ArrowDeviceArray over the device addresses (sync_event NULL: the bytes
 * are in place). The caller owns *out; out->array.release drops the locks,
 * as adr_spill_buffer_release with a NULL stream: release it only when no
 * queued work uses the buffers any more. *out holds a reference to the
 * table. On failure no lock is held. */
ADR_API int adr_spill_array_acquire(struct adr_spill_array* array, int mode,
                                    struct ArrowDeviceArray* out, struct adr_error* error);

/* Exposes every buffer (adr_spill_slice_expose with `reason`, NULL:
 * "adr_spill_array_export"; a buffer shared with slices of the table is
 * first copied, so the consumer's writes reach no other table): they never
 * spill again, whatever asks, and later slices copy them. Then
 * initialises *out as a standard ArrowDeviceArray over them, for any
 * consumer. The caller owns *out; its release frees only the tree's own
 * nodes, never a spillable buffer; *out holds a reference to the table,
 * so the buffers stay valid until both it is released and the table
 * destroyed. On failure the buffers exposed so far stay exposed. */
ADR_API int adr_spill_array_export(struct adr_spill_array* array, const char* reason,
                                   struct ArrowDeviceArray* out, struct adr_error* error);

/* The table's spillable buffers, in tree order (a node's buffers, then its
 * children, then its dictionary), for inspection (location, exposed). Owned
 * by the table; NULL past the end. */
ADR_API size_t adr_spill_array_buffer_count(const struct adr_spill_array* array);
ADR_API struct adr_spill_buffer* adr_spill_array_buffer(const struct adr_spill_array* array,
                                                        size_t i);

/* ------------------------------------------------------------------------ */
/* Statistics                                                               */
/* ------------------------------------------------------------------------ */

/* Moves of one kind: how many, bytes, and wall time of the copies and the
 * host waits they needed, in nanoseconds. */
struct adr_spill_transfer {
  uint64_t count;
  uint64_t bytes;
  uint64_t nanoseconds;
};

/* The caller sets struct_size. Transfer figures are counted from level 1
 * on; the state figures (buffers, bytes, failures) always. */
struct adr_spill_stats {
  uint32_t struct_size;
  uint32_t level;
  struct adr_spill_transfer spilled[ADR_SPILL_TRIGGER_COUNT]; /* device -> host, by trigger */
  struct adr_spill_transfer unspilled;                        /* host -> device */
  uint64_t buffers;                                           /* live buffers */
  uint64_t device_bytes;    /* of them in device memory (including moving ones) */
  uint64_t host_bytes;      /* spilled */
  uint64_t spillable_bytes; /* in device memory, neither acquired nor exposed */
  uint64_t exposed_buffers;
  uint64_t exposed_bytes;
  uint64_t device_limit; /* the soft limit (0: none) */
  uint64_t peak_device_bytes;
  uint64_t limit_exceeded;   /* times the limit could not be kept */
  uint64_t spill_failures;   /* spills that failed (the buffer stayed) */
  uint64_t unspill_failures; /* unspills that failed (the buffer stayed) */
  /* Spills queued on the spill stream (in the background) rather than
   * blocking; counted in spilled[] too. */
  uint64_t queued_spills;
  /* Copy-on-write: private copies made by a write acquire or an expose of a
   * shared slice, or by a view of an exposed one, and their bytes. */
  uint64_t cow_copies;
  uint64_t cow_bytes;
  uint64_t reserved[5];
};

ADR_API int adr_spill_stats_get(struct adr_spill_manager* manager, struct adr_spill_stats* out,
                                struct adr_error* error);

/* Renders statistics as cuDF prints them, several lines:
 *   Spill Statistics (level=1):
 *    Buffers: 8, 512 KiB in device memory (peak 2 MiB, limit 2 MiB), 0 B spilled, 0 exposed
 *    Spilling (level >= 1):
 *     gpu => cpu: 24 MiB in 0.0033s (on demand 16 MiB, limit 8 MiB, explicit 0 B)
 *     cpu => gpu: 16 MiB in 0.0020s
 *     failures: 0 spills, 0 unspills; limit exceeded 0 times
 * (the Spilling section from level 1 on; level 2's exposures are listed by
 * adr_spill_exposures_list). Into buf (always NUL-terminated); returns
 * buf, truncated if it is too small (1 KiB is enough). */
ADR_API const char* adr_spill_stats_format(const struct adr_spill_stats* stats, char* buf,
                                           size_t size);

/* Statistics level 2: one record per distinct (reason, call stack) of
 * adr_spill_buffer_expose, with how many buffers and bytes, as cuDF's
 * "Exposed buffers" section. */
struct adr_spill_exposure {
  const char* reason;    /* "" when none was given */
  uint64_t count;        /* exposures with this reason and stack */
  uint64_t bytes;        /* their sizes */
  const char* backtrace; /* symbolised frames, one per line (backtrace_symbols) */
};
typedef void (*adr_spill_exposure_fn)(void* ctx, const struct adr_spill_exposure* exposure);

/* Calls fn once per record (under the manager's lock: fn must not call the
 * manager). *out_count (may be NULL) receives the number of records.
 * ENOTSUP below level 2. */
ADR_API int adr_spill_exposures_list(struct adr_spill_manager* manager, adr_spill_exposure_fn fn,
                                     void* ctx, size_t* out_count, struct adr_error* error);

#ifdef __cplusplus
}
#endif

#endif /* ADR_SPILL_H */
