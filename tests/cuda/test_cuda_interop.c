/* SPDX-License-Identifier: Apache-2.0
 *
 * CUDA backend specifics beyond the conformance suite: sync_event export
 * and import with the driver on the other side, stream import, native
 * handles, the current-context discipline, pinned/managed memory seen from
 * the host, pointer queries, host registration, properties, over-aligned
 * allocations.
 *
 * On the simulator (libcuda.so.1 exports its test hooks) it also runs the
 * cases that need a deterministic driver: two streams ordered by an event
 * giving stale data without the wait, freed/out-of-bounds pointers,
 * allocation failure, and the staged pageable path.
 *
 * Exit 77 when there is no CUDA device, unless ADR_CUDA_TEST_REQUIRE=1.
 */
#include <pthread.h>

#include <adr/cuda.h>
#include <adr/memory.h>

#include "cuda_test.h"

static struct adr_device *g_dev, *g_dev1, *g_host, *g_managed, *g_cpu;
static struct ct_driver g_drv;

#define KIB ((size_t)1024)
#define MIB ((size_t)1024 * 1024)

static void* dev_alloc(struct adr_device* d, size_t n) {
  void* p = NULL;
  CT_OK(adr_alloc(d, n, 0, NULL, &p, CT_ERR));
  return p;
}

/* ---- events ------------------------------------------------------------- */

static void test_event_export_import(void** state) {
  (void)state;
  const size_t n = 1 * MIB;
  unsigned char* host = malloc(n);
  unsigned char* back = malloc(n);
  ct_fill(host, n, 7);
  void* buf = dev_alloc(g_dev, n);
  struct adr_stream *s1 = NULL, *s2 = NULL;
  CT_OK(adr_stream_create(g_dev, &s1, CT_ERR));
  CT_OK(adr_stream_create(g_dev, &s2, CT_ERR));
  CT_OK(adr_copy(g_dev, buf, g_cpu, host, n, s1, CT_ERR));
  struct adr_event* ev = NULL;
  CT_OK(adr_event_create(g_dev, &ev, CT_ERR));
  CT_OK(adr_event_record(ev, s1, CT_ERR));

  /* Export: what an ArrowDeviceArray consumer gets is a CUevent*. */
  CUevent* native = adr_event_native(ev);
  assert_non_null(native);
  assert_non_null(*native);
  CU_OK(g_drv.EventSynchronize(*native)); /* a foreign consumer waits natively */

  /* Import it back and order another stream on it. */
  struct adr_event* imp = NULL;
  CT_OK(adr_event_import(g_dev, native, &imp, CT_ERR));
  CT_OK(adr_stream_wait_event(s2, imp, CT_ERR));
  CT_OK(adr_copy(g_cpu, back, g_dev, buf, n, s2, CT_ERR));
  CT_OK(adr_stream_synchronize(s2, CT_ERR));
  ct_expect(back, n, 7, "copy ordered on an imported event");
  CT_OK(adr_event_destroy(imp, CT_ERR));
  CU_OK(g_drv.EventQuery(*native)); /* the wrapper did not destroy it */

  /* A CUevent the application created and recorded itself. */
  CUevent mine = NULL;
  CUcontext popped = NULL;
  void* ctx = NULL;
  CT_OK(adr_device_native(g_dev, ADR_NATIVE_CONTEXT, &ctx, CT_ERR));
  CU_OK(g_drv.CtxPushCurrent((CUcontext)ctx));
  CU_OK(g_drv.EventCreate(&mine, CU_EVENT_DISABLE_TIMING));
  CU_OK(g_drv.EventRecord(mine, (CUstream)adr_stream_native(s1)));
  CU_OK(g_drv.CtxPopCurrent(&popped));
  assert_ptr_equal(popped, ctx);
  struct adr_event* imp2 = NULL;
  CT_OK(adr_event_import(g_dev, &mine, &imp2, CT_ERR));
  CT_OK(adr_event_synchronize(imp2, CT_ERR));
  CT_OK(adr_event_query(imp2, CT_ERR));
  CT_OK(adr_event_destroy(imp2, CT_ERR));
  CU_OK(g_drv.EventDestroy(mine));

  /* A NULL CUevent behind the pointer is refused. */
  CUevent none = NULL;
  struct adr_event* bad = NULL;
  CT_FAILS(adr_event_import(g_dev, &none, &bad, CT_ERR), EINVAL, "[adr_event_import][cuda]",
           "NULL CUevent");

  CT_OK(adr_event_destroy(ev, CT_ERR));
  CT_OK(adr_stream_destroy(s1, CT_ERR));
  CT_OK(adr_stream_destroy(s2, CT_ERR));
  CT_OK(adr_free(g_dev, buf, n, NULL, CT_ERR));
  free(host);
  free(back);
}

