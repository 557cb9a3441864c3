/* SPDX-License-Identifier: Apache-2.0
 *
 * Streams between two processes over UCX (adr/ucx.h, docs/ucx.md):
 *   test_ucx SRC DST [faults|api]
 * This process listens on 127.0.0.1 (port 0) and starts ucx_peer
 * (ADR_UCX_TEST_PEER) which connects to it. The transport is whatever
 * UCX_TLS says (meson registers one run per transport). SRC and DST name
 * the sending and receiving devices ("host" is host memory); each test
 * moves the three test streams (ucx_data.h) one way and checks every
 * byte. With "faults":
 * a failing source, a receiver that cancels, a sender and a receiver
 * that die at chosen points, and a peer killed at several moments; each
 * must end in a clean error on this side with nothing leaked. With "api":
 * argument checks and set-up failures (bad addresses, a port in use,
 * nobody listening, an accept that times out). Exit 77
 * when the UCX module is not built or a device is missing.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "adr/array.h"
#include "ucx_data.h"

extern char** environ;

static const char* src_name;
static const char* dst_name;
static struct adr_device* src_dev;
static struct adr_device* dst_dev;
static struct adr_ucx_listener* listener;

static pid_t spawn_peer(const char* mode, const char* device) {
  char address[64];
  snprintf(address, sizeof(address), "127.0.0.1:%d", adr_ucx_listener_port(listener));
  const char* peer = getenv("ADR_UCX_TEST_PEER");
  assert_non_null(peer);
  char* argv[] = {(char*)peer, (char*)mode, address, (char*)device, NULL};
  pid_t pid;
  assert_int_equal(posix_spawn(&pid, peer, NULL, NULL, argv, environ), 0);
  return pid;
}

/* The peer's exit status (-signal when killed); kills it after 20 s. */
static int wait_peer(pid_t pid) {
  int status = 0;
  for (int i = 0; i < 2000; i++) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    struct timespec ts = {0, 10000000};
    nanosleep(&ts, NULL);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  fail_msg("peer %d did not exit within 20 s", (int)pid);
  return -1;
}

static struct adr_ucx_conn* accept_peer(void) {
  struct adr_ucx_conn* conn = NULL;
  struct adr_error e = {{0}};
  int st = adr_ucx_accept(listener, 15000, &conn, &e);
  if (st) fail_msg("accept: %s", e.message);
  return conn;
}

/* A peer sending in `mode`, accepted, and the stream it sends opened. */
static struct adr_ucx_conn* receive_from(const char* mode, pid_t* pid,
                                         struct ArrowDeviceArrayStream* s) {
  *pid = spawn_peer(mode, src_name);
  struct adr_ucx_conn* conn = accept_peer();
  struct adr_error e = {{0}};
  if (adr_ucx_receive_stream(conn, dst_dev, s, &e) != 0) fail_msg("receive: %s", e.message);
  return conn;
}

static void test_receive(void** state) {
  (void)state;
  pid_t pid = spawn_peer("send", src_name);
  struct adr_ucx_conn* conn = accept_peer();
  struct adr_error e = {{0}};
  int batches = 0;
  int st = ucx_test_receive_all(conn, 0, dst_dev, &batches, &e);
  if (st) fail_msg("stream table: %s", e.message);
  assert_int_equal(batches, ucx_test_batches(0));
  st = ucx_test_receive_all(conn, 1, dst_dev, &batches, &e);
  if (st) fail_msg("stream column: %s", e.message);
  assert_int_equal(batches, ucx_test_batches(1));
  st = ucx_test_receive_all(conn, 2, dst_dev, &batches, &e);
  if (st) fail_msg("stream dict: %s", e.message);
  assert_int_equal(batches, ucx_test_batches(2));
  st = ucx_test_receive_all(conn, 3, dst_dev, &batches, &e);
  if (st) fail_msg("stream dict-shared: %s", e.message);
  assert_int_equal(batches, ucx_test_batches(3));
  assert_int_equal(wait_peer(pid), 0);
  assert_int_equal(adr_ucx_conn_destroy(conn, NULL), 0);
}

/* Sends stream `which`; the sender holds at most one batch from the
 * source beyond max_inflight_batches (2 here, ucx_test_options). */
