/* SPDX-License-Identifier: Apache-2.0
 *
 * FlatBuffers writer and checked reader for the Arrow IPC metadata (see
 * flatbuf.h for the layout this writer produces). Little-endian byte
 * order is written and read explicitly, byte by byte, so the code does not
 * depend on the host's order or on alignment.
 */
#include "flatbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- writer -------------------------------------------------------------- */

void fbb_init(struct fbb* b) {
  memset(b, 0, sizeof(*b));
}

void fbb_free(struct fbb* b) {
  free(b->data);
  memset(b, 0, sizeof(*b));
}

/* Appends n zero bytes; returns their position. */
static size_t grow(struct fbb* b, size_t n) {
  if (b->oom) return 0;
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n) cap *= 2;
    uint8_t* d = realloc(b->data, cap);
    if (d == NULL) {
      b->oom = true;
      return 0;
    }
    b->data = d;
    b->cap = cap;
  }
  size_t pos = b->len;
  memset(b->data + pos, 0, n);
  b->len += n;
  return pos;
}

void fbb_align(struct fbb* b, size_t align) {
  size_t pad = (align - b->len % align) % align;
  if (pad) grow(b, pad);
}

static void put(struct fbb* b, size_t pos, uint64_t v, unsigned size) {
  if (b->oom) return;
  for (unsigned i = 0; i < size; i++) b->data[pos + i] = (uint8_t)(v >> (8 * i));
}

void fbb_put32(struct fbb* b, size_t pos, uint32_t v) {
  put(b, pos, v, 4);
}
void fbb_put64(struct fbb* b, size_t pos, uint64_t v) {
  put(b, pos, v, 8);
}

void fbb_start(struct fbb* b) {
  b->len = 0;
  b->oom = false;
  grow(b, 4);
}

void fbb_table_scalar(struct fbb_table* t, uint16_t id, uint8_t size, uint64_t value) {
  if (t->n >= FBB_MAX_FIELDS) return;
  t->f[t->n].id = id;
  t->f[t->n].size = size;
  t->f[t->n].is_offset = false;
  t->f[t->n].value = value;
  t->n++;
}

void fbb_table_offset(struct fbb_table* t, uint16_t id) {
  if (t->n >= FBB_MAX_FIELDS) return;
  t->f[t->n].id = id;
  t->f[t->n].size = 4;
  t->f[t->n].is_offset = true;
  t->f[t->n].value = 0;
  t->n++;
}

size_t fbb_table_end(struct fbb* b, struct fbb_table* t) {
  /* Order: decreasing size, then increasing id (insertion sort, n <= 8). */
  int order[FBB_MAX_FIELDS];
  int max_id = -1;
  bool has8 = false;
  for (int i = 0; i < t->n; i++) {
    order[i] = i;
    if (t->f[i].id > max_id) max_id = t->f[i].id;
    if (t->f[i].size == 8) has8 = true;
  }
  for (int i = 1; i < t->n; i++) {
    int k = order[i], j = i - 1;
    while (j >= 0 && (t->f[order[j]].size < t->f[k].size ||
                      (t->f[order[j]].size == t->f[k].size && t->f[order[j]].id > t->f[k].id))) {
      order[j + 1] = order[j];
      j--;
    }
    order[j + 1] = k;
  }
  uint16_t field_off[FBB_MAX_FIELDS];
  size_t cursor = 4;
  for (int i = 0; i < t->n; i++) {
    size_t s = t->f[order[i]].size;
    cursor = (cursor + s - 1) / s * s;
    field_off[order[i]] = (uint16_t)cursor;
    cursor += s;
  }
  size_t talign = has8 ? 8 : 4;
  size_t tsize = (cursor + talign - 1) / talign * talign;
  size_t vsize = 4 + 2 * (size_t)(max_id + 1);

  fbb_align(b, 2);
  size_t vt = grow(b, vsize);
  put(b, vt, vsize, 2);
  put(b, vt + 2, tsize, 2);
  for (int i = 0; i < t->n; i++) put(b, vt + 4 + 2 * (size_t)t->f[i].id, field_off[i], 2);
  fbb_align(b, talign);
  size_t tp = grow(b, tsize);
  put(b, tp, (uint32_t)(tp - vt), 4);
  for (int i = 0; i < FBB_MAX_FIELDS; i++) t->pos[i] = 0;
  for (int i = 0; i < t->n; i++) {
    size_t at = tp + field_off[i];
    if (t->f[i].id < FBB_MAX_FIELDS) t->pos[t->f[i].id] = at;
    if (!t->f[i].is_offset) put(b, at, t->f[i].value, t->f[i].size);
  }
  return tp;
}

size_t fbb_string(struct fbb* b, const char* s, size_t n) {
  fbb_align(b, 4);
  size_t pos = grow(b, 4 + n + 1);
  put(b, pos, (uint32_t)n, 4);
  if (!b->oom && n) memcpy(b->data + pos + 4, s, n);
  return pos;
}

size_t fbb_vector(struct fbb* b, size_t count, size_t elem_size) {
  size_t a = elem_size > 8 ? 8 : (elem_size < 4 ? 4 : elem_size);
  /* count at pos, elements at pos + 4 aligned to a. */
  while ((b->len + 4) % a != 0 || b->len % 4 != 0) grow(b, 1);
  size_t pos = grow(b, 4 + count * elem_size);
  put(b, pos, (uint32_t)count, 4);
  return pos;
}

void fbb_patch(struct fbb* b, size_t slot, size_t target) {
  put(b, slot, (uint32_t)(target - slot), 4);
}

/* ---- reader -------------------------------------------------------------- */

static void fail(struct fbr* r, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct fbr* r, const char* fmt, ...) {
  if (r->bad) return;
  r->bad = true;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->why, sizeof(r->why), fmt, ap);
  va_end(ap);
}

