/* SPDX-License-Identifier: Apache-2.0
 *
 * The message-level reader: schema and dictionaries of one stream, and the
 * assembly of batches whose buffers point into a received body.
 *
 * An assembled tree is made of nodes allocated one by one (so any node may
 * be moved out and released on its own) that share an `ipc_tree`: a count
 * of live nodes and references to the bodies the tree points into (its own
 * body, the bodies of the dictionaries it uses, the small allocations that
 * hold view arrays' variadic sizes). The last node released drops the
 * references; the last reference to a body frees it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ipc_internal.h"

/* ---- body recycler ---------------------------------------------------------- */

/* One cached host body (docs/ipc.md, "Reading"): a block of 64 header bytes
 * (its capacity) then the body. Thread-safe: batches are released on any
 * thread. */
struct adr__ipc_recycler {
  atomic_long refs;
  pthread_mutex_t mu;
  void* slot; /* a body, or NULL */
};

#define RECYCLE_HEADER 64

static size_t body_capacity(const void* body) {
  size_t cap;
  memcpy(&cap, (const uint8_t*)body - RECYCLE_HEADER, sizeof(cap));
  return cap;
}

static void body_block_free(void* body) {
  if (body != NULL) free((uint8_t*)body - RECYCLE_HEADER);
}

int adr__ipc_recycler_new(struct adr__ipc_recycler** out) {
  struct adr__ipc_recycler* r = calloc(1, sizeof(*r));
  if (r == NULL) return ENOMEM;
  if (pthread_mutex_init(&r->mu, NULL) != 0) {
    free(r);
    return ENOMEM;
  }
  atomic_init(&r->refs, 1);
  *out = r;
  return 0;
}

static void recycler_ref(struct adr__ipc_recycler* r) {
  atomic_fetch_add(&r->refs, 1);
}

void adr__ipc_recycler_unref(struct adr__ipc_recycler* r) {
  if (r == NULL || atomic_fetch_sub(&r->refs, 1) != 1) return;
  body_block_free(r->slot);
  pthread_mutex_destroy(&r->mu);
  free(r);
}

void* adr__ipc_recycler_get(struct adr__ipc_recycler* r, size_t size) {
  void* old = NULL;
  pthread_mutex_lock(&r->mu);
  if (r->slot != NULL) {
    size_t cap = body_capacity(r->slot);
    if (cap >= size && cap - size <= size + ((size_t)1 << 20)) {
      void* b = r->slot;
      r->slot = NULL;
      pthread_mutex_unlock(&r->mu);
      return b;
    }
    old = r->slot;
    r->slot = NULL;
  }
  pthread_mutex_unlock(&r->mu);
  body_block_free(old);
  /* Room for a slightly larger next body: an eighth more, whole pages. */
  if (size > SIZE_MAX / 2) return NULL;
  size_t cap = (size + size / 8 + 4095) & ~(size_t)4095;
  void* block = NULL;
  if (posix_memalign(&block, 64, RECYCLE_HEADER + cap) != 0) return NULL;
  memcpy(block, &cap, sizeof(cap));
  return (uint8_t*)block + RECYCLE_HEADER;
}

void adr__ipc_recycler_put(struct adr__ipc_recycler* r, void* body) {
  if (body == NULL) return;
  pthread_mutex_lock(&r->mu);
  void* drop = body;
  if (r->slot == NULL) {
    r->slot = body;
    drop = NULL;
  } else if (body_capacity(body) > body_capacity(r->slot)) {
    drop = r->slot; /* keep the larger */
    r->slot = body;
  }
  pthread_mutex_unlock(&r->mu);
  body_block_free(drop);
}

/* ---- bodies ----------------------------------------------------------------- */

struct ipc_body {
  atomic_long refs;
  struct adr_device* dev;        /* NULL: host memory, free() */
  struct adr__ipc_recycler* rec; /* host body of a recycler: back to it */
  void* ptr;
  size_t size;
};

static struct ipc_body* body_new(struct adr_device* dev, struct adr__ipc_recycler* rec, void* ptr,
                                 size_t size) {
  struct ipc_body* b = malloc(sizeof(*b));
  if (b == NULL) return NULL;
  atomic_init(&b->refs, 1);
  b->dev = dev;
  b->rec = rec;
  if (rec != NULL) recycler_ref(rec);
  b->ptr = ptr;
  b->size = size;
  return b;
}

static void free_mem(struct adr_device* dev, void* ptr, size_t size) {
  if (ptr == NULL) return;
  if (dev == NULL)
    free(ptr);
  else
    adr_free(dev, ptr, size, NULL, NULL);
}

static void body_unref(struct ipc_body* b) {
  if (b == NULL) return;
  if (atomic_fetch_sub(&b->refs, 1) != 1) return;
  if (b->rec != NULL) {
    adr__ipc_recycler_put(b->rec, b->ptr);
    adr__ipc_recycler_unref(b->rec);
  } else {
    free_mem(b->dev, b->ptr, b->size);
  }
  free(b);
}

/* A tree's nodes come from an arena in the tree's own allocation (one
 * allocation per tree, not four per node): a node released before the
 * others leaves its bytes there, and the last node released frees the
 * tree and the arena with it. Nodes that do not fit (and those of a tree
 * made without an arena) are allocated on their own. */
struct ipc_tree {
  atomic_long nodes;
  int64_t n_bodies, cap_bodies;
  struct ipc_body** bodies;
  struct ipc_body* body_slots[4]; /* `bodies` until more are needed */
  size_t arena_used, arena_cap;
  _Alignas(16) unsigned char arena[];
};

