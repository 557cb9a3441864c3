/* SPDX-License-Identifier: Apache-2.0
 *
 * Core rows: dispatch overhead, CPU copy bandwidth and allocation, each
 * against the libc call that does the same work.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adr/adr.h"
#include "bench.h"

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

void bench_run_core(struct bench_ctx* ctx) {
  struct adr_device* cpu = NULL;
  struct adr_error err = {{0}};
  if (adr_device_get(ARROW_DEVICE_CPU, 0, &cpu, &err) != 0) {
    fprintf(stderr, "bench core: %s\n", err.message);
    return;
  }
  double min_s = bench_quick(ctx) ? 0.05 : 0.3;

  /* Dispatch overhead: a 64-byte copy is nearly all call overhead. */
  {
    char src[64], dst[64];
    memset(src, 1, sizeof(src));
    struct copy_arg a = {cpu, dst, src, 64, 1000};
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
    if (adr_alloc(cpu, sizes[i], 64, NULL, &src, &err) || adr_alloc(cpu, sizes[i], 64, NULL, &dst, &err)) {
      fprintf(stderr, "bench core: %s\n", err.message);
      return;
    }
    memset(src, 3, sizes[i]);
    memset(dst, 0, sizes[i]);
    int reps = sizes[i] >= (64u << 20) ? 1 : (int)((64u << 20) / sizes[i]);
    if (reps > 4096) reps = 4096;
    struct copy_arg a = {cpu, dst, src, sizes[i], reps};
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
}
