// The tensor-core / matrix-core scorers of kernels/block_scores.cu under names of their own,
// for tests/emu_mma_kernels.rs. The emulator builds this file, not block_scores.cu, so only
// the names below are registered (src/emu/compile.rs reads them from this text); the
// emulated kernels are plain host functions, so these forward to the real ones.
// AMD gfx1201 (WMMA) and gfx950 (MFMA).
#include "block_scores.cu"

QSA_KERNEL void scores_amd_matrix(const float* q, const float* kb, const float* w, float* s, int nq, int heads,
                                  int blocks) {
#if defined(__gfx950__)
  block_scores_mfma_bf16(q, kb, w, s, nq, heads, blocks);
#else
  block_scores_wmma_bf16(q, kb, w, s, nq, heads, blocks);
#endif
}
