// NSA selection attention: the KV-block-major backward's dK / dV / dQ products on bf16
// mma.sync m16n8k16 (QSA_ATTN_KV_MMA=bf16: qsa_attn_kv16_bwd_bf16, qsa_attn_kv16_dq_bwd_bf16;
// bf16s, dO split once per tile: qsa_attn_kv16s_*). Included by kernels/common/attention_kv_bwd.h
// (QSA_ATTN_MMA) ahead of kv_bwd, which calls these in place of its 3xTF32 helpers when its B16
// template argument is set; selection_attention.cu instantiates them for sm_90+ only.
//
// Why: the tf32 products run m16n8k8, half the k of a bf16 m16n8k16 at the same issue cost, so
// a tile's dV = P^T dO took 2 k steps x 3 mmas and dK = dS^T q 2 x 2 per 8 dims. With bf16
// inputs q and K are exact in one bf16 part, and the f32 operands P, dS and dO are split into
// bf16 hi + lo (hi = bf16(x), lo = bf16(x - hi)): one k16 step covers the tile's 16 rows, so dV
// costs 3 mmas (hi hi, hi lo, lo hi; lo x lo dropped) and dK 2 per 8 dims: 40 instead of 80
// per warp and tile, and dQ (kvdq) 2 per k16 step instead of 4. Error per product: hi + lo
// keeps 16 significant bits (|x - hi - lo| <= 2^-17 |x|), the dropped lo x lo is <= 2^-16 of
// the product: ~2^-16 relative per product before the f32 sums, against the 5e-5 gate
// (2^-14.3) on the relative max error (max |error| / max |FP64 value|). The emulator's error
// suite measures it (H200.md has the card's run).
// f16 inputs are not exact in one bf16 part: the dispatch keeps the tf32 kernel for them
// (src/dispatch/attention.rs, kv_products), and this file is instantiated for Bf16 only.
// Registers: every kernel here sits at the 128-register bound of two CTAs per SM with 64 of
// them in the block's dK / dV sums; the orderings below (dK's products before dV's, dS stored
// after the key tiles, fragments loaded one part at a time) are the ones ptxas 13.0 compiled
// without spills (sm_90, 2026-12-02), each alternative noted where it spilled.

// hi = bf16(x), lo = bf16(x - hi) for two values (x0 in the low half: the lower k index).
QSA_DEVICE void bf16_split2(float x0, float x1, unsigned& hi, unsigned& lo) {
  hi = qsa_pack_bf16x2(x0, x1);
  lo = qsa_pack_bf16x2(x0 - qsa_bf16x2_lo(hi), x1 - qsa_bf16x2_hi(hi));
}

// dS = P (dP - D); 0 where P is 0 (an invisible key, a row past the tile's tokens) so that a
// non-finite dP there cannot leak in.
QSA_DEVICE float kv16_ds(float p, float dp, float d) { return p != 0.f ? p * (dp - d) : 0.f; }

// A fragments of P^T and dS^T (M = keys kw .. kw + 15, K = the tile's 16 rows), bf16 hi / lo:
// register h holds keys kw + g + 8 (h & 1), rows 2t + 8 (h >> 1) and the next.
struct Kv16KeyFrags {
  unsigned p_hi[4], p_lo[4], ds_hi[4], ds_lo[4];
};

// SS: the P / dP row stride (S_STRIDE, or KVC_S_STRIDE in the conflict-free form); P1: P and dS
// in one bf16 part (the lo registers are left unset and no product reads them).
template <int SS = S_STRIDE, bool P1 = false>
QSA_DEVICE void kv16_load_key_frags(const float* P, const float* dP, const float* row_d, int kw, int lane,
                                    Kv16KeyFrags& f) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int h = 0; h < 4; ++h) {
    const int r = 2 * t + 8 * (h >> 1), key = kw + g + 8 * (h & 1);
    const int o0 = r * SS + key, o1 = o0 + SS;
    const float p0 = P[o0], p1 = P[o1];
    if constexpr (P1) {
      f.p_hi[h] = qsa_pack_bf16x2(p0, p1);
      f.ds_hi[h] = qsa_pack_bf16x2(kv16_ds(p0, dP[o0], row_d[r]), kv16_ds(p1, dP[o1], row_d[r + 1]));
    } else {
      bf16_split2(p0, p1, f.p_hi[h], f.p_lo[h]);
      bf16_split2(kv16_ds(p0, dP[o0], row_d[r]), kv16_ds(p1, dP[o1], row_d[r + 1]), f.ds_hi[h], f.ds_lo[h]);
    }
  }
}

