// NSA selection attention: the KV-block-major backward (sm_80+ CUDA).
// Included by kernels/selection_attention.cu (which defines ATT_*, u16, Bf16 / F16 before it);
// split out of it to keep each file readable.

// =============================================================================================
// KV-block-major backward: dK and dV without atomics (sm_80+ CUDA)
// =============================================================================================
// qsa_attn_kv_bwd_*: one CTA of KVB_THREADS per (b, kv head g, kv block id). It walks the query
// tokens that may see the block (q_pos >= 64 id) in order, KVB_CHUNK at a time, and keeps those
// whose list holds the block: the block's inverted index, built in shared memory (deterministic
// order, no global workspace, no atomics; an id repeated in a list counts once by
// construction). For each tile of qt kept tokens x hc of the group's heads (16 rows, the
// staged kernels' geometry) it recomputes S and dP on tensor cores and P, dS as the query-side
// pass does, and accumulates dV = P^T dO and dK = dS^T q in registers (3xTF32).
// Each element of the block's dK / dV is then written once (keys past kv_len are not), so the
// call needs no zero-fill. D = rowsum(dO O) comes from the query-side pass
// (qsa_attn_staged_bwd_* with kv_grads = 0 writes it to drow), which runs first.
// Warp w: S -> P (w < 4) or dP (w >= 4) for keys 16 (w % 4) .. +15 of the 16 rows; dK / dV for
// keys 16 (w % 4) .. +15 and dims 64 (w / 4) .. +63.
//
// What bounds a tile (16 rows x 64 keys x 128 dims; the bench's prefill B=4, T=16K, 4 kv heads,
// 16 blocks per list has 4.19 M of them):
//   mma issue: S 64 m16n8k16, dP 192 (dO in three 16-bit parts), dV 384 m16n8k8 tf32 (3 per
//     tile), dK 256 (2 per tile): ~900 slots of about one m16n8k16 each, ~1.5 k cycles of one
//     SM, ~25 ms for the bench's tiles over 132 SMs (an estimate from the op counts, not a
//     measurement); the longest chain is dP's 24 dependent mmas per accumulator.
//   global loads: the tile's q (16 x 256 B) and dO (16 x 512 B) rows, gathered per token (each
//     token's rows are read once per block it selected: 50 GB for the bench, 12 ms at 4 TB/s),
//     plus lse and D. They depend only on the token list, not on the previous tile.
//   shared traffic: ~100 KB per tile (S / dP read q and dO in four warps each; the key tiles
//     read dO / q once per dim half; P, dS), ~0.8 k cycles at 128 B per cycle; the fused
//     variant's dQ adds ~130 KB (kv_dq_tile), ~1 k more: the first limit there, on paper.
// These are estimates from op counts (mma.sync taken at ~2/3 of the H200's dense bf16 rate),
// not measurements: H200.md has the runs that measure them. Measured (Nsight, H200, call P,
// 2026-12-02, results/p/prof/attn_kv_bwd.txt): 83.3 ms, issue slots 65% busy, IPC 2.61, tensor
// pipe 27%, DRAM 11%: instruction-bound, 52.0 G warp instructions (~1,550 per warp and tile).
// The SASS put ~30% of them in the tile rows' copy issue (now kv_issue_tile's 16 threads per
// row) and most of the rest in 3xTF32's splits; hence the bf16-product kernels
// (attention_kv_bwd16.h: qsa_attn_kv16{,s}_{,dq_}bwd_bf16, QSA_ATTN_KV_MMA=bf16 / bf16s).
// The first version (session 5, 201 ms on the H200 with the dQ pass) loaded each tile's rows
// after the previous tile's last barrier and waited on them, then three more barriers (rows /
// S and dP / P and dS / done): ~13 us per tile per CTA at 2 CTAs per SM, latency. Now:
//   - tile n + 1's q / dO rows are copied (cp.async) into the other of two buffers while tile n
//     computes; its lse / D are loaded into registers then and stored to shared memory after
//     tile n's S / dP (KvRow);
//   - warps 0-3 turn S into P in registers and warps 4-7 store raw dP; dS = P (dP - D) is formed
//     in the key tiles' fragment loads: two barriers per tile (rows ready / P, dP ready);
//   - q stays in its 16-bit bits in shared memory (exact as an mma operand and as tf32).
// Precision: each tile's dK / dV products (per k step of 8 rows) accumulate from zero in the
// mma and are then added to the block's running sums in f32 (round to nearest). Summing
// thousands of tiles inside the mma accumulator drifted on the H200 (the session 5 check's f16
// group-16 causal-from-0 case: dv 7.9e-5 against the atomic path's 2.9e-6, over the 5e-5
// gate; golden/sm_90 attn_causal_g16_f16 kv_bwd dk / dv rel_max in [1e-5, 1e-4), where the
// emulator, exact per mma, now gives [1e-7, 1e-5)), while the atomic path adds each CTA's
// fresh sum with an f32 atomic; this matches that. The emulator cannot show the drift: the
// H200's check does (H200.md).
#define KVB_THREADS 256
#define KVB_CHUNK KVB_THREADS
// Two resident CTAs per SM on sm_90: without the bound ptxas 13.0 gives it 163 registers (one
// CTA, 8 of 64 warps); with it 128 and no spills (cargo xtask build, 2026-12-01). Not on
// sm_86: its shared memory holds one CTA anyway, and the bound spills 40 bytes there.
#if defined(QSA_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define KVB_BOUNDS __launch_bounds__(KVB_THREADS, 2)
#else
#define KVB_BOUNDS __launch_bounds__(KVB_THREADS)
#endif
// Threads per tile row in kv_issue_tile: one 16-byte piece of q (128 x 2 B) and two of dO
// (128 x 4 B) each.
#define KVB_ROW_THREADS (ATT_D * 2 / 16)
static_assert(KVB_THREADS == ATT_ROWS * KVB_ROW_THREADS, "kv_issue_tile: one thread per q piece of the tile");

