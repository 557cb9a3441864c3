/* SPDX-License-Identifier: Apache-2.0
 *
 * Internals of core/spill/: the environment's spill configuration
 * (config.c), parsed once, and its parser for unit tests; the one-buffer
 * spill that spill arrays (array.c) use.
 */
#ifndef ADR_CORE_SPILL_INTERNAL_H
#define ADR_CORE_SPILL_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <pthread.h>

#include "adr/spill.h"

/* The objects, shared by spill.c (managers, buffers), slice.c (copy-on-write)
 * and array.c; the lock story is in spill.c's header comment. */
#define LAST_USE_EVENTS 4
#define EXPOSURE_FRAMES 16

/* ST_COPYING: spilled, its host bytes being read by a copy to another
 * device (adr__spill_buffer_copy_out); moves wait for it like for a move. */
enum adr__spill_state { ST_DEVICE, ST_HOST, ST_SPILLING, ST_UNSPILLING, ST_COPYING };

struct adr_spill_buffer {
  struct adr_spill_manager* mgr;
  size_t size;
  enum adr__spill_state state;
  void* dptr;       /* ST_DEVICE, ST_SPILLING */
  void* hptr;       /* ST_HOST, ST_UNSPILLING */
  bool host_pinned; /* hptr came from the pinned-host device */
  bool exposed;
  uint32_t holders;
  struct adr_spill_buffer *prev, *next; /* LRU list: head is least recent */
  struct adr_spill_buffer* victim_next; /* victims being spilled by one call */
  struct adr_event* events[LAST_USE_EVENTS];
  struct adr_stream* event_streams[LAST_USE_EVENTS];
  bool event_pending[LAST_USE_EVENTS];
  char reason[64];
  /* Copy-on-write (slice.c): the slices that share this buffer as their
   * owner; 0 for a buffer of adr_spill_buffer_alloc (never shared). */
  uint32_t slices;
  /* Background spill: the device -> host copy was queued on the manager's
   * spill stream and spill_event marks its end; until it completed, hptr
   * must not be read or freed (unspill and free wait for it on the host). */
  bool spill_pending;
  struct adr_event* spill_event;
  /* The spill thread's queue (spilling, owned by the thread once queued). */
  struct adr_spill_buffer* job_next;
  int job_trigger;
};

struct exposure_record {
  struct exposure_record* next;
  char reason[64];
  void* frames[EXPOSURE_FRAMES];
  int nframes;
  uint64_t count, bytes;
  char* symbols; /* formatted lazily */
};

struct adr_spill_manager {
  struct adr_device* device;
  struct adr_device* host_device; /* where spilled bytes live: pinned or cpu */
  bool host_pinned;
  bool noop;      /* host-memory device: nothing to spill to */
  bool on_demand; /* registered in the OOM chain */
  bool global;
  uint64_t limit;
  uint32_t level;
  pthread_mutex_t lock;
  pthread_cond_t moved;
  struct adr_spill_buffer *head, *tail;
  uint64_t buffers, device_bytes, host_bytes, exposed_buffers, exposed_bytes, peak_device;
  uint64_t limit_exceeded, spill_failures, unspill_failures;
  bool limit_warned;
  struct adr_spill_transfer spilled[ADR_SPILL_TRIGGER_COUNT];
  struct adr_spill_transfer unspilled;
  struct exposure_record* exposures;
  size_t exposure_count;
  /* Pageable host buffers of past spills, kept for the next ones (behind
   * `lock`): a fresh buffer pays a page fault per 4 KiB on the spill's
   * copy, which made a spill several times slower than adr_copy into warm
   * memory. At most HOST_CACHE_MAX bytes; freed with the manager. */
  struct host_block* host_cache;
  uint64_t host_cache_bytes;
  /* Background spills (docs/spill.md, "Spilling in the background"): where
   * the backend's downloads are asynchronous, explicit and limit spills are
   * queued on this stream behind the buffer's last-use events, and the
   * device memory is freed on it (stream-ordered). NULL: every spill is a
   * blocking one. Created with the manager. */
  struct adr_stream* spill_stream;
  uint64_t queued_spills; /* statistics: spills that were queued */
  uint64_t unsettled;     /* queued since the OOM callback last waited for them */
  /* Where there is no spill stream (Vulkan: downloads complete in the
   * call), explicit spills of busy buffers go to a spill thread instead,
   * started at the first such spill, which runs the blocking spill while
   * the buffer stays in ST_SPILLING (behind `lock`). */
  bool worker_allowed, worker_started, worker_stop;
  pthread_t worker;
  pthread_cond_t work; /* jobs queued, or stop */
  struct adr_spill_buffer *jobs_head, *jobs_tail;
  uint64_t worker_pending; /* queued or running */
  uint64_t cow_copies, cow_bytes;
};

struct host_block {
  struct host_block* next;
  size_t size; /* usable bytes */
};

struct adr__spill_config {
  int status; /* 0, or EINVAL for a malformed variable (every global call reports it) */
  struct adr_error error;
  bool enabled;           /* ADR_SPILL */
  bool on_demand;         /* ADR_SPILL_ON_DEMAND */
  uint64_t limit;         /* ADR_SPILL_DEVICE_LIMIT in bytes, 0: none */
  uint32_t limit_percent; /* ... or as a percentage, 0: none */
  uint32_t stats_level;   /* ADR_SPILL_STATS */
};

/* Parses the four values (NULL or "": the default). EINVAL with the
 * message of adr_syntax_error (variable, column, what was expected). */
int adr__spill_config_parse(const char* spill, const char* on_demand, const char* limit,
                            const char* stats, struct adr__spill_config* out,
                            struct adr_error* error);

/* The environment's configuration, read once. */
const struct adr__spill_config* adr__spill_config(void);

/* Spills one buffer now (trigger "explicit") when it can spill: on the
 * device, not acquired, not exposed; otherwise, and on host-memory devices,
 * 0 with nothing moved. *out_bytes: the bytes moved. A failed spill leaves
 * the buffer on the device, usable (spill.c). For adr_spill_array_spill. */
int adr__spill_buffer_spill(struct adr_spill_buffer* b, uint64_t* out_bytes,
                            struct adr_error* error);

/* Copies `size` bytes at `offset` of the buffer, wherever they are (its
 * device memory, or its host copy when spilled: not unspilled), to dst on
 * dst_device, blocking. The buffer cannot move or be freed meanwhile. */
int adr__spill_buffer_copy_out(struct adr_spill_buffer* b, size_t offset, size_t size,
                               struct adr_device* dst_device, void* dst, struct adr_error* error);

/* The same for a slice's range (slice.c). */
int adr__spill_slice_copy_out(struct adr_spill_slice* s, struct adr_device* dst_device, void* dst,
                              struct adr_error* error);

/* Frees a buffer whatever its slice count (slice.c frees an owner with its
 * last slice); as adr_spill_buffer_free otherwise. */
int adr__spill_buffer_free_owned(struct adr_spill_buffer* b, struct adr_error* error);

#endif /* ADR_CORE_SPILL_INTERNAL_H */
