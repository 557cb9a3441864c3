/* SPDX-License-Identifier: Apache-2.0
 *
 * The CUDA and HIP backends, driven slot by slot through their plugin table
 * (no core in between) on the driver simulators, for the contracts the two
 * mirrored backends must keep alike (issue 17):
 *   - every slot leaves the calling thread's current context (CUDA) or
 *     current device (HIP) as it found it;
 *   - stream_destroy on the default stream is EINVAL and leaves it usable;
 *   - a native stream/event destroy that fails frees the wrapper anyway and
 *     reports the driver's error by name (the sanitizer build's
 *     LeakSanitizer sees a leaked wrapper);
 *   - messages are "NAME: description" with no "[operation][backend]" tag.
 *
 * Usage: test_sim_backends cuda|hip, with ADR_SIM_TEST_BACKEND naming the
 * backend module and the simulator first on LD_LIBRARY_PATH (meson sets
 * both). The simulator's entry points are reached with dlsym, the way an
 * application's own CUDA/HIP code would call them.
 */
/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adr/backend.h"

/* ---- the vendor side, as the application sees it ------------------------ */

struct vendor {
  const char* name;
  ArrowDeviceType type;
  const char* driver;
  const char* stream_destroy; /* entry point names for the fault hook */
  const char* event_destroy;
  const char* invalid_handle_name; /* code 400 in both APIs */
  /* Makes "another" state current on this thread (device 1's context or
   * ordinal, or none), and tells whether it still is. */
  void (*enter_other)(int which);
  bool (*is_other)(int which);
  void (*leave_other)(int which);
  int others; /* how many "other" states to try */
};

static void* g_driver;
static const struct vendor* g_vendor;
static void (*g_fail_next)(const char* entry, int code);
static int (*g_native_stream_destroy)(void* stream);

static void* sym(const char* a, const char* b) {
  void* p = dlsym(g_driver, a);
  if (p == NULL && b != NULL) p = dlsym(g_driver, b);
  if (p == NULL) {
    fprintf(stderr, "test_sim_backends: the simulator lacks %s\n", a);
    exit(1);
  }
  return p;
}

/* CUDA: which 0 = device 1's primary context pushed, 1 = no context. */
static int (*cu_ctx_get_current)(void** ctx);
static int (*cu_ctx_push)(void* ctx);
static int (*cu_ctx_pop)(void** ctx);
static int (*cu_primary_retain)(void** ctx, int dev);
static int (*cu_primary_release)(int dev);
static void* g_cu_other;

static void cuda_enter_other(int which) {
  if (which == 1) return;
  assert_int_equal(cu_primary_retain(&g_cu_other, 1), 0);
  assert_int_equal(cu_ctx_push(g_cu_other), 0);
}
static bool cuda_is_other(int which) {
  void* cur = (void*)1;
  if (cu_ctx_get_current(&cur) != 0) return false;
  return which == 1 ? cur == NULL : cur == g_cu_other;
}
static void cuda_leave_other(int which) {
  if (which == 1) return;
  void* popped = NULL;
  assert_int_equal(cu_ctx_pop(&popped), 0);
  assert_ptr_equal(popped, g_cu_other);
  assert_int_equal(cu_primary_release(1), 0);
}

/* HIP: which 0 = ordinal 1 current. */
static int (*hip_set_device)(int dev);
static int (*hip_get_device)(int* dev);

static void hip_enter_other(int which) {
  (void)which;
  assert_int_equal(hip_set_device(1), 0);
}
static bool hip_is_other(int which) {
  (void)which;
  int cur = -1;
  return hip_get_device(&cur) == 0 && cur == 1;
}
static void hip_leave_other(int which) {
  (void)which;
  assert_int_equal(hip_set_device(0), 0);
}

static const struct vendor k_cuda = {"cuda",           ARROW_DEVICE_CUDA,
                                     "libcuda.so.1",   "cuStreamDestroy",
                                     "cuEventDestroy", "CUDA_ERROR_INVALID_HANDLE",
                                     cuda_enter_other, cuda_is_other,
                                     cuda_leave_other, 2};
