// NSA selection attention, prefill forward on tensor cores: qsa_attn_ring_fwd_{bf16,f16}, and
// qsa_attn_ring_qs_fwd_{bf16,f16} (q's A fragments from shared memory, four CTAs per SM).
// Included by selection_attention.cu after the staged kernels' helpers (StagedCta, the block
// list, tc_mma / tc_pack, staged_key_limit), which it reuses; it lives in common/ because the emulator's
// build cache is keyed by the source and every common/ header. One CTA per work item of the
// staged geometry (16 rows = query heads x query tokens, one kv head), the same (o, lse) contract and
// the same split-partial layout (gridDim.y > 1 writes partials for qsa_attn_combine).
//
// What limits the staged forward (common/attention_staged_kernels.h, staged_fwd, on the H200 at
// prefill B=4, T=16K, group 16: 38.9 ms, K/V through L2 at ~3.5 TB/s), read from its code:
//   - one K/V buffer (48,080 B shared, 4 CTAs/SM at 121 registers): each block is copied,
//     waited for, then computed, so a CTA has bytes in flight only between its compute phases;
//   - four barriers per 64-key block (copy landed, scores written, softmax done, buffer free)
//     and every row's scores and probabilities through shared memory (S written as f32,
//     read back by the softmax, P read back by PV);
//   - a CTA-wide online softmax: eight lanes per row, a barrier between S and P.
// This kernel removes all three:
//   - a ring of `nstage` K/V block slots (34,816 B each) filled by cp.async: while a CTA
//     computes block i, blocks i+1 .. i+nstage-1 are in flight; one barrier per block (it
//     both publishes block i and frees the slot of block i-1, which is refilled right after);
//   - each warp owns keys 16w .. 16w+15 of every block for QK^T *and* PV, and keeps its own
//     online softmax of its key quarter (FA2's registers-only P: the S accumulators of two n8
//     tiles are the A fragment of one k16 step). The four warps' (m, l, O) are merged once at
//     the end through shared memory (the ring, drained);
//   - q goes from global memory straight into A fragments (no f32 copy in shared memory).
// P.V keeps the staged kernel's precision: P split into 16-bit parts that sum back to it (bf16
// hi + mid + lo, 2^-27 relative; f16 hi + lo of P * 2^14, which keeps lo out of f16's
// subnormal range down to P = 2^-28, one accumulator, scaled back by 2^-14 at the end).
#pragma once

#define RING_MAX_STAGES 7
// Resident CTAs per multiprocessor the registers must allow: three 2-stage CTAs fit the H200's
// shared memory (3 x 69,904 B), so the registers must not be the limit (<= 168 per thread).
#define RING_MIN_CTAS 3
// The q-in-shared-memory instance (qsa_attn_ring_qs_fwd_*): q's A fragments are read from a
// 16-row tile in shared memory each block instead of living in 32 registers, so that four
// CTAs fit the registers (<= 128 per thread) where three slots of K or V rows fit the shared
// memory (4 x 56,848 B at t = 16 on the H200): 16 resident warps per SM instead of 12.
#define RING_QS_MIN_CTAS 4
// q's fragments by ldmatrix in a swizzled qs kernel: 0, since at 128 registers it spilled 24
// bytes (bf16; 16 with 32-bit q reads, so no swizzled qs kernel is instantiated: cargo xtask
// build --target sm_90, 2026-12-02).
#define RING_QS_LDMATRIX 0
// f32 rows of the end-of-kernel merge: +4 floats between rows.
#define RING_O_STRIDE (ATT_D + 4)

// Ring slot rows: KV_STRIDE (136 u16: a 16-byte pad moves row c to bank 4c) or, swizzled
// (SW, QSA_ATTN_RING_LAYOUT=swizzle), ATT_D (256 bytes, no pad) with 16-byte chunk ch of row r
// stored at chunk ch ^ (r & 7): the same conflict-free reads (eight rows of one chunk land in
// eight different chunks of a 128-byte line), 32 KB per block instead of 34 KB, and each
// cp.async group of eight threads writes one whole 128-byte line. (The H200 profile of the
// padded ring: 24 L2 sectors per 16-sector LDGSTS and 10.5 shared wavefronts where 4 would do;
// whether the pad's 16-byte shift of every other row causes both is what this variant asks.)
template <bool SW> struct RingLayout {
  static constexpr int RS = SW ? ATT_D : KV_STRIDE;  // u16 per row
  // u16 offset of 8-element chunk ch of row r within a piece.
  QSA_DEVICE int at(int r, int ch) { return r * RS + (SW ? (ch ^ (r & 7)) : ch) * 8; }
};

