/* SPDX-License-Identifier: Apache-2.0
 *
 * Per-device memory state: the current allocation handler, the built-in
 * pool and plain backend handlers, the out-of-memory chain, statistics,
 * trim and OOM callbacks (public API: adr/memory.h).
 *
 * Concurrency: the state is created with the device (registry lock held)
 * and lives as long as the device. The hot path reads the handler pointer
 * with one atomic load; the current and peak allocated bytes and count are
 * kept in the allocation table (alloc_table.c, "live figures"); the pool has
 * its own per-arena locks (pool.c). The OOM callback list is under a
 * rwlock, taken only on the out-of-memory path and to change the list.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "memory_internal.h"

#define OOM_MAX_ATTEMPTS 64

/* ---- the plain backend handler ------------------------------------------ */

static struct adr_backend_stream* backend_stream(struct adr_device* dev,
                                                 struct adr_stream* stream) {
  return stream ? stream->handle : dev->default_stream.handle;
}

static int backend_alloc(void* ctx, struct adr_device* dev, size_t size, size_t alignment,
                         struct adr_stream* stream, void** out, struct adr_error* error) {
  (void)ctx;
  int st = adr__dispatch_alloc(dev, "adr_alloc", size, alignment, backend_stream(dev, stream), out,
                               error);
  /* A NULL stream promises memory usable at once, everywhere. */
  if (st == 0 && stream == NULL && dev->memory != NULL && dev->memory->stream_ordered_alloc) {
    st = adr__dispatch_stream_synchronize(dev, "adr_alloc", dev->default_stream.handle, error);
    if (st != 0) adr__dispatch_free(dev, "adr_alloc", *out, size, dev->default_stream.handle, NULL);
  }
  return st;
}

static int backend_free(void* ctx, struct adr_device* dev, void* ptr, size_t size,
                        struct adr_stream* stream, struct adr_error* error) {
  (void)ctx;
  return adr__dispatch_free(dev, "adr_free", ptr, size, backend_stream(dev, stream), error);
}

static const struct adr_allocator backend_handler = {
    .struct_size = sizeof(struct adr_allocator),
    .version = ADR_ALLOCATOR_VERSION,
    .name = "backend",
    .alloc = backend_alloc,
    .free = backend_free,
};

const struct adr_allocator* adr_allocator_backend(void) {
  return &backend_handler;
}

/* ---- the pool handler ---------------------------------------------------- */

static int pool_missing(struct adr_device* dev, struct adr_error* error) {
  return adr__errorf(error, ENOMEM, "adr_alloc", dev->backend->name,
                     "ENOMEM: the pool of %s could not be created (out of host memory)", dev->name);
}

static int pool_alloc(void* ctx, struct adr_device* dev, size_t size, size_t alignment,
                      struct adr_stream* stream, void** out, struct adr_error* error) {
  (void)ctx;
  struct adr__device_memory* m = dev->memory;
  if (m == NULL || m->pool == NULL) return pool_missing(dev, error);
  return adr__pool_alloc(m->pool, size, alignment, stream, out, error);
}

static int pool_free(void* ctx, struct adr_device* dev, void* ptr, size_t size,
                     struct adr_stream* stream, struct adr_error* error) {
  (void)ctx;
  struct adr__device_memory* m = dev->memory;
  if (m == NULL || m->pool == NULL) return pool_missing(dev, error);
  return adr__pool_free(m->pool, ptr, size, stream, error);
}

static int pool_trim(void* ctx, struct adr_device* dev, size_t* out_released,
                     struct adr_error* error) {
  (void)ctx;
  (void)error;
  struct adr__device_memory* m = dev->memory;
  if (m != NULL && m->pool != NULL) *out_released += adr__pool_trim(m->pool, false);
  return 0;
}

static const struct adr_allocator pool_handler = {
    .struct_size = sizeof(struct adr_allocator),
    .version = ADR_ALLOCATOR_VERSION,
    .name = "pool",
    .alloc = pool_alloc,
    .free = pool_free,
    .trim = pool_trim,
};

const struct adr_allocator* adr_allocator_pool(void) {
  return &pool_handler;
}

/* The pool's view of the device: chunks from the backend, events on the
 * device's streams (stream keys are struct adr_stream pointers). */
