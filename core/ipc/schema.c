/* SPDX-License-Identifier: Apache-2.0
 *
 * Schema messages: ArrowSchema <-> the Schema / Field / Type tables of
 * format/Schema.fbs.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipc_internal.h"

/* Type union (Schema.fbs). */
enum {
  T_NULL = 1,
  T_INT = 2,
  T_FLOAT = 3,
  T_BINARY = 4,
  T_UTF8 = 5,
  T_BOOL = 6,
  T_DECIMAL = 7,
  T_DATE = 8,
  T_TIME = 9,
  T_TIMESTAMP = 10,
  T_INTERVAL = 11,
  T_LIST = 12,
  T_STRUCT = 13,
  T_UNION = 14,
  T_FIXED_SIZE_BINARY = 15,
  T_FIXED_SIZE_LIST = 16,
  T_MAP = 17,
  T_DURATION = 18,
  T_LARGE_BINARY = 19,
  T_LARGE_UTF8 = 20,
  T_LARGE_LIST = 21,
  T_RUN_END_ENCODED = 22,
  T_BINARY_VIEW = 23,
  T_UTF8_VIEW = 24,
  T_LIST_VIEW = 25,
  T_LARGE_LIST_VIEW = 26
};

/* ---- dictionary walk ------------------------------------------------------ */

static const struct ArrowSchema* dict_walk(const struct ArrowSchema* s, int64_t k, int64_t* next,
                                           int depth) {
  if (s == NULL || depth > ADR_IPC_MAX_DEPTH) return NULL;
  const struct ArrowSchema* v = s;
  if (s->dictionary != NULL) {
    if (*next == k) return s;
    (*next)++;
    v = s->dictionary;
  }
  for (int64_t i = 0; i < v->n_children; i++) {
    const struct ArrowSchema* hit = dict_walk(v->children[i], k, next, depth + 1);
    if (hit != NULL) return hit;
  }
  return NULL;
}

const struct ArrowSchema* adr__ipc_dictionary_field(const struct ArrowSchema* schema, int64_t k,
                                                    int64_t* count) {
  int64_t next = 0;
  const struct ArrowSchema* hit = NULL;
  for (int64_t i = 0; schema != NULL && i < schema->n_children && hit == NULL; i++)
    hit = dict_walk(schema->children[i], k, &next, 1);
  if (count != NULL) {
    int64_t n = 0;
    for (int64_t i = 0; schema != NULL && i < schema->n_children; i++)
      dict_walk(schema->children[i], -1, &n, 1);
    *count = n;
  }
  return hit;
}

int adr_ipc_schema_dictionary_count(const struct ArrowSchema* schema, int64_t* out,
                                    struct adr_error* error) {
  if (schema == NULL || schema->release == NULL || out == NULL)
    return adr__errorf(error, EINVAL, "adr_ipc_schema_dictionary_count", NULL,
                       "schema is NULL or released, or out is NULL");
  adr__ipc_dictionary_field(schema, -1, out);
  return 0;
}

/* ---- encoding ------------------------------------------------------------- */

struct senc {
  struct fbb* b;
  int64_t next_id;
  struct ipc_where w;
  struct adr_error* error;
};

static int32_t rd_i32(const char* p) {
  int32_t v;
  memcpy(&v, p, 4);
  return v;
}

/* custom_metadata: Arrow's binary key/value encoding -> [KeyValue]. */
static void write_metadata(struct fbb* b, const char* m, size_t slot) {
  int32_t n = rd_i32(m);
  size_t vec = fbb_vector(b, (size_t)n, 4);
  fbb_patch(b, slot, vec);
  const char* p = m + 4;
  for (int32_t i = 0; i < n; i++) {
    int32_t kl = rd_i32(p);
    const char* k = p + 4;
    p = k + kl;
    int32_t vl = rd_i32(p);
    const char* v = p + 4;
    p = v + vl;
    struct fbb_table t;
    fbb_table_begin(&t);
    fbb_table_offset(&t, 0);
    fbb_table_offset(&t, 1);
    size_t tp = fbb_table_end(b, &t);
    fbb_patch(b, vec + 4 + 4 * (size_t)i, tp);
    fbb_patch(b, t.pos[0], fbb_string(b, k, (size_t)kl));
    fbb_patch(b, t.pos[1], fbb_string(b, v, (size_t)vl));
  }
}

static bool metadata_nonempty(const char* m) {
  return m != NULL && rd_i32(m) > 0;
}

static uint8_t time_unit(enum adr_time_unit u) {
  return (uint8_t)u; /* SECOND, MILLISECOND, MICROSECOND, NANOSECOND */
}

