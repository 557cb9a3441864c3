/* SPDX-License-Identifier: Apache-2.0
 *
 * adr.ArrayStream: a single-pass stream of adr.Array of one schema, and the
 * Arrow PyCapsule stream protocol both ways (docs/python.md, "Arrow array
 * streams").
 *
 * A stream's source is a list of arrays (from_arrays) or a stream moved
 * out of another producer's capsule (from_arrow: an ArrowDeviceArrayStream
 * or an ArrowArrayStream). Python reads it with iteration / read_all();
 * __arrow_c_stream__ / __arrow_c_device_stream__ hand the rest of it to a
 * consumer: the exported stream's get_next takes the GIL, pulls the next
 * adr.Array from this object and exports it sharing its buffers
 * (adrpy_array_export). After an export, Python can no longer read it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adrpy.h"

enum { SRC_LIST = 0, SRC_DEVICE = 1, SRC_CPU = 2, SRC_DONE = 3 };

typedef struct {
  PyObject_HEAD struct ArrowSchema schema;
  ArrowDeviceType device_type;
  int source;       /* SRC_* */
  PyObject* arrays; /* SRC_LIST: a list of adr.Array */
  Py_ssize_t pos;
  struct ArrowDeviceArrayStream dstream; /* SRC_DEVICE */
  struct ArrowArrayStream cstream;       /* SRC_CPU */
  int exported;                          /* handed to a consumer */
  int busy;                              /* a pull is in flight (GIL released) */
} AdrArrayStreamObject;

extern PyTypeObject AdrArrayStream_Type;

static void source_release(AdrArrayStreamObject* self) {
  switch (self->source) {
    case SRC_LIST:
      Py_CLEAR(self->arrays);
      break;
    case SRC_DEVICE:
      if (self->dstream.release != NULL) self->dstream.release(&self->dstream);
      break;
    case SRC_CPU:
      if (self->cstream.release != NULL) self->cstream.release(&self->cstream);
      break;
  }
  self->source = SRC_DONE;
}

/* The next adr.Array (new reference); NULL at the end (no exception) or on
 * an error (exception set). The GIL is held. */
static PyObject* stream_pull(AdrArrayStreamObject* self) {
  if (self->busy) {
    PyErr_SetString(PyExc_RuntimeError, "ArrayStream is being read by another thread");
    return NULL;
  }
  if (self->source == SRC_DONE) return NULL;
  if (self->source == SRC_LIST) {
    if (self->pos >= PyList_GET_SIZE(self->arrays)) {
      source_release(self);
      return NULL;
    }
    PyObject* a = PyList_GET_ITEM(self->arrays, self->pos);
    Py_INCREF(a);
    /* drop the list's reference: the stream does not keep what it gave */
    PyList_SET_ITEM(self->arrays, self->pos, Py_NewRef(Py_None));
    Py_DECREF(a);
    self->pos++;
    return a;
  }
  struct ArrowDeviceArray darr;
  memset(&darr, 0, sizeof(darr));
  struct adr_error err = {{0}};
  int rc = 0;
  self->busy = 1;
  if (self->source == SRC_DEVICE) {
    Py_BEGIN_ALLOW_THREADS rc = adr_device_array_stream_next(&self->dstream, &darr, &err);
    Py_END_ALLOW_THREADS
  } else {
    struct ArrowArray arr;
    memset(&arr, 0, sizeof(arr));
    Py_BEGIN_ALLOW_THREADS rc = self->cstream.get_next(&self->cstream, &arr);
    Py_END_ALLOW_THREADS if (rc != 0) {
      const char* m = self->cstream.get_last_error != NULL
                          ? self->cstream.get_last_error(&self->cstream)
                          : NULL;
      snprintf(err.message, sizeof(err.message), "[ArrowArrayStream.get_next] %s: %s",
               adr_status_name(rc), m != NULL ? m : "(no message)");
    }
    else if (arr.release != NULL) {
      struct adr_device* cpu = NULL;
      rc = adr_device_get(ARROW_DEVICE_CPU, 0, &cpu, &err);
      if (rc == 0) rc = adr_device_array_init(cpu, &arr, NULL, &darr, &err);
      if (rc != 0 && arr.release != NULL) arr.release(&arr);
    }
  }
  self->busy = 0;
  if (rc != 0) {
    /* a stream that failed is over (the C stream interface allows no more
     * calls but release) */
    source_release(self);
    return adrpy_raise(rc, &err);
  }
  if (darr.array.release == NULL) {
    source_release(self);
    return NULL;
  }
  struct ArrowSchema s;
  memset(&s, 0, sizeof(s));
  rc = adr_schema_copy(&self->schema, &s, &err);
  if (rc != 0) {
    adr_device_array_release(&darr);
    return adrpy_raise(rc, &err);
  }
  return adrpy_array_wrap(&s, &darr);
}

