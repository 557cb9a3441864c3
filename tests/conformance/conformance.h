/* SPDX-License-Identifier: Apache-2.0
 *
 * The adr conformance suite: shared declarations.
 *
 * The suite is written once against the public API (adr/adr.h) and run once
 * per backend; it is the definition of "a backend works". See README.md.
 *
 * Every test runs against g_conf.dev (the device ADR_DEVICE selects) with
 * g_conf.host as the host side of transfers: the CPU device g_conf.cpu, or,
 * in host mode (ADR_CONFORMANCE_HOST=null), a NULL device (pageable host
 * memory, handled by the core), in which mode g_conf.cpu is NULL unless
 * the CPU is the device under test, and a run with ADR_BACKENDS excluding
 * cpu proves that no cpu backend is loaded (test_host_no_cpu_backend).
 * test_host.c uses the NULL device explicitly in every mode. Device memory is
 * only ever read back through adr_copy into host memory, never dereferenced,
 * except in the test of ADR_CAP_HOST_ACCESSIBLE.
 *
 * Resources (host buffers, device allocations, streams, events) are created
 * through the conf_* helpers below, which record them; the per-test teardown
 * releases whatever a failing test left behind, so a failure does not turn
 * into a leak report under LeakSanitizer. Tracking is thread-safe.
 */
#ifndef ADR_CONFORMANCE_H
#define ADR_CONFORMANCE_H

/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <adr/adr.h>

#define CONF_KIB ((size_t)1024)
#define CONF_MIB ((size_t)1024 * 1024)

struct conf_globals {
  struct adr_device* dev;  /* device under test */
  struct adr_device* cpu;  /* the CPU device; NULL in host mode */
  struct adr_device* host; /* host side of transfers: cpu, or NULL in host mode */
  bool host_mode;          /* ADR_CONFORMANCE_HOST=null */
  struct adr_device_info info;
  struct adr_device* peer; /* ADR_CONFORMANCE_PEER, NULL when unset */
  const char* peer_spec;
};
extern struct conf_globals g_conf;

/* Sentinel written into an adr_error before a call that must succeed: the
 * API promises the message is left untouched on success. */
#define CONF_UNTOUCHED "<conformance: untouched>"

/* Runs `call`, which must pass CONF_ERR as its error argument, and fails
 * the test with the status name and message unless it returns 0. Also
 * checks that a successful call left the error untouched. */
