/* SPDX-License-Identifier: Apache-2.0
 *
 * Validation of an ArrowDeviceArray against its ArrowSchema: structure
 * (reads no buffer, so it is safe on any device and on hostile input) and
 * data (reads the buffers of a host-readable copy).
 *
 * Indices in messages are logical: element 0 is the array's `offset`.
 */
#include <errno.h>
#include <string.h>

#include "array_internal.h"

static bool is_integer(enum adr_type t) {
  return t >= ADR_TYPE_INT8 && t <= ADR_TYPE_UINT64;
}

#define FAIL(...) adr__path_error(error, EINVAL, op, path, __VA_ARGS__)

/* Where a message goes: the operation and the path of the node at hand. */
struct vctx {
  const char* op;
  struct adr__path* path;
  struct adr_error* error;
};

#define VFAIL(v, ...) adr__path_error((v)->error, EINVAL, (v)->op, (v)->path, __VA_ARGS__)

/* ---- structure ------------------------------------------------------------ */

/* The node itself: present, not released, a known format, a length, an
 * offset and a null_count that make sense. *f and *end receive the format
 * and offset + length. */
static int structure_node(const struct vctx* v, const struct ArrowSchema* schema,
                          const struct ArrowArray* array, int depth, struct adr_format* f,
                          int64_t* end) {
  if (depth > ADR__MAX_DEPTH) return VFAIL(v, "nested deeper than %d levels", ADR__MAX_DEPTH);
  if (schema == NULL) return VFAIL(v, "schema is NULL");
  if (schema->release == NULL) return VFAIL(v, "schema is released");
  if (array == NULL) return VFAIL(v, "array is NULL");
  if (array->release == NULL) return VFAIL(v, "array is released");
  struct adr_error ferr;
  if (adr_format_parse(schema->format, f, &ferr) != 0) {
    const char* msg = strchr(ferr.message, ']');
    return VFAIL(v, "%s", msg ? msg + 2 : ferr.message);
  }
  if (array->length < 0) return VFAIL(v, "negative length %lld", (long long)array->length);
  if (array->offset < 0) return VFAIL(v, "negative offset %lld", (long long)array->offset);
  if (__builtin_add_overflow(array->offset, array->length, end))
    return VFAIL(v, "offset + length overflows");
  if (array->null_count < -1 || array->null_count > array->length)
    return VFAIL(v, "null_count %lld out of range [-1, %lld]", (long long)array->null_count,
                 (long long)array->length);
  return 0;
}

/* Buffers of the fixed-count layouts: every one the range
 * [0, offset + length) needs is present. */
static int structure_fixed_buffers(const struct vctx* v, const struct ArrowArray* array,
                                   const struct adr_format* f, int64_t end) {
  int64_t sizes[8];
  if (adr_format_buffer_sizes(f, array->offset, array->length, array->n_buffers, sizes, NULL) != 0)
    return VFAIL(v, "buffer sizes overflow int64 (offset %lld, length %lld)",
                 (long long)array->offset, (long long)array->length);
  for (int64_t i = adr__has_validity(f->layout) ? 1 : 0; i < array->n_buffers; i++)
    if (sizes[i] > 0 && end > 0 && array->buffers[i] == NULL)
      return VFAIL(v, "buffer %lld is NULL but must hold %lld bytes", (long long)i,
                   (long long)sizes[i]);
  return 0;
}

/* Buffers of the view layouts: validity, views, variadic buffers, then
 * the variadic sizes buffer. */
static int structure_view_buffers(const struct vctx* v, const struct ArrowArray* array,
                                  int64_t end) {
  if (end > 0 && array->buffers[1] == NULL)
    return VFAIL(v, "views buffer is NULL but must hold %lld views of 16 bytes", (long long)end);
  if (array->n_buffers > 3 && array->buffers[array->n_buffers - 1] == NULL)
    return VFAIL(v, "variadic buffer sizes buffer is NULL with %lld variadic buffers",
                 (long long)(array->n_buffers - 3));
  return 0;
}

