/* SPDX-License-Identifier: Apache-2.0
 *
 * The receiver: an ArrowDeviceArrayStream whose get_next takes the
 * sender's next control messages: each dictionary or record batch is an
 * Arrow IPC message whose body is allocated on the receiver's device and
 * received in place (memory UCX can address) or through the bounce
 * pipeline (memory it cannot), then assembled by adr's IPC reader
 * (adr/ipc.h), which checks it against the schema. After a record batch
 * the sender is told it was taken (a credit). Nothing runs between
 * get_next calls: the sender's rendezvous sends wait for the receiver,
 * which is the back-pressure.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adr/array.h"
#include "ucx_internal.h"

struct receiver {
  struct adr_ucx_conn* conn;
  struct adr_device* device;
  uint32_t stream;
  uint64_t ctrl_seq;
  uint64_t batches;
  uint64_t chunk;
  struct adr_ipc_reader* reader;
  bool direct;
  bool ended;
  int status;
  struct adr_error last_error;
  struct ucx_bounce bounce;
  bool bounce_ready;
  struct ucx_bytes ctrl; /* the control messages, one buffer reused */
  /* Record batch metadata received, which patched ones are written over
   * (ucx_meta.c). */
  struct ucx_meta_memo memo;
};

static const char* OP = "adr_ucx_receive_stream";

static int fail(struct receiver* r, int st, const struct adr_error* e) {
  r->status = st;
  snprintf(r->last_error.message, sizeof(r->last_error.message), "%s", e->message);
  return st;
}

/* Decodes an encapsulated IPC message (prefix + metadata) at the start of
 * data; *out_used (may be NULL: then it must be all of data) receives its
 * size. */
static int decode(const uint8_t* data, size_t size, int64_t index, struct adr_ipc_decoded* out,
                  size_t* out_used, struct adr_error* error) {
  int64_t meta = 0;
  if (size < ADR_IPC_PREFIX_SIZE)
    return adr_error_set(error, EPROTO, "[%s][ucx] a %zu-byte IPC message", OP, size);
  int st = adr_ipc_decode_prefix(data, index, &meta, error);
  if (!st && ((uint64_t)meta > size - ADR_IPC_PREFIX_SIZE ||
              (out_used == NULL && (uint64_t)meta != size - ADR_IPC_PREFIX_SIZE)))
    st = adr_error_set(error, EPROTO, "[%s][ucx] IPC metadata of %lld bytes in a %zu-byte message",
                       OP, (long long)meta, size);
  if (!st) st = adr_ipc_decode_message(data + ADR_IPC_PREFIX_SIZE, (size_t)meta, index, out, error);
  if (!st && out_used != NULL) *out_used = ADR_IPC_PREFIX_SIZE + (size_t)meta;
  return st;
}

/* Bodies come from the reader: a host reader recycles them (the body of
 * the batch the application released is the next one's, pages mapped and
 * registered already); a device reader allocates with adr_alloc. */
static void body_free(struct receiver* r, const struct adr_ipc_decoded* m, void* body) {
  adr_ipc_reader_free_body(r->reader, m, body);
}

/* Receives the body of `m` (tag number `seq`) into *out_body (NULL for an
 * empty body; the caller owns it, body_free). */
