/* SPDX-License-Identifier: Apache-2.0
 *
 * adr-bench area "share": handing memory to another process (adr/share.h,
 * docs/sharing.md) on the default device (ADR_DEVICE; the CPU when that
 * device cannot export memory, as OpenCL, whose arrays are staged).
 *
 * A peer process (this executable again, started with
 * ADR_BENCH_SHARE_PEER set, which a constructor below turns into the
 * peer's loop before main runs) is connected by a socketpair and a pipe.
 *
 * Rows, per size (1 MiB and 256 MiB; 1 and 64 MiB with --quick), each
 * against the baseline measured in the same run, in microseconds per
 * hand-over:
 *   - adr: adr_share_export of a shareable allocation, the handle sent with
 *     adr_share_handle_send, the peer's adr_share_handle_recv,
 *     adr_share_import, a read of the first and last 8 bytes through
 *     adr_copy, adr_share_close, and its reply with those 16 bytes, which
 *     are checked against the pattern;
 *   - baseline "pipe write+read": the same bytes written into a pipe (64
 *     KiB pipe buffer raised to 1 MiB) and read by the peer, which replies
 *     with the first and last 8 bytes it read.
 *   - "share array": the same bytes as the int64 column of a struct array
 *     sent with adr_share_array_send over a channel, received by the peer
 *     (adr_share_array_recv: schema as an IPC message, buffers mapped),
 *     its first and last value read through adr_copy, released, and the
 *     reply; against the Arrow IPC stream of the same array written with
 *     adr_ipc_write_stream into a pipe by a thread and read back with
 *     adr_ipc_read_stream (host memory), first and last value checked.
 * Zero copy shows as an adr time that does not grow with the size; the
 * note rows "256 MiB / 1 MiB" are that growth (1.0 = none).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "adr/adr.h"
#include "adr/array.h"
#include "adr/ipc.h"
#include "adr/share.h"
#include "bench.h"

#define MiB ((size_t)1 << 20)

void bench_run_share(struct bench_ctx* ctx);

/* One request: 'H' (a handle follows), 'P' (`size` bytes follow on the
 * pipe), 'A' (an array comes on the channel), 'Q' (quit). */
struct request {
  char cmd;
  char pad[7];
  uint64_t size;
};

static bool write_all(int fd, const void* p, size_t n) {
  const char* c = p;
  while (n > 0) {
    ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= (size_t)w;
  }
  return true;
}

