/* SPDX-License-Identifier: Apache-2.0
 *
 * Arrays between processes over a Unix stream socket (adr/share.h,
 * docs/sharing.md, "Arrays").
 *
 * Messages (share_internal.h): ARRAY carries the schema, the handles of
 * the distinct shareable allocations the buffers lie in (their descriptors
 * with SCM_RIGHTS, in handle order, then the event's), the sync event's
 * handle and the tree (per node, preorder: length, null count, offset,
 * buffer and child counts, a dictionary flag; per buffer the handle index
 * and the offset in that allocation). RELEASE names an array the receiver
 * released.
 *
 * Lifetime. The sender keeps each array it sent (moved into the channel,
 * an `exported` entry registered before the bytes leave, so a release that
 * overtakes the send is not lost) until the RELEASE comes back or the
 * channel's reader thread sees the end of the socket, which happens when
 * the peer closes it or dies (the kernel closes a dead process's socket).
 * The receiver's array tree holds one reference per node on an `imported`
 * record; the last release unmaps, destroys the event and sends RELEASE.
 *
 * Locks: `lock` guards the queue, the exported list and the flags;
 * `send_lock` serialises writes to the socket and guards `closed` for
 * them. Neither is held while an array is released (that calls adr).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "adr/array.h"
#include "adr/share.h"
#include "share_internal.h"

#define OP_SEND "adr_share_array_send"
#define OP_RECV "adr_share_array_recv"
#define MAX_DEPTH 64

struct exported {
  struct exported* next;
  uint64_t id;
  struct ArrowDeviceArray array; /* moved in; released when the peer is done */
  struct adr_event* event;       /* the shared sync event, or NULL */
  bool sending;                  /* the send is still in progress */
  bool done;                     /* released by the peer (or it died) while sending */
};

struct queued {
  struct queued* next;
  struct adr__share_msg_header header;
  uint8_t* payload;
  int fds[ADR__SHARE_MAX_FDS];
  size_t nfds;
};

struct adr_share_channel {
  int sock;
  int peer_pid;
  pthread_t reader;
  atomic_int refs;
  pthread_mutex_t lock;
  pthread_cond_t arrived;
  bool peer_gone;
  int read_status;
  struct queued *head, *tail;
  struct exported* exported;
  size_t outstanding;
  uint64_t next_id;
  pthread_mutex_t send_lock;
  bool closed; /* socket closed: no more writes (guarded by send_lock) */
};

static void channel_unref(struct adr_share_channel* ch) {
  if (atomic_fetch_sub(&ch->refs, 1) != 1) return;
  pthread_mutex_destroy(&ch->lock);
  pthread_mutex_destroy(&ch->send_lock);
  pthread_cond_destroy(&ch->arrived);
  free(ch);
}

static void close_fds(int* fds, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (fds[i] >= 0) close(fds[i]);
}

static void queued_free(struct queued* q) {
  close_fds(q->fds, q->nfds);
  free(q->payload);
  free(q);
}

static void exported_release(struct exported* e) {
  adr_device_array_release(&e->array);
  if (e->event != NULL) adr_event_destroy(e->event, NULL);
  free(e);
}

/* Sends a message unless the channel is closed. */
static int channel_send(struct adr_share_channel* ch, const struct adr__share_msg_header* h,
                        const void* payload, const int* fds, size_t nfds) {
  pthread_mutex_lock(&ch->send_lock);
  int st = ch->closed ? EPIPE : adr__share_send_msg(ch->sock, h, payload, fds, nfds);
  pthread_mutex_unlock(&ch->send_lock);
  return st;
}

/* The peer released array `id` (or is gone: every entry). Entries still
 * being sent are marked and released by their sender. */
static void take_released(struct adr_share_channel* ch, bool all, uint64_t id) {
  struct exported* list = NULL;
  pthread_mutex_lock(&ch->lock);
  struct exported** at = &ch->exported;
  while (*at != NULL) {
    struct exported* e = *at;
    if (all || e->id == id) {
      if (e->sending) {
        e->done = true;
        at = &e->next;
      } else {
        *at = e->next;
        e->next = list;
        list = e;
        ch->outstanding--;
      }
      if (!all) break;
    } else {
      at = &e->next;
    }
  }
  pthread_mutex_unlock(&ch->lock);
  while (list != NULL) {
    struct exported* next = list->next;
    exported_release(list);
    list = next;
  }
}

