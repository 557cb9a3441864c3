/* SPDX-License-Identifier: Apache-2.0
 *
 * The other process of the UCX tests (test_ucx.c starts it):
 *   ucx_peer MODE ADDRESS DEVICE
 * connects to the test's listener and plays MODE:
 *   send            sends streams "table", "column" and "dict" from DEVICE
 *   recv            receives the three on DEVICE and checks them
 *   send-fail       sends "table" with a source failing at batch 1 (EIO expected)
 *   send-cancelled  sends "table"; the test cancels it (ECANCELED expected)
 *   send-die        sends "table" and kills itself when batch 2 is produced
 *   recv-die        receives "table" and kills itself after batch 0
 *   send-loop       sends "column" 20 times (the test kills it meanwhile)
 * Exit status: 0 as expected, 1 otherwise (message on stderr).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adr/array.h"
#include "ucx_data.h"

static void die_at_2(int batch) {
  if (batch == 2) raise(SIGKILL);
}

static int send_one(struct adr_ucx_conn* conn, int which, struct adr_device* dev, int fail_at,
                    void (*on_batch)(int), struct adr_error* e) {
  struct ArrowDeviceArrayStream s;
  int st = ucx_test_stream(which, dev, fail_at, on_batch, &s, e);
  if (st) return st;
  struct adr_ucx_send_stats stats = {.struct_size = sizeof(stats)};
  st = adr_ucx_send_stream(conn, &s, &stats, e);
  s.release(&s);
  return st;
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: ucx_peer MODE ADDRESS DEVICE\n");
    return 1;
  }
  const char* mode = argv[1];
  struct adr_error e = {{0}};
  struct adr_device* dev = NULL;
  struct adr_ucx_options opt;
  ucx_test_options(&opt);
  int st = ucx_test_device(argv[3], &dev, &e);
  struct adr_ucx_conn* conn = NULL;
  if (!st) st = adr_ucx_connect(argv[2], &opt, &conn, &e);
  if (st) {
    fprintf(stderr, "ucx_peer %s: %s\n", mode, e.message);
    return 1;
  }
  int expect = 0;
  int batches = 0;
  if (strcmp(mode, "send") == 0) {
    for (int which = 0; which < UCX_TEST_STREAMS && st == 0; which++)
      st = send_one(conn, which, dev, -1, NULL, &e);
  } else if (strcmp(mode, "recv") == 0) {
    for (int which = 0; which < UCX_TEST_STREAMS && st == 0; which++)
      st = ucx_test_receive_all(conn, which, dev, &batches, &e);
  } else if (strcmp(mode, "send-fail") == 0) {
    expect = EIO;
    st = send_one(conn, 0, dev, 1, NULL, &e);
  } else if (strcmp(mode, "send-cancelled") == 0) {
    expect = ECANCELED;
    st = send_one(conn, 0, dev, -1, NULL, &e);
  } else if (strcmp(mode, "send-die") == 0) {
    st = send_one(conn, 0, dev, -1, die_at_2, &e);
  } else if (strcmp(mode, "recv-die") == 0) {
    struct ArrowDeviceArrayStream s;
    st = adr_ucx_receive_stream(conn, dev, &s, &e);
    struct ArrowDeviceArray b;
    if (!st) st = adr_device_array_stream_next(&s, &b, &e);
    if (!st) raise(SIGKILL);
  } else if (strcmp(mode, "send-loop") == 0) {
    for (int i = 0; i < 20 && st == 0; i++) st = send_one(conn, 1, dev, -1, NULL, &e);
  } else {
    fprintf(stderr, "ucx_peer: unknown mode %s\n", mode);
    st = EINVAL;
  }
  int ok = st == expect;
  if (!ok)
    fprintf(stderr, "ucx_peer %s: status %s (expected %s): %s\n", mode, adr_status_name(st),
            adr_status_name(expect), e.message);
  adr_ucx_conn_destroy(conn, NULL);
  return ok ? 0 : 1;
}
