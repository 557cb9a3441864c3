/* SPDX-License-Identifier: Apache-2.0
 *
 * adr_copy routing, observed through the test plugins' route counters:
 * CPU<->X goes to X's copy with a NULL host side, X<->X to X once, two
 * devices of one backend as a peer copy, and two backends through host
 * staging in chunks — with the data checked each time.
 * Environment: ADR_PLUGIN_PATH=<tests/loader>, ADR_BACKENDS=cpu,t_good,t_vpi.
 */
#include <dlfcn.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "adr/adr.h"

struct adr_test_plugin_stats {
  long h2d, d2h, d2d, peer, alloc, free;
};

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
    dlclose(h); /* drops only the reference NOLOAD added */
    assert_non_null(s);
    return s;
  }
  fail_msg("backend %s not found", backend);
  return NULL;
}

static struct adr_device *cpu, *ext0, *ext1, *vpi;
static struct adr_test_plugin_stats *good, *other;

static int setup(void** state) {
  (void)state;
  assert_int_equal(adr_device_get(ARROW_DEVICE_CPU, 0, &cpu, NULL), 0);
  assert_int_equal(adr_device_get(ARROW_DEVICE_EXT_DEV, 0, &ext0, NULL), 0);
  assert_int_equal(adr_device_get(ARROW_DEVICE_EXT_DEV, 1, &ext1, NULL), 0);
  assert_int_equal(adr_device_get(ARROW_DEVICE_VPI, 0, &vpi, NULL), 0);
  good = stats_of("t_good");
  other = stats_of("t_vpi");
  return 0;
}

static void fill(unsigned char* p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 2654435761u + seed);
}

static void test_host_device_routes(void** state) {
  (void)state;
  enum { N = 4096 };
  unsigned char src[N], back[N];
  fill(src, N, 1);
  void *d = NULL, *d2 = NULL, *p = NULL;
  assert_int_equal(adr_alloc(ext0, N, 0, NULL, &d, NULL), 0);
  assert_int_equal(adr_alloc(ext0, N, 0, NULL, &d2, NULL), 0);
  assert_int_equal(adr_alloc(ext1, N, 0, NULL, &p, NULL), 0);
  struct adr_test_plugin_stats before = *good;

  assert_int_equal(adr_copy(ext0, d, cpu, src, N, NULL, NULL), 0);
  assert_int_equal(good->h2d, before.h2d + 1);
  assert_int_equal(adr_copy(ext0, d2, ext0, d, N, NULL, NULL), 0);
  assert_int_equal(good->d2d, before.d2d + 1);
  assert_int_equal(adr_copy(ext1, p, ext0, d2, N, NULL, NULL), 0);
  assert_int_equal(good->peer, before.peer + 1);
  memset(back, 0, N);
  assert_int_equal(adr_copy(cpu, back, ext1, p, N, NULL, NULL), 0);
  assert_int_equal(good->d2h, before.d2h + 1);
  assert_memory_equal(src, back, N);

  /* A copy on a CPU stream to a foreign device drains the CPU stream and
   * still goes through the device's copy. */
  struct adr_stream* cs = NULL;
  assert_int_equal(adr_stream_create(cpu, &cs, NULL), 0);
  assert_int_equal(adr_copy(ext0, d, cpu, src, N, cs, NULL), 0);
  assert_int_equal(good->h2d, before.h2d + 2);
  assert_int_equal(adr_stream_destroy(cs, NULL), 0);

  assert_int_equal(adr_free(ext0, d, N, NULL, NULL), 0);
  assert_int_equal(adr_free(ext0, d2, N, NULL, NULL), 0);
  assert_int_equal(adr_free(ext1, p, N, NULL, NULL), 0);
}

/* Host memory as a NULL device: one call of the device's copy with a NULL
 * host side, on the NULL stream and the device's stream, the same routes
 * as the CPU device; host to host and host memset reach no backend. */
