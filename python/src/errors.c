/* SPDX-License-Identifier: Apache-2.0
 *
 * adr.Error: every failed adr call becomes one, carrying adr's status as
 * errno and adr's message ("[operation][backend] NATIVE_NAME: ...") as
 * strerror, so `except OSError` and `e.errno == errno.ENODEV` work.
 */
#include "adrpy.h"

PyObject* adrpy_Error;

int adrpy_errors_init(PyObject* module) {
  adrpy_Error = PyErr_NewExceptionWithDoc(
      "adr.Error",
      "A failed adr call: errno is adr's status (an errno value), strerror adr's message.",
      PyExc_OSError, NULL);
  if (adrpy_Error == NULL) return -1;
  Py_INCREF(adrpy_Error);
  if (PyModule_AddObject(module, "Error", adrpy_Error) < 0) {
    Py_DECREF(adrpy_Error);
    return -1;
  }
  return 0;
}

PyObject* adrpy_raise(int status, const struct adr_error* error) {
  const char* message =
      error != NULL && error->message[0] != '\0' ? error->message : adr_status_string(status);
  PyObject* args = Py_BuildValue("(is)", status, message);
  if (args == NULL) return NULL;
  PyErr_SetObject(adrpy_Error, args);
  Py_DECREF(args);
  return NULL;
}
