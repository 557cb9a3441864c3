/* SPDX-License-Identifier: Apache-2.0
 *
 * adr.Array: one Arrow array (an ArrowSchema and an ArrowDeviceArray owned
 * by the object) and the Arrow PyCapsule interface both ways
 * (docs/python.md, "Arrow arrays").
 *
 * Exports share the buffers without a copy: each exported node is a new
 * ArrowArray whose fields are the original node's and whose release drops
 * a reference to the adr.Array, so a consumer may move any child out and
 * release it on its own, from any thread (the release takes the GIL).
 * Schemas are exported as deep copies (adr_schema_copy). Capsule
 * destructors release what a consumer did not move out (release != NULL),
 * as the Arrow PyCapsule interface says.
 */
#include <stdlib.h>
#include <string.h>

#include "adrpy.h"

typedef struct {
  PyObject_HEAD struct ArrowSchema schema;
  struct ArrowDeviceArray array;
  AdrDeviceObject* device;
  /* The array a copy queued on a stream reads (to_device(stream=)): kept
   * until the copy is known complete (array.sync_event), at the latest in
   * dealloc, which waits for it first. */
  PyObject* source;
} AdrArrayObject;

extern PyTypeObject AdrArray_Type;

/* ---- shared export ------------------------------------------------------ */

struct share_node {
  PyObject* owner;
  struct ArrowArray** children;
  struct ArrowArray* child_storage;
  struct ArrowArray* dictionary;
};

static void owner_drop(PyObject* owner) {
  if (!Py_IsInitialized()) return;
  PyGILState_STATE g = PyGILState_Ensure();
  Py_DECREF(owner);
  PyGILState_Release(g);
}

static void share_release(struct ArrowArray* a) {
  struct share_node* n = a->private_data;
  for (int64_t i = 0; i < a->n_children; i++)
    if (n->children[i]->release != NULL) n->children[i]->release(n->children[i]);
  if (n->dictionary != NULL && n->dictionary->release != NULL)
    n->dictionary->release(n->dictionary);
  PyMem_RawFree(n->children);
  PyMem_RawFree(n->child_storage);
  PyMem_RawFree(n->dictionary);
  owner_drop(n->owner);
  PyMem_RawFree(n);
  a->release = NULL;
}

/* *out becomes a node sharing src's buffers; 0 or -1 (MemoryError set). */
static int share_export(const struct ArrowArray* src, PyObject* owner, struct ArrowArray* out) {
  struct share_node* n = PyMem_RawCalloc(1, sizeof(*n));
  if (n == NULL) goto nomem;
  if (src->n_children > 0) {
    n->children = PyMem_RawCalloc((size_t)src->n_children, sizeof(*n->children));
    n->child_storage = PyMem_RawCalloc((size_t)src->n_children, sizeof(*n->child_storage));
    if (n->children == NULL || n->child_storage == NULL) goto fail;
  }
  if (src->dictionary != NULL) {
    n->dictionary = PyMem_RawCalloc(1, sizeof(*n->dictionary));
    if (n->dictionary == NULL) goto fail;
  }
  for (int64_t i = 0; i < src->n_children; i++) {
    if (share_export(src->children[i], owner, &n->child_storage[i]) < 0) {
      for (int64_t j = 0; j < i; j++) n->child_storage[j].release(&n->child_storage[j]);
      goto fail_quiet;
    }
    n->children[i] = &n->child_storage[i];
  }
  if (src->dictionary != NULL && share_export(src->dictionary, owner, n->dictionary) < 0) {
    for (int64_t j = 0; j < src->n_children; j++) n->child_storage[j].release(&n->child_storage[j]);
    goto fail_quiet;
  }
  Py_INCREF(owner);
  n->owner = owner;
  *out = *src;
  out->children = n->children;
  out->dictionary = src->dictionary != NULL ? n->dictionary : NULL;
  out->private_data = n;
  out->release = share_release;
  return 0;
fail:
  PyErr_NoMemory();
fail_quiet:
  if (n != NULL) {
    PyMem_RawFree(n->children);
    PyMem_RawFree(n->child_storage);
    PyMem_RawFree(n->dictionary);
    PyMem_RawFree(n);
  }
  return -1;
nomem:
  PyErr_NoMemory();
  return -1;
}

