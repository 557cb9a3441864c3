/* SPDX-License-Identifier: Apache-2.0 */
#include "ucx_data.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adr/array.h"
#include "sample_table.h"

static const int64_t table_rows[] = {1000, 0, 5000};
static const int64_t column_rows[] = {300000, 17};

int ucx_test_batches(int which) {
  return which == 0 || which == 3 ? 3 : 2;
}

static const int64_t dict_rows[] = {100, 7};

/* struct<d: dictionary<int32, utf8>>: batch b's dictionary holds 10 - 5b
 * strings "<b>-<k>", and row i points at entry (i * (b + 1)) % entries. */
static int dict_host(int batch, struct ArrowSchema* schema, struct ArrowDeviceArray* out,
                     struct adr_error* error) {
  int64_t n = dict_rows[batch], entries = 10 - 5 * batch;
  int st = adr_schema_init(schema, "+s", "", 0, 1, error);
  if (st) return st;
  struct ArrowSchema* field = schema->children[0];
  st = adr_schema_init(field, "i", "d", ARROW_FLAG_NULLABLE, 0, error);
  if (!st) st = adr_schema_alloc_dictionary(field, error);
  if (!st) st = adr_schema_init(field->dictionary, "u", NULL, ARROW_FLAG_NULLABLE, 0, error);
  struct ArrowArray a = {0};
  if (!st) st = adr_array_init(NULL, 1, 1, &a, error);
  struct ArrowArray* idx = st ? NULL : a.children[0];
  if (!st) st = adr_array_init(NULL, 2, 0, idx, error);
  int32_t* iv = NULL;
  if (!st) st = adr_array_alloc_buffer(idx, 1, (size_t)n * 4, NULL, (void**)&iv, error);
  if (!st) st = adr_array_alloc_dictionary(idx, error);
  if (!st) st = adr_array_init(NULL, 3, 0, idx->dictionary, error);
  int32_t* off = NULL;
  char* data = NULL;
  if (!st)
    st = adr_array_alloc_buffer(idx->dictionary, 1, (size_t)(entries + 1) * 4, NULL,
                                (void**)&off, error);
  if (!st) st = adr_array_alloc_buffer(idx->dictionary, 2, (size_t)entries * 8, NULL,
                                       (void**)&data, error);
  if (!st) {
    for (int64_t i = 0; i < n; i++) iv[i] = (int32_t)((i * (batch + 1)) % entries);
    off[0] = 0;
    for (int64_t k = 0; k < entries; k++) {
      int len = snprintf(data + off[k], 8, "%d-%d", batch, (int)k);
      off[k + 1] = off[k] + len;
    }
    idx->dictionary->length = entries;
    idx->length = n;
    a.length = n;
    st = adr_device_array_init(NULL, &a, NULL, out, error);
  }
  if (st) {
    if (a.release) a.release(&a);
    schema->release(schema);
  }
  return st;
}

int ucx_test_device(const char* name, struct adr_device** out, struct adr_error* error) {
  if (strcmp(name, "host") == 0) {
    *out = NULL;
    return 0;
  }
  return adr_device_select(name, out, error);
}

void ucx_test_options(struct adr_ucx_options* out) {
  memset(out, 0, sizeof(*out));
  out->struct_size = sizeof(*out);
  out->chunk_size = 64 << 10;
  out->timeout_ms = 10000;
  out->max_inflight_batches = 2;
  out->flags = ADR_UCX_VALIDATE_FULL;
}

static uint64_t column_value(int batch, int64_t i) {
  return ((uint64_t)i + 1) * 0x9E3779B97F4A7C15ull ^ (uint64_t)batch;
}

