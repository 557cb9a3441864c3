/* SPDX-License-Identifier: Apache-2.0
 *
 * ADR_ALLOC as the process sees it: registered once per case with the
 * variable set (tests/memory/meson.build); argv[1] names the case.
 *   none       ADR_ALLOC=none: the plain backend handler is the default
 *   limit      ADR_ALLOC=pool:limit=1MiB,max_cached=0: a limit adaptor over
 *              the pool on every device; the pool keeps nothing cached
 *   track      runs itself as "track-child" with ADR_ALLOC=pool:track and
 *              ADR_LOG=debug,file=$ADR_TEST_LOG_FILE, which leaks one
 *              tagged allocation; then checks the exit report in the log
 *   malformed  ADR_ALLOC=pool:max_cached=2XB: every allocation fails with
 *              the parser's message; other calls still work
 *   thp-default, thp-all, thp-off
 *              ADR_ALLOC=pool:chunk=8MiB[,hugepages|,nohugepages]: which
 *              CPU allocations land in memory advised transparent huge
 *              pages (a 3 MiB and an 8 MiB request, each in a chunk of its
 *              own; the default advises chunks made for 4 MiB or more)
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "adr/adr.h"
#include "adr/memory.h"
#include "vmflags.h"

static struct adr_device* cpu;
static const char* mode;
static const char* self;

static int setup(void** state) {
  (void)state;
  return adr_device_get(ARROW_DEVICE_CPU, 0, &cpu, NULL) == 0 ? 0 : -1;
}

static void test_none(void** state) {
  (void)state;
  assert_ptr_equal(adr_allocator_get(cpu), adr_allocator_backend());
  void* p = NULL;
  assert_int_equal(adr_alloc(cpu, 4096, 0, NULL, &p, NULL), 0);
  assert_int_equal(adr_free(cpu, p, 4096, NULL, NULL), 0);
  struct adr_memory_stats s;
  s.struct_size = sizeof(s);
  assert_int_equal(adr_memory_stats_get(cpu, &s, NULL), 0);
  assert_int_equal(s.reserved_bytes.total, 0); /* the pool was never used */
  assert_int_equal(s.allocated_count.total, 1);
}

static void test_limit(void** state) {
  (void)state;
  const struct adr_allocator* h = adr_allocator_get(cpu);
  assert_string_equal(h->name, "limit");
  void *a = NULL, *b = NULL;
  struct adr_error err;
  assert_int_equal(adr_alloc(cpu, 700 * 1024, 0, NULL, &a, NULL), 0);
  assert_int_equal(adr_alloc(cpu, 700 * 1024, 0, NULL, &b, &err), ENOMEM);
  assert_non_null(strstr(err.message, "limit 1 MiB"));
  assert_int_equal(adr_free(cpu, a, 700 * 1024, NULL, NULL), 0);
  /* max_cached=0: the pool handed its chunk back on the free. */
  struct adr_memory_stats s;
  s.struct_size = sizeof(s);
  assert_int_equal(adr_memory_stats_get(cpu, &s, NULL), 0);
  assert_int_equal(s.reserved_bytes.current, 0);
  assert_true(s.trimmed_bytes > 0);
  /* The adaptor ADR_ALLOC made belongs to the device. */
  assert_int_equal(adr_allocator_destroy((struct adr_allocator*)h, &err), EBUSY);
}

/* ADR_ALLOC=backend:limit=0.72KB is 720 bytes exactly (issue 11). */
static void test_decimal_limit(void** state) {
  (void)state;
  assert_string_equal(adr_allocator_get(cpu)->name, "limit");
  void* p = NULL;
  struct adr_error err;
  assert_int_equal(adr_alloc(cpu, 721, 0, NULL, &p, &err), ENOMEM);
  assert_non_null(strstr(err.message, "limit 720 B"));
  assert_int_equal(adr_alloc(cpu, 720, 0, NULL, &p, &err), 0);
  assert_int_equal(adr_free(cpu, p, 720, NULL, NULL), 0);
}

/* ADR_ALLOC=pool:limit=18446744073709551615: the largest size, accepted
 * (a limit nothing reaches). */
static void test_max_limit(void** state) {
  (void)state;
  assert_string_equal(adr_allocator_get(cpu)->name, "limit");
  void* p = NULL;
  struct adr_error err;
  if (adr_alloc(cpu, 4096, 0, NULL, &p, &err) != 0) fail_msg("%s", err.message);
  assert_int_equal(adr_free(cpu, p, 4096, NULL, NULL), 0);
}

static void test_track(void** state) {
  (void)state;
  const struct adr_allocator* h = adr_allocator_get(cpu);
  assert_string_equal(h->name, "tracking");
  adr_memory_tag_set("left-behind");
  void* p = NULL;
  assert_int_equal(adr_alloc(cpu, 12345, 0, NULL, &p, NULL), 0);
  size_t n = 0;
  assert_int_equal(adr_allocator_tracking_list(h, NULL, NULL, &n, NULL), 0);
  assert_int_equal(n, 1);
  /* p is deliberately not freed: the exit report must name it. */
}

