// NSA selection attention: the KV-block-major fused backward on Hopper wgmma with 64-row tiles
// (QSA_ATTN_KV_MMA=wg: qsa_attn_kvwg_dq_bwd_bf16; sm_90a only, bf16 inputs). Included at the
// end of kernels/common/attention_kv_bwd.h; built only where mma.h defines QSA_WGMMA.
//
// Why: the default (qsa_attn_kv16s_dq_bwd_bf16) walks 16-row tiles on mma.sync m16n8k16 and is
// latency-bound at 2 CTAs of 8 warps per SM (session 10's profile: ~9,000 warp instructions
// per 16-row tile, 704 of them mma). Here one warpgroup (128 threads) owns the block's dK / dV
// and walks tiles of 64 rows (qt tokens x hc heads, the dispatch's wg geometry: hc as the
// staged kernels, qt = 64 / hc), so every operand read from shared memory feeds a 64-row wgmma:
//   S^T  (64 keys x 64 rows)  = K Q^T        SS, 8 k16 steps
//   dP^T (64 keys x 64 rows)  = V dO^T       SS, dO in bf16 hi + lo: 16 steps
//   P^T, dS^T in registers (lse, D per row), stored [keys][rows] as bf16 hi + lo
//   dQ   (64 rows x 128 dims)  = dS K        RS (A = dS by ldmatrix.trans, B = K^T staged
//                                             once per CTA), 2 products, float4 atomics
//   dV^T (128 dims x 64 keys) += dO^T P      RS (A = dO^T by ldmatrix.trans), 3 products
//   dK^T (128 dims x 64 keys) += Q^T dS      RS (A = Q^T by ldmatrix.trans), 2 products
// (lo x lo dropped: ~2^-16 relative per product, as attention_kv_bwd16.h's note).
// Each product's 64-dim half runs into fresh sums added to the block's in f32 (kv_bwd's
// precision note: long sums inside the accumulator drifted on the H200).
//
// Every shared operand is in mma.h's no-swizzle K-major layout (scores_wgmma.h's: core
// matrices of 8 rows x 16 bytes, 128 contiguous bytes; LBO = 128, SBO = 8 rows x row bytes),
// which is also conflict-free for ldmatrix (one core matrix per 8x8 tile).
// Two forms: single-buffered (kvwg: rows copied, waited, split, then computed; 132 KB of shared
// memory) and double-buffered (kvwgp, PIPE: tile n + 1's rows copied during tile n; 178 KB).
// Both: one CTA per SM (shared memory), 4 warps; each wgmma group runs to completion (commit,
// wait 0) before its results are used: no overlap of tile n's dV / dK with tile n + 1's S
// (async wgmma across products needs 32 more accumulator registers: 234 now; the next step).
#pragma once
#if defined(QSA_WGMMA)

#define KWG_THREADS 128
#define KWG_ROWS 64
#define KWG_CHUNK KWG_THREADS
// Bytes of one warpgroup's tile buffers (dO hi, dO lo, then per row buffer q, the f32 landing
// and lse / D / position): NWG = 2 (wg2) gives each warpgroup its own.
#define KWG_WG_BYTES(NBUF) (2 * 64 * 128 * 2 + (NBUF) * (64 * 128 * 2 + 64 * 128 * 4 + 3 * 64 * 4))

// Element offset of (r, c) in a [R][C] bf16 matrix in the no-swizzle K-major layout (C: K).
QSA_DEVICE int kwg_off(int r, int c, int C) { return (((r >> 3) * (C >> 3) + (c >> 3)) << 6) + ((r & 7) << 3) + (c & 7); }

// Shared memory (bytes from the dynamic base; src/dispatch/attention_kv.rs, KV_WG_SHARED,
// computes the same totals: 132,368 with one buffer, 182,288 with two (PIPE)). Buffer b (tile
// n uses n & 1 with PIPE, else 0) holds the tile's q rows, dO's f32 landing and per-row values.
struct KwgSmem {
  u16* k;      // [64 keys][128 dims]
  u16* v;      // [64 keys][128 dims]
  u16* kt;     // [128 dims][64 keys]: K^T, dQ's B
  u16* oh;     // [64 rows][128 dims] dO's bf16 hi
  u16* ol;     // [64 rows][128 dims] dO's bf16 lo
  u16* q0;     // NBUF x [64 rows][128 dims] q
  float* of0;  // NBUF x [64 rows][128] dO as f32 (the copy's landing); reused after the split
               //   as [64 keys][64 rows] P^T hi, P^T lo, dS^T hi, dS^T lo (4 x 8 KB: kwg_ps)
  float* rows0;  // NBUF x {lse [64], D [64], position [64] (int; -1: no row)}
  int* toks;   // [KWG_CHUNK]
  int* hits;   // [KWG_THREADS / 32]
  int* rowtab;  // CM (wg2a, wg2a3): 2 x [64] this warpgroup's tile rows (kwg_fill_rows)
};
#define KWG_MAT (64 * 128)  // elements of one [64][128] bf16 matrix
#define KWG_SQ (64 * 64)    // elements of one [64][64] bf16 matrix

