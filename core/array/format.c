/* SPDX-License-Identifier: Apache-2.0
 *
 * Arrow format strings: one parser for every type of the columnar format,
 * and the buffer layout each type implies.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "array_internal.h"

#define OP "adr_format_parse"

static const char* const type_names[ADR_TYPE_COUNT_] = {
    [ADR_TYPE_NA] = "null",
    [ADR_TYPE_BOOL] = "bool",
    [ADR_TYPE_INT8] = "int8",
    [ADR_TYPE_UINT8] = "uint8",
    [ADR_TYPE_INT16] = "int16",
    [ADR_TYPE_UINT16] = "uint16",
    [ADR_TYPE_INT32] = "int32",
    [ADR_TYPE_UINT32] = "uint32",
    [ADR_TYPE_INT64] = "int64",
    [ADR_TYPE_UINT64] = "uint64",
    [ADR_TYPE_HALF_FLOAT] = "half_float",
    [ADR_TYPE_FLOAT] = "float",
    [ADR_TYPE_DOUBLE] = "double",
    [ADR_TYPE_DECIMAL32] = "decimal32",
    [ADR_TYPE_DECIMAL64] = "decimal64",
    [ADR_TYPE_DECIMAL128] = "decimal128",
    [ADR_TYPE_DECIMAL256] = "decimal256",
    [ADR_TYPE_FIXED_SIZE_BINARY] = "fixed_size_binary",
    [ADR_TYPE_BINARY] = "binary",
    [ADR_TYPE_STRING] = "string",
    [ADR_TYPE_LARGE_BINARY] = "large_binary",
    [ADR_TYPE_LARGE_STRING] = "large_string",
    [ADR_TYPE_BINARY_VIEW] = "binary_view",
    [ADR_TYPE_STRING_VIEW] = "string_view",
    [ADR_TYPE_DATE32] = "date32",
    [ADR_TYPE_DATE64] = "date64",
    [ADR_TYPE_TIME32] = "time32",
    [ADR_TYPE_TIME64] = "time64",
    [ADR_TYPE_TIMESTAMP] = "timestamp",
    [ADR_TYPE_DURATION] = "duration",
    [ADR_TYPE_INTERVAL_MONTHS] = "interval_months",
    [ADR_TYPE_INTERVAL_DAY_TIME] = "interval_day_time",
    [ADR_TYPE_INTERVAL_MONTH_DAY_NANO] = "interval_month_day_nano",
    [ADR_TYPE_LIST] = "list",
    [ADR_TYPE_LARGE_LIST] = "large_list",
    [ADR_TYPE_LIST_VIEW] = "list_view",
    [ADR_TYPE_LARGE_LIST_VIEW] = "large_list_view",
    [ADR_TYPE_FIXED_SIZE_LIST] = "fixed_size_list",
    [ADR_TYPE_STRUCT] = "struct",
    [ADR_TYPE_MAP] = "map",
    [ADR_TYPE_SPARSE_UNION] = "sparse_union",
    [ADR_TYPE_DENSE_UNION] = "dense_union",
    [ADR_TYPE_RUN_END_ENCODED] = "run_end_encoded",
};

const char* adr_type_name(enum adr_type type) {
  if ((int)type < 0 || type >= ADR_TYPE_COUNT_) return NULL;
  return type_names[type];
}

/* ---- shared helpers of core/array ---------------------------------------- */

/* Path pushes run for every node of every validated or encoded batch:
 * plain copies, no snprintf (which was a fifth of encoding a small
 * batch). Truncated at the text's size like snprintf would. */
static void path_put(struct adr__path* p, const char* s, size_t n) {
  size_t room = sizeof(p->text) - 1 - p->len;
  if (n > room) n = room;
  memcpy(p->text + p->len, s, n);
  p->len += n;
  p->text[p->len] = '\0';
}

