// The AMD matrix-core scorers' body (amc_body) of kernels/block_scores.cu
// (block_scores_wmma_bf16 on gfx1200 / gfx1201, block_scores_mfma_bf16 on gfx950; the entry
// points and their launch annotations stay there). Included by block_scores.cu inside its
// `#if` for those targets. It lives in common/ so that the emulator's module cache (keyed by
// every common header) sees it.
//
// AMD matrix-core kernels (BF16 in, f32 accumulation). Compiled only for the two targets
// whose instruction they use; every other code object (NVIDIA, gfx906) lacks them, and
// dispatch picks them only on those targets and only when STRATA_BF16_TC=1 (no AMD runner
// has measured them yet). Written without hardware: .devrun/amdmc/ emulates the lane
// mapping below with a reference MMA.
//   block_scores_wmma_bf16  gfx1200 / gfx1201 (RDNA4, wave32):
//                           v_wmma_f32_16x16x16_bf16 (__builtin_amdgcn_wmma_f32_16x16x16_bf16_w32_gfx12)
//   block_scores_mfma_bf16  gfx950 (CDNA4, wave64):
//                           v_mfma_f32_16x16x32_bf16 (__builtin_amdgcn_mfma_f32_16x16x32_bf16)
//
// Both are D = A (16 x K) * B (K x 16) + C with 16-row tiles; lane l of a wave is in lane
// group g = l / 16 (G = wave / 16 groups: 2 on wave32, 4 on wave64) at position r = l % 16.
// Operand layouts relied on (LLVM AMDGPU / AMD ISA docs, AMD matrix instruction calculator):
//   A: lane l holds 8 bf16 of row m = r, at 8 k positions chosen by g.
//   B: lane l holds 8 bf16 of column n = r, at the same 8 k positions as A for that g.
//   C/D (f32, 16 / G elements per lane): element i of lane l is row m = (16 / G) * g + i,
//      column n = r. (WMMA gfx12: 8 per lane, rows 8g + i; MFMA 16x16: 4, rows 4g + i.)
// Which k each (g, element) stands for is documented as k = 8g + e (e = 0..7) but sources
// disagree for gfx12; it does not matter here: A and B are loaded with the SAME mapping
// (k = ks * 8G + 8g + e), so whatever hardware k an (g, e) slot means, A[m][k] and B[k][n]
// meet in it and every dot still sums all 128 products exactly once (emulated with a
// random shared permutation in .devrun/amdmc/). What must hold on hardware: A row = r,
// B column = r, A and B place k alike, and the C layout above.
//
// Mapping: a GEMM with M = rows (query, head), N = blocks, K = 128. A wave owns NT n-tiles
// (16 blocks each) and keeps their B fragments for the whole K in registers (loaded once,
// rounded to bf16 once), then walks the CTA's QPC queries and, for each, the query's
// ceil(heads / 16) m-tiles, loading A fragments straight from global memory (8 consecutive
// floats per lane, rounded in registers). After each m-tile the lane folds its C elements
// into per-block partials: out[n] = fmaf(w[row], relu(acc[row][n]), out[n]), rows in
// ascending order (rows past `heads` load zeros and carry weight 0); after the query's last
// m-tile the lane groups are summed with xor shuffles (16, then 32 on wave64), and lanes of
// group 0 store their block (if < blocks). Each (query, block) is computed by one wave and
// stored by one lane. Deterministic; not the CUDA kernels' summation order.
// No shared memory, no barriers: a wave past the last block returns at once. Every matrix
// instruction runs with the whole wave active (loads are masked by data, not by lanes).
//
// Launch: block = (256, 1, 1) (8 waves on gfx12, 4 on gfx950); BN = (256 / wave) * NT * 16
// blocks per CTA (512 on gfx12, 256 on gfx950); grid = (ceil(blocks / BN), ceil(nq / QPC));
// no dynamic LDS. NT and QPC are AMC_NT / AMC_QPC below; src/gpu/scores/plan.rs mirrors them.
#pragma once

// n-tiles (16 blocks each) per wave: their B fragments stay in registers, NT * 128 / G VGPRs.
// gfx12 (G = 2): 4 n-tiles spill past 256 VGPRs with the A loads in flight, so 2.
#if defined(__gfx950__)
#define AMC_NT 4
#else
#define AMC_NT 2
#endif
#define AMC_QPC 8  // queries per CTA (each wave walks all of them with its B resident)

