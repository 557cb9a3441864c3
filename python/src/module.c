/* SPDX-License-Identifier: Apache-2.0
 *
 * The _adr extension module: registers the types and the module-level
 * functions. The Python package adr (python/adr/__init__.py) re-exports it.
 */
#include "adrpy.h"

static PyObject* adrpy_version(PyObject* self, PyObject* unused) {
  return PyUnicode_FromString(adr_version());
}

static PyMethodDef adrpy_methods[] = {
    {"devices", (PyCFunction)(void (*)(void))adrpy_devices, METH_VARARGS | METH_KEYWORDS,
     "devices(selector='*') -> list of Device\n\n"
     "Every device adr can reach (loads the backends ADR_BACKENDS allows), filtered by\n"
     "a comma list of 'kind', 'kind:id', 'kind:*' or '*'."},
    {"default_device", adrpy_default_device, METH_NOARGS,
     "default_device() -> Device: the first available device of ADR_DEVICE (cpu when unset)."},
    {"from_dlpack", (PyCFunction)(void (*)(void))adrpy_from_dlpack, METH_VARARGS | METH_KEYWORDS,
     "from_dlpack(obj, *, stream=None) -> Buffer\n\n"
     "Wraps the memory of a DLPack producer (an object with __dlpack__, or a capsule)\n"
     "without a copy. The buffer keeps the producer's memory alive until it is freed."},
    {"asarray", (PyCFunction)(void (*)(void))adrpy_asarray, METH_VARARGS | METH_KEYWORDS,
     "asarray(obj, *, stream=None, device=None) -> Buffer\n\n"
     "Wraps the memory of a CUDA Array Interface producer without a copy, after\n"
     "ordering on the producer's stream: `stream` (an adr.Stream) waits on it, or\n"
     "with stream=None the host does."},
    {"numpy_allocator", (PyCFunction)(void (*)(void))adrpy_numpy_allocator,
     METH_VARARGS | METH_KEYWORDS,
     "numpy_allocator(device='cpu', pool=True) -> 'mem_handler' capsule (NEP 49)."},
    {"numpy_set_handler", adrpy_numpy_set_handler, METH_O,
     "numpy_set_handler(handler or None) -> the previous handler (PyDataMem_SetHandler)."},
    {"numpy_get_handler", adrpy_numpy_get_handler, METH_NOARGS,
     "numpy_get_handler() -> the current handler (PyDataMem_GetHandler)."},
    {"numpy_trim", adrpy_numpy_trim, METH_NOARGS,
     "numpy_trim() -> int: give the calling thread's cached NumPy blocks back to adr."},
    {"version", adrpy_version, METH_NOARGS, "version() -> str: the adr library's version."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef adrpy_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_adr",
    .m_doc = "adr, the Arrow Device Runtime: devices, streams, events and buffers (C extension).",
    .m_size = -1,
    .m_methods = adrpy_methods,
};

PyMODINIT_FUNC PyInit__adr(void);

PyMODINIT_FUNC PyInit__adr(void) {
  PyObject* m = PyModule_Create(&adrpy_module);
  if (m == NULL) return NULL;
  if (adrpy_errors_init(m) < 0 || adrpy_device_init(m) < 0 || adrpy_stream_init(m) < 0 ||
      adrpy_buffer_init(m) < 0 || adrpy_array_init(m) < 0 || adrpy_array_stream_init(m) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  if (PyModule_AddIntConstant(m, "DLPACK_MAJOR", 1) < 0 ||
      PyModule_AddIntConstant(m, "DLPACK_MINOR", 0) < 0) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
