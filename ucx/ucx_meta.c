/* SPDX-License-Identifier: Apache-2.0
 *
 * The metadata framing of the UCX transport: what a schema message and a
 * batch message carry (docs/ucx.md, "Wire protocol"). Everything that
 * knows the encoding is in this file, behind the four ucx_meta_*
 * functions, so the framing can become Arrow IPC Schema / RecordBatch
 * messages (adr/ipc.h) without touching the transfer code.
 *
 * Little-endian, fixed-width fields. A schema node is format, name,
 * metadata (u32 length or 0xffffffff for absent, then bytes), flags,
 * n_children, the children, a dictionary flag and the dictionary. A batch
 * node is length, null_count, offset, n_buffers, n_children, one size per
 * buffer (-1: NULL), the children, a dictionary flag and the dictionary;
 * the buffers' bytes follow as body messages in this (pre-)order.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "adr/array.h"
#include "ucx_internal.h"

#define META_MAX_DEPTH 64
#define META_ABSENT 0xffffffffu

void ucx_bytes_free(struct ucx_bytes* b) {
  free(b->data);
  b->data = NULL;
  b->size = b->cap = 0;
}

void ucx_bodies_free(struct ucx_bodies* b) {
  free(b->items);
  b->items = NULL;
  b->n = b->cap = 0;
  b->total = 0;
}

static int put(struct ucx_bytes* b, const void* p, size_t n, struct adr_error* error) {
  if (b->size + n > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->size + n) cap *= 2;
    uint8_t* d = realloc(b->data, cap);
    if (d == NULL) return adr_error_set(error, ENOMEM, "[adr_ucx] out of memory (metadata)");
    b->data = d;
    b->cap = cap;
  }
  if (n) memcpy(b->data + b->size, p, n);
  b->size += n;
  return 0;
}

static int put_u32(struct ucx_bytes* b, uint32_t v, struct adr_error* e) {
  return put(b, &v, 4, e);
}
static int put_i64(struct ucx_bytes* b, int64_t v, struct adr_error* e) {
  return put(b, &v, 8, e);
}
static int put_blob(struct ucx_bytes* b, const void* p, size_t n, bool absent,
                    struct adr_error* e) {
  if (n >= META_ABSENT) return adr_error_set(e, EOVERFLOW, "[adr_ucx] metadata string too long");
  int st = put_u32(b, absent ? META_ABSENT : (uint32_t)n, e);
  return st ? st : put(b, p, absent ? 0 : n, e);
}

static int add_body(struct ucx_bodies* b, void* ptr, uint64_t size, bool direct,
                    struct adr_error* error) {
  if (b->n == b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 16;
    struct ucx_body* it = realloc(b->items, cap * sizeof(*it));
    if (it == NULL) return adr_error_set(error, ENOMEM, "[adr_ucx] out of memory (bodies)");
    b->items = it;
    b->cap = cap;
  }
  b->items[b->n++] = (struct ucx_body){ptr, size, direct};
  b->total += size;
  return 0;
}

/* Arrow's binary key/value metadata: int32 count, then int32-length keys
 * and values. */
static size_t metadata_length(const char* m) {
  if (m == NULL) return 0;
  int32_t n;
  memcpy(&n, m, 4);
  size_t pos = 4;
  for (int32_t i = 0; i < n * 2; i++) {
    int32_t l;
    memcpy(&l, m + pos, 4);
    pos += 4 + (size_t)(l > 0 ? l : 0);
  }
  return pos;
}

static int encode_schema_node(const struct ArrowSchema* s, int depth, struct ucx_bytes* out,
                              struct adr_error* error) {
  if (depth > META_MAX_DEPTH)
    return adr_error_set(error, EINVAL, "[adr_ucx] schema nested deeper than %d", META_MAX_DEPTH);
  if (s == NULL || s->release == NULL || s->format == NULL)
    return adr_error_set(error, EINVAL, "[adr_ucx] released or incomplete schema node");
  int st = put_blob(out, s->format, strlen(s->format), false, error);
  if (!st) st = put_blob(out, s->name, s->name ? strlen(s->name) : 0, s->name == NULL, error);
  if (!st)
    st = put_blob(out, s->metadata, metadata_length(s->metadata), s->metadata == NULL, error);
  if (!st) st = put_i64(out, s->flags, error);
  if (!st) st = put_i64(out, s->n_children, error);
  for (int64_t i = 0; !st && i < s->n_children; i++)
    st = encode_schema_node(s->children[i], depth + 1, out, error);
  if (!st) st = put_u32(out, s->dictionary != NULL, error);
  if (!st && s->dictionary != NULL) st = encode_schema_node(s->dictionary, depth + 1, out, error);
  return st;
}