/* A struct with one int64 column: IPC record batches are structs. */
static int column_host(int batch, struct ArrowSchema* schema, struct ArrowDeviceArray* out,
                       struct adr_error* error) {
  int64_t n = column_rows[batch];
  int st = adr_schema_init(schema, "+s", "", 0, 1, error);
  if (st) return st;
  st = adr_schema_init(schema->children[0], "l", "values", 0, 0, error);
  struct ArrowArray a = {0};
  if (!st) st = adr_array_init(NULL, 1, 1, &a, error);
  if (!st) st = adr_array_init(NULL, 2, 0, a.children[0], error);
  uint64_t* v = NULL;
  if (!st) st = adr_array_alloc_buffer(a.children[0], 1, (size_t)n * 8, NULL, (void**)&v, error);
  if (!st) {
    for (int64_t i = 0; i < n; i++) v[i] = column_value(batch, i);
    a.length = n;
    a.children[0]->length = n;
    st = adr_device_array_init(NULL, &a, NULL, out, error);
  }
  if (st) {
    if (a.release) a.release(&a);
    schema->release(schema);
  }
  return st;
}

static int host_batch(int which, int index, struct ArrowSchema* schema,
                      struct ArrowDeviceArray* out, struct adr_error* error) {
  if (which == 0) return fixture_sample_table(table_rows[index], schema, out, error);
  if (which == 2) return dict_host(index, schema, out, error);
  if (which == 3) return dict_host(0, schema, out, error);
  return column_host(index, schema, out, error);
}

struct source {
  int which, next, fail_at;
  struct adr_device* device;
  void (*on_batch)(int);
  struct ArrowDeviceArray shared; /* stream 3: the one batch every batch views */
};

static void view_release(struct ArrowArray* a) {
  a->release = NULL;
}

/* Batches produced and not yet released by the sender, and the most at
 * once since ucx_test_reset_live. */
static atomic_int live, max_live;

int ucx_test_max_live(void) {
  return atomic_load(&max_live);
}

void ucx_test_reset_live(void) {
  atomic_store(&max_live, atomic_load(&live));
}

/* Wraps a batch's release to count it. */
struct counted {
  void (*release)(struct ArrowArray*);
  void* private_data;
};

static void counted_release(struct ArrowArray* a) {
  struct counted* c = a->private_data;
  a->release = c->release;
  a->private_data = c->private_data;
  free(c);
  atomic_fetch_sub(&live, 1);
  a->release(a);
}

static int count_batch(struct ArrowDeviceArray* out, struct adr_error* error) {
  struct counted* c = malloc(sizeof(*c));
  if (c == NULL) {
    adr_device_array_release(out);
    return adr_error_set(error, ENOMEM, "out of memory");
  }
  *c = (struct counted){out->array.release, out->array.private_data};
  out->array.release = counted_release;
  out->array.private_data = c;
  int now = atomic_fetch_add(&live, 1) + 1;
  int seen = atomic_load(&max_live);
  while (now > seen && !atomic_compare_exchange_weak(&max_live, &seen, now)) {
  }
  return 0;
}

static void source_free(void* ctx) {
  struct source* s = ctx;
  if (s->shared.array.release != NULL) adr_device_array_release(&s->shared);
  free(s);
}

/* The source's next batch on its device, and the schema (the caller's on
 * success). */
static int make_batch(struct source* s, struct ArrowSchema* schema, struct ArrowDeviceArray* out,
                      struct adr_error* error) {
  struct ArrowDeviceArray host;
  int st = host_batch(s->which, s->next, schema, &host, error);
  if (st) return st;
  if (s->device == NULL) {
    adr_device_array_move(&host, out);
  } else {
    st = adr_device_array_deep_copy(schema, &host, s->device, NULL, out, NULL, error);
    adr_device_array_release(&host);
  }
  if (st) schema->release(schema);
  return st;
}

static int source_next(void* ctx, struct ArrowDeviceArray* out, struct adr_error* error) {
  struct source* s = ctx;
  memset(out, 0, sizeof(*out));
  if (s->next == s->fail_at)
    return adr_error_set(error, EIO, "source failed on purpose at batch %d", s->next);
  if (s->next >= ucx_test_batches(s->which)) return 0;
  if (s->on_batch) s->on_batch(s->next);
  struct ArrowSchema schema;
  if (s->which == 3) {
    /* Views of one batch, alive until the stream is released: the same
     * dictionary memory in every batch. */
    if (s->shared.array.release == NULL) {
      int st = make_batch(s, &schema, &s->shared, error);
      if (st) return st;
      schema.release(&schema);
    }
    *out = s->shared;
    out->array.release = view_release;
  } else {
    int st = make_batch(s, &schema, out, error);
    if (st) return st;
    schema.release(&schema);
  }
  s->next++;
  return count_batch(out, error);
}

