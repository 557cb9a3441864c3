/* SPDX-License-Identifier: Apache-2.0
 *
 * The HIP backend against the REAL HIP runtime (Debian libamdhip64) on a
 * machine without an AMD GPU: the backend must load the runtime, report
 * itself unavailable with the runtime's own error (hipErrorNoDevice) and
 * never crash. Also the runtime-missing and not-a-HIP-library paths.
 *
 * One binary, one case per process (the environment is read once):
 *   test_hip_runtime real      the installed runtime, no device
 *   test_hip_runtime missing   ADR_HIP_LIBRARY names a file that is absent
 *   test_hip_runtime bogus     ADR_HIP_LIBRARY names a library that is not HIP
 *   test_hip_runtime excluded  ADR_BACKENDS=!hip: the runtime is never opened
 *
 * Exit 77 (skip) for "real" when no HIP runtime is installed or when an
 * AMD GPU is present (then the no-device path cannot happen here; the gpu
 * suite covers the hardware).
 */
/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <adr/adr.h>
#include <adr/hip.h>

static double g_load_ms; /* first adr_device_get(hip:0), which loads the runtime */

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Whether a file whose name contains `needle` is mapped into the process. */
static bool mapped(const char* needle) {
  FILE* f = fopen("/proc/self/maps", "r");
  if (f == NULL) return false;
  char line[4096];
  bool found = false;
  while (!found && fgets(line, sizeof(line), f) != NULL) found = strstr(line, needle) != NULL;
  fclose(f);
  return found;
}

static void find_hip_backend(struct adr_backend_info* out) {
  struct adr_error err = {{0}};
  assert_int_equal(adr_backends_load_all(&err), 0);
  size_t n = adr_backend_count();
  for (size_t i = 0; i < n; i++) {
    memset(out, 0, sizeof(*out));
    out->struct_size = sizeof(*out);
    assert_int_equal(adr_backend_info_get(i, out, &err), 0);
    if (strcmp(out->name, "hip") == 0) return;
  }
  fail_msg("no backend named hip among %zu", n);
}

/* The device_get message and the backend's recorded reason both carry the
 * runtime's error. */
static void test_real_runtime_no_device(void** state) {
  (void)state;
  struct adr_error err = {{0}};
  struct adr_device* dev = NULL;
  fprintf(stderr, "test_hip_runtime: loading the real HIP runtime and initialising took %.1f ms\n",
          g_load_ms);
  int st = adr_device_get(ARROW_DEVICE_ROCM, 0, &dev, &err);
  assert_int_equal(st, ENODEV);
  assert_null(dev);
  assert_non_null(strstr(err.message, "hipErrorNoDevice"));
  /* The backend writes "NAME: description" only; the core adds the tags. */
  assert_null(strstr(err.message, "[init]"));
  assert_non_null(strstr(err.message, "unavailable"));
  /* The real runtime was opened, not merely looked for. */
  assert_true(mapped("libamdhip64"));

  struct adr_backend_info info;
  find_hip_backend(&info);
  assert_int_equal(info.state, ADR_BACKEND_UNAVAILABLE);
  assert_non_null(strstr(info.reason, "hipErrorNoDevice"));
  assert_non_null(strstr(info.reason, "HIP runtime"));
  assert_non_null(strstr(info.reason, "libamdhip64"));

  /* The pinned-host type goes the same way, with the same reason. */
  struct adr_error err2 = {{0}};
  assert_int_equal(adr_device_get(ARROW_DEVICE_ROCM_HOST, 0, &dev, &err2), ENODEV);
  assert_non_null(strstr(err2.message, "hipErrorNoDevice"));

  /* The rest of the library is unaffected: the CPU still works and the
   * enumeration counts no HIP device. */
  size_t count = 0;
  assert_int_equal(adr_device_count(&count, &err), 0);
  for (size_t i = 0; i < count; i++) {
    struct adr_device* d = NULL;
    assert_int_equal(adr_device_at(i, &d, &err), 0);
    assert_int_not_equal(adr_device_type(d), ARROW_DEVICE_ROCM);
    assert_int_not_equal(adr_device_type(d), ARROW_DEVICE_ROCM_HOST);
  }
  struct adr_device* cpu = NULL;
  assert_int_equal(adr_device_get(ARROW_DEVICE_CPU, 0, &cpu, &err), 0);
  void* p = NULL;
  assert_int_equal(adr_alloc(cpu, 4096, 0, NULL, &p, &err), 0);
  assert_int_equal(adr_free(cpu, p, 4096, NULL, &err), 0);

  /* Asking again gives the same answer without reloading anything. */
  struct adr_error err3 = {{0}};
  assert_int_equal(adr_device_get(ARROW_DEVICE_ROCM, 0, &dev, &err3), ENODEV);
  assert_string_equal(err3.message, err.message);
  assert_int_equal(adr_device_get(ARROW_DEVICE_ROCM, 1, &dev, &err3), ENODEV);
  assert_non_null(strstr(err3.message, "hipErrorNoDevice"));
}

