/* SPDX-License-Identifier: Apache-2.0
 *
 * A NumPy allocation handler (NEP 49, shared/seeds/003) backed by adr: the
 * data of arrays made while it is set comes from adr_alloc_with on one
 * host-accessible device (cpu, cuda_host, cuda_managed, hip_host ...),
 * through adr's caching pool or the plain backend allocator, and shows in
 * that device's adr statistics.
 *
 * NEP 49's realloc does not pass the old size and adr_free needs it, so
 * every block starts with a 64-byte header holding the size adr allocated
 * (the request plus the header, rounded up to 64 bytes); the address NumPy
 * gets is 64 bytes in, so it keeps adr's 64-byte alignment. The handler
 * functions may be called on any thread, with or without the GIL: they
 * touch no Python object.
 *
 * A per-thread cache sits in front of adr: a freed block of up to
 * NP_CACHE_MAX_BLOCK bytes is kept (at most NP_CACHE_SLOTS blocks and
 * NP_CACHE_MAX_BYTES per thread, the oldest given back to adr first) and
 * handed out again for a request of the same rounded size on the same
 * device and allocator, without a lock or a call into adr: repeated array
 * creation then costs a little less than glibc's malloc (a 1 KiB
 * malloc/free pair 5.5 ns against 8.3 ns, called in a loop from C). adr's
 * statistics count cached blocks as allocated until they are reused,
 * trimmed (adr.numpy.trim(), the calling thread's cache) or their thread
 * exits.
 * Blocks are freed on the thread that frees them, so a block allocated on
 * one thread may be cached on another: each entry carries its device and
 * allocator.
 *
 * Blocks of 4 MiB or more on the CPU device are advised MADV_HUGEPAGE
 * before NumPy touches them, as NumPy's default handler advises its own.
 *
 * NumPy's C API is imported on first use, so `import adr` does not import
 * NumPy.
 */
#define NPY_NO_DEPRECATED_API NPY_1_22_API_VERSION
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "adrpy.h"

#include <numpy/arrayobject.h>

#define ADRPY_NP_HEADER 64

struct np_ctx {
  struct adr_device* dev;
  const struct adr_allocator* allocator;
  int host_pages; /* ordinary anonymous host pages (the CPU device): THP advice */
};

struct np_handler {
  PyDataMem_Handler handler; /* first: the capsule's pointer */
  struct np_ctx ctx;
};

/* ---- the per-thread cache ---------------------------------------------- */

#define NP_CACHE_SLOTS 16
#define NP_CACHE_MAX_BLOCK (((size_t)1 << 20) + 2 * ADRPY_NP_HEADER)
#define NP_CACHE_MAX_BYTES ((size_t)8 << 20)

/* Blocks of at least this many bytes on the CPU device are advised
 * MADV_HUGEPAGE, as NumPy's default handler advises its own (the same
 * threshold, numpy/core/src/multiarray/alloc.c). */
#define NP_HUGE_MIN ((size_t)4 << 20)
#define NP_HUGE_PAGE ((uintptr_t)2 << 20)

struct np_cached {
  struct adr_device* dev;
  const struct adr_allocator* allocator;
  size_t total; /* what adr allocated (header included) */
  void* base;
};

struct np_cache {
  unsigned n;   /* entries [0, n), the newest last */
  size_t bytes; /* their total sizes */
  struct np_cached e[NP_CACHE_SLOTS];
};

/* The calling thread's cache, found with pthread_getspecific (a few
 * instructions; a _Thread_local in a dlopen'ed module costs a
 * __tls_get_addr call per access), made on the thread's first free and
 * given back to adr by the key's destructor when the thread exits. */
static pthread_key_t np_key;
static pthread_once_t np_key_once = PTHREAD_ONCE_INIT;
static atomic_int np_key_ok; /* 1 once the key exists (release/acquire) */

/* Gives every cached block back to adr; the bytes. */
static size_t cache_trim(struct np_cache* c) {
  size_t bytes = c->bytes;
  for (unsigned i = 0; i < c->n; i++)
    adr_free(c->e[i].dev, c->e[i].base, c->e[i].total, NULL, NULL);
  c->n = 0;
  c->bytes = 0;
  return bytes;
}

static void cache_thread_exit(void* p) {
  cache_trim(p);
  free(p);
}

static void cache_key_create(void) {
  atomic_store_explicit(&np_key_ok, pthread_key_create(&np_key, cache_thread_exit) == 0 ? 1 : -1,
                        memory_order_release);
}

/* The calling thread's cache, or NULL before its first free (or when the
 * key could not be made). Inlined into the handler's hot path: one
 * acquire load (a plain load on x86) and pthread_getspecific. */
static inline struct np_cache* cache_mine(void) {
  if (__builtin_expect(atomic_load_explicit(&np_key_ok, memory_order_acquire) != 1, 0)) return NULL;
  return pthread_getspecific(np_key);
}

