/* SPDX-License-Identifier: Apache-2.0
 *
 * adr-demo: round trips on the default device (ADR_DEVICE; the CPU when
 * unset).
 *  1. Buffers: allocates two buffers on the device, uploads a pattern,
 *     overwrites a slice in the middle with memset, copies device to device
 *     on a stream ordered by an event, downloads and checks every byte.
 *  2. An Arrow table (int64, nullable utf8, list<int32>, struct<float64,
 *     bool>): deep-copies it to the device and back as ArrowDeviceArrays
 *     and compares the result logically with the original.
 * man/adr-demo.1 is the manual.
 */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adr/adr.h"
#include "sample_table.h" /* tools/fixtures */

#define CHECK(call)                                                                                \
  do {                                                                                             \
    int st_ = (call);                                                                              \
    if (st_ != 0) {                                                                                \
      fprintf(stderr, "adr-demo: %s failed: %s (%s)\n", #call, err.message, adr_status_name(st_)); \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

static int table_round_trip(struct adr_device* dev) {
  struct adr_error err = {{0}};
  const int64_t rows = 100000;
  struct ArrowSchema schema;
  struct ArrowDeviceArray table, on_dev, back;
  struct adr_stream* s = NULL;
  CHECK(fixture_sample_table(rows, &schema, &table, &err));
  CHECK(adr_stream_create(dev, &s, &err));
  CHECK(adr_device_array_deep_copy(&schema, &table, dev, s, &on_dev, NULL, &err));
  /* Back into host memory (NULL device: a CPU array, no cpu backend). The
   * copy waits on on_dev's sync_event itself and is complete on return, as
   * CPU arrays must be. */
  CHECK(adr_device_array_deep_copy(&schema, &on_dev, NULL, NULL, &back, NULL, &err));
  bool same = false;
  struct adr_error diff = {{0}};
  CHECK(adr_device_array_equal(&schema, &table, &back, &same, &diff, &err));
  adr_device_array_release(&back);
  adr_device_array_release(&on_dev);
  adr_device_array_release(&table);
  CHECK(adr_stream_destroy(s, &err));
  schema.release(&schema);
  if (!same) {
    printf("table round trip: FAILED: %s\n", diff.message);
    return 1;
  }
  printf(
      "table round trip: %lld rows (int64, utf8, list<int32>, struct<float64, bool>) "
      "host -> %s -> host: OK\n",
      (long long)rows, adr_device_name(dev));
  return 0;
}

static void usage(FILE* f) {
  fprintf(f,
          "usage: adr-demo [OPTION]...\n"
          "Round trips a buffer and an Arrow table through the default device and checks\n"
          "every byte.\n"
          "\n"
          "  -d, --device=SPEC  the device, as ADR_DEVICE spells it (cuda:0, opencl, cpu ...);\n"
          "                     default: ADR_DEVICE, else the CPU\n"
          "  -h, --help         show this help and exit\n"
          "  -V, --version      show the adr version and exit\n"
          "\n"
          "Exit status: 0 when both round trips are exact, 1 on a failure, 2 on a usage\n"
          "error.\n");
}

int main(int argc, char** argv) {
  static const struct option options[] = {
      {"device", required_argument, NULL, 'd'},
      {"help", no_argument, NULL, 'h'},
      {"version", no_argument, NULL, 'V'},
      {NULL, 0, NULL, 0},
  };
  int c;
  while ((c = getopt_long(argc, argv, "d:hV", options, NULL)) != -1) {
    switch (c) {
      case 'd':
        /* Before any adr call: adr reads its environment once, at first use. */
        if (setenv("ADR_DEVICE", optarg, 1) != 0) {
          perror("adr-demo: setenv");
          return 1;
        }
        break;
      case 'h':
        usage(stdout);
        return 0;
      case 'V':
        printf("adr-demo (adr) %s\n", adr_version());
        return 0;
      default:
        usage(stderr);
        return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "adr-demo: unexpected argument '%s'\n", argv[optind]);
    usage(stderr);
    return 2;
  }
  struct adr_error err = {{0}};
  struct adr_device* dev = NULL;
  CHECK(adr_device_default(&dev, &err));
  struct adr_device_info info = {.struct_size = sizeof(info)};
  CHECK(adr_device_info_get(dev, &info, &err));
  printf("device: %s (%s, backend %s)\n", adr_device_name(dev), info.name, info.backend);

  const size_t size = 16u << 20, slice_off = 1000003, slice_len = 77777;
  unsigned char* host = malloc(size);
  unsigned char* back = malloc(size);
  if (host == NULL || back == NULL) {
    fprintf(stderr, "adr-demo: out of host memory\n");
    return 1;
  }
  for (size_t i = 0; i < size; i++) host[i] = (unsigned char)(i * 131u + 7u);

  void *a = NULL, *b = NULL;
  struct adr_stream *s1 = NULL, *s2 = NULL;
  struct adr_event* ev = NULL;
  CHECK(adr_alloc(dev, size, 0, NULL, &a, &err));
  CHECK(adr_alloc(dev, size, 0, NULL, &b, &err));
  CHECK(adr_stream_create(dev, &s1, &err));
  CHECK(adr_stream_create(dev, &s2, &err));
  CHECK(adr_event_create(dev, &ev, &err));

  /* Host memory is the NULL device: no backend of its own. */
  CHECK(adr_copy(dev, a, NULL, host, size, s1, &err));
  CHECK(adr_memset(dev, (char*)a + slice_off, 0x5A, slice_len, s1, &err));
  CHECK(adr_event_record(ev, s1, &err));
  CHECK(adr_stream_wait_event(s2, ev, &err));
  CHECK(adr_copy(dev, b, dev, a, size, s2, &err));
  CHECK(adr_copy(NULL, back, dev, b, size, s2, &err));
  CHECK(adr_stream_synchronize(s2, &err));

  memset(host + slice_off, 0x5A, slice_len);
  size_t bad = 0;
  for (size_t i = 0; i < size; i++) bad += host[i] != back[i];

  CHECK(adr_event_destroy(ev, &err));
  CHECK(adr_stream_destroy(s1, &err));
  CHECK(adr_stream_destroy(s2, &err));
  CHECK(adr_free(dev, a, size, NULL, &err));
  CHECK(adr_free(dev, b, size, NULL, &err));
  free(host);
  free(back);
  if (bad != 0) {
    printf("buffer round trip: FAILED, %zu of %zu bytes differ\n", bad, size);
    return 1;
  }
  printf("buffer round trip: %zu MiB host -> %s -> memset slice -> device copy -> host: OK\n",
         size >> 20, adr_device_name(dev));
  return table_round_trip(dev);
}
