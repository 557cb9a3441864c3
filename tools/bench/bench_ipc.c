/* SPDX-License-Identifier: Apache-2.0
 *
 * IPC rows (docs/ipc.md): the sample table (int64, nullable utf8,
 * list<int32>, struct<float64, bool>) written as an Arrow IPC stream into
 * a pipe by one thread and read back by another, against a plain memcpy
 * of the same number of bytes and against the same bytes pushed through a
 * pipe with write/read (what any transport of the stream costs at least);
 * then the same from batches on the default device (ADR_DEVICE, staged to
 * the host by the writer) against the CPU source, and read onto that
 * device against reading to the host. Each measured stream is checked
 * once against the table.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adr/adr.h"
#include "adr/array.h"
#include "adr/ipc.h"
#include "bench.h"
#include "sample_table.h"

void bench_run_ipc(struct bench_ctx* ctx);

#define N_BATCHES 8

struct ipc_run {
  const struct ArrowSchema* schema;
  const struct ArrowDeviceArray* batches; /* N_BATCHES, on src_type */
  ArrowDeviceType src_type;
  struct adr_device* dst; /* NULL: host */
  int64_t bytes;          /* stream bytes of the last run */
  int64_t rows;
  int failed;
  /* Check mode: compare every batch read with the source. */
  bool check;
  bool equal;
};

struct writer_arg {
  int fd;
  struct ArrowDeviceArrayStream stream;
  struct adr_ipc_stream_stats stats;
  int status;
};

static void* writer_main(void* p) {
  struct writer_arg* w = p;
  w->stats.struct_size = sizeof(w->stats);
  w->status = adr_ipc_write_stream(w->fd, &w->stream, NULL, &w->stats, NULL);
  close(w->fd);
  return NULL;
}

static void noop_release(struct ArrowArray* a) {
  a->release = NULL;
}

static void ipc_fn(void* p) {
  struct ipc_run* r = p;
  struct adr_error err;
  struct ArrowSchema copy;
  struct ArrowDeviceArray views[N_BATCHES];
  for (int i = 0; i < N_BATCHES; i++) {
    views[i] = r->batches[i];
    views[i].array.release = noop_release; /* the stream takes views: the run keeps the data */
  }
  int fds[2];
  struct writer_arg w;
  memset(&w, 0, sizeof(w));
  if (adr_schema_copy(r->schema, &copy, &err) != 0 || pipe(fds) != 0 ||
      adr_device_array_stream_from_arrays(&copy, views, N_BATCHES, r->src_type, &w.stream, &err) !=
          0) {
    r->failed = 1;
    return;
  }
  w.fd = fds[1];
  pthread_t th;
  if (pthread_create(&th, NULL, writer_main, &w) != 0) {
    r->failed = 1;
    return;
  }
  struct ArrowDeviceArrayStream in;
  int64_t rows = 0;
  if (adr_ipc_read_stream(fds[0], r->dst, &in, &err) != 0) {
    fprintf(stderr, "bench ipc: %s\n", err.message);
    r->failed = 1;
  } else {
    for (int i = 0;; i++) {
      struct ArrowDeviceArray b;
      if (adr_device_array_stream_next(&in, &b, &err) != 0) {
        fprintf(stderr, "bench ipc: %s\n", err.message);
        r->failed = 1;
        break;
      }
      if (b.array.release == NULL) break;
      rows += b.array.length;
      if (r->check) {
        bool eq = false;
        if (i >= N_BATCHES ||
            adr_device_array_equal(r->schema, &r->batches[i], &b, &eq, NULL, &err) != 0 || !eq)
          r->equal = false;
      }
      adr_device_array_release(&b);
    }
    in.release(&in);
  }
  /* Reading stopped early (an error): let the writer finish. */
  close(fds[0]);
  pthread_join(th, NULL);
  if (w.status != 0) r->failed = 1;
  r->bytes = w.stats.bytes;
  r->rows = rows;
}

struct copy_arg {
  void* dst;
  const void* src;
  size_t n;
};

static void memcpy_fn(void* p) {
  struct copy_arg* c = p;
  memcpy(c->dst, c->src, c->n);
  bench_sink(c->dst);
}

struct pipe_arg {
  int fd;
  const uint8_t* src;
  size_t n;
};

static void* pipe_writer(void* p) {
  struct pipe_arg* a = p;
  size_t at = 0;
  while (at < a->n) {
    ssize_t w = write(a->fd, a->src + at, a->n - at);
    if (w <= 0) break;
    at += (size_t)w;
  }
  close(a->fd);
  return NULL;
}

static void pipe_fn(void* p) {
  struct copy_arg* c = p;
  int fds[2];
  if (pipe(fds) != 0) return;
  struct pipe_arg a = {.fd = fds[1], .src = c->src, .n = c->n};
  pthread_t th;
  if (pthread_create(&th, NULL, pipe_writer, &a) != 0) {
    close(fds[0]);
    close(fds[1]);
    return;
  }
  size_t at = 0;
  for (;;) {
    ssize_t r = read(fds[0], (uint8_t*)c->dst + at, c->n - at);
    if (r <= 0) break;
    at += (size_t)r;
  }
  close(fds[0]);
  pthread_join(th, NULL);
  bench_sink(c->dst);
}

