// Probe kernel of the AMD matrix-core primitives (kernels/common/mma.h) for tests/emu_mma.rs,
// emulated only (no AMD GPU has run it): each lane loads its operand slots and accumulators
// as given, runs one WMMA (wave 32, gfx12) or MFMA (wave 64, gfx950), and stores D.
#include "common/portable.h"

// a, b: [wave][8] bf16 slots; c, d: [wave][16 * 16 / wave] f32. One wave: WMMA on wave 32,
// MFMA on wave 64.
QSA_KERNEL void probe_amd_mma(const unsigned short* a, const unsigned short* b, const float* c, float* d) {
  const int l = threadIdx.x;
  qsa_bf16x8 av, bv;
  for (int e = 0; e < 8; ++e) {
    av.h[e] = a[8 * l + e];
    bv.h[e] = b[8 * l + e];
  }
#if QSA_WAVE == 32
  qsa_f32x8 cv, dv;
  for (int i = 0; i < 8; ++i) cv[i] = c[8 * l + i];
  dv = qsa_wmma_f32_16x16x16_bf16(av, bv, cv);
  for (int i = 0; i < 8; ++i) d[8 * l + i] = dv[i];
#else
  qsa_f32x4 cv, dv;
  for (int i = 0; i < 4; ++i) cv[i] = c[4 * l + i];
  dv = qsa_mfma_f32_16x16x32_bf16(av, bv, cv);
  for (int i = 0; i < 4; ++i) d[4 * l + i] = dv[i];
#endif
}
