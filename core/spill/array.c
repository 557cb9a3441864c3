/* SPDX-License-Identifier: Apache-2.0
 *
 * Spill arrays: Arrow array trees whose buffers are spillable buffers
 * (public API: adr/spill.h; docs/spill.md, "Arrays on spillable buffers").
 *
 * A table keeps the shape of its tree (lengths, offsets, null counts,
 * children, dictionaries) in plain nodes and its buffers in one flat list
 * of spillable buffers; each node maps its buffer slots to indices in that
 * list. Every ArrowDeviceArray handed out (acquire, export) is built fresh
 * from the shape with adr_array_init and adr_array_set_buffer, so its own
 * release frees only node memory, never a spillable buffer: those are
 * freed once, when the last reference to the table goes (the caller's,
 * dropped by adr_spill_array_destroy, and one per array handed out).
 *
 * The copy: adr_device_array_deep_copy narrows slices and rebases offsets,
 * into host memory for a host source (the data-dependent buffer sizes,
 * var-binary and view data, are then read in place) and onto the manager's
 * device for a device source (the sizes read with 4- or 8-byte downloads),
 * so a device source never goes through host memory. Each buffer is then
 * copied into its spillable buffer (an upload, or a device copy).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "adr/array.h"
#include "adr/memory.h"
#include "adr/spill.h"
#include "internal.h"
#include "spill_internal.h"

struct node {
  int64_t length, offset, null_count, n_buffers, n_children;
  int64_t* index; /* per buffer slot: index in the table's list, -1 for NULL */
  struct node* children;
  struct node* dictionary;
};

struct adr_spill_array {
  atomic_uint refs;
  struct adr_spill_manager* mgr;
  struct node root;
  struct adr_spill_slice** bufs; /* one slice per buffer: shared by slices of the table */
  size_t n_bufs, cap;
};

/* What an acquire or an export hands out: the adr-owned tree it wraps,
 * and the table it keeps alive. */
struct view {
  struct ArrowArray inner;
  struct adr_spill_array* table;
  bool locked; /* acquired: the release drops one spill lock per buffer */
};

static void node_free(struct node* n) {
  if (n == NULL) return;
  if (n->children != NULL)
    for (int64_t i = 0; i < n->n_children; i++) node_free(&n->children[i]);
  free(n->children);
  if (n->dictionary != NULL) {
    node_free(n->dictionary);
    free(n->dictionary);
  }
  free(n->index);
}

static int table_free(struct adr_spill_array* t, struct adr_error* error) {
  int first = 0;
  for (size_t i = 0; i < t->n_bufs; i++) {
    int st = adr_spill_slice_free(t->bufs[i], first ? NULL : error);
    if (st != 0 && first == 0) first = st;
  }
  free(t->bufs);
  node_free(&t->root);
  free(t);
  return first;
}

static int table_unref(struct adr_spill_array* t, struct adr_error* error) {
  if (atomic_fetch_sub(&t->refs, 1) != 1) return 0;
  return table_free(t, error);
}

/* ---- building ------------------------------------------------------------ */

/* Copies one buffer (in host memory, where == NULL, or on the manager's
 * device) into a new spillable buffer of the table. */
static int add_buffer(struct adr_spill_array* t, struct adr_device* where, const void* src,
                      size_t size, int64_t* out_index, struct adr_error* error) {
  static const char* op = "adr_spill_array_deep_copy";
  if (t->n_bufs == t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 16;
    struct adr_spill_slice** b = realloc(t->bufs, cap * sizeof(*b));
    if (b == NULL) return adr__errorf(error, ENOMEM, op, NULL, "ENOMEM: out of host memory");
    t->bufs = b;
    t->cap = cap;
  }
  struct adr_spill_slice* b = NULL;
  /* A zero-byte buffer still needs an address (an empty string column's
   * data); spillable buffers have at least one byte. */
  int st = adr_spill_slice_alloc(t->mgr, size ? size : 1, &b, error);
  if (st) return st;
  void* d = NULL;
  st = adr_spill_slice_acquire(b, ADR_SPILL_ACCESS_WRITE, NULL, &d, error);
  if (st == 0) {
    if (size > 0) st = adr_copy(adr_spill_manager_device(t->mgr), d, where, src, size, NULL, error);
    int st2 = adr_spill_slice_release(b, NULL, st ? NULL : error);
    if (st == 0) st = st2;
  }
  if (st) {
    adr_spill_slice_free(b, NULL);
    return st;
  }
  *out_index = (int64_t)t->n_bufs;
  t->bufs[t->n_bufs++] = b;
  return 0;
}

