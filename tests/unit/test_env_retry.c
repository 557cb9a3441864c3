/* SPDX-License-Identifier: Apache-2.0
 *
 * A transient failure while the environment is read is not cached; a
 * malformed value is. The core is linked statically with its malloc,
 * calloc, realloc and strdup wrapped (-Wl,--wrap=...), so this test makes
 * the Nth allocation fail. Registered once per case (argv[1]):
 *   retry          ADR_BACKENDS, ADR_DEVICE and ADR_PLUGIN_PATH set: the
 *                  Nth allocation fails for N = 1, 2 ... until a read needs
 *                  fewer than N; every failed read is ENOMEM naming the
 *                  variable, the next read succeeds, and the result is
 *                  then published once for good.
 *   sticky-backends  ADR_BACKENDS="cuda opencl": ENOMEM first (retried),
 *                  then EINVAL with the same message on every call,
 *                  without reading again.
 *   sticky-device  ADR_DEVICE="cuda:x": the same for the error that only
 *                  adr_device_default and adr_init report.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "adr/adr.h"
#include "internal.h"

/* ---- allocation failure injection ----------------------------------------- */

static unsigned long alloc_calls; /* wrapped allocations so far */
static unsigned long fail_at;     /* 0: none; else the call number that fails */

static bool inject(void) {
  alloc_calls++;
  if (fail_at != 0 && alloc_calls == fail_at) {
    errno = ENOMEM;
    return true;
  }
  return false;
}

/* Arm: the n-th wrapped allocation from now fails (n >= 1); 0 disarms. */
static void fail_nth(unsigned long n) {
  fail_at = n ? alloc_calls + n : 0;
}

void* __real_malloc(size_t size);
void* __real_calloc(size_t count, size_t size);
void* __real_realloc(void* ptr, size_t size);
char* __real_strdup(const char* s);
void* __wrap_malloc(size_t size);
void* __wrap_calloc(size_t count, size_t size);
void* __wrap_realloc(void* ptr, size_t size);
char* __wrap_strdup(const char* s);

void* __wrap_malloc(size_t size) {
  return inject() ? NULL : __real_malloc(size);
}
void* __wrap_calloc(size_t count, size_t size) {
  return inject() ? NULL : __real_calloc(count, size);
}
void* __wrap_realloc(void* ptr, size_t size) {
  return inject() ? NULL : __real_realloc(ptr, size);
}
char* __wrap_strdup(const char* s) {
  return inject() ? NULL : __real_strdup(s);
}

/* ---- cases ------------------------------------------------------------------ */

static const char* which;

static void test_retry(void) {
  struct adr_error err = {{0}};
  struct adr_device* dev = NULL;
  /* A public call other than adr_init reports the transient failure. */
  fail_nth(1);
  assert_int_equal(adr_device_get(ARROW_DEVICE_CPU, 0, &dev, &err), ENOMEM);
  assert_string_equal(err.message, "ADR_BACKENDS: out of memory");
  int failures = 1;
  unsigned long n;
  for (n = 2; n < 64; n++) {
    memset(&err, 0, sizeof(err));
    fail_nth(n);
    int st = adr_init(&err);
    if (st == 0) break;
    assert_int_equal(st, ENOMEM);
    assert_non_null(strstr(err.message, ": out of memory"));
    assert_true(strncmp(err.message, "ADR_BACKENDS", 12) == 0 ||
                strncmp(err.message, "ADR_DEVICE", 10) == 0 ||
                strncmp(err.message, "ADR_PLUGIN_PATH", 15) == 0);
    failures++;
  }
  fail_nth(0);
  /* Two lists (an item array and a selector each) and one strdup: every
   * one of those five allocations was made to fail once. */
  assert_int_equal(failures, 5);
  assert_int_equal(n, 6);

  /* Published now: what was read is complete. */
  const struct adr__config* c = adr__config();
  assert_int_equal(c->status, 0);
  assert_int_equal(c->device_status, 0);
  assert_non_null(c->backends_filter);
  assert_int_equal(c->backends_filter->count, 2);
  assert_string_equal(c->backends_filter->u.rules[1].name, "cpu");
  assert_non_null(c->device_list);
  assert_int_equal(c->device_list->count, 2);
  assert_int_equal(c->device_list->u.devices[1].type, ARROW_DEVICE_CPU);
  assert_string_equal(c->plugin_path, "/nonexistent/a:/nonexistent/b");

  /* ... and never read again: no allocation, so an armed failure is not
   * even reached. */
  unsigned long before = alloc_calls;
  fail_nth(1);
  assert_int_equal(adr_init(&err), 0);
  assert_int_equal(alloc_calls, before);
  fail_nth(0);

  assert_int_equal(adr_device_default(&dev, &err), 0);
  assert_string_equal(adr_device_name(dev), "cpu:0");
}

static void test_sticky(const char* expected, bool global) {
  struct adr_error err = {{0}};
  struct adr_device* dev = NULL;
  fail_nth(1);
  assert_int_equal(adr_init(&err), ENOMEM);
  assert_non_null(strstr(err.message, "out of memory"));
  fail_nth(0);
  for (int round = 0; round < 3; round++) {
    /* Armed on later rounds: the sticky error is reported without reading
     * the environment again, so no allocation is attempted. */
    unsigned long before = alloc_calls;
    if (round > 0) fail_nth(1);
    memset(&err, 0, sizeof(err));
    assert_int_equal(adr_init(&err), EINVAL);
    assert_string_equal(err.message, expected);
    if (round > 0) assert_int_equal(alloc_calls, before);
    fail_nth(0);
    memset(&err, 0, sizeof(err));
    assert_int_equal(adr_device_default(&dev, &err), EINVAL);
    assert_string_equal(err.message, expected);
  }
  memset(&err, 0, sizeof(err));
  int st = adr_device_get(ARROW_DEVICE_CPU, 0, &dev, &err);
  if (global) {
    assert_int_equal(st, EINVAL);
    assert_string_equal(err.message, expected);
  } else {
    assert_int_equal(st, 0); /* an ADR_DEVICE error fails only the default */
  }
}

static void test_case(void** state) {
  (void)state;
  if (strcmp(which, "retry") == 0)
    test_retry();
  else if (strcmp(which, "sticky-backends") == 0)
    test_sticky("ADR_BACKENDS=\"cuda opencl\": column 6: expected ',' or end of text, found 'o'",
                true);
  else if (strcmp(which, "sticky-device") == 0)
    test_sticky(
        "ADR_DEVICE=\"cuda:x\": column 6: unknown device kind 'x' (expected a device id, '*', "
        "gpu, dgpu, igpu, cpu, accelerator, other, GPU-<uuid> or uuid=<uuid>)",
        false);
  else
    fail_msg("unknown case '%s'", which);
}

int main(int argc, char** argv) {
  which = argc > 1 ? argv[1] : "";
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_case)};
  return cmocka_run_group_tests_name(which, tests, NULL, NULL);
}
