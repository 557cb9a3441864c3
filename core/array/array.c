/* SPDX-License-Identifier: Apache-2.0
 *
 * adr-owned schema and array nodes, export of device arrays (event in
 * sync_event, owned by the array), move, and consuming a producer's
 * sync_event.
 *
 * A node's private data records which buffers it owns and holds its
 * children's storage, so a release frees exactly what the node made.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "array_internal.h"

/* ---- schemas -------------------------------------------------------------- */

struct schema_priv {
  char* format;
  char* name;
  char* metadata;
  struct ArrowSchema** child_ptrs;
  struct ArrowSchema* children;
  struct ArrowSchema* dictionary;
};

static void schema_release(struct ArrowSchema* schema) {
  if (schema == NULL || schema->release == NULL) return;
  struct schema_priv* p = schema->private_data;
  for (int64_t i = 0; i < schema->n_children; i++) {
    struct ArrowSchema* c = schema->children[i];
    if (c != NULL && c->release != NULL) c->release(c);
  }
  if (schema->dictionary != NULL && schema->dictionary->release != NULL)
    schema->dictionary->release(schema->dictionary);
  free(p->format);
  free(p->name);
  free(p->metadata);
  free(p->child_ptrs);
  free(p->children);
  free(p->dictionary);
  free(p);
  schema->release = NULL;
  schema->private_data = NULL;
}

static char* dup_str(const char* s) {
  size_t n = strlen(s) + 1;
  char* d = malloc(n);
  if (d != NULL) memcpy(d, s, n);
  return d;
}

int adr_schema_init(struct ArrowSchema* out, const char* format, const char* name, int64_t flags,
                    int64_t n_children, struct adr_error* error) {
  const char* op = "adr_schema_init";
  if (out == NULL) return adr__errorf(error, EINVAL, op, NULL, "out is NULL");
  if (n_children < 0 || n_children > (1 << 20))
    return adr__errorf(error, EINVAL, op, NULL, "n_children %lld out of range",
                       (long long)n_children);
  struct adr_format f;
  int st = adr_format_parse(format, &f, error);
  if (st != 0) return st;
  struct schema_priv* p = calloc(1, sizeof(*p));
  if (p == NULL) return adr__errorf(error, ENOMEM, op, NULL, "out of memory");
  p->format = dup_str(format);
  p->name = name ? dup_str(name) : NULL;
  if (n_children > 0) {
    p->child_ptrs = calloc((size_t)n_children, sizeof(*p->child_ptrs));
    p->children = calloc((size_t)n_children, sizeof(*p->children));
  }
  if (p->format == NULL || (name != NULL && p->name == NULL) ||
      (n_children > 0 && (p->child_ptrs == NULL || p->children == NULL))) {
    free(p->format);
    free(p->name);
    free(p->child_ptrs);
    free(p->children);
    free(p);
    return adr__errorf(error, ENOMEM, op, NULL, "out of memory");
  }
  for (int64_t i = 0; i < n_children; i++) p->child_ptrs[i] = &p->children[i];
  memset(out, 0, sizeof(*out));
  out->format = p->format;
  out->name = p->name;
  out->flags = flags;
  out->n_children = n_children;
  out->children = p->child_ptrs;
  out->release = schema_release;
  out->private_data = p;
  return 0;
}

static int check_own_schema(const char* op, struct ArrowSchema* schema,
                            struct adr_error* error) {
  if (schema == NULL || schema->release != schema_release)
    return adr__errorf(error, EINVAL, op, NULL, "schema was not made by adr_schema_init");
  return 0;
}

int adr_schema_alloc_dictionary(struct ArrowSchema* schema, struct adr_error* error) {
  const char* op = "adr_schema_alloc_dictionary";
  int st = check_own_schema(op, schema, error);
  if (st) return st;
  struct schema_priv* p = schema->private_data;
  if (schema->dictionary != NULL)
    return adr__errorf(error, EINVAL, op, NULL, "schema already has a dictionary");
  p->dictionary = calloc(1, sizeof(*p->dictionary));
  if (p->dictionary == NULL) return adr__errorf(error, ENOMEM, op, NULL, "out of memory");
  schema->dictionary = p->dictionary;
  return 0;
}

