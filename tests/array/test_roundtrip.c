/* SPDX-License-Identifier: Apache-2.0
 *
 * Deep copy round trips CPU -> X -> CPU for every test array, on the device
 * named by ADR_DEVICE (the CPU when unset), and the host-synchronisation
 * count of deep copies. Registered once per built backend configuration.
 *
 * X's copies run on a created stream (asynchronous on every backend,
 * including the CPU's worker threads), and each copy back starts without
 * the test waiting: the deep copy itself must honour the sync_event.
 *
 * Without the device: exit 77 (SKIP), or fail when ADR_ARRAY_REQUIRE=1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array_test.h"

static struct adr_device* dut;

static bool dut_is_cpu(void) {
  return adr_device_type(dut) == ARROW_DEVICE_CPU;
}

static void round_trip_case(const struct test_case* tc) {
  struct adr_error err;
  struct ArrowSchema schema;
  struct ArrowDeviceArray host, dev, back, dev2, back2;
  tc->build(&schema, &host);
  ASSERT_OK(adr_device_array_validate(&schema, &host, ADR_VALIDATE_FULL, &err), &err);

  struct adr_stream* stream;
  ASSERT_OK(adr_stream_create(dut, &stream, &err), &err);
  /* CPU -> X, queued on the stream */
  ASSERT_OK(adr_device_array_deep_copy(&schema, &host, dut, stream, &dev, NULL, &err), &err);
  assert_int_equal(dev.device_type, adr_device_type(dut));
  assert_int_equal(dev.device_id, dut_is_cpu() ? -1 : adr_device_id(dut));
  for (int i = 0; i < 3; i++) assert_int_equal(dev.reserved[i], 0);
  /* X -> X (a second copy on the device, from the first one's event) */
  ASSERT_OK(adr_device_array_deep_copy(&schema, &dev, dut, stream, &dev2, NULL, &err), &err);
  /* X -> CPU, both straight away */
  struct adr_device* cpu = test_cpu();
  ASSERT_OK(adr_device_array_deep_copy(&schema, &dev, cpu, NULL, &back, NULL, &err), &err);
  ASSERT_OK(adr_device_array_deep_copy(&schema, &dev2, cpu, stream, &back2, NULL, &err), &err);
  assert_int_equal(back.device_type, ARROW_DEVICE_CPU);
  assert_int_equal(back.device_id, -1);
  assert_null(back.sync_event);
  assert_null(back2.sync_event);
  ASSERT_OK(adr_device_array_validate(&schema, &back, ADR_VALIDATE_FULL, &err), &err);
  test_assert_equal(&schema, &host, &back);
  test_assert_equal(&schema, &host, &back2);
  /* the device copies themselves, through the runtime */
  ASSERT_OK(adr_device_array_validate(&schema, &dev2, ADR_VALIDATE_FULL, &err), &err);
  test_assert_equal(&schema, &dev, &host);
  adr_device_array_release(&dev2);
  adr_device_array_release(&dev);
  adr_device_array_release(&back);
  adr_device_array_release(&back2);
  adr_device_array_release(&host);
  ASSERT_OK(adr_stream_destroy(stream, &err), &err);
  schema.release(&schema);
}

static void test_round_trip_all(void** state) {
  (void)state;
  for (size_t i = 0; i < test_case_count; i++) {
    print_message("  round trip: %s\n", test_cases[i].name);
    round_trip_case(&test_cases[i]);
  }
}

/* The comparison really compares: a changed value is found with its path. */
static void test_round_trip_detects_change(void** state) {
  (void)state;
  struct adr_error err, diff;
  struct ArrowSchema schema;
  struct ArrowDeviceArray host, dev, back;
  ASSERT_OK(fixture_sample_table(50, &schema, &host, &err), &err);
  ASSERT_OK(adr_device_array_deep_copy(&schema, &host, dut, NULL, &dev, NULL, &err), &err);
  ASSERT_OK(adr_device_array_deep_copy(&schema, &dev, test_cpu(), NULL, &back, NULL, &err), &err);
  /* change name[8] ("row-8") in the copy */
  struct ArrowArray* name = back.array.children[1];
  const int32_t* offs = name->buffers[1];
  char* data = (char*)name->buffers[2];
  data[offs[name->offset + 8] + 4] = '9';
  bool eq = true;
  ASSERT_OK(adr_device_array_equal(&schema, &host, &back, &eq, &diff, &err), &err);
  assert_false(eq);
  assert_non_null(strstr(diff.message, "children[1][8]"));
  assert_non_null(strstr(diff.message, "\"row-8\" != \"row-9\""));
  adr_device_array_release(&back);
  adr_device_array_release(&dev);
  adr_device_array_release(&host);
  schema.release(&schema);
}

