/* SPDX-License-Identifier: Apache-2.0
 *
 * Bad input through the public API (issue 11, section 3), on the device
 * ADR_DEVICE names: every case that crashed or corrupted memory before
 * now returns an exact status with a message, and the memory next to the
 * target is untouched.
 *
 * Registered twice per device (tests/validate/meson.build): with
 * ADR_VALIDATE=1, where every case runs, and without, where only the checks
 * that are always on run (impossible sizes everywhere, ranges on devices
 * that are not host-accessible) and the rest is listed as not run.
 *
 * Exit status: 0 passed, 77 the device is missing and not required
 * (ADR_VALIDATE_REQUIRE unset), otherwise failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "adr/adr.h"

static struct adr_device* dev;
static struct adr_device* cpu;
static bool host_accessible;
static bool validating;

#define EXPECT(call, want, substring)                                                             \
  do {                                                                                            \
    struct adr_error err_ = {{0}};                                                                \
    struct adr_error* error_ = &err_;                                                             \
    int st_ = (call);                                                                             \
    if (st_ != (want))                                                                            \
      fail_msg("%s:%d: %s returned %s, expected %s; message: %s", __FILE__, __LINE__, #call,      \
               adr_status_name(st_), adr_status_name(want), err_.message);                        \
    if ((want) != 0 && strstr(err_.message, (substring)) == NULL)                                 \
      fail_msg("%s:%d: %s: message \"%s\" lacks \"%s\"", __FILE__, __LINE__, #call, err_.message, \
               (substring));                                                                      \
  } while (0)
#define OK(call) EXPECT(call, 0, "")
/* The calls below take `E` as their error argument. */
#define E error_

static void* dev_alloc(size_t n) {
  void* p = NULL;
  struct adr_error err = {{0}};
  if (adr_alloc(dev, n, 0, NULL, &p, &err) != 0) fail_msg("adr_alloc(%zu): %s", n, err.message);
  return p;
}

static void fill(void* d, int value, size_t n) {
  struct adr_error err = {{0}};
  if (adr_memset(dev, d, value, n, NULL, &err) != 0) fail_msg("adr_memset: %s", err.message);
}

/* Every byte of [d, d+n) on the device is `value`. */
static void expect_bytes(const void* d, int value, size_t n, const char* what) {
  unsigned char* h = malloc(n);
  struct adr_error err = {{0}};
  if (adr_copy(cpu, h, dev, d, n, NULL, &err) != 0) fail_msg("download: %s", err.message);
  for (size_t i = 0; i < n; i++)
    if (h[i] != (unsigned char)value)
      fail_msg("%s: byte %zu is 0x%02x, expected 0x%02x", what, i, h[i], value);
  free(h);
}

/* Two allocations of n bytes, `b` starting where `a` ends when the pool put
 * them side by side (it does for one size class; reported if not). */
static void neighbours(size_t n, void** a, void** b, void** spare, size_t spare_count) {
  for (size_t i = 0; i < spare_count; i++) spare[i] = dev_alloc(n);
  for (size_t i = 0; i < spare_count; i++)
    for (size_t j = 0; j < spare_count; j++)
      if ((char*)spare[j] == (char*)spare[i] + n) {
        *a = spare[i];
        *b = spare[j];
        return;
      }
  printf("note: no two of %zu allocations of %zu bytes are adjacent\n", spare_count, n);
  *a = spare[0];
  *b = spare[1];
}

/* Global (and exported: export_dynamic) so that the call sites the
 * validation layer reports name them. */
#define EXPORTED __attribute__((visibility("default")))
EXPORTED void test_stream_use_after_destroy(void** state);
EXPORTED void test_stream_double_destroy(void** state);
EXPORTED void test_event_double_destroy(void** state);
EXPORTED void test_event_use_after_destroy(void** state);
EXPORTED void test_stale_double_free(void** state);
EXPORTED void test_leak_report(void** state);
EXPORTED int leak_child(void);

/* ---- always on ------------------------------------------------------------ */