static const struct vendor k_hip = {"hip",
                                    ARROW_DEVICE_ROCM,
                                    "libamdhip64.so.6",
                                    "hipStreamDestroy",
                                    "hipEventDestroy",
                                    "hipErrorInvalidHandle",
                                    hip_enter_other,
                                    hip_is_other,
                                    hip_leave_other,
                                    1};

/* ---- the backend -------------------------------------------------------- */

static const struct adr_backend* g_vt;

static void host_log(int level, const char* backend, const char* fmt, ...) {
  (void)level;
  (void)backend;
  (void)fmt;
}
static const char* host_getenv(const char* name) {
  return getenv(name);
}
static int host_log_level(void) {
  return ADR_LOG_ERROR;
}
static const struct adr_backend_host k_host = {
    .struct_size = sizeof(struct adr_backend_host),
    .abi_major = ADR_BACKEND_ABI_MAJOR,
    .abi_minor = ADR_BACKEND_ABI_MINOR,
    .log = host_log,
    .getenv = host_getenv,
    .log_level = host_log_level,
};

/* A backend message: non-empty, no "[op][backend]" tag, starting with
 * `name` followed by ": ". */
static void expect_message(const struct adr_error* e, const char* name) {
  if (e->message[0] == '\0' || e->message[0] == '[')
    fail_msg("message is empty or tagged: \"%s\"", e->message);
  size_t n = strlen(name);
  if (strncmp(e->message, name, n) != 0 || strncmp(e->message + n, ": ", 2) != 0)
    fail_msg("message does not start with \"%s: \": \"%s\"", name, e->message);
}

