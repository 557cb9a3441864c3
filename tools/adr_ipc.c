/* SPDX-License-Identifier: Apache-2.0
 *
 * adr-ipc: Arrow IPC streams from files and pipes (docs/ipc.md, adr-ipc(1)).
 *
 *   adr-ipc cat [--device SPEC] [-D] [IN [OUT]]
 *                                           copy a stream, optionally via a device
 *   adr-ipc to-device SPEC [IN]             move every batch to a device and verify
 *   adr-ipc info [IN]                       schema, then every message
 *   adr-ipc sample [--batches K] ROWS [OUT] write the sample table
 *
 * IN and OUT default to stdin and stdout ("-" names them too).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "adr/adr.h"
#include "adr/array.h"
#include "adr/ipc.h"
#include "sample_table.h"

static void usage(FILE* f) {
  fprintf(f,
          "usage: adr-ipc COMMAND [OPTION]... [ARG]...\n"
          "Reads and writes Arrow IPC streams (files or pipes; IN and OUT default to\n"
          "stdin and stdout, \"-\" names them too).\n"
          "\n"
          "  cat [IN [OUT]]         read a stream and write it back; with --device the\n"
          "                         batches travel through that device\n"
          "  to-device SPEC [IN]    read a stream, copy every batch to the device SPEC,\n"
          "                         compare it with the host batch and report\n"
          "  info [IN]              print the schema, then each message: type, rows and\n"
          "                         body bytes\n"
          "  sample ROWS [OUT]      write adr's sample table of ROWS rows (int64, utf8,\n"
          "                         list<int32>, struct<float64, bool>)\n"
          "\n"
          "  -d, --device=SPEC   cat: the device the batches go through (as ADR_DEVICE\n"
          "                      spells it: opencl:0, vulkan, cuda:0, cpu ...)\n"
          "  -D, --dictionary-deltas\n"
          "                      cat: write a dictionary that extends the previous one\n"
          "                      as a delta (only its new values)\n"
          "  -b, --batches=K     sample: split the table into K batches (default 1)\n"
          "  -h, --help          show this help and exit\n"
          "  -V, --version       show the adr version and exit\n"
          "\n"
          "Exit status: 0 on success, 1 when a stream is malformed or a call fails (the\n"
          "message names the message index and field), 2 on a usage error.\n");
}

static int fail(const char* what, const struct adr_error* err) {
  fprintf(stderr, "adr-ipc: %s: %s\n", what, err->message);
  return 1;
}

static int open_in(const char* path) {
  if (path == NULL || strcmp(path, "-") == 0) return STDIN_FILENO;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) fprintf(stderr, "adr-ipc: %s: %s\n", path, strerror(errno));
  return fd;
}

static int open_out(const char* path) {
  if (path == NULL || strcmp(path, "-") == 0) return STDOUT_FILENO;
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fprintf(stderr, "adr-ipc: %s: %s\n", path, strerror(errno));
  return fd;
}

static void close_fd(int fd) {
  if (fd > STDERR_FILENO) close(fd);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int select_device(const char* spec, struct adr_device** out) {
  struct adr_error err = {{0}};
  if (adr_device_select(spec, out, &err) != 0) return fail(spec, &err);
  return 0;
}

/* ---- cat ------------------------------------------------------------------ */

static int cmd_cat(const char* device, bool deltas, const char* in, const char* out) {
  struct adr_device* dev = NULL;
  if (device != NULL && select_device(device, &dev)) return 1;
  int ifd = open_in(in);
  if (ifd < 0) return 1;
  int ofd = open_out(out);
  if (ofd < 0) {
    close_fd(ifd);
    return 1;
  }
  struct adr_error err = {{0}};
  struct ArrowDeviceArrayStream s;
  int rc = 0;
  if (adr_ipc_read_stream(ifd, dev, &s, &err) != 0) {
    rc = fail("read", &err);
  } else {
    struct adr_ipc_stream_stats st = {.struct_size = sizeof(st)};
    struct adr_ipc_write_options wo = {
        .struct_size = sizeof(wo), .prefetch = 1, .dictionary_deltas = deltas};
    if (adr_ipc_write_stream(ofd, &s, &wo, &st, &err) != 0)
      rc = fail("cat", &err);
    else if (dev != NULL)
      fprintf(stderr, "adr-ipc: %lld batches, %lld rows through %s\n", (long long)st.batches,
              (long long)st.rows, adr_device_name(dev));
  }
  close_fd(ifd);
  if (ofd > STDERR_FILENO && close(ofd) != 0) {
    fprintf(stderr, "adr-ipc: %s: %s\n", out, strerror(errno));
    rc = 1;
  }
  return rc;
}

