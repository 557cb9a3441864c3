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
 * creation then costs what glibc's malloc does. adr's statistics count
 * cached blocks as allocated until they are reused, trimmed
 * (adr.numpy.trim(), the calling thread's cache) or their thread exits.
 * Blocks are freed on the thread that frees them, so a block allocated on
 * one thread may be cached on another: each entry carries its device and
 * allocator.
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

#include "adrpy.h"

#include <numpy/arrayobject.h>

#define ADRPY_NP_HEADER 64

struct np_ctx {
  struct adr_device* dev;
  const struct adr_allocator* allocator;
};

struct np_handler {
  PyDataMem_Handler handler; /* first: the capsule's pointer */
  struct np_ctx ctx;
};

/* ---- the per-thread cache ---------------------------------------------- */

#define NP_CACHE_SLOTS 16
#define NP_CACHE_MAX_BLOCK (((size_t)1 << 20) + 2 * ADRPY_NP_HEADER)
#define NP_CACHE_MAX_BYTES ((size_t)8 << 20)

struct np_cached {
  struct adr_device* dev;
  const struct adr_allocator* allocator;
  size_t total; /* what adr allocated (header included) */
  void* base;
};

struct np_cache {
  unsigned n;   /* entries [0, n) */
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

static struct np_cache* cache_get(int create) {
  if (__builtin_expect(atomic_load_explicit(&np_key_ok, memory_order_acquire) != 1, 0)) {
    pthread_once(&np_key_once, cache_key_create);
    if (atomic_load_explicit(&np_key_ok, memory_order_acquire) != 1) return NULL;
  }
  struct np_cache* c = pthread_getspecific(np_key);
  if (c == NULL && create && (c = calloc(1, sizeof(*c))) != NULL &&
      pthread_setspecific(np_key, c) != 0) {
    free(c);
    c = NULL;
  }
  return c;
}

static void* cache_take(const struct np_ctx* ctx, size_t total) {
  struct np_cache* c = cache_get(0);
  if (c == NULL) return NULL;
  for (unsigned i = c->n; i-- > 0;) {
    struct np_cached* e = &c->e[i];
    if (e->total == total && e->dev == ctx->dev && e->allocator == ctx->allocator) {
      void* base = e->base;
      c->bytes -= total;
      /* The newest entry takes the slot (the order is only roughly by age). */
      *e = c->e[--c->n];
      return base;
    }
  }
  return NULL;
}

/* 1 when the cache took the block. */
static int cache_put(const struct np_ctx* ctx, void* base, size_t total) {
  if (total > NP_CACHE_MAX_BLOCK) return 0;
  struct np_cache* c = cache_get(1);
  if (c == NULL) return 0;
  while (c->n > 0 && (c->n == NP_CACHE_SLOTS || c->bytes + total > NP_CACHE_MAX_BYTES)) {
    struct np_cached old = c->e[0];
    c->n--;
    c->bytes -= old.total;
    memmove(&c->e[0], &c->e[1], c->n * sizeof(c->e[0]));
    adr_free(old.dev, old.base, old.total, NULL, NULL);
  }
  c->e[c->n].dev = ctx->dev;
  c->e[c->n].allocator = ctx->allocator;
  c->e[c->n].total = total;
  c->e[c->n].base = base;
  c->n++;
  c->bytes += total;
  return 1;
}

/* ---- the handler --------------------------------------------------------- */

static void* np_malloc(void* ctx, size_t size) {
  struct np_ctx* c = ctx;
  if (size > SIZE_MAX - 2 * ADRPY_NP_HEADER) return NULL;
  size_t total = (size + 2 * ADRPY_NP_HEADER - 1) & ~(size_t)(ADRPY_NP_HEADER - 1);
  void* p = cache_take(c, total);
  if (p == NULL && adr_alloc_with(c->dev, c->allocator, total, 0, NULL, &p, NULL) != 0)
    return NULL;
  *(size_t*)p = total;
  return (char*)p + ADRPY_NP_HEADER;
}

static void np_free(void* ctx, void* ptr, size_t size) {
  struct np_ctx* c = ctx;
  if (ptr == NULL) return;
  char* base = (char*)ptr - ADRPY_NP_HEADER;
  /* The header's size, not `size`: NumPy passes the size it asked for,
   * which is the same unless a caller outside NumPy got it wrong. */
  size_t total = *(size_t*)base;
  if (!cache_put(c, base, total)) adr_free(c->dev, base, total, NULL, NULL);
}

PyObject* adrpy_numpy_trim(PyObject* module, PyObject* unused) {
  struct np_cache* c = cache_get(0);
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
  if (new_size <= SIZE_MAX - 2 * ADRPY_NP_HEADER &&
      ((new_size + 2 * ADRPY_NP_HEADER - 1) & ~(size_t)(ADRPY_NP_HEADER - 1)) == old_total)
    return ptr; /* the block already has that rounded size */
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
