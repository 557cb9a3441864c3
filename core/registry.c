/* SPDX-License-Identifier: Apache-2.0
 *
 * The registry: which backends exist (the in-tree manifest plus third-party
 * libraries found in ADR_PLUGIN_PATH), which device type each serves, and
 * the table of device objects with the lookups that fill it (adr_device_get,
 * adr_device_default, adr_device_adopt, the enumeration, adr_pointer_query);
 * device.c makes and releases the objects themselves.
 *
 * Locking: one mutex guards loading backends and creating devices; it is
 * taken by adr_device_get and friends, never by the operations on a device
 * (the hot path holds a struct adr_device* and reads only immutable
 * fields). Device objects are never freed, not even at exit, so a
 * pointer handed out stays valid for the life of the process.
 *
 * Process exit (docs/lifetime.md): `teardown` drains every live stream,
 * releases the devices' native objects and memory, then points each device
 * at `shutdown_vtable`, whose slots refuse with ESHUTDOWN; the device
 * structs, stream and event wrappers and allocation tables stay allocated,
 * so a call made later (an atexit handler or static destructor that runs
 * after the teardown) gets ESHUTDOWN instead of touching freed state.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"

#define MAX_BACKENDS 32
#define MAX_TYPE 32 /* ArrowDeviceType values are small positive integers */

static pthread_mutex_t registry_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct adr__backend backends[MAX_BACKENDS];
static size_t backend_count;
static bool manifest_done;

struct type_devices {
  struct adr_device** items;
  size_t cap;
  int64_t adopted; /* ids handed to adopted devices after the enumerated ones */
};
static struct type_devices devices_by_type[MAX_TYPE];

/* Enumeration order, filled by load_all_locked. */
static struct adr_device** enumeration;
static size_t enumeration_count;
static bool enumerated;

static _Atomic(struct adr_device*) default_device;

_Atomic int adr__shutdown_flag;

/* Live created streams, for the drain at exit. A list under its own lock:
 * only adr_stream_create/destroy and the teardown take it, never a call
 * that uses a stream. */
static pthread_mutex_t streams_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct adr_stream* live_streams;

void adr__stream_track(struct adr_stream* s) {
  pthread_mutex_lock(&streams_mutex);
  s->live_prev = NULL;
  s->live_next = live_streams;
  if (live_streams != NULL) live_streams->live_prev = s;
  live_streams = s;
  pthread_mutex_unlock(&streams_mutex);
}

void adr__stream_untrack(struct adr_stream* s) {
  pthread_mutex_lock(&streams_mutex);
  if (s->live_prev != NULL)
    s->live_prev->live_next = s->live_next;
  else if (live_streams == s)
    live_streams = s->live_next;
  if (s->live_next != NULL) s->live_next->live_prev = s->live_prev;
  s->live_prev = s->live_next = NULL;
  pthread_mutex_unlock(&streams_mutex);
}

int adr__shutdown_error(struct adr_error* error, const char* op, const struct adr_device* dev) {
  return adr__errorf(error, ESHUTDOWN, op, dev ? dev->backend->name : NULL,
                     "ESHUTDOWN: adr was shut down at process exit%s%s; nothing was done "
                     "(docs/lifetime.md)",
                     dev ? ", with " : "", dev ? dev->name : "");
}

/* Checks every registry entry point makes before touching devices. */
static int enter(const char* op, struct adr_error* error) {
  if (adr__shut_down()) return adr__shutdown_error(error, op, NULL);
  int st = adr__ensure_init(error);
  if (st) return st;
  return adr__fault_env(error);
}

pthread_mutex_t* adr__registry_lock(void) {
  return &registry_mutex;
}

/* The in-tree backends: name, library, device types. ADR_BACKENDS and
 * ADR_DEVICE are matched against this table before anything is opened. */
static const struct {
  const char* name;
  ArrowDeviceType types[3];
} manifest[] = {
    {"cpu", {ARROW_DEVICE_CPU}},
    {"cuda", {ARROW_DEVICE_CUDA, ARROW_DEVICE_CUDA_HOST, ARROW_DEVICE_CUDA_MANAGED}},
    {"hip", {ARROW_DEVICE_ROCM, ARROW_DEVICE_ROCM_HOST}},
    {"opencl", {ARROW_DEVICE_OPENCL}},
    {"vulkan", {ARROW_DEVICE_VULKAN}},
};

struct adr__backend* adr__registry_find(const char* name) {
  for (size_t i = 0; i < backend_count; i++)
    if (strcmp(backends[i].name, name) == 0) return &backends[i];
  return NULL;
}

struct adr__backend* adr__registry_add(const char* name, const char* library, bool in_manifest) {
  if (backend_count == MAX_BACKENDS) {
    adr__log(ADR_LOG_WARN, "loader", "more than %d backends; '%s' ignored", MAX_BACKENDS, name);
    return NULL;
  }
  struct adr__backend* b = &backends[backend_count++];
  memset(b, 0, sizeof(*b));
  snprintf(b->name, sizeof(b->name), "%s", name);
  snprintf(b->library, sizeof(b->library), "%s", library);
  b->in_manifest = in_manifest;
  const struct adr__config* c = adr__config();
  if (!adr__backend_allowed(c->backends_filter, b->name)) {
    b->state = ADR_BACKEND_EXCLUDED;
    snprintf(b->reason, sizeof(b->reason), "excluded by ADR_BACKENDS");
    adr__log(ADR_LOG_DEBUG, "loader", "backend '%s' excluded by ADR_BACKENDS", b->name);
  }
  return b;
}

