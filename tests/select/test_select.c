/* SPDX-License-Identifier: Apache-2.0
 *
 * Choosing devices from the application (issue 14): adr_device_select,
 * adr_device_enumerate and adr_device_same_physical through the public API,
 * one case per machine configuration (tests/select/meson.build):
 *
 *   cpu            ADR_BACKENDS=cpu: arguments, messages, kinds, the CPU
 *   host           cpu + PoCL + lavapipe: three views of the host CPU, which
 *                  adr counts as one physical device; kind selectors
 *   sim            both GPU simulators with their default identities: two
 *                  CUDA and two HIP GPUs, four physical devices
 *   sim-same-uuid  ADR_SIM_UUIDS: cuda:N and hip:N share a UUID
 *   sim-same-pci   ADR_SIM_HIP_PCI_BUS_IDS: hip:0 sits at cuda:0's PCI
 *                  address with another UUID
 *   sim-integrated ADR_SIM_INTEGRATED=1 on the HIP simulator only
 *
 * A case whose backends are missing exits 77 (skip).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "adr/adr.h"

#define U0 "0123456789abcdef0011223344556677"
#define U1 "fedcba98765432100011223344556677"

static struct adr_device* get(ArrowDeviceType type, int64_t id) {
  struct adr_device* d = NULL;
  struct adr_error e = {{0}};
  if (adr_device_get(type, id, &d, &e) != 0) fail_msg("adr_device_get: %s", e.message);
  return d;
}

static struct adr_device* select_ok(const char* selector) {
  struct adr_device* d = NULL;
  struct adr_error e = {{0}};
  if (adr_device_select(selector, &d, &e) != 0) fail_msg("select '%s': %s", selector, e.message);
  assert_string_equal(e.message, ""); /* untouched on success */
  return d;
}

/* The names of what `selector` enumerates, space separated. */
static void enumerate_names(const char* selector, char* out, size_t cap) {
  struct adr_device* d[64];
  size_t n = 0;
  struct adr_error e = {{0}};
  if (adr_device_enumerate(selector, d, 64, &n, &e) != 0)
    fail_msg("enumerate '%s': %s", selector, e.message);
  assert_true(n <= 64);
  out[0] = '\0';
  size_t len = 0;
  for (size_t i = 0; i < n; i++)
    len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? " " : "", adr_device_name(d[i]));
}

static void assert_enumerates(const char* selector, const char* want) {
  char got[1024];
  enumerate_names(selector, got, sizeof(got));
  if (strcmp(got, want) != 0)
    fail_msg("enumerate '%s':\n  got      '%s'\n  expected '%s'", selector, got, want);
}

static int same(struct adr_device* a, struct adr_device* b) {
  int s = -1;
  struct adr_error e = {{0}};
  if (adr_device_same_physical(a, b, &s, &e) != 0) fail_msg("same_physical: %s", e.message);
  int s2 = -1;
  assert_int_equal(adr_device_same_physical(b, a, &s2, NULL), 0);
  assert_int_equal(s, s2); /* symmetric */
  return s;
}

static struct adr_device_info info_of(struct adr_device* d) {
  struct adr_device_info info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  struct adr_error e = {{0}};
  if (adr_device_info_get(d, &info, &e) != 0) fail_msg("info: %s", e.message);
  return info;
}

/* ---- cpu ------------------------------------------------------------------ */

