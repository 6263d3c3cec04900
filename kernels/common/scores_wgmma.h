// The Hopper wgmma scorers' body (wg_body) of kernels/block_scores.cu (block_scores_tf32_wgmma,
// block_scores_bf16_wgmma; the entry points and their launch annotations stay there). Included
// by block_scores.cu inside `#if defined(QSA_WGMMA)` (sm_90a only): it uses TC_LD, qsa_relu,
// qsa_tile_rows16_sum and the mma.h wgmma wrappers. It lives in common/ so that the emulator's
// module cache (keyed by every common header) sees it.
//
// Hopper warpgroup-MMA kernels (sm_90a: QSA_WGMMA, kernels/common/mma.h). Absent from every
// other code object; the host takes them only with Feature::Wgmma (src/dispatch/scores.rs),
// and since 2026-12-02 only with QSA_SCORES_WG=ss: the A-in-registers kernels of
// common/scores_wgrs.h are sm_90's defaults (2.3x / 1.7x faster on the H200: bound here by
// L1 / shared throughput, 84.75% in ncu, with A restaged through shared memory per unit).
//   block_scores_tf32_wgmma  wgmma m64n128k8 .tf32, 64 rows x 128 blocks per MMA tile
//   block_scores_bf16_wgmma  wgmma m64n256k16 .bf16, 64 rows x 256 blocks per MMA tile
// One warpgroup (128 threads) per CTA. The CTA's B tile (BN blocks x K = 128) is staged
// once into shared memory; the CTA then walks upc = ceil(units / gridDim.y) "units" of 64
// rows (the host picks grid.y: src/gpu/scores/plan.rs, WG_UPC, QSA_SCORES_WG_UPC), restaging A
// (64 rows x 128) for each. A unit holds whole queries when heads <= 64: each query's heads
// are padded to 16-row m-tiles (mtq = ceil(heads / 16)) and a unit holds 4 / mtq queries;
// above 64 heads a unit is one query and the query takes ceil(mtq / 4) passes. Padded rows
// and rows of absent queries / blocks stage zeros and carry weight 0.
// Staging: plain global loads (B: 16 chunks in flight per thread; the next A: all 16 float4 of a
// thread issued right after the MMA, in flight while it runs), rounded (TF32: cvt.rna, as the
// mma.sync kernel; BF16: cvt.rn, as the bf16 kernel) and stored with st.shared into the
// no-swizzle K-major canonical layout of mma.h: 16-byte chunk i of a tile is at byte 16 i,
// and holds row (i / (8 DC)) * 8 + i % 8, k-chunk (i / 8) % DC (DC = 16-byte chunks per row),
// so core matrices are 128 contiguous bytes, LBO = 128 (next core matrix in K) and
// SBO = 8 rows x row bytes (next in M / N); each k step's descriptors start 32 bytes of K =
// 256 bytes further. Then fence.proxy.async (the stores must be seen by the async proxy)
// and a barrier before the MMA.
// Epilogue: v = w * relu(acc) per row, rows g and g + 8 of a lane combined, the 16 rows of
// each warp's m-tile reduced with the shuffle transpose of tc_body (3 steps per 8 values),
// partials per (m-tile, block) in shared memory, then summed over the query's m-tiles in
// ascending order (and over passes in order). Deterministic; not the mma.sync kernels' order.
// Launch: block = (128, 1, 1); grid = (ceil(blocks / BN), ceil(units / UPC)) for any UPC >= 1, units =
// ceil(nq / (4 / mtq)) (heads <= 64) or nq; dynamic shared = BN * 128 * E + 64 * 128 * E
// + 4 * BN * 4 bytes (E = 4 for TF32, 2 for BF16): 100,352 B (TF32), 86,016 B (BF16), two
// CTAs per SM. src/gpu/scores/plan.rs (plan_wgmma) mirrors BN and the shared size.
#pragma once

#define WG_THREADS 128

// Staging a tile of rows of 128 floats into the canonical layout: 16-byte chunk i (byte 16 i
// of the tile) holds row (i / (8 DC)) * 8 + i % 8, k-chunk (i / 8) % DC. Thread tid handles
// chunks tid + 128 m. src_row(r) is row r's floats (nullptr: zeros).
template <bool BF16> struct WgChunk {
  static constexpr int DC = BF16 ? 16 : 32;  // 16-byte chunks per row in shared memory
  static constexpr int EPC = BF16 ? 8 : 4;   // floats per chunk
  static constexpr int V = BF16 ? 2 : 1;     // float4 loads per chunk
};

