/* SPDX-License-Identifier: Apache-2.0
 *
 * adr.Device: one Python object per adr device. adr never frees a device,
 * so the objects are cached for the life of the module: Device("cpu:0") is
 * Device("cpu:0"), and a buffer's .device is the object the user had.
 */
#include <stdio.h>
#include <string.h>

#include "adrpy.h"

/* adr device pointer (as an int) -> Device object; guarded by the GIL. */
static PyObject* device_cache;

/* The ArrowDeviceType adr calls `name` ("opencl"), or 0 for none. */
static ArrowDeviceType type_from_name(const char* name, size_t len) {
  for (ArrowDeviceType t = 1; t <= 32; t++) {
    const char* n = adr_device_type_name(t);
    if (n != NULL && strlen(n) == len && strncmp(n, name, len) == 0) return t;
  }
  return 0;
}

/* Parses "kind" or "kind:id"; *id = -1 for "kind:*" when allow_star. */
static int parse_spec(const char* spec, ArrowDeviceType* out_type, int64_t* out_id,
                      int allow_star) {
  const char* colon = strchr(spec, ':');
  size_t len = colon != NULL ? (size_t)(colon - spec) : strlen(spec);
  ArrowDeviceType t = type_from_name(spec, len);
  if (t == 0) {
    char kind[64];
    snprintf(kind, sizeof(kind), "%.*s", (int)(len < sizeof(kind) ? len : sizeof(kind) - 1), spec);
    PyErr_Format(PyExc_ValueError,
                 "unknown device kind '%s' in '%s' (kinds: cpu cuda cuda_host cuda_managed "
                 "hip hip_host opencl vulkan ...)",
                 kind, spec);
    return -1;
  }
  int64_t id = 0;
  if (colon != NULL) {
    const char* s = colon + 1;
    if (allow_star && strcmp(s, "*") == 0) {
      id = -1;
    } else {
      char* end = NULL;
      long long v = (*s >= '0' && *s <= '9') ? strtoll(s, &end, 10) : -1;
      if (v < 0 || end == NULL || *end != '\0' || v > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "bad device id '%s' in '%s' (expected kind:N)", s, spec);
        return -1;
      }
      id = v;
    }
  }
  *out_type = t;
  *out_id = id;
  return 0;
}

PyObject* adrpy_device_wrap(struct adr_device* dev) {
  PyObject* key = PyLong_FromVoidPtr(dev);
  if (key == NULL) return NULL;
  PyObject* cached = PyDict_GetItemWithError(device_cache, key);
  if (cached != NULL) {
    Py_DECREF(key);
    Py_INCREF(cached);
    return cached;
  }
  if (PyErr_Occurred()) {
    Py_DECREF(key);
    return NULL;
  }
  struct adr_device_info info = {.struct_size = sizeof(info)};
  struct adr_error err = {{0}};
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = adr_device_info_get(dev, &info, &err);
  Py_END_ALLOW_THREADS if (rc != 0) {
    Py_DECREF(key);
    return adrpy_raise(rc, &err);
  }
  AdrDeviceObject* self = PyObject_New(AdrDeviceObject, &AdrDevice_Type);
  if (self == NULL) {
    Py_DECREF(key);
    return NULL;
  }
  self->dev = dev;
  self->caps = info.caps;
  int set = PyDict_SetItem(device_cache, key, (PyObject*)self);
  Py_DECREF(key);
  if (set < 0) {
    Py_DECREF(self);
    return NULL;
  }
  return (PyObject*)self;
}

PyObject* adrpy_device_get(ArrowDeviceType type, int64_t id) {
  struct adr_device* dev = NULL;
  struct adr_error err = {{0}};
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = adr_device_get(type, id, &dev, &err);
  Py_END_ALLOW_THREADS if (rc != 0) return adrpy_raise(rc, &err);
  return adrpy_device_wrap(dev);
}

