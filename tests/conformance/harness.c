/* SPDX-License-Identifier: Apache-2.0
 *
 * The conformance suite's driver: picks the device under test, tracks the
 * resources tests create, and runs the cmocka group.
 *
 * Exit status (meson's default protocol): 0 all passed, 77 nothing to test
 * here (no device and ADR_CONFORMANCE_REQUIRE unset), otherwise failure.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include <adr/testing.h>

#include "conf_native.h"
#include "conformance.h"

struct conf_globals g_conf;

/* test_alloc_size_overflow asks for allocations no allocator can satisfy
 * and expects ENOMEM; under AddressSanitizer such a request aborts the
 * process unless the allocator may return NULL, as glibc's does. ASan reads
 * this hook at start-up; ASAN_OPTIONS in the environment still wins. */
const char* __asan_default_options(void);
__attribute__((visibility("default"), used)) const char* __asan_default_options(void) {
  return "allocator_may_return_null=1";
}

/* ---- error checks ------------------------------------------------------- */

/* ---- fault mode ----------------------------------------------------------- */

static struct {
  bool on;
  char slot[32];
  uint64_t nth;
  int status;
  bool persistent;
  _Atomic unsigned accepted; /* cases stopped by the injected fault */
} g_fault;

static bool fault_fired(void) {
  uint64_t fired = 0;
  adr_test_fault_counts(NULL, &fired);
  return g_fault.on && fired > 0;
}

/* The status a failure caused by the fault may carry: the injected one, or
 * ENOMEM when the core's own allocations fail. */
static bool fault_status(int status) {
  return strcmp(g_fault.slot, "malloc") == 0 ? status == ENOMEM : status == g_fault.status;
}

void conf_fault_accept(int status, const char* message) {
  if (!fault_fired() || !fault_status(status)) return;
  /* A clean error: "[operation]..." with a description. */
  if (message == NULL || message[0] != '[' || strchr(message, ']') == NULL ||
      memchr(message, '\0', sizeof(((struct adr_error*)0)->message)) == NULL)
    return;
  atomic_fetch_add(&g_fault.accepted, 1);
  printf("adr-conformance: fault mode: case stopped by the injected fault: %s (%s)\n",
         adr_status_name(status), message);
  skip();
}

void conf_fault_accept_text(const char* text) {
  if (!fault_fired() || text == NULL) return;
  char name[64];
  snprintf(name, sizeof(name), "%s",
           adr_status_name(strcmp(g_fault.slot, "malloc") == 0 ? ENOMEM : g_fault.status));
  if (strstr(text, name) == NULL || strstr(text, "[adr_") == NULL) return;
  atomic_fetch_add(&g_fault.accepted, 1);
  printf("adr-conformance: fault mode: case stopped by the injected fault: %s\n", text);
  skip();
}

/* ADR_CONFORMANCE_FAULT=slot:N:STATUS[:persistent] (STATUS a name). */
static int fault_parse(const char* text) {
  char buf[128];
  snprintf(buf, sizeof(buf), "%s", text);
  char* save = NULL;
  const char* slot = strtok_r(buf, ":", &save);
  const char* nth = strtok_r(NULL, ":", &save);
  const char* status = strtok_r(NULL, ":", &save);
  const char* flag = strtok_r(NULL, ":", &save);
  if (slot == NULL || nth == NULL || status == NULL) return EINVAL;
  snprintf(g_fault.slot, sizeof(g_fault.slot), "%s", slot);
  g_fault.nth = strtoull(nth, NULL, 10);
  for (int v = 1; v < 256 && g_fault.status == 0; v++)
    if (strcmp(adr_status_name(v), status) == 0) g_fault.status = v;
  if (g_fault.status == 0) return EINVAL;
  g_fault.persistent = flag != NULL && strcmp(flag, "persistent") == 0;
  g_fault.on = true;
  return 0;
}

/* After the run, disarmed: the next calls must succeed. A small workload
 * over every kind of call; returns the number of failures. */