/* Sliced copies move the slice, not the whole buffers. */
static void test_slice_bytes(void** state) {
  (void)state;
  struct adr_error err;
  struct ArrowSchema schema;
  test_schema(&schema, "l", "big", ARROW_FLAG_NULLABLE, 0);
  struct ArrowArray a;
  const int64_t n = 100000;
  test_node(&a, 2, 0, 10, 1003, 0);
  a.null_count = test_validity(&a, n, 9, 2, 1003, 10);
  int64_t* v = test_buffer(&a, 1, (size_t)n * 8, NULL);
  for (int64_t k = 0; k < n; k++) v[k] = k * k;
  struct ArrowDeviceArray host, dev, back;
  test_export(&a, &host);
  struct adr_copy_stats stats = {.struct_size = sizeof(stats)};
  ASSERT_OK(adr_device_array_deep_copy(&schema, &host, dut, NULL, &dev, &stats, &err), &err);
  /* offset 1003 = 125 * 8 + 3: bitmap from byte 125, values from 1000 */
  assert_int_equal(dev.array.offset, 3);
  assert_int_equal(dev.array.length, 10);
  assert_int_equal(stats.copies, 2);
  assert_int_equal(stats.bytes, 2 + 13 * 8);
  ASSERT_OK(adr_device_array_deep_copy(&schema, &dev, test_cpu(), NULL, &back, NULL, &err), &err);
  const int64_t* bv = back.array.buffers[1];
  for (int64_t k = 0; k < 10; k++) assert_int_equal(bv[3 + k], (1003 + k) * (1003 + k));
  test_assert_equal(&schema, &host, &back);
  adr_device_array_release(&back);
  adr_device_array_release(&dev);
  adr_device_array_release(&host);
  schema.release(&schema);
}

/* Var-binary data: only [first offset, last offset) crosses. */
static void test_slice_string_bytes(void** state) {
  (void)state;
  struct adr_error err;
  struct ArrowSchema schema;
  test_schema(&schema, "u", "s", 0, 0);
  const char* vals[64];
  for (int k = 0; k < 64; k++) vals[k] = "0123456789";
  struct ArrowArray a;
  test_strings(&a, vals, 64, 0, false);
  a.offset = 40;
  a.length = 3;
  struct ArrowDeviceArray host, dev, back;
  test_export(&a, &host);
  struct adr_copy_stats stats = {.struct_size = sizeof(stats)};
  ASSERT_OK(adr_device_array_deep_copy(&schema, &host, dut, NULL, &dev, &stats, &err), &err);
  /* validity 1 byte (r = 0), offsets 4 entries, data 30 bytes */
  assert_int_equal(stats.bytes, 1 + 4 * 4 + 30);
  ASSERT_OK(adr_device_array_deep_copy(&schema, &dev, test_cpu(), NULL, &back, NULL, &err), &err);
  /* on the CPU the offsets are rebased: the data starts at byte 0 */
  const int32_t* bo = back.array.buffers[1];
  assert_int_equal(back.array.offset, 0);
  assert_int_equal(bo[0], 0);
  assert_int_equal(bo[3], 30);
  assert_memory_equal(back.array.buffers[2], "012345678901234567890123456789", 30);
  test_assert_equal(&schema, &host, &back);
  adr_device_array_release(&back);
  adr_device_array_release(&dev);
  adr_device_array_release(&host);
  schema.release(&schema);
}

/* Counts host waits of one tree's deep copies: `levels` rounds of reads
 * (one per level of lists within lists), `reads` reads per copy. */
