// NSA selection-attention DECODE forward (sm_80+ CUDA tensor cores): the device code of
// qsa_attn_dec_fwd_{bf16,f16}, instantiated at the end of kernels/selection_attention.cu (one
// code object per family: the runner, the emulator and the benches load kernels by family).
// Self-contained: it shares no helper with the staged kernels, so either side can change.
//
// Semantics: those of selection_attention.cu's header (the contract of
// src/reference/attention.rs): de-duplicated ids, -1 = no block, key j visible iff
// j <= q_pos = kv_len - q_len + i, a query that sees no key gets o = 0, lse = -inf.
//
// Why a decode kernel: at decode the staged kernel's CTA walks its blocks with three CTA
// barriers per block and one 32 KB copy in flight, so the GPU waits on copy latency (H200,
// 16 q x 8 KV heads at 262K: 41 us for 67 MB, 38% of HBM; 1 query: 17 us for 4 MB).
// Here every WARP is an independent flash-decoding worker:
//   - work item = (b, query token i, kv head g, chunk of 16 query heads): M = 16 rows;
//   - its de-duplicated visible blocks are cut into sub-tiles of 16 keys ("units"; a block's
//     units stop at the causal edge), and the units are dealt out contiguously to the
//     grid.y splits of the item, then to the warps of each CTA;
//   - each warp streams its units through its own cp.async ring of `stages` sub-tiles (K and
//     V, 8.5 KB a stage), so up to warps x stages x 8.5 KB per CTA are in flight, with no CTA
//     barrier in the loop (only __syncwarp);
//   - q stays in registers as mma A fragments; S = q K^T and O += P V run on mma.sync
//     m16n8k16 with the scores' C fragments reused as P's A fragments (no shared memory for
//     P); P is split into 16-bit parts that sum back to it (bf16 hi + mid + lo, f16 hi +
//     lo scaled by 2^12), the precision rule of the staged kernel's tc_pv;
//   - the warps of a CTA merge (m, l, O) in shared memory (one barrier); with one split the
//     CTA writes (o, lse); with several it writes a partial (o, lse) in qsa_attn_combine's
//     layout and then either a second launch (qsa_attn_combine) merges (DEC_MERGE_LAUNCH), or
//     the item's last CTA to finish (ticket in `done`, reset by that CTA) merges in the kernel
//     (DEC_MERGE_TICKET); or (qsa_attn_dec_cl_fwd_*, sm_90) the item's 8 splits are one
//     thread-block cluster and merge through distributed shared memory (DEC_MERGE_CLUSTER).
// Preconditions the host checks (src/dispatch/attention_decode.rs): t <= 32 (one id per
// lane), blockDim.x = 32 x warps, dynamic shared = warps x stages x DEC_STAGE_BYTES,
// 1 <= stages <= 4 (2 <= stages with pair = 1: two units per step), and with the in-kernel merge nsplit <= DEC_MAX_MERGE_SPLITS (its weight
// table, nsplit x 16 + 32 floats, lies over the smallest ring: 8704 bytes).
#pragma once
#include "portable.h"

#define DEC_D 128
#define DEC_BLK 64
#define DEC_ROWS 16
// Keys per unit (one mma n-pair, one P A-fragment).
#define DEC_KEYS 16
// Staged K / V rows in u16: 128 + 8 (16-byte rows, lane (g, t) of a B-fragment read hits
// bank 4g + t: conflict free).
#define DEC_STRIDE 136
#define DEC_TILE (DEC_KEYS * DEC_STRIDE)  // u16 of one K or V sub-tile
#define DEC_STAGE_BYTES (2 * DEC_TILE * 2)
#define DEC_MAX_STAGES 4
#define DEC_LO_SCALE 4096.f
#define DEC_MAX_MERGE_SPLITS 128
// `merge` argument values: partials only (a second launch merges), the last CTA's ticket,
// the thread-block cluster (sm_90).
#define DEC_MERGE_LAUNCH 0
#define DEC_MERGE_TICKET 1
#define DEC_MERGE_CLUSTER 2
// The in-kernel merge's loads in flight per thread: outputs x splits (float4 each).
#define DEC_MERGE_OUT 2
#define DEC_MERGE_BATCH 8

typedef unsigned short dec_u16;

#if defined(QSA_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define QSA_DEC_MMA 1
#endif

QSA_DEVICE float dec_neg_inf() { return __uint_as_float(0xff800000u); }

struct DecBf16 {
  static constexpr bool is_bf16 = true;
  static __device__ __forceinline__ float lo(unsigned w) { return qsa_bf16x2_lo(w); }
  static __device__ __forceinline__ float hi(unsigned w) { return qsa_bf16x2_hi(w); }
  static __device__ __forceinline__ float one(dec_u16 b) { return qsa_bf16_to_f32(b); }
};

