/* Child of test_leak_visible, in one of two modes (argv[1]):
 *
 *   adr     loads the Vulkan and OpenCL backends (their drivers pinned and
 *           suppressed by module as in every test), then leaks a schema
 *           node that libadr itself allocated (adr_schema_init; adr's exit
 *           teardown never owns an application's schema). LeakSanitizer
 *           must report it, naming libadr.
 *   driver  loads the Vulkan backend with the test double of a leaking
 *           driver (leaky_icd.c, listed in VK_DRIVER_FILES beside
 *           lavapipe) and checks that the driver did leak. Linked with
 *           tests/support the leak is suppressed by module and the process
 *           exits 0; linked without it (leak_child_unpinned) the loader
 *           unloads the driver first and LeakSanitizer reports an
 *           "<unknown module>": the fresh-machine failure of issue 11.
 *
 * Prints "leak_child: leaking" (adr) or "leak_child: driver leaked" just
 * before returning, so the parent knows it got that far. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <adr/array.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "drivers.h"

static int leak_adr(void) {
  if (leakcheck_exercise(ARROW_DEVICE_VULKAN, "vulkan") != 0) return 77;
  if (leakcheck_exercise(ARROW_DEVICE_OPENCL, "opencl") != 0) return 77;
  struct ArrowSchema schema;
  struct adr_error err;
  if (adr_schema_init(&schema, "i", "leaked on purpose", 0, 0, &err) != 0) {
    printf("leak_child: adr_schema_init: %s\n", err.message);
    return 1;
  }
  printf("leak_child: leaking\n");
  fflush(stdout);
  /* Forget the only pointer to the node: a direct leak of libadr's calloc. */
  explicit_bzero(&schema, sizeof(schema));
  return 0;
}

static int leak_in_driver(void) {
  if (leakcheck_exercise(ARROW_DEVICE_VULKAN, "vulkan") != 0) return 77;
  const char* icd = getenv("ADR_LEAKY_ICD");
  void* h = icd != NULL ? dlopen(icd, RTLD_LAZY | RTLD_NOLOAD) : NULL;
  int (*leaks)(void) = h != NULL ? (int (*)(void))dlsym(h, "leaky_icd_leaks") : NULL;
  int n = leaks != NULL ? leaks() : -1;
  if (h != NULL) dlclose(h); /* the NOLOAD reference only */
  if (n <= 0) {
    printf("leak_child: the leaking test driver %s was not loaded or did not leak (%d)\n",
           icd != NULL ? icd : "(ADR_LEAKY_ICD unset)", n);
    return 1;
  }
  printf("leak_child: driver leaked\n");
  fflush(stdout);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 2 && strcmp(argv[1], "adr") == 0) return leak_adr();
  if (argc == 2 && strcmp(argv[1], "driver") == 0) return leak_in_driver();
  fprintf(stderr, "usage: %s adr|driver\n", argv[0]);
  return 2;
}
