// NSA selection attention: forward (o, lse) and backward (dq, dk, dv), bf16 / f16 inputs,
// f32 accumulation. One source for CUDA and HIP through common/portable.h.
//
// Semantics (the contract shared with src/reference/attention.rs):
//   q [batch, q_len, hq, 128], k / v [batch, kv_len, hkv, 128] (u16 element bits),
//   ids [batch, q_len, hkv, t] int32, d_o [batch, q_len, hq, 128] f32.
//   Query token i sits at position kv_len - q_len + i. For (b, i, kv head g) the listed ids
//   are de-duplicated (an id repeated in one list counts once), -1 is "no block", and key
//   token j = id * 64 + r is visible iff j <= q_pos (and so j < kv_len). Query head h reads
//   kv head h / (hq / hkv). logits = scale * q.k; o and lse (natural log) in f32; a query
//   that sees no key gets o = 0, lse = -inf and zero gradients.
//
// Kernels (each instantiated for bf16 and f16; the suffix names the element type):
//   qsa_attn_gather_fwd_*   one wave per (b, i, h), K/V read from global per head: the
//                           error baseline.
//   qsa_attn_gather_bwd_*   the same for the backward, one atomic per dk / dv element.
//   qsa_attn_staged_fwd_*   one CTA per (b, tile of query tokens, kv head, chunk of the
//                           group's heads, split): every selected block's K and V staged
//                           once in shared memory / LDS for all rows (heads x tokens) of the
//                           CTA; double-buffered (cp.async on sm_80+) when the host passes
//                           nbuf = 2; online softmax in f32. With splits > 1 each CTA writes
//                           a partial (o, lse) and qsa_attn_combine merges them exactly.
//   qsa_attn_ring_fwd_*     (common/attention_ring_fwd.h, sm_80+ CUDA) the staged forward's
//                           geometry with a cp.async ring of K/V block slots, one barrier per
//                           block and each warp's online softmax in registers: the prefill
//                           forward on sm_80+ but sm_90 (src/dispatch/attention_ring.rs,
//                           choose_forward).
//   qsa_attn_warp_fwd_*     (common/attention_warp_fwd.h, sm_80+ CUDA) one warp per (b, token,
//                           kv head, 16-head chunk), its own cp.async ring, no CTA barrier:
//                           sm_90's prefill forward (src/dispatch/attention_warp.rs).
//   qsa_attn_combine        merges split partials: lse = log sum exp, o = weighted mean.
//   qsa_attn_staged_bwd_*   dq, dk, dv with the same staging; dk / dv partials reduced over
//                           the CTA's rows before one global atomic per element and block.
//                           With kv_grads = 0 it computes dq (and D = rowsum(dO O) per row,
//                           written to drow) only, for:
//   qsa_attn_kv_bwd_*       dk, dv KV-block-major (sm_80+ CUDA): one CTA per (b, kv head,
//                           kv block) gathers the block's query tokens itself, accumulates in
//                           registers and writes each element once: no atomics, no zero-fill.
//                           qsa_attn_kv16{,s}_*: the same with bf16 m16n8k16 products (sm_90+,
//                           bf16; common/attention_kv_bwd16.h). Given dq, it also adds dQ by
//                           atomics (no query-side pass; D from:
//   qsa_attn_bwd_delta      D = rowsum(dO O), one wave per row).
// On sm_80+ (CUDA) the staged forward's QK^T and PV and the backward's S and dP run on tensor
// cores (mma.sync m16n8k16, f32 accumulation; f32 operands split into 16-bit parts, see
// tc_pv), and the backward's dQ, dK and dV products on tf32 tensor cores (mma.sync m16n8k8,
// f32 operands split into two tf32 parts, see tf32_split); sm_75 and HIP keep the FP32 tiles.
#include "common/portable.h"
// The emulator's module wrapper (src/emu/compile.rs, dynamic_shared_names) defines the dynamic
// shared arrays named in THIS file's text only; the kernel bodies now in common/ declare
// QSA_DYNAMIC_SHARED(smem_raw), so the name is given here (without it the emulated module
// fails to load: "undefined symbol: smem_raw", since the split into common/ headers).

#define ATT_D 128
#define ATT_BLK 64
// Rows (query heads x query tokens) one staged CTA owns.
#define ATT_ROWS 16
#define ATT_THREADS 128
// Staged K / V rows in u16: 128 + 8. The 16-byte pad keeps rows 16-byte aligned for
// vector loads and cp.async, and moves row c to bank 4c: eight lanes reading 16 bytes of
// eight consecutive keys cover all 32 banks (a 16-byte-per-lane request needs two
// wavefronts anyway), so the QK^T and dP loops read without conflicts.
#define KV_STRIDE 136
// f32 rows of q / dO: +4 floats puts rows on different banks for broadcast reads.
#define Q_STRIDE 132
// f32 rows of scores / probabilities: 16-byte aligned for float4 reads.
#define S_STRIDE 68

typedef unsigned short u16;

// ---- element conversion (no vendor half headers: the bits are the contract) ----------------
struct Bf16 {
  static constexpr bool is_bf16 = true;
  static __device__ __forceinline__ float lo(unsigned w) { return qsa_bf16x2_lo(w); }
  static __device__ __forceinline__ float hi(unsigned w) { return qsa_bf16x2_hi(w); }
  static __device__ __forceinline__ float one(u16 b) { return qsa_bf16_to_f32(b); }
};