static int structure_buffers(const struct vctx* v, const struct ArrowArray* array,
                             const struct adr_format* f, int64_t end) {
  bool view = f->layout == ADR_LAYOUT_BINARY_VIEW;
  if (view ? array->n_buffers < 3 : array->n_buffers != f->n_buffers)
    return VFAIL(v, "%s has %s%d buffers, not %lld", adr_type_name(f->type),
                 view ? "at least " : "", f->n_buffers, (long long)array->n_buffers);
  if (array->n_buffers > (int64_t)1 << 30) return VFAIL(v, "too many buffers");
  if (array->n_buffers > 0 && array->buffers == NULL)
    return VFAIL(v, "buffers is NULL with n_buffers %lld", (long long)array->n_buffers);
  if (adr__has_validity(f->layout) && array->buffers[0] == NULL && array->null_count > 0)
    return VFAIL(v, "null_count %lld but no validity buffer", (long long)array->null_count);
  if ((f->layout == ADR_LAYOUT_SPARSE_UNION || f->layout == ADR_LAYOUT_DENSE_UNION ||
       f->layout == ADR_LAYOUT_RUN_END) &&
      array->null_count > 0)
    return VFAIL(v, "%s arrays have no validity; null_count must be 0, not %lld",
                 adr_type_name(f->type), (long long)array->null_count);
  return view ? structure_view_buffers(v, array, end) : structure_fixed_buffers(v, array, f, end);
}

/* Children present, as many as the schema and the layout say. */
static int structure_children(const struct vctx* v, const struct ArrowSchema* schema,
                              const struct ArrowArray* array, const struct adr_format* f) {
  if (schema->n_children != array->n_children)
    return VFAIL(v, "schema has %lld children, array has %lld", (long long)schema->n_children,
                 (long long)array->n_children);
  if (f->n_children >= 0 && array->n_children != f->n_children)
    return VFAIL(v, "%s needs %d children, not %lld", adr_type_name(f->type), f->n_children,
                 (long long)array->n_children);
  if (array->n_children < 0)
    return VFAIL(v, "negative n_children %lld", (long long)array->n_children);
  if (array->n_children > 0 && (array->children == NULL || schema->children == NULL))
    return VFAIL(v, "children is NULL with n_children %lld", (long long)array->n_children);
  for (int64_t i = 0; i < array->n_children; i++) {
    if (array->children[i] == NULL || schema->children[i] == NULL)
      return VFAIL(v, "children[%lld] is NULL", (long long)i);
  }
  return 0;
}

/* Fixed-size list: the child holds list size elements per parent slot. */
static int structure_fixed_list(const struct vctx* v, const struct ArrowArray* array,
                                const struct adr_format* f, int64_t end) {
  int64_t need;
  if (__builtin_mul_overflow(end, (int64_t)f->fixed_size, &need))
    return VFAIL(v, "(offset + length) * list size overflows");
  if (array->children[0]->length < need)
    return VFAIL(v, "fixed-size list child has length %lld, needs %lld",
                 (long long)array->children[0]->length, (long long)need);
  return 0;
}

/* Struct and sparse union: every child is indexed by the parent's slot. */
static int structure_parallel_children(const struct vctx* v, const struct ArrowArray* array,
                                       int64_t end) {
  for (int64_t i = 0; i < array->n_children; i++)
    if (array->children[i]->length < end)
      return VFAIL(v, "children[%lld] has length %lld, needs offset + length = %lld", (long long)i,
                   (long long)array->children[i]->length, (long long)end);
  return 0;
}

/* Run-end encoded: integer run ends without nulls, no more runs than
 * values. */
static int structure_run_end(const struct vctx* v, const struct ArrowSchema* schema,
                             const struct ArrowArray* array) {
  struct adr_format rf;
  if (schema->children[0]->release == NULL ||
      adr_format_parse(schema->children[0]->format, &rf, NULL) != 0 ||
      (rf.type != ADR_TYPE_INT16 && rf.type != ADR_TYPE_INT32 && rf.type != ADR_TYPE_INT64))
    return VFAIL(v, "run ends must be int16, int32 or int64");
  const struct ArrowArray* re = array->children[0];
  const struct ArrowArray* va = array->children[1];
  if (re->length > va->length)
    return VFAIL(v, "run ends child has length %lld, more than the values' %lld",
                 (long long)re->length, (long long)va->length);
  if (re->null_count > 0) return VFAIL(v, "run ends child has nulls");
  if (array->length > 0 && re->length == 0) return VFAIL(v, "run ends child is empty");
  return 0;
}

