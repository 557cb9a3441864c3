/* SPDX-License-Identifier: Apache-2.0
 *
 * Internals of the UCX module (libadr_ucx.so): connections and their
 * progress loop (ucx_conn.c), record batch metadata sent as patches
 * (ucx_meta.c), the sender (ucx_send.c) and the receiver (ucx_recv.c). docs/ucx.md describes
 * the wire protocol.
 */
#ifndef ADR_UCX_INTERNAL_H
#define ADR_UCX_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ucp/api/ucp.h>

#include "adr/adr.h"
#include "adr/ipc.h"
#include "adr/ucx.h"

/* ---- tags ---------------------------------------------------------------
 * 64-bit UCX tags: | receiver's connection id:16 | kind:4 | stream:8 |
 * batch:12 | index:24 |. The id tells apart the connections that share a
 * listener's worker; stream and batch numbers wrap, which is safe because
 * far fewer than 256 streams / 4096 batches are ever in flight at once. */
enum ucx_kind {
  UCX_KIND_HELLO = 1,  /* listener -> connector: the connector's id on the listener's side */
  UCX_KIND_CTRL = 2,   /* sender -> receiver: schema, batch metadata, end, error */
  UCX_KIND_BODY = 3,   /* sender -> receiver: one chunk of a batch's buffers */
  UCX_KIND_CREDIT = 4, /* receiver -> sender: batches taken, or a cancel */
};

#define UCX_TAG_MASK_ALL UINT64_MAX
#define UCX_TAG_MASK_NO_INDEX (~(uint64_t)0xffffff)
#define UCX_TAG_MASK_NO_BATCH_INDEX (~(uint64_t)0xfffffffff)

static inline uint64_t ucx_tag(uint16_t id, unsigned kind, uint32_t stream, uint32_t batch,
                               uint32_t index) {
  return ((uint64_t)id << 48) | ((uint64_t)(kind & 0xf) << 44) | ((uint64_t)(stream & 0xff) << 36) |
         ((uint64_t)(batch & 0xfff) << 24) | (uint64_t)(index & 0xffffff);
}

/* The most body messages one IPC message's body may have (the index
 * field). */
#define UCX_MAX_BATCH_MESSAGES 0xffffffu

#define UCX_PROTOCOL_MAGIC 0x55524441u /* "ADRU" little-endian */
#define UCX_PROTOCOL_VERSION 3u

/* Bodies up to this size travel inside their control message. */
#define UCX_INLINE_BODY_MAX (16u << 10)

/* Control message types (first word after the magic). */
enum ucx_ctrl {
  UCX_CTRL_SCHEMA = 1,  /* words: chunk size (low, high); payload: IPC Schema message */
  UCX_CTRL_MESSAGE = 2, /* words: body tag number, flags (UCX_MSG_*); payload: IPC batch
                           message metadata (and body) */
  UCX_CTRL_END = 3,     /* words: record batches sent */
  UCX_CTRL_ERROR = 4,   /* words: errno value; payload: message text */
};

/* Flags of a MESSAGE control message (its second word). */
#define UCX_MSG_INLINE 1u /* the body follows the metadata */
/* A RecordBatch (not a DictionaryBatch): with UCX_MSG_INLINE the batch is
 * whole on arrival, and the receiver credits it before decoding it. */
#define UCX_MSG_RECORD 2u
/* A RecordBatch whose metadata is a patch (ucx_meta.c) against the
 * previous RecordBatch's of the stream, instead of the metadata. */
#define UCX_MSG_PATCH 4u

/* Credit message values. */
#define UCX_CREDIT_CANCEL UINT64_MAX

/* ---- workers and connections -------------------------------------------- */

/* ---- the registration cache (ucx_rcache.c) -------------------------------
 * ucp_mem_map results by address range, per UCX context, handed out with a
 * reference: a range inside a cached one gets that registration. Memory
 * unmapped from the process (UCX's memory hooks report it) makes the
 * entries it overlaps stale: never handed out again, unmapped from UCX
 * when their last user puts them. Without the hooks nothing is cached.
 * Gets and puts come from the worker's thread; the invalidation from any
 * thread. */
struct ucx_rcache;
struct ucx_reg;
struct ucx_rcache_stats {
  uint64_t maps;        /* ucp_mem_map calls */
  uint64_t hits;        /* gets answered from the cache */
  uint64_t invalidated; /* entries made stale by an unmapping */
  bool caching;         /* UCX's memory hooks are in: registrations are kept */
};
int ucx_rcache_create(ucp_context_h context, struct ucx_rcache** out);
void ucx_rcache_destroy(struct ucx_rcache* cache);
/* A registration covering [addr, addr + len), cached or new (ucp_mem_map);
 * the caller holds it until ucx_rcache_put. */
