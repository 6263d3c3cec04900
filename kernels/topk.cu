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

// Development probe of the split (off unless built with -DTOPK_SPLIT_TRACE for CUDA,
// tools/h200-topk-split/probe.py): globaltimer stamps of query 0's CTAs, per chunk of stage
// A (slot 0) and stage B (slot 1), and the final CTA's steps (slot 2, chunk 0).
#if defined(TOPK_SPLIT_TRACE) && defined(QSA_CUDA)
__device__ unsigned long long topk_split_trace[3][256][8];
#define TOPK_SPLIT_STAMP(slot, chunk, j, q)                                          \
  do {                                                                             \
    if (threadIdx.x == 0 && (q) == 0) {                                            \
      unsigned long long t_;                                                       \
      asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t_));                     \
      topk_split_trace[slot][chunk][j] = t_;                                       \
    }                                                                              \
  } while (0)
#define TOPK_SPLIT_NOTE(first, total) (topk_split_trace[2][1][0] = (first), topk_split_trace[2][1][1] = (total))
#else
#define TOPK_SPLIT_NOTE(first, total) ((void)0)
#define TOPK_SPLIT_STAMP(slot, chunk, j, q) \
  do {                                      \
  } while (0)
#endif

// Two histograms and two digit results: pass d fills hist[d & 1] while hist[(d + 1) & 1]
// is cleared, so a digit costs three barriers.
struct TopkShared {
  unsigned hist[2][TOPK_BINS];
  unsigned waves[TOPK_MAX_WAVES + 1];
  unsigned offsets[TOPK_MAX_CHUNKS + 1];
  unsigned bin[2], above[2], count[2];
  unsigned flag;
  unsigned lo, hi;  // the split's final step: smallest and largest candidate key
  unsigned floor;   // the speculative kernel's largest chunk bound (its final step checks it)
  unsigned kept;    // the split's final step: candidates at or above that floor
};

// The selection a radix select leaves: entries with (key & mask) > prefix, plus the first
// `need` (by index) of those with (key & mask) == prefix.
struct TopkSel {
  unsigned mask, prefix, need;
};

// Loads of what other CTAs of this launch wrote: past L1, which is not coherent.
QSA_DEVICE unsigned topk_load_cg(const unsigned* p) {
#if defined(QSA_HIP)
  return __hip_atomic_load(p, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
#else
  return __ldcg(p);
#endif
}

QSA_DEVICE int topk_clamp_count(const int* active, int q, int n) {
  if (!active) return n;
  return qsa_clamp_count(active[q], n);
}

// Inclusive scan over the wave.
QSA_DEVICE unsigned topk_wave_scan(unsigned x) {
  const unsigned lane = qsa_lane();
#pragma unroll
  for (int off = 1; off < QSA_WAVE; off <<= 1) {
    const unsigned y = qsa_shfl(x, lane >= (unsigned)off ? lane - off : lane);
    if (lane >= (unsigned)off) x += y;
  }
  return x;
}

// Exclusive scan over the block (every thread calls it); `total` gets the block's sum.
QSA_DEVICE unsigned topk_block_scan(unsigned v, unsigned& total, TopkShared& s) {
  const unsigned lane = qsa_lane(), wave = threadIdx.x / QSA_WAVE;
  const unsigned nwaves = blockDim.x / QSA_WAVE;
  const unsigned x = topk_wave_scan(v);
  QSA_SYNC();  // the previous reader of s.waves is done
  if (lane == QSA_WAVE - 1) s.waves[wave] = x;
  QSA_SYNC();
  if (wave == 0) {
    const unsigned w = lane < nwaves ? s.waves[lane] : 0u;
    const unsigned z = topk_wave_scan(w);
    if (lane < nwaves) s.waves[lane] = z - w;
    if (lane == QSA_WAVE - 1) s.waves[TOPK_MAX_WAVES] = z;
  }
  QSA_SYNC();
  total = s.waves[TOPK_MAX_WAVES];
  return s.waves[wave] + x - v;
}

// Add one entry per lane to the histogram. When the whole wave falls in one bin (the top
// digit of similar scores), one atomic replaces QSA_WAVE colliding ones.
QSA_DEVICE void topk_hist_add(unsigned* hist, bool valid, unsigned bin) {
  const unsigned b = valid ? bin : 0xffffu;
  const unsigned b0 = qsa_shfl(b, 0);
  const qsa_lanemask_t same = qsa_ballot(b == b0);
  if (qsa_popc_mask(same) == QSA_WAVE) {
    if (qsa_lane() == 0 && b0 != 0xffffu) atomicAdd(&hist[b0], (unsigned)QSA_WAVE);
  } else if (valid) {
    atomicAdd(&hist[bin], 1u);
  }
}

QSA_DEVICE void topk_hist_clear(unsigned* hist) {
  for (unsigned i = threadIdx.x; i < TOPK_BINS; i += blockDim.x) hist[i] = 0;
}

// After the histogram hist[b] is complete (and a barrier): the parallel scan of the 256
// bins from the top picks the bin where the running count reaches kr. Only the waves
// that cover the bins scan; each adds the totals of the waves before it (at most 8), so
// it takes two barriers.
QSA_DEVICE void topk_choose_bin(TopkShared& s, int b, unsigned kr) {
  const unsigned t = threadIdx.x, lane = qsa_lane(), wave = t / QSA_WAVE;
  const unsigned bin_waves = TOPK_BINS / QSA_WAVE;
  unsigned c = 0, x = 0;
  if (wave < bin_waves) {  // wave-uniform
    c = s.hist[b][TOPK_BINS - 1 - t];
    x = topk_wave_scan(c);
    if (lane == QSA_WAVE - 1) s.waves[wave] = x;
  }
  QSA_SYNC();
  if (wave < bin_waves) {
    unsigned incl = x;
    for (unsigned w = 0; w < wave; ++w) incl += s.waves[w];
    const unsigned excl = incl - c;
    if (excl < kr && kr <= incl) {
      s.bin[b] = TOPK_BINS - 1 - t;
      s.above[b] = excl;
      s.count[b] = c;
    }
  }
  QSA_SYNC();
}

// One digit decided: update the selection; true when the chosen bin is taken whole.
QSA_DEVICE bool topk_take_digit(const TopkShared& s, int b, int shift, TopkSel& sel, unsigned& kr) {
  sel.mask |= 0xffu << shift;
  sel.prefix |= s.bin[b] << shift;
  kr -= s.above[b];
  sel.need = kr;
  return s.count[b] == kr;
}

// Radix select over keys held in registers (blocked: thread t holds entries
// t * ITEMS .. + ITEMS - 1, the first `nv` valid). Requires 1 <= k <= valid entries.
// Digits [first, last) are decided; every valid key must share `prefix` in the `first`
// digits above them (the caller knows it; 0 when first = 0).
template <int ITEMS>
QSA_DEVICE TopkSel topk_radix_regs(const unsigned (&key)[ITEMS], int nv, unsigned k, int first, unsigned prefix,
                                   int last, TopkShared& s) {
  const unsigned top = first > 0 ? ~0u << (32 - 8 * first) : 0u;
  TopkSel sel = {top, prefix & top, k};
  unsigned kr = k;
  topk_hist_clear(s.hist[first & 1]);
  QSA_SYNC();
  for (int d = first; d < last; ++d) {
    const int shift = 24 - 8 * d, b = d & 1;
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
      const bool v = j < nv && (key[j] & sel.mask) == sel.prefix;
      topk_hist_add(s.hist[b], v, qsa_radix_digit(key[j], shift));
    }
    topk_hist_clear(s.hist[b ^ 1]);
    QSA_SYNC();
    topk_choose_bin(s, b, kr);
    if (topk_take_digit(s, b, shift, sel, kr)) break;
  }
  return sel;
}

