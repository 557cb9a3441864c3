/* SPDX-License-Identifier: Apache-2.0
 *
 * Finds, opens and validates backend libraries.
 *
 * Search order for libadr_<name>.so: each directory of ADR_PLUGIN_PATH, then
 * <dir of libadr.so>/adr/backends (the installed layout, found with dladdr),
 * then <build root>/backends/<name> when libadr.so itself runs from the build
 * tree. Libraries are opened RTLD_NOW | RTLD_LOCAL (an unresolved symbol
 * fails here, not at the first call) and never closed. Every outcome is
 * recorded in the backend's state and reason for adr-info. All functions
 * here run with the registry lock held (adr_backend_allow_elevated takes
 * it itself).
 *
 * Elevated processes (setuid/setgid, file capabilities): backends see no
 * environment variable (host_getenv), and the backends whose vendor stack
 * does not protect itself there load only on the application's opt-in
 * (elevated_opt_in below).
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dispatch.h"

#ifndef ADR_BUILD_ROOT
#define ADR_BUILD_ROOT ""
#endif

static void host_log(int level, const char* backend, const char* fmt, ...) {
  if (level > adr__log_level()) return;
  char line[1536];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  adr__log(level, backend, "%s", line);
}

/* Variables a backend asked for that an elevated process hid from it, so
 * each is reported once (backends may read a variable per device). */
static pthread_mutex_t hidden_mutex = PTHREAD_MUTEX_INITIALIZER;
static char hidden_names[32][64];
static size_t hidden_count;

static void report_hidden(const char* name) {
  pthread_mutex_lock(&hidden_mutex);
  bool seen = false;
  for (size_t i = 0; i < hidden_count && !seen; i++) seen = strcmp(hidden_names[i], name) == 0;
  if (!seen && hidden_count < sizeof(hidden_names) / sizeof(hidden_names[0]))
    snprintf(hidden_names[hidden_count++], sizeof(hidden_names[0]), "%s", name);
  pthread_mutex_unlock(&hidden_mutex);
  if (!seen)
    adr__log(ADR_LOG_WARN, "loader", "%s ignored: the process runs with elevated privileges", name);
}

/* Every backend variable is read with secure_getenv: the core cannot tell
 * which of a (possibly third-party) backend's variables names a file or a
 * library (ADR_OPENCL_LIBRARY, ADR_CUDA_DRIVER, ADR_HIP_LIBRARY, the layer
 * ADR_VULKAN_VALIDATION loads), so in an elevated process none is seen.
 * Only adr's own names are reported: a backend may look at a vendor
 * variable just to word a message. */
static const char* host_getenv(const char* name) {
  const char* value = secure_getenv(name);
  if (value == NULL && name != NULL && strncmp(name, "ADR_", 4) == 0 && getenv(name) != NULL)
    report_hidden(name);
  return value;
}

static int host_log_level(void) {
  return adr__log_level();
}

static const struct adr_backend_host host_services = {
    .struct_size = sizeof(struct adr_backend_host),
    .abi_major = ADR_BACKEND_ABI_MAJOR,
    .abi_minor = ADR_BACKEND_ABI_MINOR,
    .log = host_log,
    .getenv = host_getenv,
    .log_level = host_log_level,
};

const struct adr_backend_host* adr__host_services(void) {
  return &host_services;
}

/* Directory libadr.so was loaded from, or "" if unknown. */
static const char* core_dir(void) {
  static char dir[1024];
  static bool done;
  if (done) return dir;
  done = true;
  Dl_info info;
  if (dladdr((void*)&adr__host_services, &info) != 0 && info.dli_fname != NULL) {
    char* real = realpath(info.dli_fname, NULL);
    const char* name = real ? real : info.dli_fname;
    const char* slash = strrchr(name, '/');
    if (slash != NULL && (size_t)(slash - name) < sizeof(dir)) {
      memcpy(dir, name, (size_t)(slash - name));
      dir[slash - name] = '\0';
    }
    free(real);
  }
  return dir;
}

const char* adr__loader_core_dir(void) {
  return core_dir();
}

static bool running_from_build_tree(void) {
  size_t n = strlen(ADR_BUILD_ROOT);
  return n > 0 && strncmp(core_dir(), ADR_BUILD_ROOT, n) == 0 &&
         (core_dir()[n] == '/' || core_dir()[n] == '\0');
}

