/* SPDX-License-Identifier: Apache-2.0
 *
 * The host concatenation behind delta dictionaries (core/array/concat.c),
 * with inputs the IPC reader never produces: every catalogue case cut at
 * each row into a front and a back slice (views with offsets on the
 * root, so children are reached through sliced offsets, clipped runs and
 * bit offsets) must concatenate back into an array equal to the whole;
 * three parts, empty parts; a dictionary-encoded node is refused.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "array_internal.h"
#include "array_test.h"

static bool has_dictionary(const struct ArrowSchema* s) {
  if (s->dictionary != NULL) return true;
  for (int64_t i = 0; i < s->n_children; i++)
    if (has_dictionary(s->children[i])) return true;
  return false;
}

static void keep_release(struct ArrowArray* a) {
  a->release = NULL;
}

static struct ArrowArray view(const struct ArrowArray* a, int64_t from, int64_t n) {
  struct ArrowArray v = *a;
  v.offset = a->offset + from;
  v.length = n;
  v.null_count = -1;
  v.release = keep_release; /* a view: the whole array owns the data */
  return v;
}

static void assert_concat_equals(const char* name, const struct ArrowSchema* s,
                                 const struct ArrowArray* const* parts, int64_t n,
                                 const struct ArrowArray* want) {
  struct adr_error err;
  struct ArrowArray got;
  ASSERT_OK(adr__array_concat_host("test", s, parts, n, &got, &err), &err);
  assert_int_equal(got.offset, 0);
  assert_int_equal(got.length, want->length);
  struct ArrowDeviceArray a, b;
  memset(&a, 0, sizeof(a));
  memset(&b, 0, sizeof(b));
  a.array = *want;
  a.device_type = b.device_type = ARROW_DEVICE_CPU;
  a.device_id = b.device_id = -1;
  b.array = got;
  ASSERT_OK(adr_device_array_validate(s, &b, ADR_VALIDATE_FULL, &err), &err);
  bool eq = false;
  struct adr_error diff;
  ASSERT_OK(adr_device_array_equal(s, &a, &b, &eq, &diff, &err), &err);
  if (!eq) fail_msg("%s: %s", name, diff.message);
  got.release(&got);
}

static void test_every_cut(void** state) {
  (void)state;
  int cases = 0, cuts = 0;
  for (size_t i = 0; i < test_case_count; i++) {
    struct ArrowSchema s;
    struct ArrowDeviceArray whole;
    test_cases[i].build(&s, &whole);
    const struct ArrowArray* w = &whole.array;
    if (has_dictionary(&s)) {
      struct adr_error err;
      struct ArrowArray out;
      const struct ArrowArray* parts[1] = {w};
      assert_int_equal(adr__array_concat_host("test", &s, parts, 1, &out, &err), ENOTSUP);
      assert_non_null(strstr(err.message, "dictionary-encoded"));
      assert_null(out.release);
    } else {
      for (int64_t k = 0; k <= w->length; k++) {
        struct ArrowArray front = view(w, 0, k), back = view(w, k, w->length - k);
        const struct ArrowArray* parts[2] = {&front, &back};
        assert_concat_equals(test_cases[i].name, &s, parts, 2, w);
        cuts++;
      }
      /* Three parts around an inner slice, and a slice on its own. */
      if (w->length >= 3) {
        int64_t n = w->length;
        struct ArrowArray a = view(w, 0, 1), b = view(w, 1, n - 2), c = view(w, n - 1, 1);
        const struct ArrowArray* parts[3] = {&a, &b, &c};
        assert_concat_equals(test_cases[i].name, &s, parts, 3, w);
        struct ArrowArray inner = view(w, 1, n - 2);
        const struct ArrowArray* one[1] = {&b};
        assert_concat_equals(test_cases[i].name, &s, one, 1, &inner);
      }
      cases++;
    }
    adr_device_array_release(&whole);
    s.release(&s);
  }
  print_message("%d layouts, %d cuts\n", cases, cuts);
  assert_true(cases >= (int)test_case_count - 3);
}

/* Results that would not fit their type are EOVERFLOW, found before any
 * data is copied (so the arrays here need no real data buffers). */
static void test_overflow(void** state) {
  (void)state;
  struct adr_error err;
  struct ArrowArray out;
  /* utf8: 1.5e9 bytes twice pass 32-bit offsets; large_utf8 is fine. */
  struct ArrowSchema s;
  ASSERT_OK(adr_schema_init(&s, "u", "s", 0, 0, &err), &err);
  int32_t offs[2] = {0, 1500000000};
  const void* bufs[3] = {NULL, offs, ""};
  struct ArrowArray big = {.length = 1, .n_buffers = 3, .buffers = bufs, .release = keep_release};
  const struct ArrowArray* two[2] = {&big, &big};
  assert_int_equal(adr__array_concat_host("test", &s, two, 2, &out, &err), EOVERFLOW);
  assert_non_null(strstr(err.message, "offsets past 2^31 - 1"));
  assert_null(out.release);
  s.release(&s);
  /* run-end encoded with int16 run ends: two arrays of 20000 rows. */
  ASSERT_OK(adr_schema_init(&s, "+r", "r", 0, 2, &err), &err);
  ASSERT_OK(adr_schema_init(s.children[0], "s", "run_ends", 0, 0, &err), &err);
  ASSERT_OK(adr_schema_init(s.children[1], "i", "values", 0, 0, &err), &err);
  int16_t ends[1] = {20000};
  int32_t vals[1] = {7};
  const void* rb[2] = {NULL, ends};
  const void* vb[2] = {NULL, vals};
  struct ArrowArray re = {.length = 1, .n_buffers = 2, .buffers = rb, .release = keep_release};
  struct ArrowArray va = {.length = 1, .n_buffers = 2, .buffers = vb, .release = keep_release};
  struct ArrowArray* kids[2] = {&re, &va};
  struct ArrowArray ree = {
      .length = 20000, .n_children = 2, .children = kids, .release = keep_release};
  const struct ArrowArray* pair[2] = {&ree, &ree};
  assert_int_equal(adr__array_concat_host("test", &s, pair, 2, &out, &err), EOVERFLOW);
  assert_non_null(strstr(err.message, "run ends"));
  assert_null(out.release);
  /* One of them fits. */
  ASSERT_OK(adr__array_concat_host("test", &s, pair, 1, &out, &err), &err);
  assert_int_equal(out.length, 20000);
  out.release(&out);
  s.release(&s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_cut),
      cmocka_unit_test(test_overflow),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
