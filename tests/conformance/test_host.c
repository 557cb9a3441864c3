/* SPDX-License-Identifier: Apache-2.0
 *
 * Conformance: pageable host memory as a NULL device (adr.h, adr_copy and
 * adr_memset; docs/devices.md "Host memory"). Every case names the host
 * side as NULL explicitly, whatever g_conf.host is: uploads and downloads
 * on the NULL stream, the default stream and a created stream, slices at
 * odd offsets on both sides, host memset, host-to-host copies ordered on a
 * stream, and the refusals (NULL pointers, device memory passed as host
 * memory, a stream of another device, sizes that cannot be valid).
 *
 * test_host_no_cpu_backend runs last in host mode (ADR_CONFORMANCE_HOST=
 * null) when the device under test is not the CPU: after the whole suite
 * has run, the cpu backend was never loaded.
 */
#include <stdio.h>
#include <stdlib.h>

#include "conformance.h"

static const size_t g_sizes[] = {1, 63, 64, 4097, 65536 + 3, CONF_MIB + 7, 9 * CONF_MIB + 5};
enum { NSIZES = sizeof(g_sizes) / sizeof(g_sizes[0]), GUARD = 64 };

void test_host_upload_download(void** state) {
  (void)state;
  for (size_t i = 0; i < NSIZES; i++) {
    size_t n = g_sizes[i];
    uint8_t* d = conf_dev_alloc(g_conf.dev, n + GUARD, 0, NULL);
    ASSERT_OK(adr_memset(g_conf.dev, d, 0xEE, n + GUARD, NULL, CONF_ERR));
    uint8_t* src = conf_host_alloc(n + 1);
    conf_fill(src + 1, n, 3100 + (uint32_t)i);
    ASSERT_OK(adr_copy(g_conf.dev, d, NULL, src + 1, n, NULL, CONF_ERR));

    uint8_t* h = conf_host_alloc(n + GUARD + 2 * GUARD);
    memset(h, 0xC3, n + 3 * GUARD);
    ASSERT_OK(adr_copy(NULL, h + GUARD, g_conf.dev, d, n + GUARD, NULL, CONF_ERR));
    char what[96];
    snprintf(what, sizeof(what), "upload from / download to host memory (NULL device), %zu B", n);
    conf_expect_pattern(h + GUARD, n, 3100 + (uint32_t)i, what);
    conf_expect_bytes(h + GUARD + n, GUARD, 0xEE, "device bytes past the upload");
    conf_expect_bytes(h, GUARD, 0xC3, "host bytes before the download");
    conf_expect_bytes(h + 2 * GUARD + n, GUARD, 0xC3, "host bytes after the download");
    conf_host_free(h);
    conf_host_free(src);
    conf_dev_free(g_conf.dev, d, n + GUARD, NULL);
  }
}

/* On the default stream and on a created stream: queued, ordered, and
 * complete after adr_stream_synchronize. The download is queued behind a
 * memset of the same stream, which it must see. */
void test_host_on_streams(void** state) {
  (void)state;
  const size_t n = 2 * CONF_MIB + 11;
  struct adr_stream* created = conf_stream_create(g_conf.dev);
  struct adr_stream* streams[] = {adr_stream_default(g_conf.dev), created};
  uint8_t* d = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  uint8_t* h = conf_host_alloc(n);
  uint8_t* back = conf_host_alloc(n);
  for (size_t k = 0; k < 2; k++) {
    struct adr_stream* s = streams[k];
    conf_fill(h, n, 3200 + (uint32_t)k);
    memset(back, 0, n);
    ASSERT_OK(adr_copy(g_conf.dev, d, NULL, h, n, s, CONF_ERR));
    ASSERT_OK(adr_memset(g_conf.dev, d + 4096, 0x5A, 100, s, CONF_ERR));
    ASSERT_OK(adr_copy(NULL, back, g_conf.dev, d, n, s, CONF_ERR));
    ASSERT_OK(adr_stream_synchronize(s, CONF_ERR));
    memset(h + 4096, 0x5A, 100);
    assert_int_equal(memcmp(back, h, n), 0);
  }
  /* A chain of host -> device -> host on one stream, several times in a
   * row without a wait in between: each download sees its own upload. */
  enum { ROUNDS = 4 };
  const size_t m = 64 * CONF_KIB + 1;
  uint8_t* hs[ROUNDS];
  uint8_t* outs[ROUNDS];
  for (int r = 0; r < ROUNDS; r++) {
    hs[r] = conf_host_alloc(m);
    outs[r] = conf_host_alloc(m);
    conf_fill(hs[r], m, 3300 + (uint32_t)r);
    ASSERT_OK(adr_copy(g_conf.dev, d, NULL, hs[r], m, created, CONF_ERR));
    ASSERT_OK(adr_copy(NULL, outs[r], g_conf.dev, d, m, created, CONF_ERR));
  }
  ASSERT_OK(adr_stream_synchronize(created, CONF_ERR));
  for (int r = 0; r < ROUNDS; r++) {
    conf_expect_pattern(outs[r], m, 3300 + (uint32_t)r, "round trip queued on a created stream");
    conf_host_free(outs[r]);
    conf_host_free(hs[r]);
  }
  conf_host_free(back);
  conf_host_free(h);
  conf_dev_free(g_conf.dev, d, n, NULL);
  conf_stream_destroy(created);
}

