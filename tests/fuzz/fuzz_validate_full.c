/* SPDX-License-Identifier: Apache-2.0
 *
 * Fuzz target: full validation, deep copy and comparison of CPU arrays.
 *
 * The input describes an ArrowSchema/ArrowArray tree whose buffers are real
 * allocations of exactly the size the format implies (so AddressSanitizer
 * sees any read past them) filled from the input: bitmaps, values, type
 * ids, offsets (mostly monotonic, sometimes raw), run ends, views, variadic
 * buffers, dictionaries, NULL buffers (validity or, with no buffers at all,
 * the `buffers` array itself), maps whose keys have no buffers.
 *
 * Properties, for every input:
 *  - validation (structure and full) and the deep copy return 0 or EINVAL
 *    with a message, never crash;
 *  - an array that passes full validation deep-copies, its copy passes full
 *    validation too, and adr_device_array_equal says the two are equal.
 *
 * Offsets and variadic sizes are trusted by the validator as the C data
 * interface defines them (no buffer carries its size), so the harness
 * keeps them inside what it allocated: var-binary data buffers hold 128
 * bytes and offsets stay below that, variadic sizes are the true ones.
 */
#include <errno.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "adr/adr.h"
#include "adr/array.h"
#include "fuzz.h"

static const char* const formats[] = {
    "n",  "b",  "c",   "C",   "s",    "i",  "l",      "L",       "e",       "g",
    "z",  "Z",  "u",   "U",   "vz",   "vu", "d:10,2", "w:3",     "tdD",     "tin",
    "+l", "+L", "+vl", "+vL", "+w:2", "+s", "+m",     "+ud:0,1", "+us:3,5", "+r",
};
#define N_FORMATS (sizeof(formats) / sizeof(formats[0]))
static const char* const int_formats[] = {"c", "C", "s", "i", "l", "L"};

#define VAR_DATA 128 /* bytes of every var-binary data buffer */
#define VARIADIC 32  /* bytes of every view variadic buffer */

struct reader {
  const uint8_t* p;
  size_t n;
};

static uint8_t u8(struct reader* r) {
  if (r->n == 0) return 0;
  r->n--;
  return *r->p++;
}

struct arena {
  void* blocks[8192];
  int n;
};

static void* alloc(struct arena* a, size_t size) {
  if (a->n == 8192) return NULL;
  void* p = calloc(1, size ? size : 1);
  if (p) a->blocks[a->n++] = p;
  return p;
}

/* Exactly `size` bytes (malloc, not calloc'd to a minimum) so ASan sees
 * reads past the end; filled from the input. */
static void* buffer(struct arena* a, struct reader* r, int64_t size) {
  if (a->n == 8192 || size < 0 || size > (1 << 16)) return NULL;
  uint8_t* p = malloc(size ? (size_t)size : 1);
  if (p == NULL) return NULL;
  a->blocks[a->n++] = p;
  for (int64_t i = 0; i < size; i++) p[i] = u8(r);
  return p;
}

static void put_offset(void* buf, int width, int64_t i, int64_t v) {
  if (width == 4)
    ((int32_t*)buf)[i] = (int32_t)v;
  else
    ((int64_t*)buf)[i] = v;
}

/* n offsets: mostly non-decreasing from a small start, capped at `cap`;
 * with `raw`, any small signed values. */
static void fill_offsets(struct reader* r, void* buf, int width, int64_t n, int64_t cap, bool raw) {
  int64_t v = u8(r) % 4;
  for (int64_t i = 0; i < n; i++) {
    if (raw) {
      v = (int8_t)u8(r);
    } else {
      v += u8(r) % 5;
      if (v > cap) v = cap;
    }
    put_offset(buf, width, i, v);
  }
}

static int64_t popcount_range(const uint8_t* bits, int64_t from, int64_t n) {
  int64_t c = 0;
  for (int64_t i = from; i < from + n; i++) c += (bits[i >> 3] >> (i & 7)) & 1;
  return c;
}

static void noop_schema_release(struct ArrowSchema* s) {
  (void)s;
}
static void noop_array_release(struct ArrowArray* a) {
  (void)a;
}