// Shared-memory layout: the block list (as the staged kernels build it), then (q_tile) the q
// rows [ATT_ROWS][KV_STRIDE] u16, then the ring. The host computes the same sizes in
// src/dispatch/attention.rs (ring_shared_bytes).
QSA_DEVICE StagedSmem ring_smem(unsigned char* base, int cap, bool q_tile) {
  StagedSmem s = {};
  s.raw = (int*)base;
  s.tmp = (unsigned*)(s.raw + cap);
  s.uid = (int*)(s.tmp + cap);
  s.umask = (unsigned*)(s.uid + cap);
  s.count = (int*)(s.umask + cap);
  const int list_bytes = ((4 * cap + 1) * 4 + 15) / 16 * 16;
  s.kv = (u16*)(base + list_bytes) + (q_tile ? ATT_ROWS * KV_STRIDE : 0);
  return s;
}

// The CTA of blockIdx.x: the staged geometry (StagedCta), in one of two orders. order 0 is
// staged_cta's (the kv heads of one token tile side by side: the CTAs resident at once read
// the K/V of every kv head of their batch, 32 MB at prefill B=4, T=16K, 4 kv heads); order 1
// walks the token tiles of one (batch, kv head) first, as fla's parallel_nsa grid does, so the
// resident CTAs share one kv head's K/V (8 MB there) in the 50 MB L2.
QSA_DEVICE StagedCta ring_cta(int q_len, int hkv, int group, int hc, int qt, int order) {
  if (order == 0) return staged_cta(q_len, hkv, group, hc, qt);
  StagedCta c;
  const int nchunk = group / hc;
  const int ntiles = (q_len + qt - 1) / qt;
  long long x = blockIdx.x;
  c.chunk = (int)(x % nchunk);
  x /= nchunk;
  c.tile = (int)(x % ntiles);
  x /= ntiles;
  c.g = (int)(x % hkv);
  c.b = (int)(x / hkv);
  c.hc = hc;
  c.qt = qt;
  c.group = group;
  return c;
}

// The kernel exists where the staged kernels run on tensor cores (QSA_ATTN_MMA: sm_80+ CUDA);
// src/dispatch/attention.rs (choose_forward) dispatches it nowhere else.
#if defined(QSA_ATTN_MMA)
// This thread's rows r0 + STEP u (u < 8) of one piece, chunk ch, 16 bytes each, into `piece`
// (the slot's K or V rows); src points at row r0's chunk. Rows at or past nv (keys past
// kv_len: only a list's last block) are zero-filled (a masked key's p is 0, and 0 * stale NaN
// would not be), reading nothing. STEP 8: the CTA's 128 threads copy all 64 rows; STEP 2: a
// warp's 32 lanes copy its own 16 rows (ring_issue's warp_local).
template <bool SW, int STEP>
QSA_DEVICE void ring_rows(u16* piece, const u16* src, long long row_stride, int r0, int ch, int nv) {
  using L = RingLayout<SW>;
  // The swizzle keeps r & 7 for rows 8 apart: one offset and immediates after it.
  auto dst = [&](int u) { return STEP % 8 == 0 ? piece + L::at(r0, ch) + u * STEP * L::RS : piece + L::at(r0 + u * STEP, ch); };
  if (nv >= ATT_BLK) {  // the common case: no predicate
#pragma unroll
    for (int u = 0; u < 8; ++u) qsa_cp_async16(dst(u), src + u * STEP * row_stride, 16);
  } else {
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      const bool valid = r0 + u * STEP < nv;
      qsa_cp_async16(dst(u), valid ? src + u * STEP * row_stride : src, valid ? 16 : 0);
    }
  }
}

