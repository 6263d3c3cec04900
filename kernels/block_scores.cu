// Indexer block scores: S[q,b] = sum_h w[q,h] * relu(Q[q,h,:] . Kb[b,:]), head dim 128.
//
// Q [nq, heads, 128], Kb [blocks, 128], w [nq, heads], S [nq, blocks], all f32 row-major.
// A GEMM (M = nq*heads, N = blocks, K = 128) whose epilogue applies ReLU per head and sums
// the heads of each query with their weights. relu(x) = fmaxf(x, 0) (a NaN dot gives 0).
//
// Kernels (extern "C", launched by name; launch rules are in src/gpu/scores/):
//   block_scores_warp         the baseline: one 32-lane group per (q, b). Every target.
//   block_scores_simt         FP32 tiled SIMT GEMM, 1 query x 8 heads x 8 blocks per
//   block_scores_simt_d16     thread, d staged 8 (or 16, sm_90+ only) at a time. Every
//                             target. Same arithmetic as the CPU backend.
//   block_scores_tf32         TF32 tensor cores (mma.sync m16n8k8), 128 rows x 128 blocks
//                             per CTA. NVIDIA sm_80+ only.
//   block_scores_tf32_decode  decode: Q resident in shared memory, Kb streamed once by
//                             persistent CTAs (common/scores_decode.h), heads <= 64.
//   block_scores_bf16         BF16 tensor cores (mma.sync m16n8k16), inputs rounded to bf16
//   block_scores_bf16_decode  in the kernel, f32 accumulation. NVIDIA sm_80+ only.
//   block_scores_wmma_bf16    BF16 matrix cores, inputs rounded to bf16 in the kernel, f32
//   block_scores_mfma_bf16    accumulation: gfx1200/gfx1201 (WMMA) and gfx950 (MFMA) only.
//   block_scores_tf32_wgmma   TF32 / BF16 Hopper warpgroup MMA (wgmma, operands in shared
//   block_scores_bf16_wgmma   memory), the prefill kernels of sm_90 (built as sm_90a) only.
//   block_scores_tf32_decode_wg  decode on wgmma (sm_90a only): Kb tiles as A from registers,
//   block_scores_bf16_decode_wg  Q resident as B (common/scores_decode_wg.h), heads <= 64.
//   block_scores_{tf32,bf16}_decode_wgc  the same, A through a cp.async ring in shared memory;
//   block_scores_{tf32,bf16}_decode_wgc2 two warpgroups per CTA sharing Q, a ring each.
//   block_scores_{tf32,bf16}_decode_tma[2] the same fed by a TMA producer warp (mbarrier ring).
//   block_scores_{tf32,bf16}_wgrs{128,256}[p][s|o]  wgmma with A from registers (RS), sm_90a only
//                             (common/scores_wgrs.h; QSA_SCORES_WG picks one).
//
// Summation orders (the CPU backend reproduces the first two bit for bit):
//   warp: lane l (0..31) of a group: p = Q[4l]*K[4l]; p = fmaf(Q[4l+j], K[4l+j], p) for
//         j = 1, 2, 3; then p += shfl_xor(p, o) for o = 16, 8, 4, 2, 1 (each lane then holds
//         the same sum: float addition is commutative); per (q, b): acc = 0;
//         acc = fmaf(w[q,h], relu(dot_h), acc) for h = 0 .. heads-1.
//   simt: dot = 0; dot = fmaf(Q[d], K[d], dot) for d = 0 .. 127 (the first step is the
//         rounded product); the same head loop as the warp kernel.
//   tf32 / bf16: tensor-core order (k permuted within 32-wide chunks), heads summed in a
//         fixed tree order; deterministic run to run, not equal to the above.
//   *_wgmma: the same kind of order (k in the instruction's, heads in a fixed tree order).
//   *_wgrs*: k permuted within 16-wide chunks, heads in 16-head tiles (fixed tree), tiles in
//         ascending order.
//   wmma_bf16 / mfma_bf16: matrix-core order, heads summed per lane in ascending order
//         then across lane groups; deterministic run to run, not equal to the above.
// The bodies live in common/scores_*.h; the emulator (src/emu/compile.rs) reads the names of
// dynamic shared arrays from this file's own text, so here is the one they all use:
// QSA_DYNAMIC_SHARED(smem_raw).
#include "common/portable.h"
#include "common/tile_reduce.h"