// The fused kernel's dQ = dS K needs dS as A fragments of (rows x keys), pairs along keys; the
// key fragments above pair rows. Warps 0-3 store their keys' dS parts as bf16 rows
// [ATT_ROWS][KV16_DS_STRIDE] (hi, then lo), read after a barrier by every warp's dQ tile: dS is
// formed once per tile instead of once per warp (the first form, kv16_ds_k per warp, formed it
// eight times). Stride 72: rows 36 words apart, so the dQ tile's 32-bit reads of rows g = 0..7,
// keys 2t hit 32 banks.
#define KV16_DS_STRIDE (ATT_BLK + 8)
template <bool P1 = false>
QSA_DEVICE void kv16_store_ds(const Kv16KeyFrags& f, u16* dsp, int kw, int lane) {
  const int g = lane / 4, t = lane % 4;
  u16* lo = dsp + ATT_ROWS * KV16_DS_STRIDE;
#pragma unroll
  for (int h = 0; h < 4; ++h) {
    const int r = 2 * t + 8 * (h >> 1), key = kw + g + 8 * (h & 1);
    dsp[r * KV16_DS_STRIDE + key] = (u16)(f.ds_hi[h] & 0xffffu);
    dsp[(r + 1) * KV16_DS_STRIDE + key] = (u16)(f.ds_hi[h] >> 16);
    if constexpr (!P1) {
      lo[r * KV16_DS_STRIDE + key] = (u16)(f.ds_lo[h] & 0xffffu);
      lo[(r + 1) * KV16_DS_STRIDE + key] = (u16)(f.ds_lo[h] >> 16);
    }
  }
}

// acc_v[j] += P^T dO, acc_k[j] += dS^T q (unscaled) for keys kw + g / kw + g + 8 (C layout) and
// dims d + 8 j + 2t, + 1, j = 0, 1 (16 dims), over the tile's 16 rows. q: bf16 bits
// [row][KV_STRIDE] (its B fragments by one ldmatrix.trans: rows are k); dO: f32 [row][Q_STRIDE],
// split here. Rows past the tile's tokens are zero in q and dO. Each 8-dim tile's products run
// into fresh sums added to the block's in f32 (kv_bwd's precision note); one tile at a time
// keeps 8 registers of them, not 16 (16 spilled at the 128-register bound).
QSA_DEVICE void kv16_key_tile(const Kv16KeyFrags& f, const float* dos, const u16* qr, int d, int lane,
                              float (&acc_v0)[4], float (&acc_v1)[4], float (&acc_k0)[4], float (&acc_k1)[4]) {
  const int g = lane / 4, t = lane % 4;
  unsigned qb[4];
  qsa_ldmatrix_x4_trans(qr + ((lane & 7) + ((lane >> 3) & 1) * 8) * KV_STRIDE + d + (lane >> 4) * 8, qb[0], qb[1],
                        qb[2], qb[3]);
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    unsigned o_hi[2], o_lo[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = 2 * t + 8 * h;
      const float* p = dos + r * Q_STRIDE + d + 8 * j + g;
      bf16_split2(p[0], p[Q_STRIDE], o_hi[h], o_lo[h]);
    }
    float cv[4] = {0.f, 0.f, 0.f, 0.f}, ck[4] = {0.f, 0.f, 0.f, 0.f};
    qsa_mma_m16n8k16_bf16(cv, f.p_lo, o_hi[0], o_hi[1]);
    qsa_mma_m16n8k16_bf16(cv, f.p_hi, o_lo[0], o_lo[1]);
    qsa_mma_m16n8k16_bf16(cv, f.p_hi, o_hi[0], o_hi[1]);
    qsa_mma_m16n8k16_bf16(ck, f.ds_lo, qb[2 * j], qb[2 * j + 1]);
    qsa_mma_m16n8k16_bf16(ck, f.ds_hi, qb[2 * j], qb[2 * j + 1]);
    float(&av)[4] = j ? acc_v1 : acc_v0;
    float(&ak)[4] = j ? acc_k1 : acc_k0;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      av[e] += cv[e];
      ak[e] += ck[e];
    }
  }
}

