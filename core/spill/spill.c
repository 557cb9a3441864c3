/* SPDX-License-Identifier: Apache-2.0
 *
 * Spill managers and spillable buffers (public API: adr/spill.h; design and
 * rules: docs/spill.md).
 *
 * Locks. One mutex per manager guards its buffer list (least recently used
 * first), every buffer's state, holders, exposure and last-use events, and
 * the byte counts. It is never held across an allocation, a copy or a wait:
 * a buffer that moves is marked ST_SPILLING or ST_UNSPILLING under the lock, the
 * move runs unlocked, and the end of the move is published under the lock
 * with a broadcast on the manager's condition variable. A thread that needs
 * a moving buffer (acquire, expose, free) waits on that variable. Victims
 * are only ever buffers in state ST_DEVICE with no holder and no exposure, so
 * a held or exposed buffer is never touched by a spill, and a buffer is
 * moved by one thread at a time. The out-of-memory callback takes the same
 * mutex; since no thread holds it while allocating, the callback cannot
 * deadlock with the allocation that triggered it. The one backend work
 * done under the lock is a release's last-use event (create on first use,
 * record; and, with more than four streams in flight on one buffer, a
 * host wait for the oldest). Statistics are updated under the lock too
 * (they are per move, not per acquire).
 *
 * Background spills (docs/spill.md): a spill whose buffer's last use is
 * still queued is queued on the manager's spill stream instead of waited
 * for; the buffer is published ST_HOST with spill_pending set, and the
 * thread that next owns its move (an unspill) or frees it waits for the
 * spill event on the host, without the lock, before touching hptr.
 */
#include <errno.h>
#include <execinfo.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adr/memory.h"
#include "internal.h"
#include "spill_internal.h"

#define HOST_CACHE_MAX ((uint64_t)256 << 20)

/* ---- helpers ------------------------------------------------------------- */

static const char* backend_name(struct adr_spill_manager* m) {
  static __thread char name[32];
  struct adr_device_info info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  if (adr_device_info_get(m->device, &info, NULL) != 0) return NULL;
  snprintf(name, sizeof(name), "%s", info.backend);
  return name;
}

static bool is_host_memory_device(struct adr_device* dev) {
  ArrowDeviceType t = adr_device_type(dev);
  return t == ARROW_DEVICE_CPU || t == ARROW_DEVICE_CUDA_HOST || t == ARROW_DEVICE_ROCM_HOST;
}

static void lru_remove(struct adr_spill_manager* m, struct adr_spill_buffer* b) {
  if (b->prev)
    b->prev->next = b->next;
  else
    m->head = b->next;
  if (b->next)
    b->next->prev = b->prev;
  else
    m->tail = b->prev;
  b->prev = b->next = NULL;
}

static void lru_push(struct adr_spill_manager* m, struct adr_spill_buffer* b) {
  b->prev = m->tail;
  b->next = NULL;
  if (m->tail)
    m->tail->next = b;
  else
    m->head = b;
  m->tail = b;
}

static void lru_touch(struct adr_spill_manager* m, struct adr_spill_buffer* b) {
  if (m->tail == b) return;
  lru_remove(m, b);
  lru_push(m, b);
}

static bool moving(const struct adr_spill_buffer* b) {
  return b->state == ST_SPILLING || b->state == ST_UNSPILLING || b->state == ST_COPYING;
}

static bool spillable(const struct adr_spill_buffer* b) {
  return b->state == ST_DEVICE && b->holders == 0 && !b->exposed;
}

/* Device bytes are counted when a move or allocation starts (a
 * reservation, so concurrent requests see each other under the limit); the
 * peak is raised when one completes, after the spills it caused. */
static void device_bytes_add(struct adr_spill_manager* m, uint64_t n) {
  m->device_bytes += n;
}

static void raise_peak(struct adr_spill_manager* m) {
  if (m->device_bytes > m->peak_device) m->peak_device = m->device_bytes;
}

/* Marks least recently used spillable buffers ST_SPILLING until `need` bytes
 * are covered; returns the list (victim_next) and their bytes. Lock held. */
static struct adr_spill_buffer* pick_victims(struct adr_spill_manager* m, uint64_t need,
                                             uint64_t* out_bytes) {
  struct adr_spill_buffer *list = NULL, **tail = &list;
  uint64_t got = 0;
  for (struct adr_spill_buffer* b = m->head; b != NULL && got < need; b = b->next) {
    if (!spillable(b)) continue;
    b->state = ST_SPILLING;
    b->victim_next = NULL;
    *tail = b;
    tail = &b->victim_next;
    got += b->size;
  }
  *out_bytes = got;
  return list;
}

static uint64_t spillable_bytes_locked(struct adr_spill_manager* m) {
  uint64_t n = 0;
  for (struct adr_spill_buffer* b = m->head; b != NULL; b = b->next)
    if (spillable(b)) n += b->size;
  return n;
}

/* ---- moving bytes --------------------------------------------------------- */

/* Pageable host memory for a spill: a cached block whose size is between
 * `size` and twice it, else a new one. The block header sits in the first
 * 64 bytes, so the bytes handed out stay 64-byte aligned. */
static void* pageable_alloc(struct adr_spill_manager* m, size_t size) {
  pthread_mutex_lock(&m->lock);
  for (struct host_block** p = &m->host_cache; *p != NULL; p = &(*p)->next) {
    struct host_block* blk = *p;
    if (blk->size >= size && blk->size / 2 <= size) {
      *p = blk->next;
      m->host_cache_bytes -= blk->size;
      pthread_mutex_unlock(&m->lock);
      return (char*)blk + 64;
    }
  }
  pthread_mutex_unlock(&m->lock);
  size_t rounded = (size + 63) & ~(size_t)63;
  if (rounded < size || rounded > SIZE_MAX - 64) return NULL;
  struct host_block* blk = aligned_alloc(64, rounded + 64);
  if (blk == NULL) return NULL;
  blk->size = rounded;
  return (char*)blk + 64;
}

static void pageable_free(struct adr_spill_manager* m, void* p) {
  struct host_block* blk = (struct host_block*)((char*)p - 64);
  pthread_mutex_lock(&m->lock);
  if (m->host_cache_bytes + blk->size <= HOST_CACHE_MAX) {
    blk->next = m->host_cache;
    m->host_cache = blk;
    m->host_cache_bytes += blk->size;
    blk = NULL;
  }
  pthread_mutex_unlock(&m->lock);
  free(blk);
}

