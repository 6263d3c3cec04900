// Indexer block scores: S[q,b] = sum_h w[q,h] * relu(Q[q,h,:] . Kb[b,:]), head dim 128.
//
// Q [nq, heads, 128], Kb [blocks, 128], w [nq, heads], S [nq, blocks], all f32 row-major.
// A GEMM (M = nq*heads, N = blocks, K = 128) whose epilogue applies ReLU per head and sums
// the heads of each query with their weights. relu(x) = fmaxf(x, 0) (a NaN dot gives 0).
//
// Kernels (extern "C", launched by name; launch rules are in src/gpu/scores.rs):
//   block_scores_warp         the baseline: one 32-lane group per (q, b). Every target.
//   block_scores_simt         FP32 tiled SIMT GEMM, 1 query x 8 heads x 8 blocks per
//   block_scores_simt_d16     thread, d staged 8 (or 16, sm_90+ only) at a time. Every
//                             target. Same arithmetic as the CPU backend.
//   block_scores_tf32         TF32 tensor cores (mma.sync m16n8k8), 128 rows x 128 blocks
//                             per CTA. NVIDIA sm_80+ only.
//   block_scores_tf32_decode  decode: Q resident in shared memory, Kb streamed once by
//                             persistent CTAs (common/scores_decode.h), heads <= 64.
//   block_scores_bf16         BF16 tensor cores (mma.sync m16n8k16), inputs rounded to bf16
//   block_scores_bf16_decode  in the kernel, f32 accumulation. NVIDIA sm_80+ only.
//   block_scores_wmma_bf16    BF16 matrix cores, inputs rounded to bf16 in the kernel, f32
//   block_scores_mfma_bf16    accumulation: gfx1200/gfx1201 (WMMA) and gfx950 (MFMA) only.
//   block_scores_tf32_wgmma   TF32 / BF16 Hopper warpgroup MMA (wgmma, operands in shared
//   block_scores_bf16_wgmma   memory), the prefill kernels of sm_90 (built as sm_90a) only.
//   block_scores_tf32_decode_wg  decode on wgmma (sm_90a only): Kb tiles as A from registers,
//   block_scores_bf16_decode_wg  Q resident as B (common/scores_decode_wg.h), heads <= 64.
//   block_scores_{tf32,bf16}_wgrs{128,256}[p][s|o]  wgmma with A from registers (RS), sm_90a only
//                             (common/scores_wgrs.h; QSA_SCORES_WG picks one).
//
// Summation orders (the CPU backend reproduces the first two bit for bit):
//   warp: lane l (0..31) of a group: p = Q[4l]*K[4l]; p = fmaf(Q[4l+j], K[4l+j], p) for
//         j = 1, 2, 3; then p += shfl_xor(p, o) for o = 16, 8, 4, 2, 1 (each lane then holds
//         the same sum: float addition is commutative); per (q, b): acc = 0;
//         acc = fmaf(w[q,h], relu(dot_h), acc) for h = 0 .. heads-1.
//   simt: dot = 0; dot = fmaf(Q[d], K[d], dot) for d = 0 .. 127 (the first step is the
//         rounded product); the same head loop as the warp kernel.
//   tf32 / bf16: tensor-core order (k permuted within 32-wide chunks), heads summed in a
//         fixed tree order; deterministic run to run, not equal to the above.
//   *_wgmma: the same kind of order (k in the instruction's, heads in a fixed tree order).
//   *_wgrs*: k permuted within 16-wide chunks, heads in 16-head tiles (fixed tree), tiles in
//         ascending order.
//   wmma_bf16 / mfma_bf16: matrix-core order, heads summed per lane in ascending order
//         then across lane groups; deterministic run to run, not equal to the above.
#include "common/portable.h"
#include "common/tile_reduce.h"

#define QSA_HEAD_DIM 128

QSA_DEVICE float qsa_relu(float x) { return fmaxf(x, 0.f); }

// ---------------------------------------------------------------------------------------
// Warp kernel. A "group" is 32 consecutive lanes of a wave: one group per wave on NVIDIA and
// gfx1201, two per wave on wave64 targets (gfx906, gfx950); the xor offsets 16..1 never cross
// a group, so the result is the same on every wave width. Block: 256 threads (any multiple of
// 32 works); grid.x = ceil(nq * blocks / (blockDim.x / 32)). No shared memory.
// ---------------------------------------------------------------------------------------
// qsa:block 256
QSA_KERNEL void block_scores_warp(const float* __restrict__ q, const float* __restrict__ kb,
                                  const float* __restrict__ w, float* __restrict__ s, int nq,
                                  int heads, int blocks) {
  static_assert(QSA_WAVE % 32 == 0, "a wave holds whole 32-lane groups");
  const long long group = (long long)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int l = threadIdx.x % 32;
  if (group >= (long long)nq * blocks) return;  // uniform over the group
  const int qi = (int)(group / blocks);
  const int b = (int)(group % blocks);
  const float4 k4 = reinterpret_cast<const float4*>(kb + (size_t)b * QSA_HEAD_DIM)[l];
  const float* qrow = q + (size_t)qi * heads * QSA_HEAD_DIM;
  float acc = 0.f;
  for (int h = 0; h < heads; ++h) {
    const float4 q4 = reinterpret_cast<const float4*>(qrow + (size_t)h * QSA_HEAD_DIM)[l];
    float p = q4.x * k4.x;
    p = fmaf(q4.y, k4.y, p);
    p = fmaf(q4.z, k4.z, p);
    p = fmaf(q4.w, k4.w, p);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) p += qsa_shfl_xor(p, o);
    acc = fmaf(w[(size_t)qi * heads + h], qsa_relu(p), acc);
  }
  if (l == 0) s[(size_t)qi * blocks + b] = acc;
}

