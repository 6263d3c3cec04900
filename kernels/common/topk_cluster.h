// qsa top-k: the cluster kernel's pieces (sm_90: one cluster of CTAs per query, exchanging
// bounds, candidates and histograms through distributed shared memory). Included
// only where QSA_HAS_CLUSTERS is defined.
// Included by kernels/topk.cu, which holds the contract, the TOPK_* sizes (defined before
// this), the entry points and their launch annotations; split out of it, one job per header.

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
