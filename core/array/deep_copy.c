/* SPDX-License-Identifier: Apache-2.0
 *
 * Deep copy of an ArrowDeviceArray tree to any adr device.
 *
 * A copy of a slice holds what the slice uses and nothing else (docs/
 * arrays.md, "What is copied"): every node is asked for the source
 * elements [start, start + len) of its buffers (start includes the node's
 * offset) and becomes a standalone output node.
 *
 *  1. plan, in rounds: a node whose children are indexed by position
 *     (struct, sparse union, fixed-size list) plans them at once; a node
 *     whose children or data are reached through its own buffers (offsets
 *     of var-binary and lists, offsets and sizes of list views, type ids
 *     and offsets of dense unions, views, run ends) first reads those
 *     buffers for its range to the host. Every read of a round is queued
 *     on one stream after the source's sync_event, then the host waits
 *     once; the round's nodes are resolved on the host (child ranges,
 *     rebased offsets, compacted views) and plan their children, whose
 *     reads form the next round. One round unless such nodes are nested in
 *     each other.
 *  2. copy: allocate each output buffer and queue its copy on one stream;
 *     the index buffers resolved on the host are adopted as the output's
 *     buffers (CPU destination) or uploaded.
 *
 * Leads. A node copies from start - r, where r = start % 8 for layouts
 * with bitmaps (validity, bool values), so bitmaps keep their bit offset
 * and need no shifting, and becomes an output node with offset r; r = 0
 * for empty nodes and for layouts without bitmaps (null, unions, run-end).
 * The r entries before the slice in a resolved index buffer are not the
 * array's (they may hold anything) and are zeroed.
 *
 * `whole` mode (full validation and comparison of device arrays) keeps
 * every node's offset and copies [0, offset + length) of each buffer, and
 * children and data reached through offsets whole, so indices in messages
 * are the source's.
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
  /* Index buffers read to the host: host[k] becomes output buffer k
   * (views: k = 2 is the variadic sizes buffer), host_size[k] bytes. CPU
   * destination: CPU allocations the output adopts; device destination:
   * parts of `block`, which the output node keeps until its release (the
   * uploads may still be queued). */
  unsigned char* host[3];
  int64_t host_size[3];
  unsigned char* block;
  /* Reads that are not output: run ends of a run-end node; whole mode:
   * first and last offsets of var-binary, variadic sizes of views. */
  unsigned char* scratch;
  int64_t first, last; /* var-binary: the data bytes [first, last) */
  /* Device to device from element 0: the offsets stay as they are (see
   * read_index), only the first and last were read (scratch). */
  bool keep_offsets;
  /* Host-readable source: its offsets of the range, rebased straight into
   * host[1] (one pass, no separate read). */
  const unsigned char* direct_offs;
  int64_t* vlo; /* views: first used byte of each variadic buffer */
  struct adr__path path;
  struct plan* children;
  struct plan* dictionary;
  struct plan* next_pending;
};

struct copy_ctx {
  const char* op;
  /* NULL: host memory (a CPU source, a NULL destination device). The
   * host side of the core's own reads and uploads (`host`) is NULL too, or
   * the CPU device when the caller's stream is one of its streams: no cpu
   * backend is loaded for a deep copy that does not name the CPU device. */
  struct adr_device* src_dev;
  struct adr_device* dst_dev;
  struct adr_device* host;
  bool src_cpu;
  bool dst_cpu;
  bool direct;         /* host-readable source, CPU destination: plain memcpy */
  bool sync_downloads; /* the source's downloads complete in adr_copy */
  bool whole;
  bool round_queued; /* a read of this round went through a stream */
  bool src_ready;    /* a host wait covered the source's event */
  struct adr_stream* read_stream;
  struct adr_stream* copy_stream;
  struct adr_stream* alloc_stream;
  struct plan* pending; /* nodes whose reads this round carries */
  /* Dictionaries planned up front (their range never depends on data), so
   * their reads join the first round wherever their node sits. */
  struct hoisted {
    const struct ArrowArray* src;
    struct plan* plan;
  } * dicts;
  size_t n_dicts;
  struct adr_copy_stats stats;
  struct adr__path path;
  struct adr_error* error;
};

#define CFAIL(ctx, status, ...) \
  adr__path_error((ctx)->error, status, (ctx)->op, &(ctx)->path, __VA_ARGS__)

static void plan_free(struct copy_ctx* ctx, struct plan* p) {
  if (p == NULL) return;
  if (p->children != NULL)
    for (int64_t i = 0; i < p->src->n_children; i++) plan_free(ctx, &p->children[i]);
  free(p->children);
  if (p->dictionary != NULL) {
    plan_free(ctx, p->dictionary);
    free(p->dictionary);
  }
  if (ctx->dst_cpu) {
    for (int k = 0; k < 3; k++) {
      if (p->host[k] != NULL && ctx->dst_dev == NULL)
        free(p->host[k]);
      else if (p->host[k] != NULL)
        adr_free(ctx->dst_dev, p->host[k], (size_t)p->host_size[k], NULL, NULL);
    }
  }
  free(p->block);
  free(p->scratch);
  free(p->vlo);
}

static bool host_bit(const unsigned char* bits, int64_t i) {
  return bits == NULL || ((bits[i >> 3] >> (i & 7)) & 1);
}

/* ---- reads: batched per round ----------------------------------------------- */

/* Host blocks of sizes[k] bytes for node p's index buffers. */
static int host_blocks(struct copy_ctx* ctx, struct plan* p, const int64_t sizes[3]) {
  if (ctx->dst_cpu) {
    for (int k = 0; k < 3; k++) {
      if (sizes[k] <= 0) continue;
      void* b = NULL;
      if (ctx->dst_dev == NULL) {
        b = adr__array_host_alloc((size_t)sizes[k]);
        if (b == NULL) return CFAIL(ctx, ENOMEM, "out of host memory");
      } else {
        int st = adr_alloc(ctx->dst_dev, (size_t)sizes[k], 0, NULL, &b, ctx->error);
        if (st) return st;
      }
      p->host[k] = b;
      p->host_size[k] = sizes[k];
    }
    return 0;
  }
  int64_t total = 0;
  for (int k = 0; k < 3; k++) total += (sizes[k] + 7) & ~(int64_t)7;
  if (total == 0) return 0;
  p->block = malloc((size_t)total);
  if (p->block == NULL) return CFAIL(ctx, ENOMEM, "out of memory");
  int64_t at = 0;
  for (int k = 0; k < 3; k++) {
    if (sizes[k] <= 0) continue;
    p->host[k] = p->block + at;
    p->host_size[k] = sizes[k];
    at += (sizes[k] + 7) & ~(int64_t)7;
  }
  return 0;
}

