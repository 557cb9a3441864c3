/* SPDX-License-Identifier: Apache-2.0
 *
 * Lazy devices, from the application's side (docs/devices.md, "Opening on
 * first use"):
 *
 *   test_lazy_open BACKEND open      enumeration, info, properties and
 *                                    ADR_DEVICE resolution open nothing;
 *                                    the first use, from 8 threads at once,
 *                                    opens the device exactly once; (sim
 *                                    backends) a failed opening is reported
 *                                    to the first use and repeated.
 *   test_lazy_open BACKEND selector  ADR_DEVICE (set by meson to a selector
 *                                    naming BACKEND) loads only that backend:
 *                                    no other adr backend module and no
 *                                    other vendor library is mapped.
 *
 * BACKEND is opencl, vulkan, cuda or hip (the last two on the driver
 * simulators, whose counters say how many contexts / streams were made).
 * What "not opened" means per backend is a device property (opencl
 * "context", vulkan "logical_device", cuda "context", hip
 * "default_stream") and, on the simulators, the driver's own count.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "adr/adr.h"

static const char* backend;
static ArrowDeviceType type;
static const char* state_key;
static int native_kind;

struct find {
  const char* key;
  char value[256];
  int found;
};

static void find_property(void* ctx, const char* key, const char* value) {
  struct find* f = ctx;
  if (strcmp(key, f->key) == 0) {
    snprintf(f->value, sizeof(f->value), "%s", value);
    f->found++;
  }
}

/* The backend's own word on whether the device is open. */
static int device_opened(struct adr_device* dev) {
  struct find f = {.key = state_key};
  struct adr_error e = {{0}};
  int st = adr_device_properties(dev, find_property, &f, &e);
  if (st != 0) fail_msg("adr_device_properties: %s", e.message);
  if (f.found != 1) fail_msg("property '%s' listed %d times", state_key, f.found);
  if (strncmp(f.value, "not", 3) == 0) return 0;
  if (strstr(f.value, "not retained") != NULL) return 0;
  return 1;
}

/* Driver counters on the simulators: primary contexts retained (CUDA),
 * streams created (HIP); -1 where there is none (OpenCL, Vulkan). */
static int driver_opens(int ordinal) {
  if (strcmp(backend, "cuda") == 0) {
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (h == NULL) fail_msg("libcuda.so.1 is not loaded");
    int (*refs)(int) = (int (*)(int))dlsym(h, "adr_sim_cuda_context_refs");
    if (refs == NULL) fail_msg("libcuda.so.1 is not the simulator");
    int n = refs(ordinal);
    dlclose(h);
    return n;
  }
  if (strcmp(backend, "hip") == 0) {
    void* h = dlopen("libamdhip64.so", RTLD_NOW | RTLD_NOLOAD);
    if (h == NULL) h = dlopen("libamdhip64.so.6", RTLD_NOW | RTLD_NOLOAD);
    if (h == NULL) fail_msg("libamdhip64 is not loaded");
    int (*calls)(const char*) = (int (*)(const char*))dlsym(h, "adr_sim_hip_calls");
    if (calls == NULL) fail_msg("libamdhip64 is not the simulator");
    int n = calls("hipStreamCreateWithFlags");
    dlclose(h);
    return n;
  }
  return -1;
}

static void sim_fail_next(const char* entry) {
  const char* lib = strcmp(backend, "cuda") == 0 ? "libcuda.so.1" : "libamdhip64.so";
  void* h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
  if (h == NULL && strcmp(backend, "hip") == 0)
    h = dlopen("libamdhip64.so.6", RTLD_NOW | RTLD_NOLOAD);
  if (h == NULL) fail_msg("%s is not loaded", lib);
  void (*fail_next)(const char*, int) = (void (*)(const char*, int))dlsym(
      h, strcmp(backend, "cuda") == 0 ? "adr_sim_cuda_fail_next" : "adr_sim_hip_fail_next");
  if (fail_next == NULL) fail_msg("%s is not the simulator", lib);
  fail_next(entry, 2); /* CUDA_ERROR_OUT_OF_MEMORY / hipErrorOutOfMemory */
  dlclose(h);
}

/* Case 1: listing every device with its info and properties, and resolving
 * ADR_DEVICE (BACKEND:* in this test's environment), opens nothing. */