/* Map: a list of struct<key (not nullable), value>. */
static int structure_map(const struct vctx* v, const struct ArrowSchema* schema) {
  const struct ArrowSchema* e = schema->children[0];
  struct adr_format ef;
  if (e->release == NULL || adr_format_parse(e->format, &ef, NULL) != 0 ||
      ef.type != ADR_TYPE_STRUCT || e->n_children != 2)
    return VFAIL(v, "map entries must be a struct of 2 children");
  if (e->children != NULL && e->children[0] != NULL &&
      (e->children[0]->flags & ARROW_FLAG_NULLABLE))
    return VFAIL(v, "map keys must not be nullable");
  return 0;
}

/* What each layout asks of its children, beyond their count. */
static int structure_layout(const struct vctx* v, const struct ArrowSchema* schema,
                            const struct ArrowArray* array, const struct adr_format* f,
                            int64_t end) {
  switch (f->layout) {
    case ADR_LAYOUT_FIXED_LIST:
      return structure_fixed_list(v, array, f, end);
    case ADR_LAYOUT_STRUCT:
    case ADR_LAYOUT_SPARSE_UNION:
      return structure_parallel_children(v, array, end);
    case ADR_LAYOUT_RUN_END:
      return structure_run_end(v, schema, array);
    case ADR_LAYOUT_LIST:
      return f->type == ADR_TYPE_MAP ? structure_map(v, schema) : 0;
    default:
      return 0;
  }
}

static int structure_dictionary(const struct vctx* v, const struct ArrowSchema* schema,
                                const struct ArrowArray* array, const struct adr_format* f) {
  if ((schema->dictionary == NULL) != (array->dictionary == NULL))
    return VFAIL(v, "the schema %s a dictionary but the array %s",
                 schema->dictionary ? "has" : "has no", array->dictionary ? "has one" : "has none");
  if (schema->dictionary != NULL && !is_integer(f->type))
    return VFAIL(v, "dictionary indices must be an integer type, not %s", adr_type_name(f->type));
  return 0;
}

int adr__validate_structure(const char* op, const struct ArrowSchema* schema,
                            const struct ArrowArray* array, struct adr__path* path, int depth,
                            struct adr_error* error) {
  const struct vctx v = {op, path, error};
  struct adr_format f;
  int64_t end = 0;
  int st = structure_node(&v, schema, array, depth, &f, &end);
  if (st == 0) st = structure_buffers(&v, array, &f, end);
  if (st == 0) st = structure_children(&v, schema, array, &f);
  if (st == 0) st = structure_layout(&v, schema, array, &f, end);
  if (st == 0) st = structure_dictionary(&v, schema, array, &f);
  for (int64_t i = 0; st == 0 && i < array->n_children; i++) {
    size_t mark = adr__path_push_child(path, i);
    st = adr__validate_structure(op, schema->children[i], array->children[i], path, depth + 1,
                                 error);
    adr__path_pop(path, mark);
  }
  if (st == 0 && array->dictionary != NULL) {
    size_t mark = adr__path_push_name(path, "dictionary");
    st = adr__validate_structure(op, schema->dictionary, array->dictionary, path, depth + 1, error);
    adr__path_pop(path, mark);
  }
  return st;
}

/* ---- data ----------------------------------------------------------------- */

/* Whether s[0, n) is valid UTF-8; *bad_at receives the first bad byte. */
static bool utf8_valid(const uint8_t* s, int64_t n, int64_t* bad_at) {
  int64_t i = 0;
  while (i < n) {
    /* ASCII fast path: eight bytes at a time while no high bit is set. */
    while (i + 8 <= n) {
      uint64_t w;
      memcpy(&w, s + i, 8);
      if (w & UINT64_C(0x8080808080808080)) break;
      i += 8;
    }
    if (i >= n) break;
    uint8_t c = s[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    int len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      *bad_at = i;
      return false;
    }
    if (i + len > n) {
      *bad_at = i;
      return false;
    }
    for (int k = 1; k < len; k++) {
      if ((s[i + k] & 0xC0) != 0x80) {
        *bad_at = i;
        return false;
      }
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      *bad_at = i;
      return false;
    }
    i += len;
  }
  return true;
}

