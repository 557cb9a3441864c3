/* SPDX-License-Identifier: Apache-2.0
 *
 * adr events as OpenCL sees them: the cl_event* that adr_event_native
 * exports (ArrowDeviceArray.sync_event) is waited on with raw
 * clWaitForEvents; foreign cl_events (same context, other context) are
 * imported and waited on device-side. Work is held back by an OpenCL user
 * event the test signals, so "not complete yet" is observable.
 */
#include "ocl_test.h"

static struct adr_device* dev;
static struct adr_device* cpu;

static cl_event gate_create(cl_context ctx) {
  cl_int rc = CL_SUCCESS;
  cl_event gate = clCreateUserEvent(ctx, &rc);
  assert_int_equal(rc, CL_SUCCESS);
  return gate;
}

static cl_int event_status(cl_event e) {
  cl_int status = -12345;
  ASSERT_CL(clGetEventInfo(e, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status, NULL));
  return status;
}

/* Copies device -> host on a stream held back by a user event of context
 * `gate_ctx` (imported into adr), records an adr event after the copy and
 * waits for that with raw OpenCL once the gate opens. */
static void gated_round_trip(cl_context gate_ctx) {
  enum { N = 64 * 1024 };
  static unsigned char in[N], out[N];
  for (size_t i = 0; i < N; i++) in[i] = (unsigned char)(i * 13 + 1);
  memset(out, 0, sizeof(out));
  void* buf = NULL;
  ASSERT_ADR(adr_alloc(dev, N, 0, NULL, &buf, OCL_ERR));
  ASSERT_ADR(adr_copy(dev, buf, cpu, in, N, NULL, OCL_ERR));

  struct adr_stream* stream = NULL;
  ASSERT_ADR(adr_stream_create(dev, &stream, OCL_ERR));
  cl_event gate = gate_create(gate_ctx);
  struct adr_event* gate_ev = NULL;
  ASSERT_ADR(adr_event_import(dev, &gate, &gate_ev, OCL_ERR));
  ASSERT_ADR(adr_stream_wait_event(stream, gate_ev, OCL_ERR));
  ASSERT_ADR(adr_copy(cpu, out, dev, buf, N, stream, OCL_ERR));
  struct adr_event* done = NULL;
  ASSERT_ADR(adr_event_create(dev, &done, OCL_ERR));
  ASSERT_ADR(adr_event_record(done, stream, OCL_ERR));

  cl_event* native = adr_event_native(done);
  assert_non_null(native);
  assert_non_null(*native);
  /* Held back by the gate: neither OpenCL nor adr may call it complete. */
  assert_true(event_status(*native) > CL_COMPLETE);
  ASSERT_ADR_ERR(adr_event_query(done, OCL_ERR), EBUSY, "");
  assert_int_equal(out[0], 0);
  assert_int_equal(out[N - 1], 0);

  ASSERT_CL(clSetUserEventStatus(gate, CL_COMPLETE));
  /* The raw OpenCL wait is all the synchronisation the host does. */
  ASSERT_CL(clWaitForEvents(1, native));
  assert_int_equal(event_status(*native), CL_COMPLETE);
  assert_memory_equal(out, in, N);
  ASSERT_ADR(adr_event_query(done, OCL_ERR));

  ASSERT_ADR(adr_event_destroy(done, OCL_ERR));
  ASSERT_ADR(adr_event_destroy(gate_ev, OCL_ERR));
  /* adr held its own reference: ours is still valid and ours to drop. */
  assert_int_equal(event_status(gate), CL_COMPLETE);
  ASSERT_CL(clReleaseEvent(gate));
  ASSERT_ADR(adr_stream_destroy(stream, OCL_ERR));
  ASSERT_ADR(adr_free(dev, buf, N, NULL, OCL_ERR));
}

static void test_exported_event_waited_by_raw_opencl(void** state) {
  (void)state;
  gated_round_trip(ocl_test_native(dev, ADR_NATIVE_CONTEXT));
}

