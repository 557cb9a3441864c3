/* SPDX-License-Identifier: Apache-2.0
 *
 * Deep copy of an ArrowDeviceArray tree to any adr device.
 *
 * Two passes over the tree:
 *  1. plan: decide, node by node, which element range of the source each
 *     output node holds, and list every value whose size depends on the
 *     data (first/last offsets of var-binary arrays, the buffer sizes of
 *     views). Those are read in one batch after the source's sync_event,
 *     followed by one host wait for the whole tree.
 *  2. copy: allocate each output buffer and queue its copy on one stream.
 *
 * Each layout's ranges are decided in one place: plan_lead and
 * plan_child_range (which elements a node and its children take),
 * plan_size_bytes and read_sizes (what must be read first), and one
 * copy_<layout> function per layout family (which bytes of each buffer
 * cross).
 *
 * Ranges. A node is asked for source elements [start, start + len) of its
 * buffers (start includes the node's own offset). It copies elements from
 * start - r, where r = start % 8 keeps bitmaps byte-aligned with their bit
 * offset, and becomes an output node with offset r and length len. A child
 * that is indexed by its parent's position (struct, sparse union,
 * fixed-size list) is asked for the matching range; a child indexed through
 * data (list offsets, dense union offsets, run ends, dictionary indices)
 * is copied whole, since narrowing it would need the offsets first and a
 * second round trip per nesting level. Var-binary data is copied from the
 * first used byte to the last into a buffer of the last offset's size, so
 * the offsets keep their values without a rebasing kernel.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "array_internal.h"

struct plan {
  const struct ArrowSchema* schema;
  const struct ArrowArray* src;
  struct adr_format f;
  int64_t start, len, r;
  int64_t read_at; /* byte offset of this node's size reads in the staging buffer, -1 none */
  struct plan* children;
  struct plan* dictionary;
};

struct copy_ctx {
  const char* op;
  struct adr_device* src_dev;
  struct adr_device* dst_dev;
  struct adr_device* cpu;
  bool src_cpu;
  bool dst_cpu;
  bool direct; /* host-readable source, CPU destination: plain memcpy */
  bool whole;
  struct adr_stream* read_stream;
  struct adr_stream* copy_stream;
  struct adr_stream* alloc_stream;
  unsigned char* staging;
  int64_t staging_size;
  struct adr_copy_stats stats;
  struct adr__path path;
  struct adr_error* error;
  /* Offsets to rebase on the host once the copies completed (CPU
   * destination): subtract `first` from entries [skip, count) and zero
   * the `skip` entries before the node's slice. */
  struct fixup {
    void* offsets;
    int64_t count;
    int64_t skip;
    int64_t first;
    int width;
  } * fixups;
  size_t n_fixups, cap_fixups;
};

static void plan_free(struct plan* p) {
  if (p == NULL) return;
  if (p->children != NULL)
    for (int64_t i = 0; i < p->src->n_children; i++) plan_free(&p->children[i]);
  free(p->children);
  if (p->dictionary != NULL) {
    plan_free(p->dictionary);
    free(p->dictionary);
  }
}

#define CFAIL(ctx, status, ...) \
  adr__path_error((ctx)->error, status, (ctx)->op, &(ctx)->path, __VA_ARGS__)

/* ---- ranges: per layout, the source elements a node and its children take */

/* r, the elements copied before the node's own start: none for the null
 * layout (no buffers), all of them for run-end arrays (their children are
 * copied whole) and in `whole` mode, otherwise start % 8 so bitmaps keep
 * their bit offset. */
static int64_t plan_lead(const struct copy_ctx* ctx, const struct adr_format* f, int64_t start) {
  switch (f->layout) {
    case ADR_LAYOUT_NULL:
      return ctx->whole ? start : 0;
    case ADR_LAYOUT_RUN_END:
      return start;
    default:
      return ctx->whole ? start : start & 7;
  }
}

/* Staging bytes for the sizes read before the copy: the first and last
 * offsets of a var-binary node, the variadic buffer sizes of views. */
