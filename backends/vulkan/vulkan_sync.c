/* SPDX-License-Identifier: Apache-2.0
 *
 * Streams (queue submission contexts) and events.
 *
 * A device has one VkQueue and one timeline semaphore that every
 * submission signals with the next value, under queue_lock, so signal
 * order is value order. A stream owns a command pool and a small ring of
 * command buffers, each tagged with the value of its last submission and
 * recycled once the timeline has passed it. Every adr operation is one
 * command buffer, submitted at once (no batching: the host never has to
 * flush anything before it waits).
 *
 * Ordering: every command buffer starts with a full pipeline barrier, whose
 * first scope is all earlier work on the queue in submission order, and
 * ends with a barrier that makes its writes visible to the host. Work of
 * all streams of a device therefore executes in submission order; a
 * device-side wait for an adr event of the same device is satisfied by
 * queue order (the event's submission is always earlier), and only the
 * host-side fast paths need to know about it (stream->wait_value).
 *
 * Events: an adr event is a VkEvent plus the timeline value of the
 * submission that sets it. Host waits and queries use the timeline
 * (vkWaitSemaphores / vkGetSemaphoreCounterValue), never vkGetEventStatus,
 * except for imported foreign VkEvents, which have no timeline value.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "vulkan_internal.h"

/* ---- barriers ------------------------------------------------------------ */

void vkb_barrier_all(struct adr_backend_device* dev, VkCommandBuffer cb) {
  VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                        .srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
                        .dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT};
  dev->fn.vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                               VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
}

void vkb_barrier_host(struct adr_backend_device* dev, VkCommandBuffer cb) {
  VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                        .srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
                        .dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_HOST_WRITE_BIT};
  dev->fn.vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_HOST_BIT,
                               0, 1, &mb, 0, NULL, 0, NULL);
}

/* ---- timeline -------------------------------------------------------------- */

static void completed_raise(struct adr_backend_device* dev, uint64_t v) {
  uint64_t cur = atomic_load_explicit(&dev->completed, memory_order_relaxed);
  while (cur < v && !atomic_compare_exchange_weak_explicit(
                        &dev->completed, &cur, v, memory_order_relaxed, memory_order_relaxed)) {
  }
}

uint64_t vkb_timeline_value(struct adr_backend_device* dev) {
  uint64_t v = 0;
  if (dev->fn.vkGetSemaphoreCounterValue(dev->device, dev->timeline, &v) != VK_SUCCESS)
    return atomic_load_explicit(&dev->completed, memory_order_relaxed);
  completed_raise(dev, v);
  return v;
}

int vkb_timeline_wait(struct adr_backend_device* dev, uint64_t value, struct adr_error* error) {
  if (value == 0 || value <= atomic_load_explicit(&dev->completed, memory_order_relaxed)) return 0;
  VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                            .semaphoreCount = 1,
                            .pSemaphores = &dev->timeline,
                            .pValues = &value};
  VkResult r = dev->fn.vkWaitSemaphores(dev->device, &wi, UINT64_MAX);
  if (r != VK_SUCCESS)
    return vkb_check(r, error, "vkWaitSemaphores(timeline >= %" PRIu64 ")", value);
  completed_raise(dev, value);
  return 0;
}

/* ---- command buffers ----------------------------------------------------------- */