struct F16 {
  static constexpr bool is_bf16 = false;
  static __device__ __forceinline__ float lo(unsigned w) { return qsa_f16_to_f32((u16)(w & 0xffffu)); }
  static __device__ __forceinline__ float hi(unsigned w) { return qsa_f16_to_f32((u16)(w >> 16)); }
  static __device__ __forceinline__ float one(u16 b) { return qsa_f16_to_f32(b); }
};

QSA_DEVICE float qsa_neg_inf() { return __uint_as_float(0xff800000u); }

// ---- the selection of one (b, i, g): de-duplicated, visible block ids --------------------------
// True when slot s of `list` is the first occurrence of a visible block.
QSA_DEVICE bool qsa_first_visible(const int* list, int s, long long q_pos) {
  const int id = list[s];
  if (id < 0 || (long long)id * ATT_BLK > q_pos) return false;
  for (int u = 0; u < s; ++u)
    if (list[u] == id) return false;
  return true;
}

#include "common/attention_gather.h"
#include "common/attention_staged.h"
#include "common/attention_tc.h"
#include "common/attention_staged_kernels.h"
#include "common/attention_kv_bwd.h"

// Merge split partials: one CTA of ATT_D threads per (b, i, h) row.
// qsa:block 128
QSA_KERNEL void __launch_bounds__(ATT_D) qsa_attn_combine(const float* __restrict__ o_part,
                                                          const float* __restrict__ lse_part,
                                                          float* __restrict__ o, float* __restrict__ lse,
                                                          long long rows, int nsplit) {
  const long long row = blockIdx.x;
  if (row >= rows) return;
  const int d = threadIdx.x;
  float mx = qsa_neg_inf();
  for (int sp = 0; sp < nsplit; ++sp) mx = fmaxf(mx, lse_part[sp * rows + row]);
  if (mx == qsa_neg_inf()) {
    o[row * ATT_D + d] = 0.f;
    if (d == 0) lse[row] = qsa_neg_inf();
    return;
  }
  float sum = 0.f, acc = 0.f;
  for (int sp = 0; sp < nsplit; ++sp) {
    const float w = expf(lse_part[sp * rows + row] - mx);  // -inf partial: w = 0
    sum += w;
    acc += w * o_part[(sp * rows + row) * ATT_D + d];
  }
  o[row * ATT_D + d] = acc / sum;
  if (d == 0) lse[row] = mx + logf(sum);
}

// D = rowsum(dO O) per (b, i, h) row for the fused KV-block-major backward (QSA_ATTN_BWD=kvdq),
// which has no query-side pass to compute it: one wave per row, rows of 128 f32.
// qsa:block 256
QSA_KERNEL void __launch_bounds__(256) qsa_attn_bwd_delta(const float* __restrict__ o,
                                                          const float* __restrict__ d_o,
                                                          float* __restrict__ drow, long long rows) {
  const long long row = (long long)blockIdx.x * (256 / QSA_WAVE) + threadIdx.x / QSA_WAVE;
  if (row >= rows) return;
  float sum = 0.f;
  for (int d = qsa_lane(); d < ATT_D; d += QSA_WAVE) sum += d_o[row * ATT_D + d] * o[row * ATT_D + d];
  sum = qsa_wave_sum(sum);
  if (qsa_lane() == 0) drow[row] = sum;
}

// The same with dO given as bf16 (`do_dtype=bf16`; the fused backward's kvwg2ab reads it so).
// qsa:block 256
QSA_KERNEL void __launch_bounds__(256) qsa_attn_bwd_delta_do16(const float* __restrict__ o,
                                                               const u16* __restrict__ d_o,
                                                               float* __restrict__ drow, long long rows) {
  const long long row = (long long)blockIdx.x * (256 / QSA_WAVE) + threadIdx.x / QSA_WAVE;
  if (row >= rows) return;
  float sum = 0.f;
  for (int d = qsa_lane(); d < ATT_D; d += QSA_WAVE) sum += qsa_bf16_to_f32(d_o[row * ATT_D + d]) * o[row * ATT_D + d];
  sum = qsa_wave_sum(sum);
  if (qsa_lane() == 0) drow[row] = sum;
}

// dO given as bf16, widened to f32 for the backward kernels that read f32 rows (every one but
// kvwg2ab): exact, a bf16 is an f32 with 16 low zero bits.
// qsa:block 256
QSA_KERNEL void __launch_bounds__(256) qsa_attn_do_widen(const u16* __restrict__ d_o16, float* __restrict__ d_o,
                                                          long long n) {
  for (long long i = (long long)blockIdx.x * 256 + threadIdx.x; i < n; i += (long long)gridDim.x * 256)
    d_o[i] = qsa_bf16_to_f32(d_o16[i]);
}

#include "common/attention_ring_fwd.h"

