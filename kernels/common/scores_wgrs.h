// The Hopper wgmma scorers with A in registers (wgmma "RS": A from registers, B from shared):
// rs_body of kernels/block_scores.cu's block_scores_{tf32,bf16}_wgrs* entry points. Included
// by block_scores.cu inside `#if defined(QSA_WGMMA)` (sm_90a only), after scores_wgmma.h; it
// uses QSA_HEAD_DIM, qsa_relu, qsa_tile_rows16_sum and the mma.h RS wrappers. In common/ so
// that the emulator's module cache (keyed by every common header) sees it.
//
// Why (session 6's wgmma kernel, common/scores_wgmma.h, ran at 20-22% of the tensor cores'
// rate): there, every 64-row unit's A tile went global -> registers -> shared memory, behind
// two CTA barriers, and the wgmma read it back from shared memory; the epilogue summed a
// query's heads across the four warps through shared memory, behind the same barriers. Here
// nothing is shared after B is staged:
//   - A never touches shared memory: each thread loads its own A fragment (mma.h's RS layout)
//     straight from global memory, rounds it (TF32: cvt.rna; BF16: cvt.rn, as before) and
//     hands it to wgmma. Shared-memory traffic per MMA is B alone (64 B / clock at full
//     tensor rate, of the SM's 128), where the SS form read A too and restaged it.
//   - A warp's 16 rows are 16 heads of ONE query: warp w of a warpgroup holds query 4 G + w of
//     its "group" G (4 queries), heads 16 ht .. 16 ht + 15 for head tile ht = 0 .. mtq - 1
//     (mtq = ceil(heads / 16)). A warpgroup walks a group's mtq head tiles in order, one wgmma
//     "item" (64 rows x BN blocks x K 128) each, and keeps each query's running sum in
//     registers: the epilogue is relu, weight, the 16-row shuffle reduction
//     (qsa_tile_rows16_sum) and one add per column. No barrier after B's.
//   - Several warpgroups per SM (WGS per CTA x CTAs per SM: 2 or 3) overlap one's epilogue
//     and loads with another's MMAs; PF = 1 also loads the next item's A while this one's
//     MMAs run (more registers, fewer warpgroups per SM).
// Measured (H200, 2026-12-02 06:08 UTC, bench/scores_vs_torch.py, 256 x 64 x 4096, median):
// TF32 rs256 67.6 us (the SS kernel 155.3, cuBLAS's TF32 GEMM alone 95.9), BF16 rs256p 51.2 us
// (SS 85.8, cuBLAS BF16 on pre-converted inputs 50.3). Since then sm_90's defaults are the
// ping-pong rs256o for TF32 (60.4-65.4 us in two later calls) and rs256ps for BF16 (the one
// BF16 form whose replays never spread); dispatch/scores/engine.rs has every figure.
// Swizzling B (s) did not pay for TF32 (70.1 us).
// The k order is permuted (the dot product's terms, not its value): within each 16-wide k
// chunk i, thread t's float4 of A (k = 16 i + 4 t .. + 3) fills its fragment slots, so the
// loads are whole float4; B is staged with the same permutation (rs_stage_b). Which logical k
// each physical k slot holds, per 16-wide chunk, physical p -> logical:
//   TF32 (two k8 steps per chunk): p = 8 s + t + 4 h -> 4 t + 2 s + h
//   BF16 (one k16 step):           p = 8 c + 2 t + e -> 4 t + 2 c + e
// so B's 16-byte physical chunk c of the row's k chunk i holds, for v_m = the row's float4 at
// k = 16 i + 4 m: TF32 (v_0[c], v_1[c], v_2[c], v_3[c]); BF16 c = 0: (v_m.x, v_m.y) for m =
// 0..3, c = 1: (v_m.z, v_m.w), as bf16 pairs.
// Sum order: per (query, block): the tensor core's k order; heads within a 16-head tile in
// qsa_tile_rows16_sum's fixed tree; tiles in ascending order. Deterministic; not the SS
// kernel's order.
// Launch (src/gpu/scores/wgrs.rs, plan_wgrs): block = (128 WGS); grid = (ceil(blocks / BN),
// ceil(groups / gpc)), groups = ceil(nq / 4); the kernel takes gpc = ceil(groups / grid.y)
// groups per CTA, warpgroup j the CTA's groups j, j + WGS, ...; dynamic shared = BN x 128 x E
// (E = 4 TF32, 2 BF16), B only, + 1024 with the swizzled B (SW: its alignment). Block indices are ints up to blocks + BN - 1.
#pragma once