int vkb_cmd_begin(struct adr_backend_stream* s, struct vkb_cmd* out, struct adr_error* error) {
  struct adr_backend_device* dev = s->dev;
  pthread_mutex_lock(&s->lock);
  /* A free command buffer: first against the cached completed value, then
   * against a fresh one. */
  struct vkb_cb* slot = NULL;
  for (int pass = 0; pass < 2 && slot == NULL; pass++) {
    uint64_t done = pass == 0 ? atomic_load_explicit(&dev->completed, memory_order_relaxed)
                              : vkb_timeline_value(dev);
    for (uint32_t i = 0; i < s->cb_count && slot == NULL; i++) {
      struct vkb_cb* c = &s->cbs[(s->cb_next + i) % s->cb_count];
      if (c->value <= done) slot = c;
    }
  }
  if (slot == NULL && s->cb_count < VKB_MAX_COMMAND_BUFFERS) {
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = s->pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = 1};
    VkCommandBuffer cb;
    VkResult r = dev->fn.vkAllocateCommandBuffers(dev->device, &ai, &cb);
    if (r == VK_SUCCESS) {
      slot = &s->cbs[s->cb_count++];
      slot->cb = cb;
      slot->value = 0;
    } else if (s->cb_count == 0) {
      pthread_mutex_unlock(&s->lock);
      return vkb_check(r, error, "vkAllocateCommandBuffers");
    }
  }
  if (slot == NULL) {
    /* All command buffers in flight: wait for the oldest. */
    slot = &s->cbs[s->cb_next % s->cb_count];
    int st = vkb_timeline_wait(dev, slot->value, error);
    if (st != 0) {
      pthread_mutex_unlock(&s->lock);
      return st;
    }
  }
  s->cb_next = (uint32_t)(slot - s->cbs + 1) % (s->cb_count ? s->cb_count : 1);
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                 .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  VkResult r = dev->fn.vkBeginCommandBuffer(slot->cb, &bi);
  if (r != VK_SUCCESS) {
    pthread_mutex_unlock(&s->lock);
    return vkb_check(r, error, "vkBeginCommandBuffer");
  }
  vkb_barrier_all(dev, slot->cb);
  /* Imported foreign events this stream was told to wait for. One already
   * set needs no wait. One still reset is set later either by the host
   * (vkSetEvent: source stage HOST, the default) or by device work the
   * application submitted to this queue before (vkCmdSetEvent, whose
   * stageMask adr_vulkan_event_import declared). Vulkan requires the wait's
   * srcStageMask to be exactly the producer's, which adr cannot query, so
   * it is the declared one. (A device producer on this queue is ordered
   * before us by the barrier above anyway; the wait keeps the event's
   * contract and what the validation layer checks.) */
  for (uint32_t i = 0; i < s->foreign_count; i++) {
    const struct vkb_foreign_wait* w = &s->foreign_waits[i];
    if (dev->fn.vkGetEventStatus(dev->device, w->event) == VK_EVENT_SET) continue;
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = w->src_stage == VK_PIPELINE_STAGE_HOST_BIT
                                               ? VK_ACCESS_HOST_WRITE_BIT
                                               : VK_ACCESS_MEMORY_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT};
    dev->fn.vkCmdWaitEvents(slot->cb, 1, &w->event, w->src_stage,
                            VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 1, &mb, 0, NULL, 0, NULL);
  }
  out->s = s;
  out->slot = slot;
  out->cb = slot->cb;
  return 0;
}

void vkb_cmd_abort(struct vkb_cmd* c) {
  struct adr_backend_stream* s = c->s;
  /* The buffer is left recording; the next vkBeginCommandBuffer resets it
   * (the pool allows per-buffer reset). */
  s->dev->fn.vkEndCommandBuffer(c->cb);
  pthread_mutex_unlock(&s->lock);
}

