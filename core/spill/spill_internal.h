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

#include "adr/spill.h"

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

#endif /* ADR_CORE_SPILL_INTERNAL_H */
