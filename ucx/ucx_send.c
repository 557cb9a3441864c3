/* SPDX-License-Identifier: Apache-2.0
 *
 * The sender: pulls batches from any ArrowDeviceArrayStream and sends
 * them (docs/ucx.md, "Wire protocol"). Per batch: its dictionaries, then
 * the batch itself, each an Arrow IPC message (adr/ipc.h) whose metadata
 * goes in one control message and whose body follows in chunks, straight
 * from the batch's memory (registered with ucp_mem_map, rendezvous for
 * large chunks) or composed in the bounce buffer. A batch stays in flight,
 * and owned here with its encoded messages, until its sends have
 * completed; the receiver's credits bound how many batches are sent ahead
 * of what it has taken (max_inflight_batches).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "adr/array.h"
#include "ucx_internal.h"

#define MAP_THRESHOLD (64u << 10)

struct inflight {
  bool used;
  uint64_t seq; /* its place in the stream (0, 1, ...) */
  struct ArrowDeviceArray batch;
  struct adr_ipc_message* msgs; /* what the sends read (host copies among them) */
  size_t n_msgs;
  struct ucx_reqs reqs;
  struct ucx_reg** regs; /* registrations of its buffers (the cache's) */
  size_t n_regs;
};

/* Frees what the slot's batch held once its sends completed; the batch is
 * released, or moved into *keep (a batch *keep held is released). */
static void inflight_retire(struct adr_ucx_conn* conn, struct inflight* f,
                            struct ArrowDeviceArray* keep) {
  for (size_t i = 0; i < f->n_regs; i++) ucx_rcache_put(conn->w->rcache, f->regs[i]);
  free(f->regs);
  f->regs = NULL;
  f->n_regs = 0;
  /* The message array stays for the slot's next batch (same length). */
  for (size_t i = 0; i < f->n_msgs; i++) adr_ipc_message_release(&f->msgs[i]);
  f->n_msgs = 0;
  ucx_reqs_free(&f->reqs);
  if (keep != NULL) {
    if (keep->array.release != NULL) adr_device_array_release(keep);
    adr_device_array_move(&f->batch, keep);
  } else {
    adr_device_array_release(&f->batch);
  }
  f->used = false;
}

static void send_error_notice(struct adr_ucx_conn* conn, uint32_t stream, uint64_t seq, int status,
                              const char* message) {
  struct ucx_bytes b = {0};
  if (ucx_ctrl_header(&b, UCX_CTRL_ERROR, (uint32_t)status, 0, NULL) == 0 &&
      ucx_bytes_put(&b, message, strlen(message), NULL) == 0)
    ucx_send_notice(conn, ucx_ctrl_tag(conn->peer_id, stream, seq), b.data, b.size);
  ucx_bytes_free(&b);
}

/* Posts the sends of a body's in-place chunks; each piece of 64 KiB or
 * more is registered once (regs[piece], from the registration cache). */
static int post_direct(struct adr_ucx_conn* conn, const struct ucx_body* body,
                       const struct ucx_chunk* chunks, size_t n, uint64_t tag_base,
                       struct inflight* f, const char* op, struct adr_error* error) {
  struct ucx_reg** regs = calloc(body->n_pieces + 1, sizeof(*regs));
  if (regs == NULL) return adr_error_set(error, ENOMEM, "[%s][ucx] out of memory", op);
  /* Kept with the batch: put back once its sends completed. */
  struct ucx_reg** all = realloc(f->regs, (f->n_regs + body->n_pieces + 1) * sizeof(*all));
  if (all == NULL) {
    free(regs);
    return adr_error_set(error, ENOMEM, "[%s][ucx] out of memory", op);
  }
  f->regs = all;
  int st = 0;
  size_t p = 0;
  for (size_t i = 0; st == 0 && i < n; i++) {
    const struct ucx_chunk* c = &chunks[i];
    if (c->direct == NULL) continue;
    while (p + 1 < body->n_pieces &&
           (uint64_t)(body->pieces[p].body_offset + body->pieces[p].size) <= c->offset)
      p++;
    const struct adr_ipc_body_buffer* piece = &body->pieces[p];
    if (regs[p] == NULL && piece->size >= (int64_t)MAP_THRESHOLD)
      st = ucx_rcache_get(conn->w->rcache, (void*)piece->data, (size_t)piece->size, &regs[p], op,
                          error);
    if (!st)
      st = ucx_send(conn, tag_base | c->index, c->direct, c->size,
                    regs[p] ? ucx_reg_memh(regs[p]) : NULL, &f->reqs, op, error);
  }
  for (size_t i = 0; i < body->n_pieces; i++)
    if (regs[i] != NULL) f->regs[f->n_regs++] = regs[i];
  free(regs);
  return st;
}