// ---------------------------------------------------------------------------------------
// FP32 tiled SIMT kernel: an SGEMM (rows = (query, head), columns = blocks, K = 128) whose
// epilogue folds each query's heads in ascending order.
//
// CTA = 256 threads as 16 (queries, ty) x 16 (block columns, tx); CTA tile = 16 queries x
// 128 blocks. Thread (tx, ty) owns query ty and blocks 4tx..4tx+3 and 64+4tx..64+4tx+3 (two
// float4 columns 64 apart, so each quarter-warp's LDS.128 of Kb covers 32 distinct banks),
// and holds 8 heads x 8 blocks = 64 dot accumulators in registers, plus out[8].
// Passes walk head groups h0 = 0, 8, 16, ... (a partial group computes zero rows and never
// folds them); each pass walks d = 0..127 in SIMT_DC-wide stages, dot = fmaf(Q[d], K[d], dot)
// from 0, then folds: out[j] = fmaf(w[h], relu(dot[h][j]), out[j]) for h = h0 .. h0+7 in
// order. That is the contract's simt order above, so the output is bit-identical to the CPU
// backend's "simt" order, for any tile or chunk width.
// Staging: each stage's Q rows (16 queries x 8 heads = 128 rows) and Kb rows (128 blocks),
// DC floats of d each, are read from global memory into registers one stage ahead (thread t:
// row t/2, float4 column t%2 (+2 per extra float4)), stored transposed as [d][row] in the
// other of two shared buffers (rows 132 floats apart: the two float4 columns of a warp's
// store land 16 banks apart, so stores are conflict-free), one barrier per stage. Rows past
// nq / heads / blocks load zeros; their outputs are never stored.
// Launch: grid = (ceil(blocks / 128), ceil(nq / 16)), block = (256, 1, 1), no dynamic shared
// memory. Static shared: 2 buffers x 2 operands x DC x 132 x 4 B = 16,896 B (DC = 8) or
// 33,792 B (DC = 16), under 48 KiB everywhere. Two kernels differ only in DC (src/gpu/scores.rs
// picks one; QSA_SCORES_SIMT_DC forces it):
//   block_scores_simt      DC = 8:  128 stages (and barriers) per CTA at 64 heads. Every target.
//   block_scores_simt_d16  DC = 16: 64 stages, 8 more staging registers. sm_90+ only.
// ---------------------------------------------------------------------------------------
#define SIMT_TQ 16                     // queries per CTA (one per thread row)
#define SIMT_HG 8                      // heads per pass = accumulator rows per thread
#define SIMT_TM (SIMT_TQ * SIMT_HG)    // GEMM rows per pass: 128
#define SIMT_TB 128                    // blocks per CTA
#define SIMT_LD (128 + 4)              // shared row stride, floats (16-byte multiple)

// Registers (nvcc 13.0.88, clang 22, 2026-12-01): on NVIDIA the d loop is unrolled and
// __launch_bounds__(256, 2) caps the kernel at 128 registers (2 CTAs per SM on sm_75 / sm_86 /
// sm_90; 128 used, no spills). On AMD an unrolled d loop hoists every stage's loads (226-250
// VGPRs; with a 2-blocks bound, spills on gfx906), so 2 d at a time and no min-blocks bound:
// 114-116 VGPRs, no spills.
#if defined(QSA_HIP)
#define SIMT_D_UNROLL _Pragma("unroll 2")
#define SIMT_BOUNDS __launch_bounds__(256)
#else
#define SIMT_D_UNROLL _Pragma("unroll")
#define SIMT_BOUNDS __launch_bounds__(256, 2)
#endif