static void path_put_index(struct adr__path* p, int64_t i) {
  char tmp[24];
  size_t at = sizeof(tmp);
  uint64_t v = i < 0 ? (uint64_t)0 - (uint64_t)i : (uint64_t)i;
  tmp[--at] = ']';
  do {
    tmp[--at] = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0);
  if (i < 0) tmp[--at] = '-';
  tmp[--at] = '[';
  path_put(p, tmp + at, sizeof(tmp) - at);
}

size_t adr__path_push_child(struct adr__path* p, int64_t i) {
  size_t old = p->len;
  if (p->len) path_put(p, ".", 1);
  path_put(p, "children", 8);
  path_put_index(p, i);
  return old;
}

size_t adr__path_push_name(struct adr__path* p, const char* name) {
  size_t old = p->len;
  if (p->len) path_put(p, ".", 1);
  path_put(p, name, strlen(name));
  return old;
}

size_t adr__path_push_index(struct adr__path* p, int64_t i) {
  size_t old = p->len;
  if (p->len) path_put(p, ".", 1);
  path_put_index(p, i);
  return old;
}

int adr__path_error(struct adr_error* error, int status, const char* op,
                    const struct adr__path* path, const char* fmt, ...) {
  if (error == NULL) return status;
  int n = snprintf(error->message, sizeof(error->message), "[%s] %s: ", op, adr__path_str(path));
  if (n < 0 || (size_t)n >= sizeof(error->message)) return status;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(error->message + n, sizeof(error->message) - (size_t)n, fmt, ap);
  va_end(ap);
  return status;
}

bool adr__device_type_known(ArrowDeviceType t) {
  switch (t) {
    case ARROW_DEVICE_CPU:
    case ARROW_DEVICE_CUDA:
    case ARROW_DEVICE_CUDA_HOST:
    case ARROW_DEVICE_OPENCL:
    case ARROW_DEVICE_VULKAN:
    case ARROW_DEVICE_METAL:
    case ARROW_DEVICE_VPI:
    case ARROW_DEVICE_ROCM:
    case ARROW_DEVICE_ROCM_HOST:
    case ARROW_DEVICE_EXT_DEV:
    case ARROW_DEVICE_CUDA_MANAGED:
    case ARROW_DEVICE_ONEAPI:
    case ARROW_DEVICE_WEBGPU:
    case ARROW_DEVICE_HEXAGON:
      return true;
    default:
      return false;
  }
}

int adr__array_device(ArrowDeviceType type, int64_t id, struct adr_device** out,
                      struct adr_error* error) {
  return adr_device_get(type, id < 0 ? 0 : id, out, error);
}

/* ---- the parser ----------------------------------------------------------- */

static int fail(struct adr_error* error, const char* format, size_t pos, const char* what) {
  return adr__errorf(error, EINVAL, OP, NULL, "format \"%.64s\": %s at position %zu", format,
                     what, pos + 1);
}

/* Parses a decimal number at s[*pos] (optional '-' when `sign`); the value
 * must fit in [min, max]. */
static bool parse_int(const char* s, size_t* pos, bool sign, long long min, long long max,
                      long long* out) {
  size_t i = *pos;
  bool neg = false;
  if (sign && s[i] == '-') {
    neg = true;
    i++;
  }
  if (s[i] < '0' || s[i] > '9') return false;
  long long v = 0;
  while (s[i] >= '0' && s[i] <= '9') {
    v = v * 10 + (s[i] - '0');
    if (v > (long long)1 << 40) return false;
    i++;
  }
  if (neg) v = -v;
  if (v < min || v > max) return false;
  *pos = i;
  *out = v;
  return true;
}

static void set_fixed(struct adr_format* f, enum adr_type t, int bits) {
  f->type = t;
  f->layout = ADR_LAYOUT_FIXED;
  f->bit_width = bits;
  f->n_buffers = 2;
  f->n_children = 0;
}

static void set_var(struct adr_format* f, enum adr_type t, int offset_bytes) {
  f->type = t;
  f->layout = ADR_LAYOUT_VAR_BINARY;
  f->offset_bytes = offset_bytes;
  f->n_buffers = 3;
  f->n_children = 0;
}