static PyObject* device_new(PyTypeObject* type, PyObject* args, PyObject* kwds) {
  static char* kwlist[] = {"spec", "id", NULL};
  PyObject* spec;
  PyObject* id_obj = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|O:Device", kwlist, &spec, &id_obj)) return NULL;
  if (PyObject_TypeCheck(spec, &AdrDevice_Type) && id_obj == NULL) {
    Py_INCREF(spec);
    return spec;
  }
  ArrowDeviceType t;
  int64_t id = 0;
  if (PyUnicode_Check(spec)) {
    const char* s = PyUnicode_AsUTF8(spec);
    if (s == NULL || parse_spec(s, &t, &id, 0) < 0) return NULL;
    if (id_obj != NULL) {
      if (strchr(s, ':') != NULL) {
        PyErr_SetString(PyExc_TypeError, "Device(): an id both in the spec and as argument");
        return NULL;
      }
      id = PyLong_AsLongLong(id_obj);
      if (id == -1 && PyErr_Occurred()) return NULL;
    }
  } else if (PyLong_Check(spec)) {
    long long v = PyLong_AsLongLong(spec);
    if (v == -1 && PyErr_Occurred()) return NULL;
    if (v <= 0 || v > INT32_MAX || adr_device_type_name((ArrowDeviceType)v) == NULL) {
      PyErr_Format(PyExc_ValueError, "unknown ArrowDeviceType %lld", v);
      return NULL;
    }
    t = (ArrowDeviceType)v;
    if (id_obj != NULL) {
      id = PyLong_AsLongLong(id_obj);
      if (id == -1 && PyErr_Occurred()) return NULL;
    }
  } else {
    PyErr_Format(PyExc_TypeError, "Device(): expected 'kind:id' or an ArrowDeviceType, got %s",
                 Py_TYPE(spec)->tp_name);
    return NULL;
  }
  if (id < 0) {
    PyErr_Format(PyExc_ValueError, "Device(): negative device id %lld", (long long)id);
    return NULL;
  }
  return adrpy_device_get(t, id);
}

/* Selector entries: "*", "kind", "kind:id", "kind:*" (comma list). */
static int selector_match(PyObject* entries, struct adr_device* dev) {
  Py_ssize_t n = PyList_GET_SIZE(entries);
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject* e = PyList_GET_ITEM(entries, i);
    long long t = PyLong_AsLongLong(PyTuple_GET_ITEM(e, 0));
    long long id = PyLong_AsLongLong(PyTuple_GET_ITEM(e, 1));
    if (t == 0) return 1;
    if (t == (long long)adr_device_type(dev) && (id < 0 || id == adr_device_id(dev))) return 1;
  }
  return 0;
}

PyObject* adrpy_devices(PyObject* self, PyObject* args, PyObject* kwds) {
  static char* kwlist[] = {"selector", NULL};
  const char* selector = "*";
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "|s:devices", kwlist, &selector)) return NULL;
  PyObject* entries = PyList_New(0);
  if (entries == NULL) return NULL;
  char* copy = PyMem_Malloc(strlen(selector) + 1);
  if (copy == NULL) {
    Py_DECREF(entries);
    return PyErr_NoMemory();
  }
  strcpy(copy, selector);
  int bad = 0;
  char* save = NULL;
  for (char* tok = strtok_r(copy, ",", &save); tok != NULL && !bad;
       tok = strtok_r(NULL, ",", &save)) {
    while (*tok == ' ') tok++;
    size_t l = strlen(tok);
    while (l > 0 && tok[l - 1] == ' ') tok[--l] = '\0';
    ArrowDeviceType t = 0;
    int64_t id = -1;
    if (strcmp(tok, "*") != 0) {
      if (parse_spec(tok, &t, &id, 1) < 0) {
        bad = 1;
        break;
      }
      if (strchr(tok, ':') == NULL) id = -1;
    }
    PyObject* e = Py_BuildValue("(iL)", (int)t, (long long)id);
    if (e == NULL || PyList_Append(entries, e) < 0) bad = 1;
    Py_XDECREF(e);
  }
  PyMem_Free(copy);
  if (!bad && PyList_GET_SIZE(entries) == 0) {
    PyErr_Format(PyExc_ValueError, "devices(): empty selector '%s'", selector);
    bad = 1;
  }
  if (bad) {
    Py_DECREF(entries);
    return NULL;
  }
  size_t count = 0;
  struct adr_error err = {{0}};
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = adr_device_count(&count, &err);
  Py_END_ALLOW_THREADS if (rc != 0) {
    Py_DECREF(entries);
    return adrpy_raise(rc, &err);
  }
  PyObject* out = PyList_New(0);
  for (size_t i = 0; out != NULL && i < count; i++) {
    struct adr_device* dev = NULL;
    rc = adr_device_at(i, &dev, &err);
    if (rc != 0) {
      Py_CLEAR(out);
      adrpy_raise(rc, &err);
      break;
    }
    if (!selector_match(entries, dev)) continue;
    PyObject* d = adrpy_device_wrap(dev);
    if (d == NULL || PyList_Append(out, d) < 0) Py_CLEAR(out);
    Py_XDECREF(d);
  }
  Py_DECREF(entries);
  return out;
}

