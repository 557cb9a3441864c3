/* SPDX-License-Identifier: Apache-2.0
 *
 * Writes an Arrow IPC stream (to the file named, or standard output) whose
 * dictionary grows: 3 batches of struct<d: dictionary<int32, utf8>>, batch
 * b's dictionary the first 2 (b + 1) words of a fixed list, each in memory
 * of its own, so adr_ipc_write_stream writes replacements (with deltas on,
 * deltas of 2 words). The adr-ipc tool test (check_tool.sh) reads it.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "adr/adr.h"
#include "adr/array.h"
#include "adr/ipc.h"

static const char* const words[] = {"red", "green", "blue", "cyan", "magenta", "yellow"};

static int schema_of(struct ArrowSchema* s, struct adr_error* e) {
  int st = adr_schema_init(s, "+s", "", 0, 1, e);
  if (!st) st = adr_schema_init(s->children[0], "i", "d", ARROW_FLAG_NULLABLE, 0, e);
  if (!st) st = adr_schema_alloc_dictionary(s->children[0], e);
  if (!st) st = adr_schema_init(s->children[0]->dictionary, "u", NULL, 0, 0, e);
  return st;
}

/* Batch b: 5 rows, row i pointing at word i % entries. */
static int batch_of(int b, struct ArrowDeviceArray* out, struct adr_error* e) {
  int64_t entries = 2 * (b + 1), rows = 5, bytes = 0;
  for (int64_t k = 0; k < entries; k++) bytes += (int64_t)strlen(words[k]);
  struct ArrowArray a = {0};
  int32_t *idx = NULL, *off = NULL;
  char* data = NULL;
  int st = adr_array_init(NULL, 1, 1, &a, e);
  struct ArrowArray* col = st ? NULL : a.children[0];
  if (!st) st = adr_array_init(NULL, 2, 0, col, e);
  if (!st) st = adr_array_alloc_buffer(col, 1, (size_t)rows * 4, NULL, (void**)&idx, e);
  if (!st) st = adr_array_alloc_dictionary(col, e);
  if (!st) st = adr_array_init(NULL, 3, 0, col->dictionary, e);
  if (!st)
    st = adr_array_alloc_buffer(col->dictionary, 1, (size_t)(entries + 1) * 4, NULL, (void**)&off,
                                e);
  if (!st) st = adr_array_alloc_buffer(col->dictionary, 2, (size_t)bytes, NULL, (void**)&data, e);
  if (!st) {
    for (int64_t i = 0; i < rows; i++) idx[i] = (int32_t)(i % entries);
    off[0] = 0;
    for (int64_t k = 0; k < entries; k++) {
      size_t n = strlen(words[k]);
      memcpy(data + off[k], words[k], n);
      off[k + 1] = off[k] + (int32_t)n;
    }
    col->dictionary->length = entries;
    col->length = rows;
    a.length = rows;
    st = adr_device_array_init(NULL, &a, NULL, out, e);
  }
  if (st && a.release) a.release(&a);
  return st;
}

int main(int argc, char** argv) {
  struct adr_error e = {{0}};
  int fd = argc > 1 ? open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644) : STDOUT_FILENO;
  if (fd < 0) {
    perror(argv[1]);
    return 1;
  }
  struct ArrowSchema schema = {0};
  struct ArrowDeviceArray batches[3];
  memset(batches, 0, sizeof(batches));
  int st = schema_of(&schema, &e);
  for (int b = 0; !st && b < 3; b++) st = batch_of(b, &batches[b], &e);
  struct ArrowDeviceArrayStream s;
  if (!st) st = adr_device_array_stream_from_arrays(&schema, batches, 3, ARROW_DEVICE_CPU, &s, &e);
  if (!st) st = adr_ipc_write_stream(fd, &s, NULL, NULL, &e);
  if (st) {
    fprintf(stderr, "dict_stream: %s\n", e.message);
    for (int b = 0; b < 3; b++)
      if (batches[b].array.release) adr_device_array_release(&batches[b]);
    if (schema.release) schema.release(&schema);
  }
  if (fd != STDOUT_FILENO) close(fd);
  return st ? 1 : 0;
}
