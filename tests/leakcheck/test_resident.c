/* The drivers stay mapped until LeakSanitizer runs (tests/support).
 *
 * A Vulkan device (lavapipe with the validation layer, as the vulkan suite
 * runs it) and, when built, an OpenCL device (PoCL) do real work; main
 * returns; adr's exit teardown destroys the Vulkan instance, and the
 * Vulkan loader dlclose()s the driver and the layer. This executable's
 * destructor runs after every exit handler (glibc runs the executable's
 * destructors from _dl_fini, registered before main), i.e. after the
 * teardown and just before LeakSanitizer's check; it reads
 * /proc/self/maps and exits 1 unless each driver is still mapped.
 *
 * Built twice: test_resident links the support object like every test;
 * test_resident_control (RESIDENT_CONTROL defined) does not, and passes
 * only if it finds lavapipe unmapped: the check can fail, and the loader
 * really unloads drivers at exit (the fresh-machine failure's cause). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "drivers.h"

static bool opencl_used;

static bool mapped(const char* maps, const char* module) {
  return strstr(maps, module) != NULL;
}

__attribute__((destructor)) static void check_still_mapped(void) {
  static char maps[1 << 20];
  FILE* f = fopen("/proc/self/maps", "re");
  size_t n = f != NULL ? fread(maps, 1, sizeof(maps) - 1, f) : 0;
  if (f != NULL) fclose(f);
  maps[n] = '\0';
  const char* modules[] = {"/libvulkan_lvp.so", "/libVkLayer_khronos_validation.so",
                           opencl_used ? "/libpocl.so" : NULL};
  int missing = 0;
  for (size_t i = 0; i < sizeof(modules) / sizeof(modules[0]); i++) {
    if (modules[i] == NULL) continue;
    bool ok = mapped(maps, modules[i]);
    printf("resident: %s %s after adr's exit teardown\n", modules[i] + 1,
           ok ? "still mapped" : "UNMAPPED");
    missing += !ok;
  }
  fflush(stdout);
#ifdef RESIDENT_CONTROL
  if (mapped(maps, "/libvulkan_lvp.so")) {
    printf(
        "resident-control: FAIL: without tests/support lavapipe is still mapped; the loader "
        "no longer unloads drivers, or something else pins it\n");
    fflush(stdout);
    _exit(1);
  }
  printf("resident-control: OK: without tests/support the loader unmapped lavapipe\n");
  fflush(stdout);
  _exit(0);
#endif
  if (missing != 0) {
    printf("resident: FAIL: LeakSanitizer would report %d module(s) as <unknown module>\n",
           missing);
    fflush(stdout);
    _exit(1);
  }
}

int main(void) {
  int st = leakcheck_exercise(ARROW_DEVICE_VULKAN, "vulkan");
  if (st != 0) {
    const char* require = getenv("ADR_LEAKCHECK_REQUIRE");
    bool required = require != NULL && strcmp(require, "1") == 0;
    printf("resident: %s: no Vulkan device (lavapipe and the validation layer are needed)\n",
           required ? "FAIL (ADR_LEAKCHECK_REQUIRE=1)" : "SKIP");
    fflush(stdout);
    _exit(required ? 1 : 77); /* not through the destructor: nothing to check */
  }
  opencl_used = leakcheck_exercise(ARROW_DEVICE_OPENCL, "opencl") == 0;
  if (!opencl_used) printf("resident: no OpenCL device; checking Vulkan only\n");
  return 0;
}