/* Reads n bytes of the source at src into host memory at dst. */
/* Reads n bytes at byte offset `at` of the source buffer `buf` into host
 * memory. A NULL buffer is never offset: with bytes to read it is an
 * error (the layout needs it), with none there is nothing to do. */
static int read_into(struct copy_ctx* ctx, void* dst, const void* buf, int64_t at, int64_t n) {
  if (n <= 0) return 0;
  if (buf == NULL) return CFAIL(ctx, EINVAL, "a buffer the layout needs is NULL");
  const unsigned char* src = (const unsigned char*)buf + at;
  ctx->stats.size_reads++;
  ctx->stats.read_bytes += n;
  if (ctx->src_cpu || ctx->direct) {
    memcpy(dst, src, (size_t)n);
    return 0;
  }
  ctx->round_queued = true;
  return adr_copy(ctx->host, dst, ctx->src_dev, src, (size_t)n, ctx->read_stream, ctx->error);
}

/* Validity bits of elements [from, from + count) (from is a multiple of 8). */
static int read_validity(struct copy_ctx* ctx, struct plan* p, int64_t from, int64_t count) {
  const unsigned char* v = p->src->buffers[0];
  return v == NULL ? 0 : read_into(ctx, p->host[0], v, from / 8, p->host_size[0]);
}

/* Var-binary and list offsets, device to device, of a range from element
 * 0 (a whole array): they usually start at 0 and need no rebasing, so
 * only the first and last are read and the offsets cross device to device
 * as they are, instead of crossing the host twice. */
/* Offsets `first` and `last` of a var-binary or list node into p->scratch
 * (bytes 0 and 8). */
static int read_two_offsets(struct copy_ctx* ctx, struct plan* p, int64_t first, int64_t last) {
  const int w = p->f.offset_bytes;
  const void* offs = p->src->buffers[1];
  p->scratch = malloc(16);
  if (p->scratch == NULL) return CFAIL(ctx, ENOMEM, "out of memory");
  int st = read_into(ctx, p->scratch, offs, first * w, w);
  if (st == 0) st = read_into(ctx, p->scratch + 8, offs, last * w, w);
  return st;
}

static int read_offset_bounds(struct copy_ctx* ctx, struct plan* p, int64_t count) {
  p->keep_offsets = true;
  return read_two_offsets(ctx, p, 0, count);
}

/* Slice mode: the index buffers of p's range [from, from + count). */
static int read_index(struct copy_ctx* ctx, struct plan* p, int64_t from, int64_t count) {
  const struct ArrowArray* s = p->src;
  const int w = p->f.offset_bytes;
  if ((p->f.layout == ADR_LAYOUT_VAR_BINARY || p->f.layout == ADR_LAYOUT_LIST) && from == 0 &&
      !ctx->src_cpu && !ctx->dst_cpu && s->buffers[1] != NULL)
    return read_offset_bounds(ctx, p, count);
  int64_t sz[3] = {0, 0, 0};
  int64_t bits = s->buffers[0] != NULL && count > 0 ? (count + 7) / 8 : 0;
  switch (p->f.layout) {
    case ADR_LAYOUT_VAR_BINARY:
    case ADR_LAYOUT_LIST:
      sz[1] = (count + 1) * w;
      break;
    case ADR_LAYOUT_LIST_VIEW:
      sz[0] = bits;
      sz[1] = sz[2] = count * w;
      break;
    case ADR_LAYOUT_DENSE_UNION:
      sz[0] = count;
      sz[1] = 4 * count;
      break;
    case ADR_LAYOUT_BINARY_VIEW:
      sz[0] = bits;
      sz[1] = 16 * count;
      sz[2] = (s->n_buffers - 3) * 8;
      break;
    default:
      return 0;
  }
  const unsigned char* b1 = s->buffers[1];
  bool offsets = p->f.layout == ADR_LAYOUT_VAR_BINARY || p->f.layout == ADR_LAYOUT_LIST;
  if (offsets && b1 != NULL && (ctx->src_cpu || ctx->direct)) {
    /* var-binary, list: resolve_offsets reads them where they are */
    ctx->stats.size_reads++;
    ctx->stats.read_bytes += 2 * w; /* the first and last */
    p->direct_offs = b1 + from * w;
    return 0;
  }
  int st = host_blocks(ctx, p, sz);
  if (st) return st;
  switch (p->f.layout) {
    case ADR_LAYOUT_VAR_BINARY:
    case ADR_LAYOUT_LIST:
      if (b1 != NULL) return read_into(ctx, p->host[1], b1, from * w, sz[1]);
      if (count > 0) return CFAIL(ctx, EINVAL, "offsets buffer is NULL");
      memset(p->host[1], 0, (size_t)sz[1]); /* length 0: one offset, 0 */
      return 0;
    case ADR_LAYOUT_LIST_VIEW:
      st = read_validity(ctx, p, from, count);
      if (st == 0) st = read_into(ctx, p->host[1], b1, from * w, sz[1]);
      if (st == 0) st = read_into(ctx, p->host[2], s->buffers[2], from * w, sz[2]);
      return st;
    case ADR_LAYOUT_DENSE_UNION:
      st = read_into(ctx, p->host[0], s->buffers[0], from, sz[0]);
      if (st == 0) st = read_into(ctx, p->host[1], b1, 4 * from, sz[1]);
      return st;
    default: /* views */
      st = read_validity(ctx, p, from, count);
      if (st == 0) st = read_into(ctx, p->host[1], b1, 16 * from, sz[1]);
      if (st == 0) st = read_into(ctx, p->host[2], s->buffers[s->n_buffers - 1], 0, sz[2]);
      return st;
  }
}

/* Run-end node: the run ends that can hold the slice, [0, min(n, start +
 * len)), since run end k is at least k + 1. */
