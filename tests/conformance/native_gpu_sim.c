/* SPDX-License-Identifier: Apache-2.0
 *
 * Native helpers for CUDA and HIP (see conf_native.h), for the driver
 * simulators of tests/sim and for real drivers alike. A gate is a native
 * event recorded on an application stream behind a host function that
 * blocks until the gate is opened (cuLaunchHostFunc / hipLaunchHostFunc);
 * application work is a memset (cuMemsetD8Async / hipMemsetAsync) on adr's
 * native stream, after a cuStreamWaitEvent / hipStreamWaitEvent on the
 * gate. The entry points come from the library adr's backend loaded
 * (dlopen RTLD_NOLOAD); the few types are declared here by their ABI so no
 * vendor header is needed.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "conf_native.h"

typedef int (*fn_ctx)(void* ctx);
typedef int (*fn_ctx_pop)(void** ctx);
typedef int (*fn_stream_create)(void** stream, unsigned flags);
typedef int (*fn_handle)(void* handle);
typedef int (*fn_event_create)(void** event, unsigned flags);
typedef int (*fn_event_record)(void* event, void* stream);
typedef int (*fn_host_func)(void* stream, void (*fn)(void*), void* arg);
typedef int (*fn_stream_wait)(void* stream, void* event, unsigned flags);
typedef int (*fn_cu_memset)(unsigned long long ptr, unsigned char v, size_t n, void* stream);
typedef int (*fn_hip_memset)(void* ptr, int v, size_t n, void* stream);
typedef int (*fn_hip_event_create)(void** event);
typedef int (*fn_hip_set_device)(int device);

struct api {
  bool cuda;
  bool loaded;
  fn_ctx ctx_push;              /* CUDA only */
  fn_ctx_pop ctx_pop;           /* CUDA only */
  fn_hip_set_device set_device; /* HIP only */
  fn_stream_create stream_create;
  fn_handle stream_destroy, stream_sync, event_destroy;
  fn_event_create cu_event_create;
  fn_hip_event_create hip_event_create;
  fn_event_record event_record;
  fn_host_func host_func;
  fn_stream_wait stream_wait;
  fn_cu_memset cu_memset;
  fn_hip_memset hip_memset;
};

static struct api cu_api = {.cuda = true}, hip_api = {.cuda = false};

struct conf_gate {
  struct api* api;
  void* ctx; /* CUDA context to make current */
  int device;
  void* stream; /* the application's stream the gate is recorded on */
  void* event;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool open;
  struct conf_gate* next;
};

/* Live gates: a case stopped early (fault mode) leaves some for abandon. */
static struct conf_gate* live_gates;

static void* sym(void* lib, const char* a, const char* b) {
  void* p = dlsym(lib, a);
  return p != NULL || b == NULL ? p : dlsym(lib, b);
}