#define QSA_HEAD_DIM 128

QSA_DEVICE float qsa_relu(float x) { return fmaxf(x, 0.f); }

// ---------------------------------------------------------------------------------------
// Warp kernel. A "group" is 32 consecutive lanes of a wave: one group per wave on NVIDIA and
// gfx1201, two per wave on wave64 targets (gfx906, gfx950); the xor offsets 16..1 never cross
// a group, so the result is the same on every wave width. Block: 256 threads (any multiple of
// 32 works); grid.x = ceil(nq * blocks / (blockDim.x / 32)). No shared memory.
// ---------------------------------------------------------------------------------------
// qsa:block 256
QSA_KERNEL void block_scores_warp(const float* __restrict__ q, const float* __restrict__ kb,
                                  const float* __restrict__ w, float* __restrict__ s, int nq,
                                  int heads, int blocks) {
  static_assert(QSA_WAVE % 32 == 0, "a wave holds whole 32-lane groups");
  const long long group = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int l = threadIdx.x % 32;
  if (group >= (long long)nq * blocks) return;  // uniform over the group
  const int qi = (int)(group / blocks);
  const int b = (int)(group % blocks);
  const float4 k4 = reinterpret_cast<const float4*>(kb + (size_t)b * QSA_HEAD_DIM)[l];
  const float* qrow = q + (size_t)qi * heads * QSA_HEAD_DIM;
  float acc = 0.f;
  for (int h = 0; h < heads; ++h) {
    const float4 q4 = reinterpret_cast<const float4*>(qrow + (size_t)h * QSA_HEAD_DIM)[l];
    float p = q4.x * k4.x;
    p = fmaf(q4.y, k4.y, p);
    p = fmaf(q4.z, k4.z, p);
    p = fmaf(q4.w, k4.w, p);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) p += qsa_shfl_xor(p, o);
    acc = fmaf(w[(size_t)qi * heads + h], qsa_relu(p), acc);
  }
  if (l == 0) s[(size_t)qi * blocks + b] = acc;
}

// ---------------------------------------------------------------------------------------
// FP32 tiled SIMT kernels: an SGEMM whose epilogue folds each query's heads in ascending
// order, bit-identical to the CPU backend's simt order. Body, tile, staging and launch:
// common/scores_simt.h. Two kernels differ only in the d-chunk DC (8 or 16).
// ---------------------------------------------------------------------------------------
#include "common/scores_simt.h"

// qsa:block 256
QSA_KERNEL void SIMT_BOUNDS
    block_scores_simt(const float* __restrict__ q, const float* __restrict__ kb,
                      const float* __restrict__ w, float* __restrict__ s, int nq, int heads,
                      int blocks) {
  __shared__ __align__(16) float Qs[2 * 8 * SIMT_LD];
  __shared__ __align__(16) float Ks[2 * 8 * SIMT_LD];
  simt_body<8>(q, kb, w, s, nq, heads, blocks, Qs, Ks);
}
// Built for sm_90+ only (src/dispatch/scores.rs, `simt_d16_built`): at 128 registers it
// spills on sm_86 (164 B per thread, nvcc 13.0) and needs 256+ VGPRs with spills on gfx950 /
// gfx1201, 2026-12-01.
#if defined(QSA_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// qsa:block 256
QSA_KERNEL void __launch_bounds__(256, 2)
    block_scores_simt_d16(const float* __restrict__ q, const float* __restrict__ kb,
                          const float* __restrict__ w, float* __restrict__ s, int nq, int heads,
                          int blocks) {
  __shared__ __align__(16) float Qs[2 * 16 * SIMT_LD];
  __shared__ __align__(16) float Ks[2 * 16 * SIMT_LD];
  simt_body<16>(q, kb, w, s, nq, heads, blocks, Qs, Ks);
}
#endif  // QSA_CUDA && __CUDA_ARCH__ >= 900

// ---------------------------------------------------------------------------------------
// Tensor-core kernels (NVIDIA sm_80+). Absent from every other target's code object; the
// host never launches them there (dispatch requires Feature::Tf32Tc / Bf16Tc). Body, tile,
// pipeline, epilogue and launch: common/scores_tc.h.
// ---------------------------------------------------------------------------------------
#if defined(QSA_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#include "common/scores_tc.h"

