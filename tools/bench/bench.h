/* SPDX-License-Identifier: Apache-2.0
 *
 * adr-bench: the interface between the driver (adr_bench.c) and the files
 * that measure one area each (bench_core.c, bench_<backend>.c ...).
 *
 * A bench file defines `void bench_run_<name>(struct bench_ctx *ctx)` and
 * reports rows with bench_report(). Every row puts adr's figure next to a
 * baseline measured in the same run (memcpy, the vendor API called
 * directly, glibc malloc ...), so the ratio is what the table shows.
 */
#ifndef ADR_BENCH_H
#define ADR_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bench_ctx;

enum bench_better { BENCH_HIGHER_IS_BETTER = 0, BENCH_LOWER_IS_BETTER = 1 };

/* One row: `group` ("cpu copy", "opencl H2D"), `label` ("1 MiB"), adr's
 * value and the baseline's, in `unit` ("GB/s", "ns/op", "us/op"), the
 * baseline's name ("memcpy", "clEnqueueWriteBuffer"), and which direction
 * is better. The ratio printed is adr/baseline for HIGHER_IS_BETTER and
 * baseline/adr otherwise, so > 1 always means adr is faster. */
void bench_report(struct bench_ctx* ctx, const char* group, const char* label, double adr_value,
                  double baseline_value, const char* unit, const char* baseline_name,
                  enum bench_better better);

/* Byte checks. Every row that moves bytes says whether the bytes arrived:
 * call bench_expect() (or bench_expect_fill()) for the row before
 * bench_report(), for adr's path and the baseline's alike. The checks made
 * since the previous row are folded into the next bench_report() row:
 * "ok" when all held, "FAILED" when one did not, "-" (JSON null) when the
 * row checks nothing (timings of calls that move no bytes). A failed check
 * prints what differed on stderr and makes adr-bench exit 1 once every
 * area has run, so a fast wrong answer can never pass for a result. */
void bench_expect(struct bench_ctx* ctx, bool ok, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Checks that `n` bytes at `p` all equal `byte`; `what` names them in the
 * message ("adr H2D 4 KiB"). Returns the result. */
bool bench_expect_fill(struct bench_ctx* ctx, const void* p, int byte, size_t n, const char* what);

/* A row without a baseline (counts such as "host syncs per copy"). */
void bench_note(struct bench_ctx* ctx, const char* group, const char* label, double value,
                const char* unit);

/* Monotonic seconds. */
double bench_now(void);

/* True under --quick: use fewer iterations and skip the largest sizes. */
bool bench_quick(const struct bench_ctx* ctx);

/* Runs fn(arg) repeatedly for about `min_seconds` (at least min_iters
 * times) and returns the best average seconds per call over 3 rounds. */
double bench_time(void (*fn)(void* arg), void* arg, double min_seconds, int min_iters);

/* Prevent the compiler from optimising a result away. */
void bench_sink(const void* p);

#endif /* ADR_BENCH_H */