static int fault_sanity(void) {
  struct adr_error err = {{0}};
  struct adr_device* dev = g_conf.dev;
  const size_t n = 1 << 20;
  void* d = NULL;
  struct adr_stream* s = NULL;
  struct adr_event* e = NULL;
  uint8_t* h = malloc(n);
  uint8_t* back = malloc(n);
  int st = h && back ? 0 : ENOMEM;
  if (st == 0) conf_fill(h, n, 7);
  if (st == 0) st = adr_alloc(dev, n, 0, NULL, &d, &err);
  if (st == 0) st = adr_stream_create(dev, &s, &err);
  if (st == 0) st = adr_event_create(dev, &e, &err);
  if (st == 0) st = adr_copy(dev, d, g_conf.host, h, n, s, &err);
  if (st == 0) st = adr_memset(dev, (uint8_t*)d + 16, 0x5a, 32, s, &err);
  if (st == 0) st = adr_event_record(e, s, &err);
  if (st == 0) st = adr_stream_wait_event(adr_stream_default(dev), e, &err);
  if (st == 0) st = adr_event_synchronize(e, &err);
  if (st == 0) st = adr_copy(g_conf.host, back, dev, d, n, NULL, &err);
  if (st == 0) st = adr_stream_synchronize(s, &err);
  if (st == 0) {
    memset(h + 16, 0x5a, 32);
    if (memcmp(h, back, n) != 0) {
      st = EIO;
      snprintf(err.message, sizeof(err.message), "data read back differs");
    }
  }
  int st2 = 0;
  if (e != NULL) st2 |= adr_event_destroy(e, &err);
  if (s != NULL) st2 |= adr_stream_destroy(s, &err);
  if (d != NULL) st2 |= adr_free(dev, d, n, NULL, &err);
  free(h);
  free(back);
  if (st != 0 || st2 != 0) {
    fprintf(stderr,
            "adr-conformance: fault mode: the sanity workload after disarming failed: %s (%s)\n",
            adr_status_name(st ? st : st2), err.message);
    return 1;
  }
  return 0;
}

void conf_check_error(const char* expr, int status, int want, int want2,
                      const struct adr_error* error, const char* op, const char* file, int line) {
  if (status != want && (want2 == 0 || status != want2)) conf_fault_accept(status, error->message);
  if (status != want && (want2 == 0 || status != want2)) {
    fail_msg("%s:%d: %s\n  returned %s (%d), expected %s%s%s; message: %s", file, line, expr,
             adr_status_name(status), status, adr_status_name(want), want2 ? " or " : "",
             want2 ? adr_status_name(want2) : "", error->message);
  }
  if (memchr(error->message, '\0', sizeof(error->message)) == NULL)
    fail_msg("%s:%d: %s\n  error message is not NUL-terminated", file, line, expr);
  if (error->message[0] == '\0')
    fail_msg("%s:%d: %s\n  returned %s with an empty error message", file, line, expr,
             adr_status_name(status));
  char tag[96];
  snprintf(tag, sizeof(tag), "[%s]", op);
  if (strstr(error->message, tag) == NULL)
    fail_msg("%s:%d: %s\n  error message does not name the operation %s: %s", file, line, expr, tag,
             error->message);
}

/* ---- data --------------------------------------------------------------- */

void conf_fill(void* buf, size_t n, uint32_t seed) {
  uint8_t* b = buf;
  for (size_t i = 0; i < n; i++) b[i] = conf_pattern_byte(seed, i);
}

void conf_expect_pattern_at(const void* buf, size_t n, uint32_t seed, size_t pattern_offset,
                            const char* what) {
  const uint8_t* b = buf;
  for (size_t i = 0; i < n; i++) {
    uint8_t want = conf_pattern_byte(seed, pattern_offset + i);
    if (b[i] != want)
      fail_msg("%s: byte %zu of %zu is 0x%02x, expected 0x%02x (pattern %u at %zu)", what, i, n,
               b[i], want, seed, pattern_offset + i);
  }
}

