/* SPDX-License-Identifier: Apache-2.0
 *
 * The fault-injection API (adr/testing.h) and ADR_FAULT, on the CPU device:
 * the Nth call of a slot fails once or persistently with the chosen status
 * and a clean message, "any" and "malloc" count what they say, counting
 * only (N = 0) fails nothing, bad settings are refused, and the variable
 * arms it (or, malformed, fails the first call with a message naming it).
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
#include <sys/wait.h>
#include <unistd.h>

#include <adr/adr.h>
#include <adr/testing.h>

static struct adr_device* cpu;
static char src[256], dst[256];

static int copy(struct adr_error* e) {
  memset(e, 0, sizeof(*e));
  return adr_copy(cpu, dst, cpu, src, sizeof(src), NULL, e);
}

static int reset(void** state) {
  (void)state;
  adr_test_fault_clear();
  return 0;
}

static void test_nth_call_fails_once(void** state) {
  (void)state;
  struct adr_error e;
  assert_int_equal(adr_test_fault_set("copy", 2, EIO, false, &e), 0);
  assert_int_equal(copy(&e), 0);
  assert_int_equal(copy(&e), EIO);
  assert_string_equal(e.message, "[adr_copy][cpu] EIO: injected fault (call 2 of slot 'copy')");
  assert_int_equal(copy(&e), 0);
  uint64_t calls = 0, fired = 0;
  adr_test_fault_counts(&calls, &fired);
  assert_int_equal(calls, 3);
  assert_int_equal(fired, 1);
}

/* Threads of this process (the CPU backend runs one per created stream). */
static int thread_count(void) {
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  int n = -1;
  while (f != NULL && fgets(line, sizeof(line), f) != NULL)
    if (sscanf(line, "Threads: %d", &n) == 1) break;
  if (f != NULL) fclose(f);
  return n;
}

/* A destroy that fails still destroys (adr.h, adr/backend.h): the status
 * reports the error, the backend's stream is gone (its worker thread was
 * joined) and nothing is left for teardown to destroy again (ASan would
 * see a second destroy at exit). The injected failure lets the backend
 * run, as a driver error during the destroy would. */
static void test_failed_destroy_still_destroys(void** state) {
  (void)state;
  struct adr_error e;
  int before = thread_count();
  struct adr_stream* s = NULL;
  struct adr_event* ev = NULL;
  assert_int_equal(adr_stream_create(cpu, &s, &e), 0);
  assert_int_equal(adr_event_create(cpu, &ev, &e), 0);
  assert_int_equal(adr_event_record(ev, s, &e), 0);
  /* At least the stream's worker more (a sanitizer may start its own
   * background thread with the first pthread_create). */
  int during = thread_count();
  assert_true(during >= before + 1);
  assert_int_equal(adr_test_fault_set("stream_destroy", 1, EIO, false, &e), 0);
  memset(&e, 0, sizeof(e));
  assert_int_equal(adr_stream_destroy(s, &e), EIO);
  assert_string_equal(e.message,
                      "[adr_stream_destroy][cpu] EIO: injected fault (call 1 of slot "
                      "'stream_destroy')");
  assert_int_equal(thread_count(), during - 1);
  assert_int_equal(adr_test_fault_set("event_destroy", 1, EIO, false, &e), 0);
  memset(&e, 0, sizeof(e));
  assert_int_equal(adr_event_destroy(ev, &e), EIO);
  assert_non_null(strstr(e.message, "[adr_event_destroy][cpu] EIO: injected fault"));
  uint64_t fired = 0;
  adr_test_fault_counts(NULL, &fired);
  assert_int_equal(fired, 1);
}

static void test_persistent(void** state) {
  (void)state;
  struct adr_error e;
  assert_int_equal(adr_test_fault_set("copy", 2, EBUSY, true, &e), 0);
  assert_int_equal(copy(&e), 0);
  assert_int_equal(copy(&e), EBUSY);
  assert_int_equal(copy(&e), EBUSY);
  assert_non_null(strstr(e.message, "call 3 of slot 'copy'"));
  adr_test_fault_clear();
  assert_int_equal(copy(&e), 0);
  uint64_t fired = 0;
  adr_test_fault_counts(NULL, &fired);
  assert_int_equal(fired, 2);
}

static void test_any_slot_and_untouched_output(void** state) {
  (void)state;
  struct adr_error e;
  struct adr_stream* s = NULL;
  assert_int_equal(adr_test_fault_set("any", 1, EIO, false, &e), 0);
  assert_int_equal(adr_stream_create(cpu, &s, &e), EIO);
  assert_null(s);
  assert_non_null(strstr(e.message, "[adr_stream_create][cpu] EIO: injected fault"));
  assert_non_null(strstr(e.message, "slot 'stream_create'"));
  /* The next call works. */
  assert_int_equal(adr_stream_create(cpu, &s, &e), 0);
  assert_int_equal(adr_stream_destroy(s, &e), 0);
}

static void test_other_slot_not_counted(void** state) {
  (void)state;
  struct adr_error e;
  assert_int_equal(adr_test_fault_set("event_record", 1, EIO, false, &e), 0);
  assert_int_equal(copy(&e), 0);
  uint64_t calls = 1;
  adr_test_fault_counts(&calls, NULL);
  assert_int_equal(calls, 0);
}

