/* SPDX-License-Identifier: Apache-2.0
 *
 * Fault injection for tests, in the spirit of SQLite's test VFS: a countdown
 * over the dispatched backend calls (every fallible call through
 * core/dispatch.c but the loader's init and device_count: the pool's own
 * chunk allocations and events included) or over the core's own
 * allocations (fault_alloc.h), that makes the Nth matching call fail with a
 * chosen status, once or from then on.
 *
 * Controlled by adr_test_fault_set (adr/testing.h) or ADR_FAULT. The
 * configuration is written by one thread while no other changes it (tests
 * arm it between workloads); the counters are atomic so calls on any thread
 * count. Off, dispatch.c and the allocation wrappers read one relaxed
 * atomic and branch.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adr/testing.h"
#include "internal.h"

/* This file calls the real allocator. */
#undef malloc
#undef calloc
#undef realloc
#undef aligned_alloc
#undef strdup
#undef strndup

_Atomic int adr__fault_armed;

static struct {
  char slot[32]; /* slot name, "any" */
  uint64_t nth;  /* 1-based; 0 = count only */
  int status;
  bool persistent;
  _Atomic uint64_t calls;
  _Atomic uint64_t fired;
} g;

/* The slots a test may name: every fallible slot dispatch.c injects into,
 * plus "any" and "malloc". */
static const char* const slots[] = {
    "any",
    "malloc",
    "alloc",
    "free",
    "copy",
    "memset",
    "stream_create",
    "stream_destroy",
    "stream_synchronize",
    "event_create",
    "event_destroy",
    "event_record",
    "event_wait",
    "event_synchronize",
    "event_query",
    "event_import",
    "stream_import",
    "device_open",
    "device_adopt",
    "pointer_query",
    "device_info",
    "device_native",
    "device_properties",
    "host_register",
    "host_unregister",
};

static bool known_slot(const char* name, size_t len) {
  for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]); i++)
    if (strlen(slots[i]) == len && strncmp(slots[i], name, len) == 0) return true;
  return false;
}

/* The countdown: true when this call is the one (or, persistent, one of
 * those) that must fail. */
static uint64_t count_and_fire(void) {
  uint64_t n = atomic_fetch_add_explicit(&g.calls, 1, memory_order_relaxed) + 1;
  if (g.nth == 0 || n < g.nth || (!g.persistent && n != g.nth)) return 0;
  atomic_fetch_add_explicit(&g.fired, 1, memory_order_relaxed);
  return n;
}

int adr__fault_dispatch(const char* slot, struct adr_error* error) {
  if (atomic_load_explicit(&adr__fault_armed, memory_order_acquire) != ADR__FAULT_DISPATCH)
    return 0;
  if (strcmp(g.slot, "any") != 0 && strcmp(g.slot, slot) != 0) return 0;
  uint64_t n = count_and_fire();
  if (n == 0) return 0;
  return adr_error_set(error, g.status, "%s: injected fault (call %" PRIu64 " of slot '%s')",
                       adr_status_name(g.status), n, slot);
}

static bool malloc_fails(void) {
  if (__builtin_expect(
          atomic_load_explicit(&adr__fault_armed, memory_order_relaxed) != ADR__FAULT_MALLOC, 1))
    return false;
  atomic_thread_fence(memory_order_acquire);
  if (count_and_fire() == 0) return false;
  errno = ENOMEM;
  return true;
}

void* adr__malloc(size_t size) {
  return malloc_fails() ? NULL : malloc(size);
}
void* adr__calloc(size_t n, size_t size) {
  return malloc_fails() ? NULL : calloc(n, size);
}
void* adr__realloc(void* ptr, size_t size) {
  return malloc_fails() ? NULL : realloc(ptr, size);
}
void* adr__aligned_alloc(size_t alignment, size_t size) {
  return malloc_fails() ? NULL : aligned_alloc(alignment, size);
}
char* adr__strdup(const char* s) {
  return malloc_fails() ? NULL : strdup(s);
}
char* adr__strndup(const char* s, size_t n) {
  return malloc_fails() ? NULL : strndup(s, n);
}

void adr__fault_disarm(void) {
  atomic_store_explicit(&adr__fault_armed, 0, memory_order_release);
}

