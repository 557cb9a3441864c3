/* SPDX-License-Identifier: Apache-2.0
 *
 * The program test_elevated.sh makes setuid-root and runs as an
 * unprivileged user. It links the core statically: a setuid program
 * ignores LD_LIBRARY_PATH and $ORIGIN run paths, so it could not find a
 * build-tree libadr.so; the backends are found beside it, in
 * <dir>/adr/backends (the installed layout, located with dladdr).
 *
 *   elevated_probe [--allow NAME]... [--late-allow NAME]...
 *
 * --allow calls adr_backend_allow_elevated before anything else; then every
 * backend is loaded and described; --late-allow calls it afterwards. Prints
 * one fact per line on stdout for the script to check:
 *   elevated 1 uid 65534 euid 0
 *   allow opencl OK
 *   backend opencl excluded 0 devices: <reason>
 *   late-allow opencl EBUSY: <message>
 * The library's own log lines go to stderr (or ADR_LOG's file).
 *
 *   elevated_ucx_probe --ucx-listen FILE | --ucx-send PORT
 *
 * UCX modes (built as elevated_ucx_probe, linked with the shared libadr,
 * which the UCX module needs): listen
 * on 127.0.0.1 (the port goes to FILE), take one stream and print
 *   ucx-received ROWS rows
 * or connect to PORT, send one batch of an int64 column (1 MiB) and print
 *   ucx-send OK direct D bounced B
 * (adr_ucx_send_stats: bytes sent in place and through a copy), or
 *   ucx-send ERR: <message>
 */
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "adr/adr.h"
#include "adr/array.h"
#include "adr/ucx.h"
static const char* state_name(int state) {
  switch (state) {
    case ADR_BACKEND_LOADED:
      return "loaded";
    case ADR_BACKEND_ABSENT:
      return "absent";
    case ADR_BACKEND_EXCLUDED:
      return "excluded";
    case ADR_BACKEND_REJECTED:
      return "rejected";
    case ADR_BACKEND_UNAVAILABLE:
      return "unavailable";
    default:
      return "not-loaded";
  }
}

static void allow(const char* label, const char* name) {
  struct adr_error err = {{0}};
  int st = adr_backend_allow_elevated(name, &err);
  printf("%s %s %s%s%s\n", label, name, adr_status_name(st), st ? ": " : "", st ? err.message : "");
}

#ifdef ADR_PROBE_UCX
#define UCX_ROWS 131072

static const struct adr_ucx_options k_ucx_options = {.struct_size = sizeof(struct adr_ucx_options),
                                                     .timeout_ms = 10000};

static int ucx_listen(const char* port_file) {
  struct adr_error err = {{0}};
  struct adr_ucx_listener* l = NULL;
  struct adr_ucx_conn* c = NULL;
  int st = adr_ucx_listen("127.0.0.1:0", &k_ucx_options, &l, &err);
  if (st == 0) {
    FILE* f = fopen(port_file, "w");
    if (f != NULL) {
      fprintf(f, "%d\n", adr_ucx_listener_port(l));
      fclose(f);
    }
    st = adr_ucx_accept(l, 10000, &c, &err);
  }
  int64_t rows = 0;
  struct ArrowDeviceArrayStream in;
  if (st == 0) st = adr_ucx_receive_stream(c, NULL, &in, &err);
  while (st == 0) {
    struct ArrowDeviceArray b;
    st = in.get_next(&in, &b);
    if (st != 0) {
      snprintf(err.message, sizeof(err.message), "%s", in.get_last_error(&in));
      break;
    }
    if (b.array.release == NULL) break;
    rows += b.array.length;
    b.array.release(&b.array);
  }
  if (in.release != NULL && st == 0) in.release(&in);
  if (c != NULL) adr_ucx_conn_destroy(c, NULL);
  if (l != NULL) adr_ucx_listener_destroy(l, NULL);
  if (st != 0) printf("ucx-receive ERR: %s\n", err.message);
  printf("ucx-received %lld rows\n", (long long)rows);
  return 0;
}