/* ---- streams and native handles ----------------------------------------- */

static void test_stream_import(void** state) {
  (void)state;
  void* ctx0 = NULL;
  void* ctx1 = NULL;
  CT_OK(adr_device_native(g_dev, ADR_NATIVE_CONTEXT, &ctx0, CT_ERR));
  CUcontext popped = NULL;
  CUstream cs = NULL;
  CU_OK(g_drv.CtxPushCurrent((CUcontext)ctx0));
  CU_OK(g_drv.StreamCreate(&cs, CU_STREAM_NON_BLOCKING));
  CU_OK(g_drv.CtxPopCurrent(&popped));

  struct adr_stream* s = NULL;
  CT_OK(adr_stream_import(g_dev, (void*)cs, &s, CT_ERR));
  assert_ptr_equal(adr_stream_native(s), (void*)cs);
  assert_ptr_equal(adr_stream_device(s), g_dev);
  const size_t n = 64 * KIB;
  void* buf = dev_alloc(g_dev, n);
  unsigned char* back = malloc(n);
  CT_OK(adr_memset(g_dev, buf, 0x5c, n, s, CT_ERR));
  CT_OK(adr_copy(g_cpu, back, g_dev, buf, n, s, CT_ERR));
  CT_OK(adr_stream_synchronize(s, CT_ERR));
  ct_expect_bytes(back, n, 0x5c, "work queued on an imported CUstream");
  CT_OK(adr_stream_destroy(s, CT_ERR));
  CU_OK(g_drv.StreamSynchronize(cs)); /* still alive: adr did not own it */
  CU_OK(g_drv.StreamDestroy(cs));

  /* A stream of another device's context is refused. */
  if (g_dev1 != NULL) {
    CT_OK(adr_device_native(g_dev1, ADR_NATIVE_CONTEXT, &ctx1, CT_ERR));
    CUstream other = NULL;
    CU_OK(g_drv.CtxPushCurrent((CUcontext)ctx1));
    CU_OK(g_drv.StreamCreate(&other, CU_STREAM_NON_BLOCKING));
    CU_OK(g_drv.CtxPopCurrent(&popped));
    struct adr_stream* s1 = NULL;
    CT_FAILS(adr_stream_import(g_dev, (void*)other, &s1, CT_ERR), EINVAL,
             "[adr_stream_import][cuda]", "another context");
    CU_OK(g_drv.StreamDestroy(other));
  }
  CT_OK(adr_free(g_dev, buf, n, NULL, CT_ERR));
  free(back);
}

/* CU_STREAM_LEGACY and CU_STREAM_PER_THREAD name the current context's
 * default stream. Imported, they are used from a thread with no current
 * context (this one, between adr calls): event record, wait, synchronize
 * and copies on them run in the device's context, and the order holds. */
