/* SPDX-License-Identifier: Apache-2.0
 *
 * Reads the environment into an immutable struct adr__config, published
 * once. Nothing here is re-read later: the registry and the dispatch path
 * see one consistent configuration for the process' life.
 *
 * What is sticky: a malformed value (EINVAL) is a configuration error and
 * is published like a good configuration, so every later call reports the
 * same status and message. Any other failure while reading (ENOMEM from a
 * parser or strdup) is transient: nothing is published, what was parsed is
 * freed, the calling function fails with that status, and the next call
 * reads the environment again.
 *
 * Locking: config_mutex serialises readers of the environment; `ready` is
 * stored with release order after `config` is complete and loaded with
 * acquire order, so the fast path of adr__ensure_init takes no lock and
 * `config` is never written after `ready` is set.
 *
 * Elevated processes (AT_SECURE: setuid/setgid, file capabilities): no
 * variable may name a file or a library there. ADR_LOG's file= part and
 * ADR_PLUGIN_PATH are ignored with a warning; the level and the selector
 * variables (ADR_DEVICE, ADR_BACKENDS) still apply, since they only choose
 * among code that is installed. docs/environment.md has the table.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

#include "internal.h"

static pthread_mutex_t config_mutex = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool config_ready;
static struct adr__config config;

bool adr__elevated(void) {
  return getauxval(AT_SECURE) != 0;
}

/* What ADR_LOG asked for; applied only when the configuration is
 * published, so a retried read never opens the log file twice nor warns
 * twice. */
struct log_request {
  int level;         /* -1: ADR_LOG unset or not understood (default level) */
  const char* file;  /* points into the environment; NULL: stderr */
  char warning[320]; /* what was not understood; "" when all of it was */
};

/* ADR_LOG only controls diagnostics, so a value adr does not understand
 * never makes adr fail (as the Vulkan loader treats VK_LOADER_DEBUG): an
 * unknown level gives the default level, an unknown option after ',' is
 * ignored, and either is one warning on stderr when the configuration is
 * published (docs/environment.md). */
static void parse_log(const char* text, struct log_request* out) {
  static const char* const names[] = {"error", "warn", "info", "debug", "trace"};
  size_t len = strcspn(text, ",");
  int level = -1;
  for (int i = 0; i <= ADR_LOG_TRACE; i++)
    if (strlen(names[i]) == len && strncmp(text, names[i], len) == 0) level = i;
  out->level = level;
  out->file = NULL;
  if (level < 0) {
    snprintf(out->warning, sizeof(out->warning),
             "ADR_LOG=\"%.200s\": unknown level '%.*s' (expected error, warn, info, debug or "
             "trace); using the default level, error",
             text, (int)(len < 40 ? len : 40), text);
    return;
  }
  if (text[len] == ',') {
    if (strncmp(text + len + 1, "file=", 5) != 0 || text[len + 6] == '\0')
      snprintf(out->warning, sizeof(out->warning),
               "ADR_LOG=\"%.200s\": column %zu: expected 'file=PATH' after ','; ignored, "
               "logging to stderr",
               text, len + 2);
    else
      out->file = text + len + 6;
  }
}

static void config_free(struct adr__config* c) {
  adr__selector_free(c->backends_filter);
  adr__selector_free(c->device_list);
  free(c->plugin_path);
  c->backends_filter = NULL;
  c->device_list = NULL;
  c->plugin_path = NULL;
}

/* Parses every variable into *c; touches no global state. */
static void read_environment(struct adr__config* c, struct log_request* log) {
  const char* text = getenv("ADR_LOG");
  if (text != NULL && text[0] != '\0') parse_log(text, log);

  const char* backends = getenv("ADR_BACKENDS");
  if (backends != NULL) {
    c->status = adr__parse_backend_list("ADR_BACKENDS", backends, &c->backends_filter, &c->error);
    if (c->status) return;
  }

  const char* device = getenv("ADR_DEVICE");
  if (device != NULL) {
    c->device_status =
        adr__parse_device_list("ADR_DEVICE", device, &c->device_list, &c->device_error);
  }

  /* The plugin path decides which code gets loaded into the process, so a
   * setuid/setgid program must not take it from its caller. */
  const char* path = secure_getenv("ADR_PLUGIN_PATH");
  if (path != NULL && path[0] != '\0') {
    c->plugin_path = strdup(path);
    if (c->plugin_path == NULL)
      c->status = adr_error_set(&c->error, ENOMEM, "ADR_PLUGIN_PATH: out of memory");
  }
}

static bool transient(int status) {
  return status != 0 && status != EINVAL;
}

/* Config lock held. Applies the log request and says what an elevated
 * process ignored, once, now that the configuration is final. */
static void publish(const struct log_request* log) {
  if (log->warning[0] != '\0') fprintf(stderr, "adr: warn: %s\n", log->warning);
  if (log->level >= 0) {
    bool drop_file = log->file != NULL && adr__elevated();
    adr__log_configure(log->level, drop_file ? NULL : log->file);
    if (drop_file)
      adr__log(ADR_LOG_WARN, "core",
               "ADR_LOG file=%s ignored: the process runs with elevated privileges; logging to "
               "stderr",
               log->file);
  }
  if (config.status == 0 && secure_getenv("ADR_PLUGIN_PATH") == NULL &&
      getenv("ADR_PLUGIN_PATH") != NULL)
    adr__log(ADR_LOG_WARN, "loader",
             "ADR_PLUGIN_PATH ignored: the process runs with elevated privileges");
  atomic_store_explicit(&config_ready, true, memory_order_release);
}

int adr__ensure_init(struct adr_error* error) {
  if (!atomic_load_explicit(&config_ready, memory_order_acquire)) {
    pthread_mutex_lock(&config_mutex);
    if (!atomic_load_explicit(&config_ready, memory_order_relaxed)) {
      struct adr__config fresh;
      memset(&fresh, 0, sizeof(fresh));
      struct log_request log = {-1, NULL, ""};
      read_environment(&fresh, &log);
      if (transient(fresh.status) || transient(fresh.device_status)) {
        int st = transient(fresh.status) ? fresh.status : fresh.device_status;
        if (error != NULL) *error = transient(fresh.status) ? fresh.error : fresh.device_error;
        config_free(&fresh);
        pthread_mutex_unlock(&config_mutex);
        return st;
      }
      config = fresh;
      publish(&log);
    }
    pthread_mutex_unlock(&config_mutex);
  }
  if (config.status != 0) {
    if (error != NULL) *error = config.error;
    return config.status;
  }
  return 0;
}

const struct adr__config* adr__config(void) {
  adr__ensure_init(NULL);
  return &config;
}

int adr_init(struct adr_error* error) {
  int st = adr__ensure_init(error);
  if (st) return st;
  if (config.device_status) {
    if (error != NULL) *error = config.device_error;
    return config.device_status;
  }
  return 0;
}

const char* adr_version(void) {
  return ADR_VERSION_STRING;
}