static int check_readable(AdrArrayStreamObject* self) {
  if (self->exported) {
    PyErr_SetString(PyExc_ValueError,
                    "ArrayStream was exported to a consumer (a stream is read once)");
    return -1;
  }
  return 0;
}

/* ---- export -------------------------------------------------------------- */

struct export_priv {
  PyObject* owner;
  char last_error[1024];
};

/* Turns the pending exception into a status and the stream's last error. */
static int export_error(struct export_priv* p) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  int status = EIO;
  if (value != NULL && PyObject_IsInstance(value, PyExc_OSError) == 1) {
    PyObject* e = PyObject_GetAttrString(value, "errno");
    if (e != NULL && PyLong_Check(e)) {
      long v = PyLong_AsLong(e);
      if (v > 0 && v < 4096) status = (int)v;
    }
    Py_XDECREF(e);
    PyObject* s = PyObject_GetAttrString(value, "strerror");
    if (s != NULL && PyUnicode_Check(s)) {
      snprintf(p->last_error, sizeof(p->last_error), "%s", PyUnicode_AsUTF8(s));
      Py_DECREF(s);
      goto out;
    }
    Py_XDECREF(s);
  }
  PyObject* s = value != NULL ? PyObject_Str(value) : NULL;
  const char* text = s != NULL ? PyUnicode_AsUTF8(s) : NULL;
  snprintf(p->last_error, sizeof(p->last_error), "%s: %s",
           type != NULL ? ((PyTypeObject*)type)->tp_name : "error",
           text != NULL ? text : "(no message)");
  Py_XDECREF(s);
out:
  PyErr_Clear();
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  return status;
}

static int export_get_schema(struct export_priv* p, struct ArrowSchema* out) {
  PyGILState_STATE g = PyGILState_Ensure();
  AdrArrayStreamObject* self = (AdrArrayStreamObject*)p->owner;
  struct adr_error err = {{0}};
  int rc = adr_schema_copy(&self->schema, out, &err);
  if (rc != 0) snprintf(p->last_error, sizeof(p->last_error), "%s", err.message);
  PyGILState_Release(g);
  return rc;
}

/* 0 with *out an exported array (release NULL at the end), or a status. */
static int export_get_next(struct export_priv* p, struct ArrowDeviceArray* out) {
  PyGILState_STATE g = PyGILState_Ensure();
  memset(out, 0, sizeof(*out));
  int rc = 0;
  PyObject* a = stream_pull((AdrArrayStreamObject*)p->owner);
  if (a == NULL) {
    if (PyErr_Occurred()) rc = export_error(p);
  } else {
    if (adrpy_array_export(a, out) < 0) rc = export_error(p);
    Py_DECREF(a);
  }
  PyGILState_Release(g);
  return rc;
}

static void export_release(struct export_priv* p) {
  if (Py_IsInitialized()) {
    PyGILState_STATE g = PyGILState_Ensure();
    Py_DECREF(p->owner);
    PyGILState_Release(g);
  }
  PyMem_RawFree(p);
}

