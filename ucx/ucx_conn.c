/* SPDX-License-Identifier: Apache-2.0
 *
 * Connections: UCX contexts and workers, the listener, the connector, the
 * handshake, the progress loop and the error paths.
 *
 * The connector has a worker of its own; a listener's worker is shared by
 * the connections it accepts, so every tag carries the receiving side's
 * connection id (ucx_internal.h). The handshake is one HELLO message from
 * the listener telling the connector the id to put in its tags; the
 * listener needs nothing back (the connector's worker is its own, id 0).
 *
 * Peer failures come from UCX's peer error handling mode
 * (UCP_ERR_HANDLING_MODE_PEER): the endpoint's error handler records the
 * status, and every wait checks it, so a dead peer is ECONNRESET on this
 * side whatever it was doing. A failed or cancelled transfer force-closes
 * the endpoint, which completes every outstanding send, and cancels the
 * posted receives, so all requests are freed before the call returns.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "ucx_internal.h"

double ucx_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int ucx_options_resolve(const struct adr_ucx_options* options, struct adr_ucx_options* out,
                        struct adr_error* error) {
  memset(out, 0, sizeof(*out));
  out->struct_size = sizeof(*out);
  if (options != NULL) {
    if (options->struct_size < offsetof(struct adr_ucx_options, reserved))
      return adr_error_set(error, EINVAL, "[adr_ucx] options->struct_size %u is too small",
                           options->struct_size);
    out->max_inflight_batches = options->max_inflight_batches;
    out->chunk_size = options->chunk_size;
    out->bounce_slots = options->bounce_slots;
    out->timeout_ms = options->timeout_ms;
    if (options->struct_size >= offsetof(struct adr_ucx_options, reserved32))
      out->flags = options->flags;
  }
  if (out->max_inflight_batches == 0) out->max_inflight_batches = 2;
  if (out->max_inflight_batches > 1024)
    return adr_error_set(error, EINVAL, "[adr_ucx] max_inflight_batches %u is above 1024",
                         out->max_inflight_batches);
  if (out->chunk_size == 0) out->chunk_size = 8u << 20;
  if (out->chunk_size > (1ull << 32))
    return adr_error_set(error, EINVAL, "[adr_ucx] chunk_size %llu is above 4 GiB",
                         (unsigned long long)out->chunk_size);
  out->chunk_size = (out->chunk_size + 65535) & ~(uint64_t)65535;
  if (out->bounce_slots == 0) out->bounce_slots = 2;
  if (out->bounce_slots < 2 || out->bounce_slots > 64)
    return adr_error_set(error, EINVAL, "[adr_ucx] bounce_slots %u is not in 2..64",
                         out->bounce_slots);
  if (out->timeout_ms == 0) out->timeout_ms = 30000;
  if (out->timeout_ms < -1)
    return adr_error_set(error, EINVAL, "[adr_ucx] timeout_ms %d is negative", out->timeout_ms);
  return 0;
}

int ucx_status_error(struct adr_error* error, const char* op, ucs_status_t status,
                     const char* what) {
  int e;
  switch (status) {
    case UCS_ERR_NO_MEMORY: e = ENOMEM; break;
    case UCS_ERR_INVALID_PARAM: e = EINVAL; break;
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_REJECTED:
    case UCS_ERR_NOT_CONNECTED: e = ECONNREFUSED; break;
    case UCS_ERR_BUSY: e = EADDRINUSE; break;
    case UCS_ERR_TIMED_OUT:
    case UCS_ERR_ENDPOINT_TIMEOUT: e = ETIMEDOUT; break;
    case UCS_ERR_CANCELED: e = ECANCELED; break;
    case UCS_ERR_CONNECTION_RESET: e = ECONNRESET; break;
    case UCS_ERR_UNSUPPORTED: e = ENOTSUP; break;
    case UCS_ERR_MESSAGE_TRUNCATED: e = EPROTO; break;
    default: e = EIO; break;
  }
  const char* name = ucs_status_string(status);
  return adr_error_set(error, e, "[%s][ucx] UCS_ERR %d (%s): %s", op, (int)status,
                       name ? name : "?", what);
}

/* ---- workers ------------------------------------------------------------ */

static bool use_cm(void);
static bool tls_shared_memory_only(void);

/* Endpoints without peer error handling (UCX_TLS naming shared memory
 * only, see conn_create_ep) must not use the single-copy transports: UCX
 * 1.13's cma aborts the process (a fatal error in uct_cma_ep_tx) when the
 * peer dies during a transfer, and knem and xpmem map the peer's memory
 * the same way. They are left out of such a UCX_TLS ("sm" becomes
 * "posix,sysv"), so a dead peer stays an error adr reports. */
static void tls_without_single_copy(ucp_config_t* config) {
  const char* tls = getenv("UCX_TLS");
  char out[256] = "";
  size_t len = 0;
  bool transport = false;
  for (const char* p = tls; p && *p;) {
    size_t n = strcspn(p, ",");
    const char* add = NULL;
    if ((n == 2 && strncmp(p, "sm", 2) == 0) || (n == 3 && strncmp(p, "shm", 3) == 0))
      add = "posix,sysv";
    else if (!((n == 3 && strncmp(p, "cma", 3) == 0) || (n == 4 && strncmp(p, "knem", 4) == 0) ||
               (n == 5 && strncmp(p, "xpmem", 5) == 0)))
      add = NULL, transport |= !(n == 4 && strncmp(p, "self", 4) == 0);
    else
      add = "";
    int k;
    if (add == NULL)
      k = snprintf(out + len, sizeof(out) - len, "%s%.*s", len ? "," : "", (int)n, p);
    else if (add[0] != '\0')
      k = snprintf(out + len, sizeof(out) - len, "%s%s", len ? "," : "", add), transport = true;
    else
      k = 0;
    if (k < 0 || (size_t)k >= sizeof(out) - len) return;
    len += (size_t)k;
    p += n;
    if (*p == ',') p++;
  }
  if (transport) (void)ucp_config_modify(config, "TLS", out);
}

