// NSA selection-attention DECODE forward (sm_80+ CUDA tensor cores): the device code of
// qsa_attn_dec_fwd_{bf16,f16}, instantiated at the end of kernels/selection_attention.cu (one
// code object per family: the runner, the emulator and the benches load kernels by family).
// Self-contained: it shares no helper with the staged kernels, so either side can change.
//
// Semantics: those of selection_attention.cu's header (the contract of
// src/reference/attention.rs): de-duplicated ids, -1 = no block, key j visible iff
// j <= q_pos = kv_len - q_len + i, a query that sees no key gets o = 0, lse = -inf.
//
// Why a decode kernel: at decode the staged kernel's CTA walks its blocks with three CTA
// barriers per block and one 32 KB copy in flight, so the GPU waits on copy latency (H200,
// 16 q x 8 KV heads at 262K: 41 us for 67 MB, 38% of HBM; 1 query: 17 us for 4 MB).
// Here every WARP is an independent flash-decoding worker:
//   - work item = (b, query token i, kv head g, chunk of 16 query heads): M = 16 rows;
//   - its de-duplicated visible blocks are cut into sub-tiles of 16 keys ("units"; a block's
//     units stop at the causal edge), and the units are dealt out contiguously to the
//     grid.y splits of the item, then to the warps of each CTA;
//   - each warp streams its units through its own cp.async ring of `stages` sub-tiles (K and
//     V, 8.5 KB a stage), so up to warps x stages x 8.5 KB per CTA are in flight, with no CTA
//     barrier in the loop (only __syncwarp);
//   - q stays in registers as mma A fragments; S = q K^T and O += P V run on mma.sync
//     m16n8k16 with the scores' C fragments reused as P's A fragments (no shared memory for
//     P); P is split into 16-bit parts that sum back to it (bf16 hi + mid + lo, f16 hi +
//     lo scaled by 2^12), the precision rule of the staged kernel's tc_pv;
//   - the warps of a CTA merge (m, l, O) in shared memory (one barrier); with one split the
//     CTA writes (o, lse); with several it writes a partial (o, lse) in qsa_attn_combine's
//     layout and then either a second launch (qsa_attn_combine) merges (DEC_MERGE_LAUNCH), or
//     the item's last CTA to finish (ticket in `done`, reset by that CTA) merges in the kernel
//     (DEC_MERGE_TICKET); or (qsa_attn_dec_cl_fwd_*, sm_90) the item's 8 splits are one
//     thread-block cluster and merge through distributed shared memory (DEC_MERGE_CLUSTER).
// Preconditions the host checks (src/dispatch/attention_decode.rs): t <= 32 (one id per
// lane), blockDim.x = 32 x warps, dynamic shared = warps x stages x DEC_STAGE_BYTES (the
// cluster merges: at least the warps' merge areas and the CTA result or inbox after them; the
// `_qs_` kernels: DEC_Q_BYTES more for q's tile, past all of that),
// 1 <= stages <= 4 (2 <= stages with DEC_OPT_PAIR: two units per step), and with the in-kernel
// merge nsplit <= DEC_MAX_MERGE_SPLITS (its weight table, nsplit x 16 + 32 floats, lies over the
// smallest ring: 8704 bytes).
//
// Files: this one (the kernel: the per-warp loop, the entry points), attention_decode_unit.h
// (one unit's copies and mma pieces, the item's unit list), attention_decode_merge.h (the
// CTA, cluster and ticket merges).

#pragma once
#include "attention_decode_merge.h"

// `opts` (src/dispatch/attention_decode.rs, DecodePlan::opts): bits 0-2 a probe, a development
// ablation whose output is NOT the attention (the bench's probe rows, never a dispatch default):
// return at once (the launch floor of the same grid, block, shared bytes and cluster shape), no
// K/V copies (the math on whatever the ring holds), the copies without the math (o = 0,
// lse = -inf), return once q and the unit list are in registers (the chain's head: launch, ids
// and q loads, the list), return after the loop (everything but the merges). The two last keep
// their values alive through a store no real run takes (dec_sink), so nothing is optimised out.
#define DEC_PROBE_MASK 7
#define DEC_PROBE_LAUNCH 1
#define DEC_PROBE_NO_KV 2
#define DEC_PROBE_NO_MATH 3
#define DEC_PROBE_LIST 4
#define DEC_PROBE_LOOP 5
// 6: return after the CTA level of the merge (the CTA's result in its own shared memory: the pull
// merge's `cres`, the lean merge's own inbox; no remote store, no cluster barrier); 7: the CTA
// level and one cluster barrier (the push / lean merges' pushes included), no cluster-level
// reads or output stores. Together with `loop` they split the merge's time into its levels.
#define DEC_PROBE_CTA 6
#define DEC_PROBE_CLUSTER 7
// Bit 3: the K/V copies ask L2 for whole 256-byte rows (dec_issue's l2_256).
#define DEC_OPT_L2_256 8
// Bit 4 (the cluster kernel): the push merge (dec_cluster_push_merge) instead of the pull one.
#define DEC_OPT_PUSH 16
// Bit 5: a warp takes every nwarp-th unit of its split instead of a contiguous run.
#define DEC_OPT_INTERLEAVE 32
// Bits 6-8: units of L2 look-ahead (0-7) beyond the ring.
#define DEC_OPT_AHEAD_SHIFT 6
// Bit 9: K / V head-major, [batch, hkv, kv_len, D] (FlashInfer's / vLLM's HND cache layout),
// instead of fla's [batch, kv_len, hkv, D]. A property of the call's data, not a tuning knob.
#define DEC_OPT_HND 512
// The lazy rescale's slack (log2 units): p <= 2^8 between rescales.
#define DEC_RESCALE_SLACK 8.f