/* Reads n bytes at src (host memory, or `where`'s memory) into dst. */
static int read_at(struct adr_device* where, void* dst, const void* src, size_t n,
                   struct adr_error* error) {
  if (where == NULL) {
    memcpy(dst, src, n);
    return 0;
  }
  return adr_copy(NULL, dst, where, src, n, NULL, error);
}

/* Copies the shape of a node of the narrowed deep copy (in host memory,
 * where == NULL, or on the manager's device) into n and its buffers into
 * spillable buffers. */
static int build(struct adr_spill_array* t, struct adr_device* where,
                 const struct ArrowSchema* schema, const struct ArrowArray* a, struct node* n,
                 int depth, struct adr_error* error) {
  static const char* op = "adr_spill_array_deep_copy";
  if (depth > 64) return adr__errorf(error, EINVAL, op, NULL, "nesting deeper than 64");
  struct adr_format f;
  int st = adr_format_parse(schema->format, &f, error);
  if (st) return st;
  n->length = a->length;
  n->offset = a->offset;
  n->null_count = a->null_count;
  n->n_buffers = a->n_buffers;
  n->n_children = a->n_children;
  n->index = calloc((size_t)a->n_buffers + 1, sizeof(int64_t));
  n->children = calloc((size_t)a->n_children + 1, sizeof(struct node));
  int64_t* sizes = calloc((size_t)a->n_buffers + 1, sizeof(int64_t));
  if (n->index == NULL || n->children == NULL || sizes == NULL) {
    free(sizes);
    return adr__errorf(error, ENOMEM, op, NULL, "ENOMEM: out of host memory");
  }
  st = adr_format_buffer_sizes(&f, a->offset, a->length, a->n_buffers, sizes, error);
  for (int64_t i = 0; st == 0 && i < a->n_buffers; i++) {
    n->index[i] = -1;
    if (a->buffers[i] == NULL) continue;
    int64_t size = sizes[i];
    if (size == ADR_BUFFER_SIZE_DATA_DEPENDENT) {
      size = 0;
      if (f.layout == ADR_LAYOUT_VAR_BINARY) {
        const char* offs = a->buffers[1];
        int64_t end = a->offset + a->length;
        if (offs != NULL && f.offset_bytes == 4) {
          int32_t v = 0;
          st = read_at(where, &v, offs + 4 * end, 4, error);
          size = v;
        } else if (offs != NULL) {
          st = read_at(where, &size, offs + 8 * end, 8, error);
        }
      } else {
        /* A view's variadic data buffer: its size is in the last buffer. */
        const int64_t* vs = (const int64_t*)a->buffers[a->n_buffers - 1];
        if (vs != NULL) st = read_at(where, &size, vs + (i - 2), 8, error);
      }
    }
    if (st != 0)
      break;
    else if (size < 0)
      st = adr__errorf(error, EINVAL, op, NULL, "buffer %" PRId64 " has a negative size", i);
    else
      st = add_buffer(t, where, a->buffers[i], (size_t)size, &n->index[i], error);
  }
  free(sizes);
  for (int64_t i = 0; st == 0 && i < a->n_children; i++)
    st = build(t, where, schema->children[i], a->children[i], &n->children[i], depth + 1, error);
  if (st == 0 && a->dictionary != NULL) {
    n->dictionary = calloc(1, sizeof(struct node));
    if (n->dictionary == NULL)
      return adr__errorf(error, ENOMEM, op, NULL, "ENOMEM: out of host memory");
    st = build(t, where, schema->dictionary, a->dictionary, n->dictionary, depth + 1, error);
  }
  return st;
}

