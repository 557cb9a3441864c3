/* SPDX-License-Identifier: Apache-2.0
 *
 * The CUDA Array Interface, version 3 (shared/seeds/001; docs/python.md).
 *
 * Producer: buffers in CUDA device, host (pinned) and managed memory give a
 * 1-D '|u1' array of their bytes. Other devices raise AttributeError, so
 * hasattr() says no. "stream" is None when nothing is queued on the buffer
 * (the interface's rule: None when no synchronisation is needed; never 0),
 * else the CUstream of its pending work: every queued operation on the
 * buffer is ordered before the last one's event on that stream (buffer.c),
 * so synchronising on it is enough, as the interface requires. Work queued
 * on a stream that is not CUDA's is waited for on the host first.
 *
 * Consumer (adr.asarray): validates the producer's dict, finds the device
 * that owns the pointer (adr_pointer_query asks the CUDA driver), and before
 * handing the memory out orders on the producer's stream as the interface
 * requires: the stream is imported, an event recorded on it, and the
 * consumer's stream waits on the event (or, without one, the host does).
 */
#include <stdio.h>
#include <string.h>

#include "adrpy.h"

static int is_cuda_kind(ArrowDeviceType t) {
  return t == ARROW_DEVICE_CUDA || t == ARROW_DEVICE_CUDA_HOST || t == ARROW_DEVICE_CUDA_MANAGED;
}

PyObject* adrpy_buffer_cai(PyObject* self_obj, void* closure) {
  AdrBufferObject* self = (AdrBufferObject*)self_obj;
  ArrowDeviceType t = adr_device_type(self->device->dev);
  if (t != ARROW_DEVICE_CUDA && t != ARROW_DEVICE_CUDA_HOST && t != ARROW_DEVICE_CUDA_MANAGED) {
    PyErr_Format(PyExc_AttributeError, "__cuda_array_interface__: %s memory is not CUDA memory",
                 adr_device_name(self->device->dev));
    return NULL;
  }
  if (adrpy_buffer_check(self) < 0) return NULL;
  PyObject* stream = NULL;
  if (self->pending != NULL && adr_event_query(self->pending->event, NULL) == EBUSY) {
    AdrStreamObject* ps = self->pending_stream;
    ArrowDeviceType st = ps->stream != NULL ? adr_device_type(adr_stream_device(ps->stream)) : 0;
    if (is_cuda_kind(st)) {
      void* h = adr_stream_native(ps->stream);
      /* NULL is the legacy default stream, which the interface calls 1. */
      stream = h != NULL ? PyLong_FromVoidPtr(h) : PyLong_FromLong(1);
      if (stream == NULL) return NULL;
      /* The consumer may use the handle later: the stream lives as long. */
      Py_INCREF(ps);
      Py_XSETREF(self->cai_stream, (PyObject*)ps);
    }
  }
  if (stream == NULL) {
    if (adrpy_buffer_settle(self) < 0) return NULL;
    Py_INCREF(Py_None);
    stream = Py_None;
  }
  PyObject* data =
      Py_BuildValue("(NO)", self->nbytes == 0 ? PyLong_FromLong(0) : PyLong_FromVoidPtr(self->ptr),
                    self->readonly ? Py_True : Py_False);
  if (data == NULL) {
    Py_DECREF(stream);
    return NULL;
  }
  return Py_BuildValue("{s:(n),s:s,s:N,s:i,s:O,s:[(ss)],s:N}", "shape", (Py_ssize_t)self->nbytes,
                       "typestr", "|u1", "data", data, "version", 3, "strides", Py_None, "descr",
                       "", "|u1", "stream", stream);
}

/* A non-negative Python int (bools refused) into *out. */
static int as_index(PyObject* v, const char* what, long long* out) {
  if (!PyLong_Check(v) || PyBool_Check(v)) {
    PyErr_Format(PyExc_TypeError, "asarray: %s must be an int, not %s", what, Py_TYPE(v)->tp_name);
    return -1;
  }
  *out = PyLong_AsLongLong(v);
  if (*out == -1 && PyErr_Occurred()) return -1;
  return 0;
}

/* NumPy typestr "<f8", "|u1", "|b1", "<U3" ... -> item size in bytes. */
static int typestr_itemsize(PyObject* ts, size_t* out) {
  const char* s = PyUnicode_Check(ts) ? PyUnicode_AsUTF8(ts) : NULL;
  if (s == NULL) {
    if (!PyErr_Occurred())
      PyErr_Format(PyExc_TypeError, "asarray: typestr must be a str, not %s", Py_TYPE(ts)->tp_name);
    return -1;
  }
  char* end = NULL;
  long n = 0;
  if (strlen(s) >= 3 && strchr("<>|=", s[0]) != NULL && strchr("biufcmMSUV", s[1]) != NULL &&
      s[2] >= '0' && s[2] <= '9')
    n = strtol(s + 2, &end, 10);
  if (n <= 0 || end == NULL || *end != '\0' || n > (1L << 20)) {
    PyErr_Format(PyExc_ValueError, "asarray: typestr '%s' is not a fixed-size NumPy type string",
                 s);
    return -1;
  }
  *out = (size_t)n * (s[1] == 'U' ? 4 : 1);
  return 0;
}