static int read_run_ends(struct copy_ctx* ctx, struct plan* p) {
  const struct ArrowArray* ends = p->src->children[0];
  struct adr_format ef;
  int st = adr_format_parse(p->schema->children[0]->format, &ef, ctx->error);
  if (st) return st;
  int64_t n = ends->length < p->start + p->len ? ends->length : p->start + p->len;
  if (p->len == 0 || n <= 0) return 0;
  int64_t bytes = n * (ef.bit_width / 8);
  p->scratch = malloc((size_t)bytes);
  if (p->scratch == NULL) return CFAIL(ctx, ENOMEM, "out of memory");
  return read_into(ctx, p->scratch, ends->buffers[1], ends->offset * (ef.bit_width / 8), bytes);
}

/* Whole mode: a var-binary node's first and last offsets; a view node's
 * variadic sizes. */
static int read_whole(struct copy_ctx* ctx, struct plan* p) {
  const struct ArrowArray* s = p->src;
  if (p->f.layout == ADR_LAYOUT_VAR_BINARY && s->buffers[1] != NULL)
    return read_two_offsets(ctx, p, p->start, p->start + p->len);
  if (p->f.layout == ADR_LAYOUT_BINARY_VIEW && s->n_buffers > 3) {
    int64_t n = (s->n_buffers - 3) * 8;
    p->scratch = malloc((size_t)n);
    if (p->scratch == NULL) return CFAIL(ctx, ENOMEM, "out of memory");
    return read_into(ctx, p->scratch, s->buffers[s->n_buffers - 1], 0, n);
  }
  return 0;
}

/* ---- plan: per layout, the source elements a node and its children take ---- */

static bool indexed_by_data(enum adr_layout l) {
  return l == ADR_LAYOUT_VAR_BINARY || l == ADR_LAYOUT_BINARY_VIEW || l == ADR_LAYOUT_LIST ||
         l == ADR_LAYOUT_LIST_VIEW || l == ADR_LAYOUT_DENSE_UNION || l == ADR_LAYOUT_RUN_END;
}

/* r, the elements copied before the node's own start (see the top). */
static int64_t plan_lead(const struct copy_ctx* ctx, const struct adr_format* f, int64_t start,
                         int64_t len) {
  if (ctx->whole) return start;
  switch (f->layout) {
    case ADR_LAYOUT_NULL:
    case ADR_LAYOUT_RUN_END:
    case ADR_LAYOUT_SPARSE_UNION:
    case ADR_LAYOUT_DENSE_UNION:
      return 0;
    default:
      return len == 0 ? 0 : start & 7;
  }
}

static int plan_node(struct copy_ctx* ctx, struct plan* p, const struct ArrowSchema* schema,
                     const struct ArrowArray* src, int64_t start, int64_t len);

/* Plans child i of p for source elements [cs, cs + cl). */
static int plan_child(struct copy_ctx* ctx, struct plan* p, int64_t i, int64_t cs, int64_t cl) {
  size_t mark = adr__path_push_child(&ctx->path, i);
  int st = plan_node(ctx, &p->children[i], p->schema->children[i], p->src->children[i], cs, cl);
  adr__path_pop(&ctx->path, mark);
  return st;
}

/* Children indexed by the parent's position take its range (whole mode:
 * every child is copied whole). */
static int plan_positional(struct copy_ctx* ctx, struct plan* p) {
  const struct ArrowArray* s = p->src;
  const int64_t from = p->start - p->r, count = p->r + p->len;
  int st = 0;
  for (int64_t i = 0; st == 0 && i < s->n_children; i++) {
    const struct ArrowArray* c = s->children[i];
    switch (ctx->whole ? ADR_LAYOUT_NULL : p->f.layout) {
      case ADR_LAYOUT_STRUCT:
      case ADR_LAYOUT_SPARSE_UNION:
        st = plan_child(ctx, p, i, c->offset + from, count);
        break;
      case ADR_LAYOUT_FIXED_LIST:
        st = plan_child(ctx, p, i, c->offset + from * p->f.fixed_size, count * p->f.fixed_size);
        break;
      default:
        st = plan_child(ctx, p, i, c->offset, c->length);
        break;
    }
  }
  return st;
}

static int plan_node(struct copy_ctx* ctx, struct plan* p, const struct ArrowSchema* schema,
                     const struct ArrowArray* src, int64_t start, int64_t len) {
  p->schema = schema;
  p->src = src;
  p->start = start;
  p->len = len;
  p->path = ctx->path;
  if (adr_format_parse(schema->format, &p->f, ctx->error) != 0) return EINVAL;
  p->r = plan_lead(ctx, &p->f, start, len);
  if (src->n_children > 0) {
    p->children = calloc((size_t)src->n_children, sizeof(*p->children));
    if (p->children == NULL) return CFAIL(ctx, ENOMEM, "out of memory");
  }
  int st;
  if (ctx->whole) {
    st = read_whole(ctx, p);
    if (st == 0 && p->f.layout == ADR_LAYOUT_VAR_BINARY && p->scratch != NULL) {
      p->next_pending = ctx->pending; /* first and last checked once read */
      ctx->pending = p;
    }
    if (st == 0) st = plan_positional(ctx, p);
  } else if (indexed_by_data(p->f.layout)) {
    st = p->f.layout == ADR_LAYOUT_RUN_END ? read_run_ends(ctx, p)
                                           : read_index(ctx, p, start - p->r, p->r + len);
    p->next_pending = ctx->pending; /* children are planned once resolved */
    ctx->pending = p;
  } else {
    st = plan_positional(ctx, p);
  }
  if (st == 0 && src->dictionary != NULL) {
    for (size_t i = 0; i < ctx->n_dicts && p->dictionary == NULL; i++) {
      if (ctx->dicts[i].src != src->dictionary) continue;
      p->dictionary = ctx->dicts[i].plan;
      ctx->dicts[i].plan = NULL;
    }
    if (p->dictionary != NULL) return 0;
    p->dictionary = calloc(1, sizeof(*p->dictionary));
    if (p->dictionary == NULL) return CFAIL(ctx, ENOMEM, "out of memory");
    size_t mark = adr__path_push_name(&ctx->path, "dictionary");
    st = plan_node(ctx, p->dictionary, schema->dictionary, src->dictionary, src->dictionary->offset,
                   src->dictionary->length);
    adr__path_pop(&ctx->path, mark);
  }
  return st;
}