// Issue the copies of block `id` of (b, g) into one ring slot and commit them as one group:
// piece 0 = K rows, 1 = V rows, 2 = both (K rows, then V rows ATT_BLK rows later).
// Thread tid copies 16-byte chunk tid % 16 of rows tid / 16 + 8 u: one address computation
// per piece, a row stride after that. warp_local: the lanes of warp w copy chunk lane % 16 of
// rows 16 w + lane / 16 + 2 u, the 16 keys the warp computes with (QK^T and P.V alike), so a
// warp waits for its own copies only: __syncwarp instead of a CTA barrier per piece.
template <bool SW>
QSA_DEVICE void ring_issue(u16* slot, const u16* k, const u16* v, int b, int g, int id, int kv_len, int hkv,
                           int piece, bool warp_local) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int ch = threadIdx.x % (ATT_D / 8);
  const int r0 = warp_local ? 16 * warp + lane / 16 : threadIdx.x / (ATT_D / 8);
  const long long first = (long long)id * ATT_BLK;  // visible: first <= q_pos < kv_len
  const long long row_stride = (long long)hkv * ATT_D;
  const long long off = (((long long)b * kv_len + first + r0) * hkv + g) * ATT_D + ch * 8;
  const int nv = kv_len - first < ATT_BLK ? (int)(kv_len - first) : ATT_BLK;
  using L = RingLayout<SW>;
  u16* vpiece = slot + (piece == 2 ? ATT_BLK * L::RS : 0);
  if (warp_local) {
    if (piece != 1) ring_rows<SW, 2>(slot, k + off, row_stride, r0, ch, nv);
    if (piece != 0) ring_rows<SW, 2>(vpiece, v + off, row_stride, r0, ch, nv);
  } else {
    if (piece != 1) ring_rows<SW, 8>(slot, k + off, row_stride, r0, ch, nv);
    if (piece != 0) ring_rows<SW, 8>(vpiece, v + off, row_stride, r0, ch, nv);
  }
  qsa_cp_async_commit();
}

// Wait until piece x's group has landed: `pending` = nstage - 2 later groups may still fly
// (0 .. RING_MAX_STAGES - 2; the host checks the range).
QSA_DEVICE void ring_wait(int pending) {
  if (pending == 0) {  // two slots, the default: no jump table
    qsa_cp_async_wait_group<0>();
    return;
  }
  switch (pending) {
    case 0: qsa_cp_async_wait_group<0>(); break;
    case 1: qsa_cp_async_wait_group<1>(); break;
    case 2: qsa_cp_async_wait_group<2>(); break;
    case 3: qsa_cp_async_wait_group<3>(); break;
    case 4: qsa_cp_async_wait_group<4>(); break;
    default: qsa_cp_async_wait_group<5>(); break;
  }
}

// q rows of the CTA as A fragments, read from global memory (u16 pairs are the packed
// operands: q is E data). Rows past the CTA's valid rows or past q_len are zero.
QSA_DEVICE void ring_load_q(const u16* q, const StagedCta& c, int q_len, int hq, int lane, unsigned (&qa)[8][4]) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {  // rows g, g + 8
    const int r = g + 8 * h;
    const int tok = r / c.hc, hh = r % c.hc;
    const int i = c.tile * c.qt + tok;
    const bool valid = tok < c.qt && i < q_len;
    const u16* row = q + (((long long)c.b * q_len + (valid ? i : 0)) * hq + c.g * c.group + c.chunk * c.hc + hh) * ATT_D;
#pragma unroll
    for (int ks = 0; ks < 8; ++ks)
#pragma unroll
      for (int half = 0; half < 2; ++half)  // dims +0 / +8
        qa[ks][2 * half + h] = valid ? *(const unsigned*)(row + ks * 16 + 8 * half + 2 * t) : 0u;
  }
}