// Launch shapes for the resource report (xtask/src/build/annotations.rs). The staged
// kernels' dynamic shared memory is the single-buffered size at t = 16 ids per list, what
// src/dispatch/attention.rs::staged_plan picks for the matrix's cases on every target.
// qsa:block 256 for qsa_attn_gather_fwd_bf16
// qsa:block 256 for qsa_attn_gather_fwd_f16
// qsa:block 256 for qsa_attn_gather_bwd_bf16
// qsa:block 256 for qsa_attn_gather_bwd_f16
// qsa:block 128 for qsa_attn_staged_fwd_bf16
// qsa:block 128 for qsa_attn_staged_fwd_f16
// qsa:block 128 for qsa_attn_staged_bwd_bf16
// qsa:block 128 for qsa_attn_staged_bwd_f16
// qsa:dynamic_shared 48080 for qsa_attn_staged_fwd_bf16
// qsa:dynamic_shared 48080 for qsa_attn_staged_fwd_f16
// qsa:block 128 for qsa_attn_ring_fwd_bf16
// qsa:block 128 for qsa_attn_ring_fwd_f16
// qsa:dynamic_shared 69904 for qsa_attn_ring_fwd_bf16
// qsa:dynamic_shared 69904 for qsa_attn_ring_fwd_f16
// qsa:block 128 for qsa_attn_ring_qs_fwd_bf16
// qsa:block 128 for qsa_attn_ring_qs_fwd_f16
// qsa:dynamic_shared 56848 for qsa_attn_ring_qs_fwd_bf16
// qsa:dynamic_shared 56848 for qsa_attn_ring_qs_fwd_f16
// qsa:block 128 for qsa_attn_ring_sw_fwd_bf16
// qsa:block 128 for qsa_attn_ring_sw_fwd_f16
// qsa:dynamic_shared 65808 for qsa_attn_ring_sw_fwd_bf16
// qsa:dynamic_shared 65808 for qsa_attn_ring_sw_fwd_f16
// qsa:dynamic_shared 60880 for qsa_attn_staged_bwd_bf16
// qsa:dynamic_shared 60880 for qsa_attn_staged_bwd_f16
// qsa_attn_kv_bwd_bf16, qsa_attn_kv_bwd_f16, qsa_attn_kv_dq_bwd_bf16 and qsa_attn_kv_dq_bwd_f16
// exist in sm_80+ CUDA builds only (QSA_ATTN_MMA).
// qsa:block 256 for qsa_attn_kv_bwd_bf16
// qsa:block 256 for qsa_attn_kv_bwd_f16
// qsa:dynamic_shared 70560 for qsa_attn_kv_bwd_bf16
// qsa:dynamic_shared 70560 for qsa_attn_kv_bwd_f16
// qsa:block 256 for qsa_attn_kv_dq_bwd_bf16
// qsa:block 256 for qsa_attn_kv_dq_bwd_f16
// qsa:dynamic_shared 70560 for qsa_attn_kv_dq_bwd_bf16
// qsa:dynamic_shared 70560 for qsa_attn_kv_dq_bwd_f16
// qsa_attn_kv16_bwd_bf16 and qsa_attn_kv16_dq_bwd_bf16: the same kernels with bf16 products
// (QSA_ATTN_KV_MMA=bf16, common/attention_kv_bwd16.h), sm_90+ CUDA and bf16 only; the fused one
// keeps dS's bf16 rows after the rest of the layout.
// qsa:block 256 for qsa_attn_kv16_bwd_bf16
// qsa:dynamic_shared 70560 for qsa_attn_kv16_bwd_bf16
// qsa:block 256 for qsa_attn_kv16_dq_bwd_bf16
// qsa:dynamic_shared 75168 for qsa_attn_kv16_dq_bwd_bf16
// qsa_attn_kv16s_bwd_bf16 and qsa_attn_kv16s_dq_bwd_bf16 (QSA_ATTN_KV_MMA=bf16s): dO's three
// bf16 parts after the rest of the layout (then, fused, dS's rows).
// qsa:block 256 for qsa_attn_kv16s_bwd_bf16
// qsa:dynamic_shared 83616 for qsa_attn_kv16s_bwd_bf16
// qsa:block 256 for qsa_attn_kv16s_dq_bwd_bf16
// qsa:dynamic_shared 88224 for qsa_attn_kv16s_dq_bwd_bf16
// qsa_attn_kv16sp1_dq_bwd_bf16 and qsa_attn_kv16sc_dq_bwd_bf16: the fused split kernel's sweep
// forms (QSA_ATTN_KV_DQ_FORM below; sm_90+ CUDA, bf16); nc: P / dP rows at KVC_S_STRIDE (76
// floats, +1,024 bytes).
// qsa:block 256 for qsa_attn_kv16sp1_dq_bwd_bf16
// qsa:dynamic_shared 88224 for qsa_attn_kv16sp1_dq_bwd_bf16
// qsa:block 256 for qsa_attn_kv16sc_dq_bwd_bf16
// qsa:dynamic_shared 89248 for qsa_attn_kv16sc_dq_bwd_bf16
// qsa_attn_kv16sp2_dq_bwd_bf16: dO in two bf16 parts for dP (the default's layout, its third
// part's rows unused).
// qsa:block 256 for qsa_attn_kv16sp2_dq_bwd_bf16
// qsa:dynamic_shared 88224 for qsa_attn_kv16sp2_dq_bwd_bf16
// qsa_attn_kvwg_dq_bwd_bf16: the wgmma form, 64-row tiles, one warpgroup (sm_90a only).
// qsa:block 128 for qsa_attn_kvwg_dq_bwd_bf16
// qsa:dynamic_shared 132368 for qsa_attn_kvwg_dq_bwd_bf16
// qsa:block 128 for qsa_attn_kvwgp_dq_bwd_bf16
// qsa:dynamic_shared 182288 for qsa_attn_kvwgp_dq_bwd_bf16
// qsa_attn_kvwg2_dq_bwd_bf16: two warpgroups per block, alternate tiles (sm_90a only).
// qsa:block 256 for qsa_attn_kvwg2_dq_bwd_bf16
// qsa:dynamic_shared 215584 for qsa_attn_kvwg2_dq_bwd_bf16
// qsa_attn_kvwg2a_dq_bwd_bf16: the same, dO landing chunk-major (conflict-free split).
// qsa:block 256 for qsa_attn_kvwg2a_dq_bwd_bf16
// qsa:dynamic_shared 216608 for qsa_attn_kvwg2a_dq_bwd_bf16
// qsa_attn_kvwg2a3_dq_bwd_bf16: wg2a with dO in three parts for dP (the third over the landing).
// qsa:block 256 for qsa_attn_kvwg2a3_dq_bwd_bf16
// qsa:dynamic_shared 216608 for qsa_attn_kvwg2a3_dq_bwd_bf16
// qsa_attn_kvwg2ab_dq_bwd_bf16: wg2a with dO given as bf16 (one part, no split).
// qsa:block 256 for qsa_attn_kvwg2ab_dq_bwd_bf16
// qsa:dynamic_shared 216608 for qsa_attn_kvwg2ab_dq_bwd_bf16
#define QSA_ATTN_INSTANCES(SUF, E)                                                                      \
  QSA_KERNEL void __launch_bounds__(256)                                                                \
      qsa_attn_gather_fwd_##SUF(const u16* q, const u16* k, const u16* v, const int* ids, float* o,   \
                                float* lse, int batch, int q_len, int kv_len, int hq, int hkv, int t,  \
                                float scale) {                                                         \
    gather_fwd<E>(q, k, v, ids, o, lse, batch, q_len, kv_len, hq, hkv, t, scale);                    \
  }                                                                                                    \
  QSA_KERNEL void __launch_bounds__(256)                                                                \
      qsa_attn_gather_bwd_##SUF(const u16* q, const u16* k, const u16* v, const int* ids,             \
                                const float* o, const float* lse, const float* d_o, float* dq,         \
                                float* dk, float* dv, int batch, int q_len, int kv_len, int hq,        \
                                int hkv, int t, float scale) {                                         \
    gather_bwd<E>(q, k, v, ids, o, lse, d_o, dq, dk, dv, batch, q_len, kv_len, hq, hkv, t, scale);   \
  }                                                                                                    \
  QSA_KERNEL void __launch_bounds__(ATT_THREADS)                                                        \
      qsa_attn_staged_fwd_##SUF(const u16* q, const u16* k, const u16* v, const int* ids, float* o,   \
                                float* lse, int batch, int q_len, int kv_len, int hq, int hkv, int t,  \
                                float scale, int hc, int qt, int nbuf) {                               \
    staged_fwd<E>(q, k, v, ids, o, lse, batch, q_len, kv_len, hq, hkv, t, scale, hc, qt, nbuf);      \
  }                                                                                                    \
  QSA_KERNEL void __launch_bounds__(ATT_THREADS)                                                        \
      qsa_attn_staged_bwd_##SUF(const u16* q, const u16* k, const u16* v, const int* ids,             \
                                const float* o, const float* lse, const float* d_o, float* dq,         \
                                float* dk, float* dv, float* drow, int batch, int q_len, int kv_len,   \
                                int hq, int hkv, int t, float scale, int hc, int qt, int nbuf,         \
                                int kv_grads) {                                                        \
    staged_bwd<E>(q, k, v, ids, o, lse, d_o, dq, dk, dv, drow, batch, q_len, kv_len, hq, hkv, t, scale, \
                  hc, qt, nbuf, kv_grads);                                                             \
  }