static int64_t plan_size_bytes(const struct adr_format* f, const struct ArrowArray* src) {
  if (f->layout == ADR_LAYOUT_VAR_BINARY && src->buffers[1] != NULL) return 2 * 8;
  if (f->layout == ADR_LAYOUT_BINARY_VIEW && src->n_buffers > 3) return (src->n_buffers - 3) * 8;
  return 0;
}

/* The source range [*cs, *cs + *cl) of child c: children indexed by the
 * parent's position take the parent's range, the others (list, list view,
 * dense union, run-end children; dictionaries) are copied whole. */
static void plan_child_range(const struct copy_ctx* ctx, const struct plan* p,
                             const struct ArrowArray* c, int64_t* cs, int64_t* cl) {
  *cs = c->offset;
  *cl = c->length;
  if (ctx->whole) return;
  switch (p->f.layout) {
    case ADR_LAYOUT_STRUCT:
    case ADR_LAYOUT_SPARSE_UNION:
      *cs = c->offset + p->start - p->r;
      *cl = p->r + p->len;
      break;
    case ADR_LAYOUT_FIXED_LIST:
      *cs = c->offset + (p->start - p->r) * p->f.fixed_size;
      *cl = (p->r + p->len) * p->f.fixed_size;
      break;
    default:
      break;
  }
}

static int plan_build(struct copy_ctx* ctx, struct plan* p, const struct ArrowSchema* schema,
                      const struct ArrowArray* src, int64_t start, int64_t len) {
  p->schema = schema;
  p->src = src;
  p->start = start;
  p->len = len;
  p->read_at = -1;
  if (adr_format_parse(schema->format, &p->f, ctx->error) != 0) return EINVAL;
  p->r = plan_lead(ctx, &p->f, start);
  int64_t reads = plan_size_bytes(&p->f, src);
  if (reads > 0) {
    p->read_at = ctx->staging_size;
    ctx->staging_size += reads;
  }
  if (src->n_children > 0) {
    p->children = calloc((size_t)src->n_children, sizeof(*p->children));
    if (p->children == NULL) return CFAIL(ctx, ENOMEM, "out of memory");
  }
  for (int64_t i = 0; i < src->n_children; i++) {
    int64_t cs, cl;
    plan_child_range(ctx, p, src->children[i], &cs, &cl);
    size_t mark = adr__path_push_child(&ctx->path, i);
    int st = plan_build(ctx, &p->children[i], schema->children[i], src->children[i], cs, cl);
    adr__path_pop(&ctx->path, mark);
    if (st) return st;
  }
  if (src->dictionary != NULL) {
    p->dictionary = calloc(1, sizeof(*p->dictionary));
    if (p->dictionary == NULL) return CFAIL(ctx, ENOMEM, "out of memory");
    size_t mark = adr__path_push_name(&ctx->path, "dictionary");
    int st = plan_build(ctx, p->dictionary, schema->dictionary, src->dictionary,
                        src->dictionary->offset, src->dictionary->length);
    adr__path_pop(&ctx->path, mark);
    if (st) return st;
  }
  return 0;
}

/* ---- size reads: one batch for the tree ------------------------------------ */

/* One read of n bytes at src into the staging buffer at `at`. */
static int read_one(struct copy_ctx* ctx, int64_t at, const void* src, size_t n) {
  ctx->stats.size_reads++;
  if (ctx->src_cpu || ctx->direct) {
    memcpy(ctx->staging + at, src, n);
    return 0;
  }
  return adr_copy(ctx->cpu, ctx->staging + at, ctx->src_dev, src, n, ctx->read_stream, ctx->error);
}

/* The reads plan_size_bytes reserved for node p. Var-binary: the node's
 * own first offset, not the one at start - r (entries before the slice
 * are not the array's and may hold anything), and the last. Views: the
 * variadic sizes buffer. */
