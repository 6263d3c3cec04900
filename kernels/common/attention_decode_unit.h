// NSA selection-attention decode forward, part 1 of 3: one warp's unit of work (the constants,
// a work item's geometry and unit list, the K/V copies into a warp's ring, the mma pieces of
// S = q K^T and O += P V). Included by common/attention_decode.h (the kernel and its loop);
// the merges are common/attention_decode_merge.h. The design is in attention_decode.h's header.
#pragma once
#include "portable.h"
#include "mbarrier.h"

#define DEC_D 128
#define DEC_BLK 64
#define DEC_ROWS 16
// Keys per unit (one mma n-pair, one P A-fragment).
#define DEC_KEYS 16
// Staged K / V rows in u16: 128 + 8 (16-byte rows, lane (g, t) of a B-fragment read hits
// bank 4g + t: conflict free).
#define DEC_STRIDE 136
#define DEC_TILE (DEC_KEYS * DEC_STRIDE)  // u16 of one K or V sub-tile
#define DEC_STAGE_BYTES (2 * DEC_TILE * 2)
#define DEC_MAX_STAGES 4
#define DEC_LO_SCALE 4096.f
#define DEC_MAX_MERGE_SPLITS 128
// `merge` argument values: partials only (a second launch merges), the last CTA's ticket,
// the thread-block cluster (sm_90).
#define DEC_MERGE_LAUNCH 0
#define DEC_MERGE_TICKET 1
#define DEC_MERGE_CLUSTER 2
// CTAs of one cluster of qsa_attn_dec_cl_fwd_* (its splits per item).
#define DEC_CLUSTER 8
// The in-kernel merge's loads in flight per thread: outputs x splits (float4 each).
#define DEC_MERGE_OUT 2
#define DEC_MERGE_BATCH 8

typedef unsigned short dec_u16;

// Development probe (off unless built with -DQSA_DEC_TRACE for sm_90 CUDA by hand; never by the
// build, so no shipped kernel carries it: tools/h200-decode-trace/trace.py): lane 0 of every
// warp stamps the GPU's nanosecond clock at the kernel's steps into dec_trace[CTA][warp][step],
// CTA = blockIdx.x + gridDim.x x blockIdx.y (at most DEC_TRACE_CTAS). Steps (DEC_T_*): entry,
// unit list ready, first unit landed, loop end (its copies waited for), then the CTA merge's
// three barriers passed and its end, the cluster merge's barrier passed, and the CTA's end.
#define DEC_T_ENTRY 0
#define DEC_T_LIST 1
#define DEC_T_FIRST 2
#define DEC_T_LOOP 3
#define DEC_T_BAR1 4
#define DEC_T_BAR2 5
#define DEC_T_BAR3 6
#define DEC_T_CTA 7
#define DEC_T_CLUSTER 8
#define DEC_T_END 9
#define DEC_TRACE_STEPS 10
#define DEC_TRACE_CTAS 1024
#if defined(QSA_DEC_TRACE) && defined(QSA_CUDA) && defined(QSA_HAS_CLUSTERS)
__device__ unsigned long long dec_trace[DEC_TRACE_CTAS][8][DEC_TRACE_STEPS];
#define DEC_STAMP(step)                                                                          \
  do {                                                                                           \
    const unsigned cta_ = blockIdx.x + gridDim.x * blockIdx.y;                                   \
    if (qsa_lane() == 0 && cta_ < DEC_TRACE_CTAS && threadIdx.x < 256)                           \
      dec_trace[cta_][threadIdx.x / 32][step] = qsa_globaltimer();                               \
  } while (0)
#else
#define DEC_STAMP(step) \
  do {                  \
  } while (0)
#endif

#if defined(QSA_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define QSA_DEC_MMA 1
#endif

QSA_DEVICE float dec_neg_inf() { return __uint_as_float(0xff800000u); }

struct DecBf16 {
  static constexpr bool is_bf16 = true;
  static __device__ __forceinline__ float lo(unsigned w) { return qsa_bf16x2_lo(w); }
  static __device__ __forceinline__ float hi(unsigned w) { return qsa_bf16x2_hi(w); }
  static __device__ __forceinline__ float one(dec_u16 b) { return qsa_bf16_to_f32(b); }
};

struct DecF16 {
  static constexpr bool is_bf16 = false;
  static __device__ __forceinline__ float lo(unsigned w) { return qsa_f16_to_f32((dec_u16)(w & 0xffffu)); }
  static __device__ __forceinline__ float hi(unsigned w) { return qsa_f16_to_f32((dec_u16)(w >> 16)); }
  static __device__ __forceinline__ float one(dec_u16 b) { return qsa_f16_to_f32(b); }
};

