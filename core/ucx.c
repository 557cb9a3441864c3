/* SPDX-License-Identifier: Apache-2.0
 *
 * The thin public front of adr/ucx.h: libadr never links UCX, so the first
 * call dlopens the UCX module (libadr_ucx.so, built from ucx/) and every
 * function forwards to its table (core/ucx_abi.h) after checking its
 * arguments. The module is looked for in <dir of libadr.so>/adr/modules
 * (the installed layout) and, when libadr runs from its build tree, in
 * <build root>/ucx. It is not a backend: it is not in ADR_PLUGIN_PATH's
 * namespace (a libadr_*.so there is taken for a backend), and it links
 * libadr itself to use the public API. The outcome of the one load attempt
 * (path, or why it failed) is kept for every later call and for adr-info.
 * adr_ucx_module_find looks for the file the same way without loading it.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "ucx_abi.h"

#ifndef ADR_BUILD_ROOT
#define ADR_BUILD_ROOT ""
#endif

static pthread_once_t module_once = PTHREAD_ONCE_INIT;
static const struct adr_ucx_module* module;
static char module_path[1024];
static char module_reason[1536];

/* Out of line (like not_found): inlined, GCC takes the sizes of the
 * callers' buffers for the strings' lengths and warns of truncations the
 * snprintf calls are there to make. */
__attribute__((noinline)) static bool try_open(const char* path) {
  if (access(path, R_OK) != 0) return false;
  snprintf(module_path, sizeof(module_path), "%s", path);
  void* dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (dl == NULL) {
    const char* why = dlerror();
    snprintf(module_reason, sizeof(module_reason), "%s: dlopen failed: %s", path,
             why ? why : "unknown error");
    return true;
  }
  adr_ucx_module_query_fn query = (adr_ucx_module_query_fn)dlsym(dl, ADR_UCX_MODULE_SYMBOL);
  const struct adr_ucx_module* m = query ? query(ADR_UCX_MODULE_ABI) : NULL;
  if (m == NULL || m->abi != ADR_UCX_MODULE_ABI || m->struct_size < sizeof(*m)) {
    snprintf(module_reason, sizeof(module_reason),
             "%s: not a UCX module of this libadr (ABI %u expected)", path, ADR_UCX_MODULE_ABI);
    dlclose(dl);
    return true;
  }
  /* Kept open for the life of the process, like the backends. */
  module = m;
  adr__log(ADR_LOG_INFO, "ucx", "UCX module loaded from %s", path);
  return true;
}

/* The module's candidate paths in search order (at most two), and the
 * list of them for messages ("" when there is none). */
static size_t candidates(char paths[2][1100], char* tried, size_t tried_size) {
  size_t n = 0;
  tried[0] = '\0';
  pthread_mutex_lock(adr__registry_lock());
  const char* core_dir = adr__loader_core_dir();
  pthread_mutex_unlock(adr__registry_lock());
  if (core_dir[0] != '\0')
    snprintf(paths[n++], sizeof(paths[0]), "%s/adr/modules/libadr_ucx.so", core_dir);
  const char* root = ADR_BUILD_ROOT;
  if (root[0] != '\0') snprintf(paths[n++], sizeof(paths[0]), "%s/ucx/libadr_ucx.so", root);
  for (size_t i = 0; i < n; i++) {
    size_t len = strlen(tried);
    snprintf(tried + len, tried_size - len, "%s%s", i ? ", " : "", paths[i]);
  }
  return n;
}

__attribute__((noinline)) static void not_found(char* out, size_t size, const char* tried) {
  snprintf(out, size,
           "libadr_ucx.so not found (tried: %s); build adr with -Ducx=enabled and libucx-dev",
           tried[0] ? tried : "no directory");
}

static void load_module(void) {
  char paths[2][1100], tried[2200];
  size_t n = candidates(paths, tried, sizeof(tried));
  for (size_t i = 0; i < n; i++)
    if (try_open(paths[i])) goto done;
  not_found(module_reason, sizeof(module_reason), tried);
done:
  if (module == NULL) adr__log(ADR_LOG_DEBUG, "ucx", "UCX module unavailable: %s", module_reason);
}

int adr_ucx_module_find(char* out_path, size_t path_capacity, struct adr_error* error) {
  if (out_path != NULL && path_capacity > 0) out_path[0] = '\0';
  char paths[2][1100], tried[2200], reason[2400];
  size_t n = candidates(paths, tried, sizeof(tried));
  for (size_t i = 0; i < n; i++) {
    if (access(paths[i], R_OK) != 0) continue;
    if (out_path != NULL && path_capacity > 0) snprintf(out_path, path_capacity, "%s", paths[i]);
    return 0;
  }
  not_found(reason, sizeof(reason), tried);
  return adr_error_set(error, ENOTSUP, "[adr_ucx_module_find][ucx] %s", reason);
}

