/* SPDX-License-Identifier: Apache-2.0
 *
 * The module's one export: the table core/ucx.c calls through.
 */
#include "ucx_abi.h"
#include "ucx_internal.h"

int ucx_listen(const char* address, const struct adr_ucx_options* options,
               struct adr_ucx_listener** out, struct adr_error* error);
int ucx_listener_port(const struct adr_ucx_listener* listener);
int ucx_accept(struct adr_ucx_listener* l, int timeout_ms, struct adr_ucx_conn** out,
               struct adr_error* error);
int ucx_listener_destroy(struct adr_ucx_listener* l, struct adr_error* error);
int ucx_connect(const char* address, const struct adr_ucx_options* options,
                struct adr_ucx_conn** out, struct adr_error* error);
void ucx_conn_cancel(struct adr_ucx_conn* conn);
int ucx_conn_destroy(struct adr_ucx_conn* conn, struct adr_error* error);

static const struct adr_ucx_module table = {
    .struct_size = sizeof(struct adr_ucx_module),
    .abi = ADR_UCX_MODULE_ABI,
    .listen = ucx_listen,
    .listener_port = ucx_listener_port,
    .accept = ucx_accept,
    .listener_destroy = ucx_listener_destroy,
    .connect = ucx_connect,
    .send_stream = ucx_send_stream,
    .receive_stream = ucx_receive_stream,
    .conn_cancel = ucx_conn_cancel,
    .conn_destroy = ucx_conn_destroy,
};

__attribute__((visibility("default"))) const struct adr_ucx_module* adr_ucx_module_query(
    uint32_t abi);
const struct adr_ucx_module* adr_ucx_module_query(uint32_t abi) {
  return abi == ADR_UCX_MODULE_ABI ? &table : NULL;
}
