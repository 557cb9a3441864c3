/* SPDX-License-Identifier: Apache-2.0
 *
 * Delta DictionaryBatches (docs/ipc.md, "Dictionaries"): the writer with
 * options.dictionary_deltas sends only the new values of a dictionary that
 * starts with the previous one's; the reader appends a delta to the
 * dictionary it holds (on the host and on the device under test). Every
 * layout of the array catalogue serves as dictionary values: batch 0 uses
 * the first half of the case's array, batch 1 all of it (a delta), batch 2
 * the array without its first element (a replacement unless its values
 * happen to extend the previous ones). Batches read before a delta keep
 * the dictionary they were assembled with.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ipc_test.h"

static struct adr_device* g_dev;
static int g_cases, g_deltas; /* round trips run, deltas written */

static void keep_release(struct ArrowArray* a) {
  a->release = NULL;
}

static bool has_dictionary(const struct ArrowSchema* s) {
  if (s->dictionary != NULL) return true;
  for (int64_t i = 0; i < s->n_children; i++)
    if (has_dictionary(s->children[i])) return true;
  return false;
}

/* struct<d: dictionary<int32, values' type>> */
static void delta_schema(const struct ArrowSchema* values, struct ArrowSchema* out) {
  struct adr_error err;
  test_schema(out, "+s", "", 0, 1);
  test_schema(out->children[0], "i", "d", ARROW_FLAG_NULLABLE, 0);
  ASSERT_OK(adr_schema_alloc_dictionary(out->children[0], &err), &err);
  ASSERT_OK(adr_schema_copy(values, out->children[0]->dictionary, &err), &err);
}

/* A batch whose dictionary is a view of values [from, from + n) (values
 * must outlive it) and whose indices are 0 .. n - 1, so every dictionary
 * value is compared when batches are. */
static void delta_batch(const struct ArrowArray* values, int64_t from, int64_t n,
                        struct ArrowDeviceArray* out) {
  struct adr_error err;
  struct ArrowArray a;
  test_node(&a, 1, 1, n, 0, 0);
  struct ArrowArray* d = a.children[0];
  test_node(d, 2, 0, n, 0, 0);
  int32_t* idx = test_buffer(d, 1, (size_t)(n ? n : 1) * 4, NULL);
  for (int64_t k = 0; k < n; k++) idx[k] = (int32_t)k;
  ASSERT_OK(adr_array_alloc_dictionary(d, &err), &err);
  *d->dictionary = *values;
  d->dictionary->offset = values->offset + from;
  d->dictionary->length = n;
  d->dictionary->null_count = -1;
  d->dictionary->release = keep_release;
  test_export(&a, out);
}

/* Message-level walk of a stream file: dictionary batches and deltas. */
static void count_dictionaries(int fd, int64_t* dicts, int64_t* deltas) {
  off_t size = lseek(fd, 0, SEEK_END);
  assert_true(size > 0);
  uint8_t* data = malloc((size_t)size);
  assert_int_equal(pread(fd, data, (size_t)size, 0), size);
  *dicts = *deltas = 0;
  struct adr_error err;
  for (off_t at = 0, index = 0; at < size; index++) {
    int64_t meta;
    ASSERT_OK(adr_ipc_decode_prefix(data + at, index, &meta, &err), &err);
    if (meta == 0) break;
    struct adr_ipc_decoded m;
    ASSERT_OK(adr_ipc_decode_message(data + at + 8, (size_t)meta, index, &m, &err), &err);
    if (m.type == ADR_IPC_MESSAGE_DICTIONARY_BATCH) {
      (*dicts)++;
      if (m.is_delta) (*deltas)++;
    }
    at += 8 + meta + m.body_size;
    adr_ipc_decoded_release(&m);
  }
  free(data);
}

#define N_BATCHES 3

/* Case c's array as dictionary values, written from src_dev (NULL: the
 * CPU) with deltas and read onto dst. */
