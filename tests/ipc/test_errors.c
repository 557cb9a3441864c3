/* SPDX-License-Identifier: Apache-2.0
 *
 * The encoder byte for byte against FlatBuffers assembled by hand from
 * format/Schema.fbs and format/Message.fbs, and bad input: every
 * truncation and byte corruption of real streams (an error or a valid
 * stream, never a crash or an overread: run under ASan), and the named
 * errors (continuation, lying lengths, offsets out of range, schema/batch
 * mismatch, nesting).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ipc/flatbuf.h" /* core/: the deep-nesting input is built with the writer */
#include "ipc_test.h"

/* Schema message of struct<a: int32 (nullable)>, laid out as
 * core/ipc/flatbuf.h describes (offsets in the comments are from the
 * start of the FlatBuffer, after the 8-byte prefix). */
static const uint8_t k_schema_msg[] = {
    0xFF, 0xFF, 0xFF, 0xFF, 0x78, 0x00, 0x00, 0x00, /* continuation, metadata size 120 */
    0x10, 0x00, 0x00, 0x00,                         /* 0: root -> Message at 16 */
    /* 4: Message vtable: size 10, table 12, version@8, header_type@10, header@4 */
    0x0A, 0x00, 0x0C, 0x00, 0x08, 0x00, 0x0A, 0x00, 0x04, 0x00,
    0x00, 0x00,             /* 14: padding */
    0x0C, 0x00, 0x00, 0x00, /* 16: Message, soffset 12 -> vtable at 4 */
    0x10, 0x00, 0x00, 0x00, /* 20: header -> 36 */
    0x04, 0x00,             /* 24: version V5 */
    0x01,                   /* 26: header_type Schema */
    0x00,                   /* 27: padding */
    /* 28: Schema vtable: size 8, table 8, endianness absent, fields@4 */
    0x08, 0x00, 0x08, 0x00, 0x00, 0x00, 0x04, 0x00,
    0x08, 0x00, 0x00, 0x00, /* 36: Schema, soffset 8 -> 28 */
    0x04, 0x00, 0x00, 0x00, /* 40: fields -> 44 */
    0x01, 0x00, 0x00, 0x00, /* 44: [Field] count 1 */
    0x14, 0x00, 0x00, 0x00, /* 48: -> 68 */
    /* 52: Field vtable: size 16, table 20, name@4 nullable@16 type_type@17
     * type@8 dictionary absent children@12 */
    0x10, 0x00, 0x14, 0x00, 0x04, 0x00, 0x10, 0x00, 0x11, 0x00, 0x08, 0x00, 0x00, 0x00, 0x0C,
    0x00,
    0x10, 0x00, 0x00, 0x00, /* 68: Field, soffset 16 -> 52 */
    0x10, 0x00, 0x00, 0x00, /* 72: name -> 88 */
    0x1C, 0x00, 0x00, 0x00, /* 76: type -> 104 */
    0x24, 0x00, 0x00, 0x00, /* 80: children -> 116 */
    0x01,                   /* 84: nullable */
    0x02,                   /* 85: type_type Int */
    0x00, 0x00,             /* 86: padding */
    0x01, 0x00, 0x00, 0x00, 'a', 0x00, /* 88: name "a" */
    /* 94: Int vtable: size 8, table 12, bitWidth@4, is_signed@8 */
    0x08, 0x00, 0x0C, 0x00, 0x04, 0x00, 0x08, 0x00,
    0x00, 0x00,             /* 102: padding */
    0x0A, 0x00, 0x00, 0x00, /* 104: Int, soffset 10 -> 94 */
    0x20, 0x00, 0x00, 0x00, /* 108: bitWidth 32 */
    0x01, 0x00, 0x00, 0x00, /* 112: is_signed, padding */
    0x00, 0x00, 0x00, 0x00, /* 116: children: empty vector */
};

