/* SPDX-License-Identifier: Apache-2.0
 *
 * sim_core: devices backed by host memory, an allocation table that checks
 * every address, streams as worker threads, events as completion counters.
 * A test double; see sim_core.h and README.md.
 */
#include "sim_core.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SIM_REGION_SIZE ((uintptr_t)8 << 30) /* device address space reserved at a time */
#define SIM_MAX_REGIONS 512
#define SIM_DEVICE_ALIGN ((uintptr_t)512)
#define SIM_GUARD ((uintptr_t)512) /* unmapped gap after each allocation */
#define SIM_HOST_ALIGN ((size_t)4096)
#define SIM_FILL 0xA5

/* ---- messages ----------------------------------------------------------- */

static _Thread_local char t_message[512];

const char* sim_last_message(void) {
  return t_message;
}

__attribute__((format(printf, 2, 3))) static int fail(int status, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t_message, sizeof(t_message), fmt, ap);
  va_end(ap);
  return status;
}

const char* sim_status_name(int status) {
  switch (status) {
#define SIM_NAME(x) \
  case x:           \
    return #x;
    SIM_NAME(SIM_SUCCESS)
    SIM_NAME(SIM_ERROR_INVALID_VALUE)
    SIM_NAME(SIM_ERROR_OUT_OF_MEMORY)
    SIM_NAME(SIM_ERROR_NOT_INITIALIZED)
    SIM_NAME(SIM_ERROR_INVALID_DEVICE)
    SIM_NAME(SIM_ERROR_INVALID_HANDLE)
    SIM_NAME(SIM_ERROR_NOT_READY)
    SIM_NAME(SIM_ERROR_UNKNOWN_POINTER)
    SIM_NAME(SIM_ERROR_FREED_POINTER)
    SIM_NAME(SIM_ERROR_OUT_OF_BOUNDS)
    SIM_NAME(SIM_ERROR_WRONG_DEVICE)
    SIM_NAME(SIM_ERROR_ALREADY_REGISTERED)
    SIM_NAME(SIM_ERROR_NOT_REGISTERED)
    SIM_NAME(SIM_ERROR_NOT_SUPPORTED)
    SIM_NAME(SIM_ERROR_INVALID_CONTEXT)
#undef SIM_NAME
  }
  return "SIM_ERROR_UNRECOGNIZED";
}

/* ---- global state ------------------------------------------------------- */

enum alloc_state { A_LIVE, A_FREEING, A_FREED };

struct alloc {
  uintptr_t base;
  size_t size;
  enum sim_mem_kind kind;
  int device;
  enum alloc_state state;
  unsigned char* backing; /* where the bytes are (== base for host kinds) */
  uint64_t id;
  /* Device memory lives in a memfd (its descriptor kept for IPC handles),
   * or in malloc'd memory when no descriptor could be had (fd -1). An
   * allocation opened from an IPC handle maps the exporter's memfd
   * (ipc_opened; fd -1, the mapping is all it needs). */
  int fd;
  bool ipc_opened;
};

struct device {
  struct sim_device_props props;
  pthread_mutex_t lock; /* bump, region_end and used */
  uintptr_t bump;       /* next free device address */
  uintptr_t region_end; /* end of the region bump is in */
  uint64_t used;        /* bytes of the budget in use */
};

static struct {
  pthread_once_t once;
  int status;
  char message[512];
  int ndev;
  struct device dev[SIM_MAX_DEVICES];
  /* Reserved, inaccessible ranges that device addresses come from; grown a
   * region at a time (small reservations: valgrind refuses huge ones).
   * Appended under the table's write lock, read under its read lock. */
  struct {
    uintptr_t start, end;
  } regions[SIM_MAX_REGIONS];
  size_t nregions;

  /* Allocation table: sorted by base, guarded by `table_lock`. */
  pthread_rwlock_t table_lock;
  struct alloc** allocs;
  size_t nallocs, cap;
  uint64_t next_id;
  uint64_t live;

  pthread_mutex_t knob_lock;
  uint64_t alloc_seq, fail_nth;
  int fail_once;
  _Atomic unsigned delay_us;

  /* Live streams and events, for handle validation and device drains. */
  pthread_mutex_t handles_lock;
  struct sim_stream** streams;
  size_t nstreams, stream_cap;
  /* Threads of streams that finished, to be joined (reap_zombies), and a
   * signal for the exit-time drain. */
  pthread_t* zombies;
  size_t nzombies, zombie_cap;
  pthread_cond_t stream_gone;
  struct sim_event** events;
  size_t nevents, event_cap;
} g = {
    .once = PTHREAD_ONCE_INIT,
    .table_lock = PTHREAD_RWLOCK_INITIALIZER,
    .knob_lock = PTHREAD_MUTEX_INITIALIZER,
    .handles_lock = PTHREAD_MUTEX_INITIALIZER,
    .stream_gone = PTHREAD_COND_INITIALIZER,
};

static bool parse_u64(const char* name, const char* text, uint64_t min, uint64_t max, uint64_t* out,
                      const char** rest) {
  char* end = NULL;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (end == text || errno != 0 || v < min || v > max || (rest == NULL && *end != '\0')) {
    snprintf(g.message, sizeof(g.message),
             "%s=\"%s\": expected an integer in [%" PRIu64 ", %" PRIu64 "]", name, text, min, max);
    return false;
  }
  if (rest) *rest = end;
  *out = v;
  return true;
}

/* The front end's variable ADR_SIM_<FRONT>_<what> if set, else
 * ADR_SIM_<what>. */