static struct np_cache* cache_create(void) {
  pthread_once(&np_key_once, cache_key_create);
  if (atomic_load_explicit(&np_key_ok, memory_order_acquire) != 1) return NULL;
  struct np_cache* c = pthread_getspecific(np_key);
  if (c == NULL && (c = calloc(1, sizeof(*c))) != NULL && pthread_setspecific(np_key, c) != 0) {
    free(c);
    c = NULL;
  }
  return c;
}

static inline int cached_fits(const struct np_cached* e, const struct np_ctx* ctx, size_t total) {
  return e->total == total && e->dev == ctx->dev && e->allocator == ctx->allocator;
}

/* ---- the handler --------------------------------------------------------- */

/* The rounded size adr allocates for a request of `size` bytes (header
 * included); 0 when it would overflow. */
static inline size_t np_total(size_t size) {
  if (size > SIZE_MAX - 2 * ADRPY_NP_HEADER) return 0;
  return (size + 2 * ADRPY_NP_HEADER - 1) & ~(size_t)(ADRPY_NP_HEADER - 1);
}

/* A request the newest cached block does not serve: an older cached block
 * of the same size, or adr. */
static __attribute__((noinline)) void* np_malloc_slow(const struct np_ctx* ctx, struct np_cache* c,
                                                      size_t total) {
  void* p;
  for (unsigned i = c != NULL ? c->n : 0; i-- > 0;) {
    if (cached_fits(&c->e[i], ctx, total)) {
      p = c->e[i].base;
      c->bytes -= total;
      /* The newest entry takes the slot (the order is only roughly by age). */
      c->e[i] = c->e[--c->n];
      return p;
    }
  }
  if (adr_alloc_with(ctx->dev, ctx->allocator, total, 0, NULL, &p, NULL) != 0) return NULL;
    /* Advised before NumPy first touches it: a block fresh from the pool or
     * the backend then faults in as 2 MiB pages where the kernel has them
     * (THP `always` or `madvise`), and a block the pool hands out again
     * keeps them, so filling it takes 512 times fewer TLB entries. Only
     * the block's 2 MiB-aligned part; an error (THP `never`, a kernel
     * without it) changes nothing. */
#ifdef MADV_HUGEPAGE
  if (ctx->host_pages && total >= NP_HUGE_MIN) {
    uintptr_t lo = ((uintptr_t)p + NP_HUGE_PAGE - 1) & ~(NP_HUGE_PAGE - 1);
    uintptr_t hi = ((uintptr_t)p + total) & ~(NP_HUGE_PAGE - 1);
    if (hi > lo) (void)madvise((void*)lo, hi - lo, MADV_HUGEPAGE);
  }
#endif
  return p;
}

/* The hot path of repeated array creation (a block of the size NumPy just
 * freed) is inlined here and makes one library call, pthread_getspecific:
 * it is about as long as glibc's tcache path. */
static void* np_malloc(void* ctx, size_t size) {
  const struct np_ctx* c = ctx;
  size_t total = np_total(size);
  if (total == 0) return NULL;
  struct np_cache* tc = cache_mine();
  void* p;
  if (tc != NULL && tc->n > 0 && cached_fits(&tc->e[tc->n - 1], c, total)) {
    p = tc->e[--tc->n].base;
    tc->bytes -= total;
  } else if ((p = np_malloc_slow(c, tc, total)) == NULL) {
    return NULL;
  }
  *(size_t*)p = total;
  return (char*)p + ADRPY_NP_HEADER;
}

/* A freed block the cache does not take as it is: the cache is full (the
 * oldest entries go back to adr first), not made yet, or the block is too
 * large to cache. */
static __attribute__((noinline)) void np_free_slow(const struct np_ctx* ctx, struct np_cache* c,
                                                   void* base, size_t total) {
  if (total > NP_CACHE_MAX_BLOCK || (c == NULL && (c = cache_create()) == NULL)) {
    adr_free(ctx->dev, base, total, NULL, NULL);
    return;
  }
  unsigned drop = 0;
  size_t bytes = c->bytes;
  while (drop < c->n && (c->n - drop == NP_CACHE_SLOTS || bytes + total > NP_CACHE_MAX_BYTES))
    bytes -= c->e[drop++].total;
  for (unsigned i = 0; i < drop; i++)
    adr_free(c->e[i].dev, c->e[i].base, c->e[i].total, NULL, NULL);
  c->n -= drop;
  c->bytes = bytes;
  memmove(&c->e[0], &c->e[drop], c->n * sizeof(c->e[0]));
  c->e[c->n] = (struct np_cached){ctx->dev, ctx->allocator, total, base};
  c->n++;
  c->bytes += total;
}

static void np_free(void* ctx, void* ptr, size_t size) {
  const struct np_ctx* c = ctx;
  if (ptr == NULL) return;
  char* base = (char*)ptr - ADRPY_NP_HEADER;
  /* The header's size, not `size`: NumPy passes the size it asked for,
   * which is the same unless a caller outside NumPy got it wrong. */
  size_t total = *(size_t*)base;
  struct np_cache* tc = cache_mine();
  if (tc != NULL && total <= NP_CACHE_MAX_BLOCK && tc->n < NP_CACHE_SLOTS &&
      tc->bytes + total <= NP_CACHE_MAX_BYTES) {
    tc->e[tc->n] = (struct np_cached){c->dev, c->allocator, total, base};
    tc->n++;
    tc->bytes += total;
    return;
  }
  np_free_slow(c, tc, base, total);
}

