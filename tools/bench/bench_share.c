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
 * Zero copy shows as an adr time that does not grow with the size; the
 * note row "share 256 MiB / 1 MiB" is that growth (1.0 = none).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "adr/adr.h"
#include "adr/share.h"
#include "bench.h"

#define MiB ((size_t)1 << 20)

void bench_run_share(struct bench_ctx* ctx);

/* One request: 'H' (a handle follows), 'P' (`size` bytes follow on the
 * pipe), 'Q' (quit). */
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

static int peer_loop(int sock, int pipe_rd) {
  struct adr_device* d = share_device();
  if (d == NULL) return 2;
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
  return 0;
}

__attribute__((constructor)) static void share_peer_main(void) {
  const char* spec = getenv("ADR_BENCH_SHARE_PEER");
  if (spec == NULL) return;
  int sock = -1, pipe_rd = -1;
  if (sscanf(spec, "%d,%d", &sock, &pipe_rd) != 2) _exit(2);
  exit(peer_loop(sock, pipe_rd));
}

/* ---- the measurements ---------------------------------------------------- */

struct share_run {
  struct bench_ctx* ctx;
  struct adr_device* dev;
  int sock;
  int pipe_wr;
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

void bench_run_share(struct bench_ctx* ctx) {
  struct adr_device* dev = share_device();
  if (dev == NULL) {
    fprintf(stderr, "share: skipped (no device can share memory)\n");
    return;
  }
  int sv[2], pp[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0 || pipe2(pp, O_CLOEXEC) != 0) {
    fprintf(stderr, "share: skipped (socketpair/pipe: %s)\n", strerror(errno));
    return;
  }
  fcntl(pp[1], F_SETPIPE_SZ, (int)MiB);
  pid_t pid = fork();
  if (pid == 0) {
    char spec[32];
    snprintf(spec, sizeof(spec), "%d,%d", sv[1], pp[0]);
    fcntl(sv[1], F_SETFD, 0);
    fcntl(pp[0], F_SETFD, 0);
    setenv("ADR_BENCH_SHARE_PEER", spec, 1);
    execl("/proc/self/exe", "adr-bench", (char*)NULL);
    _exit(127);
  }
  close(sv[1]);
  close(pp[0]);
  if (pid < 0) {
    close(sv[0]);
    close(pp[1]);
    return;
  }
  size_t sizes[] = {MiB, bench_quick(ctx) ? 64 * MiB : 256 * MiB};
  double adr_us[2] = {0, 0};
  char group[64];
  snprintf(group, sizeof(group), "share %s", adr_device_name(dev));
  for (int i = 0; i < 2; i++) {
    size_t n = sizes[i];
    struct share_run r = {ctx, dev, sv[0], pp[1], NULL, malloc(n), n, 0, 0, true};
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
    adr_free(dev, r.shared, n, NULL, NULL);
    free(r.host);
  }
  if (adr_us[0] > 0 && adr_us[1] > 0) {
    char label[48];
    snprintf(label, sizeof(label), "share %zu MiB / 1 MiB", sizes[1] / MiB);
    bench_note(ctx, group, label, adr_us[1] / adr_us[0], "x");
  }
  struct request q = {'Q', {0}, 0};
  write_all(sv[0], &q, sizeof(q));
  close(sv[0]);
  close(pp[1]);
  int status;
  waitpid(pid, &status, 0);
}