static const char* identity_env(const char* what, char* name, size_t cap) {
  char upper[16] = "";
  for (size_t i = 0; sim_frontend_name[i] != '\0' && i + 1 < sizeof(upper); i++)
    upper[i] = (char)toupper((unsigned char)sim_frontend_name[i]);
  snprintf(name, cap, "ADR_SIM_%s_%s", upper, what);
  const char* v = getenv(name);
  if (v != NULL) return v;
  snprintf(name, cap, "ADR_SIM_%s", what);
  return getenv(name);
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* One list entry (up to ',' or the end) as a UUID: 32 hex digits, '-'
 * anywhere between them, an optional "GPU-" prefix. An empty entry keeps
 * the default. */
static bool parse_uuid_entry(const char** text, unsigned char out[16]) {
  const char* s = *text;
  if (strncasecmp(s, "GPU-", 4) == 0) s += 4;
  if (*s == ',' || *s == '\0') {
    *text = s;
    return true;
  }
  unsigned char u[16] = {0};
  int n = 0;
  for (; *s != ',' && *s != '\0'; s++) {
    if (*s == '-') continue;
    int v = hex_digit(*s);
    if (v < 0 || n == 32) return false;
    u[n / 2] = (unsigned char)(u[n / 2] | (n % 2 ? v : v << 4));
    n++;
  }
  if (n != 32) return false;
  memcpy(out, u, 16);
  *text = s;
  return true;
}

/* One list entry as a PCI address DOMAIN:BUS:DEVICE[.FUNCTION] in hex. */
static bool parse_pci_entry(const char** text, struct sim_device_props* p) {
  const char* s = *text;
  if (*s == ',' || *s == '\0') return true;
  unsigned dom = 0, bus = 0, dev = 0, fn = 0;
  int used = 0;
  if (sscanf(s, "%x:%x:%x%n", &dom, &bus, &dev, &used) != 3) return false;
  s += used;
  if (*s == '.') {
    int used2 = 0;
    if (sscanf(s + 1, "%x%n", &fn, &used2) != 1) return false;
    s += 1 + used2;
  }
  if ((*s != ',' && *s != '\0') || bus > 0xff || dev > 0x1f || fn > 7) return false;
  p->pci_domain = (int)dom;
  p->pci_bus = (int)bus;
  p->pci_device = (int)dev;
  p->pci_function = (int)fn;
  *text = s;
  return true;
}

/* ADR_SIM_UUIDS / ADR_SIM_PCI_BUS_IDS (or the front end's own): comma
 * lists, entry i for ordinal i; missing or empty entries keep the
 * defaults. ADR_SIM_INTEGRATED=1 (or the front end's own): every device
 * is an integrated GPU. */
static bool read_identity(int ndev) {
  char name[64];
  const char* v = identity_env("UUIDS", name, sizeof(name));
  for (int i = 0; v != NULL && *v != '\0' && i < ndev; i++) {
    const char* entry = v;
    if (!parse_uuid_entry(&v, g.dev[i].props.uuid)) {
      snprintf(g.message, sizeof(g.message),
               "%s: entry %d (\"%.40s\") is not a UUID of 32 hex digits", name, i + 1, entry);
      return false;
    }
    if (*v == ',') v++;
  }
  v = identity_env("PCI_BUS_IDS", name, sizeof(name));
  for (int i = 0; v != NULL && *v != '\0' && i < ndev; i++) {
    const char* entry = v;
    if (!parse_pci_entry(&v, &g.dev[i].props)) {
      snprintf(g.message, sizeof(g.message),
               "%s: entry %d (\"%.40s\") is not DOMAIN:BUS:DEVICE[.FUNCTION] in hex", name, i + 1,
               entry);
      return false;
    }
    if (*v == ',') v++;
  }
  const char* integrated = identity_env("INTEGRATED", name, sizeof(name));
  for (int i = 0; i < ndev; i++)
    g.dev[i].props.integrated = integrated != NULL && strcmp(integrated, "1") == 0;
  return true;
}

static void init_once(void) {
  uint64_t ndev = 2, mib = 4096, delay = 0;
  const char* s;
  g.status = SIM_ERROR_INVALID_VALUE;
  if ((s = getenv("ADR_SIM_DEVICES")) != NULL &&
      !parse_u64("ADR_SIM_DEVICES", s, 0, SIM_MAX_DEVICES, &ndev, NULL))
    return;
  if ((s = getenv("ADR_SIM_MEMORY_MIB")) != NULL &&
      !parse_u64("ADR_SIM_MEMORY_MIB", s, 1, 1u << 20, &mib, NULL))
    return;
  if ((s = getenv("ADR_SIM_DELAY_US")) != NULL &&
      !parse_u64("ADR_SIM_DELAY_US", s, 0, 10000000, &delay, NULL))
    return;
  if ((s = getenv("ADR_SIM_ALLOC_FAIL")) != NULL && *s != '\0') {
    const char* rest = NULL;
    uint64_t nth = 0;
    if (!parse_u64("ADR_SIM_ALLOC_FAIL", s, 0, UINT64_MAX, &nth, &rest)) return;
    if (*rest != '\0' && strcmp(rest, ":once") != 0) {
      snprintf(g.message, sizeof(g.message), "ADR_SIM_ALLOC_FAIL=\"%s\": expected N or N:once", s);
      return;
    }
    g.fail_nth = nth;
    g.fail_once = *rest != '\0';
  }
  g.delay_us = (unsigned)delay;
  g.ndev = (int)ndev;
  for (int i = 0; i < g.ndev; i++) {
    struct device* d = &g.dev[i];
    pthread_mutex_init(&d->lock, NULL);
    d->bump = d->region_end = 0; /* the first allocation reserves a region */
    snprintf(d->props.name, sizeof(d->props.name), "adr simulated GPU %d", i);
    d->props.memory_total = mib << 20;
    /* Each front end its own defaults: CUDA's GPUs at 0000:41:00.0 ...,
     * HIP's at 0000:61:00.0 ..., and UUIDs salted with the name. */
    int salt = sim_frontend_name[0];
    d->props.pci_domain = 0;
    d->props.pci_bus = (salt == 'h' ? 0x61 : 0x41) + i;
    d->props.pci_device = 0;
    d->props.pci_function = 0;
    for (int b = 0; b < 16; b++)
      d->props.uuid[b] = (unsigned char)(0x5a ^ (b * 17) ^ (i * 29) ^ (b == 0 ? salt : 0));
    d->props.uuid[6] = (unsigned char)((d->props.uuid[6] & 0x0f) | 0x40);
    d->props.uuid[8] = (unsigned char)((d->props.uuid[8] & 0x3f) | 0x80);
    d->props.cc_major = 8;
    d->props.cc_minor = 0;
    d->props.multiprocessors = 4;
  }
  if (!read_identity(g.ndev)) return;
  g.status = SIM_SUCCESS;
}

int sim_init(void) {
  pthread_once(&g.once, init_once);
  if (g.status != SIM_SUCCESS) return fail(g.status, "%s", g.message);
  return SIM_SUCCESS;
}

static int check_init(void) {
  pthread_once(&g.once, init_once);
  if (g.status != SIM_SUCCESS)
    return fail(SIM_ERROR_NOT_INITIALIZED, "simulator not initialised: %s", g.message);
  return SIM_SUCCESS;
}

int sim_device_count(void) {
  return check_init() == SIM_SUCCESS ? g.ndev : 0;
}

const struct sim_device_props* sim_device_props(int device) {
  if (check_init() != SIM_SUCCESS || device < 0 || device >= g.ndev) return NULL;
  return &g.dev[device].props;
}

static int check_device(int device) {
  int st = check_init();
  if (st) return st;
  if (device < 0 || device >= g.ndev)
    return fail(SIM_ERROR_INVALID_DEVICE, "device %d out of range [0, %d)", device, g.ndev);
  return SIM_SUCCESS;
}

int sim_mem_info(int device, uint64_t* out_free, uint64_t* out_total) {
  int st = check_device(device);
  if (st) return st;
  struct device* d = &g.dev[device];
  pthread_mutex_lock(&d->lock);
  uint64_t used = d->used;
  pthread_mutex_unlock(&d->lock);
  if (out_free) *out_free = d->props.memory_total - used;
  if (out_total) *out_total = d->props.memory_total;
  return SIM_SUCCESS;
}

void sim_alloc_fail_set(uint64_t nth, int once) {
  pthread_mutex_lock(&g.knob_lock);
  g.alloc_seq = 0;
  g.fail_nth = nth;
  g.fail_once = once;
  pthread_mutex_unlock(&g.knob_lock);
}

static pthread_mutex_t fault_lock = PTHREAD_MUTEX_INITIALIZER;
static char fault_name[64];
static int fault_code;

void sim_fault_next(const char* name, int code) {
  pthread_mutex_lock(&fault_lock);
  snprintf(fault_name, sizeof(fault_name), "%s", name != NULL ? name : "");
  fault_code = code;
  pthread_mutex_unlock(&fault_lock);
}

int sim_fault_take(const char* name) {
  int code = 0;
  pthread_mutex_lock(&fault_lock);
  if (fault_code != 0 && strcmp(fault_name, name) == 0) {
    code = fault_code;
    fault_code = 0;
  }
  pthread_mutex_unlock(&fault_lock);
  return code;
}

void sim_delay_set(unsigned microseconds) {
  g.delay_us = microseconds;
}

static bool knob_fails(void) {
  pthread_mutex_lock(&g.knob_lock);
  uint64_t n = ++g.alloc_seq;
  bool f = g.fail_nth != 0 && (n == g.fail_nth || (!g.fail_once && n > g.fail_nth));
  pthread_mutex_unlock(&g.knob_lock);
  return f;
}

/* ---- allocation table --------------------------------------------------- */

/* Index of the last entry with base <= addr, or -1. Table lock held. */
static ptrdiff_t table_floor(uintptr_t addr) {
  size_t lo = 0, hi = g.nallocs;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (g.allocs[mid]->base <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  return (ptrdiff_t)lo - 1;
}

/* Write lock held. */
static int table_insert(struct alloc* a) {
  if (g.nallocs == g.cap) {
    size_t cap = g.cap ? g.cap * 2 : 256;
    struct alloc** n = realloc(g.allocs, cap * sizeof(*n));
    if (n == NULL) return fail(SIM_ERROR_OUT_OF_MEMORY, "allocation table cannot grow");
    g.allocs = n;
    g.cap = cap;
  }
  size_t at = (size_t)(table_floor(a->base) + 1);
  memmove(&g.allocs[at + 1], &g.allocs[at], (g.nallocs - at) * sizeof(*g.allocs));
  g.allocs[at] = a;
  g.nallocs++;
  a->id = ++g.next_id;
  g.live++;
  return SIM_SUCCESS;
}

/* Write lock held. */
static void table_remove(struct alloc* a) {
  ptrdiff_t i = table_floor(a->base);
  if (i >= 0 && g.allocs[i] == a) {
    memmove(&g.allocs[i], &g.allocs[i + 1], (g.nallocs - (size_t)i - 1) * sizeof(*g.allocs));
    g.nallocs--;
  }
}

/* Table lock held (either mode). */
static bool in_device_region(uintptr_t p) {
  for (size_t i = 0; i < g.nregions; i++)
    if (p >= g.regions[i].start && p < g.regions[i].end) return true;
  return false;
}

/* Gives device `d` a fresh region of at least `need` bytes. d->lock held;
 * takes the table lock (order: device lock, then table lock). */
static bool grow_region(struct device* d, uintptr_t need) {
  uintptr_t len =
      need + SIM_DEVICE_ALIGN > SIM_REGION_SIZE ? need + SIM_DEVICE_ALIGN : SIM_REGION_SIZE;
  if (len < need) return false;
  pthread_rwlock_wrlock(&g.table_lock);
  bool room = g.nregions < SIM_MAX_REGIONS;
  pthread_rwlock_unlock(&g.table_lock);
  if (!room) return false;
  void* r = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (r == MAP_FAILED) return false;
  pthread_rwlock_wrlock(&g.table_lock);
  room = g.nregions < SIM_MAX_REGIONS;
  if (room) {
    g.regions[g.nregions].start = (uintptr_t)r;
    g.regions[g.nregions].end = (uintptr_t)r + len;
    g.nregions++;
  }
  pthread_rwlock_unlock(&g.table_lock);
  if (!room) {
    munmap(r, len);
    return false;
  }
  /* The region's first bytes stay unused so that no device address is the
   * region's start: an address just below it is never "one past" another. */
  d->bump = (uintptr_t)r + SIM_DEVICE_ALIGN;
  d->region_end = (uintptr_t)r + len;
  return true;
}

struct resolved {
  struct alloc* a; /* NULL for pageable host memory */
  unsigned char* at;
  enum sim_mem_kind kind;
  int device;
};

/* Resolves [ptr, ptr + size) under the read lock. */
static int resolve_locked(const void* ptr, size_t size, const char* what, struct resolved* out) {
  uintptr_t p = (uintptr_t)ptr;
  ptrdiff_t i = table_floor(p);
  struct alloc* a = i >= 0 ? g.allocs[i] : NULL;
  bool inside = a != NULL && p < a->base + a->size;
  if (!inside) {
    if (in_device_region(p)) {
      if (a != NULL && a->state != A_LIVE && p < a->base + a->size + SIM_GUARD)
        return fail(SIM_ERROR_FREED_POINTER, "%s %p is in a freed allocation", what, ptr);
      if (a != NULL && p < a->base + a->size + SIM_GUARD)
        return fail(SIM_ERROR_OUT_OF_BOUNDS,
                    "%s %p is %zu bytes past the end of a %zu-byte allocation at %p", what, ptr,
                    (size_t)(p - a->base - a->size), a->size, (void*)a->base);
      return fail(SIM_ERROR_UNKNOWN_POINTER, "%s %p is not a device allocation", what, ptr);
    }
    *out = (struct resolved){NULL, (unsigned char*)ptr, SIM_MEM_NONE, -1};
    return SIM_SUCCESS;
  }
  if (a->state != A_LIVE)
    return fail(SIM_ERROR_FREED_POINTER, "%s %p is in a freed allocation (%zu bytes at %p)", what,
                ptr, a->size, (void*)a->base);
  if (size > a->size - (p - a->base))
    return fail(SIM_ERROR_OUT_OF_BOUNDS,
                "%s [%p, +%zu) runs %zu bytes past the end of a %zu-byte allocation at %p", what,
                ptr, size, size - (size_t)(a->size - (p - a->base)), a->size, (void*)a->base);
  *out = (struct resolved){a, a->backing + (p - a->base), a->kind, a->device};
  return SIM_SUCCESS;
}

int sim_ptr_query(const void* ptr, struct sim_ptr_info* out) {
  int st = check_init();
  if (st) return st;
  if (out == NULL) return fail(SIM_ERROR_INVALID_VALUE, "NULL output");
  struct resolved r;
  pthread_rwlock_rdlock(&g.table_lock);
  st = resolve_locked(ptr, 0, "address", &r);
  if (st == SIM_SUCCESS)
    *out = (struct sim_ptr_info){r.kind, r.device, r.a ? (void*)r.a->base : NULL,
                                 r.a ? r.a->size : 0, r.a ? r.a->id : 0};
  pthread_rwlock_unlock(&g.table_lock);
  return st;
}

uint64_t sim_live_allocations(void) {
  pthread_rwlock_rdlock(&g.table_lock);
  uint64_t n = g.live;
  pthread_rwlock_unlock(&g.table_lock);
  return n;
}

/* Device memory's bytes: a memfd mapped shared, so that an IPC handle can
 * name it to another process (/proc/PID/fd/FD); malloc'd memory when no
 * descriptor is left (such memory cannot be exported). */
static unsigned char* device_backing(size_t size, int* out_fd) {
  *out_fd = -1;
  int fd = memfd_create("adr-sim-device", MFD_CLOEXEC);
  if (fd >= 0) {
    void* p = ftruncate(fd, (off_t)size) == 0
                  ? mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                  : MAP_FAILED;
    if (p != MAP_FAILED) {
      *out_fd = fd;
      return p;
    }
    close(fd);
  }
  return malloc(size);
}

static void backing_free(struct alloc* a) {
  if (a->backing == NULL) return;
  if (a->fd >= 0 || a->ipc_opened) {
    munmap(a->backing, a->size);
    if (a->fd >= 0) close(a->fd);
    a->fd = -1;
  } else {
    free(a->backing);
  }
}

int sim_mem_alloc(int device, enum sim_mem_kind kind, size_t size, void** out) {
  int st = check_device(device);
  if (st) return st;
  if (out == NULL) return fail(SIM_ERROR_INVALID_VALUE, "NULL output pointer");
  if (size == 0) return fail(SIM_ERROR_INVALID_VALUE, "size 0");
  if (kind != SIM_MEM_DEVICE && kind != SIM_MEM_HOST && kind != SIM_MEM_MANAGED)
    return fail(SIM_ERROR_INVALID_VALUE, "bad memory kind %d", (int)kind);
  if (knob_fails())
    return fail(SIM_ERROR_OUT_OF_MEMORY, "allocation of %zu bytes failed (ADR_SIM_ALLOC_FAIL)",
                size);
  struct device* d = &g.dev[device];
  struct alloc* a = calloc(1, sizeof(*a));
  if (a == NULL) return fail(SIM_ERROR_OUT_OF_MEMORY, "out of host memory");
  a->size = size;
  a->kind = kind;
  a->device = device;
  bool budget = kind != SIM_MEM_HOST;
  if (kind == SIM_MEM_DEVICE) {
    size_t rounded = (size + SIM_DEVICE_ALIGN - 1) & ~(size_t)(SIM_DEVICE_ALIGN - 1);
    if (rounded < size) rounded = SIZE_MAX;
    pthread_mutex_lock(&d->lock);
    uint64_t used = d->used;
    bool fits = size <= d->props.memory_total - used && rounded <= SIZE_MAX - SIM_GUARD;
    if (fits && rounded + SIM_GUARD > d->region_end - d->bump)
      fits = grow_region(d, rounded + SIM_GUARD);
    if (fits) {
      a->base = d->bump;
      d->bump += rounded + SIM_GUARD;
      d->used += size;
    }
    pthread_mutex_unlock(&d->lock);
    if (!fits) {
      free(a);
      return fail(SIM_ERROR_OUT_OF_MEMORY,
                  "device %d: %zu bytes do not fit (%" PRIu64 " of %" PRIu64 " bytes in use)",
                  device, size, used, d->props.memory_total);
    }
    a->backing = device_backing(size, &a->fd);
    if (a->backing != NULL) memset(a->backing, SIM_FILL, size);
  } else {
    if (budget) {
      pthread_mutex_lock(&d->lock);
      bool fits = size <= d->props.memory_total - d->used;
      if (fits) d->used += size;
      pthread_mutex_unlock(&d->lock);
      if (!fits) {
        free(a);
        return fail(SIM_ERROR_OUT_OF_MEMORY, "device %d: %zu bytes of managed memory do not fit",
                    device, size);
      }
    }
    size_t rounded = (size + SIM_HOST_ALIGN - 1) & ~(SIM_HOST_ALIGN - 1);
    a->fd = -1;
    a->backing = rounded >= size ? aligned_alloc(SIM_HOST_ALIGN, rounded) : NULL;
    a->base = (uintptr_t)a->backing;
  }
  if (a->backing == NULL) {
    if (budget) {
      pthread_mutex_lock(&d->lock);
      d->used -= size;
      pthread_mutex_unlock(&d->lock);
    }
    free(a);
    return fail(SIM_ERROR_OUT_OF_MEMORY, "out of host memory for %zu bytes", size);
  }
  pthread_rwlock_wrlock(&g.table_lock);
  st = table_insert(a);
  pthread_rwlock_unlock(&g.table_lock);
  if (st) {
    if (budget) {
      pthread_mutex_lock(&d->lock);
      d->used -= size;
      pthread_mutex_unlock(&d->lock);
    }
    backing_free(a);
    free(a);
    return st;
  }
  *out = (void*)a->base;
  return SIM_SUCCESS;
}

/* Releases the bytes of `a`, already marked A_FREEING/unlinked. */
static void release_alloc(struct alloc* a) {
  if (a->kind != SIM_MEM_REGISTERED) backing_free(a);
  a->backing = NULL;
  if ((a->kind == SIM_MEM_DEVICE && !a->ipc_opened) || a->kind == SIM_MEM_MANAGED) {
    struct device* d = &g.dev[a->device];
    pthread_mutex_lock(&d->lock);
    d->used -= a->size;
    pthread_mutex_unlock(&d->lock);
  }
  pthread_rwlock_wrlock(&g.table_lock);
  g.live--;
  if (a->kind == SIM_MEM_DEVICE) {
    a->state = A_FREED; /* stays in the table: its addresses are never reused */
  } else {
    table_remove(a);
    free(a);
  }
  pthread_rwlock_unlock(&g.table_lock);
}

/* Finds the live allocation starting at ptr and marks it A_FREEING. */
static int claim_for_free_ipc(void* ptr, enum sim_mem_kind kind, bool ipc, struct alloc** out);
static int claim_for_free(void* ptr, enum sim_mem_kind kind, struct alloc** out) {
  return claim_for_free_ipc(ptr, kind, false, out);
}

/* `ipc`: the allocation must be one opened from an IPC handle (closed, not
 * freed); otherwise it must not be. */
static int claim_for_free_ipc(void* ptr, enum sim_mem_kind kind, bool ipc, struct alloc** out) {
  int st = check_init();
  if (st) return st;
  if (ptr == NULL) return fail(SIM_ERROR_INVALID_VALUE, "NULL pointer");
  struct resolved r;
  pthread_rwlock_wrlock(&g.table_lock);
  st = resolve_locked(ptr, 0, "pointer", &r);
  if (st == SIM_SUCCESS && r.a == NULL)
    st = fail(kind == SIM_MEM_REGISTERED ? SIM_ERROR_NOT_REGISTERED : SIM_ERROR_INVALID_VALUE,
              "%p is not an allocation of the simulated driver", ptr);
  else if (st == SIM_SUCCESS && r.a->base != (uintptr_t)ptr)
    st = fail(kind == SIM_MEM_REGISTERED ? SIM_ERROR_NOT_REGISTERED : SIM_ERROR_INVALID_VALUE,
              "%p is inside, not at the start of, the allocation at %p", ptr, (void*)r.a->base);
  else if (st == SIM_SUCCESS &&
           !(r.kind == kind || (kind == SIM_MEM_DEVICE && r.kind == SIM_MEM_MANAGED)))
    st = fail(kind == SIM_MEM_REGISTERED ? SIM_ERROR_NOT_REGISTERED : SIM_ERROR_INVALID_VALUE,
              "%p is memory of kind %d, freed as kind %d", ptr, (int)r.kind, (int)kind);
  else if (st == SIM_SUCCESS && r.a->ipc_opened != ipc)
    st = fail(SIM_ERROR_INVALID_VALUE,
              ipc ? "%p was not opened from an IPC handle"
                  : "%p was opened from an IPC handle: close it, do not free it",
              ptr);
  if (st == SIM_SUCCESS) {
    r.a->state = A_FREEING;
    *out = r.a;
  }
  pthread_rwlock_unlock(&g.table_lock);
  return st;
}

static void drain_all_streams(void);

int sim_mem_free(void* ptr, enum sim_mem_kind kind) {
  struct alloc* a = NULL;
  int st = claim_for_free(ptr, kind, &a);
  if (st) return st;
  drain_all_streams();
  release_alloc(a);
  return SIM_SUCCESS;
}

int sim_mem_register(int device, void* ptr, size_t size) {
  int st = check_device(device);
  if (st) return st;
  if (ptr == NULL || size == 0) return fail(SIM_ERROR_INVALID_VALUE, "NULL pointer or size 0");
  uintptr_t p = (uintptr_t)ptr;
  if (size > UINTPTR_MAX - p) return fail(SIM_ERROR_INVALID_VALUE, "[%p, +%zu) wraps", ptr, size);
  struct alloc* a = calloc(1, sizeof(*a));
  if (a == NULL) return fail(SIM_ERROR_OUT_OF_MEMORY, "out of host memory");
  *a = (struct alloc){p, size, SIM_MEM_REGISTERED, device, A_LIVE, ptr, 0, -1, false};
  pthread_rwlock_wrlock(&g.table_lock);
  ptrdiff_t i = table_floor(p + size - 1);
  if (in_device_region(p)) {
    st = fail(SIM_ERROR_INVALID_VALUE, "%p is device memory, not host memory", ptr);
  } else if (i >= 0 && g.allocs[i]->base + g.allocs[i]->size > p) {
    st = fail(SIM_ERROR_ALREADY_REGISTERED, "[%p, +%zu) overlaps known host memory at %p", ptr,
              size, (void*)g.allocs[i]->base);
  } else {
    st = table_insert(a);
  }
  pthread_rwlock_unlock(&g.table_lock);
  if (st) free(a);
  return st;
}

int sim_mem_unregister(void* ptr) {
  struct alloc* a = NULL;
  int st = claim_for_free(ptr, SIM_MEM_REGISTERED, &a);
  if (st) return st;
  drain_all_streams();
  release_alloc(a);
  return SIM_SUCCESS;
}

/* ---- IPC memory --------------------------------------------------------- */

#define IPC_MAGIC 0x49504353u /* "SCPI" */

/* What an IPC handle holds: the exporter's process and the descriptor of
 * the memfd (opened through /proc/PID/fd/FD, checked against its inode). */
struct ipc_payload {
  uint32_t magic;
  int32_t pid;
  int32_t fd;
  int32_t device;
  uint64_t size;
  uint64_t ino;
  uint64_t dev;
  uint64_t id;
};
_Static_assert(sizeof(struct ipc_payload) <= SIM_IPC_HANDLE_SIZE, "IPC payload size");

static int ipc_fill(int fd, int device, uint64_t size, uint64_t id, unsigned char* out) {
  struct stat st;
  if (fstat(fd, &st) != 0) return fail(SIM_ERROR_INVALID_VALUE, "fstat of the memfd failed");
  struct ipc_payload p = {IPC_MAGIC, (int32_t)getpid(), fd, device, size, (uint64_t)st.st_ino,
                          (uint64_t)st.st_dev, id};
  memset(out, 0, SIM_IPC_HANDLE_SIZE);
  memcpy(out, &p, sizeof(p));
  return SIM_SUCCESS;
}

/* Opens the exporter's memfd named by a handle: a descriptor or -1 (with
 * the failure in *status). */
static int ipc_open_fd(const unsigned char* h, struct ipc_payload* out, int* status) {
  memcpy(out, h, sizeof(*out));
  if (out->magic != IPC_MAGIC) {
    *status = fail(SIM_ERROR_INVALID_VALUE, "not an IPC handle of the simulator");
    return -1;
  }
  if (out->pid == (int32_t)getpid()) {
    /* As the drivers: a process cannot open its own handles. */
    *status = fail(SIM_ERROR_INVALID_CONTEXT,
                   "the handle was exported by this process (open it in another one)");
    return -1;
  }
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)out->pid, (int)out->fd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || (uint64_t)st.st_ino != out->ino ||
      (uint64_t)st.st_dev != out->dev) {
    if (fd >= 0) close(fd);
    *status = fail(SIM_ERROR_INVALID_VALUE,
                   "the exporting process %d or its allocation is gone (%s)", (int)out->pid,
                   path);
    return -1;
  }
  return fd;
}

