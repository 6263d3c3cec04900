// qsa SIMT emulator: the matrix-core, async-copy and conversion instructions of mma.h, for
// the host. Included by mma.h under QSA_EMU (after emu.h).
//
// Matrix instructions are wave collectives (qsa_emu::exchange): each lane posts pointers to
// its fragment registers, and once the whole wave has arrived the operation runs once over
// all lanes, with the fragment layouts the vendors document:
//   - mma.sync m16n8k8 .tf32 and m16n8k16 .bf16 / .f16 (PTX ISA, "Matrix Fragments for
//     mma.m16n8k8" / "mma.m16n8k16"): lane l, group g = l / 4, t = l % 4.
//       A: a0 (row g, k c0), a1 (row g+8, k c0), a2 (row g, k c0+C), a3 (row g+8, k c0+C),
//          tf32: c0 = t, C = 4, one element per register; 16-bit: c0 = 2t (low half) and
//          2t+1 (high half), C = 8.
//       B: b0 (k c0, column g), b1 (k c0+C, column g), same c0 / C.
//       C/D: c0 (row g, col 2t), c1 (row g, col 2t+1), c2 (row g+8, col 2t), c3 (g+8, 2t+1).
//   - ldmatrix.sync.m8n8.x4.trans.b16: lanes 8i..8i+7 give the row addresses of matrix i
//     (8 b16 each); register i of lane l holds matrix i's elements (row 2(l%4), column l/4)
//     in its low half and (row 2(l%4)+1, column l/4) in its high half.
//   - AMD WMMA 16x16x16 bf16 (gfx12, wave32) and MFMA 16x16x32 bf16 (gfx950, wave64): lane l,
//     group g = l / 16 (G = wave / 16 groups), r = l % 16. A slot e of lane l is A[r][8g+e],
//     B slot e is B[8g+e][r] (K = 8G), C/D element i is (row (16/G) g + i, column r): the
//     mapping of tools/amdmc/emulate.py (Arch.mma, Arch.c_pos), which the kernels assume.
//
// Accumulation model: every product of two narrowed inputs (tf32, bf16, f16) is exact in f64
// (at most 11 + 11 significant bits); the K products of one output are summed in f64 in k
// order, C is added in f64, and the result is rounded once to f32 (round to nearest even).
// The hardware's internal order, alignment and rounding of the sum are not specified bit for
// bit (NVIDIA's tensor cores are known to truncate while aligning), so this is the most
// accurate model, not the hardware's; the H200 probe (tests/emu_mma_h200.rs) measures the
// difference in ulps. NaN and infinity propagate as f64 arithmetic does (inf * 0 = NaN).
#pragma once

// ---- conversions (bit math; PTX's rounding rules) -----------------------------------------
namespace qsa_emu {

inline unsigned f32_bits(float f) { return __float_as_uint(f); }

// f32 -> bf16, round to nearest even; a NaN stays a NaN (quiet, sign and top payload kept).
inline unsigned short bf16_rne(float f) {
  const unsigned u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x0040u);
  return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// f32 -> f16, round to nearest even, overflow to infinity, f16 subnormals kept; NaN quiet.
inline unsigned short f16_rne(float f) {
  const unsigned u = f32_bits(f);
  const unsigned sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (unsigned short)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);  // >= 65520: rounds past 65504
  unsigned long long m;
  int shift;  // the f16 result is m >> shift, rounded
  if (a >= 0x38800000u) {  // a normal f16: rebias the exponent, keep 10 of 23 mantissa bits
    m = (unsigned long long)(a - 0x38000000u);  // exponent - 112 (127 - 15)
    shift = 13;
  } else {  // subnormal (or zero): units of 2^-24
    const unsigned e = a >> 23;
    if (e == 0) return (unsigned short)sign;  // f32 subnormals are far below 2^-25
    m = (a & 0x7fffffu) | 0x800000u;
    shift = 126 - (int)e;  // m * 2^(e - 150) / 2^-24
    if (shift > 31) return (unsigned short)sign;
  }
  unsigned long long h = m >> shift;
  const unsigned long long rem = m & ((1ull << shift) - 1), half = 1ull << (shift - 1);
  if (rem > half || (rem == half && (h & 1))) ++h;  // a carry moves into the exponent
  return (unsigned short)(sign | h);
}