int adr_spill_array_deep_copy(struct adr_spill_manager* manager, const struct ArrowSchema* schema,
                              const struct ArrowDeviceArray* src, struct adr_spill_array** out,
                              struct adr_error* error) {
  static const char* op = "adr_spill_array_deep_copy";
  if (manager == NULL || schema == NULL || src == NULL || out == NULL)
    return adr__errorf(error, EINVAL, op, NULL, "%s is NULL",
                       !manager  ? "manager"
                       : !schema ? "schema"
                       : !src    ? "src"
                                 : "out");
  /* A host source is narrowed in host memory and uploaded; a device
   * source is narrowed onto the manager's device (device to device, peer
   * copies between devices) and copied from there on the device, never
   * through host memory. */
  struct adr_device* where =
      src->device_type == ARROW_DEVICE_CPU ? NULL : adr_spill_manager_device(manager);
  struct ArrowDeviceArray host;
  memset(&host, 0, sizeof(host));
  int st = adr_device_array_deep_copy(schema, src, where, NULL, &host, NULL, error);
  if (st) return st;
  struct adr_spill_array* t = calloc(1, sizeof(*t));
  if (t == NULL) {
    adr_device_array_release(&host);
    return adr__errorf(error, ENOMEM, op, NULL, "ENOMEM: out of host memory");
  }
  atomic_init(&t->refs, 1);
  t->mgr = manager;
  st = build(t, where, schema, &host.array, &t->root, 0, error);
  adr_device_array_release(&host);
  if (st) {
    table_free(t, NULL);
    return st;
  }
  *out = t;
  return 0;
}

int adr_spill_array_destroy(struct adr_spill_array* array, struct adr_error* error) {
  if (array == NULL) return 0;
  return table_unref(array, error);
}

/* ---- slicing (copy-on-write) --------------------------------------------- */

static int node_clone(const struct node* src, struct node* dst) {
  *dst = *src;
  dst->index = NULL;
  dst->children = NULL;
  dst->dictionary = NULL;
  dst->index = malloc(((size_t)src->n_buffers + 1) * sizeof(int64_t));
  dst->children = calloc((size_t)src->n_children + 1, sizeof(struct node));
  if (dst->index == NULL || dst->children == NULL) return ENOMEM;
  memcpy(dst->index, src->index, (size_t)src->n_buffers * sizeof(int64_t));
  for (int64_t i = 0; i < src->n_children; i++)
    if (node_clone(&src->children[i], &dst->children[i]) != 0) return ENOMEM;
  if (src->dictionary != NULL) {
    dst->dictionary = calloc(1, sizeof(struct node));
    if (dst->dictionary == NULL || node_clone(src->dictionary, dst->dictionary) != 0) return ENOMEM;
  }
  return 0;
}

int adr_spill_array_slice(struct adr_spill_array* array, int64_t offset, int64_t length,
                          struct adr_spill_array** out, struct adr_error* error) {
  static const char* op = "adr_spill_array_slice";
  if (array == NULL || out == NULL)
    return adr__errorf(error, EINVAL, op, NULL, "%s is NULL", array ? "out" : "array");
  *out = NULL;
  if (offset < 0 || length < 0 || offset > array->root.length ||
      length > array->root.length - offset)
    return adr__errorf(error, EINVAL, op, NULL,
                       "rows [%" PRId64 ", +%" PRId64 ") are outside the table's %" PRId64, offset,
                       length, array->root.length);
  struct adr_spill_array* t = calloc(1, sizeof(*t));
  if (t == NULL) return adr__errorf(error, ENOMEM, op, NULL, "ENOMEM: out of host memory");
  atomic_init(&t->refs, 1);
  t->mgr = array->mgr;
  t->bufs = calloc(array->n_bufs + 1, sizeof(*t->bufs));
  t->cap = array->n_bufs + 1;
  int st = t->bufs == NULL || node_clone(&array->root, &t->root) != 0
               ? adr__errorf(error, ENOMEM, op, NULL, "ENOMEM: out of host memory")
               : 0;
  /* Shallow: every buffer shared (a physical copy where it was exposed). */
  for (size_t i = 0; st == 0 && i < array->n_bufs; i++) {
    struct adr_spill_slice* b = array->bufs[i];
    st = adr_spill_slice_view(b, 0, adr_spill_slice_size(b), NULL, &t->bufs[i], error);
    if (st == 0) t->n_bufs++;
  }
  if (st) {
    table_free(t, NULL);
    return st;
  }
  t->root.offset += offset;
  if (length != t->root.length || offset != 0) t->root.null_count = -1;
  t->root.length = length;
  *out = t;
  return 0;
}

