/* SPDX-License-Identifier: Apache-2.0
 *
 * The one byte-size grammar of adr's environment variables (ADR_ALLOC's
 * sizes, ADR_VULKAN_BLOCK_SIZE, ADR_CUDA_STAGING, ADR_HIP_STAGING), and the
 * one way their syntax errors are worded. Compiled into the core (for
 * ADR_ALLOC) and into each backend that reads a size: nothing here is
 * shared at run time.
 *
 *   size = digit { digit } [ "." digit { digit } ] [ unit ]
 *   unit = "B" | "K" | "KiB" | "KB" | "M" | "MiB" | "MB" | "G" | "GiB" | "GB"
 *        | "T" | "TiB" | "TB"                    (case-insensitive)
 *
 * K, M, G, T and KiB ... TiB are binary (2^10 ...), KB ... TB decimal
 * (10^3 ...); no unit means bytes. The value is exact (integer arithmetic:
 * "0.72KB" is 720), a fraction of a byte rounds up ("0.5B" is 1, "0.3KiB"
 * 308: never smaller than written), and anything up to 2^64 - 1 bytes is
 * accepted; larger is an error naming that maximum. No sign, no spaces.
 * docs/environment.md has the same grammar.
 *
 * Thread safety: pure functions, no state.
 */
#ifndef ADR_BACKEND_BYTESIZE_H
#define ADR_BACKEND_BYTESIZE_H

#include <stddef.h>
#include <stdint.h>

#include "adr/adr.h"

#define ADR_BYTESIZE_UNITS "B, K, KiB, KB, M, MiB, MB, G, GiB, GB, T, TiB, TB"

/* Reads one size starting at text[*pos]. On success returns 0, stores the
 * value in *out and moves *pos past the size (the caller checks what
 * follows). On failure returns EINVAL, leaves *out alone, sets *pos to the
 * 0-based position of the problem and *expected (when not NULL) to a
 * static description of what was expected there ("a size (digits, then a
 * unit)", "a unit (B, K, ...)", ...). */
int adr_bytesize_scan(const char* text, size_t* pos, uint64_t* out, const char** expected);

/* The whole of `text` is one size. On failure returns EINVAL and writes
 * the adr_syntax_error() message into `error` (may be NULL). `variable`
 * names the setting in that message. */
int adr_bytesize_parse(const char* variable, const char* text, uint64_t* out,
                       struct adr_error* error);

/* Writes the one message every environment parser uses into `error` (may
 * be NULL) and returns EINVAL:
 *   VARIABLE="TEXT": column N: expected EXPECTED, found 'c'
 * N is pos + 1; "found" names the character at text[pos] ('c', "byte 0x1b"
 * or "end of text"). */
int adr_syntax_error(struct adr_error* error, const char* variable, const char* text, size_t pos,
                     const char* expected);

#endif /* ADR_BACKEND_BYTESIZE_H */
