/* SPDX-License-Identifier: Apache-2.0
 *
 * Interop between adr's Vulkan device and raw Vulkan on the same VkDevice:
 * native handles, a compute shader reading and writing adr allocations
 * through their device addresses (at offsets into them), adr's exported
 * VkEvent honoured by vkCmdWaitEvents and vkGetEventStatus, a foreign
 * VkEvent imported into adr, and the backend's properties.
 *
 * Registered twice (tests/vulkan/meson.build): with the mapped copy path
 * and with ADR_VULKAN_COPY=staging; VKTEST_COPY_PATH says which one the
 * backend must report.
 */
#include <time.h>

#include "vk_test.h"

#ifdef VKTEST_SPV_HEADER
#include VKTEST_SPV_HEADER
#else
#include "shaders/scale.spv.h"
#endif

static struct vkt T;

struct push {
  uint64_t src;
  uint64_t dst;
  uint32_t count;
  uint32_t add;
};

/* A compute pipeline running scale.comp, plus a command buffer and fence
 * on adr's queue family. */
struct pipe {
  VkShaderModule module;
  VkPipelineLayout layout;
  VkPipeline pipeline;
  VkCommandPool pool;
  VkCommandBuffer cb;
  VkFence fence;
};

static void pipe_create(struct pipe* p) {
  memset(p, 0, sizeof(*p));
  VkShaderModuleCreateInfo smci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                   .codeSize = sizeof(scale_spv),
                                   .pCode = scale_spv};
  assert_int_equal(vkCreateShaderModule(T.device, &smci, NULL, &p->module), VK_SUCCESS);
  VkPushConstantRange range = {VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(struct push)};
  VkPipelineLayoutCreateInfo plci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                     .pushConstantRangeCount = 1,
                                     .pPushConstantRanges = &range};
  assert_int_equal(vkCreatePipelineLayout(T.device, &plci, NULL, &p->layout), VK_SUCCESS);
  VkComputePipelineCreateInfo cpci = {
      .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = p->module,
                .pName = "main"},
      .layout = p->layout};
  assert_int_equal(vkCreateComputePipelines(T.device, VK_NULL_HANDLE, 1, &cpci, NULL, &p->pipeline),
                   VK_SUCCESS);
  VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                 .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                 .queueFamilyIndex = T.family};
  assert_int_equal(vkCreateCommandPool(T.device, &pci, NULL, &p->pool), VK_SUCCESS);
  VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                     .commandPool = p->pool,
                                     .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                     .commandBufferCount = 1};
  assert_int_equal(vkAllocateCommandBuffers(T.device, &cai, &p->cb), VK_SUCCESS);
  VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  assert_int_equal(vkCreateFence(T.device, &fci, NULL, &p->fence), VK_SUCCESS);
}

static void pipe_destroy(struct pipe* p) {
  vkDestroyFence(T.device, p->fence, NULL);
  vkDestroyCommandPool(T.device, p->pool, NULL);
  vkDestroyPipeline(T.device, p->pipeline, NULL);
  vkDestroyPipelineLayout(T.device, p->layout, NULL);
  vkDestroyShaderModule(T.device, p->module, NULL);
}

/* Records [optional vkCmdWaitEvents] + dispatch + host-read barrier,
 * submits to adr's queue (adr is idle: the test is single-threaded) and
 * waits for the fence. */