/* Writes the Type table of format f; *out_type receives the union tag. */
static size_t write_type(struct senc* e, const struct ArrowSchema* s, const struct adr_format* f,
                         uint8_t* out_type) {
  struct fbb* b = e->b;
  struct fbb_table t;
  fbb_table_begin(&t);
  uint8_t ty = 0;
  switch (f->type) {
    case ADR_TYPE_NA:
      ty = T_NULL;
      break;
    case ADR_TYPE_BOOL:
      ty = T_BOOL;
      break;
    case ADR_TYPE_INT8:
    case ADR_TYPE_UINT8:
    case ADR_TYPE_INT16:
    case ADR_TYPE_UINT16:
    case ADR_TYPE_INT32:
    case ADR_TYPE_UINT32:
    case ADR_TYPE_INT64:
    case ADR_TYPE_UINT64: {
      bool sgn = f->type == ADR_TYPE_INT8 || f->type == ADR_TYPE_INT16 ||
                 f->type == ADR_TYPE_INT32 || f->type == ADR_TYPE_INT64;
      ty = T_INT;
      fbb_table_scalar(&t, 0, 4, (uint32_t)f->bit_width);
      if (sgn) fbb_table_scalar(&t, 1, 1, 1);
      break;
    }
    case ADR_TYPE_HALF_FLOAT:
    case ADR_TYPE_FLOAT:
    case ADR_TYPE_DOUBLE:
      ty = T_FLOAT;
      if (f->type != ADR_TYPE_HALF_FLOAT)
        fbb_table_scalar(&t, 0, 2, f->type == ADR_TYPE_FLOAT ? 1 : 2);
      break;
    case ADR_TYPE_DECIMAL32:
    case ADR_TYPE_DECIMAL64:
    case ADR_TYPE_DECIMAL128:
    case ADR_TYPE_DECIMAL256:
      ty = T_DECIMAL;
      if (f->precision != 0) fbb_table_scalar(&t, 0, 4, (uint32_t)f->precision);
      if (f->scale != 0) fbb_table_scalar(&t, 1, 4, (uint32_t)f->scale);
      if (f->bit_width != 128) fbb_table_scalar(&t, 2, 4, (uint32_t)f->bit_width);
      break;
    case ADR_TYPE_FIXED_SIZE_BINARY:
      ty = T_FIXED_SIZE_BINARY;
      if (f->fixed_size != 0) fbb_table_scalar(&t, 0, 4, (uint32_t)f->fixed_size);
      break;
    case ADR_TYPE_BINARY:
      ty = T_BINARY;
      break;
    case ADR_TYPE_STRING:
      ty = T_UTF8;
      break;
    case ADR_TYPE_LARGE_BINARY:
      ty = T_LARGE_BINARY;
      break;
    case ADR_TYPE_LARGE_STRING:
      ty = T_LARGE_UTF8;
      break;
    case ADR_TYPE_BINARY_VIEW:
      ty = T_BINARY_VIEW;
      break;
    case ADR_TYPE_STRING_VIEW:
      ty = T_UTF8_VIEW;
      break;
    case ADR_TYPE_DATE32:
      ty = T_DATE;
      fbb_table_scalar(&t, 0, 2, 0); /* DAY (the default is MILLISECOND) */
      break;
    case ADR_TYPE_DATE64:
      ty = T_DATE;
      break;
    case ADR_TYPE_TIME32:
    case ADR_TYPE_TIME64:
      ty = T_TIME;
      if (f->unit != ADR_TIME_UNIT_MILLI) fbb_table_scalar(&t, 0, 2, time_unit(f->unit));
      if (f->type == ADR_TYPE_TIME64) fbb_table_scalar(&t, 1, 4, 64);
      break;
    case ADR_TYPE_TIMESTAMP:
      ty = T_TIMESTAMP;
      if (f->unit != ADR_TIME_UNIT_SECOND) fbb_table_scalar(&t, 0, 2, time_unit(f->unit));
      if (f->timezone != NULL) fbb_table_offset(&t, 1);
      break;
    case ADR_TYPE_DURATION:
      ty = T_DURATION;
      if (f->unit != ADR_TIME_UNIT_MILLI) fbb_table_scalar(&t, 0, 2, time_unit(f->unit));
      break;
    case ADR_TYPE_INTERVAL_MONTHS:
      ty = T_INTERVAL;
      break;
    case ADR_TYPE_INTERVAL_DAY_TIME:
      ty = T_INTERVAL;
      fbb_table_scalar(&t, 0, 2, 1);
      break;
    case ADR_TYPE_INTERVAL_MONTH_DAY_NANO:
      ty = T_INTERVAL;
      fbb_table_scalar(&t, 0, 2, 2);
      break;
    case ADR_TYPE_LIST:
      ty = T_LIST;
      break;
    case ADR_TYPE_LARGE_LIST:
      ty = T_LARGE_LIST;
      break;
    case ADR_TYPE_LIST_VIEW:
      ty = T_LIST_VIEW;
      break;
    case ADR_TYPE_LARGE_LIST_VIEW:
      ty = T_LARGE_LIST_VIEW;
      break;
    case ADR_TYPE_FIXED_SIZE_LIST:
      ty = T_FIXED_SIZE_LIST;
      if (f->fixed_size != 0) fbb_table_scalar(&t, 0, 4, (uint32_t)f->fixed_size);
      break;
    case ADR_TYPE_STRUCT:
      ty = T_STRUCT;
      break;
    case ADR_TYPE_MAP:
      ty = T_MAP;
      if (s->flags & ARROW_FLAG_MAP_KEYS_SORTED) fbb_table_scalar(&t, 0, 1, 1);
      break;
    case ADR_TYPE_SPARSE_UNION:
    case ADR_TYPE_DENSE_UNION:
      ty = T_UNION;
      if (f->type == ADR_TYPE_DENSE_UNION) fbb_table_scalar(&t, 0, 2, 1);
      fbb_table_offset(&t, 1);
      break;
    case ADR_TYPE_RUN_END_ENCODED:
      ty = T_RUN_END_ENCODED;
      break;
    case ADR_TYPE_COUNT_:
      break;
  }
  size_t pos = fbb_table_end(b, &t);
  if (ty == T_TIMESTAMP && f->timezone != NULL)
    fbb_patch(b, t.pos[1], fbb_string(b, f->timezone, f->timezone_length));
  if (ty == T_UNION) {
    size_t vec = fbb_vector(b, (size_t)f->n_type_ids, 4);
    for (int32_t i = 0; i < f->n_type_ids; i++)
      fbb_put32(b, vec + 4 + 4 * (size_t)i, (uint32_t)(int32_t)f->type_ids[i]);
    fbb_patch(b, t.pos[1], vec);
  }
  *out_type = ty;
  return pos;
}

