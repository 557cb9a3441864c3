/* SPDX-License-Identifier: Apache-2.0
 *
 * Core rows: dispatch overhead, CPU copy bandwidth and allocation, each
 * against the libc call that does the same work; and the validation
 * layer's cost per call (on vs off), measured in a child process because
 * the layer is chosen once per process; and the CPU backend's address map
 * (backends/cpu/cpu_ranges.c, compiled in): time per insert/find/remove
 * with 200k ranges live against 2k, which O(log n) keeps near
 * log(200k)/log(2k) = 1.6x (cache misses add some) and an O(n) sorted
 * array makes about 100x.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "adr/adr.h"
#include "bench.h"
#include "cpu_ranges.h" /* backends/cpu */

void bench_run_core(struct bench_ctx* ctx);

struct copy_arg {
  struct adr_device* cpu;
  void* dst;
  const void* src;
  size_t size;
  int reps;
};

static void adr_copy_fn(void* p) {
  struct copy_arg* a = p;
  for (int i = 0; i < a->reps; i++) adr_copy(a->cpu, a->dst, a->cpu, a->src, a->size, NULL, NULL);
  bench_sink(a->dst);
}

/* memcpy through a function pointer the compiler cannot see through, so
 * the baseline is a real call like adr's. */
static void* (*volatile memcpy_ptr)(void*, const void*, size_t) = memcpy;

static void memcpy_fn(void* p) {
  struct copy_arg* a = p;
  for (int i = 0; i < a->reps; i++) memcpy_ptr(a->dst, a->src, a->size);
  bench_sink(a->dst);
}

/* Clears the destination, runs `fn` once and checks the bytes arrived
 * (the source holds `byte`). */
static void check_copy(struct bench_ctx* ctx, void (*fn)(void*), struct copy_arg* a, int byte,
                       const char* what) {
  struct copy_arg once = *a;
  once.reps = 1;
  memset(once.dst, byte ^ 0xff, once.size);
  fn(&once);
  bench_expect_fill(ctx, once.dst, byte, once.size, what);
}

struct alloc_arg {
  struct adr_device* cpu;
  size_t size;
  int reps;
};

static void adr_alloc_fn(void* p) {
  struct alloc_arg* a = p;
  for (int i = 0; i < a->reps; i++) {
    void* ptr = NULL;
    adr_alloc(a->cpu, a->size, 64, NULL, &ptr, NULL);
    bench_sink(ptr);
    adr_free(a->cpu, ptr, a->size, NULL, NULL);
  }
}

static void aligned_alloc_fn(void* p) {
  struct alloc_arg* a = p;
  for (int i = 0; i < a->reps; i++) {
    void* ptr = aligned_alloc(64, a->size);
    bench_sink(ptr);
    free(ptr);
  }
}

/* ---- validation layer: the same calls with the layer on and off ---------- */

struct record_arg {
  struct adr_event* event;
  int reps;
};

static void event_record_fn(void* p) {
  struct record_arg* a = p;
  for (int i = 0; i < a->reps; i++) adr_event_record(a->event, NULL, NULL);
}

/* ns per call: 64 B adr_copy between two allocations, 4 KiB alloc+free,
 * event record on the default stream. */
static int validate_probe(struct adr_device* cpu, double min_s, double out[3]) {
  void *src = NULL, *dst = NULL;
  struct adr_event* e = NULL;
  if (adr_alloc(cpu, 4096, 64, NULL, &src, NULL) || adr_alloc(cpu, 4096, 64, NULL, &dst, NULL) ||
      adr_event_create(cpu, &e, NULL))
    return -1;
  memset(src, 1, 4096);
  struct copy_arg c = {cpu, (char*)dst + 128, (char*)src + 64, 64, 1000};
  out[0] = bench_time(adr_copy_fn, &c, min_s, 1) / c.reps * 1e9;
  struct alloc_arg a = {cpu, 4096, 1000};
  out[1] = bench_time(adr_alloc_fn, &a, min_s, 1) / a.reps * 1e9;
  struct record_arg r = {e, 1000};
  out[2] = bench_time(event_record_fn, &r, min_s, 1) / r.reps * 1e9;
  adr_event_destroy(e, NULL);
  adr_free(cpu, src, 4096, NULL, NULL);
  adr_free(cpu, dst, 4096, NULL, NULL);
  return 0;
}