int vkb_cmd_submit(struct vkb_cmd* c, uint64_t* out_value, struct adr_error* error) {
  struct adr_backend_stream* s = c->s;
  struct adr_backend_device* dev = s->dev;
  vkb_barrier_host(dev, c->cb);
  VkResult r = dev->fn.vkEndCommandBuffer(c->cb);
  if (r != VK_SUCCESS) {
    pthread_mutex_unlock(&s->lock);
    return vkb_check(r, error, "vkEndCommandBuffer");
  }
  pthread_mutex_lock(&dev->queue_lock);
  uint64_t value = dev->next_value + 1;
  VkTimelineSemaphoreSubmitInfo tsi = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                       .signalSemaphoreValueCount = 1,
                                       .pSignalSemaphoreValues = &value};
  VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                     .pNext = &tsi,
                     .commandBufferCount = 1,
                     .pCommandBuffers = &c->cb,
                     .signalSemaphoreCount = 1,
                     .pSignalSemaphores = &dev->timeline};
  r = dev->fn.vkQueueSubmit(dev->queue, 1, &si, VK_NULL_HANDLE);
  if (r == VK_SUCCESS) dev->next_value = value;
  pthread_mutex_unlock(&dev->queue_lock);
  if (r != VK_SUCCESS) {
    pthread_mutex_unlock(&s->lock);
    return vkb_check(r, error, "vkQueueSubmit");
  }
  c->slot->value = value;
  s->last_value = value;
  s->foreign_count = 0;
  atomic_store_explicit(&s->pending, value > s->wait_value ? value : s->wait_value,
                        memory_order_relaxed);
  pthread_mutex_unlock(&s->lock);
  if (out_value != NULL) *out_value = value;
  return 0;
}

/* ---- streams ---------------------------------------------------------------- */

bool vkb_stream_idle_locked(struct adr_backend_stream* s) {
  pthread_mutex_lock(&s->lock);
  uint64_t v = s->last_value > s->wait_value ? s->last_value : s->wait_value;
  bool foreign = s->foreign_count > 0;
  pthread_mutex_unlock(&s->lock);
  if (foreign) return false;
  return v == 0 || v <= atomic_load_explicit(&s->dev->completed, memory_order_relaxed) ||
         vkb_timeline_value(s->dev) >= v;
}

void vkb_queue_share(struct adr_backend_device* dev) {
  atomic_store_explicit(&dev->queue_shared, true, memory_order_relaxed);
}

int vkb_queue_post(struct adr_backend_device* dev, uint64_t* out_value, struct adr_error* error) {
  pthread_mutex_lock(&dev->queue_lock);
  uint64_t value = dev->next_value + 1;
  VkTimelineSemaphoreSubmitInfo tsi = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                       .signalSemaphoreValueCount = 1,
                                       .pSignalSemaphoreValues = &value};
  /* A semaphore signal's first scope is every command submitted earlier
   * to the queue, whoever submitted it. */
  VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                     .pNext = &tsi,
                     .signalSemaphoreCount = 1,
                     .pSignalSemaphores = &dev->timeline};
  VkResult r = dev->fn.vkQueueSubmit(dev->queue, 1, &si, VK_NULL_HANDLE);
  if (r == VK_SUCCESS) dev->next_value = value;
  pthread_mutex_unlock(&dev->queue_lock);
  if (r != VK_SUCCESS) return vkb_check(r, error, "vkQueueSubmit (empty, timeline signal)");
  *out_value = value;
  return 0;
}

static void queue_lock_fn(void* ctx) {
  struct adr_backend_device* dev = ctx;
  pthread_mutex_lock(&dev->queue_lock);
}

static void queue_unlock_fn(void* ctx) {
  struct adr_backend_device* dev = ctx;
  pthread_mutex_unlock(&dev->queue_lock);
}

void vkb_queue_lock_init(struct adr_backend_device* dev) {
  dev->queue_lock_api = (struct adr_vulkan_queue_lock){
      .struct_size = sizeof(struct adr_vulkan_queue_lock),
      .lock = queue_lock_fn,
      .unlock = queue_unlock_fn,
      .ctx = dev,
  };
}