static void test_size_max(void** state) {
  (void)state;
  char* d = dev_alloc(256);
  fill(d, 0x11, 256);
  char h[256] = {0};
  EXPECT(adr_copy(dev, d, cpu, h, SIZE_MAX, NULL, E), EOVERFLOW, "exceeds PTRDIFF_MAX");
  EXPECT(adr_copy(cpu, h, dev, d, SIZE_MAX, NULL, E), EOVERFLOW, "exceeds PTRDIFF_MAX");
  EXPECT(adr_copy(dev, d, dev, d + 128, SIZE_MAX, NULL, E), EOVERFLOW, "exceeds PTRDIFF_MAX");
  EXPECT(adr_memset(dev, d, 0, SIZE_MAX, NULL, E), EOVERFLOW, "exceeds PTRDIFF_MAX");
  EXPECT(adr_memset(dev, d, 0, (size_t)PTRDIFF_MAX + 1, NULL, E), EOVERFLOW, "exceeds PTRDIFF_MAX");
  /* Below PTRDIFF_MAX but wrapping past the end of the address space. */
  void* high = (void*)(UINTPTR_MAX - 63);
  EXPECT(adr_memset(dev, high, 0, 128, NULL, E), EOVERFLOW, "wraps around");
  EXPECT(adr_copy(dev, d, cpu, high, 128, NULL, E), EOVERFLOW, "wraps around");
  struct adr_stream* s = NULL;
  OK(adr_stream_create(dev, &s, E));
  EXPECT(adr_copy(dev, d, cpu, h, SIZE_MAX, s, E), EOVERFLOW, "[adr_copy]");
  EXPECT(adr_memset(dev, d, 0, SIZE_MAX, s, E), EOVERFLOW, "[adr_memset]");
  OK(adr_stream_destroy(s, E));
  expect_bytes(d, 0x11, 256, "allocation after refused SIZE_MAX calls");
  OK(adr_free(dev, d, 256, NULL, E));
}

/* A copy or memset that runs past the end of an allocation into the
 * pool's next block: refused, the neighbour keeps its bytes. */
static void test_overrun(void** state) {
  (void)state;
  const size_t n = 256;
  void* spare[8];
  void *a, *b;
  neighbours(n, &a, &b, spare, 8);
  for (int i = 0; i < 8; i++) fill(spare[i], 0x5A, n);
  unsigned char h[512];
  memset(h, 0xEE, sizeof(h));
  EXPECT(adr_copy(dev, a, cpu, h, n + 64, NULL, E), EINVAL, "runs past the end");
  EXPECT(adr_copy(dev, (char*)a + 200, cpu, h, 57, NULL, E), EINVAL, "destination range");
  EXPECT(adr_memset(dev, a, 0xEE, n + 1, NULL, E), EINVAL, "runs past the end of its allocation");
  EXPECT(adr_memset(dev, (char*)a + n - 1, 0xEE, 2, NULL, E), EINVAL, "memset range");
  EXPECT(adr_copy(cpu, h, dev, a, n + 64, NULL, E), EINVAL, "source range");
  EXPECT(adr_copy(dev, b, dev, a, n + 64, NULL, E), EINVAL, "runs past the end");
  /* Host memory (a NULL device) on the other side, after copies inside a
   * that this thread's range cache remembers: the remembered range does
   * not let a longer copy through (the bytes go back unchanged). */
  OK(adr_copy(NULL, h, dev, (char*)a + 64, 64, NULL, E));
  OK(adr_copy(dev, (char*)a + 64, NULL, h, 64, NULL, E));
  EXPECT(adr_copy(dev, (char*)a + 64, NULL, h, n, NULL, E), EINVAL, "runs past the end");
  EXPECT(adr_copy(NULL, h, dev, (char*)a + 64, n, NULL, E), EINVAL, "runs past the end");
  struct adr_stream* s = NULL;
  OK(adr_stream_create(dev, &s, E));
  EXPECT(adr_copy(dev, a, cpu, h, 2 * n, s, E), EINVAL, "runs past the end");
  EXPECT(adr_memset(dev, a, 0xEE, 2 * n, s, E), EINVAL, "runs past the end");
  OK(adr_stream_destroy(s, E));
  /* Exactly to the end is fine. */
  OK(adr_memset(dev, (char*)a + n - 8, 0x5A, 8, NULL, E));
  OK(adr_copy(dev, (char*)a + n - 16, cpu, h, 0, NULL, E));
  for (int i = 0; i < 8; i++) expect_bytes(spare[i], 0x5A, n, "neighbour after refused overruns");
  for (int i = 0; i < 8; i++) OK(adr_free(dev, spare[i], n, NULL, E));
}

