/* SPDX-License-Identifier: Apache-2.0
 *
 * Copy-on-write on spillable buffers (public API: adr/spill.h; design:
 * docs/spill.md, "Copy-on-write"), after cuDF's BufferOwner and
 * ExposureTrackedBuffer: a spillable buffer is the *owner* of the memory,
 * a *slice* is a view of a range of it. Views share the owner; a write
 * acquire (or an expose) of a slice whose owner other slices share first
 * gives the slice a private owner holding a copy of its range, made on the
 * device; an exposed owner can no longer be tracked, so a view of it is a
 * physical copy at once.
 *
 * Locks: a slice's fields (owner, offset, holders, unsharing) and the
 * owners' slice counts are under the manager's mutex (every owner a slice
 * ever has belongs to one manager). Never held across a copy or an
 * allocation: a slice being given its private owner is marked `unsharing`
 * and the copy runs unlocked; threads that need the slice meanwhile wait
 * on the manager's condition variable. A slice that is held (acquired) is
 * never re-pointed, so a held pointer stays valid until its release.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "adr/spill.h"
#include "internal.h"
#include "spill_internal.h"

struct adr_spill_slice {
  struct adr_spill_manager* mgr; /* every owner's */
  struct adr_spill_buffer* owner;
  size_t offset, size; /* the range of the owner */
  uint32_t holders;    /* acquires not yet released */
  bool unsharing;      /* its private copy is being made */
};

/* A new owner holding a copy of `size` bytes at `src` (a held device
 * pointer of m's device), returned held once with its pointer in *out_ptr.
 * The copy is queued on `stream` (NULL: completed on return). `cow`: a
 * copy-on-write copy, counted in the statistics (not a requested one). */
static int copy_into_new(struct adr_spill_manager* m, const void* src, size_t size,
                         struct adr_stream* stream, bool cow, struct adr_spill_buffer** out,
                         void** out_ptr, struct adr_error* error) {
  struct adr_spill_buffer* nb = NULL;
  void* dp = NULL;
  int st = adr_spill_buffer_alloc(m, size, &nb, error);
  if (st == 0) st = adr_spill_buffer_acquire(nb, ADR_SPILL_ACCESS_WRITE, &dp, error);
  if (st == 0) st = adr_copy(m->device, dp, m->device, src, size, stream, error);
  if (st != 0) {
    if (dp != NULL) adr_spill_buffer_release(nb, NULL, NULL);
    if (nb != NULL) adr__spill_buffer_free_owned(nb, NULL);
    return st;
  }
  if (cow) {
    pthread_mutex_lock(&m->lock);
    m->cow_copies++;
    m->cow_bytes += size;
    pthread_mutex_unlock(&m->lock);
  }
  *out = nb;
  *out_ptr = dp;
  return 0;
}

/* Gives `s` a private owner with a copy of its range (lock held on entry
 * and return; s is shared and not held). On success the new owner is held
 * once for the caller and its device pointer is in *out_ptr. */
static int make_private(struct adr_spill_slice* s, struct adr_stream* stream, void** out_ptr,
                        struct adr_error* error) {
  struct adr_spill_buffer* old = s->owner;
  struct adr_spill_manager* m = old->mgr;
  size_t off = s->offset;
  s->unsharing = true;
  pthread_mutex_unlock(&m->lock);
  void* sp = NULL;
  struct adr_spill_buffer* nb = NULL;
  int st = adr_spill_buffer_acquire(old, ADR_SPILL_ACCESS_READ, &sp, error);
  if (st == 0) {
    st = copy_into_new(m, (char*)sp + off, s->size, stream, true, &nb, out_ptr, error);
    /* The old owner's last use by this slice is the copy. */
    adr_spill_buffer_release(old, st == 0 ? stream : NULL, NULL);
  }
  pthread_mutex_lock(&m->lock);
  s->unsharing = false;
  bool free_old = false;
  if (st == 0) {
    nb->slices = 1;
    s->owner = nb;
    s->offset = 0;
    old->slices--;
    free_old = old->slices == 0; /* the others went meanwhile */
  }
  pthread_cond_broadcast(&m->moved);
  if (free_old) {
    pthread_mutex_unlock(&m->lock);
    adr__spill_buffer_free_owned(old, NULL);
    pthread_mutex_lock(&m->lock);
  }
  return st;
}

