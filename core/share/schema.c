/* SPDX-License-Identifier: Apache-2.0
 *
 * The schema of a shared array on the wire: an encapsulated Arrow IPC
 * Schema message (adr/ipc.h: continuation, size, FlatBuffer, padding).
 * An IPC schema is a struct whose children are the columns, while a
 * shared array may be of any type, so the array's schema travels as the
 * one child of a struct wrapper that the receiver takes off again.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "adr/array.h"
#include "adr/ipc.h"
#include "share_internal.h"

void adr__share_buf_put(struct adr__share_buf* b, const void* data, size_t size) {
  if (b->status) return;
  if (size > b->cap - b->len) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < size) cap *= 2;
    uint8_t* p = realloc(b->data, cap);
    if (p == NULL) {
      b->status = ENOMEM;
      return;
    }
    b->data = p;
    b->cap = cap;
  }
  if (size) memcpy(b->data + b->len, data, size);
  b->len += size;
}

/* The wrapper is only read by the encoder; it owns nothing. */
static void wrapper_release(struct ArrowSchema* s) {
  s->release = NULL;
}

int adr__share_schema_encode(const struct ArrowSchema* schema, struct adr__share_buf* out,
                             struct adr_error* error) {
  struct ArrowSchema* child = (struct ArrowSchema*)schema;
  struct ArrowSchema wrapper = {
      .format = "+s", .name = "", .n_children = 1, .children = &child, .release = wrapper_release};
  struct adr_ipc_message m;
  memset(&m, 0, sizeof(m));
  int st = adr_ipc_encode_schema(&wrapper, &m, error);
  if (st) return st;
  adr__share_buf_put(out, m.metadata, (size_t)m.metadata_size);
  adr_ipc_message_release(&m);
  if (out->status) return adr__errorf(error, ENOMEM, "adr_share_array_send", NULL, "out of memory");
  return 0;
}

int adr__share_schema_decode(const uint8_t* data, size_t size, struct ArrowSchema* out,
                             struct adr_error* error) {
  int64_t meta = 0;
  if (size < ADR_IPC_PREFIX_SIZE)
    return adr__errorf(error, EPROTO, "adr_share_array_recv", NULL,
                       "the schema message is truncated");
  int st = adr_ipc_decode_prefix(data, 0, &meta, error);
  if (st) return st;
  if (meta <= 0 || (uint64_t)meta > size - ADR_IPC_PREFIX_SIZE)
    return adr__errorf(error, EPROTO, "adr_share_array_recv", NULL,
                       "the schema message says %lld bytes of metadata, %zu came", (long long)meta,
                       size - ADR_IPC_PREFIX_SIZE);
  struct adr_ipc_decoded d;
  memset(&d, 0, sizeof(d));
  st = adr_ipc_decode_message(data + ADR_IPC_PREFIX_SIZE, (size_t)meta, 0, &d, error);
  struct ArrowSchema root;
  root.release = NULL;
  if (st == 0 && d.type != ADR_IPC_MESSAGE_SCHEMA)
    st = adr__errorf(error, EPROTO, "adr_share_array_recv", NULL,
                     "expected a Schema message, got a %s", adr_ipc_message_type_name(d.type));
  if (st == 0) st = adr_ipc_decode_schema(&d, &root, error);
  adr_ipc_decoded_release(&d);
  if (st) return st;
  if (root.n_children != 1 || root.children[0]->release == NULL) {
    root.release(&root);
    return adr__errorf(error, EPROTO, "adr_share_array_recv", NULL,
                       "the schema message does not wrap one field");
  }
  /* Move the field out of the wrapper (the Arrow "move": the source is
   * marked released and the wrapper's release skips it). */
  *out = *root.children[0];
  root.children[0]->release = NULL;
  root.release(&root);
  return 0;
}
