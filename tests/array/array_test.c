/* SPDX-License-Identifier: Apache-2.0
 *
 * Helpers of the array tests and the catalogue of test arrays: every
 * layout of the columnar format, nested, sliced, with nulls, built on the
 * CPU with adr's node API.
 */
#include "array_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool test_host_mode(void) {
  const char* v = getenv("ADR_ARRAY_HOST");
  return v != NULL && strcmp(v, "null") == 0;
}

struct adr_device* test_cpu(void) {
  struct adr_device* cpu = NULL;
  struct adr_error err;
  if (test_host_mode()) return NULL;
  ASSERT_OK(adr_device_get(ARROW_DEVICE_CPU, 0, &cpu, &err), &err);
  return cpu;
}

void test_schema(struct ArrowSchema* out, const char* format, const char* name, int64_t flags,
                 int64_t n_children) {
  struct adr_error err;
  ASSERT_OK(adr_schema_init(out, format, name, flags, n_children, &err), &err);
}

void test_node(struct ArrowArray* out, int64_t n_buffers, int64_t n_children, int64_t length,
               int64_t offset, int64_t null_count) {
  struct adr_error err;
  ASSERT_OK(adr_array_init(test_cpu(), n_buffers, n_children, out, &err), &err);
  out->length = length;
  out->offset = offset;
  out->null_count = null_count;
}

void* test_buffer(struct ArrowArray* a, int64_t i, size_t size, const void* data) {
  struct adr_error err;
  void* p = NULL;
  ASSERT_OK(adr_array_alloc_buffer(a, i, size, NULL, &p, &err), &err);
  if (size > 0) {
    if (data != NULL)
      memcpy(p, data, size);
    else
      memset(p, 0, size);
  }
  return p;
}

int64_t test_validity(struct ArrowArray* a, int64_t n, int null_every, int null_phase, int64_t from,
                      int64_t count) {
  uint8_t* bits = test_buffer(a, 0, (size_t)(n + 7) / 8, NULL);
  int64_t nulls = 0;
  for (int64_t k = 0; k < n; k++) {
    bool is_null = null_every > 0 && k % null_every == null_phase;
    if (!is_null)
      bits[k / 8] |= (uint8_t)(1u << (k % 8));
    else if (k >= from && k < from + count)
      nulls++;
  }
  return nulls;
}

void test_export(struct ArrowArray* a, struct ArrowDeviceArray* out) {
  struct adr_error err;
  ASSERT_OK(adr_device_array_init(test_cpu(), a, NULL, out, &err), &err);
}

void test_strings(struct ArrowArray* out, const char* const* values, int64_t n, int64_t offset,
                  bool large) {
  int64_t total = 0, nulls = 0;
  for (int64_t k = 0; k < n; k++) total += values[k] ? (int64_t)strlen(values[k]) : 0;
  test_node(out, 3, 0, n - offset, offset, 0);
  uint8_t* bits = test_buffer(out, 0, (size_t)(n + 7) / 8, NULL);
  void* offs = test_buffer(out, 1, (size_t)(n + 1) * (large ? 8 : 4), NULL);
  char* data = test_buffer(out, 2, (size_t)total, NULL);
  int64_t pos = 0;
  for (int64_t k = 0; k < n; k++) {
    if (large)
      ((int64_t*)offs)[k] = pos;
    else
      ((int32_t*)offs)[k] = (int32_t)pos;
    if (values[k] != NULL) {
      bits[k / 8] |= (uint8_t)(1u << (k % 8));
      size_t len = strlen(values[k]);
      memcpy(data + pos, values[k], len);
      pos += (int64_t)len;
    } else if (k >= offset) {
      nulls++;
    }
  }
  if (large)
    ((int64_t*)offs)[n] = pos;
  else
    ((int32_t*)offs)[n] = (int32_t)pos;
  out->null_count = nulls;
}

