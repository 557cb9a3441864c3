/* SPDX-License-Identifier: Apache-2.0
 *
 * Array rows (docs/arrays.md): per device, a deep copy round trip
 * CPU -> device -> CPU of a table (int64, nullable utf8, list<int32>,
 * struct<float64, bool>) against copying the same raw buffers with
 * adr_copy in the same run; the host waits each deep copy performs; and
 * the same round trip with the device pool's cap raised above the table's
 * size (the deep copy allocates from the pool; the baseline copies into
 * memory allocated once); the transfer stream with prefetch 2 against
 * prefetch 0; and the deep
 * copy of a 100k-row slice (CPU->dev, dev->dev, dev->CPU, and an empty
 * slice) as bytes allocated against the bytes the slice needs by its
 * layout (fixture_needed_bytes), each copy checked equal to the slice.
 * First of all, the deep copy CPU->CPU of the whole table cold (the CPU
 * pool trimmed before each run, so its memory is fresh from the kernel)
 * against what nanoarrow's ArrowDeviceArrayViewCopy does on the CPU (a
 * malloc and a memcpy per buffer, into fresh memory), and warm (the pool
 * reuses its memory) against a single-thread memcpy of the same buffers
 * into already-touched memory.
 */
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adr/adr.h"
#include "adr/array.h"
#include "adr/memory.h"
#include "bench.h"
#include "needed_bytes.h" /* tools/fixtures */
#include "sample_table.h"

void bench_run_array(struct bench_ctx* ctx);

/* ---- the raw buffers of a host tree ---------------------------------------- */

struct raw_list {
  const void* ptr[64];
  size_t size[64];
  void* dev[64];
  void* back[64];
  int n;
};

static void collect(const struct ArrowSchema* s, const struct ArrowArray* a, struct raw_list* l) {
  struct adr_format f;
  if (adr_format_parse(s->format, &f, NULL) != 0) return;
  int64_t sizes[8];
  if (a->n_buffers <= 8 &&
      adr_format_buffer_sizes(&f, a->offset, a->length, a->n_buffers, sizes, NULL) == 0) {
    for (int64_t i = 0; i < a->n_buffers && l->n < 64; i++) {
      if (a->buffers[i] == NULL) continue;
      int64_t n = sizes[i];
      if (n == ADR_BUFFER_SIZE_DATA_DEPENDENT && f.layout == ADR_LAYOUT_VAR_BINARY) {
        int64_t end = a->offset + a->length;
        n = f.offset_bytes == 4 ? ((const int32_t*)a->buffers[1])[end]
                                : ((const int64_t*)a->buffers[1])[end];
      }
      if (n <= 0) continue;
      l->ptr[l->n] = a->buffers[i];
      l->size[l->n++] = (size_t)n;
    }
  }
  for (int64_t i = 0; i < a->n_children; i++) collect(s->children[i], a->children[i], l);
}

/* ---- timed bodies ------------------------------------------------------------ */

struct trip {
  struct adr_device* cpu;
  struct adr_device* dev;
  struct adr_stream* stream;
  const struct ArrowSchema* schema;
  const struct ArrowDeviceArray* host;
  struct raw_list* raw;
  int64_t bytes; /* useful bytes of the last round trip */
  int64_t syncs_to, syncs_back;
  int failed;
};

static void deep_fn(void* p) {
  struct trip* t = p;
  struct ArrowDeviceArray d, back;
  struct adr_copy_stats s1 = {.struct_size = sizeof(s1)}, s2 = {.struct_size = sizeof(s2)};
  struct adr_error err;
  if (adr_device_array_deep_copy(t->schema, t->host, t->dev, t->stream, &d, &s1, &err) != 0) {
    if (!t->failed) fprintf(stderr, "bench array: %s\n", err.message);
    t->failed = 1;
    return;
  }
  if (adr_device_array_deep_copy(t->schema, &d, t->cpu, t->stream, &back, &s2, &err) != 0) {
    if (!t->failed) fprintf(stderr, "bench array: %s\n", err.message);
    t->failed = 1;
    adr_device_array_release(&d);
    return;
  }
  t->bytes = s1.bytes + s2.bytes;
  t->syncs_to = s1.host_syncs;
  t->syncs_back = s2.host_syncs;
  bench_sink(back.array.children);
  adr_device_array_release(&back);
  adr_device_array_release(&d);
}

