/* SPDX-License-Identifier: Apache-2.0
 *
 * adr_vulkan_buffer(): an adr address to the allocation as the application
 * made it (base, size, offset) and the VkBuffer / VkDeviceMemory behind it
 * with offsets. The test plays the application: vkCmdCopyBuffer from the
 * VkBuffer + offset it returns into a buffer of its own (and back), on
 * adr's queue under adr's queue lock, and checks the bytes; then the
 * edges (one past the end, freed memory, foreign pointers) and bad input.
 *
 * Registered with the mapped path, with staging, and with ADR_ALLOC=backend
 * and 1 MiB blocks (a large allocation then gets a dedicated block).
 */
#include "vk_test.h"

static struct vkt T;

/* The 64-bit handle as the Vulkan type (a pointer on 64-bit platforms). */
#define VKB_BUFFER(h) ((VkBuffer)(uintptr_t)(h))

#define ASSERT_ADR(call)                                                           \
  do {                                                                             \
    struct adr_error e_ = {{0}};                                                   \
    struct adr_error* VKB_ERR = &e_;                                               \
    (void)VKB_ERR;                                                                 \
    int st_ = (call);                                                              \
    if (st_ != 0) fail_msg("%s: %s: %s", #call, adr_status_name(st_), e_.message); \
  } while (0)

static void expect_error(int st, struct adr_error* e, int want, const char* text) {
  if (st != want)
    fail_msg("returned %s, expected %s: %s", adr_status_name(st), adr_status_name(want),
             e->message);
  if (strstr(e->message, text) == NULL) fail_msg("message \"%s\" lacks \"%s\"", e->message, text);
}

/* A host-visible, coherent buffer of the application's own. */
struct app_buffer {
  VkBuffer buffer;
  VkDeviceMemory memory;
  unsigned char* mapped;
};

static void app_buffer_create(struct app_buffer* b, VkDeviceSize size) {
  VkBufferCreateInfo bci = {
      .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
      .size = size,
      .usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
      .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
  assert_int_equal(vkCreateBuffer(T.device, &bci, NULL, &b->buffer), VK_SUCCESS);
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(T.device, b->buffer, &req);
  VkPhysicalDeviceMemoryProperties mp;
  vkGetPhysicalDeviceMemoryProperties(T.physical, &mp);
  const VkMemoryPropertyFlags want =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  uint32_t type = UINT32_MAX;
  for (uint32_t i = 0; i < mp.memoryTypeCount && type == UINT32_MAX; i++)
    if ((req.memoryTypeBits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want)
      type = i;
  assert_true(type != UINT32_MAX);
  VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                              .allocationSize = req.size,
                              .memoryTypeIndex = type};
  assert_int_equal(vkAllocateMemory(T.device, &mai, NULL, &b->memory), VK_SUCCESS);
  assert_int_equal(vkBindBufferMemory(T.device, b->buffer, b->memory, 0), VK_SUCCESS);
  void* m = NULL;
  assert_int_equal(vkMapMemory(T.device, b->memory, 0, VK_WHOLE_SIZE, 0, &m), VK_SUCCESS);
  b->mapped = m;
}

static void app_buffer_destroy(struct app_buffer* b) {
  vkUnmapMemory(T.device, b->memory);
  vkDestroyBuffer(T.device, b->buffer, NULL);
  vkFreeMemory(T.device, b->memory, NULL);
}

/* One vkCmdCopyBuffer (src -> dst) with a barrier making the transfer's
 * writes visible to the host and to later transfers, submitted to adr's
 * queue under adr's queue lock; waits for its fence. */
static void copy_buffer(VkBuffer src, VkDeviceSize src_off, VkBuffer dst, VkDeviceSize dst_off,
                        VkDeviceSize size) {
  VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                 .queueFamilyIndex = T.family};
  VkCommandPool pool;
  assert_int_equal(vkCreateCommandPool(T.device, &pci, NULL, &pool), VK_SUCCESS);
  VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                     .commandPool = pool,
                                     .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                     .commandBufferCount = 1};
  VkCommandBuffer cb;
  assert_int_equal(vkAllocateCommandBuffers(T.device, &cai, &cb), VK_SUCCESS);
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                 .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  assert_int_equal(vkBeginCommandBuffer(cb, &bi), VK_SUCCESS);
  VkBufferCopy region = {src_off, dst_off, size};
  vkCmdCopyBuffer(cb, src, dst, 1, &region);
  VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                        .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                        .dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                                         VK_ACCESS_TRANSFER_WRITE_BIT};
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT,
                       VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0,
                       NULL, 0, NULL);
  assert_int_equal(vkEndCommandBuffer(cb), VK_SUCCESS);
  VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  VkFence fence;
  assert_int_equal(vkCreateFence(T.device, &fci, NULL, &fence), VK_SUCCESS);
  VkSubmitInfo si = {
      .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cb};
  const struct adr_vulkan_queue_lock* ql = NULL;
  assert_int_equal(adr_device_native(T.dev, ADR_VULKAN_NATIVE_QUEUE_LOCK, (void**)&ql, NULL), 0);
  ql->lock(ql->ctx);
  VkResult r = vkQueueSubmit(T.queue, 1, &si, fence);
  ql->unlock(ql->ctx);
  assert_int_equal(r, VK_SUCCESS);
  assert_int_equal(vkWaitForFences(T.device, 1, &fence, VK_TRUE, UINT64_MAX), VK_SUCCESS);
  vkDestroyFence(T.device, fence, NULL);
  vkDestroyCommandPool(T.device, pool, NULL);
}