/* A gate from an application's own context: the stream cannot put it in a
 * wait list, so the backend bridges it. */
static void test_wait_on_event_of_another_context(void** state) {
  (void)state;
  cl_device_id device = ocl_test_native(dev, ADR_NATIVE_DEVICE);
  cl_int rc = CL_SUCCESS;
  cl_context other = clCreateContext(NULL, 1, &device, NULL, NULL, &rc);
  assert_int_equal(rc, CL_SUCCESS);
  assert_ptr_not_equal(other, ocl_test_native(dev, ADR_NATIVE_CONTEXT));
  gated_round_trip(other);
  ASSERT_CL(clReleaseContext(other));
}

static void test_unrecorded_event_is_complete_for_opencl(void** state) {
  (void)state;
  struct adr_event* ev = NULL;
  ASSERT_ADR(adr_event_create(dev, &ev, OCL_ERR));
  cl_event* native = adr_event_native(ev);
  assert_non_null(native);
  assert_non_null(*native);
  assert_int_equal(event_status(*native), CL_COMPLETE);
  ASSERT_CL(clWaitForEvents(1, native));
  ASSERT_ADR(adr_event_query(ev, OCL_ERR));
  ASSERT_ADR(adr_event_synchronize(ev, OCL_ERR));
  /* Re-recording moves the event; the pointer stays the same. */
  ASSERT_ADR(adr_event_record(ev, NULL, OCL_ERR));
  assert_ptr_equal(adr_event_native(ev), native);
  ASSERT_CL(clWaitForEvents(1, native));
  ASSERT_ADR(adr_event_destroy(ev, OCL_ERR));
}

/* A marker the application enqueued on adr's own queue, imported as a
 * sync_event: adr waits host-side and device-side; it cannot re-record it. */
static void test_import_foreign_marker(void** state) {
  (void)state;
  cl_context ctx = ocl_test_native(dev, ADR_NATIVE_CONTEXT);
  cl_device_id device = ocl_test_native(dev, ADR_NATIVE_DEVICE);
  cl_int rc = CL_SUCCESS;
  cl_command_queue app_queue = clCreateCommandQueueWithProperties(ctx, device, NULL, &rc);
  assert_int_equal(rc, CL_SUCCESS);
  cl_event gate = gate_create(ctx);
  cl_event marker = NULL;
  ASSERT_CL(clEnqueueMarkerWithWaitList(app_queue, 1, &gate, &marker));
  ASSERT_CL(clFlush(app_queue));
  struct adr_event* ev = NULL;
  ASSERT_ADR(adr_event_import(dev, &marker, &ev, OCL_ERR));
  ASSERT_ADR_ERR(adr_event_query(ev, OCL_ERR), EBUSY, "");
  /* The core refuses this before the backend would (with ENOTSUP). */
  ASSERT_ADR_ERR(adr_event_record(ev, NULL, OCL_ERR), EINVAL, "[adr_event_record]");
  ASSERT_CL(clSetUserEventStatus(gate, CL_COMPLETE));
  ASSERT_ADR(adr_event_synchronize(ev, OCL_ERR));
  ASSERT_ADR(adr_event_query(ev, OCL_ERR));
  struct adr_stream* stream = NULL;
  ASSERT_ADR(adr_stream_create(dev, &stream, OCL_ERR));
  ASSERT_ADR(adr_stream_wait_event(stream, ev, OCL_ERR));
  ASSERT_ADR(adr_stream_synchronize(stream, OCL_ERR));
  ASSERT_ADR(adr_stream_destroy(stream, OCL_ERR));
  ASSERT_ADR(adr_event_destroy(ev, OCL_ERR));
  ASSERT_CL(clReleaseEvent(marker));
  ASSERT_CL(clReleaseEvent(gate));
  ASSERT_CL(clReleaseCommandQueue(app_queue));
}