template <int ITEMS>
QSA_DEVICE TopkSel topk_radix_regs(const unsigned (&key)[ITEMS], int nv, unsigned k, int digits, TopkShared& s) {
  return topk_radix_regs(key, nv, k, 0, 0u, digits, s);
}

// Radix select over register keys in windows that start where the keys start to differ,
// not on byte edges: bits >= p are decided (every key taking part shares `prefix` there),
// each pass decides the next min(8, p) bits, at most `passes` passes. The split's final
// step starts at the highest bit in which its candidates differ: ~4,500 candidates for
// k = 2048 of 262,144 span about 18 bits, so two 8-bit windows leave the k-th key's bin
// alone where byte-aligned digits (the top byte shared) need three. Requires
// 1 <= k <= entries taking part.
template <int ITEMS>
QSA_DEVICE TopkSel topk_radix_regs_window(const unsigned (&key)[ITEMS], int nv, unsigned k, int p, unsigned prefix,
                                          int passes, TopkShared& s) {
  const unsigned top = p < 32 ? ~0u << p : 0u;
  TopkSel sel = {top, prefix & top, k};
  unsigned kr = k;
  topk_hist_clear(s.hist[0]);
  QSA_SYNC();
  for (int d = 0; p > 0 && d < passes; ++d) {  // block-uniform
    const int shift = max(p - 8, 0), b = d & 1;
    const unsigned wmask = (1u << (p - shift)) - 1u;
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
      const bool v = j < nv && (key[j] & sel.mask) == sel.prefix;
      topk_hist_add(s.hist[b], v, (key[j] >> shift) & wmask);
    }
    topk_hist_clear(s.hist[b ^ 1]);
    QSA_SYNC();
    topk_choose_bin(s, b, kr);
    sel.mask |= wmask << shift;
    sel.prefix |= s.bin[b] << shift;
    kr -= s.above[b];
    sel.need = kr;
    p = shift;
    if (s.count[b] == kr) break;
  }
  return sel;
}

// Ordered compaction of register-held keys, in two halves: count (one block scan) gives
// each thread the selected entries before its own; emit(pos, j) then writes each selected
// entry at its rank in index order. Block totals stay below 2^16.
struct TopkCounts {
  unsigned gt_before, eq_before, gt_total, eq_total;
};

template <int ITEMS>
QSA_DEVICE TopkCounts topk_count_regs(const unsigned (&key)[ITEMS], int nv, TopkSel sel, TopkShared& s) {
  unsigned gt = 0, eq = 0;
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) {
    const unsigned m = key[j] & sel.mask;
    gt += (j < nv && m > sel.prefix);
    eq += (j < nv && m == sel.prefix);
  }
  unsigned total;
  const unsigned before = topk_block_scan(gt | (eq << 16), total, s);
  return TopkCounts{before & 0xffffu, before >> 16, total & 0xffffu, total >> 16};
}

// Returns the number selected.
template <int ITEMS, class Emit>
QSA_DEVICE unsigned topk_emit_regs(const unsigned (&key)[ITEMS], int nv, TopkSel sel, TopkCounts c, Emit emit) {
  unsigned gb = c.gt_before, eb = c.eq_before;
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) {
    const unsigned m = key[j] & sel.mask;
    if (j >= nv) {
      // past the thread's entries
    } else if (m > sel.prefix) {
      emit(gb + min(eb, sel.need), j);
      ++gb;
    } else if (m == sel.prefix) {
      if (eb < sel.need) emit(gb + eb, j);
      ++eb;
    }
  }
  return c.gt_total + min(c.eq_total, sel.need);
}

template <int ITEMS, class Emit>
QSA_DEVICE unsigned topk_compact_regs(const unsigned (&key)[ITEMS], int nv, TopkSel sel, Emit emit,
                                      TopkShared& s) {
  return topk_emit_regs(key, nv, sel, topk_count_regs(key, nv, sel, s), emit);
}

// One streamed histogram pass: digit `shift` of every key that matches the selection's
// prefix, added to `hist` (UNROLL loads per thread in flight, then the adds).
template <class Src>
QSA_DEVICE void topk_hist_pass(const Src& src, unsigned count, TopkSel sel, int shift, unsigned* hist) {
  const unsigned step = blockDim.x * TOPK_UNROLL;
  for (unsigned base = 0; base < count; base += step) {  // block-uniform trip count
    unsigned key[TOPK_UNROLL];
#pragma unroll
    for (int u = 0; u < TOPK_UNROLL; ++u) {
      const unsigned i = base + u * blockDim.x + threadIdx.x;
      key[u] = i < count ? src.key(i) : 0u;
    }
#pragma unroll
    for (int u = 0; u < TOPK_UNROLL; ++u) {
      const unsigned i = base + u * blockDim.x + threadIdx.x;
      const bool v = i < count && (key[u] & sel.mask) == sel.prefix;
      topk_hist_add(hist, v, qsa_radix_digit(key[u], shift));
    }
  }
}

// Radix select streaming keys from a source (src.key(i), i < count) on every pass.
template <class Src>
QSA_DEVICE TopkSel topk_radix_stream(const Src& src, unsigned count, unsigned k, TopkShared& s) {
  TopkSel sel = {0u, 0u, k};
  unsigned kr = k;
  topk_hist_clear(s.hist[0]);
  QSA_SYNC();
  for (int d = 0; d < 4; ++d) {
    const int shift = 24 - 8 * d, b = d & 1;
    topk_hist_pass(src, count, sel, shift, s.hist[b]);
    topk_hist_clear(s.hist[b ^ 1]);
    QSA_SYNC();
    topk_choose_bin(s, b, kr);
    if (topk_take_digit(s, b, shift, sel, kr)) break;
  }
  return sel;
}

// Ordered compaction over a streamed source: each wave owns one contiguous segment, counts
// it with ballots, one block scan gives every wave its offsets, and a second walk writes
// ids in index order. Two block scans in all, whatever the count. In two halves, like the
// register form: count gives each wave the selected entries before its segment (and the
// block's totals), emit writes; a caller may add entries before the block (the cluster
// kernel adds the CTAs of lower rank).
struct TopkSegment {
  unsigned start, end;
};

QSA_DEVICE TopkSegment topk_wave_segment(unsigned count) {
  const unsigned wave = threadIdx.x / QSA_WAVE, nwaves = blockDim.x / QSA_WAVE;
  const unsigned tile = QSA_WAVE * TOPK_UNROLL;
  unsigned seg = (count + nwaves - 1) / nwaves;
  seg = (seg + tile - 1) / tile * tile;
  const unsigned start = min(wave * seg, count);
  return TopkSegment{start, min(start + seg, count)};
}

template <class Src>
QSA_DEVICE TopkCounts topk_count_stream(const Src& src, unsigned count, TopkSel sel, TopkShared& s) {
  const unsigned lane = qsa_lane();
  const unsigned tile = QSA_WAVE * TOPK_UNROLL;
  const TopkSegment w = topk_wave_segment(count);
  unsigned gt = 0, eq = 0;
  for (unsigned base = w.start; base < w.end; base += tile) {  // wave-uniform trip count
    unsigned key[TOPK_UNROLL];
#pragma unroll
    for (int u = 0; u < TOPK_UNROLL; ++u) {
      const unsigned i = base + u * QSA_WAVE + lane;
      key[u] = i < w.end ? src.key(i) : 0u;
    }
#pragma unroll
    for (int u = 0; u < TOPK_UNROLL; ++u) {
      const unsigned i = base + u * QSA_WAVE + lane;
      const unsigned m = key[u] & sel.mask;
      gt += qsa_popc_mask(qsa_ballot(i < w.end && m > sel.prefix));
      eq += qsa_popc_mask(qsa_ballot(i < w.end && m == sel.prefix));
    }
  }
  unsigned tg, te;
  const unsigned gb = topk_block_scan(lane == 0 ? gt : 0u, tg, s);
  const unsigned eb = topk_block_scan(lane == 0 ? eq : 0u, te, s);
  return TopkCounts{qsa_shfl(gb, 0), qsa_shfl(eb, 0), tg, te};
}

