/* SPDX-License-Identifier: Apache-2.0
 *
 * adr-bench area "memory": a replica of RAPIDS RMM's RANDOM_ALLOCATIONS
 * benchmark (benchmarks/random_allocations), run on every device adr can
 * enumerate, for the caching pool, the plain backend allocator and (on the
 * CPU) glibc's aligned_alloc, side by side, with 1 and 2 threads.
 *
 * The workload, as in RMM: `2 * n` steps; a step draws a size uniformly
 * from [1, max_size] and allocates it with probability 0.73 (while fewer
 * than n allocations were made and the live bytes stay under max_usage),
 * otherwise frees a uniformly chosen live block. Blocks are never touched.
 * Sizes are exact multiples of nothing: the allocators see odd sizes.
 * Differences from RMM: a xorshift generator instead of
 * std::default_random_engine; max_usage is 16000 MiB as in RMM but capped
 * at a quarter of the device's (or the host's) memory; what is still live
 * at the end is freed inside the timed region (for every allocator alike).
 * With 2 threads each thread runs the workload with its own generator and
 * half of max_usage; the figure is the process's CPU time (user + system,
 * all threads) over all operations, the best of at least 3 runs (the first run warms the pool, as
 * RMM's pool is warm after its first benchmark iteration).
 *
 * CPU time, not wall time (RMM's figure): on a shared machine the wall time
 * of a long run includes time spent waiting for a core, so a 100k run
 * (tens of ms) looked 2-4x slower per operation than a 1k run (a fraction
 * of a scheduler slice) while cachegrind counted the same instructions and
 * cache misses per operation for both. The row budget stays wall time.
 *
 * The pool runs without its cap on cached bytes (adr_memory_max_cached_set
 * to UINT64_MAX, restored afterwards), as RMM's pool_memory_resource keeps
 * everything it took: with the default cap (an eighth of the device, 256
 * MiB on lavapipe) below the workload's footprint, every run would give
 * chunks back at the final frees and take them again, and the rows would
 * measure the backend allocator through the pool.
 *
 * Before them, per device, "tight" rows: one adr_alloc + adr_free of 4 KiB
 * and 64 KiB with a NULL stream in a loop (the per-thread cache's path),
 * CPU time per pair, against the same with the backend allocator, glibc
 * and vkAllocateMemory + vkFreeMemory; and the same pair of 4 KiB and of
 * 1 MiB on two threads at once against one thread (scaling). Every row of
 * a device runs after one copy from it to the host (make_index_live).
 *
 * Rows: "ns/op" (lower is better), adr's pool against the backend
 * allocator (and glibc on the CPU; on Vulkan also vkAllocateMemory +
 * vkFreeMemory called directly on adr's VkDevice, since the Vulkan
 * backend's plain allocator is itself a sub-allocator of large
 * VkDeviceMemory blocks, docs/memory.md). Notes: the pool's time per
 * operation at n = 100,000 (10,000 with --quick) divided by n = 1,000
 * (1.0 = flat: the cost does not grow with the number of live blocks).
 */
#include <dlfcn.h>
#include <errno.h>
#include <time.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adr/adr.h"
#include "adr/memory.h"
#include "bench.h"

#define MiB ((size_t)1 << 20)

enum which { USE_POOL, USE_BACKEND, USE_GLIBC, USE_VULKAN };

/* vkAllocateMemory / vkFreeMemory through the Vulkan loader (dlopen, so
 * adr-bench builds without Vulkan headers): just the types they need. */
struct vk_alloc_info {
  int32_t s_type; /* VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO = 5 */
  const void* next;
  uint64_t size;
  uint32_t type_index;
};
struct vk_flags_info {
  int32_t s_type; /* VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO = 1000060000 */
  const void* next;
  uint32_t flags; /* VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT = 2 */
  uint32_t device_mask;
};
struct vk_memory_type {
  uint32_t flags; /* VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT = 1 */
  uint32_t heap;
};
struct vk_memory_properties {
  uint32_t type_count;
  struct vk_memory_type types[32];
  uint32_t heap_count;
  struct {
    uint64_t size;
    uint32_t flags;
  } heaps[16];
};
struct vk_direct {
  void* device; /* VkDevice */
  uint32_t type;
  int (*allocate)(void* device, const struct vk_alloc_info*, const void*, uint64_t* out);
  void (*free)(void* device, uint64_t memory, const void*);
};

