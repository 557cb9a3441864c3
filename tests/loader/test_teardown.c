/* SPDX-License-Identifier: Apache-2.0
 *
 * The default-stream teardown contract (adr/backend.h) from the core's
 * side, through the counters of the t_good test plugin (test_plugin.c):
 *
 *   - adr_stream_destroy on the default stream returns EINVAL and never
 *     reaches the backend's stream_destroy; created streams do;
 *   - at process exit the core drains the default stream
 *     (stream_synchronize), destroys the streams the application left
 *     (stream_destroy), then calls device_close once per opened device,
 *     never stream_destroy on the default stream, and then shutdown.
 *
 * The second half runs after adr's own exit handler: main registers
 * check_after_teardown with atexit before its first adr call, so it runs
 * after adr's (atexit runs handlers in reverse order). It exits 1 with the
 * counters when the contract was broken.
 */
/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adr/adr.h"

/* The prefix of test_plugin.c's struct (kept in step with it). */
struct adr_test_plugin_stats {
  long h2d, d2h, d2d, peer, alloc, free;
  long default_destroy, stream_destroy, default_sync, device_close, close_undrained, shutdown;
};

static struct adr_test_plugin_stats* stats;
static int cases_failed = -1;

static struct adr_test_plugin_stats* stats_of(const char* backend) {
  size_t n = adr_backend_count();
  for (size_t i = 0; i < n; i++) {
    struct adr_backend_info bi = {.struct_size = sizeof(bi)};
    assert_int_equal(adr_backend_info_get(i, &bi, NULL), 0);
    if (strcmp(bi.name, backend) != 0) continue;
    assert_int_equal(bi.state, ADR_BACKEND_LOADED);
    void* h = dlopen(bi.path, RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(h);
    struct adr_test_plugin_stats* s = dlsym(h, "adr_test_plugin_stats");
    dlclose(h); /* drops only the reference NOLOAD added; adr keeps it loaded */
    assert_non_null(s);
    return s;
  }
  fail_msg("backend %s not found", backend);
  return NULL;
}

static void test_destroy_default_never_reaches_backend(void** state) {
  (void)state;
  struct adr_device* dev = NULL;
  assert_int_equal(adr_device_get(ARROW_DEVICE_EXT_DEV, 0, &dev, NULL), 0);
  stats = stats_of("t_good");
  struct adr_stream* def = adr_stream_default(dev);
  assert_non_null(def);
  struct adr_error e;
  memset(&e, 0, sizeof(e));
  assert_int_equal(adr_stream_destroy(def, &e), EINVAL);
  assert_non_null(strstr(e.message, "[adr_stream_destroy][t_good] the default stream of"));
  assert_int_equal(stats->default_destroy, 0);
  assert_int_equal(stats->stream_destroy, 0);

  struct adr_stream* s = NULL;
  assert_int_equal(adr_stream_create(dev, &s, NULL), 0);
  assert_int_equal(adr_stream_destroy(s, NULL), 0);
  assert_int_equal(stats->stream_destroy, 1);
  assert_int_equal(stats->default_destroy, 0);
  assert_int_equal(stats->device_close, 0);
}

/* Leaves work for the teardown: a live stream and an allocation on the
 * device, and work queued on the default stream. */
static void test_leave_state_for_teardown(void** state) {
  (void)state;
  struct adr_device* dev = NULL;
  assert_int_equal(adr_device_get(ARROW_DEVICE_EXT_DEV, 0, &dev, NULL), 0);
  struct adr_stream* s = NULL;
  assert_int_equal(adr_stream_create(dev, &s, NULL), 0);
  void* p = NULL;
  assert_int_equal(adr_alloc(dev, 4096, 0, adr_stream_default(dev), &p, NULL), 0);
  assert_int_equal(adr_memset(dev, p, 1, 4096, adr_stream_default(dev), NULL), 0);
  assert_int_equal(stats->device_close, 0);
  assert_int_equal(stats->shutdown, 0);
}

static void check_after_teardown(void) {
  if (cases_failed != 0) return; /* the cases already failed (or never ran) */
  if (stats == NULL) {
    fprintf(stderr, "teardown: the plugin's counters were never found\n");
    _exit(1);
  }
  struct adr_test_plugin_stats c = *stats;
  int bad = 0;
#define EXPECT(cond)                                                   \
  if (!(cond)) {                                                       \
    fprintf(stderr, "teardown contract broken: expected %s\n", #cond); \
    bad = 1;                                                           \
  }
  EXPECT(c.default_destroy == 0);
  EXPECT(c.stream_destroy == 2); /* one by the application, one left for the teardown */
  EXPECT(c.default_sync >= 1);
  EXPECT(c.device_close == 1); /* only ext_dev:0 was opened */
  EXPECT(c.close_undrained == 0);
  EXPECT(c.shutdown == 1);
#undef EXPECT
  fprintf(stderr,
          "teardown: stream_destroy(default) %ld, stream_destroy %ld, synchronize(default) %ld, "
          "device_close %ld (undrained %ld), shutdown %ld\n",
          c.default_destroy, c.stream_destroy, c.default_sync, c.device_close, c.close_undrained,
          c.shutdown);
  if (bad) _exit(1);
}

int main(void) {
  /* Before the first adr call: runs after adr's exit handler. */
  atexit(check_after_teardown);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_destroy_default_never_reaches_backend),
      cmocka_unit_test(test_leave_state_for_teardown),
  };
  cases_failed = cmocka_run_group_tests(tests, NULL, NULL);
  return cases_failed;
}
