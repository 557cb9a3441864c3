/* SPDX-License-Identifier: Apache-2.0
 *
 * The validation layer (ADR_VALIDATE=1, adr_validation_enable) and the
 * range checks every copy and memset gets. validate.h says what the entry
 * points call; docs/validation.md what is checked.
 *
 * Lock story: `state_lock` guards the once-only decision; `obj_lock` the
 * lists of live and quarantined streams and events (taken on create and
 * destroy only: the per-call handle check reads the object's own header);
 * `free_lock` the free quarantine (taken by adr_free while the layer is on,
 * and by the error path of a free of an unknown pointer). The device list
 * is an append-only array of atomics.
 */
#include "validate.h"

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "memory/memory_internal.h"

_Atomic int adr__validate_state = -1;

static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;
static bool requested;
static _Atomic uint64_t error_count;

/* Destroyed streams/events kept (not freed) so that a use after destroy
 * reads the layer's header; older ones are freed in FIFO order. */
#define OBJ_QUARANTINE 4096u
/* Freed allocations kept back from their handler, so that their address is
 * not handed out again: at most this many, and this many bytes. */
#define FREE_QUARANTINE 1024u
#define FREE_QUARANTINE_BYTES ((size_t)256 << 20)
#define MAX_DEVICES 256

/* ---- state --------------------------------------------------------------- */

static bool env_wants_validation(void) {
  const char* v = getenv("ADR_VALIDATE");
  if (v == NULL || v[0] == '\0' || strcmp(v, "0") == 0 || strcmp(v, "off") == 0) return false;
  if (strcmp(v, "1") == 0 || strcmp(v, "on") == 0) return true;
  adr__log(ADR_LOG_ERROR, "validate",
           "ADR_VALIDATE=%s: expected 1/on or 0/off at column 1; the validation layer is on", v);
  return true;
}

bool adr__validate_decide(void) {
  pthread_mutex_lock(&state_lock);
  int s = atomic_load_explicit(&adr__validate_state, memory_order_relaxed);
  if (s < 0) {
    s = (requested || env_wants_validation()) ? 1 : 0;
    if (s) adr__log(ADR_LOG_INFO, "validate", "validation layer on");
    atomic_store_explicit(&adr__validate_state, s, memory_order_relaxed);
  }
  pthread_mutex_unlock(&state_lock);
  return s > 0;
}

int adr_validation_enable(struct adr_error* error) {
  pthread_mutex_lock(&state_lock);
  int s = atomic_load_explicit(&adr__validate_state, memory_order_relaxed);
  if (s < 0) requested = true;
  pthread_mutex_unlock(&state_lock);
  if (s == 0)
    return adr__errorf(error, EBUSY, "adr_validation_enable", NULL,
                       "too late: allocations, streams or events were already made without "
                       "the validation layer (call it before the first of them, or set "
                       "ADR_VALIDATE=1)");
  return 0;
}

int adr_validation_enabled(void) {
  int s = atomic_load_explicit(&adr__validate_state, memory_order_relaxed);
  if (s >= 0) return s;
  pthread_mutex_lock(&state_lock);
  bool on = requested;
  pthread_mutex_unlock(&state_lock);
  return on || env_wants_validation();
}

static void count_error(void) {
  atomic_fetch_add_explicit(&error_count, 1, memory_order_relaxed);
}

/* ---- call sites ------------------------------------------------------------ */

/* "function+0x1c (libfoo.so)", or "module+0x4a10" without a symbol. */
static const char* site_text(const void* site, char* buf, size_t size) {
  if (site == NULL) return "an unknown place";
  Dl_info info;
  if (dladdr(site, &info) == 0 || info.dli_fname == NULL) {
    snprintf(buf, size, "%p", site);
    return buf;
  }
  const char* module = strrchr(info.dli_fname, '/');
  module = module ? module + 1 : info.dli_fname;
  if (info.dli_sname != NULL)
    snprintf(buf, size, "%s+0x%tx (%s)", info.dli_sname,
             (const char*)site - (const char*)info.dli_saddr, module);
  else
    snprintf(buf, size, "%s+0x%tx", module, (const char*)site - (const char*)info.dli_fbase);
  return buf;
}