static void teardown(void);

static void ensure_manifest_locked(void) {
  if (manifest_done) return;
  manifest_done = true;
  for (size_t i = 0; i < sizeof(manifest) / sizeof(manifest[0]); i++) {
    char lib[96];
    snprintf(lib, sizeof(lib), "libadr_%s.so", manifest[i].name);
    struct adr__backend* b = adr__registry_add(manifest[i].name, lib, true);
    for (int t = 0; t < 3 && manifest[i].types[t] != 0; t++)
      b->types[b->type_count++] = manifest[i].types[t];
  }
  atexit(teardown);
}

static bool claims(const struct adr__backend* b, ArrowDeviceType type, size_t* out_index) {
  for (uint32_t i = 0; i < b->type_count; i++) {
    if (b->types[i] == type) {
      if (out_index) *out_index = i;
      return true;
    }
  }
  return false;
}

/* The loaded backend that serves `type`: the first in registry order
 * (manifest order, then third-party in file-name order) that loaded and
 * claims it. Registry lock held. */
static struct adr__backend* owner_locked(ArrowDeviceType type) {
  for (size_t i = 0; i < backend_count; i++)
    if (backends[i].state == ADR_BACKEND_LOADED && claims(&backends[i], type, NULL))
      return &backends[i];
  return NULL;
}

static const char* state_text(int state) {
  switch (state) {
    case ADR_BACKEND_ABSENT:
      return "absent";
    case ADR_BACKEND_EXCLUDED:
      return "excluded";
    case ADR_BACKEND_REJECTED:
      return "rejected";
    case ADR_BACKEND_UNAVAILABLE:
      return "unavailable";
    case ADR_BACKEND_LOADED:
      return "loaded";
    default:
      return "not loaded";
  }
}

static struct adr__backend* backend_for_type_locked(ArrowDeviceType type, struct adr_error* error) {
  ensure_manifest_locked();
  struct adr__backend* candidate = NULL;
  for (size_t i = 0; i < backend_count; i++) {
    struct adr__backend* b = &backends[i];
    if (b->in_manifest && claims(b, type, NULL)) {
      candidate = b;
      adr__loader_load(b);
      if (b->state == ADR_BACKEND_LOADED) return b;
    }
  }
  /* No in-tree backend could serve it: try third-party libraries. */
  adr__loader_discover();
  for (size_t i = 0; i < backend_count; i++) {
    struct adr__backend* b = &backends[i];
    if (b->in_manifest) continue;
    adr__loader_load(b);
    if (b->state == ADR_BACKEND_LOADED && claims(b, type, NULL)) return owner_locked(type);
  }
  const char* tname = adr_device_type_name(type);
  if (candidate != NULL)
    adr__errorf(error, ENODEV, "adr_device_get", NULL, "%s: backend '%s' is %s: %s",
                tname ? tname : "?", candidate->name, state_text(candidate->state),
                candidate->reason);
  else
    adr__errorf(error, ENODEV, "adr_device_get", NULL, "no backend serves device type %d (%s)",
                (int)type, tname ? tname : "unknown");
  return NULL;
}

struct adr__backend* adr__backend_for_type(ArrowDeviceType type, struct adr_error* error) {
  pthread_mutex_lock(&registry_mutex);
  struct adr__backend* b = backend_for_type_locked(type, error);
  pthread_mutex_unlock(&registry_mutex);
  return b;
}

static int grow_type(struct type_devices* td, size_t need) {
  if (need <= td->cap) return 0;
  size_t cap = td->cap ? td->cap : 4;
  while (cap < need) cap *= 2;
  struct adr_device** items = realloc(td->items, cap * sizeof(*items));
  if (items == NULL) return ENOMEM;
  memset(items + td->cap, 0, (cap - td->cap) * sizeof(*items));
  td->items = items;
  td->cap = cap;
  return 0;
}

static int device_get_locked(ArrowDeviceType type, int64_t id, struct adr_device** out,
                             struct adr_error* error) {
  if (type <= 0 || type >= MAX_TYPE)
    return adr__errorf(error, ENODEV, "adr_device_get", NULL, "unknown device type %d", (int)type);
  struct adr__backend* b = backend_for_type_locked(type, error);
  if (b == NULL) return ENODEV;
  struct type_devices* td = &devices_by_type[type];
  if (id >= 0 && (size_t)id < td->cap && td->items[id] != NULL) {
    *out = td->items[id];
    return 0;
  }
  size_t ti = 0;
  claims(b, type, &ti);
  const char* tname = adr_device_type_name(type);
  if (id < 0 || id >= b->device_count[ti])
    return adr__errorf(error, ENODEV, "adr_device_get", b->name,
                       "no device %s:%lld (the backend has %lld device%s of this type)",
                       tname ? tname : "?", (long long)id, (long long)b->device_count[ti],
                       b->device_count[ti] == 1 ? "" : "s");
  if (grow_type(td, (size_t)id + 1) != 0)
    return adr__errorf(error, ENOMEM, "adr_device_get", NULL, "out of memory");
  struct adr_backend_device* handle = NULL;
  int st = adr__dispatch_device_open(b, "adr_device_get", type, id, &handle, error);
  if (st) return st;
  st = adr__device_create(b, "adr_device_get", type, id, handle, &td->items[id], error);
  if (st) return st;
  adr__log(ADR_LOG_INFO, b->name, "opened device %s", td->items[id]->name);
  *out = td->items[id];
  return 0;
}

