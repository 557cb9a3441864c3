/* SPDX-License-Identifier: Apache-2.0
 *
 * Fuzz target: the environment grammars (ADR_DEVICE, ADR_BACKENDS,
 * ADR_ALLOC, ADR_LOG), each checked against a reference parser written
 * here, independently, from the EBNF in docs/environment.md. The first
 * input byte picks the grammar, the rest (up to a NUL) is the value.
 *
 * Differential: the library and the reference must agree on accept or
 * reject, and on accept on the parsed result; a rejection must be EINVAL
 * with a message that names the variable. Any disagreement aborts: the
 * ones the first long runs found (decimal sizes rounded in floating point,
 * UINT64_MAX refused, device id 1000000 accepted, the unwritten limits on
 * name length and option case) were fixed in the library or written into
 * the grammar, and their inputs are seeds below.
 *
 * The ADR_LOG parser is static in core/env.c: the file is compiled into
 * this harness (it parses into a struct and opens nothing); adr__log_configure
 * is replaced by a stub that never opens a file, and the file's other
 * external symbols are renamed so they do not clash with the static core's
 * copy.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define adr__log_configure fuzz_log_configure
#define adr__config fuzz_env_config
#define adr__ensure_init fuzz_env_ensure_init
#define adr_init fuzz_env_init
#define adr_version fuzz_env_version
#include "../../core/env.c"
#undef adr__log_configure

#include "fuzz.h"
#include "memory_internal.h"

void fuzz_log_configure(int level, const char* file_path) {
  (void)level;
  (void)file_path;
}

/* ---- reference: shared pieces ------------------------------------------ */

struct ref {
  const char* s;
  size_t i;
};

static bool is_letter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
static bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
static void ws(struct ref* r) {
  while (r->s[r->i] == ' ' || r->s[r->i] == '\t') r->i++;
}
/* letter { letter | digit | "_" } into out (as written); false if absent. */
static bool name(struct ref* r, char* out, size_t cap) {
  if (!is_letter(r->s[r->i])) return false;
  size_t n = 0;
  while (is_letter(r->s[r->i]) || is_digit(r->s[r->i]) || r->s[r->i] == '_') {
    if (n + 1 < cap) out[n] = r->s[r->i];
    n++;
    r->i++;
  }
  if (n > 63) return false; /* the grammar: at most 63 characters */
  out[n < cap ? n : cap - 1] = '\0';
  return true;
}
static bool ieq(const char* a, const char* b) {
  for (; *a && *b; a++, b++)
    if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return false;
  return *a == *b;
}

/* ---- ADR_DEVICE ---------------------------------------------------------- */

struct ref_device {
  ArrowDeviceType type; /* 0: "*" or uuid_spec */
  int64_t id;           /* -1: "*", a kind or a uuid */
  uint32_t kinds;       /* bits 1 << enum adr_device_kind; 0: any */
  bool has_uuid;
  uint8_t uuid[16];
};

static const struct {
  const char* name;
  ArrowDeviceType type;
} ref_types[] = {
    {"cpu", ARROW_DEVICE_CPU},
    {"cuda", ARROW_DEVICE_CUDA},
    {"cuda_host", ARROW_DEVICE_CUDA_HOST},
    {"cuda_managed", ARROW_DEVICE_CUDA_MANAGED},
    {"hip", ARROW_DEVICE_ROCM},
    {"hip_host", ARROW_DEVICE_ROCM_HOST},
    {"opencl", ARROW_DEVICE_OPENCL},
    {"vulkan", ARROW_DEVICE_VULKAN},
    {"metal", ARROW_DEVICE_METAL},
    {"vpi", ARROW_DEVICE_VPI},
    {"ext_dev", ARROW_DEVICE_EXT_DEV},
    {"oneapi", ARROW_DEVICE_ONEAPI},
    {"webgpu", ARROW_DEVICE_WEBGPU},
    {"hexagon", ARROW_DEVICE_HEXAGON},
    {"rocm", ARROW_DEVICE_ROCM},
    {"rocm_host", ARROW_DEVICE_ROCM_HOST},
};

/* kind = "gpu" | "dgpu" | "igpu" | "cpu" | "accelerator" | "other" */
static const struct {
  const char* name;
  uint32_t kinds;
} ref_kinds[] = {
    {"gpu", (1u << ADR_DEVICE_KIND_GPU) | (1u << ADR_DEVICE_KIND_INTEGRATED_GPU)},
    {"dgpu", 1u << ADR_DEVICE_KIND_GPU},
    {"igpu", 1u << ADR_DEVICE_KIND_INTEGRATED_GPU},
    {"cpu", 1u << ADR_DEVICE_KIND_CPU},
    {"accelerator", 1u << ADR_DEVICE_KIND_ACCELERATOR},
    {"other", 1u << ADR_DEVICE_KIND_OTHER},
};