/* The direct-Vulkan baseline on adr's own VkDevice, or false. */
static bool vk_direct_open(struct adr_device* dev, struct vk_direct* out) {
  if (adr_device_type(dev) != ARROW_DEVICE_VULKAN) return false;
  void* lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) return false;
  void (*props)(void*, struct vk_memory_properties*) = NULL;
  *(void**)&props = dlsym(lib, "vkGetPhysicalDeviceMemoryProperties");
  *(void**)&out->allocate = dlsym(lib, "vkAllocateMemory");
  *(void**)&out->free = dlsym(lib, "vkFreeMemory");
  void* physical = NULL;
  if (props == NULL || out->allocate == NULL || out->free == NULL ||
      adr_device_native(dev, ADR_NATIVE_CONTEXT, &out->device, NULL) != 0 ||
      adr_device_native(dev, ADR_NATIVE_DEVICE, &physical, NULL) != 0)
    return false; /* the loader stays open: adr's backend holds it anyway */
  struct vk_memory_properties mp;
  memset(&mp, 0, sizeof(mp));
  props(physical, &mp);
  out->type = 0;
  for (uint32_t t = 0; t < mp.type_count && t < 32; t++)
    if (mp.types[t].flags & 1u) {
      out->type = t;
      break;
    }
  return true;
}

struct workload {
  struct adr_device* dev;
  const struct vk_direct* vk;
  enum which which;
  size_t n;
  size_t max_size;
  size_t max_usage;
  uint64_t seed;
  double deadline;  /* bench_now() past which the run stops (over budget) */
  bool over_budget; /* out: stopped at the deadline */
  size_t ops;       /* out: operations done */
  size_t failed;    /* out: allocations refused */
  int status;       /* out: first unexpected error */
};

struct live {
  void* p;
  size_t size;
};

static uint64_t next(uint64_t* s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}

static int do_alloc(struct workload* w, size_t size, void** out) {
  switch (w->which) {
    case USE_GLIBC: {
      *out = aligned_alloc(64, (size + 63) & ~(size_t)63);
      return *out ? 0 : 12;
    }
    case USE_POOL:
      return adr_alloc_with(w->dev, adr_allocator_pool(), size, 0, adr_stream_default(w->dev), out,
                            NULL);
    case USE_BACKEND:
      return adr_alloc_with(w->dev, adr_allocator_backend(), size, 0, adr_stream_default(w->dev),
                            out, NULL);
    case USE_VULKAN: {
      /* What adr's Vulkan allocations are: device-local, addressable. */
      struct vk_flags_info fi = {1000060000, NULL, 2, 0};
      struct vk_alloc_info ai = {5, &fi, size, w->vk->type};
      uint64_t m = 0;
      if (w->vk->allocate(w->vk->device, &ai, NULL, &m) != 0) return 12;
      *out = (void*)(uintptr_t)m;
      return 0;
    }
  }
  return 22;
}

static void do_free(struct workload* w, void* p, size_t size) {
  if (w->which == USE_GLIBC) {
    free(p);
    return;
  }
  if (w->which == USE_VULKAN) {
    w->vk->free(w->vk->device, (uint64_t)(uintptr_t)p, NULL);
    return;
  }
  int st = adr_free(w->dev, p, size, adr_stream_default(w->dev), NULL);
  if (st != 0 && w->status == 0) w->status = st;
}

static void* run_workload(void* arg) {
  struct workload* w = arg;
  struct live* live = malloc(w->n * sizeof(*live));
  if (live == NULL) {
    w->status = 12;
    return NULL;
  }
  uint64_t rng = w->seed;
  size_t active = 0, made = 0, bytes = 0;
  w->ops = 0;
  w->failed = 0;
  w->over_budget = false;
  for (size_t i = 0; i < w->n * 2; i++) {
    if ((i & 255) == 255 && bench_now() > w->deadline) {
      w->over_budget = true;
      break;
    }
    size_t size = 1 + (size_t)(next(&rng) % w->max_size);
    bool alloc = true;
    if (active > 0) {
      int chance = (int)(next(&rng) % 100);
      alloc = chance <= 73 && made < w->n && bytes + size < w->max_usage;
    }
    if (alloc) {
      void* p = NULL;
      if (do_alloc(w, size, &p) == 0) {
        live[active++] = (struct live){p, size};
        made++;
        bytes += size;
        w->ops++;
        continue;
      }
      w->failed++;
    }
    if (active > 0) {
      size_t idx = (size_t)(next(&rng) % w->n) % active;
      struct live victim = live[idx];
      live[idx] = live[--active];
      do_free(w, victim.p, victim.size);
      bytes -= victim.size;
      w->ops++;
    }
  }
  while (active > 0) {
    active--;
    do_free(w, live[active].p, live[active].size);
    w->ops++;
  }
  free(live);
  return NULL;
}

