/* SPDX-License-Identifier: Apache-2.0
 *
 * The CPU backend: the reference implementation of the plugin ABI.
 *
 * Memory is aligned host memory. The default stream is synchronous: work
 * runs on the calling thread before the call returns. A created stream owns
 * one worker thread that runs its queued tasks in order, so created streams
 * are as asynchronous as a GPU's: an event marks a point in a stream's task
 * order and completes when the worker reaches it; a stream waiting on an
 * event blocks its worker (not the caller) until then.
 *
 * Locking: each stream has a mutex guarding its queue and counters; each
 * event has a mutex guarding its recorded/completed counters; the range
 * map (for pointer_query, cpu_ranges.h: a treap, O(log n)) has its own rwlock. No lock is held
 * while a task runs and no two locks are ever held at once, so there is no lock order to get wrong.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "adr/backend.h"
#include "host.h"
#include "cpu_ranges.h"
#include "cpu_share.h"

#define CPU_NAME "cpu"

struct adr_backend_device {
  int id;
};

/* An event counts how often it was recorded and up to which recording it
 * has completed; it is complete when the two agree. Tasks that refer to it
 * hold a reference so the application may destroy it at any time. */
struct adr_backend_event {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  uint64_t recorded;
  uint64_t completed;
  atomic_int refs;
};

enum task_kind { TASK_COPY, TASK_MEMSET, TASK_FREE, TASK_UNMAP, TASK_SIGNAL, TASK_WAIT };

struct task {
  enum task_kind kind;
  struct task* next;
  void* dst;
  const void* src;
  size_t size;
  int value;
  struct adr_backend_event* event;
  uint64_t target;
};

struct adr_backend_stream {
  bool is_default;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t work; /* signalled when a task is queued or on stop */
  pthread_cond_t idle; /* signalled when the queue drains */
  struct task* head;
  struct task* tail;
  bool running; /* a task is being executed */
  bool stop;
};

static struct adr_backend_device the_device = {0};
static struct adr_backend_stream the_default_stream = {.is_default = true};

/* ---- events -------------------------------------------------------------- */

static void event_unref(struct adr_backend_event* e) {
  if (atomic_fetch_sub(&e->refs, 1) == 1) {
    pthread_mutex_destroy(&e->lock);
    pthread_cond_destroy(&e->cond);
    free(e);
  }
}

static void event_complete_up_to(struct adr_backend_event* e, uint64_t target) {
  pthread_mutex_lock(&e->lock);
  if (e->completed < target) e->completed = target;
  pthread_cond_broadcast(&e->cond);
  pthread_mutex_unlock(&e->lock);
}

static void event_wait_for(struct adr_backend_event* e, uint64_t target) {
  pthread_mutex_lock(&e->lock);
  while (e->completed < target) pthread_cond_wait(&e->cond, &e->lock);
  pthread_mutex_unlock(&e->lock);
}

/* ---- tasks and workers -------------------------------------------------- */

static void run_task(struct task* t) {
  switch (t->kind) {
    case TASK_COPY:
      memmove(t->dst, t->src, t->size);
      break;
    case TASK_MEMSET:
      memset(t->dst, t->value, t->size);
      break;
    case TASK_FREE:
      free(t->dst);
      break;
    case TASK_UNMAP: /* shareable memory (cpu_share.c) */
      munmap(t->dst, t->size);
      break;
    case TASK_SIGNAL:
      event_complete_up_to(t->event, t->target);
      break;
    case TASK_WAIT:
      event_wait_for(t->event, t->target);
      break;
  }
  if (t->event != NULL) event_unref(t->event);
}

