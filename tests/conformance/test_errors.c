/* SPDX-License-Identifier: Apache-2.0
 *
 * Conformance: bad input gets a clear status and a message naming the
 * operation, and changes nothing (a refused free frees nothing).
 */
#include <stdlib.h>

#include "conformance.h"

/* The allocation still holds pattern `seed` and can be written. */
static void conf_expect_alive(uint8_t* d, size_t n, uint32_t seed, const char* what) {
  uint8_t back[512];
  assert_true(n <= sizeof(back));
  conf_download(g_conf.dev, back, d, n);
  conf_expect_pattern(back, n, seed, what);
  ASSERT_OK(adr_memset(g_conf.dev, d, 0xAB, n, NULL, CONF_ERR));
  conf_download(g_conf.dev, back, d, n);
  conf_expect_bytes(back, n, 0xAB, what);
}

void test_free_unknown_pointer(void** state) {
  (void)state;
  const size_t n = 256;
  uint8_t h[256];
  conf_fill(h, n, 101);
  uint8_t* d = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  conf_upload(g_conf.dev, d, h, n);
  struct adr_stream* s = conf_stream_create(g_conf.dev);

  void* foreign = conf_host_alloc(n); /* malloc'd: adr never saw it */
  void* unknown[] = {foreign, d + 64, d + 1, h};
  for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); i++) {
    ASSERT_ERR(adr_free(g_conf.dev, unknown[i], n, NULL, CONF_ERR), EINVAL, "adr_free");
    ASSERT_ERR(adr_free(g_conf.dev, unknown[i], 64, s, CONF_ERR), EINVAL, "adr_free");
  }
  /* A pointer of another device is unknown to this one. */
  if (g_conf.cpu != NULL && g_conf.dev != g_conf.cpu) {
    void* c = conf_dev_alloc(g_conf.cpu, n, 0, NULL);
    ASSERT_ERR(adr_free(g_conf.dev, c, n, NULL, CONF_ERR), EINVAL, "adr_free");
    ASSERT_ERR(adr_free(g_conf.cpu, d, n, NULL, CONF_ERR), EINVAL, "adr_free");
    conf_dev_free(g_conf.cpu, c, n, NULL);
  }
  ASSERT_OK(adr_stream_synchronize(s, CONF_ERR));
  conf_expect_alive(d, n, 101, "allocation after refused frees of unknown pointers");

  conf_stream_destroy(s);
  conf_host_free(foreign);
  conf_dev_free(g_conf.dev, d, n, NULL);
}

void test_free_wrong_size(void** state) {
  (void)state;
  const size_t n = 100;
  uint8_t h[100];
  conf_fill(h, n, 102);
  uint8_t* d = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  conf_upload(g_conf.dev, d, h, n);

  static const size_t wrong[] = {101, 99, 0, 128, 64, SIZE_MAX};
  for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++)
    ASSERT_ERR(adr_free(g_conf.dev, d, wrong[i], NULL, CONF_ERR), EINVAL, "adr_free");
  conf_expect_alive(d, n, 102, "allocation after refused frees with the wrong size");
  conf_dev_free(g_conf.dev, d, n, NULL);
}

void test_double_free(void** state) {
  (void)state;
  void* p = conf_dev_alloc(g_conf.dev, 512, 0, NULL);
  conf_dev_free(g_conf.dev, p, 512, NULL);
  ASSERT_ERR(adr_free(g_conf.dev, p, 512, NULL, CONF_ERR), EINVAL, "adr_free");

  /* Stream-ordered: the second free is refused at once, not later. */
  struct adr_stream* s = conf_stream_create(g_conf.dev);
  p = conf_dev_alloc(g_conf.dev, 512, 0, s);
  conf_dev_free(g_conf.dev, p, 512, s);
  ASSERT_ERR(adr_free(g_conf.dev, p, 512, s, CONF_ERR), EINVAL, "adr_free");
  ASSERT_OK(adr_stream_synchronize(s, CONF_ERR));
  ASSERT_ERR(adr_free(g_conf.dev, p, 512, NULL, CONF_ERR), EINVAL, "adr_free");
  conf_stream_destroy(s);

  /* A size-0 allocation too. */
  p = conf_dev_alloc(g_conf.dev, 0, 0, NULL);
  conf_dev_free(g_conf.dev, p, 0, NULL);
  ASSERT_ERR(adr_free(g_conf.dev, p, 0, NULL, CONF_ERR), EINVAL, "adr_free");
}