static int64_t count_nulls(const uint8_t* bits, int64_t from, int64_t n) {
  int64_t nulls = 0;
  for (int64_t i = from; i < from + n; i++) nulls += !adr__bit(bits, i);
  return nulls;
}

/* Nulls of a structurally valid node as its own layout records them: every
 * element of a null-type array (which has no buffers, and may have
 * buffers == NULL), the bitmap's zeros where there is a validity buffer, 0
 * without one (a NULL validity buffer means all valid) and for unions and
 * run-end arrays (their nulls live in their children). */
static int64_t node_nulls(const struct ArrowSchema* schema, const struct ArrowArray* array) {
  struct adr_format f;
  if (adr_format_parse(schema->format, &f, NULL) != 0) return 0;
  if (f.layout == ADR_LAYOUT_NULL) return array->length;
  if (!adr__has_validity(f.layout) || array->buffers[0] == NULL) return 0;
  return count_nulls(adr__buf(array, 0), array->offset, array->length);
}

/* Var-binary and utf8 (and their large forms): offsets monotonic from a
 * non-negative first one, data present, strings valid UTF-8. */
static int data_var_binary(const struct vctx* v, const struct ArrowArray* array,
                           const struct adr_format* f) {
  const int64_t off = array->offset, end = off + array->length;
  const int ob = f->offset_bytes;
  if (end == 0 && array->buffers[1] == NULL) return 0;
  int64_t first = adr__offset_at(array, 1, ob, off);
  if (first < 0) return VFAIL(v, "negative first offset %lld", (long long)first);
  for (int64_t i = off; i < end; i++) {
    int64_t a = adr__offset_at(array, 1, ob, i), b = adr__offset_at(array, 1, ob, i + 1);
    if (b < a) return VFAIL(v, "offsets not monotonic at %lld", (long long)(i - off));
  }
  int64_t last = adr__offset_at(array, 1, ob, end);
  if (last > first && array->buffers[2] == NULL)
    return VFAIL(v, "data buffer is NULL but offsets reference %lld bytes",
                 (long long)(last - first));
  if (f->type != ADR_TYPE_STRING && f->type != ADR_TYPE_LARGE_STRING) return 0;
  /* Fast path: when the whole range [first, last) is valid UTF-8 and no
   * value of the array starts or ends inside a character (on a
   * continuation byte), every value is valid UTF-8. Otherwise (null slots
   * may hold anything) each valid value is checked on its own. */
  int64_t bad;
  const uint8_t* data = adr__buf(array, 2);
  if (last <= first || utf8_valid(data + first, last - first, &bad)) {
    bool split = false;
    for (int64_t i = off; i <= end && !split; i++) {
      int64_t a = adr__offset_at(array, 1, ob, i);
      split = a < last && (data[a] & 0xC0) == 0x80;
    }
    if (!split) return 0;
  }
  for (int64_t i = off; i < end; i++) {
    if (!adr__valid(array, f, i)) continue;
    int64_t a = adr__offset_at(array, 1, ob, i), b = adr__offset_at(array, 1, ob, i + 1);
    if (b > a && !utf8_valid(data + a, b - a, &bad))
      return VFAIL(v, "invalid UTF-8 in value %lld at byte %lld", (long long)(i - off),
                   (long long)bad);
  }
  return 0;
}

/* Variadic buffer sizes of a view array: not negative, and a buffer with
 * a size present (as the deep copy, which copies every variadic buffer
 * whole). */
static int data_view_sizes(const struct vctx* v, const struct ArrowArray* array,
                           const int64_t* vsizes, int64_t nvar) {
  for (int64_t k = 0; k < nvar; k++) {
    if (vsizes[k] < 0)
      return VFAIL(v, "variadic buffer %lld has negative size %lld", (long long)k,
                   (long long)vsizes[k]);
    if (vsizes[k] > 0 && array->buffers[2 + k] == NULL)
      return VFAIL(v, "variadic buffer %lld is NULL but has size %lld", (long long)k,
                   (long long)vsizes[k]);
  }
  return 0;
}

