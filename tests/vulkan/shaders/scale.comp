// SPDX-License-Identifier: Apache-2.0
//
// Reads `count` uint32 values at device address `src` and writes
// src[i] * 2 + add to device address `dst`. Both addresses come from
// adr_alloc on a Vulkan device (buffer device addresses), offset into the
// allocation by the test. Compiled to SPIR-V at build time when
// glslangValidator is installed; scale.spv.h is the checked-in output of
//   glslangValidator -V --target-env vulkan1.2 --vn scale_spv -o scale.spv.h scale.comp
// which the build compares against a fresh compilation.
#version 450
#extension GL_EXT_buffer_reference : require

layout(buffer_reference, std430, buffer_reference_align = 4) buffer Words {
  uint v[];
};

layout(push_constant) uniform Push {
  Words src;
  Words dst;
  uint count;
  uint add;
} pc;

layout(local_size_x = 64) in;

void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i < pc.count) {
    pc.dst.v[i] = pc.src.v[i] * 2u + pc.add;
  }
}
