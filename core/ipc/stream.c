/* SPDX-License-Identifier: Apache-2.0
 *
 * Arrow IPC streams over a file descriptor: adr_ipc_write_stream and
 * adr_ipc_read_stream, built on the message-level API.
 *
 * Writing: device batches come through adr's transfer stream (deep copies
 * to host memory of what each batch uses, on a worker thread that keeps
 * `prefetch` batches ahead), so the writer thread encodes and writes batch
 * i while batch i + 1 is staged, and itself never waits on a device.
 *
 * Reading: each message is read into host memory and consumed by a host
 * reader, which checks the batch completely (structure and data) before
 * anything else sees it; for a device target the whole body is then
 * uploaded with one copy and assembled again on the device by a second
 * reader (structure only: the bytes are the ones just checked).
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/uio.h>
#include <unistd.h>

#include "ipc_internal.h"

/* ---- writing -------------------------------------------------------------- */

static const uint8_t k_pad[64];

struct wout {
  int fd;
  struct iovec iov[64];
  int n;
  int64_t bytes;
};

/* A library must not kill its process with SIGPIPE when the reader of a
 * pipe goes away: the signal is blocked in this thread around the write,
 * and one it raised is consumed before the mask is restored (unless one
 * was already pending), so the caller sees EPIPE. */
struct sigpipe_guard {
  sigset_t old;
  bool was_pending;
};

static void sigpipe_block(struct sigpipe_guard* g) {
  sigset_t pending, block;
  sigemptyset(&pending);
  sigpending(&pending);
  g->was_pending = sigismember(&pending, SIGPIPE);
  sigemptyset(&block);
  sigaddset(&block, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &block, &g->old);
}