/* Size of Arrow's binary metadata encoding, or -1 if malformed. */
static int64_t metadata_size(const char* m) {
  int32_t n;
  memcpy(&n, m, 4);
  if (n < 0) return -1;
  int64_t pos = 4;
  for (int64_t i = 0; i < 2 * (int64_t)n; i++) {
    int32_t len;
    memcpy(&len, m + pos, 4);
    if (len < 0) return -1;
    pos += 4 + (int64_t)len;
  }
  return pos;
}

int adr_schema_set_metadata(struct ArrowSchema* schema, const char* metadata,
                            struct adr_error* error) {
  const char* op = "adr_schema_set_metadata";
  int st = check_own_schema(op, schema, error);
  if (st) return st;
  struct schema_priv* p = schema->private_data;
  char* copy = NULL;
  if (metadata != NULL) {
    int64_t n = metadata_size(metadata);
    if (n < 0) return adr__errorf(error, EINVAL, op, NULL, "malformed metadata (negative length)");
    copy = malloc((size_t)n);
    if (copy == NULL) return adr__errorf(error, ENOMEM, op, NULL, "out of memory");
    memcpy(copy, metadata, (size_t)n);
  }
  free(p->metadata);
  p->metadata = copy;
  schema->metadata = copy;
  return 0;
}

static int schema_copy(const struct ArrowSchema* src, struct ArrowSchema* out, int depth,
                       struct adr_error* error) {
  const char* op = "adr_schema_copy";
  if (src == NULL || src->release == NULL)
    return adr__errorf(error, EINVAL, op, NULL, "source schema is %s",
                       src ? "released" : "NULL");
  if (depth > ADR__MAX_DEPTH)
    return adr__errorf(error, EINVAL, op, NULL, "schema nested deeper than %d", ADR__MAX_DEPTH);
  if (src->n_children > 0 && src->children == NULL)
    return adr__errorf(error, EINVAL, op, NULL, "children is NULL with n_children %lld",
                       (long long)src->n_children);
  int st = adr_schema_init(out, src->format, src->name, src->flags, src->n_children, error);
  if (st) return st;
  if (src->metadata != NULL) st = adr_schema_set_metadata(out, src->metadata, error);
  for (int64_t i = 0; st == 0 && i < src->n_children; i++)
    st = schema_copy(src->children[i], out->children[i], depth + 1, error);
  if (st == 0 && src->dictionary != NULL) {
    st = adr_schema_alloc_dictionary(out, error);
    if (st == 0) st = schema_copy(src->dictionary, out->dictionary, depth + 1, error);
  }
  if (st != 0) out->release(out);
  return st;
}

int adr_schema_copy(const struct ArrowSchema* src, struct ArrowSchema* out,
                    struct adr_error* error) {
  if (out == NULL) return adr__errorf(error, EINVAL, "adr_schema_copy", NULL, "out is NULL");
  return schema_copy(src, out, 0, error);
}

/* ---- array nodes ---------------------------------------------------------- */

struct node_priv {
  struct adr_device* device; /* NULL: host memory (adr__array_host_alloc, free) */
  const void** buffers;
  size_t* sizes;
  unsigned char* owned;
  struct ArrowArray** child_ptrs;
  struct ArrowArray* children;
  struct ArrowArray* dictionary;
  struct adr_event* event; /* export event, root only */
  void* host_keep;         /* host memory a queued copy reads from (deep copy) */
};

static void node_release(struct ArrowArray* array) {
  if (array == NULL || array->release == NULL) return;
  struct node_priv* p = array->private_data;
  /* Buffers may still be written by the copies the event covers. */
  if (p->event != NULL) adr_event_synchronize(p->event, NULL);
  for (int64_t i = 0; i < array->n_children; i++) {
    struct ArrowArray* c = array->children[i];
    if (c != NULL && c->release != NULL) c->release(c);
  }
  if (array->dictionary != NULL && array->dictionary->release != NULL)
    array->dictionary->release(array->dictionary);
  for (int64_t i = 0; i < array->n_buffers; i++)
    if (p->owned[i] && p->device == NULL)
      free((void*)p->buffers[i]);
    else if (p->owned[i])
      adr_free(p->device, (void*)p->buffers[i], p->sizes[i], NULL, NULL);
  if (p->event != NULL) adr_event_destroy(p->event, NULL);
  free(p->host_keep);
  free(p->dictionary);
  free(p); /* and its arrays (adr_array_init) */
  array->release = NULL;
  array->private_data = NULL;
}