// f16 -> f32, exact.
inline float f16_to_f32(unsigned short h) {
  const unsigned sign = ((unsigned)h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return __uint_as_float(sign | 0x7f800000u | (m << 13));
  if (e != 0) return __uint_as_float(sign | ((e + 112u) << 23) | (m << 13));
  const float v = (float)m * 5.9604644775390625e-8f;  // m * 2^-24, exact
  return sign ? -v : v;
}

inline double bf16_value(unsigned short b) { return (double)__uint_as_float((unsigned)b << 16); }
inline double f16_value(unsigned short h) { return (double)f16_to_f32(h); }
// A tf32 operand: the register's top 19 bits (the hardware ignores the low 13).
inline double tf32_value(unsigned r) { return (double)__uint_as_float(r & 0xffffe000u); }

// ---- mma.sync ----------------------------------------------------------------------------
struct MmaLane {
  float* c;            // 4 accumulators, read and written
  const unsigned* a;   // 4 registers
  unsigned b[2];
};

// A as [16][K] and B as [K][8] from the lanes' fragments, then D = A B + C.
template <int K, double (*VALUE)(unsigned short)>
bool mma_m16n8_16bit(void* const* lanes, std::string&) {
  double A[16][K], B[K][8];
  for (int l = 0; l < 32; ++l) {
    const MmaLane& L = *static_cast<const MmaLane*>(lanes[l]);
    const int g = l / 4, t = l % 4;
    for (int reg = 0; reg < 4; ++reg) {
      const int row = g + 8 * (reg & 1), k = 2 * t + 8 * (reg >> 1);
      A[row][k] = VALUE((unsigned short)(L.a[reg] & 0xffffu));
      A[row][k + 1] = VALUE((unsigned short)(L.a[reg] >> 16));
    }
    for (int reg = 0; reg < 2; ++reg) {
      const int k = 2 * t + 8 * reg;
      B[k][g] = VALUE((unsigned short)(L.b[reg] & 0xffffu));
      B[k + 1][g] = VALUE((unsigned short)(L.b[reg] >> 16));
    }
  }
  float D[16][8];
  for (int l = 0; l < 32; ++l) {
    const MmaLane& L = *static_cast<const MmaLane*>(lanes[l]);
    const int g = l / 4, t = l % 4;
    for (int i = 0; i < 4; ++i) {
      const int row = g + 8 * (i >> 1), col = 2 * t + (i & 1);
      double s = 0.0;
      for (int k = 0; k < K; ++k) s += A[row][k] * B[k][col];
      D[row][col] = (float)((double)L.c[i] + s);
    }
  }
  for (int l = 0; l < 32; ++l) {
    const MmaLane& L = *static_cast<const MmaLane*>(lanes[l]);
    const int g = l / 4, t = l % 4;
    for (int i = 0; i < 4; ++i) L.c[i] = D[g + 8 * (i >> 1)][2 * t + (i & 1)];
  }
  return true;
}

inline bool mma_m16n8k8_tf32(void* const* lanes, std::string&) {
  double A[16][8], B[8][8];
  for (int l = 0; l < 32; ++l) {
    const MmaLane& L = *static_cast<const MmaLane*>(lanes[l]);
    const int g = l / 4, t = l % 4;
    for (int reg = 0; reg < 4; ++reg) A[g + 8 * (reg & 1)][t + 4 * (reg >> 1)] = tf32_value(L.a[reg]);
    for (int reg = 0; reg < 2; ++reg) B[t + 4 * reg][g] = tf32_value(L.b[reg]);
  }
  float D[16][8];
  for (int l = 0; l < 32; ++l) {
    const MmaLane& L = *static_cast<const MmaLane*>(lanes[l]);
    const int g = l / 4, t = l % 4;
    for (int i = 0; i < 4; ++i) {
      const int row = g + 8 * (i >> 1), col = 2 * t + (i & 1);
      double s = 0.0;
      for (int k = 0; k < 8; ++k) s += A[row][k] * B[k][col];
      D[row][col] = (float)((double)L.c[i] + s);
    }
  }
  for (int l = 0; l < 32; ++l) {
    const MmaLane& L = *static_cast<const MmaLane*>(lanes[l]);
    const int g = l / 4, t = l % 4;
    for (int i = 0; i < 4; ++i) L.c[i] = D[g + 8 * (i >> 1)][2 * t + (i & 1)];
  }
  return true;
}

// ---- ldmatrix.x4.trans -------------------------------------------------------------------
struct LdmatrixLane {
  const unsigned short* row;  // the 8 b16 of the row this lane addresses
  unsigned* r[4];
};

inline bool ldmatrix_x4_trans(void* const* lanes, std::string&) {
  unsigned out[32][4];
  for (int l = 0; l < 32; ++l) {
    const int t = l % 4, col = l / 4;
    for (int i = 0; i < 4; ++i) {
      const LdmatrixLane& r0 = *static_cast<const LdmatrixLane*>(lanes[8 * i + 2 * t]);
      const LdmatrixLane& r1 = *static_cast<const LdmatrixLane*>(lanes[8 * i + 2 * t + 1]);
      out[l][i] = (unsigned)r0.row[col] | ((unsigned)r1.row[col] << 16);
    }
  }
  for (int l = 0; l < 32; ++l) {
    const LdmatrixLane& L = *static_cast<const LdmatrixLane*>(lanes[l]);
    for (int i = 0; i < 4; ++i) *L.r[i] = out[l][i];
  }
  return true;
}

// ---- ldmatrix.x4 (not transposed): lane l gets row l / 4, elements 2 (l % 4), + 1 ---------
inline bool ldmatrix_x4(void* const* lanes, std::string&) {
  unsigned out[32][4];
  for (int l = 0; l < 32; ++l) {
    const int t = l % 4, row = l / 4;
    for (int i = 0; i < 4; ++i) {
      const LdmatrixLane& R = *static_cast<const LdmatrixLane*>(lanes[8 * i + row]);
      out[l][i] = (unsigned)R.row[2 * t] | ((unsigned)R.row[2 * t + 1] << 16);
    }
  }
  for (int l = 0; l < 32; ++l) {
    const LdmatrixLane& L = *static_cast<const LdmatrixLane*>(lanes[l]);
    for (int i = 0; i < 4; ++i) *L.r[i] = out[l][i];
  }
  return true;
}

// ---- AMD matrix cores: D = A (16 x 8G) B (8G x 16) + C over one wave ----------------------
template <class Acc> struct AmdLane {
  const unsigned short* a;  // 8 bf16 slots
  const unsigned short* b;
  const Acc* c;
  Acc* d;
};

template <class Acc> bool amd_mma_bf16(void* const* lanes, std::string&) {
  constexpr int G = QSA_WAVE / 16, K = 8 * G, CROWS = 16 / G;
  static_assert(sizeof(Acc) == CROWS * sizeof(float), "C holds 16 x 16 over the wave");
  double A[16][K], B[K][16];
  for (int l = 0; l < QSA_WAVE; ++l) {
    const AmdLane<Acc>& L = *static_cast<const AmdLane<Acc>*>(lanes[l]);
    const int g = l / 16, r = l % 16;
    for (int e = 0; e < 8; ++e) {
      A[r][8 * g + e] = bf16_value(L.a[e]);
      B[8 * g + e][r] = bf16_value(L.b[e]);
    }
  }
  Acc D[QSA_WAVE];
  for (int l = 0; l < QSA_WAVE; ++l) {
    const AmdLane<Acc>& L = *static_cast<const AmdLane<Acc>*>(lanes[l]);
    const int g = l / 16, n = l % 16;
    for (int i = 0; i < CROWS; ++i) {
      const int m = CROWS * g + i;
      double s = 0.0;
      for (int k = 0; k < K; ++k) s += A[m][k] * B[k][n];
      D[l][i] = (float)((double)(*L.c)[i] + s);
    }
  }
  for (int l = 0; l < QSA_WAVE; ++l) *static_cast<const AmdLane<Acc>*>(lanes[l])->d = D[l];
  return true;
}

}  // namespace qsa_emu