static void count_control(struct adr_ucx_send_stats* stats, size_t bytes) {
  stats->control_messages++;
  stats->control_bytes += (int64_t)bytes;
}

struct sender {
  struct adr_ucx_conn* conn;
  uint32_t stream;
  uint64_t ctrl_seq;
  uint64_t credit_value;
  void* credit_req;
  uint64_t taken;
  bool cancelled_by_peer;
  /* Record batch metadata sent, which the next batches' are sent as
   * patches against (ucx_meta.c). */
  struct ucx_meta_memo memo;
};

static int post_credit_recv(struct sender* s, const char* op, struct adr_error* error) {
  ucp_request_param_t p = {0};
  ucs_status_ptr_t r =
      ucp_tag_recv_nbx(s->conn->w->worker, &s->credit_value, sizeof(s->credit_value),
                       ucx_tag(s->conn->local_id, UCX_KIND_CREDIT, s->stream, 0, 0),
                       UCX_TAG_MASK_NO_BATCH_INDEX, &p);
  if (UCS_PTR_IS_ERR(r)) return ucx_status_error(error, op, UCS_PTR_STATUS(r), "ucp_tag_recv_nbx");
  s->credit_req = r;
  s->conn->credit_req = r;
  s->conn->credit_value = &s->credit_value;
  return 0;
}

/* Takes in the credits that arrived. The receive of the next credit is
 * posted at once, or with `defer` left for the next call: the sender then
 * sends the batch a credit let go before it posts that receive (the next
 * credit cannot come before the batch is taken). */
static int poll_credits(struct sender* s, bool defer, bool* out_moved, const char* op,
                        struct adr_error* error) {
  for (int guard = 0; guard < 64; guard++) {
    if (s->credit_req == NULL) {
      if (defer) return 0;
      /* NULL again: the credit had come and was received at once. */
      int st = post_credit_recv(s, op, error);
      if (st) return st;
    }
    if (s->credit_req != NULL) {
      ucs_status_t us = ucp_request_check_status(s->credit_req);
      if (us == UCS_INPROGRESS) return 0;
      ucp_request_free(s->credit_req);
      s->credit_req = NULL;
      s->conn->credit_req = NULL;
      if (us != UCS_OK) return ucx_request_failed(s->conn, us, op, "receiving a credit", error);
    }
    *out_moved = true;
    if (s->credit_value == UCX_CREDIT_CANCEL) {
      s->cancelled_by_peer = true;
      return adr_error_set(error, ECANCELED, "[%s][ucx] the receiver cancelled the stream", op);
    }
    if (s->credit_value > s->taken) s->taken = s->credit_value;
  }
  return 0;
}

static void cancel_credit_recv(struct sender* s) {
  s->conn->credit_req = NULL;
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
  struct ucx_waiter w;
  ucx_waiter_init(&w);
  int st = 0;
  while (!st && s->taken < sent) {
    bool moved = false;
    st = poll_credits(s, false, &moved, op, error);
    if (!st) st = ucx_conn_check(conn, op, error);
    if (st && conn->ep_status != UCS_OK && !s->cancelled_by_peer) {
      /* The receiver may have taken the last batch and left: its credit
       * came in with the news. */
      int again = poll_credits(s, false, &moved, op, NULL);
      if (again == 0 && s->taken >= sent) return 0;
    }
    ucx_waiter_step(&w, moved);
    if (!st && ucx_waiter_expired(&w, conn->opt.timeout_ms))
      st =
          adr_error_set(error, ETIMEDOUT, "[%s][ucx] the receiver did not take the last batch", op);
    if (!st && s->taken < sent)
      ucx_waiter_acted(&w, ucx_progress(conn->w, ucx_waiter_mode(&w, false)));
  }
  return st;
}

/* Composes the control message of one IPC message into `ctrl` (its
 * sequence number is written when it is sent): the header, the metadata or
 * its patch, and a small body inline. Done ahead of the send, while the
 * sender waits, so that a small batch's send is a single UCX call. */
