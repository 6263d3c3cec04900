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
  DEC_STAMP(DEC_T_CLUSTER);
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

// The lean merge's CTA level (sm_90, the `_lean_` kernels, QSA_ATTN_DEC_MERGE=lean). Warp w's
// (m, l, O) lies at smem + w x `area` floats, over its own ring (dec_flat_store: no CTA barrier
// before the stores, only the warp's own), and the caller's one CTA barrier follows the stores.
// Each thread then forms four dims of a row at once: every warp's (m, l) of the row and its
// float4 of O in one round of shared loads, the weights exp(m_w - M) in registers (no weight
// pass, so none of dec_cta_merge's two barriers around it), the weighted sum normalised by
// 1 / L, and pushes it with the row's lse to the inbox of the row's merging rank r mod NS in
// this rank's slot (dec_cluster_push_merge's layout, which then merges the cluster after its one
// barrier). Barriers after the loop: one CTA and one cluster barrier, where the pull merge takes
// three CTA and two cluster barriers (the wait for the kernel-entry arrival finds every CTA long
// started). `push` false (the `cta` probe): into this CTA's own inbox, nothing remote.
template <int NS>
QSA_DEVICE void dec_lean_cta_merge(const float* smem, int area, int nwarp, int rows, float* inbox, int split,
                                   bool push) {
  static_assert(DEC_ROWS % NS == 0, "each rank merges DEC_ROWS / NS rows");
  constexpr int PER = DEC_ROWS / NS;
  for (int e = threadIdx.x; e < DEC_ROWS * DEC_D / 4; e += blockDim.x) {
    const int r = e / (DEC_D / 4), d = 4 * (e % (DEC_D / 4));
    if (r >= rows) continue;
    const int c = dec_swizzle(r, d);
    float mw[DEC_MAX_WARPS], lw[DEC_MAX_WARPS];
    float4 x[DEC_MAX_WARPS];
#pragma unroll
    for (int w = 0; w < DEC_MAX_WARPS; ++w) {  // every load first: one shared round trip
      const bool on = w < nwarp;
      const float* a = smem + (long long)w * area;
      mw[w] = on ? a[r] : dec_neg_inf();
      lw[w] = on ? a[DEC_ROWS + r] : 0.f;
      x[w] = on ? *(const float4*)(a + 2 * DEC_ROWS + r * DEC_D + c) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    float M = dec_neg_inf();
#pragma unroll
    for (int w = 0; w < DEC_MAX_WARPS; ++w) M = fmaxf(M, mw[w]);
    float sum = 0.f;
    float4 val = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int w = 0; w < DEC_MAX_WARPS; ++w) {
      const float wt = M == dec_neg_inf() ? 0.f : expf(mw[w] - M);  // empty or absent warp: 0
      sum += wt * lw[w];
      val.x += wt * x[w].x;
      val.y += wt * x[w].y;
      val.z += wt * x[w].z;
      val.w += wt * x[w].w;
    }
    const bool none = !(sum > 0.f);
    const float inv = none ? 0.f : 1.f / sum;
    val = make_float4(val.x * inv, val.y * inv, val.z * inv, val.w * inv);
    const int slot = split * PER + r / NS;
#if defined(QSA_HAS_CLUSTERS)
    float* dst = push ? qsa_cluster_map_store(inbox, (unsigned)(r % NS)) : inbox;
#else
    float* dst = inbox;
    (void)push;
#endif
    *(float4*)(dst + slot * DEC_D + d) = val;
    if (d == 0) dst[DEC_ROWS * DEC_D + slot] = none ? dec_neg_inf() : M + logf(sum);
  }
}

// The flat merge (sm_90, the `_flat_cl_` kernels, QSA_ATTN_DEC_MERGE=flat): one level where the
// default has two. Every warp stores its (m, l, O) over the first stage of its OWN ring (8320 of
// its 8704 bytes, free once its copies have landed: no CTA barrier), one cluster barrier, then
// rank r merges rows r, r + NS, ... over all NS x DEC_MAX_WARPS warps' partials of the cluster,
// read through distributed shared memory: per row a warp first takes every partial's (m, l)
// (two per lane, one round trip) and forms the normalised weights by shuffles, then each
// float4 of o is summed by four lanes over 16 partials each (16 remote float4 loads in flight
// a lane) and reduced by two shuffles. Barriers after the loop: one cluster barrier plus the
// relaxed one that keeps shared memory alive for the others' reads, where dec_cta_merge +
// dec_cluster_merge take three CTA barriers and the same two cluster ones; the price is 8x the
// remote bytes (a rank reads 64 partials of its 2 rows, 66.5 KB, where the pull merge reads
// 8 CTA results, 8.3 KB): which wins is the card's to say.
static_assert(DEC_MERGE_FLOATS * 4 <= DEC_STAGE_BYTES, "a warp's flat-merge area fits one ring stage");

