// NSA selection-attention decode forward, part 2 of 3: the merges of partial softmax states
// (m, l, unnormalised O): the warps of a CTA through shared memory, then the splits of a work
// item through a thread-block cluster (sm_90) or the item's last CTA (a ticket). Included by
// common/attention_decode.h; the design is in its header.
#pragma once
#include "attention_decode_unit.h"

#if defined(QSA_DEC_MMA)
// The CTA's merge area, over the rings after the loop: per warp m[16], l[16], O[16][128].
#define DEC_MERGE_FLOATS (2 * DEC_ROWS + DEC_ROWS * DEC_D)
// Warps per CTA at most (blockDim.x <= 256, the kernels' launch bounds).
#define DEC_MAX_WARPS 8

// Column of element (r, d) in a warp's O area: 8-float groups XOR-swizzled by r mod 8, so the
// lane quads' float2 stores of rows tg = 0..7 (one 8-float group each) hit distinct banks (two
// wavefronts a store, where the plain layout took eight: H200 profile of 2026-12-02, 6.9-way
// conflicts on 73% of the merge's shared-store wavefronts); 4-aligned runs of d stay contiguous.
QSA_DEVICE int dec_swizzle(int r, int d) { return d ^ ((r & 7) * 8); }

// The cluster merge (sm_90): the item's NS splits are the CTAs of one cluster, each holding its
// (o, lse) in shared memory at `cres`; after one cluster barrier rank r merges rows r, r + NS,
// ... reading every rank's values through distributed shared memory (no global round trip, no
// ticket), all NS ranks' (lse, o) of an output in one round trip (a loop over a runtime split
// count made them 2 x NS dependent remote loads); a second, relaxed barrier keeps every CTA's
// shared memory alive until all have read it.
template <int NS>
QSA_DEVICE void dec_cluster_merge(const float* cres, float* __restrict__ o, float* __restrict__ lse,
                                  long long row0, int rows, int split) {
  static_assert(DEC_ROWS % NS == 0, "each rank merges DEC_ROWS / NS rows");
#if defined(QSA_HAS_CLUSTERS)
  qsa_cluster_sync();
  for (int e = threadIdx.x; e < DEC_ROWS / NS * DEC_D; e += blockDim.x) {
    const int r = split + NS * (e / DEC_D), d = e % DEC_D;
    if (r >= rows) continue;
    float lv[NS], ov[NS];
#pragma unroll
    for (int c = 0; c < NS; ++c) {
      const float* rc = qsa_cluster_map(cres, c);
      lv[c] = rc[DEC_ROWS * DEC_D + r];
      ov[c] = rc[r * DEC_D + d];
    }
    float M = dec_neg_inf();
#pragma unroll
    for (int c = 0; c < NS; ++c) M = fmaxf(M, lv[c]);
    float sum = 0.f, val = 0.f;
    if (M != dec_neg_inf()) {
#pragma unroll
      for (int c = 0; c < NS; ++c) {
        const float w = expf(lv[c] - M);  // -inf: 0
        sum += w;
        val += w * ov[c];
      }
    }
    const bool none = !(sum > 0.f);
    o[(row0 + r) * DEC_D + d] = none ? 0.f : val / sum;
    if (d == 0) lse[row0 + r] = none ? dec_neg_inf() : M + logf(sum);
  }
  // Only keeps this CTA's shared memory alive for the others' reads (each thread's have returned
  // their values, used above): no release, so no GPU-scope fence waiting on the o stores.
  qsa_cluster_sync_relaxed();
#else
  // No clusters on this target: the kernel exists (one symbol set for every target) but is
  // never dispatched here; a launch writes NaN to the CTA's rows so a dispatch mistake fails.
  (void)cres;
  for (int e = threadIdx.x; e < DEC_ROWS / NS * DEC_D; e += blockDim.x) {
    const int r = split + NS * (e / DEC_D), d = e % DEC_D;
    if (r >= rows) continue;
    o[(row0 + r) * DEC_D + d] = __uint_as_float(0x7fc00000u);
    if (d == 0) lse[row0 + r] = __uint_as_float(0x7fc00000u);
  }
#endif
}