static bool build(struct reader* r, struct arena* ar, int depth, const char* format,
                  int64_t min_length, struct ArrowSchema* s, struct ArrowArray* a);

static bool build_children(struct reader* r, struct arena* ar, int depth,
                           const struct adr_format* f, int64_t end, struct ArrowSchema* s,
                           struct ArrowArray* a, uint8_t flags) {
  int64_t nc = f->n_children >= 0 ? f->n_children : 1 + u8(r) % 2;
  if (depth >= 5) nc = f->n_children > 0 ? f->n_children : 0;
  if (flags & 0x40) nc = u8(r) % 3; /* sometimes the wrong count */
  s->n_children = a->n_children = nc;
  if (nc == 0) return true;
  struct ArrowSchema** sc = alloc(ar, (size_t)nc * sizeof(*sc));
  struct ArrowArray** ac = alloc(ar, (size_t)nc * sizeof(*ac));
  if (sc == NULL || ac == NULL) return false;
  s->children = sc;
  a->children = ac;
  bool free_shape = flags & 0x80; /* children as the input says, not as the type wants */
  for (int64_t i = 0; i < nc; i++) {
    sc[i] = alloc(ar, sizeof(**sc));
    ac[i] = alloc(ar, sizeof(**ac));
    if (sc[i] == NULL || ac[i] == NULL) return false;
    const char* cf = NULL;
    int64_t need = 0;
    if (!free_shape) {
      switch (f->layout) {
        case ADR_LAYOUT_STRUCT:
        case ADR_LAYOUT_SPARSE_UNION:
          need = end;
          break;
        case ADR_LAYOUT_FIXED_LIST:
          need = end * f->fixed_size;
          break;
        case ADR_LAYOUT_RUN_END:
          if (i == 0) cf = int_formats[2 + u8(r) % 3];
          break;
        default:
          break;
      }
      if (f->type == ADR_TYPE_MAP) cf = "+s";
      if (depth > 0 && s->format != NULL && strcmp(s->format, "+s") == 0 && s->name != NULL &&
          strcmp(s->name, "entries") == 0)
        cf = NULL;
    }
    if (!build(r, ar, depth + 1, cf, need, sc[i], ac[i])) return false;
    if (!free_shape && f->type == ADR_TYPE_MAP) {
      /* entries: a struct of exactly two children, keys not nullable */
      sc[i]->name = "entries";
      if (ac[i]->n_children != 2) {
        /* rebuild with two children */
        struct ArrowSchema** gs = alloc(ar, 2 * sizeof(*gs));
        struct ArrowArray** ga = alloc(ar, 2 * sizeof(*ga));
        if (gs == NULL || ga == NULL) return false;
        for (int k = 0; k < 2; k++) {
          gs[k] = alloc(ar, sizeof(**gs));
          ga[k] = alloc(ar, sizeof(**ga));
          if (gs[k] == NULL || ga[k] == NULL) return false;
          if (!build(r, ar, depth + 2, NULL, ac[i]->offset + ac[i]->length, gs[k], ga[k]))
            return false;
        }
        sc[i]->n_children = ac[i]->n_children = 2;
        sc[i]->children = gs;
        ac[i]->children = ga;
      }
      sc[i]->children[0]->flags &= ~ARROW_FLAG_NULLABLE;
    }
  }
  return true;
}

