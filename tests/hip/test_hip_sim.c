/* SPDX-License-Identifier: Apache-2.0
 *
 * HIP-specific behaviour of the HIP backend, on the HIP simulator
 * (tests/sim/hip, found through LD_LIBRARY_PATH as libamdhip64.so): event
 * export/import, two streams ordered by an event (and shown to race
 * without the wait), foreign streams and events, pinned host memory,
 * pointer queries, host registration, native handles, adoption, the
 * allocation path and its failure, peer copies, device properties.
 *
 * The test calls the simulated runtime directly too (dlopen of the same
 * libamdhip64.so the backend opened: one library, one state), to create
 * "application" streams and events and to hold a stream at a gate with
 * hipLaunchHostFunc, which makes the ordering tests deterministic.
 *
 * Modes (argv[1]), one per registration:
 *   main       two simulated devices (the default)
 *   visible    HIP_VISIBLE_DEVICES=1: one device, the simulator's second
 *   nodevice   ADR_SIM_DEVICES=0: unavailable with hipErrorNoDevice
 *   badstaging ADR_HIP_STAGING=64K:1K: init rejected with EINVAL
 * The "main" cases also run with ADR_SIM_HIP_VERSION=5.2 (the older
 * hipMemoryType numbering), ADR_SIM_HIP_NO_MEMPOOL=1 (a runtime without
 * stream-ordered allocation) and ADR_HIP_NO_ASYNC_ALLOC=1 (the backend told
 * not to use it): the latter two take the hipMalloc path; and with
 * ADR_HIP_STAGING=off and =64K:16K.
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
#include <semaphore.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hip/hip_runtime_api.h>

#include <adr/adr.h>
#include <adr/hip.h>

/* clang-format off */
#define DIRECT(X)                                                         \
  X(hipStreamCreateWithFlags) X(hipStreamDestroy) X(hipStreamSynchronize) \
  X(hipEventCreateWithFlags) X(hipEventDestroy) X(hipEventRecord)         \
  X(hipEventSynchronize) X(hipEventQuery) X(hipMemsetAsync) X(hipMalloc)  \
  X(hipFree) X(hipSetDevice) X(hipLaunchHostFunc) X(hipGetLastError)      \
  X(hipPeekAtLastError)
/* clang-format on */

static struct {
#define FIELD(name) __typeof__(name)* name;
  DIRECT(FIELD)
#undef FIELD
  int (*calls)(const char* name);
  void (*alloc_fail)(unsigned long long nth, int once);
} H;

#define HIP_OK(call) assert_int_equal((int)(call), (int)hipSuccess)

/* Runs `call`, which passes &err, and fails with the message unless it
 * returns 0. */
