/* SPDX-License-Identifier: Apache-2.0
 *
 * The ADR_DEVICE and ADR_BACKENDS parsers (grammar: docs/environment.md).
 * A small recursive-descent parser over one string; every error names the
 * variable, the 1-based column and the token it expected.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const struct {
  const char* name;
  ArrowDeviceType type;
} device_names[] = {
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
    /* aliases: Arrow's own spelling */
    {"rocm", ARROW_DEVICE_ROCM},
    {"rocm_host", ARROW_DEVICE_ROCM_HOST},
};
#define N_DEVICE_NAMES (sizeof(device_names) / sizeof(device_names[0]))
#define N_PRIMARY_NAMES 14 /* the entries before the aliases */

ArrowDeviceType adr__device_type_from_name(const char* name, size_t len) {
  for (size_t i = 0; i < N_DEVICE_NAMES; i++) {
    if (strlen(device_names[i].name) == len && memcmp(device_names[i].name, name, len) == 0)
      return device_names[i].type;
  }
  return 0;
}

const char* adr_device_type_name(ArrowDeviceType type) {
  for (size_t i = 0; i < N_PRIMARY_NAMES; i++)
    if (device_names[i].type == type) return device_names[i].name;
  return NULL;
}

struct parser {
  const char* variable;
  const char* text;
  size_t pos;
  struct adr_error* error;
};

static void skip_ws(struct parser* p) {
  while (p->text[p->pos] == ' ' || p->text[p->pos] == '\t') p->pos++;
}

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

static bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
static bool is_name_char(char c) {
  return is_name_start(c) || (c >= '0' && c <= '9') || c == '_';
}

/* name = letter { letter | digit | "_" }, lowered into out. */
static int parse_name(struct parser* p, char* out, size_t cap, const char* expected) {
  if (!is_name_start(p->text[p->pos])) return fail(p, expected);
  size_t start = p->pos, n = 0;
  while (is_name_char(p->text[p->pos])) {
    if (n + 1 >= cap) {
      p->pos = start;
      return fail(p, "a name of at most 63 characters");
    }
    out[n++] = (char)tolower((unsigned char)p->text[p->pos++]);
  }
  out[n] = '\0';
  return 0;
}

/* The kinds a selector may name after ':' (docs/environment.md). "gpu"
 * is every GPU; "dgpu" and "igpu" split it. */
#define KIND_BIT(k) (1u << (k))
static const struct {
  const char* name;
  uint32_t kinds;
} kind_names[] = {
    {"gpu", KIND_BIT(ADR_DEVICE_KIND_GPU) | KIND_BIT(ADR_DEVICE_KIND_INTEGRATED_GPU)},
    {"dgpu", KIND_BIT(ADR_DEVICE_KIND_GPU)},
    {"igpu", KIND_BIT(ADR_DEVICE_KIND_INTEGRATED_GPU)},
    {"cpu", KIND_BIT(ADR_DEVICE_KIND_CPU)},
    {"accelerator", KIND_BIT(ADR_DEVICE_KIND_ACCELERATOR)},
    {"other", KIND_BIT(ADR_DEVICE_KIND_OTHER)},
};
#define KIND_LIST "gpu, dgpu, igpu, cpu, accelerator, other"

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* uuid = 32 hex digits, a "-" allowed between two of them (so both
 * "GPU-8-4-4-4-12" spellings and the bare hex of nvidia-smi -q work). */
static int parse_uuid(struct parser* p, uint8_t out[16]) {
  int digits = 0;
  memset(out, 0, 16);
  for (;;) {
    int v = hex_value(p->text[p->pos]);
    if (v < 0)
      return fail(p, digits ? "a hex digit of the UUID (32 in all)" : "a UUID (32 hex digits)");
    out[digits / 2] = (uint8_t)(out[digits / 2] | (digits % 2 ? v : v << 4));
    p->pos++;
    if (++digits == 32) return 0;
    if (p->text[p->pos] == '-' && hex_value(p->text[p->pos + 1]) >= 0) p->pos++;
  }
}