static void host_sync_case(const struct ArrowSchema* schema, const struct ArrowDeviceArray* host,
                           int64_t levels, int64_t reads) {
  struct adr_error err;
  struct ArrowDeviceArray dev, dev2, back;
  struct adr_stream* stream;
  ASSERT_OK(adr_stream_create(dut, &stream, &err), &err);
  struct adr_copy_stats s1 = {.struct_size = sizeof(s1)}, s2 = {.struct_size = sizeof(s2)},
                        s3 = {.struct_size = sizeof(s3)};
  ASSERT_OK(adr_device_array_deep_copy(schema, host, dut, stream, &dev, &s1, &err), &err);
  ASSERT_OK(adr_device_array_deep_copy(schema, &dev, dut, stream, &dev2, &s2, &err), &err);
  ASSERT_OK(adr_device_array_deep_copy(schema, &dev2, test_cpu(), stream, &back, &s3, &err), &err);
  assert_int_equal(s1.size_reads, reads);
  /* X -> X of a copy (every node from its element 0): offsets stay as
   * they are, only their first and last are read */
  assert_int_equal(s2.size_reads, dut_is_cpu() ? reads : 2 * reads);
  assert_int_equal(s3.size_reads, reads);
  /* CPU source: ranges read on the host, no wait */
  assert_int_equal(s1.size_syncs, 0);
  struct adr_device_info info = {.struct_size = sizeof(info)};
  ASSERT_OK(adr_device_info_get(dut, &info, &err), &err);
  bool host_readable = (info.caps & ADR_CAP_HOST_ACCESSIBLE) != 0;
  if (dut_is_cpu()) {
    /* CPU to CPU: plain copies on the host, complete on return, no wait */
    assert_int_equal(s1.host_syncs, 0);
    assert_int_equal(s2.host_syncs, 0);
    assert_int_equal(s3.host_syncs, 0);
  } else {
    assert_int_equal(s1.host_syncs, 0); /* queued, event in sync_event */
    assert_non_null(dev.sync_event);
    assert_int_equal(s2.size_syncs, levels); /* one wait per round of reads */
    assert_int_equal(s2.host_syncs, levels);
    assert_non_null(dev2.sync_event);
    if (host_readable) {
      /* to the CPU from host-readable memory: wait for the event, memcpy */
      assert_int_equal(s3.size_syncs, 0);
      assert_int_equal(s3.host_syncs, 1);
    } else if (adr_device_type(dut) == ARROW_DEVICE_VULKAN) {
      /* downloads complete on return (docs/devices.md): no completion wait */
      assert_int_equal(s3.size_syncs, levels);
      assert_int_equal(s3.host_syncs, levels);
    } else {
      assert_int_equal(s3.size_syncs, levels);
      assert_int_equal(s3.host_syncs, levels + 1); /* + completion: CPU arrays carry no event */
    }
  }
  test_assert_equal(schema, host, &back);
  adr_device_array_release(&back);
  adr_device_array_release(&dev2);
  adr_device_array_release(&dev);
  ASSERT_OK(adr_stream_destroy(stream, &err), &err);
}

/* The sample table (utf8 and list<int32> under a struct): one round of
 * reads, so one host wait device->device and device->CPU on Vulkan. */
static void test_host_sync_count(void** state) {
  (void)state;
  struct adr_error err;
  struct ArrowSchema schema;
  struct ArrowDeviceArray host;
  ASSERT_OK(fixture_sample_table(1000, &schema, &host, &err), &err);
  host.array.offset = 101;
  host.array.length = 600;
  host_sync_case(&schema, &host, 1, 2); /* name's and tags' offsets */
  adr_device_array_release(&host);
  schema.release(&schema);
}

/* The "nested" case: list<struct<utf8, list<dictionary<int32, utf8>>>>:
 * the outer offsets and the dictionary's (planned up front: its range is
 * its own), then name's and tags'. */
static void test_host_sync_count_nested(void** state) {
  (void)state;
  struct ArrowSchema schema;
  struct ArrowDeviceArray host;
  const struct test_case* nested = NULL;
  for (size_t i = 0; i < test_case_count; i++)
    if (strcmp(test_cases[i].name, "nested") == 0) nested = &test_cases[i];
  assert_non_null(nested);
  nested->build(&schema, &host);
  host_sync_case(&schema, &host, 2, 4);
  adr_device_array_release(&host);
  schema.release(&schema);
}

/* Bad input to the deep copy: clear errors, nothing allocated. */
static void test_deep_copy_errors(void** state) {
  (void)state;
  struct adr_error err;
  struct ArrowSchema schema;
  struct ArrowDeviceArray host, out;
  ASSERT_OK(fixture_sample_table(10, &schema, &host, &err), &err);
  assert_int_equal(adr_device_array_deep_copy(&schema, NULL, dut, NULL, &out, NULL, &err), EINVAL);
  assert_non_null(strstr(err.message, "src is NULL"));
  /* corrupt a last offset: offsets not monotonic within the copied range */
  struct ArrowArray* name = host.array.children[1];
  int32_t* offs = (int32_t*)name->buffers[1];
  int32_t saved = offs[10];
  offs[10] = -5;
  assert_int_equal(adr_device_array_deep_copy(&schema, &host, dut, NULL, &out, NULL, &err), EINVAL);
  assert_non_null(strstr(err.message, "children[1]: offsets"));
  offs[10] = saved;
  /* a stream of an unrelated device (the CPU's; none in host mode) */
  if (!dut_is_cpu() && !test_host_mode()) {
    struct adr_stream* cs;
    ASSERT_OK(adr_stream_create(test_cpu(), &cs, &err), &err);
    struct ArrowDeviceArray dev;
    ASSERT_OK(adr_device_array_deep_copy(&schema, &host, dut, NULL, &dev, NULL, &err), &err);
    assert_int_equal(adr_device_array_deep_copy(&schema, &dev, dut, cs, &out, NULL, &err), EINVAL);
    assert_non_null(strstr(err.message, "stream belongs to"));
    adr_device_array_release(&dev);
    ASSERT_OK(adr_stream_destroy(cs, &err), &err);
  }
  /* released source */
  struct ArrowDeviceArray moved;
  adr_device_array_move(&host, &moved);
  assert_int_equal(adr_device_array_deep_copy(&schema, &host, dut, NULL, &out, NULL, &err), EINVAL);
  assert_non_null(strstr(err.message, "array: array is released"));
  adr_device_array_release(&moved);
  schema.release(&schema);
}