// Built only with tensor cores (QSA_ATTN_MMA: CUDA sm_80+). Elsewhere the module has no
// qsa_attn_kv_bwd_* at all: choose_backward (src/dispatch/attention.rs) never picks it there,
// and a dispatch mistake fails at the launch, naming the missing kernel.
#if defined(QSA_ATTN_MMA)
// The CTA's (b, g, id) from blockIdx.x, block id slowest: under causality block id has up to
// q_len - 64 id candidate tokens, so the early blocks are the long CTAs, and launching them
// first keeps them out of the grid's last wave.
struct KvCta {
  int b, g, id;
};

// NARROW: 32-bit divisions. Which form leaves a kernel without spills at the 128-register bound
// is ptxas's register allocation, not a rule: the 64-bit form keeps the tf32 kernels at zero and
// the bf16-product kernels at 8 bytes, the 32-bit form the reverse (ptxas 13.0, sm_90,
// 2026-12-02; the spilled value is held across the chunk loop, outside the tile loop).
template <bool NARROW>
QSA_DEVICE KvCta kv_cta(int batch, int hkv) {
  KvCta c;
  if constexpr (NARROW) {
    const int x = (int)blockIdx.x, heads = batch * hkv;
    c.id = x / heads;
    c.g = x % hkv;
    c.b = x / hkv % batch;
  } else {
    const long long x = blockIdx.x;
    const long long heads = (long long)batch * hkv;
    c.id = (int)(x / heads);
    c.g = (int)(x % hkv);
    c.b = (int)(x % heads / hkv);
  }
  return c;
}

// Shared-memory layout (bytes from the dynamic base; src/dispatch/attention.rs,
// kv_bwd_shared_bytes, computes the same total). Tile n uses buffer n & 1 of the per-tile
// arrays; the accessors index them arithmetically (an array of pointers indexed at run time
// would live in local memory): kv_qr and the others below.
#define KVB_QR_ELEMS (ATT_ROWS * KV_STRIDE)
#define KVB_DO_ELEMS (ATT_ROWS * Q_STRIDE)
#define KVB_ROW_ELEMS (3 * ATT_ROWS)
struct KvSmem {
  u16* kv;         // K [ATT_BLK][KV_STRIDE], then V (staged_issue's layout)
  u16* qr0;        // 2 x [ATT_ROWS][KV_STRIDE] q rows of the tile (E bits; zero: no row)
  float* dos0;     // 2 x [ATT_ROWS][Q_STRIDE] dO rows of the tile (zero: no row)
  float* ps;       // [ATT_ROWS][S_STRIDE] P
  float* dps;      // [ATT_ROWS][S_STRIDE] raw dP
  float* rows0;    // 2 x {lse [ATT_ROWS] (-inf: no row), D [ATT_ROWS], position [ATT_ROWS] (int)}
  int* toks;       // [KVB_CHUNK] this chunk's tokens that selected the block, in order
  int* wave_hits;  // [KVB_THREADS / 32] per-wave counts of the compaction
  u16* dop;        // 3 x [ATT_ROWS][KV_STRIDE] dO's bf16 parts: the split kernels only, past the rest
  u16* dsp;        // 2 x [ATT_ROWS][KV16_DS_STRIDE] dS's bf16 hi / lo: the bf16 fused-dQ kernels only,
                   // past dop's parts where the kernel splits dO, at their place elsewhere
};

