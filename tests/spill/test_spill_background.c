/* SPDX-License-Identifier: Apache-2.0
 *
 * Background spills (docs/spill.md, "Spilling in the background") on the
 * device ADR_DEVICE names, in the spill runs of tests/spill/meson.build.
 * The buffer's last use is work queued on a stream held back by a gate (a
 * native event the test opens later: tests/conformance/conf_native.h): the
 * spill must return while the gate is still closed, an acquire from
 * another thread must wait for the spill's copy, and the bytes must be the
 * gated work's after the unspill. A watchdog opens the gate after 20 s so
 * that a spill that wrongly blocks fails instead of hanging.
 *
 * Where downloads complete in the call (Vulkan: ADR_CAP_SYNC_DOWNLOADS) an
 * explicit spill of a busy buffer goes to the manager's spill thread: the
 * call returns at once all the same, the buffer reporting "device" until
 * the thread's blocking spill completed. Where there is nowhere to spill
 * (cpu) the gated case is not run.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "adr/adr.h"
#include "adr/spill.h"
#include "spill_test.h"
#include "conf_native.h"

#define MiB ((size_t)1 << 20)

static struct adr_device* dev;
static bool host_memory;
static bool sync_downloads;

struct watchdog {
  const struct conf_native* h;
  struct conf_gate* gate;
  atomic_bool opened; /* by anyone */
  atomic_bool fired;  /* by the watchdog */
  atomic_bool stop;
  pthread_t thread;
};

static void* watchdog_main(void* arg) {
  struct watchdog* w = arg;
  for (int i = 0; i < 2000 && !atomic_load(&w->stop); i++) {
    struct timespec ts = {0, 10 * 1000000L};
    nanosleep(&ts, NULL);
  }
  if (!atomic_exchange(&w->opened, true)) {
    atomic_store(&w->fired, true);
    w->h->gate_open(w->gate);
  }
  return NULL;
}

static void gate_open(struct watchdog* w) {
  if (!atomic_exchange(&w->opened, true)) w->h->gate_open(w->gate);
}

struct reader {
  struct adr_spill_buffer* b;
  size_t size;
  atomic_bool done;
  int status;
  uint8_t first, last;
  bool uniform;
};

static void* reader_main(void* arg) {
  struct reader* r = arg;
  void* d = NULL;
  uint8_t* h = malloc(r->size);
  r->status = adr_spill_buffer_acquire(r->b, ADR_SPILL_ACCESS_READ, &d, NULL);
  if (r->status == 0) {
    r->status = adr_copy(NULL, h, dev, d, r->size, NULL, NULL);
    adr_spill_buffer_release(r->b, NULL, NULL);
  }
  if (r->status == 0) {
    r->first = h[0];
    r->last = h[r->size - 1];
    r->uniform = true;
    for (size_t i = 0; i < r->size; i++)
      if (h[i] != h[0]) r->uniform = false;
  }
  free(h);
  atomic_store(&r->done, true);
  return NULL;
}

/* The spill returns before the gated work ran; a concurrent acquire waits
 * for the spill's copy; the bytes are the gated work's. */
