// NSA selection attention, prefill forward with one warp per work item:
// qsa_attn_warp_fwd_{bf16,f16} and qsa_attn_warp_h_fwd_{bf16,f16} (sm_80+ CUDA, mma.sync).
// Included by selection_attention.cu after the ring forward (common/attention_ring_fwd.h), whose
// P-part split (ring_p_parts), slack (ring_slack), swizzled row layout (RingLayout<true>) and
// group wait (ring_wait) it reuses.
//
// Why (issue 13; docs/results/session7-2026-12-02/profiles/): the ring forward is latency-bound
// at ~650 instructions per warp and 64-key block with four warps per block (2,540 per block and
// work item), a CTA barrier per block and a cross-warp merge at the end; fla's parallel_nsa runs
// one warp per (token, kv head) at 1,276 instructions per block and no barrier, in 20.9 ms
// against our 25.6. Here each warp owns one work item alone:
//   - item = (batch, token, kv head, chunk of 16 query heads): 16 rows, one token, so every row
//     sees the same keys (groups < 16: the rows past the group are computed on zero q and not
//     stored; groups > 16: one item per 16-head chunk);
//   - the block list lives in registers: lane s holds slot s of the token's t <= 32 ids (the
//     host dispatches t > 32 elsewhere), de-duplicated by shuffles, so no shared list and no
//     CTA barrier;
//   - K and V pieces (the 64 rows of one block, 16 KB: qsa_attn_warp_fwd_*; or 32 rows, 8 KB:
//     qsa_attn_warp_h_fwd_*, twice the pieces in flight in the same shared memory; 256-byte
//     rows with 16-byte chunk ch of row r at ch ^ (r & 7)) stream through the warp's own ring of
//     `nstage` slots by cp.async; the only synchronisation is cp.async.wait_group + __syncwarp;
//   - QK^T for all 64 keys (8 n-tiles x 8 k16 steps = 64 mma, K's fragments by 32 ldmatrix.x4),
//     the online softmax of 16 rows in registers (base-2 exponent, the ring's lazy rescale),
//     then P.V (4 k16 steps x 16 dim tiles, V's fragments by 32 ldmatrix.x4.trans) with P split
//     into `nparts` 16-bit parts (ring_p_parts); the warps of a CTA share nothing but the launch.
// Predicted per warp and 64-key block (bf16, 3 parts), before writing it: 64 + 192 mma, 64
// ldmatrix, 64 cp.async (+ ~64 address adds), ~180 softmax and ~176 part-split instructions:
// ~800, and ~200 registers (O 64, q 32, S / P 32). Built (cuobjdump -sass of the sm_90 cubin,
// nvcc 13.0.88, 2026-12-02): ~1,030 per block (K piece: wait ~20, copy ~95, QK^T 124, softmax
// 162; V piece: wait ~20, copy ~95, P.V 481 of which 192 HMMA and ~240 the part split and
// ldmatrix addresses, rematerialised at 248 registers), against the ring's ~2,540 for the same
// block and item and fla's ~1,276 (profiles/attn_ring_fwd.txt, fla.txt). K/V bytes from L2
// stay the same (32 KB per block and item, 137 GB at prefill B=4, T=16K): at the ~11 TB/s the
// ring's profile implies (72% = 8 TB/s) that alone is ~12.5 ms, so the bytes in flight per SM,
// not the instructions, should bound this kernel (a prediction, not measured).
#pragma once

// Slots per warp (ring_wait waits for at most five later groups).
#define WARP_FWD_MAX_STAGES 6
// Warps per CTA the kernel is built for (its __launch_bounds__): 8 x 255 registers fit the 64 K
// of an SM, so the bound never forces the compiler under 255.
#define WARP_FWD_MAX_WARPS 8
// Lanes hold the list: at most one id slot per lane.
#define WARP_FWD_MAX_T 32
// Rows of one item (the mma's M).
#define WARP_FWD_ROWS 16

