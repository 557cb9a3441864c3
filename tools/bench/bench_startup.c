/* SPDX-License-Identifier: Apache-2.0
 *
 * Start-up rows: what a process pays before it can use a device, each
 * measured in fresh child processes (adr-bench re-executed with
 * ADR_BENCH_STARTUP_CHILD=<role>, so nothing the parent loaded or
 * initialised is inherited), as the children's CPU time (user + system,
 * every thread, from wait4) and wall time:
 *
 *   adr-info      the enumeration adr-info does (every backend, every
 *                 device's info and properties, the UCX module looked for
 *                 but not loaded, as adr-info does without --ucx) against
 *                 the vendor inits a competent program would do itself in
 *                 one process:
 *                 clGetPlatformIDs + clGetDeviceIDs, vkCreateInstance +
 *                 vkEnumeratePhysicalDevices (+ vkDestroyInstance, as adr
 *                 does at exit), cuInit + cuDeviceGetCount and hipInit +
 *                 hipGetDeviceCount where those runtimes are installed.
 *   adr-info 3    the same with ADR_BACKENDS=cpu,opencl,vulkan,cuda against
 *                 the OpenCL, Vulkan and CUDA inits only.
 *   opencl:*      adr_device_default with ADR_DEVICE=opencl:* (and the
 *                 device's info) against clGetPlatformIDs + clGetDeviceIDs.
 *
 * Vendor libraries are dlopen'ed by the children (nothing is linked), and a
 * row whose loader is missing is skipped with the reason. The check of each
 * row: every child exited normally and adr found as many OpenCL devices as
 * the ICD loader did; for opencl:*, also that the child mapped no other
 * backend nor vendor library (libadr_vulkan/cuda/hip, libvulkan, libcuda,
 * libamdhip64 absent from /proc/self/maps).
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "adr/adr.h"
#include "adr/ucx.h"
#include "bench.h"

void bench_run_startup(struct bench_ctx* ctx);

#define CHILD_ENV "ADR_BENCH_STARTUP_CHILD"
/* Child exit codes: the OpenCL device count (0..CHILD_MAX_COUNT), or: */
#define CHILD_MAX_COUNT 200
#define CHILD_NO_OPENCL 250 /* libOpenCL.so.1 is missing */
#define CHILD_FAILED 251
#define CHILD_LOADED_OTHER 252 /* ADR_DEVICE=opencl:* mapped another backend or vendor library */

/* ---- the children ---------------------------------------------------------- */

/* The OpenCL and Vulkan entry points used, declared here so the bench
 * needs neither vendor's headers nor libraries. */
typedef int32_t (*pfn_clGetPlatformIDs)(uint32_t, void**, uint32_t*);
typedef int32_t (*pfn_clGetDeviceIDs)(void*, uint64_t, uint32_t, void**, uint32_t*);
#define CL_DEVICE_TYPE_ALL_ 0xFFFFFFFFull

typedef void (*pfn_void)(void);
typedef pfn_void (*pfn_vkGetInstanceProcAddr)(void*, const char*);
struct vk_application_info {
  int32_t sType; /* VK_STRUCTURE_TYPE_APPLICATION_INFO = 0 */
  const void* pNext;
  const char* pApplicationName;
  uint32_t applicationVersion;
  const char* pEngineName;
  uint32_t engineVersion;
  uint32_t apiVersion;
};
struct vk_instance_create_info {
  int32_t sType; /* VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO = 1 */
  const void* pNext;
  uint32_t flags;
  const struct vk_application_info* pApplicationInfo;
  uint32_t enabledLayerCount;
  const char* const* ppEnabledLayerNames;
  uint32_t enabledExtensionCount;
  const char* const* ppEnabledExtensionNames;
};
typedef int32_t (*pfn_vkCreateInstance)(const struct vk_instance_create_info*, const void*, void**);
typedef int32_t (*pfn_vkEnumeratePhysicalDevices)(void*, uint32_t*, void**);
typedef void (*pfn_vkDestroyInstance)(void*, const void*);
#define VK_API_1_2 ((1u << 22) | (2u << 12))

