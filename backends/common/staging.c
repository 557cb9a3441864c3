/* SPDX-License-Identifier: Apache-2.0
 *
 * Pinned staging of pageable copies (staging.h). */
#include "staging.h"

#include "bytesize.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct adr_stage {
  struct adr_stage* next;
  unsigned char* buf[2];
  void* done[2]; /* recorded after the transfer that last used buf[i] */
};

/* ---- configuration ------------------------------------------------------ */

/* One size of the ADR_ALLOC grammar (bytesize.h) at text[*pos]; advances
 * *pos. On failure *pos is where the problem is and *expected says what
 * was expected there. */
static int scan_size(const char* text, size_t* pos, size_t* out, const char** expected) {
  uint64_t v = 0;
  size_t start = *pos;
  if (adr_bytesize_scan(text, pos, &v, expected) != 0) return EINVAL;
  if (v > SIZE_MAX) {
    *pos = start;
    *expected = "a size that fits in size_t";
    return EINVAL;
  }
  *out = (size_t)v;
  return 0;
}

int adr_staging_config_parse(const char* var, const char* text, struct adr_staging_config* out,
                             struct adr_error* error) {
  struct adr_staging_config c = {ADR_STAGING_DEFAULT_THRESHOLD, ADR_STAGING_DEFAULT_CHUNK, 0};
  if (text == NULL || text[0] == '\0' || strcmp(text, "off") == 0) {
    if (text != NULL && text[0] != '\0') c.threshold = 0;
    *out = c;
    return 0;
  }
  size_t pos = 0;
  const char* expected = NULL;
  if (scan_size(text, &pos, &c.threshold, &expected) != 0) {
    if (pos == 0 && (text[0] < '0' || text[0] > '9'))
      expected = "off or a size (digits, then a unit: " ADR_BYTESIZE_UNITS ")";
    return adr_syntax_error(error, var, text, pos, expected);
  }
  if (text[pos] == ':') {
    size_t start = ++pos;
    if (scan_size(text, &pos, &c.chunk, &expected) != 0)
      return adr_syntax_error(error, var, text, pos, expected);
    if (c.chunk < 4096)
      return adr_syntax_error(error, var, text, start, "a chunk size of at least 4 KiB");
    if (text[pos] == ':') {
      start = ++pos;
      unsigned n = 0;
      while (text[pos] >= '0' && text[pos] <= '9' && n <= ADR_STAGING_MAX_THREADS)
        n = n * 10 + (unsigned)(text[pos++] - '0');
      if (pos == start || n == 0 || n > ADR_STAGING_MAX_THREADS)
        return adr_syntax_error(error, var, text, start, "a number of threads from 1 to 64");
      c.threads = n;
    }
  }
  if (text[pos] != '\0') return adr_syntax_error(error, var, text, pos, "':' or the end");
  *out = c;
  return 0;
}

unsigned adr_staging_threads(const struct adr_staging_config* config) {
  if (config->threads != 0) return config->threads;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  long n = cpus / 4;
  return n < 1 ? 1u : n > 4 ? 4u : (unsigned)n;
}

/* ---- the memcpy crew ------------------------------------------------------
 *
 * One job at a time: the caller publishes it (a new generation), takes
 * slices itself, and waits until every slice is done; workers take slices
 * of the current generation until none is left. Slices are claimed with an
 * atomic counter, so a job finishes even if no worker wakes up (a child
 * after fork has none). `active` counts the workers inside a job: the
 * caller returns, and the next job is published, only when it is 0, so no
 * worker still holds an earlier job's pointers. */

#define CREW_MIN_SLICE ((size_t)256 << 10)

struct adr_copy_crew {
  pthread_mutex_t lock; /* guards everything but next and the job's bytes */
  pthread_cond_t wake, done;
  pthread_mutex_t busy; /* held by the copy that owns the job */
  pthread_t* workers;
  unsigned n_workers;
  bool stop;
  uint64_t generation;
  unsigned char* dst;
  const unsigned char* src;
  size_t len, slice;
  unsigned slices, finished, active;
  atomic_uint next;
};

/* Copies slices of the current job until none is left; the number copied. */
static unsigned crew_take(struct adr_copy_crew* c, unsigned char* dst, const unsigned char* src,
                          size_t len, size_t slice, unsigned slices) {
  unsigned copied = 0;
  for (;;) {
    unsigned i = atomic_fetch_add_explicit(&c->next, 1, memory_order_relaxed);
    if (i >= slices) return copied;
    size_t off = (size_t)i * slice, n = len - off < slice ? len - off : slice;
    memcpy(dst + off, src + off, n);
    copied++;
  }
}