// ---- the portable names (mma.h) ----------------------------------------------------------
// cp.async: a plain copy (the wait is then trivially satisfied); bytes past src_bytes are
// zero-filled, as PTX's src-size operand does. src is not read past src_bytes.
inline void qsa_cp_async16(void* dst, const void* src, int src_bytes) {
  const int n = src_bytes < 0 ? 0 : (src_bytes > 16 ? 16 : src_bytes);
  unsigned char tmp[16] = {0};
  if (n > 0) memcpy(tmp, src, (size_t)n);
  memcpy(dst, tmp, 16);
}
// The L2 prefetch size is a cache hint: the same copy.
inline void qsa_cp_async16_l2_256(void* dst, const void* src, int src_bytes) { qsa_cp_async16(dst, src, src_bytes); }
inline void qsa_cp_async_commit() {}
// A cache hint: nothing to do (the address is not even read, as on the card).
inline void qsa_prefetch_l2(const void*) {}
// ex2.approx.ftz.f32: 2^x exactly here (the card's is within ~2 ulp), subnormal inputs and
// results flushed to zero as the card does.
inline float qsa_ex2_ftz(float x) {
  const float min_normal = 1.17549435e-38f;  // 2^-126
  if (fabsf(x) < min_normal) x = 0.f;
  const float r = exp2f(x);
  return r < min_normal ? 0.f : r;
}
template <int N> inline void qsa_cp_async_wait_group() { static_assert(N >= 0, "a group count"); }