/* Arrow slices: pointers into the middle of a device allocation and of a
 * host buffer, odd offsets and lengths, on the NULL stream and a stream. */
void test_host_slices(void** state) {
  (void)state;
  const size_t N = 3 * 4096 + 17;
  uint8_t* d = conf_dev_alloc(g_conf.dev, N, 0, NULL);
  uint8_t* h = conf_host_alloc(N);
  uint8_t* back = conf_host_alloc(N);
  struct adr_stream* s = conf_stream_create(g_conf.dev);
  static const struct {
    size_t off, len;
  } cases[] = {{0, 1}, {1, 4095}, {4093, 7}, {4096, 4096}, {N - 13, 13}, {5, N - 10}};
  for (size_t k = 0; k < 2; k++) {
    struct adr_stream* st = k == 0 ? NULL : s;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
      size_t off = cases[i].off, len = cases[i].len;
      ASSERT_OK(adr_memset(g_conf.dev, d, 0x11, N, st, CONF_ERR));
      conf_fill(h, N, 3400 + (uint32_t)i);
      /* host[off, off+len) -> device[off, off+len), then back into
       * back[N - len - 0, N) (another offset on the host side). */
      ASSERT_OK(adr_copy(g_conf.dev, d + off, NULL, h + off, len, st, CONF_ERR));
      memset(back, 0x22, N);
      ASSERT_OK(adr_copy(NULL, back + (N - len), g_conf.dev, d + off, len, st, CONF_ERR));
      if (st != NULL) ASSERT_OK(adr_stream_synchronize(st, CONF_ERR));
      conf_expect_pattern_at(back + (N - len), len, 3400 + (uint32_t)i, off, "sliced round trip");
      conf_expect_bytes(back, N - len, 0x22, "host bytes before a sliced download");
      /* The device bytes outside the slice were not touched. */
      ASSERT_OK(adr_copy(NULL, back, g_conf.dev, d, N, NULL, CONF_ERR));
      conf_expect_bytes(back, off, 0x11, "device bytes before a sliced upload");
      conf_expect_bytes(back + off + len, N - off - len, 0x11,
                        "device bytes after a sliced upload");
    }
  }
  conf_stream_destroy(s);
  conf_host_free(back);
  conf_host_free(h);
  conf_dev_free(g_conf.dev, d, N, NULL);
}

/* adr_memset(NULL, ...) fills host memory: at once with the NULL stream;
 * with a stream, after the work queued on it (here a download into the
 * same buffer), and complete when the call returns. */
void test_host_memset(void** state) {
  (void)state;
  const size_t n = CONF_MIB + 3;
  uint8_t* h = conf_host_alloc(n + 2);
  memset(h, 0x33, n + 2);
  ASSERT_OK(adr_memset(NULL, h + 1, 0x1AB, n, NULL, CONF_ERR));
  conf_expect_bytes(h + 1, n, 0xAB, "host memset (value converted to unsigned char)");
  assert_int_equal(h[0], 0x33);
  assert_int_equal(h[n + 1], 0x33);
  ASSERT_OK(adr_memset(NULL, h, 0, 0, NULL, CONF_ERR));
  ASSERT_OK(adr_memset(NULL, NULL, 0, 0, NULL, CONF_ERR));

  uint8_t* d = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  uint8_t* src = conf_host_alloc(n);
  conf_fill(src, n, 3500);
  conf_upload(g_conf.dev, d, src, n);
  struct adr_stream* s = conf_stream_create(g_conf.dev);
  memset(h, 0, n);
  ASSERT_OK(adr_copy(NULL, h, g_conf.dev, d, n, s, CONF_ERR));
  ASSERT_OK(adr_memset(NULL, h + 100, 0x7E, 1000, s, CONF_ERR));
  /* Complete on return: no synchronize before reading. */
  conf_expect_pattern(h, 100, 3500, "download queued before a host memset on the stream");
  conf_expect_bytes(h + 100, 1000, 0x7E, "host memset ordered after the download");
  conf_expect_pattern_at(h + 1100, n - 1100, 3500, 1100, "download after the memset range");
  ASSERT_OK(adr_stream_synchronize(s, CONF_ERR));
  conf_stream_destroy(s);
  conf_host_free(src);
  conf_dev_free(g_conf.dev, d, n, NULL);
  conf_host_free(h);
}