void conf_expect_bytes(const void* buf, size_t n, uint8_t value, const char* what) {
  const uint8_t* b = buf;
  for (size_t i = 0; i < n; i++) {
    if (b[i] != value)
      fail_msg("%s: byte %zu of %zu is 0x%02x, expected 0x%02x", what, i, n, b[i], value);
  }
}

/* ---- resource tracking -------------------------------------------------- */

enum conf_kind { CONF_HOST, CONF_DEVMEM, CONF_STREAM, CONF_EVENT };

struct conf_res {
  enum conf_kind kind;
  struct adr_device* dev;
  void* p;
  size_t size;
};

/* Tests on several threads create resources at once (test_concurrency.c). */
static pthread_mutex_t g_res_lock = PTHREAD_MUTEX_INITIALIZER;
static struct conf_res* g_res;
static size_t g_res_count, g_res_cap;

static bool conf_track(enum conf_kind kind, struct adr_device* dev, void* p, size_t size) {
  bool ok = true;
  pthread_mutex_lock(&g_res_lock);
  if (g_res_count == g_res_cap) {
    size_t cap = g_res_cap ? g_res_cap * 2 : 256;
    struct conf_res* r = realloc(g_res, cap * sizeof(*r));
    if (r == NULL) {
      ok = false;
    } else {
      g_res = r;
      g_res_cap = cap;
    }
  }
  if (ok) g_res[g_res_count++] = (struct conf_res){kind, dev, p, size};
  pthread_mutex_unlock(&g_res_lock);
  return ok;
}

void conf_untrack(void* p) {
  pthread_mutex_lock(&g_res_lock);
  for (size_t i = g_res_count; i-- > 0;) {
    if (g_res[i].p == p) {
      g_res[i] = g_res[--g_res_count];
      break;
    }
  }
  pthread_mutex_unlock(&g_res_lock);
}

void* conf_host_alloc(size_t n) {
  void* p = malloc(n ? n : 1);
  if (p == NULL) fail_msg("malloc(%zu) failed", n);
  if (!conf_track(CONF_HOST, NULL, p, n)) {
    free(p);
    fail_msg("out of host memory for the resource table");
  }
  return p;
}

void conf_host_free(void* p) {
  conf_untrack(p);
  free(p);
}

void conf_track_dev(struct adr_device* dev, void* p, size_t size) {
  if (!conf_track(CONF_DEVMEM, dev, p, size)) {
    adr_free(dev, p, size, NULL, NULL);
    fail_msg("out of host memory for the resource table");
  }
}

void* conf_dev_alloc(struct adr_device* dev, size_t size, size_t alignment,
                     struct adr_stream* stream) {
  void* p = NULL;
  ASSERT_OK(adr_alloc(dev, size, alignment, stream, &p, CONF_ERR));
  if (p == NULL) fail_msg("adr_alloc(%zu, %zu) succeeded with a NULL address", size, alignment);
  conf_track_dev(dev, p, size);
  size_t align = alignment > ADR_MIN_ALIGNMENT ? alignment : ADR_MIN_ALIGNMENT;
  if (conf_addr(p) % align != 0)
    fail_msg("adr_alloc(%zu, %zu) returned %p, not aligned to %zu", size, alignment, p, align);
  return p;
}

void conf_dev_free(struct adr_device* dev, void* p, size_t size, struct adr_stream* stream) {
  conf_untrack(p);
  ASSERT_OK(adr_free(dev, p, size, stream, CONF_ERR));
}

struct adr_stream* conf_stream_create(struct adr_device* dev) {
  struct adr_stream* s = NULL;
  ASSERT_OK(adr_stream_create(dev, &s, CONF_ERR));
  assert_non_null(s);
  if (!conf_track(CONF_STREAM, dev, s, 0)) {
    adr_stream_destroy(s, NULL);
    fail_msg("out of host memory for the resource table");
  }
  return s;
}

void conf_track_stream(struct adr_stream* s) {
  if (!conf_track(CONF_STREAM, adr_stream_device(s), s, 0)) {
    adr_stream_destroy(s, NULL);
    fail_msg("out of host memory for the resource table");
  }
}

