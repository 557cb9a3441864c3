/* SPDX-License-Identifier: Apache-2.0
 *
 * Buffer-level sharing between processes (adr/share.h, docs/sharing.md):
 * shareable allocations, export/import of memory handles, and moving one
 * handle with its descriptor over a Unix socket. The backends do the
 * native work through the ABI 1.2 slots (dispatch.c); this file checks
 * arguments, fills the handle's common fields and frames messages.
 *
 * Shareable allocations are made through a handler of the allocation front
 * end (alloc.c: adr_alloc_with), so they are recorded like any allocation
 * and adr_free returns them to the backend's free slot, never to the
 * caching pool.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "adr/memory.h"
#include "adr/share.h"
#include "dispatch.h"
#include "share_internal.h"

/* ---- capabilities ------------------------------------------------------- */

int adr_share_caps(struct adr_device* device, uint32_t* out_caps, struct adr_error* error) {
  if (device == NULL || out_caps == NULL)
    return adr__errorf(error, EINVAL, "adr_share_caps", NULL, "%s is NULL",
                       device ? "out_caps" : "device");
  if (adr__shut_down()) return adr__shutdown_error(error, "adr_share_caps", device);
  uint32_t caps = 0;
  int st = adr__dispatch_share_caps(device, "adr_share_caps", &caps, error);
  if (st) return st;
  /* Whatever cannot share its own memory can still send arrays: the
   * channel stages them through shareable CPU memory. */
  if (!(caps & ADR_SHARE_CAP_EXPORT_MEMORY)) caps |= ADR_SHARE_CAP_STAGED;
  *out_caps = caps;
  return 0;
}

void adr_share_caps_text(uint32_t caps, char* out, size_t capacity) {
  if (out == NULL || capacity == 0) return;
  static const struct {
    uint32_t bit;
    const char* name;
  } names[] = {
      {ADR_SHARE_CAP_EXPORT_MEMORY, "memory-export"},
      {ADR_SHARE_CAP_IMPORT_MEMORY, "memory-import"},
      {ADR_SHARE_CAP_EXPORT_EVENT, "event-export"},
      {ADR_SHARE_CAP_IMPORT_EVENT, "event-import"},
      {ADR_SHARE_CAP_STAGED, "staged"},
  };
  size_t len = 0;
  out[0] = '\0';
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    if (!(caps & names[i].bit)) continue;
    int n = snprintf(out + len, capacity - len, "%s%s", len ? "," : "", names[i].name);
    if (n < 0 || (size_t)n >= capacity - len) return;
    len += (size_t)n;
  }
  if (len == 0) snprintf(out, capacity, "none");
}

/* ---- shareable allocations ----------------------------------------------- */

static int share_handler_alloc(void* ctx, struct adr_device* dev, size_t size, size_t alignment,
                               struct adr_stream* stream, void** out, struct adr_error* error) {
  (void)ctx;
  (void)stream; /* adr_share_alloc passes none: the memory is ready at once */
  return adr__dispatch_share_alloc(dev, "adr_share_alloc", size, alignment, out, error);
}

static int share_handler_free(void* ctx, struct adr_device* dev, void* ptr, size_t size,
                              struct adr_stream* stream, struct adr_error* error) {
  (void)ctx;
  struct adr_backend_stream* s = stream ? stream->handle : dev->default_stream.handle;
  return adr__dispatch_free(dev, "adr_free", ptr, size, s, error);
}

static const struct adr_allocator share_handler = {
    .struct_size = sizeof(struct adr_allocator),
    .version = ADR_ALLOCATOR_VERSION,
    .name = "share",
    .alloc = share_handler_alloc,
    .free = share_handler_free,
};