static int worker_create(const char* op, struct ucx_worker** out, struct adr_error* error) {
  struct ucx_worker* w = calloc(1, sizeof(*w));
  if (w == NULL) return adr_error_set(error, ENOMEM, "[%s][ucx] out of memory", op);
  w->efd = -1;
  ucp_config_t* config = NULL;
  ucs_status_t st = ucp_config_read(NULL, NULL, &config);
  if (st != UCS_OK) {
    free(w);
    return ucx_status_error(error, op, st, "ucp_config_read (check the UCX_* variables)");
  }
  if (!use_cm() && tls_shared_memory_only()) tls_without_single_copy(config);
  ucp_params_t params = {0};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 0;
  st = ucp_init(&params, config, &w->context);
  ucp_config_release(config);
  if (st != UCS_OK) {
    free(w);
    return ucx_status_error(error, op, st, "ucp_init");
  }
  ucp_worker_params_t wp = {0};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  st = ucp_worker_create(w->context, &wp, &w->worker);
  if (st != UCS_OK) {
    ucp_cleanup(w->context);
    free(w);
    return ucx_status_error(error, op, st, "ucp_worker_create");
  }
  if (ucx_rcache_create(w->context, &w->rcache) != 0) {
    ucp_worker_destroy(w->worker);
    ucp_cleanup(w->context);
    free(w);
    return adr_error_set(error, ENOMEM, "[%s][ucx] out of memory", op);
  }
  int fd;
  if (ucp_worker_get_efd(w->worker, &fd) == UCS_OK) w->efd = fd;
  w->refs = 1;
  *out = w;
  return 0;
}

static void worker_unref(struct ucx_worker* w) {
  if (w == NULL || --w->refs > 0) return;
  ucx_rcache_destroy(w->rcache);
  ucp_worker_destroy(w->worker);
  ucp_cleanup(w->context);
  free(w);
}

bool ucx_progress(struct ucx_worker* w, int idle) {
  w->slept = false;
  if (ucp_worker_progress(w->worker) != 0) return true;
  if (idle == UCX_IDLE_SPIN) return false;
  if (idle == UCX_IDLE_YIELD) {
    sched_yield();
    return false;
  }
  if (w->efd >= 0) {
    ucs_status_t st = ucp_worker_arm(w->worker);
    if (st == UCS_ERR_BUSY) return true; /* events waiting: progress next turn */
    if (st == UCS_OK) {
      struct pollfd p = {.fd = w->efd, .events = POLLIN};
      (void)poll(&p, 1, 1);
      w->slept = true;
      return false;
    }
  }
  struct timespec ts = {0, 20000};
  nanosleep(&ts, NULL);
  w->slept = true;
  return false;
}

/* ---- requests ----------------------------------------------------------- */

/* With the address exchange, the TCP connection it used stays open for
 * the connection's life: its end is the peer's end, seen at once whatever
 * the transport (UCX's own keepalive over shared memory takes seconds). */
static void sock_liveness(struct adr_ucx_conn* conn) {
  if (conn->sock < 0 || conn->ep_status != UCS_OK) return;
  /* One look every 64 checks once the loop sleeps on the event fd (some
   * 64 ms), every 1024 while it spins (a system call every few
   * microseconds was a tenth of a spinning loop's time). */
  if (++conn->sock_ticks & (conn->w->slept ? 63u : 1023u)) return;
  char c;
  ssize_t n = recv(conn->sock, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
    /* What the peer sent before it left may still be in a shared-memory
     * queue: take it in before calling the peer gone. */
    for (int i = 0; i < 256; i++) ucp_worker_progress(conn->w->worker);
    conn->ep_status = UCS_ERR_CONNECTION_RESET;
  }
}

int ucx_conn_check(struct adr_ucx_conn* conn, const char* op, struct adr_error* error) {
  sock_liveness(conn);
  if (atomic_load(&conn->cancelled))
    return adr_error_set(error, ECANCELED, "[%s][ucx] the transfer was cancelled", op);
  if (conn->credit_req != NULL && ucp_request_check_status(conn->credit_req) == UCS_OK &&
      *conn->credit_value == UCX_CREDIT_CANCEL)
    return adr_error_set(error, ECANCELED, "[%s][ucx] the receiver cancelled the stream", op);
  if (conn->ep_status != UCS_OK)
    return adr_error_set(error, ECONNRESET, "[%s][ucx] the peer disconnected (%s)", op,
                         ucs_status_string(conn->ep_status));
  if (conn->broken || conn->ep_closed)
    return adr_error_set(error, ECONNRESET,
                         "[%s][ucx] the connection was closed by an earlier failure or cancel", op);
  return 0;
}