// The geometry of one work item, decoded from its index.
struct DecItem {
  int b, i, g, chunk;
  unsigned token_head;  // (b x q_len + i) x hkv + g = item / nchunk: the row of the item's ids
  int group;
  long long q_pos;
  int rows;  // valid rows (query heads) of the chunk: min(16, group - 16 chunk)
};

// 32-bit: the host bounds the grid (items < 2^31, src/gpu/attention_decode.rs), and a 64-bit
// division is a ~60-instruction subroutine call where the 32-bit one is ~10 inline: four of them
// sat on the one-query kernel's dependent chain before the ids' load (sm_90 SASS, 2026-12-02).
QSA_DEVICE DecItem dec_item(unsigned item, int q_len, int kv_len, int hq, int hkv) {
  DecItem it;
  it.group = hq / hkv;
  const unsigned nchunk = (unsigned)(it.group + DEC_ROWS - 1) / DEC_ROWS;
  unsigned x = item / nchunk;
  it.chunk = (int)(item - x * nchunk);
  it.token_head = x;
  it.g = (int)(x % (unsigned)hkv);
  x /= (unsigned)hkv;
  it.i = (int)(x % (unsigned)q_len);
  it.b = (int)(x / (unsigned)q_len);
  it.q_pos = (long long)kv_len - q_len + it.i;
  const int left = it.group - DEC_ROWS * it.chunk;
  it.rows = left < DEC_ROWS ? left : DEC_ROWS;
  return it;
}

#if defined(QSA_DEC_MMA)
// A load that bypasses L1 (another CTA's partial, published by its fence and ticket); through
// the u32 form, which the emulator's __ldcg takes.
QSA_DEVICE float dec_ldcg(const float* p) { return __uint_as_float(__ldcg((const unsigned*)p)); }
QSA_DEVICE float4 dec_ldcg4(const float* p) {  // p 16-byte aligned
#if defined(QSA_EMU)
  return make_float4(dec_ldcg(p), dec_ldcg(p + 1), dec_ldcg(p + 2), dec_ldcg(p + 3));
#else
  return __ldcg((const float4*)p);
#endif
}

// The item's unit list, one id slot per lane: `id` the slot's block, `nsub` its units (0 for
// -1, an invisible id or a repeat of an earlier slot), `incl` the inclusive prefix of nsub over
// the lanes; the item's unit count is lane 31's incl.
struct DecList {
  int id, nsub, incl, total;
};

QSA_DEVICE DecList dec_list(const int* __restrict__ ids, const DecItem& it, int t) {
  const int lane = qsa_lane();
  DecList L;
  L.id = -1;
  if (lane < t) L.id = ids[(long long)it.token_head * t + lane];  // two divisions into the chain
  bool dup = false;
  for (int u = 0; u < 31; ++u) {  // a repeat of an earlier slot counts once
    const int other = qsa_shfl(L.id, u);
    dup |= u < lane && other == L.id;
  }
  const long long base = (long long)L.id * DEC_BLK;
  const bool ok = L.id >= 0 && base <= it.q_pos && !dup;
  long long n = ok ? (it.q_pos - base) / DEC_KEYS + 1 : 0;
  L.nsub = (int)(n < DEC_BLK / DEC_KEYS ? n : DEC_BLK / DEC_KEYS);
  int incl = L.nsub;
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const int y = qsa_shfl(incl, lane >= off ? lane - off : lane);
    if (lane >= off) incl += y;
  }
  L.incl = incl;
  L.total = qsa_shfl(incl, 31);
  return L;
}

// First key of unit u (u < total): the block of the first lane whose prefix passes u.
QSA_DEVICE long long dec_unit_key(const DecList& L, int u) {
  const unsigned above = qsa_ballot(L.incl > u);
  const int src = __ffs(above) - 1;
  const int id = qsa_shfl(L.id, src);
  const int excl = qsa_shfl(L.incl - L.nsub, src);
  return (long long)id * DEC_BLK + (long long)(u - excl) * DEC_KEYS;
}