/* OpenCL devices over every platform, or -1 when the loader is missing. */
static int opencl_enumerate(void) {
  void* h = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) return -1;
  pfn_clGetPlatformIDs get_platforms = (pfn_clGetPlatformIDs)dlsym(h, "clGetPlatformIDs");
  pfn_clGetDeviceIDs get_devices = (pfn_clGetDeviceIDs)dlsym(h, "clGetDeviceIDs");
  if (get_platforms == NULL || get_devices == NULL) return -1;
  uint32_t np = 0;
  if (get_platforms(0, NULL, &np) != 0 || np == 0) return 0;
  void* platforms[16];
  if (np > 16) np = 16;
  if (get_platforms(np, platforms, NULL) != 0) return 0;
  int total = 0;
  for (uint32_t p = 0; p < np; p++) {
    uint32_t nd = 0;
    if (get_devices(platforms[p], CL_DEVICE_TYPE_ALL_, 0, NULL, &nd) != 0) continue;
    void* devices[64];
    if (nd > 64) nd = 64;
    if (get_devices(platforms[p], CL_DEVICE_TYPE_ALL_, nd, devices, NULL) == 0) total += (int)nd;
  }
  return total;
}

/* Vulkan physical devices, or -1 when the loader is missing. */
static int vulkan_enumerate(void) {
  void* h = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) return -1;
  pfn_vkGetInstanceProcAddr gipa = (pfn_vkGetInstanceProcAddr)dlsym(h, "vkGetInstanceProcAddr");
  if (gipa == NULL) return -1;
  pfn_vkCreateInstance create = (pfn_vkCreateInstance)gipa(NULL, "vkCreateInstance");
  if (create == NULL) return -1;
  struct vk_application_info app = {.sType = 0, .apiVersion = VK_API_1_2};
  struct vk_instance_create_info ci = {.sType = 1, .pApplicationInfo = &app};
  void* instance = NULL;
  if (create(&ci, NULL, &instance) != 0) return 0;
  pfn_vkEnumeratePhysicalDevices enumerate =
      (pfn_vkEnumeratePhysicalDevices)gipa(instance, "vkEnumeratePhysicalDevices");
  pfn_vkDestroyInstance destroy = (pfn_vkDestroyInstance)gipa(instance, "vkDestroyInstance");
  uint32_t n = 0;
  if (enumerate != NULL) enumerate(instance, &n, NULL);
  void* devices[16];
  if (n > 16) n = 16;
  if (enumerate != NULL && n > 0) enumerate(instance, &n, devices);
  if (destroy != NULL) destroy(instance, NULL);
  return (int)n;
}

/* CUDA devices, or -1 when libcuda is missing. */
static int cuda_enumerate(void) {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) return -1;
  int (*init)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
  int (*count)(int*) = (int (*)(int*))dlsym(h, "cuDeviceGetCount");
  int n = 0;
  if (init == NULL || init(0) != 0) return 0;
  if (count != NULL) count(&n);
  return n;
}

/* HIP devices, or -1 when the HIP runtime is missing. */
static int hip_enumerate(void) {
  void* h = dlopen("libamdhip64.so", RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) h = dlopen("libamdhip64.so.6", RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) h = dlopen("libamdhip64.so.5", RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) return -1;
  int (*init)(unsigned) = (int (*)(unsigned))dlsym(h, "hipInit");
  int (*count)(int*) = (int (*)(int*))dlsym(h, "hipGetDeviceCount");
  int n = 0;
  if (init != NULL) init(0);
  if (count == NULL || count(&n) != 0) return 0;
  return n;
}

static void ignore_property(void* ctx, const char* key, const char* value) {
  (void)key, (void)value;
  (*(size_t*)ctx)++;
}

/* True when /proc/self/maps holds a backend or vendor library other than
 * OpenCL's (what ADR_DEVICE=opencl:* must not load; the CPU backend may
 * be there). */
static bool maps_other_backend(void) {
  static const char* const others[] = {"libadr_vulkan.so", "libadr_cuda.so", "libadr_hip.so",
                                       "libvulkan.so",     "libcuda.so",     "libamdhip64.so"};
  FILE* f = fopen("/proc/self/maps", "r");
  if (f == NULL) return true;
  char line[4096];
  bool found = false;
  while (!found && fgets(line, sizeof(line), f) != NULL)
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]) && !found; i++)
      found = strstr(line, others[i]) != NULL;
  fclose(f);
  return found;
}

static int exit_count(int n) {
  return n < 0 ? CHILD_NO_OPENCL : n > CHILD_MAX_COUNT ? CHILD_MAX_COUNT : n;
}

