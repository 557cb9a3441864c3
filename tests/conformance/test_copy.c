/* SPDX-License-Identifier: Apache-2.0
 *
 * Conformance: adr_copy host->device, device->host, device->device, Arrow
 * slices (pointers into the middle of allocations), size 0, and the NULL
 * stream's synchronous semantics.
 */
#include "conformance.h"

/* 1 byte, odd sizes around 64 and 4096, and sizes past the chunk sizes a
 * staged or pipelined copy is likely to use. */
static const size_t g_sizes[] = {
    1, 7, 63, 64, 65, 1000, 4093, 4097, 65536 + 3, CONF_MIB + 7, 9 * CONF_MIB + 5};
enum { NSIZES = sizeof(g_sizes) / sizeof(g_sizes[0]), GUARD = 64 };

void test_copy_host_to_device(void** state) {
  (void)state;
  for (size_t i = 0; i < NSIZES; i++) {
    size_t n = g_sizes[i];
    /* The device buffer is larger than the copy: bytes past it stay 0xEE. */
    uint8_t* d = conf_dev_alloc(g_conf.dev, n + GUARD, 0, NULL);
    ASSERT_OK(adr_memset(g_conf.dev, d, 0xEE, n + GUARD, NULL, CONF_ERR));
    /* Unaligned host source. */
    uint8_t* src = conf_host_alloc(n + 3);
    conf_fill(src + 3, n, (uint32_t)i);
    ASSERT_OK(adr_copy(g_conf.dev, d, g_conf.host, src + 3, n, NULL, CONF_ERR));

    uint8_t* back = conf_host_alloc(n + GUARD);
    conf_download(g_conf.dev, back, d, n + GUARD);
    char what[64];
    snprintf(what, sizeof(what), "host->device copy of %zu bytes", n);
    conf_expect_pattern(back, n, (uint32_t)i, what);
    conf_expect_bytes(back + n, GUARD, 0xEE, "device bytes past a host->device copy");

    conf_host_free(back);
    conf_host_free(src);
    conf_dev_free(g_conf.dev, d, n + GUARD, NULL);
  }
}

void test_copy_device_to_host(void** state) {
  (void)state;
  for (size_t i = 0; i < NSIZES; i++) {
    size_t n = g_sizes[i];
    uint8_t* d = conf_dev_alloc(g_conf.dev, n, 0, NULL);
    uint8_t* src = conf_host_alloc(n);
    conf_fill(src, n, (uint32_t)i + 1000);
    conf_upload(g_conf.dev, d, src, n);

    /* Unaligned host destination with guards on both sides. */
    uint8_t* h = conf_host_alloc(n + 2 * GUARD + 1);
    memset(h, 0xC3, n + 2 * GUARD + 1);
    ASSERT_OK(adr_copy(g_conf.host, h + GUARD + 1, g_conf.dev, d, n, NULL, CONF_ERR));
    char what[64];
    snprintf(what, sizeof(what), "device->host copy of %zu bytes", n);
    conf_expect_pattern(h + GUARD + 1, n, (uint32_t)i + 1000, what);
    conf_expect_bytes(h, GUARD + 1, 0xC3, "host bytes before a device->host copy");
    conf_expect_bytes(h + GUARD + 1 + n, GUARD, 0xC3, "host bytes after a device->host copy");

    conf_host_free(h);
    conf_host_free(src);
    conf_dev_free(g_conf.dev, d, n, NULL);
  }
}

void test_copy_device_to_device(void** state) {
  (void)state;
  for (size_t i = 0; i < NSIZES; i++) {
    size_t n = g_sizes[i];
    uint8_t* a = conf_dev_alloc(g_conf.dev, n, 0, NULL);
    uint8_t* b = conf_dev_alloc(g_conf.dev, n + GUARD, 0, NULL);
    uint8_t* h = conf_host_alloc(n + GUARD);
    conf_fill(h, n, (uint32_t)i + 2000);
    conf_upload(g_conf.dev, a, h, n);
    ASSERT_OK(adr_memset(g_conf.dev, b, 0xEE, n + GUARD, NULL, CONF_ERR));

    ASSERT_OK(adr_copy(g_conf.dev, b, g_conf.dev, a, n, NULL, CONF_ERR));

    char what[64];
    snprintf(what, sizeof(what), "device->device copy of %zu bytes", n);
    memset(h, 0, n + GUARD);
    conf_download(g_conf.dev, h, b, n + GUARD);
    conf_expect_pattern(h, n, (uint32_t)i + 2000, what);
    conf_expect_bytes(h + n, GUARD, 0xEE, "device bytes past a device->device copy");
    memset(h, 0, n);
    conf_download(g_conf.dev, h, a, n);
    conf_expect_pattern(h, n, (uint32_t)i + 2000, "source of a device->device copy");

    conf_host_free(h);
    conf_dev_free(g_conf.dev, b, n + GUARD, NULL);
    conf_dev_free(g_conf.dev, a, n, NULL);
  }
}

/* Arrow slices: buffers[i] + offset. Copies into, out of and between the
 * middles of allocations move exactly the bytes asked for. */