int adr_spill_array_copy(struct adr_spill_array* array, struct adr_spill_manager* manager,
                         struct adr_spill_array** out, struct adr_error* error) {
  static const char* op = "adr_spill_array_copy";
  if (array == NULL || manager == NULL || out == NULL)
    return adr__errorf(error, EINVAL, op, NULL, "%s is NULL",
                       !array     ? "array"
                       : !manager ? "manager"
                                  : "out");
  *out = NULL;
  struct adr_spill_array* t = calloc(1, sizeof(*t));
  if (t == NULL) return adr__errorf(error, ENOMEM, op, NULL, "ENOMEM: out of host memory");
  atomic_init(&t->refs, 1);
  t->mgr = manager;
  t->bufs = calloc(array->n_bufs + 1, sizeof(*t->bufs));
  t->cap = array->n_bufs + 1;
  int st = t->bufs == NULL || node_clone(&array->root, &t->root) != 0
               ? adr__errorf(error, ENOMEM, op, NULL, "ENOMEM: out of host memory")
               : 0;
  struct adr_device* dev = adr_spill_manager_device(manager);
  for (size_t i = 0; st == 0 && i < array->n_bufs; i++) {
    struct adr_spill_slice* b = NULL;
    st = adr_spill_slice_alloc(manager, adr_spill_slice_size(array->bufs[i]), &b, error);
    if (st) break;
    t->bufs[t->n_bufs++] = b;
    void* d = NULL;
    st = adr_spill_slice_acquire(b, ADR_SPILL_ACCESS_WRITE, NULL, &d, error);
    if (st) break;
    /* From where the bytes are: the device, or the host copy of a spilled
     * buffer (uploaded straight to the target, never unspilled first). */
    st = adr__spill_slice_copy_out(array->bufs[i], dev, d, error);
    int st2 = adr_spill_slice_release(b, NULL, st ? NULL : error);
    if (st == 0) st = st2;
  }
  if (st) {
    table_free(t, NULL);
    return st;
  }
  *out = t;
  return 0;
}

/* ---- moving -------------------------------------------------------------- */

int adr_spill_array_spill(struct adr_spill_array* array, uint64_t* out_spilled,
                          struct adr_error* error) {
  if (out_spilled != NULL) *out_spilled = 0;
  if (array == NULL)
    return adr__errorf(error, EINVAL, "adr_spill_array_spill", NULL, "array is NULL");
  int first = 0;
  uint64_t total = 0;
  for (size_t i = 0; i < array->n_bufs; i++) {
    uint64_t moved = 0;
    int st = adr__spill_buffer_spill(adr_spill_slice_buffer(array->bufs[i]), &moved,
                                     first ? NULL : error);
    if (st != 0 && first == 0) first = st;
    total += moved;
  }
  if (out_spilled != NULL) *out_spilled = total;
  return first;
}

int adr_spill_array_unspill(struct adr_spill_array* array, struct adr_error* error) {
  if (array == NULL)
    return adr__errorf(error, EINVAL, "adr_spill_array_unspill", NULL, "array is NULL");
  for (size_t i = 0; i < array->n_bufs; i++) {
    void* d = NULL;
    int st = adr_spill_slice_acquire(array->bufs[i], ADR_SPILL_ACCESS_READ, NULL, &d, error);
    if (st == 0) st = adr_spill_slice_release(array->bufs[i], NULL, error);
    if (st) return st;
  }
  return 0;
}

/* ---- handing out ArrowDeviceArrays ------------------------------------- */

