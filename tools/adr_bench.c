/* SPDX-License-Identifier: Apache-2.0
 *
 * adr-bench: measures adr against baselines taken in the same run and
 * prints a table (or --json). Areas: `adr-bench [--quick] [--json]
 * [area ...]`, where an area is one of the compiled-in bench files.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

struct bench_ctx {
  bool quick;
  bool json;
  int rows;
};

double bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

bool bench_quick(const struct bench_ctx* ctx) {
  return ctx->quick;
}

void bench_sink(const void* p) {
  __asm__ volatile("" : : "r"(p) : "memory");
}

double bench_time(void (*fn)(void* arg), void* arg, double min_seconds, int min_iters) {
  double best = INFINITY;
  for (int round = 0; round < 3; round++) {
    int iters = 0;
    double t0 = bench_now(), t;
    do {
      fn(arg);
      iters++;
      t = bench_now() - t0;
    } while (t < min_seconds || iters < min_iters);
    double per = t / iters;
    if (per < best) best = per;
  }
  return best;
}

static void json_row_start(struct bench_ctx* ctx) {
  printf("%s\n  ", ctx->rows++ ? "," : "");
}

void bench_report(struct bench_ctx* ctx, const char* group, const char* label, double adr_value,
                  double baseline_value, const char* unit, const char* baseline_name,
                  enum bench_better better) {
  double ratio = better == BENCH_HIGHER_IS_BETTER ? adr_value / baseline_value
                                                  : baseline_value / adr_value;
  if (ctx->json) {
    json_row_start(ctx);
    printf("{\"group\": \"%s\", \"case\": \"%s\", \"adr\": %.6g, \"baseline\": %.6g, "
           "\"unit\": \"%s\", \"baseline_name\": \"%s\", \"ratio\": %.4f}",
           group, label, adr_value, baseline_value, unit, baseline_name, ratio);
  } else {
    printf("%-22s %-16s %12.4g %-6s %12.4g %-6s %-26s %6.3fx\n", group, label, adr_value, unit,
           baseline_value, unit, baseline_name, ratio);
  }
  fflush(stdout);
}

void bench_note(struct bench_ctx* ctx, const char* group, const char* label, double value,
                const char* unit) {
  if (ctx->json) {
    json_row_start(ctx);
    printf("{\"group\": \"%s\", \"case\": \"%s\", \"adr\": %.6g, \"unit\": \"%s\"}", group, label,
           value, unit);
  } else {
    printf("%-22s %-16s %12.4g %-6s\n", group, label, value, unit);
  }
  fflush(stdout);
}

#define X(name) void bench_run_##name(struct bench_ctx* ctx);
ADR_BENCH_LIST
#undef X

static const struct {
  const char* name;
  void (*run)(struct bench_ctx*);
} areas[] = {
#define X(name) {#name, bench_run_##name},
    ADR_BENCH_LIST
#undef X
};

int main(int argc, char** argv) {
  struct bench_ctx ctx = {0};
  const char* wanted[32];
  int n_wanted = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) {
      ctx.quick = true;
    } else if (strcmp(argv[i], "--json") == 0) {
      ctx.json = true;
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf("usage: adr-bench [--quick] [--json] [area ...]\nareas:");
      for (size_t a = 0; a < sizeof(areas) / sizeof(areas[0]); a++) printf(" %s", areas[a].name);
      printf("\n");
      return 0;
    } else if (argv[i][0] != '-' && n_wanted < 32) {
      wanted[n_wanted++] = argv[i];
    } else {
      fprintf(stderr, "adr-bench: unknown argument '%s' (try --help)\n", argv[i]);
      return 2;
    }
  }
  for (int w = 0; w < n_wanted; w++) {
    bool known = false;
    for (size_t a = 0; a < sizeof(areas) / sizeof(areas[0]); a++)
      known |= strcmp(areas[a].name, wanted[w]) == 0;
    if (!known) {
      fprintf(stderr, "adr-bench: unknown area '%s' (try --help)\n", wanted[w]);
      return 2;
    }
  }
  if (ctx.json)
    printf("{\"rows\": [");
  else
    printf("%-22s %-16s %12s %-6s %12s %-6s %-26s %7s\n", "group", "case", "adr", "", "baseline",
           "", "baseline is", "ratio");
  for (size_t a = 0; a < sizeof(areas) / sizeof(areas[0]); a++) {
    bool run = n_wanted == 0;
    for (int w = 0; w < n_wanted; w++) run |= strcmp(areas[a].name, wanted[w]) == 0;
    if (run) areas[a].run(&ctx);
  }
  if (ctx.json) printf("\n]}\n");
  return 0;
}