static int up_alloc(void* ctx, size_t size, size_t alignment, void** out, struct adr_error* error) {
  return backend_alloc(NULL, ctx, size, alignment, NULL, out, error);
}
static void up_free(void* ctx, void* ptr, size_t size) {
  backend_free(NULL, ctx, ptr, size, NULL, NULL);
}
static void up_placed(void* ctx, void* ptr, size_t size, unsigned arena) {
  struct adr_device* dev = ctx;
  adr__alloc_table_assign(dev->allocs, ptr, size, arena);
}
/* The pool's event calls. A failure is not the application's: the pool
 * falls back to not reusing the block (pool.h), so it is returned to the
 * pool as before and logged here as a warning with the backend's message,
 * "[pool][backend] NATIVE: description". */
static int ev_failed(struct adr_device* dev, int st, const struct adr_error* e) {
  if (st != 0)
    adr__log(ADR_LOG_WARN, dev->name, "%s (the pool does not reuse the blocks it covers)",
             e->message);
  return st;
}
static int ev_create(void* ctx, void** out) {
  struct adr_device* dev = ctx;
  struct adr_error e;
  e.message[0] = '\0'; /* not the whole 1 KiB: these run per pool event */
  return ev_failed(
      dev, adr__dispatch_event_create(dev, "pool", (struct adr_backend_event**)out, &e), &e);
}
static void ev_destroy(void* ctx, void* ev) {
  struct adr_device* dev = ctx;
  struct adr_error e;
  e.message[0] = '\0';
  ev_failed(dev, adr__dispatch_event_destroy(dev, "pool", ev, &e), &e);
}
static int ev_record(void* ctx, void* ev, void* stream) {
  struct adr_device* dev = ctx;
  struct adr_error e;
  e.message[0] = '\0';
  return ev_failed(
      dev, adr__dispatch_event_record(dev, "pool", ev, ((struct adr_stream*)stream)->handle, &e),
      &e);
}
static int ev_wait(void* ctx, void* ev, void* stream) {
  struct adr_device* dev = ctx;
  struct adr_error e;
  e.message[0] = '\0';
  return ev_failed(
      dev, adr__dispatch_event_wait(dev, "pool", ev, ((struct adr_stream*)stream)->handle, &e), &e);
}
static int ev_query(void* ctx, void* ev) {
  struct adr_device* dev = ctx;
  struct adr_error e;
  e.message[0] = '\0';
  int st = adr__dispatch_event_query(dev, "pool", ev, &e);
  return st == EBUSY ? st : ev_failed(dev, st, &e);
}
static int ev_sync(void* ctx, void* ev) {
  struct adr_device* dev = ctx;
  struct adr_error e;
  e.message[0] = '\0';
  return ev_failed(dev, adr__dispatch_event_synchronize(dev, "pool", ev, &e), &e);
}

/* ---- handler checks and selection ---------------------------------------- */

int adr__allocator_check(const char* op, const struct adr_allocator* h, struct adr_error* error) {
  if (h == NULL) return adr__errorf(error, EINVAL, op, NULL, "handler is NULL");
  if (h->struct_size < offsetof(struct adr_allocator, trim))
    return adr__errorf(
        error, EINVAL, op, NULL, "handler '%s': struct_size %u is smaller than ABI version 1's %zu",
        h->struct_size >= offsetof(struct adr_allocator, ctx) && h->name ? h->name : "?",
        h->struct_size, offsetof(struct adr_allocator, trim));
  if (h->version != ADR_ALLOCATOR_VERSION)
    return adr__errorf(error, EINVAL, op, NULL, "handler '%s': unknown version %u (expected %d)",
                       h->name ? h->name : "?", h->version, ADR_ALLOCATOR_VERSION);
  if (h->alloc == NULL || h->free == NULL)
    return adr__errorf(error, EINVAL, op, NULL, "handler '%s' has no %s function",
                       h->name ? h->name : "?", h->alloc == NULL ? "alloc" : "free");
  return 0;
}

static int (*handler_trim(const struct adr_allocator* h))(void*, struct adr_device*, size_t*,
                                                          struct adr_error*) {
  if (h->struct_size < offsetof(struct adr_allocator, trim) + sizeof(h->trim)) return NULL;
  return h->trim;
}