/* RecordBatch message of 3 rows of that schema (no nulls). */
static const uint8_t k_batch_msg[] = {
    0xFF, 0xFF, 0xFF, 0xFF, 0x90, 0x00, 0x00, 0x00, /* metadata size 144 */
    0x10, 0x00, 0x00, 0x00,                         /* 0: root -> 16 */
    /* 4: Message vtable: size 12, table 24, version@20 header_type@22
     * header@16 bodyLength@8 */
    0x0C, 0x00, 0x18, 0x00, 0x14, 0x00, 0x16, 0x00, 0x10, 0x00, 0x08, 0x00,
    0x0C, 0x00, 0x00, 0x00,                         /* 16: Message, soffset 12 */
    0x00, 0x00, 0x00, 0x00,                         /* 20: padding */
    0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* 24: bodyLength 16 */
    0x18, 0x00, 0x00, 0x00,                         /* 32: header -> 56 */
    0x04, 0x00, 0x03, 0x00,                         /* 36: V5, RecordBatch, pad */
    /* 40: RecordBatch vtable: size 10, table 24, length@8 nodes@16 buffers@20 */
    0x0A, 0x00, 0x18, 0x00, 0x08, 0x00, 0x10, 0x00, 0x14, 0x00,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00,             /* 50: padding */
    0x10, 0x00, 0x00, 0x00,                         /* 56: RecordBatch, soffset 16 */
    0x00, 0x00, 0x00, 0x00,                         /* 60: padding */
    0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* 64: length 3 */
    0x0C, 0x00, 0x00, 0x00,                         /* 72: nodes -> 84 */
    0x20, 0x00, 0x00, 0x00,                         /* 76: buffers -> 108 */
    0x00, 0x00, 0x00, 0x00,                         /* 80: padding */
    0x01, 0x00, 0x00, 0x00,                         /* 84: [FieldNode] count 1 */
    0x03, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, /* 88: {length 3, null_count 0} */
    0x00, 0x00, 0x00, 0x00,                            /* 104: padding */
    0x02, 0x00, 0x00, 0x00,                            /* 108: [Buffer] count 2 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,    /* 112: validity {0, 0} */
    0, 0, 0, 0, 0, 0, 0, 0, 0x0C, 0, 0, 0, 0, 0, 0, 0, /* 128: data {0, 12} */
};

static const int32_t k_values[3] = {1, 2, 3};

static void int32_schema(struct ArrowSchema* s, const char* fmt) {
  test_schema(s, "+s", "", 0, 1);
  test_schema(s->children[0], fmt, "a", ARROW_FLAG_NULLABLE, 0);
}

static void int32_batch(struct ArrowDeviceArray* out) {
  struct ArrowArray a;
  test_node(&a, 1, 1, 3, 0, 0);
  test_node(a.children[0], 2, 0, 3, 0, 0);
  test_buffer(a.children[0], 1, sizeof(k_values), k_values);
  test_export(&a, out);
}

static void test_schema_bytes(void** state) {
  (void)state;
  struct ArrowSchema s;
  int32_schema(&s, "i");
  struct adr_ipc_message m;
  struct adr_error err;
  ASSERT_OK(adr_ipc_encode_schema(&s, &m, &err), &err);
  assert_int_equal(m.metadata_size, sizeof(k_schema_msg));
  assert_memory_equal(m.metadata, k_schema_msg, sizeof(k_schema_msg));
  assert_int_equal(m.body_size, 0);
  adr_ipc_message_release(&m);
  s.release(&s);
}

static void test_batch_bytes(void** state) {
  (void)state;
  struct ArrowSchema s;
  int32_schema(&s, "i");
  struct ArrowDeviceArray a;
  int32_batch(&a);
  struct adr_ipc_message m;
  struct adr_error err;
  ASSERT_OK(adr_ipc_encode_record_batch(&s, &a, &m, &err), &err);
  assert_int_equal(m.metadata_size, sizeof(k_batch_msg));
  assert_memory_equal(m.metadata, k_batch_msg, sizeof(k_batch_msg));
  assert_int_equal(m.body_size, 16);
  assert_int_equal(m.n_buffers, 2);
  assert_int_equal(m.buffers[0].size, 0);
  assert_int_equal(m.buffers[1].size, 12);
  assert_int_equal(m.buffers[1].body_offset, 0);
  assert_memory_equal(m.buffers[1].data, k_values, 12);
  adr_ipc_message_release(&m);
  adr_device_array_release(&a);
  s.release(&s);
}

