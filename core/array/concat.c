/* SPDX-License-Identifier: Apache-2.0
 *
 * Concatenation of ranges of host arrays of one type into a new host array
 * (offset 0, standalone: it owns copies of everything it uses). The IPC
 * reader uses it to apply a delta DictionaryBatch: the dictionary becomes
 * the old values followed by the delta's (docs/ipc.md, "Dictionaries").
 *
 * A part is a logical range [start, start + len) of one array (its offset
 * is added when its buffers are read). Children are reached the way the
 * layout says: the range of a list's child comes from its offsets, a
 * struct's or sparse union's children take the parent's physical range, a
 * fixed-size list's the range times the list size; list views and dense
 * unions keep their children whole (their offsets are shifted by the
 * lengths of the parts before), binary views keep their variadic buffers
 * whole (buffer indices shifted). Run-end-encoded parts keep the runs
 * that overlap the range, their ends clipped and rebased.
 *
 * Not supported (ENOTSUP): a dictionary-encoded node (its dictionaries
 * would have to be unified). Offsets or run ends that no longer fit their
 * type after concatenation: EOVERFLOW.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "array_internal.h"

struct cat_part {
  const struct ArrowArray* a;
  int64_t start; /* logical: a->offset is added on access */
  int64_t len;
};

struct cat_ctx {
  const char* op;
  struct adr_error* error;
  struct adr__path path;
};

static int cat_nodes(struct cat_ctx* c, const struct ArrowSchema* s, const struct cat_part* parts,
                     int64_t n, struct ArrowArray* out, int depth);

static int cat_fail(struct cat_ctx* c, int st, const char* what) {
  return adr__path_error(c->error, st, c->op, &c->path, "%s", what);
}

/* Copies n bits from src (bit src_bit) to dst (bit dst_bit); dst's other
 * bits are kept. Whole bytes at once when both positions are byte-aligned. */
static void copy_bits(uint8_t* dst, int64_t dst_bit, const uint8_t* src, int64_t src_bit,
                      int64_t n) {
  if (n <= 0) return;
  if ((dst_bit & 7) == 0 && (src_bit & 7) == 0) {
    int64_t bytes = n >> 3;
    memcpy(dst + (dst_bit >> 3), src + (src_bit >> 3), (size_t)bytes);
    dst_bit += bytes << 3;
    src_bit += bytes << 3;
    n -= bytes << 3;
  }
  for (int64_t i = 0; i < n; i++) {
    int64_t d = dst_bit + i, s = src_bit + i;
    uint8_t m = (uint8_t)(1u << (d & 7));
    if (adr__bit(src, s))
      dst[d >> 3] |= m;
    else
      dst[d >> 3] &= (uint8_t)~m;
  }
}

static void set_bits(uint8_t* dst, int64_t bit, int64_t n) {
  for (int64_t i = bit; i < bit + n; i++) dst[i >> 3] |= (uint8_t)(1u << (i & 7));
}

static int64_t count_zeros(const uint8_t* bits, int64_t n) {
  int64_t ones = 0;
  for (int64_t i = 0; i < (n >> 3); i++) ones += __builtin_popcount(bits[i]);
  for (int64_t i = n & ~(int64_t)7; i < n; i++) ones += adr__bit(bits, i);
  return n - ones;
}

static int alloc_buf(struct cat_ctx* c, struct ArrowArray* out, int64_t i, int64_t size,
                     uint8_t** p) {
  void* ptr = NULL;
  /* Never 0 bytes: a consumer may not accept a NULL data buffer. */
  int st = adr_array_alloc_buffer(out, i, (size_t)(size > 0 ? size : 8), NULL, &ptr, c->error);
  if (st) return st;
  memset(ptr, 0, (size_t)(size > 0 ? size : 8));
  *p = ptr;
  return 0;
}

static int64_t phys(const struct cat_part* p) {
  return p->a->offset + p->start;
}

static int cat_validity(struct cat_ctx* c, const struct cat_part* parts, int64_t n,
                        struct ArrowArray* out) {
  bool any = false;
  for (int64_t i = 0; i < n; i++)
    if (parts[i].len > 0 && parts[i].a->null_count != 0 && parts[i].a->buffers[0] != NULL)
      any = true;
  if (!any) {
    out->null_count = 0;
    return 0;
  }
  uint8_t* v;
  int st = alloc_buf(c, out, 0, (out->length + 7) / 8, &v);
  if (st) return st;
  int64_t at = 0;
  for (int64_t i = 0; i < n; i++) {
    const uint8_t* src = parts[i].a->null_count != 0 ? adr__buf(parts[i].a, 0) : NULL;
    if (src != NULL)
      copy_bits(v, at, src, phys(&parts[i]), parts[i].len);
    else
      set_bits(v, at, parts[i].len);
    at += parts[i].len;
  }
  out->null_count = count_zeros(v, out->length);
  return 0;
}