int sim_ipc_mem_get(void* ptr, unsigned char* out) {
  int st = check_init();
  if (st) return st;
  if (out == NULL) return fail(SIM_ERROR_INVALID_VALUE, "NULL output");
  struct resolved r;
  int fd = -1;
  uint64_t size = 0, id = 0;
  int device = -1;
  pthread_rwlock_rdlock(&g.table_lock);
  st = resolve_locked(ptr, 0, "pointer", &r);
  if (st == SIM_SUCCESS && (r.a == NULL || r.kind != SIM_MEM_DEVICE))
    st = fail(SIM_ERROR_INVALID_VALUE, "%p is not device memory", ptr);
  else if (st == SIM_SUCCESS && r.a->base != (uintptr_t)ptr)
    st = fail(SIM_ERROR_INVALID_VALUE, "%p is inside, not at the start of, an allocation", ptr);
  else if (st == SIM_SUCCESS && (r.a->fd < 0 || r.a->ipc_opened))
    st = fail(SIM_ERROR_INVALID_VALUE, "%p cannot be exported (%s)", ptr,
              r.a->ipc_opened ? "it was opened from a handle" : "no memfd behind it");
  if (st == SIM_SUCCESS) {
    fd = r.a->fd;
    size = r.a->size;
    id = r.a->id;
    device = r.a->device;
  }
  pthread_rwlock_unlock(&g.table_lock);
  return st ? st : ipc_fill(fd, device, size, id, out);
}