void test_null_arguments(void** state) {
  (void)state;
  struct adr_device* dev = g_conf.dev;
  void* p = NULL;
  struct adr_stream* out_stream = NULL;
  struct adr_event* out_event = NULL;

  /* Devices. */
  ASSERT_ERR(adr_device_get(adr_device_type(dev), adr_device_id(dev), NULL, CONF_ERR), EINVAL,
             "adr_device_get");
  ASSERT_ERR(adr_device_default(NULL, CONF_ERR), EINVAL, "adr_device_default");

  /* Memory. */
  ASSERT_ERR(adr_alloc(NULL, 64, 0, NULL, &p, CONF_ERR), EINVAL, "adr_alloc");
  ASSERT_ERR(adr_alloc(dev, 64, 0, NULL, NULL, CONF_ERR), EINVAL, "adr_alloc");
  ASSERT_ERR(adr_alloc(dev, 0, 0, NULL, NULL, CONF_ERR), EINVAL, "adr_alloc");
  assert_null(p);
  void* d = conf_dev_alloc(dev, 64, 0, NULL);
  ASSERT_ERR(adr_free(NULL, d, 64, NULL, CONF_ERR), EINVAL, "adr_free");
  ASSERT_ERR(adr_free(dev, NULL, 64, NULL, CONF_ERR), EINVAL, "adr_free");
  ASSERT_ERR(adr_free(dev, NULL, 0, NULL, CONF_ERR), EINVAL, "adr_free");
  /* A NULL device is host memory (test_host.c); a NULL pointer is refused
   * with either. */
  ASSERT_ERR(adr_memset(NULL, NULL, 0, 64, NULL, CONF_ERR), EINVAL, "adr_memset");
  ASSERT_ERR(adr_memset(dev, NULL, 0, 64, NULL, CONF_ERR), EINVAL, "adr_memset");
  uint8_t h[64];
  ASSERT_ERR(adr_copy(NULL, NULL, g_conf.host, h, 64, NULL, CONF_ERR), EINVAL, "adr_copy");
  ASSERT_ERR(adr_copy(dev, d, NULL, NULL, 64, NULL, CONF_ERR), EINVAL, "adr_copy");
  ASSERT_ERR(adr_copy(NULL, NULL, NULL, h, 64, NULL, CONF_ERR), EINVAL, "adr_copy");
  conf_dev_free(dev, d, 64, NULL);

  /* Streams and events. */
  ASSERT_ERR(adr_stream_create(NULL, &out_stream, CONF_ERR), EINVAL, "adr_stream_create");
  ASSERT_ERR(adr_stream_create(dev, NULL, CONF_ERR), EINVAL, "adr_stream_create");
  assert_null(out_stream);
  ASSERT_ERR(adr_event_create(NULL, &out_event, CONF_ERR), EINVAL, "adr_event_create");
  ASSERT_ERR(adr_event_create(dev, NULL, CONF_ERR), EINVAL, "adr_event_create");
  assert_null(out_event);
  ASSERT_ERR(adr_event_record(NULL, NULL, CONF_ERR), EINVAL, "adr_event_record");
  ASSERT_ERR(adr_event_synchronize(NULL, CONF_ERR), EINVAL, "adr_event_synchronize");
  ASSERT_ERR(adr_event_query(NULL, CONF_ERR), EINVAL, "adr_event_query");
  struct adr_stream* s = conf_stream_create(dev);
  ASSERT_ERR(adr_stream_wait_event(s, NULL, CONF_ERR), EINVAL, "adr_stream_wait_event");
  conf_stream_destroy(s);

  /* A NULL error pointer is always allowed: same status, nothing written. */
  assert_int_equal(adr_alloc(dev, 64, 0, NULL, NULL, NULL), EINVAL);
  assert_int_equal(adr_free(dev, NULL, 64, NULL, NULL), EINVAL);
}

void test_unknown_device_id(void** state) {
  (void)state;
  struct adr_device* out = NULL;
  ArrowDeviceType type = adr_device_type(g_conf.dev);
  ASSERT_ERR(adr_device_get(type, 9999, &out, CONF_ERR), ENODEV, "adr_device_get");
  assert_null(out);
  ASSERT_ERR(adr_device_get(ARROW_DEVICE_CPU, 9999, &out, CONF_ERR), ENODEV, "adr_device_get");
  assert_null(out);
  ASSERT_ERR2(adr_device_get(type, -1, &out, CONF_ERR), ENODEV, EINVAL, "adr_device_get");
  assert_null(out);
  /* A type no backend serves. */
  ASSERT_ERR2(adr_device_get((ArrowDeviceType)999, 0, &out, CONF_ERR), ENODEV, EINVAL,
              "adr_device_get");
  assert_null(out);

  /* The real device is unaffected. */
  ASSERT_OK(adr_device_get(type, adr_device_id(g_conf.dev), &out, CONF_ERR));
  assert_ptr_equal(out, g_conf.dev);
}