static int arm(const char* slot, size_t slot_len, uint64_t nth, int status, bool persistent) {
  adr__fault_disarm();
  snprintf(g.slot, sizeof(g.slot), "%.*s", (int)slot_len, slot);
  g.nth = nth;
  g.status = status;
  g.persistent = persistent;
  atomic_store_explicit(&g.calls, 0, memory_order_relaxed);
  atomic_store_explicit(&g.fired, 0, memory_order_relaxed);
  atomic_store_explicit(&adr__fault_armed,
                        strcmp(g.slot, "malloc") == 0 ? ADR__FAULT_MALLOC : ADR__FAULT_DISPATCH,
                        memory_order_release);
  return 0;
}

int adr_test_fault_set(const char* slot, uint64_t nth, int status, bool persistent,
                       struct adr_error* error) {
  if (slot == NULL || !known_slot(slot, strlen(slot)))
    return adr__errorf(error, EINVAL, "adr_test_fault_set", NULL,
                       "unknown slot '%s' (a backend slot name such as alloc or copy, 'any' or "
                       "'malloc')",
                       slot ? slot : "(null)");
  if (status <= 0)
    return adr__errorf(error, EINVAL, "adr_test_fault_set", NULL,
                       "status %d is not a positive errno value", status);
  return arm(slot, strlen(slot), nth, status, persistent);
}

void adr_test_fault_clear(void) {
  adr__fault_disarm();
}

void adr_test_fault_counts(uint64_t* out_calls, uint64_t* out_fired) {
  if (out_calls) *out_calls = atomic_load_explicit(&g.calls, memory_order_relaxed);
  if (out_fired) *out_fired = atomic_load_explicit(&g.fired, memory_order_relaxed);
}

/* ---- ADR_FAULT=slot:nth:STATUS[:persistent] ------------------------------ */

static int env_status;
static struct adr_error env_error;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

static int parse_status(const char* s, size_t len) {
  if (len > 0 && isdigit((unsigned char)s[0])) {
    int v = 0;
    for (size_t i = 0; i < len; i++) {
      if (!isdigit((unsigned char)s[i]) || v > 100000) return 0;
      v = v * 10 + (s[i] - '0');
    }
    return v;
  }
  for (int v = 1; v < 256; v++) {
    const char* name = adr_status_name(v);
    if (strlen(name) == len && strncmp(name, s, len) == 0 && strcmp(name, "EUNKNOWN") != 0)
      return v;
  }
  return 0;
}

static int env_fail(const char* text, size_t column, const char* what) {
  env_status = adr__errorf(&env_error, EINVAL, "adr_init", NULL,
                           "ADR_FAULT=\"%s\": column %zu: expected %s", text, column, what);
  return env_status;
}

static void read_env(void) {
  const char* text = secure_getenv("ADR_FAULT");
  if (text == NULL || text[0] == '\0') return;
  const char* p = text;
  const char* colon = strchr(p, ':');
  if (colon == NULL || !known_slot(p, (size_t)(colon - p))) {
    env_fail(text, 1, "a slot name (alloc, copy ..., any, malloc) followed by ':'");
    return;
  }
  const char* slot = p;
  size_t slot_len = (size_t)(colon - p);
  p = colon + 1;
  uint64_t nth = 0;
  const char* digits = p;
  while (isdigit((unsigned char)*p) && nth < UINT64_MAX / 10)
    nth = nth * 10 + (uint64_t)(*p++ - '0');
  if (p == digits || *p != ':') {
    env_fail(text, (size_t)(p - text) + 1, "the call number N (0 = count only) followed by ':'");
    return;
  }
  p++;
  const char* st_text = p;
  while (*p != '\0' && *p != ':') p++;
  int status = parse_status(st_text, (size_t)(p - st_text));
  if (status <= 0) {
    env_fail(text, (size_t)(st_text - text) + 1, "a status name (EIO, ENOMEM ...) or number");
    return;
  }
  bool persistent = false;
  if (*p == ':') {
    if (strcmp(p + 1, "persistent") != 0) {
      env_fail(text, (size_t)(p - text) + 2, "'persistent' or the end");
      return;
    }
    persistent = true;
  }
  arm(slot, slot_len, nth, status, persistent);
}

int adr__fault_env(struct adr_error* error) {
  pthread_once(&env_once, read_env);
  if (env_status != 0 && error != NULL) *error = env_error;
  return env_status;
}