// B's tile (BN rows of Kb from b0, zeros past `blocks`) rounded and stored in the canonical
// no-swizzle K-major layout (scores_wgmma.h's header: 16-byte chunk kc of row r at byte
// 16 ((r / 8) 8 DC + 8 kc + r % 8)), with the k permutation above. Item (row r, k chunk i):
// four float4 loads, four (TF32) or two (BF16) 16-byte stores; consecutive threads take
// consecutive rows, 4 items (16 loads) in flight per thread.
// SW: the 128-byte-swizzle layout instead (mma.h's qsa_wgmma_desc_sw128): 16-byte chunk kc
// of row r at byte (kc / 8) (BN 128) + (r / 8) 1024 + (r % 8) 128 + 16 ((kc % 8) ^ (r % 8)),
// i.e. K in 128-byte slices of BN rows each (bs 1024-byte aligned).
template <bool SW, int BN>
__device__ __forceinline__ unsigned rs_b_chunk(int r, int kc, int dc) {
  if constexpr (SW)
    return (unsigned)((kc / 8) * (BN * 128) + (r / 8) * 1024 + (r % 8) * 128 + 16 * ((kc % 8) ^ (r % 8)));
  else
    return (unsigned)(16 * ((r / 8) * 8 * dc + 8 * kc + r % 8));
}

template <bool BF16, int BN, int NT, bool SW>
__device__ __forceinline__ void rs_stage_b(unsigned char* bs, const float* __restrict__ kb, int b0,
                                           int blocks, int tid) {
  constexpr int DC = BF16 ? 16 : 32;  // 16-byte chunks per row
  constexpr int PER = BN * 8 / NT;    // items per thread
  constexpr int BATCH = 4;
  static_assert(PER % BATCH == 0, "whole batches");
#pragma unroll 1
  for (int m0 = 0; m0 < PER; m0 += BATCH) {
    float4 v[BATCH][4];
#pragma unroll
    for (int b = 0; b < BATCH; ++b) {
      const int item = tid + (m0 + b) * NT, r = item % BN, i = item / BN;
      const bool ok = b0 + r < blocks;
      const float4* p = reinterpret_cast<const float4*>(kb + (size_t)(ok ? b0 + r : 0) * QSA_HEAD_DIM + 16 * i);
#pragma unroll
      for (int m = 0; m < 4; ++m) v[b][m] = ok ? p[m] : make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int b = 0; b < BATCH; ++b) {
      const int item = tid + (m0 + b) * NT, r = item % BN, i = item / BN;
      const float4* x = v[b];
      if constexpr (BF16) {
        uint4 o0, o1;
        o0.x = qsa_pack_bf16x2(x[0].x, x[0].y);
        o0.y = qsa_pack_bf16x2(x[1].x, x[1].y);
        o0.z = qsa_pack_bf16x2(x[2].x, x[2].y);
        o0.w = qsa_pack_bf16x2(x[3].x, x[3].y);
        o1.x = qsa_pack_bf16x2(x[0].z, x[0].w);
        o1.y = qsa_pack_bf16x2(x[1].z, x[1].w);
        o1.z = qsa_pack_bf16x2(x[2].z, x[2].w);
        o1.w = qsa_pack_bf16x2(x[3].z, x[3].w);
        *reinterpret_cast<uint4*>(bs + rs_b_chunk<SW, BN>(r, 2 * i, DC)) = o0;
        *reinterpret_cast<uint4*>(bs + rs_b_chunk<SW, BN>(r, 2 * i + 1, DC)) = o1;
      } else {
        const float c[4][4] = {{x[0].x, x[1].x, x[2].x, x[3].x},
                               {x[0].y, x[1].y, x[2].y, x[3].y},
                               {x[0].z, x[1].z, x[2].z, x[3].z},
                               {x[0].w, x[1].w, x[2].w, x[3].w}};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          uint4 o;
          o.x = qsa_cvt_tf32(c[k][0]);
          o.y = qsa_cvt_tf32(c[k][1]);
          o.z = qsa_cvt_tf32(c[k][2]);
          o.w = qsa_cvt_tf32(c[k][3]);
          *reinterpret_cast<uint4*>(bs + rs_b_chunk<SW, BN>(r, 4 * i + k, DC)) = o;
        }
      }
    }
  }
}

