/* SPDX-License-Identifier: Apache-2.0
 *
 * The ADR_ALLOC parser (grammar: docs/environment.md, docs/memory.md):
 *
 *   ADR_ALLOC = handler [ ":" option { "," option } ]
 *   handler   = "pool" | "backend" | "none"          ("none" = "backend")
 *   option    = "max_cached=" size | "release_threshold=" size
 *             | "chunk=" size | "arenas=" count       (pool only)
 *             | "hugepages" | "nohugepages" | "populate"  (pool only, CPU device)
 *             | "limit=" size | "track"
 *   size      = the byte-size grammar of backends/common/bytesize.h, shared
 *               with the backends' size variables (digits [ "." digits ]
 *               [ unit ], exact, at most 2^64 - 1)
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
/* A backends/common source compiled into the core (core/memory/meson.build):
 * the grammar is written once for the core and the backends. */
#include "../../backends/common/bytesize.h"

struct parser {
  const char* variable;
  const char* text;
  size_t pos;
  struct adr_error* error;
};

static int fail(struct parser* p, const char* expected) {
  return adr_syntax_error(p->error, p->variable, p->text, p->pos, expected);
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

/* The size grammar is the one every size variable shares
 * (backends/common/bytesize.h). */
static int parse_size(struct parser* p, uint64_t* out) {
  const char* expected = NULL;
  if (adr_bytesize_scan(p->text, &p->pos, out, &expected) != 0) return fail(p, expected);
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
      "an option (max_cached=, release_threshold=, chunk=, arenas=, hugepages, nohugepages, "
      "populate, limit=, track)";
  int st = parse_word(p, name, sizeof(name), expected);
  if (st) return st;
  if (strcmp(name, "track") == 0) {
    c->track = true;
    return 0;
  }
  if (strcmp(name, "hugepages") == 0 || strcmp(name, "nohugepages") == 0 ||
      strcmp(name, "populate") == 0) {
    if (!c->use_pool) {
      p->pos = start;
      return adr_error_set(p->error, EINVAL,
                           "%s=\"%s\": column %zu: option '%s' applies only to the pool handler",
                           p->variable, p->text, start + 1, name);
    }
    if (name[0] == 'h')
      c->pool.hugepages = ADR__POOL_THP_ALL;
    else if (name[0] == 'n')
      c->pool.hugepages = ADR__POOL_THP_OFF;
    else
      c->pool.populate = true;
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