/* An event used with a stream of another device. */
static void test_wrong_device_event(void** state) {
  (void)state;
  struct adr_event* e = NULL;
  struct adr_event* ce = NULL;
  struct adr_stream* cs = NULL;
  struct adr_stream* s = NULL;
  OK(adr_event_create(dev, &e, E));
  OK(adr_event_create(cpu, &ce, E));
  OK(adr_stream_create(cpu, &cs, E));
  OK(adr_stream_create(dev, &s, E));
  EXPECT(adr_event_record(e, cs, E), EINVAL, "cannot be recorded on a stream of cpu:0");
  EXPECT(adr_event_record(ce, s, E), EINVAL, "cannot be recorded on a stream of");
  /* A wait across backends is a host wait, which orders just as well. */
  OK(adr_event_record(e, s, E));
  OK(adr_stream_wait_event(cs, e, E));
  OK(adr_stream_synchronize(cs, E));
  OK(adr_event_destroy(e, E));
  OK(adr_event_destroy(ce, E));
  OK(adr_stream_destroy(cs, E));
  OK(adr_stream_destroy(s, E));
}

/* ---- validation layer ---------------------------------------------------- */

void test_stream_use_after_destroy(void** state) {
  (void)state;
  char* d = dev_alloc(256);
  char h[64] = {0};
  struct adr_stream* s = NULL;
  struct adr_event* e = NULL;
  OK(adr_event_create(dev, &e, E));
  OK(adr_stream_create(dev, &s, E));
  OK(adr_stream_destroy(s, E));
  const char* why = "was destroyed at test_stream_use_after_destroy";
  EXPECT(adr_stream_synchronize(s, E), EINVAL, why);
  EXPECT(adr_stream_synchronize(s, E), EINVAL, "created at test_stream_use_after_destroy");
  EXPECT(adr_copy(dev, d, cpu, h, 64, s, E), EINVAL, why);
  EXPECT(adr_memset(dev, d, 0, 64, s, E), EINVAL, why);
  EXPECT(adr_event_record(e, s, E), EINVAL, why);
  EXPECT(adr_stream_wait_event(s, e, E), EINVAL, why);
  void* p = NULL;
  EXPECT(adr_alloc(dev, 64, 0, s, &p, E), EINVAL, why);
  EXPECT(adr_free(dev, d, 256, s, E), EINVAL, why);
  assert_null(adr_stream_native(s));
  OK(adr_event_destroy(e, E));
  OK(adr_free(dev, d, 256, NULL, E));
}

void test_stream_double_destroy(void** state) {
  (void)state;
  struct adr_stream* s = NULL;
  OK(adr_stream_create(dev, &s, E));
  OK(adr_stream_destroy(s, E));
  EXPECT(adr_stream_destroy(s, E), EINVAL, "[adr_stream_destroy]");
  EXPECT(adr_stream_destroy(s, E), EINVAL, "was destroyed at test_stream_double_destroy");
}

void test_event_double_destroy(void** state) {
  (void)state;
  struct adr_event* e = NULL;
  OK(adr_event_create(dev, &e, E));
  OK(adr_event_record(e, NULL, E));
  OK(adr_event_destroy(e, E));
  EXPECT(adr_event_destroy(e, E), EINVAL, "[adr_event_destroy]");
  EXPECT(adr_event_destroy(e, E), EINVAL, "was destroyed at test_event_double_destroy");
}

void test_event_use_after_destroy(void** state) {
  (void)state;
  struct adr_event* e = NULL;
  struct adr_stream* s = NULL;
  OK(adr_stream_create(dev, &s, E));
  OK(adr_event_create(dev, &e, E));
  OK(adr_event_destroy(e, E));
  const char* why = "was destroyed at test_event_use_after_destroy";
  EXPECT(adr_event_record(e, s, E), EINVAL, why);
  EXPECT(adr_event_synchronize(e, E), EINVAL, why);
  EXPECT(adr_event_query(e, E), EINVAL, why);
  EXPECT(adr_stream_wait_event(s, e, E), EINVAL, why);
  EXPECT(adr_stream_wait_event(NULL, e, E), EINVAL, why);
  assert_null(adr_event_native(e));
  /* A stream where an event is expected, and the other way round. */
  EXPECT(adr_event_synchronize((struct adr_event*)s, E), EINVAL, "not an event");
  OK(adr_stream_destroy(s, E));
}

/* free(a); b = alloc() reuses a's address without the quarantine; the
 * stale second free(a) must not free b. */