struct DecF16 {
  static constexpr bool is_bf16 = false;
  static __device__ __forceinline__ float lo(unsigned w) { return qsa_f16_to_f32((dec_u16)(w & 0xffffu)); }
  static __device__ __forceinline__ float hi(unsigned w) { return qsa_f16_to_f32((dec_u16)(w >> 16)); }
  static __device__ __forceinline__ float one(dec_u16 b) { return qsa_f16_to_f32(b); }
};

// The geometry of one work item, decoded from its index.
struct DecItem {
  int b, i, g, chunk;
  int group;
  long long q_pos;
  int rows;  // valid rows (query heads) of the chunk: min(16, group - 16 chunk)
};

QSA_DEVICE DecItem dec_item(long long item, int q_len, int kv_len, int hq, int hkv) {
  DecItem it;
  it.group = hq / hkv;
  const int nchunk = (it.group + DEC_ROWS - 1) / DEC_ROWS;
  long long x = item;
  it.chunk = (int)(x % nchunk);
  x /= nchunk;
  it.g = (int)(x % hkv);
  x /= hkv;
  it.i = (int)(x % q_len);
  it.b = (int)(x / q_len);
  it.q_pos = (long long)kv_len - q_len + it.i;
  const int left = it.group - DEC_ROWS * it.chunk;
  it.rows = left < DEC_ROWS ? left : DEC_ROWS;
  return it;
}

#if defined(QSA_DEC_MMA)
// A load that bypasses L1 (another CTA's partial, published by its fence and ticket); through
// the u32 form, which the emulator's __ldcg takes.
QSA_DEVICE float dec_ldcg(const float* p) { return __uint_as_float(__ldcg((const unsigned*)p)); }
QSA_DEVICE float4 dec_ldcg4(const float* p) {  // p 16-byte aligned
#if defined(QSA_EMU)
  return make_float4(dec_ldcg(p), dec_ldcg(p + 1), dec_ldcg(p + 2), dec_ldcg(p + 3));
#else
  return __ldcg((const float4*)p);
#endif
}

// The item's unit list, one id slot per lane: `id` the slot's block, `nsub` its units (0 for
// -1, an invisible id or a repeat of an earlier slot), `incl` the inclusive prefix of nsub over
// the lanes; the item's unit count is lane 31's incl.
struct DecList {
  int id, nsub, incl, total;
};

QSA_DEVICE DecList dec_list(const int* __restrict__ ids, const DecItem& it, int q_len, int hkv, int t) {
  const int lane = qsa_lane();
  DecList L;
  L.id = -1;
  if (lane < t) L.id = ids[(((long long)it.b * q_len + it.i) * hkv + it.g) * t + lane];
  bool dup = false;
  for (int u = 0; u < 31; ++u) {  // a repeat of an earlier slot counts once
    const int other = qsa_shfl(L.id, u);
    dup |= u < lane && other == L.id;
  }
  const long long base = (long long)L.id * DEC_BLK;
  const bool ok = L.id >= 0 && base <= it.q_pos && !dup;
  long long n = ok ? (it.q_pos - base) / DEC_KEYS + 1 : 0;
  L.nsub = (int)(n < DEC_BLK / DEC_KEYS ? n : DEC_BLK / DEC_KEYS);
  int incl = L.nsub;
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const int y = qsa_shfl(incl, lane >= off ? lane - off : lane);
    if (lane >= off) incl += y;
  }
  L.incl = incl;
  L.total = qsa_shfl(incl, 31);
  return L;
}

// First key of unit u (u < total): the block of the first lane whose prefix passes u.
QSA_DEVICE long long dec_unit_key(const DecList& L, int u) {
  const unsigned above = qsa_ballot(L.incl > u);
  const int src = __ffs(above) - 1;
  const int id = qsa_shfl(L.id, src);
  const int excl = qsa_shfl(L.incl - L.nsub, src);
  return (long long)id * DEC_BLK + (long long)(u - excl) * DEC_KEYS;
}

// Issue unit `u`'s K and V sub-tiles (16 keys x 256 bytes each) into `stage`; keys past the
// causal edge are zero-filled (p = 0 there, and 0 x a stale NaN would not be 0).
QSA_DEVICE void dec_issue(dec_u16* stage, const dec_u16* __restrict__ k, const dec_u16* __restrict__ v,
                          const DecItem& it, long long key0, int kv_len, int hkv) {
  const int lane = qsa_lane();
#pragma unroll
  for (int c = 0; c < DEC_KEYS * (DEC_D / 8) / 32; ++c) {
    const int e = c * 32 + lane;
    const int r = e / (DEC_D / 8), ch = e % (DEC_D / 8);
    const long long j = key0 + r;
    const bool valid = j <= it.q_pos;
    const long long off = valid ? ((((long long)it.b * kv_len + j) * hkv + it.g) * DEC_D + ch * 8) : 0;
    qsa_cp_async16(stage + r * DEC_STRIDE + ch * 8, k + off, valid ? 16 : 0);
    qsa_cp_async16(stage + DEC_TILE + r * DEC_STRIDE + ch * 8, v + off, valid ? 16 : 0);
  }
  qsa_cp_async_commit();
}