static void* worker(void* arg) {
  struct adr_backend_stream* s = arg;
  pthread_mutex_lock(&s->lock);
  for (;;) {
    while (s->head == NULL && !s->stop) pthread_cond_wait(&s->work, &s->lock);
    if (s->head == NULL) break; /* stop requested and queue drained */
    struct task* t = s->head;
    s->head = t->next;
    if (s->head == NULL) s->tail = NULL;
    s->running = true;
    pthread_mutex_unlock(&s->lock);
    run_task(t);
    free(t);
    pthread_mutex_lock(&s->lock);
    s->running = false;
    if (s->head == NULL) pthread_cond_broadcast(&s->idle);
  }
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

/* Run `t` now on the default stream, or queue it on a created stream. The
 * task is copied, so callers pass a stack object. */
static int submit(struct adr_backend_stream* s, const struct task* proto, struct adr_error* error) {
  if (s->is_default) {
    struct task t = *proto;
    if (t.event) atomic_fetch_add(&t.event->refs, 1);
    run_task(&t);
    return 0;
  }
  struct task* t = malloc(sizeof(*t));
  if (t == NULL) return adr_backend_error_set(error, ENOMEM, "ENOMEM: cannot queue a task");
  *t = *proto;
  t->next = NULL;
  if (t->event) atomic_fetch_add(&t->event->refs, 1);
  pthread_mutex_lock(&s->lock);
  if (s->tail)
    s->tail->next = t;
  else
    s->head = t;
  s->tail = t;
  pthread_cond_signal(&s->work);
  pthread_mutex_unlock(&s->lock);
  return 0;
}

/* ---- lifecycle and devices --------------------------------------------- */

static int cpu_init(struct adr_error* error) {
  return adr_host_init(CPU_NAME, error);
}

static int cpu_device_count(ArrowDeviceType type, int64_t* out, struct adr_error* error) {
  (void)error;
  *out = type == ARROW_DEVICE_CPU ? 1 : 0;
  return 0;
}

static int cpu_device_open(ArrowDeviceType type, int64_t id, struct adr_backend_device** out,
                           struct adr_error* error) {
  if (type != ARROW_DEVICE_CPU || id != 0)
    return adr_backend_error_set(error, ENODEV, "ENODEV: no device %lld", (long long)id);
  *out = &the_device;
  return 0;
}

static void cpu_device_close(struct adr_backend_device* dev) {
  (void)dev;
}

static int cpu_device_info(struct adr_backend_device* dev, struct adr_device_info* out,
                           struct adr_error* error) {
  (void)dev;
  (void)error;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  snprintf(out->name, sizeof(out->name), "host CPU (%ld logical cores)", cores);
  snprintf(out->vendor, sizeof(out->vendor), "host");
  snprintf(out->driver, sizeof(out->driver), "libc");
  out->kind = ADR_DEVICE_KIND_CPU; /* no UUID or PCI address: the host */
  long page = sysconf(_SC_PAGESIZE);
  out->memory_total = (uint64_t)sysconf(_SC_PHYS_PAGES) * (uint64_t)page;
  out->memory_free = (uint64_t)sysconf(_SC_AVPHYS_PAGES) * (uint64_t)page;
  out->caps = ADR_CAP_HOST_ACCESSIBLE | ADR_CAP_ASYNC_STREAMS | ADR_CAP_STREAM_ORDERED_ALLOC |
              ADR_CAP_DEVICE_ADDRESSES | ADR_CAP_UNIFIED_ADDRESSING;
  out->alignment = 64;
  return 0;
}

static int cpu_device_properties(struct adr_backend_device* dev, adr_property_fn emit, void* ctx,
                                 struct adr_error* error) {
  (void)dev;
  (void)error;
  char buf[64];
  snprintf(buf, sizeof(buf), "%ld", sysconf(_SC_NPROCESSORS_ONLN));
  emit(ctx, "logical_cores", buf);
  snprintf(buf, sizeof(buf), "%ld", sysconf(_SC_PAGESIZE));
  emit(ctx, "page_size", buf);
  emit(ctx, "streams", "default: synchronous; created: one worker thread each");
  return 0;
}

/* ---- address ranges (pointer_query) ---------------------------------------- */

/* Live allocations, so pointer_query answers for any address inside one. */
static struct cpu_ranges ranges = CPU_RANGES_INIT;

struct cpu_ranges* cpu_ranges_global(void) {
  return &ranges;
}

static int cpu_pointer_query(const void* ptr, ArrowDeviceType* out_type, int64_t* out_id,
                             struct adr_error* error) {
  if (cpu_ranges_find(&ranges, (uintptr_t)ptr, 0, NULL, NULL) != 0)
    return adr_backend_error_set(error, ENOENT, "ENOENT: %p is not in a CPU allocation", ptr);
  *out_type = ARROW_DEVICE_CPU;
  *out_id = 0;
  return 0;
}

static void cpu_shutdown(void) {
  cpu_ranges_clear(&ranges);
}

/* ---- memory -------------------------------------------------------------- */

static int cpu_alloc(struct adr_backend_device* dev, size_t size, size_t alignment,
                     struct adr_backend_stream* stream, void** out, struct adr_error* error) {
  (void)dev;
  (void)stream; /* host memory is usable on every stream at once */
  size_t rounded = (size + alignment - 1) & ~(alignment - 1);
  void* p = aligned_alloc(alignment, rounded);
  if (p == NULL)
    return adr_backend_error_set(error, ENOMEM, "ENOMEM: cannot allocate %zu bytes aligned to %zu",
                                 size, alignment);
  if (cpu_ranges_insert(&ranges, (uintptr_t)p, size) != 0) {
    free(p);
    return adr_backend_error_set(error, ENOMEM, "ENOMEM: cannot record the allocation's range");
  }
  *out = p;
  return 0;
}

static int cpu_free(struct adr_backend_device* dev, void* ptr, size_t size,
                    struct adr_backend_stream* stream, struct adr_error* error) {
  (void)dev;
  cpu_ranges_remove(&ranges, (uintptr_t)ptr, NULL);
  struct task t = {.kind = TASK_FREE, .dst = ptr};
  size_t map_size = 0;
  void* map_base = NULL;
  if (cpu_share_forget(ptr, &map_base, &map_size)) {
    t = (struct task){.kind = TASK_UNMAP, .dst = map_base, .size = map_size};
  }
  (void)size;
  return submit(stream, &t, error);
}

static int cpu_copy(struct adr_backend_device* dst_dev, void* dst,
                    struct adr_backend_device* src_dev, const void* src, size_t size,
                    struct adr_backend_stream* stream, struct adr_error* error) {
  (void)dst_dev;
  (void)src_dev;
  struct task t = {.kind = TASK_COPY, .dst = dst, .src = src, .size = size};
  if (stream->is_default) {
    memmove(dst, src, size); /* the common case, without a task */
    return 0;
  }
  return submit(stream, &t, error);
}

static int cpu_memset(struct adr_backend_device* dev, void* ptr, int value, size_t size,
                      struct adr_backend_stream* stream, struct adr_error* error) {
  (void)dev;
  struct task t = {.kind = TASK_MEMSET, .dst = ptr, .value = value, .size = size};
  return submit(stream, &t, error);
}

/* The blocking slots: on the default stream (synchronous) the copy runs
 * here; on a created stream it is queued behind the stream's tasks and
 * waited for. */
static int cpu_stream_synchronize(struct adr_backend_device* dev, struct adr_backend_stream* s,
                                  struct adr_error* error);

__attribute__((noinline)) static int cpu_copy_queued_sync(
    struct adr_backend_device* dst_dev, void* dst, struct adr_backend_device* src_dev,
    const void* src, size_t size, struct adr_backend_stream* stream, struct adr_error* error) {
  int st = cpu_copy(dst_dev, dst, src_dev, src, size, stream, error);
  return st != 0 ? st : cpu_stream_synchronize(NULL, stream, error);
}

static int cpu_copy_sync(struct adr_backend_device* dst_dev, void* dst,
                         struct adr_backend_device* src_dev, const void* src, size_t size,
                         struct adr_backend_stream* stream, struct adr_error* error) {
  if (__builtin_expect(!stream->is_default, 0))
    return cpu_copy_queued_sync(dst_dev, dst, src_dev, src, size, stream, error);
  memmove(dst, src, size);
  return 0;
}

__attribute__((noinline)) static int cpu_memset_queued_sync(struct adr_backend_device* dev,
                                                            void* ptr, int value, size_t size,
                                                            struct adr_backend_stream* stream,
                                                            struct adr_error* error) {
  int st = cpu_memset(dev, ptr, value, size, stream, error);
  return st != 0 ? st : cpu_stream_synchronize(dev, stream, error);
}

static int cpu_memset_sync(struct adr_backend_device* dev, void* ptr, int value, size_t size,
                           struct adr_backend_stream* stream, struct adr_error* error) {
  if (__builtin_expect(!stream->is_default, 0))
    return cpu_memset_queued_sync(dev, ptr, value, size, stream, error);
  memset(ptr, value, size);
  return 0;
}

/* ---- streams ------------------------------------------------------------- */

static int cpu_stream_create(struct adr_backend_device* dev, uint32_t flags,
                             struct adr_backend_stream** out, struct adr_error* error) {
  (void)dev;
  if (flags & ADR_BACKEND_STREAM_DEFAULT) {
    *out = &the_default_stream;
    return 0;
  }
  struct adr_backend_stream* s = calloc(1, sizeof(*s));
  if (s == NULL) return adr_backend_error_set(error, ENOMEM, "ENOMEM: out of memory");
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->work, NULL);
  pthread_cond_init(&s->idle, NULL);
  int rc = pthread_create(&s->thread, NULL, worker, s);
  if (rc != 0) {
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->work);
    pthread_cond_destroy(&s->idle);
    free(s);
    return adr_backend_error_set(error, rc == EAGAIN ? EAGAIN : EIO,
                                 "%s: cannot start the stream's thread",
                                 rc == EAGAIN ? "EAGAIN" : "EIO");
  }
  *out = s;
  return 0;
}