int ucx_request_failed(struct adr_ucx_conn* conn, ucs_status_t status, const char* op,
                       const char* what, struct adr_error* error) {
  switch (status) {
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_NOT_CONNECTED:
      /* The request may fail before the endpoint's error handler runs. */
      if (conn->ep_status == UCS_OK) conn->ep_status = status;
      break;
    default:
      break;
  }
  if (conn->ep_status != UCS_OK || atomic_load(&conn->cancelled))
    return ucx_conn_check(conn, op, error);
  return ucx_status_error(error, op, status, what);
}

int ucx_reqs_add(struct ucx_reqs* set, ucs_status_ptr_t p, const char* op, const char* what,
                 struct adr_error* error) {
  if (p == NULL) return 0;
  if (UCS_PTR_IS_ERR(p)) return ucx_status_error(error, op, UCS_PTR_STATUS(p), what);
  if (set->n == set->cap) {
    size_t cap = set->cap ? set->cap * 2 : 16;
    void** r = realloc(set->reqs, cap * sizeof(*r));
    if (r == NULL) {
      /* Cannot track it: wait for it here so it is never leaked. */
      ucp_request_free(p);
      return adr_error_set(error, ENOMEM, "[%s][ucx] out of memory tracking a request", op);
    }
    set->reqs = r;
    set->cap = cap;
  }
  set->reqs[set->n++] = p;
  return 0;
}

void ucx_reqs_reap(struct ucx_reqs* set, size_t* out_done, ucs_status_t* out_failed) {
  size_t kept = 0, done = 0;
  ucs_status_t failed = UCS_OK;
  for (size_t i = 0; i < set->n; i++) {
    ucs_status_t st = ucp_request_check_status(set->reqs[i]);
    if (st == UCS_INPROGRESS) {
      set->reqs[kept++] = set->reqs[i];
      continue;
    }
    if (st != UCS_OK && failed == UCS_OK) failed = st;
    ucp_request_free(set->reqs[i]);
    done++;
  }
  set->n = kept;
  if (out_done) *out_done = done;
  if (out_failed) *out_failed = failed;
}

void ucx_reqs_free(struct ucx_reqs* set) {
  free(set->reqs);
  set->reqs = NULL;
  set->n = set->cap = 0;
}


int ucx_reqs_wait(struct adr_ucx_conn* conn, struct ucx_reqs* set, const char* op,
                  const char* what, struct adr_error* error) {
  /* Most waits find their requests done (a control message received from
   * the unexpected queue): settle those before reading the clock, which
   * is slow in a virtual machine and on a 1-row batch's round trip. */
  size_t done0;
  ucs_status_t failed0;
  ucx_reqs_reap(set, &done0, &failed0);
  if (failed0 != UCS_OK) return ucx_request_failed(conn, failed0, op, what, error);
  if (set->n == 0) return 0;
  struct ucx_waiter w;
  ucx_waiter_init(&w);
  while (set->n > 0) {
    size_t done;
    ucs_status_t failed;
    ucx_reqs_reap(set, &done, &failed);
    if (failed != UCS_OK) return ucx_request_failed(conn, failed, op, what, error);
    if (set->n == 0) break;
    int st = ucx_conn_check(conn, op, error);
    if (st != 0) {
      ucx_reqs_reap(set, NULL, &failed);
      if (set->n == 0 && failed == UCS_OK) break;
      return st;
    }
    ucx_waiter_step(&w, done > 0);
    if (ucx_waiter_expired(&w, conn->opt.timeout_ms))
      return adr_error_set(error, ETIMEDOUT, "[%s][ucx] no progress for %d ms while %s", op,
                           conn->opt.timeout_ms, what);
    ucx_waiter_acted(&w, ucx_progress(conn->w, ucx_waiter_mode(&w, set->sends)));
  }
  return 0;
}

static void ep_close(struct adr_ucx_conn* conn, bool force) {
  if (conn->ep == NULL) return;
  ucp_request_param_t p = {0};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  ucs_status_ptr_t r = ucp_ep_close_nbx(conn->ep, &p);
  if (r != NULL && !UCS_PTR_IS_ERR(r)) {
    double start = ucx_now();
    /* A graceful close waits for the peer. A forced one completes at once
     * with peer error handling; without it (shared memory only) a dead
     * peer may never let it, so the wait is short. */
    double limit = !force ? 1.0 : conn->err_none ? 0.5 : 2.0;
    while (ucp_request_check_status(r) == UCS_INPROGRESS) {
      if (ucx_now() - start > limit) break;
      ucx_progress(conn->w, ucx_now() - start > 1e-3);
    }
    if (ucp_request_check_status(r) == UCS_INPROGRESS && !force) {
      ucp_request_free(r);
      conn->ep = NULL;
      conn->ep_closed = true;
      return;
    }
    ucp_request_free(r);
  }
  conn->ep = NULL;
  conn->ep_closed = true;
}

void ucx_conn_abort(struct adr_ucx_conn* conn, struct ucx_reqs* set) {
  conn->broken = true;
  if (set != NULL)
    for (size_t i = 0; i < set->n; i++) ucp_request_cancel(conn->w->worker, set->reqs[i]);
  ep_close(conn, true);
  if (set == NULL) return;
  double start = ucx_now();
  while (set->n > 0 && ucx_now() - start < (conn->err_none ? 0.5 : 2.0)) {
    ucx_reqs_reap(set, NULL, NULL);
    if (set->n > 0) ucx_progress(conn->w, true);
  }
  /* Whatever UCX still holds is freed by it when it completes. */
  for (size_t i = 0; i < set->n; i++) ucp_request_free(set->reqs[i]);
  set->n = 0;
}

