/* SPDX-License-Identifier: Apache-2.0
 *
 * RecordBatch and DictionaryBatch messages from ArrowDeviceArrays on any
 * device, without copying the bodies (ipc.h). Every node is walked with
 * the absolute range [start, start + len) of its buffers it contributes;
 * IPC has no offsets, so what cannot be referenced in place (a bitmap not
 * starting on a byte, offsets or run ends not starting at 0) is rewritten
 * into small host copies owned by the message.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ipc_internal.h"

struct benc {
  struct ipc_where w;
  struct adr_error* error;
  struct adr_device* dev; /* the array's device; NULL when host-readable */
  struct ipc_node* nodes;
  int64_t n_nodes, cap_nodes;
  struct adr_ipc_body_buffer* bufs;
  int64_t n_bufs, cap_bufs;
  int64_t* variadic;
  int64_t n_variadic, cap_variadic;
  void** scratch; /* NULL-terminated list of host copies */
  int64_t n_scratch, cap_scratch;
  int64_t body;
  /* An encoder's formats parsed by earlier batches, in the order node()
   * asks for them (NULL without an encoder). */
  struct adr_ipc_encoder* enc;
  int64_t n_fmt;
};

/* A format parsed once per schema node (the order of node() calls is the
 * schema's depth-first order). */
struct fmt_entry {
  const char* format;
  struct adr_format f;
};

struct adr_ipc_encoder {
  const struct ArrowSchema* schema;
  struct fmt_entry* fmts;
  int64_t n_fmts, cap_fmts;
  /* The walk's node and variadic arrays, kept from batch to batch. */
  struct ipc_node* nodes;
  int64_t cap_nodes;
  int64_t* variadic;
  int64_t cap_variadic;
  /* The last RecordBatch metadata written, and where its values are: a
   * batch of the same shape (counts of nodes, buffers and variadic counts;
   * zero or not length and body, which FlatBuffers leaves out when 0) gets
   * a copy with the values patched in. */
  bool have_template;
  uint8_t* tmpl;
  int64_t tmpl_size;
  int64_t t_nodes, t_bufs, t_variadic;
  bool t_length, t_body;
  size_t at_body, at_length, at_nodes, at_bufs, at_variadic; /* in tmpl */
};

#define EFAIL(e, st, ...) adr__ipc_fail((e)->error, (st), &(e)->w, __VA_ARGS__)

static const int64_t k_zeros[2] = {0, 0};

static int grow(struct benc* e, void** arr, int64_t* cap, int64_t n, size_t elem) {
  if (n < *cap) return 0;
  int64_t c = *cap ? *cap * 2 : 16;
  void* a = realloc(*arr, (size_t)c * elem);
  if (a == NULL) return EFAIL(e, ENOMEM, "out of memory");
  *arr = a;
  *cap = c;
  return 0;
}

static int add_node(struct benc* e, int64_t length, int64_t null_count) {
  int st = grow(e, (void**)&e->nodes, &e->cap_nodes, e->n_nodes, sizeof(*e->nodes));
  if (st) return st;
  e->nodes[e->n_nodes].length = length;
  e->nodes[e->n_nodes].null_count = null_count;
  e->n_nodes++;
  return 0;
}

static int add_buffer(struct benc* e, struct adr_device* dev, const void* data, int64_t size) {
  int st = grow(e, (void**)&e->bufs, &e->cap_bufs, e->n_bufs, sizeof(*e->bufs));
  if (st) return st;
  struct adr_ipc_body_buffer* b = &e->bufs[e->n_bufs++];
  b->device = size > 0 ? dev : NULL;
  b->data = size > 0 ? data : NULL;
  b->size = size;
  b->body_offset = e->body;
  e->body += (size + 7) / 8 * 8;
  return 0;
}

/* A host block owned by the message. */
static void* scratch(struct benc* e, size_t size) {
  if (grow(e, (void**)&e->scratch, &e->cap_scratch, e->n_scratch + 1, sizeof(void*))) return NULL;
  void* p = calloc(1, size ? size : 1);
  if (p == NULL) {
    EFAIL(e, ENOMEM, "out of memory");
    return NULL;
  }
  e->scratch[e->n_scratch++] = p;
  e->scratch[e->n_scratch] = NULL;
  return p;
}

/* Reads size bytes at src (a buffer of the array) to the host. */
static int fetch(struct benc* e, void* dst, const void* src, size_t size) {
  if (size == 0) return 0;
  if (e->dev == NULL) {
    memcpy(dst, src, size);
    return 0;
  }
  struct adr_error err;
  int st = adr_copy(NULL, dst, e->dev, src, size, NULL, &err);
  if (st) return EFAIL(e, st, "reading from the device: %s", err.message);
  return 0;
}

