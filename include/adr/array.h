/* SPDX-License-Identifier: Apache-2.0
 *
 * adr arrays: Arrow device arrays built, exported, imported, validated,
 * deep-copied and streamed through the adr runtime (docs/arrays.md).
 *
 * Everything here is written against the public adr API (adr_alloc,
 * adr_copy, streams, events), so it works on every backend.
 *
 * Conventions (as in adr.h): functions return 0 or a positive errno value
 * and take an optional `struct adr_error *` last, which receives
 * "[function] path: description" on failure. `path` names the child that is
 * wrong: "array" for the root, "children[2].children[0]", "dictionary" ...
 *
 * Ownership words follow the Arrow C Data Interface: "moved" means the
 * function takes the struct over bitwise and marks the caller's copy
 * released (release = NULL), on success only; on failure the caller still
 * owns it. A released struct is never touched again.
 *
 * A NULL device (adr_array_init, adr_device_array_init,
 * adr_device_array_deep_copy, adr_transfer_stream_init) means pageable host
 * memory: CPU arrays made by the core without loading the cpu backend
 * (docs/arrays.md, "Host memory"). CPU source arrays are read as host
 * memory.
 *
 * Thread safety: the functions may be called from any thread. A given
 * ArrowArray / ArrowSchema / stream object is not synchronised: one thread
 * at a time uses it, as the Arrow specification says.
 */
#ifndef ADR_ARRAY_H
#define ADR_ARRAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "adr/adr.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Format strings                                                           */
/* ------------------------------------------------------------------------ */

/* Every logical type of the Arrow columnar format. */
enum adr_type {
  ADR_TYPE_NA = 0,
  ADR_TYPE_BOOL,
  ADR_TYPE_INT8,
  ADR_TYPE_UINT8,
  ADR_TYPE_INT16,
  ADR_TYPE_UINT16,
  ADR_TYPE_INT32,
  ADR_TYPE_UINT32,
  ADR_TYPE_INT64,
  ADR_TYPE_UINT64,
  ADR_TYPE_HALF_FLOAT,
  ADR_TYPE_FLOAT,
  ADR_TYPE_DOUBLE,
  ADR_TYPE_DECIMAL32,
  ADR_TYPE_DECIMAL64,
  ADR_TYPE_DECIMAL128,
  ADR_TYPE_DECIMAL256,
  ADR_TYPE_FIXED_SIZE_BINARY,
  ADR_TYPE_BINARY,
  ADR_TYPE_STRING,
  ADR_TYPE_LARGE_BINARY,
  ADR_TYPE_LARGE_STRING,
  ADR_TYPE_BINARY_VIEW,
  ADR_TYPE_STRING_VIEW,
  ADR_TYPE_DATE32,
  ADR_TYPE_DATE64,
  ADR_TYPE_TIME32,
  ADR_TYPE_TIME64,
  ADR_TYPE_TIMESTAMP,
  ADR_TYPE_DURATION,
  ADR_TYPE_INTERVAL_MONTHS,
  ADR_TYPE_INTERVAL_DAY_TIME,
  ADR_TYPE_INTERVAL_MONTH_DAY_NANO,
  ADR_TYPE_LIST,
  ADR_TYPE_LARGE_LIST,
  ADR_TYPE_LIST_VIEW,
  ADR_TYPE_LARGE_LIST_VIEW,
  ADR_TYPE_FIXED_SIZE_LIST,
  ADR_TYPE_STRUCT,
  ADR_TYPE_MAP,
  ADR_TYPE_SPARSE_UNION,
  ADR_TYPE_DENSE_UNION,
  ADR_TYPE_RUN_END_ENCODED,
  ADR_TYPE_COUNT_
};