// Wait until at most `pending` committed groups of this thread are still in flight.
QSA_DEVICE void dec_wait(int pending) {
  switch (pending) {
    case 0: qsa_cp_async_wait_group<0>(); break;
    case 1: qsa_cp_async_wait_group<1>(); break;
    case 2: qsa_cp_async_wait_group<2>(); break;
    default: qsa_cp_async_wait_group<3>(); break;
  }
}

template <typename E>
QSA_DEVICE unsigned dec_pack(float lo, float hi) {  // lo -> low half (the lower index)
  return E::is_bf16 ? qsa_pack_bf16x2(lo, hi) : qsa_pack_f16x2(lo, hi);
}

template <typename E>
QSA_DEVICE void dec_mma(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  if (E::is_bf16) qsa_mma_m16n8k16_bf16(c, a, b0, b1);
  else qsa_mma_m16n8k16_f16(c, a, b0, b1);
}

// A fragments of the item's 16 query rows (rows past `rows` are zero), 8 k-steps of 16 dims,
// read straight from global memory (exact: q is E data).
template <typename E>
QSA_DEVICE void dec_load_q(const dec_u16* __restrict__ q, const DecItem& it, int q_len, int hq,
                           unsigned (&qa)[8][4]) {
  const int lane = qsa_lane(), tg = lane / 4, tt = lane % 4;
  const dec_u16* rowp[2];
  bool ok[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = tg + 8 * h;
    ok[h] = r < it.rows;
    const int head = it.g * it.group + it.chunk * DEC_ROWS + (ok[h] ? r : 0);
    rowp[h] = q + (((long long)it.b * q_len + it.i) * hq + head) * DEC_D;
  }
#pragma unroll
  for (int ks = 0; ks < 8; ++ks)
#pragma unroll
    for (int hd = 0; hd < 2; ++hd)  // dims +0 / +8
#pragma unroll
      for (int h = 0; h < 2; ++h)  // rows g / g + 8
        qa[ks][2 * hd + h] = ok[h] ? *(const unsigned*)(rowp[h] + ks * 16 + 8 * hd + 2 * tt) : 0u;
}

// S = q K^T for the 16 keys of a staged sub-tile: sc[n][.] for keys 8 n + 2 tt (+1), rows tg /
// tg + 8. Four independent accumulator chains (n-tile x even / odd k-step), summed after: with
// one or two warps per scheduler an 8-deep mma chain is the unit's critical path (H200,
// 2026-12-02: stages 2-4 all 34.8 us at 4 warps, 8 warps 27.1 us).
template <typename E>
QSA_DEVICE void dec_qk(const unsigned (&qa)[8][4], const dec_u16* ks, int tg, int tt, float (&sc)[2][4]) {
  float sc2[2][4];
#pragma unroll
  for (int nn = 0; nn < 2; ++nn)
#pragma unroll
    for (int e = 0; e < 4; ++e) sc[nn][e] = sc2[nn][e] = 0.f;
#pragma unroll
  for (int kk = 0; kk < 8; kk += 2)
#pragma unroll
    for (int nn = 0; nn < 2; ++nn) {
      const dec_u16* kp = ks + (8 * nn + tg) * DEC_STRIDE + kk * 16 + 2 * tt;
      dec_mma<E>(sc[nn], qa[kk], *(const unsigned*)kp, *(const unsigned*)(kp + 8));
      dec_mma<E>(sc2[nn], qa[kk + 1], *(const unsigned*)(kp + 16), *(const unsigned*)(kp + 24));
    }
#pragma unroll
  for (int nn = 0; nn < 2; ++nn)
#pragma unroll
    for (int e = 0; e < 4; ++e) sc[nn][e] += sc2[nn][e];
}

