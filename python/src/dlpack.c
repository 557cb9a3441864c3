/* SPDX-License-Identifier: Apache-2.0
 *
 * DLPack, both ways (docs/python.md, "DLPack"):
 *  - Buffer.__dlpack__ exports the buffer's bytes as a 1-D uint8 tensor in a
 *    "dltensor" capsule (DLManagedTensor), or in a "dltensor_versioned" one
 *    (DLManagedTensorVersioned, DLPack 1.0) when the consumer passes
 *    max_version >= (1, 0). The capsule (then the consumer) holds a
 *    reference to the buffer and counts as an export until the deleter runs.
 *  - from_dlpack consumes either capsule without a copy: it renames it
 *    "used_dltensor[_versioned]" and calls the deleter when the buffer is
 *    freed.
 * The tensor's data pointer is adr's address for the buffer
 * (docs/devices.md says what that is per backend).
 */
#include <string.h>

#include "adrpy.h"
#include "dlpack.h"

_Static_assert(kDLCPU == ARROW_DEVICE_CPU && kDLCUDA == ARROW_DEVICE_CUDA &&
                   kDLCUDAHost == ARROW_DEVICE_CUDA_HOST && kDLOpenCL == ARROW_DEVICE_OPENCL &&
                   kDLVulkan == ARROW_DEVICE_VULKAN && kDLMetal == ARROW_DEVICE_METAL &&
                   kDLVPI == ARROW_DEVICE_VPI && kDLROCM == ARROW_DEVICE_ROCM &&
                   kDLROCMHost == ARROW_DEVICE_ROCM_HOST && kDLExtDev == ARROW_DEVICE_EXT_DEV &&
                   kDLCUDAManaged == ARROW_DEVICE_CUDA_MANAGED &&
                   kDLOneAPI == ARROW_DEVICE_ONEAPI && kDLWebGPU == ARROW_DEVICE_WEBGPU &&
                   kDLHexagon == ARROW_DEVICE_HEXAGON,
               "DLPack and Arrow device types are the same numbers");
_Static_assert(sizeof(DLDevice) == 8 && sizeof(DLDataType) == 4 && sizeof(DLTensor) == 48 &&
                   sizeof(DLManagedTensor) == 64 && sizeof(DLManagedTensorVersioned) == 80,
               "DLPack ABI layout");

static const char kLegacy[] = "dltensor";
static const char kLegacyUsed[] = "used_dltensor";
static const char kVersioned[] = "dltensor_versioned";
static const char kVersionedUsed[] = "used_dltensor_versioned";

/* ---- export ------------------------------------------------------------- */

typedef struct {
  DLManagedTensor mt; /* first: &export == &export->mt */
  int64_t shape[1];
  int64_t strides[1];
  AdrBufferObject* owner;
} legacy_export;

typedef struct {
  DLManagedTensorVersioned mt;
  int64_t shape[1];
  int64_t strides[1];
  AdrBufferObject* owner;
} versioned_export;

/* The deleters may be called by a consumer from any thread, with or
 * without the GIL. After interpreter shutdown the buffer is left alone. */
static void owner_release(AdrBufferObject* owner) {
  if (!Py_IsInitialized()) return;
  PyGILState_STATE g = PyGILState_Ensure();
  owner->exports--;
  Py_DECREF(owner);
  PyGILState_Release(g);
}

static void legacy_deleter(DLManagedTensor* self) {
  if (self == NULL) return;
  legacy_export* e = (legacy_export*)self->manager_ctx;
  owner_release(e->owner);
  PyMem_RawFree(e);
}

static void versioned_deleter(DLManagedTensorVersioned* self) {
  if (self == NULL) return;
  versioned_export* e = (versioned_export*)self->manager_ctx;
  owner_release(e->owner);
  PyMem_RawFree(e);
}