template <class Src, class Emit>
QSA_DEVICE void topk_emit_stream(const Src& src, unsigned count, TopkSel sel, TopkCounts c, Emit emit) {
  const unsigned lane = qsa_lane();
  const unsigned tile = QSA_WAVE * TOPK_UNROLL;
  const TopkSegment w = topk_wave_segment(count);
  unsigned gb = c.gt_before, eb = c.eq_before;
  const qsa_lanemask_t below = qsa_lanes_below();
  for (unsigned base = w.start; base < w.end; base += tile) {
    unsigned key[TOPK_UNROLL];
#pragma unroll
    for (int u = 0; u < TOPK_UNROLL; ++u) {
      const unsigned i = base + u * QSA_WAVE + lane;
      key[u] = i < w.end ? src.key(i) : 0u;
    }
#pragma unroll
    for (int u = 0; u < TOPK_UNROLL; ++u) {
      const unsigned i = base + u * QSA_WAVE + lane;
      const unsigned m = key[u] & sel.mask;
      const bool g = i < w.end && m > sel.prefix, e = i < w.end && m == sel.prefix;
      const qsa_lanemask_t gm = qsa_ballot(g), em = qsa_ballot(e);
      const unsigned gbl = gb + qsa_popc_mask(gm & below), ebl = eb + qsa_popc_mask(em & below);
      if (g) emit(gbl + min(ebl, sel.need), i);
      if (e && ebl < sel.need) emit(gbl + ebl, i);
      gb += qsa_popc_mask(gm);
      eb += qsa_popc_mask(em);
    }
  }
}

template <class Src, class Emit>
QSA_DEVICE void topk_compact_stream(const Src& src, unsigned count, TopkSel sel, Emit emit,
                                    TopkShared& s) {
  topk_emit_stream(src, count, sel, topk_count_stream(src, count, sel, s), emit);
}

// Cells [from, k) of an output row hold -1; [0, from) hold 0.. when `all` (k >= count).
QSA_DEVICE void topk_write_all(int* o, int count, int k) {
  for (int i = threadIdx.x; i < k; i += blockDim.x) o[i] = i < count ? i : -1;
}

struct TopkRowSrc {
  const float* row;
  __device__ unsigned key(unsigned i) const { return qsa_order_key(row[i]); }
};

// The small-k paths' end: the `s.flag` candidates gathered (unordered) in s.hist[0] (keys)
// and s.hist[1] (ids), after a barrier. When there are at most TOPK_FEW_CAP of them (and
// they hold every entry at or above a lower bound of the k-th key), each finds its rank (key
// descending, index ascending) and, if selected, its place among the selected ids ascending,
// by a scan of the candidates; else false, nothing written. Requires blockDim >= TOPK_FEW_CAP.
QSA_DEVICE bool topk_few_rank(unsigned k, int* o, TopkShared& s) {
  const unsigned t = threadIdx.x;
  unsigned* ckey = s.hist[0];
  const unsigned* cidx = s.hist[1];
  const unsigned total = s.flag;
  if (total > TOPK_FEW_CAP) return false;  // block-uniform
  unsigned key = 0, id = 0, rank = 0;
  if (t < total) {
    key = ckey[t];
    id = cidx[t];
    for (unsigned j = 0; j < total; ++j) {
      const unsigned kj = ckey[j], ij = cidx[j];
      rank += kj > key || (kj == key && ij < id);
    }
  }
  QSA_SYNC();
  if (t < total) ckey[t] = rank < k;
  QSA_SYNC();
  if (t < total && rank < k) {  // exactly k selected: >= k candidates hold the top k
    unsigned pos = 0;
    for (unsigned j = 0; j < total; ++j) pos += ckey[j] != 0u && cidx[j] < id;
    o[pos] = (int)id;
  }
  return true;
}

// Small k in the register kernel (k <= TOPK_FEW_UNITS; prefill's k = 16): the block's
// threads form 32 units of blockDim / 32 threads (8 keys each); L = the k-th largest of the
// units' maxima is a lower bound of the k-th largest key (k distinct entries are >= L). For
// exchangeable scores about k * (1 + 1/2) entries reach it (256 x 2048, k = 16: ~22), so
// gathering them and ranking them directly (topk_few_rank) replaces the four radix digits
// and the ordered compaction: six block barriers where those take fifteen. False (nothing
// written) when more than TOPK_FEW_CAP reach L (ties, sorted rows): the caller runs the
// radix select on the same registers.
#define TOPK_FEW_UNITS 32
template <int ITEMS>
QSA_DEVICE bool topk_few_regs(const unsigned (&key)[ITEMS], int nv, int base, unsigned k, int* o, TopkShared& s) {
  const unsigned t = threadIdx.x, lane = qsa_lane();
  const unsigned per = blockDim.x / TOPK_FEW_UNITS;  // threads per unit (blockDim % 64 == 0)
  unsigned* umax = s.offsets;                        // the units' maxima
  if (t < TOPK_FEW_UNITS) umax[t] = 0u;
  if (t == 0) s.flag = 0u;
  unsigned mx = 0u;  // 0: no entry (below every key but NaN's, which no bound needs)
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) mx = j < nv ? max(mx, key[j]) : mx;
  // Reduce over aligned groups of 2^a lanes inside one unit (2^a divides `per`), then one
  // shared atomic per group.
  unsigned group = 1;
  while (group < (unsigned)QSA_WAVE && per % (2 * group) == 0) {  // block-uniform
    mx = max(mx, (unsigned)qsa_shfl_xor(mx, group));
    group *= 2;
  }
  QSA_SYNC();  // maxima and counter cleared
  if (lane % group == 0) atomicMax(&umax[t / per], mx);
  QSA_SYNC();
  if (t < QSA_WAVE) {  // wave 0: the k-th largest of the unit maxima, k <= 32 <= QSA_WAVE
    const unsigned v = lane < TOPK_FEW_UNITS ? umax[lane] : 0u;
    unsigned gt = 0, ge = 0;
#pragma unroll
    for (int j = 0; j < TOPK_FEW_UNITS; ++j) {
      const unsigned x = qsa_shfl(v, j);
      gt += x > v;
      ge += x >= v;
    }
    if (lane < TOPK_FEW_UNITS && gt < k && k <= ge) s.bin[0] = v;  // holders write the same word
  }
  QSA_SYNC();
  const unsigned lo = s.bin[0];
  const qsa_lanemask_t below = qsa_lanes_below();
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) {  // the thread's entries in index order; ids any order
    const bool c = j < nv && key[j] >= lo;
    const qsa_lanemask_t bm = qsa_ballot(c);
    if (bm) {  // wave-uniform: one atomic per wave
      unsigned pos = 0;
      if (lane == 0) pos = atomicAdd(&s.flag, (unsigned)qsa_popc_mask(bm));
      pos = qsa_shfl(pos, 0) + qsa_popc_mask(bm & below);
      if (c && pos < TOPK_FEW_CAP) {
        s.hist[0][pos] = key[j];
        s.hist[1][pos] = (unsigned)(base + j);
      }
    }
  }
  QSA_SYNC();
  return topk_few_rank(k, o, s);
}

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

