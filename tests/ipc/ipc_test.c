/* SPDX-License-Identifier: Apache-2.0
 *
 * Helpers of the IPC tests (ipc_test.h).
 */
#include "ipc_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void bytes_append(struct bytes* b, const void* p, size_t n) {
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < b->len + n) cap *= 2;
    b->data = realloc(b->data, cap);
    assert_non_null(b->data);
    b->cap = cap;
  }
  if (n) {
    if (p)
      memcpy(b->data + b->len, p, n);
    else
      memset(b->data + b->len, 0, n);
  }
  b->len += n;
}

void bytes_free(struct bytes* b) {
  free(b->data);
  memset(b, 0, sizeof(*b));
}

void ipc_test_append_message(struct bytes* b, const struct adr_ipc_message* m) {
  bytes_append(b, m->metadata, (size_t)m->metadata_size);
  size_t at = b->len;
  bytes_append(b, NULL, (size_t)m->body_size);
  for (int64_t i = 0; i < m->n_buffers; i++) {
    const struct adr_ipc_body_buffer* x = &m->buffers[i];
    assert_true(x->body_offset % 8 == 0);
    assert_true(x->body_offset + x->size <= m->body_size);
    if (x->size == 0) continue;
    struct adr_error err;
    ASSERT_OK(adr_copy(NULL, b->data + at + x->body_offset, x->device, x->data, (size_t)x->size,
                       NULL, &err),
              &err);
  }
}

void ipc_test_write_all(struct bytes* b, const struct ArrowSchema* schema,
                        const struct ArrowDeviceArray* array) {
  struct adr_error err;
  struct adr_ipc_message m;
  ASSERT_OK(adr_ipc_encode_schema(schema, &m, &err), &err);
  ipc_test_append_message(b, &m);
  adr_ipc_message_release(&m);
  int64_t nd = 0;
  ASSERT_OK(adr_ipc_schema_dictionary_count(schema, &nd, &err), &err);
  for (int64_t k = 0; k < nd; k++) {
    ASSERT_OK(adr_ipc_encode_dictionary_batch(schema, array, k, &m, &err), &err);
    ipc_test_append_message(b, &m);
    adr_ipc_message_release(&m);
  }
  ASSERT_OK(adr_ipc_encode_record_batch(schema, array, &m, &err), &err);
  ipc_test_append_message(b, &m);
  adr_ipc_message_release(&m);
  uint8_t eos[ADR_IPC_PREFIX_SIZE];
  adr_ipc_end_of_stream(eos);
  bytes_append(b, eos, sizeof(eos));
}

int ipc_test_read_all(const struct bytes* b, struct adr_device* device,
                      struct ArrowSchema* out_schema, struct ArrowDeviceArray* out,
                      struct adr_error* err) {
  memset(out, 0, sizeof(*out));
  memset(out_schema, 0, sizeof(*out_schema));
  struct adr_ipc_reader* r = NULL;
  int st = adr_ipc_reader_create(device, NULL, &r, err);
  if (st) return st;
  size_t pos = 0;
  for (int64_t idx = 0;; idx++) {
    if (b->len - pos < ADR_IPC_PREFIX_SIZE) {
      st = adr_error_set(err, EINVAL, "truncated prefix at %zu", pos);
      break;
    }
    int64_t msize = 0;
    st = adr_ipc_decode_prefix(b->data + pos, idx, &msize, err);
    if (st) break;
    pos += ADR_IPC_PREFIX_SIZE;
    if (msize == 0) break;
    if ((size_t)msize > b->len - pos) {
      st = adr_error_set(err, EINVAL, "truncated metadata");
      break;
    }
    struct adr_ipc_decoded d;
    st = adr_ipc_decode_message(b->data + pos, (size_t)msize, idx, &d, err);
    if (st) break;
    pos += (size_t)msize;
    if ((uint64_t)d.body_size > b->len - pos) {
      adr_ipc_decoded_release(&d);
      st = adr_error_set(err, EINVAL, "truncated body");
      break;
    }
    if (d.type == ADR_IPC_MESSAGE_SCHEMA) {
      st = adr_ipc_reader_set_schema(r, &d, err);
    } else {
      void* body = NULL;
      if (device == NULL) {
        body = aligned_alloc(64, (size_t)d.body_alloc_size);
        assert_non_null(body);
        memcpy(body, b->data + pos, (size_t)d.body_size);
      } else {
        st = adr_alloc(device, (size_t)d.body_alloc_size, 64, NULL, &body, err);
        if (st == 0)
          st = adr_copy(device, body, NULL, b->data + pos, (size_t)d.body_size, NULL, err);
        if (st) {
          if (body) adr_free(device, body, (size_t)d.body_alloc_size, NULL, NULL);
          adr_ipc_decoded_release(&d);
          break;
        }
      }
      struct ArrowDeviceArray batch;
      st = adr_ipc_reader_consume(r, &d, body, &batch, err);
      if (st == 0 && batch.array.release != NULL) {
        if (out->array.release == NULL)
          adr_device_array_move(&batch, out);
        else
          adr_device_array_release(&batch);
      }
    }
    pos += (size_t)d.body_size;
    adr_ipc_decoded_release(&d);
    if (st) break;
  }
  if (st == 0) {
    const struct ArrowSchema* s = adr_ipc_reader_schema(r);
    if (s == NULL)
      st = adr_error_set(err, EINVAL, "no schema");
    else
      st = adr_schema_copy(s, out_schema, err);
  }
  if (st) adr_device_array_release(out);
  adr_ipc_reader_destroy(r);
  return st;
}