void fbr_init(struct fbr* r, const void* buf, size_t len) {
  r->buf = buf;
  r->len = len;
  r->bad = false;
  r->why[0] = '\0';
}

uint64_t fbr_read(struct fbr* r, uint32_t pos, uint8_t size) {
  if ((uint64_t)pos + size > r->len) {
    fail(r, "read of %u bytes at %u past the end (%zu)", (unsigned)size, (unsigned)pos, r->len);
    return 0;
  }
  uint64_t v = 0;
  for (unsigned i = 0; i < size; i++) v |= (uint64_t)r->buf[pos + i] << (8 * i);
  return v;
}

static struct fbr_table table_at(struct fbr* r, uint64_t pos) {
  struct fbr_table t = {0};
  if (pos + 4 > r->len || pos % 4 != 0) {
    fail(r, "table at %llu out of bounds or misaligned", (unsigned long long)pos);
    return t;
  }
  int32_t so = (int32_t)(uint32_t)fbr_read(r, (uint32_t)pos, 4);
  int64_t vt = (int64_t)pos - so;
  if (vt < 0 || vt + 4 > (int64_t)r->len || vt % 2 != 0) {
    fail(r, "vtable of table at %llu out of bounds", (unsigned long long)pos);
    return t;
  }
  uint16_t vs = (uint16_t)fbr_read(r, (uint32_t)vt, 2);
  uint16_t ts = (uint16_t)fbr_read(r, (uint32_t)vt + 2, 2);
  if (vs < 4 || vs % 2 != 0 || vt + vs > (int64_t)r->len || ts < 4 || pos + ts > r->len) {
    fail(r, "table at %llu has a malformed vtable", (unsigned long long)pos);
    return t;
  }
  t.pos = (uint32_t)pos;
  t.vt = (uint32_t)vt;
  t.vt_size = vs;
  t.t_size = ts;
  t.present = true;
  return t;
}

struct fbr_table fbr_root(struct fbr* r) {
  if (r->len < 8) {
    fail(r, "flatbuffer of %zu bytes is too short", r->len);
    struct fbr_table t = {0};
    return t;
  }
  return table_at(r, fbr_read(r, 0, 4));
}

/* Offset of field id within the table, 0 when absent; checks size fits. */
static uint16_t field(struct fbr* r, const struct fbr_table* t, uint16_t id, uint8_t size) {
  if (!t->present || r->bad) return 0;
  if (4u + 2u * id + 2u > t->vt_size) return 0;
  uint16_t fo = (uint16_t)fbr_read(r, t->vt + 4 + 2u * id, 2);
  if (fo == 0) return 0;
  if ((uint32_t)fo + size > t->t_size) {
    fail(r, "field %u of table at %u overruns the table", (unsigned)id, (unsigned)t->pos);
    return 0;
  }
  return fo;
}

bool fbr_has(struct fbr* r, const struct fbr_table* t, uint16_t id) {
  return field(r, t, id, 1) != 0;
}

uint64_t fbr_scalar(struct fbr* r, const struct fbr_table* t, uint16_t id, uint8_t size,
                    uint64_t def) {
  uint16_t fo = field(r, t, id, size);
  if (fo == 0) return def;
  return fbr_read(r, t->pos + fo, size);
}

/* Target of the uoffset at field id; 0 when absent (never a valid target). */
static uint64_t deref(struct fbr* r, const struct fbr_table* t, uint16_t id) {
  uint16_t fo = field(r, t, id, 4);
  if (fo == 0) return 0;
  uint64_t slot = (uint64_t)t->pos + fo;
  uint64_t target = slot + fbr_read(r, (uint32_t)slot, 4);
  if (target >= r->len) {
    fail(r, "offset at %llu points past the end", (unsigned long long)slot);
    return 0;
  }
  return target;
}

struct fbr_table fbr_table_field(struct fbr* r, const struct fbr_table* t, uint16_t id) {
  uint64_t p = deref(r, t, id);
  if (p == 0) {
    struct fbr_table none = {0};
    return none;
  }
  return table_at(r, p);
}

bool fbr_string(struct fbr* r, const struct fbr_table* t, uint16_t id, const char** out,
                uint32_t* out_len) {
  uint64_t p = deref(r, t, id);
  if (p == 0) return false;
  uint64_t n = fbr_read(r, (uint32_t)p, 4);
  if (r->bad || p + 4 + n > r->len) {
    fail(r, "string at %llu overruns the buffer", (unsigned long long)p);
    return false;
  }
  *out = (const char*)r->buf + p + 4;
  *out_len = (uint32_t)n;
  return true;
}

bool fbr_vector(struct fbr* r, const struct fbr_table* t, uint16_t id, size_t elem_size,
                uint32_t* out_first, uint32_t* out_count) {
  uint64_t p = deref(r, t, id);
  if (p == 0) return false;
  uint64_t n = fbr_read(r, (uint32_t)p, 4);
  if (r->bad || p + 4 + n * elem_size > r->len) {
    fail(r, "vector at %llu of %llu elements overruns the buffer", (unsigned long long)p,
         (unsigned long long)n);
    return false;
  }
  *out_first = (uint32_t)(p + 4);
  *out_count = (uint32_t)n;
  return true;
}

struct fbr_table fbr_vector_table(struct fbr* r, uint32_t first, uint32_t i) {
  uint64_t slot = (uint64_t)first + 4ull * i;
  uint64_t target = slot + fbr_read(r, (uint32_t)slot, 4);
  if (r->bad || target >= r->len) {
    fail(r, "vector element %u points past the end", (unsigned)i);
    struct fbr_table none = {0};
    return none;
  }
  return table_at(r, target);
}