static int ucx_send(const char* port) {
  struct adr_error err = {{0}};
  struct ArrowSchema schema;
  struct ArrowArray table;
  int st = adr_schema_init(&schema, "+s", "", 0, 1, &err);
  if (st == 0) st = adr_schema_init(schema.children[0], "l", "x", 0, 0, &err);
  if (st == 0) st = adr_array_init(NULL, 1, 1, &table, &err);
  if (st == 0) st = adr_array_init(NULL, 2, 0, table.children[0], &err);
  void* data = NULL;
  if (st == 0) st = adr_array_alloc_buffer(table.children[0], 1, UCX_ROWS * 8, NULL, &data, &err);
  if (st != 0) {
    printf("ucx-send ERR: %s\n", err.message);
    return 1;
  }
  for (int64_t i = 0; i < UCX_ROWS; i++) ((int64_t*)data)[i] = i;
  table.length = table.children[0]->length = UCX_ROWS;
  struct ArrowDeviceArray batch;
  memset(&batch, 0, sizeof(batch));
  batch.array = table;
  batch.device_type = ARROW_DEVICE_CPU;
  batch.device_id = -1;
  struct ArrowDeviceArrayStream src;
  st = adr_device_array_stream_from_arrays(&schema, &batch, 1, ARROW_DEVICE_CPU, &src, &err);
  char address[64];
  snprintf(address, sizeof(address), "127.0.0.1:%s", port);
  struct adr_ucx_conn* c = NULL;
  if (st == 0) st = adr_ucx_connect(address, &k_ucx_options, &c, &err);
  struct adr_ucx_send_stats stats = {.struct_size = sizeof(stats)};
  if (st == 0) st = adr_ucx_send_stream(c, &src, &stats, &err);
  if (src.release != NULL) src.release(&src);
  if (c != NULL) adr_ucx_conn_destroy(c, NULL);
  if (st != 0)
    printf("ucx-send ERR: %s\n", err.message);
  else
    printf("ucx-send OK direct %lld bounced %lld\n", (long long)stats.direct_bytes,
           (long long)stats.bounced_bytes);
  return 0;
}

#endif

int main(int argc, char** argv) {
  printf("elevated %d uid %d euid %d\n", getauxval(AT_SECURE) != 0, (int)getuid(), (int)geteuid());
#ifdef ADR_PROBE_UCX
  if (argc == 3 && strcmp(argv[1], "--ucx-listen") == 0) return ucx_listen(argv[2]);
  if (argc == 3 && strcmp(argv[1], "--ucx-send") == 0) return ucx_send(argv[2]);
#endif
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], "--allow") == 0) allow("allow", argv[++i]);

  struct adr_error err = {{0}};
  int st = adr_init(&err);
  printf("init %s%s%s\n", adr_status_name(st), st ? ": " : "", st ? err.message : "");
  if (st != 0) return 1;
  st = adr_backends_load_all(&err);
  if (st != 0) {
    printf("load_all %s: %s\n", adr_status_name(st), err.message);
    return 1;
  }
  for (size_t i = 0; i < adr_backend_count(); i++) {
    struct adr_backend_info bi;
    memset(&bi, 0, sizeof(bi));
    bi.struct_size = sizeof(bi);
    if (adr_backend_info_get(i, &bi, &err) != 0) continue;
    printf("backend %s %s %lld devices: %s\n", bi.name, state_name(bi.state),
           (long long)bi.device_count, bi.reason);
  }
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], "--late-allow") == 0) allow("late-allow", argv[++i]);

  /* Use a device, so the log has something to say at info level. */
  struct adr_device* dev = NULL;
  st = adr_device_get(ARROW_DEVICE_CPU, 0, &dev, &err);
  printf("cpu %s\n", st ? err.message : adr_device_name(dev));
  return 0;
}