void* adr__array_host_alloc(size_t size) {
  if (size > (size_t)PTRDIFF_MAX - 64) return NULL;
  size_t rounded = ((size ? size : 1) + 63) & ~(size_t)63;
  return aligned_alloc(64, rounded);
}

bool adr__array_node_is_owned(const struct ArrowArray* array) {
  return array != NULL && array->release == node_release;
}

void adr__array_node_keep(struct ArrowArray* array, void* host_memory) {
  struct node_priv* p = array->private_data;
  free(p->host_keep);
  p->host_keep = host_memory;
}

void adr__array_node_set_event(struct ArrowArray* array, struct adr_event* event) {
  struct node_priv* p = array->private_data;
  p->event = event;
}

int adr_array_init(struct adr_device* device, int64_t n_buffers, int64_t n_children,
                   struct ArrowArray* out, struct adr_error* error) {
  const char* op = "adr_array_init";
  if (out == NULL) return adr__errorf(error, EINVAL, op, NULL, "out is NULL");
  if (n_buffers < 0 || n_buffers > (1 << 20) || n_children < 0 || n_children > (1 << 20))
    return adr__errorf(error, EINVAL, op, NULL, "n_buffers %lld / n_children %lld out of range",
                       (long long)n_buffers, (long long)n_children);
  /* One allocation per node: the private part, then its arrays (children,
   * child pointers, buffer pointers, sizes, ownership flags), each at an
   * offset aligned for its type. */
  size_t nb = n_buffers > 0 ? (size_t)n_buffers : 1;
  size_t nc = (size_t)n_children;
  size_t at_children = sizeof(struct node_priv);
  size_t at_ptrs = at_children + nc * sizeof(struct ArrowArray);
  size_t at_buffers = at_ptrs + nc * sizeof(struct ArrowArray*);
  size_t at_sizes = at_buffers + nb * sizeof(void*);
  size_t at_owned = at_sizes + nb * sizeof(size_t);
  unsigned char* block = calloc(1, at_owned + nb);
  if (block == NULL) return adr__errorf(error, ENOMEM, op, NULL, "out of memory");
  struct node_priv* p = (struct node_priv*)block;
  p->device = device;
  p->buffers = (const void**)(block + at_buffers);
  p->sizes = (size_t*)(block + at_sizes);
  p->owned = block + at_owned;
  if (n_children > 0) {
    p->children = (struct ArrowArray*)(block + at_children);
    p->child_ptrs = (struct ArrowArray**)(block + at_ptrs);
  }
  for (int64_t i = 0; i < n_children; i++) p->child_ptrs[i] = &p->children[i];
  memset(out, 0, sizeof(*out));
  out->n_buffers = n_buffers;
  out->n_children = n_children;
  out->buffers = p->buffers;
  out->children = n_children > 0 ? p->child_ptrs : NULL;
  out->release = node_release;
  out->private_data = p;
  return 0;
}

static int check_node(const char* op, struct ArrowArray* array, int64_t i,
                      struct adr_error* error) {
  if (!adr__array_node_is_owned(array))
    return adr__errorf(error, EINVAL, op, NULL, "array was not made by adr_array_init");
  if (i < 0 || i >= array->n_buffers)
    return adr__errorf(error, EINVAL, op, NULL, "buffer %lld out of range (n_buffers %lld)",
                       (long long)i, (long long)array->n_buffers);
  struct node_priv* p = array->private_data;
  if (p->buffers[i] != NULL)
    return adr__errorf(error, EINVAL, op, NULL, "buffer %lld is already set", (long long)i);
  return 0;
}