static bool is_int_type(enum adr_type t) {
  return t >= ADR_TYPE_INT8 && t <= ADR_TYPE_UINT64;
}

static int write_field(struct senc* e, const struct ArrowSchema* s, size_t slot, int depth,
                       int64_t index) {
  struct fbb* b = e->b;
  if (s == NULL || s->release == NULL)
    return adr__ipc_fail(e->error, EINVAL, &e->w, "child %lld is NULL or released",
                         (long long)index);
  size_t mark = adr__ipc_path_push(&e->w.path, s->name, index);
  int st = 0;
  if (depth > ADR_IPC_MAX_DEPTH) {
    st = adr__ipc_fail(e->error, EINVAL, &e->w, "nested deeper than %d levels", ADR_IPC_MAX_DEPTH);
    goto out;
  }
  struct adr_format f, fi;
  struct adr_error ferr;
  const struct ArrowSchema* v = s;
  if (s->dictionary != NULL) {
    if (adr_format_parse(s->format, &fi, &ferr) != 0 || !is_int_type(fi.type)) {
      st =
          adr__ipc_fail(e->error, EINVAL, &e->w, "dictionary index format \"%s\" is not an integer",
                        s->format ? s->format : "(null)");
      goto out;
    }
    v = s->dictionary;
    if (v->release == NULL || v->dictionary != NULL) {
      st = adr__ipc_fail(e->error, v->release ? ENOTSUP : EINVAL, &e->w, "dictionary %s",
                         v->release ? "values that are dictionary-encoded "
                                      "cannot be written"
                                    : "schema is released");
      goto out;
    }
  }
  if (adr_format_parse(v->format, &f, &ferr) != 0) {
    const char* msg = strchr(ferr.message, ']');
    st = adr__ipc_fail(e->error, EINVAL, &e->w, "%s", msg ? msg + 2 : ferr.message);
    goto out;
  }
  if (v->n_children < 0 || (v->n_children > 0 && v->children == NULL) ||
      (f.n_children >= 0 && v->n_children != f.n_children)) {
    st = adr__ipc_fail(e->error, EINVAL, &e->w, "%lld children for format \"%s\"",
                       (long long)v->n_children, v->format);
    goto out;
  }
  struct fbb_table t;
  fbb_table_begin(&t);
  if (s->name != NULL) fbb_table_offset(&t, 0);
  if (s->flags & ARROW_FLAG_NULLABLE) fbb_table_scalar(&t, 1, 1, 1);
  fbb_table_scalar(&t, 2, 1, 0); /* type tag, set below */
  fbb_table_offset(&t, 3);
  if (s->dictionary != NULL) fbb_table_offset(&t, 4);
  fbb_table_offset(&t, 5); /* children: always present, possibly empty */
  if (metadata_nonempty(s->metadata)) fbb_table_offset(&t, 6);
  size_t tp = fbb_table_end(b, &t);
  fbb_patch(b, slot, tp);
  if (s->name != NULL) fbb_patch(b, t.pos[0], fbb_string(b, s->name, strlen(s->name)));
  uint8_t ty = 0;
  size_t type_pos = write_type(e, v, &f, &ty);
  if (!b->oom) b->data[t.pos[2]] = ty;
  fbb_patch(b, t.pos[3], type_pos);
  if (s->dictionary != NULL) {
    struct fbb_table d;
    fbb_table_begin(&d);
    if (e->next_id != 0) fbb_table_scalar(&d, 0, 8, (uint64_t)e->next_id);
    fbb_table_offset(&d, 1);
    if (s->flags & ARROW_FLAG_DICTIONARY_ORDERED) fbb_table_scalar(&d, 2, 1, 1);
    e->next_id++;
    size_t dp = fbb_table_end(b, &d);
    fbb_patch(b, t.pos[4], dp);
    struct fbb_table it;
    fbb_table_begin(&it);
    fbb_table_scalar(&it, 0, 4, (uint32_t)fi.bit_width);
    bool sgn = fi.type == ADR_TYPE_INT8 || fi.type == ADR_TYPE_INT16 || fi.type == ADR_TYPE_INT32 ||
               fi.type == ADR_TYPE_INT64;
    if (sgn) fbb_table_scalar(&it, 1, 1, 1);
    fbb_patch(b, d.pos[1], fbb_table_end(b, &it));
  }
  size_t vec = fbb_vector(b, (size_t)v->n_children, 4);
  fbb_patch(b, t.pos[5], vec);
  for (int64_t i = 0; st == 0 && i < v->n_children; i++)
    st = write_field(e, v->children[i], vec + 4 + 4 * (size_t)i, depth + 1, i);
  if (st == 0 && metadata_nonempty(s->metadata)) write_metadata(b, s->metadata, t.pos[6]);
out:
  adr__path_pop(&e->w.path, mark);
  return st;
}

