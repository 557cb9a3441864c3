/* SPDX-License-Identifier: Apache-2.0
 *
 * Logical comparison of two arrays.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array_internal.h"

/* A schema node's format with its children's and dictionary's, parsed
 * once per comparison rather than once per element. */
struct fmt_node {
  struct adr_format f;
  int64_t n_children;
  struct fmt_node* children;
  struct fmt_node* dictionary;
};

static void fmt_free(struct fmt_node* n) {
  for (int64_t i = 0; n->children != NULL && i < n->n_children; i++) fmt_free(&n->children[i]);
  free(n->children);
  if (n->dictionary != NULL) {
    fmt_free(n->dictionary);
    free(n->dictionary);
  }
}

/* Parses the tree of `s` (validated already: every format parses). */
static int fmt_tree(const struct ArrowSchema* s, struct fmt_node* out) {
  memset(out, 0, sizeof(*out));
  if (adr_format_parse(s->format, &out->f, NULL) != 0) return EINVAL;
  if (s->n_children > 0) {
    out->children = calloc((size_t)s->n_children, sizeof(*out->children));
    if (out->children == NULL) return ENOMEM;
    out->n_children = s->n_children;
    for (int64_t i = 0; i < s->n_children; i++) {
      int st = fmt_tree(s->children[i], &out->children[i]);
      if (st) return st;
    }
  }
  if (s->dictionary != NULL) {
    out->dictionary = calloc(1, sizeof(*out->dictionary));
    if (out->dictionary == NULL) return ENOMEM;
    return fmt_tree(s->dictionary, out->dictionary);
  }
  return 0;
}

/* The steps from the root to the element being compared: a child index,
 * or -1 for a dictionary; formatted only when a difference is found. */
#define CMP_MAX_STEPS (2 * ADR__MAX_DEPTH + 2)

struct cmp_ctx {
  int64_t steps[CMP_MAX_STEPS];
  int depth;
  char reason[512];
  bool differs;
};

static void push(struct cmp_ctx* c, int64_t step) {
  if (c->depth < CMP_MAX_STEPS) c->steps[c->depth] = step;
  c->depth++;
}

static bool differ(struct cmp_ctx* c, int64_t index, const char* fmt, ...) ADR_PRINTF(3, 4);
static bool differ(struct cmp_ctx* c, int64_t index, const char* fmt, ...) {
  if (!c->differs) {
    c->differs = true;
    struct adr__path path;
    adr__path_root(&path);
    for (int i = 0; i < c->depth && i < CMP_MAX_STEPS; i++) {
      if (c->steps[i] < 0)
        adr__path_push_name(&path, "dictionary");
      else
        adr__path_push_child(&path, c->steps[i]);
    }
    int n = snprintf(c->reason, sizeof(c->reason), "%s[%lld]: ", adr__path_str(&path),
                     (long long)index);
    if (n > 0 && (size_t)n < sizeof(c->reason)) {
      va_list ap;
      va_start(ap, fmt);
      vsnprintf(c->reason + n, sizeof(c->reason) - (size_t)n, fmt, ap);
      va_end(ap);
    }
  }
  return false;
}

/* Bytes of element i of a var-binary or view array. */
static const uint8_t* value_bytes(const struct ArrowArray* a, const struct adr_format* f, int64_t i,
                                  int64_t* out_len) {
  if (f->layout == ADR_LAYOUT_VAR_BINARY) {
    int64_t s = adr__offset_at(a, 1, f->offset_bytes, i);
    *out_len = adr__offset_at(a, 1, f->offset_bytes, i + 1) - s;
    return *out_len > 0 ? adr__buf(a, 2) + s : (const uint8_t*)"";
  }
  const uint8_t* v = adr__buf(a, 1) + 16 * i;
  int32_t len, buf, off;
  memcpy(&len, v, 4);
  *out_len = len;
  if (len <= 12) return v + 4;
  memcpy(&buf, v + 8, 4);
  memcpy(&off, v + 12, 4);
  return adr__buf(a, 2 + buf) + off;
}

