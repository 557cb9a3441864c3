/* SPDX-License-Identifier: Apache-2.0
 *
 * Conformance: streams — create/destroy, queued work, the default stream,
 * stream-ordered allocation.
 */
#include "conformance.h"

void test_stream_create_destroy(void** state) {
  (void)state;
  struct adr_stream* s[8];
  for (size_t i = 0; i < 8; i++) {
    s[i] = conf_stream_create(g_conf.dev);
    assert_ptr_equal(adr_stream_device(s[i]), g_conf.dev);
    for (size_t j = 0; j < i; j++) assert_ptr_not_equal(s[i], s[j]);
    assert_ptr_not_equal(s[i], adr_stream_default(g_conf.dev));
  }
  /* An idle stream synchronizes at once. */
  ASSERT_OK(adr_stream_synchronize(s[3], CONF_ERR));
  for (size_t i = 8; i-- > 0;) conf_stream_destroy(s[i]);

  /* Destroying a stream waits for its queued work first. */
  const size_t n = 8 * CONF_MIB + 1;
  uint8_t* d = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  uint8_t* h = conf_host_alloc(n);
  conf_fill(h, n, 51);
  struct adr_stream* q = conf_stream_create(g_conf.dev);
  ASSERT_OK(adr_copy(g_conf.dev, d, g_conf.host, h, n, q, CONF_ERR));
  ASSERT_OK(adr_memset(g_conf.dev, d, 0x42, 3, q, CONF_ERR));
  conf_stream_destroy(q);
  memset(h, 0, n);
  conf_download(g_conf.dev, h, d, n);
  conf_expect_bytes(h, 3, 0x42, "memset queued before adr_stream_destroy");
  conf_expect_pattern_at(h + 3, n - 3, 51, 3, "copy queued before adr_stream_destroy");
  conf_host_free(h);
  conf_dev_free(g_conf.dev, d, n, NULL);
}

/* A chain of dependent operations queued on one created stream runs in
 * order; adr_stream_synchronize makes the result visible to the host. */
void test_stream_queued_work(void** state) {
  (void)state;
  const size_t n = 4 * CONF_MIB + 13;
  uint8_t* a = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  uint8_t* b = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  uint8_t* h = conf_host_alloc(n);
  uint8_t* back = conf_host_alloc(n);
  struct adr_stream* s = conf_stream_create(g_conf.dev);

  for (uint32_t round = 0; round < 4; round++) {
    conf_fill(h, n, 60 + round);
    memset(back, 0, n);
    size_t hole = 1000 + round * 777, hole_len = 4093;
    /* host -> a, hole in a, a -> b, b -> host: each step needs the one
     * before it to have finished. */
    ASSERT_OK(adr_copy(g_conf.dev, a, g_conf.host, h, n, s, CONF_ERR));
    ASSERT_OK(adr_memset(g_conf.dev, a + hole, 0xAB, hole_len, s, CONF_ERR));
    ASSERT_OK(adr_copy(g_conf.dev, b, g_conf.dev, a, n, s, CONF_ERR));
    ASSERT_OK(adr_copy(g_conf.host, back, g_conf.dev, b, n, s, CONF_ERR));
    ASSERT_OK(adr_stream_synchronize(s, CONF_ERR));

    conf_expect_pattern(back, hole, 60 + round, "stream work: bytes before the memset");
    conf_expect_bytes(back + hole, hole_len, 0xAB, "stream work: memset hole");
    conf_expect_pattern_at(back + hole + hole_len, n - hole - hole_len, 60 + round, hole + hole_len,
                           "stream work: bytes after the memset");
  }
  conf_stream_destroy(s);
  conf_host_free(back);
  conf_host_free(h);
  conf_dev_free(g_conf.dev, b, n, NULL);
  conf_dev_free(g_conf.dev, a, n, NULL);
}

void test_stream_default(void** state) {
  (void)state;
  struct adr_stream* def = adr_stream_default(g_conf.dev);
  assert_non_null(def);
  assert_ptr_equal(adr_stream_default(g_conf.dev), def);
  assert_ptr_equal(adr_stream_device(def), g_conf.dev);
  if (g_conf.cpu != NULL && g_conf.dev != g_conf.cpu)
    assert_ptr_not_equal(adr_stream_default(g_conf.cpu), def);

  ASSERT_ERR(adr_stream_destroy(def, CONF_ERR), EINVAL, "adr_stream_destroy");

  /* Still usable: queue work on it and synchronize it. */
  const size_t n = 2 * CONF_MIB + 5;
  uint8_t* d = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  uint8_t* h = conf_host_alloc(n);
  uint8_t* back = conf_host_alloc(n);
  conf_fill(h, n, 71);
  ASSERT_OK(adr_copy(g_conf.dev, d, g_conf.host, h, n, def, CONF_ERR));
  ASSERT_OK(adr_copy(g_conf.host, back, g_conf.dev, d, n, def, CONF_ERR));
  ASSERT_OK(adr_stream_synchronize(def, CONF_ERR));
  conf_expect_pattern(back, n, 71, "round trip on the default stream");
  assert_ptr_equal(adr_stream_default(g_conf.dev), def);

  conf_host_free(back);
  conf_host_free(h);
  conf_dev_free(g_conf.dev, d, n, NULL);
}

/* Memory allocated on a stream is ready for that stream's work; memory
 * freed on a stream is released after the work queued before the free.
 * Sizes repeat so that a caching allocator hands blocks back out. */