template <int DC>
__device__ __forceinline__ void simt_body(const float* __restrict__ q,
                                          const float* __restrict__ kb,
                                          const float* __restrict__ w, float* __restrict__ s,
                                          int nq, int heads, int blocks, float* Qs, float* Ks) {
  constexpr int SPP = QSA_HEAD_DIM / DC;  // stages per pass
  constexpr int V4 = DC / 8;              // float4 of each operand per thread per stage
  static_assert(SIMT_TM == SIMT_TB && SIMT_TM * DC == 256 * 4 * V4, "one staging layout");
  static_assert(QSA_HEAD_DIM % DC == 0 && DC % 8 == 0, "whole stages");
  const int tid = threadIdx.x;
  const int tx = tid % 16;  // blocks 4tx .. 4tx+3, 64+4tx .. 64+4tx+3
  const int ty = tid / 16;  // query q0 + ty
  const int b0 = blockIdx.x * SIMT_TB;
  const int q0 = blockIdx.y * SIMT_TQ;
  const int passes = (heads + SIMT_HG - 1) / SIMT_HG;
  const int stages = passes * SPP;

  // This thread's staging row (the same index in Q's and Kb's chunk) and float4 column.
  const int srow = tid / 2;
  const int sc4 = tid % 2;
  const int sq = q0 + srow / SIMT_HG;  // its Q row: query sq, head h0 + srow % 8
  const int sb = b0 + srow;            // its Kb row
  const float* krow = kb + (size_t)(sb < blocks ? sb : 0) * QSA_HEAD_DIM;

  float4 qreg[V4], kreg[V4];
  auto load = [&](int st) {  // stage st into registers
    const int h = (st / SPP) * SIMT_HG + srow % SIMT_HG;
    const int dc = (st % SPP) * DC;
    const bool qok = sq < nq && h < heads;
    const float* qrow = q + ((size_t)sq * heads + h) * QSA_HEAD_DIM + dc;
#pragma unroll
    for (int v = 0; v < V4; ++v) {
      const int c = 4 * (sc4 + 2 * v);
      qreg[v] = qok ? *reinterpret_cast<const float4*>(qrow + c) : make_float4(0.f, 0.f, 0.f, 0.f);
      kreg[v] = sb < blocks ? *reinterpret_cast<const float4*>(krow + dc + c)
                            : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  };
  auto store = [&](int buf) {  // registers into buffer buf, transposed to [d][row]
    float* qs = Qs + buf * DC * SIMT_LD + srow;
    float* ks = Ks + buf * DC * SIMT_LD + srow;
#pragma unroll
    for (int v = 0; v < V4; ++v) {
      const int d = 4 * (sc4 + 2 * v);
      qs[(d + 0) * SIMT_LD] = qreg[v].x;
      qs[(d + 1) * SIMT_LD] = qreg[v].y;
      qs[(d + 2) * SIMT_LD] = qreg[v].z;
      qs[(d + 3) * SIMT_LD] = qreg[v].w;
      ks[(d + 0) * SIMT_LD] = kreg[v].x;
      ks[(d + 1) * SIMT_LD] = kreg[v].y;
      ks[(d + 2) * SIMT_LD] = kreg[v].z;
      ks[(d + 3) * SIMT_LD] = kreg[v].w;
    }
  };

  float out[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) out[j] = 0.f;
  const int qq = q0 + ty;  // this thread's output query

  load(0);
  store(0);
  __syncthreads();
#pragma unroll 1
  for (int p = 0; p < passes; ++p) {
    float acc[SIMT_HG][8];
#pragma unroll
    for (int i = 0; i < SIMT_HG; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;
#pragma unroll 1
    for (int sc = 0; sc < SPP; ++sc) {
      const int st = p * SPP + sc;
      const bool more = st + 1 < stages;
      if (more) load(st + 1);  // in flight during this stage's arithmetic
      const float* qs = Qs + (st % 2) * DC * SIMT_LD + SIMT_HG * ty;
      const float* ks = Ks + (st % 2) * DC * SIMT_LD + 4 * tx;
      SIMT_D_UNROLL
      for (int d = 0; d < DC; ++d) {
        const float4 qa = *reinterpret_cast<const float4*>(qs + d * SIMT_LD);
        const float4 qb = *reinterpret_cast<const float4*>(qs + d * SIMT_LD + 4);
        const float4 ka = *reinterpret_cast<const float4*>(ks + d * SIMT_LD);
        const float4 kc = *reinterpret_cast<const float4*>(ks + d * SIMT_LD + 64);
        const float qv[SIMT_HG] = {qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w};
        const float kv[8] = {ka.x, ka.y, ka.z, ka.w, kc.x, kc.y, kc.z, kc.w};
#pragma unroll
        for (int i = 0; i < SIMT_HG; ++i)
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(qv[i], kv[j], acc[i][j]);
      }
      if (more) store((st + 1) % 2);  // the buffer every thread finished reading last stage
      __syncthreads();
    }
    // Fold this head group into the scores: heads in ascending order, as the warp kernel.
    // WB weights are loaded first, all in flight at once (one latency, not WB in a row); 8
    // registers more than one at a time, which DC = 16 has not (it spills on sm_90 at WB = 8).
    if (qq < nq) {
      constexpr int WB = DC == 8 ? SIMT_HG : 1;
#pragma unroll
      for (int i0 = 0; i0 < SIMT_HG; i0 += WB) {
        float wv[WB];
#pragma unroll
        for (int i = 0; i < WB; ++i) {
          const int h = p * SIMT_HG + i0 + i;
          wv[i] = h < heads ? w[(size_t)qq * heads + h] : 0.f;
        }
#pragma unroll
        for (int i = 0; i < WB; ++i) {
          if (p * SIMT_HG + i0 + i < heads) {
#pragma unroll
            for (int j = 0; j < 8; ++j)
              out[j] = fmaf(wv[i], qsa_relu(acc[i0 + i][j]), out[j]);
          }
        }
      }
    }
  }

  if (qq >= nq) return;
  float* srow_out = s + (size_t)qq * blocks;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int b = b0 + (j < 4 ? 4 * tx + j : 64 + 4 * tx + j - 4);
    if (b < blocks) srow_out[b] = out[j];
  }
}

// qsa:block 256
QSA_KERNEL void SIMT_BOUNDS
    block_scores_simt(const float* __restrict__ q, const float* __restrict__ kb,
                      const float* __restrict__ w, float* __restrict__ s, int nq, int heads,
                      int blocks) {
  __shared__ __align__(16) float Qs[2 * 8 * SIMT_LD];
  __shared__ __align__(16) float Ks[2 * 8 * SIMT_LD];
  simt_body<8>(q, kb, w, s, nq, heads, blocks, Qs, Ks);
}
// Built for sm_90+ only (src/dispatch/scores.rs, `simt_d16_built`): at 128 registers it
// spills on sm_86 (164 B per thread, nvcc 13.0) and needs 256+ VGPRs with spills on gfx950 /
// gfx1201, 2026-12-01.
#if defined(QSA_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// qsa:block 256
QSA_KERNEL void __launch_bounds__(256, 2)
    block_scores_simt_d16(const float* __restrict__ q, const float* __restrict__ kb,
                          const float* __restrict__ w, float* __restrict__ s, int nq, int heads,
                          int blocks) {
  __shared__ __align__(16) float Qs[2 * 16 * SIMT_LD];
  __shared__ __align__(16) float Ks[2 * 16 * SIMT_LD];
  simt_body<16>(q, kb, w, s, nq, heads, blocks, Qs, Ks);
}
#endif  // QSA_CUDA && __CUDA_ARCH__ >= 900

// ---------------------------------------------------------------------------------------
// Tensor-core kernels (NVIDIA sm_80+). Absent from every other target's code object; the
// host never launches them there (dispatch requires Feature::Tf32Tc / Bf16Tc).
//
// CTA tile: MT = 4 * WM m-tiles of 16 rows by BN = 32 * WN blocks; warps WM x WN, each warp
// 64 rows x 32 blocks (4 x 4 mma tiles). K = 128 in chunks of 32 through an NSTAGE-deep
// cp.async pipeline; shared rows are 36 floats, so the LDS.128 fragment loads are free of
// bank conflicts. Within a 32-wide chunk the k index is permuted (thread t of a quad reads
// k = 8t .. 8t+7 with two LDS.128 and feeds them to four k8 steps, or two k16 steps); A and B
// use the same permutation, so each dot still sums all 128 products exactly once.
//
// Rows: each query's heads are padded to whole m-tiles (mtq = ceil(heads / 16)). When
// mtq <= MT a CTA holds QPC = MT / mtq queries; otherwise one query in ceil(mtq / MT) passes.
// Padded rows and rows of absent queries load zeros and carry weight 0.
//
// Epilogue: v = w * relu(acc) per row, the 16 rows of each m-tile reduced with a shuffle
// transpose (3 steps), partials per (m-tile, block) in shared memory, then summed over the
// query's m-tiles in ascending order. Deterministic.
//
// Launch: block = (32 * WM * WN, 1, 1); grid = (ceil(blocks / BN), ceil(nq / QPC)) with
// QPC as above; dynamic shared = NSTAGE * (64 * WM + BN) * 36 * 4 bytes (above 48 KiB: the
// host opts in with the max-dynamic-shared-size attribute).
// ---------------------------------------------------------------------------------------
#if defined(QSA_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800

#define TC_BK 32
#define TC_LD 36  // shared row stride, floats

template <int WM, int WN, int NSTAGE, bool BF16>
__device__ __forceinline__ void tc_body(const float* __restrict__ q, const float* __restrict__ kb,
                                        const float* __restrict__ w, float* __restrict__ s,
                                        int nq, int heads, int blocks) {
  constexpr int MT = 4 * WM;        // m-tiles per CTA
  constexpr int BM = 16 * MT;       // rows per CTA
  constexpr int BN = 32 * WN;       // blocks per CTA
  constexpr int THREADS = 32 * WM * WN;
  constexpr int KCH = QSA_HEAD_DIM / TC_BK;  // 4 chunks
  constexpr int STAGE = (BM + BN) * TC_LD;   // floats per stage
  QSA_DYNAMIC_SHARED(smem_raw);
  float* smem = reinterpret_cast<float*>(smem_raw);

  const int tid = threadIdx.x;
  const int lane = tid % 32;
  const int warp = tid / 32;
  const int wm = warp / WN;
  const int wn = warp % WN;
  const int g = lane >> 2;
  const int t = lane & 3;

  const int mtq = (heads + 15) / 16;
  const int qpc = mtq <= MT ? MT / mtq : 1;
  const int passes = mtq <= MT ? 1 : (mtq + MT - 1) / MT;
  const int qbase = blockIdx.y * qpc;
  const int b0 = blockIdx.x * BN;

  // Where CTA row r of pass p comes from: (query, head), or invalid (zero row, weight 0).
  auto row_src = [&](int p, int r, int& qq, int& hh) -> bool {
    const int mi = r / 16;
    int slot, ht;
    if (passes == 1) {
      slot = mi / mtq;
      ht = mi % mtq;
      if (slot >= qpc) return false;
    } else {
      slot = 0;
      ht = p * MT + mi;
    }
    qq = qbase + slot;
    hh = ht * 16 + r % 16;
    return qq < nq && hh < heads;
  };

  float total = 0.f;  // running sum over passes (passes > 1: one block per thread, tid < BN)

  for (int p = 0; p < passes; ++p) {
    // Source offsets (floats) of the A rows this thread copies, -1 for zero rows: computed
    // once per pass so the pipeline loop carries 4 ints, not 4 pointers and the row mapping.
    constexpr int A4 = BM * (TC_BK / 4);
    constexpr int B4 = BN * (TC_BK / 4);
    constexpr int APT = A4 / THREADS;  // A copies per thread per chunk
    constexpr int BPT = B4 / THREADS;
    static_assert(A4 % THREADS == 0 && B4 % THREADS == 0, "whole copies per thread");
    static_assert(BN <= THREADS, "passes > 1 keep one block per thread");
    int aoff[APT];
#pragma unroll
    for (int k = 0; k < APT; ++k) {
      const int i = tid + k * THREADS;
      int qq, hh;
      aoff[k] = row_src(p, i / (TC_BK / 4), qq, hh)
                    ? ((qq * heads + hh) * QSA_HEAD_DIM + (i % (TC_BK / 4)) * 4)
                    : -1;
    }
    auto load_chunk = [&](int kc, int st) {
      float* As = smem + st * STAGE;
      float* Bs = As + BM * TC_LD;
#pragma unroll
      for (int k = 0; k < APT; ++k) {
        const int i = tid + k * THREADS;
        const int r = i / (TC_BK / 4), c4 = i % (TC_BK / 4);
        const bool ok = aoff[k] >= 0;
        qsa_cp_async16(As + r * TC_LD + c4 * 4, ok ? q + aoff[k] + kc * TC_BK : q, ok ? 16 : 0);
      }
#pragma unroll
      for (int k = 0; k < BPT; ++k) {
        const int i = tid + k * THREADS;
        const int r = i / (TC_BK / 4), c4 = i % (TC_BK / 4);
        const bool ok = b0 + r < blocks;
        const float* src = ok ? kb + (size_t)(b0 + r) * QSA_HEAD_DIM + kc * TC_BK + c4 * 4 : kb;
        qsa_cp_async16(Bs + r * TC_LD + c4 * 4, src, ok ? 16 : 0);
      }
    };

    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

    __syncthreads();  // the previous pass's epilogue is done with shared memory
#pragma unroll
    for (int st = 0; st < NSTAGE - 1; ++st) {
      if (st < KCH) load_chunk(st, st);
      qsa_cp_async_commit();
    }
#pragma unroll 1
    for (int kc = 0; kc < KCH; ++kc) {
      qsa_cp_async_wait_group<NSTAGE - 2>();
      if constexpr (!BF16) {
        // Round this thread's own copies of the chunk to TF32 in place (its cp.async data
        // is visible to it after the wait): once per element instead of once per use.
        float* As = smem + (kc % NSTAGE) * STAGE;
        float* Bs = As + BM * TC_LD;
#pragma unroll
        for (int k = 0; k < APT + BPT; ++k) {
          const int i = tid + (k < APT ? k : k - APT) * THREADS;
          float* p4 = (k < APT ? As : Bs) + (i / (TC_BK / 4)) * TC_LD + (i % (TC_BK / 4)) * 4;
          float4 v = *reinterpret_cast<float4*>(p4);
          v.x = __uint_as_float(qsa_cvt_tf32(v.x));
          v.y = __uint_as_float(qsa_cvt_tf32(v.y));
          v.z = __uint_as_float(qsa_cvt_tf32(v.z));
          v.w = __uint_as_float(qsa_cvt_tf32(v.w));
          *reinterpret_cast<float4*>(p4) = v;
        }
      }
      __syncthreads();
      {
        const int nk = kc + NSTAGE - 1;
        if (nk < KCH) load_chunk(nk, nk % NSTAGE);
        qsa_cp_async_commit();
      }
      const float* As = smem + (kc % NSTAGE) * STAGE;
      const float* Bs = As + BM * TC_LD;
      // Two halves of the chunk (k 8t..8t+3, then 8t+4..8t+7): one float4 per fragment row
      // at a time keeps the live fragment registers at 24.
#pragma unroll 1
      for (int half = 0; half < 2; ++half) {
        float4 bf[4];
#pragma unroll
        for (int j = 0; j < 4; ++j)
          bf[j] = *reinterpret_cast<const float4*>(Bs + (wn * 32 + j * 8 + g) * TC_LD + 8 * t +
                                                   4 * half);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int r = wm * 64 + i * 16 + g;
          const float4 al = *reinterpret_cast<const float4*>(As + r * TC_LD + 8 * t + 4 * half);
          const float4 ah =
              *reinterpret_cast<const float4*>(As + (r + 8) * TC_LD + 8 * t + 4 * half);
          if constexpr (BF16) {
            const unsigned a[4] = {qsa_pack_bf16x2(al.x, al.y), qsa_pack_bf16x2(ah.x, ah.y),
                                   qsa_pack_bf16x2(al.z, al.w), qsa_pack_bf16x2(ah.z, ah.w)};
#pragma unroll
            for (int j = 0; j < 4; ++j) {
              const unsigned b[2] = {qsa_pack_bf16x2(bf[j].x, bf[j].y),
                                     qsa_pack_bf16x2(bf[j].z, bf[j].w)};
              qsa_mma_m16n8k16_bf16(acc[i][j], a, b[0], b[1]);
            }
          } else {
            const unsigned a0[4] = {__float_as_uint(al.x), __float_as_uint(ah.x),
                                    __float_as_uint(al.y), __float_as_uint(ah.y)};
            const unsigned a1[4] = {__float_as_uint(al.z), __float_as_uint(ah.z),
                                    __float_as_uint(al.w), __float_as_uint(ah.w)};
#pragma unroll
            for (int j = 0; j < 4; ++j) {
              const unsigned b0v[2] = {__float_as_uint(bf[j].x), __float_as_uint(bf[j].y)};
              const unsigned b1v[2] = {__float_as_uint(bf[j].z), __float_as_uint(bf[j].w)};
              qsa_mma_m16n8k8_tf32(acc[i][j], a0, b0v);
              qsa_mma_m16n8k8_tf32(acc[i][j], a1, b1v);
            }
          }
        }
      }
    }
    qsa_cp_async_wait_group<0>();
    __syncthreads();  // every warp is done reading the pipeline: reuse it for the partials

    // Epilogue: part[mi][col] = sum over the 16 rows of m-tile mi of w * relu(acc).
    float* part = smem;  // [MT][BN]
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int r = wm * 64 + i * 16 + g;
      int qq, hh;
      const float w_lo = row_src(p, r, qq, hh) ? w[(size_t)qq * heads + hh] : 0.f;
      const float w_hi = row_src(p, r + 8, qq, hh) ? w[(size_t)qq * heads + hh] : 0.f;
      float v[8];  // u = 2j + c  <->  block column 8j + 2t + c
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int c = 0; c < 2; ++c)
          v[2 * j + c] = fmaf(w_hi, qsa_relu(acc[i][j][2 + c]), w_lo * qsa_relu(acc[i][j][c]));
      // Transpose-reduce over g (lane bits 2..4): after the three steps lane (g, t) holds
      // u = g summed over all 16 rows.
      v[0] = qsa_tile_rows16_sum(v, g);
      const int col = wn * 32 + 8 * (g >> 1) + 2 * t + (g & 1);
      part[(wm * 4 + i) * BN + col] = v[0];
    }
    __syncthreads();

    if (passes == 1) {
      for (int idx = tid; idx < qpc * BN; idx += THREADS) {
        const int slot = idx / BN, col = idx % BN;
        const int qq = qbase + slot, b = b0 + col;
        if (qq >= nq || b >= blocks) continue;
        float sum = part[(slot * mtq) * BN + col];
        for (int m = 1; m < mtq; ++m) sum += part[(slot * mtq + m) * BN + col];
        s[(size_t)qq * blocks + b] = sum;
      }
    } else if (tid < BN) {
      const int mts = min(MT, mtq - p * MT);
#pragma unroll 1
      for (int m = 0; m < mts; ++m) total += part[m * BN + tid];
    }
  }
  if (passes > 1 && tid < BN && qbase < nq && b0 + tid < blocks)
    s[(size_t)qbase * blocks + b0 + tid] = total;
}