static int host_alloc(struct adr_spill_manager* m, size_t size, void** out, bool* out_pinned,
                      struct adr_error* error) {
  if (m->host_pinned) {
    int st = adr_alloc(m->host_device, size, 0, NULL, out, error);
    *out_pinned = st == 0;
    return st;
  }
  *out = pageable_alloc(m, size);
  *out_pinned = false;
  if (*out == NULL)
    return adr__errorf(error, ENOMEM, "adr_spill", NULL,
                       "ENOMEM: no host memory for %zu spilled bytes", size);
  return 0;
}

static void host_free(struct adr_spill_manager* m, void* p, size_t size, bool pinned) {
  if (pinned)
    adr_free(m->host_device, p, size, NULL, NULL);
  else
    pageable_free(m, p);
}

/* Waits for the buffer's last-use events (the stream rule, docs/spill.md).
 * The buffer is moving or being freed: no release can record meanwhile. */
static int wait_last_use(struct adr_spill_buffer* b, struct adr_error* error) {
  for (int i = 0; i < LAST_USE_EVENTS; i++) {
    if (!b->event_pending[i]) continue;
    int st = adr_event_synchronize(b->events[i], error);
    if (st) return st;
    b->event_pending[i] = false;
    b->event_streams[i] = NULL;
  }
  return 0;
}

/* Queues the device -> host copy of a spill on the manager's spill stream,
 * behind the buffer's last-use events, then the stream-ordered free of its
 * device memory; no host wait. On failure nothing queued writes `h` any
 * more and the device memory is still the buffer's. */
static int spill_queue(struct adr_spill_buffer* b, void* h, struct adr_error* error) {
  struct adr_spill_manager* m = b->mgr;
  struct adr_stream* s = m->spill_stream;
  int st = 0;
  for (int i = 0; i < LAST_USE_EVENTS && st == 0; i++)
    if (b->event_pending[i]) st = adr_stream_wait_event(s, b->events[i], error);
  if (st == 0 && b->spill_event == NULL) st = adr_event_create(m->device, &b->spill_event, error);
  if (st == 0) st = adr_copy(m->host_device, h, m->device, b->dptr, b->size, s, error);
  if (st == 0) st = adr_event_record(b->spill_event, s, error);
  if (st != 0) {
    /* A copy may be queued: let it finish before h goes back. */
    adr_stream_synchronize(s, NULL);
    return st;
  }
  st = adr_free(m->device, b->dptr, b->size, s, error);
  if (st != 0) {
    adr_event_synchronize(b->spill_event, NULL);
    return st;
  }
  /* The spill stream waits for them now; later releases record afresh. */
  for (int i = 0; i < LAST_USE_EVENTS; i++) {
    b->event_pending[i] = false;
    b->event_streams[i] = NULL;
  }
  return 0;
}

/* Waits until a background spill's copy has completed (the host bytes are
 * valid). The caller owns the buffer's move (or is freeing it). */
static int wait_spilled(struct adr_spill_buffer* b, struct adr_error* error) {
  if (!b->spill_pending) return 0;
  int st = adr_event_synchronize(b->spill_event, error);
  if (st == 0) b->spill_pending = false;
  return st;
}

/* Whether queued work may still use the buffer: a last-use event that has
 * not completed (an error counts as busy: the queued path reports it).
 * Completed events are retired. The caller owns the buffer's move. */
static bool last_use_busy(struct adr_spill_buffer* b) {
  bool busy = false;
  for (int i = 0; i < LAST_USE_EVENTS; i++) {
    if (!b->event_pending[i]) continue;
    if (adr_event_query(b->events[i], NULL) == 0) {
      b->event_pending[i] = false;
      b->event_streams[i] = NULL;
    } else {
      busy = true;
    }
  }
  return busy;
}

/* Spills one buffer marked ST_SPILLING (lock not held): in the background
 * on the spill stream when the manager has one, `background` (the explicit
 * and limit triggers) and the buffer's last use is still queued work, so
 * the caller does not wait for that work; else blocking (an idle buffer's
 * blocking copy costs less than a queued one's hand-offs and
 * stream-ordered free). On failure the buffer goes back to ST_DEVICE
 * untouched. */
static int spill_one(struct adr_spill_buffer* b, int trigger, bool background,
                     struct adr_error* error) {
  struct adr_spill_manager* m = b->mgr;
  size_t size = b->size; /* b may be freed as soon as the move is published */
  uint64_t t0 = adr__now_ns();
  void* h = NULL;
  bool pinned = false;
  bool queued = background && m->spill_stream != NULL && last_use_busy(b);
  int st = queued ? 0 : wait_last_use(b, error);
  if (st == 0) st = host_alloc(m, b->size, &h, &pinned, error);
  if (st == 0 && queued) {
    st = spill_queue(b, h, error);
  } else if (st == 0) {
    st = adr_copy(m->host_device, h, m->device, b->dptr, b->size, NULL, error);
    if (st == 0) st = adr_free(m->device, b->dptr, b->size, NULL, error);
  }
  if (st != 0 && h != NULL) host_free(m, h, b->size, pinned);
  uint64_t dt = adr__now_ns() - t0;
  pthread_mutex_lock(&m->lock);
  if (st == 0) {
    b->state = ST_HOST;
    b->dptr = NULL;
    b->hptr = h;
    b->host_pinned = pinned;
    b->spill_pending = queued;
    m->device_bytes -= b->size;
    m->host_bytes += b->size;
    if (queued) {
      m->queued_spills++;
      m->unsettled++;
    }
    if (m->level >= 1) {
      m->spilled[trigger].count++;
      m->spilled[trigger].bytes += b->size;
      m->spilled[trigger].nanoseconds += dt;
    }
  } else {
    b->state = ST_DEVICE;
    m->spill_failures++;
  }
  pthread_cond_broadcast(&m->moved);
  pthread_mutex_unlock(&m->lock);
  if (st != 0)
    adr__log(ADR_LOG_WARN, adr_device_name(m->device),
             "spill of %zu bytes failed, kept on the device: %s", size,
             error ? error->message : "");
  return st;
}