static int dev_get_schema(struct ArrowDeviceArrayStream* s, struct ArrowSchema* out) {
  return export_get_schema(s->private_data, out);
}
static int dev_get_next(struct ArrowDeviceArrayStream* s, struct ArrowDeviceArray* out) {
  return export_get_next(s->private_data, out);
}
static const char* dev_get_last_error(struct ArrowDeviceArrayStream* s) {
  struct export_priv* p = s->private_data;
  return p->last_error[0] != '\0' ? p->last_error : NULL;
}
static void dev_release(struct ArrowDeviceArrayStream* s) {
  export_release(s->private_data);
  s->release = NULL;
}

static int cpu_get_schema(struct ArrowArrayStream* s, struct ArrowSchema* out) {
  return export_get_schema(s->private_data, out);
}
static int cpu_get_next(struct ArrowArrayStream* s, struct ArrowArray* out) {
  struct ArrowDeviceArray d;
  int rc = export_get_next(s->private_data, &d);
  if (rc == 0)
    *out = d.array; /* CPU arrays: no sync_event */
  else
    memset(out, 0, sizeof(*out));
  return rc;
}
static const char* cpu_get_last_error(struct ArrowArrayStream* s) {
  struct export_priv* p = s->private_data;
  return p->last_error[0] != '\0' ? p->last_error : NULL;
}
static void cpu_release(struct ArrowArrayStream* s) {
  export_release(s->private_data);
  s->release = NULL;
}

static void cpu_capsule_destructor(PyObject* cap) {
  struct ArrowArrayStream* s = PyCapsule_GetPointer(cap, "arrow_array_stream");
  if (s == NULL) {
    PyErr_WriteUnraisable(cap);
    return;
  }
  if (s->release != NULL) s->release(s);
  PyMem_RawFree(s);
}

static void dev_capsule_destructor(PyObject* cap) {
  struct ArrowDeviceArrayStream* s = PyCapsule_GetPointer(cap, "arrow_device_array_stream");
  if (s == NULL) {
    PyErr_WriteUnraisable(cap);
    return;
  }
  if (s->release != NULL) s->release(s);
  PyMem_RawFree(s);
}

static int check_kwargs(PyObject* kwds, const char* method) {
  if (kwds == NULL) return 0;
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(kwds, &pos, &key, &value)) {
    if (value != Py_None) {
      PyErr_Format(PyExc_NotImplementedError, "%s: keyword %S is not supported", method, key);
      return -1;
    }
  }
  return 0;
}