void conf_track_event(struct adr_event* e) {
  if (!conf_track(CONF_EVENT, adr_event_device(e), e, 0)) {
    adr_event_destroy(e, NULL);
    fail_msg("out of host memory for the resource table");
  }
}

void conf_stream_destroy(struct adr_stream* s) {
  conf_untrack(s);
  ASSERT_OK(adr_stream_destroy(s, CONF_ERR));
}

struct adr_event* conf_event_create(struct adr_device* dev) {
  struct adr_event* e = NULL;
  ASSERT_OK(adr_event_create(dev, &e, CONF_ERR));
  assert_non_null(e);
  if (!conf_track(CONF_EVENT, dev, e, 0)) {
    adr_event_destroy(e, NULL);
    fail_msg("out of host memory for the resource table");
  }
  return e;
}

void conf_event_destroy(struct adr_event* e) {
  conf_untrack(e);
  ASSERT_OK(adr_event_destroy(e, CONF_ERR));
}

void conf_upload(struct adr_device* dev, void* dev_ptr, const void* host, size_t n) {
  ASSERT_OK(adr_copy(dev, dev_ptr, g_conf.host, host, n, NULL, CONF_ERR));
}

void conf_download(struct adr_device* dev, void* host, const void* dev_ptr, size_t n) {
  ASSERT_OK(adr_copy(g_conf.host, host, dev, dev_ptr, n, NULL, CONF_ERR));
}

int conf_teardown(void** state) {
  (void)state;
  /* A case stopped early (fault mode) may have left its streams waiting on
   * a gate it never opened. */
  char why[128];
  const struct conf_native* h = conf_native_get(g_conf.dev, why, sizeof(why));
  if (h != NULL && h->open_gates != NULL) h->open_gates(g_conf.dev);
  /* Queued work may still use the buffers: finish it before freeing. */
  for (size_t i = 0; i < g_res_count; i++)
    if (g_res[i].kind == CONF_STREAM) adr_stream_synchronize(g_res[i].p, NULL);
  adr_stream_synchronize(adr_stream_default(g_conf.dev), NULL);
  static const enum conf_kind order[] = {CONF_EVENT, CONF_STREAM, CONF_DEVMEM, CONF_HOST};
  for (size_t k = 0; k < sizeof(order) / sizeof(order[0]); k++) {
    for (size_t i = g_res_count; i-- > 0;) {
      struct conf_res r = g_res[i];
      if (r.kind != order[k]) continue;
      g_res[i] = g_res[--g_res_count];
      switch (r.kind) {
        case CONF_EVENT:
          adr_event_destroy(r.p, NULL);
          break;
        case CONF_STREAM:
          adr_stream_destroy(r.p, NULL);
          break;
        case CONF_DEVMEM:
          adr_free(r.dev, r.p, r.size, NULL, NULL);
          break;
        case CONF_HOST:
          free(r.p);
          break;
      }
    }
  }
  return 0;
}

/* ---- device selection --------------------------------------------------- */

/* "cpu", "opencl:1", "cuda_host" -> device, through the public API only. */
static int conf_device_from_spec(const char* spec, struct adr_device** out,
                                 struct adr_error* error) {
  const char* colon = strchr(spec, ':');
  size_t name_len = colon ? (size_t)(colon - spec) : strlen(spec);
  int64_t id = 0;
  if (colon != NULL) {
    char* end = NULL;
    errno = 0;
    long long v = strtoll(colon + 1, &end, 10);
    if (errno != 0 || end == colon + 1 || *end != '\0' || v < 0)
      return adr_error_set(error, EINVAL, "ADR_CONFORMANCE_PEER=\"%s\": bad device id", spec);
    id = v;
  }
  /* ArrowDeviceType values are small integers; ask the library for names. */
  for (int t = 1; t < 64; t++) {
    const char* name = adr_device_type_name((ArrowDeviceType)t);
    if (name != NULL && strlen(name) == name_len && strncmp(name, spec, name_len) == 0)
      return adr_device_get((ArrowDeviceType)t, id, out, error);
  }
  return adr_error_set(error, EINVAL, "ADR_CONFORMANCE_PEER=\"%s\": unknown device type", spec);
}

