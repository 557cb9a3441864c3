/* SPDX-License-Identifier: Apache-2.0
 *
 * The byte-size grammar (bytesize.h). Kept free of locale: only ASCII
 * digits and letters are read.
 */
#include "bytesize.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

static bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static char to_lower(char c) {
  return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

static const struct {
  const char* name;
  uint64_t scale;
} units[] = {
    {"b", 1},
    {"k", UINT64_C(1) << 10},
    {"kib", UINT64_C(1) << 10},
    {"kb", UINT64_C(1000)},
    {"m", UINT64_C(1) << 20},
    {"mib", UINT64_C(1) << 20},
    {"mb", UINT64_C(1000000)},
    {"g", UINT64_C(1) << 30},
    {"gib", UINT64_C(1) << 30},
    {"gb", UINT64_C(1000000000)},
    {"t", UINT64_C(1) << 40},
    {"tib", UINT64_C(1) << 40},
    {"tb", UINT64_C(1000000000000)},
};

static int fail(size_t* pos, size_t at, const char** expected, const char* what) {
  *pos = at;
  if (expected != NULL) *expected = what;
  return EINVAL;
}

/* Exact: integer arithmetic only, so "0.72KB" is 720 bytes, not 719. */
int adr_bytesize_scan(const char* text, size_t* pos, uint64_t* out, const char** expected) {
  size_t p = *pos;
  size_t start = p;
  if (!is_digit(text[p])) return fail(pos, p, expected, "a size (digits, then a unit)");
  uint64_t whole = 0;
  bool overflow = false;
  while (is_digit(text[p])) {
    unsigned d = (unsigned)(text[p++] - '0');
    overflow |= __builtin_mul_overflow(whole, 10, &whole);
    overflow |= __builtin_add_overflow(whole, d, &whole);
  }
  size_t frac = 0, frac_len = 0;
  if (text[p] == '.') {
    p++;
    if (!is_digit(text[p])) return fail(pos, p, expected, "digits after '.'");
    frac = p;
    while (is_digit(text[p])) p++;
    frac_len = p - frac;
  }
  uint64_t scale = 1;
  if (is_alpha(text[p])) {
    size_t ustart = p;
    char u[4];
    size_t n = 0;
    bool found = false;
    while (is_alpha(text[p]) && n < sizeof(u)) u[n++] = to_lower(text[p++]);
    if (n < sizeof(u) && !is_alpha(text[p])) {
      for (size_t i = 0; i < sizeof(units) / sizeof(units[0]) && !found; i++)
        if (strlen(units[i].name) == n && memcmp(units[i].name, u, n) == 0) {
          scale = units[i].scale;
          found = true;
        }
    }
    if (!found) return fail(pos, ustart, expected, "a unit (" ADR_BYTESIZE_UNITS ")");
  }
  /* scale * 0.d1d2...dk, from the last digit: c = floor((d * scale + c) /
   * 10) at each step gives the floor exactly (c never exceeds scale), and
   * a non-zero remainder anywhere means the value is not whole: a fraction
   * of a byte rounds up, so a size is never smaller than written. */
  uint64_t carry = 0;
  bool inexact = false;
  for (size_t i = frac_len; i-- > 0;) {
    uint64_t t = (uint64_t)(text[frac + i] - '0') * scale + carry;
    inexact |= t % 10 != 0;
    carry = t / 10;
  }
  uint64_t value;
  overflow |= __builtin_mul_overflow(whole, scale, &value);
  overflow |= __builtin_add_overflow(value, carry + (inexact ? 1 : 0), &value);
  if (overflow)
    return fail(pos, start, expected, "a size of at most 18446744073709551615 bytes (16 EiB - 1)");
  *out = value;
  *pos = p;
  return 0;
}

int adr_syntax_error(struct adr_error* error, const char* variable, const char* text, size_t pos,
                     const char* expected) {
  if (error == NULL) return EINVAL;
  char found[32];
  char c = text[pos];
  if (c == '\0')
    snprintf(found, sizeof(found), "end of text");
  else if (c >= 0x20 && c < 0x7f)
    snprintf(found, sizeof(found), "'%c'", c);
  else
    snprintf(found, sizeof(found), "byte 0x%02x", (unsigned char)c);
  snprintf(error->message, sizeof(error->message), "%s=\"%s\": column %zu: expected %s, found %s",
           variable, text, pos + 1, expected, found);
  return EINVAL;
}

int adr_bytesize_parse(const char* variable, const char* text, uint64_t* out,
                       struct adr_error* error) {
  size_t pos = 0;
  const char* expected = NULL;
  uint64_t v = 0;
  if (adr_bytesize_scan(text, &pos, &v, &expected) != 0)
    return adr_syntax_error(error, variable, text, pos, expected);
  if (text[pos] != '\0') return adr_syntax_error(error, variable, text, pos, "a unit or the end");
  *out = v;
  return 0;
}
