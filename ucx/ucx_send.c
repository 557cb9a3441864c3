/* SPDX-License-Identifier: Apache-2.0
 *
 * The sender: pulls batches from any ArrowDeviceArrayStream and sends
 * them (docs/ucx.md, "Wire protocol"). Per batch: one control message with
 * the metadata, then the body chunks, straight from the batch's memory
 * (registered with ucp_mem_map, rendezvous for large chunks) or through
 * the bounce pipeline. A batch stays in flight, and owned here, until its
 * sends have completed; the receiver's credits bound how many batches are
 * sent ahead of what it has taken (max_inflight_batches).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "adr/array.h"
#include "ucx_internal.h"

#define MAP_THRESHOLD (64u << 10)

struct inflight {
  bool used;
  struct ArrowDeviceArray batch;
  struct ucx_reqs reqs;
  ucp_mem_h* memh;
  size_t n_memh;
};

static void inflight_retire(struct adr_ucx_conn* conn, struct inflight* f) {
  for (size_t i = 0; i < f->n_memh; i++)
    if (f->memh[i] != NULL) ucp_mem_unmap(conn->w->context, f->memh[i]);
  free(f->memh);
  f->memh = NULL;
  f->n_memh = 0;
  ucx_reqs_free(&f->reqs);
  adr_device_array_release(&f->batch);
  f->used = false;
}

int ucx_ctrl_header(struct ucx_bytes* b, uint32_t type, uint32_t a, uint32_t c,
                    struct adr_error* error);
int ucx_ctrl_header(struct ucx_bytes* b, uint32_t type, uint32_t a, uint32_t c,
                    struct adr_error* error) {
  uint32_t h[4] = {UCX_PROTOCOL_MAGIC, type, a, c};
  b->size = 0;
  if (b->cap < sizeof(h)) {
    uint8_t* d = realloc(b->data, 256);
    if (d == NULL) return adr_error_set(error, ENOMEM, "[adr_ucx] out of memory");
    b->data = d;
    b->cap = 256;
  }
  memcpy(b->data, h, sizeof(h));
  b->size = sizeof(h);
  return 0;
}

uint64_t ucx_ctrl_tag(uint16_t id, uint32_t stream, uint64_t seq);
uint64_t ucx_ctrl_tag(uint16_t id, uint32_t stream, uint64_t seq) {
  return ucx_tag(id, UCX_KIND_CTRL, stream, (uint32_t)(seq >> 24), (uint32_t)seq);
}

/* Best effort, past cancellation: a short message the peer should see
 * before this side closes. */