// dQ (C layout: rows g / g + 8, dims d0 + 8 j + 2t, + 1, j = 0, 1) = dS K over the block's keys
// 0 .. keys - 1 rounded up to 16 (staged_issue zero-fills K rows past kv_len; the dS rows of keys
// kw .. kw + 15 are stored only where kw < keys, and no k step reaches past them). A = dS in
// bf16 hi / lo from kv16_store_ds's rows, B = K (bf16, exact) by ldmatrix.trans: 4 mmas per 16
// keys.
template <bool P1 = false>
QSA_DEVICE void kv16_ds_k(const u16* dsp, const u16* ks, int d0, int keys, int lane, float (&acc)[2][4]) {
  const int g = lane / 4, t = lane % 4;
  const u16* dsl = dsp + ATT_ROWS * KV16_DS_STRIDE;
#pragma unroll
  for (int j = 0; j < 2; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = 0.f;
#pragma unroll 1
  for (int k0 = 0; k0 < keys; k0 += 16) {
    unsigned b[4];
    qsa_ldmatrix_x4_trans(ks + (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * KV_STRIDE + d0 + (lane >> 4) * 8, b[0],
                          b[1], b[2], b[3]);
#pragma unroll
    for (int part = P1 ? 1 : 0; part < 2; ++part) {  // lo, then hi (P1: hi only, no lo rows)
      const u16* src = part ? dsp : dsl;
      unsigned a[4];
#pragma unroll
      for (int h = 0; h < 4; ++h)
        a[h] = *(const unsigned*)(src + (g + 8 * (h & 1)) * KV16_DS_STRIDE + k0 + 2 * t + 8 * (h >> 1));
#pragma unroll
      for (int j = 0; j < 2; ++j) qsa_mma_m16n8k16_bf16(acc[j], a, b[2 * j], b[2 * j + 1]);
    }
  }
}

// out[n][.] = dO . V for keys k0 + 8 n + (2t, 2t+1), rows g / g+8: tc_dot_split<E, 3> with the
// third of dO's 16-bit parts skipped when parts == 2 (QSA_ATTN_KV_DP_PARTS). One body for both
// (a uniform branch per part) keeps the kernel's registers: calling tc_dot_split<E, 2> and <E, 3>
// from one kernel spilled 8-16 bytes at the 128-register bound (ptxas 13.0, sm_90, 2026-12-02).
template <typename E>
QSA_DEVICE void kv_dov(const float* A, const u16* B, int k0, int lane, int parts, float (&out)[2][4]) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int n = 0; n < 2; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) out[n][e] = 0.f;
#pragma unroll 2
  for (int kk = 0; kk < 8; ++kk) {
    float x[4][2];
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      const float2 v = *(const float2*)(A + (g + 8 * (h & 1)) * Q_STRIDE + kk * 16 + 8 * (h >> 1) + 2 * t);
      x[h][0] = v.x;
      x[h][1] = v.y;
    }
    unsigned b[2][2];
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      const u16* bp = B + (k0 + 8 * n + g) * KV_STRIDE + kk * 16 + 2 * t;
      b[n][0] = *(const unsigned*)bp;
      b[n][1] = *(const unsigned*)(bp + 8);
    }
#pragma unroll
    for (int part = 0; part < 3; ++part) {
      if (part >= parts) break;
      unsigned a[4];
#pragma unroll
      for (int h = 0; h < 4; ++h) {
        a[h] = tc_pack<E>(x[h][0], x[h][1]);
        x[h][0] -= E::lo(a[h]);
        x[h][1] -= E::hi(a[h]);
      }
#pragma unroll
      for (int n = 0; n < 2; ++n) tc_mma<E>(out[n], a, b[n][0], b[n][1]);
    }
  }
}