// The push merge (sm_90, DEC_OPT_PUSH): as the cluster merge, but each CTA's merge STORES its
// rows to their merging rank's inbox (row r to rank r mod NS, in the slot of the sending rank)
// before the one cluster barrier, so the merge after it reads local shared memory only: no
// remote-load round trip and no second barrier keeping the CTAs' shared memory alive (nothing
// remote is read). The inbox, [NS x DEC_ROWS / NS] o rows then lse, lies past the ring and the
// warps' merge areas, so a push can land while its owner still runs its loop (the kernel
// waits on the split barrier it arrived at on entry first: every CTA has started).
#define DEC_INBOX_FLOATS (DEC_ROWS * DEC_D + DEC_ROWS)
template <int NS>
QSA_DEVICE void dec_cluster_push_merge(const float* inbox, float* __restrict__ o, float* __restrict__ lse,
                                       long long row0, int rows, int split) {
  static_assert(DEC_ROWS % NS == 0, "each rank merges DEC_ROWS / NS rows");
  constexpr int PER = DEC_ROWS / NS;  // rows a rank merges
#if defined(QSA_HAS_CLUSTERS)
  qsa_cluster_sync();  // every CTA's pushes have landed (release / acquire)
  for (int e = threadIdx.x; e < PER * DEC_D; e += blockDim.x) {
    const int j = e / DEC_D, r = split + NS * j, d = e % DEC_D;
    if (r >= rows) continue;
    float lv[NS], ov[NS];
#pragma unroll
    for (int c = 0; c < NS; ++c) {
      lv[c] = inbox[DEC_ROWS * DEC_D + c * PER + j];
      ov[c] = inbox[(c * PER + j) * DEC_D + d];
    }
    float M = dec_neg_inf();
#pragma unroll
    for (int c = 0; c < NS; ++c) M = fmaxf(M, lv[c]);
    float sum = 0.f, val = 0.f;
    if (M != dec_neg_inf()) {
#pragma unroll
      for (int c = 0; c < NS; ++c) {
        const float w = expf(lv[c] - M);  // -inf: 0
        sum += w;
        val += w * ov[c];
      }
    }
    const bool none = !(sum > 0.f);
    o[(row0 + r) * DEC_D + d] = none ? 0.f : val / sum;
    if (d == 0) lse[row0 + r] = none ? dec_neg_inf() : M + logf(sum);
  }
#else
  (void)inbox;
  for (int e = threadIdx.x; e < PER * DEC_D; e += blockDim.x) {
    const int r = split + NS * (e / DEC_D), d = e % DEC_D;
    if (r >= rows) continue;
    o[(row0 + r) * DEC_D + d] = __uint_as_float(0x7fc00000u);
    if (d == 0) lse[row0 + r] = __uint_as_float(0x7fc00000u);
  }
#endif
}

