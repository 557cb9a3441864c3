/* SPDX-License-Identifier: Apache-2.0
 *
 * Allocation handlers, adaptors, statistics, trim and the out-of-memory
 * chain through the public API (adr/memory.h), on the CPU device. Failures
 * are injected with a fault-injecting handler defined here (a test double
 * in the spirit of SQLite's test_vfs: a countdown to failure).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#if defined(__linux__)
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "adr/adr.h"
#include "adr/memory.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static struct adr_device* cpu;

static int setup(void** state) {
  (void)state;
  struct adr_error err;
  if (adr_device_get(ARROW_DEVICE_CPU, 0, &cpu, &err) != 0) {
    fprintf(stderr, "no CPU device: %s\n", err.message);
    return -1;
  }
  return 0;
}

/* ---- a counting, fault-injecting handler over another handler ----------- */

struct faulty {
  const struct adr_allocator* up;
  int allocs, frees, trims;
  int fail_next;       /* the next n allocations fail with ENOMEM */
  int trim_releases;   /* what trim reports released (bytes) */
  int fail_until_trim; /* fail until trim was called */
};

static int faulty_alloc(void* ctx, struct adr_device* dev, size_t size, size_t alignment,
                        struct adr_stream* stream, void** out, struct adr_error* error) {
  struct faulty* f = ctx;
  if (f->fail_next > 0 || (f->fail_until_trim && f->trims == 0)) {
    if (f->fail_next > 0) f->fail_next--;
    return adr_error_set(error, ENOMEM, "[adr_alloc][faulty] ENOMEM: injected failure");
  }
  int st = f->up->alloc(f->up->ctx, dev, size, alignment, stream, out, error);
  if (st == 0) f->allocs++;
  return st;
}

static int faulty_free(void* ctx, struct adr_device* dev, void* ptr, size_t size,
                       struct adr_stream* stream, struct adr_error* error) {
  struct faulty* f = ctx;
  f->frees++;
  return f->up->free(f->up->ctx, dev, ptr, size, stream, error);
}

static int faulty_trim(void* ctx, struct adr_device* dev, size_t* out_released,
                       struct adr_error* error) {
  (void)dev;
  (void)error;
  struct faulty* f = ctx;
  f->trims++;
  *out_released += (size_t)f->trim_releases;
  return 0;
}

static struct adr_allocator faulty_handler(struct faulty* f, const struct adr_allocator* up) {
  memset(f, 0, sizeof(*f));
  f->up = up;
  struct adr_allocator h = {
      .struct_size = sizeof(struct adr_allocator),
      .version = ADR_ALLOCATOR_VERSION,
      .name = "faulty",
      .ctx = f,
      .alloc = faulty_alloc,
      .free = faulty_free,
      .trim = faulty_trim,
  };
  return h;
}

static void* xalloc(size_t size) {
  void* p = NULL;
  struct adr_error err;
  int st = adr_alloc(cpu, size, 0, NULL, &p, &err);
  if (st != 0) fail_msg("adr_alloc(%zu): %s", size, err.message);
  return p;
}

static void xfree(void* p, size_t size) {
  struct adr_error err;
  int st = adr_free(cpu, p, size, NULL, &err);
  if (st != 0) fail_msg("adr_free(%zu): %s", size, err.message);
}

static struct adr_memory_stats device_stats(void) {
  struct adr_memory_stats s;
  memset(&s, 0, sizeof(s));
  s.struct_size = sizeof(s);
  assert_int_equal(adr_memory_stats_get(cpu, &s, NULL), 0);
  return s;
}

/* ---- tests --------------------------------------------------------------- */

static void test_default_is_pool(void** state) {
  (void)state;
  assert_ptr_equal(adr_allocator_get(cpu), adr_allocator_pool());
  assert_string_equal(adr_allocator_pool()->name, "pool");
  assert_string_equal(adr_allocator_backend()->name, "backend");
  void* p = xalloc(1000);
  memset(p, 7, 1000);
  xfree(p, 1000);
}