static int64_t popcount_range(const uint8_t* bits, int64_t bit0, int64_t n) {
  int64_t c = 0;
  for (int64_t i = 0; i < n; i++) c += (bits[(bit0 + i) >> 3] >> ((bit0 + i) & 7)) & 1;
  return c;
}

/* A bitmap range [start, start + len): referenced in place when start is
 * on a byte, else shifted into a host copy. With `count`, *nulls receives
 * the number of zero bits (read on the host). */
static int bitmap(struct benc* e, const void* buf, int64_t start, int64_t len, bool count,
                  int64_t* nulls, bool emit) {
  int64_t first = start / 8, nbytes = (start % 8 + len + 7) / 8;
  uint8_t* host = NULL;
  if (count || start % 8 != 0) {
    host = scratch(e, (size_t)nbytes);
    if (host == NULL) return ENOMEM;
    int st = fetch(e, host, (const uint8_t*)buf + first, (size_t)nbytes);
    if (st) return st;
    if (count) *nulls = len - popcount_range(host, start % 8, len);
  }
  if (!emit) return 0;
  if (start % 8 == 0) return add_buffer(e, e->dev, (const uint8_t*)buf + first, (len + 7) / 8);
  uint8_t* out = scratch(e, (size_t)(len + 7) / 8);
  if (out == NULL) return ENOMEM;
  int64_t sh = start % 8;
  for (int64_t i = 0; i < (len + 7) / 8; i++) {
    unsigned v = host[i] >> sh;
    if (i + 1 < nbytes) v |= (unsigned)host[i + 1] << (8 - sh);
    out[i] = (uint8_t)v;
  }
  if (len % 8) out[len / 8] &= (uint8_t)((1u << (len % 8)) - 1);
  return add_buffer(e, NULL, out, (len + 7) / 8);
}

/* Validity of a node's range, and its null count. */
static int validity(struct benc* e, const struct ArrowArray* a, int64_t start, int64_t len,
                    int64_t* nulls) {
  const void* v = a->buffers[0];
  bool whole = start == a->offset && len == a->length;
  if (v == NULL || len == 0 || (whole && a->null_count == 0)) {
    *nulls = 0;
    return add_buffer(e, NULL, NULL, 0);
  }
  bool known = whole && a->null_count > 0;
  if (known) *nulls = a->null_count;
  int st = bitmap(e, v, start, len, !known, nulls, false);
  if (st) return st;
  if (*nulls == 0) return add_buffer(e, NULL, NULL, 0);
  return bitmap(e, v, start, len, false, nulls, true);
}

/* Offsets [start, start + len] (len + 1 entries of width w), rebased to 0
 * when they do not start there; *lo and *hi receive the first and last. */
static int offsets(struct benc* e, const void* buf, int w, int64_t start, int64_t len, int64_t* lo,
                   int64_t* hi) {
  if (len == 0) {
    *lo = *hi = 0;
    return add_buffer(e, NULL, k_zeros, w);
  }
  const uint8_t* base = (const uint8_t*)buf + (size_t)start * (size_t)w;
  uint8_t two[16];
  int st = fetch(e, two, base, (size_t)w);
  if (st == 0) st = fetch(e, two + 8, base + (size_t)len * (size_t)w, (size_t)w);
  if (st) return st;
  *lo = adr__int_load(two, w, 0);
  *hi = adr__int_load(two + 8, w, 0);
  if (*lo < 0 || *hi < *lo)
    return EFAIL(e, EINVAL, "offsets [%lld, %lld] at %lld are not increasing", (long long)*lo,
                 (long long)*hi, (long long)start);
  size_t size = (size_t)(len + 1) * (size_t)w;
  if (*lo == 0) return add_buffer(e, e->dev, base, (int64_t)size);
  uint8_t* h = scratch(e, size);
  if (h == NULL) return ENOMEM;
  st = fetch(e, h, base, size);
  if (st) return st;
  for (int64_t i = 0; i <= len; i++) adr__int_store(h, w, i, adr__int_load(h, w, i) - *lo);
  return add_buffer(e, NULL, h, (int64_t)size);
}

static int node(struct benc* e, const struct ArrowSchema* s, const struct ArrowArray* a,
                int64_t start, int64_t len, int depth, bool as_dict_values);

/* adr_format_parse, answered from the encoder's cache when this call's
 * format string is the one parsed there by an earlier batch. */