static int compose(struct sender* s, const struct adr_ipc_message* m, struct ucx_bytes* ctrl,
                   struct adr_error* error) {
  /* An empty body counts as inline: the message is then whole too. */
  bool inline_body = m->body_size <= UCX_INLINE_BODY_MAX;
  bool record = m->type == ADR_IPC_MESSAGE_RECORD_BATCH;
  uint32_t flags = (inline_body ? UCX_MSG_INLINE : 0) | (record ? UCX_MSG_RECORD : 0);
  int st = ucx_ctrl_header(ctrl, UCX_CTRL_MESSAGE, 0, flags, error);
  /* A record batch's metadata goes as a patch against an earlier one's of
   * the same size when that is smaller: for batches of one shape, a few
   * bytes. */
  bool patched = false;
  if (!st && record)
    st = ucx_meta_patch(ctrl, &s->memo, m->metadata, (size_t)m->metadata_size, &patched, error);
  if (!st && patched) {
    flags |= UCX_MSG_PATCH;
    memcpy(ctrl->data + 3 * sizeof(uint32_t), &flags, sizeof(flags));
  }
  if (!st && !patched) st = ucx_bytes_put(ctrl, m->metadata, (size_t)m->metadata_size, error);
  if (!st && record) st = ucx_meta_remember(&s->memo, m->metadata, (size_t)m->metadata_size, error);
  if (!st && inline_body) {
    /* A small body rides in the control message: one message instead of
     * two, and no receive to post for it. */
    size_t at = ctrl->size;
    uint8_t zeros[256] = {0};
    for (int64_t left = m->body_size; !st && left > 0; left -= (int64_t)sizeof(zeros))
      st = ucx_bytes_put(ctrl, zeros, left < (int64_t)sizeof(zeros) ? (size_t)left : sizeof(zeros),
                         error);
    for (int64_t i = 0; !st && i < m->n_buffers; i++) {
      const struct adr_ipc_body_buffer* piece = &m->buffers[i];
      if (piece->size == 0) continue;
      uint8_t* dst = ctrl->data + at + piece->body_offset;
      if (ucx_device_direct(piece->device))
        memcpy(dst, piece->data, (size_t)piece->size);
      else
        st = adr_copy(NULL, dst, piece->device, piece->data, (size_t)piece->size, NULL, error);
    }
  }
  return st;
}

/* Sends one IPC message: its control message (composed), then its body's
 * chunks (posted in place, or through the bounce buffer, which is (re)made
 * for the device a piece is on). */
static int send_message(struct sender* s, struct inflight* f, const struct adr_ipc_message* m,
                        struct ucx_bytes* ctrl, struct ucx_bounce* bounce, bool* bounce_ready,
                        struct adr_ucx_send_stats* stats, const char* op, struct adr_error* error) {
  struct adr_ucx_conn* conn = s->conn;
  uint64_t seq = s->ctrl_seq++;
  uint32_t words[2] = {(uint32_t)seq, 0};
  memcpy(ctrl->data + 2 * sizeof(uint32_t), &words[0], sizeof(words[0]));
  memcpy(&words[1], ctrl->data + 3 * sizeof(uint32_t), sizeof(words[1]));
  bool inline_body = (words[1] & UCX_MSG_INLINE) != 0;
  int st = ucx_send(conn, ucx_ctrl_tag(conn->peer_id, s->stream, seq), ctrl->data, ctrl->size, NULL,
                    NULL, op, error);
  if (!st) {
    count_control(stats, ctrl->size);
    if (words[1] & UCX_MSG_PATCH) stats->patched_messages++;
  }
  /* The receive of the next credit, left unposted by the credit that let
   * this batch go (poll_credits): posted now that the batch is on its way,
   * before any body goes, so that a cancel is seen while they do. */
  if (!st && s->credit_req == NULL) {
    bool moved = false;
    st = poll_credits(s, false, &moved, op, error);
  }
  if (!st && inline_body) {
    stats->body_bytes += m->body_size;
    stats->bounced_bytes += m->body_size;
  }
  if (st || inline_body) return st;
  struct ucx_body body = {
      .pieces = m->buffers, .n_pieces = (size_t)m->n_buffers, .size = m->body_size};
  struct ucx_chunk* chunks = NULL;
  size_t n = 0;
  st = ucx_chunks_plan(&body, true, conn->opt.chunk_size, &chunks, &n, error);
  uint64_t tag_base = ucx_tag(conn->peer_id, UCX_KIND_BODY, s->stream, (uint32_t)seq, 0);
  if (!st) st = post_direct(conn, &body, chunks, n, tag_base, f, op, error);
  size_t bounced = 0;
  for (size_t i = 0; i < n; i++) {
    if (chunks[i].direct != NULL) continue;
    bounced++;
    stats->bounced_bytes += (int64_t)chunks[i].size;
  }
  /* Composed chunks need device copies only when a piece is on a device
   * UCX cannot address. */
  struct adr_device* copy_device = NULL;
  for (size_t i = 0; i < body.n_pieces; i++)
    if (!ucx_device_direct(body.pieces[i].device)) copy_device = body.pieces[i].device;
  if (!st && bounced > 0) {
    if (*bounce_ready && bounce->device != copy_device) {
      ucx_bounce_release(bounce, conn->w);
      *bounce_ready = false;
    }
    if (!*bounce_ready) {
      st = ucx_bounce_init(bounce, conn->w, copy_device, conn->opt.bounce_slots,
                           conn->opt.chunk_size, error);
      *bounce_ready = st == 0;
    }
    if (!st) st = ucx_bounce_run(conn, bounce, &body, chunks, n, tag_base, true, op, error);
  }
  free(chunks);
  stats->body_bytes += m->body_size;
  return st;
}