int sim_ipc_mem_open(int device, const unsigned char* handle, void** out) {
  int st = check_device(device);
  if (st) return st;
  if (handle == NULL || out == NULL) return fail(SIM_ERROR_INVALID_VALUE, "NULL argument");
  struct ipc_payload p;
  int fd = ipc_open_fd(handle, &p, &st);
  if (fd < 0) return st;
  if (p.device != device) {
    close(fd);
    return fail(SIM_ERROR_INVALID_DEVICE, "the handle is of device %d, not %d", p.device, device);
  }
  void* m = mmap(NULL, (size_t)p.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (m == MAP_FAILED) return fail(SIM_ERROR_OUT_OF_MEMORY, "cannot map %llu bytes",
                                   (unsigned long long)p.size);
  struct alloc* a = calloc(1, sizeof(*a));
  struct device* d = &g.dev[device];
  size_t rounded = ((size_t)p.size + SIM_DEVICE_ALIGN - 1) & ~(size_t)(SIM_DEVICE_ALIGN - 1);
  bool fits = a != NULL;
  if (fits) {
    pthread_mutex_lock(&d->lock);
    if (rounded + SIM_GUARD > d->region_end - d->bump) fits = grow_region(d, rounded + SIM_GUARD);
    if (fits) {
      a->base = d->bump;
      d->bump += rounded + SIM_GUARD;
    }
    pthread_mutex_unlock(&d->lock);
  }
  if (!fits) {
    munmap(m, (size_t)p.size);
    free(a);
    return fail(SIM_ERROR_OUT_OF_MEMORY, "no device address space for an IPC mapping");
  }
  a->size = (size_t)p.size;
  a->kind = SIM_MEM_DEVICE;
  a->device = device;
  a->backing = m;
  a->fd = -1;
  a->ipc_opened = true;
  pthread_rwlock_wrlock(&g.table_lock);
  st = table_insert(a);
  pthread_rwlock_unlock(&g.table_lock);
  if (st) {
    munmap(m, a->size);
    free(a);
    return st;
  }
  *out = (void*)a->base;
  return SIM_SUCCESS;
}

int sim_ipc_mem_close(void* ptr) {
  struct alloc* a = NULL;
  int st = claim_for_free_ipc(ptr, SIM_MEM_DEVICE, true, &a);
  if (st) return st;
  drain_all_streams();
  release_alloc(a);
  return SIM_SUCCESS;
}

/* ---- streams ------------------------------------------------------------ */

enum item_kind { IT_COPY, IT_MEMSET, IT_RECORD, IT_WAIT, IT_FREE, IT_HOST_FUNC };

struct item {
  struct item* next;
  enum item_kind kind;
  union {
    struct {
      unsigned char* dst;
      const unsigned char* src;
      size_t size;
      unsigned char* owned; /* snapshot of pageable source, freed after */
    } copy;
    struct {
      unsigned char* dst;
      unsigned char value;
      size_t size;
    } set;
    struct {
      struct sim_event* event;
      uint64_t gen;
    } ev;
    struct alloc* free;
    struct {
      void (*fn)(void*);
      void* arg;
    } host;
  } u;
};

#define STREAM_MAGIC 0x5354524d
#define EVENT_MAGIC 0x4556454e

struct sim_stream {
  uint32_t magic;
  int device;
  unsigned flags;
  bool destroying;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t work; /* queue non-empty or destroying */
  pthread_cond_t idle; /* completed advanced */
  struct item *head, *tail;
  uint64_t enqueued, completed;
};

struct sim_event {
  uint32_t magic;
  int device;
  unsigned flags;
  int refs; /* the handle + queued items; guarded by lock */
  pthread_mutex_t lock;
  pthread_cond_t done;
  uint64_t recorded, completed; /* generations */
  /* Interprocess events: the generations mirrored in a shared page (its
   * memfd kept for handles); an opened one reads only the page. */
  struct ipc_event_page* page;
  int page_fd;
  bool ipc_opened;
  int owner_pid;
};

struct ipc_event_page {
  _Atomic uint64_t recorded, completed;
};

static void event_unref(struct sim_event* e) {
  pthread_mutex_lock(&e->lock);
  int refs = --e->refs;
  pthread_mutex_unlock(&e->lock);
  if (refs == 0) {
    e->magic = 0;
    if (e->page != NULL) munmap(e->page, sizeof(*e->page));
    if (e->page_fd >= 0) close(e->page_fd);
    pthread_mutex_destroy(&e->lock);
    pthread_cond_destroy(&e->done);
    free(e);
  }
}

static void sleep_us(unsigned us) {
  struct timespec ts = {us / 1000000u, (long)(us % 1000000u) * 1000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* An opened interprocess event: waits until the exporter completed
 * generation `target`; false when the exporter died first. */
static bool ipc_event_wait(struct sim_event* e, uint64_t target) {
  while (atomic_load(&e->page->completed) < target) {
    if (kill(e->owner_pid, 0) != 0 && errno == ESRCH) return false;
    sleep_us(100);
  }
  return true;
}

/* The drivers do not promise anything for overlapping ranges; a copy
 * engine streams front to back. So does the simulator: overlapping copies
 * towards higher addresses come out wrong, as they may on hardware, and
 * only a caller that never relies on the driver for them gets memmove
 * semantics. */
static void copy_front_to_back(void* dst, const void* src, size_t size) {
  unsigned char* d = dst;
  const unsigned char* s = src;
  if (d <= s || d >= s + size) {
    memmove(d, s, size);
    return;
  }
  for (size_t i = 0; i < size; i++) d[i] = s[i];
}

static void execute(struct item* it) {
  unsigned delay = g.delay_us;
  switch (it->kind) {
    case IT_COPY:
      if (delay) sleep_us(delay);
      copy_front_to_back(it->u.copy.dst, it->u.copy.src, it->u.copy.size);
      free(it->u.copy.owned);
      break;
    case IT_MEMSET:
      if (delay) sleep_us(delay);
      memset(it->u.set.dst, it->u.set.value, it->u.set.size);
      break;
    case IT_RECORD: {
      struct sim_event* e = it->u.ev.event;
      pthread_mutex_lock(&e->lock);
      if (e->completed < it->u.ev.gen) e->completed = it->u.ev.gen;
      if (e->page != NULL) atomic_store(&e->page->completed, e->completed);
      pthread_cond_broadcast(&e->done);
      pthread_mutex_unlock(&e->lock);
      event_unref(e);
      break;
    }
    case IT_WAIT: {
      struct sim_event* e = it->u.ev.event;
      if (e->ipc_opened) {
        ipc_event_wait(e, it->u.ev.gen);
        event_unref(e);
        break;
      }
      pthread_mutex_lock(&e->lock);
      while (e->completed < it->u.ev.gen) pthread_cond_wait(&e->done, &e->lock);
      pthread_mutex_unlock(&e->lock);
      event_unref(e);
      break;
    }
    case IT_FREE:
      release_alloc(it->u.free);
      break;
    case IT_HOST_FUNC:
      it->u.host.fn(it->u.host.arg);
      break;
  }
}

static void handles_remove(void** arr, size_t* n, void* h) {
  for (size_t i = 0; i < *n; i++) {
    if (arr[i] == h) {
      arr[i] = arr[--*n];
      return;
    }
  }
}

static void* stream_main(void* arg) {
  struct sim_stream* s = arg;
  pthread_mutex_lock(&s->lock);
  for (;;) {
    while (s->head == NULL && !s->destroying) pthread_cond_wait(&s->work, &s->lock);
    if (s->head == NULL) break; /* destroying and drained */
    struct item* it = s->head;
    s->head = it->next;
    if (s->head == NULL) s->tail = NULL;
    pthread_mutex_unlock(&s->lock);
    execute(it);
    free(it);
    pthread_mutex_lock(&s->lock);
    s->completed++;
    pthread_cond_broadcast(&s->idle);
  }
  pthread_mutex_unlock(&s->lock);
  /* Leave the handle set; a drain in progress holds its lock, so the
   * stream is never freed under it. */
  pthread_mutex_lock(&g.handles_lock);
  handles_remove((void**)g.streams, &g.nstreams, s);
  /* Queue this thread for joining (threads are joinable so that none is
   * left running, or half-exited, when the process ends). Without room it
   * detaches itself instead. */
  bool queued = false;
  if (g.nzombies == g.zombie_cap) {
    size_t cap = g.zombie_cap ? g.zombie_cap * 2 : 16;
    pthread_t* z = realloc(g.zombies, cap * sizeof(*z));
    if (z != NULL) {
      g.zombies = z;
      g.zombie_cap = cap;
    }
  }
  if (g.nzombies < g.zombie_cap) {
    g.zombies[g.nzombies++] = pthread_self();
    queued = true;
  }
  pthread_cond_broadcast(&g.stream_gone);
  pthread_mutex_unlock(&g.handles_lock);
  if (!queued) pthread_detach(pthread_self());
  s->magic = 0;
  pthread_mutex_destroy(&s->lock);
  pthread_cond_destroy(&s->work);
  pthread_cond_destroy(&s->idle);
  free(s);
  return NULL;
}

static int handles_add(void*** arr, size_t* n, size_t* cap, void* h) {
  if (*n == *cap) {
    size_t c = *cap ? *cap * 2 : 32;
    void** a = realloc(*arr, c * sizeof(*a));
    if (a == NULL) return fail(SIM_ERROR_OUT_OF_MEMORY, "handle table cannot grow");
    *arr = a;
    *cap = c;
  }
  (*arr)[(*n)++] = h;
  return SIM_SUCCESS;
}

static bool handles_has(void* const* arr, size_t n, const void* h) {
  for (size_t i = 0; i < n; i++)
    if (arr[i] == h) return true;
  return false;
}

static int check_stream(struct sim_stream* s) {
  int st = check_init();
  if (st) return st;
  pthread_mutex_lock(&g.handles_lock);
  bool ok = s != NULL && handles_has((void* const*)g.streams, g.nstreams, s) && !s->destroying;
  pthread_mutex_unlock(&g.handles_lock);
  return ok ? SIM_SUCCESS : fail(SIM_ERROR_INVALID_HANDLE, "%p is not a live stream", (void*)s);
}

static int check_event(struct sim_event* e) {
  int st = check_init();
  if (st) return st;
  pthread_mutex_lock(&g.handles_lock);
  bool ok = e != NULL && handles_has((void* const*)g.events, g.nevents, e);
  pthread_mutex_unlock(&g.handles_lock);
  return ok ? SIM_SUCCESS : fail(SIM_ERROR_INVALID_HANDLE, "%p is not a live event", (void*)e);
}

/* Joins the threads of streams that have finished. */
static void reap_zombies(void) {
  pthread_mutex_lock(&g.handles_lock);
  pthread_t* z = g.zombies;
  size_t n = g.nzombies;
  g.zombies = NULL;
  g.nzombies = g.zombie_cap = 0;
  pthread_mutex_unlock(&g.handles_lock);
  for (size_t i = 0; i < n; i++) pthread_join(z[i], NULL);
  free(z);
}

/* At exit (library destructors run after the application's atexit work,
 * where backends destroy their streams): let every stream finish its queue
 * and end, and join the threads, so no simulator thread outlives the
 * process's last look at its memory. Gives up after ~5 s (a stream blocked
 * in a host function that never returns). */
__attribute__((destructor)) static void sim_fini(void) {
  if (g.status != SIM_SUCCESS) return;
  pthread_mutex_lock(&g.handles_lock);
  for (size_t i = 0; i < g.nstreams; i++) {
    struct sim_stream* s = g.streams[i];
    pthread_mutex_lock(&s->lock);
    s->destroying = true;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->lock);
  }
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 5;
  int rc = 0;
  while (g.nstreams > 0 && rc == 0)
    rc = pthread_cond_timedwait(&g.stream_gone, &g.handles_lock, &deadline);
  bool drained = g.nstreams == 0;
  pthread_mutex_unlock(&g.handles_lock);
  if (drained) reap_zombies();
}

int sim_stream_create(int device, unsigned flags, struct sim_stream** out) {
  int st = check_device(device);
  if (st) return st;
  reap_zombies();
  if (out == NULL) return fail(SIM_ERROR_INVALID_VALUE, "NULL output");
  struct sim_stream* s = calloc(1, sizeof(*s));
  if (s == NULL) return fail(SIM_ERROR_OUT_OF_MEMORY, "out of host memory");
  s->magic = STREAM_MAGIC;
  s->device = device;
  s->flags = flags;
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->work, NULL);
  pthread_cond_init(&s->idle, NULL);
  pthread_mutex_lock(&g.handles_lock);
  st = handles_add((void***)&g.streams, &g.nstreams, &g.stream_cap, s);
  if (st == SIM_SUCCESS) {
    int rc = pthread_create(&s->thread, NULL, stream_main, s);
    if (rc != 0) {
      handles_remove((void**)g.streams, &g.nstreams, s);
      st = fail(SIM_ERROR_OUT_OF_MEMORY, "cannot start the stream thread: %s", strerror(rc));
    }
  }
  pthread_mutex_unlock(&g.handles_lock);
  if (st) {
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->work);
    pthread_cond_destroy(&s->idle);
    free(s);
    return st;
  }
  *out = s;
  return SIM_SUCCESS;
}