static struct adr__device_memory* state_of(const char* op, struct adr_device* dev,
                                           struct adr_error* error, int* status) {
  if (dev == NULL) {
    *status = adr__errorf(error, EINVAL, op, NULL, "device is NULL");
    return NULL;
  }
  if (adr__shut_down()) {
    *status = adr__shutdown_error(error, op, dev);
    return NULL;
  }
  if (dev->memory == NULL) {
    *status =
        adr__errorf(error, ENOMEM, op, dev->backend->name,
                    "ENOMEM: no memory state for %s (out of host memory at creation)", dev->name);
    return NULL;
  }
  *status = 0;
  return dev->memory;
}

int adr_allocator_set(struct adr_device* device, const struct adr_allocator* handler,
                      const struct adr_allocator** out_previous, struct adr_error* error) {
  int st;
  struct adr__device_memory* m = state_of("adr_allocator_set", device, error, &st);
  if (m == NULL) return st;
  st = adr__allocator_check("adr_allocator_set", handler, error);
  if (st) return st;
  adr__adaptor_hold(handler, +1);
  const struct adr_allocator* old =
      atomic_exchange_explicit(&m->handler, handler, memory_order_acq_rel);
  adr__adaptor_hold(old, -1);
  if (out_previous != NULL) *out_previous = old;
  adr__log(ADR_LOG_DEBUG, device->name, "allocation handler '%s' replaces '%s'",
           handler->name ? handler->name : "?", old && old->name ? old->name : "?");
  return 0;
}

const struct adr_allocator* adr_allocator_get(struct adr_device* device) {
  if (device == NULL || device->memory == NULL) return NULL;
  return atomic_load_explicit(&device->memory->handler, memory_order_acquire);
}

/* ---- the out-of-memory chain --------------------------------------------- */

/* The out-of-memory path's cache release. With stream-ordered backend
 * allocation (cuMemFreeAsync ...) the memory given back returns to the
 * driver only when the default stream reaches the free: wait for it here,
 * the one place a host wait is acceptable. Returns whether a retry may
 * find more memory. */
static bool release_cache(struct adr_device* dev, const struct adr_allocator* h, bool wait) {
  struct adr__device_memory* m = dev->memory;
  size_t released = 0;
  if (m->pool != NULL) released += adr__pool_trim(m->pool, wait);
  int (*trim)(void*, struct adr_device*, size_t*, struct adr_error*) = handler_trim(h);
  if (trim != NULL && h != &pool_handler) trim(h->ctx, dev, &released, NULL);
  bool synced = false;
  if (wait && m->stream_ordered_alloc)
    synced =
        adr__dispatch_stream_synchronize(dev, "adr_alloc", dev->default_stream.handle, NULL) == 0;
  return released != 0 || synced;
}

/* One attempt. The built-in pool is called directly when the caller can
 * keep the block handle (no address-map lookup on the way back). */
static int try_alloc(struct adr_device* dev, const struct adr_allocator* h, size_t size,
                     size_t alignment, struct adr_stream* stream, void** out, void** out_cookie,
                     struct adr_error* e) {
  if (h == &pool_handler && out_cookie != NULL && dev->memory->pool != NULL)
    return adr__pool_alloc_block(dev->memory->pool, size, alignment, stream, out, out_cookie, e);
  return h->alloc(h->ctx, dev, size, alignment, stream, out, e);
}

/* A failure's message goes to the caller; a success leaves it alone. */
static int keep_error(int st, const struct adr_error* local, struct adr_error* error) {
  if (st != 0 && error != NULL) *error = *local;
  return st;
}