/* The physical layout a type uses, which decides its buffers. */
enum adr_layout {
  ADR_LAYOUT_NULL = 0,     /* no buffers */
  ADR_LAYOUT_FIXED,        /* validity, data (bit_width bits per value) */
  ADR_LAYOUT_VAR_BINARY,   /* validity, offsets (offset_bytes), data */
  ADR_LAYOUT_BINARY_VIEW,  /* validity, views (16 B), variadic data..., sizes (int64) */
  ADR_LAYOUT_LIST,         /* validity, offsets; one child (list, large list, map) */
  ADR_LAYOUT_LIST_VIEW,    /* validity, offsets, sizes; one child */
  ADR_LAYOUT_FIXED_LIST,   /* validity; one child of length * fixed_size */
  ADR_LAYOUT_STRUCT,       /* validity; any number of children */
  ADR_LAYOUT_SPARSE_UNION, /* type ids (int8); one child per type id */
  ADR_LAYOUT_DENSE_UNION,  /* type ids (int8), offsets (int32); one child per type id */
  ADR_LAYOUT_RUN_END       /* no buffers; children run_ends, values */
};

enum adr_time_unit {
  ADR_TIME_UNIT_SECOND = 0,
  ADR_TIME_UNIT_MILLI = 1,
  ADR_TIME_UNIT_MICRO = 2,
  ADR_TIME_UNIT_NANO = 3
};

#define ADR_MAX_UNION_TYPE_IDS 128

/* A parsed format string. Plain data; no release. */
struct adr_format {
  enum adr_type type;
  enum adr_layout layout;
  /* Bits per value of the data buffer of ADR_LAYOUT_FIXED (1 for bool,
   * 8 * byte width otherwise, incl. decimals and fixed-size binary). */
  int32_t bit_width;
  /* 4 or 8 for the offsets/sizes of var-binary, list and list-view layouts
   * (dense unions: 4); 0 otherwise. */
  int32_t offset_bytes;
  /* Byte width of fixed-size binary ("w:N"), list size of "+w:N"; else 0. */
  int32_t fixed_size;
  /* Decimals: precision, scale and width in bits (32/64/128/256). */
  int32_t precision;
  int32_t scale;
  /* Time, timestamp and duration unit. */
  enum adr_time_unit unit;
  /* Timestamp time zone: points into the parsed string (valid as long as
   * it is), not NUL-terminated at timezone_length; NULL and 0 when absent. */
  const char* timezone;
  size_t timezone_length;
  /* Number of buffers of an array of this type, not counting the variadic
   * data buffers of the view layouts (for them: 3 = validity, views, sizes). */
  int32_t n_buffers;
  /* Children the type requires: -1 for any number (struct); for unions the
   * number of type ids. */
  int32_t n_children;
  /* Union type ids in child order ("+ud:0,5,7"). */
  int32_t n_type_ids;
  int8_t type_ids[ADR_MAX_UNION_TYPE_IDS];
};

/* Parses an Arrow format string ("i", "tsu:UTC", "+w:4", "d:38,10,256",
 * "+ud:0,1" ...). EINVAL with a message naming the offending position for
 * anything malformed; `format` may be NULL (EINVAL). out is written only on
 * success. Pure function: thread-safe. */
ADR_API int adr_format_parse(const char* format, struct adr_format* out, struct adr_error* error);

/* "int64", "large_list_view" ...; NULL for an unknown value. Static. */
ADR_API const char* adr_type_name(enum adr_type type);

/* A buffer whose size depends on the data (var-binary data, the variadic
 * buffers of views): the size needs a read of the last offset / sizes. */
#define ADR_BUFFER_SIZE_DATA_DEPENDENT (-1)

/* Byte sizes of the n_buffers buffers of an array of `format` holding
 * elements [0, offset + length) of its buffers, i.e. what a producer must
 * have allocated: validity bitmaps ceil((offset+length)/8), offsets
 * (offset+length+1) entries, views 16 B per value ... and
 * ADR_BUFFER_SIZE_DATA_DEPENDENT for data-dependent ones. n_buffers must be
 * the layout's count (views: 3 + number of variadic buffers), else EINVAL.
 * EOVERFLOW when a size does not fit in int64. */