struct adr_device* ipc_test_device(void) {
  const char* d = getenv("ADR_DEVICE");
  if (d == NULL || strcmp(d, "cpu") == 0) return NULL;
  struct adr_device* dev = NULL;
  struct adr_error err;
  if (adr_device_default(&dev, &err) != 0 || adr_device_type(dev) == ARROW_DEVICE_CPU) {
    if (getenv("ADR_IPC_REQUIRE") != NULL) {
      fprintf(stderr, "device %s required but missing: %s\n", d, err.message);
      exit(1);
    }
    fprintf(stderr, "device %s not available: skipped\n", d);
    exit(77);
  }
  return dev;
}

void ipc_test_build(const struct test_case* c, struct ArrowSchema* schema,
                    struct ArrowDeviceArray* owner, bool* wrapped) {
  c->build(schema, owner);
  *wrapped = strcmp(schema->format, "+s") != 0;
  if (*wrapped) {
    struct ArrowSchema col = *schema;
    struct adr_error err;
    ASSERT_OK(adr_schema_init(schema, "+s", "", 0, 1, &err), &err);
    *schema->children[0] = col;
  }
}

struct view {
  const void* buffers[1];
  struct ArrowArray* children[1];
};

static void view_release(struct ArrowArray* a) {
  free(a->private_data);
  a->release = NULL;
}

void ipc_test_view(const struct ArrowDeviceArray* owner, bool wrapped, int64_t cut_front,
                   int64_t cut_back, struct ArrowDeviceArray* out) {
  struct view* v = calloc(1, sizeof(*v));
  assert_non_null(v);
  *out = *owner;
  out->sync_event = owner->sync_event;
  out->array.buffers = v->buffers;
  out->array.null_count = 0;
  out->array.release = view_release;
  out->array.private_data = v;
  if (wrapped) {
    v->children[0] = (struct ArrowArray*)&owner->array;
    out->array.n_children = 1;
    out->array.n_buffers = 1;
    out->array.children = v->children;
    out->array.offset = 0;
    out->array.dictionary = NULL;
  }
  out->array.offset += cut_front;
  out->array.length -= cut_front + cut_back;
}

static int64_t metadata_len(const char* m) {
  if (m == NULL) return 0;
  int32_t n;
  memcpy(&n, m, 4);
  int64_t pos = 4;
  for (int32_t i = 0; i < 2 * n; i++) {
    int32_t l;
    memcpy(&l, m + pos, 4);
    pos += 4 + l;
  }
  return n == 0 ? 0 : pos;
}

static void schema_equal(const struct ArrowSchema* want, const struct ArrowSchema* got,
                         const char* path, bool node_attrs) {
  struct adr_format fw, fg;
  struct adr_error err;
  ASSERT_OK(adr_format_parse(want->format, &fw, &err), &err);
  ASSERT_OK(adr_format_parse(got->format, &fg, &err), &err);
  bool has_unit = fw.type == ADR_TYPE_TIMESTAMP || fw.type == ADR_TYPE_TIME32 ||
                  fw.type == ADR_TYPE_TIME64 || fw.type == ADR_TYPE_DURATION;
  if (fw.type != fg.type || fw.bit_width != fg.bit_width || fw.fixed_size != fg.fixed_size ||
      fw.precision != fg.precision || fw.scale != fg.scale || (has_unit && fw.unit != fg.unit) ||
      fw.timezone_length != fg.timezone_length ||
      (fw.timezone_length && memcmp(fw.timezone, fg.timezone, fw.timezone_length) != 0) ||
      fw.n_type_ids != fg.n_type_ids ||
      memcmp(fw.type_ids, fg.type_ids, (size_t)fw.n_type_ids) != 0)
    fail_msg("%s: format \"%s\" came back as \"%s\"", path, want->format, got->format);
  if (node_attrs) {
    const char* wn = want->name ? want->name : "";
    const char* gn = got->name ? got->name : "";
    if (strcmp(wn, gn) != 0) fail_msg("%s: name \"%s\" came back as \"%s\"", path, wn, gn);
    int64_t mask = ARROW_FLAG_NULLABLE | ARROW_FLAG_DICTIONARY_ORDERED;
    if (fw.type == ADR_TYPE_MAP) mask |= ARROW_FLAG_MAP_KEYS_SORTED;
    if ((want->flags & mask) != (got->flags & mask))
      fail_msg("%s: flags %lld came back as %lld", path, (long long)want->flags,
               (long long)got->flags);
    int64_t lw = metadata_len(want->metadata), lg = metadata_len(got->metadata);
    if (lw != lg || (lw && memcmp(want->metadata, got->metadata, (size_t)lw) != 0))
      fail_msg("%s: metadata differs", path);
  }
  if (want->n_children != got->n_children)
    fail_msg("%s: %lld children came back as %lld", path, (long long)want->n_children,
             (long long)got->n_children);
  for (int64_t i = 0; i < want->n_children; i++) {
    char p[512];
    snprintf(p, sizeof(p), "%s.%s", path, want->children[i]->name ? want->children[i]->name : "?");
    schema_equal(want->children[i], got->children[i], p, true);
  }
  if ((want->dictionary == NULL) != (got->dictionary == NULL))
    fail_msg("%s: dictionary encoding lost or added", path);
  if (want->dictionary != NULL) {
    char p[512];
    snprintf(p, sizeof(p), "%s.<dictionary>", path);
    schema_equal(want->dictionary, got->dictionary, p, false);
  }
}

void ipc_test_assert_schema_equal(const struct ArrowSchema* want, const struct ArrowSchema* got) {
  schema_equal(want, got, "schema", false);
}
