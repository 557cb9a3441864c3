/* SPDX-License-Identifier: Apache-2.0
 *
 * What the spill tests share: the device under test, a manager, its
 * statistics, reproducible buffer contents.
 */
#ifndef ADR_TESTS_SPILL_TEST_H
#define ADR_TESTS_SPILL_TEST_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "adr/adr.h"
#include "adr/spill.h"

/* The device under test (ADR_DEVICE) into *out, and whether it holds host
 * memory (cpu, cuda_host, hip_host: spilling is then a no-op). Returns 0,
 * or main's exit status when there is no device: 77 (skip), 1 with
 * ADR_SPILL_REQUIRE=1. */
int spill_test_device(struct adr_device** out, bool* host_memory);

/* A manager on dev with these options; fails the test on error. */
struct adr_spill_manager* spill_test_manager(struct adr_device* dev, uint32_t flags,
                                             uint64_t device_limit, uint32_t stats_level);

/* The manager's statistics (asserts success). */
struct adr_spill_stats spill_test_stats(struct adr_spill_manager* m);

/* n bytes of a xorshift sequence that depends on seed. */
void spill_test_fill(uint8_t* p, size_t n, uint32_t seed);

#endif