static int send_stream(struct adr_ucx_conn* conn, int which, int fail_at,
                       struct adr_ucx_send_stats* stats, struct adr_error* e) {
  struct ArrowDeviceArrayStream s;
  ucx_test_reset_live();
  int st = ucx_test_stream(which, src_dev, fail_at, NULL, &s, e);
  if (st) return st;
  st = adr_ucx_send_stream(conn, &s, stats, e);
  s.release(&s);
  if (ucx_test_max_live() > 3) fail_msg("%d batches alive at once", ucx_test_max_live());
  return st;
}

static void test_send(void** state) {
  (void)state;
  pid_t pid = spawn_peer("recv", dst_name);
  struct adr_ucx_conn* conn = accept_peer();
  struct adr_error e = {{0}};
  struct adr_ucx_send_stats stats = {.struct_size = sizeof(stats)};
  int st = send_stream(conn, 0, -1, &stats, &e);
  if (st) fail_msg("stream table: %s", e.message);
  assert_int_equal(stats.batches, ucx_test_batches(0));
  assert_true(stats.max_inflight <= 2);
  /* One protocol message per batch, plus the schema and the end, each at
   * least its framing and an IPC message's continuation and length. */
  assert_int_equal(stats.control_messages, stats.batches + 2);
  assert_true(stats.control_bytes >= stats.control_messages * 24);
  /* Its batches (1000, 0 and 5000 rows) have one shape: the third batch's
   * metadata goes as a patch against the first's (the receiver checks
   * every value); the empty batch's is shorter (flatbuffers leave zero
   * fields out), so there is none to patch. */
  assert_int_equal(stats.patched_messages, 1);
  st = send_stream(conn, 1, -1, &stats, &e);
  if (st) fail_msg("stream column: %s", e.message);
  assert_int_equal(stats.batches, ucx_test_batches(1));
  assert_int_equal(stats.body_bytes, stats.direct_bytes + stats.bounced_bytes);
  assert_true(stats.body_bytes >= 300000 * 8);
  /* Its bodies are too large to ride inline: metadata only. */
  assert_int_equal(stats.control_messages, stats.batches + 2);
  assert_true(stats.control_bytes < stats.control_messages * 1024);
  /* Memory UCX can address goes in place (the column's 2.4 MB in 64 KiB
   * chunks, but for the chunk holding its start); other memory is all
   * staged. */
  bool direct = src_dev == NULL;
  if (src_dev != NULL) {
    struct adr_device_info info = {.struct_size = sizeof(info)};
    assert_int_equal(adr_device_info_get(src_dev, &info, NULL), 0);
    direct = (info.caps & ADR_CAP_HOST_ACCESSIBLE) != 0;
  }
  if (getenv("ADR_UCX_FORCE_BOUNCE") != NULL) direct = false;
  if (direct)
    assert_true(stats.direct_bytes >= 2 * 1024 * 1024);
  else
    assert_int_equal(stats.direct_bytes, 0);
  st = send_stream(conn, 2, -1, &stats, &e);
  if (st) fail_msg("stream dict: %s", e.message);
  assert_int_equal(stats.batches, ucx_test_batches(2));
  /* Its dictionary changes: sent with every batch. */
  assert_int_equal(stats.control_messages, 2 * stats.batches + 2);
  st = send_stream(conn, 3, -1, &stats, &e);
  if (st) fail_msg("stream dict-shared: %s", e.message);
  assert_int_equal(stats.batches, ucx_test_batches(3));
  /* One dictionary in the same memory for every batch: sent once (the
   * receiver checks that every batch decodes with it). */
  assert_int_equal(stats.control_messages, stats.batches + 1 + 2);
  /* The same metadata three times: the patches are empty. A schema, the
   * dictionary's message and the first batch's are whole, the end is 16
   * bytes, and each later batch's message is its header, an empty patch
   * and its body. */
  assert_int_equal(stats.patched_messages, stats.batches - 1);
  assert_int_equal(wait_peer(pid), 0);
  assert_int_equal(adr_ucx_conn_destroy(conn, NULL), 0);
}

static void test_source_error(void** state) {
  (void)state;
  pid_t pid;
  struct ArrowDeviceArrayStream s;
  struct adr_ucx_conn* conn = receive_from("send-fail", &pid, &s);
  struct adr_error e = {{0}};
  struct ArrowDeviceArray b;
  assert_int_equal(adr_device_array_stream_next(&s, &b, &e), 0);
  assert_non_null(b.array.release);
  adr_device_array_release(&b);
  int st = adr_device_array_stream_next(&s, &b, &e);
  assert_int_equal(st, EIO);
  assert_non_null(strstr(e.message, "source failed on purpose"));
  s.release(&s);
  assert_int_equal(wait_peer(pid), 0);
  adr_ucx_conn_destroy(conn, NULL);
}

