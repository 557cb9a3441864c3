/* SPDX-License-Identifier: Apache-2.0
 *
 * Reads the environment once (pthread_once) into an immutable struct
 * adr__config. Nothing here is re-read later: the registry and the
 * dispatch path see one consistent configuration for the process' life.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static struct adr__config config;

static int parse_log(const char* text, struct adr_error* error) {
  static const char* const names[] = {"error", "warn", "info", "debug", "trace"};
  size_t len = strcspn(text, ",");
  int level = -1;
  for (int i = 0; i <= ADR_LOG_TRACE; i++)
    if (strlen(names[i]) == len && strncmp(text, names[i], len) == 0) level = i;
  if (level < 0)
    return adr_error_set(error, EINVAL,
                         "ADR_LOG=\"%s\": column 1: expected a level (error, warn, info, debug, "
                         "trace)",
                         text);
  const char* file = NULL;
  if (text[len] == ',') {
    if (strncmp(text + len + 1, "file=", 5) != 0 || text[len + 6] == '\0')
      return adr_error_set(error, EINVAL,
                           "ADR_LOG=\"%s\": column %zu: expected 'file=PATH' after ','", text,
                           len + 2);
    file = text + len + 6;
  }
  adr__log_configure(level, file);
  return 0;
}

static void read_environment(void) {
  const char* log = getenv("ADR_LOG");
  if (log != NULL && log[0] != '\0') {
    config.status = parse_log(log, &config.error);
    if (config.status) return;
  }

  const char* backends = getenv("ADR_BACKENDS");
  if (backends != NULL) {
    config.status =
        adr__parse_backend_list("ADR_BACKENDS", backends, &config.backends_filter, &config.error);
    if (config.status) return;
  }

  const char* device = getenv("ADR_DEVICE");
  if (device != NULL) {
    config.device_status =
        adr__parse_device_list("ADR_DEVICE", device, &config.device_list, &config.device_error);
  }

  /* The plugin path decides which code gets loaded into the process, so a
   * setuid/setgid program must not take it from its caller. */
  const char* path = secure_getenv("ADR_PLUGIN_PATH");
  if (path == NULL && getenv("ADR_PLUGIN_PATH") != NULL)
    adr__log(ADR_LOG_WARN, "loader",
             "ADR_PLUGIN_PATH ignored: the process runs with elevated privileges");
  if (path != NULL && path[0] != '\0') {
    config.plugin_path = strdup(path);
    if (config.plugin_path == NULL)
      config.status = adr_error_set(&config.error, ENOMEM, "ADR_PLUGIN_PATH: out of memory");
  }
}

const struct adr__config* adr__config(void) {
  pthread_once(&config_once, read_environment);
  return &config;
}

int adr__ensure_init(struct adr_error* error) {
  const struct adr__config* c = adr__config();
  if (c->status != 0) {
    if (error != NULL) *error = c->error;
    return c->status;
  }
  return 0;
}

int adr_init(struct adr_error* error) {
  int st = adr__ensure_init(error);
  if (st) return st;
  const struct adr__config* c = adr__config();
  if (c->device_status) {
    if (error != NULL) *error = c->device_error;
    return c->device_status;
  }
  return 0;
}

const char* adr_version(void) {
  return ADR_VERSION_STRING;
}