int ucx_meta_encode_schema(const struct ArrowSchema* schema, struct ucx_bytes* out,
                           struct adr_error* error) {
  return encode_schema_node(schema, 0, out, error);
}

/* ---- reading ------------------------------------------------------------ */

struct reader {
  const uint8_t* p;
  size_t size, pos;
  struct adr_error* error;
};

static int rd(struct reader* r, void* out, size_t n) {
  if (r->size - r->pos < n)
    return adr_error_set(r->error, EPROTO, "[adr_ucx] metadata truncated at byte %zu of %zu",
                         r->pos, r->size);
  memcpy(out, r->p + r->pos, n);
  r->pos += n;
  return 0;
}

/* A string field as a NUL-terminated copy (*out NULL when absent). */
static int rd_blob(struct reader* r, char** out, size_t* out_len) {
  uint32_t n = 0;
  int st = rd(r, &n, 4);
  if (st) return st;
  *out = NULL;
  if (out_len) *out_len = 0;
  if (n == META_ABSENT) return 0;
  if (r->size - r->pos < n)
    return adr_error_set(r->error, EPROTO, "[adr_ucx] metadata string of %u bytes at byte %zu "
                         "runs past the message (%zu)", n, r->pos, r->size);
  *out = malloc((size_t)n + 1);
  if (*out == NULL) return adr_error_set(r->error, ENOMEM, "[adr_ucx] out of memory (metadata)");
  memcpy(*out, r->p + r->pos, n);
  (*out)[n] = '\0';
  r->pos += n;
  if (out_len) *out_len = n;
  return 0;
}

static int decode_schema_node(struct reader* r, int depth, struct ArrowSchema* out) {
  if (depth > META_MAX_DEPTH)
    return adr_error_set(r->error, EPROTO, "[adr_ucx] schema nested deeper than %d",
                         META_MAX_DEPTH);
  char *format = NULL, *name = NULL, *meta = NULL;
  size_t meta_len = 0;
  int64_t flags = 0, n_children = 0;
  int st = rd_blob(r, &format, NULL);
  if (!st) st = rd_blob(r, &name, NULL);
  if (!st) st = rd_blob(r, &meta, &meta_len);
  if (!st) st = rd(r, &flags, 8);
  if (!st) st = rd(r, &n_children, 8);
  if (!st && format == NULL) st = adr_error_set(r->error, EPROTO, "[adr_ucx] schema without format");
  if (!st && (n_children < 0 || (uint64_t)n_children > r->size - r->pos))
    st = adr_error_set(r->error, EPROTO, "[adr_ucx] schema with %lld children",
                       (long long)n_children);
  if (!st && meta != NULL && (meta_len < 4 || metadata_length(meta) != meta_len))
    st = adr_error_set(r->error, EPROTO, "[adr_ucx] malformed schema metadata");
  if (!st) st = adr_schema_init(out, format, name, flags, n_children, r->error);
  free(format);
  free(name);
  if (st) {
    free(meta);
    return st;
  }
  if (meta != NULL) st = adr_schema_set_metadata(out, meta, r->error);
  free(meta);
  for (int64_t i = 0; !st && i < n_children; i++)
    st = decode_schema_node(r, depth + 1, out->children[i]);
  uint32_t has_dict = 0;
  if (!st) st = rd(r, &has_dict, 4);
  if (!st && has_dict) {
    st = adr_schema_alloc_dictionary(out, r->error);
    if (!st) st = decode_schema_node(r, depth + 1, out->dictionary);
  }
  if (st) out->release(out);
  return st;
}

int ucx_meta_decode_schema(const uint8_t* data, size_t size, struct ArrowSchema* out,
                           struct adr_error* error) {
  struct reader r = {data, size, 0, error};
  int st = decode_schema_node(&r, 0, out);
  if (st == 0 && r.pos != size) {
    out->release(out);
    st = adr_error_set(error, EPROTO, "[adr_ucx] %zu trailing bytes after the schema",
                       size - r.pos);
  }
  return st;
}

/* ---- batches -------------------------------------------------------------- */

