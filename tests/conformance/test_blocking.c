/* SPDX-License-Identifier: Apache-2.0
 *
 * The blocking (NULL-stream) path and the host shortcuts behind it
 * (backend.h: copy_sync / memset_sync; docs/devices.md "How backends keep
 * it fast"), from the application's side:
 *   - bytes are right at every size around the shortcuts (0, 1, odd sizes,
 *     4 KiB +- 1, larger), at unaligned offsets, in every direction, for
 *     blocking calls and for asynchronous ones on a created stream, and the
 *     bytes around the range stay untouched;
 *   - a blocking call is ordered after asynchronous work queued before it
 *     on the default stream, including work held back by a foreign event
 *     and work the application queued itself on adr's native queue;
 *   - an asynchronous small copy or fill on a held-back stream returns
 *     before the stream is released.
 * The first two cases run before any native queue is handed out (the
 * shortcuts are on); the gated ones run with the ordering cases at the end
 * (harness.c).
 */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "conf_native.h"
#include "conformance.h"

#define GATE_CLOSED_MS 2000
#define RETURNS_WITHIN_MS 1000

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Sizes around the host shortcuts and the 4-byte fill granularity of
 * queued fills, and offsets that break every alignment. */
static const size_t k_sizes[] = {0, 1, 3, 4, 63, 64, 65, 4095, 4096, 4097, 65536 + 7};
static const size_t k_offsets[] = {0, 1, 3, 61};
#define N_SIZES (sizeof(k_sizes) / sizeof(k_sizes[0]))
#define N_OFFSETS (sizeof(k_offsets) / sizeof(k_offsets[0]))
#define SPAN (65536 + 7 + 61 + 64)

/* One round: H2D at dst offset, D2D to another offset, D2H, memset, each
 * checked with the bytes around it; `s` NULL = blocking calls, else queued
 * on s and synchronised before the check. */
static void round_trip(struct adr_stream* s, void* a, void* b, uint8_t* host, uint8_t* out,
                       size_t size, size_t off, uint32_t seed) {
  char what[160];
  /* Known background on both device buffers and the host result. */
  ASSERT_OK(adr_memset(g_conf.dev, a, 0xA1, SPAN, NULL, CONF_ERR));
  ASSERT_OK(adr_memset(g_conf.dev, b, 0xB2, SPAN, NULL, CONF_ERR));
  conf_fill(host, SPAN, seed);
  memset(out, 0xC3, SPAN);

  uint8_t* da = (uint8_t*)a + off;
  uint8_t* db = (uint8_t*)b + (off + 5) % 64;
  ASSERT_OK(adr_copy(g_conf.dev, da, g_conf.host, host + off, size, s, CONF_ERR));
  ASSERT_OK(adr_copy(g_conf.dev, db, g_conf.dev, da, size, s, CONF_ERR));
  ASSERT_OK(adr_copy(g_conf.host, out + off, g_conf.dev, db, size, s, CONF_ERR));
  if (s != NULL) ASSERT_OK(adr_stream_synchronize(s, CONF_ERR));
  snprintf(what, sizeof(what), "%s H2D/D2D/D2H of %zu bytes at offset %zu",
           s ? "queued" : "blocking", size, off);
  conf_expect_bytes(out, off, 0xC3, what);
  conf_expect_pattern_at(out + off, size, seed, off, what);
  conf_expect_bytes(out + off + size, SPAN - off - size, 0xC3, what);

  /* The device buffers around the ranges (blocking read-back). */
  conf_download(g_conf.dev, out, a, SPAN);
  conf_expect_bytes(out, off, 0xA1, "bytes before the upload");
  conf_expect_pattern_at(out + off, size, seed, off, "uploaded bytes");
  conf_expect_bytes(out + off + size, SPAN - off - size, 0xA1, "bytes after the upload");
  size_t boff = (off + 5) % 64;
  conf_download(g_conf.dev, out, b, SPAN);
  conf_expect_bytes(out, boff, 0xB2, "bytes before the device copy");
  conf_expect_pattern_at(out + boff, size, seed, off, "device-copied bytes");
  conf_expect_bytes(out + boff + size, SPAN - boff - size, 0xB2, "bytes after the device copy");

  /* A fill over part of the upload. */
  ASSERT_OK(adr_memset(g_conf.dev, da, 0x5E, size, s, CONF_ERR));
  if (s != NULL) ASSERT_OK(adr_stream_synchronize(s, CONF_ERR));
  conf_download(g_conf.dev, out, a, SPAN);
  snprintf(what, sizeof(what), "%s memset of %zu bytes at offset %zu", s ? "queued" : "blocking",
           size, off);
  conf_expect_bytes(out, off, 0xA1, what);
  conf_expect_bytes(out + off, size, 0x5E, what);
  conf_expect_bytes(out + off + size, SPAN - off - size, 0xA1, what);
}

