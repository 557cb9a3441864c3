/* SPDX-License-Identifier: Apache-2.0
 *
 * ArrowDeviceArrayStream producers and consumer helpers (the C stream
 * rules: get_schema, get_next, end marked by a released array, errors with
 * get_last_error, release), and the transfer stream to ADR_DEVICE with
 * prefetch 0 and 2.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "array_test.h"

static struct adr_device* dut;

static void sample(int64_t rows, struct ArrowSchema* s, struct ArrowDeviceArray* a) {
  struct adr_error err;
  ASSERT_OK(fixture_sample_table(rows, s, a, &err), &err);
}

static void test_from_arrays(void** state) {
  (void)state;
  struct adr_error err;
  struct ArrowSchema schema, s2;
  struct ArrowDeviceArray arrays[3], ref[3];
  sample(10, &schema, &arrays[0]);
  for (int k = 0; k < 3; k++) {
    if (k > 0) {
      sample(10 + k, &s2, &arrays[k]);
      s2.release(&s2);
    }
    sample(10 + k, &s2, &ref[k]);
    s2.release(&s2);
  }
  struct ArrowDeviceArrayStream st;
  ASSERT_OK(adr_device_array_stream_from_arrays(&schema, arrays, 3, ARROW_DEVICE_CPU, &st, &err),
            &err);
  assert_null(schema.release); /* moved */
  for (int k = 0; k < 3; k++) assert_null(arrays[k].array.release);
  assert_int_equal(st.device_type, ARROW_DEVICE_CPU);
  struct ArrowSchema got;
  ASSERT_OK(adr_device_array_stream_get_schema(&st, &got, &err), &err);
  assert_string_equal(got.format, "+s");
  assert_int_equal(got.n_children, 4);
  for (int k = 0; k < 3; k++) {
    struct ArrowDeviceArray b;
    ASSERT_OK(adr_device_array_stream_next(&st, &b, &err), &err);
    assert_non_null(b.array.release);
    test_assert_equal(&got, &ref[k], &b);
    adr_device_array_release(&b);
    adr_device_array_release(&ref[k]);
  }
  for (int k = 0; k < 2; k++) { /* the end, and it stays the end */
    struct ArrowDeviceArray b;
    ASSERT_OK(adr_device_array_stream_next(&st, &b, &err), &err);
    assert_null(b.array.release);
  }
  got.release(&got);
  st.release(&st);
  assert_null(st.release);
  assert_int_equal(adr_device_array_stream_next(&st, &ref[0], &err), EINVAL);
  assert_non_null(strstr(err.message, "stream is released"));
}

static void test_from_arrays_errors_and_early_release(void** state) {
  (void)state;
  struct adr_error err;
  struct ArrowSchema schema;
  struct ArrowDeviceArray arrays[2];
  sample(5, &schema, &arrays[0]);
  struct ArrowSchema tmp;
  sample(5, &tmp, &arrays[1]);
  tmp.release(&tmp);
  struct ArrowDeviceArrayStream st;
  /* wrong device type: nothing moved */
  assert_int_equal(
      adr_device_array_stream_from_arrays(&schema, arrays, 2, ARROW_DEVICE_CUDA, &st, &err),
      EINVAL);
  assert_non_null(strstr(err.message, "arrays[0] is on device type 1, not 2"));
  assert_non_null(schema.release);
  assert_non_null(arrays[1].array.release);
  /* released early with batches left: they are released (ASan checks) */
  ASSERT_OK(adr_device_array_stream_from_arrays(&schema, arrays, 2, ARROW_DEVICE_CPU, &st, &err),
            &err);
  struct ArrowDeviceArray b;
  ASSERT_OK(adr_device_array_stream_next(&st, &b, &err), &err);
  adr_device_array_release(&b);
  st.release(&st);
}

struct counter {
  pthread_mutex_t mu;
  int produced;
  int fail_at; /* -1: never */
  int end_at;
  bool released;
};

