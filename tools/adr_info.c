/* SPDX-License-Identifier: Apache-2.0
 *
 * adr-info: what adr finds on this machine — core version, backend search
 * path, every backend (loaded, absent, excluded, rejected or unavailable,
 * with the reason and resolved path) and every device with its info and
 * backend-specific properties. `--json` prints the same as one JSON object;
 * `--memory` adds each device's allocation handler and memory statistics.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "adr/adr.h"
#include "adr/memory.h"

static bool json;
static bool memory; /* --memory: allocation handler and memory statistics */

static void json_string(const char* s) {
  putchar('"');
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      printf("\\%c", c);
    else if (c < 0x20)
      printf("\\u%04x", c);
    else
      putchar(c);
  }
  putchar('"');
}

static const char* state_name(int state) {
  switch (state) {
    case ADR_BACKEND_LOADED: return "loaded";
    case ADR_BACKEND_ABSENT: return "absent";
    case ADR_BACKEND_EXCLUDED: return "excluded";
    case ADR_BACKEND_REJECTED: return "rejected";
    case ADR_BACKEND_UNAVAILABLE: return "unavailable";
    default: return "not loaded";
  }
}

static void human_bytes(uint64_t v, char* buf, size_t cap) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double d = (double)v;
  int u = 0;
  while (d >= 1024 && u < 4) {
    d /= 1024;
    u++;
  }
  snprintf(buf, cap, "%.1f %s", d, units[u]);
}

struct prop_ctx {
  int count;
};

static void print_property(void* ctx, const char* key, const char* value) {
  struct prop_ctx* pc = ctx;
  if (json) {
    printf("%s", pc->count++ ? ", " : "");
    json_string(key);
    printf(": ");
    json_string(value);
  } else {
    printf("      %-22s %s\n", key, value);
  }
}

static const char* const cap_names[] = {"host-accessible", "async-streams", "stream-ordered-alloc",
                                        "peer-copy",       "device-addresses", "unified-addressing",
                                        "import-native",   "sync-downloads"};

static void print_caps(uint64_t caps) {
  bool first = true;
  for (size_t i = 0; i < sizeof(cap_names) / sizeof(cap_names[0]); i++) {
    if (!(caps & (1u << i))) continue;
    if (json)
      printf("%s\"%s\"", first ? "" : ", ", cap_names[i]);
    else
      printf("%s%s", first ? "" : " ", cap_names[i]);
    first = false;
  }
}

/* --memory: the device's allocation handler and statistics (adr/memory.h). */
static void print_memory(struct adr_device* dev) {
  struct adr_memory_stats s;
  memset(&s, 0, sizeof(s));
  s.struct_size = sizeof(s);
  const struct adr_allocator* h = adr_allocator_get(dev);
  const char* hname = h && h->name ? h->name : "?";
  struct adr_error e;
  if (adr_memory_stats_get(dev, &s, &e) != 0) {
    if (json) {
      printf(", \"memory\": {\"error\": ");
      json_string(e.message);
      printf("}");
    } else {
      printf("      %-22s %s\n", "memory stats", e.message);
    }
    return;
  }
  if (json) {
    printf(", \"memory\": {\"handler\": ");
    json_string(hname);
#define ADR_INFO_COUNTER(f)                                                                  \
  printf(", \"" #f "\": {\"current\": %llu, \"peak\": %llu, \"total\": %llu}",                  \
         (unsigned long long)s.f.current, (unsigned long long)s.f.peak,                      \
         (unsigned long long)s.f.total)
    ADR_INFO_COUNTER(allocated_bytes);
    ADR_INFO_COUNTER(allocated_count);
    ADR_INFO_COUNTER(reserved_bytes);
    ADR_INFO_COUNTER(reserved_count);
#undef ADR_INFO_COUNTER
    printf(", \"cached_bytes\": %llu, \"largest_free_block\": %llu, \"cache_hits\": %llu, "
           "\"cache_misses\": %llu, \"stream_waits\": %llu, \"oom_retries\": %llu, "
           "\"oom_failures\": %llu, \"trimmed_bytes\": %llu, \"max_cached\": %llu}",
           (unsigned long long)s.cached_bytes, (unsigned long long)s.largest_free_block,
           (unsigned long long)s.cache_hits, (unsigned long long)s.cache_misses,
           (unsigned long long)s.stream_waits, (unsigned long long)s.oom_retries,
           (unsigned long long)s.oom_failures, (unsigned long long)s.trimmed_bytes,
           (unsigned long long)s.max_cached);
  } else {
    char line[512];
    printf("      %-22s %s\n", "allocation handler", hname);
    printf("      %-22s %s\n", "memory stats", adr_memory_stats_format(&s, line, sizeof(line)));
  }
}