// Global loads of this thread's chunks m0 .. m0 + N - 1 (all in flight at once).
template <bool BF16, int N, class SrcRow>
__device__ __forceinline__ void wg_load(float4 (&v)[N][WgChunk<BF16>::V], SrcRow src_row, int tid,
                                        int m0) {
  using C = WgChunk<BF16>;
#pragma unroll
  for (int b = 0; b < N; ++b) {
    const int i = tid + (m0 + b) * WG_THREADS;
    const int row = (i / (8 * C::DC)) * 8 + i % 8, kc = (i / 8) % C::DC;
    const float* p = src_row(row);
#pragma unroll
    for (int x = 0; x < C::V; ++x)
      v[b][x] = p ? reinterpret_cast<const float4*>(p + kc * C::EPC)[x] : make_float4(0.f, 0.f, 0.f, 0.f);
  }
}

// Where the 4 m-tiles (16 rows each) of one 64-row unit come from: tile k's row rr is row
// row0[k] + rr of Q (as [nq * heads][128]) when rr < rows[k], else zero. Computed once per
// (unit, pass), so the loads below do no division.
struct WgTiles {
  long long row0[4];
  int rows[4];
};

// The A loads of wg_load for the 64-row A tile, from a WgTiles: thread tid's chunk m is row
// 8 (m / G) + tid % 8, k-chunk tid / 8 + 16 (m % G) (G = 8 DC / 128, tid < 128), so its
// m-tile (m / 2G) is a compile-time index after unrolling.
template <bool BF16, int N>
__device__ __forceinline__ void wg_load_a(float4 (&v)[N][WgChunk<BF16>::V],
                                          const float* __restrict__ q, const WgTiles& t, int tid,
                                          int m0) {
  using C = WgChunk<BF16>;
  constexpr int G = 8 * C::DC / WG_THREADS;
#pragma unroll
  for (int b = 0; b < N; ++b) {
    const int m = m0 + b;  // compile-time where m0 is
    const int rg = m / G, kc = tid / 8 + 16 * (m % G);
    const int mi = rg / 2, rr = 8 * (rg % 2) + tid % 8;
    const bool ok = rr < t.rows[mi];
    const float* p = q + (t.row0[mi] + (ok ? rr : 0)) * QSA_HEAD_DIM + kc * C::EPC;
#pragma unroll
    for (int x = 0; x < C::V; ++x)
      v[b][x] = ok ? reinterpret_cast<const float4*>(p)[x] : make_float4(0.f, 0.f, 0.f, 0.f);
  }
}

// Those chunks rounded to the operand format (TF32: cvt.rna; BF16: cvt.rn) and stored.
template <bool BF16, int N>
__device__ __forceinline__ void wg_store(unsigned char* dst, const float4 (&v)[N][WgChunk<BF16>::V],
                                         int tid, int m0) {
#pragma unroll
  for (int b = 0; b < N; ++b) {
    const int i = tid + (m0 + b) * WG_THREADS;
    if constexpr (BF16) {
      uint4 o;
      o.x = qsa_pack_bf16x2(v[b][0].x, v[b][0].y);
      o.y = qsa_pack_bf16x2(v[b][0].z, v[b][0].w);
      o.z = qsa_pack_bf16x2(v[b][1].x, v[b][1].y);
      o.w = qsa_pack_bf16x2(v[b][1].z, v[b][1].w);
      *reinterpret_cast<uint4*>(dst + 16 * i) = o;
    } else {
      float4 o;
      o.x = __uint_as_float(qsa_cvt_tf32(v[b][0].x));
      o.y = __uint_as_float(qsa_cvt_tf32(v[b][0].y));
      o.z = __uint_as_float(qsa_cvt_tf32(v[b][0].z));
      o.w = __uint_as_float(qsa_cvt_tf32(v[b][0].w));
      *reinterpret_cast<float4*>(dst + 16 * i) = o;
    }
  }
}

// A whole tile of ROWS rows (the B tile), 16 chunks per thread in flight at a time.
template <bool BF16, int ROWS, class SrcRow>
__device__ __forceinline__ void wg_stage(unsigned char* dst, SrcRow src_row, int tid) {
  constexpr int PER = ROWS * WgChunk<BF16>::DC / WG_THREADS;
  constexpr int BATCH = 16;  // 16 float4 (TF32) or 32 (BF16) in flight at a time
  static_assert(PER % BATCH == 0, "whole batches");
#pragma unroll 1
  for (int m0 = 0; m0 < PER; m0 += BATCH) {
    float4 v[BATCH][WgChunk<BF16>::V];
    wg_load<BF16, BATCH>(v, src_row, tid, m0);
    wg_store<BF16, BATCH>(dst, v, tid, m0);
  }
}