/* ---- capsules ----------------------------------------------------------- */

static void schema_capsule_destructor(PyObject* cap) {
  struct ArrowSchema* s = PyCapsule_GetPointer(cap, "arrow_schema");
  if (s == NULL) {
    PyErr_WriteUnraisable(cap);
    return;
  }
  if (s->release != NULL) s->release(s);
  PyMem_RawFree(s);
}

static void array_capsule_destructor(PyObject* cap) {
  struct ArrowArray* a = PyCapsule_GetPointer(cap, "arrow_array");
  if (a == NULL) {
    PyErr_WriteUnraisable(cap);
    return;
  }
  if (a->release != NULL) a->release(a);
  PyMem_RawFree(a);
}

static void device_array_capsule_destructor(PyObject* cap) {
  struct ArrowDeviceArray* a = PyCapsule_GetPointer(cap, "arrow_device_array");
  if (a == NULL) {
    PyErr_WriteUnraisable(cap);
    return;
  }
  if (a->array.release != NULL) a->array.release(&a->array);
  PyMem_RawFree(a);
}

static PyObject* schema_capsule(AdrArrayObject* self) {
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

static PyObject* array_export_schema(AdrArrayObject* self, PyObject* unused) {
  return schema_capsule(self);
}

/* (schema, array) capsules; requested_schema is ignored (the Arrow
 * PyCapsule interface lets a producer that cannot cast do so; the
 * consumer checks the schema it gets). */
static PyObject* array_export_array(AdrArrayObject* self, PyObject* args, PyObject* kwds) {
  PyObject* requested = Py_None;
  if (!PyArg_ParseTuple(args, "|O:__arrow_c_array__", &requested)) return NULL;
  if (check_kwargs(kwds, "__arrow_c_array__") < 0) return NULL;
  if (self->array.device_type != ARROW_DEVICE_CPU) {
    PyErr_Format(PyExc_BufferError,
                 "__arrow_c_array__: the array is on %s, not the CPU; use "
                 "__arrow_c_device_array__ or to_host()",
                 adr_device_name(self->device->dev));
    return NULL;
  }
  PyObject* schema = schema_capsule(self);
  if (schema == NULL) return NULL;
  struct ArrowArray* a = PyMem_RawCalloc(1, sizeof(*a));
  if (a == NULL || share_export(&self->array.array, (PyObject*)self, a) < 0) {
    if (a == NULL) PyErr_NoMemory();
    PyMem_RawFree(a);
    Py_DECREF(schema);
    return NULL;
  }
  PyObject* cap = PyCapsule_New(a, "arrow_array", array_capsule_destructor);
  if (cap == NULL) {
    a->release(a);
    PyMem_RawFree(a);
    Py_DECREF(schema);
    return NULL;
  }
  return Py_BuildValue("(NN)", schema, cap);
}

static PyObject* array_export_device_array(AdrArrayObject* self, PyObject* args, PyObject* kwds) {
  PyObject* requested = Py_None;
  if (!PyArg_ParseTuple(args, "|O:__arrow_c_device_array__", &requested)) return NULL;
  if (check_kwargs(kwds, "__arrow_c_device_array__") < 0) return NULL;
  PyObject* schema = schema_capsule(self);
  if (schema == NULL) return NULL;
  struct ArrowDeviceArray* a = PyMem_RawCalloc(1, sizeof(*a));
  if (a == NULL || share_export(&self->array.array, (PyObject*)self, &a->array) < 0) {
    if (a == NULL) PyErr_NoMemory();
    PyMem_RawFree(a);
    Py_DECREF(schema);
    return NULL;
  }
  a->device_id = self->array.device_id;
  a->device_type = self->array.device_type;
  /* Owned by our array, which the export keeps alive. */
  a->sync_event = self->array.sync_event;
  PyObject* cap = PyCapsule_New(a, "arrow_device_array", device_array_capsule_destructor);
  if (cap == NULL) {
    a->array.release(&a->array);
    PyMem_RawFree(a);
    Py_DECREF(schema);
    return NULL;
  }
  return Py_BuildValue("(NN)", schema, cap);
}

/* ---- construction ------------------------------------------------------- */

static PyObject* array_wrap(struct ArrowSchema* schema, struct ArrowDeviceArray* array);

/* ---- helpers for array_stream.c (adrpy.h) ------------------------------- */

int adrpy_array_check(PyObject* obj) {
  return PyObject_TypeCheck(obj, &AdrArray_Type);
}

const struct ArrowSchema* adrpy_array_schema(PyObject* arr) {
  return &((AdrArrayObject*)arr)->schema;
}

const struct ArrowDeviceArray* adrpy_array_device_array(PyObject* arr) {
  return &((AdrArrayObject*)arr)->array;
}

int adrpy_array_export(PyObject* arr, struct ArrowDeviceArray* out) {
  AdrArrayObject* self = (AdrArrayObject*)arr;
  memset(out, 0, sizeof(*out));
  if (share_export(&self->array.array, arr, &out->array) < 0) return -1;
  out->device_id = self->array.device_id;
  out->device_type = self->array.device_type;
  out->sync_event = self->array.sync_event; /* the export keeps the array alive */
  return 0;
}

PyObject* adrpy_array_wrap(struct ArrowSchema* schema, struct ArrowDeviceArray* array) {
  return array_wrap(schema, array);
}

/* Takes over *schema and *array (moved: both released in the caller). */
static PyObject* array_wrap(struct ArrowSchema* schema, struct ArrowDeviceArray* array) {
  struct adr_device* dev = NULL;
  struct adr_error err = {{0}};
  int rc = adr_device_array_device(array, &dev, &err);
  PyObject* device = rc == 0 ? adrpy_device_wrap(dev) : NULL;
  AdrArrayObject* self = device != NULL ? PyObject_New(AdrArrayObject, &AdrArray_Type) : NULL;
  if (self == NULL) {
    if (rc != 0) adrpy_raise(rc, &err);
    Py_XDECREF(device);
    if (schema->release != NULL) schema->release(schema);
    /* Queued copies may still write it (to_device with a stream). */
    if (array->sync_event != NULL && array->array.release != NULL)
      adr_device_array_wait(array, NULL, NULL);
    adr_device_array_release(array);
    return NULL;
  }
  self->device = (AdrDeviceObject*)device;
  self->source = NULL;
  self->schema = *schema;
  schema->release = NULL;
  adr_device_array_move(array, &self->array);
  return (PyObject*)self;
}

static void array_dealloc(AdrArrayObject* self) {
  if (self->source != NULL) {
    /* A queued copy from the source may still run: it completes first (on
     * failure the source and this array's memory are leaked, not freed
     * under it). */
    struct adr_error err = {{0}};
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = adr_device_array_wait(&self->array, NULL, &err);
    Py_END_ALLOW_THREADS if (rc != 0) {
      adrpy_raise(rc, &err);
      PyErr_WriteUnraisable((PyObject*)self);
      Py_XDECREF(self->device);
      PyObject_Free(self);
      return;
    }
    Py_CLEAR(self->source);
  }
  if (self->schema.release != NULL) self->schema.release(&self->schema);
  adr_device_array_release(&self->array);
  Py_XDECREF(self->device);
  PyObject_Free(self);
}

static void* capsule_pointer(PyObject* cap, const char* name) {
  if (!PyCapsule_CheckExact(cap)) {
    PyErr_Format(PyExc_TypeError, "expected a '%s' capsule, got %s", name, Py_TYPE(cap)->tp_name);
    return NULL;
  }
  return PyCapsule_GetPointer(cap, name);
}

static PyObject* array_from_arrow(PyObject* cls, PyObject* obj) {
  int device = PyObject_HasAttrString(obj, "__arrow_c_device_array__");
  if (!device && !PyObject_HasAttrString(obj, "__arrow_c_array__")) {
    PyErr_Format(PyExc_TypeError,
                 "Array.from_arrow: %s has neither __arrow_c_device_array__ nor __arrow_c_array__",
                 Py_TYPE(obj)->tp_name);
    return NULL;
  }
  PyObject* pair =
      PyObject_CallMethod(obj, device ? "__arrow_c_device_array__" : "__arrow_c_array__", NULL);
  if (pair == NULL) return NULL;
  PyObject* result = NULL;
  if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
    PyErr_SetString(PyExc_TypeError, "Array.from_arrow: the producer did not return a pair");
    goto out;
  }
  struct ArrowSchema* s = capsule_pointer(PyTuple_GET_ITEM(pair, 0), "arrow_schema");
  if (s == NULL) goto out;
  void* a =
      capsule_pointer(PyTuple_GET_ITEM(pair, 1), device ? "arrow_device_array" : "arrow_array");
  if (a == NULL) goto out;
  struct ArrowArray* base = device ? &((struct ArrowDeviceArray*)a)->array : a;
  if (s->release == NULL || base->release == NULL) {
    PyErr_SetString(PyExc_ValueError,
                    "Array.from_arrow: the producer's capsule holds a released struct");
    goto out;
  }
  struct ArrowSchema schema = *s;
  s->release = NULL;
  struct ArrowDeviceArray darr;
  if (device) {
    adr_device_array_move((struct ArrowDeviceArray*)a, &darr);
  } else {
    struct ArrowArray arr = *base;
    base->release = NULL;
    struct adr_device* cpu = NULL;
    struct adr_error err = {{0}};
    int rc = adr_device_get(ARROW_DEVICE_CPU, 0, &cpu, &err);
    if (rc == 0) rc = adr_device_array_init(cpu, &arr, NULL, &darr, &err);
    if (rc != 0) {
      if (arr.release != NULL) arr.release(&arr);
      schema.release(&schema);
      adrpy_raise(rc, &err);
      goto out;
    }
  }
  result = array_wrap(&schema, &darr);
out:
  Py_DECREF(pair);
  return result;
}