int adr__memory_alloc(struct adr_device* dev, const struct adr_allocator* h, size_t size,
                      size_t alignment, struct adr_stream* stream, void** out, void** out_cookie,
                      struct adr_error* error) {
  struct adr__device_memory* m = dev->memory;
  /* Attempts write here, the caller's error only on the final failure: a
   * retry that succeeds must leave it untouched (found by the fault sweep). */
  struct adr_error local; /* only the first byte: zeroing 1 KiB per call cost a third of it */
  local.message[0] = '\0';
  struct adr_error* e = &local;
  if (out_cookie != NULL) *out_cookie = NULL;
  int st = try_alloc(dev, h, size, alignment, stream, out, out_cookie, e);
  if (st != ENOMEM) return keep_error(st, &local, error);

  if (release_cache(dev, h, true)) {
    atomic_fetch_add_explicit(&m->oom_retries, 1, memory_order_relaxed);
    st = try_alloc(dev, h, size, alignment, stream, out, out_cookie, e);
    if (st != ENOMEM) return keep_error(st, &local, error);
  }
  for (uint32_t attempt = 0; attempt < OOM_MAX_ATTEMPTS; attempt++) {
    bool progress = false;
    pthread_rwlock_rdlock(&m->oom_lock);
    for (size_t i = 0; i < m->oom_count; i++)
      if (m->oom[i].fn(m->oom[i].ctx, dev, size, attempt) != 0) progress = true;
    pthread_rwlock_unlock(&m->oom_lock);
    if (!progress) break;
    /* What the callbacks freed may sit in the pool: hand it back first. */
    release_cache(dev, h, true);
    atomic_fetch_add_explicit(&m->oom_retries, 1, memory_order_relaxed);
    st = try_alloc(dev, h, size, alignment, stream, out, out_cookie, e);
    if (st != ENOMEM) return keep_error(st, &local, error);
  }
  atomic_fetch_add_explicit(&m->oom_failures, 1, memory_order_relaxed);
  if (error != NULL) {
    char inner[sizeof(error->message)];
    snprintf(inner, sizeof(inner), "%s", local.message);
    struct adr_memory_stats stats;
    stats.struct_size = sizeof(stats);
    adr_memory_stats_get(dev, &stats, NULL);
    char line[512], sz[32];
    adr_memory_stats_format(&stats, line, sizeof(line));
    /* No "[op][backend]" here: adr_alloc adds it (adr__error_context). */
    snprintf(error->message, sizeof(error->message),
             "ENOMEM: cannot allocate %s on %s through handler '%s' (%.400s); %s",
             adr__format_bytes(size, sz, sizeof(sz)), dev->name, h->name ? h->name : "?", inner,
             line);
  }
  return ENOMEM;
}

int adr__memory_free(struct adr_device* dev, const struct adr_allocator* h, void* ptr, size_t size,
                     struct adr_stream* stream, void* cookie, struct adr_error* error) {
  if (cookie != NULL) return adr__pool_free_block(dev->memory->pool, cookie, size, stream, error);
  return h->free(h->ctx, dev, ptr, size, stream, error);
}

int adr_oom_callback_add(struct adr_device* device, adr_oom_fn fn, void* ctx,
                         struct adr_error* error) {
  int st;
  struct adr__device_memory* m = state_of("adr_oom_callback_add", device, error, &st);
  if (m == NULL) return st;
  if (fn == NULL) return adr__errorf(error, EINVAL, "adr_oom_callback_add", NULL, "fn is NULL");
  pthread_rwlock_wrlock(&m->oom_lock);
  for (size_t i = 0; i < m->oom_count; i++)
    if (m->oom[i].fn == fn && m->oom[i].ctx == ctx) {
      pthread_rwlock_unlock(&m->oom_lock);
      return adr__errorf(error, EEXIST, "adr_oom_callback_add", device->backend->name,
                         "this callback and context are registered on %s already", device->name);
    }
  if (m->oom_count == m->oom_cap) {
    size_t ncap = m->oom_cap ? m->oom_cap * 2 : 4;
    struct adr__oom_entry* n = realloc(m->oom, ncap * sizeof(*n));
    if (n == NULL) {
      pthread_rwlock_unlock(&m->oom_lock);
      return adr__errorf(error, ENOMEM, "adr_oom_callback_add", device->backend->name,
                         "out of host memory");
    }
    m->oom = n;
    m->oom_cap = ncap;
  }
  m->oom[m->oom_count++] = (struct adr__oom_entry){fn, ctx};
  pthread_rwlock_unlock(&m->oom_lock);
  return 0;
}

int adr_oom_callback_remove(struct adr_device* device, adr_oom_fn fn, void* ctx,
                            struct adr_error* error) {
  int st;
  struct adr__device_memory* m = state_of("adr_oom_callback_remove", device, error, &st);
  if (m == NULL) return st;
  pthread_rwlock_wrlock(&m->oom_lock);
  for (size_t i = 0; i < m->oom_count; i++)
    if (m->oom[i].fn == fn && m->oom[i].ctx == ctx) {
      memmove(&m->oom[i], &m->oom[i + 1], (m->oom_count - i - 1) * sizeof(m->oom[0]));
      m->oom_count--;
      pthread_rwlock_unlock(&m->oom_lock);
      return 0;
    }
  pthread_rwlock_unlock(&m->oom_lock);
  return adr__errorf(error, ENOENT, "adr_oom_callback_remove", device->backend->name,
                     "this callback and context are not registered on %s", device->name);
}

