// The decode scorers of kernels/block_scores.cu (block_scores_tf32_decode,
// block_scores_bf16_decode): one streaming pass over Kb at HBM rate for calls whose rows
// (queries x heads padded to m-tiles of 16) fit one CTA's 64. Included by block_scores.cu
// inside its NVIDIA sm_80+ section, after common/scores_tc.h (it uses TC_LD, tc_mma_half,
// tc_mtile_sum and the mma.h names); it lives
// in common/ so that the emulator's module cache (keyed by every common header) sees it.
//
// Why a kernel of its own: Q is 64 rows x 128 d (32 KB) and Kb is 134 MB at 262,144 blocks,
// so the call is a stream of Kb through the tensor cores. The CTA keeps Q in shared memory
// for the whole call (read and rounded once) and walks its block tiles (persistent:
// grid.x = multiprocessors x CTAs per SM, tile = blockIdx.x + i * gridDim.x) through one
// cp.async ring of `stages` buffers that runs across tile boundaries, so the copies of the
// next tile are in flight during this tile's MMAs and epilogue; every Kb byte is read once.
//
// Shape: 32 x W threads (W warps, blockDim.x / 32, 4 or 8); a tile is BN = 32 W blocks; warp
// w owns all 64 rows x blocks 32w .. 32w+31 of the tile (4 x 4 mma tiles, as tc_body's warp).
// A ring buffer holds one 32-wide k chunk of the tile: BN rows of TC_LD floats (a chunk c of
// the CTA's sequence is tile c / 4, k chunk c % 4). Within the chunk k is permuted as in
// tc_body (thread t of a quad takes k = 8t .. 8t+7): A and B alike, so every dot sums all 128
// products once.
//
// Rows: CTA row r is m-tile r / 16; with mtq = ceil(heads / 16) <= 4 m-tiles per query, the
// CTA holds QPC = 4 / mtq queries (query blockIdx.y * QPC + r / 16 / mtq, head
// (r / 16 % mtq) * 16 + r % 16); rows past `heads`, past QPC queries or past nq are zeros
// with weight 0. The host never launches it with heads > 64.
//
// Rounding: TF32 as cvt.rna (Q in place once it has landed; Kb in registers as fragments are
// loaded: each block's elements are read by one warp, once), BF16 as cvt.rn when fragments
// are packed; f32 accumulation.
// Epilogue per tile, in registers: v = w * relu(acc) per row, the 16 rows of each m-tile
// summed by the shuffle transpose of tc_body (3 steps), then a query's m-tiles added in
// ascending order by the lane that holds the block; one store per (query, block).
// Deterministic run to run; not the summation order of the warp / SIMT kernels.
//
// Launch (src/gpu/scores/decode.rs, `plan_decode`): block = (32 W, 1, 1), grid = (min(tiles,
// multiprocessors x CTAs per SM), ceil(nq / QPC)); dynamic shared = DEC_Q_BYTES + stages x
// BN x TC_LD x 4 bytes; the last argument is `stages` (2 .. DEC_MAX_STAGES). (An L2::256B
// prefetch hint on the Kb copies was measured on the H200 and did nothing: 74.7 against
// 73.5 us, 2026-12-02; removed.) On sm_90a the wgmma decode kernels
// (common/scores_decode_wg.h) serve the same calls.
#pragma once

#define DEC_MT 4             // m-tiles (of 16 rows) per CTA
#define DEC_BM (16 * DEC_MT)  // rows per CTA: 64
#define DEC_QLD 132          // Q row stride in shared memory, floats (LDS.128 conflict-free)
#define DEC_KCH (QSA_HEAD_DIM / TC_BK)  // k chunks per tile: 4
#define DEC_MAX_STAGES 6

// cp.async.wait_group takes an immediate: the ring depth is a launch argument, so branch to
// it (uniform over the CTA). Waiting for fewer groups than allowed is always safe.
QSA_DEVICE void dec_wait_pending(int pending) {
  switch (pending) {
    case 5: qsa_cp_async_wait_group<5>(); break;
    case 4: qsa_cp_async_wait_group<4>(); break;
    case 3: qsa_cp_async_wait_group<3>(); break;
    case 2: qsa_cp_async_wait_group<2>(); break;
    case 1: qsa_cp_async_wait_group<1>(); break;
    default: qsa_cp_async_wait_group<0>(); break;
  }
}