/* A tree with `arena` bytes for its nodes; its node count starts at 1,
 * held by the caller (tree_unref). */
static struct ipc_tree* tree_new(size_t arena) {
  struct ipc_tree* t = malloc(sizeof(*t) + arena);
  if (t == NULL) return NULL;
  memset(t, 0, sizeof(*t));
  atomic_init(&t->nodes, 1);
  t->arena_cap = arena;
  return t;
}

static void tree_unref(struct ipc_tree* t) {
  if (atomic_fetch_sub(&t->nodes, 1) != 1) return;
  for (int64_t i = 0; i < t->n_bodies; i++) body_unref(t->bodies[i]);
  if (t->bodies != t->body_slots) free(t->bodies);
  free(t);
}

static int tree_add_body(struct ipc_tree* t, struct ipc_body* b) {
  if (t->cap_bodies == 0) {
    t->bodies = t->body_slots;
    t->cap_bodies = (int64_t)(sizeof(t->body_slots) / sizeof(t->body_slots[0]));
  }
  if (t->n_bodies == t->cap_bodies) {
    int64_t cap = 2 * t->cap_bodies;
    struct ipc_body** n = malloc((size_t)cap * sizeof(*n));
    if (n == NULL) return ENOMEM;
    memcpy(n, t->bodies, (size_t)t->n_bodies * sizeof(*n));
    if (t->bodies != t->body_slots) free(t->bodies);
    t->bodies = n;
    t->cap_bodies = cap;
  }
  atomic_fetch_add(&b->refs, 1);
  t->bodies[t->n_bodies++] = b;
  return 0;
}

/* A node's private part, its buffer pointers, child pointers and children
 * in one block. */
struct anode {
  struct ipc_tree* tree;
  bool in_arena;
  struct ArrowArray dictionary;
  _Alignas(16) unsigned char tail[];
};

static void anode_release(struct ArrowArray* a) {
  if (a == NULL || a->release == NULL) return;
  struct anode* p = a->private_data;
  struct ArrowArray* children = (struct ArrowArray*)p->tail;
  for (int64_t i = 0; i < a->n_children; i++)
    if (children[i].release != NULL) children[i].release(&children[i]);
  if (p->dictionary.release != NULL) p->dictionary.release(&p->dictionary);
  struct ipc_tree* t = p->tree;
  if (!p->in_arena) free(p);
  a->release = NULL;
  a->private_data = NULL;
  tree_unref(t);
}

/* A node with n_buffers NULL buffers and n_children released children. */
static int anode_init(struct ipc_tree* t, struct ArrowArray* out, int64_t n_buffers,
                      int64_t n_children) {
  if (n_buffers < 0 || n_children < 0 || n_buffers > (1 << 20) || n_children > (1 << 20))
    return ENOMEM;
  size_t nb = (size_t)n_buffers, nc = (size_t)n_children;
  size_t kids = nc * sizeof(struct ArrowArray);
  size_t size = sizeof(struct anode) + kids + nc * sizeof(void*) + nb * sizeof(void*);
  size = (size + 15) & ~(size_t)15;
  struct anode* p;
  if (t->arena_cap - t->arena_used >= size) {
    p = (struct anode*)(t->arena + t->arena_used);
    t->arena_used += size;
    memset(p, 0, size);
    p->in_arena = true;
  } else {
    p = calloc(1, size);
    if (p == NULL) return ENOMEM;
  }
  struct ArrowArray* children = (struct ArrowArray*)p->tail;
  struct ArrowArray** child_ptrs = (struct ArrowArray**)(p->tail + kids);
  const void** buffers = (const void**)(child_ptrs + nc);
  for (size_t i = 0; i < nc; i++) child_ptrs[i] = &children[i];
  p->tree = t;
  atomic_fetch_add(&t->nodes, 1);
  memset(out, 0, sizeof(*out));
  out->n_buffers = n_buffers;
  out->n_children = n_children;
  out->buffers = buffers;
  out->children = child_ptrs;
  out->release = anode_release;
  out->private_data = p;
  return 0;
}

/* ---- the reader ----------------------------------------------------------- */

struct dict_entry {
  int64_t id;
  bool present;
  /* The dictionary batch's layout, kept to assemble it in every batch. */
  struct ipc_decoded_priv layout;
  int64_t n_buffers;
  int64_t length;
  struct ipc_body* body;
  uint8_t* base;
};

struct adr_ipc_reader {
  struct adr_device* device;
  /* Host readers of adr_ipc_read_stream: where bodies come from and go. */
  struct adr__ipc_recycler* rec;
  bool validate_full;
  bool has_schema;
  struct ArrowSchema schema;
  int64_t n_dicts;
  int64_t* dict_ids;
  const struct ArrowSchema** dict_fields; /* depth-first order */
  struct dict_entry* dicts;
};

int adr_ipc_reader_create(struct adr_device* device, const struct adr_ipc_reader_options* options,
                          struct adr_ipc_reader** out, struct adr_error* error) {
  const char* op = "adr_ipc_reader_create";
  if (out == NULL) return adr__errorf(error, EINVAL, op, NULL, "out is NULL");
  if (options != NULL && options->struct_size < offsetof(struct adr_ipc_reader_options, reserved8))
    return adr__errorf(error, EINVAL, op, NULL, "options->struct_size %u too small",
                       (unsigned)options->struct_size);
  struct adr_ipc_reader* r = calloc(1, sizeof(*r));
  if (r == NULL) return adr__errorf(error, ENOMEM, op, NULL, "out of memory");
  r->device = device;
  r->validate_full = options ? options->validate_full : true;
  if (device == NULL && options != NULL && options->recycle_bodies &&
      adr__ipc_recycler_new(&r->rec) != 0) {
    free(r);
    return adr__errorf(error, ENOMEM, op, NULL, "out of memory");
  }
  *out = r;
  return 0;
}