static void dispatch_submit(struct pipe* p, const struct push* pc, const VkEvent* wait_event,
                            VkPipelineStageFlags wait_src_stage) {
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                 .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  assert_int_equal(vkBeginCommandBuffer(p->cb, &bi), VK_SUCCESS);
  if (wait_event != NULL) {
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT};
    vkCmdWaitEvents(p->cb, 1, wait_event, wait_src_stage, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 1,
                    &mb, 0, NULL, 0, NULL);
  }
  vkCmdBindPipeline(p->cb, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipeline);
  vkCmdPushConstants(p->cb, p->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(*pc), pc);
  vkCmdDispatch(p->cb, (pc->count + 63) / 64, 1, 1);
  VkMemoryBarrier hb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                        .dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT};
  vkCmdPipelineBarrier(p->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                       VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &hb, 0,
                       NULL, 0, NULL);
  assert_int_equal(vkEndCommandBuffer(p->cb), VK_SUCCESS);
  VkSubmitInfo si = {
      .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &p->cb};
  /* Serialised with adr's own submissions through adr's queue lock. */
  const struct adr_vulkan_queue_lock* ql = NULL;
  assert_int_equal(adr_device_native(T.dev, ADR_VULKAN_NATIVE_QUEUE_LOCK, (void**)&ql, NULL), 0);
  assert_true(ql->struct_size >= sizeof(*ql));
  ql->lock(ql->ctx);
  VkResult r = vkQueueSubmit(T.queue, 1, &si, p->fence);
  ql->unlock(ql->ctx);
  assert_int_equal(r, VK_SUCCESS);
}

/* dispatch_submit, then waits for the fence. */
static void dispatch(struct pipe* p, const struct push* pc, const VkEvent* wait_event,
                     VkPipelineStageFlags wait_src_stage) {
  dispatch_submit(p, pc, wait_event, wait_src_stage);
  assert_int_equal(vkWaitForFences(T.device, 1, &p->fence, VK_TRUE, UINT64_MAX), VK_SUCCESS);
  assert_int_equal(vkResetFences(T.device, 1, &p->fence), VK_SUCCESS);
}

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Work the application submits to adr's queue counts (queue order): a
 * NULL-stream download right after a shader writing the buffer returns the
 * shader's results, and an upload right after a shader reading the buffer
 * does not change what the shader read. Neither waits for the fence. */
static void test_application_work_on_adr_queue(void** state) {
  (void)state;
  enum { N = 1 << 20, BYTES = N * 4 };
  uint32_t* in = malloc(BYTES);
  uint32_t* out = malloc(BYTES);
  assert_non_null(in);
  assert_non_null(out);
  for (uint32_t i = 0; i < N; i++) in[i] = i ^ 0x5a5a5a5au;
  void *src = NULL, *dst = NULL;
  assert_int_equal(adr_alloc(T.dev, BYTES, 0, NULL, &src, NULL), 0);
  assert_int_equal(adr_alloc(T.dev, BYTES, 0, NULL, &dst, NULL), 0);
  vkt_upload(&T, src, in, BYTES);
  assert_int_equal(adr_memset(T.dev, dst, 0, BYTES, NULL, NULL), 0);
  struct pipe p;
  pipe_create(&p);
  for (int round = 0; round < 3; round++) {
    struct push pc = {.src = (uint64_t)(uintptr_t)src,
                      .dst = (uint64_t)(uintptr_t)dst,
                      .count = N,
                      .add = (uint32_t)round + 1};
    dispatch_submit(&p, &pc, NULL, 0);
    /* Read after write: the download is ordered after the shader. */
    double t0 = now_ms();
    vkt_download(&T, out, dst, BYTES);
    double t1 = now_ms();
    assert_int_equal(vkGetFenceStatus(T.device, p.fence), VK_SUCCESS);
    for (uint32_t i = 0; i < N; i++)
      if (out[i] != in[i] * 2u + pc.add)
        fail_msg("round %d: element %u is %u, expected %u", round, i, out[i], in[i] * 2u + pc.add);
    print_message("round %d: download of %d bytes behind the application's shader: %.3f ms\n",
                  round, BYTES, t1 - t0);
    assert_int_equal(vkResetFences(T.device, 1, &p.fence), VK_SUCCESS);
    /* Write after read: the upload lands after the shader read src. */
    dispatch_submit(&p, &pc, NULL, 0);
    uint32_t* next = malloc(BYTES);
    assert_non_null(next);
    for (uint32_t i = 0; i < N; i++) next[i] = in[i] + 7u;
    struct adr_stream* s = NULL;
    assert_int_equal(adr_stream_create(T.dev, &s, NULL), 0);
    if (round == 1) {
      assert_int_equal(adr_copy(T.dev, src, T.cpu, next, BYTES, s, NULL), 0);
      assert_int_equal(adr_stream_synchronize(s, NULL), 0);
    } else {
      vkt_upload(&T, src, next, BYTES);
    }
    assert_int_equal(adr_stream_destroy(s, NULL), 0);
    assert_int_equal(vkWaitForFences(T.device, 1, &p.fence, VK_TRUE, UINT64_MAX), VK_SUCCESS);
    assert_int_equal(vkResetFences(T.device, 1, &p.fence), VK_SUCCESS);
    vkt_download(&T, out, dst, BYTES);
    for (uint32_t i = 0; i < N; i++)
      if (out[i] != in[i] * 2u + pc.add)
        fail_msg("round %d: the upload overtook the shader: element %u is %u, expected %u", round,
                 i, out[i], in[i] * 2u + pc.add);
    memcpy(in, next, BYTES);
    free(next);
  }
  pipe_destroy(&p);
  assert_int_equal(adr_free(T.dev, src, BYTES, NULL, NULL), 0);
  assert_int_equal(adr_free(T.dev, dst, BYTES, NULL, NULL), 0);
  free(in);
  free(out);
  vkt_assert_no_validation_messages(&T);
}