// Merge the CTA's warps: each writes its (m, l, O unnormalised; m in natural-log units) over its
// own ring, then the CTA's (o, lse) for its `rows` rows goes to rows row0.. of out_o / out_l
// (final with one split; a partial in qsa_attn_combine's layout), or with `cres` (the cluster
// merge) to shared memory after the warps' areas ([16][128] o, then [16] lse), or with `inbox`
// (the push merge) to the inboxes of the cluster's ranks (row r: rank r mod DEC_CLUSTER, the
// slot of this CTA's rank `split`; dec_cluster_push_merge).
QSA_DEVICE void dec_cta_merge(float* smem, const float (&m)[2], const float (&l)[2], const float (&acc)[16][4],
                              int rows, float* __restrict__ out_o, float* __restrict__ out_l, long long row0,
                              float* cres, float* inbox, int split) {
  const int lane = qsa_lane(), warp = threadIdx.x / 32, nwarp = blockDim.x / 32;
  const int tg = lane / 4, tt = lane % 4;
  QSA_SYNC();  // every warp is out of its ring (and its copies have landed)
  float* mine = smem + (long long)warp * DEC_MERGE_FLOATS;
  if (tt == 0) {
    mine[tg] = m[0];
    mine[tg + 8] = m[1];
    mine[DEC_ROWS + tg] = l[0];
    mine[DEC_ROWS + tg + 8] = l[1];
  }
  float* mo = mine + 2 * DEC_ROWS;
#pragma unroll
  for (int j = 0; j < 16; ++j) {  // rows tg and tg + 8 share the swizzle (dec_swizzle)
    const int c = dec_swizzle(tg, 8 * j) + 2 * tt;
    *(float2*)(mo + tg * DEC_D + c) = make_float2(acc[j][0], acc[j][1]);
    *(float2*)(mo + (tg + 8) * DEC_D + c) = make_float2(acc[j][2], acc[j][3]);
  }
  QSA_SYNC();
  // Per row, once: warp w's weight exp(m_w - M) / L over its own m slot, the row's lse in warp
  // 0's l slot; eight lanes per row (lane w: warp w), reduced by shuffles, where one thread per
  // row looped over the warps (each slot is read and written by its own lane only).
  for (int x = threadIdx.x; x < DEC_ROWS * 8; x += blockDim.x) {  // whole warps: 128 % 32 == 0
    const int r = x / 8, w = x % 8;
    const bool on = w < nwarp;
    float* a = smem + w * DEC_MERGE_FLOATS;
    const float mw = on ? a[r] : dec_neg_inf();
    const float lw = on ? a[DEC_ROWS + r] : 0.f;
    float M = mw;
    M = fmaxf(M, qsa_shfl_xor(M, 1));
    M = fmaxf(M, qsa_shfl_xor(M, 2));
    M = fmaxf(M, qsa_shfl_xor(M, 4));
    const float wt = M == dec_neg_inf() ? 0.f : expf(mw - M);  // empty warp: 0
    float sum = wt * lw;
    sum += qsa_shfl_xor(sum, 1);
    sum += qsa_shfl_xor(sum, 2);
    sum += qsa_shfl_xor(sum, 4);
    const bool none = !(sum > 0.f);
    if (on) a[r] = none ? 0.f : wt / sum;
    if (w == 0) a[DEC_ROWS + r] = none ? dec_neg_inf() : M + logf(sum);  // read below
  }
  QSA_SYNC();
  // O: four dims of a row per thread, every warp's float4 of them in flight together (the warp
  // loop unrolled to its bound, DEC_MAX_WARPS).
  for (int e = threadIdx.x; e < DEC_ROWS * DEC_D / 4; e += blockDim.x) {
    const int r = e / (DEC_D / 4), d = 4 * (e % (DEC_D / 4));
    if (r >= rows) continue;
    const int c = dec_swizzle(r, d);
    float4 val = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int w = 0; w < DEC_MAX_WARPS; ++w) {
      if (w < nwarp) {
        const float* ws = smem + w * DEC_MERGE_FLOATS;
        const float wt = ws[r];
        const float4 x = *(const float4*)(ws + 2 * DEC_ROWS + r * DEC_D + c);
        val.x += wt * x.x;
        val.y += wt * x.y;
        val.z += wt * x.z;
        val.w += wt * x.w;
      }
    }
    const float L = smem[DEC_ROWS + r];
#if defined(QSA_HAS_CLUSTERS)
    if (inbox) {
      constexpr int PER = DEC_ROWS / DEC_CLUSTER;
      const int slot = split * PER + r / DEC_CLUSTER;
      float* dst = qsa_cluster_map_store(inbox, (unsigned)(r % DEC_CLUSTER));
      *(float4*)(dst + slot * DEC_D + d) = val;
      if (d == 0) dst[DEC_ROWS * DEC_D + slot] = L;
      continue;
    }
#else
    (void)inbox, (void)split;
#endif
    if (cres) {
      *(float4*)(cres + r * DEC_D + d) = val;
      if (d == 0) cres[DEC_ROWS * DEC_D + r] = L;
    } else {
      *(float4*)(out_o + (row0 + r) * DEC_D + d) = val;
      if (d == 0) out_l[row0 + r] = L;
    }
  }
}