// wg2 (nwg 2): K, V, K^T shared, then warpgroup w's buffers (KWG_WG_BYTES each), then the
// chunk's 256 tokens and 8 per-warp counts (215,584 bytes); wg2a / wg2a3 (CM) then each
// warpgroup's two row tables (2 x 64 ints each: 216,608 bytes).
QSA_DEVICE KwgSmem kwg_smem(unsigned char* base, int nbuf, int nwg = 1, int w = 0) {
  KwgSmem s;
  s.k = (u16*)base;
  s.v = s.k + KWG_MAT;
  s.kt = s.v + KWG_MAT;
  s.oh = (u16*)(base + 3 * KWG_MAT * 2 + w * KWG_WG_BYTES(nbuf));
  s.ol = s.oh + KWG_MAT;
  s.q0 = s.ol + KWG_MAT;
  s.of0 = (float*)(s.q0 + nbuf * KWG_MAT);
  s.rows0 = s.of0 + nbuf * KWG_MAT;
  s.toks = (int*)(base + 3 * KWG_MAT * 2 + nwg * KWG_WG_BYTES(nbuf));
  s.hits = s.toks + nwg * KWG_CHUNK;
  s.rowtab = s.hits + nwg * (KWG_THREADS / 32) + w * 2 * KWG_ROWS;
  return s;
}
QSA_DEVICE u16* kwg_q(const KwgSmem& s, int b) { return s.q0 + b * KWG_MAT; }
QSA_DEVICE float* kwg_of(const KwgSmem& s, int b) { return s.of0 + b * KWG_MAT; }
QSA_DEVICE float* kwg_lse(const KwgSmem& s, int b) { return s.rows0 + b * 3 * KWG_ROWS; }
QSA_DEVICE float* kwg_dr(const KwgSmem& s, int b) { return s.rows0 + b * 3 * KWG_ROWS + KWG_ROWS; }
QSA_DEVICE int* kwg_pos(const KwgSmem& s, int b) { return (int*)(s.rows0 + b * 3 * KWG_ROWS + 2 * KWG_ROWS); }
// P^T hi / lo, dS^T hi / lo (p = 0..3) over buffer b's landing, free once the split read it.
QSA_DEVICE u16* kwg_ps(const KwgSmem& s, int b, int p) { return (u16*)kwg_of(s, b) + p * KWG_SQ; }

// The CTA's barrier. With NWG 2 each warpgroup runs its own instantiation of kwg_bwd (W), so
// the two reach it at different instructions: not __syncthreads (bar.sync 0 is .aligned:
// undefined there; synccheck reported "divergent threads" at it on the H200, session 11 call
// B) but barrier 3 without .aligned, counted over both warpgroups.
template <int NWG>
QSA_DEVICE void kwg_cta_sync() {
  if (NWG == 1) QSA_SYNC();
  else qsa_bar_sync_unaligned(3, NWG * KWG_THREADS);
}
// kv_collect's barrier for NWG warpgroups (kv_collect<NWG * KWG_THREADS, KwgCtaBar<NWG>>).
template <int NWG>
struct KwgCtaBar {
  static __device__ __forceinline__ void sync() { kwg_cta_sync<NWG>(); }
};

// The global row of tile row r (tile n of the chunk), or -1 past the tile's tokens.
QSA_DEVICE long long kwg_row(const KwgSmem& s, const KvCta& c, const KvTiles& tl, int n, int r) {
  const int chunk = n / tl.per_chunk, t0 = (n % tl.per_chunk) * tl.qt;
  const int ntok = tl.found - t0 < tl.qt ? tl.found - t0 : tl.qt;
  const int tok = r / tl.hc;
  if (tok >= ntok) return -1;
  const long long head0 = (long long)c.g * tl.group + chunk * tl.hc;
  return ((long long)c.b * tl.q_len + s.toks[t0 + tok]) * tl.hq + head0 + r % tl.hc;
}

// CM: the global rows of tile n (kwg_row, -1 past the tile's tokens or n >= count) into row table
// p, by the warpgroup's first 64 threads. Why: with kwg_row evaluated per 16-byte copy (24 per
// thread per tile: a run-time division by hc, the token's shared load, 64-bit products) the copy
// loop was 38% of kvwg2a3's executed instructions, ~60 per LDGSTS (H200, session 15 call P's
// SASS profile). The table is filled a tile ahead (kwg_bwd): tile n's copies read table p
// while tile n + NWG's rows go to p ^ 1, published by tile n's barriers. Row indices fit an
// int: dO alone is 512 bytes per row, so 2^31 rows would be 1 TB.
QSA_DEVICE void kwg_fill_rows(const KwgSmem& s, int p, const KvCta& c, const KvTiles& tl, int n, unsigned tid) {
  if (tid < KWG_ROWS) s.rowtab[p * KWG_ROWS + tid] = n < tl.count ? (int)kwg_row(s, c, tl, n, (int)tid) : -1;
}