static struct adr_spill_slice* slice_new(struct adr_spill_buffer* owner, size_t offset,
                                         size_t size) {
  struct adr_spill_slice* s = calloc(1, sizeof(*s));
  if (s == NULL) return NULL;
  s->mgr = owner != NULL ? owner->mgr : NULL;
  s->owner = owner;
  s->offset = offset;
  s->size = size;
  return s;
}

/* Wraps a fresh owner (held once or not) in a slice; frees it on failure. */
static int wrap(struct adr_spill_buffer* b, const char* op, struct adr_spill_slice** out,
                struct adr_error* error) {
  struct adr_spill_slice* s = slice_new(b, 0, b->size);
  if (s == NULL) {
    adr__spill_buffer_free_owned(b, NULL);
    return adr__errorf(error, ENOMEM, op, NULL, "ENOMEM: out of host memory");
  }
  pthread_mutex_lock(&b->mgr->lock);
  b->slices = 1;
  pthread_mutex_unlock(&b->mgr->lock);
  *out = s;
  return 0;
}

int adr_spill_slice_alloc(struct adr_spill_manager* manager, size_t size,
                          struct adr_spill_slice** out, struct adr_error* error) {
  static const char* op = "adr_spill_slice_alloc";
  if (out == NULL) return adr__errorf(error, EINVAL, op, NULL, "out is NULL");
  *out = NULL;
  struct adr_spill_buffer* b = NULL;
  int st = adr_spill_buffer_alloc(manager, size, &b, error);
  if (st) return st;
  return wrap(b, op, out, error);
}

/* A physical copy of [offset, offset + size) of s into a new slice. */
static int deep_copy(struct adr_spill_slice* s, size_t offset, size_t size,
                     struct adr_stream* stream, bool cow, const char* op,
                     struct adr_spill_slice** out, struct adr_error* error) {
  void* sp = NULL;
  int st = adr_spill_slice_acquire(s, ADR_SPILL_ACCESS_READ, stream, &sp, error);
  if (st) return st;
  struct adr_spill_buffer* nb = NULL;
  void* dp = NULL;
  st = copy_into_new(s->mgr, (char*)sp + offset, size, stream, cow, &nb, &dp, error);
  adr_spill_slice_release(s, st == 0 ? stream : NULL, NULL);
  if (st) return st;
  /* The copy is the new owner's last use so far: a spill waits for it. */
  st = adr_spill_buffer_release(nb, stream, error);
  if (st) {
    adr__spill_buffer_free_owned(nb, NULL);
    return st;
  }
  return wrap(nb, op, out, error);
}

static int check_range(const struct adr_spill_slice* s, size_t offset, size_t size, const char* op,
                       struct adr_error* error) {
  if (size == 0) return adr__errorf(error, EINVAL, op, NULL, "size is 0");
  if (offset > s->size || size > s->size - offset)
    return adr__errorf(error, EINVAL, op, NULL,
                       "range [%zu, +%zu) is outside the slice's %zu bytes", offset, size, s->size);
  return 0;
}

int adr_spill_slice_view(struct adr_spill_slice* s, size_t offset, size_t size,
                         struct adr_stream* stream, struct adr_spill_slice** out,
                         struct adr_error* error) {
  static const char* op = "adr_spill_slice_view";
  if (s == NULL || out == NULL)
    return adr__errorf(error, EINVAL, op, NULL, "%s is NULL", s ? "out" : "slice");
  *out = NULL;
  int st = check_range(s, offset, size, op, error);
  if (st) return st;
  struct adr_spill_slice* v = slice_new(NULL, 0, size);
  if (v == NULL) return adr__errorf(error, ENOMEM, op, NULL, "ENOMEM: out of host memory");
  struct adr_spill_manager* m = s->mgr;
  v->mgr = m;
  pthread_mutex_lock(&m->lock);
  while (s->unsharing) pthread_cond_wait(&m->moved, &m->lock);
  bool exposed = s->owner->exposed;
  if (!exposed) {
    v->owner = s->owner;
    v->offset = s->offset + offset;
    s->owner->slices++;
  }
  pthread_mutex_unlock(&m->lock);
  if (!exposed) {
    *out = v;
    return 0;
  }
  /* Exposed: someone outside adr may write it at any time, so sharing
   * could not be tracked; a view is a real copy. */
  free(v);
  return deep_copy(s, offset, size, stream, true, op, out, error);
}