int adr_device_get(ArrowDeviceType type, int64_t id, struct adr_device** out,
                   struct adr_error* error) {
  if (out == NULL) return adr__errorf(error, EINVAL, "adr_device_get", NULL, "out is NULL");
  int st = enter("adr_device_get", error);
  if (st) return st;
  pthread_mutex_lock(&registry_mutex);
  st = device_get_locked(type, id, out, error);
  pthread_mutex_unlock(&registry_mutex);
  return st;
}

static int load_all_locked(void);

/* ---- selectors: ADR_DEVICE, adr_device_select, adr_device_enumerate ----- */

/* A growing list of devices, each at most once. */
struct devvec {
  struct adr_device** items;
  size_t n, cap;
};

static int devvec_push(struct devvec* v, struct adr_device* d) {
  for (size_t i = 0; i < v->n; i++)
    if (v->items[i] == d) return 0;
  if (v->n == v->cap) {
    size_t cap = v->cap ? v->cap * 2 : 8;
    struct adr_device** items = realloc(v->items, cap * sizeof(*items));
    if (items == NULL) return ENOMEM;
    v->items = items;
    v->cap = cap;
  }
  v->items[v->n++] = d;
  return 0;
}

/* The preference order within an entry that matches several devices
 * (docs/environment.md): discrete GPUs, integrated GPUs, accelerators,
 * other devices, then CPUs. */
static int kind_rank(uint32_t kind) {
  switch (kind) {
    case ADR_DEVICE_KIND_GPU:
      return 0;
    case ADR_DEVICE_KIND_INTEGRATED_GPU:
      return 1;
    case ADR_DEVICE_KIND_ACCELERATOR:
      return 2;
    case ADR_DEVICE_KIND_CPU:
      return 4;
    default:
      return 3;
  }
}

static bool spec_matches(const struct adr__device_spec* s, const struct adr_device* d) {
  if (s->type != 0 && d->type != s->type) return false;
  if (s->id >= 0 && d->id != s->id) return false;
  if (s->kinds != 0 && !(s->kinds & (1u << d->kind))) return false;
  if (s->has_uuid && (!(d->identity & ADR_DEVICE_HAS_UUID) || memcmp(d->uuid, s->uuid, 16) != 0))
    return false;
  return true;
}

/* Appends the devices entry `s` matches to `out`, in preference order
 * (stable: enumeration order within a kind). When it adds none, `e` says
 * why. Only the backend a typed entry names is loaded; "*" and "uuid="
 * entries load every allowed backend. ENOMEM is the only failure.
 * Registry lock held. */
static int entry_matches_locked(const struct adr__device_spec* s, struct devvec* out,
                                struct adr_error* e) {
  size_t first = out->n;
  int st = 0;
  if (s->type != 0 && s->id >= 0) {
    struct adr_device* dev = NULL;
    if (device_get_locked(s->type, s->id, &dev, e) == 0) return devvec_push(out, dev);
    return 0;
  }
  if (s->type != 0) {
    struct adr__backend* b = backend_for_type_locked(s->type, e);
    size_t ti = 0;
    if (b == NULL || !claims(b, s->type, &ti)) return 0;
    bool any = false;
    for (int64_t id = 0; id < b->device_count[ti] && st == 0; id++) {
      struct adr_device* dev = NULL;
      struct adr_error why = {{0}};
      if (device_get_locked(s->type, id, &dev, &why) != 0) {
        *e = why; /* the last device that would not open, if none matches */
        continue;
      }
      any = true;
      if (spec_matches(s, dev)) st = devvec_push(out, dev);
    }
    if (st == 0 && out->n == first && (any || b->device_count[ti] == 0))
      snprintf(e->message, sizeof(e->message), "no device matches");
  } else {
    if (load_all_locked() != 0) return ENOMEM;
    for (size_t i = 0; i < enumeration_count && st == 0; i++)
      if (spec_matches(s, enumeration[i])) st = devvec_push(out, enumeration[i]);
    if (st == 0 && out->n == first) snprintf(e->message, sizeof(e->message), "no device matches");
  }
  /* Stable insertion sort of what this entry added, by kind rank. */
  for (size_t i = first + 1; i < out->n; i++) {
    struct adr_device* d = out->items[i];
    size_t j = i;
    while (j > first && kind_rank(out->items[j - 1]->kind) > kind_rank(d->kind)) {
      out->items[j] = out->items[j - 1];
      j--;
    }
    out->items[j] = d;
  }
  return st;
}

/* Resolves a parsed selector: every entry's matches in order (all), or
 * stops at the first entry that matches (!all). `tried` collects each
 * fruitless entry's reason. ENOMEM is the only failure. Registry lock
 * held. */
static int resolve_locked(const struct adr__selector* sel, bool all, struct devvec* out,
                          char* tried, size_t tried_cap) {
  size_t tlen = 0;
  for (size_t i = 0; i < sel->count && (all || out->n == 0); i++) {
    const struct adr__device_spec* s = &sel->u.devices[i];
    struct adr_error e = {{0}};
    size_t before = out->n;
    int st = entry_matches_locked(s, out, &e);
    if (st) return st;
    if (out->n == before && tlen < tried_cap) {
      tlen += (size_t)snprintf(tried + tlen, tried_cap - tlen, "%s%s: %s", tlen ? "; " : "",
                               s->text, e.message);
    }
  }
  return 0;
}

