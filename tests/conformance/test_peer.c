/* SPDX-License-Identifier: Apache-2.0
 *
 * Conformance: copies between the device under test and a second device
 * named by ADR_CONFORMANCE_PEER ("cpu", "opencl:0" ...). Between backends
 * the core stages through host memory in chunks; sizes go past a chunk.
 * Registered only when ADR_CONFORMANCE_PEER is set (harness.c says so).
 */
#include "conformance.h"

enum { GUARD = 64 };

void test_peer_round_trip(void** state) {
  (void)state;
  struct adr_device* dev = g_conf.dev;
  struct adr_device* peer = g_conf.peer;
  static const size_t sizes[] = {1, 63, 4097, CONF_MIB + 5, 9 * CONF_MIB + 3, 33 * CONF_MIB + 1};

  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    size_t n = sizes[i];
    uint32_t seed = 300 + (uint32_t)i;
    char what[128];
    uint8_t* a = conf_dev_alloc(dev, n, 0, NULL);
    uint8_t* p = conf_dev_alloc(peer, n + GUARD, 0, NULL);
    uint8_t* b = conf_dev_alloc(dev, n + GUARD, 0, NULL);
    uint8_t* h = conf_host_alloc(n + GUARD);

    conf_fill(h, n, seed);
    conf_upload(dev, a, h, n);
    ASSERT_OK(adr_memset(peer, p, 0xEE, n + GUARD, NULL, CONF_ERR));
    ASSERT_OK(adr_memset(dev, b, 0x11, n + GUARD, NULL, CONF_ERR));

    /* device -> peer -> device */
    ASSERT_OK(adr_copy(peer, p, dev, a, n, NULL, CONF_ERR));
    ASSERT_OK(adr_copy(dev, b, peer, p, n, NULL, CONF_ERR));

    memset(h, 0, n + GUARD);
    conf_download(peer, h, p, n + GUARD);
    snprintf(what, sizeof(what), "%zu bytes %s -> %s", n, adr_device_name(dev),
             adr_device_name(peer));
    conf_expect_pattern(h, n, seed, what);
    conf_expect_bytes(h + n, GUARD, 0xEE, "peer bytes past the copy");

    memset(h, 0, n + GUARD);
    conf_download(dev, h, b, n + GUARD);
    snprintf(what, sizeof(what), "%zu bytes %s -> %s -> %s", n, adr_device_name(dev),
             adr_device_name(peer), adr_device_name(dev));
    conf_expect_pattern(h, n, seed, what);
    conf_expect_bytes(h + n, GUARD, 0x11, "device bytes past the round trip");

    conf_host_free(h);
    conf_dev_free(dev, b, n + GUARD, NULL);
    conf_dev_free(peer, p, n + GUARD, NULL);
    conf_dev_free(dev, a, n, NULL);
  }

  /* Slices on both sides, and the copies ordered on a stream of the
   * source (there) and of the destination (back). */
  const size_t N = 3 * 4096, off = 7, off_peer = 4093, len = 4099;
  uint8_t* a = conf_dev_alloc(dev, N, 0, NULL);
  uint8_t* p = conf_dev_alloc(peer, N, 0, NULL);
  uint8_t* b = conf_dev_alloc(dev, N, 0, NULL);
  uint8_t* h = conf_host_alloc(N);
  struct adr_stream* s = conf_stream_create(dev);
  conf_fill(h, N, 310);
  conf_upload(dev, a, h, N);
  conf_fill(h, N, 311);
  conf_upload(peer, p, h, N);
  conf_fill(h, N, 312);
  conf_upload(dev, b, h, N);

  ASSERT_OK(adr_copy(peer, p + off_peer, dev, a + off, len, s, CONF_ERR));
  ASSERT_OK(adr_copy(dev, b + 1, peer, p + off_peer, len, s, CONF_ERR));
  ASSERT_OK(adr_stream_synchronize(s, CONF_ERR));

  conf_download(peer, h, p, N);
  conf_expect_pattern(h, off_peer, 311, "peer bytes before the slice");
  conf_expect_pattern_at(h + off_peer, len, 310, off, "slice on the peer");
  conf_expect_pattern_at(h + off_peer + len, N - off_peer - len, 311, off_peer + len,
                         "peer bytes after the slice");
  conf_download(dev, h, b, N);
  conf_expect_pattern(h, 1, 312, "device byte before the slice brought back");
  conf_expect_pattern_at(h + 1, len, 310, off, "slice brought back from the peer");
  conf_expect_pattern_at(h + 1 + len, N - 1 - len, 312, 1 + len,
                         "device bytes after the slice brought back");

  conf_stream_destroy(s);
  conf_host_free(h);
  conf_dev_free(dev, b, N, NULL);
  conf_dev_free(peer, p, N, NULL);
  conf_dev_free(dev, a, N, NULL);
}