static int load(struct api* a, char* why, size_t n) {
  if (a->loaded) return 0;
  static const char* const cuda_names[] = {"libcuda.so.1", NULL};
  static const char* const hip_names[] = {"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5",
                                          NULL};
  void* lib = NULL;
  for (const char* const* name = a->cuda ? cuda_names : hip_names; *name && !lib; name++)
    lib = dlopen(*name, RTLD_NOW | RTLD_NOLOAD);
  if (lib == NULL) {
    snprintf(why, n, "the %s library adr loaded is not found", a->cuda ? "CUDA" : "HIP");
    return ENOENT;
  }
  if (a->cuda) {
    a->ctx_push = (fn_ctx)sym(lib, "cuCtxPushCurrent_v2", "cuCtxPushCurrent");
    a->ctx_pop = (fn_ctx_pop)sym(lib, "cuCtxPopCurrent_v2", "cuCtxPopCurrent");
    a->stream_create = (fn_stream_create)sym(lib, "cuStreamCreate", NULL);
    a->stream_destroy = (fn_handle)sym(lib, "cuStreamDestroy_v2", "cuStreamDestroy");
    a->stream_sync = (fn_handle)sym(lib, "cuStreamSynchronize", NULL);
    a->cu_event_create = (fn_event_create)sym(lib, "cuEventCreate", NULL);
    a->event_destroy = (fn_handle)sym(lib, "cuEventDestroy_v2", "cuEventDestroy");
    a->event_record = (fn_event_record)sym(lib, "cuEventRecord", NULL);
    a->host_func = (fn_host_func)sym(lib, "cuLaunchHostFunc", NULL);
    a->stream_wait = (fn_stream_wait)sym(lib, "cuStreamWaitEvent", NULL);
    a->cu_memset = (fn_cu_memset)sym(lib, "cuMemsetD8Async", NULL);
  } else {
    a->set_device = (fn_hip_set_device)sym(lib, "hipSetDevice", NULL);
    a->stream_create = (fn_stream_create)sym(lib, "hipStreamCreateWithFlags", NULL);
    a->stream_destroy = (fn_handle)sym(lib, "hipStreamDestroy", NULL);
    a->stream_sync = (fn_handle)sym(lib, "hipStreamSynchronize", NULL);
    a->hip_event_create = (fn_hip_event_create)sym(lib, "hipEventCreate", NULL);
    a->event_destroy = (fn_handle)sym(lib, "hipEventDestroy", NULL);
    a->event_record = (fn_event_record)sym(lib, "hipEventRecord", NULL);
    a->host_func = (fn_host_func)sym(lib, "hipLaunchHostFunc", NULL);
    a->stream_wait = (fn_stream_wait)sym(lib, "hipStreamWaitEvent", NULL);
    a->hip_memset = (fn_hip_memset)sym(lib, "hipMemsetAsync", NULL);
  }
  bool ok = a->stream_create && a->stream_destroy && a->stream_sync && a->event_destroy &&
            a->event_record && a->host_func && a->stream_wait &&
            (a->cuda ? a->ctx_push && a->ctx_pop && a->cu_event_create && a->cu_memset
                     : a->set_device && a->hip_event_create && a->hip_memset);
  if (!ok) {
    snprintf(why, n, "the %s library lacks an entry point the helper needs (e.g. %s)",
             a->cuda ? "CUDA" : "HIP", a->cuda ? "cuLaunchHostFunc" : "hipLaunchHostFunc");
    return ENOENT;
  }
  a->loaded = true;
  return 0;
}

/* Makes dev's context (CUDA) or device (HIP) current; returns the CUDA
 * context pushed, to pop with leave(). */
static int enter(struct api* a, struct adr_device* dev, void** out_ctx, char* why, size_t n) {
  struct adr_error err;
  void* v = NULL;
  int st = adr_device_native(dev, a->cuda ? ADR_NATIVE_CONTEXT : ADR_NATIVE_DEVICE, &v, &err);
  if (st != 0) {
    snprintf(why, n, "adr_device_native: %s", err.message);
    return st;
  }
  int rc = a->cuda ? a->ctx_push(v) : a->set_device((int)(intptr_t)v);
  if (rc != 0) {
    snprintf(why, n, "%s failed (%d)", a->cuda ? "cuCtxPushCurrent" : "hipSetDevice", rc);
    return EIO;
  }
  *out_ctx = v;
  return 0;
}

static void leave(struct api* a) {
  void* old = NULL;
  if (a->cuda) a->ctx_pop(&old);
}

static void wait_gate(void* arg) {
  struct conf_gate* g = arg;
  pthread_mutex_lock(&g->lock);
  while (!g->open) pthread_cond_wait(&g->cond, &g->lock);
  pthread_mutex_unlock(&g->lock);
}

static int gate_create(struct api* a, struct adr_device* dev, struct conf_gate** out,
                       void** out_sync_event, char* why, size_t n) {
  int st = load(a, why, n);
  if (st != 0) return st;
  struct conf_gate* g = calloc(1, sizeof(*g));
  if (g == NULL) return ENOMEM;
  g->api = a;
  pthread_mutex_init(&g->lock, NULL);
  pthread_cond_init(&g->cond, NULL);
  st = enter(a, dev, &g->ctx, why, n);
  if (st != 0) {
    free(g);
    return st;
  }
  int rc = a->stream_create(&g->stream, 1 /* non-blocking */);
  if (rc == 0) rc = a->cuda ? a->cu_event_create(&g->event, 0) : a->hip_event_create(&g->event);
  if (rc == 0) rc = a->host_func(g->stream, wait_gate, g);
  if (rc == 0) rc = a->event_record(g->event, g->stream);
  leave(a);
  if (rc != 0) {
    snprintf(why, n, "creating the gate failed (%d)", rc);
    return EIO; /* the objects made so far are reclaimed at exit */
  }
  g->next = live_gates;
  live_gates = g;
  *out = g;
  *out_sync_event = &g->event;
  return 0;
}