static void dict_clear(struct dict_entry* d) {
  free(d->layout.nodes);
  free(d->layout.buffers);
  free(d->layout.variadic);
  body_unref(d->body);
  memset(&d->layout, 0, sizeof(d->layout));
  d->body = NULL;
  d->present = false;
}

void adr_ipc_reader_destroy(struct adr_ipc_reader* reader) {
  if (reader == NULL) return;
  for (int64_t i = 0; i < reader->n_dicts; i++) dict_clear(&reader->dicts[i]);
  free(reader->dicts);
  free(reader->dict_ids);
  free(reader->dict_fields);
  if (reader->has_schema) reader->schema.release(&reader->schema);
  adr__ipc_recycler_unref(reader->rec);
  free(reader);
}

void adr__ipc_reader_set_recycler(struct adr_ipc_reader* reader, struct adr__ipc_recycler* rec) {
  recycler_ref(rec);
  adr__ipc_recycler_unref(reader->rec);
  reader->rec = rec;
}

/* Frees a body the reader was given (or made). */
static void reader_free_body(const struct adr_ipc_reader* r, struct adr_device* dev, void* body,
                             size_t size) {
  if (r != NULL && r->rec != NULL && dev == NULL)
    adr__ipc_recycler_put(r->rec, body);
  else
    free_mem(dev, body, size);
}

int adr_ipc_reader_alloc_body(struct adr_ipc_reader* reader, const struct adr_ipc_decoded* message,
                              void** out, struct adr_error* error) {
  const char* op = "adr_ipc_reader_alloc_body";
  if (out == NULL) return adr__errorf(error, EINVAL, op, NULL, "out is NULL");
  *out = NULL;
  if (reader == NULL || message == NULL || message->body_alloc_size < 0)
    return adr__errorf(error, EINVAL, op, NULL, "reader or message is NULL");
  if (message->body_size == 0) return 0;
  size_t size = (size_t)message->body_alloc_size;
  void* body = NULL;
  if (reader->device != NULL) {
    struct adr_error err;
    int st = adr_alloc(reader->device, size, 64, NULL, &body, &err);
    if (st) return adr__errorf(error, st, op, NULL, "a %zu-byte body: %s", size, err.message);
  } else if (reader->rec != NULL) {
    body = adr__ipc_recycler_get(reader->rec, size);
  } else if (posix_memalign(&body, 64, size) != 0) {
    body = NULL;
  }
  if (body == NULL)
    return adr__errorf(error, ENOMEM, op, NULL, "out of memory for a %zu-byte body", size);
  *out = body;
  return 0;
}

void adr_ipc_reader_free_body(struct adr_ipc_reader* reader, const struct adr_ipc_decoded* message,
                              void* body) {
  if (reader == NULL || message == NULL || body == NULL) return;
  reader_free_body(reader, reader->device, body, (size_t)message->body_alloc_size);
}

const struct ArrowSchema* adr_ipc_reader_schema(const struct adr_ipc_reader* reader) {
  return reader != NULL && reader->has_schema ? &reader->schema : NULL;
}

struct adr_device* adr_ipc_reader_device(const struct adr_ipc_reader* reader) {
  return reader != NULL ? reader->device : NULL;
}

static void collect_dicts(const struct ArrowSchema* s, const struct ArrowSchema** out, int64_t* n,
                          int depth) {
  if (depth > ADR_IPC_MAX_DEPTH) return;
  const struct ArrowSchema* v = s;
  if (s->dictionary != NULL) {
    out[(*n)++] = s;
    v = s->dictionary;
  }
  for (int64_t i = 0; i < v->n_children; i++) collect_dicts(v->children[i], out, n, depth + 1);
}

int adr_ipc_reader_set_schema(struct adr_ipc_reader* reader, const struct adr_ipc_decoded* message,
                              struct adr_error* error) {
  const char* op = "adr_ipc_reader_set_schema";
  if (reader == NULL) return adr__errorf(error, EINVAL, op, NULL, "reader is NULL");
  if (reader->has_schema) return adr__errorf(error, EINVAL, op, NULL, "schema already set");
  int64_t* ids = NULL;
  int64_t n = 0;
  int st = adr__ipc_schema_decode(message, op, &reader->schema, &ids, &n, error);
  if (st) return st;
  reader->dict_fields = calloc((size_t)(n ? n : 1), sizeof(*reader->dict_fields));
  reader->dicts = calloc((size_t)(n ? n : 1), sizeof(*reader->dicts));
  if (reader->dict_fields == NULL || reader->dicts == NULL) {
    free(ids);
    free(reader->dict_fields);
    free(reader->dicts);
    reader->dict_fields = NULL;
    reader->dicts = NULL;
    reader->schema.release(&reader->schema);
    return adr__errorf(error, ENOMEM, op, NULL, "out of memory");
  }
  int64_t k = 0;
  for (int64_t i = 0; i < reader->schema.n_children; i++)
    collect_dicts(reader->schema.children[i], reader->dict_fields, &k, 1);
  for (int64_t i = 0; i < n; i++) {
    reader->dicts[i].id = ids[i];
    for (int64_t j = 0; j < i; j++)
      if (ids[j] == ids[i]) {
        int64_t dup = ids[i];
        free(ids);
        free(reader->dict_fields);
        free(reader->dicts);
        reader->dict_fields = NULL;
        reader->dicts = NULL;
        reader->schema.release(&reader->schema);
        return adr__errorf(error, EINVAL, op, NULL,
                           "message %lld (schema): dictionary id %lld used by two fields",
                           (long long)message->message_index, (long long)dup);
      }
  }
  reader->dict_ids = ids;
  reader->n_dicts = n;
  reader->has_schema = true;
  return 0;
}