/* Both sides host memory: a memmove by the core, overlapping ranges
 * included; with a stream it runs after the stream's queued work (an
 * upload from the buffer it overwrites must read the old bytes). */
void test_host_to_host(void** state) {
  (void)state;
  const size_t n = 4 * CONF_MIB + 1;
  uint8_t* a = conf_host_alloc(n);
  uint8_t* b = conf_host_alloc(n);
  conf_fill(a, n, 3600);
  ASSERT_OK(adr_copy(NULL, b, NULL, a, n, NULL, CONF_ERR));
  conf_expect_pattern(b, n, 3600, "host to host copy");
  /* Overlapping: memmove semantics. */
  ASSERT_OK(adr_copy(NULL, b + 3, NULL, b, n - 3, NULL, CONF_ERR));
  conf_expect_pattern_at(b + 3, n - 3, 3600, 0, "overlapping host to host copy");
  ASSERT_OK(adr_copy(NULL, b, NULL, a, 0, NULL, CONF_ERR));

  uint8_t* d = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  struct adr_stream* s = conf_stream_create(g_conf.dev);
  conf_fill(a, n, 3601);
  conf_fill(b, n, 3602);
  ASSERT_OK(adr_copy(g_conf.dev, d, NULL, a, n, s, CONF_ERR));
  ASSERT_OK(adr_copy(NULL, a, NULL, b, n, s, CONF_ERR));
  conf_expect_pattern(a, n, 3602, "host to host copy ordered on a stream (complete on return)");
  ASSERT_OK(adr_stream_synchronize(s, CONF_ERR));
  uint8_t* back = conf_host_alloc(n);
  conf_download(g_conf.dev, back, d, n);
  conf_expect_pattern(back, n, 3601, "upload queued before a host copy overwrote its source");
  conf_host_free(back);
  conf_stream_destroy(s);
  conf_dev_free(g_conf.dev, d, n, NULL);
  conf_host_free(b);
  conf_host_free(a);
}

/* Refusals, with nothing written: NULL pointers next to a NULL device,
 * sizes that cannot be valid, and device memory of a device the host
 * cannot access passed as host memory (where the core touches the bytes
 * itself: host memset, host to host). */