int ucx_send(struct adr_ucx_conn* conn, uint64_t tag, const void* buf, size_t size, ucp_mem_h memh,
             struct ucx_reqs* set, const char* op, struct adr_error* error) {
  int st = ucx_conn_check(conn, op, error);
  if (st != 0) return st;
  ucp_request_param_t p = {0};
  if (memh != NULL) {
    p.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
    p.memh = memh;
  }
  ucs_status_ptr_t r = ucp_tag_send_nbx(conn->ep, buf, size, tag, &p);
  if (UCS_PTR_IS_ERR(r)) return ucx_request_failed(conn, UCS_PTR_STATUS(r), op, "ucp_tag_send_nbx", error);
  if (r == NULL) return 0; /* done at once (eager) */
  if (set != NULL) {
    set->sends = true;
    return ucx_reqs_add(set, r, op, "ucp_tag_send_nbx", error);
  }
  struct ucx_reqs one = {.sends = true};
  st = ucx_reqs_add(&one, r, op, "ucp_tag_send_nbx", error);
  if (st == 0) st = ucx_reqs_wait(conn, &one, op, "sending a control message", error);
  if (st != 0 && one.n > 0) ucx_conn_abort(conn, &one);
  ucx_reqs_free(&one);
  return st;
}

int ucx_recv(struct adr_ucx_conn* conn, uint64_t tag, uint64_t mask, void* buf, size_t size,
             ucp_mem_h memh, struct ucx_reqs* set, const char* op, struct adr_error* error) {
  ucp_request_param_t p = {0};
  if (memh != NULL) {
    p.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
    p.memh = memh;
  }
  ucs_status_ptr_t r = ucp_tag_recv_nbx(conn->w->worker, buf, size, tag, mask, &p);
  if (UCS_PTR_IS_ERR(r)) return ucx_request_failed(conn, UCS_PTR_STATUS(r), op, "ucp_tag_recv_nbx", error);
  return ucx_reqs_add(set, r, op, "ucp_tag_recv_nbx", error);
}

int ucx_recv_any(struct adr_ucx_conn* conn, uint64_t tag, uint64_t mask, struct ucx_bytes* into,
                 uint64_t* out_tag, const char* op, struct adr_error* error) {
  struct ucx_waiter w;
  ucx_waiter_init(&w);
  bool last_look = false;
  for (;;) {
    ucp_tag_recv_info_t info;
    ucp_tag_message_h msg = ucp_tag_probe_nb(conn->w->worker, tag, mask, 1, &info);
    if (msg != NULL) {
      size_t need = info.length ? info.length : 1;
      if (need > into->cap) {
        size_t cap = need < 4096 ? 4096 : need;
        uint8_t* d = realloc(into->data, cap);
        if (d == NULL) {
          /* The message is taken off the queue: receive it into nothing is
           * impossible, so the connection cannot go on. */
          conn->broken = true;
          return adr_error_set(error, ENOMEM, "[%s][ucx] out of memory for a %zu-byte message",
                               op, info.length);
        }
        into->data = d;
        into->cap = cap;
      }
      void* buf = into->data;
      into->size = 0;
      ucp_request_param_t p = {0};
      struct ucx_reqs one = {0};
      int st = ucx_reqs_add(&one, ucp_tag_msg_recv_nbx(conn->w->worker, buf, info.length, msg, &p),
                            op, "ucp_tag_msg_recv_nbx", error);
      if (st == 0) st = ucx_reqs_wait(conn, &one, op, "receiving a control message", error);
      if (st != 0) {
        ucx_conn_abort(conn, &one);
        ucx_reqs_free(&one);
        return st;
      }
      ucx_reqs_free(&one);
      into->size = info.length;
      if (out_tag) *out_tag = info.sender_tag;
      return 0;
    }
    int st = ucx_conn_check(conn, op, error);
    if (st != 0 && conn->ep_status != UCS_OK && !last_look) {
      /* One more look: the message may have come in with the news. */
      last_look = true;
      continue;
    }
    if (st != 0) return st;
    /* Only the message counts as progress here. */
    ucx_waiter_step(&w, false);
    if (ucx_waiter_expired(&w, conn->opt.timeout_ms))
      return adr_error_set(error, ETIMEDOUT, "[%s][ucx] no message from the peer for %d ms", op,
                           conn->opt.timeout_ms);
    ucx_waiter_acted(&w, ucx_progress(conn->w, ucx_waiter_mode(&w, false)));
  }
}

/* ---- addresses ---------------------------------------------------------- */

