/* SPDX-License-Identifier: Apache-2.0
 *
 * Interop with implementations other than adr's helpers, on ADR_DEVICE:
 *  - a producer written directly against the ABI structs (its own release
 *    and private data, a live sync_event from the device's native event)
 *    is consumed by adr (deep copy, validation, wait);
 *  - adr's export is consumed the same raw way (fields read directly,
 *    sync_event waited on as a native event, release called, moved).
 * On the CPU, where arrays carry no event, the same code runs without one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array_test.h"

static struct adr_device* dut;

enum { ROWS = 4096, BUSY = 16 << 20 };

/* ---- a raw producer ---------------------------------------------------------- */

struct raw {
  struct adr_device* dev;
  void* values; /* ROWS int64 on the device */
  void* busy;   /* a large buffer copied first, so the event is still pending */
  struct adr_event* event;
  const void* buffers[2];
  int releases;
};

static void raw_release(struct ArrowArray* a) {
  struct raw* r = a->private_data;
  /* the producer's own rule: wait for its event before freeing */
  if (r->event) {
    adr_event_synchronize(r->event, NULL);
    adr_event_destroy(r->event, NULL);
  }
  adr_free(r->dev, r->values, ROWS * 8, NULL, NULL);
  r->releases++;
  a->release = NULL;
}

static void raw_produce(struct raw* r, int64_t* host_values, void* host_busy,
                        struct ArrowDeviceArray* out, bool* out_live) {
  struct adr_error err;
  memset(r, 0, sizeof(*r));
  r->dev = dut;
  struct adr_stream* s;
  ASSERT_OK(adr_stream_create(dut, &s, &err), &err);
  ASSERT_OK(adr_alloc(dut, ROWS * 8, 0, s, &r->values, &err), &err);
  ASSERT_OK(adr_alloc(dut, BUSY, 0, s, &r->busy, &err), &err);
  ASSERT_OK(adr_copy(dut, r->busy, test_cpu(), host_busy, BUSY, s, &err), &err);
  ASSERT_OK(adr_copy(dut, r->values, test_cpu(), host_values, ROWS * 8, s, &err), &err);
  memset(out, 0, sizeof(*out));
  if (adr_device_type(dut) != ARROW_DEVICE_CPU) {
    ASSERT_OK(adr_event_create(dut, &r->event, &err), &err);
    ASSERT_OK(adr_event_record(r->event, s, &err), &err);
    out->sync_event = adr_event_native(r->event);
    assert_non_null(out->sync_event);
    *out_live = adr_event_query(r->event, NULL) == EBUSY;
  } else {
    /* a CPU array must be complete when handed out */
    ASSERT_OK(adr_stream_synchronize(s, &err), &err);
    *out_live = false;
  }
  /* the busy buffer goes once the stream passed it (stream-ordered free) */
  ASSERT_OK(adr_free(dut, r->busy, BUSY, s, &err), &err);
  r->buffers[0] = NULL;
  r->buffers[1] = r->values;
  out->array.length = ROWS - 5;
  out->array.offset = 5;
  out->array.null_count = 0;
  out->array.n_buffers = 2;
  out->array.buffers = r->buffers;
  out->array.release = raw_release;
  out->array.private_data = r;
  out->device_type = adr_device_type(dut);
  out->device_id = adr_device_type(dut) == ARROW_DEVICE_CPU ? -1 : adr_device_id(dut);
  ASSERT_OK(adr_stream_destroy(s, &err), &err); /* waits; but the consumer got it before */
}

