/* SPDX-License-Identifier: Apache-2.0
 *
 * The one door per vtable slot (dispatch.h says what each call checks,
 * traces and reports). The trace timing, the fault hook's work and the
 * message rewrite are behind branches predicted not taken, so the common
 * call is the indirect call plus two relaxed loads.
 */
#include "dispatch.h"

#include <errno.h>

/* The shared sequence. `component`: the trace line's [name]; `backend`:
 * the name in the error's "[api][backend]", NULL to keep the backend's own
 * text; `slot`: the fault-injection and trace name; `call` yields int; a
 * variable `error` must be in scope. */
#define DISPATCH(component, backend, api, slot, call, fmt, ...)                                    \
  __extension__({                                                                                  \
    int st_;                                                                                       \
    if (__builtin_expect(atomic_load_explicit(&adr__fault_armed, memory_order_relaxed) != 0, 0) && \
        (st_ = adr__fault_dispatch(slot, error)) != 0) {                                           \
      /* injected (core/fault.c): the backend is not called */                                     \
    } else if (__builtin_expect(adr__log_level() < ADR_LOG_TRACE, 1)) {                            \
      st_ = (call);                                                                                \
    } else {                                                                                       \
      uint64_t t0_ = adr__now_ns();                                                                \
      st_ = (call);                                                                                \
      adr__dispatch_traced_end(t0_, st_, component, slot, fmt, __VA_ARGS__);                       \
    }                                                                                              \
    if (__builtin_expect(st_ != 0, 0) && (backend) != NULL)                                        \
      adr__error_context(error, st_, api, backend);                                                \
    st_;                                                                                           \
  })

/* The same for calls that cannot fail (void or pointer slots) and for the
 * loader's lifecycle calls, which are not fault-injected. */
#define TRACED(component, slot, call, fmt, ...)                            \
  do {                                                                     \
    if (__builtin_expect(adr__log_level() < ADR_LOG_TRACE, 1)) {           \
      call;                                                                \
    } else {                                                               \
      uint64_t t0_ = adr__now_ns();                                        \
      call;                                                                \
      adr__dispatch_traced_end(t0_, 0, component, slot, fmt, __VA_ARGS__); \
    }                                                                      \
  } while (0)

#define DEV_CALL(dev, api, slot, call, fmt, ...) \
  DISPATCH((dev)->name, (dev)->backend->name, api, slot, call, fmt, __VA_ARGS__)

/* The traced paths of the hot slots, which dispatch.h's inline fast paths
 * call when fault injection is armed or ADR_LOG=trace (cold: out of the way
 * of the common path). */
#define COLD __attribute__((noinline, cold)) int

/* An optional slot the backend does not have. */
static int unsupported(struct adr_error* error, const char* api, const char* backend,
                       const char* what) {
  return adr__errorf(error, ENOTSUP, api, backend, "the backend %s", what);
}

/* ---- lifecycle ------------------------------------------------------------ */

int adr__dispatch_init(const struct adr__backend* b, const struct adr_backend* vt,
                       struct adr_error* error) {
  int st = 0;
  TRACED(b->name, "init", st = vt->init(error), "%s", "");
  return st;
}

int adr__dispatch_device_count(const struct adr__backend* b, const struct adr_backend* vt,
                               ArrowDeviceType type, int64_t* out, struct adr_error* error) {
  int st = 0;
  TRACED(b->name, "device_count", st = vt->device_count(type, out, error), "type=%d", (int)type);
  return st;
}

void adr__dispatch_shutdown(const struct adr__backend* b) {
  if (!ADR__HAS_SLOT(b->vt, shutdown)) return;
  TRACED(b->name, "shutdown", b->vt->shutdown(), "%s", "");
}

int adr__dispatch_device_open(const struct adr__backend* b, const char* api, ArrowDeviceType type,
                              int64_t id, struct adr_backend_device** out,
                              struct adr_error* error) {
  return DISPATCH(b->name, b->name, api, "device_open", b->vt->device_open(type, id, out, error),
                  "type=%d id=%lld", (int)type, (long long)id);
}

void adr__dispatch_device_close(struct adr_device* dev) {
  TRACED(dev->name, "device_close", dev->vt->device_close(dev->handle), "%s", "");
}