static void* crew_main(void* arg) {
  struct adr_copy_crew* c = arg;
  uint64_t seen = 0;
  pthread_mutex_lock(&c->lock);
  for (;;) {
    while (!c->stop && c->generation == seen) pthread_cond_wait(&c->wake, &c->lock);
    if (c->stop) break;
    seen = c->generation;
    unsigned char* dst = c->dst;
    const unsigned char* src = c->src;
    size_t len = c->len, slice = c->slice;
    unsigned slices = c->slices;
    c->active++;
    pthread_mutex_unlock(&c->lock);
    unsigned copied = crew_take(c, dst, src, len, slice, slices);
    pthread_mutex_lock(&c->lock);
    c->finished += copied;
    if (--c->active == 0) pthread_cond_broadcast(&c->done);
  }
  pthread_mutex_unlock(&c->lock);
  return NULL;
}

static void crew_destroy(struct adr_copy_crew* c) {
  pthread_mutex_lock(&c->lock);
  c->stop = true;
  pthread_cond_broadcast(&c->wake);
  pthread_mutex_unlock(&c->lock);
  for (unsigned i = 0; i < c->n_workers; i++) pthread_join(c->workers[i], NULL);
  free(c->workers);
  pthread_cond_destroy(&c->wake);
  pthread_cond_destroy(&c->done);
  pthread_mutex_destroy(&c->lock);
  pthread_mutex_destroy(&c->busy);
  free(c);
}

/* `workers` threads (fewer if some cannot start; none is an answer too). */
static struct adr_copy_crew* crew_create(unsigned workers) {
  struct adr_copy_crew* c = calloc(1, sizeof(*c));
  if (c == NULL) return NULL;
  c->workers = calloc(workers, sizeof(*c->workers));
  if (c->workers == NULL) {
    free(c);
    return NULL;
  }
  pthread_mutex_init(&c->lock, NULL);
  pthread_mutex_init(&c->busy, NULL);
  pthread_cond_init(&c->wake, NULL);
  pthread_cond_init(&c->done, NULL);
  atomic_init(&c->next, 0);
  while (c->n_workers < workers &&
         pthread_create(&c->workers[c->n_workers], NULL, crew_main, c) == 0)
    c->n_workers++;
  return c;
}

/* The workers of `staging`, started on first use; NULL for one thread. */
static struct adr_copy_crew* crew_get(struct adr_staging* staging) {
  unsigned threads = adr_staging_threads(staging->config);
  if (threads <= 1) return NULL;
  pthread_mutex_lock(&staging->lock);
  if (staging->crew == NULL) staging->crew = crew_create(threads - 1);
  struct adr_copy_crew* c = staging->crew;
  pthread_mutex_unlock(&staging->lock);
  return c;
}

/* memcpy, split across the crew when it is free and `len` is worth it. */
static void crew_memcpy(struct adr_copy_crew* c, void* dst, const void* src, size_t len) {
  if (c == NULL || c->n_workers == 0 || len < 2 * CREW_MIN_SLICE ||
      pthread_mutex_trylock(&c->busy) != 0) {
    memcpy(dst, src, len);
    return;
  }
  unsigned parts = c->n_workers + 1;
  size_t slice = (len + parts - 1) / parts;
  if (slice < CREW_MIN_SLICE) slice = CREW_MIN_SLICE;
  slice = (slice + 63) & ~(size_t)63; /* whole cache lines */
  unsigned slices = (unsigned)((len + slice - 1) / slice);
  pthread_mutex_lock(&c->lock);
  while (c->active != 0) pthread_cond_wait(&c->done, &c->lock); /* late joiners of the last job */
  c->dst = dst;
  c->src = src;
  c->len = len;
  c->slice = slice;
  c->slices = slices;
  c->finished = 0;
  atomic_store_explicit(&c->next, 0, memory_order_relaxed);
  c->generation++;
  pthread_cond_broadcast(&c->wake);
  pthread_mutex_unlock(&c->lock);
  unsigned copied = crew_take(c, dst, src, len, slice, slices);
  pthread_mutex_lock(&c->lock);
  c->finished += copied;
  while (c->finished != c->slices || c->active != 0) pthread_cond_wait(&c->done, &c->lock);
  pthread_mutex_unlock(&c->lock);
  pthread_mutex_unlock(&c->busy);
}

/* ---- buffer pairs ------------------------------------------------------- */

void adr_staging_init(struct adr_staging* staging, const struct adr_staging_ops* ops,
                      const struct adr_staging_config* config) {
  staging->ops = ops;
  staging->config = config;
  pthread_mutex_init(&staging->lock, NULL);
  staging->free_list = NULL;
  staging->crew = NULL;
}

static void stage_destroy(const struct adr_staging_ops* ops, struct adr_stage* s) {
  for (int i = 0; i < 2; i++) {
    if (s->done[i] != NULL) ops->event_destroy(s->done[i]);
    if (s->buf[i] != NULL) ops->host_free(s->buf[i]);
  }
  free(s);
}