static void test_stream_import_default_handles(void** state) {
  (void)state;
  const CUstream handles[] = {CU_STREAM_LEGACY, CU_STREAM_PER_THREAD};
  const size_t n = 64 * KIB;
  void* buf = dev_alloc(g_dev, n);
  unsigned char* back = malloc(n);
  for (size_t i = 0; i < 2; i++) {
    CUcontext cur = (CUcontext)1;
    CU_OK(g_drv.CtxGetCurrent(&cur));
    assert_null(cur); /* adr leaves no context current */
    struct adr_stream* s = NULL;
    CT_OK(adr_stream_import(g_dev, (void*)handles[i], &s, CT_ERR));
    struct adr_event* ev = NULL;
    CT_OK(adr_event_create(g_dev, &ev, CT_ERR));
    CT_OK(adr_memset(g_dev, buf, 0x40 + (int)i, n, s, CT_ERR));
    CT_OK(adr_event_record(ev, s, CT_ERR));
    struct adr_stream* other = NULL;
    CT_OK(adr_stream_create(g_dev, &other, CT_ERR));
    CT_OK(adr_stream_wait_event(other, ev, CT_ERR));
    CT_OK(adr_copy(g_cpu, back, g_dev, buf, n, other, CT_ERR));
    CT_OK(adr_stream_wait_event(s, ev, CT_ERR));
    CT_OK(adr_stream_synchronize(other, CT_ERR));
    CT_OK(adr_stream_synchronize(s, CT_ERR));
    ct_expect_bytes(back, n, (unsigned char)(0x40 + i), "copy ordered after a default-stream fill");
    CT_OK(adr_event_destroy(ev, CT_ERR));
    CT_OK(adr_stream_destroy(other, CT_ERR));
    CT_OK(adr_stream_destroy(s, CT_ERR));
  }
  CT_OK(adr_free(g_dev, buf, n, NULL, CT_ERR));
  free(back);
}

static void test_native_handles(void** state) {
  (void)state;
  void* v = NULL;
  CT_OK(adr_device_native(g_dev, ADR_NATIVE_DEVICE, &v, CT_ERR));
  assert_int_equal((intptr_t)v, 0);
  if (g_dev1 != NULL) {
    CT_OK(adr_device_native(g_dev1, ADR_NATIVE_DEVICE, &v, CT_ERR));
    assert_int_equal((intptr_t)v, 1);
  }
  CUcontext primary = NULL;
  CU_OK(g_drv.PrimaryCtxRetain(&primary, 0));
  CT_OK(adr_device_native(g_dev, ADR_NATIVE_CONTEXT, &v, CT_ERR));
  assert_ptr_equal(v, (void*)primary);
  CU_OK(g_drv.PrimaryCtxRelease(0));
  /* All three memory kinds of ordinal 0 share the primary context. */
  void* vh = NULL;
  CT_OK(adr_device_native(g_host, ADR_NATIVE_CONTEXT, &vh, CT_ERR));
  assert_ptr_equal(vh, v);
  CT_OK(adr_device_native(g_dev, ADR_NATIVE_QUEUE, &v, CT_ERR));
  assert_non_null(v);
  assert_ptr_equal(v, adr_stream_native(adr_stream_default(g_dev)));
  CT_FAILS(adr_device_native(g_dev, ADR_NATIVE_PLATFORM, &v, CT_ERR), ENOTSUP,
           "[adr_device_native][cuda]", "kind 4");
}

/* Every adr call leaves the calling thread's current context as it was. */
static void run_some_adr_work(void) {
  void* p = dev_alloc(g_dev, 4 * KIB);
  unsigned char host[256];
  struct adr_stream* s = NULL;
  struct adr_event* e = NULL;
  CT_OK(adr_stream_create(g_dev, &s, CT_ERR));
  CT_OK(adr_event_create(g_dev, &e, CT_ERR));
  CT_OK(adr_memset(g_dev, p, 1, 4 * KIB, s, CT_ERR));
  CT_OK(adr_event_record(e, s, CT_ERR));
  /* The memset runs on s; the copy below runs on the default stream, which
   * is not ordered after s: wait for the event before reading p. */
  CT_OK(adr_event_synchronize(e, CT_ERR));
  CT_OK(adr_copy(g_cpu, host, g_dev, p, sizeof(host), NULL, CT_ERR));
  for (size_t i = 0; i < sizeof(host); i++) assert_int_equal(host[i], 1);
  struct adr_device_info info = {.struct_size = sizeof(info)};
  CT_OK(adr_device_info_get(g_dev, &info, CT_ERR));
  CT_OK(adr_event_destroy(e, CT_ERR));
  CT_OK(adr_stream_destroy(s, CT_ERR));
  CT_OK(adr_free(g_dev, p, 4 * KIB, NULL, CT_ERR));
}