static int read_sizes(struct copy_ctx* ctx, const struct plan* p) {
  const struct ArrowArray* s = p->src;
  switch (p->f.layout) {
    case ADR_LAYOUT_VAR_BINARY: {
      int64_t ob = p->f.offset_bytes;
      const unsigned char* offs = s->buffers[1];
      int st = read_one(ctx, p->read_at, offs + p->start * ob, (size_t)ob);
      if (st == 0) st = read_one(ctx, p->read_at + 8, offs + (p->start + p->len) * ob, (size_t)ob);
      return st;
    }
    case ADR_LAYOUT_BINARY_VIEW:
      return read_one(ctx, p->read_at, s->buffers[s->n_buffers - 1],
                      (size_t)(s->n_buffers - 3) * 8);
    default:
      return 0;
  }
}

static int plan_reads(struct copy_ctx* ctx, const struct plan* p) {
  int st = p->read_at >= 0 ? read_sizes(ctx, p) : 0;
  if (p->children != NULL)
    for (int64_t i = 0; st == 0 && i < p->src->n_children; i++)
      st = plan_reads(ctx, &p->children[i]);
  if (st == 0 && p->dictionary != NULL) st = plan_reads(ctx, p->dictionary);
  return st;
}

static int64_t staged_offset(const struct copy_ctx* ctx, int64_t at, int ob) {
  if (ob == 4) {
    int32_t v;
    memcpy(&v, ctx->staging + at, 4);
    return v;
  }
  int64_t v;
  memcpy(&v, ctx->staging + at, 8);
  return v;
}

/* Allocates output buffer i of `size` bytes and copies n bytes from
 * src + src_off to its byte dst_off. */
static int copy_buffer(struct copy_ctx* ctx, struct ArrowArray* out, int64_t i, int64_t size,
                       const void* src, int64_t src_off, int64_t dst_off, int64_t n) {
  void* dst;
  int st = adr_array_alloc_buffer(out, i, (size_t)size, ctx->alloc_stream, &dst, ctx->error);
  if (st) return st;
  if (n <= 0) return 0;
  ctx->stats.copies++;
  ctx->stats.bytes += n;
  if (ctx->direct) {
    memcpy((unsigned char*)dst + dst_off, (const unsigned char*)src + src_off, (size_t)n);
    return 0;
  }
  return adr_copy(ctx->dst_dev, (unsigned char*)dst + dst_off, ctx->src_dev,
                  (const unsigned char*)src + src_off, (size_t)n, ctx->copy_stream, ctx->error);
}

/* Copies elements [from, from + count) of a buffer of `width_bits` bits
 * per element; an absent buffer (validity without nulls) stays absent. */
static int copy_elements(struct copy_ctx* ctx, struct ArrowArray* out, int64_t i, const void* src,
                         int64_t from, int64_t count, int64_t width_bits) {
  if (src == NULL) return 0;
  int64_t src_off, n;
  if (width_bits == 1) {
    src_off = from / 8; /* from is a multiple of 8 */
    n = (count + 7) / 8;
  } else {
    src_off = from * (width_bits / 8);
    n = count * (width_bits / 8);
  }
  return copy_buffer(ctx, out, i, n, src, src_off, 0, n);
}

/* Rebases n offsets of a var-binary node by `first`; the `skip` entries
 * before the node's slice (alignment padding, not the array's: they may
 * hold anything) become 0, so the result is monotonic and nothing is
 * computed from them. CPU destination: the
 * output offsets (already copied, or queued) are fixed up on the host once
 * the copies completed. CPU source, device destination: a rebased host
 * copy is uploaded; the node keeps it until its release, as the upload may
 * still be queued. */
