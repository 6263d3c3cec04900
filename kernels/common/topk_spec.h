// qsa top-k: the speculative decode kernel's body (one launch: each chunk keeps what its own
// bound keeps; the query's last CTA proves no winner was dropped, or selects over the row).
// Included by kernels/topk.cu, which holds the contract, the TOPK_* sizes (defined before
// this), the entry points and their launch annotations; split out of it, one job per header.

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
// Session 8's variants (not measured yet; off by default), compiled into the `_x` entry
// points only (topk_spec's X), so the measured kernels keep their registers and code:
// Thread 0 alone fences before the query's ticket and after winning it, the other threads
// ordered by the block barriers around it (cooperative groups' grid sync does the same),
// where every thread fences twice.
#define TOPK_SPEC_FENCE_ONE 8
// Chunk bound from the threads' maxima (topk_bound_tmax): one histogram add per thread where
// the one-pass bound adds every key of the chunk's top octave.
#define TOPK_SPEC_BOUND_TMAX 16
// The final step's window histograms by plain atomic adds (no whole-wave check).
#define TOPK_SPEC_FINAL_LEAN 32
// All three: what the `_x` entry points compile in.
#define TOPK_SPEC_X (TOPK_SPEC_FENCE_ONE | TOPK_SPEC_BOUND_TMAX | TOPK_SPEC_FINAL_LEAN)

// A chunk's keys, blocked (thread t: entries t * ITEMS .. + ITEMS - 1 of the chunk).
template <int ITEMS, int THREADS = TOPK_SPLIT_THREADS>
QSA_DEVICE int topk_load_chunk_items(const float* row, int n, int chunk, bool vec4, unsigned (&key)[ITEMS]) {
  const int base = chunk * (ITEMS * THREADS) + threadIdx.x * ITEMS;
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

// A chunk bound from its threads' maxima: the r-th largest of them (r <= blockDim) has r
// distinct entries at or above it, one per thread. Windows from the maxima's first
// differing bit (their block-wide min and max: one barrier) pick the bin that holds it, to
// within 2^(p - 16) (two passes where the maxima differ above bit 16, else one); the bin's
// lower edge is the bound. Per key only the max each thread takes anyway, where the one-pass
// bound adds every key of the top octave to a histogram (instructions per key are what 16
// queries' time scales with); the bound sits a little lower (a few more candidates). A thread
// without entries holds 0, the lowest key, so a bound of 0 keeps every entry (capped at kc).
// `mx`: this thread's largest key (0 without entries).
QSA_DEVICE unsigned topk_bound_tmax_of(unsigned mx, unsigned r, TopkShared& s) {
  const unsigned wave = threadIdx.x / QSA_WAVE;
  const unsigned nwaves = blockDim.x / QSA_WAVE;
  unsigned lo = mx, hi = mx;
#pragma unroll
  for (int off = QSA_WAVE / 2; off > 0; off >>= 1) {
    lo = min(lo, (unsigned)qsa_shfl_xor(lo, off));
    hi = max(hi, (unsigned)qsa_shfl_xor(hi, off));
  }
  if (qsa_lane() == 0) {  // s.hist[1] is free until the window select's first pass clears it
    s.waves[wave] = hi;
    s.hist[1][wave] = lo;
  }
  QSA_SYNC();
  for (unsigned w = 0; w < nwaves; ++w) {
    hi = max(hi, s.waves[w]);
    lo = min(lo, s.hist[1][w]);
  }
  const int p = lo == hi ? 0 : 32 - __clz((int)(lo ^ hi));
  const unsigned v[1] = {mx};
  return topk_radix_regs_window(v, 1, r, p, hi, p > 16 ? 2 : 1, s, true).prefix;
}

template <int ITEMS>
QSA_DEVICE unsigned topk_bound_tmax(const unsigned (&key)[ITEMS], int nv, unsigned r, TopkShared& s) {
  unsigned mx = 0u;
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) mx = j < nv ? max(mx, key[j]) : mx;
  return topk_bound_tmax_of(mx, r, s);
}