static void* discipline_thread(void* arg) {
  (void)arg;
  CUcontext cur = (CUcontext)1;
  if (g_drv.CtxGetCurrent(&cur) != CUDA_SUCCESS || cur != NULL) return (void*)1;
  run_some_adr_work();
  if (g_drv.CtxGetCurrent(&cur) != CUDA_SUCCESS || cur != NULL) return (void*)2;
  return NULL;
}

static void test_context_discipline(void** state) {
  (void)state;
  /* A fresh thread has no current context, and still has none after. */
  pthread_t t;
  void* rc = (void*)3;
  assert_int_equal(pthread_create(&t, NULL, discipline_thread, NULL), 0);
  assert_int_equal(pthread_join(t, &rc), 0);
  assert_null(rc);
  /* With another device's context current, it stays current. */
  if (g_dev1 != NULL) {
    void* ctx1 = NULL;
    CT_OK(adr_device_native(g_dev1, ADR_NATIVE_CONTEXT, &ctx1, CT_ERR));
    CU_OK(g_drv.CtxPushCurrent((CUcontext)ctx1));
    run_some_adr_work();
    CUcontext cur = NULL;
    CU_OK(g_drv.CtxGetCurrent(&cur));
    assert_ptr_equal(cur, ctx1);
    CU_OK(g_drv.CtxPopCurrent(&cur));
  }
}

/* ---- memory kinds ------------------------------------------------------- */

static void host_accessible_case(struct adr_device* d, const char* what) {
  struct adr_device_info info = {.struct_size = sizeof(info)};
  CT_OK(adr_device_info_get(d, &info, CT_ERR));
  assert_true(info.caps & ADR_CAP_HOST_ACCESSIBLE);
  const size_t n = 64 * KIB + 17;
  unsigned char* p = dev_alloc(d, n);
  ct_fill(p, n, 3); /* the host writes it directly */
  void* dbuf = dev_alloc(g_dev, n);
  CT_OK(adr_copy(g_dev, dbuf, d, p, n, NULL, CT_ERR));
  CT_OK(adr_memset(d, p + 100, 0xee, 1000, NULL, CT_ERR));
  ct_expect_bytes(p + 100, 1000, 0xee, what); /* the host reads the device's write */
  CT_OK(adr_copy(d, p, g_dev, dbuf, n, NULL, CT_ERR));
  ct_expect(p, n, 3, what);
  CT_OK(adr_free(g_dev, dbuf, n, NULL, CT_ERR));
  CT_OK(adr_free(d, p, n, NULL, CT_ERR));
}

static void test_host_memory_is_host_accessible(void** state) {
  (void)state;
  host_accessible_case(g_host, "cuda_host memory");
}

static void test_managed_memory_is_host_accessible(void** state) {
  (void)state;
  host_accessible_case(g_managed, "cuda_managed memory");
}

static void test_device_memory_caps(void** state) {
  (void)state;
  struct adr_device_info info = {.struct_size = sizeof(info)};
  CT_OK(adr_device_info_get(g_dev, &info, CT_ERR));
  assert_false(info.caps & ADR_CAP_HOST_ACCESSIBLE);
  assert_true(info.caps & ADR_CAP_DEVICE_ADDRESSES);
  assert_true(info.caps & ADR_CAP_UNIFIED_ADDRESSING);
  assert_true(info.caps & ADR_CAP_IMPORT_NATIVE);
  assert_string_equal(info.vendor, "NVIDIA");
  assert_string_equal(info.backend, "cuda");
  assert_true(strncmp(info.driver, "CUDA driver ", 12) == 0);
  assert_true(info.memory_total > 0);
  assert_true(info.memory_free <= info.memory_total);
  assert_true(info.alignment >= 256);
}

static void expect_owner(const void* p, struct adr_device* want) {
  struct adr_device* got = NULL;
  CT_OK(adr_pointer_query(p, &got, CT_ERR));
  if (got != want)
    fail_msg("adr_pointer_query(%p) gave %s, expected %s", p, got ? adr_device_name(got) : "NULL",
             adr_device_name(want));
}

