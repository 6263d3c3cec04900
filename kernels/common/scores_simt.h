// The FP32 tiled SIMT scorers' body (simt_body) of kernels/block_scores.cu
// (block_scores_simt, block_scores_simt_d16; the entry points and their launch annotations
// stay there). Included by block_scores.cu on every target: it uses QSA_HEAD_DIM and
// qsa_relu. It lives in common/ so that the emulator's module cache (keyed by every common
// header) sees it.
//
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
// 33,792 B (DC = 16), under 48 KiB everywhere. Two kernels differ only in DC
// (src/gpu/scores/plan.rs picks one; QSA_SCORES_SIMT_DC forces it):
//   block_scores_simt      DC = 8:  128 stages (and barriers) per CTA at 64 heads. Every target.
//   block_scores_simt_d16  DC = 16: 64 stages, 8 more staging registers. sm_90+ only.
#pragma once

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
