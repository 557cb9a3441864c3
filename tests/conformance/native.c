/* SPDX-License-Identifier: Apache-2.0
 *
 * Picks the native helper (conf_native.h) by the device's backend name.
 * A helper is compiled in when its backend's headers were found at build
 * time (CONF_HAVE_*); a backend without one is reported with the reason.
 */
#include <stdio.h>
#include <string.h>

#include "conf_native.h"

const struct conf_native* conf_native_get(struct adr_device* dev, char* why, size_t why_len) {
  struct adr_device_info info = {.struct_size = sizeof(info)};
  if (adr_device_info_get(dev, &info, NULL) != 0) {
    snprintf(why, why_len, "adr_device_info_get failed");
    return NULL;
  }
  static const struct conf_native* const helpers[] = {
#ifdef CONF_HAVE_OPENCL
      &conf_native_opencl,
#endif
#ifdef CONF_HAVE_VULKAN
      &conf_native_vulkan,
#endif
      &conf_native_cuda,
      &conf_native_hip,
  };
  for (size_t i = 0; i < sizeof(helpers) / sizeof(helpers[0]); i++)
    if (strcmp(helpers[i]->backend, info.backend) == 0) return helpers[i];
  if (strcmp(info.backend, "cpu") == 0)
    snprintf(why, why_len,
             "the CPU backend has no native queue or event an application could use "
             "(adr_stream_native and adr_event_native are NULL)");
  else
    snprintf(why, why_len, "no native helper for backend \"%s\" in this build", info.backend);
  return NULL;
}