static int cat_fixed(struct cat_ctx* c, const struct adr_format* f, const struct cat_part* parts,
                     int64_t n, struct ArrowArray* out) {
  uint8_t* d;
  if (f->bit_width == 1) {
    int st = alloc_buf(c, out, 1, (out->length + 7) / 8, &d);
    if (st) return st;
    int64_t at = 0;
    for (int64_t i = 0; i < n; i++) {
      copy_bits(d, at, adr__buf(parts[i].a, 1), phys(&parts[i]), parts[i].len);
      at += parts[i].len;
    }
    return 0;
  }
  int64_t w = f->bit_width / 8;
  int st = alloc_buf(c, out, 1, out->length * w, &d);
  if (st) return st;
  for (int64_t i = 0; i < n; i++) {
    if (parts[i].len == 0) continue;
    memcpy(d, adr__buf(parts[i].a, 1) + phys(&parts[i]) * w, (size_t)(parts[i].len * w));
    d += parts[i].len * w;
  }
  return 0;
}

/* Offsets of var-binary and list parts, rebased to run on from part to
 * part; ranges[i] receives part i's [first, last) in what the offsets
 * index. */
static int cat_offsets(struct cat_ctx* c, int w, const struct cat_part* parts, int64_t n,
                       struct ArrowArray* out, struct cat_part* ranges, int64_t* total) {
  int64_t sum = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t p = phys(&parts[i]);
    int64_t lo = parts[i].len ? adr__offset_at(parts[i].a, 1, w, p) : 0;
    int64_t hi = parts[i].len ? adr__offset_at(parts[i].a, 1, w, p + parts[i].len) : 0;
    ranges[i].start = lo;
    ranges[i].len = hi - lo;
    sum += hi - lo;
    if (w == 4 && sum > INT32_MAX)
      return cat_fail(c, EOVERFLOW, "the concatenation needs offsets past 2^31 - 1");
  }
  uint8_t* o;
  int st = alloc_buf(c, out, 1, (out->length + 1) * w, &o);
  if (st) return st;
  int64_t at = 0, base = 0;
  adr__int_store(o, w, 0, 0);
  for (int64_t i = 0; i < n; i++) {
    int64_t p = phys(&parts[i]);
    for (int64_t k = 1; k <= parts[i].len; k++)
      adr__int_store(o, w, at + k,
                     base + adr__offset_at(parts[i].a, 1, w, p + k) - ranges[i].start);
    at += parts[i].len;
    base += ranges[i].len;
  }
  *total = sum;
  return 0;
}

static int cat_var_binary(struct cat_ctx* c, const struct adr_format* f,
                          const struct cat_part* parts, int64_t n, struct ArrowArray* out,
                          struct cat_part* ranges) {
  int64_t total;
  int st = cat_offsets(c, f->offset_bytes, parts, n, out, ranges, &total);
  if (st) return st;
  uint8_t* d;
  st = alloc_buf(c, out, 2, total, &d);
  if (st) return st;
  for (int64_t i = 0; i < n; i++) {
    if (ranges[i].len == 0) continue;
    memcpy(d, adr__buf(parts[i].a, 2) + ranges[i].start, (size_t)ranges[i].len);
    d += ranges[i].len;
  }
  return 0;
}

/* Binary views: views copied, the variadic buffers of each part kept whole
 * after those of the parts before (indices of out-of-line views shifted). */