static const struct {
  char kind;
  Py_ssize_t size;
  const char* format;
  const char* numpy;
} primitive[] = {
    {'i', 1, "c", "i1"}, {'u', 1, "C", "u1"}, {'i', 2, "s", "i2"}, {'u', 2, "S", "u2"},
    {'i', 4, "i", "i4"}, {'u', 4, "I", "u4"}, {'i', 8, "l", "i8"}, {'u', 8, "L", "u8"},
    {'f', 2, "e", "f2"}, {'f', 4, "f", "f4"}, {'f', 8, "g", "f8"},
};

/* struct-module format char -> kind ('i' signed, 'u' unsigned, 'f' float). */
static char format_kind(const char* f) {
  if (f == NULL) return 'u';
  if (*f == '<' || *f == '=' || *f == '@' || *f == '!' || *f == '>') f++;
  if (f[0] == '\0' || f[1] != '\0') return 0;
  if (strchr("bhilq", f[0])) return 'i';
  if (strchr("BHILQ", f[0])) return 'u';
  if (strchr("efd", f[0])) return 'f';
  return 0;
}

static PyObject* array_from_numpy(PyObject* cls, PyObject* obj) {
  Py_buffer view;
  if (PyObject_GetBuffer(obj, &view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) return NULL;
  PyObject* result = NULL;
  char kind = format_kind(view.format);
  const char* fmt = NULL;
  for (size_t i = 0; i < sizeof(primitive) / sizeof(primitive[0]); i++)
    if (primitive[i].kind == kind && primitive[i].size == view.itemsize) fmt = primitive[i].format;
  if (view.ndim != 1 || fmt == NULL ||
      (view.format != NULL && (view.format[0] == '>' || view.format[0] == '!'))) {
    PyErr_Format(PyExc_TypeError,
                 "Array.from_numpy: expected a 1-D native-endian buffer of ints or floats "
                 "(format '%s', %d dimensions)",
                 view.format != NULL ? view.format : "B", view.ndim);
    goto out;
  }
  struct adr_device* cpu = NULL;
  struct adr_error err = {{0}};
  struct ArrowArray arr = {0};
  struct ArrowSchema schema = {0};
  struct ArrowDeviceArray darr = {0};
  void* p = NULL;
  int rc = adr_device_get(ARROW_DEVICE_CPU, 0, &cpu, &err);
  if (rc == 0) rc = adr_array_init(cpu, 2, 0, &arr, &err);
  if (rc == 0) rc = adr_array_alloc_buffer(&arr, 1, (size_t)view.len, NULL, &p, &err);
  if (rc == 0) {
    memcpy(p, view.buf, (size_t)view.len);
    arr.length = view.shape[0];
    rc = adr_schema_init(&schema, fmt, NULL, ARROW_FLAG_NULLABLE, 0, &err);
  }
  if (rc == 0) rc = adr_device_array_init(cpu, &arr, NULL, &darr, &err);
  if (rc != 0) {
    if (arr.release != NULL) arr.release(&arr);
    if (schema.release != NULL) schema.release(&schema);
    adrpy_raise(rc, &err);
    goto out;
  }
  result = array_wrap(&schema, &darr);
out:
  PyBuffer_Release(&view);
  return result;
}

/* ---- methods ------------------------------------------------------------ */

static PyObject* array_copy(AdrArrayObject* self, PyObject* device_arg, PyObject* stream_arg) {
  AdrStreamObject* s;
  if (adrpy_stream_arg(stream_arg, "to_device()", &s) < 0) return NULL;
  AdrDeviceObject* dev;
  if (PyObject_TypeCheck(device_arg, &AdrDevice_Type)) {
    Py_INCREF(device_arg);
    dev = (AdrDeviceObject*)device_arg;
  } else {
    dev = (AdrDeviceObject*)PyObject_CallOneArg((PyObject*)&AdrDevice_Type, device_arg);
    if (dev == NULL) return NULL;
  }
  struct ArrowSchema schema = {0};
  struct ArrowDeviceArray out = {0};
  struct adr_error err = {{0}};
  int rc = adr_schema_copy(&self->schema, &schema, &err);
  if (rc == 0) {
    Py_BEGIN_ALLOW_THREADS rc = adr_device_array_deep_copy(
        &self->schema, &self->array, dev->dev, s != NULL ? s->stream : NULL, &out, NULL, &err);
    Py_END_ALLOW_THREADS
  }
  Py_DECREF(dev);
  if (rc != 0) {
    if (schema.release != NULL) schema.release(&schema);
    return adrpy_raise(rc, &err);
  }
  /* With a stream and a non-CPU destination the copies are queued and
   * out.sync_event follows them: the source stays alive until then. */
  int queued_copy = s != NULL && out.sync_event != NULL;
  AdrArrayObject* r = (AdrArrayObject*)array_wrap(&schema, &out);
  if (r == NULL) return NULL;
  if (queued_copy) {
    Py_INCREF(self);
    r->source = (PyObject*)self;
  }
  return (PyObject*)r;
}

static PyObject* array_to_device(AdrArrayObject* self, PyObject* args, PyObject* kwds) {
  static char* kwlist[] = {"device", "stream", NULL};
  PyObject *device, *stream = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$O:to_device", kwlist, &device, &stream))
    return NULL;
  return array_copy(self, device, stream);
}

static PyObject* array_to_host(AdrArrayObject* self, PyObject* args, PyObject* kwds) {
  static char* kwlist[] = {"stream", NULL};
  PyObject* stream = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "|$O:to_host", kwlist, &stream)) return NULL;
  PyObject* cpu = adrpy_device_get(ARROW_DEVICE_CPU, 0);
  if (cpu == NULL) return NULL;
  PyObject* r = array_copy(self, cpu, stream);
  Py_DECREF(cpu);
  return r;
}