/* CPU time of the process (user + system, every thread: the workload's,
 * and a driver's own threads where it does work in them), in seconds. */
static double cpu_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Seconds one measurement may take, for any allocator: a native allocator
 * at tens of microseconds per call, or one that slows down as its heap
 * fragments (PoCL's clSVMFree did: one 100k x 64 MiB row ran past 7
 * minutes), is stopped at the budget and its row reported as skipped. */
#define ROW_BUDGET_S 10.0

/* ns per operation over `threads` threads running the workload once;
 * *over_budget is set when a thread stopped at the deadline. */
static double measure_once(struct adr_device* dev, const struct vk_direct* vk, enum which which,
                           size_t n, size_t max_size, size_t max_usage, int threads,
                           double deadline, int* status, bool* over_budget) {
  enum { MAX_THREADS = 2 };
  struct workload w[MAX_THREADS];
  pthread_t th[MAX_THREADS];
  if (threads > MAX_THREADS) threads = MAX_THREADS;
  for (int t = 0; t < threads; t++) {
    w[t] = (struct workload){dev,
                             vk,
                             which,
                             n,
                             max_size,
                             max_usage / (size_t)threads,
                             0x9E3779B97F4A7C15ull * (uint64_t)(t + 1),
                             deadline,
                             false,
                             0,
                             0,
                             0};
  }
  double t0 = cpu_now();
  if (threads == 1) {
    run_workload(&w[0]);
  } else {
    for (int t = 0; t < threads; t++) pthread_create(&th[t], NULL, run_workload, &w[t]);
    for (int t = 0; t < threads; t++) pthread_join(th[t], NULL);
  }
  double elapsed = cpu_now() - t0;
  size_t ops = 0;
  for (int t = 0; t < threads; t++) {
    ops += w[t].ops;
    if (w[t].status != 0 && *status == 0) *status = w[t].status;
    if (w[t].over_budget) *over_budget = true;
  }
  return ops ? elapsed * 1e9 / (double)ops : 0;
}

/* The best of several runs (at least 3, and at least 0.2 s in all), as
 * bench_time does for the other areas; 0 when the first run did not finish
 * within ROW_BUDGET_S (later runs stop at the budget too). */
static double measure(struct adr_device* dev, const struct vk_direct* vk, enum which which,
                      size_t n, size_t max_size, size_t max_usage, int threads, int* status) {
  double best = 0, spent = 0;
  double deadline = bench_now() + ROW_BUDGET_S;
  for (int round = 0; round < 50 && (round < 3 || spent < 0.2); round++) {
    double t0 = bench_now();
    bool over = false;
    double v =
        measure_once(dev, vk, which, n, max_size, max_usage, threads, deadline, status, &over);
    if (over) {
      if (round == 0) return 0;
      break;
    }
    spent += bench_now() - t0;
    if (round == 0 || v < best) best = v;
    if (spent > 5.0) break; /* slow allocators: a few runs are plenty */
  }
  return best;
}

static size_t usage_cap(struct adr_device* dev) {
  size_t cap = (size_t)16000 * MiB;
  struct adr_device_info info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  uint64_t total = 0;
  if (adr_device_info_get(dev, &info, NULL) == 0) total = info.memory_total;
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  uint64_t host = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
  if (total == 0 || (host != 0 && info.device_type == ARROW_DEVICE_CPU)) total = host;
  if (total != 0 && total / 4 < cap) cap = (size_t)(total / 4);
  return cap;
}

/* A tight loop of one allocation and its free (the pool's per-thread cache
 * path, docs/memory.md), NULL stream, CPU time per pair: the best of 5
 * batches of `pairs`. */