PyObject* adrpy_default_device(PyObject* self, PyObject* unused) {
  struct adr_device* dev = NULL;
  struct adr_error err = {{0}};
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = adr_device_default(&dev, &err);
  Py_END_ALLOW_THREADS if (rc != 0) return adrpy_raise(rc, &err);
  return adrpy_device_wrap(dev);
}

static PyObject* device_repr(AdrDeviceObject* self) {
  return PyUnicode_FromFormat("<adr.Device %s>", adr_device_name(self->dev));
}

static PyObject* device_get_type(AdrDeviceObject* self, void* c) {
  return PyLong_FromLong((long)adr_device_type(self->dev));
}
static PyObject* device_get_kind(AdrDeviceObject* self, void* c) {
  const char* n = adr_device_type_name(adr_device_type(self->dev));
  return PyUnicode_FromString(n != NULL ? n : "unknown");
}
static PyObject* device_get_id(AdrDeviceObject* self, void* c) {
  return PyLong_FromLongLong((long long)adr_device_id(self->dev));
}
static PyObject* device_get_name(AdrDeviceObject* self, void* c) {
  return PyUnicode_FromString(adr_device_name(self->dev));
}
static PyObject* device_get_host_accessible(AdrDeviceObject* self, void* c) {
  return PyBool_FromLong((self->caps & ADR_CAP_HOST_ACCESSIBLE) != 0);
}

static const struct {
  uint64_t bit;
  const char* name;
} cap_names[] = {
    {ADR_CAP_HOST_ACCESSIBLE, "host_accessible"},
    {ADR_CAP_ASYNC_STREAMS, "async_streams"},
    {ADR_CAP_STREAM_ORDERED_ALLOC, "stream_ordered_alloc"},
    {ADR_CAP_PEER_COPY, "peer_copy"},
    {ADR_CAP_DEVICE_ADDRESSES, "device_addresses"},
    {ADR_CAP_UNIFIED_ADDRESSING, "unified_addressing"},
    {ADR_CAP_IMPORT_NATIVE, "import_native"},
    {ADR_CAP_SYNC_DOWNLOADS, "sync_downloads"},
};