// acc = A (64 x 128) B^T (BN x 128) from the staged tiles at shared addresses a / b: issued
// and committed, not waited for (qsa_wgmma_wait<0> before acc is read or A rewritten).
template <int BN, bool BF16>
__device__ __forceinline__ void wg_mma_issue(float (&acc)[BN / 2], unsigned a, unsigned b) {
  constexpr unsigned ROW_BYTES = 128 * (BF16 ? 2 : 4);
  constexpr unsigned LBO = 128, SBO = 8 * ROW_BYTES;
  constexpr int KSTEPS = BF16 ? 128 / 16 : 128 / 8;  // 32 bytes of K per step
  qsa_wgmma_fence_regs(acc);
  qsa_wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < KSTEPS; ++ks) {
    const unsigned long long da = qsa_wgmma_desc(a + 256u * ks, LBO, SBO);
    const unsigned long long db = qsa_wgmma_desc(b + 256u * ks, LBO, SBO);
    if constexpr (BF16 && BN == 256) qsa_wgmma_m64n256k16_bf16(acc, da, db, ks > 0);
    else if constexpr (BF16 && BN == 128) qsa_wgmma_m64n128k16_bf16(acc, da, db, ks > 0);
    else if constexpr (BN == 256) qsa_wgmma_m64n256k8_tf32(acc, da, db, ks > 0);
    else qsa_wgmma_m64n128k8_tf32(acc, da, db, ks > 0);
  }
  qsa_wgmma_commit();
  qsa_wgmma_fence_regs(acc);
}

template <int BN, bool BF16>
__device__ __forceinline__ void wg_body(const float* __restrict__ q, const float* __restrict__ kb,
                                        const float* __restrict__ w, float* __restrict__ s,
                                        int nq, int heads, int blocks) {
  constexpr int ROW_BYTES = 128 * (BF16 ? 2 : 4);
  constexpr int B_BYTES = BN * ROW_BYTES, A_BYTES = 64 * ROW_BYTES;
  static_assert(BN % 128 == 0, "the fold gives each thread BN / 128 columns");
  QSA_DYNAMIC_SHARED(smem_raw);
  unsigned char* Bs = smem_raw;
  unsigned char* As = smem_raw + B_BYTES;
  float* part = reinterpret_cast<float*>(As + A_BYTES);  // [4 m-tiles][BN]

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane >> 2, t = lane & 3;
  const int mtq = (heads + 15) / 16;
  const int qpu = mtq <= 4 ? 4 / mtq : 1;
  const int passes = mtq <= 4 ? 1 : (mtq + 3) / 4;
  const int units = (nq + qpu - 1) / qpu;
  const int upc = (units + (int)gridDim.y - 1) / (int)gridDim.y;  // the host's grid decides
  const int u0 = blockIdx.y * upc;
  const int u1 = min(units, u0 + upc);
  const int b0 = blockIdx.x * BN;
  if (u0 >= u1) return;  // uniform over the CTA

  // Where row r of unit u, pass p comes from: (query, head), or invalid (zero, weight 0).
  auto row_src = [&](int u, int p, int r, int& qq, int& hh) -> bool {
    const int mi = r / 16;
    int slot, ht;
    if (passes == 1) {
      slot = mi / mtq;
      ht = mi % mtq;
      if (slot >= qpu) return false;
    } else {
      slot = 0;
      ht = p * 4 + mi;
    }
    qq = u * qpu + slot;
    hh = ht * 16 + r % 16;
    return qq < nq && hh < heads;
  };
  auto tiles = [&](int u, int p) {
    WgTiles t;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      int qq, hh;
      const bool first = row_src(u, p, 16 * k, qq, hh);  // the tile's first row
      t.row0[k] = first ? (long long)qq * heads + hh : 0;
      t.rows[k] = first ? min(16, heads - hh) : 0;
    }
    return t;
  };

  wg_stage<BF16, BN>(Bs, [&](int r) -> const float* {
    return b0 + r < blocks ? kb + (size_t)(b0 + r) * QSA_HEAD_DIM : nullptr;
  }, tid);
  WgTiles tl = tiles(u0, 0);
  {
    constexpr int APER = 64 * WgChunk<BF16>::DC / WG_THREADS;
    float4 v[APER][WgChunk<BF16>::V];
    wg_load_a<BF16, APER>(v, q, tl, tid, 0);
    wg_store<BF16, APER>(As, v, tid, 0);
  }
  qsa_fence_proxy_async();
  __syncthreads();
  const unsigned a_addr = qsa_smem_addr(As), b_addr = qsa_smem_addr(Bs);

  float tot[BN / WG_THREADS];  // passes > 1: the query's running sums of columns tid + 128 k