// Wide tile: 128 rows (2 queries of 64 heads) x 128 blocks, 8 warps, 73,728 B shared.
// qsa:block 256
// qsa:dynamic_shared 73728
QSA_KERNEL void __launch_bounds__(256, 2)
    block_scores_tf32(const float* __restrict__ q, const float* __restrict__ kb,
                      const float* __restrict__ w, float* __restrict__ s, int nq, int heads,
                      int blocks) {
  tc_body<2, 4, 2, false>(q, kb, w, s, nq, heads, blocks);
}
// qsa:block 256
// qsa:dynamic_shared 73728
QSA_KERNEL void __launch_bounds__(256, 2)
    block_scores_bf16(const float* __restrict__ q, const float* __restrict__ kb,
                      const float* __restrict__ w, float* __restrict__ s, int nq, int heads,
                      int blocks) {
  tc_body<2, 4, 2, true>(q, kb, w, s, nq, heads, blocks);
}
// Decode scorers: Q resident, Kb streamed once through a cp.async ring by persistent CTAs
// (common/scores_decode.h). Launch shape declared for the occupancy report: 4 warps, 3
// stages (89,088 B: what sm_86's 99 KiB holds); sm_90 runs 8 warps x 4 stages (181,248 B,
// one CTA per SM) unless the plan's switches say otherwise (src/gpu/scores.rs).
#include "common/scores_decode.h"
// qsa:block 128
// qsa:dynamic_shared 89088
QSA_KERNEL void __launch_bounds__(256, 1)
    block_scores_tf32_decode(const float* __restrict__ q, const float* __restrict__ kb,
                             const float* __restrict__ w, float* __restrict__ s, int nq,
                             int heads, int blocks, int stages) {
  dec_body<false>(q, kb, w, s, nq, heads, blocks, stages);
}
// qsa:block 128
// qsa:dynamic_shared 89088
QSA_KERNEL void __launch_bounds__(256, 1)
    block_scores_bf16_decode(const float* __restrict__ q, const float* __restrict__ kb,
                             const float* __restrict__ w, float* __restrict__ s, int nq,
                             int heads, int blocks, int stages) {
  dec_body<true>(q, kb, w, s, nq, heads, blocks, stages);
}
// Measured on the H200 and not kept (2026-11-30, 256 x 64 x 4096): whole K resident
// (4 stages, 1 CTA/SM) 336 us; 4-warp 128 x 64 tiles 285 us (3 stages: 354 us); the old
// decode tile (tc_body<1, 8, 2>, 1 x 64 x 262,144) with 3 stages 101 us, with 4 warps 86 us,
// as kept 73-75.6 us (2026-12-02): replaced by the streaming kernel above.