/* A stream assembled from the hand-made messages reads back. */
static struct bytes hand_stream(void) {
  struct bytes b = {0};
  bytes_append(&b, k_schema_msg, sizeof(k_schema_msg));
  bytes_append(&b, k_batch_msg, sizeof(k_batch_msg));
  bytes_append(&b, k_values, sizeof(k_values));
  bytes_append(&b, NULL, 4);
  uint8_t eos[8];
  adr_ipc_end_of_stream(eos);
  bytes_append(&b, eos, 8);
  return b;
}

static void test_decode_hand_made(void** state) {
  (void)state;
  struct bytes b = hand_stream();
  struct ArrowSchema s;
  struct ArrowDeviceArray a;
  struct adr_error err;
  ASSERT_OK(ipc_test_read_all(&b, NULL, &s, &a, &err), &err);
  assert_int_equal(s.n_children, 1);
  assert_string_equal(s.children[0]->format, "i");
  assert_string_equal(s.children[0]->name, "a");
  assert_true(s.children[0]->flags & ARROW_FLAG_NULLABLE);
  assert_int_equal(a.array.length, 3);
  assert_memory_equal(a.array.children[0]->buffers[1], k_values, 12);
  adr_device_array_release(&a);
  s.release(&s);
  bytes_free(&b);
}

/* Reads `len` bytes of `data` as a stream to the end. Returns the status;
 * err receives the message. */
static int read_bytes(const uint8_t* data, size_t len, struct adr_error* err) {
  int fd = memfd_create("adr-ipc-bad", 0);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, data, len), (ssize_t)len);
  lseek(fd, 0, SEEK_SET);
  struct ArrowDeviceArrayStream s;
  memset(&s, 0, sizeof(s));
  int st = adr_ipc_read_stream(fd, NULL, &s, err);
  for (int i = 0; st == 0 && i < 1000; i++) {
    struct ArrowDeviceArray b;
    st = adr_device_array_stream_next(&s, &b, err);
    if (st || b.array.release == NULL) break;
    adr_device_array_release(&b);
  }
  if (s.release != NULL) s.release(&s);
  close(fd);
  return st;
}

static struct bytes case_stream(const char* name) {
  for (size_t i = 0; i < test_case_count; i++) {
    if (strcmp(test_cases[i].name, name) != 0) continue;
    struct ArrowSchema schema;
    struct ArrowDeviceArray owner, v;
    bool wrapped;
    ipc_test_build(&test_cases[i], &schema, &owner, &wrapped);
    ipc_test_view(&owner, wrapped, 1, 0, &v);
    struct bytes b = {0};
    ipc_test_write_all(&b, &schema, &v);
    adr_device_array_release(&v);
    adr_device_array_release(&owner);
    schema.release(&schema);
    return b;
  }
  fail_msg("no case %s", name);
  struct bytes none = {0};
  return none;
}

static const char* const k_cases[] = {"dictionary", "nested", "views", "run-end-encoded",
                                      "unions"};

/* Whether byte i of stream b is metadata (prefix or FlatBuffer). */
static void metadata_map(const struct bytes* b, bool* is_meta) {
  size_t pos = 0;
  for (int64_t idx = 0; pos + 8 <= b->len; idx++) {
    int64_t m = 0;
    struct adr_error err;
    for (size_t i = pos; i < pos + 8; i++) is_meta[i] = true;
    ASSERT_OK(adr_ipc_decode_prefix(b->data + pos, idx, &m, &err), &err);
    pos += 8;
    if (m == 0) break;
    for (size_t i = pos; i < pos + (size_t)m; i++) is_meta[i] = true;
    struct adr_ipc_decoded d;
    ASSERT_OK(adr_ipc_decode_message(b->data + pos, (size_t)m, idx, &d, &err), &err);
    pos += (size_t)m + (size_t)d.body_size;
    adr_ipc_decoded_release(&d);
  }
}

