/* SPDX-License-Identifier: Apache-2.0
 *
 * HIP rows: H2D, D2H and D2D copies (4 KiB, 1 MiB, 64 MiB), allocation and
 * event round trips on hip:0, each next to the same operation written
 * directly against the HIP runtime in the same run, on the adr device's
 * own default stream (hipMemcpyAsync + hipStreamSynchronize on plain
 * hipMalloc memory, pinned host buffers; the same for pageable host memory
 * at 64 MiB, where adr stages through its pinned buffers and the baseline
 * leaves it to the runtime; hipMallocAsync/hipFreeAsync or
 * hipMalloc/hipFree as the backend would use; hipEventRecord +
 * hipEventSynchronize).
 *
 * The runtime is the one the backend loaded (dlopen of the same name, so
 * the same library). Under the HIP simulator (tests/sim/hip on
 * LD_LIBRARY_PATH) the group names say "sim": those figures measure adr's
 * dispatch overhead over the runtime API, not a GPU. With no HIP device
 * the area prints one note and returns.
 *
 * Every copy row first checks the bytes each side moved (bench_expect):
 * the source holds one byte value and the destination another, the side
 * copies once, and the destination is read back with hipMemcpyAsync +
 * hipStreamSynchronize (device memory) or read in place (host memory),
 * the same read for adr and the baseline.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hip/hip_runtime_api.h>

#include "adr/adr.h"
#include "adr/hip.h"
#include "bench.h"

void bench_run_hip(struct bench_ctx* ctx);

/* clang-format off */
#define HIP_FNS(X)                                                                 \
  X(hipMalloc) X(hipFree) X(hipMallocAsync) X(hipFreeAsync) X(hipMemcpyAsync)     \
  X(hipStreamSynchronize) X(hipEventCreateWithFlags) X(hipEventDestroy)           \
  X(hipEventRecord) X(hipEventSynchronize) X(hipSetDevice) X(hipHostMalloc)       \
  X(hipHostFree)
/* clang-format on */

static struct {
#define FIELD(name) __typeof__(name)* name;
  HIP_FNS(FIELD)
#undef FIELD
} H;

enum dir { H2D, D2H, D2D };

struct arg {
  struct adr_device* dev;
  struct adr_device* cpu;
  hipStream_t stream; /* the adr device's default stream */
  void* dev_a;        /* adr allocations */
  void* dev_b;
  void* raw_a; /* hipMalloc'd, for the direct baseline */
  void* raw_b;
  void* host_a;
  void* host_b;
  size_t size;
  enum dir dir;
  hipEvent_t event;
  struct adr_event* adr_event;
  bool async_alloc;
  int failures;
};

static void adr_copy_fn(void* p) {
  struct arg* a = p;
  int st;
  switch (a->dir) {
    case H2D:
      st = adr_copy(a->dev, a->dev_a, a->cpu, a->host_a, a->size, NULL, NULL);
      break;
    case D2H:
      st = adr_copy(a->cpu, a->host_b, a->dev, a->dev_a, a->size, NULL, NULL);
      break;
    default:
      st = adr_copy(a->dev, a->dev_b, a->dev, a->dev_a, a->size, NULL, NULL);
      break;
  }
  if (st != 0) a->failures++;
  bench_sink(a->host_b);
}

static void direct_copy_fn(void* p) {
  struct arg* a = p;
  hipError_t e;
  switch (a->dir) {
    case H2D:
      e = H.hipMemcpyAsync(a->raw_a, a->host_a, a->size, hipMemcpyHostToDevice, a->stream);
      break;
    case D2H:
      e = H.hipMemcpyAsync(a->host_b, a->raw_a, a->size, hipMemcpyDeviceToHost, a->stream);
      break;
    default:
      e = H.hipMemcpyAsync(a->raw_b, a->raw_a, a->size, hipMemcpyDeviceToDevice, a->stream);
      break;
  }
  if (e == hipSuccess) e = H.hipStreamSynchronize(a->stream);
  if (e != hipSuccess) a->failures++;
  bench_sink(a->host_b);
}