int adr_array_alloc_buffer(struct ArrowArray* array, int64_t i, size_t size,
                           struct adr_stream* stream, void** out, struct adr_error* error) {
  int st = check_node("adr_array_alloc_buffer", array, i, error);
  if (st) return st;
  struct node_priv* p = array->private_data;
  void* ptr = NULL;
  if (p->device == NULL) {
    if (stream != NULL)
      return adr__errorf(error, EINVAL, "adr_array_alloc_buffer", NULL,
                         "the node is host memory (NULL device): its buffers are allocated "
                         "without a stream");
    ptr = adr__array_host_alloc(size);
    if (ptr == NULL)
      return adr__errorf(error, ENOMEM, "adr_array_alloc_buffer", NULL,
                         "ENOMEM: cannot allocate %zu bytes of host memory", size);
  } else {
    st = adr_alloc(p->device, size, 0, stream, &ptr, error);
    if (st) return st;
  }
  p->buffers[i] = ptr;
  p->sizes[i] = size;
  p->owned[i] = 1;
  if (out != NULL) *out = ptr;
  return 0;
}

int adr_array_adopt_buffer(struct ArrowArray* array, int64_t i, void* ptr, size_t size,
                           struct adr_error* error) {
  int st = check_node("adr_array_adopt_buffer", array, i, error);
  if (st) return st;
  if (ptr == NULL)
    return adr__errorf(error, EINVAL, "adr_array_adopt_buffer", NULL, "ptr is NULL");
  struct node_priv* p = array->private_data;
  p->buffers[i] = ptr;
  p->sizes[i] = size;
  p->owned[i] = 1;
  return 0;
}

int adr_array_set_buffer(struct ArrowArray* array, int64_t i, const void* ptr,
                         struct adr_error* error) {
  int st = check_node("adr_array_set_buffer", array, i, error);
  if (st) return st;
  struct node_priv* p = array->private_data;
  p->buffers[i] = ptr;
  return 0;
}

int adr_array_alloc_dictionary(struct ArrowArray* array, struct adr_error* error) {
  const char* op = "adr_array_alloc_dictionary";
  if (!adr__array_node_is_owned(array))
    return adr__errorf(error, EINVAL, op, NULL, "array was not made by adr_array_init");
  struct node_priv* p = array->private_data;
  if (array->dictionary != NULL)
    return adr__errorf(error, EINVAL, op, NULL, "array already has a dictionary");
  p->dictionary = calloc(1, sizeof(*p->dictionary));
  if (p->dictionary == NULL) return adr__errorf(error, ENOMEM, op, NULL, "out of memory");
  array->dictionary = p->dictionary;
  return 0;
}

/* ---- export --------------------------------------------------------------- */

/* Wraps a foreign producer's release so the export event outlives it. */
struct export_wrap {
  void (*release)(struct ArrowArray*);
  void* private_data;
  struct adr_event* event;
};

static void wrapped_release(struct ArrowArray* array) {
  if (array == NULL || array->release == NULL) return;
  struct export_wrap* w = array->private_data;
  adr_event_synchronize(w->event, NULL);
  array->release = w->release;
  array->private_data = w->private_data;
  array->release(array);
  array->release = NULL;
  adr_event_destroy(w->event, NULL);
  free(w);
}