static int parse_time_unit(char c, enum adr_time_unit* out) {
  switch (c) {
    case 's': *out = ADR_TIME_UNIT_SECOND; return 0;
    case 'm': *out = ADR_TIME_UNIT_MILLI; return 0;
    case 'u': *out = ADR_TIME_UNIT_MICRO; return 0;
    case 'n': *out = ADR_TIME_UNIT_NANO; return 0;
    default: return -1;
  }
}

static int parse_temporal(const char* s, struct adr_format* f, struct adr_error* error) {
  /* s[0] == 't' */
  char kind = s[1];
  if (kind == '\0') return fail(error, s, 1, "missing temporal kind");
  char sub = s[2];
  if (sub == '\0') return fail(error, s, 2, "missing temporal unit");
  switch (kind) {
    case 'd':
      if (sub == 'D') set_fixed(f, ADR_TYPE_DATE32, 32);
      else if (sub == 'm') set_fixed(f, ADR_TYPE_DATE64, 64);
      else return fail(error, s, 2, "unknown date unit (expected D or m)");
      break;
    case 't':
      if (parse_time_unit(sub, &f->unit) != 0)
        return fail(error, s, 2, "unknown time unit (expected s, m, u or n)");
      if (sub == 's' || sub == 'm') set_fixed(f, ADR_TYPE_TIME32, 32);
      else set_fixed(f, ADR_TYPE_TIME64, 64);
      break;
    case 's':
      if (parse_time_unit(sub, &f->unit) != 0)
        return fail(error, s, 2, "unknown timestamp unit (expected s, m, u or n)");
      if (s[3] != ':') return fail(error, s, 3, "expected ':' before the time zone");
      set_fixed(f, ADR_TYPE_TIMESTAMP, 64);
      f->timezone_length = strlen(s + 4);
      f->timezone = f->timezone_length ? s + 4 : NULL;
      return 0;
    case 'D':
      if (parse_time_unit(sub, &f->unit) != 0)
        return fail(error, s, 2, "unknown duration unit (expected s, m, u or n)");
      set_fixed(f, ADR_TYPE_DURATION, 64);
      break;
    case 'i':
      if (sub == 'M') set_fixed(f, ADR_TYPE_INTERVAL_MONTHS, 32);
      else if (sub == 'D') set_fixed(f, ADR_TYPE_INTERVAL_DAY_TIME, 64);
      else if (sub == 'n') set_fixed(f, ADR_TYPE_INTERVAL_MONTH_DAY_NANO, 128);
      else return fail(error, s, 2, "unknown interval unit (expected M, D or n)");
      break;
    default:
      return fail(error, s, 1, "unknown temporal kind (expected d, t, s, D or i)");
  }
  if (s[3] != '\0') return fail(error, s, 3, "unexpected trailing characters");
  return 0;
}

static int parse_union(const char* s, size_t pos, struct adr_format* f,
                       struct adr_error* error) {
  /* s[pos] is just after "+ud:" / "+us:" */
  f->n_type_ids = 0;
  f->n_children = 0;
  if (s[pos] == '\0') return 0;
  for (;;) {
    long long v;
    if (!parse_int(s, &pos, false, 0, 127, &v))
      return fail(error, s, pos, "expected a union type id in 0..127");
    if (f->n_type_ids >= ADR_MAX_UNION_TYPE_IDS)
      return fail(error, s, pos, "more than 128 union type ids");
    for (int i = 0; i < f->n_type_ids; i++)
      if (f->type_ids[i] == (int8_t)v) return fail(error, s, pos - 1, "duplicate union type id");
    f->type_ids[f->n_type_ids++] = (int8_t)v;
    if (s[pos] == '\0') break;
    if (s[pos] != ',') return fail(error, s, pos, "expected ',' between union type ids");
    pos++;
  }
  f->n_children = f->n_type_ids;
  return 0;
}