// One item's A rows for this thread: rows g and g + 8 of its warp's 16 (head h0 and h0 + 8
// of query qq, zero where absent), float4 i at k = 16 i + 4 t.
struct RsRows {
  float4 lo[8], hi[8];
};

__device__ __forceinline__ void rs_load_a(RsRows& a, const float* __restrict__ q, long long row0, bool ok0,
                                          bool ok1, int t) {
  const float4* p0 = reinterpret_cast<const float4*>(q + (ok0 ? row0 : 0) * QSA_HEAD_DIM + 4 * t);
  const float4* p1 = reinterpret_cast<const float4*>(q + (ok1 ? row0 + 8 : 0) * QSA_HEAD_DIM + 4 * t);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    a.lo[i] = ok0 ? p0[4 * i] : make_float4(0.f, 0.f, 0.f, 0.f);
    a.hi[i] = ok1 ? p1[4 * i] : make_float4(0.f, 0.f, 0.f, 0.f);
  }
}

// The rows as wgmma fragments (mma.h's RS layout), rounded: KS k steps of 4 registers.
template <bool BF16> struct RsFrag {
  static constexpr int KS = BF16 ? 8 : 16;
  unsigned a[KS][4];
};

template <bool BF16> __device__ __forceinline__ void rs_frag(RsFrag<BF16>& f, const RsRows& r) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float4 lo = r.lo[i], hi = r.hi[i];
    if constexpr (BF16) {  // k step i: slots 2t, 2t + 1 <- k 4t, 4t + 1; 2t + 8, + 9 <- 4t + 2, + 3
      f.a[i][0] = qsa_pack_bf16x2(lo.x, lo.y);
      f.a[i][1] = qsa_pack_bf16x2(hi.x, hi.y);
      f.a[i][2] = qsa_pack_bf16x2(lo.z, lo.w);
      f.a[i][3] = qsa_pack_bf16x2(hi.z, hi.w);
    } else {  // k steps 2i + s: slot t <- k 4t + 2s, slot t + 4 <- 4t + 2s + 1
      f.a[2 * i][0] = qsa_cvt_tf32(lo.x);
      f.a[2 * i][1] = qsa_cvt_tf32(hi.x);
      f.a[2 * i][2] = qsa_cvt_tf32(lo.y);
      f.a[2 * i][3] = qsa_cvt_tf32(hi.y);
      f.a[2 * i + 1][0] = qsa_cvt_tf32(lo.z);
      f.a[2 * i + 1][1] = qsa_cvt_tf32(hi.z);
      f.a[2 * i + 1][2] = qsa_cvt_tf32(lo.w);
      f.a[2 * i + 1][3] = qsa_cvt_tf32(hi.w);
    }
  }
}

