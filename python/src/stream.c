/* SPDX-License-Identifier: Apache-2.0
 *
 * adr.Stream and adr.Event. Both keep their device object alive. A stream
 * or event is destroyed by destroy(), by leaving its `with` block (a stream
 * synchronizes first: adr_stream_destroy waits for queued work) or when the
 * last reference goes; using it afterwards raises ValueError. The device's
 * default stream is adr's and is never destroyed.
 */
#include "adrpy.h"

static PyObject* closed(const char* what) {
  PyErr_Format(PyExc_ValueError, "%s was destroyed", what);
  return NULL;
}

/* ---- Stream ------------------------------------------------------------- */

static PyObject* stream_wrap(AdrDeviceObject* device, struct adr_stream* s, int is_default) {
  AdrStreamObject* self = PyObject_New(AdrStreamObject, &AdrStream_Type);
  if (self == NULL) {
    if (!is_default) adr_stream_destroy(s, NULL);
    return NULL;
  }
  Py_INCREF(device);
  self->device = device;
  self->stream = s;
  self->is_default = is_default;
  return (PyObject*)self;
}

PyObject* adrpy_stream_create(AdrDeviceObject* device) {
  struct adr_stream* s = NULL;
  struct adr_error err = {{0}};
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = adr_stream_create(device->dev, &s, &err);
  Py_END_ALLOW_THREADS if (rc != 0) return adrpy_raise(rc, &err);
  return stream_wrap(device, s, 0);
}

PyObject* adrpy_stream_default(AdrDeviceObject* device) {
  struct adr_stream* s = adr_stream_default(device->dev);
  if (s == NULL) {
    struct adr_error err = {{0}};
    adr_error_set(&err, ENODEV, "[adr_stream_default] %s has no default stream",
                  adr_device_name(device->dev));
    return adrpy_raise(ENODEV, &err);
  }
  return stream_wrap(device, s, 1);
}

/* Destroys the stream (waiting for its work); returns the status. */
static int stream_close(AdrStreamObject* self, struct adr_error* err) {
  struct adr_stream* s = self->stream;
  self->stream = NULL;
  if (s == NULL || self->is_default) return 0;
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = adr_stream_destroy(s, err);
  Py_END_ALLOW_THREADS return rc;
}

static void stream_dealloc(AdrStreamObject* self) {
  stream_close(self, NULL);
  Py_XDECREF(self->device);
  PyObject_Free(self);
}

static PyObject* stream_synchronize(AdrStreamObject* self, PyObject* unused) {
  if (self->stream == NULL) return closed("stream");
  struct adr_error err = {{0}};
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = adr_stream_synchronize(self->stream, &err);
  Py_END_ALLOW_THREADS if (rc != 0) return adrpy_raise(rc, &err);
  Py_RETURN_NONE;
}

static PyObject* stream_wait(AdrStreamObject* self, PyObject* event) {
  if (!PyObject_TypeCheck(event, &AdrEvent_Type)) {
    PyErr_Format(PyExc_TypeError, "Stream.wait(): expected an adr.Event, got %s",
                 Py_TYPE(event)->tp_name);
    return NULL;
  }
  if (self->stream == NULL) return closed("stream");
  AdrEventObject* ev = (AdrEventObject*)event;
  if (ev->event == NULL) return closed("event");
  struct adr_error err = {{0}};
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = adr_stream_wait_event(self->stream, ev->event, &err);
  Py_END_ALLOW_THREADS if (rc != 0) return adrpy_raise(rc, &err);
  Py_RETURN_NONE;
}

static PyObject* stream_destroy(AdrStreamObject* self, PyObject* unused) {
  if (self->stream == NULL) return closed("stream");
  struct adr_error err = {{0}};
  int rc = stream_close(self, &err);
  if (rc != 0) return adrpy_raise(rc, &err);
  Py_RETURN_NONE;
}

static PyObject* stream_enter(AdrStreamObject* self, PyObject* unused) {
  if (self->stream == NULL) return closed("stream");
  Py_INCREF(self);
  return (PyObject*)self;
}