static void test_enumeration_opens_nothing(void** state) {
  (void)state;
  struct adr_error e = {{0}};
  size_t n = 0;
  assert_int_equal(adr_device_count(&n, &e), 0);
  size_t mine = 0;
  for (size_t i = 0; i < n; i++) {
    struct adr_device* dev = NULL;
    assert_int_equal(adr_device_at(i, &dev, &e), 0);
    struct adr_device_info info;
    memset(&info, 0, sizeof(info));
    info.struct_size = sizeof(info);
    assert_int_equal(adr_device_info_get(dev, &info, &e), 0);
    if (adr_device_type(dev) != type) continue;
    mine++;
    assert_true(info.name[0] != '\0');
    if (device_opened(dev)) fail_msg("%s was opened by enumeration", adr_device_name(dev));
  }
  if (mine == 0) fail_msg("no %s device was enumerated", backend);
  struct adr_device* def = NULL;
  if (adr_device_default(&def, &e) != 0) fail_msg("adr_device_default: %s", e.message);
  assert_int_equal(adr_device_type(def), type);
  if (device_opened(def)) fail_msg("resolving ADR_DEVICE opened %s", adr_device_name(def));
  int opens = driver_opens(0);
  if (opens > 0) fail_msg("the driver counted %d opening(s) during enumeration", opens);
}

#define THREADS 8

struct worker {
  pthread_barrier_t* barrier;
  struct adr_device* dev;
  void* handle;
  int status;
  char message[sizeof(((struct adr_error*)0)->message)];
};

static void* first_use(void* arg) {
  struct worker* w = arg;
  struct adr_error e = {{0}};
  pthread_barrier_wait(w->barrier);
  void* p = NULL;
  w->status = adr_alloc(w->dev, 4096, 0, NULL, &p, &e);
  if (w->status == 0) w->status = adr_memset(w->dev, p, 0x5a, 4096, NULL, &e);
  if (w->status == 0) w->status = adr_free(w->dev, p, 4096, NULL, &e);
  if (w->status == 0) w->status = adr_device_native(w->dev, native_kind, &w->handle, &e);
  if (w->status != 0) snprintf(w->message, sizeof(w->message), "%s", e.message);
  return NULL;
}

/* Case 2: eight threads make the first use of one device at the same time:
 * every one succeeds, they all see the same native handle, and the driver
 * opened the device once. */
static void test_first_use_opens_once(void** state) {
  (void)state;
  struct adr_error e = {{0}};
  struct adr_device* dev = NULL;
  assert_int_equal(adr_device_get(type, 0, &dev, &e), 0);
  assert_int_equal(device_opened(dev), 0);
  int before = driver_opens(0);
  pthread_barrier_t barrier;
  pthread_barrier_init(&barrier, NULL, THREADS);
  pthread_t th[THREADS];
  struct worker w[THREADS];
  for (int i = 0; i < THREADS; i++) {
    memset(&w[i], 0, sizeof(w[i]));
    w[i].barrier = &barrier;
    w[i].dev = dev;
    assert_int_equal(pthread_create(&th[i], NULL, first_use, &w[i]), 0);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&barrier);
  for (int i = 0; i < THREADS; i++) {
    if (w[i].status != 0) fail_msg("thread %d: status %d: %s", i, w[i].status, w[i].message);
    assert_non_null(w[i].handle);
    assert_ptr_equal(w[i].handle, w[0].handle);
  }
  assert_int_equal(device_opened(dev), 1);
  if (before >= 0) assert_int_equal(driver_opens(0) - before, 1);
  /* Using it again opens nothing more. */
  void* again = NULL;
  assert_int_equal(adr_device_native(dev, native_kind, &again, &e), 0);
  assert_ptr_equal(again, w[0].handle);
  if (before >= 0) assert_int_equal(driver_opens(0) - before, 1);
}

/* Case 3 (simulators): the driver refuses the opening; the first use gets
 * the status with the driver's message, and a later use the same again. */