static void test_switch_frees_through_old_handler(void** state) {
  (void)state;
  struct faulty f;
  struct adr_allocator h = faulty_handler(&f, adr_allocator_backend());
  const struct adr_allocator* prev = NULL;
  assert_int_equal(adr_allocator_set(cpu, &h, &prev, NULL), 0);
  assert_ptr_equal(prev, adr_allocator_pool());
  assert_ptr_equal(adr_allocator_get(cpu), &h);
  void* a = xalloc(5000);
  assert_int_equal(f.allocs, 1);
  /* Switch back; a still belongs to h. */
  assert_int_equal(adr_allocator_set(cpu, adr_allocator_pool(), &prev, NULL), 0);
  assert_ptr_equal(prev, &h);
  void* b = xalloc(5000);
  assert_int_equal(f.allocs, 1);
  xfree(b, 5000);
  assert_int_equal(f.frees, 0);
  xfree(a, 5000);
  assert_int_equal(f.frees, 1);
}

static void test_alloc_with(void** state) {
  (void)state;
  struct faulty f;
  struct adr_allocator h = faulty_handler(&f, adr_allocator_pool());
  void* p = NULL;
  assert_int_equal(adr_alloc_with(cpu, &h, 777, 128, NULL, &p, NULL), 0);
  assert_int_equal((uintptr_t)p % 128, 0);
  assert_int_equal(f.allocs, 1);
  assert_ptr_equal(adr_allocator_get(cpu), adr_allocator_pool());
  /* adr_free finds the handler that made it. */
  xfree(p, 777);
  assert_int_equal(f.frees, 1);
}

static void test_bad_handlers(void** state) {
  (void)state;
  struct faulty f;
  struct adr_allocator h = faulty_handler(&f, adr_allocator_backend());
  struct adr_error err;
  struct adr_allocator bad = h;
  bad.struct_size = 8;
  assert_int_equal(adr_allocator_set(cpu, &bad, NULL, &err), EINVAL);
  assert_non_null(strstr(err.message, "struct_size 8 is smaller"));
  bad = h;
  bad.version = 99;
  assert_int_equal(adr_allocator_set(cpu, &bad, NULL, &err), EINVAL);
  assert_non_null(strstr(err.message, "unknown version 99"));
  bad = h;
  bad.free = NULL;
  assert_int_equal(adr_allocator_set(cpu, &bad, NULL, &err), EINVAL);
  assert_non_null(strstr(err.message, "handler 'faulty' has no free function"));
  assert_int_equal(adr_allocator_set(cpu, NULL, NULL, &err), EINVAL);
  assert_int_equal(adr_allocator_set(NULL, &h, NULL, &err), EINVAL);
  void* p;
  assert_int_equal(adr_alloc_with(cpu, &bad, 10, 0, NULL, &p, &err), EINVAL);
  assert_ptr_equal(adr_allocator_get(cpu), adr_allocator_pool());
}

static void test_zero_size_and_bad_free(void** state) {
  (void)state;
  void* a = xalloc(0);
  void* b = xalloc(0);
  assert_non_null(a);
  assert_ptr_not_equal(a, b);
  struct adr_error err;
  assert_int_equal(adr_free(cpu, a, 1, NULL, &err), EINVAL);
  assert_non_null(strstr(err.message, "allocated with size 0, freed with size 1"));
  xfree(a, 0);
  xfree(b, 0);
  assert_int_equal(adr_free(cpu, a, 0, NULL, &err), EINVAL);
  assert_non_null(strstr(err.message, "was not allocated on cpu:0"));
}

/* How the pool's threads should enter their caches here, asked the way
 * the pool asks: biased where the kernel offers membarrier's private
 * expedited command and registers the process for it, locked elsewhere and
 * in a ThreadSanitizer build. */
static uint32_t expected_thread_cache(void) {
#if defined(__SANITIZE_THREAD__)
  return ADR_THREAD_CACHE_LOCKED;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
  return ADR_THREAD_CACHE_LOCKED;
#endif
#endif
#if defined(__linux__) && defined(SYS_membarrier)
  long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  if (cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
      syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0)
    return ADR_THREAD_CACHE_BIASED;
#endif
  return ADR_THREAD_CACHE_LOCKED;
}