static void* reader_main(void* arg) {
  struct adr_share_channel* ch = arg;
  int st = 0;
  for (;;) {
    struct queued* q = calloc(1, sizeof(*q));
    if (q == NULL) {
      st = ENOMEM;
      break;
    }
    st = adr__share_recv_header(ch->sock, &q->header, q->fds, &q->nfds);
    if (st == 0 && q->header.length > 0) {
      q->payload = malloc(q->header.length);
      st = q->payload ? adr__share_recv_all(ch->sock, q->payload, q->header.length) : ENOMEM;
    }
    if (st == 0 && q->header.type == ADR__SHARE_MSG_RELEASE) {
      uint64_t id = q->header.id;
      queued_free(q);
      take_released(ch, false, id);
      continue;
    }
    if (st == 0 && q->header.type != ADR__SHARE_MSG_ARRAY) st = EPROTO;
    if (st) {
      queued_free(q);
      break;
    }
    pthread_mutex_lock(&ch->lock);
    if (ch->tail)
      ch->tail->next = q;
    else
      ch->head = q;
    ch->tail = q;
    pthread_cond_broadcast(&ch->arrived);
    pthread_mutex_unlock(&ch->lock);
  }
  pthread_mutex_lock(&ch->lock);
  ch->peer_gone = true;
  ch->read_status = st;
  pthread_cond_broadcast(&ch->arrived);
  pthread_mutex_unlock(&ch->lock);
  take_released(ch, true, 0);
  return NULL;
}

/* ---- the channel ---------------------------------------------------------- */