ADR_API int adr_format_buffer_sizes(const struct adr_format* format, int64_t offset, int64_t length,
                                    int64_t n_buffers, int64_t* out_sizes, struct adr_error* error);

/* ------------------------------------------------------------------------ */
/* Schemas                                                                  */
/* ------------------------------------------------------------------------ */

/* Initialises *out as an adr-owned schema node: copies of format and name
 * (name may be NULL), flags, and n_children children allocated released
 * (release == NULL) for the caller to initialise with adr_schema_init. The
 * format is checked with adr_format_parse. The caller owns *out and frees
 * it with out->release(out), which releases the children and dictionary. */
ADR_API int adr_schema_init(struct ArrowSchema* out, const char* format, const char* name,
                            int64_t flags, int64_t n_children, struct adr_error* error);

/* Allocates schema->dictionary (released) for the caller to initialise with
 * adr_schema_init; `schema` must come from adr_schema_init and have none. */
ADR_API int adr_schema_alloc_dictionary(struct ArrowSchema* schema, struct adr_error* error);

/* Replaces the metadata of an adr-owned schema with a copy of `metadata`
 * (Arrow's binary key/value encoding; NULL removes it). */
ADR_API int adr_schema_set_metadata(struct ArrowSchema* schema, const char* metadata,
                                    struct adr_error* error);

/* Deep copy of any schema (from any producer) into an adr-owned *out. */
ADR_API int adr_schema_copy(const struct ArrowSchema* src, struct ArrowSchema* out,
                            struct adr_error* error);

/* ------------------------------------------------------------------------ */
/* Building and exporting arrays                                            */
/* ------------------------------------------------------------------------ */

/* Initialises *out as an adr-owned array node on `device` (NULL: host
 * memory; its buffers are allocated 64-byte aligned without a stream, and
 * adopted ones come from malloc/aligned_alloc; the release frees both with
 * free()): length, offset
 * and null_count 0, n_buffers NULL buffers and n_children children
 * allocated released for the caller to initialise (adr_array_init with the
 * same device, or a move of any ArrowArray). Buffers set with
 * adr_array_alloc_buffer / adr_array_adopt_buffer are owned by the node and
 * freed with adr_free when out->release(out) runs (after any export event
 * has completed). The caller sets length, offset and null_count. */
ADR_API int adr_array_init(struct adr_device* device, int64_t n_buffers, int64_t n_children,
                           struct ArrowArray* out, struct adr_error* error);

/* Allocates `size` bytes on the node's device (adr_alloc, stream-ordered on
 * `stream` when not NULL) as buffer i, owned by the node; *out receives
 * the address. EINVAL if buffer i is already set. */
ADR_API int adr_array_alloc_buffer(struct ArrowArray* array, int64_t i, size_t size,
                                   struct adr_stream* stream, void** out, struct adr_error* error);

/* Makes memory from adr_alloc(node's device, size) buffer i of the node,
 * which then owns it; on failure the caller keeps it. */
ADR_API int adr_array_adopt_buffer(struct ArrowArray* array, int64_t i, void* ptr, size_t size,
                                   struct adr_error* error);

/* Sets buffer i to memory the node does not own (the caller keeps it alive
 * until the array is released). */
ADR_API int adr_array_set_buffer(struct ArrowArray* array, int64_t i, const void* ptr,
                                 struct adr_error* error);

/* Allocates array->dictionary (released) for the caller to initialise;
 * `array` must come from adr_array_init and have none. */
ADR_API int adr_array_alloc_dictionary(struct ArrowArray* array, struct adr_error* error);

