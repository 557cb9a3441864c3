/* SPDX-License-Identifier: Apache-2.0
 *
 * ADR_DEVICE / ADR_BACKENDS parsing: valid forms and malformed ones, each
 * with the message a user would see.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "internal.h"

static struct adr__selector* parse_devices_ok(const char* text) {
  struct adr__selector* sel = NULL;
  struct adr_error err = {{0}};
  int st = adr__parse_device_list("ADR_DEVICE", text, &sel, &err);
  if (st != 0) fail_msg("'%s' rejected: %s", text, err.message);
  return sel;
}

static void test_device_forms(void** state) {
  (void)state;
  struct adr__selector* s = parse_devices_ok("cuda:0");
  assert_int_equal(s->count, 1);
  assert_int_equal(s->u.devices[0].type, ARROW_DEVICE_CUDA);
  assert_int_equal(s->u.devices[0].id, 0);
  adr__selector_free(s);

  s = parse_devices_ok("vulkan");
  assert_int_equal(s->u.devices[0].type, ARROW_DEVICE_VULKAN);
  assert_int_equal(s->u.devices[0].id, 0);
  adr__selector_free(s);

  s = parse_devices_ok(" cuda:1 , hip:0,cpu ");
  assert_int_equal(s->count, 3);
  assert_int_equal(s->u.devices[0].id, 1);
  assert_int_equal(s->u.devices[1].type, ARROW_DEVICE_ROCM);
  assert_int_equal(s->u.devices[2].type, ARROW_DEVICE_CPU);
  adr__selector_free(s);

  s = parse_devices_ok("opencl:*,*");
  assert_int_equal(s->u.devices[0].type, ARROW_DEVICE_OPENCL);
  assert_int_equal(s->u.devices[0].id, -1);
  assert_int_equal(s->u.devices[1].type, 0);
  adr__selector_free(s);

  /* kinds: "*" and a type name, with the ':' spaced or not */
  s = parse_devices_ok("opencl:gpu, vulkan : CPU,*:accelerator,*:igpu,hip:dgpu,*:other,* : *");
  assert_int_equal(s->count, 7);
  assert_int_equal(s->u.devices[0].type, ARROW_DEVICE_OPENCL);
  assert_int_equal(s->u.devices[0].id, -1);
  assert_int_equal(s->u.devices[0].kinds,
                   (1u << ADR_DEVICE_KIND_GPU) | (1u << ADR_DEVICE_KIND_INTEGRATED_GPU));
  assert_string_equal(s->u.devices[0].text, "opencl:gpu");
  assert_int_equal(s->u.devices[1].kinds, 1u << ADR_DEVICE_KIND_CPU);
  assert_string_equal(s->u.devices[1].text, "vulkan : CPU");
  assert_int_equal(s->u.devices[2].type, 0);
  assert_int_equal(s->u.devices[2].kinds, 1u << ADR_DEVICE_KIND_ACCELERATOR);
  assert_int_equal(s->u.devices[3].kinds, 1u << ADR_DEVICE_KIND_INTEGRATED_GPU);
  assert_int_equal(s->u.devices[4].kinds, 1u << ADR_DEVICE_KIND_GPU);
  assert_int_equal(s->u.devices[5].kinds, 1u << ADR_DEVICE_KIND_OTHER);
  assert_int_equal(s->u.devices[6].type, 0);
  assert_int_equal(s->u.devices[6].kinds, 0);
  adr__selector_free(s);

  /* uuids: nvidia-smi's GPU- spelling after a type, uuid= anywhere */
  static const uint8_t want[16] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
                                   0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10};
  s = parse_devices_ok("cuda:GPU-01234567-89ab-cdef-FEDC-BA9876543210,"
                       "uuid=0123456789abcdeffedcba9876543210,"
                       "vulkan:uuid=0-1-2-3-4-5-6-7-8-9-a-b-c-d-e-f-f-e-d-c-b-a-9-8-7-6-5-4-3-2-1-0,"
                       "*:gpu-0123456789ABCDEFFEDCBA9876543210");
  assert_int_equal(s->count, 4);
  assert_int_equal(s->u.devices[0].type, ARROW_DEVICE_CUDA);
  assert_int_equal(s->u.devices[1].type, 0);
  assert_int_equal(s->u.devices[2].type, ARROW_DEVICE_VULKAN);
  for (size_t i = 0; i < 4; i++) {
    assert_true(s->u.devices[i].has_uuid);
    assert_int_equal(s->u.devices[i].id, -1);
    assert_memory_equal(s->u.devices[i].uuid, want, 16);
  }
  adr__selector_free(s);

  s = parse_devices_ok("CUDA_HOST:3,cuda_managed:12,hip_host,rocm:2");
  assert_int_equal(s->u.devices[0].type, ARROW_DEVICE_CUDA_HOST);
  assert_int_equal(s->u.devices[0].id, 3);
  assert_int_equal(s->u.devices[1].type, ARROW_DEVICE_CUDA_MANAGED);
  assert_int_equal(s->u.devices[1].id, 12);
  assert_int_equal(s->u.devices[2].type, ARROW_DEVICE_ROCM_HOST);
  assert_int_equal(s->u.devices[3].type, ARROW_DEVICE_ROCM);
  adr__selector_free(s);
}