static int parse_nested(const char* s, struct adr_format* f, struct adr_error* error) {
  /* s[0] == '+' */
  size_t end;
  switch (s[1]) {
    case 'l':
    case 'L':
      f->type = s[1] == 'l' ? ADR_TYPE_LIST : ADR_TYPE_LARGE_LIST;
      f->layout = ADR_LAYOUT_LIST;
      f->offset_bytes = s[1] == 'l' ? 4 : 8;
      f->n_buffers = 2;
      f->n_children = 1;
      end = 2;
      break;
    case 'm':
      f->type = ADR_TYPE_MAP;
      f->layout = ADR_LAYOUT_LIST;
      f->offset_bytes = 4;
      f->n_buffers = 2;
      f->n_children = 1;
      end = 2;
      break;
    case 's':
      f->type = ADR_TYPE_STRUCT;
      f->layout = ADR_LAYOUT_STRUCT;
      f->n_buffers = 1;
      f->n_children = -1;
      end = 2;
      break;
    case 'r':
      f->type = ADR_TYPE_RUN_END_ENCODED;
      f->layout = ADR_LAYOUT_RUN_END;
      f->n_buffers = 0;
      f->n_children = 2;
      end = 2;
      break;
    case 'v':
      if (s[2] != 'l' && s[2] != 'L') return fail(error, s, 2, "expected l or L after +v");
      f->type = s[2] == 'l' ? ADR_TYPE_LIST_VIEW : ADR_TYPE_LARGE_LIST_VIEW;
      f->layout = ADR_LAYOUT_LIST_VIEW;
      f->offset_bytes = s[2] == 'l' ? 4 : 8;
      f->n_buffers = 3;
      f->n_children = 1;
      end = 3;
      break;
    case 'w': {
      if (s[2] != ':') return fail(error, s, 2, "expected ':' after +w");
      size_t pos = 3;
      long long v;
      if (!parse_int(s, &pos, false, 1, INT32_MAX, &v))
        return fail(error, s, pos, "expected a list size in 1..2147483647");
      f->type = ADR_TYPE_FIXED_SIZE_LIST;
      f->layout = ADR_LAYOUT_FIXED_LIST;
      f->fixed_size = (int32_t)v;
      f->n_buffers = 1;
      f->n_children = 1;
      end = pos;
      break;
    }
    case 'u':
      if (s[2] != 'd' && s[2] != 's') return fail(error, s, 2, "expected d or s after +u");
      if (s[3] != ':') return fail(error, s, 3, "expected ':' before the union type ids");
      if (s[2] == 'd') {
        f->type = ADR_TYPE_DENSE_UNION;
        f->layout = ADR_LAYOUT_DENSE_UNION;
        f->offset_bytes = 4;
        f->n_buffers = 2;
      } else {
        f->type = ADR_TYPE_SPARSE_UNION;
        f->layout = ADR_LAYOUT_SPARSE_UNION;
        f->n_buffers = 1;
      }
      return parse_union(s, 4, f, error);
    case '\0':
      return fail(error, s, 1, "missing nested type after '+'");
    default:
      return fail(error, s, 1, "unknown nested type");
  }
  if (s[end] != '\0') return fail(error, s, end, "unexpected trailing characters");
  return 0;
}

static int parse_decimal(const char* s, struct adr_format* f, struct adr_error* error) {
  if (s[1] != ':') return fail(error, s, 1, "expected ':' after d");
  size_t pos = 2;
  long long precision, scale, width = 128;
  if (!parse_int(s, &pos, false, 1, 76, &precision))
    return fail(error, s, pos, "expected a decimal precision in 1..76");
  if (s[pos] != ',') return fail(error, s, pos, "expected ',' after the decimal precision");
  pos++;
  if (!parse_int(s, &pos, true, -1000000, 1000000, &scale))
    return fail(error, s, pos, "expected a decimal scale");
  if (s[pos] == ',') {
    pos++;
    size_t wpos = pos;
    if (!parse_int(s, &pos, false, 1, 256, &width) ||
        (width != 32 && width != 64 && width != 128 && width != 256))
      return fail(error, s, wpos, "decimal bit width must be 32, 64, 128 or 256");
  }
  if (s[pos] != '\0') return fail(error, s, pos, "unexpected trailing characters");
  long long max_precision = width == 32 ? 9 : width == 64 ? 18 : width == 128 ? 38 : 76;
  if (precision > max_precision)
    return fail(error, s, 2, "decimal precision too large for its bit width");
  set_fixed(f, width == 32    ? ADR_TYPE_DECIMAL32
               : width == 64  ? ADR_TYPE_DECIMAL64
               : width == 128 ? ADR_TYPE_DECIMAL128
                              : ADR_TYPE_DECIMAL256,
            (int)width);
  f->precision = (int32_t)precision;
  f->scale = (int32_t)scale;
  return 0;
}