// q rows of the CTA into the shared tile (the q_tile layout of ring_smem, 16 bytes per thread
// and step; rows past the CTA's valid rows or past q_len are zero). Read after the list
// build's barriers.
QSA_DEVICE void ring_store_q(u16* qs, const u16* q, const StagedCta& c, int q_len, int hq) {
  constexpr int CH = ATT_D / 8;  // 16-byte chunks per row
  for (int e = threadIdx.x; e < ATT_ROWS * CH; e += blockDim.x) {
    const int r = e / CH, ch = e % CH;
    const int tok = r / c.hc, hh = r % c.hc;
    const int i = c.tile * c.qt + tok;
    uint4 x = make_uint4(0u, 0u, 0u, 0u);
    if (tok < c.qt && i < q_len)
      x = *(const uint4*)(q + (((long long)c.b * q_len + i) * hq + c.g * c.group + c.chunk * c.hc + hh) * ATT_D + ch * 8);
    *(uint4*)(qs + r * KV_STRIDE + ch * 8) = x;
  }
}

// P (registers: this warp's 16 keys, rows g / g + 8, C layout of tc_qk) as the A fragment of
// one k16 step, split into parts; f16 parts are of P * 2^14 (RING_F16_PSCALE).
#define RING_F16_PSCALE 16384.f
template <typename E>
QSA_DEVICE void ring_p_parts(const float (&sc)[2][4], unsigned (&a0)[4], unsigned (&a1)[4], unsigned (&a2)[4]) {
  // A order: (g, 2t), (g+8, 2t), (g, 2t+8), (g+8, 2t+8) = sc[0][0..1], sc[0][2..3], sc[1][0..1],
  // sc[1][2..3].
#pragma unroll
  for (int h = 0; h < 4; ++h) {
    const float s = E::is_bf16 ? 1.f : RING_F16_PSCALE;
    const float x0 = sc[h >> 1][2 * (h & 1)] * s, x1 = sc[h >> 1][2 * (h & 1) + 1] * s;
    a0[h] = tc_pack<E>(x0, x1);
    const float r0 = x0 - E::lo(a0[h]), r1 = x1 - E::hi(a0[h]);
    a1[h] = tc_pack<E>(r0, r1);
    a2[h] = E::is_bf16 ? tc_pack<E>(r0 - E::lo(a1[h]), r1 - E::hi(a1[h])) : 0u;
  }
}

