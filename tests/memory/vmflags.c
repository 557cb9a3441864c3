/* SPDX-License-Identifier: Apache-2.0 */
#include "vmflags.h"

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#ifndef MADV_HUGEPAGE
#define MADV_HUGEPAGE 14
#endif

bool vmflags_thp_supported(void) {
  const size_t size = (size_t)4 << 20;
  void* probe = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (probe == MAP_FAILED) return false;
  bool ok = madvise(probe, size, MADV_HUGEPAGE) == 0;
  munmap(probe, size);
  return ok;
}

bool vmflags_huge_advised(uintptr_t lo, uintptr_t hi) {
  FILE* f = fopen("/proc/self/smaps", "r");
  if (f == NULL) return false;
  char line[512];
  bool inside = false, huge = false;
  while (!huge && fgets(line, sizeof(line), f) != NULL) {
    unsigned long a, b;
    char* space = strchr(line, ' ');
    /* A mapping's header line: "start-end perms ..." */
    if (sscanf(line, "%lx-%lx ", &a, &b) == 2 && space != NULL && strchr(line, '-') < space)
      inside = a < hi && b > lo;
    else if (inside && strncmp(line, "VmFlags:", 8) == 0)
      huge = strstr(line, " hg") != NULL;
  }
  fclose(f);
  return huge;
}
