/* SPDX-License-Identifier: Apache-2.0
 *
 * The registry through the public API, with the in-tree CPU backend:
 * lookup, identity of device objects, enumeration, info versioning,
 * backend states and errors for devices that do not exist.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "adr/adr.h"

static void test_cpu_device(void** state) {
  (void)state;
  struct adr_device *a = NULL, *b = NULL;
  assert_int_equal(adr_init(NULL), 0);
  assert_int_equal(adr_device_get(ARROW_DEVICE_CPU, 0, &a, NULL), 0);
  assert_int_equal(adr_device_get(ARROW_DEVICE_CPU, 0, &b, NULL), 0);
  assert_ptr_equal(a, b); /* one object per (type, id) */
  assert_int_equal(adr_device_type(a), ARROW_DEVICE_CPU);
  assert_int_equal(adr_device_id(a), 0);
  assert_string_equal(adr_device_name(a), "cpu:0");
  struct adr_device* def = NULL;
  assert_int_equal(adr_device_default(&def, NULL), 0); /* ADR_DEVICE unset: CPU */
  assert_ptr_equal(def, a);
  assert_non_null(adr_stream_default(a));
  assert_ptr_equal(adr_stream_device(adr_stream_default(a)), a);
}

static void test_unknown_devices(void** state) {
  (void)state;
  struct adr_device* d = NULL;
  struct adr_error err = {{0}};
  assert_int_equal(adr_device_get(ARROW_DEVICE_CPU, 1, &d, &err), ENODEV);
  assert_string_equal(err.message,
                      "[adr_device_get][cpu] no device cpu:1 (the backend has 1 device of this type)");
  assert_int_equal(adr_device_get(ARROW_DEVICE_CPU, -1, &d, &err), ENODEV);
  assert_int_equal(adr_device_get(5, 0, &d, &err), ENODEV);
  assert_non_null(strstr(err.message, "no backend serves device type 5"));
  assert_int_equal(adr_device_get(ARROW_DEVICE_CUDA, 0, &d, &err), ENODEV);
  assert_non_null(strstr(err.message, "backend 'cuda' is"));
  assert_int_equal(adr_device_get(ARROW_DEVICE_CPU, 0, NULL, &err), EINVAL);
  assert_int_equal(adr_device_get(9999, 0, &d, &err), ENODEV);
  assert_non_null(strstr(err.message, "unknown device type 9999"));
}

static void test_info_versioning(void** state) {
  (void)state;
  struct adr_device* cpu = NULL;
  assert_int_equal(adr_device_get(ARROW_DEVICE_CPU, 0, &cpu, NULL), 0);
  struct adr_device_info info;
  memset(&info, 0xff, sizeof(info));
  info.struct_size = sizeof(info);
  assert_int_equal(adr_device_info_get(cpu, &info, NULL), 0);
  assert_int_equal(info.struct_size, sizeof(info));
  assert_string_equal(info.backend, "cpu");
  assert_int_equal(info.device_type, ARROW_DEVICE_CPU);
  assert_true(info.memory_total > 0);
  assert_true(info.caps & ADR_CAP_HOST_ACCESSIBLE);
  assert_int_equal(info.reserved[0], 0);
  struct adr_error err = {{0}};
  info.struct_size = 8;
  assert_int_equal(adr_device_info_get(cpu, &info, &err), EINVAL);
  assert_non_null(strstr(err.message, "struct_size 8 is too small"));
}

static void test_enumeration(void** state) {
  (void)state;
  size_t n = 0;
  assert_int_equal(adr_device_count(&n, NULL), 0);
  assert_true(n >= 1);
  struct adr_device *first = NULL, *cpu = NULL;
  assert_int_equal(adr_device_at(0, &first, NULL), 0);
  assert_int_equal(adr_device_get(ARROW_DEVICE_CPU, 0, &cpu, NULL), 0);
  assert_ptr_equal(first, cpu); /* the CPU backend comes first */
  size_t nb = adr_backend_count();
  assert_true(nb >= 5); /* the manifest: cpu cuda hip opencl vulkan */
  struct adr_backend_info bi = {.struct_size = sizeof(bi)};
  assert_int_equal(adr_backend_info_get(0, &bi, NULL), 0);
  assert_string_equal(bi.name, "cpu");
  assert_int_equal(bi.state, ADR_BACKEND_LOADED);
  assert_int_equal(bi.device_count, 1);
  assert_non_null(strstr(bi.path, "libadr_cpu.so"));
  struct adr_error err = {{0}};
  assert_int_equal(adr_backend_info_get(nb, &bi, &err), ENOENT);
}

static void* concurrent_get(void* arg) {
  struct adr_device* d = NULL;
  for (int i = 0; i < 1000; i++)
    if (adr_device_get(ARROW_DEVICE_CPU, 0, &d, NULL) != 0 || d != arg) return (void*)1;
  return NULL;
}

static void test_concurrent_lookup(void** state) {
  (void)state;
  struct adr_device* cpu = NULL;
  assert_int_equal(adr_device_get(ARROW_DEVICE_CPU, 0, &cpu, NULL), 0);
  pthread_t th[4];
  for (int i = 0; i < 4; i++) assert_int_equal(pthread_create(&th[i], NULL, concurrent_get, cpu), 0);
  for (int i = 0; i < 4; i++) {
    void* rv = (void*)1;
    pthread_join(th[i], &rv);
    assert_null(rv);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cpu_device),     cmocka_unit_test(test_unknown_devices),
      cmocka_unit_test(test_info_versioning), cmocka_unit_test(test_enumeration),
      cmocka_unit_test(test_concurrent_lookup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
