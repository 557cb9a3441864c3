/* SPDX-License-Identifier: Apache-2.0
 *
 * Helpers of the IPC tests: a byte buffer, and the message-level API used
 * as a transport would (serialise a batch into bytes, read them back onto
 * a device).
 */
#ifndef ADR_TESTS_IPC_TEST_H
#define ADR_TESTS_IPC_TEST_H

#include "adr/ipc.h"
#include "array_test.h" /* tests/array */

struct bytes {
  uint8_t* data;
  size_t len, cap;
};

void bytes_append(struct bytes* b, const void* p, size_t n);
void bytes_free(struct bytes* b);

/* Appends an encoded message (metadata + body gathered from its buffers,
 * which may live on devices) to b. */
void ipc_test_append_message(struct bytes* b, const struct adr_ipc_message* m);

/* Appends Schema + dictionaries + batch + end-of-stream. */
void ipc_test_write_all(struct bytes* b, const struct ArrowSchema* schema,
                        const struct ArrowDeviceArray* array);

/* Reads the stream in b onto `device` with the message API: *out_schema
 * and the first batch *out (released when the stream has none). Returns
 * the status of the first failure, with its message in err. */
int ipc_test_read_all(const struct bytes* b, struct adr_device* device,
                      struct ArrowSchema* out_schema, struct ArrowDeviceArray* out,
                      struct adr_error* err);

/* Builds test case c as the material of record batches: *schema is a
 * struct (a case whose root is not a struct becomes its only column,
 * *wrapped true), *owner the case's array (release it last). */
void ipc_test_build(const struct test_case* c, struct ArrowSchema* schema,
                    struct ArrowDeviceArray* owner, bool* wrapped);

/* A record batch viewing owner (which must outlive it): the root's own
 * validity dropped (a record batch has none), wrapped as built, the root
 * sliced by cut_front / cut_back rows. Its release frees the view only. */
void ipc_test_view(const struct ArrowDeviceArray* owner, bool wrapped, int64_t cut_front,
                   int64_t cut_back, struct ArrowDeviceArray* out);

/* Asserts that `got` (decoded) describes the same columns as `want`: types
 * (formats parsed, so "d:38,10" equals "d:38,10,128"), names, the
 * nullable / ordered / keys-sorted flags, metadata, dictionaries and
 * children. The root's own name and flags and a dictionary value node's
 * name, flags and metadata are not compared: IPC does not carry them. */
void ipc_test_assert_schema_equal(const struct ArrowSchema* want, const struct ArrowSchema* got);

/* The device under test (ADR_DEVICE; NULL for cpu). Exits 77 when it is
 * missing and ADR_IPC_REQUIRE is not set. */
struct adr_device* ipc_test_device(void);

#endif