// KVC_S_STRIDE: the P / dP row stride of the conflict-free form (KV_OPT_NC). With S_STRIDE (68
// words: rows 4 banks apart) the float2 stores of P / dP (half warp: rows g = 0..3, keys 2t) hit
// banks 4g + 2t .. + 1, two ways; 76 (12 banks apart) puts them on 32 distinct banks, and the key
// fragments' reads (rows 2t, keys g: banks 24t + g) stay conflict-free, as with 68 (8t + g).
#define KVC_S_STRIDE 76
// kv_bwd's OPT bits: the forms built for the sweep (selection_attention.cu's KV form instances;
// src/dispatch/attention.rs, KvProducts::stem, names them). 0: the kernel as before.
#define KV_OPT_P1 1u   // P and dS in one bf16 part (fla's precision), QSA_ATTN_KV_PS_PARTS=1
#define KV_OPT_NC 2u   // no shared bank conflicts (KVC_S_STRIDE, kv16_split_do<true>), QSA_ATTN_KV_LAYOUT=nc
// dO in two bf16 parts (hi, mid) for dP = dO V^T, QSA_ATTN_KV_DP_PARTS=2 with the split kernel
// (kv16sp2). Why: by the count in H200.md (a prediction), dP's A-fragment reads of dO's three
// parts are the largest term of a tile's ~2,870 shared wavefronts (4 warps x 3 parts x 4 KB =
// 384 of them); the third part carries dO's bits 17-24 only (|dO - hi - mid| <= 2^-17 |dO|),
// and the dP warps run 48 mma against the S warps' 16 between the same two barriers. Two parts:
// 128 fewer wavefronts, 32 fewer split stores, 64 fewer mma per tile (dP warps 48 -> 32).
#define KV_OPT_DO2 4u

QSA_DEVICE KvSmem kv_smem(unsigned char* base, bool split, int ss = S_STRIDE) {
  KvSmem s;
  s.kv = (u16*)base;
  s.qr0 = s.kv + 2 * ATT_BLK * KV_STRIDE;
  s.dos0 = (float*)(s.qr0 + 2 * KVB_QR_ELEMS);
  s.ps = s.dos0 + 2 * KVB_DO_ELEMS;
  s.dps = s.ps + ATT_ROWS * ss;
  s.rows0 = s.dps + ATT_ROWS * ss;
  s.toks = (int*)(s.rows0 + 2 * KVB_ROW_ELEMS);
  s.wave_hits = s.toks + KVB_CHUNK;
  s.dop = (u16*)(s.wave_hits + KVB_THREADS / 32);
  s.dsp = s.dop + (split ? 3 * KVB_QR_ELEMS : 0);
  return s;
}

// The per-tile arrays of buffer buf.
QSA_DEVICE u16* kv_qr(const KvSmem& s, int buf) { return s.qr0 + buf * KVB_QR_ELEMS; }
QSA_DEVICE float* kv_dos(const KvSmem& s, int buf) { return s.dos0 + buf * KVB_DO_ELEMS; }
QSA_DEVICE float* kv_row_lse(const KvSmem& s, int buf) { return s.rows0 + buf * KVB_ROW_ELEMS; }
QSA_DEVICE float* kv_row_d(const KvSmem& s, int buf) { return s.rows0 + buf * KVB_ROW_ELEMS + ATT_ROWS; }
QSA_DEVICE int* kv_row_pos(const KvSmem& s, int buf) {
  return (int*)(s.rows0 + buf * KVB_ROW_ELEMS + 2 * ATT_ROWS);
}