int adr__dispatch_device_info(struct adr_device* dev, const char* api, struct adr_device_info* out,
                              struct adr_error* error) {
  return DEV_CALL(dev, api, "device_info", dev->vt->device_info(dev->handle, out, error), "%s", "");
}

/* ---- memory --------------------------------------------------------------- */

COLD adr__dispatch_alloc_traced(struct adr_device* dev, const char* api, size_t size,
                                size_t alignment, struct adr_backend_stream* stream, void** out,
                                struct adr_error* error) {
  return DEV_CALL(dev, api, "alloc",
                  dev->vt->alloc(dev->handle, size, alignment, stream, out, error),
                  "size=%zu align=%zu", size, alignment);
}

COLD adr__dispatch_free_traced(struct adr_device* dev, const char* api, void* ptr, size_t size,
                               struct adr_backend_stream* stream, struct adr_error* error) {
  return DEV_CALL(dev, api, "free", dev->vt->free(dev->handle, ptr, size, stream, error),
                  "ptr=%p size=%zu", ptr, size);
}

COLD adr__dispatch_copy_traced(struct adr_device* owner, const char* api,
                               struct adr_backend_device* dst_dev, void* dst,
                               struct adr_backend_device* src_dev, const void* src, size_t size,
                               struct adr_backend_stream* stream, struct adr_error* error) {
  return DEV_CALL(owner, api, "copy",
                  owner->vt->copy(dst_dev, dst, src_dev, src, size, stream, error),
                  "dst=%p src=%p size=%zu", dst, src, size);
}

/* A blocking slot stands for `slot` then stream_synchronize: one fault
 * countdown step each, the backend is not called when one fires. */
static int blocking_faults(const char* slot, struct adr_error* error) {
  int st = 0;
  if (atomic_load_explicit(&adr__fault_armed, memory_order_relaxed) != 0 &&
      (st = adr__fault_dispatch(slot, error)) == 0)
    st = adr__fault_dispatch("stream_synchronize", error);
  return st;
}

/* The blocking slots' traced path, also taken by a backend without them
 * (dispatch.h): fault hooks for "copy" then "stream_synchronize" (the two
 * 1.0 slots a blocking copy stands for), then the one call. */
COLD adr__dispatch_copy_sync_traced(struct adr_device* owner, const char* api,
                                    struct adr_backend_device* dst_dev, void* dst,
                                    struct adr_backend_device* src_dev, const void* src,
                                    size_t size, struct adr_backend_stream* stream,
                                    struct adr_error* error) {
  const struct adr_backend* vt = owner->vt;
  if (!ADR__HAS_SLOT(vt, copy_sync)) {
    int st = adr__dispatch_copy(owner, api, dst_dev, dst, src_dev, src, size, stream, error);
    if (st == 0) st = adr__dispatch_stream_synchronize(owner, api, stream, error);
    return st;
  }
  int st = blocking_faults("copy", error);
  if (st == 0)
    TRACED(owner->name, "copy_sync",
           st = vt->copy_sync(dst_dev, dst, src_dev, src, size, stream, error),
           "dst=%p src=%p size=%zu", dst, src, size);
  if (st != 0) adr__error_context(error, st, api, owner->backend->name);
  return st;
}

COLD adr__dispatch_memset_sync_traced(struct adr_device* dev, const char* api, void* ptr, int value,
                                      size_t size, struct adr_backend_stream* stream,
                                      struct adr_error* error) {
  const struct adr_backend* vt = dev->vt;
  if (!ADR__HAS_SLOT(vt, memset_sync)) {
    int st = adr__dispatch_memset(dev, api, ptr, value, size, stream, error);
    if (st == 0) st = adr__dispatch_stream_synchronize(dev, api, stream, error);
    return st;
  }
  int st = blocking_faults("memset", error);
  if (st == 0)
    TRACED(dev->name, "memset_sync",
           st = vt->memset_sync(dev->handle, ptr, value, size, stream, error),
           "ptr=%p value=%d size=%zu", ptr, value, size);
  if (st != 0) adr__error_context(error, st, api, dev->backend->name);
  return st;
}

COLD adr__dispatch_memset_traced(struct adr_device* dev, const char* api, void* ptr, int value,
                                 size_t size, struct adr_backend_stream* stream,
                                 struct adr_error* error) {
  return DEV_CALL(dev, api, "memset", dev->vt->memset(dev->handle, ptr, value, size, stream, error),
                  "ptr=%p value=%d size=%zu", ptr, value, size);
}