#if defined(QSA_DEC_MMA)
// A store that never happens in practice (a value equal to an arbitrary NaN pattern) but that
// the compiler cannot rule out: it keeps a probe's values, and the work behind them, alive.
QSA_DEVICE void dec_sink(float* o, float x) {
  if (__float_as_uint(x) == 0x7f8ca5e1u) o[threadIdx.x] = x;
}

// PAIR: two units (32 keys) per softmax step (the *_pair_bf16 kernels). A template, not a
// runtime flag: its second score and P set cost ~10 registers, which keep the one-unit kernel
// from three 4-warp CTAs per SM (sm_90: 166 registers without, 175 with; three need <= 170).
// FLAT (the `_flat_cl_` kernels, QSA_ATTN_DEC_MERGE=flat): the one-level cluster merge
// (dec_flat_merge) instead of the CTA merge and then the cluster's; a template, so the other
// kernels keep their code.
// QS (the `_qs_` kernels, QSA_ATTN_DEC_QLOAD=cta): q staged once per CTA in shared memory
// (dec_stage_q / dec_ldsm_q) instead of each warp's scalar loads; a template for the same reason.
// LEAN (the `_lean_` kernels, QSA_ATTN_DEC_MERGE=lean, sm_90 clusters): the lean two-level merge
// (dec_lean_cta_merge: each warp's partial over its own ring, one CTA barrier, the CTA's rows
// pushed to their merging ranks' inboxes; then dec_cluster_push_merge).
// CL: the cluster kernels (merge is DEC_MERGE_CLUSTER); only they take the merge probes (`cta`,
// `cluster`), so the other kernels keep their code.
// BULK (the `_bk_` kernels, QSA_ATTN_DEC_COPY=bulk, sm_90a): each unit's 32 K/V rows by one
// cp.async.bulk per lane into the same ring, completing on one mbarrier per stage (dec_issue_bulk);
// the one-unit static-order loop only (the host refuses PAIR, DYN, QS, FLAT and the push merge).
// The warps' mbarriers lie past everything else the kernel writes (the ring, the cluster merge's
// areas and CTA result: the host adds warps x stages x 8 bytes).
// HD (the `_hd_` kernels, QSA_ATTN_DEC_DIMS=half): warps 2p and 2p + 1 take the same units (each
// its own ring: K whole, V's half it reads) and split P V by head dimension, warp 2p + h forming
// O's dims [64 h, 64 h + 64): each warp's mma per unit drop from 64 to 40 (q K^T is done by both),
// O's accumulators from 64 registers to 32, and the CTA merge sums nwarp / 2 partials; the
// one-unit static-order loop with the pull merges only (the host refuses the other forms).
template <typename E, bool PAIR, bool DYN, bool FLAT = false, bool QS = false, bool LEAN = false, bool CL = false,
          bool BULK = false, bool HD = false>