typedef qsa_bf16x8 amc_bf16x8;
#if defined(__gfx950__)
static_assert(QSA_WAVE == 64, "v_mfma_f32_16x16x32_bf16 is a wave64 instruction");
typedef qsa_f32x4 amc_acc;
QSA_DEVICE amc_acc amc_mma(amc_bf16x8 a, amc_bf16x8 b, amc_acc c) { return qsa_mfma_f32_16x16x32_bf16(a, b, c); }
#else
static_assert(QSA_WAVE == 32, "the _w32 WMMA is a wave32 instruction");
typedef qsa_f32x8 amc_acc;
QSA_DEVICE amc_acc amc_mma(amc_bf16x8 a, amc_bf16x8 b, amc_acc c) { return qsa_wmma_f32_16x16x16_bf16(a, b, c); }
#endif

// 8 consecutive floats from p (32-byte aligned) rounded to bf16 (RNE, as cvt.rn.bf16x2 in
// the CUDA kernel), element e = p[e]; zeros when !ok (p is then never read).
QSA_DEVICE amc_bf16x8 amc_load8(const float* __restrict__ p, bool ok) {
  float4 lo = make_float4(0.f, 0.f, 0.f, 0.f), hi = lo;
  if (ok) {
    lo = reinterpret_cast<const float4*>(p)[0];
    hi = reinterpret_cast<const float4*>(p)[1];
  }
  return qsa_bf16x8_from_f32(lo, hi);
}

template <int NT, int QPC>
__device__ __forceinline__ void amc_body(const float* __restrict__ q, const float* __restrict__ kb,
                                         const float* __restrict__ w, float* __restrict__ s,
                                         int nq, int heads, int blocks) {
  constexpr int WAVES = 256 / QSA_WAVE;            // the host launches 256 threads
  constexpr int G = QSA_WAVE / 16;                 // lane groups
  constexpr int KSTEP = 8 * G;                     // k per matrix instruction
  constexpr int KSTEPS = QSA_HEAD_DIM / KSTEP;     // 8 (gfx12) or 4 (gfx950)
  constexpr int CROWS = 16 / G;                    // C rows per lane
  static_assert(sizeof(amc_acc) == CROWS * sizeof(float), "C holds 16 x 16 over the wave");
  static_assert(QSA_HEAD_DIM % KSTEP == 0, "whole k steps");

  const int lane = threadIdx.x % QSA_WAVE;
  const int wave = threadIdx.x / QSA_WAVE;
  const int r = lane % 16;  // A row, B column, C column
  const int g = lane / 16;  // k slots of A and B, C row block
  const int wb0 = (blockIdx.x * WAVES + wave) * (NT * 16);  // this wave's first block
  if (wb0 >= blocks) return;  // uniform over the wave; the kernel has no barriers

  // B fragments for the whole K, resident: column r of n-tile nt is block wb0 + 16 nt + r.
  amc_bf16x8 bf[NT][KSTEPS];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int b = wb0 + nt * 16 + r;
    const bool ok = b < blocks;
    const float* brow = kb + (size_t)(ok ? b : 0) * QSA_HEAD_DIM + 8 * g;
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks) bf[nt][ks] = amc_load8(brow + ks * KSTEP, ok);
  }

  const int mtq = (heads + 15) / 16;
  const int q0 = blockIdx.y * QPC;
  const int qend = min(nq, q0 + QPC);
#pragma unroll 1
  for (int qq = q0; qq < qend; ++qq) {  // uniform over the wave
    const float* qrow = q + (size_t)qq * heads * QSA_HEAD_DIM;
    const float* wrow = w + (size_t)qq * heads;
    float out[NT];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) out[nt] = 0.f;
#pragma unroll 1
    for (int mt = 0; mt < mtq; ++mt) {
      amc_acc acc[NT];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) acc[nt] = amc_acc{};
      // A: row r of m-tile mt is head 16 mt + r of query qq (zeros past `heads`).
      const int ha = mt * 16 + r;
      const bool aok = ha < heads;
      const float* arow = qrow + (size_t)(aok ? ha : 0) * QSA_HEAD_DIM + 8 * g;
#pragma unroll
      for (int ks = 0; ks < KSTEPS; ++ks) {
        const amc_bf16x8 a = amc_load8(arow + ks * KSTEP, aok);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) acc[nt] = amc_mma(a, bf[nt][ks], acc[nt]);
      }
      // Epilogue of the m-tile: C element i of this lane is head 16 mt + CROWS g + i.
#pragma unroll
      for (int i = 0; i < CROWS; ++i) {
        const int h = mt * 16 + CROWS * g + i;
        const float wv = h < heads ? wrow[h] : 0.f;
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) out[nt] = fmaf(wv, qsa_relu(acc[nt][i]), out[nt]);
      }
    }
    // Sum the G lane groups (they hold disjoint rows of the same blocks); group 0 stores.
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int o = 16; o < QSA_WAVE; o <<= 1) out[nt] += qsa_shfl_xor(out[nt], o);
    if (g == 0) {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int b = wb0 + nt * 16 + r;
        if (b < blocks) s[(size_t)qq * blocks + b] = out[nt];
      }
    }
  }
}