// Where lane `lane` copies from in a unit (the unit's row r0 + 2c, 16-byte chunk lane % 16, for
// c = 0..7), as an offset into k / v for the unit starting at key 0: one 64-bit add per copy
// per unit instead of the full index product (the address math was ~150 of the loop's ~900
// instructions per unit, sm_90 SASS of 2026-12-02).
// `hnd`: K / V are [batch, hkv, kv_len, D] (DEC_OPT_HND) instead of [batch, kv_len, hkv, D].
QSA_DEVICE long long dec_lane_offset(const DecItem& it, int kv_len, int hkv, bool hnd) {
  const int lane = qsa_lane();
  if (hnd) return (((long long)it.b * hkv + it.g) * kv_len + lane / 16) * DEC_D + (lane % 16) * 8;
  return (((long long)it.b * kv_len + lane / 16) * hkv + it.g) * DEC_D + (lane % 16) * 8;
}

// Measured on the H200 (2026-12-02, bench/attention_vs_torch.py --decode-only, 16 q x 8 KV,
// group 16): this layout (two rows of 256 contiguous bytes per copy instruction) 22.6 us; one
// address per lane instead (lane = row / 2, chunks 2j + lane % 2: 16 rows of 32 bytes per
// copy instruction, fewer address instructions) 31.5 us. Keep whole rows per instruction.
// Issue the unit at `key0`: its K and V sub-tiles (16 keys x 256 bytes each) into `stage`; keys
// past the causal edge are zero-filled (p = 0 there, and 0 x a stale NaN would not be 0).
// `row` = hkv x DEC_D, the distance between consecutive keys. `l2_256` (DEC_OPT_L2_256): each
// copy asks L2 to fetch the whole 256-byte row from DRAM at once (cp.async's L2::256B prefetch
// size) instead of the sectors the instruction names.
// `vhalf` (the `_hd_` kernels: 0 or 1, else -1): only that half of V's dims is copied (lanes
// whose 16-byte chunk lies in it), the half this warp's P V reads; K is copied whole.
QSA_DEVICE void dec_issue(dec_u16* stage, const dec_u16* __restrict__ k, const dec_u16* __restrict__ v,
                          long long lane_off, long long row, long long key0, long long q_pos, bool l2_256,
                          int vhalf = -1) {
  const int lane = qsa_lane(), r0 = lane / 16;
  dec_u16* dst = stage + r0 * DEC_STRIDE + (lane % 16) * 8;
  const long long first = lane_off + key0 * row;
  const bool copy_v = vhalf < 0 || (lane % 16) / 8 == vhalf;
#pragma unroll
  for (int c = 0; c < DEC_KEYS / 2; ++c) {
    const bool valid = key0 + r0 + 2 * c <= q_pos;
    const long long off = valid ? first + 2 * c * row : 0;
    if (l2_256) {
      qsa_cp_async16_l2_256(dst + 2 * c * DEC_STRIDE, k + off, valid ? 16 : 0);
      if (copy_v) qsa_cp_async16_l2_256(dst + DEC_TILE + 2 * c * DEC_STRIDE, v + off, valid ? 16 : 0);
    } else {
      qsa_cp_async16(dst + 2 * c * DEC_STRIDE, k + off, valid ? 16 : 0);
      if (copy_v) qsa_cp_async16(dst + DEC_TILE + 2 * c * DEC_STRIDE, v + off, valid ? 16 : 0);
    }
  }
  qsa_cp_async_commit();
}

