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

/* The encoder's messages are adr_ipc_encode_record_batch's, byte for byte,
 * whether it builds the metadata or patches the previous batch's. */
static void assert_same_message(const char* name, const struct adr_ipc_message* want,
                                const struct adr_ipc_message* got) {
  if (got->metadata_size != want->metadata_size ||
      memcmp(got->metadata, want->metadata, (size_t)want->metadata_size) != 0)
    fail_msg("%s: the encoder's metadata differs", name);
  assert_int_equal(got->type, want->type);
  assert_int_equal(got->body_size, want->body_size);
  assert_int_equal(got->length, want->length);
  assert_int_equal(got->n_buffers, want->n_buffers);
  for (int64_t i = 0; i < want->n_buffers; i++) {
    assert_int_equal(got->buffers[i].size, want->buffers[i].size);
    assert_int_equal(got->buffers[i].body_offset, want->buffers[i].body_offset);
    assert_ptr_equal(got->buffers[i].device, want->buffers[i].device);
    if (want->buffers[i].device != NULL || want->buffers[i].data == NULL)
      assert_ptr_equal(got->buffers[i].data, want->buffers[i].data);
    else if (want->buffers[i].size > 0)
      assert_memory_equal(got->buffers[i].data, want->buffers[i].data,
                          (size_t)want->buffers[i].size);
  }
}

static void test_encoder(void** state) {
  (void)state;
  /* Slices in an order that changes the shape (lengths 0 and not) and
   * repeats it (the patched copy). */
  static const int64_t cuts[][2] = {{0, 0}, {0, 0}, {1, 0}, {3, 2}, {0, 1}, {0, 0}};
  for (size_t i = 0; i < test_case_count; i++) {
    struct ArrowSchema schema;
    struct ArrowDeviceArray owner;
    bool wrapped;
    ipc_test_build(&test_cases[i], &schema, &owner, &wrapped);
    struct adr_ipc_encoder* enc = NULL;
    struct adr_error err;
    ASSERT_OK(adr_ipc_encoder_create(&schema, &enc, &err), &err);
    for (size_t k = 0; k < sizeof(cuts) / sizeof(cuts[0]); k++) {
      int64_t front = cuts[k][0], back = cuts[k][1];
      if (owner.array.length < front + back) continue;
      struct ArrowDeviceArray a;
      ipc_test_view(&owner, wrapped, front, back, &a);
      struct ArrowDeviceArray variants[2] = {a};
      int n = 1;
      if (g_dev != NULL) {
        ASSERT_OK(adr_device_array_deep_copy(&schema, &a, g_dev, NULL, &variants[1], NULL, &err),
                  &err);
        n = 2;
      }
      for (int v = 0; v < n; v++) {
        struct adr_ipc_message want, got;
        ASSERT_OK(adr_ipc_encode_record_batch(&schema, &variants[v], &want, &err), &err);
        ASSERT_OK(adr_ipc_encoder_record_batch(enc, &variants[v], &got, &err), &err);
        char name[96];
        snprintf(name, sizeof(name), "%s[+%lld,-%lld]%s", test_cases[i].name, (long long)front,
                 (long long)back, v ? " (device)" : "");
        assert_same_message(name, &want, &got);
        adr_ipc_message_release(&want);
        adr_ipc_message_release(&got);
      }
      if (n == 2) adr_device_array_release(&variants[1]);
      adr_device_array_release(&a);
    }
    adr_ipc_encoder_destroy(enc);
    adr_device_array_release(&owner);
    schema.release(&schema);
  }
  struct adr_ipc_encoder* enc = NULL;
  struct adr_error err;
  assert_int_equal(adr_ipc_encoder_create(NULL, &enc, &err), EINVAL);
  assert_null(enc);
  adr_ipc_encoder_destroy(NULL);
}

/* A host reader with recycle_bodies: the body of a released batch is
 * handed out again for the next message of that size; one still in use
 * is not. */
static void test_recycled_bodies(void** state) {
  (void)state;
  const struct test_case* c = &test_cases[0];
  struct ArrowSchema schema;
  struct ArrowDeviceArray owner;
  bool wrapped;
  ipc_test_build(c, &schema, &owner, &wrapped);
  struct ArrowDeviceArray batch;
  ipc_test_view(&owner, wrapped, 0, 0, &batch);
  struct adr_error err;
  struct adr_ipc_message sm, bm;
  ASSERT_OK(adr_ipc_encode_schema(&schema, &sm, &err), &err);
  ASSERT_OK(adr_ipc_encode_record_batch(&schema, &batch, &bm, &err), &err);
  struct bytes body = {0};
  ipc_test_append_message(&body, &bm);
  struct adr_ipc_decoded sd, d;
  ASSERT_OK(adr_ipc_decode_message(sm.metadata + 8, (size_t)sm.metadata_size - 8, 0, &sd, &err),
            &err);
  ASSERT_OK(adr_ipc_decode_message(bm.metadata + 8, (size_t)bm.metadata_size - 8, 1, &d, &err),
            &err);
  assert_true(d.body_size > 0);
  struct adr_ipc_reader_options o = {.struct_size = sizeof(o), .validate_full = true};
  o.recycle_bodies = true;
  struct adr_ipc_reader* r;
  ASSERT_OK(adr_ipc_reader_create(NULL, &o, &r, &err), &err);
  ASSERT_OK(adr_ipc_reader_set_schema(r, &sd, &err), &err);
  void* b1 = NULL;
  void* b2 = NULL;
  void* b3 = NULL;
  ASSERT_OK(adr_ipc_reader_alloc_body(r, &d, &b1, &err), &err);
  memcpy(b1, body.data + bm.metadata_size, (size_t)d.body_size);
  struct ArrowDeviceArray out1, out2;
  ASSERT_OK(adr_ipc_reader_consume(r, &d, b1, &out1, &err), &err);
  /* b1 is in use: another body. */
  ASSERT_OK(adr_ipc_reader_alloc_body(r, &d, &b2, &err), &err);
  assert_ptr_not_equal(b2, b1);
  memcpy(b2, body.data + bm.metadata_size, (size_t)d.body_size);
  ASSERT_OK(adr_ipc_reader_consume(r, &d, b2, &out2, &err), &err);
  bool eq = false;
  struct adr_error diff;
  ASSERT_OK(adr_device_array_equal(&schema, &batch, &out2, &eq, &diff, &err), &err);
  assert_true(eq);
  adr_device_array_release(&out1);
  /* Released: b1 comes back; unconsumed, it goes back with free_body. */
  ASSERT_OK(adr_ipc_reader_alloc_body(r, &d, &b3, &err), &err);
  assert_ptr_equal(b3, b1);
  adr_ipc_reader_free_body(r, &d, b3);
  adr_device_array_release(&out2);
  adr_ipc_reader_destroy(r);
  adr_ipc_decoded_release(&sd);
  adr_ipc_decoded_release(&d);
  bytes_free(&body);
  adr_ipc_message_release(&sm);
  adr_ipc_message_release(&bm);
  adr_device_array_release(&batch);
  adr_device_array_release(&owner);
  schema.release(&schema);
}

int main(void) {
  g_dev = ipc_test_device();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_layout),
      cmocka_unit_test(test_every_layout_sliced),
      cmocka_unit_test(test_encoder),
      cmocka_unit_test(test_recycled_bodies),
  };
  return cmocka_run_group_tests_name("ipc-roundtrip", tests, NULL, NULL);
}