int sim_stream_destroy(struct sim_stream* s) {
  int st = check_init();
  if (st) return st;
  pthread_mutex_lock(&g.handles_lock);
  bool ok = s != NULL && handles_has((void* const*)g.streams, g.nstreams, s) && !s->destroying;
  if (ok) {
    pthread_mutex_lock(&s->lock);
    s->destroying = true;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->lock);
  }
  pthread_mutex_unlock(&g.handles_lock);
  return ok ? SIM_SUCCESS : fail(SIM_ERROR_INVALID_HANDLE, "%p is not a live stream", (void*)s);
}

static void wait_ticket(struct sim_stream* s, uint64_t ticket) {
  pthread_mutex_lock(&s->lock);
  while (s->completed < ticket) pthread_cond_wait(&s->idle, &s->lock);
  pthread_mutex_unlock(&s->lock);
}

int sim_stream_synchronize(struct sim_stream* s) {
  int st = check_stream(s);
  if (st) return st;
  pthread_mutex_lock(&s->lock);
  uint64_t t = s->enqueued;
  pthread_mutex_unlock(&s->lock);
  wait_ticket(s, t);
  return SIM_SUCCESS;
}

int sim_stream_query(struct sim_stream* s) {
  int st = check_stream(s);
  if (st) return st;
  pthread_mutex_lock(&s->lock);
  bool idle = s->completed == s->enqueued;
  pthread_mutex_unlock(&s->lock);
  return idle ? SIM_SUCCESS : SIM_ERROR_NOT_READY;
}

