/* SPDX-License-Identifier: Apache-2.0
 *
 * The registration cache (ucx_internal.h): ucp_mem_map results kept by
 * address range, so that a stream of batches from the same memory (a
 * producer's recycled buffers, a receiver's pooled bodies) registers it
 * once instead of once per batch.
 *
 * A registration stays valid only while the pages it describes stay
 * mapped: memory unmapped and mapped again at the same address (free() of
 * a large block, then malloc()) is other memory. UCX's memory hooks (UCM)
 * report every unmapping (munmap, mremap, madvise(DONTNEED), brk shrink,
 * shmdt) to ucm_set_event_handler's callbacks before it happens; the
 * callback marks the entries it overlaps stale, and a stale entry is
 * never handed out again (it is unmapped from UCX once nothing uses it).
 * Without the hooks (UCX_MEM_EVENTS=no, or the hooks fail to install)
 * nothing is cached: every get maps and every put unmaps, as before.
 *
 * Locking: the callback runs on whichever thread unmaps memory, from
 * inside the allocator, so it only takes the cache's mutex and flips
 * flags. The mutex is never held across a call into UCX or the allocator
 * (ucp_mem_map and free may unmap memory and so call back in).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <ucm/api/ucm.h>

#include "ucx_internal.h"

/* Entries kept at most; the least recently used idle one goes first. */
#define RCACHE_MAX 64

struct ucx_reg {
  uint8_t* addr;
  size_t len;
  ucp_mem_h memh;
  int refs;      /* gets not yet put */
  bool stale;    /* its memory was unmapped (or is going to be) */
  bool cached;   /* in the cache's list (false: a one-off registration) */
  uint64_t used; /* last get, for eviction */
  struct ucx_reg* next;
};

struct ucx_rcache {
  ucp_context_h context;
  pthread_mutex_t mu;
  bool hooked; /* the UCM callback is installed: caching is safe */
  struct ucx_reg* list;
  size_t n;
  uint64_t clock;
  struct ucx_rcache_stats stats;
};

static void on_unmapped(ucm_event_type_t type, ucm_event_t* event, void* arg) {
  struct ucx_rcache* c = arg;
  uint8_t* lo;
  size_t len;
  if (type == UCM_EVENT_VM_UNMAPPED) {
    lo = event->vm_unmapped.address;
    len = event->vm_unmapped.size;
  } else {
    lo = event->mem_type.address;
    len = event->mem_type.size;
  }
  uint8_t* hi = lo + len;
  pthread_mutex_lock(&c->mu);
  for (struct ucx_reg* r = c->list; r != NULL; r = r->next)
    if (!r->stale && r->addr < hi && lo < r->addr + r->len) {
      r->stale = true;
      c->stats.invalidated++;
    }
  pthread_mutex_unlock(&c->mu);
}

int ucx_rcache_create(ucp_context_h context, struct ucx_rcache** out) {
  struct ucx_rcache* c = calloc(1, sizeof(*c));
  if (c == NULL) return ENOMEM;
  if (pthread_mutex_init(&c->mu, NULL) != 0) {
    free(c);
    return ENOMEM;
  }
  c->context = context;
  c->hooked = ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED | UCM_EVENT_MEM_TYPE_FREE, 1000,
                                    on_unmapped, c) == UCS_OK;
  *out = c;
  return 0;
}

/* Unlinks the idle stale entries (and, with `evict`, the least recently
 * used idle one) into *out; called with the mutex held. */
static void collect(struct ucx_rcache* c, bool evict, struct ucx_reg** out) {
  struct ucx_reg** lru = NULL;
  for (struct ucx_reg** p = &c->list; *p != NULL;) {
    struct ucx_reg* r = *p;
    if (r->refs == 0 && r->stale) {
      *p = r->next;
      c->n--;
      r->next = *out;
      *out = r;
      evict = false;
      continue;
    }
    if (r->refs == 0 && (lru == NULL || r->used < (*lru)->used)) lru = p;
    p = &r->next;
  }
  if (evict && lru != NULL) {
    struct ucx_reg* r = *lru;
    *lru = r->next;
    c->n--;
    r->next = *out;
    *out = r;
  }
}

static void drop(struct ucx_rcache* c, struct ucx_reg* list) {
  while (list != NULL) {
    struct ucx_reg* r = list;
    list = r->next;
    ucp_mem_unmap(c->context, r->memh);
    free(r);
  }
}

int ucx_rcache_get(struct ucx_rcache* c, void* addr, size_t len, struct ucx_reg** out,
                   const char* op, struct adr_error* error) {
  uint8_t* a = addr;
  if (c->hooked) {
    pthread_mutex_lock(&c->mu);
    for (struct ucx_reg* r = c->list; r != NULL; r = r->next)
      if (!r->stale && r->addr <= a && a + len <= r->addr + r->len) {
        r->refs++;
        r->used = ++c->clock;
        c->stats.hits++;
        pthread_mutex_unlock(&c->mu);
        *out = r;
        return 0;
      }
    pthread_mutex_unlock(&c->mu);
  }
  struct ucx_reg* r = calloc(1, sizeof(*r));
  if (r == NULL) return adr_error_set(error, ENOMEM, "[%s][ucx] out of memory", op);
  ucp_mem_map_params_t mp = {0};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  mp.address = addr;
  mp.length = len;
  ucs_status_t us = ucp_mem_map(c->context, &mp, &r->memh);
  if (us != UCS_OK) {
    free(r);
    return ucx_status_error(error, op, us, "ucp_mem_map");
  }
  r->addr = a;
  r->len = len;
  r->refs = 1;
  struct ucx_reg* gone = NULL;
  pthread_mutex_lock(&c->mu);
  c->stats.maps++;
  if (c->hooked) {
    r->cached = true;
    r->used = ++c->clock;
    collect(c, c->n >= RCACHE_MAX, &gone);
    r->next = c->list;
    c->list = r;
    c->n++;
  }
  pthread_mutex_unlock(&c->mu);
  drop(c, gone);
  *out = r;
  return 0;
}

ucp_mem_h ucx_reg_memh(const struct ucx_reg* reg) {
  return reg->memh;
}

void ucx_rcache_put(struct ucx_rcache* c, struct ucx_reg* reg) {
  if (reg == NULL) return;
  if (!reg->cached) {
    ucp_mem_unmap(c->context, reg->memh);
    free(reg);
    return;
  }
  struct ucx_reg* gone = NULL;
  pthread_mutex_lock(&c->mu);
  reg->refs--;
  if (reg->refs == 0 && reg->stale) collect(c, false, &gone);
  pthread_mutex_unlock(&c->mu);
  drop(c, gone);
}

void ucx_rcache_stats(struct ucx_rcache* c, struct ucx_rcache_stats* out) {
  pthread_mutex_lock(&c->mu);
  *out = c->stats;
  out->caching = c->hooked;
  pthread_mutex_unlock(&c->mu);
}

void ucx_rcache_destroy(struct ucx_rcache* c) {
  if (c == NULL) return;
  if (c->hooked)
    ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED | UCM_EVENT_MEM_TYPE_FREE, on_unmapped, c);
  /* Every registration has been put back by now (streams end before
   * their worker goes). */
  struct ucx_reg* list = c->list;
  c->list = NULL;
  drop(c, list);
  pthread_mutex_destroy(&c->mu);
  free(c);
}