static void test_truncations(void** state) {
  (void)state;
  for (size_t c = 0; c < sizeof(k_cases) / sizeof(k_cases[0]); c++) {
    struct bytes b = case_stream(k_cases[c]);
    struct adr_error err;
    assert_int_equal(read_bytes(b.data, b.len, &err), 0);
    bool* is_meta = calloc(b.len, sizeof(bool));
    assert_non_null(is_meta);
    metadata_map(&b, is_meta);
    for (size_t len = 0; len < b.len; len++) {
      if (!is_meta[len] && len % 8 != 0) continue;
      memset(&err, 0, sizeof(err));
      int st = read_bytes(b.data, len, &err);
      if (st != 0) {
        if (strstr(err.message, "message ") == NULL && strstr(err.message, "empty") == NULL)
          fail_msg("%s cut at %zu: message without an index: %s", k_cases[c], len, err.message);
      }
    }
    free(is_meta);
    bytes_free(&b);
  }
}

/* Every metadata byte set to 4 values, every 4th body byte to one. */
static void test_corruptions(void** state) {
  (void)state;
  static const int k_mut[] = {0x00, 0xFF, 0x7F, 0x80};
  for (size_t c = 0; c < sizeof(k_cases) / sizeof(k_cases[0]); c++) {
    struct bytes b = case_stream(k_cases[c]);
    uint8_t* copy = malloc(b.len);
    bool* is_meta = calloc(b.len, sizeof(bool));
    assert_non_null(copy);
    assert_non_null(is_meta);
    metadata_map(&b, is_meta);
    for (size_t i = 0; i < b.len; i++) {
      size_t n_mut = is_meta[i] ? sizeof(k_mut) / sizeof(k_mut[0]) : (i % 4 == 0 ? 1 : 0);
      for (size_t k = 0; k < n_mut; k++) {
        memcpy(copy, b.data, b.len);
        copy[i] = (uint8_t)(is_meta[i] ? k_mut[k] : ~copy[i]);
        struct adr_error err;
        (void)read_bytes(copy, b.len, &err);
      }
    }
    free(is_meta);
    free(copy);
    bytes_free(&b);
  }
}

static void expect_error(const uint8_t* data, size_t len, int status, const char* const* parts) {
  struct adr_error err;
  memset(&err, 0, sizeof(err));
  int st = read_bytes(data, len, &err);
  if (st != status)
    fail_msg("expected %s, got %s: %s", adr_status_name(status), adr_status_name(st),
             err.message);
  for (; *parts != NULL; parts++)
    if (strstr(err.message, *parts) == NULL)
      fail_msg("\"%s\" not in \"%s\"", *parts, err.message);
}

