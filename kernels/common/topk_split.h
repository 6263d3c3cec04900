// qsa top-k: the two-stage split's workspace, chunk loads and final step (the last CTA of a query
// selects among the chunks' candidates), shared by the split and the speculative kernel.
// Included by kernels/topk.cu, which holds the contract, the TOPK_* sizes (defined before
// this), the entry points and their launch annotations; split out of it, one job per header.

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


// What the speculative kernel's last CTA leaves in its query's first bound slot when its
// check fails (above every order key; src/gpu/topk.rs SPEC_FELL_BACK). Returns false.
// Compiled into emulated builds (where the tests read it) and probes built with
// -DTOPK_SPEC_MARK only: on sm_90 (nvcc 13.0.88) the one store moved the measured kernels'
// spills (qsa_topk_spec_8k 12 -> 36 bytes per thread, qsa_topk_spec_lean 16 -> 24).
#define TOPK_SPEC_FELL_BACK 0xffffffffu
#if defined(QSA_EMU) && !defined(TOPK_SPEC_MARK)
#define TOPK_SPEC_MARK 1
#endif
QSA_DEVICE bool topk_spec_fell_back(const unsigned* bounds) {
#if defined(TOPK_SPEC_MARK)
  if (threadIdx.x == 0) *const_cast<unsigned*>(bounds) = TOPK_SPEC_FELL_BACK;
#else
  (void)bounds;
#endif
  return false;
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
// with the chunks' counts, in one round trip to L2. s.floor must be 0 on entry. Returning
// false, it marks the query's first bound slot TOPK_SPEC_FELL_BACK (src/gpu/topk.rs:
// spec_fell_back, how the tests tell a proven selection from the fallback, which parity
// cannot; the next call's chunks overwrite it). `window`:
// radix windows from the candidates' first differing bit (`lean`: their histograms' adds
// without the whole-wave check).
QSA_DEVICE bool topk_split_final(const TopkSplitWs& w, int q, int k, int* o, TopkShared& s,
                                 const unsigned* bounds, bool window = false, bool lean = false) {
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
    if (s.kept < (unsigned)k) return topk_spec_fell_back(bounds);
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
    const TopkSel sel = window ? topk_radix_regs_window(key, nv, (unsigned)k, p, lo, 4, s, lean)
                               : topk_radix_regs(key, nv, (unsigned)k, first, lo, 4, s);
    TOPK_SPLIT_STAMP(2, 0, 4, q);
    if (threadIdx.x == 0 && q == 0) TOPK_SPLIT_NOTE(first, total);
    topk_compact_regs(key, nv, sel, [&](unsigned pos, int j) { o[pos] = ids[j]; }, s);
    TOPK_SPLIT_STAMP(2, 0, 5, q);
  } else {  // heavy ties left many candidates: stream them
    const TopkCandSrc src = {&s, ckey, w.m, w.kc};
    const TopkSel sel = topk_radix_stream(src, total, (unsigned)k, s);
    if (sel.prefix < floor) return topk_spec_fell_back(bounds);
    topk_compact_stream(src, total, sel, [&](unsigned pos, unsigned p) { o[pos] = id_of(p); }, s);
  }
  return true;
}