// NaN in the NVIDIA conversions, as the H200 does it (tests/emu_mma_h200.rs, 2026-12-01,
// driver 580.159.04; PTX leaves it unspecified): cvt.rn.bf16x2.f32 and cvt.rn.f16x2.f32 give
// the canonical 0x7fff for any NaN (sign and payload dropped), cvt.f32.f16 gives 0x7fffffff,
// and cvt.rna.tf32.f32 clears a NaN's low 13 bits without quieting it (0x7f800001 becomes
// 0x7f800000, an infinity).
inline bool qsa_emu_is_nan32(unsigned u) { return (u & 0x7fffffffu) > 0x7f800000u; }
inline unsigned qsa_cvt_tf32(float x) {  // cvt.rna.tf32.f32: nearest, ties away from zero
  const unsigned u = __float_as_uint(x);
  if (qsa_emu_is_nan32(u)) return u & 0xffffe000u;
  return (u + 0x1000u) & 0xffffe000u;  // magnitude + half an ulp, truncated: ties go away
}
inline unsigned qsa_emu_nv_bf16(float f) {
  return qsa_emu_is_nan32(__float_as_uint(f)) ? 0x7fffu : qsa_emu::bf16_rne(f);
}
inline unsigned qsa_emu_nv_f16(float f) {
  return qsa_emu_is_nan32(__float_as_uint(f)) ? 0x7fffu : qsa_emu::f16_rne(f);
}
inline unsigned qsa_pack_bf16x2(float lo, float hi) {
  return qsa_emu_nv_bf16(lo) | (qsa_emu_nv_bf16(hi) << 16);
}
inline unsigned qsa_pack_f16x2(float lo, float hi) {
  return qsa_emu_nv_f16(lo) | (qsa_emu_nv_f16(hi) << 16);
}
#if !defined(QSA_EMU_HIP)  // AMD builds use mma.h's _Float16 conversion, as the card does
inline float qsa_f16_to_f32(unsigned short h) {
  return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) ? __uint_as_float(0x7fffffffu) : qsa_emu::f16_to_f32(h);
}
#endif

