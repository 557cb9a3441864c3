/* SPDX-License-Identifier: Apache-2.0
 *
 * The out-of-memory chain against a backend that really runs out: the GPU
 * driver simulators (tests/sim) with a small memory budget
 * (ADR_SIM_MEMORY_MIB=64, set by the registration). The pool's cached
 * chunks must be given back before adr reports ENOMEM, blocks freed on a
 * stream that has not reached the free are waited for on this path only,
 * OOM callbacks that free memory make the allocation succeed, and the final
 * message carries the driver's error and the device's statistics.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "adr/adr.h"
#include "adr/memory.h"

#define MiB ((size_t)1 << 20)

static struct adr_device* dev;

static struct adr_memory_stats stats(void) {
  struct adr_memory_stats s;
  memset(&s, 0, sizeof(s));
  s.struct_size = sizeof(s);
  assert_int_equal(adr_memory_stats_get(dev, &s, NULL), 0);
  return s;
}

static void* xalloc(size_t size, struct adr_stream* stream) {
  void* p = NULL;
  struct adr_error err;
  if (adr_alloc(dev, size, 0, stream, &p, &err) != 0)
    fail_msg("adr_alloc(%zu): %s", size, err.message);
  return p;
}

static void test_cache_released_before_enomem(void** state) {
  (void)state;
  void* a = xalloc(40 * MiB, NULL);
  assert_int_equal(adr_free(dev, a, 40 * MiB, NULL, NULL), 0);
  struct adr_memory_stats s0 = stats();
  assert_true(s0.cached_bytes >= 40 * MiB);
  /* 40 cached + 50 new exceed the 64 MiB budget: the cache goes first. */
  void* b = xalloc(50 * MiB, NULL);
  struct adr_memory_stats s1 = stats();
  assert_int_equal(s1.oom_retries, s0.oom_retries + 1);
  assert_true(s1.trimmed_bytes >= s0.trimmed_bytes + 40 * MiB);
  assert_int_equal(s1.oom_failures, s0.oom_failures);
  assert_int_equal(adr_free(dev, b, 50 * MiB, NULL, NULL), 0);
  assert_int_equal(adr_memory_trim(dev, NULL, NULL), 0);
  assert_int_equal(stats().reserved_bytes.current, 0);
}

static void test_pending_stream_free_waited_for(void** state) {
  (void)state;
  struct adr_stream* s = NULL;
  assert_int_equal(adr_stream_create(dev, &s, NULL), 0);
  void* a = xalloc(40 * MiB, s);
  assert_int_equal(adr_memset(dev, a, 7, 40 * MiB, s, NULL), 0);
  assert_int_equal(adr_free(dev, a, 40 * MiB, s, NULL), 0);
  /* A host request cannot use a's block (s may not have reached the
   * free); only after a host wait on the OOM path can it be released. */
  void* b = xalloc(50 * MiB, NULL);
  assert_int_equal(adr_free(dev, b, 50 * MiB, NULL, NULL), 0);
  assert_int_equal(adr_stream_destroy(s, NULL), 0);
  assert_int_equal(adr_memory_trim(dev, NULL, NULL), 0);
  assert_int_equal(stats().reserved_bytes.current, 0);
}

static void* spill_block;
static int spill_calls;

static int spill(void* ctx, struct adr_device* d, size_t size, uint32_t attempt) {
  (void)ctx;
  (void)size;
  (void)attempt;
  spill_calls++;
  if (spill_block == NULL) return 0;
  adr_free(d, spill_block, 40 * MiB, NULL, NULL);
  spill_block = NULL;
  return 1;
}

static void test_callback_spills(void** state) {
  (void)state;
  spill_block = xalloc(40 * MiB, NULL);
  spill_calls = 0;
  assert_int_equal(adr_oom_callback_add(dev, spill, NULL, NULL), 0);
  /* The freed block lands in the pool; the chain gives it back before the
   * retry, so the allocation succeeds after one callback round. */
  void* b = xalloc(50 * MiB, NULL);
  assert_int_equal(spill_calls, 1);
  assert_null(spill_block);
  void* c = NULL;
  struct adr_error err;
  assert_int_equal(adr_alloc(dev, 50 * MiB, 0, NULL, &c, &err), ENOMEM);
  assert_int_equal(spill_calls, 2); /* asked again, nothing left to spill */
  assert_int_equal(adr_oom_callback_remove(dev, spill, NULL, NULL), 0);
  assert_int_equal(adr_free(dev, b, 50 * MiB, NULL, NULL), 0);
  assert_int_equal(adr_memory_trim(dev, NULL, NULL), 0);
}

static void test_enomem_message(void** state) {
  (void)state;
  void* p = NULL;
  struct adr_error err;
  struct adr_memory_stats s0 = stats();
  assert_int_equal(adr_alloc(dev, 100 * MiB, 0, NULL, &p, &err), ENOMEM);
  assert_non_null(strstr(err.message, "ENOMEM: cannot allocate 100 MiB on"));
  /* The operation and backend once, at the front (it used to be twice). */
  assert_ptr_equal(strstr(err.message, "] ENOMEM: cannot allocate"),
                   strchr(strchr(err.message, ']') + 1, ']'));
  assert_int_equal(strncmp(err.message, "[adr_alloc][", 12), 0);
  assert_non_null(strstr(err.message, "through handler 'pool'"));
  assert_true(strstr(err.message, "OUT_OF_MEMORY") != NULL ||
              strstr(err.message, "OutOfMemory") != NULL);
  assert_non_null(strstr(err.message, "reserved "));
  assert_non_null(strstr(err.message, "oom retries"));
  assert_int_equal(stats().oom_failures, s0.oom_failures + 1);
  /* The same through the plain backend allocator. */
  assert_int_equal(adr_alloc_with(dev, adr_allocator_backend(), 100 * MiB, 0, NULL, &p, &err),
                   ENOMEM);
  assert_non_null(strstr(err.message, "through handler 'backend'"));
}

int main(void) {
  struct adr_error err;
  if (adr_device_default(&dev, &err) != 0) {
    const char* require = getenv("ADR_MEMORY_REQUIRE");
    printf("test_oom_backend: no device (%s)\n", err.message);
    return require && require[0] == '1' ? 1 : 77;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cache_released_before_enomem),
      cmocka_unit_test(test_pending_stream_free_waited_for),
      cmocka_unit_test(test_callback_spills),
      cmocka_unit_test(test_enomem_message),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
