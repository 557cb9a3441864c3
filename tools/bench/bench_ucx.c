/* SPDX-License-Identifier: Apache-2.0
 *
 * adr-bench area "ucx": streams over UCX loopback (adr/ucx.h, docs/ucx.md)
 * against UCX's own ucx_perftest on the same transport (UCX_TLS as set;
 * when unset, once with tcp and once with posix,self), run as a server and a
 * client subprocess in the same run. Both adr sides run in this process, each on its own thread
 * and UCX worker; host memory on both ends.
 *
 * Rows:
 *   - "table": a table of int64 columns, 1 GiB (64 MiB with --quick), in
 *     batches of 8 MiB (the transfer's chunk size) and then of 64 MiB,
 *     sent with adr_ucx_send_stream and received with
 *     adr_ucx_receive_stream, in GB/s from the first send to the last
 *     batch received; against ucx_perftest -t tag_bw with messages of the
 *     batch's size, overall bandwidth. Target >= 0.9x. Like for like: a
 *     batch's body is one buffer on each side, reused batch after batch
 *     (the source's values; the receiver's pool block), as ucx_perftest
 *     reuses one buffer per side; how much of it the CPU caches hold
 *     depends on the size, for both.
 *     Every batch's first and last values are checked on arrival.
 *   - "1-row batch": a stream of 1-row int64 batches with one batch in
 *     flight (each waits for the receiver's credit), microseconds per
 *     batch, a round trip; against ucx_perftest -t tag_lat (one-way
 *     latency doubled to a round trip) with 8-byte messages, the
 *     transport's floor, and with messages of the size adr sends per batch
 *     (its control message: framing, the batch's Arrow IPC metadata or
 *     its patch against the previous batch's, and its 8-byte body inline;
 *     adr_ucx_send_stats.control_bytes), the same bytes on the wire.
 *     Target <= 1.5x.
 */
#include <errno.h>
#include <pthread.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "adr/adr.h"
#include "adr/array.h"
#include "adr/ucx.h"
#include "bench.h"

#define MiB ((size_t)1 << 20)

void bench_run_ucx(struct bench_ctx* ctx);

struct run {
  struct adr_ucx_listener* listener;
  int64_t rows;      /* rows per batch */
  int batches;
  int64_t* values;   /* rows values, host memory, shared by every batch */
  int produced;
  uint32_t inflight;
  struct adr_ucx_send_stats stats; /* the sender's */
  /* receiver results */
  int received;
  int64_t bytes;
  bool ok;
  int status;
  char message[1024];
  double end;
};

/* A struct batch with one int64 column over the shared values (IPC
 * record batches are structs). */
static int source_next(void* ctx, struct ArrowDeviceArray* out, struct adr_error* error) {
  struct run* r = ctx;
  memset(out, 0, sizeof(*out));
  if (r->produced == r->batches) return 0;
  struct ArrowArray a = {0};
  int st = adr_array_init(NULL, 1, 1, &a, error);
  if (!st) st = adr_array_init(NULL, 2, 0, a.children[0], error);
  if (!st) st = adr_array_set_buffer(a.children[0], 1, r->values, error);
  if (!st) {
    a.length = r->rows;
    a.children[0]->length = r->rows;
    st = adr_device_array_init(NULL, &a, NULL, out, error);
  }
  if (st && a.release) a.release(&a);
  if (!st) r->produced++;
  return st;
}

static void* receiver(void* arg) {
  struct run* r = arg;
  struct adr_error e = {{0}};
  struct adr_ucx_conn* conn = NULL;
  struct ArrowDeviceArrayStream s = {0};
  r->ok = true;
  /* The cpu device: its caching pool hands the same warm memory back
   * batch after batch, as it would to an application. */
  struct adr_device* cpu = NULL;
  int st = adr_device_get(ARROW_DEVICE_CPU, 0, &cpu, &e);
  if (!st) st = adr_ucx_accept(r->listener, 20000, &conn, &e);
  if (!st) st = adr_ucx_receive_stream(conn, cpu, &s, &e);
  while (!st) {
    struct ArrowDeviceArray b;
    st = s.get_next(&s, &b);
    if (st) {
      snprintf(e.message, sizeof(e.message), "%s", s.get_last_error(&s));
      break;
    }
    if (b.array.release == NULL) break;
    const int64_t* v = b.array.n_children == 1 ? b.array.children[0]->buffers[1] : NULL;
    if (v == NULL || b.array.length != r->rows || v[0] != r->values[0] ||
        v[r->rows - 1] != r->values[r->rows - 1])
      r->ok = false;
    r->bytes += b.array.length * 8;
    r->received++;
    b.array.release(&b.array);
  }
  r->end = bench_now();
  if (s.release) s.release(&s);
  if (conn) adr_ucx_conn_destroy(conn, NULL);
  r->status = st;
  snprintf(r->message, sizeof(r->message), "%s", e.message);
  return NULL;
}