// The tokens i0 .. i0 + THREADS - 1 (< q_len, < end) whose list of kv head g holds `id`,
// compacted in order into toks (end: the end of the CTA's query range, attention_kv_wg.h's
// QCHUNK); returns their count (the same in every thread). THREADS: the CTA's threads, one
// token each (KVB_THREADS here, KWG_THREADS in attention_kv_wg.h); hits: its [THREADS / 32]
// per-wave counts. Bar::sync() is the CTA's barrier (KvCtaBar: __syncthreads;
// the wgmma form's two warpgroups use an unaligned named barrier, attention_kv_wg.h).
struct KvCtaBar {
  static __device__ __forceinline__ void sync() { QSA_SYNC(); }
};
template <int THREADS, class Bar = KvCtaBar>
QSA_DEVICE int kv_collect(int* toks, int* hits, const int* ids, const KvCta& c, int i0, int q_len, int hkv,
                          int t, int end = 0x7fffffff) {
  const long long i = i0 + threadIdx.x;
  bool hit = false;
  if (i < q_len && i < end) {
    const int* list = ids + (((long long)c.b * q_len + i) * hkv + c.g) * t;
    for (int u = 0; u < t; ++u) hit |= list[u] == c.id;
  }
  const qsa_lanemask_t m = qsa_ballot(hit);
  const int wave = threadIdx.x / QSA_WAVE;
  if (qsa_lane() == 0) hits[wave] = (int)qsa_popc_mask(m);
  Bar::sync();
  int before = 0, total = 0;
  for (int w = 0; w < THREADS / QSA_WAVE; ++w) {
    before += w < wave ? hits[w] : 0;
    total += hits[w];
  }
  if (hit) toks[before + (int)qsa_popc_mask(m & qsa_lanes_below())] = (int)i;
  Bar::sync();
  return total;
}

// The chunk's tiles: tile n covers head chunk n / per_chunk and the kept tokens
// t0 = (n % per_chunk) qt .. t0 + ntok - 1. Row r = tok * hc + hh.
struct KvTiles {
  int found, per_chunk, count;
  int group, hc, qt, q_len, hq;
  int shift;  // q_pos = shift + i (kv_len - q_len: 32-bit, as the lengths)
};

// lse and D of a tile's rows, held in registers by threads 0 .. ATT_ROWS - 1 between the
// tile's issue and kv_publish_rows.
struct KvRow {
  float lse, d;
};

// Start copying tile n's q / dO rows into buffer buf (one cp.async group; rows past the tile's
// tokens are zero-filled), store its rows' positions (-1: no row) and load their lse and D
// (thread r < ATT_ROWS: row r). Buffer buf must be free: the previous tile that used it done.
QSA_DEVICE KvRow kv_issue_tile(const KvSmem& s, int buf, const KvCta& c, const KvTiles& tl, int n,
                               const u16* q, const float* d_o, const float* lse, const float* drow) {
  const int chunk = n / tl.per_chunk, t0 = (n % tl.per_chunk) * tl.qt;
  const int ntok = tl.found - t0 < tl.qt ? tl.found - t0 : tl.qt;
  const long long head0 = (long long)c.g * tl.group + chunk * tl.hc;
  {
    // Sixteen threads per row, each one 16-byte piece of q and two of dO: one row index (one
    // division by hc) per thread and tile. The first version looped over the 768 pieces with the
    // row and piece divided out of the loop index: 3 x 162 SASS instructions per thread and
    // tile, ~30% of the pass's 52 G (Nsight, call P, results/p/prof/attn_kv_bwd.txt).
    const int r = threadIdx.x / KVB_ROW_THREADS, piece = threadIdx.x % KVB_ROW_THREADS, tok = r / tl.hc;
    const bool valid = tok < ntok;
    const long long row = valid ? ((long long)c.b * tl.q_len + s.toks[t0 + tok]) * tl.hq + head0 + r % tl.hc : 0;
    qsa_copy16(kv_qr(s, buf) + r * KV_STRIDE + piece * 8, q + row * ATT_D + piece * 8, valid);
    const float* src = d_o + row * ATT_D + piece * 4;
    float* dst = kv_dos(s, buf) + r * Q_STRIDE + piece * 4;
    qsa_copy16((u16*)dst, (const u16*)src, valid);
    qsa_copy16((u16*)(dst + ATT_D / 2), (const u16*)(src + ATT_D / 2), valid);
  }
  qsa_copy_commit();
  KvRow x;
  x.lse = qsa_neg_inf();
  x.d = 0.f;
  const int r = threadIdx.x, tok = r / tl.hc;
  if (r < ATT_ROWS) {
    int pos = -1;
    if (tok < ntok) {
      const int i = s.toks[t0 + tok];
      const long long row = ((long long)c.b * tl.q_len + i) * tl.hq + head0 + r % tl.hc;
      x.lse = lse[row];
      x.d = drow[row];
      pos = tl.shift + i;
    }
    kv_row_pos(s, buf)[r] = pos;
  }
  return x;
}

QSA_DEVICE void kv_publish_rows(const KvSmem& s, int buf, const KvRow& x) {
  const int r = threadIdx.x;
  if (r < ATT_ROWS) {
    kv_row_lse(s, buf)[r] = x.lse;
    kv_row_d(s, buf)[r] = x.d;
  }
}

