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
 *
 * Streams: copy_to, copy_from and fill take stream=None (adr's NULL
 * stream: complete on return) or an adr.Stream (queued on it; the call
 * returns at once). Queued work is tracked per buffer (`pending`, adrpy.h):
 * an operation without a stream, the buffer protocol, to_bytes and the
 * DLPack export wait for it on the host first; an operation on another
 * stream waits for it device-side; freeing is stream-ordered (adr_free on
 * the pending stream) or waits; the CUDA Array Interface reports the
 * pending stream.
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

/* ---- queued work ---------------------------------------------------- */

int adrpy_stream_arg(PyObject* obj, const char* what, AdrStreamObject** out) {
  *out = NULL;
  if (obj == NULL || obj == Py_None) return 0;
  if (!PyObject_TypeCheck(obj, &AdrStream_Type)) {
    PyErr_Format(PyExc_TypeError, "%s: stream must be an adr.Stream or None, not %s", what,
                 Py_TYPE(obj)->tp_name);
    return -1;
  }
  if (((AdrStreamObject*)obj)->stream == NULL) {
    PyErr_SetString(PyExc_ValueError, "stream was destroyed");
    return -1;
  }
  *out = (AdrStreamObject*)obj;
  return 0;
}

static void pending_clear(AdrBufferObject* self) {
  AdrEventObject* ev = self->pending;
  AdrStreamObject* s = self->pending_stream;
  PyObject* keep = self->pending_keep;
  self->pending = NULL;
  self->pending_stream = NULL;
  self->pending_keep = NULL;
  self->pending_host = 0;
  Py_XDECREF(ev);
  Py_XDECREF(s);
  Py_XDECREF(keep);
}

/* Both wait with the GIL released: they hold a reference to the event
 * meanwhile and count themselves in `exports` (free() refuses), and check
 * afterwards that the buffer was not freed in between (ValueError), so a
 * caller may use it until it next releases the GIL. */
int adrpy_buffer_settle(AdrBufferObject* self) {
  AdrEventObject* pe = self->pending;
  if (pe == NULL) return adrpy_buffer_check(self);
  Py_INCREF(pe);
  struct adr_error err = {{0}};
  int rc = pe->event != NULL ? adr_event_query(pe->event, &err) : 0;
  if (rc == EBUSY) {
    memset(&err, 0, sizeof(err));
    self->exports++;
    Py_BEGIN_ALLOW_THREADS rc = adr_event_synchronize(pe->event, &err);
    Py_END_ALLOW_THREADS self->exports--;
  }
  /* Work queued by another thread meanwhile stays pending. */
  if (rc == 0 && self->pending == pe) pending_clear(self);
  Py_DECREF(pe);
  if (rc != 0) {
    adrpy_raise(rc, &err);
    return -1;
  }
  return adrpy_buffer_check(self);
}

int adrpy_buffer_order(AdrBufferObject* self, AdrStreamObject* s) {
  AdrEventObject* pe = self->pending;
  if (pe == NULL || self->pending_stream == s) return adrpy_buffer_check(self);
  struct adr_error err = {{0}};
  int rc = pe->event != NULL ? adr_event_query(pe->event, &err) : 0;
  if (rc == 0) {
    pending_clear(self);
    return adrpy_buffer_check(self);
  }
  if (rc != EBUSY) {
    adrpy_raise(rc, &err);
    return -1;
  }
  if (adr_event_device(pe->event) != adr_stream_device(s->stream))
    return adrpy_buffer_settle(self);
  memset(&err, 0, sizeof(err));
  Py_INCREF(pe);
  self->exports++;
  Py_BEGIN_ALLOW_THREADS rc = adr_stream_wait_event(s->stream, pe->event, &err);
  Py_END_ALLOW_THREADS self->exports--;
  Py_DECREF(pe);
  if (rc != 0) {
    adrpy_raise(rc, &err);
    return -1;
  }
  return adrpy_buffer_check(self);
}

AdrEventObject* adrpy_stream_mark(AdrStreamObject* s) {
  AdrEventObject* ev = (AdrEventObject*)adrpy_event_create(s->device);
  if (ev == NULL) return NULL;
  struct adr_error err = {{0}};
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = adr_event_record(ev->event, s->stream, &err);
  Py_END_ALLOW_THREADS if (rc != 0) {
    Py_DECREF(ev);
    adrpy_raise(rc, &err);
    return NULL;
  }
  return ev;
}