// BULK (the `_bk_` kernels, QSA_ATTN_DEC_COPY=bulk; sm_90a and its emulation, QSA_WGMMA): the
// same unit, its 32 rows (16 of K, 16 of V, 256 bytes each) fetched by the TMA instead of 16
// cp.async of 16 bytes per lane: lane l issues ONE cp.async.bulk for row l % 16 of K (l < 16) or
// V (l >= 16) into the stage's padded row (DEC_STRIDE apart, so the mma reads keep their
// conflict-free banks), completing on the stage's mbarrier (count 1: lane 0's arrive.expect_tx of
// the unit's bytes). Rows past the causal edge are not fetched: their lanes zero them with
// st.shared (p = 0 there, and 0 x a stale NaN would not be 0), visible to the warp through the
// __syncwarp before the unit is read. The stage is free when issued (the warp's own reads of it
// ended at the loop's __syncwarp); fence.proxy.async orders those generic accesses before the
// async proxy's writes. The warp waits on the stage's mbarrier (its phase bit in `phases`) where
// the cp.async form waits on its groups. Issue: 1 + 1 instructions per lane per unit instead of
// 16 copies and their address math.
// Offset of key 0 of the item's K / V head (fla's layout, or head-major with DEC_OPT_HND).
QSA_DEVICE long long dec_head_offset(const DecItem& it, int kv_len, int hkv, bool hnd) {
  if (hnd) return ((long long)it.b * hkv + it.g) * kv_len * DEC_D;
  return ((long long)it.b * kv_len * hkv + it.g) * DEC_D;
}
#if defined(QSA_WGMMA)
#define QSA_DEC_BULK 1
// The warp's `stages` mbarriers (8 bytes each, past the kernel's other shared data).
QSA_DEVICE void dec_bulk_init(unsigned long long* bars, int stages) {
  if (qsa_lane() == 0) {
    for (int s = 0; s < stages; ++s) qsa_mbar_init(&bars[s], 1);
    qsa_fence_mbar_init();
  }
  QSA_SYNCWARP();
}
QSA_DEVICE void dec_issue_bulk(dec_u16* stage, unsigned long long* bar, const dec_u16* __restrict__ k,
                               const dec_u16* __restrict__ v, long long head_off, long long row, long long key0,
                               long long q_pos) {
  const int lane = qsa_lane(), r = lane % DEC_KEYS;
  const bool is_v = lane >= DEC_KEYS;
  const long long left = q_pos - key0 + 1;  // >= 1: a listed unit starts at or before q_pos
  const int nvalid = left < DEC_KEYS ? (int)left : DEC_KEYS;
  dec_u16* dst = stage + (is_v ? DEC_TILE : 0) + r * DEC_STRIDE;
  qsa_fence_proxy_async();
  if (lane == 0) qsa_mbar_arrive_expect_tx(bar, (unsigned)nvalid * 2u * DEC_D * 2u);
  if (r < nvalid) {
    qsa_bulk_g2s(dst, (is_v ? v : k) + head_off + (key0 + r) * row, DEC_D * 2, bar);
  } else {
    uint4* d4 = reinterpret_cast<uint4*>(dst);
#pragma unroll
    for (int c = 0; c < DEC_D / 8; ++c) d4[c] = make_uint4(0u, 0u, 0u, 0u);
  }
}
// Wait for the unit in stage `slot`: the phase of its mbarrier after the one last waited for.
QSA_DEVICE void dec_bulk_wait(unsigned long long* bar, unsigned& phases, int slot) {
  qsa_mbar_wait(bar, (phases >> slot) & 1u);
  phases ^= 1u << slot;
}
#else  // no bulk copies here: the `_bk_` kernels are instantiated only where QSA_WGMMA is
QSA_DEVICE void dec_bulk_init(unsigned long long*, int) {}
QSA_DEVICE void dec_issue_bulk(dec_u16*, unsigned long long*, const dec_u16*, const dec_u16*, long long, long long,
                               long long, long long) {}
QSA_DEVICE void dec_bulk_wait(unsigned long long*, unsigned&, int) {}
#endif

// Prefetch the unit at `key0` into L2 (no shared memory, no wait): lane l takes half l % 2 (128
// bytes) of row l / 2 of K and of V; rows past the causal edge are skipped.
QSA_DEVICE void dec_prefetch_l2(const dec_u16* __restrict__ k, const dec_u16* __restrict__ v, long long lane_off,
                                long long row, long long key0, long long q_pos) {
  const int lane = qsa_lane(), r = lane / 2;
  if (key0 + r > q_pos) return;
  // lane_off is lane (lane / 16, chunk lane % 16)'s: back to row 0, chunk 0, then this lane's.
  const long long base = lane_off - (lane / 16) * row - (lane % 16) * 8;
  const long long off = base + (key0 + r) * row + (lane % 2) * 64;
  qsa_prefetch_l2(k + off);
  qsa_prefetch_l2(v + off);
}

// The dynamic order's (DEC_DYN kernels) units in a warp's ring, by stage: four registers read
// and written at a runtime stage through selects (an indexed array would live in local memory).
struct DecRingUnits {
  int u0, u1, u2, u3;
};
QSA_DEVICE int dec_ring_get(const DecRingUnits& r, int s) {
  return s == 0 ? r.u0 : s == 1 ? r.u1 : s == 2 ? r.u2 : r.u3;
}
QSA_DEVICE void dec_ring_set(DecRingUnits& r, int s, int u) {
  r.u0 = s == 0 ? u : r.u0;
  r.u1 = s == 1 ? u : r.u1;
  r.u2 = s == 2 ? u : r.u2;
  r.u3 = s == 3 ? u : r.u3;
}

