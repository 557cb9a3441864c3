/* SPDX-License-Identifier: Apache-2.0
 *
 * Encapsulated IPC messages: the prefix, the Message table, the error
 * format shared by core/ipc, and adr_ipc_decode_message (the checked
 * decoding of a message's metadata and its body layout).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipc_internal.h"

const char* adr_ipc_message_type_name(enum adr_ipc_message_type type) {
  switch (type) {
    case ADR_IPC_MESSAGE_END:
      return "end of stream";
    case ADR_IPC_MESSAGE_SCHEMA:
      return "schema";
    case ADR_IPC_MESSAGE_DICTIONARY_BATCH:
      return "dictionary batch";
    case ADR_IPC_MESSAGE_RECORD_BATCH:
      return "record batch";
  }
  return "unknown";
}

int adr__ipc_fail(struct adr_error* error, int status, const struct ipc_where* w, const char* fmt,
                  ...) {
  if (error == NULL) return status;
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  char where[320] = "";
  size_t n = 0;
  if (w->message >= 0 && w->type != ADR_IPC_MESSAGE_END)
    n = (size_t)snprintf(where, sizeof(where), "message %lld (%s)", (long long)w->message,
                         adr_ipc_message_type_name(w->type));
  else if (w->message >= 0)
    n = (size_t)snprintf(where, sizeof(where), "message %lld", (long long)w->message);
  if (w->path.len > 0 && n < sizeof(where))
    snprintf(where + n, sizeof(where) - n, "%sfield %s", n ? ", " : "", w->path.text);
  if (where[0] != '\0') return adr__errorf(error, status, w->op, NULL, "%s: %s", where, msg);
  return adr__errorf(error, status, w->op, NULL, "%s", msg);
}

size_t adr__ipc_path_push(struct adr__path* p, const char* name, int64_t index) {
  if (name == NULL || name[0] == '\0') return adr__path_push_index(p, index);
  return adr__path_push_name(p, name);
}

void adr_ipc_end_of_stream(uint8_t out[ADR_IPC_PREFIX_SIZE]) {
  memset(out, 0, ADR_IPC_PREFIX_SIZE);
  memset(out, 0xFF, 4);
}

static uint32_t rd32(const uint8_t* p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int adr_ipc_decode_prefix(const uint8_t prefix[ADR_IPC_PREFIX_SIZE], int64_t message_index,
                          int64_t* out_metadata_size, struct adr_error* error) {
  struct ipc_where w = {.op = "adr_ipc_decode_prefix", .message = message_index};
  w.type = ADR_IPC_MESSAGE_END;
  adr__path_root(&w.path);
  if (prefix == NULL || out_metadata_size == NULL)
    return adr__ipc_fail(error, EINVAL, &w, "prefix or out_metadata_size is NULL");
  uint32_t c = rd32(prefix);
  if (c != ADR_IPC_CONTINUATION)
    return adr__errorf(error, EPROTO, w.op, NULL,
                       "message %lld: expected continuation 0xFFFFFFFF, found 0x%08X (not an Arrow "
                       "IPC stream, or the pre-0.15 format without continuation)",
                       (long long)message_index, (unsigned)c);
  int32_t m = (int32_t)rd32(prefix + 4);
  if (m < 0 || m > ADR_IPC_MAX_METADATA_SIZE || m % 8 != 0)
    return adr__errorf(error, EINVAL, w.op, NULL,
                       "message %lld: metadata size %d is negative, above %d or not a multiple "
                       "of 8",
                       (long long)message_index, (int)m, ADR_IPC_MAX_METADATA_SIZE);
  *out_metadata_size = m;
  return 0;
}

size_t adr__ipc_message_begin(struct fbb* b, uint8_t hdr, int64_t body_length,
                              size_t* out_header_slot, size_t* out_body_slot) {
  struct fbb_table t;
  fbb_table_begin(&t);
  fbb_table_scalar(&t, 0, 2, IPC_VERSION_V5);
  fbb_table_scalar(&t, 1, 1, hdr);
  fbb_table_offset(&t, 2);
  if (body_length != 0) fbb_table_scalar(&t, 3, 8, (uint64_t)body_length);
  size_t pos = fbb_table_end(b, &t);
  fbb_patch(b, 0, pos);
  *out_header_slot = t.pos[2];
  if (out_body_slot != NULL) *out_body_slot = body_length != 0 ? t.pos[3] : 0;
  return pos;
}

int adr__ipc_encapsulate(const struct fbb* b, const char* op, uint8_t** out, int64_t* out_size,
                         struct adr_error* error) {
  if (b->oom) return adr__errorf(error, ENOMEM, op, NULL, "out of memory");
  size_t m = (b->len + 7) / 8 * 8;
  if (m > ADR_IPC_MAX_METADATA_SIZE)
    return adr__errorf(error, EOVERFLOW, op, NULL, "metadata of %zu bytes exceeds %d", m,
                       ADR_IPC_MAX_METADATA_SIZE);
  uint8_t* d = calloc(1, m + 8);
  if (d == NULL) return adr__errorf(error, ENOMEM, op, NULL, "out of memory");
  memset(d, 0xFF, 4);
  d[4] = (uint8_t)m;
  d[5] = (uint8_t)(m >> 8);
  d[6] = (uint8_t)(m >> 16);
  d[7] = (uint8_t)(m >> 24);
  memcpy(d + 8, b->data, b->len);
  *out = d;
  *out_size = (int64_t)(m + 8);
  return 0;
}

/* ---- adr_ipc_message ------------------------------------------------------ */