int adrpy_buffer_set_pending(AdrBufferObject* self, AdrStreamObject* s, AdrEventObject* ev,
                             PyObject* keep) {
  /* Objects the earlier queued work reads stay until all of it is done. */
  if (keep != NULL) {
    if (self->pending_keep == NULL && (self->pending_keep = PyList_New(0)) == NULL) return -1;
    if (PyList_Append(self->pending_keep, keep) < 0) return -1;
    self->pending_host = 1;
  }
  /* The previous event, if not complete yet, is kept too: destroying an
   * event may wait for it (Vulkan's vkDestroyEvent rule), which would turn
   * the next queued operation into a blocking one. */
  if (self->pending != NULL && self->pending != ev && self->pending->event != NULL &&
      adr_event_query(self->pending->event, NULL) == EBUSY) {
    if (self->pending_keep == NULL && (self->pending_keep = PyList_New(0)) == NULL) return -1;
    if (PyList_Append(self->pending_keep, (PyObject*)self->pending) < 0) return -1;
  }
  Py_INCREF(ev);
  Py_XSETREF(self->pending, ev);
  Py_INCREF(s);
  Py_XSETREF(self->pending_stream, s);
  return 0;
}

/* ---- objects ---------------------------------------------------------- */

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
  self->pending_stream = NULL;
  self->pending = NULL;
  self->pending_keep = NULL;
  self->pending_host = 0;
  self->cai_stream = NULL;
  return self;
}

