// qsa SIMT emulator: CUDA's / HIP's built-in vector types for the host build (emu.h
// includes this last). The kernels load and store 8 and 16 bytes at a time through them
// (float2 / float4 / uint4), and sm_90's attention backward adds float4s atomically.
//
// The device types are plain aggregates of 32-bit fields with the vector's natural
// alignment, so reinterpret_cast'ing a 16-byte-aligned float* to float4* reads the same
// four floats on the host as on the card.
#pragma once

struct __attribute__((aligned(8))) float2 {
  float x, y;
};
struct __attribute__((aligned(16))) float4 {
  float x, y, z, w;
};
struct __attribute__((aligned(8))) uint2 {
  unsigned x, y;
};
struct __attribute__((aligned(16))) uint4 {
  unsigned x, y, z, w;
};
struct __attribute__((aligned(8))) int2 {
  int x, y;
};
struct __attribute__((aligned(16))) int4 {
  int x, y, z, w;
};

inline float2 make_float2(float x, float y) { return float2{x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return uint2{x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
inline int2 make_int2(int x, int y) { return int2{x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }

// sm_90's vector reductions (red.global.add.v4.f32): each component is its own atomic, as
// on the card (the four adds are not one indivisible update there either). Returns the old
// value, as CUDA's overload does.
inline float2 atomicAdd(float2* p, float2 v) {
  return float2{atomicAdd(&p->x, v.x), atomicAdd(&p->y, v.y)};
}
inline float4 atomicAdd(float4* p, float4 v) {
  return float4{atomicAdd(&p->x, v.x), atomicAdd(&p->y, v.y), atomicAdd(&p->z, v.z), atomicAdd(&p->w, v.w)};
}