static const struct adr_ucx_module* get_module(const char* op, struct adr_error* error) {
  pthread_once(&module_once, load_module);
  if (module == NULL) adr_error_set(error, ENOTSUP, "[%s][ucx] %s", op, module_reason);
  return module;
}

int adr_ucx_available(char* out_path, size_t path_capacity, struct adr_error* error) {
  const struct adr_ucx_module* m = get_module("adr_ucx_available", error);
  if (out_path != NULL && path_capacity > 0)
    snprintf(out_path, path_capacity, "%s", m != NULL ? module_path : "");
  return m != NULL ? 0 : ENOTSUP;
}

int adr_ucx_listen(const char* address, const struct adr_ucx_options* options,
                   struct adr_ucx_listener** out, struct adr_error* error) {
  if (address == NULL || out == NULL)
    return adr_error_set(error, EINVAL, "[adr_ucx_listen] address and out must not be NULL");
  const struct adr_ucx_module* m = get_module("adr_ucx_listen", error);
  return m ? m->listen(address, options, out, error) : ENOTSUP;
}

int adr_ucx_listener_port(const struct adr_ucx_listener* listener) {
  if (listener == NULL || module == NULL) return -1;
  return module->listener_port(listener);
}

int adr_ucx_accept(struct adr_ucx_listener* listener, int timeout_ms, struct adr_ucx_conn** out,
                   struct adr_error* error) {
  if (listener == NULL || out == NULL)
    return adr_error_set(error, EINVAL, "[adr_ucx_accept] listener and out must not be NULL");
  const struct adr_ucx_module* m = get_module("adr_ucx_accept", error);
  return m ? m->accept(listener, timeout_ms, out, error) : ENOTSUP;
}

int adr_ucx_listener_destroy(struct adr_ucx_listener* listener, struct adr_error* error) {
  if (listener == NULL) return 0;
  const struct adr_ucx_module* m = get_module("adr_ucx_listener_destroy", error);
  return m ? m->listener_destroy(listener, error) : ENOTSUP;
}

int adr_ucx_connect(const char* address, const struct adr_ucx_options* options,
                    struct adr_ucx_conn** out, struct adr_error* error) {
  if (address == NULL || out == NULL)
    return adr_error_set(error, EINVAL, "[adr_ucx_connect] address and out must not be NULL");
  const struct adr_ucx_module* m = get_module("adr_ucx_connect", error);
  return m ? m->connect(address, options, out, error) : ENOTSUP;
}

int adr_ucx_send_stream(struct adr_ucx_conn* conn, struct ArrowDeviceArrayStream* source,
                        struct adr_ucx_send_stats* out_stats, struct adr_error* error) {
  if (conn == NULL || source == NULL || source->release == NULL)
    return adr_error_set(error, EINVAL,
                         "[adr_ucx_send_stream] conn and a live source stream are required");
  if (out_stats != NULL && out_stats->struct_size < sizeof(*out_stats))
    return adr_error_set(error, EINVAL, "[adr_ucx_send_stream] out_stats->struct_size %u < %zu",
                         out_stats->struct_size, sizeof(*out_stats));
  const struct adr_ucx_module* m = get_module("adr_ucx_send_stream", error);
  return m ? m->send_stream(conn, source, out_stats, error) : ENOTSUP;
}

int adr_ucx_receive_stream(struct adr_ucx_conn* conn, struct adr_device* device,
                           struct ArrowDeviceArrayStream* out, struct adr_error* error) {
  if (conn == NULL || out == NULL)
    return adr_error_set(error, EINVAL, "[adr_ucx_receive_stream] conn and out must not be NULL");
  const struct adr_ucx_module* m = get_module("adr_ucx_receive_stream", error);
  return m ? m->receive_stream(conn, device, out, error) : ENOTSUP;
}

void adr_ucx_conn_cancel(struct adr_ucx_conn* conn) {
  if (conn != NULL && module != NULL) module->conn_cancel(conn);
}

int adr_ucx_conn_destroy(struct adr_ucx_conn* conn, struct adr_error* error) {
  if (conn == NULL) return 0;
  const struct adr_ucx_module* m = get_module("adr_ucx_conn_destroy", error);
  return m ? m->conn_destroy(conn, error) : ENOTSUP;
}