static bool conf_env_true(const char* name) {
  const char* v = getenv(name);
  return v != NULL && v[0] != '\0' && strcmp(v, "0") != 0;
}

int main(void) {
  bool require = conf_env_true("ADR_CONFORMANCE_REQUIRE");
  const char* want = getenv("ADR_DEVICE");
  struct adr_error err = {{0}};

  int st = adr_device_default(&g_conf.dev, &err);
  if (st == ENODEV && !require) {
    printf("adr-conformance: no device for ADR_DEVICE=%s, skipping: %s\n", want ? want : "(unset)",
           err.message);
    return 77;
  }
  if (st != 0) {
    fprintf(stderr, "adr-conformance: adr_device_default (ADR_DEVICE=%s) failed: %s (%s)%s\n",
            want ? want : "(unset)", adr_status_name(st), err.message,
            require ? " [ADR_CONFORMANCE_REQUIRE=1: a missing device is a failure]" : "");
    return 1;
  }
  /* Host mode: the host side is a NULL device and the CPU device is not
   * asked for (ADR_BACKENDS may exclude its backend), unless it is the
   * device under test. */
  const char* host = getenv("ADR_CONFORMANCE_HOST");
  g_conf.host_mode = host != NULL && strcmp(host, "null") == 0;
  if (host != NULL && host[0] != '\0' && !g_conf.host_mode && strcmp(host, "cpu") != 0) {
    fprintf(stderr, "adr-conformance: ADR_CONFORMANCE_HOST=%s: expected null or cpu\n", host);
    return 1;
  }
  if (g_conf.host_mode)
    g_conf.cpu = adr_device_type(g_conf.dev) == ARROW_DEVICE_CPU ? g_conf.dev : NULL;
  else
    st = adr_device_get(ARROW_DEVICE_CPU, 0, &g_conf.cpu, &err);
  g_conf.host = g_conf.host_mode ? NULL : g_conf.cpu;
  if (st != 0) {
    fprintf(stderr, "adr-conformance: the CPU device is needed as the host side: %s (%s)\n",
            adr_status_name(st), err.message);
    return 1;
  }
  g_conf.info.struct_size = sizeof(g_conf.info);
  st = adr_device_info_get(g_conf.dev, &g_conf.info, &err);
  if (st != 0) {
    fprintf(stderr, "adr-conformance: adr_device_info_get(%s) failed: %s (%s)\n",
            adr_device_name(g_conf.dev), adr_status_name(st), err.message);
    return 1;
  }
  printf(
      "adr-conformance: testing %s: %s (vendor \"%s\", backend \"%s\", driver \"%s\", "
      "caps 0x%llx)\n",
      adr_device_name(g_conf.dev), g_conf.info.name, g_conf.info.vendor, g_conf.info.backend,
      g_conf.info.driver, (unsigned long long)g_conf.info.caps);

  const char* peer = getenv("ADR_CONFORMANCE_PEER");
  if (peer != NULL && peer[0] != '\0') {
    g_conf.peer_spec = peer;
    st = conf_device_from_spec(peer, &g_conf.peer, &err);
    if (st != 0) {
      fprintf(stderr, "adr-conformance: peer device ADR_CONFORMANCE_PEER=%s: %s (%s)\n", peer,
              adr_status_name(st), err.message);
      return 1;
    }
    printf("adr-conformance: cross-device peer: %s\n", adr_device_name(g_conf.peer));
  }

#define T(f) cmocka_unit_test_teardown(f, conf_teardown)
  struct CMUnitTest tests[64] = {
      T(test_device_identity),
      T(test_device_info),
      T(test_device_selection),
      T(test_pointer_query),
      T(test_alloc_sizes_and_alignments),
      T(test_alloc_zero_size),
      T(test_alloc_bad_alignment),
      T(test_alloc_size_overflow),
      T(test_alloc_many),
      T(test_copy_host_to_device),
      T(test_copy_device_to_host),
      T(test_copy_device_to_device),
      T(test_copy_slices),
      T(test_copy_zero_size),
      T(test_copy_null_stream_is_synchronous),
      T(test_host_upload_download),
      T(test_host_on_streams),
      T(test_host_slices),
      T(test_host_memset),
      T(test_host_to_host),
      T(test_host_errors),
      T(test_memset_full),
      T(test_memset_partial_and_middle),
      T(test_stream_create_destroy),
      T(test_stream_queued_work),
      T(test_stream_default),
      T(test_stream_destroy_default),
      T(test_stream_ordered_alloc_free),
      T(test_event_orders_two_streams),
      T(test_event_query_and_synchronize),
      T(test_event_never_recorded),
      T(test_event_native),
      T(test_free_unknown_pointer),
      T(test_free_wrong_size),
      T(test_double_free),
      T(test_null_arguments),
      T(test_unknown_device_id),
      T(test_copy_null_pointers),
      T(test_concurrent_threads),
      T(test_blocking_sizes_and_offsets),
      T(test_blocking_after_queued_work),
      T(test_device_release_refusals),
  };
  size_t n = 0;
  while (tests[n].test_func != NULL) n++;

  /* Cases that only apply to some configurations are listed, or said not
   * to run, explicitly: nothing is skipped silently. */
  if (g_conf.info.caps & ADR_CAP_HOST_ACCESSIBLE)
    tests[n++] = (struct CMUnitTest)T(test_host_accessible);
  else
    printf(
        "adr-conformance: not run: test_host_accessible (device lacks "
        "ADR_CAP_HOST_ACCESSIBLE)\n");
  if (g_conf.info.caps & ADR_CAP_SYNC_DOWNLOADS)
    tests[n++] = (struct CMUnitTest)T(test_copy_sync_downloads);
  else
    printf(
        "adr-conformance: not run: test_copy_sync_downloads (device lacks "
        "ADR_CAP_SYNC_DOWNLOADS: its downloads follow the stream)\n");
  if (g_conf.cpu != NULL) {
    tests[n++] = (struct CMUnitTest)T(test_copy_on_host_stream);
  } else {
    printf(
        "adr-conformance: not run: test_copy_on_host_stream (host mode: no CPU device, whose "
        "streams it orders host copies on)\n");
  }
  if (g_conf.cpu != NULL && g_conf.dev != g_conf.cpu) {
    tests[n++] = (struct CMUnitTest)T(test_stream_of_other_device);
    tests[n++] = (struct CMUnitTest)T(test_host_stream_of_other_device);
  } else {
    printf(
        "adr-conformance: not run: test_stream_of_other_device, "
        "test_host_stream_of_other_device (%s)\n",
        g_conf.cpu == NULL ? "host mode: no CPU device, whose streams serve as another device's"
                           : "the device under test is the CPU, whose streams it uses as "
                             "another device's");
  }
  if (g_conf.info.caps & ADR_CAP_IMPORT_NATIVE) {
    tests[n++] = (struct CMUnitTest)T(test_import_event);
    tests[n++] = (struct CMUnitTest)T(test_import_stream);
  } else {
    printf(
        "adr-conformance: not run: test_import_event, test_import_stream (device lacks "
        "ADR_CAP_IMPORT_NATIVE)\n");
  }
  if (g_conf.peer != NULL)
    tests[n++] = (struct CMUnitTest)T(test_peer_round_trip);
  else
    printf(
        "adr-conformance: not run: test_peer_round_trip (set ADR_CONFORMANCE_PEER=<device>, "
        "e.g. cpu or opencl:0)\n");
  char native_why[256] = "";
  const struct conf_native* helper = conf_native_get(g_conf.dev, native_why, sizeof(native_why));
  if (helper != NULL && helper->buffer != NULL)
    tests[n++] = (struct CMUnitTest)T(test_native_buffer_bounds);
  else
    printf("adr-conformance: not run: test_native_buffer_bounds (%s)\n",
           helper != NULL ? "the backend's addresses are native: no typed buffer look-up"
           : strcmp(g_conf.info.backend, "cpu") == 0 ? "the CPU's addresses are host pointers"
                                                     : native_why);
  /* Last: playing the application, the helpers take adr's native queues,
   * which turns host shortcuts off for the rest of the process. */
  if (helper != NULL) {
    /* The gated blocking case first: on OpenCL its gate takes no queue, so
     * it runs with the host shortcuts still on. */
    tests[n++] = (struct CMUnitTest)T(test_blocking_after_gated_work);
    tests[n++] = (struct CMUnitTest)T(test_async_small_copy_busy_stream);
    tests[n++] = (struct CMUnitTest)T(test_order_application_work);
    tests[n++] = (struct CMUnitTest)T(test_order_foreign_event_gate);
    tests[n++] = (struct CMUnitTest)T(test_blocking_after_application_work);
  } else {
    printf(
        "adr-conformance: not run: test_order_application_work, test_order_foreign_event_gate, "
        "test_blocking_after_gated_work, test_async_small_copy_busy_stream, "
        "test_blocking_after_application_work (%s)\n",
        native_why);
  }
  tests[n++] = (struct CMUnitTest)T(test_copy_overlapping);
  /* Last, once everything else ran: nothing of it loaded the cpu backend. */
  if (g_conf.host_mode && g_conf.cpu == NULL)
    tests[n++] = (struct CMUnitTest)T(test_host_no_cpu_backend);
  else
    printf("adr-conformance: not run: test_host_no_cpu_backend (%s)\n",
           g_conf.host_mode ? "the CPU is the device under test" : "set ADR_CONFORMANCE_HOST=null");
#undef T

  char group[160];
  snprintf(group, sizeof(group), "conformance %s (%s)", adr_device_name(g_conf.dev),
           g_conf.info.backend);
  const char* fault = getenv("ADR_CONFORMANCE_FAULT");
  if (fault != NULL && fault[0] != '\0') {
    if (fault_parse(fault) != 0) {
      fprintf(stderr,
              "adr-conformance: ADR_CONFORMANCE_FAULT=%s: expected slot:N:STATUS[:persistent]\n",
              fault);
      return 1;
    }
    st = adr_test_fault_set(g_fault.slot, g_fault.nth, g_fault.status, g_fault.persistent, &err);
    if (st != 0) {
      fprintf(stderr, "adr-conformance: adr_test_fault_set: %s\n", err.message);
      return 1;
    }
  }
  int failed = _cmocka_run_group_tests(group, tests, n, NULL, NULL);
  if (g_fault.on) {
    adr_test_fault_clear();
    uint64_t calls = 0, fired = 0;
    adr_test_fault_counts(&calls, &fired);
    failed += fault_sanity();
    /* A case the fault stopped may have left a native helper's objects
     * (gates, pipelines) behind; they are the test's, not adr's. */
    char why[128];
    const struct conf_native* h = conf_native_get(g_conf.dev, why, sizeof(why));
    if (h != NULL && h->abandon != NULL) h->abandon(g_conf.dev);
    printf("adr-conformance: fault mode %s: calls=%llu fired=%llu accepted=%u\n", fault,
           (unsigned long long)calls, (unsigned long long)fired, atomic_load(&g_fault.accepted));
    const char* report = getenv("ADR_CONFORMANCE_FAULT_REPORT");
    FILE* f = report ? fopen(report, "w") : NULL;
    if (f != NULL) {
      fprintf(f, "calls=%llu fired=%llu accepted=%u failed=%d\n", (unsigned long long)calls,
              (unsigned long long)fired, atomic_load(&g_fault.accepted), failed);
      fclose(f);
    }
  }
  free(g_res);
  return failed == 0 ? 0 : 1;
}