/* ---- assembly ------------------------------------------------------------- */

struct asmb {
  struct adr_ipc_reader* reader;
  struct ipc_tree* tree;
  const struct ipc_decoded_priv* lay;
  int64_t n_buffers;
  const uint8_t* base;
  const uint8_t* zeros;
  int64_t ni, bi, vi;
  struct ipc_where w;
  struct adr_error* error;
};

#define AFAIL(A, st, ...) adr__ipc_fail((A)->error, (st), &(A)->w, __VA_ARGS__)

static int take_node(struct asmb* A, struct ipc_node* out) {
  if (A->ni >= A->lay->n_nodes)
    return AFAIL(A, EINVAL, "the batch has %lld field nodes, fewer than the schema needs",
                 (long long)A->lay->n_nodes);
  *out = A->lay->nodes[A->ni++];
  return 0;
}

/* Buffer `what` of the node, at least `need` bytes; *out is its address
 * (the zeroed area when it is empty). */
static int take_buffer(struct asmb* A, const char* what, int64_t need, const void** out,
                       int64_t* out_len) {
  if (A->bi >= A->n_buffers)
    return AFAIL(A, EINVAL, "the batch has %lld buffers, fewer than the schema needs",
                 (long long)A->n_buffers);
  struct adr_ipc_buffer_layout b = A->lay->buffers[A->bi++];
  if (need < 0 || b.length < need)
    return AFAIL(A, EINVAL, "%s buffer (buffer %lld) has %lld bytes, %lld needed", what,
                 (long long)(A->bi - 1), (long long)b.length, (long long)need);
  *out = b.length > 0 ? A->base + b.offset : A->zeros;
  if (out_len) *out_len = b.length;
  return 0;
}

/* ceil(n * bits / 8) with overflow reported as -1. */
static int64_t bytes_for(int64_t n, int64_t bits) {
  int64_t r;
  if (__builtin_mul_overflow(n, bits, &r) || r > INT64_MAX - 7) return -1;
  return (r + 7) / 8;
}

static int dict_index(struct adr_ipc_reader* r, const struct ArrowSchema* s) {
  for (int64_t k = 0; k < r->n_dicts; k++)
    if (r->dict_fields[k] == s) return (int)k;
  return -1;
}

static int build(struct asmb* A, const struct ArrowSchema* s, struct ArrowArray* out,
                 bool dict_values, int depth);

/* The data validation knows no buffer sizes: the last offset of a
 * var-binary node must be within its data buffer before anything reads
 * the strings (the validator then checks the offsets are monotonic from a
 * non-negative first one). Read from the device only when the batch is to
 * be validated fully. */
static int check_last_offset(struct asmb* A, const void* offsets, int w, int64_t len,
                             int64_t data_len) {
  struct adr_device* dev = A->reader->device;
  if (dev != NULL && !A->reader->validate_full) return 0;
  const uint8_t* at = (const uint8_t*)offsets + (size_t)len * (size_t)w;
  uint8_t raw[8] = {0};
  if (dev == NULL) {
    memcpy(raw, at, (size_t)w);
  } else {
    struct adr_error err;
    int st = adr_copy(NULL, raw, dev, at, (size_t)w, NULL, &err);
    if (st) return AFAIL(A, st, "reading the last offset: %s", err.message);
  }
  int64_t last;
  if (w == 4) {
    int32_t v;
    memcpy(&v, raw, 4);
    last = v;
  } else {
    memcpy(&last, raw, 8);
  }
  if (last < 0 || last > data_len)
    return AFAIL(A, EINVAL, "last offset %lld outside the data buffer of %lld bytes",
                 (long long)last, (long long)data_len);
  return 0;
}

static int build_dictionary(struct asmb* A, const struct ArrowSchema* s, struct ArrowArray* out,
                            int depth) {
  int k = dict_index(A->reader, s);
  struct dict_entry* d = k >= 0 ? &A->reader->dicts[k] : NULL;
  if (d == NULL || !d->present)
    return AFAIL(A, EINVAL, "dictionary id %lld has not been sent", d ? (long long)d->id : -1LL);
  struct asmb B = *A;
  B.lay = &d->layout;
  B.n_buffers = d->n_buffers;
  B.base = d->base;
  B.zeros = d->base + (d->body->size - 64);
  B.ni = B.bi = B.vi = 0;
  if (tree_add_body(A->tree, d->body)) return AFAIL(A, ENOMEM, "out of memory");
  return build(&B, s, out, true, depth + 1);
}