static void test_spill_behind_gate(void** state) {
  (void)state;
  if (host_memory) {
    print_message("  (%s is host memory: nothing to spill)\n", adr_device_name(dev));
    return;
  }
  char why[256] = "";
  const struct conf_native* h = conf_native_get(dev, why, sizeof(why));
  if (h == NULL) fail_msg("no native helper: %s", why);
  const size_t size = 4 * MiB;
  struct adr_spill_options o;
  adr_spill_options_init(&o);
  o.stats_level = 1;
  struct adr_spill_manager* m = NULL;
  assert_int_equal(adr_spill_manager_create(dev, &o, &m, NULL), 0);
  struct adr_spill_buffer* b = NULL;
  assert_int_equal(adr_spill_buffer_alloc(m, size, &b, NULL), 0);
  void* d = NULL;
  assert_int_equal(adr_spill_buffer_acquire(b, ADR_SPILL_ACCESS_WRITE, &d, NULL), 0);
  assert_int_equal(adr_memset(dev, d, 0x21, size, NULL, NULL), 0);

  struct watchdog w;
  memset(&w, 0, sizeof(w));
  w.h = h;
  void* sync_event = NULL;
  int st = h->gate_create(dev, &w.gate, &sync_event, why, sizeof(why));
  if (st != 0) fail_msg("gate: %s (%s)", adr_status_name(st), why);
  struct adr_event* gate_event = NULL;
  struct adr_error e;
  if (adr_event_import(dev, sync_event, &gate_event, &e) != 0) fail_msg("import: %s", e.message);
  struct adr_stream* s = NULL;
  assert_int_equal(adr_stream_create(dev, &s, NULL), 0);
  assert_int_equal(pthread_create(&w.thread, NULL, watchdog_main, &w), 0);
  assert_int_equal(adr_stream_wait_event(s, gate_event, NULL), 0);
  /* The last use: a memset held back by the gate. */
  assert_int_equal(adr_memset(dev, d, 0x7e, size, s, NULL), 0);
  assert_int_equal(adr_spill_buffer_release(b, s, NULL), 0);

  uint64_t spilled = 0;
  if (adr_spill_manager_spill(m, UINT64_MAX, &spilled, &e) != 0) fail_msg("spill: %s", e.message);
  bool returned_closed = !atomic_load(&w.opened);
  assert_int_equal(spilled, size);
  struct adr_spill_stats ss = spill_test_stats(m);
  assert_int_equal(ss.queued_spills, 1);
  if (!sync_downloads) { /* queued on the spill stream: accounted as moved */
    assert_int_equal(adr_spill_buffer_location(b), ADR_SPILL_LOCATION_HOST);
    assert_int_equal(ss.device_bytes, 0);
    assert_int_equal(ss.host_bytes, size);
  } else { /* the spill thread's: moving, on the device until it is done */
    assert_int_equal(adr_spill_buffer_location(b), ADR_SPILL_LOCATION_DEVICE);
  }

  /* An acquire from another thread waits for the copy, hence the gate. */
  struct reader r;
  memset(&r, 0, sizeof(r));
  r.b = b;
  r.size = size;
  pthread_t rt;
  assert_int_equal(pthread_create(&rt, NULL, reader_main, &r), 0);
  struct timespec pause = {0, 50 * 1000000L};
  nanosleep(&pause, NULL);
  bool reader_waited = !atomic_load(&r.done) && !atomic_load(&w.opened);
  gate_open(&w);
  pthread_join(rt, NULL);
  atomic_store(&w.stop, true);
  pthread_join(w.thread, NULL);
  if (atomic_load(&w.fired))
    fail_msg("adr_spill_manager_spill blocked until the watchdog opened the gate (20 s)");
  assert_true(returned_closed);
  assert_true(reader_waited);
  assert_int_equal(r.status, 0);
  assert_true(r.uniform);
  assert_int_equal(r.first, 0x7e);
  assert_int_equal(adr_spill_buffer_location(b), ADR_SPILL_LOCATION_DEVICE);
  ss = spill_test_stats(m);
  assert_int_equal(ss.unspilled.bytes, size);

  assert_int_equal(adr_stream_synchronize(s, NULL), 0);
  assert_int_equal(adr_stream_destroy(s, NULL), 0);
  assert_int_equal(adr_event_destroy(gate_event, NULL), 0);
  if (h->finish) h->finish(dev);
  h->gate_destroy(w.gate);
  assert_int_equal(adr_spill_buffer_free(b, NULL), 0);
  assert_int_equal(adr_spill_manager_destroy(m, NULL), 0);
}

/* Queued spills and their frees: many buffers spilled in the background
 * and freed while spilled, some freed before their copy ran; the on-demand
 * path settles queued spills before it spills more. */
