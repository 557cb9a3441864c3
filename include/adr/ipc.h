/* SPDX-License-Identifier: Apache-2.0
 *
 * adr IPC: the Arrow IPC streaming format (docs/ipc.md).
 *
 * Two levels:
 *
 *  - Messages, for transports that move bytes themselves (a socket, UCX,
 *    shared memory): encode a Schema / DictionaryBatch / RecordBatch
 *    message's metadata into an owned host buffer, with the list of the
 *    body's buffers (device, address, size, place in the body) left where
 *    they are, so the transport sends them from device or registered
 *    memory; on the other side decode the metadata, learn the body's
 *    layout, receive the body into one allocation on any adr device and
 *    assemble an ArrowDeviceArray whose buffers point into it.
 *
 *  - Streams over a file descriptor: adr_ipc_write_stream and
 *    adr_ipc_read_stream (below).
 *
 * The wire format: every message is encapsulated as
 *
 *     uint32 0xFFFFFFFF (continuation) | int32 metadata size M |
 *     M bytes: a FlatBuffer `Message` + zero padding to a multiple of 8 |
 *     body (bodyLength bytes, each buffer at a multiple of 8)
 *
 * and a stream is Schema, then DictionaryBatch / RecordBatch messages, then
 * the end-of-stream marker (0xFFFFFFFF 0x00000000). Little-endian,
 * metadata version V5, no body compression. The pre-0.15 form without the
 * continuation word is refused.
 *
 * Conventions (as in adr.h): functions return 0 or a positive errno value
 * and take an optional `struct adr_error *` last, which receives
 * "[function] message N (KIND), field PATH: description" on failure.
 * Message indices count from 0 at the Schema message; PATH names a field
 * by its names from the schema root ("a.item.b", "<dictionary 2>").
 * Decoding never reads outside the bytes it is given: malformed input is
 * EINVAL (EPROTO for a wrong continuation or metadata version, ENOTSUP for
 * a valid feature adr does not implement: compression, big-endian, a
 * delta of dictionary values that hold dictionaries, Tensor messages).
 *
 * Thread safety: every function may be called from any thread; a given
 * message, decoded message or reader is used by one thread at a time.
 */
#ifndef ADR_IPC_H
#define ADR_IPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "adr/adr.h"
#include "adr/array.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The first word of every encapsulated message. */
#define ADR_IPC_CONTINUATION 0xFFFFFFFFu
/* Bytes before the metadata: continuation + metadata size. */
#define ADR_IPC_PREFIX_SIZE 8
/* Largest metadata accepted by the decoders (a Message FlatBuffer). */
#define ADR_IPC_MAX_METADATA_SIZE (64 * 1024 * 1024)
/* Deepest field nesting accepted (encoder and decoder). */
#define ADR_IPC_MAX_DEPTH 64

enum adr_ipc_message_type {
  ADR_IPC_MESSAGE_END = 0, /* end-of-stream marker */
  ADR_IPC_MESSAGE_SCHEMA = 1,
  ADR_IPC_MESSAGE_DICTIONARY_BATCH = 2,
  ADR_IPC_MESSAGE_RECORD_BATCH = 3
};

/* "schema", "dictionary batch", "record batch", "end of stream". Static. */
ADR_API const char* adr_ipc_message_type_name(enum adr_ipc_message_type type);

/* The 8 bytes of the end-of-stream marker (0xFFFFFFFF then int32 0). */
ADR_API void adr_ipc_end_of_stream(uint8_t out[ADR_IPC_PREFIX_SIZE]);

/* ------------------------------------------------------------------------ */
/* Encoding                                                                 */
/* ------------------------------------------------------------------------ */

/* One buffer of a message body, left in place: `size` bytes at `data` on
 * `device` go to [body_offset, body_offset + size) of the body. `device` is
 * NULL for host memory (CPU arrays, and the small host copies the encoder
 * makes when it must rewrite a buffer: realigned bitmaps, rebased offsets
 * and run ends). body_offset is a multiple of 8; the bytes between one
 * buffer's end and the next body_offset (and up to body_size) are padding
 * the transport writes as zeros. data is NULL when size is 0. */
