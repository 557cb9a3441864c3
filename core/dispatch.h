/* SPDX-License-Identifier: Apache-2.0
 *
 * One checked call per slot of the backend vtable (dispatch.c; the common
 * case of the five hot slots inline below), in the manner of SQLite's
 * sqlite3OsRead wrappers: every call the core makes into a backend goes
 * through exactly one of these functions, and no other core file calls a
 * slot of `struct adr_backend` (tests/unit/check_dispatch.sh).
 *
 * Each function, in order:
 *   - an optional slot (backend.h: not in ADR_BACKEND_REQUIRED_SLOTS) that
 *     the backend's struct_size does not cover or left NULL is ENOTSUP with
 *     "[api][backend] the backend cannot ..." (void and pointer slots: does
 *     nothing, NULL);
 *   - the fault-injection hook (core/fault.c), for every fallible slot but
 *     the loader's init and device_count: the injected call never reaches
 *     the backend;
 *   - the indirect call; at ADR_LOG=trace also timed and logged as
 *     "adr: trace: [DEVICE] slot(args) -> STATUS in N ns" (DEVICE: the
 *     device's name, or the backend's for calls made before a device
 *     exists);
 *   - on failure (not EBUSY from event_query, which is an answer), the
 *     backend's message becomes the core's through adr__error_context
 *     (error.c): "[api][backend] NATIVE: description".
 * `api` is the public operation the message names ("adr_copy"; "pool" for
 * the caching pool's own event calls). `error` may be NULL.
 *
 * With ADR_LOG below trace and fault injection off, the cost over the bare
 * indirect call is two relaxed atomic loads and predictable branches: the
 * hot slots' common case is inlined into the caller, the other slots are
 * one direct call away.
 *
 * Thread safety: as the slots themselves (backend.h: any thread). Nothing
 * here is ABI.
 */
#ifndef ADR_CORE_DISPATCH_H
#define ADR_CORE_DISPATCH_H

#include "internal.h"

/* ---- lifecycle ------------------------------------------------------------
 * The loader's calls take the table explicitly: it is not yet b->vt. Their
 * failure text is the backend's own (it becomes the rejection reason, or a
 * warning), with no "[api][backend]" prefix added. */
int adr__dispatch_init(const struct adr__backend* b, const struct adr_backend* vt,
                       struct adr_error* error);
int adr__dispatch_device_count(const struct adr__backend* b, const struct adr_backend* vt,
                               ArrowDeviceType type, int64_t* out, struct adr_error* error);
/* Optional slot: nothing to do when absent. */
void adr__dispatch_shutdown(const struct adr__backend* b);
int adr__dispatch_device_open(const struct adr__backend* b, const char* api, ArrowDeviceType type,
                              int64_t id, struct adr_backend_device** out, struct adr_error* error);
void adr__dispatch_device_close(struct adr_device* dev);
int adr__dispatch_device_info(struct adr_device* dev, const char* api, struct adr_device_info* out,
                              struct adr_error* error);

/* ---- the hot slots ---------------------------------------------------------
 * alloc, free, copy, memset, stream_synchronize and the blocking copy_sync
 * and memset_sync are on the path of every adr_copy, adr_memset and
 * blocking call, so their common case is inline
 * here: the indirect call and, on failure, adr__error_context. With fault
 * injection armed or ADR_LOG=trace they take their traced path in
 * dispatch.c (adr__dispatch_<slot>_traced), which does all of the above. */

/* Fault injection armed, or ADR_LOG=trace. */
static inline bool adr__dispatch_slow(void) {
  return __builtin_expect((atomic_load_explicit(&adr__fault_armed, memory_order_relaxed) |
                           (adr__log_level() >= ADR_LOG_TRACE)) != 0,
                          0);
}
static inline int adr__dispatch_done(int st, const char* api, const struct adr_device* dev,
                                     struct adr_error* error) {
  if (__builtin_expect(st != 0, 0)) adr__error_context(error, st, api, dev->backend->name);
  return st;
}

int adr__dispatch_alloc_traced(struct adr_device* dev, const char* api, size_t size,
                               size_t alignment, struct adr_backend_stream* stream, void** out,
                               struct adr_error* error);
static inline int adr__dispatch_alloc(struct adr_device* dev, const char* api, size_t size,
                                      size_t alignment, struct adr_backend_stream* stream,
                                      void** out, struct adr_error* error) {
  if (adr__dispatch_slow())
    return adr__dispatch_alloc_traced(dev, api, size, alignment, stream, out, error);
  return adr__dispatch_done(dev->vt->alloc(dev->handle, size, alignment, stream, out, error), api,
                            dev, error);
}

int adr__dispatch_free_traced(struct adr_device* dev, const char* api, void* ptr, size_t size,
                              struct adr_backend_stream* stream, struct adr_error* error);