static int ref_hex(char c) {
  if (is_digit(c)) return c - '0';
  c = (char)tolower((unsigned char)c);
  return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* uuid = hex { [ "-" ] hex }, exactly 32 hex digits. */
static bool ref_uuid(struct ref* r, uint8_t out[16]) {
  memset(out, 0, 16);
  for (int k = 0; k < 32; k++) {
    if (k > 0 && r->s[r->i] == '-') r->i++;
    int v = ref_hex(r->s[r->i]);
    if (v < 0) return false;
    out[k / 2] = (uint8_t)(out[k / 2] * 16 + v);
    r->i++;
  }
  return true;
}

/* After ":": "*" | id (typed entries) | kind | "uuid=" uuid | "GPU-" uuid. */
static bool ref_qualifier(struct ref* r, struct ref_device* d, bool typed) {
  d->id = -1;
  if (r->s[r->i] == '*') {
    r->i++;
    return true;
  }
  if (typed && is_digit(r->s[r->i])) {
    int64_t id = 0;
    while (is_digit(r->s[r->i])) {
      if (id <= 1000000) id = id * 10 + (r->s[r->i] - '0');
      r->i++;
    }
    if (id >= 1000000) return false;
    d->id = id;
    return true;
  }
  char w[256];
  if (!name(r, w, sizeof(w))) return false;
  if ((ieq(w, "gpu") && r->s[r->i] == '-') || (ieq(w, "uuid") && r->s[r->i] == '=')) {
    r->i++;
    d->has_uuid = true;
    return ref_uuid(r, d->uuid);
  }
  for (size_t k = 0; k < sizeof(ref_kinds) / sizeof(ref_kinds[0]); k++)
    if (ieq(w, ref_kinds[k].name)) {
      d->kinds = ref_kinds[k].kinds;
      return true;
    }
  return false;
}

static bool ref_device_spec(struct ref* r, struct ref_device* d) {
  memset(d, 0, sizeof(*d));
  d->id = -1;
  if (r->s[r->i] == '*') {
    r->i++;
    size_t save = r->i;
    ws(r);
    if (r->s[r->i] != ':') {
      r->i = save;
      return true;
    }
    r->i++;
    ws(r);
    return ref_qualifier(r, d, false);
  }
  char n[256];
  if (!name(r, n, sizeof(n))) return false;
  if (ieq(n, "uuid") && r->s[r->i] == '=') {
    r->i++;
    d->has_uuid = true;
    return ref_uuid(r, d->uuid);
  }
  for (size_t k = 0; k < sizeof(ref_types) / sizeof(ref_types[0]); k++)
    if (ieq(n, ref_types[k].name)) d->type = ref_types[k].type;
  if (d->type == 0) return false;
  size_t save = r->i;
  ws(r);
  if (r->s[r->i] != ':') {
    r->i = save;
    d->id = 0;
    return true;
  }
  r->i++;
  ws(r);
  return ref_qualifier(r, d, true);
}

/* Returns the number of specs, -1 when rejected. */
static int ref_device_list(const char* s, struct ref_device* out, int cap) {
  struct ref r = {s, 0};
  int n = 0;
  for (;;) {
    ws(&r);
    struct ref_device d;
    if (!ref_device_spec(&r, &d)) return -1;
    if (n < cap) out[n] = d;
    n++;
    ws(&r);
    if (s[r.i] == ',') {
      r.i++;
      continue;
    }
    return s[r.i] == '\0' ? n : -1;
  }
}

/* ---- ADR_BACKENDS -------------------------------------------------------- */

struct ref_rule {
  char name[256];
  bool negated;
};

static int ref_backend_list(const char* s, struct ref_rule* out, int cap) {
  struct ref r = {s, 0};
  int n = 0;
  for (;;) {
    ws(&r);
    struct ref_rule rule = {"", false};
    if (s[r.i] == '*') {
      r.i++;
      strcpy(rule.name, "*");
    } else {
      if (s[r.i] == '!') {
        rule.negated = true;
        r.i++;
        ws(&r);
      }
      if (!name(&r, rule.name, sizeof(rule.name))) return -1;
    }
    if (n < cap) out[n] = rule;
    n++;
    ws(&r);
    if (s[r.i] == ',') {
      r.i++;
      continue;
    }
    return s[r.i] == '\0' ? n : -1;
  }
}

/* ---- ADR_LOG ------------------------------------------------------------- */

struct ref_log {
  int level;
  const char* file; /* NULL: none */
};

static bool ref_log(const char* s, struct ref_log* out) {
  static const char* const levels[] = {"error", "warn", "info", "debug", "trace"};
  out->level = -1;
  out->file = NULL;
  size_t n = 0;
  for (int k = 0; k < 5; k++) {
    size_t l = strlen(levels[k]);
    if (strncmp(s, levels[k], l) == 0 && (s[l] == '\0' || s[l] == ',')) {
      out->level = k;
      n = l;
    }
  }
  if (out->level < 0) return false;
  if (s[n] == '\0') return true;
  /* "," "file=" path, the path being the rest (at least one character) */
  if (strncmp(s + n, ",file=", 6) != 0 || s[n + 6] == '\0') return false;
  out->file = s + n + 6;
  return true;
}

/* ---- ADR_ALLOC ----------------------------------------------------------- */

/* size = digit { digit } [ "." digit { digit } ] [ unit ], exact:
 * value = digits * scale / 10^fraction_digits, truncated. */
static bool ref_size(struct ref* r, uint64_t* out, bool* out_fraction) {
  if (!is_digit(r->s[r->i])) return false;
  size_t int_start = r->i;
  while (is_digit(r->s[r->i])) r->i++;
  size_t int_end = r->i, frac_start = r->i, frac_end = r->i;
  *out_fraction = false;
  if (r->s[r->i] == '.') {
    r->i++;
    if (!is_digit(r->s[r->i])) return false;
    frac_start = r->i;
    while (is_digit(r->s[r->i])) r->i++;
    frac_end = r->i;
    *out_fraction = true;
  }
  static const struct {
    const char* u;
    uint64_t scale;
  } units[] = {{"B", 1},
               {"K", 1ull << 10},
               {"KiB", 1ull << 10},
               {"KB", 1000ull},
               {"M", 1ull << 20},
               {"MiB", 1ull << 20},
               {"MB", 1000000ull},
               {"G", 1ull << 30},
               {"GiB", 1ull << 30},
               {"GB", 1000000000ull},
               {"T", 1ull << 40},
               {"TiB", 1ull << 40},
               {"TB", 1000000000000ull}};
  uint64_t scale = 1;
  if (is_letter(r->s[r->i])) {
    char u[8];
    size_t n = 0;
    while (is_letter(r->s[r->i])) {
      if (n + 1 >= sizeof(u)) return false;
      u[n++] = r->s[r->i++];
    }
    u[n] = '\0';
    bool found = false;
    for (size_t k = 0; k < sizeof(units) / sizeof(units[0]); k++)
      if (ieq(u, units[k].u)) {
        scale = units[k].scale;
        found = true;
      }
    if (!found) return false;
  }
  const uint64_t max = UINT64_MAX;
  /* exact: integer digits * scale + ceil(0.fraction digits * scale) (a
   * fraction of a byte rounds up). The fraction is folded from its last
   * digit: ceil((d * scale + x) / 10) = ceil((d * scale + ceil(x)) / 10)
   * for an integer d * scale. */
  unsigned __int128 m = 0;
  for (size_t k = int_start; k < int_end; k++) {
    m = m * 10 + (unsigned)(r->s[k] - '0');
    if (m > UINT64_MAX) return false; /* and so is the value */
  }
  unsigned __int128 q = 0;
  for (size_t k = frac_end; k > frac_start; k--)
    q = ((unsigned)(r->s[k - 1] - '0') * scale + q + 9) / 10;
  unsigned __int128 v = m * scale + q;
  if (v > max) return false;
  *out = (uint64_t)v;
  return true;
}

static bool ref_word_is(struct ref* r, const char* w, bool any_case) {
  size_t n = strlen(w);
  for (size_t k = 0; k < n; k++) {
    char c = r->s[r->i + k];
    if (c == '\0') return false;
    if (any_case ? tolower((unsigned char)c) != w[k] : c != w[k]) return false;
  }
  char after = r->s[r->i + n];
  /* the next token after a name is '=', ',', ':' or the end */
  if (is_letter(after) || is_digit(after) || after == '_') return false;
  r->i += n;
  return true;
}

struct ref_alloc {
  bool use_pool;
  struct adr__pool_options pool;
  bool has_limit;
  uint64_t limit;
  bool track;
};

static bool ref_alloc(const char* s, struct ref_alloc* c) {
  memset(c, 0, sizeof(*c));
  c->use_pool = true;
  adr__pool_options_default(&c->pool);
  if (s[0] == '\0') return true; /* empty: as unset */
  struct ref r = {s, 0};
  if (ref_word_is(&r, "pool", true))
    c->use_pool = true;
  else if (ref_word_is(&r, "backend", true) || ref_word_is(&r, "none", true))
    c->use_pool = false;
  else
    return false;
  if (s[r.i] == '\0') return true;
  if (s[r.i] != ':') return false;
  r.i++;
  const bool any_case = true; /* option names are case-insensitive */
  for (;;) {
    uint64_t v;
    bool fr;
    if (ref_word_is(&r, "track", any_case)) {
      c->track = true;
    } else if (ref_word_is(&r, "hugepages", any_case)) {
      if (!c->use_pool) return false;
      c->pool.hugepages = ADR__POOL_THP_ALL;
    } else if (ref_word_is(&r, "nohugepages", any_case)) {
      if (!c->use_pool) return false;
      c->pool.hugepages = ADR__POOL_THP_OFF;
    } else if (ref_word_is(&r, "populate", any_case)) {
      if (!c->use_pool) return false;
      c->pool.populate = true;
    } else if (ref_word_is(&r, "arenas", any_case)) {
      if (!c->use_pool || s[r.i] != '=') return false;
      r.i++;
      if (!is_digit(s[r.i])) return false;
      unsigned long n = 0;
      while (is_digit(s[r.i])) {
        if (n <= 16) n = n * 10 + (unsigned long)(s[r.i] - '0');
        r.i++;
      }
      if (n < 1 || n > 16) return false;
      c->pool.arenas = (unsigned)n;
    } else {
      int which;
      if (ref_word_is(&r, "max_cached", any_case))
        which = 0;
      else if (ref_word_is(&r, "release_threshold", any_case))
        which = 1;
      else if (ref_word_is(&r, "chunk", any_case))
        which = 2;
      else if (ref_word_is(&r, "limit", any_case))
        which = 3;
      else
        return false;
      if (which != 3 && !c->use_pool) return false;
      if (s[r.i] != '=') return false;
      r.i++;
      if (!ref_size(&r, &v, &fr)) return false;
      (void)fr;
      if (which == 0)
        c->pool.max_cached = (size_t)v;
      else if (which == 1)
        c->pool.release_threshold = (size_t)v;
      else if (which == 2) {
        if (v < 4096 || v > (1ull << 40)) return false;
        c->pool.chunk_size = (size_t)v;
      } else {
        c->has_limit = true;
        c->limit = v;
      }
    }
    if (s[r.i] == '\0') return true;
    if (s[r.i] != ',') return false;
    r.i++;
  }
}

/* ---- the differential ----------------------------------------------------- */

static void disagree(const char* var, const char* text, const char* what) {
  fprintf(stderr, "%s=\"%s\": %s\n", var, text, what);
  abort();
}

static void check(const char* var, const char* text, bool (*agrees)(const char*),
                  const char* what) {
  if (!agrees(text)) disagree(var, text, what);
}

static bool rejected_well(int st, const struct adr_error* e, const char* var) {
  return st == EINVAL && strstr(e->message, var) != NULL;
}

static bool device_agrees(const char* text) {
  struct adr__selector* sel = NULL;
  struct adr_error e;
  e.message[0] = '\0';
  int st = adr__parse_device_list("ADR_DEVICE", text, &sel, &e);
  struct ref_device want[64];
  int n = ref_device_list(text, want, 64);
  bool ok;
  if (n < 0) {
    ok = st != 0 && rejected_well(st, &e, "ADR_DEVICE");
  } else {
    ok = st == 0 && sel->count == (size_t)n;
    for (int k = 0; ok && k < n && k < 64; k++)
      ok = sel->u.devices[k].type == want[k].type && sel->u.devices[k].id == want[k].id &&
           sel->u.devices[k].kinds == want[k].kinds &&
           sel->u.devices[k].has_uuid == want[k].has_uuid &&
           memcmp(sel->u.devices[k].uuid, want[k].uuid, 16) == 0;
  }
  if (st != 0 && st != EINVAL && st != ENOMEM) disagree("ADR_DEVICE", text, "bad status");
  adr__selector_free(sel);
  return ok;
}

static bool backends_agree(const char* text) {
  struct adr__selector* sel = NULL;
  struct adr_error e;
  e.message[0] = '\0';
  int st = adr__parse_backend_list("ADR_BACKENDS", text, &sel, &e);
  struct ref_rule* want = malloc(64 * sizeof(*want));
  if (want == NULL) abort();
  int n = ref_backend_list(text, want, 64);
  bool ok;
  if (n < 0) {
    ok = st != 0 && rejected_well(st, &e, "ADR_BACKENDS");
  } else {
    ok = st == 0 && sel->count == (size_t)n;
    /* names compare without case: the library lowers them (the grammar is
     * silent on case for backend names) */
    for (int k = 0; ok && k < n && k < 64; k++)
      ok = sel->u.rules[k].negated == want[k].negated && ieq(sel->u.rules[k].name, want[k].name);
  }
  free(want);
  adr__selector_free(sel);
  return ok;
}

static bool log_agrees(const char* text) {
  if (text[0] == '\0') return true; /* the library treats empty as unset */
  struct log_request got = {-1, NULL, ""};
  parse_log(text, &got);
  struct ref_log want;
  /* Not in the grammar: ADR_LOG never fails; a warning naming ADR_LOG and
   * the default level (unknown level) or stderr (unknown option). */
  if (!ref_log(text, &want))
    return strstr(got.warning, "ADR_LOG=") != NULL && (got.level == -1 || got.file == NULL);
  return got.warning[0] == '\0' && got.level == want.level &&
         (got.file != NULL) == (want.file != NULL) &&
         (want.file == NULL || strcmp(got.file, want.file) == 0);
}

static bool alloc_agrees(const char* text) {
  struct adr__alloc_config got;
  struct adr_error e;
  e.message[0] = '\0';
  int st = adr__alloc_config_parse("ADR_ALLOC", text, &got, &e);
  struct ref_alloc want;
  if (!ref_alloc(text, &want)) return st != 0 && rejected_well(st, &e, "ADR_ALLOC");
  if (st != 0) return false;
  return got.use_pool == want.use_pool && got.pool.max_cached == want.pool.max_cached &&
         got.pool.release_threshold == want.pool.release_threshold &&
         got.pool.chunk_size == want.pool.chunk_size && got.pool.arenas == want.pool.arenas &&
         got.pool.hugepages == want.pool.hugepages && got.pool.populate == want.pool.populate &&
         got.has_limit == want.has_limit && got.limit == want.limit && got.track == want.track;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 300) return 0;
  char text[300];
  memcpy(text, data + 1, size - 1);
  text[size - 1] = '\0'; /* the value ends at the first NUL, as in environ */
  switch (data[0] % 4) {
    case 0:
      check("ADR_DEVICE", text, device_agrees, "library and reference disagree");
      break;
    case 1:
      check("ADR_BACKENDS", text, backends_agree, "library and reference disagree");
      break;
    case 2:
      check("ADR_ALLOC", text, alloc_agrees, "library and reference disagree");
      break;
    default:
      check("ADR_LOG", text, log_agrees, "library and reference disagree");
      break;
  }
  return 0;
}