// acc[j] += P (this warp's keys kw .. kw+15) x V for dims 8 j .. 8 j + 7, all 128 dims. bf16
// with three_parts = 0 drops P's third part (hi + mid: 2^-18 relative instead of 2^-27; the
// host's QSA_ATTN_RING_PARTS=2, a sweep of the mma count against the error gate).
template <typename E, bool SW>
QSA_DEVICE void ring_pv(const float (&sc)[2][4], const u16* vs, int kw, int lane, bool three_parts,
                        float (&acc)[16][4]) {
  unsigned a0[4], a1[4], a2[4];
  ring_p_parts<E>(sc, a0, a1, a2);
  const int key = kw + (lane & 7) + ((lane >> 3) & 1) * 8;
  // This lane's row (key) of chunk 2 jp + (lane >> 4); swizzled, key & 7 = lane & 7.
  const u16* vr = vs + key * RingLayout<SW>::RS;
  const int h = lane >> 4, kr = lane & 7;
#pragma unroll
  for (int jp = 0; jp < ATT_D / 16; ++jp) {
    unsigned b0, b1, b2, b3;
    qsa_ldmatrix_x4_trans(vr + (SW ? ((2 * jp + h) ^ kr) : (2 * jp + h)) * 8, b0, b1, b2, b3);
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

// sc[n][.] = q . K for keys k0 + 8 n + (2t, 2t+1), rows g / g+8 (tc_qk's layout), in four
// accumulator chains of four mmas instead of two of eight: a warp waits on its QK^T's
// dependent mma latency once per block, and three warps per SM sub-partition hide little.
// q's A fragments: registers (qa) or, QS, the shared tile (ring_store_q: rows g and g + 8 sit
// 68 words apart, bank 4 g + t, so 32-bit reads are conflict-free). K's B fragments: 32-bit
// reads of the padded rows, or (SW) one ldmatrix.x4 per two k16 steps of the swizzled rows:
// 8 ldmatrix per block instead of 32 shared loads (q's could too: RING_QS_LDMATRIX).
template <typename E, bool QS, bool SW>
QSA_DEVICE void ring_qk(const unsigned (&qa)[8][4], const u16* qs, const u16* ks, int k0, int lane,
                        float (&sc)[2][4]) {
  const int g = lane / 4, t = lane % 4;
  const int lr = lane & 7, lm = lane >> 3;  // ldmatrix: this lane's row and matrix
  float odd[2][4];
#pragma unroll
  for (int n = 0; n < 2; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      sc[n][e] = 0.f;
      odd[n][e] = 0.f;
    }
  // SW: matrix lm of keys k0 + 8 n + lr is chunk 4 m + lm (m = kk / 2), stored at chunk
  // (4 m + lm) ^ lr = ((4 (m & 1) + lm) ^ lr) + 8 (m >> 1).
  const u16* kb = ks + (k0 + lr) * ATT_D;
  const int x0 = (lm ^ lr) * 8, x1 = ((4 + lm) ^ lr) * 8;
  // QS && SW: q's matrix lm is rows lr + 8 (lm & 1), chunk 2 ks + (lm >> 1) (A's order).
  const u16* qb = qs + (lr + 8 * (lm & 1)) * KV_STRIDE + (lm >> 1) * 8;
  const u16* qr = qs + g * KV_STRIDE + 2 * t;
#pragma unroll
  for (int kk = 0; kk < 8; kk += 2) {
    unsigned a[2][4];
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      if constexpr (QS && SW && RING_QS_LDMATRIX) {
        qsa_ldmatrix_x4(qb + (kk + u) * 16, a[u][0], a[u][1], a[u][2], a[u][3]);
      } else if constexpr (QS) {  // ring_load_q's order: (g, 2t), (g+8, 2t), (g, 2t+8), (g+8, 2t+8)
        const u16* p = qr + (kk + u) * 16;
        a[u][0] = *(const unsigned*)p;
        a[u][1] = *(const unsigned*)(p + 8 * KV_STRIDE);
        a[u][2] = *(const unsigned*)(p + 8);
        a[u][3] = *(const unsigned*)(p + 8 * KV_STRIDE + 8);
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e) a[u][e] = qa[kk + u][e];
      }
    }
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      unsigned b[4];
      if constexpr (SW) {
        const int m = kk / 2;
        qsa_ldmatrix_x4(kb + 8 * n * ATT_D + ((m & 1) ? x1 : x0) + 64 * (m >> 1), b[0], b[1], b[2], b[3]);
      } else {
        const u16* kp = ks + (k0 + 8 * n + g) * KV_STRIDE + kk * 16 + 2 * t;
        b[0] = *(const unsigned*)kp;
        b[1] = *(const unsigned*)(kp + 8);
        b[2] = *(const unsigned*)(kp + 16);
        b[3] = *(const unsigned*)(kp + 24);
      }
      tc_mma<E>(sc[n], a[0], b[0], b[1]);
      tc_mma<E>(odd[n], a[1], b[2], b[3]);
    }
  }
#pragma unroll
  for (int n = 0; n < 2; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) sc[n][e] += odd[n][e];
}

