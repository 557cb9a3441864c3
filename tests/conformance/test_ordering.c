/* SPDX-License-Identifier: Apache-2.0
 *
 * Ordering with work the application queued itself, streams gated by a
 * foreign event, and overlapping copies (adr.h: adr_copy, the stream
 * contract; DESIGN.md "Synchronisation rules").
 *
 * The application's side (a native event the host opens later, work
 * queued on adr's own native queue) comes from the backend's helper in
 * conf_native.h; a backend without one has these cases listed as not run,
 * with the reason. Timing checks are generous on purpose: a call on a
 * gated stream must return in under 1 s while the gate stays closed for
 * 2 s (opened by another thread, so a backend that blocks fails the check
 * instead of hanging).
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

static const struct conf_native* helper(void) {
  char why[256];
  const struct conf_native* h = conf_native_get(g_conf.dev, why, sizeof(why));
  if (h == NULL) fail_msg("no native helper: %s", why);
  return h;
}

/* Opens a gate from another thread after a delay. */
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

static void opener_join(struct opener* o) {
  pthread_join(o->thread, NULL);
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

static void app_fill(const struct conf_native* h, struct adr_stream* s, struct conf_gate* g,
                     void* p, size_t n, uint8_t v) {
  char why[256] = "";
  int st = h->fill(g_conf.dev, s, g, p, n, v, why, sizeof(why));
  if (st != 0) fail_msg("queueing the application's work: %s (%s)", adr_status_name(st), why);
}

/* (1) Work the application queued on adr's own queue before an adr call
 * is ordered before that call: on a created stream (the call returns at
 * once, the data follows the application's work), and on the default queue
 * with a NULL stream (the call waits for the application's work, even when
 * it is held back by a gate another thread opens later). */
void test_order_application_work(void** state) {
  (void)state;
  const struct conf_native* h = helper();
  const size_t n = 256 * CONF_KIB;
  uint8_t* host = conf_host_alloc(n);
  void* a = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  void* b = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  ASSERT_OK(adr_memset(g_conf.dev, a, 0x11, n, NULL, CONF_ERR));
  ASSERT_OK(adr_memset(g_conf.dev, b, 0x22, n, NULL, CONF_ERR));

  /* A created stream: application fill of a behind a closed gate, then
   * adr copies a -> b and records an event on the same stream. */
  struct adr_stream* s = conf_stream_create(g_conf.dev);
  struct adr_event* ev = conf_event_create(g_conf.dev);
  struct conf_gate* gate = gate_new(h, NULL);
  app_fill(h, s, gate, a, n, 0x5C);
  struct opener o;
  opener_start(&o, h, gate, GATE_CLOSED_MS);
  double t0 = now_ms();
  ASSERT_OK(adr_copy(g_conf.dev, b, g_conf.dev, a, n, s, CONF_ERR));
  ASSERT_OK(adr_event_record(ev, s, CONF_ERR));
  double t1 = now_ms();
  int q = adr_event_query(ev, NULL);
  double t2 = now_ms();
  if (t1 - t0 > RETURNS_WITHIN_MS)
    fail_msg(
        "adr_copy/adr_event_record on a stream behind the application's gated work took "
        "%.0f ms (the gate stays closed %d ms): an asynchronous call blocked",
        t1 - t0, GATE_CLOSED_MS);
  if (t2 < t0 + GATE_CLOSED_MS - 100 && q != EBUSY)
    fail_msg(
        "the event recorded behind the application's gated work is %s before the gate "
        "opened",
        adr_status_name(q));
  ASSERT_OK(adr_stream_synchronize(s, CONF_ERR));
  opener_join(&o);
  ASSERT_OK(adr_copy(g_conf.host, host, g_conf.dev, b, n, NULL, CONF_ERR));
  conf_expect_bytes(host, n, 0x5C, "copy ordered after the application's fill");

  /* The default queue and a NULL stream: the call waits for the
   * application's work (here held back until another thread opens the
   * gate), then returns its result. */
  struct conf_gate* gate2 = gate_new(h, NULL);
  app_fill(h, NULL, gate2, a, n, 0xA7);
  opener_start(&o, h, gate2, 300);
  ASSERT_OK(adr_copy(g_conf.host, host, g_conf.dev, a, n, NULL, CONF_ERR));
  opener_join(&o);
  conf_expect_bytes(host, n, 0xA7, "NULL-stream download after the application's gated fill");
  /* ... and without a gate, right after the application queued it. */
  app_fill(h, NULL, NULL, a, n, 0x3C);
  ASSERT_OK(adr_copy(g_conf.host, host, g_conf.dev, a, n, NULL, CONF_ERR));
  conf_expect_bytes(host, n, 0x3C, "NULL-stream download after the application's fill");
  app_fill(h, NULL, NULL, b, n, 0x4D);
  ASSERT_OK(adr_copy(g_conf.dev, a, g_conf.dev, b, n / 2, NULL, CONF_ERR));
  ASSERT_OK(adr_copy(g_conf.host, host, g_conf.dev, a, n, NULL, CONF_ERR));
  conf_expect_bytes(host, n / 2, 0x4D, "NULL-stream device copy after the application's fill");
  conf_expect_bytes(host + n / 2, n / 2, 0x3C, "bytes past the device copy");

  ASSERT_OK(adr_stream_synchronize(adr_stream_default(g_conf.dev), CONF_ERR));
  h->finish(g_conf.dev);
  h->gate_destroy(gate);
  h->gate_destroy(gate2);
  conf_event_destroy(ev);
  conf_stream_destroy(s);
  conf_dev_free(g_conf.dev, a, n, NULL);
  conf_dev_free(g_conf.dev, b, n, NULL);
  conf_host_free(host);
}

/* (2) A stream that waits on a foreign native event (adr_event_import):
 * uploads, fills and device copies on it return at once, complete only
 * after the gate opens, and the data is right then. */
void test_order_foreign_event_gate(void** state) {
  (void)state;
  const struct conf_native* h = helper();
  const size_t n = 192 * CONF_KIB + 12;
  uint8_t* src = conf_host_alloc(n);
  uint8_t* out = conf_host_alloc(n);
  conf_fill(src, n, 71);
  void* a = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  void* b = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  void* c = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  ASSERT_OK(adr_copy(g_conf.dev, a, g_conf.host, src, n, NULL, CONF_ERR));
  ASSERT_OK(adr_memset(g_conf.dev, b, 0, n, NULL, CONF_ERR));
  ASSERT_OK(adr_memset(g_conf.dev, c, 0, n, NULL, CONF_ERR));
  void* sync_event = NULL;
  struct conf_gate* gate = gate_new(h, &sync_event);
  struct adr_event* imported = NULL;
  ASSERT_OK(adr_event_import(g_conf.dev, sync_event, &imported, CONF_ERR));
  conf_track_event(imported);
  struct adr_stream* s = conf_stream_create(g_conf.dev);
  struct adr_event* done = conf_event_create(g_conf.dev);
  ASSERT_OK(adr_stream_wait_event(s, imported, CONF_ERR));
  struct opener o;
  opener_start(&o, h, gate, GATE_CLOSED_MS);
  double t0 = now_ms();
  ASSERT_OK(adr_memset(g_conf.dev, b, 0x6B, n, s, CONF_ERR));
  double t1 = now_ms();
  ASSERT_OK(adr_copy(g_conf.dev, c, g_conf.dev, a, n, s, CONF_ERR));
  double t2 = now_ms();
  ASSERT_OK(adr_event_record(done, s, CONF_ERR));
  double t3 = now_ms();
  int q = adr_event_query(done, NULL);
  int qi = adr_event_query(imported, NULL);
  double t4 = now_ms();
  if (t3 - t0 > RETURNS_WITHIN_MS)
    fail_msg(
        "calls on a stream gated by a foreign event took %.0f ms (memset %.0f, device "
        "copy %.0f, event record %.0f; the gate stays closed %d ms): an asynchronous call "
        "blocked",
        t3 - t0, t1 - t0, t2 - t1, t3 - t2, GATE_CLOSED_MS);
  if (t4 < t0 + GATE_CLOSED_MS - 100) {
    if (q != EBUSY)
      fail_msg("work behind the closed gate is %s before it opened", adr_status_name(q));
    if (qi != EBUSY) fail_msg("the imported, unopened event is %s", adr_status_name(qi));
  }
  /* An upload from pageable memory, queued behind the same gate. Backends
   * may read the source before returning (CUDA/HIP above their staging
   * threshold), which here means after the gate opened; so it is timed but
   * only its result is required. */
  double u0 = now_ms();
  ASSERT_OK(adr_copy(g_conf.dev, a, g_conf.host, src, n, s, CONF_ERR));
  print_message("upload on the gated stream returned after %.0f ms (gate opens at %d ms)\n",
                now_ms() - u0, GATE_CLOSED_MS);
  ASSERT_OK(adr_stream_synchronize(s, CONF_ERR));
  opener_join(&o);
  ASSERT_OK(adr_event_query(imported, CONF_ERR));
  ASSERT_OK(adr_event_query(done, CONF_ERR));
  ASSERT_OK(adr_copy(g_conf.host, out, g_conf.dev, a, n, NULL, CONF_ERR));
  conf_expect_pattern(out, n, 71, "upload on the gated stream");
  ASSERT_OK(adr_copy(g_conf.host, out, g_conf.dev, b, n, NULL, CONF_ERR));
  conf_expect_bytes(out, n, 0x6B, "memset on the gated stream");
  ASSERT_OK(adr_copy(g_conf.host, out, g_conf.dev, c, n, NULL, CONF_ERR));
  conf_expect_pattern(out, n, 71, "device copy on the gated stream (of a's earlier upload)");

  conf_event_destroy(done);
  conf_stream_destroy(s);
  conf_event_destroy(imported);
  h->finish(g_conf.dev);
  h->gate_destroy(gate);
  conf_dev_free(g_conf.dev, a, n, NULL);
  conf_dev_free(g_conf.dev, b, n, NULL);
  conf_dev_free(g_conf.dev, c, n, NULL);
  conf_host_free(src);
  conf_host_free(out);
}

/* (3) Overlapping copies within one allocation have memmove semantics
 * (adr.h), in both directions and at several distances, on the NULL
 * stream, an idle created stream, a stream busy with earlier work and (when
 * the backend has a native helper) a stream held back by a foreign gate. */
enum stream_kind { ON_NULL, ON_IDLE, ON_BUSY, ON_GATED, KINDS };
static const char* const kind_name[KINDS] = {"NULL stream", "idle stream", "busy stream",
                                             "gated stream"};

void test_copy_overlapping(void** state) {
  (void)state;
  static const size_t distances[] = {1, 3, 64, 4093, 40000};
  const size_t n = 96 * CONF_KIB + 5, len = 48 * CONF_KIB + 7, base = 101;
  const size_t busy_n = 32 * CONF_MIB;
  uint8_t* model = conf_host_alloc(n);
  uint8_t* out = conf_host_alloc(n);
  void* a = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  void* busy = conf_dev_alloc(g_conf.dev, busy_n, 0, NULL);
  char why[256] = "";
  const struct conf_native* h = conf_native_get(g_conf.dev, why, sizeof(why));
  for (int kind = 0; kind < KINDS; kind++) {
    if (kind == ON_GATED && h == NULL) {
      print_message("overlapping copies on a gated stream not run: %s\n", why);
      continue;
    }
    for (size_t di = 0; di < sizeof(distances) / sizeof(distances[0]); di++) {
      for (int forward = 0; forward < 2; forward++) {
        size_t d = distances[di];
        size_t src_off = forward ? base : base + d, dst_off = forward ? base + d : base;
        uint32_t seed = (uint32_t)(1000 + kind * 100 + di * 2 + forward);
        conf_fill(model, n, seed);
        struct adr_stream* s = kind == ON_NULL ? NULL : conf_stream_create(g_conf.dev);
        struct conf_gate* gate = NULL;
        /* The pattern goes up on the same stream, so the copy is queued
         * behind it on the busy stream; before the gate on the gated one
         * (an upload may read its source before returning). */
        ASSERT_OK(
            adr_copy(g_conf.dev, a, g_conf.host, model, n, kind == ON_GATED ? NULL : s, CONF_ERR));
        if (kind == ON_GATED) {
          void* se = NULL;
          gate = gate_new(h, &se);
          struct adr_event* imp = NULL;
          ASSERT_OK(adr_event_import(g_conf.dev, se, &imp, CONF_ERR));
          ASSERT_OK(adr_stream_wait_event(s, imp, CONF_ERR));
          ASSERT_OK(adr_event_destroy(imp, CONF_ERR));
        }
        if (kind == ON_BUSY) {
          ASSERT_OK(adr_memset(g_conf.dev, busy, 0x77, busy_n, s, CONF_ERR));
          ASSERT_OK(adr_copy(g_conf.dev, a, g_conf.host, model, n, s, CONF_ERR));
        }
        ASSERT_OK(adr_copy(g_conf.dev, (uint8_t*)a + dst_off, g_conf.dev, (uint8_t*)a + src_off,
                           len, s, CONF_ERR));
        if (gate != NULL) h->gate_open(gate);
        if (s != NULL) ASSERT_OK(adr_stream_synchronize(s, CONF_ERR));
        memmove(model + dst_off, model + src_off, len);
        ASSERT_OK(adr_copy(g_conf.host, out, g_conf.dev, a, n, NULL, CONF_ERR));
        for (size_t i = 0; i < n; i++)
          if (out[i] != model[i])
            fail_msg(
                "%s: overlapping copy of %zu bytes from +%zu to +%zu (distance %zu, %s): "
                "byte %zu is 0x%02x, memmove gives 0x%02x",
                kind_name[kind], len, src_off, dst_off, d,
                forward ? "to higher addresses" : "to lower addresses", i, out[i], model[i]);
        if (s != NULL) conf_stream_destroy(s);
        if (gate != NULL) {
          h->finish(g_conf.dev);
          h->gate_destroy(gate);
        }
      }
    }
  }
  conf_dev_free(g_conf.dev, a, n, NULL);
  conf_dev_free(g_conf.dev, busy, busy_n, NULL);
  conf_host_free(model);
  conf_host_free(out);

  /* A long copy at a short distance: backends that move such copies in
   * bounded pieces (CUDA and HIP go through a 1 MiB scratch buffer) must
   * order the pieces so no byte is overwritten before it is read. */
  const size_t big_n = 3 * CONF_MIB + 64, big_len = 3 * CONF_MIB + 5, big_d = 7;
  model = conf_host_alloc(big_n);
  out = conf_host_alloc(big_n);
  a = conf_dev_alloc(g_conf.dev, big_n, 0, NULL);
  for (int forward = 0; forward < 2; forward++) {
    size_t src_off = forward ? 0 : big_d, dst_off = forward ? big_d : 0;
    conf_fill(model, big_n, (uint32_t)(2000 + forward));
    struct adr_stream* s = conf_stream_create(g_conf.dev);
    ASSERT_OK(adr_copy(g_conf.dev, a, g_conf.host, model, big_n, s, CONF_ERR));
    ASSERT_OK(adr_copy(g_conf.dev, (uint8_t*)a + dst_off, g_conf.dev, (uint8_t*)a + src_off,
                       big_len, s, CONF_ERR));
    ASSERT_OK(adr_stream_synchronize(s, CONF_ERR));
    memmove(model + dst_off, model + src_off, big_len);
    ASSERT_OK(adr_copy(g_conf.host, out, g_conf.dev, a, big_n, NULL, CONF_ERR));
    for (size_t i = 0; i < big_n; i++)
      if (out[i] != model[i])
        fail_msg(
            "overlapping copy of %zu bytes at distance %zu (%s): byte %zu is 0x%02x, "
            "memmove gives 0x%02x",
            big_len, big_d, forward ? "to higher addresses" : "to lower addresses", i, out[i],
            model[i]);
    conf_stream_destroy(s);
  }
  conf_dev_free(g_conf.dev, a, big_n, NULL);
  conf_host_free(model);
  conf_host_free(out);
}