static void test_receiver_cancels(void** state) {
  (void)state;
  pid_t pid;
  struct ArrowDeviceArrayStream s;
  struct adr_ucx_conn* conn = receive_from("send-cancelled", &pid, &s);
  struct adr_error e = {{0}};
  struct ArrowDeviceArray b;
  assert_int_equal(adr_device_array_stream_next(&s, &b, &e), 0);
  adr_device_array_release(&b);
  s.release(&s); /* before the end: a cancel */
  assert_int_equal(wait_peer(pid), 0);
  /* The connection is done after a cancel. */
  assert_int_equal(adr_ucx_receive_stream(conn, dst_dev, &s, &e), ECONNRESET);
  adr_ucx_conn_destroy(conn, NULL);
}

static void test_sender_dies(void** state) {
  (void)state;
  pid_t pid;
  struct ArrowDeviceArrayStream s;
  struct adr_ucx_conn* conn = receive_from("send-die", &pid, &s);
  struct adr_error e = {{0}};
  int st = 0, got = 0;
  for (int i = 0; i < 10 && st == 0; i++) {
    struct ArrowDeviceArray b;
    st = adr_device_array_stream_next(&s, &b, &e);
    if (st == 0 && b.array.release == NULL) break;
    if (st == 0) got++;
    adr_device_array_release(&b);
  }
  assert_int_equal(st, ECONNRESET);
  assert_true(got <= 2);
  /* The error stays. */
  struct ArrowDeviceArray b;
  assert_int_equal(s.get_next(&s, &b), ECONNRESET);
  assert_non_null(s.get_last_error(&s));
  s.release(&s);
  assert_int_equal(wait_peer(pid), -SIGKILL);
  adr_ucx_conn_destroy(conn, NULL);
}

static void test_receiver_dies(void** state) {
  (void)state;
  pid_t pid = spawn_peer("recv-die", dst_name);
  struct adr_ucx_conn* conn = accept_peer();
  struct adr_error e = {{0}};
  int st = send_stream(conn, 0, -1, NULL, &e);
  assert_int_equal(st, ECONNRESET);
  assert_int_equal(wait_peer(pid), -SIGKILL);
  /* Later calls fail cleanly too. */
  assert_int_equal(send_stream(conn, 1, -1, NULL, &e), ECONNRESET);
  adr_ucx_conn_destroy(conn, NULL);
}

struct killer {
  pid_t pid;
  int delay_ms;
};

static void* kill_later(void* arg) {
  struct killer* k = arg;
  struct timespec ts = {k->delay_ms / 1000, (long)(k->delay_ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
  kill(k->pid, SIGKILL);
  return NULL;
}

/* The sender killed at several moments of a long transfer: each receive
 * ends with the data checked or a clean error, and the loop stops. */
static void test_kill_peer_anytime(void** state) {
  (void)state;
  static const int delays[] = {0, 3, 15, 60};
  for (size_t d = 0; d < sizeof(delays) / sizeof(delays[0]); d++) {
    pid_t pid = spawn_peer("send-loop", src_name);
    struct adr_ucx_conn* conn = accept_peer();
    struct killer k = {pid, delays[d]};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, kill_later, &k), 0);
    struct adr_error e = {{0}};
    int st = 0, batches = 0;
    for (int i = 0; i < 20 && st == 0; i++)
      st = ucx_test_receive_all(conn, 1, dst_dev, &batches, &e);
    if (st != 0 && st != ECONNRESET && st != ETIMEDOUT)
      fail_msg("delay %d ms: %s (%s)", delays[d], adr_status_name(st), e.message);
    pthread_join(t, NULL);
    int peer = wait_peer(pid);
    assert_true(peer == -SIGKILL || (peer == 0 && st == 0));
    adr_ucx_conn_destroy(conn, NULL);
  }
}

