/* SPDX-License-Identifier: Apache-2.0
 *
 * The CUDA Array Interface, version 3, produced for buffers in CUDA device,
 * host (pinned) and managed memory: a 1-D '|u1' array of the buffer's
 * bytes. Other devices raise AttributeError, so hasattr() says no.
 *
 * "stream" is None: every operation adr.Buffer offers completes before it
 * returns, so the consumer never needs to synchronise (the interface's
 * rule: None when no synchronisation is needed; never 0).
 */
#include "adrpy.h"

PyObject* adrpy_buffer_cai(PyObject* self_obj, void* closure) {
  AdrBufferObject* self = (AdrBufferObject*)self_obj;
  ArrowDeviceType t = adr_device_type(self->device->dev);
  if (t != ARROW_DEVICE_CUDA && t != ARROW_DEVICE_CUDA_HOST && t != ARROW_DEVICE_CUDA_MANAGED) {
    PyErr_Format(PyExc_AttributeError, "__cuda_array_interface__: %s memory is not CUDA memory",
                 adr_device_name(self->device->dev));
    return NULL;
  }
  if (adrpy_buffer_check(self) < 0) return NULL;
  PyObject* data =
      Py_BuildValue("(NO)", self->nbytes == 0 ? PyLong_FromLong(0) : PyLong_FromVoidPtr(self->ptr),
                    self->readonly ? Py_True : Py_False);
  if (data == NULL) return NULL;
  return Py_BuildValue("{s:(n),s:s,s:N,s:i,s:O,s:[(ss)],s:O}", "shape", (Py_ssize_t)self->nbytes,
                       "typestr", "|u1", "data", data, "version", 3, "strides", Py_None, "descr",
                       "", "|u1", "stream", Py_None);
}