/* The spill thread: runs queued blocking spills one after the other. */
static void* worker_main(void* arg) {
  struct adr_spill_manager* m = arg;
  pthread_mutex_lock(&m->lock);
  for (;;) {
    while (m->jobs_head == NULL && !m->worker_stop) pthread_cond_wait(&m->work, &m->lock);
    struct adr_spill_buffer* b = m->jobs_head;
    if (b == NULL) break; /* stopping, nothing left */
    m->jobs_head = b->job_next;
    if (m->jobs_head == NULL) m->jobs_tail = NULL;
    b->job_next = NULL;
    int trigger = b->job_trigger;
    pthread_mutex_unlock(&m->lock);
    struct adr_error e;
    e.message[0] = '\0';
    spill_one(b, trigger, false, &e); /* a failure is logged and counted there */
    pthread_mutex_lock(&m->lock);
    m->worker_pending--;
    pthread_cond_broadcast(&m->moved);
  }
  pthread_mutex_unlock(&m->lock);
  return NULL;
}

/* Hands a buffer marked ST_SPILLING to the spill thread (starting it);
 * false when the thread cannot start (the caller spills it itself). */
static bool worker_enqueue(struct adr_spill_buffer* b, int trigger) {
  struct adr_spill_manager* m = b->mgr;
  pthread_mutex_lock(&m->lock);
  if (!m->worker_started) {
    if (pthread_create(&m->worker, NULL, worker_main, m) != 0) {
      pthread_mutex_unlock(&m->lock);
      return false;
    }
    m->worker_started = true;
  }
  b->job_next = NULL;
  b->job_trigger = trigger;
  if (m->jobs_tail != NULL)
    m->jobs_tail->job_next = b;
  else
    m->jobs_head = b;
  m->jobs_tail = b;
  m->worker_pending++;
  m->queued_spills++;
  pthread_cond_signal(&m->work);
  pthread_mutex_unlock(&m->lock);
  return true;
}

/* Waits until the spill thread has run every spill queued so far. */
static void worker_drain(struct adr_spill_manager* m) {
  pthread_mutex_lock(&m->lock);
  while (m->worker_pending != 0) pthread_cond_wait(&m->moved, &m->lock);
  pthread_mutex_unlock(&m->lock);
}

/* Spills a victim list; returns the bytes moved and the first failure. */
static int spill_list(struct adr_spill_buffer* list, int trigger, uint64_t* out_bytes,
                      struct adr_error* error) {
  int first = 0;
  uint64_t moved = 0;
  struct adr_error local;
  while (list != NULL) {
    struct adr_spill_buffer* b = list;
    list = b->victim_next;
    b->victim_next = NULL;
    /* Once spill_one has published the move, another thread may free b. */
    size_t size = b->size;
    local.message[0] = '\0';
    int st;
    /* Without a spill stream, an explicit spill of a buffer whose last use
     * is still queued goes to the spill thread: the caller does not wait
     * for that work (counted as moved; a failure stays the thread's). */
    if (trigger == ADR_SPILL_TRIGGER_EXPLICIT && b->mgr->worker_allowed && last_use_busy(b) &&
        worker_enqueue(b, trigger))
      st = 0;
    else
      st = spill_one(b, trigger, trigger != ADR_SPILL_TRIGGER_ON_DEMAND, &local);
    if (st == 0) {
      moved += size;
    } else if (first == 0) {
      first = st;
      if (error != NULL) *error = local;
    }
  }
  if (out_bytes != NULL) *out_bytes = moved;
  return first;
}

/* Makes room under the soft limit for `size` more device bytes, which the
 * caller has already added to device_bytes. Lock held on entry and exit. */
static void keep_limit(struct adr_spill_manager* m, size_t size) {
  if (m->limit == 0 || m->noop || m->device_bytes <= m->limit) return;
  uint64_t need = m->device_bytes - m->limit;
  uint64_t got = 0;
  struct adr_spill_buffer* list = pick_victims(m, need, &got);
  if (got < need) {
    m->limit_exceeded++;
    if (!m->limit_warned) {
      m->limit_warned = true;
      char a[32], l[32], s[32];
      adr__log(
          ADR_LOG_WARN, adr_device_name(m->device),
          "spill: soft limit %s exceeded: %s in device memory with a %zu-byte request, only %s "
          "spillable (held or exposed buffers; logged once)",
          adr__format_bytes(m->limit, l, sizeof(l)),
          adr__format_bytes(m->device_bytes, a, sizeof(a)), size,
          adr__format_bytes(got, s, sizeof(s)));
    }
  }
  if (list == NULL) return;
  pthread_mutex_unlock(&m->lock);
  spill_list(list, ADR_SPILL_TRIGGER_LIMIT, NULL, NULL);
  pthread_mutex_lock(&m->lock);
}

/* The out-of-memory callback: spill at least the failed request's size. */
static int on_demand(void* ctx, struct adr_device* device, size_t size, uint32_t attempt) {
  (void)device;
  (void)attempt;
  struct adr_spill_manager* m = ctx;
  pthread_mutex_lock(&m->lock);
  /* Background spills still queued hold their device memory until the
   * spill stream reaches their frees: wait for them first (progress, so
   * the chain retries). */
  uint64_t unsettled = m->unsettled;
  m->unsettled = 0;
  pthread_mutex_unlock(&m->lock);
  bool settled = unsettled != 0 && adr_stream_synchronize(m->spill_stream, NULL) == 0;
  if (m->worker_started) {
    pthread_mutex_lock(&m->lock);
    bool pending = m->worker_pending != 0;
    pthread_mutex_unlock(&m->lock);
    if (pending) {
      worker_drain(m);
      settled = true;
    }
  }
  pthread_mutex_lock(&m->lock);
  uint64_t got = 0;
  struct adr_spill_buffer* list = pick_victims(m, size ? size : 1, &got);
  pthread_mutex_unlock(&m->lock);
  if (list == NULL) return settled;
  uint64_t moved = 0;
  spill_list(list, ADR_SPILL_TRIGGER_ON_DEMAND, &moved, NULL);
  return moved != 0 || settled;
}

/* Allocates device memory for `size` bytes already counted in
 * device_bytes; on ENOMEM the message says what was spillable. Lock not
 * held. */
