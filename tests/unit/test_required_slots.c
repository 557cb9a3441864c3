/* SPDX-License-Identifier: Apache-2.0
 *
 * The required slots of the plugin ABI are listed once
 * (ADR_BACKEND_REQUIRED_SLOTS in adr/backend.h). This test checks that the
 * loader refuses a table missing any one of them and accepts one missing
 * every other slot, and that docs/backend-abi.md's table (path in argv[1])
 * marks exactly those slots as required.
 */
/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const char* doc_path;

#define NAME(slot) #slot,
static const char* const required[] = {ADR_BACKEND_REQUIRED_SLOTS(NAME)};
#undef NAME
#define N_REQUIRED (sizeof(required) / sizeof(required[0]))

static void dummy(void) {}

static const ArrowDeviceType types[] = {ARROW_DEVICE_EXT_DEV};

/* A table with every required slot set (to a function never called). */
static struct adr_backend full_table(void) {
  struct adr_backend vt;
  memset(&vt, 0, sizeof(vt));
  vt.abi_major = ADR_BACKEND_ABI_MAJOR;
  vt.abi_minor = ADR_BACKEND_ABI_MINOR;
  vt.struct_size = sizeof(vt);
  vt.name = "t_slots";
  vt.version = "0";
  vt.device_types = types;
  vt.device_type_count = 1;
  void (*fn)(void) = dummy;
#define FILL(slot) memcpy(&vt.slot, &fn, sizeof(vt.slot));
  ADR_BACKEND_REQUIRED_SLOTS(FILL)
#undef FILL
  return vt;
}

static void test_loader_uses_the_list(void** state) {
  (void)state;
  struct adr__backend b;
  memset(&b, 0, sizeof(b));
  snprintf(b.name, sizeof(b.name), "t_slots");
  struct adr_backend vt = full_table();
  assert_true(adr__loader_check_table(&b, &vt));
  size_t checked = 0;
#define DROP(slot)                                                                             \
  do {                                                                                         \
    struct adr_backend t = full_table();                                                       \
    memset(&b, 0, sizeof(b));                                                                  \
    t.slot = NULL;                                                                             \
    if (adr__loader_check_table(&b, &t)) fail_msg("a table without '%s' was accepted", #slot); \
    if (strstr(b.reason, "'" #slot "'") == NULL)                                               \
      fail_msg("a table without '%s' was refused as \"%s\"", #slot, b.reason);                 \
    checked++;                                                                                 \
  } while (0);
  ADR_BACKEND_REQUIRED_SLOTS(DROP)
#undef DROP
  assert_int_equal(checked, N_REQUIRED);
}

static char* read_file(const char* path) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) fail_msg("cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char* s = calloc(1, (size_t)n + 1);
  assert_non_null(s);
  assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  return s;
}

static bool is_required(const char* slot) {
  for (size_t i = 0; i < N_REQUIRED; i++)
    if (strcmp(required[i], slot) == 0) return true;
  return false;
}

/* The rows of "## The table": | group | `slot` ... | required |, where the
 * last column is "yes", "all but `x`", or anything else (none required).
 * The header row (fields, not slots) is skipped. */
static void test_doc_agrees(void** state) {
  (void)state;
  char* doc = read_file(doc_path);
  char* table = strstr(doc, "## The table");
  assert_non_null(table);
  size_t found = 0;
  for (char* line = strchr(table, '\n'); line != NULL && line[1] != '#';
       line = strchr(line + 1, '\n')) {
    char* row = line + 1;
    if (row[0] != '|' || strncmp(row, "| header", 8) == 0 || strncmp(row, "| group", 7) == 0 ||
        strncmp(row, "|---", 4) == 0)
      continue;
    char* end = strchr(row, '\n');
    char* last = end;
    while (last > row && *last != '|') last--; /* closing bar */
    char* req = last - 1;
    while (req > row && *req != '|') req--; /* start of the last column */
    char* slots = strchr(row + 1, '|');
    for (char* p = slots; p < req; p++) {
      if (*p != '`') continue;
      char* q = strchr(p + 1, '`');
      if (q == NULL || q > req) break;
      char name[64];
      size_t len = (size_t)(q - p - 1);
      p = q;
      if (len == 0 || len >= sizeof(name)) continue;
      memcpy(name, q - len, len);
      name[len] = '\0';
      if (strspn(name, "abcdefghijklmnopqrstuvwxyz_") != len) continue; /* a flag, a value */
      char col[160];
      size_t cl = (size_t)(last - req - 1);
      if (cl >= sizeof(col)) cl = sizeof(col) - 1;
      memcpy(col, req + 1, cl);
      col[cl] = '\0';
      char but[80];
      snprintf(but, sizeof(but), "but `%s`", name);
      bool doc_required = strstr(col, "yes") != NULL ||
                          (strstr(col, "all but") != NULL && strstr(col, but) == NULL);
      if (doc_required != is_required(name))
        fail_msg("docs/backend-abi.md says `%s` is %srequired; ADR_BACKEND_REQUIRED_SLOTS %s it",
                 name, doc_required ? "" : "not ", is_required(name) ? "lists" : "does not list");
      if (doc_required) found++;
    }
  }
  assert_int_equal(found, N_REQUIRED);
  free(doc);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s docs/backend-abi.md\n", argv[0]);
    return 2;
  }
  doc_path = argv[1];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_loader_uses_the_list),
      cmocka_unit_test(test_doc_agrees),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
