/* SPDX-License-Identifier: Apache-2.0
 *
 * OpenCL rows: H2D, D2H and D2D bandwidth at 4 KiB, 1 MiB and 64 MiB and
 * small-copy latency, each next to the same transfer written directly
 * against OpenCL in the same run. The direct baselines run in their own
 * cl_context and in-order queue on the adr device's cl_device_id: taking
 * adr's own queue (ADR_NATIVE_QUEUE) would hand it to the application and
 * turn adr's host shortcuts off for the rest of the process
 * (docs/devices.md), so adr would be measured on a path no application
 * that leaves its queues alone takes. The baselines are what a programmer
 * would write for the memory the address mode uses:
 *   every mode:         blocking clEnqueueWriteBuffer / ReadBuffer and
 *                       CopyBuffer + clFinish on a plain cl_mem;
 *   svm-fine, coarse:   blocking clEnqueueSVMMemcpy on clSVMAlloc memory
 *                       of the same granularity;
 *   svm-fine:           clFinish on the queue, then memcpy on the
 *                       fine-grained SVM pointer (the host may touch it).
 * Where host copies are a memcpy (svm-fine), extra rows compare adr with
 * memcpy between two host buffers. Every row first checks the bytes each
 * side moved (bench_expect).
 *
 * OpenCL is reached through dlopen("libOpenCL.so.1") and dlsym, as the
 * backend does, so adr-bench does not need the ICD loader to start; the
 * area is skipped, with the reason, where it is missing.
 *
 * The address mode is the backend's (ADR_OPENCL_MEMORY, read once per
 * process): run `ADR_OPENCL_MEMORY=buffer adr-bench opencl` for the cl_mem
 * path; the group names say which mode was measured.
 */
/* clCreateCommandQueue (1.2) makes the baseline's plain in-order queue on
 * every ICD. */
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS 1
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adr/adr.h"
#include "adr/opencl.h"
#include "bench.h"

/* The entry points the baselines use, resolved from the ICD loader. */
#define BENCH_CL_SYMBOLS(X)                                                                  \
  X(clCreateBuffer)                                                                          \
  X(clEnqueueCopyBuffer)                                                                     \
  X(clEnqueueFillBuffer) X(clEnqueueReadBuffer) X(clEnqueueSVMMemFill) X(clEnqueueSVMMemcpy) \
      X(clEnqueueWriteBuffer) X(clFinish) X(clReleaseMemObject) X(clSVMAlloc) X(clSVMFree)   \
          X(clCreateContext) X(clReleaseContext) X(clCreateCommandQueue) X(clReleaseCommandQueue)

static struct {
#define BENCH_CL_MEMBER(name) __typeof__(&name) name;
  BENCH_CL_SYMBOLS(BENCH_CL_MEMBER)
#undef BENCH_CL_MEMBER
} C;

/* Opens the ICD loader and fills C; false with the reason in why. */
static bool cl_load(char* why, size_t n) {
  /* The backend's override of the loader's name, if set, names it here too. */
  const char* name = getenv("ADR_OPENCL_LIBRARY");
  if (name == NULL || name[0] == '\0') name = "libOpenCL.so.1";
  void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    const char* e = dlerror();
    snprintf(why, n, "%s not found (%s)", name, e ? e : "dlopen failed");
    return false;
  }
