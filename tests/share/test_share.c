/* SPDX-License-Identifier: Apache-2.0
 *
 * Sharing between two processes (adr/share.h, docs/sharing.md) on the
 * device ADR_DEVICE names: the test forks and executes itself as the peer
 * ("child SCENARIO SOCKET PIPE"), connected by a socketpair; the pipe
 * tells the parent the child reached a point. Bytes are checked on both
 * sides, writes of one side are checked on the other, and the peer is
 * killed at several points: afterwards the parent's descriptors
 * (/proc/self/fd) and the simulators' live allocations are what they were
 * before. Every wait is bounded; a child left behind is killed.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "adr/adr.h"
#include "adr/array.h"
#include "adr/memory.h"
#include "adr/share.h"
#include "sample_table.h"

#define WAIT_MS 20000
#define BUF_SIZE ((size_t)(1u << 20) + 4160)
#define N_VALUES 4096

static const char* self_path;

/* ---- helpers -------------------------------------------------------------- */

static struct adr_device* device(void) {
  struct adr_device* d = NULL;
  struct adr_error e;
  int st = adr_device_default(&d, &e);
  if (st) fail_msg("no device: %s", e.message);
  return d;
}

static uint32_t caps_of(struct adr_device* d) {
  uint32_t caps = 0;
  struct adr_error e;
  if (adr_share_caps(d, &caps, &e) != 0) fail_msg("adr_share_caps: %s", e.message);
  return caps;
}

/* Open descriptors, without those a GPU driver opens on first use and
 * keeps for the process (/dev/nvidia*: not adr's). With `list`, their
 * targets are appended to it (for a failure message). */
static int count_fds_list(char* list, size_t cap) {
  DIR* d = opendir("/proc/self/fd");
  int n = 0, self = d != NULL ? dirfd(d) : -1;
  if (d == NULL) return -1;
  struct dirent* ent;
  while ((ent = readdir(d)) != NULL) {
    if (ent->d_name[0] == '.' || atoi(ent->d_name) == self) continue;
    char path[300], target[256];
    snprintf(path, sizeof(path), "/proc/self/fd/%s", ent->d_name);
    ssize_t len = readlink(path, target, sizeof(target) - 1);
    target[len > 0 ? len : 0] = '\0';
    if (strncmp(target, "/dev/nvidia", 11) == 0) continue;
    if (list != NULL) {
      size_t used = strlen(list);
      snprintf(list + used, cap - used, "%s%s=%s", used ? " " : "", ent->d_name, target);
    }
    n++;
  }
  closedir(d);
  return n;
}

static int count_fds(void) { return count_fds_list(NULL, 0); }

/* Staged sends copy into the cpu backend's shareable memory: a run that
 * excludes the cpu backend (ADR_BACKENDS=cuda) cannot stage. */
static bool staging_possible(void) {
  struct adr_device* cpu = NULL;
  struct adr_error e;
  if (adr_device_get(ARROW_DEVICE_CPU, 0, &cpu, &e) == 0) return true;
  printf("not run here: a staged send needs the cpu backend: %s\n", e.message);
  return false;
}