/* Plans the dictionaries of the tree below `a` (not those inside
 * dictionaries) before the first round. */
static int plan_dictionaries(struct copy_ctx* ctx, const struct ArrowSchema* schema,
                             const struct ArrowArray* a) {
  int st = 0;
  if (a->dictionary != NULL) {
    struct hoisted* d = realloc(ctx->dicts, (ctx->n_dicts + 1) * sizeof(*d));
    struct plan* p = calloc(1, sizeof(*p));
    if (d != NULL) ctx->dicts = d;
    if (d == NULL || p == NULL) {
      free(p);
      return CFAIL(ctx, ENOMEM, "out of memory");
    }
    ctx->dicts[ctx->n_dicts++] = (struct hoisted){a->dictionary, p};
    size_t mark = adr__path_push_name(&ctx->path, "dictionary");
    st = plan_node(ctx, p, schema->dictionary, a->dictionary, a->dictionary->offset,
                   a->dictionary->length);
    adr__path_pop(&ctx->path, mark);
  }
  for (int64_t i = 0; st == 0 && i < a->n_children; i++) {
    size_t mark = adr__path_push_child(&ctx->path, i);
    st = plan_dictionaries(ctx, schema->children[i], a->children[i]);
    adr__path_pop(&ctx->path, mark);
  }
  return st;
}

/* ---- resolve: per layout, on the host, once a round's reads landed --------- */

/* Var-binary and lists: the node's first and last offsets; the r entries
 * before the slice become 0 and the others are rebased to start at 0. */
/* dst[i] = src[i] - first for i in [r, n), 0 before r (src may be dst). */
static void rebase_offsets(unsigned char* dst, const unsigned char* src, int w, int64_t n,
                           int64_t r, int64_t first) {
  if (first == 0 && r == 0) { /* a whole array's: as they are */
    if (dst != src) memcpy(dst, src, (size_t)(n * w));
    return;
  }
  if (w == 4) {
    int32_t* d = (int32_t*)(void*)dst;
    const int32_t* o = (const int32_t*)(const void*)src;
    const uint32_t f = (uint32_t)first;
    for (int64_t i = 0; i < r; i++) d[i] = 0;
    for (int64_t i = r; i < n; i++) d[i] = (int32_t)((uint32_t)o[i] - f); /* wraps on bad data */
  } else {
    int64_t* d = (int64_t*)(void*)dst;
    const int64_t* o = (const int64_t*)(const void*)src;
    const uint64_t f = (uint64_t)first;
    for (int64_t i = 0; i < r; i++) d[i] = 0;
    for (int64_t i = r; i < n; i++) d[i] = (int64_t)((uint64_t)o[i] - f);
  }
}

static int resolve_offsets(struct copy_ctx* ctx, struct plan* p) {
  const int w = p->f.offset_bytes;
  unsigned char* o = p->host[1];
  const int64_t count = p->r + p->len;
  if (p->keep_offsets) { /* data [first, last) stays at its positions */
    p->first = adr__int_load(p->scratch, w, 0);
    p->last = adr__int_load(p->scratch + 8, w, 0);
    if (p->first < 0 || p->last < p->first)
      return CFAIL(ctx, EINVAL, "offsets [%lld, %lld] of the copied range are not monotonic",
                   (long long)p->first, (long long)p->last);
    return 0;
  }
  const unsigned char* src = p->direct_offs != NULL ? p->direct_offs : o;
  p->first = adr__int_load(src, w, p->r);
  p->last = adr__int_load(src, w, count);
  if (p->first < 0 || p->last < p->first)
    return CFAIL(ctx, EINVAL, "offsets [%lld, %lld] of the copied range are not monotonic",
                 (long long)p->first, (long long)p->last);
  if (p->direct_offs != NULL) {
    /* A CPU source's offsets that need no rebasing go to a device as they
     * are (copy_offsets); otherwise a host block receives them rebased. */
    if (p->first == 0 && p->r == 0 && !ctx->dst_cpu) return 0;
    int64_t sz[3] = {0, (count + 1) * w, 0};
    int st = host_blocks(ctx, p, sz);
    if (st) return st;
    o = p->host[1];
  }
  rebase_offsets(o, src, w, count + 1, p->r, p->first);
  return 0;
}

static int resolve_var_binary(struct copy_ctx* ctx, struct plan* p) {
  int st = resolve_offsets(ctx, p);
  if (st == 0 && p->last > p->first && p->src->buffers[2] == NULL)
    return CFAIL(ctx, EINVAL, "data buffer is NULL but offsets reference %lld bytes",
                 (long long)(p->last - p->first));
  return st;
}

static int resolve_list(struct copy_ctx* ctx, struct plan* p) {
  int st = resolve_offsets(ctx, p);
  if (st) return st;
  const struct ArrowArray* c = p->src->children[0];
  if (p->last > c->length)
    return CFAIL(ctx, EINVAL, "offsets [%lld, %lld] reach past the child's %lld elements",
                 (long long)p->first, (long long)p->last, (long long)c->length);
  if (p->keep_offsets) /* offsets as they are: the child from its element 0 */
    return plan_child(ctx, p, 0, c->offset, p->last);
  return plan_child(ctx, p, 0, c->offset + p->first, p->last - p->first);
}

/* List views: the child range [lo, hi) the valid, non-empty views use;
 * the others become (0, 0), the used ones are rebased to lo. */
static int resolve_list_view(struct copy_ctx* ctx, struct plan* p) {
  const int w = p->f.offset_bytes;
  const struct ArrowArray* c = p->src->children[0];
  unsigned char *offs = p->host[1], *sizes = p->host[2];
  const int64_t count = p->r + p->len;
  int64_t lo = INT64_MAX, hi = 0;
  for (int64_t i = 0; i < count; i++) {
    int64_t o = adr__int_load(offs, w, i), n = adr__int_load(sizes, w, i);
    if (i < p->r || !host_bit(p->host[0], i) || n == 0) {
      adr__int_store(offs, w, i, 0);
      adr__int_store(sizes, w, i, 0);
      continue;
    }
    if (o < 0 || n < 0 || o > c->length - n)
      return CFAIL(ctx, EINVAL, "list view %lld: [%lld, %lld + %lld) is outside the child's %lld",
                   (long long)(i - p->r), (long long)o, (long long)o, (long long)n,
                   (long long)c->length);
    if (o < lo) lo = o;
    if (o + n > hi) hi = o + n;
  }
  if (hi == 0) lo = 0;
  for (int64_t i = 0; i < count; i++)
    if (adr__int_load(sizes, w, i) != 0) adr__int_store(offs, w, i, adr__int_load(offs, w, i) - lo);
  return plan_child(ctx, p, 0, c->offset + lo, hi - lo);
}

