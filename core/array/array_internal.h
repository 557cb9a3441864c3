/* SPDX-License-Identifier: Apache-2.0
 *
 * Internal declarations shared by the files of core/array/. Nothing here
 * is ABI.
 */
#ifndef ADR_CORE_ARRAY_INTERNAL_H
#define ADR_CORE_ARRAY_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "adr/array.h"
#include "internal.h"

/* Path to a node of an array tree, for messages: "children[2].dictionary". */
struct adr__path {
  char text[256];
  size_t len;
};

static inline void adr__path_root(struct adr__path* p) {
  p->text[0] = '\0';
  p->len = 0;
}
/* Appends ".children[i]" (or "children[i]" at the root); returns the old
 * length for adr__path_pop. */
ADR_INTERNAL size_t adr__path_push_child(struct adr__path* p, int64_t i);
ADR_INTERNAL size_t adr__path_push_name(struct adr__path* p, const char* name);
/* Appends ".[i]" (or "[i]" at the root). */
ADR_INTERNAL size_t adr__path_push_index(struct adr__path* p, int64_t i);
static inline void adr__path_pop(struct adr__path* p, size_t len) {
  p->len = len;
  p->text[len] = '\0';
}
/* The path for messages: "array" at the root. */
static inline const char* adr__path_str(const struct adr__path* p) {
  return p->len ? p->text : "array";
}

/* Error "[op] path: message". */
ADR_INTERNAL int adr__path_error(struct adr_error* error, int status, const char* op,
                                 const struct adr__path* path, const char* fmt, ...)
    ADR_PRINTF(5, 6);

/* Whether device type t is one the Arrow specification defines. */
ADR_INTERNAL bool adr__device_type_known(ArrowDeviceType t);

/* The adr device of (type, id); id -1 means 0. */
ADR_INTERNAL int adr__array_device(ArrowDeviceType type, int64_t id, struct adr_device** out,
                                   struct adr_error* error);

/* Structural validation of one tree with its path (validate.c); shared by
 * the deep copy, which validates before it reads anything. */
ADR_INTERNAL int adr__validate_structure(const char* op, const struct ArrowSchema* schema,
                                         const struct ArrowArray* array, struct adr__path* path,
                                         int depth, struct adr_error* error);

/* Data validation of a host-readable tree (validate.c). */
ADR_INTERNAL int adr__validate_data(const char* op, const struct ArrowSchema* schema,
                                    const struct ArrowArray* array, struct adr__path* path,
                                    struct adr_error* error);

/* Deep copy with a mode flag: `whole` copies every node's full range
 * [0, offset + length) and keeps offsets and lengths as they are (used by
 * full validation and comparison so indices in messages match the source). */
ADR_INTERNAL int adr__deep_copy(const char* op, const struct ArrowSchema* schema,
                                const struct ArrowDeviceArray* src, struct adr_device* dst_device,
                                struct adr_stream* stream, bool whole, struct ArrowDeviceArray* out,
                                struct adr_copy_stats* stats, struct adr_error* error);

/* Attaches an owned event to an adr-owned node made by adr_array_init:
 * its release waits for the event, frees the buffers, then destroys it. */
/* A new host array (offset 0, owning copies of what it uses) holding
 * arrays[0], arrays[1], ... one after the other: n host-readable arrays of
 * the type `schema` describes (concat.c). ENOTSUP for dictionary-encoded
 * nodes; EOVERFLOW when offsets or run ends would not fit their type. On
 * failure *out is left released. */
ADR_INTERNAL int adr__array_concat_host(const char* op, const struct ArrowSchema* schema,
                                        const struct ArrowArray* const* arrays, int64_t n,
                                        struct ArrowArray* out, struct adr_error* error);

ADR_INTERNAL void adr__array_node_set_event(struct ArrowArray* array, struct adr_event* event);
/* Gives an adr-owned node a malloc'd host block to free at its release
 * (after its tree's event): the source of a copy still queued. */
ADR_INTERNAL void adr__array_node_keep(struct ArrowArray* array, void* host_memory);
/* Whether `array` is a node made by adr_array_init. */
ADR_INTERNAL bool adr__array_node_is_owned(const struct ArrowArray* array);
/* Host memory for a node on the NULL device (pageable host memory):
 * 64-byte aligned, at least one byte, freed with free(). NULL when out of
 * memory. */
ADR_INTERNAL void* adr__array_host_alloc(size_t size);
/* "opencl:0", or "host memory" for the NULL device. */
static inline const char* adr__array_dev_name(const struct adr_device* d) {
  return d != NULL ? adr_device_name(d) : "host memory";
}

/* Deepest nesting accepted by the recursive walkers. */
#define ADR__MAX_DEPTH 64

/* Whether buffer 0 of a layout is a validity bitmap (NULL: all valid). */
static inline bool adr__has_validity(enum adr_layout l) {
  return l == ADR_LAYOUT_FIXED || l == ADR_LAYOUT_VAR_BINARY || l == ADR_LAYOUT_BINARY_VIEW ||
         l == ADR_LAYOUT_LIST || l == ADR_LAYOUT_LIST_VIEW || l == ADR_LAYOUT_FIXED_LIST ||
         l == ADR_LAYOUT_STRUCT;
}

/* Buffer i of an array as bytes. */
static inline const uint8_t* adr__buf(const struct ArrowArray* a, int64_t i) {
  return (const uint8_t*)a->buffers[i];
}
static inline bool adr__bit(const uint8_t* bits, int64_t i) {
  return (bits[i >> 3] >> (i & 7)) & 1;
}
/* Validity of element i (absolute index, offset included). */
static inline bool adr__valid(const struct ArrowArray* a, const struct adr_format* f, int64_t i) {
  if (f->layout == ADR_LAYOUT_NULL) return false;
  if (f->layout == ADR_LAYOUT_SPARSE_UNION || f->layout == ADR_LAYOUT_DENSE_UNION ||
      f->layout == ADR_LAYOUT_RUN_END)
    return true;
  const uint8_t* v = adr__buf(a, 0);
  return v == NULL || adr__bit(v, i);
}
/* Element i of a host buffer of signed integers of w bytes (2, 4 or 8):
 * offsets, run ends, sizes. */
static inline int64_t adr__int_load(const void* b, int w, int64_t i) {
  const uint8_t* p = (const uint8_t*)b + (size_t)w * (size_t)i;
  if (w == 2) {
    int16_t v;
    memcpy(&v, p, 2);
    return v;
  }
  if (w == 4) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
  }
  int64_t v;
  memcpy(&v, p, 8);
  return v;
}
static inline void adr__int_store(void* b, int w, int64_t i, int64_t v) {
  uint8_t* p = (uint8_t*)b + (size_t)w * (size_t)i;
  if (w == 2) {
    int16_t x = (int16_t)v;
    memcpy(p, &x, 2);
  } else if (w == 4) {
    int32_t x = (int32_t)v;
    memcpy(p, &x, 4);
  } else {
    memcpy(p, &v, 8);
  }
}

static inline int64_t adr__offset_at(const struct ArrowArray* a, int64_t buffer, int width,
                                     int64_t i) {
  if (width == 4) return ((const int32_t*)a->buffers[buffer])[i];
  return ((const int64_t*)a->buffers[buffer])[i];
}

#endif /* ADR_CORE_ARRAY_INTERNAL_H */
