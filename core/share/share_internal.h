/* SPDX-License-Identifier: Apache-2.0
 *
 * Internal declarations shared by the files of core/share/. Nothing here
 * is ABI; the wire format is between processes of one adr build on one
 * host (native byte order), checked by a magic and a version.
 */
#ifndef ADR_CORE_SHARE_INTERNAL_H
#define ADR_CORE_SHARE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "adr/share.h"
#include "internal.h"

/* SCM_MAX_FD is 253; a few are left for the event. */
#define ADR__SHARE_MAX_FDS 250
#define ADR__SHARE_MAX_PAYLOAD (64u << 20)
#define ADR__SHARE_MSG_MAGIC 0x4d524441u /* "ADRM" */

enum adr__share_msg_type {
  ADR__SHARE_MSG_HANDLE = 1,  /* one struct adr_share_handle (adr_share_handle_send) */
  ADR__SHARE_MSG_ARRAY = 2,   /* an array (channel.c) */
  ADR__SHARE_MSG_RELEASE = 3, /* the receiver released array `id` */
};

struct adr__share_msg_header {
  uint32_t magic;
  uint32_t type;
  uint64_t id;
  uint64_t length; /* payload bytes after the header */
  uint32_t nfds;   /* descriptors sent with the header */
  uint32_t reserved;
};

/* Checks a handle against the device it is imported on: EINVAL/EBADF with
 * "[op][backend] ...". */
int adr__share_check_handle(const char* op, struct adr_device* device,
                            const struct adr_share_handle* h, uint16_t object, int fd,
                            struct adr_error* error);
/* Fills magic, version, object, device type/id, pid, uuid. */
void adr__share_fill_common(struct adr_device* device, struct adr_share_handle* h, uint16_t object);

/* Sends header + payload with `nfds` descriptors (SCM_RIGHTS) in full;
 * errno-style status (EPIPE when the peer is gone). */
int adr__share_send_msg(int sock, const struct adr__share_msg_header* header, const void* payload,
                        const int* fds, size_t nfds);
/* Reads one header and the descriptors that came with it (fds holds
 * ADR__SHARE_MAX_FDS); EPIPE at end of file, EPROTO for a bad header (its
 * descriptors closed). */
int adr__share_recv_header(int sock, struct adr__share_msg_header* out, int* fds, size_t* nfds);
int adr__share_recv_all(int sock, void* buf, size_t size);
/* 0 when readable, ETIMEDOUT, or errno. */
int adr__share_wait_readable(int fd, int timeout_ms);

/* The schema's encoding on the wire (schema.c). */
struct adr__share_buf {
  uint8_t* data;
  size_t len, cap;
  int status; /* sticky ENOMEM */
};
void adr__share_buf_put(struct adr__share_buf* b, const void* data, size_t size);
int adr__share_schema_encode(const struct ArrowSchema* schema, struct adr__share_buf* out,
                             struct adr_error* error);
int adr__share_schema_decode(const uint8_t* data, size_t size, struct ArrowSchema* out,
                             struct adr_error* error);

#endif /* ADR_CORE_SHARE_INTERNAL_H */