static PyObject* stream_exit(AdrStreamObject* self, PyObject* args) {
  if (self->stream == NULL) Py_RETURN_FALSE;
  struct adr_error err = {{0}};
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = adr_stream_synchronize(self->stream, &err);
  Py_END_ALLOW_THREADS struct adr_error err2 = {{0}};
  int rc2 = stream_close(self, &err2);
  if (rc != 0) return adrpy_raise(rc, &err);
  if (rc2 != 0) return adrpy_raise(rc2, &err2);
  Py_RETURN_FALSE;
}

static PyObject* stream_repr(AdrStreamObject* self) {
  return PyUnicode_FromFormat("<adr.Stream %s%s%s>", adr_device_name(self->device->dev),
                              self->is_default ? " default" : "",
                              self->stream == NULL ? " destroyed" : "");
}

static PyObject* stream_get_device(AdrStreamObject* self, void* c) {
  Py_INCREF(self->device);
  return (PyObject*)self->device;
}

static PyObject* stream_get_handle(AdrStreamObject* self, void* c) {
  if (self->stream == NULL) return closed("stream");
  return PyLong_FromVoidPtr(adr_stream_native(self->stream));
}

static PyObject* stream_get_destroyed(AdrStreamObject* self, void* c) {
  return PyBool_FromLong(self->stream == NULL);
}