/* Arguments and set-up failures, one process. */
static void test_api_errors(void** state) {
  (void)state;
  struct adr_error e = {{0}};
  struct adr_ucx_conn* conn = NULL;
  struct adr_ucx_listener* l = NULL;
  assert_int_equal(adr_ucx_listen(NULL, NULL, &l, &e), EINVAL);
  assert_int_equal(adr_ucx_connect("127.0.0.1:1", NULL, NULL, &e), EINVAL);
  assert_int_equal(adr_ucx_listen("no-port", NULL, &l, &e), EINVAL);
  assert_non_null(strstr(e.message, "HOST:PORT"));
  assert_int_equal(adr_ucx_listen("127.0.0.1:99999", NULL, &l, &e), EINVAL);
  struct adr_ucx_options bad = {.struct_size = sizeof(bad), .bounce_slots = 1};
  assert_int_equal(adr_ucx_listen("127.0.0.1:0", &bad, &l, &e), EINVAL);
  /* The port is taken by the suite's listener. */
  char taken[64];
  snprintf(taken, sizeof(taken), "127.0.0.1:%d", adr_ucx_listener_port(listener));
  assert_int_equal(adr_ucx_listen(taken, NULL, &l, &e), EADDRINUSE);
  /* Nobody listens on a port just freed. */
  struct adr_ucx_options opt;
  ucx_test_options(&opt);
  assert_int_equal(adr_ucx_listen("127.0.0.1:0", &opt, &l, &e), 0);
  char freed[64];
  snprintf(freed, sizeof(freed), "127.0.0.1:%d", adr_ucx_listener_port(l));
  assert_int_equal(adr_ucx_accept(l, 50, &conn, &e), ETIMEDOUT);
  assert_int_equal(adr_ucx_listener_destroy(l, &e), 0);
  assert_int_equal(adr_ucx_connect(freed, &opt, &conn, &e), ECONNREFUSED);
  assert_int_equal(adr_ucx_send_stream(NULL, NULL, NULL, &e), EINVAL);
  assert_int_equal(adr_ucx_receive_stream(NULL, NULL, NULL, &e), EINVAL);
  assert_int_equal(adr_ucx_conn_destroy(NULL, &e), 0);
  assert_int_equal(adr_ucx_listener_destroy(NULL, &e), 0);
  char path[1024];
  assert_int_equal(adr_ucx_available(path, sizeof(path), &e), 0);
  assert_non_null(strstr(path, "libadr_ucx.so"));
  /* Looking for the file finds the one that was loaded. */
  char found[1024];
  assert_int_equal(adr_ucx_module_find(found, sizeof(found), &e), 0);
  assert_string_equal(found, path);
  assert_int_equal(adr_ucx_module_find(NULL, 0, &e), 0);
  char tiny[4];
  assert_int_equal(adr_ucx_module_find(tiny, sizeof(tiny), &e), 0);
  assert_int_equal(strlen(tiny), 3);
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: test_ucx SRC DST [faults]\n");
    return 1;
  }
  src_name = argv[1];
  dst_name = argv[2];
  bool faults = argc > 3 && strcmp(argv[3], "faults") == 0;
  bool api = argc > 3 && strcmp(argv[3], "api") == 0;
  struct adr_error e = {{0}};
  if (adr_ucx_available(NULL, 0, &e) != 0) {
    fprintf(stderr, "skip: %s\n", e.message);
    return 77;
  }
  if (ucx_test_device(src_name, &src_dev, &e) != 0 ||
      ucx_test_device(dst_name, &dst_dev, &e) != 0) {
    fprintf(stderr, "skip: %s\n", e.message);
    return 77;
  }
  struct adr_ucx_options opt;
  ucx_test_options(&opt);
  if (adr_ucx_listen("127.0.0.1:0", &opt, &listener, &e) != 0) {
    fprintf(stderr, "listen: %s\n", e.message);
    return 1;
  }
  const struct CMUnitTest transfer[] = {
      cmocka_unit_test(test_receive),
      cmocka_unit_test(test_send),
  };
  const struct CMUnitTest fault[] = {
      cmocka_unit_test(test_source_error),      cmocka_unit_test(test_receiver_cancels),
      cmocka_unit_test(test_sender_dies),       cmocka_unit_test(test_receiver_dies),
      cmocka_unit_test(test_kill_peer_anytime),
  };
  const struct CMUnitTest api_tests[] = {cmocka_unit_test(test_api_errors)};
  int failed = api      ? cmocka_run_group_tests_name("ucx api", api_tests, NULL, NULL)
               : faults ? cmocka_run_group_tests_name("ucx faults", fault, NULL, NULL)
                        : cmocka_run_group_tests_name("ucx transfer", transfer, NULL, NULL);
  int st = adr_ucx_listener_destroy(listener, &e);
  if (st) {
    fprintf(stderr, "listener: %s\n", e.message);
    failed++;
  }
  return failed ? 1 : 0;
}