static void test_queued_then_free(void** state) {
  (void)state;
  const size_t size = 1 * MiB;
  struct adr_spill_manager* m = NULL;
  struct adr_spill_options o;
  adr_spill_options_init(&o);
  o.stats_level = 1;
  assert_int_equal(adr_spill_manager_create(dev, &o, &m, NULL), 0);
  struct adr_stream* s = NULL;
  assert_int_equal(adr_stream_create(dev, &s, NULL), 0);
  struct adr_spill_buffer* b[8];
  for (int i = 0; i < 8; i++) {
    assert_int_equal(adr_spill_buffer_alloc(m, size, &b[i], NULL), 0);
    void* d = NULL;
    assert_int_equal(adr_spill_buffer_acquire(b[i], ADR_SPILL_ACCESS_WRITE, &d, NULL), 0);
    assert_int_equal(adr_memset(dev, d, 0x40 + i, size, s, NULL), 0);
    assert_int_equal(adr_spill_buffer_release(b[i], s, NULL), 0);
  }
  assert_int_equal(adr_spill_manager_spill(m, UINT64_MAX, NULL, NULL), 0);
  /* Where nothing spilled (cpu), reads are ordered by the application. */
  if (host_memory) assert_int_equal(adr_stream_synchronize(s, NULL), 0);
  /* Freed at once: waits for the copy, returns the host memory. */
  for (int i = 0; i < 8; i += 4) assert_int_equal(adr_spill_buffer_free(b[i], NULL), 0);
  /* Or after every queued spill completed. */
  assert_int_equal(adr_spill_manager_synchronize(m, NULL), 0);
  for (int i = 2; i < 8; i += 4) assert_int_equal(adr_spill_buffer_free(b[i], NULL), 0);
  assert_int_equal(adr_spill_manager_synchronize(NULL, NULL), EINVAL);
  uint8_t* h = malloc(size);
  for (int i = 1; i < 8; i += 2) {
    void* d = NULL;
    assert_int_equal(adr_spill_buffer_acquire(b[i], ADR_SPILL_ACCESS_READ, &d, NULL), 0);
    assert_int_equal(adr_copy(NULL, h, dev, d, size, NULL, NULL), 0);
    assert_int_equal(adr_spill_buffer_release(b[i], NULL, NULL), 0);
    for (size_t k = 0; k < size; k++)
      if (h[k] != 0x40 + i) fail_msg("buffer %d byte %zu: 0x%02x", i, k, h[k]);
  }
  free(h);
  struct adr_spill_stats ss = spill_test_stats(m);
  if (host_memory)
    assert_int_equal(ss.spilled[ADR_SPILL_TRIGGER_EXPLICIT].bytes, 0);
  else
    assert_int_equal(ss.spilled[ADR_SPILL_TRIGGER_EXPLICIT].bytes, 8 * size);
  /* Queued only those whose memset had not run yet: an idle buffer's
   * spill blocks (cheaper). */
  assert_true(ss.queued_spills <= (host_memory ? 0 : 8));
  /* The flag turns background spills off. */
  struct adr_spill_manager* m2 = NULL;
  o.flags |= ADR_SPILL_SYNCHRONOUS;
  assert_int_equal(adr_spill_manager_create(dev, &o, &m2, NULL), 0);
  struct adr_spill_buffer* x = NULL;
  assert_int_equal(adr_spill_buffer_alloc(m2, size, &x, NULL), 0);
  assert_int_equal(adr_spill_manager_spill(m2, UINT64_MAX, NULL, NULL), 0);
  assert_int_equal(spill_test_stats(m2).queued_spills, 0);
  assert_int_equal(adr_spill_buffer_free(x, NULL), 0);
  assert_int_equal(adr_spill_manager_destroy(m2, NULL), 0);
  for (int i = 1; i < 8; i += 2) assert_int_equal(adr_spill_buffer_free(b[i], NULL), 0);
  assert_int_equal(adr_stream_destroy(s, NULL), 0);
  assert_int_equal(adr_spill_manager_destroy(m, NULL), 0);
}

/* Many threads, one manager: each writes its buffer with memsets queued
 * on its own stream, releases it on that stream and spills everything that
 * can spill (other threads' busy buffers included: background spills
 * behind their last use, or the spill thread's); the next acquire waits
 * for whichever spill has its buffer and must read the last value. */
#define BG_THREADS 4
#define BG_ROUNDS 25
#define BG_SIZE ((size_t)256 << 10)

struct bg_worker {
  struct adr_spill_manager* m;
  int id;
  char failure[600];
};