static void test_device_statistics(void** state) {
  (void)state;
  struct adr_memory_stats s0 = device_stats();
  void* a = xalloc(100 * KiB);
  void* b = xalloc(3 * MiB);
  struct adr_memory_stats s1 = device_stats();
  assert_int_equal(s1.allocated_bytes.current, s0.allocated_bytes.current + 100 * KiB + 3 * MiB);
  assert_int_equal(s1.allocated_count.current, s0.allocated_count.current + 2);
  assert_int_equal(s1.allocated_count.total, s0.allocated_count.total + 2);
  assert_int_equal(s1.allocated_bytes.total, s0.allocated_bytes.total + 100 * KiB + 3 * MiB);
  assert_true(s1.allocated_bytes.peak >= s1.allocated_bytes.current);
  assert_true(s1.reserved_bytes.current >= s1.allocated_bytes.current);
  assert_true(s1.cache_hits + s1.cache_misses >= s0.cache_hits + s0.cache_misses + 2);
  xfree(b, 3 * MiB);
  struct adr_memory_stats s2 = device_stats();
  assert_int_equal(s2.allocated_bytes.current, s1.allocated_bytes.current - 3 * MiB);
  assert_int_equal(s2.allocated_bytes.peak, s1.allocated_bytes.peak);
  assert_true(s2.cached_bytes >= 3 * MiB);
  assert_true(s2.largest_free_block >= 3 * MiB);
  assert_int_equal(adr_memory_stats_reset_peaks(cpu, NULL), 0);
  struct adr_memory_stats s3 = device_stats();
  assert_int_equal(s3.allocated_bytes.peak, s3.allocated_bytes.current);
  assert_int_equal(s3.allocated_count.peak, s3.allocated_count.current);
  assert_int_equal(s3.reserved_bytes.peak, s3.reserved_bytes.current);
  /* The same block again is a cache hit. */
  void* c = xalloc(3 * MiB);
  struct adr_memory_stats s4 = device_stats();
  assert_int_equal(s4.cache_hits, s3.cache_hits + 1);
  assert_int_equal(s4.cache_misses, s3.cache_misses);
  xfree(c, 3 * MiB);
  xfree(a, 100 * KiB);
  char line[512];
  adr_memory_stats_format(&s1, line, sizeof(line));
  assert_non_null(strstr(line, "allocated "));
  assert_non_null(strstr(line, "reserved "));
  assert_non_null(strstr(line, "cache hits"));
  /* the pool's cap on cached memory (default: device memory / 8, clamped) */
  assert_true(s1.max_cached >= 256 * MiB);
  assert_non_null(strstr(line, "(cap "));
  /* How threads enter their per-thread caches. */
  assert_int_equal(s1.thread_cache, expected_thread_cache());
  assert_non_null(strstr(line, s1.thread_cache == ADR_THREAD_CACHE_BIASED
                                   ? ", thread cache: biased (membarrier)"
                                   : ", thread cache: locked"));
  struct adr_memory_stats small;
  small.struct_size = 4;
  struct adr_error err;
  assert_int_equal(adr_memory_stats_get(cpu, &small, &err), EINVAL);
  assert_non_null(strstr(err.message, "struct_size 4 is too small"));
}

struct alloc_job {
  size_t size;
  int n;
  void* ptr[8];
};

/* Allocates job->n blocks of job->size on a thread of its own; they stay
 * live. */
static void* alloc_job_thread(void* p) {
  struct alloc_job* job = p;
  for (int i = 0; i < job->n; i++) job->ptr[i] = xalloc(job->size);
  return NULL;
}

static void run_alloc_job(struct alloc_job* job) {
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, alloc_job_thread, job), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
}

/* Peaks are exact when threads allocate what others free: the device's
 * figures are kept per allocation-table shard, and the peak rises only when the
 * sum of every thread's allocations exceeds it. */
