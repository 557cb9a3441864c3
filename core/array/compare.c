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

struct cmp_ctx {
  struct adr__path path;
  char reason[512];
  bool differs;
};

static bool differ(struct cmp_ctx* c, int64_t index, const char* fmt, ...) ADR_PRINTF(3, 4);
static bool differ(struct cmp_ctx* c, int64_t index, const char* fmt, ...) {
  if (!c->differs) {
    c->differs = true;
    int n = snprintf(c->reason, sizeof(c->reason), "%s[%lld]: ", adr__path_str(&c->path),
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

static bool elem_equal(struct cmp_ctx* c, const struct ArrowSchema* schema,
                       const struct ArrowArray* a, int64_t ia, const struct ArrowArray* b,
                       int64_t ib, int64_t logical);

/* Element (relative index ia / ib) of child k. The path keeps the child on
 * a mismatch so the reason names it. */
static bool child_equal(struct cmp_ctx* c, const struct ArrowSchema* schema, int64_t k,
                        const struct ArrowArray* a, int64_t ia, const struct ArrowArray* b,
                        int64_t ib) {
  size_t mark = adr__path_push_child(&c->path, k);
  bool eq = elem_equal(c, schema->children[k], a->children[k], a->children[k]->offset + ia,
                       b->children[k], b->children[k]->offset + ib, ia);
  if (eq) adr__path_pop(&c->path, mark);
  return eq;
}

/* Dictionary-encoded: the decoded values, compared in the dictionaries. */
static bool equal_dictionary(struct cmp_ctx* c, const struct ArrowSchema* schema,
                             const struct adr_format* f, const struct ArrowArray* a, int64_t ia,
                             const struct ArrowArray* b, int64_t ib) {
  bool sg = f->type == ADR_TYPE_INT8 || f->type == ADR_TYPE_INT16 || f->type == ADR_TYPE_INT32 ||
            f->type == ADR_TYPE_INT64;
  int64_t xa = int_at(a->buffers[1], f->bit_width, sg, ia);
  int64_t xb = int_at(b->buffers[1], f->bit_width, sg, ib);
  size_t mark = adr__path_push_name(&c->path, "dictionary");
  bool eq = elem_equal(c, schema->dictionary, a->dictionary, a->dictionary->offset + xa,
                       b->dictionary, b->dictionary->offset + xb, xa);
  if (eq) adr__path_pop(&c->path, mark);
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
static bool equal_list(struct cmp_ctx* c, const struct ArrowSchema* schema,
                       const struct adr_format* f, const struct ArrowArray* a, int64_t ia,
                       const struct ArrowArray* b, int64_t ib, int64_t logical) {
  int ob = f->offset_bytes;
  int64_t sa = adr__offset_at(a, 1, ob, ia), sb = adr__offset_at(b, 1, ob, ib);
  int64_t na = f->layout == ADR_LAYOUT_LIST ? adr__offset_at(a, 1, ob, ia + 1) - sa
                                            : adr__offset_at(a, 2, ob, ia);
  int64_t nb = f->layout == ADR_LAYOUT_LIST ? adr__offset_at(b, 1, ob, ib + 1) - sb
                                            : adr__offset_at(b, 2, ob, ib);
  if (na != nb)
    return differ(c, logical, "list lengths %lld != %lld", (long long)na, (long long)nb);
  for (int64_t k = 0; k < na; k++)
    if (!child_equal(c, schema, 0, a, sa + k, b, sb + k)) return false;
  return true;
}

/* Sparse and dense unions: the same type id, then the selected child's
 * value. */
static bool equal_union(struct cmp_ctx* c, const struct ArrowSchema* schema,
                        const struct adr_format* f, const struct ArrowArray* a, int64_t ia,
                        const struct ArrowArray* b, int64_t ib, int64_t logical) {
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
  return child_equal(c, schema, k, a, xa, b, xb);
}

/* Run-end encoded: the values of the runs that hold the element. */
static bool equal_run_end(struct cmp_ctx* c, const struct ArrowSchema* schema,
                          const struct ArrowArray* a, int64_t ia, const struct ArrowArray* b,
                          int64_t ib) {
  struct adr_format rf;
  adr_format_parse(schema->children[0]->format, &rf, NULL);
  int64_t ra = run_index(a->children[0], rf.bit_width, ia);
  int64_t rb = run_index(b->children[0], rf.bit_width, ib);
  return child_equal(c, schema, 1, a, ra, b, rb);
}

/* ia / ib are absolute buffer indices; `logical` is reported on mismatch. */
static bool elem_equal(struct cmp_ctx* c, const struct ArrowSchema* schema,
                       const struct ArrowArray* a, int64_t ia, const struct ArrowArray* b,
                       int64_t ib, int64_t logical) {
  struct adr_format f;
  adr_format_parse(schema->format, &f, NULL);
  if (f.layout == ADR_LAYOUT_NULL) return true;
  bool va = adr__valid(a, &f, ia), vb = adr__valid(b, &f, ib);
  if (va != vb) return differ(c, logical, "%s != %s", va ? "value" : "null", vb ? "value" : "null");
  if (!va) return true;
  if (schema->dictionary != NULL) return equal_dictionary(c, schema, &f, a, ia, b, ib);
  switch (f.layout) {
    case ADR_LAYOUT_NULL:
      return true;
    case ADR_LAYOUT_FIXED:
      return equal_fixed(c, &f, a, ia, b, ib, logical);
    case ADR_LAYOUT_VAR_BINARY:
    case ADR_LAYOUT_BINARY_VIEW:
      return equal_binary(c, &f, a, ia, b, ib, logical);
    case ADR_LAYOUT_LIST:
    case ADR_LAYOUT_LIST_VIEW:
      return equal_list(c, schema, &f, a, ia, b, ib, logical);
    case ADR_LAYOUT_FIXED_LIST:
      for (int64_t k = 0; k < f.fixed_size; k++)
        if (!child_equal(c, schema, 0, a, ia * f.fixed_size + k, b, ib * f.fixed_size + k))
          return false;
      return true;
    case ADR_LAYOUT_STRUCT:
      for (int64_t k = 0; k < a->n_children; k++)
        if (!child_equal(c, schema, k, a, ia, b, ib)) return false;
      return true;
    case ADR_LAYOUT_SPARSE_UNION:
    case ADR_LAYOUT_DENSE_UNION:
      return equal_union(c, schema, &f, a, ia, b, ib, logical);
    case ADR_LAYOUT_RUN_END:
      return equal_run_end(c, schema, a, ia, b, ib);
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
    adr__path_root(&c.path);
    bool eq = true;
    if (ha->length != hb->length) {
      eq = false;
      snprintf(c.reason, sizeof(c.reason), "lengths %lld != %lld", (long long)ha->length,
               (long long)hb->length);
    }
    for (int64_t i = 0; eq && i < ha->length; i++)
      eq = elem_equal(&c, schema, ha, ha->offset + i, hb, hb->offset + i, i);
    *out_equal = eq;
    if (!eq && out_difference != NULL)
      snprintf(out_difference->message, sizeof(out_difference->message), "%s", c.reason);
  }
  adr_device_array_release(&ta);
  adr_device_array_release(&tb);
  return st;
}
