// The tensor-core / matrix-core scorers of kernels/block_scores.cu under names of their own,
// for tests/emu_mma_kernels.rs. The emulator builds this file, not block_scores.cu, so only
// the names below are registered (src/emu/compile.rs reads them from this text, as it reads
// the dynamic shared array the tensor-core kernels use: QSA_DYNAMIC_SHARED(smem_raw)); the
// emulated kernels are plain host functions, so these forward to the real ones.
// NVIDIA sm_80+ targets.
#include "block_scores.cu"

QSA_KERNEL void scores_tc_wide(const float* q, const float* kb, const float* w, float* s, int nq, int heads,
                               int blocks, int bf16) {
  if (bf16) block_scores_bf16(q, kb, w, s, nq, heads, blocks);
  else block_scores_tf32(q, kb, w, s, nq, heads, blocks);
}
QSA_KERNEL void scores_tc_decode(const float* q, const float* kb, const float* w, float* s, int nq, int heads,
                                 int blocks, int bf16, int stages) {
  if (bf16) block_scores_bf16_decode(q, kb, w, s, nq, heads, blocks, stages);
  else block_scores_tf32_decode(q, kb, w, s, nq, heads, blocks, stages);
}
// sm_90a's wgmma decode scorers (common/scores_decode_wg.h).
#if defined(QSA_WGMMA)
QSA_KERNEL void scores_tc_decode_wg(const float* q, const float* kb, const float* w, float* s, int nq,
                                    int heads, int blocks, int bf16) {
  if (bf16) block_scores_bf16_decode_wg(q, kb, w, s, nq, heads, blocks);
  else block_scores_tf32_decode_wg(q, kb, w, s, nq, heads, blocks);
}
// Their cp.async-ring twins: one warpgroup per CTA (`_wgc`) or two (`_wgc2`), `stages` tiles.
QSA_KERNEL void scores_tc_decode_wgc(const float* q, const float* kb, const float* w, float* s, int nq,
                                     int heads, int blocks, int bf16, int two, int stages) {
  if (two) {
    if (bf16) block_scores_bf16_decode_wgc2(q, kb, w, s, nq, heads, blocks, stages);
    else block_scores_tf32_decode_wgc2(q, kb, w, s, nq, heads, blocks, stages);
  } else {
    if (bf16) block_scores_bf16_decode_wgc(q, kb, w, s, nq, heads, blocks, stages);
    else block_scores_tf32_decode_wgc(q, kb, w, s, nq, heads, blocks, stages);
  }
}
#endif
// sm_90a's wgmma scorers (QSA_WGMMA: the emulated sm_90 stands for that build).
#if defined(QSA_WGMMA)
QSA_KERNEL void scores_tc_wgmma(const float* q, const float* kb, const float* w, float* s, int nq, int heads,
                                int blocks, int bf16) {
  if (bf16) block_scores_bf16_wgmma(q, kb, w, s, nq, heads, blocks);
  else block_scores_tf32_wgmma(q, kb, w, s, nq, heads, blocks);
}
// The A-in-registers kernels (common/scores_wgrs.h): `which` is the index in
// tests/emu_mma_kernels.rs's WGRS list.
QSA_KERNEL void scores_tc_wgrs(const float* q, const float* kb, const float* w, float* s, int nq, int heads,
                               int blocks, int bf16, int which) {
  if (bf16) {
    if (which == 0) block_scores_bf16_wgrs128(q, kb, w, s, nq, heads, blocks);
    else if (which == 2) block_scores_bf16_wgrs256(q, kb, w, s, nq, heads, blocks);
    else if (which == 3) block_scores_bf16_wgrs256p(q, kb, w, s, nq, heads, blocks);
    else if (which == 4) block_scores_bf16_wgrs128s(q, kb, w, s, nq, heads, blocks);
    else if (which == 6) block_scores_bf16_wgrs256ps(q, kb, w, s, nq, heads, blocks);
    else block_scores_bf16_wgrs256o(q, kb, w, s, nq, heads, blocks);
  } else {
    if (which == 0) block_scores_tf32_wgrs128(q, kb, w, s, nq, heads, blocks);
    else if (which == 1) block_scores_tf32_wgrs128p(q, kb, w, s, nq, heads, blocks);
    else if (which == 2) block_scores_tf32_wgrs256(q, kb, w, s, nq, heads, blocks);
    else if (which == 4) block_scores_tf32_wgrs128s(q, kb, w, s, nq, heads, blocks);
    else if (which == 5) block_scores_tf32_wgrs256s(q, kb, w, s, nq, heads, blocks);
    else block_scores_tf32_wgrs256o(q, kb, w, s, nq, heads, blocks);
  }
}
#endif