static void test_native_handles(void** state) {
  (void)state;
  assert_non_null(T.instance);
  assert_non_null(T.physical);
  assert_non_null(T.device);
  assert_non_null(T.queue);
  uint32_t n = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(T.physical, &n, NULL);
  assert_true(T.family < n);
  /* The queue adr hands out is the device's queue 0 of that family. */
  VkQueue q = VK_NULL_HANDLE;
  vkGetDeviceQueue(T.device, T.family, 0, &q);
  assert_ptr_equal(q, T.queue);
  void* h = NULL;
  assert_int_equal(adr_device_native(T.dev, ADR_VULKAN_NATIVE_GET_INSTANCE_PROC_ADDR, &h, NULL), 0);
  PFN_vkGetInstanceProcAddr gipa = (PFN_vkGetInstanceProcAddr)(uintptr_t)h;
  assert_non_null(gipa);
  assert_non_null(gipa(T.instance, "vkGetDeviceProcAddr"));
  assert_int_equal(adr_device_native(T.dev, ADR_VULKAN_NATIVE_TIMELINE_SEMAPHORE, &h, NULL), 0);
  uint64_t value = 0;
  assert_int_equal(vkGetSemaphoreCounterValue(T.device, (VkSemaphore)h, &value), VK_SUCCESS);
  struct adr_error err = {{0}};
  assert_int_equal(adr_device_native(T.dev, 0x7777, &h, &err), ENOTSUP);
  assert_non_null(strstr(err.message, "[adr_device_native][vulkan]"));
}

