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
#elif defined(QSA_HOST)
// Host build (g++, no GPU): hostcheck/ compiles this header with -DQSA_HOST to check the pure
// helpers below against the Rust contract (src/contract.rs) on the CPU, from this same text.
// It defines only what the header itself needs to parse and what the pure helpers call:
// - no SIMT yet: one thread (lane 0 of a wave of 32). qsa_shfl_*, qsa_ballot, QSA_SYNC,
//   shared memory and atomics are left undefined, so host code that uses one fails to
//   compile naming it, instead of silently running a single-lane version. Kernels that need
//   them run on the host through the SIMT emulator instead (the QSA_EMU branch above).
// - __float_as_uint / __uint_as_float: bit casts, as the device intrinsics are (memcpy is
//   how C++ spells a bit cast without undefined behaviour).
#include <stdint.h>
#include <string.h>
#define QSA_WAVE 32
typedef unsigned int qsa_lanemask_t;
#define QSA_FULL_MASK 0xffffffffu
#define __global__
#define __device__
#define __forceinline__ inline __attribute__((always_inline))
struct qsa_host_dim3 {
  unsigned x, y, z;
};
// The emulated thread's index; the single-thread host model keeps it at 0.
inline thread_local qsa_host_dim3 threadIdx = {0u, 0u, 0u};
static inline unsigned __float_as_uint(float x) {
  unsigned u;
  memcpy(&u, &x, sizeof u);
  return u;
}
static inline float __uint_as_float(unsigned u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}
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

// Dynamic shared memory / LDS, declared once per kernel as bytes (emu.h has its own).
#if !defined(QSA_DYNAMIC_SHARED)
#define QSA_DYNAMIC_SHARED(name) extern __shared__ __align__(16) unsigned char name[]
#endif

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

// ---- Pure helpers ------------------------------------------------------------------------
// Functions of their arguments only, that decide results: hostcheck/ compiles them for the
// host from this header (QSA_HOST above) and checks them against the Rust contract
// (`cargo test -p qsa-hostcheck`). Keep such helpers here, written in portable C++; a helper
// that is a vendor intrinsic or inline asm on the device (the tf32 / bf16 / f16 roundings of
// the tensor-core paths) cannot be checked this way.

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

// Radix digit of an order key: bits [shift, shift + 8), shift = 24 - 8 * d for digit d
// (d = 0 is the most significant). The top-k kernels and the probe bin keys by it.
QSA_DEVICE unsigned qsa_radix_digit(unsigned key, int shift) { return (key >> shift) & 0xffu; }

// A prefill query's entry count: its active count clamped to [0, n] (a negative or oversized
// active count selects nothing / the whole row, never reads past it).
QSA_DEVICE int qsa_clamp_count(int active, int n) { return active < 0 ? 0 : (active > n ? n : active); }

// bf16 -> f32 (exact: a bf16 is the top half of an f32). A packed pair holds the lower index
// in its low half.
QSA_DEVICE float qsa_bf16_to_f32(unsigned short b) { return __uint_as_float(((unsigned)b) << 16); }
QSA_DEVICE float qsa_bf16x2_lo(unsigned w) { return __uint_as_float(w << 16); }
QSA_DEVICE float qsa_bf16x2_hi(unsigned w) { return __uint_as_float(w & 0xffff0000u); }

// Matrix-core, async-copy and conversion instructions (mma.sync, ldmatrix, cp.async, cvt,
// WMMA, MFMA) behind portable names; emulated on the host under QSA_EMU.
#include "mma.h"

// Thread-block clusters and distributed shared memory (sm_90), behind portable names.
#include "cluster.h"