template <bool BF16>
__device__ __forceinline__ void dec_body(const float* __restrict__ q, const float* __restrict__ kb,
                                         const float* __restrict__ w, float* __restrict__ s,
                                         int nq, int heads, int blocks, int stages) {
  QSA_DYNAMIC_SHARED(smem_raw);
  float* Qs = reinterpret_cast<float*>(smem_raw);  // [DEC_BM][DEC_QLD]
  float* ring = Qs + DEC_BM * DEC_QLD;             // stages x [BN][TC_LD]
  const int threads = blockDim.x;
  const int bn = threads;  // 32 blocks per warp
  const int stage_floats = bn * TC_LD;
  const int tid = threadIdx.x;
  const int lane = tid % 32;
  const int warp = tid / 32;
  const int g = lane >> 2;
  const int t = lane & 3;

  const int mtq = (heads + 15) / 16;
  const int qpc = DEC_MT / mtq;
  const int qbase = blockIdx.y * qpc;
  auto row_src = [&](int r, int& qq, int& hh) -> bool {
    const int mi = r / 16;
    const int slot = mi / mtq;
    qq = qbase + slot;
    hh = (mi % mtq) * 16 + r % 16;
    return slot < qpc && qq < nq && hh < heads;
  };

  // Q once, by cp.async in the oldest group, so its latency overlaps the ring's first
  // chunks (zero rows are zero-filled); rounded in place once it has landed.
  constexpr int Q4 = DEC_BM * (QSA_HEAD_DIM / 4);  // float4 pieces of Q
  for (int i = tid; i < Q4; i += threads) {
    const int r = i / (QSA_HEAD_DIM / 4), c4 = i % (QSA_HEAD_DIM / 4);
    int qq, hh;
    const bool ok = row_src(r, qq, hh);
    const float* src = ok ? q + ((size_t)qq * heads + hh) * QSA_HEAD_DIM + 4 * c4 : q;
    qsa_cp_async16(Qs + r * DEC_QLD + 4 * c4, src, ok ? 16 : 0);
  }
  qsa_cp_async_commit();
  // The weights of this lane's accumulator rows (16 i + g and 16 i + g + 8), fixed per CTA.
  float w_lo[DEC_MT], w_hi[DEC_MT];
#pragma unroll
  for (int i = 0; i < DEC_MT; ++i) {
    int qq, hh;
    w_lo[i] = row_src(16 * i + g, qq, hh) ? w[(size_t)qq * heads + hh] : 0.f;
    w_hi[i] = row_src(16 * i + g + 8, qq, hh) ? w[(size_t)qq * heads + hh] : 0.f;
  }

  const int tiles = (blocks + bn - 1) / bn;
  const int my_tiles =
      (int)blockIdx.x < tiles ? (tiles - 1 - (int)blockIdx.x) / (int)gridDim.x + 1 : 0;
  const int nchunks = my_tiles * DEC_KCH;
  auto tile_b0 = [&](int c) { return ((int)blockIdx.x + (c / DEC_KCH) * (int)gridDim.x) * bn; };
  // Chunk c into ring buffer c % stages: BN rows x 8 float4, 8 copies per thread; blocks
  // past the end are zero-filled (never stored).
  constexpr int CPT = TC_BK / 4;  // copies per thread per chunk (BN * 8 / threads)
  auto load_chunk = [&](int c) {
    float* Bs = ring + (c % stages) * stage_floats;
    const int b0 = tile_b0(c);
    const int kc = c % DEC_KCH;
#pragma unroll
    for (int k = 0; k < CPT; ++k) {
      const int i = tid + k * threads;
      const int r = i / CPT, c4 = i % CPT;
      const bool ok = b0 + r < blocks;
      const float* src = ok ? kb + (size_t)(b0 + r) * QSA_HEAD_DIM + kc * TC_BK + c4 * 4 : kb;
      qsa_cp_async16(Bs + r * TC_LD + c4 * 4, src, ok ? 16 : 0);
    }
  };

#pragma unroll 1
  for (int c = 0; c < stages - 1; ++c) {
    if (c < nchunks) load_chunk(c);
    qsa_cp_async_commit();
  }
  if constexpr (!BF16) {
    dec_wait_pending(stages - 1);  // the Q group has landed (this thread's copies)
    for (int i = tid; i < Q4; i += threads) {
      float* p4 = Qs + (i / (QSA_HEAD_DIM / 4)) * DEC_QLD + 4 * (i % (QSA_HEAD_DIM / 4));
      float4 v = *reinterpret_cast<float4*>(p4);
      v.x = __uint_as_float(qsa_cvt_tf32(v.x));
      v.y = __uint_as_float(qsa_cvt_tf32(v.y));
      v.z = __uint_as_float(qsa_cvt_tf32(v.z));
      v.w = __uint_as_float(qsa_cvt_tf32(v.w));
      *reinterpret_cast<float4*>(p4) = v;
    }
  }

  float acc[4][4][4];
#pragma unroll 1
  for (int c = 0; c < nchunks; ++c) {
    dec_wait_pending(stages - 2);  // chunk c has landed (this thread's copies)
    const float* Bs = ring + (c % stages) * stage_floats;
    // Chunk c is complete for every thread, and every warp is done with chunk c - 1, whose
    // buffer the copy below refills (Q, landed and rounded before chunk 0, is visible too:
    // its group is older than chunk 0's).
    __syncthreads();
    if (c + stages - 1 < nchunks) load_chunk(c + stages - 1);
    qsa_cp_async_commit();

    const int kc = c % DEC_KCH;
    if (kc == 0) {
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;
    }
    const float* As = Qs + kc * TC_BK;
    // Both halves unrolled: the second half's fragment loads are issued during the first
    // half's MMAs (8 warps per SM leave little else to hide the shared-memory latency).
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      // This warp alone reads these blocks (each B element is loaded once per CTA), so TF32
      // rounds them here, in registers: no pass over the ring before the barrier.
      float4 bf[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        bf[j] = *reinterpret_cast<const float4*>(Bs + (warp * 32 + j * 8 + g) * TC_LD + 8 * t +
                                                 4 * half);
        if constexpr (!BF16) {
          bf[j].x = __uint_as_float(qsa_cvt_tf32(bf[j].x));
          bf[j].y = __uint_as_float(qsa_cvt_tf32(bf[j].y));
          bf[j].z = __uint_as_float(qsa_cvt_tf32(bf[j].z));
          bf[j].w = __uint_as_float(qsa_cvt_tf32(bf[j].w));
        }
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int r = i * 16 + g;
        const float4 al = *reinterpret_cast<const float4*>(As + r * DEC_QLD + 8 * t + 4 * half);
        const float4 ah =
            *reinterpret_cast<const float4*>(As + (r + 8) * DEC_QLD + 8 * t + 4 * half);
        tc_mma_half<BF16>(acc[i], al, ah, bf);  // common/scores_tc.h
      }
    }
    if (kc != DEC_KCH - 1) continue;

    // Epilogue of the tile, in registers: part[i] = the 16 rows of m-tile i summed for this
    // lane's block column; a query's m-tiles then added in ascending order.
    // tc_body's m-tile epilogue (common/scores_tc.h).
    float part[DEC_MT];
#pragma unroll
    for (int i = 0; i < DEC_MT; ++i) part[i] = tc_mtile_sum(acc, i, w_lo[i], w_hi[i], g);
    const int b = tile_b0(c) + warp * 32 + 8 * (g >> 1) + 2 * t + (g & 1);
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < DEC_MT; ++i) {
      sum = i % mtq == 0 ? part[i] : sum + part[i];
      const int qq = qbase + i / mtq;
      if (i % mtq == mtq - 1 && qq < nq && b < blocks) s[(size_t)qq * blocks + b] = sum;
    }
  }
  qsa_cp_async_wait_group<0>();  // only empty groups can remain; leave none in flight
}