/* Runs one configuration: a checked run, then the timing. Returns GB/s
 * (stream bytes per second), 0 on failure. */
static double measure(struct bench_ctx* ctx, struct ipc_run* r, const char* what, int64_t rows,
                      double secs) {
  r->check = true;
  r->equal = true;
  ipc_fn(r);
  bench_expect(ctx, !r->failed && r->equal && r->rows == rows, "%s: %lld of %lld rows read back%s",
               what, (long long)r->rows, (long long)rows, r->equal ? "" : ", batches differ");
  if (r->failed) return 0;
  r->check = false;
  double t = bench_time(ipc_fn, r, secs, 3);
  return r->failed ? 0 : (double)r->bytes / t / 1e9;
}

void bench_run_ipc(struct bench_ctx* ctx) {
  const bool quick = bench_quick(ctx);
  const int64_t rows = quick ? 200000 : 2000000;
  const double secs = quick ? 0.2 : 1.0;
  struct adr_error err;
  struct ArrowSchema schema;
  struct ArrowDeviceArray table;
  if (fixture_sample_table(rows, &schema, &table, &err) != 0) {
    fprintf(stderr, "bench ipc: %s\n", err.message);
    bench_expect(ctx, false, "sample table: %s", err.message);
    return;
  }
  struct ArrowDeviceArray host[N_BATCHES];
  for (int i = 0; i < N_BATCHES; i++) {
    host[i] = table;
    host[i].array.release = noop_release;
    host[i].array.offset = rows * i / N_BATCHES;
    host[i].array.length = rows * (i + 1) / N_BATCHES - rows * i / N_BATCHES;
  }
  char label[64];
  snprintf(label, sizeof(label), "%lld rows, %d batches", (long long)rows, N_BATCHES);

  struct ipc_run cpu = {.schema = &schema, .batches = host, .src_type = ARROW_DEVICE_CPU};
  double gbs = measure(ctx, &cpu, "cpu -> pipe -> host", rows, secs);
  size_t n = (size_t)cpu.bytes;
  uint8_t* src = malloc(n ? n : 1);
  uint8_t* dst = malloc(n ? n : 1);
  if (src == NULL || dst == NULL) {
    free(src);
    free(dst);
    adr_device_array_release(&table);
    schema.release(&schema);
    return;
  }
  memset(src, 0x5A, n);
  memset(dst, 0, n);
  struct copy_arg c = {.dst = dst, .src = src, .n = n};
  double t_mem = bench_time(memcpy_fn, &c, secs, 3);
  bench_expect_fill(ctx, dst, 0x5A, n, "memcpy baseline");
  bench_report(ctx, "ipc write+read (pipe)", label, gbs, (double)n / t_mem / 1e9, "GB/s",
               "memcpy of the stream's bytes", BENCH_HIGHER_IS_BETTER);
  memset(dst, 0, n);
  double t_pipe = bench_time(pipe_fn, &c, secs, 3);
  bench_expect_fill(ctx, dst, 0x5A, n, "pipe baseline");
  bench_report(ctx, "ipc write+read (pipe)", label, gbs, (double)n / t_pipe / 1e9, "GB/s",
               "write/read of the stream's bytes", BENCH_HIGHER_IS_BETTER);
  free(src);
  free(dst);

  struct adr_device* dev = NULL;
  if (adr_device_default(&dev, &err) != 0 || adr_device_type(dev) == ARROW_DEVICE_CPU) {
    bench_note(ctx, "ipc device", "no non-CPU default device (ADR_DEVICE): skipped", 0, "-");
  } else {
    struct ArrowDeviceArray on_dev[N_BATCHES];
    int made = 0;
    for (; made < N_BATCHES; made++)
      if (adr_device_array_deep_copy(&schema, &host[made], dev, NULL, &on_dev[made], NULL, &err) !=
          0)
        break;
    if (made == N_BATCHES) {
      char g[96];
      struct ipc_run d = {.schema = &schema, .batches = on_dev, .src_type = adr_device_type(dev)};
      snprintf(g, sizeof(g), "ipc source %s vs cpu", adr_device_name(dev));
      double dev_gbs = measure(ctx, &d, "device -> pipe -> host", rows, secs);
      bench_report(ctx, g, label, dev_gbs, gbs, "GB/s", "cpu source", BENCH_HIGHER_IS_BETTER);
      struct ipc_run to = {
          .schema = &schema, .batches = host, .src_type = ARROW_DEVICE_CPU, .dst = dev};
      snprintf(g, sizeof(g), "ipc read onto %s vs host", adr_device_name(dev));
      double to_gbs = measure(ctx, &to, "cpu -> pipe -> device", rows, secs);
      bench_report(ctx, g, label, to_gbs, gbs, "GB/s", "read to the host", BENCH_HIGHER_IS_BETTER);
    } else {
      fprintf(stderr, "bench ipc: %s\n", err.message);
      bench_expect(ctx, false, "copy to %s: %s", adr_device_name(dev), err.message);
    }
    for (int i = 0; i < made; i++) adr_device_array_release(&on_dev[i]);
  }
  adr_device_array_release(&table);
  schema.release(&schema);
}