static PyObject* stream_export(AdrArrayStreamObject* self, PyObject* args, PyObject* kwds,
                               int device) {
  const char* method = device ? "__arrow_c_device_stream__" : "__arrow_c_stream__";
  PyObject* requested = Py_None;
  if (device) {
    if (!PyArg_ParseTuple(args, "|O:__arrow_c_device_stream__", &requested)) return NULL;
    if (check_kwargs(kwds, method) < 0) return NULL;
  } else {
    static char* kwlist[] = {"requested_schema", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|O:__arrow_c_stream__", kwlist, &requested))
      return NULL;
  }
  if (check_readable(self) < 0) return NULL;
  if (!device && self->device_type != ARROW_DEVICE_CPU) {
    PyErr_Format(PyExc_BufferError,
                 "__arrow_c_stream__: the stream's arrays are on device type %d, not the CPU; "
                 "use __arrow_c_device_stream__",
                 (int)self->device_type);
    return NULL;
  }
  struct export_priv* p = PyMem_RawCalloc(1, sizeof(*p));
  void* s = PyMem_RawCalloc(
      1, device ? sizeof(struct ArrowDeviceArrayStream) : sizeof(struct ArrowArrayStream));
  if (p == NULL || s == NULL) {
    PyMem_RawFree(p);
    PyMem_RawFree(s);
    return PyErr_NoMemory();
  }
  Py_INCREF(self);
  p->owner = (PyObject*)self;
  PyObject* cap;
  if (device) {
    struct ArrowDeviceArrayStream* d = s;
    d->device_type = self->device_type;
    d->get_schema = dev_get_schema;
    d->get_next = dev_get_next;
    d->get_last_error = dev_get_last_error;
    d->release = dev_release;
    d->private_data = p;
    cap = PyCapsule_New(d, "arrow_device_array_stream", dev_capsule_destructor);
  } else {
    struct ArrowArrayStream* c = s;
    c->get_schema = cpu_get_schema;
    c->get_next = cpu_get_next;
    c->get_last_error = cpu_get_last_error;
    c->release = cpu_release;
    c->private_data = p;
    cap = PyCapsule_New(c, "arrow_array_stream", cpu_capsule_destructor);
  }
  if (cap == NULL) {
    export_release(p);
    PyMem_RawFree(s);
    return NULL;
  }
  self->exported = 1;
  return cap;
}

static PyObject* stream_export_cpu(AdrArrayStreamObject* self, PyObject* args, PyObject* kwds) {
  return stream_export(self, args, kwds, 0);
}
static PyObject* stream_export_device(AdrArrayStreamObject* self, PyObject* args, PyObject* kwds) {
  return stream_export(self, args, kwds, 1);
}

static void schema_capsule_destructor(PyObject* cap) {
  struct ArrowSchema* s = PyCapsule_GetPointer(cap, "arrow_schema");
  if (s == NULL) {
    PyErr_WriteUnraisable(cap);
    return;
  }
  if (s->release != NULL) s->release(s);
  PyMem_RawFree(s);
}

static PyObject* stream_export_schema(AdrArrayStreamObject* self, PyObject* unused) {
  struct ArrowSchema* s = PyMem_RawCalloc(1, sizeof(*s));
  if (s == NULL) return PyErr_NoMemory();
  struct adr_error err = {{0}};
  int rc = adr_schema_copy(&self->schema, s, &err);
  if (rc != 0) {
    PyMem_RawFree(s);
    return adrpy_raise(rc, &err);
  }
  PyObject* cap = PyCapsule_New(s, "arrow_schema", schema_capsule_destructor);
  if (cap == NULL) {
    s->release(s);
    PyMem_RawFree(s);
  }
  return cap;
}

/* ---- construction --------------------------------------------------------- */

static AdrArrayStreamObject* stream_new(void) {
  AdrArrayStreamObject* self = PyObject_New(AdrArrayStreamObject, &AdrArrayStream_Type);
  if (self == NULL) return NULL;
  memset(&self->schema, 0, sizeof(self->schema));
  self->device_type = ARROW_DEVICE_CPU;
  self->source = SRC_DONE;
  self->arrays = NULL;
  self->pos = 0;
  memset(&self->dstream, 0, sizeof(self->dstream));
  memset(&self->cstream, 0, sizeof(self->cstream));
  self->exported = 0;
  self->busy = 0;
  return self;
}

/* Bytes of an ArrowSchema metadata blob (int32 count, then length-prefixed
 * keys and values). */
static size_t metadata_size(const char* m) {
  if (m == NULL) return 0;
  int32_t n, len;
  size_t off = sizeof(int32_t);
  memcpy(&n, m, sizeof(n));
  for (int32_t i = 0; i < 2 * n; i++) {
    memcpy(&len, m + off, sizeof(len));
    off += sizeof(len) + (size_t)(len > 0 ? len : 0);
  }
  return off;
}

static int str_eq(const char* a, const char* b) {
  if (a == NULL || b == NULL) return (a == NULL || *a == '\0') && (b == NULL || *b == '\0');
  return strcmp(a, b) == 0;
}

/* Format, name, flags, metadata, children and dictionary, recursively. */
static int schema_equal(const struct ArrowSchema* a, const struct ArrowSchema* b) {
  if (!str_eq(a->format, b->format) || !str_eq(a->name, b->name) || a->flags != b->flags ||
      a->n_children != b->n_children)
    return 0;
  size_t ma = metadata_size(a->metadata), mb = metadata_size(b->metadata);
  if (ma != mb || (ma > 0 && memcmp(a->metadata, b->metadata, ma) != 0)) return 0;
  for (int64_t i = 0; i < a->n_children; i++)
    if (!schema_equal(a->children[i], b->children[i])) return 0;
  if ((a->dictionary == NULL) != (b->dictionary == NULL)) return 0;
  return a->dictionary == NULL || schema_equal(a->dictionary, b->dictionary);
}

static PyObject* stream_from_arrays(PyObject* cls, PyObject* args, PyObject* kwds) {
  static char* kwlist[] = {"arrays", "schema", NULL};
  PyObject *arrays, *schema_obj = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:from_arrays", kwlist, &arrays, &schema_obj))
    return NULL;
  PyObject* list = PySequence_List(arrays);
  if (list == NULL) return NULL;
  AdrArrayStreamObject* self = NULL;
  PyObject* schema_cap = NULL;
  Py_ssize_t n = PyList_GET_SIZE(list);
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject* a = PyList_GET_ITEM(list, i);
    if (!adrpy_array_check(a)) {
      PyErr_Format(PyExc_TypeError, "ArrayStream.from_arrays: arrays[%zd] is %s, not an adr.Array",
                   i, Py_TYPE(a)->tp_name);
      goto fail;
    }
  }
  const struct ArrowSchema* schema = NULL;
  if (schema_obj != Py_None) {
    schema_cap = PyObject_CallMethod(schema_obj, "__arrow_c_schema__", NULL);
    if (schema_cap == NULL) goto fail;
    if (!PyCapsule_CheckExact(schema_cap)) {
      PyErr_SetString(PyExc_TypeError,
                      "ArrayStream.from_arrays: __arrow_c_schema__ did not return a capsule");
      goto fail;
    }
    schema = PyCapsule_GetPointer(schema_cap, "arrow_schema");
    if (schema == NULL) goto fail;
    if (schema->release == NULL) {
      PyErr_SetString(PyExc_ValueError,
                      "ArrayStream.from_arrays: the schema capsule holds a released struct");
      goto fail;
    }
  } else if (n > 0) {
    schema = adrpy_array_schema(PyList_GET_ITEM(list, 0));
  } else {
    PyErr_SetString(PyExc_ValueError,
                    "ArrayStream.from_arrays: an empty stream needs schema= (an object with "
                    "__arrow_c_schema__)");
    goto fail;
  }
  ArrowDeviceType type =
      n > 0 ? adrpy_array_device_array(PyList_GET_ITEM(list, 0))->device_type : ARROW_DEVICE_CPU;
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject* a = PyList_GET_ITEM(list, i);
    const struct ArrowSchema* s = adrpy_array_schema(a);
    if (!schema_equal(schema, s)) {
      PyErr_Format(PyExc_ValueError,
                   "ArrayStream.from_arrays: arrays[%zd] has schema '%s', the stream '%s' "
                   "(format, name, flags, metadata and children must match)",
                   i, s->format, schema->format);
      goto fail;
    }
    if (adrpy_array_device_array(a)->device_type != type) {
      PyErr_Format(PyExc_ValueError,
                   "ArrayStream.from_arrays: arrays[%zd] is on device type %d, arrays[0] on %d", i,
                   (int)adrpy_array_device_array(a)->device_type, (int)type);
      goto fail;
    }
  }
  self = stream_new();
  if (self == NULL) goto fail;
  struct adr_error err = {{0}};
  int rc = adr_schema_copy(schema, &self->schema, &err);
  if (rc != 0) {
    adrpy_raise(rc, &err);
    goto fail;
  }
  self->device_type = type;
  self->source = SRC_LIST;
  self->arrays = list;
  Py_XDECREF(schema_cap);
  return (PyObject*)self;
