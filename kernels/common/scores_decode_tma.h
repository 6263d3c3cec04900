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
  const int mtq = (heads + 15) / 16;
  const int qpc = DWG_MT / mtq;
  const int qbase = blockIdx.y * qpc;
  auto row_src = [&](int n, int& qq, int& hh) -> bool {
    const int mi = n / 16, slot = mi / mtq;
    qq = qbase + slot;
    hh = (mi % mtq) * 16 + n % 16;
    return slot < qpc && qq < nq && hh < heads;
  };
  // Q once, by the first warpgroup, exactly as dwg_body stages it.
  if (tid < DWG_THREADS) {
    constexpr int PER = DWG_N * (QSA_HEAD_DIM / 4) / DWG_THREADS;  // 16
    float4 v[PER];
#pragma unroll
    for (int i = 0; i < PER; ++i) {
      const int m = tid + DWG_THREADS * i, n = m / 32, c4 = m % 32;
      int qq, hh;
      v[i] = row_src(n, qq, hh)
                 ? reinterpret_cast<const float4*>(q + ((size_t)qq * heads + hh) * QSA_HEAD_DIM)[c4]
                 : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    unsigned koff[4];
#pragma unroll
    for (int x = 0; x < 4; ++x) koff[x] = dwg_canon<ES>(0, dwg_logical_k<BF16>(4 * (tid % 32) + x));
#pragma unroll
    for (int i = 0; i < PER; ++i) {
      unsigned char* row = Qs + dwg_canon<ES>(tid / 32 + 4 * i, 0);
      const float e[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
#pragma unroll
      for (int x = 0; x < 4; ++x) {
        if constexpr (BF16) {
          *reinterpret_cast<unsigned short*>(row + koff[x]) = (unsigned short)(qsa_pack_bf16x2(e[x], 0.f) & 0xffffu);
        } else {
          *reinterpret_cast<unsigned*>(row + koff[x]) = qsa_cvt_tf32(e[x]);
        }
      }
    }
  }
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
#pragma unroll
  for (int j = 0; j < 8; ++j)
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      int qq, hh;
      wc[j][c] = row_src(8 * j + 2 * t + c, qq, hh) ? w[(size_t)qq * heads + hh] : 0.f;
    }
  const unsigned q_addr = qsa_smem_addr(Qs);
  const int row0 = 16 * warp + g;
  constexpr unsigned SBO = 8u * 128u * ES, LBO = 128u;
  constexpr int KS = BF16 ? 8 : 16;
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
    unsigned a[KS][4];
#pragma unroll
    for (int p = 0; p < 8; ++p) {
      if constexpr (BF16) {
        a[p][0] = qsa_pack_bf16x2(v[0][p].x, v[0][p].y);
        a[p][1] = qsa_pack_bf16x2(v[1][p].x, v[1][p].y);
        a[p][2] = qsa_pack_bf16x2(v[0][p].z, v[0][p].w);
        a[p][3] = qsa_pack_bf16x2(v[1][p].z, v[1][p].w);
      } else {
        a[2 * p][0] = qsa_cvt_tf32(v[0][p].x);
        a[2 * p][1] = qsa_cvt_tf32(v[1][p].x);
        a[2 * p][2] = qsa_cvt_tf32(v[0][p].y);
        a[2 * p][3] = qsa_cvt_tf32(v[1][p].y);
        a[2 * p + 1][0] = qsa_cvt_tf32(v[0][p].z);
        a[2 * p + 1][1] = qsa_cvt_tf32(v[1][p].z);
        a[2 * p + 1][2] = qsa_cvt_tf32(v[0][p].w);
        a[2 * p + 1][3] = qsa_cvt_tf32(v[1][p].w);
      }
    }
    qsa_wgmma_fence_regs(acc);
    qsa_wgmma_fence_aregs(a);
    qsa_wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < KS; ++ks) {
      const unsigned long long db = qsa_wgmma_desc(q_addr + 256u * ks, LBO, SBO);
      if constexpr (BF16) qsa_wgmma_m64n64k16_bf16_rs(acc, a[ks], db, ks > 0);
      else qsa_wgmma_m64n64k8_tf32_rs(acc, a[ks], db, ks > 0);
    }
    qsa_wgmma_commit();
    qsa_wgmma_wait<0>();
    qsa_wgmma_fence_regs(acc);
    qsa_wgmma_fence_aregs(a);
    // Epilogue: dwg_body's, per row the query's columns summed, the quad's parts added.
    const int b0 = ((int)blockIdx.x + i * (int)gridDim.x) * DWG_M + row0;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int b = b0 + 8 * h;
      float sum = 0.f;
#pragma unroll
      for (int mi = 0; mi < DWG_MT; ++mi) {
        if (mi % mtq == 0) sum = 0.f;
#pragma unroll
        for (int j = 2 * mi; j < 2 * mi + 2; ++j)
#pragma unroll
          for (int c = 0; c < 2; ++c) sum = fmaf(wc[j][c], qsa_relu(acc[4 * j + 2 * h + c]), sum);
        if (mi % mtq == mtq - 1) {
          float tot = sum + qsa_shfl_xor(sum, 1);
          tot += qsa_shfl_xor(tot, 2);
          const int qq = qbase + mi / mtq;
          if (t == 0 && qq < nq && b < blocks) s[(size_t)qq * blocks + b] = tot;
        }
      }
    }
  }
}
