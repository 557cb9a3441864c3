/* SPDX-License-Identifier: Apache-2.0
 *
 * The receiver: an ArrowDeviceArrayStream whose get_next takes the next
 * control message of the sender and, for a batch, allocates its buffers
 * on the receiver's device, receives the body chunks straight into them
 * (memory UCX can address) or through the bounce pipeline (memory it
 * cannot), then tells the sender it took the batch (a credit). Nothing
 * runs between get_next calls: the sender's rendezvous sends wait for the
 * receiver, which is the back-pressure.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adr/array.h"
#include "ucx_internal.h"

int ucx_ctrl_header(struct ucx_bytes* b, uint32_t type, uint32_t a, uint32_t c,
                    struct adr_error* error);
uint64_t ucx_ctrl_tag(uint16_t id, uint32_t stream, uint64_t seq);
void ucx_send_notice(struct adr_ucx_conn* conn, uint64_t tag, const void* buf, size_t size);
int ucx_post_direct(struct adr_ucx_conn* conn, const struct ucx_bodies* bodies,
                    const struct ucx_chunk* chunks, size_t n, uint64_t tag_base, bool sending,
                    struct ucx_reqs* set, ucp_mem_h** out_memh, size_t* out_n_memh,
                    const char* op, struct adr_error* error);

struct receiver {
  struct adr_ucx_conn* conn;
  struct adr_device* device;
  uint32_t stream;
  uint64_t ctrl_seq;
  uint64_t batches;
  uint64_t chunk;
  struct ArrowSchema schema;
  bool direct;
  bool ended;
  int status;
  struct adr_error last_error;
  struct ucx_bounce bounce;
  bool bounce_ready;
};

static const char* OP = "adr_ucx_receive_stream";

static int fail(struct receiver* r, int st, const struct adr_error* e, struct adr_error* error) {
  r->status = st;
  snprintf(r->last_error.message, sizeof(r->last_error.message), "%s", e->message);
  if (error != NULL) *error = r->last_error;
  return st;
}

static int receive_batch(struct receiver* r, const uint8_t* meta, size_t size,
                         struct ArrowDeviceArray* out, struct adr_error* error) {
  struct adr_ucx_conn* conn = r->conn;
  struct ArrowArray array = {0};
  struct ucx_bodies bodies = {0};
  struct ucx_chunk *direct = NULL, *bounced = NULL;
  size_t n_direct = 0, n_bounced = 0;
  struct ucx_reqs set = {0};
  ucp_mem_h* memh = NULL;
  size_t n_memh = 0;
  int st = ucx_meta_decode_batch(meta, size, &r->schema, r->device, r->direct, &array, &bodies,
                                 error);
  bool built = st == 0;
  if (!st)
    st = ucx_chunks_plan(&bodies, r->chunk, &direct, &n_direct, &bounced, &n_bounced, error);
  uint64_t tag_base =
      ucx_tag(conn->local_id, UCX_KIND_BODY, r->stream, (uint32_t)r->batches, 0);
  if (!st)
    st = ucx_post_direct(conn, &bodies, direct, n_direct, tag_base, false, &set, &memh, &n_memh,
                         OP, error);
  if (!st && n_bounced > 0) {
    if (!r->bounce_ready) {
      st = ucx_bounce_init(&r->bounce, conn->w, r->device, conn->opt.bounce_slots, r->chunk,
                           error);
      r->bounce_ready = st == 0;
    }
    if (!st)
      st = ucx_bounce_recv(conn, &r->bounce, &bodies, r->device, bounced, n_bounced, tag_base, OP,
                           error);
  }
  if (!st) st = ucx_reqs_wait(conn, &set, OP, "receiving batch bodies", error);
  if (st && set.n > 0) ucx_conn_abort(conn, &set);
  ucx_reqs_free(&set);
  for (size_t i = 0; i < n_memh; i++)
    if (memh[i] != NULL) ucp_mem_unmap(conn->w->context, memh[i]);
  free(memh);
  free(direct);
  free(bounced);
  ucx_bodies_free(&bodies);
  if (!st) st = adr_device_array_init(r->device, &array, NULL, out, error);
  if (st && built && array.release != NULL) array.release(&array);
  if (!st) {
    r->batches++;
    uint64_t credit = r->batches;
    /* The batch is whole: a sender gone by now (it may leave once it has
     * sent an error after this batch) shows at the next get_next. */
    struct adr_error ignored;
    if (ucx_send(conn, ucx_tag(conn->peer_id, UCX_KIND_CREDIT, r->stream, 0, 0), &credit,
                 sizeof(credit), NULL, NULL, OP, &ignored) != 0 &&
        conn->ep_status == UCS_OK && !atomic_load(&conn->cancelled)) {
      st = adr_error_set(error, EIO, "%s", ignored.message);
      adr_device_array_release(out);
    }
  }
  return st;
}

