/* SPDX-License-Identifier: Apache-2.0
 *
 * The program test_elevated.sh makes setuid-root and runs as an
 * unprivileged user. It links the core statically: a setuid program
 * ignores LD_LIBRARY_PATH and $ORIGIN run paths, so it could not find a
 * build-tree libadr.so; the backends are found beside it, in
 * <dir>/adr/backends (the installed layout, located with dladdr).
 *
 *   elevated_probe [--allow NAME]... [--late-allow NAME]...
 *
 * --allow calls adr_backend_allow_elevated before anything else; then every
 * backend is loaded and described; --late-allow calls it afterwards. Prints
 * one fact per line on stdout for the script to check:
 *   elevated 1 uid 65534 euid 0
 *   allow opencl OK
 *   backend opencl excluded 0 devices: <reason>
 *   late-allow opencl EBUSY: <message>
 * The library's own log lines go to stderr (or ADR_LOG's file).
 */
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "adr/adr.h"

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

static void allow(const char* label, const char* name) {
  struct adr_error err = {{0}};
  int st = adr_backend_allow_elevated(name, &err);
  printf("%s %s %s%s%s\n", label, name, adr_status_name(st), st ? ": " : "", st ? err.message : "");
}

int main(int argc, char** argv) {
  printf("elevated %d uid %d euid %d\n", getauxval(AT_SECURE) != 0, (int)getuid(), (int)geteuid());
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], "--allow") == 0) allow("allow", argv[++i]);

  struct adr_error err = {{0}};
  int st = adr_init(&err);
  printf("init %s%s%s\n", adr_status_name(st), st ? ": " : "", st ? err.message : "");
  if (st != 0) return 1;
  st = adr_backends_load_all(&err);
  if (st != 0) {
    printf("load_all %s: %s\n", adr_status_name(st), err.message);
    return 1;
  }
  for (size_t i = 0; i < adr_backend_count(); i++) {
    struct adr_backend_info bi;
    memset(&bi, 0, sizeof(bi));
    bi.struct_size = sizeof(bi);
    if (adr_backend_info_get(i, &bi, &err) != 0) continue;
    printf("backend %s %s %lld devices: %s\n", bi.name, state_name(bi.state),
           (long long)bi.device_count, bi.reason);
  }
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], "--late-allow") == 0) allow("late-allow", argv[++i]);

  /* Use a device, so the log has something to say at info level. */
  struct adr_device* dev = NULL;
  st = adr_device_get(ARROW_DEVICE_CPU, 0, &dev, &err);
  printf("cpu %s\n", st ? err.message : adr_device_name(dev));
  return 0;
}
