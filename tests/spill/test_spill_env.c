/* SPDX-License-Identifier: Apache-2.0
 *
 * The global spill managers from the environment (adr_spill_manager_global),
 * one registration per case (tests/spill/meson.build): argv[1] names it.
 *   on        ADR_SPILL=on, ADR_SPILL_ON_DEMAND=off,
 *             ADR_SPILL_DEVICE_LIMIT=50%, ADR_SPILL_STATS=2
 *   malformed ADR_SPILL=on, ADR_SPILL_DEVICE_LIMIT=2XB
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "adr/adr.h"
#include "adr/spill.h"

static const char* which;

static void test_global(void** state) {
  (void)state;
  struct adr_device* dev = NULL;
  struct adr_error e;
  if (adr_device_default(&dev, &e) != 0) fail_msg("device: %s", e.message);
  struct adr_spill_manager* m = NULL;
  if (strcmp(which, "malformed") == 0) {
    for (int i = 0; i < 2; i++) { /* read once, reported every time */
      assert_int_equal(adr_spill_manager_global(dev, &m, &e), EINVAL);
      assert_string_equal(e.message,
                          "[adr_spill_manager_global] ADR_SPILL_DEVICE_LIMIT=\"2XB\": column 2: "
                          "expected a unit (B, K, KiB, KB, M, MiB, MB, G, GiB, GB, T, TiB, TB), "
                          "found 'X'");
    }
    return;
  }
  if (adr_spill_manager_global(dev, &m, &e) != 0) fail_msg("global: %s", e.message);
  assert_non_null(m);
  struct adr_spill_manager* again = NULL;
  assert_int_equal(adr_spill_manager_global(dev, &again, NULL), 0);
  assert_ptr_equal(m, again);
  struct adr_device_info info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  assert_int_equal(adr_device_info_get(dev, &info, NULL), 0);
  assert_true(info.memory_total > 0);
  assert_int_equal(adr_spill_manager_device_limit(m), info.memory_total / 2);
  struct adr_spill_stats s;
  memset(&s, 0, sizeof(s));
  s.struct_size = sizeof(s);
  assert_int_equal(adr_spill_stats_get(m, &s, NULL), 0);
  assert_int_equal(s.level, 2);
  assert_int_equal(adr_spill_manager_destroy(m, &e), EINVAL);
  assert_non_null(strstr(e.message, "owned by adr"));
  /* On-demand is off: a spillable buffer does not register anything, and
   * the manager works. */
  struct adr_spill_buffer* b = NULL;
  assert_int_equal(adr_spill_buffer_alloc(m, 4096, &b, NULL), 0);
  assert_int_equal(adr_spill_buffer_expose(b, "env test", NULL, NULL), 0);
  size_t n = 0;
  assert_int_equal(adr_spill_exposures_list(m, NULL, NULL, &n, NULL), 0);
  assert_int_equal(n, 1);
  assert_int_equal(adr_spill_buffer_free(b, NULL), 0);
}

int main(int argc, char** argv) {
  which = argc > 1 ? argv[1] : "on";
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_global)};
  return cmocka_run_group_tests_name(which, tests, NULL, NULL);
}