/* ---- exit: leak report, then the quarantine goes back ---------------------- */

static _Atomic(struct adr_device*) devices[MAX_DEVICES];
static pthread_once_t atexit_once = PTHREAD_ONCE_INIT;
static void at_exit(void);

/* Registered at the first validated object, which needs a device, so after
 * the registry's teardown handler: at exit this one runs first, while the
 * devices are still there. */
static void register_atexit(void) {
  atexit(at_exit);
}

void adr__validate_note_device(struct adr_device* dev) {
  pthread_once(&atexit_once, register_atexit);
  for (size_t i = 0; i < MAX_DEVICES; i++) {
    struct adr_device* d = atomic_load_explicit(&devices[i], memory_order_acquire);
    if (d == dev) return;
    if (d == NULL) {
      struct adr_device* expect = NULL;
      if (atomic_compare_exchange_strong(&devices[i], &expect, dev) || expect == dev) return;
    }
  }
}

/* ---- ranges ---------------------------------------------------------------- */

/* The refusal, out of line, so that the check itself stays a small leaf. */
__attribute__((noinline, cold)) static int range_error(const char* op, struct adr_device* dev,
                                                       const char* what, const void* p, size_t size,
                                                       const struct adr__range* r,
                                                       struct adr_error* error) {
  count_error();
  size_t off = (uintptr_t)p - r->start;
  char site[256] = "";
  if (r->site != NULL && ADR__VALIDATING()) {
    char buf[224];
    snprintf(site, sizeof(site), ", allocated at %s", site_text(r->site, buf, sizeof(buf)));
  }
  return adr__errorf(error, EINVAL, op, dev->backend->name,
                     "%s range [%p, +%zu) runs past the end of its allocation by %zu bytes "
                     "(%zu bytes at %p on %s%s)",
                     what, p, size, size - (r->size - off), r->size, (void*)r->start, dev->name,
                     site);
}

int adr__range_check_slow(const char* op, struct adr_device* dev, const char* what, const void* p,
                          size_t size, struct adr_error* error) {
  struct adr__range r;
  if (!adr__alloc_table_ranges_find(dev->allocs, p, &r)) return 0;
  size_t off = (uintptr_t)p - r.start;
  if (__builtin_expect(off <= r.size && size <= r.size - off, 1)) return 0;
  return range_error(op, dev, what, p, size, &r, error);
}

/* ---- streams and events ---------------------------------------------------- */

#define MAGIC_LIVE UINT64_C(0x6164722d6c697665) /* "adr-live" */
#define MAGIC_DEAD UINT64_C(0x6164722d64656164) /* "adr-dead" */

struct vobj {
  _Alignas(16) uint64_t magic;
  uint64_t serial;
  int kind;
  struct adr_device* device;
  const void* created_at;
  const void* destroyed_at;
  struct vobj *prev, *next; /* live list, or the quarantine FIFO (next) */
};

static pthread_mutex_t obj_lock = PTHREAD_MUTEX_INITIALIZER;
static struct vobj live_head = {.prev = &live_head, .next = &live_head};
static struct vobj *dead_first, *dead_last;
static size_t dead_count;
static uint64_t obj_serial;

static inline struct vobj* header_of(const void* obj) {
  return (struct vobj*)((char*)obj - sizeof(struct vobj));
}

static const char* kind_name(int kind) {
  return kind == ADR__VOBJ_STREAM ? "stream" : "event";
}

void* adr__validate_obj_create(int kind, size_t size, const void* site) {
  pthread_once(&atexit_once, register_atexit);
  struct vobj* h = calloc(1, sizeof(*h) + size);
  if (h == NULL) return NULL;
  h->kind = kind;
  h->created_at = site;
  h->prev = h->next = h;
  return h + 1;
}