// Copy tile n's q rows (core layout) and dO rows (f32 rows) into buffer b, one cp.async group
// (rows past the tile's tokens zero-filled), and store its rows' lse, D and position.
// tid: the thread's index in its warpgroup. CM (wg2a): dO lands chunk-major, 16-byte chunk q4
// (dims 4 q4 .. 4 q4 + 3) of row r at float (64 q4 + r) x 4, each 8 lanes copying rows r0 ..
// r0 + 7 of one chunk (128 contiguous shared bytes; global: 8 rows x 64 bytes per 32 lanes), so
// that kwg_split's reads and stores are conflict-free; rows from row table p (kwg_fill_rows).
// DO16 (CM only): dO given as bf16 rows, copied as q is, straight into dO's hi matrix s.oh: it
// is exact in one part, so there is no landing and no split (kwg_split is not called).
template <bool CM = false, bool DO16 = false>
QSA_DEVICE void kwg_issue(const KwgSmem& s, int b, const KvCta& c, const KvTiles& tl, int n, const u16* q,
                          const void* d_o_raw, const float* lse, const float* drow, unsigned tid, int p = 0) {
  static_assert(CM || !DO16, "bf16 dO is wg2a's row-table form");
  const float* d_o = (const float*)d_o_raw;
  if constexpr (CM && DO16) {
    const int* rows = s.rowtab + p * KWG_ROWS;
    const u16* d_o16 = (const u16*)d_o_raw;
#pragma unroll
    for (int i = 0; i < KWG_ROWS * 16 / KWG_THREADS; ++i) {
      const int x = tid + KWG_THREADS * i;
      const int r = x / 16, ch = x % 16;
      const int row = rows[r];
      const long long off = (long long)(row >= 0 ? row : 0) * ATT_D + 8 * ch;
      qsa_copy16(kwg_q(s, b) + kwg_off(r, 8 * ch, ATT_D), q + off, row >= 0);
      qsa_copy16(s.oh + kwg_off(r, 8 * ch, ATT_D), d_o16 + off, row >= 0);
    }
  } else if constexpr (CM) {
    // Trip counts fixed (tid < KWG_THREADS) and unrolled, so the row-table loads issue together
    // rather than one shared-memory latency per copy.
    const int* rows = s.rowtab + p * KWG_ROWS;
#pragma unroll
    for (int i = 0; i < KWG_ROWS * 16 / KWG_THREADS; ++i) {
      const int x = tid + KWG_THREADS * i;
      const int r = x / 16, ch = x % 16;
      const int row = rows[r];
      qsa_copy16(kwg_q(s, b) + kwg_off(r, 8 * ch, ATT_D), q + (long long)(row >= 0 ? row : 0) * ATT_D + 8 * ch, row >= 0);
    }
#pragma unroll
    for (int i = 0; i < KWG_ROWS * 32 / KWG_THREADS; ++i) {
      const int x = tid + KWG_THREADS * i;
      const int r = (x & 7) + 8 * (x >> 8), q4 = (x >> 3) & 31;
      const int row = rows[r];
      qsa_copy16((u16*)(kwg_of(s, b) + (q4 * KWG_ROWS + r) * 4),
                 (const u16*)(d_o + (long long)(row >= 0 ? row : 0) * ATT_D + 4 * q4), row >= 0);
    }
  } else
  // 64 rows x (16 q chunks + 32 dO chunks) of 16 bytes.
  for (int x = tid; x < KWG_ROWS * 48; x += KWG_THREADS) {
    const int r = x / 48, ch = x % 48;
    const long long row = kwg_row(s, c, tl, n, r);
    const bool valid = row >= 0;
    const long long rr = valid ? row : 0;
    if (ch < 16) qsa_copy16(kwg_q(s, b) + kwg_off(r, 8 * ch, ATT_D), q + rr * ATT_D + 8 * ch, valid);
    else qsa_copy16((u16*)(kwg_of(s, b) + r * ATT_D + 4 * (ch - 16)), (const u16*)(d_o + rr * ATT_D + 4 * (ch - 16)), valid);
  }
  qsa_copy_commit();
  if (tid < KWG_ROWS) {
    const int r = tid;
    const long long row = CM ? s.rowtab[p * KWG_ROWS + r] : kwg_row(s, c, tl, n, r);
    const int t0 = (n % tl.per_chunk) * tl.qt;
    kwg_lse(s, b)[r] = row >= 0 ? lse[row] : qsa_neg_inf();
    kwg_dr(s, b)[r] = row >= 0 ? drow[row] : 0.f;
    kwg_pos(s, b)[r] = row >= 0 ? tl.shift + s.toks[t0 + r / tl.hc] : -1;
  }
}