int adr_device_array_init(struct adr_device* device, struct ArrowArray* array,
                          struct adr_stream* stream, struct ArrowDeviceArray* out,
                          struct adr_error* error) {
  const char* op = "adr_device_array_init";
  if (array == NULL || out == NULL)
    return adr__errorf(error, EINVAL, op, NULL, "%s is NULL", array == NULL ? "array" : "out");
  if (array->release == NULL) return adr__errorf(error, EINVAL, op, NULL, "array is released");
  if (device == NULL) {
    /* Host memory: a CPU array, complete once the stream (of any device:
     * a download into it, say) has done its work. */
    int st = stream != NULL ? adr_stream_synchronize(stream, error) : 0;
    if (st) return st;
    memset(out, 0, sizeof(*out));
    out->array = *array;
    array->release = NULL;
    out->device_type = ARROW_DEVICE_CPU;
    out->device_id = -1;
    return 0;
  }
  if (stream != NULL && adr_stream_device(stream) != device)
    return adr__errorf(error, EINVAL, op, NULL, "stream belongs to %s, not %s",
                       adr_device_name(adr_stream_device(stream)), adr_device_name(device));
  bool cpu = adr_device_type(device) == ARROW_DEVICE_CPU;
  struct adr_event* ev = NULL;
  void* native = NULL;
  int st = 0;
  if (stream == NULL || cpu) {
    st = adr_stream_synchronize(stream ? stream : adr_stream_default(device), error);
  } else {
    st = adr_event_create(device, &ev, error);
    if (st == 0) st = adr_event_record(ev, stream, error);
    if (st == 0) native = adr_event_native(ev);
    if (st == 0 && native == NULL) {
      /* A backend without native events cannot hand one out: complete now. */
      st = adr_event_synchronize(ev, error);
      adr_event_destroy(ev, NULL);
      ev = NULL;
    }
  }
  if (st != 0) {
    if (ev != NULL) adr_event_destroy(ev, NULL);
    return st;
  }
  if (ev != NULL) {
    if (adr__array_node_is_owned(array) &&
        ((struct node_priv*)array->private_data)->event == NULL) {
      adr__array_node_set_event(array, ev);
    } else {
      struct export_wrap* w = malloc(sizeof(*w));
      if (w == NULL) {
        adr_event_synchronize(ev, NULL);
        adr_event_destroy(ev, NULL);
        return adr__errorf(error, ENOMEM, op, NULL, "out of memory");
      }
      w->release = array->release;
      w->private_data = array->private_data;
      w->event = ev;
      array->release = wrapped_release;
      array->private_data = w;
    }
  }
  memset(out, 0, sizeof(*out));
  out->array = *array;
  array->release = NULL;
  out->device_type = adr_device_type(device);
  out->device_id = cpu ? -1 : adr_device_id(device);
  out->sync_event = native;
  return 0;
}

void adr_device_array_move(struct ArrowDeviceArray* src, struct ArrowDeviceArray* dst) {
  if (src == NULL || dst == NULL || src == dst) return;
  *dst = *src;
  src->array.release = NULL;
}

void adr_device_array_release(struct ArrowDeviceArray* array) {
  if (array != NULL && array->array.release != NULL) array->array.release(&array->array);
}

/* ---- import --------------------------------------------------------------- */

int adr_device_array_device(const struct ArrowDeviceArray* array, struct adr_device** out,
                            struct adr_error* error) {
  const char* op = "adr_device_array_device";
  if (array == NULL || out == NULL)
    return adr__errorf(error, EINVAL, op, NULL, "%s is NULL", array ? "out" : "array");
  if (!adr__device_type_known(array->device_type))
    return adr__errorf(error, EINVAL, op, NULL, "unknown device_type %d",
                       (int)array->device_type);
  if (array->device_id < -1)
    return adr__errorf(error, EINVAL, op, NULL, "invalid device_id %lld",
                       (long long)array->device_id);
  return adr__array_device(array->device_type, array->device_id, out, error);
}

int adr_device_array_wait(const struct ArrowDeviceArray* array, struct adr_stream* stream,
                          struct adr_error* error) {
  const char* op = "adr_device_array_wait";
  if (array == NULL) return adr__errorf(error, EINVAL, op, NULL, "array is NULL");
  if (array->array.release == NULL)
    return adr__errorf(error, EINVAL, op, NULL, "array is released");
  if (array->sync_event == NULL) return 0;
  struct adr_device* dev;
  int st = adr_device_array_device(array, &dev, error);
  if (st) return st;
  struct adr_event* ev;
  st = adr_event_import(dev, array->sync_event, &ev, error);
  if (st) return st;
  if (stream != NULL && adr_stream_device(stream) == dev)
    st = adr_stream_wait_event(stream, ev, error);
  else
    st = adr_event_synchronize(ev, error);
  adr_event_destroy(ev, NULL);
  return st;
}