static int build(struct asmb* A, const struct ArrowSchema* s, struct ArrowArray* out,
                 bool dict_values, int depth) {
  if (depth > ADR_IPC_MAX_DEPTH)
    return AFAIL(A, EINVAL, "nested deeper than %d levels", ADR_IPC_MAX_DEPTH);
  const struct ArrowSchema* vs = dict_values ? s->dictionary : s;
  const char* fs = vs->format;
  struct adr_format f;
  struct adr_error ferr;
  if (adr_format_parse(fs, &f, &ferr) != 0) return AFAIL(A, EINVAL, "bad format \"%s\"", fs);
  struct ipc_node n = {0, 0};
  int st = take_node(A, &n);
  if (st) return st;
  int64_t nb = f.layout == ADR_LAYOUT_BINARY_VIEW ? 3 : f.n_buffers;
  int64_t nv = 0;
  if (f.layout == ADR_LAYOUT_BINARY_VIEW) {
    if (A->vi >= A->lay->n_variadic)
      return AFAIL(A, EINVAL, "variadicBufferCounts has no entry for this view field");
    nv = A->lay->variadic[A->vi++];
    nb += nv;
  }
  int64_t nc = (f.layout == ADR_LAYOUT_FIXED || f.layout == ADR_LAYOUT_VAR_BINARY ||
                f.layout == ADR_LAYOUT_BINARY_VIEW || f.layout == ADR_LAYOUT_NULL)
                   ? 0
                   : vs->n_children;
  if (anode_init(A->tree, out, nb, nc)) return AFAIL(A, ENOMEM, "out of memory");
  out->length = n.length;
  out->null_count = n.null_count;
  const void** bufs = (const void**)out->buffers;
  int64_t len = n.length;
  bool has_validity = f.layout == ADR_LAYOUT_FIXED || f.layout == ADR_LAYOUT_VAR_BINARY ||
                      f.layout == ADR_LAYOUT_BINARY_VIEW || f.layout == ADR_LAYOUT_LIST ||
                      f.layout == ADR_LAYOUT_LIST_VIEW || f.layout == ADR_LAYOUT_FIXED_LIST ||
                      f.layout == ADR_LAYOUT_STRUCT;
  if (has_validity) {
    st = take_buffer(A, "validity", n.null_count > 0 ? bytes_for(len, 1) : 0, &bufs[0], NULL);
    if (st) return st;
    if (n.null_count == 0) bufs[0] = NULL;
  } else if (f.layout == ADR_LAYOUT_NULL) {
    out->null_count = len;
  } else if (n.null_count != 0) {
    return AFAIL(A, EINVAL, "null count %lld for a %s field (must be 0)", (long long)n.null_count,
                 adr_type_name(f.type));
  }
  if (A->lay->version == IPC_VERSION_V4 &&
      (f.layout == ADR_LAYOUT_SPARSE_UNION || f.layout == ADR_LAYOUT_DENSE_UNION))
    return AFAIL(A, ENOTSUP,
                 "unions of metadata version V4 (with a validity buffer) are not "
                 "supported");
  int w = f.offset_bytes;
  switch (f.layout) {
    case ADR_LAYOUT_NULL:
      break;
    case ADR_LAYOUT_FIXED:
      st = take_buffer(A, "data", bytes_for(len, f.bit_width), &bufs[1], NULL);
      break;
    case ADR_LAYOUT_VAR_BINARY: {
      int64_t data_len = 0;
      st = take_buffer(A, "offsets", len ? bytes_for(len + 1, 8 * w) : 0, &bufs[1], NULL);
      if (st == 0) st = take_buffer(A, "data", 0, &bufs[2], &data_len);
      if (st == 0 && len > 0) st = check_last_offset(A, bufs[1], w, len, data_len);
      break;
    }
    case ADR_LAYOUT_BINARY_VIEW: {
      st = take_buffer(A, "views", bytes_for(len, 128), &bufs[1], NULL);
      int64_t* sizes = NULL;
      if (st == 0 && nv > 0) {
        sizes = calloc((size_t)nv, 8);
        if (sizes == NULL) st = AFAIL(A, ENOMEM, "out of memory");
      }
      for (int64_t i = 0; st == 0 && i < nv; i++)
        st = take_buffer(A, "variadic data", 0, &bufs[2 + i], &sizes[i]);
      if (st == 0) {
        /* The C interface's extra buffer: the variadic sizes, on the device. */
        struct adr_device* dev = A->reader->device;
        void* mem = NULL;
        size_t sz = (size_t)(nv ? nv : 1) * 8;
        struct adr_error err;
        if (dev == NULL) {
          mem = malloc(sz);
          if (mem == NULL)
            st = AFAIL(A, ENOMEM, "out of memory");
          else if (nv)
            memcpy(mem, sizes, (size_t)nv * 8);
        } else {
          st = adr_alloc(dev, sz, 64, NULL, &mem, &err);
          if (st == 0 && nv) st = adr_copy(dev, mem, NULL, sizes, (size_t)nv * 8, NULL, &err);
          if (st) {
            if (mem) adr_free(dev, mem, sz, NULL, NULL);
            mem = NULL;
            st = AFAIL(A, st, "view sizes: %s", err.message);
          }
        }
        if (st == 0) {
          struct ipc_body* b = body_new(dev, NULL, mem, sz);
          if (b == NULL || tree_add_body(A->tree, b)) {
            if (b != NULL)
              body_unref(b);
            else
              free_mem(dev, mem, sz);
            st = AFAIL(A, ENOMEM, "out of memory");
          } else {
            body_unref(b); /* the tree holds it */
            bufs[2 + nv] = mem;
          }
        }
      }
      free(sizes);
      break;
    }
    case ADR_LAYOUT_LIST:
      st = take_buffer(A, "offsets", len ? bytes_for(len + 1, 8 * w) : 0, &bufs[1], NULL);
      break;
    case ADR_LAYOUT_LIST_VIEW:
      st = take_buffer(A, "offsets", bytes_for(len, 8 * w), &bufs[1], NULL);
      if (st == 0) st = take_buffer(A, "sizes", bytes_for(len, 8 * w), &bufs[2], NULL);
      break;
    case ADR_LAYOUT_SPARSE_UNION:
      st = take_buffer(A, "type ids", len, &bufs[0], NULL);
      break;
    case ADR_LAYOUT_DENSE_UNION:
      st = take_buffer(A, "type ids", len, &bufs[0], NULL);
      if (st == 0) st = take_buffer(A, "offsets", bytes_for(len, 32), &bufs[1], NULL);
      break;
    case ADR_LAYOUT_FIXED_LIST:
    case ADR_LAYOUT_STRUCT:
    case ADR_LAYOUT_RUN_END:
      break;
  }
  for (int64_t i = 0; st == 0 && i < nc; i++) {
    size_t mark = adr__ipc_path_push(&A->w.path, vs->children[i]->name, i);
    st = build(A, vs->children[i], out->children[i], false, depth + 1);
    adr__path_pop(&A->w.path, mark);
  }
  if (st == 0 && !dict_values && s->dictionary != NULL) {
    struct anode* p = out->private_data;
    out->dictionary = &p->dictionary;
    size_t mark = adr__ipc_path_push(&A->w.path, "<dictionary>", 0);
    st = build_dictionary(A, s, out->dictionary, depth);
    adr__path_pop(&A->w.path, mark);
  }
  return st;
}