void test_host_errors(void** state) {
  (void)state;
  const size_t n = 64;
  uint8_t* d = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  uint8_t h[64], back[64];
  conf_fill(h, n, 3700);
  conf_upload(g_conf.dev, d, h, n);
  struct adr_stream* s = conf_stream_create(g_conf.dev);
  struct adr_stream* streams[] = {NULL, s};
  for (size_t k = 0; k < 2; k++) {
    struct adr_stream* st = streams[k];
    ASSERT_ERR(adr_copy(NULL, NULL, g_conf.dev, d, n, st, CONF_ERR), EINVAL, "adr_copy");
    ASSERT_ERR(adr_copy(g_conf.dev, d, NULL, NULL, n, st, CONF_ERR), EINVAL, "adr_copy");
    ASSERT_ERR(adr_copy(NULL, NULL, NULL, h, n, st, CONF_ERR), EINVAL, "adr_copy");
    ASSERT_ERR(adr_copy(NULL, back, NULL, NULL, n, st, CONF_ERR), EINVAL, "adr_copy");
    ASSERT_ERR(adr_memset(NULL, NULL, 0, n, st, CONF_ERR), EINVAL, "adr_memset");
    ASSERT_ERR(adr_copy(NULL, back, g_conf.dev, d, (size_t)PTRDIFF_MAX + 1, st, CONF_ERR),
               EOVERFLOW, "adr_copy");
    ASSERT_ERR(adr_copy(g_conf.dev, d, NULL, (void*)(UINTPTR_MAX - 8), 64, st, CONF_ERR), EOVERFLOW,
               "adr_copy");
    ASSERT_ERR(adr_copy(NULL, back, NULL, h, (size_t)PTRDIFF_MAX + 1, st, CONF_ERR), EOVERFLOW,
               "adr_copy");
    ASSERT_ERR(adr_memset(NULL, back, 0, (size_t)PTRDIFF_MAX + 1, st, CONF_ERR), EOVERFLOW,
               "adr_memset");
  }
  struct adr_error e;
  memset(&e, 0, sizeof(e));
  assert_int_equal(adr_copy(NULL, NULL, NULL, h, n, NULL, &e), EINVAL);
  if (strstr(e.message, "destination pointer is NULL") == NULL ||
      strstr(e.message, "host memory") == NULL)
    fail_msg("message for a NULL host destination: %s", e.message);
  memset(&e, 0, sizeof(e));
  assert_int_equal(adr_memset(NULL, NULL, 1, n, NULL, &e), EINVAL);
  if (strstr(e.message, "host memory") == NULL)
    fail_msg("message for a NULL host memset: %s", e.message);

  if (!(g_conf.info.caps & ADR_CAP_HOST_ACCESSIBLE)) {
    /* Device memory the host cannot read is not host memory. */
    ASSERT_ERR(adr_memset(NULL, d, 0, n, NULL, CONF_ERR), EINVAL, "adr_memset");
    ASSERT_ERR(adr_memset(NULL, d + 8, 0, 8, s, CONF_ERR), EINVAL, "adr_memset");
    ASSERT_ERR(adr_copy(NULL, back, NULL, d, n, NULL, CONF_ERR), EINVAL, "adr_copy");
    ASSERT_ERR(adr_copy(NULL, d + 1, NULL, h, 8, s, CONF_ERR), EINVAL, "adr_copy");
    memset(&e, 0, sizeof(e));
    assert_int_equal(adr_memset(NULL, d, 0, n, NULL, &e), EINVAL);
    if (strstr(e.message, adr_device_name(g_conf.dev)) == NULL)
      fail_msg("message for device memory passed as host memory: %s", e.message);
    /* The validation layer checks the host side of host <-> device copies
     * too (without it the backend would be handed the address). */
    if (adr_validation_enabled()) {
      ASSERT_ERR(adr_copy(NULL, d + 8, g_conf.dev, d, 8, NULL, CONF_ERR), EINVAL, "adr_copy");
      ASSERT_ERR(adr_copy(g_conf.dev, d, NULL, d + 8, 8, s, CONF_ERR), EINVAL, "adr_copy");
    }
  } else {
    /* Host-accessible device memory is host memory. */
    ASSERT_OK(adr_copy(NULL, back, NULL, d, n, NULL, CONF_ERR));
    conf_expect_pattern(back, n, 3700, "host copy from host-accessible device memory");
  }
  ASSERT_OK(adr_stream_synchronize(s, CONF_ERR));
  conf_stream_destroy(s);
  conf_download(g_conf.dev, back, d, n);
  conf_expect_pattern(back, n, 3700, "device buffer after refused host operations");
  conf_expect_pattern(h, n, 3700, "host buffer after refused host operations");
  conf_dev_free(g_conf.dev, d, n, NULL);
}

/* With one side host memory, the stream must be the other device's. */
void test_host_stream_of_other_device(void** state) {
  (void)state;
  const size_t n = 64;
  struct adr_stream* other = conf_stream_create(g_conf.cpu);
  uint8_t* d = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  uint8_t h[64], back[64];
  conf_fill(h, n, 3800);
  conf_upload(g_conf.dev, d, h, n);
  uint8_t x[64];
  memset(x, 0x44, n);
  ASSERT_ERR(adr_copy(g_conf.dev, d, NULL, x, n, other, CONF_ERR), EINVAL, "adr_copy");
  ASSERT_ERR(adr_copy(NULL, x, g_conf.dev, d, n, other, CONF_ERR), EINVAL, "adr_copy");
  ASSERT_OK(adr_stream_synchronize(other, CONF_ERR));
  conf_expect_bytes(x, n, 0x44, "host buffer after a refused download");
  conf_download(g_conf.dev, back, d, n);
  conf_expect_pattern(back, n, 3800, "device buffer after a refused upload");
  conf_stream_destroy(other);
  conf_dev_free(g_conf.dev, d, n, NULL);
}

/* Host mode without the CPU under test: the whole suite ran with host
 * memory as a NULL device, and the cpu backend was never loaded. */
void test_host_no_cpu_backend(void** state) {
  (void)state;
  size_t count = adr_backend_count();
  bool seen = false;
  for (size_t i = 0; i < count; i++) {
    struct adr_backend_info info;
    memset(&info, 0, sizeof(info));
    info.struct_size = sizeof(info);
    ASSERT_OK(adr_backend_info_get(i, &info, CONF_ERR));
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