/* Dense unions: per child, the offsets [lo, hi] the slice uses; the
 * offsets are rebased per child. */
static int resolve_dense_union(struct copy_ctx* ctx, struct plan* p) {
  const struct ArrowArray* s = p->src;
  int64_t lo[ADR_MAX_UNION_TYPE_IDS], hi[ADR_MAX_UNION_TYPE_IDS];
  const int64_t nc = s->n_children < p->f.n_type_ids ? s->n_children : p->f.n_type_ids;
  for (int64_t k = 0; k < nc; k++) {
    lo[k] = INT64_MAX;
    hi[k] = -1;
  }
  for (int64_t i = 0; i < p->len; i++) {
    int8_t t = (int8_t)p->host[0][i];
    int k = 0;
    while (k < nc && p->f.type_ids[k] != t) k++;
    int64_t o = adr__int_load(p->host[1], 4, i);
    if (k == nc) return CFAIL(ctx, EINVAL, "element %lld: unknown type id %d", (long long)i, t);
    if (o < 0 || o >= s->children[k]->length)
      return CFAIL(ctx, EINVAL, "element %lld: offset %lld outside child %d's %lld elements",
                   (long long)i, (long long)o, k, (long long)s->children[k]->length);
    if (o < lo[k]) lo[k] = o;
    if (o > hi[k]) hi[k] = o;
  }
  for (int64_t i = 0; i < p->len; i++) {
    int8_t t = (int8_t)p->host[0][i];
    int k = 0;
    while (p->f.type_ids[k] != t) k++;
    adr__int_store(p->host[1], 4, i, adr__int_load(p->host[1], 4, i) - lo[k]);
  }
  int st = 0;
  for (int64_t k = 0; st == 0 && k < s->n_children; k++) {
    const struct ArrowArray* c = s->children[k];
    bool used = k < nc && hi[k] >= 0;
    st = plan_child(ctx, p, k, used ? c->offset + lo[k] : c->offset, used ? hi[k] + 1 - lo[k] : 0);
  }
  return st;
}

/* Views: per variadic buffer, the bytes [lo, hi) the valid long views
 * use; views of nulls and of the lead become empty, the others point into
 * the narrowed buffers; the sizes buffer receives the new sizes. */
static int resolve_views(struct copy_ctx* ctx, struct plan* p) {
  const int64_t nvar = p->src->n_buffers - 3, count = p->r + p->len;
  unsigned char* sizes = p->host[2];
  int64_t* hi = calloc((size_t)(nvar > 0 ? nvar : 1), sizeof(*hi));
  p->vlo = calloc((size_t)(nvar > 0 ? nvar : 1), sizeof(*p->vlo));
  if (hi == NULL || p->vlo == NULL) {
    free(hi);
    return CFAIL(ctx, ENOMEM, "out of memory");
  }
  for (int64_t v = 0; v < nvar; v++) p->vlo[v] = INT64_MAX;
  int st = 0;
  for (int64_t i = 0; st == 0 && i < count; i++) {
    unsigned char* view = p->host[1] + 16 * i;
    if (i < p->r || !host_bit(p->host[0], i)) {
      memset(view, 0, 16);
      continue;
    }
    int32_t n = (int32_t)adr__int_load(view, 4, 0), idx = (int32_t)adr__int_load(view, 4, 2);
    int64_t off = adr__int_load(view, 4, 3);
    if (n < 0) {
      st = CFAIL(ctx, EINVAL, "view %lld has negative length %d", (long long)(i - p->r), n);
    } else if (n > 12) {
      int64_t size = idx >= 0 && idx < nvar ? adr__int_load(sizes, 8, idx) : 0;
      if (idx < 0 || idx >= nvar || off < 0 || off > size - n)
        st =
            CFAIL(ctx, EINVAL, "view %lld: bytes [%lld, %lld) of variadic buffer %d are outside it",
                  (long long)(i - p->r), (long long)off, (long long)off + n, idx);
      else {
        if (off < p->vlo[idx]) p->vlo[idx] = off;
        if (off + n > hi[idx]) hi[idx] = off + n;
      }
    }
  }
  for (int64_t i = 0; st == 0 && i < count; i++) {
    unsigned char* view = p->host[1] + 16 * i;
    if ((int32_t)adr__int_load(view, 4, 0) <= 12) continue;
    int32_t idx = (int32_t)adr__int_load(view, 4, 2);
    adr__int_store(view, 4, 3, adr__int_load(view, 4, 3) - p->vlo[idx]);
  }
  for (int64_t v = 0; st == 0 && v < nvar; v++) {
    if (hi[v] == 0) p->vlo[v] = 0;
    adr__int_store(sizes, 8, v, hi[v] - p->vlo[v]);
  }
  free(hi);
  return st;
}

/* Run-end: the runs [p0, p0 + runs) the slice touches; the run ends child
 * becomes a host-built node of those ends minus start (the last clamped to
 * len), the values child takes the same runs. */
static int resolve_run_end(struct copy_ctx* ctx, struct plan* p) {
  const struct ArrowArray* s = p->src;
  struct plan* e = &p->children[0];
  size_t mark = adr__path_push_child(&ctx->path, 0);
  int st = plan_node(ctx, e, p->schema->children[0], s->children[0], 0, 0);
  adr__path_pop(&ctx->path, mark);
  if (st) return st;
  const int w = e->f.bit_width / 8;
  int64_t n =
      s->children[0]->length < p->start + p->len ? s->children[0]->length : p->start + p->len;
  int64_t p0 = 0, runs = 0;
  if (p->len > 0) {
    while (p0 < n && adr__int_load(p->scratch, w, p0) <= p->start) p0++;
    int64_t p1 = p0;
    while (p1 < n && adr__int_load(p->scratch, w, p1) < p->start + p->len) p1++;
    if (p1 >= n)
      return CFAIL(ctx, EINVAL, "run ends do not reach element %lld",
                   (long long)(p->start + p->len - 1));
    runs = p1 - p0 + 1;
  }
  e->start = s->children[0]->offset + p0;
  e->len = runs;
  e->r = 0;
  int64_t sz[3] = {0, runs * w, 0};
  st = host_blocks(ctx, e, sz);
  for (int64_t k = 0; st == 0 && k < runs; k++) {
    int64_t end = adr__int_load(p->scratch, w, p0 + k) - p->start;
    adr__int_store(e->host[1], w, k, end < p->len ? end : p->len);
  }
  if (st == 0) st = plan_child(ctx, p, 1, s->children[1]->offset + p0, runs);
  return st;
}