static void test_raw_producer_adr_consumer(void** state) {
  (void)state;
  struct adr_error err;
  int64_t* host = malloc(ROWS * 8);
  unsigned char* busy = malloc(BUSY);
  assert_non_null(host);
  assert_non_null(busy);
  memset(busy, 0x5a, BUSY);
  for (int64_t k = 0; k < ROWS; k++) host[k] = k * 31 - 1000;
  struct ArrowSchema schema;
  test_schema(&schema, "l", "v", 0, 0);

  struct raw r;
  struct ArrowDeviceArray a;
  bool live;
  raw_produce(&r, host, busy, &a, &live);
  print_message("  sync_event %s at hand-off\n", live ? "pending" : "already complete");
  /* adr consumes it straight away: deep copy waits on the event first */
  struct ArrowDeviceArray back;
  ASSERT_OK(adr_device_array_deep_copy(&schema, &a, test_cpu(), NULL, &back, NULL, &err), &err);
  const int64_t* v = back.array.buffers[1];
  for (int64_t k = 0; k < ROWS - 5; k++)
    if (v[back.array.offset + k] != host[5 + k])
      fail_msg("value %lld: %lld != %lld", (long long)k, (long long)v[back.array.offset + k],
               (long long)host[5 + k]);
  adr_device_array_release(&back);
  ASSERT_OK(adr_device_array_validate(&schema, &a, ADR_VALIDATE_FULL, &err), &err);
  ASSERT_OK(adr_device_array_wait(&a, NULL, &err), &err);
  struct adr_stream* s;
  ASSERT_OK(adr_stream_create(dut, &s, &err), &err);
  ASSERT_OK(adr_device_array_wait(&a, s, &err), &err); /* device-side */
  ASSERT_OK(adr_stream_destroy(s, &err), &err);
  /* the consumer releases through the producer's callback, once */
  adr_device_array_release(&a);
  assert_int_equal(r.releases, 1);
  assert_null(a.array.release);
  adr_device_array_release(&a);
  assert_int_equal(r.releases, 1);
  schema.release(&schema);
  free(host);
  free(busy);
}

/* A raw string producer: the offsets the deep copy must read to size its
 * allocations are written by a copy queued behind a large one, over memory
 * that first holds 0xff bytes (offsets of -1). Reading them before waiting
 * on sync_event gives EINVAL or wrong data, not a pass. */
struct raw_strings {
  struct adr_device* dev;
  void* offsets;
  void* data;
  struct adr_event* event;
  const void* buffers[3];
  int releases;
};

enum { NSTR = 2000 };

static void raw_strings_release(struct ArrowArray* a) {
  struct raw_strings* r = a->private_data;
  if (r->event) {
    adr_event_synchronize(r->event, NULL);
    adr_event_destroy(r->event, NULL);
  }
  adr_free(r->dev, r->offsets, (NSTR + 1) * 4, NULL, NULL);
  adr_free(r->dev, r->data, NSTR * 8, NULL, NULL);
  r->releases++;
  a->release = NULL;
}

