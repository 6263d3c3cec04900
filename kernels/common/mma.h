// qsa matrix-core and async-copy primitives: every vendor instruction the kernels use, behind
// one portable name, so that no kernel body holds inline asm or a builtin (portable.h
// includes this at its end).
//
// Each real branch holds exactly the instruction the kernels used before this header existed
// (the build's cubins, fatbins and code objects are byte-identical); the QSA_EMU branch
// (emu_mma.h) computes the same results on the host as wave collectives, with the vendors'
// documented fragment layouts. Names and operand orders:
//
//   qsa_cp_async16(dst, src, src_bytes)    16-byte global -> shared copy; bytes past
//                                          src_bytes (0..16) are zero-filled    (sm_80+)
//   qsa_cp_async16_l2_256(dst, src, src_bytes)   the same, with the hint that L2 fetch the
//                                          256-byte block around src            (sm_80+)
//   qsa_cp_async_commit()                  close the current group of copies     (sm_80+)
//   qsa_cp_async_wait_group<N>()           wait until <= N groups are in flight  (sm_80+)
//   qsa_cvt_tf32(x)                        f32 -> tf32 bits, round to nearest, ties away
//   qsa_pack_bf16x2(lo, hi), _f16x2        two f32 -> one 32-bit pair, round to nearest
//                                          even; `lo` in the low half (the lower index)
//   qsa_f16_to_f32(bits)                   exact widening                   (every target)
//   qsa_mma_m16n8k8_tf32(c, a, b)          c += A(16x8, row) B(8x8, col), PTX fragments
//   qsa_mma_m16n8k16_bf16 / _f16(c, a, b0, b1)   c += A(16x16) B(16x8)
//   qsa_ldmatrix_x4_trans(p, r0..r3)       four 8x8 b16 tiles from shared, transposed
//   qsa_bf16x8_from_f32(lo, hi)            8 f32 -> 8 bf16 operand slots (RNE)  (gfx12, gfx950)
//   qsa_wmma_f32_16x16x16_bf16(a, b, c)    gfx12 wave32 WMMA, D = A B + C
//   qsa_mfma_f32_16x16x32_bf16(a, b, c)    gfx950 wave64 MFMA, D = A B + C
#pragma once

#if defined(QSA_EMU)
#include "emu_mma.h"  // the host's wave-collective versions
#elif defined(QSA_HOST)
// hostcheck/ checks pure helpers only; none of these is one (they are instructions).
#elif defined(QSA_CUDA)

QSA_DEVICE float qsa_f16_to_f32(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
QSA_DEVICE void qsa_cp_async16(void* dst, const void* src, int src_bytes) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(src_bytes));
}
QSA_DEVICE void qsa_cp_async16_l2_256(void* dst, const void* src, int src_bytes) {
  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(src_bytes));
}
QSA_DEVICE void qsa_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> QSA_DEVICE void qsa_cp_async_wait_group() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

QSA_DEVICE unsigned qsa_cvt_tf32(float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}
QSA_DEVICE unsigned qsa_pack_bf16x2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
QSA_DEVICE unsigned qsa_pack_f16x2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

QSA_DEVICE void qsa_mma_m16n8k8_tf32(float (&c)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  asm(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
QSA_DEVICE void qsa_mma_m16n8k16_bf16(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
QSA_DEVICE void qsa_mma_m16n8k16_f16(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

QSA_DEVICE void qsa_ldmatrix_x4_trans(const void* p, unsigned& r0, unsigned& r1, unsigned& r2, unsigned& r3) {
  const unsigned a = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(a));
}
#endif  // __CUDA_ARCH__ >= 800

#elif defined(QSA_HIP)

#if defined(__gfx1200__) || defined(__gfx1201__) || defined(__gfx950__)
typedef __bf16 qsa_bf16x8 __attribute__((ext_vector_type(8)));
typedef float qsa_f32x4 __attribute__((ext_vector_type(4)));
typedef float qsa_f32x8 __attribute__((ext_vector_type(8)));

// Slot e = lo.x, lo.y, lo.z, lo.w, hi.x, ..., each rounded to bf16 (RNE).
QSA_DEVICE qsa_bf16x8 qsa_bf16x8_from_f32(float4 lo, float4 hi) {
  qsa_bf16x8 r;
  r[0] = (__bf16)lo.x;
  r[1] = (__bf16)lo.y;
  r[2] = (__bf16)lo.z;
  r[3] = (__bf16)lo.w;
  r[4] = (__bf16)hi.x;
  r[5] = (__bf16)hi.y;
  r[6] = (__bf16)hi.z;
  r[7] = (__bf16)hi.w;
  return r;
}
#if defined(__gfx950__)
QSA_DEVICE qsa_f32x4 qsa_mfma_f32_16x16x32_bf16(qsa_bf16x8 a, qsa_bf16x8 b, qsa_f32x4 c) {
  return __builtin_amdgcn_mfma_f32_16x16x32_bf16(a, b, c, /*cbsz*/ 0, /*abid*/ 0, /*blgp*/ 0);
}
#else
QSA_DEVICE qsa_f32x8 qsa_wmma_f32_16x16x16_bf16(qsa_bf16x8 a, qsa_bf16x8 b, qsa_f32x8 c) {
  return __builtin_amdgcn_wmma_f32_16x16x16_bf16_w32_gfx12(a, b, c);
}
#endif
#endif  // gfx12 / gfx950

#endif

// f16 -> f32 on AMD: the compiler's own _Float16 conversion, one definition for the real HIP
// build and the emulator's AMD builds (g++ and clang++ know _Float16 on x86-64), so the
// emulated gfx targets run the code the card runs (mutants/kernel-attn-hip-f16-read-as-bf16).
#if defined(QSA_HIP)
QSA_DEVICE float qsa_f16_to_f32(unsigned short h) {
  _Float16 x;
  __builtin_memcpy(&x, &h, 2);
  return (float)x;
}
#endif
