// NSA selection attention: the tensor-core tiles (mma.sync, sm_80+ CUDA) of the staged kernels.
// Included by kernels/selection_attention.cu (which defines ATT_*, u16, Bf16 / F16 before it);
// split out of it to keep each file readable.

// ---- tensor-core tiles (sm_80+; sm_75 and HIP keep the FP32 tiles of attention_staged.h) ----------------------
// mma.sync m16n8k16, f32 accumulation. Fragments (g = lane / 4, t = lane % 4):
//   A (16 x 16, row): regs {(g, 2t..2t+1), (g+8, 2t..), (g, 2t+8..), (g+8, 2t+8..)}
//   B (16 x 8, col):  regs {(k 2t..2t+1, n g), (k 2t+8.., n g)}
//   C (16 x 8):       {(g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1)}
// q and K / V are bf16 / f16 data, so QK^T is exact in the products. P is f32 in [0, 1]: one
// 16-bit copy would cost 2^-9 (bf16) of relative error, far over the gate (4x the gather
// kernel's FP32 error), so P is split into parts that sum back to it: bf16 hi + mid + lo
// (2^-27 relative), f16 hi + lo with lo scaled by 2^12 into its own accumulator (keeps lo out
// of f16's subnormal range; 2^-23 relative).
#if defined(QSA_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define QSA_ATTN_MMA 1
#define ATT_LO_SCALE 4096.f

template <typename E>
QSA_DEVICE unsigned tc_pack(float lo, float hi) {  // lo -> low half (the lower index)
  return E::is_bf16 ? qsa_pack_bf16x2(lo, hi) : qsa_pack_f16x2(lo, hi);
}

template <typename E>
QSA_DEVICE void tc_mma(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  if (E::is_bf16) qsa_mma_m16n8k16_bf16(c, a, b0, b1);
  else qsa_mma_m16n8k16_f16(c, a, b0, b1);
}

// q rows of the CTA as A fragments, 8 k-steps of 16 dims (exact: q is E data).
template <typename E>
QSA_DEVICE void tc_load_q(const float* qs, int lane, unsigned (&qa)[8][4]) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int ks = 0; ks < 8; ++ks)
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // dims +0 / +8
      const float2 x = *(const float2*)(qs + g * Q_STRIDE + ks * 16 + 8 * h + 2 * t);
      const float2 y = *(const float2*)(qs + (g + 8) * Q_STRIDE + ks * 16 + 8 * h + 2 * t);
      qa[ks][2 * h] = tc_pack<E>(x.x, x.y);
      qa[ks][2 * h + 1] = tc_pack<E>(y.x, y.y);
    }
}

// sc[n][.] = q . K for keys k0 + 8 n + (2t, 2t+1), rows g / g+8.
template <typename E>
QSA_DEVICE void tc_qk(const unsigned (&qa)[8][4], const u16* ks, int k0, int lane, float (&sc)[2][4]) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int n = 0; n < 2; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) sc[n][e] = 0.f;
#pragma unroll
  for (int kk = 0; kk < 8; ++kk)
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      const u16* kp = ks + (k0 + 8 * n + g) * KV_STRIDE + kk * 16 + 2 * t;
      tc_mma<E>(sc[n], qa[kk], *(const unsigned*)kp, *(const unsigned*)(kp + 8));
    }
}

// acc[j] += P (16 rows, f32 smem) x V (keys 0..nkeys-1) for dims d0 + 8 j, j < 4; f16's
// scaled low part goes to acc_lo.
template <typename E>
QSA_DEVICE void tc_pv(const float* P, const u16* vs, int d0, int nkeys, int lane, float (&acc)[4][4],
                      float (&acc_lo)[4][4]) {
  const int g = lane / 4, t = lane % 4;
  for (int k0 = 0; k0 < nkeys; k0 += 16) {
    float p[4][2];  // A order: (g, 2t), (g+8, 2t), (g, 2t+8), (g+8, 2t+8)
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      const float2 x = *(const float2*)(P + (g + 8 * (h & 1)) * S_STRIDE + k0 + 8 * (h >> 1) + 2 * t);
      p[h][0] = x.x;
      p[h][1] = x.y;
    }
    unsigned a0[4], a1[4], a2[4];
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      a0[h] = tc_pack<E>(p[h][0], p[h][1]);
      const float r0 = p[h][0] - E::lo(a0[h]), r1 = p[h][1] - E::hi(a0[h]);
      if (E::is_bf16) {
        a1[h] = tc_pack<E>(r0, r1);
        a2[h] = tc_pack<E>(r0 - E::lo(a1[h]), r1 - E::hi(a1[h]));
      } else {
        a1[h] = tc_pack<E>(r0 * ATT_LO_SCALE, r1 * ATT_LO_SCALE);
        a2[h] = 0u;
      }
    }
    const int key = k0 + (lane & 7) + ((lane >> 3) & 1) * 8;