/* A capsule nobody consumed still owns its tensor. */
static void capsule_destructor(PyObject* cap, const char* name, int versioned) {
  if (!PyCapsule_IsValid(cap, name)) return; /* renamed: a consumer owns it */
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  void* p = PyCapsule_GetPointer(cap, name);
  if (p == NULL) {
    PyErr_WriteUnraisable(cap);
  } else if (versioned) {
    DLManagedTensorVersioned* mt = p;
    if (mt->deleter != NULL) mt->deleter(mt);
  } else {
    DLManagedTensor* mt = p;
    if (mt->deleter != NULL) mt->deleter(mt);
  }
  PyErr_Restore(type, value, tb);
}

static void legacy_capsule_destructor(PyObject* cap) {
  capsule_destructor(cap, kLegacy, 0);
}
static void versioned_capsule_destructor(PyObject* cap) {
  capsule_destructor(cap, kVersioned, 1);
}

static void fill_tensor(DLTensor* t, AdrBufferObject* b, int64_t* shape, int64_t* strides) {
  t->data = b->ptr;
  t->device.device_type = (DLDeviceType)adr_device_type(b->device->dev);
  t->device.device_id = (int32_t)adr_device_id(b->device->dev);
  t->ndim = 1;
  t->dtype.code = kDLUInt;
  t->dtype.bits = 8;
  t->dtype.lanes = 1;
  shape[0] = (int64_t)b->nbytes;
  strides[0] = 1;
  t->shape = shape;
  t->strides = strides;
  t->byte_offset = 0;
}

static PyObject* export_capsule(AdrBufferObject* b, int versioned, int copied) {
  if (versioned) {
    versioned_export* e = PyMem_RawCalloc(1, sizeof(*e));
    if (e == NULL) return PyErr_NoMemory();
    e->mt.version.major = ADRPY_DLPACK_MAJOR;
    e->mt.version.minor = ADRPY_DLPACK_MINOR;
    e->mt.manager_ctx = e;
    e->mt.deleter = versioned_deleter;
    e->mt.flags = (b->readonly ? DLPACK_FLAG_BITMASK_READ_ONLY : 0) |
                  (copied ? DLPACK_FLAG_BITMASK_IS_COPIED : 0);
    fill_tensor(&e->mt.dl_tensor, b, e->shape, e->strides);
    PyObject* cap = PyCapsule_New(&e->mt, kVersioned, versioned_capsule_destructor);
    if (cap == NULL) {
      PyMem_RawFree(e);
      return NULL;
    }
    Py_INCREF(b);
    e->owner = b;
    b->exports++;
    return cap;
  }
  legacy_export* e = PyMem_RawCalloc(1, sizeof(*e));
  if (e == NULL) return PyErr_NoMemory();
  e->mt.manager_ctx = e;
  e->mt.deleter = legacy_deleter;
  fill_tensor(&e->mt.dl_tensor, b, e->shape, e->strides);
  PyObject* cap = PyCapsule_New(&e->mt, kLegacy, legacy_capsule_destructor);
  if (cap == NULL) {
    PyMem_RawFree(e);
    return NULL;
  }
  Py_INCREF(b);
  e->owner = b;
  b->exports++;
  return cap;
}

/* The DLPack Python specification's stream rules, for memory of `type`:
 * CUDA (and its host/managed memory): None, -1, 1 (legacy default), 2
 * (per-thread default) or a CUstream > 2; 0 is ambiguous and refused.
 * ROCm: None, -1, 0 (default) or a hipStream_t > 2; 1 and 2 are refused.
 * Every other type (CPU, OpenCL, Vulkan ...) has no stream: None only. */