// A chunk's scores, blocked as topk_load_chunk_items, without their keys.
template <int ITEMS, int THREADS>
QSA_DEVICE int topk_load_chunk_floats(const float* row, int n, int chunk, bool vec4, float (&x)[ITEMS]) {
  const int base = chunk * (ITEMS * THREADS) + threadIdx.x * ITEMS;  // as topk_load_chunk_items
  const int nv = max(0, min(ITEMS, n - base));
  const bool whole = n - base >= ITEMS;  // not nv == ITEMS: see topk_load_chunk_items
  if (vec4 && whole && ((size_t)(row + base) & 15u) == 0) {
    const float4* row4 = (const float4*)(row + base);
#pragma unroll
    for (int j = 0; j < ITEMS / 4; ++j) {
      const float4 v = row4[j];
      x[4 * j] = v.x;
      x[4 * j + 1] = v.y;
      x[4 * j + 2] = v.z;
      x[4 * j + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) x[j] = j < nv ? row[base + j] : 0.f;
  }
  return nv;
}

// The score at or above which an entry's key is >= `bound`: for a score that is not NaN,
// key >= bound <=> score >= this (keys order the scores, -0 = +0), and NaN (key 0) takes part
// only when the bound is 0, which keeps every entry. Bounds at or below -inf's key
// (0x007fffff) keep every score that is not NaN: -inf itself.
QSA_DEVICE float topk_score_at(unsigned bound) {
  if (bound <= 0x007fffffu) return __uint_as_float(0xff800000u);
  return __uint_as_float(bound >= 0x80000000u ? bound & 0x7fffffffu : ~bound);
}

// The float-domain lean chunk step (the `_float` entry points): the scores stay floats; each
// thread's largest (fmaxf, which passes over NaN) gives the threads' maxima bound
// (topk_bound_tmax_of), and the entries kept are those >= topk_score_at(bound): per entry a
// max and two float compares, where the key step converts every entry and compares keys. Only
// the kept entries' keys are computed (for the candidates), and all keys only when more than
// kc are kept (ties: the chunk's own top kc, bound 0). Sets `kept` and `bound`.
template <int ITEMS, int THREADS>
QSA_DEVICE void topk_spec_chunk_float(const float* row, int n, int c, bool vec4, unsigned r, bool bounded,
                                      unsigned kc, unsigned* ckey, int* cidx, TopkShared& s, unsigned& kept,
                                      unsigned& bound) {
  float x[ITEMS];
  const int nv = topk_load_chunk_floats<ITEMS, THREADS>(row, n, c, vec4, x);
  const int base = c * (ITEMS * THREADS) + threadIdx.x * ITEMS;
  bound = 0u;  // every entry when the chunk has no more than r
  // A margin past the threads (r > THREADS: k large against the chunks) leaves bound 0: every
  // entry, so the chunk keeps its own top kc below (exact; a two-digit bound there spilled 180
  // bytes per thread at 4,096 entries, nvcc 13.0.88).
  if (bounded && r <= (unsigned)THREADS) {  // block-uniform
    float mx = __uint_as_float(0x7fc00000u);  // NaN: fmaxf takes the other operand
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) mx = j < nv ? fmaxf(mx, x[j]) : mx;
    bound = topk_bound_tmax_of(qsa_order_key(mx), r, s);  // NaN (none, or only NaN): 0
  }
  const bool all = bound == 0u;
  const float at = topk_score_at(bound);
  unsigned ge = 0u, total;
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) ge += j < nv && (all || x[j] >= at);
  unsigned pos = topk_block_scan(ge, total, s);
  if (total <= kc) {  // block-uniform
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
      if (j < nv && (all || x[j] >= at)) {
        ckey[pos] = qsa_order_key(x[j]);
        cidx[pos] = base + j;
        ++pos;
      }
    }
    kept = total;
    return;
  }
  unsigned key[ITEMS];  // ties: the chunk's own top kc, proven whatever the bound
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) key[j] = j < nv ? qsa_order_key(x[j]) : 0u;
  const TopkSel sel = topk_radix_regs(key, nv, kc, 4, s);
  const TopkCounts counts = topk_count_regs(key, nv, sel, s);
  kept = topk_emit_regs(key, nv, sel, counts, [&](unsigned p, int j) {
    ckey[p] = key[j];
    cidx[p] = base + j;
  });
  bound = 0u;
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