int sim_stream_info(struct sim_stream* s, int* out_device, unsigned* out_flags) {
  int st = check_stream(s);
  if (st) return st;
  if (out_device) *out_device = s->device;
  if (out_flags) *out_flags = s->flags;
  return SIM_SUCCESS;
}

/* Waits for everything queued so far on the streams of `device` (-1: all).
 * Holds the handle lock so no stream is freed meanwhile; stream threads
 * never need it before they have drained. */
static void drain_streams(int device) {
  pthread_mutex_lock(&g.handles_lock);
  for (size_t i = 0; i < g.nstreams; i++) {
    struct sim_stream* s = g.streams[i];
    if (device >= 0 && s->device != device) continue;
    pthread_mutex_lock(&s->lock);
    uint64_t t = s->enqueued;
    while (s->completed < t) pthread_cond_wait(&s->idle, &s->lock);
    pthread_mutex_unlock(&s->lock);
  }
  pthread_mutex_unlock(&g.handles_lock);
}

static void drain_all_streams(void) {
  drain_streams(-1);
}

int sim_device_synchronize(int device) {
  int st = check_device(device);
  if (st) return st;
  drain_streams(device);
  return SIM_SUCCESS;
}

/* Appends `it` and returns its ticket. */
static uint64_t enqueue(struct sim_stream* s, struct item* it) {
  it->next = NULL;
  pthread_mutex_lock(&s->lock);
  if (s->tail)
    s->tail->next = it;
  else
    s->head = it;
  s->tail = it;
  uint64_t t = ++s->enqueued;
  pthread_cond_signal(&s->work);
  pthread_mutex_unlock(&s->lock);
  return t;
}