static int get_next(struct ArrowDeviceArrayStream* stream, struct ArrowDeviceArray* out) {
  struct receiver* r = stream->private_data;
  memset(out, 0, sizeof(*out));
  if (r->status != 0) return r->status;
  if (r->ended) return 0;
  struct adr_error e = {{0}};
  void* msg = NULL;
  size_t size = 0;
  int st = ucx_recv_any(r->conn, ucx_ctrl_tag(r->conn->local_id, r->stream, r->ctrl_seq),
                        UCX_TAG_MASK_ALL, &msg, &size, NULL, OP, &e);
  if (st) {
    if (st == ECANCELED) {
      uint64_t cancel = UCX_CREDIT_CANCEL;
      ucx_send_notice(r->conn, ucx_tag(r->conn->peer_id, UCX_KIND_CREDIT, r->stream, 0, 0),
                      &cancel, sizeof(cancel));
    }
    return fail(r, st, &e, NULL);
  }
  r->ctrl_seq++;
  uint32_t h[4];
  if (size < sizeof(h)) {
    free(msg);
    adr_error_set(&e, EPROTO, "[%s][ucx] a %zu-byte control message", OP, size);
    return fail(r, EPROTO, &e, NULL);
  }
  memcpy(h, msg, sizeof(h));
  const uint8_t* body = (const uint8_t*)msg + sizeof(h);
  size_t body_size = size - sizeof(h);
  if (h[0] != UCX_PROTOCOL_MAGIC) {
    st = adr_error_set(&e, EPROTO, "[%s][ucx] bad control message magic %08x", OP, h[0]);
  } else if (h[1] == UCX_CTRL_END) {
    r->ended = true;
  } else if (h[1] == UCX_CTRL_ERROR) {
    int status = h[2] > 0 && h[2] < 4096 ? (int)h[2] : EIO;
    st = adr_error_set(&e, status, "[%s][ucx] the sender failed: %.*s", OP,
                       (int)(body_size < 900 ? body_size : 900), (const char*)body);
  } else if (h[1] == UCX_CTRL_BATCH) {
    if (h[2] != (uint32_t)r->batches)
      st = adr_error_set(&e, EPROTO, "[%s][ucx] batch %u arrived, %llu expected", OP, h[2],
                         (unsigned long long)r->batches);
    else
      st = receive_batch(r, body, body_size, out, &e);
  } else {
    st = adr_error_set(&e, EPROTO, "[%s][ucx] unexpected control message type %u", OP, h[1]);
  }
  free(msg);
  if (st) {
    if (st == ECANCELED && atomic_load(&r->conn->cancelled)) {
      uint64_t cancel = UCX_CREDIT_CANCEL;
      ucx_send_notice(r->conn, ucx_tag(r->conn->peer_id, UCX_KIND_CREDIT, r->stream, 0, 0),
                      &cancel, sizeof(cancel));
    }
    return fail(r, st, &e, NULL);
  }
  return 0;
}