// Chunk c's entries (the last chunk may be short) and the margin r each chunk's bound keeps
// at least (TOPK_SPEC_MARGIN * ceil(k / m), the header's step 1).
template <int CHUNK>
QSA_DEVICE int topk_spec_len(int n, int c) { return min(CHUNK, n - c * CHUNK); }
QSA_DEVICE unsigned topk_spec_margin(int k, const TopkSplitWs& w) {
  return TOPK_SPEC_MARGIN * (((unsigned)k + w.m - 1) / w.m);
}

// The key-domain chunk steps (KEEP general or lean): load the chunk's keys, take its bound,
// keep its entries >= bound (its own top kc where that keeps more: ties). Sets `kept` and
// `bound`. LEAN: the one-pass bound's histogram adds without the whole-wave check (its bins
// are spread), and the entries >= bound counted and written with one compare per key, where
// the general count / emit compare (key & mask) with the prefix twice.
template <int ITEMS, bool LEAN, int THREADS, int XF>
QSA_DEVICE void topk_spec_chunk_keys(const float* row, int n, int k, int c, int q, int flags, const TopkSplitWs& w,
                                     TopkShared& s, unsigned& kept, unsigned& bound) {
  TOPK_SPLIT_STAMP(1, c, 0, q);
  unsigned key[ITEMS];
  const int nv = topk_load_chunk_items<ITEMS, THREADS>(row, n, c, (flags & TOPK_SPEC_LOAD_VEC4) != 0, key);
  const int base = c * (ITEMS * THREADS) + threadIdx.x * ITEMS;
  TOPK_SPLIT_STAMP(1, c, 1, q);
  // len and r after the loads, where the measured kernels computed them (the same SASS).
  const int len = topk_spec_len<ITEMS * THREADS>(n, c);
  const unsigned r = topk_spec_margin(k, w);
  bound = 0u;  // every entry when the chunk has no more than r
  // The lean entry points with the threads' maxima bound compiled in carry no one-pass bound
  // (with both, nvcc 13.0.88 spilled 44 bytes per thread at 4,096 entries, 0 without it).
  constexpr bool tmax_lean = LEAN && (XF & TOPK_SPEC_BOUND_TMAX) != 0;
  if ((unsigned)len > r) {  // block-uniform
    if ((flags & TOPK_SPEC_BOUND_TMAX) && r <= (unsigned)THREADS) {
      bound = topk_bound_tmax(key, nv, r, s);
    } else if (!tmax_lean && (flags & TOPK_SPEC_BOUND_WINDOW)) {
      bound = topk_bound_window<ITEMS, LEAN>(key, nv, r, s);
    } else {
      bound = topk_radix_regs(key, nv, r, TOPK_BOUND_DIGITS, s).prefix;
    }
  }
  TopkSel sel = {0xffffffffu, bound, 0xffffffffu};  // key >= bound, every tie
  TOPK_SPLIT_STAMP(1, c, 2, q);
  kept = 0xffffffffu;  // LEAN: set where the chunk keeps no more than kc
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
}

// The chunk step's keep policy (topk_spec's KEEP; src/dispatch/topk.rs's QSA_TOPK_SPEC_KEEP
// picks the entry point): every policy keeps a superset of the chunk's part of the selection
// and publishes a bound the last CTA checks, so each is exact; they differ in time only.
// General: topk_spec_chunk_keys' count / emit (session 7's measured step).
#define TOPK_KEEP_GENERAL 0
// Lean (the `_lean` entry points): topk_spec_chunk_keys with LEAN.
#define TOPK_KEEP_LEAN 1
// Float (the `_float` entry points; sm_90's default, `float_by_default`): topk_spec_chunk_float.
#define TOPK_KEEP_FLOAT 2