// Wide tile: 128 rows (2 queries of 64 heads) x 128 blocks, 8 warps, 73,728 B shared.
// qsa:block 256
// qsa:dynamic_shared 73728
QSA_KERNEL void __launch_bounds__(256, 2)
    block_scores_tf32(const float* __restrict__ q, const float* __restrict__ kb,
                      const float* __restrict__ w, float* __restrict__ s, int nq, int heads,
                      int blocks) {
  tc_body<2, 4, 2, false>(q, kb, w, s, nq, heads, blocks);
}
// qsa:block 256
// qsa:dynamic_shared 73728
QSA_KERNEL void __launch_bounds__(256, 2)
    block_scores_bf16(const float* __restrict__ q, const float* __restrict__ kb,
                      const float* __restrict__ w, float* __restrict__ s, int nq, int heads,
                      int blocks) {
  tc_body<2, 4, 2, true>(q, kb, w, s, nq, heads, blocks);
}
// Decode scorers: Q resident, Kb streamed once through a cp.async ring by persistent CTAs
// (common/scores_decode.h). Launch shape declared for the occupancy report: 4 warps, 3
// stages (89,088 B: what sm_86's 99 KiB holds); sm_90 runs 8 warps x 4 stages (181,248 B,
// one CTA per SM) unless the plan's switches say otherwise (src/dispatch/scores/decode.rs).
#include "common/scores_decode.h"
// qsa:block 128
// qsa:dynamic_shared 89088
QSA_KERNEL void __launch_bounds__(256, 1)
    block_scores_tf32_decode(const float* __restrict__ q, const float* __restrict__ kb,
                             const float* __restrict__ w, float* __restrict__ s, int nq,
                             int heads, int blocks, int stages) {
  dec_body<false>(q, kb, w, s, nq, heads, blocks, stages);
}
// qsa:block 128
// qsa:dynamic_shared 89088
QSA_KERNEL void __launch_bounds__(256, 1)
    block_scores_bf16_decode(const float* __restrict__ q, const float* __restrict__ kb,
                             const float* __restrict__ w, float* __restrict__ s, int nq,
                             int heads, int blocks, int stages) {
  dec_body<true>(q, kb, w, s, nq, heads, blocks, stages);
}
// Measured on the H200 and not kept (2026-11-30, 256 x 64 x 4096): whole K resident
// (4 stages, 1 CTA/SM) 336 us; 4-warp 128 x 64 tiles 285 us (3 stages: 354 us); the old
// decode tile (tc_body<1, 8, 2>, 1 x 64 x 262,144) with 3 stages 101 us, with 4 warps 86 us,
// as kept 73-75.6 us (2026-12-02): replaced by the streaming kernel above.

#endif  // QSA_CUDA && __CUDA_ARCH__ >= 800

// ---------------------------------------------------------------------------------------
// Hopper warpgroup-MMA kernels (sm_90a: QSA_WGMMA): block_scores_tf32_wgmma and
// block_scores_bf16_wgmma. Their body, wg_body, and what it does: common/scores_wgmma.h.
// ---------------------------------------------------------------------------------------
#if defined(QSA_WGMMA)
#include "common/scores_wgmma.h"

// qsa:block 128
// qsa:dynamic_shared 100352
QSA_KERNEL void __launch_bounds__(128, 2)
    block_scores_tf32_wgmma(const float* __restrict__ q, const float* __restrict__ kb,
                            const float* __restrict__ w, float* __restrict__ s, int nq,
                            int heads, int blocks) {
  wg_body<128, false>(q, kb, w, s, nq, heads, blocks);
}
// qsa:block 128
// qsa:dynamic_shared 86016
QSA_KERNEL void __launch_bounds__(128, 2)
    block_scores_bf16_wgmma(const float* __restrict__ q, const float* __restrict__ kb,
                            const float* __restrict__ w, float* __restrict__ s, int nq,
                            int heads, int blocks) {
  wg_body<256, true>(q, kb, w, s, nq, heads, blocks);
}