#if defined(QSA_ATTN_MMA)
// The geometry of one warp's item, decoded from its index: chunk fastest, then kv head, then
// token, then batch (the staged kernels' token-major order: the warps resident at once read
// one batch's K/V, which fits the L2).
struct WarpItem {
  int b, i, g, chunk, rows;
  int q_pos;  // kv_len - q_len + i < kv_len: an int
};

QSA_DEVICE WarpItem warp_item(long long item, int q_len, int kv_len, int group, int hkv) {
  WarpItem w;
  const int nchunk = (group + WARP_FWD_ROWS - 1) / WARP_FWD_ROWS;
  long long x = item;
  w.chunk = (int)(x % nchunk);
  x /= nchunk;
  w.g = (int)(x % hkv);
  x /= hkv;
  w.i = (int)(x % q_len);
  w.b = (int)(x / q_len);
  w.q_pos = kv_len - q_len + w.i;
  const int left = group - WARP_FWD_ROWS * w.chunk;
  w.rows = left < WARP_FWD_ROWS ? left : WARP_FWD_ROWS;
  return w;
}

// This lane's slot of the item's list: the id, and whether it is the first occurrence of a
// visible block (id >= 0, first key at or before q_pos). Returns the ballot of such slots.
QSA_DEVICE unsigned warp_list(const int* __restrict__ ids, const WarpItem& w, int q_len, int hkv, int t, int lane,
                              int& id) {
  id = -1;
  if (lane < t) id = ids[(((long long)w.b * q_len + w.i) * hkv + w.g) * t + lane];
  bool dup = false;
  for (int u = 0; u < WARP_FWD_MAX_T - 1; ++u) {  // a repeat of an earlier slot counts once
    const int other = qsa_shfl(id, u);
    dup |= u < lane && other == id;
  }
  const bool ok = id >= 0 && (long long)id * ATT_BLK <= w.q_pos && !dup;
  return qsa_ballot(ok);
}

// Copy one piece (the K or V rows of keys sub * KEYS .. + KEYS - 1 of block `id`) into a slot
// and commit it as one group. Lane copies 16-byte chunk lane % 16 of rows lane / 16 + 2 u
// (u < KEYS / 2): a half warp reads one whole
// 256-byte row, eight lanes write one whole 128-byte line of the slot. Rows 8 apart keep their
// swizzle, so the slot side is four lane offsets (`dst`, warp_dst) and immediates. Rows at or
// past kv_len (only a list's last block) are zero-filled, reading nothing (a masked key's p is
// 0, and 0 x a stale NaN would not be).
template <int KEYS>
QSA_DEVICE void warp_issue(u16* slot, const int (&dst)[4], const u16* __restrict__ src, int b, int g, int id,
                           int sub, int kv_len, int hkv, int lane) {
  const int ch = lane % 16, r0 = lane / 16;
  const long long first = (long long)id * ATT_BLK + sub * KEYS;
  const long long row_stride = (long long)hkv * ATT_D;
  const u16* p = src + (((long long)b * kv_len + first + r0) * hkv + g) * ATT_D + ch * 8;
  const int nv = kv_len - first < KEYS ? (int)(kv_len - first) : KEYS;
  if (nv >= KEYS) {  // the common case: no predicate
#pragma unroll
    for (int u = 0; u < KEYS / 2; ++u)
      qsa_cp_async16(slot + dst[u % 4] + (u / 4) * 8 * ATT_D, p + 2 * u * row_stride, 16);
  } else {
#pragma unroll
    for (int u = 0; u < KEYS / 2; ++u) {
      const bool valid = r0 + 2 * u < nv;
      qsa_cp_async16(slot + dst[u % 4] + (u / 4) * 8 * ATT_D, valid ? p + 2 * u * row_stride : p, valid ? 16 : 0);
    }
  }
  qsa_cp_async_commit();
}

// warp_issue's slot offsets (u16) of rows lane / 16 + 2 u, u < 4, chunk lane % 16, swizzled.
QSA_DEVICE void warp_dst(int lane, int (&dst)[4]) {
#pragma unroll
  for (int u = 0; u < 4; ++u) dst[u] = RingLayout<true>::at(lane / 16 + 2 * u, lane % 16);
}

