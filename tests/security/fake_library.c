/* SPDX-License-Identifier: Apache-2.0
 *
 * The attacker's library: whoever opens it (an OpenCL ICD named by a
 * planted .icd file, or adr's backends through ADR_OPENCL_LIBRARY,
 * ADR_CUDA_DRIVER, ADR_HIP_LIBRARY) runs this constructor, which creates
 * $ADR_TEST_MARKER_DIR/<its own file name>.opened. test_elevated.sh copies
 * it under several names and checks which markers exist. It exports
 * nothing a loader would accept, so every loader rejects it after opening.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((constructor)) static void opened(void) {
  const char* dir = getenv("ADR_TEST_MARKER_DIR");
  Dl_info info;
  if (dir == NULL || dladdr((void*)&opened, &info) == 0 || info.dli_fname == NULL) return;
  const char* base = strrchr(info.dli_fname, '/');
  base = base ? base + 1 : info.dli_fname;
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s.opened", dir, base);
  int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0) close(fd);
}