int adr_ipc_encode_schema(const struct ArrowSchema* schema, struct adr_ipc_message* out,
                          struct adr_error* error) {
  struct senc e = {.next_id = 0, .error = error};
  e.w.op = "adr_ipc_encode_schema";
  e.w.message = -1;
  adr__path_root(&e.w.path);
  if (out == NULL) return adr__ipc_fail(error, EINVAL, &e.w, "out is NULL");
  memset(out, 0, sizeof(*out));
  if (schema == NULL || schema->release == NULL)
    return adr__ipc_fail(error, EINVAL, &e.w, "schema is NULL or released");
  if (schema->format == NULL || strcmp(schema->format, "+s") != 0 || schema->dictionary != NULL)
    return adr__ipc_fail(error, EINVAL, &e.w,
                         "the schema of a stream must be a struct (\"+s\"), not \"%s\"",
                         schema->format ? schema->format : "(null)");
  if (schema->n_children < 0 || (schema->n_children > 0 && schema->children == NULL))
    return adr__ipc_fail(error, EINVAL, &e.w, "schema children are missing");
  struct fbb b;
  fbb_init(&b);
  fbb_start(&b);
  e.b = &b;
  size_t hslot;
  adr__ipc_message_begin(&b, IPC_HDR_SCHEMA, 0, &hslot, NULL);
  struct fbb_table t;
  fbb_table_begin(&t);
  fbb_table_offset(&t, 1);
  if (metadata_nonempty(schema->metadata)) fbb_table_offset(&t, 2);
  size_t sp = fbb_table_end(&b, &t);
  fbb_patch(&b, hslot, sp);
  size_t vec = fbb_vector(&b, (size_t)schema->n_children, 4);
  fbb_patch(&b, t.pos[1], vec);
  int st = 0;
  for (int64_t i = 0; st == 0 && i < schema->n_children; i++)
    st = write_field(&e, schema->children[i], vec + 4 + 4 * (size_t)i, 1, i);
  if (st == 0 && metadata_nonempty(schema->metadata))
    write_metadata(&b, schema->metadata, t.pos[2]);
  if (st == 0) st = adr__ipc_encapsulate(&b, e.w.op, &out->metadata, &out->metadata_size, error);
  fbb_free(&b);
  if (st != 0) return st;
  out->struct_size = sizeof(*out);
  out->type = ADR_IPC_MESSAGE_SCHEMA;
  out->dictionary_id = -1;
  return 0;
}

