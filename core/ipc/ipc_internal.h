/* SPDX-License-Identifier: Apache-2.0
 *
 * Internal declarations shared by the files of core/ipc/. Nothing here is
 * ABI.
 */
#ifndef ADR_CORE_IPC_INTERNAL_H
#define ADR_CORE_IPC_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../array/array_internal.h"
#include "adr/ipc.h"
#include "flatbuf.h"

/* Message header union (Message.fbs). */
enum {
  IPC_HDR_SCHEMA = 1,
  IPC_HDR_DICTIONARY_BATCH = 2,
  IPC_HDR_RECORD_BATCH = 3,
  IPC_HDR_TENSOR = 4,
  IPC_HDR_SPARSE_TENSOR = 5
};

/* MetadataVersion V4 = 3, V5 = 4. */
#define IPC_VERSION_V4 3
#define IPC_VERSION_V5 4

/* Where an error happened: operation, message, field path. */
struct ipc_where {
  const char* op;
  int64_t message;                /* -1: not in a message */
  enum adr_ipc_message_type type; /* of that message */
  struct adr__path path;          /* field names from the root */
};

/* "[op] message N (type), field PATH: ..." */
int adr__ipc_fail(struct adr_error* error, int status, const struct ipc_where* w, const char* fmt,
                  ...) ADR_PRINTF(4, 5);

/* Pushes a field's name (or "[i]" when it has none) onto the path. */
size_t adr__ipc_path_push(struct adr__path* p, const char* name, int64_t index);

/* A field node of a batch. */
struct ipc_node {
  int64_t length;
  int64_t null_count;
};

/* What adr_ipc_decode_message keeps behind struct adr_ipc_decoded. */
struct ipc_decoded_priv {
  uint8_t* metadata; /* copy of the FlatBuffer */
  size_t metadata_size;
  int64_t n_nodes;
  struct ipc_node* nodes;
  struct adr_ipc_buffer_layout* buffers;
  int64_t n_variadic;
  int64_t* variadic;
  /* Schema messages: the root Schema table's position. */
  uint32_t schema_pos;
  /* MetadataVersion of the message (IPC_VERSION_V4 or _V5). */
  int version;
};

/* Decodes the Schema table of a decoded message into an adr-owned struct
 * schema; *out_dict_ids (malloc'd, may be NULL when none) receives the
 * IPC dictionary id of each dictionary-encoded field in depth-first order
 * (ids in adr_ipc_encode_schema's order), *out_n_dicts their count. */
int adr__ipc_schema_decode(const struct adr_ipc_decoded* message, const char* op,
                           struct ArrowSchema* out, int64_t** out_dict_ids, int64_t* out_n_dicts,
                           struct adr_error* error);

/* Writes the encapsulated message: prefix + flatbuffer + padding. */
int adr__ipc_encapsulate(const struct fbb* b, const char* op, uint8_t** out, int64_t* out_size,
                         struct adr_error* error);

/* The Message table: fbb_start must have been called; writes Message
 * with header type `hdr` and patches the root. *out_header_slot receives
 * the slot of the header table's offset, *out_body_slot (may be NULL) the
 * position of bodyLength (0 when body_length is 0: not written). */
size_t adr__ipc_message_begin(struct fbb* b, uint8_t hdr, int64_t body_length,
                              size_t* out_header_slot, size_t* out_body_slot);

/* Dictionary walk: the k-th dictionary-encoded schema node (depth-first,
 * adr_ipc_encode_schema's order). Returns NULL past the end; *count
 * receives the total when not NULL. */
const struct ArrowSchema* adr__ipc_dictionary_field(const struct ArrowSchema* schema, int64_t k,
                                                    int64_t* count);

/* The dictionary array of the k-th dictionary-encoded field of a batch
 * (adr__ipc_dictionary_field's order); NULL when there is none. */
const struct ArrowArray* adr__ipc_dictionary_array(const struct ArrowSchema* schema,
                                                   const struct ArrowArray* array, int64_t k);

/* The DictionaryBatch of dictionary `id` holding `values`, host memory
 * (the values of the dictionary-encoded field `field`); the reader uses it
 * to turn a delta into a replacement. */
int adr__ipc_encode_dictionary_values(const char* op, const struct ArrowSchema* field,
                                      const struct ArrowArray* values, int64_t id,
                                      struct adr_ipc_message* out, struct adr_error* error);

/* A one-slot cache of host bodies for adr_ipc_read_stream: the body of a
 * batch the application has released is kept for the next message of a
 * similar size (no fresh pages, no page faults). Bodies from
 * adr__ipc_recycler_get are 64-byte aligned and must go back through
 * adr__ipc_recycler_put (never free()). Reference-counted: the stream, the
 * reader and each live body hold one. Thread-safe. */
struct adr__ipc_recycler;
int adr__ipc_recycler_new(struct adr__ipc_recycler** out);
void adr__ipc_recycler_unref(struct adr__ipc_recycler* r);
/* At least `size` bytes; NULL when out of memory. */
void* adr__ipc_recycler_get(struct adr__ipc_recycler* r, size_t size);
void adr__ipc_recycler_put(struct adr__ipc_recycler* r, void* body);
/* A host reader (device NULL) takes its bodies from rec and gives them
 * back there (the reader takes a reference). */
void adr__ipc_reader_set_recycler(struct adr_ipc_reader* reader, struct adr__ipc_recycler* rec);

#endif /* ADR_CORE_IPC_INTERNAL_H */
