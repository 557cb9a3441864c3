/* SPDX-License-Identifier: Apache-2.0
 *
 * Conformance: adr_memset over whole allocations, prefixes, suffixes and
 * slices, with neighbouring bytes checked.
 */
#include "conformance.h"

void test_memset_full(void** state) {
  (void)state;
  static const size_t sizes[] = {1, 63, 64, 4097, CONF_MIB + 1};
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    size_t n = sizes[i];
    uint8_t* d = conf_dev_alloc(g_conf.dev, n, 0, NULL);
    uint8_t* h = conf_host_alloc(n);
    char what[64];

    ASSERT_OK(adr_memset(g_conf.dev, d, 0xAB, n, NULL, CONF_ERR));
    conf_download(g_conf.dev, h, d, n);
    snprintf(what, sizeof(what), "memset 0xAB of %zu bytes", n);
    conf_expect_bytes(h, n, 0xAB, what);

    ASSERT_OK(adr_memset(g_conf.dev, d, 0, n, NULL, CONF_ERR));
    conf_download(g_conf.dev, h, d, n);
    snprintf(what, sizeof(what), "memset 0 of %zu bytes", n);
    conf_expect_bytes(h, n, 0x00, what);

    /* The value is converted to unsigned char, as memset does. */
    ASSERT_OK(adr_memset(g_conf.dev, d, 0x1AB, n, NULL, CONF_ERR));
    conf_download(g_conf.dev, h, d, n);
    conf_expect_bytes(h, n, 0xAB, "memset with value 0x1AB");
    ASSERT_OK(adr_memset(g_conf.dev, d, -1, n, NULL, CONF_ERR));
    conf_download(g_conf.dev, h, d, n);
    conf_expect_bytes(h, n, 0xFF, "memset with value -1");

    conf_host_free(h);
    conf_dev_free(g_conf.dev, d, n, NULL);
  }
}

void test_memset_partial_and_middle(void** state) {
  (void)state;
  const size_t N = 8192;
  struct {
    size_t off, len;
  } cases[] = {
      {0, 100},     /* prefix */
      {7, 4093},    /* middle, odd offset and length */
      {4093, 1},    /* single byte */
      {N - 33, 33}, /* suffix */
      {1, N - 2},   /* everything but the first and last byte */
  };
  uint8_t* d = conf_dev_alloc(g_conf.dev, N, 0, NULL);
  uint8_t* h = conf_host_alloc(N);
  struct adr_stream* s = conf_stream_create(g_conf.dev);

  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
    /* NULL stream, then a created stream synchronised explicitly. */
    for (int on_stream = 0; on_stream < 2; on_stream++) {
      size_t off = cases[c].off, len = cases[c].len;
      char what[96];
      conf_fill(h, N, (uint32_t)c + 40);
      conf_upload(g_conf.dev, d, h, N);
      if (on_stream) {
        ASSERT_OK(adr_memset(g_conf.dev, d + off, 0xAB, len, s, CONF_ERR));
        ASSERT_OK(adr_stream_synchronize(s, CONF_ERR));
      } else {
        ASSERT_OK(adr_memset(g_conf.dev, d + off, 0xAB, len, NULL, CONF_ERR));
      }
      memset(h, 0, N);
      conf_download(g_conf.dev, h, d, N);
      snprintf(what, sizeof(what), "bytes before memset [%zu, %zu)%s", off, off + len,
               on_stream ? " on a stream" : "");
      conf_expect_pattern(h, off, (uint32_t)c + 40, what);
      snprintf(what, sizeof(what), "memset [%zu, %zu)%s", off, off + len,
               on_stream ? " on a stream" : "");
      conf_expect_bytes(h + off, len, 0xAB, what);
      snprintf(what, sizeof(what), "bytes after memset [%zu, %zu)%s", off, off + len,
               on_stream ? " on a stream" : "");
      conf_expect_pattern_at(h + off + len, N - off - len, (uint32_t)c + 40, off + len, what);
    }
  }
  conf_stream_destroy(s);
  conf_host_free(h);
  conf_dev_free(g_conf.dev, d, N, NULL);
}
