/* SPDX-License-Identifier: Apache-2.0
 *
 * Record batch metadata sent as a patch (ucx/ucx_meta.c, compiled in): a
 * patch turns the remembered metadata of the same size into the new one
 * byte for byte, is only its two words for equal metadata and a few bytes
 * for one changed word, is not made when no metadata of that size is
 * remembered or it would not be smaller; the memo keeps the last metadata
 * of UCX_META_MEMO sizes alike on both sides; a patch that is truncated,
 * leaves the metadata, goes back or names a size not remembered is EPROTO
 * with the message index, never a write outside the metadata.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../ucx/ucx_internal.h"

/* A sender's memo and a receiver's, updated as the two sides do. */
struct pair {
  struct ucx_meta_memo sender, receiver;
};

static void pair_free(struct pair* p) {
  ucx_meta_memo_free(&p->sender);
  ucx_meta_memo_free(&p->receiver);
}

/* Sends meta[0..n) as send_message does and receives it as get_next does:
 * returns the patch's size (0: sent whole), and checks that the receiver
 * decodes exactly `meta`. */
static size_t transfer(struct pair* p, const uint8_t* meta, size_t n) {
  struct ucx_bytes msg = {0};
  assert_int_equal(ucx_ctrl_header(&msg, UCX_CTRL_MESSAGE, 7, 0, NULL), 0);
  bool patched = true;
  assert_int_equal(ucx_meta_patch(&msg, &p->sender, meta, n, &patched, NULL), 0);
  size_t size = msg.size - 16;
  if (!patched) {
    assert_int_equal(size, 0); /* nothing left behind */
    assert_int_equal(ucx_bytes_put(&msg, meta, n, NULL), 0);
  }
  assert_int_equal(ucx_meta_remember(&p->sender, meta, n, NULL), 0);
  /* A body after the metadata or the patch is left alone. */
  assert_int_equal(ucx_bytes_put(&msg, "BODY", 4, NULL), 0);
  if (patched) {
    size_t used = 0;
    const struct ucx_bytes* got = NULL;
    struct adr_error e = {{0}};
    int st = ucx_meta_apply(&p->receiver, msg.data + 16, msg.size - 16, &used, &got, "test", 3, &e);
    if (st) fail_msg("%s", e.message);
    assert_int_equal(used, size);
    assert_memory_equal(msg.data + 16 + used, "BODY", 4);
    assert_int_equal(got->size, n);
    assert_memory_equal(got->data, meta, n);
  } else {
    assert_int_equal(ucx_meta_remember(&p->receiver, msg.data + 16, n, NULL), 0);
  }
  ucx_bytes_free(&msg);
  return patched ? size : 0;
}

static void fill(uint8_t* p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(i * 7 + seed);
}

static void test_equal_metadata(void** state) {
  (void)state;
  struct pair p = {0};
  uint8_t a[176];
  fill(a, sizeof(a), 0);
  assert_int_equal(transfer(&p, a, sizeof(a)), 0); /* nothing remembered yet */
  assert_int_equal(transfer(&p, a, sizeof(a)), 8); /* the size and the byte count */
  assert_int_equal(transfer(&p, a, sizeof(a)), 8);
  pair_free(&p);
}

static void test_changed_words(void** state) {
  (void)state;
  struct pair p = {0};
  uint8_t a[176], b[176];
  fill(a, sizeof(a), 0);
  fill(b, sizeof(b), 0);
  transfer(&p, a, sizeof(a));
  b[40] ^= 1; /* one byte: the two words, a run header, 1 */
  assert_int_equal(transfer(&p, b, sizeof(b)), 8 + 8 + 1);
  /* Against b now: a byte 3 on is one run of 4 with the one before. */
  b[40] ^= 1;
  b[43] ^= 0x80;
  assert_int_equal(transfer(&p, b, sizeof(b)), 8 + 8 + 4);
  b[120] ^= 2; /* far away: a second run */
  b[0] ^= 1;   /* and the first and the last byte */
  b[175] ^= 1;
  assert_int_equal(transfer(&p, b, sizeof(b)), 8 + 3 * 8 + 3);
  pair_free(&p);
}

static void test_sizes_remembered(void** state) {
  (void)state;
  struct pair p = {0};
  /* Batches alternating between shapes (an empty batch's metadata is
   * shorter: zero fields are left out) patch against their own size. */
  uint8_t m[UCX_META_MEMO + 1][64];
  for (unsigned k = 0; k <= UCX_META_MEMO; k++) fill(m[k], sizeof(m[k]), k);
  assert_int_equal(transfer(&p, m[0], 64), 0);
  assert_int_equal(transfer(&p, m[1], 40), 0);
  assert_int_equal(transfer(&p, m[0], 64), 8);
  assert_int_equal(transfer(&p, m[1], 40), 8);
  /* UCX_META_MEMO sizes are remembered; one more forgets the least
   * recently used (40 was used last, 64 before it). */
  for (unsigned k = 2; k < UCX_META_MEMO; k++) assert_int_equal(transfer(&p, m[k], 40 - k), 0);
  assert_int_equal(transfer(&p, m[0], 64), 8);
  assert_int_equal(transfer(&p, m[UCX_META_MEMO], 20), 0); /* forgets 40 */
  assert_int_equal(transfer(&p, m[1], 40), 0);
  assert_int_equal(transfer(&p, m[0], 64), 8);
  pair_free(&p);
}

