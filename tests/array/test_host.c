/* SPDX-License-Identifier: Apache-2.0
 *
 * Arrays in host memory (a NULL device; docs/arrays.md, "Host memory"):
 * nodes made with adr_array_init(NULL, ...), their export as CPU arrays
 * (after a stream's downloads into them), deep copies from and to host
 * memory through the device under test (ADR_DEVICE), and the refusals.
 *
 * With ADR_ARRAY_NO_CPU=1 (registered with ADR_BACKENDS naming only the
 * backend under test) the last case checks that the cpu backend was never
 * loaded: neither in the backend table nor mapped (/proc/self/maps).
 *
 * Without the device: exit 77 (SKIP), or fail when ADR_ARRAY_REQUIRE=1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array_test.h"

static struct adr_device* dut;

/* An int64 array of n values base + k in host memory, exported. */
static void host_int64s(int64_t n, int64_t base, struct ArrowDeviceArray* out) {
  struct adr_error err;
  struct ArrowArray a;
  ASSERT_OK(adr_array_init(NULL, 2, 0, &a, &err), &err);
  int64_t* v = NULL;
  ASSERT_OK(adr_array_alloc_buffer(&a, 1, (size_t)n * 8, NULL, (void**)&v, &err), &err);
  assert_int_equal((uintptr_t)v % 64, 0);
  for (int64_t k = 0; k < n; k++) v[k] = base + k;
  a.length = n;
  ASSERT_OK(adr_device_array_init(NULL, &a, NULL, out, &err), &err);
  assert_null(a.release); /* moved */
}

static void test_host_nodes(void** state) {
  (void)state;
  struct adr_error err;
  struct ArrowArray a;
  ASSERT_OK(adr_array_init(NULL, 2, 0, &a, &err), &err);
  /* A host node's buffers are allocated without a stream. */
  struct adr_stream* s = adr_stream_default(dut);
  void* p = NULL;
  assert_int_equal(adr_array_alloc_buffer(&a, 1, 64, s, &p, &err), EINVAL);
  assert_non_null(strstr(err.message, "host memory"));
  assert_null(p);
  /* Adopted host memory is freed with free() by the release. */
  uint8_t* validity = aligned_alloc(64, 64);
  assert_non_null(validity);
  memset(validity, 0xFF, 64);
  validity[0] = 0xFE; /* element 0 is null */
  ASSERT_OK(adr_array_adopt_buffer(&a, 0, validity, 64, &err), &err);
  int32_t* v = NULL;
  ASSERT_OK(adr_array_alloc_buffer(&a, 1, 100 * 4, NULL, (void**)&v, &err), &err);
  for (int k = 0; k < 100; k++) v[k] = k * 7;
  a.length = 100;
  a.null_count = 1;
  struct ArrowDeviceArray out;
  memset(&out, 0xAB, sizeof(out));
  ASSERT_OK(adr_device_array_init(NULL, &a, NULL, &out, &err), &err);
  assert_int_equal(out.device_type, ARROW_DEVICE_CPU);
  assert_int_equal(out.device_id, -1);
  assert_null(out.sync_event);
  for (int i = 0; i < 3; i++) assert_int_equal(out.reserved[i], 0);
  struct ArrowSchema schema;
  test_schema(&schema, "i", NULL, ARROW_FLAG_NULLABLE, 0);
  ASSERT_OK(adr_device_array_validate(&schema, &out, ADR_VALIDATE_FULL, &err), &err);

  /* Host -> device -> host, NULL stream and a created stream. */
  struct adr_stream* cs;
  ASSERT_OK(adr_stream_create(dut, &cs, &err), &err);
  struct ArrowDeviceArray on_dev, back;
  ASSERT_OK(adr_device_array_deep_copy(&schema, &out, dut, cs, &on_dev, NULL, &err), &err);
  ASSERT_OK(adr_device_array_deep_copy(&schema, &on_dev, NULL, NULL, &back, NULL, &err), &err);
  assert_int_equal(back.device_type, ARROW_DEVICE_CPU);
  assert_int_equal(back.device_id, -1);
  assert_null(back.sync_event);
  test_assert_equal(&schema, &out, &back);
  ASSERT_OK(adr_device_array_validate(&schema, &on_dev, ADR_VALIDATE_FULL, &err), &err);
  test_assert_equal(&schema, &on_dev, &out);
  adr_device_array_release(&back);
  adr_device_array_release(&on_dev);
  ASSERT_OK(adr_stream_destroy(cs, &err), &err);
  adr_device_array_release(&out);
  schema.release(&schema);
}

/* A host node filled by downloads queued on a stream of the device under
 * test: exporting it with that stream waits for them. */
static void test_host_export_after_download(void** state) {
  (void)state;
  struct adr_error err;
  const int64_t n = 100000;
  int64_t* h = malloc((size_t)n * 8);
  assert_non_null(h);
  for (int64_t k = 0; k < n; k++) h[k] = 3 * k - 1;
  void* d = NULL;
  ASSERT_OK(adr_alloc(dut, (size_t)n * 8, 0, NULL, &d, &err), &err);
  ASSERT_OK(adr_copy(dut, d, NULL, h, (size_t)n * 8, NULL, &err), &err);
  struct adr_stream* s;
  ASSERT_OK(adr_stream_create(dut, &s, &err), &err);
  struct ArrowArray a;
  ASSERT_OK(adr_array_init(NULL, 2, 0, &a, &err), &err);
  int64_t* v = NULL;
  ASSERT_OK(adr_array_alloc_buffer(&a, 1, (size_t)n * 8, NULL, (void**)&v, &err), &err);
  ASSERT_OK(adr_copy(NULL, v, dut, d, (size_t)n * 8, s, &err), &err);
  a.length = n;
  struct ArrowDeviceArray out;
  ASSERT_OK(adr_device_array_init(NULL, &a, s, &out, &err), &err);
  assert_null(out.sync_event);
  assert_int_equal(memcmp(out.array.buffers[1], h, (size_t)n * 8), 0);
  adr_device_array_release(&out);
  ASSERT_OK(adr_stream_destroy(s, &err), &err);
  ASSERT_OK(adr_free(dut, d, (size_t)n * 8, NULL, &err), &err);
  free(h);
}

