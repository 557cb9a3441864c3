/* SPDX-License-Identifier: Apache-2.0
 *
 * A NumPy allocation handler (NEP 49, shared/seeds/003) backed by adr: the
 * data of arrays made while it is set comes from adr_alloc_with on one
 * host-accessible device (cpu, cuda_host, cuda_managed, hip_host ...),
 * through adr's caching pool or the plain backend allocator, and shows in
 * that device's adr statistics.
 *
 * NEP 49's realloc does not pass the old size and adr_free needs it, so
 * every block starts with a 64-byte header holding the size adr allocated;
 * the address NumPy gets is 64 bytes in, so it keeps adr's 64-byte
 * alignment. The handler functions may be called on any thread, with or
 * without the GIL: they touch no Python object.
 *
 * NumPy's C API is imported on first use, so `import adr` does not import
 * NumPy.
 */
#define NPY_NO_DEPRECATED_API NPY_1_22_API_VERSION
#include <stdio.h>
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

static void* np_malloc(void* ctx, size_t size) {
  struct np_ctx* c = ctx;
  if (size > SIZE_MAX - ADRPY_NP_HEADER) return NULL;
  void* p = NULL;
  if (adr_alloc_with(c->dev, c->allocator, size + ADRPY_NP_HEADER, 0, NULL, &p, NULL) != 0)
    return NULL;
  *(size_t*)p = size + ADRPY_NP_HEADER;
  return (char*)p + ADRPY_NP_HEADER;
}

static void np_free(void* ctx, void* ptr, size_t size) {
  struct np_ctx* c = ctx;
  if (ptr == NULL) return;
  char* base = (char*)ptr - ADRPY_NP_HEADER;
  /* The header's size, not `size`: NumPy passes the size it asked for,
   * which is the same unless a caller outside NumPy got it wrong. */
  adr_free(c->dev, base, *(size_t*)base, NULL, NULL);
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
  size_t old = *(size_t*)((char*)ptr - ADRPY_NP_HEADER) - ADRPY_NP_HEADER;
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
