/* SPDX-License-Identifier: Apache-2.0
 *
 * The CUDA backend without a usable driver: no libcuda.so.1, the toolkit's
 * stub library, a driver older than the pinned API version, a driver with
 * no device. Each must leave the backend "unavailable" with the exact
 * reason (adr-info shows it), make adr_device_get fail with ENODEV and that
 * reason, and leave the rest of adr working.
 *
 * ADR_CUDA_TEST_EXPECT names a substring the reason must contain; each
 * meson registration sets it with the environment that causes it. With
 * ADR_CUDA_TEST_REJECTED=1 the backend must instead be "rejected" (a
 * configuration error such as a malformed ADR_CUDA_STAGING, not a missing
 * driver). The no-driver registration exits 77 on a machine that has a real
 * driver.
 */
#include "cuda_test.h"

static const char* g_expect;
static bool g_rejected;

static void test_backend_reports_unavailable(void** state) {
  (void)state;
  struct adr_device* dev = NULL;
  struct adr_error err = {{0}};
  assert_int_equal(adr_device_get(ARROW_DEVICE_CUDA, 0, &dev, &err), ENODEV);
  assert_null(dev);
  if (strstr(err.message, g_expect) == NULL)
    fail_msg("adr_device_get: message lacks \"%s\": %s", g_expect, err.message);
  if (!g_rejected) assert_non_null(strstr(err.message, "unavailable: "));
  /* The backend writes "NAME: description" only; the core adds the tags. */
  assert_null(strstr(err.message, "[init]"));
  /* The other memory kinds of the backend go the same way. */
  CT_FAILS(adr_device_get(ARROW_DEVICE_CUDA_HOST, 0, &dev, CT_ERR), ENODEV, g_expect, NULL);
  CT_FAILS(adr_device_get(ARROW_DEVICE_CUDA_MANAGED, 0, &dev, CT_ERR), ENODEV, g_expect, NULL);

  /* adr-info's view: the backend is listed as unavailable with the reason. */
  CT_OK(adr_backends_load_all(CT_ERR));
  bool found = false;
  for (size_t i = 0; i < adr_backend_count(); i++) {
    struct adr_backend_info info = {.struct_size = sizeof(info)};
    CT_OK(adr_backend_info_get(i, &info, CT_ERR));
    if (strcmp(info.name, "cuda") != 0) continue;
    found = true;
    assert_int_equal(info.state, g_rejected ? ADR_BACKEND_REJECTED : ADR_BACKEND_UNAVAILABLE);
    if (strstr(info.reason, g_expect) == NULL)
      fail_msg("backend reason lacks \"%s\": %s", g_expect, info.reason);
    assert_true(info.path[0] != '\0'); /* libadr_cuda.so itself was found */
  }
  assert_true(found);
}

static void test_process_goes_on(void** state) {
  (void)state;
  struct adr_device* cpu = NULL;
  CT_OK(adr_device_get(ARROW_DEVICE_CPU, 0, &cpu, CT_ERR));
  void* p = NULL;
  CT_OK(adr_alloc(cpu, 4096, 0, NULL, &p, CT_ERR));
  CT_OK(adr_memset(cpu, p, 7, 4096, NULL, CT_ERR));
  ct_expect_bytes(p, 4096, 7, "cpu memory after a failed CUDA load");
  CT_OK(adr_free(cpu, p, 4096, NULL, CT_ERR));
  size_t n = 0;
  CT_OK(adr_device_count(&n, CT_ERR));
  assert_true(n >= 1);
  for (size_t i = 0; i < n; i++) {
    struct adr_device* d = NULL;
    CT_OK(adr_device_at(i, &d, CT_ERR));
    ArrowDeviceType t = adr_device_type(d);
    assert_true(t != ARROW_DEVICE_CUDA && t != ARROW_DEVICE_CUDA_HOST &&
                t != ARROW_DEVICE_CUDA_MANAGED);
  }
}

int main(void) {
  g_expect = getenv("ADR_CUDA_TEST_EXPECT");
  if (g_expect == NULL || g_expect[0] == '\0') {
    fprintf(stderr, "test_cuda_unavailable: set ADR_CUDA_TEST_EXPECT\n");
    return 1;
  }
  const char* rejected = getenv("ADR_CUDA_TEST_REJECTED");
  g_rejected = rejected != NULL && strcmp(rejected, "1") == 0;
  const char* no_driver = getenv("ADR_CUDA_TEST_NO_DRIVER");
  if (no_driver != NULL && strcmp(no_driver, "1") == 0) {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib != NULL) {
      fprintf(stderr,
              "test_cuda_unavailable: this machine has libcuda.so.1; the no-driver "
              "case cannot be tested here\n");
      dlclose(lib);
      return 77;
    }
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_backend_reports_unavailable),
      cmocka_unit_test(test_process_goes_on),
  };
  return cmocka_run_group_tests_name("cuda unavailable", tests, NULL, NULL) ? 1 : 0;
}