void adr__validate_obj_live(void* obj) {
  struct vobj* h = header_of(obj);
  h->device = h->kind == ADR__VOBJ_STREAM ? ((struct adr_stream*)obj)->device
                                          : ((struct adr_event*)obj)->device;
  pthread_mutex_lock(&obj_lock);
  h->serial = ++obj_serial;
  h->magic = MAGIC_LIVE;
  h->next = &live_head;
  h->prev = live_head.prev;
  live_head.prev->next = h;
  live_head.prev = h;
  pthread_mutex_unlock(&obj_lock);
}

void adr__validate_obj_discard(void* obj) {
  if (obj != NULL) free(header_of(obj));
}

void adr__validate_obj_destroy(void* obj, const void* site) {
  struct vobj* h = header_of(obj);
  struct vobj* evict = NULL;
  pthread_mutex_lock(&obj_lock);
  h->prev->next = h->next;
  h->next->prev = h->prev;
  h->magic = MAGIC_DEAD;
  h->destroyed_at = site;
  h->prev = NULL;
  h->next = NULL;
  if (dead_last)
    dead_last->next = h;
  else
    dead_first = h;
  dead_last = h;
  if (++dead_count > OBJ_QUARANTINE) {
    evict = dead_first;
    dead_first = evict->next;
    dead_count--;
  }
  pthread_mutex_unlock(&obj_lock);
  free(evict);
}

static int check_obj(const char* op, const void* obj, int kind, struct adr_error* error) {
  const struct vobj* h = header_of(obj);
  if (__builtin_expect(h->magic == MAGIC_LIVE && h->kind == kind, 1)) return 0;
  count_error();
  const char* backend = h->device ? h->device->backend->name : NULL;
  char a[224], b[224];
  if (h->magic == MAGIC_DEAD && h->kind == kind)
    return adr__errorf(
        error, EINVAL, op, backend, "%s %p (#%" PRIu64 " on %s, created at %s) was destroyed at %s",
        kind_name(kind), obj, h->serial, h->device->name, site_text(h->created_at, a, sizeof(a)),
        site_text(h->destroyed_at, b, sizeof(b)));
  if ((h->magic == MAGIC_DEAD || h->magic == MAGIC_LIVE) && h->kind != kind)
    return adr__errorf(error, EINVAL, op, backend, "%p is %s, not %s", obj,
                       h->kind == ADR__VOBJ_STREAM ? "a stream" : "an event",
                       kind == ADR__VOBJ_STREAM ? "a stream" : "an event");
  return adr__errorf(error, EINVAL, op, NULL,
                     "%p is not a %s made by adr, or was destroyed more than %u %ss ago", obj,
                     kind_name(kind), OBJ_QUARANTINE, kind_name(kind));
}

int adr__validate_stream_slow(const char* op, const struct adr_stream* stream,
                              struct adr_error* error) {
  return check_obj(op, stream, ADR__VOBJ_STREAM, error);
}

int adr__validate_event(const char* op, const struct adr_event* event, struct adr_error* error) {
  if (event == NULL) return 0;
  return check_obj(op, event, ADR__VOBJ_EVENT, error);
}

/* ---- the free quarantine ----------------------------------------------------- */

struct qentry {
  struct adr_device* dev;
  const void* handler;
  void* ptr;
  size_t size;
  void* cookie;
  struct adr_backend_event* event; /* recorded on the free's stream, or NULL */
  const void* alloc_site;
  const void* free_site;
};

static pthread_mutex_t free_lock = PTHREAD_MUTEX_INITIALIZER;
static struct qentry ring[FREE_QUARANTINE];
static size_t ring_head, ring_count, ring_bytes;

/* Gives an allocation to its handler: the work queued before the free
 * first completes (host wait on the event recorded then). */
