/* SPDX-License-Identifier: Apache-2.0
 *
 * A test plugin, built into several shared modules that differ only in the
 * macros below, the way the Vulkan loader tests its ICD handling:
 *
 *   PLUGIN_NAME       backend name (string)
 *   PLUGIN_TYPE       the ArrowDeviceType it claims
 *   NO_ENTRY          do not export adr_backend_query
 *   ABI_MAJOR/MINOR   the versions the table reports
 *   STRUCT_SIZE       the struct_size the table reports
 *   NULL_ALLOC        leave the required alloc slot NULL
 *   INIT_STATUS       what init returns
 *   UNDEFINED_SYMBOL  reference a function nothing defines
 *   MARKER            a constructor that writes $ADR_TEST_MARKER_DIR/<name>
 *
 * The working variants are a host-memory "device" that the core must treat
 * as foreign memory (not host-accessible): copy routing and staging are
 * tested through it. It counts its copy calls by route.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adr/backend.h"

#ifndef ABI_MAJOR
#define ABI_MAJOR ADR_BACKEND_ABI_MAJOR
#endif
#ifndef ABI_MINOR
#define ABI_MINOR ADR_BACKEND_ABI_MINOR
#endif
#ifndef STRUCT_SIZE
#define STRUCT_SIZE sizeof(struct adr_backend)
#endif
#ifndef INIT_STATUS
#define INIT_STATUS 0
#endif

#ifdef MARKER
__attribute__((constructor)) static void leave_marker(void) {
  const char* dir = getenv("ADR_TEST_MARKER_DIR");
  if (dir == NULL) return;
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s", dir, PLUGIN_NAME);
  int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
  if (fd >= 0) close(fd);
}
#endif

#ifdef UNDEFINED_SYMBOL
void adr_test_symbol_nobody_defines(void);
#endif

/* Route counters, read by tests through dlsym on the loaded module. The
 * second line counts what the default-stream teardown contract
 * (adr/backend.h) is about, for tests/loader/test_teardown.c: calls of
 * stream_destroy on the default stream (the core must make none), on
 * other streams, stream_synchronize on the default stream, device_close,
 * device_close before the default stream was drained, and shutdown. */
struct adr_test_plugin_stats {
  long h2d, d2h, d2d, peer, alloc, free;
  long default_destroy, stream_destroy, default_sync, device_close, close_undrained, shutdown;
};
ADR_BACKEND_EXPORT struct adr_test_plugin_stats adr_test_plugin_stats;

struct adr_backend_device {
  int id;
};
struct adr_backend_stream {
  int unused;
};
struct adr_backend_event {
  int unused;
};

static struct adr_backend_device devices[2] = {{0}, {1}};
static struct adr_backend_stream default_stream;

static int t_init(struct adr_error* error) {
#ifdef UNDEFINED_SYMBOL
  adr_test_symbol_nobody_defines();
#endif
  if (INIT_STATUS != 0)
    return adr_backend_error_set(error, INIT_STATUS, "TEST_FAILURE: %s init fails on purpose",
                                 PLUGIN_NAME);
  return 0;
}

static int t_device_count(ArrowDeviceType type, int64_t* out, struct adr_error* error) {
  *out = 2;
  return 0;
}

static int t_device_open(ArrowDeviceType type, int64_t id, struct adr_backend_device** out,
                         struct adr_error* error) {
  if (id < 0 || id > 1) return adr_backend_error_set(error, ENODEV, "no device");
  *out = &devices[id];
  return 0;
}

static void t_device_close(struct adr_backend_device* dev) {
  adr_test_plugin_stats.device_close++;
  if (adr_test_plugin_stats.default_sync == 0) adr_test_plugin_stats.close_undrained++;
}

static void t_shutdown(void) {
  adr_test_plugin_stats.shutdown++;
}

static int t_device_info(struct adr_backend_device* dev, struct adr_device_info* out,
                         struct adr_error* error) {
  snprintf(out->name, sizeof(out->name), "test device %d", dev->id);
  snprintf(out->vendor, sizeof(out->vendor), "adr tests");
  return 0;
}

#ifndef NULL_ALLOC
static int t_alloc(struct adr_backend_device* dev, size_t size, size_t alignment,
                   struct adr_backend_stream* stream, void** out, struct adr_error* error) {
  void* p = aligned_alloc(alignment, (size + alignment - 1) & ~(alignment - 1));
  if (p == NULL) return adr_backend_error_set(error, ENOMEM, "ENOMEM: out of test memory");
  adr_test_plugin_stats.alloc++;
  *out = p;
  return 0;
}