static int resolve(struct copy_ctx* ctx, struct plan* p) {
  ctx->path = p->path;
  if (ctx->whole) {
    if (p->f.layout != ADR_LAYOUT_VAR_BINARY || p->scratch == NULL) return 0;
    p->first = adr__int_load(p->scratch, p->f.offset_bytes, 0);
    p->last = adr__int_load(p->scratch + 8, p->f.offset_bytes, 0);
    if (p->first < 0 || p->last < p->first)
      return CFAIL(ctx, EINVAL, "offsets [%lld, %lld] of the copied range are not monotonic",
                   (long long)p->first, (long long)p->last);
    if (p->last > p->first && p->src->buffers[2] == NULL)
      return CFAIL(ctx, EINVAL, "data buffer is NULL but offsets reference %lld bytes",
                   (long long)(p->last - p->first));
    return 0;
  }
  switch (p->f.layout) {
    case ADR_LAYOUT_VAR_BINARY:
      return resolve_var_binary(ctx, p);
    case ADR_LAYOUT_LIST:
      return resolve_list(ctx, p);
    case ADR_LAYOUT_LIST_VIEW:
      return resolve_list_view(ctx, p);
    case ADR_LAYOUT_DENSE_UNION:
      return resolve_dense_union(ctx, p);
    case ADR_LAYOUT_BINARY_VIEW:
      return resolve_views(ctx, p);
    case ADR_LAYOUT_RUN_END:
      return resolve_run_end(ctx, p);
    default:
      return 0;
  }
}

static int host_sync_stream(struct copy_ctx* ctx, struct adr_stream* s) {
  ctx->stats.host_syncs++;
  return adr_stream_synchronize(s, ctx->error);
}

/* Each round: one host wait for its reads (none when they were memcpy),
 * then its nodes resolved, whose children's reads form the next round.
 * Whole mode needs only the var-binary nodes resolved. */
static int plan_rounds(struct copy_ctx* ctx) {
  int st = 0;
  while (st == 0 && (ctx->pending != NULL || ctx->round_queued)) {
    if (ctx->round_queued) {
      ctx->stats.size_syncs++;
      st = host_sync_stream(ctx, ctx->read_stream);
      ctx->round_queued = false;
      ctx->src_ready = true;
      if (st) return st;
    }
    struct plan* list = ctx->pending;
    ctx->pending = NULL;
    for (struct plan* p = list; st == 0 && p != NULL; p = p->next_pending) st = resolve(ctx, p);
  }
  return st;
}

/* ---- copy: per layout, which bytes of each buffer cross --------------------- */

/* Allocates output buffer i of `size` bytes and copies n bytes from
 * src + src_off to its byte dst_off; nothing for 0 bytes (NULL buffer). */