// O += P V for one sub-tile. P's A fragment is the scores' C layout: a0 (g, 2t) = n0 row g,
// a1 (g + 8, 2t) = n0 row g + 8, a2 (g, 2t + 8) = n1 row g, a3 = n1 row g + 8; P is split into
// 16-bit parts that sum back to it (bf16 hi + mid + lo; f16 hi + lo x 2^12 into acc_lo).
template <typename E>
QSA_DEVICE void dec_pv(const float (&p)[2][4], const dec_u16* vs, int lane, float (&acc)[16][4],
                       float (&acc_lo)[16][4]) {
  unsigned a0[4], a1[4], a2[4];
#pragma unroll
  for (int h4 = 0; h4 < 4; ++h4) {
    const int nn = h4 >> 1, h = h4 & 1;
    const float x = p[nn][2 * h], y = p[nn][2 * h + 1];
    a0[h4] = dec_pack<E>(x, y);
    const float r0 = x - E::lo(a0[h4]), r1 = y - E::hi(a0[h4]);
    if (E::is_bf16) {
      a1[h4] = dec_pack<E>(r0, r1);
      a2[h4] = dec_pack<E>(r0 - E::lo(a1[h4]), r1 - E::hi(a1[h4]));
    } else {
      a1[h4] = dec_pack<E>(r0 * DEC_LO_SCALE, r1 * DEC_LO_SCALE);
      a2[h4] = 0u;
    }
  }
  const int vkey = (lane & 7) + ((lane >> 3) & 1) * 8;
#pragma unroll
  for (int jp = 0; jp < 8; ++jp) {
    unsigned b0, b1, b2, b3;
    qsa_ldmatrix_x4_trans(vs + vkey * DEC_STRIDE + 16 * jp + (lane >> 4) * 8, b0, b1, b2, b3);
    dec_mma<E>(acc[2 * jp], a0, b0, b1);
    dec_mma<E>(acc[2 * jp + 1], a0, b2, b3);
    if (E::is_bf16) {
      dec_mma<E>(acc[2 * jp], a1, b0, b1);
      dec_mma<E>(acc[2 * jp + 1], a1, b2, b3);
      dec_mma<E>(acc[2 * jp], a2, b0, b1);
      dec_mma<E>(acc[2 * jp + 1], a2, b2, b3);
    } else {
      dec_mma<E>(acc_lo[2 * jp], a1, b0, b1);
      dec_mma<E>(acc_lo[2 * jp + 1], a1, b2, b3);
    }
  }
}

// The CTA's merge area, over the rings after the loop: per warp m[16], l[16], O[16][128].
#define DEC_MERGE_FLOATS (2 * DEC_ROWS + DEC_ROWS * DEC_D)

// The cluster merge (sm_90): the item's splits are the CTAs of one cluster, each holding its
// (o, lse) in shared memory at `cres`; after one cluster barrier rank r merges rows r, r + n,
// ... reading every rank's rows through distributed shared memory (no global round trip, no
// ticket), and a second barrier keeps every CTA's shared memory alive until all have read it.
QSA_DEVICE void dec_cluster_merge(const float* cres, float* __restrict__ o, float* __restrict__ lse,
                                  long long row0, int rows, int split, int nsplit) {
#if defined(QSA_HAS_CLUSTERS)
  qsa_cluster_sync();
  for (int e = threadIdx.x; e < DEC_ROWS * DEC_D; e += blockDim.x) {
    const int r = e / DEC_D, d = e % DEC_D;
    if (r % nsplit != split || r >= rows) continue;
    float M = dec_neg_inf();
    for (int c = 0; c < nsplit; ++c) M = fmaxf(M, qsa_cluster_map(cres, c)[DEC_ROWS * DEC_D + r]);
    float sum = 0.f, val = 0.f;
    if (M != dec_neg_inf()) {
      for (int c = 0; c < nsplit; ++c) {
        const float* rc = qsa_cluster_map(cres, c);
        const float w = expf(rc[DEC_ROWS * DEC_D + r] - M);  // -inf: 0
        sum += w;
        val += w * rc[r * DEC_D + d];
      }
    }
    const bool none = !(sum > 0.f);
    o[(row0 + r) * DEC_D + d] = none ? 0.f : val / sum;
    if (d == 0) lse[row0 + r] = none ? dec_neg_inf() : M + logf(sum);
  }
  qsa_cluster_sync();
#else
  // No clusters on this target: the kernel exists (one symbol set for every target) but is
  // never dispatched here; a launch writes NaN to the CTA's rows so a dispatch mistake fails.
  (void)cres;
  for (int e = threadIdx.x; e < DEC_ROWS * DEC_D; e += blockDim.x) {
    const int r = e / DEC_D, d = e % DEC_D;
    if (r % nsplit != split || r >= rows) continue;
    o[(row0 + r) * DEC_D + d] = __uint_as_float(0x7fc00000u);
    if (d == 0) lse[row0 + r] = __uint_as_float(0x7fc00000u);
  }
#endif
}