static int device_alloc(struct adr_spill_manager* m, const char* op, size_t size, void** out,
                        struct adr_error* error) {
  pthread_mutex_lock(&m->lock);
  uint64_t before = spillable_bytes_locked(m);
  pthread_mutex_unlock(&m->lock);
  struct adr_error local;
  local.message[0] = '\0';
  int st = adr_alloc(m->device, size, 0, NULL, out, &local);
  if (st == 0) return 0;
  if (st != ENOMEM || error == NULL) {
    if (error != NULL) *error = local;
    return st;
  }
  pthread_mutex_lock(&m->lock);
  uint64_t after = spillable_bytes_locked(m);
  uint64_t resident = m->device_bytes - size;
  uint64_t exposed = m->exposed_bytes;
  pthread_mutex_unlock(&m->lock);
  char sz[32], b[32], a[32], r[32], x[32];
  return adr__errorf(
      error, ENOMEM, op, backend_name(m),
      "ENOMEM: %s do not fit on %s even after spilling%s: %s of this manager's "
      "buffers were spillable, %s still are; %s stay in device memory (%s exposed, "
      "the rest held by acquires or moving); %.500s",
      adr__format_bytes(size, sz, sizeof(sz)), adr_device_name(m->device),
      m->on_demand ? "" : " (on-demand spilling is off)", adr__format_bytes(before, b, sizeof(b)),
      adr__format_bytes(after, a, sizeof(a)), adr__format_bytes(resident, r, sizeof(r)),
      adr__format_bytes(exposed, x, sizeof(x)), local.message);
}

/* Unspills a buffer the caller marked ST_UNSPILLING and counted in
 * device_bytes (lock not held). On failure it goes back to ST_HOST. */
static int unspill(struct adr_spill_buffer* b, const char* op, struct adr_error* error) {
  struct adr_spill_manager* m = b->mgr;
  uint64_t t0 = adr__now_ns();
  void* d = NULL;
  /* A background spill still copying: its bytes are not on the host yet. */
  int st = wait_spilled(b, error);
  if (st == 0) st = device_alloc(m, op, b->size, &d, error);
  if (st == 0) {
    st = adr_copy(m->device, d, m->host_device, b->hptr, b->size, NULL, error);
    if (st != 0) adr_free(m->device, d, b->size, NULL, NULL);
  }
  if (st == 0) host_free(m, b->hptr, b->size, b->host_pinned);
  uint64_t dt = adr__now_ns() - t0;
  pthread_mutex_lock(&m->lock);
  if (st == 0) {
    b->state = ST_DEVICE;
    b->holders++; /* for the acquire or expose that asked: no spill in between */
    raise_peak(m);
    b->dptr = d;
    b->hptr = NULL;
    b->host_pinned = false;
    m->host_bytes -= b->size;
    if (m->level >= 1) {
      m->unspilled.count++;
      m->unspilled.bytes += b->size;
      m->unspilled.nanoseconds += dt;
    }
  } else {
    b->state = ST_HOST;
    m->device_bytes -= b->size;
    m->unspill_failures++;
  }
  pthread_cond_broadcast(&m->moved);
  pthread_mutex_unlock(&m->lock);
  return st;
}

/* Brings a buffer to ST_DEVICE and takes one hold on it (an acquire, or an
 * expose that drops it again), atomically with its arrival: no spill can
 * slip in between. Lock held on entry and on return, whatever the status. */
static int make_resident(struct adr_spill_buffer* b, const char* op, struct adr_error* error) {
  struct adr_spill_manager* m = b->mgr;
  while (moving(b)) pthread_cond_wait(&m->moved, &m->lock);
  if (b->state == ST_DEVICE) {
    b->holders++;
    lru_touch(m, b);
    return 0;
  }
  b->state = ST_UNSPILLING;
  device_bytes_add(m, b->size);
  keep_limit(m, b->size);
  pthread_mutex_unlock(&m->lock);
  int st = unspill(b, op, error);
  pthread_mutex_lock(&m->lock);
  if (st == 0) lru_touch(m, b);
  return st;
}

/* ---- managers ------------------------------------------------------------ */

void adr_spill_options_init(struct adr_spill_options* out) {
  if (out == NULL) return;
  memset(out, 0, sizeof(*out));
  out->struct_size = sizeof(*out);
  out->flags = ADR_SPILL_ON_DEMAND;
}

static int manager_create(struct adr_device* device, const struct adr_spill_options* o, bool global,
                          struct adr_spill_manager** out, struct adr_error* error) {
  static const char* op = "adr_spill_manager_create";
  if (device == NULL || out == NULL)
    return adr__errorf(error, EINVAL, op, NULL, "%s is NULL", device ? "out" : "device");
  struct adr_spill_options opts;
  adr_spill_options_init(&opts);
  if (o != NULL) {
    if (o->struct_size < offsetof(struct adr_spill_options, reserved))
      return adr__errorf(error, EINVAL, op, NULL,
                         "options->struct_size %u is too small (set it to sizeof(struct "
                         "adr_spill_options))",
                         o->struct_size);
    memcpy(&opts, o, offsetof(struct adr_spill_options, reserved));
  }
  if (opts.device_limit_percent > 100)
    return adr__errorf(error, EINVAL, op, NULL, "device_limit_percent %u is over 100",
                       opts.device_limit_percent);
  if (opts.stats_level > 2)
    return adr__errorf(error, EINVAL, op, NULL, "stats_level %u is not 0, 1 or 2",
                       opts.stats_level);
  struct adr_device_info info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  int st = adr_device_info_get(device, &info, error);
  if (st) return st;

  struct adr_spill_manager* m = calloc(1, sizeof(*m));
  if (m == NULL) return adr__errorf(error, ENOMEM, op, info.backend, "ENOMEM: out of host memory");
  m->device = device;
  m->global = global;
  m->level = opts.stats_level;
  m->noop = is_host_memory_device(device);
  m->limit = opts.device_limit;
  if (m->limit == 0 && opts.device_limit_percent != 0) {
    if (info.memory_total == 0)
      adr__log(ADR_LOG_WARN, device->name,
               "spill: a limit of %u%% of the device's memory, which the device does not report: "
               "no limit",
               opts.device_limit_percent);
    else
      m->limit = info.memory_total / 100 * opts.device_limit_percent +
                 info.memory_total % 100 * opts.device_limit_percent / 100;
  }
  if (!m->noop) {
    ArrowDeviceType t = adr_device_type(device);
    ArrowDeviceType pinned = t == ARROW_DEVICE_CUDA || t == ARROW_DEVICE_CUDA_MANAGED
                                 ? ARROW_DEVICE_CUDA_HOST
                             : t == ARROW_DEVICE_ROCM ? ARROW_DEVICE_ROCM_HOST
                                                      : ARROW_DEVICE_CPU;
    if (pinned != ARROW_DEVICE_CPU && !(opts.flags & ADR_SPILL_PAGEABLE) &&
        adr_device_get(pinned, adr_device_id(device), &m->host_device, NULL) == 0)
      m->host_pinned = true;
    if (!m->host_pinned) {
      st = adr_device_get(ARROW_DEVICE_CPU, 0, &m->host_device, error);
      if (st) {
        free(m);
        return st;
      }
    }
  }
  /* Background spills need downloads that return before they completed:
   * not Vulkan's (ADR_CAP_SYNC_DOWNLOADS), not a device without
   * asynchronous streams. Without a stream every spill is blocking. */
  if (!m->noop && !(opts.flags & ADR_SPILL_SYNCHRONOUS) && (info.caps & ADR_CAP_ASYNC_STREAMS) &&
      !(info.caps & ADR_CAP_SYNC_DOWNLOADS)) {
    struct adr_error local;
    if (adr_stream_create(device, &m->spill_stream, &local) != 0) {
      m->spill_stream = NULL;
      adr__log(ADR_LOG_WARN, device->name, "spill: no spill stream, spills block: %s",
               local.message);
    }
  }
  m->worker_allowed = !m->noop && !(opts.flags & ADR_SPILL_SYNCHRONOUS) && m->spill_stream == NULL;
  pthread_mutex_init(&m->lock, NULL);
  pthread_cond_init(&m->moved, NULL);
  pthread_cond_init(&m->work, NULL);
  if ((opts.flags & ADR_SPILL_ON_DEMAND) && !m->noop) {
    st = adr_oom_callback_add(device, on_demand, m, error);
    if (st) {
      if (m->spill_stream != NULL) adr_stream_destroy(m->spill_stream, NULL);
      pthread_cond_destroy(&m->work);
      pthread_cond_destroy(&m->moved);
      pthread_mutex_destroy(&m->lock);
      free(m);
      return st;
    }
    m->on_demand = true;
  }
  char l[32];
  adr__log(ADR_LOG_DEBUG, device->name,
           "spill manager: %s, on demand %s, limit %s, to %s memory, %s spills, stats %u",
           m->noop ? "no-op (host memory)" : "on", m->on_demand ? "on" : "off",
           m->limit ? adr__format_bytes(m->limit, l, sizeof(l)) : "none",
           m->host_pinned ? "pinned" : "pageable",
           m->spill_stream     ? "background (stream)"
           : m->worker_allowed ? "background (thread)"
                               : "blocking",
           m->level);
  *out = m;
  return 0;
}