int adr_device_default(struct adr_device** out, struct adr_error* error) {
  if (out == NULL) return adr__errorf(error, EINVAL, "adr_device_default", NULL, "out is NULL");
  struct adr_device* cached = atomic_load_explicit(&default_device, memory_order_acquire);
  if (cached != NULL) {
    *out = cached;
    return 0;
  }
  int st = enter("adr_device_default", error);
  if (st) return st;
  const struct adr__config* c = adr__config();
  if (c->device_status) {
    if (error) *error = c->device_error;
    return c->device_status;
  }
  struct adr_device* dev = NULL;
  pthread_mutex_lock(&registry_mutex);
  if (c->device_list == NULL) {
    st = device_get_locked(ARROW_DEVICE_CPU, 0, &dev, error);
  } else {
    char tried[1024] = "";
    struct devvec v = {0};
    st = resolve_locked(c->device_list, false, &v, tried, sizeof(tried));
    if (st)
      adr__errorf(error, st, "adr_device_default", NULL, "out of memory");
    else if (v.n == 0)
      st = adr__errorf(error, ENODEV, "adr_device_default", NULL,
                       "no device of ADR_DEVICE is available (%s)", tried);
    else
      dev = v.items[0];
    free(v.items);
  }
  pthread_mutex_unlock(&registry_mutex);
  if (st) return st;
  atomic_store_explicit(&default_device, dev, memory_order_release);
  *out = dev;
  return 0;
}

/* adr_device_select and adr_device_enumerate: parse, then resolve. */
static int select_common(const char* op, const char* selector, bool all, struct devvec* out,
                         struct adr_error* error) {
  int st = enter(op, error);
  if (st) return st;
  struct adr__selector* sel = NULL;
  struct adr_error perr = {{0}};
  st = adr__parse_device_list("selector", selector, &sel, &perr);
  if (st) return adr__errorf(error, st, op, NULL, "%s", perr.message);
  char tried[1024] = "";
  pthread_mutex_lock(&registry_mutex);
  st = resolve_locked(sel, all, out, tried, sizeof(tried));
  pthread_mutex_unlock(&registry_mutex);
  if (st)
    adr__errorf(error, st, op, NULL, "out of memory");
  else if (!all && out->n == 0)
    st = adr__errorf(error, ENODEV, op, NULL, "no device of selector \"%s\" is available (%s)",
                     selector, tried);
  adr__selector_free(sel);
  return st;
}

int adr_device_select(const char* selector, struct adr_device** out, struct adr_error* error) {
  if (selector == NULL || out == NULL)
    return adr__errorf(error, EINVAL, "adr_device_select", NULL, "%s is NULL",
                       selector ? "out" : "selector");
  struct devvec v = {0};
  int st = select_common("adr_device_select", selector, false, &v, error);
  if (st == 0) *out = v.items[0];
  free(v.items);
  return st;
}

int adr_device_enumerate(const char* selector, struct adr_device** out_devices, size_t capacity,
                         size_t* out_count, struct adr_error* error) {
  if (selector == NULL || out_count == NULL || (out_devices == NULL && capacity > 0))
    return adr__errorf(error, EINVAL, "adr_device_enumerate", NULL, "%s is NULL",
                       selector == NULL    ? "selector"
                       : out_count == NULL ? "out_count"
                                           : "out_devices (with a capacity above 0)");
  struct devvec v = {0};
  int st = select_common("adr_device_enumerate", selector, true, &v, error);
  if (st == 0) {
    for (size_t i = 0; i < v.n && i < capacity; i++) out_devices[i] = v.items[i];
    *out_count = v.n;
  }
  free(v.items);
  return st;
}

bool adr__device_known(const struct adr_device* dev) {
  bool found = false;
  pthread_mutex_lock(&registry_mutex);
  for (size_t t = 0; t < MAX_TYPE && !found; t++) {
    const struct type_devices* td = &devices_by_type[t];
    for (size_t i = 0; i < td->cap && !found; i++) found = td->items[i] == dev;
  }
  pthread_mutex_unlock(&registry_mutex);
  return found;
}