void adr_ipc_message_release(struct adr_ipc_message* message) {
  if (message == NULL) return;
  free(message->metadata);
  free((void*)message->buffers);
  void** scratch = message->private_data;
  if (scratch != NULL) {
    for (size_t i = 0; scratch[i] != NULL; i++) free(scratch[i]);
    free(scratch);
  }
  memset(message, 0, sizeof(*message));
}

/* ---- decoding ------------------------------------------------------------- */

void adr_ipc_decoded_release(struct adr_ipc_decoded* message) {
  if (message == NULL) return;
  struct ipc_decoded_priv* p = message->private_data;
  if (p != NULL) {
    /* The metadata, and the nodes, buffers and variadic counts, live in
     * p's block (adr_ipc_decode_message). */
    free(p);
  }
  memset(message, 0, sizeof(*message));
}

/* Reads the RecordBatch table `rb` into p and m. */
static int decode_batch(struct fbr* r, const struct fbr_table* rb, struct ipc_decoded_priv* p,
                        struct adr_ipc_decoded* m, const struct ipc_where* w,
                        struct adr_error* error) {
  m->length = (int64_t)fbr_scalar(r, rb, 0, 8, 0);
  if (fbr_has(r, rb, 3))
    return adr__ipc_fail(error, ENOTSUP, w, "compressed bodies (LZ4_FRAME/ZSTD) are not supported");
  /* Nodes, buffers and variadic counts go to the room reserved after the
   * metadata's copy: each takes as many bytes as its FlatBuffer vector
   * (16, 16 and 8 per entry), so they fit in metadata_size bytes. */
  uint32_t nf = 0, nc = 0, bf = 0, bc = 0, vf = 0, vc = 0;
  (void)fbr_vector(r, rb, 1, 16, &nf, &nc);
  (void)fbr_vector(r, rb, 2, 16, &bf, &bc);
  (void)fbr_vector(r, rb, 4, 8, &vf, &vc);
  if (r->bad) return adr__ipc_fail(error, EINVAL, w, "malformed flatbuffer: %s", r->why);
  size_t bytes = (size_t)nc * sizeof(*p->nodes) + (size_t)bc * sizeof(*p->buffers) +
                 (size_t)vc * sizeof(*p->variadic);
  if (bytes > p->metadata_size)
    return adr__ipc_fail(error, EINVAL, w,
                         "malformed flatbuffer: vectors larger than the metadata");
  p->nodes = (struct ipc_node*)(p->metadata + (p->metadata_size + 7) / 8 * 8);
  p->buffers = (struct adr_ipc_buffer_layout*)(p->nodes + nc);
  p->variadic = (int64_t*)(p->buffers + bc);
  p->n_nodes = nc;
  m->n_buffers = bc;
  p->n_variadic = vc;
  for (uint32_t i = 0; i < nc; i++) {
    p->nodes[i].length = (int64_t)fbr_read(r, nf + 16 * i, 8);
    p->nodes[i].null_count = (int64_t)fbr_read(r, nf + 16 * i + 8, 8);
  }
  for (uint32_t i = 0; i < bc; i++) {
    p->buffers[i].offset = (int64_t)fbr_read(r, bf + 16 * i, 8);
    p->buffers[i].length = (int64_t)fbr_read(r, bf + 16 * i + 8, 8);
  }
  for (uint32_t i = 0; i < vc; i++) p->variadic[i] = (int64_t)fbr_read(r, vf + 8 * i, 8);
  if (r->bad) return adr__ipc_fail(error, EINVAL, w, "malformed flatbuffer: %s", r->why);
  if (m->length < 0)
    return adr__ipc_fail(error, EINVAL, w, "negative length %lld", (long long)m->length);
  for (int64_t i = 0; i < p->n_nodes; i++) {
    if (p->nodes[i].length < 0 || p->nodes[i].null_count < 0 ||
        p->nodes[i].null_count > p->nodes[i].length)
      return adr__ipc_fail(error, EINVAL, w, "node %lld: length %lld / null count %lld invalid",
                           (long long)i, (long long)p->nodes[i].length,
                           (long long)p->nodes[i].null_count);
  }
  for (int64_t i = 0; i < m->n_buffers; i++) {
    int64_t off = p->buffers[i].offset, len = p->buffers[i].length, end;
    if (off < 0 || len < 0 || __builtin_add_overflow(off, len, &end) || end > m->body_size)
      return adr__ipc_fail(error, EINVAL, w,
                           "buffer %lld [offset %lld, length %lld] lies outside the body of %lld "
                           "bytes",
                           (long long)i, (long long)off, (long long)len, (long long)m->body_size);
    if (off % 8 != 0)
      return adr__ipc_fail(error, EINVAL, w, "buffer %lld offset %lld is not a multiple of 8",
                           (long long)i, (long long)off);
  }
  for (int64_t i = 0; i < p->n_variadic; i++)
    if (p->variadic[i] < 0 || p->variadic[i] > m->n_buffers)
      return adr__ipc_fail(error, EINVAL, w, "variadic buffer count %lld out of range",
                           (long long)p->variadic[i]);
  m->buffers = p->buffers;
  return 0;
}