// In-kernel merge of a split item (DEC_MERGE_TICKET): the item's last CTA to finish combines the
// splits' partials (threadFenceReduction pattern; the ticket in done[item] is reset for the next
// call). `last_flag` is a __shared__ int of the kernel.
QSA_DEVICE void dec_ticket_merge(float* smem, int* last_flag, unsigned* __restrict__ done, long long item, int nsplit,
                                 const float* o_part, const float* lse_part, float* __restrict__ o,
                                 float* __restrict__ lse, long long rows_total, long long row0, int rows) {
  __threadfence();
  QSA_SYNC();
  if (threadIdx.x == 0) {
    const unsigned ticket = atomicAdd(&done[item], 1u);
    *last_flag = ticket == (unsigned)nsplit - 1;
    if (*last_flag) done[item] = 0u;
  }
  QSA_SYNC();
  if (!*last_flag) return;
  __threadfence();
  // Latency first (this is the one-query path's tail): every partial lse in one round trip
  // into a weight table over the free rings, the weights by 16 threads, then every o load of
  // a thread independent of the others. ws[sp][r] = exp(lse - M_r); M_r, L_r after the table.
  float* ws = smem;
  float* wm = ws + nsplit * DEC_ROWS;
  float* wl = wm + DEC_ROWS;
  for (int e = threadIdx.x; e < nsplit * DEC_ROWS; e += blockDim.x) {
    const int sp = e / DEC_ROWS, r = e % DEC_ROWS;
    ws[e] = r < rows ? dec_ldcg(lse_part + sp * rows_total + row0 + r) : dec_neg_inf();
  }
  QSA_SYNC();
  if (threadIdx.x < DEC_ROWS) {
    const int r = threadIdx.x;
    float M = dec_neg_inf();
    for (int sp = 0; sp < nsplit; ++sp) M = fmaxf(M, ws[sp * DEC_ROWS + r]);
    float sum = 0.f;
    for (int sp = 0; sp < nsplit; ++sp) {
      const float w = M == dec_neg_inf() ? 0.f : expf(ws[sp * DEC_ROWS + r] - M);  // -inf: 0
      ws[sp * DEC_ROWS + r] = w;
      sum += w;
    }
    wm[r] = M;
    wl[r] = sum;
  }
  QSA_SYNC();
  // Each thread owns up to DEC_MERGE_OUT float4 outputs (16 rows x 32 float4 per item) and
  // loads DEC_MERGE_OUT x DEC_MERGE_BATCH partial float4s before it adds any: one round trip
  // per batch of splits (one query, 8 splits, 256 threads: one).
  for (int e0 = threadIdx.x; e0 < DEC_ROWS * (DEC_D / 4); e0 += DEC_MERGE_OUT * blockDim.x) {
    float4 val[DEC_MERGE_OUT];
#pragma unroll
    for (int j = 0; j < DEC_MERGE_OUT; ++j) val[j] = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int sp0 = 0; sp0 < nsplit; sp0 += DEC_MERGE_BATCH) {
      float4 x[DEC_MERGE_OUT][DEC_MERGE_BATCH];
#pragma unroll
      for (int j = 0; j < DEC_MERGE_OUT; ++j)
#pragma unroll
        for (int b = 0; b < DEC_MERGE_BATCH; ++b) {
          const int e = e0 + j * blockDim.x, r = e / (DEC_D / 4), sp = sp0 + b;
          const bool on = e < DEC_ROWS * (DEC_D / 4) && r < rows && sp < nsplit;
          x[j][b] = on ? dec_ldcg4(o_part + (sp * rows_total + row0 + r) * DEC_D + 4 * (e % (DEC_D / 4)))
                       : make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
      for (int j = 0; j < DEC_MERGE_OUT; ++j)
#pragma unroll
        for (int b = 0; b < DEC_MERGE_BATCH; ++b) {
          const int e = e0 + j * blockDim.x, r = (e / (DEC_D / 4)) % DEC_ROWS, sp = sp0 + b;
          const float w = sp < nsplit ? ws[sp * DEC_ROWS + r] : 0.f;
          val[j].x += w * x[j][b].x;
          val[j].y += w * x[j][b].y;
          val[j].z += w * x[j][b].z;
          val[j].w += w * x[j][b].w;
        }
    }
#pragma unroll
    for (int j = 0; j < DEC_MERGE_OUT; ++j) {
      const int e = e0 + j * blockDim.x, r = e / (DEC_D / 4), d = 4 * (e % (DEC_D / 4));
      if (e >= DEC_ROWS * (DEC_D / 4) || r >= rows) continue;
      const long long row = row0 + r;
      const float sum = wl[r];
      const bool none = !(sum > 0.f);
      const float inv = none ? 0.f : 1.f / sum;
      *(float4*)(o + row * DEC_D + d) =
          make_float4(val[j].x * inv, val[j].y * inv, val[j].z * inv, val[j].w * inv);
      if (d == 0) lse[row] = none ? dec_neg_inf() : wm[r] + logf(sum);
    }
  }
}
#endif  // QSA_DEC_MMA
