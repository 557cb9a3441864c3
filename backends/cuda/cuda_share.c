/* SPDX-License-Identifier: Apache-2.0
 *
 * CUDA backend: sharing with other processes of the host (adr/share.h,
 * docs/sharing.md) through the driver's IPC handles.
 *
 * Shareable memory is plain cuMemAlloc memory (IPC does not cover the
 * stream-ordered pools), kept in a list so that only it is exported (an
 * exported pool chunk would hand the peer its neighbours) and so that free
 * finds it. A handle is the CUipcMemHandle of the allocation's base plus
 * the offset; the importer's cuIpcOpenMemHandle maps the whole allocation.
 * The driver requires the exporter's allocation to outlive the importer's
 * mapping: adr's channel keeps it until the peer released it or died.
 * Events: CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING events and their
 * CUipcEventHandle; an opened event is destroyed with cuEventDestroy.
 *
 * Lock: `shared_lock` over the list of shareable allocations.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "adr/share.h"
#include "cuda_internal.h"

struct shared_alloc {
  uintptr_t base;
  size_t size;
};

static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shared_alloc* shared;
static size_t n_shared, cap_shared;
static _Atomic size_t n_live; /* n_shared, read without the lock */

static bool ipc_available(void) {
  return cuda_api.cuIpcGetMemHandle && cuda_api.cuIpcOpenMemHandle &&
         cuda_api.cuIpcCloseMemHandle && cuda_api.cuMemGetAddressRange;
}

static bool ipc_events_available(void) {
  return cuda_api.cuIpcGetEventHandle && cuda_api.cuIpcOpenEventHandle;
}

int cuda_share_caps(struct adr_backend_device* dev, uint32_t* out, struct adr_error* error) {
  (void)error;
  *out = 0;
  /* Device memory only: the driver's IPC covers neither pinned host nor
   * managed memory. */
  if (dev->type != ARROW_DEVICE_CUDA || !ipc_available()) return 0;
  *out = ADR_SHARE_CAP_EXPORT_MEMORY | ADR_SHARE_CAP_IMPORT_MEMORY;
  if (ipc_events_available()) *out |= ADR_SHARE_CAP_EXPORT_EVENT | ADR_SHARE_CAP_IMPORT_EVENT;
  return 0;
}

static int unsupported(struct adr_backend_device* dev, struct adr_error* error) {
  return cuda_errorf(error, ENOTSUP,
                     dev->type == ARROW_DEVICE_CUDA
                         ? "the driver has no IPC entry points (cuIpc*)"
                         : "only CUDA device memory can be shared (not %s memory)",
                     dev->type == ARROW_DEVICE_CUDA_HOST ? "pinned host" : "managed");
}

int cuda_share_alloc(struct adr_backend_device* dev, size_t size, size_t alignment, void** out,
                     struct adr_error* error) {
  if (dev->type != ARROW_DEVICE_CUDA || !ipc_available()) return unsupported(dev, error);
  if (alignment > 256)
    return cuda_errorf(error, EINVAL, "shareable CUDA memory is aligned to 256 bytes, not %zu",
                       alignment);
  pthread_mutex_lock(&shared_lock);
  bool room = n_shared < cap_shared;
  if (!room) {
    size_t cap = cap_shared ? 2 * cap_shared : 16;
    struct shared_alloc* p = realloc(shared, cap * sizeof(*p));
    if (p != NULL) {
      shared = p;
      cap_shared = cap;
      room = true;
    }
  }
  pthread_mutex_unlock(&shared_lock);
  if (!room) return cuda_errorf(error, ENOMEM, "out of host memory for bookkeeping");
  struct cuda_current_guard g;
  int st = cuda_device_ensure(dev, error);
  if (st == 0) st = cuda_current_enter(dev, &g, error);
  if (st) return st;
  CUdeviceptr p = 0;
  CUresult r = cuda_api.cuMemAlloc(&p, size);
  cuda_current_leave(&g);
  if (r != CUDA_SUCCESS)
    return cuda_check(r, error, "%zu shareable bytes on CUDA device %d (cuMemAlloc)", size,
                      dev->ordinal);
  pthread_mutex_lock(&shared_lock);
  shared[n_shared++] = (struct shared_alloc){(uintptr_t)p, size};
  atomic_fetch_add(&n_live, 1);
  pthread_mutex_unlock(&shared_lock);
  *out = (void*)(uintptr_t)p;
  return 0;
}