static int check_stream(PyObject* stream, int type) {
  if (stream == Py_None) return 0;
  if (!PyLong_Check(stream) || PyBool_Check(stream)) {
    PyErr_Format(PyExc_TypeError, "__dlpack__: stream must be None or an int, not %s",
                 Py_TYPE(stream)->tp_name);
    return -1;
  }
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(stream, &overflow);
  if (v == -1 && PyErr_Occurred()) return -1;
  const char* kind = adr_device_type_name((ArrowDeviceType)type);
  if (kind == NULL) kind = "this";
  switch (type) {
    case kDLCUDA:
    case kDLCUDAHost:
    case kDLCUDAManaged:
      if (overflow < 0 || (overflow == 0 && v < -1)) break;
      if (overflow == 0 && v == 0) {
        PyErr_SetString(PyExc_ValueError,
                        "__dlpack__: stream=0 is ambiguous for CUDA; pass 1 (legacy default "
                        "stream), 2 (per-thread default stream), a CUstream, -1 or None");
        return -1;
      }
      return 0;
    case kDLROCM:
    case kDLROCMHost:
      if (overflow < 0 || (overflow == 0 && v < -1)) break;
      if (overflow == 0 && (v == 1 || v == 2)) {
        PyErr_Format(PyExc_ValueError,
                     "__dlpack__: stream=%lld is not supported for ROCm; pass 0 (default "
                     "stream), a hipStream_t, -1 or None",
                     v);
        return -1;
      }
      return 0;
    default:
      PyErr_Format(PyExc_ValueError,
                   "__dlpack__: %s memory has no DLPack stream; stream must be None", kind);
      return -1;
  }
  PyErr_SetString(PyExc_ValueError, "__dlpack__: stream must be >= -1");
  return -1;
}

/* The stream rule of the DLPack Python specification for a buffer with
 * queued work (`stream` already checked by check_stream): -1 asks for no
 * synchronisation; a CUDA or ROCm stream handle is imported and made to
 * wait for the work device-side (the handle's device: the one the pending
 * event belongs to); None, ROCm's 0 and everything else wait on the host,
 * which makes the memory ready for any stream. */
static int sync_for_consumer(AdrBufferObject* b, PyObject* stream) {
  if (b->pending == NULL ||
      (b->pending->event != NULL && adr_event_query(b->pending->event, NULL) == 0))
    return adrpy_buffer_settle(b);
  if (stream == Py_None) return adrpy_buffer_settle(b);
  long long v = PyLong_AsLongLong(stream);
  if (v == -1 && PyErr_Occurred()) return -1;
  if (v == -1) return 0;
  AdrEventObject* pe = b->pending;
  struct adr_event* ev = pe->event;
  struct adr_device* dev = adr_event_device(ev);
  ArrowDeviceType t = adr_device_type(dev);
  int streams = t == ARROW_DEVICE_CUDA || t == ARROW_DEVICE_CUDA_HOST ||
                t == ARROW_DEVICE_CUDA_MANAGED || t == ARROW_DEVICE_ROCM ||
                t == ARROW_DEVICE_ROCM_HOST;
  if (!streams || v == 0) return adrpy_buffer_settle(b);
  struct adr_stream* imported = NULL;
  struct adr_error err = {{0}};
  int rc;
  Py_INCREF(pe); /* another thread may settle the buffer meanwhile */
  b->exports++;
  Py_BEGIN_ALLOW_THREADS rc = adr_stream_import(dev, (void*)(uintptr_t)v, &imported, &err);
  if (rc == 0) rc = adr_stream_wait_event(imported, ev, &err);
  /* The wrapper only: the consumer's stream is not touched. */
  if (imported != NULL) adr_stream_destroy(imported, NULL);
  Py_END_ALLOW_THREADS b->exports--;
  Py_DECREF(pe);
  if (rc != 0) {
    adrpy_raise(rc, &err);
    return -1;
  }
  return adrpy_buffer_check(b);
}