/* The search path text, built once (registry lock held by callers). */
const char* adr__loader_search_path(void) {
  static char path[4096];
  static bool built;
  if (built) return path;
  built = true;
  const struct adr__config* c = adr__config();
  size_t n = 0;
  if (c->plugin_path != NULL) n += (size_t)snprintf(path, sizeof(path), "%s", c->plugin_path);
  if (core_dir()[0] != '\0' && n < sizeof(path))
    n +=
        (size_t)snprintf(path + n, sizeof(path) - n, "%s%s/adr/backends", n ? ":" : "", core_dir());
  if (running_from_build_tree() && n < sizeof(path))
    snprintf(path + n, sizeof(path) - n, "%s%s/backends/<name>", n ? ":" : "", ADR_BUILD_ROOT);
  return path;
}

/* Try dir/libadr_<name>.so; returns true and fills out if it exists. */
static bool probe(const char* dir, const char* lib, char* out, size_t cap, char* tried,
                  size_t tried_cap) {
  char candidate[1024];
  snprintf(candidate, sizeof(candidate), "%s/%s", dir, lib);
  size_t t = strlen(tried);
  if (t < tried_cap) snprintf(tried + t, tried_cap - t, "%s%s", t ? ", " : "", candidate);
  if (access(candidate, R_OK) != 0) return false;
  snprintf(out, cap, "%s", candidate);
  return true;
}

static bool find_library(struct adr__backend* b, char* tried, size_t tried_cap) {
  const struct adr__config* c = adr__config();
  if (c->plugin_path != NULL) {
    char* copy = strdup(c->plugin_path);
    if (copy != NULL) {
      char* save = NULL;
      for (char* dir = strtok_r(copy, ":", &save); dir != NULL; dir = strtok_r(NULL, ":", &save)) {
        if (dir[0] == '\0') continue;
        if (probe(dir, b->library, b->path, sizeof(b->path), tried, tried_cap)) {
          free(copy);
          return true;
        }
      }
      free(copy);
    }
  }
  if (core_dir()[0] != '\0') {
    char dir[1100];
    snprintf(dir, sizeof(dir), "%s/adr/backends", core_dir());
    if (probe(dir, b->library, b->path, sizeof(b->path), tried, tried_cap)) return true;
  }
  if (running_from_build_tree()) {
    char dir[1100];
    snprintf(dir, sizeof(dir), "%s/backends/%s", ADR_BUILD_ROOT, b->name);
    if (probe(dir, b->library, b->path, sizeof(b->path), tried, tried_cap)) return true;
  }
  return false;
}

static void reject(struct adr__backend* b, int state, const char* fmt, ...) ADR_PRINTF(3, 4);
static void reject(struct adr__backend* b, int state, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b->reason, sizeof(b->reason), fmt, ap);
  va_end(ap);
  b->state = state;
  adr__log(state == ADR_BACKEND_REJECTED ? ADR_LOG_WARN : ADR_LOG_INFO, "loader",
           "backend '%s' %s: %s", b->name,
           state == ADR_BACKEND_REJECTED ? "rejected" : "unavailable", b->reason);
}

