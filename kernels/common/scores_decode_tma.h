// The TMA-fed Hopper decode scorers of kernels/block_scores.cu (block_scores_{tf32,bf16}_
// decode_tma, _decode_tma2; QSA_SCORES_DECODE_WG_TMA): the computation of dwg_body
// (scores_decode_wg.h: D = Kb_tile (64 x 128) * Q^T on wgmma m64n64, A from registers, Q
// resident as B, the same k permutation, rounding and epilogue), with Kb streamed the Hopper
// way instead of by the consumers' own loads:
//   - one producer warp (the CTA's last; one lane works) copies whole tiles with 1-D bulk
//     copies (cp.async.bulk, the TMA's unit-stride form): a tile of 64 blocks is 64 x 512 B =
//     32 KiB contiguous in Kb, so one instruction per tile (the last tile: its rows only);
//   - into a ring of `stages` slots of 32 KiB, each with a "full" mbarrier (count 1: the
//     producer's arrive.expect_tx of the tile's bytes; the copy's complete_tx ends the phase)
//     and an "empty" one (count 128: every thread of the consuming warpgroup arrives once its
//     loads from the slot are done; the producer waits on it before reusing the slot);
//   - WGS consumer warpgroups (1 or 2, sharing Q) take the CTA's tiles in turn (tile i: warp
//     group i % WGS, slot i % stages): wait full, LDS.128 their A fragments (the same float4
//     per thread as dwg_body's global loads; rows g and g + 8 are 512 B apart, so a
//     quarter-warp's two rows share banks: 2-way, ~20% of the SM's shared bandwidth at 74%
//     of HBM, a guess), arrive empty, convert, MMA, epilogue.
// Why: the consumers issue no global loads and no address arithmetic for Kb (the register
// kernel spends 26% of issue slots, Nsight call P), up to `stages` tiles are in flight per
// CTA regardless of the consumers' progress, and 2 consumer warpgroups overlap one's
// epilogue with the other's MMAs.
// Phases: tile i of this CTA uses phase i / stages of its slot's barriers: consumers wait on
// full with parity (i / stages) & 1, the producer on empty with the opposite parity (which a
// fresh barrier already satisfies: the first `stages` tiles need no wait).
// Shared memory (dynamic): Q (64 x 128 x E bytes, the canonical layout of dwg_body), then the
// ring (stages x 32,768 B), then full[stages] and empty[stages] (8 B each).
// What the emulator checks (emu_mbarrier.h): phases, counts, deadlocks, and when copies land
// (eager or lazy by schedule: a missing wait or an early slot reuse gives a wrong or
// schedule-dependent answer). What it cannot: the proxies (a generic read of a slot racing
// the async proxy's next write is ordered here by the empty barrier's release / acquire, as
// CUTLASS's TMA pipelines rely on) and the card's timing; compute-sanitizer on the card does.
#pragma once
#include "mbarrier.h"

#define DTMA_TILE_BYTES (DWG_M * QSA_HEAD_DIM * 4)  // 32,768

template <bool BF16, int WGS>
__device__ __forceinline__ void dtma_body(const float* __restrict__ q, const float* __restrict__ kb,
                                          const float* __restrict__ w, float* __restrict__ s, int nq,
                                          int heads, int blocks, int stages) {
  constexpr int ES = BF16 ? 2 : 4;
  QSA_DYNAMIC_SHARED(smem_raw);
  unsigned char* Qs = smem_raw;
  unsigned char* ring = smem_raw + DWG_N * QSA_HEAD_DIM * ES;
  unsigned long long* full = reinterpret_cast<unsigned long long*>(ring + (size_t)stages * DTMA_TILE_BYTES);
  unsigned long long* empty = full + stages;
  const int tid = threadIdx.x, lane = tid % 32;
  const int wg = tid / DWG_THREADS, warp = (tid % DWG_THREADS) / 32;
  const int g = lane >> 2, t = lane & 3;
  const bool producer = wg == WGS;  // the warp after the consumers' warpgroups
  const int tiles = (blocks + DWG_M - 1) / DWG_M;
  const int my_tiles = (int)blockIdx.x < tiles ? (tiles - 1 - (int)blockIdx.x) / (int)gridDim.x + 1 : 0;
  // Tile i of this CTA into slot i % stages, once the slot's previous tile was consumed.
  auto produce = [&](int i) {
    const int slot = i % stages, tile = (int)blockIdx.x + i * (int)gridDim.x;
    qsa_mbar_wait(&empty[slot], ((i / stages) & 1) ^ 1);
    const int rows = blocks - tile * DWG_M < DWG_M ? blocks - tile * DWG_M : DWG_M;
    const unsigned bytes = (unsigned)rows * QSA_HEAD_DIM * 4;
    qsa_mbar_arrive_expect_tx(&full[slot], bytes);
    qsa_bulk_g2s(ring + (size_t)slot * DTMA_TILE_BYTES, kb + (size_t)tile * DWG_M * QSA_HEAD_DIM, bytes,
                 &full[slot]);
  };
  // Barriers first, then the first tiles' copies, so that their latency overlaps Q's staging.
  if (producer && lane == 0) {
    for (int k = 0; k < stages; ++k) {
      qsa_mbar_init(&full[k], 1);
      qsa_mbar_init(&empty[k], DWG_THREADS);
    }
    qsa_fence_mbar_init();
#pragma unroll 1
    for (int i = 0; i < stages && i < my_tiles; ++i) produce(i);
  }
  const DwgRows R = dwg_rows(nq, heads);
  if (tid < DWG_THREADS) dwg_stage_q<BF16>(q, Qs, R, tid);  // Q once, by the first warpgroup
  qsa_fence_proxy_async();  // Q's st.shared seen by wgmma
  __syncthreads();          // Q staged, and the barriers' init seen by every thread
  if (producer) {
    if (lane == 0) {
#pragma unroll 1
      for (int i = stages; i < my_tiles; ++i) produce(i);
    }
    return;
  }
  float wc[8][2];
  dwg_weights(w, R, t, wc);
  const unsigned q_addr = qsa_smem_addr(Qs);
  const int row0 = 16 * warp + g;
  float acc[DWG_N / 2];
#pragma unroll 1
  for (int i = wg; i < my_tiles; i += WGS) {
    const int slot = i % stages;
    qsa_mbar_wait(&full[slot], (i / stages) & 1);
    // This thread's rows row0, row0 + 8 of the tile: float4 p is physical k 16 p + 4 t .. + 3.
    const float4* src = reinterpret_cast<const float4*>(ring + (size_t)slot * DTMA_TILE_BYTES) + t;
    float4 v[2][8];
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int p = 0; p < 8; ++p) v[h][p] = src[(row0 + 8 * h) * (QSA_HEAD_DIM / 4) + 4 * p];
    qsa_mbar_arrive(&empty[slot]);  // release: the loads above are done with the slot
    dwg_mma<BF16>(v, q_addr, acc);
    dwg_epilogue(acc, wc, R, ((int)blockIdx.x + i * (int)gridDim.x) * DWG_M + row0, blocks, t, s);
  }
}