static void test_statistics_peaks_across_threads(void** state) {
  (void)state;
  assert_int_equal(adr_memory_stats_reset_peaks(cpu, NULL), 0);
  struct adr_memory_stats s0 = device_stats();
  uint64_t bytes0 = s0.allocated_bytes.current, count0 = s0.allocated_count.current;
  assert_int_equal(s0.allocated_bytes.peak, bytes0);
  struct alloc_job a = {MiB, 4, {NULL}};
  run_alloc_job(&a); /* thread A: 4 MiB in 4 */
  struct adr_memory_stats s1 = device_stats();
  assert_int_equal(s1.allocated_bytes.current, bytes0 + 4 * MiB);
  assert_int_equal(s1.allocated_bytes.peak, bytes0 + 4 * MiB);
  assert_int_equal(s1.allocated_count.peak, count0 + 4);
  for (int i = 0; i < a.n; i++) xfree(a.ptr[i], a.size); /* freed here, not on A */
  struct adr_memory_stats s2 = device_stats();
  assert_int_equal(s2.allocated_bytes.current, bytes0);
  assert_int_equal(s2.allocated_bytes.peak, bytes0 + 4 * MiB);
  struct alloc_job b = {MiB, 3, {NULL}};
  run_alloc_job(&b); /* thread B: 3 MiB in 3, below the peak: not raised */
  struct adr_memory_stats s3 = device_stats();
  assert_int_equal(s3.allocated_bytes.current, bytes0 + 3 * MiB);
  assert_int_equal(s3.allocated_bytes.peak, bytes0 + 4 * MiB);
  assert_int_equal(s3.allocated_count.peak, count0 + 4);
  struct alloc_job c = {MiB, 2, {NULL}};
  run_alloc_job(&c); /* thread C: 2 MiB more while B's are live: 5 MiB */
  struct adr_memory_stats s4 = device_stats();
  assert_int_equal(s4.allocated_bytes.current, bytes0 + 5 * MiB);
  assert_int_equal(s4.allocated_bytes.peak, bytes0 + 5 * MiB);
  assert_int_equal(s4.allocated_count.current, count0 + 5);
  assert_int_equal(s4.allocated_count.peak, count0 + 5);
  for (int i = 0; i < b.n; i++) xfree(b.ptr[i], b.size);
  for (int i = 0; i < c.n; i++) xfree(c.ptr[i], c.size);
  assert_int_equal(adr_memory_stats_reset_peaks(cpu, NULL), 0);
  struct adr_memory_stats s5 = device_stats();
  assert_int_equal(s5.allocated_bytes.current, bytes0);
  assert_int_equal(s5.allocated_bytes.peak, bytes0);
  assert_int_equal(s5.allocated_count.peak, count0);
}

enum { CHURN_THREADS = 4, CHURN_LIVE = 8, CHURN_ROUNDS = 5000 };

/* Each thread holds at most CHURN_LIVE blocks of 4 KiB at once. */
static void* churn_thread(void* p) {
  (void)p;
  void* live[CHURN_LIVE];
  for (int r = 0; r < CHURN_ROUNDS; r++) {
    for (int i = 0; i < CHURN_LIVE; i++) live[i] = xalloc(4 * KiB);
    for (int i = 0; i < CHURN_LIVE; i++) xfree(live[i], 4 * KiB);
  }
  return NULL;
}

/* Threads allocating and freeing at once: the current values come back
 * exactly, and the peak lies between what one thread held and what all
 * could hold together. */
static void test_statistics_concurrent(void** state) {
  (void)state;
  assert_int_equal(adr_memory_stats_reset_peaks(cpu, NULL), 0);
  struct adr_memory_stats s0 = device_stats();
  pthread_t th[CHURN_THREADS];
  for (int i = 0; i < CHURN_THREADS; i++)
    assert_int_equal(pthread_create(&th[i], NULL, churn_thread, NULL), 0);
  for (int i = 0; i < CHURN_THREADS; i++) assert_int_equal(pthread_join(th[i], NULL), 0);
  struct adr_memory_stats s1 = device_stats();
  assert_int_equal(s1.allocated_bytes.current, s0.allocated_bytes.current);
  assert_int_equal(s1.allocated_count.current, s0.allocated_count.current);
  assert_int_equal(s1.allocated_count.total,
                   s0.allocated_count.total + (uint64_t)CHURN_THREADS * CHURN_LIVE * CHURN_ROUNDS);
  assert_true(s1.allocated_count.peak >= s0.allocated_count.current + CHURN_LIVE);
  assert_true(s1.allocated_count.peak <= s0.allocated_count.current + CHURN_THREADS * CHURN_LIVE);
  assert_true(s1.allocated_bytes.peak >= s0.allocated_bytes.current + CHURN_LIVE * 4 * KiB);
  assert_true(s1.allocated_bytes.peak <=
              s0.allocated_bytes.current + CHURN_THREADS * CHURN_LIVE * 4 * KiB);
}

