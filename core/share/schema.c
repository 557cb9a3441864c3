/* SPDX-License-Identifier: Apache-2.0
 *
 * The schema of a shared array on the wire. This is the one place that
 * chooses the encoding, so it can become an Arrow IPC Schema message
 * (adr/ipc.h) without touching the channel: until then a compact
 * preorder walk of the ArrowSchema tree (format, name, metadata bytes,
 * flags, children, dictionary), every length checked on decode.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "adr/array.h"
#include "share_internal.h"

#define SCHEMA_MAX_DEPTH 64

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

static void put_u32(struct adr__share_buf* b, uint32_t v) {
  adr__share_buf_put(b, &v, sizeof(v));
}

static void put_bytes(struct adr__share_buf* b, const void* p, size_t n) {
  put_u32(b, (uint32_t)n);
  adr__share_buf_put(b, p, n);
}

/* Length of Arrow's binary metadata encoding (int32 count, then int32
 * length + bytes for every key and value). */
static size_t metadata_size(const char* md) {
  if (md == NULL) return 0;
  int32_t n;
  memcpy(&n, md, 4);
  size_t at = 4;
  for (int32_t i = 0; i < 2 * n; i++) {
    int32_t len;
    memcpy(&len, md + at, 4);
    at += 4 + (size_t)len;
  }
  return at;
}

static int encode(const struct ArrowSchema* s, struct adr__share_buf* b, int depth,
                  struct adr_error* error) {
  if (depth > SCHEMA_MAX_DEPTH)
    return adr__errorf(error, EINVAL, "adr_share_array_send", NULL,
                       "the schema nests deeper than %d", SCHEMA_MAX_DEPTH);
  if (s->release == NULL || s->format == NULL)
    return adr__errorf(error, EINVAL, "adr_share_array_send", NULL,
                       "the schema is released or has no format");
  put_bytes(b, s->format, strlen(s->format));
  put_bytes(b, s->name ? s->name : "", s->name ? strlen(s->name) : 0);
  put_u32(b, s->name != NULL);
  put_bytes(b, s->metadata, metadata_size(s->metadata));
  adr__share_buf_put(b, &s->flags, sizeof(s->flags));
  put_u32(b, (uint32_t)s->n_children);
  put_u32(b, s->dictionary != NULL);
  for (int64_t i = 0; i < s->n_children; i++) {
    int st = encode(s->children[i], b, depth + 1, error);
    if (st) return st;
  }
  return s->dictionary ? encode(s->dictionary, b, depth + 1, error) : 0;
}

int adr__share_schema_encode(const struct ArrowSchema* schema, struct adr__share_buf* out,
                             struct adr_error* error) {
  int st = encode(schema, out, 0, error);
  if (st == 0 && out->status)
    st = adr__errorf(error, ENOMEM, "adr_share_array_send", NULL, "out of memory");
  return st;
}

struct reader {
  const uint8_t* p;
  size_t left;
};

static bool get(struct reader* r, void* out, size_t n) {
  if (n > r->left) return false;
  memcpy(out, r->p, n);
  r->p += n;
  r->left -= n;
  return true;
}

static bool get_u32(struct reader* r, uint32_t* v) {
  return get(r, v, sizeof(*v));
}

/* A NUL-terminated copy of the next length-prefixed string. */
static char* get_string(struct reader* r) {
  uint32_t n;
  if (!get_u32(r, &n) || n > r->left) return NULL;
  char* s = malloc((size_t)n + 1);
  if (s == NULL) return NULL;
  memcpy(s, r->p, n);
  s[n] = '\0';
  r->p += n;
  r->left -= n;
  return s;
}

/* Whether Arrow metadata of `size` bytes is well formed within them. */
static bool metadata_fits(const uint8_t* md, size_t size) {
  int32_t n;
  if (size < 4) return false;
  memcpy(&n, md, 4);
  size_t at = 4;
  if (n < 0) return false;
  for (int64_t i = 0; i < 2 * (int64_t)n; i++) {
    int32_t len;
    if (size - at < 4) return false;
    memcpy(&len, md + at, 4);
    at += 4;
    if (len < 0 || (size_t)len > size - at) return false;
    at += (size_t)len;
  }
  return at == size;
}

static int decode(struct reader* r, struct ArrowSchema* out, int depth, struct adr_error* error) {
  static const char* op = "adr_share_array_recv";
  if (depth > SCHEMA_MAX_DEPTH)
    return adr__errorf(error, EPROTO, op, NULL, "the schema nests deeper than %d",
                       SCHEMA_MAX_DEPTH);
  char* format = get_string(r);
  char* name = format ? get_string(r) : NULL;
  uint32_t has_name = 0, md_len = 0, n_children = 0, has_dict = 0;
  int64_t flags = 0;
  const uint8_t* md = NULL;
  bool ok = name != NULL && get_u32(r, &has_name) && get_u32(r, &md_len) && md_len <= r->left;
  if (ok) {
    md = md_len ? r->p : NULL;
    r->p += md_len;
    r->left -= md_len;
    ok = get(r, &flags, sizeof(flags)) && get_u32(r, &n_children) && get_u32(r, &has_dict) &&
         n_children <= r->left;
  }
  int st = ok ? 0 : adr__errorf(error, EPROTO, op, NULL, "truncated schema on the wire");
  if (st == 0) st = adr_schema_init(out, format, has_name ? name : NULL, flags, n_children, error);
  free(format);
  free(name);
  if (st) return st;
  if (md != NULL && !metadata_fits(md, md_len))
    st = adr__errorf(error, EPROTO, op, NULL, "malformed schema metadata on the wire");
  if (st == 0 && md != NULL) {
    /* The encoding is Arrow's own; copy it into an aligned, owned block. */
    char* copy = malloc(md_len);
    if (copy == NULL) st = adr__errorf(error, ENOMEM, op, NULL, "out of memory");
    if (st == 0) {
      memcpy(copy, md, md_len);
      st = adr_schema_set_metadata(out, copy, error);
      free(copy);
    }
  }
  for (uint32_t i = 0; st == 0 && i < n_children; i++) st = decode(r, out->children[i], depth + 1, error);
  if (st == 0 && has_dict) {
    st = adr_schema_alloc_dictionary(out, error);
    if (st == 0) st = decode(r, out->dictionary, depth + 1, error);
  }
  if (st) out->release(out);
  return st;
}

int adr__share_schema_decode(const uint8_t* data, size_t size, struct ArrowSchema* out,
                             struct adr_error* error) {
  struct reader r = {data, size};
  return decode(&r, out, 0, error);
}