/* One transfer; seconds from the first send to the last batch received,
 * or a negative value on failure. */
static double transfer(struct run* r, struct adr_error* e) {
  struct adr_ucx_options opt = {.struct_size = sizeof(opt)};
  opt.max_inflight_batches = r->inflight;
  opt.timeout_ms = 20000;
  r->produced = r->received = 0;
  r->bytes = 0;
  if (adr_ucx_listen("127.0.0.1:0", &opt, &r->listener, e) != 0) return -1;
  char address[64];
  snprintf(address, sizeof(address), "127.0.0.1:%d", adr_ucx_listener_port(r->listener));
  pthread_t t;
  pthread_create(&t, NULL, receiver, r);
  struct adr_ucx_conn* conn = NULL;
  double start = 0;
  int st = adr_ucx_connect(address, &opt, &conn, e);
  struct ArrowDeviceArrayStream src = {0};
  if (!st) {
    struct ArrowSchema schema;
    st = adr_schema_init(&schema, "+s", "", 0, 1, e);
    if (!st) st = adr_schema_init(schema.children[0], "l", "v", 0, 0, e);
    if (st && schema.release) schema.release(&schema);
    if (!st) st = adr_device_array_stream_from_callback(&schema, ARROW_DEVICE_CPU, source_next,
                                                        NULL, r, &src, e);
  }
  if (!st) {
    start = bench_now();
    r->stats = (struct adr_ucx_send_stats){.struct_size = sizeof(r->stats)};
    st = adr_ucx_send_stream(conn, &src, &r->stats, e);
  }
  if (src.release) src.release(&src);
  if (conn) {
    if (st) adr_ucx_conn_cancel(conn);
    adr_ucx_conn_destroy(conn, NULL);
  }
  pthread_join(t, NULL);
  adr_ucx_listener_destroy(r->listener, NULL);
  if (r->status) {
    st = r->status;
    snprintf(e->message, sizeof(e->message), "receiver: %.900s", r->message);
  }
  if (st) return -1;
  return r->end - start;
}

