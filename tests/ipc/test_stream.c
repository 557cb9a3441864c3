/* SPDX-License-Identifier: Apache-2.0
 *
 * adr_ipc_write_stream / adr_ipc_read_stream: every layout through a file,
 * several batches (whole and sliced) per stream, from the CPU and from the
 * device under test, read back onto the host and onto that device; a large
 * table through a pipe with the writer on its own thread; empty streams.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ipc_test.h"

static struct adr_device* g_dev;

static int memfd(void) {
  int fd = memfd_create("adr-ipc-test", 0);
  assert_true(fd >= 0);
  return fd;
}

#define N_SLICES 3
static const int64_t k_cuts[N_SLICES][2] = {{0, 0}, {1, 0}, {2, 1}};

/* Writes the slices of case c (from `src_dev`, NULL = CPU) to a file and
 * reads them onto `dst`. */
static void file_roundtrip(const struct test_case* c, struct adr_device* src_dev,
                           struct adr_device* dst) {
  struct adr_error err;
  struct ArrowSchema schema;
  struct ArrowDeviceArray owner;
  bool wrapped;
  ipc_test_build(c, &schema, &owner, &wrapped);
  struct ArrowDeviceArray batches[N_SLICES], expect[N_SLICES];
  int64_t n = 0;
  for (int i = 0; i < N_SLICES; i++) {
    if (owner.array.length < k_cuts[i][0] + k_cuts[i][1]) continue;
    ipc_test_view(&owner, wrapped, k_cuts[i][0], k_cuts[i][1], &expect[n]);
    if (src_dev != NULL)
      ASSERT_OK(
          adr_device_array_deep_copy(&schema, &expect[n], src_dev, NULL, &batches[n], NULL, &err),
          &err);
    else
      ipc_test_view(&owner, wrapped, k_cuts[i][0], k_cuts[i][1], &batches[n]);
    n++;
  }
  struct ArrowSchema s_copy;
  ASSERT_OK(adr_schema_copy(&schema, &s_copy, &err), &err);
  struct ArrowDeviceArrayStream in;
  ArrowDeviceType t = src_dev ? adr_device_type(src_dev) : ARROW_DEVICE_CPU;
  ASSERT_OK(adr_device_array_stream_from_arrays(&s_copy, batches, (size_t)n, t, &in, &err), &err);
  int fd = memfd();
  struct adr_ipc_stream_stats stats = {.struct_size = sizeof(stats)};
  int st = adr_ipc_write_stream(fd, &in, NULL, &stats, &err);
  if (st) fail_msg("%s: write: %s", c->name, err.message);
  assert_null(in.release);
  assert_int_equal(stats.batches, n);
  assert_int_equal(lseek(fd, 0, SEEK_END), stats.bytes);
  assert_int_equal(lseek(fd, 0, SEEK_SET), 0);

  struct ArrowDeviceArrayStream out;
  st = adr_ipc_read_stream(fd, dst, &out, &err);
  if (st) fail_msg("%s: read: %s", c->name, err.message);
  assert_int_equal(out.device_type, dst ? adr_device_type(dst) : ARROW_DEVICE_CPU);
  struct ArrowSchema got_schema;
  ASSERT_OK(adr_device_array_stream_get_schema(&out, &got_schema, &err), &err);
  assert_int_equal(got_schema.n_children, schema.n_children);
  for (int64_t i = 0;; i++) {
    struct ArrowDeviceArray b;
    st = adr_device_array_stream_next(&out, &b, &err);
    if (st) fail_msg("%s: batch %lld: %s", c->name, (long long)i, err.message);
    if (b.array.release == NULL) {
      assert_int_equal(i, n);
      break;
    }
    assert_true(i < n);
    bool eq = false;
    struct adr_error diff;
    ASSERT_OK(adr_device_array_equal(&schema, &expect[i], &b, &eq, &diff, &err), &err);
    if (!eq) fail_msg("%s: batch %lld differs: %s", c->name, (long long)i, diff.message);
    adr_device_array_release(&b);
  }
  got_schema.release(&got_schema);
  out.release(&out);
  close(fd);
  for (int64_t i = 0; i < n; i++) adr_device_array_release(&expect[i]);
  adr_device_array_release(&owner);
  schema.release(&schema);
}

