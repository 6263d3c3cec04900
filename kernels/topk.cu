// qsa top-k block selection: per query, the k largest of n f32 scores.
//
// Contract (DESIGN.md, src/contract.rs): key = qsa_order_key(score); larger key first, ties
// by lower index; per query the min(k, count) selected ids ascending, -1 in the cells past
// that count. count = n (decode) or clamp(active[q], 0, n) (prefill).
//
// Every kernel is a radix select on the 32-bit key, one 8-bit digit at a time: a 256-bin
// shared-memory histogram of the entries still matching the decided prefix, then ONE
// parallel block scan of the 256 bins (from the top) picks the bin that holds the k-th
// key. The selection that results is "(key & mask) > prefix, plus the first `need` entries
// (by index) with (key & mask) == prefix"; an ordered block scan then writes the ids
// ascending, so ties by lower index fall out of index order with no extra pass.
//
// Kernels (ABI in src/gpu/topk.rs and the report):
//   qsa_topk_register      one CTA per query, keys in registers (n <= blockDim * 8 <= 8192)
//   qsa_topk_wide          one CTA per query, streams the row from global memory per pass;
//                          for k <= waves per block it first tries a one-pass bound (the k-th
//                          largest wave maximum) and ranks the few entries above it directly
//   qsa_topk_split_bound   split stage A: one CTA per chunk of <= 4096 entries
//   qsa_topk_split_select  split stage B: one CTA per chunk, the last one per query finishes
//
// The split (decode): stage A computes, per chunk, a key v_c with at least
// r = ceil(k / chunks) of the chunk's entries at or above it (two radix digits, so v_c is a
// 16-bit-aligned lower edge). X = min_c v_c is a lower bound of the query's k-th key:
// every chunk has >= r entries >= X, or some chunk is shorter than r and X = 0. Stage B
// keeps, per chunk, the entries >= X (capped to the chunk's own top min(k, chunk) when
// heavy ties make that larger), in index order, in the chunk's slot of the caller's
// workspace; the last CTA of a query (atomic ticket, no grid-wide wait, so no deadlock
// whatever else runs) selects the query's k among those few candidates. Candidates are
// the union of "chunk's top entries", so the query's selection is among them (a query's
// selection restricted to a chunk is a prefix of that chunk's order), and candidate order
// is index order, so ties resolve exactly as the contract says.
#include "common/portable.h"

#define TOPK_BINS 256
#define TOPK_MAX_THREADS 1024
#define TOPK_MAX_WAVES (TOPK_MAX_THREADS / QSA_WAVE)
// Register kernel: keys per thread (blocked layout). n <= blockDim * 8 (dispatch: 8192).
#define TOPK_REG_ITEMS 8
// Split: entries per chunk (dispatch::topk::SPLIT_CHUNK), threads per chunk CTA.
#if !defined(TOPK_SPLIT_CHUNK)  // overridable only by development probes (the host's plan
                                // assumes these: dispatch::topk::SPLIT_CHUNK)