void test_blocking_sizes_and_offsets(void** state) {
  (void)state;
  void* a = conf_dev_alloc(g_conf.dev, SPAN, 0, NULL);
  void* b = conf_dev_alloc(g_conf.dev, SPAN, 0, NULL);
  uint8_t* host = conf_host_alloc(SPAN);
  uint8_t* out = conf_host_alloc(SPAN);
  struct adr_stream* s = conf_stream_create(g_conf.dev);
  uint32_t seed = 900;
  for (size_t i = 0; i < N_SIZES; i++)
    for (size_t j = 0; j < N_OFFSETS; j++) {
      round_trip(NULL, a, b, host, out, k_sizes[i], k_offsets[j], seed++);
      round_trip(s, a, b, host, out, k_sizes[i], k_offsets[j], seed++);
    }
  conf_stream_destroy(s);
  conf_host_free(out);
  conf_host_free(host);
  conf_dev_free(g_conf.dev, a, SPAN, NULL);
  conf_dev_free(g_conf.dev, b, SPAN, NULL);
}

/* Asynchronous work on the default stream, then blocking calls: each sees
 * (and is not overwritten by) the work queued before it. The large fill
 * keeps the device busy long enough that a blocking call that skipped the
 * queue would land before it and be overwritten. */
void test_blocking_after_queued_work(void** state) {
  (void)state;
  const size_t n = 32 * CONF_MIB;
  struct adr_stream* def = adr_stream_default(g_conf.dev);
  void* a = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  void* b = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  uint8_t* host = conf_host_alloc(4096);
  uint8_t* out = conf_host_alloc(4096);
  for (int round = 0; round < 3; round++) {
    uint32_t seed = 77 + (uint32_t)round;
    conf_fill(host, 4096, seed);
    /* Queued: fill a, copy a -> b. Blocking: a small upload into the
     * start of b and a small fill near its end, then downloads. */
    ASSERT_OK(adr_memset(g_conf.dev, a, 0x30 + round, n, def, CONF_ERR));
    ASSERT_OK(adr_copy(g_conf.dev, b, g_conf.dev, a, n, def, CONF_ERR));
    ASSERT_OK(adr_copy(g_conf.dev, (uint8_t*)b + 1, g_conf.host, host, 64, NULL, CONF_ERR));
    ASSERT_OK(adr_memset(g_conf.dev, (uint8_t*)b + n - 100, 0x7E, 33, NULL, CONF_ERR));
    ASSERT_OK(adr_copy(g_conf.host, out, g_conf.dev, b, 4096, NULL, CONF_ERR));
    conf_expect_bytes(out, 1, (uint8_t)(0x30 + round), "queued fill before the blocking upload");
    conf_expect_pattern(out + 1, 64, seed, "blocking upload after queued work");
    conf_expect_bytes(out + 65, 4096 - 65, (uint8_t)(0x30 + round), "queued copy");
    ASSERT_OK(adr_copy(g_conf.host, out, g_conf.dev, (uint8_t*)b + n - 128, 128, NULL, CONF_ERR));
    conf_expect_bytes(out, 28, (uint8_t)(0x30 + round), "queued copy before the fill");
    conf_expect_bytes(out + 28, 33, 0x7E, "blocking fill after queued work");
    conf_expect_bytes(out + 61, 128 - 61, (uint8_t)(0x30 + round), "queued copy after the fill");
  }
  conf_host_free(out);
  conf_host_free(host);
  conf_dev_free(g_conf.dev, a, n, NULL);
  conf_dev_free(g_conf.dev, b, n, NULL);
}