// Wait until at most `pending` committed groups of this thread are still in flight.
QSA_DEVICE void dec_wait(int pending) {
  switch (pending) {
    case 0: qsa_cp_async_wait_group<0>(); break;
    case 1: qsa_cp_async_wait_group<1>(); break;
    case 2: qsa_cp_async_wait_group<2>(); break;
    default: qsa_cp_async_wait_group<3>(); break;
  }
}

template <typename E>
QSA_DEVICE unsigned dec_pack(float lo, float hi) {  // lo -> low half (the lower index)
  return E::is_bf16 ? qsa_pack_bf16x2(lo, hi) : qsa_pack_f16x2(lo, hi);
}

template <typename E>
QSA_DEVICE void dec_mma(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  if (E::is_bf16) qsa_mma_m16n8k16_bf16(c, a, b0, b1);
  else qsa_mma_m16n8k16_f16(c, a, b0, b1);
}

// A fragments of the item's 16 query rows (rows past `rows` are zero), 8 k-steps of 16 dims,
// read straight from global memory (exact: q is E data).
template <typename E>
QSA_DEVICE void dec_load_q(const dec_u16* __restrict__ q, const DecItem& it, int q_len, int hq,
                           unsigned (&qa)[8][4]) {
  const int lane = qsa_lane(), tg = lane / 4, tt = lane % 4;
  const dec_u16* rowp[2];
  bool ok[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = tg + 8 * h;
    ok[h] = r < it.rows;
    const int head = it.g * it.group + it.chunk * DEC_ROWS + (ok[h] ? r : 0);
    rowp[h] = q + (((long long)it.b * q_len + it.i) * hq + head) * DEC_D;
  }
#pragma unroll
  for (int ks = 0; ks < 8; ++ks)
#pragma unroll
    for (int hd = 0; hd < 2; ++hd)  // dims +0 / +8
#pragma unroll
      for (int h = 0; h < 2; ++h)  // rows g / g + 8
        qa[ks][2 * hd + h] = ok[h] ? *(const unsigned*)(rowp[h] + ks * 16 + 8 * hd + 2 * tt) : 0u;
}

// QS (the `_qs_` kernels, QSA_ATTN_DEC_QLOAD=cta): q staged once per CTA in shared memory
// instead of dec_load_q's per-warp scalar loads. Why: dec_load_q is 32 four-byte loads per lane,
// each touching 8 rows (8 L1 wavefronts), and every warp of the CTA loads the same 4 KiB: at group
// 16 with 8 warps 256 loads x 8 wavefronts = ~2,048 L1 cycles per SM (a count from the code, not a
// measurement), queued in the same load pipe as the ids' load and the first cp.async copies. Here
// each thread copies one 16-byte chunk (16 rows x 16 chunks = 256 copies per CTA, 2 rows per warp
// instruction), then after the ring's prologue one CTA barrier and 8 ldmatrix.x4 per warp.
// Rows past `rows` are zero-filled. Rows DEC_STRIDE apart (272 bytes): ldmatrix's 8 row reads of
// one 8x8 matrix hit banks 4r..4r+3, conflict free.
#define DEC_Q_BYTES (DEC_ROWS * DEC_STRIDE * 2)
QSA_DEVICE void dec_stage_q(dec_u16* qs, const dec_u16* __restrict__ q, const DecItem& it, int q_len, int hq) {
  const long long row0 = ((long long)it.b * q_len + it.i) * hq + it.g * it.group + it.chunk * DEC_ROWS;
  for (int e = threadIdx.x; e < DEC_ROWS * (DEC_D / 8); e += blockDim.x) {
    const int r = e / (DEC_D / 8), c = e % (DEC_D / 8);
    const bool ok = r < it.rows;
    qsa_cp_async16(qs + r * DEC_STRIDE + c * 8, q + (ok ? (row0 + r) * DEC_D + c * 8 : 0), ok ? 16 : 0);
  }
  qsa_cp_async_commit();
}

// q's A fragments from the staged tile (dec_load_q's layout: qa[ks][2 hd + h] = row tg + 8 h, dims
// 16 ks + 8 hd + 2 tt): ldmatrix.x4's matrices 0-3 are (rows 0-7, +0), (8-15, +0), (0-7, +8),
// (8-15, +8), lane l giving row l % 16 of matrix l / 8.
QSA_DEVICE void dec_ldsm_q(const dec_u16* qs, unsigned (&qa)[8][4]) {
  const int lane = qsa_lane();
  const dec_u16* p = qs + (lane % 16) * DEC_STRIDE + (lane / 16) * 8;
#pragma unroll
  for (int ks = 0; ks < 8; ++ks) qsa_ldmatrix_x4(p + ks * 16, qa[ks][0], qa[ks][1], qa[ks][2], qa[ks][3]);
}