struct adr_ipc_body_buffer {
  struct adr_device* device;
  const void* data;
  int64_t size;
  int64_t body_offset;
};

/* An encoded message. Filled by the encoders; owned by the caller, who
 * frees it with adr_ipc_message_release. */
struct adr_ipc_message {
  /* sizeof(struct adr_ipc_message) of the library that filled it. */
  uint32_t struct_size;
  enum adr_ipc_message_type type;
  /* The encapsulated metadata: continuation, size, FlatBuffer, padding
   * (metadata_size is a multiple of 8 and includes the 8-byte prefix).
   * Send these bytes, then the body. */
  uint8_t* metadata;
  int64_t metadata_size;
  /* Body: body_size bytes (a multiple of 8) made of the n_buffers buffers.
   * 0 for a Schema message. */
  int64_t body_size;
  int64_t n_buffers;
  const struct adr_ipc_body_buffer* buffers;
  /* Rows of a record or dictionary batch; 0 otherwise. */
  int64_t length;
  /* Dictionary id of a dictionary batch; -1 otherwise. */
  int64_t dictionary_id;
  int64_t reserved[4];
  void* private_data;
};

/* Frees what an encoder made (metadata, buffer list, host copies) and
 * zeroes *message. Safe on a zeroed message; never fails. */
ADR_API void adr_ipc_message_release(struct adr_ipc_message* message);

/* Encodes the Schema message of `schema` (a struct: its children are the
 * columns; any producer's ArrowSchema, not consumed). Dictionary-encoded
 * fields get ids 0, 1, 2 ... in depth-first order (a field before its
 * children, a field's dictionary's value type after the field), the order
 * adr_ipc_encode_dictionary_batch uses. Field and schema metadata become
 * custom_metadata. EINVAL (with the field path) for a schema that is not
 * a struct, a format adr_format_parse refuses, or nesting deeper than
 * ADR_IPC_MAX_DEPTH. On failure *out is zeroed. */
ADR_API int adr_ipc_encode_schema(const struct ArrowSchema* schema, struct adr_ipc_message* out,
                                  struct adr_error* error);

/* Number of dictionary-encoded fields of `schema` (the ids are 0 .. n-1). */
ADR_API int adr_ipc_schema_dictionary_count(const struct ArrowSchema* schema, int64_t* out,
                                            struct adr_error* error);

/* Encodes the RecordBatch message of `array` (a struct array of `schema`,
 * on any device, not consumed). The bodies are not copied: out->buffers
 * point into array's buffers (or into small host copies owned by *out), so
 * `array` must stay alive and unmodified until the body has been sent and
 * *out released.
 *
 * The array may be sliced at any level (non-zero offsets): IPC has no
 * offset, so fixed-width buffers are referenced from the first element
 * used, bitmaps whose bit offset is not a multiple of 8 are realigned into
 * host copies, var-length offsets and run ends not starting at 0 are
 * rebased into host copies, and data buffers are narrowed to the bytes
 * used. Null counts of sliced nodes are counted.
 *
 * Device arrays: the function first waits (host-side) for array's
 * sync_event, then reads what it needs to know the layout from the device
 * with small synchronous copies: first and last offsets of var-length
 * nodes, validity bits of sliced nodes whose null count is unknown, run
 * ends of sliced run-end-encoded nodes, the variadic buffer sizes of view
 * arrays. A host-readable (CPU) array is read in place.
 *
 * Before the record batch, a stream carries one DictionaryBatch per
 * dictionary id (adr_ipc_encode_dictionary_batch), at least when the
 * dictionary changed; adr's stream writer sends one before the first batch
 * and again before a batch whose dictionary is not the same memory as the
 * previous batch's (a replacement, or with options.dictionary_deltas a
 * delta when the new dictionary starts with the old one's values). EINVAL
 * with the field path for an array that does not match the schema. On
 * failure *out is zeroed. */