void test_int32s(struct ArrowArray* out, int64_t n, int32_t base, int null_every, int64_t offset) {
  test_node(out, 2, 0, n - offset, offset, 0);
  out->null_count = test_validity(out, n, null_every, 1, offset, n - offset);
  int32_t* v = test_buffer(out, 1, (size_t)n * 4, NULL);
  for (int64_t k = 0; k < n; k++) v[k] = base + (int32_t)k;
}

void test_assert_equal(const struct ArrowSchema* s, const struct ArrowDeviceArray* a,
                       const struct ArrowDeviceArray* b) {
  struct adr_error err, diff;
  bool eq = false;
  diff.message[0] = '\0';
  ASSERT_OK(adr_device_array_equal(s, a, b, &eq, &diff, &err), &err);
  if (!eq) fail_msg("arrays differ: %s", diff.message);
}

/* ---- the catalogue ---------------------------------------------------------- */

static const char* const words[] = {
    "alpha",
    NULL,
    "",
    "gamma-delta",
    "\xc3\xa9t\xc3\xa9",
    "a much longer string value here",
    "x",
    NULL,
    "zz",
    "0123456789012",
    "eleven",
    "twelve!",
    "",
    "\xe2\x82\xac",
    "fifteen",
    "sixteen-16",
    "s17",
    NULL,
    "eighteen",
    "nineteen",
    "twenty",
    "twenty-one",
    "22",
    "23",
    "twenty-four",
    "25",
    "twenty-six",
    "27",
    "twenty-eight",
    "29",
};
#define N_WORDS ((int64_t)(sizeof(words) / sizeof(words[0])))

static const char* const fixed_formats[] = {
    "b",          "c",   "C",        "s",         "S",
    "i",          "I",   "l",        "L",         "e",
    "f",          "g",   "d:9,2,32", "d:18,3,64", "d:38,10",
    "d:76,5,256", "w:3", "tdD",      "tdm",       "tts",
    "ttm",        "ttu", "ttn",      "tss:",      "tsu:Europe/Paris",
    "tDs",        "tDn", "tiM",      "tiD",       "tin",
};
#define N_FIXED ((int64_t)(sizeof(fixed_formats) / sizeof(fixed_formats[0])))

static void build_fixed(struct ArrowSchema* s, struct ArrowDeviceArray* out) {
  const int64_t n = 21;
  test_schema(s, "+s", "fixed", 0, N_FIXED);
  struct ArrowArray a;
  test_node(&a, 1, N_FIXED, 12, 5, 0);
  a.null_count = test_validity(&a, n, 5, 2, 5, 12);
  for (int64_t c = 0; c < N_FIXED; c++) {
    char name[32];
    snprintf(name, sizeof(name), "f%d", (int)c);
    test_schema(s->children[c], fixed_formats[c], name, ARROW_FLAG_NULLABLE, 0);
    struct adr_format f;
    struct adr_error err;
    ASSERT_OK(adr_format_parse(fixed_formats[c], &f, &err), &err);
    struct ArrowArray* ch = a.children[c];
    test_node(ch, 2, 0, n - (c % 3), c % 3, 0);
    ch->null_count = test_validity(ch, n, 3, (int)(c % 3), c % 3, n - (c % 3));
    if (f.bit_width == 1) {
      uint8_t* bits = test_buffer(ch, 1, (size_t)(n + 7) / 8, NULL);
      for (int64_t k = 0; k < n; k++)
        if ((k + c) % 3 == 0) bits[k / 8] |= (uint8_t)(1u << (k % 8));
    } else {
      int64_t w = f.bit_width / 8;
      uint8_t* d = test_buffer(ch, 1, (size_t)(n * w), NULL);
      for (int64_t k = 0; k < n * w; k++) d[k] = (uint8_t)(k * 7 + c * 13 + 1);
    }
  }
  test_export(&a, out);
}

static void build_null(struct ArrowSchema* s, struct ArrowDeviceArray* out) {
  test_schema(s, "+s", "", 0, 2);
  test_schema(s->children[0], "n", "nothing", ARROW_FLAG_NULLABLE, 0);
  test_schema(s->children[1], "i", "i", ARROW_FLAG_NULLABLE, 0);
  struct ArrowArray a;
  test_node(&a, 1, 2, 9, 2, 0);
  test_node(a.children[0], 0, 0, 11, 0, 11);
  test_int32s(a.children[1], 11, 100, 4, 0);
  test_export(&a, out);
}