/* ---- streams -------------------------------------------------------------- */

int adr__dispatch_stream_create(struct adr_device* dev, const char* api, uint32_t flags,
                                struct adr_backend_stream** out, struct adr_error* error) {
  return DEV_CALL(dev, api, "stream_create", dev->vt->stream_create(dev->handle, flags, out, error),
                  "flags=%u", flags);
}

/* The destroy slots free their handle whatever they return (adr/backend.h),
 * so an injected failure lets the backend free it first and then reports
 * the fault, as a driver error during the destroy would look. */
#define DISPATCH_DESTROY(dev, api, slot, call_with, fmt, ...)                                     \
  __extension__({                                                                                 \
    int fault_ = 0;                                                                               \
    if (__builtin_expect(atomic_load_explicit(&adr__fault_armed, memory_order_relaxed) != 0, 0))  \
      fault_ = adr__fault_dispatch(slot, error);                                                  \
    struct adr_error scratch_;                                                                    \
    struct adr_error* err_ = fault_ != 0 ? &scratch_ : error;                                     \
    int st_;                                                                                      \
    if (__builtin_expect(adr__log_level() < ADR_LOG_TRACE, 1)) {                                  \
      st_ = call_with(err_);                                                                      \
    } else {                                                                                      \
      uint64_t t0_ = adr__now_ns();                                                               \
      st_ = call_with(err_);                                                                      \
      adr__dispatch_traced_end(t0_, fault_ != 0 ? fault_ : st_, (dev)->name, slot, fmt,           \
                               __VA_ARGS__);                                                      \
    }                                                                                             \
    if (fault_ != 0) st_ = fault_;                                                                \
    if (__builtin_expect(st_ != 0, 0)) adr__error_context(error, st_, api, (dev)->backend->name); \
    st_;                                                                                          \
  })

int adr__dispatch_stream_destroy(struct adr_device* dev, const char* api,
                                 struct adr_backend_stream* stream, struct adr_error* error) {
#define CALL(e) dev->vt->stream_destroy(dev->handle, stream, e)
  return DISPATCH_DESTROY(dev, api, "stream_destroy", CALL, "%p", (void*)stream);
#undef CALL
}

COLD adr__dispatch_stream_synchronize_traced(struct adr_device* dev, const char* api,
                                             struct adr_backend_stream* stream,
                                             struct adr_error* error) {
  return DEV_CALL(dev, api, "stream_synchronize",
                  dev->vt->stream_synchronize(dev->handle, stream, error), "%p", (void*)stream);
}

/* ---- events --------------------------------------------------------------- */

int adr__dispatch_event_create(struct adr_device* dev, const char* api,
                               struct adr_backend_event** out, struct adr_error* error) {
  return DEV_CALL(dev, api, "event_create", dev->vt->event_create(dev->handle, out, error), "%s",
                  "");
}

int adr__dispatch_event_destroy(struct adr_device* dev, const char* api,
                                struct adr_backend_event* event, struct adr_error* error) {
#define CALL(e) dev->vt->event_destroy(dev->handle, event, e)
  return DISPATCH_DESTROY(dev, api, "event_destroy", CALL, "%p", (void*)event);
#undef CALL
}

int adr__dispatch_event_record(struct adr_device* dev, const char* api,
                               struct adr_backend_event* event, struct adr_backend_stream* stream,
                               struct adr_error* error) {
  return DEV_CALL(dev, api, "event_record",
                  dev->vt->event_record(dev->handle, event, stream, error), "event=%p stream=%p",
                  (void*)event, (void*)stream);
}

int adr__dispatch_event_wait(struct adr_device* dev, const char* api,
                             struct adr_backend_event* event, struct adr_backend_stream* stream,
                             struct adr_error* error) {
  return DEV_CALL(dev, api, "event_wait", dev->vt->event_wait(dev->handle, event, stream, error),
                  "event=%p stream=%p", (void*)event, (void*)stream);
}

int adr__dispatch_event_synchronize(struct adr_device* dev, const char* api,
                                    struct adr_backend_event* event, struct adr_error* error) {
  return DEV_CALL(dev, api, "event_synchronize",
                  dev->vt->event_synchronize(dev->handle, event, error), "event=%p", (void*)event);
}