#define TOPK_SPLIT_CHUNK 4096
#define TOPK_SPLIT_THREADS 512
#endif
#define TOPK_SPLIT_ITEMS (TOPK_SPLIT_CHUNK / TOPK_SPLIT_THREADS)
// Threads of the speculative kernel's 1,024-thread entry point (qsa_topk_spec_t1024).
#define TOPK_SPEC_WIDE_THREADS 1024
// Split CTAs resident per SM the register budget must allow (CUDA's __launch_bounds__
// minimum blocks): with 16 queries the split launches 1024 CTAs per stage, and their
// sync-bound steps overlap only when several share an SM. sm_90 runs 2048 threads per SM;
// older targets (1024 or 1536) and HIP, whose second launch-bounds argument means waves
// per EU, keep 1.
#if defined(TOPK_SPLIT_BLOCKS_PROBE)  // development probes: both kernels' minimum
#define TOPK_SPLIT_BOUND_BLOCKS TOPK_SPLIT_BLOCKS_PROBE
#define TOPK_SPLIT_SELECT_BLOCKS TOPK_SPLIT_BLOCKS_PROBE
#elif defined(QSA_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define TOPK_SPLIT_BOUND_BLOCKS 4
#define TOPK_SPLIT_SELECT_BLOCKS 2
#else
#define TOPK_SPLIT_BOUND_BLOCKS 1
#define TOPK_SPLIT_SELECT_BLOCKS 1
#endif
// Split final step: candidates per thread held in registers before it falls back to
// streaming them from the workspace (512 * 12 = 6144; ~3,100 for k = 2048 of 262,144).
// 12, not 16, keeps stage B within 64 registers (two CTAs per SM on sm_90) without spills.
#define TOPK_FINAL_ITEMS 12
// Radix digits stage A spends on each chunk's bound: two give a 16-bit-aligned bound.
#define TOPK_BOUND_DIGITS 2
// Most chunks per query: MAX_N / SPLIT_CHUNK (dispatch::topk::MAX_N = 1 << 20).
#define TOPK_MAX_CHUNKS 256
// Stream loops keep this many loads per thread in flight (top-k is latency-bound).
#define TOPK_UNROLL 8
// Wide kernel, k <= waves per block: most candidates the per-wave-maxima bound may leave for
// the direct ranking (they live in TopkShared::hist, 2 * 256 words: a key and an id each).
#define TOPK_FEW_CAP 256

// The radix select, the small-k paths, the split (workspace and final step), the
// speculative decode body and the cluster kernel's pieces live in common/topk_*.h.
#include "common/topk_radix.h"
#include "common/topk_few.h"
#include "common/topk_split.h"
#include "common/topk_spec.h"

// ---------------------------------------------------------------------------------------
// Register kernel. grid (nq), block: a multiple of 64, 256..1024, >= ceil(n / 8).
// qsa:block 1024
QSA_KERNEL __launch_bounds__(TOPK_MAX_THREADS, 1) void qsa_topk_register(
    const float* __restrict__ scores, int capacity, int nq, int n, int k,
    const int* __restrict__ active, int* __restrict__ out, int few) {
  __shared__ TopkShared s;
  const int q = blockIdx.x;
  if (q >= nq) return;
  const int count = topk_clamp_count(active, q, n);
  int* o = out + (size_t)q * k;
  if (k >= count) {
    topk_write_all(o, count, k);
    return;
  }
  const float* row = scores + (size_t)q * capacity;
  const int base = threadIdx.x * TOPK_REG_ITEMS;
  const int nv = max(0, min(TOPK_REG_ITEMS, count - base));
  unsigned key[TOPK_REG_ITEMS];
#pragma unroll
  for (int j = 0; j < TOPK_REG_ITEMS; ++j) key[j] = j < nv ? qsa_order_key(row[base + j]) : 0u;
  // `few` (QSA_TOPK_REGISTER_FEW): small k through the units' maxima bound first.
  if (few && (unsigned)k <= TOPK_FEW_UNITS && topk_few_regs(key, nv, base, (unsigned)k, o, s)) return;
  const TopkSel sel = topk_radix_regs(key, nv, (unsigned)k, 4, s);
  topk_compact_regs(key, nv, sel, [&](unsigned pos, int j) { o[pos] = base + j; }, s);
}