/* After "name:" or "*:": "*", an id (only after a name), a kind, "GPU-"
 * uuid or "uuid=" uuid. */
static int parse_qualifier(struct parser* p, struct adr__device_spec* spec, bool allow_id) {
  char c = p->text[p->pos];
  if (c == '*') {
    p->pos++;
    spec->id = -1;
    return 0;
  }
  if (allow_id && isdigit((unsigned char)c)) {
    int64_t id = 0;
    size_t id_pos = p->pos;
    while (isdigit((unsigned char)p->text[p->pos])) {
      id = id * 10 + (p->text[p->pos++] - '0');
      if (id >= 1000000) {
        p->pos = id_pos;
        return fail(p, "a device id below 1000000");
      }
    }
    spec->id = id;
    return 0;
  }
  if (!is_name_start(c))
    return fail(p, allow_id ? "a device id (digits), '*', a device kind or a uuid after ':'"
                            : "'*', a device kind or a uuid after ':'");
  size_t word_pos = p->pos;
  char word[64];
  int st = parse_name(p, word, sizeof(word), "a device kind");
  if (st) return st;
  spec->id = -1;
  if ((strcmp(word, "gpu") == 0 && p->text[p->pos] == '-') ||
      (strcmp(word, "uuid") == 0 && p->text[p->pos] == '=')) {
    p->pos++;
    spec->has_uuid = true;
    return parse_uuid(p, spec->uuid);
  }
  for (size_t i = 0; i < sizeof(kind_names) / sizeof(kind_names[0]); i++) {
    if (strcmp(word, kind_names[i].name) == 0) {
      spec->kinds = kind_names[i].kinds;
      return 0;
    }
  }
  p->pos = word_pos;
  return adr_error_set(p->error, EINVAL,
                       "%s=\"%s\": column %zu: unknown device kind '%s' (expected %s%s, "
                       "GPU-<uuid> or uuid=<uuid>)",
                       p->variable, p->text, word_pos + 1, word,
                       allow_id ? "a device id, '*', " : "'*', ", KIND_LIST);
}

static int parse_device_spec(struct parser* p, struct adr__device_spec* spec) {
  memset(spec, 0, sizeof(*spec));
  spec->id = -1;
  size_t start = p->pos;
  int st = 0;
  if (p->text[p->pos] == '*') {
    p->pos++;
    strcpy(spec->name, "*");
    size_t after = p->pos;
    skip_ws(p);
    if (p->text[p->pos] == ':') {
      p->pos++;
      skip_ws(p);
      st = parse_qualifier(p, spec, false);
    } else {
      p->pos = after;
    }
  } else {
    size_t name_pos = p->pos;
    st = parse_name(p, spec->name, sizeof(spec->name),
                    "a device name (cpu, cuda, opencl ...) or '*'");
    if (st) return st;
    if (strcmp(spec->name, "uuid") == 0 && p->text[p->pos] == '=') {
      /* "uuid=...": any device type */
      p->pos++;
      spec->has_uuid = true;
      strcpy(spec->name, "*");
      st = parse_uuid(p, spec->uuid);
    } else {
      spec->type = adr__device_type_from_name(spec->name, strlen(spec->name));
      if (spec->type == 0) {
        p->pos = name_pos;
        return adr_error_set(
            p->error, EINVAL,
            "%s=\"%s\": column %zu: unknown device type '%s' (expected one of: cpu cuda cuda_host "
            "cuda_managed hip hip_host opencl vulkan metal vpi ext_dev oneapi webgpu hexagon, "
            "'*' or uuid=)",
            p->variable, p->text, name_pos + 1, spec->name);
      }
      size_t after = p->pos;
      skip_ws(p);
      if (p->text[p->pos] != ':') {
        p->pos = after;
        spec->id = 0; /* "vulkan" means vulkan:0 */
      } else {
        p->pos++;
        skip_ws(p);
        st = parse_qualifier(p, spec, true);
      }
    }
  }
  if (st) return st;
  size_t n = p->pos - start;
  if (n >= sizeof(spec->text))
    snprintf(spec->text, sizeof(spec->text), "%.*s...", (int)sizeof(spec->text) - 4,
             p->text + start);
  else
    snprintf(spec->text, sizeof(spec->text), "%.*s", (int)n, p->text + start);
  return 0;
}

