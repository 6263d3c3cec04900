// qsa portability header: one kernel source for CUDA (nvcc) and HIP (hipcc / clang -x hip).
//
// Kernels include only this header. It maps the few primitives the kernels use (wave width,
// shuffles, ballots, barriers, atomics, dynamic shared memory) onto each vendor, the way
// ggml's vendors/hip.h does. The wave width comes from the compiler's target, never from a
// literal 32: QSA_WAVE is 64 on gfx906 / gfx950 and 32 on NVIDIA and gfx1201.
#pragma once

#if defined(QSA_EMU)  // ---- SIMT emulator hook: the kernels on host fibers (src/emu/) ----
#include "emu.h"      // QSA_WAVE, lane masks and every primitive below, for the host
// ---- end of the emulator hook ----
#elif defined(__HIPCC__) || defined(__HIP__)
#define QSA_HIP 1
#include <hip/hip_runtime.h>
// clang 22 no longer defines __AMDGCN_WAVEFRONT_SIZE; the build passes it explicitly
// (xtask/src/build.rs), so a missing definition is a build-system bug, not a default.
#if defined(__HIP_DEVICE_COMPILE__) && !defined(__AMDGCN_WAVEFRONT_SIZE)
#error "__AMDGCN_WAVEFRONT_SIZE is not defined: the build must pass -D__AMDGCN_WAVEFRONT_SIZE=32|64"
#endif
#if defined(__AMDGCN_WAVEFRONT_SIZE)
#define QSA_WAVE __AMDGCN_WAVEFRONT_SIZE
#else
#define QSA_WAVE 64  // host pass of a HIP compile: never used for device code
#endif
typedef unsigned long long qsa_lanemask_t;
#define QSA_FULL_MASK (~0ull)
#define qsa_shfl_xor(v, m) __shfl_xor((v), (m), QSA_WAVE)
#define qsa_shfl_down(v, d) __shfl_down((v), (d), QSA_WAVE)
#define qsa_shfl(v, src) __shfl((v), (src), QSA_WAVE)
#define qsa_ballot(p) ((qsa_lanemask_t)__ballot(p))
#define qsa_popc_mask(m) __popcll(m)
#define QSA_SYNCWARP() __builtin_amdgcn_wave_barrier()
#else
#define QSA_CUDA 1
#include <cuda_runtime.h>
#include <stdint.h>
#define QSA_WAVE 32
typedef unsigned int qsa_lanemask_t;
#define QSA_FULL_MASK 0xffffffffu
#define qsa_shfl_xor(v, m) __shfl_xor_sync(QSA_FULL_MASK, (v), (m), QSA_WAVE)
#define qsa_shfl_down(v, d) __shfl_down_sync(QSA_FULL_MASK, (v), (d), QSA_WAVE)
#define qsa_shfl(v, src) __shfl_sync(QSA_FULL_MASK, (v), (src), QSA_WAVE)
#define qsa_ballot(p) __ballot_sync(QSA_FULL_MASK, (p))
#define qsa_popc_mask(m) __popc(m)
#define QSA_SYNCWARP() __syncwarp()
#endif

#define QSA_KERNEL extern "C" __global__
#define QSA_DEVICE static __device__ __forceinline__
#define QSA_SYNC() __syncthreads()

// Dynamic shared memory / LDS, declared once per kernel as bytes.
#define QSA_DYNAMIC_SHARED(name) extern __shared__ __align__(16) unsigned char name[]

// Lane index within the wave, and the lanes below it (for prefix counts of ballots).
QSA_DEVICE unsigned qsa_lane() { return threadIdx.x % QSA_WAVE; }
QSA_DEVICE qsa_lanemask_t qsa_lanes_below() {
  return (qsa_lanemask_t)((((qsa_lanemask_t)1) << qsa_lane()) - 1);
}

// Sum over the wave (every lane gets the total), for any wave width.
template <typename T> QSA_DEVICE T qsa_wave_sum(T v) {
#pragma unroll
  for (int off = QSA_WAVE / 2; off > 0; off >>= 1) v += qsa_shfl_xor(v, off);
  return v;
}

// The selection-order key of the contract (DESIGN.md): monotone u32 of the f32 score,
// -0.0 mapped to +0.0, every NaN below -inf. Larger key = selected first.
QSA_DEVICE unsigned qsa_order_key(float x) {
  unsigned u = __float_as_uint(x);
  if (u == 0x80000000u) u = 0u;                        // -0.0 -> +0.0
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return 0u;  // NaN lowest
  unsigned k = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  // -inf maps to 0x007fffff; NaN takes 0, below it. Nothing else maps to 0.
  return k;
}