/* Runs `adr-bench [--quick] core` again with ADR_VALIDATE=1, which measures
 * only the probe and writes its figures to the pipe. */
static int validate_probe_child(bool quick, double out[3]) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    close(fds[0]);
    char fd[16];
    snprintf(fd, sizeof(fd), "%d", fds[1]);
    setenv("ADR_BENCH_VALIDATE_FD", fd, 1);
    setenv("ADR_VALIDATE", "1", 1);
    int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, 1);
    if (quick)
      execl("/proc/self/exe", "adr-bench", "--quick", "core", (char*)NULL);
    else
      execl("/proc/self/exe", "adr-bench", "core", (char*)NULL);
    _exit(127);
  }
  close(fds[1]);
  char buf[256] = {0};
  size_t got = 0;
  ssize_t n;
  while (got < sizeof(buf) - 1 && (n = read(fds[0], buf + got, sizeof(buf) - 1 - got)) > 0)
    got += (size_t)n;
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  return sscanf(buf, "%lf %lf %lf", &out[0], &out[1], &out[2]) == 3 ? 0 : -1;
}

static void bench_validation(struct bench_ctx* ctx, struct adr_device* cpu, double min_s) {
  if (adr_validation_enabled()) {
    bench_note(ctx, "validation", "skipped: ADR_VALIDATE is set for the baseline", 0, "");
    return;
  }
  double off[3], on[3];
  if (validate_probe(cpu, min_s, off) != 0 || validate_probe_child(bench_quick(ctx), on) != 0) {
    bench_note(ctx, "validation", "probe failed", 0, "");
    return;
  }
  const char* labels[3] = {"adr_copy 64 B", "alloc+free 4 KiB", "event record"};
  for (int i = 0; i < 3; i++) {
    bench_report(ctx, "validation on/off", labels[i], on[i], off[i], "ns/op", "layer off",
                 BENCH_LOWER_IS_BETTER);
    bench_note(ctx, "validation on/off", labels[i], on[i] / off[i], "x per call");
  }
}

/* ---- the CPU backend's address map ------------------------------------------ */

/* Seconds per operation: n ascending ranges inserted, every 7th looked up
 * from an interior address, all removed front first (a sorted array's
 * worst case: each insert at the end is cheap, each removal moves the
 * whole tail). Best of three; *ok is cleared when a call misbehaves. */
static double ranges_per_op(size_t n, bool* ok) {
  struct cpu_ranges map = CPU_RANGES_INIT;
  double best = 0;
  for (int round = 0; round < 3; round++) {
    size_t ops = 0;
    double t0 = bench_now();
    for (size_t i = 0; i < n; i++, ops++)
      *ok &= cpu_ranges_insert(&map, 0x10000000 + i * 128, 64) == 0;
    *ok &= cpu_ranges_count(&map) == n;
    for (size_t i = 0; i < n; i += 7, ops++) {
      uintptr_t base = 0;
      *ok &= cpu_ranges_find(&map, 0x10000020 + i * 128, 16, &base, NULL) == 0 &&
             base == 0x10000000 + i * 128;
    }
    for (size_t i = 0; i < n; i++, ops++) {
      size_t size = 0;
      *ok &= cpu_ranges_remove(&map, 0x10000000 + i * 128, &size) == 0 && size == 64;
    }
    double t = (bench_now() - t0) / (double)ops;
    if (round == 0 || t < best) best = t;
  }
  *ok &= cpu_ranges_count(&map) == 0;
  cpu_ranges_clear(&map);
  return best;
}

static void bench_cpu_ranges(struct bench_ctx* ctx) {
  bool ok = true;
  double small = ranges_per_op(2000, &ok);
  double large = ranges_per_op(200000, &ok);
  bench_expect(ctx, ok, "cpu address map: an insert, find or remove gave a wrong answer");
  bench_report(ctx, "cpu address map", "200k live vs 2k", large * 1e9, small * 1e9, "ns/op",
               "the same at 2k live", BENCH_LOWER_IS_BETTER);
  bench_note(ctx, "cpu address map", "growth 200k/2k", large / small, "x (O(n): ~100x)");
}