/* ---- gated cases (native helper) ---------------------------------------- */

static const struct conf_native* helper(void) {
  char why[256];
  const struct conf_native* h = conf_native_get(g_conf.dev, why, sizeof(why));
  if (h == NULL) fail_msg("no native helper: %s", why);
  return h;
}

struct opener {
  const struct conf_native* h;
  struct conf_gate* gate;
  unsigned delay_ms;
  double opened_at;
  pthread_t thread;
};

static void* opener_main(void* arg) {
  struct opener* o = arg;
  struct timespec ts = {o->delay_ms / 1000, (long)(o->delay_ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
  o->opened_at = now_ms();
  o->h->gate_open(o->gate);
  return NULL;
}

static void opener_start(struct opener* o, const struct conf_native* h, struct conf_gate* g,
                         unsigned delay_ms) {
  *o = (struct opener){.h = h, .gate = g, .delay_ms = delay_ms};
  if (pthread_create(&o->thread, NULL, opener_main, o) != 0) fail_msg("pthread_create failed");
}

static struct conf_gate* gate_new(const struct conf_native* h, void** sync_event) {
  struct conf_gate* g = NULL;
  char why[256] = "";
  void* se = NULL;
  int st = h->gate_create(g_conf.dev, &g, &se, why, sizeof(why));
  if (st != 0) fail_msg("creating a native gate: %s (%s)", adr_status_name(st), why);
  if (sync_event != NULL) *sync_event = se;
  return g;
}

static struct adr_event* import_gate(void* sync_event) {
  struct adr_event* e = NULL;
  ASSERT_OK(adr_event_import(g_conf.dev, sync_event, &e, CONF_ERR));
  conf_track_event(e);
  return e;
}

/* The default stream held back by a foreign event with a fill queued
 * behind it: a blocking small upload and a blocking small fill wait for
 * the gate and land on top of the fill. */
void test_blocking_after_gated_work(void** state) {
  (void)state;
  const struct conf_native* h = helper();
  const size_t n = 8192;
  struct adr_stream* def = adr_stream_default(g_conf.dev);
  void* a = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  uint8_t* host = conf_host_alloc(n);
  conf_fill(host, n, 4242);
  ASSERT_OK(adr_memset(g_conf.dev, a, 0x11, n, NULL, CONF_ERR));
  void* se = NULL;
  struct conf_gate* gate = gate_new(h, &se);
  struct adr_event* imported = import_gate(se);
  ASSERT_OK(adr_stream_wait_event(def, imported, CONF_ERR));
  ASSERT_OK(adr_memset(g_conf.dev, a, 0x66, n, def, CONF_ERR));
  struct opener o;
  opener_start(&o, h, gate, 300);
  double t0 = now_ms();
  ASSERT_OK(adr_copy(g_conf.dev, (uint8_t*)a + 3, g_conf.host, host, 64, NULL, CONF_ERR));
  double t1 = now_ms();
  pthread_join(o.thread, NULL);
  if (t1 < o.opened_at - 1)
    fail_msg(
        "a blocking 64-byte upload on the default stream returned %.0f ms before the foreign "
        "event it was queued behind was signalled",
        o.opened_at - t1);
  (void)t0;
  ASSERT_OK(adr_memset(g_conf.dev, (uint8_t*)a + 100, 0x77, 5, NULL, CONF_ERR));
  uint8_t* out = conf_host_alloc(n);
  conf_download(g_conf.dev, out, a, n);
  conf_expect_bytes(out, 3, 0x66, "gated fill before the upload");
  conf_expect_pattern(out + 3, 64, 4242, "blocking upload after the gated fill");
  conf_expect_bytes(out + 67, 33, 0x66, "gated fill between");
  conf_expect_bytes(out + 100, 5, 0x77, "blocking fill");
  conf_expect_bytes(out + 105, n - 105, 0x66, "gated fill after");
  h->gate_destroy(gate);
  conf_host_free(out);
  conf_host_free(host);
  conf_dev_free(g_conf.dev, a, n, NULL);
}

/* The application's own work on adr's default native queue, held back by
 * a gate: blocking small uploads and fills wait for it and land on top. */
void test_blocking_after_application_work(void** state) {
  (void)state;
  const struct conf_native* h = helper();
  const size_t n = 16 * CONF_KIB;
  void* a = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  uint8_t* host = conf_host_alloc(n);
  uint8_t* out = conf_host_alloc(n);
  conf_fill(host, n, 515);
  ASSERT_OK(adr_memset(g_conf.dev, a, 0x01, n, NULL, CONF_ERR));
  struct conf_gate* gate = gate_new(h, NULL);
  char why[256] = "";
  int st = h->fill(g_conf.dev, NULL, gate, a, n, 0x9D, why, sizeof(why));
  if (st != 0) fail_msg("queueing the application's work: %s (%s)", adr_status_name(st), why);
  struct opener o;
  opener_start(&o, h, gate, 300);
  ASSERT_OK(adr_copy(g_conf.dev, (uint8_t*)a + 1, g_conf.host, host, 63, NULL, CONF_ERR));
  double t1 = now_ms();
  pthread_join(o.thread, NULL);
  if (t1 < o.opened_at - 1)
    fail_msg(
        "a blocking upload returned %.0f ms before the application's gated work on the "
        "queue was released",
        o.opened_at - t1);
  /* Ungated application work, then a blocking fill and upload at once. */
  st = h->fill(g_conf.dev, NULL, NULL, a, n, 0x4B, why, sizeof(why));
  if (st != 0) fail_msg("queueing the application's work: %s (%s)", adr_status_name(st), why);
  ASSERT_OK(adr_memset(g_conf.dev, (uint8_t*)a + 200, 0x2A, 4097, NULL, CONF_ERR));
  ASSERT_OK(adr_copy(g_conf.dev, (uint8_t*)a + 8000, g_conf.host, host, 4095, NULL, CONF_ERR));
  conf_download(g_conf.dev, out, a, n);
  conf_expect_bytes(out, 200, 0x4B, "application fill");
  conf_expect_bytes(out + 200, 4097, 0x2A, "blocking fill after the application's fill");
  conf_expect_bytes(out + 4297, 8000 - 4297, 0x4B, "application fill");
  conf_expect_pattern(out + 8000, 4095, 515, "blocking upload after the application's fill");
  conf_expect_bytes(out + 12095, n - 12095, 0x4B, "application fill");
  ASSERT_OK(adr_stream_synchronize(adr_stream_default(g_conf.dev), CONF_ERR));
  h->finish(g_conf.dev);
  h->gate_destroy(gate);
  conf_host_free(out);
  conf_host_free(host);
  conf_dev_free(g_conf.dev, a, n, NULL);
}

/* Created streams held back by one foreign event: small uploads, device
 * copies, fills (and downloads, where they follow the stream) queued on
 * them return before the gate opens, and are right afterwards. One gate
 * holds every size's stream, so the case waits for it once. */
void test_async_small_copy_busy_stream(void** state) {
  (void)state;
  const struct conf_native* h = helper();
  enum { NS = 5 };
  const size_t sizes[NS] = {1, 63, 64, 65, 4097};
  const size_t n = 8192;
  /* Downloads into pageable host memory are synchronous on Vulkan
   * (ADR_CAP_SYNC_DOWNLOADS) and on CUDA/HIP, whose drivers block on a
   * copy to pageable memory (backends/cuda/README.md, "Pageable host
   * memory"): those are not asked to return early. */
  bool async_downloads = !(g_conf.info.caps & ADR_CAP_SYNC_DOWNLOADS) &&
                         strcmp(g_conf.info.backend, "cuda") != 0 &&
                         strcmp(g_conf.info.backend, "hip") != 0;
  void *a[NS], *b[NS];
  uint8_t *host[NS], *early[NS];
  struct adr_stream* s[NS];
  uint8_t* out = conf_host_alloc(n);
  for (size_t i = 0; i < NS; i++) {
    a[i] = conf_dev_alloc(g_conf.dev, n, 0, NULL);
    b[i] = conf_dev_alloc(g_conf.dev, n, 0, NULL);
    host[i] = conf_host_alloc(n);
    early[i] = conf_host_alloc(n);
    conf_fill(host[i], n, 3000 + (uint32_t)i);
    memset(early[i], 0xEE, n);
    ASSERT_OK(adr_memset(g_conf.dev, a[i], 0x12, n, NULL, CONF_ERR));
    ASSERT_OK(adr_memset(g_conf.dev, b[i], 0x34, n, NULL, CONF_ERR));
  }
  void* se = NULL;
  struct conf_gate* gate = gate_new(h, &se);
  struct adr_event* imported = import_gate(se);
  for (size_t i = 0; i < NS; i++) {
    s[i] = conf_stream_create(g_conf.dev);
    ASSERT_OK(adr_stream_wait_event(s[i], imported, CONF_ERR));
  }
  struct opener o;
  opener_start(&o, h, gate, GATE_CLOSED_MS);
  double t[NS][5];
  for (size_t i = 0; i < NS; i++) {
    size_t size = sizes[i];
    t[i][0] = now_ms();
    ASSERT_OK(adr_copy(g_conf.dev, (uint8_t*)a[i] + 1, g_conf.host, host[i], size, s[i], CONF_ERR));
    t[i][1] = now_ms();
    ASSERT_OK(adr_copy(g_conf.dev, (uint8_t*)b[i] + 2, g_conf.dev, (uint8_t*)a[i] + 1, size, s[i],
                       CONF_ERR));
    t[i][2] = now_ms();
    ASSERT_OK(adr_memset(g_conf.dev, (uint8_t*)a[i] + 5000, 0x56, size < 3000 ? size : 3000, s[i],
                         CONF_ERR));
    t[i][3] = now_ms();
    if (async_downloads)
      ASSERT_OK(
          adr_copy(g_conf.host, early[i], g_conf.dev, (uint8_t*)b[i] + 2, size, s[i], CONF_ERR));
    t[i][4] = now_ms();
  }
  /* A blocked call waits for the gate: the calls together take longer
   * than RETURNS_WITHIN_MS. */
  if (t[NS - 1][4] - t[0][0] > RETURNS_WITHIN_MS) {
    size_t w = 0;
    for (size_t i = 1; i < NS; i++)
      if (t[i][4] - t[i][0] > t[w][4] - t[w][0]) w = i;
    fail_msg(
        "asynchronous calls on streams held back by a foreign event took %.0f ms; the slowest, "
        "%zu bytes: upload %.0f, device copy %.0f, fill %.0f, download %s %.0f ms (the gate "
        "stays closed %d ms): the host was blocked",
        t[NS - 1][4] - t[0][0], sizes[w], t[w][1] - t[w][0], t[w][2] - t[w][1],
        t[w][3] - t[w][2], async_downloads ? "" : "(not run)", t[w][4] - t[w][3],
        GATE_CLOSED_MS);
  }
  for (size_t i = 0; i < NS; i++) ASSERT_OK(adr_stream_synchronize(s[i], CONF_ERR));
  pthread_join(o.thread, NULL);
  for (size_t i = 0; i < NS; i++) conf_stream_destroy(s[i]);
  h->gate_destroy(gate);
  for (size_t i = 0; i < NS; i++) {
    size_t size = sizes[i];
    uint32_t seed = 3000 + (uint32_t)i;
    conf_download(g_conf.dev, out, b[i], n);
    conf_expect_bytes(out, 2, 0x34, "before the queued device copy");
    conf_expect_pattern(out + 2, size, seed, "queued upload then device copy");
    conf_expect_bytes(out + 2 + size, n - 2 - size, 0x34, "after the queued device copy");
    conf_download(g_conf.dev, out, a[i], n);
    size_t f = size < 3000 ? size : 3000;
    conf_expect_bytes(out + 5000, f, 0x56, "queued fill");
    conf_expect_bytes(out + 5000 + f, n - 5000 - f, 0x12, "after the queued fill");
    if (async_downloads) conf_expect_pattern(early[i], size, seed, "queued download");
    conf_host_free(early[i]);
    conf_host_free(host[i]);
    conf_dev_free(g_conf.dev, a[i], n, NULL);
    conf_dev_free(g_conf.dev, b[i], n, NULL);
  }
  conf_host_free(out);
}