static struct item* new_item(enum item_kind kind) {
  struct item* it = calloc(1, sizeof(*it));
  if (it) it->kind = kind;
  return it;
}

/* Host memory for the drivers' copy rules (not device or managed). */
static bool is_host_kind(enum sim_mem_kind kind) {
  return kind == SIM_MEM_NONE || kind == SIM_MEM_HOST || kind == SIM_MEM_REGISTERED;
}

int sim_memcpy_async(void* dst, const void* src, size_t size, int allow_peer,
                     struct sim_stream* s) {
  int st = check_stream(s);
  if (st) return st;
  if (dst == NULL || src == NULL) return fail(SIM_ERROR_INVALID_VALUE, "NULL pointer");
  if (size == 0) return SIM_SUCCESS;
  struct resolved rd, rs;
  pthread_rwlock_rdlock(&g.table_lock);
  st = resolve_locked(dst, size, "destination", &rd);
  if (st == SIM_SUCCESS) st = resolve_locked(src, size, "source", &rs);
  pthread_rwlock_unlock(&g.table_lock);
  if (st) return st;
  if (!allow_peer) {
    if (rd.kind == SIM_MEM_DEVICE && rd.device != s->device)
      return fail(SIM_ERROR_WRONG_DEVICE, "destination %p is memory of device %d, stream is on %d",
                  dst, rd.device, s->device);
    if (rs.kind == SIM_MEM_DEVICE && rs.device != s->device)
      return fail(SIM_ERROR_WRONG_DEVICE, "source %p is memory of device %d, stream is on %d", src,
                  rs.device, s->device);
  }
  struct item* it = new_item(IT_COPY);
  if (it == NULL) return fail(SIM_ERROR_OUT_OF_MEMORY, "out of host memory");
  it->u.copy.dst = rd.at;
  it->u.copy.src = rs.at;
  it->u.copy.size = size;
  if (rs.kind == SIM_MEM_NONE && rd.kind != SIM_MEM_NONE) {
    /* Pageable source: the drivers stage it before returning. */
    it->u.copy.owned = malloc(size);
    if (it->u.copy.owned == NULL) {
      free(it);
      return fail(SIM_ERROR_OUT_OF_MEMORY, "out of host memory staging %zu bytes", size);
    }
    memcpy(it->u.copy.owned, rs.at, size);
    it->u.copy.src = it->u.copy.owned;
  }
  uint64_t t = enqueue(s, it);
  /* Synchronous, as the drivers document: a pageable destination, and any
   * copy between two host buffers (pageable, pinned or registered), which
   * waits for the stream's earlier work first. A copy between host memory
   * and managed memory behaves the same way on hardware (an H200 with
   * driver 580 blocked a 64-byte pageable-to-managed upload on a gated
   * stream), so it does here too. */
  bool host_d = is_host_kind(rd.kind), host_s = is_host_kind(rs.kind);
  if (rd.kind == SIM_MEM_NONE || (host_d && host_s) ||
      (host_d && rs.kind == SIM_MEM_MANAGED) || (host_s && rd.kind == SIM_MEM_MANAGED))
    wait_ticket(s, t);
  return SIM_SUCCESS;
}

int sim_memset_async(void* dst, unsigned char value, size_t size, struct sim_stream* s) {
  int st = check_stream(s);
  if (st) return st;
  if (dst == NULL) return fail(SIM_ERROR_INVALID_VALUE, "NULL pointer");
  if (size == 0) return SIM_SUCCESS;
  struct resolved rd;
  pthread_rwlock_rdlock(&g.table_lock);
  st = resolve_locked(dst, size, "destination", &rd);
  pthread_rwlock_unlock(&g.table_lock);
  if (st) return st;
  if (rd.kind == SIM_MEM_NONE)
    return fail(SIM_ERROR_INVALID_VALUE, "%p is pageable host memory, not device-accessible", dst);
  if (rd.kind == SIM_MEM_DEVICE && rd.device != s->device)
    return fail(SIM_ERROR_WRONG_DEVICE, "%p is memory of device %d, stream is on %d", dst,
                rd.device, s->device);
  struct item* it = new_item(IT_MEMSET);
  if (it == NULL) return fail(SIM_ERROR_OUT_OF_MEMORY, "out of host memory");
  it->u.set.dst = rd.at;
  it->u.set.value = value;
  it->u.set.size = size;
  enqueue(s, it);
  return SIM_SUCCESS;
}

int sim_mem_alloc_async(size_t size, struct sim_stream* s, void** out) {
  int st = check_stream(s);
  if (st) return st;
  return sim_mem_alloc(s->device, SIM_MEM_DEVICE, size, out);
}