static void test_track_check(void** state) {
  (void)state;
  const char* path = getenv("ADR_TEST_LOG_FILE");
  assert_non_null(path);
  remove(path);
  char cmd[4096];
  snprintf(cmd, sizeof(cmd), "ADR_ALLOC=pool:track ADR_LOG='debug,file=%s' '%s' track-child", path,
           self);
  assert_int_equal(system(cmd), 0);
  FILE* f = fopen(path, "r");
  assert_non_null(f);
  static char buf[1 << 20];
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  buf[n] = '\0';
  fclose(f);
  if (strstr(buf, "leak: 12345 bytes") == NULL || strstr(buf, "tag left-behind") == NULL)
    fail_msg("no leak report in the log:\n%s", buf);
}

static void test_malformed(void** state) {
  (void)state;
  void* p = NULL;
  struct adr_error err;
  assert_int_equal(adr_alloc(cpu, 64, 0, NULL, &p, &err), EINVAL);
  assert_string_equal(err.message,
                      "ADR_ALLOC=\"pool:max_cached=2XB\": column 18: expected a unit (B, K, KiB, "
                      "KB, M, MiB, MB, G, GiB, GB, T, TiB, TB), found 'X'");
  /* The same message every time; the device itself works. */
  assert_int_equal(adr_alloc(cpu, 64, 0, NULL, &p, &err), EINVAL);
  assert_non_null(strstr(err.message, "column 18"));
  struct adr_device_info info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  assert_int_equal(adr_device_info_get(cpu, &info, NULL), 0);
}

/* Allocates `size` bytes on the CPU device and says whether they lie in
 * memory advised huge pages (kept allocated: each request gets a chunk). */
static bool alloc_advised(size_t size) {
  void* p = NULL;
  struct adr_error err;
  if (adr_alloc(cpu, size, 0, NULL, &p, &err) != 0) fail_msg("adr_alloc: %s", err.message);
  memset(p, 1, size);
  return vmflags_huge_advised((uintptr_t)p, (uintptr_t)p + size);
}

static void test_thp(void** state) {
  (void)state;
  bool all = strcmp(mode, "thp-all") == 0, off = strcmp(mode, "thp-off") == 0;
  /* What the pool says it does, whatever the kernel supports. */
  struct adr_memory_stats s = {.struct_size = sizeof(s)};
  struct adr_error err;
  if (adr_memory_stats_get(cpu, &s, &err) != 0) fail_msg("adr_memory_stats_get: %s", err.message);
  assert_int_equal(s.host_pages, all   ? ADR_HOST_PAGES_HUGE_ALL
                                 : off ? 0u
                                       : ADR_HOST_PAGES_HUGE_LARGE);
  char line[512];
  const char* text = adr_memory_stats_format(&s, line, sizeof(line));
  assert_non_null(strstr(text, all   ? "host pages: huge pages for every chunk"
                               : off ? "oom retries 0"
                                     : "host pages: huge pages for chunks of 4 MiB+"));
  assert_int_equal(strstr(text, "host pages") != NULL, !off);
  if (!vmflags_thp_supported()) {
    print_message("kernel without transparent huge pages: the advice is refused\n");
    return;
  }
  /* A 3 MiB block in an 8 MiB chunk overlaps the chunk's 2 MiB-aligned
   * part wherever the pool puts it. Checked before the 8 MiB request, so
   * that no advised mapping exists yet in the default mode. */
  assert_int_equal(alloc_advised((size_t)3 << 20), all);
  assert_int_equal(alloc_advised((size_t)8 << 20), !off);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr,
            "usage: test_alloc_env none|limit|track|track-child|malformed|decimal-limit|max-limit|"
            "thp-default|thp-all|thp-off\n");
    return 2;
  }
  mode = argv[1];
  self = argv[0];
  struct CMUnitTest t;
  if (strcmp(mode, "none") == 0)
    t = (struct CMUnitTest)cmocka_unit_test(test_none);
  else if (strcmp(mode, "limit") == 0)
    t = (struct CMUnitTest)cmocka_unit_test(test_limit);
  else if (strcmp(mode, "track-child") == 0)
    t = (struct CMUnitTest)cmocka_unit_test(test_track);
  else if (strcmp(mode, "track") == 0)
    t = (struct CMUnitTest)cmocka_unit_test(test_track_check);
  else if (strcmp(mode, "malformed") == 0)
    t = (struct CMUnitTest)cmocka_unit_test(test_malformed);
  else if (strcmp(mode, "decimal-limit") == 0)
    t = (struct CMUnitTest)cmocka_unit_test(test_decimal_limit);
  else if (strcmp(mode, "max-limit") == 0)
    t = (struct CMUnitTest)cmocka_unit_test(test_max_limit);
  else if (strncmp(mode, "thp-", 4) == 0)
    t = (struct CMUnitTest)cmocka_unit_test(test_thp);
  else
    return 2;
  const struct CMUnitTest tests[] = {t};
  return cmocka_run_group_tests(tests, strcmp(mode, "track") == 0 ? NULL : setup, NULL);
}