static int parse_format(struct benc* e, const char* fs, struct adr_format* out) {
  struct adr_ipc_encoder* enc = e->enc;
  int64_t k = e->n_fmt++;
  if (enc != NULL && k < enc->n_fmts && enc->fmts[k].format == fs) {
    *out = enc->fmts[k].f;
    return 0;
  }
  struct adr_error ferr;
  if (adr_format_parse(fs, out, &ferr) != 0) return EINVAL;
  if (enc != NULL && k <= enc->n_fmts) {
    if (k == enc->n_fmts &&
        grow(e, (void**)&enc->fmts, &enc->cap_fmts, enc->n_fmts, sizeof(*enc->fmts)) != 0)
      return ENOMEM;
    enc->fmts[k].format = fs;
    enc->fmts[k].f = *out;
    if (k == enc->n_fmts) enc->n_fmts++;
  }
  return 0;
}

static int child(struct benc* e, const struct ArrowSchema* s, const struct ArrowArray* a, int64_t i,
                 int64_t start, int64_t len, int depth) {
  const struct ArrowSchema* cs = s->children[i];
  const struct ArrowArray* ca = a->children[i];
  size_t mark = adr__ipc_path_push(&e->w.path, cs->name, i);
  int st;
  if (start < 0 || len < 0 || start > ca->offset + ca->length - len)
    st = EFAIL(e, EINVAL, "range [%lld, +%lld) outside the child's %lld elements",
               (long long)(start - ca->offset), (long long)len, (long long)ca->length);
  else
    st = node(e, cs, ca, start, len, depth + 1, false);
  adr__path_pop(&e->w.path, mark);
  return st;
}