static int cpu_stream_synchronize(struct adr_backend_device* dev, struct adr_backend_stream* s,
                                  struct adr_error* error) {
  (void)dev;
  (void)error;
  if (s->is_default) return 0;
  pthread_mutex_lock(&s->lock);
  while (s->head != NULL || s->running) pthread_cond_wait(&s->idle, &s->lock);
  pthread_mutex_unlock(&s->lock);
  return 0;
}

static int cpu_stream_destroy(struct adr_backend_device* dev, struct adr_backend_stream* s,
                              struct adr_error* error) {
  /* The teardown contract (adr/backend.h): the default stream is the
   * device's; the core never asks, and a host that does gets EINVAL. */
  if (s->is_default)
    return adr_backend_error_set(error, EINVAL,
                                 "EINVAL: the default stream is released by device_close");
  cpu_stream_synchronize(dev, s, error);
  pthread_mutex_lock(&s->lock);
  s->stop = true;
  pthread_cond_signal(&s->work);
  pthread_mutex_unlock(&s->lock);
  pthread_join(s->thread, NULL);
  pthread_mutex_destroy(&s->lock);
  pthread_cond_destroy(&s->work);
  pthread_cond_destroy(&s->idle);
  free(s);
  return 0;
}

/* ---- events -------------------------------------------------------------- */