static void build_strings(struct ArrowSchema* s, struct ArrowDeviceArray* out) {
  test_schema(s, "+s", "", 0, 4);
  const char* fmts[] = {"u", "U", "z", "Z"};
  struct ArrowArray a;
  test_node(&a, 1, 4, 17, 9, 0);
  for (int c = 0; c < 4; c++) {
    test_schema(s->children[c], fmts[c], "str", ARROW_FLAG_NULLABLE, 0);
    test_strings(a.children[c], words, N_WORDS, c, c == 1 || c == 3);
  }
  test_export(&a, out);
}

static void build_string_sliced(struct ArrowSchema* s, struct ArrowDeviceArray* out) {
  test_schema(s, "u", "sliced", ARROW_FLAG_NULLABLE, 0);
  struct ArrowArray a;
  test_strings(&a, words, N_WORDS, 0, false);
  /* offset 9 (r = 1 after the copy), length 13: a window in the middle */
  a.offset = 9;
  a.length = 13;
  a.null_count = -1;
  test_export(&a, out);
}

/* One view: inline when short, else in variadic buffer `buf` at `off`. */
static void put_view(uint8_t* v, const char* str, int32_t buf, int32_t off) {
  int32_t len = (int32_t)strlen(str);
  memset(v, 0, 16);
  memcpy(v, &len, 4);
  if (len <= 12) {
    memcpy(v + 4, str, (size_t)len);
  } else {
    memcpy(v + 4, str, 4);
    memcpy(v + 8, &buf, 4);
    memcpy(v + 12, &off, 4);
  }
}

static void build_views(struct ArrowSchema* s, struct ArrowDeviceArray* out) {
  test_schema(s, "+s", "", 0, 2);
  test_schema(s->children[0], "vu", "sv", ARROW_FLAG_NULLABLE, 0);
  test_schema(s->children[1], "vz", "bv", ARROW_FLAG_NULLABLE, 0);
  const int64_t n = 10;
  struct ArrowArray a;
  test_node(&a, 1, 2, 7, 2, 0);
  /* string view: 2 variadic buffers */
  struct ArrowArray* sv = a.children[0];
  test_node(sv, 5, 0, n, 0, 0);
  sv->null_count = test_validity(sv, n, 4, 3, 0, n);
  const char* b0 = "this one is long enough|and this second one too";
  const char* b1 = "\xe2\x82\xac uro-denominated long value";
  test_buffer(sv, 2, strlen(b0), b0);
  test_buffer(sv, 3, strlen(b1), b1);
  int64_t sizes[2] = {(int64_t)strlen(b0), (int64_t)strlen(b1)};
  test_buffer(sv, 4, sizeof(sizes), sizes);
  uint8_t* views = test_buffer(sv, 1, (size_t)n * 16, NULL);
  for (int64_t k = 0; k < n; k++) {
    if (k % 3 == 0)
      put_view(views + 16 * k, "short", 0, 0);
    else if (k % 3 == 1)
      put_view(views + 16 * k, "this one is long enough", 0, 0);
    else
      put_view(views + 16 * k, b1, 1, 0);
  }
  /* and one view into the middle of buffer 0 */
  put_view(views + 16 * 5, "and this second one too", 0, 24);
  /* binary view: no variadic buffers, all inline */
  struct ArrowArray* bv = a.children[1];
  test_node(bv, 3, 0, n, 0, 0);
  test_buffer(bv, 2, 0, NULL);
  uint8_t* bviews = test_buffer(bv, 1, (size_t)n * 16, NULL);
  for (int64_t k = 0; k < n; k++) put_view(bviews + 16 * k, k % 2 ? "\x01\x02\x03" : "", 0, 0);
  test_export(&a, out);
}