static int parse_backend_rule(struct parser* p, void* item) {
  struct adr__backend_rule* r = item;
  if (p->text[p->pos] == '!') {
    r->negated = true;
    p->pos++;
    skip_ws(p);
  }
  if (p->text[p->pos] == '*' && !r->negated) {
    p->pos++;
    strcpy(r->name, "*");
    return 0;
  }
  return parse_name(p, r->name, sizeof(r->name),
                    r->negated ? "a backend name after '!'"
                               : "a backend name (cpu, cuda, hip, opencl, vulkan ...), '!name' "
                                 "or '*'");
}

static int parse_device_item(struct parser* p, void* item) {
  return parse_device_spec(p, item);
}

/* list = ws item ws { "," ws item ws }: the shape both variables share.
 * Items are `elem` bytes each, zeroed before parse_item fills them. */
static int parse_list(const char* variable, const char* text, size_t elem,
                      int (*parse_item)(struct parser*, void*), struct adr__selector** out,
                      struct adr_error* error) {
  struct parser p = {variable, text, 0, error};
  char* items = NULL;
  size_t count = 0, cap = 0;
  int st = 0;
  for (;;) {
    skip_ws(&p);
    if (count == cap) {
      size_t ncap = cap ? cap * 2 : 4;
      char* grown = realloc(items, ncap * elem);
      if (grown == NULL) {
        st = adr_error_set(error, ENOMEM, "%s: out of memory", variable);
        break;
      }
      items = grown;
      cap = ncap;
    }
    memset(items + count * elem, 0, elem);
    if ((st = parse_item(&p, items + count * elem)) != 0) break;
    count++;
    skip_ws(&p);
    if (p.text[p.pos] == ',') {
      p.pos++;
      continue;
    }
    if (p.text[p.pos] != '\0') st = fail(&p, "',' or end of text");
    break;
  }
  struct adr__selector* sel = st ? NULL : calloc(1, sizeof(*sel));
  if (st == 0 && sel == NULL) st = adr_error_set(error, ENOMEM, "%s: out of memory", variable);
  if (st) {
    free(items);
    return st;
  }
  sel->count = count;
  sel->u.devices = (struct adr__device_spec*)(void*)items; /* same pointer for either member */
  *out = sel;
  return 0;
}

int adr__parse_device_list(const char* variable, const char* text, struct adr__selector** out,
                           struct adr_error* error) {
  return parse_list(variable, text, sizeof(struct adr__device_spec), parse_device_item, out, error);
}

int adr__parse_backend_list(const char* variable, const char* text, struct adr__selector** out,
                            struct adr_error* error) {
  return parse_list(variable, text, sizeof(struct adr__backend_rule), parse_backend_rule, out,
                    error);
}

void adr__selector_free(struct adr__selector* sel) {
  if (sel == NULL) return;
  free(sel->u.devices); /* either member: same pointer */
  free(sel);
}

bool adr__backend_allowed(const struct adr__selector* rules, const char* name) {
  if (rules == NULL) return true;
  bool any_positive = false, positive_match = false;
  for (size_t i = 0; i < rules->count; i++) {
    const struct adr__backend_rule* r = &rules->u.rules[i];
    bool match = strcmp(r->name, "*") == 0 || strcmp(r->name, name) == 0;
    if (r->negated) {
      if (match) return false; /* a negation always wins */
    } else {
      any_positive = true;
      positive_match |= match;
    }
  }
  return any_positive ? positive_match : true;
}