// Wide kernel. grid (nq), block: a multiple of the wave, 256..1024; any n. With
// `staged` != 0 the launch gives n * 4 bytes of dynamic shared memory: the row's keys are
// read from global memory once and every later pass reads them from there.
// Dynamic shared: n * 4 when it fits the target's opt-in limit (the host checks it, see
// wide_staged_bytes in src/gpu/topk.rs), else 0 and the row streams from global memory. The
// annotation declares the form every target can launch (0); the staged form trades
// occupancy, which is one CTA per query anyway, for one read of the row.
// qsa:block 1024
// qsa:dynamic_shared 0
QSA_KERNEL __launch_bounds__(TOPK_MAX_THREADS, 1) void qsa_topk_wide(
    const float* __restrict__ scores, int capacity, int nq, int n, int k,
    const int* __restrict__ active, int* __restrict__ out, int staged) {
  __shared__ TopkShared s;
  QSA_DYNAMIC_SHARED(topk_dyn);
  const int q = blockIdx.x;
  if (q >= nq) return;
  const int count = topk_clamp_count(active, q, n);
  int* o = out + (size_t)q * k;
  if (k >= count) {
    topk_write_all(o, count, k);
    return;
  }
  const TopkRowSrc src = {scores + (size_t)q * capacity};
  auto emit = [&](unsigned pos, unsigned i) { o[pos] = (int)i; };
  const bool few = (unsigned)k <= blockDim.x / QSA_WAVE;  // block-uniform
  if (staged) {
    unsigned* keys = (unsigned*)topk_dyn;
    const unsigned step = blockDim.x * TOPK_UNROLL;
    for (unsigned base = 0; base < (unsigned)count; base += step) {
      float x[TOPK_UNROLL];
#pragma unroll
      for (int u = 0; u < TOPK_UNROLL; ++u) {
        const unsigned i = base + u * blockDim.x + threadIdx.x;
        x[u] = i < (unsigned)count ? src.row[i] : 0.f;
      }
#pragma unroll
      for (int u = 0; u < TOPK_UNROLL; ++u) {
        const unsigned i = base + u * blockDim.x + threadIdx.x;
        if (i < (unsigned)count) keys[i] = qsa_order_key(x[u]);
      }
    }
    QSA_SYNC();
    const TopkSharedSrc ssrc = {keys};
    if (few && topk_few(ssrc, (unsigned)count, (unsigned)k, o, s)) return;
    const TopkSel sel = topk_radix_stream(ssrc, (unsigned)count, (unsigned)k, s);
    topk_compact_stream(ssrc, (unsigned)count, sel, emit, s);
  } else {
    if (few && topk_few(src, (unsigned)count, (unsigned)k, o, s)) return;
    const TopkSel sel = topk_radix_stream(src, (unsigned)count, (unsigned)k, s);
    topk_compact_stream(src, (unsigned)count, sel, emit, s);
  }
}

// ---------------------------------------------------------------------------------------
// The split: stage A (qsa_topk_split_bound) and stage B (qsa_topk_split_select) over the
// workspace of common/topk_split.h (TopkSplitWs); stage B's last CTA per query runs
// topk_split_final there.
// Stage A. grid (m, nq), block TOPK_SPLIT_THREADS.
// qsa:block 512
QSA_KERNEL __launch_bounds__(TOPK_SPLIT_THREADS, TOPK_SPLIT_BOUND_BLOCKS) void qsa_topk_split_bound(
    const float* __restrict__ scores, int capacity, int nq, int n, int k, unsigned* __restrict__ ws) {
  __shared__ TopkShared s;
  const int c = blockIdx.x, q = blockIdx.y;
  const TopkSplitWs w(ws, nq, n, k);
  if (q >= nq || c >= (int)w.m) return;
  const unsigned r = ((unsigned)k + w.m - 1) / w.m;
  const int len = min(TOPK_SPLIT_CHUNK, n - c * TOPK_SPLIT_CHUNK);
  unsigned* bound = w.bound + (size_t)q * w.m + c;
  TOPK_SPLIT_STAMP(0, c, 0, q);
  if (k >= n || (unsigned)len <= r) {  // every entry may matter: bound at the lowest key
    if (threadIdx.x == 0) *bound = 0u;
    return;
  }
  unsigned key[TOPK_SPLIT_ITEMS];
  const int nv = topk_load_chunk(scores + (size_t)q * capacity, n, c, key);
  TOPK_SPLIT_STAMP(0, c, 1, q);
  const TopkSel sel = topk_radix_regs(key, nv, r, TOPK_BOUND_DIGITS, s);
  if (threadIdx.x == 0) *bound = sel.prefix;  // >= r of the chunk's keys are >= prefix
  TOPK_SPLIT_STAMP(0, c, 2, q);
}

