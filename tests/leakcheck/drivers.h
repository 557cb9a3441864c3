/* Shared by the leakcheck programs: bring up a device of `type` and make
 * its driver do real work (an allocation, a memset, a copy back), so the
 * driver's lazily made state exists as in the suites. Returns 0, or
 * prints why to stdout and returns the status. */
#ifndef ADR_LEAKCHECK_DRIVERS_H
#define ADR_LEAKCHECK_DRIVERS_H

#include <adr/adr.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

static inline int leakcheck_exercise(ArrowDeviceType type, const char* label) {
  struct adr_error err;
  memset(&err, 0, sizeof(err));
  struct adr_device *dev = NULL, *cpu = NULL;
  int st = adr_device_get(type, 0, &dev, &err);
  if (st == 0) st = adr_device_get(ARROW_DEVICE_CPU, 0, &cpu, &err);
  void* buf = NULL;
  unsigned char host[256];
  if (st == 0) st = adr_alloc(dev, sizeof(host), 0, NULL, &buf, &err);
  if (st == 0) st = adr_memset(dev, buf, 0x5a, sizeof(host), NULL, &err);
  if (st == 0) st = adr_copy(cpu, host, dev, buf, sizeof(host), NULL, &err);
  if (st == 0 && host[0] != 0x5a) {
    snprintf(err.message, sizeof(err.message), "memset/copy read back 0x%02x", host[0]);
    st = EIO;
  }
  if (buf != NULL) adr_free(dev, buf, sizeof(host), NULL, NULL);
  if (st != 0) printf("%s:0: %s (%s)\n", label, err.message, adr_status_name(st));
  return st;
}

#endif