static void test_shader_reads_device_addresses(void** state) {
  (void)state;
  enum { N = 1000, SRC_OFF = 256, DST_OFF = 512, BYTES = 8192 };
  void* src = NULL;
  void* dst = NULL;
  assert_int_equal(adr_alloc(T.dev, BYTES, 0, NULL, &src, NULL), 0);
  assert_int_equal(adr_alloc(T.dev, BYTES, 0, NULL, &dst, NULL), 0);
  uint32_t in[BYTES / 4];
  for (uint32_t i = 0; i < BYTES / 4; i++) in[i] = i * 7u + 3u;
  vkt_upload(&T, src, in, BYTES);
  assert_int_equal(adr_memset(T.dev, dst, 0xEE, BYTES, NULL, NULL), 0);

  struct pipe p;
  pipe_create(&p);
  struct push pc = {.src = (uint64_t)(uintptr_t)src + SRC_OFF,
                    .dst = (uint64_t)(uintptr_t)dst + DST_OFF,
                    .count = N,
                    .add = 11};
  dispatch(&p, &pc, NULL, 0);

  uint8_t out[BYTES];
  vkt_download(&T, out, dst, BYTES);
  for (size_t i = 0; i < DST_OFF; i++) assert_int_equal(out[i], 0xEE);
  for (uint32_t i = 0; i < N; i++) {
    uint32_t v;
    memcpy(&v, out + DST_OFF + 4 * i, 4);
    assert_int_equal(v, in[SRC_OFF / 4 + i] * 2u + 11u);
  }
  for (size_t i = DST_OFF + 4 * N; i < BYTES; i++) assert_int_equal(out[i], 0xEE);
  pipe_destroy(&p);
  assert_int_equal(adr_free(T.dev, src, BYTES, NULL, NULL), 0);
  assert_int_equal(adr_free(T.dev, dst, BYTES, NULL, NULL), 0);
  vkt_assert_no_validation_messages(&T);
}

static void test_exported_event_with_raw_vulkan(void** state) {
  (void)state;
  enum { N = 4096, BYTES = N * 4 };
  void *staged = NULL, *src = NULL, *dst = NULL;
  assert_int_equal(adr_alloc(T.dev, BYTES, 0, NULL, &staged, NULL), 0);
  assert_int_equal(adr_alloc(T.dev, BYTES, 0, NULL, &src, NULL), 0);
  assert_int_equal(adr_alloc(T.dev, BYTES, 0, NULL, &dst, NULL), 0);
  uint32_t* in = malloc(BYTES);
  uint32_t* out = malloc(BYTES);
  assert_non_null(in);
  assert_non_null(out);
  for (uint32_t i = 0; i < N; i++) in[i] = 0x1000u + i;
  vkt_upload(&T, staged, in, BYTES);
  assert_int_equal(adr_memset(T.dev, src, 0, BYTES, NULL, NULL), 0);

  struct adr_event* ev = NULL;
  assert_int_equal(adr_event_create(T.dev, &ev, NULL), 0);
  VkEvent* native = adr_event_native(ev);
  assert_non_null(native);
  /* Never recorded: complete, for raw consumers too. */
  assert_int_equal(vkGetEventStatus(T.device, *native), VK_EVENT_SET);

  /* Producer: a device copy on an adr stream, then the event. */
  struct adr_stream* s = NULL;
  assert_int_equal(adr_stream_create(T.dev, &s, NULL), 0);
  assert_int_equal(adr_copy(T.dev, src, T.dev, staged, BYTES, s, NULL), 0);
  assert_int_equal(adr_event_record(ev, s, NULL), 0);
  assert_ptr_equal(adr_event_native(ev), native);

  /* Consumer: raw Vulkan on the same queue, waiting on the VkEvent the way
   * adr/vulkan.h says (srcStageMask = ALL_COMMANDS). */
  struct pipe p;
  pipe_create(&p);
  struct push pc = {
      .src = (uint64_t)(uintptr_t)src, .dst = (uint64_t)(uintptr_t)dst, .count = N, .add = 1};
  dispatch(&p, &pc, native, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT);
  assert_int_equal(vkGetEventStatus(T.device, *native), VK_EVENT_SET);
  assert_int_equal(adr_event_query(ev, NULL), 0);
  vkt_download(&T, out, dst, BYTES);
  for (uint32_t i = 0; i < N; i++) assert_int_equal(out[i], in[i] * 2u + 1u);

  /* The same VkEvent* imported back into adr is recognised as adr's. */
  struct adr_event* imp = NULL;
  assert_int_equal(adr_event_import(T.dev, native, &imp, NULL), 0);
  assert_int_equal(adr_event_synchronize(imp, NULL), 0);
  assert_int_equal(adr_event_query(imp, NULL), 0);
  assert_int_equal(adr_stream_wait_event(s, imp, NULL), 0);
  assert_int_equal(adr_event_destroy(imp, NULL), 0);

  pipe_destroy(&p);
  assert_int_equal(adr_stream_destroy(s, NULL), 0);
  assert_int_equal(adr_event_destroy(ev, NULL), 0);
  assert_int_equal(adr_free(T.dev, staged, BYTES, NULL, NULL), 0);
  assert_int_equal(adr_free(T.dev, src, BYTES, NULL, NULL), 0);
  assert_int_equal(adr_free(T.dev, dst, BYTES, NULL, NULL), 0);
  free(in);
  free(out);
  vkt_assert_no_validation_messages(&T);
}