static int rebase_offsets(struct copy_ctx* ctx, struct ArrowArray* out, const struct ArrowArray* s,
                          const struct adr_format* f, int64_t from, int64_t n, int64_t skip,
                          int64_t first) {
  int w = f->offset_bytes;
  if (ctx->dst_cpu) {
    if (ctx->n_fixups == ctx->cap_fixups) {
      size_t cap = ctx->cap_fixups ? 2 * ctx->cap_fixups : 16;
      struct fixup* nf = realloc(ctx->fixups, cap * sizeof(*nf));
      if (nf == NULL) return CFAIL(ctx, ENOMEM, "out of memory");
      ctx->fixups = nf;
      ctx->cap_fixups = cap;
    }
    ctx->fixups[ctx->n_fixups++] = (struct fixup){(void*)out->buffers[1], n, skip, first, w};
    return 0;
  }
  unsigned char* host = malloc((size_t)(n * w));
  if (host == NULL) return CFAIL(ctx, ENOMEM, "out of memory");
  const unsigned char* src = (const unsigned char*)s->buffers[1] + from * w;
  memset(host, 0, (size_t)(skip * w));
  for (int64_t i = skip; i < n; i++) {
    if (w == 4) {
      int32_t v;
      memcpy(&v, src + 4 * i, 4);
      v = (int32_t)((uint32_t)v - (uint32_t)first); /* wraps, never UB, on bad data */
      memcpy(host + 4 * i, &v, 4);
    } else {
      int64_t v;
      memcpy(&v, src + 8 * i, 8);
      v = (int64_t)((uint64_t)v - (uint64_t)first);
      memcpy(host + 8 * i, &v, 8);
    }
  }
  adr__array_node_keep(out, host);
  return copy_buffer(ctx, out, 1, n * w, host, 0, 0, n * w);
}

static void apply_fixups(struct copy_ctx* ctx) {
  for (size_t k = 0; k < ctx->n_fixups; k++) {
    struct fixup* x = &ctx->fixups[k];
    if (x->width == 4) {
      int32_t* o = x->offsets;
      for (int64_t i = 0; i < x->skip; i++) o[i] = 0;
      for (int64_t i = x->skip; i < x->count; i++)
        o[i] = (int32_t)((uint32_t)o[i] - (uint32_t)x->first);
    } else {
      int64_t* o = x->offsets;
      for (int64_t i = 0; i < x->skip; i++) o[i] = 0;
      for (int64_t i = x->skip; i < x->count; i++)
        o[i] = (int64_t)((uint64_t)o[i] - (uint64_t)x->first);
    }
  }
}

/* ---- per layout: which bytes of each buffer cross ----------------------------
 *
 * Each takes the node's elements [from, from + count) = [start - r,
 * start + len) of the source. */

/* Fixed width and bool: validity and values of the range. */
static int copy_fixed(struct copy_ctx* ctx, const struct plan* p, struct ArrowArray* out,
                      int64_t from, int64_t count) {
  const struct ArrowArray* s = p->src;
  int st = copy_elements(ctx, out, 0, s->buffers[0], from, count, 1);
  if (st == 0) st = copy_elements(ctx, out, 1, s->buffers[1], from, count, p->f.bit_width);
  return st;
}

/* Var-binary and utf8 (and large): validity and count + 1 offsets of the
 * range; data [first, last) by the offsets read before. */
static int copy_var_binary(struct copy_ctx* ctx, const struct plan* p, struct ArrowArray* out,
                           int64_t from, int64_t count) {
  const struct ArrowArray* s = p->src;
  const struct adr_format* f = &p->f;
  int st = copy_elements(ctx, out, 0, s->buffers[0], from, count, 1);
  if (st || s->buffers[1] == NULL) return st;
  int64_t first = staged_offset(ctx, p->read_at, f->offset_bytes);
  int64_t last = staged_offset(ctx, p->read_at + 8, f->offset_bytes);
  if (first < 0 || last < first)
    return CFAIL(ctx, EINVAL, "offsets [%lld, %lld] of the copied range are not monotonic",
                 (long long)first, (long long)last);
  if (last > first && s->buffers[2] == NULL)
    return CFAIL(ctx, EINVAL, "data buffer is NULL but offsets reference %lld bytes",
                 (long long)(last - first));
  bool upload_rebased = first > 0 && ctx->src_cpu && !ctx->dst_cpu;
  if (!upload_rebased) {
    st = copy_elements(ctx, out, 1, s->buffers[1], from, count + 1, 8 * f->offset_bytes);
    if (st) return st;
  }
  if (first == 0 || (!ctx->dst_cpu && !ctx->src_cpu)) {
    /* Device to device: the offsets keep their values (rebasing them
     * would need a kernel), the data lands at the same positions. */
    return copy_buffer(ctx, out, 2, last, s->buffers[2], first, first, last - first);
  }
  /* Only [first, last) crosses and the offsets are rebased to 0: on the
   * host after the copy (CPU destination) or before it (CPU source). */
  st = copy_buffer(ctx, out, 2, last - first, s->buffers[2], first, 0, last - first);
  if (st == 0) st = rebase_offsets(ctx, out, s, f, from, count + 1, p->r, first);
  return st;
}