static void raw_fn(void* p) {
  struct trip* t = p;
  struct raw_list* l = t->raw;
  for (int i = 0; i < l->n; i++)
    adr_copy(t->dev, l->dev[i], t->cpu, l->ptr[i], l->size[i], t->stream, NULL);
  for (int i = 0; i < l->n; i++)
    adr_copy(t->cpu, l->back[i], t->dev, l->dev[i], l->size[i], t->stream, NULL);
  adr_stream_synchronize(t->stream, NULL);
  bench_sink(l->back[0]);
}

/* ---- cold and warm deep copy CPU->CPU ---------------------------------------- */

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The process's CPU time (user + system, every thread: page faults are
 * system time of the thread that takes them), which waiting for a core on
 * a loaded machine does not inflate as it does wall time. */
static double cpu_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Byte checks of the cold/warm runs that failed (each also failed its
 * bench_expect): the CPU-time row of a pair says the same as the wall-time
 * row, which took the checks. */
static int cold_warm_failures;

/* Wall and CPU seconds of one measurement. */
struct span {
  double wall, cpu;
};

static struct span span_start(void) {
  return (struct span){now_s(), cpu_s()};
}

static struct span span_since(struct span t0) {
  return (struct span){now_s() - t0.wall, cpu_s() - t0.cpu};
}

/* One deep copy to the CPU, checked equal to the source; {0, 0} on
 * failure. */
static struct span deep_once(struct bench_ctx* ctx, struct adr_device* cpu,
                             const struct ArrowSchema* s, const struct ArrowDeviceArray* host,
                             bool trim_first, int64_t* out_bytes) {
  struct adr_error err;
  struct ArrowDeviceArray out;
  struct adr_copy_stats cst = {.struct_size = sizeof(cst)};
  if (trim_first) adr_memory_trim(cpu, NULL, NULL);
  struct span t0 = span_start();
  if (adr_device_array_deep_copy(s, host, cpu, NULL, &out, &cst, &err) != 0) {
    bench_expect(ctx, false, "deep copy CPU->CPU: %s", err.message);
    cold_warm_failures++;
    return (struct span){0, 0};
  }
  struct span t = span_since(t0);
  if (out_bytes != NULL) *out_bytes = cst.bytes;
  bool eq = false;
  struct adr_error diff;
  int st = adr_device_array_equal(s, host, &out, &eq, &diff, &err);
  bench_expect(ctx, st == 0 && eq, "deep copy CPU->CPU differs: %s",
               st ? err.message : diff.message);
  cold_warm_failures += !(st == 0 && eq);
  adr_device_array_release(&out);
  return t;
}

/* nanoarrow's CPU copy: malloc + memcpy per buffer into fresh memory
 * (freed after, so the next run gets fresh memory again); checked. */
static struct span malloc_copy_once(struct bench_ctx* ctx, const struct raw_list* l) {
  void* dst[64];
  struct span t0 = span_start();
  for (int i = 0; i < l->n; i++) {
    dst[i] = malloc(l->size[i]);
    if (dst[i] != NULL) memcpy(dst[i], l->ptr[i], l->size[i]);
  }
  struct span t = span_since(t0);
  bool ok = true;
  for (int i = 0; i < l->n; i++) {
    ok = ok && dst[i] != NULL && memcmp(dst[i], l->ptr[i], l->size[i]) == 0;
    free(dst[i]);
  }
  bench_expect(ctx, ok, "malloc+memcpy baseline: bytes differ");
  cold_warm_failures += !ok;
  return t;
}

static struct span memcpy_once(const struct raw_list* l, void* const* dst) {
  struct span t0 = span_start();
  for (int i = 0; i < l->n; i++) memcpy(dst[i], l->ptr[i], l->size[i]);
  return span_since(t0);
}

static double min_of(double a, double b) {
  return a == 0 ? b : b == 0 ? a : a < b ? a : b;
}

static void span_min(struct span* best, struct span t) {
  best->wall = min_of(best->wall, t.wall);
  best->cpu = min_of(best->cpu, t.cpu);
}