static void test_file_every_layout(void** state) {
  (void)state;
  for (size_t i = 0; i < test_case_count; i++) {
    file_roundtrip(&test_cases[i], NULL, NULL);
    if (g_dev != NULL) {
      file_roundtrip(&test_cases[i], NULL, g_dev);
      file_roundtrip(&test_cases[i], g_dev, NULL);
      file_roundtrip(&test_cases[i], g_dev, g_dev);
    }
  }
}

struct writer {
  int fd;
  struct ArrowDeviceArrayStream stream;
  int status;
  struct adr_error err;
  struct adr_ipc_stream_stats stats;
};

static void* writer_main(void* arg) {
  struct writer* w = arg;
  w->stats.struct_size = sizeof(w->stats);
  w->status = adr_ipc_write_stream(w->fd, &w->stream, NULL, &w->stats, &w->err);
  close(w->fd);
  return NULL;
}

/* The sample table in 4 batches through a pipe (the writer blocks on the
 * pipe while the reader consumes). */
static void test_pipe(void** state) {
  (void)state;
  struct adr_error err;
  const int64_t rows = 20000;
  struct ArrowSchema schema;
  struct ArrowDeviceArray table;
  ASSERT_OK(fixture_sample_table(rows, &schema, &table, &err), &err);
  struct ArrowDeviceArray batches[4];
  for (int i = 0; i < 4; i++) {
    struct ArrowDeviceArray v;
    ipc_test_view(&table, false, rows / 4 * i, rows - rows / 4 * (i + 1), &v);
    if (g_dev != NULL) {
      ASSERT_OK(adr_device_array_deep_copy(&schema, &v, g_dev, NULL, &batches[i], NULL, &err),
                &err);
      adr_device_array_release(&v);
    } else {
      batches[i] = v;
    }
  }
  int p[2];
  assert_int_equal(pipe(p), 0);
  struct writer w = {.fd = p[1]};
  struct ArrowSchema s_copy;
  ASSERT_OK(adr_schema_copy(&schema, &s_copy, &err), &err);
  ArrowDeviceType t = g_dev ? adr_device_type(g_dev) : ARROW_DEVICE_CPU;
  ASSERT_OK(adr_device_array_stream_from_arrays(&s_copy, batches, 4, t, &w.stream, &err), &err);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, writer_main, &w), 0);
  struct ArrowDeviceArrayStream out;
  ASSERT_OK(adr_ipc_read_stream(p[0], g_dev, &out, &err), &err);
  int64_t seen = 0;
  for (int i = 0;; i++) {
    struct ArrowDeviceArray b;
    ASSERT_OK(adr_device_array_stream_next(&out, &b, &err), &err);
    if (b.array.release == NULL) break;
    struct ArrowDeviceArray v;
    ipc_test_view(&table, false, seen, rows - seen - b.array.length, &v);
    bool eq = false;
    struct adr_error diff;
    ASSERT_OK(adr_device_array_equal(&schema, &v, &b, &eq, &diff, &err), &err);
    if (!eq) fail_msg("batch %d differs: %s", i, diff.message);
    seen += b.array.length;
    adr_device_array_release(&v);
    adr_device_array_release(&b);
  }
  out.release(&out);
  pthread_join(th, NULL);
  close(p[0]);
  if (w.status) fail_msg("writer: %s", w.err.message);
  assert_int_equal(seen, rows);
  assert_int_equal(w.stats.rows, rows);
  assert_int_equal(w.stats.batches, 4);
  adr_device_array_release(&table);
  schema.release(&schema);
}