#endif

static int t_free(struct adr_backend_device* dev, void* ptr, size_t size,
                  struct adr_backend_stream* stream, struct adr_error* error) {
  adr_test_plugin_stats.free++;
  free(ptr);
  return 0;
}

static int t_copy(struct adr_backend_device* dst_dev, void* dst, struct adr_backend_device* src_dev,
                  const void* src, size_t size, struct adr_backend_stream* stream,
                  struct adr_error* error) {
  if (dst_dev == NULL)
    adr_test_plugin_stats.d2h++;
  else if (src_dev == NULL)
    adr_test_plugin_stats.h2d++;
  else if (src_dev == dst_dev)
    adr_test_plugin_stats.d2d++;
  else
    adr_test_plugin_stats.peer++;
  memmove(dst, src, size);
  return 0;
}

static int t_memset(struct adr_backend_device* dev, void* ptr, int value, size_t size,
                    struct adr_backend_stream* stream, struct adr_error* error) {
  memset(ptr, value, size);
  return 0;
}

static int t_stream_create(struct adr_backend_device* dev, uint32_t flags,
                           struct adr_backend_stream** out, struct adr_error* error) {
  if (flags & ADR_BACKEND_STREAM_DEFAULT) {
    *out = &default_stream;
    return 0;
  }
  *out = calloc(1, sizeof(**out));
  return *out ? 0 : ENOMEM;
}

static int t_stream_destroy(struct adr_backend_device* dev, struct adr_backend_stream* s,
                            struct adr_error* error) {
  if (s == &default_stream) {
    adr_test_plugin_stats.default_destroy++;
    return adr_backend_error_set(error, EINVAL, "the default stream is released by device_close");
  }
  adr_test_plugin_stats.stream_destroy++;
  free(s);
  return 0;
}

static int t_ok_stream(struct adr_backend_device* dev, struct adr_backend_stream* s,
                       struct adr_error* error) {
  if (s == &default_stream) adr_test_plugin_stats.default_sync++;
  return 0;
}

static int t_event_create(struct adr_backend_device* dev, struct adr_backend_event** out,
                          struct adr_error* error) {
  *out = calloc(1, sizeof(**out));
  return *out ? 0 : ENOMEM;
}

static int t_event_destroy(struct adr_backend_device* dev, struct adr_backend_event* e,
                           struct adr_error* error) {
  free(e);
  return 0;
}

static int t_event_on_stream(struct adr_backend_device* dev, struct adr_backend_event* e,
                             struct adr_backend_stream* s, struct adr_error* error) {
  return 0;
}

static int t_event_ok(struct adr_backend_device* dev, struct adr_backend_event* e,
                      struct adr_error* error) {
  return 0;
}

static void* t_event_native(struct adr_backend_device* dev, struct adr_backend_event* e) {
  return e;
}

static const ArrowDeviceType types[] = {PLUGIN_TYPE};

static const struct adr_backend table = {
    .abi_major = ABI_MAJOR,
    .abi_minor = ABI_MINOR,
    .struct_size = STRUCT_SIZE,
    .name = PLUGIN_NAME,
    .version = "test",
    .device_types = types,
    .device_type_count = 1,
    .init = t_init,
    .shutdown = t_shutdown,
    .device_count = t_device_count,
    .device_open = t_device_open,
    .device_close = t_device_close,
    .device_info = t_device_info,
#ifndef NULL_ALLOC
    .alloc = t_alloc,
#endif
    .free = t_free,
    .copy = t_copy,
    .memset = t_memset,
    .stream_create = t_stream_create,
    .stream_destroy = t_stream_destroy,
    .stream_synchronize = t_ok_stream,
    .event_create = t_event_create,
    .event_destroy = t_event_destroy,
    .event_record = t_event_on_stream,
    .event_wait = t_event_on_stream,
    .event_synchronize = t_event_ok,
    .event_query = t_event_ok,
    .event_native = t_event_native,
};

#ifndef NO_ENTRY
static void keep_host(const struct adr_backend_host* host) {
  (void)host; /* the test plugins use no host service */
}
ADR_BACKEND_DEFINE_QUERY(table, keep_host)
#else
/* Keep the table referenced so the module is otherwise identical. */
ADR_BACKEND_EXPORT const struct adr_backend* adr_test_not_the_entry(void);
ADR_BACKEND_EXPORT const struct adr_backend* adr_test_not_the_entry(void) {
  return &table;
}
#endif
