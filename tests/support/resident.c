/* Test support: keeps every vendor driver a test process may load mapped
 * until the process has exited, so that LeakSanitizer (which reports after
 * the exit handlers and destructors) and valgrind can attribute a driver's
 * allocations to its module, and tests/lsan.supp can match them by module.
 *
 * Why: the Vulkan loader dlclose()s its drivers and layers in
 * vkDestroyInstance, which adr's exit teardown calls. An allocation a
 * driver never frees (Mesa's CPU topology on AMD processors, say) is then
 * reported from "<unknown module>", and no suppression can name it.
 *
 * How: before main(), every library named by a Vulkan driver or layer
 * manifest and by an OpenCL ICD file is dlopen()ed with RTLD_NODELETE. The
 * same path gives the same handle the vendor loader will get later, and
 * a library once opened with RTLD_NODELETE is never unmapped, whoever
 * closes it. Libraries that do not load (a driver whose dependencies are
 * absent) are skipped: the vendor loader would fail on them too.
 *
 * Linked into every test executable by tests/meson.build (adr_dep there
 * carries it). Reads the environment with secure_getenv, so a setuid copy
 * of a test program pins only the system's manifests. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "resident.h"

#include <dirent.h>
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_PINNED 64

static char pinned[MAX_PINNED][256];
static size_t pinned_count;

static void pin(const char* library) {
  for (size_t i = 0; i < pinned_count; i++)
    if (strcmp(pinned[i], library) == 0) return;
  if (pinned_count == MAX_PINNED) return;
  /* RTLD_LAZY | RTLD_LOCAL as the vendor loaders open them; the flags that
   * matter for identity are the path and RTLD_NODELETE. */
  if (dlopen(library, RTLD_LAZY | RTLD_LOCAL | RTLD_NODELETE) == NULL) {
    (void)dlerror();
    return;
  }
  snprintf(pinned[pinned_count++], sizeof(pinned[0]), "%s", library);
}

/* A library named in a manifest: absolute, a bare file name (the dynamic
 * linker's search, as the loader does), or relative to the manifest's
 * directory (the Vulkan loader's rule for names containing a '/'). */
static void pin_named(const char* manifest, const char* name) {
  if (name[0] == '/' || strchr(name, '/') == NULL) {
    pin(name);
    return;
  }
  char path[1024];
  const char* slash = strrchr(manifest, '/');
  int dir_len = slash != NULL ? (int)(slash - manifest) : 1;
  if (snprintf(path, sizeof(path), "%.*s/%s", dir_len, slash != NULL ? manifest : ".", name) <
      (int)sizeof(path))
    pin(path);
}

static char* read_small_file(const char* path) {
  FILE* f = fopen(path, "re");
  if (f == NULL) return NULL;
  char* text = malloc(65536);
  size_t n = text != NULL ? fread(text, 1, 65535, f) : 0;
  fclose(f);
  if (text != NULL) text[n] = '\0';
  return text;
}

/* Every "library_path": "..." in a Vulkan JSON manifest (layer manifests
 * may list several layers). JSON escapes other than \/ do not occur in
 * library paths; a value using them is skipped. */