int adr_ipc_decode_message(const void* metadata, size_t metadata_size, int64_t message_index,
                           struct adr_ipc_decoded* out, struct adr_error* error) {
  struct ipc_where w = {.op = "adr_ipc_decode_message", .message = message_index};
  w.type = ADR_IPC_MESSAGE_END;
  adr__path_root(&w.path);
  if (out == NULL) return adr__ipc_fail(error, EINVAL, &w, "out is NULL");
  memset(out, 0, sizeof(*out));
  if (metadata == NULL || metadata_size > ADR_IPC_MAX_METADATA_SIZE)
    return adr__ipc_fail(error, EINVAL, &w, "metadata is NULL or larger than %d bytes",
                         ADR_IPC_MAX_METADATA_SIZE);
  /* One block: the private part, the metadata's copy, and room for the
   * nodes, buffers and variadic counts decode_batch reads out of it. */
  size_t room = (metadata_size + 7) / 8 * 8;
  struct ipc_decoded_priv* p = malloc(sizeof(*p) + 2 * room + 8);
  if (p == NULL) return adr__ipc_fail(error, ENOMEM, &w, "out of memory");
  memset(p, 0, sizeof(*p));
  p->metadata = (uint8_t*)(p + 1);
  memcpy(p->metadata, metadata, metadata_size);
  p->metadata_size = metadata_size;
  out->struct_size = sizeof(*out);
  out->private_data = p;
  out->message_index = message_index;
  out->dictionary_id = -1;

  int st = 0;
  struct fbr r;
  fbr_init(&r, p->metadata, metadata_size);
  struct fbr_table msg = fbr_root(&r);
  int64_t version = (int16_t)fbr_scalar(&r, &msg, 0, 2, 0);
  uint8_t hdr = (uint8_t)fbr_scalar(&r, &msg, 1, 1, 0);
  int64_t body = (int64_t)fbr_scalar(&r, &msg, 3, 8, 0);
  struct fbr_table h = fbr_table_field(&r, &msg, 2);
  if (r.bad) {
    st = adr__ipc_fail(error, EINVAL, &w, "malformed flatbuffer: %s", r.why);
    goto done;
  }
  if (version != IPC_VERSION_V4 && version != IPC_VERSION_V5) {
    st = adr__ipc_fail(error, EPROTO, &w, "metadata version V%lld (expected V4 or V5)",
                       (long long)version + 1);
    goto done;
  }
  if (body < 0 || body > INT64_MAX - 256) {
    st = adr__ipc_fail(error, EINVAL, &w, "body length %lld out of range", (long long)body);
    goto done;
  }
  p->version = (int)version;
  out->body_size = body;
  out->body_alloc_size = (body + 63) / 64 * 64 + 64;
  if (hdr == IPC_HDR_TENSOR || hdr == IPC_HDR_SPARSE_TENSOR) {
    st = adr__ipc_fail(error, ENOTSUP, &w, "Tensor and SparseTensor messages are not supported");
    goto done;
  }
  if (hdr < IPC_HDR_SCHEMA || hdr > IPC_HDR_RECORD_BATCH || !h.present) {
    st = adr__ipc_fail(error, EINVAL, &w, "message header type %u %s", (unsigned)hdr,
                       h.present ? "unknown" : "without a header table");
    goto done;
  }
  out->type = (enum adr_ipc_message_type)hdr;
  w.type = out->type;
  if (hdr == IPC_HDR_SCHEMA) {
    p->schema_pos = h.pos;
    if (body != 0) st = adr__ipc_fail(error, EINVAL, &w, "schema message with a body");
  } else if (hdr == IPC_HDR_RECORD_BATCH) {
    st = decode_batch(&r, &h, p, out, &w, error);
  } else {
    out->dictionary_id = (int64_t)fbr_scalar(&r, &h, 0, 8, 0);
    out->is_delta = fbr_scalar(&r, &h, 2, 1, 0) != 0;
    struct fbr_table rb = fbr_table_field(&r, &h, 1);
    if (!r.bad && !rb.present)
      st = adr__ipc_fail(error, EINVAL, &w, "dictionary batch without data");
    else
      st = decode_batch(&r, &rb, p, out, &w, error);
  }
done:
  if (st != 0) adr_ipc_decoded_release(out);
  return st;
}