static void delta_roundtrip(const struct test_case* c, struct adr_device* src_dev,
                            struct adr_device* dst) {
  struct adr_error err;
  struct ArrowSchema values_schema;
  struct ArrowDeviceArray values;
  c->build(&values_schema, &values);
  int64_t len = values.array.length;
  if (has_dictionary(&values_schema) || len < 2) {
    adr_device_array_release(&values);
    values_schema.release(&values_schema);
    return;
  }
  struct ArrowSchema schema;
  delta_schema(&values_schema, &schema);
  const int64_t ranges[N_BATCHES][2] = {{0, len / 2}, {0, len}, {1, len - 1}};
  struct ArrowDeviceArray want[N_BATCHES], in[N_BATCHES];
  for (int i = 0; i < N_BATCHES; i++) {
    delta_batch(&values.array, ranges[i][0], ranges[i][1], &want[i]);
    if (src_dev != NULL)
      ASSERT_OK(adr_device_array_deep_copy(&schema, &want[i], src_dev, NULL, &in[i], NULL, &err),
                &err);
    else
      delta_batch(&values.array, ranges[i][0], ranges[i][1], &in[i]);
  }
  struct ArrowSchema copy;
  ASSERT_OK(adr_schema_copy(&schema, &copy, &err), &err);
  struct ArrowDeviceArrayStream stream;
  ArrowDeviceType t = src_dev ? adr_device_type(src_dev) : ARROW_DEVICE_CPU;
  ASSERT_OK(adr_device_array_stream_from_arrays(&copy, in, N_BATCHES, t, &stream, &err), &err);
  int fd = memfd_create("adr-delta-test", 0);
  assert_true(fd >= 0);
  struct adr_ipc_write_options opts = {
      .struct_size = sizeof(opts), .prefetch = 1, .dictionary_deltas = true};
  int st = adr_ipc_write_stream(fd, &stream, &opts, NULL, &err);
  if (st) fail_msg("%s: write: %s", c->name, err.message);

  /* Batch 1 extends batch 0's dictionary: a delta, whatever the source. */
  int64_t dicts, deltas;
  count_dictionaries(fd, &dicts, &deltas);
  assert_int_equal(dicts, N_BATCHES);
  if (deltas < 1 || deltas > 2) fail_msg("%s: %lld deltas", c->name, (long long)deltas);
  g_cases++;
  g_deltas += (int)deltas;

  assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
  struct ArrowDeviceArrayStream out;
  st = adr_ipc_read_stream(fd, dst, &out, &err);
  if (st) fail_msg("%s: read: %s", c->name, err.message);
  /* All batches are held until the end: each keeps its own dictionary. */
  struct ArrowDeviceArray got[N_BATCHES];
  for (int i = 0; i < N_BATCHES; i++) {
    st = adr_device_array_stream_next(&out, &got[i], &err);
    if (st) fail_msg("%s: batch %d: %s", c->name, i, err.message);
    assert_non_null(got[i].array.release);
    assert_int_equal(got[i].array.children[0]->dictionary->length, ranges[i][1]);
  }
  struct ArrowDeviceArray end;
  ASSERT_OK(adr_device_array_stream_next(&out, &end, &err), &err);
  assert_null(end.array.release);
  out.release(&out);
  for (int i = 0; i < N_BATCHES; i++) {
    bool eq = false;
    struct adr_error diff;
    ASSERT_OK(adr_device_array_equal(&schema, &want[i], &got[i], &eq, &diff, &err), &err);
    if (!eq) fail_msg("%s: batch %d differs: %s", c->name, i, diff.message);
    adr_device_array_release(&got[i]);
    adr_device_array_release(&want[i]);
  }
  close(fd);
  schema.release(&schema);
  adr_device_array_release(&values);
  values_schema.release(&values_schema);
}

static void test_every_layout(void** state) {
  (void)state;
  for (size_t i = 0; i < test_case_count; i++) {
    delta_roundtrip(&test_cases[i], NULL, NULL);
    if (g_dev != NULL) {
      delta_roundtrip(&test_cases[i], NULL, g_dev);
      delta_roundtrip(&test_cases[i], g_dev, g_dev);
    }
  }
  print_message("%d round trips of %zu layouts, %d delta batches\n", g_cases, test_case_count,
                g_deltas);
  assert_true(g_cases >= (int)test_case_count / 2);
}

/* Strings, by hand: deltas of two and zero values, then a replacement;
 * the writer's message counts and the decoded words. */
static void test_strings_deltas(void** state) {
  (void)state;
  static const char* const words[] = {"alpha", "beta", "gamma", NULL, "epsilon", "zeta"};
  struct adr_error err;
  struct ArrowSchema values_schema, schema, copy;
  test_schema(&values_schema, "u", NULL, ARROW_FLAG_NULLABLE, 0);
  struct ArrowArray values, same;
  test_strings(&values, words, 6, 0, false);
  test_strings(&same, words, 6, 0, false);
  delta_schema(&values_schema, &schema);
  /* [0,3) -> [0,5): a delta of 2 -> the same values in other memory: an
   * empty delta -> [1,6): a replacement. */
  const int64_t ranges[4][2] = {{0, 3}, {0, 5}, {0, 5}, {1, 5}};
  const struct ArrowArray* src[4] = {&values, &values, &same, &values};
  struct ArrowDeviceArray want[4], in[4];
  for (int i = 0; i < 4; i++) {
    delta_batch(src[i], ranges[i][0], ranges[i][1], &want[i]);
    delta_batch(src[i], ranges[i][0], ranges[i][1], &in[i]);
  }
  ASSERT_OK(adr_schema_copy(&schema, &copy, &err), &err);
  struct ArrowDeviceArrayStream stream, out;
  ASSERT_OK(adr_device_array_stream_from_arrays(&copy, in, 4, ARROW_DEVICE_CPU, &stream, &err),
            &err);
  int fd = memfd_create("adr-delta-test", 0);
  struct adr_ipc_write_options opts = {.struct_size = sizeof(opts), .dictionary_deltas = true};
  struct adr_ipc_stream_stats stats = {.struct_size = sizeof(stats)};
  ASSERT_OK(adr_ipc_write_stream(fd, &stream, &opts, &stats, &err), &err);
  int64_t dicts, deltas;
  count_dictionaries(fd, &dicts, &deltas);
  assert_int_equal(dicts, 4);
  assert_int_equal(deltas, 2);
  assert_int_equal(stats.messages, 1 + 4 + 4);
  lseek(fd, 0, SEEK_SET);
  ASSERT_OK(adr_ipc_read_stream(fd, g_dev, &out, &err), &err);
  for (int i = 0; i < 4; i++) {
    struct ArrowDeviceArray b;
    ASSERT_OK(adr_device_array_stream_next(&out, &b, &err), &err);
    bool eq = false;
    struct adr_error diff;
    ASSERT_OK(adr_device_array_equal(&schema, &want[i], &b, &eq, &diff, &err), &err);
    if (!eq) fail_msg("batch %d: %s", i, diff.message);
    adr_device_array_release(&b);
    adr_device_array_release(&want[i]);
  }
  out.release(&out);

  /* Without the option: replacements only. */
  for (int i = 0; i < 4; i++) delta_batch(src[i], ranges[i][0], ranges[i][1], &in[i]);
  ASSERT_OK(adr_schema_copy(&schema, &copy, &err), &err);
  ASSERT_OK(adr_device_array_stream_from_arrays(&copy, in, 4, ARROW_DEVICE_CPU, &stream, &err),
            &err);
  assert_int_equal(ftruncate(fd, 0), 0);
  lseek(fd, 0, SEEK_SET);
  ASSERT_OK(adr_ipc_write_stream(fd, &stream, NULL, NULL, &err), &err);
  count_dictionaries(fd, &dicts, &deltas);
  assert_int_equal(dicts, 4);
  assert_int_equal(deltas, 0);
  close(fd);
  values.release(&values);
  same.release(&same);
  values_schema.release(&values_schema);
  schema.release(&schema);
}