/* Loads every allowed backend and opens all their devices, in order. */
static int load_all_locked(void) {
  ensure_manifest_locked();
  adr__loader_discover();
  for (size_t i = 0; i < backend_count; i++) adr__loader_load(&backends[i]);
  if (enumerated) return 0;
  /* Record type conflicts once: the earlier backend keeps the type. */
  for (size_t i = 0; i < backend_count; i++) {
    struct adr__backend* b = &backends[i];
    if (b->state != ADR_BACKEND_LOADED) continue;
    for (uint32_t t = 0; t < b->type_count; t++) {
      struct adr__backend* owner = owner_locked(b->types[t]);
      if (owner != b) {
        const char* tn = adr_device_type_name(b->types[t]);
        size_t n = strlen(b->reason);
        snprintf(b->reason + n, sizeof(b->reason) - n,
                 "%sdevice type %s is served by '%s', which was registered first", n ? "; " : "",
                 tn ? tn : "?", owner->name);
        adr__log(ADR_LOG_WARN, "loader",
                 "backends '%s' and '%s' both claim device type %s: '%s' serves it", owner->name,
                 b->name, tn ? tn : "?", owner->name);
      }
    }
  }
  size_t total = 0;
  for (size_t i = 0; i < backend_count; i++) {
    struct adr__backend* b = &backends[i];
    if (b->state != ADR_BACKEND_LOADED) continue;
    for (uint32_t t = 0; t < b->type_count; t++)
      if (owner_locked(b->types[t]) == b) total += (size_t)b->device_count[t];
  }
  struct adr_device** list = calloc(total ? total : 1, sizeof(*list));
  if (list == NULL) return ENOMEM;
  size_t n = 0;
  for (size_t i = 0; i < backend_count; i++) {
    struct adr__backend* b = &backends[i];
    if (b->state != ADR_BACKEND_LOADED) continue;
    for (uint32_t t = 0; t < b->type_count; t++) {
      if (owner_locked(b->types[t]) != b) continue;
      for (int64_t id = 0; id < b->device_count[t]; id++) {
        struct adr_device* dev = NULL;
        struct adr_error e = {{0}};
        if (device_get_locked(b->types[t], id, &dev, &e) == 0)
          list[n++] = dev;
        else
          adr__log(ADR_LOG_WARN, b->name, "cannot open device %lld: %s", (long long)id, e.message);
      }
    }
  }
  enumeration = list;
  enumeration_count = n;
  enumerated = true;
  return 0;
}

int adr_backends_load_all(struct adr_error* error) {
  int st = enter("adr_backends_load_all", error);
  if (st) return st;
  pthread_mutex_lock(&registry_mutex);
  st = load_all_locked();
  pthread_mutex_unlock(&registry_mutex);
  if (st) return adr__errorf(error, st, "adr_backends_load_all", NULL, "out of memory");
  return 0;
}

int adr_device_count(size_t* out, struct adr_error* error) {
  if (out == NULL) return adr__errorf(error, EINVAL, "adr_device_count", NULL, "out is NULL");
  int st = adr_backends_load_all(error);
  if (st) return st;
  *out = enumeration_count;
  return 0;
}

int adr_device_at(size_t index, struct adr_device** out, struct adr_error* error) {
  if (out == NULL) return adr__errorf(error, EINVAL, "adr_device_at", NULL, "out is NULL");
  int st = adr_backends_load_all(error);
  if (st) return st;
  if (index >= enumeration_count)
    return adr__errorf(error, ENODEV, "adr_device_at", NULL, "index %zu out of range (%zu devices)",
                       index, enumeration_count);
  *out = enumeration[index];
  return 0;
}

int adr_device_adopt(ArrowDeviceType type, const void* native_desc, struct adr_device** out,
                     struct adr_error* error) {
  if (native_desc == NULL || out == NULL)
    return adr__errorf(error, EINVAL, "adr_device_adopt", NULL, "%s is NULL",
                       out ? "native_desc" : "out");
  int st = enter("adr_device_adopt", error);
  if (st) return st;
  if (type <= 0 || type >= MAX_TYPE)
    return adr__errorf(error, ENODEV, "adr_device_adopt", NULL, "unknown device type %d",
                       (int)type);
  pthread_mutex_lock(&registry_mutex);
  struct adr__backend* b = backend_for_type_locked(type, error);
  if (b == NULL) {
    pthread_mutex_unlock(&registry_mutex);
    return ENODEV;
  }
  size_t ti = 0;
  claims(b, type, &ti);
  struct type_devices* td = &devices_by_type[type];
  int64_t id = b->device_count[ti] + td->adopted;
  struct adr_backend_device* handle = NULL;
  st = grow_type(td, (size_t)id + 1);
  if (st) {
    st = adr__errorf(error, ENOMEM, "adr_device_adopt", NULL, "out of memory");
  } else {
    st = adr__dispatch_device_adopt(b, "adr_device_adopt", type, id, native_desc, &handle, error);
  }
  if (st == 0)
    st = adr__device_create(b, "adr_device_adopt", type, id, handle, &td->items[id], error);
  if (st == 0) {
    td->adopted++;
    *out = td->items[id];
  }
  pthread_mutex_unlock(&registry_mutex);
  return st;
}

size_t adr_backend_count(void) {
  if (adr__ensure_init(NULL)) return 0;
  pthread_mutex_lock(&registry_mutex);
  ensure_manifest_locked();
  size_t n = backend_count;
  pthread_mutex_unlock(&registry_mutex);
  return n;
}

int adr_backend_info_get(size_t index, struct adr_backend_info* out, struct adr_error* error) {
  if (out == NULL) return adr__errorf(error, EINVAL, "adr_backend_info_get", NULL, "out is NULL");
  if (out->struct_size < offsetof(struct adr_backend_info, reserved))
    return adr__errorf(error, EINVAL, "adr_backend_info_get", NULL,
                       "out->struct_size %u is too small", out->struct_size);
  int st = adr__ensure_init(error);
  if (st) return st;
  pthread_mutex_lock(&registry_mutex);
  ensure_manifest_locked();
  if (index >= backend_count) {
    pthread_mutex_unlock(&registry_mutex);
    return adr__errorf(error, ENOENT, "adr_backend_info_get", NULL,
                       "index %zu out of range (%zu backends)", index, backend_count);
  }
  const struct adr__backend* b = &backends[index];
  struct adr_backend_info info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  info.state = b->state;
  snprintf(info.name, sizeof(info.name), "%s", b->name);
  snprintf(info.path, sizeof(info.path), "%s", b->path);
  snprintf(info.reason, sizeof(info.reason), "%s", b->reason);
  if (b->state == ADR_BACKEND_LOADED) {
    info.abi_major = ADR_BACKEND_ABI_MAJOR;
    info.abi_minor = b->abi_minor;
  }
  info.device_type_count = b->type_count;
  for (uint32_t i = 0; i < b->type_count; i++) {
    info.device_types[i] = b->types[i];
    info.device_count += b->device_count[i];
  }
  pthread_mutex_unlock(&registry_mutex);
  uint32_t size = out->struct_size < sizeof(info) ? out->struct_size : (uint32_t)sizeof(info);
  memcpy(out, &info, size);
  out->struct_size = size;
  return 0;
}