/* The source's next batch with its messages encoded (the dictionaries that
 * changed since `prev`, the batch sent before it, then the record batch;
 * the encoder waits for the batch's sync_event). Made while the sender
 * waits for a credit or a slot, so that neither the producer nor the
 * encoder is on the round trip. */
struct prepared {
  struct ArrowDeviceArray batch; /* release NULL: the end of the source */
  struct adr_ipc_message* msgs;  /* room for n_dict + 1 */
  struct ucx_bytes* ctrl;        /* their control messages (compose) */
  size_t n_msgs;
  int st; /* a source or encoding error, with its message in `error` */
  struct adr_error error;
};

static void prepare(struct sender* s, struct prepared* p, struct ArrowDeviceArrayStream* source,
                    const struct ArrowSchema* schema, struct adr_ipc_encoder* encoder,
                    int64_t n_dict, const struct ArrowDeviceArray* prev, const char* op) {
  struct adr_error* e = &p->error;
  p->n_msgs = 0;
  int st = adr_device_array_stream_next(source, &p->batch, e);
  if (!st && p->batch.array.release != NULL && p->msgs == NULL) {
    p->msgs = calloc((size_t)n_dict + 1, sizeof(*p->msgs));
    if (p->msgs == NULL) st = adr_error_set(e, ENOMEM, "[%s][ucx] out of memory", op);
  }
  if (!st && p->batch.array.release != NULL && p->ctrl == NULL) {
    p->ctrl = calloc((size_t)n_dict + 1, sizeof(*p->ctrl));
    if (p->ctrl == NULL) st = adr_error_set(e, ENOMEM, "[%s][ucx] out of memory", op);
  }
  for (int64_t id = 0; !st && p->batch.array.release != NULL && id < n_dict; id++) {
    bool unchanged = false;
    if (prev != NULL) st = adr_ipc_dictionary_unchanged(schema, prev, &p->batch, id, &unchanged, e);
    if (!st && !unchanged) {
      st = adr_ipc_encode_dictionary_batch(schema, &p->batch, id, &p->msgs[p->n_msgs], e);
      if (!st) p->n_msgs++;
    }
  }
  if (!st && p->batch.array.release != NULL) {
    st = adr_ipc_encoder_record_batch(encoder, &p->batch, &p->msgs[p->n_msgs], e);
    if (!st) p->n_msgs++;
  }
  for (size_t k = 0; !st && k < p->n_msgs; k++) st = compose(s, &p->msgs[k], &p->ctrl[k], e);
  p->st = st;
}

/* The batch sent before the next one (sent - 1), alive in its ring slot or
 * in `last`; NULL before the first. */
