/* SPDX-License-Identifier: Apache-2.0
 *
 * The conformance suite's native helpers: the few things a test needs from
 * a backend's own API to play "the application" next to adr (test_ordering.c):
 * a gate (a native event the host opens later, which adr imports with
 * adr_event_import) and application work queued on adr's own native queue.
 *
 * One small file per backend (native_opencl.c, native_vulkan.c,
 * native_gpu_sim.c for CUDA and HIP), compiled when the backend's headers
 * are, and picked at run time by the device's backend name. Each reaches its
 * vendor API without linking it: through the library adr already loaded
 * (dlopen RTLD_NOLOAD) or, for Vulkan, adr's vkGetInstanceProcAddr.
 */
#ifndef ADR_CONF_NATIVE_H
#define ADR_CONF_NATIVE_H

#include <stddef.h>
#include <stdint.h>

#include <adr/adr.h>

struct conf_gate; /* a host-controlled native event, closed when created */

struct conf_native {
  const char* backend;
  /* Creates a closed gate on dev; *out_sync_event is the pointer to the
   * native event that adr_event_import takes (cl_event*, VkEvent*,
   * CUevent*, hipEvent_t*). 0, or an errno with a reason in why. */
  int (*gate_create)(struct adr_device* dev, struct conf_gate** out, void** out_sync_event,
                     char* why, size_t why_len);
  /* Opens the gate (from any thread). */
  void (*gate_open)(struct conf_gate* gate);
  /* Destroys it; the work that waited on it has completed. */
  void (*gate_destroy)(struct conf_gate* gate);
  /* Application work on adr's native queue of `stream` (NULL: the
   * device's default queue, ADR_NATIVE_QUEUE): waits for `gate` (NULL: no
   * wait), then sets the n bytes at ptr (an adr allocation of dev; ptr and
   * n multiples of 4) to v. Queued, not waited for. */
  int (*fill)(struct adr_device* dev, struct adr_stream* stream, struct conf_gate* gate, void* ptr,
              size_t n, uint8_t v, char* why, size_t why_len);
  /* Called after the test synchronised everything: releases what the
   * helper kept for queued work. */
  void (*finish)(struct adr_device* dev);
  /* Optional: after the run, when a case may have stopped early (fault
   * mode), releases whatever the helper still holds, gates included. */
  void (*abandon)(struct adr_device* dev);
  /* Opens every gate not yet destroyed (gate_open is idempotent): the
   * teardown after each case calls it before it synchronises the case's
   * streams, so a case stopped before its opener started (fault mode)
   * leaves no stream waiting on a gate nobody opens. */
  void (*open_gates)(struct adr_device* dev);
  /* Optional, for backends whose addresses are not native pointers: the
   * typed look-up (adr_opencl_buffer, adr_vulkan_buffer; its name in
   * buffer_op) of ptr: the allocation's base, size and ptr's offset, and
   * whether a native object came with it. Returns its status. */
  const char* buffer_op;
  int (*buffer)(struct adr_device* dev, const void* ptr, void** out_base, size_t* out_size,
                size_t* out_offset, struct adr_error* error);
};

/* The helper for dev's backend, or NULL with the reason in why. */
const struct conf_native* conf_native_get(struct adr_device* dev, char* why, size_t why_len);

extern const struct conf_native conf_native_opencl;
extern const struct conf_native conf_native_vulkan;
extern const struct conf_native conf_native_cuda;
extern const struct conf_native conf_native_hip;

#endif /* ADR_CONF_NATIVE_H */
