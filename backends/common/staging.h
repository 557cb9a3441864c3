/* SPDX-License-Identifier: Apache-2.0
 *
 * Pinned staging of pageable copies, for drivers whose own pageable path
 * bounces one buffer at a time (CUDA, HIP). A copy between pageable host
 * memory and device memory of at least `threshold` bytes goes through two
 * pinned buffers of `chunk` bytes: the host memcpy of one chunk overlaps the
 * DMA of the other, an event per buffer guarding its reuse.
 *   host -> device returns once the source has been read (it may be reused
 *     at once); the transfers of the last chunks are still queued.
 *   device -> host returns complete (the memcpy out of the pinned buffer is
 *     the last step), as a copy to pageable memory does anyway.
 *
 * Compiled into each backend that needs it (like range_map.c); the backend
 * passes its driver through `struct adr_staging_ops`. Vendor error codes
 * pass through as ints (0 = success).
 *
 * The host memcpy into or out of a pinned buffer is split across a few
 * threads (`threads` of the configuration; the driver's own pageable path
 * copies on one, and one thread's memcpy is slower than the DMA): the
 * calling thread and `threads - 1` workers started on the first staged
 * copy, each taking a slice of at least 256 KiB.
 *
 * Threads: one `struct adr_staging` per device; its free list of buffer
 * pairs is behind its own mutex, never held across a driver call. Two
 * copies at once each take their own pair; the workers serve one copy at a
 * time, and a copy that finds them busy does its memcpy alone.
 */
#ifndef ADR_BACKENDS_COMMON_STAGING_H
#define ADR_BACKENDS_COMMON_STAGING_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct adr_error;

/* The driver calls staging needs. Each returns 0 or a vendor error code,
 * except the two release calls, which cannot report. Handles are the
 * driver's pointer-sized stream and event handles. */
struct adr_staging_ops {
  int (*host_alloc)(size_t size, void** out); /* pinned, portable */
  void (*host_free)(void* ptr);
  int (*event_create)(void** out);
  void (*event_destroy)(void* event); /* after waiting for it */
  int (*event_record)(void* event, void* stream);
  int (*event_synchronize)(void* event);
  /* Queues a copy of len bytes; to_device: dst is device memory and src
   * host memory, else the other way round. */
  int (*copy_async)(uintptr_t dst, uintptr_t src, size_t len, bool to_device, void* stream);
  int (*stream_synchronize)(void* stream);
  int out_of_memory; /* the vendor's code for "out of memory" (host allocations) */
};

/* From ADR_<BACKEND>_STAGING: "off", or <threshold>[:<chunk>[:<threads>]]. */
struct adr_staging_config {
  size_t threshold; /* copies of at least this many bytes are staged; 0 = never */
  size_t chunk;     /* bytes per pinned buffer, at least 4 KiB */
  unsigned threads; /* memcpy threads per copy, 1..64; 0 = automatic */
};

#define ADR_STAGING_DEFAULT_THRESHOLD ((size_t)1 << 20)
#define ADR_STAGING_DEFAULT_CHUNK ((size_t)4 << 20)
#define ADR_STAGING_MAX_THREADS 64u

/* Parses `text` (NULL or "" = the defaults) into *out: "off", or a
 * threshold size, optionally followed by ':' and the chunk size (at least
 * 4 KiB), optionally followed by ':' and the number of memcpy threads
 * (1..64; absent = automatic: a quarter of the online CPUs, 1 to 4);
 * sizes in the ADR_ALLOC grammar of bytesize.h ("1M", "64KiB",
 * "1.5MB", "4096"). EINVAL with adr_syntax_error's message
 * ("VAR=\"text\": column N: expected ..., found ...") in `error` (may be
 * NULL) and *out untouched. */
int adr_staging_config_parse(const char* var, const char* text, struct adr_staging_config* out,
                             struct adr_error* error);

/* The number of memcpy threads `config` asks for, "automatic" resolved. */
unsigned adr_staging_threads(const struct adr_staging_config* config);

struct adr_stage;      /* two pinned buffers and their events */
struct adr_copy_crew;  /* the memcpy workers */

struct adr_staging {
  const struct adr_staging_ops* ops;
  const struct adr_staging_config* config; /* read-only after init */
  pthread_mutex_t lock;                    /* guards free_list and crew */
  struct adr_stage* free_list;
  struct adr_copy_crew* crew;              /* NULL until the first staged copy */
};

void adr_staging_init(struct adr_staging* staging, const struct adr_staging_ops* ops,
                      const struct adr_staging_config* config);
/* Frees every buffer pair (each after its last transfer), stops and joins
 * the workers, and destroys the mutex. */
void adr_staging_fini(struct adr_staging* staging);

/* Whether a copy of `size` bytes between pageable host memory and device
 * memory should be staged. */
static inline bool adr_staging_wanted(const struct adr_staging* staging, size_t size) {
  return staging->config->threshold != 0 && size >= staging->config->threshold;
}

/* Pageable host -> device on `stream` (see the top of this file). 0 or the
 * first vendor error; after an error the stream has been synchronised, so
 * nothing of this copy is in flight. */
int adr_staging_copy_to_device(struct adr_staging* staging, uintptr_t dst, const void* src,
                               size_t size, void* stream);
/* Device -> pageable host, complete when it returns; errors as above. */
int adr_staging_copy_to_host(struct adr_staging* staging, void* dst, uintptr_t src, size_t size,
                             void* stream);

#endif /* ADR_BACKENDS_COMMON_STAGING_H */