/* A stream with a schema and no batch; and a file holding nothing. */
static void test_empty(void** state) {
  (void)state;
  struct adr_error err;
  struct ArrowSchema schema, s_copy;
  struct ArrowDeviceArray table;
  ASSERT_OK(fixture_sample_table(3, &schema, &table, &err), &err);
  ASSERT_OK(adr_schema_copy(&schema, &s_copy, &err), &err);
  struct ArrowDeviceArrayStream in, out;
  ASSERT_OK(adr_device_array_stream_from_arrays(&s_copy, NULL, 0, ARROW_DEVICE_CPU, &in, &err),
            &err);
  int fd = memfd();
  ASSERT_OK(adr_ipc_write_stream(fd, &in, NULL, NULL, &err), &err);
  lseek(fd, 0, SEEK_SET);
  ASSERT_OK(adr_ipc_read_stream(fd, g_dev, &out, &err), &err);
  struct ArrowDeviceArray b;
  ASSERT_OK(adr_device_array_stream_next(&out, &b, &err), &err);
  assert_null(b.array.release);
  ASSERT_OK(adr_device_array_stream_next(&out, &b, &err), &err);
  assert_null(b.array.release);
  out.release(&out);
  close(fd);

  fd = memfd();
  int st = adr_ipc_read_stream(fd, NULL, &out, &err);
  assert_int_equal(st, EINVAL);
  assert_non_null(strstr(err.message, "empty"));
  close(fd);
  adr_device_array_release(&table);
  schema.release(&schema);
}

/* One batch of struct<d: dictionary<int8, utf8>>: indices k % n_words
 * over the words given. */
static void dict_batch(const char* const* words, int n_words, struct ArrowDeviceArray* out) {
  struct ArrowArray a;
  test_node(&a, 1, 1, 6, 0, 0);
  struct ArrowArray* d = a.children[0];
  test_node(d, 2, 0, 6, 0, 0);
  int8_t* idx = test_buffer(d, 1, 6, NULL);
  for (int k = 0; k < 6; k++) idx[k] = (int8_t)(k % n_words);
  struct adr_error err;
  ASSERT_OK(adr_array_alloc_dictionary(d, &err), &err);
  test_strings(d->dictionary, words, n_words, 0, false);
  test_export(&a, out);
}

/* Each batch brings a different dictionary for the same field: the
 * reader replaces it, and each batch decodes with its own. */
static void test_dictionary_replacement(void** state) {
  (void)state;
  static const char* const w1[] = {"alpha", "beta", "gamma"};
  static const char* const w2[] = {"uno", "dos"};
  struct ArrowSchema schema, copy;
  test_schema(&schema, "+s", "", 0, 1);
  test_schema(schema.children[0], "c", "d", ARROW_FLAG_NULLABLE, 0);
  struct adr_error err;
  ASSERT_OK(adr_schema_alloc_dictionary(schema.children[0], &err), &err);
  test_schema(schema.children[0]->dictionary, "u", NULL, 0, 0);
  struct ArrowDeviceArray want[2], in_batches[2];
  dict_batch(w1, 3, &want[0]);
  dict_batch(w2, 2, &want[1]);
  dict_batch(w1, 3, &in_batches[0]);
  dict_batch(w2, 2, &in_batches[1]);
  struct adr_device* src = g_dev;
  if (src != NULL) {
    for (int i = 0; i < 2; i++) {
      struct ArrowDeviceArray d;
      ASSERT_OK(adr_device_array_deep_copy(&schema, &in_batches[i], src, NULL, &d, NULL, &err),
                &err);
      adr_device_array_release(&in_batches[i]);
      in_batches[i] = d;
    }
  }
  ASSERT_OK(adr_schema_copy(&schema, &copy, &err), &err);
  struct ArrowDeviceArrayStream in, out;
  ArrowDeviceType t = src ? adr_device_type(src) : ARROW_DEVICE_CPU;
  ASSERT_OK(adr_device_array_stream_from_arrays(&copy, in_batches, 2, t, &in, &err), &err);
  int fd = memfd();
  struct adr_ipc_stream_stats stats = {.struct_size = sizeof(stats)};
  ASSERT_OK(adr_ipc_write_stream(fd, &in, NULL, &stats, &err), &err);
  assert_int_equal(stats.messages, 1 + 2 * 2); /* schema, then dictionary + batch twice */
  lseek(fd, 0, SEEK_SET);
  ASSERT_OK(adr_ipc_read_stream(fd, g_dev, &out, &err), &err);
  for (int i = 0; i < 2; i++) {
    struct ArrowDeviceArray b;
    ASSERT_OK(adr_device_array_stream_next(&out, &b, &err), &err);
    assert_non_null(b.array.release);
    bool eq = false;
    struct adr_error diff;
    ASSERT_OK(adr_device_array_equal(&schema, &want[i], &b, &eq, &diff, &err), &err);
    if (!eq) fail_msg("batch %d: %s", i, diff.message);
    adr_device_array_release(&b);
  }
  out.release(&out);
  close(fd);
  for (int i = 0; i < 2; i++) adr_device_array_release(&want[i]);
  schema.release(&schema);
}