/* Parses an optional (int, int) tuple. */
static int parse_pair(PyObject* obj, const char* what, long long* a, long long* b) {
  if (!PyTuple_Check(obj) || PyTuple_GET_SIZE(obj) != 2) {
    PyErr_Format(PyExc_TypeError, "__dlpack__: %s must be a tuple of two ints or None", what);
    return -1;
  }
  *a = PyLong_AsLongLong(PyTuple_GET_ITEM(obj, 0));
  if (*a == -1 && PyErr_Occurred()) return -1;
  *b = PyLong_AsLongLong(PyTuple_GET_ITEM(obj, 1));
  if (*b == -1 && PyErr_Occurred()) return -1;
  return 0;
}

PyObject* adrpy_buffer_dlpack(PyObject* self_obj, PyObject* args, PyObject* kwds) {
  static char* kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
  AdrBufferObject* self = (AdrBufferObject*)self_obj;
  PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "|$OOOO:__dlpack__", kwlist, &stream, &max_version,
                                   &dl_device, &copy))
    return NULL;
  if (adrpy_buffer_check(self) < 0) return NULL;
  int versioned = 0;
  if (max_version != Py_None) {
    long long major, minor;
    if (parse_pair(max_version, "max_version", &major, &minor) < 0) return NULL;
    versioned = major >= 1;
  }
  if (copy != Py_None && !PyBool_Check(copy)) {
    PyErr_Format(PyExc_TypeError, "__dlpack__: copy must be a bool or None, not %s",
                 Py_TYPE(copy)->tp_name);
    return NULL;
  }
  long long type = adr_device_type(self->device->dev), id = adr_device_id(self->device->dev);
  int same_device = 1;
  if (dl_device != Py_None) {
    long long t, i;
    if (parse_pair(dl_device, "dl_device", &t, &i) < 0) return NULL;
    same_device = t == type && i == id;
    type = t;
    id = i;
  }
  if (check_stream(stream, (int)type) < 0) return NULL;
  int want_copy = copy == Py_True || !same_device;
  if (want_copy && copy == Py_False) {
    PyErr_Format(PyExc_BufferError,
                 "__dlpack__: the buffer is on %s, dl_device (%lld, %lld) needs a copy and "
                 "copy=False",
                 adr_device_name(self->device->dev), type, id);
    return NULL;
  }
  if (self->readonly && !versioned && !want_copy) {
    PyErr_SetString(PyExc_BufferError,
                    "__dlpack__: a read-only buffer needs the versioned capsule "
                    "(max_version >= (1, 0)) to say so");
    return NULL;
  }
  if (!want_copy) {
    if (sync_for_consumer(self, stream) < 0) return NULL;
    return export_capsule(self, versioned, 0);
  }

  PyObject* target = NULL;
  if (type > 0 && type <= INT32_MAX && id >= 0 && id <= INT32_MAX &&
      adr_device_type_name((ArrowDeviceType)type) != NULL) {
    target = adrpy_device_get((ArrowDeviceType)type, id);
  } else {
    PyErr_Format(PyExc_ValueError, "unknown device (%lld, %lld)", type, id);
  }
  if (target == NULL) {
    /* The spec's error for a device the producer cannot handle. */
    PyObject *et, *ev, *etb;
    PyErr_Fetch(&et, &ev, &etb);
    PyErr_NormalizeException(&et, &ev, &etb);
    PyErr_Format(PyExc_BufferError, "__dlpack__: cannot export to dl_device (%lld, %lld): %S", type,
                 id, ev != NULL ? ev : Py_None);
    Py_XDECREF(et);
    Py_XDECREF(ev);
    Py_XDECREF(etb);
    return NULL;
  }
  AdrBufferObject* c = (AdrBufferObject*)adrpy_buffer_copy(self, (AdrDeviceObject*)target, NULL);
  Py_DECREF(target);
  if (c == NULL) return NULL;
  PyObject* cap = export_capsule(c, versioned, 1);
  Py_DECREF(c);
  return cap;
}