static void test_pointer_query(void** state) {
  (void)state;
  const size_t n = 8 * KIB;
  unsigned char* d0 = dev_alloc(g_dev, n);
  unsigned char* h = dev_alloc(g_host, n);
  unsigned char* m = dev_alloc(g_managed, n);
  expect_owner(d0, g_dev);
  expect_owner(d0 + n - 1, g_dev); /* inside: an Arrow slice */
  expect_owner(h + 5, g_host);
  expect_owner(m + 4000, g_managed);
  unsigned char* d1 = NULL;
  if (g_dev1 != NULL) {
    d1 = dev_alloc(g_dev1, n);
    expect_owner(d1 + 1, g_dev1);
  }
  unsigned char* plain = malloc(n);
  struct adr_device* got = NULL;
  CT_FAILS(adr_pointer_query(plain, &got, CT_ERR), ENOENT, "[adr_pointer_query]", NULL);
  free(plain);
  if (d1 != NULL) CT_OK(adr_free(g_dev1, d1, n, NULL, CT_ERR));
  CT_OK(adr_free(g_managed, m, n, NULL, CT_ERR));
  CT_OK(adr_free(g_host, h, n, NULL, CT_ERR));
  CT_OK(adr_free(g_dev, d0, n, NULL, CT_ERR));
}

static void test_host_register(void** state) {
  (void)state;
  const size_t n = 1 * MIB;
  unsigned char* buf = aligned_alloc(4096, n);
  unsigned char* back = malloc(n);
  ct_fill(buf, n, 11);
  CT_OK(adr_host_register(g_dev, buf, n, CT_ERR));
  expect_owner(buf + 12345, g_host); /* registered memory is pinned host memory */
  void* d = dev_alloc(g_dev, n);
  CT_OK(adr_copy(g_dev, d, g_cpu, buf, n, NULL, CT_ERR));
  CT_OK(adr_copy(g_cpu, back, g_dev, d, n, NULL, CT_ERR));
  ct_expect(back, n, 11, "copy through registered memory");
  CT_FAILS(adr_host_register(g_dev, buf, n, CT_ERR), EEXIST, "[adr_host_register][cuda]",
           "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED");
  CT_OK(adr_host_unregister(g_dev, buf, CT_ERR));
  CT_FAILS(adr_host_unregister(g_dev, buf, CT_ERR), ENOENT, "[adr_host_unregister][cuda]",
           "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED");
  CT_OK(adr_free(g_dev, d, n, NULL, CT_ERR));
  free(buf);
  free(back);
}

struct props {
  char cc[32], bus[64], uuid[64], mem[64];
  int count;
};

static void collect(void* ctx, const char* key, const char* value) {
  struct props* p = ctx;
  p->count++;
  if (strcmp(key, "compute_capability") == 0) snprintf(p->cc, sizeof(p->cc), "%s", value);
  if (strcmp(key, "pci_bus_id") == 0) snprintf(p->bus, sizeof(p->bus), "%s", value);
  if (strcmp(key, "uuid") == 0) snprintf(p->uuid, sizeof(p->uuid), "%s", value);
  if (strcmp(key, "memory_total") == 0) snprintf(p->mem, sizeof(p->mem), "%s", value);
}

static void test_properties(void** state) {
  (void)state;
  struct props p = {0};
  CT_OK(adr_device_properties(g_dev, collect, &p, CT_ERR));
  int major = -1, minor = -1;
  assert_int_equal(sscanf(p.cc, "%d.%d", &major, &minor), 2);
  assert_true(major >= 3);
  assert_non_null(strchr(p.bus, ':'));
  assert_int_equal(strlen(p.uuid), 40); /* GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx */
  assert_true(strncmp(p.uuid, "GPU-", 4) == 0);
  assert_true(strstr(p.mem, "bytes") != NULL);
  assert_true(p.count >= 8);
}