static bool build(struct reader* r, struct arena* ar, int depth, const char* format,
                  int64_t min_length, struct ArrowSchema* s, struct ArrowArray* a) {
  uint8_t flags = u8(r);
  s->format = format ? format : formats[u8(r) % N_FORMATS];
  s->name = "";
  s->flags = flags & 1 ? ARROW_FLAG_NULLABLE : 0;
  s->release = noop_schema_release;
  a->release = noop_array_release;
  struct adr_format f;
  if (adr_format_parse(s->format, &f, NULL) != 0) return false;
  a->offset = u8(r) % 9;
  a->length = min_length > 0 ? min_length - a->offset : 0;
  if (a->length < 0) {
    a->offset = 0;
    a->length = min_length;
  }
  if (min_length == 0 || (flags & 2)) a->length = u8(r) % 17;
  const int64_t end = a->offset + a->length;
  /* Buffers. */
  int64_t nb = f.n_buffers;
  int64_t nvar = 0;
  if (f.layout == ADR_LAYOUT_BINARY_VIEW) {
    nvar = u8(r) % 3;
    nb = 3 + nvar;
  }
  a->n_buffers = nb;
  uint8_t nullmask = flags & 4 ? u8(r) : 0;
  if (nb == 0) {
    /* The C data interface lets `buffers` be NULL when there are none. */
    a->buffers = flags & 8 ? NULL : alloc(ar, sizeof(void*));
  } else {
    const void** b = alloc(ar, (size_t)nb * sizeof(void*));
    if (b == NULL) return false;
    a->buffers = b;
    int64_t sizes[8];
    if (adr_format_buffer_sizes(&f, a->offset, a->length, nb, sizes, NULL) != 0) return false;
    for (int64_t i = 0; i < nb; i++) {
      int64_t size = sizes[i];
      bool offsets = (i == 1 && (f.layout == ADR_LAYOUT_VAR_BINARY || f.layout == ADR_LAYOUT_LIST ||
                                 f.layout == ADR_LAYOUT_LIST_VIEW)) ||
                     (i == 2 && f.layout == ADR_LAYOUT_LIST_VIEW);
      if (size == ADR_BUFFER_SIZE_DATA_DEPENDENT)
        size = f.layout == ADR_LAYOUT_BINARY_VIEW ? VARIADIC : VAR_DATA;
      if (f.layout == ADR_LAYOUT_BINARY_VIEW && i == nb - 1) size = nvar * 8;
      void* p = buffer(ar, r, size);
      if (p == NULL) return false;
      if (offsets) {
        int64_t n = f.layout == ADR_LAYOUT_LIST_VIEW ? end : end + 1;
        fill_offsets(r, p, f.offset_bytes, n, VAR_DATA - 1, flags & 0x10);
      }
      if (f.layout == ADR_LAYOUT_BINARY_VIEW && i == nb - 1)
        for (int64_t v = 0; v < nvar; v++) ((int64_t*)p)[v] = VARIADIC;
      b[i] = nullmask & (1u << i) ? NULL : p;
    }
    if (f.layout == ADR_LAYOUT_BINARY_VIEW && !(flags & 0x10)) {
      /* mostly well-formed views: short inline ones, or prefixes that match */
      uint8_t* views = (uint8_t*)b[1];
      for (int64_t i = 0; views != NULL && i < end; i++) {
        uint8_t* v = views + 16 * i;
        int32_t len = u8(r) % 20, idx = nvar ? (int32_t)(u8(r) % nvar) : 0,
                off = u8(r) % (VARIADIC - 19);
        memcpy(v, &len, 4);
        if (len > 12 && nvar > 0 && b[2 + idx] != NULL) {
          memcpy(v + 4, (const uint8_t*)b[2 + idx] + off, 4);
          memcpy(v + 8, &idx, 4);
          memcpy(v + 12, &off, 4);
        }
      }
    }
    if (f.layout == ADR_LAYOUT_SPARSE_UNION || f.layout == ADR_LAYOUT_DENSE_UNION) {
      int8_t* types = (int8_t*)b[0];
      for (int64_t i = 0; types != NULL && i < end && !(flags & 0x10); i++)
        types[i] = f.type_ids[types[i] & 1];
      int32_t* offs = f.layout == ADR_LAYOUT_DENSE_UNION ? (int32_t*)b[1] : NULL;
      for (int64_t i = 0; offs != NULL && i < end && !(flags & 0x10); i++) offs[i] = u8(r) % 4;
    }
  }
  /* null_count: mostly the true one, else unknown, 0 or anything small. */
  bool validity = (f.layout == ADR_LAYOUT_FIXED || f.layout == ADR_LAYOUT_VAR_BINARY ||
                   f.layout == ADR_LAYOUT_BINARY_VIEW || f.layout == ADR_LAYOUT_LIST ||
                   f.layout == ADR_LAYOUT_LIST_VIEW || f.layout == ADR_LAYOUT_FIXED_LIST ||
                   f.layout == ADR_LAYOUT_STRUCT);
  int64_t true_nulls = 0;
  if (f.layout == ADR_LAYOUT_NULL)
    true_nulls = a->length;
  else if (validity && a->buffers[0] != NULL)
    true_nulls = a->length - popcount_range(a->buffers[0], a->offset, a->length);
  switch (u8(r) % 8) {
    case 0:
      a->null_count = -1;
      break;
    case 1:
      a->null_count = 0;
      break;
    case 2:
      a->null_count = (int8_t)u8(r);
      break;
    default:
      a->null_count = true_nulls;
  }
  /* Children. */
  if (!build_children(r, ar, depth, &f, end, s, a, flags)) return false;
  if (f.layout == ADR_LAYOUT_RUN_END && a->n_children == 2 && a->children[0]->n_buffers == 2 &&
      a->children[0]->buffers != NULL && a->children[0]->buffers[1] != NULL && !(flags & 0x10)) {
    /* strictly increasing run ends covering the parent */
    struct ArrowArray* re = a->children[0];
    struct adr_format rf;
    bool ends =
        adr_format_parse(s->children[0]->format, &rf, NULL) == 0 &&
        (rf.type == ADR_TYPE_INT16 || rf.type == ADR_TYPE_INT32 || rf.type == ADR_TYPE_INT64);
    int64_t v = 0;
    for (int64_t k = 0; ends && k < re->offset + re->length; k++) {
      v += 1 + u8(r) % 3;
      if (k == re->offset + re->length - 1 && v < end) v = end;
      void* p = (void*)re->buffers[1];
      if (rf.bit_width == 16)
        ((int16_t*)p)[k] = (int16_t)v;
      else if (rf.bit_width == 32)
        ((int32_t*)p)[k] = (int32_t)v;
      else
        ((int64_t*)p)[k] = v;
    }
  }
  /* Dictionary for integer types, with indices mostly inside it. */
  if ((flags & 0x20) && depth < 5 && f.type >= ADR_TYPE_INT8 && f.type <= ADR_TYPE_UINT64) {
    s->dictionary = alloc(ar, sizeof(*s->dictionary));
    a->dictionary = alloc(ar, sizeof(*a->dictionary));
    if (s->dictionary == NULL || a->dictionary == NULL) return false;
    if (!build(r, ar, depth + 1, NULL, 0, s->dictionary, a->dictionary)) return false;
    int64_t dlen = a->dictionary->length;
    uint8_t* idx = a->n_buffers == 2 ? (uint8_t*)a->buffers[1] : NULL;
    int w = f.bit_width / 8;
    for (int64_t i = 0; idx != NULL && dlen > 0 && i < end && !(flags & 0x10); i++) {
      memset(idx + i * w, 0, (size_t)w);
      idx[i * w] = (uint8_t)(u8(r) % dlen); /* little endian */
    }
  }
  return true;
}

