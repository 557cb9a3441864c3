/* SPDX-License-Identifier: Apache-2.0
 *
 * HIP backend: sharing with other processes of the host (adr/share.h,
 * docs/sharing.md) through the runtime's IPC handles; the twin of
 * backends/cuda/cuda_share.c.
 *
 * Shareable memory is plain hipMalloc memory (IPC does not cover the
 * stream-ordered pools), listed so that only it is exported. A handle is
 * the hipIpcMemHandle_t of the allocation's base plus the offset; the
 * importer's hipIpcOpenMemHandle maps the whole allocation, and the list
 * of imports gives hipIpcCloseMemHandle its base back. The exporter's
 * allocation must outlive the importer's mapping (adr's channel keeps it).
 * Events: hipEventInterprocess | hipEventDisableTiming events and their
 * hipIpcEventHandle_t; an opened event is destroyed with hipEventDestroy.
 *
 * Lock: `share_lock` over both lists.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "adr/share.h"
#include "hip_internal.h"

struct span {
  uintptr_t base; /* allocation (exported) or mapping (imported) base */
  uintptr_t user; /* imported: what share_import returned */
  size_t size;
};

struct span_list {
  struct span* at;
  size_t n, cap;
};

static pthread_mutex_t share_lock = PTHREAD_MUTEX_INITIALIZER;
static struct span_list shared, opened;
static _Atomic size_t n_shared; /* shared.n, read without the lock */

static int list_add(struct span_list* l, struct span s) {
  pthread_mutex_lock(&share_lock);
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 16;
    struct span* p = realloc(l->at, cap * sizeof(*p));
    if (p == NULL) {
      pthread_mutex_unlock(&share_lock);
      return ENOMEM;
    }
    l->at = p;
    l->cap = cap;
  }
  l->at[l->n++] = s;
  pthread_mutex_unlock(&share_lock);
  return 0;
}

/* Removes the span whose `key` field (base or user) is p: true if found. */
static bool list_take(struct span_list* l, uintptr_t p, bool by_user, struct span* out) {
  bool found = false;
  pthread_mutex_lock(&share_lock);
  for (size_t i = 0; i < l->n; i++) {
    if ((by_user ? l->at[i].user : l->at[i].base) == p) {
      if (out) *out = l->at[i];
      l->at[i] = l->at[--l->n];
      found = true;
      break;
    }
  }
  pthread_mutex_unlock(&share_lock);
  return found;
}

static bool list_find(struct span_list* l, uintptr_t p, struct span* out) {
  bool found = false;
  pthread_mutex_lock(&share_lock);
  for (size_t i = 0; i < l->n && !found; i++) {
    if (p >= l->at[i].base && p < l->at[i].base + l->at[i].size) {
      *out = l->at[i];
      found = true;
    }
  }
  pthread_mutex_unlock(&share_lock);
  return found;
}

static bool ipc_available(void) {
  return hip_api.hipIpcGetMemHandle && hip_api.hipIpcOpenMemHandle && hip_api.hipIpcCloseMemHandle;
}

static bool ipc_events_available(void) {
  return hip_api.hipIpcGetEventHandle && hip_api.hipIpcOpenEventHandle;
}

int hip_share_caps(struct adr_backend_device* dev, uint32_t* out, struct adr_error* error) {
  (void)error;
  *out = 0;
  /* Device memory only: the runtime's IPC does not cover pinned host memory. */
  if (dev->type != ARROW_DEVICE_ROCM || !ipc_available()) return 0;
  *out = ADR_SHARE_CAP_EXPORT_MEMORY | ADR_SHARE_CAP_IMPORT_MEMORY;
  if (ipc_events_available()) *out |= ADR_SHARE_CAP_EXPORT_EVENT | ADR_SHARE_CAP_IMPORT_EVENT;
  return 0;
}

static int unsupported(struct adr_backend_device* dev, struct adr_error* error) {
  return hip_errorf(error, ENOTSUP, "%s",
                    dev->type == ARROW_DEVICE_ROCM
                        ? "the runtime has no IPC entry points (hipIpc*)"
                        : "only HIP device memory can be shared (not pinned host memory)");
}