// The fused variant's dQ with bf16 products (qsa_attn_kv16_dq_bwd_bf16): kv_dq_tile's job
// (dq of tile n's rows += scale dS K for dims 16 warp .. + 15, one f32 atomic per element, four
// per instruction on sm_90) with both 8-dim tiles in one pass over the keys and dS read as
// stored bf16 parts (kv16_ds_k: 16 m16n8k16 per warp and tile instead of 32 m16n8k8, and no
// dS formed twice per warp). Its atomics are
// kv_dq_tile's, written apart: folding kv_dq_tile's copy into one helper spilled 8-24 bytes in
// the f16 tf32 kernel at the 128-register bound (ptxas 13.0, sm_90, 2026-12-02), and the tf32
// kernels stay as they were.
QSA_DEVICE void kv16_dq_add(const KvSmem& s, const KvCta& c, const KvTiles& tl, int n, int d, int lane,
                            const float (&acc)[4], float* dq, float scale) {
  const int g = lane / 4, t = lane % 4;
  const int chunk = n / tl.per_chunk, t0 = (n % tl.per_chunk) * tl.qt;
  const int ntok = tl.found - t0 < tl.qt ? tl.found - t0 : tl.qt;
  const long long head0 = (long long)c.g * tl.group + chunk * tl.hc;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const bool odd = t & 1;  // even t: dims 2t .. 2t + 3 of row g; odd t: 2t - 2 .. 2t + 1 of row g + 8
  const float x0 = qsa_shfl_xor(odd ? acc[0] : acc[2], 1), x1 = qsa_shfl_xor(odd ? acc[1] : acc[3], 1);
  const int r = g + (odd ? 8 : 0), tok = r / tl.hc;
  if (tok < ntok) {
    const long long row = ((long long)c.b * tl.q_len + s.toks[t0 + tok]) * tl.hq + head0 + r % tl.hc;
    const float4 w = odd ? make_float4(x0, x1, acc[2], acc[3]) : make_float4(acc[0], acc[1], x0, x1);
    atomicAdd((float4*)(dq + row * ATT_D + d + 2 * t - (odd ? 2 : 0)),
              make_float4(w.x * scale, w.y * scale, w.z * scale, w.w * scale));
  }
#else
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = g + 8 * h, tok = r / tl.hc;
    if (tok >= ntok) continue;
    const long long row = ((long long)c.b * tl.q_len + s.toks[t0 + tok]) * tl.hq + head0 + r % tl.hc;
    float* dst = dq + row * ATT_D + d + 2 * t;
    atomicAdd(dst, acc[2 * h] * scale);
    atomicAdd(dst + 1, acc[2 * h + 1] * scale);
  }
#endif
}

template <bool P1 = false>
QSA_DEVICE void kv16_dq_tile(const KvSmem& s, const KvCta& c, const KvTiles& tl, int n, int keys, int warp, int lane,
                             float* dq, float scale) {
  const int d0 = 16 * warp;
  float acc[2][4];
  kv16_ds_k<P1>(s.dsp, s.kv, d0, keys, lane, acc);
  kv16_dq_add(s, c, tl, n, d0, lane, acc[0], dq, scale);
  kv16_dq_add(s, c, tl, n, d0 + 8, lane, acc[1], dq, scale);
}

// ---- dO split once per tile (QSA_ATTN_KV_MMA=bf16s: qsa_attn_kv16s_*) -----------------------
// Without it every warp splits the dO values it reads: the four dP warps each split the whole
// tile's dO into `parts` bf16 parts (the same values four times), and the key tiles split their
// columns again (each element four times more). Here the CTA splits the tile's dO once, after
// its rows land, into bf16 hi / mid / lo rows in shared memory (KV_STRIDE, as q), at the cost of
// one more barrier per tile; dP reads the parts as A fragments (as kv_qk reads q) and the key
// tiles read hi / mid (mid = bf16(x - hi), the two-part split's lo) by ldmatrix.trans, as q.

// Parts p of the tile's dO: [ATT_ROWS][KV_STRIDE] bf16 bits each, part p at dop + p * KVB_QR_ELEMS.
QSA_DEVICE u16* kv16_part(u16* dop, int p) { return dop + p * KVB_QR_ELEMS; }
QSA_DEVICE const u16* kv16_part(const u16* dop, int p) { return dop + p * KVB_QR_ELEMS; }

// Thread i splits row i / 16, dims 8 (i % 16) .. + 7 (KVB_THREADS = 16 rows x 16 pieces), four
// at a time (eight at once spilled at the 128-register bound).
// NC (the conflict-free form, QSA_ATTN_KV_LAYOUT=nc): thread i takes dims 4 (i % 16) .. + 3 and
// 64 + the same, so a quarter warp's float4 loads read 128 contiguous bytes of the row and a
// half warp's 8-byte stores write 128 contiguous bytes of a part: one wavefront each. The first
// mapping (dims 8 (i % 16) + 4 half) strides 32 bytes per thread: two wavefronts per load
// quarter and per store half (Nsight, call P: shared stores 3-way conflicted on average).
static_assert(KVB_THREADS == ATT_ROWS * (ATT_D / 8), "kv16_split_do: one thread per 8 dims of a row");
template <bool NC = false>
QSA_DEVICE void kv16_split_do(const float* dos, u16* dop, int parts) {
  const int r = threadIdx.x / 16;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int c0 = NC ? (threadIdx.x % 16) * 4 + (ATT_D / 2) * half : (threadIdx.x % 16) * 8 + 4 * half;
    const float4 v = *(const float4*)(dos + r * Q_STRIDE + c0);
    float x[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int p = 0; p < 3; ++p) {
      if (p >= parts) break;
      unsigned w[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        w[e] = qsa_pack_bf16x2(x[2 * e], x[2 * e + 1]);
        x[2 * e] -= qsa_bf16x2_lo(w[e]);
        x[2 * e + 1] -= qsa_bf16x2_hi(w[e]);
      }
      *(uint2*)(kv16_part(dop, p) + r * KV_STRIDE + c0) = make_uint2(w[0], w[1]);
    }
  }
}