#if QSA_WAVE == 32 && !defined(QSA_EMU_HIP)
inline void qsa_mma_m16n8k8_tf32(float (&c)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  qsa_emu::MmaLane L{c, a, {b[0], b[1]}};
  qsa_emu::exchange(&qsa_emu::mma_m16n8k8_tf32, &L);
}
inline void qsa_mma_m16n8k16_bf16(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  qsa_emu::MmaLane L{c, a, {b0, b1}};
  qsa_emu::exchange(&qsa_emu::mma_m16n8_16bit<16, qsa_emu::bf16_value>, &L);
}
inline void qsa_mma_m16n8k16_f16(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  qsa_emu::MmaLane L{c, a, {b0, b1}};
  qsa_emu::exchange(&qsa_emu::mma_m16n8_16bit<16, qsa_emu::f16_value>, &L);
}
inline void qsa_ldmatrix_x4_trans(const void* p, unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3) {
  qsa_emu::LdmatrixLane L{static_cast<const unsigned short*>(p), {&r0, &r1, &r2, &r3}};
  qsa_emu::exchange(&qsa_emu::ldmatrix_x4_trans, &L);
}
inline void qsa_ldmatrix_x4(const void* p, unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3) {
  qsa_emu::LdmatrixLane L{static_cast<const unsigned short*>(p), {&r0, &r1, &r2, &r3}};
  qsa_emu::exchange(&qsa_emu::ldmatrix_x4, &L);
}
#endif

// AMD operand and accumulator registers: 8 bf16 slots; 4 (MFMA) or 8 (WMMA) f32.
struct qsa_bf16x8 {
  unsigned short h[8];
};
template <int N> struct qsa_f32xn {
  float v[N];
  float& operator[](int i) { return v[i]; }
  const float& operator[](int i) const { return v[i]; }
};
typedef qsa_f32xn<4> qsa_f32x4;
typedef qsa_f32xn<8> qsa_f32x8;