PyObject* adrpy_asarray(PyObject* module, PyObject* args, PyObject* kwds) {
  static char* kwlist[] = {"obj", "stream", "device", NULL};
  PyObject *obj, *stream_obj = Py_None, *device_obj = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$OO:asarray", kwlist, &obj, &stream_obj,
                                   &device_obj))
    return NULL;
  struct adr_stream* consumer = NULL;
  if (stream_obj != Py_None) {
    if (!PyObject_TypeCheck(stream_obj, &AdrStream_Type)) {
      PyErr_Format(PyExc_TypeError, "asarray: stream must be an adr.Stream or None, not %s",
                   Py_TYPE(stream_obj)->tp_name);
      return NULL;
    }
    consumer = ((AdrStreamObject*)stream_obj)->stream;
    if (consumer == NULL) {
      PyErr_SetString(PyExc_ValueError, "stream was destroyed");
      return NULL;
    }
  }
  PyObject* cai = PyObject_GetAttrString(obj, "__cuda_array_interface__");
  if (cai == NULL) {
    if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError, "asarray: %s has no __cuda_array_interface__",
                   Py_TYPE(obj)->tp_name);
    }
    return NULL;
  }
  PyObject* result = NULL;
  PyObject* device = NULL;
  if (!PyDict_Check(cai)) {
    PyErr_Format(PyExc_TypeError, "asarray: __cuda_array_interface__ is a %s, not a dict",
                 Py_TYPE(cai)->tp_name);
    goto out;
  }
  const char* required[] = {"version", "shape", "typestr", "data"};
  for (size_t i = 0; i < 4; i++) {
    if (PyDict_GetItemString(cai, required[i]) == NULL) {
      PyErr_Format(PyExc_ValueError, "asarray: __cuda_array_interface__ has no '%s'", required[i]);
      goto out;
    }
  }
  long long version;
  if (as_index(PyDict_GetItemString(cai, "version"), "version", &version) < 0) goto out;
  if (version < 0 || version > 3) {
    PyErr_Format(PyExc_ValueError,
                 "asarray: __cuda_array_interface__ version %lld is not supported (adr reads 0 "
                 "to 3)",
                 version);
    goto out;
  }
  PyObject* shape = PyDict_GetItemString(cai, "shape");
  if (!PyTuple_Check(shape)) {
    PyErr_SetString(PyExc_TypeError, "asarray: shape must be a tuple of ints");
    goto out;
  }
  Py_ssize_t ndim = PyTuple_GET_SIZE(shape);
  size_t itemsize;
  if (typestr_itemsize(PyDict_GetItemString(cai, "typestr"), &itemsize) < 0) goto out;
  PyObject* data = PyDict_GetItemString(cai, "data");
  if (!PyTuple_Check(data) || PyTuple_GET_SIZE(data) != 2 ||
      !PyBool_Check(PyTuple_GET_ITEM(data, 1))) {
    PyErr_SetString(PyExc_TypeError, "asarray: data must be a tuple (int pointer, bool read_only)");
    goto out;
  }
  PyObject* ptr_obj = PyTuple_GET_ITEM(data, 0);
  if (!PyLong_Check(ptr_obj) || PyBool_Check(ptr_obj)) {
    PyErr_SetString(PyExc_TypeError, "asarray: data[0] must be an int pointer");
    goto out;
  }
  void* ptr = PyLong_AsVoidPtr(ptr_obj);
  if (ptr == NULL && PyErr_Occurred()) goto out;
  int readonly = PyTuple_GET_ITEM(data, 1) == Py_True;
  PyObject* mask = PyDict_GetItemString(cai, "mask");
  if (mask != NULL && mask != Py_None) {
    PyErr_SetString(PyExc_ValueError, "asarray: masked arrays (mask not None) are not supported");
    goto out;
  }
  PyObject* strides = PyDict_GetItemString(cai, "strides");
  if (strides == Py_None) strides = NULL;
  if (strides != NULL && (!PyTuple_Check(strides) || PyTuple_GET_SIZE(strides) != ndim)) {
    PyErr_Format(PyExc_ValueError, "asarray: strides must be None or a tuple of %zd ints", ndim);
    goto out;
  }
  size_t count = 1;
  for (Py_ssize_t i = 0; i < ndim; i++) {
    long long extent;
    if (as_index(PyTuple_GET_ITEM(shape, i), "shape[i]", &extent) < 0) goto out;
    if (extent < 0) {
      PyErr_Format(PyExc_ValueError, "asarray: negative shape[%zd] = %lld", i, extent);
      goto out;
    }
    if (extent != 0 && count > SIZE_MAX / (size_t)extent) {
      PyErr_SetString(PyExc_ValueError, "asarray: array size overflows");
      goto out;
    }
    count *= (size_t)extent;
  }
  if (strides != NULL && count > 0) {
    long long expected = (long long)itemsize;
    for (Py_ssize_t i = ndim - 1; i >= 0; i--) {
      long long st, extent = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
      if (as_index(PyTuple_GET_ITEM(strides, i), "strides[i]", &st) < 0) goto out;
      if (extent != 1 && st != expected) {
        PyErr_Format(PyExc_ValueError,
                     "asarray: %s strides[%zd] = %lld bytes (expected %lld): adr buffers are "
                     "contiguous C-order bytes",
                     st < 0 ? "negative" : "non-contiguous", i, st, expected);
        goto out;
      }
      expected *= extent;
    }
  }
  if (count > 0 && itemsize > SIZE_MAX / count) {
    PyErr_SetString(PyExc_ValueError, "asarray: array size overflows");
    goto out;
  }
  size_t nbytes = count * itemsize;
  if (nbytes > 0 && ptr == NULL) {
    PyErr_SetString(PyExc_ValueError, "asarray: data pointer 0 for a non-empty array");
    goto out;
  }
  int has_stream = 0;
  long long producer_stream = 0;
  PyObject* ps = version >= 3 ? PyDict_GetItemString(cai, "stream") : NULL;
  if (ps != NULL && ps != Py_None) {
    if (!PyLong_Check(ps) || PyBool_Check(ps)) {
      PyErr_Format(PyExc_TypeError, "asarray: stream must be None or an int, not %s",
                   Py_TYPE(ps)->tp_name);
      goto out;
    }
    int overflow = 0;
    producer_stream = PyLong_AsLongLongAndOverflow(ps, &overflow);
    if (producer_stream == -1 && PyErr_Occurred()) goto out;
    if (overflow != 0 || producer_stream <= 0) {
      PyErr_SetString(PyExc_ValueError,
                      producer_stream == 0 && overflow == 0
                          ? "asarray: stream 0 is disallowed by the CUDA Array Interface (use "
                            "None, 1 for the legacy or 2 for the per-thread default stream)"
                          : "asarray: stream must be None, 1, 2 or a CUstream");
      goto out;
    }
    has_stream = 1;
  }

  if (device_obj != Py_None) {
    if (PyObject_TypeCheck(device_obj, &AdrDevice_Type)) {
      Py_INCREF(device_obj);
      device = device_obj;
    } else if (PyUnicode_Check(device_obj)) {
      device = PyObject_CallOneArg((PyObject*)&AdrDevice_Type, device_obj);
      if (device == NULL) goto out;
    } else {
      PyErr_Format(PyExc_TypeError, "asarray: device must be an adr.Device, 'kind:id' or None");
      goto out;
    }
  } else if (ptr != NULL) {
    struct adr_device* dev = NULL;
    struct adr_error err = {{0}};
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = adr_pointer_query(ptr, &dev, &err);
    Py_END_ALLOW_THREADS if (rc != 0) {
      adrpy_raise(rc, &err);
      goto out;
    }
    device = adrpy_device_wrap(dev);
  } else {
    device = adrpy_device_get(ARROW_DEVICE_CUDA, 0);
  }
  if (device == NULL) goto out;
  struct adr_device* dev = ((AdrDeviceObject*)device)->dev;
  if (!is_cuda_kind(adr_device_type(dev))) {
    PyErr_Format(PyExc_ValueError, "asarray: %s is not a CUDA device", adr_device_name(dev));
    goto out;
  }

  if (has_stream) {
    struct adr_error err = {{0}};
    struct adr_stream* imported = NULL;
    struct adr_event* ev = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS rc =
        adr_stream_import(dev, (void*)(uintptr_t)producer_stream, &imported, &err);
    if (rc == 0) rc = adr_event_create(dev, &ev, &err);
    if (rc == 0) rc = adr_event_record(ev, imported, &err);
    if (rc == 0)
      rc = consumer != NULL ? adr_stream_wait_event(consumer, ev, &err)
                            : adr_event_synchronize(ev, &err);
    /* Destroying the event while a stream waits on it is safe (CUDA's
     * rule); the imported wrapper leaves the producer's stream alone. */
    if (ev != NULL) adr_event_destroy(ev, NULL);
    if (imported != NULL) adr_stream_destroy(imported, NULL);
    Py_END_ALLOW_THREADS if (rc != 0) {
      adrpy_raise(rc, &err);
      goto out;
    }
  }
  Py_INCREF(obj);
  result = adrpy_buffer_borrow((AdrDeviceObject*)device, ptr, nbytes, ADRPY_BUFFER_FOREIGN, obj,
                               readonly);
  if (result == NULL) Py_DECREF(obj);
out:
  Py_XDECREF(device);
  Py_DECREF(cai);
  return result;
}