// A warp's (m, l, O unnormalised; m in natural-log units) into its area at base + off floats:
// m[16], l[16], then O[16][128] swizzled (dec_swizzle). The one store of a warp's partial, for
// both the CTA merge and the flat merge; the caller orders it after the ring's last reads and
// copies (a CTA or a warp barrier) and passes its lane's (tg, tt) = (lane / 4, lane % 4). The
// split of the area's address into (base, off), with the product formed by the CTA merge and
// the sum here, keeps nvcc's output byte-identical to the two copies this helper replaced (a
// ready pointer argument changed 10 sm_90 decode kernels' SASS: 64-bit offset product, branch
// layout).
// NJ = 8 (the `_hd_` kernels): the warp holds O's dims [d0, d0 + 64) only, and only the pair's
// first warp (`ml`) stores (m, l), which both warps of the pair hold bit for bit.
template <int NJ = 16>
QSA_DEVICE void dec_store_partial(float* base, long long off, int tg, int tt, const float (&m)[2], const float (&l)[2],
                                  const float (&acc)[NJ][4], int d0 = 0, bool ml = true) {
  float* mine = base + off;
  if (tt == 0 && ml) {
    mine[tg] = m[0];
    mine[tg + 8] = m[1];
    mine[DEC_ROWS + tg] = l[0];
    mine[DEC_ROWS + tg + 8] = l[1];
  }
  float* mo = mine + 2 * DEC_ROWS;
#pragma unroll
  for (int j = 0; j < NJ; ++j) {  // rows tg and tg + 8 share the swizzle (dec_swizzle)
    const int c = dec_swizzle(tg, d0 + 8 * j) + 2 * tt;
    *(float2*)(mo + tg * DEC_D + c) = make_float2(acc[j][0], acc[j][1]);
    *(float2*)(mo + (tg + 8) * DEC_D + c) = make_float2(acc[j][2], acc[j][3]);
  }
}

// The flat merge's store (dec_cta_merge's layout, over the warp's own ring). Its lanes' last
// reads of the ring are behind a __syncwarp (the loop's), its copies have landed (dec_wait(0));
// the __syncwarp here orders the lanes' copy landings before any lane's store over them.
QSA_DEVICE void dec_flat_store(float* mine, const float (&m)[2], const float (&l)[2], const float (&acc)[16][4]) {
  const int lane = qsa_lane(), tg = lane / 4, tt = lane % 4;
  QSA_SYNCWARP();
  dec_store_partial(mine, 0, tg, tt, m, l, acc);
}