// q's 16 rows (the chunk's heads of token i) as A fragments; rows past the chunk's heads are 0.
QSA_DEVICE void warp_load_q(const u16* __restrict__ q, const WarpItem& w, int q_len, int hq, int group, int lane,
                            unsigned (&qa)[8][4]) {
  const int gr = lane / 4, tc = lane % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {  // rows gr, gr + 8
    const int r = gr + 8 * h;
    const bool valid = r < w.rows;
    const u16* row =
        q + (((long long)w.b * q_len + w.i) * hq + w.g * group + w.chunk * WARP_FWD_ROWS + (valid ? r : 0)) * ATT_D;
#pragma unroll
    for (int ks = 0; ks < 8; ++ks)
#pragma unroll
      for (int half = 0; half < 2; ++half)  // dims +0 / +8
        qa[ks][2 * half + h] = valid ? *(const unsigned*)(row + ks * 16 + 8 * half + 2 * tc) : 0u;
  }
}

// sc[n][.] = q . K for keys 8 n + (2t, 2t+1) (n < 8), rows g / g + 8: 8 independent
// accumulator chains of 8 mma. K's B fragments by ldmatrix.x4 from the swizzled slot: matrix
// lm of keys 8 n + lr is chunk 4 m + lm (the k16 steps 2 m, 2 m + 1), stored at chunk
// (4 m + lm) ^ lr = ((4 (m & 1) + lm) ^ lr) + 8 (m >> 1): two lane offsets (kofs) and
// immediates.
// NT = 4 (32-key pieces) keeps a second set of accumulators for the odd k16 steps: 8 chains
// of 4 mma instead of 4 of 8.
template <typename E, int NT>
QSA_DEVICE void warp_qk(const unsigned (&qa)[8][4], const u16* ks, const int (&kofs)[2], float (&sc)[NT][4]) {
  constexpr bool ODD = NT < 8;
  float odd[NT][4];
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      sc[n][e] = 0.f;
      odd[n][e] = 0.f;
    }
#pragma unroll
  for (int m = 0; m < 4; ++m)
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      unsigned b[4];
      qsa_ldmatrix_x4(ks + kofs[m & 1] + 8 * n * ATT_D + 64 * (m >> 1), b[0], b[1], b[2], b[3]);
      tc_mma<E>(sc[n], qa[2 * m], b[0], b[1]);
      tc_mma<E>(ODD ? odd[n] : sc[n], qa[2 * m + 1], b[2], b[3]);
    }
  if constexpr (ODD) {
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) sc[n][e] += odd[n][e];
  }
}

// warp_qk's lane offsets (u16): row lr = lane & 7, chunks (lm ^ lr) and ((4 + lm) ^ lr).
QSA_DEVICE void warp_kofs(int lane, int (&kofs)[2]) {
  const int lr = lane & 7, lm = lane >> 3;
  kofs[0] = lr * ATT_D + (lm ^ lr) * 8;
  kofs[1] = lr * ATT_D + ((4 + lm) ^ lr) * 8;
}