static int node(struct benc* e, const struct ArrowSchema* s, const struct ArrowArray* a,
                int64_t start, int64_t len, int depth, bool as_dict_values) {
  if (depth > ADR_IPC_MAX_DEPTH)
    return EFAIL(e, EINVAL, "nested deeper than %d levels", ADR_IPC_MAX_DEPTH);
  const char* fs = s->format;
  if (as_dict_values) fs = s->dictionary->format;
  if (!as_dict_values && s->dictionary != NULL) fs = s->format; /* indices */
  const struct ArrowSchema* vs = as_dict_values ? s->dictionary : s;
  struct adr_format f;
  int pst = parse_format(e, fs, &f);
  if (pst == ENOMEM) return ENOMEM;
  if (pst != 0) return EFAIL(e, EINVAL, "bad format \"%s\"", fs);
  int64_t nulls = 0;
  int st = 0;
  int64_t idx = e->n_nodes;
  st = add_node(e, len, 0);
  if (st) return st;
  switch (f.layout) {
    case ADR_LAYOUT_NULL:
      nulls = len;
      break;
    case ADR_LAYOUT_FIXED:
      st = validity(e, a, start, len, &nulls);
      if (st) break;
      if (f.bit_width == 1) {
        int64_t dummy;
        st = len ? bitmap(e, a->buffers[1], start, len, false, &dummy, true)
                 : add_buffer(e, NULL, NULL, 0);
      } else {
        int64_t bw = f.bit_width / 8;
        st = add_buffer(e, e->dev, (const uint8_t*)a->buffers[1] + start * bw, len * bw);
      }
      break;
    case ADR_LAYOUT_VAR_BINARY: {
      st = validity(e, a, start, len, &nulls);
      int64_t lo = 0, hi = 0;
      if (st == 0) st = offsets(e, a->buffers[1], f.offset_bytes, start, len, &lo, &hi);
      if (st == 0) st = add_buffer(e, e->dev, (const uint8_t*)a->buffers[2] + lo, hi - lo);
      break;
    }
    case ADR_LAYOUT_BINARY_VIEW: {
      st = validity(e, a, start, len, &nulls);
      if (st) break;
      st = add_buffer(e, e->dev, (const uint8_t*)a->buffers[1] + 16 * start, 16 * len);
      int64_t nv = a->n_buffers - 3;
      if (st == 0 && nv > 0) {
        int64_t* sizes = scratch(e, (size_t)nv * 8);
        st = sizes ? fetch(e, sizes, a->buffers[a->n_buffers - 1], (size_t)nv * 8) : ENOMEM;
        for (int64_t i = 0; st == 0 && i < nv; i++)
          st = add_buffer(e, e->dev, a->buffers[2 + i], sizes[i]);
      }
      if (st == 0) st = grow(e, (void**)&e->variadic, &e->cap_variadic, e->n_variadic, 8);
      if (st == 0) e->variadic[e->n_variadic++] = nv;
      break;
    }
    case ADR_LAYOUT_LIST: {
      st = validity(e, a, start, len, &nulls);
      int64_t lo = 0, hi = 0;
      if (st == 0) st = offsets(e, a->buffers[1], f.offset_bytes, start, len, &lo, &hi);
      if (st == 0) st = child(e, vs, a, 0, a->children[0]->offset + lo, hi - lo, depth);
      break;
    }
    case ADR_LAYOUT_LIST_VIEW: {
      st = validity(e, a, start, len, &nulls);
      int w = f.offset_bytes;
      if (st == 0) st = add_buffer(e, e->dev, (const uint8_t*)a->buffers[1] + start * w, len * w);
      if (st == 0) st = add_buffer(e, e->dev, (const uint8_t*)a->buffers[2] + start * w, len * w);
      if (st == 0) st = child(e, vs, a, 0, a->children[0]->offset, a->children[0]->length, depth);
      break;
    }
    case ADR_LAYOUT_FIXED_LIST: {
      st = validity(e, a, start, len, &nulls);
      int64_t n = f.fixed_size;
      if (st == 0) st = child(e, vs, a, 0, a->children[0]->offset + start * n, len * n, depth);
      break;
    }
    case ADR_LAYOUT_STRUCT:
      st = validity(e, a, start, len, &nulls);
      for (int64_t i = 0; st == 0 && i < a->n_children; i++)
        st = child(e, vs, a, i, a->children[i]->offset + start, len, depth);
      break;
    case ADR_LAYOUT_SPARSE_UNION:
      st = add_buffer(e, e->dev, (const uint8_t*)a->buffers[0] + start, len);
      for (int64_t i = 0; st == 0 && i < a->n_children; i++)
        st = child(e, vs, a, i, a->children[i]->offset + start, len, depth);
      break;
    case ADR_LAYOUT_DENSE_UNION:
      st = add_buffer(e, e->dev, (const uint8_t*)a->buffers[0] + start, len);
      if (st == 0) st = add_buffer(e, e->dev, (const uint8_t*)a->buffers[1] + 4 * start, 4 * len);
      for (int64_t i = 0; st == 0 && i < a->n_children; i++)
        st = child(e, vs, a, i, a->children[i]->offset, a->children[i]->length, depth);
      break;
    case ADR_LAYOUT_RUN_END: {
      /* start is logical here: a->offset + slice start. */
      const struct ArrowArray* re = a->children[0];
      struct adr_format rf;
      int rst = parse_format(e, vs->children[0]->format, &rf);
      if (rst == ENOMEM) {
        st = ENOMEM;
        break;
      }
      if (rst != 0 ||
          (rf.type != ADR_TYPE_INT16 && rf.type != ADR_TYPE_INT32 && rf.type != ADR_TYPE_INT64)) {
        st = EFAIL(e, EINVAL, "run ends must be int16, int32 or int64");
        break;
      }
      int w = rf.bit_width / 8;
      int64_t nr = re->length;
      uint8_t* ends = scratch(e, (size_t)nr * (size_t)w);
      st = ends ? fetch(e, ends, (const uint8_t*)re->buffers[1] + re->offset * w, (size_t)(nr * w))
                : ENOMEM;
      if (st) break;
      int64_t i0 = 0;
      while (i0 < nr && adr__int_load(ends, w, i0) <= start) i0++;
      int64_t i1 = i0;
      int64_t nrun = 0;
      if (len > 0) {
        while (i1 < nr && adr__int_load(ends, w, i1) < start + len) i1++;
        if (i1 >= nr) {
          st = EFAIL(e, EINVAL, "run ends do not cover [%lld, %lld)", (long long)start,
                     (long long)(start + len));
          break;
        }
        nrun = i1 - i0 + 1;
      }
      uint8_t* out = scratch(e, (size_t)nrun * (size_t)w);
      if (out == NULL) {
        st = ENOMEM;
        break;
      }
      for (int64_t k = 0; k < nrun; k++) {
        int64_t v = adr__int_load(ends, w, i0 + k) - start;
        adr__int_store(out, w, k, v > len ? len : v);
      }
      size_t mark = adr__ipc_path_push(&e->w.path, vs->children[0]->name, 0);
      st = add_node(e, nrun, 0);
      if (st == 0) st = add_buffer(e, NULL, NULL, 0);
      if (st == 0) st = add_buffer(e, NULL, out, nrun * w);
      adr__path_pop(&e->w.path, mark);
      if (st == 0) st = child(e, vs, a, 1, a->children[1]->offset + i0, nrun, depth);
      break;
    }
  }
  if (st == 0) e->nodes[idx].null_count = nulls;
  return st;
}

/* Fills *out from the encoder's template: its bytes with this batch's
 * values written over the last batch's. */