// Stage B. grid (m, nq), block TOPK_SPLIT_THREADS; same workspace as stage A.
// qsa:block 512
QSA_KERNEL __launch_bounds__(TOPK_SPLIT_THREADS, TOPK_SPLIT_SELECT_BLOCKS) void qsa_topk_split_select(
    const float* __restrict__ scores, int capacity, int nq, int n, int k, unsigned* __restrict__ ws,
    int* __restrict__ out) {
  __shared__ TopkShared s;
  const int c = blockIdx.x, q = blockIdx.y;
  const TopkSplitWs w(ws, nq, n, k);
  if (q >= nq || c >= (int)w.m) return;
  TOPK_SPLIT_STAMP(1, c, 0, q);
  unsigned key[TOPK_SPLIT_ITEMS];
  const int nv = topk_load_chunk(scores + (size_t)q * capacity, n, c, key);
  const int base = c * TOPK_SPLIT_CHUNK + threadIdx.x * TOPK_SPLIT_ITEMS;
  TOPK_SPLIT_STAMP(1, c, 1, q);

  // X = min over the chunks' bounds.
  // m <= TOPK_MAX_CHUNKS <= blockDim: one bound per thread, one shared atomic per wave.
  if (threadIdx.x == 0) s.flag = 0xffffffffu;
  unsigned x = threadIdx.x < w.m ? w.bound[(size_t)q * w.m + threadIdx.x] : 0xffffffffu;
#pragma unroll
  for (int off = QSA_WAVE / 2; off > 0; off >>= 1) x = min(x, (unsigned)qsa_shfl_xor(x, off));
  QSA_SYNC();
  if (qsa_lane() == 0 && x != 0xffffffffu) atomicMin(&s.flag, x);
  QSA_SYNC();
  TopkSel sel = {0xffffffffu, s.flag, 0xffffffffu};  // key >= X, every tie
  TOPK_SPLIT_STAMP(1, c, 2, q);
  TopkCounts counts = topk_count_regs(key, nv, sel, s);
  if (counts.gt_total + counts.eq_total > w.kc) {  // heavy ties: the chunk's own top kc
    sel = topk_radix_regs(key, nv, w.kc, 4, s);
    counts = topk_count_regs(key, nv, sel, s);
  }
  unsigned* ckey = w.ckey + ((size_t)q * w.m + c) * w.kc;
  int* cidx = w.cidx + ((size_t)q * w.m + c) * w.kc;
  const unsigned kept = topk_emit_regs(key, nv, sel, counts, [&](unsigned pos, int j) {
    ckey[pos] = key[j];
    cidx[pos] = base + j;
  });
  if (threadIdx.x == 0) w.cnt[(size_t)q * w.m + c] = kept;
  TOPK_SPLIT_STAMP(1, c, 3, q);

  // The last chunk CTA of this query to finish selects (threadFenceReduction pattern).
  __threadfence();
  QSA_SYNC();
  if (threadIdx.x == 0) {
    const unsigned ticket = atomicAdd(&w.done[q], 1u);
    s.flag = ticket == w.m - 1;
    if (s.flag) w.done[q] = 0;  // ready for the next call
  }
  QSA_SYNC();
  TOPK_SPLIT_STAMP(1, c, 4, q);
  if (!s.flag) return;
  __threadfence();
  topk_split_final(w, q, k, out + (size_t)q * k, s, nullptr);
  TOPK_SPLIT_STAMP(2, 0, 7, q);
}

