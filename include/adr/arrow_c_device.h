/* SPDX-License-Identifier: Apache-2.0
 *
 * The Apache Arrow C Data Interface, C Stream Interface, C Device Data
 * Interface and C Device Async Stream Interface, as ABI definitions.
 *
 * Each block sits under the guard macro the Arrow specification fixes, so
 * this header composes with any other project's copy of the same structs
 * (nanoarrow, Arrow C++, cuDF ...): whichever is included first wins and the
 * definitions are identical by specification.
 */
#ifndef ADR_ARROW_C_DEVICE_H
#define ADR_ARROW_C_DEVICE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE

#define ARROW_FLAG_DICTIONARY_ORDERED 1
#define ARROW_FLAG_NULLABLE 2
#define ARROW_FLAG_MAP_KEYS_SORTED 4

struct ArrowSchema {
  /* Array type description */
  const char* format;
  const char* name;
  const char* metadata;
  int64_t flags;
  int64_t n_children;
  struct ArrowSchema** children;
  struct ArrowSchema* dictionary;

  /* Release callback */
  void (*release)(struct ArrowSchema*);
  /* Opaque producer-specific data */
  void* private_data;
};

struct ArrowArray {
  /* Array data description */
  int64_t length;
  int64_t null_count;
  int64_t offset;
  int64_t n_buffers;
  int64_t n_children;
  const void** buffers;
  struct ArrowArray** children;
  struct ArrowArray* dictionary;

  /* Release callback */
  void (*release)(struct ArrowArray*);
  /* Opaque producer-specific data */
  void* private_data;
};

#endif /* ARROW_C_DATA_INTERFACE */

#ifndef ARROW_C_STREAM_INTERFACE
#define ARROW_C_STREAM_INTERFACE

struct ArrowArrayStream {
  int (*get_schema)(struct ArrowArrayStream*, struct ArrowSchema* out);
  int (*get_next)(struct ArrowArrayStream*, struct ArrowArray* out);
  const char* (*get_last_error)(struct ArrowArrayStream*);

  /* Release callback */
  void (*release)(struct ArrowArrayStream*);
  /* Opaque producer-specific data */
  void* private_data;
};

#endif /* ARROW_C_STREAM_INTERFACE */

#ifndef ARROW_C_DEVICE_DATA_INTERFACE
#define ARROW_C_DEVICE_DATA_INTERFACE

/* Spec: the device type is an int32_t-sized enumeration of known values. */
typedef int32_t ArrowDeviceType;

/* CPU device, same as using ArrowArray directly instead of ArrowDeviceArray */
#define ARROW_DEVICE_CPU 1
/* CUDA GPU Device */
#define ARROW_DEVICE_CUDA 2
/* Pinned CUDA CPU memory by cudaMallocHost */
#define ARROW_DEVICE_CUDA_HOST 3
/* OpenCL Device */
#define ARROW_DEVICE_OPENCL 4
/* Vulkan buffer for next-gen graphics */
#define ARROW_DEVICE_VULKAN 7
/* Metal for Apple GPU */
#define ARROW_DEVICE_METAL 8
/* Verilog simulator buffer */
#define ARROW_DEVICE_VPI 9
/* ROCm GPUs for AMD GPUs */
#define ARROW_DEVICE_ROCM 10
/* Pinned ROCm CPU memory allocated by hipMallocHost */
#define ARROW_DEVICE_ROCM_HOST 11
/* Reserved for extension */
#define ARROW_DEVICE_EXT_DEV 12
/* CUDA managed/unified memory allocated by cudaMallocManaged */
#define ARROW_DEVICE_CUDA_MANAGED 13
/* Unified shared memory allocated on a oneAPI non-partitioned device. */
#define ARROW_DEVICE_ONEAPI 14
/* GPU support in the WebGPU standard */
#define ARROW_DEVICE_WEBGPU 15
/* Qualcomm Hexagon DSP */
#define ARROW_DEVICE_HEXAGON 16

struct ArrowDeviceArray {
  /* the Allocated Array; buffers point to memory on the device below */
  struct ArrowArray array;
  /* The device id to identify a specific device */
  int64_t device_id;
  /* The type of device which can access this memory */
  ArrowDeviceType device_type;
  /* An event-like object to synchronize on if needed (pointer to the native
   * event: CUevent*, hipEvent_t*, cl_event*, VkEvent* ...) */
  void* sync_event;
  /* Reserved bytes for future expansion; producers must zero them */
  int64_t reserved[3];
};