static void test_no_patch(void** state) {
  (void)state;
  struct pair p = {0};
  uint8_t a[64], b[64];
  for (size_t i = 0; i < sizeof(a); i++) {
    a[i] = (uint8_t)i;
    b[i] = (uint8_t)~i;
  }
  transfer(&p, a, sizeof(a));
  /* Everything changed: the patch would be larger. */
  assert_int_equal(transfer(&p, b, sizeof(b)), 0);
  pair_free(&p);
}

/* Applies `patch` with 32 bytes of zeros remembered: the status, and the
 * metadata is never written outside its 32 bytes. */
static int apply(const void* patch, size_t n, bool remembered, char* message) {
  struct ucx_meta_memo memo = {0};
  uint8_t zeros[32] = {0};
  if (remembered) assert_int_equal(ucx_meta_remember(&memo, zeros, sizeof(zeros), NULL), 0);
  /* Room after the metadata that a bad run could write to. */
  assert_int_equal(ucx_bytes_put(&memo.slot[0], zeros, 8, NULL), 0);
  memo.slot[0].size -= 8;
  size_t used = 0;
  const struct ucx_bytes* got = NULL;
  struct adr_error e = {{0}};
  int st = ucx_meta_apply(&memo, patch, n, &used, &got, "test", 9, &e);
  for (size_t i = 32; remembered && i < 40; i++) assert_int_equal(memo.slot[0].data[i], 0);
  if (st == 0) assert_int_equal(used, n);
  strcpy(message, e.message);
  ucx_meta_memo_free(&memo);
  return st;
}

static void test_bad_patches(void** state) {
  (void)state;
  char m[1024];
  uint32_t ok[] = {32, 12, 10, 4, 0xffffffffu};
  assert_int_equal(apply(ok, sizeof(ok), true, m), 0);
  /* A size not remembered. */
  assert_int_equal(apply(ok, sizeof(ok), false, m), EPROTO);
  assert_non_null(strstr(m, "message 9"));
  assert_non_null(strstr(m, "no record batch before it had metadata of that size"));
  uint32_t other[] = {31, 12, 10, 4, 0xffffffffu};
  assert_int_equal(apply(other, sizeof(other), true, m), EPROTO);
  /* The count says more than the message holds; no words at all. */
  uint32_t past[] = {32, 100, 0, 1, 0xff};
  assert_int_equal(apply(past, sizeof(past), true, m), EPROTO);
  assert_non_null(strstr(m, "past its message"));
  assert_int_equal(apply(ok, 7, true, m), EPROTO);
  /* A run header cut short. */
  uint32_t cut[] = {32, 4, 0};
  assert_int_equal(apply(cut, sizeof(cut), true, m), EPROTO);
  assert_non_null(strstr(m, "truncated"));
  /* Runs outside the metadata: past its end, wrapping, longer than the
   * patch. */
  uint32_t over[] = {32, 12, 30, 4, 0xffffffffu};
  assert_int_equal(apply(over, sizeof(over), true, m), EPROTO);
  assert_non_null(strstr(m, "outside the 32-byte metadata"));
  uint32_t wrap[] = {32, 12, 0xfffffffcu, 4, 0xffffffffu};
  assert_int_equal(apply(wrap, sizeof(wrap), true, m), EPROTO);
  uint32_t longer[] = {32, 12, 0, 8, 0xffffffffu};
  assert_int_equal(apply(longer, sizeof(longer), true, m), EPROTO);
  /* A run of no bytes, and a run that goes back. */
  uint32_t empty[] = {32, 8, 4, 0};
  assert_int_equal(apply(empty, sizeof(empty), true, m), EPROTO);
  uint32_t back[] = {32, 24, 8, 4, 1, 4, 4, 2};
  assert_int_equal(apply(back, sizeof(back), true, m), EPROTO);
  uint32_t forward[] = {32, 24, 4, 4, 1, 8, 4, 2};
  assert_int_equal(apply(forward, sizeof(forward), true, m), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_equal_metadata),   cmocka_unit_test(test_changed_words),
      cmocka_unit_test(test_sizes_remembered), cmocka_unit_test(test_no_patch),
      cmocka_unit_test(test_bad_patches),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