ADR_API int adr_ipc_encode_record_batch(const struct ArrowSchema* schema,
                                        const struct ArrowDeviceArray* array,
                                        struct adr_ipc_message* out, struct adr_error* error);

/* A RecordBatch encoder for the batches of one stream. A stream's batches
 * usually have the same shape (the same numbers of field nodes, buffers
 * and variadic counts, and zero or not the same length and body): the
 * encoder keeps the last batch's metadata and, for a batch of the same
 * shape, copies it with the new lengths, null counts, buffer offsets and
 * sizes written in, instead of building the FlatBuffer again; it also
 * keeps the schema's parsed formats and its work arrays. The messages are
 * byte for byte those of adr_ipc_encode_record_batch.
 *
 * `schema` (a struct, as for adr_ipc_encode_record_batch) is not copied:
 * it must stay alive and unchanged until the encoder is destroyed. One
 * thread at a time; the messages it returns are the caller's, independent
 * of the encoder (release them with adr_ipc_message_release, before or
 * after adr_ipc_encoder_destroy). EINVAL for a NULL, released or
 * non-struct schema. */
struct adr_ipc_encoder;
ADR_API int adr_ipc_encoder_create(const struct ArrowSchema* schema, struct adr_ipc_encoder** out,
                                   struct adr_error* error);

/* Frees the encoder. NULL is a no-op. */
ADR_API void adr_ipc_encoder_destroy(struct adr_ipc_encoder* encoder);

/* adr_ipc_encode_record_batch of `array` with the encoder's schema: the
 * same checks, ownership and errors. */
ADR_API int adr_ipc_encoder_record_batch(struct adr_ipc_encoder* encoder,
                                         const struct ArrowDeviceArray* array,
                                         struct adr_ipc_message* out, struct adr_error* error);

/* Encodes the DictionaryBatch message (isDelta false) holding the whole
 * dictionary of dictionary id `id` (see adr_ipc_encode_schema) of `array`,
 * with the same rules as adr_ipc_encode_record_batch. A dictionary-encoded
 * field nested in a list holds one dictionary per batch (its child node's).
 * EINVAL when id is out of range. */
ADR_API int adr_ipc_encode_dictionary_batch(const struct ArrowSchema* schema,
                                            const struct ArrowDeviceArray* array, int64_t id,
                                            struct adr_ipc_message* out, struct adr_error* error);

/* Encodes a delta DictionaryBatch (isDelta true) of dictionary id `id` of
 * `array`: its values [from, length), which a reader appends to the
 * dictionary it holds for that id. The caller asserts that the reader's
 * dictionary is the values [0, from) of this one (adr_ipc_write_stream
 * with options.dictionary_deltas checks it). from == length gives an empty
 * delta. EINVAL when id is out of range or from is outside [0, length];
 * otherwise the rules of adr_ipc_encode_record_batch. */
ADR_API int adr_ipc_encode_dictionary_delta(const struct ArrowSchema* schema,
                                            const struct ArrowDeviceArray* array, int64_t id,
                                            int64_t from, struct adr_ipc_message* out,
                                            struct adr_error* error);

/* Whether dictionary `id` (see adr_ipc_encode_schema) of `array` is the
 * same memory as that of `previous`, two batches of `schema` on the same
 * device: same lengths, offsets and null counts and the same buffer
 * pointers at every level. Pointers only: no device is touched and
 * nothing is waited on. A writer that keeps the previous batch alive
 * until this call (so that an equal pointer cannot be memory freed and
 * reused) need not send an unchanged dictionary again; adr_ipc_write_stream
 * and adr_ucx_send_stream do so (the dictionary memo of Arrow C++'s
 * writers). EINVAL for a NULL or released argument or an id that is not
 * in both batches. */