/* Rows in wall time and in CPU time (the figure to trust on a loaded
 * machine); the runs of both sides alternate, so a change of load hits
 * both. */
static void report_pair(struct bench_ctx* ctx, const char* group, const char* label,
                        struct span adr, struct span base, const char* base_name) {
  char cpu_label[112];
  snprintf(cpu_label, sizeof(cpu_label), "%s, CPU time", label);
  bench_report(ctx, group, label, adr.wall * 1e3, base.wall * 1e3, "ms", base_name,
               BENCH_LOWER_IS_BETTER);
  if (cold_warm_failures == 0) bench_expect(ctx, true, "%s: the runs of the row above", cpu_label);
  bench_report(ctx, group, cpu_label, adr.cpu * 1e3, base.cpu * 1e3, "ms", base_name,
               BENCH_LOWER_IS_BETTER);
}

static void bench_cold_warm(struct bench_ctx* ctx, struct adr_device* cpu,
                            const struct ArrowSchema* schema, const struct ArrowDeviceArray* host,
                            int64_t rows) {
  struct raw_list* raw = calloc(1, sizeof(*raw));
  if (raw == NULL) return;
  collect(schema, &host->array, raw);
  char label[96];
  const char* group = "array cpu:0 deep copy";
  /* Cold: each run on memory fresh from the kernel; the best of three. */
  struct span cold = {0, 0}, base_cold = {0, 0};
  for (int r = 0; r < 3; r++) {
    span_min(&cold, deep_once(ctx, cpu, schema, host, true, NULL));
    span_min(&base_cold, malloc_copy_once(ctx, raw));
  }
  adr_memory_trim(cpu, NULL, NULL);
  snprintf(label, sizeof(label), "cold CPU->CPU %lld rows", (long long)rows);
  report_pair(ctx, group, label, cold, base_cold, "malloc+memcpy per buffer (nanoarrow)");
  /* Warm: the pool's memory reused; memcpy into touched memory. */
  struct span warm = {0, 0}, base_warm = {0, 0};
  int64_t copied = 0, raw_bytes = 0;
  deep_once(ctx, cpu, schema, host, false, &copied);
  for (int i = 0; i < raw->n; i++) raw_bytes += (int64_t)raw->size[i];
  bench_note(ctx, group, "bytes: deep copy", (double)copied, "B");
  bench_note(ctx, group, "bytes: baselines", (double)raw_bytes, "B");
  void* dst[64];
  bool ok = true;
  for (int i = 0; i < raw->n; i++) {
    dst[i] = malloc(raw->size[i]);
    ok = ok && dst[i] != NULL;
    if (dst[i] != NULL) memset(dst[i], 0, raw->size[i]);
  }
  if (ok) {
    for (int r = 0; r < 5; r++) {
      span_min(&warm, deep_once(ctx, cpu, schema, host, false, NULL));
      span_min(&base_warm, memcpy_once(raw, dst));
    }
    for (int i = 0; i < raw->n; i++) ok = ok && memcmp(dst[i], raw->ptr[i], raw->size[i]) == 0;
    bench_expect(ctx, ok, "memcpy baseline: bytes differ");
    cold_warm_failures += !ok;
    snprintf(label, sizeof(label), "warm CPU->CPU %lld rows", (long long)rows);
    report_pair(ctx, group, label, warm, base_warm, "memcpy of the buffers, 1 thread");
  }
  for (int i = 0; i < raw->n; i++) free(dst[i]);
  free(raw);
}

/* ---- transfer stream ---------------------------------------------------------- */

struct batches {
  const struct ArrowDeviceArray* batch;
  int left;
};

static void borrowed_release(struct ArrowArray* a) {
  a->release = NULL;
}

/* Hands out the same host batch again and again, borrowed (no copy). */
static int borrowed_next(void* ctx, struct ArrowDeviceArray* out, struct adr_error* error) {
  (void)error;
  struct batches* b = ctx;
  if (b->left-- <= 0) return 0;
  *out = *b->batch;
  out->array.release = borrowed_release;
  return 0;
}

struct xfer {
  struct adr_device* dev;
  const struct ArrowSchema* schema;
  const struct ArrowDeviceArray* batch;
  int n_batches;
  int prefetch;
  int failed;
};