// NAME: kv (3xTF32 products), kv16 (bf16 products, B16; Bf16 only) or kv16s (bf16 products, dO
// split once per tile: SPLIT). QSA_ATTN_KV_ONE: the kernel without dQ only.
#define QSA_ATTN_KV_ONE(NAME, SUF, E, B16, SPLIT)                                                       \
  QSA_KERNEL void KVB_BOUNDS                                                                            \
      qsa_attn_##NAME##_bwd_##SUF(const u16* q, const u16* k, const u16* v, const int* ids,             \
                                  const float* lse, const float* drow, const float* d_o, float* dk,    \
                                  float* dv, int batch, int q_len, int kv_len, int hq, int hkv, int t, \
                                  float scale, int hc, int qt, int dp_parts) {                         \
    kv_bwd<E, false, B16, SPLIT>(q, k, v, ids, lse, drow, d_o, dk, dv, nullptr, batch, q_len, kv_len, hq, hkv, \
                                 t, scale, hc, qt, dp_parts);                                          \
  }
#define QSA_ATTN_KV_INSTANCE(NAME, SUF, E, B16, SPLIT)                                                  \
  QSA_ATTN_KV_ONE(NAME, SUF, E, B16, SPLIT)                                                             \
  QSA_KERNEL void KVB_BOUNDS                                                                            \
      qsa_attn_##NAME##_dq_bwd_##SUF(const u16* q, const u16* k, const u16* v, const int* ids,          \
                                     const float* lse, const float* drow, const float* d_o, float* dk, \
                                     float* dv, float* dq, int batch, int q_len, int kv_len, int hq,   \
                                     int hkv, int t, float scale, int hc, int qt, int dp_parts) {      \
    kv_bwd<E, true, B16, SPLIT>(q, k, v, ids, lse, drow, d_o, dk, dv, dq, batch, q_len, kv_len, hq, hkv, t,   \
                                scale, hc, qt, dp_parts);                                              \
  }