// acc = A (this warpgroup's 64 rows, from f) B^T (BN x 128 at shared address b): issued and
// committed, not waited for.
// SW: B in the 128-byte-swizzle layout (k step ks: slice ks / 4, 32 bytes in per step).
template <int BN, bool BF16, bool SW>
__device__ __forceinline__ void rs_mma_issue(float (&acc)[BN / 2], RsFrag<BF16>& f, unsigned b) {
  constexpr unsigned SBO = 8 * 128 * (BF16 ? 2 : 4);
  qsa_wgmma_fence_regs(acc);
  qsa_wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < RsFrag<BF16>::KS; ++ks) {
    const unsigned long long db =
        SW ? qsa_wgmma_desc_sw128(b + (unsigned)(ks / 4) * (BN * 128) + 32u * (ks % 4), 1024)
           : qsa_wgmma_desc(b + 256u * ks, 128, SBO);
    if constexpr (BF16 && BN == 256) qsa_wgmma_m64n256k16_bf16_rs(acc, f.a[ks], db, ks > 0);
    else if constexpr (BF16) qsa_wgmma_m64n128k16_bf16_rs(acc, f.a[ks], db, ks > 0);
    else if constexpr (BN == 256) qsa_wgmma_m64n256k8_tf32_rs(acc, f.a[ks], db, ks > 0);
    else qsa_wgmma_m64n128k8_tf32_rs(acc, f.a[ks], db, ks > 0);
  }
  qsa_wgmma_commit();
  qsa_wgmma_fence_regs(acc);
}

