/* SPDX-License-Identifier: Apache-2.0
 *
 * The smallest application of an installed adr: the default device
 * (ADR_DEVICE, else the CPU), one allocation, a memset and a copy back,
 * checked. Built by scripts/install_check.sh with pkg-config, with meson's
 * dependency('adr') and with CMake's find_package(adr); README.md shows
 * the three builds.
 */
#include <adr/adr.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  struct adr_error err = {{0}};
  struct adr_device *dev = NULL, *cpu = NULL;
  unsigned char host[4096];
  void* buf = NULL;
  if (adr_device_default(&dev, &err) != 0 || adr_device_get(ARROW_DEVICE_CPU, 0, &cpu, &err) != 0 ||
      adr_alloc(dev, sizeof(host), 0, NULL, &buf, &err) != 0 ||
      adr_memset(dev, buf, 0x5A, sizeof(host), NULL, &err) != 0 ||
      adr_copy(cpu, host, dev, buf, sizeof(host), NULL, &err) != 0 ||
      adr_free(dev, buf, sizeof(host), NULL, &err) != 0) {
    fprintf(stderr, "consumer: %s\n", err.message);
    return 1;
  }
  for (size_t i = 0; i < sizeof(host); i++)
    if (host[i] != 0x5A) {
      fprintf(stderr, "consumer: byte %zu is %d\n", i, host[i]);
      return 1;
    }
  printf("consumer: adr %s on %s: ok\n", adr_version(), adr_device_name(dev));
  return 0;
}