void test_copy_slices(void** state) {
  (void)state;
  static const size_t offsets[] = {1, 7, 4093};
  static const size_t lengths[] = {1, 13, 3001};
  const size_t N = 3 * 4096;
  uint8_t* d = conf_dev_alloc(g_conf.dev, N, 0, NULL);
  uint8_t* e = conf_dev_alloc(g_conf.dev, N, 0, NULL);
  uint8_t* h = conf_host_alloc(N + 2 * GUARD);
  uint8_t* src = conf_host_alloc(N);
  conf_fill(src, N, 2);

  for (size_t oi = 0; oi < 3; oi++) {
    for (size_t li = 0; li < 3; li++) {
      size_t off = offsets[oi], len = lengths[li];
      char what[128];

      /* host -> middle of device */
      conf_fill(h, N, 1);
      conf_upload(g_conf.dev, d, h, N);
      ASSERT_OK(adr_copy(g_conf.dev, d + off, g_conf.host, src, len, NULL, CONF_ERR));
      memset(h, 0, N);
      conf_download(g_conf.dev, h, d, N);
      snprintf(what, sizeof(what), "bytes before a %zu-byte slice written at offset %zu", len, off);
      conf_expect_pattern(h, off, 1, what);
      snprintf(what, sizeof(what), "%zu-byte slice written at offset %zu", len, off);
      conf_expect_pattern(h + off, len, 2, what);
      snprintf(what, sizeof(what), "bytes after a %zu-byte slice written at offset %zu", len, off);
      conf_expect_pattern_at(h + off + len, N - off - len, 1, off + len, what);

      /* middle of device -> middle of host */
      memset(h, 0x3C, N + 2 * GUARD);
      ASSERT_OK(adr_copy(g_conf.host, h + GUARD + off, g_conf.dev, d + off, len, NULL, CONF_ERR));
      snprintf(what, sizeof(what), "%zu-byte slice read from offset %zu", len, off);
      conf_expect_pattern(h + GUARD + off, len, 2, what);
      conf_expect_bytes(h, GUARD + off, 0x3C, "host bytes before a slice read");
      conf_expect_bytes(h + GUARD + off + len, N + GUARD - off - len, 0x3C,
                        "host bytes after a slice read");

      /* middle of device -> another offset in another allocation */
      size_t off2 = (off * 5 + 3) % 4096;
      conf_fill(h, N, 3);
      conf_upload(g_conf.dev, e, h, N);
      ASSERT_OK(adr_copy(g_conf.dev, e + off2, g_conf.dev, d + off, len, NULL, CONF_ERR));
      memset(h, 0, N);
      conf_download(g_conf.dev, h, e, N);
      snprintf(what, sizeof(what), "device slice %zu->%zu, bytes before", off, off2);
      conf_expect_pattern(h, off2, 3, what);
      snprintf(what, sizeof(what), "device slice %zu->%zu of %zu bytes", off, off2, len);
      conf_expect_pattern(h + off2, len, 2, what);
      snprintf(what, sizeof(what), "device slice %zu->%zu, bytes after", off, off2);
      conf_expect_pattern_at(h + off2 + len, N - off2 - len, 3, off2 + len, what);
    }
  }
  conf_host_free(src);
  conf_host_free(h);
  conf_dev_free(g_conf.dev, e, N, NULL);
  conf_dev_free(g_conf.dev, d, N, NULL);
}

void test_copy_zero_size(void** state) {
  (void)state;
  const size_t n = 256;
  uint8_t* a = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  uint8_t* b = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  uint8_t h[256], back[256];
  conf_fill(h, n, 21);
  conf_upload(g_conf.dev, a, h, n);
  conf_fill(h, n, 22);
  conf_upload(g_conf.dev, b, h, n);
  memset(h, 0x77, n);

  struct adr_stream* s = conf_stream_create(g_conf.dev);
  struct adr_stream* streams[] = {NULL, s};
  for (size_t k = 0; k < 2; k++) {
    ASSERT_OK(adr_copy(g_conf.dev, a, g_conf.host, h, 0, streams[k], CONF_ERR));
    ASSERT_OK(adr_copy(g_conf.host, h, g_conf.dev, b, 0, streams[k], CONF_ERR));
    ASSERT_OK(adr_copy(g_conf.dev, b + 5, g_conf.dev, a + 9, 0, streams[k], CONF_ERR));
    ASSERT_OK(adr_memset(g_conf.dev, a + 1, 0, 0, streams[k], CONF_ERR));
  }
  ASSERT_OK(adr_stream_synchronize(s, CONF_ERR));
  conf_stream_destroy(s);

  conf_expect_bytes(h, n, 0x77, "host buffer after 0-byte copies");
  conf_download(g_conf.dev, back, a, n);
  conf_expect_pattern(back, n, 21, "device buffer after 0-byte copies into it");
  conf_download(g_conf.dev, back, b, n);
  conf_expect_pattern(back, n, 22, "device buffer after 0-byte copies into it");
  conf_dev_free(g_conf.dev, b, n, NULL);
  conf_dev_free(g_conf.dev, a, n, NULL);
}