/* Exports `array` (moved; buffers on `device`, any producer) as a device
 * array: the work queued on `stream` so far is captured in an event whose
 * native pointer becomes out->sync_event (owned by *out: its release
 * destroys the event after the array's own release). A NULL stream, a
 * backend without native events, or the CPU: the stream is synchronised
 * and sync_event is NULL. device_id is -1 for the CPU; reserved is zeroed.
 * A NULL device is host memory: a CPU array; `stream` (of any device, or
 * NULL) is synchronised first. */
ADR_API int adr_device_array_init(struct adr_device* device, struct ArrowArray* array,
                                  struct adr_stream* stream, struct ArrowDeviceArray* out,
                                  struct adr_error* error);

/* Moves *src to *dst (bitwise) and marks src released. dst must be
 * released or uninitialised. */
ADR_API void adr_device_array_move(struct ArrowDeviceArray* src, struct ArrowDeviceArray* dst);

/* Calls array->array.release if it is not NULL. */
ADR_API void adr_device_array_release(struct ArrowDeviceArray* array);

/* ------------------------------------------------------------------------ */
/* Importing / consuming                                                    */
/* ------------------------------------------------------------------------ */

/* The adr device an array lives on (device_type, device_id; -1 = 0). */
ADR_API int adr_device_array_device(const struct ArrowDeviceArray* array, struct adr_device** out,
                                    struct adr_error* error);

/* Makes work see the producer's writes to the array's buffers: with a
 * stream (of the array's device), the stream waits on sync_event
 * device-side and the host does not block; with NULL the host waits. No-op
 * without a sync_event. The sync_event stays owned by the array. */
ADR_API int adr_device_array_wait(const struct ArrowDeviceArray* array, struct adr_stream* stream,
                                  struct adr_error* error);

/* ------------------------------------------------------------------------ */
/* Validation                                                               */
/* ------------------------------------------------------------------------ */

enum adr_validate_level {
  /* Buffer and child counts, lengths, offsets, null rules, dictionary,
   * device type: reads no buffer. */
  ADR_VALIDATE_STRUCTURE = 0,
  /* Also the data: offsets monotonic and in range, UTF-8, union type ids and
   * offsets, run ends, views, dictionary indices, null counts. Arrays not on
   * the CPU are copied to the host through the runtime for this. */
  ADR_VALIDATE_FULL = 1
};

/* Validates `array` against `schema`. EINVAL with the path to the bad child
 * ("children[2].children[0]: offsets not monotonic at 17"). */
ADR_API int adr_device_array_validate(const struct ArrowSchema* schema,
                                      const struct ArrowDeviceArray* array,
                                      enum adr_validate_level level, struct adr_error* error);

/* ------------------------------------------------------------------------ */
/* Deep copy                                                                */
/* ------------------------------------------------------------------------ */

/* What a deep copy did. The caller sets struct_size. */
struct adr_copy_stats {
  uint32_t struct_size;
  uint32_t reserved32;
  /* Host waits performed in total (size discovery + completion + source
   * event waits). */
  int64_t host_syncs;
  /* Host waits for learning the ranges of a slice and the sizes of
   * variable-length buffers (docs/arrays.md): 0 when the tree reads none
   * or the source is host-readable, otherwise one per round of reads: 1
   * when no var-length node (var-binary, list, map, list view, view, dense
   * union, run-end) sits inside another, one more per level of such
   * nesting, as each level's ranges come from the level above. */
  int64_t size_syncs;
  /* Buffer copies issued, and payload bytes placed in the output's buffers
   * (copied, uploaded, or read straight into them). */
  int64_t copies;
  int64_t bytes;
  /* Device-to-host reads issued for ranges and sizes (batched per round). */
  int64_t size_reads;
  /* Bytes of the output's buffers allocated, and bytes read from the
   * source to the host to learn the ranges (offsets, views, type ids, run
   * ends; those of a CPU destination land in the output and count in
   * `bytes` too). Taken from the former reserved space: the struct keeps
   * its size, and a caller's struct_size of sizeof(struct) covers them. */
  int64_t bytes_allocated;
  int64_t read_bytes;
  int64_t reserved[2];
};