/* ---- statistics and trim ------------------------------------------------- */

void adr__counters_read(struct adr__counters* c, struct adr_memory_stats* out) {
  out->allocated_bytes.current = atomic_load_explicit(&c->bytes, memory_order_relaxed);
  out->allocated_bytes.peak = atomic_load_explicit(&c->bytes_peak, memory_order_relaxed);
  out->allocated_bytes.total = atomic_load_explicit(&c->bytes_total, memory_order_relaxed);
  out->allocated_count.current = atomic_load_explicit(&c->count, memory_order_relaxed);
  out->allocated_count.peak = atomic_load_explicit(&c->count_peak, memory_order_relaxed);
  out->allocated_count.total = atomic_load_explicit(&c->count_total, memory_order_relaxed);
  /* A reader racing an allocation can see the new current before the new
   * peak; a peak is never below its current. */
  if (out->allocated_bytes.peak < out->allocated_bytes.current)
    out->allocated_bytes.peak = out->allocated_bytes.current;
  if (out->allocated_count.peak < out->allocated_count.current)
    out->allocated_count.peak = out->allocated_count.current;
}

int adr_memory_stats_get(struct adr_device* device, struct adr_memory_stats* out,
                         struct adr_error* error) {
  int st;
  if (out == NULL) return adr__errorf(error, EINVAL, "adr_memory_stats_get", NULL, "out is NULL");
  if (out->struct_size < offsetof(struct adr_memory_stats, reserved))
    return adr__errorf(error, EINVAL, "adr_memory_stats_get", NULL,
                       "out->struct_size %u is too small (set it to sizeof(struct "
                       "adr_memory_stats))",
                       out->struct_size);
  struct adr__device_memory* m = state_of("adr_memory_stats_get", device, error, &st);
  if (m == NULL) return st;
  struct adr_memory_stats s;
  memset(&s, 0, sizeof(s));
  s.struct_size = out->struct_size < sizeof(s) ? out->struct_size : (uint32_t)sizeof(s);
  struct adr__live_figures live;
  adr__alloc_table_live(device->allocs, &live);
  s.allocated_bytes.current = live.bytes;
  s.allocated_bytes.peak = live.bytes_peak;
  s.allocated_count.current = live.count;
  s.allocated_count.peak = live.count_peak;
  adr__alloc_table_totals(device->allocs, &s.allocated_bytes.total, &s.allocated_count.total);
  if (m->pool != NULL) {
    struct adr__pool_stats p;
    adr__pool_stats_get(m->pool, &p);
    s.reserved_bytes = (struct adr_memory_counter){p.reserved_bytes, p.reserved_bytes_peak,
                                                   p.reserved_bytes_total};
    s.reserved_count = (struct adr_memory_counter){p.reserved_count, p.reserved_count_peak,
                                                   p.reserved_count_total};
    s.cached_bytes = p.cached_bytes;
    s.largest_free_block = p.largest_free_block;
    s.cache_hits = p.cache_hits;
    s.cache_misses = p.cache_misses;
    s.stream_waits = p.stream_waits;
    s.trimmed_bytes = p.trimmed_bytes;
    s.max_cached = p.max_cached;
    s.host_pages = p.host_pages;
    s.thread_cache = p.thread_cache;
  }
  s.oom_retries = atomic_load_explicit(&m->oom_retries, memory_order_relaxed);
  s.oom_failures = atomic_load_explicit(&m->oom_failures, memory_order_relaxed);
  memcpy(out, &s, s.struct_size);
  return 0;
}

int adr_memory_stats_reset_peaks(struct adr_device* device, struct adr_error* error) {
  int st;
  struct adr__device_memory* m = state_of("adr_memory_stats_reset_peaks", device, error, &st);
  if (m == NULL) return st;
  adr__alloc_table_live_reset_peaks(device->allocs);
  if (m->pool != NULL) adr__pool_stats_reset_peaks(m->pool);
  return 0;
}