// sc[n][.] = q . K for keys k0 + 8 n + (2t, 2t+1), rows g / g+8; q rows as E bits (KV_STRIDE),
// so the A fragments are plain 32-bit loads (tc_dot_split<E, 1> without the conversion).
template <typename E>
QSA_DEVICE void kv_qk(const u16* qr, const u16* ks, int k0, int lane, float (&sc)[2][4]) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int n = 0; n < 2; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) sc[n][e] = 0.f;
#pragma unroll 2
  for (int kk = 0; kk < 8; ++kk) {
    unsigned a[4];
#pragma unroll
    for (int h = 0; h < 4; ++h)
      a[h] = *(const unsigned*)(qr + (g + 8 * (h & 1)) * KV_STRIDE + kk * 16 + 8 * (h >> 1) + 2 * t);
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      const u16* bp = ks + (k0 + 8 * n + g) * KV_STRIDE + kk * 16 + 2 * t;
      tc_mma<E>(sc[n], a, *(const unsigned*)bp, *(const unsigned*)(bp + 8));
    }
  }
}

// A fragments of P^T and dS^T for keys kw .. kw+15 over the tile's rows 8 ks .. 8 ks + 7 (one
// k step), dS = P (dP - D) formed here from raw dP (0 where P is 0: an invisible key, or a row
// past the tile's tokens). One k step at a time keeps 16 registers of fragments, not 32.
struct KvKeyFrags {
  unsigned p_hi[4], p_lo[4], ds_hi[4], ds_lo[4];
};

QSA_DEVICE void kv_load_key_frags(const float* P, const float* dP, const float* row_d, int kw, int ks, int lane,
                                  KvKeyFrags& f) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int h = 0; h < 4; ++h) {
    const int r = 8 * ks + t + 4 * (h >> 1);
    const int off = r * S_STRIDE + kw + g + 8 * (h & 1);
    const float p = P[off];
    tf32_split(p, f.p_hi[h], f.p_lo[h]);
    tf32_split(p != 0.f ? p * (dP[off] - row_d[r]) : 0.f, f.ds_hi[h], f.ds_lo[h]);
  }
}

// cv += P^T dO, ck += dS^T q (unscaled) over rows 8 ks .. 8 ks + 7 for keys kw + g / kw + g + 8
// and dims d + 2t, d + 2t + 1 (tc_key_tile's products with q as E bits; rows past the tile's
// tokens are zero in q and dO).
template <typename E>
QSA_DEVICE void kv_key_tile(const KvKeyFrags& f, const float* dos, const u16* qr, int ks, int d, int lane,
                            float (&cv)[4], float (&ck)[4]) {
  const int g = lane / 4, t = lane % 4;
  unsigned o_hi[2], o_lo[2], qb[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = 8 * ks + t + 4 * h;
    tf32_split(dos[r * Q_STRIDE + d + g], o_hi[h], o_lo[h]);
    qb[h] = __float_as_uint(E::one(qr[r * KV_STRIDE + d + g]));
  }
  qsa_mma_m16n8k8_tf32(cv, f.p_lo, o_hi);
  qsa_mma_m16n8k8_tf32(cv, f.p_hi, o_lo);
  qsa_mma_m16n8k8_tf32(cv, f.p_hi, o_hi);
  qsa_mma_m16n8k8_tf32(ck, f.ds_lo, qb);
  qsa_mma_m16n8k8_tf32(ck, f.ds_hi, qb);
}