static void test_raw_string_producer_sizes_after_event(void** state) {
  (void)state;
  struct adr_error err;
  int32_t* offs = malloc((NSTR + 1) * 4);
  char* data = malloc(NSTR * 8);
  unsigned char* busy = malloc(BUSY);
  assert_non_null(offs);
  assert_non_null(data);
  assert_non_null(busy);
  memset(busy, 0x11, BUSY);
  int32_t pos = 0;
  for (int k = 0; k < NSTR; k++) {
    offs[k] = pos;
    pos += snprintf(data + pos, 8, "s%d", k);
  }
  offs[NSTR] = pos;
  struct raw_strings r = {.dev = dut};
  struct adr_stream* s;
  ASSERT_OK(adr_stream_create(dut, &s, &err), &err);
  void* busy_dev;
  ASSERT_OK(adr_alloc(dut, (NSTR + 1) * 4, 0, NULL, &r.offsets, &err), &err);
  ASSERT_OK(adr_alloc(dut, NSTR * 8, 0, NULL, &r.data, &err), &err);
  ASSERT_OK(adr_alloc(dut, BUSY, 0, NULL, &busy_dev, &err), &err);
  ASSERT_OK(adr_memset(dut, r.offsets, 0xff, (NSTR + 1) * 4, NULL, &err), &err);
  ASSERT_OK(adr_copy(dut, busy_dev, test_cpu(), busy, BUSY, s, &err), &err);
  ASSERT_OK(adr_copy(dut, r.offsets, test_cpu(), offs, (NSTR + 1) * 4, s, &err), &err);
  ASSERT_OK(adr_copy(dut, r.data, test_cpu(), data, (size_t)pos, s, &err), &err);
  struct ArrowDeviceArray a;
  memset(&a, 0, sizeof(a));
  if (adr_device_type(dut) != ARROW_DEVICE_CPU) {
    ASSERT_OK(adr_event_create(dut, &r.event, &err), &err);
    ASSERT_OK(adr_event_record(r.event, s, &err), &err);
    a.sync_event = adr_event_native(r.event);
  } else {
    ASSERT_OK(adr_stream_synchronize(s, &err), &err);
  }
  r.buffers[1] = r.offsets;
  r.buffers[2] = r.data;
  a.array.length = NSTR;
  a.array.n_buffers = 3;
  a.array.buffers = r.buffers;
  a.array.release = raw_strings_release;
  a.array.private_data = &r;
  a.device_type = adr_device_type(dut);
  a.device_id = adr_device_type(dut) == ARROW_DEVICE_CPU ? -1 : adr_device_id(dut);
  struct ArrowSchema schema;
  test_schema(&schema, "u", "s", 0, 0);
  /* straight away: device to device, then device to CPU */
  struct ArrowDeviceArray d2, back;
  ASSERT_OK(adr_device_array_deep_copy(&schema, &a, dut, s, &d2, NULL, &err), &err);
  ASSERT_OK(adr_device_array_deep_copy(&schema, &a, test_cpu(), NULL, &back, NULL, &err), &err);
  const int32_t* bo = back.array.buffers[1];
  const char* bd = back.array.buffers[2];
  for (int k = 0; k < NSTR; k++) {
    char want[8];
    int n = snprintf(want, sizeof(want), "s%d", k);
    int32_t at = bo[back.array.offset + k];
    if (bo[back.array.offset + k + 1] - at != n || memcmp(bd + at, want, (size_t)n) != 0)
      fail_msg("string %d differs", k);
  }
  test_assert_equal(&schema, &back, &d2);
  adr_device_array_release(&back);
  adr_device_array_release(&d2);
  adr_device_array_release(&a);
  assert_int_equal(r.releases, 1);
  ASSERT_OK(adr_free(dut, busy_dev, BUSY, NULL, &err), &err);
  ASSERT_OK(adr_stream_destroy(s, &err), &err);
  schema.release(&schema);
  free(offs);
  free(data);
  free(busy);
}

/* ---- adr's export, consumed raw ----------------------------------------------- */