// ---------------------------------------------------------------------------------------
// Speculative kernel (decode in one launch): the body and its proof are topk_spec in
// common/topk_spec.h; the `flags` bits TOPK_SPEC_* are defined there.
// Entry points by chunk size (src/dispatch/topk.rs: SpecChunk): 4,096 entries (8 per
// thread); 2,048 (1 query x 262,144: 128 CTAs, every SM but 4, half the serial work each);
// 8,192 and 16,384 (fewer, fatter chunks: 16 queries x 262,144 is 1,024 CTAs of 4,096, about
// four waves at two CTAs per SM, and 256 of 16,384, one wave).
// qsa:block 512
QSA_KERNEL __launch_bounds__(TOPK_SPLIT_THREADS, TOPK_SPLIT_SELECT_BLOCKS) void qsa_topk_spec(
    const float* __restrict__ scores, int capacity, int nq, int n, int k, unsigned* __restrict__ ws,
    int* __restrict__ out, int flags) {
  __shared__ TopkShared s;
  topk_spec<TOPK_SPLIT_ITEMS>(scores, capacity, nq, n, k, ws, out, flags, s);
}

#if defined(QSA_CUDA)  // src/dispatch/topk.rs plans the other chunks on NVIDIA targets only
// qsa:block 512
QSA_KERNEL __launch_bounds__(TOPK_SPLIT_THREADS, TOPK_SPLIT_SELECT_BLOCKS) void qsa_topk_spec_2k(
    const float* __restrict__ scores, int capacity, int nq, int n, int k, unsigned* __restrict__ ws,
    int* __restrict__ out, int flags) {
  __shared__ TopkShared s;
  topk_spec<4>(scores, capacity, nq, n, k, ws, out, flags, s);
}

// qsa:block 512
QSA_KERNEL __launch_bounds__(TOPK_SPLIT_THREADS, TOPK_SPLIT_SELECT_BLOCKS) void qsa_topk_spec_8k(
    const float* __restrict__ scores, int capacity, int nq, int n, int k, unsigned* __restrict__ ws,
    int* __restrict__ out, int flags) {
  __shared__ TopkShared s;
  topk_spec<16>(scores, capacity, nq, n, k, ws, out, flags, s);
}

// qsa:block 512
QSA_KERNEL __launch_bounds__(TOPK_SPLIT_THREADS, TOPK_SPLIT_SELECT_BLOCKS) void qsa_topk_spec_lean(
    const float* __restrict__ scores, int capacity, int nq, int n, int k, unsigned* __restrict__ ws,
    int* __restrict__ out, int flags) {
  __shared__ TopkShared s;
  topk_spec<TOPK_SPLIT_ITEMS, TOPK_KEEP_LEAN>(scores, capacity, nq, n, k, ws, out, flags, s);
}

// qsa:block 512
QSA_KERNEL __launch_bounds__(TOPK_SPLIT_THREADS, TOPK_SPLIT_SELECT_BLOCKS) void qsa_topk_spec_8k_lean(
    const float* __restrict__ scores, int capacity, int nq, int n, int k, unsigned* __restrict__ ws,
    int* __restrict__ out, int flags) {
  __shared__ TopkShared s;
  topk_spec<16, TOPK_KEEP_LEAN>(scores, capacity, nq, n, k, ws, out, flags, s);
}

// Session 8 (not measured yet): `_x`, the 4,096- and 8,192-entry entry points with session
// 8's flags compiled in (TOPK_SPEC_FENCE_ONE, _BOUND_TMAX, _FINAL_LEAN; TOPK_SPEC_X), their
// lean forms (with the threads' maxima bound only), and 1,024-thread CTAs over 8,192-entry
// chunks (8 entries per thread as qsa_topk_spec, half the CTAs: 3 queries x 262,144 in 96,
// one per SM, where 192 CTAs of 4,096 put two on 60 SMs; the final step spreads its
// candidates over twice the threads), general and lean, flags compiled in too.
// qsa:block 512
QSA_KERNEL __launch_bounds__(TOPK_SPLIT_THREADS, TOPK_SPLIT_SELECT_BLOCKS) void qsa_topk_spec_x(
    const float* __restrict__ scores, int capacity, int nq, int n, int k, unsigned* __restrict__ ws,
    int* __restrict__ out, int flags) {
  __shared__ TopkShared s;
  topk_spec<8, TOPK_KEEP_GENERAL, TOPK_SPLIT_THREADS, TOPK_SPEC_X>(scores, capacity, nq, n, k, ws, out, flags, s);
}