bool cuda_share_forget(const void* ptr) {
  /* On every free: no lock while nothing is shareable. */
  if (atomic_load_explicit(&n_live, memory_order_relaxed) == 0) return false;
  bool found = false;
  pthread_mutex_lock(&shared_lock);
  for (size_t i = 0; i < n_shared; i++) {
    if (shared[i].base == (uintptr_t)ptr) {
      shared[i] = shared[--n_shared];
      atomic_fetch_sub(&n_live, 1);
      found = true;
      break;
    }
  }
  pthread_mutex_unlock(&shared_lock);
  return found;
}

static bool is_shared(uintptr_t p) {
  bool found = false;
  pthread_mutex_lock(&shared_lock);
  for (size_t i = 0; i < n_shared && !found; i++)
    found = p >= shared[i].base && p < shared[i].base + shared[i].size;
  pthread_mutex_unlock(&shared_lock);
  return found;
}

int cuda_share_export(struct adr_backend_device* dev, const void* ptr, struct adr_share_handle* out,
                      int* out_fd, struct adr_error* error) {
  if (dev->type != ARROW_DEVICE_CUDA || !ipc_available()) return unsupported(dev, error);
  if (!is_shared((uintptr_t)ptr))
    return cuda_errorf(error, EINVAL,
                       "%p is not shareable memory (allocate it with adr_share_alloc)", ptr);
  struct cuda_current_guard g;
  int st = cuda_device_ensure(dev, error);
  if (st == 0) st = cuda_current_enter(dev, &g, error);
  if (st) return st;
  CUdeviceptr base = 0;
  size_t size = 0;
  CUipcMemHandle h;
  CUresult r = cuda_api.cuMemGetAddressRange(&base, &size, (CUdeviceptr)(uintptr_t)ptr);
  if (r == CUDA_SUCCESS) r = cuda_api.cuIpcGetMemHandle(&h, base);
  cuda_current_leave(&g);
  if (r != CUDA_SUCCESS) return cuda_check(r, error, "cuIpcGetMemHandle of %p", ptr);
  _Static_assert(sizeof(h.reserved) <= ADR_SHARE_NATIVE_SIZE, "CUipcMemHandle fits");
  out->kind = ADR_SHARE_KIND_CUDA_IPC;
  out->object_id = (uint64_t)base;
  out->object_size = size;
  out->offset = (uint64_t)((uintptr_t)ptr - (uintptr_t)base);
  memcpy(out->native, h.reserved, sizeof(h.reserved));
  *out_fd = -1;
  return 0;
}

int cuda_share_import(struct adr_backend_device* dev, const struct adr_share_handle* handle, int fd,
                      void** out, struct adr_error* error) {
  (void)fd;
  if (dev->type != ARROW_DEVICE_CUDA || !ipc_available()) return unsupported(dev, error);
  if (handle->kind != ADR_SHARE_KIND_CUDA_IPC || handle->offset >= handle->object_size)
    return cuda_errorf(error, EINVAL, "not a CUDA IPC memory handle (kind %u)",
                       (unsigned)handle->kind);
  CUipcMemHandle h;
  memcpy(h.reserved, handle->native, sizeof(h.reserved));
  struct cuda_current_guard g;
  int st = cuda_device_ensure(dev, error);
  if (st == 0) st = cuda_current_enter(dev, &g, error);
  if (st) return st;
  CUdeviceptr p = 0;
  CUresult r = cuda_api.cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
  cuda_current_leave(&g);
  if (r != CUDA_SUCCESS)
    return cuda_check(r, error, "cuIpcOpenMemHandle from process %d on CUDA device %d",
                      (int)handle->pid, dev->ordinal);
  *out = (void*)(uintptr_t)(p + handle->offset);
  return 0;
}