static void test_over_aligned(void** state) {
  (void)state;
  struct {
    struct adr_device* d;
    size_t align;
  } cases[] = {{g_dev, 64 * KIB}, {g_dev, 4 * KIB}, {g_host, 16 * KIB}, {g_managed, 8 * KIB}};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    const size_t n = 3000;
    void* p = NULL;
    CT_OK(adr_alloc(cases[i].d, n, cases[i].align, NULL, &p, CT_ERR));
    assert_int_equal((uintptr_t)p % cases[i].align, 0);
    unsigned char host[3000], back[3000];
    ct_fill(host, n, (unsigned)i);
    CT_OK(adr_copy(cases[i].d, p, g_cpu, host, n, NULL, CT_ERR));
    CT_OK(adr_copy(g_cpu, back, cases[i].d, p, n, NULL, CT_ERR));
    ct_expect(back, n, (unsigned)i, "over-aligned allocation");
    CT_OK(adr_free(cases[i].d, p, n, NULL, CT_ERR));
  }
}

/* ---- simulator-only: a deterministic driver ----------------------------- */

/* Stream A finishes its last write ~80 ms after B's read would run without
 * the wait (every simulated operation sleeps 20 ms). */
static unsigned char ordered_read(bool wait, unsigned char value) {
  const size_t n = 4 * KIB;
  void* x = dev_alloc(g_dev, n);
  void* junk = dev_alloc(g_dev, n);
  CT_OK(adr_memset(g_dev, x, 0x11, n, NULL, CT_ERR));
  struct adr_stream *a = NULL, *b = NULL;
  struct adr_event* ev = NULL;
  CT_OK(adr_stream_create(g_dev, &a, CT_ERR));
  CT_OK(adr_stream_create(g_dev, &b, CT_ERR));
  CT_OK(adr_event_create(g_dev, &ev, CT_ERR));
  g_drv.sim_delay(20000);
  for (int i = 0; i < 4; i++) CT_OK(adr_memset(g_dev, junk, i, n, a, CT_ERR));
  CT_OK(adr_memset(g_dev, x, value, n, a, CT_ERR));
  CT_OK(adr_event_record(ev, a, CT_ERR));
  if (wait) CT_OK(adr_stream_wait_event(b, ev, CT_ERR));
  unsigned char* host = malloc(n);
  /* Pinned destination: the copy is truly asynchronous. */
  void* pinned = dev_alloc(g_host, n);
  CT_OK(adr_copy(g_host, pinned, g_dev, x, n, b, CT_ERR));
  CT_OK(adr_stream_synchronize(b, CT_ERR));
  memcpy(host, pinned, n);
  CT_OK(adr_stream_synchronize(a, CT_ERR));
  g_drv.sim_delay(0);
  unsigned char first = host[0];
  for (size_t i = 1; i < n; i++)
    if (host[i] != first) fail_msg("torn read at byte %zu", i);
  free(host);
  CT_OK(adr_free(g_host, pinned, n, NULL, CT_ERR));
  CT_OK(adr_event_destroy(ev, CT_ERR));
  CT_OK(adr_stream_destroy(a, CT_ERR));
  CT_OK(adr_stream_destroy(b, CT_ERR));
  CT_OK(adr_free(g_dev, junk, n, NULL, CT_ERR));
  CT_OK(adr_free(g_dev, x, n, NULL, CT_ERR));
  return first;
}

static void test_sim_event_orders_two_streams(void** state) {
  (void)state;
  assert_int_equal(ordered_read(true, 0x42), 0x42);
#if defined(__SANITIZE_THREAD__)
  /* The case without the wait is a data race by design (the point is to
   * read before the other stream writes); ThreadSanitizer reports exactly
   * that, so it only runs in builds without it. */
  fprintf(stderr,
          "test_sim_event_orders_two_streams: the no-wait half is not run under "
          "ThreadSanitizer\n");
#else
  /* The same without the wait reads the old contents: the simulator really
   * runs the streams concurrently, so the positive case above means
   * something. */
  assert_int_equal(ordered_read(false, 0x43), 0x11);
#endif
}

