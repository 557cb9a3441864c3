/* SPDX-License-Identifier: Apache-2.0
 *
 * sim_core: the vendor-neutral core of adr's GPU driver simulators.
 *
 * A TEST DOUBLE. It lets the CUDA and HIP backends (and the whole
 * conformance suite) run on a machine without a GPU. Front ends
 * (tests/sim/cuda: libcuda.so.1; tests/sim/hip: libamdhip64) translate their
 * vendor API onto these calls and map the SIM_* status codes to their own
 * result enums. See tests/sim/README.md for what is and is not modelled.
 *
 * Model:
 *  - Devices are numbered 0 .. sim_device_count()-1 (ADR_SIM_DEVICES,
 *    default 2). Each has a memory budget (ADR_SIM_MEMORY_MIB, default 4096).
 *  - Device memory lives at addresses in a reserved, inaccessible (PROT_NONE)
 *    range of the process, so the host dereferencing a device pointer
 *    crashes as it would on a GPU; the bytes are kept in separate host
 *    buffers the core reaches through its allocation table. Device addresses
 *    are never reused, so a freed pointer is always recognised as freed.
 *  - Pinned host memory, managed memory and registered host memory are
 *    ordinary host memory the allocation table knows about (host-accessible,
 *    device-accessible). Host memory the table does not know is "pageable".
 *  - Every allocation table lookup checks that an address is known and live
 *    and that [ptr, ptr + size) stays inside one allocation.
 *  - A stream is a thread executing its queue in order, asynchronously with
 *    respect to the host and to other streams. ADR_SIM_DELAY_US (default 0)
 *    makes every copy/memset sleep that long first, so a missing
 *    synchronisation gives stale data deterministically.
 *  - An event completes only when the stream that recorded it reaches the
 *    record; a stream wait on an event blocks that stream's thread until
 *    then. A never-recorded event is complete.
 *  - Pageable host memory in asynchronous copies behaves like the real
 *    drivers: host -> device snapshots the source when the call is made and
 *    returns; device -> pageable host returns only when the copy is done.
 *  - Allocation failure knob: ADR_SIM_ALLOC_FAIL=N makes the N-th (1-based)
 *    and every later device/host/managed allocation fail with
 *    SIM_ERROR_OUT_OF_MEMORY; "N:once" only the N-th. sim_alloc_fail_set()
 *    changes it at run time.
 *
 * Handles are validated: an unknown, destroyed or foreign stream/event
 * handle is SIM_ERROR_INVALID_HANDLE, never a crash.
 *
 * Threads: every function may be called from any thread. The allocation
 * table is guarded by a reader/writer lock, each stream and event by its
 * own mutex; no lock is held while a stream executes a copy.
 *
 * Linkage: built as the static library sim_core_lib (PIC) and linked into
 * each front end with hidden visibility, so each simulated driver has its
 * own private copy of this state.
 */
#ifndef ADR_SIM_CORE_H
#define ADR_SIM_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SIM_MAX_DEVICES 8

/* Status codes. Front ends map each to their own enum (CUresult,
 * hipError_t); sim_status_name() gives the core's name for logs. */
enum sim_status {
  SIM_SUCCESS = 0,
  SIM_ERROR_INVALID_VALUE = 1,       /* bad argument (NULL out pointer, bad flags) */
  SIM_ERROR_OUT_OF_MEMORY = 2,       /* budget exceeded or ADR_SIM_ALLOC_FAIL */
  SIM_ERROR_NOT_INITIALIZED = 3,     /* sim_init not called / failed */
  SIM_ERROR_INVALID_DEVICE = 4,      /* device ordinal out of range */
  SIM_ERROR_INVALID_HANDLE = 5,      /* unknown or destroyed stream/event */
  SIM_ERROR_NOT_READY = 6,           /* stream/event query: work pending */
  SIM_ERROR_UNKNOWN_POINTER = 7,     /* device-range address never allocated */
  SIM_ERROR_FREED_POINTER = 8,       /* address of a freed allocation */
  SIM_ERROR_OUT_OF_BOUNDS = 9,       /* range runs past the end of its allocation */
  SIM_ERROR_WRONG_DEVICE = 10,       /* memory of another device where not allowed */
  SIM_ERROR_ALREADY_REGISTERED = 11, /* host range overlaps a registered/pinned one */
  SIM_ERROR_NOT_REGISTERED = 12,     /* unregister of a range never registered */
  SIM_ERROR_NOT_SUPPORTED = 13,
  SIM_ERROR_INVALID_CONTEXT = 14, /* an IPC handle opened in its exporting process */
};

/* "SIM_ERROR_FREED_POINTER" ...; static string. */
const char* sim_status_name(int status);

/* Human-readable detail of the calling thread's last failure ("address
 * 0x7f.. is 16 bytes past the end of a 4096-byte allocation"); "" if none.
 * Thread-local, overwritten by the next failing call. */
const char* sim_last_message(void);

/* ---- lifetime and devices ----------------------------------------------- */

