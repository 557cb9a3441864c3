/* SPDX-License-Identifier: Apache-2.0
 *
 * adr over UCX: Arrow device array streams between processes and hosts
 * (docs/ucx.md).
 *
 * A listener and a connector on a TCP address ("127.0.0.1:0",
 * "[::1]:4000", "host:port") set up a connection through UCX's socket
 * address connection manager; a connection then carries
 * ArrowDeviceArrayStreams from a sender (adr_ucx_send_stream, which pulls
 * batches from any producer's stream) to a receiver (adr_ucx_receive_stream,
 * an ArrowDeviceArrayStream whose batches land on the device the receiver
 * chose). The schema and each batch's structure travel as metadata messages;
 * buffer bodies travel with UCX's rendezvous protocol straight from and into
 * memory UCX can address (host, pinned host, host-accessible SVM), and
 * through a pipelined host bounce buffer for memory it cannot (OpenCL
 * buffers, Vulkan device-local memory, CUDA/HIP device memory).
 *
 * The UCX code lives in an optional module, libadr_ucx.so, built when the
 * `ucx` meson feature finds UCX and loaded with dlopen on the first call
 * here: libadr itself never links UCX. Without the module every function
 * returns ENOTSUP with the reason (module not built, not found where it was
 * searched, or UCX's libraries missing).
 *
 * Conventions as in adr.h: 0 or a positive errno value, an optional
 * `struct adr_error *` last. Errors specific to this API:
 *  - ENOTSUP: the module is not available (see above).
 *  - ECONNREFUSED / EHOSTUNREACH / EADDRINUSE: connection set-up failures.
 *  - ECONNRESET: the peer disconnected or died; every later call on the
 *    connection returns it. Nothing is leaked on either side.
 *  - ETIMEDOUT: no progress for the connection's timeout (options).
 *  - ECANCELED: the transfer was cancelled (adr_ucx_conn_cancel, or the
 *    receiver released its stream early); the peer sees ECANCELED too, or
 *    ECONNRESET when the cancelling side closed the connection first.
 *  - EPROTO: the peer sent something this side does not understand.
 *
 * Thread safety: a connection is used by one thread at a time (like an
 * Arrow stream), except adr_ucx_conn_cancel, which any thread may call at
 * any time. A listener and the connections it accepted share one UCX
 * worker: use them from one thread at a time. Different connections made
 * by adr_ucx_connect are independent.
 */
#ifndef ADR_UCX_H
#define ADR_UCX_H

#include <stddef.h>
#include <stdint.h>

#include "adr/adr.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A bound listening socket address. */
struct adr_ucx_listener;
/* One connection between two processes. */
struct adr_ucx_conn;

/* Tunables of a listener or a connection. Zero-initialise, set
 * struct_size = sizeof(struct adr_ucx_options), change what you need; a
 * zero field takes its default. NULL options: every default. */
struct adr_ucx_options {
  uint32_t struct_size;
  /* Sender: batches sent but not yet taken by the receiver (back-pressure:
   * adr_ucx_send_stream sends the next batch only below this, and holds
   * at most this many + 1 of its source's batches: the next one is pulled
   * while it waits). Default 2. */
  uint32_t max_inflight_batches;
  /* Largest message a buffer body is cut into, and the size of one bounce
   * buffer slot. Default 8 MiB; rounded up to 64 KiB. The sender's value
   * is used by both sides. */
  uint64_t chunk_size;
  /* Bounce buffer slots per direction (>= 2: copies overlap sends).
   * Default 2. */
  uint32_t bounce_slots;
  /* Milliseconds a blocking call waits without any progress before
   * ETIMEDOUT (connect, accept, a transfer stalled on the peer). Default
   * 30000; -1 waits forever. */
  int32_t timeout_ms;
  /* enum adr_ucx_flags bits. */
  uint32_t flags;
  uint32_t reserved32;
  uint64_t reserved[4];
};

/* Bits of struct adr_ucx_options.flags. */
enum adr_ucx_flags {
  /* Receiver: validate every batch fully (ADR_VALIDATE_FULL: offsets,
   * UTF-8, union ids, dictionary indices ...; device bodies are copied to
   * the host for it) before get_next hands it out. Without it the IPC
   * reader's structural checks (buffer sizes against lengths, counts
   * against the schema) are still made, so no consumer reads past a
   * buffer; the values are trusted to the peer. */
  ADR_UCX_VALIDATE_FULL = 1u << 0,
};

/* 0 when the UCX module can be loaded (it is then loaded); ENOTSUP with the
 * reason otherwise. `out_path` (may be NULL) receives the module's path or
 * "" (capacity `path_capacity`). Thread-safe. */
ADR_API int adr_ucx_available(char* out_path, size_t path_capacity, struct adr_error* error);