/* Between two backends (ADR_CONFORMANCE_PEER names the second device):
 * CPU -> X -> PEER -> X -> CPU, each hop straight after the previous one. */
static void test_cross_device(void** state) {
  (void)state;
  struct adr_error err;
  struct adr_device* peer = NULL;
  const char* spec = getenv("ADR_CONFORMANCE_PEER");
  char name[32];
  snprintf(name, sizeof(name), "%s", spec);
  char* colon = strchr(name, ':');
  int64_t id = 0;
  if (colon) {
    *colon = '\0';
    id = atoll(colon + 1);
  }
  size_t count = 0;
  ASSERT_OK(adr_device_count(&count, &err), &err);
  peer = NULL;
  for (size_t i = 0; i < count && peer == NULL; i++) {
    struct adr_device* d;
    ASSERT_OK(adr_device_at(i, &d, &err), &err);
    const char* tn = adr_device_type_name(adr_device_type(d));
    if (tn && strcmp(tn, name) == 0 && adr_device_id(d) == id) peer = d;
  }
  if (peer == NULL) fail_msg("peer device %s not found", spec);
  print_message("  cross-device: %s <-> %s\n", adr_device_name(dut), adr_device_name(peer));
  for (size_t i = 0; i < test_case_count; i++) {
    struct ArrowSchema schema;
    struct ArrowDeviceArray host, x, p, x2, back;
    test_cases[i].build(&schema, &host);
    struct adr_stream *sx, *sp;
    ASSERT_OK(adr_stream_create(dut, &sx, &err), &err);
    ASSERT_OK(adr_stream_create(peer, &sp, &err), &err);
    ASSERT_OK(adr_device_array_deep_copy(&schema, &host, dut, sx, &x, NULL, &err), &err);
    ASSERT_OK(adr_device_array_deep_copy(&schema, &x, peer, sp, &p, NULL, &err), &err);
    ASSERT_OK(adr_device_array_deep_copy(&schema, &p, dut, sx, &x2, NULL, &err), &err);
    ASSERT_OK(adr_device_array_deep_copy(&schema, &x2, test_cpu(), NULL, &back, NULL, &err), &err);
    test_assert_equal(&schema, &host, &back);
    test_assert_equal(&schema, &p, &host);
    adr_device_array_release(&back);
    adr_device_array_release(&x2);
    adr_device_array_release(&p);
    adr_device_array_release(&x);
    adr_device_array_release(&host);
    ASSERT_OK(adr_stream_destroy(sx, &err), &err);
    ASSERT_OK(adr_stream_destroy(sp, &err), &err);
    schema.release(&schema);
  }
}

int main(void) {
  struct adr_error err;
  int st = adr_device_default(&dut, &err);
  if (st != 0) {
    const char* req = getenv("ADR_ARRAY_REQUIRE");
    fprintf(stderr, "device under test unavailable: %s\n", err.message);
    return req && strcmp(req, "1") == 0 ? 1 : 77;
  }
  fprintf(stderr, "device under test: %s\n", adr_device_name(dut));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_trip_all),   cmocka_unit_test(test_round_trip_detects_change),
      cmocka_unit_test(test_slice_bytes),      cmocka_unit_test(test_slice_string_bytes),
      cmocka_unit_test(test_host_sync_count),  cmocka_unit_test(test_host_sync_count_nested),
      cmocka_unit_test(test_deep_copy_errors), cmocka_unit_test(test_cross_device),
  };
  const char* peer = getenv("ADR_CONFORMANCE_PEER");
  size_t n = sizeof(tests) / sizeof(tests[0]);
  if (peer == NULL || strcmp(peer, "cpu") == 0) n--; /* the cross test needs a peer */
  return _cmocka_run_group_tests("array-roundtrip", tests, n, NULL, NULL);
}