static void* bg_work(void* arg) {
  struct bg_worker* w = arg;
  struct adr_error e;
  struct adr_spill_buffer* b = NULL;
  struct adr_stream* s = NULL;
  uint8_t* h = malloc(BG_SIZE);
  int value = -1;
  if (adr_spill_buffer_alloc(w->m, BG_SIZE, &b, &e) != 0 || adr_stream_create(dev, &s, &e) != 0) {
    snprintf(w->failure, sizeof(w->failure), "setup: %.500s", e.message);
    goto out;
  }
  for (int r = 0; r < BG_ROUNDS; r++) {
    void* d = NULL;
    if (adr_spill_buffer_acquire(b, ADR_SPILL_ACCESS_WRITE, &d, &e) != 0) {
      snprintf(w->failure, sizeof(w->failure), "acquire: %.500s", e.message);
      goto out;
    }
    if (value >= 0) {
      if (adr_copy(NULL, h, dev, d, BG_SIZE, NULL, &e) != 0) {
        snprintf(w->failure, sizeof(w->failure), "read: %.500s", e.message);
        goto out;
      }
      for (size_t i = 0; i < BG_SIZE; i++)
        if (h[i] != (uint8_t)value) {
          snprintf(w->failure, sizeof(w->failure), "round %d byte %zu: 0x%02x, expected 0x%02x", r,
                   i, h[i], value);
          goto out;
        }
    }
    value = (w->id * 50 + r) & 0xff;
    for (int k = 0; k < 4; k++)
      if (adr_memset(dev, d, k == 3 ? value : 0x99, BG_SIZE, s, &e) != 0) {
        snprintf(w->failure, sizeof(w->failure), "memset: %.500s", e.message);
        goto out;
      }
    if (adr_spill_buffer_release(b, s, &e) != 0 ||
        adr_spill_manager_spill(w->m, UINT64_MAX, NULL, &e) != 0) {
      snprintf(w->failure, sizeof(w->failure), "release/spill: %.500s", e.message);
      goto out;
    }
  }
out:
  if (b != NULL) adr_spill_buffer_free(b, NULL);
  if (s != NULL) adr_stream_destroy(s, NULL);
  free(h);
  return NULL;
}

static void test_threads_background(void** state) {
  (void)state;
  if (host_memory) {
    print_message("  (%s is host memory: nothing to spill)\n", adr_device_name(dev));
    return;
  }
  struct adr_spill_options o;
  adr_spill_options_init(&o);
  o.stats_level = 1;
  struct adr_spill_manager* m = NULL;
  assert_int_equal(adr_spill_manager_create(dev, &o, &m, NULL), 0);
  pthread_t t[BG_THREADS];
  struct bg_worker w[BG_THREADS];
  for (int i = 0; i < BG_THREADS; i++) {
    w[i] = (struct bg_worker){m, i, ""};
    assert_int_equal(pthread_create(&t[i], NULL, bg_work, &w[i]), 0);
  }
  for (int i = 0; i < BG_THREADS; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < BG_THREADS; i++)
    if (w[i].failure[0] != '\0') fail_msg("thread %d: %s", i, w[i].failure);
  struct adr_spill_stats ss = spill_test_stats(m);
  print_message("  %" PRIu64 " spills, %" PRIu64 " of them queued\n",
                ss.spilled[ADR_SPILL_TRIGGER_EXPLICIT].count, ss.queued_spills);
  assert_int_equal(ss.buffers, 0);
  assert_int_equal(ss.spill_failures, 0);
  assert_int_equal(adr_spill_manager_destroy(m, NULL), 0);
}

int main(void) {
  int missing = spill_test_device(&dev, &host_memory);
  if (missing) return missing;
  struct adr_error e;
  struct adr_device_info info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  if (adr_device_info_get(dev, &info, &e) != 0) {
    fprintf(stderr, "device info: %s\n", e.message);
    return 1;
  }
  sync_downloads = (info.caps & ADR_CAP_SYNC_DOWNLOADS) != 0;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_spill_behind_gate),
      cmocka_unit_test(test_queued_then_free),
      cmocka_unit_test(test_threads_background),
  };
  return cmocka_run_group_tests_name(adr_device_name(dev), tests, NULL, NULL);
}
