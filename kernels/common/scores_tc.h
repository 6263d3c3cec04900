// The mma.sync tensor-core scorers' body (tc_body) of kernels/block_scores.cu
// (block_scores_tf32, block_scores_bf16; the entry points and their launch annotations stay
// there), and the m-tile epilogue the mma.sync decode scorers (common/scores_decode.h) share.
// Included by block_scores.cu inside its NVIDIA sm_80+ section: it uses QSA_HEAD_DIM,
// qsa_relu, qsa_tile_rows16_sum and the mma.h names. It lives in common/ so that the
// emulator's module cache (keyed by every common header) sees it.
//
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
#pragma once

#define TC_BK 32
#define TC_LD 36  // shared row stride, floats

// One m-tile's half k-chunk of a warp's mma.sync tile: A fragments al (row g) and ah (row
// g + 8), k 8t + 4 half .. + 3 (the permuted order above), times the four n-tiles' B
// fragments bf (8j + g's same k; TF32 values already rounded), accumulated into acc[j]: two
// m16n8k8 TF32 steps or one m16n8k16 BF16 step per n-tile. tc_body and the mma.sync decode
// scorers (scores_decode.h) share it.
template <bool BF16>
QSA_DEVICE void tc_mma_half(float (&acc)[4][4], float4 al, float4 ah, const float4 (&bf)[4]) {
  if constexpr (BF16) {
    const unsigned a[4] = {qsa_pack_bf16x2(al.x, al.y), qsa_pack_bf16x2(ah.x, ah.y),
                           qsa_pack_bf16x2(al.z, al.w), qsa_pack_bf16x2(ah.z, ah.w)};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const unsigned b[2] = {qsa_pack_bf16x2(bf[j].x, bf[j].y), qsa_pack_bf16x2(bf[j].z, bf[j].w)};
      qsa_mma_m16n8k16_bf16(acc[j], a, b[0], b[1]);
    }
  } else {
    const unsigned a0[4] = {__float_as_uint(al.x), __float_as_uint(ah.x), __float_as_uint(al.y),
                            __float_as_uint(ah.y)};
    const unsigned a1[4] = {__float_as_uint(al.z), __float_as_uint(ah.z), __float_as_uint(al.w),
                            __float_as_uint(ah.w)};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const unsigned b0v[2] = {__float_as_uint(bf[j].x), __float_as_uint(bf[j].y)};
      const unsigned b1v[2] = {__float_as_uint(bf[j].z), __float_as_uint(bf[j].w)};
      qsa_mma_m16n8k8_tf32(acc[j], a0, b0v);
      qsa_mma_m16n8k8_tf32(acc[j], a1, b1v);
    }
  }
}

// The epilogue of one m-tile of a warp's 16-row x 32-block mma.sync tile (acc[j][e]: n-tile
// j < 4, C fragment e; lane (g, t) holds rows g (e 0, 1) and g + 8 (e 2, 3) of columns
// 8j + 2t + e % 2): w * relu(acc) per row (w_lo of row g, w_hi of row g + 8), the 16 rows
// summed per column by qsa_tile_rows16_sum's shuffle transpose. Lane (g, t) returns column
// 8 (g >> 1) + 2t + (g & 1). tc_body and the mma.sync decode scorers (scores_decode.h) share
// it, so their summation order is one.
QSA_DEVICE float tc_mtile_sum(float (&acc)[4][4][4], int i, float w_lo, float w_hi, int g) {
  float v[8];  // u = 2j + c  <->  block column 8j + 2t + c
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int c = 0; c < 2; ++c)
      v[2 * j + c] = fmaf(w_hi, qsa_relu(acc[i][j][2 + c]), w_lo * qsa_relu(acc[i][j][c]));
  v[0] = qsa_tile_rows16_sum(v, g);
  return v[0];
}

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
          tc_mma_half<BF16>(acc[i], al, ah, bf);
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
      const float sum = tc_mtile_sum(acc, i, w_lo, w_hi, g);
      const int col = wn * 32 + 8 * (g >> 1) + 2 * t + (g & 1);
      part[(wm * 4 + i) * BN + col] = sum;
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