void test_copy_null_pointers(void** state) {
  (void)state;
  const size_t n = 16;
  uint8_t* d = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  uint8_t h[16];
  conf_fill(h, n, 103);
  conf_upload(g_conf.dev, d, h, n);
  struct adr_stream* s = conf_stream_create(g_conf.dev);
  struct adr_device* dev = g_conf.dev;
  struct adr_device* host = g_conf.host;

  struct adr_stream* streams[] = {NULL, s};
  for (size_t k = 0; k < 2; k++) {
    struct adr_stream* st = streams[k];
    ASSERT_ERR(adr_copy(dev, NULL, host, h, n, st, CONF_ERR), EINVAL, "adr_copy");
    ASSERT_ERR(adr_copy(dev, d, host, NULL, n, st, CONF_ERR), EINVAL, "adr_copy");
    ASSERT_ERR(adr_copy(host, NULL, dev, d, n, st, CONF_ERR), EINVAL, "adr_copy");
    ASSERT_ERR(adr_copy(host, h, dev, NULL, n, st, CONF_ERR), EINVAL, "adr_copy");
    ASSERT_ERR(adr_copy(dev, NULL, dev, d, n, st, CONF_ERR), EINVAL, "adr_copy");
    ASSERT_ERR(adr_copy(dev, d, dev, NULL, n, st, CONF_ERR), EINVAL, "adr_copy");
    ASSERT_ERR(adr_copy(dev, NULL, dev, NULL, 1, st, CONF_ERR), EINVAL, "adr_copy");
    ASSERT_ERR(adr_memset(dev, NULL, 0, 1, st, CONF_ERR), EINVAL, "adr_memset");
  }
  ASSERT_OK(adr_stream_synchronize(s, CONF_ERR));
  conf_stream_destroy(s);

  /* Nothing was written on either side. */
  uint8_t back[16];
  conf_download(g_conf.dev, back, d, n);
  conf_expect_pattern(back, n, 103, "device buffer after refused copies");
  conf_expect_pattern(h, n, 103, "host buffer after refused copies");
  conf_dev_free(g_conf.dev, d, n, NULL);
}

/* A stream must belong to the device the operation runs on (either side of
 * a copy). Registered when the device under test is not the CPU, whose
 * streams then serve as "another device's stream". */
void test_stream_of_other_device(void** state) {
  (void)state;
  const size_t n = 64;
  struct adr_stream* other = conf_stream_create(g_conf.cpu);
  uint8_t* a = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  uint8_t* b = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  uint8_t h[64], back[64];
  conf_fill(h, n, 461);
  conf_upload(g_conf.dev, a, h, n);
  conf_fill(h, n, 462);
  conf_upload(g_conf.dev, b, h, n);
  void* p = NULL;

  ASSERT_ERR(adr_alloc(g_conf.dev, n, 0, other, &p, CONF_ERR), EINVAL, "adr_alloc");
  assert_null(p);
  ASSERT_ERR(adr_free(g_conf.dev, a, n, other, CONF_ERR), EINVAL, "adr_free");
  ASSERT_ERR(adr_memset(g_conf.dev, a, 0, n, other, CONF_ERR), EINVAL, "adr_memset");
  ASSERT_ERR(adr_copy(g_conf.dev, b, g_conf.dev, a, n, other, CONF_ERR), EINVAL, "adr_copy");
  ASSERT_OK(adr_stream_synchronize(other, CONF_ERR));

  /* Nothing happened: a is still allocated and both hold their data. */
  conf_download(g_conf.dev, back, a, n);
  conf_expect_pattern(back, n, 461, "buffer after operations refused for a foreign stream");
  conf_download(g_conf.dev, back, b, n);
  conf_expect_pattern(back, n, 462, "copy destination after a refused copy");

  conf_dev_free(g_conf.dev, b, n, NULL);
  conf_dev_free(g_conf.dev, a, n, NULL);
  conf_stream_destroy(other);
}
