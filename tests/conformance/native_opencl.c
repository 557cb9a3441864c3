/* SPDX-License-Identifier: Apache-2.0
 *
 * Native helper for OpenCL (see conf_native.h): a gate is a user event
 * (clCreateUserEvent, opened with clSetUserEventStatus); application work
 * is a fill (clEnqueueSVMMemFill, or clEnqueueFillBuffer on the cl_mem that
 * adr_opencl_buffer names in buffer mode) behind a
 * clEnqueueMarkerWithWaitList-style wait list, on adr's queue. The entry
 * points come from the libOpenCL.so.1 adr's backend already loaded.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include <adr/opencl.h>

#include "conf_native.h"

static struct {
  bool loaded;
  __typeof__(&clCreateUserEvent) create_user_event;
  __typeof__(&clSetUserEventStatus) set_user_event_status;
  __typeof__(&clReleaseEvent) release_event;
  __typeof__(&clEnqueueSVMMemFill) svm_fill;
  __typeof__(&clEnqueueFillBuffer) fill_buffer;
  __typeof__(&clFlush) flush;
} cl;

struct conf_gate {
  cl_event event;
  _Atomic bool opened; /* a user event's status is set once */
  struct conf_gate* next;
};

/* Live gates: a case stopped early (fault mode) leaves some for abandon. */
static struct conf_gate* live_gates;

static int load(char* why, size_t n) {
  if (cl.loaded) return 0;
  void* lib = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (lib == NULL) lib = dlopen("libOpenCL.so.1", RTLD_NOW);
  if (lib == NULL) {
    snprintf(why, n, "libOpenCL.so.1: %s", dlerror());
    return ENOENT;
  }
  *(void**)&cl.create_user_event = dlsym(lib, "clCreateUserEvent");
  *(void**)&cl.set_user_event_status = dlsym(lib, "clSetUserEventStatus");
  *(void**)&cl.release_event = dlsym(lib, "clReleaseEvent");
  *(void**)&cl.svm_fill = dlsym(lib, "clEnqueueSVMMemFill");
  *(void**)&cl.fill_buffer = dlsym(lib, "clEnqueueFillBuffer");
  *(void**)&cl.flush = dlsym(lib, "clFlush");
  if (!cl.create_user_event || !cl.set_user_event_status || !cl.release_event || !cl.fill_buffer ||
      !cl.flush) {
    snprintf(why, n, "libOpenCL.so.1 lacks an OpenCL 1.2 entry point");
    return ENOENT;
  }
  cl.loaded = true;
  return 0;
}

static int gate_create(struct adr_device* dev, struct conf_gate** out, void** out_sync_event,
                       char* why, size_t n) {
  int st = load(why, n);
  if (st != 0) return st;
  void* ctx = NULL;
  struct adr_error err;
  st = adr_device_native(dev, ADR_NATIVE_CONTEXT, &ctx, &err);
  if (st != 0) {
    snprintf(why, n, "ADR_NATIVE_CONTEXT: %s", err.message);
    return st;
  }
  struct conf_gate* g = calloc(1, sizeof(*g));
  if (g == NULL) return ENOMEM;
  cl_int rc = CL_SUCCESS;
  g->event = cl.create_user_event((cl_context)ctx, &rc);
  if (g->event == NULL || rc != CL_SUCCESS) {
    free(g);
    snprintf(why, n, "clCreateUserEvent failed (%d)", (int)rc);
    return EIO;
  }
  g->next = live_gates;
  live_gates = g;
  *out = g;
  *out_sync_event = &g->event;
  return 0;
}

static void gate_open(struct conf_gate* g) {
  if (!atomic_exchange(&g->opened, true)) cl.set_user_event_status(g->event, CL_COMPLETE);
}

static void open_gates(struct adr_device* dev) {
  (void)dev;
  for (struct conf_gate* g = live_gates; g != NULL; g = g->next) gate_open(g);
}

static void gate_destroy(struct conf_gate* g) {
  if (g == NULL) return;
  for (struct conf_gate** p = &live_gates; *p != NULL; p = &(*p)->next)
    if (*p == g) {
      *p = g->next;
      break;
    }
  cl.release_event(g->event);
  free(g);
}

static int fill(struct adr_device* dev, struct adr_stream* stream, struct conf_gate* gate,
                void* ptr, size_t size, uint8_t v, char* why, size_t n) {
  int st = load(why, n);
  if (st != 0) return st;
  struct adr_error err;
  void* q = NULL;
  if (stream != NULL) {
    q = adr_stream_native(stream);
  } else if ((st = adr_device_native(dev, ADR_NATIVE_QUEUE, &q, &err)) != 0) {
    snprintf(why, n, "ADR_NATIVE_QUEUE: %s", err.message);
    return st;
  }
  struct adr_opencl_buffer b = {.struct_size = sizeof(b)};
  st = adr_opencl_buffer(dev, ptr, &b, &err);
  if (st != 0) {
    snprintf(why, n, "adr_opencl_buffer: %s", err.message);
    return st;
  }
  cl_uint nwait = gate != NULL ? 1 : 0;
  const cl_event* wait = gate != NULL ? &gate->event : NULL;
  cl_int rc;
  if (b.buffer != NULL)
    rc = cl.fill_buffer((cl_command_queue)q, b.buffer, &v, 1, b.buffer_offset, size, nwait, wait,
                        NULL);
  else if (cl.svm_fill != NULL)
    rc = cl.svm_fill((cl_command_queue)q, ptr, &v, 1, size, nwait, wait, NULL);
  else
    rc = CL_INVALID_OPERATION;
  if (rc == CL_SUCCESS) rc = cl.flush((cl_command_queue)q);
  if (rc != CL_SUCCESS) {
    snprintf(why, n, "enqueueing the application's fill failed (%d)", (int)rc);
    return EIO;
  }
  return 0;
}

static void finish(struct adr_device* dev) {
  (void)dev;
}

/* Gates a stopped case never destroyed are completed (nothing waits on
 * them any more) and released. */
static void abandon(struct adr_device* dev) {
  (void)dev;
  while (live_gates != NULL) {
    gate_open(live_gates);
    gate_destroy(live_gates);
  }
}

static int buffer(struct adr_device* dev, const void* ptr, void** out_base, size_t* out_size,
                  size_t* out_offset, struct adr_error* error) {
  struct adr_opencl_buffer q = {.struct_size = sizeof(q)};
  int st = adr_opencl_buffer(dev, ptr, &q, error);
  if (st != 0) return st;
  if (q.address != ptr || (q.mode == ADR_OPENCL_ADDRESS_BUFFER) != (q.buffer != NULL))
    return adr_error_set(error, EPROTO, "[adr_opencl_buffer] inconsistent answer for %p", ptr);
  *out_base = q.base;
  *out_size = q.size;
  *out_offset = q.offset;
  return 0;
}

const struct conf_native conf_native_opencl = {
    .backend = "opencl",
    .gate_create = gate_create,
    .gate_open = gate_open,
    .gate_destroy = gate_destroy,
    .fill = fill,
    .finish = finish,
    .abandon = abandon,
    .open_gates = open_gates,
    .buffer_op = "adr_opencl_buffer",
    .buffer = buffer,
};