int adr_format_parse(const char* format, struct adr_format* out, struct adr_error* error) {
  if (format == NULL) return adr__errorf(error, EINVAL, OP, NULL, "format is NULL");
  if (out == NULL) return adr__errorf(error, EINVAL, OP, NULL, "out is NULL");
  struct adr_format f;
  memset(&f, 0, sizeof(f));
  const char* s = format;
  int st = 0;
  if (s[0] == '\0') return adr__errorf(error, EINVAL, OP, NULL, "format is empty");
  bool single = s[1] == '\0';
  switch (s[0]) {
    case 'n':
      f.type = ADR_TYPE_NA;
      f.layout = ADR_LAYOUT_NULL;
      break;
    case 'b': set_fixed(&f, ADR_TYPE_BOOL, 1); break;
    case 'c': set_fixed(&f, ADR_TYPE_INT8, 8); break;
    case 'C': set_fixed(&f, ADR_TYPE_UINT8, 8); break;
    case 's': set_fixed(&f, ADR_TYPE_INT16, 16); break;
    case 'S': set_fixed(&f, ADR_TYPE_UINT16, 16); break;
    case 'i': set_fixed(&f, ADR_TYPE_INT32, 32); break;
    case 'I': set_fixed(&f, ADR_TYPE_UINT32, 32); break;
    case 'l': set_fixed(&f, ADR_TYPE_INT64, 64); break;
    case 'L': set_fixed(&f, ADR_TYPE_UINT64, 64); break;
    case 'e': set_fixed(&f, ADR_TYPE_HALF_FLOAT, 16); break;
    case 'f': set_fixed(&f, ADR_TYPE_FLOAT, 32); break;
    case 'g': set_fixed(&f, ADR_TYPE_DOUBLE, 64); break;
    case 'z': set_var(&f, ADR_TYPE_BINARY, 4); break;
    case 'Z': set_var(&f, ADR_TYPE_LARGE_BINARY, 8); break;
    case 'u': set_var(&f, ADR_TYPE_STRING, 4); break;
    case 'U': set_var(&f, ADR_TYPE_LARGE_STRING, 8); break;
    case 'v':
      if (s[1] != 'z' && s[1] != 'u') return fail(error, s, 1, "expected z or u after v");
      if (s[2] != '\0') return fail(error, s, 2, "unexpected trailing characters");
      f.type = s[1] == 'z' ? ADR_TYPE_BINARY_VIEW : ADR_TYPE_STRING_VIEW;
      f.layout = ADR_LAYOUT_BINARY_VIEW;
      f.n_buffers = 3;
      single = true;
      break;
    case 'w': {
      if (s[1] != ':') return fail(error, s, 1, "expected ':' after w");
      size_t pos = 2;
      long long v;
      if (!parse_int(s, &pos, false, 1, INT32_MAX / 8, &v))
        return fail(error, s, pos, "expected a byte width in 1..268435455");
      if (s[pos] != '\0') return fail(error, s, pos, "unexpected trailing characters");
      set_fixed(&f, ADR_TYPE_FIXED_SIZE_BINARY, (int)(v * 8));
      f.fixed_size = (int32_t)v;
      single = true;
      break;
    }
    case 'd':
      st = parse_decimal(s, &f, error);
      single = true;
      break;
    case 't':
      st = parse_temporal(s, &f, error);
      single = true;
      break;
    case '+':
      st = parse_nested(s, &f, error);
      single = true;
      break;
    default:
      return fail(error, s, 0, "unknown type character");
  }
  if (st != 0) return st;
  if (!single) return fail(error, s, 1, "unexpected trailing characters");
  *out = f;
  return 0;
}