static void test_runtime_missing(void** state) {
  (void)state;
  struct adr_error err = {{0}};
  struct adr_device* dev = NULL;
  assert_int_equal(adr_device_get(ARROW_DEVICE_ROCM, 0, &dev, &err), ENODEV);
  assert_non_null(strstr(err.message, "unavailable: /nonexistent/libamdhip64.so.6 not found"));
  assert_non_null(strstr(err.message, "tried: /nonexistent/libamdhip64.so.6"));
  assert_non_null(strstr(err.message, ADR_HIP_LIBRARY_ENV));
  struct adr_backend_info info;
  find_hip_backend(&info);
  assert_int_equal(info.state, ADR_BACKEND_UNAVAILABLE);
  assert_false(mapped("libamdhip64"));
}

static void test_not_a_hip_library(void** state) {
  (void)state;
  struct adr_error err = {{0}};
  struct adr_device* dev = NULL;
  assert_int_equal(adr_device_get(ARROW_DEVICE_ROCM, 0, &dev, &err), ENODEV);
  struct adr_backend_info info;
  find_hip_backend(&info);
  /* A library without the HIP entry points is a rejection, not "no
   * device", and says which symbol is missing. */
  assert_int_equal(info.state, ADR_BACKEND_REJECTED);
  assert_non_null(strstr(info.reason, "lacks the required symbol hipInit"));
  assert_non_null(strstr(info.reason, "ENOTSUP"));
}

static void test_excluded(void** state) {
  (void)state;
  struct adr_error err = {{0}};
  struct adr_device* dev = NULL;
  assert_int_equal(adr_device_get(ARROW_DEVICE_ROCM, 0, &dev, &err), ENODEV);
  assert_non_null(strstr(err.message, "excluded"));
  struct adr_backend_info info;
  find_hip_backend(&info);
  assert_int_equal(info.state, ADR_BACKEND_EXCLUDED);
  assert_false(mapped("libamdhip64"));
  assert_false(mapped("libadr_hip"));
}

/* The first request loads the backend and, through it, the runtime: its
 * outcome says whether there is anything to test here. */
static int real_runtime_state(char* why, size_t cap) {
  struct adr_error err = {{0}};
  struct adr_device* dev = NULL;
  double t0 = now_s();
  int st = adr_device_get(ARROW_DEVICE_ROCM, 0, &dev, &err);
  g_load_ms = (now_s() - t0) * 1e3;
  if (st == 0) {
    snprintf(why, cap,
             "a HIP device exists (%s); the no-device path needs a machine without one (the gpu "
             "suite covers hardware)",
             adr_device_name(dev));
    return 77;
  }
  if (strstr(err.message, "not found (tried") != NULL) {
    snprintf(why, cap, "no HIP runtime installed: %s", err.message);
    return 77;
  }
  return 0;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "real";
  if (strcmp(mode, "real") == 0) {
    char why[1400];
    if (real_runtime_state(why, sizeof(why)) == 77) {
      printf("test_hip_runtime: skipping: %s\n", why);
      return 77;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_real_runtime_no_device)};
    return cmocka_run_group_tests_name("hip-real-runtime", tests, NULL, NULL);
  }
  if (strcmp(mode, "missing") == 0) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_runtime_missing)};
    return cmocka_run_group_tests_name("hip-runtime-missing", tests, NULL, NULL);
  }
  if (strcmp(mode, "bogus") == 0) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_not_a_hip_library)};
    return cmocka_run_group_tests_name("hip-not-a-runtime", tests, NULL, NULL);
  }
  if (strcmp(mode, "excluded") == 0) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_excluded)};
    return cmocka_run_group_tests_name("hip-excluded", tests, NULL, NULL);
  }
  fprintf(stderr, "usage: %s real|missing|bogus|excluded\n", argv[0]);
  return 2;
}