/* The child roles; each exits with its OpenCL device count. */
static void child_run(const char* role) {
  if (strcmp(role, "vendor") == 0) {
    int ocl = opencl_enumerate();
    vulkan_enumerate();
    cuda_enumerate();
    _exit(exit_count(ocl));
  }
  if (strcmp(role, "vendor4") == 0) {
    int ocl = opencl_enumerate();
    vulkan_enumerate();
    cuda_enumerate();
    hip_enumerate();
    _exit(exit_count(ocl));
  }
  if (strcmp(role, "opencl") == 0) _exit(exit_count(opencl_enumerate()));
  /* Single vendors, for looking into a row by hand. */
  if (strcmp(role, "vulkan") == 0) _exit(exit_count(vulkan_enumerate()));
  if (strcmp(role, "cuda") == 0) _exit(exit_count(cuda_enumerate()));
  if (strcmp(role, "hip") == 0) _exit(exit_count(hip_enumerate()));
  if (strcmp(role, "adr-info") == 0) {
    /* What adr-info does, without the printing: every backend's state,
     * every device's info and properties, where the UCX module is. */
    struct adr_error e = {{0}};
    if (adr_backends_load_all(&e) != 0) _exit(CHILD_FAILED);
    (void)adr_ucx_module_find(NULL, 0, NULL);
    for (size_t i = 0; i < adr_backend_count(); i++) {
      struct adr_backend_info bi;
      memset(&bi, 0, sizeof(bi));
      bi.struct_size = sizeof(bi);
      adr_backend_info_get(i, &bi, NULL);
    }
    size_t n = 0, props = 0;
    int ocl = 0;
    if (adr_device_count(&n, &e) != 0) _exit(CHILD_FAILED);
    for (size_t i = 0; i < n; i++) {
      struct adr_device* dev = NULL;
      if (adr_device_at(i, &dev, &e) != 0) _exit(CHILD_FAILED);
      struct adr_device_info info;
      memset(&info, 0, sizeof(info));
      info.struct_size = sizeof(info);
      adr_device_info_get(dev, &info, NULL);
      adr_device_properties(dev, ignore_property, &props, NULL);
      ocl += adr_device_type(dev) == ARROW_DEVICE_OPENCL;
    }
    _exit(exit_count(ocl));
  }
  if (strcmp(role, "adr-opencl") == 0) {
    /* ADR_DEVICE=opencl:* is in the environment. */
    struct adr_device* dev = NULL;
    struct adr_error e = {{0}};
    if (adr_device_default(&dev, &e) != 0 || adr_device_type(dev) != ARROW_DEVICE_OPENCL)
      _exit(CHILD_FAILED);
    struct adr_device_info info;
    memset(&info, 0, sizeof(info));
    info.struct_size = sizeof(info);
    adr_device_info_get(dev, &info, NULL);
    /* The devices adr knows of this type, without loading anything else. */
    int n = 0;
    for (int64_t id = 0; id < CHILD_MAX_COUNT; id++) {
      struct adr_device* d = NULL;
      if (adr_device_get(ARROW_DEVICE_OPENCL, id, &d, NULL) != 0) break;
      n++;
    }
    if (maps_other_backend()) _exit(CHILD_LOADED_OTHER);
    _exit(exit_count(n));
  }
  _exit(CHILD_FAILED);
}

/* ---- the parent ------------------------------------------------------------- */

struct sample {
  double cpu_ms, wall_ms;
  int status; /* exit code, or -1 when the child did not exit normally */
};

/* ADR_DEVICE and ADR_BACKENDS of the child: set to the value, or unset
 * when NULL. */
