/* SPDX-License-Identifier: Apache-2.0 */
#include "spill_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int spill_test_device(struct adr_device** out, bool* host_memory) {
  struct adr_error e;
  const char* require = getenv("ADR_SPILL_REQUIRE");
  if (adr_device_default(out, &e) != 0) {
    fprintf(stderr, "no device: %s\n", e.message);
    return require && require[0] == '1' ? 1 : 77;
  }
  ArrowDeviceType t = adr_device_type(*out);
  *host_memory =
      t == ARROW_DEVICE_CPU || t == ARROW_DEVICE_CUDA_HOST || t == ARROW_DEVICE_ROCM_HOST;
  return 0;
}

struct adr_spill_manager* spill_test_manager(struct adr_device* dev, uint32_t flags,
                                             uint64_t device_limit, uint32_t stats_level) {
  struct adr_spill_options o;
  adr_spill_options_init(&o);
  o.flags = flags;
  o.device_limit = device_limit;
  o.stats_level = stats_level;
  struct adr_spill_manager* m = NULL;
  struct adr_error e;
  if (adr_spill_manager_create(dev, &o, &m, &e) != 0) fail_msg("manager: %s", e.message);
  return m;
}

struct adr_spill_stats spill_test_stats(struct adr_spill_manager* m) {
  struct adr_spill_stats s;
  memset(&s, 0, sizeof(s));
  s.struct_size = sizeof(s);
  assert_int_equal(adr_spill_stats_get(m, &s, NULL), 0);
  return s;
}

void spill_test_fill(uint8_t* p, size_t n, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    p[i] = (uint8_t)x;
  }
}