static int cat_views(struct cat_ctx* c, const struct cat_part* parts, int64_t n,
                     struct ArrowArray* out) {
  uint8_t* views;
  int st = alloc_buf(c, out, 1, out->length * 16, &views);
  if (st) return st;
  int64_t nv_out = out->n_buffers - 3, vb = 0;
  uint8_t* sizes;
  st = alloc_buf(c, out, out->n_buffers - 1, nv_out * 8, &sizes);
  if (st) return st;
  for (int64_t i = 0; i < n; i++) {
    const struct ArrowArray* a = parts[i].a;
    int64_t nv = a->n_buffers - 3;
    const uint8_t* src = adr__buf(a, 1) + phys(&parts[i]) * 16;
    for (int64_t k = 0; k < parts[i].len; k++) {
      uint8_t* v = views + 16 * k;
      memcpy(v, src + 16 * k, 16);
      int32_t len, idx;
      memcpy(&len, v, 4);
      if (len <= 12) continue;
      memcpy(&idx, v + 8, 4);
      if (vb + idx > INT32_MAX)
        return cat_fail(c, EOVERFLOW, "the concatenation has more than 2^31 - 1 data buffers");
      idx = (int32_t)(vb + idx);
      memcpy(v + 8, &idx, 4);
    }
    views += 16 * parts[i].len;
    const int64_t* in_sizes = (const int64_t*)a->buffers[a->n_buffers - 1];
    for (int64_t k = 0; k < nv; k++) {
      uint8_t* d;
      st = alloc_buf(c, out, 2 + vb + k, in_sizes[k], &d);
      if (st) return st;
      if (in_sizes[k] > 0) memcpy(d, a->buffers[2 + k], (size_t)in_sizes[k]);
      memcpy(sizes + 8 * (vb + k), &in_sizes[k], 8);
    }
    vb += nv;
  }
  return 0;
}

static int cat_child(struct cat_ctx* c, const struct ArrowSchema* s, int64_t k,
                     const struct cat_part* parts, int64_t n, struct ArrowArray* out, int depth) {
  size_t mark = adr__path_push_child(&c->path, k);
  int st = cat_nodes(c, s->children[k], parts, n, out->children[k], depth + 1);
  adr__path_pop(&c->path, mark);
  return st;
}

/* Children reached by position: child range = f(parent range). */
static int cat_positional(struct cat_ctx* c, const struct ArrowSchema* s, int64_t scale,
                          const struct cat_part* parts, int64_t n, struct ArrowArray* out,
                          struct cat_part* cp, int depth) {
  for (int64_t k = 0; k < out->n_children; k++) {
    for (int64_t i = 0; i < n; i++) {
      cp[i].a = parts[i].a->children[k];
      cp[i].start = phys(&parts[i]) * scale;
      cp[i].len = parts[i].len * scale;
    }
    int st = cat_child(c, s, k, cp, n, out, depth);
    if (st) return st;
  }
  return 0;
}

/* Children kept whole (list views, dense unions). */
static int cat_whole_children(struct cat_ctx* c, const struct ArrowSchema* s,
                              const struct cat_part* parts, int64_t n, struct ArrowArray* out,
                              struct cat_part* cp, int depth) {
  for (int64_t k = 0; k < out->n_children; k++) {
    for (int64_t i = 0; i < n; i++) {
      cp[i].a = parts[i].a->children[k];
      cp[i].start = 0;
      cp[i].len = parts[i].a->children[k]->length;
    }
    int st = cat_child(c, s, k, cp, n, out, depth);
    if (st) return st;
  }
  return 0;
}

static int cat_list_view(struct cat_ctx* c, const struct ArrowSchema* s, const struct adr_format* f,
                         const struct cat_part* parts, int64_t n, struct ArrowArray* out,
                         struct cat_part* cp, int depth) {
  int w = f->offset_bytes;
  uint8_t *o, *z;
  int st = alloc_buf(c, out, 1, out->length * w, &o);
  if (st == 0) st = alloc_buf(c, out, 2, out->length * w, &z);
  if (st) return st;
  int64_t at = 0, base = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t p = phys(&parts[i]);
    for (int64_t k = 0; k < parts[i].len; k++) {
      int64_t off = adr__offset_at(parts[i].a, 1, w, p + k) + base;
      if (w == 4 && off > INT32_MAX)
        return cat_fail(c, EOVERFLOW, "the concatenation needs offsets past 2^31 - 1");
      adr__int_store(o, w, at + k, off);
      adr__int_store(z, w, at + k, adr__offset_at(parts[i].a, 2, w, p + k));
    }
    at += parts[i].len;
    base += parts[i].a->children[0]->length;
  }
  return cat_whole_children(c, s, parts, n, out, cp, depth);
}