static void test_foreign_event_import(void** state) {
  (void)state;
  enum { BYTES = 65536 + 3 };
  VkEventCreateInfo eci = {.sType = VK_STRUCTURE_TYPE_EVENT_CREATE_INFO};
  VkEvent raw = VK_NULL_HANDLE;
  assert_int_equal(vkCreateEvent(T.device, &eci, NULL, &raw), VK_SUCCESS);
  struct adr_event* imp = NULL;
  struct adr_error err = {{0}};
  assert_int_equal(adr_event_import(T.dev, NULL, &imp, &err), EINVAL);
  assert_null(imp);
  /* An unreadable sync_event pointer is an error, not a crash. */
  assert_int_equal(adr_event_import(T.dev, (void*)(uintptr_t)0x10, &imp, &err), EINVAL);
  assert_non_null(strstr(err.message, "not readable"));
  assert_null(imp);
  if (getenv("VKTEST_GARBAGE_EVENT") != NULL) {
    /* By hand only: what a garbage VkEvent does (see the README). */
    VkEvent junk = (VkEvent)(uintptr_t)0x5a5a5a50;
    int st = adr_event_import(T.dev, &junk, &imp, &err);
    print_message("garbage VkEvent: %s (%s)\n", adr_status_name(st), err.message);
    if (st == 0) adr_event_destroy(imp, NULL);
    imp = NULL;
  }
  assert_int_equal(adr_event_import(T.dev, &raw, &imp, NULL), 0);
  assert_int_equal(adr_event_query(imp, NULL), EBUSY);
  /* Recording a foreign event is refused with a reason. */
  assert_int_equal(adr_event_record(imp, NULL, &err), EINVAL);
  assert_non_null(strstr(err.message, "imported"));

  void* buf = NULL;
  assert_int_equal(adr_alloc(T.dev, BYTES, 0, NULL, &buf, NULL), 0);
  assert_int_equal(adr_memset(T.dev, buf, 0x11, BYTES, NULL, NULL), 0);
  struct adr_stream* s = NULL;
  assert_int_equal(adr_stream_create(T.dev, &s, NULL), 0);
  /* The stream waits on the host-set VkEvent, then sets the buffer. */
  assert_int_equal(adr_stream_wait_event(s, imp, NULL), 0);
  assert_int_equal(adr_memset(T.dev, buf, 0x5C, BYTES, s, NULL), 0);
  assert_int_equal(vkSetEvent(T.device, raw), VK_SUCCESS);
  assert_int_equal(adr_event_query(imp, NULL), 0);
  assert_int_equal(adr_event_synchronize(imp, NULL), 0);
  assert_int_equal(adr_stream_synchronize(s, NULL), 0);
  uint8_t* out = malloc(BYTES);
  assert_non_null(out);
  vkt_download(&T, out, buf, BYTES);
  for (size_t i = 0; i < BYTES; i++) assert_int_equal(out[i], 0x5C);
  free(out);

  /* Destroying the import leaves the application's VkEvent alive. */
  assert_int_equal(adr_event_destroy(imp, NULL), 0);
  assert_int_equal(vkGetEventStatus(T.device, raw), VK_EVENT_SET);
  vkDestroyEvent(T.device, raw, NULL);
  assert_int_equal(adr_stream_destroy(s, NULL), 0);
  assert_int_equal(adr_free(T.dev, buf, BYTES, NULL, NULL), 0);
  vkt_assert_no_validation_messages(&T);
}