static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t l = sizeof(a);
  int port = -1;
  if (fd >= 0 && bind(fd, (struct sockaddr*)&a, sizeof(a)) == 0 &&
      getsockname(fd, (struct sockaddr*)&a, &l) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

/* Runs ucx_perftest as server and client; the client's "Final:" line's
 * fields into out[0..7] (iterations, latency 50%/avg/overall in us,
 * bandwidth avg/overall in MB/s, message rate avg/overall). */
static bool perftest(const char* test, size_t size, int iters, double out[8]) {
  int port = free_port();
  if (port < 0) return false;
  char cmd[512];
  snprintf(cmd, sizeof(cmd),
           "ucx_perftest -t %s -s %zu -n %d -p %d >/dev/null 2>&1 & srv=$!; sleep 0.3; "
           "ucx_perftest 127.0.0.1 -t %s -s %zu -n %d -p %d 2>/dev/null | grep '^Final:'; "
           "wait $srv",
           test, size, iters, port, test, size, iters, port);
  FILE* p = popen(cmd, "r");
  if (p == NULL) return false;
  char line[512] = "";
  bool ok = fgets(line, sizeof(line), p) != NULL;
  pclose(p);
  if (!ok) return false;
  return sscanf(line, "Final: %lf %lf %lf %lf %lf %lf %lf %lf", &out[0], &out[1], &out[2],
                &out[3], &out[4], &out[5], &out[6], &out[7]) == 8;
}

static void run_transport(struct bench_ctx* ctx);

/* With UCX_TLS set, that transport; otherwise TCP and then shared memory,
 * each for adr and ucx_perftest alike (unset, adr's endpoints, which ask
 * for peer error handling, would get TCP and ucx_perftest's shared
 * memory: not the same transport). */
void bench_run_ucx(struct bench_ctx* ctx) {
  struct adr_error e = {{0}};
  if (adr_ucx_available(NULL, 0, &e) != 0) {
    fprintf(stderr, "bench ucx: skipped: %s\n", e.message);
    return;
  }
  if (system("command -v ucx_perftest >/dev/null 2>&1") != 0) {
    fprintf(stderr, "bench ucx: skipped: ucx_perftest not found (Debian package ucx-utils)\n");
    return;
  }
  if (getenv("UCX_TLS") != NULL) {
    run_transport(ctx);
    return;
  }
  setenv("UCX_TLS", "tcp", 1);
  run_transport(ctx);
  setenv("UCX_TLS", "posix,self", 1);
  run_transport(ctx);
  unsetenv("UCX_TLS");
}

/* A table in batches of `batch_mib` MiB against ucx_perftest tag_bw with
 * messages of that size. */
static void table_row(struct bench_ctx* ctx, size_t batch_mib) {
  struct adr_error e = {{0}};
  const char* tls = getenv("UCX_TLS");
  bool quick = bench_quick(ctx);
  size_t batch_bytes = batch_mib * MiB, total = (quick ? 64 : 1024) * MiB;
  struct run r = {0};
  r.rows = (int64_t)(batch_bytes / 8);
  r.batches = (int)(total / batch_bytes);
  r.inflight = 2;
  r.values = malloc(batch_bytes);
  if (r.values == NULL) return;
  for (int64_t i = 0; i < r.rows; i++) r.values[i] = i * 7 + 1;
  /* The machine may be shared: adr's transfer and ucx_perftest take
   * turns, and each keeps its best round. */
  double best = 1e30, pt_best = 0, pt[8];
  for (int rep = 0; rep < (quick ? 2 : 3); rep++) {
    double t = transfer(&r, &e);
    if (t < 0) {
      fprintf(stderr, "bench ucx: table transfer failed: %s\n", e.message);
      free(r.values);
      return;
    }
    bench_expect(ctx, r.ok && r.received == r.batches,
                 "ucx table: %d of %d batches arrived intact", r.received, r.batches);
    if (t < best) best = t;
    if (perftest("tag_bw", batch_bytes, r.batches < 8 ? 8 : r.batches, pt) && pt[5] > pt_best)
      pt_best = pt[5];
  }
  free(r.values);
  double adr_gbs = (double)total / best / 1e9;
  char label[128], baseline[64];
  snprintf(label, sizeof(label), "%s table, %zu MiB batches (UCX_TLS=%s)",
           quick ? "64 MiB" : "1 GiB", batch_mib, tls ? tls : "default");
  if (pt_best > 0) {
    snprintf(baseline, sizeof(baseline), "ucx_perftest tag_bw %zu MiB", batch_mib);
    bench_report(ctx, "ucx", label, adr_gbs, pt_best * 1048576.0 / 1e9, "GB/s", baseline,
                 BENCH_HIGHER_IS_BETTER);
  } else {
    bench_note(ctx, "ucx", label, adr_gbs, "GB/s (ucx_perftest failed)");
  }
}

static void run_transport(struct bench_ctx* ctx) {
  struct adr_error e = {{0}};
  const char* tls = getenv("UCX_TLS");
  char label[128];
  bool quick = bench_quick(ctx);

  table_row(ctx, 8);
  table_row(ctx, 64);

  /* Latency: 1-row batches, one in flight. */
  int64_t one = 42;
  struct run l = {0};
  l.rows = 1;
  l.batches = quick ? 2000 : 20000;
  l.inflight = 1;
  l.values = &one;
  double lat_best = 1e30, pt_lat = 1e30, pt_same = 1e30, pt[8];
  size_t wire = 0;
  for (int rep = 0; rep < (quick ? 2 : 3); rep++) {
    double t = transfer(&l, &e);
    if (t < 0) {
      fprintf(stderr, "bench ucx: small batches failed: %s\n", e.message);
      return;
    }
    bench_expect(ctx, l.ok && l.received == l.batches, "ucx 1-row: %d of %d batches intact",
                 l.received, l.batches);
    if (t / l.batches < lat_best) lat_best = t / l.batches;
    /* A batch's control message; the schema and the end are averaged in
     * (under a byte per batch). */
    wire = (size_t)(l.stats.control_bytes / l.stats.control_messages);
    if (perftest("tag_lat", 8, l.batches, pt) && 2 * pt[3] < pt_lat) pt_lat = 2 * pt[3];
    if (perftest("tag_lat", wire, l.batches, pt) && 2 * pt[3] < pt_same) pt_same = 2 * pt[3];
  }
  double adr_us = lat_best * 1e6;
  snprintf(label, sizeof(label), "1-row batch (UCX_TLS=%s)", tls ? tls : "default");
  if (pt_lat < 1e30)
    bench_report(ctx, "ucx", label, adr_us, pt_lat, "us/batch",
                 "ucx_perftest tag_lat 8 B round trip", BENCH_LOWER_IS_BETTER);
  char baseline[64];
  snprintf(baseline, sizeof(baseline), "ucx_perftest tag_lat %zu B round trip", wire);
  if (pt_same < 1e30)
    bench_report(ctx, "ucx", label, adr_us, pt_same, "us/batch", baseline,
                 BENCH_LOWER_IS_BETTER);
  if (pt_lat >= 1e30 || pt_same >= 1e30)
    bench_note(ctx, "ucx", "1-row batch (ucx_perftest failed)", adr_us, "us/batch");
}