// S = q K^T for the 16 keys of a staged sub-tile: sc[n][.] for keys 8 n + 2 tt (+1), rows tg /
// tg + 8. Four independent accumulator chains (n-tile x even / odd k-step), summed after: with
// one or two warps per scheduler an 8-deep mma chain is the unit's critical path (H200,
// 2026-12-02: stages 2-4 all 34.8 us at 4 warps, 8 warps 27.1 us).
template <typename E>
QSA_DEVICE void dec_qk(const unsigned (&qa)[8][4], const dec_u16* ks, int tg, int tt, float (&sc)[2][4]) {
  float sc2[2][4];
#pragma unroll
  for (int nn = 0; nn < 2; ++nn)
#pragma unroll
    for (int e = 0; e < 4; ++e) sc[nn][e] = sc2[nn][e] = 0.f;
#pragma unroll
  for (int kk = 0; kk < 8; kk += 2)
#pragma unroll
    for (int nn = 0; nn < 2; ++nn) {
      const dec_u16* kp = ks + (8 * nn + tg) * DEC_STRIDE + kk * 16 + 2 * tt;
      dec_mma<E>(sc[nn], qa[kk], *(const unsigned*)kp, *(const unsigned*)(kp + 8));
      dec_mma<E>(sc2[nn], qa[kk + 1], *(const unsigned*)(kp + 16), *(const unsigned*)(kp + 24));
    }
#pragma unroll
  for (int nn = 0; nn < 2; ++nn)
#pragma unroll
    for (int e = 0; e < 4; ++e) sc[nn][e] += sc2[nn][e];
}

// O += P V for one sub-tile. P's A fragment is the scores' C layout: a0 (g, 2t) = n0 row g,
// a1 (g + 8, 2t) = n0 row g + 8, a2 (g, 2t + 8) = n1 row g, a3 = n1 row g + 8; P is split into
// 16-bit parts that sum back to it (bf16 hi + mid + lo; f16 hi + lo x 2^12 into acc_lo).
// NJ: O's n-tiles of 8 dims this warp holds (16: all 128; 8: the 64 from `vs` on, `_hd_`).
template <typename E, int NJ = 16>
QSA_DEVICE void dec_pv(const float (&p)[2][4], const dec_u16* vs, int lane, float (&acc)[NJ][4],
                       float (&acc_lo)[NJ][4]) {
  unsigned a0[4], a1[4], a2[4];
#pragma unroll
  for (int h4 = 0; h4 < 4; ++h4) {
    const int nn = h4 >> 1, h = h4 & 1;
    const float x = p[nn][2 * h], y = p[nn][2 * h + 1];
    a0[h4] = dec_pack<E>(x, y);
    const float r0 = x - E::lo(a0[h4]), r1 = y - E::hi(a0[h4]);
    if (E::is_bf16) {
      a1[h4] = dec_pack<E>(r0, r1);
      a2[h4] = dec_pack<E>(r0 - E::lo(a1[h4]), r1 - E::hi(a1[h4]));
    } else {
      a1[h4] = dec_pack<E>(r0 * DEC_LO_SCALE, r1 * DEC_LO_SCALE);
      a2[h4] = 0u;
    }
  }
  const int vkey = (lane & 7) + ((lane >> 3) & 1) * 8;
#pragma unroll
  for (int jp = 0; jp < NJ / 2; ++jp) {
    unsigned b0, b1, b2, b3;
    qsa_ldmatrix_x4_trans(vs + vkey * DEC_STRIDE + 16 * jp + (lane >> 4) * 8, b0, b1, b2, b3);
    dec_mma<E>(acc[2 * jp], a0, b0, b1);
    dec_mma<E>(acc[2 * jp + 1], a0, b2, b3);
    if (E::is_bf16) {
      dec_mma<E>(acc[2 * jp], a1, b0, b1);
      dec_mma<E>(acc[2 * jp + 1], a1, b2, b3);
      dec_mma<E>(acc[2 * jp], a2, b0, b1);
      dec_mma<E>(acc[2 * jp + 1], a2, b2, b3);
    } else {
      dec_mma<E>(acc_lo[2 * jp], a1, b0, b1);
      dec_mma<E>(acc_lo[2 * jp + 1], a1, b2, b3);
    }
  }
}
#endif  // QSA_DEC_MMA