// The fused variant (qsa_attn_kv_dq_bwd_*, QSA_ATTN_BWD=kvdq: no query-side pass): dQ of tile
// n's rows += scale dS K for dims 16 warp .. 16 warp + 15, with dS from P, dP and D as in
// kv_load_key_frags and tc_ds_k's products (K exact in tf32, dS in two tf32 parts), then one
// f32 atomic per element (four per instruction on sm_90) into the zero-filled dq: a row gets
// one add per block it selected. Rows past the tile's tokens are not written. Per tile: 256
// more m16n8k8 (16 rows x 64 keys x 128 dims, two parts) and 512 float4 atomics (sm_90),
// against the query-side pass's second staging of every selected K / V block.
template <typename E>
QSA_DEVICE void kv_dq_tile(const KvSmem& s, int buf, const KvCta& c, const KvTiles& tl, int n, int keys, int warp,
                           int lane, float* dq, float scale) {
  const int g = lane / 4, t = lane % 4, d0 = 16 * warp;
  const float* row_d = kv_row_d(s, buf);
  const u16* ks = s.kv;
  // One 8-dim tile at a time, added before the next (dS's fragments formed twice: each warp
  // reads P and dP twice, 128 KB of shared reads per tile over 8 warps): both tiles in one key
  // loop spill 8 bytes in the f16 build beside the block's dK / dV sums (ptxas 13.0, sm_90,
  // 2026-12-02), and a new kernel must not spill (the resource gate).
  const int chunk = n / tl.per_chunk, t0 = (n % tl.per_chunk) * tl.qt;
  const int ntok = tl.found - t0 < tl.qt ? tl.found - t0 : tl.qt;
  const long long head0 = (long long)c.g * tl.group + chunk * tl.hc;
#pragma unroll 1
  for (int j = 0; j < 2; ++j) {
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll 1
    for (int k0 = 0; k0 < keys; k0 += 8) {  // keys past the block's end: P = 0, so dS = 0
      unsigned hi[4], lo[4];
#pragma unroll
      for (int h = 0; h < 4; ++h) {
        const int r = g + 8 * (h & 1), off = r * S_STRIDE + k0 + t + 4 * (h >> 1);
        const float p = s.ps[off];
        tf32_split(p != 0.f ? p * (s.dps[off] - row_d[r]) : 0.f, hi[h], lo[h]);
      }
      const u16* kp = ks + (k0 + t) * KV_STRIDE + d0 + 8 * j + g;
      const unsigned b[2] = {__float_as_uint(E::one(kp[0])), __float_as_uint(E::one(kp[4 * KV_STRIDE]))};
      qsa_mma_m16n8k8_tf32(acc, lo, b);
      qsa_mma_m16n8k8_tf32(acc, hi, b);
    }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    // Four consecutive dims per atomic: lanes t and t ^ 1 swap halves (tc_key_tile_atomics'
    // exchange), so even t adds dims 2t .. 2t + 3 of row g and odd t dims 2t - 2 .. 2t + 1 of
    // row g + 8.
    const bool odd = t & 1;
    const float x0 = qsa_shfl_xor(odd ? acc[0] : acc[2], 1), x1 = qsa_shfl_xor(odd ? acc[1] : acc[3], 1);
    const int r = g + (odd ? 8 : 0), tok = r / tl.hc;
    if (tok < ntok) {
      const long long row = ((long long)c.b * tl.q_len + s.toks[t0 + tok]) * tl.hq + head0 + r % tl.hc;
      const float4 w = odd ? make_float4(x0, x1, acc[2], acc[3]) : make_float4(acc[0], acc[1], x0, x1);
      atomicAdd((float4*)(dq + row * ATT_D + d0 + 8 * j + 2 * t - (odd ? 2 : 0)),
                make_float4(w.x * scale, w.y * scale, w.z * scale, w.w * scale));
    }
#else
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = g + 8 * h, tok = r / tl.hc;
      if (tok >= ntok) continue;
      const long long row = ((long long)c.b * tl.q_len + s.toks[t0 + tok]) * tl.hq + head0 + r % tl.hc;
      float* dst = dq + row * ATT_D + d0 + 8 * j + 2 * t;
      atomicAdd(dst, acc[2 * h] * scale);
      atomicAdd(dst + 1, acc[2 * h + 1] * scale);
    }
#endif
  }
}

#include "attention_kv_bwd16.h"