static PyObject* array_validate(AdrArrayObject* self, PyObject* args, PyObject* kwds) {
  static char* kwlist[] = {"full", NULL};
  int full = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "|p:validate", kwlist, &full)) return NULL;
  struct adr_error err = {{0}};
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = adr_device_array_validate(
      &self->schema, &self->array, full ? ADR_VALIDATE_FULL : ADR_VALIDATE_STRUCTURE, &err);
  Py_END_ALLOW_THREADS if (rc != 0) return adrpy_raise(rc, &err);
  Py_RETURN_NONE;
}

static PyObject* array_equals(AdrArrayObject* self, PyObject* other) {
  if (!PyObject_TypeCheck(other, &AdrArray_Type)) {
    PyErr_Format(PyExc_TypeError, "equals(): expected an adr.Array, got %s",
                 Py_TYPE(other)->tp_name);
    return NULL;
  }
  AdrArrayObject* o = (AdrArrayObject*)other;
  bool equal = false;
  struct adr_error diff = {{0}}, err = {{0}};
  int rc;
  Py_BEGIN_ALLOW_THREADS rc =
      adr_device_array_equal(&self->schema, &self->array, &o->array, &equal, &diff, &err);
  Py_END_ALLOW_THREADS if (rc != 0) return adrpy_raise(rc, &err);
  return PyBool_FromLong(equal);
}