static void test_named_errors(void** state) {
  (void)state;
  struct bytes b = hand_stream();
  uint8_t* d = malloc(b.len);
  assert_non_null(d);
  size_t batch_at = sizeof(k_schema_msg);

  memcpy(d, b.data, b.len);
  d[0] = 0x00;
  expect_error(d, b.len, EPROTO, (const char*[]){"message 0", "continuation", NULL});

  /* bodyLength 16 -> 4096: the body is cut short by the end of the file. */
  memcpy(d, b.data, b.len);
  d[batch_at + 8 + 25] = 0x10;
  expect_error(d, b.len, EINVAL, (const char*[]){"message 1", "truncated", NULL});

  /* data buffer length 12 -> 200, beyond the body. */
  memcpy(d, b.data, b.len);
  d[batch_at + 8 + 136] = 200;
  expect_error(d, b.len, EINVAL,
               (const char*[]){"message 1 (record batch)", "outside the body", NULL});

  /* data buffer length 12 -> 8: fewer bytes than 3 int32 need. */
  memcpy(d, b.data, b.len);
  d[batch_at + 8 + 136] = 8;
  expect_error(d, b.len, EINVAL,
               (const char*[]){"message 1 (record batch)", "field a", "12 needed", NULL});

  /* a node's null count above its length */
  memcpy(d, b.data, b.len);
  d[batch_at + 8 + 96] = 9;
  expect_error(d, b.len, EINVAL, (const char*[]){"message 1", "null count", NULL});

  /* a metadata size that is not a multiple of 8 */
  memcpy(d, b.data, b.len);
  d[4] = 0x79;
  expect_error(d, b.len, EINVAL, (const char*[]){"message 0", "multiple of 8", NULL});

  /* the root offset pointing past the end */
  memcpy(d, b.data, b.len);
  d[8] = 0xF0;
  expect_error(d, b.len, EINVAL, (const char*[]){"message 0", "malformed flatbuffer", NULL});

  /* metadata version V3 */
  memcpy(d, b.data, b.len);
  d[8 + 24] = 2;
  expect_error(d, b.len, EPROTO, (const char*[]){"message 0", "version", NULL});
  free(d);
  bytes_free(&b);

  /* Schema of utf8 "a", batch of int32 "a": 2 buffers where 3 are needed. */
  struct ArrowSchema s8, si;
  int32_schema(&s8, "u");
  int32_schema(&si, "i");
  struct ArrowDeviceArray a;
  int32_batch(&a);
  struct bytes mix = {0};
  struct adr_ipc_message m;
  struct adr_error err;
  ASSERT_OK(adr_ipc_encode_schema(&s8, &m, &err), &err);
  ipc_test_append_message(&mix, &m);
  adr_ipc_message_release(&m);
  ASSERT_OK(adr_ipc_encode_record_batch(&si, &a, &m, &err), &err);
  ipc_test_append_message(&mix, &m);
  adr_ipc_message_release(&m);
  expect_error(mix.data, mix.len, EINVAL,
               (const char*[]){"message 1 (record batch)", "field a", "offsets buffer", NULL});
  bytes_free(&mix);
  adr_device_array_release(&a);
  s8.release(&s8);
  si.release(&si);
}

/* Arrow's binary key/value encoding of n pairs (kv[2i], kv[2i+1]). */
static char* kv_metadata(int32_t n, const char* const* kv) {
  size_t size = 4;
  for (int32_t i = 0; i < 2 * n; i++) size += 4 + strlen(kv[i]);
  char* m = malloc(size);
  assert_non_null(m);
  memcpy(m, &n, 4);
  size_t pos = 4;
  for (int32_t i = 0; i < 2 * n; i++) {
    int32_t l = (int32_t)strlen(kv[i]);
    memcpy(m + pos, &l, 4);
    memcpy(m + pos + 4, kv[i], (size_t)l);
    pos += 4 + (size_t)l;
  }
  return m;
}

/* What a schema carries besides layouts: names, nullability, schema and
 * field metadata (an extension type), ordered dictionaries, sorted map
 * keys, time zones, union type ids, decimal widths. */
