/* SPDX-License-Identifier: Apache-2.0
 *
 * Message-level round trips of every layout of the array test catalogue
 * (tests/array): encoded from the CPU or from the device under test
 * (ADR_DEVICE), decoded onto the host and onto that device, whole and
 * sliced at the root.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipc_test.h"

static struct adr_device* g_dev;

/* Encodes (schema, src), reads it back onto dst and compares with src. */
static void roundtrip(const char* name, const struct ArrowSchema* schema,
                      const struct ArrowDeviceArray* src, struct adr_device* dst) {
  struct bytes b = {0};
  ipc_test_write_all(&b, schema, src);
  struct ArrowSchema s2;
  struct ArrowDeviceArray out;
  struct adr_error err;
  int st = ipc_test_read_all(&b, dst, &s2, &out, &err);
  if (st != 0) fail_msg("%s: read back: %s", name, err.message);
  assert_non_null(out.array.release);
  ArrowDeviceType want = dst ? adr_device_type(dst) : ARROW_DEVICE_CPU;
  assert_int_equal(out.device_type, want);
  ipc_test_assert_schema_equal(schema, &s2);
  bool eq = false;
  struct adr_error diff;
  ASSERT_OK(adr_device_array_equal(schema, src, &out, &eq, &diff, &err), &err);
  if (!eq) fail_msg("%s: differs after the round trip: %s", name, diff.message);
  adr_device_array_release(&out);
  s2.release(&s2);
  bytes_free(&b);
}

static void run_case(const struct test_case* c, int64_t cut_front, int64_t cut_back) {
  struct ArrowSchema schema;
  struct ArrowDeviceArray owner, a;
  bool wrapped;
  ipc_test_build(c, &schema, &owner, &wrapped);
  if (owner.array.length < cut_front + cut_back) {
    adr_device_array_release(&owner);
    schema.release(&schema);
    return;
  }
  ipc_test_view(&owner, wrapped, cut_front, cut_back, &a);
  char name[96];
  snprintf(name, sizeof(name), "%s[+%lld,-%lld]", c->name, (long long)cut_front,
           (long long)cut_back);
  roundtrip(name, &schema, &a, NULL);
  if (g_dev != NULL) {
    roundtrip(name, &schema, &a, g_dev);
    struct ArrowDeviceArray d;
    struct adr_error err;
    ASSERT_OK(adr_device_array_deep_copy(&schema, &a, g_dev, NULL, &d, NULL, &err), &err);
    roundtrip(name, &schema, &d, NULL);
    roundtrip(name, &schema, &d, g_dev);
    adr_device_array_release(&d);
  }
  adr_device_array_release(&a);
  adr_device_array_release(&owner);
  schema.release(&schema);
}

static void test_every_layout(void** state) {
  (void)state;
  for (size_t i = 0; i < test_case_count; i++) run_case(&test_cases[i], 0, 0);
}

static void test_every_layout_sliced(void** state) {
  (void)state;
  for (size_t i = 0; i < test_case_count; i++) {
    run_case(&test_cases[i], 1, 0);
    run_case(&test_cases[i], 3, 2);
    run_case(&test_cases[i], 0, 1);
  }
}

int main(void) {
  g_dev = ipc_test_device();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_layout),
      cmocka_unit_test(test_every_layout_sliced),
  };
  return cmocka_run_group_tests_name("ipc-roundtrip", tests, NULL, NULL);
}