#pragma unroll
  for (int k = 0; k < BN / WG_THREADS; ++k) tot[k] = 0.f;
  // The weights of this thread's two epilogue rows (16 warp + g and + 8: m-tile `warp`) of a
  // unit, zero for rows without a (query, head); loaded one unit ahead, with the next A.
  auto weights = [&](const WgTiles& t, float& lo, float& hi) {
    long long r0 = t.row0[0];
    int n = t.rows[0];
#pragma unroll
    for (int k = 1; k < 4; ++k)
      if (warp == k) {  // constant indices: t stays in registers
        r0 = t.row0[k];
        n = t.rows[k];
      }
    lo = g < n ? w[r0 + g] : 0.f;
    hi = g + 8 < n ? w[r0 + g + 8] : 0.f;
  };
  float w_lo, w_hi;
  weights(tl, w_lo, w_hi);
#pragma unroll 1
  for (int u = u0; u < u1; ++u) {
#pragma unroll 1
    for (int p = 0; p < passes; ++p) {
      // The next (unit, pass) of this CTA: its A rows are loaded into registers while the
      // tensor cores work, and stored once every warp's MMA is done with A.
      const bool last_pass = p + 1 == passes;
      const int nu = last_pass ? u + 1 : u, np = last_pass ? 0 : p + 1;
      const bool more = nu < u1;
      // APER chunks of A per thread (16 float4 either way), all loaded during the MMA: 164
      // (TF32) and 229 (BF16) registers, no spills (nvcc 13.0.88, 2026-12-02).
      constexpr int APER = 64 * WgChunk<BF16>::DC / WG_THREADS;  // 16 (TF32) or 8 (BF16)
      float4 na[APER][WgChunk<BF16>::V];

      float acc[BN / 2];
      wg_mma_issue<BN, BF16>(acc, a_addr, b_addr);
      float nw_lo = 0.f, nw_hi = 0.f;
      if (more) {
        tl = tiles(nu, np);
        wg_load_a<BF16, APER>(na, q, tl, tid, 0);
        weights(tl, nw_lo, nw_hi);
      }
      qsa_wgmma_wait<0>();
      qsa_wgmma_fence_regs(acc);  // no use of acc above the wait
      __syncthreads();  // every warp's MMA has read A: it may be restaged

      // This warp's m-tile (rows 16 warp .. +15): part[warp][col] = sum of w * relu(acc).
      {
#pragma unroll
        for (int G = 0; G < BN / 32; ++G) {
          float v[8];  // 2 jj + c  <->  column 32 G + 8 jj + 2 t + c
#pragma unroll
          for (int jj = 0; jj < 4; ++jj)
#pragma unroll
            for (int c = 0; c < 2; ++c) {
              const int j = 4 * G + jj;
              v[2 * jj + c] = fmaf(w_hi, qsa_relu(acc[4 * j + 2 + c]), w_lo * qsa_relu(acc[4 * j + c]));
            }
          v[0] = qsa_tile_rows16_sum(v, g);
          part[warp * BN + 32 * G + 8 * (g >> 1) + 2 * t + (g & 1)] = v[0];
        }
      }

      if (more) wg_store<BF16, APER>(As, na, tid, 0);
      w_lo = nw_lo;  // the epilogue above was the last use of this unit's weights
      w_hi = nw_hi;
      qsa_fence_proxy_async();
      __syncthreads();  // partials and the next A are complete

      if (passes == 1) {
        for (int idx = tid; idx < qpu * BN; idx += WG_THREADS) {
          const int slot = idx / BN, col = idx % BN;
          const int qq = u * qpu + slot, b = b0 + col;
          if (qq >= nq || b >= blocks) continue;
          float sum = part[(slot * mtq) * BN + col];
          for (int m = 1; m < mtq; ++m) sum += part[(slot * mtq + m) * BN + col];
          s[(size_t)qq * blocks + b] = sum;
        }
      } else {
        const int mts = min(4, mtq - 4 * p);
#pragma unroll
        for (int k = 0; k < BN / WG_THREADS; ++k) {
          const int col = tid + WG_THREADS * k;
          float sum = part[col];
          for (int m = 1; m < mts; ++m) sum += part[m * BN + col];
          tot[k] = p == 0 ? sum : tot[k] + sum;  // the first pass does not add to 0
          if (last_pass && u < nq && b0 + col < blocks) s[(size_t)u * blocks + b0 + col] = tot[k];
        }
      }
    }
  }
}
