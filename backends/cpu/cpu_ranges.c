/* SPDX-License-Identifier: Apache-2.0
 *
 * The CPU backend's address map (contract: cpu_ranges.h). A treap: a
 * binary search tree on base that is also a max-heap on a priority drawn
 * from a hash of the base, so its shape is that of a random insertion
 * order (expected depth O(log n)) even when the allocator hands out
 * ascending addresses. The operations are iterative: insert descends to
 * the first node of lower priority and splits that subtree around the new
 * key; remove replaces a node by the merge of its children.
 */
#include "cpu_ranges.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

struct cpu_range_node {
  uintptr_t base;
  size_t size;
  uint64_t prio;
  struct cpu_range_node* left;
  struct cpu_range_node* right; /* or the next spare node */
};

#define SLAB_NODES 1024u

struct slab {
  struct slab* next;
  struct cpu_range_node nodes[SLAB_NODES];
};

/* A node from the spare list, growing it by a slab when empty. Under the
 * write lock. */
static struct cpu_range_node* node_new(struct cpu_ranges* map) {
  if (map->spare == NULL) {
    struct slab* s = malloc(sizeof(*s));
    if (s == NULL) return NULL;
    s->next = map->slabs;
    map->slabs = s;
    for (unsigned i = 0; i < SLAB_NODES; i++) {
      s->nodes[i].right = map->spare;
      map->spare = &s->nodes[i];
    }
  }
  struct cpu_range_node* n = map->spare;
  map->spare = n->right;
  return n;
}

static void node_release(struct cpu_ranges* map, struct cpu_range_node* n) {
  n->right = map->spare;
  map->spare = n;
}

static uint64_t prio_of(uintptr_t base) {
  uint64_t z = (uint64_t)base + UINT64_C(0x9E3779B97F4A7C15);
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}

/* The node with the greatest base <= addr, or NULL. */
static struct cpu_range_node* floor_node(struct cpu_range_node* t, uintptr_t addr) {
  struct cpu_range_node* best = NULL;
  while (t != NULL) {
    if (t->base <= addr) {
      best = t;
      t = t->right;
    } else {
      t = t->left;
    }
  }
  return best;
}

/* The node with the smallest base > addr, or NULL. */
static struct cpu_range_node* above_node(struct cpu_range_node* t, uintptr_t addr) {
  struct cpu_range_node* best = NULL;
  while (t != NULL) {
    if (t->base > addr) {
      best = t;
      t = t->left;
    } else {
      t = t->right;
    }
  }
  return best;
}

static struct cpu_range_node* merge(struct cpu_range_node* l, struct cpu_range_node* r) {
  struct cpu_range_node* root = NULL;
  struct cpu_range_node** link = &root;
  while (l != NULL && r != NULL) {
    if (l->prio > r->prio) {
      *link = l;
      link = &l->right;
      l = l->right;
    } else {
      *link = r;
      link = &r->left;
      r = r->left;
    }
  }
  *link = l != NULL ? l : r;
  return root;
}

int cpu_ranges_insert(struct cpu_ranges* map, uintptr_t base, size_t size) {
  if (size == 0) return EINVAL;
  if (base + size < base) return EOVERFLOW;
  pthread_rwlock_wrlock(&map->lock);
  struct cpu_range_node* below = floor_node(map->root, base);
  struct cpu_range_node* above = above_node(map->root, base);
  if ((below != NULL && below->base + below->size > base) ||
      (above != NULL && above->base < base + size)) {
    pthread_rwlock_unlock(&map->lock);
    return EEXIST;
  }
  struct cpu_range_node* n = node_new(map);
  if (n == NULL) {
    pthread_rwlock_unlock(&map->lock);
    return ENOMEM;
  }
  n->base = base;
  n->size = size;
  n->prio = prio_of(base);
  struct cpu_range_node** link = &map->root;
  while (*link != NULL && (*link)->prio >= n->prio)
    link = base < (*link)->base ? &(*link)->left : &(*link)->right;
  struct cpu_range_node* t = *link;
  struct cpu_range_node** l = &n->left;
  struct cpu_range_node** r = &n->right;
  while (t != NULL) {
    if (t->base < base) {
      *l = t;
      l = &t->right;
      t = t->right;
    } else {
      *r = t;
      r = &t->left;
      t = t->left;
    }
  }
  *l = *r = NULL;
  *link = n;
  map->count++;
  pthread_rwlock_unlock(&map->lock);
  return 0;
}

int cpu_ranges_remove(struct cpu_ranges* map, uintptr_t base, size_t* out_size) {
  pthread_rwlock_wrlock(&map->lock);
  struct cpu_range_node** link = &map->root;
  while (*link != NULL && (*link)->base != base)
    link = base < (*link)->base ? &(*link)->left : &(*link)->right;
  struct cpu_range_node* n = *link;
  if (n == NULL) {
    pthread_rwlock_unlock(&map->lock);
    return ENOENT;
  }
  *link = merge(n->left, n->right);
  map->count--;
  if (out_size != NULL) *out_size = n->size;
  node_release(map, n);
  pthread_rwlock_unlock(&map->lock);
  return 0;
}

int cpu_ranges_find(struct cpu_ranges* map, uintptr_t addr, size_t len, uintptr_t* out_base,
                    size_t* out_size) {
  pthread_rwlock_rdlock(&map->lock);
  struct cpu_range_node* n = floor_node(map->root, addr);
  int st = ENOENT;
  if (n != NULL && addr - n->base < n->size) {
    st = len > n->size - (addr - n->base) ? ERANGE : 0;
    if (out_base != NULL) *out_base = n->base;
    if (out_size != NULL) *out_size = n->size;
  }
  pthread_rwlock_unlock(&map->lock);
  return st;
}

size_t cpu_ranges_count(struct cpu_ranges* map) {
  pthread_rwlock_rdlock(&map->lock);
  size_t n = map->count;
  pthread_rwlock_unlock(&map->lock);
  return n;
}

void cpu_ranges_clear(struct cpu_ranges* map) {
  pthread_rwlock_wrlock(&map->lock);
  for (struct slab* s = map->slabs; s != NULL;) {
    struct slab* next = s->next;
    free(s);
    s = next;
  }
  map->slabs = NULL;
  map->spare = NULL;
  map->root = NULL;
  map->count = 0;
  pthread_rwlock_unlock(&map->lock);
}

/* In-order walk with an explicit stack (depth is bounded by the count). */
int cpu_ranges_check(struct cpu_ranges* map) {
  pthread_rwlock_rdlock(&map->lock);
  int st = 0;
  size_t seen = 0;
  struct cpu_range_node** stack = malloc((map->count + 1) * sizeof(*stack));
  if (stack == NULL) {
    pthread_rwlock_unlock(&map->lock);
    return ENOMEM;
  }
  size_t depth = 0;
  struct cpu_range_node* t = map->root;
  bool have_prev = false;
  uintptr_t prev_end = 0;
  while ((t != NULL || depth > 0) && st == 0) {
    while (t != NULL && st == 0) {
      if ((t->left != NULL && t->left->prio > t->prio) ||
          (t->right != NULL && t->right->prio > t->prio) || depth > map->count)
        st = EPROTO;
      else
        stack[depth++] = t;
      t = t->left;
    }
    if (st != 0 || depth == 0) break;
    t = stack[--depth];
    if (have_prev && t->base < prev_end) st = EPROTO;
    have_prev = true;
    prev_end = t->base + t->size;
    seen++;
    t = t->right;
  }
  if (st == 0 && seen != map->count) st = EPROTO;
  free(stack);
  pthread_rwlock_unlock(&map->lock);
  return st;
}