#endif  // QSA_CUDA && __CUDA_ARCH__ >= 800

// ---------------------------------------------------------------------------------------
// Hopper warpgroup-MMA kernels (sm_90a: QSA_WGMMA): block_scores_tf32_wgmma and
// block_scores_bf16_wgmma. Their body, wg_body, and what it does: common/scores_wgmma.h.
// ---------------------------------------------------------------------------------------
#if defined(QSA_WGMMA)
#include "common/scores_wgmma.h"

// qsa:block 128
// qsa:dynamic_shared 100352
QSA_KERNEL void __launch_bounds__(128, 2)
    block_scores_tf32_wgmma(const float* __restrict__ q, const float* __restrict__ kb,
                            const float* __restrict__ w, float* __restrict__ s, int nq,
                            int heads, int blocks) {
  wg_body<128, false>(q, kb, w, s, nq, heads, blocks);
}
// qsa:block 128
// qsa:dynamic_shared 86016
QSA_KERNEL void __launch_bounds__(128, 2)
    block_scores_bf16_wgmma(const float* __restrict__ q, const float* __restrict__ kb,
                            const float* __restrict__ w, float* __restrict__ s, int nq,
                            int heads, int blocks) {
  wg_body<256, true>(q, kb, w, s, nq, heads, blocks);
}