static double tight_pair(struct adr_device* dev, const struct vk_direct* vk, enum which which,
                         size_t size, size_t pairs, int* status) {
  struct workload w = {.dev = dev, .vk = vk, .which = which};
  double best = 0;
  for (int round = 0; round < 5; round++) {
    double t0 = cpu_now();
    for (size_t i = 0; i < pairs; i++) {
      void* p = NULL;
      int st = which == USE_POOL || which == USE_BACKEND
                   ? adr_alloc_with(
                         dev, which == USE_POOL ? adr_allocator_pool() : adr_allocator_backend(),
                         size, 0, NULL, &p, NULL)
                   : do_alloc(&w, size, &p);
      if (st != 0) {
        if (*status == 0) *status = st;
        return 0;
      }
      if (which == USE_POOL || which == USE_BACKEND) {
        st = adr_free(dev, p, size, NULL, NULL);
        if (st != 0 && *status == 0) *status = st;
      } else {
        do_free(&w, p, size);
      }
    }
    double v = (cpu_now() - t0) * 1e9 / (double)pairs;
    if (round == 0 || v < best) best = v;
  }
  return best;
}

struct tight_thread {
  struct adr_device* dev;
  size_t size, pairs;
  int status;
};

static void* tight_thread_run(void* p) {
  struct tight_thread* t = p;
  for (size_t i = 0; i < t->pairs; i++) {
    void* mem = NULL;
    int st = adr_alloc(t->dev, t->size, 0, NULL, &mem, NULL);
    if (st == 0) st = adr_free(t->dev, mem, t->size, NULL, NULL);
    if (st != 0) {
      t->status = st;
      break;
    }
  }
  return NULL;
}

/* The tight pair on `threads` (1 or 2) threads at once, each `pairs`
 * times: the process's CPU time per pair (thread creation included: tens
 * of microseconds against milliseconds), the best of 3 rounds (new threads
 * each round, as a thread pool's would be). */
static double tight_pair_threads(struct adr_device* dev, size_t size, size_t pairs,
                                 unsigned threads, int* status) {
  double best = 0;
  for (int round = 0; round < 3; round++) {
    struct tight_thread t[2];
    pthread_t th[2];
    unsigned made = 0;
    double t0 = cpu_now();
    for (; made < threads && made < 2; made++) {
      t[made] = (struct tight_thread){dev, size, pairs, 0};
      if (pthread_create(&th[made], NULL, tight_thread_run, &t[made]) != 0) break;
    }
    for (unsigned i = 0; i < made; i++) {
      pthread_join(th[i], NULL);
      if (t[i].status != 0 && *status == 0) *status = t[i].status;
    }
    double v = (cpu_now() - t0) * 1e9 / (double)(pairs * threads);
    if (made != threads) {
      if (*status == 0) *status = EAGAIN;
      return 0;
    }
    if (round == 0 || v < best) best = v;
  }
  return best;
}

/* One copy from the device to the host, as any application that reads
 * its results makes: on a device whose copies are range-checked (not
 * host-accessible) the first one makes the interval index live, and
 * adr_alloc and adr_free keep it up to date from then on. The area's rows
 * measure that state whatever area ran before (an earlier one's copies
 * made it live, running this area alone did not). */
static void make_index_live(struct bench_ctx* ctx, struct adr_device* dev) {
  void* mem = NULL;
  unsigned char host[64];
  int st = adr_alloc(dev, sizeof(host), 0, NULL, &mem, NULL);
  if (st == 0) st = adr_memset(dev, mem, 0x5a, sizeof(host), NULL, NULL);
  if (st == 0) st = adr_copy(NULL, host, dev, mem, sizeof(host), NULL, NULL);
  if (mem != NULL) (void)adr_free(dev, mem, sizeof(host), NULL, NULL);
  bench_expect(ctx, st == 0 && host[0] == 0x5a && host[63] == 0x5a,
               "memory %s: the first copy to the host failed (%s) or read wrong bytes",
               adr_device_name(dev), adr_status_name(st));
}

/* Rows "alloc+free 4KiB 2T" / "1MiB 2T": two threads allocating and
 * freeing at once on one device (the per-thread cache's path, and the
 * arena's for 1 MiB), CPU time per pair, against one thread doing the
 * same: 1.0 when the threads share no cache line (each writes its own
 * arena, allocation-table shard, interval-index shard and counter
 * stripe, docs/memory.md "Concurrency"). */