ADR_API int adr_ipc_dictionary_unchanged(const struct ArrowSchema* schema,
                                         const struct ArrowDeviceArray* previous,
                                         const struct ArrowDeviceArray* array, int64_t id,
                                         bool* out, struct adr_error* error);

/* ------------------------------------------------------------------------ */
/* Decoding                                                                 */
/* ------------------------------------------------------------------------ */

/* Reads the 8-byte prefix of a message: *out_metadata_size receives the
 * size M of the metadata that follows (FlatBuffer + padding), 0 for the
 * end-of-stream marker. EPROTO when the first word is not 0xFFFFFFFF;
 * EINVAL for a negative size, one above ADR_IPC_MAX_METADATA_SIZE or not a
 * multiple of 8 (the reader accepts any size that is a multiple of 8).
 * `message_index` only goes into the error message. */
ADR_API int adr_ipc_decode_prefix(const uint8_t prefix[ADR_IPC_PREFIX_SIZE], int64_t message_index,
                                  int64_t* out_metadata_size, struct adr_error* error);

/* Place of one body buffer, as the metadata says. */
struct adr_ipc_buffer_layout {
  int64_t offset;
  int64_t length;
};

/* A decoded message's metadata. Filled by adr_ipc_decode_message; owned by
 * the caller; free with adr_ipc_decoded_release. */
struct adr_ipc_decoded {
  uint32_t struct_size;
  enum adr_ipc_message_type type;
  /* Index of the message in its stream (as passed to the decoder). */
  int64_t message_index;
  /* bodyLength from the metadata (checked: >= 0, multiple of 8 not
   * required, every buffer inside it). Receive exactly this many bytes. */
  int64_t body_size;
  /* Bytes to allocate for the body before receiving it:
   * body_size rounded up to 64 plus 64 bytes the assembler zeroes (empty
   * buffers point there). */
  int64_t body_alloc_size;
  /* Record / dictionary batch: rows, and the body buffers in order. */
  int64_t length;
  int64_t n_buffers;
  const struct adr_ipc_buffer_layout* buffers;
  /* Dictionary batch: id and delta flag. */
  int64_t dictionary_id;
  bool is_delta;
  int64_t reserved[4];
  void* private_data;
};

/* Decodes the metadata (the M bytes after the prefix, padding included) of
 * message `message_index`: checks the FlatBuffer completely (every offset,
 * vtable, vector and string in bounds), the metadata version (V4 or V5),
 * and for batches that every buffer lies inside the body (offset a
 * multiple of 8, offset + length <= bodyLength, no overflow). The input is
 * copied: it need not outlive the call. ENOTSUP for compressed bodies,
 * Tensor and SparseTensor messages; EINVAL for anything malformed. On
 * failure *out is zeroed. */
ADR_API int adr_ipc_decode_message(const void* metadata, size_t metadata_size,
                                   int64_t message_index, struct adr_ipc_decoded* out,
                                   struct adr_error* error);

/* Frees a decoded message and zeroes it. Safe on a zeroed struct. */
ADR_API void adr_ipc_decoded_release(struct adr_ipc_decoded* message);

/* The ArrowSchema of a decoded Schema message into an adr-owned *out
 * (a struct "+s" with one child per field; the caller releases it).
 * EINVAL with the field path for an unknown or malformed type. */
ADR_API int adr_ipc_decode_schema(const struct adr_ipc_decoded* message, struct ArrowSchema* out,
                                  struct adr_error* error);

/* Reader state of one stream: its schema and the dictionaries received so
 * far, and the device batches are assembled on. */
struct adr_ipc_reader;

/* Options of a reader. The caller sets struct_size
 * (sizeof(struct adr_ipc_reader_options)); NULL means the defaults. */