static struct adr_vulkan_buffer lookup(const void* p) {
  struct adr_vulkan_buffer q = {.struct_size = sizeof(q)};
  struct adr_error e = {{0}};
  int st = adr_vulkan_buffer(T.dev, p, &q, &e);
  if (st != 0) fail_msg("adr_vulkan_buffer(%p): %s: %s", p, adr_status_name(st), e.message);
  return q;
}

/* A 100-byte allocation between two neighbours: its exact bounds at every
 * byte, one past the end ENOENT, and its bytes through vkCmdCopyBuffer in
 * both directions, neighbours untouched. */
static void test_exact_bounds_and_copies(void** state) {
  (void)state;
  void *before = NULL, *p = NULL, *after = NULL;
  ASSERT_ADR(adr_alloc(T.dev, 256, 0, NULL, &before, VKB_ERR));
  ASSERT_ADR(adr_alloc(T.dev, 100, 0, NULL, &p, VKB_ERR));
  ASSERT_ADR(adr_alloc(T.dev, 300, 0, NULL, &after, VKB_ERR));
  struct adr_vulkan_buffer q0 = lookup(p);
  assert_true(q0.buffer != 0);
  assert_true(q0.memory != 0);
  for (size_t k = 0; k < 100; k++) {
    struct adr_vulkan_buffer q = lookup((char*)p + k);
    assert_ptr_equal(q.address, (char*)p + k);
    assert_ptr_equal(q.base, p);
    assert_int_equal(q.size, 100);
    assert_int_equal(q.offset, k);
    assert_int_equal(q.buffer, q0.buffer);
    assert_int_equal(q.buffer_offset, q0.buffer_offset + k);
    assert_int_equal(q.memory, q0.memory);
    assert_int_equal(q.memory_offset, q0.memory_offset + k);
  }
  struct adr_vulkan_buffer q = {.struct_size = sizeof(q)};
  struct adr_error e = {{0}};
  expect_error(adr_vulkan_buffer(T.dev, (char*)p + 100, &q, &e), &e, ENOENT,
               "not inside an allocation of vulkan:0");
  struct adr_vulkan_buffer qa = lookup((char*)after + 299);
  assert_ptr_equal(qa.base, after);
  assert_int_equal(qa.size, 300);
  assert_int_equal(qa.offset, 299);

  unsigned char in[100], back[100], nb[300];
  for (int i = 0; i < 100; i++) in[i] = (unsigned char)(i * 7 + 3);
  ASSERT_ADR(adr_memset(T.dev, before, 0xee, 256, NULL, VKB_ERR));
  ASSERT_ADR(adr_memset(T.dev, after, 0xdd, 300, NULL, VKB_ERR));
  vkt_upload(&T, p, in, 100);

  struct app_buffer app;
  app_buffer_create(&app, 4096);
  memset(app.mapped, 0, 4096);
  /* adr -> application, whole and from the middle. */
  copy_buffer(VKB_BUFFER(q0.buffer), q0.buffer_offset, app.buffer, 0, 100);
  assert_memory_equal(app.mapped, in, 100);
  struct adr_vulkan_buffer qm = lookup((char*)p + 37);
  copy_buffer(VKB_BUFFER(qm.buffer), qm.buffer_offset, app.buffer, 1000, 63);
  assert_memory_equal(app.mapped + 1000, in + 37, 63);
  /* application -> adr, into the middle; adr reads it back. */
  for (int i = 0; i < 20; i++) app.mapped[2000 + i] = (unsigned char)(0x80 + i);
  struct adr_vulkan_buffer qw = lookup((char*)p + 50);
  copy_buffer(app.buffer, 2000, VKB_BUFFER(qw.buffer), qw.buffer_offset, 20);
  vkt_download(&T, back, p, 100);
  assert_memory_equal(back, in, 50);
  assert_memory_equal(back + 50, app.mapped + 2000, 20);
  assert_memory_equal(back + 70, in + 70, 30);
  app_buffer_destroy(&app);
  vkt_download(&T, nb, after, 300);
  for (int i = 0; i < 300; i++) assert_int_equal(nb[i], 0xdd);
  vkt_download(&T, nb, before, 256);
  for (int i = 0; i < 256; i++) assert_int_equal(nb[i], 0xee);

  ASSERT_ADR(adr_free(T.dev, p, 100, NULL, VKB_ERR));
  expect_error(adr_vulkan_buffer(T.dev, p, &q, &e), &e, ENOENT, "not inside an allocation");
  ASSERT_ADR(adr_free(T.dev, before, 256, NULL, VKB_ERR));
  ASSERT_ADR(adr_free(T.dev, after, 300, NULL, VKB_ERR));
  vkt_assert_no_validation_messages(&T);
}