// Small k (k <= waves of the block): L = the k-th largest of the per-wave maxima is a lower
// bound of the row's k-th largest key (k distinct entries are >= L), and whatever the
// distribution of exchangeable scores, only a few dozen entries reach it. The entries >= L
// are gathered (unordered) into s.hist; when there are at most TOPK_FEW_CAP of them each one
// finds its rank (key descending, index ascending) and, if selected, its place among the
// selected ids ascending, by a scan of the candidates. Otherwise (heavy ties, sorted rows)
// it returns false having written nothing, and the caller runs the full radix select.
template <class Src>
QSA_DEVICE bool topk_few(const Src& src, unsigned count, unsigned k, int* o, TopkShared& s) {
  const unsigned t = threadIdx.x, lane = qsa_lane(), wave = t / QSA_WAVE;
  const unsigned nwaves = blockDim.x / QSA_WAVE;
  const unsigned step = blockDim.x * TOPK_UNROLL;
  unsigned mx = 0;
  for (unsigned base = 0; base < count; base += step) {
    unsigned key[TOPK_UNROLL];
#pragma unroll
    for (int u = 0; u < TOPK_UNROLL; ++u) {
      const unsigned i = base + u * blockDim.x + t;
      key[u] = i < count ? src.key(i) : 0u;
    }
#pragma unroll
    for (int u = 0; u < TOPK_UNROLL; ++u) mx = max(mx, key[u]);
  }
#pragma unroll
  for (int off = QSA_WAVE / 2; off > 0; off >>= 1) mx = max(mx, (unsigned)qsa_shfl_xor(mx, off));
  if (lane == 0) s.waves[wave] = mx;  // a wave with no entry gives 0, below every key
  if (t == 0) s.flag = 0;
  QSA_SYNC();
  if (wave == 0) {  // the k-th largest of the wave maxima, k <= nwaves <= QSA_WAVE
    const unsigned v = lane < nwaves ? s.waves[lane] : 0u;
    unsigned gt = 0, ge = 0;
#pragma unroll
    for (int j = 0; j < QSA_WAVE; ++j) {
      const unsigned x = qsa_shfl(v, j);
      gt += x > v;
      ge += x >= v;
    }
    if (gt < k && k <= ge) s.bin[0] = v;  // lanes holding that value write the same word
  }
  QSA_SYNC();
  const unsigned lo = s.bin[0];
  unsigned* ckey = s.hist[0];
  unsigned* cidx = s.hist[1];
  const qsa_lanemask_t below = qsa_lanes_below();
  for (unsigned base = 0; base < count; base += step) {  // block-uniform trip count
    unsigned key[TOPK_UNROLL];
#pragma unroll
    for (int u = 0; u < TOPK_UNROLL; ++u) {
      const unsigned i = base + u * blockDim.x + t;
      key[u] = i < count ? src.key(i) : 0u;
    }
#pragma unroll
    for (int u = 0; u < TOPK_UNROLL; ++u) {
      const unsigned i = base + u * blockDim.x + t;
      const bool c = i < count && key[u] >= lo;
      const qsa_lanemask_t bm = qsa_ballot(c);
      if (bm) {  // wave-uniform: one atomic per wave
        unsigned pos = 0;
        if (lane == 0) pos = atomicAdd(&s.flag, (unsigned)qsa_popc_mask(bm));
        pos = qsa_shfl(pos, 0) + qsa_popc_mask(bm & below);
        if (c && pos < TOPK_FEW_CAP) {
          ckey[pos] = key[u];
          cidx[pos] = i;
        }
      }
    }
  }
  QSA_SYNC();
  return topk_few_rank(k, o, s);
}

struct TopkSharedSrc {
  const unsigned* keys;
  __device__ unsigned key(unsigned i) const { return keys[i]; }
};

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
// Split workspace (u32 words, caller-provided, zeroed once before first use; the kernels
// leave it zeroed where it must be): done[nq] | bound[nq*m] | cnt[nq*m] |
// cand_key[nq*m*kc] | cand_idx[nq*m*kc], m = ceil(n / chunk), kc = min(k, chunk); chunk =
// 4096 for the split, 512 * ITEMS for the speculative kernels (src/gpu/topk.rs).
struct TopkSplitWs {
  unsigned *done, *bound, *cnt, *ckey;
  int* cidx;
  unsigned m, kc;
  __device__ TopkSplitWs(unsigned* ws, int nq, int n, int k, int chunk = TOPK_SPLIT_CHUNK) {
    m = (unsigned)((n + chunk - 1) / chunk);
    kc = (unsigned)min(k, chunk);
    const size_t qm = (size_t)nq * m;
    done = ws;
    bound = done + nq;
    cnt = bound + qm;
    ckey = cnt + qm;
    cidx = (int*)(ckey + qm * kc);
  }
};

QSA_DEVICE int topk_load_chunk(const float* row, int n, int chunk, unsigned (&key)[TOPK_SPLIT_ITEMS]) {
  const int base = chunk * TOPK_SPLIT_CHUNK + threadIdx.x * TOPK_SPLIT_ITEMS;
  const int nv = max(0, min(TOPK_SPLIT_ITEMS, n - base));
#pragma unroll
  for (int j = 0; j < TOPK_SPLIT_ITEMS; ++j) key[j] = j < nv ? qsa_order_key(row[base + j]) : 0u;
  return nv;
}

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

// Where candidate p of a query lives: the chunk whose offset range holds it.
QSA_DEVICE unsigned topk_cand_slot(const TopkShared& s, unsigned m, unsigned kc, unsigned p) {
  unsigned lo = 0, hi = m;  // offsets[lo] <= p < offsets[hi]
  while (hi - lo > 1) {
    const unsigned mid = (lo + hi) / 2;
    if (s.offsets[mid] <= p) lo = mid; else hi = mid;
  }
  return lo * kc + (p - s.offsets[lo]);
}

struct TopkCandSrc {
  const TopkShared* s;
  const unsigned* ckey;
  unsigned m, kc;
  __device__ unsigned key(unsigned p) const { return topk_load_cg(ckey + topk_cand_slot(*s, m, kc, p)); }
};