static struct sample spawn(const char* role, const char* adr_device, const char* adr_backends) {
  struct sample s = {0, 0, -1};
  fflush(stdout);
  double t0 = bench_now();
  pid_t pid = fork();
  if (pid < 0) return s;
  if (pid == 0) {
    setenv(CHILD_ENV, role, 1);
    if (adr_device != NULL)
      setenv("ADR_DEVICE", adr_device, 1);
    else
      unsetenv("ADR_DEVICE");
    if (adr_backends != NULL)
      setenv("ADR_BACKENDS", adr_backends, 1);
    else
      unsetenv("ADR_BACKENDS");
    freopen("/dev/null", "w", stdout);
    execl("/proc/self/exe", "adr-bench", "startup", (char*)NULL);
    _exit(127);
  }
  int status = 0;
  struct rusage ru;
  memset(&ru, 0, sizeof(ru));
  if (wait4(pid, &status, 0, &ru) != pid) return s;
  s.wall_ms = (bench_now() - t0) * 1e3;
  s.cpu_ms = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
             (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
  s.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return s;
}

static int compare_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof(*v), compare_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#define MAX_RUNS 15

/* Runs the two roles alternately `runs` times; reports CPU and wall rows
 * with the median of each, checked as described at the top. */
static void compare(struct bench_ctx* ctx, const char* group, const char* adr_role,
                    const char* adr_device, const char* adr_backends, const char* base_role,
                    const char* base_name, int runs) {
  double a_cpu[MAX_RUNS], a_wall[MAX_RUNS], b_cpu[MAX_RUNS], b_wall[MAX_RUNS];
  int a_status = 0, b_status = 0;
  bool ok = true;
  for (int i = 0; i < runs; i++) {
    struct sample b = spawn(base_role, NULL, NULL);
    struct sample a = spawn(adr_role, adr_device, adr_backends);
    if (b.status == CHILD_NO_OPENCL) {
      fprintf(stderr, "bench startup: %s skipped: libOpenCL.so.1 cannot be loaded (no OpenCL ICD "
              "loader)\n", group);
      return;
    }
    if (a.status < 0 || a.status > CHILD_MAX_COUNT || b.status < 0 || b.status > CHILD_MAX_COUNT) {
      if (a.status == CHILD_LOADED_OTHER)
        bench_expect(ctx, false, "%s: ADR_DEVICE=%s mapped a backend or vendor library it does "
                     "not name (/proc/self/maps)", group, adr_device ? adr_device : "");
      else
        bench_expect(ctx, false, "%s: a child failed (adr %d, %s %d)", group, a.status, base_name,
                     b.status);
      ok = false;
      break;
    }
    if (i > 0 && (a.status != a_status || b.status != b_status)) ok = false;
    a_status = a.status, b_status = b.status;
    a_cpu[i] = a.cpu_ms, a_wall[i] = a.wall_ms, b_cpu[i] = b.cpu_ms, b_wall[i] = b.wall_ms;
  }
  if (!ok) {
    bench_report(ctx, group, "CPU", 0, 0, "ms", base_name, BENCH_LOWER_IS_BETTER);
    return;
  }
  bench_expect(ctx, a_status == b_status && a_status > 0,
               "%s: adr found %d OpenCL device(s), %s %d", group, a_status, base_name, b_status);
  bench_report(ctx, group, "CPU", median(a_cpu, runs), median(b_cpu, runs), "ms", base_name,
               BENCH_LOWER_IS_BETTER);
  bench_expect(ctx, a_status == b_status && a_status > 0,
               "%s: adr found %d OpenCL device(s), %s %d", group, a_status, base_name, b_status);
  bench_report(ctx, group, "wall", median(a_wall, runs), median(b_wall, runs), "ms", base_name,
               BENCH_LOWER_IS_BETTER);
}

void bench_run_startup(struct bench_ctx* ctx) {
  const char* role = getenv(CHILD_ENV);
  if (role != NULL) child_run(role);
  int runs = bench_quick(ctx) ? 3 : 9;
  double load[3] = {0, 0, 0};
  /* Rows, not free text: --json output stays one JSON object. */
  if (getloadavg(load, 3) == 3) bench_note(ctx, "startup", "load average (1 min)", load[0], "");
  bench_note(ctx, "startup", "fresh processes per row", runs, "(medians)");
  /* adr-info enumerates every backend: the baseline inits every vendor
   * runtime that is installed (HIP's too). */
  compare(ctx, "startup adr-info", "adr-info", NULL, NULL, "vendor4", "cl+vk+cu+hip enum", runs);
  /* The three of issue 12: OpenCL, Vulkan, CUDA (adr limited to them). */
  compare(ctx, "startup adr-info 3", "adr-info", NULL, "cpu,opencl,vulkan,cuda", "vendor",
          "cl+vk+cu enum", runs);
  compare(ctx, "startup opencl:*", "adr-opencl", "opencl:*", NULL, "opencl",
          "clGetPlatformIDs+DeviceIDs", runs);
}