int ucx_rcache_get(struct ucx_rcache* cache, void* addr, size_t len, struct ucx_reg** out,
                   const char* op, struct adr_error* error);
void ucx_rcache_put(struct ucx_rcache* cache, struct ucx_reg* reg);
ucp_mem_h ucx_reg_memh(const struct ucx_reg* reg);
void ucx_rcache_stats(struct ucx_rcache* cache, struct ucx_rcache_stats* out);

/* A UCX context and worker, shared by a listener and the connections it
 * accepted (reference-counted; one thread at a time, adr/ucx.h). */
struct ucx_worker {
  ucp_context_h context;
  ucp_worker_h worker;
  struct ucx_rcache* rcache; /* registrations of batch buffers and bodies */
  int efd;                   /* -1 without wakeup support */
  int refs;
  bool slept; /* the last idle turn slept (ucx_progress) */
};

struct adr_ucx_conn {
  atomic_int refs;
  struct ucx_worker* w;
  struct adr_ucx_listener* listener; /* NULL for a connector */
  ucp_ep_h ep;
  uint16_t local_id; /* in the tags this side receives */
  uint16_t peer_id;  /* in the tags this side sends */
  atomic_int cancelled;
  ucs_status_t ep_status; /* set by the endpoint's error handler */
  bool broken;            /* a failed transfer left it unusable */
  bool ep_closed;
  struct adr_ucx_options opt;
  uint32_t send_stream; /* streams sent / received so far */
  uint32_t recv_stream;
  bool receiving; /* a receive stream is live */
  /* The sender's posted credit receive, watched by every wait so that a
   * receiver's cancel stops whatever the sender is doing. */
  void* credit_req;
  const uint64_t* credit_value;
  int sock;       /* the TCP connection of the address exchange, -1 with the CM */
  bool err_none;  /* endpoint without peer error handling (shared memory only) */
  unsigned sock_ticks;
};

struct adr_ucx_listener {
  struct ucx_worker* w;
  ucp_listener_h listener;
  int port;
  struct adr_ucx_options opt;
  ucp_conn_request_h pending[16];
  size_t n_pending;
  uint16_t next_id;
  int live_conns;
  int sock; /* listening socket of the address exchange, -1 with the CM */
};

/* The options with defaults filled in (options may be NULL). */
int ucx_options_resolve(const struct adr_ucx_options* options, struct adr_ucx_options* out,
                        struct adr_error* error);

/* A message "[op][ucx] UCS_NAME: description" for a UCX status; returns
 * the errno value it maps to. */
int ucx_status_error(struct adr_error* error, const char* op, ucs_status_t status,
                     const char* what);

/* A request that completed with `status`: a status saying the peer is
 * gone marks the connection so (ECONNRESET, whichever of the request and
 * the endpoint's error handler comes first); others become the status's
 * errno value with a message. */
int ucx_request_failed(struct adr_ucx_conn* conn, ucs_status_t status, const char* op,
                       const char* what, struct adr_error* error);

/* How a wait passes a turn in which nothing happened. */
enum ucx_idle {
  UCX_IDLE_SPIN = 0,
  /* Sleeps on the worker's event fd (or briefly) so a blocked call does
   * not spin. */
  UCX_IDLE_SLEEP = 1,
  /* Gives up the CPU (sched_yield) but does not sleep: for waits on this
   * side's own sends, which only this side's progress moves along (a
   * shared-memory sender's fragments, whose free queue slots wake no
   * event fd). */
  UCX_IDLE_YIELD = 2,
};

/* One pass of progress, then `idle` (an enum ucx_idle; true sleeps) when
 * nothing happened. Returns whether UCX made progress. */
bool ucx_progress(struct ucx_worker* w, int idle);

/* Why the connection cannot go on (cancelled, peer gone, broken): 0 when it
 * can, otherwise the status with a message. */
int ucx_conn_check(struct adr_ucx_conn* conn, const char* op, struct adr_error* error);

/* A set of outstanding UCX requests that one operation waits for. */
struct ucx_reqs {
  void** reqs;
  size_t n, cap;
  bool sends; /* holds sends (its waits do not sleep, UCX_IDLE_YIELD) */
};

/* Adds the result of a *_nbx call: NULL (done at once) is nothing to wait
 * for; an error pointer becomes the status (and message). */
int ucx_reqs_add(struct ucx_reqs* set, ucs_status_ptr_t p, const char* op, const char* what,
                 struct adr_error* error);
/* Frees the completed requests; *out_done counts them, *out_failed receives
 * the first failure status (UCS_OK when none). */
void ucx_reqs_reap(struct ucx_reqs* set, size_t* out_done, ucs_status_t* out_failed);

/* Waits until every request of `set` completed, with the connection's
 * timeout (reset by each completion), cancellation and peer checks. */