// The decode scorers on wgmma (Kb tiles as A from registers, Q resident as B): their body,
// dwg_body, and why: common/scores_decode_wg.h. Launch shape declared for the occupancy
// report: one warpgroup, TF32's Q (32,768 B); the host picks CTAs per SM
// (src/dispatch/scores/decode.rs).
#include "common/scores_decode_wg.h"
// qsa:block 128
// qsa:dynamic_shared 32768
QSA_KERNEL void __launch_bounds__(128, 2)
    block_scores_tf32_decode_wg(const float* __restrict__ q, const float* __restrict__ kb,
                                const float* __restrict__ w, float* __restrict__ s, int nq,
                                int heads, int blocks) {
  dwg_body<false>(q, kb, w, s, nq, heads, blocks);
}
// qsa:block 128
// qsa:dynamic_shared 16384
QSA_KERNEL void __launch_bounds__(128, 2)
    block_scores_bf16_decode_wg(const float* __restrict__ q, const float* __restrict__ kb,
                                const float* __restrict__ w, float* __restrict__ s, int nq,
                                int heads, int blocks) {
  dwg_body<true>(q, kb, w, s, nq, heads, blocks);
}
// The same with A staged through a per-thread cp.async ring of `stages` (2 .. 6) tiles in
// shared memory instead of a second register tile (suffix c; QSA_SCORES_DECODE_WG_RING):
// more bytes in flight per SM and fewer registers. Launch shape declared for the occupancy
// report: TF32, 2 stages (Q 32,768 B + 2 x 32,768 B), 2 CTAs per SM.
// qsa:block 128
// qsa:dynamic_shared 98304
QSA_KERNEL void __launch_bounds__(128, 2)
    block_scores_tf32_decode_wgc(const float* __restrict__ q, const float* __restrict__ kb,
                                 const float* __restrict__ w, float* __restrict__ s, int nq,
                                 int heads, int blocks, int stages) {
  dwg_body<false, true>(q, kb, w, s, nq, heads, blocks, stages);
}
// qsa:block 128
// qsa:dynamic_shared 81920
QSA_KERNEL void __launch_bounds__(128, 2)
    block_scores_bf16_decode_wgc(const float* __restrict__ q, const float* __restrict__ kb,
                                 const float* __restrict__ w, float* __restrict__ s, int nq,
                                 int heads, int blocks, int stages) {
  dwg_body<true, true>(q, kb, w, s, nq, heads, blocks, stages);
}
// Two warpgroups per CTA sharing Q, each streaming its own tiles through its own ring
// (suffix c2): twice the tiles in flight per SM that one CTA of the same shared memory holds.
// Launch shape declared: TF32, 3 stages per warpgroup (32,768 + 6 x 32,768 B), 1 CTA per SM.
// qsa:block 256
// qsa:dynamic_shared 229376
QSA_KERNEL void __launch_bounds__(256, 1)
    block_scores_tf32_decode_wgc2(const float* __restrict__ q, const float* __restrict__ kb,
                                  const float* __restrict__ w, float* __restrict__ s, int nq,
                                  int heads, int blocks, int stages) {
  dwg_body<false, true, 2>(q, kb, w, s, nq, heads, blocks, stages);
}
// qsa:block 256
// qsa:dynamic_shared 212992
QSA_KERNEL void __launch_bounds__(256, 1)
    block_scores_bf16_decode_wgc2(const float* __restrict__ q, const float* __restrict__ kb,
                                  const float* __restrict__ w, float* __restrict__ s, int nq,
                                  int heads, int blocks, int stages) {
  dwg_body<true, true, 2>(q, kb, w, s, nq, heads, blocks, stages);
}
// The same fed by TMA bulk copies: a producer warp, a ring of `stages` (2 .. 6) tiles with
// mbarriers, 1 or 2 consumer warpgroups (suffix tma / tma2; QSA_SCORES_DECODE_WG_TMA,
// common/scores_decode_tma.h). Launch shape declared: TF32, 2 stages (Q + 2 x 32 KiB + 32 B
// of barriers), 2 CTAs per SM; tma2: 4 stages, 1 CTA per SM.
#include "common/scores_decode_tma.h"
// qsa:block 160
// qsa:dynamic_shared 98336
QSA_KERNEL void __launch_bounds__(160, 2)
    block_scores_tf32_decode_tma(const float* __restrict__ q, const float* __restrict__ kb,
                                 const float* __restrict__ w, float* __restrict__ s, int nq,
                                 int heads, int blocks, int stages) {
  dtma_body<false, 1>(q, kb, w, s, nq, heads, blocks, stages);
}
// qsa:block 160
// qsa:dynamic_shared 81952
QSA_KERNEL void __launch_bounds__(160, 2)
    block_scores_bf16_decode_tma(const float* __restrict__ q, const float* __restrict__ kb,
                                 const float* __restrict__ w, float* __restrict__ s, int nq,
                                 int heads, int blocks, int stages) {
  dtma_body<true, 1>(q, kb, w, s, nq, heads, blocks, stages);
}
// qsa:block 288
// qsa:dynamic_shared 163904
QSA_KERNEL void __launch_bounds__(288, 1)
    block_scores_tf32_decode_tma2(const float* __restrict__ q, const float* __restrict__ kb,
                                  const float* __restrict__ w, float* __restrict__ s, int nq,
                                  int heads, int blocks, int stages) {
  dtma_body<false, 2>(q, kb, w, s, nq, heads, blocks, stages);
}
// qsa:block 288
// qsa:dynamic_shared 147520
QSA_KERNEL void __launch_bounds__(288, 1)
    block_scores_bf16_decode_tma2(const float* __restrict__ q, const float* __restrict__ kb,
                                  const float* __restrict__ w, float* __restrict__ s, int nq,
                                  int heads, int blocks, int stages) {
  dtma_body<true, 2>(q, kb, w, s, nq, heads, blocks, stages);
}
// A in registers (wgmma RS), B resident, no barrier after B's staging: rs_body and why, in
// common/scores_wgrs.h. Name: _wgrs<BN>[p]: p loads the next item's A during the MMAs. The
// minimum CTAs per SM of each launch bound is what src/gpu/scores/wgrs.rs (RS_KERNELS) plans
// a wave with.
#include "common/scores_wgrs.h"
// qsa:block 128
// qsa:dynamic_shared 65536
QSA_KERNEL void __launch_bounds__(128, 3)
    block_scores_tf32_wgrs128(const float* __restrict__ q, const float* __restrict__ kb,
                            const float* __restrict__ w, float* __restrict__ s, int nq,
                            int heads, int blocks) {
  rs_body<128, false, 1, false, false>(q, kb, w, s, nq, heads, blocks);
}
// qsa:block 128
// qsa:dynamic_shared 65536
QSA_KERNEL void __launch_bounds__(128, 2)
    block_scores_tf32_wgrs128p(const float* __restrict__ q, const float* __restrict__ kb,
                            const float* __restrict__ w, float* __restrict__ s, int nq,
                            int heads, int blocks) {
  rs_body<128, false, 1, true, false>(q, kb, w, s, nq, heads, blocks);
}
// qsa:block 256
// qsa:dynamic_shared 131072
QSA_KERNEL void __launch_bounds__(256, 1)
    block_scores_tf32_wgrs256(const float* __restrict__ q, const float* __restrict__ kb,
                            const float* __restrict__ w, float* __restrict__ s, int nq,
                            int heads, int blocks) {
  rs_body<256, false, 2, false, false>(q, kb, w, s, nq, heads, blocks);
}
// qsa:block 128
// qsa:dynamic_shared 32768
QSA_KERNEL void __launch_bounds__(128, 4)
    block_scores_bf16_wgrs128(const float* __restrict__ q, const float* __restrict__ kb,
                            const float* __restrict__ w, float* __restrict__ s, int nq,
                            int heads, int blocks) {
  rs_body<128, true, 1, false, false>(q, kb, w, s, nq, heads, blocks);
}
// qsa:block 256
// qsa:dynamic_shared 65536
QSA_KERNEL void __launch_bounds__(256, 1)
    block_scores_bf16_wgrs256(const float* __restrict__ q, const float* __restrict__ kb,
                            const float* __restrict__ w, float* __restrict__ s, int nq,
                            int heads, int blocks) {
  rs_body<256, true, 2, false, false>(q, kb, w, s, nq, heads, blocks);
}
// qsa:block 256
// qsa:dynamic_shared 65536
QSA_KERNEL void __launch_bounds__(256, 1)
    block_scores_bf16_wgrs256p(const float* __restrict__ q, const float* __restrict__ kb,
                            const float* __restrict__ w, float* __restrict__ s, int nq,
                            int heads, int blocks) {
  rs_body<256, true, 2, true, false>(q, kb, w, s, nq, heads, blocks);
}