int adr_share_channel_create(int socket_fd, struct adr_share_channel** out,
                             struct adr_error* error) {
  if (socket_fd < 0 || out == NULL)
    return adr__errorf(error, EINVAL, "adr_share_channel_create", NULL, "%s",
                       out == NULL ? "out is NULL" : "socket_fd is negative");
  int type = 0;
  socklen_t len = sizeof(type);
  if (getsockopt(socket_fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM)
    return adr__errorf(error, EINVAL, "adr_share_channel_create", NULL,
                       "descriptor %d is not a stream socket", socket_fd);
  struct adr_share_channel* ch = calloc(1, sizeof(*ch));
  if (ch == NULL)
    return adr__errorf(error, ENOMEM, "adr_share_channel_create", NULL, "out of memory");
  ch->sock = socket_fd;
  atomic_init(&ch->refs, 1);
  pthread_mutex_init(&ch->lock, NULL);
  pthread_mutex_init(&ch->send_lock, NULL);
  pthread_cond_init(&ch->arrived, NULL);
  ch->next_id = 1;
  struct ucred cred;
  len = sizeof(cred);
  if (getsockopt(socket_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) ch->peer_pid = cred.pid;
  int st = pthread_create(&ch->reader, NULL, reader_main, ch);
  if (st) {
    pthread_mutex_destroy(&ch->lock);
    pthread_mutex_destroy(&ch->send_lock);
    pthread_cond_destroy(&ch->arrived);
    free(ch);
    return adr__errorf(error, st, "adr_share_channel_create", NULL,
                       "cannot start the channel's reader thread");
  }
  *out = ch;
  return 0;
}

void adr_share_channel_destroy(struct adr_share_channel* ch) {
  if (ch == NULL) return;
  /* Wakes the reader (end of file), which releases what this side sent. */
  shutdown(ch->sock, SHUT_RDWR);
  pthread_join(ch->reader, NULL);
  pthread_mutex_lock(&ch->lock);
  struct queued* q = ch->head;
  ch->head = ch->tail = NULL;
  pthread_mutex_unlock(&ch->lock);
  while (q != NULL) {
    struct queued* next = q->next;
    queued_free(q);
    q = next;
  }
  pthread_mutex_lock(&ch->send_lock);
  ch->closed = true;
  close(ch->sock);
  pthread_mutex_unlock(&ch->send_lock);
  channel_unref(ch);
}

size_t adr_share_channel_outstanding(struct adr_share_channel* ch) {
  if (ch == NULL) return 0;
  pthread_mutex_lock(&ch->lock);
  size_t n = ch->outstanding;
  pthread_mutex_unlock(&ch->lock);
  return n;
}

int adr_share_channel_peer_pid(const struct adr_share_channel* ch) {
  return ch ? ch->peer_pid : 0;
}

/* ---- sending ---------------------------------------------------------------- */

struct wire_node {
  int64_t length, null_count, offset, n_buffers, n_children;
  int32_t has_dictionary;
  int32_t reserved;
};

struct wire_buffer {
  int32_t handle; /* index into the handles, -1 for a NULL buffer */
  int32_t reserved;
  uint64_t offset; /* in the handle's allocation */
};

struct wire_array {
  int32_t device_type;
  uint32_t n_handles;
  int64_t device_id;
  uint32_t has_event;
  uint32_t schema_length;
};

struct export_state {
  struct adr_device* dev;
  struct adr_share_handle* handles;
  int* fds;
  size_t n, cap;
  struct adr__share_buf tree;
};

static void export_state_free(struct export_state* x) {
  close_fds(x->fds, x->n);
  free(x->handles);
  free(x->fds);
  free(x->tree.data);
}

/* Exports one buffer: a handle per distinct allocation. */
static int export_buffer(struct export_state* x, const void* ptr, struct wire_buffer* out,
                         struct adr_error* error) {
  struct adr_share_handle h;
  int fd = -1;
  int st = adr_share_export(x->dev, ptr, &h, &fd, error);
  if (st) return st;
  for (size_t i = 0; i < x->n; i++) {
    if (x->handles[i].kind == h.kind && x->handles[i].object_id == h.object_id) {
      if (fd >= 0) close(fd);
      out->handle = (int32_t)i;
      out->offset = h.offset;
      return 0;
    }
  }
  if (x->n == x->cap) {
    size_t cap = x->cap ? 2 * x->cap : 8;
    struct adr_share_handle* hs = realloc(x->handles, cap * sizeof(*hs));
    if (hs) x->handles = hs;
    int* fds = hs ? realloc(x->fds, cap * sizeof(*fds)) : NULL;
    if (fds) x->fds = fds;
    if (hs == NULL || fds == NULL) {
      if (fd >= 0) close(fd);
      return adr__errorf(error, ENOMEM, OP_SEND, NULL, "out of memory");
    }
    x->cap = cap;
  }
  x->handles[x->n] = h;
  x->fds[x->n] = fd;
  out->handle = (int32_t)x->n;
  out->offset = h.offset;
  x->n++;
  return 0;
}

static int export_tree(struct export_state* x, const struct ArrowArray* a, int depth,
                       struct adr_error* error) {
  if (depth > MAX_DEPTH)
    return adr__errorf(error, EINVAL, OP_SEND, NULL, "the array nests deeper than %d", MAX_DEPTH);
  if (a->release == NULL || a->n_buffers < 0 || a->n_children < 0 ||
      (a->n_buffers > 0 && a->buffers == NULL) || (a->n_children > 0 && a->children == NULL))
    return adr__errorf(error, EINVAL, OP_SEND, NULL, "malformed array node");
  struct wire_node n = {a->length,     a->null_count,         a->offset, a->n_buffers,
                        a->n_children, a->dictionary != NULL, 0};
  adr__share_buf_put(&x->tree, &n, sizeof(n));
  for (int64_t i = 0; i < a->n_buffers; i++) {
    struct wire_buffer b = {-1, 0, 0};
    if (a->buffers[i] != NULL) {
      int st = export_buffer(x, a->buffers[i], &b, error);
      if (st) return st;
    }
    adr__share_buf_put(&x->tree, &b, sizeof(b));
  }
  for (int64_t i = 0; i < a->n_children; i++) {
    int st = export_tree(x, a->children[i], depth + 1, error);
    if (st) return st;
  }
  return a->dictionary ? export_tree(x, a->dictionary, depth + 1, error) : 0;
}

/* ---- staging: arrays whose buffers are not shareable ------------------------ */

/* Byte sizes of a compact host node's buffers (from a deep copy). */
static int node_sizes(const struct ArrowSchema* s, const struct ArrowArray* a, int64_t* sizes,
                      struct adr_error* error) {
  struct adr_format f;
  int st = adr_format_parse(s->format, &f, error);
  if (st == 0) st = adr_format_buffer_sizes(&f, a->offset, a->length, a->n_buffers, sizes, error);
  if (st) return st;
  for (int64_t i = 0; i < a->n_buffers; i++) {
    if (sizes[i] != ADR_BUFFER_SIZE_DATA_DEPENDENT) continue;
    sizes[i] = 0;
    if (f.layout == ADR_LAYOUT_VAR_BINARY && a->buffers[1] != NULL) {
      int64_t end = a->offset + a->length;
      sizes[i] = f.offset_bytes == 4 ? ((const int32_t*)a->buffers[1])[end]
                                     : ((const int64_t*)a->buffers[1])[end];
    } else if (f.layout == ADR_LAYOUT_BINARY_VIEW && a->buffers[a->n_buffers - 1] != NULL) {
      sizes[i] = ((const int64_t*)a->buffers[a->n_buffers - 1])[i - 2];
    }
    if (sizes[i] < 0) return adr__errorf(error, EINVAL, OP_SEND, NULL, "negative buffer size");
  }
  return 0;
}

#define STAGE_ALIGN 64

static int stage_size(const struct ArrowSchema* s, const struct ArrowArray* a, int depth,
                      size_t* total, struct adr_error* error) {
  if (depth > MAX_DEPTH)
    return adr__errorf(error, EINVAL, OP_SEND, NULL, "the array nests deeper than %d", MAX_DEPTH);
  int64_t* sizes = calloc((size_t)a->n_buffers + 1, sizeof(int64_t));
  if (sizes == NULL) return adr__errorf(error, ENOMEM, OP_SEND, NULL, "out of memory");
  int st = node_sizes(s, a, sizes, error);
  for (int64_t i = 0; st == 0 && i < a->n_buffers; i++)
    if (a->buffers[i] != NULL)
      *total += ((size_t)sizes[i] + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN + STAGE_ALIGN;
  free(sizes);
  for (int64_t i = 0; st == 0 && i < a->n_children; i++)
    st = stage_size(s->children[i], a->children[i], depth + 1, total, error);
  if (st == 0 && a->dictionary)
    st = stage_size(s->dictionary, a->dictionary, depth + 1, total, error);
  return st;
}

/* Builds on `cpu` an adr-owned node tree like `a` whose buffers are copies
 * in the block at *cursor (not owned by the nodes). */
static int stage_tree(struct adr_device* cpu, const struct ArrowSchema* s,
                      const struct ArrowArray* a, uint8_t** cursor, struct ArrowArray* out,
                      struct adr_error* error) {
  int st = adr_array_init(cpu, a->n_buffers, a->n_children, out, error);
  if (st) return st;
  out->length = a->length;
  out->offset = a->offset;
  out->null_count = a->null_count;
  int64_t* sizes = calloc((size_t)a->n_buffers + 1, sizeof(int64_t));
  if (sizes == NULL) st = adr__errorf(error, ENOMEM, OP_SEND, NULL, "out of memory");
  if (st == 0) st = node_sizes(s, a, sizes, error);
  for (int64_t i = 0; st == 0 && i < a->n_buffers; i++) {
    if (a->buffers[i] == NULL) continue;
    memcpy(*cursor, a->buffers[i], (size_t)sizes[i]);
    st = adr_array_set_buffer(out, i, *cursor, error);
    *cursor += ((size_t)sizes[i] + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN + STAGE_ALIGN;
  }
  free(sizes);
  for (int64_t i = 0; st == 0 && i < a->n_children; i++)
    st = stage_tree(cpu, s->children[i], a->children[i], cursor, out->children[i], error);
  if (st == 0 && a->dictionary) {
    st = adr_array_alloc_dictionary(out, error);
    if (st == 0) st = stage_tree(cpu, s->dictionary, a->dictionary, cursor, out->dictionary, error);
  }
  if (st) out->release(out);
  return st;
}

/* The staged array's block, freed after its tree by the exported entry. */
struct stage_block {
  struct adr_device* cpu;
  void* ptr;
  size_t size;
  void (*release)(struct ArrowArray*);
  void* private_data;
};

static void staged_release(struct ArrowArray* a) {
  struct stage_block* b = a->private_data;
  a->private_data = b->private_data;
  a->release = b->release;
  a->release(a);
  adr_free(b->cpu, b->ptr, b->size, NULL, NULL);
  free(b);
}

/* Copies `src` into one shareable CPU allocation: *out is a CPU device
 * array whose release frees it. The copy is complete on return. */
static int stage(const struct ArrowSchema* schema, const struct ArrowDeviceArray* src,
                 struct ArrowDeviceArray* out, struct adr_error* error) {
  struct ArrowDeviceArray host;
  int st = adr_device_array_deep_copy(schema, src, NULL, NULL, &host, NULL, error);
  if (st) return st;
  struct adr_device* cpu = NULL;
  size_t total = STAGE_ALIGN;
  void* block = NULL;
  struct stage_block* keep = NULL;
  struct ArrowArray tree;
  tree.release = NULL;
  st = adr_device_get(ARROW_DEVICE_CPU, 0, &cpu, error);
  if (st == 0) st = stage_size(schema, &host.array, 0, &total, error);
  if (st == 0) st = adr_share_alloc(cpu, total, STAGE_ALIGN, &block, error);
  if (st == 0) {
    uint8_t* cursor = block;
    st = stage_tree(cpu, schema, &host.array, &cursor, &tree, error);
  }
  adr_device_array_release(&host);
  if (st == 0 && (keep = malloc(sizeof(*keep))) == NULL)
    st = adr__errorf(error, ENOMEM, OP_SEND, NULL, "out of memory");
  if (st == 0) {
    *keep = (struct stage_block){cpu, block, total, tree.release, tree.private_data};
    tree.release = staged_release;
    tree.private_data = keep;
    st = adr_device_array_init(cpu, &tree, NULL, out, error);
    if (st) tree.release(&tree); /* frees the block too */
    return st;
  }
  if (tree.release) tree.release(&tree);
  if (block) adr_free(cpu, block, total, NULL, NULL);
  return st;
}

static bool all_shareable(struct adr_device* dev, const struct ArrowArray* a, int depth) {
  if (depth > MAX_DEPTH || a->release == NULL) return true; /* export_tree reports it */
  for (int64_t i = 0; i < a->n_buffers; i++) {
    if (a->buffers == NULL || a->buffers[i] == NULL) continue;
    struct adr_share_handle h;
    int fd = -1;
    if (adr_share_export(dev, a->buffers[i], &h, &fd, NULL) != 0) return false;
    if (fd >= 0) close(fd);
  }
  for (int64_t i = 0; i < a->n_children; i++)
    if (a->children && !all_shareable(dev, a->children[i], depth + 1)) return false;
  return a->dictionary ? all_shareable(dev, a->dictionary, depth + 1) : true;
}

int adr_share_array_send(struct adr_share_channel* ch, const struct ArrowSchema* schema,
                         struct ArrowDeviceArray* array, struct adr_error* error) {
  if (ch == NULL || schema == NULL || array == NULL || array->array.release == NULL)
    return adr__errorf(error, EINVAL, OP_SEND, NULL, "%s",
                       ch == NULL       ? "channel is NULL"
                       : schema == NULL ? "schema is NULL"
                       : array == NULL  ? "array is NULL"
                                        : "the array is released");
  struct adr_device* dev = NULL;
  int st = adr_device_array_device(array, &dev, error);
  if (st) return st;

  /* Memory that cannot be shared as it is goes through a staged copy. */
  struct ArrowDeviceArray staged;
  memset(&staged, 0, sizeof(staged));
  struct ArrowDeviceArray* send = array;
  if (!all_shareable(dev, &array->array, 0)) {
    st = stage(schema, array, &staged, error);
    if (st) return st;
    send = &staged;
    dev = NULL;
    st = adr_device_array_device(send, &dev, error);
    if (st) {
      adr_device_array_release(&staged);
      return st;
    }
  }

  struct export_state x;
  memset(&x, 0, sizeof(x));
  x.dev = dev;
  struct adr__share_buf msg;
  memset(&msg, 0, sizeof(msg));
  struct adr_event* event = NULL;
  struct adr_share_handle eh;
  int efd = -1;
  memset(&eh, 0, sizeof(eh));

  /* The sync event: shared where the backend can, else waited for here. */
  if (send->sync_event != NULL) {
    struct adr_stream* s = adr_stream_default(dev);
    uint32_t caps = 0;
    if (adr_share_caps(dev, &caps, NULL) == 0 && (caps & ADR_SHARE_CAP_EXPORT_EVENT)) {
      st = adr_device_array_wait(send, s, error);
      if (st == 0) st = adr_share_event_export(s, &event, &eh, &efd, error);
    } else {
      st = adr_device_array_wait(send, NULL, error);
    }
  }
  if (st == 0) st = export_tree(&x, &send->array, 0, error);

  struct adr__share_buf schema_bytes;
  memset(&schema_bytes, 0, sizeof(schema_bytes));
  if (st == 0) st = adr__share_schema_encode(schema, &schema_bytes, error);
  size_t nfds = 0;
  int* fds = NULL;
  if (st == 0) {
    struct wire_array w = {(int32_t)dev->type, (uint32_t)x.n, adr_device_id(dev), event != NULL,
                           (uint32_t)schema_bytes.len};
    adr__share_buf_put(&msg, &w, sizeof(w));
    adr__share_buf_put(&msg, schema_bytes.data, schema_bytes.len);
    adr__share_buf_put(&msg, x.handles, x.n * sizeof(*x.handles));
    if (event) adr__share_buf_put(&msg, &eh, sizeof(eh));
    adr__share_buf_put(&msg, x.tree.data, x.tree.len);
    if (msg.status || x.tree.status)
      st = adr__errorf(error, ENOMEM, OP_SEND, NULL, "out of memory");
  }
  if (st == 0) {
    fds = calloc(x.n + 1, sizeof(int));
    if (fds == NULL) st = adr__errorf(error, ENOMEM, OP_SEND, NULL, "out of memory");
    for (size_t i = 0; st == 0 && i < x.n; i++)
      if (x.fds[i] >= 0) fds[nfds++] = x.fds[i];
    if (st == 0 && efd >= 0) fds[nfds++] = efd;
    if (st == 0 && nfds > ADR__SHARE_MAX_FDS)
      st = adr__errorf(error, E2BIG, OP_SEND, NULL,
                       "the array needs %zu descriptors, at most %d go in one message", nfds,
                       ADR__SHARE_MAX_FDS);
  }

  struct exported* e = NULL;
  if (st == 0 && (e = calloc(1, sizeof(*e))) == NULL)
    st = adr__errorf(error, ENOMEM, OP_SEND, NULL, "out of memory");
  if (st == 0) {
    pthread_mutex_lock(&ch->lock);
    bool gone = ch->peer_gone;
    if (!gone) {
      e->id = ch->next_id++;
      e->sending = true;
      e->next = ch->exported;
      ch->exported = e;
      ch->outstanding++;
    }
    pthread_mutex_unlock(&ch->lock);
    if (gone) {
      free(e);
      e = NULL;
      st = adr__errorf(error, EPIPE, OP_SEND, NULL, "EPIPE: the peer (pid %d) is gone",
                       ch->peer_pid);
    }
  }
  if (st == 0) {
    struct adr__share_msg_header h = {
        ADR__SHARE_MSG_MAGIC, ADR__SHARE_MSG_ARRAY, e->id, msg.len, (uint32_t)nfds, 0};
    st = channel_send(ch, &h, msg.data, fds, nfds);
    if (st)
      adr__errorf(error, st, OP_SEND, NULL, "%s: cannot send the array%s", adr_status_name(st),
                  st == EPIPE ? " (the peer is gone)" : "");
  }
  bool release_now = false;
  if (e != NULL) {
    /* The entry takes the array before the reader may see it done. */
    pthread_mutex_lock(&ch->lock);
    if (st == 0) {
      adr_device_array_move(send, &e->array);
      e->event = event;
      event = NULL;
    }
    e->sending = false;
    if (st != 0 || e->done) {
      struct exported** at = &ch->exported;
      while (*at != e) at = &(*at)->next;
      *at = e->next;
      ch->outstanding--;
      release_now = st == 0;
    }
    pthread_mutex_unlock(&ch->lock);
    if (st == 0) {
      if (send == &staged) adr_device_array_release(array); /* the copy is complete */
      if (release_now) exported_release(e);
    } else {
      free(e);
    }
  }
  free(fds);
  if (efd >= 0) close(efd);
  if (event) adr_event_destroy(event, NULL);
  export_state_free(&x);
  free(schema_bytes.data);
  free(msg.data);
  if (st != 0 && send == &staged) adr_device_array_release(&staged);
  return st;
}

/* ---- receiving ---------------------------------------------------------------- */

struct mapping {
  void* ptr;     /* what adr_share_import returned */
  uint8_t* base; /* ptr - handle offset */
};

struct imported {
  atomic_int refs; /* one per node */
  struct adr_share_channel* ch;
  uint64_t id;
  struct adr_device* dev;
  struct mapping* maps;
  size_t n_maps;
  struct adr_event* event;
};

struct node {
  struct imported* imp;
  const void** buffers;
  struct ArrowArray** children;
  struct ArrowArray* child_storage;
  struct ArrowArray* dictionary;
};

static void imported_unref(struct imported* imp) {
  if (atomic_fetch_sub(&imp->refs, 1) != 1) return;
  for (size_t i = 0; i < imp->n_maps; i++)
    if (imp->maps[i].ptr) adr_share_close(imp->dev, imp->maps[i].ptr, NULL);
  if (imp->event) adr_event_destroy(imp->event, NULL);
  if (imp->ch != NULL) {
    struct adr__share_msg_header h = {
        ADR__SHARE_MSG_MAGIC, ADR__SHARE_MSG_RELEASE, imp->id, 0, 0, 0};
    (void)channel_send(imp->ch, &h, NULL, NULL, 0); /* a gone peer needs no release */
    channel_unref(imp->ch);
  }
  free(imp->maps);
  free(imp);
}

static void node_release(struct ArrowArray* a) {
  struct node* n = a->private_data;
  for (int64_t i = 0; i < a->n_children; i++)
    if (n->children[i]->release) n->children[i]->release(n->children[i]);
  if (n->dictionary && n->dictionary->release) n->dictionary->release(n->dictionary);
  struct imported* imp = n->imp;
  free(n->buffers);
  free(n->children);
  free(n->child_storage);
  free(n->dictionary);
  free(n);
  a->release = NULL;
  imported_unref(imp);
}

struct reader {
  const uint8_t* p;
  size_t left;
};

static bool take(struct reader* r, void* out, size_t n) {
  if (n > r->left) return false;
  memcpy(out, r->p, n);
  r->p += n;
  r->left -= n;
  return true;
}

/* Builds node `out` from the wire (preorder), each buffer resolved into
 * the mappings; on failure *out stays released. */
static int import_tree(struct reader* r, struct imported* imp, const struct adr_share_handle* hs,
                       struct ArrowArray* out, int depth, struct adr_error* error) {
  memset(out, 0, sizeof(*out));
  struct wire_node w;
  if (depth > MAX_DEPTH || !take(r, &w, sizeof(w)) || w.n_buffers < 0 || w.n_children < 0 ||
      (uint64_t)w.n_buffers > r->left / sizeof(struct wire_buffer) ||
      (uint64_t)w.n_children > r->left / sizeof(struct wire_node))
    return adr__errorf(error, EPROTO, OP_RECV, NULL, "malformed array tree on the wire");
  struct node* n = calloc(1, sizeof(*n));
  if (n == NULL) return adr__errorf(error, ENOMEM, OP_RECV, NULL, "out of memory");
  n->imp = imp;
  n->buffers = calloc((size_t)w.n_buffers + 1, sizeof(void*));
  n->children = calloc((size_t)w.n_children + 1, sizeof(struct ArrowArray*));
  n->child_storage = calloc((size_t)w.n_children + 1, sizeof(struct ArrowArray));
  int st = 0;
  if (n->buffers == NULL || n->children == NULL || n->child_storage == NULL)
    st = adr__errorf(error, ENOMEM, OP_RECV, NULL, "out of memory");
  for (int64_t i = 0; st == 0 && i < w.n_buffers; i++) {
    struct wire_buffer b;
    if (!take(r, &b, sizeof(b)) || b.handle < -1 ||
        (b.handle >= 0 && (size_t)b.handle >= imp->n_maps) ||
        (b.handle >= 0 && b.offset >= hs[b.handle].object_size)) {
      st = adr__errorf(error, EPROTO, OP_RECV, NULL, "malformed buffer on the wire");
      break;
    }
    n->buffers[i] = b.handle < 0 ? NULL : imp->maps[b.handle].base + b.offset;
  }
  out->length = w.length;
  out->null_count = w.null_count;
  out->offset = w.offset;
  out->n_buffers = w.n_buffers;
  out->n_children = 0;
  out->buffers = n->buffers;
  out->children = n->children;
  out->private_data = n;
  out->release = node_release;
  atomic_fetch_add(&imp->refs, 1);
  for (int64_t i = 0; st == 0 && i < w.n_children; i++) {
    n->children[i] = &n->child_storage[i];
    st = import_tree(r, imp, hs, n->children[i], depth + 1, error);
    if (st == 0) out->n_children = i + 1;
  }
  if (st == 0 && w.has_dictionary) {
    n->dictionary = calloc(1, sizeof(*n->dictionary));
    if (n->dictionary == NULL) st = adr__errorf(error, ENOMEM, OP_RECV, NULL, "out of memory");
    if (st == 0) st = import_tree(r, imp, hs, n->dictionary, depth + 1, error);
    if (st == 0) out->dictionary = n->dictionary;
  }
  if (st) node_release(out);
  return st;
}

static int import_array(struct adr_share_channel* ch, struct queued* q,
                        struct ArrowSchema* out_schema, struct ArrowDeviceArray* out,
                        struct adr_error* error) {
  struct reader r = {q->payload, q->header.length};
  struct wire_array w;
  if (!take(&r, &w, sizeof(w)) || w.schema_length > r.left ||
      (size_t)w.n_handles > (r.left - w.schema_length) / sizeof(struct adr_share_handle))
    return adr__errorf(error, EPROTO, OP_RECV, NULL, "malformed array message");
  const uint8_t* schema_at = r.p;
  r.p += w.schema_length;
  r.left -= w.schema_length;
  struct adr_share_handle* handles = NULL;
  struct adr_share_handle eh;
  if (w.n_handles) {
    handles = malloc(w.n_handles * sizeof(*handles));
    if (handles == NULL) return adr__errorf(error, ENOMEM, OP_RECV, NULL, "out of memory");
    take(&r, handles, w.n_handles * sizeof(*handles));
  }
  int st = 0;
  if (w.has_event && !take(&r, &eh, sizeof(eh)))
    st = adr__errorf(error, EPROTO, OP_RECV, NULL, "malformed array message");
  size_t need = w.has_event && eh.fd_count ? 1 : 0;
  for (uint32_t i = 0; st == 0 && i < w.n_handles; i++) need += handles[i].fd_count ? 1 : 0;
  if (st == 0 && need != q->nfds)
    st = adr__errorf(error, EPROTO, OP_RECV, NULL, "the message carries %zu descriptors, not %zu",
                     q->nfds, need);
  struct adr_device* dev = NULL;
  if (st == 0) st = adr_device_get((ArrowDeviceType)w.device_type, w.device_id, &dev, error);
  struct imported* imp = NULL;
  if (st == 0 && ((imp = calloc(1, sizeof(*imp))) == NULL ||
                  (imp->maps = calloc(w.n_handles + 1, sizeof(*imp->maps))) == NULL))
    st = adr__errorf(error, ENOMEM, OP_RECV, NULL, "out of memory");
  if (st == 0) {
    atomic_init(&imp->refs, 1); /* ours until the tree is built */
    imp->id = q->header.id;
    imp->dev = dev;
    size_t fd_at = 0;
    for (uint32_t i = 0; st == 0 && i < w.n_handles; i++) {
      int fd = handles[i].fd_count ? q->fds[fd_at++] : -1;
      st = adr_share_import(dev, &handles[i], fd, &imp->maps[i].ptr, error);
      if (st == 0) {
        imp->maps[i].base = (uint8_t*)imp->maps[i].ptr - handles[i].offset;
        imp->n_maps = i + 1;
      }
    }
    if (st == 0 && w.has_event)
      st = adr_share_event_import(dev, &eh, eh.fd_count ? q->fds[fd_at] : -1, &imp->event, error);
  }
  struct ArrowSchema schema;
  schema.release = NULL;
  if (st == 0) st = adr__share_schema_decode(schema_at, w.schema_length, &schema, error);
  struct ArrowDeviceArray result;
  memset(&result, 0, sizeof(result));
  if (st == 0) st = import_tree(&r, imp, handles, &result.array, 0, error);
  if (st == 0 && r.left != 0)
    st = adr__errorf(error, EPROTO, OP_RECV, NULL, "%zu stray bytes after the array", r.left);
  free(handles);
  if (st != 0) {
    if (result.array.release) result.array.release(&result.array);
    if (schema.release) schema.release(&schema);
  }
  if (imp != NULL) {
    /* From here the release message is the tree's to send. */
    atomic_fetch_add(&ch->refs, 1);
    imp->ch = ch;
    imported_unref(imp);
  } else {
    /* Nothing imported: tell the sender at once. */
    struct adr__share_msg_header h = {
        ADR__SHARE_MSG_MAGIC, ADR__SHARE_MSG_RELEASE, q->header.id, 0, 0, 0};
    (void)channel_send(ch, &h, NULL, NULL, 0);
  }
  if (st) return st;
  result.device_type = (ArrowDeviceType)w.device_type;
  result.device_id = w.device_type == ARROW_DEVICE_CPU ? -1 : w.device_id;
  result.sync_event = imp->event ? adr_event_native(imp->event) : NULL;
  *out = result;
  *out_schema = schema;
  return 0;
}

int adr_share_array_recv(struct adr_share_channel* ch, int timeout_ms,
                         struct ArrowSchema* out_schema, struct ArrowDeviceArray* out,
                         struct adr_error* error) {
  if (ch == NULL || out_schema == NULL || out == NULL)
    return adr__errorf(error, EINVAL, OP_RECV, NULL, "%s is NULL",
                       ch == NULL ? "channel" : "an output");
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  if (timeout_ms > 0) {
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
      deadline.tv_sec++;
      deadline.tv_nsec -= 1000000000L;
    }
  }
  pthread_mutex_lock(&ch->lock);
  int wst = 0;
  while (ch->head == NULL && !ch->peer_gone && wst == 0) {
    if (timeout_ms < 0)
      pthread_cond_wait(&ch->arrived, &ch->lock);
    else if (timeout_ms == 0)
      wst = ETIMEDOUT;
    else
      wst = pthread_cond_timedwait(&ch->arrived, &ch->lock, &deadline);
  }
  struct queued* q = ch->head;
  if (q != NULL) {
    ch->head = q->next;
    if (ch->head == NULL) ch->tail = NULL;
  }
  int read_status = ch->read_status;
  pthread_mutex_unlock(&ch->lock);
  if (q == NULL) {
    if (wst == ETIMEDOUT)
      return adr__errorf(error, ETIMEDOUT, OP_RECV, NULL, "ETIMEDOUT: no array within %d ms",
                         timeout_ms);
    return adr__errorf(error, EPIPE, OP_RECV, NULL, "EPIPE: the peer (pid %d) is gone%s%s",
                       ch->peer_pid, read_status && read_status != EPIPE ? ": " : "",
                       read_status && read_status != EPIPE ? adr_status_name(read_status) : "");
  }
  int st = import_array(ch, q, out_schema, out, error);
  queued_free(q);
  return st;
}