static void build_lists(struct ArrowSchema* s, struct ArrowDeviceArray* out) {
  const int64_t n = 16;
  test_schema(s, "+s", "", 0, 5);
  test_schema(s->children[0], "+l", "list", ARROW_FLAG_NULLABLE, 1);
  test_schema(s->children[0]->children[0], "i", "item", ARROW_FLAG_NULLABLE, 0);
  test_schema(s->children[1], "+L", "large_list", ARROW_FLAG_NULLABLE, 1);
  test_schema(s->children[1]->children[0], "u", "item", ARROW_FLAG_NULLABLE, 0);
  test_schema(s->children[2], "+vl", "list_view", ARROW_FLAG_NULLABLE, 1);
  test_schema(s->children[2]->children[0], "i", "item", ARROW_FLAG_NULLABLE, 0);
  test_schema(s->children[3], "+vL", "large_list_view", ARROW_FLAG_NULLABLE, 1);
  test_schema(s->children[3]->children[0], "i", "item", ARROW_FLAG_NULLABLE, 0);
  test_schema(s->children[4], "+w:3", "fsl", ARROW_FLAG_NULLABLE, 1);
  test_schema(s->children[4]->children[0], "s", "item", ARROW_FLAG_NULLABLE, 0);
  struct ArrowArray a;
  test_node(&a, 1, 5, 10, 4, 0);
  a.null_count = test_validity(&a, n, 6, 5, 4, 10);

  /* list<int32>: element k has k % 4 items */
  struct ArrowArray* l = a.children[0];
  test_node(l, 2, 1, n, 0, 0);
  l->null_count = test_validity(l, n, 5, 0, 0, n);
  int32_t* lo = test_buffer(l, 1, (size_t)(n + 1) * 4, NULL);
  int32_t pos = 0;
  for (int64_t k = 0; k < n; k++) {
    lo[k] = pos;
    pos += (int32_t)(k % 4);
  }
  lo[n] = pos;
  test_int32s(l->children[0], pos + 3, 1000, 7, 3); /* child with its own offset */

  /* large_list<utf8> over the words */
  struct ArrowArray* L = a.children[1];
  test_node(L, 2, 1, n, 0, 0);
  int64_t* Lo = test_buffer(L, 1, (size_t)(n + 1) * 8, NULL);
  for (int64_t k = 0; k <= n; k++) Lo[k] = (k * (N_WORDS - 1)) / n;
  test_strings(L->children[0], words, N_WORDS, 0, false);

  /* list views: out of order, overlapping */
  for (int c = 2; c <= 3; c++) {
    struct ArrowArray* v = a.children[c];
    test_node(v, 3, 1, n, 0, 0);
    v->null_count = test_validity(v, n, 4, 2, 0, n);
    int64_t w = c == 2 ? 4 : 8;
    uint8_t* vo = test_buffer(v, 1, (size_t)(n * w), NULL);
    uint8_t* vs = test_buffer(v, 2, (size_t)(n * w), NULL);
    for (int64_t k = 0; k < n; k++) {
      int64_t o = (n - k) % 7, sz = k % 3;
      if (w == 4) {
        ((int32_t*)vo)[k] = (int32_t)o;
        ((int32_t*)vs)[k] = (int32_t)sz;
      } else {
        ((int64_t*)vo)[k] = o;
        ((int64_t*)vs)[k] = sz;
      }
    }
    test_int32s(v->children[0], 9, 50 * c, 0, 0);
  }

  /* fixed_size_list<int16>[3] with a child offset */
  struct ArrowArray* f = a.children[4];
  test_node(f, 1, 1, n, 0, 0);
  f->null_count = test_validity(f, n, 3, 1, 0, n);
  struct ArrowArray* fc = f->children[0];
  test_node(fc, 2, 0, n * 3, 2, 0);
  fc->null_count = test_validity(fc, n * 3 + 2, 5, 4, 2, n * 3);
  int16_t* fv = test_buffer(fc, 1, (size_t)(n * 3 + 2) * 2, NULL);
  for (int64_t k = 0; k < n * 3 + 2; k++) fv[k] = (int16_t)(k * 11 - 40);
  test_export(&a, out);
}