/* Binary and string views: validity and views of the range; every
 * variadic buffer whole, by the sizes read before, and the sizes. */
static int copy_views(struct copy_ctx* ctx, const struct plan* p, struct ArrowArray* out,
                      int64_t from, int64_t count) {
  const struct ArrowArray* s = p->src;
  int st = copy_elements(ctx, out, 0, s->buffers[0], from, count, 1);
  if (st == 0) st = copy_elements(ctx, out, 1, s->buffers[1], from, count, 128);
  int64_t nvar = s->n_buffers - 3;
  for (int64_t v = 0; st == 0 && v < nvar; v++) {
    int64_t size;
    memcpy(&size, ctx->staging + p->read_at + 8 * v, 8);
    if (size < 0)
      return CFAIL(ctx, EINVAL, "variadic buffer %lld has negative size %lld", (long long)v,
                   (long long)size);
    if (size > 0 && s->buffers[2 + v] == NULL)
      return CFAIL(ctx, EINVAL, "variadic buffer %lld is NULL but has size %lld", (long long)v,
                   (long long)size);
    st = copy_buffer(ctx, out, 2 + v, size, s->buffers[2 + v], 0, 0, size);
  }
  if (st == 0)
    st = copy_buffer(ctx, out, s->n_buffers - 1, nvar * 8, s->buffers[s->n_buffers - 1], 0, 0,
                     nvar * 8);
  return st;
}

/* List, large list, map: validity and count + 1 offsets of the range (the
 * child is copied whole, so the offsets keep their values). */
static int copy_list(struct copy_ctx* ctx, const struct plan* p, struct ArrowArray* out,
                     int64_t from, int64_t count) {
  const struct ArrowArray* s = p->src;
  int st = copy_elements(ctx, out, 0, s->buffers[0], from, count, 1);
  if (st == 0 && s->buffers[1] != NULL)
    st = copy_elements(ctx, out, 1, s->buffers[1], from, count + 1, 8 * p->f.offset_bytes);
  return st;
}

/* List views (and large): validity, offsets and sizes of the range. */
static int copy_list_view(struct copy_ctx* ctx, const struct plan* p, struct ArrowArray* out,
                          int64_t from, int64_t count) {
  const struct ArrowArray* s = p->src;
  const int64_t bits = 8 * p->f.offset_bytes;
  int st = copy_elements(ctx, out, 0, s->buffers[0], from, count, 1);
  if (st == 0) st = copy_elements(ctx, out, 1, s->buffers[1], from, count, bits);
  if (st == 0) st = copy_elements(ctx, out, 2, s->buffers[2], from, count, bits);
  return st;
}

/* Sparse and dense unions: type ids (and dense offsets) of the range. */
static int copy_union(struct copy_ctx* ctx, const struct plan* p, struct ArrowArray* out,
                      int64_t from, int64_t count) {
  const struct ArrowArray* s = p->src;
  int st = copy_elements(ctx, out, 0, s->buffers[0], from, count, 8);
  if (st == 0 && p->f.layout == ADR_LAYOUT_DENSE_UNION)
    st = copy_elements(ctx, out, 1, s->buffers[1], from, count, 32);
  return st;
}