static void release(struct qentry* q) {
  struct adr_device* dev = q->dev;
  if (q->event != NULL) {
    adr__dispatch_event_synchronize(dev, "adr_free", q->event, NULL);
    adr__dispatch_event_destroy(dev, "adr_free", q->event, NULL);
  }
  if (dev->memory != NULL)
    adr__memory_free(dev, q->handler, q->ptr, q->size ? q->size : 1, NULL, q->cookie, NULL);
}

/* Takes the oldest entry of dev (of any device for NULL) out. free_lock
 * held. */
static bool pop_oldest_locked(struct adr_device* dev, struct qentry* out) {
  for (size_t i = 0; i < ring_count; i++) {
    size_t at = (ring_head + i) % FREE_QUARANTINE;
    if (dev != NULL && ring[at].dev != dev) continue;
    *out = ring[at];
    /* Close the gap: earlier entries move one place towards the tail. */
    for (size_t j = i; j > 0; j--)
      ring[(ring_head + j) % FREE_QUARANTINE] = ring[(ring_head + j - 1) % FREE_QUARANTINE];
    ring_head = (ring_head + 1) % FREE_QUARANTINE;
    ring_count--;
    ring_bytes -= out->size;
    return true;
  }
  return false;
}

bool adr__validate_free_defer(struct adr_device* dev, const void* handler, void* ptr, size_t size,
                              void* cookie, struct adr_stream* stream, const void* alloc_site,
                              const void* free_site) {
  struct qentry q = {dev, handler, ptr, size, cookie, NULL, alloc_site, free_site};
  if (stream != NULL) {
    /* The handler will see a host-ordered free: remember where the
     * stream was so that release() waits for exactly that work. */
    if (adr__dispatch_event_create(dev, "adr_free", &q.event, NULL) != 0) return false;
    if (adr__dispatch_event_record(dev, "adr_free", q.event, stream->handle, NULL) != 0) {
      adr__dispatch_event_destroy(dev, "adr_free", q.event, NULL);
      return false;
    }
  }
  for (;;) {
    struct qentry old;
    pthread_mutex_lock(&free_lock);
    if (ring_count < FREE_QUARANTINE && (ring_count == 0 || ring_bytes <= FREE_QUARANTINE_BYTES)) {
      ring[(ring_head + ring_count) % FREE_QUARANTINE] = q;
      ring_count++;
      ring_bytes += size;
      pthread_mutex_unlock(&free_lock);
      return true;
    }
    /* Full: the oldest goes to its handler, outside the lock (release may
     * wait for a stream). */
    bool got = pop_oldest_locked(NULL, &old);
    pthread_mutex_unlock(&free_lock);
    if (got) release(&old);
  }
}

int adr__validate_free_unknown(struct adr_device* dev, void* ptr, struct adr_error* error) {
  struct qentry q;
  bool found = false;
  pthread_mutex_lock(&free_lock);
  for (size_t i = 0; i < ring_count && !found; i++) {
    const struct qentry* e = &ring[(ring_head + i) % FREE_QUARANTINE];
    if (e->dev == dev && e->ptr == ptr) {
      q = *e;
      found = true;
    }
  }
  pthread_mutex_unlock(&free_lock);
  if (!found) return 0;
  count_error();
  char a[224], b[224];
  return adr__errorf(error, EINVAL, "adr_free", dev->backend->name,
                     "double free: %p (%zu bytes on %s, allocated at %s) was already freed at %s",
                     ptr, q.size, dev->name, site_text(q.alloc_site, a, sizeof(a)),
                     site_text(q.free_site, b, sizeof(b)));
}

void adr__validate_flush(struct adr_device* dev) {
  for (;;) {
    struct qentry q;
    pthread_mutex_lock(&free_lock);
    bool got = pop_oldest_locked(dev, &q);
    pthread_mutex_unlock(&free_lock);
    if (!got) return;
    release(&q);
  }
}