/* Offsets (buffer 1) of n list-like slots of 0, 1, 2, 0, 1, 2 ... entries;
 * returns the number of entries. */
static int32_t test_offsets_0_1_2(struct ArrowArray* a, int64_t n) {
  int32_t* o = test_buffer(a, 1, (size_t)(n + 1) * 4, NULL);
  int32_t pos = 0;
  for (int64_t k = 0; k < n; k++) {
    o[k] = pos;
    pos += (int32_t)(k % 3);
  }
  o[n] = pos;
  return pos;
}

static void build_map(struct ArrowSchema* s, struct ArrowDeviceArray* out) {
  test_schema(s, "+m", "map", ARROW_FLAG_NULLABLE, 1);
  test_schema(s->children[0], "+s", "entries", 0, 2);
  test_schema(s->children[0]->children[0], "u", "key", 0, 0);
  test_schema(s->children[0]->children[1], "i", "value", ARROW_FLAG_NULLABLE, 0);
  const int64_t n = 7;
  struct ArrowArray a;
  test_node(&a, 2, 1, n - 1, 1, 0);
  a.null_count = test_validity(&a, n, 4, 2, 1, n - 1);
  int32_t pos = test_offsets_0_1_2(&a, n);
  struct ArrowArray* e = a.children[0];
  test_node(e, 1, 2, pos, 0, 0);
  const char* keys[] = {"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9"};
  test_strings(e->children[0], keys, pos, 0, false);
  test_int32s(e->children[1], pos, -5, 3, 0);
  test_export(&a, out);
}

static void build_unions(struct ArrowSchema* s, struct ArrowDeviceArray* out) {
  const int64_t n = 12;
  test_schema(s, "+s", "", 0, 2);
  test_schema(s->children[0], "+us:0,1", "sparse", 0, 2);
  test_schema(s->children[0]->children[0], "i", "i", ARROW_FLAG_NULLABLE, 0);
  test_schema(s->children[0]->children[1], "u", "s", ARROW_FLAG_NULLABLE, 0);
  test_schema(s->children[1], "+ud:5,7", "dense", 0, 2);
  test_schema(s->children[1]->children[0], "l", "l", ARROW_FLAG_NULLABLE, 0);
  test_schema(s->children[1]->children[1], "u", "s", ARROW_FLAG_NULLABLE, 0);
  struct ArrowArray a;
  test_node(&a, 1, 2, 8, 3, 0);
  struct ArrowArray* sp = a.children[0];
  test_node(sp, 1, 2, n, 0, 0);
  int8_t* st = test_buffer(sp, 0, (size_t)n, NULL);
  for (int64_t k = 0; k < n; k++) st[k] = (int8_t)(k % 3 == 0);
  test_int32s(sp->children[0], n, 7, 4, 0);
  test_strings(sp->children[1], words, n, 0, false);
  struct ArrowArray* de = a.children[1];
  test_node(de, 2, 2, n, 0, 0);
  int8_t* dt = test_buffer(de, 0, (size_t)n, NULL);
  int32_t* doff = test_buffer(de, 1, (size_t)n * 4, NULL);
  int32_t c0 = 0, c1 = 0;
  for (int64_t k = 0; k < n; k++) {
    dt[k] = k % 2 ? 7 : 5;
    doff[k] = k % 2 ? c1++ : c0++;
  }
  struct ArrowArray* dl = de->children[0];
  test_node(dl, 2, 0, c0, 0, 0);
  int64_t* lv = test_buffer(dl, 1, (size_t)c0 * 8, NULL);
  for (int32_t k = 0; k < c0; k++) lv[k] = (int64_t)k * 1000000007LL;
  test_strings(de->children[1], words + 3, c1, 0, false);
  test_export(&a, out);
}

