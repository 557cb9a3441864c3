/* SPDX-License-Identifier: Apache-2.0
 *
 * The ADR_VULKAN_VALIDATION=fatal switch that the Vulkan conformance and
 * test runs rely on: a process in which the validation layer reported
 * anything must not exit 0, and a clean process must.
 *
 * Each case forks a child before anything touches Vulkan; the child opens
 * vulkan:0 with the switch set, optionally makes one invalid Vulkan call on
 * adr's VkDevice (a VkEventCreateInfo with undefined flags, which the
 * layer rejects without calling the driver), checks that the backend
 * counted it (the "validation_messages" property), and returns 0 from main.
 * The parent checks the child's exit status: 70 after the invalid call, 0
 * without it.
 */
#include <sys/wait.h>
#include <unistd.h>

#include "vk_test.h"

/* Child: 0..2 = what happened before exit; the exit status is the test. */
static int child(bool invalid) {
  struct vkt t;
  int st = vkt_open(&t);
  if (st != 0) return st == ENODEV ? 77 : 3;
  struct vkt_prop p = {.key = "validation_messages"};
  adr_device_properties(t.dev, vkt_prop_cb, &p, NULL);
  if (strcmp(p.value, "0") != 0) return 4;
  if (invalid) {
    VkEventCreateInfo eci = {.sType = VK_STRUCTURE_TYPE_EVENT_CREATE_INFO, .flags = 0x40000000};
    VkEvent ev = VK_NULL_HANDLE;
    VkResult r = vkCreateEvent(t.device, &eci, NULL, &ev);
    if (r == VK_SUCCESS) vkDestroyEvent(t.device, ev, NULL);
    struct vkt_prop q = {.key = "validation_messages"};
    adr_device_properties(t.dev, vkt_prop_cb, &q, NULL);
    if (strtoll(q.value, NULL, 10) < 1) return 5; /* not counted */
  }
  /* Allocate and copy a little, so a clean run does real work. */
  void* d = NULL;
  if (adr_alloc(t.dev, 1000, 0, NULL, &d, NULL) != 0) return 6;
  char x[1000] = {1}, y[1000] = {0};
  if (adr_copy(t.dev, d, t.cpu, x, sizeof(x), NULL, NULL) != 0 ||
      adr_copy(t.cpu, y, t.dev, d, sizeof(y), NULL, NULL) != 0 || memcmp(x, y, sizeof(x)) != 0)
    return 7;
  if (adr_free(t.dev, d, 1000, NULL, NULL) != 0) return 8;
  return 0; /* exit() runs adr's teardown, where the fatal switch acts */
}

static int run_child(bool invalid) {
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) exit(child(invalid));
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  return WEXITSTATUS(status);
}

static void test_invalid_call_fails_the_process(void** state) {
  (void)state;
  assert_int_equal(run_child(true), 70);
}

static void test_clean_process_exits_zero(void** state) {
  (void)state;
  assert_int_equal(run_child(false), 0);
}

int main(void) {
  const char* v = getenv("ADR_VULKAN_VALIDATION");
  if (v == NULL || strcmp(v, "fatal") != 0) {
    fprintf(stderr, "ADR_VULKAN_VALIDATION=fatal is not set: nothing to test\n");
    return 77;
  }
  /* Probe in a child whether vulkan:0 exists at all (77 = no device). */
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    struct vkt t;
    int st = vkt_open(&t);
    exit(st == 0 ? 0 : st == ENODEV ? 77 : 3);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return 1;
  if (WEXITSTATUS(status) == 77 && getenv("ADR_VKTEST_REQUIRE") == NULL) return 77;
  if (WEXITSTATUS(status) != 0) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_invalid_call_fails_the_process),
      cmocka_unit_test(test_clean_process_exits_zero),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