/* ---- the leak report ----------------------------------------------------------- */

struct walk_ctx {
  struct adr_device* dev;
  adr_validation_leak_fn fn;
  void* ctx;
  struct adr_validation_counts* counts;
};

static void on_range(void* p, const struct adr__range* r) {
  struct walk_ctx* w = p;
  w->counts->allocations++;
  w->counts->allocation_bytes += r->size;
  char site[224];
  if (w->fn)
    w->fn(w->ctx, ADR_VALIDATION_ALLOCATION, w->dev, (const void*)r->start, r->size,
          site_text(r->site, site, sizeof(site)));
}

int adr_validation_report(adr_validation_leak_fn fn, void* ctx, struct adr_validation_counts* out,
                          struct adr_error* error) {
  if (out != NULL && out->struct_size < offsetof(struct adr_validation_counts, reserved))
    return adr__errorf(error, EINVAL, "adr_validation_report", NULL,
                       "out->struct_size %u is smaller than the oldest layout", out->struct_size);
  if (!ADR__VALIDATING())
    return adr__errorf(error, ENOTSUP, "adr_validation_report", NULL,
                       "the validation layer is off (ADR_VALIDATE=1 or adr_validation_enable)");
  struct adr_validation_counts c;
  memset(&c, 0, sizeof(c));
  c.struct_size = sizeof(c);
  for (size_t i = 0; i < MAX_DEVICES; i++) {
    struct adr_device* d = atomic_load_explicit(&devices[i], memory_order_acquire);
    if (d == NULL) break;
    struct walk_ctx w = {d, fn, ctx, &c};
    adr__alloc_table_ranges_foreach(d->allocs, on_range, &w);
  }
  pthread_mutex_lock(&obj_lock);
  for (struct vobj* h = live_head.next; h != &live_head; h = h->next) {
    if (h->kind == ADR__VOBJ_STREAM)
      c.streams++;
    else
      c.events++;
    char site[224];
    if (fn)
      fn(ctx, h->kind == ADR__VOBJ_STREAM ? ADR_VALIDATION_STREAM : ADR_VALIDATION_EVENT, h->device,
         h + 1, 0, site_text(h->created_at, site, sizeof(site)));
  }
  pthread_mutex_unlock(&obj_lock);
  c.errors = atomic_load_explicit(&error_count, memory_order_relaxed);
  if (out != NULL) {
    uint32_t size = out->struct_size < sizeof(c) ? out->struct_size : (uint32_t)sizeof(c);
    memcpy(out, &c, size);
    out->struct_size = size;
  }
  return 0;
}

static void log_leak(void* ctx, int kind, struct adr_device* device, const void* object,
                     size_t size, const char* created_at) {
  (void)ctx;
  if (kind == ADR_VALIDATION_ALLOCATION)
    adr__log(ADR_LOG_WARN, "validate", "leak: %zu bytes at %p on %s, allocated at %s", size, object,
             device->name, created_at);
  else
    adr__log(ADR_LOG_WARN, "validate", "leak: %s %p on %s, created at %s",
             kind == ADR_VALIDATION_STREAM ? "stream" : "event", object, device->name, created_at);
}

static void at_exit(void) {
  struct adr_validation_counts c = {.struct_size = sizeof(c)};
  if (adr_validation_report(log_leak, NULL, &c, NULL) == 0 &&
      (c.allocations || c.streams || c.events))
    adr__log(ADR_LOG_WARN, "validate",
             "at exit: %" PRIu64 " allocation%s (%" PRIu64 " bytes), %" PRIu64 " stream%s, %" PRIu64
             " event%s still alive",
             c.allocations, c.allocations == 1 ? "" : "s", c.allocation_bytes, c.streams,
             c.streams == 1 ? "" : "s", c.events, c.events == 1 ? "" : "s");
  /* Quarantined memory goes back to the pools before the devices go. */
  adr__validate_flush(NULL);
}