int adr_spill_manager_create(struct adr_device* device, const struct adr_spill_options* options,
                             struct adr_spill_manager** out, struct adr_error* error) {
  return manager_create(device, options, false, out, error);
}

int adr_spill_manager_destroy(struct adr_spill_manager* m, struct adr_error* error) {
  static const char* op = "adr_spill_manager_destroy";
  if (m == NULL) return 0;
  if (m->global)
    return adr__errorf(error, EINVAL, op, NULL, "the global spill manager of %s is owned by adr",
                       adr_device_name(m->device));
  pthread_mutex_lock(&m->lock);
  uint64_t n = m->buffers;
  pthread_mutex_unlock(&m->lock);
  if (n != 0)
    return adr__errorf(error, EBUSY, op, NULL,
                       "%" PRIu64 " buffer%s of the manager on %s not freed", n,
                       n == 1 ? " is" : "s are", adr_device_name(m->device));
  if (m->on_demand) adr_oom_callback_remove(m->device, on_demand, m, NULL);
  if (m->spill_stream != NULL) adr_stream_destroy(m->spill_stream, NULL);
  if (m->worker_started) {
    pthread_mutex_lock(&m->lock);
    m->worker_stop = true;
    pthread_cond_signal(&m->work);
    pthread_mutex_unlock(&m->lock);
    pthread_join(m->worker, NULL);
  }
  while (m->exposures) {
    struct exposure_record* r = m->exposures;
    m->exposures = r->next;
    free(r->symbols);
    free(r);
  }
  while (m->host_cache) {
    struct host_block* blk = m->host_cache;
    m->host_cache = blk->next;
    free(blk);
  }
  pthread_cond_destroy(&m->work);
  pthread_cond_destroy(&m->moved);
  pthread_mutex_destroy(&m->lock);
  free(m);
  return 0;
}

struct adr_device* adr_spill_manager_device(const struct adr_spill_manager* m) {
  return m ? m->device : NULL;
}

uint64_t adr_spill_manager_device_limit(const struct adr_spill_manager* m) {
  return m ? m->limit : 0;
}

/* The global managers: one per device, created at the first request, kept
 * for the life of the process. A small table under its own mutex (taken
 * only by adr_spill_manager_global). */
#define GLOBAL_MAX 64
static pthread_mutex_t global_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  struct adr_device* device;
  struct adr_spill_manager* manager;
} globals[GLOBAL_MAX];

int adr_spill_manager_global(struct adr_device* device, struct adr_spill_manager** out,
                             struct adr_error* error) {
  static const char* op = "adr_spill_manager_global";
  if (device == NULL || out == NULL)
    return adr__errorf(error, EINVAL, op, NULL, "%s is NULL", device ? "out" : "device");
  const struct adr__spill_config* c = adr__spill_config();
  if (c->status != 0) return adr__errorf(error, c->status, op, NULL, "%s", c->error.message);
  *out = NULL;
  if (!c->enabled) return 0;
  pthread_mutex_lock(&global_lock);
  size_t i = 0;
  for (; i < GLOBAL_MAX && globals[i].device != NULL; i++)
    if (globals[i].device == device) {
      *out = globals[i].manager;
      pthread_mutex_unlock(&global_lock);
      return 0;
    }
  if (i == GLOBAL_MAX) {
    pthread_mutex_unlock(&global_lock);
    return adr__errorf(error, ENOMEM, op, NULL, "more than %d devices with a global spill manager",
                       GLOBAL_MAX);
  }
  struct adr_spill_options o;
  adr_spill_options_init(&o);
  o.flags = c->on_demand ? ADR_SPILL_ON_DEMAND : 0;
  o.device_limit = c->limit;
  o.device_limit_percent = c->limit_percent;
  o.stats_level = c->stats_level;
  int st = manager_create(device, &o, true, out, error);
  if (st == 0) {
    globals[i].device = device;
    globals[i].manager = *out;
  }
  pthread_mutex_unlock(&global_lock);
  return st;
}