int main(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (strcmp(argv[i], "--memory") == 0) {
      memory = true;
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf("usage: adr-info [--json] [--memory]\n");
      return 0;
    } else {
      fprintf(stderr, "adr-info: unknown argument '%s' (try --help)\n", argv[i]);
      return 2;
    }
  }
  struct adr_error err = {{0}};
  int st = adr_init(&err);
  if (st != 0 && st != EINVAL) {
    fprintf(stderr, "adr-info: %s\n", err.message);
    return 1;
  }
  if (st == EINVAL) fprintf(stderr, "adr-info: warning: %s\n", err.message);
  st = adr_backends_load_all(&err);
  if (st != 0) {
    fprintf(stderr, "adr-info: %s\n", err.message);
    return 1;
  }
  struct adr_device* def = NULL;
  struct adr_error def_err = {{0}};
  int def_st = adr_device_default(&def, &def_err);

  if (json) {
    printf("{\"version\": \"%s\", \"search_path\": ", adr_version());
    json_string(adr_backend_search_path());
    printf(", \"default_device\": ");
    if (def_st == 0) json_string(adr_device_name(def));
    else printf("null, \"default_device_error\": "), json_string(def_err.message);
    printf(", \"validation\": %s", adr_validation_enabled() ? "true" : "false");
    printf(", \"backends\": [");
  } else {
    printf("adr %s\n", adr_version());
    printf("backend search path: %s\n", adr_backend_search_path());
    if (def_st == 0)
      printf("default device (ADR_DEVICE): %s\n", adr_device_name(def));
    else
      printf("default device (ADR_DEVICE): none: %s\n", def_err.message);
    printf("validation layer (ADR_VALIDATE): %s\n", adr_validation_enabled() ? "on" : "off");
    printf("\nbackends:\n");
  }
  size_t nb = adr_backend_count();
  for (size_t i = 0; i < nb; i++) {
    struct adr_backend_info bi;
    memset(&bi, 0, sizeof(bi));
    bi.struct_size = sizeof(bi);
    if (adr_backend_info_get(i, &bi, &err) != 0) continue;
    if (json) {
      printf("%s{\"name\": ", i ? ", " : "");
      json_string(bi.name);
      printf(", \"state\": \"%s\", \"path\": ", state_name(bi.state));
      json_string(bi.path);
      printf(", \"reason\": ");
      json_string(bi.reason);
      printf(", \"abi\": \"%u.%u\", \"device_types\": [", bi.abi_major, bi.abi_minor);
      for (uint32_t t = 0; t < bi.device_type_count; t++) {
        const char* tn = adr_device_type_name(bi.device_types[t]);
        printf("%s\"%s\"", t ? ", " : "", tn ? tn : "?");
      }
      printf("], \"device_count\": %lld}", (long long)bi.device_count);
    } else {
      printf("  %-8s %-11s", bi.name, state_name(bi.state));
      if (bi.state == ADR_BACKEND_LOADED)
        printf(" ABI %u.%u, %lld device%s, %s", bi.abi_major, bi.abi_minor,
               (long long)bi.device_count, bi.device_count == 1 ? "" : "s", bi.path);
      printf("\n");
      if (bi.reason[0]) printf("           %s\n", bi.reason);
    }
  }
  size_t nd = 0;
  adr_device_count(&nd, &err);
  if (json)
    printf("], \"devices\": [");
  else
    printf("\ndevices:\n");
  for (size_t i = 0; i < nd; i++) {
    struct adr_device* dev = NULL;
    if (adr_device_at(i, &dev, &err) != 0) continue;
    struct adr_device_info info;
    memset(&info, 0, sizeof(info));
    info.struct_size = sizeof(info);
    if (adr_device_info_get(dev, &info, &err) != 0) {
      if (!json) printf("  %s: info failed: %s\n", adr_device_name(dev), err.message);
      continue;
    }
    char total[32], freeb[32];
    human_bytes(info.memory_total, total, sizeof(total));
    human_bytes(info.memory_free, freeb, sizeof(freeb));
    if (json) {
      printf("%s{\"device\": ", i ? ", " : "");
      json_string(adr_device_name(dev));
      printf(", \"name\": ");
      json_string(info.name);
      printf(", \"vendor\": ");
      json_string(info.vendor);
      printf(", \"backend\": ");
      json_string(info.backend);
      printf(", \"driver\": ");
      json_string(info.driver);
      printf(", \"memory_total\": %llu, \"memory_free\": %llu, \"alignment\": %u, \"caps\": [",
             (unsigned long long)info.memory_total, (unsigned long long)info.memory_free,
             info.alignment);
      print_caps(info.caps);
      printf("], \"properties\": {");
      struct prop_ctx pc = {0};
      adr_device_properties(dev, print_property, &pc, NULL);
      printf("}");
      if (memory) print_memory(dev);
      printf("}");
    } else {
      printf("  %s  %s\n", adr_device_name(dev), info.name);
      printf("      %-22s %s\n", "vendor", info.vendor);
      printf("      %-22s %s\n", "backend", info.backend);
      if (info.driver[0]) printf("      %-22s %s\n", "driver", info.driver);
      printf("      %-22s %s total, %s free\n", "memory", info.memory_total ? total : "unknown",
             info.memory_free ? freeb : "unknown");
      printf("      %-22s ", "capabilities");
      print_caps(info.caps);
      printf("\n");
      struct prop_ctx pc = {0};
      adr_device_properties(dev, print_property, &pc, NULL);
      if (memory) print_memory(dev);
    }
  }
  if (json) printf("]}\n");
  return 0;
}