/* Copies `src` (not consumed; described by `schema`) to `dst_device`,
 * every type, nested arbitrarily, into an adr-owned *out.
 *
 * Waits for src's sync_event before reading anything. A slice
 * [offset, offset + length) is copied as a standalone array holding only
 * what it uses, for every layout (docs/arrays.md, "What a copy of a slice
 * holds"): child ranges come from the parent's offsets, list-view views,
 * dense union offsets and run ends, var-binary data and view buffers are
 * narrowed to the bytes used, offsets are rebased to 0 (on the host: no
 * device kernel), and each node's offset is below 8 (start % 8, so bitmaps
 * keep their bit offset; 0 for empty nodes, unions, run-end). An empty
 * slice is offset 0 everywhere with one 0 offset per var-length node and
 * no other buffer. The offsets and other index buffers those ranges come
 * from are read to the host in rounds, one batched host wait per round:
 * one for var-length nodes under structs, one more per level of nesting
 * of such nodes in each other. Dictionaries are copied whole.
 *
 * `stream` (a stream of dst_device or of the source's device, or NULL)
 * orders the copies. With a stream and a non-CPU destination the call
 * returns once the copies are queued and out->sync_event carries an event
 * recorded after them; src's buffers must then stay valid until that
 * event completes. With NULL or a CPU destination the data is complete on
 * return and sync_event is NULL. out_stats may be NULL.
 *
 * dst_device NULL: a CPU array in host memory (no cpu backend loaded),
 * complete on return; `stream` must then be the source's device's (a CPU
 * source: NULL, or a CPU device stream). A CPU source is read as host
 * memory. */
ADR_API int adr_device_array_deep_copy(const struct ArrowSchema* schema,
                                       const struct ArrowDeviceArray* src,
                                       struct adr_device* dst_device, struct adr_stream* stream,
                                       struct ArrowDeviceArray* out,
                                       struct adr_copy_stats* out_stats, struct adr_error* error);

/* Logical equality of two arrays of one schema on any devices (non-CPU
 * ones are copied to the host first): same length and, element by
 * element, same nulls and values (dictionaries compared decoded,
 * run-end-encoded arrays by logical value, views by content). Offsets,
 * slicing and buffer layout may differ. *out_equal receives the answer;
 * when false and out_difference is not NULL it receives where they differ
 * ("children[1][5]: \"ab\" != \"ac\""). Both arrays are validated fully
 * first (ADR_VALIDATE_FULL): an invalid one is EINVAL with the validator's
 * message, never compared. */
ADR_API int adr_device_array_equal(const struct ArrowSchema* schema,
                                   const struct ArrowDeviceArray* a,
                                   const struct ArrowDeviceArray* b, bool* out_equal,
                                   struct adr_error* out_difference, struct adr_error* error);

/* ------------------------------------------------------------------------ */
/* Device array streams (synchronous)                                       */
/* ------------------------------------------------------------------------ */

/* Produces the next array into *out; leaves out->array.release NULL at the
 * end of the stream. Returns 0 or an errno value with a message. */
typedef int (*adr_array_source_fn)(void* ctx, struct ArrowDeviceArray* out,
                                   struct adr_error* error);

/* A stream over `count` arrays (each moved in, in order) of `schema`
 * (moved) on devices of `device_type`. On failure nothing is moved. */
ADR_API int adr_device_array_stream_from_arrays(struct ArrowSchema* schema,
                                                struct ArrowDeviceArray* arrays, size_t count,
                                                ArrowDeviceType device_type,
                                                struct ArrowDeviceArrayStream* out,
                                                struct adr_error* error);

/* A stream whose get_next calls `next(ctx, ...)`; ctx_release(ctx) (may be
 * NULL) runs when the stream is released. `schema` is moved. */