static void test_sim_bad_pointers(void** state) {
  (void)state;
  const size_t n = 4 * KIB;
  unsigned char host[8192];
  void* p = NULL;
  CT_OK(adr_alloc_with(g_dev, adr_allocator_backend(), n, 0, NULL, &p, CT_ERR));
  /* Overruns of a known allocation are refused by the core's range check
   * (docs/validation.md) before the driver sees them. */
  CT_FAILS(adr_copy(g_cpu, host, g_dev, p, n + 1, NULL, CT_ERR), EINVAL, "[adr_copy]",
           "runs past the end");
  CT_FAILS(adr_copy(g_cpu, host, g_dev, (char*)p + 16, n, NULL, CT_ERR), EINVAL, "[adr_copy]",
           "runs past the end");
  CT_FAILS(adr_memset(g_dev, (char*)p + 1, 0, n, NULL, CT_ERR), EINVAL, "[adr_memset]",
           "runs past the end");
  if (g_dev1 != NULL) {
    /* Memory of another device where peer access is not enabled. */
    void* p1 = NULL;
    CT_OK(adr_alloc_with(g_dev1, adr_allocator_backend(), n, 0, NULL, &p1, CT_ERR));
    CT_FAILS(adr_memset(g_dev, p1, 0, n, NULL, CT_ERR), EINVAL, "[adr_memset]",
             "CUDA_ERROR_INVALID_VALUE");
    CT_OK(adr_free(g_dev1, p1, n, NULL, CT_ERR));
  }
  CT_OK(adr_free(g_dev, p, n, NULL, CT_ERR));
  /* The driver freed it (backend allocator, no pool in between). */
  CT_FAILS(adr_copy(g_cpu, host, g_dev, p, 16, NULL, CT_ERR), EINVAL, "[adr_copy]",
           "CUDA_ERROR_INVALID_VALUE");
}

static void test_sim_alloc_failure(void** state) {
  (void)state;
  unsigned long long live = g_drv.sim_live_allocations();
  g_drv.sim_alloc_fail(1, 0);
  void* p = NULL;
  CT_FAILS(adr_alloc_with(g_dev, adr_allocator_backend(), 3 * MIB, 0, NULL, &p, CT_ERR), ENOMEM,
           "[adr_alloc", "CUDA_ERROR_OUT_OF_MEMORY");
  CT_FAILS(adr_alloc(g_host, 5 * MIB, 0, NULL, &p, CT_ERR), ENOMEM, "[adr_alloc",
           "CUDA_ERROR_OUT_OF_MEMORY");
  g_drv.sim_alloc_fail(0, 0);
  /* Nothing half-made is left behind (the pool may even have trimmed its
   * cache while handling the failure). */
  assert_true(g_drv.sim_live_allocations() <= live);
  CT_OK(adr_alloc_with(g_dev, adr_allocator_backend(), 3 * MIB, 0, NULL, &p, CT_ERR));
  CT_OK(adr_free(g_dev, p, 3 * MIB, NULL, CT_ERR));
  /* Over the device's memory: the driver's own out-of-memory. */
  CT_FAILS(adr_alloc_with(g_dev, adr_allocator_backend(), (size_t)1 << 40, 0, NULL, &p, CT_ERR),
           ENOMEM, "[adr_alloc", "CUDA_ERROR_OUT_OF_MEMORY");
}

/* Registered with ADR_CUDA_STAGING=2M:16K: pageable copies of 2 MiB and
 * more go through the two pinned staging buffers (no earlier case copies
 * that much pageable memory, so the first one here creates them). */