static int counting_next(void* ctx, struct ArrowDeviceArray* out, struct adr_error* error) {
  struct counter* c = ctx;
  pthread_mutex_lock(&c->mu);
  int k = c->produced++;
  pthread_mutex_unlock(&c->mu);
  if (k == c->fail_at) return adr_error_set(error, EIO, "disk on fire at batch %d", k);
  if (k >= c->end_at) return 0; /* out left released: the end */
  struct ArrowSchema s;
  int st = fixture_sample_table(100 + k, &s, out, error);
  if (st == 0) s.release(&s);
  return st;
}

static void counter_release(void* ctx) {
  struct counter* c = ctx;
  c->released = true;
}

static void callback_stream(struct counter* c, int end_at, int fail_at,
                            struct ArrowDeviceArrayStream* out) {
  struct adr_error err;
  pthread_mutex_init(&c->mu, NULL);
  c->produced = 0;
  c->end_at = end_at;
  c->fail_at = fail_at;
  c->released = false;
  struct ArrowSchema schema;
  struct ArrowDeviceArray first;
  sample(1, &schema, &first);
  adr_device_array_release(&first);
  ASSERT_OK(adr_device_array_stream_from_callback(&schema, ARROW_DEVICE_CPU, counting_next,
                                                  counter_release, c, out, &err),
            &err);
}

static void test_from_callback_error(void** state) {
  (void)state;
  struct adr_error err;
  struct counter c;
  struct ArrowDeviceArrayStream st;
  callback_stream(&c, 10, 2, &st);
  struct ArrowDeviceArray b;
  for (int k = 0; k < 2; k++) {
    ASSERT_OK(adr_device_array_stream_next(&st, &b, &err), &err);
    assert_int_equal(b.array.length, 100 + k);
    adr_device_array_release(&b);
  }
  for (int k = 0; k < 2; k++) { /* the error, and it stays */
    assert_int_equal(adr_device_array_stream_next(&st, &b, &err), EIO);
    assert_null(b.array.release);
    assert_non_null(strstr(err.message, "get_next failed (EIO): disk on fire at batch 2"));
  }
  assert_string_equal(st.get_last_error(&st), "disk on fire at batch 2");
  assert_int_equal(c.produced, 3);
  st.release(&st);
  assert_true(c.released);
  pthread_mutex_destroy(&c.mu);
}

/* A producer that breaks the rules: arrays on the wrong device type. */
static int wrong_type_next(struct ArrowDeviceArrayStream* self, struct ArrowDeviceArray* out) {
  (void)self;
  struct ArrowSchema s;
  struct adr_error err;
  int st = fixture_sample_table(3, &s, out, &err);
  if (st == 0) s.release(&s);
  return st;
}

static void test_consumer_checks_device_type(void** state) {
  (void)state;
  struct adr_error err;
  struct ArrowDeviceArrayStream st = {.device_type = ARROW_DEVICE_OPENCL,
                                      .get_next = wrong_type_next};
  st.release = (void (*)(struct ArrowDeviceArrayStream*))1; /* never called */
  struct ArrowDeviceArray b;
  assert_int_equal(adr_device_array_stream_next(&st, &b, &err), EPROTO);
  assert_non_null(strstr(err.message, "device type 1 in a stream of type 4"));
  assert_null(b.array.release);
}

static int wait_until_produced(struct counter* c, int n) {
  struct timespec ts = {0, 2000000};
  for (int i = 0; i < 5000; i++) { /* up to 10 s: a liveness bound, not a timing */
    pthread_mutex_lock(&c->mu);
    int p = c->produced;
    pthread_mutex_unlock(&c->mu);
    if (p >= n) return p;
    nanosleep(&ts, NULL);
  }
  pthread_mutex_lock(&c->mu);
  int p = c->produced;
  pthread_mutex_unlock(&c->mu);
  return p;
}