fail:
  Py_XDECREF(self);
  Py_XDECREF(schema_cap);
  Py_DECREF(list);
  return NULL;
}

static PyObject* stream_from_arrow(PyObject* cls, PyObject* obj) {
  int device = PyObject_HasAttrString(obj, "__arrow_c_device_stream__");
  if (!device && !PyObject_HasAttrString(obj, "__arrow_c_stream__")) {
    PyErr_Format(PyExc_TypeError,
                 "ArrayStream.from_arrow: %s has neither __arrow_c_device_stream__ nor "
                 "__arrow_c_stream__",
                 Py_TYPE(obj)->tp_name);
    return NULL;
  }
  const char* name = device ? "arrow_device_array_stream" : "arrow_array_stream";
  PyObject* cap =
      PyObject_CallMethod(obj, device ? "__arrow_c_device_stream__" : "__arrow_c_stream__", NULL);
  if (cap == NULL) return NULL;
  if (!PyCapsule_CheckExact(cap)) {
    PyErr_Format(PyExc_TypeError, "ArrayStream.from_arrow: expected a '%s' capsule, got %s", name,
                 Py_TYPE(cap)->tp_name);
    Py_DECREF(cap);
    return NULL;
  }
  void* ptr = PyCapsule_GetPointer(cap, name); /* ValueError on another name */
  AdrArrayStreamObject* self = ptr != NULL ? stream_new() : NULL;
  if (self == NULL) {
    Py_DECREF(cap);
    return NULL;
  }
  struct adr_error err = {{0}};
  int rc = 0;
  if (device) {
    struct ArrowDeviceArrayStream* s = ptr;
    if (s->release == NULL) goto released;
    self->dstream = *s;
    s->release = NULL; /* moved: the capsule's destructor does nothing */
    self->source = SRC_DEVICE;
    self->device_type = self->dstream.device_type;
    Py_BEGIN_ALLOW_THREADS rc =
        adr_device_array_stream_get_schema(&self->dstream, &self->schema, &err);
    Py_END_ALLOW_THREADS
  } else {
    struct ArrowArrayStream* s = ptr;
    if (s->release == NULL) goto released;
    self->cstream = *s;
    s->release = NULL;
    self->source = SRC_CPU;
    Py_BEGIN_ALLOW_THREADS rc = self->cstream.get_schema(&self->cstream, &self->schema);
    Py_END_ALLOW_THREADS if (rc != 0) {
      const char* m = self->cstream.get_last_error != NULL
                          ? self->cstream.get_last_error(&self->cstream)
                          : NULL;
      snprintf(err.message, sizeof(err.message), "[ArrowArrayStream.get_schema] %s: %s",
               adr_status_name(rc), m != NULL ? m : "(no message)");
    }
  }
  Py_DECREF(cap);
  if (rc != 0) {
    memset(&self->schema, 0, sizeof(self->schema));
    Py_DECREF(self);
    return adrpy_raise(rc, &err);
  }
  return (PyObject*)self;
released:
  PyErr_Format(PyExc_ValueError,
               "ArrayStream.from_arrow: the '%s' capsule holds a released stream (already "
               "consumed)",
               name);
  Py_DECREF(cap);
  Py_DECREF(self);
  return NULL;
}