// The fused bf16 split kernel with kv_bwd's OPT bits (no unfused twin: the sweep measures the
// default path's kernel).
#define QSA_ATTN_KV_DQ_FORM(NAME, OPT)                                                                 \
  QSA_KERNEL void KVB_BOUNDS                                                                            \
      qsa_attn_##NAME##_dq_bwd_bf16(const u16* q, const u16* k, const u16* v, const int* ids,          \
                                    const float* lse, const float* drow, const float* d_o, float* dk,  \
                                    float* dv, float* dq, int batch, int q_len, int kv_len, int hq,    \
                                    int hkv, int t, float scale, int hc, int qt, int dp_parts) {       \
    kv_bwd<Bf16, true, true, true, OPT>(q, k, v, ids, lse, drow, d_o, dk, dv, dq, batch, q_len, kv_len, hq,   \
                                        hkv, t, scale, hc, qt, dp_parts);                               \
  }

QSA_ATTN_INSTANCES(bf16, Bf16)
QSA_ATTN_INSTANCES(f16, F16)
#if defined(QSA_ATTN_MMA)
QSA_ATTN_KV_INSTANCE(kv, bf16, Bf16, false, false)
QSA_ATTN_KV_INSTANCE(kv, f16, F16, false, false)
// The bf16-product kernels: sm_90+ (sm_86's build spilled 8-16 bytes; src/dispatch/attention.rs,
// kv_products, falls back to the tf32 kernels elsewhere).
#if __CUDA_ARCH__ >= 900
QSA_ATTN_KV_INSTANCE(kv16, bf16, Bf16, true, false)
QSA_ATTN_KV_INSTANCE(kv16s, bf16, Bf16, true, true)
// The fused split kernel's sweep forms (kv_bwd's OPT, KV_OPT_* in common/attention_kv_bwd.h):
// kv16sp1 P / dS in one bf16 part (QSA_ATTN_KV_PS_PARTS=1, fla's precision: a measurement form;
// 8 bytes of spills at the 128-register bound, reviewed: see attention_kv_bwd16.h), kv16sc the
// conflict-free shared layout (QSA_ATTN_KV_LAYOUT=nc, 127 registers, no spills). Not built, as
// they spilled (ptxas 13.0, sm_90, 2026-12-02): nc with dO in two parts (16 bytes), nc with one
// P / dS part (8 bytes).
QSA_ATTN_KV_DQ_FORM(kv16sp1, KV_OPT_P1)
QSA_ATTN_KV_DQ_FORM(kv16sc, KV_OPT_NC)
// kv16sp2: dO in two bf16 parts for dP (QSA_ATTN_KV_DP_PARTS=2 with the split kernel).
QSA_ATTN_KV_DQ_FORM(kv16sp2, KV_OPT_DO2)
#endif
// qsa_attn_kvwg_dq_bwd_bf16 (QSA_ATTN_KV_MMA=wg): one warpgroup per (batch, KV head, block),
// 64-row tiles on wgmma (common/attention_kv_wg.h); sm_90a only (QSA_WGMMA).
// qsa_attn_kvwgp_dq_bwd_bf16 (QSA_ATTN_KV_MMA=wgp): the same with two row buffers, tile n + 1's
// rows copied while tile n computes.
#if defined(QSA_WGMMA)
#define QSA_ATTN_KVWG_INSTANCE(NAME, PIPE, NWG, CM, DP3, DO16, DOT)                                               \
  QSA_KERNEL void __launch_bounds__(NWG * KWG_THREADS, 1)                                                 \
      qsa_attn_##NAME##_dq_bwd_bf16(const u16* q, const u16* k, const u16* v, const int* ids, const float* lse, \
                                    const float* drow, const DOT* d_o, float* dk, float* dv, float* dq,      \
                                    int batch, int q_len, int kv_len, int hq, int hkv, int t, float scale,   \
                                    int hc, int qt, int dp_parts, int qchunk) {                              \
    (void)dp_parts; /* the kv kernels' argument list; dO's parts are DP3's (2 or 3) here */                   \
    if (NWG == 1 || threadIdx.x < KWG_THREADS)                                                               \
      kwg_bwd<PIPE, NWG, 0, CM, DP3, DO16>(q, k, v, ids, lse, drow, d_o, dk, dv, dq, batch, q_len, kv_len, hq, hkv, t, scale, hc, qt, qchunk); \
    else                                                                                                     \
      kwg_bwd<PIPE, NWG, NWG - 1, CM, DP3, DO16>(q, k, v, ids, lse, drow, d_o, dk, dv, dq, batch, q_len, kv_len, hq, hkv, t, scale, hc, qt, qchunk); \
  }