#pragma unroll
    for (int jp = 0; jp < 2; ++jp) {
      unsigned b0, b1, b2, b3;
      qsa_ldmatrix_x4_trans(vs + key * KV_STRIDE + d0 + 16 * jp + (lane >> 4) * 8, b0, b1, b2, b3);
      tc_mma<E>(acc[2 * jp], a0, b0, b1);
      tc_mma<E>(acc[2 * jp + 1], a0, b2, b3);
      if (E::is_bf16) {
        tc_mma<E>(acc[2 * jp], a1, b0, b1);
        tc_mma<E>(acc[2 * jp + 1], a1, b2, b3);
        tc_mma<E>(acc[2 * jp], a2, b0, b1);
        tc_mma<E>(acc[2 * jp + 1], a2, b2, b3);
      } else {
        tc_mma<E>(acc_lo[2 * jp], a1, b0, b1);
        tc_mma<E>(acc_lo[2 * jp + 1], a1, b2, b3);
      }
    }
  }
}

// out[n][.] = A . B for keys k0 + 8 n + (2t, 2t+1), rows g / g+8, with A f32 rows in shared
// memory (Q_STRIDE) split into NPART 16-bit parts that sum back to it (NPART = 1 for q, which
// is E data; 3 for dO: 2^-27 relative with bf16). B: staged [key][dim] rows.
template <typename E, int NPART>
QSA_DEVICE void tc_dot_split(const float* A, const u16* B, int k0, int lane, float (&out)[2][4]) {
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
    for (int part = 0; part < NPART; ++part) {
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

// ---- the backward's dQ / dK / dV products: mma.sync m16n8k8 tf32 ("3xTF32") ----------------
// P, dS and dO are f32 values that no 16-bit format holds. tf32 keeps f32's exponent range (no
// f16 overflow of a large dS, no subnormal low parts) and an f32 splits into two tf32 parts,
// hi = tf32(x) and lo = tf32(x - hi), whose sum is within 2^-22 |x| of x. K and q are E data,
// exact in tf32 (bf16: 8, f16: 11 significant bits), so a product with them costs two mmas (hi,
// lo); dV = P^T dO splits both operands and drops lo x lo (2^-22 relative): three mmas. One
// m16n8k8 tf32 runs at the rate of one m16n8k16 bf16, so this is cheaper than the 16-bit split
// (bf16 needs three parts per operand: six mmas of twice the k for the same 2^-24).
// Fragments (g = lane / 4, t = lane % 4): A a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4);
// B b0 (k t, n g), b1 (k t+4, n g); C as m16n8k16 above.
QSA_DEVICE void tf32_split(float x, unsigned& hi, unsigned& lo) {
  hi = qsa_cvt_tf32(x);
  lo = qsa_cvt_tf32(x - __uint_as_float(hi));
}

// acc[j] += dS (16 rows, f32 smem, S_STRIDE) x K (staged [key][dim]) for dims d0 + 8 j, j < 4,
// over the keys 0 .. nkeys-1 rounded up to 8 (dS is 0 past the block's visible keys).
// The block's products run into their own accumulator, added to acc in f32 at the end: the
// tensor cores align each mma's addends to the largest and truncate, so an accumulator that
// carries every earlier block's dQ drops low bits of this block's products (on the H200, dq's
// error was 3-5x the emulator's round-to-nearest model with one accumulator for all blocks,
// docs/results/session5-2026-12-02/README.md).
template <typename E>
QSA_DEVICE void tc_ds_k(const float* dS, const u16* ks, int d0, int nkeys, int lane, float (&acc)[4][4]) {
  const int g = lane / 4, t = lane % 4;
  float blk[4][4];
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) blk[j][e] = 0.f;
  for (int k0 = 0; k0 < nkeys; k0 += 8) {
    unsigned hi[4], lo[4];
#pragma unroll
    for (int h = 0; h < 4; ++h)
      tf32_split(dS[(g + 8 * (h & 1)) * S_STRIDE + k0 + t + 4 * (h >> 1)], hi[h], lo[h]);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const u16* kp = ks + (k0 + t) * KV_STRIDE + d0 + 8 * j + g;
      const unsigned b[2] = {__float_as_uint(E::one(kp[0])), __float_as_uint(E::one(kp[4 * KV_STRIDE]))};
      qsa_mma_m16n8k8_tf32(blk[j], lo, b);
      qsa_mma_m16n8k8_tf32(blk[j], hi, b);
    }
  }
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] += blk[j][e];
}

