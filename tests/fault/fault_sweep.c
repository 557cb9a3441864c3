/* SPDX-License-Identifier: Apache-2.0
 *
 * Fault sweep (docs/lifetime.md): runs the conformance suite (argv[1])
 * once per N with the Nth counted call failing (ADR_CONFORMANCE_FAULT =
 * slot:N:STATUS, slot = argv[2], STATUS = argv[3]), on the device the
 * environment selects, and requires of every run:
 *   - exit 0: each case either passed or stopped at a call that returned the
 *     injected failure as a clean error (status + "[operation]..." message),
 *     and the sanity workload run after disarming succeeded;
 *   - no leak report (LeakSanitizer, in the sanitizer build);
 *   - no stuck stream: the run ends before the watchdog (ADR_FAULT_SWEEP_TIMEOUT
 *     seconds, default 120) kills it.
 * N: a first run counts the calls (N = 0); then ADR_FAULT_SWEEP=full tries
 * every N from 1 to the count, ADR_FAULT_SWEEP=K (default 4) tries 1, 2, 3
 * and K points spread evenly over the rest.
 *
 * Exit status: 0 clean, 77 no device (ADR_FAULT_REQUIRE unset), 1 otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct result {
  int exit;      /* exit status, 128 + signal, -1 timeout */
  bool leak;     /* LeakSanitizer reported */
  bool reported; /* the report file was written */
  unsigned long long calls, fired, accepted;
};

static char out_path[256], report_path[256];

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void run_one(const char* exe, const char* spec, int timeout_s, struct result* r) {
  memset(r, 0, sizeof(*r));
  unlink(report_path);
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    exit(1);
  }
  if (pid == 0) {
    int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) _exit(126);
    dup2(fd, STDOUT_FILENO);
    dup2(fd, STDERR_FILENO);
    close(fd);
    setenv("ADR_CONFORMANCE_FAULT", spec, 1);
    setenv("ADR_CONFORMANCE_FAULT_REPORT", report_path, 1);
    execl(exe, exe, (char*)NULL);
    _exit(127);
  }
  double deadline = now_s() + timeout_s;
  int status = 0;
  for (;;) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (now_s() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      r->exit = -1;
      break;
    }
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  if (r->exit != -1) r->exit = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  FILE* f = fopen(out_path, "r");
  if (f != NULL) {
    char line[4096];
    while (fgets(line, sizeof(line), f) != NULL)
      if (strstr(line, "LeakSanitizer") != NULL) r->leak = true;
    fclose(f);
  }
  f = fopen(report_path, "r");
  if (f != NULL) {
    r->reported =
        fscanf(f, "calls=%llu fired=%llu accepted=%llu", &r->calls, &r->fired, &r->accepted) == 3;
    fclose(f);
  }
}

static void show_output(void) {
  FILE* f = fopen(out_path, "r");
  if (f == NULL) return;
  /* The last lines tell what failed. */
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  buf[n] = '\0';
  fclose(f);
  const char* start = n > 6000 ? buf + n - 6000 : buf;
  fprintf(stderr, "----- output (tail) -----\n%s\n-------------------------\n", start);
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s CONFORMANCE_EXE SLOT STATUS\n", argv[0]);
    return 1;
  }
  const char *exe = argv[1], *slot = argv[2], *status = argv[3];
  const char* dev = getenv("ADR_DEVICE");
  const char* sweep = getenv("ADR_FAULT_SWEEP");
  const char* to = getenv("ADR_FAULT_SWEEP_TIMEOUT");
  int timeout_s = to ? atoi(to) : 120;
  if (timeout_s <= 0) timeout_s = 120;
  const char* tmp = getenv("TMPDIR");
  snprintf(out_path, sizeof(out_path), "%s/adr-fault-%d.out", tmp ? tmp : "/tmp", (int)getpid());
  snprintf(report_path, sizeof(report_path), "%s/adr-fault-%d.report", tmp ? tmp : "/tmp",
           (int)getpid());

  char spec[128];
  snprintf(spec, sizeof(spec), "%s:0:%s", slot, status);
  struct result r;
  run_one(exe, spec, timeout_s, &r);
  if (r.exit == 77 && !getenv("ADR_FAULT_REQUIRE")) {
    printf("fault sweep: no device for ADR_DEVICE=%s, skipping\n", dev ? dev : "(unset)");
    return 77;
  }
  if (r.exit != 0 || !r.reported || r.calls == 0) {
    fprintf(stderr, "fault sweep: the counting run (%s) failed: exit %d, %llu calls\n", spec,
            r.exit, r.calls);
    show_output();
    return 1;
  }
  uint64_t total = r.calls;
  bool full = sweep != NULL && strcmp(sweep, "full") == 0;
  uint64_t samples = full ? total : (sweep && atoi(sweep) > 0 ? (uint64_t)atoi(sweep) : 4);
  printf("fault sweep %s on %s: %llu counted calls; trying %s\n", slot, dev ? dev : "(default)",
         (unsigned long long)total, full ? "every N" : "a sample of N");
  fflush(stdout);

  unsigned long long tried = 0, fired_runs = 0, accepted = 0, leaks = 0, stuck = 0, failures = 0;
  double t0 = now_s();
  uint64_t prev = 0;
  for (uint64_t k = 0;; k++) {
    uint64_t n;
    if (full) {
      n = k + 1;
    } else if (k < 3) {
      n = k + 1;
    } else {
      uint64_t i = k - 3;
      if (i >= samples) break;
      n = 4 + (total > 4 ? (total - 4) * (i + 1) / samples : 0);
    }
    if (n > total) break;
    if (n <= prev) continue;
    prev = n;
    snprintf(spec, sizeof(spec), "%s:%llu:%s", slot, (unsigned long long)n, status);
    run_one(exe, spec, timeout_s, &r);
    tried++;
    if (r.fired) fired_runs++;
    accepted += r.accepted;
    const char* verdict = NULL;
    if (r.exit == -1) {
      stuck++;
      verdict = "STUCK (watchdog)";
    } else if (r.leak) {
      leaks++;
      verdict = "LEAK";
    } else if (r.exit != 0 || !r.reported) {
      failures++;
      verdict = "FAILED";
    }
    if (verdict != NULL) {
      fprintf(stderr, "fault sweep: N=%llu (%s): %s, exit %d\n", (unsigned long long)n, spec,
              verdict, r.exit);
      show_output();
    } else if (full && tried % 100 == 0) {
      printf("fault sweep: %llu runs, %.0f s\n", tried, now_s() - t0);
      fflush(stdout);
    }
  }
  printf(
      "fault sweep %s:%s on %s: %llu calls counted, N tried %llu, runs where the fault fired "
      "%llu, failures returned to a case %llu, leaks %llu, stuck %llu, other failures %llu "
      "(%.1f s)\n",
      slot, status, dev ? dev : "(default)", (unsigned long long)total, tried, fired_runs, accepted,
      leaks, stuck, failures, now_s() - t0);
  unlink(out_path);
  unlink(report_path);
  return leaks + stuck + failures == 0 ? 0 : 1;
}