// dO (f32 rows) -> bf16 hi / lo in the core layout: 8 chunks of 8 dims per thread. CM: from
// kwg_issue's chunk-major landing, lanes over rows (r = x mod 64): each 8 lanes read 128
// contiguous bytes and store one core matrix's 128 (the row-major form's stores, 16 lanes at a
// 128-byte stride, ran 8-way bank conflicts: README's "7-way" store wavefronts, call P).
// DP3 (wg2a3, CM only): also dO's third part lo2 = bf16(x - hi - lo), written IN PLACE over the
// first 16 of the 32 landing bytes this thread just read (no other thread reads them): row r's
// dims 8 cc .. 8 cc + 7 at byte 2048 cc + 16 r of the landing, so rows r0 .. r0 + 7 of one
// chunk are 128 contiguous bytes, a core matrix (kwg_ss_lo2's LBO 2048, SBO 128). No shared
// memory is added: wg2a's 215,584 bytes (before the row tables) left 16,864 of the H200's
// 232,448, and a third part per warpgroup is 32,768.
template <bool CM = false, bool DP3 = false>
QSA_DEVICE void kwg_split(const KwgSmem& s, int b, unsigned tid) {
  static_assert(CM || !DP3, "the in-place third part needs the chunk-major landing");
  if constexpr (CM && !DP3) {  // (wg2a's code as timed in session 13: its SASS unchanged)
    for (int x = tid; x < KWG_ROWS * (ATT_D / 8); x += KWG_THREADS) {
      const int r = x % KWG_ROWS, cc = x / KWG_ROWS;
      const float* s0 = kwg_of(s, b) + (2 * cc * KWG_ROWS + r) * 4;
      const float* s1 = s0 + KWG_ROWS * 4;
      unsigned hi[4], lo[4];
      bf16_split2(s0[0], s0[1], hi[0], lo[0]);
      bf16_split2(s0[2], s0[3], hi[1], lo[1]);
      bf16_split2(s1[0], s1[1], hi[2], lo[2]);
      bf16_split2(s1[2], s1[3], hi[3], lo[3]);
      *(uint4*)(s.oh + kwg_off(r, 8 * cc, ATT_D)) = make_uint4(hi[0], hi[1], hi[2], hi[3]);
      *(uint4*)(s.ol + kwg_off(r, 8 * cc, ATT_D)) = make_uint4(lo[0], lo[1], lo[2], lo[3]);
    }
  } else if constexpr (CM) {
    for (int x = tid; x < KWG_ROWS * (ATT_D / 8); x += KWG_THREADS) {
      const int r = x % KWG_ROWS, cc = x / KWG_ROWS;
      float* s0 = kwg_of(s, b) + (2 * cc * KWG_ROWS + r) * 4;
      const float* s1 = s0 + KWG_ROWS * 4;
      const float v[8] = {s0[0], s0[1], s0[2], s0[3], s1[0], s1[1], s1[2], s1[3]};
      unsigned hi[4], lo[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) bf16_split2(v[2 * e], v[2 * e + 1], hi[e], lo[e]);
      *(uint4*)(s.oh + kwg_off(r, 8 * cc, ATT_D)) = make_uint4(hi[0], hi[1], hi[2], hi[3]);
      *(uint4*)(s.ol + kwg_off(r, 8 * cc, ATT_D)) = make_uint4(lo[0], lo[1], lo[2], lo[3]);
      unsigned lo2[4];
#pragma unroll
      for (int e = 0; e < 4; ++e)  // x - hi and then - lo are exact in f32 (as kv16_split_do)
        lo2[e] = qsa_pack_bf16x2(v[2 * e] - qsa_bf16x2_lo(hi[e]) - qsa_bf16x2_lo(lo[e]),
                                 v[2 * e + 1] - qsa_bf16x2_hi(hi[e]) - qsa_bf16x2_hi(lo[e]));
      *(uint4*)s0 = make_uint4(lo2[0], lo2[1], lo2[2], lo2[3]);
    }
  } else
  for (int x = tid; x < KWG_ROWS * (ATT_D / 8); x += KWG_THREADS) {
    const int r = x / (ATT_D / 8), c0 = 8 * (x % (ATT_D / 8));
    const float* src = kwg_of(s, b) + r * ATT_D + c0;
    unsigned hi[4], lo[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) bf16_split2(src[2 * e], src[2 * e + 1], hi[e], lo[e]);
    *(uint4*)(s.oh + kwg_off(r, c0, ATT_D)) = make_uint4(hi[0], hi[1], hi[2], hi[3]);
    *(uint4*)(s.ol + kwg_off(r, c0, ATT_D)) = make_uint4(lo[0], lo[1], lo[2], lo[3]);
  }
}

// A fragment (mma.h's RS layout) of rows m0 .. m0 + 15, k k0 .. k0 + 15 of the TRANSPOSE of
// a [R][C] core-layout matrix (memory rows are the fragment's k, columns its m): ldmatrix.trans
// of four core matrices (k 0-7 / 8-15 x m 0-7 / 8-15).
QSA_DEVICE void kwg_frag_t(const u16* base, int C, int m0, int k0, int lane, unsigned (&a)[4]) {
  const int i = lane >> 3;
  const int k = k0 + (lane & 7) + 8 * (i >> 1), m = m0 + 8 * (i & 1);
  qsa_ldmatrix_x4_trans(base + kwg_off(k, m, C), a[0], a[1], a[2], a[3]);
}

QSA_DEVICE unsigned long long kwg_desc(const u16* p, int C) {
  return qsa_wgmma_desc(qsa_smem_addr(p), 128, (unsigned)C * 16);
}

// d (64 x 64) = A (64 x 128) B^T (64 x 128), both [64][128] core layout in shared.
QSA_DEVICE void kwg_ss(float (&d)[32], const u16* a, const u16* b, bool accumulate) {
#pragma unroll
  for (int ks = 0; ks < ATT_D / 16; ++ks)
    qsa_wgmma_m64n64k16_bf16(d, kwg_desc(a + 128 * ks, ATT_D), kwg_desc(b + 128 * ks, ATT_D),
                             (accumulate || ks > 0) ? 1 : 0);
}

// d += A (64 x 128) B^T with B dO's third part over buffer b's landing (kwg_split's DP3 layout:
// core matrices of 8 rows x 8 dims at byte 2048 c + 16 r0, so LBO 2048 between K-adjacent ones,
// SBO 128 between row-adjacent ones; one k16 step spans two chunks, 4,096 bytes).
QSA_DEVICE void kwg_ss_lo2(float (&d)[32], const u16* a, const KwgSmem& s, int b) {
  const u16* lo2 = (const u16*)kwg_of(s, b);
#pragma unroll
  for (int ks = 0; ks < ATT_D / 16; ++ks)
    qsa_wgmma_m64n64k16_bf16(d, kwg_desc(a + 128 * ks, ATT_D), qsa_wgmma_desc(qsa_smem_addr(lo2 + 2048 * ks), 2048, 128),
                             1);
}

// The B descriptors of one 16-wide k step of a [N][C] core-layout matrix from row n0.
QSA_DEVICE unsigned long long kwg_bdesc(const u16* b, int C, int n0, int ks) {
  return kwg_desc(b + n0 * C + 128 * ks, C);
}

// acc (this warp's 16 of 64 rows x 64 columns, wgmma D layout) += t (the same layout).
QSA_DEVICE void kwg_add(float (&acc)[32], const float (&t)[32]) {
#pragma unroll
  for (int i = 0; i < 32; ++i) acc[i] += t[i];
}

