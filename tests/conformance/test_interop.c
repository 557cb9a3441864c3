/* SPDX-License-Identifier: Apache-2.0
 *
 * Conformance: the application API's native interop, where it applies.
 *
 * test_native_buffer_bounds (backends whose helper has a typed buffer
 * look-up: OpenCL, Vulkan): adr_opencl_buffer / adr_vulkan_buffer report
 * the allocation as the application made it, under whatever allocator the
 * run uses (the caching pool by default), at every interior address;
 * one past the end, freed memory and host memory are ENOENT.
 *
 * test_device_release_refusals (every backend): adr_device_release is for
 * adopted devices only; the device under test, enumerated, is refused with
 * EINVAL and keeps working.
 */
#include "conf_native.h"
#include "conformance.h"

static void expect_bounds(const struct conf_native* h, const void* ptr, const void* base,
                          size_t size, size_t offset) {
  void* b = NULL;
  size_t s = 0, o = 0;
  struct adr_error e;
  memcpy(e.message, CONF_UNTOUCHED, sizeof(CONF_UNTOUCHED));
  int st = h->buffer(g_conf.dev, ptr, &b, &s, &o, &e);
  if (st != 0) conf_fault_accept(st, e.message);
  if (st != 0) fail_msg("%s(%p): %s: %s", h->buffer_op, ptr, adr_status_name(st), e.message);
  if (strcmp(e.message, CONF_UNTOUCHED) != 0)
    fail_msg("%s succeeded but wrote the error message: %s", h->buffer_op, e.message);
  if (b != base || s != size || o != offset)
    fail_msg("%s(%p): base %p size %zu offset %zu, expected %p %zu %zu", h->buffer_op, ptr, b, s, o,
             base, size, offset);
}

static void expect_enoent(const struct conf_native* h, const void* ptr, const char* what) {
  void* b = NULL;
  size_t s = 0, o = 0;
  struct adr_error e;
  memset(e.message, 0, sizeof(e.message));
  int st = h->buffer(g_conf.dev, ptr, &b, &s, &o, &e);
  char expr[160];
  snprintf(expr, sizeof(expr), "%s(%s)", h->buffer_op, what);
  conf_check_error(expr, st, ENOENT, 0, &e, h->buffer_op, __FILE__, __LINE__);
}

void test_native_buffer_bounds(void** state) {
  (void)state;
  char why[256];
  const struct conf_native* h = conf_native_get(g_conf.dev, why, sizeof(why));
  assert_non_null(h);
  assert_non_null(h->buffer);
  uint8_t* before = conf_dev_alloc(g_conf.dev, 256, 0, NULL);
  uint8_t* p = conf_dev_alloc(g_conf.dev, 100, 0, NULL);
  uint8_t* after = conf_dev_alloc(g_conf.dev, 300, 0, NULL);
  uint8_t* big = conf_dev_alloc(g_conf.dev, 3 * CONF_MIB + 7, 0, NULL);
  for (size_t k = 0; k < 100; k++) expect_bounds(h, p + k, p, 100, k);
  expect_bounds(h, before + 255, before, 256, 255);
  expect_bounds(h, after, after, 300, 0);
  expect_bounds(h, big + 3 * CONF_MIB + 6, big, 3 * CONF_MIB + 7, 3 * CONF_MIB + 6);
  /* Allocations are 64-byte aligned, so nothing starts right after p. */
  expect_enoent(h, p + 100, "one past the end of a 100-byte allocation");
  expect_enoent(h, big + 3 * CONF_MIB + 7, "one past the end of a 3 MiB allocation");
  uint8_t host[16];
  expect_enoent(h, host, "host memory");
  conf_dev_free(g_conf.dev, p, 100, NULL);
  expect_enoent(h, p, "a freed allocation");
  expect_enoent(h, p + 50, "inside a freed allocation");
  conf_dev_free(g_conf.dev, big, 3 * CONF_MIB + 7, NULL);
  conf_dev_free(g_conf.dev, after, 300, NULL);
  conf_dev_free(g_conf.dev, before, 256, NULL);
}

void test_device_release_refusals(void** state) {
  (void)state;
  ASSERT_ERR(adr_device_release(NULL, CONF_ERR), EINVAL, "adr_device_release");
  ASSERT_ERR(adr_device_release(g_conf.dev, CONF_ERR), EINVAL, "adr_device_release");
  if (g_conf.cpu != g_conf.dev)
    ASSERT_ERR(adr_device_release(g_conf.cpu, CONF_ERR), EINVAL, "adr_device_release");
  /* Refused means untouched: the device still works. */
  uint8_t in[64], out[64];
  conf_fill(in, sizeof(in), 77);
  uint8_t* p = conf_dev_alloc(g_conf.dev, sizeof(in), 0, NULL);
  conf_upload(g_conf.dev, p, in, sizeof(in));
  conf_download(g_conf.dev, out, p, sizeof(out));
  conf_expect_pattern(out, sizeof(out), 77, "after a refused release");
  conf_dev_free(g_conf.dev, p, sizeof(in), NULL);
}
