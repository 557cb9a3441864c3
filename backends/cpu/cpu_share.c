/* SPDX-License-Identifier: Apache-2.0
 *
 * Shareable CPU memory in memfds (cpu_share.h). */
#include "cpu_share.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "adr/share.h"
#include "cpu_ranges.h"

struct mapping {
  struct mapping* next;
  void* base;  /* the whole mapping */
  size_t size; /* its length */
  void* user;  /* what alloc / import returned */
  int fd;      /* the memfd (shareable allocations), -1 for imports */
  bool imported;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct mapping* mappings;
/* Shareable allocations alive, so that free skips the lock when none. */
static _Atomic size_t shareable_count;

static size_t page_size(void) {
  long p = sysconf(_SC_PAGESIZE);
  return p > 0 ? (size_t)p : 4096;
}

int cpu_share_caps(struct adr_backend_device* dev, uint32_t* out, struct adr_error* error) {
  (void)dev;
  (void)error;
  *out = ADR_SHARE_CAP_EXPORT_MEMORY | ADR_SHARE_CAP_IMPORT_MEMORY;
  return 0;
}

static void link_mapping(struct mapping* m) {
  pthread_mutex_lock(&lock);
  m->next = mappings;
  mappings = m;
  pthread_mutex_unlock(&lock);
}

/* Unlinks the mapping whose user address is `user` (kind: imported or
 * not); NULL if none. */
static struct mapping* unlink_mapping(const void* user, bool imported) {
  pthread_mutex_lock(&lock);
  struct mapping** at = &mappings;
  while (*at != NULL && !((*at)->user == user && (*at)->imported == imported)) at = &(*at)->next;
  struct mapping* m = *at;
  if (m != NULL) *at = m->next;
  pthread_mutex_unlock(&lock);
  return m;
}

int cpu_share_alloc(struct adr_backend_device* dev, size_t size, size_t alignment, void** out,
                    struct adr_error* error) {
  (void)dev;
  size_t page = page_size();
  size_t extra = alignment > page ? alignment : 0;
  if (size > SIZE_MAX - extra - page)
    return adr_backend_error_set(error, ENOMEM, "ENOMEM: %zu bytes are too many", size);
  size_t map_size = (size + extra + page - 1) & ~(page - 1);
  struct mapping* m = calloc(1, sizeof(*m));
  if (m == NULL) return adr_backend_error_set(error, ENOMEM, "ENOMEM: out of host memory");
  m->fd = memfd_create("adr-share", MFD_CLOEXEC);
  if (m->fd < 0) {
    int e = errno;
    free(m);
    return adr_backend_error_set(error, e == EMFILE || e == ENFILE ? EMFILE : ENOMEM,
                                 "%s: memfd_create failed: %s", e == EMFILE ? "EMFILE" : "ENOMEM",
                                 strerror(e));
  }
  if (ftruncate(m->fd, (off_t)map_size) != 0) {
    int e = errno;
    close(m->fd);
    free(m);
    return adr_backend_error_set(error, ENOMEM, "ENOMEM: cannot size a memfd to %zu bytes: %s",
                                 map_size, strerror(e));
  }
  void* p = mmap(NULL, map_size, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    close(m->fd);
    free(m);
    return adr_backend_error_set(error, ENOMEM, "ENOMEM: cannot map %zu bytes: %s", map_size,
                                 strerror(e));
  }
  m->base = p;
  m->size = map_size;
  uintptr_t user = (uintptr_t)p;
  if (extra) user = (user + alignment - 1) & ~(uintptr_t)(alignment - 1);
  m->user = (void*)user;
  if (cpu_ranges_insert(cpu_ranges_global(), user, size) != 0) {
    munmap(p, map_size);
    close(m->fd);
    free(m);
    return adr_backend_error_set(error, ENOMEM, "ENOMEM: cannot record the allocation's range");
  }
  link_mapping(m);
  atomic_fetch_add(&shareable_count, 1);
  *out = m->user;
  return 0;
}

bool cpu_share_forget(void* ptr, void** out_base, size_t* out_size) {
  if (atomic_load_explicit(&shareable_count, memory_order_relaxed) == 0) return false;
  struct mapping* m = unlink_mapping(ptr, false);
  if (m == NULL) return false;
  atomic_fetch_sub(&shareable_count, 1);
  close(m->fd);
  *out_base = m->base;
  *out_size = m->size;
  free(m);
  return true;
}

int cpu_share_export(struct adr_backend_device* dev, const void* ptr, struct adr_share_handle* out,
                     int* out_fd, struct adr_error* error) {
  (void)dev;
  uintptr_t p = (uintptr_t)ptr;
  int fd = -1;
  pthread_mutex_lock(&lock);
  struct mapping* m = mappings;
  while (m != NULL &&
         !(!m->imported && p >= (uintptr_t)m->base && p < (uintptr_t)m->base + m->size))
    m = m->next;
  if (m != NULL) {
    fd = fcntl(m->fd, F_DUPFD_CLOEXEC, 0);
    out->kind = ADR_SHARE_KIND_MEMFD;
    out->object_id = (uint64_t)(uintptr_t)m->base;
    out->object_size = m->size;
    out->offset = p - (uintptr_t)m->base;
  }
  pthread_mutex_unlock(&lock);
  if (m == NULL)
    return adr_backend_error_set(error, EINVAL,
                                 "EINVAL: %p is not shareable memory (allocate it with "
                                 "adr_share_alloc)",
                                 ptr);
  if (fd < 0)
    return adr_backend_error_set(error, EMFILE, "EMFILE: cannot duplicate the memfd: %s",
                                 strerror(errno));
  *out_fd = fd;
  return 0;
}

int cpu_share_import(struct adr_backend_device* dev, const struct adr_share_handle* h, int fd,
                     void** out, struct adr_error* error) {
  (void)dev;
  if (h->kind != ADR_SHARE_KIND_MEMFD)
    return adr_backend_error_set(error, EINVAL, "EINVAL: handle kind %u is not a cpu memfd",
                                 (unsigned)h->kind);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0)
    return adr_backend_error_set(error, EBADF, "EBADF: the handle's descriptor %d is not open", fd);
  if (h->object_size == 0 || h->object_size > (uint64_t)st.st_size || h->offset >= h->object_size ||
      h->object_size > SIZE_MAX)
    return adr_backend_error_set(error, EINVAL,
                                 "EINVAL: the handle says %llu bytes at offset %llu, the memfd "
                                 "holds %lld",
                                 (unsigned long long)h->object_size, (unsigned long long)h->offset,
                                 (long long)st.st_size);
  struct mapping* m = calloc(1, sizeof(*m));
  if (m == NULL) return adr_backend_error_set(error, ENOMEM, "ENOMEM: out of host memory");
  void* p = mmap(NULL, (size_t)h->object_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    free(m);
    return adr_backend_error_set(error, ENOMEM, "ENOMEM: cannot map %llu shared bytes: %s",
                                 (unsigned long long)h->object_size, strerror(e));
  }
  m->base = p;
  m->size = (size_t)h->object_size;
  m->user = (char*)p + h->offset;
  m->fd = -1;
  m->imported = true;
  /* pointer_query answers cpu:0 for it; not an allocation to free. */
  (void)cpu_ranges_insert(cpu_ranges_global(), (uintptr_t)p, m->size);
  link_mapping(m);
  *out = m->user;
  return 0;
}

int cpu_share_close(struct adr_backend_device* dev, void* ptr, struct adr_error* error) {
  (void)dev;
  struct mapping* m = unlink_mapping(ptr, true);
  if (m == NULL)
    return adr_backend_error_set(error, EINVAL, "EINVAL: %p is not memory adr_share_import mapped",
                                 ptr);
  cpu_ranges_remove(cpu_ranges_global(), (uintptr_t)m->base, NULL);
  munmap(m->base, m->size);
  free(m);
  return 0;
}