/* One view (logical index i - off): a length, inline data or a range
 * inside a variadic buffer whose first bytes match the prefix, UTF-8 for
 * string views. */
static int data_view(const struct vctx* v, const struct ArrowArray* array,
                     const struct adr_format* f, const int64_t* vsizes, int64_t nvar, int64_t i) {
  const int64_t at = i - array->offset;
  const uint8_t* vb = adr__buf(array, 1) + 16 * i;
  int32_t vlen, buf, voff;
  memcpy(&vlen, vb, 4);
  if (vlen < 0) return VFAIL(v, "view %lld has negative length %d", (long long)at, vlen);
  const uint8_t* data;
  if (vlen <= 12) {
    data = vb + 4;
  } else {
    memcpy(&buf, vb + 8, 4);
    memcpy(&voff, vb + 12, 4);
    if (buf < 0 || buf >= nvar)
      return VFAIL(v, "view %lld references buffer %d of %lld", (long long)at, buf,
                   (long long)nvar);
    if (voff < 0 || (int64_t)voff + vlen > vsizes[buf])
      return VFAIL(v, "view %lld range [%d, %lld) outside buffer %d of %lld bytes", (long long)at,
                   voff, (long long)voff + vlen, buf, (long long)vsizes[buf]);
    data = adr__buf(array, 2 + buf);
    if (data == NULL) return VFAIL(v, "variadic buffer %d is NULL", buf);
    data += voff;
    if (memcmp(data, vb + 4, 4) != 0)
      return VFAIL(v, "view %lld prefix does not match its data", (long long)at);
  }
  int64_t bad;
  if (f->type == ADR_TYPE_STRING_VIEW && !utf8_valid(data, vlen, &bad))
    return VFAIL(v, "invalid UTF-8 in value %lld at byte %lld", (long long)at, (long long)bad);
  return 0;
}

/* Binary and string views: the variadic sizes, then every valid view. */
static int data_views(const struct vctx* v, const struct ArrowArray* array,
                      const struct adr_format* f) {
  int64_t nvar = array->n_buffers - 3;
  const int64_t* vsizes = nvar > 0 ? (const int64_t*)array->buffers[array->n_buffers - 1] : NULL;
  int st = data_view_sizes(v, array, vsizes, nvar);
  const int64_t end = array->offset + array->length;
  for (int64_t i = array->offset; st == 0 && i < end; i++)
    if (adr__valid(array, f, i)) st = data_view(v, array, f, vsizes, nvar, i);
  return st;
}

/* List, large list and map: offsets monotonic from a non-negative first
 * one to a last inside the child; map keys without nulls. */
static int data_list(const struct vctx* v, const struct ArrowSchema* schema,
                     const struct ArrowArray* array, const struct adr_format* f) {
  const int64_t off = array->offset, end = off + array->length;
  const int ob = f->offset_bytes;
  if (end == 0 && array->buffers[1] == NULL) return 0;
  int64_t clen = array->children[0]->length;
  int64_t first = adr__offset_at(array, 1, ob, off);
  if (first < 0) return VFAIL(v, "negative first offset %lld", (long long)first);
  for (int64_t i = off; i < end; i++)
    if (adr__offset_at(array, 1, ob, i + 1) < adr__offset_at(array, 1, ob, i))
      return VFAIL(v, "offsets not monotonic at %lld", (long long)(i - off));
  int64_t last = adr__offset_at(array, 1, ob, end);
  if (last > clen)
    return VFAIL(v, "last offset %lld beyond the child's length %lld", (long long)last,
                 (long long)clen);
  if (f->type == ADR_TYPE_MAP &&
      node_nulls(schema->children[0]->children[0], array->children[0]->children[0]) != 0)
    return VFAIL(v, "map keys contain nulls");
  return 0;
}

/* List views (and large): every valid view's [offset, offset + size)
 * inside the child. */
static int data_list_view(const struct vctx* v, const struct ArrowArray* array,
                          const struct adr_format* f) {
  const int64_t off = array->offset, end = off + array->length;
  const int ob = f->offset_bytes;
  int64_t clen = array->children[0]->length;
  for (int64_t i = off; i < end; i++) {
    if (!adr__valid(array, f, i)) continue;
    int64_t o = adr__offset_at(array, 1, ob, i), s = adr__offset_at(array, 2, ob, i);
    if (o < 0 || s < 0 || o > clen || s > clen - o)
      return VFAIL(v, "list view %lld (offset %lld, size %lld) outside the child's length %lld",
                   (long long)(i - off), (long long)o, (long long)s, (long long)clen);
  }
  return 0;
}