static inline int adr__dispatch_free(struct adr_device* dev, const char* api, void* ptr,
                                     size_t size, struct adr_backend_stream* stream,
                                     struct adr_error* error) {
  if (adr__dispatch_slow()) return adr__dispatch_free_traced(dev, api, ptr, size, stream, error);
  return adr__dispatch_done(dev->vt->free(dev->handle, ptr, size, stream, error), api, dev, error);
}

/* `owner` is the device whose backend runs the copy (its name is traced). */
int adr__dispatch_copy_traced(struct adr_device* owner, const char* api,
                              struct adr_backend_device* dst_dev, void* dst,
                              struct adr_backend_device* src_dev, const void* src, size_t size,
                              struct adr_backend_stream* stream, struct adr_error* error);
static inline int adr__dispatch_copy(struct adr_device* owner, const char* api,
                                     struct adr_backend_device* dst_dev, void* dst,
                                     struct adr_backend_device* src_dev, const void* src,
                                     size_t size, struct adr_backend_stream* stream,
                                     struct adr_error* error) {
  if (adr__dispatch_slow())
    return adr__dispatch_copy_traced(owner, api, dst_dev, dst, src_dev, src, size, stream, error);
  return adr__dispatch_done(owner->vt->copy(dst_dev, dst, src_dev, src, size, stream, error), api,
                            owner, error);
}

int adr__dispatch_memset_traced(struct adr_device* dev, const char* api, void* ptr, int value,
                                size_t size, struct adr_backend_stream* stream,
                                struct adr_error* error);
static inline int adr__dispatch_memset(struct adr_device* dev, const char* api, void* ptr,
                                       int value, size_t size, struct adr_backend_stream* stream,
                                       struct adr_error* error) {
  if (adr__dispatch_slow())
    return adr__dispatch_memset_traced(dev, api, ptr, value, size, stream, error);
  return adr__dispatch_done(dev->vt->memset(dev->handle, ptr, value, size, stream, error), api, dev,
                            error);
}

int adr__dispatch_stream_synchronize_traced(struct adr_device* dev, const char* api,
                                            struct adr_backend_stream* stream,
                                            struct adr_error* error);
static inline int adr__dispatch_stream_synchronize(struct adr_device* dev, const char* api,
                                                   struct adr_backend_stream* stream,
                                                   struct adr_error* error) {
  if (adr__dispatch_slow()) return adr__dispatch_stream_synchronize_traced(dev, api, stream, error);
  return adr__dispatch_done(dev->vt->stream_synchronize(dev->handle, stream, error), api, dev,
                            error);
}

/* The blocking copy and memset (the application's NULL-stream calls): one
 * indirect call to the backend's copy_sync / memset_sync slot (ABI 1.1),
 * which returns once the work and everything queued before it on `stream`
 * has completed. A backend without the slot gets copy (memset) followed by
 * stream_synchronize, the 1.0 sequence. On the traced path (fault
 * injection armed, ADR_LOG=trace) a blocking call counts as one call of
 * each of its two 1.0 slots, "copy" ("memset") and then
 * "stream_synchronize", for fault injection, so a sweep over either slot
 * still reaches every blocking call; the trace line names the slot really
 * called. */
int adr__dispatch_copy_sync_traced(struct adr_device* owner, const char* api,
                                   struct adr_backend_device* dst_dev, void* dst,
                                   struct adr_backend_device* src_dev, const void* src, size_t size,
                                   struct adr_backend_stream* stream, struct adr_error* error);
static inline int adr__dispatch_copy_sync(struct adr_device* owner, const char* api,
                                          struct adr_backend_device* dst_dev, void* dst,
                                          struct adr_backend_device* src_dev, const void* src,
                                          size_t size, struct adr_backend_stream* stream,
                                          struct adr_error* error) {
  const struct adr_backend* vt = owner->vt;
  if (adr__dispatch_slow() || !__builtin_expect(ADR__HAS_SLOT(vt, copy_sync), 1))
    return adr__dispatch_copy_sync_traced(owner, api, dst_dev, dst, src_dev, src, size, stream,
                                          error);
  /* No message to give context to: a tail call. */
  if (error == NULL) return vt->copy_sync(dst_dev, dst, src_dev, src, size, stream, NULL);
  return adr__dispatch_done(vt->copy_sync(dst_dev, dst, src_dev, src, size, stream, error), api,
                            owner, error);
}

int adr__dispatch_memset_sync_traced(struct adr_device* dev, const char* api, void* ptr, int value,
                                     size_t size, struct adr_backend_stream* stream,
                                     struct adr_error* error);