int adr__dispatch_event_query(struct adr_device* dev, const char* api,
                              struct adr_backend_event* event, struct adr_error* error) {
  int st = DISPATCH(dev->name, NULL, api, "event_query",
                    dev->vt->event_query(dev->handle, event, error), "event=%p", (void*)event);
  /* EBUSY is an answer, not a failure: no message is built for it. */
  if (__builtin_expect(st != 0, 0) && st != EBUSY)
    adr__error_context(error, st, api, dev->backend->name);
  return st;
}

void* adr__dispatch_event_native(struct adr_device* dev, struct adr_backend_event* event) {
  void* native = NULL;
  TRACED(dev->name, "event_native", native = dev->vt->event_native(dev->handle, event), "event=%p",
         (void*)event);
  return native;
}

/* ---- interop (optional) ----------------------------------------------------- */

int adr__dispatch_event_import(struct adr_device* dev, const char* api, void* sync_event,
                               struct adr_backend_event** out, struct adr_error* error) {
  if (!ADR__HAS_SLOT(dev->vt, event_import))
    return unsupported(error, api, dev->backend->name, "cannot wrap native events");
  return DEV_CALL(dev, api, "event_import",
                  dev->vt->event_import(dev->handle, sync_event, out, error), "sync_event=%p",
                  sync_event);
}

int adr__dispatch_stream_import(struct adr_device* dev, const char* api, void* native_stream,
                                struct adr_backend_stream** out, struct adr_error* error) {
  if (!ADR__HAS_SLOT(dev->vt, stream_import))
    return unsupported(error, api, dev->backend->name, "cannot wrap native streams");
  return DEV_CALL(dev, api, "stream_import",
                  dev->vt->stream_import(dev->handle, native_stream, out, error), "native=%p",
                  native_stream);
}

void* adr__dispatch_stream_native(struct adr_device* dev, struct adr_backend_stream* stream) {
  if (!ADR__HAS_SLOT(dev->vt, stream_native)) return NULL;
  void* native = NULL;
  TRACED(dev->name, "stream_native", native = dev->vt->stream_native(dev->handle, stream), "%p",
         (void*)stream);
  return native;
}

int adr__dispatch_pointer_query(const struct adr__backend* b, const char* api, const void* ptr,
                                ArrowDeviceType* out_type, int64_t* out_id,
                                struct adr_error* error) {
  if (!ADR__HAS_SLOT(b->vt, pointer_query))
    return unsupported(error, api, b->name, "cannot tell which device owns an address");
  return DISPATCH(b->name, b->name, api, "pointer_query",
                  b->vt->pointer_query(ptr, out_type, out_id, error), "ptr=%p", ptr);
}

int adr__dispatch_device_native(struct adr_device* dev, const char* api, int kind, void** out,
                                struct adr_error* error) {
  if (!ADR__HAS_SLOT(dev->vt, device_native))
    return unsupported(error, api, dev->backend->name, "exposes no native handles");
  return DEV_CALL(dev, api, "device_native", dev->vt->device_native(dev->handle, kind, out, error),
                  "kind=%d", kind);
}

int adr__dispatch_device_adopt(const struct adr__backend* b, const char* api, ArrowDeviceType type,
                               int64_t id, const void* native_desc, struct adr_backend_device** out,
                               struct adr_error* error) {
  if (!ADR__HAS_SLOT(b->vt, device_adopt))
    return unsupported(error, api, b->name, "cannot adopt native devices");
  return DISPATCH(b->name, b->name, api, "device_adopt",
                  b->vt->device_adopt(type, id, native_desc, out, error), "type=%d id=%lld",
                  (int)type, (long long)id);
}

int adr__dispatch_device_properties(struct adr_device* dev, const char* api, adr_property_fn emit,
                                    void* ctx, struct adr_error* error) {
  if (!ADR__HAS_SLOT(dev->vt, device_properties))
    return unsupported(error, api, dev->backend->name, "describes no properties");
  return DEV_CALL(dev, api, "device_properties",
                  dev->vt->device_properties(dev->handle, emit, ctx, error), "%s", "");
}