// The decode scorers on wgmma (Kb tiles as A from registers, Q resident as B): their body,
// dwg_body, and why: common/scores_decode_wg.h. Launch shape declared for the occupancy
// report: one warpgroup, TF32's Q (32,768 B); the host picks CTAs per SM
// (src/dispatch/scores/decode.rs).
#include "common/scores_decode_wg.h"
// qsa:block 128
// qsa:dynamic_shared 32768
QSA_KERNEL void __launch_bounds__(128, 2)
    block_scores_tf32_decode_wg(const float* __restrict__ q, const float* __restrict__ kb,
                                const float* __restrict__ w, float* __restrict__ s, int nq,
                                int heads, int blocks) {
  dwg_body<false>(q, kb, w, s, nq, heads, blocks);
}
// qsa:block 128
// qsa:dynamic_shared 16384
QSA_KERNEL void __launch_bounds__(128, 2)
    block_scores_bf16_decode_wg(const float* __restrict__ q, const float* __restrict__ kb,
                                const float* __restrict__ w, float* __restrict__ s, int nq,
                                int heads, int blocks) {
  dwg_body<true>(q, kb, w, s, nq, heads, blocks);
}
// A in registers (wgmma RS), B resident, no barrier after B's staging: rs_body and why, in
// common/scores_wgrs.h. Name: _wgrs<BN>[p]: p loads the next item's A during the MMAs. The
// minimum CTAs per SM of each launch bound is what src/gpu/scores.rs (WGRS) plans a wave with.
#include "common/scores_wgrs.h"
// qsa:block 128
// qsa:dynamic_shared 65536
QSA_KERNEL void __launch_bounds__(128, 3)
    block_scores_tf32_wgrs128(const float* __restrict__ q, const float* __restrict__ kb,
                            const float* __restrict__ w, float* __restrict__ s, int nq,
                            int heads, int blocks) {
  rs_body<128, false, 1, false, false>(q, kb, w, s, nq, heads, blocks);
}
// qsa:block 128
// qsa:dynamic_shared 65536
QSA_KERNEL void __launch_bounds__(128, 2)
    block_scores_tf32_wgrs128p(const float* __restrict__ q, const float* __restrict__ kb,
                            const float* __restrict__ w, float* __restrict__ s, int nq,
                            int heads, int blocks) {
  rs_body<128, false, 1, true, false>(q, kb, w, s, nq, heads, blocks);
}
// qsa:block 256
// qsa:dynamic_shared 131072
QSA_KERNEL void __launch_bounds__(256, 1)
    block_scores_tf32_wgrs256(const float* __restrict__ q, const float* __restrict__ kb,
                            const float* __restrict__ w, float* __restrict__ s, int nq,
                            int heads, int blocks) {
  rs_body<256, false, 2, false, false>(q, kb, w, s, nq, heads, blocks);
}
// qsa:block 128
// qsa:dynamic_shared 32768
QSA_KERNEL void __launch_bounds__(128, 4)
    block_scores_bf16_wgrs128(const float* __restrict__ q, const float* __restrict__ kb,
                            const float* __restrict__ w, float* __restrict__ s, int nq,
                            int heads, int blocks) {
  rs_body<128, true, 1, false, false>(q, kb, w, s, nq, heads, blocks);
}
// qsa:block 256
// qsa:dynamic_shared 65536
QSA_KERNEL void __launch_bounds__(256, 1)
    block_scores_bf16_wgrs256(const float* __restrict__ q, const float* __restrict__ kb,
                            const float* __restrict__ w, float* __restrict__ s, int nq,
                            int heads, int blocks) {
  rs_body<256, true, 2, false, false>(q, kb, w, s, nq, heads, blocks);
}
// qsa:block 256
// qsa:dynamic_shared 65536
QSA_KERNEL void __launch_bounds__(256, 1)
    block_scores_bf16_wgrs256p(const float* __restrict__ q, const float* __restrict__ kb,
                            const float* __restrict__ w, float* __restrict__ s, int nq,
                            int heads, int blocks) {
  rs_body<256, true, 2, true, false>(q, kb, w, s, nq, heads, blocks);
}