void adr_staging_fini(struct adr_staging* staging) {
  pthread_mutex_lock(&staging->lock);
  struct adr_stage* s = staging->free_list;
  struct adr_copy_crew* crew = staging->crew;
  staging->free_list = NULL;
  staging->crew = NULL;
  pthread_mutex_unlock(&staging->lock);
  if (crew != NULL) crew_destroy(crew);
  while (s != NULL) {
    struct adr_stage* next = s->next;
    stage_destroy(staging->ops, s);
    s = next;
  }
  pthread_mutex_destroy(&staging->lock);
}

/* A pair from the free list, or a new one: 0 or a vendor error. */
static int stage_get(struct adr_staging* staging, struct adr_stage** out) {
  pthread_mutex_lock(&staging->lock);
  struct adr_stage* s = staging->free_list;
  if (s != NULL) staging->free_list = s->next;
  pthread_mutex_unlock(&staging->lock);
  if (s != NULL) {
    *out = s;
    return 0;
  }
  s = calloc(1, sizeof(*s));
  if (s == NULL) return staging->ops->out_of_memory;
  int r = 0;
  for (int i = 0; i < 2 && r == 0; i++) {
    void* p = NULL;
    r = staging->ops->host_alloc(staging->config->chunk, &p);
    s->buf[i] = p;
    if (r == 0) r = staging->ops->event_create(&s->done[i]);
  }
  if (r != 0) {
    stage_destroy(staging->ops, s);
    return r;
  }
  *out = s;
  return 0;
}

static void stage_put(struct adr_staging* staging, struct adr_stage* s) {
  pthread_mutex_lock(&staging->lock);
  s->next = staging->free_list;
  staging->free_list = s;
  pthread_mutex_unlock(&staging->lock);
}

/* ---- the copies --------------------------------------------------------- */

static int to_device(const struct adr_staging_ops* ops, struct adr_copy_crew* crew, size_t chunk,
                     struct adr_stage* s, uintptr_t dst, const unsigned char* src, size_t size,
                     void* stream) {
  for (size_t off = 0, i = 0; off < size; off += chunk, i++) {
    size_t len = size - off < chunk ? size - off : chunk;
    int b = (int)(i & 1);
    int r = ops->event_synchronize(s->done[b]);
    if (r != 0) return r;
    crew_memcpy(crew, s->buf[b], src + off, len);
    r = ops->copy_async(dst + off, (uintptr_t)s->buf[b], len, true, stream);
    if (r == 0) r = ops->event_record(s->done[b], stream);
    if (r != 0) return r;
  }
  return 0;
}

/* Queues the transfer of chunk k into buffer k % 2. */
static int to_host_issue(const struct adr_staging_ops* ops, size_t chunk, struct adr_stage* s,
                         size_t k, uintptr_t src, size_t size, void* stream) {
  size_t off = k * chunk, len = size - off < chunk ? size - off : chunk;
  int b = (int)(k & 1);
  int r = ops->event_synchronize(s->done[b]);
  if (r == 0) r = ops->copy_async((uintptr_t)s->buf[b], src + off, len, false, stream);
  if (r == 0) r = ops->event_record(s->done[b], stream);
  return r;
}

static int to_host(const struct adr_staging_ops* ops, struct adr_copy_crew* crew, size_t chunk,
                   struct adr_stage* s, unsigned char* dst, uintptr_t src, size_t size,
                   void* stream) {
  size_t n = (size + chunk - 1) / chunk;
  int r = to_host_issue(ops, chunk, s, 0, src, size, stream);
  if (r == 0 && n > 1) r = to_host_issue(ops, chunk, s, 1, src, size, stream);
  for (size_t k = 0; r == 0 && k < n; k++) {
    size_t off = k * chunk, len = size - off < chunk ? size - off : chunk;
    int b = (int)(k & 1);
    r = ops->event_synchronize(s->done[b]);
    if (r != 0) break;
    crew_memcpy(crew, dst + off, s->buf[b], len);
    if (k + 2 < n) r = to_host_issue(ops, chunk, s, k + 2, src, size, stream);
  }
  return r;
}

static int staged(struct adr_staging* staging, bool device_bound, uintptr_t device,
                  unsigned char* host, size_t size, void* stream) {
  struct adr_stage* s = NULL;
  int r = stage_get(staging, &s);
  if (r != 0) return r;
  size_t chunk = staging->config->chunk;
  struct adr_copy_crew* crew = crew_get(staging);
  r = device_bound ? to_device(staging->ops, crew, chunk, s, device, host, size, stream)
                   : to_host(staging->ops, crew, chunk, s, host, device, size, stream);
  /* After a failure a chunk may still be in flight without its event. */
  if (r != 0) staging->ops->stream_synchronize(stream);
  stage_put(staging, s);
  return r;
}

int adr_staging_copy_to_device(struct adr_staging* staging, uintptr_t dst, const void* src,
                               size_t size, void* stream) {
  return staged(staging, true, dst, (unsigned char*)(uintptr_t)src, size, stream);
}

int adr_staging_copy_to_host(struct adr_staging* staging, void* dst, uintptr_t src, size_t size,
                             void* stream) {
  return staged(staging, false, src, dst, size, stream);
}
