/* Test support (tests/support/resident.c): vendor drivers pinned in memory
 * for the life of a test process. Not part of adr's API. */
#ifndef ADR_TEST_RESIDENT_H
#define ADR_TEST_RESIDENT_H

#include <stddef.h>

/* How many vendor libraries the constructor opened with RTLD_NODELETE. */
size_t adr_test_resident_count(void);

/* The name or path of pinned library `index` as its manifest gave it, or
 * NULL past the end. */
const char* adr_test_resident_name(size_t index);

#endif