// The same with B in the 128-byte-swizzle layout (suffix s; 1 KiB more for its alignment).
// qsa:block 128
// qsa:dynamic_shared 66560
QSA_KERNEL void __launch_bounds__(128, 3)
    block_scores_tf32_wgrs128s(const float* __restrict__ q, const float* __restrict__ kb,
                            const float* __restrict__ w, float* __restrict__ s, int nq,
                            int heads, int blocks) {
  rs_body<128, false, 1, false, true>(q, kb, w, s, nq, heads, blocks);
}
// qsa:block 256
// qsa:dynamic_shared 132096
QSA_KERNEL void __launch_bounds__(256, 1)
    block_scores_tf32_wgrs256s(const float* __restrict__ q, const float* __restrict__ kb,
                            const float* __restrict__ w, float* __restrict__ s, int nq,
                            int heads, int blocks) {
  rs_body<256, false, 2, false, true>(q, kb, w, s, nq, heads, blocks);
}
// qsa:block 128
// qsa:dynamic_shared 33792
QSA_KERNEL void __launch_bounds__(128, 4)
    block_scores_bf16_wgrs128s(const float* __restrict__ q, const float* __restrict__ kb,
                            const float* __restrict__ w, float* __restrict__ s, int nq,
                            int heads, int blocks) {
  rs_body<128, true, 1, false, true>(q, kb, w, s, nq, heads, blocks);
}
// qsa:block 256
// qsa:dynamic_shared 66560
QSA_KERNEL void __launch_bounds__(256, 1)
    block_scores_bf16_wgrs256ps(const float* __restrict__ q, const float* __restrict__ kb,
                            const float* __restrict__ w, float* __restrict__ s, int nq,
                            int heads, int blocks) {
  rs_body<256, true, 2, true, true>(q, kb, w, s, nq, heads, blocks);
}