// B16: dK / dV / dQ products on bf16 m16n8k16 (attention_kv_bwd16.h; Bf16 only). dp_parts (B16
// only; the tf32 kernels keep 3, their registers unchanged): the bf16 parts dO is split into
// for dP = dO V^T (3: 2^-27 relative; 2: ~2^-17). SPLIT (with B16): dO split once per tile
// into shared memory (kv16_split_do), one more barrier per tile, in 3 parts (a runtime count
// spilled 8 bytes there at the 128-register bound), or 2 in the form KV_OPT_DO2 (kv16sp2).
// OPT (KV_OPT_* bits; with B16 and SPLIT only): the sweep's forms of the split kernel.
template <typename E, bool DQ, bool B16, bool SPLIT, unsigned OPT = 0>
QSA_DEVICE void kv_bwd(const u16* __restrict__ q, const u16* __restrict__ k, const u16* __restrict__ v,
                       const int* __restrict__ ids, const float* __restrict__ lse, const float* __restrict__ drow,
                       const float* __restrict__ d_o, float* __restrict__ dk, float* __restrict__ dv,
                       float* __restrict__ dq, int batch, int q_len, int kv_len, int hq, int hkv, int t, float scale,
                       int hc, int qt, int dp_parts) {
  QSA_DYNAMIC_SHARED(smem_raw);
  static_assert(OPT == 0 || (B16 && SPLIT), "kv_bwd: the KV_OPT_* forms are the split bf16 kernel's");
  constexpr bool P1 = OPT & KV_OPT_P1, NC = OPT & KV_OPT_NC;
  constexpr int DOP = (OPT & KV_OPT_DO2) ? 2 : 3;  // dO's parts in the split kernel's dP
  constexpr int SS = NC ? KVC_S_STRIDE : S_STRIDE;
  const KvCta c = kv_cta<B16 && DOP == 3>(batch, hkv);  // DOP == 2: kv_cta's spill note
  // 32-bit positions (as kv_len): 64-bit ones cost registers held across the chunk loop, which
  // spilled at the 128-register bound.
  const int base = c.id * ATT_BLK;
  const int keys = kv_len - base < ATT_BLK ? kv_len - base : ATT_BLK;  // of the block, < kv_len
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, tg = lane / 4, tt = lane % 4;
  const int kw = 16 * (warp % 4), dbase = 64 * (warp / 4);
  const KvSmem s = kv_smem(smem_raw, SPLIT, SS);
  KvTiles tl;
  tl.group = hq / hkv;
  tl.hc = hc;
  tl.qt = qt;
  tl.q_len = q_len;
  tl.hq = hq;
  tl.shift = kv_len - q_len;
  const int nchunk = tl.group / hc;
  // One cp.async group; the first tile's wait covers it (and the one after the loop, when no
  // token selected the block).
  staged_issue(s.kv, k, v, c.b, c.g, c.id, kv_len, hkv);
  const u16* ks = s.kv;
  const u16* vs = s.kv + ATT_BLK * KV_STRIDE;
  float acc_v[8][4], acc_k[8][4];
#pragma unroll
  for (int j = 0; j < 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      acc_v[j][e] = 0.f;
      acc_k[j][e] = 0.f;
    }
  const int first = base - tl.shift > 0 ? base - tl.shift : 0;  // the first token that sees key base
  for (int i0 = first; i0 < q_len; i0 += KVB_CHUNK) {
    // kv_collect's barriers also retire the previous chunk's last tile (buffers, P, dP).
    tl.found = kv_collect<KVB_THREADS>(s.toks, s.wave_hits, ids, c, i0, q_len, hkv, t);
    tl.per_chunk = (tl.found + qt - 1) / qt;
    tl.count = nchunk * tl.per_chunk;
    if (tl.count == 0) continue;
    KvRow next = kv_issue_tile(s, 0, c, tl, 0, q, d_o, lse, drow);
    kv_publish_rows(s, 0, next);
    for (int n = 0; n < tl.count; ++n) {
      const int buf = n & 1;
      qsa_copy_wait(0);  // this thread's copies of tile n (the only group in flight)
      QSA_SYNC();        // tile n's rows from every thread; tile n - 1 no longer reads buf ^ 1, P, dP
      const bool ahead = n + 1 < tl.count;
      if (ahead) next = kv_issue_tile(s, buf ^ 1, c, tl, n + 1, q, d_o, lse, drow);
      if constexpr (SPLIT) {  // dO's parts: written after tile n - 1's last reads (the barrier above)
        kv16_split_do<NC>(kv_dos(s, buf), s.dop, DOP);
        QSA_SYNC();
      }
      {  // P (warps 0-3) or raw dP (warps 4-7) for keys kw .. kw + 15
        float sc[2][4];
        if (warp < 4) kv_qk<E>(kv_qr(s, buf), ks, kw, lane, sc);
        // KV_OPT_DO2: the parts as the runtime dp_parts (dispatch passes 2 for kv16sp2; its split
        // wrote parts 0-1 only). With a compile-time 2 (here or a separate loop, scalar or
        // ldmatrix, any unroll) ptxas 13.0 spilled 16-20 bytes at the 128-register bound; the
        // runtime count with kv_cta's 64-bit division compiles without (sm_90, 2026-12-02).
        else if (SPLIT && DOP == 2) kv16_dov_split(s.dop, vs, kw, lane, dp_parts, sc);
        else if (SPLIT) kv16_dov_split(s.dop, vs, kw, lane, 3, sc);
        else if (B16) kv_dov<E>(kv_dos(s, buf), vs, kw, lane, dp_parts, sc);
        else tc_dot_split<E, 3>(kv_dos(s, buf), vs, kw, lane, sc);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = tg + 8 * h;
          const float L = kv_row_lse(s, buf)[r];
          const int pos = kv_row_pos(s, buf)[r];
#pragma unroll
          for (int nn = 0; nn < 2; ++nn) {
            const int key = kw + 8 * nn + 2 * tt;
            float w[2] = {sc[nn][2 * h], sc[nn][2 * h + 1]};
            if (warp < 4)  // P = exp(scale S - lse) where the key is visible, 0 elsewhere
#pragma unroll
              for (int e = 0; e < 2; ++e) {
                const bool vis = L != qsa_neg_inf() && base + key + e <= pos;
                w[e] = vis ? expf(w[e] * scale - L) : 0.f;
              }
            *(float2*)((warp < 4 ? s.ps : s.dps) + r * SS + key) = make_float2(w[0], w[1]);
          }
        }
      }
      // Tile n + 1's lse / D, loaded during the S / dP math (buffer buf ^ 1 was last read by
      // tile n - 1); published here rather than after the key tiles, where registers are short.
      if (ahead) kv_publish_rows(s, buf ^ 1, next);
      QSA_SYNC();  // P and dP of tile n
      if constexpr (B16) {
        if (kw < keys) {
          // One k16 step covers the tile's rows: fresh sums per 16 dims, added in f32.
          Kv16KeyFrags f;
          kv16_load_key_frags<SS, P1>(s.ps, s.dps, kv_row_d(s, buf), kw, lane, f);
#pragma unroll
          for (int jj = 0; jj < 4; ++jj)
            if (SPLIT)
              kv16_key_tile_split<P1>(f, s.dop, kv_qr(s, buf), dbase + 16 * jj, lane, acc_v[2 * jj], acc_v[2 * jj + 1],
                                  acc_k[2 * jj], acc_k[2 * jj + 1]);
            else
              kv16_key_tile(f, kv_dos(s, buf), kv_qr(s, buf), dbase + 16 * jj, lane, acc_v[2 * jj],
                            acc_v[2 * jj + 1], acc_k[2 * jj], acc_k[2 * jj + 1]);
          // For the dQ tile (warps 4-7 hold the same dS); here, after the key tiles: stored
          // before them, the fused kernel spilled 8-12 bytes (ptxas 13.0, sm_90).
          if (DQ && warp < 4) kv16_store_ds<P1>(f, s.dsp, kw, lane);
        }
      } else if (kw < keys) {
        // Fresh mma sums per k step, added to the block's sums in f32 (the precision note above).
#pragma unroll 1
        for (int kstep = 0; kstep < 2; ++kstep) {
          KvKeyFrags f;
          kv_load_key_frags(s.ps, s.dps, kv_row_d(s, buf), kw, kstep, lane, f);
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            float cv[4] = {0.f, 0.f, 0.f, 0.f}, ck[4] = {0.f, 0.f, 0.f, 0.f};
            kv_key_tile<E>(f, kv_dos(s, buf), kv_qr(s, buf), kstep, dbase + 8 * j, lane, cv, ck);
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              acc_v[j][e] += cv[e];
              acc_k[j][e] += ck[e];
            }
          }
        }
      }
      // P and dP stay until the next tile's first barrier.
      if (DQ && B16) {
        QSA_SYNC();  // dS's bf16 rows (kv16_store_ds) from warps 0-3
        kv16_dq_tile<P1>(s, c, tl, n, keys, warp, lane, dq, scale);
      }
      if (DQ && !B16) kv_dq_tile<E>(s, buf, c, tl, n, keys, warp, lane, dq, scale);
    }
  }
  qsa_copy_wait(0);  // the K / V copy, where no tile waited on it
  // Plain stores: this CTA owns the block's dK / dV (zero where no token selected it).
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int key = kw + tg + 8 * h;
    if (key >= keys) continue;
    const long long off = (((long long)c.b * kv_len + base + key) * hkv + c.g) * ATT_D + dbase + 2 * tt;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      *(float2*)(dv + off + 8 * j) = make_float2(acc_v[j][2 * h], acc_v[j][2 * h + 1]);
      *(float2*)(dk + off + 8 * j) = make_float2(acc_k[j][2 * h] * scale, acc_k[j][2 * h + 1] * scale);
    }
  }
}
// The wgmma form with 64-row tiles (sm_90a: QSA_WGMMA; QSA_ATTN_KV_MMA=wg).
#include "attention_kv_wg.h"
#endif  // QSA_ATTN_MMA