/* ---- to-device ------------------------------------------------------------ */

static int cmd_to_device(const char* device, const char* in) {
  struct adr_device* dev = NULL;
  if (select_device(device, &dev)) return 1;
  int ifd = open_in(in);
  if (ifd < 0) return 1;
  struct adr_error err = {{0}};
  struct ArrowDeviceArrayStream s;
  if (adr_ipc_read_stream(ifd, NULL, &s, &err) != 0) {
    close_fd(ifd);
    return fail("read", &err);
  }
  struct ArrowSchema schema;
  int rc = 0;
  if (adr_device_array_stream_get_schema(&s, &schema, &err) != 0) {
    s.release(&s);
    close_fd(ifd);
    return fail("schema", &err);
  }
  int64_t batches = 0, rows = 0, bytes = 0;
  double copy_s = 0;
  for (;;) {
    struct ArrowDeviceArray host, moved;
    if (adr_device_array_stream_next(&s, &host, &err) != 0) {
      rc = fail("read", &err);
      break;
    }
    if (host.array.release == NULL) break;
    struct adr_copy_stats cs = {.struct_size = sizeof(cs)};
    double t0 = now();
    if (adr_device_array_deep_copy(&schema, &host, dev, NULL, &moved, &cs, &err) != 0) {
      adr_device_array_release(&host);
      rc = fail("copy to the device", &err);
      break;
    }
    copy_s += now() - t0;
    bool eq = false;
    struct adr_error diff = {{0}};
    int st = adr_device_array_equal(&schema, &host, &moved, &eq, &diff, &err);
    if (st != 0 || !eq) {
      fprintf(stderr, "adr-ipc: batch %lld on %s: %s\n", (long long)batches, adr_device_name(dev),
              st ? err.message : diff.message);
      rc = 1;
    } else {
      printf("batch %lld: %lld rows, %lld bytes on %s: verified\n", (long long)batches,
             (long long)host.array.length, (long long)cs.bytes, adr_device_name(dev));
    }
    rows += host.array.length;
    bytes += cs.bytes;
    batches++;
    adr_device_array_release(&moved);
    adr_device_array_release(&host);
    if (rc) break;
  }
  if (rc == 0)
    printf("%lld batches, %lld rows, %lld bytes moved to %s in %.3f s: all verified\n",
           (long long)batches, (long long)rows, (long long)bytes, adr_device_name(dev), copy_s);
  schema.release(&schema);
  s.release(&s);
  close_fd(ifd);
  return rc;
}

/* ---- info ----------------------------------------------------------------- */

static void print_field(const struct ArrowSchema* s, int depth) {
  struct adr_format f;
  struct adr_error err;
  const struct ArrowSchema* v = s->dictionary ? s->dictionary : s;
  const char* type = adr_format_parse(v->format, &f, &err) == 0 ? adr_type_name(f.type) : "?";
  printf("%*s%s: %s (\"%s\")", 2 * depth, "", s->name && s->name[0] ? s->name : "(unnamed)", type,
         v->format);
  if (s->dictionary) printf(", dictionary-encoded, indices \"%s\"", s->format);
  if (s->flags & ARROW_FLAG_NULLABLE) printf(", nullable");
  printf("\n");
  for (int64_t i = 0; i < v->n_children; i++) print_field(v->children[i], depth + 1);
}

/* Reads exactly n bytes; returns how many came before EOF, -1 on error. */
static ssize_t read_n(int fd, void* buf, size_t n) {
  size_t at = 0;
  while (at < n) {
    ssize_t r = read(fd, (char*)buf + at, n - at);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    at += (size_t)r;
  }
  return (ssize_t)at;
}