static void build_dictionary(struct ArrowSchema* s, struct ArrowDeviceArray* out) {
  const int64_t n = 14;
  test_schema(s, "+s", "", 0, 2);
  test_schema(s->children[0], "c", "dict8", ARROW_FLAG_NULLABLE, 0);
  struct adr_error err;
  ASSERT_OK(adr_schema_alloc_dictionary(s->children[0], &err), &err);
  test_schema(s->children[0]->dictionary, "u", NULL, ARROW_FLAG_NULLABLE, 0);
  test_schema(s->children[1], "S", "dict16", ARROW_FLAG_NULLABLE, 0);
  ASSERT_OK(adr_schema_alloc_dictionary(s->children[1], &err), &err);
  test_schema(s->children[1]->dictionary, "l", NULL, 0, 0);
  struct ArrowArray a;
  test_node(&a, 1, 2, n - 2, 2, 0);
  struct ArrowArray* d8 = a.children[0];
  test_node(d8, 2, 0, n, 0, 0);
  d8->null_count = test_validity(d8, n, 5, 1, 0, n);
  int8_t* i8 = test_buffer(d8, 1, (size_t)n, NULL);
  for (int64_t k = 0; k < n; k++) i8[k] = (int8_t)((k * 5) % 6);
  ASSERT_OK(adr_array_alloc_dictionary(d8, &err), &err);
  test_strings(d8->dictionary, words + 2, 7, 1, false);
  struct ArrowArray* d16 = a.children[1];
  test_node(d16, 2, 0, n, 0, 0);
  uint16_t* i16 = test_buffer(d16, 1, (size_t)n * 2, NULL);
  for (int64_t k = 0; k < n; k++) i16[k] = (uint16_t)(k % 4);
  ASSERT_OK(adr_array_alloc_dictionary(d16, &err), &err);
  test_node(d16->dictionary, 2, 0, 4, 0, 0);
  int64_t* dv = test_buffer(d16->dictionary, 1, 32, NULL);
  for (int k = 0; k < 4; k++) dv[k] = -1000 * k;
  test_export(&a, out);
}

static void build_ree(struct ArrowSchema* s, struct ArrowDeviceArray* out) {
  test_schema(s, "+r", "ree", 0, 2);
  test_schema(s->children[0], "i", "run_ends", 0, 0);
  test_schema(s->children[1], "u", "values", ARROW_FLAG_NULLABLE, 0);
  struct ArrowArray a;
  test_node(&a, 0, 2, 9, 3, 0);
  const int32_t ends[] = {2, 5, 6, 10, 12};
  test_node(a.children[0], 2, 0, 5, 0, 0);
  test_buffer(a.children[0], 1, sizeof(ends), ends);
  test_strings(a.children[1], words, 5, 0, false);
  test_export(&a, out);
}

/* list<struct<name: utf8, tags: list<dictionary<int32 -> utf8>>>> */
static void build_nested(struct ArrowSchema* s, struct ArrowDeviceArray* out) {
  struct adr_error err;
  test_schema(s, "+l", "outer", ARROW_FLAG_NULLABLE, 1);
  struct ArrowSchema* st = s->children[0];
  test_schema(st, "+s", "item", ARROW_FLAG_NULLABLE, 2);
  test_schema(st->children[0], "u", "name", ARROW_FLAG_NULLABLE, 0);
  test_schema(st->children[1], "+l", "tags", ARROW_FLAG_NULLABLE, 1);
  test_schema(st->children[1]->children[0], "i", "tag", ARROW_FLAG_NULLABLE, 0);
  ASSERT_OK(adr_schema_alloc_dictionary(st->children[1]->children[0], &err), &err);
  test_schema(st->children[1]->children[0]->dictionary, "u", NULL, 0, 0);

  const int64_t n = 6, m = 12;
  struct ArrowArray a;
  test_node(&a, 2, 1, n - 1, 1, 0);
  a.null_count = test_validity(&a, n, 4, 3, 1, n - 1);
  int32_t* o = test_buffer(&a, 1, (size_t)(n + 1) * 4, NULL);
  for (int64_t k = 0; k <= n; k++) o[k] = (int32_t)(k * 2);
  struct ArrowArray* sa = a.children[0];
  test_node(sa, 1, 2, m, 0, 0);
  sa->null_count = test_validity(sa, m, 5, 4, 0, m);
  test_strings(sa->children[0], words + 5, m, 0, false);
  struct ArrowArray* tl = sa->children[1];
  test_node(tl, 2, 1, m, 0, 0);
  int32_t pos = test_offsets_0_1_2(tl, m);
  struct ArrowArray* idx = tl->children[0];
  test_node(idx, 2, 0, pos, 0, 0);
  int32_t* iv = test_buffer(idx, 1, (size_t)pos * 4, NULL);
  for (int32_t k = 0; k < pos; k++) iv[k] = k % 4;
  ASSERT_OK(adr_array_alloc_dictionary(idx, &err), &err);
  const char* dict[] = {"red", "green", "blue", "a-rather-long-colour-name"};
  test_strings(idx->dictionary, dict, 4, 0, false);
  test_export(&a, out);
}