/* ---- decoding ------------------------------------------------------------- */

struct sdec {
  struct fbr* r;
  struct ipc_where w;
  struct adr_error* error;
  int64_t budget; /* fields left: bounds the work of shared subtrees */
  int64_t* ids;
  int64_t n_ids;
  int64_t cap_ids;
};

#define SFAIL(d, st, ...) adr__ipc_fail((d)->error, (st), &(d)->w, __VA_ARGS__)

static char* dup_n(const char* s, uint32_t n) {
  char* d = malloc((size_t)n + 1);
  if (d == NULL) return NULL;
  memcpy(d, s, n);
  d[n] = '\0';
  return d;
}

/* [KeyValue] -> Arrow's binary encoding (malloc'd), NULL when absent. */
static int read_metadata(struct sdec* d, const struct fbr_table* t, uint16_t id, char** out) {
  *out = NULL;
  uint32_t first, count;
  if (!fbr_vector(d->r, t, id, 4, &first, &count) || count == 0)
    return d->r->bad ? SFAIL(d, EINVAL, "malformed flatbuffer: %s", d->r->why) : 0;
  size_t size = 4;
  for (int pass = 0; pass < 2; pass++) {
    char* m = pass ? malloc(size) : NULL;
    if (pass && m == NULL) return SFAIL(d, ENOMEM, "out of memory");
    size_t pos = 4;
    if (pass) memcpy(m, &count, 4);
    for (uint32_t i = 0; i < count; i++) {
      struct fbr_table kv = fbr_vector_table(d->r, first, i);
      const char* s[2] = {"", ""};
      uint32_t n[2] = {0, 0};
      fbr_string(d->r, &kv, 0, &s[0], &n[0]);
      fbr_string(d->r, &kv, 1, &s[1], &n[1]);
      if (d->r->bad) {
        free(m);
        return SFAIL(d, EINVAL, "malformed custom_metadata: %s", d->r->why);
      }
      for (int j = 0; j < 2; j++) {
        if (pass) {
          int32_t len = (int32_t)n[j];
          memcpy(m + pos, &len, 4);
          memcpy(m + pos + 4, s[j], n[j]);
        }
        pos += 4 + n[j];
      }
    }
    if (pass) *out = m;
    size = pos;
  }
  return 0;
}

static const char* unit_char(uint64_t u) {
  static const char* const c[] = {"s", "m", "u", "n"};
  return u < 4 ? c[u] : NULL;
}