static void xfer_fn(void* p) {
  struct xfer* x = p;
  struct adr_error err;
  struct ArrowSchema s;
  if (adr_schema_copy(x->schema, &s, &err) != 0) {
    x->failed = 1;
    return;
  }
  struct batches b = {x->batch, x->n_batches};
  struct ArrowDeviceArrayStream src, t;
  if (adr_device_array_stream_from_callback(&s, ARROW_DEVICE_CPU, borrowed_next, NULL, &b, &src,
                                            &err) != 0 ||
      adr_transfer_stream_init(&src, x->dev, x->prefetch, &t, &err) != 0) {
    if (!x->failed) fprintf(stderr, "bench array: %s\n", err.message);
    x->failed = 1;
    if (s.release) s.release(&s);
    if (src.release) src.release(&src);
    return;
  }
  for (;;) {
    struct ArrowDeviceArray a;
    if (adr_device_array_stream_next(&t, &a, &err) != 0) {
      x->failed = 1;
      break;
    }
    if (a.array.release == NULL) break;
    /* the consumer's use of the batch: it needs the data to be there */
    adr_device_array_wait(&a, NULL, NULL);
    adr_device_array_release(&a);
  }
  t.release(&t);
}

/* ---- slices ------------------------------------------------------------------ */

/* A borrowed view of `a` with another offset and length (never released). */
static struct ArrowDeviceArray sliced(const struct ArrowDeviceArray* a, int64_t offset,
                                      int64_t length) {
  struct ArrowDeviceArray v = *a;
  v.array.offset = offset;
  v.array.length = length;
  return v;
}

/* Deep-copies `src` (a slice) to `to`, checks it equal to `expect` (the
 * same slice on the CPU) and reports bytes allocated against `needed`. */
static int slice_row(struct bench_ctx* ctx, const char* group, const char* label,
                     const struct ArrowSchema* schema, const struct ArrowDeviceArray* src,
                     const struct ArrowDeviceArray* expect, struct adr_device* to, int64_t needed,
                     bool in_bytes, struct adr_copy_stats* out_stats) {
  struct adr_error err;
  struct ArrowDeviceArray out;
  struct adr_copy_stats st = {.struct_size = sizeof(st)};
  if (adr_device_array_deep_copy(schema, src, to, NULL, &out, &st, &err) != 0) {
    fprintf(stderr, "bench array: %s: %s\n", label, err.message);
    bench_expect(ctx, false, "%s: %s", label, err.message);
    return -1;
  }
  bool eq = false;
  struct adr_error diff;
  int st_eq = adr_device_array_equal(schema, expect, &out, &eq, &diff, &err);
  bench_expect(ctx, st_eq == 0 && eq, "%s: copy differs from the slice: %s", label,
               st_eq ? err.message : diff.message);
  double scale = in_bytes ? 1.0 : 1e-6;
  bench_report(ctx, group, label, (double)st.bytes_allocated * scale, (double)needed * scale,
               in_bytes ? "B" : "MB", "bytes the slice needs", BENCH_LOWER_IS_BETTER);
  if (out_stats != NULL) *out_stats = st;
  adr_device_array_release(&out);
  return 0;
}

/* A 100k-row slice (offset on the top-level struct, not a multiple of 8)
 * of the table copied CPU->dev, dev->dev, dev->CPU; an empty slice. */