static void build_sample(struct ArrowSchema* s, struct ArrowDeviceArray* out) {
  struct adr_error err;
  ASSERT_OK(fixture_sample_table(1000, s, out, &err), &err);
}

static void build_sample_sliced(struct ArrowSchema* s, struct ArrowDeviceArray* out) {
  build_sample(s, out);
  out->array.offset = 37;
  out->array.length = 500;
}

static void build_empty(struct ArrowSchema* s, struct ArrowDeviceArray* out) {
  test_schema(s, "+s", "", 0, 3);
  test_schema(s->children[0], "i", "i", ARROW_FLAG_NULLABLE, 0);
  test_schema(s->children[1], "u", "u", ARROW_FLAG_NULLABLE, 0);
  test_schema(s->children[2], "+l", "l", ARROW_FLAG_NULLABLE, 1);
  test_schema(s->children[2]->children[0], "i", "item", ARROW_FLAG_NULLABLE, 0);
  struct ArrowArray a;
  test_node(&a, 1, 3, 0, 0, 0);
  test_node(a.children[0], 2, 0, 0, 0, 0);
  test_node(a.children[1], 3, 0, 0, 0, 0); /* NULL offsets are allowed at length 0 */
  test_node(a.children[2], 2, 1, 0, 0, 0);
  test_node(a.children[2]->children[0], 2, 0, 0, 0, 0);
  test_export(&a, out);
}

/* A node with no buffers at all and, as the C data interface allows when
 * n_buffers is 0, buffers == NULL (the node's own release does not use
 * the field). */
static void no_buffers(struct ArrowArray* out, int64_t length, int64_t offset) {
  test_node(out, 0, 0, length, offset, length);
  out->buffers = NULL;
}

/* map<utf8, null>: entries whose values have no buffers. */
static void build_map_null_values(struct ArrowSchema* s, struct ArrowDeviceArray* out) {
  test_schema(s, "+m", "map", ARROW_FLAG_NULLABLE, 1);
  test_schema(s->children[0], "+s", "entries", 0, 2);
  test_schema(s->children[0]->children[0], "u", "key", 0, 0);
  test_schema(s->children[0]->children[1], "n", "value", ARROW_FLAG_NULLABLE, 0);
  const int64_t n = 9;
  struct ArrowArray a;
  test_node(&a, 2, 1, n - 3, 3, 0);
  a.null_count = test_validity(&a, n, 5, 4, 3, n - 3);
  int32_t pos = test_offsets_0_1_2(&a, n);
  struct ArrowArray* e = a.children[0];
  test_node(e, 1, 2, pos, 0, 0);
  const char* keys[] = {"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7", "k8", "k9"};
  test_strings(e->children[0], keys, pos, 0, false);
  no_buffers(e->children[1], pos, 0);
  test_export(&a, out);
}

/* map<null, int32> with no entries (keys of the null type are nulls, so a
 * valid one has none): keys without buffers, maps null or empty. */