PyObject* adrpy_buffer_dlpack_device(PyObject* self_obj, PyObject* unused) {
  AdrBufferObject* self = (AdrBufferObject*)self_obj;
  if (adrpy_buffer_check(self) < 0) return NULL;
  return Py_BuildValue("(iL)", (int)adr_device_type(self->device->dev),
                       (long long)adr_device_id(self->device->dev));
}

/* ---- import ------------------------------------------------------------- */

void adrpy_dlpack_release(int kind, void* managed) {
  if (managed == NULL) return;
  if (kind == ADRPY_BUFFER_DLPACK_V1) {
    DLManagedTensorVersioned* mt = managed;
    if (mt->deleter != NULL) mt->deleter(mt);
  } else {
    DLManagedTensor* mt = managed;
    if (mt->deleter != NULL) mt->deleter(mt);
  }
}

static int mul_overflow(size_t a, size_t b, size_t* out) {
  if (a != 0 && b > SIZE_MAX / a) return 1;
  *out = a * b;
  return 0;
}

/* The tensor's size in bytes, when it is one contiguous C-order block. */
static int tensor_nbytes(const DLTensor* t, size_t* out) {
  if (t->ndim < 0 || (t->ndim > 0 && t->shape == NULL)) {
    PyErr_Format(PyExc_BufferError, "from_dlpack: malformed tensor (ndim %d, shape %p)",
                 (int)t->ndim, (void*)t->shape);
    return -1;
  }
  size_t bits = (size_t)t->dtype.bits * t->dtype.lanes;
  if (bits == 0 || bits % 8 != 0) {
    PyErr_Format(PyExc_BufferError,
                 "from_dlpack: dtype (code %u, bits %u, lanes %u) is not a whole number of bytes",
                 t->dtype.code, t->dtype.bits, t->dtype.lanes);
    return -1;
  }
  size_t count = 1;
  for (int32_t i = 0; i < t->ndim; i++) {
    if (t->shape[i] < 0) {
      PyErr_Format(PyExc_BufferError, "from_dlpack: negative shape[%d] = %lld", (int)i,
                   (long long)t->shape[i]);
      return -1;
    }
    if (mul_overflow(count, (size_t)t->shape[i], &count)) {
      PyErr_SetString(PyExc_BufferError, "from_dlpack: tensor size overflows");
      return -1;
    }
  }
  if (t->strides != NULL && count > 0) {
    int64_t expected = 1;
    for (int32_t i = t->ndim - 1; i >= 0; i--) {
      if (t->shape[i] != 1 && t->strides[i] != expected) {
        PyErr_Format(PyExc_BufferError,
                     "from_dlpack: %s strides[%d] = %lld (expected %lld): adr buffers are "
                     "contiguous C-order bytes",
                     t->strides[i] < 0 ? "negative" : "non-contiguous", (int)i,
                     (long long)t->strides[i], (long long)expected);
        return -1;
      }
      expected *= t->shape[i];
    }
  }
  size_t nbytes;
  if (mul_overflow(count, bits / 8, &nbytes) || nbytes > PTRDIFF_MAX) {
    PyErr_SetString(PyExc_BufferError, "from_dlpack: tensor size overflows");
    return -1;
  }
  if (nbytes > 0 && t->data == NULL) {
    PyErr_SetString(PyExc_BufferError, "from_dlpack: NULL data for a non-empty tensor");
    return -1;
  }
  *out = nbytes;
  return 0;
}