static void test_first_use_error(void** state) {
  (void)state;
  struct adr_error e = {{0}};
  struct adr_device* dev = NULL;
  assert_int_equal(adr_device_get(type, 1, &dev, &e), 0);
  assert_int_equal(device_opened(dev), 0);
  int cuda = strcmp(backend, "cuda") == 0;
  sim_fail_next(cuda ? "cuDevicePrimaryCtxRetain" : "hipStreamCreateWithFlags");
  void* p = NULL;
  int st = adr_alloc(dev, 4096, 0, NULL, &p, &e);
  assert_int_not_equal(st, 0);
  const char* want =
      cuda ? "cannot retain the primary context" : "cannot create the default stream";
  if (strstr(e.message, want) == NULL || strstr(e.message, "[adr_alloc]") == NULL)
    fail_msg("message \"%s\" lacks \"[adr_alloc]\" or \"%s\"", e.message, want);
  struct adr_error e2 = {{0}};
  void* h = NULL;
  assert_int_equal(adr_device_native(dev, native_kind, &h, &e2), st);
  if (strstr(e2.message, want) == NULL) fail_msg("second use: \"%s\"", e2.message);
  assert_int_equal(device_opened(dev), 0);
}

/* The selector case: only the named backend is loaded. */
static int maps_contain(const char* needle) {
  FILE* f = fopen("/proc/self/maps", "r");
  if (f == NULL) fail_msg("cannot read /proc/self/maps");
  char line[4096];
  int found = 0;
  while (!found && fgets(line, sizeof(line), f) != NULL) found = strstr(line, needle) != NULL;
  fclose(f);
  return found;
}

static void test_selector_loads_only_named(void** state) {
  (void)state;
  struct adr_error e = {{0}};
  struct adr_device* dev = NULL;
  if (adr_device_default(&dev, &e) != 0) fail_msg("adr_device_default: %s", e.message);
  assert_int_equal(adr_device_type(dev), type);
  char mine[64];
  snprintf(mine, sizeof(mine), "libadr_%s.so", backend);
  if (!maps_contain(mine)) fail_msg("%s is not mapped", mine);
  const char* others[] = {"libadr_opencl.so", "libadr_vulkan.so", "libadr_cuda.so",
                          "libadr_hip.so",    "libOpenCL.so",     "libvulkan.so",
                          "libcuda.so",       "libamdhip64.so"};
  const char* own_vendor = strcmp(backend, "opencl") == 0   ? "libOpenCL.so"
                           : strcmp(backend, "vulkan") == 0 ? "libvulkan.so"
                           : strcmp(backend, "cuda") == 0   ? "libcuda.so"
                                                            : "libamdhip64.so";
  for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
    if (strcmp(others[i], mine) == 0 || strcmp(others[i], own_vendor) == 0) continue;
    if (maps_contain(others[i]))
      fail_msg("ADR_DEVICE=%s loaded %s", getenv("ADR_DEVICE"), others[i]);
  }
  assert_int_equal(device_opened(dev), 0);
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s opencl|vulkan|cuda|hip open|selector\n", argv[0]);
    return 2;
  }
  backend = argv[1];
  if (strcmp(backend, "opencl") == 0) {
    type = ARROW_DEVICE_OPENCL, state_key = "context", native_kind = ADR_NATIVE_CONTEXT;
  } else if (strcmp(backend, "vulkan") == 0) {
    type = ARROW_DEVICE_VULKAN, state_key = "logical_device", native_kind = ADR_NATIVE_CONTEXT;
  } else if (strcmp(backend, "cuda") == 0) {
    type = ARROW_DEVICE_CUDA, state_key = "context", native_kind = ADR_NATIVE_CONTEXT;
  } else if (strcmp(backend, "hip") == 0) {
    type = ARROW_DEVICE_ROCM, state_key = "default_stream", native_kind = ADR_NATIVE_QUEUE;
  } else {
    fprintf(stderr, "unknown backend '%s'\n", backend);
    return 2;
  }
  if (strcmp(argv[2], "selector") == 0) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_selector_loads_only_named)};
    return cmocka_run_group_tests(tests, NULL, NULL);
  }
  if (strcmp(argv[2], "open") != 0) {
    fprintf(stderr, "unknown case group '%s'\n", argv[2]);
    return 2;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_enumeration_opens_nothing),
      cmocka_unit_test(test_first_use_opens_once),
      cmocka_unit_test(test_first_use_error),
  };
  /* OpenCL and Vulkan have no driver hook to refuse an opening with. */
  size_t count = type == ARROW_DEVICE_CUDA || type == ARROW_DEVICE_ROCM ? 3 : 2;
  return _cmocka_run_group_tests("lazy", tests, count, NULL, NULL);
}