const char* adr_memory_stats_format(const struct adr_memory_stats* s, char* buf, size_t size) {
  if (buf == NULL || size == 0) return buf;
  if (s == NULL) {
    snprintf(buf, size, "(no statistics)");
    return buf;
  }
  char a[32], ap[32], r[32], rp[32], c[32], l[32], m[48] = "", hp[96] = "", tc[48] = "";
  if (s->max_cached == UINT64_MAX) {
    snprintf(m, sizeof(m), " (no cap)");
  } else if (s->max_cached != 0) {
    char cap[32];
    snprintf(m, sizeof(m), " (cap %s)", adr__format_bytes(s->max_cached, cap, sizeof(cap)));
  }
  if (s->host_pages != 0)
    snprintf(hp, sizeof(hp), ", host pages: %s%s",
             (s->host_pages & ADR_HOST_PAGES_HUGE_ALL)     ? "huge pages for every chunk"
             : (s->host_pages & ADR_HOST_PAGES_HUGE_LARGE) ? "huge pages for chunks of 4 MiB+"
                                                           : "no huge pages",
             (s->host_pages & ADR_HOST_PAGES_POPULATE) ? ", populated" : "");
  if (s->thread_cache != 0)
    snprintf(tc, sizeof(tc), ", thread cache: %s",
             s->thread_cache == ADR_THREAD_CACHE_BIASED ? "biased (membarrier)" : "locked");
  snprintf(buf, size,
           "allocated %s in %llu (peak %s in %llu), reserved %s in %llu chunk%s (peak %s), "
           "cached %s%s, largest free block %s, cache hits %llu, misses %llu, oom retries "
           "%llu%s%s",
           adr__format_bytes(s->allocated_bytes.current, a, sizeof(a)),
           (unsigned long long)s->allocated_count.current,
           adr__format_bytes(s->allocated_bytes.peak, ap, sizeof(ap)),
           (unsigned long long)s->allocated_count.peak,
           adr__format_bytes(s->reserved_bytes.current, r, sizeof(r)),
           (unsigned long long)s->reserved_count.current, s->reserved_count.current == 1 ? "" : "s",
           adr__format_bytes(s->reserved_bytes.peak, rp, sizeof(rp)),
           adr__format_bytes(s->cached_bytes, c, sizeof(c)), m,
           adr__format_bytes(s->largest_free_block, l, sizeof(l)),
           (unsigned long long)s->cache_hits, (unsigned long long)s->cache_misses,
           (unsigned long long)s->oom_retries, hp, tc);
  return buf;
}

int adr_memory_trim(struct adr_device* device, size_t* out_released, struct adr_error* error) {
  int st;
  struct adr__device_memory* m = state_of("adr_memory_trim", device, error, &st);
  if (m == NULL) return st;
  size_t released = 0;
  if (m->pool != NULL) released += adr__pool_trim(m->pool, false);
  const struct adr_allocator* h = atomic_load_explicit(&m->handler, memory_order_acquire);
  int (*trim)(void*, struct adr_device*, size_t*, struct adr_error*) = handler_trim(h);
  if (trim != NULL && h != &pool_handler) {
    st = trim(h->ctx, device, &released, error);
    if (st) return st;
  }
  if (out_released != NULL) *out_released = released;
  return 0;
}

int adr_memory_max_cached_set(struct adr_device* device, uint64_t max_cached,
                              uint64_t* out_previous, struct adr_error* error) {
  int st;
  struct adr__device_memory* m = state_of("adr_memory_max_cached_set", device, error, &st);
  if (m == NULL) return st;
  if (m->pool == NULL)
    return adr__errorf(error, ENOMEM, "adr_memory_max_cached_set", device->backend->name,
                       "ENOMEM: the pool of %s could not be created (out of host memory)",
                       device->name);
  size_t cap = max_cached >= SIZE_MAX ? SIZE_MAX : (size_t)max_cached;
  size_t prev = adr__pool_max_cached_set(m->pool, cap);
  if (out_previous != NULL) *out_previous = prev == SIZE_MAX ? UINT64_MAX : (uint64_t)prev;
  return 0;
}

/* ---- device life cycle --------------------------------------------------- */

