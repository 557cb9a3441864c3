/* SPDX-License-Identifier: Apache-2.0
 *
 * Conformance: adr_alloc / adr_free — sizes, alignment, uniqueness, limits.
 */
#include <stdlib.h>

#include "conformance.h"

struct conf_range {
  uintptr_t begin, end;
  size_t index;
};

static int conf_range_cmp(const void* a, const void* b) {
  const struct conf_range* x = a;
  const struct conf_range* y = b;
  return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* Live allocations: all start addresses distinct, non-empty ranges
 * disjoint. */
static void conf_expect_disjoint(struct conf_range* r, size_t n) {
  qsort(r, n, sizeof(*r), conf_range_cmp);
  size_t widest = 0; /* the range reaching furthest so far */
  for (size_t i = 1; i < n; i++) {
    if (r[i].begin == r[i - 1].begin)
      fail_msg("allocations %zu and %zu share the address 0x%jx", r[i - 1].index, r[i].index,
               (uintmax_t)r[i].begin);
    if (r[i - 1].end > r[widest].end) widest = i - 1;
    if (r[widest].end > r[i].begin)
      fail_msg("allocations %zu [0x%jx, 0x%jx) and %zu [0x%jx, 0x%jx) overlap", r[widest].index,
               (uintmax_t)r[widest].begin, (uintmax_t)r[widest].end, r[i].index,
               (uintmax_t)r[i].begin, (uintmax_t)r[i].end);
  }
}

void test_alloc_sizes_and_alignments(void** state) {
  (void)state;
  static const size_t sizes[] = {0, 1, 63, 64, 4097, 64 * CONF_MIB};
  static const size_t aligns[] = {0, 64, 128, 4096};
  enum { NS = sizeof(sizes) / sizeof(sizes[0]), NA = sizeof(aligns) / sizeof(aligns[0]) };
  void* p[NS * NA];
  struct conf_range r[NS * NA];

  /* All live at once, so uniqueness and overlap are checked among them. */
  for (size_t s = 0; s < NS; s++) {
    for (size_t a = 0; a < NA; a++) {
      size_t k = s * NA + a;
      p[k] = conf_dev_alloc(g_conf.dev, sizes[s], aligns[a], NULL); /* checks alignment */
      r[k] = (struct conf_range){conf_addr(p[k]), conf_addr(p[k]) + sizes[s], k};
    }
  }
  conf_expect_disjoint(r, NS * NA);

  /* Every byte of every allocation holds its own data: write them all, then
   * read them all back. */
  uint8_t* h = conf_host_alloc(64 * CONF_MIB);
  for (size_t k = 0; k < NS * NA; k++) {
    size_t n = sizes[k / NA];
    if (n == 0) continue;
    conf_fill(h, n, (uint32_t)k + 100);
    conf_upload(g_conf.dev, p[k], h, n);
  }
  for (size_t k = 0; k < NS * NA; k++) {
    size_t n = sizes[k / NA];
    if (n == 0) continue;
    memset(h, 0, n);
    conf_download(g_conf.dev, h, p[k], n);
    char what[96];
    snprintf(what, sizeof(what), "allocation of %zu bytes, alignment %zu", n, aligns[k % NA]);
    conf_expect_pattern(h, n, (uint32_t)k + 100, what);
  }
  conf_host_free(h);

  for (size_t k = 0; k < NS * NA; k++) conf_dev_free(g_conf.dev, p[k], sizes[k / NA], NULL);
}

void test_alloc_zero_size(void** state) {
  (void)state;
  static const size_t aligns[] = {0, 0, 64, 4096};
  enum { N = sizeof(aligns) / sizeof(aligns[0]) };
  void* p[N];
  for (size_t i = 0; i < N; i++) {
    p[i] = conf_dev_alloc(g_conf.dev, 0, aligns[i], NULL); /* non-NULL, aligned */
    for (size_t j = 0; j < i; j++)
      if (p[i] == p[j]) fail_msg("size-0 allocations %zu and %zu both returned %p", j, i, p[i]);
  }
  /* A size-0 allocation is freed with size 0, and only with size 0. */
  ASSERT_ERR(adr_free(g_conf.dev, p[0], 1, NULL, CONF_ERR), EINVAL, "adr_free");
  for (size_t i = 0; i < N; i++) conf_dev_free(g_conf.dev, p[i], 0, NULL);
}

void test_alloc_bad_alignment(void** state) {
  (void)state;
  static const size_t bad[] = {3, 48, 65, 96, 100, 4095, 4097, 3 * 4096, SIZE_MAX};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    void* p = NULL;
    ASSERT_ERR(adr_alloc(g_conf.dev, 64, bad[i], NULL, &p, CONF_ERR), EINVAL, "adr_alloc");
    ASSERT_ERR(adr_alloc(g_conf.dev, 0, bad[i], NULL, &p, CONF_ERR), EINVAL, "adr_alloc");
  }
  /* Powers of two below the 64-byte minimum are valid and give 64. */
  for (size_t a = 1; a < ADR_MIN_ALIGNMENT; a *= 2) {
    void* p = conf_dev_alloc(g_conf.dev, 100, a, NULL);
    assert_int_equal(conf_addr(p) % ADR_MIN_ALIGNMENT, 0);
    conf_dev_free(g_conf.dev, p, 100, NULL);
  }
}

