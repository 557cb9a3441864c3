/* SPDX-License-Identifier: Apache-2.0
 *
 * Conformance: events — ordering two streams, host synchronize and query,
 * never-recorded events, native handles.
 */
#include "conformance.h"

/* Stream A produces 64 MiB, B consumes it after waiting on an event that A
 * recorded. A writes the buffer B reads only in its last step, after a
 * 64 MiB step that does not touch it, so a B that does not really wait
 * reads the buffer before A has written it (rather than trailing just
 * behind A's writes) and sees stale bytes. */
void test_event_orders_two_streams(void** state) {
  (void)state;
  const size_t n = 64 * CONF_MIB;
  uint8_t* x = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  uint8_t* y = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  uint8_t* z = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  uint8_t* h = conf_host_alloc(n);
  uint8_t* back = conf_host_alloc(n);
  struct adr_stream* a = conf_stream_create(g_conf.dev);
  struct adr_stream* b = conf_stream_create(g_conf.dev);
  struct adr_event* e = conf_event_create(g_conf.dev);

  /* Round 1: A copies x -> z -> y on the device, B reads y back. */
  conf_fill(h, n, 90);
  conf_upload(g_conf.dev, x, h, n);
  ASSERT_OK(adr_memset(g_conf.dev, y, 0, n, NULL, CONF_ERR));
  memset(back, 0xEE, n);
  ASSERT_OK(adr_copy(g_conf.dev, z, g_conf.dev, x, n, a, CONF_ERR));
  ASSERT_OK(adr_copy(g_conf.dev, y, g_conf.dev, z, n, a, CONF_ERR));
  ASSERT_OK(adr_event_record(e, a, CONF_ERR));
  ASSERT_OK(adr_stream_wait_event(b, e, CONF_ERR));
  ASSERT_OK(adr_copy(g_conf.host, back, g_conf.dev, y, n, b, CONF_ERR));
  ASSERT_OK(adr_stream_synchronize(b, CONF_ERR));
  conf_expect_pattern(back, n, 90, "64 MiB produced on stream A, read on stream B");
  /* B finished after waiting for e, so e has completed. */
  ASSERT_OK(adr_event_query(e, CONF_ERR));

  /* Round 2: A uploads from the host into z, copies z -> x and fills a
   * hole in x; B copies x -> y on the device and reads y back. The event is
   * re-recorded at the new point. */
  conf_fill(h, n, 91);
  memset(back, 0xEE, n);
  ASSERT_OK(adr_copy(g_conf.dev, z, g_conf.host, h, n, a, CONF_ERR));
  ASSERT_OK(adr_copy(g_conf.dev, x, g_conf.dev, z, n, a, CONF_ERR));
  ASSERT_OK(adr_memset(g_conf.dev, x + 4093, 0xAB, 8191, a, CONF_ERR));
  ASSERT_OK(adr_event_record(e, a, CONF_ERR));
  ASSERT_OK(adr_stream_wait_event(b, e, CONF_ERR));
  ASSERT_OK(adr_copy(g_conf.dev, y, g_conf.dev, x, n, b, CONF_ERR));
  ASSERT_OK(adr_copy(g_conf.host, back, g_conf.dev, y, n, b, CONF_ERR));
  ASSERT_OK(adr_stream_synchronize(b, CONF_ERR));
  conf_expect_pattern(back, 4093, 91, "round 2: bytes before the hole");
  conf_expect_bytes(back + 4093, 8191, 0xAB, "round 2: hole filled on stream A");
  conf_expect_pattern_at(back + 4093 + 8191, n - 4093 - 8191, 91, 4093 + 8191,
                         "round 2: bytes after the hole");
  /* A's host source must stay valid until A is done. */
  ASSERT_OK(adr_stream_synchronize(a, CONF_ERR));

  conf_event_destroy(e);
  conf_stream_destroy(b);
  conf_stream_destroy(a);
  conf_host_free(back);
  conf_host_free(h);
  conf_dev_free(g_conf.dev, z, n, NULL);
  conf_dev_free(g_conf.dev, y, n, NULL);
  conf_dev_free(g_conf.dev, x, n, NULL);
}

static void conf_expect_query_0_or_busy(struct adr_event* e) {
  struct adr_error err;
  memcpy(err.message, CONF_UNTOUCHED, sizeof(CONF_UNTOUCHED));
  int st = adr_event_query(e, &err);
  if (st != 0 && st != EBUSY)
    fail_msg("adr_event_query returned %s (%d): %s; expected OK or EBUSY", adr_status_name(st), st,
             err.message);
  /* EBUSY is an answer, not a failure: either way nothing need be written,
   * and 0 must leave the message alone. */
  if (st == 0 && strcmp(err.message, CONF_UNTOUCHED) != 0)
    fail_msg("adr_event_query succeeded but wrote the error message: %s", err.message);
}