/* The simulators' live-allocation counters (0 on other devices). */
static unsigned long long sim_live(void) {
  static const char* const libs[][2] = {
      {"libcuda.so.1", "adr_sim_cuda_live_allocations"},
      {"libamdhip64.so.6", "adr_sim_hip_live_allocations"},
  };
  unsigned long long n = 0;
  for (size_t i = 0; i < 2; i++) {
    void* h = dlopen(libs[i][0], RTLD_NOW | RTLD_NOLOAD);
    if (h == NULL) continue;
    unsigned long long (*fn)(void) = (unsigned long long (*)(void))dlsym(h, libs[i][1]);
    if (fn != NULL) n += fn();
    dlclose(h);
  }
  return n;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

struct peer {
  pid_t pid;
  int sock;     /* the parent's end */
  int progress; /* read end of the child's progress pipe */
};

static void spawn(const char* scenario, struct peer* p) {
  int sv[2], pp[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  assert_int_equal(pipe2(pp, O_CLOEXEC), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    char s[16], w[16];
    snprintf(s, sizeof(s), "%d", sv[1]);
    snprintf(w, sizeof(w), "%d", pp[1]);
    fcntl(sv[1], F_SETFD, 0);
    fcntl(pp[1], F_SETFD, 0);
    execl(self_path, self_path, "child", scenario, s, w, (char*)NULL);
    _exit(127);
  }
  close(sv[1]);
  close(pp[1]);
  p->pid = pid;
  p->sock = sv[0];
  p->progress = pp[0];
}

/* Waits for the child's progress byte; 0 when it came. */
static int wait_progress(struct peer* p) {
  struct pollfd f = {p->progress, POLLIN, 0};
  if (poll(&f, 1, WAIT_MS) != 1) return ETIMEDOUT;
  char c;
  return read(p->progress, &c, 1) == 1 ? 0 : EPIPE;
}

/* The child's exit status (killing it after WAIT_MS). */
static int reap(struct peer* p) {
  int status = 0;
  for (int i = 0; i < WAIT_MS / 10; i++) {
    pid_t r = waitpid(p->pid, &status, WNOHANG);
    if (r == p->pid) break;
    if (i == WAIT_MS / 10 - 1) {
      kill(p->pid, SIGKILL);
      waitpid(p->pid, &status, 0);
      status = -1;
    }
    sleep_ms(10);
  }
  if (p->progress >= 0) close(p->progress);
  p->progress = -1;
  return status;
}

static void kill_peer(struct peer* p) {
  kill(p->pid, SIGKILL);
}

/* Bytes i*7+seed. */
static void pattern(uint8_t* b, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) b[i] = (uint8_t)(i * 7u + seed);
}

static void put(struct adr_device* d, void* dst, const void* src, size_t n) {
  struct adr_error e;
  if (adr_copy(d, dst, NULL, src, n, NULL, &e) != 0) fail_msg("adr_copy up: %s", e.message);
}

static void get(struct adr_device* d, void* dst, const void* src, size_t n) {
  struct adr_error e;
  if (adr_copy(NULL, dst, d, src, n, NULL, &e) != 0) fail_msg("adr_copy down: %s", e.message);
}

/* ---- arrays --------------------------------------------------------------- */

/* An int64 column with validity (every 5th null) on `d`: in shareable
 * memory, or in ordinary memory (sent staged). *out_values is the data
 * buffer's address. */
static void make_array(struct adr_device* d, bool shareable, struct ArrowSchema* schema,
                       struct ArrowDeviceArray* out, void** out_values) {
  struct adr_error e;
  assert_int_equal(adr_schema_init(schema, "l", "x", ARROW_FLAG_NULLABLE, 0, &e), 0);
  struct ArrowArray a;
  assert_int_equal(adr_array_init(d, 2, 0, &a, &e), 0);
  size_t vsize = N_VALUES * sizeof(int64_t), bsize = N_VALUES / 8;
  void *values = NULL, *bits = NULL;
  if (shareable) {
    if (adr_share_alloc(d, vsize, 0, &values, &e) != 0) fail_msg("%s", e.message);
    assert_int_equal(adr_share_alloc(d, bsize, 0, &bits, &e), 0);
    assert_int_equal(adr_array_adopt_buffer(&a, 1, values, vsize, &e), 0);
    assert_int_equal(adr_array_adopt_buffer(&a, 0, bits, bsize, &e), 0);
  } else {
    assert_int_equal(adr_array_alloc_buffer(&a, 1, vsize, NULL, &values, &e), 0);
    assert_int_equal(adr_array_alloc_buffer(&a, 0, bsize, NULL, &bits, &e), 0);
  }
  /* The values are queued on the default stream (the host source must
   * outlive the copy: static) over stale bytes written first, so a reader
   * that does not wait for the array's event sees the stale ones
   * (ADR_SIM_DELAY_US holds the simulators' copies back). */
  static int64_t hv[N_VALUES];
  int64_t* stale = malloc(vsize);
  memset(stale, 0x11, vsize);
  put(d, values, stale, vsize);
  free(stale);
  uint8_t* hb = calloc(1, bsize);
  int64_t nulls = 0;
  for (int64_t i = 0; i < N_VALUES; i++) {
    hv[i] = i * 3 - 7;
    if (i % 5 == 0)
      nulls++;
    else
      hb[i / 8] |= (uint8_t)(1u << (i % 8));
  }
  put(d, bits, hb, bsize);
  free(hb);
  if (adr_copy(d, values, NULL, hv, vsize, adr_stream_default(d), &e) != 0)
    fail_msg("adr_copy on the stream: %s", e.message);
  a.length = N_VALUES;
  a.null_count = nulls;
  /* On the default stream: CUDA and HIP arrays carry a sync event, which
   * travels as an IPC event handle. */
  assert_int_equal(adr_device_array_init(d, &a, adr_stream_default(d), out, &e), 0);
  *out_values = values;
}

/* Checks the received array's values on the host (a deep copy). */
static int check_array(const struct ArrowSchema* schema, const struct ArrowDeviceArray* a) {
  struct adr_error e;
  struct ArrowDeviceArray host;
  if (strcmp(schema->format, "l") != 0 || strcmp(schema->name, "x") != 0) return 1;
  if (a->array.length != N_VALUES) return 2;
  struct adr_device* dev = NULL;
  if (adr_device_array_device(a, &dev, &e) != 0) return 6;
  uint32_t caps = 0;
  adr_share_caps(dev, &caps, NULL);
  /* The sender's event came along where the backend shares events. */
  if ((caps & ADR_SHARE_CAP_IMPORT_EVENT) && a->device_type != ARROW_DEVICE_CPU &&
      a->sync_event == NULL)
    return 7;
  if (adr_device_array_deep_copy(schema, a, NULL, NULL, &host, NULL, &e) != 0) {
    fprintf(stderr, "child: deep copy: %s\n", e.message);
    return 3;
  }
  int bad = 0;
  const int64_t* v = host.array.buffers[1];
  const uint8_t* b = host.array.buffers[0];
  int64_t off = host.array.offset;
  for (int64_t i = 0; i < N_VALUES && !bad; i++) {
    bool valid = (b[(i + off) / 8] >> ((i + off) % 8)) & 1;
    if (valid != (i % 5 != 0)) bad = 4;
    if (valid && v[i + off] != i * 3 - 7) bad = 5;
  }
  adr_device_array_release(&host);
  return bad;
}

/* ---- the child ------------------------------------------------------------- */

static void progress(int fd) {
  char c = 'x';
  if (write(fd, &c, 1) != 1) _exit(90);
}

/* Blocks until the parent kills it (bounded: exits 0 after WAIT_MS). */
static int park(void) {
  sleep_ms(WAIT_MS);
  return 0;
}

static int child(const char* scenario, int sock, int prog) {
  struct adr_device* d = NULL;
  struct adr_error e;
  if (adr_device_default(&d, &e) != 0) {
    fprintf(stderr, "child: %s\n", e.message);
    return 10;
  }
  if (strcmp(scenario, "buffer") == 0) {
    struct adr_share_handle h;
    int fd = -1;
    void* p = NULL;
    if (adr_share_handle_recv(sock, WAIT_MS, &h, &fd, &e) != 0 ||
        adr_share_import(d, &h, fd, &p, &e) != 0) {
      fprintf(stderr, "child: %s\n", e.message);
      return 11;
    }
    if (fd >= 0) close(fd);
    uint8_t* want = malloc(BUF_SIZE);
    uint8_t* got = malloc(BUF_SIZE);
    pattern(want, BUF_SIZE, 1);
    get(d, got, p, BUF_SIZE);
    int bad = memcmp(want, got, BUF_SIZE) != 0;
    /* The child's write, for the parent to see. */
    if (adr_memset(d, p, 0x5a, 4096, NULL, &e) != 0) bad = 2;
    free(want);
    free(got);
    progress(prog);
    char c;
    if (read(sock, &c, 1) != 1) bad = 3; /* the parent read it */
    if (adr_share_close(d, p, &e) != 0) bad = 4;
    return bad ? 12 + bad : 0;
  }
  struct adr_share_channel* ch = NULL;
  if (adr_share_channel_create(sock, &ch, &e) != 0) return 20;
  int rc = 0;
  if (strcmp(scenario, "array") == 0 || strcmp(scenario, "kill-importer") == 0) {
    struct ArrowSchema s;
    struct ArrowDeviceArray a;
    if (adr_share_array_recv(ch, WAIT_MS, &s, &a, &e) != 0) {
      fprintf(stderr, "child: %s\n", e.message);
      rc = 21;
    } else {
      rc = check_array(&s, &a);
      if (rc == 0 && strcmp(scenario, "array") == 0) {
        /* Write into the first buffer: zero copy means the parent sees it. */
        int64_t v = 424242;
        struct adr_device* ad = NULL;
        if (adr_device_array_device(&a, &ad, &e) != 0 ||
            adr_copy(ad, (void*)a.array.buffers[1], NULL, &v, sizeof(v), NULL, &e) != 0)
          rc = 30;
      }
      progress(prog);
      if (strcmp(scenario, "kill-importer") == 0) park();
      /* Wait for the parent's go before releasing. */
      struct ArrowSchema s2;
      struct ArrowDeviceArray a2;
      if (adr_share_array_recv(ch, WAIT_MS, &s2, &a2, &e) == 0) {
        adr_device_array_release(&a2);
        s2.release(&s2);
      }
      adr_device_array_release(&a);
      s.release(&s);
    }
  } else if (strcmp(scenario, "table") == 0) {
    /* Every column type of the sample table, sliced, staged by the sender. */
    struct ArrowSchema s, ws;
    struct ArrowDeviceArray a, want;
    if (adr_share_array_recv(ch, WAIT_MS, &s, &a, &e) != 0) {
      fprintf(stderr, "child: %s\n", e.message);
      rc = 50;
    } else {
      bool equal = false;
      struct adr_error diff = {{0}};
      rc = fixture_sample_table(1000, &ws, &want, &e) != 0 ? 51 : 0;
      if (rc == 0) {
        want.array.offset = 13; /* the sender's slice */
        want.array.length = 1000 - 13 - 5;
      }
      if (rc == 0 && (strcmp(s.format, "+s") != 0 || s.n_children != ws.n_children ||
                      strcmp(s.children[1]->name, "name") != 0))
        rc = 52;
      if (rc == 0 && adr_device_array_equal(&s, &a, &want, &equal, &diff, &e) != 0) {
        fprintf(stderr, "child: %s\n", e.message);
        rc = 53;
      }
      if (rc == 0 && !equal) {
        fprintf(stderr, "child: the table differs: %s\n", diff.message);
        rc = 54;
      }
      if (ws.release) ws.release(&ws);
      adr_device_array_release(&want);
      adr_device_array_release(&a);
      s.release(&s);
    }
  } else if (strcmp(scenario, "kill-exporter") == 0) {
    struct ArrowSchema s;
    struct ArrowDeviceArray a;
    void* values;
    uint32_t caps = 0;
    adr_share_caps(d, &caps, NULL);
    make_array(d, (caps & ADR_SHARE_CAP_EXPORT_MEMORY) != 0, &s, &a, &values);
    if (adr_share_array_send(ch, &s, &a, &e) != 0) {
      fprintf(stderr, "child: %s\n", e.message);
      rc = 40;
    }
    s.release(&s);
    progress(prog);
    park();
  } else if (strcmp(scenario, "garbage") == 0) {
    /* Not an array message, with a descriptor, then a torn message. */
    int fd = memfd_create("garbage", MFD_CLOEXEC);
    struct adr_share_handle h;
    memset(&h, 0, sizeof(h));
    h.fd_count = 1;
    adr_share_handle_send(sock, &h, fd, NULL);
    close(fd);
    progress(prog);
    park();
  } else if (strcmp(scenario, "torn") == 0) {
    /* Half a message header, then the end. */
    char junk[12] = "ADRM-torn...";
    if (write(sock, junk, sizeof(junk)) != (ssize_t)sizeof(junk)) rc = 60;
    _exit(rc);
  } else if (strcmp(scenario, "idle") == 0) {
    progress(prog);
    park();
  }
  adr_share_channel_destroy(ch);
  return rc;
}

/* ---- the tests ------------------------------------------------------------- */

struct baseline {
  int fds;
  unsigned long long sim;
};

/* Cached pool memory is not a leak: give it back before counting. */
static void trim(void) {
  struct adr_device* cpu = NULL;
  adr_memory_trim(device(), NULL, NULL);
  /* Stream-ordered frees (cuMemFreeAsync) complete on the stream. */
  adr_stream_synchronize(adr_stream_default(device()), NULL);
  if (adr_device_get(ARROW_DEVICE_CPU, 0, &cpu, NULL) == 0) adr_memory_trim(cpu, NULL, NULL);
}

static void baseline_take(struct baseline* b) {
  /* Caches made on first use (the CUDA/HIP backends' pinned staging
   * buffers for pageable copies) live as long as the device: warm them. */
  static bool warm;
  if (!warm) {
    struct adr_device* d = device();
    void* p = NULL;
    uint8_t* h = malloc(BUF_SIZE);
    memset(h, 0, BUF_SIZE);
    if (adr_alloc(d, BUF_SIZE, 0, NULL, &p, NULL) == 0) {
      put(d, p, h, BUF_SIZE);
      get(d, h, p, BUF_SIZE);
      adr_free(d, p, BUF_SIZE, NULL, NULL);
    }
    free(h);
    /* The driver's own IPC resources (made on the first export of memory
     * or of an interprocess event, kept for the process) are not leaks. */
    uint32_t caps = caps_of(d);
    if (caps & ADR_SHARE_CAP_EXPORT_MEMORY) {
      struct adr_share_handle sh;
      int fd = -1;
      if (adr_share_alloc(d, 4096, 0, &p, NULL) == 0) {
        if (adr_share_export(d, p, &sh, &fd, NULL) == 0 && fd >= 0) close(fd);
        adr_free(d, p, 4096, NULL, NULL);
      }
    }
    if (caps & ADR_SHARE_CAP_EXPORT_EVENT) {
      struct adr_event* ev = NULL;
      struct adr_share_handle sh;
      int fd = -1;
      if (adr_share_event_export(adr_stream_default(d), &ev, &sh, &fd, NULL) == 0) {
        if (fd >= 0) close(fd);
        adr_event_synchronize(ev, NULL);
        adr_event_destroy(ev, NULL);
      }
    }
    warm = true;
  }
  trim();
  b->fds = count_fds();
  b->sim = sim_live();
}

/* Leaks, after both sides are done: descriptors and simulator allocations
 * back to what they were. */
static void baseline_check(const struct baseline* b) {
  trim();
  char list[4096] = "";
  int fds = count_fds_list(list, sizeof(list));
  if (fds != b->fds) fail_msg("%d descriptors open, %d before: %s", fds, b->fds, list);
  assert_int_equal(sim_live(), b->sim);
}

static void test_buffer(void** state) {
  (void)state;
  struct adr_device* d = device();
  struct adr_error e;
  void* p = NULL;
  if (!(caps_of(d) & ADR_SHARE_CAP_EXPORT_MEMORY)) {
    /* OpenCL: no handle; the message says so and arrays go staged. */
    assert_int_equal(adr_share_alloc(d, 4096, 0, &p, &e), ENOTSUP);
    assert_non_null(strstr(e.message, "shareable"));
    return;
  }
  struct baseline b;
  baseline_take(&b);
  assert_int_equal(adr_share_alloc(d, BUF_SIZE, 0, &p, &e), 0);
  uint8_t* host = malloc(BUF_SIZE);
  pattern(host, BUF_SIZE, 1);
  put(d, p, host, BUF_SIZE);
  /* An address inside the allocation exports with its offset. */
  struct adr_share_handle h;
  int fd = -1;
  assert_int_equal(adr_share_export(d, (uint8_t*)p + 64, &h, &fd, &e), 0);
  assert_int_equal(h.offset, 64);
  if (fd >= 0) close(fd);
  assert_int_equal(adr_share_export(d, p, &h, &fd, &e), 0);
  assert_int_equal(h.magic, ADR_SHARE_MAGIC);
  assert_int_equal(h.object, ADR_SHARE_OBJECT_MEMORY);
  /* Ordinary memory is refused with a message that says what to do. */
  void* plain = NULL;
  assert_int_equal(adr_alloc(d, 4096, 0, NULL, &plain, &e), 0);
  int fd2 = -1;
  struct adr_share_handle h2;
  assert_int_equal(adr_share_export(d, plain, &h2, &fd2, &e), EINVAL);
  assert_non_null(strstr(e.message, "adr_share_alloc"));
  assert_int_equal(adr_free(d, plain, 4096, NULL, &e), 0);

  struct peer peer;
  spawn("buffer", &peer);
  assert_int_equal(adr_share_handle_send(peer.sock, &h, fd, &e), 0);
  if (fd >= 0) close(fd);
  assert_int_equal(wait_progress(&peer), 0);
  /* The child's memset is visible here. */
  get(d, host, p, 8192);
  for (size_t i = 0; i < 4096; i++) assert_int_equal(host[i], 0x5a);
  uint8_t want[4096];
  pattern(want, sizeof(want), 1);
  assert_memory_equal(host + 4096, want + 4096 % sizeof(want), 4096);
  char c = 'q';
  assert_int_equal(write(peer.sock, &c, 1), 1);
  assert_int_equal(reap(&peer), 0);
  close(peer.sock);
  free(host);
  assert_int_equal(adr_free(d, p, BUF_SIZE, NULL, &e), 0);
  baseline_check(&b);
}

/* Handles that cannot be imported are refused with a message, nothing
 * mapped; a process cannot open its own CUDA/HIP handle (the drivers'
 * rule, kept by the simulators). */
static void test_bad_handles(void** state) {
  (void)state;
  struct adr_device* d = device();
  struct adr_error e;
  if (!(caps_of(d) & ADR_SHARE_CAP_EXPORT_MEMORY)) {
    struct adr_share_handle h;
    int fd;
    assert_int_equal(adr_share_export(d, &e, &h, &fd, &e), ENOTSUP);
    return;
  }
  struct baseline b;
  baseline_take(&b);
  void* p = NULL;
  assert_int_equal(adr_share_alloc(d, 4096, 0, &p, &e), 0);
  struct adr_share_handle h, bad;
  int fd = -1;
  void* q = NULL;
  assert_int_equal(adr_share_export(d, p, &h, &fd, &e), 0);
  bad = h;
  bad.magic ^= 1;
  assert_int_equal(adr_share_import(d, &bad, fd, &q, &e), EINVAL);
  assert_non_null(strstr(e.message, "magic"));
  bad = h;
  bad.version = 99;
  assert_int_equal(adr_share_import(d, &bad, fd, &q, &e), EINVAL);
  bad = h;
  bad.device_type = 999;
  assert_int_equal(adr_share_import(d, &bad, fd, &q, &e), EINVAL);
  bad = h;
  bad.object = ADR_SHARE_OBJECT_EVENT;
  assert_int_equal(adr_share_import(d, &bad, fd, &q, &e), EINVAL);
  if (h.fd_count == 1) {
    assert_int_equal(adr_share_import(d, &h, -1, &q, &e), EBADF);
  } else {
    /* CUDA/HIP: not in the exporting process. */
    assert_int_not_equal(adr_share_import(d, &h, -1, &q, &e), 0);
  }
  assert_int_equal(adr_share_close(d, p, &e), EINVAL); /* not an import */
  if (fd >= 0) close(fd);
  assert_int_equal(adr_free(d, p, 4096, NULL, &e), 0);
  baseline_check(&b);
}

/* A peer running `scenario` with a channel to it, after the baseline. */
static struct adr_share_channel* connect_peer(const char* scenario, struct peer* p,
                                              struct baseline* b) {
  struct adr_error e;
  baseline_take(b);
  spawn(scenario, p);
  struct adr_share_channel* ch = NULL;
  if (adr_share_channel_create(p->sock, &ch, &e) != 0) fail_msg("channel: %s", e.message);
  return ch;
}

/* Sends the int64 column, in shareable memory where the device has it. */
static void send_column(struct adr_share_channel* ch) {
  struct adr_device* d = device();
  struct adr_error e;
  struct ArrowSchema s;
  struct ArrowDeviceArray a;
  void* values;
  make_array(d, (caps_of(d) & ADR_SHARE_CAP_EXPORT_MEMORY) != 0, &s, &a, &values);
  if (adr_share_array_send(ch, &s, &a, &e) != 0) fail_msg("send: %s", e.message);
  s.release(&s);
}

/* Waits until the peer released everything, then closes the channel and
 * checks for leaks. */
static void finish(struct adr_share_channel* ch, const struct baseline* b) {
  for (int i = 0; i < WAIT_MS / 10 && adr_share_channel_outstanding(ch) != 0; i++) sleep_ms(10);
  assert_int_equal(adr_share_channel_outstanding(ch), 0);
  adr_share_channel_destroy(ch);
  baseline_check(b);
}

/* Sends an array, the child checks it, writes into it and releases it. */
static void run_array(bool shareable) {
  struct adr_device* d = device();
  struct adr_error e;
  bool zero_copy = shareable && (caps_of(d) & ADR_SHARE_CAP_EXPORT_MEMORY);
  struct baseline b;
  struct peer peer;
  struct adr_share_channel* ch = connect_peer("array", &peer, &b);
  /* SO_PEERCRED of a socketpair names the process that made it. */
  assert_int_equal(adr_share_channel_peer_pid(ch), getpid());
  struct ArrowSchema s;
  struct ArrowDeviceArray a;
  void* values = NULL;
  make_array(d, zero_copy, &s, &a, &values);
  if (adr_share_array_send(ch, &s, &a, &e) != 0) fail_msg("send: %s", e.message);
  assert_null(a.array.release); /* moved */
  assert_int_equal(wait_progress(&peer), 0);
  assert_int_equal(adr_share_channel_outstanding(ch), 1);
  if (zero_copy) {
    int64_t v = 0;
    get(d, &v, values, sizeof(v));
    assert_int_equal(v, 424242);
  }
  /* The go: a second array, which the child releases with the first. */
  struct ArrowSchema s2;
  struct ArrowDeviceArray a2;
  void* v2;
  make_array(d, zero_copy, &s2, &a2, &v2);
  assert_int_equal(adr_share_array_send(ch, &s2, &a2, &e), 0);
  s2.release(&s2);
  s.release(&s);
  assert_int_equal(reap(&peer), 0);
  finish(ch, &b);
}

static void test_array_zero_copy(void** state) {
  (void)state;
  run_array(true);
}

static void test_array_staged(void** state) {
  (void)state;
  if (!staging_possible()) return;
  run_array(false);
}

/* The sample table (every column type), sliced, on the device: staged. */
static void test_table(void** state) {
  (void)state;
  if (!staging_possible()) return;
  struct adr_device* d = device();
  struct adr_error e;
  struct baseline b;
  struct peer peer;
  struct adr_share_channel* ch = connect_peer("table", &peer, &b);
  struct ArrowSchema s;
  struct ArrowDeviceArray host, dev_array;
  assert_int_equal(fixture_sample_table(1000, &s, &host, &e), 0);
  assert_int_equal(adr_device_array_deep_copy(&s, &host, d, NULL, &dev_array, NULL, &e), 0);
  adr_device_array_release(&host);
  /* A slice of the whole table: [13, 995). */
  dev_array.array.offset = 13;
  dev_array.array.length = 1000 - 13 - 5;
  dev_array.array.null_count = 0;
  if (adr_share_array_send(ch, &s, &dev_array, &e) != 0) fail_msg("send: %s", e.message);
  s.release(&s);
  assert_int_equal(reap(&peer), 0);
  finish(ch, &b);
}

/* The importer dies holding the array: the sender releases it. */
static void test_kill_importer(void** state) {
  (void)state;
  if (!staging_possible()) return;
  struct adr_device* d = device();
  struct adr_error e;
  struct baseline b;
  struct peer peer;
  struct adr_share_channel* ch = connect_peer("kill-importer", &peer, &b);
  send_column(ch);
  assert_int_equal(wait_progress(&peer), 0);
  assert_int_equal(adr_share_channel_outstanding(ch), 1);
  kill_peer(&peer);
  reap(&peer);
  for (int i = 0; i < WAIT_MS / 10 && adr_share_channel_outstanding(ch) != 0; i++) sleep_ms(10);
  assert_int_equal(adr_share_channel_outstanding(ch), 0);
  /* Sending now is a clean EPIPE, and the caller keeps the array. */
  struct ArrowSchema s;
  struct ArrowDeviceArray a;
  void* values;
  make_array(d, false, &s, &a, &values);
  assert_int_equal(adr_share_array_send(ch, &s, &a, &e), EPIPE);
  assert_non_null(a.array.release);
  adr_device_array_release(&a);
  s.release(&s);
  finish(ch, &b);
}

/* The importer dies before it received anything. */
static void test_kill_before_receive(void** state) {
  (void)state;
  struct baseline b;
  struct peer peer;
  struct adr_share_channel* ch = connect_peer("idle", &peer, &b);
  assert_int_equal(wait_progress(&peer), 0);
  send_column(ch);
  kill_peer(&peer);
  reap(&peer);
  finish(ch, &b);
}

/* A peer that breaks the protocol is treated as gone: recv says why,
 * the descriptors that came with the bad message are closed. */
static void test_bad_peer(void** state) {
  (void)state;
  const char* scenarios[] = {"garbage", "torn"};
  for (int i = 0; i < 2; i++) {
    struct adr_error e;
    struct baseline b;
    struct peer peer;
    struct adr_share_channel* ch = connect_peer(scenarios[i], &peer, &b);
    struct ArrowSchema s;
    struct ArrowDeviceArray a;
    assert_int_equal(adr_share_array_recv(ch, WAIT_MS, &s, &a, &e), EPIPE);
    if (i == 0) {
      assert_non_null(strstr(e.message, "EPROTO"));
      kill_peer(&peer);
    }
    reap(&peer);
    finish(ch, &b);
  }
}

/* The exporter dies while this side holds its array: it stays readable
 * where the kernel keeps the pages (fd-based kinds), and releasing it
 * leaks nothing. */
static void test_kill_exporter(void** state) {
  (void)state;
  struct adr_error e;
  struct baseline b;
  struct peer peer;
  struct adr_share_channel* ch = connect_peer("kill-exporter", &peer, &b);
  struct ArrowSchema s;
  struct ArrowDeviceArray a;
  if (adr_share_array_recv(ch, WAIT_MS, &s, &a, &e) != 0) fail_msg("recv: %s", e.message);
  assert_int_equal(check_array(&s, &a), 0);
  assert_int_equal(wait_progress(&peer), 0);
  kill_peer(&peer);
  reap(&peer);
  struct ArrowSchema s2;
  struct ArrowDeviceArray a2;
  assert_int_equal(adr_share_array_recv(ch, WAIT_MS, &s2, &a2, &e), EPIPE);
  adr_device_array_release(&a);
  s.release(&s);
  adr_share_channel_destroy(ch);
  baseline_check(&b);
}

int main(int argc, char** argv) {
  self_path = argv[0];
  if (argc == 5 && strcmp(argv[1], "child") == 0)
    return child(argv[2], atoi(argv[3]), atoi(argv[4]));
  signal(SIGPIPE, SIG_IGN);
  /* The gpu run (a real NVIDIA GPU) skips without one, unless a GPU check
   * requires the device (scripts/gpu_check.py). */
  struct adr_device* d = NULL;
  struct adr_error e;
  if (adr_device_default(&d, &e) != 0) {
    if (getenv("ADR_CONFORMANCE_REQUIRE") != NULL) {
      fprintf(stderr, "test_share: no device: %s\n", e.message);
      return 1;
    }
    printf("test_share: skipped: no device: %s\n", e.message);
    return 77;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_buffer),
      cmocka_unit_test(test_bad_handles),
      cmocka_unit_test(test_array_zero_copy),
      cmocka_unit_test(test_array_staged),
      cmocka_unit_test(test_table),
      cmocka_unit_test(test_kill_importer),
      cmocka_unit_test(test_kill_before_receive),
      cmocka_unit_test(test_kill_exporter),
      cmocka_unit_test(test_bad_peer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