static void thread_rows(struct bench_ctx* ctx, struct adr_device* dev) {
  const size_t sizes[] = {4096, MiB};
  const char* const names[] = {"alloc+free 4KiB 2T", "alloc+free 1MiB 2T"};
  size_t pairs = bench_quick(ctx) ? 20000 : 200000;
  char group[64];
  snprintf(group, sizeof(group), "%s tight", adr_device_name(dev));
  for (size_t i = 0; i < 2; i++) {
    int st = 0;
    double one = tight_pair_threads(dev, sizes[i], pairs, 1, &st);
    double two = tight_pair_threads(dev, sizes[i], pairs, 2, &st);
    bench_expect(ctx, st == 0, "memory %s %s: an operation failed with %s", group, names[i],
                 adr_status_name(st));
    if (one > 0 && two > 0)
      bench_report(ctx, group, names[i], two, one, "ns/pair", "same, 1 thread",
                   BENCH_LOWER_IS_BETTER);
  }
  adr_memory_trim(dev, NULL, NULL);
}

/* Rows "alloc+free 4KiB" / "64KiB": the pool's tight pair against the
 * backend allocator, glibc (CPU) and vkAllocateMemory (Vulkan). */
static void tight_rows(struct bench_ctx* ctx, struct adr_device* dev, const struct vk_direct* vk,
                       bool has_vk, bool is_cpu) {
  const size_t sizes[] = {4096, 65536};
  const char* const names[] = {"alloc+free 4KiB", "alloc+free 64KiB"};
  size_t pairs = bench_quick(ctx) ? 20000 : 200000;
  char group[64];
  snprintf(group, sizeof(group), "%s tight", adr_device_name(dev));
  for (size_t i = 0; i < 2; i++) {
    int st = 0;
    double pool = tight_pair(dev, vk, USE_POOL, sizes[i], pairs, &st);
    double backend = tight_pair(dev, vk, USE_BACKEND, sizes[i], pairs / 10, &st);
    bench_expect(ctx, st == 0, "memory %s %s: an operation failed with %s", group, names[i],
                 adr_status_name(st));
    if (pool <= 0) continue;
    if (backend > 0)
      bench_report(ctx, group, names[i], pool, backend, "ns/pair", "backend alloc",
                   BENCH_LOWER_IS_BETTER);
    if (is_cpu) {
      double glibc = tight_pair(dev, vk, USE_GLIBC, sizes[i], pairs, &st);
      if (glibc > 0)
        bench_report(ctx, group, names[i], pool, glibc, "ns/pair", "glibc aligned_alloc",
                     BENCH_LOWER_IS_BETTER);
    }
    if (has_vk) {
      double direct = tight_pair(dev, vk, USE_VULKAN, sizes[i], pairs / 10, &st);
      if (direct > 0)
        bench_report(ctx, group, names[i], pool, direct, "ns/pair", "vkAllocateMemory",
                     BENCH_LOWER_IS_BETTER);
    }
  }
  adr_memory_trim(dev, NULL, NULL);
}