const char* adr_backend_search_path(void) {
  if (adr__ensure_init(NULL)) return "";
  pthread_mutex_lock(&registry_mutex);
  const char* p = adr__loader_search_path();
  pthread_mutex_unlock(&registry_mutex);
  return p;
}

int adr_pointer_query(const void* ptr, struct adr_device** out, struct adr_error* error) {
  if (ptr == NULL || out == NULL)
    return adr__errorf(error, EINVAL, "adr_pointer_query", NULL, "%s is NULL", ptr ? "out" : "ptr");
  int st = enter("adr_pointer_query", error);
  if (st) return st;
  ArrowDeviceType type = 0;
  int64_t id = -1;
  pthread_mutex_lock(&registry_mutex);
  for (size_t i = 0; i < backend_count && type == 0; i++) {
    struct adr__backend* b = &backends[i];
    if (b->state != ADR_BACKEND_LOADED) continue;
    if (adr__dispatch_pointer_query(b, "adr_pointer_query", ptr, &type, &id, NULL) != 0) type = 0;
  }
  if (type != 0) st = device_get_locked(type, id, out, error);
  pthread_mutex_unlock(&registry_mutex);
  if (type == 0)
    return adr__errorf(error, ENOENT, "adr_pointer_query", NULL,
                       "no loaded backend owns address %p", ptr);
  return st;
}

/* Host memory checks (host.c): like adr_pointer_query, but only over the
 * backends already loaded, with no initialisation, and a backend's failure
 * other than "not mine" is returned instead of taken for "nobody's". */
int adr__pointer_owner(const char* api, const void* ptr, struct adr_device** out,
                       struct adr_error* error) {
  *out = NULL;
  if (adr__shut_down()) return 0;
  ArrowDeviceType type = 0;
  int64_t id = -1;
  int st = 0;
  pthread_mutex_lock(&registry_mutex);
  for (size_t i = 0; i < backend_count && type == 0 && st == 0; i++) {
    struct adr__backend* b = &backends[i];
    if (b->state != ADR_BACKEND_LOADED) continue;
    struct adr_error e; /* "not mine" must leave the caller's untouched */
    int q = adr__dispatch_pointer_query(b, api, ptr, &type, &id, error ? &e : NULL);
    if (q != 0) type = 0;
    if (q != 0 && q != ENOENT && q != ENOTSUP) {
      st = q;
      if (error != NULL) *error = e;
    }
  }
  if (st == 0 && type != 0) st = device_get_locked(type, id, out, error);
  pthread_mutex_unlock(&registry_mutex);
  return st;
}

/* ---- process exit -------------------------------------------------------- */

/* The vtable of a device after the teardown: every slot refuses. The
 * dispatching wrapper adds "[operation][backend]" to the message. */