static bool read_all(int fd, void* p, size_t n) {
  char* c = p;
  while (n > 0) {
    ssize_t r = read(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r;
    n -= (size_t)r;
  }
  return true;
}

static struct adr_device* share_device(void) {
  struct adr_device* d = NULL;
  uint32_t caps = 0;
  if (adr_device_default(&d, NULL) == 0 && adr_share_caps(d, &caps, NULL) == 0 &&
      (caps & ADR_SHARE_CAP_EXPORT_MEMORY))
    return d;
  return adr_device_get(ARROW_DEVICE_CPU, 0, &d, NULL) == 0 ? d : NULL;
}

/* ---- the peer ------------------------------------------------------------- */

static int peer_loop(int sock, int pipe_rd, int chan_sock) {
  struct adr_device* d = share_device();
  if (d == NULL) return 2;
  struct adr_share_channel* ch = NULL;
  if (adr_share_channel_create(chan_sock, &ch, NULL) != 0) return 6;
  char* buf = NULL;
  size_t cap = 0;
  for (;;) {
    struct request q;
    if (!read_all(sock, &q, sizeof(q)) || q.cmd == 'Q') break;
    uint64_t reply[2] = {0, 0};
    if (q.cmd == 'H') {
      struct adr_share_handle h;
      int fd = -1;
      void* p = NULL;
      if (adr_share_handle_recv(sock, -1, &h, &fd, NULL) != 0) return 3;
      int st = adr_share_import(d, &h, fd, &p, NULL);
      if (fd >= 0) close(fd);
      if (st == 0) {
        adr_copy(NULL, &reply[0], d, p, 8, NULL, NULL);
        adr_copy(NULL, &reply[1], d, (char*)p + q.size - 8, 8, NULL, NULL);
        adr_share_close(d, p, NULL);
      }
    } else if (q.cmd == 'A') {
      struct ArrowSchema s;
      struct ArrowDeviceArray a;
      struct adr_device* ad = NULL;
      struct adr_error e;
      if (adr_share_array_recv(ch, -1, &s, &a, &e) != 0) {
        fprintf(stderr, "share peer: %s\n", e.message);
        return 7;
      }
      const struct ArrowArray* col = a.array.children[0];
      const int64_t* v = (const int64_t*)col->buffers[1] + col->offset;
      if (adr_device_array_device(&a, &ad, NULL) == 0 &&
          adr_device_array_wait(&a, NULL, NULL) == 0) {
        adr_copy(NULL, &reply[0], ad, v, 8, NULL, NULL);
        adr_copy(NULL, &reply[1], ad, v + col->length - 1, 8, NULL, NULL);
      }
      adr_device_array_release(&a);
      s.release(&s);
    } else if (q.cmd == 'P') {
      if (q.size > cap) {
        free(buf);
        buf = malloc(q.size);
        cap = buf ? q.size : 0;
        if (buf == NULL) return 4;
      }
      if (!read_all(pipe_rd, buf, q.size)) return 5;
      memcpy(&reply[0], buf, 8);
      memcpy(&reply[1], buf + q.size - 8, 8);
    }
    if (!write_all(sock, reply, sizeof(reply))) break;
  }
  free(buf);
  adr_share_channel_destroy(ch);
  return 0;
}

__attribute__((constructor)) static void share_peer_main(void) {
  const char* spec = getenv("ADR_BENCH_SHARE_PEER");
  if (spec == NULL) return;
  int sock = -1, pipe_rd = -1, chan = -1;
  if (sscanf(spec, "%d,%d,%d", &sock, &pipe_rd, &chan) != 3) _exit(2);
  exit(peer_loop(sock, pipe_rd, chan));
}

/* ---- the measurements ---------------------------------------------------- */

struct share_run {
  struct bench_ctx* ctx;
  struct adr_device* dev;
  int sock;
  int pipe_wr;
  struct adr_share_channel* ch;
  void* shared; /* adr_share_alloc'd, holds `pattern` */
  char* host;   /* the same bytes in host memory, for the pipe */
  size_t size;
  uint64_t first, last; /* what the peer must read */
  bool ok;
};

static void one_share(void* arg) {
  struct share_run* r = arg;
  struct adr_share_handle h;
  int fd = -1;
  struct request q = {'H', {0}, r->size};
  uint64_t reply[2];
  bool ok = adr_share_export(r->dev, r->shared, &h, &fd, NULL) == 0 &&
            write_all(r->sock, &q, sizeof(q)) &&
            adr_share_handle_send(r->sock, &h, fd, NULL) == 0 &&
            read_all(r->sock, reply, sizeof(reply));
  if (fd >= 0) close(fd);
  r->ok = r->ok && ok && reply[0] == r->first && reply[1] == r->last;
}

static void one_pipe(void* arg) {
  struct share_run* r = arg;
  struct request q = {'P', {0}, r->size};
  uint64_t reply[2];
  bool ok = write_all(r->sock, &q, sizeof(q)) && write_all(r->pipe_wr, r->host, r->size) &&
            read_all(r->sock, reply, sizeof(reply));
  r->ok = r->ok && ok && reply[0] == r->first && reply[1] == r->last;
}

/* A struct array {v: int64} over the first size/8 values at `values`
 * (not owned: the array is a view of the shared allocation). */
static int column_array(struct adr_device* dev, void* values, size_t size,
                        struct ArrowSchema* out_schema, struct ArrowDeviceArray* out) {
  struct ArrowArray root, *col;
  if (adr_schema_init(out_schema, "+s", "", 0, 1, NULL) != 0) return ENOMEM;
  if (adr_schema_init(out_schema->children[0], "l", "v", 0, 0, NULL) != 0 ||
      adr_array_init(dev, 1, 1, &root, NULL) != 0) {
    out_schema->release(out_schema);
    return ENOMEM;
  }
  col = root.children[0];
  int st = adr_array_init(dev, 2, 0, col, NULL);
  if (st == 0) st = adr_array_set_buffer(col, 1, values, NULL);
  if (st == 0) {
    col->length = (int64_t)(size / 8);
    root.length = col->length;
    st = adr_device_array_init(dev, &root, NULL, out, NULL);
  }
  if (st) {
    root.release(&root);
    out_schema->release(out_schema);
  }
  return st;
}

static void one_array(void* arg) {
  struct share_run* r = arg;
  struct ArrowSchema s;
  struct ArrowDeviceArray a;
  struct request q = {'A', {0}, r->size};
  uint64_t reply[2] = {0, 0};
  struct adr_error e;
  bool ok = column_array(r->dev, r->shared, r->size, &s, &a) == 0;
  if (ok) {
    ok = adr_share_array_send(r->ch, &s, &a, &e) == 0;
    if (!ok) fprintf(stderr, "share: %s\n", e.message);
    if (!ok) adr_device_array_release(&a);
    s.release(&s);
  }
  ok = ok && write_all(r->sock, &q, sizeof(q)) && read_all(r->sock, reply, sizeof(reply));
  uint64_t last = 0;
  memcpy(&last, r->host + (r->size / 8 - 1) * 8, 8);
  r->ok = r->ok && ok && reply[0] == r->first && reply[1] == last;
}

struct ipc_writer {
  int fd;
  struct ArrowDeviceArrayStream stream;
  int status;
};

static void* ipc_writer_main(void* arg) {
  struct ipc_writer* w = arg;
  struct adr_error e;
  w->status = adr_ipc_write_stream(w->fd, &w->stream, NULL, NULL, &e);
  if (w->status) fprintf(stderr, "share: IPC write: %s\n", e.message);
  return NULL;
}

static void one_ipc(void* arg) {
  struct share_run* r = arg;
  int pp[2];
  struct ipc_writer w = {-1, {0}, 0};
  struct ArrowSchema s;
  struct ArrowDeviceArray a;
  bool ok = pipe2(pp, O_CLOEXEC) == 0;
  if (!ok) {
    r->ok = false;
    return;
  }
  fcntl(pp[1], F_SETPIPE_SZ, (int)MiB);
  w.fd = pp[1];
  ok = column_array(r->dev, r->shared, r->size, &s, &a) == 0;
  if (ok && adr_device_array_stream_from_arrays(&s, &a, 1, adr_device_type(r->dev), &w.stream,
                                                NULL) != 0) {
    adr_device_array_release(&a);
    s.release(&s);
    ok = false;
  }
  pthread_t t;
  if (ok && pthread_create(&t, NULL, ipc_writer_main, &w) != 0) {
    w.stream.release(&w.stream);
    ok = false;
  }
  if (ok) {
    struct ArrowDeviceArrayStream in;
    struct ArrowDeviceArray b;
    struct adr_error e;
    if (adr_ipc_read_stream(pp[0], NULL, &in, &e) == 0) {
      if (in.get_next(&in, &b) == 0 && b.array.release != NULL) {
        const struct ArrowArray* col = b.array.children[0];
        const int64_t* v = (const int64_t*)col->buffers[1] + col->offset;
        uint64_t last = 0;
        memcpy(&last, r->host + (r->size / 8 - 1) * 8, 8);
        ok = (uint64_t)v[0] == r->first && (uint64_t)v[col->length - 1] == last;
        b.array.release(&b.array);
        /* Read to the end-of-stream marker, as a consumer does. */
        ok = ok && in.get_next(&in, &b) == 0 && b.array.release == NULL;
      } else {
        fprintf(stderr, "share: IPC read: %s\n", in.get_last_error(&in));
        ok = false;
      }
      in.release(&in);
    } else {
      fprintf(stderr, "share: IPC read: %s\n", e.message);
      ok = false;
    }
    close(pp[0]); /* a writer still going sees EPIPE */
    pp[0] = -1;
    pthread_join(t, NULL);
    ok = ok && w.status == 0;
  }
  if (pp[0] >= 0) close(pp[0]);
  close(pp[1]);
  r->ok = r->ok && ok;
}

void bench_run_share(struct bench_ctx* ctx) {
  /* A peer that is gone is a failed check, not a signal. */
  void (*old_pipe)(int) = signal(SIGPIPE, SIG_IGN);
  struct adr_device* dev = share_device();
  if (dev == NULL) {
    fprintf(stderr, "share: skipped (no device can share memory)\n");
    return;
  }
  int sv[2], pp[2], cv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0 || pipe2(pp, O_CLOEXEC) != 0 ||
      socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, cv) != 0) {
    fprintf(stderr, "share: skipped (socketpair/pipe: %s)\n", strerror(errno));
    return;
  }
  fcntl(pp[1], F_SETPIPE_SZ, (int)MiB);
  pid_t pid = fork();
  if (pid == 0) {
    char spec[32];
    snprintf(spec, sizeof(spec), "%d,%d,%d", sv[1], pp[0], cv[1]);
    fcntl(sv[1], F_SETFD, 0);
    fcntl(pp[0], F_SETFD, 0);
    fcntl(cv[1], F_SETFD, 0);
    setenv("ADR_BENCH_SHARE_PEER", spec, 1);
    execl("/proc/self/exe", "adr-bench", (char*)NULL);
    _exit(127);
  }
  close(sv[1]);
  close(pp[0]);
  close(cv[1]);
  struct adr_share_channel* ch = NULL;
  if (pid < 0 || adr_share_channel_create(cv[0], &ch, NULL) != 0) {
    close(sv[0]);
    close(pp[1]);
    close(cv[0]);
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, NULL, 0);
    }
    return;
  }
  size_t sizes[] = {MiB, bench_quick(ctx) ? 64 * MiB : 256 * MiB};
  double adr_us[2] = {0, 0}, array_us[2] = {0, 0};
  char group[64];
  snprintf(group, sizeof(group), "share %s", adr_device_name(dev));
  for (int i = 0; i < 2; i++) {
    size_t n = sizes[i];
    struct share_run r = {ctx, dev, sv[0], pp[1], ch, NULL, malloc(n), n, 0, 0, true};
    if (r.host == NULL || adr_share_alloc(dev, n, 0, &r.shared, NULL) != 0) {
      free(r.host);
      fprintf(stderr, "share: skipped %zu MiB (out of memory)\n", n / MiB);
      continue;
    }
    for (size_t k = 0; k < n; k++) r.host[k] = (char)(k * 131 + 7);
    adr_copy(dev, r.shared, NULL, r.host, n, NULL, NULL);
    memcpy(&r.first, r.host, 8);
    memcpy(&r.last, r.host + n - 8, 8);
    double t_adr = bench_time(one_share, &r, bench_quick(ctx) ? 0.05 : 0.2, 5);
    bench_expect(ctx, r.ok, "share %zu MiB: the peer read other bytes than were shared", n / MiB);
    r.ok = true;
    double t_pipe = bench_time(one_pipe, &r, bench_quick(ctx) ? 0.05 : 0.2, 3);
    bench_expect(ctx, r.ok, "pipe %zu MiB: the peer read other bytes than were written", n / MiB);
    char label[32];
    snprintf(label, sizeof(label), "%zu MiB", n / MiB);
    bench_report(ctx, group, label, t_adr * 1e6, t_pipe * 1e6, "us/op", "pipe write+read",
                 BENCH_LOWER_IS_BETTER);
    adr_us[i] = t_adr * 1e6;
    r.ok = true;
    double t_array = bench_time(one_array, &r, bench_quick(ctx) ? 0.05 : 0.2, 5);
    bench_expect(ctx, r.ok, "share array %zu MiB: the peer read other values", n / MiB);
    r.ok = true;
    double t_ipc = bench_time(one_ipc, &r, bench_quick(ctx) ? 0.05 : 0.2, 3);
    bench_expect(ctx, r.ok, "IPC stream %zu MiB: other values came back", n / MiB);
    char agroup[80];
    snprintf(agroup, sizeof(agroup), "share array %s", adr_device_name(dev));
    bench_report(ctx, agroup, label, t_array * 1e6, t_ipc * 1e6, "us/op",
                 "IPC stream through a pipe", BENCH_LOWER_IS_BETTER);
    array_us[i] = t_array * 1e6;
    /* The peer's releases come back on the channel: let them land. */
    for (int k = 0; k < 2000 && adr_share_channel_outstanding(ch) != 0; k++) usleep(1000);
    adr_free(dev, r.shared, n, NULL, NULL);
    free(r.host);
  }
  if (adr_us[0] > 0 && adr_us[1] > 0) {
    char label[48];
    snprintf(label, sizeof(label), "share %zu MiB / 1 MiB", sizes[1] / MiB);
    bench_note(ctx, group, label, adr_us[1] / adr_us[0], "x");
  }
  if (array_us[0] > 0 && array_us[1] > 0) {
    char label[48], agroup[80];
    snprintf(label, sizeof(label), "%zu MiB / 1 MiB", sizes[1] / MiB);
    snprintf(agroup, sizeof(agroup), "share array %s", adr_device_name(dev));
    bench_note(ctx, agroup, label, array_us[1] / array_us[0], "x");
  }
  struct request q = {'Q', {0}, 0};
  write_all(sv[0], &q, sizeof(q));
  close(sv[0]);
  close(pp[1]);
  adr_share_channel_destroy(ch);
  int status;
  waitpid(pid, &status, 0);
  signal(SIGPIPE, old_pipe);
}
