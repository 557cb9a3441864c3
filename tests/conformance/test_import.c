/* SPDX-License-Identifier: Apache-2.0
 *
 * Conformance: wrapping native events and streams (ADR_CAP_IMPORT_NATIVE).
 * This is how a consumer honours ArrowDeviceArray.sync_event: it imports
 * the producer's native event and makes its stream wait on it. Registered
 * only for devices with the capability (harness.c says so otherwise).
 */
#include "conformance.h"

void test_import_event(void** state) {
  (void)state;
  const size_t n = 16 * CONF_MIB + 5;
  uint8_t* x = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  uint8_t* y = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  uint8_t* z = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  uint8_t* h = conf_host_alloc(n);
  struct adr_stream* producer = conf_stream_create(g_conf.dev);
  struct adr_stream* consumer = conf_stream_create(g_conf.dev);
  struct adr_event* e = conf_event_create(g_conf.dev);

  conf_fill(h, n, 401);
  conf_upload(g_conf.dev, x, h, n);
  ASSERT_OK(adr_memset(g_conf.dev, y, 0, n, NULL, CONF_ERR));

  /* The producer's work, then its event as sync_event would carry it. */
  ASSERT_OK(adr_copy(g_conf.dev, z, g_conf.dev, x, n, producer, CONF_ERR));
  ASSERT_OK(adr_copy(g_conf.dev, y, g_conf.dev, z, n, producer, CONF_ERR));
  ASSERT_OK(adr_event_record(e, producer, CONF_ERR));
  void* sync_event = adr_event_native(e);
  assert_non_null(sync_event);

  struct adr_event* imported = NULL;
  ASSERT_OK(adr_event_import(g_conf.dev, sync_event, &imported, CONF_ERR));
  assert_non_null(imported);
  conf_track_event(imported);
  assert_ptr_equal(adr_event_device(imported), g_conf.dev);

  /* The consumer waits on the imported event, then reads. */
  memset(h, 0xEE, n);
  ASSERT_OK(adr_stream_wait_event(consumer, imported, CONF_ERR));
  ASSERT_OK(adr_copy(g_conf.host, h, g_conf.dev, y, n, consumer, CONF_ERR));
  ASSERT_OK(adr_stream_synchronize(consumer, CONF_ERR));
  conf_expect_pattern(h, n, 401, "data read after waiting on an imported event");
  ASSERT_OK(adr_event_synchronize(imported, CONF_ERR));
  ASSERT_OK(adr_event_query(imported, CONF_ERR));

  /* Destroying the wrapper leaves the native event to its owner. */
  conf_event_destroy(imported);
  ASSERT_OK(adr_event_query(e, CONF_ERR));
  ASSERT_OK(adr_event_record(e, producer, CONF_ERR));
  ASSERT_OK(adr_event_synchronize(e, CONF_ERR));

  ASSERT_ERR(adr_event_import(g_conf.dev, NULL, &imported, CONF_ERR), EINVAL, "adr_event_import");
  ASSERT_ERR(adr_event_import(g_conf.dev, sync_event, NULL, CONF_ERR), EINVAL, "adr_event_import");

  conf_event_destroy(e);
  conf_stream_destroy(consumer);
  conf_stream_destroy(producer);
  conf_host_free(h);
  conf_dev_free(g_conf.dev, z, n, NULL);
  conf_dev_free(g_conf.dev, y, n, NULL);
  conf_dev_free(g_conf.dev, x, n, NULL);
}

void test_import_stream(void** state) {
  (void)state;
  const size_t n = 4 * CONF_MIB + 1;
  uint8_t* d = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  uint8_t* h = conf_host_alloc(n);
  uint8_t* back = conf_host_alloc(n);
  struct adr_stream* s = conf_stream_create(g_conf.dev);
  void* native = adr_stream_native(s);
  assert_non_null(native);

  struct adr_stream* imported = NULL;
  ASSERT_OK(adr_stream_import(g_conf.dev, native, &imported, CONF_ERR));
  assert_non_null(imported);
  conf_track_stream(imported);
  assert_ptr_equal(adr_stream_device(imported), g_conf.dev);

  conf_fill(h, n, 402);
  ASSERT_OK(adr_copy(g_conf.dev, d, g_conf.host, h, n, imported, CONF_ERR));
  ASSERT_OK(adr_memset(g_conf.dev, d + 3, 0xAB, 5, imported, CONF_ERR));
  ASSERT_OK(adr_copy(g_conf.host, back, g_conf.dev, d, n, imported, CONF_ERR));
  ASSERT_OK(adr_stream_synchronize(imported, CONF_ERR));
  conf_expect_pattern(back, 3, 402, "imported stream: bytes before the memset");
  conf_expect_bytes(back + 3, 5, 0xAB, "imported stream: memset");
  conf_expect_pattern_at(back + 8, n - 8, 402, 8, "imported stream: bytes after the memset");

  /* Destroying the wrapper leaves the native stream usable by its owner. */
  conf_stream_destroy(imported);
  conf_fill(h, n, 403);
  ASSERT_OK(adr_copy(g_conf.dev, d, g_conf.host, h, n, s, CONF_ERR));
  ASSERT_OK(adr_copy(g_conf.host, back, g_conf.dev, d, n, s, CONF_ERR));
  ASSERT_OK(adr_stream_synchronize(s, CONF_ERR));
  conf_expect_pattern(back, n, 403, "stream used after its imported wrapper was destroyed");

  ASSERT_ERR(adr_stream_import(g_conf.dev, NULL, &imported, CONF_ERR), EINVAL, "adr_stream_import");
  ASSERT_ERR(adr_stream_import(g_conf.dev, native, NULL, CONF_ERR), EINVAL, "adr_stream_import");

  conf_stream_destroy(s);
  conf_host_free(back);
  conf_host_free(h);
  conf_dev_free(g_conf.dev, d, n, NULL);
}
