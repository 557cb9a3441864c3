/* SPDX-License-Identifier: Apache-2.0
 *
 * Adaptors that stack on any allocation handler: statistics, a byte limit
 * and tracking of outstanding allocations (public API: adr/memory.h).
 *
 * Concurrency: statistics and the limit are lock-free (relaxed atomics; the
 * limit reserves its bytes with a compare-and-swap before calling the
 * upstream, so concurrent requests can never overshoot it). Tracking keeps
 * its records in a hash map under one mutex per adaptor: it is a debugging
 * aid, and the mutex is held only for the map operation, never across the
 * upstream call.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memory_internal.h"

enum adaptor_kind { KIND_STATS = 1, KIND_LIMIT = 2, KIND_TRACK = 3 };

struct record {
  struct adr_allocation_record r;
  struct record* next;
};

struct adaptor {
  struct adr_allocator pub; /* first: the handler applications see */
  enum adaptor_kind kind;
  const struct adr_allocator* up;
  _Atomic int64_t holds; /* devices it is installed on + adaptors over it */
  struct adr__counters counters;
  /* limit */
  uint64_t limit;
  _Atomic uint64_t used;
  /* tracking */
  pthread_mutex_t lock;
  struct record** buckets;
  size_t nbuckets, nrecords;
  struct adaptor* next_tracking; /* list of live tracking adaptors */
  struct adaptor* prev_tracking;
};

static _Thread_local char thread_tag[32];

static pthread_mutex_t tracking_list_lock = PTHREAD_MUTEX_INITIALIZER;
static struct adaptor* tracking_list;

void adr_memory_tag_set(const char* tag) {
  if (tag == NULL)
    thread_tag[0] = '\0';
  else
    snprintf(thread_tag, sizeof(thread_tag), "%s", tag);
}

static int up_trim(struct adaptor* a, struct adr_device* dev, size_t* out_released,
                   struct adr_error* error) {
  const struct adr_allocator* up = a->up;
  if (up->struct_size < offsetof(struct adr_allocator, trim) + sizeof(up->trim) || up->trim == NULL)
    return 0;
  return up->trim(up->ctx, dev, out_released, error);
}

/* ---- statistics ---------------------------------------------------------- */

static int stats_alloc(void* ctx, struct adr_device* dev, size_t size, size_t alignment,
                       struct adr_stream* stream, void** out, struct adr_error* error) {
  struct adaptor* a = ctx;
  int st = a->up->alloc(a->up->ctx, dev, size, alignment, stream, out, error);
  if (st == 0) adr__counters_add(&a->counters, size);
  return st;
}

static int stats_free(void* ctx, struct adr_device* dev, void* ptr, size_t size,
                      struct adr_stream* stream, struct adr_error* error) {
  struct adaptor* a = ctx;
  int st = a->up->free(a->up->ctx, dev, ptr, size, stream, error);
  if (st == 0) adr__counters_sub(&a->counters, size);
  return st;
}

static int stats_trim(void* ctx, struct adr_device* dev, size_t* out_released,
                      struct adr_error* error) {
  return up_trim(ctx, dev, out_released, error);
}

/* ---- limit --------------------------------------------------------------- */

static int limit_alloc(void* ctx, struct adr_device* dev, size_t size, size_t alignment,
                       struct adr_stream* stream, void** out, struct adr_error* error) {
  struct adaptor* a = ctx;
  uint64_t used = atomic_load_explicit(&a->used, memory_order_relaxed);
  do {
    if (size > a->limit || used > a->limit - size) {
      char rq[32], us[32], li[32];
      return adr__errorf(
          error, ENOMEM, "adr_alloc", "limit",
          "ENOMEM: %s requested on %s, %s in use in %llu allocations, limit %s (%llu bytes)",
          adr__format_bytes(size, rq, sizeof(rq)), dev->name,
          adr__format_bytes(used, us, sizeof(us)),
          (unsigned long long)atomic_load_explicit(&a->counters.count, memory_order_relaxed),
          adr__format_bytes(a->limit, li, sizeof(li)), (unsigned long long)a->limit);
    }
  } while (!atomic_compare_exchange_weak_explicit(&a->used, &used, used + size,
                                                  memory_order_relaxed, memory_order_relaxed));
  int st = a->up->alloc(a->up->ctx, dev, size, alignment, stream, out, error);
  if (st == 0)
    adr__counters_add(&a->counters, size);
  else
    atomic_fetch_sub_explicit(&a->used, size, memory_order_relaxed);
  return st;
}