static void keep_release(struct ArrowArray* a) {
  a->release = NULL;
}

/* Batches that share one dictionary (slices of one CPU table): it is sent
 * once, before the first batch (the dictionary memo), and every batch
 * still decodes with it. A device source is staged batch by batch (fresh
 * copies), so there each batch brings its dictionary again. */
static void test_dictionary_sent_once(void** state) {
  (void)state;
  static const char* const w[] = {"alpha", "beta", "gamma", "delta"};
  struct ArrowSchema schema, copy;
  test_schema(&schema, "+s", "", 0, 1);
  test_schema(schema.children[0], "c", "d", ARROW_FLAG_NULLABLE, 0);
  struct adr_error err;
  ASSERT_OK(adr_schema_alloc_dictionary(schema.children[0], &err), &err);
  test_schema(schema.children[0]->dictionary, "u", NULL, 0, 0);
  struct ArrowDeviceArray table, views[3];
  dict_batch(w, 4, &table);
  for (int i = 0; i < 3; i++) {
    views[i] = table;
    views[i].array.offset = 2 * i;
    views[i].array.length = 2;
    views[i].array.release = keep_release; /* table keeps the data */
  }
  ASSERT_OK(adr_schema_copy(&schema, &copy, &err), &err);
  struct ArrowDeviceArrayStream in, out;
  ASSERT_OK(adr_device_array_stream_from_arrays(&copy, views, 3, ARROW_DEVICE_CPU, &in, &err),
            &err);
  int fd = memfd();
  struct adr_ipc_stream_stats stats = {.struct_size = sizeof(stats)};
  ASSERT_OK(adr_ipc_write_stream(fd, &in, NULL, &stats, &err), &err);
  assert_int_equal(stats.messages, 1 + 1 + 3); /* schema, dictionary, three batches */
  lseek(fd, 0, SEEK_SET);
  ASSERT_OK(adr_ipc_read_stream(fd, g_dev, &out, &err), &err);
  for (int i = 0; i < 3; i++) {
    struct ArrowDeviceArray b, want = table;
    want.array.offset = 2 * i;
    want.array.length = 2;
    ASSERT_OK(adr_device_array_stream_next(&out, &b, &err), &err);
    assert_non_null(b.array.release);
    bool eq = false;
    struct adr_error diff;
    ASSERT_OK(adr_device_array_equal(&schema, &want, &b, &eq, &diff, &err), &err);
    if (!eq) fail_msg("batch %d: %s", i, diff.message);
    adr_device_array_release(&b);
  }
  out.release(&out);
  close(fd);
  adr_device_array_release(&table);
  schema.release(&schema);
}

/* adr_ipc_dictionary_unchanged compares memory, not values: equal words
 * in other memory, another offset inside the dictionary or another device
 * make it false; bad arguments are EINVAL with *out false. */