static void bench_slices(struct bench_ctx* ctx, struct adr_device* cpu, struct adr_device* dev,
                         const struct ArrowSchema* schema, const struct ArrowDeviceArray* host,
                         int64_t rows) {
  char group[64], label[96];
  snprintf(group, sizeof(group), "array slice %s", adr_device_name(dev));
  int64_t n = rows >= 100000 ? 100000 : rows / 2, at = rows / 2 + 3;
  struct ArrowDeviceArray hs = sliced(host, at, n), he = sliced(host, 50, 0);
  int64_t needed = fixture_needed_bytes(schema, &hs.array);
  int64_t needed_empty = fixture_needed_bytes(schema, &he.array);
  bool is_cpu = adr_device_type(dev) == ARROW_DEVICE_CPU;
  snprintf(label, sizeof(label), "%s %lld of %lld rows, allocated",
           is_cpu ? "CPU->CPU" : "CPU->dev", (long long)n, (long long)rows);
  slice_row(ctx, group, label, schema, &hs, &hs, dev, needed, false, NULL);
  snprintf(label, sizeof(label), "empty slice at 50, allocated");
  slice_row(ctx, group, label, schema, &he, &he, dev, needed_empty, true, NULL);
  if (is_cpu) return;
  struct adr_error err;
  struct ArrowDeviceArray whole;
  if (adr_device_array_deep_copy(schema, host, dev, NULL, &whole, NULL, &err) != 0) {
    fprintf(stderr, "bench array: %s\n", err.message);
    return;
  }
  struct ArrowDeviceArray ds = sliced(&whole, at, n);
  struct adr_copy_stats st;
  snprintf(label, sizeof(label), "dev->dev %lld of %lld rows, allocated", (long long)n,
           (long long)rows);
  /* The boundary offsets of a device slice are read in one batch per
   * level of var-length nesting (one level in this table): size_syncs
   * and size_reads say how many rounds and reads it took. */
  if (slice_row(ctx, group, label, schema, &ds, &hs, dev, needed, false, &st) == 0) {
    bench_note(ctx, group, "offset read rounds, slice dev->dev", (double)st.size_syncs, "waits");
    bench_note(ctx, group, "offset reads, slice dev->dev", (double)st.size_reads, "reads");
  }
  snprintf(label, sizeof(label), "dev->CPU %lld of %lld rows, allocated", (long long)n,
           (long long)rows);
  if (slice_row(ctx, group, label, schema, &ds, &hs, cpu, needed, false, &st) == 0)
    bench_note(ctx, group, "host syncs, slice dev->CPU", (double)st.host_syncs, "waits");
  adr_device_array_release(&whole);
}