/* Reads the ADR_SIM_* environment variables once and sets up the devices.
 * Idempotent and thread-safe. A malformed variable is SIM_ERROR_INVALID_VALUE
 * (message in sim_last_message). */
int sim_init(void);

int sim_device_count(void);

/* The front end's name ("cuda", "hip"), defined by each front end: its
 * default UUIDs and PCI addresses differ, so two simulators in one process
 * are two GPUs unless the test says otherwise, and it names the
 * front end's own identity variables (ADR_SIM_<NAME>_UUIDS ...). */
extern const char sim_frontend_name[];

/* Fixed description of a device. Valid for the life of the process. */
struct sim_device_props {
  char name[64];         /* "adr simulated GPU 0" */
  uint64_t memory_total; /* bytes (the budget) */
  int pci_domain, pci_bus, pci_device, pci_function;
  unsigned char uuid[16]; /* stable per ordinal; ADR_SIM_UUIDS overrides */
  int integrated;         /* ADR_SIM_INTEGRATED=1: an integrated GPU */
  int cc_major, cc_minor; /* "compute capability" a front end may report */
  int multiprocessors;
};
/* NULL for an ordinal out of range. */
const struct sim_device_props* sim_device_props(int device);

/* Bytes of the budget not in use. */
int sim_mem_info(int device, uint64_t* out_free, uint64_t* out_total);

/* ---- memory ------------------------------------------------------------- */

enum sim_mem_kind {
  SIM_MEM_NONE = 0,       /* pageable host memory / unknown to the table */
  SIM_MEM_DEVICE = 1,     /* device memory: not host-accessible */
  SIM_MEM_HOST = 2,       /* pinned host allocation (cuMemHostAlloc) */
  SIM_MEM_MANAGED = 3,    /* managed memory: host- and device-accessible */
  SIM_MEM_REGISTERED = 4, /* application host memory page-locked by register */
};

/* Allocates `size` bytes of `kind` (DEVICE, HOST or MANAGED) for `device`,
 * aligned to at least 512 bytes (size 0 is SIM_ERROR_INVALID_VALUE, like
 * the drivers). Device memory is filled with 0xA5 so reads of uninitialised
 * or stale device data are visible. */
int sim_mem_alloc(int device, enum sim_mem_kind kind, size_t size, void** out);

/* Frees an allocation by its base address: waits until every stream has
 * drained what it had queued (as cuMemFree/hipFree synchronise; all devices,
 * since a peer copy may read the memory), then frees.
 * SIM_ERROR_UNKNOWN_POINTER / SIM_ERROR_FREED_POINTER / SIM_ERROR_INVALID_VALUE
 * (an address inside, not at the start of, an allocation). `kind` must match
 * the allocation's (DEVICE/MANAGED both accepted for device frees, as the
 * drivers do); a mismatch is SIM_ERROR_INVALID_VALUE. */
int sim_mem_free(void* ptr, enum sim_mem_kind kind);

/* Page-locks application host memory [ptr, ptr + size) for `device`.
 * SIM_ERROR_ALREADY_REGISTERED when it overlaps a known host range. */
int sim_mem_register(int device, void* ptr, size_t size);
/* ptr must be the base of a registered range. */
int sim_mem_unregister(void* ptr);

struct sim_ptr_info {
  enum sim_mem_kind kind; /* SIM_MEM_NONE for pageable/unknown host memory */
  int device;             /* owning device, -1 when kind is NONE */
  void* base;             /* allocation start */
  size_t size;            /* allocation size */
  uint64_t alloc_id;      /* unique, increasing per allocation */
};
/* Describes the allocation that contains `ptr`. Never fails for a host
 * address the table does not know (kind NONE). A device-range address that
 * is unknown or freed is SIM_ERROR_UNKNOWN_POINTER / SIM_ERROR_FREED_POINTER. */
int sim_ptr_query(const void* ptr, struct sim_ptr_info* out);

/* ---- streams ------------------------------------------------------------ */

struct sim_stream;

/* Creates a stream on `device` with its own worker thread. `flags` is kept
 * for the front end (sim_stream_flags) and not interpreted. */
int sim_stream_create(int device, unsigned flags, struct sim_stream** out);
/* Returns at once; the stream finishes its queued work, then its thread and
 * memory go (as cuStreamDestroy / hipStreamDestroy do). The handle is
 * invalid after the call. */
int sim_stream_destroy(struct sim_stream* stream);
int sim_stream_synchronize(struct sim_stream* stream);
/* SIM_SUCCESS when idle, SIM_ERROR_NOT_READY when work is pending. */
int sim_stream_query(struct sim_stream* stream);
/* Owning device and creation flags; SIM_ERROR_INVALID_HANDLE if unknown. */
int sim_stream_info(struct sim_stream* stream, int* out_device, unsigned* out_flags);
/* Blocks until every stream of `device` has drained. */
int sim_device_synchronize(int device);