static int finish_from_template(struct benc* e, int64_t length, struct adr_ipc_message* out) {
  struct adr_ipc_encoder* enc = e->enc;
  uint8_t* d = malloc((size_t)enc->tmpl_size);
  if (d == NULL) return EFAIL(e, ENOMEM, "out of memory");
  memcpy(d, enc->tmpl, (size_t)enc->tmpl_size);
  /* Little-endian, as fbb_put64 writes. */
#define PUT64(at, v)                                                                 \
  do {                                                                               \
    uint64_t x_ = (uint64_t)(v);                                                     \
    for (int i_ = 0; i_ < 8; i_++) d[(at) + (size_t)i_] = (uint8_t)(x_ >> (8 * i_)); \
  } while (0)
  if (enc->t_body) PUT64(enc->at_body, e->body);
  if (enc->t_length) PUT64(enc->at_length, length);
  for (int64_t i = 0; i < e->n_nodes; i++) {
    PUT64(enc->at_nodes + 16 * (size_t)i, e->nodes[i].length);
    PUT64(enc->at_nodes + 16 * (size_t)i + 8, e->nodes[i].null_count);
  }
  for (int64_t i = 0; i < e->n_bufs; i++) {
    PUT64(enc->at_bufs + 16 * (size_t)i, e->bufs[i].body_offset);
    PUT64(enc->at_bufs + 16 * (size_t)i + 8, e->bufs[i].size);
  }
  for (int64_t i = 0; i < e->n_variadic; i++)
    PUT64(enc->at_variadic + 8 * (size_t)i, e->variadic[i]);
#undef PUT64
  out->metadata = d;
  out->metadata_size = enc->tmpl_size;
  return 0;
}

static bool template_fits(const struct benc* e, int64_t length) {
  const struct adr_ipc_encoder* enc = e->enc;
  return enc != NULL && enc->have_template && enc->t_nodes == e->n_nodes &&
         enc->t_bufs == e->n_bufs && enc->t_variadic == e->n_variadic &&
         enc->t_length == (length != 0) && enc->t_body == (e->body != 0);
}

static int finish(struct benc* e, uint8_t hdr, int64_t length, int64_t dict_id, bool delta,
                  struct adr_ipc_message* out) {
  if (hdr == IPC_HDR_RECORD_BATCH && template_fits(e, length)) {
    int st = finish_from_template(e, length, out);
    if (st) return st;
    goto done;
  }
  struct fbb b;
  fbb_init(&b);
  fbb_start(&b);
  size_t hslot, body_slot, nodes_at, bufs_at, variadic_at = 0;
  adr__ipc_message_begin(&b, hdr, e->body, &hslot, &body_slot);
  size_t rb_slot = hslot;
  if (hdr == IPC_HDR_DICTIONARY_BATCH) {
    struct fbb_table d;
    fbb_table_begin(&d);
    if (dict_id != 0) fbb_table_scalar(&d, 0, 8, (uint64_t)dict_id);
    fbb_table_offset(&d, 1);
    if (delta) fbb_table_scalar(&d, 2, 1, 1);
    fbb_patch(&b, hslot, fbb_table_end(&b, &d));
    rb_slot = d.pos[1];
  }
  struct fbb_table t;
  fbb_table_begin(&t);
  if (length != 0) fbb_table_scalar(&t, 0, 8, (uint64_t)length);
  fbb_table_offset(&t, 1);
  fbb_table_offset(&t, 2);
  if (e->n_variadic > 0) fbb_table_offset(&t, 4);
  fbb_patch(&b, rb_slot, fbb_table_end(&b, &t));
  size_t t_length_slot = length != 0 ? t.pos[0] : 0;
  size_t v = fbb_vector(&b, (size_t)e->n_nodes, 16);
  for (int64_t i = 0; i < e->n_nodes; i++) {
    fbb_put64(&b, v + 4 + 16 * (size_t)i, (uint64_t)e->nodes[i].length);
    fbb_put64(&b, v + 12 + 16 * (size_t)i, (uint64_t)e->nodes[i].null_count);
  }
  fbb_patch(&b, t.pos[1], v);
  nodes_at = v + 4;
  v = fbb_vector(&b, (size_t)e->n_bufs, 16);
  bufs_at = v + 4;
  for (int64_t i = 0; i < e->n_bufs; i++) {
    fbb_put64(&b, v + 4 + 16 * (size_t)i, (uint64_t)e->bufs[i].body_offset);
    fbb_put64(&b, v + 12 + 16 * (size_t)i, (uint64_t)e->bufs[i].size);
  }
  fbb_patch(&b, t.pos[2], v);
  if (e->n_variadic > 0) {
    v = fbb_vector(&b, (size_t)e->n_variadic, 8);
    variadic_at = v + 4;
    for (int64_t i = 0; i < e->n_variadic; i++)
      fbb_put64(&b, v + 4 + 8 * (size_t)i, (uint64_t)e->variadic[i]);
    fbb_patch(&b, t.pos[4], v);
  }
  int st = adr__ipc_encapsulate(&b, e->w.op, &out->metadata, &out->metadata_size, e->error);
  fbb_free(&b);
  if (st) return st;
  struct adr_ipc_encoder* enc = e->enc;
  if (hdr == IPC_HDR_RECORD_BATCH && enc != NULL) {
    /* The next batch of this shape starts from these bytes (positions in
     * the encapsulated message: after the 8-byte prefix). */
    uint8_t* keep = realloc(enc->tmpl, (size_t)out->metadata_size);
    enc->have_template = keep != NULL;
    if (keep != NULL) {
      enc->tmpl = keep;
      memcpy(keep, out->metadata, (size_t)out->metadata_size);
      enc->tmpl_size = out->metadata_size;
      enc->t_nodes = e->n_nodes;
      enc->t_bufs = e->n_bufs;
      enc->t_variadic = e->n_variadic;
      enc->t_length = length != 0;
      enc->t_body = e->body != 0;
      enc->at_body = 8 + body_slot;
      enc->at_length = 8 + t_length_slot;
      enc->at_nodes = 8 + nodes_at;
      enc->at_bufs = 8 + bufs_at;
      enc->at_variadic = 8 + variadic_at;
    }
  }
done:
  out->struct_size = sizeof(*out);
  out->type =
      hdr == IPC_HDR_RECORD_BATCH ? ADR_IPC_MESSAGE_RECORD_BATCH : ADR_IPC_MESSAGE_DICTIONARY_BATCH;
  out->body_size = e->body;
  out->n_buffers = e->n_bufs;
  out->buffers = e->bufs;
  out->length = length;
  out->dictionary_id = dict_id;
  out->private_data = e->scratch;
  e->bufs = NULL;
  e->scratch = NULL;
  return 0;
}

