/* SPDX-License-Identifier: Apache-2.0
 *
 * The ADR_ALLOC parser (grammar: docs/environment.md, docs/memory.md):
 *
 *   ADR_ALLOC = handler [ ":" option { "," option } ]
 *   handler   = "pool" | "backend" | "none"          ("none" = "backend")
 *   option    = "max_cached=" size | "release_threshold=" size
 *             | "chunk=" size | "arenas=" count       (pool only)
 *             | "limit=" size | "track"
 *   size      = digits [ "." digits ] [ unit ]        unit: B K KiB KB M MiB MB G GiB GB T TiB TB
 *               (exact, fractions of a byte round up, at most 2^64 - 1)
 *
 * Like the selector's, every error names the variable, the 1-based column
 * and what was expected there. The variable is read once, at the first
 * device's creation; a malformed value fails every allocation with EINVAL.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "memory_internal.h"

struct parser {
  const char* variable;
  const char* text;
  size_t pos;
  struct adr_error* error;
};

static int fail(struct parser* p, const char* expected) {
  char found[32];
  char c = p->text[p->pos];
  if (c == '\0')
    snprintf(found, sizeof(found), "end of text");
  else if (isprint((unsigned char)c))
    snprintf(found, sizeof(found), "'%c'", c);
  else
    snprintf(found, sizeof(found), "byte 0x%02x", (unsigned char)c);
  return adr_error_set(p->error, EINVAL, "%s=\"%s\": column %zu: expected %s, found %s",
                       p->variable, p->text, p->pos + 1, expected, found);
}

/* word = letter { letter | digit | "_" }; lowered into out. */
static int parse_word(struct parser* p, char* out, size_t cap, const char* expected) {
  if (!isalpha((unsigned char)p->text[p->pos])) return fail(p, expected);
  size_t n = 0;
  while (isalnum((unsigned char)p->text[p->pos]) || p->text[p->pos] == '_') {
    if (n + 1 >= cap) return fail(p, expected);
    out[n++] = (char)tolower((unsigned char)p->text[p->pos++]);
  }
  out[n] = '\0';
  return 0;
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

#define UNIT_LIST "a unit (B, K, KiB, KB, M, MiB, MB, G, GiB, GB, T, TiB, TB)"

#define SIZE_MAX_TEXT "a size of at most 18446744073709551615 bytes (16 EiB - 1)"

/* Exact: integer arithmetic only, so "0.72KB" is 720 bytes, not 719. A
 * fraction of a byte rounds up ("0.5B" is 1 byte, "1.0001KiB" 1025): a
 * size is never smaller than written. Anything up to 2^64 - 1 bytes is
 * accepted; larger is an error naming that maximum. */
static int parse_size(struct parser* p, uint64_t* out) {
  size_t start = p->pos;
  if (!isdigit((unsigned char)p->text[p->pos])) return fail(p, "a size (digits, then a unit)");
  uint64_t whole = 0;
  bool overflow = false;
  while (isdigit((unsigned char)p->text[p->pos])) {
    unsigned d = (unsigned)(p->text[p->pos++] - '0');
    overflow |= __builtin_mul_overflow(whole, 10, &whole);
    overflow |= __builtin_add_overflow(whole, d, &whole);
  }
  size_t frac = 0, frac_len = 0;
  if (p->text[p->pos] == '.') {
    p->pos++;
    if (!isdigit((unsigned char)p->text[p->pos])) return fail(p, "digits after '.'");
    frac = p->pos;
    while (isdigit((unsigned char)p->text[p->pos])) p->pos++;
    frac_len = p->pos - frac;
  }
  uint64_t scale = 1;
  if (isalpha((unsigned char)p->text[p->pos])) {
    size_t ustart = p->pos;
    char u[8];
    size_t n = 0;
    while (isalpha((unsigned char)p->text[p->pos])) {
      if (n + 1 >= sizeof(u)) {
        p->pos = ustart;
        return fail(p, UNIT_LIST);
      }
      u[n++] = (char)tolower((unsigned char)p->text[p->pos++]);
    }
    u[n] = '\0';
    bool found = false;
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
      if (strcmp(units[i].name, u) == 0) {
        scale = units[i].scale;
        found = true;
      }
    if (!found) {
      p->pos = ustart;
      return fail(p, UNIT_LIST);
    }
  }
  /* scale * 0.d1d2...dk, from the last digit: c = floor((d * scale + c) /
   * 10) at each step gives the floor exactly (c never exceeds scale), and
   * a non-zero remainder anywhere means the value is not whole. */
  uint64_t carry = 0;
  bool inexact = false;
  for (size_t i = frac_len; i-- > 0;) {
    uint64_t t = (uint64_t)(p->text[frac + i] - '0') * scale + carry;
    inexact |= t % 10 != 0;
    carry = t / 10;
  }
  uint64_t value;
  overflow |= __builtin_mul_overflow(whole, scale, &value);
  overflow |= __builtin_add_overflow(value, carry + (inexact ? 1 : 0), &value);
  if (overflow) {
    p->pos = start;
    return fail(p, SIZE_MAX_TEXT);
  }
  *out = value;
  return 0;
}

static int parse_count(struct parser* p, unsigned max, unsigned* out) {
  size_t start = p->pos;
  if (!isdigit((unsigned char)p->text[p->pos])) return fail(p, "a count (digits)");
  unsigned long v = 0;
  while (isdigit((unsigned char)p->text[p->pos])) {
    v = v * 10 + (unsigned long)(p->text[p->pos++] - '0');
    if (v > max) {
      p->pos = start;
      char what[64];
      snprintf(what, sizeof(what), "a count from 1 to %u", max);
      return fail(p, what);
    }
  }
  if (v == 0) {
    p->pos = start;
    char what[64];
    snprintf(what, sizeof(what), "a count from 1 to %u", max);
    return fail(p, what);
  }
  *out = (unsigned)v;
  return 0;
}

static int parse_option(struct parser* p, struct adr__alloc_config* c) {
  size_t start = p->pos;
  char name[32];
  const char* expected =
      "an option (max_cached=, release_threshold=, chunk=, arenas=, limit=, track)";
  int st = parse_word(p, name, sizeof(name), expected);
  if (st) return st;
  if (strcmp(name, "track") == 0) {
    c->track = true;
    return 0;
  }
  bool pool_only = strcmp(name, "max_cached") == 0 || strcmp(name, "release_threshold") == 0 ||
                   strcmp(name, "chunk") == 0 || strcmp(name, "arenas") == 0;
  if (!pool_only && strcmp(name, "limit") != 0) {
    p->pos = start;
    return fail(p, expected);
  }
  if (pool_only && !c->use_pool) {
    p->pos = start;
    return adr_error_set(p->error, EINVAL,
                         "%s=\"%s\": column %zu: option '%s' applies only to the pool handler",
                         p->variable, p->text, start + 1, name);
  }
  if (p->text[p->pos] != '=') return fail(p, "'=' and a value");
  p->pos++;
  uint64_t v = 0;
  if (strcmp(name, "arenas") == 0) {
    unsigned n;
    st = parse_count(p, 16, &n);
    if (st) return st;
    c->pool.arenas = n;
    return 0;
  }
  st = parse_size(p, &v);
  if (st) return st;
  if (v > SIZE_MAX) v = SIZE_MAX; /* the cap and threshold: nothing is larger */
  if (strcmp(name, "max_cached") == 0) {
    c->pool.max_cached = (size_t)v;
  } else if (strcmp(name, "release_threshold") == 0) {
    c->pool.release_threshold = (size_t)v;
  } else if (strcmp(name, "chunk") == 0) {
    if (v < 4096 || v > (UINT64_C(1) << 40)) {
      p->pos = start + strlen(name) + 1;
      return fail(p, "a chunk size from 4 KiB to 1 TiB");
    }
    c->pool.chunk_size = (size_t)v;
  } else {
    c->has_limit = true;
    c->limit = v;
  }
  return 0;
}

int adr__alloc_config_parse(const char* variable, const char* text, struct adr__alloc_config* out,
                            struct adr_error* error) {
  memset(out, 0, sizeof(*out));
  out->use_pool = true;
  adr__pool_options_default(&out->pool);
  if (text == NULL || text[0] == '\0') return 0;
  struct adr__alloc_config c = *out;
  struct parser p = {variable, text, 0, error};
  char name[32];
  int st = parse_word(&p, name, sizeof(name), "a handler (pool, backend, none)");
  if (st) return st;
  if (strcmp(name, "pool") == 0) {
    c.use_pool = true;
  } else if (strcmp(name, "backend") == 0 || strcmp(name, "none") == 0) {
    c.use_pool = false;
  } else {
    p.pos = 0;
    return fail(&p, "a handler (pool, backend, none)");
  }
  if (text[p.pos] == ':') {
    p.pos++;
    for (;;) {
      st = parse_option(&p, &c);
      if (st) return st;
      if (text[p.pos] != ',') break;
      p.pos++;
    }
  }
  if (text[p.pos] != '\0')
    return fail(&p, c.use_pool && p.pos == strlen(name) ? "':' and options, or the end"
                                                        : "',' and an option, or the end");
  *out = c;
  return 0;
}

static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static struct adr__alloc_config config;

static void read_config(void) {
  config.status = adr__alloc_config_parse("ADR_ALLOC", getenv("ADR_ALLOC"), &config, &config.error);
  if (config.status != 0) {
    /* Keep the message, drop whatever was half parsed. */
    struct adr_error e = config.error;
    adr__alloc_config_parse("ADR_ALLOC", NULL, &config, NULL);
    config.status = EINVAL;
    config.error = e;
  }
}

const struct adr__alloc_config* adr__alloc_config(void) {
  pthread_once(&config_once, read_config);
  return &config;
}
