/* SPDX-License-Identifier: Apache-2.0
 *
 * adr-bench: measures adr against baselines taken in the same run and
 * prints a table (or --json). Areas: `adr-bench [--quick] [--json]
 * [area ...]`, where an area is one of the compiled-in bench files.
 * man/adr-bench.1 is the manual.
 */
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "adr/adr.h"
#include "bench.h"

enum check_state { CHECK_NONE, CHECK_OK, CHECK_FAILED };

struct bench_ctx {
  bool quick;
  bool json;
  int rows;
  enum check_state row_check; /* checks since the last reported row */
  int failed_checks;          /* over the whole run: exit 1 when > 0 */
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

void bench_expect(struct bench_ctx* ctx, bool ok, const char* fmt, ...) {
  if (ok) {
    if (ctx->row_check == CHECK_NONE) ctx->row_check = CHECK_OK;
    return;
  }
  ctx->row_check = CHECK_FAILED;
  ctx->failed_checks++;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "adr-bench: CHECK FAILED: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
}

bool bench_expect_fill(struct bench_ctx* ctx, const void* p, int byte, size_t n, const char* what) {
  const unsigned char* b = p;
  size_t i = 0;
  while (i < n && b[i] == (unsigned char)byte) i++;
  if (i == n) {
    bench_expect(ctx, true, "%s", what);
    return true;
  }
  bench_expect(ctx, false, "%s: byte %zu of %zu is 0x%02x, expected 0x%02x", what, i, n, b[i],
               (unsigned)(unsigned char)byte);
  return false;
}

/* Takes the checks made since the previous row. */
static const char* take_check(struct bench_ctx* ctx, bool json) {
  enum check_state c = ctx->row_check;
  ctx->row_check = CHECK_NONE;
  if (c == CHECK_OK) return json ? "\"ok\"" : "ok";
  if (c == CHECK_FAILED) return json ? "\"FAILED\"" : "FAILED";
  return json ? "null" : "-";
}

static void json_row_start(struct bench_ctx* ctx) {
  printf("%s\n  ", ctx->rows++ ? "," : "");
}

void bench_report(struct bench_ctx* ctx, const char* group, const char* label, double adr_value,
                  double baseline_value, const char* unit, const char* baseline_name,
                  enum bench_better better) {
  double ratio =
      better == BENCH_HIGHER_IS_BETTER ? adr_value / baseline_value : baseline_value / adr_value;
  const char* check = take_check(ctx, ctx->json);
  if (ctx->json) {
    json_row_start(ctx);
    printf(
        "{\"group\": \"%s\", \"case\": \"%s\", \"adr\": %.6g, \"baseline\": %.6g, "
        "\"unit\": \"%s\", \"baseline_name\": \"%s\", \"ratio\": %.4f, \"check\": %s}",
        group, label, adr_value, baseline_value, unit, baseline_name, ratio, check);
  } else {
    printf("%-22s %-16s %12.4g %-6s %12.4g %-6s %-26s %6.3fx %s\n", group, label, adr_value, unit,
           baseline_value, unit, baseline_name, ratio, check);
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

/* Area "selftest": one row whose bytes are right and one whose bytes are
 * wrong, so that a test can see a wrong byte fail the run (exit 1). */
static void bench_run_selftest(struct bench_ctx* ctx) {
  unsigned char buf[64];
  memset(buf, 7, sizeof(buf));
  bench_expect_fill(ctx, buf, 7, sizeof(buf), "selftest: right bytes");
  bench_report(ctx, "selftest", "right bytes", 1, 1, "GB/s", "itself", BENCH_HIGHER_IS_BETTER);
  buf[63] = 8;
  bench_expect_fill(ctx, buf, 7, sizeof(buf), "selftest: one wrong byte");
  bench_report(ctx, "selftest", "one wrong byte", 1, 1, "GB/s", "itself", BENCH_HIGHER_IS_BETTER);
}

static const struct {
  const char* name;
  void (*run)(struct bench_ctx*);
} areas[] = {
#define X(name) {#name, bench_run_##name},
    ADR_BENCH_LIST
#undef X
    {"selftest", bench_run_selftest},
};

static void bench_usage(FILE* f) {
  fprintf(f,
          "usage: adr-bench [OPTION]... [AREA]...\n"
          "Measures adr against baselines taken in the same run; every row's bytes are\n"
          "checked. Without AREA, every area but selftest runs.\n"
          "\n"
          "  -q, --quick     fewer sizes and repetitions\n"
          "  -j, --json      the rows as one JSON object\n"
          "  -l, --list      list the areas and exit\n"
          "  -h, --help      show this help and exit\n"
          "  -V, --version   show the adr version and exit\n"
          "\n"
          "areas:");
  for (size_t a = 0; a < sizeof(areas) / sizeof(areas[0]); a++) fprintf(f, " %s", areas[a].name);
  fprintf(f,
          "\n\nExit status: 0 when every check passed, 1 when a byte check failed, 2 on a\n"
          "usage error (unknown option or area).\n");
}

int main(int argc, char** argv) {
  struct bench_ctx ctx = {0};
  const char* wanted[32];
  int n_wanted = 0;
  static const struct option options[] = {
      {"quick", no_argument, NULL, 'q'},   {"json", no_argument, NULL, 'j'},
      {"list", no_argument, NULL, 'l'},    {"help", no_argument, NULL, 'h'},
      {"version", no_argument, NULL, 'V'}, {NULL, 0, NULL, 0},
  };
  int c;
  while ((c = getopt_long(argc, argv, "qjlhV", options, NULL)) != -1) {
    switch (c) {
      case 'q':
        ctx.quick = true;
        break;
      case 'j':
        ctx.json = true;
        break;
      case 'l':
        for (size_t a = 0; a < sizeof(areas) / sizeof(areas[0]); a++) printf("%s\n", areas[a].name);
        return 0;
      case 'h':
        bench_usage(stdout);
        return 0;
      case 'V':
        printf("adr-bench (adr) %s\n", adr_version());
        return 0;
      default:
        bench_usage(stderr);
        return 2;
    }
  }
  for (int i = optind; i < argc; i++) {
    if (n_wanted == 32) {
      fprintf(stderr, "adr-bench: at most 32 areas\n");
      return 2;
    }
    wanted[n_wanted++] = argv[i];
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
  double load_start[3] = {0, 0, 0}, load_end[3] = {0, 0, 0};
  if (getloadavg(load_start, 3) != 3) load_start[0] = load_start[1] = load_start[2] = -1;
  if (ctx.json)
    printf("{\"loadavg_start\": [%.2f, %.2f, %.2f], \"rows\": [", load_start[0], load_start[1],
           load_start[2]);
  else
    printf(
        "# load average at start: %.2f %.2f %.2f\n"
        "%-22s %-16s %12s %-6s %12s %-6s %-26s %7s %s\n",
        load_start[0], load_start[1], load_start[2], "group", "case", "adr", "", "baseline", "",
        "baseline is", "ratio", "check");
  for (size_t a = 0; a < sizeof(areas) / sizeof(areas[0]); a++) {
    /* selftest fails on purpose: only when named. */
    bool run = n_wanted == 0 && strcmp(areas[a].name, "selftest") != 0;
    for (int w = 0; w < n_wanted; w++) run |= strcmp(areas[a].name, wanted[w]) == 0;
    if (run) areas[a].run(&ctx);
  }
  if (getloadavg(load_end, 3) != 3) load_end[0] = load_end[1] = load_end[2] = -1;
  if (ctx.json)
    printf("\n], \"loadavg_end\": [%.2f, %.2f, %.2f], \"failed_checks\": %d}\n", load_end[0],
           load_end[1], load_end[2], ctx.failed_checks);
  else
    printf("# load average at end: %.2f %.2f %.2f; %d failed check%s\n", load_end[0], load_end[1],
           load_end[2], ctx.failed_checks, ctx.failed_checks == 1 ? "" : "s");
  if (ctx.failed_checks > 0) {
    fprintf(stderr, "adr-bench: %d byte check%s failed: the figures above are not results\n",
            ctx.failed_checks, ctx.failed_checks == 1 ? "" : "s");
    return 1;
  }
  return 0;
}