/* Runs `call` (0 expected) and checks the caller's current state after. */
#define CURRENT_OK(which, call)                                              \
  do {                                                                       \
    struct adr_error e_ = {{0}};                                             \
    struct adr_error* err = &e_;                                             \
    int st_ = (call);                                                        \
    if (st_ != 0) fail_msg("%s\n  returned %d: %s", #call, st_, e_.message); \
    if (!g_vendor->is_other(which))                                          \
      fail_msg("%s changed the caller's current %s", #call,                  \
               g_vendor == &k_cuda ? "context" : "device");                  \
  } while (0)
#define CURRENT_AFTER(which, call)                          \
  do {                                                      \
    call;                                                   \
    if (!g_vendor->is_other(which))                         \
      fail_msg("%s changed the caller's current %s", #call, \
               g_vendor == &k_cuda ? "context" : "device"); \
  } while (0)

static void test_current_preserved(void** state) {
  (void)state;
  for (int which = 0; which < g_vendor->others; which++) {
    g_vendor->enter_other(which);
    const ArrowDeviceType type = g_vendor->type;
    struct adr_backend_device* dev = NULL;
    struct adr_backend_stream *def = NULL, *s = NULL;
    struct adr_backend_event* ev = NULL;
    struct adr_device_info info;
    memset(&info, 0, sizeof(info));
    void* p = NULL;
    void* q = NULL;
    const size_t n = 64 * 1024 + 3;
    unsigned char* host = malloc(n);
    unsigned char* back = malloc(n);
    assert_non_null(host);
    assert_non_null(back);
    for (size_t i = 0; i < n; i++) host[i] = (unsigned char)(i * 7 + which);
    ArrowDeviceType t = 0;
    int64_t id = -1;

    CURRENT_OK(which, g_vt->device_open(type, 0, &dev, err));
    CURRENT_OK(which, g_vt->device_info(dev, &info, err));
    CURRENT_OK(which, g_vt->stream_create(dev, ADR_BACKEND_STREAM_DEFAULT, &def, err));
    CURRENT_OK(which, g_vt->stream_create(dev, 0, &s, err));
    CURRENT_OK(which, g_vt->alloc(dev, n, 0, s, &p, err));
    CURRENT_OK(which, g_vt->alloc(dev, n, 4096, s, &q, err));
    CURRENT_OK(which, g_vt->memset(dev, p, 0x5a, n, s, err));
    CURRENT_OK(which, g_vt->copy(dev, p, NULL, host, n, s, err));
    CURRENT_OK(which, g_vt->copy(dev, q, dev, p, n, s, err));
    CURRENT_OK(which, g_vt->event_create(dev, &ev, err));
    CURRENT_OK(which, g_vt->event_record(dev, ev, s, err));
    CURRENT_OK(which, g_vt->event_wait(dev, ev, def, err));
    CURRENT_OK(which, g_vt->copy(NULL, back, dev, q, n, def, err));
    CURRENT_OK(which, g_vt->stream_synchronize(dev, def, err));
    CURRENT_OK(which, g_vt->event_synchronize(dev, ev, err));
    CURRENT_OK(which, g_vt->event_query(dev, ev, err));
    CURRENT_OK(which, g_vt->pointer_query(q, &t, &id, err));
    assert_int_equal(t, type);
    assert_int_equal(id, 0);
    assert_memory_equal(back, host, n);
    CURRENT_OK(which, g_vt->event_destroy(dev, ev, err));
    CURRENT_OK(which, g_vt->free(dev, q, n, s, err));
    CURRENT_OK(which, g_vt->free(dev, p, n, s, err));
    CURRENT_OK(which, g_vt->stream_synchronize(dev, s, err));
    CURRENT_OK(which, g_vt->stream_destroy(dev, s, err));
    CURRENT_AFTER(which, g_vt->device_close(dev));
    free(host);
    free(back);
    g_vendor->leave_other(which);
  }
}

static void test_default_stream_destroy_refused(void** state) {
  (void)state;
  struct adr_backend_device* dev = NULL;
  struct adr_backend_stream* def = NULL;
  struct adr_error e = {{0}};
  assert_int_equal(g_vt->device_open(g_vendor->type, 0, &dev, &e), 0);
  assert_int_equal(g_vt->stream_create(dev, ADR_BACKEND_STREAM_DEFAULT, &def, &e), 0);
  void* native = g_vt->stream_native(dev, def);
  for (int round = 0; round < 2; round++) {
    memset(&e, 0, sizeof(e));
    assert_int_equal(g_vt->stream_destroy(dev, def, &e), EINVAL);
    expect_message(&e, "EINVAL");
    assert_non_null(strstr(e.message, "default stream"));
  }
  /* Still the same stream, and it still works. */
  struct adr_backend_stream* again = NULL;
  assert_int_equal(g_vt->stream_create(dev, ADR_BACKEND_STREAM_DEFAULT, &again, &e), 0);
  assert_ptr_equal(again, def);
  assert_ptr_equal(g_vt->stream_native(dev, def), native);
  const size_t n = 4099;
  void* p = NULL;
  unsigned char back[4099];
  assert_int_equal(g_vt->alloc(dev, n, 0, def, &p, &e), 0);
  assert_int_equal(g_vt->memset(dev, p, 0x3c, n, def, &e), 0);
  assert_int_equal(g_vt->copy(NULL, back, dev, p, n, def, &e), 0);
  assert_int_equal(g_vt->stream_synchronize(dev, def, &e), 0);
  for (size_t i = 0; i < n; i++) assert_int_equal(back[i], 0x3c);
  assert_int_equal(g_vt->free(dev, p, n, def, &e), 0);
  assert_int_equal(g_vt->stream_synchronize(dev, def, &e), 0);
  g_vt->device_close(dev);
}

static void test_failed_destroy_frees_wrapper(void** state) {
  (void)state;
  struct adr_backend_device* dev = NULL;
  struct adr_backend_stream* s = NULL;
  struct adr_backend_event* ev = NULL;
  struct adr_error e = {{0}};
  assert_int_equal(g_vt->device_open(g_vendor->type, 0, &dev, &e), 0);

  /* A stream: the driver refuses the destroy; the wrapper goes anyway (a
   * leak would show under LeakSanitizer) and the error names the code. */
  assert_int_equal(g_vt->stream_create(dev, 0, &s, &e), 0);
  void* native = g_vt->stream_native(dev, s);
  assert_non_null(native);
  g_fail_next(g_vendor->stream_destroy, 400);
  memset(&e, 0, sizeof(e));
  assert_int_equal(g_vt->stream_destroy(dev, s, &e), EINVAL);
  expect_message(&e, g_vendor->invalid_handle_name);
  /* The injected fault left the native stream alive: it is the
   * application's problem now, as after any failed destroy. */
  assert_int_equal(g_native_stream_destroy(native), 0);

  /* An event, the same way. */
  assert_int_equal(g_vt->event_create(dev, &ev, &e), 0);
  void* const* native_event = g_vt->event_native(dev, ev);
  assert_non_null(native_event);
  void* ev_handle = *native_event;
  g_fail_next(g_vendor->event_destroy, 400);
  memset(&e, 0, sizeof(e));
  assert_int_equal(g_vt->event_destroy(dev, ev, &e), EINVAL);
  expect_message(&e, g_vendor->invalid_handle_name);
  int (*native_event_destroy)(void*) = NULL;
  void* f = g_vendor == &k_cuda ? sym("cuEventDestroy_v2", "cuEventDestroy")
                                : sym("hipEventDestroy", NULL);
  memcpy(&native_event_destroy, &f, sizeof(f));
  assert_int_equal(native_event_destroy(ev_handle), 0);

  /* The device goes on working after both. */
  assert_int_equal(g_vt->stream_create(dev, 0, &s, &e), 0);
  assert_int_equal(g_vt->stream_destroy(dev, s, &e), 0);
  g_vt->device_close(dev);
}

int main(int argc, char** argv) {
  if (argc != 2 || (strcmp(argv[1], "cuda") != 0 && strcmp(argv[1], "hip") != 0)) {
    fprintf(stderr, "usage: test_sim_backends cuda|hip\n");
    return 1;
  }
  g_vendor = strcmp(argv[1], "cuda") == 0 ? &k_cuda : &k_hip;
  const char* module = getenv("ADR_SIM_TEST_BACKEND");
  if (module == NULL) {
    fprintf(stderr, "test_sim_backends: ADR_SIM_TEST_BACKEND is not set\n");
    return 1;
  }
  void* lib = dlopen(module, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "test_sim_backends: %s\n", dlerror());
    return 1;
  }
  const struct adr_backend* (*query)(uint32_t, uint32_t, const struct adr_backend_host*) = NULL;
  void* q = dlsym(lib, ADR_BACKEND_QUERY_SYMBOL);
  memcpy(&query, &q, sizeof(q));
  g_vt = query != NULL ? query(ADR_BACKEND_ABI_MAJOR, ADR_BACKEND_ABI_MINOR, &k_host) : NULL;
  struct adr_error e = {{0}};
  if (g_vt == NULL || g_vt->init(&e) != 0) {
    fprintf(stderr, "test_sim_backends: %s backend refused: %s\n", g_vendor->name, e.message);
    return 1;
  }
  /* The backend opened the simulator; this is the same library. */
  g_driver = dlopen(g_vendor->driver, RTLD_NOW | RTLD_NOLOAD);
  if (g_driver == NULL) {
    fprintf(stderr, "test_sim_backends: %s is not loaded\n", g_vendor->driver);
    return 1;
  }
  void* f;
#define SYM(dst, a, b) \
  f = sym(a, b);       \
  memcpy(&(dst), &f, sizeof(f))
  if (g_vendor == &k_cuda) {
    SYM(cu_ctx_get_current, "cuCtxGetCurrent", NULL);
    SYM(cu_ctx_push, "cuCtxPushCurrent_v2", "cuCtxPushCurrent");
    SYM(cu_ctx_pop, "cuCtxPopCurrent_v2", "cuCtxPopCurrent");
    SYM(cu_primary_retain, "cuDevicePrimaryCtxRetain", NULL);
    SYM(cu_primary_release, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease");
    SYM(g_native_stream_destroy, "cuStreamDestroy_v2", "cuStreamDestroy");
    SYM(g_fail_next, "adr_sim_cuda_fail_next", NULL);
  } else {
    SYM(hip_set_device, "hipSetDevice", NULL);
    SYM(hip_get_device, "hipGetDevice", NULL);
    SYM(g_native_stream_destroy, "hipStreamDestroy", NULL);
    SYM(g_fail_next, "adr_sim_hip_fail_next", NULL);
  }
#undef SYM
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_current_preserved),
      cmocka_unit_test(test_default_stream_destroy_refused),
      cmocka_unit_test(test_failed_destroy_frees_wrapper),
  };
  int failed = cmocka_run_group_tests_name(g_vendor->name, tests, NULL, NULL);
  if (g_vt->shutdown != NULL) g_vt->shutdown();
  return failed == 0 ? 0 : 1;
}
