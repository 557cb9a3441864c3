/* SPDX-License-Identifier: Apache-2.0
 *
 * The build root, found at run time (core/buildtree.h says why). Walking up
 * from the code's own directory finds the root both for build/core/libadr.so
 * and for test programs under build/tests/... that link the core
 * statically; a meson subproject build has its own marker in its own build
 * directory, so the nearest marker is the right one.
 */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

static char build_root[PATH_MAX];
static pthread_once_t build_root_once = PTHREAD_ONCE_INIT;

static void find_build_root(void) {
  if (adr__elevated()) return;
  Dl_info info;
  if (dladdr((void*)&adr__build_root, &info) == 0 || info.dli_fname == NULL) return;
  char* dir = realpath(info.dli_fname, NULL);
  if (dir == NULL) return;
  char* slash;
  while ((slash = strrchr(dir, '/')) != NULL && slash != dir) {
    *slash = '\0';
    char marker[PATH_MAX];
    int n = snprintf(marker, sizeof(marker), "%s/adr-build-tree", dir);
    if (n > 0 && (size_t)n < sizeof(marker) && access(marker, R_OK) == 0) {
      snprintf(build_root, sizeof(build_root), "%s", dir);
      break;
    }
  }
  free(dir);
}

const char* adr__build_root(void) {
  pthread_once(&build_root_once, find_build_root);
  return build_root;
}