struct adr_ipc_reader_options {
  uint32_t struct_size;
  /* Validate every assembled batch with ADR_VALIDATE_FULL (offsets,
   * UTF-8, union ids, run ends, dictionary indices ...) before handing it
   * out. On by default (true). Bodies on a device are copied to the host
   * for this; a transport that trusts its peer may turn it off, leaving the
   * structural checks (buffer sizes against lengths), which are always
   * made. */
  bool validate_full;
  /* Host readers (device NULL): keep the body of a released batch for the
   * next message of a similar size (between half of it and all of it), so
   * a stream of similar batches receives into pages already mapped. Every
   * body given to this reader must then come from
   * adr_ipc_reader_alloc_body. Ignored for device readers (adr_alloc's
   * pools recycle). Default false. */
  bool recycle_bodies;
  uint8_t reserved8[6];
  int64_t reserved[4];
};

/* Creates a reader whose batches land on `device` (NULL: host memory,
 * bodies allocated by the caller with malloc-compatible aligned_alloc or
 * posix_memalign, freed with free()). `options` may be NULL. */
ADR_API int adr_ipc_reader_create(struct adr_device* device,
                                  const struct adr_ipc_reader_options* options,
                                  struct adr_ipc_reader** out, struct adr_error* error);

/* Allocates the body of `message` for adr_ipc_reader_consume:
 * message->body_alloc_size bytes, 64-byte aligned, on the reader's device
 * (adr_alloc), or host memory (posix_memalign; a recycled body with
 * options.recycle_bodies). *out is NULL when body_size is 0. The caller
 * owns it until it passes it to adr_ipc_reader_consume, or frees it with
 * adr_ipc_reader_free_body. ENOMEM, or the device's allocation error. */
ADR_API int adr_ipc_reader_alloc_body(struct adr_ipc_reader* reader,
                                      const struct adr_ipc_decoded* message, void** out,
                                      struct adr_error* error);

/* Frees a body from adr_ipc_reader_alloc_body that was not consumed. NULL
 * is a no-op. */
ADR_API void adr_ipc_reader_free_body(struct adr_ipc_reader* reader,
                                      const struct adr_ipc_decoded* message, void* body);

/* Frees the reader and its references to dictionaries (batches already
 * handed out keep theirs). NULL is a no-op. */
ADR_API void adr_ipc_reader_destroy(struct adr_ipc_reader* reader);

/* Installs the stream's schema from a decoded Schema message. Must be the
 * first message; EINVAL when a schema was already set. */
ADR_API int adr_ipc_reader_set_schema(struct adr_ipc_reader* reader,
                                      const struct adr_ipc_decoded* message,
                                      struct adr_error* error);

/* The schema set by adr_ipc_reader_set_schema (owned by the reader), or
 * NULL. */
ADR_API const struct ArrowSchema* adr_ipc_reader_schema(const struct adr_ipc_reader* reader);

/* The device the reader assembles on (NULL: host memory). */
ADR_API struct adr_device* adr_ipc_reader_device(const struct adr_ipc_reader* reader);

/* Consumes a decoded DictionaryBatch or RecordBatch message and its body.
 *
 * `body` holds the message's body_size bytes, received into memory of the
 * reader's device: adr_alloc(device, message->body_alloc_size, 64, ...)
 * (host: posix_memalign / aligned_alloc of body_alloc_size, 64-aligned).
 * It is moved in on success AND on failure (the reader frees it in both
 * cases); NULL is allowed when body_size is 0. The reader zeroes the 64
 * bytes after the rounded body (see body_alloc_size). The data must be
 * complete (no copy into it still queued).
 *
 * Checks before any access to the body: node and buffer counts against
 * the schema, each buffer's length against what its node's length needs
 * (validity ceil(n/8), data n * width, offsets n + 1 entries, type ids n,
 * views 16 n), variadic buffer counts, nesting depth, dictionary ids; then
 * (options.validate_full) the data. Errors name the message index and the
 * field path.
 *
 * A DictionaryBatch replaces the dictionary of its id; a delta
 * (isDelta) appends its values to it (the reader concatenates on the host
 * and uploads the result: a delta costs a copy of the whole dictionary;
 * batches assembled before keep the old one; EINVAL for a delta of an id
 * not sent yet). *out_batch, if not NULL, is left released. A RecordBatch
 * becomes *out_batch: an ArrowDeviceArray on the reader's device (CPU
 * arrays for the host), sync_event NULL, whose buffers point into the body
 * (one allocation, freed when the last node of the tree, and of every
 * batch sharing a dictionary body, is released). Nodes may be moved out of
 * the tree and released separately, on any thread. */