/* Takes the body over: zeroes the tail and wraps it in an ipc_body. */
static int own_body(struct adr_ipc_reader* r, const struct adr_ipc_decoded* m, void* body,
                    struct ipc_where* w, struct ipc_body** out, struct adr_error* error) {
  size_t alloc = (size_t)m->body_alloc_size;
  struct adr_error err;
  int st = 0;
  if (body == NULL) {
    if (m->body_size != 0) return adr__ipc_fail(error, EINVAL, w, "body is NULL");
    if (r->device == NULL && r->rec != NULL) {
      body = adr__ipc_recycler_get(r->rec, alloc);
      if (body == NULL) return adr__ipc_fail(error, ENOMEM, w, "out of memory");
    } else if (r->device == NULL) {
      body = aligned_alloc(64, alloc);
      if (body == NULL) return adr__ipc_fail(error, ENOMEM, w, "out of memory");
    } else {
      st = adr_alloc(r->device, alloc, 64, NULL, &body, &err);
      if (st) return adr__ipc_fail(error, st, w, "body: %s", err.message);
    }
  }
  size_t tail = alloc - 64;
  if (r->device == NULL) {
    memset((uint8_t*)body + m->body_size, 0, alloc - (size_t)m->body_size);
  } else {
    st = adr_memset(r->device, (uint8_t*)body + tail, 0, 64, NULL, &err);
    if (st) {
      reader_free_body(r, r->device, body, alloc);
      return adr__ipc_fail(error, st, w, "zeroing the body's tail: %s", err.message);
    }
  }
  *out = body_new(r->device, r->device == NULL ? r->rec : NULL, body, alloc);
  if (*out == NULL) {
    reader_free_body(r, r->device, body, alloc);
    return adr__ipc_fail(error, ENOMEM, w, "out of memory");
  }
  return 0;
}

static int finish_check(struct asmb* A) {
  if (A->ni != A->lay->n_nodes || A->bi != A->n_buffers || A->vi != A->lay->n_variadic)
    return AFAIL(A, EINVAL,
                 "the batch has %lld field nodes, %lld buffers and %lld variadic counts; the "
                 "schema uses %lld, %lld and %lld",
                 (long long)A->lay->n_nodes, (long long)A->n_buffers, (long long)A->lay->n_variadic,
                 (long long)A->ni, (long long)A->bi, (long long)A->vi);
  return 0;
}

/* Validates a tree against its schema (structure, then data if asked). */
static int check_tree(struct asmb* A, const struct ArrowSchema* schema, struct ArrowArray* a) {
  struct adr__path path;
  adr__path_root(&path);
  struct adr_error err;
  int st = adr__validate_structure(A->w.op, schema, a, &path, 0, &err);
  if (st == 0 && A->reader->validate_full) {
    struct ArrowDeviceArray da;
    memset(&da, 0, sizeof(da));
    da.array = *a;
    struct adr_device* dev = A->reader->device;
    da.device_type = dev ? adr_device_type(dev) : ARROW_DEVICE_CPU;
    da.device_id = dev ? adr_device_id(dev) : -1;
    st = adr_device_array_validate(schema, &da, ADR_VALIDATE_FULL, &err);
  }
  if (st) {
    const char* msg = strchr(err.message, ']');
    return AFAIL(A, st, "invalid data: %s", msg ? msg + 2 : err.message);
  }
  return 0;
}

/* Copies the buffers of an encoded message into `body` (host memory of
 * the decoded message's body_size bytes) at their offsets, padding zeroed. */
static void gather_body(const struct adr_ipc_message* m, const struct adr_ipc_decoded* dec,
                        uint8_t* body) {
  memset(body, 0, (size_t)dec->body_size);
  for (int64_t i = 0; i < m->n_buffers; i++)
    if (m->buffers[i].size > 0)
      memcpy(body + m->buffers[i].body_offset, m->buffers[i].data, (size_t)m->buffers[i].size);
}

/* A delta DictionaryBatch (checked; `delta` assembled from it) appended to
 * dictionary k: the old values and the delta's are concatenated on the
 * host (device dictionaries are copied there first), encoded as one
 * replacement DictionaryBatch and consumed as such, so the new dictionary
 * is checked and stored like any other (docs/ipc.md, "Dictionaries").
 * Batches assembled before keep the old dictionary. */