// out[n][.] = dO . V for keys k0 + 8 n + (2t, 2t+1), rows g / g+8, dO from its `parts` bf16
// parts (kv_dov's sums without the conversions).
QSA_DEVICE void kv16_dov_split(const u16* dop, const u16* vs, int k0, int lane, int parts, float (&out)[2][4]) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int n = 0; n < 2; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) out[n][e] = 0.f;
#pragma unroll 2
  for (int kk = 0; kk < 8; ++kk) {
    unsigned b[2][2];
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      const u16* bp = vs + (k0 + 8 * n + g) * KV_STRIDE + kk * 16 + 2 * t;
      b[n][0] = *(const unsigned*)bp;
      b[n][1] = *(const unsigned*)(bp + 8);
    }
#pragma unroll
    for (int p = 0; p < 3; ++p) {
      if (p >= parts) break;
      const u16* ap = kv16_part(dop, p);
      unsigned a[4];
#pragma unroll
      for (int h = 0; h < 4; ++h)
        a[h] = *(const unsigned*)(ap + (g + 8 * (h & 1)) * KV_STRIDE + kk * 16 + 8 * (h >> 1) + 2 * t);
#pragma unroll
      for (int n = 0; n < 2; ++n) qsa_mma_m16n8k16_bf16(out[n], a, b[n][0], b[n][1]);
    }
  }
}

// kv16_key_tile with dO's hi / mid from the split rows (B fragments by ldmatrix.trans): dK's
// products first (q's fragments), then dV's (dO's), so that at most 12 registers of fragments
// and fresh sums are live (all at once spilled at the 128-register bound).
// P1: P and dS in one bf16 part (fla's precision): dK 1 mma and dV 2 per 8 dims (hi hi, hi mid).
template <bool P1 = false>
QSA_DEVICE void kv16_key_tile_split(const Kv16KeyFrags& f, const u16* dop, const u16* qr, int d, int lane,
                                    float (&acc_v0)[4], float (&acc_v1)[4], float (&acc_k0)[4], float (&acc_k1)[4]) {
  const int off = ((lane & 7) + ((lane >> 3) & 1) * 8) * KV_STRIDE + d + (lane >> 4) * 8;
  {
    unsigned qb[4];
    qsa_ldmatrix_x4_trans(qr + off, qb[0], qb[1], qb[2], qb[3]);
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      float ck[4] = {0.f, 0.f, 0.f, 0.f};
      if (!P1) qsa_mma_m16n8k16_bf16(ck, f.ds_lo, qb[2 * j], qb[2 * j + 1]);
      qsa_mma_m16n8k16_bf16(ck, f.ds_hi, qb[2 * j], qb[2 * j + 1]);
      float(&ak)[4] = j ? acc_k1 : acc_k0;
#pragma unroll
      for (int e = 0; e < 4; ++e) ak[e] += ck[e];
    }
  }
  unsigned oh[4], ol[4];
  qsa_ldmatrix_x4_trans(kv16_part(dop, 0) + off, oh[0], oh[1], oh[2], oh[3]);
  qsa_ldmatrix_x4_trans(kv16_part(dop, 1) + off, ol[0], ol[1], ol[2], ol[3]);
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    float cv[4] = {0.f, 0.f, 0.f, 0.f};
    if (!P1) qsa_mma_m16n8k16_bf16(cv, f.p_lo, oh[2 * j], oh[2 * j + 1]);
    qsa_mma_m16n8k16_bf16(cv, f.p_hi, ol[2 * j], ol[2 * j + 1]);
    qsa_mma_m16n8k16_bf16(cv, f.p_hi, oh[2 * j], oh[2 * j + 1]);
    float(&av)[4] = j ? acc_v1 : acc_v0;
#pragma unroll
    for (int e = 0; e < 4; ++e) av[e] += cv[e];
  }
}