static void test_trim(void** state) {
  (void)state;
  void* big = xalloc(64 * MiB);
  xfree(big, 64 * MiB);
  struct adr_memory_stats s0 = device_stats();
  assert_true(s0.cached_bytes >= 64 * MiB);
  size_t released = 0;
  assert_int_equal(adr_memory_trim(cpu, &released, NULL), 0);
  struct adr_memory_stats s1 = device_stats();
  assert_true(released >= 64 * MiB);
  assert_int_equal(s1.reserved_bytes.current, s0.reserved_bytes.current - released);
  assert_int_equal(s1.trimmed_bytes, s0.trimmed_bytes + released);
  assert_true(s1.cached_bytes < 64 * MiB);
}

static void test_stats_adaptor(void** state) {
  (void)state;
  struct adr_allocator* stats = NULL;
  assert_int_equal(adr_allocator_stats_create(adr_allocator_pool(), &stats, NULL), 0);
  assert_string_equal(stats->name, "stats");
  assert_int_equal(adr_allocator_set(cpu, stats, NULL, NULL), 0);
  void* a = xalloc(1000);
  void* b = xalloc(2000);
  void* c = xalloc(3000);
  xfree(b, 2000);
  struct adr_memory_stats s;
  s.struct_size = sizeof(s);
  assert_int_equal(adr_allocator_stats_get(stats, &s, NULL), 0);
  assert_int_equal(s.allocated_bytes.current, 4000);
  assert_int_equal(s.allocated_bytes.peak, 6000);
  assert_int_equal(s.allocated_bytes.total, 6000);
  assert_int_equal(s.allocated_count.current, 2);
  assert_int_equal(s.allocated_count.peak, 3);
  assert_int_equal(s.allocated_count.total, 3);
  assert_int_equal(s.reserved_bytes.current, 0); /* an adaptor has no pool figures */
  struct adr_error err;
  assert_int_equal(adr_allocator_destroy(stats, &err), EBUSY);
  assert_non_null(strstr(err.message, "still installed"));
  assert_int_equal(adr_allocator_set(cpu, adr_allocator_pool(), NULL, NULL), 0);
  assert_int_equal(adr_allocator_destroy(stats, &err), EBUSY);
  assert_non_null(strstr(err.message, "has 2 allocations outstanding"));
  xfree(a, 1000);
  xfree(c, 3000);
  assert_int_equal(adr_allocator_stats_get(stats, &s, NULL), 0);
  assert_int_equal(s.allocated_bytes.current, 0);
  assert_int_equal(adr_allocator_destroy(stats, &err), 0);
  /* Only adaptors adr made can be destroyed or queried. */
  assert_int_equal(adr_allocator_destroy((struct adr_allocator*)adr_allocator_pool(), &err),
                   EINVAL);
  assert_int_equal(adr_allocator_stats_get(adr_allocator_pool(), &s, &err), EINVAL);
  assert_non_null(strstr(err.message, "is not a statistics adaptor"));
}

static void test_stacked_adaptors_hold_upstream(void** state) {
  (void)state;
  struct adr_allocator *stats = NULL, *limit = NULL;
  assert_int_equal(adr_allocator_stats_create(adr_allocator_pool(), &stats, NULL), 0);
  assert_int_equal(adr_allocator_limit_create(stats, 10 * MiB, &limit, NULL), 0);
  struct adr_error err;
  assert_int_equal(adr_allocator_destroy(stats, &err), EBUSY);
  assert_non_null(strstr(err.message, "stacked"));
  void* p = NULL;
  assert_int_equal(adr_alloc_with(cpu, limit, 4096, 0, NULL, &p, NULL), 0);
  struct adr_memory_stats s;
  s.struct_size = sizeof(s);
  assert_int_equal(adr_allocator_stats_get(stats, &s, NULL), 0);
  assert_int_equal(s.allocated_bytes.current, 4096);
  xfree(p, 4096);
  assert_int_equal(adr_allocator_destroy(limit, NULL), 0);
  assert_int_equal(adr_allocator_destroy(stats, NULL), 0);
}