static int parse_address(const char* op, const char* address, bool passive,
                         struct sockaddr_storage* out, socklen_t* out_len,
                         struct adr_error* error) {
  char host[256];
  const char* colon = strrchr(address, ':');
  if (colon == NULL || colon[1] == '\0')
    return adr_error_set(error, EINVAL, "[%s][ucx] address \"%s\": expected HOST:PORT", op,
                         address);
  size_t hl = (size_t)(colon - address);
  const char* h = address;
  if (hl >= 2 && address[0] == '[' && address[hl - 1] == ']') {
    h++;
    hl -= 2;
  }
  if (hl >= sizeof(host))
    return adr_error_set(error, EINVAL, "[%s][ucx] address \"%s\": host too long", op, address);
  memcpy(host, h, hl);
  host[hl] = '\0';
  char* end;
  long port = strtol(colon + 1, &end, 10);
  if (*end != '\0' || port < 0 || port > 65535)
    return adr_error_set(error, EINVAL, "[%s][ucx] address \"%s\": bad port", op, address);
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  int g = getaddrinfo(hl ? host : NULL, colon + 1, &hints, &res);
  if (g != 0 || res == NULL)
    return adr_error_set(error, EHOSTUNREACH, "[%s][ucx] address \"%s\": %s", op, address,
                         gai_strerror(g));
  memcpy(out, res->ai_addr, res->ai_addrlen);
  *out_len = res->ai_addrlen;
  freeaddrinfo(res);
  return 0;
}

/* ---- connections -------------------------------------------------------- */

static void on_ep_error(void* arg, ucp_ep_h ep, ucs_status_t status) {
  struct adr_ucx_conn* conn = arg;
  (void)ep;
  if (conn->ep_status == UCS_OK) conn->ep_status = status;
}

static struct adr_ucx_conn* conn_new(struct ucx_worker* w, const struct adr_ucx_options* opt) {
  struct adr_ucx_conn* c = calloc(1, sizeof(*c));
  if (c == NULL) return NULL;
  atomic_init(&c->refs, 1);
  atomic_init(&c->cancelled, 0);
  c->w = w;
  w->refs++;
  c->opt = *opt;
  c->sock = -1;
  return c;
}

static void conn_free(struct adr_ucx_conn* conn) {
  if (conn->ep != NULL) {
    /* A short flush: the protocol already waited for what matters (the
     * sender for the last credit, the receiver for the end message), and a
     * peer that is not progressing any more must not hold this up. */
    ucp_request_param_t fp = {0};
    ucs_status_ptr_t r = ucp_ep_flush_nbx(conn->ep, &fp);
    if (r != NULL && !UCS_PTR_IS_ERR(r)) {
      double start = ucx_now();
      while (ucp_request_check_status(r) == UCS_INPROGRESS && ucx_now() - start < 0.05 &&
             conn->ep_status == UCS_OK)
        ucx_progress(conn->w, ucx_now() - start > 1e-3);
      ucp_request_free(r);
    }
    /* Flushed: with peer error handling the peer copes with a forced
     * close (it sees the connection end), which does not wait for it. */
    sock_liveness(conn);
    ep_close(conn, conn->ep_status != UCS_OK || !conn->err_none);
  }
  if (conn->sock >= 0) close(conn->sock);
  if (conn->listener != NULL) conn->listener->live_conns--;
  worker_unref(conn->w);
  free(conn);
}

void ucx_conn_unref(struct adr_ucx_conn* conn) {
  if (atomic_fetch_sub(&conn->refs, 1) == 1) conn_free(conn);
}

/* UCX_TLS naming shared-memory transports only: peer error handling cannot
 * be had, and asking for it first only makes UCX print an error. */
static bool tls_shared_memory_only(void) {
  const char* tls = getenv("UCX_TLS");
  if (tls == NULL || tls[0] == '\0' || tls[0] == '^') return false;
  static const char* const shm[] = {"sm", "shm", "posix", "sysv", "cma", "knem", "xpmem", "self"};
  const char* p = tls;
  while (*p) {
    size_t n = strcspn(p, ",");
    bool known = false;
    for (size_t i = 0; i < sizeof(shm) / sizeof(shm[0]) && !known; i++)
      known = strlen(shm[i]) == n && strncmp(p, shm[i], n) == 0;
    if (!known) return false;
    p += n;
    if (*p == ',') p++;
  }
  return true;
}

static int conn_create_ep(struct adr_ucx_conn* conn, ucp_ep_params_t* params, const char* op,
                          struct adr_error* error) {
  params->field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params->err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params->err_handler.cb = on_ep_error;
  params->err_handler.arg = conn;
  ucs_status_t st = conn->sock >= 0 && tls_shared_memory_only()
                        ? UCS_ERR_UNREACHABLE
                        : ucp_ep_create(conn->w->worker, params, &conn->ep);
  if (st == UCS_ERR_UNREACHABLE && conn->sock >= 0) {
    /* UCX 1.13's shared-memory transports have no peer failure handling,
     * so with UCX_TLS limited to them no endpoint exists in that mode.
     * The handshake's TCP connection tells a dead peer instead
     * (sock_liveness), and an abort closes the endpoint by force. */
    params->err_mode = UCP_ERR_HANDLING_MODE_NONE;
    params->field_mask &= ~(uint64_t)UCP_EP_PARAM_FIELD_ERR_HANDLER;
    st = ucp_ep_create(conn->w->worker, params, &conn->ep);
    conn->err_none = st == UCS_OK;
  }
  if (st != UCS_OK) {
    conn->ep = NULL;
    return ucx_status_error(error, op, st, "ucp_ep_create");
  }
  return 0;
}


/* ---- the address exchange ------------------------------------------------
 * The default wireup: the two sides exchange their UCX worker addresses
 * over a TCP connection of their own and create endpoints to them. Unlike
 * UCX 1.13's socket-address connection manager (ADR_UCX_WIREUP=sockaddr),
 * whose endpoints only get TCP lanes, this lets UCX pick every transport
 * the two workers share, shared memory (posix, sysv, cma) included. */

