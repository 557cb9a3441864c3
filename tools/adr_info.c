/* SPDX-License-Identifier: Apache-2.0
 *
 * adr-info: what adr finds on this machine — core version, backend search
 * path, every backend (loaded, absent, excluded, rejected or unavailable,
 * with the reason and resolved path) and every device with its info and
 * backend-specific properties. `--list` prints one line per device,
 * `--json` the report as one JSON object (schema in docs/adr-info-json.md),
 * `--memory` adds each device's memory figures and this process's
 * allocation statistics. man/adr-info.1 is the manual.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adr/adr.h"
#include "adr/share.h"
#include "adr/ucx.h"
#include "adr/memory.h"
#include "adr/spill.h"

/* The version of the --json document (docs/adr-info-json.md). */
#define ADR_INFO_JSON_SCHEMA 1

static bool json;
static bool memory; /* --memory: memory figures and allocation statistics */
static bool load_ucx; /* --ucx: load the UCX module (else only look for it) */

static void usage(FILE* f) {
  fprintf(f,
          "usage: adr-info [OPTION]...\n"
          "Shows the adr backends and devices found on this machine.\n"
          "\n"
          "  -l, --list      one line per device: ADR_DEVICE spelling, kind, name\n"
          "  -j, --json      the report as JSON (schema %d, docs/adr-info-json.md)\n"
          "  -m, --memory    add each device's memory and this process's statistics\n"
          "  -u, --ucx       load the UCX module to show that it loads (by default it\n"
          "                  is only looked for: loading maps UCX and runs its set-up)\n"
          "  -h, --help      show this help and exit\n"
          "  -V, --version   show the adr version and exit\n"
          "\n"
          "Environment: ADR_DEVICE, ADR_BACKENDS, ADR_PLUGIN_PATH, ADR_LOG ... (adr(7)).\n"
          "Exit status: 0 on success, 1 when adr cannot start (a malformed environment\n"
          "variable), 2 on a usage error.\n",
          ADR_INFO_JSON_SCHEMA);
}

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

/* A string, or null when it is empty (unknown). */
static void json_string_or_null(const char* s) {
  if (s == NULL || s[0] == '\0')
    printf("null");
  else
    json_string(s);
}

/* A byte count or other quantity, or null when the backend reports 0
 * (unknown: adr_device_info says 0 means unknown). */
static void json_u64_or_null(uint64_t v) {
  if (v == 0)
    printf("null");
  else
    printf("%" PRIu64, v);
}