// The last CTA of a query: select k among the chunks' candidates. The selection's k-th key
// is at least its radix prefix; when that prefix lies below `floor`, the largest of the
// query's chunk bounds `bounds` (m of them), the candidates are not proven to hold the
// selection (the speculative kernel's check, below): nothing is written and the result is
// false. The split passes no bounds: floor 0 (its bound X is proven). The bounds are read
// with the chunks' counts, in one round trip to L2. s.floor must be 0 on entry.
QSA_DEVICE bool topk_split_final(const TopkSplitWs& w, int q, int k, int* o, TopkShared& s,
                                 const unsigned* bounds, bool window = false) {
  const unsigned* cnt = w.cnt + (size_t)q * w.m;
  const unsigned* ckey = w.ckey + (size_t)q * w.m * w.kc;
  const int* cidx = w.cidx + (size_t)q * w.m * w.kc;
  const unsigned t = threadIdx.x;
  TOPK_SPLIT_STAMP(2, 0, 0, q);
  const unsigned c = t < w.m ? topk_load_cg(cnt + t) : 0u;  // m <= 256 <= blockDim
  if (bounds) {  // block-uniform: the largest bound, posted before the scan's barriers
    unsigned b = t < w.m ? topk_load_cg(bounds + t) : 0u;
#pragma unroll
    for (int off = QSA_WAVE / 2; off > 0; off >>= 1) b = max(b, (unsigned)qsa_shfl_xor(b, off));
    if (qsa_lane() == 0) atomicMax(&s.floor, b);
  }
  unsigned total;
  const unsigned off = topk_block_scan(c, total, s);
  if (t < w.m) s.offsets[t] = off;
  if (t == 0) {
    s.offsets[w.m] = total;
    s.lo = 0xffffffffu;
    s.hi = 0u;
    s.kept = 0u;
  }
  QSA_SYNC();
  const unsigned floor = bounds ? s.floor : 0u;
  TOPK_SPLIT_STAMP(2, 0, 1, q);
  auto id_of = [&](unsigned p) {
    return (int)topk_load_cg((const unsigned*)cidx + topk_cand_slot(s, w.m, w.kc, p));
  };
  if ((unsigned)k >= total) {  // only when k >= n: every candidate, then -1
    for (unsigned i = t; i < (unsigned)k; i += blockDim.x) o[i] = i < total ? id_of(i) : -1;
    return true;
  }
  if (total <= blockDim.x * TOPK_FINAL_ITEMS) {
    // Blocked over every thread (per <= TOPK_FINAL_ITEMS each), so that the serial
    // histogram adds per thread are as few as the candidates allow.
    const unsigned per = (total + blockDim.x - 1) / blockDim.x;
    const unsigned base = t * per;
    const int nv = (int)min(per, total > base ? total - base : 0u);
    // Keys and ids are loaded together, up front (loading ids while writing the output would
    // chain one L2 round trip per selected entry), and every load before any use: a use of
    // key[j] in this loop would wait for each load before the next slot search (12 L2 round
    // trips, 3.3 us on the H200: tools/h200-topk-split/probe.py's trace).
    unsigned key[TOPK_FINAL_ITEMS];
    int ids[TOPK_FINAL_ITEMS];
    unsigned ch = nv > 0 ? topk_cand_slot(s, w.m, w.kc, base) / w.kc : 0u;
#pragma unroll
    for (int j = 0; j < TOPK_FINAL_ITEMS; ++j) {
      const unsigned p = base + j;
      key[j] = 0u;
      ids[j] = -1;
      if (j < nv) {
        while (p >= s.offsets[ch + 1]) ++ch;  // the next non-empty chunk
        const unsigned slot = ch * w.kc + (p - s.offsets[ch]);
        key[j] = topk_load_cg(ckey + slot);
        ids[j] = (int)topk_load_cg((const unsigned*)cidx + slot);
      }
    }
    // Candidates below the floor cannot be selected once at least k lie at or above it.
    unsigned lo = 0xffffffffu, hi = 0u, kept = 0u;
#pragma unroll
    for (int j = 0; j < TOPK_FINAL_ITEMS; ++j) {
      if (j < nv && key[j] >= floor) {
        lo = min(lo, key[j]);
        hi = max(hi, key[j]);
        ++kept;
      }
    }
    TOPK_SPLIT_STAMP(2, 0, 2, q);
#pragma unroll
    for (int off = QSA_WAVE / 2; off > 0; off >>= 1) {
      lo = min(lo, (unsigned)qsa_shfl_xor(lo, off));
      hi = max(hi, (unsigned)qsa_shfl_xor(hi, off));
      kept += qsa_shfl_xor(kept, off);
    }
    if (qsa_lane() == 0) {
      atomicMin(&s.lo, lo);
      atomicMax(&s.hi, hi);
      atomicAdd(&s.kept, kept);
    }
    QSA_SYNC();
    lo = s.lo;
    hi = s.hi;
    // Fewer than k at or above the floor: the k-th candidate lies below it (block-uniform).
    if (s.kept < (unsigned)k) return false;
    // The digits that every kept candidate shares need no pass: start below them. The others
    // become key 0, which never matches the kept ones' prefix when that prefix is not 0 (else
    // every candidate takes part from the first digit: still exact, k of them are kept).
    // Byte digits start at the first byte in which they differ, windows (`window`) at the
    // first bit: p bits below the shared ones.
    int first = lo == hi ? 4 : __clz((int)(lo ^ hi)) / 8;
    int p = lo == hi ? 0 : 32 - __clz((int)(lo ^ hi));
    const unsigned top = window ? (p < 32 ? ~0u << p : 0u) : first > 0 ? ~0u << (32 - 8 * first) : 0u;
    if (floor > 0u) {
      if ((lo & top) == 0u) {
        first = 0;
        p = 32;
      } else {
#pragma unroll
        for (int j = 0; j < TOPK_FINAL_ITEMS; ++j) key[j] = key[j] >= floor ? key[j] : 0u;
      }
    }
    TOPK_SPLIT_STAMP(2, 0, 3, q);
    const TopkSel sel = window ? topk_radix_regs_window(key, nv, (unsigned)k, p, lo, 4, s)
                               : topk_radix_regs(key, nv, (unsigned)k, first, lo, 4, s);
    TOPK_SPLIT_STAMP(2, 0, 4, q);
    if (threadIdx.x == 0 && q == 0) TOPK_SPLIT_NOTE(first, total);
    topk_compact_regs(key, nv, sel, [&](unsigned pos, int j) { o[pos] = ids[j]; }, s);
    TOPK_SPLIT_STAMP(2, 0, 5, q);
  } else {  // heavy ties left many candidates: stream them
    const TopkCandSrc src = {&s, ckey, w.m, w.kc};
    const TopkSel sel = topk_radix_stream(src, total, (unsigned)k, s);
    if (sel.prefix < floor) return false;
    topk_compact_stream(src, total, sel, [&](unsigned pos, unsigned p) { o[pos] = id_of(p); }, s);
  }
  return true;
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
// Speculative kernel (decode in one launch). grid (m, nq), block TOPK_SPLIT_THREADS, the
// split's workspace. Stage A's only job is a bound that every chunk can trust; here each
// chunk trusts its own, checked afterwards:
// 1. Chunk c keeps its entries >= b_c, b_c its own 16-bit-aligned bound with at least
//    TOPK_SPEC_MARGIN * ceil(k / m) of its entries >= b_c (two radix digits, as stage A).
//    Where that keeps more than kc (ties), it keeps its own top kc instead and publishes
//    b_c = 0: a query's selection restricted to a chunk is a prefix of the chunk's order, of
//    at most kc entries, so that chunk holds its part of the selection whatever the bound.
// 2. The last CTA of the query selects k among the candidates (as the split's final step)
//    and checks T >= max_c b_c, T the radix prefix of the selection's k-th key. If it holds,
//    every entry of the row at or above the row's k-th key K* is a candidate (candidates are
//    a subset of the row, so their k-th key T' satisfies b_c <= T <= T' <= K*), so the
//    selection among candidates is the row's. If not (sorted rows: the late chunks' bounds
//    sit above K*), that CTA selects over the whole row itself: exact, and slower.
// For exchangeable scores the margin puts every chunk's bound below K*: the chunks' counts
// at their bounds vary by about sqrt(count), far less than the margin (1 of 32 per chunk).
#if !defined(TOPK_SPEC_MARGIN)  // overridable only by development probes
#define TOPK_SPEC_MARGIN 2
#endif
// The speculative kernel's variants (the `flags` argument; src/dispatch/topk.rs sets them
// from the QSA_TOPK_SPEC_* switches, all on by default: each measured faster on the H200):
// each is exact either way, they differ in time only.
// Final step: radix windows from the candidates' first differing bit (two passes where byte
// digits take three for continuous scores).
#define TOPK_SPEC_FINAL_WINDOW 1
// Chunk bound in one histogram pass (topk_bound_window) instead of two radix digits.
#define TOPK_SPEC_BOUND_WINDOW 2
// Chunk keys loaded with 16-byte loads where the thread's entries are aligned and whole.
#define TOPK_SPEC_LOAD_VEC4 4

// A chunk's keys, blocked (thread t: entries t * ITEMS .. + ITEMS - 1 of the chunk).
template <int ITEMS>
QSA_DEVICE int topk_load_chunk_items(const float* row, int n, int chunk, bool vec4, unsigned (&key)[ITEMS]) {
  const int base = chunk * (ITEMS * TOPK_SPLIT_THREADS) + threadIdx.x * ITEMS;
  const int nv = max(0, min(ITEMS, n - base));
  // `whole` is tested on n - base itself, not as nv == ITEMS: nvcc 13.0 folded that test into
  // the VIMNMX computing nv (sm_90 SASS: `VIMNMX.RELU R37, P0, P0, R47, 0x8`, then `@P0 BRA
  // !P1` into the LDG.128s) and on the card the 16-byte loads ran for a thread with 3 of its 8
  // entries (read past the row's end): compute-sanitizer memcheck on the H200,
  // 2026-12-02, "Invalid __global__ read of size 16 bytes in kernel qsa_topk_spec", n = 20,803,
  // and the full chunks took the scalar loads (why vec4 measured no gain in call A1).
  const bool whole = n - base >= ITEMS;
  if (vec4 && whole && ((size_t)(row + base) & 15u) == 0) {
    const float4* row4 = (const float4*)(row + base);
    float4 x[ITEMS / 4];
#pragma unroll
    for (int j = 0; j < ITEMS / 4; ++j) x[j] = row4[j];
#pragma unroll
    for (int j = 0; j < ITEMS / 4; ++j) {
      key[4 * j] = qsa_order_key(x[j].x);
      key[4 * j + 1] = qsa_order_key(x[j].y);
      key[4 * j + 2] = qsa_order_key(x[j].z);
      key[4 * j + 3] = qsa_order_key(x[j].w);
    }
  } else {
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) key[j] = j < nv ? qsa_order_key(row[base + j]) : 0u;
  }
  return nv;
}