static void transfer_case(int prefetch) {
  struct adr_error err;
  struct counter c;
  struct ArrowDeviceArrayStream src, t;
  callback_stream(&c, 5, -1, &src);
  ASSERT_OK(adr_transfer_stream_init(&src, dut, prefetch, &t, &err), &err);
  assert_null(src.release);
  assert_int_equal(t.device_type, adr_device_type(dut));
  struct ArrowSchema schema;
  ASSERT_OK(adr_device_array_stream_get_schema(&t, &schema, &err), &err);
  for (int k = 0; k < 5; k++) {
    struct ArrowDeviceArray b;
    ASSERT_OK(adr_device_array_stream_next(&t, &b, &err), &err);
    assert_non_null(b.array.release);
    assert_int_equal(b.device_type, adr_device_type(dut));
    if (k == 0) {
      /* While the consumer holds batch 0, the worker copies ahead. */
      if (prefetch > 0)
        assert_int_equal(wait_until_produced(&c, 1 + prefetch), 1 + prefetch);
      else
        assert_int_equal(c.produced, 1);
    }
    struct ArrowSchema s;
    struct ArrowDeviceArray ref;
    sample(100 + k, &s, &ref);
    s.release(&s);
    /* b is compared straight away: equal() honours its sync_event */
    test_assert_equal(&schema, &ref, &b);
    adr_device_array_release(&ref);
    adr_device_array_release(&b);
  }
  struct ArrowDeviceArray end;
  ASSERT_OK(adr_device_array_stream_next(&t, &end, &err), &err);
  assert_null(end.array.release);
  schema.release(&schema);
  t.release(&t);
  assert_true(c.released);
  pthread_mutex_destroy(&c.mu);
}

static void test_transfer_prefetch0(void** state) {
  (void)state;
  transfer_case(0);
}

static void test_transfer_prefetch2(void** state) {
  (void)state;
  transfer_case(2);
}

static void test_transfer_error_and_early_release(void** state) {
  (void)state;
  struct adr_error err;
  for (int prefetch = 0; prefetch <= 3; prefetch += 3) {
    struct counter c;
    struct ArrowDeviceArrayStream src, t;
    callback_stream(&c, 10, 2, &src);
    ASSERT_OK(adr_transfer_stream_init(&src, dut, prefetch, &t, &err), &err);
    struct ArrowDeviceArray b;
    for (int k = 0; k < 2; k++) {
      ASSERT_OK(adr_device_array_stream_next(&t, &b, &err), &err);
      adr_device_array_release(&b);
    }
    assert_int_equal(adr_device_array_stream_next(&t, &b, &err), EIO);
    assert_non_null(strstr(err.message, "disk on fire at batch 2"));
    t.release(&t);
    assert_true(c.released);
    pthread_mutex_destroy(&c.mu);
  }
  /* released while batches are queued and in flight */
  struct counter c;
  struct ArrowDeviceArrayStream src, t;
  callback_stream(&c, 1000, -1, &src);
  ASSERT_OK(adr_transfer_stream_init(&src, dut, 4, &t, &err), &err);
  struct ArrowDeviceArray b;
  ASSERT_OK(adr_device_array_stream_next(&t, &b, &err), &err);
  wait_until_produced(&c, 5);
  t.release(&t);
  adr_device_array_release(&b); /* a batch outlives its stream */
  assert_true(c.released);
  pthread_mutex_destroy(&c.mu);
  /* bad arguments */
  callback_stream(&c, 1, -1, &src);
  assert_int_equal(adr_transfer_stream_init(&src, dut, -1, &t, &err), EINVAL);
  assert_non_null(strstr(err.message, "prefetch -1"));
  assert_non_null(src.release);
  src.release(&src);
  pthread_mutex_destroy(&c.mu);
}

/* Arrays with buffer-less children (buffers == NULL) and absent validity
 * through the transfer stream to the device under test and back. */