#define BENCH_CL_BIND(name)                               \
  {                                                       \
    void* p_ = dlsym(lib, #name);                         \
    if (p_ == NULL) {                                     \
      snprintf(why, n, "libOpenCL.so.1 lacks %s", #name); \
      return false;                                       \
    }                                                     \
    memcpy(&C.name, &p_, sizeof(p_));                     \
  }
  BENCH_CL_SYMBOLS(BENCH_CL_BIND)
#undef BENCH_CL_BIND
  return true; /* kept open for the life of the process */
}

void bench_run_opencl(struct bench_ctx* ctx);

enum dir { H2D, D2H, D2D };

struct copy_arg {
  struct adr_device* dev;
  struct adr_device* cpu;
  cl_command_queue queue;
  void* dev_a; /* adr allocations */
  void* dev_b;
  cl_mem mem_a; /* plain cl_mem for the direct baseline */
  cl_mem mem_b;
  void* svm_a; /* clSVMAlloc'd, the address mode's granularity (SVM modes) */
  void* svm_b;
  void* host_a;
  void* host_b;
  size_t size;
  enum dir dir;
  int reps;
  int failures;
};

static void adr_fn(void* p) {
  struct copy_arg* a = p;
  for (int i = 0; i < a->reps; i++) {
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
  }
  bench_sink(a->host_b);
}

static void direct_fn(void* p) {
  struct copy_arg* a = p;
  for (int i = 0; i < a->reps; i++) {
    cl_int rc;
    switch (a->dir) {
      case H2D:
        rc = C.clEnqueueWriteBuffer(a->queue, a->mem_a, CL_TRUE, 0, a->size, a->host_a, 0, NULL,
                                    NULL);
        break;
      case D2H:
        rc = C.clEnqueueReadBuffer(a->queue, a->mem_a, CL_TRUE, 0, a->size, a->host_b, 0, NULL,
                                   NULL);
        break;
      default:
        rc = C.clEnqueueCopyBuffer(a->queue, a->mem_a, a->mem_b, 0, 0, a->size, 0, NULL, NULL);
        if (rc == CL_SUCCESS) rc = C.clFinish(a->queue);
        break;
    }
    if (rc != CL_SUCCESS) a->failures++;
  }
  bench_sink(a->host_b);
}

static void svm_memcpy_fn(void* p) {
  struct copy_arg* a = p;
  for (int i = 0; i < a->reps; i++) {
    void* dst = a->dir == H2D ? a->svm_a : a->dir == D2H ? a->host_b : a->svm_b;
    const void* src = a->dir == H2D ? a->host_a : a->svm_a;
    if (C.clEnqueueSVMMemcpy(a->queue, CL_TRUE, dst, src, a->size, 0, NULL, NULL) != CL_SUCCESS)
      a->failures++;
  }
  bench_sink(a->host_b);
}

/* memcpy through a pointer the compiler cannot see through. */
static void* (*volatile memcpy_ptr)(void*, const void*, size_t) = memcpy;

static void memcpy_fn(void* p) {
  struct copy_arg* a = p;
  for (int i = 0; i < a->reps; i++) memcpy_ptr(a->host_b, a->host_a, a->size);
  bench_sink(a->host_b);
}

/* Fine-grained SVM: wait for the queue, then let the host copy. */
static void finish_memcpy_fn(void* p) {
  struct copy_arg* a = p;
  for (int i = 0; i < a->reps; i++) {
    if (C.clFinish(a->queue) != CL_SUCCESS) a->failures++;
    void* dst = a->dir == H2D ? a->svm_a : a->dir == D2H ? a->host_b : a->svm_b;
    const void* src = a->dir == H2D ? a->host_a : a->svm_a;
    memcpy_ptr(dst, src, a->size);
  }
  bench_sink(a->host_b);
}

enum side { SIDE_ADR, SIDE_CLMEM, SIDE_SVM, SIDE_HOST };

/* Puts `byte` in the side's source and `other` in its destination, runs
 * `fn` once and reads the destination back into host_b to check it. */
static void check_side(struct bench_ctx* ctx, struct copy_arg* a, enum side side, void (*fn)(void*),
                       int byte, const char* what) {
  size_t n = a->size;
  int other = byte ^ 0xff;
  int reps = a->reps;
  a->reps = 1;
  memset(a->host_a, byte, n);
  memset(a->host_b, other, n);
  if (side == SIDE_ADR) {
    adr_memset(a->dev, a->dev_a, a->dir == H2D ? other : byte, n, NULL, NULL);
    adr_memset(a->dev, a->dev_b, other, n, NULL, NULL);
  } else if (side == SIDE_CLMEM) {
    cl_uchar src = (cl_uchar)(a->dir == H2D ? other : byte), dst = (cl_uchar)other;
    C.clEnqueueFillBuffer(a->queue, a->mem_a, &src, 1, 0, n, 0, NULL, NULL);
    C.clEnqueueFillBuffer(a->queue, a->mem_b, &dst, 1, 0, n, 0, NULL, NULL);
    C.clFinish(a->queue);
  } else if (side == SIDE_SVM) {
    cl_uchar src = (cl_uchar)(a->dir == H2D ? other : byte), dst = (cl_uchar)other;
    C.clEnqueueSVMMemFill(a->queue, a->svm_a, &src, 1, n, 0, NULL, NULL);
    C.clEnqueueSVMMemFill(a->queue, a->svm_b, &dst, 1, n, 0, NULL, NULL);
    C.clFinish(a->queue);
  }
  fn(a);
  if (a->dir != D2H) {
    /* Read the device destination back. */
    if (side == SIDE_ADR)
      adr_copy(a->cpu, a->host_b, a->dev, a->dir == H2D ? a->dev_a : a->dev_b, n, NULL, NULL);
    else if (side == SIDE_CLMEM)
      C.clEnqueueReadBuffer(a->queue, a->dir == H2D ? a->mem_a : a->mem_b, CL_TRUE, 0, n, a->host_b,
                            0, NULL, NULL);
    else if (side == SIDE_SVM)
      C.clEnqueueSVMMemcpy(a->queue, CL_TRUE, a->host_b, a->dir == H2D ? a->svm_a : a->svm_b, n, 0,
                           NULL, NULL);
  }
  a->reps = reps;
  bench_expect_fill(ctx, a->host_b, byte, n, what);
}

/* Best seconds per call of adr and of the baseline, measured alternately
 * (three times each) so that a load change on the machine hits both. */
static void measure_pair(void (*a_fn)(void*), void (*b_fn)(void*), struct copy_arg* arg,
                         double min_s, double* out_a, double* out_b) {
  double best_a = 0, best_b = 0;
  for (int round = 0; round < 3; round++) {
    double ta = bench_time(a_fn, arg, min_s / 3, 2) / arg->reps;
    double tb = bench_time(b_fn, arg, min_s / 3, 2) / arg->reps;
    if (round == 0 || ta < best_a) best_a = ta;
    if (round == 0 || tb < best_b) best_b = tb;
  }
  *out_a = best_a;
  *out_b = best_b;
}

static const char* dir_name(enum dir d) {
  return d == H2D ? "H2D" : d == D2H ? "D2H" : "D2D";
}

static const char* direct_name(enum dir d) {
  return d == H2D   ? "clEnqueueWriteBuffer"
         : d == D2H ? "clEnqueueReadBuffer"
                    : "clEnqueueCopyBuffer";
}

void bench_run_opencl(struct bench_ctx* ctx) {
  struct adr_error err = {{0}};
  struct adr_device* dev = NULL;
  struct adr_device* cpu = NULL;
  if (adr_device_get(ARROW_DEVICE_OPENCL, 0, &dev, &err) != 0) {
    fprintf(stderr, "bench opencl: skipped: %s\n", err.message);
    return;
  }
  if (adr_device_get(ARROW_DEVICE_CPU, 0, &cpu, &err) != 0) {
    fprintf(stderr, "bench opencl: %s\n", err.message);
    return;
  }
  char why[256];
  if (!cl_load(why, sizeof(why))) {
    fprintf(stderr, "bench opencl: skipped: %s\n", why);
    return;
  }
  /* The baselines' own context and queue on adr's device (never adr's
   * queue: see the top of the file). */
  void* native = NULL;
  cl_context context = NULL;
  cl_command_queue queue = NULL;
  if (adr_device_native(dev, ADR_NATIVE_DEVICE, &native, &err) != 0) goto fail;
  cl_device_id device = native;
  cl_int crc = CL_SUCCESS;
  context = C.clCreateContext(NULL, 1, &device, NULL, NULL, &crc);
  if (context != NULL && crc == CL_SUCCESS)
    queue = C.clCreateCommandQueue(context, device, 0, &crc);
  if (context == NULL || queue == NULL || crc != CL_SUCCESS) {
    fprintf(stderr, "bench opencl: cannot create the baseline's context and queue (cl %d)\n",
            (int)crc);
    if (context != NULL) C.clReleaseContext(context);
    return;
  }
  if (adr_device_native(dev, ADR_OPENCL_NATIVE_ADDRESS_MODE, &native, &err) != 0) goto fail;
  const char* mode = (uintptr_t)native == ADR_OPENCL_ADDRESS_SVM_FINE     ? "svm-fine"
                     : (uintptr_t)native == ADR_OPENCL_ADDRESS_SVM_COARSE ? "svm-coarse"
                                                                          : "buffer";
  bool memcpy_path = (uintptr_t)native == ADR_OPENCL_ADDRESS_SVM_FINE;
  bool svm_base = (uintptr_t)native != ADR_OPENCL_ADDRESS_BUFFER;
  cl_svm_mem_flags svm_flags =
      CL_MEM_READ_WRITE | (memcpy_path ? CL_MEM_SVM_FINE_GRAIN_BUFFER : (cl_svm_mem_flags)0);

  bool quick = bench_quick(ctx);
  double min_s = quick ? 0.05 : 0.25;
  const size_t sizes[] = {4096, (size_t)1 << 20, (size_t)64 << 20};
  const char* labels[] = {"4 KiB", "1 MiB", "64 MiB"};
  size_t count = quick ? 2 : 3;
  size_t max = sizes[count - 1];

  struct copy_arg a = {.dev = dev, .cpu = cpu, .queue = queue};
  cl_int rc = CL_SUCCESS;
  a.mem_a = C.clCreateBuffer(context, CL_MEM_READ_WRITE, max, NULL, &rc);
  if (rc == CL_SUCCESS) a.mem_b = C.clCreateBuffer(context, CL_MEM_READ_WRITE, max, NULL, &rc);
  if (svm_base) {
    a.svm_a = C.clSVMAlloc(context, svm_flags, max, 0);
    a.svm_b = C.clSVMAlloc(context, svm_flags, max, 0);
    if (a.svm_a == NULL || a.svm_b == NULL) rc = CL_OUT_OF_RESOURCES;
  }
  a.host_a = aligned_alloc(4096, max);
  a.host_b = aligned_alloc(4096, max);
  if (rc != CL_SUCCESS || a.host_a == NULL || a.host_b == NULL ||
      adr_alloc(dev, max, 0, NULL, &a.dev_a, &err) != 0 ||
      adr_alloc(dev, max, 0, NULL, &a.dev_b, &err) != 0) {
    fprintf(stderr, "bench opencl: setup failed (cl %d): %s\n", (int)rc, err.message);
    goto cleanup;
  }
  memset(a.host_a, 0x5a, max);
  memset(a.host_b, 0, max);
  adr_memset(dev, a.dev_a, 1, max, NULL, NULL);
  adr_memset(dev, a.dev_b, 2, max, NULL, NULL);
  C.clEnqueueFillBuffer(queue, a.mem_a, &(cl_uchar){1}, 1, 0, max, 0, NULL, NULL);
  C.clEnqueueFillBuffer(queue, a.mem_b, &(cl_uchar){2}, 1, 0, max, 0, NULL, NULL);
  C.clFinish(queue);

  for (int d = H2D; d <= D2D; d++) {
    char group[64], mgroup[80], what[96];
    snprintf(group, sizeof(group), "opencl %s %s", mode, dir_name((enum dir)d));
    snprintf(mgroup, sizeof(mgroup), "opencl %s %s vs memcpy", mode, dir_name((enum dir)d));
    for (size_t i = 0; i < count; i++) {
      a.dir = (enum dir)d;
      a.size = sizes[i];
      a.reps = sizes[i] <= 4096 ? 200 : sizes[i] <= ((size_t)1 << 20) ? 10 : 1;
      snprintf(what, sizeof(what), "%s %s", group, labels[i]);
      int byte = 0x10 + 3 * (int)i + d;
      double gb = (double)a.size / 1e9;
      double t_adr, t_base;
      check_side(ctx, &a, SIDE_ADR, adr_fn, byte, what);
      check_side(ctx, &a, SIDE_CLMEM, direct_fn, byte, what);
      measure_pair(adr_fn, direct_fn, &a, min_s, &t_adr, &t_base);
      bench_report(ctx, group, labels[i], gb / t_adr, gb / t_base, "GB/s", direct_name(a.dir),
                   BENCH_HIGHER_IS_BETTER);
      if (svm_base) {
        check_side(ctx, &a, SIDE_ADR, adr_fn, byte ^ 0x40, what);
        check_side(ctx, &a, SIDE_SVM, svm_memcpy_fn, byte ^ 0x40, what);
        measure_pair(adr_fn, svm_memcpy_fn, &a, min_s, &t_adr, &t_base);
        bench_report(ctx, group, labels[i], gb / t_adr, gb / t_base, "GB/s", "clEnqueueSVMMemcpy",
                     BENCH_HIGHER_IS_BETTER);
      }
      if (memcpy_path) {
        check_side(ctx, &a, SIDE_ADR, adr_fn, byte ^ 0x50, what);
        check_side(ctx, &a, SIDE_SVM, finish_memcpy_fn, byte ^ 0x50, what);
        measure_pair(adr_fn, finish_memcpy_fn, &a, min_s, &t_adr, &t_base);
        bench_report(ctx, group, labels[i], gb / t_adr, gb / t_base, "GB/s",
                     "clFinish+memcpy on SVM", BENCH_HIGHER_IS_BETTER);
        check_side(ctx, &a, SIDE_ADR, adr_fn, byte ^ 0x60, what);
        check_side(ctx, &a, SIDE_HOST, memcpy_fn, byte ^ 0x60, what);
        measure_pair(adr_fn, memcpy_fn, &a, min_s, &t_adr, &t_base);
        bench_report(ctx, mgroup, labels[i], gb / t_adr, gb / t_base, "GB/s", "memcpy",
                     BENCH_HIGHER_IS_BETTER);
      }
    }
  }

  /* Latency: a 64-byte blocking copy is nearly all per-call overhead. */
  {
    char group[64];
    snprintf(group, sizeof(group), "opencl %s latency", mode);
    for (int d = H2D; d <= D2D; d++) {
      a.dir = (enum dir)d;
      a.size = 64;
      a.reps = 1000;
      char label[32], what[112];
      snprintf(label, sizeof(label), "64 B %s", dir_name((enum dir)d));
      snprintf(what, sizeof(what), "%s %s", group, label);
      double t_adr, t_cl, t_base;
      check_side(ctx, &a, SIDE_ADR, adr_fn, 0x70 + d, what);
      check_side(ctx, &a, SIDE_CLMEM, direct_fn, 0x70 + d, what);
      measure_pair(adr_fn, direct_fn, &a, min_s, &t_adr, &t_cl);
      t_adr *= 1e6;
      t_cl *= 1e6;
      bench_report(ctx, group, label, t_adr, t_cl, "us/op", direct_name(a.dir),
                   BENCH_LOWER_IS_BETTER);
      if (svm_base) {
        void (*fn)(void*) = memcpy_path ? finish_memcpy_fn : svm_memcpy_fn;
        check_side(ctx, &a, SIDE_ADR, adr_fn, 0x78 + d, what);
        check_side(ctx, &a, SIDE_SVM, fn, 0x78 + d, what);
        double t_adr2;
        measure_pair(adr_fn, fn, &a, min_s, &t_adr2, &t_base);
        bench_report(ctx, group, label, t_adr2 * 1e6, t_base * 1e6, "us/op",
                     memcpy_path ? "clFinish+memcpy on SVM" : "clEnqueueSVMMemcpy",
                     BENCH_LOWER_IS_BETTER);
      }
      bench_note(ctx, group,
                 d == H2D   ? "64 B H2D overhead vs direct"
                 : d == D2H ? "64 B D2H overhead vs direct"
                            : "64 B D2D overhead vs direct",
                 t_adr - t_cl, "us/op");
    }
  }
  bench_expect(ctx, a.failures == 0, "bench opencl: %d copies failed", a.failures);

cleanup:
  if (a.dev_a != NULL) adr_free(dev, a.dev_a, max, NULL, NULL);
  if (a.dev_b != NULL) adr_free(dev, a.dev_b, max, NULL, NULL);
  if (a.mem_a != NULL) C.clReleaseMemObject(a.mem_a);
  if (a.mem_b != NULL) C.clReleaseMemObject(a.mem_b);
  if (a.svm_a != NULL) C.clSVMFree(context, a.svm_a);
  if (a.svm_b != NULL) C.clSVMFree(context, a.svm_b);
  free(a.host_a);
  free(a.host_b);
  C.clReleaseCommandQueue(queue);
  C.clReleaseContext(context);
  return;
fail:
  fprintf(stderr, "bench opencl: %s\n", err.message);
  if (queue != NULL) C.clReleaseCommandQueue(queue);
  if (context != NULL) C.clReleaseContext(context);
}
