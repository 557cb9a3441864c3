/* SPDX-License-Identifier: Apache-2.0
 *
 * The Vulkan backend's environment variables, one case per process (the
 * environment is read once), on lavapipe:
 *
 *   block-size-ok       ADR_VULKAN_BLOCK_SIZE=0.5M (the shared byte-size
 *                       grammar, backends/common/bytesize.h): 524288-byte
 *                       blocks, and the device works
 *   block-size-unit     ADR_VULKAN_BLOCK_SIZE=1X: rejected, the shared
 *                       message naming column 2 and the units
 *   block-size-decimal  ADR_VULKAN_BLOCK_SIZE=64KB (64000): rejected, not
 *                       a power of two
 *   bad-copy            ADR_VULKAN_COPY=fast: rejected, column 1
 *
 * A rejected backend leaves the process running, vulkan devices fail with
 * ENODEV, and adr-info's reason says why.
 *
 * Usage: test_vulkan_env <case>, with the case's environment set by meson.
 * Exit 77 when no Vulkan device is available and ADR_VKTEST_REQUIRE is
 * unset.
 */
/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <adr/adr.h>

static const char* which;

static struct adr_backend_info vulkan_backend(void) {
  struct adr_backend_info info = {.struct_size = sizeof(info)};
  assert_int_equal(adr_backends_load_all(NULL), 0);
  size_t n = adr_backend_count();
  for (size_t i = 0; i < n; i++) {
    assert_int_equal(adr_backend_info_get(i, &info, NULL), 0);
    if (strcmp(info.name, "vulkan") == 0) return info;
  }
  fail_msg("no backend named vulkan among %zu", n);
  return info;
}

static void expect_rejected(const char* reason) {
  struct adr_device* dev = NULL;
  struct adr_error e = {{0}};
  assert_int_equal(adr_device_get(ARROW_DEVICE_VULKAN, 0, &dev, &e), ENODEV);
  assert_null(dev);
  struct adr_backend_info info = vulkan_backend();
  if (info.state != ADR_BACKEND_REJECTED)
    fail_msg("backend state %d, expected rejected (reason: %s)", info.state, info.reason);
  if (strstr(info.reason, reason) == NULL)
    fail_msg("reason \"%s\" lacks \"%s\"", info.reason, reason);
  struct adr_device* cpu = NULL;
  assert_int_equal(adr_device_get(ARROW_DEVICE_CPU, 0, &cpu, NULL), 0);
}

struct find {
  const char* key;
  char value[128];
};

static void find_property(void* ctx, const char* key, const char* value) {
  struct find* f = ctx;
  if (strcmp(key, f->key) == 0) snprintf(f->value, sizeof(f->value), "%s", value);
}

static void test_case(void** state) {
  (void)state;
  if (strcmp(which, "block-size-ok") == 0) {
    struct adr_device* dev = NULL;
    struct adr_error e = {{0}};
    struct adr_device* cpu = NULL;
    assert_int_equal(adr_device_get(ARROW_DEVICE_VULKAN, 0, &dev, &e), 0);
    assert_int_equal(adr_device_get(ARROW_DEVICE_CPU, 0, &cpu, &e), 0);
    /* The block size is chosen with the VkDevice, which the first use
     * (here: asking for the native VkDevice) creates. */
    void* vk_device = NULL;
    assert_int_equal(adr_device_native(dev, ADR_NATIVE_CONTEXT, &vk_device, &e), 0);
    assert_non_null(vk_device);
    struct find f = {.key = "block_size"};
    assert_int_equal(adr_device_properties(dev, find_property, &f, &e), 0);
    assert_string_equal(f.value, "524288 bytes");
    /* Allocations within and beyond one block work. */
    const size_t sizes[] = {4096, (size_t)3 << 20};
    for (size_t i = 0; i < 2; i++) {
      void* p = NULL;
      assert_int_equal(adr_alloc(dev, sizes[i], 0, NULL, &p, &e), 0);
      assert_int_equal(adr_memset(dev, p, 0x3c, sizes[i], NULL, &e), 0);
      unsigned char* back = malloc(sizes[i]);
      assert_non_null(back);
      assert_int_equal(adr_copy(cpu, back, dev, p, sizes[i], NULL, &e), 0);
      for (size_t k = 0; k < sizes[i]; k++)
        if (back[k] != 0x3c) fail_msg("byte %zu of %zu is 0x%02x", k, sizes[i], back[k]);
      free(back);
      assert_int_equal(adr_free(dev, p, sizes[i], NULL, &e), 0);
    }
  } else if (strcmp(which, "block-size-unit") == 0) {
    expect_rejected(
        "ADR_VULKAN_BLOCK_SIZE=\"1X\": column 2: expected a unit (B, K, KiB, KB, M, "
        "MiB, MB, G, GiB, GB, T, TiB, TB), found 'X'");
  } else if (strcmp(which, "block-size-decimal") == 0) {
    expect_rejected("ADR_VULKAN_BLOCK_SIZE=\"64KB\": must be a power of two from 64K to 1T");
  } else if (strcmp(which, "bad-copy") == 0) {
    expect_rejected(
        "ADR_VULKAN_COPY=\"fast\": column 1: expected auto, mapped or staging, found 'f'");
  } else {
    fail_msg("unknown case '%s'", which);
  }
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s block-size-ok|block-size-unit|block-size-decimal|bad-copy\n",
            argv[0]);
    return 1;
  }
  which = argv[1];
  if (strcmp(which, "block-size-ok") == 0 && getenv("ADR_VKTEST_REQUIRE") == NULL) {
    struct adr_device* dev = NULL;
    struct adr_error e = {{0}};
    if (adr_device_get(ARROW_DEVICE_VULKAN, 0, &dev, &e) != 0) {
      fprintf(stderr, "no Vulkan device (%s): skipped\n", e.message);
      return 77;
    }
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_case),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