/* Reads `width` bytes at ptr + index * width on `device` as an integer. */
static int read_int(struct adr_device* device, bool host_readable, const void* ptr,
                    int64_t index, int width, int64_t* out, struct adr_error* error) {
  const uint8_t* at = (const uint8_t*)ptr + index * width;
  int32_t v32 = 0;
  int64_t v64 = 0;
  void* dst = width == 4 ? (void*)&v32 : (void*)&v64;
  if (host_readable) memcpy(dst, at, (size_t)width);
  else {
    int st = adr_copy(NULL, dst, device, at, (size_t)width, NULL, error);
    if (st) return st;
  }
  *out = width == 4 ? v32 : v64;
  return 0;
}

static int encode_batch_node(const struct ArrowSchema* s, const struct ArrowArray* a, int depth,
                             struct adr_device* device, bool host_readable, bool direct,
                             struct ucx_bytes* out, struct ucx_bodies* bodies,
                             struct adr_error* error) {
  if (depth > META_MAX_DEPTH)
    return adr_error_set(error, EINVAL, "[adr_ucx] array nested deeper than %d", META_MAX_DEPTH);
  if (a == NULL || a->release == NULL)
    return adr_error_set(error, EINVAL, "[adr_ucx] released array node");
  if (a->n_children != s->n_children || (a->dictionary != NULL) != (s->dictionary != NULL))
    return adr_error_set(error, EINVAL,
                         "[adr_ucx] array does not match its schema (%lld children vs %lld, "
                         "dictionary %d vs %d)",
                         (long long)a->n_children, (long long)s->n_children,
                         a->dictionary != NULL, s->dictionary != NULL);
  struct adr_format f;
  int st = adr_format_parse(s->format, &f, error);
  if (st) return st;
  if (a->n_buffers < 0 || a->n_buffers > 1 << 20)
    return adr_error_set(error, EINVAL, "[adr_ucx] array with %lld buffers",
                         (long long)a->n_buffers);
  int64_t* sizes = calloc((size_t)a->n_buffers + 1, sizeof(int64_t));
  if (sizes == NULL) return adr_error_set(error, ENOMEM, "[adr_ucx] out of memory");
  st = adr_format_buffer_sizes(&f, a->offset, a->length, a->n_buffers, sizes, error);
  for (int64_t i = 0; !st && i < a->n_buffers; i++) {
    if (a->buffers[i] == NULL) {
      sizes[i] = -1;
      continue;
    }
    if (sizes[i] != ADR_BUFFER_SIZE_DATA_DEPENDENT) continue;
    if (f.layout == ADR_LAYOUT_BINARY_VIEW) {
      /* The variadic data buffers' sizes are in the last buffer. */
      if (a->buffers[a->n_buffers - 1] == NULL)
        st = adr_error_set(error, EINVAL, "[adr_ucx] view array without its sizes buffer");
      else
        st = read_int(device, host_readable, a->buffers[a->n_buffers - 1], i - 2, 8, &sizes[i],
                      error);
    } else if (a->buffers[1] == NULL) {
      sizes[i] = 0;
    } else {
      st = read_int(device, host_readable, a->buffers[1], a->offset + a->length,
                    f.offset_bytes, &sizes[i], error);
    }
    if (!st && sizes[i] < 0)
      st = adr_error_set(error, EINVAL, "[adr_ucx] negative data size %lld in buffer %lld",
                         (long long)sizes[i], (long long)i);
  }
  if (!st) st = put_i64(out, a->length, error);
  if (!st) st = put_i64(out, a->null_count, error);
  if (!st) st = put_i64(out, a->offset, error);
  if (!st) st = put_i64(out, a->n_buffers, error);
  if (!st) st = put_i64(out, a->n_children, error);
  for (int64_t i = 0; !st && i < a->n_buffers; i++) {
    st = put_i64(out, sizes[i], error);
    if (!st && sizes[i] >= 0)
      st = add_body(bodies, (void*)a->buffers[i], (uint64_t)sizes[i], direct, error);
  }
  free(sizes);
  for (int64_t i = 0; !st && i < a->n_children; i++)
    st = encode_batch_node(s->children[i], a->children[i], depth + 1, device, host_readable, direct,
                           out, bodies, error);
  if (!st) st = put_u32(out, a->dictionary != NULL, error);
  if (!st && a->dictionary != NULL)
    st = encode_batch_node(s->dictionary, a->dictionary, depth + 1, device, host_readable, direct,
                           out, bodies, error);
  return st;
}

int ucx_meta_encode_batch(const struct ArrowSchema* schema, const struct ArrowArray* array,
                          struct adr_device* device, bool host_readable, struct ucx_bytes* out,
                          struct ucx_bodies* bodies, struct adr_error* error) {
  return encode_batch_node(schema, array, 0, device, host_readable, ucx_device_direct(device),
                           out, bodies, error);
}