static void test_bad_arguments(void** state) {
  (void)state;
  struct adr_device* d = NULL;
  struct adr_error e = {{0}};
  assert_int_equal(adr_device_select(NULL, &d, &e), EINVAL);
  assert_string_equal(e.message, "[adr_device_select] selector is NULL");
  assert_int_equal(adr_device_select("cpu", NULL, &e), EINVAL);
  assert_string_equal(e.message, "[adr_device_select] out is NULL");
  size_t n = 7;
  assert_int_equal(adr_device_enumerate(NULL, NULL, 0, &n, &e), EINVAL);
  assert_string_equal(e.message, "[adr_device_enumerate] selector is NULL");
  assert_int_equal(adr_device_enumerate("cpu", NULL, 0, NULL, &e), EINVAL);
  assert_string_equal(e.message, "[adr_device_enumerate] out_count is NULL");
  assert_int_equal(adr_device_enumerate("cpu", NULL, 2, &n, &e), EINVAL);
  assert_string_equal(e.message,
                      "[adr_device_enumerate] out_devices (with a capacity above 0) is NULL");
  assert_int_equal(n, 7);

  /* The grammar and the messages of ADR_DEVICE, naming the selector. */
  assert_int_equal(adr_device_select("cuda:x", &d, &e), EINVAL);
  assert_string_equal(e.message,
                      "[adr_device_select] selector=\"cuda:x\": column 6: unknown device kind 'x' "
                      "(expected a device id, '*', gpu, dgpu, igpu, cpu, accelerator, other, "
                      "GPU-<uuid> or uuid=<uuid>)");
  assert_int_equal(adr_device_enumerate("gpu", NULL, 0, &n, &e), EINVAL);
  assert_non_null(strstr(e.message,
                         "[adr_device_enumerate] selector=\"gpu\": column 1: unknown "
                         "device type 'gpu'"));
  assert_int_equal(adr_device_select("", &d, &e), EINVAL);
  assert_non_null(strstr(e.message, "column 1: expected a device name"));
  assert_int_equal(adr_device_select("uuid=12", &d, &e), EINVAL);
  assert_non_null(strstr(e.message, "column 8: expected a hex digit of the UUID"));
  assert_null(d);

  /* Foreign pointers and NULLs in same_physical. */
  struct adr_device* cpu = get(ARROW_DEVICE_CPU, 0);
  int s = -1;
  assert_int_equal(adr_device_same_physical(NULL, cpu, &s, &e), EINVAL);
  assert_string_equal(e.message, "[adr_device_same_physical] a is NULL");
  assert_int_equal(adr_device_same_physical(cpu, NULL, &s, &e), EINVAL);
  assert_string_equal(e.message, "[adr_device_same_physical] b is NULL");
  assert_int_equal(adr_device_same_physical(cpu, cpu, NULL, &e), EINVAL);
  assert_string_equal(e.message, "[adr_device_same_physical] out_same is NULL");
  char foreign[256] = {0};
  assert_int_equal(adr_device_same_physical(cpu, (struct adr_device*)foreign, &s, &e), EINVAL);
  assert_non_null(strstr(e.message, "[adr_device_same_physical] b ("));
  assert_non_null(strstr(e.message, ") is not an adr device"));
  assert_int_equal(adr_device_same_physical((struct adr_device*)foreign, cpu, &s, &e), EINVAL);
  assert_non_null(strstr(e.message, "[adr_device_same_physical] a ("));
  assert_int_equal(s, -1);
  assert_string_equal(adr_device_kind_name(ADR_DEVICE_KIND_INTEGRATED_GPU), "integrated-gpu");
  assert_string_equal(adr_device_kind_name(0), "unknown");
  assert_string_equal(adr_device_kind_name(99), "unknown");
}

