// The staged (mma.sync, ldmatrix.trans, cp.async on sm_80+) and gather (FP32) selection
// attention kernels of kernels/selection_attention.cu under names of their own, for
// tests/emu_mma_kernels.rs. The emulator builds this file, not selection_attention.cu, so
// only the names below are registered (src/emu/compile.rs reads them from this text, as it
// reads the dynamic shared array the staged kernels use: QSA_DYNAMIC_SHARED(smem_raw)); the
// emulated kernels are plain host functions, so these forward to the real ones.
#include "selection_attention.cu"

QSA_KERNEL void attn_staged_fwd(const u16* q, const u16* k, const u16* v, const int* ids, float* o, float* lse,
                                int batch, int q_len, int kv_len, int hq, int hkv, int t, float scale, int hc,
                                int qt, int nbuf, int bf16) {
  if (bf16) qsa_attn_staged_fwd_bf16(q, k, v, ids, o, lse, batch, q_len, kv_len, hq, hkv, t, scale, hc, qt, nbuf);
  else qsa_attn_staged_fwd_f16(q, k, v, ids, o, lse, batch, q_len, kv_len, hq, hkv, t, scale, hc, qt, nbuf);
}
QSA_KERNEL void attn_gather_fwd(const u16* q, const u16* k, const u16* v, const int* ids, float* o, float* lse,
                                int batch, int q_len, int kv_len, int hq, int hkv, int t, float scale, int bf16) {
  if (bf16) qsa_attn_gather_fwd_bf16(q, k, v, ids, o, lse, batch, q_len, kv_len, hq, hkv, t, scale);
  else qsa_attn_gather_fwd_f16(q, k, v, ids, o, lse, batch, q_len, kv_len, hq, hkv, t, scale);
}
QSA_KERNEL void attn_staged_bwd(const u16* q, const u16* k, const u16* v, const int* ids, const float* o,
                                const float* lse, const float* d_o, float* dq, float* dk, float* dv, float* drow,
                                int batch, int q_len, int kv_len, int hq, int hkv, int t, float scale, int hc, int qt,
                                int nbuf, int kv_grads, int bf16) {
  if (bf16)
    qsa_attn_staged_bwd_bf16(q, k, v, ids, o, lse, d_o, dq, dk, dv, drow, batch, q_len, kv_len, hq, hkv, t, scale,
                             hc, qt, nbuf, kv_grads);
  else
    qsa_attn_staged_bwd_f16(q, k, v, ids, o, lse, d_o, dq, dk, dv, drow, batch, q_len, kv_len, hq, hkv, t, scale, hc,
                            qt, nbuf, kv_grads);
}
// products: 0 the 3xTF32 kernel, 1 the bf16-product kernel (qsa_attn_kv16_*, bf16 only), 2 its
// dO-split twin (qsa_attn_kv16s_*);
// dp_parts: dO's parts in dP (the bf16-product kernel's; the tf32 kernels ignore it).
QSA_KERNEL void attn_kv_bwd(const u16* q, const u16* k, const u16* v, const int* ids, const float* lse,
                            const float* drow, const float* d_o, float* dk, float* dv, int batch, int q_len,
                            int kv_len, int hq, int hkv, int t, float scale, int hc, int qt, int bf16, int products,
                            int dp_parts) {
  if (products == 2)
    qsa_attn_kv16s_bwd_bf16(q, k, v, ids, lse, drow, d_o, dk, dv, batch, q_len, kv_len, hq, hkv, t, scale, hc, qt,
                            dp_parts);
  else if (products == 1)
    qsa_attn_kv16_bwd_bf16(q, k, v, ids, lse, drow, d_o, dk, dv, batch, q_len, kv_len, hq, hkv, t, scale, hc, qt,
                           dp_parts);
  else if (bf16)
    qsa_attn_kv_bwd_bf16(q, k, v, ids, lse, drow, d_o, dk, dv, batch, q_len, kv_len, hq, hkv, t, scale, hc, qt, 3);
  else
    qsa_attn_kv_bwd_f16(q, k, v, ids, lse, drow, d_o, dk, dv, batch, q_len, kv_len, hq, hkv, t, scale, hc, qt, 3);
}
QSA_KERNEL void attn_gather_bwd(const u16* q, const u16* k, const u16* v, const int* ids, const float* o,
                                const float* lse, const float* d_o, float* dq, float* dk, float* dv, int batch,
                                int q_len, int kv_len, int hq, int hkv, int t, float scale, int bf16) {
  if (bf16)
    qsa_attn_gather_bwd_bf16(q, k, v, ids, o, lse, d_o, dq, dk, dv, batch, q_len, kv_len, hq, hkv, t, scale);
  else
    qsa_attn_gather_bwd_f16(q, k, v, ids, o, lse, d_o, dq, dk, dv, batch, q_len, kv_len, hq, hkv, t, scale);
}