static bool use_cm(void) {
  const char* v = secure_getenv("ADR_UCX_WIREUP"); /* unset in elevated processes */
  return v != NULL && strcmp(v, "sockaddr") == 0;
}

struct wire_hello {
  uint32_t magic, version, id, addr_len;
};

static int io_all(int fd, void* buf, size_t n, bool writing, double deadline, const char* op,
                  struct adr_error* error) {
  uint8_t* p = buf;
  while (n > 0) {
    ssize_t k = writing ? send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT) : recv(fd, p, n, MSG_DONTWAIT);
    if (k > 0) {
      p += k;
      n -= (size_t)k;
      continue;
    }
    if (k == 0)
      return adr_error_set(error, ECONNRESET, "[%s][ucx] the peer closed the connection during "
                           "the handshake", op);
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return adr_error_set(error, ECONNRESET, "[%s][ucx] handshake: %s", op, strerror(errno));
    double left = deadline - ucx_now();
    if (left <= 0)
      return adr_error_set(error, ETIMEDOUT, "[%s][ucx] the peer did not complete the handshake",
                           op);
    struct pollfd pf = {.fd = fd, .events = writing ? POLLOUT : POLLIN};
    (void)poll(&pf, 1, left > 1.0 ? 1000 : (int)(left * 1000) + 1);
  }
  return 0;
}

static int exchange(struct adr_ucx_conn* conn, int fd, bool listener_side, const char* op,
                    struct adr_error* error) {
  double deadline = ucx_now() + (conn->opt.timeout_ms < 0 ? 1e9 : conn->opt.timeout_ms / 1000.0);
  ucp_address_t* addr = NULL;
  size_t len = 0;
  ucs_status_t us = ucp_worker_get_address(conn->w->worker, &addr, &len);
  if (us != UCS_OK) return ucx_status_error(error, op, us, "ucp_worker_get_address");
  struct wire_hello mine = {UCX_PROTOCOL_MAGIC, UCX_PROTOCOL_VERSION,
                            listener_side ? conn->local_id : 0, (uint32_t)len};
  struct wire_hello peer = {0};
  void* peer_addr = NULL;
  int st = io_all(fd, &mine, sizeof(mine), true, deadline, op, error);
  if (!st) st = io_all(fd, addr, len, true, deadline, op, error);
  ucp_worker_release_address(conn->w->worker, addr);
  if (!st) st = io_all(fd, &peer, sizeof(peer), false, deadline, op, error);
  if (!st && (peer.magic != UCX_PROTOCOL_MAGIC || peer.version != UCX_PROTOCOL_VERSION ||
              peer.addr_len == 0 || peer.addr_len > (1u << 20)))
    st = adr_error_set(error, EPROTO,
                       "[%s][ucx] the peer speaks another protocol (magic %08x version %u)", op,
                       peer.magic, peer.version);
  if (!st && (peer_addr = malloc(peer.addr_len)) == NULL)
    st = adr_error_set(error, ENOMEM, "[%s][ucx] out of memory", op);
  if (!st) st = io_all(fd, peer_addr, peer.addr_len, false, deadline, op, error);
  if (!st) {
    if (!listener_side) conn->peer_id = (uint16_t)peer.id;
    ucp_ep_params_t ep = {0};
    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    ep.address = peer_addr;
    st = conn_create_ep(conn, &ep, op, error);
  }
  free(peer_addr);
  return st;
}

static int tcp_connect(const struct sockaddr_storage* sa, socklen_t salen, int timeout_ms,
                       const char* op, const char* address, int* out, struct adr_error* error) {
  int fd = socket(sa->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return adr_error_set(error, errno, "[%s][ucx] socket: %s", op, strerror(errno));
  int st = 0;
  if (connect(fd, (const struct sockaddr*)sa, salen) != 0) {
    if (errno != EINPROGRESS) {
      st = errno;
    } else {
      struct pollfd pf = {.fd = fd, .events = POLLOUT};
      int r = poll(&pf, 1, timeout_ms < 0 ? -1 : timeout_ms);
      int err = 0;
      socklen_t el = sizeof(err);
      if (r == 0) st = ETIMEDOUT;
      else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0) st = errno;
      else st = err;
    }
  }
  if (st) {
    close(fd);
    return adr_error_set(error, st, "[%s][ucx] no listener answered at %s: %s", op, address,
                         strerror(st));
  }
  *out = fd;
  return 0;
}

int ucx_connect(const char* address, const struct adr_ucx_options* options,
                struct adr_ucx_conn** out, struct adr_error* error);
