/* SPDX-License-Identifier: Apache-2.0
 *
 * What each fuzz target provides: the libFuzzer entry point and seed
 * inputs (NUL-terminated strings, NULL-terminated list) that the
 * standalone driver mutates when libFuzzer is not available.
 */
#ifndef ADR_TESTS_FUZZ_H
#define ADR_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern const char* const fuzz_seeds[];

#endif