static void pin_vulkan_manifest(const char* path) {
  char* text = read_small_file(path);
  if (text == NULL) return;
  for (char* p = strstr(text, "\"library_path\""); p != NULL;
       p = strstr(p + 1, "\"library_path\"")) {
    char* q = p + strlen("\"library_path\"");
    while (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r' || *q == ':') q++;
    if (*q != '"') continue;
    char value[256];
    size_t n = 0;
    bool ok = true;
    for (q++; *q != '"' && *q != '\0'; q++) {
      if (*q == '\\') {
        if (q[1] != '/') {
          ok = false;
          break;
        }
        q++;
      }
      if (n + 1 < sizeof(value)) value[n++] = *q;
    }
    value[n] = '\0';
    if (ok && n > 0) pin_named(path, value);
  }
  free(text);
}

/* An ocl-icd vendor file: one line, the library's name or path. */
static void pin_opencl_icd(const char* path) {
  char* text = read_small_file(path);
  if (text == NULL) return;
  text[strcspn(text, "\r\n")] = '\0';
  if (text[0] != '\0') pin(text);
  free(text);
}

static bool has_suffix(const char* s, const char* suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* A manifest file, or every manifest (by suffix) in a directory. */
static void scan(const char* path, const char* suffix, void (*fn)(const char*)) {
  struct stat st;
  if (stat(path, &st) != 0) return;
  if (!S_ISDIR(st.st_mode)) {
    fn(path);
    return;
  }
  DIR* d = opendir(path);
  if (d == NULL) return;
  for (struct dirent* e = readdir(d); e != NULL; e = readdir(d)) {
    if (!has_suffix(e->d_name, suffix)) continue;
    char file[1024];
    if (snprintf(file, sizeof(file), "%s/%s", path, e->d_name) < (int)sizeof(file)) fn(file);
  }
  closedir(d);
}

/* Each entry of a colon-separated list (directories or files), optionally
 * with `sub` appended (XDG base directories). */
static void scan_list(const char* list, const char* sub, const char* suffix,
                      void (*fn)(const char*)) {
  if (list == NULL) return;
  while (*list != '\0') {
    size_t n = strcspn(list, ":");
    if (n > 0) {
      char path[512];
      if (snprintf(path, sizeof(path), "%.*s%s", (int)n, list, sub != NULL ? sub : "") <
          (int)sizeof(path))
        scan(path, suffix, fn);
    }
    list += n + (list[n] == ':');
  }
}

static const char* env_or(const char* name, const char* fallback) {
  const char* v = secure_getenv(name);
  return v != NULL && v[0] != '\0' ? v : fallback;
}

/* Over-approximates what the vendor loaders may open: every standard
 * directory plus every override, whether or not the override would
 * replace the standard ones. Pinning a library nobody uses costs memory
 * only; missing one brings the unknown module back. */
__attribute__((constructor)) static void pin_vendor_drivers(void) {
  static const char* const vulkan_kinds[] = {"/vulkan/icd.d", "/vulkan/implicit_layer.d",
                                             "/vulkan/explicit_layer.d"};
  for (size_t k = 0; k < sizeof(vulkan_kinds) / sizeof(vulkan_kinds[0]); k++) {
    scan_list(env_or("XDG_CONFIG_DIRS", "/etc/xdg"), vulkan_kinds[k], ".json", pin_vulkan_manifest);
    scan_list("/etc:/usr/local/etc", vulkan_kinds[k], ".json", pin_vulkan_manifest);
    scan_list(env_or("XDG_DATA_DIRS", "/usr/local/share:/usr/share"), vulkan_kinds[k], ".json",
              pin_vulkan_manifest);
  }
  static const char* const vulkan_env[] = {"VK_DRIVER_FILES", "VK_ICD_FILENAMES",
                                           "VK_ADD_DRIVER_FILES", "VK_LAYER_PATH",
                                           "VK_ADD_LAYER_PATH"};
  for (size_t k = 0; k < sizeof(vulkan_env) / sizeof(vulkan_env[0]); k++)
    scan_list(secure_getenv(vulkan_env[k]), NULL, ".json", pin_vulkan_manifest);
  const char* home = secure_getenv("HOME");
  if (home != NULL) {
    char dirs[1024];
    snprintf(dirs, sizeof(dirs), "%s:%s", env_or("XDG_CONFIG_HOME", ""),
             env_or("XDG_DATA_HOME", ""));
    for (size_t k = 0; k < sizeof(vulkan_kinds) / sizeof(vulkan_kinds[0]); k++) {
      char user[1024];
      snprintf(user, sizeof(user), "%s/.config:%s/.local/share", home, home);
      scan_list(user, vulkan_kinds[k], ".json", pin_vulkan_manifest);
      scan_list(dirs, vulkan_kinds[k], ".json", pin_vulkan_manifest);
    }
  }
  scan_list("/etc/OpenCL/vendors", NULL, ".icd", pin_opencl_icd);
  scan_list(secure_getenv("OCL_ICD_VENDORS"), NULL, ".icd", pin_opencl_icd);
  scan_list(secure_getenv("OPENCL_VENDOR_PATH"), NULL, ".icd", pin_opencl_icd);
}

size_t adr_test_resident_count(void) {
  return pinned_count;
}

const char* adr_test_resident_name(size_t index) {
  return index < pinned_count ? pinned[index] : NULL;
}

/* ThreadSanitizer's built-in defaults for every test executable, so a test
 * whose environment sets no TSAN_OPTIONS (the vulkan suite's, say) still
 * stops at the first report and uses the vendor suppressions; TSAN_OPTIONS
 * is applied after these and wins. Unused in other builds. */
__attribute__((visibility("default"), used)) const char* __tsan_default_options(void);
const char* __tsan_default_options(void) {
  return "halt_on_error=1:allocator_may_return_null=1:suppressions=" ADR_TEST_TSAN_SUPP;
}
