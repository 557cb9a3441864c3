/* SPDX-License-Identifier: Apache-2.0
 *
 * Fuzz target: the structural validator. The input describes an
 * ArrowSchema/ArrowArray tree (formats, lengths, offsets, null counts,
 * buffer and child counts, NULL or released members, dictionaries, device
 * type); the validator must accept or refuse it with EINVAL and a message,
 * never crash. Structural validation reads no buffer, so the buffers point
 * at a small dummy block whatever the lengths say.
 */
#include <errno.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "adr/array.h"
#include "fuzz.h"

static const char* const formats[] = {
    "n", "b", "c", "i", "l", "e", "g", "z", "U", "vz", "vu", "d:38,10", "w:3", "tsu:UTC",
    "tin", "+l", "+L", "+vl", "+vL", "+w:2", "+s", "+m", "+ud:0,1", "+us:3", "+r", "+ud:",
    "bogus", "d:99,1", "+w:0", "",
};
#define N_FORMATS (sizeof(formats) / sizeof(formats[0]))

struct reader {
  const uint8_t* p;
  size_t n;
};

static uint8_t u8(struct reader* r) {
  if (r->n == 0) return 0;
  r->n--;
  return *r->p++;
}

/* Small signed values mostly, sometimes huge ones. */
static int64_t num(struct reader* r) {
  uint8_t b = u8(r);
  if (b == 0xff) return INT64_MAX - u8(r);
  if (b == 0xfe) return INT64_MIN + u8(r);
  if (b >= 0xf0) return (int64_t)1 << (u8(r) % 63);
  return (int8_t)b;
}

static uint64_t dummy[64];
static void noop_schema_release(struct ArrowSchema* s) { (void)s; }
static void noop_array_release(struct ArrowArray* a) { (void)a; }

struct arena {
  void* blocks[4096];
  int n;
};

static void* alloc(struct arena* a, size_t size) {
  if (a->n == 4096) return NULL;
  void* p = calloc(1, size ? size : 1);
  if (p) a->blocks[a->n++] = p;
  return p;
}

static bool build(struct reader* r, struct arena* ar, int depth, struct ArrowSchema* s,
                  struct ArrowArray* a) {
  uint8_t flags = u8(r);
  s->format = formats[u8(r) % N_FORMATS];
  s->flags = flags & 1 ? ARROW_FLAG_NULLABLE : 0;
  s->release = flags & 2 ? NULL : noop_schema_release;
  a->release = flags & 4 ? NULL : noop_array_release;
  a->length = num(r);
  a->offset = num(r);
  a->null_count = num(r);
  a->n_buffers = u8(r) % 6;
  if (flags & 8) a->n_buffers = -1;
  uint8_t bufmask = u8(r);
  if (a->n_buffers > 0 && !(flags & 16)) {
    const void** b = alloc(ar, (size_t)a->n_buffers * sizeof(void*));
    if (b == NULL) return false;
    for (int64_t i = 0; i < a->n_buffers; i++) b[i] = bufmask & (1u << i) ? dummy : NULL;
    a->buffers = b;
  }
  int64_t nc = depth < 8 ? u8(r) % 4 : 0;
  s->n_children = nc;
  a->n_children = flags & 32 ? nc + 1 : nc;
  if (nc > 0) {
    struct ArrowSchema** sc = alloc(ar, (size_t)nc * sizeof(*sc));
    struct ArrowArray** ac = alloc(ar, (size_t)(nc + 1) * sizeof(*ac));
    if (sc == NULL || ac == NULL) return false;
    for (int64_t i = 0; i < nc; i++) {
      uint8_t missing = u8(r);
      if (missing == 0xaa) continue; /* a NULL child */
      sc[i] = alloc(ar, sizeof(**sc));
      ac[i] = alloc(ar, sizeof(**ac));
      if (sc[i] == NULL || ac[i] == NULL) return false;
      if (!build(r, ar, depth + 1, sc[i], ac[i])) return false;
    }
    s->children = sc;
    a->children = flags & 64 ? NULL : ac;
  }
  if (flags & 128 && depth < 8) {
    s->dictionary = alloc(ar, sizeof(*s->dictionary));
    struct ArrowArray* d = alloc(ar, sizeof(*d));
    if (s->dictionary == NULL || d == NULL) return false;
    if (u8(r) & 1) a->dictionary = d;
    if (!build(r, ar, depth + 1, s->dictionary, d)) return false;
  }
  return true;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 8192) return 0;
  struct reader r = {data, size};
  struct arena* ar = calloc(1, sizeof(*ar));
  if (ar == NULL) return 0;
  struct ArrowSchema* s = alloc(ar, sizeof(*s));
  struct ArrowDeviceArray* d = alloc(ar, sizeof(*d));
  if (s && d && build(&r, ar, 0, s, &d->array)) {
    static const ArrowDeviceType types[] = {ARROW_DEVICE_CPU, ARROW_DEVICE_CUDA, 0, 5, 99};
    d->device_type = types[u8(&r) % 5];
    d->device_id = num(&r);
    struct adr_error err;
    err.message[0] = '\0';
    int st = adr_device_array_validate(s, d, ADR_VALIDATE_STRUCTURE, &err);
    if (st != 0 && (st != EINVAL || err.message[0] == 0)) {
      fprintf(stderr, "status %d: %s\n", st, err.message);
      abort();
    }
  }
  for (int i = 0; i < ar->n; i++) free(ar->blocks[i]);
  free(ar);
  return 0;
}

const char* const fuzz_seeds[] = {
    "\x01\x14\x05\x00\x00\x01\x01\x02\x01\x06\x00\x01\x01\x01\x03\x01",
    "\x01\x0f\x0a\x00\x00\x02\x03\x01\x01\x05\x14\x00\x00\x02\x03",
    "\x81\x04\x0a\x00\x00\x02\x02\x00\x01\x07\x03\x00\x00\x03\x07\x01",
    "\x01\x18\x0a\x00\x00\x00\x00\x02\x01\x05\x06\x00\x00\x02\x03\x01\x0a\x00\x00\x03\x07",
    "\x01\x15\x04\x01\x00\x02\x03\x01\x01\x14\x04\x00\x00\x01\x01\x02\x01\x05\x04\x00\x00\x03\x07"
    "\x01\x06\x04\x00\x00\x02\x03",
    NULL,
};