int ucx_connect(const char* address, const struct adr_ucx_options* options,
                struct adr_ucx_conn** out, struct adr_error* error) {
  const char* op = "adr_ucx_connect";
  struct adr_ucx_options opt;
  int st = ucx_options_resolve(options, &opt, error);
  if (st != 0) return st;
  struct sockaddr_storage sa;
  socklen_t salen;
  st = parse_address(op, address, false, &sa, &salen, error);
  if (st != 0) return st;
  struct ucx_worker* w;
  st = worker_create(op, &w, error);
  if (st != 0) return st;
  struct adr_ucx_conn* conn = conn_new(w, &opt);
  worker_unref(w);
  if (conn == NULL) return adr_error_set(error, ENOMEM, "[%s][ucx] out of memory", op);
  if (!use_cm()) {
    st = tcp_connect(&sa, salen, opt.timeout_ms, op, address, &conn->sock, error);
    if (!st) st = exchange(conn, conn->sock, false, op, error);
    if (st) {
      ucx_conn_unref(conn);
      return st;
    }
    *out = conn;
    return 0;
  }
  ucp_ep_params_t ep = {0};
  ep.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR;
  ep.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  ep.sockaddr.addr = (const struct sockaddr*)&sa;
  ep.sockaddr.addrlen = salen;
  st = conn_create_ep(conn, &ep, op, error);
  if (st == 0) {
    uint32_t hello[4] = {0};
    struct ucx_reqs set = {0};
    st = ucx_recv(conn, ucx_tag(0, UCX_KIND_HELLO, 0, 0, 0), UCX_TAG_MASK_ALL, hello,
                  sizeof(hello), NULL, &set, op, error);
    if (st == 0) st = ucx_reqs_wait(conn, &set, op, "waiting for the listener's handshake", error);
    if (st != 0) {
      if (conn->ep_status != UCS_OK)
        st = ucx_status_error(error, op, conn->ep_status, "no listener answered at that address");
      ucx_conn_abort(conn, &set);
    } else if (hello[0] != UCX_PROTOCOL_MAGIC || hello[1] != UCX_PROTOCOL_VERSION) {
      st = adr_error_set(error, EPROTO,
                         "[%s][ucx] the listener speaks another protocol (magic %08x version %u)",
                         op, hello[0], hello[1]);
    } else {
      conn->peer_id = (uint16_t)hello[2];
    }
    ucx_reqs_free(&set);
  }
  if (st != 0) {
    ucx_conn_unref(conn);
    return st;
  }
  *out = conn;
  return 0;
}

static void on_conn_request(ucp_conn_request_h request, void* arg) {
  struct adr_ucx_listener* l = arg;
  if (l->n_pending == sizeof(l->pending) / sizeof(l->pending[0])) {
    ucp_listener_reject(l->listener, request);
    return;
  }
  l->pending[l->n_pending++] = request;
}

int ucx_listen(const char* address, const struct adr_ucx_options* options,
               struct adr_ucx_listener** out, struct adr_error* error);
int ucx_listen(const char* address, const struct adr_ucx_options* options,
               struct adr_ucx_listener** out, struct adr_error* error) {
  const char* op = "adr_ucx_listen";
  struct adr_ucx_listener* l = calloc(1, sizeof(*l));
  if (l == NULL) return adr_error_set(error, ENOMEM, "[%s][ucx] out of memory", op);
  int st = ucx_options_resolve(options, &l->opt, error);
  struct sockaddr_storage sa;
  socklen_t salen;
  if (st == 0) st = parse_address(op, address, true, &sa, &salen, error);
  if (st == 0) st = worker_create(op, &l->w, error);
  if (st != 0) {
    free(l);
    return st;
  }
  l->sock = -1;
  l->next_id = 1;
  if (!use_cm()) {
    int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    st = fd < 0 ? errno : 0;
    if (!st) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (!st && bind(fd, (const struct sockaddr*)&sa, salen) != 0) st = errno;
    if (!st && listen(fd, 16) != 0) st = errno;
    struct sockaddr_storage bound;
    socklen_t bl = sizeof(bound);
    if (!st && getsockname(fd, (struct sockaddr*)&bound, &bl) != 0) st = errno;
    if (st) {
      if (fd >= 0) close(fd);
      worker_unref(l->w);
      free(l);
      return adr_error_set(error, st, "[%s][ucx] cannot listen on %s: %s", op, address,
                           strerror(st));
    }
    l->sock = fd;
    l->port = ntohs(bound.ss_family == AF_INET ? ((struct sockaddr_in*)&bound)->sin_port
                                               : ((struct sockaddr_in6*)&bound)->sin6_port);
    *out = l;
    return 0;
  }
  ucp_listener_params_t lp = {0};
  lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
  lp.sockaddr.addr = (const struct sockaddr*)&sa;
  lp.sockaddr.addrlen = salen;
  lp.conn_handler.cb = on_conn_request;
  lp.conn_handler.arg = l;
  ucs_status_t us = ucp_listener_create(l->w->worker, &lp, &l->listener);
  if (us != UCS_OK) {
    worker_unref(l->w);
    free(l);
    return ucx_status_error(error, op, us, "ucp_listener_create");
  }
  ucp_listener_attr_t attr = {0};
  attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
  us = ucp_listener_query(l->listener, &attr);
  if (us != UCS_OK) {
    ucp_listener_destroy(l->listener);
    worker_unref(l->w);
    free(l);
    return ucx_status_error(error, op, us, "ucp_listener_query");
  }
  if (attr.sockaddr.ss_family == AF_INET)
    l->port = ntohs(((struct sockaddr_in*)&attr.sockaddr)->sin_port);
  else
    l->port = ntohs(((struct sockaddr_in6*)&attr.sockaddr)->sin6_port);
  l->next_id = 1;
  *out = l;
  return 0;
}

int ucx_listener_port(const struct adr_ucx_listener* listener);
int ucx_listener_port(const struct adr_ucx_listener* listener) {
  return listener->port;
}

int ucx_accept(struct adr_ucx_listener* l, int timeout_ms, struct adr_ucx_conn** out,
               struct adr_error* error);