// The same with B in the 128-byte-swizzle layout (suffix s; 1 KiB more for its alignment).
// qsa:block 128
// qsa:dynamic_shared 66560
QSA_KERNEL void __launch_bounds__(128, 3)
    block_scores_tf32_wgrs128s(const float* __restrict__ q, const float* __restrict__ kb,
                            const float* __restrict__ w, float* __restrict__ s, int nq,
                            int heads, int blocks) {
  rs_body<128, false, 1, false, true>(q, kb, w, s, nq, heads, blocks);
}
// qsa:block 256
// qsa:dynamic_shared 132096
QSA_KERNEL void __launch_bounds__(256, 1)
    block_scores_tf32_wgrs256s(const float* __restrict__ q, const float* __restrict__ kb,
                            const float* __restrict__ w, float* __restrict__ s, int nq,
                            int heads, int blocks) {
  rs_body<256, false, 2, false, true>(q, kb, w, s, nq, heads, blocks);
}
// qsa:block 128
// qsa:dynamic_shared 33792
QSA_KERNEL void __launch_bounds__(128, 4)
    block_scores_bf16_wgrs128s(const float* __restrict__ q, const float* __restrict__ kb,
                            const float* __restrict__ w, float* __restrict__ s, int nq,
                            int heads, int blocks) {
  rs_body<128, true, 1, false, true>(q, kb, w, s, nq, heads, blocks);
}
// qsa:block 256
// qsa:dynamic_shared 66560
QSA_KERNEL void __launch_bounds__(256, 1)
    block_scores_bf16_wgrs256ps(const float* __restrict__ q, const float* __restrict__ kb,
                            const float* __restrict__ w, float* __restrict__ s, int nq,
                            int heads, int blocks) {
  rs_body<256, true, 2, true, true>(q, kb, w, s, nq, heads, blocks);
}