static PyObject* consume_capsule(PyObject* cap) {
  int kind;
  void* managed;
  DLTensor* t;
  int readonly = 0;
  const char* used;
  if (PyCapsule_IsValid(cap, kVersioned)) {
    DLManagedTensorVersioned* mt = PyCapsule_GetPointer(cap, kVersioned);
    if (mt == NULL) return NULL;
    if (mt->version.major != ADRPY_DLPACK_MAJOR) {
      PyErr_Format(PyExc_BufferError, "from_dlpack: DLPack %u.%u is not supported (adr reads %d.x)",
                   mt->version.major, mt->version.minor, ADRPY_DLPACK_MAJOR);
      return NULL;
    }
    kind = ADRPY_BUFFER_DLPACK_V1;
    managed = mt;
    t = &mt->dl_tensor;
    readonly = (mt->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
    used = kVersionedUsed;
  } else if (PyCapsule_IsValid(cap, kLegacy)) {
    DLManagedTensor* mt = PyCapsule_GetPointer(cap, kLegacy);
    if (mt == NULL) return NULL;
    kind = ADRPY_BUFFER_DLPACK;
    managed = mt;
    t = &mt->dl_tensor;
    used = kLegacyUsed;
  } else {
    const char* name = PyCapsule_GetName(cap);
    if (name == NULL && PyErr_Occurred()) return NULL;
    if (name != NULL && (strcmp(name, kLegacyUsed) == 0 || strcmp(name, kVersionedUsed) == 0)) {
      PyErr_SetString(PyExc_BufferError, "from_dlpack: the DLPack capsule was already consumed");
    } else {
      PyErr_Format(PyExc_TypeError, "from_dlpack: not a DLPack capsule (name '%s')",
                   name != NULL ? name : "NULL");
    }
    return NULL;
  }
  size_t nbytes;
  if (tensor_nbytes(t, &nbytes) < 0) return NULL;
  int type = (int)t->device.device_type;
  if (type <= 0 || adr_device_type_name((ArrowDeviceType)type) == NULL || t->device.device_id < 0) {
    PyErr_Format(PyExc_BufferError, "from_dlpack: device (%d, %d) is not one adr knows", type,
                 (int)t->device.device_id);
    return NULL;
  }
  /* Until here the capsule is untouched: on failure its destructor frees it. */
  PyObject* device = adrpy_device_get((ArrowDeviceType)type, t->device.device_id);
  if (device == NULL) return NULL;
  void* ptr = t->data != NULL ? (char*)t->data + t->byte_offset : NULL;
  if (PyCapsule_SetName(cap, used) < 0) {
    Py_DECREF(device);
    return NULL;
  }
  PyObject* buf =
      adrpy_buffer_borrow((AdrDeviceObject*)device, ptr, nbytes, kind, managed, readonly);
  Py_DECREF(device);
  if (buf == NULL) adrpy_dlpack_release(kind, managed); /* ours since the rename */
  return buf;
}

static PyObject* consumer_stream(PyObject* obj, PyObject* stream);
static PyObject* call_dlpack(PyObject* obj, PyObject* stream);

PyObject* adrpy_from_dlpack(PyObject* module, PyObject* args, PyObject* kwds) {
  static char* kwlist[] = {"obj", "stream", NULL};
  PyObject* obj;
  PyObject* stream = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|$O:from_dlpack", kwlist, &obj, &stream))
    return NULL;
  if (PyCapsule_CheckExact(obj)) return consume_capsule(obj);
  PyObject* stream_arg = consumer_stream(obj, stream);
  if (stream_arg == NULL) return NULL;
  PyObject* cap = call_dlpack(obj, stream_arg);
  Py_DECREF(stream_arg);
  if (cap == NULL) return NULL;
  if (!PyCapsule_CheckExact(cap)) {
    PyErr_Format(PyExc_TypeError, "from_dlpack: __dlpack__ returned %s, not a capsule",
                 Py_TYPE(cap)->tp_name);
    Py_DECREF(cap);
    return NULL;
  }
  PyObject* buf = consume_capsule(cap);
  Py_DECREF(cap);
  return buf;
}

static int is_cuda_type(long long t) {
  return t == kDLCUDA || t == kDLCUDAHost || t == kDLCUDAManaged;
}
static int is_rocm_type(long long t) {
  return t == kDLROCM || t == kDLROCMHost;
}

/* The stream to pass to the producer: the one adr will use the memory on,
 * as the DLPack specification asks of consumers. An int is passed as given.
 * For CUDA and ROCm memory, an adr.Stream passes its native handle and None
 * passes the native handle of adr's default stream of that device (what
 * adr's calls without a stream run on); 1 (CUDA) or 0 (ROCm) if that
 * handle is the driver's legacy NULL stream. Other memory: None. New
 * reference. */
static PyObject* consumer_stream(PyObject* obj, PyObject* stream) {
  if (stream != Py_None && !PyObject_TypeCheck(stream, &AdrStream_Type)) {
    Py_INCREF(stream);
    return stream;
  }
  if (stream != Py_None && ((AdrStreamObject*)stream)->stream == NULL) {
    PyErr_SetString(PyExc_ValueError, "stream was destroyed");
    return NULL;
  }
  PyObject* dev = PyObject_CallMethod(obj, "__dlpack_device__", NULL);
  if (dev == NULL) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return NULL;
    PyErr_Clear(); /* no __dlpack_device__: nothing to go by */
    Py_RETURN_NONE;
  }
  long long t = -1, id = -1;
  if (PyTuple_Check(dev) && PyTuple_GET_SIZE(dev) == 2) {
    t = PyLong_AsLongLong(PyTuple_GET_ITEM(dev, 0));
    if (!PyErr_Occurred()) id = PyLong_AsLongLong(PyTuple_GET_ITEM(dev, 1));
  }
  Py_DECREF(dev);
  if (PyErr_Occurred()) return NULL;
  if (!is_cuda_type(t) && !is_rocm_type(t)) Py_RETURN_NONE;
  struct adr_stream* s;
  if (stream != Py_None) {
    s = ((AdrStreamObject*)stream)->stream;
  } else {
    if (id < 0 || id > INT32_MAX) {
      PyErr_Format(PyExc_BufferError, "from_dlpack: __dlpack_device__ gave device id %lld", id);
      return NULL;
    }
    PyObject* d = adrpy_device_get((ArrowDeviceType)t, id);
    if (d == NULL) return NULL;
    s = adr_stream_default(((AdrDeviceObject*)d)->dev);
    Py_DECREF(d);
  }
  void* handle = s != NULL ? adr_stream_native(s) : NULL;
  if (handle == NULL) return PyLong_FromLong(is_cuda_type(t) ? 1 : 0);
  return PyLong_FromVoidPtr(handle);
}