// qsa:block 512
QSA_KERNEL __launch_bounds__(TOPK_SPLIT_THREADS, TOPK_SPLIT_SELECT_BLOCKS) void qsa_topk_spec_8k_x(
    const float* __restrict__ scores, int capacity, int nq, int n, int k, unsigned* __restrict__ ws,
    int* __restrict__ out, int flags) {
  __shared__ TopkShared s;
  topk_spec<16, TOPK_KEEP_GENERAL, TOPK_SPLIT_THREADS, TOPK_SPEC_X>(scores, capacity, nq, n, k, ws, out, flags, s);
}

// The lean entry points with session 8's flags: the bound from the threads' maxima (the
// two-digit bound where the margin exceeds the threads), no one-pass bound.
// qsa:block 512
QSA_KERNEL __launch_bounds__(TOPK_SPLIT_THREADS, TOPK_SPLIT_SELECT_BLOCKS) void qsa_topk_spec_lean_x(
    const float* __restrict__ scores, int capacity, int nq, int n, int k, unsigned* __restrict__ ws,
    int* __restrict__ out, int flags) {
  __shared__ TopkShared s;
  topk_spec<8, TOPK_KEEP_LEAN, TOPK_SPLIT_THREADS, TOPK_SPEC_X>(scores, capacity, nq, n, k, ws, out, flags, s);
}

// qsa:block 512
QSA_KERNEL __launch_bounds__(TOPK_SPLIT_THREADS, TOPK_SPLIT_SELECT_BLOCKS) void qsa_topk_spec_8k_lean_x(
    const float* __restrict__ scores, int capacity, int nq, int n, int k, unsigned* __restrict__ ws,
    int* __restrict__ out, int flags) {
  __shared__ TopkShared s;
  topk_spec<16, TOPK_KEEP_LEAN, TOPK_SPLIT_THREADS, TOPK_SPEC_X>(scores, capacity, nq, n, k, ws, out, flags, s);
}

// The float-domain lean chunk step (topk_spec_chunk_float: the threads' maxima bound, float
// compares), with session 8's other flags.
// qsa:block 512
QSA_KERNEL __launch_bounds__(TOPK_SPLIT_THREADS, TOPK_SPLIT_SELECT_BLOCKS) void qsa_topk_spec_float(
    const float* __restrict__ scores, int capacity, int nq, int n, int k, unsigned* __restrict__ ws,
    int* __restrict__ out, int flags) {
  __shared__ TopkShared s;
  topk_spec<8, TOPK_KEEP_FLOAT, TOPK_SPLIT_THREADS, TOPK_SPEC_X>(scores, capacity, nq, n, k, ws, out, flags, s);
}

// qsa:block 512
QSA_KERNEL __launch_bounds__(TOPK_SPLIT_THREADS, TOPK_SPLIT_SELECT_BLOCKS) void qsa_topk_spec_8k_float(
    const float* __restrict__ scores, int capacity, int nq, int n, int k, unsigned* __restrict__ ws,
    int* __restrict__ out, int flags) {
  __shared__ TopkShared s;
  topk_spec<16, TOPK_KEEP_FLOAT, TOPK_SPLIT_THREADS, TOPK_SPEC_X>(scores, capacity, nq, n, k, ws, out, flags, s);
}

