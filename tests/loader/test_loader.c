/* SPDX-License-Identifier: Apache-2.0
 *
 * Loader tests: the plugins of test_plugin.c sit in ADR_PLUGIN_PATH; each
 * must be accepted or rejected with the right reason while the process
 * goes on. argv[1] picks the scenario the environment was set up for:
 *   all       every plugin allowed
 *   excluded  ADR_BACKENDS=...,!t_marker: t_marker must never be opened
 * (both exclude the in-tree GPU backends, which have suites of their own)
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "adr/adr.h"
#include "adr/backend.h"

static const char* scenario;

static int find_backend(const char* name, struct adr_backend_info* out) {
  size_t n = adr_backend_count();
  for (size_t i = 0; i < n; i++) {
    memset(out, 0, sizeof(*out));
    out->struct_size = sizeof(*out);
    assert_int_equal(adr_backend_info_get(i, out, NULL), 0);
    if (strcmp(out->name, name) == 0) return 0;
  }
  return ENOENT;
}

static void expect_state(const char* name, int state, const char* reason_part) {
  struct adr_backend_info bi;
  if (find_backend(name, &bi) != 0) fail_msg("backend %s not registered", name);
  if (bi.state != state)
    fail_msg("backend %s: state %d, expected %d (reason: %s)", name, bi.state, state, bi.reason);
  if (reason_part != NULL && strstr(bi.reason, reason_part) == NULL)
    fail_msg("backend %s: reason '%s' does not mention '%s'", name, bi.reason, reason_part);
}

static bool marker_exists(const char* name) {
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s", getenv("ADR_TEST_MARKER_DIR"), name);
  struct stat st;
  return stat(path, &st) == 0;
}

static int setup(void** state) {
  (void)state;
  const char* dir = getenv("ADR_TEST_MARKER_DIR");
  assert_non_null(dir);
  mkdir(dir, 0755);
  char path[1024];
  snprintf(path, sizeof(path), "%s/t_marker", dir);
  unlink(path);
  assert_int_equal(adr_backends_load_all(NULL), 0);
  return 0;
}

static void test_good_backend_loaded(void** state) {
  (void)state;
  expect_state("t_good", ADR_BACKEND_LOADED, NULL);
  expect_state("cpu", ADR_BACKEND_LOADED, NULL);
  struct adr_device* dev = NULL;
  assert_int_equal(adr_device_get(ARROW_DEVICE_EXT_DEV, 1, &dev, NULL), 0);
  assert_string_equal(adr_device_name(dev), "ext_dev:1");
  struct adr_device_info info = {.struct_size = sizeof(info)};
  assert_int_equal(adr_device_info_get(dev, &info, NULL), 0);
  assert_string_equal(info.backend, "t_good");
  assert_string_equal(info.name, "test device 1");
}

static void test_newer_minor_accepted_at_common_minor(void** state) {
  (void)state;
  struct adr_backend_info bi;
  assert_int_equal(find_backend("t_minor", &bi), 0);
  assert_int_equal(bi.state, ADR_BACKEND_LOADED);
  assert_int_equal(bi.abi_major, 1);
  assert_int_equal(bi.abi_minor, ADR_BACKEND_ABI_MINOR); /* min(host, plugin 99) */
}

static void test_wrong_major_rejected(void** state) {
  (void)state;
  expect_state("t_major", ADR_BACKEND_REJECTED, "ABI major version 2");
}

static void test_missing_entry_rejected(void** state) {
  (void)state;
  expect_state("t_nosym", ADR_BACKEND_REJECTED, "no adr_backend_query symbol");
}

static void test_small_struct_rejected(void** state) {
  (void)state;
  expect_state("t_small", ADR_BACKEND_REJECTED, "struct_size 64 is smaller");
}

static void test_null_required_slot_rejected(void** state) {
  (void)state;
  expect_state("t_nullslot", ADR_BACKEND_REJECTED, "required slot 'alloc' is NULL");
}

static void test_failing_init_rejected(void** state) {
  (void)state;
  expect_state("t_initfail", ADR_BACKEND_REJECTED, "init failed");
  expect_state("t_initfail", ADR_BACKEND_REJECTED, "TEST_FAILURE");
  expect_state("t_unavail", ADR_BACKEND_UNAVAILABLE, "init fails on purpose");
}

static void test_unresolved_symbol_rejected(void** state) {
  (void)state;
  expect_state("t_undef", ADR_BACKEND_REJECTED, "adr_test_symbol_nobody_defines");
}

static void test_missing_dependency_rejected(void** state) {
  (void)state;
  expect_state("t_dep", ADR_BACKEND_REJECTED, "libadr_absent_dep.so.1");
}

