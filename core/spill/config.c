/* SPDX-License-Identifier: Apache-2.0
 *
 * The spill variables (docs/environment.md, docs/spill.md):
 *
 *   ADR_SPILL              = "on" | "off"                 (default off)
 *   ADR_SPILL_ON_DEMAND    = "on" | "off"                 (default on)
 *   ADR_SPILL_DEVICE_LIMIT = size | percent               (default none)
 *       size    = the byte-size grammar of backends/common/bytesize.h
 *       percent = digit { digit } "%"                     (1 to 100)
 *   ADR_SPILL_STATS        = "0" | "1" | "2"              (default 0)
 *
 * Words are case-insensitive. Errors are adr_syntax_error's, like
 * ADR_ALLOC's: the variable, the 1-based column, what was expected there
 * and what was found. Read once, at the first adr_spill_manager_global.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../../backends/common/bytesize.h"
#include "spill_internal.h"

static int parse_switch(const char* variable, const char* text, bool* out,
                        struct adr_error* error) {
  if (text == NULL || text[0] == '\0') return 0;
  if (strcasecmp(text, "on") == 0) {
    *out = true;
    return 0;
  }
  if (strcasecmp(text, "off") == 0) {
    *out = false;
    return 0;
  }
  /* The column of the first character that no longer spells on/off. */
  size_t pos = 0;
  const char* words[] = {"on", "off"};
  for (size_t w = 0; w < 2; w++) {
    size_t i = 0;
    while (text[i] != '\0' && words[w][i] != '\0' && tolower((unsigned char)text[i]) == words[w][i])
      i++;
    if (words[w][i] == '\0' && text[i] != '\0') {
      /* "onx": the word is complete, something follows. */
      return adr_syntax_error(error, variable, text, i, "the end (after 'on' or 'off')");
    }
    if (i > pos) pos = i;
  }
  return adr_syntax_error(error, variable, text, pos, "'on' or 'off'");
}

static int parse_limit(const char* text, uint64_t* out_bytes, uint32_t* out_percent,
                       struct adr_error* error) {
  static const char* variable = "ADR_SPILL_DEVICE_LIMIT";
  if (text == NULL || text[0] == '\0') return 0;
  size_t i = 0;
  while (isdigit((unsigned char)text[i])) i++;
  if (i > 0 && text[i] == '%') {
    uint64_t v = 0;
    for (size_t k = 0; k < i; k++) {
      v = v * 10 + (uint64_t)(text[k] - '0');
      if (v > 100) break;
    }
    if (v == 0 || v > 100)
      return adr_syntax_error(error, variable, text, 0, "a percentage from 1% to 100%");
    if (text[i + 1] != '\0') return adr_syntax_error(error, variable, text, i + 1, "the end");
    *out_percent = (uint32_t)v;
    *out_bytes = 0;
    return 0;
  }
  size_t pos = 0;
  uint64_t v = 0;
  const char* expected = NULL;
  if (adr_bytesize_scan(text, &pos, &v, &expected) != 0)
    return adr_syntax_error(error, variable, text, pos,
                            isdigit((unsigned char)text[0])
                                ? expected
                                : "a size (digits, then a unit) or a percentage (N%)");
  if (text[pos] != '\0')
    return adr_syntax_error(error, variable, text, pos,
                            "a unit (" ADR_BYTESIZE_UNITS "), '%' or the end");
  if (v == 0)
    return adr_syntax_error(error, variable, text, 0, "a size above 0 (unset it for no limit)");
  *out_bytes = v;
  *out_percent = 0;
  return 0;
}

static int parse_level(const char* text, uint32_t* out, struct adr_error* error) {
  if (text == NULL || text[0] == '\0') return 0;
  if (text[0] < '0' || text[0] > '2')
    return adr_syntax_error(error, "ADR_SPILL_STATS", text, 0, "a level: 0, 1 or 2");
  if (text[1] != '\0')
    return adr_syntax_error(error, "ADR_SPILL_STATS", text, 1,
                            "the end (a level is one digit: 0, 1 or 2)");
  *out = (uint32_t)(text[0] - '0');
  return 0;
}

int adr__spill_config_parse(const char* spill, const char* on_demand, const char* limit,
                            const char* stats, struct adr__spill_config* out,
                            struct adr_error* error) {
  struct adr__spill_config c;
  memset(&c, 0, sizeof(c));
  c.on_demand = true;
  int st;
  if ((st = parse_switch("ADR_SPILL", spill, &c.enabled, error)) != 0 ||
      (st = parse_switch("ADR_SPILL_ON_DEMAND", on_demand, &c.on_demand, error)) != 0 ||
      (st = parse_limit(limit, &c.limit, &c.limit_percent, error)) != 0 ||
      (st = parse_level(stats, &c.stats_level, error)) != 0)
    return st;
  *out = c;
  return 0;
}

static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static struct adr__spill_config config;

static void read_config(void) {
  struct adr_error e;
  e.message[0] = '\0';
  int st = adr__spill_config_parse(getenv("ADR_SPILL"), getenv("ADR_SPILL_ON_DEMAND"),
                                   getenv("ADR_SPILL_DEVICE_LIMIT"), getenv("ADR_SPILL_STATS"),
                                   &config, &e);
  if (st != 0) {
    memset(&config, 0, sizeof(config));
    config.status = st;
    config.error = e;
  }
}

const struct adr__spill_config* adr__spill_config(void) {
  pthread_once(&config_once, read_config);
  return &config;
}