// The online softmax of one block for the warp's 16 rows: sc (q . K, C layout) becomes P in
// place; m (log2 units, quad-uniform), l (this lane's partial sums) and O (acc) are updated.
// scale2 >= 0 (warp_fwd folds a negative scale's sign into q), so the row max is taken over
// the raw scores and p = 2^(s scale2 - m) is one FFMA and one MUFU.EX2 (ftz: a p under 2^-126 of the
// running max is 0, far below the gate). MASKED (the block holding q_pos; every row is the same
// token, so the mask is per key): keys past `lim` = q_pos - the block's first key are out of the
// max and get p = 0. The running max moves only past `slack` (ring_softmax's lazy rescale; 0:
// exact), and O is rescaled only when some row of the warp moved.
template <bool MASKED, int NT>
QSA_DEVICE void warp_softmax(int lim, float scale2, float slack, int lane, float (&sc)[NT][4], float (&m)[2],
                             float (&l)[2], float (&acc)[16][4]) {
  const int tc = lane % 4;
  float alpha[2];
  bool moved_any = false;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mx = qsa_neg_inf();
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e)
        if (!MASKED || 8 * n + 2 * tc + e <= lim) mx = fmaxf(mx, sc[n][2 * h + e]);
    mx = fmaxf(mx, qsa_shfl_xor(mx, 1));
    mx = fmaxf(mx, qsa_shfl_xor(mx, 2));
    // The piece's first key is visible to every row (the walk skips pieces past q_pos), so mx
    // is finite; m = -inf before the
    // first block moves it (alpha = 0, O and l still 0).
    const float mx2 = mx * scale2;
    const bool moved = mx2 > m[h] + slack;
    const float m_new = moved ? mx2 : m[h];
    alpha[h] = moved ? qsa_ex2_ftz(m[h] - m_new) : 1.f;
    moved_any |= moved;
    float sum = 0.f;
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float p = qsa_ex2_ftz(fmaf(sc[n][2 * h + e], scale2, -m_new));
        if (MASKED && 8 * n + 2 * tc + e > lim) p = 0.f;
        sc[n][2 * h + e] = p;
        sum += p;
      }
    l[h] = l[h] * alpha[h] + sum;
    m[h] = m_new;
  }
  if (qsa_ballot(moved_any)) {  // warp-uniform
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[j][e] *= alpha[e >> 1];
  }
}

// acc += P (16 rows x 64 keys, sc's C layout: n-tiles 2 j, 2 j + 1 are the A fragment of k16
// step j) x V (the swizzled slot), all 128 dims; P in nparts 16-bit parts (ring_p_parts; f16:
// two parts of P * 2^14, nparts ignored). V's B fragments by ldmatrix.x4.trans: this lane's
// row (key) 16 j + kr + 8 ((lane >> 3) & 1), chunk 2 jp + h (h = lane >> 4), stored at
// (2 jp + h) ^ kr = ((2 (jp & 3) + h) ^ kr) + 8 (jp >> 2): four lane offsets (vofs) and
// immediates.
template <typename E, int NT>
QSA_DEVICE void warp_pv(const float (&sc)[NT][4], const u16* vs, const int (&vofs)[4], bool three_parts,
                        float (&acc)[16][4]) {
#pragma unroll
  for (int j = 0; j < NT / 2; ++j) {
    float pj[2][4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      pj[0][e] = sc[2 * j][e];
      pj[1][e] = sc[2 * j + 1][e];
    }
    unsigned a0[4], a1[4], a2[4];
    ring_p_parts<E>(pj, a0, a1, a2);
#pragma unroll
    for (int jp = 0; jp < ATT_D / 16; ++jp) {
      unsigned b0, b1, b2, b3;
      qsa_ldmatrix_x4_trans(vs + vofs[jp & 3] + 16 * j * ATT_D + 64 * (jp >> 2), b0, b1, b2, b3);
      tc_mma<E>(acc[2 * jp], a0, b0, b1);
      tc_mma<E>(acc[2 * jp + 1], a0, b2, b3);
      tc_mma<E>(acc[2 * jp], a1, b0, b1);
      tc_mma<E>(acc[2 * jp + 1], a1, b2, b3);
      if (E::is_bf16 && three_parts) {
        tc_mma<E>(acc[2 * jp], a2, b0, b1);
        tc_mma<E>(acc[2 * jp + 1], a2, b2, b3);
      }
    }
  }
}

// warp_pv's lane offsets (u16).
QSA_DEVICE void warp_vofs(int lane, int (&vofs)[4]) {
  const int kr = lane & 7, h = lane >> 4;
  const int row = (kr + ((lane >> 3) & 1) * 8) * ATT_D;
#pragma unroll
  for (int q4 = 0; q4 < 4; ++q4) vofs[q4] = row + ((2 * q4 + h) ^ kr) * 8;
}