int adr_spill_slice_copy(struct adr_spill_slice* s, struct adr_stream* stream,
                         struct adr_spill_slice** out, struct adr_error* error) {
  static const char* op = "adr_spill_slice_copy";
  if (s == NULL || out == NULL)
    return adr__errorf(error, EINVAL, op, NULL, "%s is NULL", s ? "out" : "slice");
  *out = NULL;
  return deep_copy(s, 0, s->size, stream, false, op, out, error);
}

int adr_spill_slice_free(struct adr_spill_slice* s, struct adr_error* error) {
  static const char* op = "adr_spill_slice_free";
  if (s == NULL) return 0;
  struct adr_spill_manager* m = s->mgr;
  pthread_mutex_lock(&m->lock);
  while (s->unsharing) pthread_cond_wait(&m->moved, &m->lock);
  if (s->holders != 0) {
    uint32_t n = s->holders;
    pthread_mutex_unlock(&m->lock);
    return adr__errorf(error, EBUSY, op, NULL, "the slice is acquired (%u holder%s)", n,
                       n == 1 ? "" : "s");
  }
  struct adr_spill_buffer* owner = s->owner;
  bool last = --owner->slices == 0;
  pthread_mutex_unlock(&m->lock);
  free(s);
  return last ? adr__spill_buffer_free_owned(owner, error) : 0;
}

size_t adr_spill_slice_size(const struct adr_spill_slice* s) {
  return s ? s->size : 0;
}

struct adr_spill_buffer* adr_spill_slice_buffer(struct adr_spill_slice* s) {
  if (s == NULL) return NULL;
  struct adr_spill_manager* m = s->mgr;
  pthread_mutex_lock(&m->lock);
  struct adr_spill_buffer* b = s->owner;
  pthread_mutex_unlock(&m->lock);
  return b;
}

int adr_spill_slice_shared(struct adr_spill_slice* s) {
  if (s == NULL) return 0;
  struct adr_spill_manager* m = s->mgr;
  pthread_mutex_lock(&m->lock);
  int shared = s->owner->slices > 1;
  pthread_mutex_unlock(&m->lock);
  return shared;
}

/* Waits for a running unshare of s and, for a write or an expose of a
 * shared slice, makes its private copy. Lock held on entry and return. On
 * success *out_held says whether the slice's owner is already held once
 * for the caller (a copy was made; *out_ptr is the owner's pointer). */
static int prepare_write(struct adr_spill_slice* s, bool write, struct adr_stream* stream,
                         const char* op, bool* out_held, void** out_ptr, struct adr_error* error) {
  struct adr_spill_manager* m = s->mgr;
  *out_held = false;
  while (s->unsharing) pthread_cond_wait(&m->moved, &m->lock);
  if (!write || s->owner->slices <= 1) return 0;
  if (s->holders != 0)
    return adr__errorf(error, EBUSY, op, NULL,
                       "the slice shares its buffer with %u other slice%s and is acquired (%u "
                       "holder%s): release it before writing, which makes its private copy",
                       s->owner->slices - 1, s->owner->slices == 2 ? "" : "s", s->holders,
                       s->holders == 1 ? "" : "s");
  int st = make_private(s, stream, out_ptr, error);
  if (st == 0) *out_held = true;
  return st;
}