/* ADR_FUZZ_DUMP=1: the tree an input builds, and the statuses, on stderr
 * (to read a crash input or check what a seed exercises). */
static bool dumping(void) {
  static int d = -1;
  if (d < 0) d = getenv("ADR_FUZZ_DUMP") != NULL;
  return d;
}

static void dump(const struct ArrowSchema* s, const struct ArrowArray* a, int depth) {
  fprintf(stderr, "%*s%s len %lld off %lld nulls %lld n_buffers %lld%s", 2 * depth, "", s->format,
          (long long)a->length, (long long)a->offset, (long long)a->null_count,
          (long long)a->n_buffers, a->buffers == NULL ? " buffers=NULL" : "");
  for (int64_t i = 0; a->buffers != NULL && i < a->n_buffers; i++)
    fprintf(stderr, " b%lld=%s", (long long)i, a->buffers[i] ? "set" : "NULL");
  fprintf(stderr, "\n");
  for (int64_t i = 0; i < a->n_children && i < s->n_children; i++)
    dump(s->children[i], a->children[i], depth + 1);
  if (s->dictionary != NULL && a->dictionary != NULL) dump(s->dictionary, a->dictionary, depth + 1);
}

static void fail(const char* what, int st, const struct adr_error* err) {
  fprintf(stderr, "%s: status %d: %s\n", what, st, err->message);
  abort();
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 8192) return 0;
  struct reader r = {data, size};
  struct arena* ar = calloc(1, sizeof(*ar));
  if (ar == NULL) return 0;
  struct ArrowSchema* s = alloc(ar, sizeof(*s));
  struct ArrowDeviceArray* d = alloc(ar, sizeof(*d));
  if (s && d && build(&r, ar, 0, NULL, 0, s, &d->array)) {
    d->device_type = ARROW_DEVICE_CPU;
    d->device_id = -1;
    struct adr_error err;
    err.message[0] = '\0';
    int st = adr_device_array_validate(s, d, ADR_VALIDATE_STRUCTURE, &err);
    if (st != 0 && (st != EINVAL || err.message[0] == 0)) fail("structure", st, &err);
    int full = EINVAL;
    if (st == 0) {
      if (dumping()) dump(s, &d->array, 0);
      err.message[0] = '\0';
      full = adr_device_array_validate(s, d, ADR_VALIDATE_FULL, &err);
      if (full != 0 && (full != EINVAL || err.message[0] == 0)) fail("full", full, &err);
      if (dumping()) fprintf(stderr, "full validation: %d %s\n", full, full ? err.message : "");
    }
    if (st == 0) {
      struct adr_device* cpu;
      if (adr_device_get(ARROW_DEVICE_CPU, 0, &cpu, &err) != 0) fail("cpu", -1, &err);
      struct ArrowDeviceArray copy;
      err.message[0] = '\0';
      int cst = adr_device_array_deep_copy(s, d, cpu, NULL, &copy, NULL, &err);
      if (cst != 0 && (full == 0 || cst != EINVAL || err.message[0] == 0))
        fail("deep copy", cst, &err);
      if (cst == 0) {
        if (full == 0) {
          int vst = adr_device_array_validate(s, &copy, ADR_VALIDATE_FULL, &err);
          if (vst != 0) fail("full validation of the copy", vst, &err);
          bool equal = false;
          struct adr_error why;
          why.message[0] = '\0';
          int est = adr_device_array_equal(s, d, &copy, &equal, &why, &err);
          if (est != 0) fail("equal", est, &err);
          if (!equal) fail("copy differs", 0, &why);
        }
        adr_device_array_release(&copy);
      }
    }
  }
  for (int i = 0; i < ar->n; i++) free(ar->blocks[i]);
  free(ar);
  return 0;
}