static PyObject* array_to_numpy(AdrArrayObject* self, PyObject* unused) {
  const char* np_type = NULL;
  size_t itemsize = 0;
  for (size_t i = 0; i < sizeof(primitive) / sizeof(primitive[0]); i++) {
    if (strcmp(self->schema.format, primitive[i].format) == 0) {
      np_type = primitive[i].numpy;
      itemsize = (size_t)primitive[i].size;
    }
  }
  const struct ArrowArray* a = &self->array.array;
  if (np_type == NULL || a->n_buffers != 2) {
    PyErr_Format(PyExc_TypeError, "to_numpy(): format '%s' is not a primitive int or float type",
                 self->schema.format);
    return NULL;
  }
  if ((self->device->caps & ADR_CAP_HOST_ACCESSIBLE) == 0) {
    PyErr_Format(PyExc_ValueError, "to_numpy(): the array is on %s; call to_host() first",
                 adr_device_name(self->device->dev));
    return NULL;
  }
  if (a->null_count != 0 && a->buffers[0] != NULL) {
    PyErr_SetString(PyExc_ValueError, "to_numpy(): the array has nulls");
    return NULL;
  }
  struct adr_error err = {{0}};
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = adr_device_array_wait(&self->array, NULL, &err);
  Py_END_ALLOW_THREADS if (rc != 0) return adrpy_raise(rc, &err);
  const char* base = a->buffers[1];
  if (base == NULL && a->length > 0) {
    PyErr_SetString(PyExc_ValueError, "to_numpy(): no values buffer");
    return NULL;
  }
  Py_INCREF(self);
  PyObject* view = adrpy_buffer_borrow(
      self->device, base != NULL ? (void*)(base + a->offset * (int64_t)itemsize) : NULL,
      (size_t)a->length * itemsize, ADRPY_BUFFER_FOREIGN, self, 1);
  if (view == NULL) {
    Py_DECREF(self);
    return NULL;
  }
  PyObject* np = PyImport_ImportModule("numpy");
  PyObject* out = np != NULL ? PyObject_CallMethod(np, "frombuffer", "Os", view, np_type) : NULL;
  Py_XDECREF(np);
  Py_DECREF(view);
  return out;
}