int ucx_test_stream(int which, struct adr_device* device, int fail_at, void (*on_batch)(int),
                    struct ArrowDeviceArrayStream* out, struct adr_error* error) {
  struct source* s = calloc(1, sizeof(*s));
  if (s == NULL) return ENOMEM;
  *s = (struct source){.which = which, .fail_at = fail_at, .device = device, .on_batch = on_batch};
  struct ArrowSchema schema;
  struct ArrowDeviceArray first;
  int st = host_batch(which, 0, &schema, &first, error);
  if (st) {
    free(s);
    return st;
  }
  adr_device_array_release(&first);
  st = adr_device_array_stream_from_callback(
      &schema, device ? adr_device_type(device) : ARROW_DEVICE_CPU, source_next, source_free, s,
      out, error);
  if (st) {
    schema.release(&schema);
    free(s);
  }
  return st;
}

int ucx_test_check(int which, int index, struct adr_device* device,
                   const struct ArrowSchema* schema, const struct ArrowDeviceArray* batch,
                   struct adr_error* error) {
  ArrowDeviceType want = device ? adr_device_type(device) : ARROW_DEVICE_CPU;
  if (batch->device_type != want)
    return adr_error_set(error, EINVAL, "batch %d on device type %d, not %d", index,
                         (int)batch->device_type, (int)want);
  struct ArrowSchema es;
  struct ArrowDeviceArray expect;
  int st = host_batch(which, index, &es, &expect, error);
  if (st) return st;
  bool equal = false;
  struct adr_error diff = {{0}};
  st = adr_device_array_equal(schema, &expect, batch, &equal, &diff, error);
  if (!st && !equal) st = adr_error_set(error, EINVAL, "batch %d differs: %s", index, diff.message);
  if (!st && which == 1) {
    /* Byte for byte: the values buffer copied back to the host. */
    struct ArrowDeviceArray back;
    st = adr_device_array_deep_copy(schema, batch, NULL, NULL, &back, NULL, error);
    if (!st) {
      size_t n = (size_t)column_rows[index] * 8;
      const struct ArrowArray* got = back.array.children[0];
      const struct ArrowArray* ref = expect.array.children[0];
      if (got->length != column_rows[index] ||
          memcmp((const uint8_t*)got->buffers[1] + got->offset * 8,
                 (const uint8_t*)ref->buffers[1] + ref->offset * 8, n) != 0)
        st = adr_error_set(error, EINVAL, "batch %d: values differ byte-wise", index);
      adr_device_array_release(&back);
    }
  }
  adr_device_array_release(&expect);
  es.release(&es);
  return st;
}

int ucx_test_receive_all(struct adr_ucx_conn* conn, int which, struct adr_device* device,
                         int* out_batches, struct adr_error* error) {
  struct ArrowDeviceArrayStream s;
  *out_batches = 0;
  int st = adr_ucx_receive_stream(conn, device, &s, error);
  if (st) return st;
  struct ArrowSchema schema;
  st = adr_device_array_stream_get_schema(&s, &schema, error);
  if (st) {
    s.release(&s);
    return st;
  }
  for (int i = 0; st == 0; i++) {
    struct ArrowDeviceArray b;
    st = adr_device_array_stream_next(&s, &b, error);
    if (st) break;
    if (b.array.release == NULL) {
      if (i != ucx_test_batches(which))
        st = adr_error_set(error, EINVAL, "stream ended after %d batches, %d expected", i,
                           ucx_test_batches(which));
      break;
    }
    (*out_batches)++;
    if (i >= ucx_test_batches(which))
      st = adr_error_set(error, EINVAL, "more than %d batches", ucx_test_batches(which));
    else
      st = ucx_test_check(which, i, device, &schema, &b, error);
    adr_device_array_release(&b);
  }
  schema.release(&schema);
  s.release(&s);
  return st;
}