static void test_adr_export_raw_consumer(void** state) {
  (void)state;
  struct adr_error err;
  const int64_t n = 1000;
  int32_t* host = malloc((size_t)n * 4);
  assert_non_null(host);
  for (int64_t k = 0; k < n; k++) host[k] = (int32_t)(k ^ 0x2a);
  struct adr_stream* s;
  ASSERT_OK(adr_stream_create(dut, &s, &err), &err);
  struct ArrowArray a;
  ASSERT_OK(adr_array_init(dut, 2, 0, &a, &err), &err);
  void* dv;
  ASSERT_OK(adr_array_alloc_buffer(&a, 1, (size_t)n * 4, s, &dv, &err), &err);
  ASSERT_OK(adr_copy(dut, dv, test_cpu(), host, (size_t)n * 4, s, &err), &err);
  a.length = n - 3;
  a.offset = 3;
  struct ArrowDeviceArray ex;
  ASSERT_OK(adr_device_array_init(dut, &a, s, &ex, &err), &err);
  assert_null(a.release); /* moved */

  /* --- the raw consumer: reads the ABI fields itself --- */
  struct ArrowDeviceArray mine;
  memcpy(&mine, &ex, sizeof(mine)); /* move: bitwise copy, source marked released */
  ex.array.release = NULL;
  assert_int_equal(mine.device_type, adr_device_type(dut));
  assert_int_equal(mine.device_id,
                   adr_device_type(dut) == ARROW_DEVICE_CPU ? -1 : adr_device_id(dut));
  for (int i = 0; i < 3; i++) assert_int_equal(mine.reserved[i], 0);
  assert_int_equal(mine.array.n_buffers, 2);
  assert_null(mine.array.buffers[0]);
  if (adr_device_type(dut) == ARROW_DEVICE_CPU) {
    assert_null(mine.sync_event); /* CPU arrays are complete */
  } else {
    assert_non_null(mine.sync_event);
    /* wait on the native event as any consumer of this device type would:
     * wrap the pointer (CUevent*, cl_event*, VkEvent* ...) and block */
    struct adr_event* ev;
    ASSERT_OK(adr_event_import(dut, mine.sync_event, &ev, &err), &err);
    ASSERT_OK(adr_event_synchronize(ev, &err), &err);
    ASSERT_OK(adr_event_destroy(ev, &err), &err);
  }
  int32_t* got = malloc((size_t)n * 4);
  assert_non_null(got);
  const int32_t* base = mine.array.buffers[1];
  ASSERT_OK(adr_copy(test_cpu(), got, dut, base + mine.array.offset,
                     (size_t)mine.array.length * 4, NULL, &err),
            &err);
  assert_memory_equal(got, host + 3, (size_t)(n - 3) * 4);
  mine.array.release(&mine.array);
  assert_null(mine.array.release);
  ASSERT_OK(adr_stream_destroy(s, &err), &err);
  free(got);
  free(host);
}

/* A foreign producer's array exported through adr keeps its own release. */
struct foreign {
  int64_t values[8];
  const void* buffers[2];
  int releases;
};

static void foreign_release(struct ArrowArray* a) {
  struct foreign* f = a->private_data;
  f->releases++;
  a->release = NULL;
}

static void test_export_foreign_array(void** state) {
  (void)state;
  struct adr_error err;
  struct foreign f = {.values = {1, 2, 3, 4, 5, 6, 7, 8}};
  f.buffers[1] = f.values;
  struct ArrowArray a = {.length = 8, .n_buffers = 2, .buffers = f.buffers,
                         .release = foreign_release, .private_data = &f};
  /* Host mode: a stream of the device under test, synchronised by the
   * export to host memory (NULL device). */
  struct adr_stream* s;
  ASSERT_OK(adr_stream_create(test_host_mode() ? dut : test_cpu(), &s, &err), &err);
  struct ArrowDeviceArray ex;
  ASSERT_OK(adr_device_array_init(test_cpu(), &a, s, &ex, &err), &err);
  assert_null(ex.sync_event);
  assert_int_equal(ex.device_id, -1);
  struct ArrowSchema schema;
  test_schema(&schema, "l", NULL, 0, 0);
  struct ArrowDeviceArray dev, back;
  ASSERT_OK(adr_device_array_deep_copy(&schema, &ex, dut, NULL, &dev, NULL, &err), &err);
  ASSERT_OK(adr_device_array_deep_copy(&schema, &dev, test_cpu(), NULL, &back, NULL, &err), &err);
  test_assert_equal(&schema, &ex, &back);
  adr_device_array_release(&back);
  adr_device_array_release(&dev);
  adr_device_array_release(&ex);
  assert_int_equal(f.releases, 1);
  ASSERT_OK(adr_stream_destroy(s, &err), &err);
  /* errors: released input, stream of another device */
  assert_int_equal(adr_device_array_init(test_cpu(), &a, NULL, &ex, &err), EINVAL);
  assert_non_null(strstr(err.message, "array is released"));
  schema.release(&schema);
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
      cmocka_unit_test(test_raw_producer_adr_consumer),
      cmocka_unit_test(test_raw_string_producer_sizes_after_event),
      cmocka_unit_test(test_adr_export_raw_consumer),
      cmocka_unit_test(test_export_foreign_array),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