#endif /* ARROW_C_DEVICE_DATA_INTERFACE */

#ifndef ARROW_C_DEVICE_STREAM_INTERFACE
#define ARROW_C_DEVICE_STREAM_INTERFACE

struct ArrowDeviceArrayStream {
  /* device type that all arrays will be accessible from */
  ArrowDeviceType device_type;
  /* callbacks */
  int (*get_schema)(struct ArrowDeviceArrayStream*, struct ArrowSchema*);
  int (*get_next)(struct ArrowDeviceArrayStream*, struct ArrowDeviceArray*);
  const char* (*get_last_error)(struct ArrowDeviceArrayStream*);

  /* release callback */
  void (*release)(struct ArrowDeviceArrayStream*);
  /* Opaque producer-specific data */
  void* private_data;
};

#endif /* ARROW_C_DEVICE_STREAM_INTERFACE */

#ifndef ARROW_C_ASYNC_STREAM_INTERFACE
#define ARROW_C_ASYNC_STREAM_INTERFACE

struct ArrowAsyncTask {
  int (*extract_data)(struct ArrowAsyncTask* self, struct ArrowDeviceArray* out);

  void* private_data;
};

struct ArrowAsyncProducer {
  ArrowDeviceType device_type;

  void (*request)(struct ArrowAsyncProducer* self, int64_t n);
  void (*cancel)(struct ArrowAsyncProducer* self);

  void (*release)(struct ArrowAsyncProducer* self);
  const char* additional_metadata;
  void* private_data;
};

struct ArrowAsyncDeviceStreamHandler {
  /* consumer-specific handlers */
  int (*on_schema)(struct ArrowAsyncDeviceStreamHandler* self,
                   struct ArrowSchema* stream_schema);
  int (*on_next_task)(struct ArrowAsyncDeviceStreamHandler* self,
                      struct ArrowAsyncTask* task, const char* metadata);
  void (*on_error)(struct ArrowAsyncDeviceStreamHandler* self, int code,
                   const char* message, const char* metadata);

  /* release callback */
  void (*release)(struct ArrowAsyncDeviceStreamHandler* self);

  /* must be populated before calling any callbacks */
  struct ArrowAsyncProducer* producer;

  /* opaque handler-specific data */
  void* private_data;
};

#endif /* ARROW_C_ASYNC_STREAM_INTERFACE */

/* The layout is ABI: pin it down on the common LP64/LLP64 targets. */
#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && UINTPTR_MAX == UINT64_MAX
#include <stddef.h>
_Static_assert(sizeof(struct ArrowSchema) == 72, "ArrowSchema layout");
_Static_assert(offsetof(struct ArrowSchema, release) == 56, "ArrowSchema.release");
_Static_assert(sizeof(struct ArrowArray) == 80, "ArrowArray layout");
_Static_assert(offsetof(struct ArrowArray, buffers) == 40, "ArrowArray.buffers");
_Static_assert(offsetof(struct ArrowArray, release) == 64, "ArrowArray.release");
_Static_assert(sizeof(struct ArrowArrayStream) == 40, "ArrowArrayStream layout");
_Static_assert(sizeof(struct ArrowDeviceArray) == 128, "ArrowDeviceArray layout");
_Static_assert(offsetof(struct ArrowDeviceArray, device_id) == 80, "device_id");
_Static_assert(offsetof(struct ArrowDeviceArray, device_type) == 88, "device_type");
_Static_assert(offsetof(struct ArrowDeviceArray, sync_event) == 96, "sync_event");
_Static_assert(offsetof(struct ArrowDeviceArray, reserved) == 104, "reserved");
_Static_assert(sizeof(struct ArrowDeviceArrayStream) == 48, "ArrowDeviceArrayStream");
_Static_assert(sizeof(struct ArrowAsyncTask) == 16, "ArrowAsyncTask layout");
_Static_assert(sizeof(struct ArrowAsyncProducer) == 48, "ArrowAsyncProducer layout");
_Static_assert(sizeof(struct ArrowAsyncDeviceStreamHandler) == 48,
               "ArrowAsyncDeviceStreamHandler layout");
#endif

#ifdef __cplusplus
}
#endif

#endif /* ADR_ARROW_C_DEVICE_H */