static void test_cpu_only(void** state) {
  (void)state;
  struct adr_device* cpu = get(ARROW_DEVICE_CPU, 0);
  assert_ptr_equal(select_ok("cpu"), cpu);
  assert_ptr_equal(select_ok("*"), cpu);
  assert_ptr_equal(select_ok("*:cpu"), cpu);
  assert_ptr_equal(select_ok("cuda:0,hip:*,*:gpu,cpu:*"), cpu);
  struct adr_device_info info = info_of(cpu);
  assert_int_equal(info.kind, ADR_DEVICE_KIND_CPU);
  assert_int_equal(info.identity, 0);
  assert_int_equal(same(cpu, cpu), 1);

  /* Nothing matches: ENODEV with every entry's reason. */
  struct adr_device* d = NULL;
  struct adr_error e = {{0}};
  assert_int_equal(adr_device_select("*:gpu,cpu:gpu,uuid=" U0, &d, &e), ENODEV);
  assert_string_equal(e.message,
                      "[adr_device_select] no device of selector \"*:gpu,cpu:gpu,uuid=" U0
                      "\" is available (*:gpu: no device matches; cpu:gpu: no device matches; "
                      "uuid=" U0 ": no device matches)");
  assert_null(d);

  /* Enumeration: every match once, the count even past the capacity. */
  assert_enumerates("*", "cpu:0");
  assert_enumerates("cpu, *, cpu:0, *:cpu", "cpu:0");
  assert_enumerates("*:gpu", "");
  size_t n = 9;
  assert_int_equal(adr_device_enumerate("cpu,cpu", NULL, 0, &n, NULL), 0);
  assert_int_equal(n, 1);
  struct adr_device* one[1] = {NULL};
  assert_int_equal(adr_device_enumerate("*:accelerator,*", one, 1, &n, NULL), 0);
  assert_int_equal(n, 1);
  assert_ptr_equal(one[0], cpu);
}

/* ---- host: cpu, PoCL, lavapipe -------------------------------------------- */

static void test_host_views(void** state) {
  (void)state;
  struct adr_device* cpu = get(ARROW_DEVICE_CPU, 0);
  struct adr_device* ocl = get(ARROW_DEVICE_OPENCL, 0);
  struct adr_device* vk = get(ARROW_DEVICE_VULKAN, 0);
  assert_int_equal(info_of(ocl).kind, ADR_DEVICE_KIND_CPU);
  struct adr_device_info vi = info_of(vk);
  assert_int_equal(vi.kind, ADR_DEVICE_KIND_CPU);
  assert_true(vi.identity & ADR_DEVICE_HAS_UUID); /* lavapipe has a deviceUUID */
  /* The decision of docs/devices.md: CPU-kind devices without a PCI
   * address are the host CPU, whatever their UUIDs. */
  assert_int_equal(same(ocl, vk), 1);
  assert_int_equal(same(cpu, ocl), 1);
  assert_int_equal(same(cpu, vk), 1);

  /* '*' prefers accelerators; all three are CPUs here: enumeration order. */
  assert_ptr_equal(select_ok("*"), cpu);
  assert_enumerates("*", "cpu:0 opencl:0 vulkan:0");
  assert_enumerates("*:cpu", "cpu:0 opencl:0 vulkan:0");
  assert_ptr_equal(select_ok("opencl:gpu,vulkan:cpu"), vk);
  assert_ptr_equal(select_ok("opencl:*"), ocl);
  assert_ptr_equal(select_ok("vulkan:cpu"), vk);
  assert_enumerates("*:gpu", "");
  assert_enumerates("*:accelerator,*:other,opencl:igpu", "");

  /* By identity: lavapipe's UUID, with either spelling. */
  char sel[128], hex[33];
  for (int i = 0; i < 16; i++) snprintf(hex + 2 * i, 3, "%02x", vi.uuid[i]);
  snprintf(sel, sizeof(sel), "uuid=%s", hex);
  assert_ptr_equal(select_ok(sel), vk);
  snprintf(sel, sizeof(sel), "vulkan:GPU-%.8s-%.4s-%.4s-%.4s-%.12s", hex, hex + 8, hex + 12,
           hex + 16, hex + 20);
  assert_ptr_equal(select_ok(sel), vk);
  snprintf(sel, sizeof(sel), "opencl:uuid=%s", hex);
  struct adr_device* d = NULL;
  assert_int_equal(adr_device_select(sel, &d, NULL), ENODEV);
}

/* ---- simulators ----------------------------------------------------------- */