static int receive_body(struct receiver* r, const struct adr_ipc_decoded* m, uint32_t seq,
                        const uint8_t* inline_body, void** out_body, struct adr_error* error) {
  struct adr_ucx_conn* conn = r->conn;
  void* body = NULL;
  int st = adr_ipc_reader_alloc_body(r->reader, m, &body, error);
  if (!st && inline_body != NULL) {
    if (m->body_size == 0)
      st = 0;
    else if (r->direct)
      memcpy(body, inline_body, (size_t)m->body_size);
    else
      st = adr_copy(r->device, body, NULL, inline_body, (size_t)m->body_size, NULL, error);
    if (st) {
      body_free(r, m, body);
      return st;
    }
    *out_body = body;
    return 0;
  }
  struct ucx_chunk* chunks = NULL;
  size_t n = 0;
  struct ucx_body b = {
      .base = body, .device = r->device, .direct = r->direct, .size = m->body_size};
  if (!st) st = ucx_chunks_plan(&b, false, r->chunk, &chunks, &n, error);
  uint64_t tag_base = ucx_tag(conn->local_id, UCX_KIND_BODY, r->stream, seq, 0);
  struct ucx_reqs set = {0};
  /* Bodies from a pool come back at the same addresses: the cache maps
   * them once. Unregistered memory still works (UCX copies), so a failed
   * registration is no error. */
  struct ucx_reg* reg = NULL;
  if (!st && r->direct && m->body_size >= (64 << 10) &&
      ucx_rcache_get(conn->w->rcache, body, (size_t)m->body_size, &reg, OP, NULL) != 0)
    reg = NULL;
  ucp_mem_h memh = reg != NULL ? ucx_reg_memh(reg) : NULL;
  for (size_t i = 0; !st && i < n; i++)
    if (chunks[i].direct != NULL)
      st = ucx_recv(conn, tag_base | chunks[i].index, UCX_TAG_MASK_ALL, chunks[i].direct,
                    chunks[i].size, memh, &set, OP, error);
  if (!st && !r->direct && n > 0) {
    if (!r->bounce_ready) {
      st = ucx_bounce_init(&r->bounce, conn->w, r->device, conn->opt.bounce_slots, r->chunk, error);
      r->bounce_ready = st == 0;
    }
    if (!st) st = ucx_bounce_run(conn, &r->bounce, &b, chunks, n, tag_base, false, OP, error);
  }
  if (!st) st = ucx_reqs_wait(conn, &set, OP, "receiving a body", error);
  if (st && set.n > 0) ucx_conn_abort(conn, &set);
  ucx_reqs_free(&set);
  ucx_rcache_put(conn->w->rcache, reg);
  free(chunks);
  if (st) {
    body_free(r, m, body);
    return st;
  }
  *out_body = body;
  return 0;
}

/* Tells the sender one more record batch was taken (a credit). Sent as
 * soon as the batch's bytes are here, before it is assembled: the sender's
 * next batch then overlaps with the assembly. */
static int send_credit(struct receiver* r, struct adr_error* e) {
  r->batches++;
  uint64_t credit = r->batches;
  /* The batch is whole: a sender gone by now (it may leave once it has
   * sent an error after this batch) shows at the next get_next. */
  struct adr_error ignored;
  if (ucx_send(r->conn, ucx_tag(r->conn->peer_id, UCX_KIND_CREDIT, r->stream, 0, 0), &credit,
               sizeof(credit), NULL, NULL, OP, &ignored) != 0 &&
      r->conn->ep_status == UCS_OK && !atomic_load(&r->conn->cancelled))
    return adr_error_set(e, EIO, "%s", ignored.message);
  return 0;
}