#define SHUT_MSG "ESHUTDOWN: adr was shut down at process exit; nothing was done"
static int shut_init(struct adr_error* error) {
  return adr_backend_error_set(error, ESHUTDOWN, SHUT_MSG);
}
static void shut_shutdown(void) {}
static int shut_device_count(ArrowDeviceType type, int64_t* out, struct adr_error* error) {
  (void)type, (void)out;
  return adr_backend_error_set(error, ESHUTDOWN, SHUT_MSG);
}
static int shut_device_open(ArrowDeviceType type, int64_t id, struct adr_backend_device** out,
                            struct adr_error* error) {
  (void)type, (void)id, (void)out;
  return adr_backend_error_set(error, ESHUTDOWN, SHUT_MSG);
}
static void shut_device_close(struct adr_backend_device* dev) {
  (void)dev;
}
static int shut_device_info(struct adr_backend_device* dev, struct adr_device_info* out,
                            struct adr_error* error) {
  (void)dev, (void)out;
  return adr_backend_error_set(error, ESHUTDOWN, SHUT_MSG);
}
static int shut_alloc(struct adr_backend_device* dev, size_t size, size_t alignment,
                      struct adr_backend_stream* stream, void** out, struct adr_error* error) {
  (void)dev, (void)size, (void)alignment, (void)stream, (void)out;
  return adr_backend_error_set(error, ESHUTDOWN, SHUT_MSG);
}
static int shut_free(struct adr_backend_device* dev, void* ptr, size_t size,
                     struct adr_backend_stream* stream, struct adr_error* error) {
  (void)dev, (void)ptr, (void)size, (void)stream;
  return adr_backend_error_set(error, ESHUTDOWN, SHUT_MSG);
}
static int shut_copy(struct adr_backend_device* dst_dev, void* dst,
                     struct adr_backend_device* src_dev, const void* src, size_t size,
                     struct adr_backend_stream* stream, struct adr_error* error) {
  (void)dst_dev, (void)dst, (void)src_dev, (void)src, (void)size, (void)stream;
  return adr_backend_error_set(error, ESHUTDOWN, SHUT_MSG);
}
static int shut_memset(struct adr_backend_device* dev, void* ptr, int value, size_t size,
                       struct adr_backend_stream* stream, struct adr_error* error) {
  (void)dev, (void)ptr, (void)value, (void)size, (void)stream;
  return adr_backend_error_set(error, ESHUTDOWN, SHUT_MSG);
}
static int shut_stream_create(struct adr_backend_device* dev, uint32_t flags,
                              struct adr_backend_stream** out, struct adr_error* error) {
  (void)dev, (void)flags, (void)out;
  return adr_backend_error_set(error, ESHUTDOWN, SHUT_MSG);
}
static int shut_stream_op(struct adr_backend_device* dev, struct adr_backend_stream* stream,
                          struct adr_error* error) {
  (void)dev, (void)stream;
  return adr_backend_error_set(error, ESHUTDOWN, SHUT_MSG);
}
static int shut_event_create(struct adr_backend_device* dev, struct adr_backend_event** out,
                             struct adr_error* error) {
  (void)dev, (void)out;
  return adr_backend_error_set(error, ESHUTDOWN, SHUT_MSG);
}
static int shut_event_op(struct adr_backend_device* dev, struct adr_backend_event* event,
                         struct adr_error* error) {
  (void)dev, (void)event;
  return adr_backend_error_set(error, ESHUTDOWN, SHUT_MSG);
}
static int shut_event_stream_op(struct adr_backend_device* dev, struct adr_backend_event* event,
                                struct adr_backend_stream* stream, struct adr_error* error) {
  (void)dev, (void)event, (void)stream;
  return adr_backend_error_set(error, ESHUTDOWN, SHUT_MSG);
}
static void* shut_event_native(struct adr_backend_device* dev, struct adr_backend_event* event) {
  (void)dev, (void)event;
  return NULL;
}
static int shut_event_import(struct adr_backend_device* dev, void* sync_event,
                             struct adr_backend_event** out, struct adr_error* error) {
  (void)dev, (void)sync_event, (void)out;
  return adr_backend_error_set(error, ESHUTDOWN, SHUT_MSG);
}
static int shut_stream_import(struct adr_backend_device* dev, void* native_stream,
                              struct adr_backend_stream** out, struct adr_error* error) {
  (void)dev, (void)native_stream, (void)out;
  return adr_backend_error_set(error, ESHUTDOWN, SHUT_MSG);
}
static void* shut_stream_native(struct adr_backend_device* dev, struct adr_backend_stream* stream) {
  (void)dev, (void)stream;
  return NULL;
}
static int shut_pointer_query(const void* ptr, ArrowDeviceType* out_type, int64_t* out_id,
                              struct adr_error* error) {
  (void)ptr, (void)out_type, (void)out_id;
  return adr_backend_error_set(error, ESHUTDOWN, SHUT_MSG);
}
static int shut_device_native(struct adr_backend_device* dev, int kind, void** out,
                              struct adr_error* error) {
  (void)dev, (void)kind, (void)out;
  return adr_backend_error_set(error, ESHUTDOWN, SHUT_MSG);
}
static int shut_device_adopt(ArrowDeviceType type, int64_t id, const void* native_desc,
                             struct adr_backend_device** out, struct adr_error* error) {
  (void)type, (void)id, (void)native_desc, (void)out;
  return adr_backend_error_set(error, ESHUTDOWN, SHUT_MSG);
}
static int shut_device_properties(struct adr_backend_device* dev, adr_property_fn emit, void* ctx,
                                  struct adr_error* error) {
  (void)dev, (void)emit, (void)ctx;
  return adr_backend_error_set(error, ESHUTDOWN, SHUT_MSG);
}
static int shut_host_register(struct adr_backend_device* dev, void* ptr, size_t size,
                              struct adr_error* error) {
  (void)dev, (void)ptr, (void)size;
  return adr_backend_error_set(error, ESHUTDOWN, SHUT_MSG);
}
static int shut_host_unregister(struct adr_backend_device* dev, void* ptr,
                                struct adr_error* error) {
  (void)dev, (void)ptr;
  return adr_backend_error_set(error, ESHUTDOWN, SHUT_MSG);
}

static const struct adr_backend shutdown_vtable = {
    .abi_major = ADR_BACKEND_ABI_MAJOR,
    .abi_minor = ADR_BACKEND_ABI_MINOR,
    .struct_size = sizeof(struct adr_backend),
    .name = "shut down",
    .version = "",
    .init = shut_init,
    .shutdown = shut_shutdown,
    .device_count = shut_device_count,
    .device_open = shut_device_open,
    .device_close = shut_device_close,
    .device_info = shut_device_info,
    .alloc = shut_alloc,
    .free = shut_free,
    .copy = shut_copy,
    .memset = shut_memset,
    .stream_create = shut_stream_create,
    .stream_destroy = shut_stream_op,
    .stream_synchronize = shut_stream_op,
    .event_create = shut_event_create,
    .event_destroy = shut_event_op,
    .event_record = shut_event_stream_op,
    .event_wait = shut_event_stream_op,
    .event_synchronize = shut_event_op,
    .event_query = shut_event_op,
    .event_native = shut_event_native,
    .event_import = shut_event_import,
    .stream_import = shut_stream_import,
    .stream_native = shut_stream_native,
    .pointer_query = shut_pointer_query,
    .device_native = shut_device_native,
    .device_adopt = shut_device_adopt,
    .device_properties = shut_device_properties,
    .host_register = shut_host_register,
    .host_unregister = shut_host_unregister,
};

