/* SPDX-License-Identifier: Apache-2.0
 *
 * Conformance: device identity and info; host access where advertised.
 */
#include "conformance.h"

void test_device_identity(void** state) {
  (void)state;
  struct adr_device* dev = g_conf.dev;
  ArrowDeviceType type = adr_device_type(dev);
  int64_t id = adr_device_id(dev);

  /* Device objects live for the process: asking again gives the same one. */
  struct adr_device* again = NULL;
  ASSERT_OK(adr_device_get(type, id, &again, CONF_ERR));
  assert_ptr_equal(again, dev);
  struct adr_device* def = NULL;
  ASSERT_OK(adr_device_default(&def, CONF_ERR));
  assert_ptr_equal(def, dev);

  /* "opencl:0": the type's name, a colon, the id. */
  const char* name = adr_device_name(dev);
  const char* type_name = adr_device_type_name(type);
  assert_non_null(name);
  assert_non_null(type_name);
  char expect[96];
  snprintf(expect, sizeof(expect), "%s:%lld", type_name, (long long)id);
  assert_string_equal(name, expect);

  if (g_conf.cpu != NULL) { /* NULL in host mode (ADR_CONFORMANCE_HOST=null) */
    assert_int_equal(adr_device_type(g_conf.cpu), ARROW_DEVICE_CPU);
    assert_int_equal(adr_device_id(g_conf.cpu), 0);
  }
}

void test_device_info(void** state) {
  (void)state;
  struct adr_device_info info;
  memset(&info, 0xEE, sizeof(info));
  info.struct_size = sizeof(info);
  ASSERT_OK(adr_device_info_get(g_conf.dev, &info, CONF_ERR));

  assert_int_equal(info.device_type, adr_device_type(g_conf.dev));
  assert_int_equal(info.device_id, adr_device_id(g_conf.dev));
  /* Every text field is a terminated string; name and backend non-empty. */
  assert_non_null(memchr(info.name, '\0', sizeof(info.name)));
  assert_non_null(memchr(info.vendor, '\0', sizeof(info.vendor)));
  assert_non_null(memchr(info.backend, '\0', sizeof(info.backend)));
  assert_non_null(memchr(info.driver, '\0', sizeof(info.driver)));
  assert_true(info.name[0] != '\0');
  assert_true(info.backend[0] != '\0');
  /* Natural alignment: a power of two, at least Arrow's 64 bytes. */
  assert_true(info.alignment >= ADR_MIN_ALIGNMENT);
  assert_int_equal(info.alignment & (info.alignment - 1), 0);
  if (info.memory_total != 0) assert_true(info.memory_free <= info.memory_total);

  ASSERT_ERR(adr_device_info_get(NULL, &info, CONF_ERR), EINVAL, "adr_device_info_get");
  ASSERT_ERR(adr_device_info_get(g_conf.dev, NULL, CONF_ERR), EINVAL, "adr_device_info_get");
}

/* Only registered when the device advertises ADR_CAP_HOST_ACCESSIBLE: its
 * memory may then be read and written by the host directly, coherently
 * with adr_copy/adr_memset on the NULL stream. */
void test_host_accessible(void** state) {
  (void)state;
  const size_t n = 4097;
  uint8_t* d = conf_dev_alloc(g_conf.dev, n, 0, NULL);
  ASSERT_OK(adr_memset(g_conf.dev, d, 0xAB, n, NULL, CONF_ERR));
  conf_expect_bytes(d, n, 0xAB, "host read after adr_memset");

  conf_fill(d, n, 11);
  uint8_t* h = conf_host_alloc(n);
  conf_download(g_conf.dev, h, d, n);
  conf_expect_pattern(h, n, 11, "adr_copy of host-written device memory");

  conf_fill(h, n, 12);
  conf_upload(g_conf.dev, d, h, n);
  conf_expect_pattern(d, n, 12, "host read after adr_copy to the device");

  conf_dev_free(g_conf.dev, d, n, NULL);
  conf_host_free(h);
}

/* adr_pointer_query names the device that owns any address inside a live
 * allocation: its first byte, a byte in the middle (an Arrow slice), its
 * last byte. */
void test_pointer_query(void** state) {
  (void)state;
  static const size_t sizes[] = {1, 4097, CONF_MIB + 3};
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    size_t n = sizes[i];
    uint8_t* d = conf_dev_alloc(g_conf.dev, n, 0, NULL);
    const uint8_t* probes[] = {d, d + n / 2, d + n - 1};
    for (size_t k = 0; k < 3; k++) {
      struct adr_device* owner = NULL;
      ASSERT_OK(adr_pointer_query(probes[k], &owner, CONF_ERR));
      if (owner != g_conf.dev)
        fail_msg("adr_pointer_query(allocation of %zu bytes + %zu) named %s, expected %s", n,
                 (size_t)(probes[k] - d), owner ? adr_device_name(owner) : "NULL",
                 adr_device_name(g_conf.dev));
    }
    conf_dev_free(g_conf.dev, d, n, NULL);
  }
  struct adr_device* owner = NULL;
  ASSERT_ERR(adr_pointer_query(NULL, &owner, CONF_ERR), EINVAL, "adr_pointer_query");
  uint8_t local = 0;
  ASSERT_ERR(adr_pointer_query(&local, NULL, CONF_ERR), EINVAL, "adr_pointer_query");
}