struct bad_case {
  const char* text;
  const char* message; /* the whole expected message */
};

static const struct bad_case bad_devices[] = {
    {"cuda:x", "ADR_DEVICE=\"cuda:x\": column 6: unknown device kind 'x' (expected a device id, '*', gpu, dgpu, igpu, cpu, accelerator, other, GPU-<uuid> or uuid=<uuid>)"},
    {"", "ADR_DEVICE=\"\": column 1: expected a device name (cpu, cuda, opencl ...) or '*', found end of text"},
    {"cuda:", "ADR_DEVICE=\"cuda:\": column 6: expected a device id (digits), '*', a device kind or a uuid after ':', found end of text"},
    {"cuda:0,", "ADR_DEVICE=\"cuda:0,\": column 8: expected a device name (cpu, cuda, opencl ...) or '*', found end of text"},
    {",cuda", "ADR_DEVICE=\",cuda\": column 1: expected a device name (cpu, cuda, opencl ...) or '*', found ','"},
    {"cuda::0", "ADR_DEVICE=\"cuda::0\": column 6: expected a device id (digits), '*', a device kind or a uuid after ':', found ':'"},
    {"cuda:0:1", "ADR_DEVICE=\"cuda:0:1\": column 7: expected ',' or end of text, found ':'"},
    {"cuda:-1", "ADR_DEVICE=\"cuda:-1\": column 6: expected a device id (digits), '*', a device kind or a uuid after ':', found '-'"},
    {"cuda:1x", "ADR_DEVICE=\"cuda:1x\": column 7: expected ',' or end of text, found 'x'"},
    {"cuda 0", "ADR_DEVICE=\"cuda 0\": column 6: expected ',' or end of text, found '0'"},
    {"0", "ADR_DEVICE=\"0\": column 1: expected a device name (cpu, cuda, opencl ...) or '*', found '0'"},
    {"cuda;hip", "ADR_DEVICE=\"cuda;hip\": column 5: expected ',' or end of text, found ';'"},
    {"gpu:0", "ADR_DEVICE=\"gpu:0\": column 1: unknown device type 'gpu' (expected one of: cpu cuda cuda_host cuda_managed hip hip_host opencl vulkan metal vpi ext_dev oneapi webgpu hexagon, '*' or uuid=)"},
    {"cpu,,cuda", "ADR_DEVICE=\"cpu,,cuda\": column 5: expected a device name (cpu, cuda, opencl ...) or '*', found ','"},
    {"cuda:99999999", "ADR_DEVICE=\"cuda:99999999\": column 6: expected a device id below 1000000, found '9'"},
    {"**", "ADR_DEVICE=\"**\": column 2: expected ',' or end of text, found '*'"},
    {"cuda:*0", "ADR_DEVICE=\"cuda:*0\": column 7: expected ',' or end of text, found '0'"},
    {"!cuda", "ADR_DEVICE=\"!cuda\": column 1: expected a device name (cpu, cuda, opencl ...) or '*', found '!'"},
    {"cuda:\x01", "ADR_DEVICE=\"cuda:\x01\": column 6: expected a device id (digits), '*', a device kind or a uuid after ':', found byte 0x01"},
    {"_cuda", "ADR_DEVICE=\"_cuda\": column 1: expected a device name (cpu, cuda, opencl ...) or '*', found '_'"},
    /* kinds and uuids (issue 14) */
    {"opencl:gpux", "ADR_DEVICE=\"opencl:gpux\": column 8: unknown device kind 'gpux' (expected a device id, '*', gpu, dgpu, igpu, cpu, accelerator, other, GPU-<uuid> or uuid=<uuid>)"},
    {"*:fpga", "ADR_DEVICE=\"*:fpga\": column 3: unknown device kind 'fpga' (expected '*', gpu, dgpu, igpu, cpu, accelerator, other, GPU-<uuid> or uuid=<uuid>)"},
    {"*:0", "ADR_DEVICE=\"*:0\": column 3: expected '*', a device kind or a uuid after ':', found '0'"},
    {"*:", "ADR_DEVICE=\"*:\": column 3: expected '*', a device kind or a uuid after ':', found end of text"},
    {"cuda:GPU-12", "ADR_DEVICE=\"cuda:GPU-12\": column 12: expected a hex digit of the UUID (32 in all), found end of text"},
    {"cuda:GPU-", "ADR_DEVICE=\"cuda:GPU-\": column 10: expected a UUID (32 hex digits), found end of text"},
    {"uuid=", "ADR_DEVICE=\"uuid=\": column 6: expected a UUID (32 hex digits), found end of text"},
    {"uuid=0123456789abcdef0123456789abcdeg", "ADR_DEVICE=\"uuid=0123456789abcdef0123456789abcdeg\": column 37: expected a hex digit of the UUID (32 in all), found 'g'"},
    {"uuid=0123456789abcdef0123456789abcdef0", "ADR_DEVICE=\"uuid=0123456789abcdef0123456789abcdef0\": column 38: expected ',' or end of text, found '0'"},
    {"uuid=01--23456789abcdef0123456789abcdef", "ADR_DEVICE=\"uuid=01--23456789abcdef0123456789abcdef\": column 8: expected a hex digit of the UUID (32 in all), found '-'"},
    {"uuid = 0123456789abcdef0123456789abcdef", "ADR_DEVICE=\"uuid = 0123456789abcdef0123456789abcdef\": column 1: unknown device type 'uuid' (expected one of: cpu cuda cuda_host cuda_managed hip hip_host opencl vulkan metal vpi ext_dev oneapi webgpu hexagon, '*' or uuid=)"},
    {"opencl:0 hip", "ADR_DEVICE=\"opencl:0 hip\": column 10: expected ',' or end of text, found 'h'"},
};

