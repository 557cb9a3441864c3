/* Runs a leak_child under this process's sanitizer options (the same
 * LSAN_OPTIONS / ASAN_OPTIONS every test has) and checks LeakSanitizer's
 * verdict:
 *
 *   test_leak_visible leak  CHILD MODE PATTERN [ABSENT]   the child must
 *       exit non-zero with a LeakSanitizer report in which one direct
 *       leak's block contains PATTERN (alternatives separated by '|') and
 *       not ABSENT;
 *   test_leak_visible clean CHILD MODE           the child must exit 0
 *       with no LeakSanitizer report.
 *
 * Meaningful only where LeakSanitizer runs: exits 77 (with the reason) in
 * builds without it (plain, TSan). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Defined by the LeakSanitizer runtime (ASan builds), absent otherwise. */
extern void __lsan_do_leak_check(void) __attribute__((weak));

static char output[1 << 20];

static int fail(const char* why) {
  printf("test_leak_visible: FAIL: %s\n--- child output ---\n%s\n--- end ---\n", why, output);
  return 1;
}

/* Whether one of the '|'-separated alternatives occurs in block. */
static bool contains_any(const char* block, const char* alternatives) {
  while (*alternatives != '\0') {
    size_t n = strcspn(alternatives, "|");
    char one[256];
    snprintf(one, sizeof(one), "%.*s", (int)n, alternatives);
    if (n > 0 && strstr(block, one) != NULL) return true;
    alternatives += n + (alternatives[n] == '|');
  }
  return false;
}

static int run_child(const char* child, const char* mode, int* out_code) {
  int fds[2];
  if (pipe(fds) != 0) return fail("pipe");
  pid_t pid = fork();
  if (pid < 0) return fail("fork");
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    execl(child, child, mode, (char*)NULL);
    _exit(127);
  }
  close(fds[1]);
  size_t n = 0;
  ssize_t r;
  while ((r = read(fds[0], output + n, sizeof(output) - 1 - n)) > 0 || (r < 0 && errno == EINTR))
    if (r > 0) n += (size_t)r;
  output[n] = '\0';
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return fail("waitpid");
  if (!WIFEXITED(status)) return fail("the child did not exit normally");
  *out_code = WEXITSTATUS(status);
  printf("test_leak_visible: %s %s: exit status %d\n", child, mode, *out_code);
  return 0;
}

int main(int argc, char** argv) {
  bool expect_leak = (argc == 5 || argc == 6) && strcmp(argv[1], "leak") == 0;
  const char* absent = argc == 6 ? argv[5] : NULL;
  if (!expect_leak && !(argc == 4 && strcmp(argv[1], "clean") == 0)) {
    fprintf(stderr, "usage: %s leak CHILD MODE PATTERN [ABSENT] | clean CHILD MODE\n", argv[0]);
    return 2;
  }
  if (__lsan_do_leak_check == NULL) {
    printf("test_leak_visible: SKIP: this build has no LeakSanitizer (only the ASan build does)\n");
    return 77;
  }
  const char* opts = getenv("ASAN_OPTIONS");
  if (opts != NULL && strstr(opts, "detect_leaks=0") != NULL) {
    printf("test_leak_visible: SKIP: ASAN_OPTIONS disables leak detection\n");
    return 77;
  }
  int code = 0;
  if (run_child(argv[2], argv[3], &code) != 0) return 1;
  if (strstr(output, "leak_child: leaking") == NULL &&
      strstr(output, "leak_child: driver leaked") == NULL) {
    if (code == 77 && getenv("ADR_LEAKCHECK_REQUIRE") == NULL) {
      printf("test_leak_visible: SKIP: the child found no Vulkan or OpenCL device:\n%s", output);
      return 77;
    }
    return fail("the child did not load the drivers and reach its leak");
  }
  bool reported = strstr(output, "ERROR: LeakSanitizer: detected memory leaks") != NULL;
  if (!expect_leak) {
    if (code != 0 || reported) return fail("expected a clean exit without a leak report");
    printf("test_leak_visible: OK: the driver's leak was suppressed by module\n");
    return 0;
  }
  if (code == 0) return fail("the child exited 0: LeakSanitizer reported nothing");
  if (!reported) return fail("the child failed without a LeakSanitizer report");
  bool found = false;
  for (const char* leak = strstr(output, "Direct leak of"); leak != NULL && !found;
       leak = strstr(leak + 1, "Direct leak of")) {
    const char* end = strstr(leak + 1, "\n\n");
    size_t len = end != NULL ? (size_t)(end - leak) : strlen(leak);
    char block[8192];
    snprintf(block, sizeof(block), "%.*s", (int)(len < sizeof(block) ? len : sizeof(block) - 1),
             leak);
    found = contains_any(block, argv[4]) && (absent == NULL || strstr(block, absent) == NULL);
    if (found) printf("%s\n", block);
  }
  if (!found) return fail("no direct leak in the report matches the expected stack");
  printf("test_leak_visible: OK: the leak was reported (%s)\n", argv[4]);
  return 0;
}