int ucx_reqs_wait(struct adr_ucx_conn* conn, struct ucx_reqs* set, const char* op,
                  const char* what, struct adr_error* error);

/* On a failed or cancelled transfer: cancels what can be cancelled,
 * force-closes the endpoint so every send completes, and frees every
 * request of `set` (which is then empty). The connection is broken. */
void ucx_conn_abort(struct adr_ucx_conn* conn, struct ucx_reqs* set);
void ucx_reqs_free(struct ucx_reqs* set);

/* Sends a contiguous message on the connection (eager for small ones);
 * the request, if any, is added to `set` (NULL: waited for here). */
int ucx_send(struct adr_ucx_conn* conn, uint64_t tag, const void* buf, size_t size, ucp_mem_h memh,
             struct ucx_reqs* set, const char* op, struct adr_error* error);
/* Posts a receive of exactly the message `tag` into buf. */
int ucx_recv(struct adr_ucx_conn* conn, uint64_t tag, uint64_t mask, void* buf, size_t size,
             ucp_mem_h memh, struct ucx_reqs* set, const char* op, struct adr_error* error);
/* Receives the next message matching tag/mask whatever its size into
 * `into` (grown as needed, reused from message to message; into->size
 * receives the message's size). Waits with the connection's checks. */
struct ucx_bytes;
int ucx_recv_any(struct adr_ucx_conn* conn, uint64_t tag, uint64_t mask, struct ucx_bytes* into,
                 uint64_t* out_tag, const char* op, struct adr_error* error);

void ucx_conn_unref(struct adr_ucx_conn* conn);
double ucx_now(void);

/* How long a wait has gone without progress. The clock is read every 64
 * steps only: in a busy progress loop clock_gettime was a fifth of the
 * time (a virtual machine's clock source). Two clocks: `idle` since the
 * operation last moved (for its timeout), `quiet` since UCX last made any
 * progress at all (for going to sleep: while fragments flow, a wait keeps
 * spinning, since arming the event fd then only costs a system call). */
struct ucx_waiter {
  double last;
  double last_act;
  double idle;
  double quiet;
  unsigned steps;
  bool moved;
  bool acted;
};

static inline void ucx_waiter_init(struct ucx_waiter* w) {
  w->last = w->last_act = ucx_now();
  w->idle = w->quiet = 0;
  w->steps = 0;
  w->moved = w->acted = false;
}

static inline void ucx_waiter_step(struct ucx_waiter* w, bool moved) {
  if (moved) {
    w->moved = true;
    w->idle = 0;
  }
  if (++w->steps & 63) return;
  double now = ucx_now();
  if (w->moved) w->last = now;
  if (w->moved || w->acted) w->last_act = now;
  w->moved = w->acted = false;
  w->idle = now - w->last;
  w->quiet = now - w->last_act;
}

/* UCX made progress (ucx_progress returned true). */
static inline void ucx_waiter_acted(struct ucx_waiter* w, bool acted) {
  w->acted |= acted;
}

/* Spinning stops after 2 ms without any progress: then the wait sleeps on
 * the worker's event fd, or only yields while `sending` (enum ucx_idle). */
static inline int ucx_waiter_mode(const struct ucx_waiter* w, bool sending) {
  if (w->quiet <= 2e-3 || w->idle <= 2e-3) return UCX_IDLE_SPIN;
  return sending ? UCX_IDLE_YIELD : UCX_IDLE_SLEEP;
}

static inline bool ucx_waiter_idle(const struct ucx_waiter* w) {
  return ucx_waiter_mode(w, false) != UCX_IDLE_SPIN;
}

static inline bool ucx_waiter_expired(const struct ucx_waiter* w, int timeout_ms) {
  return timeout_ms >= 0 && w->idle > timeout_ms / 1000.0;
}

/* A growable byte buffer. */
struct ucx_bytes {
  uint8_t* data;
  size_t size, cap;
};
void ucx_bytes_free(struct ucx_bytes* b);

/* ---- message bodies (ucx_bounce.c) -------------------------------------
 * Metadata travels as Arrow IPC messages (adr/ipc.h): a control message
 * carries one encapsulated Schema, DictionaryBatch or RecordBatch
 * metadata, and the message's body (bodyLength bytes, buffers at their
 * IPC body offsets, zero padding between them) follows as body messages
 * of at most chunk_size bytes, message k holding body bytes
 * [k * chunk, (k + 1) * chunk). */

/* A body on one side: the receiver's allocation (`base` on `device`), or
 * the sender's buffers left in place (`pieces`, from the IPC encoder). */
struct ucx_body {
  uint8_t* base;
  struct adr_device* device;
  bool direct; /* base is addressable by UCX */
  const struct adr_ipc_body_buffer* pieces;
  size_t n_pieces;
  int64_t size;
};

