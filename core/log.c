/* SPDX-License-Identifier: Apache-2.0
 *
 * ADR_LOG sink. The level is a relaxed atomic read on every dispatch; the
 * sink (stderr or a file) is set once by the environment reader and each
 * line is written with one fprintf under the stream's own lock, so lines
 * from several threads never interleave.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "internal.h"

_Atomic int adr__log_level_value = ADR_LOG_ERROR;
static FILE* log_file; /* NULL = stderr; written once before any log line */

static const char* const level_names[] = {"error", "warn", "info", "debug", "trace"};

void adr__log_configure(int level, const char* file_path) {
  if (file_path != NULL && file_path[0] != '\0') {
    FILE* f = fopen(file_path, "ae");
    if (f != NULL) {
      setvbuf(f, NULL, _IOLBF, 0);
      log_file = f;
    } else {
      fprintf(stderr, "adr: warn: ADR_LOG: cannot open log file '%s', logging to stderr\n",
              file_path);
    }
  }
  atomic_store_explicit(&adr__log_level_value, level, memory_order_relaxed);
}

static void log_v(int level, const char* component, const char* fmt, va_list ap) {
  char line[2048];
  vsnprintf(line, sizeof(line), fmt, ap);
  const char* lvl = (level >= 0 && level <= ADR_LOG_TRACE) ? level_names[level] : "?";
  fprintf(log_file ? log_file : stderr, "adr: %s: [%s] %s\n", lvl, component ? component : "core",
          line);
}

void adr__log(int level, const char* component, const char* fmt, ...) {
  if (level > adr__log_level()) return;
  va_list ap;
  va_start(ap, fmt);
  log_v(level, component, fmt, ap);
  va_end(ap);
}

uint64_t adr__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int adr__dispatch_traced_end(uint64_t start_ns, int status, const char* dev, const char* op,
                             const char* fmt, ...) {
  uint64_t dt = adr__now_ns() - start_ns;
  char args[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof(args), fmt, ap);
  va_end(ap);
  adr__log(ADR_LOG_TRACE, dev, "%s(%s) -> %s in %llu ns", op, args, adr_status_name(status),
           (unsigned long long)dt);
  return status;
}