static const char* state_name(int state) {
  switch (state) {
    case ADR_BACKEND_LOADED:
      return "loaded";
    case ADR_BACKEND_ABSENT:
      return "absent";
    case ADR_BACKEND_EXCLUDED:
      return "excluded";
    case ADR_BACKEND_REJECTED:
      return "rejected";
    case ADR_BACKEND_UNAVAILABLE:
      return "unavailable";
    default:
      return "not-loaded";
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

/* The kind of schema 1's "kind" key: gpu, cpu, accelerator or other, as
 * adr-info reported before struct adr_device_info had a kind (an
 * integrated GPU is a "gpu" there); "device_kind" has the full name. */
static const char* coarse_kind(uint32_t kind) {
  switch (kind) {
    case ADR_DEVICE_KIND_GPU:
    case ADR_DEVICE_KIND_INTEGRATED_GPU:
      return "gpu";
    case ADR_DEVICE_KIND_CPU:
      return "cpu";
    case ADR_DEVICE_KIND_ACCELERATOR:
      return "accelerator";
    default:
      return "other";
  }
}

/* "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", or "" without a UUID. */
static void format_uuid(const struct adr_device_info* info, char out[40]) {
  out[0] = '\0';
  if (!(info->identity & ADR_DEVICE_HAS_UUID)) return;
  const uint8_t* u = info->uuid;
  snprintf(out, 40, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
           u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
           u[15]);
}

/* "0000:41:00.0", or "" without a PCI address. */
static void format_pci(const struct adr_device_info* info, char out[32]) {
  out[0] = '\0';
  if (!(info->identity & ADR_DEVICE_HAS_PCI_BUS_ID)) return;
  snprintf(out, 32, "%04x:%02x:%02x.%x", info->pci_domain, info->pci_bus, info->pci_device,
           info->pci_function);
}

/* Every device of the enumeration, for "same physical device as". */
static struct adr_device** all_devices;
static size_t all_count;

/* A property value that is a plain decimal integer becomes a JSON number;
 * everything else stays a string (docs/adr-info-json.md). */
static bool is_integer(const char* s) {
  const char* p = s;
  if (*p == '-') p++;
  if (*p == '\0' || strlen(p) > 18) return false;
  if (p[0] == '0' && p[1] != '\0') return false; /* "007", "0x10": text */
  for (; *p; p++)
    if (*p < '0' || *p > '9') return false;
  return true;
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
    if (is_integer(value))
      printf("%s", value);
    else
      json_string(value);
  } else {
    printf("      %-22s %s\n", key, value);
  }
}

static const char* const cap_names[] = {
    "host-accessible",  "async-streams",      "stream-ordered-alloc", "peer-copy",
    "device-addresses", "unified-addressing", "import-native",        "sync-downloads"};

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

/* Sharing with other processes (adr/share.h): the adr_share_caps bits by
 * name ("memory-export", ... "staged"). */
static void print_sharing(struct adr_device* dev) {
  uint32_t caps = 0;
  if (adr_share_caps(dev, &caps, NULL) != 0) caps = 0;
  char text[128];
  adr_share_caps_text(caps, text, sizeof(text));
  if (caps == 0) {
    if (!json) printf("none");
    return;
  }
  bool first = true;
  for (char* tok = strtok(text, ","); tok != NULL; tok = strtok(NULL, ",")) {
    if (json)
      printf("%s\"%s\"", first ? "" : ", ", tok);
    else
      printf("%s%s", first ? "" : " ", tok);
    first = false;
  }
}

/* --memory, ADR_SPILL: the global spill manager of the device in this
 * process (adr/spill.h), which adr-info creates only to report it, so its
 * figures are zero; an application prints its own with
 * adr_spill_stats_format. JSON: the value of process.spill (null with
 * spilling off). */
static void print_exposure_json(void* ctx, const struct adr_spill_exposure* x) {
  bool* first = ctx;
  printf("%s{\"reason\": ", *first ? "" : ", ");
  json_string(x->reason);
  printf(", \"count\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"backtrace\": ", x->count, x->bytes);
  json_string(x->backtrace);
  printf("}");
  *first = false;
}

static void print_exposure_text(void* ctx, const struct adr_spill_exposure* x) {
  (void)ctx;
  char b[32];
  human_bytes(x->bytes, b, sizeof(b));
  printf("      %-22s  %" PRIu64 " exposed (%s), reason \"%s\":\n", "", x->count, b, x->reason);
  const char* p = x->backtrace;
  while (*p != '\0') {
    const char* nl = strchr(p, '\n');
    int len = nl ? (int)(nl - p) : (int)strlen(p);
    printf("      %-22s  %.*s\n", "", len, p);
    p += len + (nl ? 1 : 0);
  }
}

static void print_spill(struct adr_device* dev) {
  struct adr_spill_manager* sm = NULL;
  struct adr_error e = {{0}};
  int st = adr_spill_manager_global(dev, &sm, &e);
  struct adr_spill_stats s;
  memset(&s, 0, sizeof(s));
  s.struct_size = sizeof(s);
  if (st == 0 && sm != NULL) st = adr_spill_stats_get(sm, &s, &e);
  if (json) {
    printf(", \"spill\": ");
    if (st != 0) {
      printf("{\"error\": ");
      json_string(e.message);
      printf("}");
      return;
    }
    if (sm == NULL) {
      printf("null");
      return;
    }
    static const char* const triggers[ADR_SPILL_TRIGGER_COUNT] = {"on_demand", "limit", "explicit"};
    printf("{\"level\": %u, \"device_limit\": %" PRIu64 ", \"spilled\": {", s.level,
           s.device_limit);
    for (int i = 0; i < ADR_SPILL_TRIGGER_COUNT; i++)
      printf("%s\"%s\": {\"count\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"nanoseconds\": %" PRIu64
             "}",
             i ? ", " : "", triggers[i], s.spilled[i].count, s.spilled[i].bytes,
             s.spilled[i].nanoseconds);
    printf("}, \"unspilled\": {\"count\": %" PRIu64 ", \"bytes\": %" PRIu64
           ", \"nanoseconds\": %" PRIu64 "}",
           s.unspilled.count, s.unspilled.bytes, s.unspilled.nanoseconds);
    printf(", \"buffers\": %" PRIu64 ", \"device_bytes\": %" PRIu64 ", \"host_bytes\": %" PRIu64
           ", \"spillable_bytes\": %" PRIu64 ", \"exposed_buffers\": %" PRIu64
           ", \"exposed_bytes\": %" PRIu64 ", \"peak_device_bytes\": %" PRIu64
           ", \"limit_exceeded\": %" PRIu64 ", \"spill_failures\": %" PRIu64
           ", \"unspill_failures\": %" PRIu64 ", \"queued_spills\": %" PRIu64
           ", \"cow_copies\": %" PRIu64 ", \"cow_bytes\": %" PRIu64,
           s.buffers, s.device_bytes, s.host_bytes, s.spillable_bytes, s.exposed_buffers,
           s.exposed_bytes, s.peak_device_bytes, s.limit_exceeded, s.spill_failures,
           s.unspill_failures, s.queued_spills, s.cow_copies, s.cow_bytes);
    printf(", \"exposures\": ");
    if (s.level >= 2) {
      bool first = true;
      printf("[");
      adr_spill_exposures_list(sm, print_exposure_json, &first, NULL, NULL);
      printf("]");
    } else {
      printf("null");
    }
    printf("}");
    return;
  }
  if (st != 0) {
    printf("      %-22s %s\n", "spill", e.message);
    return;
  }
  if (sm == NULL) return;
  char line[1024];
  if (s.device_limit) human_bytes(s.device_limit, line, sizeof(line));
  printf(
      "      %-22s on (ADR_SPILL), limit %s (this adr-info process's manager; an application "
      "prints its own with adr_spill_stats_format)\n",
      "spill", s.device_limit ? line : "none");
  adr_spill_stats_format(&s, line, sizeof(line));
  for (char* p = line; *p != '\0';) {
    char* nl = strchr(p, '\n');
    if (nl != NULL) *nl = '\0';
    printf("      %-22s %s\n", "", p);
    if (nl == NULL) break;
    p = nl + 1;
  }
  if (s.level >= 2) {
    size_t n = 0;
    adr_spill_exposures_list(sm, NULL, NULL, &n, NULL);
    printf("      %-22s  Exposed buffers (level >= 2): %zu record%s\n", "", n, n == 1 ? "" : "s");
    adr_spill_exposures_list(sm, print_exposure_text, NULL, NULL, NULL);
  }
}

/* --memory: the device's own figures (what its driver reports, for the
 * whole device) and the allocation statistics of adr in this process
 * (adr/memory.h). A fresh adr-info has allocated nothing, so its counters
 * are zero: the output says whose they are. */
static void print_memory(struct adr_device* dev, const struct adr_device_info* info) {
  struct adr_memory_stats s;
  memset(&s, 0, sizeof(s));
  s.struct_size = sizeof(s);
  const struct adr_allocator* h = adr_allocator_get(dev);
  const char* hname = h && h->name ? h->name : NULL;
  struct adr_error e = {{0}};
  int st = adr_memory_stats_get(dev, &s, &e);
  if (json) {
    printf(", \"memory\": {\"device\": {\"total\": ");
    json_u64_or_null(info->memory_total);
    printf(", \"free\": ");
    json_u64_or_null(info->memory_free);
    printf(", \"used\": ");
    if (info->memory_total && info->memory_free && info->memory_free <= info->memory_total)
      printf("%" PRIu64, info->memory_total - info->memory_free);
    else
      printf("null");
    printf("}, \"process\": {\"scope\": \"this adr-info process\", \"handler\": ");
    json_string_or_null(hname);
    if (st != 0) {
      printf(", \"error\": ");
      json_string(e.message);
      print_spill(dev);
      printf("}}");
      return;
    }
#define ADR_INFO_COUNTER(f)                                                                    \
  printf(", \"" #f "\": {\"current\": %" PRIu64 ", \"peak\": %" PRIu64 ", \"total\": %" PRIu64 \
         "}",                                                                                  \
         s.f.current, s.f.peak, s.f.total)
    ADR_INFO_COUNTER(allocated_bytes);
    ADR_INFO_COUNTER(allocated_count);
    ADR_INFO_COUNTER(reserved_bytes);
    ADR_INFO_COUNTER(reserved_count);
#undef ADR_INFO_COUNTER
    printf(", \"cached_bytes\": %" PRIu64 ", \"largest_free_block\": %" PRIu64
           ", \"cache_hits\": %" PRIu64 ", \"cache_misses\": %" PRIu64
           ", \"stream_waits\": %" PRIu64 ", \"oom_retries\": %" PRIu64
           ", \"oom_failures\": %" PRIu64 ", \"trimmed_bytes\": %" PRIu64
           ", \"max_cached\": %" PRIu64,
           s.cached_bytes, s.largest_free_block, s.cache_hits, s.cache_misses, s.stream_waits,
           s.oom_retries, s.oom_failures, s.trimmed_bytes, s.max_cached);
    /* The built-in pool's host-page treatment (its cap above is reported
     * whatever the handler, so is this): null for pools of device memory. */
    printf(", \"host_pages\": ");
    if (adr_device_type(dev) == ARROW_DEVICE_CPU)
      printf("{\"huge_pages\": \"%s\", \"populate\": %s}",
             (s.host_pages & ADR_HOST_PAGES_HUGE_ALL)     ? "all"
             : (s.host_pages & ADR_HOST_PAGES_HUGE_LARGE) ? "large"
                                                          : "none",
             (s.host_pages & ADR_HOST_PAGES_POPULATE) ? "true" : "false");
    else
      printf("null");
    printf(", \"thread_cache\": ");
    if (s.thread_cache != 0)
      printf("\"%s\"", s.thread_cache == ADR_THREAD_CACHE_BIASED ? "biased" : "locked");
    else
      printf("null");
    print_spill(dev);
    printf("}}");
  } else {
    char total[32], freeb[32], used[32];
    human_bytes(info->memory_total, total, sizeof(total));
    human_bytes(info->memory_free, freeb, sizeof(freeb));
    bool have_used =
        info->memory_total && info->memory_free && info->memory_free <= info->memory_total;
    if (have_used) human_bytes(info->memory_total - info->memory_free, used, sizeof(used));
    printf("      %-22s total %s, free %s, in use %s (whole device, all processes)\n",
           "device memory", info->memory_total ? total : "unknown",
           info->memory_free ? freeb : "unknown", have_used ? used : "unknown");
    printf("      %-22s %s\n", "allocation handler", hname ? hname : "unknown");
    if (st != 0) {
      printf("      %-22s %s\n", "memory stats", e.message);
      return;
    }
    char line[512];
    printf("      %-22s (this adr-info process only; statistics are per process)\n",
           "memory stats");
    printf("      %-22s %s\n", "", adr_memory_stats_format(&s, line, sizeof(line)));
    print_spill(dev);
  }
}

/* The environment could not be read (a malformed ADR_DEVICE, ADR_BACKENDS
 * ...): say so on stderr, or as the JSON error document on stdout. */
static int fail(int status, const struct adr_error* err) {
  if (json) {
    printf("{\"schema\": %d, \"adr_version\": ", ADR_INFO_JSON_SCHEMA);
    json_string(adr_version());
    printf(", \"error\": {\"status\": ");
    json_string(adr_status_name(status));
    printf(", \"errno\": %d, \"message\": ", status);
    json_string(err->message);
    printf("}}\n");
  } else {
    fprintf(stderr, "adr-info: %s\n", err->message);
  }
  return 1;
}

/* The UCX module (adr/ucx.h): where it is, or why it is not there; with
 * --ucx, whether it loads. Without --ucx it is not loaded: enumeration
 * needs no network stack, and loading UCX maps its libraries, runs their
 * set-up and installs its memory hooks in this process. */
static void print_ucx(void) {
  char path[1024];
  struct adr_error e = {{0}};
  bool ok = (load_ucx ? adr_ucx_available(path, sizeof(path), &e)
                      : adr_ucx_module_find(path, sizeof(path), &e)) == 0;
  if (json) {
    printf(", \"ucx_module\": {\"available\": %s, \"loaded\": %s, \"path\": ",
           ok ? "true" : "false", ok && load_ucx ? "true" : "false");
    json_string_or_null(ok ? path : NULL);
    printf(", \"reason\": ");
    json_string_or_null(ok ? NULL : e.message);
    printf("}");
  } else if (ok && load_ucx) {
    printf("ucx module: available (%s)\n", path);
  } else if (ok) {
    printf("ucx module: found (%s; not loaded: adr-info --ucx loads it)\n", path);
  } else {
    printf("ucx module: unavailable: %s\n", e.message);
  }
}

static void print_search_path(void) {
  const char* p = adr_backend_search_path();
  if (!json) {
    printf("backend search path: %s\n", p);
    return;
  }
  printf(", \"search_path\": [");
  bool first = true;
  while (*p) {
    size_t n = strcspn(p, ":");
    if (n > 0) {
      char dir[4096];
      snprintf(dir, sizeof(dir), "%.*s", (int)n, p);
      printf("%s", first ? "" : ", ");
      json_string(dir);
      first = false;
    }
    p += n;
    if (*p == ':') p++;
  }
  printf("]");
}

static void print_backend(size_t i, const struct adr_backend_info* bi) {
  bool loaded = bi->state == ADR_BACKEND_LOADED;
  if (!json) {
    printf("  %-8s %-11s", bi->name, state_name(bi->state));
    if (loaded)
      printf(" ABI %u.%u, %lld device%s, %s", bi->abi_major, bi->abi_minor,
             (long long)bi->device_count, bi->device_count == 1 ? "" : "s", bi->path);
    printf("\n");
    if (bi->reason[0]) printf("           %s\n", bi->reason);
    return;
  }
  printf("%s{\"name\": ", i ? ", " : "");
  json_string(bi->name);
  printf(", \"state\": \"%s\", \"path\": ", state_name(bi->state));
  json_string_or_null(bi->path);
  printf(", \"reason\": ");
  json_string_or_null(bi->reason);
  if (loaded)
    printf(", \"abi\": {\"major\": %u, \"minor\": %u}", bi->abi_major, bi->abi_minor);
  else
    printf(", \"abi\": null");
  printf(", \"device_types\": [");
  for (uint32_t t = 0; t < bi->device_type_count; t++) {
    const char* tn = adr_device_type_name(bi->device_types[t]);
    printf("%s", t ? ", " : "");
    json_string_or_null(tn);
  }
  printf("], \"device_count\": ");
  if (loaded)
    printf("%lld}", (long long)bi->device_count);
  else
    printf("null}");
}

/* The other devices of the enumeration that are the same physical device
 * (adr_device_same_physical): a JSON array of names, or ", "-separated
 * text; returns how many. */
static size_t print_same_physical(struct adr_device* dev) {
  size_t n = 0;
  for (size_t k = 0; k < all_count; k++) {
    int same = 0;
    if (all_devices[k] == dev || adr_device_same_physical(dev, all_devices[k], &same, NULL) != 0 ||
        !same)
      continue;
    if (json) {
      printf("%s", n ? ", " : "");
      json_string(adr_device_name(all_devices[k]));
    } else {
      printf("%s%s", n ? ", " : "", adr_device_name(all_devices[k]));
    }
    n++;
  }
  return n;
}

static void print_device(size_t i, struct adr_device* dev, const struct adr_device_info* info) {
  const char* kind = coarse_kind(info->kind);
  const char* type = adr_device_type_name(adr_device_type(dev));
  char uuid[40], pci[32];
  format_uuid(info, uuid);
  format_pci(info, pci);
  if (json) {
    printf("%s{\"device\": ", i ? ", " : "");
    json_string(adr_device_name(dev));
    printf(", \"type\": ");
    json_string_or_null(type);
    printf(", \"id\": %lld, \"kind\": \"%s\", \"device_kind\": \"%s\", \"uuid\": ",
           (long long)adr_device_id(dev), kind, adr_device_kind_name((int)info->kind));
    json_string_or_null(uuid);
    printf(", \"pci_bus_id\": ");
    json_string_or_null(pci);
    printf(", \"same_physical\": [");
    print_same_physical(dev);
    printf("], \"name\": ");
    json_string_or_null(info->name);
    printf(", \"vendor\": ");
    json_string_or_null(info->vendor);
    printf(", \"backend\": ");
    json_string(info->backend);
    printf(", \"driver\": ");
    json_string_or_null(info->driver);
    printf(", \"memory_total\": ");
    json_u64_or_null(info->memory_total);
    printf(", \"memory_free\": ");
    json_u64_or_null(info->memory_free);
    printf(", \"alignment\": ");
    json_u64_or_null(info->alignment);
    printf(", \"capabilities\": [");
    print_caps(info->caps);
    printf("], \"sharing\": [");
    print_sharing(dev);
    printf("], \"properties\": {");
    struct prop_ctx pc = {0};
    adr_device_properties(dev, print_property, &pc, NULL);
    printf("}");
    if (memory) print_memory(dev, info);
    printf("}");
    return;
  }
  char total[32], freeb[32];
  human_bytes(info->memory_total, total, sizeof(total));
  human_bytes(info->memory_free, freeb, sizeof(freeb));
  printf("  %s  %s\n", adr_device_name(dev), info->name);
  printf("      %-22s %s\n", "kind", adr_device_kind_name((int)info->kind));
  if (uuid[0]) printf("      %-22s %s\n", "uuid", uuid);
  if (pci[0]) printf("      %-22s %s\n", "pci bus id", pci);
  printf("      %-22s ", "same physical device");
  if (print_same_physical(dev) == 0) printf("none");
  printf("\n");
  printf("      %-22s %s\n", "vendor", info->vendor[0] ? info->vendor : "unknown");
  printf("      %-22s %s\n", "backend", info->backend);
  if (info->driver[0]) printf("      %-22s %s\n", "driver", info->driver);
  printf("      %-22s %s total, %s free\n", "memory", info->memory_total ? total : "unknown",
         info->memory_free ? freeb : "unknown");
  printf("      %-22s ", "capabilities");
  print_caps(info->caps);
  printf("\n");
  printf("      %-22s ", "sharing");
  print_sharing(dev);
  printf("\n");
  struct prop_ctx pc = {0};
  adr_device_properties(dev, print_property, &pc, NULL);
  if (memory) print_memory(dev, info);
}

/* --list: `ADR_DEVICE-spelling  kind  name`, one line per device, the
 * spellings padded to the longest. */
static int list_devices(void) {
  struct adr_error err = {{0}};
  size_t nd = 0;
  int st = adr_device_count(&nd, &err);
  if (st != 0) return fail(st, &err);
  int width = 0;
  for (size_t i = 0; i < nd; i++) {
    struct adr_device* dev = NULL;
    if (adr_device_at(i, &dev, &err) != 0) continue;
    int n = (int)strlen(adr_device_name(dev));
    if (n > width) width = n;
  }
  for (size_t i = 0; i < nd; i++) {
    struct adr_device* dev = NULL;
    if (adr_device_at(i, &dev, &err) != 0) continue;
    struct adr_device_info info;
    memset(&info, 0, sizeof(info));
    info.struct_size = sizeof(info);
    if (adr_device_info_get(dev, &info, &err) != 0) info.name[0] = '\0';
    printf("%-*s  %-14s  %s\n", width, adr_device_name(dev), adr_device_kind_name((int)info.kind),
           info.name[0] ? info.name : "(unknown)");
  }
  return 0;
}

int main(int argc, char** argv) {
  static const struct option options[] = {
      {"list", no_argument, NULL, 'l'},
      {"json", no_argument, NULL, 'j'},
      {"memory", no_argument, NULL, 'm'},
      {"ucx", no_argument, NULL, 'u'},
      {"help", no_argument, NULL, 'h'},
      {"version", no_argument, NULL, 'V'},
      {NULL, 0, NULL, 0},
  };
  bool list = false;
  int c;
  while ((c = getopt_long(argc, argv, "ljmuhV", options, NULL)) != -1) {
    switch (c) {
      case 'l':
        list = true;
        break;
      case 'j':
        json = true;
        break;
      case 'm':
        memory = true;
        break;
      case 'u':
        load_ucx = true;
        break;
      case 'h':
        usage(stdout);
        return 0;
      case 'V':
        printf("adr-info (adr) %s\n", adr_version());
        return 0;
      default:
        usage(stderr);
        return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "adr-info: unexpected argument '%s'\n", argv[optind]);
    usage(stderr);
    return 2;
  }
  if (list && (json || memory || load_ucx)) {
    fprintf(stderr, "adr-info: --list does not combine with --json, --memory or --ucx\n");
    usage(stderr);
    return 2;
  }
  struct adr_error err = {{0}};
  int st = adr_init(&err);
  if (st != 0) return fail(st, &err);
  st = adr_backends_load_all(&err);
  if (st != 0) return fail(st, &err);
  if (list) return list_devices();

  struct adr_device* def = NULL;
  struct adr_error def_err = {{0}};
  int def_st = adr_device_default(&def, &def_err);

  if (json) {
    printf("{\"schema\": %d, \"adr_version\": ", ADR_INFO_JSON_SCHEMA);
    json_string(adr_version());
    print_search_path();
    printf(", \"default_device\": ");
    if (def_st == 0)
      json_string(adr_device_name(def));
    else
      printf("null");
    printf(", \"default_device_error\": ");
    json_string_or_null(def_st == 0 ? NULL : def_err.message);
    printf(", \"validation\": %s", adr_validation_enabled() ? "true" : "false");
    print_ucx();
    printf(", \"error\": null, \"backends\": [");
  } else {
    printf("adr %s\n", adr_version());
    print_search_path();
    if (def_st == 0)
      printf("default device (ADR_DEVICE): %s\n", adr_device_name(def));
    else
      printf("default device (ADR_DEVICE): none: %s\n", def_err.message);
    printf("validation layer (ADR_VALIDATE): %s\n", adr_validation_enabled() ? "on" : "off");
    print_ucx();
    printf("\nbackends:\n");
  }
  size_t nb = adr_backend_count();
  for (size_t i = 0; i < nb; i++) {
    struct adr_backend_info bi;
    memset(&bi, 0, sizeof(bi));
    bi.struct_size = sizeof(bi);
    if (adr_backend_info_get(i, &bi, &err) != 0) continue;
    print_backend(i, &bi);
  }
  size_t nd = 0;
  adr_device_count(&nd, &err);
  all_devices = calloc(nd ? nd : 1, sizeof(*all_devices));
  for (size_t i = 0; all_devices != NULL && i < nd; i++)
    if (adr_device_at(i, &all_devices[all_count], NULL) == 0) all_count++;
  if (json)
    printf("], \"devices\": [");
  else
    printf("\ndevices:\n");
  size_t shown = 0;
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
    print_device(shown++, dev, &info);
  }
  if (json) printf("]}\n");
  free(all_devices);
  return 0;
}