static int cpu_event_create(struct adr_backend_device* dev, struct adr_backend_event** out,
                            struct adr_error* error) {
  (void)dev;
  struct adr_backend_event* e = calloc(1, sizeof(*e));
  if (e == NULL) return adr_backend_error_set(error, ENOMEM, "ENOMEM: out of memory");
  pthread_mutex_init(&e->lock, NULL);
  pthread_cond_init(&e->cond, NULL);
  atomic_init(&e->refs, 1);
  *out = e;
  return 0;
}

static int cpu_event_destroy(struct adr_backend_device* dev, struct adr_backend_event* e,
                             struct adr_error* error) {
  (void)dev;
  (void)error;
  event_unref(e);
  return 0;
}

static int cpu_event_record(struct adr_backend_device* dev, struct adr_backend_event* e,
                            struct adr_backend_stream* s, struct adr_error* error) {
  (void)dev;
  pthread_mutex_lock(&e->lock);
  uint64_t target = ++e->recorded;
  pthread_mutex_unlock(&e->lock);
  struct task t = {.kind = TASK_SIGNAL, .event = e, .target = target};
  return submit(s, &t, error);
}

static int cpu_event_wait(struct adr_backend_device* dev, struct adr_backend_event* e,
                          struct adr_backend_stream* s, struct adr_error* error) {
  (void)dev;
  pthread_mutex_lock(&e->lock);
  uint64_t target = e->recorded;
  pthread_mutex_unlock(&e->lock);
  struct task t = {.kind = TASK_WAIT, .event = e, .target = target};
  return submit(s, &t, error);
}

static int cpu_event_synchronize(struct adr_backend_device* dev, struct adr_backend_event* e,
                                 struct adr_error* error) {
  (void)dev;
  (void)error;
  pthread_mutex_lock(&e->lock);
  uint64_t target = e->recorded;
  pthread_mutex_unlock(&e->lock);
  event_wait_for(e, target);
  return 0;
}

static int cpu_event_query(struct adr_backend_device* dev, struct adr_backend_event* e,
                           struct adr_error* error) {
  (void)dev;
  (void)error;
  pthread_mutex_lock(&e->lock);
  bool done = e->completed >= e->recorded;
  pthread_mutex_unlock(&e->lock);
  return done ? 0 : EBUSY;
}

static void* cpu_event_native(struct adr_backend_device* dev, struct adr_backend_event* e) {
  (void)dev;
  (void)e;
  return NULL; /* CPU arrays carry no sync_event */
}

static const ArrowDeviceType cpu_types[] = {ARROW_DEVICE_CPU};

static const struct adr_backend cpu_backend = {
    .abi_major = ADR_BACKEND_ABI_MAJOR,
    .abi_minor = ADR_BACKEND_ABI_MINOR,
    .struct_size = sizeof(struct adr_backend),
    .name = CPU_NAME,
    .version = "0.1.0",
    .device_types = cpu_types,
    .device_type_count = 1,
    .init = cpu_init,
    .shutdown = cpu_shutdown,
    .device_count = cpu_device_count,
    .device_open = cpu_device_open,
    .device_close = cpu_device_close,
    .device_info = cpu_device_info,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .copy = cpu_copy,
    .memset = cpu_memset,
    .stream_create = cpu_stream_create,
    .stream_destroy = cpu_stream_destroy,
    .stream_synchronize = cpu_stream_synchronize,
    .event_create = cpu_event_create,
    .event_destroy = cpu_event_destroy,
    .event_record = cpu_event_record,
    .event_wait = cpu_event_wait,
    .event_synchronize = cpu_event_synchronize,
    .event_query = cpu_event_query,
    .event_native = cpu_event_native,
    .device_properties = cpu_device_properties,
    .pointer_query = cpu_pointer_query,
    .copy_sync = cpu_copy_sync,
    .memset_sync = cpu_memset_sync,
    .share_caps = cpu_share_caps,
    .share_alloc = cpu_share_alloc,
    .share_export = cpu_share_export,
    .share_import = cpu_share_import,
    .share_close = cpu_share_close,
};

ADR_BACKEND_DEFINE_QUERY(cpu_backend, adr_host_set)