void bench_run_core(struct bench_ctx* ctx) {
  struct adr_device* cpu = NULL;
  struct adr_error err = {{0}};
  if (adr_device_get(ARROW_DEVICE_CPU, 0, &cpu, &err) != 0) {
    fprintf(stderr, "bench core: %s\n", err.message);
    return;
  }
  double min_s = bench_quick(ctx) ? 0.05 : 0.3;

  const char* probe_fd = getenv("ADR_BENCH_VALIDATE_FD");
  if (probe_fd != NULL) {
    /* The child of bench_validation: the probe only. */
    double v[3];
    if (validate_probe(cpu, min_s, v) != 0) exit(1);
    dprintf(atoi(probe_fd), "%.3f %.3f %.3f\n", v[0], v[1], v[2]);
    return;
  }

  /* Dispatch overhead: a 64-byte copy is nearly all call overhead. */
  {
    char src[64], dst[64];
    memset(src, 1, sizeof(src));
    struct copy_arg a = {cpu, dst, src, 64, 1000};
    check_copy(ctx, adr_copy_fn, &a, 1, "adr_copy 64 B");
    check_copy(ctx, memcpy_fn, &a, 1, "memcpy 64 B");
    double t_adr = bench_time(adr_copy_fn, &a, min_s, 1) / a.reps * 1e9;
    double t_mem = bench_time(memcpy_fn, &a, min_s, 1) / a.reps * 1e9;
    bench_report(ctx, "dispatch", "adr_copy 64 B", t_adr, t_mem, "ns/op", "memcpy",
                 BENCH_LOWER_IS_BETTER);
    bench_note(ctx, "dispatch", "overhead", t_adr - t_mem, "ns/op");
  }

  /* CPU copy bandwidth. */
  size_t sizes[] = {4096, 1u << 20, bench_quick(ctx) ? 64u << 20 : 256u << 20};
  const char* labels[] = {"4 KiB", "1 MiB", bench_quick(ctx) ? "64 MiB" : "256 MiB"};
  for (int i = 0; i < 3; i++) {
    void *src = NULL, *dst = NULL;
    if (adr_alloc(cpu, sizes[i], 64, NULL, &src, &err) ||
        adr_alloc(cpu, sizes[i], 64, NULL, &dst, &err)) {
      fprintf(stderr, "bench core: %s\n", err.message);
      return;
    }
    memset(src, 3, sizes[i]);
    memset(dst, 0, sizes[i]);
    int reps = sizes[i] >= (64u << 20) ? 1 : (int)((64u << 20) / sizes[i]);
    if (reps > 4096) reps = 4096;
    struct copy_arg a = {cpu, dst, src, sizes[i], reps};
    check_copy(ctx, adr_copy_fn, &a, 3, "cpu adr_copy");
    check_copy(ctx, memcpy_fn, &a, 3, "cpu memcpy");
    /* Interleave so frequency drift hits both sides alike. */
    double t_mem = bench_time(memcpy_fn, &a, min_s, 2);
    double t_adr = bench_time(adr_copy_fn, &a, min_s, 2);
    double t_mem2 = bench_time(memcpy_fn, &a, min_s, 2);
    if (t_mem2 < t_mem) t_mem = t_mem2;
    double gb = (double)sizes[i] * reps / 1e9;
    bench_report(ctx, "cpu copy", labels[i], gb / t_adr, gb / t_mem, "GB/s", "memcpy",
                 BENCH_HIGHER_IS_BETTER);
    adr_free(cpu, src, sizes[i], NULL, NULL);
    adr_free(cpu, dst, sizes[i], NULL, NULL);
  }

  /* Allocation. */
  {
    struct alloc_arg a = {cpu, 4096, 1000};
    double t_adr = bench_time(adr_alloc_fn, &a, min_s, 1) / a.reps * 1e9;
    double t_libc = bench_time(aligned_alloc_fn, &a, min_s, 1) / a.reps * 1e9;
    bench_report(ctx, "cpu alloc+free", "4 KiB", t_adr, t_libc, "ns/op", "aligned_alloc+free",
                 BENCH_LOWER_IS_BETTER);
  }

  bench_validation(ctx, cpu, min_s);
  bench_cpu_ranges(ctx);
}
