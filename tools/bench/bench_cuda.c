/* SPDX-License-Identifier: Apache-2.0
 *
 * CUDA rows, each next to the same operation called directly through the
 * CUDA driver API in the same run, on the same buffers and context:
 *   H2D / D2H pinned       adr_copy (cuda_host <-> cuda)  vs cuMemcpy{HtoD,DtoH}Async + sync
 *   H2D / D2H pageable     adr_copy (cpu <-> cuda)        vs cuMemcpyHtoD / cuMemcpyDtoH
 *                          (adr stages large pageable copies through pinned buffers)
 *   D2D                    adr_copy (cuda <-> cuda)        vs cuMemcpyDtoDAsync + sync
 *   peer                   adr_copy (cuda:0 -> cuda:1)     vs cuMemcpyPeerAsync + sync
 *   small-copy latency     8-byte pinned H2D               vs cuMemcpyHtoDAsync + sync
 *   alloc+free             adr_alloc/adr_free              vs cuMemAlloc/cuMemFree
 *                          adr on a stream                 vs cuMemAllocAsync/cuMemFreeAsync
 *
 * Every copy row first checks the bytes each side moved (bench_expect):
 * the source holds one byte value and the destination another, the side
 * copies once, and the destination is read back with cuMemcpyDtoH (device
 * memory) or read in place (host memory), the same independent read for
 * adr and the baseline. Alloc rows move no bytes and check nothing ("-").
 *
 * It reports nothing without a CUDA GPU, and nothing on the driver
 * simulator (tests/sim), whose timings would mean nothing, unless
 * ADR_BENCH_CUDA_SIM=1 (to check that the rows run; they are then grouped
 * as "cuda-sim ...").
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

#include "adr/adr.h"
#include "adr/memory.h"
#include "bench.h"

void bench_run_cuda(struct bench_ctx* ctx);

struct drv {
  CUresult (*HtoDAsync)(CUdeviceptr, const void*, size_t, CUstream);
  CUresult (*DtoHAsync)(void*, CUdeviceptr, size_t, CUstream);
  CUresult (*HtoD)(CUdeviceptr, const void*, size_t);
  CUresult (*DtoH)(void*, CUdeviceptr, size_t);
  CUresult (*DtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*PeerAsync)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream);
  CUresult (*StreamSynchronize)(CUstream);
  CUresult (*StreamCreate)(CUstream*, unsigned int);
  CUresult (*StreamDestroy)(CUstream);
  CUresult (*MemAlloc)(CUdeviceptr*, size_t);
  CUresult (*MemFree)(CUdeviceptr);
  CUresult (*MemAllocAsync)(CUdeviceptr*, size_t, CUstream);
  CUresult (*MemFreeAsync)(CUdeviceptr, CUstream);
  CUresult (*CtxPushCurrent)(CUcontext);
  CUresult (*CtxPopCurrent)(CUcontext*);
};

static bool bind(void* lib, const char* name, void* slot) {
  void* p = dlsym(lib, name);
  memcpy(slot, &p, sizeof(p));
  return p != NULL;
}

enum op { H2D_PINNED, D2H_PINNED, H2D_PAGEABLE, D2H_PAGEABLE, D2D, PEER, ALLOC, ALLOC_STREAM };

struct arg {
  const struct drv* d;
  enum op op;
  struct adr_device *dev, *dev1, *host, *cpu;
  struct adr_stream* stream; /* for the stream-ordered alloc rows */
  CUstream cs;               /* the direct baseline's stream */
  CUcontext ctx0, ctx1;
  void *dev_a, *dev_b, *peer_buf, *pinned, *pageable;
  void* scratch; /* host memory the checks fill devices from and read them into */
  size_t size;
  int failures;
};

static void adr_fn(void* p) {
  struct arg* a = p;
  int st = 0;
  void* tmp = NULL;
  switch (a->op) {
    case H2D_PINNED:
      st = adr_copy(a->dev, a->dev_a, a->host, a->pinned, a->size, NULL, NULL);
      break;
    case D2H_PINNED:
      st = adr_copy(a->host, a->pinned, a->dev, a->dev_a, a->size, NULL, NULL);
      break;
    case H2D_PAGEABLE:
      st = adr_copy(a->dev, a->dev_a, a->cpu, a->pageable, a->size, NULL, NULL);
      break;
    case D2H_PAGEABLE:
      st = adr_copy(a->cpu, a->pageable, a->dev, a->dev_a, a->size, NULL, NULL);
      break;
    case D2D:
      st = adr_copy(a->dev, a->dev_b, a->dev, a->dev_a, a->size, NULL, NULL);
      break;
    case PEER:
      st = adr_copy(a->dev1, a->peer_buf, a->dev, a->dev_a, a->size, NULL, NULL);
      break;
    case ALLOC:
      st = adr_alloc(a->dev, a->size, 0, NULL, &tmp, NULL);
      if (st == 0) st = adr_free(a->dev, tmp, a->size, NULL, NULL);
      break;
    case ALLOC_STREAM:
      st = adr_alloc(a->dev, a->size, 0, a->stream, &tmp, NULL);
      if (st == 0) st = adr_free(a->dev, tmp, a->size, a->stream, NULL);
      break;
  }
  if (st != 0) a->failures++;
}

