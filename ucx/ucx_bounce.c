/* SPDX-License-Identifier: Apache-2.0
 *
 * The bounce pipeline: chunks of memory UCX cannot address (OpenCL
 * buffers, Vulkan device-local memory, CUDA/HIP device memory) go through
 * a few host slots registered with UCX (ucp_mem_map), and page-locked with
 * the device's driver where it has such a notion (adr_host_register).
 * Each slot cycles through a device copy and a transfer; with two or more
 * slots the copy of one chunk overlaps the transfer of another. Copies run
 * on a stream of the bounce's own and are tracked with one event per slot,
 * so the loop never blocks on a copy: it polls the events between calls
 * to ucp_worker_progress.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ucx_internal.h"

/* ADR_UCX_FORCE_BOUNCE=1 sends every device's memory through the bounce
 * buffer (tests and measurements of that path on any device). */
static pthread_once_t force_once = PTHREAD_ONCE_INIT;
static bool force_bounce;

static void read_force(void) {
  const char* v = secure_getenv("ADR_UCX_FORCE_BOUNCE"); /* unset in elevated processes */
  force_bounce = v != NULL && v[0] == '1';
}

bool ucx_device_direct(struct adr_device* device) {
  pthread_once(&force_once, read_force);
  if (force_bounce) return false;
  if (device == NULL) return true;
  /* Device objects live as long as the process and their capabilities do
   * not change, so the answer is kept (adr_device_info_get also reads the
   * free memory, too slow for every batch). */
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  static struct {
    struct adr_device* device;
    bool direct;
  } cache[32];
  static size_t cached;
  pthread_mutex_lock(&lock);
  for (size_t i = 0; i < cached; i++) {
    if (cache[i].device == device) {
      bool d = cache[i].direct;
      pthread_mutex_unlock(&lock);
      return d;
    }
  }
  pthread_mutex_unlock(&lock);
  struct adr_device_info info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  if (adr_device_info_get(device, &info, NULL) != 0) return false;
  bool direct = (info.caps & ADR_CAP_HOST_ACCESSIBLE) != 0;
  pthread_mutex_lock(&lock);
  if (cached < sizeof(cache) / sizeof(cache[0])) {
    cache[cached].device = device;
    cache[cached].direct = direct;
    cached++;
  }
  pthread_mutex_unlock(&lock);
  return direct;
}

int ucx_bounce_init(struct ucx_bounce* b, struct ucx_worker* w, struct adr_device* device,
                    size_t slots, uint64_t chunk, struct adr_error* error) {
  memset(b, 0, sizeof(*b));
  b->device = device;
  b->slots = slots;
  b->chunk = chunk;
  size_t bytes = slots * chunk;
  b->base = aligned_alloc(4096, bytes);
  b->events = calloc(slots, sizeof(*b->events));
  if (b->base == NULL || b->events == NULL) {
    free(b->base);
    free(b->events);
    return adr_error_set(error, ENOMEM, "[adr_ucx][ucx] out of memory for %zu bounce bytes",
                         bytes);
  }
  /* No device: the slots only compose host pieces (no copies to order). */
  int st = device != NULL ? adr_stream_create(device, &b->stream, error) : 0;
  for (size_t i = 0; !st && device != NULL && i < slots; i++)
    st = adr_event_create(device, &b->events[i], error);
  if (!st) {
    ucp_mem_map_params_t mp = {0};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = b->base;
    mp.length = bytes;
    ucs_status_t us = ucp_mem_map(w->context, &mp, &b->memh);
    if (us != UCS_OK) {
      b->memh = NULL;
      st = ucx_status_error(error, "adr_ucx", us, "ucp_mem_map of the bounce buffer");
    }
  }
  if (st) {
    ucx_bounce_release(b, w);
    return st;
  }
  /* Faster device copies where the driver can pin host memory; ENOTSUP
   * (OpenCL, Vulkan) is fine. */
  b->host_registered = device != NULL && adr_host_register(device, b->base, bytes, NULL) == 0;
  return 0;
}

void ucx_bounce_release(struct ucx_bounce* b, struct ucx_worker* w) {
  if (b->stream != NULL) {
    (void)adr_stream_synchronize(b->stream, NULL);
    (void)adr_stream_destroy(b->stream, NULL);
  }
  if (b->events != NULL)
    for (size_t i = 0; i < b->slots; i++)
      if (b->events[i] != NULL) (void)adr_event_destroy(b->events[i], NULL);
  if (b->memh != NULL) ucp_mem_unmap(w->context, b->memh);
  if (b->host_registered) (void)adr_host_unregister(b->device, b->base, NULL);
  free(b->events);
  free(b->base);
  memset(b, 0, sizeof(*b));
}