QSA_ATTN_KVWG_INSTANCE(kvwg, false, 1, false, false, false, float)
QSA_ATTN_KVWG_INSTANCE(kvwgp, true, 1, false, false, false, float)
// qsa_attn_kvwg2_dq_bwd_bf16 (QSA_ATTN_KV_MMA=wg2): two warpgroups per block, tiles alternating.
QSA_ATTN_KVWG_INSTANCE(kvwg2, false, 2, false, false, false, float)
// qsa_attn_kvwg2a_dq_bwd_bf16 (QSA_ATTN_KV_MMA=wg2a): kvwg2 with dO landing chunk-major, so that
// the split's reads and hi / lo stores are free of bank conflicts.
QSA_ATTN_KVWG_INSTANCE(kvwg2a, false, 2, true, false, false, float)
// qsa_attn_kvwg2a3_dq_bwd_bf16 (QSA_ATTN_KV_MMA=wg2a, QSA_ATTN_KV_DP_PARTS=3): wg2a with dO in
// three bf16 parts for dP, the third written over the landing (no more shared memory).
QSA_ATTN_KVWG_INSTANCE(kvwg2a3, false, 2, true, true, false, float)
// qsa_attn_kvwg2ab_dq_bwd_bf16 (the fused backward with dO given as bf16, `do_dtype=bf16`): wg2a
// with dO exact in one part, copied straight into wgmma's operand (no landing, no split).
QSA_ATTN_KVWG_INSTANCE(kvwg2ab, false, 2, true, false, true, u16)
#endif
#endif
// qsa_attn_ring_fwd_bf16, qsa_attn_ring_fwd_f16, (q in shared memory, four CTAs per SM)
// qsa_attn_ring_qs_fwd_bf16, qsa_attn_ring_qs_fwd_f16 and the swizzled-slot twins of the first
// two, qsa_attn_ring_sw_fwd_bf16, qsa_attn_ring_sw_fwd_f16 (common/attention_ring_fwd.h; sm_90+
// only; the q-in-shared one spilled 16 bytes at 128 registers swizzled, so it is not built)
// exist where the staged kernels run on tensor cores only: sm_80+ CUDA.
#if defined(QSA_ATTN_MMA)
QSA_ATTN_RING_INSTANCE(ring, bf16, Bf16, false, false, RING_MIN_CTAS)
QSA_ATTN_RING_INSTANCE(ring, f16, F16, false, false, RING_MIN_CTAS)
QSA_ATTN_RING_INSTANCE(ring_qs, bf16, Bf16, true, false, RING_QS_MIN_CTAS)
QSA_ATTN_RING_INSTANCE(ring_qs, f16, F16, true, false, RING_QS_MIN_CTAS)
#if __CUDA_ARCH__ >= 900  // sm_86's build of it spilled 8 bytes (cargo xtask build, 2026-12-02)
QSA_ATTN_RING_INSTANCE(ring_sw, bf16, Bf16, false, true, RING_MIN_CTAS)
QSA_ATTN_RING_INSTANCE(ring_sw, f16, F16, false, true, RING_MIN_CTAS)
#endif
#endif
// qsa_attn_warp_fwd_bf16, qsa_attn_warp_fwd_f16 (common/attention_warp_fwd.h): one warp per
// (batch, token, kv head, 16-head chunk), its own cp.async ring, no CTA barrier; sm_80+ CUDA.
// Resource report shape: one warp, two 16 KB slots (src/dispatch/attention_warp.rs's default).
// qsa:block 32 for qsa_attn_warp_fwd_bf16
// qsa:block 32 for qsa_attn_warp_fwd_f16
// qsa:dynamic_shared 32768 for qsa_attn_warp_fwd_bf16
// qsa:dynamic_shared 32768 for qsa_attn_warp_fwd_f16
// qsa_attn_warp_h_fwd_bf16, qsa_attn_warp_h_fwd_f16: the same with 32-key pieces (8 KB slots),
// four slots per warp. All four exist in sm_80+ CUDA builds only (QSA_ATTN_MMA).
// qsa:block 32 for qsa_attn_warp_h_fwd_bf16
// qsa:block 32 for qsa_attn_warp_h_fwd_f16
// qsa:dynamic_shared 32768 for qsa_attn_warp_h_fwd_bf16
// qsa:dynamic_shared 32768 for qsa_attn_warp_h_fwd_f16
#include "common/attention_warp_fwd.h"
#if defined(QSA_ATTN_MMA)
QSA_ATTN_WARP_INSTANCE(warp, bf16, Bf16, 64)
QSA_ATTN_WARP_INSTANCE(warp, f16, F16, 64)
QSA_ATTN_WARP_INSTANCE(warp_h, bf16, Bf16, 32)
QSA_ATTN_WARP_INSTANCE(warp_h, f16, F16, 32)
#endif