/* ---- reading ---------------------------------------------------------------- */

static PyObject* stream_iter(PyObject* self) {
  return Py_NewRef(self);
}

static PyObject* stream_iternext(AdrArrayStreamObject* self) {
  if (check_readable(self) < 0) return NULL;
  return stream_pull(self); /* NULL without an exception: StopIteration */
}

static PyObject* stream_read_all(AdrArrayStreamObject* self, PyObject* unused) {
  if (check_readable(self) < 0) return NULL;
  PyObject* out = PyList_New(0);
  if (out == NULL) return NULL;
  for (;;) {
    PyObject* a = stream_pull(self);
    if (a == NULL) {
      if (PyErr_Occurred()) {
        Py_DECREF(out);
        return NULL;
      }
      return out;
    }
    int rc = PyList_Append(out, a);
    Py_DECREF(a);
    if (rc < 0) {
      Py_DECREF(out);
      return NULL;
    }
  }
}

static void stream_dealloc(AdrArrayStreamObject* self) {
  source_release(self);
  if (self->schema.release != NULL) self->schema.release(&self->schema);
  PyObject_Free(self);
}

static PyObject* stream_repr(AdrArrayStreamObject* self) {
  return PyUnicode_FromFormat("<adr.ArrayStream '%s' device type %d%s>",
                              self->schema.format != NULL ? self->schema.format : "",
                              (int)self->device_type,
                              self->exported             ? " (exported)"
                              : self->source == SRC_DONE ? " (finished)"
                                                         : "");
}