template <typename E>
QSA_DEVICE void dec_fwd(const dec_u16* __restrict__ q, const dec_u16* __restrict__ k,
                        const dec_u16* __restrict__ v, const int* __restrict__ ids, float* __restrict__ o,
                        float* __restrict__ lse, float* __restrict__ o_part, float* __restrict__ lse_part,
                        unsigned* __restrict__ done, int batch, int q_len, int kv_len, int hq, int hkv, int t,
                        float scale, int stages, int pair, int merge, long long item, int split, int nsplit) {
  QSA_DYNAMIC_SHARED(smem_raw);
  __shared__ int last_flag;
  const int lane = qsa_lane(), warp = threadIdx.x / 32, nwarp = blockDim.x / 32;
  const int tg = lane / 4, tt = lane % 4;
  const DecItem it = dec_item(item, q_len, kv_len, hq, hkv);
  const long long rows_total = (long long)batch * q_len * hq;

  // q's fragments first: their loads overlap the ids' round trip.
  unsigned qa[8][4];
  dec_load_q<E>(q, it, q_len, hq, qa);
  // This warp's units: the split's contiguous share, then the warp's.
  const DecList L = dec_list(ids, it, q_len, hkv, t);
  const int per_split = (L.total + nsplit - 1) / nsplit;
  const int s_beg = min(L.total, split * per_split), s_end = min(L.total, s_beg + per_split);
  const int per_warp = (s_end - s_beg + nwarp - 1) / nwarp;
  const int beg = min(s_end, s_beg + warp * per_warp), end = min(s_end, beg + per_warp);
  const int n = end - beg;
  dec_u16* ring = (dec_u16*)smem_raw + (long long)warp * stages * (2 * DEC_TILE);

  float m[2] = {dec_neg_inf(), dec_neg_inf()};  // rows g, g + 8 (this lane's quad agrees)
  float l[2] = {0.f, 0.f};                       // this lane's part of the row sums
  float acc[16][4];
#pragma unroll
  for (int j = 0; j < 16; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = 0.f;

  float acc_lo[16][4];  // f16's scaled low part of P
#pragma unroll
  for (int j = 0; j < 16; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc_lo[j][e] = 0.f;
  const bool live[2] = {tg < it.rows, tg + 8 < it.rows};

  // Prologue: `stages` groups in flight (empty groups past the warp's units keep the count).
  for (int s = 0; s < stages; ++s) {
    if (s < n) dec_issue(ring + s * 2 * DEC_TILE, k, v, it, dec_unit_key(L, beg + s), kv_len, hkv);
    else qsa_cp_async_commit();
  }
  // With `pair`, two units per iteration (32 keys, one softmax step): twice the independent
  // mma chains per warp where one or two warps per scheduler leave latency exposed. bf16 only:
  // f16's second accumulator set leaves no registers for it (ptxas spills), so f16 ignores it.
  const bool pairs = pair && E::is_bf16;
  const int step = pairs ? 2 : 1;
  for (int u = 0; u < n; u += step) {
    const bool two = pairs && u + 1 < n;
    const long long key0 = dec_unit_key(L, beg + u);
    const long long key1 = two ? dec_unit_key(L, beg + u + 1) : key0;
    dec_wait(stages - step);
    QSA_SYNCWARP();
    const dec_u16* ks0 = ring + (u % stages) * 2 * DEC_TILE;
    const dec_u16* ks1 = ring + ((u + 1) % stages) * 2 * DEC_TILE;
    float sc[2][4], sd[2][4];
    dec_qk<E>(qa, ks0, tg, tt, sc);
    if (two) dec_qk<E>(qa, ks1, tg, tt, sd);
    // Mask, online softmax (row max over the quad and both units), rescale.
    float alpha[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = dec_neg_inf();
#pragma unroll
      for (int nn = 0; nn < 2; ++nn)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int off = 8 * nn + 2 * tt + e;
          const float s0 = live[h] && key0 + off <= it.q_pos ? sc[nn][2 * h + e] * scale : dec_neg_inf();
          const float s1 = two && live[h] && key1 + off <= it.q_pos ? sd[nn][2 * h + e] * scale : dec_neg_inf();
          sc[nn][2 * h + e] = s0;
          sd[nn][2 * h + e] = s1;
          mx = fmaxf(mx, fmaxf(s0, s1));
        }
      mx = fmaxf(mx, qsa_shfl_xor(mx, 1));
      mx = fmaxf(mx, qsa_shfl_xor(mx, 2));
      const float m_new = fmaxf(m[h], mx);
      alpha[h] = m_new == dec_neg_inf() ? 1.f : expf(m[h] - m_new);  // m = -inf: alpha = 0
      float sum = 0.f;
#pragma unroll
      for (int nn = 0; nn < 2; ++nn)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float p0 = m_new == dec_neg_inf() ? 0.f : expf(sc[nn][2 * h + e] - m_new);
          const float p1 = m_new == dec_neg_inf() ? 0.f : expf(sd[nn][2 * h + e] - m_new);
          sc[nn][2 * h + e] = p0;
          sd[nn][2 * h + e] = p1;
          sum += p0 + p1;
        }
      l[h] = l[h] * alpha[h] + sum;
      m[h] = m_new;
    }
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      acc[j][0] *= alpha[0];
      acc[j][1] *= alpha[0];
      acc[j][2] *= alpha[1];
      acc[j][3] *= alpha[1];
      acc_lo[j][0] *= alpha[0];
      acc_lo[j][1] *= alpha[0];
      acc_lo[j][2] *= alpha[1];
      acc_lo[j][3] *= alpha[1];
    }
    dec_pv<E>(sc, ks0 + DEC_TILE, lane, acc, acc_lo);
    if (two) dec_pv<E>(sd, ks1 + DEC_TILE, lane, acc, acc_lo);
    QSA_SYNCWARP();  // every lane is done with these stages before they are refilled
    for (int x = 0; x < step; ++x) {
      const int w = u + x;
      if (w < n && w + stages < n) {
        dec_issue(ring + (w % stages) * 2 * DEC_TILE, k, v, it, dec_unit_key(L, beg + w + stages), kv_len, hkv);
      } else {
        qsa_cp_async_commit();
      }
    }
  }
  dec_wait(0);
  if (!E::is_bf16) {
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[j][e] += acc_lo[j][e] * (1.f / DEC_LO_SCALE);
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {  // whole-row sums over the quad
    l[h] += qsa_shfl_xor(l[h], 1);
    l[h] += qsa_shfl_xor(l[h], 2);
  }

  // Merge the CTA's warps: each writes (m, l, O unnormalised) over its own ring.
  QSA_SYNC();  // every warp is out of its ring (and its copies have landed)
  float* mine = (float*)smem_raw + (long long)warp * DEC_MERGE_FLOATS;
  if (tt == 0) {
    mine[tg] = m[0];
    mine[tg + 8] = m[1];
    mine[DEC_ROWS + tg] = l[0];
    mine[DEC_ROWS + tg + 8] = l[1];
  }
  float* mo = mine + 2 * DEC_ROWS;
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    *(float2*)(mo + tg * DEC_D + 8 * j + 2 * tt) = make_float2(acc[j][0], acc[j][1]);
    *(float2*)(mo + (tg + 8) * DEC_D + 8 * j + 2 * tt) = make_float2(acc[j][2], acc[j][3]);
  }
  QSA_SYNC();
  const float* all = (const float*)smem_raw;
  // The CTA's (o, lse): final with one split; a partial in the combine layout; or, with the
  // cluster merge, in shared memory after the warps' areas ([16][128] o, then [16] lse).
  const bool in_cluster = merge == DEC_MERGE_CLUSTER;
  float* cres = (float*)smem_raw + nwarp * DEC_MERGE_FLOATS;
  float* out_o = nsplit > 1 ? o_part + (long long)split * rows_total * DEC_D : o;
  float* out_l = nsplit > 1 ? lse_part + (long long)split * rows_total : lse;
  const long long row0 = ((long long)it.b * q_len + it.i) * hq + it.g * it.group + it.chunk * DEC_ROWS;
  // Per row, once: warp w's weight exp(m_w - M) / L over its own m slot (read only by this
  // thread before the barrier), the row's lse in its l slot of warp 0.
  if (threadIdx.x < DEC_ROWS) {
    const int r = threadIdx.x;
    float* a = (float*)smem_raw;
    float M = dec_neg_inf();
    for (int w = 0; w < nwarp; ++w) M = fmaxf(M, a[w * DEC_MERGE_FLOATS + r]);
    float sum = 0.f;
    for (int w = 0; w < nwarp; ++w) {
      const float wt = M == dec_neg_inf() ? 0.f : expf(a[w * DEC_MERGE_FLOATS + r] - M);  // empty: 0
      a[w * DEC_MERGE_FLOATS + r] = wt;
      sum += wt * a[w * DEC_MERGE_FLOATS + DEC_ROWS + r];
    }
    const bool none = !(sum > 0.f);
    for (int w = 0; w < nwarp; ++w) a[w * DEC_MERGE_FLOATS + r] = none ? 0.f : a[w * DEC_MERGE_FLOATS + r] / sum;
    a[DEC_ROWS + r] = none ? dec_neg_inf() : M + logf(sum);  // warp 0's l slot, read below
  }
  QSA_SYNC();
  for (int e = threadIdx.x; e < DEC_ROWS * DEC_D; e += blockDim.x) {
    const int r = e / DEC_D, d = e % DEC_D;
    if (r >= it.rows) continue;
    float val = 0.f;
    for (int w = 0; w < nwarp; ++w) {
      const float* ws = all + w * DEC_MERGE_FLOATS;
      val += ws[r] * ws[2 * DEC_ROWS + r * DEC_D + d];
    }
    const float L = all[DEC_ROWS + r];
    if (in_cluster) {
      cres[r * DEC_D + d] = val;
      if (d == 0) cres[DEC_ROWS * DEC_D + r] = L;
    } else {
      out_o[(row0 + r) * DEC_D + d] = val;
      if (d == 0) out_l[row0 + r] = L;
    }
  }
  if (in_cluster) {
    dec_cluster_merge(cres, o, lse, row0, it.rows, split, nsplit);
    return;
  }
  if (nsplit == 1 || merge == 0) return;

  // In-kernel merge: the item's last CTA to finish combines the splits' partials
  // (threadFenceReduction pattern; the ticket is reset for the next call).
  __threadfence();
  QSA_SYNC();
  if (threadIdx.x == 0) {
    const unsigned ticket = atomicAdd(&done[item], 1u);
    last_flag = ticket == (unsigned)nsplit - 1;
    if (last_flag) done[item] = 0u;
  }
  QSA_SYNC();
  if (!last_flag) return;
  __threadfence();
  // Latency first (this is the one-query path's tail): every partial lse in one round trip
  // into a weight table over the free rings, the weights by 16 threads, then every o load of
  // a thread independent of the others. ws[sp][r] = exp(lse - M_r); M_r, L_r after the table.
  float* ws = (float*)smem_raw;
  float* wm = ws + nsplit * DEC_ROWS;
  float* wl = wm + DEC_ROWS;
  for (int e = threadIdx.x; e < nsplit * DEC_ROWS; e += blockDim.x) {
    const int sp = e / DEC_ROWS, r = e % DEC_ROWS;
    ws[e] = r < it.rows ? dec_ldcg(lse_part + sp * rows_total + row0 + r) : dec_neg_inf();
  }
  QSA_SYNC();
  if (threadIdx.x < DEC_ROWS) {
    const int r = threadIdx.x;
    float M = dec_neg_inf();
    for (int sp = 0; sp < nsplit; ++sp) M = fmaxf(M, ws[sp * DEC_ROWS + r]);
    float sum = 0.f;
    for (int sp = 0; sp < nsplit; ++sp) {
      const float w = M == dec_neg_inf() ? 0.f : expf(ws[sp * DEC_ROWS + r] - M);  // -inf: 0
      ws[sp * DEC_ROWS + r] = w;
      sum += w;
    }
    wm[r] = M;
    wl[r] = sum;
  }
  QSA_SYNC();
  // Each thread owns up to DEC_MERGE_OUT float4 outputs (16 rows x 32 float4 per item) and
  // loads DEC_MERGE_OUT x DEC_MERGE_BATCH partial float4s before it adds any: one round trip
  // per batch of splits (one query, 8 splits, 256 threads: one).
  for (int e0 = threadIdx.x; e0 < DEC_ROWS * (DEC_D / 4); e0 += DEC_MERGE_OUT * blockDim.x) {
    float4 val[DEC_MERGE_OUT];
#pragma unroll
    for (int j = 0; j < DEC_MERGE_OUT; ++j) val[j] = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int sp0 = 0; sp0 < nsplit; sp0 += DEC_MERGE_BATCH) {
      float4 x[DEC_MERGE_OUT][DEC_MERGE_BATCH];
#pragma unroll
      for (int j = 0; j < DEC_MERGE_OUT; ++j)
#pragma unroll
        for (int b = 0; b < DEC_MERGE_BATCH; ++b) {
          const int e = e0 + j * blockDim.x, r = e / (DEC_D / 4), sp = sp0 + b;
          const bool on = e < DEC_ROWS * (DEC_D / 4) && r < it.rows && sp < nsplit;
          x[j][b] = on ? dec_ldcg4(o_part + (sp * rows_total + row0 + r) * DEC_D + 4 * (e % (DEC_D / 4)))
                       : make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
      for (int j = 0; j < DEC_MERGE_OUT; ++j)
#pragma unroll
        for (int b = 0; b < DEC_MERGE_BATCH; ++b) {
          const int e = e0 + j * blockDim.x, r = (e / (DEC_D / 4)) % DEC_ROWS, sp = sp0 + b;
          const float w = sp < nsplit ? ws[sp * DEC_ROWS + r] : 0.f;
          val[j].x += w * x[j][b].x;
          val[j].y += w * x[j][b].y;
          val[j].z += w * x[j][b].z;
          val[j].w += w * x[j][b].w;
        }
    }
#pragma unroll
    for (int j = 0; j < DEC_MERGE_OUT; ++j) {
      const int e = e0 + j * blockDim.x, r = e / (DEC_D / 4), d = 4 * (e % (DEC_D / 4));
      if (e >= DEC_ROWS * (DEC_D / 4) || r >= it.rows) continue;
      const long long row = row0 + r;
      const float sum = wl[r];
      const bool none = !(sum > 0.f);
      const float inv = none ? 0.f : 1.f / sum;
      *(float4*)(o + row * DEC_D + d) =
          make_float4(val[j].x * inv, val[j].y * inv, val[j].z * inv, val[j].w * inv);
      if (d == 0) lse[row] = none ? dec_neg_inf() : wm[r] + logf(sum);
    }
  }
}
#else
// Dispatched only where tensor cores are built (src/dispatch/attention_decode.rs); a launch
// elsewhere writes NaN to the item's rows, so that a dispatch mistake fails every check.
template <typename E>
QSA_DEVICE void dec_fwd(const dec_u16* __restrict__ q, const dec_u16* __restrict__ k,
                        const dec_u16* __restrict__ v, const int* __restrict__ ids, float* __restrict__ o,
                        float* __restrict__ lse, float* __restrict__ o_part, float* __restrict__ lse_part,
                        unsigned* __restrict__ done, int batch, int q_len, int kv_len, int hq, int hkv, int t,
                        float scale, int stages, int pair, int merge, long long item, int split, int nsplit) {
  (void)q, (void)k, (void)v, (void)ids, (void)o_part, (void)lse_part, (void)done, (void)batch, (void)t;
  (void)scale, (void)stages, (void)pair, (void)merge, (void)split, (void)nsplit;
  const DecItem it = dec_item(item, q_len, kv_len, hq, hkv);
  const long long row0 = ((long long)it.b * q_len + it.i) * hq + it.g * it.group + it.chunk * DEC_ROWS;
  for (int e = threadIdx.x; e < it.rows * DEC_D; e += blockDim.x) {
    o[row0 * DEC_D + e] = __uint_as_float(0x7fc00000u);
    if (e % DEC_D == 0) lse[row0 + e / DEC_D] = __uint_as_float(0x7fc00000u);
  }
}
#endif