// Ping-pong (suffix o): the two warpgroups take turns issuing their MMAs (named barriers).
// qsa:block 256
// qsa:dynamic_shared 131072
QSA_KERNEL void __launch_bounds__(256, 1)
    block_scores_tf32_wgrs256o(const float* __restrict__ q, const float* __restrict__ kb,
                            const float* __restrict__ w, float* __restrict__ s, int nq,
                            int heads, int blocks) {
  rs_body<256, false, 2, false, false, true>(q, kb, w, s, nq, heads, blocks);
}
// qsa:block 256
// qsa:dynamic_shared 65536
QSA_KERNEL void __launch_bounds__(256, 1)
    block_scores_bf16_wgrs256o(const float* __restrict__ q, const float* __restrict__ kb,
                            const float* __restrict__ w, float* __restrict__ s, int nq,
                            int heads, int blocks) {
  rs_body<256, true, 2, false, false, true>(q, kb, w, s, nq, heads, blocks);
}

#endif  // QSA_WGMMA

// ---------------------------------------------------------------------------------------
// AMD matrix-core kernels (gfx1200 / gfx1201 WMMA, gfx950 MFMA; BF16 in, f32 accumulation).
// Their body, amc_body, what each lane holds and why: common/scores_amd_mc.h.
// ---------------------------------------------------------------------------------------
#if defined(QSA_HIP) && (defined(__gfx1200__) || defined(__gfx1201__) || defined(__gfx950__))
#include "common/scores_amd_mc.h"

#if defined(__gfx950__)
// qsa:block 256
QSA_KERNEL void __launch_bounds__(256)
    block_scores_mfma_bf16(const float* __restrict__ q, const float* __restrict__ kb,
                           const float* __restrict__ w, float* __restrict__ s, int nq,
                           int heads, int blocks) {
  amc_body<AMC_NT, AMC_QPC>(q, kb, w, s, nq, heads, blocks);
}
#else
// qsa:block 256
QSA_KERNEL void __launch_bounds__(256)
    block_scores_wmma_bf16(const float* __restrict__ q, const float* __restrict__ kb,
                           const float* __restrict__ w, float* __restrict__ s, int nq,
                           int heads, int blocks) {
  amc_body<AMC_NT, AMC_QPC>(q, kb, w, s, nq, heads, blocks);
}
#endif

#endif  // QSA_HIP && (gfx1200 || gfx1201 || gfx950)