ADR_API int adr_device_array_stream_from_callback(struct ArrowSchema* schema,
                                                  ArrowDeviceType device_type,
                                                  adr_array_source_fn next,
                                                  void (*ctx_release)(void* ctx), void* ctx,
                                                  struct ArrowDeviceArrayStream* out,
                                                  struct adr_error* error);

/* Consumer side of any producer's stream: calls get_schema, turning a
 * failure into a status and the producer's get_last_error text. */
ADR_API int adr_device_array_stream_get_schema(struct ArrowDeviceArrayStream* stream,
                                               struct ArrowSchema* out, struct adr_error* error);

/* Calls get_next; at the end *out is released (release NULL) and 0 is
 * returned. Checks that the array is on the stream's device_type. */
ADR_API int adr_device_array_stream_next(struct ArrowDeviceArrayStream* stream,
                                         struct ArrowDeviceArray* out, struct adr_error* error);

/* A stream that deep-copies every batch of `source` (moved) to `target`.
 * With prefetch 0 each get_next copies its batch; with prefetch k > 0 a
 * worker thread keeps up to k batches copied ahead, so batch i+1 copies
 * while the consumer holds batch i. Each batch carries an event recorded
 * on the transfer's own stream of `target` (or is complete, for the CPU).
 * The source's errors surface from get_next with its message. A NULL
 * target is host memory: CPU batches, complete, without a stream. */
ADR_API int adr_transfer_stream_init(struct ArrowDeviceArrayStream* source,
                                     struct adr_device* target, int prefetch,
                                     struct ArrowDeviceArrayStream* out, struct adr_error* error);

/* ------------------------------------------------------------------------ */
/* Async device streams                                                     */
/* ------------------------------------------------------------------------ */

/* A running producer started by adr_async_producer_start. */
struct adr_async_producer;

/* Feeds `handler` (any consumer's) from `source` (moved) on a thread of its
 * own, by the specification's rules: handler->producer is set before
 * on_schema, which is called first and once; on_next_task is called only
 * for batches requested with request(n) (n <= 0 is an error reported with
 * on_error); a NULL task ends the stream; a source error is on_error then
 * release; a non-zero return from on_schema / on_next_task is release
 * without on_error; cancel is idempotent and thread-safe and ends with
 * release. Each task's extract_data moves the batch out (NULL discards it)
 * and works once. adr_async_producer_join waits for the thread (which
 * ends right after calling the handler's release: at the end of the
 * stream, on an error, or after cancel) and frees the producer, including
 * batches of tasks never extracted; extract_data after the join is
 * invalid. ArrowAsyncProducer.release is a no-op (adr owns the object). */
ADR_API int adr_async_producer_start(struct ArrowDeviceArrayStream* source,
                                     struct ArrowAsyncDeviceStreamHandler* handler,
                                     struct adr_async_producer** out, struct adr_error* error);
ADR_API void adr_async_producer_join(struct adr_async_producer* producer);

/* A handler for any async producer and the pull stream it feeds: hand
 * *out_handler to the producer, read batches from *out_stream (whose
 * device_type is `device_type`; a producer of another type is refused in
 * on_schema). `queue_depth` (>= 1) batches are requested ahead, one more
 * per batch taken. get_next blocks until a batch, the end or an error
 * (returned with the producer's message) comes. Releasing the stream early
 * cancels the producer and discards what it still delivers; the shared
 * state is freed once both the handler and the stream are released (a
 * handler never given to a producer must be released by the caller). */
ADR_API int adr_async_consumer_init(ArrowDeviceType device_type, int64_t queue_depth,
                                    struct ArrowAsyncDeviceStreamHandler* out_handler,
                                    struct ArrowDeviceArrayStream* out_stream,
                                    struct adr_error* error);

#ifdef __cplusplus
}
#endif

#endif /* ADR_ARRAY_H */