/* Devices whose queued work could not be drained: their memory and native
 * objects are abandoned (left as they are) rather than freed under work
 * that may still use them. */
#define MAX_ABANDONED 64
static struct adr_device* abandoned[MAX_ABANDONED];
static size_t abandoned_count;
static bool abandoned_overflow;

static void abandon(struct adr_device* dev, const char* why) {
  for (size_t i = 0; i < abandoned_count; i++)
    if (abandoned[i] == dev) return;
  if (abandoned_count < MAX_ABANDONED)
    abandoned[abandoned_count++] = dev;
  else
    abandoned_overflow = true;
  adr__log(ADR_LOG_WARN, dev->name, "at exit: %s; the device's memory is left as it is", why);
}

static bool is_abandoned(const struct adr_device* dev) {
  if (abandoned_overflow) return true;
  for (size_t i = 0; i < abandoned_count; i++)
    if (abandoned[i] == dev) return true;
  return false;
}

/* At exit, once (every registration after the first finds it done):
 *  1. refuse new calls (ESHUTDOWN) and disarm fault injection;
 *  2. drain: synchronize every live created stream, then every default
 *     stream, so no queued work runs while memory goes; a device whose
 *     stream fails to synchronize is abandoned (nothing of it is freed);
 *  3. destroy the created streams' native objects (their wrappers stay),
 *     tear down the memory state (pool), destroy the default stream, close
 *     the device, then point it at the shut-down vtable;
 *  4. shut the backends down. The libraries stay mapped.
 * Device structs, alloc tables and stream/event wrappers are never freed.
 * Registered once, at the first call that needs the registry: exit handlers
 * run in reverse order, so it runs after the backends' own (Vulkan, HIP:
 * registered when they load, see their READMEs), whose slots then only
 * release host memory. Registering it again after each device opens would
 * run it before them, but the Vulkan validation layer registers static
 * destructors lazily, during later calls, so no registration point is late
 * enough; the backends' handlers stay in charge of their drivers.
 * An application that still runs work on adr devices from other threads at
 * exit is outside this contract. */
static void teardown(void) {
  if (atomic_exchange(&adr__shutdown_flag, 1) != 0) return;
  adr__fault_disarm();
  pthread_mutex_lock(&registry_mutex);
  pthread_mutex_lock(&streams_mutex);
  for (struct adr_stream* s = live_streams; s != NULL; s = s->live_next) {
    struct adr_device* dev = s->device;
    struct adr_error e = {{0}};
    if (adr__dispatch_stream_synchronize(dev, "teardown", s->handle, &e) != 0) {
      char why[sizeof(e.message) + 64];
      snprintf(why, sizeof(why), "a stream failed to drain (%s)", e.message);
      abandon(dev, why);
    }
  }
  for (size_t t = 0; t < MAX_TYPE; t++) {
    struct type_devices* td = &devices_by_type[t];
    for (size_t i = 0; i < td->cap; i++) {
      struct adr_device* dev = td->items[i];
      if (dev == NULL || dev->vt == &shutdown_vtable) continue;
      struct adr_error e = {{0}};
      if (adr__dispatch_stream_synchronize(dev, "teardown", dev->default_stream.handle, &e) != 0) {
        char why[sizeof(e.message) + 64];
        snprintf(why, sizeof(why), "the default stream failed to drain (%s)", e.message);
        abandon(dev, why);
      }
    }
  }
  for (struct adr_stream* s = live_streams; s != NULL; s = s->live_next) {
    struct adr_device* dev = s->device;
    if (is_abandoned(dev)) continue;
    /* No adr__memory_stream_retire: it records events, which a backend
     * whose exit handler already ran cannot do; the pool goes next anyway,
     * and its destruction does not look at streams. */
    adr__dispatch_stream_destroy(dev, "teardown", s->handle, NULL);
    s->handle = NULL;
  }
  pthread_mutex_unlock(&streams_mutex);
  for (size_t t = 0; t < MAX_TYPE; t++) {
    struct type_devices* td = &devices_by_type[t];
    for (size_t i = 0; i < td->cap; i++) {
      struct adr_device* dev = td->items[i];
      if (dev == NULL || dev->vt == &shutdown_vtable) continue;
      if (!is_abandoned(dev)) adr__device_release(dev);
      dev->vt = &shutdown_vtable;
      dev->handle = NULL;
      dev->default_stream.handle = NULL;
    }
  }
  atomic_store(&default_device, NULL);
  for (size_t i = 0; i < backend_count; i++) {
    struct adr__backend* b = &backends[i];
    if (b->state != ADR_BACKEND_LOADED) continue;
    bool keep = false;
    for (size_t k = 0; k < abandoned_count; k++) keep |= abandoned[k]->backend == b;
    if (!keep && !abandoned_overflow) adr__dispatch_shutdown(b);
  }
  pthread_mutex_unlock(&registry_mutex);
}