int sim_mem_free_async(void* ptr, struct sim_stream* s) {
  int st = check_stream(s);
  if (st) return st;
  struct item* it = new_item(IT_FREE);
  if (it == NULL) return fail(SIM_ERROR_OUT_OF_MEMORY, "out of host memory");
  struct alloc* a = NULL;
  st = claim_for_free(ptr, SIM_MEM_DEVICE, &a);
  if (st) {
    free(it);
    return st;
  }
  it->u.free = a;
  enqueue(s, it);
  return SIM_SUCCESS;
}

int sim_host_func_async(struct sim_stream* s, void (*fn)(void*), void* arg) {
  int st = check_stream(s);
  if (st) return st;
  if (fn == NULL) return fail(SIM_ERROR_INVALID_VALUE, "NULL function");
  struct item* it = new_item(IT_HOST_FUNC);
  if (it == NULL) return fail(SIM_ERROR_OUT_OF_MEMORY, "out of host memory");
  it->u.host.fn = fn;
  it->u.host.arg = arg;
  enqueue(s, it);
  return SIM_SUCCESS;
}

/* ---- events ------------------------------------------------------------- */

int sim_event_create(int device, unsigned flags, struct sim_event** out) {
  int st = check_device(device);
  if (st) return st;
  if (out == NULL) return fail(SIM_ERROR_INVALID_VALUE, "NULL output");
  struct sim_event* e = calloc(1, sizeof(*e));
  if (e == NULL) return fail(SIM_ERROR_OUT_OF_MEMORY, "out of host memory");
  e->magic = EVENT_MAGIC;
  e->device = device;
  e->flags = flags;
  e->refs = 1;
  e->page_fd = -1;
  if (flags & SIM_EVENT_INTERPROCESS) {
    int fd = memfd_create("adr-sim-event", MFD_CLOEXEC);
    void* p = fd >= 0 && ftruncate(fd, sizeof(struct ipc_event_page)) == 0
                  ? mmap(NULL, sizeof(struct ipc_event_page), PROT_READ | PROT_WRITE, MAP_SHARED,
                         fd, 0)
                  : MAP_FAILED;
    if (p == MAP_FAILED) {
      if (fd >= 0) close(fd);
      free(e);
      return fail(SIM_ERROR_OUT_OF_MEMORY, "no shared page for an interprocess event");
    }
    e->page = p;
    e->page_fd = fd;
  }
  pthread_mutex_init(&e->lock, NULL);
  pthread_cond_init(&e->done, NULL);
  pthread_mutex_lock(&g.handles_lock);
  st = handles_add((void***)&g.events, &g.nevents, &g.event_cap, e);
  pthread_mutex_unlock(&g.handles_lock);
  if (st) {
    pthread_mutex_destroy(&e->lock);
    pthread_cond_destroy(&e->done);
    free(e);
    return st;
  }
  *out = e;
  return SIM_SUCCESS;
}

int sim_event_destroy(struct sim_event* e) {
  int st = check_init();
  if (st) return st;
  pthread_mutex_lock(&g.handles_lock);
  bool ok = e != NULL && handles_has((void* const*)g.events, g.nevents, e);
  if (ok) handles_remove((void**)g.events, &g.nevents, e);
  pthread_mutex_unlock(&g.handles_lock);
  if (!ok) return fail(SIM_ERROR_INVALID_HANDLE, "%p is not a live event", (void*)e);
  event_unref(e);
  return SIM_SUCCESS;
}

int sim_event_record(struct sim_event* e, struct sim_stream* s) {
  int st = check_event(e);
  if (st == SIM_SUCCESS) st = check_stream(s);
  if (st) return st;
  struct item* it = new_item(IT_RECORD);
  if (it == NULL) return fail(SIM_ERROR_OUT_OF_MEMORY, "out of host memory");
  /* The generation is taken under the stream's queue order: record and
   * enqueue happen together so two records on one stream stay ordered. */
  pthread_mutex_lock(&e->lock);
  it->u.ev.gen = ++e->recorded;
  if (e->page != NULL) atomic_store(&e->page->recorded, e->recorded);
  e->refs++;
  pthread_mutex_unlock(&e->lock);
  it->u.ev.event = e;
  enqueue(s, it);
  return SIM_SUCCESS;
}

int sim_event_query(struct sim_event* e) {
  int st = check_event(e);
  if (st) return st;
  if (e->ipc_opened)
    return atomic_load(&e->page->completed) >= atomic_load(&e->page->recorded)
               ? SIM_SUCCESS
               : SIM_ERROR_NOT_READY;
  pthread_mutex_lock(&e->lock);
  bool done = e->completed >= e->recorded;
  pthread_mutex_unlock(&e->lock);
  return done ? SIM_SUCCESS : SIM_ERROR_NOT_READY;
}

int sim_event_synchronize(struct sim_event* e) {
  int st = check_event(e);
  if (st) return st;
  if (e->ipc_opened)
    return ipc_event_wait(e, atomic_load(&e->page->recorded))
               ? SIM_SUCCESS
               : fail(SIM_ERROR_INVALID_HANDLE, "the process that exported the event is gone");
  pthread_mutex_lock(&e->lock);
  uint64_t target = e->recorded;
  while (e->completed < target) pthread_cond_wait(&e->done, &e->lock);
  pthread_mutex_unlock(&e->lock);
  return SIM_SUCCESS;
}

int sim_stream_wait_event(struct sim_stream* s, struct sim_event* e) {
  int st = check_stream(s);
  if (st == SIM_SUCCESS) st = check_event(e);
  if (st) return st;
  pthread_mutex_lock(&e->lock);
  uint64_t target = e->ipc_opened ? atomic_load(&e->page->recorded) : e->recorded;
  bool pending = e->ipc_opened ? atomic_load(&e->page->completed) < target : e->completed < target;
  if (pending) e->refs++;
  pthread_mutex_unlock(&e->lock);
  if (!pending) return SIM_SUCCESS; /* never recorded or already complete */
  struct item* it = new_item(IT_WAIT);
  if (it == NULL) {
    event_unref(e);
    return fail(SIM_ERROR_OUT_OF_MEMORY, "out of host memory");
  }
  it->u.ev.event = e;
  it->u.ev.gen = target;
  enqueue(s, it);
  return SIM_SUCCESS;
}

int sim_event_info(struct sim_event* e, int* out_device, unsigned* out_flags) {
  int st = check_event(e);
  if (st) return st;
  if (out_device) *out_device = e->device;
  if (out_flags) *out_flags = e->flags;
  return SIM_SUCCESS;
}

/* ---- IPC events ---------------------------------------------------------- */

int sim_event_ipc_get(struct sim_event* e, unsigned char* out) {
  int st = check_event(e);
  if (st) return st;
  if (out == NULL) return fail(SIM_ERROR_INVALID_VALUE, "NULL output");
  if (e->page == NULL || e->ipc_opened)
    return fail(SIM_ERROR_INVALID_VALUE, "the event was not created interprocess");
  return ipc_fill(e->page_fd, e->device, sizeof(struct ipc_event_page), 0, out);
}

int sim_event_ipc_open(int device, const unsigned char* handle, struct sim_event** out) {
  int st = check_device(device);
  if (st) return st;
  if (handle == NULL || out == NULL) return fail(SIM_ERROR_INVALID_VALUE, "NULL argument");
  struct ipc_payload p;
  int fd = ipc_open_fd(handle, &p, &st);
  if (fd < 0) return st;
  void* page = mmap(NULL, sizeof(struct ipc_event_page), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (page == MAP_FAILED) return fail(SIM_ERROR_OUT_OF_MEMORY, "cannot map the event's page");
  struct sim_event* e = NULL;
  st = sim_event_create(device, 0, &e);
  if (st) {
    munmap(page, sizeof(struct ipc_event_page));
    return st;
  }
  e->page = page;
  e->ipc_opened = true;
  e->owner_pid = p.pid;
  *out = e;
  return SIM_SUCCESS;
}