static void test_device_malformed(void** state) {
  (void)state;
  for (size_t i = 0; i < sizeof(bad_devices) / sizeof(bad_devices[0]); i++) {
    struct adr__selector* sel = NULL;
    struct adr_error err = {{0}};
    int st = adr__parse_device_list("ADR_DEVICE", bad_devices[i].text, &sel, &err);
    if (st != EINVAL) fail_msg("'%s' accepted (status %d)", bad_devices[i].text, st);
    assert_null(sel);
    if (strcmp(err.message, bad_devices[i].message) != 0)
      fail_msg("'%s':\n  got      %s\n  expected %s", bad_devices[i].text, err.message,
               bad_devices[i].message);
  }
}

static void test_backend_rules(void** state) {
  (void)state;
  struct adr__selector* s = NULL;
  assert_int_equal(adr__parse_backend_list("ADR_BACKENDS", "cuda,opencl", &s, NULL), 0);
  assert_true(adr__backend_allowed(s, "cuda"));
  assert_true(adr__backend_allowed(s, "opencl"));
  assert_false(adr__backend_allowed(s, "vulkan"));
  assert_false(adr__backend_allowed(s, "cpu"));
  adr__selector_free(s);

  assert_int_equal(adr__parse_backend_list("ADR_BACKENDS", "!vulkan", &s, NULL), 0);
  assert_false(adr__backend_allowed(s, "vulkan"));
  assert_true(adr__backend_allowed(s, "cuda"));
  assert_true(adr__backend_allowed(s, "my_plugin"));
  adr__selector_free(s);

  assert_int_equal(adr__parse_backend_list("ADR_BACKENDS", "*, !cuda ,! hip", &s, NULL), 0);
  assert_false(adr__backend_allowed(s, "cuda"));
  assert_false(adr__backend_allowed(s, "hip"));
  assert_true(adr__backend_allowed(s, "cpu"));
  adr__selector_free(s);

  assert_int_equal(adr__parse_backend_list("ADR_BACKENDS", "cuda,!cuda", &s, NULL), 0);
  assert_false(adr__backend_allowed(s, "cuda")); /* negation wins */
  adr__selector_free(s);

  assert_true(adr__backend_allowed(NULL, "anything"));
}