static PyObject* stream_get_format(AdrArrayStreamObject* self, void* c) {
  return PyUnicode_FromString(self->schema.format != NULL ? self->schema.format : "");
}
static PyObject* stream_get_device_type(AdrArrayStreamObject* self, void* c) {
  return PyLong_FromLong((long)self->device_type);
}

static PyMethodDef stream_methods[] = {
    {"from_arrays", (PyCFunction)(void (*)(void))stream_from_arrays,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "ArrayStream.from_arrays(arrays, schema=None): a stream over adr.Arrays of one schema\n"
     "and one device type; an empty list needs schema= (an object with __arrow_c_schema__)."},
    {"from_arrow", (PyCFunction)stream_from_arrow, METH_O | METH_CLASS,
     "ArrayStream.from_arrow(obj): moves the stream out of any object with\n"
     "__arrow_c_device_stream__ (preferred) or __arrow_c_stream__."},
    {"read_all", (PyCFunction)stream_read_all, METH_NOARGS,
     "read_all() -> list of the arrays left in the stream."},
    {"__arrow_c_schema__", (PyCFunction)stream_export_schema, METH_NOARGS,
     "An 'arrow_schema' capsule (a copy of the stream's schema)."},
    {"__arrow_c_stream__", (PyCFunction)(void (*)(void))stream_export_cpu,
     METH_VARARGS | METH_KEYWORDS,
     "__arrow_c_stream__(requested_schema=None) -> 'arrow_array_stream' capsule (CPU streams\n"
     "only); hands the rest of the stream to the consumer."},
    {"__arrow_c_device_stream__", (PyCFunction)(void (*)(void))stream_export_device,
     METH_VARARGS | METH_KEYWORDS,
     "__arrow_c_device_stream__(requested_schema=None, **kwargs) ->\n"
     "'arrow_device_array_stream' capsule; hands the rest of the stream to the consumer."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef stream_getset[] = {
    {"format", (getter)stream_get_format, NULL, "the schema's format string", NULL},
    {"device_type", (getter)stream_get_device_type, NULL, "the ArrowDeviceType every array is on",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject AdrArrayStream_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "adr.ArrayStream",
    .tp_basicsize = sizeof(AdrArrayStreamObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc =
        "A single-pass stream of adr.Array of one schema; ArrayStream.from_arrays /\n"
        "ArrayStream.from_arrow make one.",
    .tp_dealloc = (destructor)stream_dealloc,
    .tp_repr = (reprfunc)stream_repr,
    .tp_iter = stream_iter,
    .tp_iternext = (iternextfunc)stream_iternext,
    .tp_methods = stream_methods,
    .tp_getset = stream_getset,
};

int adrpy_array_stream_init(PyObject* module) {
  if (PyType_Ready(&AdrArrayStream_Type) < 0) return -1;
  Py_INCREF(&AdrArrayStream_Type);
  if (PyModule_AddObject(module, "ArrayStream", (PyObject*)&AdrArrayStream_Type) < 0) {
    Py_DECREF(&AdrArrayStream_Type);
    return -1;
  }
  return 0;
}