/* Sparse and dense unions: type ids of the union's; dense offsets inside
 * the child they select. */
static int data_union(const struct vctx* v, const struct ArrowArray* array,
                      const struct adr_format* f) {
  const int64_t off = array->offset, end = off + array->length;
  int child_of[256];
  for (int k = 0; k < 256; k++) child_of[k] = -1;
  for (int k = 0; k < f->n_type_ids; k++) child_of[(uint8_t)f->type_ids[k]] = k;
  const int8_t* types = (const int8_t*)array->buffers[0];
  for (int64_t i = off; i < end; i++) {
    int c = child_of[(uint8_t)types[i]];
    if (types[i] < 0 || c < 0)
      return VFAIL(v, "type id %d at %lld is not one of the union's", types[i],
                   (long long)(i - off));
    if (f->layout == ADR_LAYOUT_DENSE_UNION) {
      int32_t o = ((const int32_t*)array->buffers[1])[i];
      if (o < 0 || o >= array->children[c]->length)
        return VFAIL(v, "dense union offset %d at %lld outside children[%d] of length %lld", o,
                     (long long)(i - off), c, (long long)array->children[c]->length);
    }
  }
  return 0;
}

/* Run-end encoded: run ends without nulls, strictly increasing, covering
 * offset + length. */
static int data_run_end(const struct vctx* v, const struct ArrowSchema* schema,
                        const struct ArrowArray* array) {
  const struct ArrowArray* re = array->children[0];
  struct adr_format rf;
  adr_format_parse(schema->children[0]->format, &rf, NULL);
  int w = rf.bit_width / 8;
  if (re->buffers[0] != NULL && count_nulls(adr__buf(re, 0), re->offset, re->length) != 0)
    return VFAIL(v, "run ends contain nulls");
  int64_t prev = 0;
  for (int64_t k = 0; k < re->length; k++) {
    int64_t i = re->offset + k, e;
    if (w == 2)
      e = ((const int16_t*)re->buffers[1])[i];
    else if (w == 4)
      e = ((const int32_t*)re->buffers[1])[i];
    else
      e = ((const int64_t*)re->buffers[1])[i];
    if (e <= prev)
      return VFAIL(v, "run ends not strictly increasing at run %lld (%lld after %lld)",
                   (long long)k, (long long)e, (long long)prev);
    prev = e;
  }
  const int64_t end = array->offset + array->length;
  if (array->length > 0 && prev < end)
    return VFAIL(v, "run ends cover %lld values, the array needs offset + length = %lld",
                 (long long)prev, (long long)end);
  return 0;
}

/* Index i of a dictionary-encoded array as a signed value; -1 for a
 * uint64 beyond INT64_MAX. */
static int64_t dictionary_index(const uint8_t* d, int width, bool is_signed, int64_t i) {
  switch (width) {
    case 1:
      return is_signed ? (int64_t)((const int8_t*)d)[i] : (int64_t)((const uint8_t*)d)[i];
    case 2:
      return is_signed ? (int64_t)((const int16_t*)d)[i] : (int64_t)((const uint16_t*)d)[i];
    case 4:
      return is_signed ? (int64_t)((const int32_t*)d)[i] : (int64_t)((const uint32_t*)d)[i];
    default: {
      uint64_t u = ((const uint64_t*)d)[i];
      return (!is_signed && u > INT64_MAX) ? -1 : (int64_t)u;
    }
  }
}

/* Dictionary-encoded: every valid index inside the dictionary. */
static int data_dictionary_indices(const struct vctx* v, const struct ArrowArray* array,
                                   const struct adr_format* f) {
  const int64_t off = array->offset, end = off + array->length;
  int64_t dlen = array->dictionary->length;
  int w = f->bit_width / 8;
  bool is_signed = f->type == ADR_TYPE_INT8 || f->type == ADR_TYPE_INT16 ||
                   f->type == ADR_TYPE_INT32 || f->type == ADR_TYPE_INT64;
  const uint8_t* d = adr__buf(array, 1);
  for (int64_t i = off; i < end; i++) {
    if (!adr__valid(array, f, i)) continue;
    int64_t idx = dictionary_index(d, w, is_signed, i);
    if (idx < 0 || idx >= dlen)
      return VFAIL(v, "dictionary index %lld at %lld outside the dictionary of length %lld",
                   (long long)idx, (long long)(i - off), (long long)dlen);
  }
  return 0;
}

