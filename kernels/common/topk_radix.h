// qsa top-k: the radix select's pieces: shared state, block scans, 256-bin histograms, the bin
// choice, radix passes over register-held or streamed keys, ordered compaction.
// Included by kernels/topk.cu, which holds the contract, the TOPK_* sizes (defined before
// this), the entry points and their launch annotations; split out of it, one job per header.

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
// 1 <= k <= entries taking part. `lean`: plain atomic adds, without topk_hist_add's
// whole-wave check (a window from the first differing bit spreads the keys over its bins).
template <int ITEMS>
QSA_DEVICE TopkSel topk_radix_regs_window(const unsigned (&key)[ITEMS], int nv, unsigned k, int p, unsigned prefix,
                                          int passes, TopkShared& s, bool lean = false) {
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
      if (!lean) {
        topk_hist_add(s.hist[b], v, (key[j] >> shift) & wmask);
      } else if (v) {
        atomicAdd(&s.hist[b][(key[j] >> shift) & wmask], 1u);
      }
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

struct TopkSharedSrc {
  const unsigned* keys;
  __device__ unsigned key(unsigned i) const { return keys[i]; }
};