// The decode forward (kernels/common/attention_decode.h), in this family's code object: one
// unit per softmax step, and bf16's two units per step (`_pair_`; f16 has no registers for it).
// Resource report shape: 4 warps x 1 stage, the smallest plan (src/dispatch/attention_decode.rs
// sizes the ring per target; every target's 64 KiB must hold the declared figure).
// qsa:block 128 for qsa_attn_dec_fwd_bf16
// qsa:block 128 for qsa_attn_dec_fwd_f16
// qsa:block 128 for qsa_attn_dec_fwd_pair_bf16
// qsa:dynamic_shared 34816 for qsa_attn_dec_fwd_bf16
// qsa:dynamic_shared 34816 for qsa_attn_dec_fwd_f16
// qsa:dynamic_shared 34816 for qsa_attn_dec_fwd_pair_bf16
#include "common/attention_decode.h"
QSA_ATTN_DECODE_INSTANCE(qsa_attn_dec_fwd_bf16, DecBf16, false, false)
QSA_ATTN_DECODE_INSTANCE(qsa_attn_dec_fwd_f16, DecF16, false, false)
QSA_ATTN_DECODE_INSTANCE(qsa_attn_dec_fwd_pair_bf16, DecBf16, true, false)
// The dynamic unit order (QSA_ATTN_DEC_ORDER=dynamic): one unit per step only, same shape.
// qsa:block 128 for qsa_attn_dec_dyn_fwd_bf16
// qsa:block 128 for qsa_attn_dec_dyn_fwd_f16
// qsa:dynamic_shared 34816 for qsa_attn_dec_dyn_fwd_bf16
// qsa:dynamic_shared 34816 for qsa_attn_dec_dyn_fwd_f16
QSA_ATTN_DECODE_INSTANCE(qsa_attn_dec_dyn_fwd_bf16, DecBf16, false, true)
QSA_ATTN_DECODE_INSTANCE(qsa_attn_dec_dyn_fwd_f16, DecF16, false, true)
// The cluster-merge decode kernels (sm_90; a NaN-writing stand-in elsewhere), same shape.
// qsa:block 128 for qsa_attn_dec_cl_fwd_bf16
// qsa:block 128 for qsa_attn_dec_cl_fwd_f16
// qsa:block 128 for qsa_attn_dec_cl_fwd_pair_bf16
// qsa:dynamic_shared 34816 for qsa_attn_dec_cl_fwd_bf16
// qsa:dynamic_shared 34816 for qsa_attn_dec_cl_fwd_f16
// qsa:dynamic_shared 34816 for qsa_attn_dec_cl_fwd_pair_bf16
QSA_ATTN_DECODE_CLUSTER_INSTANCE(qsa_attn_dec_cl_fwd_bf16, DecBf16, false, false)
QSA_ATTN_DECODE_CLUSTER_INSTANCE(qsa_attn_dec_cl_fwd_f16, DecF16, false, false)
QSA_ATTN_DECODE_CLUSTER_INSTANCE(qsa_attn_dec_cl_fwd_pair_bf16, DecBf16, true, false)
// qsa:block 128 for qsa_attn_dec_dyn_cl_fwd_bf16
// qsa:block 128 for qsa_attn_dec_dyn_cl_fwd_f16
// qsa:dynamic_shared 34816 for qsa_attn_dec_dyn_cl_fwd_bf16
// qsa:dynamic_shared 34816 for qsa_attn_dec_dyn_cl_fwd_f16
QSA_ATTN_DECODE_CLUSTER_INSTANCE(qsa_attn_dec_dyn_cl_fwd_bf16, DecBf16, false, true)
QSA_ATTN_DECODE_CLUSTER_INSTANCE(qsa_attn_dec_dyn_cl_fwd_f16, DecF16, false, true)
// The one-level cluster merge (QSA_ATTN_DEC_MERGE=flat), same shape.
// qsa:block 128 for qsa_attn_dec_flat_cl_fwd_bf16
// qsa:block 128 for qsa_attn_dec_flat_cl_fwd_f16
// qsa:dynamic_shared 34816 for qsa_attn_dec_flat_cl_fwd_bf16
// qsa:dynamic_shared 34816 for qsa_attn_dec_flat_cl_fwd_f16
QSA_ATTN_DECODE_FLAT_INSTANCE(qsa_attn_dec_flat_cl_fwd_bf16, DecBf16)
QSA_ATTN_DECODE_FLAT_INSTANCE(qsa_attn_dec_flat_cl_fwd_f16, DecF16)
// q staged once per CTA in shared memory (QSA_ATTN_DEC_QLOAD=cta), the one-unit static-order
// loop, with and without the cluster merge. Shared: the 4 x 1 ring (34816) or the cluster merge's
// 4 warp areas and CTA result (41536), then q's tile (4352).
// qsa:block 128 for qsa_attn_dec_qs_fwd_bf16
// qsa:block 128 for qsa_attn_dec_qs_fwd_f16
// qsa:block 128 for qsa_attn_dec_qs_cl_fwd_bf16
// qsa:block 128 for qsa_attn_dec_qs_cl_fwd_f16
// qsa:dynamic_shared 39168 for qsa_attn_dec_qs_fwd_bf16
// qsa:dynamic_shared 39168 for qsa_attn_dec_qs_fwd_f16
// qsa:dynamic_shared 45888 for qsa_attn_dec_qs_cl_fwd_bf16
// qsa:dynamic_shared 45888 for qsa_attn_dec_qs_cl_fwd_f16
QSA_ATTN_DECODE_QS_INSTANCE(qsa_attn_dec_qs_fwd_bf16, DecBf16)
QSA_ATTN_DECODE_QS_INSTANCE(qsa_attn_dec_qs_fwd_f16, DecF16)
QSA_ATTN_DECODE_QS_CLUSTER_INSTANCE(qsa_attn_dec_qs_cl_fwd_bf16, DecBf16)
QSA_ATTN_DECODE_QS_CLUSTER_INSTANCE(qsa_attn_dec_qs_cl_fwd_f16, DecF16)
// The lean two-level merge (QSA_ATTN_DEC_MERGE=lean): each warp's partial over its own ring, one
// CTA barrier, the CTA's rows pushed to their merging ranks' inboxes past the ring, one cluster
// barrier; with q staged per CTA (QSA_ATTN_DEC_QLOAD=cta) q's tile past the inbox. Shared: the
// 4 x 1 ring (34816) and the inbox (8256), then q's tile (4352).
// qsa:block 128 for qsa_attn_dec_lean_cl_fwd_bf16
// qsa:block 128 for qsa_attn_dec_lean_cl_fwd_f16
// qsa:block 128 for qsa_attn_dec_lean_qs_cl_fwd_bf16
// qsa:block 128 for qsa_attn_dec_lean_qs_cl_fwd_f16
// qsa:dynamic_shared 43072 for qsa_attn_dec_lean_cl_fwd_bf16
// qsa:dynamic_shared 43072 for qsa_attn_dec_lean_cl_fwd_f16
// qsa:dynamic_shared 47424 for qsa_attn_dec_lean_qs_cl_fwd_bf16
// qsa:dynamic_shared 47424 for qsa_attn_dec_lean_qs_cl_fwd_f16
QSA_ATTN_DECODE_LEAN_INSTANCE(qsa_attn_dec_lean_cl_fwd_bf16, DecBf16, false)
QSA_ATTN_DECODE_LEAN_INSTANCE(qsa_attn_dec_lean_cl_fwd_f16, DecF16, false)
QSA_ATTN_DECODE_LEAN_INSTANCE(qsa_attn_dec_lean_qs_cl_fwd_bf16, DecBf16, true)
QSA_ATTN_DECODE_LEAN_INSTANCE(qsa_attn_dec_lean_qs_cl_fwd_f16, DecF16, true)
// O's head dimension split over warp pairs (QSA_ATTN_DEC_DIMS=half; common/attention_decode.h's
// HD): the one-unit static-order loop per item (warps' q loads), and with the cluster merge and q
// staged per CTA (the one-query default's form). Shared: the 4 x 1 ring (34816) or the cluster
// merge's 4 warp areas and CTA result (41536), then q's tile (4352).
// qsa:block 128 for qsa_attn_dec_hd_fwd_bf16
// qsa:block 128 for qsa_attn_dec_hd_fwd_f16
// qsa:block 128 for qsa_attn_dec_hd_qs_cl_fwd_bf16
// qsa:block 128 for qsa_attn_dec_hd_qs_cl_fwd_f16
// qsa:dynamic_shared 34816 for qsa_attn_dec_hd_fwd_bf16
// qsa:dynamic_shared 34816 for qsa_attn_dec_hd_fwd_f16
// qsa:dynamic_shared 45888 for qsa_attn_dec_hd_qs_cl_fwd_bf16
// qsa:dynamic_shared 45888 for qsa_attn_dec_hd_qs_cl_fwd_f16
QSA_ATTN_DECODE_HD_INSTANCE(qsa_attn_dec_hd_fwd_bf16, DecBf16)
QSA_ATTN_DECODE_HD_INSTANCE(qsa_attn_dec_hd_fwd_f16, DecF16)
QSA_ATTN_DECODE_HD_QS_CLUSTER_INSTANCE(qsa_attn_dec_hd_qs_cl_fwd_bf16, DecBf16)
QSA_ATTN_DECODE_HD_QS_CLUSTER_INSTANCE(qsa_attn_dec_hd_qs_cl_fwd_f16, DecF16)
// K/V rows by cp.async.bulk (the TMA) into the same ring, one mbarrier per warp stage
// (QSA_ATTN_DEC_COPY=bulk; common/attention_decode_unit.h dec_issue_bulk): the one-unit
// static-order loop, with and without the cluster merge; sm_90a builds only (QSA_WGMMA). Shared:
// the 4 x 1 ring (34816) or the cluster merge's 4 warp areas and CTA result (41536), then the
// warps' mbarriers (4 x 1 x 8 bytes).
#if defined(QSA_WGMMA)
// qsa:block 128 for qsa_attn_dec_bk_fwd_bf16
// qsa:block 128 for qsa_attn_dec_bk_fwd_f16
// qsa:block 128 for qsa_attn_dec_bk_cl_fwd_bf16
// qsa:block 128 for qsa_attn_dec_bk_cl_fwd_f16
// qsa:dynamic_shared 34848 for qsa_attn_dec_bk_fwd_bf16
// qsa:dynamic_shared 34848 for qsa_attn_dec_bk_fwd_f16
// qsa:dynamic_shared 41568 for qsa_attn_dec_bk_cl_fwd_bf16
// qsa:dynamic_shared 41568 for qsa_attn_dec_bk_cl_fwd_f16
QSA_ATTN_DECODE_BK_INSTANCE(qsa_attn_dec_bk_fwd_bf16, DecBf16)
QSA_ATTN_DECODE_BK_INSTANCE(qsa_attn_dec_bk_fwd_f16, DecF16)
QSA_ATTN_DECODE_BK_CLUSTER_INSTANCE(qsa_attn_dec_bk_cl_fwd_bf16, DecBf16)
QSA_ATTN_DECODE_BK_CLUSTER_INSTANCE(qsa_attn_dec_bk_cl_fwd_f16, DecF16)
#endif