static void test_count_only(void** state) {
  (void)state;
  struct adr_error e;
  assert_int_equal(adr_test_fault_set("any", 0, EIO, false, &e), 0);
  for (int i = 0; i < 5; i++) assert_int_equal(copy(&e), 0);
  uint64_t calls = 0, fired = 1;
  adr_test_fault_counts(&calls, &fired);
  /* Each blocking copy is a copy and a synchronize. */
  assert_int_equal(calls, 10);
  assert_int_equal(fired, 0);
}

static void test_core_malloc(void** state) {
  (void)state;
  struct adr_error e;
  struct adr_stream* s = NULL;
  struct adr_event* ev = NULL;
  assert_int_equal(adr_test_fault_set("malloc", 1, ENOMEM, false, &e), 0);
  assert_int_equal(adr_stream_create(cpu, &s, &e), ENOMEM);
  assert_null(s);
  assert_non_null(strstr(e.message, "[adr_stream_create]"));
  assert_int_equal(adr_test_fault_set("malloc", 1, ENOMEM, true, &e), 0);
  assert_int_equal(adr_event_create(cpu, &ev, &e), ENOMEM);
  assert_int_equal(adr_stream_create(cpu, &s, &e), ENOMEM);
  /* Backend calls are not counted in this mode. */
  assert_int_equal(copy(&e), 0);
  adr_test_fault_clear();
  assert_int_equal(adr_stream_create(cpu, &s, &e), 0);
  assert_int_equal(adr_stream_destroy(s, &e), 0);
}

static void test_bad_settings(void** state) {
  (void)state;
  struct adr_error e;
  assert_int_equal(adr_test_fault_set("copyy", 1, EIO, false, &e), EINVAL);
  assert_non_null(strstr(e.message, "[adr_test_fault_set] unknown slot 'copyy'"));
  assert_int_equal(adr_test_fault_set(NULL, 1, EIO, false, &e), EINVAL);
  assert_int_equal(adr_test_fault_set("copy", 1, 0, false, &e), EINVAL);
  assert_int_equal(adr_test_fault_set("copy", 1, -5, false, &e), EINVAL);
  /* Nothing was armed. */
  assert_int_equal(copy(&e), 0);
}

/* Runs this program with ADR_FAULT set; returns its exit status. */
static int run_env(const char* value, const char* mode) {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  assert_true(n > 0);
  self[n] = '\0';
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    setenv("ADR_FAULT", value, 1);
    execl(self, self, mode, (char*)NULL);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void test_env_arms(void** state) {
  (void)state;
  assert_int_equal(run_env("copy:2:EIO", "env-ok"), 0);
  assert_int_equal(run_env("copy:2:5:persistent", "env-persistent"), 0);
}

static void test_env_malformed(void** state) {
  (void)state;
  assert_int_equal(run_env("copy:x:EIO", "env-bad"), 0);
  assert_int_equal(run_env("nope:1:EIO", "env-bad"), 0);
  assert_int_equal(run_env("copy:1:EWHAT", "env-bad"), 0);
  assert_int_equal(run_env("copy:1:EIO:forever", "env-bad"), 0);
}

static int child(const char* mode) {
  struct adr_error e = {{0}};
  int st = adr_device_get(ARROW_DEVICE_CPU, 0, &cpu, &e);
  if (strcmp(mode, "env-bad") == 0) {
    printf("child: %s: %s\n", adr_status_name(st), e.message);
    return st == EINVAL && strstr(e.message, "ADR_FAULT=") && strstr(e.message, "column") ? 0 : 1;
  }
  if (st != 0) return 2;
  int a = copy(&e), b = copy(&e), c = copy(&e);
  printf("child: %d %d %d: %s\n", a, b, c, e.message);
  if (strcmp(mode, "env-ok") == 0) return a == 0 && b == EIO && c == 0 ? 0 : 1;
  return a == 0 && b == EIO && c == EIO ? 0 : 1; /* 5 = EIO, persistent */
}

int main(int argc, char** argv) {
  if (argc > 1) return child(argv[1]);
  struct adr_error e = {{0}};
  if (adr_device_get(ARROW_DEVICE_CPU, 0, &cpu, &e) != 0) {
    fprintf(stderr, "test_fault: no CPU device: %s\n", e.message);
    return 1;
  }
  memset(src, 0x11, sizeof(src));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_nth_call_fails_once, reset),
      cmocka_unit_test_teardown(test_persistent, reset),
      cmocka_unit_test_teardown(test_failed_destroy_still_destroys, reset),
      cmocka_unit_test_teardown(test_any_slot_and_untouched_output, reset),
      cmocka_unit_test_teardown(test_other_slot_not_counted, reset),
      cmocka_unit_test_teardown(test_count_only, reset),
      cmocka_unit_test_teardown(test_core_malloc, reset),
      cmocka_unit_test_teardown(test_bad_settings, reset),
      cmocka_unit_test_teardown(test_env_arms, reset),
      cmocka_unit_test_teardown(test_env_malformed, reset),
  };
  return cmocka_run_group_tests_name("fault injection", tests, NULL, NULL);
}