void adr__memory_device_init(struct adr_device* dev) {
  struct adr__device_memory* m = calloc(1, sizeof(*m));
  if (m == NULL) {
    adr__log(ADR_LOG_ERROR, dev->name, "out of host memory for the memory state");
    return;
  }
  m->device = dev;
  pthread_rwlock_init(&m->oom_lock, NULL);
  const struct adr__alloc_config* cfg = adr__alloc_config();
  if (cfg->status != 0) {
    m->status = cfg->status;
    m->error = cfg->error;
  }
  struct adr_device_info info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  if (adr__dispatch_device_info(dev, "adr_device_get", &info, NULL) == 0)
    m->stream_ordered_alloc = (info.caps & ADR_CAP_STREAM_ORDERED_ALLOC) != 0;

  struct adr__pool_upstream up = {dev, up_alloc, up_free, up_placed};
  struct adr__pool_sync sync = {dev, ev_create, ev_destroy, ev_record, ev_wait, ev_query, ev_sync};
  /* The CPU device's chunks are plain host memory that only adr's own
   * (instrumented) code and the application touch: poisoned for ASan. */
  struct adr__pool_options opts = cfg->pool;
  opts.poison = dev->type == ARROW_DEVICE_CPU;
  opts.host_pages = dev->type == ARROW_DEVICE_CPU;
  if (opts.max_cached == ADR__POOL_MAX_CACHED_AUTO)
    opts.max_cached = adr__pool_default_max_cached(info.memory_total);
  if (adr__pool_create(&opts, &up, &sync, &m->pool, NULL) != 0) m->pool = NULL;

  const struct adr_allocator* h = cfg->use_pool ? &pool_handler : &backend_handler;
  size_t n = 0;
  if (cfg->has_limit && adr_allocator_limit_create(h, cfg->limit, &m->default_stack[n], NULL) == 0)
    h = m->default_stack[n++];
  if (cfg->track && adr_allocator_tracking_create(h, &m->default_stack[n], NULL) == 0)
    h = m->default_stack[n++];
  adr__adaptor_hold(h, +1);
  atomic_store_explicit(&m->handler, h, memory_order_release);
  dev->memory = m;
}

static void log_leak(void* ctx, const struct adr_allocation_record* r) {
  const char* dev = ctx;
  adr__log(ADR_LOG_DEBUG, dev, "leak: %zu bytes at %p (stream %p%s%s)", r->size, r->ptr,
           (void*)r->stream, r->tag[0] ? ", tag " : "", r->tag);
}

void adr__memory_device_teardown(struct adr_device* dev) {
  size_t live = adr__alloc_table_count(dev->allocs);
  if (live != 0)
    adr__log(ADR_LOG_DEBUG, dev->name, "%zu allocation%s still live at exit", live,
             live == 1 ? "" : "s");
  struct adr__device_memory* m = dev->memory;
  if (m == NULL) return;
  if (adr__log_level() >= ADR_LOG_DEBUG) {
    struct adr_memory_stats s;
    s.struct_size = sizeof(s);
    char line[512];
    if (adr_memory_stats_get(dev, &s, NULL) == 0)
      adr__log(ADR_LOG_DEBUG, dev->name, "memory at exit: %s",
               adr_memory_stats_format(&s, line, sizeof(line)));
    for (size_t i = 0; i < 2; i++)
      if (m->default_stack[i] != NULL)
        adr_allocator_tracking_list(m->default_stack[i], log_leak, dev->name, NULL, NULL);
  }
  const struct adr_allocator* h = atomic_exchange(&m->handler, NULL);
  adr__adaptor_hold(h, -1);
  /* The adaptors ADR_ALLOC stacked die with the device even if the
   * application still holds allocations: the process is exiting. */
  for (size_t i = 2; i-- > 0;)
    if (m->default_stack[i] != NULL) adr__adaptor_destroy_force(m->default_stack[i]);
  adr__pool_destroy(m->pool);
  pthread_rwlock_destroy(&m->oom_lock);
  free(m->oom);
  free(m);
  dev->memory = NULL;
}

void adr__memory_stream_retire(struct adr_stream* stream) {
  if (stream == NULL || stream->device == NULL || stream->device->memory == NULL) return;
  struct adr__device_memory* m = stream->device->memory;
  if (m->pool != NULL) adr__pool_stream_retire(m->pool, stream);
}