// dQ rows of this warp (tile rows 16 w + g, + 8), dims d0 + 8 j + 2t, + 1 from t (wgmma D
// layout, 64 dims), added with float4 atomics (kv16_dq_add's lane exchange).
// CM: the row from row table p (kwg_fill_rows).
template <bool CM = false>
QSA_DEVICE void kwg_dq_add(const KwgSmem& s, const KvCta& c, const KvTiles& tl, int n, int d0, int warp, int lane,
                           const float (&t)[32], float* dq, float scale, int p = 0) {
  const int g = lane / 4, tt = lane % 4;
  const bool odd = tt & 1;
  const int r = 16 * warp + g + (odd ? 8 : 0);
  const long long row = CM ? s.rowtab[p * KWG_ROWS + r] : kwg_row(s, c, tl, n, r);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float* a = t + 4 * j;
    const float x0 = qsa_shfl_xor(odd ? a[0] : a[2], 1), x1 = qsa_shfl_xor(odd ? a[1] : a[3], 1);
    if (row >= 0) {
      const float4 w = odd ? make_float4(x0, x1, a[2], a[3]) : make_float4(a[0], a[1], x0, x1);
      atomicAdd((float4*)(dq + row * ATT_D + d0 + 8 * j + 2 * tt - (odd ? 2 : 0)),
                make_float4(w.x * scale, w.y * scale, w.z * scale, w.w * scale));
    }
  }
}