static int cat_dense_union(struct cat_ctx* c, const struct ArrowSchema* s,
                           const struct adr_format* f, const struct cat_part* parts, int64_t n,
                           struct ArrowArray* out, struct cat_part* cp, int depth) {
  uint8_t *t, *o;
  int st = alloc_buf(c, out, 0, out->length, &t);
  if (st == 0) st = alloc_buf(c, out, 1, out->length * 4, &o);
  if (st) return st;
  int64_t base[ADR_MAX_UNION_TYPE_IDS] = {0};
  int8_t child_of[256];
  memset(child_of, -1, sizeof(child_of));
  for (int32_t k = 0; k < f->n_type_ids; k++) child_of[(uint8_t)f->type_ids[k]] = (int8_t)k;
  int64_t at = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t p = phys(&parts[i]);
    const int8_t* ids = (const int8_t*)adr__buf(parts[i].a, 0);
    for (int64_t k = 0; k < parts[i].len; k++) {
      int8_t ci = child_of[(uint8_t)ids[p + k]];
      if (ci < 0) return cat_fail(c, EINVAL, "type id not in the union's format");
      int64_t off = adr__offset_at(parts[i].a, 1, 4, p + k) + base[ci];
      if (off > INT32_MAX)
        return cat_fail(c, EOVERFLOW, "the concatenation needs offsets past 2^31 - 1");
      t[at + k] = (uint8_t)ids[p + k];
      adr__int_store(o, 4, at + k, off);
    }
    at += parts[i].len;
    for (int64_t k = 0; k < parts[i].a->n_children; k++) base[k] += parts[i].a->children[k]->length;
  }
  return cat_whole_children(c, s, parts, n, out, cp, depth);
}

static int64_t run_end_at(const struct ArrowArray* re, int w, int64_t j) {
  return adr__int_load(adr__buf(re, 1), w, re->offset + j);
}

/* Run-end encoded: the runs overlapping each part's range, their ends
 * clipped to it and shifted by the lengths before; the values of those
 * runs. */
static int cat_run_end(struct cat_ctx* c, const struct ArrowSchema* s, const struct cat_part* parts,
                       int64_t n, struct ArrowArray* out, struct cat_part* cp, int depth) {
  struct adr_format rf;
  int st = adr_format_parse(s->children[0]->format, &rf, c->error);
  if (st) return st;
  int w = rf.bit_width / 8;
  int64_t limit = w == 2 ? INT16_MAX : w == 4 ? INT32_MAX : INT64_MAX;
  if (out->length > limit)
    return cat_fail(c, EOVERFLOW, "the concatenation is longer than its run ends can count");
  int64_t runs = 0;
  for (int64_t i = 0; i < n; i++) {
    const struct ArrowArray* re = parts[i].a->children[0];
    int64_t lo = phys(&parts[i]), hi = lo + parts[i].len, j0 = 0, j1;
    if (parts[i].len == 0) {
      cp[i] = (struct cat_part){parts[i].a->children[1], 0, 0};
      continue;
    }
    /* First run ending after lo, then the first ending at or after hi. */
    int64_t l = 0, h = re->length;
    while (l < h) {
      int64_t m = l + (h - l) / 2;
      if (run_end_at(re, w, m) > lo)
        h = m;
      else
        l = m + 1;
    }
    j0 = l;
    h = re->length;
    while (l < h) {
      int64_t m = l + (h - l) / 2;
      if (run_end_at(re, w, m) >= hi)
        h = m;
      else
        l = m + 1;
    }
    j1 = l;
    if (j1 >= re->length) return cat_fail(c, EINVAL, "run ends stop before the array's end");
    cp[i] = (struct cat_part){parts[i].a->children[1], j0, j1 - j0 + 1};
    runs += j1 - j0 + 1;
  }
  /* Run ends: a new node of the run-end type, no nulls. */
  struct ArrowArray* ro = out->children[0];
  st = adr_array_init(NULL, 2, 0, ro, c->error);
  if (st) return st;
  ro->length = runs;
  uint8_t* d;
  st = alloc_buf(c, ro, 1, runs * w, &d);
  if (st) return st;
  int64_t at = 0, base = 0;
  for (int64_t i = 0; i < n; i++) {
    const struct ArrowArray* re = parts[i].a->children[0];
    int64_t lo = phys(&parts[i]), hi = lo + parts[i].len;
    for (int64_t j = cp[i].start; j < cp[i].start + cp[i].len; j++) {
      int64_t e = run_end_at(re, w, j);
      adr__int_store(d, w, at++, base + (e < hi ? e : hi) - lo);
    }
    base += parts[i].len;
  }
  size_t mark = adr__path_push_child(&c->path, 1);
  st = cat_nodes(c, s->children[1], cp, n, out->children[1], depth + 1);
  adr__path_pop(&c->path, mark);
  return st;
}