static void benc_free(struct benc* e) {
  if (e->enc != NULL) {
    /* The encoder keeps the arrays (and what they grew to). */
    e->enc->nodes = e->nodes;
    e->enc->cap_nodes = e->cap_nodes;
    e->enc->variadic = e->variadic;
    e->enc->cap_variadic = e->cap_variadic;
  } else {
    free(e->nodes);
    free(e->variadic);
  }
  free(e->bufs);
  if (e->scratch != NULL)
    for (int64_t i = 0; i < e->n_scratch; i++) free(e->scratch[i]);
  free(e->scratch);
}

/* Common start: checks, the array's device, the wait for its event. */
static int begin(struct benc* e, const struct ArrowSchema* schema,
                 const struct ArrowDeviceArray* array, struct adr_ipc_message* out) {
  if (out == NULL) return EFAIL(e, EINVAL, "out is NULL");
  memset(out, 0, sizeof(*out));
  if (schema == NULL || array == NULL) return EFAIL(e, EINVAL, "schema or array is NULL");
  if (schema->format == NULL || strcmp(schema->format, "+s") != 0)
    return EFAIL(e, EINVAL, "the schema of a batch must be a struct (\"+s\")");
  struct adr__path path;
  adr__path_root(&path);
  int st = adr__validate_structure(e->w.op, schema, &array->array, &path, 0, e->error);
  if (st) return st;
  if (array->device_type != ARROW_DEVICE_CPU) {
    st = adr_device_array_device(array, &e->dev, e->error);
    if (st) return st;
  }
  return adr_device_array_wait(array, NULL, e->error);
}

static int encode_record_batch(struct adr_ipc_encoder* enc, const char* op,
                               const struct ArrowSchema* schema,
                               const struct ArrowDeviceArray* array, struct adr_ipc_message* out,
                               struct adr_error* error) {
  struct benc e = {.error = error, .enc = enc};
  if (enc != NULL) {
    e.nodes = enc->nodes;
    e.cap_nodes = enc->cap_nodes;
    e.variadic = enc->variadic;
    e.cap_variadic = enc->cap_variadic;
  }
  e.w.op = op;
  e.w.message = -1;
  adr__path_root(&e.w.path);
  int st = begin(&e, schema, array, out);
  const struct ArrowArray* a = st == 0 ? &array->array : NULL;
  if (st == 0 && a->null_count != 0 && a->n_buffers > 0 && a->buffers[0] != NULL && a->length > 0) {
    int64_t nulls = a->null_count;
    if (nulls < 0) st = bitmap(&e, a->buffers[0], a->offset, a->length, true, &nulls, false);
    if (st == 0 && nulls > 0)
      st = EFAIL(&e, EINVAL,
                 "the batch's struct has %lld null rows (a record batch has no validity of its "
                 "own)",
                 (long long)nulls);
  }
  for (int64_t i = 0; st == 0 && i < a->n_children; i++)
    st = child(&e, schema, a, i, a->children[i]->offset + a->offset, a->length, 0);
  if (st == 0) st = finish(&e, IPC_HDR_RECORD_BATCH, a->length, -1, false, out);
  benc_free(&e);
  return st;
}