static void test_transfer_no_buffers(void** state) {
  (void)state;
  struct adr_error err;
  const char* names[] = {"map-null-values", "map-null-keys", "validity-absent"};
  for (size_t n = 0; n < sizeof(names) / sizeof(names[0]); n++) {
    const struct test_case* tc = NULL;
    for (size_t i = 0; i < test_case_count; i++)
      if (strcmp(test_cases[i].name, names[n]) == 0) tc = &test_cases[i];
    assert_non_null(tc);
    struct ArrowSchema schema, ref_schema;
    struct ArrowDeviceArray arrays[2], ref;
    tc->build(&schema, &arrays[0]);
    tc->build(&ref_schema, &arrays[1]);
    ref_schema.release(&ref_schema);
    tc->build(&ref_schema, &ref);
    struct ArrowDeviceArrayStream src, t;
    ASSERT_OK(adr_device_array_stream_from_arrays(&schema, arrays, 2, ARROW_DEVICE_CPU, &src, &err),
              &err);
    ASSERT_OK(adr_transfer_stream_init(&src, dut, 1, &t, &err), &err);
    for (int k = 0; k < 2; k++) {
      struct ArrowDeviceArray b, back;
      ASSERT_OK(adr_device_array_stream_next(&t, &b, &err), &err);
      assert_non_null(b.array.release);
      assert_int_equal(b.device_type, adr_device_type(dut));
      ASSERT_OK(adr_device_array_validate(&ref_schema, &b, ADR_VALIDATE_FULL, &err), &err);
      test_assert_equal(&ref_schema, &ref, &b);
      ASSERT_OK(adr_device_array_deep_copy(&ref_schema, &b, test_cpu(), NULL, &back, NULL, &err),
                &err);
      test_assert_equal(&ref_schema, &ref, &back);
      adr_device_array_release(&back);
      adr_device_array_release(&b);
    }
    struct ArrowDeviceArray end;
    ASSERT_OK(adr_device_array_stream_next(&t, &end, &err), &err);
    assert_null(end.array.release);
    t.release(&t);
    adr_device_array_release(&ref);
    ref_schema.release(&ref_schema);
  }
}

/* A NULL target is host memory: batches on the device under test come out
 * as CPU arrays, complete (no sync_event), equal to what went in. */
static void test_transfer_to_host(void** state) {
  (void)state;
  struct adr_error err;
  for (int prefetch = 0; prefetch <= 2; prefetch += 2) {
    struct ArrowSchema schema, ref_schema;
    struct ArrowDeviceArray ref, on_dev[3];
    ASSERT_OK(fixture_sample_table(1000, &ref_schema, &ref, &err), &err);
    assert_int_equal(ref.device_type, ARROW_DEVICE_CPU);
    for (int k = 0; k < 3; k++)
      ASSERT_OK(adr_device_array_deep_copy(&ref_schema, &ref, dut, NULL, &on_dev[k], NULL, &err),
                &err);
    ASSERT_OK(adr_schema_copy(&ref_schema, &schema, &err), &err);
    struct ArrowDeviceArrayStream src, t;
    ASSERT_OK(
        adr_device_array_stream_from_arrays(&schema, on_dev, 3, adr_device_type(dut), &src, &err),
        &err);
    ASSERT_OK(adr_transfer_stream_init(&src, NULL, prefetch, &t, &err), &err);
    assert_int_equal(t.device_type, ARROW_DEVICE_CPU);
    for (int k = 0; k < 3; k++) {
      struct ArrowDeviceArray b;
      ASSERT_OK(adr_device_array_stream_next(&t, &b, &err), &err);
      assert_non_null(b.array.release);
      assert_int_equal(b.device_type, ARROW_DEVICE_CPU);
      assert_int_equal(b.device_id, -1);
      assert_null(b.sync_event);
      test_assert_equal(&ref_schema, &ref, &b);
      adr_device_array_release(&b);
    }
    struct ArrowDeviceArray end;
    ASSERT_OK(adr_device_array_stream_next(&t, &end, &err), &err);
    assert_null(end.array.release);
    t.release(&t);
    adr_device_array_release(&ref);
    ref_schema.release(&ref_schema);
  }
}

int main(void) {
  struct adr_error err;
  if (adr_device_default(&dut, &err) != 0) {
    const char* req = getenv("ADR_ARRAY_REQUIRE");
    fprintf(stderr, "device under test unavailable: %s\n", err.message);
    return req && strcmp(req, "1") == 0 ? 1 : 77;
  }
  fprintf(stderr, "device under test: %s\n", adr_device_name(dut));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_from_arrays),
      cmocka_unit_test(test_from_arrays_errors_and_early_release),
      cmocka_unit_test(test_from_callback_error),
      cmocka_unit_test(test_consumer_checks_device_type),
      cmocka_unit_test(test_transfer_prefetch0),
      cmocka_unit_test(test_transfer_prefetch2),
      cmocka_unit_test(test_transfer_error_and_early_release),
      cmocka_unit_test(test_transfer_no_buffers),
      cmocka_unit_test(test_transfer_to_host),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
