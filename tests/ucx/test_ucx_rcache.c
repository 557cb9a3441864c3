/* SPDX-License-Identifier: Apache-2.0
 *
 * The UCX module's registration cache (ucx/ucx_rcache.c), compiled into
 * the test: a range registered once is handed out again while its memory
 * stays mapped, and never once the memory was unmapped, also when new
 * memory is mapped at the same address (a stale registration there would
 * describe pages that are gone). Skips (77) when UCX's memory hooks are
 * not available (then nothing is cached).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "../../ucx/ucx_internal.h"

#define CHECK(c)                                                            \
  do {                                                                      \
    if (!(c)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
      exit(1);                                                              \
    }                                                                       \
  } while (0)

/* ucx_rcache.c's one dependency on ucx_conn.c. */
int ucx_status_error(struct adr_error* error, const char* op, ucs_status_t status,
                     const char* what) {
  return adr_error_set(error, EIO, "[%s][ucx] %s: %s", op, what, ucs_status_string(status));
}

static struct ucx_rcache_stats stats(struct ucx_rcache* c) {
  struct ucx_rcache_stats s;
  ucx_rcache_stats(c, &s);
  return s;
}

int main(void) {
  ucp_config_t* config;
  CHECK(ucp_config_read(NULL, NULL, &config) == UCS_OK);
  ucp_params_t params = {0};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG;
  ucp_context_h ctx;
  CHECK(ucp_init(&params, config, &ctx) == UCS_OK);
  ucp_config_release(config);
  struct ucx_rcache* c;
  CHECK(ucx_rcache_create(ctx, &c) == 0);
  if (!stats(c).caching) {
    fprintf(stderr, "UCX memory hooks unavailable: nothing is cached; skipped\n");
    ucx_rcache_destroy(c);
    ucp_cleanup(ctx);
    return 77;
  }
  struct adr_error err;
  size_t mib = (size_t)1 << 20;

  /* A region inside a reservation, so it can be mapped again at the same
   * address. */
  uint8_t* base = mmap(NULL, 4 * mib, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(base != MAP_FAILED);
  uint8_t* p = base + mib;
  CHECK(mmap(p, mib, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == p);
  memset(p, 1, mib);

  struct ucx_reg *r1, *r2, *r3;
  CHECK(ucx_rcache_get(c, p, mib, &r1, "test", &err) == 0);
  CHECK(stats(c).maps == 1);
  ucx_rcache_put(c, r1);
  /* A range inside it: the same registration. */
  CHECK(ucx_rcache_get(c, p + 4096, 64 << 10, &r2, "test", &err) == 0);
  CHECK(r2 == r1 && stats(c).maps == 1 && stats(c).hits == 1);
  ucx_rcache_put(c, r2);

  /* Unmapped and mapped again at the same address: a new registration. */
  CHECK(munmap(p, mib) == 0);
  CHECK(stats(c).invalidated == 1);
  CHECK(mmap(p, mib, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == p);
  CHECK(ucx_rcache_get(c, p, mib, &r3, "test", &err) == 0);
  CHECK(stats(c).maps == 2 && stats(c).hits == 1);

  /* Unmapped while in use: stale at once, dropped when put back. */
  CHECK(munmap(p, mib) == 0);
  CHECK(stats(c).invalidated == 2);
  CHECK(mmap(p, mib, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == p);
  struct ucx_reg* r4;
  CHECK(ucx_rcache_get(c, p, mib, &r4, "test", &err) == 0);
  CHECK(r4 != r3 && stats(c).maps == 3);
  ucx_rcache_put(c, r3);
  ucx_rcache_put(c, r4);
  CHECK(munmap(base, 4 * mib) == 0);

  /* The allocator's way: a large block freed (glibc unmaps it) and
   * allocated again, often at the same address. (Under ASan the block
   * stays mapped in its quarantine and the next one is elsewhere: then
   * there is nothing to invalidate.) */
  size_t big = 64 * mib;
  void* m1 = malloc(big);
  CHECK(m1 != NULL);
  memset(m1, 2, big);
  struct ucx_reg* r5;
  CHECK(ucx_rcache_get(c, m1, big, &r5, "test", &err) == 0);
  ucx_rcache_put(c, r5);
  uint64_t maps = stats(c).maps, inval = stats(c).invalidated;
  free(m1);
  bool unmapped = stats(c).invalidated == inval + 1;
  void* m2 = malloc(big);
  CHECK(m2 != NULL);
  struct ucx_reg* r6;
  CHECK(ucx_rcache_get(c, m2, big, &r6, "test", &err) == 0);
  if (unmapped || m2 != m1) CHECK(stats(c).maps == maps + 1);
  ucx_rcache_put(c, r6);
  /* Still mapped: the next get is a hit. */
  CHECK(ucx_rcache_get(c, m2, big, &r6, "test", &err) == 0);
  CHECK(stats(c).maps == maps + 1);
  ucx_rcache_put(c, r6);
  free(m2);

  ucx_rcache_destroy(c);
  ucp_cleanup(ctx);
  printf("ok\n");
  return 0;
}