int vkb_stream_wait_idle(struct adr_backend_stream* s, struct adr_error* error) {
  pthread_mutex_lock(&s->lock);
  bool foreign = s->foreign_count > 0;
  uint64_t v = s->last_value > s->wait_value ? s->last_value : s->wait_value;
  pthread_mutex_unlock(&s->lock);
  if (foreign) {
    /* Pending waits on imported events: submit them (an empty command
     * buffer) so the timeline covers them. */
    struct vkb_cmd c;
    int st = vkb_cmd_begin(s, &c, error);
    if (st == 0) st = vkb_cmd_submit(&c, &v, error);
    if (st != 0) return st;
  }
  if (atomic_load_explicit(&s->dev->queue_shared, memory_order_relaxed)) {
    /* The application may have submitted work adr's values do not cover. */
    int st = vkb_queue_post(s->dev, &v, error);
    if (st != 0) return st;
  }
  return vkb_timeline_wait(s->dev, v, error);
}

int vkb_stream_create(struct adr_backend_device* dev, uint32_t flags,
                      struct adr_backend_stream** out, struct adr_error* error) {
  if ((flags & ADR_BACKEND_STREAM_DEFAULT) && dev->default_stream != NULL) {
    *out = dev->default_stream;
    return 0;
  }
  struct adr_backend_stream* s = calloc(1, sizeof(*s));
  if (s == NULL) return vkb_errorf(error, ENOMEM, "out of host memory");
  s->dev = dev;
  pthread_mutex_init(&s->lock, NULL);
  VkCommandPoolCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT |
                                         VK_COMMAND_POOL_CREATE_TRANSIENT_BIT,
                                .queueFamilyIndex = dev->queue_family};
  VkResult r = dev->fn.vkCreateCommandPool(dev->device, &ci, NULL, &s->pool);
  if (r != VK_SUCCESS) {
    pthread_mutex_destroy(&s->lock);
    free(s);
    return vkb_check(r, error, "vkCreateCommandPool");
  }
  s->is_default = (flags & ADR_BACKEND_STREAM_DEFAULT) != 0;
  pthread_mutex_lock(&dev->objects_lock);
  s->next = dev->streams;
  if (s->next != NULL) s->next->prev = s;
  dev->streams = s;
  if (s->is_default) dev->default_stream = s;
  pthread_mutex_unlock(&dev->objects_lock);
  *out = s;
  return 0;
}

/* Frees the stream's objects; the caller made sure it is idle. */
void vkb_stream_release(struct adr_backend_stream* s) {
  struct adr_backend_device* dev = s->dev;
  if (s->scratch != NULL) vkb_range_free(dev, s->scratch, 0);
  dev->fn.vkDestroyCommandPool(dev->device, s->pool, NULL);
  pthread_mutex_lock(&dev->objects_lock);
  if (s->prev != NULL)
    s->prev->next = s->next;
  else
    dev->streams = s->next;
  if (s->next != NULL) s->next->prev = s->prev;
  if (dev->default_stream == s) dev->default_stream = NULL;
  pthread_mutex_unlock(&dev->objects_lock);
  free(s->foreign_waits);
  pthread_mutex_destroy(&s->lock);
  free(s);
}

int vkb_stream_destroy(struct adr_backend_device* dev, struct adr_backend_stream* s,
                       struct adr_error* error) {
  /* After the backend's exit handler every stream is gone: `s` must not
   * be read. */
  if (vkb_exited()) return 0;
  /* The teardown contract (adr/backend.h): the default stream is released
   * by device_close with the device; the core never passes it here. */
  if (s->is_default)
    return vkb_errorf(error, EINVAL, "the default stream is released by device_close");
  pthread_mutex_lock(&s->lock);
  uint64_t v = s->last_value;
  pthread_mutex_unlock(&s->lock);
  /* A failed wait (device lost) is reported; the stream goes all the same
   * (adr/backend.h: the handle is gone whatever stream_destroy returns). */
  int st = vkb_timeline_wait(dev, v, error);
  vkb_stream_release(s);
  return st;
}

int vkb_stream_synchronize(struct adr_backend_device* dev, struct adr_backend_stream* s,
                           struct adr_error* error) {
  (void)dev;
  if (vkb_exited()) return 0;
  return vkb_stream_wait_idle(s, error);
}