int adr_spill_manager_spill(struct adr_spill_manager* m, uint64_t bytes, uint64_t* out_spilled,
                            struct adr_error* error) {
  if (out_spilled != NULL) *out_spilled = 0;
  if (m == NULL)
    return adr__errorf(error, EINVAL, "adr_spill_manager_spill", NULL, "manager is NULL");
  if (m->noop || bytes == 0) return 0;
  pthread_mutex_lock(&m->lock);
  uint64_t got = 0;
  struct adr_spill_buffer* list = pick_victims(m, bytes, &got);
  pthread_mutex_unlock(&m->lock);
  return spill_list(list, ADR_SPILL_TRIGGER_EXPLICIT, out_spilled, error);
}

int adr_spill_manager_synchronize(struct adr_spill_manager* m, struct adr_error* error) {
  if (m == NULL)
    return adr__errorf(error, EINVAL, "adr_spill_manager_synchronize", NULL, "manager is NULL");
  if (m->worker_started) worker_drain(m);
  if (m->spill_stream == NULL) return 0;
  return adr_stream_synchronize(m->spill_stream, error);
}

int adr__spill_buffer_spill(struct adr_spill_buffer* b, uint64_t* out_bytes,
                            struct adr_error* error) {
  *out_bytes = 0;
  struct adr_spill_manager* m = b->mgr;
  if (m->noop) return 0;
  pthread_mutex_lock(&m->lock);
  bool can = spillable(b);
  if (can) {
    b->state = ST_SPILLING;
    b->victim_next = NULL;
  }
  pthread_mutex_unlock(&m->lock);
  if (!can) return 0;
  return spill_list(b, ADR_SPILL_TRIGGER_EXPLICIT, out_bytes, error);
}

int adr__spill_buffer_copy_out(struct adr_spill_buffer* b, size_t offset, size_t size,
                               struct adr_device* dst_device, void* dst, struct adr_error* error) {
  struct adr_spill_manager* m = b->mgr;
  pthread_mutex_lock(&m->lock);
  while (moving(b)) pthread_cond_wait(&m->moved, &m->lock);
  bool spilled = b->state == ST_HOST;
  if (spilled)
    b->state = ST_COPYING; /* no unspill, spill or free until the copy is done */
  else
    b->holders++; /* on the device: held, so it does not spill meanwhile */
  pthread_mutex_unlock(&m->lock);
  int st = 0;
  if (spilled) {
    st = wait_spilled(b, error);
    if (st == 0)
      st = adr_copy(dst_device, dst, m->host_device, (char*)b->hptr + offset, size, NULL, error);
  } else {
    st = adr_copy(dst_device, dst, m->device, (char*)b->dptr + offset, size, NULL, error);
  }
  pthread_mutex_lock(&m->lock);
  if (spilled) {
    b->state = ST_HOST;
    pthread_cond_broadcast(&m->moved);
  } else {
    b->holders--;
  }
  pthread_mutex_unlock(&m->lock);
  return st;
}

/* ---- buffers ------------------------------------------------------------- */

int adr_spill_buffer_alloc(struct adr_spill_manager* m, size_t size, struct adr_spill_buffer** out,
                           struct adr_error* error) {
  static const char* op = "adr_spill_buffer_alloc";
  if (m == NULL || out == NULL)
    return adr__errorf(error, EINVAL, op, NULL, "%s is NULL", m ? "out" : "manager");
  if (size == 0) return adr__errorf(error, EINVAL, op, NULL, "size is 0");
  struct adr_spill_buffer* b = calloc(1, sizeof(*b));
  if (b == NULL) return adr__errorf(error, ENOMEM, op, NULL, "ENOMEM: out of host memory");
  b->mgr = m;
  b->size = size;
  b->state = ST_UNSPILLING; /* invisible to victim picking until allocated */
  pthread_mutex_lock(&m->lock);
  device_bytes_add(m, size);
  m->buffers++;
  lru_push(m, b);
  keep_limit(m, size);
  pthread_mutex_unlock(&m->lock);
  void* d = NULL;
  int st = device_alloc(m, op, size, &d, error);
  pthread_mutex_lock(&m->lock);
  if (st == 0) {
    b->state = ST_DEVICE;
    b->dptr = d;
    lru_touch(m, b);
    raise_peak(m);
  } else {
    m->device_bytes -= size;
    m->buffers--;
    lru_remove(m, b);
  }
  pthread_mutex_unlock(&m->lock);
  if (st) {
    free(b);
    return st;
  }
  *out = b;
  return 0;
}

static int buffer_free(struct adr_spill_buffer* b, bool owned, struct adr_error* error) {
  static const char* op = "adr_spill_buffer_free";
  if (b == NULL) return 0;
  struct adr_spill_manager* m = b->mgr;
  pthread_mutex_lock(&m->lock);
  while (moving(b)) pthread_cond_wait(&m->moved, &m->lock);
  if (b->slices != 0 && !owned) {
    uint32_t n = b->slices;
    pthread_mutex_unlock(&m->lock);
    return adr__errorf(error, EBUSY, op, NULL,
                       "the buffer is the owner of %u slice%s (freed with the last of them, "
                       "adr_spill_slice_free)",
                       n, n == 1 ? "" : "s");
  }
  if (b->holders != 0) {
    uint32_t n = b->holders;
    pthread_mutex_unlock(&m->lock);
    return adr__errorf(error, EBUSY, op, NULL, "the buffer is acquired (%u holder%s)", n,
                       n == 1 ? "" : "s");
  }
  /* Out of the list: no spill can pick it any more. */
  lru_remove(m, b);
  m->buffers--;
  if (b->state == ST_DEVICE)
    m->device_bytes -= b->size;
  else
    m->host_bytes -= b->size;
  if (b->exposed) {
    m->exposed_buffers--;
    m->exposed_bytes -= b->size;
  }
  pthread_mutex_unlock(&m->lock);
  int st = wait_last_use(b, error);
  int st2 = 0;
  if (b->state == ST_DEVICE) {
    st2 = adr_free(m->device, b->dptr, b->size, NULL, st ? NULL : error);
  } else {
    /* A background spill still writing hptr: wait for it (if the wait
     * fails, the host block is leaked rather than handed back while a
     * copy may still write it). */
    st2 = wait_spilled(b, st ? NULL : error);
    if (st2 == 0) host_free(m, b->hptr, b->size, b->host_pinned);
  }
  for (int i = 0; i < LAST_USE_EVENTS; i++)
    if (b->events[i] != NULL) adr_event_destroy(b->events[i], NULL);
  if (b->spill_event != NULL) adr_event_destroy(b->spill_event, NULL);
  free(b);
  return st ? st : st2;
}