void bench_run_memory(struct bench_ctx* ctx);
void bench_run_memory(struct bench_ctx* ctx) {
  size_t ndev = 0;
  if (adr_device_count(&ndev, NULL) != 0) return;
  const size_t counts[] = {1000, 10000, 100000};
  /* Largest request of a row: RMM's 1/4/64 MiB, and 4 KiB for small
   * objects (issue 12's rows span 4 KiB to 64 MiB). */
  const size_t sizes[] = {4096, 1 * MiB, 4 * MiB, 64 * MiB};
  const char* const size_names[] = {"4KiB", "1MiB", "4MiB", "64MiB"};
  size_t ncounts = bench_quick(ctx) ? 2 : 3;
  for (size_t d = 0; d < ndev; d++) {
    struct adr_device* dev = NULL;
    if (adr_device_at(d, &dev, NULL) != 0) continue;
    bool is_cpu = adr_device_type(dev) == ARROW_DEVICE_CPU;
    struct vk_direct vk;
    bool has_vk = vk_direct_open(dev, &vk);
    size_t cap = usage_cap(dev);
    make_index_live(ctx, dev);
    tight_rows(ctx, dev, &vk, has_vk, is_cpu);
    thread_rows(ctx, dev);
    char group[64];
    snprintf(group, sizeof(group), "%s rand-alloc", adr_device_name(dev));
    for (int threads = 1; threads <= 2; threads++) {
      for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
        double pool_first = 0, pool_last = 0, backend_prev = 0, vk_prev = 0;
        for (size_t ci = 0; ci < ncounts; ci++) {
          size_t n = counts[ci], max_size = sizes[si];
          int st = 0;
          /* The first run warms the pool to the workload's size, as RMM's
           * pool is warm after its first iteration; best of the runs. */
          uint64_t cap_before = 0;
          adr_memory_max_cached_set(dev, UINT64_MAX, &cap_before, NULL);
          double pool = measure(dev, &vk, USE_POOL, n, max_size, cap, threads, &st);
          adr_memory_max_cached_set(dev, cap_before, NULL, NULL);
          bool pool_over = pool == 0;
          /* Give the pool's cache back before the baselines run, so they do
           * not compete with gigabytes the pool holds. */
          adr_memory_trim(dev, NULL, NULL);
          char label[64];
          snprintf(label, sizeof(label), "%zuk %s %dT", n / 1000, size_names[si], threads);
          /* Two guards, for every allocator: a run is stopped at
           * ROW_BUDGET_S (measure returns 0), and a backend run that the
           * smaller count predicts to exceed it is not started. Either way
           * the row says so. */
          double predicted_s = backend_prev * 2.0 * (double)n * 1e-9;
          if (pool_over) {
            bench_note(ctx, group, label, ROW_BUDGET_S, "s budget: pool run stopped, row skipped");
            continue;
          }
          if (predicted_s > ROW_BUDGET_S) {
            bench_note(ctx, group, label, predicted_s, "s: backend run skipped (predicted)");
            bench_note(ctx, group, label, pool, "ns/op pool");
            if (ci == 0) pool_first = pool;
            pool_last = pool;
            continue;
          }
          double backend = measure(dev, &vk, USE_BACKEND, n, max_size, cap, threads, &st);
          backend_prev = backend;
          if (backend == 0) {
            /* Stopped at the budget: the next counts would be slower. */
            backend_prev = ROW_BUDGET_S * 1e9;
            bench_note(ctx, group, label, ROW_BUDGET_S, "s budget: backend run stopped, skipped");
            bench_note(ctx, group, label, pool, "ns/op pool");
            if (ci == 0) pool_first = pool;
            pool_last = pool;
            continue;
          }
          /* A refused allocation is part of the workload (counted, the
           * step frees instead); a failed free is an error. */
          bench_expect(ctx, st == 0, "memory %s %s: an operation failed with %s", group, label,
                       adr_status_name(st));
          bench_report(ctx, group, label, pool, backend, "ns/op", "backend alloc",
                       BENCH_LOWER_IS_BETTER);
          if (is_cpu) {
            double glibc = measure(dev, &vk, USE_GLIBC, n, max_size, cap, threads, &st);
            if (glibc > 0)
              bench_report(ctx, group, label, pool, glibc, "ns/op", "glibc aligned_alloc",
                           BENCH_LOWER_IS_BETTER);
          }
          if (has_vk && vk_prev * 2.0 * (double)n * 1e-9 <= ROW_BUDGET_S) {
            double direct = measure(dev, &vk, USE_VULKAN, n, max_size, cap, threads, &st);
            vk_prev = direct > 0 ? direct : ROW_BUDGET_S * 1e9;
            if (direct > 0)
              bench_report(ctx, group, label, pool, direct, "ns/op", "vkAllocateMemory",
                           BENCH_LOWER_IS_BETTER);
            else
              bench_note(ctx, group, label, ROW_BUDGET_S, "s budget: vkAllocateMemory run stopped");
          }
          if (ci == 0) pool_first = pool;
          pool_last = pool;
        }
        char label[64];
        snprintf(label, sizeof(label), "%zuk/%zuk %s %dT", counts[ncounts - 1] / 1000,
                 counts[0] / 1000, size_names[si], threads);
        bench_note(ctx, group, label, pool_first > 0 ? pool_last / pool_first : 0,
                   "pool t/op ratio");
      }
    }
    adr_memory_trim(dev, NULL, NULL);
  }
}