// The speculative kernel's body: chunks of THREADS * ITEMS entries (THREADS = blockDim),
// `flags` TOPK_SPEC_*, the chunk step by KEEP (TOPK_KEEP_*); the ticket and the last CTA's
// step are the same for every policy. XF: which of session 8's flags (TOPK_SPEC_FENCE_ONE,
// _BOUND_TMAX, _FINAL_LEAN) are compiled in; the others are ignored, and their code (and its
// registers) is not there.
template <int ITEMS, int KEEP = TOPK_KEEP_GENERAL, int THREADS = TOPK_SPLIT_THREADS, int XF = 0>
QSA_DEVICE void topk_spec(const float* __restrict__ scores, int capacity, int nq, int n, int k,
                          unsigned* __restrict__ ws, int* __restrict__ out, int flags, TopkShared& s) {
  static_assert(KEEP == TOPK_KEEP_GENERAL || KEEP == TOPK_KEEP_LEAN || KEEP == TOPK_KEEP_FLOAT, "KEEP: TOPK_KEEP_*");
#if !defined(QSA_CUDA)
  flags = 0;  // the variants are CUDA's (the host plans none elsewhere): no registers for them
#endif
  flags &= TOPK_SPEC_FINAL_WINDOW | TOPK_SPEC_BOUND_WINDOW | TOPK_SPEC_LOAD_VEC4 | XF;
  const int chunk = ITEMS * THREADS;
  const int c = blockIdx.x, q = blockIdx.y;
  const TopkSplitWs w(ws, nq, n, k, chunk);
  if (q >= nq || c >= (int)w.m) return;
  int* o = out + (size_t)q * k;
  if (k >= n) {  // every entry: no workspace, no ticket
    if (c == 0) topk_write_all(o, n, k);
    return;
  }
  const float* row = scores + (size_t)q * capacity;
  unsigned bound, kept;
  if constexpr (KEEP == TOPK_KEEP_FLOAT) {
    const int len = topk_spec_len<chunk>(n, c);
    const unsigned r = topk_spec_margin(k, w);
    topk_spec_chunk_float<ITEMS, THREADS>(row, n, c, (flags & TOPK_SPEC_LOAD_VEC4) != 0, r, (unsigned)len > r, w.kc,
                                          ckey_of(w, q, c), cidx_of(w, q, c), s, kept, bound);
  } else {
    topk_spec_chunk_keys<ITEMS, KEEP == TOPK_KEEP_LEAN, THREADS, XF>(row, n, k, c, q, flags, w, s, kept, bound);
  }
  if (threadIdx.x == 0) {
    w.cnt[(size_t)q * w.m + c] = kept;
    w.bound[(size_t)q * w.m + c] = bound;
  }
  TOPK_SPLIT_STAMP(1, c, 3, q);
  const bool fence_one = (flags & TOPK_SPEC_FENCE_ONE) != 0;
  if (!fence_one) __threadfence();
  QSA_SYNC();
  if (threadIdx.x == 0) {
    if (fence_one) __threadfence();  // release: the barrier put every thread's writes before it
    const unsigned ticket = atomicAdd(&w.done[q], 1u);
    s.flag = ticket == w.m - 1;
    if (s.flag) {
      w.done[q] = 0;                   // ready for the next call
      if (fence_one) __threadfence();  // acquire: the barrier below puts the CTA's reads after it
    }
    s.floor = 0u;
  }
  QSA_SYNC();
  TOPK_SPLIT_STAMP(1, c, 4, q);
  if (!s.flag) return;
  if (!fence_one) __threadfence();
  if (topk_split_final(w, q, k, o, s, w.bound + (size_t)q * w.m, (flags & TOPK_SPEC_FINAL_WINDOW) != 0,
                       (flags & TOPK_SPEC_FINAL_LEAN) != 0)) {
    TOPK_SPLIT_STAMP(2, 0, 7, q);
    return;
  }
  // Not proven: select over the whole row (every chunk's bound is reset by its next call;
  // topk_split_final marked the query's first bound slot TOPK_SPEC_FELL_BACK).
  const TopkRowSrc src = {row};
  const TopkSel all = topk_radix_stream(src, (unsigned)n, (unsigned)k, s);
  topk_compact_stream(src, (unsigned)n, all, [&](unsigned pos, unsigned i) { o[pos] = (int)i; }, s);
}