// o, lse of the item's valid rows: O / l (f16: scaled back by 2^-14), lse = m ln 2 + ln l;
// a row that saw no key gets o = 0, lse = -inf.
template <typename E>
QSA_DEVICE void warp_store(const WarpItem& w, int q_len, int hq, int group, int lane, const float (&m)[2],
                           const float (&l)[2], const float (&acc)[16][4], float* __restrict__ o,
                           float* __restrict__ lse) {
  const int gr = lane / 4, tc = lane % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = gr + 8 * h;
    float lsum = l[h] + qsa_shfl_xor(l[h], 1);
    lsum += qsa_shfl_xor(lsum, 2);
    if (r >= w.rows) continue;
    const bool none = !(lsum > 0.f);
    const float inv = none ? 0.f : (E::is_bf16 ? 1.f : 1.f / RING_F16_PSCALE) / lsum;
    const long long row = ((long long)w.b * q_len + w.i) * hq + w.g * group + w.chunk * WARP_FWD_ROWS + r;
    float* orow = o + row * ATT_D + 2 * tc;
#pragma unroll
    for (int j = 0; j < 16; ++j) *(float2*)(orow + 8 * j) = make_float2(acc[j][2 * h] * inv, acc[j][2 * h + 1] * inv);
    if (tc == 0) lse[row] = none ? qsa_neg_inf() : m[h] * 0.6931471805599453f + logf(lsum);  // m in log2 units
  }
}

// One warp per item; `nstage` slots (2 .. WARP_FWD_MAX_STAGES) of KEYS rows per warp in the
// dynamic shared memory, warp w's at w * nstage slots. The item's pieces: for each visible
// block, each of its KEYS-key parts that holds a key at or before q_pos (64-key pieces: the
// block; 32-key pieces: one or two), its K rows then its V rows; pieces x + 1 .. x + nstage - 1
// are in flight while piece x is computed. t <= WARP_FWD_MAX_T (the host's dispatch).
template <typename E, int KEYS>
QSA_DEVICE void warp_fwd(const u16* __restrict__ q, const u16* __restrict__ k, const u16* __restrict__ v,
                         const int* __restrict__ ids, float* __restrict__ o, float* __restrict__ lse, int batch,
                         int q_len, int kv_len, int hq, int hkv, int t, float scale, int nstage, int nparts,
                         int lazy) {
  constexpr int NT = KEYS / 8;              // n8 tiles of S per piece
  constexpr int SUBS = ATT_BLK / KEYS;      // pieces per block
  constexpr int SLOT = KEYS * ATT_D;        // u16 per slot
  QSA_DYNAMIC_SHARED(smem_raw);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int group = hq / hkv;
  const long long nitems = (long long)batch * q_len * hkv * ((group + WARP_FWD_ROWS - 1) / WARP_FWD_ROWS);
  const long long item = (long long)blockIdx.x * (blockDim.x / 32) + warp;
  if (item >= nitems) return;  // the whole warp: nothing below waits for other warps
  const WarpItem w = warp_item(item, q_len, kv_len, group, hkv);
  u16* const ring = (u16*)smem_raw + (long long)warp * nstage * SLOT;
  // Logits in log2 units, p = exp2(s2 - m2); a negative scale's sign goes into q (exact: a
  // sign flip of bf16 / f16), so that scale2 >= 0 and the largest score is the largest logit.
  const float scale2 = fabsf(scale) * 1.4426950408889634f;
  const float slack = ring_slack<E>(lazy);

  unsigned qa[8][4];
  warp_load_q(q, w, q_len, hq, group, lane, qa);
  if (scale < 0.f) {
#pragma unroll
    for (int ks = 0; ks < 8; ++ks)
#pragma unroll
      for (int e = 0; e < 4; ++e) qa[ks][e] ^= 0x80008000u;
  }
  int my_id;
  const unsigned visible = warp_list(ids, w, q_len, hkv, t, lane, my_id);
  // Pieces of a visible block: its KEYS-key parts with a key at or before q_pos.
  auto parts_of = [&](int id) {
    const int n = (w.q_pos - id * ATT_BLK) / KEYS + 1;
    return n < SUBS ? n : SUBS;
  };
  int np = (visible >> lane & 1u) ? 2 * parts_of(my_id) : 0;  // K and V of each part
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) np += qsa_shfl_xor(np, off);

  // Two walks over the visible slots' parts: the issue walk runs nstage - 1 pieces ahead.
  struct Walk {
    unsigned left;
    int id, sub, nsub;
  };
  Walk pw = {visible, 0, 0, 0}, gw = {visible, 0, 0, 0};
  auto advance = [&](Walk& wk) {  // to the next part (at an even piece: K first)
    if (++wk.sub >= wk.nsub) {
      const int s = __ffs(wk.left) - 1;
      wk.left &= wk.left - 1;
      wk.id = qsa_shfl(my_id, s);
      wk.sub = 0;
      wk.nsub = parts_of(wk.id);
    }
  };
  int put = 0, get = 0;
  int dst[4], kofs[2], vofs[4];
  warp_dst(lane, dst);
  warp_kofs(lane, kofs);
  warp_vofs(lane, vofs);
  auto issue = [&](int x) {
    if (x < np) {
      if (!(x & 1)) advance(pw);
      warp_issue<KEYS>(ring + put * SLOT, dst, (x & 1) ? v : k, w.b, w.g, pw.id, pw.sub, kv_len, hkv, lane);
    } else {
      qsa_cp_async_commit();  // an empty group keeps group x = piece x
    }
    put = put + 1 == nstage ? 0 : put + 1;
  };
  for (int x = 0; x < nstage - 1; ++x) issue(x);

  float m[2] = {qsa_neg_inf(), qsa_neg_inf()}, l[2] = {0.f, 0.f};
  float acc[16][4];