// Instantiated by kernels/selection_attention.cu, so the kernels belong to its code object.
#define QSA_ATTN_DECODE_INSTANCES(SUF, E)                                                               \
  QSA_KERNEL void __launch_bounds__(256)                                                                \
      qsa_attn_dec_fwd_##SUF(const dec_u16* q, const dec_u16* k, const dec_u16* v, const int* ids,    \
                             float* o, float* lse, float* o_part, float* lse_part, unsigned* done,     \
                             int batch, int q_len, int kv_len, int hq, int hkv, int t, float scale,    \
                             int stages, int pair, int merge) {                                        \
    dec_fwd<E>(q, k, v, ids, o, lse, o_part, lse_part, done, batch, q_len, kv_len, hq, hkv, t, scale,  \
               stages, pair, merge, blockIdx.x, blockIdx.y, gridDim.y);                                \
  }

// The cluster-merge kernel (sm_90): grid (items x DEC_CLUSTER), clusters of DEC_CLUSTER along x,
// one split per CTA; shared memory also holds the CTA's (o, lse) after the warps' areas.
#define DEC_CLUSTER 8
#if defined(QSA_HAS_CLUSTERS)
#define DEC_CLUSTER_ATTR QSA_CLUSTER_DIMS(DEC_CLUSTER)
#define DEC_CLUSTER_RANK() qsa_cluster_rank()
#else  // the NaN-writing stand-in (dec_cluster_merge)
#define DEC_CLUSTER_ATTR
#define DEC_CLUSTER_RANK() (blockIdx.x % DEC_CLUSTER)
#endif
#define QSA_ATTN_DECODE_CLUSTER_INSTANCES(SUF, E)                                                       \
  QSA_KERNEL DEC_CLUSTER_ATTR void __launch_bounds__(256)                                               \
      qsa_attn_dec_cl_fwd_##SUF(const dec_u16* q, const dec_u16* k, const dec_u16* v, const int* ids, \
                                float* o, float* lse, int batch, int q_len, int kv_len, int hq,        \
                                int hkv, int t, float scale, int stages, int pair) {                   \
    dec_fwd<E>(q, k, v, ids, o, lse, nullptr, nullptr, nullptr, batch, q_len, kv_len, hq, hkv, t,     \
               scale, stages, pair, DEC_MERGE_CLUSTER, blockIdx.x / DEC_CLUSTER, DEC_CLUSTER_RANK(),  \
               DEC_CLUSTER);                                                                           \
  }