void test_stream_ordered_alloc_free(void** state) {
  (void)state;
  static const size_t sizes[] = {1, 4097, CONF_MIB + 3, 4097, 1, CONF_MIB + 3};
  struct adr_stream* s = conf_stream_create(g_conf.dev);
  struct adr_stream* s2 = conf_stream_create(g_conf.dev);
  struct adr_event* e = conf_event_create(g_conf.dev);
  uint8_t* h = conf_host_alloc(CONF_MIB + 3);
  uint8_t* back = conf_host_alloc(CONF_MIB + 3);

  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    size_t n = sizes[i];
    conf_fill(h, n, (uint32_t)i + 80);
    memset(back, 0, n);
    uint8_t* d = conf_dev_alloc(g_conf.dev, n, 0, s);
    ASSERT_OK(adr_copy(g_conf.dev, d, g_conf.host, h, n, s, CONF_ERR));
    ASSERT_OK(adr_memset(g_conf.dev, d, 0xAB, 1, s, CONF_ERR));
    ASSERT_OK(adr_copy(g_conf.host, back, g_conf.dev, d, n, s, CONF_ERR));
    conf_dev_free(g_conf.dev, d, n, s);
    ASSERT_OK(adr_stream_synchronize(s, CONF_ERR));
    conf_expect_bytes(back, 1, 0xAB, "stream-ordered allocation: first byte");
    conf_expect_pattern_at(back + 1, n - 1, (uint32_t)i + 80, 1, "stream-ordered allocation: rest");

    /* Allocated on s, used and freed on s2 after an event. */
    d = conf_dev_alloc(g_conf.dev, n, 0, s);
    ASSERT_OK(adr_copy(g_conf.dev, d, g_conf.host, h, n, s, CONF_ERR));
    ASSERT_OK(adr_event_record(e, s, CONF_ERR));
    ASSERT_OK(adr_stream_wait_event(s2, e, CONF_ERR));
    memset(back, 0, n);
    ASSERT_OK(adr_copy(g_conf.host, back, g_conf.dev, d, n, s2, CONF_ERR));
    conf_dev_free(g_conf.dev, d, n, s2);
    ASSERT_OK(adr_stream_synchronize(s2, CONF_ERR));
    conf_expect_pattern(back, n, (uint32_t)i + 80, "allocated on one stream, read on another");
  }
  conf_host_free(back);
  conf_host_free(h);
  conf_event_destroy(e);
  conf_stream_destroy(s2);
  conf_stream_destroy(s);
}

/* The default-stream teardown contract (adr/backend.h, docs/backend-abi.md)
 * from the application's side: destroying the default stream is refused
 * with EINVAL and one exact message, however often and with work queued on
 * it, and it changes nothing: the queued work completes, the stream and its
 * native handle stay the same and the stream keeps working, also after
 * created streams of the device were destroyed around it. The CPU device's
 * default stream answers the same. */
void test_stream_destroy_default(void** state) {
  (void)state;
  struct adr_stream* def = adr_stream_default(g_conf.dev);
  assert_non_null(def);
  void* native = adr_stream_native(def);
  char want[512];
  snprintf(want, sizeof(want),
           "[adr_stream_destroy][%s] the default stream of %s cannot be destroyed",
           g_conf.info.backend, adr_device_name(g_conf.dev));

  const size_t n = 4 * CONF_MIB + 3;
  uint8_t* d = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  uint8_t* h = conf_host_alloc(n);
  uint8_t* back = conf_host_alloc(n);
  conf_fill(h, n, 91);
  /* Queued, not waited for, when the destroy is attempted. */
  ASSERT_OK(adr_copy(g_conf.dev, d, g_conf.host, h, n, def, CONF_ERR));
  ASSERT_OK(adr_memset(g_conf.dev, d + 4096, 0x77, 4096, def, CONF_ERR));
  for (int i = 0; i < 3; i++) {
    struct adr_error e;
    memset(&e, 0, sizeof(e));
    assert_int_equal(adr_stream_destroy(def, &e), EINVAL);
    assert_string_equal(e.message, want);
    assert_ptr_equal(adr_stream_default(g_conf.dev), def);
    assert_ptr_equal(adr_stream_native(def), native);
  }
  if (g_conf.cpu != NULL)
    ASSERT_ERR(adr_stream_destroy(adr_stream_default(g_conf.cpu), CONF_ERR), EINVAL,
               "adr_stream_destroy");
  struct adr_stream* s = conf_stream_create(g_conf.dev);
  ASSERT_OK(adr_copy(g_conf.host, back, g_conf.dev, d, n, def, CONF_ERR));
  ASSERT_OK(adr_stream_synchronize(def, CONF_ERR));
  conf_expect_pattern(back, 4096, 91, "before the memset");
  conf_expect_bytes(back + 4096, 4096, 0x77, "the memset queued before the refused destroy");
  conf_expect_pattern_at(back + 8192, n - 8192, 91, 8192, "after the memset");
  conf_stream_destroy(s);

  /* Still the device's default stream, for explicit and NULL-stream work. */
  ASSERT_OK(adr_memset(g_conf.dev, d, 0x5a, n, def, CONF_ERR));
  ASSERT_OK(adr_copy(g_conf.host, back, g_conf.dev, d, n, NULL, CONF_ERR));
  conf_expect_bytes(back, n, 0x5a, "memset on the default stream after the refused destroy");
  ASSERT_ERR(adr_stream_destroy(def, CONF_ERR), EINVAL, "adr_stream_destroy");
  conf_host_free(back);
  conf_host_free(h);
  conf_dev_free(g_conf.dev, d, n, NULL);
}
