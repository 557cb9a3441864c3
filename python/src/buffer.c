/* SPDX-License-Identifier: Apache-2.0
 *
 * adr.Buffer: bytes on one device. Either adr's own (Device.alloc, freed by
 * adr_free when free() is called or the last reference goes) or borrowed
 * from a DLPack producer (from_dlpack; the producer's deleter runs then).
 *
 * Every method that passes the pointer to adr with the GIL released counts
 * itself in `exports` for the duration, like memoryviews and DLPack
 * capsules do for their lifetime; free() refuses (BufferError) while any is
 * outstanding, so no call ever sees the memory go away under it.
 */
#include <string.h>

#include "adrpy.h"

int adrpy_buffer_check(AdrBufferObject* self) {
  if (self->kind == ADRPY_BUFFER_FREED) {
    PyErr_SetString(PyExc_ValueError, "buffer was freed");
    return -1;
  }
  return 0;
}

/* The CPU device, which stands for any host memory in adr_copy. */
static struct adr_device* host_device(void) {
  struct adr_device* dev = NULL;
  struct adr_error err = {{0}};
  int rc = adr_device_get(ARROW_DEVICE_CPU, 0, &dev, &err);
  if (rc != 0) {
    adrpy_raise(rc, &err);
    return NULL;
  }
  return dev;
}

static AdrBufferObject* buffer_new_object(AdrDeviceObject* device) {
  AdrBufferObject* self = PyObject_New(AdrBufferObject, &AdrBuffer_Type);
  if (self == NULL) return NULL;
  Py_INCREF(device);
  self->device = device;
  self->ptr = NULL;
  self->nbytes = 0;
  self->kind = ADRPY_BUFFER_FREED;
  self->readonly = 0;
  self->managed = NULL;
  self->exports = 0;
  self->weakreflist = NULL;
  return self;
}

PyObject* adrpy_buffer_alloc(AdrDeviceObject* device, Py_ssize_t nbytes, Py_ssize_t alignment) {
  AdrBufferObject* self = buffer_new_object(device);
  if (self == NULL) return NULL;
  void* p = NULL;
  struct adr_error err = {{0}};
  int rc;
  Py_BEGIN_ALLOW_THREADS rc =
      adr_alloc(device->dev, (size_t)nbytes, (size_t)alignment, NULL, &p, &err);
  Py_END_ALLOW_THREADS if (rc != 0) {
    Py_DECREF(self);
    return adrpy_raise(rc, &err);
  }
  self->ptr = p;
  self->nbytes = (size_t)nbytes;
  self->kind = ADRPY_BUFFER_OWNED;
  return (PyObject*)self;
}

PyObject* adrpy_buffer_borrow(AdrDeviceObject* device, void* ptr, size_t nbytes, int kind,
                              void* managed, int readonly) {
  AdrBufferObject* self = buffer_new_object(device);
  if (self == NULL) return NULL;
  self->ptr = ptr;
  self->nbytes = nbytes;
  self->kind = kind;
  self->managed = managed;
  self->readonly = readonly;
  return (PyObject*)self;
}

/* Gives the memory back; the buffer is FREED afterwards whatever happens. */
static int buffer_release(AdrBufferObject* self, struct adr_error* err) {
  int kind = self->kind;
  self->kind = ADRPY_BUFFER_FREED;
  int rc = 0;
  if (kind == ADRPY_BUFFER_OWNED) {
    Py_BEGIN_ALLOW_THREADS rc = adr_free(self->device->dev, self->ptr, self->nbytes, NULL, err);
    Py_END_ALLOW_THREADS
  } else if (kind == ADRPY_BUFFER_DLPACK || kind == ADRPY_BUFFER_DLPACK_V1) {
    adrpy_dlpack_release(kind, self->managed);
  } else if (kind == ADRPY_BUFFER_FOREIGN) {
    Py_XDECREF((PyObject*)self->managed);
  }
  self->managed = NULL;
  return rc;
}

static void buffer_dealloc(AdrBufferObject* self) {
  if (self->weakreflist != NULL) PyObject_ClearWeakRefs((PyObject*)self);
  struct adr_error err = {{0}};
  int rc = buffer_release(self, &err);
  if (rc != 0) {
    adrpy_raise(rc, &err);
    PyErr_WriteUnraisable((PyObject*)self);
  }
  Py_XDECREF(self->device);
  PyObject_Free(self);
}