int adr__dispatch_host_register(struct adr_device* dev, const char* api, void* ptr, size_t size,
                                struct adr_error* error) {
  if (!ADR__HAS_SLOT(dev->vt, host_register))
    return unsupported(error, api, dev->backend->name, "cannot page-lock host memory");
  return DEV_CALL(dev, api, "host_register", dev->vt->host_register(dev->handle, ptr, size, error),
                  "ptr=%p size=%zu", ptr, size);
}

int adr__dispatch_host_unregister(struct adr_device* dev, const char* api, void* ptr,
                                  struct adr_error* error) {
  if (!ADR__HAS_SLOT(dev->vt, host_unregister))
    return unsupported(error, api, dev->backend->name, "cannot page-lock host memory");
  return DEV_CALL(dev, api, "host_unregister", dev->vt->host_unregister(dev->handle, ptr, error),
                  "ptr=%p", ptr);
}

/* ---- sharing between processes (optional, ABI 1.2) --------------------------- */

int adr__dispatch_share_caps(struct adr_device* dev, const char* api, uint32_t* out,
                             struct adr_error* error) {
  if (!ADR__HAS_SLOT(dev->vt, share_caps)) {
    *out = 0;
    return 0;
  }
  return DEV_CALL(dev, api, "share_caps", dev->vt->share_caps(dev->handle, out, error), "%s", "");
}

int adr__dispatch_share_alloc(struct adr_device* dev, const char* api, size_t size,
                              size_t alignment, void** out, struct adr_error* error) {
  if (!ADR__HAS_SLOT(dev->vt, share_alloc))
    return unsupported(error, api, dev->backend->name, "cannot allocate shareable memory");
  return DEV_CALL(dev, api, "share_alloc",
                  dev->vt->share_alloc(dev->handle, size, alignment, out, error),
                  "size=%zu align=%zu", size, alignment);
}

int adr__dispatch_share_export(struct adr_device* dev, const char* api, const void* ptr,
                               struct adr_share_handle* out, int* out_fd,
                               struct adr_error* error) {
  if (!ADR__HAS_SLOT(dev->vt, share_export))
    return unsupported(error, api, dev->backend->name, "cannot export memory to other processes");
  return DEV_CALL(dev, api, "share_export",
                  dev->vt->share_export(dev->handle, ptr, out, out_fd, error), "ptr=%p", ptr);
}

int adr__dispatch_share_import(struct adr_device* dev, const char* api,
                               const struct adr_share_handle* handle, int fd, void** out,
                               struct adr_error* error) {
  if (!ADR__HAS_SLOT(dev->vt, share_import))
    return unsupported(error, api, dev->backend->name,
                       "cannot import memory from other processes");
  return DEV_CALL(dev, api, "share_import",
                  dev->vt->share_import(dev->handle, handle, fd, out, error), "fd=%d", fd);
}

int adr__dispatch_share_close(struct adr_device* dev, const char* api, void* ptr,
                              struct adr_error* error) {
  if (!ADR__HAS_SLOT(dev->vt, share_close))
    return unsupported(error, api, dev->backend->name, "cannot unmap imported memory");
  return DEV_CALL(dev, api, "share_close", dev->vt->share_close(dev->handle, ptr, error), "ptr=%p",
                  ptr);
}

int adr__dispatch_event_share_export(struct adr_device* dev, const char* api,
                                     struct adr_backend_stream* stream,
                                     struct adr_backend_event** out_event,
                                     struct adr_share_handle* out, int* out_fd,
                                     struct adr_error* error) {
  if (!ADR__HAS_SLOT(dev->vt, event_share_export))
    return unsupported(error, api, dev->backend->name, "cannot share events between processes");
  return DEV_CALL(dev, api, "event_share_export",
                  dev->vt->event_share_export(dev->handle, stream, out_event, out, out_fd, error),
                  "stream=%p", (void*)stream);
}

int adr__dispatch_event_share_import(struct adr_device* dev, const char* api,
                                     const struct adr_share_handle* handle, int fd,
                                     struct adr_backend_event** out, struct adr_error* error) {
  if (!ADR__HAS_SLOT(dev->vt, event_share_import))
    return unsupported(error, api, dev->backend->name, "cannot share events between processes");
  return DEV_CALL(dev, api, "event_share_import",
                  dev->vt->event_share_import(dev->handle, handle, fd, out, error), "fd=%d", fd);
}
