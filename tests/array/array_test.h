/* SPDX-License-Identifier: Apache-2.0
 *
 * Shared helpers of the array tests: building CPU arrays of every layout
 * with adr's node API, and the device under test (ADR_DEVICE).
 */
#ifndef ADR_TESTS_ARRAY_TEST_H
#define ADR_TESTS_ARRAY_TEST_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>

#include <cmocka.h>

#include "adr/adr.h"
#include "adr/array.h"
#include "sample_table.h" /* tools/fixtures */

/* Fails the test with the message when st != 0. */
#define ASSERT_OK(expr, err)                                                    \
  do {                                                                         \
    int st_ = (expr);                                                          \
    if (st_ != 0) fail_msg("%s -> %s: %s", #expr, adr_status_name(st_), (err)->message); \
  } while (0)

/* The device of the tests' CPU arrays and of the host side of their
 * copies: the CPU device, or NULL (host memory, no cpu backend) in host
 * mode (ADR_ARRAY_HOST=null). */
struct adr_device* test_cpu(void);
bool test_host_mode(void);

/* A schema node (adr-owned); aborts the test on failure. */
void test_schema(struct ArrowSchema* out, const char* format, const char* name, int64_t flags,
                 int64_t n_children);

/* An array node on the CPU with length/offset/null_count set. */
void test_node(struct ArrowArray* out, int64_t n_buffers, int64_t n_children, int64_t length,
               int64_t offset, int64_t null_count);

/* Buffer i of a node: `size` bytes copied from `data` (may be NULL: zeroed). */
void* test_buffer(struct ArrowArray* a, int64_t i, size_t size, const void* data);

/* A validity bitmap for n elements where element k is null when
 * null_every > 0 && k % null_every == null_phase; returns the null count in
 * [from, from + count). */
int64_t test_validity(struct ArrowArray* a, int64_t n, int null_every, int null_phase,
                      int64_t from, int64_t count);

/* Exports a CPU node as a device array (moves it). */
void test_export(struct ArrowArray* a, struct ArrowDeviceArray* out);

/* A string array of the given values (NULL = null), with offset. */
void test_strings(struct ArrowArray* out, const char* const* values, int64_t n, int64_t offset,
                  bool large);

/* A primitive int32 array of n values v[k] = base + k with nulls. */
void test_int32s(struct ArrowArray* out, int64_t n, int32_t base, int null_every, int64_t offset);

/* Asserts a and b are logically equal. */
void test_assert_equal(const struct ArrowSchema* s, const struct ArrowDeviceArray* a,
                       const struct ArrowDeviceArray* b);

/* One test case: a named (schema, CPU array) pair. */
struct test_case {
  const char* name;
  void (*build)(struct ArrowSchema* schema, struct ArrowDeviceArray* array);
};
extern const struct test_case test_cases[];
extern const size_t test_case_count;

#endif
