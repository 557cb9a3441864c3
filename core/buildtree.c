/* SPDX-License-Identifier: Apache-2.0
 *
 * The build root, found at run time (core/buildtree.h says why). Walking up
 * from the code's own directory finds the root both for build/core/libadr.so
 * and for test programs under build/tests/... that link the core
 * statically; a meson subproject build has its own marker in its own build
 * directory, so the nearest marker is the right one.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

static char build_root[PATH_MAX];
static pthread_once_t build_root_once = PTHREAD_ONCE_INIT;

/* A marker counts only when whoever put it there could also have put the
 * code itself there: a regular file owned by the owner of the file holding
 * the core (or by root), in a directory with such an owner that not everyone
 * may write to. A marker planted by another user, or sitting in a
 * world-writable directory such as /tmp above an installed library, is
 * ignored, so it cannot add a backend directory to the search path. */
static bool trusted_marker(const char* dir, const char* marker, uid_t owner) {
  struct stat m, d;
  if (lstat(marker, &m) != 0 || !S_ISREG(m.st_mode) || stat(dir, &d) != 0) return false;
  bool marker_owner = m.st_uid == owner || m.st_uid == 0;
  bool dir_owner = d.st_uid == owner || d.st_uid == 0;
  return marker_owner && dir_owner && (d.st_mode & S_IWOTH) == 0;
}

static void find_build_root(void) {
  if (adr__elevated()) return;
  Dl_info info;
  if (dladdr((void*)&adr__build_root, &info) == 0 || info.dli_fname == NULL) return;
  char* dir = realpath(info.dli_fname, NULL);
  struct stat self;
  if (dir == NULL || stat(dir, &self) != 0) {
    free(dir);
    return;
  }
  char* slash;
  while ((slash = strrchr(dir, '/')) != NULL && slash != dir) {
    *slash = '\0';
    char marker[PATH_MAX];
    int n = snprintf(marker, sizeof(marker), "%s/adr-build-tree", dir);
    if (n > 0 && (size_t)n < sizeof(marker) && access(marker, R_OK) == 0) {
      if (trusted_marker(dir, marker, self.st_uid))
        snprintf(build_root, sizeof(build_root), "%s", dir);
      break; /* the nearest marker decides, trusted or not */
    }
  }
  free(dir);
}

const char* adr__build_root(void) {
  pthread_once(&build_root_once, find_build_root);
  return build_root;
}