static int apply_delta(struct asmb* A, int64_t k, const struct ArrowSchema* field,
                       const struct ArrowArray* delta) {
  struct adr_ipc_reader* r = A->reader;
  struct dict_entry* d = &r->dicts[k];
  struct adr_device* dev = r->device;
  struct adr_error err;
  struct ArrowArray old, cat;
  struct ArrowDeviceArray host[2];
  struct adr_ipc_message msg;
  struct adr_ipc_decoded dec;
  memset(&old, 0, sizeof(old));
  memset(&cat, 0, sizeof(cat));
  memset(host, 0, sizeof(host));
  memset(&msg, 0, sizeof(msg));
  memset(&dec, 0, sizeof(dec));
  const char* step = "assembling the dictionary";
  int st = 0;
  struct asmb B = *A;
  B.tree = tree_new(0);
  if (B.tree == NULL) return AFAIL(A, ENOMEM, "out of memory");
  B.lay = &d->layout;
  B.n_buffers = d->n_buffers;
  B.base = d->base;
  B.zeros = d->base + (d->body->size - 64);
  B.ni = B.bi = B.vi = 0;
  st = tree_add_body(B.tree, d->body) ? AFAIL(A, ENOMEM, "out of memory") : 0;
  if (st == 0) st = build(&B, field, &old, true, 1);
  tree_unref(B.tree);
  if (st) return st;

  const struct ArrowArray* parts[2] = {&old, delta};
  if (dev != NULL && adr_device_type(dev) != ARROW_DEVICE_CPU) {
    step = "copying the dictionary to the host";
    for (int i = 0; st == 0 && i < 2; i++) {
      struct ArrowDeviceArray src;
      memset(&src, 0, sizeof(src));
      src.array = *parts[i];
      src.device_type = adr_device_type(dev);
      src.device_id = adr_device_id(dev);
      st = adr_device_array_deep_copy(field->dictionary, &src, NULL, NULL, &host[i], NULL, &err);
      parts[i] = &host[i].array;
    }
  }
  if (st == 0) {
    step = "concatenating";
    st = adr__array_concat_host(A->w.op, field->dictionary, parts, 2, &cat, &err);
  }
  if (st == 0) {
    step = "encoding the concatenation";
    st = adr__ipc_encode_dictionary_values(A->w.op, field, &cat, d->id, &msg, &err);
  }
  if (st == 0)
    st = adr_ipc_decode_message(msg.metadata + ADR_IPC_PREFIX_SIZE,
                                (size_t)(msg.metadata_size - ADR_IPC_PREFIX_SIZE), A->w.message,
                                &dec, &err);
  /* The body, from the reader's own allocator; a device body is staged
   * on the host and uploaded. */
  void* body = NULL;
  uint8_t* staged = NULL;
  if (st == 0) {
    step = "allocating the body";
    st = adr_ipc_reader_alloc_body(r, &dec, &body, &err);
  }
  if (st == 0 && body != NULL && dev == NULL) {
    gather_body(&msg, &dec, body);
  } else if (st == 0 && body != NULL) {
    step = "uploading the body";
    staged = malloc((size_t)dec.body_size);
    st = staged ? 0 : ENOMEM;
    if (st) snprintf(err.message, sizeof(err.message), "out of memory");
    if (st == 0) gather_body(&msg, &dec, staged);
    if (st == 0) st = adr_copy(dev, body, NULL, staged, (size_t)dec.body_size, NULL, &err);
    free(staged);
  }
  if (st != 0 && body != NULL) {
    adr_ipc_reader_free_body(r, &dec, body);
    body = NULL;
  }
  if (old.release) old.release(&old);
  if (cat.release) cat.release(&cat);
  for (int i = 0; i < 2; i++) adr_device_array_release(&host[i]);
  adr_ipc_message_release(&msg);
  if (st == 0) {
    /* The reader takes the body on success and on failure. */
    st = adr_ipc_reader_consume(r, &dec, body, NULL, &err);
    step = "storing the concatenation";
  }
  adr_ipc_decoded_release(&dec);
  if (st) return AFAIL(A, st, "delta dictionary: %s: %s", step, err.message);
  return 0;
}