PyObject* adrpy_numpy_trim(PyObject* module, PyObject* unused) {
  struct np_cache* c = cache_mine();
  return PyLong_FromSize_t(c != NULL ? cache_trim(c) : 0);
}

static void* np_calloc(void* ctx, size_t nelem, size_t elsize) {
  if (elsize != 0 && nelem > SIZE_MAX / elsize) return NULL;
  size_t size = nelem * elsize;
  void* p = np_malloc(ctx, size);
  if (p != NULL) memset(p, 0, size);
  return p;
}

static void* np_realloc(void* ctx, void* ptr, size_t new_size) {
  if (ptr == NULL) return np_malloc(ctx, new_size);
  size_t old_total = *(size_t*)((char*)ptr - ADRPY_NP_HEADER);
  size_t old = old_total - ADRPY_NP_HEADER;
  if (np_total(new_size) == old_total) return ptr; /* the block already has that rounded size */
  void* q = np_malloc(ctx, new_size);
  if (q == NULL) return NULL; /* the old block stays valid, as realloc's */
  memcpy(q, ptr, old < new_size ? old : new_size);
  np_free(ctx, ptr, old);
  return q;
}

static int numpy_ready(void) {
  if (PyArray_API != NULL) return 0;
  return _import_array();
}

static void handler_capsule_destructor(PyObject* cap) {
  void* p = PyCapsule_GetPointer(cap, "mem_handler");
  if (p != NULL)
    PyMem_RawFree(p);
  else
    PyErr_WriteUnraisable(cap);
}

PyObject* adrpy_numpy_allocator(PyObject* module, PyObject* args, PyObject* kwds) {
  static char* kwlist[] = {"device", "pool", NULL};
  PyObject* device_obj = NULL;
  int pool = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "|Op:allocator", kwlist, &device_obj, &pool))
    return NULL;
  if (numpy_ready() < 0) return NULL;
  AdrDeviceObject* device;
  if (device_obj == NULL || device_obj == Py_None) {
    device = (AdrDeviceObject*)adrpy_device_get(ARROW_DEVICE_CPU, 0);
  } else if (PyObject_TypeCheck(device_obj, &AdrDevice_Type)) {
    Py_INCREF(device_obj);
    device = (AdrDeviceObject*)device_obj;
  } else {
    device = (AdrDeviceObject*)PyObject_CallOneArg((PyObject*)&AdrDevice_Type, device_obj);
  }
  if (device == NULL) return NULL;
  if ((device->caps & ADR_CAP_HOST_ACCESSIBLE) == 0) {
    PyErr_Format(PyExc_ValueError,
                 "allocator: %s memory is not host-accessible; NumPy needs memory the CPU can "
                 "read (cpu, cuda_host, cuda_managed, hip_host ...)",
                 adr_device_name(device->dev));
    Py_DECREF(device);
    return NULL;
  }
  struct np_handler* h = PyMem_RawCalloc(1, sizeof(*h));
  if (h == NULL) {
    Py_DECREF(device);
    return PyErr_NoMemory();
  }
  h->ctx.dev = device->dev; /* adr devices are never freed */
  h->ctx.allocator = pool ? adr_allocator_pool() : adr_allocator_backend();
  h->ctx.host_pages = adr_device_type(device->dev) == ARROW_DEVICE_CPU;
  snprintf(h->handler.name, sizeof(h->handler.name), "adr:%s:%s", adr_device_name(device->dev),
           pool ? "pool" : "backend");
  Py_DECREF(device);
  h->handler.version = 1;
  h->handler.allocator.ctx = &h->ctx;
  h->handler.allocator.malloc = np_malloc;
  h->handler.allocator.calloc = np_calloc;
  h->handler.allocator.realloc = np_realloc;
  h->handler.allocator.free = np_free;
  PyObject* cap = PyCapsule_New(&h->handler, "mem_handler", handler_capsule_destructor);
  if (cap == NULL) PyMem_RawFree(h);
  return cap;
}

PyObject* adrpy_numpy_set_handler(PyObject* module, PyObject* handler) {
  if (numpy_ready() < 0) return NULL;
  if (handler != Py_None && !PyCapsule_IsValid(handler, "mem_handler")) {
    PyErr_Format(PyExc_TypeError, "use(): expected a 'mem_handler' capsule or None, got %s",
                 Py_TYPE(handler)->tp_name);
    return NULL;
  }
  return PyDataMem_SetHandler(handler == Py_None ? NULL : handler);
}

PyObject* adrpy_numpy_get_handler(PyObject* module, PyObject* unused) {
  if (numpy_ready() < 0) return NULL;
  return PyDataMem_GetHandler();
}
