/* SPDX-License-Identifier: Apache-2.0
 *
 * The data both processes of the UCX tests agree on (a test fixture):
 * stream 0 "table", the sample table in batches of 1000, 0 and 5000 rows;
 * stream 1 "column", a struct of one int64 column of 300000 then 17 values
 * whose bytes are checked exactly; stream 2 "dict", a dictionary-encoded
 * utf8 column whose dictionary changes between its 2 batches; stream 3
 * "dict-shared", 3 batches that are views of one batch of stream 2 (the
 * same dictionary memory each time). Built on a device named like
 * ADR_DEVICE ("host" is host memory, the NULL device).
 */
#ifndef ADR_TESTS_UCX_DATA_H
#define ADR_TESTS_UCX_DATA_H

#include <stdbool.h>

#include "adr/adr.h"
#include "adr/ucx.h"

#define UCX_TEST_STREAMS 4

/* The device a name selects; "host" gives NULL. 0 or an error. */
int ucx_test_device(const char* name, struct adr_device** out, struct adr_error* error);

/* Stream `which` (0: table, 1: column, 2: dict, 3: dict-shared) on
 * `device`; `fail_at` >= 0 makes get_next fail with EIO ("source failed on
 * purpose") at that batch; `on_batch` (may be NULL) is called with each
 * batch index as it is produced. */
int ucx_test_stream(int which, struct adr_device* device, int fail_at, void (*on_batch)(int),
                    struct ArrowDeviceArrayStream* out, struct adr_error* error);

/* The most batches of the streams above alive at once (produced and not
 * yet released) since the last ucx_test_reset_live. */
int ucx_test_max_live(void);
void ucx_test_reset_live(void);

/* Number of batches of stream `which`. */
int ucx_test_batches(int which);

/* Checks batch `index` of stream `which` received on `device`; 0 when the
 * values are the expected ones, byte for byte; EINVAL with what differs. */
int ucx_test_check(int which, int index, struct adr_device* device,
                   const struct ArrowSchema* schema, const struct ArrowDeviceArray* batch,
                   struct adr_error* error);

/* Receives stream `which` on `device` from conn and checks every batch.
 * *out_batches counts the batches taken. */
int ucx_test_receive_all(struct adr_ucx_conn* conn, int which, struct adr_device* device,
                         int* out_batches, struct adr_error* error);

/* The options both sides use: small chunks (64 KiB) so the pipeline has
 * many chunks, short timeout (10 s). */
void ucx_test_options(struct adr_ucx_options* out);

#endif