/* Message level: a delta before any dictionary of its id is refused; the
 * encoder checks its range. */
static void test_delta_errors(void** state) {
  (void)state;
  static const char* const words[] = {"a", "b", "c"};
  struct adr_error err;
  struct ArrowSchema values_schema, schema;
  test_schema(&values_schema, "u", NULL, 0, 0);
  struct ArrowArray values;
  test_strings(&values, words, 3, 0, false);
  delta_schema(&values_schema, &schema);
  struct ArrowDeviceArray batch;
  delta_batch(&values, 0, 3, &batch);

  struct adr_ipc_message m;
  assert_int_equal(adr_ipc_encode_dictionary_delta(&schema, &batch, 0, 4, &m, &err), EINVAL);
  assert_non_null(strstr(err.message, "delta start 4"));
  assert_int_equal(adr_ipc_encode_dictionary_delta(&schema, &batch, 1, 0, &m, &err), EINVAL);
  ASSERT_OK(adr_ipc_encode_dictionary_delta(&schema, &batch, 0, 1, &m, &err), &err);
  assert_int_equal(m.length, 2);

  struct adr_ipc_reader* r;
  ASSERT_OK(adr_ipc_reader_create(g_dev, NULL, &r, &err), &err);
  struct adr_ipc_message sm;
  struct adr_ipc_decoded d;
  ASSERT_OK(adr_ipc_encode_schema(&schema, &sm, &err), &err);
  ASSERT_OK(adr_ipc_decode_message(sm.metadata + 8, (size_t)sm.metadata_size - 8, 0, &d, &err),
            &err);
  ASSERT_OK(adr_ipc_reader_set_schema(r, &d, &err), &err);
  adr_ipc_decoded_release(&d);
  adr_ipc_message_release(&sm);

  ASSERT_OK(adr_ipc_decode_message(m.metadata + 8, (size_t)m.metadata_size - 8, 1, &d, &err), &err);
  assert_true(d.is_delta);
  void* body = NULL;
  struct bytes b = {0};
  ipc_test_append_message(&b, &m);
  if (g_dev == NULL) {
    body = aligned_alloc(64, (size_t)d.body_alloc_size);
    memcpy(body, b.data + m.metadata_size, (size_t)d.body_size);
  } else {
    ASSERT_OK(adr_alloc(g_dev, (size_t)d.body_alloc_size, 64, NULL, &body, &err), &err);
    ASSERT_OK(
        adr_copy(g_dev, body, NULL, b.data + m.metadata_size, (size_t)d.body_size, NULL, &err),
        &err);
  }
  assert_int_equal(adr_ipc_reader_consume(r, &d, body, NULL, &err), EINVAL);
  assert_non_null(strstr(err.message, "message 1 (dictionary batch)"));
  assert_non_null(strstr(err.message, "delta for dictionary id 0, which has not been sent"));
  adr_ipc_decoded_release(&d);
  adr_ipc_message_release(&m);
  bytes_free(&b);
  adr_ipc_reader_destroy(r);
  adr_device_array_release(&batch);
  values.release(&values);
  values_schema.release(&values_schema);
  schema.release(&schema);
}

int main(void) {
  g_dev = ipc_test_device();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_strings_deltas),
      cmocka_unit_test(test_delta_errors),
      cmocka_unit_test(test_every_layout),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