/* Queue a copy of `size` bytes. Both ranges are checked against the
 * allocation table when the call is made (unknown/freed/out-of-bounds
 * errors are returned synchronously, nothing queued). `device` is the
 * stream's device; when `allow_peer` is 0, device memory of another device
 * on either side is SIM_ERROR_WRONG_DEVICE. Pageable host memory: see the
 * model above. */
int sim_memcpy_async(void* dst, const void* src, size_t size, int allow_peer,
                     struct sim_stream* stream);
/* Queue a fill of [dst, dst + size) with `value`; dst must be memory the
 * stream's device may write (its own device memory, or pinned/managed/
 * registered host memory): another device's memory is
 * SIM_ERROR_WRONG_DEVICE, pageable memory SIM_ERROR_INVALID_VALUE. */
int sim_memset_async(void* dst, unsigned char value, size_t size, struct sim_stream* stream);
/* Stream-ordered allocation: the address is returned at once and is valid
 * for work queued on `stream` after this call. */
int sim_mem_alloc_async(size_t size, struct sim_stream* stream, void** out);
/* Stream-ordered free: later calls see the pointer as freed at once; the
 * memory is released when the stream reaches the free. */
int sim_mem_free_async(void* ptr, struct sim_stream* stream);
/* Queue fn(arg) on the stream's thread. */
int sim_host_func_async(struct sim_stream* stream, void (*fn)(void*), void* arg);

/* ---- events ------------------------------------------------------------- */

struct sim_event;

int sim_event_create(int device, unsigned flags, struct sim_event** out);
/* Returns at once; a stream still waiting on the event keeps it alive. */
int sim_event_destroy(struct sim_event* event);
/* Captures the work queued on `stream` so far. */
int sim_event_record(struct sim_event* event, struct sim_stream* stream);
/* SIM_SUCCESS when complete (or never recorded), SIM_ERROR_NOT_READY. */
int sim_event_query(struct sim_event* event);
int sim_event_synchronize(struct sim_event* event);
/* Work queued on `stream` after this call starts after `event` completes.
 * The event may belong to another device. */
int sim_stream_wait_event(struct sim_stream* stream, struct sim_event* event);
int sim_event_info(struct sim_event* event, int* out_device, unsigned* out_flags);

/* ---- IPC between processes (cuIpc* / hipIpc*) --------------------------
 * Device memory lives in memfds, so a handle can name it to another
 * process of the host: it carries the exporter's pid, the memfd's
 * descriptor number and inode; the importer opens /proc/PID/fd/FD (same
 * user), checks the inode and maps it at a new device address. The
 * exporter must be alive when the handle is opened (as with the drivers);
 * a mapping stays valid afterwards (the kernel keeps the pages).
 * Interprocess events (created with SIM_EVENT_INTERPROCESS) keep their
 * recorded/completed generations in a shared memfd page; an opened one
 * waits for the exporter's latest recording at the time of the wait, and
 * stops waiting (an error for host waits) when the exporter dies. */
#define SIM_IPC_HANDLE_SIZE 64
#define SIM_EVENT_INTERPROCESS 0x4u /* CU_EVENT_INTERPROCESS, hipEventInterprocess */

/* Handle of the device allocation starting at `ptr` (its base). */
int sim_ipc_mem_get(void* ptr, unsigned char* out);
/* Maps the memory a handle names on `device` (its exporter's ordinal);
 * SIM_ERROR_INVALID_CONTEXT in the exporting process itself. */
int sim_ipc_mem_open(int device, const unsigned char* handle, void** out);
/* Unmaps what sim_ipc_mem_open returned (waits for the streams, like a
 * free); SIM_ERROR_INVALID_VALUE for memory not opened from a handle. */
int sim_ipc_mem_close(void* ptr);
/* Handle of an interprocess event. */
int sim_event_ipc_get(struct sim_event* event, unsigned char* out);
/* Opens an exported event on `device`; destroy it with sim_event_destroy. */
int sim_event_ipc_open(int device, const unsigned char* handle, struct sim_event** out);

/* ---- knobs (tests) ------------------------------------------------------ */

/* Allocation number `nth` (1-based, counted from now) and later ones fail;
 * only that one when `once`; nth = 0 disables the knob. */
void sim_alloc_fail_set(uint64_t nth, int once);
/* Fault injection by entry point: the next call of the front end's entry
 * point `name` ("cuStreamDestroy", "hipEventDestroy" ...) fails with the
 * vendor code `code` before doing anything (the object it names is left
 * as it was). One pending fault at a time; code 0 disarms. Front ends
 * consult sim_fault_take in the entry points their README lists. */
void sim_fault_next(const char* name, int code);
/* The code armed for `name` (disarming it), or 0. */
int sim_fault_take(const char* name);

/* Per-operation delay in microseconds (ADR_SIM_DELAY_US). */
void sim_delay_set(unsigned microseconds);

/* Number of live allocations of every kind (leak checks in tests). */
uint64_t sim_live_allocations(void);

#ifdef __cplusplus
}
#endif

#endif /* ADR_SIM_CORE_H */