// PP (WGS == 2): ping-pong. The two warpgroups take turns issuing their MMAs (named barriers
// 1 and 2: a warpgroup waits for its turn, issues, hands the turn over), so the tensor cores
// finish one warpgroup's item while the other still waits for its own, and one's epilogue and
// loads overlap the other's MMAs instead of both waiting at once (FA3's / CUTLASS's
// ping-pong). Both take the same number of turns (the first warpgroup's item count, never
// smaller than the second's: it has the odd group); a turn without an item only passes the
// turn on. Warpgroup 1 opens with an arrival on warpgroup 0's barrier and skips its last
// hand-over, so every arrival is consumed by a sync.
template <int BN, bool BF16, int WGS, bool PF, bool SW, bool PP = false>
__device__ __forceinline__ void rs_body(const float* __restrict__ q, const float* __restrict__ kb,
                                        const float* __restrict__ w, float* __restrict__ s, int nq,
                                        int heads, int blocks) {
  static_assert(BN == 128 || BN == 256, "the wgmma N");
  QSA_DYNAMIC_SHARED(smem_raw);
  const int tid = threadIdx.x, wg = tid / 128, warp = (tid / 32) % 4, lane = tid % 32;
  const int g = lane >> 2, t = lane & 3;
  const int mtq = (heads + 15) / 16;
  const int groups = (nq + 3) / 4;
  const int gpc = (groups + (int)gridDim.y - 1) / (int)gridDim.y;  // the host's grid decides
  const int g0 = blockIdx.y * gpc, g1 = min(groups, g0 + gpc);
  const int b0 = blockIdx.x * BN;
  if (g0 >= g1) return;  // uniform over the CTA

  // B's tile; the swizzled layout's atoms must be 1024-byte aligned in the shared space (the
  // host allocates 1 KiB more for it).
  const unsigned raw = qsa_smem_addr(smem_raw);
  const unsigned pad = SW ? ((raw + 1023u) & ~1023u) - raw : 0u;
  rs_stage_b<BF16, BN, 128 * WGS, SW>(smem_raw + pad, kb, b0, blocks, tid);
  qsa_fence_proxy_async();  // the st.shared above, seen by the async proxy (wgmma)
  __syncthreads();          // the last CTA-wide barrier: from here each warpgroup runs alone
  const unsigned b_addr = raw + pad;

  // This warpgroup's items: its groups G = g0 + wg, + WGS, ... below g1, each with head
  // tiles 0 .. mtq - 1 in order. Uniform over the warpgroup (wgmma is .sync.aligned).
  const int my_groups = g1 - g0 > wg ? (g1 - g0 - wg + WGS - 1) / WGS : 0;
  const int items = my_groups * mtq;
  constexpr bool PING = PP && WGS == 2;
  static_assert(!PP || WGS == 2, "ping-pong needs two warpgroups");
  const int turns = PING ? (g1 - g0 + 1) / 2 * mtq : items;  // warpgroup 0's item count
  if (PING && wg == 1) qsa_bar_arrive(1, 256);                 // warpgroup 0 takes the first turn
  // Where item k's rows come from (this thread's two rows: heads h0, h0 + 8 of query qq).
  auto rows_of = [&](int k, long long& row0, bool& ok0, bool& ok1) {
    const int G = g0 + wg + WGS * (k / mtq), ht = k % mtq;
    const int qq = 4 * G + warp, h0 = 16 * ht + g;
    ok0 = qq < nq && h0 < heads;
    ok1 = qq < nq && h0 + 8 < heads;
    row0 = (long long)qq * heads + h0;
  };

  RsRows ra;
  long long row0;
  bool ok0, ok1;
  if (PF && items > 0) {  // (PING: a warpgroup without items loads nothing)
    rows_of(0, row0, ok0, ok1);
    rs_load_a(ra, q, row0, ok0, ok1, t);
  }
  float tot[BN / 32];  // this lane's columns 32 c + 8 (g >> 1) + 2 t + (g & 1), summed over tiles
#pragma unroll
  for (int c = 0; c < BN / 32; ++c) tot[c] = 0.f;
#pragma unroll 1
  for (int k = 0; k < turns; ++k) {
    if (PING && k >= items) {  // no item: pass the turn on
      qsa_bar_sync(1 + wg, 256);
      if (!(wg == 1 && k == turns - 1)) qsa_bar_arrive(2 - wg, 256);
      continue;
    }
    const int ht = k % mtq;
    const int qq = 4 * (g0 + wg + WGS * (k / mtq)) + warp;
    if (!PF) {  // this item's rows, loaded now (PF: loaded during the last item's MMAs)
      rows_of(k, row0, ok0, ok1);
      rs_load_a(ra, q, row0, ok0, ok1, t);
    }
    // This item's weights (zero for absent rows), in flight during the MMAs.
    const float wl = ok0 ? w[row0] : 0.f, wh = ok1 ? w[row0 + 8] : 0.f;
    RsFrag<BF16> f;
    rs_frag<BF16>(f, ra);
    float acc[BN / 2];
    if (PING) qsa_bar_sync(1 + wg, 256);  // this warpgroup's turn
    rs_mma_issue<BN, BF16, SW>(acc, f, b_addr);
    if (PING && !(wg == 1 && k == turns - 1)) qsa_bar_arrive(2 - wg, 256);  // the other's turn
    if (PF && k + 1 < items) {  // the next item's rows, in flight while the tensor cores work
      rows_of(k + 1, row0, ok0, ok1);
      rs_load_a(ra, q, row0, ok0, ok1, t);
    }
    qsa_wgmma_wait<0>();
    qsa_wgmma_fence_regs(acc);  // no use of acc above the wait
    qsa_wgmma_fence_aregs(f.a);  // f (read by the MMAs) lives until here
#pragma unroll
    for (int c = 0; c < BN / 32; ++c) {
      float v[8];  // 2 jj + e  <->  column 32 c + 8 jj + 2 t + e
#pragma unroll
      for (int jj = 0; jj < 4; ++jj)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int j = 4 * c + jj;
          v[2 * jj + e] = fmaf(wh, qsa_relu(acc[4 * j + 2 + e]), wl * qsa_relu(acc[4 * j + e]));
        }
      const float r = qsa_tile_rows16_sum(v, g);
      tot[c] = ht == 0 ? r : tot[c] + r;  // the first tile does not add to 0
    }
    if (ht == mtq - 1 && qq < nq) {
#pragma unroll
      for (int c = 0; c < BN / 32; ++c) {
        const int col = b0 + 32 * c + 8 * (g >> 1) + 2 * t + (g & 1);
        if (col < blocks) s[(size_t)qq * blocks + col] = tot[c];
      }
    }
  }
}