static void test_schema_attributes(void** state) {
  (void)state;
  struct adr_error err;
  struct ArrowSchema s;
  test_schema(&s, "+s", "", 0, 6);
  static const char* const root_kv[] = {"origin", "adr test", "empty", ""};
  char* root_meta = kv_metadata(2, root_kv);
  ASSERT_OK(adr_schema_set_metadata(&s, root_meta, &err), &err);
  test_schema(s.children[0], "tsn:Pacific/Auckland", "when", ARROW_FLAG_NULLABLE, 0);
  static const char* const ext_kv[] = {"ARROW:extension:name", "my.ext",
                                       "ARROW:extension:metadata", "{\"x\":1}"};
  char* ext = kv_metadata(2, ext_kv);
  ASSERT_OK(adr_schema_set_metadata(s.children[0], ext, &err), &err);
  test_schema(s.children[1], "S", "colour", ARROW_FLAG_DICTIONARY_ORDERED, 0);
  ASSERT_OK(adr_schema_alloc_dictionary(s.children[1], &err), &err);
  test_schema(s.children[1]->dictionary, "u", NULL, 0, 0);
  test_schema(s.children[2], "+m", "m", ARROW_FLAG_MAP_KEYS_SORTED | ARROW_FLAG_NULLABLE, 1);
  test_schema(s.children[2]->children[0], "+s", "entries", 0, 2);
  test_schema(s.children[2]->children[0]->children[0], "u", "key", 0, 0);
  test_schema(s.children[2]->children[0]->children[1], "d:9,2,32", "value", ARROW_FLAG_NULLABLE,
              0);
  test_schema(s.children[3], "+ud:3,9", "dense", 0, 2);
  test_schema(s.children[3]->children[0], "d:76,5,256", "a", 0, 0);
  test_schema(s.children[3]->children[1], "ttu", "b", 0, 0);
  test_schema(s.children[4], "+us:1", "sparse", 0, 1);
  test_schema(s.children[4]->children[0], "vz", "", ARROW_FLAG_NULLABLE, 0);
  test_schema(s.children[5], "+r", "ree", 0, 2);
  test_schema(s.children[5]->children[0], "s", "run_ends", 0, 0);
  test_schema(s.children[5]->children[1], "tiD", "values", ARROW_FLAG_NULLABLE, 0);
  struct adr_ipc_message m;
  ASSERT_OK(adr_ipc_encode_schema(&s, &m, &err), &err);
  struct adr_ipc_decoded d;
  ASSERT_OK(adr_ipc_decode_message(m.metadata + 8, (size_t)m.metadata_size - 8, 0, &d, &err),
            &err);
  struct ArrowSchema got;
  ASSERT_OK(adr_ipc_decode_schema(&d, &got, &err), &err);
  ipc_test_assert_schema_equal(&s, &got);
  size_t root_len = 4 + 4 + 6 + 4 + 8 + 4 + 5 + 4;
  assert_non_null(got.metadata);
  assert_memory_equal(got.metadata, root_meta, root_len);
  got.release(&got);
  adr_ipc_decoded_release(&d);
  adr_ipc_message_release(&m);
  free(root_meta);
  free(ext);
  s.release(&s);
}

/* Sets the MetadataVersion of every message of stream b (the FlatBuffer
 * walked by hand: root -> Message -> vtable slot 0). */
static void set_version(struct bytes* b, uint16_t version) {
  size_t pos = 0;
  for (int64_t idx = 0; pos + 8 <= b->len; idx++) {
    int64_t m = 0;
    struct adr_error err;
    ASSERT_OK(adr_ipc_decode_prefix(b->data + pos, idx, &m, &err), &err);
    if (m == 0) break;
    uint8_t* fb = b->data + pos + 8;
    uint32_t root, so;
    uint16_t slot;
    memcpy(&root, fb, 4);
    memcpy(&so, fb + root, 4);
    memcpy(&slot, fb + root - so + 4, 2);
    memcpy(fb + root + slot, &version, 2);
    struct adr_ipc_decoded d;
    ASSERT_OK(adr_ipc_decode_message(fb, (size_t)m, idx, &d, &err), &err);
    pos += 8 + (size_t)m + (size_t)d.body_size;
    adr_ipc_decoded_release(&d);
  }
}

/* V4 unions had a validity buffer: refused; V4 without unions reads. */
static void test_v4(void** state) {
  (void)state;
  struct bytes b = case_stream("unions");
  set_version(&b, 3);
  expect_error(b.data, b.len, ENOTSUP, (const char*[]){"message 1 (record batch)", "V4", NULL});
  bytes_free(&b);
  b = case_stream("nested");
  set_version(&b, 3);
  struct adr_error err;
  assert_int_equal(read_bytes(b.data, b.len, &err), 0);
  bytes_free(&b);
}

/* A schema nested 70 levels deep: refused by the encoder, and by the
 * decoder when it arrives anyway. */
