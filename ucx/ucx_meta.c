/* SPDX-License-Identifier: Apache-2.0
 *
 * Control message bytes: the growable buffer, the header, and record batch
 * metadata sent as a patch (docs/ucx.md, "Wire protocol"):
 * batches of one shape encode to metadata of one size that differs from
 * an earlier batch's in a few words (the length, the buffers' sizes and
 * offsets) or not at all. Both sides remember the encapsulated metadata of
 * the last record batches of each size (a memo of UCX_META_MEMO sizes,
 * the least recently used one replaced, updated alike on both sides); the
 * sender sends the byte runs that differ from the one of the same size,
 * the receiver writes them over its copy and decodes the result, so what
 * is decoded is always a whole Arrow IPC message.
 *
 * A patch is | size:u32 | byte count:u32 | then runs of | offset:u32 |
 * length:u32 | bytes |, in increasing, non-overlapping order, all
 * little-endian; `size` names the remembered metadata it applies to.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ucx_internal.h"

void ucx_bytes_free(struct ucx_bytes* b) {
  free(b->data);
  b->data = NULL;
  b->size = b->cap = 0;
}

int ucx_bytes_put(struct ucx_bytes* b, const void* p, size_t n, struct adr_error* error) {
  if (b->size + n > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->size + n) cap *= 2;
    uint8_t* d = realloc(b->data, cap);
    if (d == NULL) return adr_error_set(error, ENOMEM, "[adr_ucx] out of memory");
    b->data = d;
    b->cap = cap;
  }
  if (n) memcpy(b->data + b->size, p, n);
  b->size += n;
  return 0;
}

int ucx_ctrl_header(struct ucx_bytes* b, uint32_t type, uint32_t a, uint32_t c,
                    struct adr_error* error) {
  uint32_t h[4] = {UCX_PROTOCOL_MAGIC, type, a, c};
  b->size = 0;
  return ucx_bytes_put(b, h, sizeof(h), error);
}

/* A run's header: fewer equal bytes than this between two changed ones
 * cost less inside one run than a second run's header. */
#define RUN_HEADER 8u

static void put32(uint8_t* p, uint32_t v) {
  memcpy(p, &v, sizeof(v));
}

static uint32_t get32(const uint8_t* p) {
  uint32_t v;
  memcpy(&v, p, sizeof(v));
  return v;
}

/* The slot remembering metadata of `size` bytes, or NULL. */
static struct ucx_bytes* memo_find(const struct ucx_meta_memo* memo, size_t size) {
  for (size_t i = 0; i < UCX_META_MEMO; i++)
    if (memo->slot[i].size == size && size > 0) return (struct ucx_bytes*)&memo->slot[i];
  return NULL;
}

static void memo_touch(struct ucx_meta_memo* memo, const struct ucx_bytes* slot) {
  memo->used[slot - memo->slot] = ++memo->clock;
}

int ucx_meta_remember(struct ucx_meta_memo* memo, const uint8_t* meta, size_t size,
                      struct adr_error* error) {
  struct ucx_bytes* slot = memo_find(memo, size);
  if (slot == NULL) {
    size_t lru = 0;
    for (size_t i = 1; i < UCX_META_MEMO; i++)
      if (memo->used[i] < memo->used[lru]) lru = i;
    slot = &memo->slot[lru];
  }
  slot->size = 0;
  int st = ucx_bytes_put(slot, meta, size, error);
  if (st) slot->size = 0;
  memo_touch(memo, slot);
  return st;
}

void ucx_meta_memo_free(struct ucx_meta_memo* memo) {
  for (size_t i = 0; i < UCX_META_MEMO; i++) ucx_bytes_free(&memo->slot[i]);
}

int ucx_meta_patch(struct ucx_bytes* b, const struct ucx_meta_memo* memo, const uint8_t* meta,
                   size_t size, bool* out_patched, struct adr_error* error) {
  *out_patched = false;
  const struct ucx_bytes* prev = memo_find(memo, size);
  if (prev == NULL || size > UINT32_MAX) return 0;
  size_t start = b->size;
  uint8_t head[8];
  put32(head, (uint32_t)size);
  int st = ucx_bytes_put(b, head, sizeof(head), error);
  /* Equal metadata (batches of one length) is the common case. */
  size_t i = memcmp(prev->data, meta, size) == 0 ? size : 0;
  while (!st && i < size) {
    /* Equal words skipped 8 bytes at a time. */
    uint64_t x, y;
    if (i + 8 <= size && (memcpy(&x, prev->data + i, 8), memcpy(&y, meta + i, 8), x == y)) {
      i += 8;
      continue;
    }
    if (prev->data[i] == meta[i]) {
      i++;
      continue;
    }
    /* A run from i to the last changed byte followed by fewer than
     * RUN_HEADER equal ones. */
    size_t end = i + 1, equal = 0;
    for (size_t k = end; k < size && equal < RUN_HEADER; k++) {
      if (prev->data[k] == meta[k]) {
        equal++;
      } else {
        equal = 0;
        end = k + 1;
      }
    }
    uint8_t h[RUN_HEADER];
    put32(h, (uint32_t)i);
    put32(h + 4, (uint32_t)(end - i));
    /* Not worth it once the patch is as large as the metadata. */
    if (b->size - start + sizeof(h) + (end - i) >= size) {
      b->size = start;
      return 0;
    }
    st = ucx_bytes_put(b, h, sizeof(h), error);
    if (!st) st = ucx_bytes_put(b, meta + i, end - i, error);
    i = end;
  }
  if (st) {
    b->size = start;
    return st;
  }
  put32(b->data + start + 4, (uint32_t)(b->size - start - sizeof(head)));
  *out_patched = true;
  return 0;
}

int ucx_meta_apply(struct ucx_meta_memo* memo, const uint8_t* patch, size_t avail, size_t* out_used,
                   const struct ucx_bytes** out_meta, const char* op, uint64_t index,
                   struct adr_error* error) {
  if (avail < 8 || get32(patch + 4) > avail - 8)
    return adr_error_set(error, EPROTO, "[%s][ucx] message %llu: a metadata patch past its message",
                         op, (unsigned long long)index);
  struct ucx_bytes* prev = memo_find(memo, get32(patch));
  if (prev == NULL)
    return adr_error_set(error, EPROTO,
                         "[%s][ucx] message %llu: a patch of %u-byte metadata, and no record batch "
                         "before it had metadata of that size",
                         op, (unsigned long long)index, get32(patch));
  size_t n = get32(patch + 4);
  const uint8_t* p = patch + 8;
  size_t at = 0, next = 0; /* runs must not go back */
  while (at < n) {
    if (n - at < RUN_HEADER)
      return adr_error_set(error, EPROTO, "[%s][ucx] message %llu: a truncated metadata patch", op,
                           (unsigned long long)index);
    size_t off = get32(p + at), len = get32(p + at + 4);
    at += RUN_HEADER;
    if (len == 0 || len > n - at || off < next || off > prev->size || len > prev->size - off)
      return adr_error_set(error, EPROTO,
                           "[%s][ucx] message %llu: a metadata patch run of %zu bytes at %zu "
                           "outside the %zu-byte metadata",
                           op, (unsigned long long)index, len, off, prev->size);
    memcpy(prev->data + off, p + at, len);
    at += len;
    next = off + len;
  }
  memo_touch(memo, prev);
  *out_used = 8 + n;
  *out_meta = prev;
  return 0;
}