static inline int adr__dispatch_memset_sync(struct adr_device* dev, const char* api, void* ptr,
                                            int value, size_t size,
                                            struct adr_backend_stream* stream,
                                            struct adr_error* error) {
  const struct adr_backend* vt = dev->vt;
  if (adr__dispatch_slow() || !__builtin_expect(ADR__HAS_SLOT(vt, memset_sync), 1))
    return adr__dispatch_memset_sync_traced(dev, api, ptr, value, size, stream, error);
  if (error == NULL) return vt->memset_sync(dev->handle, ptr, value, size, stream, NULL);
  return adr__dispatch_done(vt->memset_sync(dev->handle, ptr, value, size, stream, error), api, dev,
                            error);
}

/* ---- streams ----------------------------------------------------------------- */
int adr__dispatch_stream_create(struct adr_device* dev, const char* api, uint32_t flags,
                                struct adr_backend_stream** out, struct adr_error* error);
int adr__dispatch_stream_destroy(struct adr_device* dev, const char* api,
                                 struct adr_backend_stream* stream, struct adr_error* error);

/* ---- events ------------------------------------------------------------------ */
int adr__dispatch_event_create(struct adr_device* dev, const char* api,
                               struct adr_backend_event** out, struct adr_error* error);
int adr__dispatch_event_destroy(struct adr_device* dev, const char* api,
                                struct adr_backend_event* event, struct adr_error* error);
int adr__dispatch_event_record(struct adr_device* dev, const char* api,
                               struct adr_backend_event* event, struct adr_backend_stream* stream,
                               struct adr_error* error);
int adr__dispatch_event_wait(struct adr_device* dev, const char* api,
                             struct adr_backend_event* event, struct adr_backend_stream* stream,
                             struct adr_error* error);
int adr__dispatch_event_synchronize(struct adr_device* dev, const char* api,
                                    struct adr_backend_event* event, struct adr_error* error);
/* 0 complete, EBUSY pending (no message written), other: an error. */
int adr__dispatch_event_query(struct adr_device* dev, const char* api,
                              struct adr_backend_event* event, struct adr_error* error);
void* adr__dispatch_event_native(struct adr_device* dev, struct adr_backend_event* event);

/* ---- interop (optional slots) -------------------------------------------------- */
int adr__dispatch_event_import(struct adr_device* dev, const char* api, void* sync_event,
                               struct adr_backend_event** out, struct adr_error* error);
int adr__dispatch_stream_import(struct adr_device* dev, const char* api, void* native_stream,
                                struct adr_backend_stream** out, struct adr_error* error);
void* adr__dispatch_stream_native(struct adr_device* dev, struct adr_backend_stream* stream);
int adr__dispatch_pointer_query(const struct adr__backend* b, const char* api, const void* ptr,
                                ArrowDeviceType* out_type, int64_t* out_id,
                                struct adr_error* error);
int adr__dispatch_device_native(struct adr_device* dev, const char* api, int kind, void** out,
                                struct adr_error* error);
int adr__dispatch_device_adopt(const struct adr__backend* b, const char* api, ArrowDeviceType type,
                               int64_t id, const void* native_desc, struct adr_backend_device** out,
                               struct adr_error* error);
int adr__dispatch_device_properties(struct adr_device* dev, const char* api, adr_property_fn emit,
                                    void* ctx, struct adr_error* error);
int adr__dispatch_host_register(struct adr_device* dev, const char* api, void* ptr, size_t size,
                                struct adr_error* error);
int adr__dispatch_host_unregister(struct adr_device* dev, const char* api, void* ptr,
                                  struct adr_error* error);

/* ---- sharing between processes (optional, ABI 1.2; core/share/) ---------
 * share_caps without the slot is 0 (nothing shareable), not an error. */
int adr__dispatch_share_caps(struct adr_device* dev, const char* api, uint32_t* out,
                             struct adr_error* error);
int adr__dispatch_share_alloc(struct adr_device* dev, const char* api, size_t size,
                              size_t alignment, void** out, struct adr_error* error);
int adr__dispatch_share_export(struct adr_device* dev, const char* api, const void* ptr,
                               struct adr_share_handle* out, int* out_fd,
                               struct adr_error* error);
int adr__dispatch_share_import(struct adr_device* dev, const char* api,
                               const struct adr_share_handle* handle, int fd, void** out,
                               struct adr_error* error);
int adr__dispatch_share_close(struct adr_device* dev, const char* api, void* ptr,
                              struct adr_error* error);
int adr__dispatch_event_share_export(struct adr_device* dev, const char* api,
                                     struct adr_backend_stream* stream,
                                     struct adr_backend_event** out_event,
                                     struct adr_share_handle* out, int* out_fd,
                                     struct adr_error* error);
int adr__dispatch_event_share_import(struct adr_device* dev, const char* api,
                                     const struct adr_share_handle* handle, int fd,
                                     struct adr_backend_event** out, struct adr_error* error);

#endif /* ADR_CORE_DISPATCH_H */
