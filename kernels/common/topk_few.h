// qsa top-k: the small-k paths: a lower bound of the k-th key from unit / wave maxima, then the
// few candidates at or above it ranked directly (register kernel: topk_few_regs; wide
// kernel: topk_few).
// Included by kernels/topk.cu, which holds the contract, the TOPK_* sizes (defined before
// this), the entry points and their launch annotations; split out of it, one job per header.

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