static int free_on_oom_calls;
static uint32_t free_on_oom_attempts[8];
static void* free_on_oom_block;
static size_t free_on_oom_size;

static int free_on_oom(void* ctx, struct adr_device* dev, size_t size, uint32_t attempt) {
  (void)size;
  assert_ptr_equal(ctx, &free_on_oom_calls);
  assert_ptr_equal(dev, cpu);
  if (free_on_oom_calls < 8) free_on_oom_attempts[free_on_oom_calls] = attempt;
  free_on_oom_calls++;
  if (free_on_oom_block == NULL) return 0;
  adr_free(dev, free_on_oom_block, free_on_oom_size, NULL, NULL);
  free_on_oom_block = NULL;
  return 1;
}

static void test_limit_and_oom_callback(void** state) {
  (void)state;
  struct adr_allocator* limit = NULL;
  assert_int_equal(adr_allocator_limit_create(adr_allocator_pool(), 1 * MiB, &limit, NULL), 0);
  assert_int_equal(adr_allocator_set(cpu, limit, NULL, NULL), 0);
  void* a = xalloc(600 * KiB);
  void* b = NULL;
  struct adr_error err;
  struct adr_memory_stats s0 = device_stats();
  assert_int_equal(adr_alloc(cpu, 600 * KiB, 0, NULL, &b, &err), ENOMEM);
  /* The limit's counts, then the device's statistics. */
  assert_non_null(strstr(err.message,
                         "[adr_alloc][cpu] ENOMEM: cannot allocate 600 KiB on "
                         "cpu:0 through handler 'limit'"));
  assert_non_null(strstr(err.message, "600 KiB in use in 1 allocations, limit 1 MiB"));
  assert_non_null(strstr(err.message, "allocated "));
  assert_non_null(strstr(err.message, "reserved "));
  struct adr_memory_stats s1 = device_stats();
  assert_int_equal(s1.oom_failures, s0.oom_failures + 1);

  /* A callback that frees memory makes the retry succeed. */
  free_on_oom_calls = 0;
  free_on_oom_block = a;
  free_on_oom_size = 600 * KiB;
  assert_int_equal(adr_oom_callback_add(cpu, free_on_oom, &free_on_oom_calls, NULL), 0);
  assert_int_equal(adr_oom_callback_add(cpu, free_on_oom, &free_on_oom_calls, &err), EEXIST);
  assert_int_equal(adr_alloc(cpu, 600 * KiB, 0, NULL, &b, &err), 0);
  assert_int_equal(free_on_oom_calls, 1);
  assert_int_equal(free_on_oom_attempts[0], 0);
  struct adr_memory_stats s2 = device_stats();
  assert_true(s2.oom_retries >= s1.oom_retries + 1);
  /* No progress: one call per attempt, then ENOMEM. */
  free_on_oom_calls = 0;
  void* c = NULL;
  assert_int_equal(adr_alloc(cpu, 600 * KiB, 0, NULL, &c, &err), ENOMEM);
  assert_int_equal(free_on_oom_calls, 1);
  assert_int_equal(adr_oom_callback_remove(cpu, free_on_oom, &free_on_oom_calls, NULL), 0);
  assert_int_equal(adr_oom_callback_remove(cpu, free_on_oom, &free_on_oom_calls, &err), ENOENT);
  assert_non_null(strstr(err.message, "not registered on cpu:0"));
  xfree(b, 600 * KiB);
  assert_int_equal(adr_allocator_set(cpu, adr_allocator_pool(), NULL, NULL), 0);
  assert_int_equal(adr_allocator_destroy(limit, NULL), 0);
}

static int progress_twice_calls;
static struct faulty* progress_twice_target;

static int progress_twice(void* ctx, struct adr_device* dev, size_t size, uint32_t attempt) {
  (void)ctx;
  (void)dev;
  (void)size;
  assert_int_equal(attempt, (uint32_t)progress_twice_calls);
  progress_twice_calls++;
  return progress_twice_calls <= 2;
}