int adr_ipc_encode_record_batch(const struct ArrowSchema* schema,
                                const struct ArrowDeviceArray* array, struct adr_ipc_message* out,
                                struct adr_error* error) {
  return encode_record_batch(NULL, "adr_ipc_encode_record_batch", schema, array, out, error);
}

int adr_ipc_encoder_create(const struct ArrowSchema* schema, struct adr_ipc_encoder** out,
                           struct adr_error* error) {
  const char* op = "adr_ipc_encoder_create";
  if (out == NULL) return adr__errorf(error, EINVAL, op, NULL, "out is NULL");
  *out = NULL;
  if (schema == NULL || schema->release == NULL || schema->format == NULL ||
      strcmp(schema->format, "+s") != 0)
    return adr__errorf(error, EINVAL, op, NULL,
                       "the schema of a batch must be a live struct (\"+s\")");
  struct adr_ipc_encoder* enc = calloc(1, sizeof(*enc));
  if (enc == NULL) return adr__errorf(error, ENOMEM, op, NULL, "out of memory");
  enc->schema = schema;
  *out = enc;
  return 0;
}

void adr_ipc_encoder_destroy(struct adr_ipc_encoder* encoder) {
  if (encoder == NULL) return;
  free(encoder->fmts);
  free(encoder->nodes);
  free(encoder->variadic);
  free(encoder->tmpl);
  free(encoder);
}

int adr_ipc_encoder_record_batch(struct adr_ipc_encoder* encoder,
                                 const struct ArrowDeviceArray* array, struct adr_ipc_message* out,
                                 struct adr_error* error) {
  const char* op = "adr_ipc_encoder_record_batch";
  if (encoder == NULL) {
    if (out != NULL) memset(out, 0, sizeof(*out));
    return adr__errorf(error, EINVAL, op, NULL, "encoder is NULL");
  }
  return encode_record_batch(encoder, op, encoder->schema, array, out, error);
}

/* Finds the array node of dictionary field k, walking like the schema. */
static bool dict_array(const struct ArrowSchema* s, const struct ArrowArray* a, int64_t k,
                       int64_t* next, int depth, const struct ArrowSchema** os,
                       const struct ArrowArray** oa) {
  if (depth > ADR_IPC_MAX_DEPTH) return false;
  const struct ArrowSchema* vs = s;
  const struct ArrowArray* va = a;
  if (s->dictionary != NULL) {
    if (*next == k) {
      *os = s;
      *oa = a;
      return true;
    }
    (*next)++;
    vs = s->dictionary;
    va = a->dictionary;
  }
  for (int64_t i = 0; i < vs->n_children; i++)
    if (dict_array(vs->children[i], va->children[i], k, next, depth + 1, os, oa)) return true;
  return false;
}

const struct ArrowArray* adr__ipc_dictionary_array(const struct ArrowSchema* schema,
                                                   const struct ArrowArray* array, int64_t k) {
  int64_t next = 0;
  const struct ArrowSchema* ds = NULL;
  const struct ArrowArray* da = NULL;
  if (array->n_children != schema->n_children) return NULL;
  for (int64_t i = 0; i < schema->n_children; i++)
    if (dict_array(schema->children[i], array->children[i], k, &next, 1, &ds, &da))
      return da->dictionary;
  return NULL;
}

/* Same shape and the same buffer pointers at every level. */
static bool same_array(const struct ArrowArray* a, const struct ArrowArray* b, int depth) {
  if (a == b) return true;
  if (a == NULL || b == NULL || depth > ADR_IPC_MAX_DEPTH) return false;
  if (a->length != b->length || a->offset != b->offset || a->null_count != b->null_count ||
      a->n_buffers != b->n_buffers || a->n_children != b->n_children)
    return false;
  for (int64_t i = 0; i < a->n_buffers; i++)
    if (a->buffers[i] != b->buffers[i]) return false;
  for (int64_t i = 0; i < a->n_children; i++)
    if (!same_array(a->children[i], b->children[i], depth + 1)) return false;
  return (a->dictionary == NULL && b->dictionary == NULL) ||
         same_array(a->dictionary, b->dictionary, depth + 1);
}