static void sigpipe_restore(struct sigpipe_guard* g, bool raised) {
  if (raised && !g->was_pending) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    struct timespec zero = {0, 0};
    while (sigtimedwait(&set, NULL, &zero) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

static int wflush(struct wout* o) {
  int i = 0;
  while (i < o->n) {
    struct sigpipe_guard g;
    sigpipe_block(&g);
    ssize_t w = writev(o->fd, o->iov + i, o->n - i);
    int e = errno;
    sigpipe_restore(&g, w < 0 && e == EPIPE);
    if (w < 0) {
      if (e == EINTR) continue;
      return e;
    }
    o->bytes += w;
    while (i < o->n && (size_t)w >= o->iov[i].iov_len) {
      w -= (ssize_t)o->iov[i].iov_len;
      i++;
    }
    if (i < o->n) {
      o->iov[i].iov_base = (uint8_t*)o->iov[i].iov_base + w;
      o->iov[i].iov_len -= (size_t)w;
    }
  }
  o->n = 0;
  return 0;
}

static int wadd(struct wout* o, const void* p, size_t n) {
  if (n == 0) return 0;
  if (o->n == (int)(sizeof(o->iov) / sizeof(o->iov[0]))) {
    int st = wflush(o);
    if (st) return st;
  }
  o->iov[o->n].iov_base = (void*)p;
  o->iov[o->n].iov_len = n;
  o->n++;
  return 0;
}

/* Metadata then the body of m (host buffers). */
static int write_message(struct wout* o, const struct adr_ipc_message* m) {
  int st = wadd(o, m->metadata, (size_t)m->metadata_size);
  int64_t at = 0;
  for (int64_t i = 0; st == 0 && i < m->n_buffers; i++) {
    const struct adr_ipc_body_buffer* b = &m->buffers[i];
    if (b->size == 0) continue;
    while (st == 0 && at < b->body_offset) {
      size_t n = (size_t)(b->body_offset - at) < sizeof(k_pad) ? (size_t)(b->body_offset - at)
                                                               : sizeof(k_pad);
      st = wadd(o, k_pad, n);
      at += (int64_t)n;
    }
    if (st == 0) st = wadd(o, b->data, (size_t)b->size);
    at += b->size;
  }
  while (st == 0 && at < m->body_size) {
    size_t n =
        (size_t)(m->body_size - at) < sizeof(k_pad) ? (size_t)(m->body_size - at) : sizeof(k_pad);
    st = wadd(o, k_pad, n);
    at += (int64_t)n;
  }
  if (st == 0) st = wflush(o);
  return st;
}

/* With options.dictionary_deltas: *from = the previous dictionary's length
 * when the new one (host memory: batches are staged) starts with the same
 * values, else 0 (send the whole dictionary). */
static int delta_start(const struct ArrowSchema* schema, int64_t k, const struct ArrowArray* old,
                       const struct ArrowArray* now, int64_t* from, struct adr_error* error) {
  *from = 0;
  if (old->length == 0 || now->length < old->length) return 0;
  const struct ArrowSchema* field = adr__ipc_dictionary_field(schema, k, NULL);
  struct ArrowDeviceArray a, b;
  memset(&a, 0, sizeof(a));
  memset(&b, 0, sizeof(b));
  a.array = *old;
  b.array = *now;
  b.array.length = old->length; /* a view of the prefix, not owned */
  b.array.null_count = -1;
  a.device_type = b.device_type = ARROW_DEVICE_CPU;
  a.device_id = b.device_id = -1;
  bool equal = false;
  int st = adr_device_array_equal(field->dictionary, &a, &b, &equal, NULL, error);
  if (st == 0 && equal) *from = old->length;
  return st;
}

int adr_ipc_write_stream(int fd, struct ArrowDeviceArrayStream* stream,
                         const struct adr_ipc_write_options* options,
                         struct adr_ipc_stream_stats* out_stats, struct adr_error* error) {
  struct ipc_where w = {.op = "adr_ipc_write_stream", .message = -1};
  adr__path_root(&w.path);
  if (stream == NULL || stream->release == NULL)
    return adr__ipc_fail(error, EINVAL, &w, "stream is NULL or released");
  if (fd < 0) {
    stream->release(stream);
    return adr__ipc_fail(error, EBADF, &w, "bad file descriptor %d", fd);
  }
  if (options != NULL && options->struct_size < offsetof(struct adr_ipc_write_options, reserved)) {
    stream->release(stream);
    return adr__ipc_fail(error, EINVAL, &w, "options->struct_size %u too small",
                         (unsigned)options->struct_size);
  }
  if (out_stats != NULL &&
      out_stats->struct_size < offsetof(struct adr_ipc_stream_stats, reserved)) {
    stream->release(stream);
    return adr__ipc_fail(error, EINVAL, &w, "out_stats->struct_size %u too small",
                         (unsigned)out_stats->struct_size);
  }
  int prefetch = options ? options->prefetch : 1;
  bool deltas = options ? options->dictionary_deltas : false;
  struct ArrowDeviceArrayStream host;
  memset(&host, 0, sizeof(host));
  int st = 0;
  if (stream->device_type != ARROW_DEVICE_CPU) {
    st = adr_transfer_stream_init(stream, NULL, prefetch < 0 ? 0 : prefetch, &host, error);
    if (st) {
      stream->release(stream);
      return st;
    }
  } else {
    host = *stream;
    stream->release = NULL;
  }
  struct ArrowSchema schema;
  memset(&schema, 0, sizeof(schema));
  struct wout o = {.fd = fd};
  struct adr_ipc_stream_stats stats = {0};
  struct adr_ipc_message m;
  memset(&m, 0, sizeof(m));
  int64_t index = 0, n_dicts = 0;
  st = adr_device_array_stream_get_schema(&host, &schema, error);
  if (st == 0) st = adr_ipc_encode_schema(&schema, &m, error);
  if (st == 0) st = adr_ipc_schema_dictionary_count(&schema, &n_dicts, error);
  w.type = ADR_IPC_MESSAGE_SCHEMA;
  if (st == 0) {
    st = write_message(&o, &m);
    if (st) st = adr__ipc_fail(error, st, (w.message = index, &w), "write: %s", strerror(st));
    adr_ipc_message_release(&m);
    index++;
    stats.messages++;
  }
  /* The previous batch, kept while dictionaries are compared. */
  struct ArrowDeviceArray prev;
  memset(&prev, 0, sizeof(prev));
  while (st == 0) {
    struct ArrowDeviceArray batch;
    st = adr_device_array_stream_next(&host, &batch, error);
    if (st || batch.array.release == NULL) break;
    for (int64_t k = 0; st == 0 && k < n_dicts; k++) {
      /* prev is kept alive until here: equal pointers cannot be a freed
       * and reused allocation. */
      const struct ArrowArray* pd =
          prev.array.release ? adr__ipc_dictionary_array(&schema, &prev.array, k) : NULL;
      const struct ArrowArray* nd = adr__ipc_dictionary_array(&schema, &batch.array, k);
      /* A batch without dictionary k is left to the encoder, whose error
       * names the field. */
      bool unchanged = false;
      if (pd != NULL && nd != NULL)
        st = adr_ipc_dictionary_unchanged(&schema, &prev, &batch, k, &unchanged, error);
      if (st) break;
      if (unchanged) continue;
      int64_t from = 0;
      if (deltas && pd != NULL) {
        st = delta_start(&schema, k, pd, nd, &from, error);
        if (st) break;
      }
      if (from > 0)
        st = adr_ipc_encode_dictionary_delta(&schema, &batch, k, from, &m, error);
      else
        st = adr_ipc_encode_dictionary_batch(&schema, &batch, k, &m, error);
      if (st) break;
      w.message = index;
      w.type = ADR_IPC_MESSAGE_DICTIONARY_BATCH;
      st = write_message(&o, &m);
      if (st) st = adr__ipc_fail(error, st, &w, "write: %s", strerror(st));
      stats.body_bytes += m.body_size;
      adr_ipc_message_release(&m);
      index++;
      stats.messages++;
    }
    if (st == 0) st = adr_ipc_encode_record_batch(&schema, &batch, &m, error);
    if (st == 0) {
      w.message = index;
      w.type = ADR_IPC_MESSAGE_RECORD_BATCH;
      st = write_message(&o, &m);
      if (st) st = adr__ipc_fail(error, st, &w, "write: %s", strerror(st));
      stats.body_bytes += m.body_size;
      stats.rows += m.length;
      adr_ipc_message_release(&m);
      index++;
      stats.messages++;
      stats.batches++;
    }
    if (prev.array.release != NULL) adr_device_array_release(&prev);
    if (n_dicts > 0)
      adr_device_array_move(&batch, &prev);
    else
      adr_device_array_release(&batch);
  }
  if (prev.array.release != NULL) adr_device_array_release(&prev);
  if (st == 0) {
    uint8_t eos[ADR_IPC_PREFIX_SIZE];
    adr_ipc_end_of_stream(eos);
    st = wadd(&o, eos, sizeof(eos));
    if (st == 0) st = wflush(&o);
    if (st) {
      w.message = index;
      w.type = ADR_IPC_MESSAGE_END;
      st = adr__ipc_fail(error, st, &w, "write: %s", strerror(st));
    }
  }
  if (schema.release) schema.release(&schema);
  if (host.release) host.release(&host);
  stats.bytes = o.bytes;
  if (out_stats != NULL) {
    uint32_t size = out_stats->struct_size;
    stats.struct_size = size;
    memcpy(out_stats, &stats, size < sizeof(stats) ? size : sizeof(stats));
  }
  return st;
}

/* ---- reading -------------------------------------------------------------- */

struct rstate {
  int fd;
  struct adr_device* device;
  struct adr_ipc_reader* host;
  struct adr_ipc_reader* dev;    /* NULL for a host target */
  struct adr__ipc_recycler* rec; /* the host bodies */
  int64_t index;
  bool done;
};

/* Reads exactly n bytes; *got receives how many came before EOF. */
static int read_full(int fd, void* buf, size_t n, size_t* got) {
  size_t at = 0;
  while (at < n) {
    ssize_t r = read(fd, (uint8_t*)buf + at, n - at);
    if (r < 0) {
      if (errno == EINTR) continue;
      *got = at;
      return errno;
    }
    if (r == 0) break;
    at += (size_t)r;
  }
  *got = at;
  return 0;
}

/* Reads and decodes the next message; its body (host, body_alloc_size
 * bytes) goes to *out_body. *out is zeroed with type END at the end. */
static int next_message(struct rstate* s, const char* op, struct adr_ipc_decoded* out,
                        void** out_body, struct adr_error* error) {
  struct ipc_where w = {.op = op, .message = s->index};
  adr__path_root(&w.path);
  memset(out, 0, sizeof(*out));
  *out_body = NULL;
  uint8_t prefix[ADR_IPC_PREFIX_SIZE];
  size_t got = 0;
  int st = read_full(s->fd, prefix, sizeof(prefix), &got);
  if (st) return adr__ipc_fail(error, st, &w, "read: %s", strerror(st));
  if (got == 0) {
    s->done = true;
    return 0; /* EOF at a message boundary: the end */
  }
  if (got < sizeof(prefix))
    return adr__ipc_fail(error, EINVAL, &w, "truncated stream: %zu of 8 prefix bytes", got);
  int64_t msize = 0;
  st = adr_ipc_decode_prefix(prefix, s->index, &msize, error);
  if (st) return st;
  if (msize == 0) {
    s->done = true;
    return 0;
  }
  uint8_t* meta = malloc((size_t)msize);
  if (meta == NULL) return adr__ipc_fail(error, ENOMEM, &w, "out of memory");
  st = read_full(s->fd, meta, (size_t)msize, &got);
  if (st == 0 && got < (size_t)msize)
    st = adr__ipc_fail(error, EINVAL, &w, "truncated stream: %zu of %lld metadata bytes", got,
                       (long long)msize);
  else if (st)
    st = adr__ipc_fail(error, st, &w, "read: %s", strerror(st));
  if (st == 0) st = adr_ipc_decode_message(meta, (size_t)msize, s->index, out, error);
  free(meta);
  if (st) return st;
  w.type = out->type;
  if (out->type != ADR_IPC_MESSAGE_SCHEMA) {
    /* A regular file tells how much is left: a body longer than that is a
     * truncated (or lying) stream, found before allocating for it. */
    struct stat sb;
    off_t here = lseek(s->fd, 0, SEEK_CUR);
    if (here >= 0 && fstat(s->fd, &sb) == 0 && S_ISREG(sb.st_mode) &&
        out->body_size > (int64_t)(sb.st_size - here)) {
      int64_t left = (int64_t)(sb.st_size - here), want = out->body_size;
      adr_ipc_decoded_release(out);
      return adr__ipc_fail(error, EINVAL, &w, "truncated stream: %lld of %lld body bytes",
                           (long long)left, (long long)want);
    }
    void* body = adr__ipc_recycler_get(s->rec, (size_t)out->body_alloc_size);
    if (body == NULL) {
      int64_t want = out->body_size;
      adr_ipc_decoded_release(out);
      return adr__ipc_fail(error, ENOMEM, &w, "out of memory for a body of %lld bytes",
                           (long long)want);
    }
    st = read_full(s->fd, body, (size_t)out->body_size, &got);
    if (st == 0 && got < (size_t)out->body_size)
      st = adr__ipc_fail(error, EINVAL, &w, "truncated stream: %zu of %lld body bytes", got,
                         (long long)out->body_size);
    else if (st)
      st = adr__ipc_fail(error, st, &w, "read: %s", strerror(st));
    if (st) {
      adr__ipc_recycler_put(s->rec, body);
      adr_ipc_decoded_release(out);
      return st;
    }
    *out_body = body;
  }
  s->index++;
  return 0;
}

/* Uploads a checked host body to the device reader. */
static int to_device(struct rstate* s, const struct adr_ipc_decoded* m, const void* host_body,
                     struct ArrowDeviceArray* out, struct adr_error* error) {
  void* body = NULL;
  struct adr_error err;
  int st = adr_alloc(s->device, (size_t)m->body_alloc_size, 64, NULL, &body, &err);
  if (st == 0 && m->body_size > 0)
    st = adr_copy(s->device, body, NULL, host_body, (size_t)m->body_size, NULL, &err);
  if (st) {
    if (body) adr_free(s->device, body, (size_t)m->body_alloc_size, NULL, NULL);
    struct ipc_where w = {
        .op = "adr_ipc_read_stream", .message = m->message_index, .type = m->type};
    adr__path_root(&w.path);
    return adr__ipc_fail(error, st, &w, "upload to %s: %s", adr_device_name(s->device),
                         err.message);
  }
  return adr_ipc_reader_consume(s->dev, m, body, out, error);
}

static int read_next(void* ctx, struct ArrowDeviceArray* out, struct adr_error* error) {
  struct rstate* s = ctx;
  memset(out, 0, sizeof(*out));
  while (!s->done) {
    struct adr_ipc_decoded m;
    void* body = NULL;
    int st = next_message(s, "adr_ipc_read_stream", &m, &body, error);
    if (st) return st;
    if (s->done) break;
    if (m.type == ADR_IPC_MESSAGE_SCHEMA) {
      struct ipc_where w = {
          .op = "adr_ipc_read_stream", .message = m.message_index, .type = m.type};
      adr__path_root(&w.path);
      adr_ipc_decoded_release(&m);
      return adr__ipc_fail(error, EINVAL, &w, "a second schema message");
    }
    /* The host reader keeps a body while a batch or dictionary uses it,
     * not a delta's, which it has appended to its dictionary: the upload
     * needs a copy of that one. */
    void* delta_body = NULL;
    if (s->dev != NULL && m.type == ADR_IPC_MESSAGE_DICTIONARY_BATCH && m.is_delta) {
      delta_body = aligned_alloc(64, (size_t)m.body_alloc_size);
      if (delta_body == NULL) {
        adr__ipc_recycler_put(s->rec, body);
        struct ipc_where w = {
            .op = "adr_ipc_read_stream", .message = m.message_index, .type = m.type};
        adr__path_root(&w.path);
        adr_ipc_decoded_release(&m);
        return adr__ipc_fail(error, ENOMEM, &w, "out of memory");
      }
      memcpy(delta_body, body, (size_t)m.body_size);
    }
    struct ArrowDeviceArray host;
    st = adr_ipc_reader_consume(s->host, &m, body, &host, error);
    if (st == 0 && s->dev != NULL)
      st = to_device(s, &m, delta_body ? delta_body : body,
                     m.type == ADR_IPC_MESSAGE_RECORD_BATCH ? out : NULL, error);
    free(delta_body);
    bool batch = m.type == ADR_IPC_MESSAGE_RECORD_BATCH;
    adr_ipc_decoded_release(&m);
    if (st) {
      if (host.array.release) adr_device_array_release(&host);
      return st;
    }
    if (batch) {
      if (s->dev == NULL)
        adr_device_array_move(&host, out);
      else
        adr_device_array_release(&host);
      return 0;
    }
  }
  return 0;
}

static void rstate_free(void* ctx) {
  struct rstate* s = ctx;
  if (s == NULL) return;
  adr_ipc_reader_destroy(s->host);
  adr_ipc_reader_destroy(s->dev);
  adr__ipc_recycler_unref(s->rec);
  free(s);
}

int adr_ipc_read_stream(int fd, struct adr_device* device, struct ArrowDeviceArrayStream* out,
                        struct adr_error* error) {
  const char* op = "adr_ipc_read_stream";
  if (out == NULL) return adr__errorf(error, EINVAL, op, NULL, "out is NULL");
  if (fd < 0) return adr__errorf(error, EBADF, op, NULL, "bad file descriptor %d", fd);
  struct rstate* s = calloc(1, sizeof(*s));
  if (s == NULL) return adr__errorf(error, ENOMEM, op, NULL, "out of memory");
  s->fd = fd;
  /* A CPU device reads like host memory: the host batches are CPU arrays. */
  if (device != NULL && adr_device_type(device) == ARROW_DEVICE_CPU) device = NULL;
  s->device = device;
  if (adr__ipc_recycler_new(&s->rec) != 0) {
    free(s);
    return adr__errorf(error, ENOMEM, op, NULL, "out of memory");
  }
  int st = adr_ipc_reader_create(NULL, NULL, &s->host, error);
  if (st == 0) adr__ipc_reader_set_recycler(s->host, s->rec);
  if (st == 0 && device != NULL) {
    struct adr_ipc_reader_options o;
    memset(&o, 0, sizeof(o));
    o.struct_size = sizeof(o);
    o.validate_full = false;
    st = adr_ipc_reader_create(device, &o, &s->dev, error);
  }
  struct adr_ipc_decoded m;
  void* body = NULL;
  memset(&m, 0, sizeof(m));
  if (st == 0) st = next_message(s, op, &m, &body, error);
  if (st == 0 && (s->done || m.type != ADR_IPC_MESSAGE_SCHEMA)) {
    adr__ipc_recycler_put(s->rec, body);
    st = adr__errorf(
        error, EINVAL, op, NULL, "message 0: %s",
        s->done ? "the stream is empty (no schema message)" : "the first message is not a schema");
  }
  if (st == 0) st = adr_ipc_reader_set_schema(s->host, &m, error);
  if (st == 0 && s->dev != NULL) st = adr_ipc_reader_set_schema(s->dev, &m, error);
  adr_ipc_decoded_release(&m);
  struct ArrowSchema schema;
  memset(&schema, 0, sizeof(schema));
  if (st == 0) st = adr_schema_copy(adr_ipc_reader_schema(s->host), &schema, error);
  ArrowDeviceType type = device != NULL ? adr_device_type(device) : ARROW_DEVICE_CPU;
  if (st == 0)
    st =
        adr_device_array_stream_from_callback(&schema, type, read_next, rstate_free, s, out, error);
  if (st) {
    if (schema.release) schema.release(&schema);
    rstate_free(s);
  }
  return st;
}