void test_stale_double_free(void** state) {
  (void)state;
  const size_t n = 512;
  void* a = dev_alloc(n);
  OK(adr_free(dev, a, n, NULL, E));
  void* b = dev_alloc(n);
  fill(b, 0x77, n);
  if (b == a) fail_msg("the freed address was handed out again at once: no quarantine");
  EXPECT(adr_free(dev, a, n, NULL, E), EINVAL, "double free");
  EXPECT(adr_free(dev, a, n, NULL, E), EINVAL, "already freed at test_stale_double_free");
  struct adr_stream* s = NULL;
  OK(adr_stream_create(dev, &s, E));
  EXPECT(adr_free(dev, a, n, s, E), EINVAL, "double free");
  OK(adr_stream_destroy(s, E));
  expect_bytes(b, 0x77, n, "live allocation after a stale double free");
  OK(adr_free(dev, b, n, NULL, E));
  EXPECT(adr_free(dev, b, n, NULL, E), EINVAL, "double free");
}

/* Stream-ordered frees through the quarantine still wait for the stream. */
static void test_quarantine_stream_order(void** state) {
  (void)state;
  struct adr_stream* s = NULL;
  OK(adr_stream_create(dev, &s, E));
  for (int round = 0; round < 3000; round++) {
    void* p = NULL;
    OK(adr_alloc(dev, 4096, 0, s, &p, E));
    OK(adr_memset(dev, p, round & 0xff, 4096, s, E));
    OK(adr_free(dev, p, 4096, s, E));
  }
  OK(adr_stream_synchronize(s, E));
  OK(adr_stream_destroy(s, E));
}

/* Counts the objects test_leak_report made (by their call site). */
struct leaks {
  int allocations, streams, events;
};

static void on_leak(void* ctx, int kind, struct adr_device* device, const void* object, size_t size,
                    const char* created_at) {
  struct leaks* l = ctx;
  if (device != dev || strstr(created_at, "test_leak_report") == NULL) return;
  if (kind == ADR_VALIDATION_ALLOCATION && size == 333) l->allocations++;
  if (kind == ADR_VALIDATION_STREAM) l->streams++;
  if (kind == ADR_VALIDATION_EVENT) l->events++;
  (void)object;
}

void test_leak_report(void** state) {
  (void)state;
  struct adr_validation_counts before = {.struct_size = sizeof(before)};
  OK(adr_validation_report(NULL, NULL, &before, E));
  void* p = NULL;
  struct adr_stream* s = NULL;
  struct adr_event* e = NULL;
  OK(adr_alloc(dev, 333, 0, NULL, &p, E));
  OK(adr_stream_create(dev, &s, E));
  OK(adr_event_create(dev, &e, E));
  struct leaks l = {0, 0, 0};
  struct adr_validation_counts c = {.struct_size = sizeof(c)};
  OK(adr_validation_report(on_leak, &l, &c, E));
  assert_int_equal(c.allocations, before.allocations + 1);
  assert_int_equal(c.allocation_bytes, before.allocation_bytes + 333);
  assert_int_equal(c.streams, before.streams + 1);
  assert_int_equal(c.events, before.events + 1);
  assert_int_equal(l.allocations, 1);
  assert_int_equal(l.streams, 1);
  assert_int_equal(l.events, 1);
  OK(adr_free(dev, p, 333, NULL, E));
  OK(adr_stream_destroy(s, E));
  OK(adr_event_destroy(e, E));
  OK(adr_validation_report(NULL, NULL, &c, E));
  assert_int_equal(c.allocations, before.allocations);
  assert_int_equal(c.streams, before.streams);
  assert_int_equal(c.events, before.events);
  /* Every refusal is counted. */
  EXPECT(adr_event_destroy(e, E), EINVAL, "was destroyed");
  struct adr_validation_counts after = {.struct_size = sizeof(after)};
  OK(adr_validation_report(NULL, NULL, &after, E));
  assert_int_equal(after.errors, c.errors + 1);
}

/* The report at exit: a child process leaks one of each and exits. */
int leak_child(void) {
  struct adr_error err = {{0}};
  struct adr_device* d = NULL;
  void* p = NULL;
  struct adr_stream* s = NULL;
  struct adr_event* e = NULL;
  if (adr_device_default(&d, &err) || adr_alloc(d, 4321, 0, NULL, &p, &err) ||
      adr_stream_create(d, &s, &err) || adr_event_create(d, &e, &err)) {
    fprintf(stderr, "leak child: %s\n", err.message);
    return 1;
  }
  return 0;
}