int adr_spill_buffer_free(struct adr_spill_buffer* b, struct adr_error* error) {
  return buffer_free(b, false, error);
}

int adr__spill_buffer_free_owned(struct adr_spill_buffer* b, struct adr_error* error) {
  return buffer_free(b, true, error);
}

size_t adr_spill_buffer_size(const struct adr_spill_buffer* b) {
  return b ? b->size : 0;
}

int adr_spill_buffer_location(struct adr_spill_buffer* b) {
  if (b == NULL) return 0;
  pthread_mutex_lock(&b->mgr->lock);
  int loc = b->state == ST_DEVICE || b->state == ST_SPILLING ? ADR_SPILL_LOCATION_DEVICE
                                                             : ADR_SPILL_LOCATION_HOST;
  pthread_mutex_unlock(&b->mgr->lock);
  return loc;
}

int adr_spill_buffer_exposed(struct adr_spill_buffer* b) {
  if (b == NULL) return 0;
  pthread_mutex_lock(&b->mgr->lock);
  int e = b->exposed;
  pthread_mutex_unlock(&b->mgr->lock);
  return e;
}

int adr_spill_buffer_acquire(struct adr_spill_buffer* b, int mode, void** out_ptr,
                             struct adr_error* error) {
  static const char* op = "adr_spill_buffer_acquire";
  if (b == NULL || out_ptr == NULL)
    return adr__errorf(error, EINVAL, op, NULL, "%s is NULL", b ? "out_ptr" : "buffer");
  if (mode != ADR_SPILL_ACCESS_READ && mode != ADR_SPILL_ACCESS_WRITE)
    return adr__errorf(error, EINVAL, op, NULL,
                       "mode %d is not ADR_SPILL_ACCESS_READ (1) or ADR_SPILL_ACCESS_WRITE (2)",
                       mode);
  struct adr_spill_manager* m = b->mgr;
  pthread_mutex_lock(&m->lock);
  if (b->holders == UINT32_MAX) {
    pthread_mutex_unlock(&m->lock);
    return adr__errorf(error, EOVERFLOW, op, NULL, "too many holders");
  }
  int st = make_resident(b, op, error);
  if (st == 0) *out_ptr = b->dptr;
  pthread_mutex_unlock(&m->lock);
  return st;
}

/* Records the last-use event of `stream`; lock held. */
static int record_last_use(struct adr_spill_buffer* b, struct adr_stream* stream,
                           struct adr_error* error) {
  int slot = -1;
  for (int i = 0; i < LAST_USE_EVENTS && slot < 0; i++)
    if (b->event_pending[i] && b->event_streams[i] == stream) slot = i;
  for (int i = 0; i < LAST_USE_EVENTS && slot < 0; i++)
    if (!b->event_pending[i]) slot = i;
  if (slot < 0) {
    /* Four streams in flight: wait for the oldest slot's work and reuse it. */
    int st = adr_event_synchronize(b->events[0], error);
    if (st) return st;
    b->event_pending[0] = false;
    slot = 0;
  }
  if (b->events[slot] == NULL) {
    int st = adr_event_create(b->mgr->device, &b->events[slot], error);
    if (st) return st;
  }
  int st = adr_event_record(b->events[slot], stream, error);
  if (st) return st;
  b->event_pending[slot] = true;
  b->event_streams[slot] = stream;
  return 0;
}

int adr_spill_buffer_release(struct adr_spill_buffer* b, struct adr_stream* stream,
                             struct adr_error* error) {
  static const char* op = "adr_spill_buffer_release";
  if (b == NULL) return adr__errorf(error, EINVAL, op, NULL, "buffer is NULL");
  struct adr_spill_manager* m = b->mgr;
  if (stream != NULL && adr_stream_device(stream) != m->device)
    return adr__errorf(error, EINVAL, op, NULL, "the stream belongs to %s, the buffer to %s",
                       adr_device_name(adr_stream_device(stream)), adr_device_name(m->device));
  pthread_mutex_lock(&m->lock);
  if (b->holders == 0) {
    pthread_mutex_unlock(&m->lock);
    return adr__errorf(error, EINVAL, op, NULL, "the buffer is not acquired");
  }
  int st = 0;
  /* A failed record leaves no event: the spill would not wait, so make the
   * queued work finish now instead. */
  if (stream != NULL && record_last_use(b, stream, error) != 0)
    st = adr_stream_synchronize(stream, error);
  b->holders--;
  pthread_mutex_unlock(&m->lock);
  return st;
}

/* Not inlined, so that the frames to drop are known: this one and
 * adr_spill_buffer_expose. */
__attribute__((noinline)) static void record_exposure(struct adr_spill_manager* m,
                                                      struct adr_spill_buffer* b) {
  void* frames[EXPOSURE_FRAMES + 2];
  int n = backtrace(frames, EXPOSURE_FRAMES + 2);
  /* Drop this function and adr_spill_buffer_expose. */
  int skip = n > 2 ? 2 : 0;
  n -= skip;
  for (struct exposure_record* r = m->exposures; r != NULL; r = r->next)
    if (r->nframes == n && strcmp(r->reason, b->reason) == 0 &&
        memcmp(r->frames, frames + skip, (size_t)n * sizeof(void*)) == 0) {
      r->count++;
      r->bytes += b->size;
      return;
    }
  struct exposure_record* r = calloc(1, sizeof(*r));
  if (r == NULL) return; /* statistics only */
  snprintf(r->reason, sizeof(r->reason), "%s", b->reason);
  memcpy(r->frames, frames + skip, (size_t)n * sizeof(void*));
  r->nframes = n;
  r->count = 1;
  r->bytes = b->size;
  r->next = m->exposures;
  m->exposures = r;
  m->exposure_count++;
}

int adr_spill_buffer_expose(struct adr_spill_buffer* b, const char* reason, void** out_ptr,
                            struct adr_error* error) {
  static const char* op = "adr_spill_buffer_expose";
  if (b == NULL) return adr__errorf(error, EINVAL, op, NULL, "buffer is NULL");
  struct adr_spill_manager* m = b->mgr;
  pthread_mutex_lock(&m->lock);
  int st = make_resident(b, op, error);
  if (st == 0) {
    b->holders--;
    if (!b->exposed) {
      b->exposed = true;
      snprintf(b->reason, sizeof(b->reason), "%s", reason ? reason : "");
      m->exposed_buffers++;
      m->exposed_bytes += b->size;
      if (m->level >= 2) record_exposure(m, b);
    }
    if (out_ptr != NULL) *out_ptr = b->dptr;
  }
  pthread_mutex_unlock(&m->lock);
  return st;
}