void ucx_send_notice(struct adr_ucx_conn* conn, uint64_t tag, const void* buf, size_t size);
void ucx_send_notice(struct adr_ucx_conn* conn, uint64_t tag, const void* buf, size_t size) {
  if (conn->ep == NULL || conn->ep_status != UCS_OK) return;
  ucp_request_param_t p = {0};
  ucs_status_ptr_t r = ucp_tag_send_nbx(conn->ep, buf, size, tag, &p);
  if (r == NULL || UCS_PTR_IS_ERR(r)) return;
  double start = ucx_now();
  while (ucp_request_check_status(r) == UCS_INPROGRESS && ucx_now() - start < 0.5 &&
         conn->ep_status == UCS_OK)
    ucx_progress(conn->w, ucx_now() - start > 1e-3);
  if (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_request_cancel(conn->w->worker, r);
  ucp_request_free(r);
}

static void send_error_notice(struct adr_ucx_conn* conn, uint32_t stream, uint64_t seq, int status,
                              const char* message) {
  struct ucx_bytes b = {0};
  if (ucx_ctrl_header(&b, UCX_CTRL_ERROR, (uint32_t)status, 0, NULL) == 0) {
    size_t n = strlen(message);
    uint8_t* d = realloc(b.data, b.size + n + 1);
    if (d != NULL) {
      b.data = d;
      memcpy(b.data + b.size, message, n);
      ucx_send_notice(conn, ucx_ctrl_tag(conn->peer_id, stream, seq), b.data, b.size + n);
    }
  }
  ucx_bytes_free(&b);
}

static int map_region(struct adr_ucx_conn* conn, void* ptr, size_t size, ucp_mem_h* out,
                      const char* op, struct adr_error* error) {
  ucp_mem_map_params_t mp = {0};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  mp.address = ptr;
  mp.length = size;
  ucs_status_t us = ucp_mem_map(conn->w->context, &mp, out);
  if (us != UCS_OK) {
    *out = NULL;
    return ucx_status_error(error, op, us, "ucp_mem_map of a batch buffer");
  }
  return 0;
}

int ucx_post_direct(struct adr_ucx_conn* conn, const struct ucx_bodies* bodies,
                    const struct ucx_chunk* chunks, size_t n, uint64_t tag_base, bool sending,
                    struct ucx_reqs* set, ucp_mem_h** out_memh, size_t* out_n_memh,
                    const char* op, struct adr_error* error);
int ucx_post_direct(struct adr_ucx_conn* conn, const struct ucx_bodies* bodies,
                    const struct ucx_chunk* chunks, size_t n, uint64_t tag_base, bool sending,
                    struct ucx_reqs* set, ucp_mem_h** out_memh, size_t* out_n_memh,
                    const char* op, struct adr_error* error) {
  ucp_mem_h* memh = calloc(bodies->n + 1, sizeof(*memh));
  if (memh == NULL) return adr_error_set(error, ENOMEM, "[%s][ucx] out of memory", op);
  *out_memh = memh;
  *out_n_memh = bodies->n;
  int st = 0;
  for (size_t i = 0; st == 0 && i < n; i++) {
    const struct ucx_chunk* c = &chunks[i];
    const struct ucx_body* body = &bodies->items[c->body];
    if (c->offset == 0 && body->size >= MAP_THRESHOLD)
      st = map_region(conn, body->ptr, body->size, &memh[c->body], op, error);
    if (st) break;
    uint8_t* p = (uint8_t*)body->ptr + c->offset;
    if (sending)
      st = ucx_send(conn, tag_base | c->index, p, c->size, memh[c->body], set, op, error);
    else
      st = ucx_recv(conn, tag_base | c->index, UCX_TAG_MASK_ALL, p, c->size, memh[c->body], set,
                    op, error);
  }
  return st;
}

struct sender {
  struct adr_ucx_conn* conn;
  uint32_t stream;
  uint64_t ctrl_seq;
  uint64_t credit_value;
  void* credit_req;
  uint64_t taken;
  bool cancelled_by_peer;
};

static int post_credit_recv(struct sender* s, const char* op, struct adr_error* error) {
  ucp_request_param_t p = {0};
  ucs_status_ptr_t r =
      ucp_tag_recv_nbx(s->conn->w->worker, &s->credit_value, sizeof(s->credit_value),
                       ucx_tag(s->conn->local_id, UCX_KIND_CREDIT, s->stream, 0, 0),
                       UCX_TAG_MASK_NO_BATCH_INDEX, &p);
  if (UCS_PTR_IS_ERR(r)) return ucx_status_error(error, op, UCS_PTR_STATUS(r), "ucp_tag_recv_nbx");
  s->credit_req = r;
  if (r == NULL) s->credit_req = NULL;
  return 0;
}

/* Takes in the credits that arrived. */
static int poll_credits(struct sender* s, bool* out_moved, const char* op,
                        struct adr_error* error) {
  for (int guard = 0; guard < 64; guard++) {
    if (s->credit_req != NULL) {
      ucs_status_t us = ucp_request_check_status(s->credit_req);
      if (us == UCS_INPROGRESS) return 0;
      ucp_request_free(s->credit_req);
      s->credit_req = NULL;
      if (us != UCS_OK) {
        if (s->conn->ep_status != UCS_OK) return ucx_conn_check(s->conn, op, error);
        return ucx_status_error(error, op, us, "receiving a credit");
      }
    }
    *out_moved = true;
    if (s->credit_value == UCX_CREDIT_CANCEL) {
      s->cancelled_by_peer = true;
      return adr_error_set(error, ECANCELED, "[%s][ucx] the receiver cancelled the stream", op);
    }
    if (s->credit_value > s->taken) s->taken = s->credit_value;
    int st = post_credit_recv(s, op, error);
    if (st) return st;
    if (s->credit_req != NULL) return 0;
  }
  return 0;
}

static void cancel_credit_recv(struct sender* s) {
  if (s->credit_req == NULL) return;
  ucp_request_cancel(s->conn->w->worker, s->credit_req);
  double start = ucx_now();
  while (ucp_request_check_status(s->credit_req) == UCS_INPROGRESS && ucx_now() - start < 1.0)
    ucx_progress(s->conn->w, false);
  ucp_request_free(s->credit_req);
  s->credit_req = NULL;
}

/* Waits until the receiver has taken `sent` batches. */
static int wait_taken(struct sender* s, uint64_t sent, const char* op, struct adr_error* error) {
  struct adr_ucx_conn* conn = s->conn;
  double since = ucx_now();
  int st = 0;
  while (!st && s->taken < sent) {
    bool moved = false;
    st = poll_credits(s, &moved, op, error);
    if (!st) st = ucx_conn_check(conn, op, error);
    if (st && conn->ep_status != UCS_OK && !s->cancelled_by_peer) {
      /* The receiver may have taken the last batch and left: its credit
       * came in with the news. */
      int again = poll_credits(s, &moved, op, NULL);
      if (again == 0 && s->taken >= sent) return 0;
    }
    if (moved) since = ucx_now();
    if (!st && conn->opt.timeout_ms >= 0 && ucx_now() - since > conn->opt.timeout_ms / 1000.0)
      st = adr_error_set(error, ETIMEDOUT, "[%s][ucx] the receiver did not take the last batch",
                         op);
    if (!st && s->taken < sent) ucx_progress(conn->w, ucx_now() - since > 2e-3);
  }
  return st;
}

int ucx_send_stream(struct adr_ucx_conn* conn, struct ArrowDeviceArrayStream* source,
                    struct adr_ucx_send_stats* out_stats, struct adr_error* error) {
  const char* op = "adr_ucx_send_stream";
  int st = ucx_conn_check(conn, op, error);
  if (st) return st;
  struct sender s = {.conn = conn, .stream = conn->send_stream++};
  size_t max_inflight = conn->opt.max_inflight_batches;
  struct inflight* ring = calloc(max_inflight, sizeof(*ring));
  struct ArrowSchema schema = {0};
  struct ucx_bytes msg = {0};
  struct ucx_bodies bodies = {0};
  struct ucx_chunk *direct = NULL, *bounced = NULL;
  struct ucx_bounce bounce = {0};
  bool bounce_ready = false;
  bool source_failed = false;
  struct adr_ucx_send_stats stats = {0};
  uint64_t sent = 0;
  if (ring == NULL) return adr_error_set(error, ENOMEM, "[%s][ucx] out of memory", op);

  st = adr_device_array_stream_get_schema(source, &schema, error);
  if (st) source_failed = true;
  uint64_t chunk = conn->opt.chunk_size;
  if (!st) st = ucx_ctrl_header(&msg, UCX_CTRL_SCHEMA, (uint32_t)chunk, (uint32_t)(chunk >> 32), error);
  if (!st) st = ucx_meta_encode_schema(&schema, &msg, error);
  if (!st) st = post_credit_recv(&s, op, error);
  if (!st)
    st = ucx_send(conn, ucx_ctrl_tag(conn->peer_id, s.stream, s.ctrl_seq++), msg.data, msg.size,
                  NULL, NULL, op, error);

  double last = ucx_now();
  while (st == 0) {
    bool moved = false;
    for (size_t i = 0; i < max_inflight; i++) {
      if (!ring[i].used) continue;
      size_t done;
      ucs_status_t failed;
      ucx_reqs_reap(&ring[i].reqs, &done, &failed);
      if (done) moved = true;
      if (failed != UCS_OK) {
        st = conn->ep_status != UCS_OK ? ucx_conn_check(conn, op, error)
                                       : ucx_status_error(error, op, failed, "sending a body");
        break;
      }
      if (ring[i].reqs.n == 0) inflight_retire(conn, &ring[i]);
    }
    if (!st) st = poll_credits(&s, &moved, op, error);
    if (!st) st = ucx_conn_check(conn, op, error);
    if (st) break;
    struct inflight* slot = NULL;
    for (size_t i = 0; i < max_inflight && slot == NULL; i++)
      if (!ring[i].used) slot = &ring[i];
    if (slot == NULL || sent - s.taken >= max_inflight) {
      double now = ucx_now();
      if (moved) last = now;
      else if (conn->opt.timeout_ms >= 0 && now - last > conn->opt.timeout_ms / 1000.0) {
        st = adr_error_set(error, ETIMEDOUT,
                           "[%s][ucx] the receiver took no batch for %d ms (%llu sent, %llu taken)",
                           op, conn->opt.timeout_ms, (unsigned long long)sent,
                           (unsigned long long)s.taken);
        break;
      }
      ucx_progress(conn->w, !moved && now - last > 2e-3);
      continue;
    }
    last = ucx_now();
    /* The next batch from the source. */
    st = adr_device_array_stream_next(source, &slot->batch, error);
    if (st) {
      source_failed = true;
      break;
    }
    if (slot->batch.array.release == NULL) break;
    slot->used = true;
    struct adr_device* dev = NULL;
    st = adr_device_array_device(&slot->batch, &dev, error);
    if (!st && slot->batch.device_type == ARROW_DEVICE_CPU) dev = NULL;
    if (!st) st = adr_device_array_wait(&slot->batch, NULL, error);
    if (st) {
      source_failed = true;
      break;
    }
    bool is_direct = ucx_device_direct(dev);
    bodies.n = 0;
    bodies.total = 0;
    st = ucx_ctrl_header(&msg, UCX_CTRL_BATCH, (uint32_t)sent, 0, error);
    if (!st)
      st = ucx_meta_encode_batch(&schema, &slot->batch.array, dev, is_direct, &msg, &bodies, error);
    if (st) {
      source_failed = st != ENOMEM;
      break;
    }
    size_t n_direct = 0, n_bounced = 0;
    free(direct);
    free(bounced);
    direct = bounced = NULL;
    st = ucx_chunks_plan(&bodies, chunk, &direct, &n_direct, &bounced, &n_bounced, error);
    if (!st)
      st = ucx_send(conn, ucx_ctrl_tag(conn->peer_id, s.stream, s.ctrl_seq++), msg.data, msg.size,
                    NULL, NULL, op, error);
    uint64_t tag_base = ucx_tag(conn->peer_id, UCX_KIND_BODY, s.stream, (uint32_t)sent, 0);
    if (!st)
      st = ucx_post_direct(conn, &bodies, direct, n_direct, tag_base, true, &slot->reqs,
                           &slot->memh, &slot->n_memh, op, error);
    if (!st && n_bounced > 0) {
      if (!bounce_ready) {
        st = ucx_bounce_init(&bounce, conn->w, dev, conn->opt.bounce_slots, chunk, error);
        bounce_ready = st == 0;
      } else if (bounce.device != dev) {
        ucx_bounce_release(&bounce, conn->w);
        bounce_ready = false;
        st = ucx_bounce_init(&bounce, conn->w, dev, conn->opt.bounce_slots, chunk, error);
        bounce_ready = st == 0;
      }
      if (!st)
        st = ucx_bounce_send(conn, &bounce, &bodies, dev, bounced, n_bounced, tag_base, op, error);
    }
    if (st) break;
    sent++;
    stats.batches++;
    stats.body_bytes += (int64_t)bodies.total;
    for (size_t i = 0; i < n_bounced; i++) stats.bounced_bytes += (int64_t)bounced[i].size;
    int64_t inflight_now = (int64_t)(sent - s.taken);
    if (inflight_now > stats.max_inflight) stats.max_inflight = inflight_now;
  }
  if (st == 0) {
    /* The end: every batch's sends complete and taken by the receiver. */
    st = ucx_ctrl_header(&msg, UCX_CTRL_END, (uint32_t)sent, 0, error);
    if (!st)
      st = ucx_send(conn, ucx_ctrl_tag(conn->peer_id, s.stream, s.ctrl_seq++), msg.data, msg.size,
                    NULL, NULL, op, error);
    for (size_t i = 0; !st && i < max_inflight; i++) {
      if (!ring[i].used) continue;
      st = ucx_reqs_wait(conn, &ring[i].reqs, op, "sending batch bodies", error);
      if (!st) inflight_retire(conn, &ring[i]);
    }
    if (!st) st = wait_taken(&s, sent, op, error);
  } else if (source_failed && conn->ep_status == UCS_OK && !atomic_load(&conn->cancelled)) {
    /* The receiver gets the source's error; batches already announced
     * still go out so that nothing is left half-sent. */
    send_error_notice(conn, s.stream, s.ctrl_seq++, st, error ? error->message : "source error");
    for (size_t i = 0; i < max_inflight; i++) {
      if (!ring[i].used) continue;
      if (ucx_reqs_wait(conn, &ring[i].reqs, op, "sending batch bodies", NULL) != 0) break;
      inflight_retire(conn, &ring[i]);
    }
    /* Leave only once the receiver has taken what was announced (it reads
     * the error after them). */
    (void)wait_taken(&s, sent, op, NULL);
  } else if (atomic_load(&conn->cancelled) && !s.cancelled_by_peer) {
    send_error_notice(conn, s.stream, s.ctrl_seq++, ECANCELED, "the sender cancelled the stream");
  }
  bool dirty = false;
  for (size_t i = 0; i < max_inflight; i++) dirty |= ring[i].used && ring[i].reqs.n > 0;
  if (st != 0 && (dirty || s.credit_req != NULL)) {
    /* Sends the receiver will never take: force-close so UCX completes
     * them, then everything can be freed. */
    struct ucx_reqs all = {0};
    for (size_t i = 0; i < max_inflight; i++) {
      for (size_t k = 0; ring[i].used && k < ring[i].reqs.n; k++)
        if (ucx_reqs_add(&all, ring[i].reqs.reqs[k], op, "", NULL) != 0)
          ucp_request_free(ring[i].reqs.reqs[k]);
      ring[i].reqs.n = 0;
    }
    if (s.credit_req != NULL && ucx_reqs_add(&all, s.credit_req, op, "", NULL) != 0)
      ucp_request_free(s.credit_req);
    s.credit_req = NULL;
    ucx_conn_abort(conn, &all);
    ucx_reqs_free(&all);
  }
  cancel_credit_recv(&s);
  for (size_t i = 0; i < max_inflight; i++)
    if (ring[i].used) inflight_retire(conn, &ring[i]);
    else ucx_reqs_free(&ring[i].reqs);
  if (bounce_ready) ucx_bounce_release(&bounce, conn->w);
  free(ring);
  free(direct);
  free(bounced);
  ucx_bodies_free(&bodies);
  ucx_bytes_free(&msg);
  if (schema.release != NULL) schema.release(&schema);
  stats.direct_bytes = stats.body_bytes - stats.bounced_bytes;
  if (out_stats != NULL) {
    uint32_t size = out_stats->struct_size;
    stats.struct_size = size;
    memcpy(out_stats, &stats, size < sizeof(stats) ? size : sizeof(stats));
  }
  return st;
}