int adr_share_alloc(struct adr_device* device, size_t size, size_t alignment, void** out,
                    struct adr_error* error) {
  if (device != NULL && out != NULL && !adr__shut_down()) {
    uint32_t caps = 0;
    int st = adr__dispatch_share_caps(device, "adr_share_alloc", &caps, error);
    if (st) return st;
    if (!(caps & ADR_SHARE_CAP_EXPORT_MEMORY))
      return adr__errorf(error, ENOTSUP, "adr_share_alloc", device->backend->name,
                         "ENOTSUP: %s has no memory shareable with other processes%s", device->name,
                         device->type == ARROW_DEVICE_OPENCL
                             ? " (OpenCL defines no handle for it; adr_share_array_send stages "
                               "arrays through shareable CPU memory)"
                             : "");
  }
  return adr__alloc_common("adr_share_alloc", device, &share_handler, size, alignment, NULL,
                           __builtin_return_address(0), out, error);
}

/* ---- export / import ----------------------------------------------------- */

int adr__share_check_handle(const char* op, struct adr_device* device,
                            const struct adr_share_handle* h, uint16_t object, int fd,
                            struct adr_error* error) {
  const char* bk = device->backend->name;
  if (h->magic != ADR_SHARE_MAGIC)
    return adr__errorf(error, EINVAL, op, bk, "not an adr share handle (magic 0x%08x)", h->magic);
  if (h->version != ADR_SHARE_HANDLE_VERSION)
    return adr__errorf(error, EINVAL, op, bk, "share handle version %u (this adr reads %d)",
                       (unsigned)h->version, ADR_SHARE_HANDLE_VERSION);
  if (h->object != object)
    return adr__errorf(error, EINVAL, op, bk, "the handle is of %s, not of %s",
                       h->object == ADR_SHARE_OBJECT_EVENT ? "an event" : "memory",
                       object == ADR_SHARE_OBJECT_EVENT ? "an event" : "memory");
  if ((ArrowDeviceType)h->device_type != device->type)
    return adr__errorf(error, EINVAL, op, bk, "the handle is of a %s device, %s is %s",
                       adr_device_type_name((ArrowDeviceType)h->device_type)
                           ? adr_device_type_name((ArrowDeviceType)h->device_type)
                           : "foreign",
                       device->name, adr_device_type_name(device->type));
  if (h->fd_count > 1)
    return adr__errorf(error, EINVAL, op, bk, "the handle says %u descriptors (at most 1)",
                       (unsigned)h->fd_count);
  if (h->fd_count == 1 && fd < 0)
    return adr__errorf(error, EBADF, op, bk, "the handle needs its file descriptor (fd is %d)", fd);
  static const uint8_t zero[16];
  if ((device->identity & ADR_DEVICE_HAS_UUID) && memcmp(h->uuid, zero, 16) != 0 &&
      memcmp(h->uuid, device->uuid, 16) != 0)
    return adr__errorf(error, EINVAL, op, bk,
                       "the handle is of another physical device than %s (UUIDs differ)",
                       device->name);
  return 0;
}

void adr__share_fill_common(struct adr_device* device, struct adr_share_handle* h,
                            uint16_t object) {
  h->magic = ADR_SHARE_MAGIC;
  h->version = ADR_SHARE_HANDLE_VERSION;
  h->object = object;
  h->device_type = (int32_t)device->type;
  h->device_id = device->id;
  h->pid = (int32_t)getpid();
  h->flags = 0;
  if (device->identity & ADR_DEVICE_HAS_UUID) memcpy(h->uuid, device->uuid, 16);
  memset(h->reserved, 0, sizeof(h->reserved));
}

int adr_share_export(struct adr_device* device, const void* ptr, struct adr_share_handle* out,
                     int* out_fd, struct adr_error* error) {
  if (device == NULL || ptr == NULL || out == NULL || out_fd == NULL)
    return adr__errorf(error, EINVAL, "adr_share_export", NULL, "%s is NULL",
                       device == NULL ? "device"
                       : ptr == NULL  ? "ptr"
                       : out == NULL  ? "out"
                                      : "out_fd");
  if (adr__shut_down()) return adr__shutdown_error(error, "adr_share_export", device);
  struct adr_share_handle h;
  memset(&h, 0, sizeof(h));
  int fd = -1;
  int st = adr__dispatch_share_export(device, "adr_share_export", ptr, &h, &fd, error);
  if (st) return st;
  adr__share_fill_common(device, &h, ADR_SHARE_OBJECT_MEMORY);
  h.fd_count = fd >= 0 ? 1 : 0;
  *out = h;
  *out_fd = fd;
  return 0;
}

