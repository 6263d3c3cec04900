// Probe kernel of the wgmma primitives (kernels/common/mma.h, QSA_WGMMA), for
// tests/emu_wgmma.rs: one warpgroup copies a shared-memory image (built by the test from the
// PTX ISA's layout, not from the emulator) into dynamic shared memory, runs `ksteps`
// wgmma steps whose descriptors the test chose (start, LBO, SBO; each step's starts advance
// by `kstep_bytes`), and stores every thread's D registers as they are, so the test sees the
// raw fragment mapping and the descriptor decoding.
//
// Built by the emulator for sm_90 (which stands for sm_90a); nvcc builds it with
// `-cubin -gencode arch=compute_90a,code=sm_90a` for a check on a card.
#include "common/portable.h"

#if defined(QSA_WGMMA)
template <int N, bool BF16>
__device__ void probe_run(unsigned base, unsigned a_start, unsigned b_start, unsigned lbo,
                          unsigned sbo, unsigned kstep_bytes, int ksteps, float* d_out) {
  float d[N / 2];
  for (int i = 0; i < N / 2; ++i) d[i] = 0.f;
  qsa_wgmma_fence();
  for (int ks = 0; ks < ksteps; ++ks) {
    const unsigned long long da = qsa_wgmma_desc(base + a_start + ks * kstep_bytes, lbo, sbo);
    const unsigned long long db = qsa_wgmma_desc(base + b_start + ks * kstep_bytes, lbo, sbo);
    if constexpr (BF16 && N == 256) qsa_wgmma_m64n256k16_bf16(d, da, db, ks > 0);
    else if constexpr (BF16 && N == 64) qsa_wgmma_m64n64k16_bf16(d, da, db, ks > 0);
    else if constexpr (BF16) qsa_wgmma_m64n128k16_bf16(d, da, db, ks > 0);
    else if constexpr (N == 256) qsa_wgmma_m64n256k8_tf32(d, da, db, ks > 0);
    else qsa_wgmma_m64n128k8_tf32(d, da, db, ks > 0);
  }
  qsa_wgmma_commit();
  qsa_wgmma_wait<0>();
  qsa_wgmma_fence_regs(d);
  for (int i = 0; i < N / 2; ++i) d_out[threadIdx.x * (N / 2) + i] = d[i];
}

// which: 0 = m64n128k8 tf32, 1 = m64n256k8 tf32, 2 = m64n128k16 bf16, 3 = m64n256k16 bf16,
// 4 = m64n64k16 bf16 (the wgmma backward's, common/attention_kv_wg.h).
// One block of 128 threads; dynamic shared memory >= image_bytes.
// qsa:block 128
QSA_KERNEL void probe_wgmma(const unsigned char* image, int image_bytes, unsigned a_start,
                            unsigned b_start, unsigned lbo, unsigned sbo, unsigned kstep_bytes,
                            int ksteps, int which, float* d_out) {
  QSA_DYNAMIC_SHARED(probe_smem);
  for (int i = threadIdx.x; i < image_bytes; i += blockDim.x) probe_smem[i] = image[i];
  qsa_fence_proxy_async();
  __syncthreads();
  const unsigned base = qsa_smem_addr(probe_smem);
  if (which == 0) probe_run<128, false>(base, a_start, b_start, lbo, sbo, kstep_bytes, ksteps, d_out);
  if (which == 1) probe_run<256, false>(base, a_start, b_start, lbo, sbo, kstep_bytes, ksteps, d_out);
  if (which == 2) probe_run<128, true>(base, a_start, b_start, lbo, sbo, kstep_bytes, ksteps, d_out);
  if (which == 3) probe_run<256, true>(base, a_start, b_start, lbo, sbo, kstep_bytes, ksteps, d_out);
  if (which == 4) probe_run<64, true>(base, a_start, b_start, lbo, sbo, kstep_bytes, ksteps, d_out);
}

// The RS forms (A from registers): thread tid's A fragment for k step ks is a_regs[(ks * 128
// + tid) * 4 + r], r < 4, built by the test from the ISA's register-fragment table; B from
// the shared image as above, or (sw128) in the 128-byte-swizzle layout: the image is then
// placed at the first 1024-byte-aligned shared address (the swizzle permutes address bits).
template <int N, bool BF16>
__device__ void probe_run_rs(unsigned base, unsigned b_start, unsigned lbo, unsigned sbo,
                             unsigned kstep_bytes, int ksteps, int sw128, const unsigned* a_regs,
                             float* d_out) {
  float d[N / 2];
  for (int i = 0; i < N / 2; ++i) d[i] = 0.f;
  unsigned a[2][4];
  for (int ks = 0; ks < 2; ++ks)
    for (int r = 0; r < 4; ++r) a[ks][r] = a_regs[(ks * 128 + threadIdx.x) * 4 + r];
  qsa_wgmma_fence();
  for (int ks = 0; ks < ksteps && ks < 2; ++ks) {
    const unsigned at = base + b_start + ks * kstep_bytes;
    const unsigned long long db = sw128 ? qsa_wgmma_desc_sw128(at, sbo) : qsa_wgmma_desc(at, lbo, sbo);
    if constexpr (BF16 && N == 256) qsa_wgmma_m64n256k16_bf16_rs(d, a[ks], db, ks > 0);
    else if constexpr (BF16 && N == 64) qsa_wgmma_m64n64k16_bf16_rs(d, a[ks], db, ks > 0);
    else if constexpr (BF16) qsa_wgmma_m64n128k16_bf16_rs(d, a[ks], db, ks > 0);
    else if constexpr (N == 256) qsa_wgmma_m64n256k8_tf32_rs(d, a[ks], db, ks > 0);
    else qsa_wgmma_m64n128k8_tf32_rs(d, a[ks], db, ks > 0);
  }
  qsa_wgmma_commit();
  qsa_wgmma_wait<0>();
  qsa_wgmma_fence_regs(d);
  qsa_wgmma_fence_aregs(a);
  for (int i = 0; i < N / 2; ++i) d_out[threadIdx.x * (N / 2) + i] = d[i];
}

// qsa:block 128
QSA_KERNEL void probe_wgmma_rs(const unsigned char* image, int image_bytes, unsigned b_start,
                               unsigned lbo, unsigned sbo, unsigned kstep_bytes, int ksteps,
                               int which, int sw128, const unsigned* a_regs, float* d_out) {
  QSA_DYNAMIC_SHARED(probe_smem);
  const unsigned raw = qsa_smem_addr(probe_smem);
  const unsigned pad = sw128 ? ((raw + 1023u) & ~1023u) - raw : 0u;
  for (int i = threadIdx.x; i < image_bytes; i += blockDim.x) probe_smem[pad + i] = image[i];
  qsa_fence_proxy_async();
  __syncthreads();
  const unsigned base = raw + pad;
  if (which == 0) probe_run_rs<128, false>(base, b_start, lbo, sbo, kstep_bytes, ksteps, sw128, a_regs, d_out);
  if (which == 1) probe_run_rs<256, false>(base, b_start, lbo, sbo, kstep_bytes, ksteps, sw128, a_regs, d_out);
  if (which == 2) probe_run_rs<128, true>(base, b_start, lbo, sbo, kstep_bytes, ksteps, sw128, a_regs, d_out);
  if (which == 3) probe_run_rs<256, true>(base, b_start, lbo, sbo, kstep_bytes, ksteps, sw128, a_regs, d_out);
  if (which == 4) probe_run_rs<64, true>(base, b_start, lbo, sbo, kstep_bytes, ksteps, sw128, a_regs, d_out);
}
#endif
