/* SPDX-License-Identifier: Apache-2.0
 *
 * adr's Python module (_adr): internal declarations shared by its files.
 * One file per concept: errors.c (adr.Error), device.c (adr.Device),
 * stream.c (adr.Stream, adr.Event), buffer.c (adr.Buffer), dlpack.c
 * (__dlpack__, from_dlpack), cai.c (__cuda_array_interface__), array.c
 * (adr.Array), array_stream.c (adr.ArrayStream), numpy_alloc.c (NEP 49).
 *
 * Everything here runs with the GIL held unless a comment says otherwise;
 * calls into adr that may wait (allocation, copies, synchronisation) release
 * it. Only adr's public API is used.
 */
#ifndef ADRPY_H
#define ADRPY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <adr/adr.h>
#include <adr/memory.h>

/* ---- errors.c ---------------------------------------------------------- */

/* adr.Error: an OSError subclass; errno is adr's status, strerror adr's
 * message. */
extern PyObject* adrpy_Error;
int adrpy_errors_init(PyObject* module);
/* Raises adr.Error(status, message) from a failed adr call; returns NULL so
 * callers write `return adrpy_raise(rc, &err)`. */
PyObject* adrpy_raise(int status, const struct adr_error* error);

/* ---- device.c ---------------------------------------------------------- */

typedef struct {
  PyObject_HEAD struct adr_device* dev; /* owned by adr, never freed */
  uint64_t caps;                        /* adr_device_info.caps, read at creation */
} AdrDeviceObject;

extern PyTypeObject AdrDevice_Type;
int adrpy_device_init(PyObject* module);
/* The one Python object of an adr device (cached: adr devices live for the
 * whole process). New reference, or NULL with an exception set. */
PyObject* adrpy_device_wrap(struct adr_device* dev);
/* adr_device_get(type, id) wrapped; new reference or NULL. */
PyObject* adrpy_device_get(ArrowDeviceType type, int64_t id);
PyObject* adrpy_devices(PyObject* self, PyObject* args, PyObject* kwds);
PyObject* adrpy_default_device(PyObject* self, PyObject* unused);

/* ---- stream.c ---------------------------------------------------------- */

typedef struct {
  PyObject_HEAD AdrDeviceObject* device; /* strong reference */
  struct adr_stream* stream;             /* NULL once destroyed */
  int is_default;                        /* the device's default stream: never destroyed */
} AdrStreamObject;

typedef struct {
  PyObject_HEAD AdrDeviceObject* device;
  struct adr_event* event; /* NULL once destroyed */
} AdrEventObject;

extern PyTypeObject AdrStream_Type;
extern PyTypeObject AdrEvent_Type;
int adrpy_stream_init(PyObject* module);
PyObject* adrpy_stream_create(AdrDeviceObject* device);
PyObject* adrpy_stream_default(AdrDeviceObject* device);
PyObject* adrpy_event_create(AdrDeviceObject* device);

/* ---- buffer.c ---------------------------------------------------------- */

enum adrpy_buffer_kind {
  ADRPY_BUFFER_FREED = 0,
  ADRPY_BUFFER_OWNED = 1,     /* adr_alloc'd; adr_free'd by free()/dealloc */
  ADRPY_BUFFER_DLPACK = 2,    /* borrowed from a DLManagedTensor */
  ADRPY_BUFFER_DLPACK_V1 = 3, /* borrowed from a DLManagedTensorVersioned */
  ADRPY_BUFFER_FOREIGN = 4,   /* borrowed from a Python object (`managed` is its reference) */
};

typedef struct {
  PyObject_HEAD AdrDeviceObject* device; /* strong reference */
  void* ptr;
  size_t nbytes;
  int kind;           /* enum adrpy_buffer_kind */
  int readonly;       /* a read-only DLPack producer */
  void* managed;      /* the DLPack managed tensor of a borrowed buffer */
  Py_ssize_t exports; /* memoryviews, DLPack capsules and calls in flight */
  PyObject* weakreflist;
  /* Work queued on a stream (stream= arguments) that may still use the
   * memory: every such operation is ordered before `pending`, an event
   * recorded on `pending_stream` after the last one (an operation on
   * another stream first makes that stream wait on the previous event).
   * NULL when nothing is queued. `pending_keep` is a list of objects the
   * queued work reads (host memory given to copy_from: `pending_host` is
   * then 1) and of earlier events not complete when replaced, dropped once
   * the work is known complete. `cai_stream` keeps the stream last
   * exported through __cuda_array_interface__ alive with the buffer. */
  AdrStreamObject* pending_stream;
  AdrEventObject* pending;
  PyObject* pending_keep;
  int pending_host;
  PyObject* cai_stream;
} AdrBufferObject;