// A chunk bound in one histogram pass: the entries that share the chunk's largest key's top
// 9 bits (sign and exponent of the score: its octave), binned by the next 8 bits; the
// result is the lower edge of the bin where the count from the top reaches r, so at least r
// entries lie at or above it (a 15-bit-aligned key, finer than two byte digits' 16 bits).
// When the octave holds fewer than r entries (an outlier above the rest) the two-digit radix
// bound is taken instead. Three block barriers plus one, where two digits take six.
template <int ITEMS, bool LEAN = false>
QSA_DEVICE unsigned topk_bound_window(const unsigned (&key)[ITEMS], int nv, unsigned r, TopkShared& s) {
  const unsigned wave = threadIdx.x / QSA_WAVE;
  const unsigned nwaves = blockDim.x / QSA_WAVE;
  unsigned mx = 0u;
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) mx = j < nv ? max(mx, key[j]) : mx;
#pragma unroll
  for (int off = QSA_WAVE / 2; off > 0; off >>= 1) mx = max(mx, (unsigned)qsa_shfl_xor(mx, off));
  if (qsa_lane() == 0) s.waves[wave] = mx;
  topk_hist_clear(s.hist[0]);
  if (threadIdx.x == 0) s.count[0] = 0xffffffffu;  // no bin reached r
  QSA_SYNC();
  unsigned hi = 0u;
  for (unsigned w = 0; w < nwaves; ++w) hi = max(hi, s.waves[w]);
  const unsigned octave = hi & 0xff800000u;
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) {
    const bool v = j < nv && (key[j] & 0xff800000u) == octave;
    if (!LEAN) {
      topk_hist_add(s.hist[0], v, (key[j] >> 15) & 0xffu);
    } else if (v) {  // the window's bins are spread: no whole-wave check
      atomicAdd(&s.hist[0][(key[j] >> 15) & 0xffu], 1u);
    }
  }
  QSA_SYNC();  // also: every thread has read s.waves before topk_choose_bin writes it
  topk_choose_bin(s, 0, r);
  if (s.count[0] != 0xffffffffu) return octave | (s.bin[0] << 15);  // block-uniform
  return topk_radix_regs(key, nv, r, TOPK_BOUND_DIGITS, s).prefix;
}

// A chunk's candidate slots in the workspace.
QSA_DEVICE unsigned* ckey_of(const TopkSplitWs& w, int q, int c) { return w.ckey + ((size_t)q * w.m + c) * w.kc; }
QSA_DEVICE int* cidx_of(const TopkSplitWs& w, int q, int c) { return w.cidx + ((size_t)q * w.m + c) * w.kc; }

// The lean keep: the chunk's entries >= bound, in index order, one compare per key; returns
// how many, or 0xffffffff (nothing written) when more than kc (ties: the caller caps).
template <int ITEMS>
QSA_DEVICE unsigned topk_spec_keep_lean(const unsigned (&key)[ITEMS], int nv, unsigned bound, unsigned kc,
                                        unsigned* ckey, int* cidx, int base, TopkShared& s) {
  unsigned ge = 0u, total;
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) ge += j < nv && key[j] >= bound;
  unsigned pos = topk_block_scan(ge, total, s);
  if (total > kc) return 0xffffffffu;  // block-uniform
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) {
    if (j < nv && key[j] >= bound) {
      ckey[pos] = key[j];
      cidx[pos] = base + j;
      ++pos;
    }
  }
  return total;
}