/* One body message: bytes [offset, offset + size) of the body; `direct`
 * is where UCX sends them from or receives them into in place, NULL when
 * they go through the bounce buffer. */
struct ucx_chunk {
  uint32_t index;
  uint64_t offset;
  uint64_t size;
  uint8_t* direct;
};

/* Cuts a body into chunks; in place where the body (receiver) or one
 * addressable piece covering the whole chunk (sender) allows. */
int ucx_chunks_plan(const struct ucx_body* body, bool sending, uint64_t chunk,
                    struct ucx_chunk** out, size_t* out_n, struct adr_error* error);

/* Host slots registered with UCX that chunks of unaddressable memory go
 * through (and chunks the sender composes from several pieces), and the
 * stream and events that order the device copies. */
struct ucx_bounce {
  struct adr_device* device; /* the device copies run on (NULL: host only) */
  struct adr_stream* stream;
  size_t slots;
  uint64_t chunk;
  uint8_t* base;
  ucp_mem_h memh;
  bool host_registered; /* page-locked with the device's driver */
  struct adr_event** events;
};

int ucx_bounce_init(struct ucx_bounce* b, struct ucx_worker* w, struct adr_device* device,
                    size_t slots, uint64_t chunk, struct adr_error* error);
void ucx_bounce_release(struct ucx_bounce* b, struct ucx_worker* w);

/* Moves the chunks of `body` whose `direct` is NULL through the slots,
 * copies overlapped with transfers: sending, each slot is composed from
 * the pieces (device copies on the bounce's stream) and sent; receiving,
 * each is received and copied to the body on its device. Transfers
 * already posted progress meanwhile. Waits for all of it. */
int ucx_bounce_run(struct adr_ucx_conn* conn, struct ucx_bounce* b, const struct ucx_body* body,
                   const struct ucx_chunk* chunks, size_t n, uint64_t tag_base, bool sending,
                   const char* op, struct adr_error* error);

/* Whether UCX can address `device`'s memory directly (host memory, pinned
 * host, host-accessible SVM). NULL device: yes. */
bool ucx_device_direct(struct adr_device* device);

/* Control messages: a 16-byte header (magic, type, two words) then the
 * payload. */
int ucx_ctrl_header(struct ucx_bytes* b, uint32_t type, uint32_t a, uint32_t c,
                    struct adr_error* error);
int ucx_bytes_put(struct ucx_bytes* b, const void* p, size_t n, struct adr_error* error);
/* Record batch metadata remembered for patches (ucx_meta.c): the last
 * one of each of up to UCX_META_MEMO sizes. */
#define UCX_META_MEMO 4
struct ucx_meta_memo {
  struct ucx_bytes slot[UCX_META_MEMO];
  uint64_t used[UCX_META_MEMO];
  uint64_t clock;
};
/* Remembers a record batch's encapsulated metadata (after sending or
 * receiving it whole or patched: both sides do the same). */
int ucx_meta_remember(struct ucx_meta_memo* memo, const uint8_t* meta, size_t size,
                      struct adr_error* error);
void ucx_meta_memo_free(struct ucx_meta_memo* memo);
/* Appends to `b` the patch that turns the remembered metadata of `size`
 * bytes into meta[0..size), and sets *out_patched; leaves `b` as it was
 * and *out_patched false when none of that size is remembered or the
 * patch would not be smaller than the metadata. */
int ucx_meta_patch(struct ucx_bytes* b, const struct ucx_meta_memo* memo, const uint8_t* meta,
                   size_t size, bool* out_patched, struct adr_error* error);
/* Applies the patch at patch[0..avail) (a body may follow it) to the
 * remembered metadata it names, in place: *out_meta is that metadata,
 * *out_used the patch's size. EPROTO (with the message index) for a patch
 * that is truncated, leaves the metadata, goes back, or names a size not
 * remembered. */
int ucx_meta_apply(struct ucx_meta_memo* memo, const uint8_t* patch, size_t avail,
                   size_t* out_used, const struct ucx_bytes** out_meta, const char* op,
                   uint64_t index, struct adr_error* error);
uint64_t ucx_ctrl_tag(uint16_t id, uint32_t stream, uint64_t seq);
void ucx_send_notice(struct adr_ucx_conn* conn, uint64_t tag, const void* buf, size_t size);

/* The table entries (ucx_send.c, ucx_recv.c). */
int ucx_send_stream(struct adr_ucx_conn* conn, struct ArrowDeviceArrayStream* source,
                    struct adr_ucx_send_stats* out_stats, struct adr_error* error);
int ucx_receive_stream(struct adr_ucx_conn* conn, struct adr_device* device,
                       struct ArrowDeviceArrayStream* out, struct adr_error* error);

#endif
