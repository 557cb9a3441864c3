/* SPDX-License-Identifier: Apache-2.0
 *
 * The CPU pool does not hide overruns from AddressSanitizer (issue 11,
 * section 6): in an ASan build the pool poisons what it has not handed out,
 * so a one-byte overrun of a pool allocation, a read of the alignment
 * padding before it, and a use after adr_free are reported like for malloc.
 * Each case runs in a child process (this program re-executed with the
 * case's name) that must die with an AddressSanitizer report naming the
 * bad access; a control child that stays inside its allocation must exit 0.
 *
 * Only meaningful in an ASan build: elsewhere it exits 77 and says why.
 */
#include <errno.h>
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
#include "adr/memory.h"

#if defined(__SANITIZE_ADDRESS__)
#define HAVE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAVE_ASAN 1
#endif
#endif

static const char* self;

/* ---- children -------------------------------------------------------- */

static volatile unsigned char sink;

static int child(const char* name) {
  struct adr_device* cpu = NULL;
  struct adr_error e;
  if (adr_device_get(ARROW_DEVICE_CPU, 0, &cpu, &e) != 0) {
    fprintf(stderr, "child: %s\n", e.message);
    return 2;
  }
  if (strcmp(adr_allocator_get(cpu)->name, "pool") != 0) {
    fprintf(stderr, "child: the CPU's handler is '%s', not the pool\n",
            adr_allocator_get(cpu)->name);
    return 2;
  }
  /* Neighbours on both sides, so the bytes around the victim belong to the
   * pool (a chunk), not to the heap's own redzones. */
  void *before = NULL, *p = NULL, *after = NULL;
  const size_t size = 100; /* served from the 128-byte class */
  if (adr_alloc(cpu, 4096, 0, NULL, &before, &e) || adr_alloc(cpu, size, 0, NULL, &p, &e) ||
      adr_alloc(cpu, 4096, 0, NULL, &after, &e)) {
    fprintf(stderr, "child: adr_alloc: %s\n", e.message);
    return 2;
  }
  unsigned char* u = p;
  memset(u, 1, size); /* every byte of the allocation is usable */
  if (strcmp(name, "inside") == 0) {
    sink = u[0];
    sink = u[size - 1];
    adr_free(cpu, p, size, NULL, NULL);
    adr_free(cpu, before, 4096, NULL, NULL);
    adr_free(cpu, after, 4096, NULL, NULL);
    return 0;
  }
  if (strcmp(name, "overrun") == 0) {
    u[size] = 7; /* one byte past the end, inside the pool's block */
  } else if (strcmp(name, "overrun-read") == 0) {
    sink = u[size + 20];
  } else if (strcmp(name, "after-free") == 0) {
    adr_free(cpu, p, size, NULL, NULL);
    sink = u[0];
  } else if (strcmp(name, "unallocated") == 0) {
    /* Beyond the last block handed out: never allocated pool memory. */
    sink = ((unsigned char*)after)[4096 + 4096];
  } else {
    fprintf(stderr, "child: unknown case %s\n", name);
    return 2;
  }
  fprintf(stderr, "child: %s was not reported\n", name);
  return 0;
}

/* ---- parent ---------------------------------------------------------- */

#ifdef HAVE_ASAN

/* Runs this program as `child NAME`; returns its exit status and stderr. */
static int run_child(const char* name, char* out, size_t cap) {
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    execl(self, self, "child", name, (char*)NULL);
    _exit(127);
  }
  close(fds[1]);
  size_t n = 0;
  ssize_t r;
  while ((r = read(fds[0], out + n, cap - 1 - n)) > 0 && n + 1 < cap) n += (size_t)r;
  out[n] = '\0';
  close(fds[0]);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void expect_report(const char* name, const char* kind) {
  static char out[65536];
  int st = run_child(name, out, sizeof(out));
  if (st == 0 || strstr(out, "ERROR: AddressSanitizer") == NULL || strstr(out, kind) == NULL)
    fail_msg("case %s: exit %d, expected an AddressSanitizer %s report; stderr:\n%.2000s", name, st,
             kind, out);
}

static void test_inside_is_clean(void** state) {
  (void)state;
  static char out[65536];
  int st = run_child("inside", out, sizeof(out));
  if (st != 0) fail_msg("control child: exit %d; stderr:\n%.2000s", st, out);
}

static void test_overrun_by_one(void** state) {
  (void)state;
  expect_report("overrun", "use-after-poison");
}

static void test_overrun_read(void** state) {
  (void)state;
  expect_report("overrun-read", "use-after-poison");
}

static void test_use_after_free(void** state) {
  (void)state;
  expect_report("after-free", "use-after-poison");
}

static void test_unallocated(void** state) {
  (void)state;
  expect_report("unallocated", "use-after-poison");
}

#endif

int main(int argc, char** argv) {
  self = argv[0];
  if (argc == 3 && strcmp(argv[1], "child") == 0) return child(argv[2]);
#ifndef HAVE_ASAN
  printf(
      "test_asan_poison: not an AddressSanitizer build (-Db_sanitize=address): the pool "
      "poisons nothing here: skipped\n");
  return 77;
#else
  const char* alloc = getenv("ADR_ALLOC");
  if (alloc != NULL && alloc[0] != '\0') {
    printf("test_asan_poison: ADR_ALLOC=%s: the test needs the default pool: skipped\n", alloc);
    return 77;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_inside_is_clean), cmocka_unit_test(test_overrun_by_one),
      cmocka_unit_test(test_overrun_read),    cmocka_unit_test(test_use_after_free),
      cmocka_unit_test(test_unallocated),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
#endif
}