static int decode_batch_node(struct reader* r, const struct ArrowSchema* s, int depth,
                             struct adr_device* device, bool direct, struct ArrowArray* out,
                             struct ucx_bodies* bodies) {
  struct adr_error* error = r->error;
  if (depth > META_MAX_DEPTH)
    return adr_error_set(error, EPROTO, "[adr_ucx] batch nested deeper than %d", META_MAX_DEPTH);
  int64_t hdr[5];
  int st = rd(r, hdr, sizeof(hdr));
  if (st) return st;
  int64_t length = hdr[0], null_count = hdr[1], offset = hdr[2], n_buffers = hdr[3],
          n_children = hdr[4];
  if (n_children != s->n_children)
    return adr_error_set(error, EPROTO, "[adr_ucx] batch node with %lld children, schema has %lld",
                         (long long)n_children, (long long)s->n_children);
  if (length < 0 || offset < 0 || null_count < -1 || n_buffers < 0 ||
      (uint64_t)n_buffers > (r->size - r->pos) / 8)
    return adr_error_set(error, EPROTO,
                         "[adr_ucx] batch node with length %lld offset %lld null_count %lld "
                         "buffers %lld",
                         (long long)length, (long long)offset, (long long)null_count,
                         (long long)n_buffers);
  struct adr_format f;
  st = adr_format_parse(s->format, &f, error);
  if (st) return st;
  int64_t* sizes = calloc((size_t)n_buffers + 1, sizeof(int64_t));
  int64_t* expect = calloc((size_t)n_buffers + 1, sizeof(int64_t));
  if (sizes == NULL || expect == NULL) {
    free(sizes);
    free(expect);
    return adr_error_set(error, ENOMEM, "[adr_ucx] out of memory");
  }
  st = rd(r, sizes, (size_t)n_buffers * 8);
  if (!st) st = adr_format_buffer_sizes(&f, offset, length, n_buffers, expect, error);
  /* A size the layout fixes must be the one it fixes, so a consumer never
   * reads past a buffer the peer described. */
  for (int64_t i = 0; !st && i < n_buffers; i++) {
    if (sizes[i] < -1 ||
        (sizes[i] >= 0 && expect[i] != ADR_BUFFER_SIZE_DATA_DEPENDENT && sizes[i] != expect[i]))
      st = adr_error_set(error, EPROTO,
                         "[adr_ucx] buffer %lld of a %s node: %lld bytes, the layout says %lld",
                         (long long)i, adr_type_name(f.type), (long long)sizes[i],
                         (long long)expect[i]);
  }
  free(expect);
  if (!st) st = adr_array_init(device, n_buffers, n_children, out, error);
  if (st) {
    free(sizes);
    return st;
  }
  out->length = length;
  out->offset = offset;
  out->null_count = null_count;
  for (int64_t i = 0; !st && i < n_buffers; i++) {
    if (sizes[i] < 0) continue;
    void* p;
    st = adr_array_alloc_buffer(out, i, (size_t)sizes[i], NULL, &p, error);
    if (!st) st = add_body(bodies, p, (uint64_t)sizes[i], direct, error);
  }
  free(sizes);
  for (int64_t i = 0; !st && i < n_children; i++)
    st = decode_batch_node(r, s->children[i], depth + 1, device, direct, out->children[i], bodies);
  uint32_t has_dict = 0;
  if (!st) st = rd(r, &has_dict, 4);
  if (!st && (has_dict != 0) != (s->dictionary != NULL))
    st = adr_error_set(error, EPROTO, "[adr_ucx] batch and schema disagree on a dictionary");
  if (!st && has_dict) {
    st = adr_array_alloc_dictionary(out, error);
    if (!st) st = decode_batch_node(r, s->dictionary, depth + 1, device, direct, out->dictionary,
                                    bodies);
  }
  if (st) out->release(out);
  return st;
}

int ucx_meta_decode_batch(const uint8_t* data, size_t size, const struct ArrowSchema* schema,
                          struct adr_device* device, bool direct, struct ArrowArray* out,
                          struct ucx_bodies* bodies, struct adr_error* error) {
  struct reader r = {data, size, 0, error};
  int st = decode_batch_node(&r, schema, 0, device, direct, out, bodies);
  if (st == 0 && r.pos != size) {
    out->release(out);
    st = adr_error_set(error, EPROTO, "[adr_ucx] %zu trailing bytes after the batch",
                       size - r.pos);
  }
  return st;
}