static void test_conflicting_claim_resolved(void** state) {
  (void)state;
  /* Both load; t_good (earlier in file-name order) serves ext_dev. */
  expect_state("t_good_dup", ADR_BACKEND_LOADED, "served by 't_good'");
  struct adr_device* dev = NULL;
  assert_int_equal(adr_device_get(ARROW_DEVICE_EXT_DEV, 0, &dev, NULL), 0);
  struct adr_device_info info = {.struct_size = sizeof(info)};
  assert_int_equal(adr_device_info_get(dev, &info, NULL), 0);
  assert_string_equal(info.backend, "t_good");
}

static void test_rejected_type_is_enodev_with_reason(void** state) {
  (void)state;
  struct adr_device* dev = NULL;
  struct adr_error err = {{0}};
  /* hexagon is claimed only by rejected plugins */
  assert_int_equal(adr_device_get(ARROW_DEVICE_HEXAGON, 0, &dev, &err), ENODEV);
  assert_non_null(strstr(err.message, "adr_device_get"));
}

static void test_enumeration_covers_loaded_backends(void** state) {
  (void)state;
  size_t n = 0;
  assert_int_equal(adr_device_count(&n, NULL), 0);
  /* Each working test plugin has two devices; in-tree GPU backends that
   * happen to be built and find hardware may add their own. */
  size_t per_type[32] = {0};
  for (size_t i = 0; i < n; i++) {
    struct adr_device* d = NULL;
    assert_int_equal(adr_device_at(i, &d, NULL), 0);
    if (adr_device_type(d) < 32) per_type[adr_device_type(d)]++;
  }
  assert_int_equal(per_type[ARROW_DEVICE_CPU], 1);
  assert_int_equal(per_type[ARROW_DEVICE_EXT_DEV], 2); /* t_good only, not t_good_dup too */
  assert_int_equal(per_type[ARROW_DEVICE_VPI], 2);
  assert_int_equal(per_type[ARROW_DEVICE_METAL], 2);
  assert_int_equal(per_type[ARROW_DEVICE_HEXAGON], 0);
  assert_int_equal(per_type[ARROW_DEVICE_WEBGPU], strcmp(scenario, "all") == 0 ? 2 : 0);
  struct adr_device* first = NULL;
  assert_int_equal(adr_device_at(0, &first, NULL), 0);
  assert_string_equal(adr_device_name(first), "cpu:0");
  struct adr_error err = {{0}};
  struct adr_device* none = NULL;
  assert_int_equal(adr_device_at(n, &none, &err), ENODEV);
  assert_non_null(strstr(err.message, "out of range"));
}

static void test_marker_plugin(void** state) {
  (void)state;
  if (strcmp(scenario, "all") == 0) {
    /* Positive control: loading it does leave the marker. */
    expect_state("t_marker", ADR_BACKEND_LOADED, NULL);
    assert_true(marker_exists("t_marker"));
  } else {
    expect_state("t_marker", ADR_BACKEND_EXCLUDED, "ADR_BACKENDS");
    assert_false(marker_exists("t_marker"));
    struct adr_device* dev = NULL;
    struct adr_error err = {{0}};
    assert_int_equal(adr_device_get(ARROW_DEVICE_WEBGPU, 0, &dev, &err), ENODEV);
    assert_false(marker_exists("t_marker"));
  }
}

static void test_search_path_lists_plugin_path_first(void** state) {
  (void)state;
  const char* path = adr_backend_search_path();
  const char* plugin = getenv("ADR_PLUGIN_PATH");
  assert_non_null(plugin);
  assert_int_equal(strncmp(path, plugin, strlen(plugin)), 0);
  struct adr_backend_info bi;
  assert_int_equal(find_backend("t_good", &bi), 0);
  assert_int_equal(strncmp(bi.path, plugin, strlen(plugin)), 0);
}

int main(int argc, char** argv) {
  scenario = argc > 1 ? argv[1] : "all";
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_good_backend_loaded),
      cmocka_unit_test(test_newer_minor_accepted_at_common_minor),
      cmocka_unit_test(test_wrong_major_rejected),
      cmocka_unit_test(test_missing_entry_rejected),
      cmocka_unit_test(test_small_struct_rejected),
      cmocka_unit_test(test_null_required_slot_rejected),
      cmocka_unit_test(test_failing_init_rejected),
      cmocka_unit_test(test_unresolved_symbol_rejected),
      cmocka_unit_test(test_missing_dependency_rejected),
      cmocka_unit_test(test_conflicting_claim_resolved),
      cmocka_unit_test(test_rejected_type_is_enodev_with_reason),
      cmocka_unit_test(test_enumeration_covers_loaded_backends),
      cmocka_unit_test(test_marker_plugin),
      cmocka_unit_test(test_search_path_lists_plugin_path_first),
  };
  return cmocka_run_group_tests_name(scenario, tests, setup, NULL);
}