static void test_dictionary_unchanged(void** state) {
  (void)state;
  static const char* const w[] = {"alpha", "beta", "gamma"};
  struct ArrowSchema schema;
  test_schema(&schema, "+s", "", 0, 1);
  test_schema(schema.children[0], "c", "d", ARROW_FLAG_NULLABLE, 0);
  struct adr_error err;
  ASSERT_OK(adr_schema_alloc_dictionary(schema.children[0], &err), &err);
  test_schema(schema.children[0]->dictionary, "u", NULL, 0, 0);
  struct ArrowDeviceArray a, b, view;
  dict_batch(w, 3, &a);
  dict_batch(w, 3, &b); /* the same words, other memory */
  view = a;
  view.array.offset = 1; /* the batch is sliced; its dictionary is not */
  view.array.length = 4;
  view.array.release = keep_release;
  bool same = false;
  ASSERT_OK(adr_ipc_dictionary_unchanged(&schema, &a, &view, 0, &same, &err), &err);
  assert_true(same);
  ASSERT_OK(adr_ipc_dictionary_unchanged(&schema, &a, &b, 0, &same, &err), &err);
  assert_false(same);
  struct ArrowArray* dict = a.array.children[0]->dictionary;
  dict->offset = 1;
  dict->length = 2;
  ASSERT_OK(adr_ipc_dictionary_unchanged(&schema, &a, &view, 0, &same, &err), &err);
  assert_true(same); /* one dictionary object */
  /* The same buffers at another offset: not the same dictionary. */
  struct ArrowArray column = *a.array.children[0], moved = *dict;
  struct ArrowArray* children[1] = {&column};
  moved.offset = 0;
  column.dictionary = &moved;
  view.array.children = children;
  ASSERT_OK(adr_ipc_dictionary_unchanged(&schema, &a, &view, 0, &same, &err), &err);
  assert_false(same);
  view = a;
  view.array.release = keep_release;
  view.device_type = ARROW_DEVICE_CUDA_HOST;
  ASSERT_OK(adr_ipc_dictionary_unchanged(&schema, &a, &view, 0, &same, &err), &err);
  assert_false(same);
  same = true;
  assert_int_equal(adr_ipc_dictionary_unchanged(&schema, &a, &a, 1, &same, &err), EINVAL);
  assert_false(same);
  assert_non_null(strstr(err.message, "no dictionary id 1"));
  assert_int_equal(adr_ipc_dictionary_unchanged(&schema, &a, &a, -1, &same, &err), EINVAL);
  assert_int_equal(adr_ipc_dictionary_unchanged(NULL, &a, &a, 0, &same, &err), EINVAL);
  assert_int_equal(adr_ipc_dictionary_unchanged(&schema, NULL, &a, 0, &same, &err), EINVAL);
  assert_int_equal(adr_ipc_dictionary_unchanged(&schema, &a, &a, 0, NULL, &err), EINVAL);
  struct ArrowDeviceArray released = a;
  released.array.release = NULL;
  assert_int_equal(adr_ipc_dictionary_unchanged(&schema, &a, &released, 0, &same, &err), EINVAL);
  assert_false(same);
  adr_device_array_release(&a);
  adr_device_array_release(&b);
  schema.release(&schema);
}

struct held {
  struct ArrowDeviceArray* b;
  int n;
};

static void* release_held(void* p) {
  struct held* h = p;
  for (int i = h->n - 1; i >= 0; i--) adr_device_array_release(&h->b[i]);
  return NULL;
}

/* Bodies of batches the application keeps: the reader recycles the body
 * of a released batch for the next message, so batches held while more
 * are read must keep their own, also after the stream is released, and
 * may be released on another thread (clean under ASan and TSan). Then
 * batches released one by one (each body reused for the next) of
 * different sizes. */