static int copy_buffer(struct copy_ctx* ctx, struct ArrowArray* out, int64_t i, int64_t size,
                       const void* src, int64_t src_off, int64_t dst_off, int64_t n) {
  if (size <= 0) return 0;
  void* dst;
  int st = adr_array_alloc_buffer(out, i, (size_t)size, ctx->alloc_stream, &dst, ctx->error);
  if (st) return st;
  ctx->stats.bytes_allocated += size;
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

/* Output buffer i from host[k]: adopted (CPU destination) or uploaded
 * from `block`, which the node keeps (plan_copy). */
static int emit_host(struct copy_ctx* ctx, struct plan* p, struct ArrowArray* out, int k,
                     int64_t i) {
  if (p->host[k] == NULL) return 0;
  int64_t n = p->host_size[k];
  ctx->stats.bytes += n;
  ctx->stats.bytes_allocated += n;
  if (ctx->dst_cpu) {
    int st = adr_array_adopt_buffer(out, i, p->host[k], (size_t)n, ctx->error);
    if (st == 0) p->host[k] = NULL;
    return st;
  }
  void* dst;
  int st = adr_array_alloc_buffer(out, i, (size_t)n, ctx->alloc_stream, &dst, ctx->error);
  if (st) return st;
  ctx->stats.copies++;
  return adr_copy(ctx->dst_dev, dst, ctx->host, p->host[k], (size_t)n, ctx->copy_stream,
                  ctx->error);
}

/* The rebased offsets of var-binary and lists (host[1]), or the source's
 * as they are when they need no rebasing (host[1] NULL). */
static int copy_offsets(struct copy_ctx* ctx, struct plan* p, struct ArrowArray* out, int64_t from,
                        int64_t count) {
  if (p->host[1] != NULL) return emit_host(ctx, p, out, 1, 1);
  return copy_elements(ctx, out, 1, p->src->buffers[1], from, count + 1, 8 * p->f.offset_bytes);
}

/* Fixed width and bool: validity and values of the range (run ends of a
 * sliced run-end node: built on the host). */
static int copy_fixed(struct copy_ctx* ctx, struct plan* p, struct ArrowArray* out, int64_t from,
                      int64_t count) {
  const struct ArrowArray* s = p->src;
  if (p->host[1] != NULL) return emit_host(ctx, p, out, 1, 1);
  int st = copy_elements(ctx, out, 0, s->buffers[0], from, count, 1);
  if (st == 0) st = copy_elements(ctx, out, 1, s->buffers[1], from, count, p->f.bit_width);
  return st;
}

/* Var-binary and utf8 (and large): validity, the rebased offsets, data
 * [first, last). Whole mode: offsets as they are, data [0, last). */
static int copy_var_binary(struct copy_ctx* ctx, struct plan* p, struct ArrowArray* out,
                           int64_t from, int64_t count) {
  const struct ArrowArray* s = p->src;
  int st = copy_elements(ctx, out, 0, s->buffers[0], from, count, 1);
  if (st) return st;
  if (ctx->whole) {
    if (s->buffers[1] == NULL) return 0;
    st = copy_elements(ctx, out, 1, s->buffers[1], from, count + 1, 8 * p->f.offset_bytes);
    if (st == 0) st = copy_buffer(ctx, out, 2, p->last, s->buffers[2], 0, 0, p->last);
    return st;
  }
  if (p->keep_offsets) {
    st = copy_elements(ctx, out, 1, s->buffers[1], from, count + 1, 8 * p->f.offset_bytes);
    if (st == 0)
      st = copy_buffer(ctx, out, 2, p->last, s->buffers[2], p->first, p->first, p->last - p->first);
    return st;
  }
  st = copy_offsets(ctx, p, out, from, count);
  if (st == 0)
    st = copy_buffer(ctx, out, 2, p->last - p->first, s->buffers[2], p->first, 0,
                     p->last - p->first);
  return st;
}

/* Binary and string views: validity and views of the range (rewritten on
 * the host), the used bytes of each variadic buffer, the new sizes.
 * Whole mode: every variadic buffer whole, by the sizes read before. */
static int copy_views(struct copy_ctx* ctx, struct plan* p, struct ArrowArray* out, int64_t from,
                      int64_t count) {
  const struct ArrowArray* s = p->src;
  const int64_t nvar = s->n_buffers - 3;
  int st;
  if (ctx->whole) {
    st = copy_elements(ctx, out, 0, s->buffers[0], from, count, 1);
    if (st == 0) st = copy_elements(ctx, out, 1, s->buffers[1], from, count, 128);
  } else {
    st = emit_host(ctx, p, out, 0, 0);
    if (st == 0) st = emit_host(ctx, p, out, 1, 1);
  }
  for (int64_t v = 0; st == 0 && v < nvar; v++) {
    int64_t size = adr__int_load(ctx->whole ? p->scratch : p->host[2], 8, v);
    int64_t lo = ctx->whole ? 0 : p->vlo[v];
    if (size < 0)
      return CFAIL(ctx, EINVAL, "variadic buffer %lld has negative size %lld", (long long)v,
                   (long long)size);
    if (size > 0 && s->buffers[2 + v] == NULL)
      return CFAIL(ctx, EINVAL, "variadic buffer %lld is NULL but has size %lld", (long long)v,
                   (long long)size);
    st = copy_buffer(ctx, out, 2 + v, size, s->buffers[2 + v], lo, 0, size);
  }
  if (st) return st;
  if (!ctx->whole) return emit_host(ctx, p, out, 2, s->n_buffers - 1);
  return copy_buffer(ctx, out, s->n_buffers - 1, nvar * 8, s->buffers[s->n_buffers - 1], 0, 0,
                     nvar * 8);
}

/* List, large list, map: validity and the rebased offsets (whole mode:
 * as they are, the child whole). */
static int copy_list(struct copy_ctx* ctx, struct plan* p, struct ArrowArray* out, int64_t from,
                     int64_t count) {
  const struct ArrowArray* s = p->src;
  int st = copy_elements(ctx, out, 0, s->buffers[0], from, count, 1);
  if (st) return st;
  if (!ctx->whole && !p->keep_offsets) return copy_offsets(ctx, p, out, from, count);
  if (s->buffers[1] != NULL)
    st = copy_elements(ctx, out, 1, s->buffers[1], from, count + 1, 8 * p->f.offset_bytes);
  return st;
}

/* List views (and large): validity, offsets and sizes of the range
 * (rewritten on the host outside whole mode). */
static int copy_list_view(struct copy_ctx* ctx, struct plan* p, struct ArrowArray* out,
                          int64_t from, int64_t count) {
  const struct ArrowArray* s = p->src;
  if (!ctx->whole) {
    int st = emit_host(ctx, p, out, 0, 0);
    if (st == 0) st = emit_host(ctx, p, out, 1, 1);
    if (st == 0) st = emit_host(ctx, p, out, 2, 2);
    return st;
  }
  const int64_t bits = 8 * p->f.offset_bytes;
  int st = copy_elements(ctx, out, 0, s->buffers[0], from, count, 1);
  if (st == 0) st = copy_elements(ctx, out, 1, s->buffers[1], from, count, bits);
  if (st == 0) st = copy_elements(ctx, out, 2, s->buffers[2], from, count, bits);
  return st;
}

/* Sparse and dense unions: type ids (and dense offsets, rebased per child
 * outside whole mode) of the range. */
static int copy_union(struct copy_ctx* ctx, struct plan* p, struct ArrowArray* out, int64_t from,
                      int64_t count) {
  const struct ArrowArray* s = p->src;
  if (p->f.layout == ADR_LAYOUT_DENSE_UNION && !ctx->whole) {
    int st = emit_host(ctx, p, out, 0, 0);
    return st == 0 ? emit_host(ctx, p, out, 1, 1) : st;
  }
  int st = copy_elements(ctx, out, 0, s->buffers[0], from, count, 8);
  if (st == 0 && p->f.layout == ADR_LAYOUT_DENSE_UNION)
    st = copy_elements(ctx, out, 1, s->buffers[1], from, count, 32);
  return st;
}

static int copy_layout(struct copy_ctx* ctx, struct plan* p, struct ArrowArray* out) {
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

static int plan_copy(struct copy_ctx* ctx, struct plan* p, struct ArrowArray* out) {
  const struct ArrowArray* s = p->src;
  int st = adr_array_init(ctx->dst_dev, s->n_buffers, s->n_children, out, ctx->error);
  if (st) return st;
  out->length = p->len;
  out->offset = p->r;
  bool same = p->start == s->offset && p->len == s->length;
  out->null_count = same || s->null_count == 0 ? s->null_count : -1;
  /* No validity buffer means every element is valid (docs/arrays.md), so a
   * null_count of -1 (unknown) becomes the 0 it stands for; so does an
   * empty node's, and run ends built on the host have no nulls. */
  if ((adr__has_validity(p->f.layout) && s->buffers[0] == NULL) || p->len == 0 ||
      (p->f.layout == ADR_LAYOUT_FIXED && p->host[1] != NULL))
    out->null_count = 0;
  st = copy_layout(ctx, p, out);
  if (p->block != NULL) { /* uploads from it may be queued: the node keeps it */
    adr__array_node_keep(out, p->block);
    p->block = NULL;
  }
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

/* Arguments, the source's structure and devices, before anything is read. */
static int deep_copy_check(struct copy_ctx* ctx, const struct ArrowSchema* schema,
                           const struct ArrowDeviceArray* src, struct adr_device* dst_device,
                           struct adr_stream* stream, const struct ArrowDeviceArray* out,
                           const struct adr_copy_stats* stats) {
  const char* op = ctx->op;
  struct adr_error* error = ctx->error;
  if (stats != NULL && stats->struct_size == 0)
    return adr__errorf(error, EINVAL, op, NULL, "out_stats->struct_size is not set");
  if (src == NULL || out == NULL)
    return adr__errorf(error, EINVAL, op, NULL, "%s is NULL", src == NULL ? "src" : "out");
  if (!adr__device_type_known(src->device_type))
    return adr__path_error(error, EINVAL, op, &ctx->path, "unknown device_type %d",
                           (int)src->device_type);
  int st = adr__validate_structure(op, schema, &src->array, &ctx->path, 0, error);
  if (st) return st;
  ctx->src_cpu = src->device_type == ARROW_DEVICE_CPU;
  /* A CPU source is host memory, unless the caller ordered the copy on a
   * stream of the CPU device (loaded already), which then keeps that role. */
  if (!ctx->src_cpu)
    st = adr__array_device(src->device_type, src->device_id, &ctx->src_dev, error);
  else if (stream != NULL && adr_device_type(adr_stream_device(stream)) == ARROW_DEVICE_CPU &&
           adr_stream_device(stream) != dst_device)
    ctx->src_dev = adr_stream_device(stream);
  if (st) return st;
  ctx->dst_dev = dst_device;
  if (stream != NULL && adr_device_type(adr_stream_device(stream)) == ARROW_DEVICE_CPU)
    ctx->host = adr_stream_device(stream);
  ctx->dst_cpu = dst_device == NULL || adr_device_type(dst_device) == ARROW_DEVICE_CPU;
  if (stream != NULL &&
      (adr_stream_device(stream) == NULL ||
       (adr_stream_device(stream) != dst_device && adr_stream_device(stream) != ctx->src_dev)))
    return adr__errorf(error, EINVAL, op, NULL, "stream belongs to %s, neither %s nor %s",
                       adr_device_name(adr_stream_device(stream)), adr__array_dev_name(dst_device),
                       adr__array_dev_name(ctx->src_dev));
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
    bool known = adr_device_info_get(ctx->src_dev, &info, NULL) == 0;
    ctx->direct = known && (info.caps & ADR_CAP_HOST_ACCESSIBLE) != 0;
    ctx->sync_downloads = known && (info.caps & ADR_CAP_SYNC_DOWNLOADS) != 0;
  }
}

/* Nothing is read before the producer's event: a host-readable source to
 * the CPU waits for it on the host, otherwise the read stream waits on it
 * (device-side) before the first round. *src_event receives the import. */
static int deep_copy_src_event(struct copy_ctx* ctx, const struct ArrowDeviceArray* src,
                               struct adr_event** src_event) {
  if (src->sync_event == NULL) return 0;
  int st = adr_event_import(ctx->src_dev, src->sync_event, src_event, ctx->error);
  if (st) return st;
  if (ctx->direct) {
    ctx->stats.host_syncs++;
    ctx->src_ready = true;
    return adr_event_synchronize(*src_event, ctx->error);
  }
  return adr_stream_wait_event(ctx->read_stream, *src_event, ctx->error);
}

/* Before the copies: the copy stream is ordered after the source's event
 * unless a round's host wait already covered it. */
static int deep_copy_order_copies(struct copy_ctx* ctx, struct adr_event* src_event) {
  if (src_event == NULL || ctx->src_ready || ctx->copy_stream == ctx->read_stream) return 0;
  if (adr_stream_device(ctx->copy_stream) == ctx->src_dev)
    return adr_stream_wait_event(ctx->copy_stream, src_event, ctx->error);
  ctx->stats.host_syncs++;
  return adr_event_synchronize(src_event, ctx->error);
}

/* A source device whose downloads to host memory complete inside adr_copy
 * (ADR_CAP_SYNC_DOWNLOADS: Vulkan) leaves a -> CPU copy complete once
 * queued. */
static bool downloads_complete(const struct copy_ctx* ctx) {
  return ctx->dst_cpu && ctx->sync_downloads && adr_stream_device(ctx->copy_stream) == ctx->src_dev;
}

/* After the copies were queued (st: how that went): with the caller's
 * stream on a device destination, an event recorded after them (*done,
 * *native) and no wait; otherwise one host wait (none when the copies are
 * complete already). On failure queued copies drain before their memory
 * goes. */
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
  if (st == 0 && complete && !drained && !downloads_complete(ctx))
    st = host_sync_stream(ctx, ctx->copy_stream);
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
  st = deep_copy_src_event(&ctx, src, &src_event);
  if (st == 0 && !whole) st = plan_dictionaries(&ctx, schema, &src->array);
  if (st == 0)
    st = plan_node(&ctx, &root, schema, &src->array, src->array.offset, src->array.length);
  if (st == 0) st = plan_rounds(&ctx);
  adr__path_root(&ctx.path);
  if (st == 0) st = deep_copy_order_copies(&ctx, src_event);
  if (st == 0) st = plan_copy(&ctx, &root, &result);
  struct adr_event* done;
  void* native;
  st = deep_copy_finish(&ctx, st, stream, &done, &native);
  if (src_event != NULL) adr_event_destroy(src_event, NULL);
  plan_free(&ctx, &root);
  for (size_t i = 0; i < ctx.n_dicts; i++) { /* those never reached (on failure) */
    plan_free(&ctx, ctx.dicts[i].plan);
    free(ctx.dicts[i].plan);
  }
  free(ctx.dicts);
  if (st != 0) {
    if (result.release != NULL) result.release(&result);
    return st;
  }
  if (done != NULL) adr__array_node_set_event(&result, done);
  memset(out, 0, sizeof(*out));
  out->array = result;
  out->device_type = dst_device != NULL ? adr_device_type(dst_device) : ARROW_DEVICE_CPU;
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