/* The data checks of one node's own layout (its children come after). */
static int data_layout(const struct vctx* v, const struct ArrowSchema* schema,
                       const struct ArrowArray* array, const struct adr_format* f) {
  switch (f->layout) {
    case ADR_LAYOUT_VAR_BINARY:
      return data_var_binary(v, array, f);
    case ADR_LAYOUT_BINARY_VIEW:
      return data_views(v, array, f);
    case ADR_LAYOUT_LIST:
      return data_list(v, schema, array, f);
    case ADR_LAYOUT_LIST_VIEW:
      return data_list_view(v, array, f);
    case ADR_LAYOUT_SPARSE_UNION:
    case ADR_LAYOUT_DENSE_UNION:
      return data_union(v, array, f);
    case ADR_LAYOUT_RUN_END:
      return data_run_end(v, schema, array);
    default: /* null, fixed width, fixed-size list, struct: nothing but nulls */
      return 0;
  }
}

int adr__validate_data(const char* op, const struct ArrowSchema* schema,
                       const struct ArrowArray* array, struct adr__path* path,
                       struct adr_error* error) {
  const struct vctx v = {op, path, error};
  struct adr_format f;
  if (adr_format_parse(schema->format, &f, NULL) != 0) return VFAIL(&v, "bad format");
  if (adr__has_validity(f.layout) && array->buffers[0] != NULL && array->null_count >= 0) {
    int64_t nulls = count_nulls(adr__buf(array, 0), array->offset, array->length);
    if (nulls != array->null_count)
      return VFAIL(&v, "null_count %lld but the validity bitmap has %lld nulls",
                   (long long)array->null_count, (long long)nulls);
  }
  int st = data_layout(&v, schema, array, &f);
  if (st == 0 && array->dictionary != NULL) st = data_dictionary_indices(&v, array, &f);
  for (int64_t i = 0; st == 0 && i < array->n_children; i++) {
    size_t mark = adr__path_push_child(path, i);
    st = adr__validate_data(op, schema->children[i], array->children[i], path, error);
    adr__path_pop(path, mark);
  }
  if (st == 0 && array->dictionary != NULL) {
    size_t mark = adr__path_push_name(path, "dictionary");
    st = adr__validate_data(op, schema->dictionary, array->dictionary, path, error);
    adr__path_pop(path, mark);
  }
  return st;
}

int adr_device_array_validate(const struct ArrowSchema* schema,
                              const struct ArrowDeviceArray* array, enum adr_validate_level level,
                              struct adr_error* error) {
  const char* op = "adr_device_array_validate";
  struct adr__path root;
  adr__path_root(&root);
  struct adr__path* path = &root;
  if (array == NULL) return FAIL("array is NULL");
  if (level != ADR_VALIDATE_STRUCTURE && level != ADR_VALIDATE_FULL)
    return adr__errorf(error, EINVAL, op, NULL, "unknown validation level %d", (int)level);
  if (!adr__device_type_known(array->device_type))
    return FAIL("unknown device_type %d", (int)array->device_type);
  if (array->device_id < -1) return FAIL("invalid device_id %lld", (long long)array->device_id);
  int st = adr__validate_structure(op, schema, &array->array, path, 0, error);
  if (st || level == ADR_VALIDATE_STRUCTURE) return st;
  if (array->device_type == ARROW_DEVICE_CPU)
    return adr__validate_data(op, schema, &array->array, path, error);
  struct ArrowDeviceArray host; /* host memory (a NULL device): no cpu backend */
  st = adr__deep_copy(op, schema, array, NULL, NULL, true, &host, NULL, error);
  if (st) return st;
  st = adr__validate_data(op, schema, &host.array, path, error);
  adr_device_array_release(&host);
  return st;
}