extern PyTypeObject AdrBuffer_Type;
int adrpy_buffer_init(PyObject* module);
/* adr_alloc on `device`; with a stream `s` stream-ordered (the buffer then
 * has `s` pending, so other uses wait for it). */
PyObject* adrpy_buffer_alloc(AdrDeviceObject* device, Py_ssize_t nbytes, Py_ssize_t alignment,
                             AdrStreamObject* s);
/* A new buffer on `device` with a copy of `src`'s bytes: complete on return
 * when `s` is NULL, else queued on `s` (both buffers then have it pending). */
PyObject* adrpy_buffer_copy(AdrBufferObject* src, AdrDeviceObject* device, AdrStreamObject* s);
/* 0 when the buffer can be used; -1 with ValueError when it was freed. */
int adrpy_buffer_check(AdrBufferObject* self);
/* The stream= argument of a method: None gives *out NULL; an adr.Stream
 * gives it (borrowed); anything else is TypeError, a destroyed stream
 * ValueError. 0 or -1. */
int adrpy_stream_arg(PyObject* obj, const char* what, AdrStreamObject** out);
/* Waits (host) until the buffer's queued work has completed and forgets it
 * (a no-op without queued work); releases the GIL while waiting. 0 or -1. */
int adrpy_buffer_settle(AdrBufferObject* self);
/* Before queuing work on `s` that uses the buffer: `s` waits (device-side)
 * for the buffer's queued work on another stream, or the host waits when
 * the two are on different devices. 0 or -1. */
int adrpy_buffer_order(AdrBufferObject* self, AdrStreamObject* s);
/* An event recorded on `s` now (after work just queued), new reference or
 * NULL with an exception set. */
AdrEventObject* adrpy_stream_mark(AdrStreamObject* s);
/* After queuing work on `s` that uses the buffer: `ev` (from
 * adrpy_stream_mark) becomes its pending event; `keep`, if not NULL, is
 * held until the work is known complete. 0 or -1 (MemoryError). */
int adrpy_buffer_set_pending(AdrBufferObject* self, AdrStreamObject* s, AdrEventObject* ev,
                             PyObject* keep);
/* Wraps borrowed memory of a DLPack managed tensor (kind DLPACK or
 * DLPACK_V1); takes the managed tensor over on success only. */
PyObject* adrpy_buffer_borrow(AdrDeviceObject* device, void* ptr, size_t nbytes, int kind,
                              void* managed, int readonly);

/* ---- dlpack.c ---------------------------------------------------------- */

PyObject* adrpy_buffer_dlpack(PyObject* self, PyObject* args, PyObject* kwds);
PyObject* adrpy_buffer_dlpack_device(PyObject* self, PyObject* unused);
PyObject* adrpy_from_dlpack(PyObject* module, PyObject* args, PyObject* kwds);
/* Calls the deleter of a borrowed buffer's managed tensor. */
void adrpy_dlpack_release(int kind, void* managed);

/* ---- cai.c ------------------------------------------------------------- */

PyObject* adrpy_buffer_cai(PyObject* self, void* closure);
PyObject* adrpy_asarray(PyObject* module, PyObject* args, PyObject* kwds);

/* ---- array.c ------------------------------------------------------------ */

int adrpy_array_init(PyObject* module);
int adrpy_array_check(PyObject* obj);
const struct ArrowSchema* adrpy_array_schema(PyObject* arr);
const struct ArrowDeviceArray* adrpy_array_device_array(PyObject* arr);
/* *out becomes an export of arr sharing its buffers (its release drops a
 * reference to arr, taking the GIL); 0 or -1 with an exception set. */
int adrpy_array_export(PyObject* arr, struct ArrowDeviceArray* out);
/* A new adr.Array taking over *schema and *array (released on failure). */
PyObject* adrpy_array_wrap(struct ArrowSchema* schema, struct ArrowDeviceArray* array);

/* ---- array_stream.c ----------------------------------------------------- */

int adrpy_array_stream_init(PyObject* module);

/* ---- numpy_alloc.c ------------------------------------------------------ */

PyObject* adrpy_numpy_allocator(PyObject* module, PyObject* args, PyObject* kwds);
PyObject* adrpy_numpy_set_handler(PyObject* module, PyObject* handler);
PyObject* adrpy_numpy_get_handler(PyObject* module, PyObject* unused);
/* Gives the calling thread's cached blocks back to adr; the bytes freed. */
PyObject* adrpy_numpy_trim(PyObject* module, PyObject* unused);

#endif /* ADRPY_H */