static void test_oom_chain_order(void** state) {
  (void)state;
  struct faulty f;
  struct adr_allocator h = faulty_handler(&f, adr_allocator_pool());
  assert_int_equal(adr_allocator_set(cpu, &h, NULL, NULL), 0);

  /* Step 1: the cache is released (the handler's trim is called) and the
   * allocation retried. */
  f.fail_until_trim = 1;
  f.trim_releases = 4096;
  void* p = xalloc(1000);
  assert_int_equal(f.trims, 1);
  xfree(p, 1000);

  /* Step 2: nothing to release, callbacks report progress twice: three
   * attempts at the callbacks (0, 1, 2), then ENOMEM. */
  f.fail_until_trim = 0;
  f.trim_releases = 0;
  f.trims = 0;
  f.fail_next = 1000;
  progress_twice_calls = 0;
  progress_twice_target = &f;
  assert_int_equal(adr_memory_trim(cpu, NULL, NULL), 0); /* nothing left to release */
  assert_int_equal(f.trims, 1); /* adr_memory_trim reaches the handler's trim */
  f.trims = 0;
  assert_int_equal(adr_oom_callback_add(cpu, progress_twice, NULL, NULL), 0);
  struct adr_memory_stats s0 = device_stats();
  struct adr_error err;
  assert_int_equal(adr_alloc(cpu, 1000, 0, NULL, &p, &err), ENOMEM);
  assert_int_equal(progress_twice_calls, 3);
  /* Released once before the callbacks, and again after each round that
   * made progress (what they freed may sit in a cache). */
  assert_int_equal(f.trims, 3);
  struct adr_memory_stats s1 = device_stats();
  /* Two retries after the callbacks' progress, plus one after the first
   * release when the backend's frees are stream-ordered (the chain then
   * waits for the default stream, which may free memory). */
  struct adr_device_info info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  assert_int_equal(adr_device_info_get(cpu, &info, NULL), 0);
  uint64_t first = (info.caps & ADR_CAP_STREAM_ORDERED_ALLOC) ? 1 : 0;
  assert_int_equal(s1.oom_retries, s0.oom_retries + 2 + first);
  assert_int_equal(s1.oom_failures, s0.oom_failures + 1);
  assert_non_null(strstr(err.message, "injected failure"));
  assert_non_null(strstr(err.message, "oom retries"));

  /* A failure other than ENOMEM is returned as is, without the chain. */
  assert_int_equal(adr_oom_callback_remove(cpu, progress_twice, NULL, NULL), 0);
  f.fail_next = 0;
  assert_int_equal(adr_allocator_set(cpu, adr_allocator_pool(), NULL, NULL), 0);
}

struct list_ctx {
  size_t n;
  size_t bytes;
  int tagged;
  int on_stream;
};

static void count_record(void* ctx, const struct adr_allocation_record* r) {
  struct list_ctx* l = ctx;
  l->n++;
  l->bytes += r->size;
  if (strcmp(r->tag, "parquet-reader") == 0) l->tagged++;
  if (r->stream != NULL) l->on_stream++;
  assert_ptr_equal(r->device, cpu);
}

static void test_tracking_adaptor(void** state) {
  (void)state;
  struct adr_allocator* track = NULL;
  assert_int_equal(adr_allocator_tracking_create(adr_allocator_pool(), &track, NULL), 0);
  assert_int_equal(adr_allocator_set(cpu, track, NULL, NULL), 0);
  struct adr_stream* s = NULL;
  assert_int_equal(adr_stream_create(cpu, &s, NULL), 0);
  adr_memory_tag_set("parquet-reader");
  void* a = xalloc(1111);
  adr_memory_tag_set(NULL);
  void* b = NULL;
  assert_int_equal(adr_alloc(cpu, 2222, 0, s, &b, NULL), 0);
  struct list_ctx l = {0};
  size_t n = 0;
  assert_int_equal(adr_allocator_tracking_list(track, count_record, &l, &n, NULL), 0);
  assert_int_equal(n, 2);
  assert_int_equal(l.bytes, 3333);
  assert_int_equal(l.tagged, 1);
  assert_int_equal(l.on_stream, 1);
  assert_int_equal(adr_free(cpu, b, 2222, s, NULL), 0);
  memset(&l, 0, sizeof(l));
  assert_int_equal(adr_allocator_tracking_list(track, count_record, &l, &n, NULL), 0);
  assert_int_equal(n, 1);
  assert_int_equal(l.bytes, 1111);
  assert_int_equal(adr_allocator_set(cpu, adr_allocator_pool(), NULL, NULL), 0);
  struct adr_error err;
  assert_int_equal(adr_allocator_destroy(track, &err), EBUSY);
  assert_non_null(strstr(err.message, "1 allocation outstanding"));
  xfree(a, 1111);
  assert_int_equal(adr_allocator_destroy(track, NULL), 0);
  assert_int_equal(adr_stream_destroy(s, NULL), 0);
  assert_int_equal(adr_allocator_tracking_list(adr_allocator_pool(), NULL, NULL, NULL, &err),
                   EINVAL);
}