static const struct bad_case bad_backends[] = {
    {"", "ADR_BACKENDS=\"\": column 1: expected a backend name (cpu, cuda, hip, opencl, vulkan ...), '!name' or '*', found end of text"},
    {"cuda,", "ADR_BACKENDS=\"cuda,\": column 6: expected a backend name (cpu, cuda, hip, opencl, vulkan ...), '!name' or '*', found end of text"},
    {"!", "ADR_BACKENDS=\"!\": column 2: expected a backend name after '!', found end of text"},
    {"!*", "ADR_BACKENDS=\"!*\": column 2: expected a backend name after '!', found '*'"},
    {"cuda opencl", "ADR_BACKENDS=\"cuda opencl\": column 6: expected ',' or end of text, found 'o'"},
    {"cuda:0", "ADR_BACKENDS=\"cuda:0\": column 5: expected ',' or end of text, found ':'"},
    {"-cuda", "ADR_BACKENDS=\"-cuda\": column 1: expected a backend name (cpu, cuda, hip, opencl, vulkan ...), '!name' or '*', found '-'"},
};

static void test_backend_malformed(void** state) {
  (void)state;
  for (size_t i = 0; i < sizeof(bad_backends) / sizeof(bad_backends[0]); i++) {
    struct adr__selector* sel = NULL;
    struct adr_error err = {{0}};
    int st = adr__parse_backend_list("ADR_BACKENDS", bad_backends[i].text, &sel, &err);
    if (st != EINVAL) fail_msg("'%s' accepted (status %d)", bad_backends[i].text, st);
    assert_null(sel);
    if (strcmp(err.message, bad_backends[i].message) != 0)
      fail_msg("'%s':\n  got      %s\n  expected %s", bad_backends[i].text, err.message,
               bad_backends[i].message);
  }
}

static void test_type_names(void** state) {
  (void)state;
  assert_string_equal(adr_device_type_name(ARROW_DEVICE_ROCM), "hip");
  assert_string_equal(adr_device_type_name(ARROW_DEVICE_CUDA_MANAGED), "cuda_managed");
  assert_null(adr_device_type_name(5));
  assert_int_equal(adr__device_type_from_name("opencl", 6), ARROW_DEVICE_OPENCL);
  assert_int_equal(adr__device_type_from_name("openclx", 7), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_device_forms),      cmocka_unit_test(test_device_malformed),
      cmocka_unit_test(test_backend_rules),     cmocka_unit_test(test_backend_malformed),
      cmocka_unit_test(test_type_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