static void direct_fn(void* p) {
  struct arg* a = p;
  const struct drv* d = a->d;
  CUdeviceptr da = (CUdeviceptr)(uintptr_t)a->dev_a, db = (CUdeviceptr)(uintptr_t)a->dev_b;
  CUresult r = CUDA_SUCCESS;
  CUdeviceptr tmp = 0;
  switch (a->op) {
    case H2D_PINNED:
      r = d->HtoDAsync(da, a->pinned, a->size, a->cs);
      if (r == CUDA_SUCCESS) r = d->StreamSynchronize(a->cs);
      break;
    case D2H_PINNED:
      r = d->DtoHAsync(a->pinned, da, a->size, a->cs);
      if (r == CUDA_SUCCESS) r = d->StreamSynchronize(a->cs);
      break;
    case H2D_PAGEABLE:
      r = d->HtoD(da, a->pageable, a->size);
      break;
    case D2H_PAGEABLE:
      r = d->DtoH(a->pageable, da, a->size);
      break;
    case D2D:
      r = d->DtoDAsync(db, da, a->size, a->cs);
      if (r == CUDA_SUCCESS) r = d->StreamSynchronize(a->cs);
      break;
    case PEER:
      r = d->PeerAsync((CUdeviceptr)(uintptr_t)a->peer_buf, a->ctx1, da, a->ctx0, a->size, a->cs);
      if (r == CUDA_SUCCESS) r = d->StreamSynchronize(a->cs);
      break;
    case ALLOC:
      r = d->MemAlloc(&tmp, a->size);
      if (r == CUDA_SUCCESS) r = d->MemFree(tmp);
      break;
    case ALLOC_STREAM:
      r = d->MemAllocAsync(&tmp, a->size, a->cs);
      if (r == CUDA_SUCCESS) r = d->MemFreeAsync(tmp, a->cs);
      break;
  }
  if (r != CUDA_SUCCESS) a->failures++;
}

/* The row's source and destination: a host pointer, or a device pointer
 * (CUdeviceptr as a pointer) when *is_dev is set. */
static void ends(const struct arg* a, void** src, bool* src_dev, void** dst, bool* dst_dev) {
  *src_dev = *dst_dev = true;
  *src = a->dev_a;
  switch (a->op) {
    case H2D_PINNED:
    case H2D_PAGEABLE:
      *src = a->op == H2D_PINNED ? a->pinned : a->pageable;
      *src_dev = false;
      *dst = a->dev_a;
      break;
    case D2H_PINNED:
    case D2H_PAGEABLE:
      *dst = a->op == D2H_PINNED ? a->pinned : a->pageable;
      *dst_dev = false;
      break;
    case PEER:
      *dst = a->peer_buf;
      break;
    default:
      *dst = a->dev_b;
      break;
  }
}

/* Sets n bytes at p (device memory through the driver) to `byte`. */
static bool fill(const struct arg* a, void* p, bool dev, int byte) {
  if (!dev) {
    memset(p, byte, a->size);
    return true;
  }
  memset(a->scratch, byte, a->size);
  /* cuMemcpyHtoD from pageable memory may return before its DMA has
   * landed, and the row's stream does not wait for the legacy stream it
   * ran on: wait for it, or the row reads the old bytes (seen on an H200:
   * a D2D check failed at byte 589824 of 1 MiB). */
  return a->d->HtoD((CUdeviceptr)(uintptr_t)p, a->scratch, a->size) == CUDA_SUCCESS &&
         a->d->StreamSynchronize(NULL) == CUDA_SUCCESS;
}

/* Runs `fn` once with `byte` in the source and its complement in the
 * destination, then reads the destination back and checks it. */
static void check_side(struct bench_ctx* ctx, struct arg* a, void (*fn)(void*), int byte,
                       const char* what) {
  void *src, *dst;
  bool src_dev, dst_dev;
  ends(a, &src, &src_dev, &dst, &dst_dev);
  if (!fill(a, src, src_dev, byte) || !fill(a, dst, dst_dev, byte ^ 0xff)) {
    bench_expect(ctx, false, "%s: cannot set up the check (cuMemcpyHtoD failed)", what);
    return;
  }
  int failures = a->failures;
  fn(a);
  if (a->failures != failures) {
    bench_expect(ctx, false, "%s: the copy failed", what);
    return;
  }
  const void* got = dst;
  if (dst_dev) {
    memset(a->scratch, byte ^ 0xff, a->size);
    if (a->d->DtoH(a->scratch, (CUdeviceptr)(uintptr_t)dst, a->size) != CUDA_SUCCESS) {
      bench_expect(ctx, false, "%s: cannot read the destination back (cuMemcpyDtoH failed)", what);
      return;
    }
    got = a->scratch;
  }
  bench_expect_fill(ctx, got, byte, a->size, what);
}