static void bench_device(struct bench_ctx* ctx, struct adr_device* cpu, struct adr_device* dev,
                         const struct ArrowSchema* schema, const struct ArrowDeviceArray* host,
                         int64_t rows) {
  struct adr_error err;
  double min_s = bench_quick(ctx) ? 0.05 : 0.3;
  char group[64], label[64];
  snprintf(group, sizeof(group), "array %s", adr_device_name(dev));
  struct adr_stream* stream = NULL;
  if (adr_stream_create(dev, &stream, &err) != 0) {
    fprintf(stderr, "bench array: %s\n", err.message);
    return;
  }
  struct raw_list* raw = calloc(1, sizeof(*raw));
  if (raw == NULL) return;
  collect(schema, &host->array, raw);
  int ok = 1;
  for (int i = 0; i < raw->n && ok; i++) {
    ok = adr_alloc(dev, raw->size[i], 0, NULL, &raw->dev[i], &err) == 0 &&
         adr_alloc(cpu, raw->size[i], 0, NULL, &raw->back[i], &err) == 0;
  }
  if (ok) {
    struct trip t = {cpu, dev, stream, schema, host, raw, 0, 0, 0, 0};
    double t_deep = bench_time(deep_fn, &t, min_s, 1);
    double t_raw = bench_time(raw_fn, &t, min_s, 1);
    /* The baseline copies into device memory allocated once; the deep
     * copy allocates from the pool each time, whose cap (an eighth of the
     * device's memory by default: 256 MiB on lavapipe's 2 GiB heap) may be
     * below the table's size, so that its blocks go back to the driver at
     * every release and come back as fresh pages. The second row raises
     * the cap above the working set: the copy path itself, like for like. */
    uint64_t cap = 0;
    double t_cached = -1;
    if (!t.failed) {
      if (adr_memory_max_cached_set(dev, UINT64_MAX, &cap, &err) == 0) {
        t_cached = bench_time(deep_fn, &t, min_s, 1);
        adr_memory_max_cached_set(dev, cap, NULL, NULL);
      } else {
        fprintf(stderr, "bench array: %s: the row with the pool cap raised is left out\n",
                err.message);
      }
    }
    if (!t.failed) {
      snprintf(label, sizeof(label), "deep copy CPU->dev->CPU %lld rows", (long long)rows);
      bench_report(ctx, group, label, (double)t.bytes / t_deep / 1e9, (double)t.bytes / t_raw / 1e9,
                   "GB/s", "adr_copy of the raw buffers", BENCH_HIGHER_IS_BETTER);
      if (t_cached > 0) {
        snprintf(label, sizeof(label), "deep copy bytes per way (pool cap %.0f MiB)",
                 (double)cap / (1 << 20));
        bench_note(ctx, group, label, (double)t.bytes / 2, "B per way");
        snprintf(label, sizeof(label), "deep copy CPU->dev->CPU %lld rows, pool cap raised",
                 (long long)rows);
        bench_report(ctx, group, label, (double)t.bytes / t_cached / 1e9,
                     (double)t.bytes / t_raw / 1e9, "GB/s", "adr_copy of the raw buffers",
                     BENCH_HIGHER_IS_BETTER);
      }
      bench_note(ctx, group, "host syncs, deep copy CPU->dev", (double)t.syncs_to, "waits");
      bench_note(ctx, group, "host syncs, deep copy dev->CPU", (double)t.syncs_back, "waits");
    }
  } else {
    fprintf(stderr, "bench array: %s\n", err.message);
  }
  for (int i = 0; i < raw->n; i++) {
    if (raw->dev[i]) adr_free(dev, raw->dev[i], raw->size[i], NULL, NULL);
    if (raw->back[i]) adr_free(cpu, raw->back[i], raw->size[i], NULL, NULL);
  }
  free(raw);
  adr_stream_destroy(stream, NULL);

  /* Transfer stream: 8 batches of a tenth of the table. */
  struct ArrowSchema bs;
  struct ArrowDeviceArray batch;
  int64_t batch_rows = rows / 10 > 0 ? rows / 10 : 1;
  if (fixture_sample_table(batch_rows, &bs, &batch, &err) != 0) return;
  struct adr_copy_stats st = {.struct_size = sizeof(st)};
  struct ArrowDeviceArray probe;
  if (adr_device_array_deep_copy(&bs, &batch, dev, NULL, &probe, &st, &err) == 0) {
    adr_device_array_release(&probe);
    struct xfer x0 = {dev, &bs, &batch, 8, 0, 0}, x2 = {dev, &bs, &batch, 8, 2, 0};
    double t0 = bench_time(xfer_fn, &x0, min_s, 1);
    double t2 = bench_time(xfer_fn, &x2, min_s, 1);
    if (!x0.failed && !x2.failed) {
      double bytes = 8.0 * (double)st.bytes;
      snprintf(label, sizeof(label), "transfer stream prefetch 2, 8 x %lld rows",
               (long long)batch_rows);
      bench_report(ctx, group, label, bytes / t2 / 1e9, bytes / t0 / 1e9, "GB/s", "prefetch 0",
                   BENCH_HIGHER_IS_BETTER);
    }
  }
  adr_device_array_release(&batch);
  bs.release(&bs);
  bench_slices(ctx, cpu, dev, schema, host, rows);
}

void bench_run_array(struct bench_ctx* ctx) {
  struct adr_error err;
  struct adr_device* cpu;
  if (adr_device_get(ARROW_DEVICE_CPU, 0, &cpu, &err) != 0) {
    fprintf(stderr, "bench array: %s\n", err.message);
    return;
  }
  int64_t rows = bench_quick(ctx) ? 1000000 : 10000000;
  struct ArrowSchema schema;
  struct ArrowDeviceArray host;
  if (fixture_sample_table(rows, &schema, &host, &err) != 0) {
    fprintf(stderr, "bench array: %s\n", err.message);
    return;
  }
  bench_cold_warm(ctx, cpu, &schema, &host, rows);
  size_t count = 0;
  adr_device_count(&count, NULL);
  ArrowDeviceType done[16];
  int n_done = 0;
  for (size_t i = 0; i < count; i++) {
    struct adr_device* dev;
    if (adr_device_at(i, &dev, NULL) != 0) continue;
    /* one device per device type: the first */
    ArrowDeviceType type = adr_device_type(dev);
    bool seen = false;
    for (int k = 0; k < n_done; k++) seen |= done[k] == type;
    if (seen || n_done == 16) continue;
    done[n_done++] = type;
    bench_device(ctx, cpu, dev, &schema, &host, rows);
  }
  adr_device_array_release(&host);
  schema.release(&schema);
}