// PIPE: two buffers; tile n + 1's rows are copied while tile n computes (the default kernel's
// pattern), at 182,288 bytes of shared memory. Without it, one buffer, copied and waited for
// at the start of each tile.
// NWG = 2 (wg2, no PIPE): two warpgroups share K, V, K^T; warpgroup w takes tiles w, w + 2, ...
// with its own buffers and named barrier 1 + w inside a tile, and its own dK / dV sums
// (warpgroup 1's added by warpgroup 0 through shared memory at the end).
// Per-tile barrier of this thread's warpgroup: __syncthreads with one warpgroup.
template <int NWG>
QSA_DEVICE void kwg_sync(int w) {
  if (NWG == 1) QSA_SYNC();
  else qsa_bar_sync(1 + w, KWG_THREADS);
}
// W: the thread's warpgroup as a template argument (the kernel branches once), so every buffer
// address is a constant: with W at run time ptxas spilled 8 bytes at 255 registers.
// CM: kwg_issue / kwg_split's chunk-major dO landing (wg2a). DP3 (wg2a3): dO in three bf16
// parts for dP, as the default kv16s (two failed dk's 5e-5 gate at T=16K on the H200: 1.36e-4,
// session 13 call E), the third over the landing (kwg_split).
// DO16 (wg2ab): dO given as bf16, so exact in one part: copied straight into s.oh, no split,
// dP^T in one product (8 k16 steps against DP3's 24) and dV^T in two (P^T hi, lo); one
// warpgroup barrier fewer per tile (the split's).
template <bool PIPE, int NWG = 1, int W = 0, bool CM = false, bool DP3 = false, bool DO16 = false>
QSA_DEVICE void kwg_bwd(const u16* __restrict__ q, const u16* __restrict__ k, const u16* __restrict__ v,
                        const int* __restrict__ ids, const float* __restrict__ lse, const float* __restrict__ drow,
                        const void* __restrict__ d_o, float* __restrict__ dk, float* __restrict__ dv,
                        float* __restrict__ dq, int batch, int q_len, int kv_len, int hq, int hkv, int t, float scale,
                        int hc, int qt, int qchunk) {
  QSA_DYNAMIC_SHARED(smem_raw);
  // QCHUNK (qchunk > 0 and < q_len): the queries split into ranges of qchunk tokens, one CTA
  // per (batch, KV head, range, block), ordered so that the CTAs resident together share one
  // (batch, KV head, range): the dQ rows their atomics add to (8 KB per token at 16 heads) and
  // the q / dO rows they read stay in L2 rather than spread over the sequence. The price: a
  // block's dK / dV summed over ranges with atomics into the zero-filled dk / dv, K / V loaded
  // once per range. Otherwise (nqc 1) kv_cta's order, plain dK / dV stores. Measured on the
  // H200 (session 17, B=4 T=16K 64 / 4 heads; src/dispatch/attention_kv_qchunk.rs has the
  // table): 2,048-token ranges -4.4% with dQ first; 256-token ranges +11% with dQ last (the
  // per-range costs).
  const int nqc = qchunk > 0 && qchunk < q_len ? (q_len + qchunk - 1) / qchunk : 1;
  KvCta c;
  int q_lo = 0, q_hi = q_len;
  if (nqc == 1) {
    c = kv_cta<false>(batch, hkv);
  } else {
    const int nblk = (kv_len + ATT_BLK - 1) / ATT_BLK;
    const int x = (int)blockIdx.x, rest = x / nblk, bg = rest / nqc;  // (the grid is < 2^31)
    c.id = x % nblk;
    c.b = bg / hkv;
    c.g = bg % hkv;
    q_lo = rest % nqc * qchunk;
    q_hi = q_len - q_lo < qchunk ? q_len : q_lo + qchunk;
  }
  const int base = c.id * ATT_BLK;
  const int keys = kv_len - base < ATT_BLK ? kv_len - base : ATT_BLK;
  // The range's first query that can see the block (causal), and an empty range's early exit:
  // its dK / dV are the zero fill's (the whole CTA leaves, before any barrier).
  const int first = base - (kv_len - q_len) > q_lo ? base - (kv_len - q_len) : q_lo;
  if (nqc > 1 && first >= q_hi) return;
  static_assert(NWG == 1 || !PIPE, "wg2 is single-buffered");
  static_assert(!CM || NWG > 1, "the chunk-major landing is wg2a's");
  static_assert(!DP3 || CM, "the third dO part lies over the chunk-major landing");
  static_assert(!DO16 || (CM && !DP3), "bf16 dO is one part, in wg2a's row-table form");
  // tid unsigned as threadIdx.x: kvwg / kvwgp's code objects stay as before this form.
  const int wgi = W;
  const unsigned tid = NWG == 1 ? threadIdx.x : threadIdx.x - W * KWG_THREADS;
  const int warp = tid / 32, lane = threadIdx.x % 32, g = lane / 4, tt = lane % 4;
  const KwgSmem s = kwg_smem(smem_raw, PIPE ? 2 : 1, NWG, wgi);
  KvTiles tl;
  tl.group = hq / hkv;
  tl.hc = hc;
  tl.qt = qt;
  tl.q_len = q_len;
  tl.hq = hq;
  tl.shift = kv_len - q_len;
  const int nchunk = tl.group / hc;
  // K and V into the core layout (keys past kv_len zero), then K^T from K once.
  for (int x = threadIdx.x; x < ATT_BLK * (ATT_D / 8); x += NWG * KWG_THREADS) {
    const int r = x / (ATT_D / 8), ch = x % (ATT_D / 8);
    const bool valid = r < keys;
    const long long off = valid ? ((((long long)c.b * kv_len + base + r) * hkv + c.g) * ATT_D + ch * 8) : 0;
    qsa_copy16(s.k + kwg_off(r, 8 * ch, ATT_D), k + off, valid);
    qsa_copy16(s.v + kwg_off(r, 8 * ch, ATT_D), v + off, valid);
  }
  qsa_copy_commit();
  qsa_copy_wait(0);
  kwg_cta_sync<NWG>();
  for (int x = threadIdx.x; x < ATT_BLK * ATT_D; x += NWG * KWG_THREADS) {
    const int d = x / ATT_BLK, key = x % ATT_BLK;
    s.kt[kwg_off(d, key, ATT_BLK)] = s.k[kwg_off(key, d, ATT_D)];
  }
  // (kt's stores are fenced and published by the first tile's fence and barrier; with two
  // warpgroups that barrier is per warpgroup, so fence here and let kv_collect's publish.)
  if (NWG > 1) qsa_fence_proxy_async();
  float acc_v[2][32], acc_k[2][32];  // dV^T, dK^T: dims 64 h + 16 warp + g (+ 8), keys 8 j + 2 tt (+ 1)
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      acc_v[h][i] = 0.f;
      acc_k[h][i] = 0.f;
    }
  for (int i0 = first; i0 < q_hi; i0 += NWG * KWG_CHUNK) {
    // its barriers retire the last tile
    tl.found = kv_collect<NWG * KWG_THREADS, KwgCtaBar<NWG>>(s.toks, s.hits, ids, c, i0, q_len, hkv, t, q_hi);
    tl.per_chunk = (tl.found + qt - 1) / qt;
    tl.count = nchunk * tl.per_chunk;
    if (PIPE && tl.count > 0) kwg_issue(s, 0, c, tl, 0, q, d_o, lse, drow, tid);
    // CM: row table 0 holds this warpgroup's first tile; both warpgroups pass one more barrier
    // per chunk, so the per-warp counts stay even.
    if (CM) {
      kwg_fill_rows(s, 0, c, tl, wgi, tid);
      kwg_sync<NWG>(wgi);
    }
    // NWG 2: with an odd tile count warpgroup 1 takes one tile fewer, so it would pass fewer named
    // barriers (4 per tile, 3 for a warpgroup's first) than warpgroup 0 before the next CTA
    // barrier. The program is ordered by the CTA barriers either way, but compute-sanitizer's
    // racecheck counts barriers per warp: after such a chunk it reported the next chunk's
    // s.hits exchange as a hazard (session 11 call C, attn_kvf_g1_two_chunks causal_edge:
    // warpgroup 0 one tile, warpgroup 1 none; kernel offsets +0x38e0 / +0x15810 are that
    // read and write in this source's build). The short warpgroup passes the missing count
    // on its own barrier, alone, before its tiles (after them, ptxas took 13 more registers) (tests/emu_attention_kvwg.rs; the emulator's barrier-balance
    // check, emu_blocks.h).
    if (NWG > 1) {
      // (DP3: 5 per tile, 4 for the first: the wait before P^T / dS^T overwrite the landing.)
      // (DO16: 3 per tile, 2 for the first: no split, so no barrier after it.)
      const int per = DO16 ? 3 : DP3 ? 5 : 4;
      const int mine = (tl.count - wgi + NWG - 1) / NWG, most = (tl.count + NWG - 1) / NWG;
      for (int x = (mine > 0 ? per * mine - 1 : 0); x < (most > 0 ? per * most - 1 : 0); ++x) kwg_sync<NWG>(wgi);
    }
#pragma unroll 1
    for (int n = wgi; n < tl.count; n += NWG) {
      const int buf = PIPE ? (n & 1) : 0;
      // CM: the row table of tile n, the warpgroup's (n / NWG)-th of the chunk (from n, not a
      // variable of its own: one more live register spilled at 255).
      const int rt = (n / NWG) & 1;
      if (!PIPE) {
        if (n > wgi) kwg_sync<NWG>(wgi);  // this warpgroup's last tile's reads of q, dO, P, dS, rows done
        kwg_issue<CM, DO16>(s, 0, c, tl, n, q, d_o, lse, drow, tid, rt);
        if (CM) kwg_fill_rows(s, rt ^ 1, c, tl, n + NWG, tid);  // read from tile n + NWG, after this tile's barriers
      }
      qsa_copy_wait(0);     // this thread's copies of tile n (the only group in flight)
      if (DO16) qsa_fence_proxy_async();  // q and dO, copied straight into wgmma's operands
      kwg_sync<NWG>(wgi);  // rows, lse / D / pos of tile n; PIPE: tile n - 1 no longer reads buf ^ 1
      if (PIPE && n + 1 < tl.count) kwg_issue(s, buf ^ 1, c, tl, n + 1, q, d_o, lse, drow, tid);
      const float* row_lse = kwg_lse(s, buf);
      const float* row_d = kwg_dr(s, buf);
      const int* row_pos = kwg_pos(s, buf);
      const u16* qs = kwg_q(s, buf);
      if (!DO16) {
        kwg_split<CM, DP3>(s, buf, tid);
        qsa_fence_proxy_async();  // the split's (and K^T's) st.shared, seen by wgmma
        kwg_sync<NWG>(wgi);
      }
      // S^T and dP^T: keys 16 warp + g (+ 8) x tile rows 8 j + 2 tt (+ 1).
      float sc[32], dp[32];
      qsa_wgmma_fence_regs(sc);
      qsa_wgmma_fence_regs(dp);
      qsa_wgmma_fence();
      kwg_ss(sc, s.k, qs, false);
      kwg_ss(dp, s.v, s.oh, false);
      if (!DO16) kwg_ss(dp, s.v, s.ol, true);
      if (DP3) kwg_ss_lo2(dp, s.v, s, buf);
      qsa_wgmma_commit();
      qsa_wgmma_wait<0>();
      qsa_wgmma_fence_regs(sc);
      qsa_wgmma_fence_regs(dp);
      // DP3: P^T / dS^T below overwrite the landing, which the third part's wgmma read: every
      // warp's wait first (a warp's wait_group covers the groups its own threads committed).
      if (DP3) kwg_sync<NWG>(wgi);
      // P^T = exp(scale S - lse) where visible, dS^T = P^T (dP^T - D); stored as bf16 hi / lo
      // [keys][rows] over the landing area of dO (read by the split, before the barrier above).
      // Rows r, r + 1's lse, position and D read once per j as pairs (8-byte aligned: r even),
      // not per element: the stores between keep the compiler from reusing the loads itself.
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int r = 8 * j + 2 * tt;
        const float2 lse2 = *(const float2*)(row_lse + r), d2 = *(const float2*)(row_d + r);
        const int2 pos2 = *(const int2*)(row_pos + r);
        const float row_l[2] = {lse2.x, lse2.y}, row_dd[2] = {d2.x, d2.y};
        const int row_p[2] = {pos2.x, pos2.y};
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int key = 16 * warp + g + 8 * h;
          float p[2], ds[2];
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float L = row_l[e];
            const bool vis = L != qsa_neg_inf() && base + key <= row_p[e];
            p[e] = vis ? expf(sc[4 * j + 2 * h + e] * scale - L) : 0.f;
            ds[e] = kv16_ds(p[e], dp[4 * j + 2 * h + e], row_dd[e]);
          }
          unsigned hi, lo;
          const int o = kwg_off(key, r, KWG_ROWS);
          bf16_split2(p[0], p[1], hi, lo);
          *(unsigned*)(kwg_ps(s, buf, 0) + o) = hi;
          *(unsigned*)(kwg_ps(s, buf, 1) + o) = lo;
          bf16_split2(ds[0], ds[1], hi, lo);
          *(unsigned*)(kwg_ps(s, buf, 2) + o) = hi;
          *(unsigned*)(kwg_ps(s, buf, 3) + o) = lo;
        }
      }
      qsa_fence_proxy_async();
      kwg_sync<NWG>(wgi);  // P^T, dS^T of every key
      // dQ (tile rows 16 warp + g (+ 8) x dims) = dS K: A = dS from dS^T (hi, lo), B = K^T.
      // First of the three products, so that its float4 atomics drain while dV / dK run rather
      // than queue ahead of the next tile's copies (H200, session 17 call C, B=4 T=16K 64 / 4
      // heads: 53.24 / 53.29 ms with 2,048-token query ranges against 54.97 / 55.34 with dQ
      // last; without ranges 55.64 / 55.76 against 56.21 / 56.58).
      {
        unsigned ah[4][4], al[4][4];
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
          kwg_frag_t(kwg_ps(s, buf, 2), KWG_ROWS, 16 * warp, 16 * ks, lane, ah[ks]);
          kwg_frag_t(kwg_ps(s, buf, 3), KWG_ROWS, 16 * warp, 16 * ks, lane, al[ks]);
        }