static int cat_nodes(struct cat_ctx* c, const struct ArrowSchema* s, const struct cat_part* parts,
                     int64_t n, struct ArrowArray* out, int depth) {
  if (depth > ADR__MAX_DEPTH) return cat_fail(c, EINVAL, "nested deeper than the limit");
  if (s->dictionary != NULL)
    return cat_fail(c, ENOTSUP, "cannot concatenate a dictionary-encoded field");
  struct adr_format f;
  int st = adr_format_parse(s->format, &f, c->error);
  if (st) return st;
  int64_t total = 0;
  for (int64_t i = 0; i < n; i++) total += parts[i].len;
  int64_t nb = f.n_buffers, nc = f.layout == ADR_LAYOUT_STRUCT ? s->n_children : f.n_children;
  if (f.layout == ADR_LAYOUT_BINARY_VIEW)
    for (int64_t i = 0; i < n; i++) nb += parts[i].a->n_buffers - 3;
  if (f.layout == ADR_LAYOUT_FIXED || f.layout == ADR_LAYOUT_VAR_BINARY ||
      f.layout == ADR_LAYOUT_BINARY_VIEW || f.layout == ADR_LAYOUT_NULL)
    nc = 0;
  st = adr_array_init(NULL, nb, nc, out, c->error);
  if (st) return st;
  out->length = total;
  struct cat_part* cp = calloc((size_t)(n ? n : 1), sizeof(*cp));
  if (cp == NULL) return cat_fail(c, ENOMEM, "out of memory");
  if (adr__has_validity(f.layout)) st = cat_validity(c, parts, n, out);
  if (st == 0) switch (f.layout) {
      case ADR_LAYOUT_NULL:
        out->null_count = total;
        break;
      case ADR_LAYOUT_FIXED:
        st = cat_fixed(c, &f, parts, n, out);
        break;
      case ADR_LAYOUT_VAR_BINARY:
        st = cat_var_binary(c, &f, parts, n, out, cp);
        break;
      case ADR_LAYOUT_BINARY_VIEW:
        st = cat_views(c, parts, n, out);
        break;
      case ADR_LAYOUT_LIST: {
        int64_t child_total;
        st = cat_offsets(c, f.offset_bytes, parts, n, out, cp, &child_total);
        for (int64_t i = 0; st == 0 && i < n; i++) cp[i].a = parts[i].a->children[0];
        if (st == 0) st = cat_child(c, s, 0, cp, n, out, depth);
        break;
      }
      case ADR_LAYOUT_LIST_VIEW:
        st = cat_list_view(c, s, &f, parts, n, out, cp, depth);
        break;
      case ADR_LAYOUT_FIXED_LIST:
        st = cat_positional(c, s, f.fixed_size, parts, n, out, cp, depth);
        break;
      case ADR_LAYOUT_STRUCT:
        st = cat_positional(c, s, 1, parts, n, out, cp, depth);
        break;
      case ADR_LAYOUT_SPARSE_UNION: {
        uint8_t* t;
        st = alloc_buf(c, out, 0, total, &t);
        for (int64_t i = 0; st == 0 && i < n; i++) {
          if (parts[i].len > 0)
            memcpy(t, adr__buf(parts[i].a, 0) + phys(&parts[i]), (size_t)parts[i].len);
          t += parts[i].len;
        }
        if (st == 0) st = cat_positional(c, s, 1, parts, n, out, cp, depth);
        break;
      }
      case ADR_LAYOUT_DENSE_UNION:
        st = cat_dense_union(c, s, &f, parts, n, out, cp, depth);
        break;
      case ADR_LAYOUT_RUN_END:
        st = cat_run_end(c, s, parts, n, out, cp, depth);
        break;
    }
  free(cp);
  return st;
}

int adr__array_concat_host(const char* op, const struct ArrowSchema* schema,
                           const struct ArrowArray* const* arrays, int64_t n,
                           struct ArrowArray* out, struct adr_error* error) {
  struct cat_ctx c = {.op = op, .error = error};
  adr__path_root(&c.path);
  memset(out, 0, sizeof(*out));
  struct cat_part* parts = calloc((size_t)(n ? n : 1), sizeof(*parts));
  if (parts == NULL) return adr__errorf(error, ENOMEM, op, NULL, "out of memory");
  for (int64_t i = 0; i < n; i++) parts[i] = (struct cat_part){arrays[i], 0, arrays[i]->length};
  int st = cat_nodes(&c, schema, parts, n, out, 0);
  free(parts);
  if (st != 0 && out->release != NULL) out->release(out);
  return st;
}
