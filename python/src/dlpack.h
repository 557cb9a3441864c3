/* SPDX-License-Identifier: Apache-2.0
 *
 * The DLPack ABI (v1.0), written from the public specification
 * (https://dmlc.github.io/dlpack/latest/c_api.html): dlpack.h is not
 * packaged on Debian 12. Only what adr's Python module uses. The device
 * type values are the same numbers as Arrow's ArrowDeviceType (Arrow chose
 * them to match), which _Static_asserts in dlpack.c check.
 */
#ifndef ADRPY_DLPACK_H
#define ADRPY_DLPACK_H

#include <stdint.h>

#define ADRPY_DLPACK_MAJOR 1
#define ADRPY_DLPACK_MINOR 0

typedef enum {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
} DLDeviceType;

typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;

typedef enum {
  kDLInt = 0,
  kDLUInt = 1,
  kDLFloat = 2,
  kDLOpaqueHandle = 3,
  kDLBfloat = 4,
  kDLComplex = 5,
  kDLBool = 6,
} DLDataTypeCode;

typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides; /* NULL: compact row-major */
  uint64_t byte_offset;
} DLTensor;

/* The legacy ("dltensor" capsule) managed tensor. */
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;

typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

#define DLPACK_FLAG_BITMASK_READ_ONLY (UINT64_C(1) << 0)
#define DLPACK_FLAG_BITMASK_IS_COPIED (UINT64_C(1) << 1)

/* The versioned ("dltensor_versioned" capsule) managed tensor, DLPack >= 1.0. */
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

#endif /* ADRPY_DLPACK_H */