static PyMethodDef stream_methods[] = {
    {"synchronize", (PyCFunction)stream_synchronize, METH_NOARGS,
     "synchronize(): block until the stream's queued work has completed."},
    {"wait", (PyCFunction)stream_wait, METH_O,
     "wait(event): work queued later on this stream waits for the event (device-side)."},
    {"destroy", (PyCFunction)stream_destroy, METH_NOARGS,
     "destroy(): wait for the queued work and destroy the stream (no-op for the default)."},
    {"__enter__", (PyCFunction)stream_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)stream_exit, METH_VARARGS, "Synchronizes and destroys the stream."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef stream_getset[] = {
    {"device", (getter)stream_get_device, NULL, "the stream's Device", NULL},
    {"handle", (getter)stream_get_handle, NULL,
     "the native stream handle (CUstream, cl_command_queue ...) as an int", NULL},
    {"destroyed", (getter)stream_get_destroyed, NULL, "True after destroy()", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject AdrStream_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "adr.Stream",
    .tp_basicsize = sizeof(AdrStreamObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An adr stream; made by Device.stream() or Device.default_stream().",
    .tp_dealloc = (destructor)stream_dealloc,
    .tp_repr = (reprfunc)stream_repr,
    .tp_methods = stream_methods,
    .tp_getset = stream_getset,
};

/* ---- Event -------------------------------------------------------------- */

PyObject* adrpy_event_create(AdrDeviceObject* device) {
  struct adr_event* e = NULL;
  struct adr_error err = {{0}};
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = adr_event_create(device->dev, &e, &err);
  Py_END_ALLOW_THREADS if (rc != 0) return adrpy_raise(rc, &err);
  AdrEventObject* self = PyObject_New(AdrEventObject, &AdrEvent_Type);
  if (self == NULL) {
    adr_event_destroy(e, NULL);
    return NULL;
  }
  Py_INCREF(device);
  self->device = device;
  self->event = e;
  return (PyObject*)self;
}

static int event_close(AdrEventObject* self, struct adr_error* err) {
  struct adr_event* e = self->event;
  self->event = NULL;
  if (e == NULL) return 0;
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = adr_event_destroy(e, err);
  Py_END_ALLOW_THREADS return rc;
}

static void event_dealloc(AdrEventObject* self) {
  event_close(self, NULL);
  Py_XDECREF(self->device);
  PyObject_Free(self);
}

static PyObject* event_record(AdrEventObject* self, PyObject* args, PyObject* kwds) {
  static char* kwlist[] = {"stream", NULL};
  PyObject* stream = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O:record", kwlist, &stream)) return NULL;
  if (self->event == NULL) return closed("event");
  struct adr_stream* s = NULL;
  if (stream != Py_None) {
    if (!PyObject_TypeCheck(stream, &AdrStream_Type)) {
      PyErr_Format(PyExc_TypeError, "Event.record(): expected an adr.Stream or None, got %s",
                   Py_TYPE(stream)->tp_name);
      return NULL;
    }
    s = ((AdrStreamObject*)stream)->stream;
    if (s == NULL) return closed("stream");
  }
  struct adr_error err = {{0}};
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = adr_event_record(self->event, s, &err);
  Py_END_ALLOW_THREADS if (rc != 0) return adrpy_raise(rc, &err);
  Py_RETURN_NONE;
}

static PyObject* event_synchronize(AdrEventObject* self, PyObject* unused) {
  if (self->event == NULL) return closed("event");
  struct adr_error err = {{0}};
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = adr_event_synchronize(self->event, &err);
  Py_END_ALLOW_THREADS if (rc != 0) return adrpy_raise(rc, &err);
  Py_RETURN_NONE;
}

static PyObject* event_query(AdrEventObject* self, PyObject* unused) {
  if (self->event == NULL) return closed("event");
  struct adr_error err = {{0}};
  int rc = adr_event_query(self->event, &err);
  if (rc == 0) Py_RETURN_TRUE;
  if (rc == EBUSY) Py_RETURN_FALSE;
  return adrpy_raise(rc, &err);
}

static PyObject* event_destroy(AdrEventObject* self, PyObject* unused) {
  if (self->event == NULL) return closed("event");
  struct adr_error err = {{0}};
  int rc = event_close(self, &err);
  if (rc != 0) return adrpy_raise(rc, &err);
  Py_RETURN_NONE;
}

static PyObject* event_enter(AdrEventObject* self, PyObject* unused) {
  if (self->event == NULL) return closed("event");
  Py_INCREF(self);
  return (PyObject*)self;
}

static PyObject* event_exit(AdrEventObject* self, PyObject* args) {
  struct adr_error err = {{0}};
  int rc = event_close(self, &err);
  if (rc != 0) return adrpy_raise(rc, &err);
  Py_RETURN_FALSE;
}

static PyObject* event_repr(AdrEventObject* self) {
  return PyUnicode_FromFormat("<adr.Event %s%s>", adr_device_name(self->device->dev),
                              self->event == NULL ? " destroyed" : "");
}

static PyObject* event_get_device(AdrEventObject* self, void* c) {
  Py_INCREF(self->device);
  return (PyObject*)self->device;
}

static PyMethodDef event_methods[] = {
    {"record", (PyCFunction)(void (*)(void))event_record, METH_VARARGS | METH_KEYWORDS,
     "record(stream=None): capture the work queued on the stream so far (None: default stream)."},
    {"synchronize", (PyCFunction)event_synchronize, METH_NOARGS,
     "synchronize(): block until the recorded work has completed."},
    {"query", (PyCFunction)event_query, METH_NOARGS,
     "query() -> bool: True when the recorded work has completed (never blocks)."},
    {"destroy", (PyCFunction)event_destroy, METH_NOARGS, "destroy(): destroy the event."},
    {"__enter__", (PyCFunction)event_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)event_exit, METH_VARARGS, "Destroys the event."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef event_getset[] = {
    {"device", (getter)event_get_device, NULL, "the event's Device", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject AdrEvent_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "adr.Event",
    .tp_basicsize = sizeof(AdrEventObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An adr event; made by Device.event().",
    .tp_dealloc = (destructor)event_dealloc,
    .tp_repr = (reprfunc)event_repr,
    .tp_methods = event_methods,
    .tp_getset = event_getset,
};

int adrpy_stream_init(PyObject* module) {
  if (PyType_Ready(&AdrStream_Type) < 0 || PyType_Ready(&AdrEvent_Type) < 0) return -1;
  Py_INCREF(&AdrStream_Type);
  if (PyModule_AddObject(module, "Stream", (PyObject*)&AdrStream_Type) < 0) {
    Py_DECREF(&AdrStream_Type);
    return -1;
  }
  Py_INCREF(&AdrEvent_Type);
  if (PyModule_AddObject(module, "Event", (PyObject*)&AdrEvent_Type) < 0) {
    Py_DECREF(&AdrEvent_Type);
    return -1;
  }
  return 0;
}