static int cmd_info(const char* in) {
  int fd = open_in(in);
  if (fd < 0) return 1;
  struct adr_error err = {{0}};
  struct adr_ipc_reader* r = NULL;
  if (adr_ipc_reader_create(NULL, NULL, &r, &err) != 0) {
    close_fd(fd);
    return fail("reader", &err);
  }
  int rc = 0;
  int64_t batches = 0, rows = 0, body_bytes = 0;
  for (int64_t idx = 0;; idx++) {
    uint8_t prefix[ADR_IPC_PREFIX_SIZE];
    ssize_t got = read_n(fd, prefix, sizeof(prefix));
    if (got == 0) break;
    int64_t m = 0;
    if (got != (ssize_t)sizeof(prefix)) {
      fprintf(stderr, "adr-ipc: message %lld: truncated prefix\n", (long long)idx);
      rc = 1;
      break;
    }
    if (adr_ipc_decode_prefix(prefix, idx, &m, &err) != 0) {
      rc = fail("read", &err);
      break;
    }
    if (m == 0) {
      printf("message %lld: end of stream\n", (long long)idx);
      break;
    }
    uint8_t* meta = malloc((size_t)m);
    if (meta == NULL || read_n(fd, meta, (size_t)m) != (ssize_t)m) {
      fprintf(stderr, "adr-ipc: message %lld: truncated metadata\n", (long long)idx);
      free(meta);
      rc = 1;
      break;
    }
    struct adr_ipc_decoded d;
    int st = adr_ipc_decode_message(meta, (size_t)m, idx, &d, &err);
    free(meta);
    if (st != 0) {
      rc = fail("read", &err);
      break;
    }
    if (d.type == ADR_IPC_MESSAGE_SCHEMA) {
      st = adr_ipc_reader_set_schema(r, &d, &err);
      if (st == 0) {
        const struct ArrowSchema* s = adr_ipc_reader_schema(r);
        printf("message %lld: schema, %lld fields\n", (long long)idx, (long long)s->n_children);
        for (int64_t i = 0; i < s->n_children; i++) print_field(s->children[i], 1);
      }
    } else {
      void* body = NULL;
      if (posix_memalign(&body, 64, (size_t)d.body_alloc_size) != 0 ||
          read_n(fd, body, (size_t)d.body_size) != (ssize_t)d.body_size) {
        fprintf(stderr, "adr-ipc: message %lld: truncated body of %lld bytes\n", (long long)idx,
                (long long)d.body_size);
        free(body);
        adr_ipc_decoded_release(&d);
        rc = 1;
        break;
      }
      struct ArrowDeviceArray batch;
      st = adr_ipc_reader_consume(r, &d, body, &batch, &err);
      if (st == 0 && d.type == ADR_IPC_MESSAGE_DICTIONARY_BATCH) {
        printf("message %lld: %s, id %lld, %lld values%s, %lld body bytes\n", (long long)idx,
               d.is_delta ? "delta dictionary batch" : "dictionary batch",
               (long long)d.dictionary_id, (long long)d.length, d.is_delta ? " appended" : "",
               (long long)d.body_size);
      } else if (st == 0) {
        printf("message %lld: record batch %lld, %lld rows, %lld body bytes, %lld buffers\n",
               (long long)idx, (long long)batches, (long long)d.length, (long long)d.body_size,
               (long long)d.n_buffers);
        batches++;
        rows += d.length;
        adr_device_array_release(&batch);
      }
      body_bytes += d.body_size;
    }
    adr_ipc_decoded_release(&d);
    if (st != 0) {
      rc = fail("read", &err);
      break;
    }
  }
  if (rc == 0)
    printf("%lld batches, %lld rows, %lld body bytes\n", (long long)batches, (long long)rows,
           (long long)body_bytes);
  adr_ipc_reader_destroy(r);
  close_fd(fd);
  return rc;
}

/* ---- sample --------------------------------------------------------------- */

static void view_release(struct ArrowArray* a) {
  a->release = NULL;
}