int adr_spill_slice_acquire(struct adr_spill_slice* s, int mode, struct adr_stream* stream,
                            void** out_ptr, struct adr_error* error) {
  static const char* op = "adr_spill_slice_acquire";
  if (s == NULL || out_ptr == NULL)
    return adr__errorf(error, EINVAL, op, NULL, "%s is NULL", s ? "out_ptr" : "slice");
  if (mode != ADR_SPILL_ACCESS_READ && mode != ADR_SPILL_ACCESS_WRITE)
    return adr__errorf(error, EINVAL, op, NULL,
                       "mode %d is not ADR_SPILL_ACCESS_READ (1) or ADR_SPILL_ACCESS_WRITE (2)",
                       mode);
  struct adr_spill_manager* m = s->mgr;
  if (stream != NULL && adr_stream_device(stream) != m->device)
    return adr__errorf(error, EINVAL, op, NULL, "the stream belongs to %s, the slice to %s",
                       adr_device_name(adr_stream_device(stream)), adr_device_name(m->device));
  pthread_mutex_lock(&m->lock);
  bool held = false;
  void* p = NULL;
  int st = prepare_write(s, mode == ADR_SPILL_ACCESS_WRITE, stream, op, &held, &p, error);
  if (st) {
    pthread_mutex_unlock(&m->lock);
    return st;
  }
  s->holders++;
  struct adr_spill_buffer* owner = s->owner;
  size_t off = s->offset;
  pthread_mutex_unlock(&m->lock);
  if (!held) st = adr_spill_buffer_acquire(owner, mode, &p, error);
  if (st) {
    pthread_mutex_lock(&m->lock);
    s->holders--;
    pthread_mutex_unlock(&m->lock);
    return st;
  }
  *out_ptr = (char*)p + off;
  return 0;
}

int adr_spill_slice_release(struct adr_spill_slice* s, struct adr_stream* stream,
                            struct adr_error* error) {
  static const char* op = "adr_spill_slice_release";
  if (s == NULL) return adr__errorf(error, EINVAL, op, NULL, "slice is NULL");
  struct adr_spill_manager* m = s->mgr;
  pthread_mutex_lock(&m->lock);
  uint32_t holders = s->holders;
  struct adr_spill_buffer* owner = s->owner;
  pthread_mutex_unlock(&m->lock);
  if (holders == 0) return adr__errorf(error, EINVAL, op, NULL, "the slice is not acquired");
  /* The owner first: while the slice counts a holder it cannot be
   * re-pointed, so this is the owner the acquire took. */
  int st = adr_spill_buffer_release(owner, stream, error);
  pthread_mutex_lock(&m->lock);
  if (s->holders != 0) s->holders--;
  pthread_mutex_unlock(&m->lock);
  return st;
}

int adr_spill_slice_expose(struct adr_spill_slice* s, const char* reason, void** out_ptr,
                           struct adr_error* error) {
  static const char* op = "adr_spill_slice_expose";
  if (s == NULL) return adr__errorf(error, EINVAL, op, NULL, "slice is NULL");
  struct adr_spill_manager* m = s->mgr;
  pthread_mutex_lock(&m->lock);
  bool held = false;
  void* p = NULL;
  /* cuDF's make_single_owner_inplace: an exposed pointer may be written
   * by anyone, so it must not be shared with other slices. */
  int st = prepare_write(s, true, NULL, op, &held, &p, error);
  if (st) {
    pthread_mutex_unlock(&m->lock);
    return st;
  }
  s->holders++; /* keeps the owner while the lock is dropped */
  struct adr_spill_buffer* owner = s->owner;
  size_t off = s->offset;
  pthread_mutex_unlock(&m->lock);
  if (held) adr_spill_buffer_release(owner, NULL, NULL);
  st = adr_spill_buffer_expose(owner, reason, &p, error);
  pthread_mutex_lock(&m->lock);
  s->holders--;
  pthread_mutex_unlock(&m->lock);
  if (st == 0 && out_ptr != NULL) *out_ptr = (char*)p + off;
  return st;
}

int adr__spill_slice_copy_out(struct adr_spill_slice* s, struct adr_device* dst_device, void* dst,
                              struct adr_error* error) {
  struct adr_spill_manager* m = s->mgr;
  pthread_mutex_lock(&m->lock);
  while (s->unsharing) pthread_cond_wait(&m->moved, &m->lock);
  s->holders++; /* not re-pointed while the copy reads its owner */
  struct adr_spill_buffer* owner = s->owner;
  size_t off = s->offset;
  pthread_mutex_unlock(&m->lock);
  int st = adr__spill_buffer_copy_out(owner, off, s->size, dst_device, dst, error);
  pthread_mutex_lock(&m->lock);
  s->holders--;
  pthread_mutex_unlock(&m->lock);
  return st;
}