// One block's scores for this warp's keys (sc: q . K from ring_qk) turned
// into P (probabilities, C layout of tc_qk) after masking (rows that did not select the block, keys past the row's position) and the online
// softmax update of (m, l) and of O (acc rescaled by alpha). Scores and m are in log2 units
// (scale2 = scale * log2(e)): exp2f is one MUFU.EX2, where expf took a range-reduction path
// with a branch per call (the H200 SASS of the first version: ~10 instructions each).
// `slack` (log2 units, ring_slack): the running max m moves only when a block's max passes
// m + slack, so p = exp2(s - m) <= 2^slack, and O is rescaled (64 multiplies per lane) only when
// some row of the warp moved: with slack 8, after the first blocks almost never (the H200
// profile of 2026-12-02: 2.2 G of the kernel's 10.6 G instructions were FP32, the rescale most
// of them). Slack 0 is the exact running max (the skip is then bit-identical: alpha = 1).
QSA_DEVICE void ring_softmax(int base, unsigned mask, const bool (&live)[2], const int (&tok)[2],
                             const int (&q_pos)[2], float scale2, float slack, int kw, int lane,
                             float (&sc)[2][4], float (&m)[2], float (&l)[2], float (&acc)[16][4]) {
  const int tt = lane % 4;
  float alpha[2];
  bool moved_any = false;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const bool sel = live[h] && (mask >> tok[h] & 1u);
    // This lane's keys kw + 8 nn + 2 tt + e are visible to the row iff 8 nn + e <= lim.
    const int d = q_pos[h] - base - kw - 2 * tt;
    const int lim = d < 0 ? -1 : d > ATT_BLK ? ATT_BLK : d;
    float mx = qsa_neg_inf();
#pragma unroll
    for (int nn = 0; nn < 2; ++nn)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float x = sel && 8 * nn + e <= lim ? sc[nn][2 * h + e] * scale2 : qsa_neg_inf();
        sc[nn][2 * h + e] = x;
        mx = fmaxf(mx, x);
      }
    mx = fmaxf(mx, qsa_shfl_xor(mx, 1));
    mx = fmaxf(mx, qsa_shfl_xor(mx, 2));
    const bool moved = mx > m[h] + slack;  // m = -inf before: any visible key moves it
    const float m_new = moved ? mx : m[h];
    const bool none = m_new == qsa_neg_inf();
    alpha[h] = moved ? exp2f(m[h] - m_new) : 1.f;  // m = -inf before: alpha = 0
    moved_any |= moved;
    float sum = 0.f;
#pragma unroll
    for (int nn = 0; nn < 2; ++nn)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const float p = none ? 0.f : exp2f(sc[nn][2 * h + e] - m_new);
        sc[nn][2 * h + e] = p;
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

// The running max's slack of ring_softmax: 0 (exact) unless `lazy`; then 8 for bf16 (P <= 256:
// its 16-bit parts keep their relative precision) and 1 for f16, whose parts are of
// P * 2^14 (RING_F16_PSCALE): 2^15 stays under f16's 65,504.
template <typename E>
QSA_DEVICE float ring_slack(int lazy) {
  return lazy ? (E::is_bf16 ? 8.f : 1.f) : 0.f;
}