/* An imported VkEvent set by device work: the application's command
 * buffer, submitted to adr's queue, waits for a host-set gate, fills an adr
 * allocation (through the VkBuffer adr_vulkan_buffer names) and sets the
 * event with vkCmdSetEvent(stage). adr_vulkan_event_import declares that
 * stage. A stream that waits on the imported event and then copies the
 * allocation must see the fill; the adr calls return while the gate holds
 * everything back; the host-side wait sees the device's set; the
 * validation layer reports nothing (adr_event_import, which assumes a
 * host-set event, would make it report the wait's srcStageMask). */
static void device_set_event_case(VkPipelineStageFlags stage) {
  enum { BYTES = 65536 };
  VkEventCreateInfo eci = {.sType = VK_STRUCTURE_TYPE_EVENT_CREATE_INFO};
  VkEvent gate = VK_NULL_HANDLE, ev = VK_NULL_HANDLE;
  assert_int_equal(vkCreateEvent(T.device, &eci, NULL, &gate), VK_SUCCESS);
  assert_int_equal(vkCreateEvent(T.device, &eci, NULL, &ev), VK_SUCCESS);
  void *src = NULL, *dst = NULL;
  assert_int_equal(adr_alloc(T.dev, BYTES, 0, NULL, &src, NULL), 0);
  assert_int_equal(adr_alloc(T.dev, BYTES, 0, NULL, &dst, NULL), 0);
  assert_int_equal(adr_memset(T.dev, src, 0x11, BYTES, NULL, NULL), 0);
  assert_int_equal(adr_memset(T.dev, dst, 0x00, BYTES, NULL, NULL), 0);
  struct adr_vulkan_buffer vb = {.struct_size = sizeof(vb)};
  assert_int_equal(adr_vulkan_buffer(T.dev, src, &vb, NULL), 0);

  struct pipe p;
  pipe_create(&p);
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                 .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  assert_int_equal(vkBeginCommandBuffer(p.cb, &bi), VK_SUCCESS);
  VkMemoryBarrier hb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                        .srcAccessMask = VK_ACCESS_HOST_WRITE_BIT,
                        .dstAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT};
  vkCmdWaitEvents(p.cb, 1, &gate, VK_PIPELINE_STAGE_HOST_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 1,
                  &hb, 0, NULL, 0, NULL);
  vkCmdFillBuffer(p.cb, (VkBuffer)(uintptr_t)vb.buffer, vb.buffer_offset, BYTES, 0xA7A7A7A7u);
  vkCmdSetEvent(p.cb, ev, stage);
  assert_int_equal(vkEndCommandBuffer(p.cb), VK_SUCCESS);
  VkSubmitInfo si = {
      .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &p.cb};
  const struct adr_vulkan_queue_lock* ql = NULL;
  assert_int_equal(adr_device_native(T.dev, ADR_VULKAN_NATIVE_QUEUE_LOCK, (void**)&ql, NULL), 0);
  ql->lock(ql->ctx);
  assert_int_equal(vkQueueSubmit(T.queue, 1, &si, p.fence), VK_SUCCESS);
  ql->unlock(ql->ctx);

  /* Until the gate opens, failures are collected, not asserted: a failed
   * assertion here would leave the queue blocked for good. */
  struct adr_event* imp = NULL;
  struct adr_error err = {{0}};
  int st_import = adr_vulkan_event_import(T.dev, &ev, stage, &imp, &err);
  int st_query = imp ? adr_event_query(imp, NULL) : -1;
  struct adr_stream* s = NULL;
  int st_create = adr_stream_create(T.dev, &s, NULL);
  int st_wait = st_create == 0 && imp ? adr_stream_wait_event(s, imp, NULL) : -1;
  int st_copy = st_create == 0 ? adr_copy(T.dev, dst, T.dev, src, BYTES, s, &err) : -1;
  /* The calls only queued: the gate still holds the application's work. */
  int st_query2 = imp ? adr_event_query(imp, NULL) : -1;
  VkResult before = vkGetEventStatus(T.device, ev);
  assert_int_equal(vkSetEvent(T.device, gate), VK_SUCCESS);
  if (st_import != 0) fail_msg("import: %s", err.message);
  assert_int_equal(st_query, EBUSY);
  assert_int_equal(st_create, 0);
  assert_int_equal(st_wait, 0);
  if (st_copy != 0) fail_msg("copy: %s", err.message);
  assert_int_equal(st_query2, EBUSY);
  assert_int_equal(before, VK_EVENT_RESET);
  assert_int_equal(adr_event_synchronize(imp, NULL), 0);
  assert_int_equal(adr_stream_synchronize(s, NULL), 0);
  uint8_t* out = malloc(BYTES);
  assert_non_null(out);
  vkt_download(&T, out, dst, BYTES);
  for (size_t i = 0; i < BYTES; i++)
    if (out[i] != 0xA7) fail_msg("byte %zu is %#x, not the application's fill 0xa7", i, out[i]);
  free(out);
  assert_int_equal(vkWaitForFences(T.device, 1, &p.fence, VK_TRUE, UINT64_MAX), VK_SUCCESS);
  assert_int_equal(adr_event_destroy(imp, NULL), 0);
  assert_int_equal(adr_stream_destroy(s, NULL), 0);
  pipe_destroy(&p);
  vkDestroyEvent(T.device, ev, NULL);
  vkDestroyEvent(T.device, gate, NULL);
  assert_int_equal(adr_free(T.dev, src, BYTES, NULL, NULL), 0);
  assert_int_equal(adr_free(T.dev, dst, BYTES, NULL, NULL), 0);
  vkt_assert_no_validation_messages(&T);
}

