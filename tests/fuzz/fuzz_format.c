/* SPDX-License-Identifier: Apache-2.0
 *
 * Fuzz target: the format-string parser and the buffer sizes it implies.
 * Any input must give 0 or EINVAL/EOVERFLOW with a message, never a crash.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "adr/array.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  char* s = malloc(size + 1);
  if (s == NULL) return 0;
  memcpy(s, data, size);
  s[size] = '\0';
  struct adr_format f;
  struct adr_error err;
  err.message[0] = '\0';
  int st = adr_format_parse(s, &f, &err);
  if (st != 0) {
    if (st != EINVAL || err.message[0] == '\0') abort();
  } else {
    /* offset/length from the input's first bytes, some huge */
    int64_t offset = size > 0 ? (int64_t)data[0] << (data[0] % 56) : 0;
    int64_t length = size > 1 ? (int64_t)data[1] << (data[1] % 56) : 3;
    int64_t n_buffers = f.layout == ADR_LAYOUT_BINARY_VIEW ? 3 + (int64_t)(size % 4) : (int64_t)f.n_buffers;
    int64_t sizes[8];
    st = adr_format_buffer_sizes(&f, offset, length, n_buffers, sizes, &err);
    if (st != 0 && st != EOVERFLOW && st != EINVAL) abort();
    if (st == 0)
      for (int64_t i = 0; i < n_buffers; i++)
        if (sizes[i] < 0 && sizes[i] != ADR_BUFFER_SIZE_DATA_DEPENDENT) abort();
    if (adr_type_name(f.type) == NULL) abort();
  }
  free(s);
  return 0;
}

const char* const fuzz_seeds[] = {
    "n", "b", "i", "L", "e", "g", "z", "U", "vz", "vu", "d:38,10", "d:9,-2,32", "d:76,5,256",
    "w:16", "tdD", "tdm", "ttn", "tsu:UTC", "tsn:America/New_York", "tDs", "tin", "+l", "+L",
    "+vl", "+vL", "+w:4", "+s", "+m", "+ud:0,1,2", "+us:5,127", "+r", NULL,
};