PyObject* adrpy_buffer_alloc(AdrDeviceObject* device, Py_ssize_t nbytes, Py_ssize_t alignment,
                             AdrStreamObject* s) {
  AdrBufferObject* self = buffer_new_object(device);
  if (self == NULL) return NULL;
  void* p = NULL;
  struct adr_error err = {{0}};
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = adr_alloc(device->dev, (size_t)nbytes, (size_t)alignment,
                                        s != NULL ? s->stream : NULL, &p, &err);
  Py_END_ALLOW_THREADS if (rc != 0) {
    Py_DECREF(self);
    return adrpy_raise(rc, &err);
  }
  self->ptr = p;
  self->nbytes = (size_t)nbytes;
  self->kind = ADRPY_BUFFER_OWNED;
  if (s != NULL) {
    /* Stream-ordered: the memory is ready for work on `s`; everything else
     * waits for the event (pending), and a failure frees it on `s`. */
    AdrEventObject* ev = adrpy_stream_mark(s);
    if (ev == NULL || adrpy_buffer_set_pending(self, s, ev, NULL) < 0) {
      Py_XDECREF(ev);
      PyObject *et, *evv, *etb;
      PyErr_Fetch(&et, &evv, &etb);
      Py_BEGIN_ALLOW_THREADS adr_free(device->dev, p, (size_t)nbytes, s->stream, NULL);
      Py_END_ALLOW_THREADS self->kind = ADRPY_BUFFER_FREED;
      PyErr_Restore(et, evv, etb);
      Py_DECREF(self);
      return NULL;
    }
    Py_DECREF(ev);
  }
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

/* Gives the memory back; the buffer is FREED afterwards whatever happens.
 * Queued work: adr's own memory is freed on the pending stream when that is
 * a stream of the buffer's device and no host memory must outlive the
 * work (stream-ordered, no wait); otherwise the host waits first. A failed
 * wait leaves the memory alone (leaked, not freed under running work):
 * that is a status with `err` set and nothing raised, as adr_free's. */
static int buffer_release(AdrBufferObject* self, struct adr_error* err) {
  int kind = self->kind;
  /* FREED first: other threads see it while the GIL is released below. */
  self->kind = ADRPY_BUFFER_FREED;
  int rc = 0;
  struct adr_stream* free_on = NULL;
  if (self->pending != NULL) {
    AdrStreamObject* ps = self->pending_stream;
    if (kind == ADRPY_BUFFER_OWNED && !self->pending_host && ps->stream != NULL &&
        adr_stream_device(ps->stream) == self->device->dev) {
      free_on = ps->stream;
    } else {
      AdrEventObject* pe = self->pending; /* pending_* stay put: FREED */
      Py_BEGIN_ALLOW_THREADS rc = adr_event_synchronize(pe->event, err);
      Py_END_ALLOW_THREADS
    }
  }
  if (rc != 0) {
    if (self->pending_host) self->pending_keep = NULL; /* leaked with the memory */
    self->managed = NULL;
    pending_clear(self);
    return rc;
  }
  if (kind == ADRPY_BUFFER_OWNED) {
    Py_BEGIN_ALLOW_THREADS rc =
        adr_free(self->device->dev, self->ptr, self->nbytes, free_on, err);
    Py_END_ALLOW_THREADS
  } else if (kind == ADRPY_BUFFER_DLPACK || kind == ADRPY_BUFFER_DLPACK_V1) {
    adrpy_dlpack_release(kind, self->managed);
  } else if (kind == ADRPY_BUFFER_FOREIGN) {
    Py_XDECREF((PyObject*)self->managed);
  }
  self->managed = NULL;
  pending_clear(self);
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
  Py_XDECREF(self->cai_stream);
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

/* After work was queued on `s` whose recording failed: wait for the stream
 * so nothing the work uses goes away under it; the exception stays. */
static void drain_after_failure(AdrStreamObject* s) {
  PyObject *et, *ev, *etb;
  PyErr_Fetch(&et, &ev, &etb);
  Py_BEGIN_ALLOW_THREADS adr_stream_synchronize(s->stream, NULL);
  Py_END_ALLOW_THREADS PyErr_Restore(et, ev, etb);
}

/* Records the end of work just queued on `s` that used `a` (and `b`, and
 * host memory held by `keep`); 0, or -1 after draining the stream. */
static int queued(AdrStreamObject* s, AdrBufferObject* a, AdrBufferObject* b, PyObject* keep) {
  AdrEventObject* ev = adrpy_stream_mark(s);
  int rc = ev == NULL ? -1 : 0;
  if (rc == 0) rc = adrpy_buffer_set_pending(a, s, ev, keep);
  if (rc == 0 && b != NULL) rc = adrpy_buffer_set_pending(b, s, ev, NULL);
  Py_XDECREF(ev);
  if (rc < 0) drain_after_failure(s);
  return rc;
}

PyObject* adrpy_buffer_copy(AdrBufferObject* src, AdrDeviceObject* device, AdrStreamObject* s) {
  if (adrpy_buffer_check(src) < 0) return NULL;
  if ((s == NULL ? adrpy_buffer_settle(src) : adrpy_buffer_order(src, s)) < 0) return NULL;
  src->exports++; /* from here: the allocation below releases the GIL */
  AdrBufferObject* dst =
      (AdrBufferObject*)adrpy_buffer_alloc(device, (Py_ssize_t)src->nbytes, 0, NULL);
  if (dst == NULL) {
    src->exports--;
    return NULL;
  }
  struct adr_error err = {{0}};
  struct adr_device* src_dev = src->device->dev;
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = adr_copy(device->dev, dst->ptr, src_dev, src->ptr, src->nbytes,
                                       s != NULL ? s->stream : NULL, &err);
  Py_END_ALLOW_THREADS if (rc != 0) {
    src->exports--;
    Py_DECREF(dst);
    return adrpy_raise(rc, &err);
  }
  /* Still counted until the queued copy is recorded on both buffers. */
  if (s != NULL && src->nbytes > 0 && queued(s, src, dst, NULL) < 0) rc = -1;
  src->exports--;
  if (rc != 0) {
    Py_DECREF(dst);
    return NULL;
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

static PyObject* buffer_copy_to(AdrBufferObject* self, PyObject* args, PyObject* kwds) {
  static char* kwlist[] = {"device", "stream", NULL};
  PyObject *arg, *stream = Py_None;
  AdrStreamObject* s;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$O:copy_to", kwlist, &arg, &stream)) return NULL;
  if (adrpy_stream_arg(stream, "copy_to()", &s) < 0) return NULL;
  AdrDeviceObject* device = as_device(arg);
  if (device == NULL) return NULL;
  PyObject* out = adrpy_buffer_copy(self, device, s);
  Py_DECREF(device);
  return out;
}

static PyObject* buffer_copy_from(AdrBufferObject* self, PyObject* args, PyObject* kwds) {
  static char* kwlist[] = {"src", "offset", "stream", NULL};
  PyObject* src;
  PyObject* stream = Py_None;
  Py_ssize_t offset = 0;
  AdrStreamObject* s;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|n$O:copy_from", kwlist, &src, &offset, &stream))
    return NULL;
  if (adrpy_stream_arg(stream, "copy_from()", &s) < 0) return NULL;
  if (adrpy_buffer_check(self) < 0) return NULL;
  if (self->readonly) {
    PyErr_SetString(PyExc_BufferError, "copy_from(): the buffer is read-only");
    return NULL;
  }
  struct adr_device* src_dev = NULL;
  const void* src_ptr;
  size_t n;
  PyObject* keep = NULL; /* a memoryview of host memory, held while the copy is queued */
  AdrBufferObject* sb = NULL;
  if (PyObject_TypeCheck(src, &AdrBuffer_Type)) {
    sb = (AdrBufferObject*)src;
    if (adrpy_buffer_check(sb) < 0) return NULL;
    src_dev = sb->device->dev;
    src_ptr = sb->ptr;
    n = sb->nbytes;
  } else {
    if ((src_dev = host_device()) == NULL) return NULL;
    if ((keep = PyMemoryView_FromObject(src)) == NULL) return NULL;
    Py_buffer* view = PyMemoryView_GET_BUFFER(keep);
    if (!PyBuffer_IsContiguous(view, 'A')) {
      Py_DECREF(keep);
      PyErr_SetString(PyExc_BufferError, "copy_from(): the source is not contiguous");
      return NULL;
    }
    src_ptr = view->buf;
    n = (size_t)view->len;
  }
  int rc = 0;
  struct adr_error err = {{0}};
  if (offset < 0 || (size_t)offset > self->nbytes || n > self->nbytes - (size_t)offset) {
    PyErr_Format(PyExc_ValueError,
                 "copy_from(): %zu bytes at offset %zd do not fit in a buffer of %zu bytes", n,
                 offset, self->nbytes);
    rc = -1;
  } else if (n > 0) {
    if (s == NULL)
      rc = adrpy_buffer_settle(self) < 0 || (sb != NULL && adrpy_buffer_settle(sb) < 0) ? -1 : 0;
    else
      rc = adrpy_buffer_order(self, s) < 0 || (sb != NULL && adrpy_buffer_order(sb, s) < 0) ? -1
                                                                                           : 0;
    if (rc == 0) {
      self->exports++;
      if (sb != NULL) sb->exports++;
      Py_BEGIN_ALLOW_THREADS rc = adr_copy(self->device->dev, (char*)self->ptr + offset, src_dev,
                                           src_ptr, n, s != NULL ? s->stream : NULL, &err);
      Py_END_ALLOW_THREADS if (rc != 0) adrpy_raise(rc, &err);
      else if (s != NULL) rc = queued(s, self, sb, keep);
      self->exports--;
      if (sb != NULL) sb->exports--;
    }
  }
  Py_XDECREF(keep);
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
  if (adrpy_buffer_settle(self) < 0) {
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

static PyObject* buffer_fill(AdrBufferObject* self, PyObject* args, PyObject* kwds) {
  static char* kwlist[] = {"value", "stream", NULL};
  int value;
  PyObject* stream = Py_None;
  AdrStreamObject* s;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "i|$O:fill", kwlist, &value, &stream)) return NULL;
  if (adrpy_stream_arg(stream, "fill()", &s) < 0) return NULL;
  if (adrpy_buffer_check(self) < 0) return NULL;
  if (self->readonly) {
    PyErr_SetString(PyExc_BufferError, "fill(): the buffer is read-only");
    return NULL;
  }
  if (value < 0 || value > 255) {
    PyErr_Format(PyExc_ValueError, "fill(): byte value %d out of range 0..255", value);
    return NULL;
  }
  if ((s == NULL ? adrpy_buffer_settle(self) : adrpy_buffer_order(self, s)) < 0) return NULL;
  struct adr_error err = {{0}};
  int rc;
  self->exports++;
  Py_BEGIN_ALLOW_THREADS rc = adr_memset(self->device->dev, self->ptr, value, self->nbytes,
                                         s != NULL ? s->stream : NULL, &err);
  Py_END_ALLOW_THREADS if (rc != 0) adrpy_raise(rc, &err);
  else if (s != NULL && self->nbytes > 0) rc = queued(s, self, NULL, NULL);
  self->exports--;
  if (rc != 0) return NULL;
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
  if (adrpy_buffer_settle(self) < 0) {
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
    {"copy_to", (PyCFunction)(void (*)(void))buffer_copy_to, METH_VARARGS | METH_KEYWORDS,
     "copy_to(device, *, stream=None) -> Buffer: a new buffer on device (Device or 'kind:id')\n"
     "with these bytes. With an adr.Stream (of either device) the copy is queued on it and\n"
     "the call returns at once; without one it has completed on return."},
    {"copy_from", (PyCFunction)(void (*)(void))buffer_copy_from, METH_VARARGS | METH_KEYWORDS,
     "copy_from(src, offset=0, *, stream=None): copy a Buffer or any contiguous buffer-protocol\n"
     "object into this buffer at offset (ValueError when it does not fit). With a stream the\n"
     "copy is queued (src is held until it ran); without one it has completed on return."},
    {"to_bytes", (PyCFunction)buffer_to_bytes, METH_NOARGS,
     "to_bytes() -> bytes: a host copy of the buffer."},
    {"fill", (PyCFunction)(void (*)(void))buffer_fill, METH_VARARGS | METH_KEYWORDS,
     "fill(byte, *, stream=None): adr_memset the whole buffer (queued on stream if given)."},
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