static int copy_layout(struct copy_ctx* ctx, const struct plan* p, struct ArrowArray* out) {
  const struct ArrowArray* s = p->src;
  const int64_t from = p->start - p->r, count = p->r + p->len;
  switch (p->f.layout) {
    case ADR_LAYOUT_NULL:
    case ADR_LAYOUT_RUN_END: /* no buffers */
      return 0;
    case ADR_LAYOUT_FIXED:
      return copy_fixed(ctx, p, out, from, count);
    case ADR_LAYOUT_VAR_BINARY:
      return copy_var_binary(ctx, p, out, from, count);
    case ADR_LAYOUT_BINARY_VIEW:
      return copy_views(ctx, p, out, from, count);
    case ADR_LAYOUT_LIST:
      return copy_list(ctx, p, out, from, count);
    case ADR_LAYOUT_LIST_VIEW:
      return copy_list_view(ctx, p, out, from, count);
    case ADR_LAYOUT_FIXED_LIST:
    case ADR_LAYOUT_STRUCT: /* validity only; the children carry the values */
      return copy_elements(ctx, out, 0, s->buffers[0], from, count, 1);
    case ADR_LAYOUT_SPARSE_UNION:
    case ADR_LAYOUT_DENSE_UNION:
      return copy_union(ctx, p, out, from, count);
  }
  return 0;
}

static int plan_copy(struct copy_ctx* ctx, const struct plan* p, struct ArrowArray* out) {
  const struct ArrowArray* s = p->src;
  int st = adr_array_init(ctx->dst_dev, s->n_buffers, s->n_children, out, ctx->error);
  if (st) return st;
  out->length = p->len;
  out->offset = p->r;
  bool same = p->start == s->offset && p->len == s->length;
  out->null_count = same || s->null_count == 0 ? s->null_count : -1;
  /* No validity buffer means every element is valid (docs/arrays.md), so a
   * null_count of -1 (unknown) becomes the 0 it stands for. */
  if (adr__has_validity(p->f.layout) && s->buffers[0] == NULL) out->null_count = 0;
  st = copy_layout(ctx, p, out);
  for (int64_t i = 0; st == 0 && i < s->n_children; i++) {
    size_t mark = adr__path_push_child(&ctx->path, i);
    st = plan_copy(ctx, &p->children[i], out->children[i]);
    adr__path_pop(&ctx->path, mark);
  }
  if (st == 0 && p->dictionary != NULL) {
    size_t mark = adr__path_push_name(&ctx->path, "dictionary");
    st = adr_array_alloc_dictionary(out, ctx->error);
    if (st == 0) st = plan_copy(ctx, p->dictionary, out->dictionary);
    adr__path_pop(&ctx->path, mark);
  }
  return st;
}

/* ---- the whole tree ---------------------------------------------------------- */

static int host_sync_stream(struct copy_ctx* ctx, struct adr_stream* s) {
  ctx->stats.host_syncs++;
  return adr_stream_synchronize(s, ctx->error);
}

/* Arguments, the source's structure and devices, before anything is read. */
static int deep_copy_check(struct copy_ctx* ctx, const struct ArrowSchema* schema,
                           const struct ArrowDeviceArray* src, struct adr_device* dst_device,
                           struct adr_stream* stream, const struct ArrowDeviceArray* out,
                           const struct adr_copy_stats* stats) {
  const char* op = ctx->op;
  struct adr_error* error = ctx->error;
  if (stats != NULL && stats->struct_size == 0)
    return adr__errorf(error, EINVAL, op, NULL, "out_stats->struct_size is not set");
  if (src == NULL || dst_device == NULL || out == NULL)
    return adr__errorf(error, EINVAL, op, NULL, "%s is NULL",
                       src == NULL          ? "src"
                       : dst_device == NULL ? "dst_device"
                                            : "out");
  if (!adr__device_type_known(src->device_type))
    return adr__path_error(error, EINVAL, op, &ctx->path, "unknown device_type %d",
                           (int)src->device_type);
  int st = adr__validate_structure(op, schema, &src->array, &ctx->path, 0, error);
  if (st) return st;
  st = adr__array_device(src->device_type, src->device_id, &ctx->src_dev, error);
  if (st) return st;
  st = adr_device_get(ARROW_DEVICE_CPU, 0, &ctx->cpu, error);
  if (st) return st;
  ctx->dst_dev = dst_device;
  ctx->src_cpu = src->device_type == ARROW_DEVICE_CPU;
  ctx->dst_cpu = adr_device_type(dst_device) == ARROW_DEVICE_CPU;
  if (stream != NULL && adr_stream_device(stream) != dst_device &&
      adr_stream_device(stream) != ctx->src_dev)
    return adr__errorf(error, EINVAL, op, NULL, "stream belongs to %s, neither %s nor %s",
                       adr_device_name(adr_stream_device(stream)), adr_device_name(dst_device),
                       adr_device_name(ctx->src_dev));
  if (ctx->src_cpu && src->sync_event != NULL)
    return adr__path_error(error, EINVAL, op, &ctx->path,
                           "a CPU array must not carry a sync_event");
  return 0;
}