int adr_share_import(struct adr_device* device, const struct adr_share_handle* handle, int fd,
                     void** out, struct adr_error* error) {
  if (device == NULL || handle == NULL || out == NULL)
    return adr__errorf(error, EINVAL, "adr_share_import", NULL, "%s is NULL",
                       device == NULL   ? "device"
                       : handle == NULL ? "handle"
                                        : "out");
  if (adr__shut_down()) return adr__shutdown_error(error, "adr_share_import", device);
  int st = adr__share_check_handle("adr_share_import", device, handle, ADR_SHARE_OBJECT_MEMORY, fd,
                                   error);
  if (st) return st;
  return adr__dispatch_share_import(device, "adr_share_import", handle, handle->fd_count ? fd : -1,
                                    out, error);
}

int adr_share_close(struct adr_device* device, void* ptr, struct adr_error* error) {
  if (device == NULL || ptr == NULL)
    return adr__errorf(error, EINVAL, "adr_share_close", NULL, "%s is NULL",
                       device ? "ptr" : "device");
  if (adr__shut_down()) return adr__shutdown_error(error, "adr_share_close", device);
  return adr__dispatch_share_close(device, "adr_share_close", ptr, error);
}

/* ---- messages over a Unix socket ---------------------------------------- */

int adr__share_wait_readable(int fd, int timeout_ms) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  for (;;) {
    int n = poll(&p, 1, timeout_ms);
    if (n > 0) return 0;
    if (n == 0) return ETIMEDOUT;
    if (errno != EINTR) return errno;
  }
}

int adr__share_send_msg(int sock, const struct adr__share_msg_header* header, const void* payload,
                        const int* fds, size_t nfds) {
  struct iovec iov[2] = {{(void*)header, sizeof(*header)}, {(void*)payload, header->length}};
  union {
    char buf[CMSG_SPACE(sizeof(int) * ADR__SHARE_MAX_FDS)];
    struct cmsghdr align;
  } control;
  if (nfds > ADR__SHARE_MAX_FDS) return E2BIG;
  struct msghdr m;
  memset(&m, 0, sizeof(m));
  m.msg_iov = iov;
  m.msg_iovlen = header->length ? 2 : 1;
  if (nfds > 0) {
    memset(&control, 0, sizeof(control));
    m.msg_control = control.buf;
    m.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    struct cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
  }
  size_t total = sizeof(*header) + header->length;
  size_t sent = 0;
  while (sent < total) {
    ssize_t n = sendmsg(sock, &m, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno == ECONNRESET ? EPIPE : errno;
    }
    sent += (size_t)n;
    /* The descriptors went with the first bytes; skip what was written. */
    m.msg_control = NULL;
    m.msg_controllen = 0;
    size_t skip = (size_t)n;
    while (m.msg_iovlen > 0 && skip >= m.msg_iov[0].iov_len) {
      skip -= m.msg_iov[0].iov_len;
      m.msg_iov++;
      m.msg_iovlen--;
    }
    if (m.msg_iovlen > 0) {
      m.msg_iov[0].iov_base = (char*)m.msg_iov[0].iov_base + skip;
      m.msg_iov[0].iov_len -= skip;
    }
  }
  return 0;
}

static void close_fds(int* fds, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (fds[i] >= 0) close(fds[i]);
}