static int get_next(struct ArrowDeviceArrayStream* stream, struct ArrowDeviceArray* out) {
  struct receiver* r = stream->private_data;
  memset(out, 0, sizeof(*out));
  if (r->status != 0) return r->status;
  if (r->ended) return 0;
  struct adr_error e = {{0}};
  int st = 0;
  /* Dictionaries come before their batch: loop until a batch, the end or
   * an error. */
  while (st == 0 && out->array.release == NULL && !r->ended) {
    uint64_t index = r->ctrl_seq;
    st = ucx_recv_any(r->conn, ucx_ctrl_tag(r->conn->local_id, r->stream, r->ctrl_seq),
                      UCX_TAG_MASK_ALL, &r->ctrl, NULL, OP, &e);
    if (st) break;
    r->ctrl_seq++;
    const uint8_t* msg = r->ctrl.data;
    size_t size = r->ctrl.size;
    uint32_t h[4] = {0};
    if (size >= sizeof(h)) memcpy(h, msg, sizeof(h));
    const uint8_t* payload = msg + sizeof(h);
    size_t payload_size = size >= sizeof(h) ? size - sizeof(h) : 0;
    if (size < sizeof(h) || h[0] != UCX_PROTOCOL_MAGIC) {
      st = adr_error_set(&e, EPROTO, "[%s][ucx] malformed control message %llu", OP,
                         (unsigned long long)index);
    } else if (h[1] == UCX_CTRL_END) {
      r->ended = true;
    } else if (h[1] == UCX_CTRL_ERROR) {
      int status = h[2] > 0 && h[2] < 4096 ? (int)h[2] : EIO;
      st = adr_error_set(&e, status, "[%s][ucx] the sender failed: %.*s", OP,
                         (int)(payload_size < 900 ? payload_size : 900), (const char*)payload);
    } else if (h[1] == UCX_CTRL_MESSAGE) {
      bool inline_body = (h[3] & UCX_MSG_INLINE) != 0;
      bool record = (h[3] & UCX_MSG_RECORD) != 0;
      bool patched = (h[3] & UCX_MSG_PATCH) != 0;
      /* A record batch whose body came inline is whole: credit it at once,
       * before decoding, so that the sender builds and encodes its next
       * batch while this one is decoded and assembled (with one batch in
       * flight, this takes the decoding off the round trip). */
      bool credited = inline_body && record;
      if (credited) st = send_credit(r, &e);
      struct adr_ipc_decoded m = {0};
      size_t used = 0;
      if (!st && patched && !record)
        st = adr_error_set(&e, EPROTO, "[%s][ucx] message %llu: a patched dictionary batch", OP,
                           (unsigned long long)index);
      if (!st && patched) {
        /* The metadata is the previous record batch's with the patch
         * written over it; what follows the patch is the inline body. */
        const struct ucx_bytes* meta = NULL;
        st = ucx_meta_apply(&r->memo, payload, payload_size, &used, &meta, OP, index, &e);
        if (!st) st = decode(meta->data, meta->size, (int64_t)index, &m, NULL, &e);
      } else if (!st) {
        st = decode(payload, payload_size, (int64_t)index, &m, &used, &e);
        if (!st && record) st = ucx_meta_remember(&r->memo, payload, used, &e);
      }
      if (!st && m.type != ADR_IPC_MESSAGE_RECORD_BATCH &&
          m.type != ADR_IPC_MESSAGE_DICTIONARY_BATCH)
        st = adr_error_set(&e, EPROTO, "[%s][ucx] unexpected %s message %llu", OP,
                           adr_ipc_message_type_name(m.type), (unsigned long long)index);
      if (!st && record != (m.type == ADR_IPC_MESSAGE_RECORD_BATCH))
        st = adr_error_set(&e, EPROTO, "[%s][ucx] message %llu: a %s flagged as %s", OP,
                           (unsigned long long)index, adr_ipc_message_type_name(m.type),
                           record ? "a record batch" : "a dictionary batch");
      /* An inline body is exactly what follows the metadata; otherwise
       * nothing may. */
      if (!st &&
          (inline_body ? (int64_t)(payload_size - used) != m.body_size : payload_size != used))
        st = adr_error_set(&e, EPROTO,
                           "[%s][ucx] message %llu: %zu bytes after the metadata, body %lld%s", OP,
                           (unsigned long long)index, payload_size - used, (long long)m.body_size,
                           inline_body ? " inline" : "");
      void* body = NULL;
      if (!st) st = receive_body(r, &m, h[2], inline_body ? payload + used : NULL, &body, &e);
      if (!st && m.type == ADR_IPC_MESSAGE_RECORD_BATCH && !credited) {
        st = send_credit(r, &e);
        if (st) body_free(r, &m, body);
      }
      /* The reader takes the body over, on success and on failure. */
      if (!st) st = adr_ipc_reader_consume(r->reader, &m, body, out, &e);
      adr_ipc_decoded_release(&m);
    } else {
      st = adr_error_set(&e, EPROTO, "[%s][ucx] unexpected control message type %u", OP, h[1]);
    }
  }
  if (st) {
    if (out->array.release != NULL) adr_device_array_release(out);
    if (st == ECANCELED && atomic_load(&r->conn->cancelled)) {
      uint64_t cancel = UCX_CREDIT_CANCEL;
      ucx_send_notice(r->conn, ucx_tag(r->conn->peer_id, UCX_KIND_CREDIT, r->stream, 0, 0), &cancel,
                      sizeof(cancel));
    }
    return fail(r, st, &e);
  }
  return 0;
}