// Ping-pong (suffix o): the two warpgroups take turns issuing their MMAs (named barriers).
// qsa:block 256
// qsa:dynamic_shared 131072
QSA_KERNEL void __launch_bounds__(256, 1)
    block_scores_tf32_wgrs256o(const float* __restrict__ q, const float* __restrict__ kb,
                            const float* __restrict__ w, float* __restrict__ s, int nq,
                            int heads, int blocks) {
  rs_body<256, false, 2, false, false, true>(q, kb, w, s, nq, heads, blocks);
}
// qsa:block 256
// qsa:dynamic_shared 65536
QSA_KERNEL void __launch_bounds__(256, 1)
    block_scores_bf16_wgrs256o(const float* __restrict__ q, const float* __restrict__ kb,
                            const float* __restrict__ w, float* __restrict__ s, int nq,
                            int heads, int blocks) {
  rs_body<256, true, 2, false, false, true>(q, kb, w, s, nq, heads, blocks);
}

#endif  // QSA_WGMMA

// ---------------------------------------------------------------------------------------
// AMD matrix-core kernels (gfx1200 / gfx1201 WMMA, gfx950 MFMA; BF16 in, f32 accumulation).
// Their body, amc_body, what each lane holds and why: common/scores_amd_mc.h.
// ---------------------------------------------------------------------------------------
#if defined(QSA_HIP) && (defined(__gfx1200__) || defined(__gfx1201__) || defined(__gfx950__))
#include "common/scores_amd_mc.h"

#if defined(__gfx950__)
// qsa:block 256
QSA_KERNEL void __launch_bounds__(256)
    block_scores_mfma_bf16(const float* __restrict__ q, const float* __restrict__ kb,
                           const float* __restrict__ w, float* __restrict__ s, int nq,
                           int heads, int blocks) {
  amc_body<AMC_NT, AMC_QPC>(q, kb, w, s, nq, heads, blocks);
}
#else
// qsa:block 256
QSA_KERNEL void __launch_bounds__(256)
    block_scores_wmma_bf16(const float* __restrict__ q, const float* __restrict__ kb,
                           const float* __restrict__ w, float* __restrict__ s, int nq,
                           int heads, int blocks) {
  amc_body<AMC_NT, AMC_QPC>(q, kb, w, s, nq, heads, blocks);
}
#endif

#endif  // QSA_HIP && (gfx1200 || gfx1201 || gfx950)