QSA_DEVICE void dec_fwd(const dec_u16* __restrict__ q, const dec_u16* __restrict__ k,
                        const dec_u16* __restrict__ v, const int* __restrict__ ids, float* __restrict__ o,
                        float* __restrict__ lse, float* __restrict__ o_part, float* __restrict__ lse_part,
                        unsigned* __restrict__ done, int batch, int q_len, int kv_len, int hq, int hkv, int t,
                        float scale, int stages, int opts, int merge, unsigned item, int split, int nsplit) {
  QSA_DYNAMIC_SHARED(smem_raw);
  __shared__ int last_flag;
  DEC_STAMP(DEC_T_ENTRY);
  const int probe = opts & DEC_PROBE_MASK;
  if (probe == DEC_PROBE_LAUNCH) return;
  const bool copy_kv = probe != DEC_PROBE_NO_KV, math = probe != DEC_PROBE_NO_MATH;
  const bool l2_256 = (opts & DEC_OPT_L2_256) != 0;
  // The push merge arrives at the cluster's split barrier now and waits on it before its first
  // remote store (every CTA has started by then); probes that stop early never merge.
  // The lean merge does the same (its pushes too); the `cta` probe pushes nothing (the pull
  // merge's CTA level for the push kernel, the lean CTA level into its own inbox).
  // (Two spellings of one rule: each keeps ptxas's allocation of the kernels it builds, the
  // kernels without clusters byte-identical to session 11's, the cluster kernels' resources.)
  const bool early = probe != DEC_PROBE_LIST && probe != DEC_PROBE_LOOP && probe != DEC_PROBE_CTA;
  const bool push = CL ? merge == DEC_MERGE_CLUSTER && (opts & DEC_OPT_PUSH) != 0 && early
                       : merge == DEC_MERGE_CLUSTER && (opts & DEC_OPT_PUSH) != 0 && probe != DEC_PROBE_LIST &&
                             probe != DEC_PROBE_LOOP;
  const bool lean_push = LEAN && merge == DEC_MERGE_CLUSTER && early;
#if defined(QSA_HAS_CLUSTERS)
  if (push || lean_push) qsa_cluster_arrive_relaxed();
#else
  (void)push, (void)lean_push;
#endif
  const int lane = qsa_lane(), warp = threadIdx.x / 32, nwarp = blockDim.x / 32;
  const int tg = lane / 4, tt = lane % 4;
  // HD: units are dealt to warp pairs (uwarp of nuw); `half` is this warp's half of O's dims.
  const int uwarp = HD ? warp / 2 : warp, nuw = HD ? nwarp / 2 : nwarp;
  const int half = HD ? warp % 2 : -1;
  constexpr int NJ = HD ? 8 : 16;  // O's n-tiles of 8 dims in this warp
  const DecItem it = dec_item(item, q_len, kv_len, hq, hkv);
  const long long rows_total = (long long)batch * q_len * hq;

  // q's fragments first: their loads overlap the ids' round trip.
  unsigned qa[8][4];
  // QS: one 16-byte copy per thread (its own cp.async group, the oldest), read by ldmatrix only
  // after the ring's prologue, so neither the ids' load nor the first K/V copies queue behind
  // q's. Its tile lies past everything the kernel writes before the loop (the ring) and the
  // cluster merge's CTA result, or the lean merge's inbox (remote pushes may land there while
  // this CTA still reads q), which the host adds (DEC_Q_BYTES).
  dec_u16* qs = nullptr;
  if (QS) {
    const int ring_bytes = nwarp * stages * DEC_STAGE_BYTES;
    const int cl_bytes = LEAN ? ring_bytes + DEC_INBOX_FLOATS * 4
                         : merge == DEC_MERGE_CLUSTER ? (nwarp * DEC_MERGE_FLOATS + DEC_ROWS * DEC_D + DEC_ROWS) * 4
                                                      : 0;
    qs = (dec_u16*)(smem_raw + max(ring_bytes, cl_bytes));
    dec_stage_q(qs, q, it, q_len, hq);
  } else {
    dec_load_q<E>(q, it, q_len, hq, qa);
  }
  // This warp's units: the split's contiguous share, then the warp's.
  const DecList L = dec_list(ids, it, t);
  DEC_STAMP(DEC_T_LIST);
  if (QS && probe == DEC_PROBE_LIST) {  // the same chain head: q in registers, no copy issued
    qsa_cp_async_wait_group<0>();
    QSA_SYNC();
    dec_ldsm_q(qs, qa);
  }
  if (probe == DEC_PROBE_LIST) {
    unsigned x = (unsigned)L.total ^ (unsigned)L.incl;
#pragma unroll
    for (int ks = 0; ks < 8; ++ks)
#pragma unroll
      for (int e = 0; e < 4; ++e) x ^= qa[ks][e];
    dec_sink(o, __uint_as_float(x));
    return;
  }
  const int per_split = (L.total + nsplit - 1) / nsplit;
  const int s_beg = min(L.total, split * per_split), s_end = min(L.total, s_beg + per_split);
  const int per_warp = (s_end - s_beg + nuw - 1) / nuw;
  // The warp's units: a contiguous run, or (DEC_OPT_INTERLEAVE) every nwarp-th of the split's
  // from s_beg + warp, so the CTA's warps stream neighbouring units at the same time (HD: warp
  // pairs, uwarp of nuw, in place of warps).
  const bool inter = (opts & DEC_OPT_INTERLEAVE) != 0;
  const int beg = inter ? s_beg + uwarp : min(s_end, s_beg + uwarp * per_warp);
  const int ustride = inter ? nuw : 1;
  const int n = inter ? max(0, (s_end - beg + nuw - 1) / nuw) : min(s_end, beg + per_warp) - beg;
  // L2 look-ahead (DEC_OPT_AHEAD): unit u + stages + ahead is prefetched into L2 when unit
  // u + stages is issued, so more bytes are on their way from DRAM than the ring holds.
  const int ahead = copy_kv ? (opts >> DEC_OPT_AHEAD_SHIFT) & 7 : 0;
  dec_u16* ring = (dec_u16*)smem_raw + (long long)warp * stages * (2 * DEC_TILE);
  // Elements between consecutive keys (the host bounds hkv): hkv x D in fla's layout, D
  // head-major (DEC_OPT_HND), where a 64-key block of one head is 16 KiB contiguous.
  const bool hnd = (opts & DEC_OPT_HND) != 0;
  const int row = hnd ? DEC_D : hkv * DEC_D;
  const long long lane_off = dec_lane_offset(it, kv_len, hkv, hnd);
  // BULK: this warp's stage mbarriers, and the phase bit each stage's next wait takes.
  unsigned long long* bars = nullptr;
  unsigned phases = 0;
  const long long head_off = BULK ? dec_head_offset(it, kv_len, hkv, hnd) : 0;
  if (BULK) {
    const int ring_bytes = nwarp * stages * DEC_STAGE_BYTES;
    const int cl_bytes = merge == DEC_MERGE_CLUSTER ? (nwarp * DEC_MERGE_FLOATS + DEC_ROWS * DEC_D + DEC_ROWS) * 4 : 0;
    bars = (unsigned long long*)(smem_raw + max(ring_bytes, cl_bytes)) + warp * stages;
    dec_bulk_init(bars, stages);
  }

  // The softmax runs in base 2 (exp2f is one MUFU.EX2; expf adds a range reduction): s2 = s x
  // scale x log2(e), m2 the max p are taken against, qsa_ex2_ftz(s2 - m2) = exp(s - m); m goes back
  // to natural-log units before the merges.
  const float scale2 = scale * 1.4426950408889634f;
  float m[2] = {dec_neg_inf(), dec_neg_inf()};  // rows g, g + 8 (this lane's quad agrees)
  float l[2] = {0.f, 0.f};                       // this lane's part of the row sums
  float acc[NJ][4];
#pragma unroll
  for (int j = 0; j < NJ; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] = 0.f;

  float acc_lo[NJ][4];  // f16's scaled low part of P
#pragma unroll
  for (int j = 0; j < NJ; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc_lo[j][e] = 0.f;
  const bool live[2] = {tg < it.rows, tg + 8 < it.rows};

  // DYN (the `_dyn_` kernels, QSA_ATTN_DEC_ORDER=dynamic): the prologue's units are fixed
  // (warp w's stage s takes s_beg + s x nwarp + w), every later one is claimed from a CTA counter
  // as a stage frees, so a warp whose copies come back late takes fewer units and the warps end
  // together (the 16-query tail is mostly the slowest warp). `dq`: the unit in each ring stage.
  int* next_unit = nullptr;
  DecRingUnits dq = {s_end, s_end, s_end, s_end};
  if (DYN) {
    __shared__ int dec_next;
    next_unit = &dec_next;
    if (threadIdx.x == 0) dec_next = s_beg + nwarp * stages;
    for (int s = 0; s < stages; ++s) {
      const int u = s_beg + s * nwarp + warp;
      if (u < s_end && copy_kv)
        dec_issue(ring + s * 2 * DEC_TILE, k, v, lane_off, row, dec_unit_key(L, u), it.q_pos, l2_256);
      else qsa_cp_async_commit();
      dec_ring_set(dq, s, min(u, s_end));
    }
    QSA_SYNC();  // the counter is set before any claim (the prologue's copies are in flight)
  }
  // Prologue: `stages` groups in flight (empty groups past the warp's units keep the count).
  for (int s = 0; s < stages && !DYN; ++s) {
    if (s < n && copy_kv && BULK)
      dec_issue_bulk(ring + s * 2 * DEC_TILE, bars + s, k, v, head_off, row, dec_unit_key(L, beg + s * ustride), it.q_pos);
    else if (s < n && copy_kv)
      dec_issue(ring + s * 2 * DEC_TILE, k, v, lane_off, row, dec_unit_key(L, beg + s * ustride), it.q_pos, l2_256,
                half);
    else if (!BULK) qsa_cp_async_commit();
  }
  for (int s = stages; s < stages + ahead && s < n && !DYN; ++s)
    dec_prefetch_l2(k, v, lane_off, row, dec_unit_key(L, beg + s * ustride), it.q_pos);
  if (QS) {  // the prologue's copies are in flight: q's group (the oldest) done, then the CTA's
    if (stages >= 4) qsa_cp_async_wait_group<4>();
    else dec_wait(stages);
    QSA_SYNC();  // every thread's chunk of q has landed
    dec_ldsm_q(qs, qa);
  }
  // With PAIR, two units per iteration (32 keys, one softmax step): twice the independent mma
  // chains per warp where one or two warps per scheduler leave latency exposed. bf16 only:
  // f16's second accumulator set leaves no registers for it (ptxas spills).
  const bool pairs = PAIR && E::is_bf16;
  const int step = pairs ? 2 : 1;
  int slot = 0;  // unit u's ring stage (u mod stages, without the division)
  for (int u = 0; DYN || u < n; u += step) {
    // DYN: the stage's unit (past the split's end: none, and none after it either, as a
    // warp's claims grow); the next claim goes out before the math, which hides its latency.
    int claim = 0;
    if (DYN) {
      if (dec_ring_get(dq, slot) >= s_end) break;
      if (lane == 0) claim = atomicAdd(next_unit, 1);
    }
    const bool two = pairs && u + 1 < n;
    const int slot1 = slot + 1 == stages ? 0 : slot + 1;
    const long long key0 = dec_unit_key(L, DYN ? dec_ring_get(dq, slot) : beg + u * ustride);
    const long long key1 = two ? dec_unit_key(L, beg + (u + 1) * ustride) : key0;
    if (!BULK) dec_wait(stages - step);
    else if (copy_kv) dec_bulk_wait(bars + slot, phases, slot);  // unit u < n was issued
    QSA_SYNCWARP();
    if (u == 0) DEC_STAMP(DEC_T_FIRST);
    const dec_u16* ks0 = ring + slot * 2 * DEC_TILE;
    const dec_u16* ks1 = ring + slot1 * 2 * DEC_TILE;
    if (math) {
      float sc[2][4], sd[2][4] = {};
      dec_qk<E>(qa, ks0, tg, tt, sc);
      if (two) dec_qk<E>(qa, ks1, tg, tt, sd);
      // Mask: rows past the chunk's, keys past the causal edge (key0 + off > q_pos, compared as
      // off > lim, 32-bit: only a block's last units can cross the edge), the absent second unit.
      const int lim0 = (int)min(it.q_pos - key0, (long long)DEC_KEYS);
      const int lim1 = two ? (int)min(it.q_pos - key1, (long long)DEC_KEYS) : -1;
      float mx[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        mx[h] = dec_neg_inf();
#pragma unroll
        for (int nn = 0; nn < 2; ++nn)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int off = 8 * nn + 2 * tt + e;
            const float s0 = live[h] && off <= lim0 ? sc[nn][2 * h + e] * scale2 : dec_neg_inf();
            sc[nn][2 * h + e] = s0;
            mx[h] = fmaxf(mx[h], s0);
            if (pairs) {  // compile time: the one-unit kernel has no second set at all
              const float s1 = live[h] && off <= lim1 ? sd[nn][2 * h + e] * scale2 : dec_neg_inf();
              sd[nn][2 * h + e] = s1;
              mx[h] = fmaxf(mx[h], s1);
            }
          }
        mx[h] = fmaxf(mx[h], qsa_shfl_xor(mx[h], 1));
        mx[h] = fmaxf(mx[h], qsa_shfl_xor(mx[h], 2));
      }
      // Online softmax with a lazy rescale: the running max m a row's p are taken against moves
      // only when a new score passes it by more than DEC_RESCALE_SLACK (p <= 2^slack otherwise,
      // exact in fp32 and in P's 16-bit parts, whose split is relative), so most units skip the
      // O rescale (64 FMULs, two exp2). The final (m, l, O) are consistent whatever m is.
      const bool grow = fmaxf(mx[0] - m[0], mx[1] - m[1]) > DEC_RESCALE_SLACK;  // m = -inf: inf
      if (qsa_ballot(grow) != 0) {
        float alpha[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float m_new = fmaxf(m[h], mx[h]);
          alpha[h] = m_new == dec_neg_inf() ? 1.f : qsa_ex2_ftz(m[h] - m_new);  // m = -inf: 0
          l[h] *= alpha[h];
          m[h] = m_new;
        }
#pragma unroll
        for (int j = 0; j < NJ; ++j) {
          acc[j][0] *= alpha[0];
          acc[j][1] *= alpha[0];
          acc[j][2] *= alpha[1];
          acc[j][3] *= alpha[1];
          acc_lo[j][0] *= alpha[0];
          acc_lo[j][1] *= alpha[0];
          acc_lo[j][2] *= alpha[1];
          acc_lo[j][3] *= alpha[1];
        }
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float m_use = m[h] == dec_neg_inf() ? 0.f : m[h];  // no key yet: every s is -inf
        float sum = 0.f;
#pragma unroll
        for (int nn = 0; nn < 2; ++nn)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float p0 = qsa_ex2_ftz(sc[nn][2 * h + e] - m_use);
            sc[nn][2 * h + e] = p0;
            sum += p0;
            if (pairs) {
              const float p1 = qsa_ex2_ftz(sd[nn][2 * h + e] - m_use);
              sd[nn][2 * h + e] = p1;
              sum += p1;
            }
          }
        l[h] += sum;
      }
      const int vdim = HD ? 64 * half : 0;  // the first of this warp's dims of V
      dec_pv<E, NJ>(sc, ks0 + DEC_TILE + vdim, lane, acc, acc_lo);
      if (two) dec_pv<E, NJ>(sd, ks1 + DEC_TILE + vdim, lane, acc, acc_lo);
    }
    QSA_SYNCWARP();  // every lane is done with these stages before they are refilled
    if (DYN) {  // no pairs (the host's check): one stage freed, refilled with the claimed unit
      const int next = qsa_shfl(claim, 0);
      if (next < s_end && copy_kv)
        dec_issue(ring + slot * 2 * DEC_TILE, k, v, lane_off, row, dec_unit_key(L, next), it.q_pos, l2_256);
      else qsa_cp_async_commit();
      dec_ring_set(dq, slot, min(next, s_end));
    }
    for (int x = 0; x < step && !DYN; ++x) {
      const int w = u + x;
      if (w < n && w + stages < n && copy_kv) {
        if (BULK)  // no pairs (the host's check): x = 0, the stage just read
          dec_issue_bulk(ring + slot * 2 * DEC_TILE, bars + slot, k, v, head_off, row,
                         dec_unit_key(L, beg + (w + stages) * ustride), it.q_pos);
        else
          dec_issue(ring + (x == 0 ? slot : slot1) * 2 * DEC_TILE, k, v, lane_off, row,
                    dec_unit_key(L, beg + (w + stages) * ustride), it.q_pos, l2_256, half);
        if (w + stages + ahead < n && ahead > 0)
          dec_prefetch_l2(k, v, lane_off, row, dec_unit_key(L, beg + (w + stages + ahead) * ustride), it.q_pos);
      } else if (!BULK) {
        qsa_cp_async_commit();
      }
    }
    slot += step;
    if (slot >= stages) slot -= stages;
  }
  if (!BULK) dec_wait(0);
  DEC_STAMP(DEC_T_LOOP);
  if (!E::is_bf16) {
#pragma unroll
    for (int j = 0; j < NJ; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[j][e] += acc_lo[j][e] * (1.f / DEC_LO_SCALE);
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += qsa_shfl_xor(l[h], 1);  // whole-row sums over the quad
    l[h] += qsa_shfl_xor(l[h], 2);
    m[h] *= 0.6931471805599453f;  // back to natural-log units (-inf stays -inf)
  }
  if (probe == DEC_PROBE_LOOP) {
    // Every accumulator stays live through a store no real run takes (a NaN-pattern m).
    if (__float_as_uint(m[0]) == 0x7f8ca5e1u) {
#pragma unroll
      for (int j = 0; j < NJ; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[threadIdx.x * 64 + 4 * j + e] = acc[j][e] + l[e / 2];
    }
    return;
  }

  // The CTA's (o, lse): final with one split, a partial (the combine layout) with several, or
  // for the cluster merge in shared memory after the warps' areas.
  const bool in_cluster = merge == DEC_MERGE_CLUSTER;
  float* smem = (float*)smem_raw;
  float* cres = in_cluster ? smem + nwarp * DEC_MERGE_FLOATS : nullptr;
  float* out_o = nsplit > 1 ? o_part + (long long)split * rows_total * DEC_D : o;
  float* out_l = nsplit > 1 ? lse_part + (long long)split * rows_total : lse;
  const long long row0 = ((long long)it.b * q_len + it.i) * hq + it.g * it.group + it.chunk * DEC_ROWS;
#if defined(QSA_HAS_CLUSTERS)
  if constexpr (FLAT) {  // each warp's partial over its own ring's first stage, then one cluster level
    const int area = stages * (DEC_STAGE_BYTES / 4);
    dec_flat_store(smem + (long long)warp * area, m, l, acc);
    if (probe == DEC_PROBE_CTA) return;
    if (probe == DEC_PROBE_CLUSTER) {
      qsa_cluster_sync();
      return;
    }
    dec_flat_merge<DEC_CLUSTER>(smem, area, nwarp, o, lse, row0, it.rows, split);
    return;
  }
  if constexpr (LEAN) {  // (the `_lean_` kernels: a template, so no other kernel has this code)
    if (in_cluster) {
      // Each warp's partial over its own ring (no barrier before it), one CTA barrier, the CTA's
      // rows pushed to their merging ranks' inboxes (past the ring), then the push merge's one
      // cluster barrier and local reads (dec_lean_cta_merge).
      const int area = stages * (DEC_STAGE_BYTES / 4);
      float* inbox = smem + (long long)nwarp * area;
      // The entry arrival's wait (every CTA of the cluster has started, so pushes may land) comes
      // before the stores: on the card it returns at once; the emulator makes it a whole barrier,
      // which after the stores would hide a missing CTA barrier below.
      if (lean_push) qsa_cluster_wait();
      dec_flat_store(smem + (long long)warp * area, m, l, acc);
      QSA_SYNC();  // every warp's partial is stored
      dec_lean_cta_merge<DEC_CLUSTER>(smem, area, nwarp, it.rows, inbox, split, lean_push);
      if (probe == DEC_PROBE_CTA) return;
      if (probe == DEC_PROBE_CLUSTER) {
        qsa_cluster_sync();
        return;
      }
      dec_cluster_push_merge<DEC_CLUSTER>(inbox, o, lse, row0, it.rows, split);
      return;
    }
  }
  if (push) {
    // The inbox lies past both the ring and the warps' merge areas (remote pushes may land
    // while this CTA still runs its loop).
    const long long ring_floats = (long long)nwarp * stages * DEC_STAGE_BYTES / 4;
    const long long areas = (long long)nwarp * DEC_MERGE_FLOATS;
    float* inbox = smem + (ring_floats > areas ? ring_floats : areas);
    qsa_cluster_wait();
    dec_cta_merge<NJ>(smem, m, l, acc, it.rows, out_o, out_l, row0, nullptr, inbox, split);
    if (CL && probe == DEC_PROBE_CLUSTER) {
      qsa_cluster_sync();
      return;
    }
    dec_cluster_push_merge<DEC_CLUSTER>(inbox, o, lse, row0, it.rows, split);
    return;
  }
#endif
  dec_cta_merge<NJ>(smem, m, l, acc, it.rows, out_o, out_l, row0, cres, nullptr, split);
#if defined(QSA_HAS_CLUSTERS)
  if (CL && probe == DEC_PROBE_CTA) return;
  if (CL && probe == DEC_PROBE_CLUSTER) {
    qsa_cluster_sync();
    return;
  }
#endif
  if (in_cluster) {
    dec_cluster_merge<DEC_CLUSTER>(cres, o, lse, row0, it.rows, split);
    DEC_STAMP(DEC_T_END);
    return;
  }
  DEC_STAMP(DEC_T_END);
  if (nsplit == 1 || merge == DEC_MERGE_LAUNCH) return;
  dec_ticket_merge(smem, &last_flag, done, item, nsplit, o_part, lse_part, o, lse, rows_total, row0, it.rows);
}
#else
// Dispatched only where tensor cores are built (src/dispatch/attention_decode.rs); a launch
// elsewhere writes NaN to the item's rows, so that a dispatch mistake fails every check.
template <typename E, bool PAIR, bool DYN, bool FLAT = false, bool QS = false, bool LEAN = false, bool CL = false,
          bool BULK = false, bool HD = false>
QSA_DEVICE void dec_fwd(const dec_u16* __restrict__ q, const dec_u16* __restrict__ k,
                        const dec_u16* __restrict__ v, const int* __restrict__ ids, float* __restrict__ o,
                        float* __restrict__ lse, float* __restrict__ o_part, float* __restrict__ lse_part,
                        unsigned* __restrict__ done, int batch, int q_len, int kv_len, int hq, int hkv, int t,
                        float scale, int stages, int opts, int merge, unsigned item, int split, int nsplit) {
  (void)q, (void)k, (void)v, (void)ids, (void)o_part, (void)lse_part, (void)done, (void)batch, (void)t;
  (void)scale, (void)stages, (void)opts, (void)merge, (void)split, (void)nsplit;
  const DecItem it = dec_item(item, q_len, kv_len, hq, hkv);
  const long long row0 = ((long long)it.b * q_len + it.i) * hq + it.g * it.group + it.chunk * DEC_ROWS;
  for (int e = threadIdx.x; e < it.rows * DEC_D; e += blockDim.x) {
    o[row0 * DEC_D + e] = __uint_as_float(0x7fc00000u);
    if (e % DEC_D == 0) lse[row0 + e / DEC_D] = __uint_as_float(0x7fc00000u);
  }
}
#endif

// Instantiated by kernels/selection_attention.cu, so the kernels belong to its code object.
// NAME: the kernel's symbol; PAIR: dec_fwd's (two units per softmax step, bf16); DYN: dec_fwd's
// (units claimed from a CTA counter; a template, so the static-order kernels keep their code).
// QS: dec_fwd's (q staged per CTA: QSA_ATTN_DECODE_QS_INSTANCE).
// BULK: dec_fwd's (K/V rows by cp.async.bulk: QSA_ATTN_DECODE_BK_INSTANCE, sm_90a builds only).
// HD: dec_fwd's (dims split over warp pairs: QSA_ATTN_DECODE_HD_INSTANCE).
#define QSA_ATTN_DECODE_INSTANCE(NAME, E, PAIR, DYN) QSA_ATTN_DECODE_INSTANCE_Q(NAME, E, PAIR, DYN, false, false, false)
#define QSA_ATTN_DECODE_QS_INSTANCE(NAME, E) QSA_ATTN_DECODE_INSTANCE_Q(NAME, E, false, false, true, false, false)
#define QSA_ATTN_DECODE_BK_INSTANCE(NAME, E) QSA_ATTN_DECODE_INSTANCE_Q(NAME, E, false, false, false, true, false)
#define QSA_ATTN_DECODE_HD_INSTANCE(NAME, E) QSA_ATTN_DECODE_INSTANCE_Q(NAME, E, false, false, false, false, true)
#define QSA_ATTN_DECODE_INSTANCE_Q(NAME, E, PAIR, DYN, QS, BULK, HD)                                    \
  QSA_KERNEL void __launch_bounds__(256)                                                                \
      NAME(const dec_u16* q, const dec_u16* k, const dec_u16* v, const int* ids, float* o, float* lse,  \
           float* o_part, float* lse_part, unsigned* done, int batch, int q_len, int kv_len, int hq,     \
           int hkv, int t, float scale, int stages, int opts, int merge) {                              \
    dec_fwd<E, PAIR, DYN, false, QS, false, false, BULK, HD>(q, k, v, ids, o, lse, o_part, lse_part, done, batch, q_len, kv_len, hq, \
                     hkv, t, scale, stages, opts, merge, blockIdx.x, blockIdx.y, gridDim.y);            \
  }

// The cluster-merge kernel (sm_90): grid (items x DEC_CLUSTER), clusters of DEC_CLUSTER along x,
// one split per CTA; shared memory also holds the CTA's (o, lse) after the warps' areas.
#if defined(QSA_HAS_CLUSTERS)
#define DEC_CLUSTER_ATTR QSA_CLUSTER_DIMS(DEC_CLUSTER)
#define DEC_CLUSTER_RANK() qsa_cluster_rank()
#else  // the NaN-writing stand-in (dec_cluster_merge)
#define DEC_CLUSTER_ATTR
#define DEC_CLUSTER_RANK() (blockIdx.x % DEC_CLUSTER)
#endif
// FLAT: dec_fwd's (the one-level merge: QSA_ATTN_DECODE_FLAT_INSTANCE).
#define QSA_ATTN_DECODE_CLUSTER_INSTANCE(NAME, E, PAIR, DYN) QSA_ATTN_DECODE_CLUSTER_INSTANCE_F(NAME, E, PAIR, DYN, false, false)
#define QSA_ATTN_DECODE_FLAT_INSTANCE(NAME, E) QSA_ATTN_DECODE_CLUSTER_INSTANCE_F(NAME, E, false, false, true, false)
#define QSA_ATTN_DECODE_QS_CLUSTER_INSTANCE(NAME, E) QSA_ATTN_DECODE_CLUSTER_INSTANCE_F(NAME, E, false, false, false, true)
// LEAN: dec_fwd's (the lean merge: QSA_ATTN_DEC_MERGE=lean; QS with QSA_ATTN_DEC_QLOAD=cta too).
#define QSA_ATTN_DECODE_LEAN_INSTANCE(NAME, E, QS) QSA_ATTN_DECODE_CLUSTER_INSTANCE_L(NAME, E, false, false, false, QS, true, false, false)
// BULK: dec_fwd's (K/V rows by cp.async.bulk, sm_90a builds only).
#define QSA_ATTN_DECODE_BK_CLUSTER_INSTANCE(NAME, E) QSA_ATTN_DECODE_CLUSTER_INSTANCE_L(NAME, E, false, false, false, false, false, true, false)
// HD with q staged per CTA (the one-query default's form, dims split over warp pairs).
#define QSA_ATTN_DECODE_HD_QS_CLUSTER_INSTANCE(NAME, E) QSA_ATTN_DECODE_CLUSTER_INSTANCE_L(NAME, E, false, false, false, true, false, false, true)
#define QSA_ATTN_DECODE_CLUSTER_INSTANCE_F(NAME, E, PAIR, DYN, FLAT, QS) \
  QSA_ATTN_DECODE_CLUSTER_INSTANCE_L(NAME, E, PAIR, DYN, FLAT, QS, false, false, false)
#define QSA_ATTN_DECODE_CLUSTER_INSTANCE_L(NAME, E, PAIR, DYN, FLAT, QS, LEAN, BULK, HD)                \
  QSA_KERNEL DEC_CLUSTER_ATTR void __launch_bounds__(256)                                               \
      NAME(const dec_u16* q, const dec_u16* k, const dec_u16* v, const int* ids, float* o, float* lse,  \
           int batch, int q_len, int kv_len, int hq, int hkv, int t, float scale, int stages,           \
           int opts) {                                                                                  \
    dec_fwd<E, PAIR, DYN, FLAT, QS, LEAN, true, BULK, HD>(q, k, v, ids, o, lse, nullptr, nullptr, nullptr, batch, q_len, kv_len, hq, hkv, t, \
                     scale, stages, opts, DEC_MERGE_CLUSTER, blockIdx.x / DEC_CLUSTER,                  \
                     DEC_CLUSTER_RANK(), DEC_CLUSTER);                                                  \
  }