template <typename E, bool QS, bool SW>
QSA_DEVICE void ring_fwd(const u16* __restrict__ q, const u16* __restrict__ k, const u16* __restrict__ v,
                         const int* __restrict__ ids, float* __restrict__ o, float* __restrict__ lse, int batch,
                         int q_len, int kv_len, int hq, int hkv, int t, float scale, int hc, int qt, int nstage,
                         int halves, int nparts, int order, int lazy, int warp_local_arg) {
  // The swizzled kernel copies per CTA only: its warp-local build spilled 8 bytes (f16,
  // cargo xtask build --target sm_90, 2026-12-02); the host never asks it for warp copies.
  const bool warp_local = !SW && warp_local_arg;
  QSA_DYNAMIC_SHARED(smem_raw);
  const int group = hq / hkv;
  const StagedCta c = ring_cta(q_len, hkv, group, hc, qt, order);
  const StagedSmem s = ring_smem(smem_raw, qt * t, QS);
  u16* const qs = s.kv - ATT_ROWS * KV_STRIDE;  // the q tile (QS only)
  const int tid = threadIdx.x;
  const int split = blockIdx.y;
  const int rows_valid = c.qt * c.hc;
  const long long rows_total = (long long)batch * q_len * hq;
  const int warp = tid / 32, lane = tid % 32, tg = lane / 4, tt = lane % 4;
  const int kw = 16 * warp;  // this warp's keys of every block
  const float scale2 = scale * 1.4426950408889634f;  // logits in log2 units: p = exp2(s2 - m2)
  const float slack = ring_slack<E>(lazy);
  unsigned qa[8][4];  // !QS: q's A fragments, for every block
  if constexpr (QS) ring_store_q(qs, q, c, q_len, hq);
  else ring_load_q(q, c, q_len, hq, lane, qa);
  staged_build_list(s, ids, c, q_len, kv_len, hkv, t);  // ends with a barrier
  const int total = *s.count, nsplit = gridDim.y;
  const int per = (total + nsplit - 1) / nsplit;
  const int beg = split * per < total ? split * per : total;
  const int end = beg + per < total ? beg + per : total;
  const int n = end - beg;
  // A slot holds one piece: a block's K and V rows, or (halves) its K rows or its V rows.
  const int pp = halves ? 2 : 1;  // pieces per block (x / pp below is x >> 1 or x)
  const int slot_elems = (halves ? 1 : 2) * ATT_BLK * RingLayout<SW>::RS;

  // Per lane: rows tg (h = 0) and tg + 8 (h = 1): running max m (quad-uniform), this lane's
  // partial sum l (its four keys of each block; summed over the quad at the end), O.
  float m[2] = {qsa_neg_inf(), qsa_neg_inf()}, l[2] = {0.f, 0.f};
  float acc[16][4];
#pragma unroll
  for (int j = 0; j < 16; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = 0.f;
  bool live[2];
  int tok[2];
  // Positions in 32 bits: q_pos < kv_len (an int), and a listed block's first key id * 64 <=
  // q_pos (the list keeps visible blocks only), so every difference below fits.
  int q_pos[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = tg + 8 * h;
    live[h] = r < rows_valid;
    tok[h] = r / c.hc;
    q_pos[h] = kv_len - q_len + c.tile * c.qt + tok[h];
  }
  // Per unique block: the keys any row of the CTA may see (read after the loop's first
  // barrier), in the list build's scratch.
  int* klim = (int*)s.tmp;
  for (int u = tid; u < total; u += blockDim.x) klim[u] = staged_key_limit(c, s.uid[u], s.umask[u], q_len, kv_len);

  // Piece x: block x / pp; with halves, K (x even) or V (x odd), else both. Prologue: pieces
  // 0 .. nstage-2 in flight (an empty group where there is none, so that group x is always
  // piece x).
  const int np = n * pp;
  // Slots of the next issue and of the next piece to compute, counted round the ring.
  int put = 0, get = 0;
  // warp_local: a warp copies only its keys' rows, and none of a block it skips (kw at or past
  // the block's key limit); an empty group keeps group x = piece x.
  auto issue = [&](int x) {
    const int blk = beg + (halves ? x >> 1 : x);
    if (x < np && !(warp_local && kw >= klim[blk]))
      ring_issue<SW>(s.kv + put * slot_elems, k, v, c.b, c.g, s.uid[blk], kv_len, hkv, halves ? (x & 1) : 2,
                     warp_local);
    else
      qsa_cp_async_commit();
    put = put + 1 == nstage ? 0 : put + 1;
  };
  if (warp_local) QSA_SYNC();  // klim is read by the prologue's issues
  for (int x = 0; x < nstage - 1; ++x) issue(x);
  float sc[2][4];  // this warp's P of the current block, from its K piece to its V piece
  for (int x = 0; x < np; ++x) {
    ring_wait(nstage - 2);
    // Piece x is everyone's (the warp's, warp_local), and everyone is done with piece x-1's slot.
    if (warp_local) QSA_SYNCWARP();
    else QSA_SYNC();
    issue(x + nstage - 1);  // into piece x-1's slot
    const u16* buf = s.kv + get * slot_elems;
    get = get + 1 == nstage ? 0 : get + 1;
    const int blk = beg + (halves ? x >> 1 : x);
    if (kw >= klim[blk]) continue;  // no row sees these keys
    const int id = s.uid[blk];
    const unsigned mask = s.umask[blk];
    const bool k_piece = !halves || !(x & 1), v_piece = !halves || (x & 1);
    if (k_piece) {
      ring_qk<E, QS, SW>(qa, qs, buf, kw, lane, sc);
      ring_softmax(id * ATT_BLK, mask, live, tok, q_pos, scale2, slack, kw, lane, sc, m, l, acc);
    }
    if (v_piece) ring_pv<E, SW>(sc, halves ? buf : buf + ATT_BLK * RingLayout<SW>::RS, kw, lane, nparts >= 3, acc);
  }

  // Merge the four warps' (m, l, O) per row through the drained ring.
  qsa_cp_async_wait_group<0>();
  QSA_SYNC();
  float* mo = (float*)s.kv;                                  // [4 warps][16 rows][RING_O_STRIDE]
  float* mm = mo + (ATT_THREADS / 32) * ATT_ROWS * RING_O_STRIDE;  // [4][16] max
  float* ml = mm + (ATT_THREADS / 32) * ATT_ROWS;                  // [4][16] sum
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = tg + 8 * h;
    float lsum = l[h] + qsa_shfl_xor(l[h], 1);
    lsum += qsa_shfl_xor(lsum, 2);
    if (tt == 0) {
      mm[warp * ATT_ROWS + r] = m[h];
      ml[warp * ATT_ROWS + r] = lsum;
    }
#pragma unroll
    for (int j = 0; j < 16; ++j)
      *(float2*)(mo + (warp * ATT_ROWS + r) * RING_O_STRIDE + 8 * j + 2 * tt) = make_float2(acc[j][2 * h], acc[j][2 * h + 1]);
  }
  QSA_SYNC();
  {
    // Row r = tid / 8, dims 4 (tid % 8) + 32 u .. +3 (u < 4): the row's eight threads store 128
    // contiguous bytes per instruction (16-byte pieces 64 bytes apart used half of every
    // 32-byte sector: the H200 profile's uncoalesced stores).
    const int r = tid / 8, d0 = 4 * (tid % 8);
    const int tok = r / c.hc, hh = r % c.hc;
    const int i = c.tile * c.qt + tok;
    if (r < rows_valid && i < q_len) {
      float mx = qsa_neg_inf();
#pragma unroll
      for (int w = 0; w < ATT_THREADS / 32; ++w) mx = fmaxf(mx, mm[w * ATT_ROWS + r]);
      float wt[ATT_THREADS / 32], lsum = 0.f;
#pragma unroll
      for (int w = 0; w < ATT_THREADS / 32; ++w) {
        wt[w] = mx == qsa_neg_inf() ? 0.f : exp2f(mm[w * ATT_ROWS + r] - mx);  // -inf warp: 0
        lsum += wt[w] * ml[w * ATT_ROWS + r];
      }
      const bool none = !(lsum > 0.f);
      const float inv = none ? 0.f : (E::is_bf16 ? 1.f : 1.f / RING_F16_PSCALE) / lsum;
      const int hd = c.g * group + c.chunk * c.hc + hh;
      const long long row = (((long long)c.b * q_len + i) * hq + hd) + split * rows_total;
#pragma unroll
      for (int d = d0; d < ATT_D; d += 32) {
        float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
        for (int w = 0; w < ATT_THREADS / 32; ++w) {
          const float4 y = *(const float4*)(mo + (w * ATT_ROWS + r) * RING_O_STRIDE + d);
          x.x += wt[w] * y.x;
          x.y += wt[w] * y.y;
          x.z += wt[w] * y.z;
          x.w += wt[w] * y.w;
        }
        *(float4*)(o + row * ATT_D + d) = make_float4(x.x * inv, x.y * inv, x.z * inv, x.w * inv);
      }
      if (tid % 8 == 0) lse[row] = none ? qsa_neg_inf() : mx * 0.6931471805599453f + logf(lsum);  // m in log2 units
    }
  }
}

#define QSA_ATTN_RING_INSTANCE(NAME, SUF, E, QS, SW, MIN_CTAS)                                              \
  QSA_KERNEL void __launch_bounds__(ATT_THREADS, MIN_CTAS)                                              \
      qsa_attn_##NAME##_fwd_##SUF(const u16* q, const u16* k, const u16* v, const int* ids, float* o,     \
                              float* lse, int batch, int q_len, int kv_len, int hq, int hkv, int t,    \
                              float scale, int hc, int qt, int nstage, int halves, int nparts,         \
                              int order, int lazy, int warp_local) {                                   \
    ring_fwd<E, QS, SW>(q, k, v, ids, o, lse, batch, q_len, kv_len, hq, hkv, t, scale, hc, qt, nstage, halves, \
                        nparts, order, lazy, warp_local);                                              \
  }
#endif  // QSA_ATTN_MMA