static int limit_free(void* ctx, struct adr_device* dev, void* ptr, size_t size,
                      struct adr_stream* stream, struct adr_error* error) {
  struct adaptor* a = ctx;
  int st = a->up->free(a->up->ctx, dev, ptr, size, stream, error);
  if (st == 0) {
    adr__counters_sub(&a->counters, size);
    atomic_fetch_sub_explicit(&a->used, size, memory_order_relaxed);
  }
  return st;
}

/* ---- tracking ------------------------------------------------------------ */

static size_t record_hash(const void* ptr, const struct adr_device* dev) {
  uint64_t h =
      ((uint64_t)(uintptr_t)ptr ^ ((uint64_t)(uintptr_t)dev << 17)) * UINT64_C(0x9E3779B97F4A7C15);
  return (size_t)(h >> 24);
}

static int track_insert(struct adaptor* a, struct record* rec) {
  if (a->nrecords >= a->nbuckets) {
    size_t ncap = a->nbuckets ? a->nbuckets * 2 : 64;
    struct record** nb = calloc(ncap, sizeof(*nb));
    if (nb == NULL) return ENOMEM;
    for (size_t i = 0; i < a->nbuckets; i++)
      for (struct record *e = a->buckets[i], *nx; e != NULL; e = nx) {
        nx = e->next;
        size_t k = record_hash(e->r.ptr, e->r.device) & (ncap - 1);
        e->next = nb[k];
        nb[k] = e;
      }
    free(a->buckets);
    a->buckets = nb;
    a->nbuckets = ncap;
  }
  size_t k = record_hash(rec->r.ptr, rec->r.device) & (a->nbuckets - 1);
  rec->next = a->buckets[k];
  a->buckets[k] = rec;
  a->nrecords++;
  return 0;
}

static struct record* track_remove(struct adaptor* a, void* ptr, struct adr_device* dev) {
  if (a->nbuckets == 0) return NULL;
  struct record** pp = &a->buckets[record_hash(ptr, dev) & (a->nbuckets - 1)];
  for (; *pp != NULL; pp = &(*pp)->next)
    if ((*pp)->r.ptr == ptr && (*pp)->r.device == dev) {
      struct record* rec = *pp;
      *pp = rec->next;
      a->nrecords--;
      return rec;
    }
  return NULL;
}

static int track_alloc(void* ctx, struct adr_device* dev, size_t size, size_t alignment,
                       struct adr_stream* stream, void** out, struct adr_error* error) {
  struct adaptor* a = ctx;
  struct record* rec = malloc(sizeof(*rec));
  if (rec == NULL)
    return adr__errorf(error, ENOMEM, "adr_alloc", "tracking", "ENOMEM: out of host memory");
  int st = a->up->alloc(a->up->ctx, dev, size, alignment, stream, out, error);
  if (st != 0) {
    free(rec);
    return st;
  }
  rec->r.ptr = *out;
  rec->r.size = size;
  rec->r.device = dev;
  rec->r.stream = stream;
  memcpy(rec->r.tag, thread_tag, sizeof(rec->r.tag));
  pthread_mutex_lock(&a->lock);
  st = track_insert(a, rec);
  pthread_mutex_unlock(&a->lock);
  if (st != 0) {
    free(rec);
    a->up->free(a->up->ctx, dev, *out, size, stream, NULL);
    return adr__errorf(error, ENOMEM, "adr_alloc", "tracking", "ENOMEM: out of host memory");
  }
  adr__counters_add(&a->counters, size);
  return 0;
}

static int track_free(void* ctx, struct adr_device* dev, void* ptr, size_t size,
                      struct adr_stream* stream, struct adr_error* error) {
  struct adaptor* a = ctx;
  /* Unrecord first: once the upstream has it back, another thread may be
   * handed the same address and record it. */
  pthread_mutex_lock(&a->lock);
  struct record* rec = track_remove(a, ptr, dev);
  pthread_mutex_unlock(&a->lock);
  if (rec == NULL)
    return adr__errorf(error, EINVAL, "adr_free", "tracking",
                       "%p was not allocated on %s through this tracking adaptor", ptr, dev->name);
  if (rec->r.size != size) {
    pthread_mutex_lock(&a->lock);
    track_insert(a, rec); /* the bucket array holds it: cannot fail */
    pthread_mutex_unlock(&a->lock);
    return adr__errorf(error, EINVAL, "adr_free", "tracking",
                       "%p was allocated with size %zu, freed with size %zu", ptr, rec->r.size,
                       size);
  }
  int st = a->up->free(a->up->ctx, dev, ptr, size, stream, error);
  if (st != 0) {
    pthread_mutex_lock(&a->lock);
    track_insert(a, rec);
    pthread_mutex_unlock(&a->lock);
    return st;
  }
  free(rec);
  adr__counters_sub(&a->counters, size);
  return 0;
}