int ucx_chunks_plan(const struct ucx_body* body, bool sending, uint64_t chunk,
                    struct ucx_chunk** out, size_t* out_n, struct adr_error* error) {
  uint64_t size = body->size > 0 ? (uint64_t)body->size : 0;
  size_t n = (size_t)((size + chunk - 1) / chunk);
  *out = NULL;
  *out_n = 0;
  if (n > UCX_MAX_BATCH_MESSAGES)
    return adr_error_set(error, EOVERFLOW,
                         "[adr_ucx] a body of %zu messages (at most %u: raise chunk_size)", n,
                         UCX_MAX_BATCH_MESSAGES);
  struct ucx_chunk* c = calloc(n + 1, sizeof(*c));
  if (c == NULL) return adr_error_set(error, ENOMEM, "[adr_ucx] out of memory (chunk plan)");
  size_t p = 0; /* pieces are in body order */
  for (size_t k = 0; k < n; k++) {
    uint64_t off = (uint64_t)k * chunk;
    uint64_t len = size - off < chunk ? size - off : chunk;
    c[k] = (struct ucx_chunk){(uint32_t)k, off, len, NULL};
    if (!sending) {
      if (body->direct) c[k].direct = body->base + off;
      continue;
    }
    while (p < body->n_pieces &&
           (uint64_t)(body->pieces[p].body_offset + body->pieces[p].size) <= off)
      p++;
    if (p < body->n_pieces) {
      const struct adr_ipc_body_buffer* piece = &body->pieces[p];
      if ((uint64_t)piece->body_offset <= off &&
          (uint64_t)(piece->body_offset + piece->size) >= off + len &&
          ucx_device_direct(piece->device))
        c[k].direct = (uint8_t*)piece->data + (off - (uint64_t)piece->body_offset);
    }
  }
  *out = c;
  *out_n = n;
  return 0;
}

/* Sending: fills a slot with body bytes [c->offset, + c->size): zeros, then
 * each piece's overlap, copied by the host or queued on the bounce's
 * stream. */
static int compose(struct ucx_bounce* b, const struct ucx_body* body, const struct ucx_chunk* c,
                   uint8_t* slot, struct adr_error* error) {
  memset(slot, 0, c->size);
  uint64_t lo = c->offset, hi = c->offset + c->size;
  for (size_t i = 0; i < body->n_pieces; i++) {
    const struct adr_ipc_body_buffer* piece = &body->pieces[i];
    uint64_t a = (uint64_t)piece->body_offset, z = a + (uint64_t)piece->size;
    if (z <= lo || a >= hi || piece->size == 0) continue;
    uint64_t from = a > lo ? a : lo, to = z < hi ? z : hi;
    const uint8_t* src = (const uint8_t*)piece->data + (from - a);
    if (ucx_device_direct(piece->device)) {
      memcpy(slot + (from - lo), src, to - from);
    } else {
      int st = adr_copy(NULL, slot + (from - lo), piece->device, src, to - from, b->stream, error);
      if (st) return st;
    }
  }
  return 0;
}

enum slot_state { SLOT_FREE, SLOT_COPYING, SLOT_TRANSFER };

struct slot {
  enum slot_state state;
  void* req;
  size_t chunk;
};