inline qsa_bf16x8 qsa_bf16x8_from_f32(float4 lo, float4 hi) {
  const float f[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  qsa_bf16x8 r;
  for (int e = 0; e < 8; ++e) r.h[e] = qsa_emu::bf16_rne(f[e]);
  return r;
}

#if defined(QSA_EMU_HIP) && QSA_WAVE == 32
inline qsa_f32x8 qsa_wmma_f32_16x16x16_bf16(qsa_bf16x8 a, qsa_bf16x8 b, qsa_f32x8 c) {
  qsa_f32x8 d;
  qsa_emu::AmdLane<qsa_f32x8> L{a.h, b.h, &c, &d};
  qsa_emu::exchange(&qsa_emu::amd_mma_bf16<qsa_f32x8>, &L);
  return d;
}
#endif
#if defined(QSA_EMU_HIP) && QSA_WAVE == 64
inline qsa_f32x4 qsa_mfma_f32_16x16x32_bf16(qsa_bf16x8 a, qsa_bf16x8 b, qsa_f32x4 c) {
  qsa_f32x4 d;
  qsa_emu::AmdLane<qsa_f32x4> L{a.h, b.h, &c, &d};
  qsa_emu::exchange(&qsa_emu::amd_mma_bf16<qsa_f32x4>, &L);
  return d;
}
#endif

// ---- wgmma (sm_90a; mma.h's QSA_WGMMA) ----------------------------------------------------
// The simplest correct model: synchronous. At the call each thread computes its own D
// fragment elements straight from the block's shared memory through the two descriptors,
// decoded as mma.h's comment (the PTX ISA) says; wgmma.fence / commit_group / wait_group are
// ordering no-ops here (the call has finished reading when it returns). Products exact,
// summed in f64 in k order, D added, one rounding to f32: the mma.sync model above.
// Not modelled, so not checked here: that the 128 threads of the warpgroup all make the same
// call (the hardware's .sync.aligned), a missing fence.proxy.async after st.shared (the
// generic and async proxies are one memory here), and shared stores racing an in-flight
// wgmma before its wait_group (the call has already read). The race check still sees a
// missing barrier between the stores and the call. A shared address is an offset into the
// block's shared window (emu_blocks.h: its shared ranges from the lowest); other swizzled layouts
// and a nonzero base offset are refused by name.
#if defined(QSA_WGMMA) && QSA_WAVE == 32 && !defined(QSA_EMU_HIP)
namespace qsa_emu {

// emu_blocks.h (they need the running launch).
inline unsigned shared_address(const void* p);
inline const unsigned char* shared_at(unsigned addr, unsigned bytes);
inline void fail_launch(const std::string& what);

struct WgmmaDesc {
  unsigned start, lbo, sbo, base_offset, swizzle;
};

// PTX ISA, matrix descriptor: 14-bit fields hold byte values >> 4.
inline WgmmaDesc decode_wgmma_desc(unsigned long long d) {
  return WgmmaDesc{(unsigned)(d & 0x3fffu) << 4, (unsigned)((d >> 16) & 0x3fffu) << 4,
                   (unsigned)((d >> 32) & 0x3fffu) << 4, (unsigned)((d >> 49) & 7u),
                   (unsigned)((d >> 62) & 3u)};
}

// Element (row, k) of a K-major operand of ES-byte elements: no swizzle, or 128-byte swizzle
// (mode 1; mma.h's qsa_wgmma_desc_sw128: rows 128 bytes apart in 8-row atoms, address bits
// 4-6 XORed with bits 7-9).
template <int ES> inline double wgmma_operand(const WgmmaDesc& d, int row, int k) {
  const unsigned c = (unsigned)k * ES;
  unsigned addr;
  if (d.swizzle == 1) {
    addr = d.start + (unsigned)(row / 8) * d.sbo + (unsigned)(row % 8) * 128 + c;
    addr ^= ((addr >> 7) & 7u) << 4;
  } else {
    addr = d.start + (unsigned)(row / 8) * d.sbo + (c / 16) * d.lbo + (unsigned)(row % 8) * 16 + c % 16;
  }
  const unsigned char* p = shared_at(addr, ES);
  if (ES == 4) {
    unsigned u;
    memcpy(&u, p, 4);
    return tf32_value(u);
  }
  unsigned short h;
  memcpy(&h, p, 2);
  return bf16_value(h);
}

// A block may hold warps outside any warpgroup (a TMA producer warp after the consumers':
// scores_decode_tma.h); a wgmma needs only its own warpgroup's 4 warps to exist.
inline bool wgmma_warpgroup_whole() {
  return blockDim.x % 32 == 0 && blockDim.y == 1 && blockDim.z == 1 && (threadIdx.x / 128 + 1) * 128 <= blockDim.x;
}

// d (N / 2 floats of this thread) = A (64 x K) B^T (N x K) (+ d when scale_d != 0).
template <int N, int K, int ES>
inline void wgmma_m64(float* d, unsigned long long desc_a, unsigned long long desc_b, int scale_d,
                      const char* name) {
  const WgmmaDesc da = decode_wgmma_desc(desc_a), db = decode_wgmma_desc(desc_b);
  for (const WgmmaDesc* x : {&da, &db}) {
    if ((x->swizzle != 0 && x->swizzle != 1) || x->base_offset != 0) {
      fail_launch(std::string(name) + ": a swizzled descriptor (mode " + std::to_string(x->swizzle) +
                  ", base offset " + std::to_string(x->base_offset) +
                  ") is unsupported in emulation (only no swizzle and the 128-byte swizzle are modelled)");
      return;
    }
  }
  if (!wgmma_warpgroup_whole()) {
    fail_launch(std::string(name) + ": the issuing warp's warpgroup (128 threads) must lie whole in a 1-D block");
    return;
  }
  const int w = (int)((threadIdx.x / 32) % 4), lane = (int)(threadIdx.x % 32);
  const int g = lane / 4, t = lane % 4;
  double A[2][K];
  for (int h = 0; h < 2; ++h)
    for (int k = 0; k < K; ++k) A[h][k] = wgmma_operand<ES>(da, 16 * w + g + 8 * h, k);
  for (int j = 0; j < N / 8; ++j) {
    for (int c = 0; c < 2; ++c) {
      const int col = 8 * j + 2 * t + c;
      double B[K];
      for (int k = 0; k < K; ++k) B[k] = wgmma_operand<ES>(db, col, k);
      for (int h = 0; h < 2; ++h) {
        double s = 0.0;
        for (int k = 0; k < K; ++k) s += A[h][k] * B[k];
        float& out = d[4 * j + 2 * h + c];
        out = (float)((scale_d ? (double)out : 0.0) + s);
      }
    }
  }
}

}  // namespace qsa_emu

inline unsigned qsa_smem_addr(const void* p) { return qsa_emu::shared_address(p); }
inline void qsa_wgmma_fence() {}
inline void qsa_wgmma_commit() {}
template <int N> inline void qsa_wgmma_wait() { static_assert(N >= 0, "a group count"); }
inline void qsa_fence_proxy_async() {}
template <int N> inline void qsa_wgmma_fence_regs(float (&)[N]) {}
inline void qsa_wgmma_m64n128k8_tf32(float (&d)[64], unsigned long long da, unsigned long long db, int scale_d) {
  qsa_emu::wgmma_m64<128, 8, 4>(d, da, db, scale_d, "wgmma.m64n128k8.tf32");
}
inline void qsa_wgmma_m64n256k8_tf32(float (&d)[128], unsigned long long da, unsigned long long db, int scale_d) {
  qsa_emu::wgmma_m64<256, 8, 4>(d, da, db, scale_d, "wgmma.m64n256k8.tf32");
}
inline void qsa_wgmma_m64n64k16_bf16(float (&d)[32], unsigned long long da, unsigned long long db, int scale_d) {
  qsa_emu::wgmma_m64<64, 16, 2>(d, da, db, scale_d, "wgmma.m64n64k16.bf16");
}
inline void qsa_wgmma_m64n128k16_bf16(float (&d)[64], unsigned long long da, unsigned long long db, int scale_d) {
  qsa_emu::wgmma_m64<128, 16, 2>(d, da, db, scale_d, "wgmma.m64n128k16.bf16");
}
inline void qsa_wgmma_m64n256k16_bf16(float (&d)[128], unsigned long long da, unsigned long long db, int scale_d) {
  qsa_emu::wgmma_m64<256, 16, 2>(d, da, db, scale_d, "wgmma.m64n256k16.bf16");
}
// RS forms (A from registers, mma.h): a wave collective, because lane (g, t)'s D rows need the
// A values of the four lanes (g, 0..3) of its warp. Every lane posts its A fragment, its D and
// the (warp-uniform) B descriptor and scale; the model reads A from the posted registers in
// the PTX fragment layout (mma.h's RS comment), B from shared as the SS model does, and writes
// every lane's D. The same f64 sum and single rounding as the SS model; the same limits (no
// asynchrony: a[] overwritten before the wait is not caught here).
namespace qsa_emu {

struct WgmmaRsLane {
  float* d;
  unsigned a[4];
  unsigned long long db;
  int scale_d;
};

// Element (row r < 16, k) of the warp's A rows from the lanes' registers.
template <int K> inline double wgmma_rs_a(void* const* lanes, int r, int k) {
  const int g = r % 8, h = r / 8;
  if (K == 8) {  // tf32: lane (g, k % 4), register h + 2 (k / 4)
    const WgmmaRsLane& L = *static_cast<const WgmmaRsLane*>(lanes[4 * g + k % 4]);
    return tf32_value(L.a[h + 2 * (k / 4)]);
  }
  // bf16: lane (g, (k % 8) / 2), register h + 2 (k / 8), half k % 2
  const WgmmaRsLane& L = *static_cast<const WgmmaRsLane*>(lanes[4 * g + (k % 8) / 2]);
  return bf16_value((unsigned short)(L.a[h + 2 * (k / 8)] >> (16 * (k % 2))));
}

template <int N, int K, int ES> inline bool wgmma_rs_m64(void* const* lanes, std::string& err) {
  const WgmmaRsLane& L0 = *static_cast<const WgmmaRsLane*>(lanes[0]);
  for (int l = 1; l < 32; ++l) {
    const WgmmaRsLane& L = *static_cast<const WgmmaRsLane*>(lanes[l]);
    if (L.db != L0.db || L.scale_d != L0.scale_d) {
      err = "wgmma RS: lanes of one warp passed different B descriptors or scale-d (the "
            "instruction is warpgroup-uniform)";
      return false;
    }
  }
  const WgmmaDesc db = decode_wgmma_desc(L0.db);
  if ((db.swizzle != 0 && db.swizzle != 1) || db.base_offset != 0) {
    err = "wgmma RS: a B descriptor of swizzle mode " + std::to_string(db.swizzle) + ", base offset " +
          std::to_string(db.base_offset) +
          " is unsupported in emulation (only no swizzle and the 128-byte swizzle are modelled)";
    return false;
  }
  double A[16][K];
  for (int r = 0; r < 16; ++r)
    for (int k = 0; k < K; ++k) A[r][k] = wgmma_rs_a<K>(lanes, r, k);
  std::vector<double> B((size_t)N * K);
  for (int n = 0; n < N; ++n)
    for (int k = 0; k < K; ++k) B[(size_t)n * K + k] = wgmma_operand<ES>(db, n, k);
  for (int l = 0; l < 32; ++l) {
    const WgmmaRsLane& L = *static_cast<const WgmmaRsLane*>(lanes[l]);
    const int g = l / 4, t = l % 4;
    for (int j = 0; j < N / 8; ++j)
      for (int h = 0; h < 2; ++h)
        for (int c = 0; c < 2; ++c) {
          const double* b = &B[(size_t)(8 * j + 2 * t + c) * K];
          double s = 0.0;
          for (int k = 0; k < K; ++k) s += A[g + 8 * h][k] * b[k];
          float& out = L.d[4 * j + 2 * h + c];
          out = (float)((L0.scale_d ? (double)out : 0.0) + s);
        }
  }
  return true;
}

template <int N, int K, int ES> inline void wgmma_rs(float* d, const unsigned (&a)[4], unsigned long long db, int scale_d) {
  if (!wgmma_warpgroup_whole()) {
    fail_launch("wgmma RS: the issuing warp's warpgroup (128 threads) must lie whole in a 1-D block");
    return;
  }
  WgmmaRsLane L{d, {a[0], a[1], a[2], a[3]}, db, scale_d};
  exchange(&wgmma_rs_m64<N, K, ES>, &L);
}

}  // namespace qsa_emu

template <int K> inline void qsa_wgmma_fence_aregs(unsigned (&)[K][4]) {}
// N = 64: the decode scorers (common/scores_decode_wg.h).
inline void qsa_wgmma_m64n64k8_tf32_rs(float (&d)[32], const unsigned (&a)[4], unsigned long long db, int scale_d) {
  qsa_emu::wgmma_rs<64, 8, 4>(d, a, db, scale_d);
}
inline void qsa_wgmma_m64n64k16_bf16_rs(float (&d)[32], const unsigned (&a)[4], unsigned long long db, int scale_d) {
  qsa_emu::wgmma_rs<64, 16, 2>(d, a, db, scale_d);
}
inline void qsa_wgmma_m64n128k8_tf32_rs(float (&d)[64], const unsigned (&a)[4], unsigned long long db, int scale_d) {
  qsa_emu::wgmma_rs<128, 8, 4>(d, a, db, scale_d);
}
inline void qsa_wgmma_m64n256k8_tf32_rs(float (&d)[128], const unsigned (&a)[4], unsigned long long db, int scale_d) {
  qsa_emu::wgmma_rs<256, 8, 4>(d, a, db, scale_d);
}
inline void qsa_wgmma_m64n128k16_bf16_rs(float (&d)[64], const unsigned (&a)[4], unsigned long long db, int scale_d) {
  qsa_emu::wgmma_rs<128, 16, 2>(d, a, db, scale_d);
}
inline void qsa_wgmma_m64n256k16_bf16_rs(float (&d)[128], const unsigned (&a)[4], unsigned long long db, int scale_d) {
  qsa_emu::wgmma_rs<256, 16, 2>(d, a, db, scale_d);
}
#endif  // QSA_WGMMA
