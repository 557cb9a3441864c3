/* SPDX-License-Identifier: Apache-2.0
 *
 * Pinned staging of pageable copies (staging.h). */
#include "staging.h"

#include "bytesize.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
  struct adr_staging_config c = {ADR_STAGING_DEFAULT_THRESHOLD, ADR_STAGING_DEFAULT_CHUNK};
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
  }
  if (text[pos] != '\0') return adr_syntax_error(error, var, text, pos, "':' or the end");
  *out = c;
  return 0;
}

/* ---- buffer pairs ------------------------------------------------------- */

void adr_staging_init(struct adr_staging* staging, const struct adr_staging_ops* ops,
                      const struct adr_staging_config* config) {
  staging->ops = ops;
  staging->config = config;
  pthread_mutex_init(&staging->lock, NULL);
  staging->free_list = NULL;
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
  staging->free_list = NULL;
  pthread_mutex_unlock(&staging->lock);
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

static int to_device(const struct adr_staging_ops* ops, size_t chunk, struct adr_stage* s,
                     uintptr_t dst, const unsigned char* src, size_t size, void* stream) {
  for (size_t off = 0, i = 0; off < size; off += chunk, i++) {
    size_t len = size - off < chunk ? size - off : chunk;
    int b = (int)(i & 1);
    int r = ops->event_synchronize(s->done[b]);
    if (r != 0) return r;
    memcpy(s->buf[b], src + off, len);
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

static int to_host(const struct adr_staging_ops* ops, size_t chunk, struct adr_stage* s,
                   unsigned char* dst, uintptr_t src, size_t size, void* stream) {
  size_t n = (size + chunk - 1) / chunk;
  int r = to_host_issue(ops, chunk, s, 0, src, size, stream);
  if (r == 0 && n > 1) r = to_host_issue(ops, chunk, s, 1, src, size, stream);
  for (size_t k = 0; r == 0 && k < n; k++) {
    size_t off = k * chunk, len = size - off < chunk ? size - off : chunk;
    int b = (int)(k & 1);
    r = ops->event_synchronize(s->done[b]);
    if (r != 0) break;
    memcpy(dst + off, s->buf[b], len);
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
  r = device_bound ? to_device(staging->ops, chunk, s, device, host, size, stream)
                   : to_host(staging->ops, chunk, s, host, device, size, stream);
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