static PyObject* buffer_free(AdrBufferObject* self, PyObject* unused) {
  if (adrpy_buffer_check(self) < 0) return NULL;
  if (self->exports > 0) {
    PyErr_Format(PyExc_BufferError,
                 "cannot free a buffer with %zd export(s) (memoryviews, DLPack capsules or "
                 "consumers, calls in progress)",
                 self->exports);
    return NULL;
  }
  struct adr_error err = {{0}};
  int rc = buffer_release(self, &err);
  if (rc != 0) return adrpy_raise(rc, &err);
  Py_RETURN_NONE;
}

PyObject* adrpy_buffer_copy(AdrBufferObject* src, AdrDeviceObject* device) {
  if (adrpy_buffer_check(src) < 0) return NULL;
  AdrBufferObject* dst = (AdrBufferObject*)adrpy_buffer_alloc(device, (Py_ssize_t)src->nbytes, 0);
  if (dst == NULL) return NULL;
  struct adr_error err = {{0}};
  struct adr_device* src_dev = src->device->dev;
  int rc;
  src->exports++;
  Py_BEGIN_ALLOW_THREADS rc =
      adr_copy(device->dev, dst->ptr, src_dev, src->ptr, src->nbytes, NULL, &err);
  Py_END_ALLOW_THREADS src->exports--;
  if (rc != 0) {
    Py_DECREF(dst);
    return adrpy_raise(rc, &err);
  }
  return (PyObject*)dst;
}

/* A Device from a Device or a 'kind:id' string; new reference. */
static AdrDeviceObject* as_device(PyObject* obj) {
  if (PyObject_TypeCheck(obj, &AdrDevice_Type)) {
    Py_INCREF(obj);
    return (AdrDeviceObject*)obj;
  }
  if (PyUnicode_Check(obj))
    return (AdrDeviceObject*)PyObject_CallOneArg((PyObject*)&AdrDevice_Type, obj);
  PyErr_Format(PyExc_TypeError, "expected an adr.Device or 'kind:id', got %s",
               Py_TYPE(obj)->tp_name);
  return NULL;
}

static PyObject* buffer_copy_to(AdrBufferObject* self, PyObject* arg) {
  AdrDeviceObject* device = as_device(arg);
  if (device == NULL) return NULL;
  PyObject* out = adrpy_buffer_copy(self, device);
  Py_DECREF(device);
  return out;
}

static PyObject* buffer_copy_from(AdrBufferObject* self, PyObject* args, PyObject* kwds) {
  static char* kwlist[] = {"src", "offset", NULL};
  PyObject* src;
  Py_ssize_t offset = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|n:copy_from", kwlist, &src, &offset)) return NULL;
  if (adrpy_buffer_check(self) < 0) return NULL;
  if (self->readonly) {
    PyErr_SetString(PyExc_BufferError, "copy_from(): the buffer is read-only");
    return NULL;
  }
  struct adr_device* src_dev = NULL;
  const void* src_ptr;
  size_t n;
  Py_buffer view = {0};
  AdrBufferObject* sb = NULL;
  if (PyObject_TypeCheck(src, &AdrBuffer_Type)) {
    sb = (AdrBufferObject*)src;
    if (adrpy_buffer_check(sb) < 0) return NULL;
    src_dev = sb->device->dev;
    src_ptr = sb->ptr;
    n = sb->nbytes;
  } else {
    if ((src_dev = host_device()) == NULL) return NULL;
    if (PyObject_GetBuffer(src, &view, PyBUF_ANY_CONTIGUOUS) < 0) return NULL;
    src_ptr = view.buf;
    n = (size_t)view.len;
  }
  int rc = 0;
  struct adr_error err = {{0}};
  if (offset < 0 || (size_t)offset > self->nbytes || n > self->nbytes - (size_t)offset) {
    PyErr_Format(PyExc_ValueError,
                 "copy_from(): %zu bytes at offset %zd do not fit in a buffer of %zu bytes", n,
                 offset, self->nbytes);
    rc = -1;
  } else if (n > 0) {
    self->exports++;
    if (sb != NULL) sb->exports++;
    Py_BEGIN_ALLOW_THREADS rc =
        adr_copy(self->device->dev, (char*)self->ptr + offset, src_dev, src_ptr, n, NULL, &err);
    Py_END_ALLOW_THREADS self->exports--;
    if (sb != NULL) sb->exports--;
    if (rc != 0) adrpy_raise(rc, &err);
  }
  if (sb == NULL) PyBuffer_Release(&view);
  if (rc != 0) return NULL;
  Py_RETURN_NONE;
}