/* One stream orders every copy; sizes are read on the source's side; a
 * host-readable source to the CPU is plain memcpy (once the source's event
 * has completed, the result is complete without a stream to wait for). */
static void deep_copy_streams(struct copy_ctx* ctx, struct adr_stream* stream) {
  if (stream != NULL)
    ctx->copy_stream = stream;
  else if (!ctx->dst_cpu)
    ctx->copy_stream = adr_stream_default(ctx->dst_dev);
  else if (!ctx->src_cpu)
    ctx->copy_stream = adr_stream_default(ctx->src_dev);
  else
    ctx->copy_stream = adr_stream_default(ctx->dst_dev);
  ctx->read_stream = adr_stream_device(ctx->copy_stream) == ctx->src_dev
                         ? ctx->copy_stream
                         : adr_stream_default(ctx->src_dev);
  ctx->alloc_stream = adr_stream_device(ctx->copy_stream) == ctx->dst_dev && !ctx->dst_cpu
                          ? ctx->copy_stream
                          : NULL;
  if (!ctx->dst_cpu) return;
  if (ctx->src_cpu) {
    ctx->direct = true;
  } else {
    struct adr_device_info info;
    memset(&info, 0, sizeof(info));
    info.struct_size = sizeof(info);
    ctx->direct = adr_device_info_get(ctx->src_dev, &info, NULL) == 0 &&
                  (info.caps & ADR_CAP_HOST_ACCESSIBLE) != 0;
  }
}

/* Nothing is read before the producer's event: the read stream (and the
 * copy stream) wait on it first, then every size is read in one batch
 * with one host wait. *src_event receives the imported event. */
static int deep_copy_read_sizes(struct copy_ctx* ctx, const struct ArrowDeviceArray* src,
                                const struct plan* root, struct adr_event** src_event) {
  int st = 0;
  if (ctx->staging_size > 0) {
    ctx->staging = malloc((size_t)ctx->staging_size);
    if (ctx->staging == NULL)
      return adr__errorf(ctx->error, ENOMEM, ctx->op, NULL, "out of memory");
  }
  if (src->sync_event != NULL)
    st = adr_event_import(ctx->src_dev, src->sync_event, src_event, ctx->error);
  if (st) return st;
  if (ctx->direct) {
    if (*src_event != NULL) {
      ctx->stats.host_syncs++;
      st = adr_event_synchronize(*src_event, ctx->error);
    }
    return st == 0 ? plan_reads(ctx, root) : st;
  }
  if (ctx->staging_size > 0) {
    if (*src_event != NULL) st = adr_stream_wait_event(ctx->read_stream, *src_event, ctx->error);
    if (st == 0) st = plan_reads(ctx, root);
    if (st == 0 && !ctx->src_cpu) {
      /* The one host wait of the tree: every size read above completes, and
       * with it the source's event. */
      ctx->stats.size_syncs++;
      st = host_sync_stream(ctx, ctx->read_stream);
    }
    return st;
  }
  if (*src_event == NULL) return 0;
  if (adr_stream_device(ctx->copy_stream) == ctx->src_dev)
    return adr_stream_wait_event(ctx->copy_stream, *src_event, ctx->error);
  ctx->stats.host_syncs++;
  return adr_event_synchronize(*src_event, ctx->error);
}