/* A failed command (a user event set to an error) fails adr's event. */
static void test_failed_gate_reports_error(void** state) {
  (void)state;
  cl_context ctx = ocl_test_native(dev, ADR_NATIVE_CONTEXT);
  cl_event gate = gate_create(ctx);
  struct adr_event* ev = NULL;
  ASSERT_ADR(adr_event_import(dev, &gate, &ev, OCL_ERR));
  ASSERT_CL(clSetUserEventStatus(gate, CL_OUT_OF_RESOURCES));
  ASSERT_ADR_ERR(adr_event_query(ev, OCL_ERR), EIO,
                 "[adr_event_query][opencl] CL_OUT_OF_RESOURCES");
  ASSERT_ADR(adr_event_destroy(ev, OCL_ERR));
  ASSERT_CL(clReleaseEvent(gate));
}

static void test_import_rejects_bad_handles(void** state) {
  (void)state;
  struct adr_event* ev = NULL;
  ASSERT_ADR_ERR(adr_event_import(dev, NULL, &ev, OCL_ERR), EINVAL, "");
  /* A NULL cl_event is "nothing to wait for". */
  cl_event none = NULL;
  ASSERT_ADR(adr_event_import(dev, &none, &ev, OCL_ERR));
  ASSERT_ADR(adr_event_synchronize(ev, OCL_ERR));
  ASSERT_ADR(adr_event_query(ev, OCL_ERR));
  ASSERT_ADR(adr_event_destroy(ev, OCL_ERR));

  /* Handles that would crash the ICD loader or that the driver would
   * accept without checking their type: refused with EINVAL, no crash. */
  static uint64_t zeros[16];
  uint64_t junk[16];
  for (size_t i = 0; i < 16; i++) junk[i] = 0x5a5a5a5a5a5a5a5aull ^ i;
  cl_event bad = (cl_event)(void*)zeros;
  ASSERT_ADR_ERR(adr_event_import(dev, &bad, &ev, OCL_ERR), EINVAL, "dispatch");
  bad = (cl_event)(void*)junk;
  ASSERT_ADR_ERR(adr_event_import(dev, &bad, &ev, OCL_ERR), EINVAL, "dispatch");
  bad = (cl_event)(uintptr_t)0x10; /* unmapped */
  ASSERT_ADR_ERR(adr_event_import(dev, &bad, &ev, OCL_ERR), EINVAL, "not readable");
  ASSERT_ADR_ERR(adr_event_import(dev, (void*)(uintptr_t)0x20, &ev, OCL_ERR), EINVAL,
                 "not readable");
  /* Objects of the right platform but the wrong type. */
  bad = (cl_event)ocl_test_native(dev, ADR_NATIVE_QUEUE);
  ASSERT_ADR_ERR(adr_event_import(dev, &bad, &ev, OCL_ERR), EINVAL, "not a cl_event");
  bad = (cl_event)ocl_test_native(dev, ADR_NATIVE_CONTEXT);
  ASSERT_ADR_ERR(adr_event_import(dev, &bad, &ev, OCL_ERR), EINVAL, "");
  bad = (cl_event)ocl_test_native(dev, ADR_NATIVE_DEVICE);
  ASSERT_ADR_ERR(adr_event_import(dev, &bad, &ev, OCL_ERR), EINVAL, "");

  struct adr_stream* s = NULL;
  ASSERT_ADR_ERR(adr_stream_import(dev, junk, &s, OCL_ERR), EINVAL, "dispatch");
  ASSERT_ADR_ERR(adr_stream_import(dev, zeros, &s, OCL_ERR), EINVAL, "dispatch");
  ASSERT_ADR_ERR(adr_stream_import(dev, (void*)(uintptr_t)0x40, &s, OCL_ERR), EINVAL,
                 "not readable");
  ASSERT_ADR_ERR(adr_stream_import(dev, ocl_test_native(dev, ADR_NATIVE_CONTEXT), &s, OCL_ERR),
                 EINVAL, "");
  ASSERT_ADR_ERR(adr_stream_import(dev, ocl_test_native(dev, ADR_NATIVE_DEVICE), &s, OCL_ERR),
                 EINVAL, "");
  cl_int rc = CL_SUCCESS;
  cl_event user = clCreateUserEvent(ocl_test_native(dev, ADR_NATIVE_CONTEXT), &rc);
  assert_int_equal(rc, CL_SUCCESS);
  ASSERT_ADR_ERR(adr_stream_import(dev, user, &s, OCL_ERR), EINVAL, "");
  ASSERT_CL(clSetUserEventStatus(user, CL_COMPLETE));
  ASSERT_CL(clReleaseEvent(user));
}