static void test_sim_default(void** state) {
  (void)state;
  struct adr_device* c0 = get(ARROW_DEVICE_CUDA, 0);
  struct adr_device* c1 = get(ARROW_DEVICE_CUDA, 1);
  struct adr_device* m0 = get(ARROW_DEVICE_CUDA_MANAGED, 0);
  struct adr_device* h0 = get(ARROW_DEVICE_ROCM, 0);
  struct adr_device* ch0 = get(ARROW_DEVICE_CUDA_HOST, 0);
  struct adr_device* cpu = get(ARROW_DEVICE_CPU, 0);
  struct adr_device_info ci = info_of(c0), hi = info_of(h0), chi = info_of(ch0);
  assert_int_equal(ci.kind, ADR_DEVICE_KIND_GPU);
  assert_int_equal(ci.identity, ADR_DEVICE_HAS_UUID | ADR_DEVICE_HAS_PCI_BUS_ID);
  assert_int_equal(ci.pci_bus, 0x41);
  assert_int_equal(hi.kind, ADR_DEVICE_KIND_GPU);
  assert_int_equal(hi.identity, ADR_DEVICE_HAS_UUID | ADR_DEVICE_HAS_PCI_BUS_ID);
  assert_int_equal(hi.pci_bus, 0x61);
  assert_int_equal(chi.kind, ADR_DEVICE_KIND_CPU);
  assert_int_equal(chi.identity, 0);

  assert_int_equal(same(c0, c1), 0);
  assert_int_equal(same(c0, h0), 0);
  assert_int_equal(same(c0, m0), 1); /* managed memory of the same GPU */
  assert_int_equal(same(ch0, cpu), 1);
  assert_int_equal(same(ch0, c0), 0);

  /* '*' prefers the GPUs over the CPU, in enumeration order. */
  assert_ptr_equal(select_ok("*"), c0);
  assert_enumerates("*:gpu", "cuda:0 cuda:1 cuda_managed:0 cuda_managed:1 hip:0 hip:1");
  assert_enumerates("*:gpu", "cuda:0 cuda:1 cuda_managed:0 cuda_managed:1 hip:0 hip:1");
  assert_enumerates("hip:*,cuda_host:cpu", "hip:0 hip:1 cuda_host:0 cuda_host:1");
  assert_enumerates("*:igpu", "");

  /* By UUID: the CUDA GPU's UUID names it and its managed twin. */
  char hex[33], sel[128];
  for (int i = 0; i < 16; i++) snprintf(hex + 2 * i, 3, "%02X", ci.uuid[i]);
  snprintf(sel, sizeof(sel), "uuid=%s", hex);
  assert_enumerates(sel, "cuda:0 cuda_managed:0");
  snprintf(sel, sizeof(sel), "hip:uuid=%s,cuda_managed:GPU-%s", hex, hex);
  assert_enumerates(sel, "cuda_managed:0");
}

static void test_sim_same_uuid(void** state) {
  (void)state;
  struct adr_device* c0 = get(ARROW_DEVICE_CUDA, 0);
  struct adr_device* c1 = get(ARROW_DEVICE_CUDA, 1);
  struct adr_device* h0 = get(ARROW_DEVICE_ROCM, 0);
  struct adr_device* h1 = get(ARROW_DEVICE_ROCM, 1);
  assert_int_equal(same(c0, h0), 1);
  assert_int_equal(same(c1, h1), 1);
  assert_int_equal(same(c0, h1), 0);
  assert_int_equal(same(c0, c1), 0);
  assert_enumerates("uuid=" U0, "cuda:0 cuda_managed:0 hip:0");
  assert_enumerates("uuid=" U1, "cuda:1 cuda_managed:1 hip:1");
  assert_ptr_equal(select_ok("hip:GPU-01234567-89ab-cdef-0011-223344556677"), h0);
  assert_ptr_equal(select_ok("uuid=" U1), c1);
}