/* Sets n device bytes at p to `byte` through host_b (which the check
 * overwrites afterwards anyway). */
static bool device_fill(struct arg* a, void* p, int byte) {
  memset(a->host_b, byte, a->size);
  return H.hipMemcpyAsync(p, a->host_b, a->size, hipMemcpyHostToDevice, a->stream) == hipSuccess &&
         H.hipStreamSynchronize(a->stream) == hipSuccess;
}

/* Runs one side's copy once (adr_copy_fn on dev_a/dev_b, or
 * direct_copy_fn on raw_a/raw_b) with `byte` in its source and the
 * complement in its destination, then reads the destination and checks
 * it. */
static void check_copy(struct bench_ctx* ctx, struct arg* a, bool adr_side, int byte,
                       const char* what) {
  void* src_dev = adr_side ? a->dev_a : a->raw_a;
  void* dst_dev = a->dir == H2D ? src_dev : adr_side ? a->dev_b : a->raw_b;
  int other = byte ^ 0xff;
  bool ok = true;
  if (a->dir == H2D)
    memset(a->host_a, byte, a->size);
  else
    ok = device_fill(a, src_dev, byte);
  if (ok && a->dir != D2H) ok = device_fill(a, dst_dev, other);
  memset(a->host_b, other, a->size);
  if (!ok) {
    bench_expect(ctx, false, "%s: cannot set up the check", what);
    return;
  }
  int failures = a->failures;
  (adr_side ? adr_copy_fn : direct_copy_fn)(a);
  if (a->failures != failures) {
    bench_expect(ctx, false, "%s: the copy failed", what);
    return;
  }
  if (a->dir != D2H &&
      (H.hipMemcpyAsync(a->host_b, dst_dev, a->size, hipMemcpyDeviceToHost, a->stream) !=
           hipSuccess ||
       H.hipStreamSynchronize(a->stream) != hipSuccess)) {
    bench_expect(ctx, false, "%s: cannot read the destination back", what);
    return;
  }
  bench_expect_fill(ctx, a->host_b, byte, a->size, what);
}

static void check_both(struct bench_ctx* ctx, struct arg* a, const char* group, const char* label) {
  char what[128];
  snprintf(what, sizeof(what), "adr %s %s", group, label);
  check_copy(ctx, a, true, 0x21 + (int)a->dir, what);
  snprintf(what, sizeof(what), "hipMemcpyAsync %s %s", group, label);
  check_copy(ctx, a, false, 0x41 + (int)a->dir, what);
}

static void adr_alloc_fn(void* p) {
  struct arg* a = p;
  void* q = NULL;
  if (adr_alloc(a->dev, a->size, 0, adr_stream_default(a->dev), &q, NULL) != 0 ||
      adr_free(a->dev, q, a->size, adr_stream_default(a->dev), NULL) != 0)
    a->failures++;
}

static void direct_alloc_fn(void* p) {
  struct arg* a = p;
  void* q = NULL;
  hipError_t e;
  if (a->async_alloc) {
    e = H.hipMallocAsync(&q, a->size, a->stream);
    if (e == hipSuccess) e = H.hipFreeAsync(q, a->stream);
  } else {
    e = H.hipMalloc(&q, a->size);
    if (e == hipSuccess) e = H.hipFree(q);
  }
  if (e != hipSuccess) a->failures++;
}

static void adr_event_fn(void* p) {
  struct arg* a = p;
  if (adr_event_record(a->adr_event, adr_stream_default(a->dev), NULL) != 0 ||
      adr_event_synchronize(a->adr_event, NULL) != 0)
    a->failures++;
}

static void direct_event_fn(void* p) {
  struct arg* a = p;
  if (H.hipEventRecord(a->event, a->stream) != hipSuccess ||
      H.hipEventSynchronize(a->event) != hipSuccess)
    a->failures++;
}