static void test_backend_handler(void** state) {
  (void)state;
  assert_int_equal(adr_allocator_set(cpu, adr_allocator_backend(), NULL, NULL), 0);
  struct adr_memory_stats s0 = device_stats();
  void* p = xalloc(12345);
  memset(p, 1, 12345);
  struct adr_memory_stats s1 = device_stats();
  /* Not through the pool: no cache traffic, same allocation accounting. */
  assert_int_equal(s1.cache_hits + s1.cache_misses, s0.cache_hits + s0.cache_misses);
  assert_int_equal(s1.allocated_bytes.current, s0.allocated_bytes.current + 12345);
  xfree(p, 12345);
  assert_int_equal(adr_allocator_set(cpu, adr_allocator_pool(), NULL, NULL), 0);
}

/* adr_memory_max_cached_set: the cap in force shows in the statistics, a
 * free over a lowered cap gives chunks back at once, no cap keeps them, and
 * the previous value comes back for restoring. */
static void test_max_cached_set(void** state) {
  (void)state;
  size_t released = 0;
  assert_int_equal(adr_memory_trim(cpu, &released, NULL), 0);
  uint64_t prev = 0;
  assert_int_equal(adr_memory_max_cached_set(cpu, UINT64_MAX, &prev, NULL), 0);
  assert_true(prev == device_stats().max_cached || device_stats().max_cached == UINT64_MAX);
  assert_true(device_stats().max_cached == UINT64_MAX);
  assert_true(prev != UINT64_MAX && prev >= ((uint64_t)256 << 20)); /* the default cap */
  enum { N = 8 };
  size_t size = (size_t)6 << 20;
  void* p[N];
  for (int i = 0; i < N; i++) p[i] = xalloc(size);
  for (int i = 0; i < N; i++) xfree(p[i], size);
  /* No cap: everything freed stays cached. */
  assert_true(device_stats().cached_bytes >= (uint64_t)N * size);
  uint64_t none = 0;
  assert_int_equal(adr_memory_max_cached_set(cpu, 0, &none, NULL), 0);
  assert_true(none == UINT64_MAX);
  /* A cap of 0: the next free gives every fully free chunk back. */
  void* q = xalloc(4096);
  xfree(q, 4096);
  assert_int_equal(device_stats().cached_bytes, 0);
  assert_int_equal(device_stats().max_cached, 0);
  assert_int_equal(adr_memory_max_cached_set(cpu, prev, NULL, NULL), 0);
  assert_true(device_stats().max_cached == prev);
  struct adr_error e;
  assert_int_equal(adr_memory_max_cached_set(NULL, 0, NULL, &e), EINVAL);
  assert_non_null(strstr(e.message, "adr_memory_max_cached_set"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_max_cached_set),
      cmocka_unit_test(test_default_is_pool),
      cmocka_unit_test(test_switch_frees_through_old_handler),
      cmocka_unit_test(test_alloc_with),
      cmocka_unit_test(test_bad_handlers),
      cmocka_unit_test(test_zero_size_and_bad_free),
      cmocka_unit_test(test_device_statistics),
      cmocka_unit_test(test_statistics_peaks_across_threads),
      cmocka_unit_test(test_statistics_concurrent),
      cmocka_unit_test(test_trim),
      cmocka_unit_test(test_stats_adaptor),
      cmocka_unit_test(test_stacked_adaptors_hold_upstream),
      cmocka_unit_test(test_limit_and_oom_callback),
      cmocka_unit_test(test_oom_chain_order),
      cmocka_unit_test(test_tracking_adaptor),
      cmocka_unit_test(test_backend_handler),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