/* The sample table (host memory) through the device and back, whole and
 * sliced, on the NULL stream and a stream of the device. */
static void test_host_table(void** state) {
  (void)state;
  struct adr_error err;
  struct ArrowSchema schema;
  struct ArrowDeviceArray table, on_dev, back;
  ASSERT_OK(fixture_sample_table(5000, &schema, &table, &err), &err);
  struct adr_stream* s;
  ASSERT_OK(adr_stream_create(dut, &s, &err), &err);
  for (int sliced = 0; sliced < 2; sliced++) {
    if (sliced) {
      table.array.offset = 13;
      table.array.length = 5000 - 13 - 29;
    }
    for (int k = 0; k < 2; k++) {
      struct adr_stream* st = k ? s : NULL;
      ASSERT_OK(adr_device_array_deep_copy(&schema, &table, dut, st, &on_dev, NULL, &err), &err);
      struct adr_copy_stats stats = {.struct_size = sizeof(stats)};
      ASSERT_OK(adr_device_array_deep_copy(&schema, &on_dev, NULL, st, &back, &stats, &err), &err);
      assert_null(back.sync_event);
      assert_int_equal(back.array.length, table.array.length);
      test_assert_equal(&schema, &table, &back);
      /* Host memory to host memory: plain memcpy, no host wait. */
      struct ArrowDeviceArray again;
      ASSERT_OK(adr_device_array_deep_copy(&schema, &back, NULL, NULL, &again, &stats, &err), &err);
      assert_int_equal(stats.host_syncs, 0);
      test_assert_equal(&schema, &table, &again);
      adr_device_array_release(&again);
      adr_device_array_release(&back);
      adr_device_array_release(&on_dev);
    }
  }
  ASSERT_OK(adr_stream_destroy(s, &err), &err);
  adr_device_array_release(&table);
  schema.release(&schema);
}

static void test_host_errors(void** state) {
  (void)state;
  struct adr_error err;
  struct ArrowSchema schema;
  test_schema(&schema, "l", NULL, 0, 0);
  struct ArrowDeviceArray a, out;
  host_int64s(10, 5, &a);
  /* Host to host has no stream to order on (a CPU device's stream makes
   * the CPU device the source's: accepted, as before). */
  struct adr_stream* s;
  ASSERT_OK(adr_stream_create(dut, &s, &err), &err);
  if (adr_device_type(dut) != ARROW_DEVICE_CPU) {
    memset(&err, 0, sizeof(err));
    assert_int_equal(adr_device_array_deep_copy(&schema, &a, NULL, s, &out, NULL, &err), EINVAL);
    assert_non_null(strstr(err.message, "stream belongs to"));
    assert_non_null(strstr(err.message, "host memory"));
  }
  assert_int_equal(adr_device_array_deep_copy(&schema, NULL, NULL, NULL, &out, NULL, &err), EINVAL);
  assert_int_equal(adr_device_array_deep_copy(&schema, &a, NULL, NULL, NULL, NULL, &err), EINVAL);
  assert_int_equal(adr_device_array_init(NULL, NULL, NULL, &out, &err), EINVAL);
  assert_int_equal(adr_array_init(NULL, 1, 0, NULL, &err), EINVAL);
  struct ArrowArray tmp;
  assert_int_equal(adr_array_init(NULL, -1, 0, &tmp, &err), EINVAL);
  ASSERT_OK(adr_stream_destroy(s, &err), &err);
  adr_device_array_release(&a);
  schema.release(&schema);
}

static void test_host_no_cpu_backend(void** state) {
  (void)state;
  struct adr_error err;
  bool seen = false;
  for (size_t i = 0; i < adr_backend_count(); i++) {
    struct adr_backend_info info;
    memset(&info, 0, sizeof(info));
    info.struct_size = sizeof(info);
    ASSERT_OK(adr_backend_info_get(i, &info, &err), &err);
    if (strcmp(info.name, "cpu") != 0) continue;
    seen = true;
    if (info.state == ADR_BACKEND_LOADED || info.state == ADR_BACKEND_UNAVAILABLE)
      fail_msg("the cpu backend was loaded (%s)", info.path);
  }
  assert_true(seen);
  FILE* maps = fopen("/proc/self/maps", "r");
  if (maps == NULL) return;
  char line[4096];
  while (fgets(line, sizeof(line), maps) != NULL)
    if (strstr(line, "libadr_cpu.so") != NULL) {
      fclose(maps);
      fail_msg("libadr_cpu.so is mapped: %s", line);
    }
  fclose(maps);
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
      cmocka_unit_test(test_host_nodes),          cmocka_unit_test(test_host_export_after_download),
      cmocka_unit_test(test_host_table),          cmocka_unit_test(test_host_errors),
      cmocka_unit_test(test_host_no_cpu_backend),
  };
  const char* no_cpu = getenv("ADR_ARRAY_NO_CPU");
  size_t n = sizeof(tests) / sizeof(tests[0]);
  if (no_cpu == NULL || strcmp(no_cpu, "1") != 0) n--;
  return _cmocka_run_group_tests("array-host", tests, n, NULL, NULL);
}