int ucx_bounce_run(struct adr_ucx_conn* conn, struct ucx_bounce* b, const struct ucx_body* body,
                   const struct ucx_chunk* all, size_t n_all, uint64_t tag_base, bool sending,
                   const char* op, struct adr_error* error) {
  size_t n = 0;
  for (size_t i = 0; i < n_all; i++) n += all[i].direct == NULL;
  if (n == 0) return 0;
  size_t ns = b->slots;
  struct slot* slots = calloc(ns, sizeof(*slots));
  const struct ucx_chunk** chunks = calloc(n, sizeof(*chunks));
  if (slots == NULL || chunks == NULL) {
    free(slots);
    free(chunks);
    return adr_error_set(error, ENOMEM, "[%s][ucx] out of memory", op);
  }
  n = 0;
  for (size_t i = 0; i < n_all; i++)
    if (all[i].direct == NULL) chunks[n++] = &all[i];
  size_t next = 0, done = 0;
  int st = 0;
  struct ucx_waiter w;
  ucx_waiter_init(&w);
  while (st == 0 && done < n) {
    bool moved = false;
    for (size_t s = 0; st == 0 && s < ns; s++) {
      struct slot* sl = &slots[s];
      uint8_t* buf = b->base + s * b->chunk;
      if (sl->state == SLOT_FREE && next < n) {
        sl->chunk = next++;
        const struct ucx_chunk* c = chunks[sl->chunk];
        if (sending) {
          st = compose(b, body, c, buf, error);
          if (!st && b->stream != NULL) st = adr_event_record(b->events[s], b->stream, error);
          sl->state = SLOT_COPYING;
        } else {
          ucp_request_param_t p = {0};
          p.op_attr_mask = UCP_OP_ATTR_FIELD_MEMH;
          p.memh = b->memh;
          ucs_status_ptr_t r = ucp_tag_recv_nbx(conn->w->worker, buf, c->size,
                                                tag_base | c->index, UCX_TAG_MASK_ALL, &p);
          if (UCS_PTR_IS_ERR(r))
            st = ucx_request_failed(conn, UCS_PTR_STATUS(r), op, "ucp_tag_recv_nbx", error);
          sl->req = UCS_PTR_IS_ERR(r) ? NULL : r;
          sl->state = SLOT_TRANSFER;
        }
        moved = true;
        continue;
      }
      if (sl->state == SLOT_TRANSFER) {
        ucs_status_t us = sl->req ? ucp_request_check_status(sl->req) : UCS_OK;
        if (us == UCS_INPROGRESS) continue;
        if (sl->req) ucp_request_free(sl->req);
        sl->req = NULL;
        moved = true;
        if (us != UCS_OK) {
          st = ucx_request_failed(conn, us, op, "a bounced chunk", error);
          sl->state = SLOT_FREE;
          break;
        }
        if (sending) {
          sl->state = SLOT_FREE;
          done++;
        } else {
          const struct ucx_chunk* c = chunks[sl->chunk];
          st = adr_copy(body->device, body->base + c->offset, NULL, buf, c->size, b->stream,
                        error);
          if (!st && b->stream != NULL) st = adr_event_record(b->events[s], b->stream, error);
          sl->state = SLOT_COPYING;
        }
        continue;
      }
      if (sl->state == SLOT_COPYING) {
        if (b->stream != NULL) {
          int q = adr_event_query(b->events[s], NULL);
          if (q == EBUSY) continue;
          if (q != 0) {
            st = adr_event_synchronize(b->events[s], error);
            if (st == 0) st = adr_error_set(error, q, "[%s][ucx] a bounce copy failed", op);
            break;
          }
        }
        moved = true;
        if (sending) {
          const struct ucx_chunk* c = chunks[sl->chunk];
          ucp_request_param_t p = {0};
          p.op_attr_mask = UCP_OP_ATTR_FIELD_MEMH;
          p.memh = b->memh;
          ucs_status_ptr_t r = ucp_tag_send_nbx(conn->ep, buf, c->size, tag_base | c->index, &p);
          if (UCS_PTR_IS_ERR(r)) {
            st = ucx_request_failed(conn, UCS_PTR_STATUS(r), op, "ucp_tag_send_nbx", error);
            sl->state = SLOT_FREE;
            break;
          }
          sl->req = r;
          sl->state = SLOT_TRANSFER;
        } else {
          sl->state = SLOT_FREE;
          done++;
        }
      }
    }
    if (st) break;
    st = ucx_conn_check(conn, op, error);
    if (st) break;
    ucx_waiter_step(&w, moved);
    if (ucx_waiter_expired(&w, conn->opt.timeout_ms))
      st = adr_error_set(error, ETIMEDOUT, "[%s][ucx] no progress for %d ms on bounced chunks",
                         op, conn->opt.timeout_ms);
    if (!st) ucx_waiter_acted(&w, ucx_progress(conn->w, ucx_waiter_mode(&w, sending)));
  }
  if (st) {
    struct ucx_reqs left = {0};
    for (size_t s = 0; s < ns; s++)
      if (slots[s].state == SLOT_TRANSFER && slots[s].req != NULL &&
          ucx_reqs_add(&left, slots[s].req, op, "", NULL) != 0)
        ucp_request_free(slots[s].req);
    ucx_conn_abort(conn, &left);
    ucx_reqs_free(&left);
    if (b->stream != NULL) (void)adr_stream_synchronize(b->stream, NULL);
  }
  free(slots);
  free(chunks);
  return st;
}
