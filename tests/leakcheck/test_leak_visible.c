/* The vendor suppressions in tests/lsan.supp do not hide a leak of adr's
 * own. Runs leak_child (argv[1]) under this process's sanitizer options
 * (the same LSAN_OPTIONS / ASAN_OPTIONS every test has): the child loads
 * the Vulkan and OpenCL drivers, then leaks a node libadr allocated. The
 * child must exit non-zero with a LeakSanitizer report whose stack names
 * libadr (adr_schema_init, or libadr.so when unsymbolised).
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

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s LEAK_CHILD\n", argv[0]);
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
  int fds[2];
  if (pipe(fds) != 0) return fail("pipe");
  pid_t pid = fork();
  if (pid < 0) return fail("fork");
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    execl(argv[1], argv[1], (char*)NULL);
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
  int code = WEXITSTATUS(status);
  printf("test_leak_visible: child exit status %d\n", code);
  if (code == 77 || strstr(output, "leak_child: leaking") == NULL) {
    if (getenv("ADR_LEAKCHECK_REQUIRE") == NULL && code == 77) {
      printf("test_leak_visible: SKIP: the child found no Vulkan or OpenCL device:\n%s", output);
      return 77;
    }
    return fail("the child did not load both drivers and reach the leak");
  }
  if (code == 0) return fail("the child exited 0: LeakSanitizer did not report adr's leak");
  if (strstr(output, "ERROR: LeakSanitizer: detected memory leaks") == NULL)
    return fail("the child failed without a LeakSanitizer report");
  const char* leak = strstr(output, "Direct leak of");
  bool names_adr = false;
  for (; leak != NULL && !names_adr; leak = strstr(leak + 1, "Direct leak of")) {
    const char* end = strstr(leak + 1, "\n\n");
    size_t len = end != NULL ? (size_t)(end - leak) : strlen(leak);
    char block[8192];
    snprintf(block, sizeof(block), "%.*s", (int)(len < sizeof(block) ? len : sizeof(block) - 1),
             leak);
    names_adr = strstr(block, "adr_schema_init") != NULL || strstr(block, "/libadr.so") != NULL;
    if (names_adr) printf("%s\n", block);
  }
  if (!names_adr) return fail("no direct leak in the report names libadr (adr_schema_init)");
  printf("test_leak_visible: OK: adr's leak reported with the vendor suppressions active\n");
  return 0;
}