static bool load_runtime(bool* out_sim) {
  void* h = dlopen("libamdhip64.so", RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) h = dlopen("libamdhip64.so.6", RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) h = dlopen("libamdhip64.so.5", RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) return false;
  void* sym;
#define RESOLVE(name)            \
  sym = dlsym(h, #name);         \
  if (sym == NULL) return false; \
  memcpy(&H.name, &sym, sizeof(sym));
  HIP_FNS(RESOLVE)
#undef RESOLVE
  *out_sim = dlsym(h, "adr_sim_hip_calls") != NULL;
  return true;
}

static void copy_rows(struct bench_ctx* ctx, struct arg* a, const char* rt) {
  static const size_t sizes[] = {4096, 1u << 20, 64u << 20};
  static const char* const labels[] = {"4 KiB", "1 MiB", "64 MiB"};
  static const char* const dir_names[] = {"H2D", "D2H", "D2D"};
  size_t count = bench_quick(ctx) ? 2 : 3;
  for (int d = H2D; d <= D2D; d++) {
    for (size_t i = 0; i < count; i++) {
      a->dir = (enum dir)d;
      a->size = sizes[i];
      char group[48];
      snprintf(group, sizeof(group), "%s %s", rt, dir_names[d]);
      check_both(ctx, a, group, labels[i]);
      double t_adr = bench_time(adr_copy_fn, a, bench_quick(ctx) ? 0.05 : 0.2, 3);
      double t_dir = bench_time(direct_copy_fn, a, bench_quick(ctx) ? 0.05 : 0.2, 3);
      if (sizes[i] <= 4096)
        bench_report(ctx, group, labels[i], t_adr * 1e6, t_dir * 1e6, "us/op",
                     "hipMemcpyAsync+sync", BENCH_LOWER_IS_BETTER);
      else
        bench_report(ctx, group, labels[i], (double)sizes[i] / t_adr / 1e9,
                     (double)sizes[i] / t_dir / 1e9, "GB/s", "hipMemcpyAsync+sync",
                     BENCH_HIGHER_IS_BETTER);
    }
  }
}

void bench_run_hip(struct bench_ctx* ctx) {
  struct adr_error err = {{0}};
  struct arg a;
  memset(&a, 0, sizeof(a));
  if (adr_device_get(ARROW_DEVICE_ROCM, 0, &a.dev, &err) != 0) {
    fprintf(stderr, "adr-bench: hip: no device: %s\n", err.message);
    bench_note(ctx, "hip", "unavailable", 0, "-");
    return;
  }
  bool sim = false;
  if (!load_runtime(&sim)) {
    bench_note(ctx, "hip", "runtime not loadable", 0, "-");
    return;
  }
  const char* rt = sim ? "hip (sim)" : "hip";
  const size_t max = (size_t)64 << 20;
  void* stream = NULL;
  struct adr_device_info info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  if (adr_device_get(ARROW_DEVICE_CPU, 0, &a.cpu, &err) != 0 ||
      adr_device_native(a.dev, ADR_NATIVE_QUEUE, &stream, &err) != 0 ||
      adr_device_info_get(a.dev, &info, &err) != 0 ||
      adr_alloc(a.dev, max, 0, NULL, &a.dev_a, &err) != 0 ||
      adr_alloc(a.dev, max, 0, NULL, &a.dev_b, &err) != 0) {
    fprintf(stderr, "adr-bench: hip: setup failed: %s\n", err.message);
    return;
  }
  a.stream = (hipStream_t)stream;
  a.async_alloc = (info.caps & ADR_CAP_STREAM_ORDERED_ALLOC) != 0;
  void* dev_id = NULL;
  adr_device_native(a.dev, ADR_NATIVE_DEVICE, &dev_id, NULL);
  H.hipSetDevice((int)(intptr_t)dev_id);
  /* Pinned host buffers on both sides, so the rows compare dispatch and
   * not pageable staging. */
  if (H.hipMalloc(&a.raw_a, max) != hipSuccess || H.hipMalloc(&a.raw_b, max) != hipSuccess ||
      H.hipHostMalloc(&a.host_a, max, 0) != hipSuccess ||
      H.hipHostMalloc(&a.host_b, max, 0) != hipSuccess ||
      H.hipEventCreateWithFlags(&a.event, hipEventDisableTiming) != hipSuccess ||
      adr_event_create(a.dev, &a.adr_event, &err) != 0) {
    fprintf(stderr, "adr-bench: hip: direct setup failed %s\n", err.message);
    return;
  }
  memset(a.host_a, 0x5A, max);
  adr_memset(a.dev, a.dev_a, 1, max, NULL, NULL);
  H.hipMemcpyAsync(a.raw_a, a.host_a, max, hipMemcpyHostToDevice, a.stream);
  H.hipStreamSynchronize(a.stream);

  char group[48];
  copy_rows(ctx, &a, rt);

  /* Pageable host memory: adr stages large copies through its pinned
   * buffers; the baseline hands the pageable pointer to hipMemcpyAsync. */
  void* pinned_a = a.host_a;
  void* pinned_b = a.host_b;
  a.host_a = malloc(max);
  a.host_b = malloc(max);
  if (a.host_a != NULL && a.host_b != NULL) {
    memset(a.host_a, 0x3C, max);
    memset(a.host_b, 0, max);
    static const char* const pdir[] = {"H2D pageable", "D2H pageable"};
    for (int d = H2D; d <= D2H; d++) {
      a.dir = (enum dir)d;
      a.size = bench_quick(ctx) ? (size_t)16 << 20 : max;
      snprintf(group, sizeof(group), "%s %s", rt, pdir[d]);
      check_both(ctx, &a, group, bench_quick(ctx) ? "16 MiB" : "64 MiB");
      double ta = bench_time(adr_copy_fn, &a, bench_quick(ctx) ? 0.05 : 0.2, 3);
      double td = bench_time(direct_copy_fn, &a, bench_quick(ctx) ? 0.05 : 0.2, 3);
      bench_report(ctx, group, bench_quick(ctx) ? "16 MiB" : "64 MiB", (double)a.size / ta / 1e9,
                   (double)a.size / td / 1e9, "GB/s", "hipMemcpyAsync+sync",
                   BENCH_HIGHER_IS_BETTER);
    }
  }
  free(a.host_a);
  free(a.host_b);
  a.host_a = pinned_a;
  a.host_b = pinned_b;

  snprintf(group, sizeof(group), "%s alloc+free", rt);
  static const size_t alloc_sizes[] = {4096, 1u << 20};
  static const char* const alloc_labels[] = {"4 KiB", "1 MiB"};
  for (size_t i = 0; i < 2; i++) {
    a.size = alloc_sizes[i];
    double t_adr = bench_time(adr_alloc_fn, &a, bench_quick(ctx) ? 0.05 : 0.2, 10);
    double t_dir = bench_time(direct_alloc_fn, &a, bench_quick(ctx) ? 0.05 : 0.2, 10);
    bench_report(ctx, group, alloc_labels[i], t_adr * 1e9, t_dir * 1e9, "ns/op",
                 a.async_alloc ? "hipMallocAsync+hipFreeAsync" : "hipMalloc+hipFree",
                 BENCH_LOWER_IS_BETTER);
  }
  snprintf(group, sizeof(group), "%s event", rt);
  double t_adr = bench_time(adr_event_fn, &a, bench_quick(ctx) ? 0.05 : 0.2, 10);
  double t_dir = bench_time(direct_event_fn, &a, bench_quick(ctx) ? 0.05 : 0.2, 10);
  bench_report(ctx, group, "record+sync", t_adr * 1e9, t_dir * 1e9, "ns/op",
               "hipEventRecord+Synchronize", BENCH_LOWER_IS_BETTER);
  if (a.failures != 0) fprintf(stderr, "adr-bench: hip: %d operations failed\n", a.failures);

  adr_event_destroy(a.adr_event, NULL);
  H.hipEventDestroy(a.event);
  H.hipHostFree(a.host_a);
  H.hipHostFree(a.host_b);
  H.hipFree(a.raw_a);
  H.hipFree(a.raw_b);
  adr_free(a.dev, a.dev_a, max, NULL, NULL);
  adr_free(a.dev, a.dev_b, max, NULL, NULL);
}