const char* const fuzz_seeds[] = {
    "0cuda:1,hip:0,cpu",
    "0 opencl : * , vulkan",
    "0*",
    "0CUDA_Host:12",
    "0rocm_host:999999",
    "0cuda:x",
    "0metal:1000000",
    "0opencl:gpu,vulkan : CPU,*:accelerator,*:igpu,hip:dgpu,*:other,* : *",
    "0cuda:GPU-01234567-89ab-cdef-FEDC-BA9876543210",
    "0uuid=0123456789abcdeffedcba9876543210,*:uuid=0-1-2-3-4-5-6-7-8-9-a-b-c-d-e-f-0-1-2-3-4-5-6-7-"
    "8-9-a-b-c-d-e-f",
    "0*:0",
    "0cuda:gpux",
    "0uuid=0123456789abcdef0123456789abcdef0",
    "0uuid = 0123456789abcdef0123456789abcdef",
    "0cpu:GPU-12--34",
    "0*:gpu-0123456789abcdef0123456789abcde-f",
    "1cpu,opencl",
    "1!vulkan",
    "1 ! cuda , * ",
    "1cuda,!cuda",
    "1!*",
    "2pool",
    "2none",
    "2pool:max_cached=2GiB,release_threshold=8GiB",
    "2backend:limit=512MiB,track",
    "2pool:max_cached=2XB",
    "2none:max_cached=1G",
    "2backend:limit=0.72KB",
    "2pool:chunk=4K,arenas=16",
    "2pool:limit=18446744073709551615",
    "2POOL:TRACK",
    "2pool:limit=1.5",
    "3error",
    "3trace,file=/tmp/x,y",
    "3warn,",
    "3loud",
    "3debug,file=",
    NULL,
};