/* A large allocation (a dedicated block with ADR_ALLOC=backend and 1 MiB
 * blocks; the pool's own large chunk otherwise): its last byte. */
static void test_large_allocation(void** state) {
  (void)state;
  enum { SIZE = 3 << 20 };
  void* p = NULL;
  ASSERT_ADR(adr_alloc(T.dev, SIZE, 0, NULL, &p, VKB_ERR));
  unsigned char tail[16];
  for (int i = 0; i < 16; i++) tail[i] = (unsigned char)(0x40 + i);
  vkt_upload(&T, (char*)p + SIZE - 16, tail, 16);
  struct adr_vulkan_buffer q = lookup((char*)p + SIZE - 16);
  assert_ptr_equal(q.base, p);
  assert_int_equal(q.size, SIZE);
  assert_int_equal(q.offset, SIZE - 16);
  struct app_buffer app;
  app_buffer_create(&app, 64);
  memset(app.mapped, 0, 64);
  copy_buffer(VKB_BUFFER(q.buffer), q.buffer_offset, app.buffer, 0, 16);
  assert_memory_equal(app.mapped, tail, 16);
  app_buffer_destroy(&app);
  struct adr_error e = {{0}};
  expect_error(adr_vulkan_buffer(T.dev, (char*)p + SIZE, &q, &e), &e, ENOENT,
               "not inside an allocation");
  ASSERT_ADR(adr_free(T.dev, p, SIZE, NULL, VKB_ERR));
  vkt_assert_no_validation_messages(&T);
}

/* The in/out native kind answers as the typed function does. */
static void test_native_kind_same_answer(void** state) {
  (void)state;
  void* p = NULL;
  ASSERT_ADR(adr_alloc(T.dev, 100, 0, NULL, &p, VKB_ERR));
  struct adr_vulkan_buffer a = lookup((char*)p + 9);
  struct adr_vulkan_buffer b = {.struct_size = sizeof(b), .address = (char*)p + 9};
  void* inout = &b;
  ASSERT_ADR(adr_device_native(T.dev, ADR_VULKAN_NATIVE_BUFFER, &inout, VKB_ERR));
  assert_ptr_equal(inout, &b);
  assert_memory_equal(&a, &b, sizeof(a));
  struct adr_error e = {{0}};
  b.address = (char*)p + 100;
  expect_error(adr_device_native(T.dev, ADR_VULKAN_NATIVE_BUFFER, &inout, &e), &e, ENOENT,
               "not inside an allocation");
  inout = NULL;
  expect_error(adr_device_native(T.dev, ADR_VULKAN_NATIVE_BUFFER, &inout, &e), &e, EINVAL,
               "struct adr_vulkan_buffer");
  ASSERT_ADR(adr_free(T.dev, p, 100, NULL, VKB_ERR));
}

static void test_bad_input(void** state) {
  (void)state;
  void* p = NULL;
  ASSERT_ADR(adr_alloc(T.dev, 64, 0, NULL, &p, VKB_ERR));
  struct adr_vulkan_buffer q = {.struct_size = sizeof(q)};
  struct adr_error e = {{0}};
  expect_error(adr_vulkan_buffer(NULL, p, &q, &e), &e, EINVAL, "device is NULL");
  expect_error(adr_vulkan_buffer(T.dev, p, NULL, &e), &e, EINVAL, "out is NULL");
  expect_error(adr_vulkan_buffer(T.dev, NULL, &q, &e), &e, EINVAL, "ptr is NULL");
  expect_error(adr_vulkan_buffer(T.cpu, p, &q, &e), &e, EINVAL, "cpu:0 is not a Vulkan device");
  struct adr_vulkan_buffer small = {.struct_size = 16};
  expect_error(adr_vulkan_buffer(T.dev, p, &small, &e), &e, EINVAL, "struct_size 16 is too small");
  unsigned char host[16];
  expect_error(adr_vulkan_buffer(T.dev, host, &q, &e), &e, ENOENT, "not inside an allocation");
  void* c = NULL;
  ASSERT_ADR(adr_alloc(T.cpu, 64, 0, NULL, &c, VKB_ERR));
  expect_error(adr_vulkan_buffer(T.dev, c, &q, &e), &e, ENOENT, "not inside an allocation");
  ASSERT_ADR(adr_free(T.cpu, c, 64, NULL, VKB_ERR));
  assert_int_equal(adr_vulkan_buffer(T.dev, NULL, &q, NULL), EINVAL);
  ASSERT_ADR(adr_free(T.dev, p, 64, NULL, VKB_ERR));
}

int main(void) {
  vkt_require_or_skip(&T);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_exact_bounds_and_copies),
      cmocka_unit_test(test_large_allocation),
      cmocka_unit_test(test_native_kind_same_answer),
      cmocka_unit_test(test_bad_input),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