ADR_API int adr_ipc_reader_consume(struct adr_ipc_reader* reader,
                                   const struct adr_ipc_decoded* message, void* body,
                                   struct ArrowDeviceArray* out_batch, struct adr_error* error);

/* ------------------------------------------------------------------------ */
/* Streams over a file descriptor                                           */
/* ------------------------------------------------------------------------ */

/* Options of adr_ipc_write_stream. The caller sets struct_size; NULL means
 * the defaults. */
struct adr_ipc_write_options {
  uint32_t struct_size;
  /* Batches staged ahead while one is written (device sources): 0 stages
   * each batch when it is written; k >= 1 lets a worker thread copy up to
   * k batches to the host ahead. Default 1. */
  int32_t prefetch;
  /* When a batch's dictionary is not the previous batch's memory but
   * starts with the same values (compared by content), send only the new
   * values as a delta DictionaryBatch instead of the whole dictionary.
   * Default false (replacements, which every reader understands). */
  bool dictionary_deltas;
  int64_t reserved[4];
};

/* What adr_ipc_write_stream / adr_ipc_read_stream did; caller sets
 * struct_size; may be NULL. */
struct adr_ipc_stream_stats {
  uint32_t struct_size;
  uint32_t reserved32;
  int64_t messages;
  int64_t batches;
  int64_t rows;
  /* Bytes written / read on the descriptor, and body bytes among them. */
  int64_t bytes;
  int64_t body_bytes;
  int64_t reserved[4];
};

/* Writes `stream` (consumed: released on return, success or not) to `fd`
 * as an Arrow IPC stream: Schema, then for every batch its dictionaries (if
 * any: each sent again only when it changed, i.e. its buffers are not the
 * previous batch's, which is kept alive until the next batch has been
 * compared; as a delta with options.dictionary_deltas when the old values
 * are a prefix of the new) and the RecordBatch, then the end-of-stream marker. Batches on
 * devices are staged to the host by adr's transfer stream (deep copies of
 * what each batch uses, one batch in flight ahead of the one being
 * written: see options.prefetch). Short writes and EINTR are retried;
 * EPIPE and other write errors are returned with the message index.
 * `options` and `out_stats` may be NULL. The descriptor is not closed. */
ADR_API int adr_ipc_write_stream(int fd, struct ArrowDeviceArrayStream* stream,
                                 const struct adr_ipc_write_options* options,
                                 struct adr_ipc_stream_stats* out_stats, struct adr_error* error);

/* Reads an Arrow IPC stream from `fd` into *out, a stream whose batches
 * live on `device` (NULL: host memory, device_type ARROW_DEVICE_CPU). The
 * Schema message is read (and checked) before the call returns; each
 * get_next reads the next batch (and the dictionaries before it), checks
 * it fully on the host, then uploads the whole body to `device` with one
 * copy. Errors (truncation, malformed messages, a batch that does not
 * match the schema) come from get_next with get_last_error naming the
 * message index and field path. The stream owns nothing of fd (close it
 * after releasing the stream); it reads no further than the end-of-stream
 * marker (or EOF, which is accepted as the end at a message boundary).
 * A CPU `device` is treated as host memory. Host bodies are recycled: the
 * body of a batch the application released is reused for the next
 * message of a similar size. */
ADR_API int adr_ipc_read_stream(int fd, struct adr_device* device,
                                struct ArrowDeviceArrayStream* out, struct adr_error* error);

#ifdef __cplusplus
}
#endif

#endif /* ADR_IPC_H */