static void build_map_null_keys(struct ArrowSchema* s, struct ArrowDeviceArray* out) {
  test_schema(s, "+m", "map", ARROW_FLAG_NULLABLE, 1);
  test_schema(s->children[0], "+s", "entries", 0, 2);
  test_schema(s->children[0]->children[0], "n", "key", 0, 0);
  test_schema(s->children[0]->children[1], "i", "value", ARROW_FLAG_NULLABLE, 0);
  const int64_t n = 12;
  struct ArrowArray a;
  test_node(&a, 2, 1, n - 2, 2, 0);
  a.null_count = test_validity(&a, n, 3, 0, 2, n - 2);
  test_buffer(&a, 1, (size_t)(n + 1) * 4, NULL); /* all offsets 0 */
  struct ArrowArray* e = a.children[0];
  test_node(e, 1, 2, 0, 0, 0);
  no_buffers(e->children[0], 0, 0);
  test_node(e->children[1], 2, 0, 0, 0, 0); /* NULL buffers are allowed at length 0 */
  test_export(&a, out);
}

/* No validity buffers with null_count -1 (unknown), which reads as "no
 * nulls" (docs/arrays.md), at every level: the struct itself, int32,
 * utf8, list; and a null column with buffers == NULL; sliced. */
static void build_validity_absent(struct ArrowSchema* s, struct ArrowDeviceArray* out) {
  test_schema(s, "+s", "", ARROW_FLAG_NULLABLE, 4);
  test_schema(s->children[0], "i", "i", ARROW_FLAG_NULLABLE, 0);
  test_schema(s->children[1], "u", "u", ARROW_FLAG_NULLABLE, 0);
  test_schema(s->children[2], "+l", "l", ARROW_FLAG_NULLABLE, 1);
  test_schema(s->children[2]->children[0], "i", "item", ARROW_FLAG_NULLABLE, 0);
  test_schema(s->children[3], "n", "n", ARROW_FLAG_NULLABLE, 0);
  const int64_t n = 21;
  struct ArrowArray a;
  test_node(&a, 1, 4, n - 11, 11, -1); /* r = 3 after a sliced copy */
  struct ArrowArray* i = a.children[0];
  test_node(i, 2, 0, n, 0, -1);
  int32_t* v = test_buffer(i, 1, (size_t)n * 4, NULL);
  for (int64_t k = 0; k < n; k++) v[k] = (int32_t)(k * k - 50);
  struct ArrowArray* u = a.children[1];
  test_node(u, 3, 0, n, 0, -1);
  int32_t* uo = test_buffer(u, 1, (size_t)(n + 1) * 4, NULL);
  char* ud = test_buffer(u, 2, (size_t)n, NULL);
  for (int64_t k = 0; k <= n; k++) uo[k] = (int32_t)k;
  for (int64_t k = 0; k < n; k++) ud[k] = (char)('a' + k % 26);
  struct ArrowArray* l = a.children[2];
  test_node(l, 2, 1, n, 0, -1);
  int32_t* lo = test_buffer(l, 1, (size_t)(n + 1) * 4, NULL);
  for (int64_t k = 0; k <= n; k++) lo[k] = (int32_t)(2 * k);
  test_int32s(l->children[0], 2 * n, 7, 0, 0);
  no_buffers(a.children[3], n, 0);
  test_export(&a, out);
}

const struct test_case test_cases[] = {
    {"fixed-width", build_fixed},
    {"null", build_null},
    {"strings", build_strings},
    {"string-sliced", build_string_sliced},
    {"views", build_views},
    {"lists", build_lists},
    {"map", build_map},
    {"unions", build_unions},
    {"dictionary", build_dictionary},
    {"run-end-encoded", build_ree},
    {"nested", build_nested},
    {"sample", build_sample},
    {"sample-sliced", build_sample_sliced},
    {"empty", build_empty},
    {"map-null-values", build_map_null_values},
    {"map-null-keys", build_map_null_keys},
    {"validity-absent", build_validity_absent},
};
const size_t test_case_count = sizeof(test_cases) / sizeof(test_cases[0]);