/* Every stream of a device submits to the device's one VkQueue, so that is
 * the native handle of a stream, and the only one adr can import: an
 * imported stream is a new submission context (command pool, command
 * buffers) on that queue; destroying it leaves the queue alone. */
void* vkb_stream_native(struct adr_backend_device* dev, struct adr_backend_stream* s) {
  (void)s;
  vkb_queue_share(dev);
  return (void*)dev->queue;
}

int vkb_stream_import(struct adr_backend_device* dev, void* native_stream,
                      struct adr_backend_stream** out, struct adr_error* error) {
  if (native_stream == NULL) return vkb_errorf(error, EINVAL, "native_stream is NULL");
  if ((VkQueue)native_stream != dev->queue)
    return vkb_errorf(error, EINVAL,
                      "%p is not the VkQueue of vulkan:%" PRId64
                      " (%p); adr submits to one queue per device: adopt a device "
                      "(adr_device_adopt) to use another queue",
                      native_stream, dev->id, (void*)dev->queue);
  vkb_queue_share(dev);
  return vkb_stream_create(dev, 0, out, error);
}

/* ---- events ------------------------------------------------------------------ */

static void event_link(struct adr_backend_device* dev, struct adr_backend_event* e) {
  pthread_mutex_lock(&dev->objects_lock);
  e->next = dev->events;
  if (e->next != NULL) e->next->prev = e;
  dev->events = e;
  pthread_mutex_unlock(&dev->objects_lock);
}

int vkb_event_create(struct adr_backend_device* dev, struct adr_backend_event** out,
                     struct adr_error* error) {
  struct adr_backend_event* e = calloc(1, sizeof(*e));
  if (e == NULL) return vkb_errorf(error, ENOMEM, "out of host memory");
  VkEventCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_EVENT_CREATE_INFO};
  VkResult r = dev->fn.vkCreateEvent(dev->device, &ci, NULL, &e->vk);
  /* A never-recorded event is complete, for adr and for raw consumers. */
  if (r == VK_SUCCESS) {
    r = dev->fn.vkSetEvent(dev->device, e->vk);
    if (r != VK_SUCCESS) dev->fn.vkDestroyEvent(dev->device, e->vk, NULL);
  }
  if (r != VK_SUCCESS) {
    free(e);
    return vkb_check(r, error, "vkCreateEvent/vkSetEvent");
  }
  e->dev = dev;
  e->kind = VKB_EVENT_OWN;
  e->source = dev;
  event_link(dev, e);
  *out = e;
  return 0;
}

void vkb_event_release(struct adr_backend_event* e) {
  struct adr_backend_device* dev = e->dev;
  if (e->kind == VKB_EVENT_OWN) dev->fn.vkDestroyEvent(dev->device, e->vk, NULL);
  pthread_mutex_lock(&dev->objects_lock);
  if (e->prev != NULL)
    e->prev->next = e->next;
  else
    dev->events = e->next;
  if (e->next != NULL) e->next->prev = e->prev;
  pthread_mutex_unlock(&dev->objects_lock);
  free(e);
}

int vkb_event_destroy(struct adr_backend_device* dev, struct adr_backend_event* e,
                      struct adr_error* error) {
  if (vkb_exited()) return 0;
  /* vkDestroyEvent requires the submission that sets it to be complete. */
  int st = 0;
  if (e->kind == VKB_EVENT_OWN) st = vkb_timeline_wait(dev, e->value, error);
  vkb_event_release(e);
  return st;
}

