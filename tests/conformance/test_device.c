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

/* Kind, identity and selection (issue 14): the device's identity fields
 * are consistent, and the selector spellings that name it find it: its
 * "type:id", "type:*" and "*" enumerations, its kind, its UUID (when it
 * has one). adr_device_same_physical is reflexive and agrees with the
 * identity fields; bad arguments are EINVAL with the operation named. */
static const char* kind_selector(uint32_t kind) {
  switch (kind) {
    case ADR_DEVICE_KIND_GPU:
      return "dgpu";
    case ADR_DEVICE_KIND_INTEGRATED_GPU:
      return "igpu";
    case ADR_DEVICE_KIND_CPU:
      return "cpu";
    case ADR_DEVICE_KIND_ACCELERATOR:
      return "accelerator";
    default:
      return "other";
  }
}

static bool enumerate_has(const char* selector, struct adr_device* dev) {
  struct adr_device* list[64];
  size_t n = 0;
  ASSERT_OK(adr_device_enumerate(selector, list, 64, &n, CONF_ERR));
  for (size_t i = 0; i < n && i < 64; i++)
    if (list[i] == dev) return true;
  return false;
}

void test_device_selection(void** state) {
  (void)state;
  struct adr_device* dev = g_conf.dev;
  struct adr_device_info info;
  memset(&info, 0xEE, sizeof(info));
  info.struct_size = sizeof(info);
  ASSERT_OK(adr_device_info_get(dev, &info, CONF_ERR));
  assert_true(info.kind >= ADR_DEVICE_KIND_GPU && info.kind <= ADR_DEVICE_KIND_OTHER);
  assert_int_equal(info.identity & ~(unsigned)(ADR_DEVICE_HAS_UUID | ADR_DEVICE_HAS_PCI_BUS_ID), 0);
  static const uint8_t zero[16];
  if (info.identity & ADR_DEVICE_HAS_UUID)
    assert_memory_not_equal(info.uuid, zero, 16);
  else
    assert_memory_equal(info.uuid, zero, 16);
  if (!(info.identity & ADR_DEVICE_HAS_PCI_BUS_ID)) {
    assert_int_equal(info.pci_domain, 0);
    assert_int_equal(info.pci_bus | info.pci_device | info.pci_function, 0);
  }
  assert_true(info.pci_device < 32 && info.pci_function < 8);
  for (size_t i = 0; i < sizeof(info.reserved) / sizeof(info.reserved[0]); i++)
    assert_int_equal(info.reserved[i], 0);
  /* What a CPU device is on every backend. */
  if (adr_device_type(dev) == ARROW_DEVICE_CPU) assert_int_equal(info.kind, ADR_DEVICE_KIND_CPU);

  const char* type = adr_device_type_name(adr_device_type(dev));
  char sel[160];
  struct adr_device* got = NULL;
  ASSERT_OK(adr_device_select(adr_device_name(dev), &got, CONF_ERR));
  assert_ptr_equal(got, dev);
  snprintf(sel, sizeof(sel), "%s:*", type);
  assert_true(enumerate_has(sel, dev));
  assert_true(enumerate_has("*", dev));
  snprintf(sel, sizeof(sel), "%s:%s", type, kind_selector(info.kind));
  assert_true(enumerate_has(sel, dev));
  snprintf(sel, sizeof(sel), "*:%s", kind_selector(info.kind));
  assert_true(enumerate_has(sel, dev));
  if (info.kind == ADR_DEVICE_KIND_GPU || info.kind == ADR_DEVICE_KIND_INTEGRATED_GPU)
    assert_true(enumerate_has("*:gpu", dev));
  else
    assert_false(enumerate_has("*:gpu", dev));
  if (info.identity & ADR_DEVICE_HAS_UUID) {
    char hex[33];
    for (int i = 0; i < 16; i++) snprintf(hex + 2 * i, 3, "%02x", info.uuid[i]);
    snprintf(sel, sizeof(sel), "uuid=%s", hex);
    assert_true(enumerate_has(sel, dev));
    snprintf(sel, sizeof(sel), "%s:GPU-%.8s-%.4s-%.4s-%.4s-%.12s", type, hex, hex + 8, hex + 12,
             hex + 16, hex + 20);
    assert_true(enumerate_has(sel, dev));
  }

  int same = -1;
  ASSERT_OK(adr_device_same_physical(dev, dev, &same, CONF_ERR));
  assert_int_equal(same, 1);
  /* Against the CPU device: the rule of adr.h, from the two identities. */
  ASSERT_OK(adr_device_same_physical(dev, g_conf.cpu, &same, CONF_ERR));
  bool host = info.kind == ADR_DEVICE_KIND_CPU && !(info.identity & ADR_DEVICE_HAS_PCI_BUS_ID);
  assert_int_equal(same, host ? 1 : 0);

  ASSERT_ERR(adr_device_select(NULL, &got, CONF_ERR), EINVAL, "adr_device_select");
  ASSERT_ERR(adr_device_select("*:", &got, CONF_ERR), EINVAL, "adr_device_select");
  size_t n = 0;
  ASSERT_ERR(adr_device_enumerate("*", NULL, 1, &n, CONF_ERR), EINVAL, "adr_device_enumerate");
  ASSERT_ERR(adr_device_same_physical(dev, NULL, &same, CONF_ERR), EINVAL,
             "adr_device_same_physical");
  uint64_t foreign[64] = {0};
  ASSERT_ERR(adr_device_same_physical(dev, (struct adr_device*)foreign, &same, CONF_ERR), EINVAL,
             "adr_device_same_physical");
}