/* obj.__dlpack__(stream=..., max_version=(1, 0)), falling back to the
 * pre-1.0 signature. New reference or NULL. */
static PyObject* call_dlpack(PyObject* obj, PyObject* stream) {
  PyObject* meth = PyObject_GetAttrString(obj, "__dlpack__");
  if (meth == NULL) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return NULL;
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError,
                 "from_dlpack: %s has no __dlpack__ method and is not a DLPack capsule",
                 Py_TYPE(obj)->tp_name);
    return NULL;
  }
  PyObject* empty = PyTuple_New(0);
  PyObject* kw = Py_BuildValue("{s:O,s:(ii)}", "stream", stream, "max_version", ADRPY_DLPACK_MAJOR,
                               ADRPY_DLPACK_MINOR);
  PyObject* cap = NULL;
  if (empty != NULL && kw != NULL) cap = PyObject_Call(meth, empty, kw);
  if (cap == NULL && empty != NULL && PyErr_ExceptionMatches(PyExc_TypeError)) {
    /* A producer from before DLPack 1.0 (NumPy 1.24) has no max_version. */
    PyErr_Clear();
    Py_CLEAR(kw);
    if (stream != Py_None) kw = Py_BuildValue("{s:O}", "stream", stream);
    if (stream == Py_None || kw != NULL) cap = PyObject_Call(meth, empty, kw);
  }
  Py_XDECREF(empty);
  Py_XDECREF(kw);
  Py_DECREF(meth);
  return cap;
}
