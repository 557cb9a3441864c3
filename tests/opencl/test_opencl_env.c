/* SPDX-License-Identifier: Apache-2.0
 *
 * The OpenCL backend when it cannot or must not work, one case per process
 * (the environment is read once): no ICD loader library, an ICD loader
 * that finds no platform, and malformed ADR_OPENCL_* switches. Each must
 * leave the process running, make opencl devices fail with a message that
 * says why, and show in the backend's adr-info state and reason.
 *
 * Usage: test_opencl_env <case>, with the case's environment set by meson.
 */
#include "ocl_test.h"

static const char* which;

/* The opencl backend's row of adr-info. */
static struct adr_backend_info opencl_backend(void) {
  struct adr_backend_info info = {.struct_size = sizeof(info)};
  ASSERT_ADR(adr_backends_load_all(OCL_ERR));
  size_t n = adr_backend_count();
  for (size_t i = 0; i < n; i++) {
    ASSERT_ADR(adr_backend_info_get(i, &info, OCL_ERR));
    if (strcmp(info.name, "opencl") == 0) return info;
  }
  fail_msg("no backend named opencl among %zu", n);
  return info;
}

static void expect(int state, const char* reason, const char* device_message) {
  struct adr_device* dev = NULL;
  ASSERT_ADR_ERR(adr_device_get(ARROW_DEVICE_OPENCL, 0, &dev, OCL_ERR), ENODEV, device_message);
  struct adr_backend_info info = opencl_backend();
  if (info.state != state)
    fail_msg("backend state %d, expected %d (reason: %s)", info.state, state, info.reason);
  if (strstr(info.reason, reason) == NULL)
    fail_msg("reason \"%s\" lacks \"%s\"", info.reason, reason);
  /* The rest of adr goes on working. */
  struct adr_device* cpu = NULL;
  ASSERT_ADR(adr_device_get(ARROW_DEVICE_CPU, 0, &cpu, OCL_ERR));
  void* p = NULL;
  ASSERT_ADR(adr_alloc(cpu, 128, 0, NULL, &p, OCL_ERR));
  ASSERT_ADR(adr_free(cpu, p, 128, NULL, OCL_ERR));
}

static void test_case(void** state) {
  (void)state;
  if (strcmp(which, "no-library") == 0) {
    expect(ADR_BACKEND_UNAVAILABLE,
           "unavailable: /nonexistent/libOpenCL.so.1 not found (tried: "
           "/nonexistent/libOpenCL.so.1",
           "libOpenCL.so.1 not found");
  } else if (strcmp(which, "no-platform") == 0) {
    expect(ADR_BACKEND_UNAVAILABLE, "unavailable: the ICD loader found no OpenCL platform",
           "no OpenCL platform");
  } else if (strcmp(which, "bad-memory") == 0) {
    expect(ADR_BACKEND_REJECTED,
           "ADR_OPENCL_MEMORY=\"fastest\": column 1: expected auto, svm, "
           "svm-fine, svm-coarse or buffer, found 'f'",
           "ADR_OPENCL_MEMORY");
  } else if (strcmp(which, "bad-host-copy") == 0) {
    expect(ADR_BACKEND_REJECTED,
           "ADR_OPENCL_HOST_COPY=\"yes\": column 1: expected 0 or 1, found 'y'",
           "ADR_OPENCL_HOST_COPY");
  } else {
    fail_msg("unknown case '%s'", which);
  }
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s no-library|no-platform|bad-memory|bad-host-copy\n", argv[0]);
    return 1;
  }
  which = argv[1];
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_case),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