static void size_label(char* buf, size_t cap, size_t n) {
  if (n >= ((size_t)1 << 20))
    snprintf(buf, cap, "%zu MiB", n >> 20);
  else if (n >= 1024)
    snprintf(buf, cap, "%zu KiB", n >> 10);
  else
    snprintf(buf, cap, "%zu B", n);
}

static const char* g_prefix = "cuda";

static void row(struct bench_ctx* ctx, struct arg* a, const char* what, const char* baseline,
                bool bandwidth) {
  char group[64];
  snprintf(group, sizeof(group), "%s %s", g_prefix, what);
  double min_s = bench_quick(ctx) ? 0.05 : 0.3;
  a->failures = 0;
  if (a->op != ALLOC && a->op != ALLOC_STREAM) {
    char msg[192], size[32];
    size_label(size, sizeof(size), a->size);
    snprintf(msg, sizeof(msg), "adr %s %s", group, size);
    check_side(ctx, a, adr_fn, 0x21 + (int)a->op, msg);
    snprintf(msg, sizeof(msg), "%s %s %s", baseline, group, size);
    check_side(ctx, a, direct_fn, 0x41 + (int)a->op, msg);
  }
  double t_adr = bench_time(adr_fn, a, min_s, 3);
  double t_direct = bench_time(direct_fn, a, min_s, 3);
  char label[32];
  size_label(label, sizeof(label), a->size);
  if (a->failures != 0) {
    fprintf(stderr, "bench cuda: %s %s: %d failed calls, row dropped\n", group, label, a->failures);
    return;
  }
  if (bandwidth)
    bench_report(ctx, group, label, (double)a->size / t_adr / 1e9, (double)a->size / t_direct / 1e9,
                 "GB/s", baseline, BENCH_HIGHER_IS_BETTER);
  else
    bench_report(ctx, group, label, t_adr * 1e6, t_direct * 1e6, "us/op", baseline,
                 BENCH_LOWER_IS_BETTER);
}