/* After the copies were queued (st: how that went): with the caller's
 * stream on a device destination, an event recorded after them (*done,
 * *native) and no wait; otherwise one host wait and the CPU destination's
 * offsets rebased. On failure queued copies drain before their memory goes. */
static int deep_copy_finish(struct copy_ctx* ctx, int st, struct adr_stream* stream,
                            struct adr_event** done, void** native) {
  bool complete =
      stream == NULL || ctx->dst_cpu || adr_stream_device(ctx->copy_stream) != ctx->dst_dev;
  bool drained = ctx->direct; /* nothing was queued */
  *done = NULL;
  *native = NULL;
  if (st == 0 && !complete) {
    st = adr_event_create(ctx->dst_dev, done, ctx->error);
    if (st == 0) st = adr_event_record(*done, ctx->copy_stream, ctx->error);
    if (st == 0) *native = adr_event_native(*done);
    if (st == 0 && *native == NULL) complete = true;
  }
  if (st == 0 && complete && !drained) st = host_sync_stream(ctx, ctx->copy_stream);
  if (st == 0) apply_fixups(ctx); /* CPU destination: the copies are complete */
  if (st != 0 && !drained) {
    adr_stream_synchronize(ctx->copy_stream, NULL);
    if (ctx->read_stream != ctx->copy_stream) adr_stream_synchronize(ctx->read_stream, NULL);
  }
  if (*done != NULL && (st != 0 || complete)) {
    adr_event_destroy(*done, NULL);
    *done = NULL;
    *native = NULL;
  }
  return st;
}

int adr__deep_copy(const char* op, const struct ArrowSchema* schema,
                   const struct ArrowDeviceArray* src, struct adr_device* dst_device,
                   struct adr_stream* stream, bool whole, struct ArrowDeviceArray* out,
                   struct adr_copy_stats* stats, struct adr_error* error) {
  struct copy_ctx ctx;
  memset(&ctx, 0, sizeof(ctx));
  ctx.op = op;
  ctx.whole = whole;
  ctx.error = error;
  adr__path_root(&ctx.path);
  int st = deep_copy_check(&ctx, schema, src, dst_device, stream, out, stats);
  if (st) return st;
  deep_copy_streams(&ctx, stream);
  struct plan root;
  memset(&root, 0, sizeof(root));
  struct adr_event* src_event = NULL;
  struct ArrowArray result;
  result.release = NULL;
  st = plan_build(&ctx, &root, schema, &src->array, src->array.offset, src->array.length);
  if (st == 0) st = deep_copy_read_sizes(&ctx, src, &root, &src_event);
  if (st == 0) st = plan_copy(&ctx, &root, &result);
  struct adr_event* done;
  void* native;
  st = deep_copy_finish(&ctx, st, stream, &done, &native);
  if (src_event != NULL) adr_event_destroy(src_event, NULL);
  free(ctx.staging);
  free(ctx.fixups);
  plan_free(&root);
  if (st != 0) {
    if (result.release != NULL) result.release(&result);
    return st;
  }
  if (done != NULL) adr__array_node_set_event(&result, done);
  memset(out, 0, sizeof(*out));
  out->array = result;
  out->device_type = adr_device_type(dst_device);
  out->device_id = ctx.dst_cpu ? -1 : adr_device_id(dst_device);
  out->sync_event = native;
  if (stats != NULL) {
    uint32_t size =
        stats->struct_size < sizeof(*stats) ? stats->struct_size : (uint32_t)sizeof(*stats);
    ctx.stats.struct_size = size;
    memcpy(stats, &ctx.stats, size);
  }
  return 0;
}

int adr_device_array_deep_copy(const struct ArrowSchema* schema, const struct ArrowDeviceArray* src,
                               struct adr_device* dst_device, struct adr_stream* stream,
                               struct ArrowDeviceArray* out, struct adr_copy_stats* out_stats,
                               struct adr_error* error) {
  return adr__deep_copy("adr_device_array_deep_copy", schema, src, dst_device, stream, false, out,
                        out_stats, error);
}
