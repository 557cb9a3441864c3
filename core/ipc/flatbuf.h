/* SPDX-License-Identifier: Apache-2.0
 *
 * A minimal FlatBuffers writer and bounds-checked reader, enough for the
 * Arrow IPC metadata (format/Schema.fbs, format/Message.fbs). Internal.
 *
 * Writer: objects are appended front to back. A table is written with its
 * vtable immediately before it; an offset field (to a string, vector or
 * table) is left as a slot and patched once its target has been appended
 * after it, so every uoffset points forward as the format requires.
 *
 * Layout rules of this writer (the byte-exact test in tests/ipc assembles
 * the same bytes by hand):
 *  - the buffer starts with the u32 root offset;
 *  - a table: vtable (u16 vtable size, u16 table size, one u16 per field up
 *    to the highest present id), zero padding so that the table starts on
 *    an 8-byte boundary when it holds an 8-byte field and on a 4-byte
 *    boundary otherwise, then the i32 soffset to the vtable, then the
 *    fields by decreasing size (ties: increasing id), each aligned to its
 *    size; the table size is rounded up to a multiple of 4 (and of 8 when an
 *    8-byte field is present);
 *  - a string: u32 length aligned to 4, the bytes, a NUL;
 *  - a vector: u32 count placed so that the elements that follow it are
 *    aligned to their size (8 for the 16-byte structs);
 *  - scalars equal to the schema's default are omitted (flatc's default).
 *
 * Reader: every access checks bounds against the buffer; a failure sets a
 * sticky flag in the reader and reads as zero/absent, so decoders check
 * `r->bad` once per object.
 */
#ifndef ADR_CORE_IPC_FLATBUF_H
#define ADR_CORE_IPC_FLATBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- writer -------------------------------------------------------------- */

struct fbb {
  uint8_t* data;
  size_t len;
  size_t cap;
  bool oom;
};

#define FBB_MAX_FIELDS 8

struct fbb_table {
  int n;
  struct {
    uint16_t id;
    uint8_t size;   /* 1, 2, 4 or 8 */
    bool is_offset; /* a uoffset slot to patch */
    uint64_t value;
  } f[FBB_MAX_FIELDS];
  /* Filled by fbb_table_end: position of each field by id (0 = absent). */
  size_t pos[FBB_MAX_FIELDS];
};

void fbb_init(struct fbb* b);
void fbb_free(struct fbb* b);
/* Appends the root offset slot (position 0). */
void fbb_start(struct fbb* b);
static inline void fbb_table_begin(struct fbb_table* t) {
  t->n = 0;
}
void fbb_table_scalar(struct fbb_table* t, uint16_t id, uint8_t size, uint64_t value);
void fbb_table_offset(struct fbb_table* t, uint16_t id);
/* Appends vtable + table; returns the table position. */
size_t fbb_table_end(struct fbb* b, struct fbb_table* t);
/* Appends a string; returns its position. */
size_t fbb_string(struct fbb* b, const char* s, size_t n);
/* Appends a vector header and room for count elements of elem_size
 * (aligned to min(elem_size, 8)); returns the position of the count. The
 * elements start at pos + 4. */
size_t fbb_vector(struct fbb* b, size_t count, size_t elem_size);
/* Stores at slot the uoffset to target (target > slot). */
void fbb_patch(struct fbb* b, size_t slot, size_t target);
void fbb_put32(struct fbb* b, size_t pos, uint32_t v);
void fbb_put64(struct fbb* b, size_t pos, uint64_t v);
void fbb_align(struct fbb* b, size_t align);

/* ---- reader -------------------------------------------------------------- */

struct fbr {
  const uint8_t* buf;
  size_t len;
  bool bad;
  char why[96];
};

/* A table as read: its position and its vtable. */
struct fbr_table {
  uint32_t pos;
  uint32_t vt;
  uint16_t vt_size;
  uint16_t t_size;
  bool present;
};

void fbr_init(struct fbr* r, const void* buf, size_t len);
/* The root table. */
struct fbr_table fbr_root(struct fbr* r);
/* Whether field id is present in t. */
bool fbr_has(struct fbr* r, const struct fbr_table* t, uint16_t id);
uint64_t fbr_scalar(struct fbr* r, const struct fbr_table* t, uint16_t id, uint8_t size,
                    uint64_t def);
/* Table / string / vector referenced by field id; .present false when
 * absent. */
struct fbr_table fbr_table_field(struct fbr* r, const struct fbr_table* t, uint16_t id);
/* String: *out points into the buffer, *out_len bytes; false when absent. */
bool fbr_string(struct fbr* r, const struct fbr_table* t, uint16_t id, const char** out,
                uint32_t* out_len);
/* Vector: position of the first element and the count; false when absent. */
bool fbr_vector(struct fbr* r, const struct fbr_table* t, uint16_t id, size_t elem_size,
                uint32_t* out_first, uint32_t* out_count);
/* Table at element i of a vector of tables starting at first. */
struct fbr_table fbr_vector_table(struct fbr* r, uint32_t first, uint32_t i);
/* String at element i of a vector of strings (unused here) omitted. */
uint64_t fbr_read(struct fbr* r, uint32_t pos, uint8_t size);

#endif /* ADR_CORE_IPC_FLATBUF_H */