void test_event_query_and_synchronize(void** state) {
  (void)state;
  const size_t n = 64 * CONF_MIB;
  uint8_t* x = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  uint8_t* y = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  struct adr_stream* s = conf_stream_create(g_conf.dev);
  struct adr_event* e = conf_event_create(g_conf.dev);
  assert_ptr_equal(adr_event_device(e), g_conf.dev);

  for (int round = 0; round < 3; round++) {
    ASSERT_OK(adr_memset(g_conf.dev, x, 0x10 + round, n, s, CONF_ERR));
    ASSERT_OK(adr_copy(g_conf.dev, y, g_conf.dev, x, n, s, CONF_ERR));
    ASSERT_OK(adr_event_record(e, s, CONF_ERR));
    conf_expect_query_0_or_busy(e);
    ASSERT_OK(adr_event_synchronize(e, CONF_ERR));
    ASSERT_OK(adr_event_query(e, CONF_ERR));
    ASSERT_OK(adr_event_query(e, CONF_ERR)); /* stays complete */

    /* The event covered the copy: its result is there without synchronizing
     * the stream. */
    uint8_t probe[64];
    conf_download(g_conf.dev, probe, y + n - sizeof(probe), sizeof(probe));
    conf_expect_bytes(probe, sizeof(probe), (uint8_t)(0x10 + round), "copy covered by the event");
  }

  /* Recording on the default stream (NULL). */
  ASSERT_OK(adr_memset(g_conf.dev, y, 0x33, n, adr_stream_default(g_conf.dev), CONF_ERR));
  ASSERT_OK(adr_event_record(e, NULL, CONF_ERR));
  conf_expect_query_0_or_busy(e);
  ASSERT_OK(adr_event_synchronize(e, CONF_ERR));
  ASSERT_OK(adr_event_query(e, CONF_ERR));
  uint8_t probe[64];
  conf_download(g_conf.dev, probe, y + n / 2, sizeof(probe));
  conf_expect_bytes(probe, sizeof(probe), 0x33, "default-stream memset covered by the event");

  conf_event_destroy(e);
  conf_stream_destroy(s);
  conf_dev_free(g_conf.dev, y, n, NULL);
  conf_dev_free(g_conf.dev, x, n, NULL);
}

void test_event_never_recorded(void** state) {
  (void)state;
  struct adr_event* e = conf_event_create(g_conf.dev);
  ASSERT_OK(adr_event_query(e, CONF_ERR));
  ASSERT_OK(adr_event_synchronize(e, CONF_ERR));

  /* Waiting on it does not hold a stream back. */
  struct adr_stream* s = conf_stream_create(g_conf.dev);
  const size_t n = 4097;
  uint8_t* d = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  /* Host buffers of work queued on a stream live on the heap: if a call
   * fails (the fault sweep) the case ends while that work may still run,
   * and the teardown drains it before freeing them. */
  uint8_t* h = conf_host_alloc(n);
  uint8_t* back = conf_host_alloc(n);
  conf_fill(h, n, 95);
  ASSERT_OK(adr_stream_wait_event(s, e, CONF_ERR));
  ASSERT_OK(adr_copy(g_conf.dev, d, g_conf.host, h, n, s, CONF_ERR));
  ASSERT_OK(adr_copy(g_conf.host, back, g_conf.dev, d, n, s, CONF_ERR));
  ASSERT_OK(adr_stream_synchronize(s, CONF_ERR));
  conf_expect_pattern(back, n, 95, "stream work after waiting on a never-recorded event");
  ASSERT_OK(adr_stream_wait_event(NULL, e, CONF_ERR));

  conf_host_free(back);
  conf_host_free(h);
  conf_dev_free(g_conf.dev, d, n, NULL);
  conf_stream_destroy(s);
  /* Destroying an event that was never recorded is fine too. */
  conf_event_destroy(e);
}

/* adr_event_native is what goes in ArrowDeviceArray.sync_event: NULL for
 * the CPU, a pointer to the backend's native event otherwise, owned by the
 * adr event (so stable while it lives, and distinct between events). */
void test_event_native(void** state) {
  (void)state;
  struct adr_stream* s = conf_stream_create(g_conf.dev);
  struct adr_event* e1 = conf_event_create(g_conf.dev);
  struct adr_event* e2 = conf_event_create(g_conf.dev);
  ASSERT_OK(adr_event_record(e1, s, CONF_ERR));
  ASSERT_OK(adr_event_record(e2, s, CONF_ERR));

  void* n1 = adr_event_native(e1);
  void* n2 = adr_event_native(e2);
  if (adr_device_type(g_conf.dev) == ARROW_DEVICE_CPU) {
    assert_null(n1);
    assert_null(n2);
  } else {
    assert_non_null(n1);
    assert_non_null(n2);
    assert_ptr_not_equal(n1, n2);
    assert_ptr_equal(adr_event_native(e1), n1);
    ASSERT_OK(adr_event_synchronize(e1, CONF_ERR));
    assert_ptr_equal(adr_event_native(e1), n1);
  }
  ASSERT_OK(adr_stream_synchronize(s, CONF_ERR));
  conf_event_destroy(e2);
  conf_event_destroy(e1);
  conf_stream_destroy(s);
}