static PyObject* device_info(AdrDeviceObject* self, PyObject* unused) {
  struct adr_device_info info = {.struct_size = sizeof(info)};
  struct adr_error err = {{0}};
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = adr_device_info_get(self->dev, &info, &err);
  Py_END_ALLOW_THREADS if (rc != 0) return adrpy_raise(rc, &err);
  PyObject* caps = PyList_New(0);
  if (caps == NULL) return NULL;
  for (size_t i = 0; i < sizeof(cap_names) / sizeof(cap_names[0]); i++) {
    if ((info.caps & cap_names[i].bit) == 0) continue;
    PyObject* s = PyUnicode_FromString(cap_names[i].name);
    if (s == NULL || PyList_Append(caps, s) < 0) {
      Py_XDECREF(s);
      Py_DECREF(caps);
      return NULL;
    }
    Py_DECREF(s);
  }
  const char* kind = adr_device_type_name(info.device_type);
  return Py_BuildValue(
      "{s:i,s:s,s:L,s:s,s:s,s:s,s:s,s:s,s:K,s:K,s:K,s:N,s:I}", "type", (int)info.device_type,
      "kind", kind != NULL ? kind : "unknown", "id", (long long)info.device_id, "name",
      adr_device_name(self->dev), "device_name", info.name, "vendor", info.vendor, "backend",
      info.backend, "driver", info.driver, "memory_total", (unsigned long long)info.memory_total,
      "memory_free", (unsigned long long)info.memory_free, "caps_bits",
      (unsigned long long)info.caps, "caps", caps, "alignment", (unsigned int)info.alignment);
}

static PyObject* counter(const struct adr_memory_counter* c) {
  return Py_BuildValue("{s:K,s:K,s:K}", "current", (unsigned long long)c->current, "peak",
                       (unsigned long long)c->peak, "total", (unsigned long long)c->total);
}

static PyObject* device_memory_info(AdrDeviceObject* self, PyObject* unused) {
  struct adr_memory_stats st = {.struct_size = sizeof(st)};
  struct adr_error err = {{0}};
  int rc = adr_memory_stats_get(self->dev, &st, &err);
  if (rc != 0) return adrpy_raise(rc, &err);
  char line[512];
  adr_memory_stats_format(&st, line, sizeof(line));
  return Py_BuildValue(
      "{s:N,s:N,s:N,s:N,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:s}", "allocated_bytes",
      counter(&st.allocated_bytes), "allocated_count", counter(&st.allocated_count),
      "reserved_bytes", counter(&st.reserved_bytes), "reserved_count", counter(&st.reserved_count),
      "cached_bytes", (unsigned long long)st.cached_bytes, "largest_free_block",
      (unsigned long long)st.largest_free_block, "cache_hits", (unsigned long long)st.cache_hits,
      "cache_misses", (unsigned long long)st.cache_misses, "stream_waits",
      (unsigned long long)st.stream_waits, "oom_retries", (unsigned long long)st.oom_retries,
      "oom_failures", (unsigned long long)st.oom_failures, "trimmed_bytes",
      (unsigned long long)st.trimmed_bytes, "max_cached", (unsigned long long)st.max_cached,
      "summary", line);
}

static PyObject* device_alloc(AdrDeviceObject* self, PyObject* args, PyObject* kwds) {
  static char* kwlist[] = {"nbytes", "alignment", "stream", NULL};
  Py_ssize_t nbytes, alignment = 0;
  PyObject* stream = Py_None;
  AdrStreamObject* s;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "n|n$O:alloc", kwlist, &nbytes, &alignment,
                                   &stream))
    return NULL;
  if (adrpy_stream_arg(stream, "alloc()", &s) < 0) return NULL;
  if (nbytes < 0) {
    PyErr_Format(PyExc_ValueError, "alloc(): negative size %zd", nbytes);
    return NULL;
  }
  if (alignment < 0) {
    PyErr_Format(PyExc_ValueError, "alloc(): negative alignment %zd", alignment);
    return NULL;
  }
  return adrpy_buffer_alloc(self, nbytes, alignment, s);
}

static const struct {
  int kind;
  const char* name;
} native_names[] = {
    {ADR_NATIVE_DEVICE, "device"},
    {ADR_NATIVE_CONTEXT, "context"},
    {ADR_NATIVE_QUEUE, "queue"},
    {ADR_NATIVE_PLATFORM, "platform"},
    {ADR_NATIVE_QUEUE_FAMILY, "queue_family"},
};