int vkb_event_record(struct adr_backend_device* dev, struct adr_backend_event* e,
                     struct adr_backend_stream* s, struct adr_error* error) {
  if (e->kind != VKB_EVENT_OWN)
    return vkb_errorf(error, EINVAL, "an imported event cannot be recorded");
  /* The host reset below must not race the previous record's set: wait for
   * it (re-recording an event whose previous record is pending blocks). */
  int st = vkb_timeline_wait(dev, e->value, error);
  if (st != 0) return st;
  VkResult r = dev->fn.vkResetEvent(dev->device, e->vk);
  if (r != VK_SUCCESS) return vkb_check(r, error, "vkResetEvent");
  struct vkb_cmd c;
  st = vkb_cmd_begin(s, &c, error);
  if (st != 0) {
    dev->fn.vkSetEvent(dev->device, e->vk);
    return st;
  }
  vkb_barrier_host(dev, c.cb);
  dev->fn.vkCmdSetEvent(c.cb, e->vk, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT);
  uint64_t value = 0;
  st = vkb_cmd_submit(&c, &value, error);
  if (st != 0) {
    dev->fn.vkSetEvent(dev->device, e->vk);
    return st;
  }
  e->value = value;
  return 0;
}

int vkb_event_wait(struct adr_backend_device* dev, struct adr_backend_event* e,
                   struct adr_backend_stream* s, struct adr_error* error) {
  if (e->kind == VKB_EVENT_FOREIGN) {
    pthread_mutex_lock(&s->lock);
    if (s->foreign_count == s->foreign_cap) {
      uint32_t cap = s->foreign_cap ? 2 * s->foreign_cap : 4;
      struct vkb_foreign_wait* w = realloc(s->foreign_waits, cap * sizeof(*w));
      if (w == NULL) {
        pthread_mutex_unlock(&s->lock);
        return vkb_errorf(error, ENOMEM, "out of host memory");
      }
      s->foreign_waits = w;
      s->foreign_cap = cap;
    }
    s->foreign_waits[s->foreign_count++] = (struct vkb_foreign_wait){e->vk, e->src_stage};
    atomic_store_explicit(&s->pending, UINT64_MAX, memory_order_relaxed);
    pthread_mutex_unlock(&s->lock);
    return 0;
  }
  if (e->source != dev) {
    /* Another VkDevice: its timeline cannot be waited on by this queue. */
    return vkb_timeline_wait(e->source, e->value, error);
  }
  /* Same device: queue order already puts the stream's next work after the
   * event's submission; remember it for the host-side fast paths. */
  pthread_mutex_lock(&s->lock);
  if (e->value > s->wait_value) s->wait_value = e->value;
  if (s->foreign_count == 0)
    atomic_store_explicit(&s->pending,
                          s->last_value > s->wait_value ? s->last_value : s->wait_value,
                          memory_order_relaxed);
  pthread_mutex_unlock(&s->lock);
  return 0;
}

static int foreign_status(struct adr_backend_device* dev, struct adr_backend_event* e,
                          struct adr_error* error) {
  VkResult r = dev->fn.vkGetEventStatus(dev->device, e->vk);
  if (r == VK_EVENT_SET) return 0;
  if (r == VK_EVENT_RESET) return EBUSY;
  return vkb_check(r, error, "vkGetEventStatus");
}

int vkb_event_synchronize(struct adr_backend_device* dev, struct adr_backend_event* e,
                          struct adr_error* error) {
  /* After the exit handler destroyed the devices all work has completed. */
  if (vkb_exited()) return 0;
  if (e->kind != VKB_EVENT_FOREIGN) return vkb_timeline_wait(e->source, e->value, error);
  /* A foreign VkEvent has no timeline value; poll with a growing sleep
   * (1 us to 1 ms), never a busy spin. */
  long ns = 1000;
  for (;;) {
    int st = foreign_status(dev, e, error);
    if (st != EBUSY) return st;
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
    if (ns < 1000000) ns *= 2;
  }
}

int vkb_event_query(struct adr_backend_device* dev, struct adr_backend_event* e,
                    struct adr_error* error) {
  if (vkb_exited()) return 0;
  if (e->kind == VKB_EVENT_FOREIGN) return foreign_status(dev, e, error);
  if (e->value == 0 ||
      e->value <= atomic_load_explicit(&e->source->completed, memory_order_relaxed))
    return 0;
  return vkb_timeline_value(e->source) >= e->value ? 0 : EBUSY;
}

