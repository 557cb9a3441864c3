/* SPDX-License-Identifier: Apache-2.0
 *
 * Checks of native handles the application hands in (adr_stream_import,
 * adr_event_import).
 *
 * The ICD loader calls through the first word of every object (the
 * cl_khr_icd dispatch table), and drivers such as PoCL 3.1 do not check
 * object types at all, so a bad handle reaching the loader is a crash or a
 * wrong answer, never CL_INVALID_*. Before any OpenCL call on a foreign
 * handle adr therefore reads that first word without faulting
 * (process_vm_readv on its own process reports EFAULT instead of raising
 * SIGSEGV) and requires it to be the dispatch table of one of the
 * enumerated platforms. What passes is then queried through OpenCL and
 * cross-checked (context, device, plausible field values) by the caller.
 * What cannot be caught: a pointer into readable memory that happens to
 * start with a valid dispatch word, e.g. an object of another type or a
 * released object whose memory was not yet reused.
 */
#include <errno.h>
#include <sys/uio.h>
#include <unistd.h>

#include "opencl_internal.h"

#define OCL_MAX_DISPATCH 16

/* Written only by init (single-threaded, before any other slot), read-only
 * afterwards. */
static const void* known_dispatch[OCL_MAX_DISPATCH];
static int known_count;

bool ocl_peek_pointer(const void* ptr, void** out) {
  if (ptr == NULL) return false;
  void* word = NULL;
  struct iovec local = {.iov_base = &word, .iov_len = sizeof(word)};
  struct iovec remote = {.iov_base = (void*)ptr, .iov_len = sizeof(word)};
  ssize_t n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
  if (n == (ssize_t)sizeof(word)) {
    *out = word;
    return true;
  }
  if (n < 0 && errno == EFAULT) return false;
  /* The system call is unavailable (seccomp, old kernel): fall back to a
   * plain read, which is what the loader would do anyway. */
  *out = *(void* const*)ptr;
  return true;
}

void ocl_handle_learn(const void* object) {
  void* word = NULL;
  if (object == NULL || !ocl_peek_pointer(object, &word) || word == NULL) return;
  for (int i = 0; i < known_count; i++)
    if (known_dispatch[i] == word) return;
  if (known_count < OCL_MAX_DISPATCH) known_dispatch[known_count++] = word;
}

int ocl_handle_check(const void* handle, const char* what, struct adr_error* error) {
  if (handle == NULL) return ocl_errorf(error, EINVAL, "the %s is NULL", what);
  void* word = NULL;
  if (!ocl_peek_pointer(handle, &word))
    return ocl_errorf(error, EINVAL, "the %s %p is not readable memory", what, handle);
  for (int i = 0; i < known_count; i++)
    if (known_dispatch[i] == word) return 0;
  return ocl_errorf(error, EINVAL,
                    "the %s %p is not an OpenCL object of any platform the ICD loader "
                    "reported (its first word is not an ICD dispatch table)",
                    what, handle);
}