static int64_t int_at(const void* data, int bits, bool is_signed, int64_t i) {
  switch (bits) {
    case 8:
      return is_signed ? (int64_t)((const int8_t*)data)[i] : (int64_t)((const uint8_t*)data)[i];
    case 16:
      return is_signed ? (int64_t)((const int16_t*)data)[i] : (int64_t)((const uint16_t*)data)[i];
    case 32:
      return is_signed ? (int64_t)((const int32_t*)data)[i] : (int64_t)((const uint32_t*)data)[i];
    default:
      return ((const int64_t*)data)[i];
  }
}

/* Index in the values child of logical element i of a run-end array. */
static int64_t run_index(const struct ArrowArray* re, int bits, int64_t i) {
  int64_t lo = 0, hi = re->length - 1;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (int_at(re->buffers[1], bits, true, re->offset + mid) > i)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

static bool elem_equal(struct cmp_ctx* c, const struct fmt_node* n, const struct ArrowArray* a,
                       int64_t ia, const struct ArrowArray* b, int64_t ib, int64_t logical);

/* Element (relative index ia / ib) of child k. The path keeps the child on
 * a mismatch so the reason names it. */
static bool child_equal(struct cmp_ctx* c, const struct fmt_node* n, int64_t k,
                        const struct ArrowArray* a, int64_t ia, const struct ArrowArray* b,
                        int64_t ib) {
  push(c, k);
  bool eq = elem_equal(c, &n->children[k], a->children[k], a->children[k]->offset + ia,
                       b->children[k], b->children[k]->offset + ib, ia);
  c->depth--;
  return eq;
}

/* Dictionary-encoded: the decoded values, compared in the dictionaries. */
static bool equal_dictionary(struct cmp_ctx* c, const struct fmt_node* n,
                             const struct adr_format* f, const struct ArrowArray* a, int64_t ia,
                             const struct ArrowArray* b, int64_t ib) {
  bool sg = f->type == ADR_TYPE_INT8 || f->type == ADR_TYPE_INT16 || f->type == ADR_TYPE_INT32 ||
            f->type == ADR_TYPE_INT64;
  int64_t xa = int_at(a->buffers[1], f->bit_width, sg, ia);
  int64_t xb = int_at(b->buffers[1], f->bit_width, sg, ib);
  push(c, -1);
  bool eq = elem_equal(c, n->dictionary, a->dictionary, a->dictionary->offset + xa, b->dictionary,
                       b->dictionary->offset + xb, xa);
  c->depth--;
  return eq;
}

/* Fixed width and bool: the bytes (bits) of the value. */
static bool equal_fixed(struct cmp_ctx* c, const struct adr_format* f, const struct ArrowArray* a,
                        int64_t ia, const struct ArrowArray* b, int64_t ib, int64_t logical) {
  if (f->bit_width == 1) {
    bool x = adr__bit(adr__buf(a, 1), ia), y = adr__bit(adr__buf(b, 1), ib);
    return x == y || differ(c, logical, "%s != %s", x ? "true" : "false", y ? "true" : "false");
  }
  int64_t w = f->bit_width / 8;
  const uint8_t* x = adr__buf(a, 1) + ia * w;
  const uint8_t* y = adr__buf(b, 1) + ib * w;
  if (memcmp(x, y, (size_t)w) == 0) return true;
  if (w == 8) {
    int64_t p, q;
    memcpy(&p, x, 8);
    memcpy(&q, y, 8);
    return differ(c, logical, "%" PRId64 " != %" PRId64 " (as int64)", p, q);
  }
  return differ(c, logical, "%s values differ", adr_type_name(f->type));
}

/* Var-binary, utf8 and views: the value's bytes. */
static bool equal_binary(struct cmp_ctx* c, const struct adr_format* f, const struct ArrowArray* a,
                         int64_t ia, const struct ArrowArray* b, int64_t ib, int64_t logical) {
  int64_t la, lb;
  const uint8_t* x = value_bytes(a, f, ia, &la);
  const uint8_t* y = value_bytes(b, f, ib, &lb);
  if (la == lb && (la == 0 || memcmp(x, y, (size_t)la) == 0)) return true;
  return differ(c, logical, "\"%.*s\" != \"%.*s\"", (int)(la < 40 ? la : 40), (const char*)x,
                (int)(lb < 40 ? lb : 40), (const char*)y);
}

/* Lists and list views: the same length, then item by item. */
static bool equal_list(struct cmp_ctx* c, const struct fmt_node* n, const struct adr_format* f,
                       const struct ArrowArray* a, int64_t ia, const struct ArrowArray* b,
                       int64_t ib, int64_t logical) {
  int ob = f->offset_bytes;
  int64_t sa = adr__offset_at(a, 1, ob, ia), sb = adr__offset_at(b, 1, ob, ib);
  int64_t na = f->layout == ADR_LAYOUT_LIST ? adr__offset_at(a, 1, ob, ia + 1) - sa
                                            : adr__offset_at(a, 2, ob, ia);
  int64_t nb = f->layout == ADR_LAYOUT_LIST ? adr__offset_at(b, 1, ob, ib + 1) - sb
                                            : adr__offset_at(b, 2, ob, ib);
  if (na != nb)
    return differ(c, logical, "list lengths %lld != %lld", (long long)na, (long long)nb);
  for (int64_t k = 0; k < na; k++)
    if (!child_equal(c, n, 0, a, sa + k, b, sb + k)) return false;
  return true;
}

/* Sparse and dense unions: the same type id, then the selected child's
 * value. */
static bool equal_union(struct cmp_ctx* c, const struct fmt_node* n, const struct adr_format* f,
                        const struct ArrowArray* a, int64_t ia, const struct ArrowArray* b,
                        int64_t ib, int64_t logical) {
  int8_t ta = ((const int8_t*)a->buffers[0])[ia], tb = ((const int8_t*)b->buffers[0])[ib];
  if (ta != tb) return differ(c, logical, "union type ids %d != %d", ta, tb);
  int k = 0;
  while (k < f->n_type_ids && f->type_ids[k] != ta) k++;
  if (k == f->n_type_ids) return differ(c, logical, "unknown union type id %d", ta);
  int64_t xa = ia, xb = ib;
  if (f->layout == ADR_LAYOUT_DENSE_UNION) {
    xa = ((const int32_t*)a->buffers[1])[ia];
    xb = ((const int32_t*)b->buffers[1])[ib];
  }
  return child_equal(c, n, k, a, xa, b, xb);
}

/* Run-end encoded: the values of the runs that hold the element. */
static bool equal_run_end(struct cmp_ctx* c, const struct fmt_node* n, const struct ArrowArray* a,
                          int64_t ia, const struct ArrowArray* b, int64_t ib) {
  int bits = n->children[0].f.bit_width;
  int64_t ra = run_index(a->children[0], bits, ia);
  int64_t rb = run_index(b->children[0], bits, ib);
  return child_equal(c, n, 1, a, ra, b, rb);
}

/* ia / ib are absolute buffer indices; `logical` is reported on mismatch. */
static bool elem_equal(struct cmp_ctx* c, const struct fmt_node* n, const struct ArrowArray* a,
                       int64_t ia, const struct ArrowArray* b, int64_t ib, int64_t logical) {
  const struct adr_format* fp = &n->f;
  if (fp->layout == ADR_LAYOUT_NULL) return true;
  bool va = adr__valid(a, fp, ia), vb = adr__valid(b, fp, ib);
  if (va != vb) return differ(c, logical, "%s != %s", va ? "value" : "null", vb ? "value" : "null");
  if (!va) return true;
  if (n->dictionary != NULL) return equal_dictionary(c, n, fp, a, ia, b, ib);
  switch (fp->layout) {
    case ADR_LAYOUT_NULL:
      return true;
    case ADR_LAYOUT_FIXED:
      return equal_fixed(c, fp, a, ia, b, ib, logical);
    case ADR_LAYOUT_VAR_BINARY:
    case ADR_LAYOUT_BINARY_VIEW:
      return equal_binary(c, fp, a, ia, b, ib, logical);
    case ADR_LAYOUT_LIST:
    case ADR_LAYOUT_LIST_VIEW:
      return equal_list(c, n, fp, a, ia, b, ib, logical);
    case ADR_LAYOUT_FIXED_LIST:
      for (int64_t k = 0; k < fp->fixed_size; k++)
        if (!child_equal(c, n, 0, a, ia * fp->fixed_size + k, b, ib * fp->fixed_size + k))
          return false;
      return true;
    case ADR_LAYOUT_STRUCT:
      for (int64_t k = 0; k < a->n_children; k++)
        if (!child_equal(c, n, k, a, ia, b, ib)) return false;
      return true;
    case ADR_LAYOUT_SPARSE_UNION:
    case ADR_LAYOUT_DENSE_UNION:
      return equal_union(c, n, fp, a, ia, b, ib, logical);
    case ADR_LAYOUT_RUN_END:
      return equal_run_end(c, n, a, ia, b, ib);
  }
  return true;
}

static int to_host(const struct ArrowSchema* schema, const struct ArrowDeviceArray* in,
                   struct ArrowDeviceArray* tmp, const struct ArrowArray** out,
                   struct adr_error* error) {
  const char* op = "adr_device_array_equal";
  struct adr__path root;
  adr__path_root(&root);
  if (in == NULL) return adr__errorf(error, EINVAL, op, NULL, "array is NULL");
  /* The walk below follows offsets, type ids and run ends: only data that
   * passed full validation is walked. */
  if (in->device_type == ARROW_DEVICE_CPU) {
    int st = adr__validate_structure(op, schema, &in->array, &root, 0, error);
    if (st == 0) st = adr__validate_data(op, schema, &in->array, &root, error);
    if (st) return st;
    *out = &in->array;
    return 0;
  }
  /* Into host memory (a NULL device): no cpu backend is loaded for it. */
  int st = adr__deep_copy(op, schema, in, NULL, NULL, true, tmp, NULL, error);
  if (st) return st;
  st = adr__validate_data(op, schema, &tmp->array, &root, error);
  if (st) return st;
  *out = &tmp->array;
  return 0;
}

int adr_device_array_equal(const struct ArrowSchema* schema, const struct ArrowDeviceArray* a,
                           const struct ArrowDeviceArray* b, bool* out_equal,
                           struct adr_error* out_difference, struct adr_error* error) {
  if (out_equal == NULL)
    return adr__errorf(error, EINVAL, "adr_device_array_equal", NULL, "out_equal is NULL");
  struct ArrowDeviceArray ta, tb;
  ta.array.release = NULL;
  tb.array.release = NULL;
  const struct ArrowArray *ha = NULL, *hb = NULL;
  int st = to_host(schema, a, &ta, &ha, error);
  if (st == 0) st = to_host(schema, b, &tb, &hb, error);
  if (st == 0) {
    struct cmp_ctx c;
    memset(&c, 0, sizeof(c));
    struct fmt_node root;
    st = fmt_tree(schema, &root);
    if (st != 0)
      st = adr__errorf(error, st, "adr_device_array_equal", NULL,
                       st == ENOMEM ? "out of memory" : "bad format");
    bool eq = true;
    if (st == 0 && ha->length != hb->length) {
      eq = false;
      snprintf(c.reason, sizeof(c.reason), "lengths %lld != %lld", (long long)ha->length,
               (long long)hb->length);
    }
    for (int64_t i = 0; st == 0 && eq && i < ha->length; i++)
      eq = elem_equal(&c, &root, ha, ha->offset + i, hb, hb->offset + i, i);
    fmt_free(&root);
    if (st == 0) *out_equal = eq;
    if (st == 0 && !eq && out_difference != NULL)
      snprintf(out_difference->message, sizeof(out_difference->message), "%s", c.reason);
  }
  adr_device_array_release(&ta);
  adr_device_array_release(&tb);
  return st;
}