/* adr's own convention for the events it exports: ALL_COMMANDS. */
static void test_imported_event_set_by_device_work(void** state) {
  (void)state;
  device_set_event_case(VK_PIPELINE_STAGE_ALL_COMMANDS_BIT);
}

static void test_imported_event_declared_stage(void** state) {
  (void)state;
  device_set_event_case(VK_PIPELINE_STAGE_TRANSFER_BIT);
  /* Bad input. */
  VkEventCreateInfo eci = {.sType = VK_STRUCTURE_TYPE_EVENT_CREATE_INFO};
  VkEvent ev = VK_NULL_HANDLE;
  assert_int_equal(vkCreateEvent(T.device, &eci, NULL, &ev), VK_SUCCESS);
  struct adr_event* imp = NULL;
  struct adr_error err = {{0}};
  assert_int_equal(adr_vulkan_event_import(NULL, &ev, VK_PIPELINE_STAGE_HOST_BIT, &imp, &err),
                   EINVAL);
  assert_non_null(strstr(err.message, "device is NULL"));
  assert_int_equal(adr_vulkan_event_import(T.dev, NULL, VK_PIPELINE_STAGE_HOST_BIT, &imp, &err),
                   EINVAL);
  assert_non_null(strstr(err.message, "sync_event is NULL"));
  assert_int_equal(adr_vulkan_event_import(T.dev, &ev, 0, &imp, &err), EINVAL);
  assert_non_null(strstr(err.message, "src_stage_mask is 0"));
  assert_int_equal(adr_vulkan_event_import(T.cpu, &ev, VK_PIPELINE_STAGE_HOST_BIT, &imp, &err),
                   EINVAL);
  assert_non_null(strstr(err.message, "cpu:0 is not a Vulkan device"));
  assert_int_equal(adr_vulkan_event_import(T.dev, (void*)(uintptr_t)0x10,
                                           VK_PIPELINE_STAGE_HOST_BIT, &imp, &err),
                   EINVAL);
  assert_non_null(strstr(err.message, "[adr_vulkan_event_import][vulkan] EINVAL: sync_event"));
  assert_null(imp);
  /* The backend channel is not for applications. */
  struct adr_vulkan_event_source q = {.struct_size = sizeof(q), .src_stage_mask = 1};
  void* inout = &q;
  assert_int_equal(adr_device_native(T.dev, ADR_VULKAN_NATIVE_EVENT_SOURCE, &inout, &err), EINVAL);
  assert_non_null(strstr(err.message, "adr_vulkan_event_import"));
  /* A host-set event imported with HOST behaves as with adr_event_import. */
  assert_int_equal(adr_vulkan_event_import(T.dev, &ev, VK_PIPELINE_STAGE_HOST_BIT, &imp, &err), 0);
  assert_int_equal(adr_event_query(imp, NULL), EBUSY);
  assert_int_equal(vkSetEvent(T.device, ev), VK_SUCCESS);
  assert_int_equal(adr_event_synchronize(imp, NULL), 0);
  assert_int_equal(adr_event_destroy(imp, NULL), 0);
  vkDestroyEvent(T.device, ev, NULL);
  vkt_assert_no_validation_messages(&T);
}