void bench_run_cuda(struct bench_ctx* ctx) {
  struct adr_error err = {{0}};
  struct arg a = {0};
  if (adr_device_get(ARROW_DEVICE_CUDA, 0, &a.dev, &err) != 0) {
    fprintf(stderr, "bench cuda: skipped: %s\n", err.message);
    return;
  }
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (lib == NULL) {
    fprintf(stderr, "bench cuda: skipped: libcuda.so.1 is not loaded\n");
    return;
  }
  g_prefix = "cuda";
  if (dlsym(lib, "adr_sim_cuda_delay") != NULL) {
    const char* allow = getenv("ADR_BENCH_CUDA_SIM");
    if (allow == NULL || strcmp(allow, "1") != 0) {
      fprintf(stderr, "bench cuda: skipped: libcuda.so.1 is adr's driver simulator\n");
      dlclose(lib);
      return;
    }
    g_prefix = "cuda-sim";
  }
  struct drv d;
  bool ok = bind(lib, "cuMemcpyHtoDAsync_v2", &d.HtoDAsync) &&
            bind(lib, "cuMemcpyDtoHAsync_v2", &d.DtoHAsync) &&
            bind(lib, "cuMemcpyHtoD_v2", &d.HtoD) && bind(lib, "cuMemcpyDtoH_v2", &d.DtoH) &&
            bind(lib, "cuMemcpyDtoDAsync_v2", &d.DtoDAsync) &&
            bind(lib, "cuMemcpyPeerAsync", &d.PeerAsync) &&
            bind(lib, "cuStreamSynchronize", &d.StreamSynchronize) &&
            bind(lib, "cuStreamCreate", &d.StreamCreate) &&
            bind(lib, "cuStreamDestroy_v2", &d.StreamDestroy) &&
            bind(lib, "cuMemAlloc_v2", &d.MemAlloc) && bind(lib, "cuMemFree_v2", &d.MemFree) &&
            bind(lib, "cuCtxPushCurrent_v2", &d.CtxPushCurrent) &&
            bind(lib, "cuCtxPopCurrent_v2", &d.CtxPopCurrent);
  bool pools = bind(lib, "cuMemAllocAsync", &d.MemAllocAsync) &&
               bind(lib, "cuMemFreeAsync", &d.MemFreeAsync);
  void* native = NULL;
  if (!ok || adr_device_get(ARROW_DEVICE_CUDA_HOST, 0, &a.host, &err) != 0 ||
      adr_device_get(ARROW_DEVICE_CPU, 0, &a.cpu, &err) != 0 ||
      adr_device_native(a.dev, ADR_NATIVE_CONTEXT, &native, &err) != 0) {
    fprintf(stderr, "bench cuda: cannot set up: %s\n", ok ? err.message : "missing entry points");
    dlclose(lib);
    return;
  }
  a.d = &d;
  a.ctx0 = (CUcontext)native;
  if (adr_device_get(ARROW_DEVICE_CUDA, 1, &a.dev1, &err) == 0 &&
      adr_device_native(a.dev1, ADR_NATIVE_CONTEXT, &native, &err) == 0)
    a.ctx1 = (CUcontext)native;
  else
    a.dev1 = NULL;

  /* The baseline runs in the same primary context, on its own stream. */
  d.CtxPushCurrent(a.ctx0);
  if (d.StreamCreate(&a.cs, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
    fprintf(stderr, "bench cuda: cuStreamCreate failed\n");
    CUcontext c;
    d.CtxPopCurrent(&c);
    dlclose(lib);
    return;
  }
  size_t max = bench_quick(ctx) ? ((size_t)16 << 20) : ((size_t)256 << 20);
  const size_t sizes[] = {(size_t)64 << 10, (size_t)1 << 20, (size_t)16 << 20, (size_t)256 << 20};
  if (adr_alloc(a.dev, max, 0, NULL, &a.dev_a, &err) != 0 ||
      adr_alloc(a.dev, max, 0, NULL, &a.dev_b, &err) != 0 ||
      adr_alloc(a.host, max, 0, NULL, &a.pinned, &err) != 0 ||
      (a.dev1 && adr_alloc(a.dev1, max, 0, NULL, &a.peer_buf, &err) != 0) ||
      (a.pageable = malloc(max)) == NULL || (a.scratch = malloc(max)) == NULL) {
    fprintf(stderr, "bench cuda: cannot allocate %zu bytes: %s\n", max, err.message);
    goto out;
  }
  memset(a.pageable, 1, max);
  memset(a.pinned, 2, max);

  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]) && sizes[i] <= max; i++) {
    a.size = sizes[i];
    a.op = H2D_PINNED;
    row(ctx, &a, "H2D pinned", "cuMemcpyHtoDAsync", true);
    a.op = D2H_PINNED;
    row(ctx, &a, "D2H pinned", "cuMemcpyDtoHAsync", true);
    a.op = H2D_PAGEABLE;
    row(ctx, &a, "H2D pageable", "cuMemcpyHtoD", true);
    a.op = D2H_PAGEABLE;
    row(ctx, &a, "D2H pageable", "cuMemcpyDtoH", true);
    a.op = D2D;
    row(ctx, &a, "D2D", "cuMemcpyDtoDAsync", true);
    if (a.dev1 != NULL) {
      a.op = PEER;
      row(ctx, &a, "peer 0->1", "cuMemcpyPeerAsync", true);
    }
  }
  a.size = 8;
  a.op = H2D_PINNED;
  row(ctx, &a, "small-copy latency", "cuMemcpyHtoDAsync", false);
  a.op = D2H_PINNED;
  row(ctx, &a, "small-copy latency D2H", "cuMemcpyDtoHAsync", false);
  const size_t alloc_sizes[] = {(size_t)4 << 10, (size_t)1 << 20, (size_t)64 << 20};
  for (size_t i = 0; i < sizeof(alloc_sizes) / sizeof(alloc_sizes[0]); i++) {
    a.size = alloc_sizes[i];
    a.op = ALLOC;
    row(ctx, &a, "alloc+free", "cuMemAlloc+cuMemFree", false);
    if (pools && adr_stream_create(a.dev, &a.stream, &err) == 0) {
      a.op = ALLOC_STREAM;
      row(ctx, &a, "alloc+free on a stream", "cuMemAllocAsync+cuMemFreeAsync", false);
      adr_stream_synchronize(a.stream, NULL);
      d.StreamSynchronize(a.cs);
      adr_stream_destroy(a.stream, NULL);
      a.stream = NULL;
    }
  }
out:
  d.StreamSynchronize(a.cs);
  d.StreamDestroy(a.cs);
  if (a.dev_a) adr_free(a.dev, a.dev_a, max, NULL, NULL);
  if (a.dev_b) adr_free(a.dev, a.dev_b, max, NULL, NULL);
  if (a.pinned) adr_free(a.host, a.pinned, max, NULL, NULL);
  if (a.peer_buf) adr_free(a.dev1, a.peer_buf, max, NULL, NULL);
  free(a.pageable);
  free(a.scratch);
  CUcontext c;
  d.CtxPopCurrent(&c);
  dlclose(lib);
}