static int cmd_sample(int64_t rows, int64_t n_batches, const char* out) {
  struct adr_error err = {{0}};
  struct ArrowSchema schema, copy;
  struct ArrowDeviceArray table;
  if (fixture_sample_table(rows, &schema, &table, &err) != 0) return fail("sample table", &err);
  struct ArrowDeviceArray* views = calloc((size_t)n_batches, sizeof(*views));
  if (views == NULL) {
    fprintf(stderr, "adr-ipc: out of memory\n");
    return 1;
  }
  /* Slices of the table as batches (views: the table keeps the memory). */
  for (int64_t i = 0; i < n_batches; i++) {
    views[i] = table;
    views[i].array.release = view_release;
    views[i].array.offset = rows * i / n_batches;
    views[i].array.length = rows * (i + 1) / n_batches - rows * i / n_batches;
  }
  int rc = 0;
  struct ArrowDeviceArrayStream s;
  if (adr_schema_copy(&schema, &copy, &err) != 0 ||
      adr_device_array_stream_from_arrays(&copy, views, (size_t)n_batches, ARROW_DEVICE_CPU, &s,
                                          &err) != 0) {
    rc = fail("stream", &err);
  } else {
    int fd = open_out(out);
    if (fd < 0) {
      s.release(&s);
      rc = 1;
    } else {
      if (adr_ipc_write_stream(fd, &s, NULL, NULL, &err) != 0) rc = fail("write", &err);
      if (fd > STDERR_FILENO && close(fd) != 0) rc = 1;
    }
  }
  free(views);
  adr_device_array_release(&table);
  schema.release(&schema);
  return rc;
}

static bool parse_count(const char* s, int64_t lo, int64_t hi, int64_t* out) {
  char* end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

int main(int argc, char** argv) {
  /* clang-format off */
  static const struct option options[] = {
      {"device", required_argument, NULL, 'd'},
      {"batches", required_argument, NULL, 'b'},
      {"dictionary-deltas", no_argument, NULL, 'D'},
      {"help", no_argument, NULL, 'h'},
      {"version", no_argument, NULL, 'V'},
      {NULL, 0, NULL, 0},
  };
  /* clang-format on */
  const char* device = NULL;
  int64_t batches = 1;
  bool deltas = false;
  int c;
  while ((c = getopt_long(argc, argv, "d:b:DhV", options, NULL)) != -1) {
    switch (c) {
      case 'd':
        device = optarg;
        break;
      case 'b':
        if (!parse_count(optarg, 1, 1 << 20, &batches)) {
          fprintf(stderr, "adr-ipc: --batches: '%s' is not a count in [1, 1048576]\n", optarg);
          usage(stderr);
          return 2;
        }
        break;
      case 'D':
        deltas = true;
        break;
      case 'h':
        usage(stdout);
        return 0;
      case 'V':
        printf("adr-ipc (adr) %s\n", adr_version());
        return 0;
      default:
        usage(stderr);
        return 2;
    }
  }
  int n = argc - optind;
  char** a = argv + optind;
  if (n < 1) {
    fprintf(stderr, "adr-ipc: a command is needed\n");
    usage(stderr);
    return 2;
  }
  const char* cmd = a[0];
  if (strcmp(cmd, "cat") == 0 && n <= 3)
    return cmd_cat(device, deltas, n > 1 ? a[1] : NULL, n > 2 ? a[2] : NULL);
  if (device != NULL || deltas) {
    fprintf(stderr, "adr-ipc: %s applies to cat only\n",
            device ? "--device" : "--dictionary-deltas");
    usage(stderr);
    return 2;
  }
  if (strcmp(cmd, "to-device") == 0 && n >= 2 && n <= 3)
    return cmd_to_device(a[1], n > 2 ? a[2] : NULL);
  if (strcmp(cmd, "info") == 0 && n <= 2) return cmd_info(n > 1 ? a[1] : NULL);
  if (strcmp(cmd, "sample") == 0 && n >= 2 && n <= 3) {
    int64_t rows = 0;
    if (!parse_count(a[1], 0, 100000000, &rows) || batches > (rows ? rows : 1)) {
      fprintf(stderr, "adr-ipc: sample: ROWS '%s' must be in [0, 100000000] and >= batches\n",
              a[1]);
      return 2;
    }
    return cmd_sample(rows, batches, n > 2 ? a[2] : NULL);
  }
  fprintf(stderr, "adr-ipc: unknown command or wrong arguments: '%s'\n", cmd);
  usage(stderr);
  return 2;
}