static void test_properties(void** state) {
  (void)state;
  char buf[256];
  const char* want = getenv("VKTEST_COPY_PATH");
  assert_non_null(want);
  assert_string_equal(vkt_property(T.dev, "copy_path", buf, sizeof(buf)), want);
  assert_string_equal(vkt_property(T.dev, "usable", buf, sizeof(buf)), "yes");
  assert_string_equal(vkt_property(T.dev, "buffer_device_address", buf, sizeof(buf)), "yes");
  assert_string_equal(vkt_property(T.dev, "timeline_semaphore", buf, sizeof(buf)), "yes");
  assert_string_equal(vkt_property(T.dev, "adopted", buf, sizeof(buf)), "no");
  assert_non_null(strstr(vkt_property(T.dev, "heap[0]", buf, sizeof(buf)), "iB"));
  assert_non_null(strstr(vkt_property(T.dev, "memory_type[0]", buf, sizeof(buf)), "heap "));
  assert_non_null(strstr(vkt_property(T.dev, "queue_family[0]", buf, sizeof(buf)), "queue(s)"));
  assert_int_equal(strncmp(vkt_property(T.dev, "api_version", buf, sizeof(buf)), "1.", 2), 0);
  struct adr_device_info info = {.struct_size = sizeof(info)};
  assert_int_equal(adr_device_info_get(T.dev, &info, NULL), 0);
  assert_string_equal(info.backend, "vulkan");
  assert_true(info.caps & ADR_CAP_DEVICE_ADDRESSES);
  assert_false(info.caps & ADR_CAP_HOST_ACCESSIBLE);
  assert_true(info.memory_total > 0);
  const char* validation = getenv("ADR_VULKAN_VALIDATION");
  if (validation != NULL && validation[0] != '\0')
    assert_string_equal(vkt_property(T.dev, "validation", buf, sizeof(buf)), validation);
}

int main(void) {
  vkt_require_or_skip(&T);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_native_handles),
      cmocka_unit_test(test_shader_reads_device_addresses),
      cmocka_unit_test(test_exported_event_with_raw_vulkan),
      cmocka_unit_test(test_foreign_event_import),
      cmocka_unit_test(test_imported_event_set_by_device_work),
      cmocka_unit_test(test_imported_event_declared_stage),
      cmocka_unit_test(test_application_work_on_adr_queue),
      cmocka_unit_test(test_properties),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