static void test_leak_report_at_exit(void** state) {
  (void)state;
  char out[] = "/tmp/adr-validate-leakXXXXXX";
  int fd = mkstemp(out);
  assert_true(fd >= 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(fd, 2);
    setenv("ADR_VALIDATE", "1", 1);
    setenv("ADR_LOG", "warn", 1);
    execl("/proc/self/exe", "test_validate", "--leak-child", (char*)NULL);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  char text[8192] = {0};
  lseek(fd, 0, SEEK_SET);
  ssize_t got = read(fd, text, sizeof(text) - 1);
  close(fd);
  unlink(out);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fail_msg("leak child exited with status %#x: %s", status, text);
  assert_true(got > 0);
  const char* want[] = {"leak: 4321 bytes at", "allocated at leak_child", "leak: stream",
                        "leak: event", "1 allocation (4321 bytes), 1 stream, 1 event still alive"};
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
    if (strstr(text, want[i]) == NULL) fail_msg("exit report lacks \"%s\":\n%s", want[i], text);
}

/* The layer's state is fixed by the first object: enabling it later is
 * refused (or a no-op when it is on), and the report needs it on. */
static void test_enable_state(void** state) {
  (void)state;
  void* p = dev_alloc(64);
  struct adr_validation_counts c = {.struct_size = sizeof(c)};
  if (validating) {
    OK(adr_validation_enable(E));
    assert_int_equal(adr_validation_enabled(), 1);
    OK(adr_validation_report(NULL, NULL, &c, E));
    assert_true(c.allocations >= 1);
  } else {
    EXPECT(adr_validation_enable(E), EBUSY, "too late");
    assert_int_equal(adr_validation_enabled(), 0);
    EXPECT(adr_validation_report(NULL, NULL, &c, E), ENOTSUP, "the validation layer is off");
  }
  c.struct_size = 4;
  EXPECT(adr_validation_report(NULL, NULL, &c, E), EINVAL, "struct_size");
  OK(adr_free(dev, p, 64, NULL, E));
}

/* ---- driver ----------------------------------------------------------------- */

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "--leak-child") == 0) return leak_child();
  struct adr_error err = {{0}};
  validating = adr_validation_enabled();
  if (adr_device_default(&dev, &err) != 0) {
    const char* req = getenv("ADR_VALIDATE_REQUIRE");
    fprintf(stderr, "test_validate: no device (%s)%s\n", err.message,
            req && *req ? "" : ": skipped");
    return req && *req ? 1 : 77;
  }
  if (adr_device_get(ARROW_DEVICE_CPU, 0, &cpu, &err) != 0) {
    fprintf(stderr, "test_validate: no cpu: %s\n", err.message);
    return 1;
  }
  struct adr_device_info info = {.struct_size = sizeof(info)};
  if (adr_device_info_get(dev, &info, &err) != 0) {
    fprintf(stderr, "test_validate: %s\n", err.message);
    return 1;
  }
  host_accessible = (info.caps & ADR_CAP_HOST_ACCESSIBLE) != 0;
  printf("test_validate: %s, %s, validation layer %s\n", adr_device_name(dev),
         host_accessible ? "host-accessible" : "not host-accessible", validating ? "on" : "off");

  struct CMUnitTest tests[16];
  size_t n = 0;
  tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_size_max);
  tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_enable_state);
  if (validating || !host_accessible)
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_overrun);
  else
    printf(
        "not run: test_overrun (a host-accessible device is range-checked by the "
        "validation layer and ASan only)\n");
  if (dev != cpu)
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_wrong_device_event);
  else
    printf(
        "not run: test_wrong_device_event (needs a device besides cpu:0; the opencl and "
        "vulkan runs use cpu:0 as the other device)\n");
  if (validating) {
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_stream_use_after_destroy);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_stream_double_destroy);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_event_double_destroy);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_event_use_after_destroy);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_stale_double_free);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_quarantine_stream_order);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_leak_report);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_leak_report_at_exit);
  } else {
    printf(
        "not run: handle, double-free and leak cases (the validation layer is off; they "
        "run in the -validate registration)\n");
  }
  return _cmocka_run_group_tests("validate", tests, n, NULL, NULL);
}