// `smem`: the CTA's dynamic shared memory; warp w's area at smem + w x `area` floats (the same
// offsets in every rank: the cluster's CTAs run one plan).
template <int NS>
QSA_DEVICE void dec_flat_merge(const float* smem, int area, int nwarp, float* __restrict__ o,
                               float* __restrict__ lse, long long row0, int rows, int split) {
  static_assert(DEC_ROWS % NS == 0, "each rank merges DEC_ROWS / NS rows");
  static_assert(NS * DEC_MAX_WARPS == 64, "two partials per lane, sixteen per quarter of a quad");
  constexpr int PER = DEC_ROWS / NS;
#if defined(QSA_HAS_CLUSTERS)
  qsa_cluster_sync();  // every warp of the cluster has stored its partial (release / acquire)
  const int lane = qsa_lane(), q = lane % 4;
  // 128 threads a row (32 float4 x 4 lanes): a warp's row is uniform, so its shuffles are whole.
  for (int x = threadIdx.x; x < PER * DEC_D; x += blockDim.x) {
    const int r = split + NS * (x / DEC_D), d = 4 * ((x % DEC_D) / 4);
    if (r >= rows) continue;
    float mw[2], lw[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // partial p = lane + 32 h: rank p / 8, warp p % 8
      const int p = lane + 32 * h, w = p % DEC_MAX_WARPS;
      const float* a = qsa_cluster_map(smem, (unsigned)(p / DEC_MAX_WARPS)) + (long long)w * area;
      mw[h] = w < nwarp ? a[r] : dec_neg_inf();
      lw[h] = w < nwarp ? a[DEC_ROWS + r] : 0.f;
    }
    float M = fmaxf(mw[0], mw[1]);
#pragma unroll
    for (int s = 1; s < 32; s *= 2) M = fmaxf(M, qsa_shfl_xor(M, s));
    float wt[2], sum = 0.f;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      wt[h] = M == dec_neg_inf() ? 0.f : expf(mw[h] - M);  // empty warp: 0
      sum += wt[h] * lw[h];
    }
#pragma unroll
    for (int s = 1; s < 32; s *= 2) sum += qsa_shfl_xor(sum, s);
    const bool none = !(sum > 0.f);
    const float inv = none ? 0.f : 1.f / sum;
    wt[0] *= inv;
    wt[1] *= inv;
    // Lane q of a quad sums partials p = 4 i + q (i < 16: rank i / 2, warp 4 (i % 2) + q), whose
    // weight lies in lane p % 32's wt[p / 32]; every load first, then the sums.
    const int c = dec_swizzle(r, d);
    float4 xv[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int w = 4 * (i % 2) + q;
      const float* a = qsa_cluster_map(smem, (unsigned)(i / 2)) + (long long)w * area;
      xv[i] = w < nwarp ? *(const float4*)(a + 2 * DEC_ROWS + r * DEC_D + c) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    float4 val = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const float wi = qsa_shfl(i < 8 ? wt[0] : wt[1], 4 * (i % 8) + q);
      val.x += wi * xv[i].x;
      val.y += wi * xv[i].y;
      val.z += wi * xv[i].z;
      val.w += wi * xv[i].w;
    }
#pragma unroll
    for (int s = 1; s < 4; s *= 2) {
      val.x += qsa_shfl_xor(val.x, s);
      val.y += qsa_shfl_xor(val.y, s);
      val.z += qsa_shfl_xor(val.z, s);
      val.w += qsa_shfl_xor(val.w, s);
    }
    if (q == 0) {
      *(float4*)(o + (row0 + r) * DEC_D + d) = val;
      if (d == 0) lse[row0 + r] = none ? dec_neg_inf() : M + logf(sum);
    }
  }
  // Keeps this CTA's shared memory alive until every rank has read it (as dec_cluster_merge).
  qsa_cluster_sync_relaxed();
#else
  (void)smem, (void)area, (void)nwarp;
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
// NJ = 8 (the `_hd_` kernels, dims split over warp pairs): warps 2p and 2p + 1 hold one partial
// (the same units), dims [0, 64) and [64, 128) of O, stored into area p: nwarp / 2 partials.
template <int NJ = 16>
QSA_DEVICE void dec_cta_merge(float* smem, const float (&m)[2], const float (&l)[2], const float (&acc)[NJ][4],
                              int rows, float* __restrict__ out_o, float* __restrict__ out_l, long long row0,
                              float* cres, float* inbox, int split) {
  static_assert(NJ == 16 || NJ == 8, "a warp holds all of O's dims or half of them");
  const int lane = qsa_lane(), warp = threadIdx.x / 32;
  const int nwarp = NJ == 16 ? blockDim.x / 32 : blockDim.x / 64;  // partials
  const int tg = lane / 4, tt = lane % 4;
  QSA_SYNC();  // every warp is out of its ring (and its copies have landed)
  DEC_STAMP(DEC_T_BAR1);
  if constexpr (NJ == 16) {
    dec_store_partial<16>(smem, (long long)warp * DEC_MERGE_FLOATS, tg, tt, m, l, acc);
  } else {
    dec_store_partial<NJ>(smem, (long long)(warp / 2) * DEC_MERGE_FLOATS, tg, tt, m, l, acc, 64 * (warp % 2),
                          warp % 2 == 0);
  }
  QSA_SYNC();
  DEC_STAMP(DEC_T_BAR2);
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
  DEC_STAMP(DEC_T_BAR3);
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
  DEC_STAMP(DEC_T_CTA);
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