const char* const fuzz_seeds[] = {
    /* map<null, int32> of 3 maps holding 3 entries, keys with buffers ==
     * NULL: full validation says "map keys contain nulls" (it used to read
     * keys->buffers[0]); run with ADR_FUZZ_DUMP=1 to see the tree */
    "\x01\x1a\x00\x03\xff\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
    "\x01\x01\x01\x03"
    "\x00\x00\x03\xff\x03\x01\x08\x00\x00\x03\x00\x05\x00\xff\x01\x00\x00\x00\x02\x00\x00\x00\x03"
    "\x00\x00\x00\x03",
    /* the same map without entries: valid */
    "\x01\x1a\x00\x03\xff\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
    "\x00\x00\x00\x00\x00\x03\x00\x00\x00\x03\x01\x08\x00\x00\x00\x03\x00\x05\x00\x00\x03",
    /* mixed trees (a run-end array, a map of null children, ...) */
    "\x05\x05\x00\x08\x0f\xf0\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb\xcc\xdd\xee\xff\x01"
    "\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x03",
    "\x00\x1a\x00\x04\x01\x01\x02\x03\x02\x01\x03\x08\x00\x00\x03\x0b\x00\x00\x06\x03\x00\x05\x03",
    "\x00\x19\x00\x03\x07\x03\x09\x00\x00\x03\x00\x0c\x00\x01\x02\x03\x04\x05\x06\x07\x61\x62"
    "\x63\x64\x65\x66\x67\x68\x01\x02\x03\x04\x03",
    "\x00\x1d\x00\x03\x03\x00\x00\x02\x01\x02\x03\x04\x05\x06\x03\x00\x00\x05\x01\x02\x03\x04"
    "\x05\x06\x07\x08\x03\x01\x02\x01",
    "\x20\x04\x00\x06\x01\x02\x03\x04\x05\x06\x03\x00\x0c\x00\x04\x01\x01\x02\x02\x00\x03\x01"
    "\x02\x03\x01\x02\x03",
    NULL,
};
