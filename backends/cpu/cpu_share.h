/* SPDX-License-Identifier: Apache-2.0
 *
 * The CPU backend's sharing between processes (adr/share.h): shareable
 * memory lives in a memfd mapped MAP_SHARED; its handle is that memfd (a
 * duplicate per export, passed with SCM_RIGHTS), and an importer maps it
 * the same way. The kernel keeps the pages while any process maps them,
 * so either side may go at any time.
 *
 * Lock: one mutex over the list of shareable and imported mappings,
 * never held while calling out.
 */
#ifndef ADR_CPU_SHARE_H
#define ADR_CPU_SHARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "adr/backend.h"

struct cpu_ranges;
/* The backend's address map (cpu.c), so imports answer pointer_query. */
struct cpu_ranges* cpu_ranges_global(void);

int cpu_share_caps(struct adr_backend_device* dev, uint32_t* out, struct adr_error* error);
int cpu_share_alloc(struct adr_backend_device* dev, size_t size, size_t alignment, void** out,
                    struct adr_error* error);
int cpu_share_export(struct adr_backend_device* dev, const void* ptr, struct adr_share_handle* out,
                     int* out_fd, struct adr_error* error);
int cpu_share_import(struct adr_backend_device* dev, const struct adr_share_handle* handle, int fd,
                     void** out, struct adr_error* error);
int cpu_share_close(struct adr_backend_device* dev, void* ptr, struct adr_error* error);

/* For the free slot: whether `ptr` is a shareable allocation; if so it is
 * forgotten (its memfd closed) and the mapping to unmap is returned. */
bool cpu_share_forget(void* ptr, void** out_base, size_t* out_size);

#endif /* ADR_CPU_SHARE_H */