#pragma unroll 1
        for (int half = 0; half < 2; ++half) {
          float tq[32];
          qsa_wgmma_fence_regs(tq);
          qsa_wgmma_fence();
#pragma unroll
          for (int ks = 0; ks < 4; ++ks) {
            qsa_wgmma_m64n64k16_bf16_rs(tq, ah[ks], kwg_bdesc(s.kt, ATT_BLK, 64 * half, ks), ks > 0);
            qsa_wgmma_m64n64k16_bf16_rs(tq, al[ks], kwg_bdesc(s.kt, ATT_BLK, 64 * half, ks), 1);
          }
          qsa_wgmma_commit();
          qsa_wgmma_wait<0>();
          qsa_wgmma_fence_aregs(ah);
          qsa_wgmma_fence_aregs(al);
          qsa_wgmma_fence_regs(tq);
          kwg_dq_add<CM>(s, c, tl, n, 64 * half, warp, lane, tq, dq, scale, rt);
        }
      }
      // dV^T += dO^T P (hi hi, hi lo, lo hi), dK^T += Q^T dS (hi, lo) per 64-dim half.
      // Unrolled: acc_v[half] / acc_k[half] indexed at run time put them in local memory
      // (512 bytes of stack, ptxas 13.0, sm_90).
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int m0 = 64 * half + 16 * warp;
        float tv[32];
        unsigned ah[4][4], al[4][4];
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
          kwg_frag_t(s.oh, ATT_D, m0, 16 * ks, lane, ah[ks]);
          if (!DO16) kwg_frag_t(s.ol, ATT_D, m0, 16 * ks, lane, al[ks]);
        }
        qsa_wgmma_fence_regs(tv);
        qsa_wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
          qsa_wgmma_m64n64k16_bf16_rs(tv, ah[ks], kwg_bdesc(kwg_ps(s, buf, 0), KWG_ROWS, 0, ks), ks > 0);
          qsa_wgmma_m64n64k16_bf16_rs(tv, ah[ks], kwg_bdesc(kwg_ps(s, buf, 1), KWG_ROWS, 0, ks), 1);
          if (!DO16) qsa_wgmma_m64n64k16_bf16_rs(tv, al[ks], kwg_bdesc(kwg_ps(s, buf, 0), KWG_ROWS, 0, ks), 1);
        }
        qsa_wgmma_commit();
        qsa_wgmma_wait<0>();
        qsa_wgmma_fence_aregs(ah);
        if (!DO16) qsa_wgmma_fence_aregs(al);
        qsa_wgmma_fence_regs(tv);
        kwg_add(acc_v[half], tv);
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) kwg_frag_t(qs, ATT_D, m0, 16 * ks, lane, ah[ks]);
        qsa_wgmma_fence_regs(tv);
        qsa_wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
          qsa_wgmma_m64n64k16_bf16_rs(tv, ah[ks], kwg_bdesc(kwg_ps(s, buf, 2), KWG_ROWS, 0, ks), ks > 0);
          qsa_wgmma_m64n64k16_bf16_rs(tv, ah[ks], kwg_bdesc(kwg_ps(s, buf, 3), KWG_ROWS, 0, ks), 1);
        }
        qsa_wgmma_commit();
        qsa_wgmma_wait<0>();
        qsa_wgmma_fence_aregs(ah);
        qsa_wgmma_fence_regs(tv);
        kwg_add(acc_k[half], tv);
      }
    }
  }
  // NWG 2: warpgroup 1's sums into its own buffers (64 KB of its 80: [value][thread],
  // conflict-free) once every tile's reads of them are done; warpgroup 0 adds them in f32 as it
  // stores (not in a loop of its own: that batched 128 loads and spilled).
  float* red = (float*)kwg_smem(smem_raw, 1, NWG, 1).oh;
  if (NWG > 1) {
    kwg_cta_sync<NWG>();
    if (wgi == 1) {
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int i = 0; i < 32; ++i) {
          red[((2 * h + 0) * 32 + i) * KWG_THREADS + tid] = acc_v[h][i];
          red[((2 * h + 1) * 32 + i) * KWG_THREADS + tid] = acc_k[h][i];
        }
    }
    kwg_cta_sync<NWG>();
    if (threadIdx.x >= KWG_THREADS) return;  // warpgroup 1 (run-time test: W is constant)
  }
  if (nqc > 1) {
    // Ranges share the block: the sums go through warpgroup 0's own buffers (64 of its 80 KB,
    // free since the tiles; warpgroup 1's hold `red`) as [key][dim] f32, dV then dK, so that
    // each float4 atomic adds 4 dims of one key (a thread's sums are 8 dims apart).
    float* sum = (float*)kwg_smem(smem_raw, 1, NWG, 0).oh;
#pragma unroll
    for (int half = 0; half < 2; ++half)
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int dim = 64 * half + 16 * warp + g + 8 * (e >> 1), key = 8 * j + 2 * tt + (e & 1);
          const int i = 4 * j + e;
          const float ov = NWG > 1 ? red[((2 * half + 0) * 32 + i) * KWG_THREADS + tid] : 0.f;
          const float ok = NWG > 1 ? red[((2 * half + 1) * 32 + i) * KWG_THREADS + tid] : 0.f;
          sum[key * ATT_D + dim] = acc_v[half][i] + ov;
          sum[KWG_MAT + key * ATT_D + dim] = (acc_k[half][i] + ok) * scale;
        }
    kwg_sync<NWG>(0);
    for (int x = tid; x < keys * (ATT_D / 4); x += KWG_THREADS) {
      const int key = x / (ATT_D / 4), d4 = 4 * (x % (ATT_D / 4));
      const long long off = (((long long)c.b * kv_len + base + key) * hkv + c.g) * ATT_D + d4;
      atomicAdd((float4*)(dv + off), *(const float4*)(sum + key * ATT_D + d4));
      atomicAdd((float4*)(dk + off), *(const float4*)(sum + KWG_MAT + key * ATT_D + d4));
    }
    return;
  }
  // Plain stores: this CTA owns the block's dK / dV (zero where no token selected it).
#pragma unroll
  for (int half = 0; half < 2; ++half)
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int dim = 64 * half + 16 * warp + g + 8 * (e >> 1), key = 8 * j + 2 * tt + (e & 1);
        if (key >= keys) continue;
        const long long off = (((long long)c.b * kv_len + base + key) * hkv + c.g) * ATT_D + dim;
        const int i = 4 * j + e;
        const float ov = NWG > 1 ? red[((2 * half + 0) * 32 + i) * KWG_THREADS + tid] : 0.f;
        const float ok = NWG > 1 ? red[((2 * half + 1) * 32 + i) * KWG_THREADS + tid] : 0.f;
        dv[off] = NWG > 1 ? acc_v[half][i] + ov : acc_v[half][i];
        dk[off] = (NWG > 1 ? acc_k[half][i] + ok : acc_k[half][i]) * scale;
      }
}
#endif  // QSA_WGMMA