static void test_sim_same_pci(void** state) {
  (void)state;
  struct adr_device* c0 = get(ARROW_DEVICE_CUDA, 0);
  struct adr_device* c1 = get(ARROW_DEVICE_CUDA, 1);
  struct adr_device* h0 = get(ARROW_DEVICE_ROCM, 0);
  struct adr_device* h1 = get(ARROW_DEVICE_ROCM, 1);
  struct adr_device_info ci = info_of(c0), hi = info_of(h0);
  assert_memory_not_equal(ci.uuid, hi.uuid, 16);
  assert_int_equal(hi.pci_bus, 0x41);
  assert_int_equal(hi.pci_function, 0);
  assert_int_equal(same(c0, h0), 1); /* one PCI address, two UUIDs: one device */
  assert_int_equal(same(c1, h1), 0); /* hip:1 keeps 0000:62:00.0 */
  assert_int_equal(info_of(h1).pci_bus, 0x62);
}

static void test_sim_integrated(void** state) {
  (void)state;
  struct adr_device* c0 = get(ARROW_DEVICE_CUDA, 0);
  struct adr_device* h0 = get(ARROW_DEVICE_ROCM, 0);
  assert_int_equal(info_of(h0).kind, ADR_DEVICE_KIND_INTEGRATED_GPU);
  assert_int_equal(info_of(c0).kind, ADR_DEVICE_KIND_GPU);
  /* Discrete GPUs first, then integrated ones, then CPUs. */
  assert_ptr_equal(select_ok("hip:*,cpu"), h0);
  assert_ptr_equal(select_ok("*"), c0);
  assert_enumerates("*:igpu", "hip:0 hip:1");
  assert_enumerates("*:dgpu", "cuda:0 cuda:1 cuda_managed:0 cuda_managed:1");
  assert_enumerates("*:gpu,cpu", "cuda:0 cuda:1 cuda_managed:0 cuda_managed:1 hip:0 hip:1 cpu:0");
}

static bool have(ArrowDeviceType type) {
  struct adr_device* d = NULL;
  return adr_device_get(type, 0, &d, NULL) == 0;
}

int main(int argc, char** argv) {
  const char* which = argc > 1 ? argv[1] : "cpu";
  if (strcmp(which, "cpu") == 0) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_bad_arguments),
                                       cmocka_unit_test(test_cpu_only)};
    return cmocka_run_group_tests_name("select-cpu", tests, NULL, NULL);
  }
  if (strcmp(which, "host") == 0) {
    if (!have(ARROW_DEVICE_OPENCL) || !have(ARROW_DEVICE_VULKAN)) {
      fprintf(stderr, "select-host: needs PoCL and lavapipe\n");
      return 77;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_host_views)};
    return cmocka_run_group_tests_name("select-host", tests, NULL, NULL);
  }
  if (!have(ARROW_DEVICE_CUDA) || !have(ARROW_DEVICE_ROCM)) {
    fprintf(stderr, "select-%s: needs both GPU simulators\n", which);
    return 77;
  }
  if (strcmp(which, "sim") == 0) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_sim_default)};
    return cmocka_run_group_tests_name("select-sim", tests, NULL, NULL);
  }
  if (strcmp(which, "sim-same-uuid") == 0) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_sim_same_uuid)};
    return cmocka_run_group_tests_name("select-sim-same-uuid", tests, NULL, NULL);
  }
  if (strcmp(which, "sim-same-pci") == 0) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_sim_same_pci)};
    return cmocka_run_group_tests_name("select-sim-same-pci", tests, NULL, NULL);
  }
  if (strcmp(which, "sim-integrated") == 0) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_sim_integrated)};
    return cmocka_run_group_tests_name("select-sim-integrated", tests, NULL, NULL);
  }
  fprintf(stderr, "test_select: unknown case '%s'\n", which);
  return 2;
}