static void gate_open(struct conf_gate* g) {
  pthread_mutex_lock(&g->lock);
  g->open = true;
  pthread_cond_broadcast(&g->cond);
  pthread_mutex_unlock(&g->lock);
}

static void gate_destroy(struct conf_gate* g) {
  if (g == NULL) return;
  for (struct conf_gate** p = &live_gates; *p != NULL; p = &(*p)->next)
    if (*p == g) {
      *p = g->next;
      break;
    }
  struct api* a = g->api;
  gate_open(g);
  if (a->cuda) a->ctx_push(g->ctx);
  a->stream_sync(g->stream);
  a->event_destroy(g->event);
  a->stream_destroy(g->stream);
  if (a->cuda) leave(a);
  pthread_cond_destroy(&g->cond);
  pthread_mutex_destroy(&g->lock);
  free(g);
}

static int fill(struct api* a, struct adr_device* dev, struct adr_stream* stream,
                struct conf_gate* gate, void* ptr, size_t size, uint8_t v, char* why, size_t n) {
  int st = load(a, why, n);
  if (st != 0) return st;
  struct adr_error err;
  void* q = NULL;
  if (stream != NULL) {
    q = adr_stream_native(stream);
  } else if ((st = adr_device_native(dev, ADR_NATIVE_QUEUE, &q, &err)) != 0) {
    snprintf(why, n, "ADR_NATIVE_QUEUE: %s", err.message);
    return st;
  }
  void* ctx = NULL;
  st = enter(a, dev, &ctx, why, n);
  if (st != 0) return st;
  int rc = gate != NULL ? a->stream_wait(q, gate->event, 0) : 0;
  if (rc == 0)
    rc = a->cuda ? a->cu_memset((unsigned long long)(uintptr_t)ptr, v, size, q)
                 : a->hip_memset(ptr, v, size, q);
  leave(a);
  if (rc != 0) {
    snprintf(why, n, "queueing the application's memset failed (%d)", rc);
    return EIO;
  }
  return 0;
}

static void finish(struct adr_device* dev) {
  (void)dev;
}

static int cu_gate_create(struct adr_device* dev, struct conf_gate** out, void** sync_event,
                          char* why, size_t n) {
  return gate_create(&cu_api, dev, out, sync_event, why, n);
}
static int cu_fill(struct adr_device* dev, struct adr_stream* s, struct conf_gate* g, void* p,
                   size_t size, uint8_t v, char* why, size_t n) {
  return fill(&cu_api, dev, s, g, p, size, v, why, n);
}
static int hip_gate_create(struct adr_device* dev, struct conf_gate** out, void** sync_event,
                           char* why, size_t n) {
  return gate_create(&hip_api, dev, out, sync_event, why, n);
}
static int hip_fill(struct adr_device* dev, struct adr_stream* s, struct conf_gate* g, void* p,
                    size_t size, uint8_t v, char* why, size_t n) {
  return fill(&hip_api, dev, s, g, p, size, v, why, n);
}

static void open_gates(struct adr_device* dev) {
  (void)dev;
  for (struct conf_gate* g = live_gates; g != NULL; g = g->next) gate_open(g);
}

/* Gates a stopped case never destroyed: gate_destroy opens each first. */
static void abandon(struct adr_device* dev) {
  (void)dev;
  while (live_gates != NULL) gate_destroy(live_gates);
}

const struct conf_native conf_native_cuda = {
    .backend = "cuda",
    .gate_create = cu_gate_create,
    .gate_open = gate_open,
    .gate_destroy = gate_destroy,
    .fill = cu_fill,
    .finish = finish,
    .abandon = abandon,
    .open_gates = open_gates,
};

const struct conf_native conf_native_hip = {
    .backend = "hip",
    .gate_create = hip_gate_create,
    .gate_open = gate_open,
    .gate_destroy = gate_destroy,
    .fill = hip_fill,
    .finish = finish,
    .abandon = abandon,
    .open_gates = open_gates,
};
