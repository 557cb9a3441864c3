/* SPDX-License-Identifier: Apache-2.0
 *
 * Fuzz target: the Arrow IPC decoder (core/ipc). Two input forms:
 *
 *  - first byte >= 0x80: the rest is a stream, decoded as is;
 *  - otherwise: edits applied to one of the streams the harness encodes at
 *    start-up (a table of most layouts, dictionaries included): the first
 *    byte picks the stream, then each group of 4 bytes is an edit (u16
 *    little-endian position, operation, value: set, xor, add or truncate),
 *    so short inputs reach deep into valid metadata.
 *
 * The stream is read with the message-level API into host memory and
 * every batch is validated fully by the reader (the built-in streams end
 * with a delta DictionaryBatch and a batch after it); a batch that decodes
 * is encoded again. Any input must end in a status with a message, never a
 * crash, a leak or an overread.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adr/ipc.h"
#include "fuzz.h"

/* ---- the built-in streams --------------------------------------------- */

struct bytes {
  uint8_t* data;
  size_t len;
};

static void append(struct bytes* b, const void* p, size_t n) {
  uint8_t* d = realloc(b->data, b->len + n);
  if (d == NULL) abort();
  b->data = d;
  if (p != NULL)
    memcpy(d + b->len, p, n);
  else
    memset(d + b->len, 0, n);
  b->len += n;
}

static void append_message(struct bytes* b, struct adr_ipc_message* m) {
  append(b, m->metadata, (size_t)m->metadata_size);
  size_t at = b->len;
  append(b, NULL, (size_t)m->body_size);
  for (int64_t i = 0; i < m->n_buffers; i++)
    if (m->buffers[i].size > 0)
      memcpy(b->data + at + m->buffers[i].body_offset, m->buffers[i].data,
             (size_t)m->buffers[i].size);
  adr_ipc_message_release(m);
}

#define CHECK(x)           \
  do {                     \
    if ((x) != 0) abort(); \
  } while (0)

static void* buf(struct ArrowArray* a, int64_t i, size_t size, const void* data) {
  void* p = NULL;
  CHECK(adr_array_alloc_buffer(a, i, size, NULL, &p, NULL));
  if (size) memcpy(p, data, size);
  return p;
}

static void leaf(struct ArrowArray* a, int64_t nbuf, int64_t len) {
  CHECK(adr_array_init(NULL, nbuf, 0, a, NULL));
  a->length = len;
}

/* struct<i: int32, s: utf8, l: list<int16>, d: dict<int8, utf8>,
 *        v: binary_view, r: ree<int32, int64>, f: fixed_size_list<2, uint8>,
 *        u: dense_union<int32, utf8>> of 5 rows. */