int hip_share_alloc(struct adr_backend_device* dev, size_t size, size_t alignment, void** out,
                    struct adr_error* error) {
  if (dev->type != ARROW_DEVICE_ROCM || !ipc_available()) return unsupported(dev, error);
  if (alignment > 256)
    return hip_errorf(error, EINVAL, "shareable HIP memory is aligned to 256 bytes, not %zu",
                      alignment);
  int st = hip_device_ensure(dev, error);
  if (st == 0) st = hip_alloc_plain(dev, size, out, error);
  if (st) return st;
  if (list_add(&shared, (struct span){(uintptr_t)*out, 0, size}) != 0) {
    struct hip_current_guard g;
    if (hip_current_enter(dev, &g, NULL) == 0) {
      hip_free(dev, *out, size, &dev->default_stream, NULL);
      hip_current_leave(&g);
    }
    return hip_errorf(error, ENOMEM, "out of host memory for bookkeeping");
  }
  atomic_fetch_add(&n_shared, 1);
  return 0;
}

void hip_share_forget(const void* ptr) {
  /* On every free: no lock while nothing is shareable. */
  if (atomic_load_explicit(&n_shared, memory_order_relaxed) == 0) return;
  if (list_take(&shared, (uintptr_t)ptr, false, NULL)) atomic_fetch_sub(&n_shared, 1);
}

int hip_share_export(struct adr_backend_device* dev, const void* ptr, struct adr_share_handle* out,
                     int* out_fd, struct adr_error* error) {
  if (dev->type != ARROW_DEVICE_ROCM || !ipc_available()) return unsupported(dev, error);
  struct span s;
  if (!list_find(&shared, (uintptr_t)ptr, &s))
    return hip_errorf(error, EINVAL,
                      "%p is not shareable memory (allocate it with adr_share_alloc)", ptr);
  struct hip_current_guard g;
  int st = hip_device_ensure(dev, error);
  if (st == 0) st = hip_current_enter(dev, &g, error);
  if (st) return st;
  hipIpcMemHandle_t h;
  hipError_t r = hip_api.hipIpcGetMemHandle(&h, (void*)s.base);
  hip_current_leave(&g);
  if (r != hipSuccess) return hip_check(r, error, "hipIpcGetMemHandle of %p", ptr);
  _Static_assert(sizeof(h.reserved) <= ADR_SHARE_NATIVE_SIZE, "hipIpcMemHandle_t fits");
  out->kind = ADR_SHARE_KIND_HIP_IPC;
  out->object_id = (uint64_t)s.base;
  out->object_size = s.size;
  out->offset = (uint64_t)((uintptr_t)ptr - s.base);
  memcpy(out->native, h.reserved, sizeof(h.reserved));
  *out_fd = -1;
  return 0;
}

int hip_share_import(struct adr_backend_device* dev, const struct adr_share_handle* handle, int fd,
                     void** out, struct adr_error* error) {
  (void)fd;
  if (dev->type != ARROW_DEVICE_ROCM || !ipc_available()) return unsupported(dev, error);
  if (handle->kind != ADR_SHARE_KIND_HIP_IPC || handle->offset >= handle->object_size)
    return hip_errorf(error, EINVAL, "not a HIP IPC memory handle (kind %u)",
                      (unsigned)handle->kind);
  hipIpcMemHandle_t h;
  memcpy(h.reserved, handle->native, sizeof(h.reserved));
  struct hip_current_guard g;
  int st = hip_device_ensure(dev, error);
  if (st == 0) st = hip_current_enter(dev, &g, error);
  if (st) return st;
  void* p = NULL;
  hipError_t r = hip_api.hipIpcOpenMemHandle(&p, h, hipIpcMemLazyEnablePeerAccess);
  hip_current_leave(&g);
  if (r != hipSuccess)
    return hip_check(r, error, "hipIpcOpenMemHandle from process %d on HIP device %d",
                     (int)handle->pid, dev->ordinal);
  uintptr_t user = (uintptr_t)p + handle->offset;
  if (list_add(&opened, (struct span){(uintptr_t)p, user, (size_t)handle->object_size}) != 0) {
    if (hip_current_enter(dev, &g, NULL) == 0) {
      hip_api.hipIpcCloseMemHandle(p);
      hip_current_leave(&g);
    }
    return hip_errorf(error, ENOMEM, "out of host memory for bookkeeping");
  }
  *out = (void*)user;
  return 0;
}