// qsa:block 1024
QSA_KERNEL __launch_bounds__(TOPK_SPEC_WIDE_THREADS, 1) void qsa_topk_spec_t1024_lean_x(
    const float* __restrict__ scores, int capacity, int nq, int n, int k, unsigned* __restrict__ ws,
    int* __restrict__ out, int flags) {
  __shared__ TopkShared s;
  topk_spec<8, TOPK_KEEP_LEAN, TOPK_SPEC_WIDE_THREADS, TOPK_SPEC_X>(scores, capacity, nq, n, k, ws, out, flags, s);
}

// qsa:block 1024
QSA_KERNEL __launch_bounds__(TOPK_SPEC_WIDE_THREADS, 1) void qsa_topk_spec_t1024(
    const float* __restrict__ scores, int capacity, int nq, int n, int k, unsigned* __restrict__ ws,
    int* __restrict__ out, int flags) {
  __shared__ TopkShared s;
  topk_spec<8, TOPK_KEEP_GENERAL, TOPK_SPEC_WIDE_THREADS, TOPK_SPEC_X>(scores, capacity, nq, n, k, ws, out, flags, s);
}

// Session 8 (not measured yet): the lean step over 2,048-entry chunks (1 query x 262,144: 128
// CTAs; call P measured the general 2,048 level with the lean 4,096 at 1 query).
// qsa:block 512
QSA_KERNEL __launch_bounds__(TOPK_SPLIT_THREADS, TOPK_SPLIT_SELECT_BLOCKS) void qsa_topk_spec_2k_lean(
    const float* __restrict__ scores, int capacity, int nq, int n, int k, unsigned* __restrict__ ws,
    int* __restrict__ out, int flags) {
  __shared__ TopkShared s;
  topk_spec<4, TOPK_KEEP_LEAN>(scores, capacity, nq, n, k, ws, out, flags, s);
}

// qsa:block 512
QSA_KERNEL __launch_bounds__(TOPK_SPLIT_THREADS, TOPK_SPLIT_SELECT_BLOCKS) void qsa_topk_spec_16k(
    const float* __restrict__ scores, int capacity, int nq, int n, int k, unsigned* __restrict__ ws,
    int* __restrict__ out, int flags) {
  __shared__ TopkShared s;
  topk_spec<32>(scores, capacity, nq, n, k, ws, out, flags, s);
}
#endif  // QSA_CUDA

// ---------------------------------------------------------------------------------------
// Cluster kernel (sm_90 decode): one cluster of TOPK_CLUSTER CTAs per query, CTA r owning
// the row's r-th part of ceil(n / TOPK_CLUSTER) entries, its keys staged in shared memory.
// One launch; the CTAs exchange what they need through distributed shared memory:
//
// 1. Bound. Each thread remembers the largest key it staged. In each part, the
//    ceil(k / TOPK_CLUSTER)-th largest of its threads' maxima L_r has that many entries >= it
//    (one per thread), so L = min_r L_r has at least k entries >= it: a lower bound of the
//    row's k-th key.
// 2. Candidates. Each CTA keeps its entries >= L, in index order (for exchangeable scores
//    and k = 2048 of 262,144, a few hundred per part).
// 3. Select. One radix select over the candidates whose per-digit histograms are summed
//    across the cluster, so every CTA takes the same decision; then each CTA writes its
//    selected ids after those of the parts before it (their counts read the same way).
// Where the bound leaves more candidates than a CTA has room for (ties, sorted rows,
// NaN-heavy rows) every CTA sees it in the counts and step 3 runs over the whole parts
// instead. Either way the selection is the one a single CTA's radix select over the row
// would make.
#if defined(QSA_HAS_CLUSTERS)
#include "common/topk_cluster.h"