// The speculative kernel's body: chunks of 512 * ITEMS entries, `flags` TOPK_SPEC_*. LEAN
// (the `_lean` entry points, not measured yet; the others are the H200's measured code): the
// one-pass bound's histogram adds without the whole-wave check (its bins are spread), and
// the entries >= bound counted and written with one compare per key, where the general
// count / emit compare (key & mask) with the prefix twice.
template <int ITEMS, bool LEAN = false>
QSA_DEVICE void topk_spec(const float* __restrict__ scores, int capacity, int nq, int n, int k,
                          unsigned* __restrict__ ws, int* __restrict__ out, int flags, TopkShared& s) {
#if !defined(QSA_CUDA)
  flags = 0;  // the variants are CUDA's (the host plans none elsewhere): no registers for them
#endif
  const int chunk = ITEMS * TOPK_SPLIT_THREADS;
  const int c = blockIdx.x, q = blockIdx.y;
  const TopkSplitWs w(ws, nq, n, k, chunk);
  if (q >= nq || c >= (int)w.m) return;
  int* o = out + (size_t)q * k;
  if (k >= n) {  // every entry: no workspace, no ticket
    if (c == 0) topk_write_all(o, n, k);
    return;
  }
  const float* row = scores + (size_t)q * capacity;
  TOPK_SPLIT_STAMP(1, c, 0, q);
  unsigned key[ITEMS];
  const int nv = topk_load_chunk_items(row, n, c, (flags & TOPK_SPEC_LOAD_VEC4) != 0, key);
  const int base = c * chunk + threadIdx.x * ITEMS;
  TOPK_SPLIT_STAMP(1, c, 1, q);
  const int len = min(chunk, n - c * chunk);
  const unsigned r = TOPK_SPEC_MARGIN * (((unsigned)k + w.m - 1) / w.m);
  unsigned bound = 0u;  // every entry when the chunk has no more than r
  if ((unsigned)len > r) {
    bound = (flags & TOPK_SPEC_BOUND_WINDOW) ? topk_bound_window<ITEMS, LEAN>(key, nv, r, s)
                                             : topk_radix_regs(key, nv, r, TOPK_BOUND_DIGITS, s).prefix;
  }
  TopkSel sel = {0xffffffffu, bound, 0xffffffffu};  // key >= bound, every tie
  TOPK_SPLIT_STAMP(1, c, 2, q);
  unsigned kept = 0xffffffffu;  // LEAN: set where the chunk keeps no more than kc
  if (LEAN) kept = topk_spec_keep_lean(key, nv, bound, w.kc, ckey_of(w, q, c), cidx_of(w, q, c), base, s);
  if (!LEAN || kept == 0xffffffffu) {
    TopkCounts counts = topk_count_regs(key, nv, sel, s);
    if (counts.gt_total + counts.eq_total > w.kc) {  // ties: the chunk's own top kc, proven
      sel = topk_radix_regs(key, nv, w.kc, 4, s);
      counts = topk_count_regs(key, nv, sel, s);
      bound = 0u;
    }
    unsigned* ckey = ckey_of(w, q, c);
    int* cidx = cidx_of(w, q, c);
    kept = topk_emit_regs(key, nv, sel, counts, [&](unsigned pos, int j) {
      ckey[pos] = key[j];
      cidx[pos] = base + j;
    });
  }
  if (threadIdx.x == 0) {
    w.cnt[(size_t)q * w.m + c] = kept;
    w.bound[(size_t)q * w.m + c] = bound;
  }
  TOPK_SPLIT_STAMP(1, c, 3, q);
  __threadfence();
  QSA_SYNC();
  if (threadIdx.x == 0) {
    const unsigned ticket = atomicAdd(&w.done[q], 1u);
    s.flag = ticket == w.m - 1;
    if (s.flag) w.done[q] = 0;  // ready for the next call
    s.floor = 0u;
  }
  QSA_SYNC();
  TOPK_SPLIT_STAMP(1, c, 4, q);
  if (!s.flag) return;
  __threadfence();
  if (topk_split_final(w, q, k, o, s, w.bound + (size_t)q * w.m, (flags & TOPK_SPEC_FINAL_WINDOW) != 0)) {
    TOPK_SPLIT_STAMP(2, 0, 7, q);
    return;
  }
  // Not proven: select over the whole row (every chunk's bound is reset by its next call).
  const TopkRowSrc src = {row};
  const TopkSel all = topk_radix_stream(src, (unsigned)n, (unsigned)k, s);
  topk_compact_stream(src, (unsigned)n, all, [&](unsigned pos, unsigned i) { o[pos] = (int)i; }, s);
}

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
  topk_spec<TOPK_SPLIT_ITEMS, true>(scores, capacity, nq, n, k, ws, out, flags, s);
}