/* A NULL stream means "the default stream, and wait for completion": the
 * source may be reused and the destination read as soon as the call
 * returns, and the call is ordered after work queued on the default stream
 * before it. */
void test_copy_null_stream_is_synchronous(void** state) {
  (void)state;
  const size_t n = 16 * CONF_MIB + 3;
  uint8_t* d = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  uint8_t* h = conf_host_alloc(n);
  uint8_t* back = conf_host_alloc(n);

  /* Source reused right after return. */
  conf_fill(h, n, 31);
  ASSERT_OK(adr_copy(g_conf.dev, d, g_conf.host, h, n, NULL, CONF_ERR));
  memset(h, 0, n);
  ASSERT_OK(adr_copy(g_conf.host, back, g_conf.dev, d, n, NULL, CONF_ERR));
  conf_expect_pattern(back, n, 31, "NULL-stream copy whose source was overwritten on return");

  /* memset visible on return. */
  ASSERT_OK(adr_memset(g_conf.dev, d, 0x5A, n, NULL, CONF_ERR));
  ASSERT_OK(adr_copy(g_conf.host, back, g_conf.dev, d, n, NULL, CONF_ERR));
  conf_expect_bytes(back, n, 0x5A, "NULL-stream memset read back");

  /* Work queued on the default stream (asynchronous) is complete when a
   * NULL-stream call that follows it returns. */
  struct adr_stream* def = adr_stream_default(g_conf.dev);
  assert_non_null(def);
  conf_fill(h, n, 32);
  ASSERT_OK(adr_copy(g_conf.dev, d, g_conf.host, h, n, def, CONF_ERR));
  ASSERT_OK(adr_memset(g_conf.dev, d + 1, 0x11, 5, def, CONF_ERR));
  memset(back, 0, n);
  ASSERT_OK(adr_copy(g_conf.host, back, g_conf.dev, d, n, NULL, CONF_ERR));
  conf_expect_pattern(back, 1, 32, "first byte after default-stream work + NULL-stream read");
  conf_expect_bytes(back + 1, 5, 0x11, "default-stream memset read on the NULL stream");
  conf_expect_pattern_at(back + 6, n - 6, 32, 6, "default-stream copy read on the NULL stream");

  conf_host_free(back);
  conf_host_free(h);
  conf_dev_free(g_conf.dev, d, n, NULL);
}

/* adr_copy accepts a stream of either side. Host <-> device copies ordered
 * on a stream of the CPU device (the host side) complete with that
 * stream. */
void test_copy_on_host_stream(void** state) {
  (void)state;
  const size_t n = 4 * CONF_MIB + 9;
  uint8_t* d = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  uint8_t* h = conf_host_alloc(n);
  uint8_t* back = conf_host_alloc(n);
  struct adr_stream* hs = conf_stream_create(g_conf.cpu);
  conf_fill(h, n, 451);
  memset(back, 0, n);
  ASSERT_OK(adr_memset(g_conf.dev, d, 0, n, NULL, CONF_ERR));
  ASSERT_OK(adr_copy(g_conf.dev, d, g_conf.host, h, n, hs, CONF_ERR));
  ASSERT_OK(adr_copy(g_conf.host, back, g_conf.dev, d, n, hs, CONF_ERR));
  ASSERT_OK(adr_stream_synchronize(hs, CONF_ERR));
  conf_expect_pattern(back, n, 451, "round trip ordered on a stream of the CPU device");
  conf_stream_destroy(hs);
  conf_host_free(back);
  conf_host_free(h);
  conf_dev_free(g_conf.dev, d, n, NULL);
}

/* ADR_CAP_SYNC_DOWNLOADS (adr.h): a copy from the device into host memory
 * has completed when adr_copy returns, on a created stream and on the
 * default stream: the bytes are read at once, with no synchronize. */
void test_copy_sync_downloads(void** state) {
  (void)state;
  const size_t n = 16 * CONF_MIB + 5;
  uint8_t* d = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  uint8_t* h = conf_host_alloc(n);
  uint8_t* back = conf_host_alloc(n);
  struct adr_stream* s = conf_stream_create(g_conf.dev);
  conf_fill(h, n, 733);
  ASSERT_OK(adr_copy(g_conf.dev, d, g_conf.host, h, n, NULL, CONF_ERR));
  struct adr_stream* streams[2] = {s, adr_stream_default(g_conf.dev)};
  for (int i = 0; i < 2; i++) {
    memset(back, 0, n);
    ASSERT_OK(adr_copy(g_conf.host, back, g_conf.dev, d, n, streams[i], CONF_ERR));
    conf_expect_pattern(back, n, 733,
                        i == 0 ? "download on a created stream, read as adr_copy returned"
                               : "download on the default stream, read as adr_copy returned");
  }
  conf_stream_destroy(s);
  conf_host_free(back);
  conf_host_free(h);
  conf_dev_free(g_conf.dev, d, n, NULL);
}