// A fragments of P^T and dS^T for keys kw .. kw+15 (M) over the CTA's 16 rows (K, two steps of
// 8), split into tf32 parts: loaded once per block, reused for all 16 dim tiles.
struct TcKeyFrags {
  unsigned p_hi[2][4], p_lo[2][4], ds_hi[2][4], ds_lo[2][4];
};

QSA_DEVICE void tc_load_key_frags(const float* P, const float* dS, int kw, int lane, TcKeyFrags& f) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int ks = 0; ks < 2; ++ks)
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      const int off = (8 * ks + t + 4 * (h >> 1)) * S_STRIDE + kw + g + 8 * (h & 1);
      tf32_split(P[off], f.p_hi[ks][h], f.p_lo[ks][h]);
      tf32_split(dS[off], f.ds_hi[ks][h], f.ds_lo[ks][h]);
    }
}

// dv += P^T dO and dk += dS^T q (unscaled) for keys kw + g / kw + g + 8 (C layout) and dims
// d + 2t, d + 2t + 1. Rows outside `live` (bit r: row r selected the block) contribute nothing
// even where their dO is not finite (P and dS are 0 there, and 0 x inf would be NaN).
template <typename E>
QSA_DEVICE void tc_key_tile(const TcKeyFrags& f, const float* dos, const float* qs, unsigned live, int d,
                            int lane, float (&dv)[4], float (&dk)[4]) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int ks = 0; ks < 2; ++ks) {
    unsigned o_hi[2], o_lo[2], qb[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = 8 * ks + t + 4 * h;
      const bool on = (live >> r) & 1u;
      tf32_split(on ? dos[r * Q_STRIDE + d + g] : 0.f, o_hi[h], o_lo[h]);
      qb[h] = __float_as_uint(on ? qs[r * Q_STRIDE + d + g] : 0.f);
    }
    qsa_mma_m16n8k8_tf32(dv, f.p_lo[ks], o_hi);
    qsa_mma_m16n8k8_tf32(dv, f.p_hi[ks], o_lo);
    qsa_mma_m16n8k8_tf32(dv, f.p_hi[ks], o_hi);
    qsa_mma_m16n8k8_tf32(dk, f.ds_lo[ks], qb);
    qsa_mma_m16n8k8_tf32(dk, f.ds_hi[ks], qb);
  }
}

// Add one dim tile of dv / dk (C layout, dims d .. d+7 of keys kw + g, kw + g + 8) to global
// memory: one atomic per element, four elements per instruction on sm_90 (lanes t and t ^ 1
// swap halves so that each holds four consecutive dims of one key). Key c of the staged block is
// at elem0 + c * key_stride; keys at or past key_limit are not written.
QSA_DEVICE void tc_key_tile_atomics(float* dv, float* dk, long long elem0, long long key_stride, int kw,
                                    int key_limit, int d, int lane, const float (&cv)[4], const float (&ck)[4],
                                    float scale) {
  const int g = lane / 4, t = lane % 4;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const bool odd = t & 1;
  const float sv0 = qsa_shfl_xor(odd ? cv[0] : cv[2], 1), sv1 = qsa_shfl_xor(odd ? cv[1] : cv[3], 1);
  const float sk0 = qsa_shfl_xor(odd ? ck[0] : ck[2], 1), sk1 = qsa_shfl_xor(odd ? ck[1] : ck[3], 1);
  const int key = kw + g + (odd ? 8 : 0);
  if (key >= key_limit) return;
  const long long off = elem0 + key * key_stride + d + 2 * t - (odd ? 2 : 0);
  const float4 v4 = odd ? make_float4(sv0, sv1, cv[2], cv[3]) : make_float4(cv[0], cv[1], sv0, sv1);
  const float4 k4 = odd ? make_float4(sk0, sk1, ck[2], ck[3]) : make_float4(ck[0], ck[1], sk0, sk1);
  atomicAdd((float4*)(dv + off), v4);
  atomicAdd((float4*)(dk + off), make_float4(k4.x * scale, k4.y * scale, k4.z * scale, k4.w * scale));
#else
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int key = kw + g + 8 * h;
    if (key >= key_limit) continue;
    const long long off = elem0 + key * key_stride + d + 2 * t;
    atomicAdd(dv + off, cv[2 * h]);
    atomicAdd(dv + off + 1, cv[2 * h + 1]);
    atomicAdd(dk + off, ck[2 * h] * scale);
    atomicAdd(dk + off + 1, ck[2 * h + 1] * scale);
  }
#endif
}
#endif