// grid (TOPK_CLUSTER, nq), clusters of TOPK_CLUSTER along x, block TOPK_CLUSTER_THREADS,
// dynamic shared memory ceil(n / TOPK_CLUSTER) * 4 bytes (the part's keys).
// qsa:block 1024
// qsa:dynamic_shared 0
QSA_KERNEL QSA_CLUSTER_DIMS(TOPK_CLUSTER) __launch_bounds__(TOPK_CLUSTER_THREADS, 1) void qsa_topk_cluster(
    const float* __restrict__ scores, int capacity, int nq, int n, int k, const int* __restrict__ active,
    int* __restrict__ out) {
  __shared__ TopkShared s;
  __shared__ TopkClusterShared cs;
  QSA_DYNAMIC_SHARED(topk_dyn);
#if defined(TOPK_CLUSTER_TRACE)
  __shared__ unsigned long long stamps[16];
#endif
  TOPK_STAMP(0);
  const unsigned rank = qsa_cluster_rank();
  const int q = blockIdx.y;
  if (q >= nq) return;  // the whole cluster: one query per cluster
  const int count = topk_clamp_count(active, q, n);
  int* o = out + (size_t)q * k;
  if (k >= count) {  // the whole cluster
    if (rank == 0) topk_write_all(o, count, k);
    return;
  }
  const unsigned part = (unsigned)(n + TOPK_CLUSTER - 1) / TOPK_CLUSTER;
  const unsigned lo = min(rank * part, (unsigned)count);
  const unsigned len = min(part, (unsigned)count - lo);
  unsigned* keys = (unsigned*)topk_dyn;
  const TopkKeySrc ksrc = {keys};

  const unsigned gmax1 = topk_cluster_stage(scores + (size_t)q * capacity + lo, len, keys);
  TOPK_STAMP(1);
  const unsigned b = topk_cluster_part_bound(gmax1, (unsigned)k, s);
  if (threadIdx.x == 0) cs.bound = b;
  TOPK_STAMP(2);
  qsa_cluster_sync();  // every part's bound posted
  if (threadIdx.x == 0) {
    unsigned lower = 0xffffffffu;
    for (unsigned r = 0; r < TOPK_CLUSTER; ++r) lower = min(lower, *qsa_cluster_map(&cs.bound, r));
    cs.flag = lower;
  }
  QSA_SYNC();
  const unsigned bound = cs.flag;  // 1 + L, the same in every CTA; 0: no bound
  TOPK_STAMP(3);
  if (bound != 0) {
    const unsigned kept = topk_cluster_keep(keys, len, bound - 1, s, cs);
    if (threadIdx.x == 0) cs.nkept = kept;
  }
  TOPK_STAMP(4);
  qsa_cluster_sync();  // every part's candidates posted
  bool bounded = bound != 0;
  if (bounded) {  // every CTA reads the same counts, so every CTA takes the same path
    if (threadIdx.x == 0) {
      unsigned over = 0;
      for (unsigned r = 0; r < TOPK_CLUSTER; ++r) over |= *qsa_cluster_map(&cs.nkept, r) > TOPK_CLUSTER_CANDS;
      cs.flag = over;
    }
    QSA_SYNC();
    bounded = cs.flag == 0;
  }
  TOPK_STAMP(5);
  if (bounded) {
    const TopkKeySrc kept = {cs.kept_key};
    topk_cluster_select(kept, cs.nkept, (unsigned)k, o, [&](unsigned i) { return (int)(lo + cs.kept_idx[i]); }, s,
                        cs);
  } else {
    topk_cluster_select(ksrc, len, (unsigned)k, o, [&](unsigned i) { return (int)(lo + i); }, s, cs);
  }
  TOPK_STAMP(6);
  qsa_cluster_sync();  // no CTA leaves while another may still read its counts
  TOPK_STAMP(7);
#if defined(TOPK_CLUSTER_TRACE)
  QSA_SYNC();
  if (threadIdx.x < 8) o[rank * 16 + threadIdx.x] = (int)(stamps[threadIdx.x] - stamps[0]);
#endif
}
#endif  // QSA_HAS_CLUSTERS