static void test_nesting(void** state) {
  (void)state;
  const int depth = 70;
  struct ArrowSchema s;
  test_schema(&s, "+s", "", 0, 1);
  struct ArrowSchema* cur = s.children[0];
  for (int i = 0; i < depth; i++) {
    test_schema(cur, "+l", "l", 0, 1);
    cur = cur->children[0];
  }
  test_schema(cur, "i", "item", 0, 0);
  struct adr_ipc_message m;
  struct adr_error err;
  assert_int_equal(adr_ipc_encode_schema(&s, &m, &err), EINVAL);
  assert_non_null(strstr(err.message, "nested deeper"));
  assert_non_null(strstr(err.message, "field l.l.l"));
  s.release(&s);

  /* The same chain written directly with the FlatBuffers writer. */
  struct fbb b;
  fbb_init(&b);
  fbb_start(&b);
  struct fbb_table t;
  fbb_table_begin(&t);
  fbb_table_scalar(&t, 0, 2, 4);
  fbb_table_scalar(&t, 1, 1, 1);
  fbb_table_offset(&t, 2);
  fbb_patch(&b, 0, fbb_table_end(&b, &t));
  size_t slot = t.pos[2];
  fbb_table_begin(&t);
  fbb_table_offset(&t, 1);
  fbb_patch(&b, slot, fbb_table_end(&b, &t));
  slot = t.pos[1];
  for (int i = 0; i <= depth; i++) {
    size_t v = fbb_vector(&b, 1, 4);
    fbb_patch(&b, slot, v);
    struct fbb_table f;
    fbb_table_begin(&f);
    fbb_table_scalar(&f, 2, 1, i < depth ? 12 : 2); /* List, then Int */
    fbb_table_offset(&f, 3);
    fbb_table_offset(&f, 5);
    fbb_patch(&b, v + 4, fbb_table_end(&b, &f));
    struct fbb_table ty;
    fbb_table_begin(&ty);
    if (i == depth) fbb_table_scalar(&ty, 0, 4, 32);
    fbb_patch(&b, f.pos[3], fbb_table_end(&b, &ty));
    slot = f.pos[5];
  }
  fbb_patch(&b, slot, fbb_vector(&b, 0, 4));
  assert_false(b.oom);
  struct adr_ipc_decoded d;
  ASSERT_OK(adr_ipc_decode_message(b.data, b.len, 0, &d, &err), &err);
  assert_int_equal(adr_ipc_decode_schema(&d, &s, &err), EINVAL);
  assert_non_null(strstr(err.message, "message 0 (schema)"));
  assert_non_null(strstr(err.message, "nested deeper"));
  adr_ipc_decoded_release(&d);
  fbb_free(&b);
}

/* A batch struct<s: utf8 or large utf8> of the given values (NULL: a null
 * slot whose bytes are `null_bytes`), sliced by `offset`, through the
 * stream; returns the reader's status, message in err. */
static int utf8_through(const char* format, const char* const* values, int n, int64_t offset,
                        const char* null_bytes, struct adr_error* err) {
  const bool large = strcmp(format, "U") == 0;
  const size_t ob = large ? 8 : 4;
  struct ArrowSchema schema;
  test_schema(&schema, "+s", "", 0, 1);
  test_schema(schema.children[0], format, "s", ARROW_FLAG_NULLABLE, 0);
  struct ArrowArray a;
  test_node(&a, 1, 1, n - offset, 0, 0);
  struct ArrowArray* c = a.children[0];
  test_node(c, 3, 0, n - offset, offset, 0);
  uint8_t* valid = test_buffer(c, 0, (size_t)(n + 7) / 8, NULL);
  uint8_t* offs = test_buffer(c, 1, (size_t)(n + 1) * ob, NULL);
  size_t total = 0;
  for (int k = 0; k < n; k++) total += strlen(values[k] ? values[k] : null_bytes);
  char* data = test_buffer(c, 2, total ? total : 1, NULL);
  int64_t at = 0, nulls = 0;
  for (int k = 0; k <= n; k++) {
    if (large)
      memcpy(offs + ob * (size_t)k, &at, 8);
    else {
      int32_t v = (int32_t)at;
      memcpy(offs + ob * (size_t)k, &v, 4);
    }
    if (k == n) break;
    const char* v = values[k] ? values[k] : null_bytes;
    memcpy(data + at, v, strlen(v));
    at += (int64_t)strlen(v);
    if (values[k])
      valid[k / 8] |= (uint8_t)(1u << (k % 8));
    else if (k >= offset)
      nulls++;
  }
  c->null_count = nulls;
  struct ArrowDeviceArray batch;
  test_export(&a, &batch);
  struct bytes b = {0};
  ipc_test_write_all(&b, &schema, &batch);
  struct ArrowSchema got_schema;
  struct ArrowDeviceArray got;
  int st = ipc_test_read_all(&b, NULL, &got_schema, &got, err);
  if (got.array.release) adr_device_array_release(&got);
  if (got_schema.release) got_schema.release(&got_schema);
  bytes_free(&b);
  adr_device_array_release(&batch);
  schema.release(&schema);
  return st;
}