void* vkb_event_native(struct adr_backend_device* dev, struct adr_backend_event* e) {
  (void)dev;
  return &e->vk;
}

int vkb_event_import(struct adr_backend_device* dev, void* sync_event,
                     struct adr_backend_event** out, struct adr_error* error) {
  if (sync_event == NULL) return vkb_errorf(error, EINVAL, "sync_event is NULL");
  struct adr_backend_event* e = calloc(1, sizeof(*e));
  if (e == NULL) return vkb_errorf(error, ENOMEM, "out of host memory");
  e->dev = dev;
  e->kind = VKB_EVENT_FOREIGN;
  e->src_stage = VK_PIPELINE_STAGE_HOST_BIT;
  vkb_devices_lock(true);
  for (struct adr_backend_device* d = vkb_devices_first(); d != NULL && e->source == NULL;
       d = d->next_open) {
    pthread_mutex_lock(&d->objects_lock);
    for (struct adr_backend_event* o = d->events; o != NULL; o = o->next) {
      if (o->kind == VKB_EVENT_OWN && (void*)&o->vk == sync_event) {
        e->kind = VKB_EVENT_SNAPSHOT;
        e->source = d;
        e->value = o->value;
        e->vk = o->vk;
        break;
      }
    }
    pthread_mutex_unlock(&d->objects_lock);
  }
  vkb_devices_lock(false);
  if (e->kind == VKB_EVENT_FOREIGN) {
    /* Read the handle without faulting: a bad sync_event pointer is an
     * error, not a crash. */
    struct iovec local = {.iov_base = &e->vk, .iov_len = sizeof(e->vk)};
    struct iovec remote = {.iov_base = sync_event, .iov_len = sizeof(e->vk)};
    ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    if (got < 0 && errno == EFAULT) {
      free(e);
      return vkb_errorf(error, EINVAL, "sync_event %p is not readable memory", sync_event);
    }
    if (got != (ssize_t)sizeof(e->vk)) e->vk = *(VkEvent*)sync_event;
    if (e->vk == VK_NULL_HANDLE) {
      free(e);
      return vkb_errorf(error, EINVAL, "*sync_event is VK_NULL_HANDLE");
    }
    /* A VkEvent is a non-dispatchable handle Vulkan offers no way to
     * validate; one status query here turns a handle the validation layer
     * knows to be bad (ADR_VULKAN_VALIDATION) into EINVAL at import. Without
     * the layer a garbage handle reaches the driver (see README). */
    VkResult r = dev->fn.vkGetEventStatus(dev->device, e->vk);
    if (r != VK_EVENT_SET && r != VK_EVENT_RESET) {
      free(e);
      return vkb_errorf(error, EINVAL,
                        "*sync_event is not a VkEvent of vulkan:%" PRId64
                        " (vkGetEventStatus returned %d)",
                        dev->id, (int)r);
    }
  }
  event_link(dev, e);
  *out = e;
  return 0;
}

int vkb_event_source_set(struct adr_backend_device* dev, struct adr_vulkan_event_source* q,
                         struct adr_error* error) {
  if (q->struct_size < offsetof(struct adr_vulkan_event_source, reserved))
    return vkb_errorf(error, EINVAL,
                      "struct adr_vulkan_event_source.struct_size is %u, expected at least %zu",
                      q->struct_size, offsetof(struct adr_vulkan_event_source, reserved));
  struct adr_backend_event* e = q->event;
  if (e == NULL || e->dev != dev) return vkb_errorf(error, EINVAL, "not an event of this device");
  if (q->src_stage_mask == 0) return vkb_errorf(error, EINVAL, "src_stage_mask is 0");
  /* adr's own events wait on the timeline; the mask does not apply. */
  if (e->kind == VKB_EVENT_FOREIGN) e->src_stage = (VkPipelineStageFlags)q->src_stage_mask;
  return 0;
}