/* ---- buffer sizes --------------------------------------------------------- */

static int mul_size(int64_t n, int64_t width, int64_t* out) {
  return __builtin_mul_overflow(n, width, out) ? EOVERFLOW : 0;
}

int adr_format_buffer_sizes(const struct adr_format* format, int64_t offset, int64_t length,
                            int64_t n_buffers, int64_t* out_sizes, struct adr_error* error) {
  const char* op = "adr_format_buffer_sizes";
  if (format == NULL || (out_sizes == NULL && n_buffers > 0))
    return adr__errorf(error, EINVAL, op, NULL, "%s is NULL", format ? "out_sizes" : "format");
  if (offset < 0 || length < 0)
    return adr__errorf(error, EINVAL, op, NULL, "negative %s (%lld)",
                       offset < 0 ? "offset" : "length",
                       (long long)(offset < 0 ? offset : length));
  int64_t n;
  if (__builtin_add_overflow(offset, length, &n))
    return adr__errorf(error, EOVERFLOW, op, NULL, "offset + length overflows");
  bool view = format->layout == ADR_LAYOUT_BINARY_VIEW;
  if (view ? n_buffers < 3 : n_buffers != format->n_buffers)
    return adr__errorf(error, EINVAL, op, NULL, "%s has %s%d buffers, not %lld",
                       adr_type_name(format->type) ? adr_type_name(format->type) : "?",
                       view ? "at least " : "", format->n_buffers, (long long)n_buffers);
  int64_t bitmap = n / 8 + (n % 8 != 0);
  int64_t ob = format->offset_bytes;
  int st = 0;
  switch (format->layout) {
    case ADR_LAYOUT_NULL:
    case ADR_LAYOUT_RUN_END:
      break;
    case ADR_LAYOUT_FIXED:
      out_sizes[0] = bitmap;
      if (format->bit_width == 1) out_sizes[1] = bitmap;
      else st = mul_size(n, format->bit_width / 8, &out_sizes[1]);
      break;
    case ADR_LAYOUT_VAR_BINARY:
      out_sizes[0] = bitmap;
      st = n == INT64_MAX ? EOVERFLOW : mul_size(n + 1, ob, &out_sizes[1]);
      out_sizes[2] = ADR_BUFFER_SIZE_DATA_DEPENDENT;
      break;
    case ADR_LAYOUT_BINARY_VIEW:
      out_sizes[0] = bitmap;
      st = mul_size(n, 16, &out_sizes[1]);
      for (int64_t i = 2; i < n_buffers - 1; i++) out_sizes[i] = ADR_BUFFER_SIZE_DATA_DEPENDENT;
      out_sizes[n_buffers - 1] = (n_buffers - 3) * 8;
      break;
    case ADR_LAYOUT_LIST:
      out_sizes[0] = bitmap;
      st = n == INT64_MAX ? EOVERFLOW : mul_size(n + 1, ob, &out_sizes[1]);
      break;
    case ADR_LAYOUT_LIST_VIEW:
      out_sizes[0] = bitmap;
      st = mul_size(n, ob, &out_sizes[1]);
      out_sizes[2] = out_sizes[1];
      break;
    case ADR_LAYOUT_FIXED_LIST:
    case ADR_LAYOUT_STRUCT:
      out_sizes[0] = bitmap;
      break;
    case ADR_LAYOUT_SPARSE_UNION:
      out_sizes[0] = n;
      break;
    case ADR_LAYOUT_DENSE_UNION:
      out_sizes[0] = n;
      st = mul_size(n, 4, &out_sizes[1]);
      break;
  }
  if (st != 0) return adr__errorf(error, st, op, NULL, "buffer size overflows int64");
  return 0;
}