int adr_ipc_dictionary_unchanged(const struct ArrowSchema* schema,
                                 const struct ArrowDeviceArray* previous,
                                 const struct ArrowDeviceArray* array, int64_t id, bool* out,
                                 struct adr_error* error) {
  static const char op[] = "adr_ipc_dictionary_unchanged";
  if (out == NULL) return adr_error_set(error, EINVAL, "[%s] out is NULL", op);
  *out = false;
  if (schema == NULL || schema->release == NULL)
    return adr_error_set(error, EINVAL, "[%s] schema is NULL or released", op);
  if (previous == NULL || previous->array.release == NULL || array == NULL ||
      array->array.release == NULL)
    return adr_error_set(error, EINVAL, "[%s] a batch is NULL or released", op);
  const struct ArrowArray* a = adr__ipc_dictionary_array(schema, &previous->array, id);
  const struct ArrowArray* b = adr__ipc_dictionary_array(schema, &array->array, id);
  if (id < 0 || a == NULL || b == NULL)
    return adr_error_set(error, EINVAL, "[%s] no dictionary id %lld in both batches of the schema",
                         op, (long long)id);
  *out = previous->device_type == array->device_type && previous->device_id == array->device_id &&
         same_array(a, b, 0);
  return 0;
}

/* The DictionaryBatch of dictionary `id` holding the values [from,
 * d->length) of `d` (the values of the dictionary-encoded field `ds`), a
 * delta when from > 0. */
static int dictionary_values(struct benc* e, const struct ArrowSchema* ds,
                             const struct ArrowArray* d, int64_t id, int64_t from, bool delta,
                             struct adr_ipc_message* out) {
  char label[48];
  snprintf(label, sizeof(label), "<dictionary %lld>", (long long)id);
  adr__ipc_path_push(&e->w.path, label, 0);
  int st = node(e, ds, d, d->offset + from, d->length - from, 1, true);
  if (st == 0) st = finish(e, IPC_HDR_DICTIONARY_BATCH, d->length - from, id, delta, out);
  return st;
}

/* Checks and finds dictionary `id` of a batch. */
static int find_dictionary(struct benc* e, const struct ArrowSchema* schema,
                           const struct ArrowDeviceArray* array, int64_t id,
                           struct adr_ipc_message* out, const struct ArrowSchema** ds,
                           const struct ArrowArray** da) {
  int st = begin(e, schema, array, out);
  int64_t next = 0;
  bool found = false;
  for (int64_t i = 0; st == 0 && !found && i < schema->n_children; i++)
    found = dict_array(schema->children[i], array->array.children[i], id, &next, 1, ds, da);
  if (st == 0 && !found)
    st = EFAIL(e, EINVAL, "no dictionary id %lld in the schema", (long long)id);
  return st;
}

int adr_ipc_encode_dictionary_batch(const struct ArrowSchema* schema,
                                    const struct ArrowDeviceArray* array, int64_t id,
                                    struct adr_ipc_message* out, struct adr_error* error) {
  struct benc e = {.error = error};
  e.w.op = "adr_ipc_encode_dictionary_batch";
  e.w.message = -1;
  adr__path_root(&e.w.path);
  const struct ArrowSchema* ds = NULL;
  const struct ArrowArray* da = NULL;
  int st = find_dictionary(&e, schema, array, id, out, &ds, &da);
  if (st == 0) st = dictionary_values(&e, ds, da->dictionary, id, 0, false, out);
  benc_free(&e);
  return st;
}

int adr_ipc_encode_dictionary_delta(const struct ArrowSchema* schema,
                                    const struct ArrowDeviceArray* array, int64_t id, int64_t from,
                                    struct adr_ipc_message* out, struct adr_error* error) {
  struct benc e = {.error = error};
  e.w.op = "adr_ipc_encode_dictionary_delta";
  e.w.message = -1;
  adr__path_root(&e.w.path);
  const struct ArrowSchema* ds = NULL;
  const struct ArrowArray* da = NULL;
  int st = find_dictionary(&e, schema, array, id, out, &ds, &da);
  if (st == 0 && (from < 0 || from > da->dictionary->length))
    st = EFAIL(&e, EINVAL, "delta start %lld outside the dictionary of %lld values",
               (long long)from, (long long)da->dictionary->length);
  if (st == 0) st = dictionary_values(&e, ds, da->dictionary, id, from, true, out);
  benc_free(&e);
  return st;
}

int adr__ipc_encode_dictionary_values(const char* op, const struct ArrowSchema* field,
                                      const struct ArrowArray* values, int64_t id,
                                      struct adr_ipc_message* out, struct adr_error* error) {
  struct benc e = {.error = error};
  e.w.op = op;
  e.w.message = -1;
  adr__path_root(&e.w.path);
  memset(out, 0, sizeof(*out));
  int st = dictionary_values(&e, field, values, id, 0, false, out);
  benc_free(&e);
  return st;
}