static void build(struct ArrowSchema* s, struct ArrowArray* a) {
  static const char* const fmts[] = {"i", "u", "+l", "c", "vz", "+r", "+w:2", "+ud:3,7"};
  const int n = 5;
  CHECK(adr_schema_init(s, "+s", "", 0, 8, NULL));
  for (int i = 0; i < 8; i++) {
    char name[2] = {(char)('a' + i), 0};
    int64_t nc = i == 2 || i == 6 ? 1 : i == 5 || i == 7 ? 2 : 0;
    CHECK(adr_schema_init(s->children[i], fmts[i], name, ARROW_FLAG_NULLABLE, nc, NULL));
  }
  CHECK(adr_schema_init(s->children[2]->children[0], "s", "item", 0, 0, NULL));
  CHECK(adr_schema_alloc_dictionary(s->children[3], NULL));
  CHECK(adr_schema_init(s->children[3]->dictionary, "u", NULL, 0, 0, NULL));
  CHECK(adr_schema_init(s->children[5]->children[0], "i", "run_ends", 0, 0, NULL));
  CHECK(adr_schema_init(s->children[5]->children[1], "l", "values", 0, 0, NULL));
  CHECK(adr_schema_init(s->children[6]->children[0], "C", "item", 0, 0, NULL));
  CHECK(adr_schema_init(s->children[7]->children[0], "i", "x", 0, 0, NULL));
  CHECK(adr_schema_init(s->children[7]->children[1], "u", "y", 0, 0, NULL));

  CHECK(adr_array_init(NULL, 1, 8, a, NULL));
  a->length = n;
  static const uint8_t valid[1] = {0x1B};
  static const int32_t ints[5] = {1, -2, 3, 400000, 5};
  static const int32_t soff[6] = {0, 1, 3, 3, 6, 10};
  static const char sdata[] = "abcdefghij";
  static const int32_t loff[6] = {0, 2, 2, 3, 5, 6};
  static const int16_t litems[6] = {1, 2, 3, 4, 5, 6};
  static const int8_t idx[5] = {0, 1, 2, 1, 0};
  static const int32_t doff[4] = {0, 3, 5, 9};
  static const char ddata[] = "redgobluey";
  uint8_t views[5][16];
  memset(views, 0, sizeof(views));
  for (int i = 0; i < 5; i++) {
    int32_t len = i < 3 ? 4 : 20;
    memcpy(views[i], &len, 4);
    if (i < 3) {
      memcpy(views[i] + 4, "wxyz", 4);
    } else {
      memcpy(views[i] + 4, "long", 4);
      int32_t bi = 0, off = (i - 3) * 4;
      memcpy(views[i] + 8, &bi, 4);
      memcpy(views[i] + 12, &off, 4);
    }
  }
  static const char vdata[] = "long-strings-in-a-variadic-buffer";
  static const int64_t vsize[1] = {33};
  static const int32_t rends[2] = {2, 5};
  static const int64_t rvals[2] = {-7, 9};
  static const uint8_t fitems[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  static const int8_t utypes[5] = {3, 7, 3, 7, 7};
  static const int32_t uoffs[5] = {0, 0, 1, 1, 2};
  static const int32_t ux[2] = {11, 12};
  static const int32_t uyoff[4] = {0, 1, 2, 3};

  struct ArrowArray* c = a->children[0];
  leaf(c, 2, n);
  buf(c, 0, 1, valid);
  buf(c, 1, sizeof(ints), ints);
  c->null_count = 2;
  c = a->children[1];
  leaf(c, 3, n);
  buf(c, 1, sizeof(soff), soff);
  buf(c, 2, 10, sdata);
  c = a->children[2];
  CHECK(adr_array_init(NULL, 2, 1, c, NULL));
  c->length = n;
  buf(c, 1, sizeof(loff), loff);
  leaf(c->children[0], 2, 6);
  buf(c->children[0], 1, sizeof(litems), litems);
  c = a->children[3];
  leaf(c, 2, n);
  buf(c, 1, sizeof(idx), idx);
  CHECK(adr_array_alloc_dictionary(c, NULL));
  leaf(c->dictionary, 3, 3);
  buf(c->dictionary, 1, sizeof(doff), doff);
  buf(c->dictionary, 2, 9, ddata);
  c = a->children[4];
  leaf(c, 4, n);
  buf(c, 1, sizeof(views), views);
  buf(c, 2, 33, vdata);
  buf(c, 3, sizeof(vsize), vsize);
  c = a->children[5];
  CHECK(adr_array_init(NULL, 0, 2, c, NULL));
  c->length = n;
  leaf(c->children[0], 2, 2);
  buf(c->children[0], 1, sizeof(rends), rends);
  leaf(c->children[1], 2, 2);
  buf(c->children[1], 1, sizeof(rvals), rvals);
  c = a->children[6];
  CHECK(adr_array_init(NULL, 1, 1, c, NULL));
  c->length = n;
  leaf(c->children[0], 2, 10);
  buf(c->children[0], 1, sizeof(fitems), fitems);
  c = a->children[7];
  CHECK(adr_array_init(NULL, 2, 2, c, NULL));
  c->length = n;
  buf(c, 0, sizeof(utypes), utypes);
  buf(c, 1, sizeof(uoffs), uoffs);
  leaf(c->children[0], 2, 2);
  buf(c->children[0], 1, sizeof(ux), ux);
  leaf(c->children[1], 3, 3);
  buf(c->children[1], 1, sizeof(uyoff), uyoff);
  buf(c->children[1], 2, 3, "pqr");
}

static struct bytes g_streams[2];

static void encode_stream(struct bytes* out, const struct ArrowSchema* s,
                          const struct ArrowDeviceArray* a, int64_t offset) {
  struct adr_ipc_message m;
  CHECK(adr_ipc_encode_schema(s, &m, NULL));
  append_message(out, &m);
  struct ArrowDeviceArray v = *a;
  v.array.offset = offset;
  v.array.length -= offset;
  CHECK(adr_ipc_encode_dictionary_batch(s, &v, 0, &m, NULL));
  append_message(out, &m);
  CHECK(adr_ipc_encode_record_batch(s, &v, &m, NULL));
  append_message(out, &m);
  /* A delta (the dictionary's last two values again) and a batch using
   * the five values. */
  CHECK(adr_ipc_encode_dictionary_delta(s, &v, 0, 1, &m, NULL));
  append_message(out, &m);
  CHECK(adr_ipc_encode_record_batch(s, &v, &m, NULL));
  append_message(out, &m);
  uint8_t eos[8];
  adr_ipc_end_of_stream(eos);
  append(out, eos, 8);
}

static void init_streams(void) {
  if (g_streams[0].data != NULL) return;
  struct ArrowSchema s;
  struct ArrowArray a;
  struct ArrowDeviceArray d;
  build(&s, &a);
  CHECK(adr_device_array_init(NULL, &a, NULL, &d, NULL));
  encode_stream(&g_streams[0], &s, &d, 0);
  encode_stream(&g_streams[1], &s, &d, 1); /* sliced: rebased and realigned */
  adr_device_array_release(&d);
  s.release(&s);
}

/* ---- the decoder under test --------------------------------------------- */

static void decode(const uint8_t* data, size_t len) {
  struct adr_error err;
  struct adr_ipc_reader* r = NULL;
  if (adr_ipc_reader_create(NULL, NULL, &r, &err) != 0) abort();
  size_t pos = 0;
  for (int64_t idx = 0; idx < 64; idx++) {
    if (len - pos < ADR_IPC_PREFIX_SIZE) break;
    int64_t msize = 0;
    err.message[0] = '\0';
    int st = adr_ipc_decode_prefix(data + pos, idx, &msize, &err);
    if (st != 0) {
      if (err.message[0] == '\0') abort();
      break;
    }
    pos += ADR_IPC_PREFIX_SIZE;
    if (msize == 0 || (size_t)msize > len - pos) break;
    struct adr_ipc_decoded d;
    err.message[0] = '\0';
    st = adr_ipc_decode_message(data + pos, (size_t)msize, idx, &d, &err);
    if (st != 0) {
      if (err.message[0] == '\0' || (st != EINVAL && st != EPROTO && st != ENOTSUP)) abort();
      break;
    }
    pos += (size_t)msize;
    if ((uint64_t)d.body_size > len - pos || d.body_size > (1 << 20)) {
      adr_ipc_decoded_release(&d);
      break;
    }
    if (d.type == ADR_IPC_MESSAGE_SCHEMA) {
      st = adr_ipc_reader_set_schema(r, &d, &err);
      if (st == 0) {
        struct adr_ipc_message m;
        if (adr_ipc_encode_schema(adr_ipc_reader_schema(r), &m, &err) != 0) abort();
        adr_ipc_message_release(&m);
      }
    } else {
      void* body = aligned_alloc(64, (size_t)d.body_alloc_size);
      if (body == NULL) abort();
      memcpy(body, data + pos, (size_t)d.body_size);
      struct ArrowDeviceArray batch;
      err.message[0] = '\0';
      st = adr_ipc_reader_consume(r, &d, body, &batch, &err);
      if (st != 0 && err.message[0] == '\0') abort();
      if (st == 0 && batch.array.release != NULL) {
        /* A batch that decoded is valid: it must encode again. */
        struct adr_ipc_message m;
        if (adr_ipc_encode_record_batch(adr_ipc_reader_schema(r), &batch, &m, &err) != 0) abort();
        adr_ipc_message_release(&m);
        adr_device_array_release(&batch);
      }
    }
    pos += (size_t)d.body_size;
    adr_ipc_decoded_release(&d);
    if (st != 0) break;
  }
  adr_ipc_reader_destroy(r);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > (1 << 16)) return 0;
  if (data[0] >= 0x80) {
    decode(data + 1, size - 1);
    return 0;
  }
  init_streams();
  const struct bytes* base = &g_streams[data[0] % 2];
  uint8_t* s = malloc(base->len);
  if (s == NULL) abort();
  memcpy(s, base->data, base->len);
  size_t len = base->len;
  for (size_t i = 1; i + 4 <= size; i += 4) {
    size_t pos = ((size_t)data[i] | (size_t)data[i + 1] << 8) % len;
    uint8_t v = data[i + 3];
    switch (data[i + 2] % 4) {
      case 0:
        s[pos] = v;
        break;
      case 1:
        s[pos] ^= v;
        break;
      case 2:
        s[pos] = (uint8_t)(s[pos] + v);
        break;
      case 3:
        len = pos + 1;
        break;
    }
  }
  decode(s, len);
  free(s);
  return 0;
}

/* Edit scripts (the standalone driver mutates them; NUL-free). */
const char* const fuzz_seeds[] = {
    "\x01",
    "\x02",
    "\x01\x10\x01\x01\xff",
    "\x02\x40\x01\x01\x7f",
    "\x01\x99\x01\x02\x08",
    "\x01\xc0\x01\x01\x80\x20\x02\x03\x01",
    "\x02\x90\x02\x01\x10",
    NULL,
};