#define OK(call)                                                                    \
  do {                                                                              \
    struct adr_error err = {{0}};                                                   \
    int st_ = (call);                                                               \
    if (st_ != 0) fail_msg("%s: %s: %s", #call, adr_status_name(st_), err.message); \
  } while (0)

static struct adr_device* hip0;
static struct adr_device* cpu;

static struct adr_device* get(ArrowDeviceType type, int64_t id) {
  struct adr_error e = {{0}};
  struct adr_device* d = NULL;
  int st = adr_device_get(type, id, &d, &e);
  if (st != 0) fail_msg("adr_device_get(%d, %lld): %s", (int)type, (long long)id, e.message);
  return d;
}

static int load_direct(void) {
  void* h = dlopen("libamdhip64.so", RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    fprintf(stderr, "test_hip_sim: cannot open libamdhip64.so: %s\n", dlerror());
    return -1;
  }
  void* sym;
#define RESOLVE(name)                                                  \
  sym = dlsym(h, #name);                                               \
  if (sym == NULL) {                                                   \
    fprintf(stderr, "test_hip_sim: libamdhip64.so lacks %s\n", #name); \
    return -1;                                                         \
  }                                                                    \
  memcpy(&H.name, &sym, sizeof(sym));
  DIRECT(RESOLVE)
#undef RESOLVE
  sym = dlsym(h, "adr_sim_hip_calls");
  memcpy(&H.calls, &sym, sizeof(sym));
  sym = dlsym(h, "adr_sim_hip_alloc_fail");
  memcpy(&H.alloc_fail, &sym, sizeof(sym));
  if (H.calls == NULL || H.alloc_fail == NULL) {
    fprintf(stderr,
            "test_hip_sim: libamdhip64.so is not the HIP simulator (set LD_LIBRARY_PATH to "
            "tests/sim/hip in the build tree)\n");
    return -1;
  }
  return 0;
}

static int setup_main(void** state) {
  (void)state;
  hip0 = get(ARROW_DEVICE_ROCM, 0);
  cpu = get(ARROW_DEVICE_CPU, 0);
  return 0;
}

/* A gate: the stream stops at hipLaunchHostFunc until the test opens it. */
static void gate_fn(void* arg) {
  sem_wait((sem_t*)arg);
}

static void* dev_alloc(struct adr_device* d, size_t size) {
  void* p = NULL;
  OK(adr_alloc(d, size, 0, NULL, &p, &err));
  return p;
}

static void expect_bytes(const unsigned char* p, size_t n, unsigned char v, const char* what) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != v) fail_msg("%s: byte %zu is 0x%02x, expected 0x%02x", what, i, p[i], v);
}

/* Stream A fills a buffer behind a gate; stream B copies it to pinned host
 * memory. Without B waiting on A's event the copy overtakes the fill and
 * reads the old contents; with the wait it cannot start until the gate
 * opens, and reads the fill. (The destination is pinned because a copy to
 * pageable memory blocks the caller until it is done, as hipMemcpyAsync
 * does, and would wait for the gate.) */
static void run_ordering(bool wait, unsigned char value) {
  const size_t n = 64 * 1024;
  struct adr_stream *a = NULL, *b = NULL;
  struct adr_event *ev = NULL, *done = NULL;
  struct adr_device* host = get(ARROW_DEVICE_ROCM_HOST, 0);
  OK(adr_stream_create(hip0, &a, &err));
  OK(adr_stream_create(hip0, &b, &err));
  OK(adr_event_create(hip0, &ev, &err));
  OK(adr_event_create(hip0, &done, &err));
  unsigned char* d = dev_alloc(hip0, n);
  OK(adr_memset(hip0, d, 0xA5, n, NULL, &err));
  unsigned char* h = dev_alloc(host, n);
  memset(h, 0, n);

  sem_t gate;
  sem_init(&gate, 0, 0);
  HIP_OK(H.hipLaunchHostFunc((hipStream_t)adr_stream_native(a), gate_fn, &gate));
  OK(adr_memset(hip0, d, value, n, a, &err));
  OK(adr_event_record(ev, a, &err));
  if (wait) OK(adr_stream_wait_event(b, ev, &err));
  OK(adr_copy(host, h, hip0, d, n, b, &err));
  OK(adr_event_record(done, b, &err));
  if (wait) {
    /* B is held behind A's gate. */
    struct adr_error e = {{0}};
    assert_int_equal(adr_event_query(done, &e), EBUSY);
    sem_post(&gate);
    OK(adr_stream_synchronize(b, &err));
    expect_bytes(h, n, value, "host copy ordered after the fill by the event");
  } else {
    OK(adr_stream_synchronize(b, &err));
    /* The copy ran while A was still at the gate: the old contents. */
    expect_bytes(h, n, 0xA5, "host copy that did not wait (must be stale)");
    sem_post(&gate);
  }
  OK(adr_stream_synchronize(a, &err));
  sem_destroy(&gate);
  OK(adr_event_destroy(ev, &err));
  OK(adr_event_destroy(done, &err));
  OK(adr_stream_destroy(a, &err));
  OK(adr_stream_destroy(b, &err));
  OK(adr_free(hip0, d, n, NULL, &err));
  OK(adr_free(host, h, n, NULL, &err));
}

static void test_streams_ordered_by_event(void** state) {
  (void)state;
  run_ordering(false, 0x3C);
  run_ordering(true, 0x5D);
}

/* adr_event_native is a hipEvent_t* the runtime accepts; importing it back
 * (as a consumer of an ArrowDeviceArray would) orders another stream. */
static void test_event_export_import(void** state) {
  (void)state;
  const size_t n = 4096;
  struct adr_stream *a = NULL, *b = NULL;
  struct adr_event *ev = NULL, *imported = NULL;
  struct adr_device* host = get(ARROW_DEVICE_ROCM_HOST, 0);
  OK(adr_stream_create(hip0, &a, &err));
  OK(adr_stream_create(hip0, &b, &err));
  OK(adr_event_create(hip0, &ev, &err));
  unsigned char* d = dev_alloc(hip0, n);
  sem_t gate;
  sem_init(&gate, 0, 0);
  HIP_OK(H.hipLaunchHostFunc((hipStream_t)adr_stream_native(a), gate_fn, &gate));
  OK(adr_memset(hip0, d, 0x71, n, a, &err));
  OK(adr_event_record(ev, a, &err));

  hipEvent_t* native = adr_event_native(ev);
  assert_non_null(native);
  assert_non_null(*native);
  assert_int_equal((int)H.hipEventQuery(*native), (int)hipErrorNotReady);
  OK(adr_event_import(hip0, native, &imported, &err));
  hipEvent_t* reexported = adr_event_native(imported);
  assert_non_null(reexported);
  assert_ptr_equal(*reexported, *native);
  struct adr_error e = {{0}};
  assert_int_equal(adr_event_query(imported, &e), EBUSY);
  OK(adr_stream_wait_event(b, imported, &err));
  unsigned char* h = dev_alloc(host, n);
  memset(h, 0, n);
  OK(adr_copy(host, h, hip0, d, n, b, &err));
  sem_post(&gate);
  OK(adr_stream_synchronize(b, &err));
  expect_bytes(h, n, 0x71, "copy ordered by an imported event");
  OK(adr_event_synchronize(imported, &err));
  /* Destroying the import leaves the native event alive. */
  OK(adr_event_destroy(imported, &err));
  HIP_OK(H.hipEventSynchronize(*native));
  OK(adr_event_destroy(ev, &err));
  OK(adr_stream_destroy(a, &err));
  OK(adr_stream_destroy(b, &err));
  OK(adr_free(hip0, d, n, NULL, &err));
  OK(adr_free(host, h, n, NULL, &err));
  sem_destroy(&gate);

  struct adr_event* bad = NULL;
  hipEvent_t null_event = NULL;
  assert_int_equal(adr_event_import(hip0, &null_event, &bad, &e), EINVAL);
  assert_non_null(strstr(e.message, "NULL hipEvent_t"));
}

/* An application's own stream and event: adr work waits on the event
 * recorded on the application's stream, then runs on an imported stream. */
static void test_foreign_stream_and_event(void** state) {
  (void)state;
  const size_t n = 8192;
  hipStream_t app_stream = NULL;
  hipEvent_t app_event = NULL;
  HIP_OK(H.hipSetDevice(0));
  HIP_OK(H.hipStreamCreateWithFlags(&app_stream, hipStreamNonBlocking));
  HIP_OK(H.hipEventCreateWithFlags(&app_event, hipEventDisableTiming));
  void* app_buf = NULL;
  HIP_OK(H.hipMalloc(&app_buf, n));

  sem_t gate;
  sem_init(&gate, 0, 0);
  HIP_OK(H.hipLaunchHostFunc(app_stream, gate_fn, &gate));
  HIP_OK(H.hipMemsetAsync(app_buf, 0x42, n, app_stream));
  HIP_OK(H.hipEventRecord(app_event, app_stream));

  struct adr_event* ev = NULL;
  struct adr_stream* s = NULL;
  OK(adr_event_import(hip0, &app_event, &ev, &err));
  OK(adr_stream_create(hip0, &s, &err));
  OK(adr_stream_wait_event(s, ev, &err));
  struct adr_device* host = get(ARROW_DEVICE_ROCM_HOST, 0);
  unsigned char* h = dev_alloc(host, n);
  memset(h, 0, n);
  /* The application's pointer is recognised as hip:0 memory. */
  struct adr_device* owner = NULL;
  OK(adr_pointer_query((char*)app_buf + 100, &owner, &err));
  assert_ptr_equal(owner, hip0);
  OK(adr_copy(host, h, hip0, app_buf, n, s, &err));
  sem_post(&gate);
  OK(adr_stream_synchronize(s, &err));
  expect_bytes(h, n, 0x42, "copy after the application's event");

  /* Work queued by adr on the imported application stream. */
  struct adr_stream* imported = NULL;
  OK(adr_stream_import(hip0, app_stream, &imported, &err));
  assert_ptr_equal(adr_stream_native(imported), app_stream);
  memset(h, 0x17, n);
  OK(adr_copy(hip0, app_buf, host, h, n, imported, &err));
  OK(adr_stream_synchronize(imported, &err));
  memset(h, 0, n);
  OK(adr_copy(host, h, hip0, app_buf, n, NULL, &err));
  expect_bytes(h, n, 0x17, "round trip through the imported stream");
  OK(adr_stream_destroy(imported, &err));
  /* Still the application's: usable, then destroyed by it. */
  HIP_OK(H.hipStreamSynchronize(app_stream));
  OK(adr_event_destroy(ev, &err));
  OK(adr_stream_destroy(s, &err));
  HIP_OK(H.hipEventDestroy(app_event));
  HIP_OK(H.hipStreamDestroy(app_stream));
  HIP_OK(H.hipFree(app_buf));
  sem_destroy(&gate);
  OK(adr_free(host, h, n, NULL, &err));
}

static void test_rocm_host_accessible(void** state) {
  (void)state;
  struct adr_device* host = get(ARROW_DEVICE_ROCM_HOST, 0);
  struct adr_device_info info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  OK(adr_device_info_get(host, &info, &err));
  assert_true(info.caps & ADR_CAP_HOST_ACCESSIBLE);
  assert_string_equal(info.backend, "hip");
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  OK(adr_device_info_get(hip0, &info, &err));
  assert_false(info.caps & ADR_CAP_HOST_ACCESSIBLE);
  assert_true(info.caps & ADR_CAP_DEVICE_ADDRESSES);

  const size_t n = 100000;
  unsigned char* pinned = dev_alloc(host, n);
  for (size_t i = 0; i < n; i++) pinned[i] = (unsigned char)(i * 7);
  unsigned char* d = dev_alloc(hip0, n);
  OK(adr_copy(hip0, d, host, pinned, n, NULL, &err));
  memset(pinned, 0, n);
  OK(adr_copy(host, pinned, hip0, d, n, NULL, &err));
  for (size_t i = 0; i < n; i++) assert_int_equal(pinned[i], (unsigned char)(i * 7));
  /* memset on pinned memory through a stream, read by the host after it. */
  struct adr_stream* s = NULL;
  OK(adr_stream_create(host, &s, &err));
  OK(adr_memset(host, pinned + 10, 0xEE, 100, s, &err));
  OK(adr_stream_synchronize(s, &err));
  expect_bytes(pinned + 10, 100, 0xEE, "pinned memory after memset");
  assert_int_equal(pinned[9], (unsigned char)(9 * 7));
  assert_int_equal(pinned[110], (unsigned char)(110 * 7));
  OK(adr_stream_destroy(s, &err));
  OK(adr_free(hip0, d, n, NULL, &err));
  OK(adr_free(host, pinned, n, NULL, &err));
}

static void test_pointer_query(void** state) {
  (void)state;
  struct adr_device* host = get(ARROW_DEVICE_ROCM_HOST, 0);
  struct adr_device* hip1 = get(ARROW_DEVICE_ROCM, 1);
  const size_t n = 1 << 20;
  char* d0 = dev_alloc(hip0, n);
  char* d1 = dev_alloc(hip1, n);
  char* p = dev_alloc(host, n);
  struct adr_device* owner = NULL;
  OK(adr_pointer_query(d0, &owner, &err));
  assert_ptr_equal(owner, hip0);
  OK(adr_pointer_query(d0 + n - 1, &owner, &err));
  assert_ptr_equal(owner, hip0);
  OK(adr_pointer_query(d1 + 12345, &owner, &err));
  assert_ptr_equal(owner, hip1);
  OK(adr_pointer_query(p + 77, &owner, &err));
  assert_ptr_equal(owner, host);

  /* Over-aligned allocations are found too, at any interior address. */
  void* big = NULL;
  OK(adr_alloc(hip1, 3000, 65536, NULL, &big, &err));
  assert_int_equal((uintptr_t)big % 65536, 0);
  OK(adr_pointer_query((char*)big + 2999, &owner, &err));
  assert_ptr_equal(owner, hip1);
  OK(adr_free(hip1, big, 3000, NULL, &err));

  /* An application's hipMalloc on ordinal 1, found by the runtime's pointer
   * attributes (the numbering of the runtime version in use). */
  void* app = NULL;
  HIP_OK(H.hipSetDevice(1));
  HIP_OK(H.hipMalloc(&app, 4096));
  OK(adr_pointer_query((char*)app + 4000, &owner, &err));
  assert_ptr_equal(owner, hip1);
  HIP_OK(H.hipFree(app));

  /* Plain malloc memory is no HIP device's. */
  char* m = malloc(256);
  assert_non_null(m);
  struct adr_error e = {{0}};
  HIP_OK(H.hipGetLastError());
  int st = adr_pointer_query(m, &owner, &e);
  if (st == 0)
    assert_int_equal(adr_device_type(owner), ARROW_DEVICE_CPU);
  else
    assert_int_equal(st, ENOENT);
  /* Asking the runtime about malloc memory fails inside HIP; the backend
   * does not leave that behind as the application's last error ... */
  assert_int_equal((int)H.hipGetLastError(), (int)hipSuccess);
  /* ... but an error the application had not collected yet stays. */
  assert_int_equal((int)H.hipFree((char*)d0 + 1), (int)hipErrorInvalidValue);
  st = adr_pointer_query(m, &owner, &e);
  assert_int_equal((int)H.hipGetLastError(), (int)hipErrorInvalidValue);
  assert_int_equal((int)H.hipPeekAtLastError(), (int)hipSuccess);
  free(m);
  OK(adr_free(hip0, d0, n, NULL, &err));
  OK(adr_free(hip1, d1, n, NULL, &err));
  OK(adr_free(host, p, n, NULL, &err));
}

static void test_host_register(void** state) {
  (void)state;
  const size_t n = 1 << 16;
  unsigned char* buf = aligned_alloc(4096, n);
  assert_non_null(buf);
  memset(buf, 0x2B, n);
  OK(adr_host_register(hip0, buf, n, &err));
  struct adr_error e = {{0}};
  assert_int_equal(adr_host_register(hip0, buf, n, &e), EEXIST);
  assert_non_null(strstr(e.message, "hipErrorHostMemoryAlreadyRegistered"));
  /* Registered memory stays the application's host memory. */
  struct adr_device* owner = NULL;
  int st = adr_pointer_query(buf, &owner, &e);
  if (st == 0) assert_int_not_equal(adr_device_type(owner), ARROW_DEVICE_ROCM_HOST);
  unsigned char* d = dev_alloc(hip0, n);
  struct adr_stream* s = NULL;
  OK(adr_stream_create(hip0, &s, &err));
  OK(adr_copy(hip0, d, cpu, buf, n, s, &err));
  OK(adr_stream_synchronize(s, &err));
  memset(buf, 0, n);
  OK(adr_copy(cpu, buf, hip0, d, n, s, &err));
  OK(adr_stream_synchronize(s, &err));
  expect_bytes(buf, n, 0x2B, "round trip through registered memory");
  OK(adr_stream_destroy(s, &err));
  OK(adr_host_unregister(hip0, buf, &err));
  memset(&e, 0, sizeof(e));
  assert_int_equal(adr_host_unregister(hip0, buf, &e), EINVAL);
  assert_non_null(strstr(e.message, "not registered"));
  OK(adr_free(hip0, d, n, NULL, &err));
  free(buf);
}

static void test_device_native(void** state) {
  (void)state;
  struct adr_device* hip1 = get(ARROW_DEVICE_ROCM, 1);
  void* v = NULL;
  OK(adr_device_native(hip1, ADR_NATIVE_DEVICE, &v, &err));
  assert_int_equal((intptr_t)v, 1);
  OK(adr_device_native(hip1, ADR_NATIVE_QUEUE, &v, &err));
  assert_ptr_equal(v, adr_stream_native(adr_stream_default(hip1)));
  /* The default stream is a real runtime stream. */
  HIP_OK(H.hipStreamSynchronize((hipStream_t)v));
  struct adr_error e = {{0}};
  assert_int_equal(adr_device_native(hip1, ADR_NATIVE_CONTEXT, &v, &e), ENOTSUP);
  assert_non_null(strstr(e.message, "[hip]"));
}

static void test_device_adopt(void** state) {
  (void)state;
  hipStream_t app = NULL;
  HIP_OK(H.hipSetDevice(1));
  HIP_OK(H.hipStreamCreateWithFlags(&app, hipStreamNonBlocking));
  struct adr_hip_device_desc desc;
  memset(&desc, 0, sizeof(desc));
  desc.struct_size = sizeof(desc);
  desc.device = 1;
  desc.stream = app;
  struct adr_device* adopted = NULL;
  OK(adr_device_adopt(ARROW_DEVICE_ROCM, &desc, &adopted, &err));
  assert_true(adr_device_id(adopted) >= 2);
  assert_ptr_equal(adr_stream_native(adr_stream_default(adopted)), app);
  const size_t n = 5000;
  unsigned char* d = dev_alloc(adopted, n);
  unsigned char h[5000];
  memset(h, 0x66, n);
  OK(adr_copy(adopted, d, cpu, h, n, NULL, &err));
  memset(h, 0, n);
  OK(adr_copy(cpu, h, adopted, d, n, NULL, &err));
  expect_bytes(h, n, 0x66, "round trip on an adopted device");
  struct adr_device* owner = NULL;
  OK(adr_pointer_query(d, &owner, &err));
  assert_ptr_equal(owner, adopted);
  OK(adr_free(adopted, d, n, NULL, &err));

  struct adr_error e = {{0}};
  desc.struct_size = 8;
  assert_int_equal(adr_device_adopt(ARROW_DEVICE_ROCM, &desc, &adopted, &e), EINVAL);
  assert_non_null(strstr(e.message, "struct_size"));
  desc.struct_size = sizeof(desc);
  desc.device = 9;
  assert_int_equal(adr_device_adopt(ARROW_DEVICE_ROCM, &desc, &adopted, &e), ENODEV);
  assert_non_null(strstr(e.message, "no HIP device 9"));
  desc.device = 0;
  desc.reserved[2] = 1;
  assert_int_equal(adr_device_adopt(ARROW_DEVICE_ROCM, &desc, &adopted, &e), EINVAL);
  assert_non_null(strstr(e.message, "reserved"));
  /* The application's stream is still the application's. */
  HIP_OK(H.hipStreamSynchronize(app));
}

static void test_alloc_path_and_failure(void** state) {
  (void)state;
  /* The runtime has no pool, or the backend was told not to use it. */
  const char* nm = getenv("ADR_SIM_HIP_NO_MEMPOOL");
  const char* na = getenv(ADR_HIP_NO_ASYNC_ALLOC_ENV);
  bool mempool = !(nm != NULL && strcmp(nm, "1") == 0) && !(na != NULL && strcmp(na, "1") == 0);
  int before_async = H.calls("hipMallocAsync"), before_sync = H.calls("hipMalloc");
  /* A size no earlier test used, so no cache can serve it. */
  const size_t n = (size_t)37 * 1024 * 1024 + 4096;
  void* p = dev_alloc(hip0, n);
  if (mempool) {
    assert_true(H.calls("hipMallocAsync") > before_async);
    assert_int_equal(H.calls("hipMalloc"), before_sync);
  } else {
    assert_true(H.calls("hipMalloc") > before_sync);
    assert_int_equal(H.calls("hipMallocAsync"), before_async);
  }
  struct adr_device_info info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  OK(adr_device_info_get(hip0, &info, &err));
  assert_int_equal((info.caps & ADR_CAP_STREAM_ORDERED_ALLOC) != 0, mempool);
  OK(adr_free(hip0, p, n, NULL, &err));

  /* Every allocation fails from now on: the runtime's error comes back. */
  H.alloc_fail(1, 0);
  struct adr_error e = {{0}};
  void* q = NULL;
  /* Larger than anything freed so far: no cache can serve it. */
  int st = adr_alloc(hip0, (size_t)300 * 1024 * 1024 + 8192, 0, NULL, &q, &e);
  H.alloc_fail(0, 0);
  assert_int_equal(st, ENOMEM);
  assert_null(q);
  assert_non_null(strstr(e.message, "hipErrorOutOfMemory"));
  assert_non_null(strstr(e.message, "[hip]"));
  /* And allocation works again. */
  q = dev_alloc(hip0, 4096);
  OK(adr_free(hip0, q, 4096, NULL, &err));
}

static void test_peer_copy(void** state) {
  (void)state;
  struct adr_device* hip1 = get(ARROW_DEVICE_ROCM, 1);
  struct adr_device* host1 = get(ARROW_DEVICE_ROCM_HOST, 1);
  const size_t n = 300000;
  unsigned char* d0 = dev_alloc(hip0, n);
  unsigned char* d1 = dev_alloc(hip1, n);
  unsigned char* h = malloc(n);
  assert_non_null(h);
  for (size_t i = 0; i < n; i++) h[i] = (unsigned char)(i ^ (i >> 8));
  OK(adr_copy(hip0, d0, cpu, h, n, NULL, &err));
  int before = H.calls("hipMemcpyPeerAsync");
  OK(adr_copy(hip1, d1, hip0, d0, n, NULL, &err));
  assert_true(H.calls("hipMemcpyPeerAsync") > before);
  memset(h, 0, n);
  OK(adr_copy(cpu, h, hip1, d1, n, NULL, &err));
  for (size_t i = 0; i < n; i++) assert_int_equal(h[i], (unsigned char)(i ^ (i >> 8)));
  /* Pinned memory of ordinal 1 into device memory of ordinal 0, on a
   * stream of the pinned device. */
  unsigned char* p1 = dev_alloc(host1, n);
  memset(p1, 0x19, n);
  struct adr_stream* s = NULL;
  OK(adr_stream_create(host1, &s, &err));
  OK(adr_copy(hip0, d0, host1, p1, n, s, &err));
  OK(adr_stream_synchronize(s, &err));
  OK(adr_stream_destroy(s, &err));
  OK(adr_copy(cpu, h, hip0, d0, n, NULL, &err));
  expect_bytes(h, n, 0x19, "pinned memory of ordinal 1 copied to hip:0");
  OK(adr_free(host1, p1, n, NULL, &err));
  OK(adr_free(hip0, d0, n, NULL, &err));
  OK(adr_free(hip1, d1, n, NULL, &err));
  free(h);
}

/* The staging the backend was configured with (ADR_HIP_STAGING as the
 * registrations set it: unset, "off" or "<n>K:<n>K"). */
static void staging_config(size_t* threshold, size_t* chunk) {
  const char* v = getenv(ADR_HIP_STAGING_ENV);
  *threshold = (size_t)1 << 20;
  *chunk = (size_t)4 << 20;
  if (v == NULL) return;
  if (strcmp(v, "off") == 0) {
    *threshold = 0;
    return;
  }
  unsigned long t = 0, c = 0;
  if (sscanf(v, "%luK:%luK", &t, &c) != 2) fail_msg("unexpected %s=%s", ADR_HIP_STAGING_ENV, v);
  *threshold = (size_t)t << 10;
  *chunk = (size_t)c << 10;
}

/* Pageable copies at or above the threshold go through the pinned staging
 * buffers chunk by chunk (one hipMemcpyAsync per chunk); pinned memory and
 * small copies go straight to hipMemcpyAsync. Data is checked both ways. */
static void test_staged_copies(void** state) {
  (void)state;
  size_t threshold, chunk;
  staging_config(&threshold, &chunk);
  const size_t n = (size_t)9 << 20; /* 9 MiB: several chunks in every configuration */
  unsigned char* src = malloc(n);
  unsigned char* back = malloc(n);
  assert_non_null(src);
  assert_non_null(back);
  for (size_t i = 0; i < n; i++) src[i] = (unsigned char)(i * 31 + (i >> 12));
  unsigned char* d = dev_alloc(hip0, n);
  size_t expect = threshold != 0 && n >= threshold ? (n + chunk - 1) / chunk : 1;

  int before = H.calls("hipMemcpyAsync");
  OK(adr_copy(hip0, d, cpu, src, n, NULL, &err));
  assert_int_equal(H.calls("hipMemcpyAsync") - before, (int)expect);
  memset(back, 0, n);
  before = H.calls("hipMemcpyAsync");
  OK(adr_copy(cpu, back, hip0, d, n, NULL, &err));
  assert_int_equal(H.calls("hipMemcpyAsync") - before, (int)expect);
  assert_memory_equal(back, src, n);

  /* On a stream, source reused at once after an H2D returns. */
  struct adr_stream* s = NULL;
  OK(adr_stream_create(hip0, &s, &err));
  OK(adr_copy(hip0, d, cpu, src, n, s, &err));
  memset(src, 0, n);
  OK(adr_stream_synchronize(s, &err));
  OK(adr_copy(cpu, back, hip0, d, n, s, &err));
  OK(adr_stream_synchronize(s, &err));
  for (size_t i = 0; i < n; i++)
    if (back[i] != (unsigned char)(i * 31 + (i >> 12))) fail_msg("staged data wrong at %zu", i);
  OK(adr_stream_destroy(s, &err));

  /* A small pageable copy is never staged. */
  before = H.calls("hipMemcpyAsync");
  OK(adr_copy(hip0, d, cpu, back, 1000, NULL, &err));
  assert_int_equal(H.calls("hipMemcpyAsync") - before, 1);

  /* Pinned memory is never staged. */
  struct adr_device* host = get(ARROW_DEVICE_ROCM_HOST, 0);
  unsigned char* pinned = dev_alloc(host, n);
  before = H.calls("hipMemcpyAsync");
  OK(adr_copy(hip0, d, host, pinned, n, NULL, &err));
  assert_int_equal(H.calls("hipMemcpyAsync") - before, 1);
  OK(adr_free(host, pinned, n, NULL, &err));
  OK(adr_free(hip0, d, n, NULL, &err));
  free(src);
  free(back);
}

/* A malformed ADR_HIP_STAGING fails the backend's init with EINVAL naming
 * the variable and the column. */
static void test_bad_staging(void** state) {
  (void)state;
  struct adr_error e = {{0}};
  struct adr_device* d = NULL;
  assert_int_equal(adr_device_get(ARROW_DEVICE_ROCM, 0, &d, &e), ENODEV);
  assert_non_null(strstr(e.message, "rejected"));
  assert_non_null(strstr(e.message,
                         "ADR_HIP_STAGING=\"64K:1K\": column 5: expected a chunk size of at "
                         "least 4 KiB, found '1'"));
  assert_non_null(strstr(e.message, "EINVAL"));
}

struct props {
  char gcn[64];
  char pci[64];
  char library[256];
  char visible[64];
  int count;
};

static void collect(void* ctx, const char* key, const char* value) {
  struct props* p = ctx;
  p->count++;
  if (strcmp(key, "gcnArch") == 0) snprintf(p->gcn, sizeof(p->gcn), "%s", value);
  if (strcmp(key, "pci_bus_id") == 0) snprintf(p->pci, sizeof(p->pci), "%s", value);
  if (strcmp(key, "library") == 0) snprintf(p->library, sizeof(p->library), "%s", value);
  if (strcmp(key, "HIP_VISIBLE_DEVICES") == 0)
    snprintf(p->visible, sizeof(p->visible), "%s", value);
}

static void test_properties(void** state) {
  (void)state;
  struct props p;
  memset(&p, 0, sizeof(p));
  OK(adr_device_properties(hip0, collect, &p, &err));
  assert_true(p.count >= 10);
  assert_string_equal(p.gcn, "gfx000-sim");
  assert_string_equal(p.pci, "0000:61:00.0"); /* the HIP simulator's default */
  /* The file the runtime was loaded from (the simulator's, here). */
  size_t len = strlen(p.library);
  assert_true(len >= strlen("/libamdhip64.so"));
  assert_string_equal(p.library + len - strlen("/libamdhip64.so"), "/libamdhip64.so");
  struct adr_device_info info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  OK(adr_device_info_get(hip0, &info, &err));
  assert_string_equal(info.vendor, "AMD");
  assert_non_null(strstr(info.name, "HIP simulator"));
  assert_non_null(strstr(info.driver, "HIP runtime"));
  assert_true(info.memory_total > 0);
  assert_true(info.memory_free > 0 && info.memory_free <= info.memory_total);
  /* The identity agrees with the properties; reading it opened nothing. */
  assert_int_equal(info.kind, ADR_DEVICE_KIND_GPU);
  assert_int_equal(info.identity, ADR_DEVICE_HAS_UUID | ADR_DEVICE_HAS_PCI_BUS_ID);
  assert_int_equal(info.pci_domain, 0);
  assert_int_equal(info.pci_bus, 0x61);
  assert_int_equal(info.pci_device, 0);
}

/* HIP_VISIBLE_DEVICES=1: the runtime shows one device, the simulator's
 * second, as ordinal 0. */
static void test_visible_devices(void** state) {
  (void)state;
  struct adr_device* d = get(ARROW_DEVICE_ROCM, 0);
  struct props p;
  memset(&p, 0, sizeof(p));
  OK(adr_device_properties(d, collect, &p, &err));
  assert_string_equal(p.pci, "0000:62:00.0");
  assert_string_equal(p.visible, "1");
  struct adr_error e = {{0}};
  struct adr_device* none = NULL;
  assert_int_equal(adr_device_get(ARROW_DEVICE_ROCM, 1, &none, &e), ENODEV);
  assert_non_null(strstr(e.message, "1 device"));
}

static void test_no_device(void** state) {
  (void)state;
  struct adr_error e = {{0}};
  struct adr_device* d = NULL;
  assert_int_equal(adr_device_get(ARROW_DEVICE_ROCM, 0, &d, &e), ENODEV);
  assert_non_null(strstr(e.message, "hipErrorNoDevice"));
  assert_non_null(strstr(e.message, "unavailable"));
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "main";
  if (strcmp(mode, "nodevice") == 0) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_no_device)};
    return cmocka_run_group_tests_name("hip-sim-nodevice", tests, NULL, NULL);
  }
  if (strcmp(mode, "badstaging") == 0) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_bad_staging)};
    return cmocka_run_group_tests_name("hip-sim-badstaging", tests, NULL, NULL);
  }
  if (load_direct() != 0) return 1;
  if (strcmp(mode, "visible") == 0) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_visible_devices)};
    return cmocka_run_group_tests_name("hip-sim-visible", tests, NULL, NULL);
  }
  if (strcmp(mode, "main") != 0) {
    fprintf(stderr, "usage: %s [main|visible|nodevice]\n", argv[0]);
    return 2;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_streams_ordered_by_event),
      cmocka_unit_test(test_event_export_import),
      cmocka_unit_test(test_foreign_stream_and_event),
      cmocka_unit_test(test_rocm_host_accessible),
      cmocka_unit_test(test_pointer_query),
      cmocka_unit_test(test_host_register),
      cmocka_unit_test(test_device_native),
      cmocka_unit_test(test_device_adopt),
      cmocka_unit_test(test_alloc_path_and_failure),
      cmocka_unit_test(test_peer_copy),
      cmocka_unit_test(test_properties),
      cmocka_unit_test(test_staged_copies),
  };
  return cmocka_run_group_tests_name("hip-sim", tests, setup_main, NULL);
}