#pragma unroll
  for (int j = 0; j < 16; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = 0.f;
  float sc[NT][4];  // S, then P, of the current part: from its K piece to its V piece
  for (int x = 0; x < np; ++x) {
    ring_wait(nstage - 2);
    QSA_SYNCWARP();  // piece x landed for every lane; every lane is done with piece x - 1's slot
    issue(x + nstage - 1);  // into piece x - 1's slot
    const u16* buf = ring + get * SLOT;
    get = get + 1 == nstage ? 0 : get + 1;
    if (!(x & 1)) {
      advance(gw);
      warp_qk<E, NT>(qa, buf, kofs, sc);
      const int lim = w.q_pos - gw.id * ATT_BLK - gw.sub * KEYS;  // keys 0 .. lim of the part are visible
      if (lim < KEYS - 1) warp_softmax<true, NT>(lim, scale2, slack, lane, sc, m, l, acc);
      else warp_softmax<false, NT>(lim, scale2, slack, lane, sc, m, l, acc);
    } else {
      warp_pv<E, NT>(sc, buf, vofs, nparts >= 3, acc);
    }
  }
  qsa_cp_async_wait_group<0>();  // no copy outlives the kernel (only empty groups are left)
  warp_store<E>(w, q_len, hq, group, lane, m, l, acc, o, lse);
}

#define QSA_ATTN_WARP_INSTANCE(NAME, SUF, E, KEYS)                                                      \
  QSA_KERNEL void __launch_bounds__(WARP_FWD_MAX_WARPS * 32)                                            \
      qsa_attn_##NAME##_fwd_##SUF(const u16* q, const u16* k, const u16* v, const int* ids, float* o,       \
                              float* lse, int batch, int q_len, int kv_len, int hq, int hkv, int t,     \
                              float scale, int nstage, int nparts, int lazy) {                          \
    warp_fwd<E, KEYS>(q, k, v, ids, o, lse, batch, q_len, kv_len, hq, hkv, t, scale, nstage, nparts, lazy); \
  }
#endif  // QSA_ATTN_MMA