bool adr__loader_check_table(struct adr__backend* b, const struct adr_backend* vt) {
  if (vt->abi_major != ADR_BACKEND_ABI_MAJOR) {
    reject(b, ADR_BACKEND_REJECTED, "ABI major version %u, this core speaks %u", vt->abi_major,
           ADR_BACKEND_ABI_MAJOR);
    return false;
  }
  if (vt->struct_size < ADR_BACKEND_MIN_STRUCT_SIZE) {
    reject(b, ADR_BACKEND_REJECTED, "struct_size %u is smaller than the %zu bytes ABI %u.0 needs",
           vt->struct_size, (size_t)ADR_BACKEND_MIN_STRUCT_SIZE, ADR_BACKEND_ABI_MAJOR);
    return false;
  }
  if (vt->name == NULL || vt->device_types == NULL || vt->device_type_count == 0 ||
      vt->device_type_count > ADR_MAX_DEVICE_TYPES) {
    reject(b, ADR_BACKEND_REJECTED,
           "table has no name or an invalid device type list (count %u, at most %d)",
           vt->device_type_count, ADR_MAX_DEVICE_TYPES);
    return false;
  }
#define ADR__CHECK_SLOT(slot)                                             \
  if (vt->slot == NULL) {                                                 \
    reject(b, ADR_BACKEND_REJECTED, "required slot '%s' is NULL", #slot); \
    return false;                                                         \
  }
  ADR_BACKEND_REQUIRED_SLOTS(ADR__CHECK_SLOT)
#undef ADR__CHECK_SLOT
  for (uint32_t i = 0; i < vt->device_type_count; i++) {
    if (vt->device_types[i] <= 0) {
      reject(b, ADR_BACKEND_REJECTED, "invalid device type %d", (int)vt->device_types[i]);
      return false;
    }
  }
  return true;
}

/* In-tree backends whose vendor stack reads files and libraries named by
 * the environment without checking for elevation (the Vulkan loader does
 * check: it uses secure_getenv, so vulkan loads everywhere). In an elevated
 * process they load only after adr_backend_allow_elevated; the docs
 * (docs/environment.md and each README) give the same table. */
static const struct {
  const char* name;
  const char* why;
} elevated_opt_in[] = {
    {"opencl",
     "the OpenCL ICD loader takes driver libraries and directories from the environment "
     "(OCL_ICD_VENDORS, OPENCL_VENDOR_PATH, OPENCL_LAYERS) and PoCL its cache directory "
     "(POCL_CACHE_DIR), without checking for elevation"},
    {"cuda",
     "libcuda takes a library to load and a cache directory from the environment "
     "(CUDA_INJECTION64_PATH, CUDA_CACHE_PATH), without checking for elevation"},
    {"hip",
     "the HIP runtime takes tool libraries and a log file from the environment "
     "(HSA_TOOLS_LIB, ROCP_TOOL_LIBRARIES, AMD_LOG_LEVEL_FILE), without checking for elevation"},
};
#define ADR__OPT_IN_COUNT (sizeof(elevated_opt_in) / sizeof(elevated_opt_in[0]))
/* Registry lock held for both. decided: a load was attempted, so an
 * opt-in now would come too late. */
static bool opted_in[ADR__OPT_IN_COUNT];
static bool decided[ADR__OPT_IN_COUNT];

static int opt_in_index(const char* name) {
  for (size_t i = 0; i < ADR__OPT_IN_COUNT; i++)
    if (strcmp(elevated_opt_in[i].name, name) == 0) return (int)i;
  return -1;
}

/* Whether the elevation policy keeps `b` out; records the decision. */
static bool refused_when_elevated(struct adr__backend* b) {
  int i = b->in_manifest ? opt_in_index(b->name) : -1;
  if (i < 0) return false;
  decided[i] = true;
  if (opted_in[i] || !adr__elevated()) return false;
  b->state = ADR_BACKEND_EXCLUDED;
  snprintf(b->reason, sizeof(b->reason),
           "not loaded in an elevated process: %s; opt in with "
           "adr_backend_allow_elevated(\"%s\")",
           elevated_opt_in[i].why, b->name);
  adr__log(ADR_LOG_INFO, "loader", "backend '%s' excluded: %s", b->name, b->reason);
  return true;
}

int adr_backend_allow_elevated(const char* name, struct adr_error* error) {
  static const char op[] = "adr_backend_allow_elevated";
  if (name == NULL) return adr__errorf(error, EINVAL, op, NULL, "name is NULL");
  int i = opt_in_index(name);
  if (i < 0) {
    if (strcmp(name, "cpu") == 0 || strcmp(name, "vulkan") == 0) return 0;
    return adr__errorf(error, EINVAL, op, NULL,
                       "unknown backend '%s': the in-tree backends are cpu, cuda, hip, opencl "
                       "and vulkan (third-party backends come only from ADR_PLUGIN_PATH, which "
                       "an elevated process ignores)",
                       name);
  }
  pthread_mutex_lock(adr__registry_lock());
  bool too_late = decided[i] && !opted_in[i];
  if (!too_late) opted_in[i] = true;
  pthread_mutex_unlock(adr__registry_lock());
  if (too_late)
    return adr__errorf(error, EBUSY, op, NULL,
                       "backend '%s' was already needed, so whether it loads is decided; call "
                       "this before the first call that needs the backend",
                       name);
  adr__log(ADR_LOG_INFO, "loader", "backend '%s' may load in an elevated process (opt-in)", name);
  return 0;
}

void adr__loader_load(struct adr__backend* b) {
  if (b->state != ADR_BACKEND_NOT_LOADED) return;
  if (refused_when_elevated(b)) return;
  char tried[2048] = "";
  if (!find_library(b, tried, sizeof(tried))) {
    b->state = ADR_BACKEND_ABSENT;
    snprintf(b->reason, sizeof(b->reason), "%s not found (tried: %s)", b->library,
             tried[0] ? tried : "no directory in the search path");
    adr__log(ADR_LOG_DEBUG, "loader", "backend '%s' absent: %s", b->name, b->reason);
    return;
  }
  adr__log(ADR_LOG_INFO, "loader", "backend '%s': opening %s", b->name, b->path);
  dlerror();
  void* dl = dlopen(b->path, RTLD_NOW | RTLD_LOCAL);
  if (dl == NULL) {
    const char* msg = dlerror();
    reject(b, ADR_BACKEND_REJECTED, "dlopen failed: %s", msg ? msg : "unknown error");
    return;
  }
  /* From here on the library stays loaded for the life of the process:
   * unloading code that may have started threads or registered callbacks
   * with a vendor runtime is not safe. */
  b->dl = dl;
  dlerror();
  adr_backend_query_fn query = (adr_backend_query_fn)dlsym(dl, ADR_BACKEND_QUERY_SYMBOL);
  if (query == NULL) {
    const char* msg = dlerror();
    reject(b, ADR_BACKEND_REJECTED, "no %s symbol: %s", ADR_BACKEND_QUERY_SYMBOL,
           msg ? msg : "not exported");
    return;
  }
  const struct adr_backend* vt =
      query(ADR_BACKEND_ABI_MAJOR, ADR_BACKEND_ABI_MINOR, &host_services);
  if (vt == NULL) {
    reject(b, ADR_BACKEND_REJECTED, "%s refused host ABI %u.%u", ADR_BACKEND_QUERY_SYMBOL,
           ADR_BACKEND_ABI_MAJOR, ADR_BACKEND_ABI_MINOR);
    return;
  }
  if (!adr__loader_check_table(b, vt)) return;
  if (b->in_manifest && strcmp(vt->name, b->name) != 0)
    adr__log(ADR_LOG_WARN, "loader", "%s calls itself '%s'; registered as '%s'", b->path, vt->name,
             b->name);
  /* The minor in use is the smaller of the two sides'. */
  const uint32_t host_minor = ADR_BACKEND_ABI_MINOR;
  b->abi_minor = vt->abi_minor < host_minor ? vt->abi_minor : host_minor;
  b->type_count = vt->device_type_count;
  memcpy(b->types, vt->device_types, sizeof(ArrowDeviceType) * vt->device_type_count);

  struct adr_error err = {{0}};
  int st = adr__dispatch_init(b, vt, &err);
  if (st != 0) {
    reject(b, st == ENODEV ? ADR_BACKEND_UNAVAILABLE : ADR_BACKEND_REJECTED, "%s%s (%s)",
           st == ENODEV ? "" : "init failed: ", err.message[0] ? err.message : "no message",
           adr_status_name(st));
    return;
  }
  for (uint32_t i = 0; i < b->type_count; i++) {
    int64_t n = 0;
    memset(&err, 0, sizeof(err));
    st = adr__dispatch_device_count(b, vt, b->types[i], &n, &err);
    if (st != 0) {
      adr__log(ADR_LOG_WARN, b->name, "device_count(%s) failed: %s",
               adr_device_type_name(b->types[i]) ? adr_device_type_name(b->types[i]) : "?",
               err.message);
      n = 0;
    }
    b->device_count[i] = n < 0 ? 0 : n;
  }
  b->vt = vt;
  b->state = ADR_BACKEND_LOADED;
  adr__log(ADR_LOG_INFO, "loader", "backend '%s' %s loaded from %s (ABI %u.%u)", b->name,
           vt->version ? vt->version : "", b->path, ADR_BACKEND_ABI_MAJOR, b->abi_minor);
}

static int compare_names(const void* a, const void* b) {
  return strcmp(*(char* const*)a, *(char* const*)b);
}

void adr__loader_discover(void) {
  static bool discovered;
  if (discovered) return;
  discovered = true;
  const struct adr__config* c = adr__config();
  if (c->plugin_path == NULL) return;
  char* copy = strdup(c->plugin_path);
  if (copy == NULL) return;
  char* names[256];
  size_t count = 0;
  char* save = NULL;
  for (char* dir = strtok_r(copy, ":", &save); dir != NULL; dir = strtok_r(NULL, ":", &save)) {
    DIR* d = opendir(dir);
    if (d == NULL) {
      adr__log(ADR_LOG_DEBUG, "loader", "ADR_PLUGIN_PATH entry '%s' is not a directory", dir);
      continue;
    }
    struct dirent* e;
    while ((e = readdir(d)) != NULL && count < 256) {
      size_t len = strlen(e->d_name);
      if (len <= 10 || strncmp(e->d_name, "libadr_", 7) != 0 ||
          strcmp(e->d_name + len - 3, ".so") != 0)
        continue;
      names[count] = strndup(e->d_name + 7, len - 10);
      if (names[count] != NULL) count++;
    }
    closedir(d);
  }
  free(copy);
  /* File-name order makes conflicts between third-party backends resolve
   * the same way on every run. */
  qsort(names, count, sizeof(char*), compare_names);
  for (size_t i = 0; i < count; i++) {
    bool valid = names[i][0] != '\0';
    for (const char* p = names[i]; *p; p++)
      if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_')) valid = false;
    if (valid && adr__registry_find(names[i]) == NULL) {
      char lib[96];
      snprintf(lib, sizeof(lib), "libadr_%s.so", names[i]);
      adr__registry_add(names[i], lib, false);
    }
    free(names[i]);
  }
}