static PyObject* buffer_to_bytes(AdrBufferObject* self, PyObject* unused) {
  if (adrpy_buffer_check(self) < 0) return NULL;
  PyObject* out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)self->nbytes);
  if (out == NULL || self->nbytes == 0) return out;
  struct adr_error err = {{0}};
  struct adr_device* host = host_device();
  if (host == NULL) {
    Py_DECREF(out);
    return NULL;
  }
  char* dst = PyBytes_AS_STRING(out);
  int rc;
  self->exports++;
  Py_BEGIN_ALLOW_THREADS rc =
      adr_copy(host, dst, self->device->dev, self->ptr, self->nbytes, NULL, &err);
  Py_END_ALLOW_THREADS self->exports--;
  if (rc != 0) {
    Py_DECREF(out);
    return adrpy_raise(rc, &err);
  }
  return out;
}

static PyObject* buffer_fill(AdrBufferObject* self, PyObject* args) {
  int value;
  if (!PyArg_ParseTuple(args, "i:fill", &value)) return NULL;
  if (adrpy_buffer_check(self) < 0) return NULL;
  if (self->readonly) {
    PyErr_SetString(PyExc_BufferError, "fill(): the buffer is read-only");
    return NULL;
  }
  if (value < 0 || value > 255) {
    PyErr_Format(PyExc_ValueError, "fill(): byte value %d out of range 0..255", value);
    return NULL;
  }
  struct adr_error err = {{0}};
  int rc;
  self->exports++;
  Py_BEGIN_ALLOW_THREADS rc =
      adr_memset(self->device->dev, self->ptr, value, self->nbytes, NULL, &err);
  Py_END_ALLOW_THREADS self->exports--;
  if (rc != 0) return adrpy_raise(rc, &err);
  Py_RETURN_NONE;
}

static Py_ssize_t buffer_length(AdrBufferObject* self) {
  if (adrpy_buffer_check(self) < 0) return -1;
  return (Py_ssize_t)self->nbytes;
}

static PyObject* buffer_repr(AdrBufferObject* self) {
  if (self->kind == ADRPY_BUFFER_FREED)
    return PyUnicode_FromFormat("<adr.Buffer %s freed>", adr_device_name(self->device->dev));
  return PyUnicode_FromFormat("<adr.Buffer %s %zu bytes at %p%s>",
                              adr_device_name(self->device->dev), self->nbytes, self->ptr,
                              self->kind == ADRPY_BUFFER_OWNED ? "" : " (borrowed)");
}

static PyObject* buffer_get_ptr(AdrBufferObject* self, void* c) {
  if (adrpy_buffer_check(self) < 0) return NULL;
  return PyLong_FromVoidPtr(self->ptr);
}
static PyObject* buffer_get_nbytes(AdrBufferObject* self, void* c) {
  if (adrpy_buffer_check(self) < 0) return NULL;
  return PyLong_FromSize_t(self->nbytes);
}
static PyObject* buffer_get_device(AdrBufferObject* self, void* c) {
  Py_INCREF(self->device);
  return (PyObject*)self->device;
}
static PyObject* buffer_get_freed(AdrBufferObject* self, void* c) {
  return PyBool_FromLong(self->kind == ADRPY_BUFFER_FREED);
}
static PyObject* buffer_get_owned(AdrBufferObject* self, void* c) {
  return PyBool_FromLong(self->kind == ADRPY_BUFFER_OWNED);
}
static PyObject* buffer_get_readonly(AdrBufferObject* self, void* c) {
  return PyBool_FromLong(self->readonly);
}

/* The buffer protocol, for host-accessible devices only: one-dimensional
 * unsigned bytes, writable unless a DLPack producer said read-only. */
static int buffer_getbuffer(AdrBufferObject* self, Py_buffer* view, int flags) {
  if (self->kind == ADRPY_BUFFER_FREED) {
    PyErr_SetString(PyExc_BufferError, "buffer was freed");
    view->obj = NULL;
    return -1;
  }
  if ((self->device->caps & ADR_CAP_HOST_ACCESSIBLE) == 0) {
    PyErr_Format(PyExc_BufferError,
                 "%s memory is not host-accessible: use to_bytes() or copy_to('cpu')",
                 adr_device_name(self->device->dev));
    view->obj = NULL;
    return -1;
  }
  if (PyBuffer_FillInfo(view, (PyObject*)self, self->ptr, (Py_ssize_t)self->nbytes, self->readonly,
                        flags) < 0)
    return -1;
  self->exports++;
  return 0;
}