int cuda_share_close(struct adr_backend_device* dev, void* ptr, struct adr_error* error) {
  if (!ipc_available()) return unsupported(dev, error);
  struct cuda_current_guard g;
  int st = cuda_device_ensure(dev, error);
  if (st == 0) st = cuda_current_enter(dev, &g, error);
  if (st) return st;
  CUdeviceptr base = 0;
  size_t size = 0;
  CUresult r = cuda_api.cuMemGetAddressRange(&base, &size, (CUdeviceptr)(uintptr_t)ptr);
  /* Work queued on the device may still read the mapping. */
  if (r == CUDA_SUCCESS) r = cuda_api.cuStreamSynchronize(dev->default_stream.stream);
  if (r == CUDA_SUCCESS) r = cuda_api.cuIpcCloseMemHandle(base);
  cuda_current_leave(&g);
  return cuda_check(r, error, "cuIpcCloseMemHandle of %p", ptr);
}

int cuda_event_share_export(struct adr_backend_device* dev, struct adr_backend_stream* stream,
                            struct adr_backend_event** out_event, struct adr_share_handle* out,
                            int* out_fd, struct adr_error* error) {
  if (dev->type != ARROW_DEVICE_CUDA || !ipc_events_available()) return unsupported(dev, error);
  struct adr_backend_event* e = calloc(1, sizeof(*e));
  if (e == NULL) return cuda_errorf(error, ENOMEM, "out of memory");
  struct cuda_current_guard g;
  int st = cuda_device_ensure(dev, error);
  if (st == 0) st = cuda_current_enter(dev, &g, error);
  if (st) {
    free(e);
    return st;
  }
  CUipcEventHandle h;
  CUresult r = cuda_api.cuEventCreate(&e->event, CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS);
  bool created = r == CUDA_SUCCESS;
  if (r == CUDA_SUCCESS) r = cuda_api.cuEventRecord(e->event, stream->stream);
  if (r == CUDA_SUCCESS) r = cuda_api.cuIpcGetEventHandle(&h, e->event);
  if (r != CUDA_SUCCESS && created) cuda_api.cuEventDestroy(e->event);
  cuda_current_leave(&g);
  if (r != CUDA_SUCCESS) {
    free(e);
    return cuda_check(r, error, "interprocess event on CUDA device %d", dev->ordinal);
  }
  _Static_assert(sizeof(h.reserved) <= ADR_SHARE_NATIVE_SIZE, "CUipcEventHandle fits");
  out->kind = ADR_SHARE_KIND_CUDA_IPC;
  out->object_id = (uint64_t)(uintptr_t)e->event;
  memcpy(out->native, h.reserved, sizeof(h.reserved));
  *out_fd = -1;
  *out_event = e;
  return 0;
}

int cuda_event_share_import(struct adr_backend_device* dev, const struct adr_share_handle* handle,
                            int fd, struct adr_backend_event** out, struct adr_error* error) {
  (void)fd;
  if (dev->type != ARROW_DEVICE_CUDA || !ipc_events_available()) return unsupported(dev, error);
  if (handle->kind != ADR_SHARE_KIND_CUDA_IPC)
    return cuda_errorf(error, EINVAL, "not a CUDA IPC event handle (kind %u)",
                       (unsigned)handle->kind);
  struct adr_backend_event* e = calloc(1, sizeof(*e));
  if (e == NULL) return cuda_errorf(error, ENOMEM, "out of memory");
  CUipcEventHandle h;
  memcpy(h.reserved, handle->native, sizeof(h.reserved));
  struct cuda_current_guard g;
  int st = cuda_device_ensure(dev, error);
  if (st == 0) st = cuda_current_enter(dev, &g, error);
  if (st) {
    free(e);
    return st;
  }
  CUresult r = cuda_api.cuIpcOpenEventHandle(&e->event, h);
  cuda_current_leave(&g);
  if (r != CUDA_SUCCESS) {
    free(e);
    return cuda_check(r, error, "cuIpcOpenEventHandle from process %d", (int)handle->pid);
  }
  /* Not `imported`: an opened IPC event is released with cuEventDestroy. */
  *out = e;
  return 0;
}
