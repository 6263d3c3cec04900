// Probe kernels of the matrix-core primitives (kernels/common/mma.h), for tests/emu_mma.rs:
// each lane loads its fragment registers from global memory exactly as given, runs ONE
// primitive, and stores its result registers, so the test sees the raw lane mapping.
//
// NVIDIA sm_80+ only. Built two ways: by the emulator (src/emu/compile.rs) for an sm_90 target,
// and by nvcc (`-cubin -arch=sm_90`) for the check against real mma.sync on an H200
// (tests/emu_mma_h200.rs, ignored by default). The AMD probe is
// amd_mma_probe.cu.
#include "common/portable.h"

// a: [32][4] registers, b: [32][2], c: [32][4] in / out. One warp.
QSA_KERNEL void probe_mma_tf32(const unsigned* a, const unsigned* b, float* c) {
  const int l = threadIdx.x;
  const unsigned ar[4] = {a[4 * l], a[4 * l + 1], a[4 * l + 2], a[4 * l + 3]};
  const unsigned br[2] = {b[2 * l], b[2 * l + 1]};
  float cr[4] = {c[4 * l], c[4 * l + 1], c[4 * l + 2], c[4 * l + 3]};
  qsa_mma_m16n8k8_tf32(cr, ar, br);
  for (int i = 0; i < 4; ++i) c[4 * l + i] = cr[i];
}

// is_bf16: 1 = .bf16, 0 = .f16 operands.
QSA_KERNEL void probe_mma_k16(const unsigned* a, const unsigned* b, float* c, int is_bf16) {
  const int l = threadIdx.x;
  const unsigned ar[4] = {a[4 * l], a[4 * l + 1], a[4 * l + 2], a[4 * l + 3]};
  float cr[4] = {c[4 * l], c[4 * l + 1], c[4 * l + 2], c[4 * l + 3]};
  if (is_bf16) qsa_mma_m16n8k16_bf16(cr, ar, b[2 * l], b[2 * l + 1]);
  else qsa_mma_m16n8k16_f16(cr, ar, b[2 * l], b[2 * l + 1]);
  for (int i = 0; i < 4; ++i) c[4 * l + i] = cr[i];
}

// src: 32 rows x 8 b16 at a stride of `stride` b16, copied to shared memory as they are;
// lane l addresses row row_of[l]. out: [32][4] registers.
QSA_KERNEL void probe_ldmatrix_trans(const unsigned short* src, const int* row_of, int stride, unsigned* out) {
  __shared__ __align__(16) unsigned short s[32 * 16];
  const int l = threadIdx.x;
  for (int i = l; i < 32 * stride; i += 32) s[i] = src[i];
  __syncthreads();
  unsigned r0, r1, r2, r3;
  qsa_ldmatrix_x4_trans(s + row_of[l] * stride, r0, r1, r2, r3);
  out[4 * l] = r0;
  out[4 * l + 1] = r1;
  out[4 * l + 2] = r2;
  out[4 * l + 3] = r3;
}

// Lane l copies 16 bytes of src + 16 l with src_bytes[l] into shared memory prefilled with
// 0xee; out gets the 32 x 16 bytes of shared memory after the wait.
QSA_KERNEL void probe_cp_async(const unsigned char* src, const int* src_bytes, unsigned char* out) {
  __shared__ __align__(16) unsigned char s[32 * 16];
  const int l = threadIdx.x;
  for (int i = 0; i < 16; ++i) s[16 * l + i] = 0xee;
  __syncthreads();
  qsa_cp_async16(s + 16 * l, src + 16 * l, src_bytes[l]);
  qsa_cp_async_commit();
  qsa_cp_async_wait_group<0>();
  __syncthreads();
  for (int i = 0; i < 16; ++i) out[16 * l + i] = s[16 * l + i];
}

// Each conversion of x[i] (tf32; bf16x2 and f16x2 of (x[i], x[n-1-i])) and of h[i] (f16).
QSA_KERNEL void probe_convert(const float* x, const unsigned short* h, unsigned* tf32, unsigned* bf16x2,
                              unsigned* f16x2, float* h32, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  tf32[i] = qsa_cvt_tf32(x[i]);
  bf16x2[i] = qsa_pack_bf16x2(x[i], x[n - 1 - i]);
  f16x2[i] = qsa_pack_f16x2(x[i], x[n - 1 - i]);
  h32[i] = qsa_f16_to_f32(h[i]);
}