static void test_held_batches(void** state) {
  (void)state;
  struct adr_error err;
  struct ArrowSchema schema, copy;
  struct ArrowDeviceArray table;
  ASSERT_OK(fixture_sample_table(4000, &schema, &table, &err), &err);
  enum { N = 4 };
  /* Growing then shrinking slices: bodies larger and smaller than the
   * cached one. */
  const int64_t cut[N][2] = {{0, 100}, {100, 3000}, {3000, 3010}, {3010, 4000}};
  for (int round = 0; round < 2; round++) {
    struct ArrowDeviceArray views[N], want[N];
    for (int i = 0; i < N; i++) {
      views[i] = table;
      views[i].array.offset = cut[i][0];
      views[i].array.length = cut[i][1] - cut[i][0];
      views[i].array.release = keep_release;
      want[i] = views[i];
    }
    ASSERT_OK(adr_schema_copy(&schema, &copy, &err), &err);
    struct ArrowDeviceArrayStream in, out;
    ASSERT_OK(adr_device_array_stream_from_arrays(&copy, views, N, ARROW_DEVICE_CPU, &in, &err),
              &err);
    int fd = memfd();
    ASSERT_OK(adr_ipc_write_stream(fd, &in, NULL, NULL, &err), &err);
    lseek(fd, 0, SEEK_SET);
    ASSERT_OK(adr_ipc_read_stream(fd, NULL, &out, &err), &err);
    struct ArrowDeviceArray got[N];
    for (int i = 0; i < N; i++) {
      ASSERT_OK(adr_device_array_stream_next(&out, &got[i], &err), &err);
      assert_non_null(got[i].array.release);
      if (round == 1) {
        /* Released at once: the next message reuses its body. */
        bool eq = false;
        ASSERT_OK(adr_device_array_equal(&schema, &want[i], &got[i], &eq, NULL, &err), &err);
        assert_true(eq);
        adr_device_array_release(&got[i]);
      }
    }
    out.release(&out);
    close(fd);
    if (round == 0) {
      for (int i = 0; i < N; i++) {
        bool eq = false;
        ASSERT_OK(adr_device_array_equal(&schema, &want[i], &got[i], &eq, NULL, &err), &err);
        if (!eq) fail_msg("held batch %d differs", i);
      }
      struct held h = {got, N};
      pthread_t th;
      assert_int_equal(pthread_create(&th, NULL, release_held, &h), 0);
      pthread_join(th, NULL);
    }
  }
  adr_device_array_release(&table);
  schema.release(&schema);
}

/* The reader of the pipe is gone: EPIPE with the message index, and the
 * process lives on (no SIGPIPE). */
static void test_broken_pipe(void** state) {
  (void)state;
  struct adr_error err;
  struct ArrowSchema schema, s_copy;
  struct ArrowDeviceArray table;
  ASSERT_OK(fixture_sample_table(1000, &schema, &table, &err), &err);
  ASSERT_OK(adr_schema_copy(&schema, &s_copy, &err), &err);
  struct ArrowDeviceArrayStream in;
  ASSERT_OK(adr_device_array_stream_from_arrays(&s_copy, &table, 1, ARROW_DEVICE_CPU, &in, &err),
            &err);
  int p[2];
  assert_int_equal(pipe(p), 0);
  close(p[0]);
  int st = adr_ipc_write_stream(p[1], &in, NULL, NULL, &err);
  assert_int_equal(st, EPIPE);
  assert_non_null(strstr(err.message, "message 0 (schema)"));
  assert_null(in.release);
  close(p[1]);
  schema.release(&schema);
}

int main(void) {
  g_dev = ipc_test_device();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_file_every_layout),
      cmocka_unit_test(test_pipe),
      cmocka_unit_test(test_empty),
      cmocka_unit_test(test_broken_pipe),
      cmocka_unit_test(test_dictionary_replacement),
      cmocka_unit_test(test_dictionary_sent_once),
      cmocka_unit_test(test_dictionary_unchanged),
      cmocka_unit_test(test_held_batches),
  };
  return cmocka_run_group_tests_name("ipc-stream", tests, NULL, NULL);
}