/* Importing the application's queue gives a working adr stream that leaves
 * the queue to the application; unusable queues are refused. */
static void test_stream_import(void** state) {
  (void)state;
  cl_context ctx = ocl_test_native(dev, ADR_NATIVE_CONTEXT);
  cl_device_id device = ocl_test_native(dev, ADR_NATIVE_DEVICE);
  cl_int rc = CL_SUCCESS;
  cl_command_queue mine = clCreateCommandQueueWithProperties(ctx, device, NULL, &rc);
  assert_int_equal(rc, CL_SUCCESS);
  struct adr_stream* s = NULL;
  ASSERT_ADR(adr_stream_import(dev, mine, &s, OCL_ERR));
  assert_ptr_equal(adr_stream_native(s), mine);
  unsigned char in[4096], out[4096];
  for (size_t i = 0; i < sizeof(in); i++) in[i] = (unsigned char)(255 - i);
  void* buf = NULL;
  ASSERT_ADR(adr_alloc(dev, sizeof(in), 0, s, &buf, OCL_ERR));
  ASSERT_ADR(adr_copy(dev, buf, cpu, in, sizeof(in), s, OCL_ERR));
  ASSERT_ADR(adr_copy(cpu, out, dev, buf, sizeof(out), s, OCL_ERR));
  ASSERT_ADR(adr_stream_synchronize(s, OCL_ERR));
  assert_memory_equal(in, out, sizeof(in));
  ASSERT_ADR(adr_free(dev, buf, sizeof(in), s, OCL_ERR));
  ASSERT_ADR(adr_stream_destroy(s, OCL_ERR));
  /* Still the application's, and usable. */
  ASSERT_CL(clFinish(mine));
  ASSERT_CL(clReleaseCommandQueue(mine));

  cl_queue_properties ooo[] = {CL_QUEUE_PROPERTIES, CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, 0};
  cl_command_queue unordered = clCreateCommandQueueWithProperties(ctx, device, ooo, &rc);
  if (rc == CL_SUCCESS) {
    ASSERT_ADR_ERR(adr_stream_import(dev, unordered, &s, OCL_ERR), EINVAL, "out-of-order");
    ASSERT_CL(clReleaseCommandQueue(unordered));
  }
  cl_context other = clCreateContext(NULL, 1, &device, NULL, NULL, &rc);
  assert_int_equal(rc, CL_SUCCESS);
  cl_command_queue foreign = clCreateCommandQueueWithProperties(other, device, NULL, &rc);
  assert_int_equal(rc, CL_SUCCESS);
  ASSERT_ADR_ERR(adr_stream_import(dev, foreign, &s, OCL_ERR), EINVAL, "another context");
  ASSERT_CL(clReleaseCommandQueue(foreign));
  ASSERT_CL(clReleaseContext(other));
}

int main(void) {
  ocl_test_devices(&dev, &cpu);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_exported_event_waited_by_raw_opencl),
      cmocka_unit_test(test_wait_on_event_of_another_context),
      cmocka_unit_test(test_unrecorded_event_is_complete_for_opencl),
      cmocka_unit_test(test_import_foreign_marker),
      cmocka_unit_test(test_failed_gate_reports_error),
      cmocka_unit_test(test_import_rejects_bad_handles),
      cmocka_unit_test(test_stream_import),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