static const struct ArrowDeviceArray* previous(const struct inflight* ring, size_t n, uint64_t sent,
                                               const struct ArrowDeviceArray* last) {
  if (last->array.release != NULL) return last;
  for (size_t i = 0; sent > 0 && i < n; i++)
    if (ring[i].used && ring[i].seq + 1 == sent) return &ring[i].batch;
  return NULL;
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
  struct adr_ipc_encoder* encoder = NULL;
  struct ucx_bytes msg = {0};
  struct adr_ipc_message schema_msg = {0};
  struct ucx_bounce bounce = {0};
  bool bounce_ready = false;
  bool source_failed = false;
  struct adr_ucx_send_stats stats = {0};
  uint64_t sent = 0;
  int64_t n_dict = 0;
  /* With dictionaries, the last batch sent stays alive after its sends
   * completed (here, or in its ring slot) until the next batch's
   * dictionaries are compared with its own: an unchanged dictionary is
   * not sent again, and an equal pointer cannot be reused memory. Its
   * slot is free meanwhile: with `ahead`, at most max_inflight + 1
   * batches are held. */
  struct ArrowDeviceArray last = {0};
  /* The next batch, prepared while the sender waits for a credit or a free
   * slot. */
  struct prepared ahead = {0};
  bool have_ahead = false;
  if (ring == NULL) return adr_error_set(error, ENOMEM, "[%s][ucx] out of memory", op);

  st = adr_device_array_stream_get_schema(source, &schema, error);
  if (st) source_failed = true;
  uint64_t chunk = conn->opt.chunk_size;
  if (!st) st = adr_ipc_encode_schema(&schema, &schema_msg, error);
  if (!st) st = adr_ipc_schema_dictionary_count(&schema, &n_dict, error);
  /* One encoder for the stream: batches of one shape reuse the metadata. */
  if (!st) st = adr_ipc_encoder_create(&schema, &encoder, error);
  if (st) source_failed = true;
  if (!st)
    st = ucx_ctrl_header(&msg, UCX_CTRL_SCHEMA, (uint32_t)chunk, (uint32_t)(chunk >> 32), error);
  if (!st) st = ucx_bytes_put(&msg, schema_msg.metadata, (size_t)schema_msg.metadata_size, error);
  adr_ipc_message_release(&schema_msg);
  if (!st) st = post_credit_recv(&s, op, error);
  if (!st)
    st = ucx_send(conn, ucx_ctrl_tag(conn->peer_id, s.stream, s.ctrl_seq++), msg.data, msg.size,
                  NULL, NULL, op, error);
  if (!st) count_control(&stats, msg.size);

  struct ucx_waiter w;
  ucx_waiter_init(&w);
  while (st == 0) {
    bool moved = false;
    for (size_t i = 0; i < max_inflight; i++) {
      if (!ring[i].used) continue;
      size_t done;
      ucs_status_t failed;
      ucx_reqs_reap(&ring[i].reqs, &done, &failed);
      if (done) moved = true;
      if (failed != UCS_OK) {
        st = ucx_request_failed(conn, failed, op, "sending a body", error);
        break;
      }
      if (ring[i].reqs.n == 0)
        inflight_retire(conn, &ring[i], n_dict > 0 && ring[i].seq + 1 == sent ? &last : NULL);
    }
    if (!st) st = poll_credits(&s, true, &moved, op, error);
    if (!st) st = ucx_conn_check(conn, op, error);
    if (st) break;
    struct inflight* slot = NULL;
    for (size_t i = 0; i < max_inflight && slot == NULL; i++)
      if (!ring[i].used) slot = &ring[i];
    if (slot == NULL || sent - s.taken >= max_inflight) {
      /* Waiting: the next credit's receive is posted first (it may find
       * the credit already there). */
      if (s.credit_req == NULL) {
        uint64_t taken = s.taken;
        st = poll_credits(&s, false, &moved, op, error);
        if (st) break;
        if (s.taken != taken) continue;
      }
      if (!have_ahead) {
        prepare(&s, &ahead, source, &schema, encoder, n_dict,
                previous(ring, max_inflight, sent, &last), op);
        have_ahead = moved = true;
      }
      ucx_waiter_step(&w, moved);
      if (ucx_waiter_expired(&w, conn->opt.timeout_ms)) {
        st = adr_error_set(error, ETIMEDOUT,
                           "[%s][ucx] the receiver took no batch for %d ms (%llu sent, %llu taken)",
                           op, conn->opt.timeout_ms, (unsigned long long)sent,
                           (unsigned long long)s.taken);
        break;
      }
      /* Bodies still going out need this side's progress: no sleep. */
      bool sending = false;
      for (size_t i = 0; i < max_inflight; i++) sending |= ring[i].used && ring[i].reqs.n > 0;
      ucx_waiter_acted(&w, ucx_progress(conn->w, ucx_waiter_mode(&w, sending)));
      continue;
    }
    ucx_waiter_step(&w, true);
    if (!have_ahead)
      prepare(&s, &ahead, source, &schema, encoder, n_dict,
              previous(ring, max_inflight, sent, &last), op);
    have_ahead = false;
    /* The slot takes the batch and its messages (the message arrays swap). */
    slot->batch = ahead.batch;
    memset(&ahead.batch, 0, sizeof(ahead.batch));
    struct adr_ipc_message* spare = slot->msgs;
    slot->msgs = ahead.msgs;
    slot->n_msgs = ahead.n_msgs;
    ahead.msgs = spare;
    ahead.n_msgs = 0;
    if (slot->batch.array.release != NULL) {
      slot->used = true;
      slot->seq = sent;
    }
    if (ahead.st) {
      st = ahead.st;
      if (error != NULL) *error = ahead.error;
      source_failed = true;
      break;
    }
    if (!slot->used) break; /* the end of the source */
    for (size_t k = 0; !st && k < slot->n_msgs; k++)
      st = send_message(&s, slot, &slot->msgs[k], &ahead.ctrl[k], &bounce, &bounce_ready, &stats,
                        op, error);
    if (st) break;
    sent++;
    stats.batches++;
    if (last.array.release != NULL) adr_device_array_release(&last); /* compared */
    int64_t inflight_now = (int64_t)(sent - s.taken);
    if (inflight_now > stats.max_inflight) stats.max_inflight = inflight_now;
  }
  if (st == 0) {
    /* The end: every batch's sends complete and taken by the receiver. */
    st = ucx_ctrl_header(&msg, UCX_CTRL_END, (uint32_t)sent, 0, error);
    if (!st)
      st = ucx_send(conn, ucx_ctrl_tag(conn->peer_id, s.stream, s.ctrl_seq++), msg.data, msg.size,
                    NULL, NULL, op, error);
    if (!st) count_control(&stats, msg.size);
    for (size_t i = 0; !st && i < max_inflight; i++) {
      if (!ring[i].used) continue;
      st = ucx_reqs_wait(conn, &ring[i].reqs, op, "sending batch bodies", error);
      if (!st) inflight_retire(conn, &ring[i], NULL);
    }
    if (!st) st = wait_taken(&s, sent, op, error);
  } else if (source_failed && conn->ep_status == UCS_OK && !atomic_load(&conn->cancelled)) {
    /* The receiver gets the source's error; batches already announced
     * still go out so that nothing is left half-sent. */
    send_error_notice(conn, s.stream, s.ctrl_seq++, st, error ? error->message : "source error");
    for (size_t i = 0; i < max_inflight; i++) {
      if (!ring[i].used) continue;
      if (ucx_reqs_wait(conn, &ring[i].reqs, op, "sending batch bodies", NULL) != 0) break;
      inflight_retire(conn, &ring[i], NULL);
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
    conn->credit_req = NULL;
    ucx_conn_abort(conn, &all);
    ucx_reqs_free(&all);
  }
  cancel_credit_recv(&s);
  for (size_t i = 0; i < max_inflight; i++) {
    if (ring[i].used)
      inflight_retire(conn, &ring[i], NULL);
    else
      ucx_reqs_free(&ring[i].reqs);
    free(ring[i].msgs);
  }
  if (last.array.release != NULL) adr_device_array_release(&last);
  for (size_t k = 0; k < ahead.n_msgs; k++) adr_ipc_message_release(&ahead.msgs[k]);
  free(ahead.msgs);
  for (size_t k = 0; ahead.ctrl != NULL && k <= (size_t)n_dict; k++) ucx_bytes_free(&ahead.ctrl[k]);
  free(ahead.ctrl);
  if (ahead.batch.array.release != NULL) adr_device_array_release(&ahead.batch);
  if (bounce_ready) ucx_bounce_release(&bounce, conn->w);
  free(ring);
  ucx_bytes_free(&msg);
  ucx_meta_memo_free(&s.memo);
  adr_ipc_encoder_destroy(encoder);
  if (schema.release != NULL) schema.release(&schema);
  stats.direct_bytes = stats.body_bytes - stats.bounced_bytes;
  if (out_stats != NULL) {
    uint32_t size = out_stats->struct_size;
    stats.struct_size = size;
    memcpy(out_stats, &stats, size < sizeof(stats) ? size : sizeof(stats));
  }
  return st;
}