/* The format string of a Type table; *out is malloc'd. */
static int type_format(struct sdec* d, uint8_t ty, const struct fbr_table* t, int64_t n_children,
                       char** out) {
  struct fbr* r = d->r;
  char buf[96];
  const char* fmt = NULL;
  char* big = NULL;
  if (!t->present) return SFAIL(d, EINVAL, "type table missing (type tag %u)", (unsigned)ty);
  switch (ty) {
    case T_NULL:
      fmt = "n";
      break;
    case T_BOOL:
      fmt = "b";
      break;
    case T_INT: {
      int32_t w = (int32_t)fbr_scalar(r, t, 0, 4, 0);
      bool sgn = fbr_scalar(r, t, 1, 1, 0) != 0;
      switch (w) {
        case 8:
          fmt = sgn ? "c" : "C";
          break;
        case 16:
          fmt = sgn ? "s" : "S";
          break;
        case 32:
          fmt = sgn ? "i" : "I";
          break;
        case 64:
          fmt = sgn ? "l" : "L";
          break;
        default:
          return SFAIL(d, EINVAL, "Int bitWidth %d (expected 8, 16, 32 or 64)", (int)w);
      }
      break;
    }
    case T_FLOAT: {
      uint64_t p = fbr_scalar(r, t, 0, 2, 0);
      if (p > 2)
        return SFAIL(d, EINVAL, "FloatingPoint precision %llu unknown", (unsigned long long)p);
      fmt = p == 0 ? "e" : p == 1 ? "f" : "g";
      break;
    }
    case T_DECIMAL: {
      int32_t p = (int32_t)fbr_scalar(r, t, 0, 4, 0), s = (int32_t)fbr_scalar(r, t, 1, 4, 0);
      int32_t w = (int32_t)fbr_scalar(r, t, 2, 4, 128);
      if (w != 32 && w != 64 && w != 128 && w != 256)
        return SFAIL(d, EINVAL, "Decimal bitWidth %d (expected 32, 64, 128 or 256)", (int)w);
      snprintf(buf, sizeof(buf), "d:%d,%d,%d", (int)p, (int)s, (int)w);
      fmt = buf;
      break;
    }
    case T_FIXED_SIZE_BINARY:
      snprintf(buf, sizeof(buf), "w:%d", (int)(int32_t)fbr_scalar(r, t, 0, 4, 0));
      fmt = buf;
      break;
    case T_BINARY:
      fmt = "z";
      break;
    case T_UTF8:
      fmt = "u";
      break;
    case T_LARGE_BINARY:
      fmt = "Z";
      break;
    case T_LARGE_UTF8:
      fmt = "U";
      break;
    case T_BINARY_VIEW:
      fmt = "vz";
      break;
    case T_UTF8_VIEW:
      fmt = "vu";
      break;
    case T_DATE: {
      uint64_t u = fbr_scalar(r, t, 0, 2, 1);
      if (u > 1) return SFAIL(d, EINVAL, "Date unit %llu unknown", (unsigned long long)u);
      fmt = u == 0 ? "tdD" : "tdm";
      break;
    }
    case T_TIME: {
      const char* u = unit_char(fbr_scalar(r, t, 0, 2, 1));
      int32_t w = (int32_t)fbr_scalar(r, t, 1, 4, 32);
      bool ok = u != NULL && ((w == 32 && (u[0] == 's' || u[0] == 'm')) ||
                              (w == 64 && (u[0] == 'u' || u[0] == 'n')));
      if (!ok) return SFAIL(d, EINVAL, "Time unit/bitWidth %d combination invalid", (int)w);
      snprintf(buf, sizeof(buf), "tt%s", u);
      fmt = buf;
      break;
    }
    case T_TIMESTAMP: {
      const char* u = unit_char(fbr_scalar(r, t, 0, 2, 0));
      if (u == NULL) return SFAIL(d, EINVAL, "Timestamp unit unknown");
      const char* tz = "";
      uint32_t tzn = 0;
      fbr_string(r, t, 1, &tz, &tzn);
      if (memchr(tz, '\0', tzn) != NULL) return SFAIL(d, EINVAL, "timezone contains NUL");
      big = malloc((size_t)tzn + 8);
      if (big == NULL) return SFAIL(d, ENOMEM, "out of memory");
      snprintf(big, (size_t)tzn + 8, "ts%s:%.*s", u, (int)tzn, tz);
      break;
    }
    case T_DURATION: {
      const char* u = unit_char(fbr_scalar(r, t, 0, 2, 1));
      if (u == NULL) return SFAIL(d, EINVAL, "Duration unit unknown");
      snprintf(buf, sizeof(buf), "tD%s", u);
      fmt = buf;
      break;
    }
    case T_INTERVAL: {
      uint64_t u = fbr_scalar(r, t, 0, 2, 0);
      if (u > 2) return SFAIL(d, EINVAL, "Interval unit %llu unknown", (unsigned long long)u);
      fmt = u == 0 ? "tiM" : u == 1 ? "tiD" : "tin";
      break;
    }
    case T_LIST:
      fmt = "+l";
      break;
    case T_LARGE_LIST:
      fmt = "+L";
      break;
    case T_LIST_VIEW:
      fmt = "+vl";
      break;
    case T_LARGE_LIST_VIEW:
      fmt = "+vL";
      break;
    case T_FIXED_SIZE_LIST:
      snprintf(buf, sizeof(buf), "+w:%d", (int)(int32_t)fbr_scalar(r, t, 0, 4, 0));
      fmt = buf;
      break;
    case T_STRUCT:
      fmt = "+s";
      break;
    case T_MAP:
      fmt = "+m";
      break;
    case T_RUN_END_ENCODED:
      fmt = "+r";
      break;
    case T_UNION: {
      uint64_t mode = fbr_scalar(r, t, 0, 2, 0);
      if (mode > 1) return SFAIL(d, EINVAL, "Union mode %llu unknown", (unsigned long long)mode);
      uint32_t first = 0, count = 0;
      bool has = fbr_vector(r, t, 1, 4, &first, &count);
      if (r->bad) break;
      if (has && count != n_children)
        return SFAIL(d, EINVAL, "Union has %u typeIds for %lld children", (unsigned)count,
                     (long long)n_children);
      if (n_children > ADR_MAX_UNION_TYPE_IDS)
        return SFAIL(d, EINVAL, "Union with %lld children (at most %d)", (long long)n_children,
                     ADR_MAX_UNION_TYPE_IDS);
      big = malloc(8 + 5 * (size_t)n_children);
      if (big == NULL) return SFAIL(d, ENOMEM, "out of memory");
      size_t pos = (size_t)sprintf(big, "+u%c:", mode ? 'd' : 's');
      for (int64_t i = 0; i < n_children; i++) {
        int64_t id = has ? (int32_t)fbr_read(r, first + 4 * (uint32_t)i, 4) : i;
        if (id < 0 || id > 127) {
          free(big);
          return SFAIL(d, EINVAL, "Union type id %lld out of range [0, 127]", (long long)id);
        }
        pos += (size_t)sprintf(big + pos, "%s%lld", i ? "," : "", (long long)id);
      }
      break;
    }
    default:
      return SFAIL(d, EINVAL, "unknown type tag %u", (unsigned)ty);
  }
  if (r->bad) {
    free(big);
    return SFAIL(d, EINVAL, "malformed flatbuffer: %s", r->why);
  }
  if (big == NULL) {
    big = dup_n(fmt, (uint32_t)strlen(fmt));
    if (big == NULL) return SFAIL(d, ENOMEM, "out of memory");
  }
  *out = big;
  return 0;
}

