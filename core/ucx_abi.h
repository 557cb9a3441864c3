/* SPDX-License-Identifier: Apache-2.0
 *
 * The private boundary between libadr (core/ucx.c) and the UCX module
 * libadr_ucx.so (ucx/): the module exports one symbol,
 * adr_ucx_module_query, which returns this table. Both sides are built
 * from one tree and installed together, so the check is an exact ABI
 * number plus a struct size; the public promises are those of adr/ucx.h,
 * and the core checks arguments before it calls a slot.
 */
#ifndef ADR_CORE_UCX_ABI_H
#define ADR_CORE_UCX_ABI_H

#include "adr/ucx.h"

#define ADR_UCX_MODULE_ABI 1u
#define ADR_UCX_MODULE_SYMBOL "adr_ucx_module_query"

struct adr_ucx_module {
  uint32_t struct_size;
  uint32_t abi;
  int (*listen)(const char* address, const struct adr_ucx_options* options,
                struct adr_ucx_listener** out, struct adr_error* error);
  int (*listener_port)(const struct adr_ucx_listener* listener);
  int (*accept)(struct adr_ucx_listener* listener, int timeout_ms, struct adr_ucx_conn** out,
                struct adr_error* error);
  int (*listener_destroy)(struct adr_ucx_listener* listener, struct adr_error* error);
  int (*connect)(const char* address, const struct adr_ucx_options* options,
                 struct adr_ucx_conn** out, struct adr_error* error);
  int (*send_stream)(struct adr_ucx_conn* conn, struct ArrowDeviceArrayStream* source,
                     struct adr_ucx_send_stats* out_stats, struct adr_error* error);
  int (*receive_stream)(struct adr_ucx_conn* conn, struct adr_device* device,
                        struct ArrowDeviceArrayStream* out, struct adr_error* error);
  void (*conn_cancel)(struct adr_ucx_conn* conn);
  int (*conn_destroy)(struct adr_ucx_conn* conn, struct adr_error* error);
};

typedef const struct adr_ucx_module* (*adr_ucx_module_query_fn)(uint32_t abi);

#endif