static int get_schema(struct ArrowDeviceArrayStream* stream, struct ArrowSchema* out) {
  struct receiver* r = stream->private_data;
  struct adr_error e = {{0}};
  int st = adr_schema_copy(adr_ipc_reader_schema(r->reader), out, &e);
  if (st) snprintf(r->last_error.message, sizeof(r->last_error.message), "%s", e.message);
  return st;
}

static const char* get_last_error(struct ArrowDeviceArrayStream* stream) {
  struct receiver* r = stream->private_data;
  return r->last_error.message[0] ? r->last_error.message : NULL;
}

static void receiver_free(struct receiver* r) {
  if (r->bounce_ready) ucx_bounce_release(&r->bounce, r->conn->w);
  ucx_bytes_free(&r->ctrl);
  ucx_meta_memo_free(&r->memo);
  adr_ipc_reader_destroy(r->reader);
  free(r);
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
  receiver_free(r);
  conn->receiving = false;
  ucx_conn_unref(conn);
  stream->release = NULL;
  stream->private_data = NULL;
}

int ucx_receive_stream(struct adr_ucx_conn* conn, struct adr_device* device,
                       struct ArrowDeviceArrayStream* out, struct adr_error* error) {
  int st = ucx_conn_check(conn, OP, error);
  if (st) return st;
  if (conn->receiving)
    return adr_error_set(error, EBUSY,
                         "[%s][ucx] the connection's previous receive stream is "
                         "still alive",
                         OP);
  struct receiver* r = calloc(1, sizeof(*r));
  if (r == NULL) return adr_error_set(error, ENOMEM, "[%s][ucx] out of memory", OP);
  r->conn = conn;
  r->device = device;
  r->stream = conn->recv_stream;
  r->direct = ucx_device_direct(device);
  struct adr_ipc_reader_options ro = {.struct_size = sizeof(ro)};
  ro.validate_full = (conn->opt.flags & ADR_UCX_VALIDATE_FULL) != 0;
  ro.recycle_bodies = true; /* host receivers: bodies reused (device ones: ignored) */
  st = adr_ipc_reader_create(device, &ro, &r->reader, error);
  if (!st)
    st = ucx_recv_any(conn, ucx_ctrl_tag(conn->local_id, r->stream, 0), UCX_TAG_MASK_ALL, &r->ctrl,
                      NULL, OP, error);
  if (!st) {
    const uint8_t* msg = r->ctrl.data;
    size_t size = r->ctrl.size;
    uint32_t h[4] = {0};
    if (size >= sizeof(h)) memcpy(h, msg, sizeof(h));
    const uint8_t* payload = (const uint8_t*)msg + sizeof(h);
    size_t payload_size = size >= sizeof(h) ? size - sizeof(h) : 0;
    if (size >= sizeof(h) && h[0] == UCX_PROTOCOL_MAGIC && h[1] == UCX_CTRL_ERROR) {
      st = adr_error_set(error, h[2] > 0 && h[2] < 4096 ? (int)h[2] : EIO,
                         "[%s][ucx] the sender failed: %.*s", OP,
                         (int)(payload_size < 900 ? payload_size : 900), (const char*)payload);
    } else if (size < sizeof(h) || h[0] != UCX_PROTOCOL_MAGIC || h[1] != UCX_CTRL_SCHEMA) {
      st = adr_error_set(error, EPROTO, "[%s][ucx] the stream does not start with a schema", OP);
    } else {
      r->chunk = (uint64_t)h[2] | ((uint64_t)h[3] << 32);
      if (r->chunk < 4096 || r->chunk > (1ull << 32))
        st = adr_error_set(error, EPROTO, "[%s][ucx] chunk size %llu", OP,
                           (unsigned long long)r->chunk);
      struct adr_ipc_decoded m = {0};
      if (!st) st = decode(payload, payload_size, 0, &m, NULL, error);
      if (!st && m.type != ADR_IPC_MESSAGE_SCHEMA)
        st = adr_error_set(error, EPROTO, "[%s][ucx] the stream starts with a %s message", OP,
                           adr_ipc_message_type_name(m.type));
      if (!st) st = adr_ipc_reader_set_schema(r->reader, &m, error);
      adr_ipc_decoded_release(&m);
    }
  }
  if (st) {
    /* The stream number is used up either way: the sender's next stream
     * is the next one. */
    conn->recv_stream++;
    receiver_free(r);
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