static int read_field(struct sdec* d, const struct fbr_table* ft, struct ArrowSchema* out,
                      int depth, int64_t index);

static int read_children(struct sdec* d, uint32_t first, uint32_t count, struct ArrowSchema* s,
                         int depth) {
  for (uint32_t i = 0; i < count; i++) {
    struct fbr_table c = fbr_vector_table(d->r, first, i);
    if (d->r->bad) return SFAIL(d, EINVAL, "malformed flatbuffer: %s", d->r->why);
    int st = read_field(d, &c, s->children[i], depth + 1, i);
    if (st) return st;
  }
  return 0;
}

static int read_field(struct sdec* d, const struct fbr_table* ft, struct ArrowSchema* out,
                      int depth, int64_t index) {
  struct fbr* r = d->r;
  const char* name = NULL;
  uint32_t name_len = 0;
  fbr_string(r, ft, 0, &name, &name_len);
  char* cname = name ? dup_n(name, name_len) : NULL;
  size_t mark = adr__ipc_path_push(&d->w.path, cname, index);
  char* fmt = NULL;
  char* meta = NULL;
  int st = 0;
  if (name && cname == NULL) {
    st = SFAIL(d, ENOMEM, "out of memory");
    goto out;
  }
  if (r->bad) {
    st = SFAIL(d, EINVAL, "malformed flatbuffer: %s", r->why);
    goto out;
  }
  if (depth > ADR_IPC_MAX_DEPTH) {
    st = SFAIL(d, EINVAL, "nested deeper than %d levels", ADR_IPC_MAX_DEPTH);
    goto out;
  }
  if (--d->budget < 0) {
    st = SFAIL(d, EINVAL, "more than %d fields", 1 << 16);
    goto out;
  }
  bool nullable = fbr_scalar(r, ft, 1, 1, 0) != 0;
  uint8_t ty = (uint8_t)fbr_scalar(r, ft, 2, 1, 0);
  struct fbr_table tt = fbr_table_field(r, ft, 3);
  struct fbr_table dict = fbr_table_field(r, ft, 4);
  uint32_t cfirst = 0, ccount = 0;
  fbr_vector(r, ft, 5, 4, &cfirst, &ccount);
  if (r->bad) {
    st = SFAIL(d, EINVAL, "malformed flatbuffer: %s", r->why);
    goto out;
  }
  st = type_format(d, ty, &tt, ccount, &fmt);
  if (st) goto out;
  struct adr_format f;
  struct adr_error ferr;
  if (adr_format_parse(fmt, &f, &ferr) != 0) {
    st = SFAIL(d, EINVAL, "type decodes to an invalid format \"%s\"", fmt);
    goto out;
  }
  if (f.n_children >= 0 && (int64_t)ccount != f.n_children) {
    st = SFAIL(d, EINVAL, "%u children for a %s field (expected %d)", (unsigned)ccount,
               adr_type_name(f.type), (int)f.n_children);
    goto out;
  }
  st = read_metadata(d, ft, 6, &meta);
  if (st) goto out;
  int64_t flags = nullable ? ARROW_FLAG_NULLABLE : 0;
  if (ty == T_MAP && fbr_scalar(r, &tt, 0, 1, 0)) flags |= ARROW_FLAG_MAP_KEYS_SORTED;
  struct ArrowSchema* v = out;
  if (dict.present) {
    const char* ifmt = "i";
    struct fbr_table it = fbr_table_field(r, &dict, 1);
    if (it.present) {
      char* f2 = NULL;
      st = type_format(d, T_INT, &it, 0, &f2);
      if (st) goto out;
      static const char* const ints[] = {"c", "C", "s", "S", "i", "I", "l", "L"};
      for (int i = 0; i < 8; i++)
        if (strcmp(f2, ints[i]) == 0) ifmt = ints[i];
      free(f2);
    }
    if (fbr_scalar(r, &dict, 2, 1, 0)) flags |= ARROW_FLAG_DICTIONARY_ORDERED;
    if (fbr_scalar(r, &dict, 3, 2, 0) != 0) {
      st = SFAIL(d, ENOTSUP, "dictionary kind other than DenseArray");
      goto out;
    }
    if (d->n_ids == d->cap_ids) {
      int64_t cap = d->cap_ids ? 2 * d->cap_ids : 8;
      int64_t* ids = realloc(d->ids, (size_t)cap * sizeof(*ids));
      if (ids == NULL) {
        st = SFAIL(d, ENOMEM, "out of memory");
        goto out;
      }
      d->ids = ids;
      d->cap_ids = cap;
    }
    d->ids[d->n_ids++] = (int64_t)fbr_scalar(r, &dict, 0, 8, 0);
    st = adr_schema_init(out, ifmt, cname, flags, 0, d->error);
    if (st == 0) st = adr_schema_alloc_dictionary(out, d->error);
    if (st == 0) {
      st = adr_schema_init(out->dictionary, fmt, NULL, ARROW_FLAG_NULLABLE, ccount, d->error);
      if (st) {
        out->release(out);
        goto out;
      }
    } else if (out->release) {
      out->release(out);
    }
    if (st) goto out;
    v = out->dictionary;
  } else {
    st = adr_schema_init(out, fmt, cname, flags, ccount, d->error);
    if (st) goto out;
  }
  if (meta != NULL) st = adr_schema_set_metadata(out, meta, d->error);
  if (st == 0) st = read_children(d, cfirst, ccount, v, depth);
  if (st == 0 && f.type == ADR_TYPE_MAP) {
    const struct ArrowSchema* e = v->children[0];
    if (strcmp(e->format, "+s") != 0 || e->n_children != 2 || e->dictionary != NULL)
      st = SFAIL(d, EINVAL, "map entries must be a struct of two fields (key, value)");
  }
  if (st) out->release(out);
out:
  free(fmt);
  free(meta);
  free(cname);
  adr__path_pop(&d->w.path, mark);
  return st;
}