static void test_null_device_routes(void** state) {
  (void)state;
  enum { N = 4096 };
  unsigned char src[N], back[N], other_host[N];
  fill(src, N, 3);
  void* d = NULL;
  assert_int_equal(adr_alloc(ext0, N, 0, NULL, &d, NULL), 0);
  struct adr_test_plugin_stats before = *good, before_other = *other;

  assert_int_equal(adr_copy(ext0, d, NULL, src, N, NULL, NULL), 0);
  assert_int_equal(good->h2d, before.h2d + 1);
  memset(back, 0, N);
  assert_int_equal(adr_copy(NULL, back, ext0, d, N, NULL, NULL), 0);
  assert_int_equal(good->d2h, before.d2h + 1);
  assert_memory_equal(src, back, N);

  struct adr_stream* s = NULL;
  assert_int_equal(adr_stream_create(ext0, &s, NULL), 0);
  assert_int_equal(adr_copy(ext0, d, NULL, src, N, s, NULL), 0);
  assert_int_equal(adr_copy(NULL, back, ext0, d, N, s, NULL), 0);
  assert_int_equal(adr_stream_synchronize(s, NULL), 0);
  assert_int_equal(good->h2d, before.h2d + 2);
  assert_int_equal(good->d2h, before.d2h + 2);
  /* The stream must be the device's: a CPU stream is refused. */
  struct adr_stream* cs = NULL;
  assert_int_equal(adr_stream_create(cpu, &cs, NULL), 0);
  struct adr_error err = {{0}};
  assert_int_equal(adr_copy(ext0, d, NULL, src, N, cs, &err), EINVAL);
  assert_non_null(strstr(err.message, "host memory"));
  assert_int_equal(good->h2d, before.h2d + 2);

  /* Host to host and host memset: the core's own, no backend call. */
  assert_int_equal(adr_copy(NULL, other_host, NULL, src, N, NULL, NULL), 0);
  assert_memory_equal(src, other_host, N);
  assert_int_equal(adr_memset(NULL, other_host, 7, N, NULL, NULL), 0);
  assert_int_equal(other_host[N - 1], 7);
  assert_int_equal(adr_copy(NULL, other_host, NULL, src, N, s, NULL), 0);
  assert_memory_equal(src, other_host, N);
  assert_int_equal(good->h2d, before.h2d + 2);
  assert_int_equal(good->d2h, before.d2h + 2);
  assert_int_equal(good->d2d, before.d2d);
  assert_int_equal(other->h2d + other->d2h + other->d2d,
                   before_other.h2d + before_other.d2h + before_other.d2d);

  assert_int_equal(adr_stream_destroy(cs, NULL), 0);
  assert_int_equal(adr_stream_destroy(s, NULL), 0);
  assert_int_equal(adr_free(ext0, d, N, NULL, NULL), 0);
}

static void test_cross_backend_staged(void** state) {
  (void)state;
  /* 20 MiB + 3: three 8 MiB chunks, the last one short. */
  const size_t n = (20u << 20) + 3;
  unsigned char* src = malloc(n);
  unsigned char* back = malloc(n);
  assert_non_null(src);
  assert_non_null(back);
  fill(src, n, 7);
  void *a = NULL, *b = NULL;
  assert_int_equal(adr_alloc(ext0, n, 0, NULL, &a, NULL), 0);
  assert_int_equal(adr_alloc(vpi, n, 0, NULL, &b, NULL), 0);
  assert_int_equal(adr_copy(ext0, a, cpu, src, n, NULL, NULL), 0);
  struct adr_test_plugin_stats g0 = *good, o0 = *other;
  /* From the middle of one allocation to the middle of the other. */
  assert_int_equal(adr_copy(vpi, (char*)b + 5, ext0, (char*)a + 3, n - 8, NULL, NULL), 0);
  assert_int_equal(good->d2h - g0.d2h, 3);  /* read out in 3 chunks */
  assert_int_equal(other->h2d - o0.h2d, 3); /* written in 3 chunks */
  assert_int_equal(good->peer, g0.peer);
  memset(back, 0, n);
  assert_int_equal(adr_copy(cpu, back, vpi, (char*)b + 5, n - 8, NULL, NULL), 0);
  assert_memory_equal(back, src + 3, n - 8);
  /* A stream of one side is accepted; a stream of a third device is not. */
  struct adr_stream* s = NULL;
  struct adr_error err = {{0}};
  assert_int_equal(adr_stream_create(ext1, &s, NULL), 0);
  assert_int_equal(adr_copy(vpi, b, ext0, a, 64, s, &err), EINVAL);
  assert_non_null(strstr(err.message, "neither"));
  assert_int_equal(adr_stream_destroy(s, NULL), 0);
  assert_int_equal(adr_stream_create(vpi, &s, NULL), 0);
  assert_int_equal(adr_copy(vpi, b, ext0, a, 64, s, NULL), 0);
  assert_int_equal(adr_stream_destroy(s, NULL), 0);
  assert_int_equal(adr_free(ext0, a, n, NULL, NULL), 0);
  assert_int_equal(adr_free(vpi, b, n, NULL, NULL), 0);
  free(src);
  free(back);
}

static void test_event_across_backends(void** state) {
  (void)state;
  /* A stream of another backend waits on the host instead. */
  struct adr_event* e = NULL;
  struct adr_stream* s = NULL;
  assert_int_equal(adr_event_create(ext0, &e, NULL), 0);
  assert_int_equal(adr_stream_create(vpi, &s, NULL), 0);
  assert_int_equal(adr_event_record(e, NULL, NULL), 0);
  assert_int_equal(adr_stream_wait_event(s, e, NULL), 0);
  struct adr_error err = {{0}};
  assert_int_equal(adr_event_record(e, s, &err), EINVAL);
  assert_non_null(strstr(err.message, "cannot be recorded on a stream of vpi:0"));
  assert_int_equal(adr_stream_destroy(s, NULL), 0);
  assert_int_equal(adr_event_destroy(e, NULL), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_host_device_routes),
      cmocka_unit_test(test_null_device_routes),
      cmocka_unit_test(test_cross_backend_staged),
      cmocka_unit_test(test_event_across_backends),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