static void test_sim_staged_pageable(void** state) {
  (void)state;
  const size_t n = 2 * MIB + 123;
  unsigned char* src = malloc(n);
  unsigned char* back = malloc(n);
  ct_fill(src, n, 21);
  void* d = dev_alloc(g_dev, n);
  struct adr_stream* s = NULL;
  CT_OK(adr_stream_create(g_dev, &s, CT_ERR));
  g_drv.sim_delay(200);
  unsigned long long before = g_drv.sim_live_allocations();
  CT_OK(adr_copy(g_dev, d, g_cpu, src, n, s, CT_ERR));
  /* The staged path has consumed the source when the call returns. */
  memset(src, 0, n);
  unsigned long long after = g_drv.sim_live_allocations();
  assert_int_equal(after, before + 2); /* the pinned pair */
  CT_OK(adr_copy(g_cpu, back, g_dev, d, n, s, CT_ERR));
  /* device -> pageable host is complete on return, even on a stream */
  ct_expect(back, n, 21, "staged round trip");
  CT_OK(adr_stream_synchronize(s, CT_ERR));
  g_drv.sim_delay(0);
  assert_int_equal(g_drv.sim_live_allocations(), after); /* staging buffers are reused */
  /* Pinned (registered) memory is not staged: no new pinned buffers. */
  CT_OK(adr_host_register(g_dev, back, n, CT_ERR));
  CT_OK(adr_copy(g_dev, d, g_cpu, back, n, NULL, CT_ERR));
  assert_int_equal(g_drv.sim_live_allocations(), after + 1); /* just the registration */
  CT_OK(adr_host_unregister(g_dev, back, CT_ERR));
  /* Below the threshold: the driver's own path. */
  CT_OK(adr_copy(g_cpu, back, g_dev, d, 1000, NULL, CT_ERR));
  ct_expect(back, 1000, 21, "small pageable copy");
  CT_OK(adr_stream_destroy(s, CT_ERR));
  CT_OK(adr_free(g_dev, d, n, NULL, CT_ERR));
  free(src);
  free(back);
}

int main(void) {
  bool require =
      getenv("ADR_CUDA_TEST_REQUIRE") && strcmp(getenv("ADR_CUDA_TEST_REQUIRE"), "1") == 0;
  struct adr_error err = {{0}};
  if (adr_device_get(ARROW_DEVICE_CUDA, 0, &g_dev, &err) != 0) {
    fprintf(stderr, "test_cuda_interop: no CUDA device: %s\n", err.message);
    return require ? 1 : 77;
  }
  if (adr_device_get(ARROW_DEVICE_CUDA_HOST, 0, &g_host, &err) != 0 ||
      adr_device_get(ARROW_DEVICE_CUDA_MANAGED, 0, &g_managed, &err) != 0 ||
      adr_device_get(ARROW_DEVICE_CPU, 0, &g_cpu, &err) != 0) {
    fprintf(stderr, "test_cuda_interop: %s\n", err.message);
    return 1;
  }
  if (adr_device_get(ARROW_DEVICE_CUDA, 1, &g_dev1, &err) != 0) g_dev1 = NULL;
  if (!ct_driver_open(&g_drv)) {
    fprintf(stderr, "test_cuda_interop: libcuda.so.1 is not loaded in this process\n");
    return 1;
  }
  const struct CMUnitTest common[] = {
      cmocka_unit_test(test_event_export_import),
      cmocka_unit_test(test_stream_import),
      cmocka_unit_test(test_stream_import_default_handles),
      cmocka_unit_test(test_native_handles),
      cmocka_unit_test(test_context_discipline),
      cmocka_unit_test(test_host_memory_is_host_accessible),
      cmocka_unit_test(test_managed_memory_is_host_accessible),
      cmocka_unit_test(test_device_memory_caps),
      cmocka_unit_test(test_pointer_query),
      cmocka_unit_test(test_host_register),
      cmocka_unit_test(test_properties),
      cmocka_unit_test(test_over_aligned),
  };
  int failed = cmocka_run_group_tests_name("cuda interop", common, NULL, NULL);
  bool sim =
      g_drv.sim_delay != NULL && g_drv.sim_alloc_fail != NULL && g_drv.sim_live_allocations != NULL;
  if (!sim) {
    fprintf(stderr,
            "test_cuda_interop: real driver: the simulator-only group (stale data "
            "without a wait, freed/out-of-bounds pointers, allocation failure, staging "
            "counters) does not run\n");
    return failed ? 1 : 0;
  }
  const struct CMUnitTest simulated[] = {
      cmocka_unit_test(test_sim_event_orders_two_streams),
      cmocka_unit_test(test_sim_bad_pointers),
      cmocka_unit_test(test_sim_alloc_failure),
      cmocka_unit_test(test_sim_staged_pageable),
  };
  failed += cmocka_run_group_tests_name("cuda on the simulator", simulated, NULL, NULL);
  return failed ? 1 : 0;
}