int adr__ipc_schema_decode(const struct adr_ipc_decoded* message, const char* op,
                           struct ArrowSchema* out, int64_t** out_dict_ids, int64_t* out_n_dicts,
                           struct adr_error* error) {
  struct sdec d = {.error = error, .budget = 1 << 16};
  d.w.op = op;
  d.w.message = message ? message->message_index : -1;
  d.w.type = ADR_IPC_MESSAGE_SCHEMA;
  adr__path_root(&d.w.path);
  if (message == NULL || message->private_data == NULL || out == NULL)
    return SFAIL(&d, EINVAL, "message or out is NULL");
  if (message->type != ADR_IPC_MESSAGE_SCHEMA)
    return SFAIL(&d, EINVAL, "expected a schema message, got a %s",
                 adr_ipc_message_type_name(message->type));
  const struct ipc_decoded_priv* p = message->private_data;
  struct fbr r;
  fbr_init(&r, p->metadata, p->metadata_size);
  d.r = &r;
  struct fbr_table root = fbr_root(&r);
  struct fbr_table hdr = fbr_table_field(&r, &root, 2);
  if (r.bad || !hdr.present || hdr.pos != p->schema_pos)
    return SFAIL(&d, EINVAL, "malformed flatbuffer: %s", r.bad ? r.why : "no schema table");
  if (fbr_scalar(&r, &hdr, 0, 2, 0) != 0)
    return SFAIL(&d, ENOTSUP, "big-endian streams are not supported");
  uint32_t first = 0, count = 0;
  fbr_vector(&r, &hdr, 1, 4, &first, &count);
  char* meta = NULL;
  int st = r.bad ? SFAIL(&d, EINVAL, "malformed flatbuffer: %s", r.why) : 0;
  if (st == 0) st = read_metadata(&d, &hdr, 2, &meta);
  if (st == 0) st = adr_schema_init(out, "+s", "", 0, count, error);
  if (st != 0) {
    free(meta);
    return st;
  }
  if (meta != NULL) st = adr_schema_set_metadata(out, meta, error);
  free(meta);
  if (st == 0) st = read_children(&d, first, count, out, 0);
  if (st != 0) {
    out->release(out);
    free(d.ids);
    return st;
  }
  if (out_dict_ids != NULL) {
    *out_dict_ids = d.ids;
    *out_n_dicts = d.n_ids;
  } else {
    free(d.ids);
  }
  return 0;
}

int adr_ipc_decode_schema(const struct adr_ipc_decoded* message, struct ArrowSchema* out,
                          struct adr_error* error) {
  return adr__ipc_schema_decode(message, "adr_ipc_decode_schema", out, NULL, NULL, error);
}