static int build_view(const struct node* n, void* const* ptrs, struct adr_device* dev,
                      struct ArrowArray* out, struct adr_error* error) {
  int st = adr_array_init(dev, n->n_buffers, n->n_children, out, error);
  if (st) return st;
  out->length = n->length;
  out->offset = n->offset;
  out->null_count = n->null_count;
  for (int64_t i = 0; st == 0 && i < n->n_buffers; i++)
    if (n->index[i] >= 0) st = adr_array_set_buffer(out, i, ptrs[n->index[i]], error);
  for (int64_t i = 0; st == 0 && i < n->n_children; i++)
    st = build_view(&n->children[i], ptrs, dev, out->children[i], error);
  if (st == 0 && n->dictionary != NULL) {
    st = adr_array_alloc_dictionary(out, error);
    if (st == 0) st = build_view(n->dictionary, ptrs, dev, out->dictionary, error);
  }
  if (st) out->release(out);
  return st;
}

static void drop_locks(struct adr_spill_array* t, size_t count) {
  for (size_t i = 0; i < count; i++) adr_spill_slice_release(t->bufs[i], NULL, NULL);
}

static void view_release(struct ArrowArray* a) {
  struct view* v = a->private_data;
  v->inner.release(&v->inner);
  if (v->locked) drop_locks(v->table, v->table->n_bufs);
  table_unref(v->table, NULL);
  free(v);
  a->release = NULL;
}

/* Builds *out over ptrs and makes it hold a reference to the table. */
static int hand_out(struct adr_spill_array* t, void* const* ptrs, bool locked,
                    struct ArrowDeviceArray* out, struct adr_error* error) {
  static const char* op = "adr_spill_array";
  struct adr_device* dev = adr_spill_manager_device(t->mgr);
  struct view* v = calloc(1, sizeof(*v));
  if (v == NULL) return adr__errorf(error, ENOMEM, op, NULL, "ENOMEM: out of host memory");
  struct ArrowArray tree;
  struct ArrowDeviceArray d;
  int st = build_view(&t->root, ptrs, dev, &tree, error);
  if (st == 0) {
    st = adr_device_array_init(dev, &tree, NULL, &d, error);
    if (st) tree.release(&tree);
  }
  if (st) {
    free(v);
    return st;
  }
  atomic_fetch_add(&t->refs, 1);
  v->table = t;
  v->locked = locked;
  v->inner = d.array;
  *out = d;
  out->array.private_data = v;
  out->array.release = view_release;
  return 0;
}

int adr_spill_array_acquire(struct adr_spill_array* array, int mode, struct ArrowDeviceArray* out,
                            struct adr_error* error) {
  static const char* op = "adr_spill_array_acquire";
  if (array == NULL || out == NULL)
    return adr__errorf(error, EINVAL, op, NULL, "%s is NULL", array ? "out" : "array");
  void** ptrs = calloc(array->n_bufs + 1, sizeof(void*));
  if (ptrs == NULL) return adr__errorf(error, ENOMEM, op, NULL, "ENOMEM: out of host memory");
  size_t got = 0;
  int st = 0;
  for (; got < array->n_bufs; got++) {
    st = adr_spill_slice_acquire(array->bufs[got], mode, NULL, &ptrs[got], error);
    if (st) break;
  }
  if (st == 0) st = hand_out(array, ptrs, true, out, error);
  if (st) drop_locks(array, got);
  free(ptrs);
  return st;
}

int adr_spill_array_export(struct adr_spill_array* array, const char* reason,
                           struct ArrowDeviceArray* out, struct adr_error* error) {
  static const char* op = "adr_spill_array_export";
  if (array == NULL || out == NULL)
    return adr__errorf(error, EINVAL, op, NULL, "%s is NULL", array ? "out" : "array");
  void** ptrs = calloc(array->n_bufs + 1, sizeof(void*));
  if (ptrs == NULL) return adr__errorf(error, ENOMEM, op, NULL, "ENOMEM: out of host memory");
  int st = 0;
  for (size_t i = 0; st == 0 && i < array->n_bufs; i++)
    st = adr_spill_slice_expose(array->bufs[i], reason ? reason : op, &ptrs[i], error);
  if (st == 0) st = hand_out(array, ptrs, false, out, error);
  free(ptrs);
  return st;
}

size_t adr_spill_array_buffer_count(const struct adr_spill_array* array) {
  return array ? array->n_bufs : 0;
}

struct adr_spill_buffer* adr_spill_array_buffer(const struct adr_spill_array* array, size_t i) {
  return array != NULL && i < array->n_bufs ? adr_spill_slice_buffer(array->bufs[i]) : NULL;
}