static PyObject* device_native(AdrDeviceObject* self, PyObject* arg) {
  const char* name = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
  if (name == NULL) {
    if (!PyErr_Occurred())
      PyErr_Format(PyExc_TypeError, "native(): expected a kind name, got %s",
                   Py_TYPE(arg)->tp_name);
    return NULL;
  }
  int kind = 0;
  for (size_t i = 0; i < sizeof(native_names) / sizeof(native_names[0]); i++)
    if (strcmp(native_names[i].name, name) == 0) kind = native_names[i].kind;
  if (kind == 0) {
    PyErr_Format(PyExc_ValueError,
                 "native(): unknown kind '%s' (device, context, queue, platform, queue_family)",
                 name);
    return NULL;
  }
  void* handle = NULL;
  struct adr_error err = {{0}};
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = adr_device_native(self->dev, kind, &handle, &err);
  Py_END_ALLOW_THREADS if (rc != 0) return adrpy_raise(rc, &err);
  return PyLong_FromVoidPtr(handle);
}

static PyObject* device_stream(AdrDeviceObject* self, PyObject* unused) {
  return adrpy_stream_create(self);
}
static PyObject* device_default_stream(AdrDeviceObject* self, PyObject* unused) {
  return adrpy_stream_default(self);
}
static PyObject* device_event(AdrDeviceObject* self, PyObject* unused) {
  return adrpy_event_create(self);
}

static PyMethodDef device_methods[] = {
    {"info", (PyCFunction)device_info, METH_NOARGS,
     "info() -> dict: adr_device_info (name, vendor, backend, driver, memory, caps)."},
    {"memory_info", (PyCFunction)device_memory_info, METH_NOARGS,
     "memory_info() -> dict: adr_memory_stats of the device (allocated, reserved, cache)."},
    {"alloc", (PyCFunction)(void (*)(void))device_alloc, METH_VARARGS | METH_KEYWORDS,
     "alloc(nbytes, alignment=0, *, stream=None) -> Buffer: adr_alloc on this device\n"
     "(stream-ordered with a stream of this device: ready for work on it, other uses wait)."},
    {"stream", (PyCFunction)device_stream, METH_NOARGS, "stream() -> Stream: a new stream."},
    {"default_stream", (PyCFunction)device_default_stream, METH_NOARGS,
     "default_stream() -> Stream: the device's default stream (never destroyed)."},
    {"event", (PyCFunction)device_event, METH_NOARGS, "event() -> Event: a new event."},
    {"native", (PyCFunction)device_native, METH_O,
     "native(kind) -> int: adr_device_native; kind is 'device', 'context', 'queue',\n"
     "'platform' or 'queue_family' (the backend's header says what each handle is)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef device_getset[] = {
    {"type", (getter)device_get_type, NULL,
     "ArrowDeviceType (an int; DLPack uses the same numbers)", NULL},
    {"kind", (getter)device_get_kind, NULL, "type name: 'cpu', 'opencl', 'cuda_host' ...", NULL},
    {"id", (getter)device_get_id, NULL, "device id within its type", NULL},
    {"name", (getter)device_get_name, NULL, "'kind:id'", NULL},
    {"host_accessible", (getter)device_get_host_accessible, NULL,
     "True when the host may dereference this device's buffers", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject AdrDevice_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "adr.Device",
    .tp_basicsize = sizeof(AdrDeviceObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc =
        "Device(spec) -- an adr device: Device('opencl:0'), Device('cpu'), Device(4, 0).\n\n"
        "Errors: ValueError for a malformed spec, adr.Error (ENODEV ...) when adr cannot\n"
        "provide the device.",
    .tp_new = device_new,
    .tp_repr = (reprfunc)device_repr,
    .tp_methods = device_methods,
    .tp_getset = device_getset,
};

int adrpy_device_init(PyObject* module) {
  device_cache = PyDict_New();
  if (device_cache == NULL || PyType_Ready(&AdrDevice_Type) < 0) return -1;
  Py_INCREF(&AdrDevice_Type);
  if (PyModule_AddObject(module, "Device", (PyObject*)&AdrDevice_Type) < 0) {
    Py_DECREF(&AdrDevice_Type);
    return -1;
  }
  return 0;
}