static void buffer_releasebuffer(AdrBufferObject* self, Py_buffer* view) {
  self->exports--;
}

static PyBufferProcs buffer_as_buffer = {
    .bf_getbuffer = (getbufferproc)buffer_getbuffer,
    .bf_releasebuffer = (releasebufferproc)buffer_releasebuffer,
};

static PySequenceMethods buffer_as_sequence = {
    .sq_length = (lenfunc)buffer_length,
};

static PyObject* buffer_enter(AdrBufferObject* self, PyObject* unused) {
  if (adrpy_buffer_check(self) < 0) return NULL;
  Py_INCREF(self);
  return (PyObject*)self;
}

static PyObject* buffer_exit(AdrBufferObject* self, PyObject* args) {
  if (self->kind == ADRPY_BUFFER_FREED) Py_RETURN_FALSE;
  PyObject* r = buffer_free(self, NULL);
  if (r == NULL) return NULL;
  Py_DECREF(r);
  Py_RETURN_FALSE;
}

static PyMethodDef buffer_methods[] = {
    {"free", (PyCFunction)buffer_free, METH_NOARGS,
     "free(): give the memory back now (BufferError while exported; ValueError if freed)."},
    {"copy_to", (PyCFunction)buffer_copy_to, METH_O,
     "copy_to(device) -> Buffer: a new buffer on device (Device or 'kind:id') with these bytes."},
    {"copy_from", (PyCFunction)(void (*)(void))buffer_copy_from, METH_VARARGS | METH_KEYWORDS,
     "copy_from(src, offset=0): copy a Buffer or any contiguous buffer-protocol object\n"
     "into this buffer at offset (ValueError when it does not fit)."},
    {"to_bytes", (PyCFunction)buffer_to_bytes, METH_NOARGS,
     "to_bytes() -> bytes: a host copy of the buffer."},
    {"fill", (PyCFunction)buffer_fill, METH_VARARGS, "fill(byte): adr_memset the whole buffer."},
    {"__dlpack__", (PyCFunction)(void (*)(void))adrpy_buffer_dlpack, METH_VARARGS | METH_KEYWORDS,
     "__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None) -> capsule\n\n"
     "A DLPack capsule of the bytes (uint8, 1-D); docs/python.md has the rules."},
    {"__dlpack_device__", adrpy_buffer_dlpack_device, METH_NOARGS,
     "__dlpack_device__() -> (device_type, device_id)"},
    {"__enter__", (PyCFunction)buffer_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)buffer_exit, METH_VARARGS, "Frees the buffer."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef buffer_getset[] = {
    {"ptr", (getter)buffer_get_ptr, NULL, "the address (what goes in ArrowArray.buffers)", NULL},
    {"nbytes", (getter)buffer_get_nbytes, NULL, "size in bytes", NULL},
    {"device", (getter)buffer_get_device, NULL, "the Device holding the memory", NULL},
    {"freed", (getter)buffer_get_freed, NULL, "True after free()", NULL},
    {"owned", (getter)buffer_get_owned, NULL,
     "True for adr's own memory, False for memory borrowed (from_dlpack, asarray)", NULL},
    {"readonly", (getter)buffer_get_readonly, NULL, "True when the producer said read-only", NULL},
    {"__cuda_array_interface__", (getter)adrpy_buffer_cai, NULL,
     "CUDA Array Interface v3 (CUDA device, host and managed memory only)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject AdrBuffer_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "adr.Buffer",
    .tp_basicsize = sizeof(AdrBufferObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Bytes on an adr device; made by Device.alloc(), adr.from_dlpack() or adr.asarray().",
    .tp_dealloc = (destructor)buffer_dealloc,
    .tp_repr = (reprfunc)buffer_repr,
    .tp_as_buffer = &buffer_as_buffer,
    .tp_as_sequence = &buffer_as_sequence,
    .tp_methods = buffer_methods,
    .tp_getset = buffer_getset,
    .tp_weaklistoffset = offsetof(AdrBufferObject, weakreflist),
};

int adrpy_buffer_init(PyObject* module) {
  if (PyType_Ready(&AdrBuffer_Type) < 0) return -1;
  Py_INCREF(&AdrBuffer_Type);
  if (PyModule_AddObject(module, "Buffer", (PyObject*)&AdrBuffer_Type) < 0) {
    Py_DECREF(&AdrBuffer_Type);
    return -1;
  }
  return 0;
}