/* ---- common -------------------------------------------------------------- */

bool adr__adaptor_is(const struct adr_allocator* h) {
  return h != NULL &&
         (h->alloc == stats_alloc || h->alloc == limit_alloc || h->alloc == track_alloc);
}

void adr__adaptor_hold(const struct adr_allocator* h, int delta) {
  if (!adr__adaptor_is(h)) return;
  struct adaptor* a = (struct adaptor*)h->ctx;
  atomic_fetch_add_explicit(&a->holds, delta, memory_order_acq_rel);
}

static int create(enum adaptor_kind kind, const char* op, const struct adr_allocator* upstream,
                  struct adr_allocator** out, struct adr_error* error) {
  if (out == NULL) return adr__errorf(error, EINVAL, op, NULL, "out is NULL");
  int st = adr__allocator_check(op, upstream, error);
  if (st) return st;
  struct adaptor* a = calloc(1, sizeof(*a));
  if (a == NULL) return adr__errorf(error, ENOMEM, op, NULL, "out of host memory");
  a->kind = kind;
  a->up = upstream;
  a->pub.struct_size = sizeof(a->pub);
  a->pub.version = ADR_ALLOCATOR_VERSION;
  a->pub.ctx = a;
  a->pub.trim = stats_trim; /* forwards to the upstream for every kind */
  switch (kind) {
    case KIND_STATS:
      a->pub.name = "stats";
      a->pub.alloc = stats_alloc;
      a->pub.free = stats_free;
      break;
    case KIND_LIMIT:
      a->pub.name = "limit";
      a->pub.alloc = limit_alloc;
      a->pub.free = limit_free;
      break;
    case KIND_TRACK:
      a->pub.name = "tracking";
      a->pub.alloc = track_alloc;
      a->pub.free = track_free;
      pthread_mutex_init(&a->lock, NULL);
      pthread_mutex_lock(&tracking_list_lock);
      a->next_tracking = tracking_list;
      if (tracking_list) tracking_list->prev_tracking = a;
      tracking_list = a;
      pthread_mutex_unlock(&tracking_list_lock);
      break;
  }
  adr__adaptor_hold(upstream, +1);
  *out = &a->pub;
  return 0;
}

int adr_allocator_stats_create(const struct adr_allocator* upstream, struct adr_allocator** out,
                               struct adr_error* error) {
  return create(KIND_STATS, "adr_allocator_stats_create", upstream, out, error);
}

int adr_allocator_limit_create(const struct adr_allocator* upstream, uint64_t limit,
                               struct adr_allocator** out, struct adr_error* error) {
  int st = create(KIND_LIMIT, "adr_allocator_limit_create", upstream, out, error);
  if (st == 0) ((struct adaptor*)(*out)->ctx)->limit = limit;
  return st;
}

int adr_allocator_tracking_create(const struct adr_allocator* upstream, struct adr_allocator** out,
                                  struct adr_error* error) {
  return create(KIND_TRACK, "adr_allocator_tracking_create", upstream, out, error);
}

static struct adaptor* adaptor_of(const char* op, const struct adr_allocator* h,
                                  enum adaptor_kind kind, struct adr_error* error, int* st) {
  if (!adr__adaptor_is(h) || (kind != 0 && ((struct adaptor*)h->ctx)->kind != kind)) {
    *st = adr__errorf(error, EINVAL, op, NULL, "handler '%s' is not %s",
                      h && h->name ? h->name : "NULL",
                      kind == KIND_STATS   ? "a statistics adaptor"
                      : kind == KIND_TRACK ? "a tracking adaptor"
                                           : "an adaptor made by adr_allocator_*_create");
    return NULL;
  }
  *st = 0;
  return h->ctx;
}

