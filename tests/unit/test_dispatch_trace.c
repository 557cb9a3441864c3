/* SPDX-License-Identifier: Apache-2.0
 *
 * The one checked call per slot (core/dispatch.c) on the CPU device, seen
 * from the application through ADR_LOG=trace,file=PATH: adr_event_query and
 * the caching pool's own event calls are traced like every other call, in
 * the "[device] slot(args) -> STATUS in N ns" format; a failing pool event
 * call is logged with the core's "[pool][cpu] ..." message (not dropped)
 * while the public call it happened under still succeeds; a failing
 * adr_event_query reports "[adr_event_query][cpu] ...".
 */
/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <adr/adr.h>
#include <adr/testing.h>

static char log_path[] = "/tmp/adr-dispatch-trace-XXXXXX";
static struct adr_device* cpu;
static long log_mark;

/* The log written since the last mark (malloc'd, NUL-terminated). */
static char* log_since_mark(void) {
  FILE* f = fopen(log_path, "r");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long end = ftell(f);
  assert_true(end >= log_mark);
  fseek(f, log_mark, SEEK_SET);
  char* text = calloc(1, (size_t)(end - log_mark) + 1);
  assert_non_null(text);
  size_t n = fread(text, 1, (size_t)(end - log_mark), f);
  assert_int_equal(n, (size_t)(end - log_mark));
  fclose(f);
  log_mark = end;
  return text;
}

static void mark(void) {
  free(log_since_mark());
}

/* The first trace line of `slot` on the CPU device in text, checked for
 * the format; NULL if there is none. */
static const char* trace_line(const char* text, const char* slot, const char* status) {
  char head[96];
  snprintf(head, sizeof(head), "adr: trace: [cpu:0] %s(", slot);
  const char* at = strstr(text, head);
  if (at == NULL) return NULL;
  const char* eol = strchr(at, '\n');
  assert_non_null(eol);
  char want[48];
  snprintf(want, sizeof(want), ") -> %s in ", status);
  const char* st = strstr(at, want);
  assert_true(st != NULL && st < eol);
  assert_true(strncmp(eol - 3, " ns", 3) == 0);
  return at;
}

static void test_event_query_traced(void** state) {
  (void)state;
  struct adr_error e = {{0}};
  struct adr_event* ev = NULL;
  assert_int_equal(adr_event_create(cpu, &ev, &e), 0);
  assert_int_equal(adr_event_record(ev, NULL, &e), 0);
  mark();
  assert_int_equal(adr_event_query(ev, &e), 0);
  char* text = log_since_mark();
  assert_non_null(trace_line(text, "event_query", "OK"));
  free(text);
  assert_int_equal(adr_event_destroy(ev, &e), 0);
}

/* A block freed on a stream is covered by an event when the stream goes:
 * the pool creates, records, waits for and destroys it. The test makes no
 * event call of its own meanwhile, so every event line is the pool's. */
static int pool_round(struct adr_error* e) {
  struct adr_stream* s = NULL;
  void* p = NULL;
  assert_int_equal(adr_stream_create(cpu, &s, e), 0);
  assert_int_equal(adr_alloc(cpu, 4096, 0, s, &p, e), 0);
  assert_int_equal(adr_free(cpu, p, 4096, s, e), 0);
  return adr_stream_destroy(s, e);
}

static void test_pool_events_traced(void** state) {
  (void)state;
  struct adr_error e = {{0}};
  mark();
  assert_int_equal(pool_round(&e), 0);
  char* text = log_since_mark();
  assert_non_null(trace_line(text, "event_create", "OK"));
  assert_non_null(trace_line(text, "event_record", "OK"));
  assert_non_null(trace_line(text, "event_synchronize", "OK"));
  assert_non_null(trace_line(text, "event_destroy", "OK"));
  free(text);
}

static void test_pool_event_failure_logged(void** state) {
  (void)state;
  struct adr_error e = {{0}};
  mark();
  assert_int_equal(adr_test_fault_set("event_record", 1, EIO, false, &e), 0);
  /* The pool falls back (the block is not reused before the stream is
   * gone); the application's call succeeds. */
  assert_int_equal(pool_round(&e), 0);
  uint64_t fired = 0;
  adr_test_fault_counts(NULL, &fired);
  adr_test_fault_clear();
  assert_int_equal(fired, 1);
  char* text = log_since_mark();
  /* An injected call never reaches the backend and is not traced; the
   * pool's other calls are. */
  assert_null(trace_line(text, "event_record", "OK"));
  assert_non_null(trace_line(text, "event_create", "OK"));
  assert_non_null(strstr(text,
                         "adr: warn: [cpu:0] [pool][cpu] EIO: injected fault (call 1 of slot "
                         "'event_record') (the pool does not reuse the blocks it covers)"));
  free(text);
}

static void test_event_query_failure_message(void** state) {
  (void)state;
  struct adr_error e = {{0}};
  struct adr_event* ev = NULL;
  assert_int_equal(adr_event_create(cpu, &ev, &e), 0);
  assert_int_equal(adr_event_record(ev, NULL, &e), 0);
  assert_int_equal(adr_test_fault_set("event_query", 1, EIO, false, &e), 0);
  assert_int_equal(adr_event_query(ev, &e), EIO);
  adr_test_fault_clear();
  assert_string_equal(e.message,
                      "[adr_event_query][cpu] EIO: injected fault (call 1 of slot 'event_query')");
  assert_int_equal(adr_event_query(ev, &e), 0);
  assert_int_equal(adr_event_destroy(ev, &e), 0);
}

int main(void) {
  int fd = mkstemp(log_path);
  if (fd < 0) {
    perror("mkstemp");
    return 1;
  }
  close(fd);
  char value[128];
  snprintf(value, sizeof(value), "trace,file=%s", log_path);
  setenv("ADR_LOG", value, 1);
  setenv("ADR_BACKENDS", "cpu", 1);
  struct adr_error e = {{0}};
  if (adr_device_get(ARROW_DEVICE_CPU, 0, &cpu, &e) != 0) {
    fprintf(stderr, "no CPU device: %s\n", e.message);
    unlink(log_path);
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_event_query_traced),
      cmocka_unit_test(test_pool_events_traced),
      cmocka_unit_test(test_pool_event_failure_logged),
      cmocka_unit_test(test_event_query_failure_message),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  unlink(log_path);
  return failed;
}