/* ---- statistics ---------------------------------------------------------- */

int adr_spill_stats_get(struct adr_spill_manager* m, struct adr_spill_stats* out,
                        struct adr_error* error) {
  static const char* op = "adr_spill_stats_get";
  if (m == NULL || out == NULL)
    return adr__errorf(error, EINVAL, op, NULL, "%s is NULL", m ? "out" : "manager");
  if (out->struct_size < offsetof(struct adr_spill_stats, reserved))
    return adr__errorf(error, EINVAL, op, NULL,
                       "out->struct_size %u is too small (set it to sizeof(struct "
                       "adr_spill_stats))",
                       out->struct_size);
  struct adr_spill_stats s;
  memset(&s, 0, sizeof(s));
  s.struct_size = out->struct_size < sizeof(s) ? out->struct_size : (uint32_t)sizeof(s);
  pthread_mutex_lock(&m->lock);
  s.level = m->level;
  memcpy(s.spilled, m->spilled, sizeof(s.spilled));
  s.unspilled = m->unspilled;
  s.buffers = m->buffers;
  s.device_bytes = m->device_bytes;
  s.host_bytes = m->host_bytes;
  s.spillable_bytes = spillable_bytes_locked(m);
  s.exposed_buffers = m->exposed_buffers;
  s.exposed_bytes = m->exposed_bytes;
  s.device_limit = m->limit;
  s.peak_device_bytes = m->peak_device;
  s.limit_exceeded = m->limit_exceeded;
  s.spill_failures = m->spill_failures;
  s.unspill_failures = m->unspill_failures;
  s.queued_spills = m->queued_spills;
  s.cow_copies = m->cow_copies;
  s.cow_bytes = m->cow_bytes;
  pthread_mutex_unlock(&m->lock);
  memcpy(out, &s, s.struct_size);
  return 0;
}

const char* adr_spill_stats_format(const struct adr_spill_stats* s, char* buf, size_t size) {
  if (buf == NULL || size == 0) return buf;
  if (s == NULL) {
    snprintf(buf, size, "(no statistics)");
    return buf;
  }
  struct adr_spill_transfer d2h = {0, 0, 0};
  for (int i = 0; i < ADR_SPILL_TRIGGER_COUNT; i++) {
    d2h.count += s->spilled[i].count;
    d2h.bytes += s->spilled[i].bytes;
    d2h.nanoseconds += s->spilled[i].nanoseconds;
  }
  char a[32], b[32], c[32], d[32], e[32], f[32], g[32], l[32];
  int n = snprintf(buf, size,
                   "Spill Statistics (level=%u):\n"
                   " Buffers: %" PRIu64
                   ", %s in device memory (peak %s, limit %s), %s spilled, %" PRIu64 " exposed\n",
                   s->level, s->buffers, adr__format_bytes(s->device_bytes, a, sizeof(a)),
                   adr__format_bytes(s->peak_device_bytes, b, sizeof(b)),
                   s->device_limit ? adr__format_bytes(s->device_limit, l, sizeof(l)) : "none",
                   adr__format_bytes(s->host_bytes, c, sizeof(c)), s->exposed_buffers);
  if (n < 0 || (size_t)n >= size) return buf;
  if (s->level >= 1) {
    snprintf(buf + n, size - (size_t)n,
             " Spilling (level >= 1):\n"
             "  gpu => cpu: %s in %.4fs (on demand %s, limit %s, explicit %s)\n"
             "  cpu => gpu: %s in %.4fs\n"
             "  failures: %" PRIu64 " spills, %" PRIu64 " unspills; limit exceeded %" PRIu64
             " times\n"
             "  background: %" PRIu64 " spills queued; copy-on-write: %" PRIu64 " copies, %s\n",
             adr__format_bytes(d2h.bytes, d, sizeof(d)), (double)d2h.nanoseconds / 1e9,
             adr__format_bytes(s->spilled[0].bytes, e, sizeof(e)),
             adr__format_bytes(s->spilled[1].bytes, f, sizeof(f)),
             adr__format_bytes(s->spilled[2].bytes, g, sizeof(g)),
             adr__format_bytes(s->unspilled.bytes, a, sizeof(a)),
             (double)s->unspilled.nanoseconds / 1e9, s->spill_failures, s->unspill_failures,
             s->limit_exceeded, s->queued_spills, s->cow_copies,
             adr__format_bytes(s->cow_bytes, b, sizeof(b)));
  }
  return buf;
}

int adr_spill_exposures_list(struct adr_spill_manager* m, adr_spill_exposure_fn fn, void* ctx,
                             size_t* out_count, struct adr_error* error) {
  static const char* op = "adr_spill_exposures_list";
  if (m == NULL) return adr__errorf(error, EINVAL, op, NULL, "manager is NULL");
  if (m->level < 2)
    return adr__errorf(error, ENOTSUP, op, NULL,
                       "the manager of %s collects statistics at level %u; exposures need 2 "
                       "(ADR_SPILL_STATS=2 or stats_level)",
                       adr_device_name(m->device), m->level);
  pthread_mutex_lock(&m->lock);
  for (struct exposure_record* r = m->exposures; r != NULL; r = r->next) {
    if (r->symbols == NULL && r->nframes > 0) {
      char** sym = backtrace_symbols(r->frames, r->nframes);
      if (sym != NULL) {
        size_t len = 1;
        for (int i = 0; i < r->nframes; i++) len += strlen(sym[i]) + 3;
        r->symbols = malloc(len);
        if (r->symbols != NULL) {
          size_t at = 0;
          for (int i = 0; i < r->nframes; i++)
            at += (size_t)snprintf(r->symbols + at, len - at, "  %s\n", sym[i]);
        }
        free(sym);
      }
    }
    if (fn != NULL) {
      struct adr_spill_exposure e = {r->reason, r->count, r->bytes, r->symbols ? r->symbols : ""};
      fn(ctx, &e);
    }
  }
  if (out_count != NULL) *out_count = m->exposure_count;
  pthread_mutex_unlock(&m->lock);
  return 0;
}