/* 0 when the UCX module's file is where adr_ucx_available would load it
 * from (the first place it looks that has it), without loading it: UCX's
 * libraries are not mapped and their initialisers do not run (adr-info
 * reports the module this way; whether it loads shows at its first use or
 * with adr_ucx_available). ENOTSUP naming the places looked at otherwise.
 * `out_path` (may be NULL) receives the path or "". Thread-safe. */
ADR_API int adr_ucx_module_find(char* out_path, size_t path_capacity, struct adr_error* error);

/* Listens on `address` ("IP:PORT"; port 0 picks a free one). The listener
 * accepts connections with adr_ucx_accept. Destroy with
 * adr_ucx_listener_destroy. `address` and `options` are only read during
 * the call. */
ADR_API int adr_ucx_listen(const char* address, const struct adr_ucx_options* options,
                           struct adr_ucx_listener** out, struct adr_error* error);

/* The TCP port the listener is bound to (the real one for port 0). */
ADR_API int adr_ucx_listener_port(const struct adr_ucx_listener* listener);

/* Waits up to timeout_ms (-1: forever; 0: the listener's timeout) for the
 * next connection and returns it. ETIMEDOUT when none came. The connection
 * must be destroyed before its listener. */
ADR_API int adr_ucx_accept(struct adr_ucx_listener* listener, int timeout_ms,
                           struct adr_ucx_conn** out, struct adr_error* error);

/* Stops listening and frees the listener. EBUSY (nothing done) while a
 * connection it accepted is alive. */
ADR_API int adr_ucx_listener_destroy(struct adr_ucx_listener* listener, struct adr_error* error);

/* Connects to a listener at `address` ("IP:PORT") and waits for its
 * handshake (up to the options' timeout). */
ADR_API int adr_ucx_connect(const char* address, const struct adr_ucx_options* options,
                            struct adr_ucx_conn** out, struct adr_error* error);

/* What adr_ucx_send_stream did. The caller sets struct_size. */
struct adr_ucx_send_stats {
  uint32_t struct_size;
  uint32_t reserved32;
  int64_t batches;          /* batches sent */
  int64_t body_bytes;       /* buffer bytes sent */
  int64_t direct_bytes;     /* of which sent straight from the batch's memory */
  int64_t bounced_bytes;    /* of which copied first: into the bounce buffer (memory
                               UCX cannot address, chunks spanning several
                               buffers) or into the control message (bodies up to
                               16 KiB) */
  int64_t max_inflight;     /* most batches in flight at once */
  int64_t control_messages; /* protocol messages sent: the schema, each
                               dictionary and record batch's metadata (an
                               Arrow IPC message with its framing), the end */
  int64_t control_bytes;    /* their bytes, bodies carried inline included */
  int64_t patched_messages; /* record batches whose metadata went as a patch
                               against the previous record batch's (the bytes
                               that differ; docs/ucx.md) */
  int64_t reserved[1];
};

/* Sends every batch of `source` (any device; read through get_schema and
 * get_next, not released: the caller still owns it) to the peer, which
 * reads them with adr_ucx_receive_stream, then the end of the stream.
 * Each batch's sync_event is waited on before its buffers are read; a
 * batch is released once its bytes have left (or been copied out of) its
 * buffers. Returns when the receiver has taken every batch. A source error
 * is sent to the receiver (its get_next fails with the message) and
 * returned. `out_stats` may be NULL. */
ADR_API int adr_ucx_send_stream(struct adr_ucx_conn* conn, struct ArrowDeviceArrayStream* source,
                                struct adr_ucx_send_stats* out_stats, struct adr_error* error);

/* Receives the next stream the peer sends as *out, a stream of batches on
 * `device` (NULL: host memory, CPU arrays). Waits for the peer's schema.
 * Batches on a device UCX cannot address are received through the bounce
 * buffer and carry an event recorded on a stream of the receiver's;
 * others are complete when get_next returns. The stream holds a reference
 * to the connection (which may be destroyed before the stream is
 * released). Releasing it before the end cancels the transfer (the sender
 * gets ECANCELED); get_next errors carry the peer's or the transport's
 * message. */
ADR_API int adr_ucx_receive_stream(struct adr_ucx_conn* conn, struct adr_device* device,
                                   struct ArrowDeviceArrayStream* out, struct adr_error* error);

/* Cancels whatever the connection is doing or will do: blocked calls on
 * it return ECANCELED as soon as they see it, and the peer is told. The
 * connection can then only be destroyed. Any thread, any time. */
ADR_API void adr_ucx_conn_cancel(struct adr_ucx_conn* conn);

/* Closes the connection (the peer's calls see ECONNRESET unless their
 * stream ended first) and drops the caller's reference; the memory goes
 * when a receive stream still holding it is released. */
ADR_API int adr_ucx_conn_destroy(struct adr_ucx_conn* conn, struct adr_error* error);

#ifdef __cplusplus
}
#endif

#endif /* ADR_UCX_H */
