/* Child of test_leak_visible: loads the Vulkan and OpenCL backends (their
 * drivers pinned and suppressed by module as in every test), then leaks a
 * schema node that libadr itself allocated (adr_schema_init; adr's exit
 * teardown never owns an application's schema) and returns 0. Under
 * LeakSanitizer the process must exit non-zero with a report naming
 * libadr. Prints "leak_child: leaking" just before the leak so the parent
 * knows it got that far. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <adr/array.h>
#include <string.h>

#include "drivers.h"

int main(void) {
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