int adr_allocator_stats_get(const struct adr_allocator* stats_adaptor, struct adr_memory_stats* out,
                            struct adr_error* error) {
  int st;
  struct adaptor* a = adaptor_of("adr_allocator_stats_get", stats_adaptor, KIND_STATS, error, &st);
  if (a == NULL) return st;
  if (out == NULL || out->struct_size < offsetof(struct adr_memory_stats, reserved))
    return adr__errorf(error, EINVAL, "adr_allocator_stats_get", NULL,
                       "out is NULL or its struct_size is too small");
  struct adr_memory_stats s;
  memset(&s, 0, sizeof(s));
  s.struct_size = out->struct_size < sizeof(s) ? out->struct_size : (uint32_t)sizeof(s);
  adr__counters_read(&a->counters, &s);
  memcpy(out, &s, s.struct_size);
  return 0;
}

int adr_allocator_tracking_list(const struct adr_allocator* tracking_adaptor, adr_allocation_fn fn,
                                void* ctx, size_t* out_count, struct adr_error* error) {
  int st;
  struct adaptor* a =
      adaptor_of("adr_allocator_tracking_list", tracking_adaptor, KIND_TRACK, error, &st);
  if (a == NULL) return st;
  pthread_mutex_lock(&a->lock);
  size_t n = 0;
  for (size_t i = 0; i < a->nbuckets; i++)
    for (struct record* e = a->buckets[i]; e != NULL; e = e->next, n++)
      if (fn != NULL) fn(ctx, &e->r);
  pthread_mutex_unlock(&a->lock);
  if (out_count != NULL) *out_count = n;
  return 0;
}

static void destroy_now(struct adaptor* a) {
  adr__adaptor_hold(a->up, -1);
  if (a->kind == KIND_TRACK) {
    pthread_mutex_lock(&tracking_list_lock);
    if (a->prev_tracking)
      a->prev_tracking->next_tracking = a->next_tracking;
    else
      tracking_list = a->next_tracking;
    if (a->next_tracking) a->next_tracking->prev_tracking = a->prev_tracking;
    pthread_mutex_unlock(&tracking_list_lock);
    for (size_t i = 0; i < a->nbuckets; i++)
      for (struct record *e = a->buckets[i], *nx; e != NULL; e = nx) {
        nx = e->next;
        free(e);
      }
    free(a->buckets);
    pthread_mutex_destroy(&a->lock);
  }
  free(a);
}

int adr_allocator_destroy(struct adr_allocator* adaptor, struct adr_error* error) {
  int st;
  struct adaptor* a = adaptor_of("adr_allocator_destroy", adaptor, 0, error, &st);
  if (a == NULL) return st;
  int64_t holds = atomic_load_explicit(&a->holds, memory_order_acquire);
  if (holds > 0)
    return adr__errorf(error, EBUSY, "adr_allocator_destroy", NULL,
                       "adaptor '%s' is still installed on a device or stacked under another "
                       "adaptor (%lld holder%s)",
                       a->pub.name, (long long)holds, holds == 1 ? "" : "s");
  uint64_t live = atomic_load_explicit(&a->counters.count, memory_order_acquire);
  if (live > 0) {
    char b[32];
    return adr__errorf(
        error, EBUSY, "adr_allocator_destroy", NULL,
        "adaptor '%s' has %llu allocation%s outstanding (%s); free them first", a->pub.name,
        (unsigned long long)live, live == 1 ? "" : "s",
        adr__format_bytes(atomic_load_explicit(&a->counters.bytes, memory_order_relaxed), b,
                          sizeof(b)));
  }
  destroy_now(a);
  return 0;
}

void adr__adaptor_destroy_force(struct adr_allocator* adaptor) {
  if (adr__adaptor_is(adaptor)) destroy_now(adaptor->ctx);
}

static void log_record(void* ctx, const struct adr_allocation_record* r) {
  (void)ctx;
  adr__log(ADR_LOG_DEBUG, r->device ? r->device->name : "?",
           "leak: %zu bytes at %p (stream %p%s%s)", r->size, r->ptr, (void*)r->stream,
           r->tag[0] ? ", tag " : "", r->tag);
}

/* At exit, with ADR_LOG=debug: every allocation a tracking adaptor still
 * holds is a leak. The adaptors themselves are the application's. */
__attribute__((destructor)) static void report_leaks_at_exit(void) {
  if (adr__log_level() < ADR_LOG_DEBUG) return;
  pthread_mutex_lock(&tracking_list_lock);
  for (struct adaptor* a = tracking_list; a != NULL; a = a->next_tracking)
    adr_allocator_tracking_list(&a->pub, log_record, NULL, NULL, NULL);
  pthread_mutex_unlock(&tracking_list_lock);
}