static void expect_utf8(int st, const struct adr_error* err, const char* needle) {
  if (needle == NULL) {
    if (st != 0) fail_msg("expected valid, got %d: %s", st, err->message);
    return;
  }
  if (st != EINVAL || strstr(err->message, needle) == NULL)
    fail_msg("expected EINVAL with \"%s\", got %d: %s", needle, st, err->message);
}

/* UTF-8 under the reader's full validation, around the fast paths of the
 * validator (ASCII words; one pass over the data range when no value
 * boundary splits a character). */
static void test_utf8_validation(void** state) {
  (void)state;
  struct adr_error err;
  const char* fmts[] = {"u", "U"};
  for (int f = 0; f < 2; f++) {
    /* Valid: ASCII words, multi-byte characters, an empty value. */
    const char* ok[] = {"plain ascii text longer than a word", "\xc3\xa9t\xc3\xa9", "",
                        "\xe2\x82\xac and \xf0\x9f\x98\x80 mixed with ascii"};
    expect_utf8(utf8_through(fmts[f], ok, 4, 0, "", &err), &err, NULL);
    /* The data range is valid, but a value boundary splits "é". */
    const char* split[] = {"abcdefghijklmnop", "\xc3", "\xa9", "z"};
    expect_utf8(utf8_through(fmts[f], split, 4, 0, "", &err), &err,
                "invalid UTF-8 in value 1 at byte 0");
    /* A bad byte far into an ASCII run. */
    const char* late[] = {"0123456789abcdefghijklmnopqrstuvwxyz0\xff", "ok"};
    expect_utf8(utf8_through(fmts[f], late, 2, 0, "", &err), &err,
                "invalid UTF-8 in value 0 at byte 37");
    /* A surrogate (ED A0 80) and an overlong form (C0 AF) after ASCII. */
    const char* sur[] = {"fine", "abcdefgh\xed\xa0\x80"};
    expect_utf8(utf8_through(fmts[f], sur, 2, 0, "", &err), &err,
                "invalid UTF-8 in value 1 at byte 8");
    const char* over[] = {"abcdefghijklmnopq\xc0\xaf"};
    expect_utf8(utf8_through(fmts[f], over, 1, 0, "", &err), &err,
                "invalid UTF-8 in value 0 at byte 17");
    /* A null slot may hold anything. */
    const char* with_null[] = {"before", NULL, "after the null slot"};
    expect_utf8(utf8_through(fmts[f], with_null, 3, 0, "\xff\xfe garbage \x80", &err), &err, NULL);
    /* A slice leaves a bad value out; the slice's own bad value counts
     * from the slice's start. */
    const char* sliced[] = {"\xff bad but outside", "good", "\xc3\xa9", "x\x80"};
    expect_utf8(utf8_through(fmts[f], sliced, 3, 1, "", &err), &err, NULL);
    expect_utf8(utf8_through(fmts[f], sliced, 4, 1, "", &err), &err,
                "invalid UTF-8 in value 2 at byte 1");
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_schema_bytes),      cmocka_unit_test(test_batch_bytes),
      cmocka_unit_test(test_decode_hand_made),  cmocka_unit_test(test_truncations),
      cmocka_unit_test(test_corruptions),       cmocka_unit_test(test_named_errors),
      cmocka_unit_test(test_nesting),          cmocka_unit_test(test_v4),
      cmocka_unit_test(test_schema_attributes), cmocka_unit_test(test_utf8_validation),
  };
  return cmocka_run_group_tests_name("ipc-errors", tests, NULL, NULL);
}