void test_alloc_size_overflow(void** state) {
  (void)state;
  struct {
    size_t size, align;
  } cases[] = {
      {SIZE_MAX, 0},         {SIZE_MAX, 4096},      {SIZE_MAX - 10, 4096}, {SIZE_MAX - 63, 64},
      {SIZE_MAX / 2 + 1, 0}, {1, SIZE_MAX / 2 + 1}, /* a power of two no allocator can honour */
  };
  struct adr_stream* s = conf_stream_create(g_conf.dev);
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    void* p = NULL;
    ASSERT_ERR2(adr_alloc(g_conf.dev, cases[i].size, cases[i].align, NULL, &p, CONF_ERR), EOVERFLOW,
                ENOMEM, "adr_alloc");
    ASSERT_ERR2(adr_alloc(g_conf.dev, cases[i].size, cases[i].align, s, &p, CONF_ERR), EOVERFLOW,
                ENOMEM, "adr_alloc");
  }
  ASSERT_OK(adr_stream_synchronize(s, CONF_ERR));
  conf_stream_destroy(s);

  /* The device is still fine afterwards. */
  uint8_t h[256], back[256];
  conf_fill(h, sizeof(h), 7);
  void* p = conf_dev_alloc(g_conf.dev, sizeof(h), 0, NULL);
  conf_upload(g_conf.dev, p, h, sizeof(h));
  conf_download(g_conf.dev, back, p, sizeof(back));
  conf_expect_pattern(back, sizeof(back), 7, "allocation after failed huge allocations");
  conf_dev_free(g_conf.dev, p, sizeof(h), NULL);
}

void test_alloc_many(void** state) {
  (void)state;
  enum { N = 1000, STAMP = 16 };
  void** p = conf_host_alloc(N * sizeof(*p));
  size_t* size = conf_host_alloc(N * sizeof(*size));
  struct conf_range* r = conf_host_alloc(N * sizeof(*r));
  uint8_t stamp[STAMP], back[STAMP];

  for (size_t i = 0; i < N; i++) {
    size[i] = 1 + (i * 37) % 300;
    p[i] = conf_dev_alloc(g_conf.dev, size[i], (i % 3) ? 0 : 128, NULL);
    r[i] = (struct conf_range){conf_addr(p[i]), conf_addr(p[i]) + size[i], i};
    size_t n = size[i] < STAMP ? size[i] : STAMP;
    conf_fill(stamp, n, (uint32_t)i);
    conf_upload(g_conf.dev, p[i], stamp, n);
  }
  conf_expect_disjoint(r, N);
  for (size_t i = 0; i < N; i++) {
    size_t n = size[i] < STAMP ? size[i] : STAMP;
    conf_download(g_conf.dev, back, p[i], n);
    conf_expect_pattern(back, n, (uint32_t)i, "stamp of one of 1000 live allocations");
  }
  /* Free out of allocation order: odd ones, then even ones from the top. */
  for (size_t i = 1; i < N; i += 2) conf_dev_free(g_conf.dev, p[i], size[i], NULL);
  for (size_t i = N; i-- > 0;)
    if (i % 2 == 0) conf_dev_free(g_conf.dev, p[i], size[i], NULL);

  conf_host_free(r);
  conf_host_free(size);
  conf_host_free(p);
}