// qsa:block 512
QSA_KERNEL __launch_bounds__(TOPK_SPLIT_THREADS, TOPK_SPLIT_SELECT_BLOCKS) void qsa_topk_spec_8k_lean(
    const float* __restrict__ scores, int capacity, int nq, int n, int k, unsigned* __restrict__ ws,
    int* __restrict__ out, int flags) {
  __shared__ TopkShared s;
  topk_spec<16, true>(scores, capacity, nq, n, k, ws, out, flags, s);
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
#if !defined(TOPK_CLUSTER)  // overridable only by development probes (sizes past 8 need the
                            // non-portable cluster attribute at launch)
#define TOPK_CLUSTER 8
#endif
#define TOPK_CLUSTER_THREADS 1024
// Candidates one CTA may keep (step 2), and that the full path's last two digits may read
// instead of the whole part (a 16-bit prefix leaves a few hundred for exchangeable scores).
#define TOPK_CLUSTER_CANDS 2048
// 16-byte loads in flight per thread while staging.
#define TOPK_STAGE_VECS 8

// Development probe (off unless built with -DTOPK_CLUSTER_TRACE, tools/h200-topk-cluster/):
// thread 0's globaltimer at the kernel's steps, written over the output row's first cells
// instead of ids.
#if defined(TOPK_CLUSTER_TRACE)
#define TOPK_STAMP(j)                                 \
  do {                                                \
    if (threadIdx.x == 0) stamps[j] = qsa_globaltimer(); \
  } while (0)
#else
#define TOPK_STAMP(j) \
  do {                \
  } while (0)
#endif

struct TopkClusterShared {
  // This CTA's histogram of digit d in part[d % 3], read by the whole cluster. Three, so
  // that clearing the next one (during digit d) never meets a slower CTA still summing
  // digit d - 1's: every CTA has passed digit d - 1's barrier, after its reads of d - 2.
  unsigned part[3][TOPK_BINS];
  unsigned above, at;  // entries of this part above / at the prefix, read by later ranks
  unsigned gt_base, eq_base;
  unsigned bound;  // 1 + this part's bound L_r; 0: none
  unsigned nkept;  // this part's entries >= L (may exceed the room)
  unsigned flag;
  unsigned kept_key[TOPK_CLUSTER_CANDS];  // entries >= L in index order; the full path
  unsigned kept_idx[TOPK_CLUSTER_CANDS];  // gathers its prefix-matching keys in kept_key
};

struct TopkKeySrc {  // keys in shared memory
  const unsigned* keys;
  __device__ unsigned key(unsigned i) const { return keys[i]; }
};

// Digit d of the full path's radix select over this CTA's `len` keys: the part's histogram,
// a cluster barrier, the sum of every part's histogram, the common decision. True when the
// selection is complete (the same in every CTA: they sum the same counts).
template <class Src>
QSA_DEVICE bool topk_cluster_digit(const Src& src, unsigned len, int d, TopkSel& sel, unsigned& kr,
                                   TopkShared& s, TopkClusterShared& cs) {
  const int shift = 24 - 8 * d, b = d & 1;
  unsigned* h = cs.part[d % 3];
  topk_hist_pass(src, len, sel, shift, h);
  topk_hist_clear(cs.part[(d + 1) % 3]);
  qsa_cluster_sync();  // every part's histogram of this digit is complete
  for (unsigned i = threadIdx.x; i < TOPK_BINS; i += blockDim.x) {
    unsigned sum = 0;
#pragma unroll
    for (unsigned r = 0; r < TOPK_CLUSTER; ++r) sum += *qsa_cluster_map(&h[i], r);
    s.hist[b][i] = sum;
  }
  QSA_SYNC();
  topk_choose_bin(s, b, kr);
  return topk_take_digit(s, b, shift, sel, kr);
}

// The keys of this CTA's part that match the selection's prefix, gathered (in any order)
// into cs.kept_key; false (nothing usable) when more than TOPK_CLUSTER_CANDS match.
template <class Src>
QSA_DEVICE bool topk_cluster_gather(const Src& src, unsigned len, TopkSel sel, TopkClusterShared& cs) {
  const unsigned lane = qsa_lane();
  const qsa_lanemask_t below = qsa_lanes_below();
  const unsigned step = blockDim.x * TOPK_UNROLL;
  if (threadIdx.x == 0) cs.nkept = 0;
  QSA_SYNC();
  for (unsigned base = 0; base < len; base += step) {
    unsigned key[TOPK_UNROLL];
#pragma unroll
    for (int u = 0; u < TOPK_UNROLL; ++u) {
      const unsigned i = base + u * blockDim.x + threadIdx.x;
      key[u] = i < len ? src.key(i) : 0u;
    }
#pragma unroll
    for (int u = 0; u < TOPK_UNROLL; ++u) {
      const unsigned i = base + u * blockDim.x + threadIdx.x;
      const bool c = i < len && (key[u] & sel.mask) == sel.prefix;
      const qsa_lanemask_t bm = qsa_ballot(c);
      if (bm) {  // wave-uniform: one atomic per wave
        unsigned pos = 0;
        if (lane == 0) pos = atomicAdd(&cs.nkept, (unsigned)qsa_popc_mask(bm));
        pos = qsa_shfl(pos, 0) + qsa_popc_mask(bm & below);
        if (c && pos < TOPK_CLUSTER_CANDS) cs.kept_key[pos] = key[u];
      }
    }
  }
  QSA_SYNC();
  return cs.nkept <= TOPK_CLUSTER_CANDS;
}

// The full path's radix select: two digits over the part, then (when the prefix leaves few
// keys) the last two over the gathered keys only. Every CTA reaches the same cluster
// barriers: the digit loop ends at the same digit in all of them.
QSA_DEVICE TopkSel topk_radix_cluster(const TopkKeySrc& src, unsigned len, unsigned k, TopkShared& s,
                                      TopkClusterShared& cs) {
  TopkSel sel = {0u, 0u, k};
  unsigned kr = k;
  topk_hist_clear(cs.part[0]);
  QSA_SYNC();
  for (int d = 0; d < 2; ++d) {
    if (topk_cluster_digit(src, len, d, sel, kr, s, cs)) return sel;
  }
  // Block-uniform; CTAs may differ. A source that is already small (the bounded path's
  // candidates, which live in cs.kept_key) is read as it is.
  const bool few = len > TOPK_CLUSTER_CANDS && topk_cluster_gather(src, len, sel, cs);
  const TopkKeySrc gathered = {cs.kept_key};
  for (int d = 2; d < 4; ++d) {
    const bool done = few ? topk_cluster_digit(gathered, cs.nkept, d, sel, kr, s, cs)
                          : topk_cluster_digit(src, len, d, sel, kr, s, cs);
    if (done) break;
  }
  return sel;
}

// Keys of the part into shared memory (16-byte loads where the part starts 16-byte
// aligned). Returns 1 + the largest key this thread staged, 0 if it staged none.
QSA_DEVICE unsigned topk_cluster_stage(const float* row, unsigned len, unsigned* keys) {
  const unsigned t = threadIdx.x;
  unsigned done = 0, mx = 0;
  if (((size_t)row & 15u) == 0) {
    const unsigned n4 = len / 4;
    const float4* row4 = (const float4*)row;
    uint4* keys4 = (uint4*)keys;
    // Eight 16-byte loads in flight per thread: a 128 KiB part in one memory round trip.
    const unsigned step = blockDim.x * TOPK_STAGE_VECS;
    for (unsigned base = 0; base < n4; base += step) {
      float4 x[TOPK_STAGE_VECS];
#pragma unroll
      for (int u = 0; u < TOPK_STAGE_VECS; ++u) {
        const unsigned i = base + u * blockDim.x + t;
        if (i < n4) x[u] = row4[i];
      }
#pragma unroll
      for (int u = 0; u < TOPK_STAGE_VECS; ++u) {
        const unsigned i = base + u * blockDim.x + t;
        if (i < n4) {
          const uint4 k4 = make_uint4(qsa_order_key(x[u].x), qsa_order_key(x[u].y), qsa_order_key(x[u].z),
                                      qsa_order_key(x[u].w));
          keys4[i] = k4;
          mx = max(mx, 1u + max(max(k4.x, k4.y), max(k4.z, k4.w)));
        }
      }
    }
    done = n4 * 4;
  }
  for (unsigned i = done + t; i < len; i += blockDim.x) {
    const unsigned key = qsa_order_key(row[i]);
    keys[i] = key;
    mx = max(mx, 1u + key);  // keys stay below 0xff800001 (+inf): no wrap
  }
  QSA_SYNC();
  return mx;
}

// Step 1, in every CTA: 1 + a key L_r with at least ceil(k / TOPK_CLUSTER) of this part's
// entries >= L_r (the ceil(k / TOPK_CLUSTER)-th largest of its threads' maxima, to two
// digits); 0 when there is none (too few threads staged anything). L = min_r L_r has at
// least k entries >= it in the row: a lower bound of the k-th key.
QSA_DEVICE unsigned topk_cluster_part_bound(unsigned gmax1, unsigned k, TopkShared& s) {
  const unsigned kr = (k + TOPK_CLUSTER - 1) / TOPK_CLUSTER;  // <= 512 <= blockDim
  const unsigned v[1] = {gmax1};
  // Empty threads hold 0, below every 1 + key: if the kr-th largest is 0, no bound.
  return topk_radix_regs(v, 1, kr, TOPK_BOUND_DIGITS, s).prefix;  // low digits 0
}

// Step 2: this part's entries >= L, in index order, into cs.kept_key / kept_idx (the first
// TOPK_CLUSTER_CANDS of them). Returns how many there are. One predicate, so one ballot per
// key where the general compaction takes two.
QSA_DEVICE unsigned topk_cluster_keep(const unsigned* keys, unsigned len, unsigned lower, TopkShared& s,
                                      TopkClusterShared& cs) {
  const unsigned lane = qsa_lane();
  const unsigned tile = QSA_WAVE * TOPK_UNROLL;
  const TopkSegment w = topk_wave_segment(len);
  unsigned c = 0;
  for (unsigned base = w.start; base < w.end; base += tile) {  // wave-uniform trip count
#pragma unroll
    for (int u = 0; u < TOPK_UNROLL; ++u) {
      const unsigned i = base + u * QSA_WAVE + lane;
      c += qsa_popc_mask(qsa_ballot(i < w.end && keys[i] >= lower));
    }
  }
  unsigned total;
  unsigned pos = qsa_shfl(topk_block_scan(lane == 0 ? c : 0u, total, s), 0);
  const qsa_lanemask_t below = qsa_lanes_below();
  for (unsigned base = w.start; base < w.end; base += tile) {
#pragma unroll
    for (int u = 0; u < TOPK_UNROLL; ++u) {
      const unsigned i = base + u * QSA_WAVE + lane;
      const unsigned key = i < w.end ? keys[i] : 0u;
      const bool keep = i < w.end && key >= lower;
      const qsa_lanemask_t m = qsa_ballot(keep);
      const unsigned at = pos + qsa_popc_mask(m & below);
      if (keep && at < TOPK_CLUSTER_CANDS) {
        cs.kept_key[at] = key;
        cs.kept_idx[at] = i;
      }
      pos += qsa_popc_mask(m);
    }
  }
  return total;
}

// The ids: one radix select over `src` (the part, or its candidates) with the cluster's
// summed histograms, then this CTA's selected entries after those of the parts before it.
// id(i) is the row index of entry i of `src`.
template <class Id>
QSA_DEVICE void topk_cluster_select(const TopkKeySrc& src, unsigned len, unsigned k, int* o, Id id,
                                    TopkShared& s, TopkClusterShared& cs) {
  const unsigned rank = qsa_cluster_rank();
  const TopkSel sel = topk_radix_cluster(src, len, k, s, cs);
  TopkCounts c = topk_count_stream(src, len, sel, s);
  if (threadIdx.x == 0) {
    cs.above = c.gt_total;
    cs.at = c.eq_total;
  }
  qsa_cluster_sync();
  if (threadIdx.x == 0) {
    unsigned gb = 0, eb = 0;
    for (unsigned r = 0; r < rank; ++r) {
      gb += *qsa_cluster_map(&cs.above, r);
      eb += *qsa_cluster_map(&cs.at, r);
    }
    cs.gt_base = gb;
    cs.eq_base = eb;
  }
  QSA_SYNC();
  c.gt_before += cs.gt_base;
  c.eq_before += cs.eq_base;
  topk_emit_stream(src, len, sel, c, [&](unsigned pos, unsigned i) { o[pos] = id(i); });
}

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