#define CONF_ERR (&conf_err_)
#define ASSERT_OK(call)                                                                      \
  do {                                                                                       \
    struct adr_error conf_err_;                                                              \
    memcpy(conf_err_.message, CONF_UNTOUCHED, sizeof(CONF_UNTOUCHED));                       \
    int conf_st_ = (call);                                                                   \
    if (conf_st_ != 0) conf_fault_accept(conf_st_, conf_err_.message);                       \
    if (conf_st_ != 0)                                                                       \
      fail_msg("%s\n  returned %s (%d): %s", #call, adr_status_name(conf_st_), conf_st_,     \
               conf_err_.message);                                                           \
    if (strcmp(conf_err_.message, CONF_UNTOUCHED) != 0)                                      \
      fail_msg("%s\n  succeeded but wrote the error message: %s", #call, conf_err_.message); \
  } while (0)

/* Runs `call` (passing CONF_ERR) and requires status `want` (or `want2`,
 * when not 0) and a non-empty message that names operation `op` as
 * "[op]". */
#define ASSERT_ERR2(call, want, want2, op)                                                    \
  do {                                                                                        \
    struct adr_error conf_err_;                                                               \
    memset(conf_err_.message, 0, sizeof(conf_err_.message));                                  \
    int conf_st_ = (call);                                                                    \
    conf_check_error(#call, conf_st_, (want), (want2), &conf_err_, (op), __FILE__, __LINE__); \
  } while (0)
#define ASSERT_ERR(call, want, op) ASSERT_ERR2(call, want, 0, op)

void conf_check_error(const char* expr, int status, int want, int want2,
                      const struct adr_error* error, const char* op, const char* file, int line);

/* Fault mode (ADR_CONFORMANCE_FAULT, docs/lifetime.md): when a call
 * failed because of the injected fault (the fault fired, the status is the
 * injected one, the message is clean), the case stops here as skipped
 * instead of failing. Returns (does nothing) otherwise. `text` variant: a
 * failure recorded as text on another thread. */
void conf_fault_accept(int status, const char* message);
void conf_fault_accept_text(const char* text);

/* ---- deterministic data ------------------------------------------------- */

/* Byte i of pattern `seed`; different seeds give different bytes at almost
 * every index, and no short period, so a shifted or truncated copy is seen. */
static inline uint8_t conf_pattern_byte(uint32_t seed, size_t i) {
  uint64_t x = (uint64_t)i * 0x9E3779B97F4A7C15ull + (uint64_t)seed * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return (uint8_t)(x ^ (x >> 17) ^ (seed * 31u));
}
void conf_fill(void* buf, size_t n, uint32_t seed);
/* Fails the test at the first byte of buf[0, n) that differs from pattern
 * `seed` taken at [pattern_offset, pattern_offset + n). */
void conf_expect_pattern_at(const void* buf, size_t n, uint32_t seed, size_t pattern_offset,
                            const char* what);
#define conf_expect_pattern(buf, n, seed, what) conf_expect_pattern_at(buf, n, seed, 0, what)
/* Fails the test at the first byte of buf[0, n) that is not `value`. */
void conf_expect_bytes(const void* buf, size_t n, uint8_t value, const char* what);

/* ---- tracked resources -------------------------------------------------- */

/* malloc (failing the test when it fails); freed by conf_host_free or the
 * teardown. */
void* conf_host_alloc(size_t n);
void conf_host_free(void* p);

/* adr_alloc on `dev`, asserting success and 0 % max(alignment, 64); freed
 * by conf_dev_free (adr_free, asserting success) or the teardown. */
void* conf_dev_alloc(struct adr_device* dev, size_t size, size_t alignment,
                     struct adr_stream* stream);
void conf_dev_free(struct adr_device* dev, void* p, size_t size, struct adr_stream* stream);
/* For tests that call adr_alloc/adr_free themselves. */
void conf_track_dev(struct adr_device* dev, void* p, size_t size);
void conf_untrack(void* p);

struct adr_stream* conf_stream_create(struct adr_device* dev);
void conf_stream_destroy(struct adr_stream* s);
struct adr_event* conf_event_create(struct adr_device* dev);
void conf_event_destroy(struct adr_event* e);
/* Record a stream or event made by other means (adr_*_import); released
 * by conf_stream_destroy / conf_event_destroy or the teardown. */
void conf_track_stream(struct adr_stream* s);
void conf_track_event(struct adr_event* e);

/* Copies host[0, n) to dev_ptr on g_conf.dev, and back; NULL stream. */
void conf_upload(struct adr_device* dev, void* dev_ptr, const void* host, size_t n);
void conf_download(struct adr_device* dev, void* host, const void* dev_ptr, size_t n);

/* Per-test teardown: synchronizes and releases every tracked resource. */
int conf_teardown(void** state);

/* Integer/ptr helpers. */
static inline uintptr_t conf_addr(const void* p) {
  return (uintptr_t)p;
}

/* ---- the tests ---------------------------------------------------------- */

/* test_device.c */
void test_device_identity(void** state);
void test_device_info(void** state);
void test_device_selection(void** state);
void test_host_accessible(void** state);
void test_pointer_query(void** state);

/* test_alloc.c */
void test_alloc_sizes_and_alignments(void** state);
void test_alloc_zero_size(void** state);
void test_alloc_bad_alignment(void** state);
void test_alloc_size_overflow(void** state);
void test_alloc_many(void** state);

/* test_copy.c */
void test_copy_host_to_device(void** state);
void test_copy_device_to_host(void** state);
void test_copy_device_to_device(void** state);
void test_copy_slices(void** state);
void test_copy_zero_size(void** state);
void test_copy_null_stream_is_synchronous(void** state);
void test_copy_on_host_stream(void** state);
void test_copy_sync_downloads(void** state);

/* test_host.c: pageable host memory as a NULL device */
void test_host_upload_download(void** state);
void test_host_on_streams(void** state);
void test_host_slices(void** state);
void test_host_memset(void** state);
void test_host_to_host(void** state);
void test_host_errors(void** state);
void test_host_stream_of_other_device(void** state);
void test_host_no_cpu_backend(void** state);

/* test_memset.c */
void test_memset_full(void** state);
void test_memset_partial_and_middle(void** state);

/* test_stream.c */
void test_stream_create_destroy(void** state);
void test_stream_queued_work(void** state);
void test_stream_default(void** state);
void test_stream_destroy_default(void** state);
void test_stream_ordered_alloc_free(void** state);

/* test_event.c */
void test_event_orders_two_streams(void** state);
void test_event_query_and_synchronize(void** state);
void test_event_never_recorded(void** state);
void test_event_native(void** state);

/* test_errors.c */
void test_free_unknown_pointer(void** state);
void test_free_wrong_size(void** state);
void test_double_free(void** state);
void test_null_arguments(void** state);
void test_unknown_device_id(void** state);
void test_copy_null_pointers(void** state);
void test_stream_of_other_device(void** state);

/* test_concurrency.c */
void test_concurrent_threads(void** state);

/* test_import.c */
void test_import_event(void** state);
void test_import_stream(void** state);

/* test_ordering.c */
void test_order_application_work(void** state);
void test_order_foreign_event_gate(void** state);
void test_copy_overlapping(void** state);

/* test_peer.c */
void test_peer_round_trip(void** state);

/* test_blocking.c */
void test_blocking_sizes_and_offsets(void** state);
void test_blocking_after_queued_work(void** state);
void test_blocking_after_gated_work(void** state);
void test_blocking_after_application_work(void** state);
void test_async_small_copy_busy_stream(void** state);

#endif /* ADR_CONFORMANCE_H */