static int get_schema(struct ArrowDeviceArrayStream* stream, struct ArrowSchema* out) {
  struct receiver* r = stream->private_data;
  struct adr_error e = {{0}};
  int st = adr_schema_copy(&r->schema, out, &e);
  if (st) snprintf(r->last_error.message, sizeof(r->last_error.message), "%s", e.message);
  return st;
}

static const char* get_last_error(struct ArrowDeviceArrayStream* stream) {
  struct receiver* r = stream->private_data;
  return r->last_error.message[0] ? r->last_error.message : NULL;
}

static void release(struct ArrowDeviceArrayStream* stream) {
  struct receiver* r = stream->private_data;
  if (r == NULL) return;
  struct adr_ucx_conn* conn = r->conn;
  if (!r->ended && r->status == 0 && conn->ep_status == UCS_OK && !conn->broken) {
    /* Released before the end: tell the sender, and the connection is done
     * (its pending sends are for a reader that is gone). */
    uint64_t cancel = UCX_CREDIT_CANCEL;
    ucx_send_notice(conn, ucx_tag(conn->peer_id, UCX_KIND_CREDIT, r->stream, 0, 0), &cancel,
                    sizeof(cancel));
    conn->broken = true;
  }
  if (r->bounce_ready) ucx_bounce_release(&r->bounce, conn->w);
  if (r->schema.release != NULL) r->schema.release(&r->schema);
  conn->receiving = false;
  ucx_conn_unref(conn);
  free(r);
  stream->release = NULL;
  stream->private_data = NULL;
}

int ucx_receive_stream(struct adr_ucx_conn* conn, struct adr_device* device,
                       struct ArrowDeviceArrayStream* out, struct adr_error* error) {
  int st = ucx_conn_check(conn, OP, error);
  if (st) return st;
  if (conn->receiving)
    return adr_error_set(error, EBUSY, "[%s][ucx] the connection's previous receive stream is "
                         "still alive", OP);
  struct receiver* r = calloc(1, sizeof(*r));
  if (r == NULL) return adr_error_set(error, ENOMEM, "[%s][ucx] out of memory", OP);
  r->conn = conn;
  r->device = device;
  r->stream = conn->recv_stream;
  r->direct = ucx_device_direct(device);
  void* msg = NULL;
  size_t size = 0;
  st = ucx_recv_any(conn, ucx_ctrl_tag(conn->local_id, r->stream, 0), UCX_TAG_MASK_ALL, &msg,
                    &size, NULL, OP, error);
  if (!st) {
    uint32_t h[4] = {0};
    if (size >= sizeof(h)) memcpy(h, msg, sizeof(h));
    if (size < sizeof(h) || h[0] != UCX_PROTOCOL_MAGIC || h[1] != UCX_CTRL_SCHEMA)
      st = adr_error_set(error, EPROTO, "[%s][ucx] the stream does not start with a schema", OP);
    else {
      r->chunk = (uint64_t)h[2] | ((uint64_t)h[3] << 32);
      if (r->chunk < 4096 || r->chunk > (1ull << 32))
        st = adr_error_set(error, EPROTO, "[%s][ucx] chunk size %llu", OP,
                           (unsigned long long)r->chunk);
      else
        st = ucx_meta_decode_schema((const uint8_t*)msg + sizeof(h), size - sizeof(h),
                                    &r->schema, error);
    }
    free(msg);
  }
  if (st) {
    free(r);
    return st;
  }
  conn->recv_stream++;
  r->ctrl_seq = 1;
  conn->receiving = true;
  atomic_fetch_add(&conn->refs, 1);
  memset(out, 0, sizeof(*out));
  out->device_type = device != NULL ? adr_device_type(device) : ARROW_DEVICE_CPU;
  out->get_schema = get_schema;
  out->get_next = get_next;
  out->get_last_error = get_last_error;
  out->release = release;
  out->private_data = r;
  return 0;
}