int adr__share_recv_header(int sock, struct adr__share_msg_header* out, int* fds, size_t* nfds) {
  union {
    char buf[CMSG_SPACE(sizeof(int) * ADR__SHARE_MAX_FDS)];
    struct cmsghdr align;
  } control;
  size_t got = 0;
  *nfds = 0;
  while (got < sizeof(*out)) {
    struct iovec iov = {(char*)out + got, sizeof(*out) - got};
    struct msghdr m;
    memset(&m, 0, sizeof(m));
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control.buf;
    m.msg_controllen = sizeof(control.buf);
    ssize_t n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int st = n == 0 || errno == ECONNRESET ? EPIPE : errno;
      close_fds(fds, *nfds);
      *nfds = 0;
      return st;
    }
    for (struct cmsghdr* c = CMSG_FIRSTHDR(&m); c != NULL; c = CMSG_NXTHDR(&m, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      int tmp[ADR__SHARE_MAX_FDS];
      memcpy(tmp, CMSG_DATA(c), k * sizeof(int));
      for (size_t i = 0; i < k; i++) {
        if (*nfds < ADR__SHARE_MAX_FDS)
          fds[(*nfds)++] = tmp[i];
        else
          close(tmp[i]);
      }
    }
    if (m.msg_flags & MSG_CTRUNC) {
      close_fds(fds, *nfds);
      *nfds = 0;
      return EPROTO;
    }
    got += (size_t)n;
  }
  if (out->magic != ADR__SHARE_MSG_MAGIC || out->nfds != *nfds ||
      out->length > ADR__SHARE_MAX_PAYLOAD) {
    close_fds(fds, *nfds);
    *nfds = 0;
    return EPROTO;
  }
  return 0;
}

int adr__share_recv_all(int sock, void* buf, size_t size) {
  size_t got = 0;
  while (got < size) {
    ssize_t n = recv(sock, (char*)buf + got, size - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n == 0 || errno == ECONNRESET ? EPIPE : errno;
    got += (size_t)n;
  }
  return 0;
}

int adr_share_handle_send(int socket_fd, const struct adr_share_handle* handle, int fd,
                          struct adr_error* error) {
  if (socket_fd < 0 || handle == NULL)
    return adr__errorf(error, EINVAL, "adr_share_handle_send", NULL, "%s",
                       handle == NULL ? "handle is NULL" : "socket_fd is negative");
  if (handle->fd_count > 0 && fd < 0)
    return adr__errorf(error, EBADF, "adr_share_handle_send", NULL,
                       "the handle needs its file descriptor (fd is %d)", fd);
  struct adr__share_msg_header h = {.magic = ADR__SHARE_MSG_MAGIC,
                                    .type = ADR__SHARE_MSG_HANDLE,
                                    .length = sizeof(*handle),
                                    .nfds = handle->fd_count > 0 ? 1u : 0u};
  int st = adr__share_send_msg(socket_fd, &h, handle, &fd, h.nfds);
  if (st)
    return adr__errorf(error, st, "adr_share_handle_send", NULL, "%s: sendmsg failed%s",
                       adr_status_name(st), st == EPIPE ? " (the peer closed the socket)" : "");
  return 0;
}

int adr_share_handle_recv(int socket_fd, int timeout_ms, struct adr_share_handle* out, int* out_fd,
                          struct adr_error* error) {
  if (socket_fd < 0 || out == NULL || out_fd == NULL)
    return adr__errorf(error, EINVAL, "adr_share_handle_recv", NULL, "%s",
                       socket_fd < 0 ? "socket_fd is negative" : "an output is NULL");
  int st = adr__share_wait_readable(socket_fd, timeout_ms);
  if (st)
    return adr__errorf(error, st, "adr_share_handle_recv", NULL, "%s: %s", adr_status_name(st),
                       st == ETIMEDOUT ? "no handle within the timeout" : "poll failed");
  struct adr__share_msg_header h;
  int fds[ADR__SHARE_MAX_FDS];
  size_t nfds = 0;
  st = adr__share_recv_header(socket_fd, &h, fds, &nfds);
  if (st == 0 && (h.type != ADR__SHARE_MSG_HANDLE || h.length != sizeof(*out) || nfds > 1)) {
    close_fds(fds, nfds);
    st = EPROTO;
  }
  if (st == 0) {
    st = adr__share_recv_all(socket_fd, out, sizeof(*out));
    if (st) close_fds(fds, nfds);
  }
  if (st)
    return adr__errorf(error, st, "adr_share_handle_recv", NULL, "%s: %s", adr_status_name(st),
                       st == EPIPE    ? "the peer closed the socket"
                       : st == EPROTO ? "not a handle message"
                                      : "recvmsg failed");
  *out_fd = nfds ? fds[0] : -1;
  return 0;
}