int adr_ipc_reader_consume(struct adr_ipc_reader* reader, const struct adr_ipc_decoded* message,
                           void* body, struct ArrowDeviceArray* out_batch,
                           struct adr_error* error) {
  struct asmb A;
  memset(&A, 0, sizeof(A));
  A.w.op = "adr_ipc_reader_consume";
  A.w.message = message ? message->message_index : -1;
  A.w.type = message ? message->type : ADR_IPC_MESSAGE_END;
  adr__path_root(&A.w.path);
  A.error = error;
  A.reader = reader;
  if (out_batch != NULL) memset(out_batch, 0, sizeof(*out_batch));
  struct adr_device* dev = reader ? reader->device : NULL;
  if (reader == NULL || message == NULL || message->private_data == NULL ||
      (message->type != ADR_IPC_MESSAGE_RECORD_BATCH &&
       message->type != ADR_IPC_MESSAGE_DICTIONARY_BATCH) ||
      !reader->has_schema) {
    if (body && message) reader_free_body(reader, dev, body, (size_t)message->body_alloc_size);
    return AFAIL(&A, EINVAL, "%s",
                 reader == NULL || message == NULL ? "reader or message is NULL"
                 : !reader->has_schema             ? "no schema has been set"
                                                   : "not a batch message");
  }
  struct ipc_body* b = NULL;
  int st = own_body(reader, message, body, &A.w, &b, error);
  if (st) return st;
  A.lay = message->private_data;
  A.n_buffers = message->n_buffers;
  A.base = b->ptr;
  A.zeros = (const uint8_t*)b->ptr + (b->size - 64);

  if (message->type == ADR_IPC_MESSAGE_DICTIONARY_BATCH) {
    int64_t k = -1;
    for (int64_t i = 0; i < reader->n_dicts; i++)
      if (reader->dict_ids[i] == message->dictionary_id) k = i;
    if (k < 0) {
      body_unref(b);
      return AFAIL(&A, EINVAL, "dictionary id %lld is not in the schema",
                   (long long)message->dictionary_id);
    }
    if (message->is_delta && !reader->dicts[k].present) {
      body_unref(b);
      return AFAIL(&A, EINVAL, "delta for dictionary id %lld, which has not been sent",
                   (long long)message->dictionary_id);
    }
    const struct ArrowSchema* field = reader->dict_fields[k];
    char label[48];
    snprintf(label, sizeof(label), "<dictionary %lld>", (long long)message->dictionary_id);
    adr__ipc_path_push(&A.w.path, label, 0);
    A.tree = tree_new(0); /* its one node count held by this function */
    if (A.tree == NULL) {
      body_unref(b);
      return AFAIL(&A, ENOMEM, "out of memory");
    }
    struct ArrowArray tmp;
    memset(&tmp, 0, sizeof(tmp));
    st = tree_add_body(A.tree, b) ? AFAIL(&A, ENOMEM, "out of memory") : 0;
    if (st == 0) st = build(&A, field, &tmp, true, 1);
    if (st == 0) st = finish_check(&A);
    if (st == 0 && tmp.length != message->length)
      st = AFAIL(&A, EINVAL, "dictionary length %lld differs from the batch's %lld",
                 (long long)tmp.length, (long long)message->length);
    if (st == 0) st = check_tree(&A, field->dictionary, &tmp);
    if (st == 0 && message->is_delta) st = apply_delta(&A, k, field, &tmp);
    if (tmp.release) tmp.release(&tmp);
    tree_unref(A.tree);
    if (message->is_delta) {
      body_unref(b);
      return st;
    }
    if (st == 0) {
      struct dict_entry* d = &reader->dicts[k];
      struct ipc_decoded_priv lay = {0};
      const struct ipc_decoded_priv* src = message->private_data;
      lay.version = src->version;
      lay.n_nodes = src->n_nodes;
      lay.n_variadic = src->n_variadic;
      lay.nodes = malloc((size_t)(src->n_nodes + 1) * sizeof(*lay.nodes));
      lay.buffers = malloc((size_t)(message->n_buffers + 1) * sizeof(*lay.buffers));
      lay.variadic = malloc((size_t)(src->n_variadic + 1) * sizeof(*lay.variadic));
      if (lay.nodes == NULL || lay.buffers == NULL || lay.variadic == NULL) {
        free(lay.nodes);
        free(lay.buffers);
        free(lay.variadic);
        body_unref(b);
        return AFAIL(&A, ENOMEM, "out of memory");
      }
      if (src->n_nodes > 0)
        memcpy(lay.nodes, src->nodes, (size_t)src->n_nodes * sizeof(*lay.nodes));
      if (message->n_buffers > 0)
        memcpy(lay.buffers, src->buffers, (size_t)message->n_buffers * sizeof(*lay.buffers));
      if (src->n_variadic > 0)
        memcpy(lay.variadic, src->variadic, (size_t)src->n_variadic * sizeof(*lay.variadic));
      dict_clear(d);
      d->layout = lay;
      d->n_buffers = message->n_buffers;
      d->length = message->length;
      d->body = b;
      d->base = b->ptr;
      d->present = true;
      return 0;
    }
    body_unref(b);
    return st;
  }

  /* Record batch. */
  const struct ArrowSchema* schema = &reader->schema;
  /* Room for the root and, typically, every node of the batch (a node: its
   * private part, three buffers and its place in its parent). */
  const struct ipc_decoded_priv* lay = message->private_data;
  size_t arena = sizeof(struct anode) +
                 (size_t)schema->n_children * (sizeof(struct ArrowArray) + 8) + 8 +
                 (size_t)(lay->n_nodes < 4096 ? lay->n_nodes : 4096) *
                     (sizeof(struct anode) + sizeof(struct ArrowArray) + 48);
  A.tree = tree_new(arena);
  if (A.tree == NULL) {
    body_unref(b);
    return AFAIL(&A, ENOMEM, "out of memory");
  }
  st = tree_add_body(A.tree, b) ? AFAIL(&A, ENOMEM, "out of memory") : 0;
  body_unref(b); /* the tree holds it (or it is gone) */
  struct ArrowArray root;
  memset(&root, 0, sizeof(root));
  if (st == 0 && anode_init(A.tree, &root, 1, schema->n_children))
    st = AFAIL(&A, ENOMEM, "out of memory");
  if (st == 0) root.length = message->length;
  for (int64_t i = 0; st == 0 && i < schema->n_children; i++) {
    size_t mark = adr__ipc_path_push(&A.w.path, schema->children[i]->name, i);
    st = build(&A, schema->children[i], root.children[i], false, 1);
    if (st == 0 && root.children[i]->length != message->length)
      st = AFAIL(&A, EINVAL, "column length %lld differs from the batch's %lld",
                 (long long)root.children[i]->length, (long long)message->length);
    adr__path_pop(&A.w.path, mark);
  }
  if (st == 0) st = finish_check(&A);
  if (st == 0) st = check_tree(&A, schema, &root);
  tree_unref(A.tree);
  if (st != 0) {
    if (root.release) root.release(&root);
    return st;
  }
  if (out_batch == NULL) {
    root.release(&root);
    return 0;
  }
  out_batch->array = root;
  out_batch->device_type = dev ? adr_device_type(dev) : ARROW_DEVICE_CPU;
  out_batch->device_id = dev ? adr_device_id(dev) : -1;
  out_batch->sync_event = NULL;
  return 0;
}