int hip_share_close(struct adr_backend_device* dev, void* ptr, struct adr_error* error) {
  struct span s;
  if (!list_take(&opened, (uintptr_t)ptr, true, &s))
    return hip_errorf(error, EINVAL, "%p is not memory adr_share_import mapped", ptr);
  struct hip_current_guard g;
  int st = hip_current_enter(dev, &g, error);
  if (st) return st;
  /* Work queued on the device may still read the mapping. */
  hipError_t r = hip_api.hipStreamSynchronize(dev->default_stream.stream);
  if (r == hipSuccess) r = hip_api.hipIpcCloseMemHandle((void*)s.base);
  hip_current_leave(&g);
  return hip_check(r, error, "hipIpcCloseMemHandle of %p", ptr);
}

int hip_event_share_export(struct adr_backend_device* dev, struct adr_backend_stream* stream,
                           struct adr_backend_event** out_event, struct adr_share_handle* out,
                           int* out_fd, struct adr_error* error) {
  if (dev->type != ARROW_DEVICE_ROCM || !ipc_events_available()) return unsupported(dev, error);
  struct adr_backend_event* e = calloc(1, sizeof(*e));
  if (e == NULL) return hip_errorf(error, ENOMEM, "out of memory");
  struct hip_current_guard g;
  int st = hip_device_ensure(dev, error);
  if (st == 0) st = hip_current_enter(dev, &g, error);
  if (st) {
    free(e);
    return st;
  }
  hipIpcEventHandle_t h;
  hipError_t r =
      hip_api.hipEventCreateWithFlags(&e->event, hipEventDisableTiming | hipEventInterprocess);
  bool created = r == hipSuccess;
  if (r == hipSuccess) r = hip_api.hipEventRecord(e->event, stream->stream);
  if (r == hipSuccess) r = hip_api.hipIpcGetEventHandle(&h, e->event);
  if (r != hipSuccess && created) hip_api.hipEventDestroy(e->event);
  hip_current_leave(&g);
  if (r != hipSuccess) {
    free(e);
    return hip_check(r, error, "interprocess event on HIP device %d", dev->ordinal);
  }
  _Static_assert(sizeof(h.reserved) <= ADR_SHARE_NATIVE_SIZE, "hipIpcEventHandle_t fits");
  out->kind = ADR_SHARE_KIND_HIP_IPC;
  out->object_id = (uint64_t)(uintptr_t)e->event;
  memcpy(out->native, h.reserved, sizeof(h.reserved));
  *out_fd = -1;
  *out_event = e;
  return 0;
}

int hip_event_share_import(struct adr_backend_device* dev, const struct adr_share_handle* handle,
                           int fd, struct adr_backend_event** out, struct adr_error* error) {
  (void)fd;
  if (dev->type != ARROW_DEVICE_ROCM || !ipc_events_available()) return unsupported(dev, error);
  if (handle->kind != ADR_SHARE_KIND_HIP_IPC)
    return hip_errorf(error, EINVAL, "not a HIP IPC event handle (kind %u)",
                      (unsigned)handle->kind);
  struct adr_backend_event* e = calloc(1, sizeof(*e));
  if (e == NULL) return hip_errorf(error, ENOMEM, "out of memory");
  hipIpcEventHandle_t h;
  memcpy(h.reserved, handle->native, sizeof(h.reserved));
  struct hip_current_guard g;
  int st = hip_device_ensure(dev, error);
  if (st == 0) st = hip_current_enter(dev, &g, error);
  if (st) {
    free(e);
    return st;
  }
  hipError_t r = hip_api.hipIpcOpenEventHandle(&e->event, h);
  hip_current_leave(&g);
  if (r != hipSuccess) {
    free(e);
    return hip_check(r, error, "hipIpcOpenEventHandle from process %d", (int)handle->pid);
  }
  /* Not `imported`: an opened IPC event is released with hipEventDestroy. */
  *out = e;
  return 0;
}