int ucx_accept(struct adr_ucx_listener* l, int timeout_ms, struct adr_ucx_conn** out,
               struct adr_error* error) {
  const char* op = "adr_ucx_accept";
  if (timeout_ms == 0) timeout_ms = l->opt.timeout_ms;
  if (l->sock >= 0) {
    struct pollfd pf = {.fd = l->sock, .events = POLLIN};
    int r = poll(&pf, 1, timeout_ms);
    int fd = r > 0 ? accept4(l->sock, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK) : -1;
    if (fd < 0)
      return r == 0 ? adr_error_set(error, ETIMEDOUT, "[%s][ucx] no connection within %d ms", op,
                                    timeout_ms)
                    : adr_error_set(error, errno, "[%s][ucx] accept: %s", op, strerror(errno));
    struct adr_ucx_conn* conn = conn_new(l->w, &l->opt);
    if (conn == NULL) {
      close(fd);
      return adr_error_set(error, ENOMEM, "[%s][ucx] out of memory", op);
    }
    conn->sock = fd;
    conn->listener = l;
    l->live_conns++;
    conn->local_id = l->next_id++;
    if (l->next_id == 0) l->next_id = 1;
    int st = exchange(conn, fd, true, op, error);
    if (st) {
      ucx_conn_unref(conn);
      return st;
    }
    *out = conn;
    return 0;
  }
  double start = ucx_now();
  while (l->n_pending == 0) {
    double now = ucx_now();
    if (timeout_ms >= 0 && now - start > timeout_ms / 1000.0)
      return adr_error_set(error, ETIMEDOUT, "[%s][ucx] no connection within %d ms", op,
                           timeout_ms);
    ucx_progress(l->w, now - start > 1e-3);
  }
  ucp_conn_request_h request = l->pending[0];
  l->n_pending--;
  memmove(l->pending, l->pending + 1, l->n_pending * sizeof(l->pending[0]));
  struct adr_ucx_conn* conn = conn_new(l->w, &l->opt);
  if (conn == NULL) {
    ucp_listener_reject(l->listener, request);
    return adr_error_set(error, ENOMEM, "[%s][ucx] out of memory", op);
  }
  conn->listener = l;
  l->live_conns++;
  conn->local_id = l->next_id++;
  if (l->next_id == 0) l->next_id = 1;
  conn->peer_id = 0;
  ucp_ep_params_t ep = {0};
  ep.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST;
  ep.conn_request = request;
  int st = conn_create_ep(conn, &ep, op, error);
  if (st == 0) {
    uint32_t hello[4] = {UCX_PROTOCOL_MAGIC, UCX_PROTOCOL_VERSION, conn->local_id, 0};
    st = ucx_send(conn, ucx_tag(0, UCX_KIND_HELLO, 0, 0, 0), hello, sizeof(hello), NULL, NULL, op,
                  error);
  }
  if (st != 0) {
    ucx_conn_unref(conn);
    return st;
  }
  *out = conn;
  return 0;
}

int ucx_listener_destroy(struct adr_ucx_listener* l, struct adr_error* error);
int ucx_listener_destroy(struct adr_ucx_listener* l, struct adr_error* error) {
  if (l->live_conns > 0)
    return adr_error_set(error, EBUSY,
                         "[adr_ucx_listener_destroy][ucx] %d accepted connection(s) still alive",
                         l->live_conns);
  if (l->sock >= 0) close(l->sock);
  for (size_t i = 0; i < l->n_pending; i++) ucp_listener_reject(l->listener, l->pending[i]);
  l->n_pending = 0;
  if (l->listener != NULL) ucp_listener_destroy(l->listener);
  /* Let the rejections go out. */
  for (int i = 0; i < 100; i++) ucp_worker_progress(l->w->worker);
  worker_unref(l->w);
  free(l);
  return 0;
}

void ucx_conn_cancel(struct adr_ucx_conn* conn);
void ucx_conn_cancel(struct adr_ucx_conn* conn) {
  atomic_store(&conn->cancelled, 1);
}

int ucx_conn_destroy(struct adr_ucx_conn* conn, struct adr_error* error);
int ucx_conn_destroy(struct adr_ucx_conn* conn, struct adr_error* error) {
  (void)error;
  ucx_conn_unref(conn);
  return 0;
}

/* ---- control messages --------------------------------------------------- */

uint64_t ucx_ctrl_tag(uint16_t id, uint32_t stream, uint64_t seq) {
  return ucx_tag(id, UCX_KIND_CTRL, stream, (uint32_t)(seq >> 24), (uint32_t)seq);
}

/* Best effort, past cancellation: a short message the peer should see
 * before this side closes. */
void ucx_send_notice(struct adr_ucx_conn* conn, uint64_t tag, const void* buf, size_t size) {
  if (conn->ep == NULL || conn->ep_status != UCS_OK) return;
  ucp_request_param_t p = {0};
  ucs_status_ptr_t r = ucp_tag_send_nbx(conn->ep, buf, size, tag, &p);
  if (r == NULL || UCS_PTR_IS_ERR(r)) return;
  double start = ucx_now();
  while (ucp_request_check_status(r) == UCS_INPROGRESS && ucx_now() - start < 0.5 &&
         conn->ep_status == UCS_OK)
    ucx_progress(conn->w, ucx_now() - start > 1e-3);
  if (ucp_request_check_status(r) == UCS_INPROGRESS) ucp_request_cancel(conn->w->worker, r);
  ucp_request_free(r);
}