static PyObject* array_repr(AdrArrayObject* self) {
  return PyUnicode_FromFormat("<adr.Array '%s' length %lld on %s>", self->schema.format,
                              (long long)self->array.array.length,
                              adr_device_name(self->device->dev));
}

static Py_ssize_t array_length(AdrArrayObject* self) {
  return (Py_ssize_t)self->array.array.length;
}

static PyObject* array_get_device(AdrArrayObject* self, void* c) {
  Py_INCREF(self->device);
  return (PyObject*)self->device;
}
static PyObject* array_get_format(AdrArrayObject* self, void* c) {
  return PyUnicode_FromString(self->schema.format);
}
static PyObject* array_get_null_count(AdrArrayObject* self, void* c) {
  return PyLong_FromLongLong((long long)self->array.array.null_count);
}
static PyObject* array_get_offset(AdrArrayObject* self, void* c) {
  return PyLong_FromLongLong((long long)self->array.array.offset);
}

static PySequenceMethods array_as_sequence = {.sq_length = (lenfunc)array_length};

static PyMethodDef array_methods[] = {
    {"from_arrow", (PyCFunction)array_from_arrow, METH_O | METH_CLASS,
     "Array.from_arrow(obj): moves the array out of any object with\n"
     "__arrow_c_device_array__ or __arrow_c_array__ (no copy)."},
    {"from_numpy", (PyCFunction)array_from_numpy, METH_O | METH_CLASS,
     "Array.from_numpy(obj): a CPU Arrow array with a copy of a 1-D int or float buffer."},
    {"__arrow_c_schema__", (PyCFunction)array_export_schema, METH_NOARGS,
     "An 'arrow_schema' capsule (a deep copy of the schema)."},
    {"__arrow_c_array__", (PyCFunction)(void (*)(void))array_export_array,
     METH_VARARGS | METH_KEYWORDS,
     "__arrow_c_array__(requested_schema=None) -> ('arrow_schema', 'arrow_array') capsules;\n"
     "CPU arrays only (BufferError otherwise). No copy."},
    {"__arrow_c_device_array__", (PyCFunction)(void (*)(void))array_export_device_array,
     METH_VARARGS | METH_KEYWORDS,
     "__arrow_c_device_array__(requested_schema=None, **kwargs) -> ('arrow_schema',\n"
     "'arrow_device_array') capsules. No copy; sync_event is the array's own."},
    {"to_device", (PyCFunction)(void (*)(void))array_to_device, METH_VARARGS | METH_KEYWORDS,
     "to_device(device, *, stream=None) -> Array: adr_device_array_deep_copy to the device.\n"
     "With an adr.Stream (of either device) the copies are queued on it and the call returns\n"
     "at once; the new array's sync_event follows them. Without one it is complete on return."},
    {"to_host", (PyCFunction)(void (*)(void))array_to_host, METH_VARARGS | METH_KEYWORDS,
     "to_host(*, stream=None) -> Array on the CPU, complete on return (ordered after the\n"
     "stream's queued work when one is given)."},
    {"validate", (PyCFunction)(void (*)(void))array_validate, METH_VARARGS | METH_KEYWORDS,
     "validate(full=True): adr_device_array_validate; adr.Error names the bad child."},
    {"equals", (PyCFunction)array_equals, METH_O,
     "equals(other) -> bool: logical equality (adr_device_array_equal)."},
    {"to_numpy", (PyCFunction)array_to_numpy, METH_NOARGS,
     "to_numpy() -> read-only ndarray over the values of a primitive array on host memory."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef array_getset[] = {
    {"device", (getter)array_get_device, NULL, "the Device holding the buffers", NULL},
    {"format", (getter)array_get_format, NULL, "the schema's format string", NULL},
    {"null_count", (getter)array_get_null_count, NULL, "null_count (-1: not computed)", NULL},
    {"offset", (getter)array_get_offset, NULL, "the root's offset", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject AdrArray_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "adr.Array",
    .tp_basicsize = sizeof(AdrArrayObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An Arrow array on an adr device; Array.from_arrow / Array.from_numpy make one.",
    .tp_dealloc = (destructor)array_dealloc,
    .tp_repr = (reprfunc)array_repr,
    .tp_as_sequence = &array_as_sequence,
    .tp_methods = array_methods,
    .tp_getset = array_getset,
};

int adrpy_array_init(PyObject* module) {
  if (PyType_Ready(&AdrArray_Type) < 0) return -1;
  Py_INCREF(&AdrArray_Type);
  if (PyModule_AddObject(module, "Array", (PyObject*)&AdrArray_Type) < 0) {
    Py_DECREF(&AdrArray_Type);
    return -1;
  }
  return 0;
}
