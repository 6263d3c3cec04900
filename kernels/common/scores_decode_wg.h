// The Hopper decode scorers of kernels/block_scores.cu (block_scores_tf32_decode_wg,
// block_scores_bf16_decode_wg): one streaming pass over Kb with warpgroup MMA, for the calls
// the mma.sync decode kernels (common/scores_decode.h) take: every row of the call (queries x
// heads padded to 16-row m-tiles) in one CTA's 64. Included by block_scores.cu inside
// `#if defined(QSA_WGMMA)` (sm_90a only; the emulated sm_90 stands for that build). It lives
// in common/ so that the emulator's module cache (keyed by every common header) sees it.
//
// Why this shape: at 1 query x 64 heads x 262,144 blocks the mma.sync decode kernel is bound
// by its mma.sync issue rate, not by HBM (session 6, H200). Here the roles are swapped so that
// Kb never touches shared memory: a tile of 64 blocks is wgmma's M (A from REGISTERS) and the
// CTA's 64 rows (query slot x head) are its N (B = Q, staged once in shared memory):
//   D (64 blocks x 64 rows) = Kb_tile (64 x 128) * Q^T,   wgmma m64n64k8 .tf32 / m64n64k16 .bf16
// so each thread loads its own A fragments straight from global memory (LDG.128, 16 per tile,
// all in flight together), rounds them in registers and hands them to the tensor cores: no
// shared-memory ring, no barrier in the loop, no proxy fence after the prologue.
//
// A fragments (PTX ISA, wgmma register fragment of A, as mma.m16n8k8 / m16n8k16 per warp):
// warp w holds tile rows 16w .. 16w+15; lane (g = lane / 4, t = lane % 4) holds rows g and
// g + 8: tf32 a0 (g, k t), a1 (g+8, k t), a2 (g, k t+4), a3 (g+8, k t+4) per k8 step; bf16
// a0 (g, k 2t, 2t+1), a1 (g+8, same), a2 (g, k 2t+8, 2t+9), a3 (g+8, same) per k16 step.
// K is permuted so that each thread's operands of one row are one float4 of Kb: thread t
// loads physical k 16p + 4t .. 16p + 4t + 3 of each of its two rows (p = 0 .. 7) and feeds
//   tf32: .x -> step 2p col t,   .y -> step 2p col t+4,   .z / .w -> step 2p+1 col t / t+4
//   bf16: (.x, .y) -> step p cols 2t, 2t+1,   (.z, .w) -> step p cols 2t+8, 2t+9
// (dwg_logical_k below is that map from physical to logical k). Q is staged with the same
// map, so every dot still sums all 128 products once.
// Q (B, N x K = 64 rows x 128, K-major, no swizzle): the canonical layout of scores_wgmma.h:
// core matrices of 8 rows x 16 bytes, LBO = 128 (next in K), SBO = 8 rows x row bytes (4096
// tf32, 2048 bf16); k step s starts 256 s bytes in. Rounded once as it is staged (TF32:
// cvt.rna, BF16: cvt.rn), then fence.proxy.async and a barrier: the only ones in the kernel.
//
// Rows (N columns of D): CTA row n is m-tile n / 16; with mtq = ceil(heads / 16) <= 4 m-tiles
// per query the CTA holds QPC = 4 / mtq queries (query blockIdx.y * QPC + n / 16 / mtq, head
// (n / 16 % mtq) * 16 + n % 16), as the mma.sync decode kernel; rows past `heads`, past QPC
// queries or past nq are zeros with weight 0. The host never launches it with heads > 64.
//
// Rounding: TF32 Kb by cvt.rna in registers (wgmma .tf32 reads f32 bits and ignores the low
// 13: unrounded, that is truncation, a biased error twice the size), so the scores equal the
// mma.sync kernels' products; BF16 by cvt.rn as they are packed. f32 accumulation.
// Epilogue per tile, in registers: lane (g, t) holds D columns 8j + 2t + c (j < 8, c < 2) of
// rows g and g + 8: v = sum over its 16 columns, in ascending j then c, of w * relu(d) (fmaf
// into a running sum, per query: its m-tiles in ascending order), then the quad's 4 partial
// sums added by two xor shuffles (1, then 2); lane t = 0 stores. Deterministic run to run;
// not the summation order of the warp / SIMT / mma.sync kernels.
//
// Pipeline: persistent CTAs (grid.x = multiprocessors x CTAs per SM, tile = blockIdx.x + i *
// gridDim.x); each thread holds two tiles of A in registers: the next tile's 16 loads are
// issued before this tile's conversion, MMAs and epilogue, so a tile (32 KiB of Kb per CTA)
// is in flight per CTA; two CTAs per SM (the registers' limit). Measured on the H200 and not
// kept (2026-12-02, call A1, 1 x 64 x 262,144 TF32, median us; this kernel 43.9): a ring of
// four half tiles in the same registers (three in flight, 48 KiB per CTA) 46.0; an L2
// look-ahead (prefetch.global.L2 of the tile 2 or 3 ahead) 46.2 / 47.3; BF16 with either
// 44.1 / 43.4 against 44.9, within the run's noise. HBM is the limit here: the torch BF16
// GEMM on pre-converted (half-size) Kb ran at 99% of it in the same run.
//
// What the emulator cannot see (src/emu: its wgmma is synchronous and has one memory proxy):
// a missing fence.proxy.async after Q's st.shared, a missing wgmma.fence before the MMAs read
// registers the conversions wrote, or an accumulator read before wgmma.wait_group; the
// card's compute-sanitizer runs (H200.md) and its error suite check those.
//
// Launch (src/gpu/scores/decode.rs, `plan_decode_wg`): block = (128, 1, 1), grid =
// (min(tiles, multiprocessors x CTAs per SM), query groups); dynamic shared = 64 x 128 x E
// bytes (E = 4 TF32, 2 BF16): 32,768 B / 16,384 B.
#pragma once

#define DWG_THREADS 128
#define DWG_M 64  // blocks per tile: wgmma's M
#define DWG_N 64  // CTA rows (4 m-tiles of 16): wgmma's N
#define DWG_MT 4  // m-tiles of 16 rows per CTA
#define DWG_RING_SLOT (16 * DWG_THREADS)  // float4 per ring slot: one tile of A, 32 KiB

// Logical k (the MMA's k index: 8 s + c for tf32 step s, 16 s + c for bf16) of physical k
// `kp` of a row (the inverse of the A feed above; the same map for Q).
template <bool BF16> QSA_DEVICE int dwg_logical_k(int kp) {
  const int p = kp / 16, t = (kp % 16) / 4, e = kp % 4;
  if (BF16) return 16 * p + 2 * t + (e % 2) + 8 * (e / 2);
  return 8 * (2 * p + e / 2) + t + 4 * (e % 2);
}

// Byte offset of (row n, logical k) in the canonical no-swizzle K-major layout of rows of
// 128 elements of `ES` bytes.
template <int ES> QSA_DEVICE unsigned dwg_canon(int n, int k) {
  const unsigned kb = (unsigned)k * ES;
  return (unsigned)(n / 8) * (8u * 128u * ES) + (kb / 16) * 128u + (unsigned)(n % 8) * 16u + kb % 16;
}

// The ring of the _wgc kernels (RING): `stages` slots after Q in dynamic shared memory; slot
// k holds float4 (h * 8 + p) of thread tid (its tile rows row0 + 8 h, float4 p of each, as
// `load` below) at float4 index k * DWG_RING_SLOT + (h * 8 + p) * DWG_THREADS + tid, so a
// warp's 16-byte copies and LDS.128 cover 512 contiguous bytes (no bank conflict). Each
// thread reads back only what it copied: cp.async.wait_group orders it, no barrier.
// With WGS warpgroups per CTA each warpgroup streams tiles of its own ("streamer" blockIdx.x *
// WGS + warpgroup of gridDim.x * WGS) through a ring of its own (slots wg * stages ..).
template <int WGS> QSA_DEVICE int dwg_streamer() {
  return WGS == 1 ? (int)blockIdx.x : (int)blockIdx.x * WGS + (int)threadIdx.x / DWG_THREADS;
}
template <bool BF16> QSA_DEVICE float4* dwg_ring() {
  QSA_DYNAMIC_SHARED(smem_raw);
  return reinterpret_cast<float4*>(smem_raw + DWG_N * QSA_HEAD_DIM * (BF16 ? 2 : 4));
}
// Tiles of this streamer (tile streamer + i * streamers for i < this).
template <int WGS> QSA_DEVICE int dwg_my_tiles(int blocks) {
  const int tiles = (blocks + DWG_M - 1) / DWG_M, sidx = dwg_streamer<WGS>();
  return sidx < tiles ? (tiles - 1 - sidx) / ((int)gridDim.x * WGS) + 1 : 0;
}
// This thread's 16 float4 of tile i into ring slot i % stages (blocks past the end
// zero-filled, never stored). The caller commits the group: one per tile.
template <bool BF16, int WGS>
QSA_DEVICE void dwg_issue(const float* __restrict__ kb, int blocks, int i, int stages) {
  const int tid = threadIdx.x % DWG_THREADS, g = (tid % 32) >> 2, t = tid & 3;
  const int wg = (int)threadIdx.x / DWG_THREADS;
  float4* slot = dwg_ring<BF16>() + (wg * stages + i % stages) * DWG_RING_SLOT + tid;
  const int b0 = (dwg_streamer<WGS>() + i * (int)gridDim.x * WGS) * DWG_M + 16 * (tid / 32) + g;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int b = b0 + 8 * h;
    const float4* src =
        reinterpret_cast<const float4*>(kb + (size_t)(b < blocks ? b : 0) * QSA_HEAD_DIM) + t;
#pragma unroll
    for (int p = 0; p < 8; ++p)
      qsa_cp_async16(slot + (h * 8 + p) * DWG_THREADS, src + 4 * p, b < blocks ? 16 : 0);
  }
}
// The first stages - 1 tiles' copies, issued before Q is staged so that their latency
// overlaps Q's loads, conversion and barrier.
template <bool BF16, int WGS>
QSA_DEVICE void dwg_ring_prologue(const float* __restrict__ kb, int blocks, int stages) {
  const int my_tiles = dwg_my_tiles<WGS>(blocks);
#pragma unroll 1
  for (int c = 0; c < stages - 1; ++c) {
    if (c < my_tiles) dwg_issue<BF16, WGS>(kb, blocks, c, stages);
    qsa_cp_async_commit();
  }
}

// CTA rows ("Rows" above): row n is (query, head) of this CTA's query group, or invalid
// (zeros, weight 0).
struct DwgRows {
  int mtq, qpc, qbase, nq, heads;
  __device__ __forceinline__ bool src(int n, int& qq, int& hh) const {
    const int mi = n / 16, slot = mi / mtq;
    qq = qbase + slot;
    hh = (mi % mtq) * 16 + n % 16;
    return slot < qpc && qq < nq && hh < heads;
  }
};
QSA_DEVICE DwgRows dwg_rows(int nq, int heads) {
  const int mtq = (heads + 15) / 16, qpc = DWG_MT / mtq;
  return DwgRows{mtq, qpc, (int)blockIdx.y * qpc, nq, heads};
}

// Q once into Qs, by the first warpgroup's thread tid: float4 m = tid + 128 i of the 64 x 32
// float4 (all 16 loads in flight), rounded, its 4 values scattered to their logical k.
template <bool BF16>
QSA_DEVICE void dwg_stage_q(const float* __restrict__ q, unsigned char* Qs, const DwgRows& R, int tid) {
  constexpr int ES = BF16 ? 2 : 4;
  constexpr int PER = DWG_N * (QSA_HEAD_DIM / 4) / DWG_THREADS;  // 16
  float4 v[PER];
#pragma unroll
  for (int i = 0; i < PER; ++i) {
    const int m = tid + DWG_THREADS * i, n = m / 32, c4 = m % 32;
    int qq, hh;
    v[i] = R.src(n, qq, hh) ? reinterpret_cast<const float4*>(q + ((size_t)qq * R.heads + hh) * QSA_HEAD_DIM)[c4]
                            : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  // Float4 m = tid + 128 i is row n = tid / 32 + 4 i, physical k 4 (tid % 32) .. + 3: the
  // k part of each destination is the same for all i (computed once).
  unsigned koff[4];
#pragma unroll
  for (int x = 0; x < 4; ++x) koff[x] = dwg_canon<ES>(0, dwg_logical_k<BF16>(4 * (tid % 32) + x));
#pragma unroll
  for (int i = 0; i < PER; ++i) {
    unsigned char* row = Qs + dwg_canon<ES>(tid / 32 + 4 * i, 0);
    const float e[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      if constexpr (BF16) {
        *reinterpret_cast<unsigned short*>(row + koff[x]) = (unsigned short)(qsa_pack_bf16x2(e[x], 0.f) & 0xffffu);
      } else {
        *reinterpret_cast<unsigned*>(row + koff[x]) = qsa_cvt_tf32(e[x]);
      }
    }
  }
}

// The weights of this lane's D columns 8j + 2t + c, fixed per CTA.
QSA_DEVICE void dwg_weights(const float* __restrict__ w, const DwgRows& R, int t, float (&wc)[8][2]) {
#pragma unroll
  for (int j = 0; j < 8; ++j)
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      int qq, hh;
      wc[j][c] = R.src(8 * j + 2 * t + c, qq, hh) ? w[(size_t)qq * R.heads + hh] : 0.f;
    }
}

// acc = this thread's rows of the tile (v: rows row0, row0 + 8; float4 p is physical k
// 16 p + 4 t .. + 3) x Q^T: every A register is converted before the first MMA and pinned
// until after the wait (wgmma reads registers asynchronously; the compiler, which cannot know
// that, must not reuse them earlier).
template <bool BF16>
QSA_DEVICE void dwg_mma(const float4 (&v)[2][8], unsigned q_addr, float (&acc)[DWG_N / 2]) {
  constexpr unsigned SBO = 8u * 128u * (BF16 ? 2 : 4), LBO = 128u;
  constexpr int KS = BF16 ? 8 : 16;  // k steps: one float4 per row feeds 1 (bf16) or 2
  unsigned a[KS][4];
#pragma unroll
  for (int p = 0; p < 8; ++p) {
    if constexpr (BF16) {
      a[p][0] = qsa_pack_bf16x2(v[0][p].x, v[0][p].y);
      a[p][1] = qsa_pack_bf16x2(v[1][p].x, v[1][p].y);
      a[p][2] = qsa_pack_bf16x2(v[0][p].z, v[0][p].w);
      a[p][3] = qsa_pack_bf16x2(v[1][p].z, v[1][p].w);
    } else {
      a[2 * p][0] = qsa_cvt_tf32(v[0][p].x);
      a[2 * p][1] = qsa_cvt_tf32(v[1][p].x);
      a[2 * p][2] = qsa_cvt_tf32(v[0][p].y);
      a[2 * p][3] = qsa_cvt_tf32(v[1][p].y);
      a[2 * p + 1][0] = qsa_cvt_tf32(v[0][p].z);
      a[2 * p + 1][1] = qsa_cvt_tf32(v[1][p].z);
      a[2 * p + 1][2] = qsa_cvt_tf32(v[0][p].w);
      a[2 * p + 1][3] = qsa_cvt_tf32(v[1][p].w);
    }
  }
  qsa_wgmma_fence_regs(acc);
  qsa_wgmma_fence_aregs(a);
  qsa_wgmma_fence();  // the conversions above wrote the A registers wgmma reads
#pragma unroll
  for (int ks = 0; ks < KS; ++ks) {
    const unsigned long long db = qsa_wgmma_desc(q_addr + 256u * ks, LBO, SBO);
    if constexpr (BF16) qsa_wgmma_m64n64k16_bf16_rs(acc, a[ks], db, ks > 0);
    else qsa_wgmma_m64n64k8_tf32_rs(acc, a[ks], db, ks > 0);
  }
  qsa_wgmma_commit();
  qsa_wgmma_wait<0>();
  qsa_wgmma_fence_regs(acc);  // no use of acc above the wait
  qsa_wgmma_fence_aregs(a);   // A live (its registers untouched) until the MMAs are done
}

// A tile's scores from acc (b0: the block of this thread's row row0): per row, the query's
// columns summed, the quad's parts added; lane t = 0 stores.
QSA_DEVICE void dwg_epilogue(const float (&acc)[DWG_N / 2], const float (&wc)[8][2], const DwgRows& R, int b0,
                             int blocks, int t, float* __restrict__ s) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int b = b0 + 8 * h;
    float sum = 0.f;
#pragma unroll
    for (int mi = 0; mi < DWG_MT; ++mi) {
      if (mi % R.mtq == 0) sum = 0.f;
#pragma unroll
      for (int j = 2 * mi; j < 2 * mi + 2; ++j)
#pragma unroll
        for (int c = 0; c < 2; ++c) sum = fmaf(wc[j][c], qsa_relu(acc[4 * j + 2 * h + c]), sum);
      if (mi % R.mtq == R.mtq - 1) {  // the query's last m-tile: add the quad's 4 parts
        float tot = sum + qsa_shfl_xor(sum, 1);
        tot += qsa_shfl_xor(tot, 2);
        const int qq = R.qbase + mi / R.mtq;
        if (t == 0 && qq < R.nq && b < blocks) s[(size_t)qq * blocks + b] = tot;
      }
    }
  }
}

// RING: false = two tiles of A in registers (block_scores_*_decode_wg); true = `stages` tiles
// in a per-thread cp.async ring in shared memory (block_scores_*_decode_wgc; "Ring" above).
template <bool BF16, bool RING = false, int WGS = 1>
__device__ __forceinline__ void dwg_body(const float* __restrict__ q, const float* __restrict__ kb,
                                         const float* __restrict__ w, float* __restrict__ s,
                                         int nq, int heads, int blocks, int stages = 0) {
  QSA_DYNAMIC_SHARED(smem_raw);
  unsigned char* Qs = smem_raw;  // [64 rows][128] canonical, 4 (TF32) or 2 (BF16) bytes each
  static_assert(WGS == 1 || RING, "several warpgroups per CTA stream through rings");
  const int tid = threadIdx.x, warp = (WGS == 1 ? tid : tid % DWG_THREADS) / 32, lane = tid % 32;
  const int g = lane >> 2, t = lane & 3;
  if constexpr (RING) dwg_ring_prologue<BF16, WGS>(kb, blocks, stages);
  const DwgRows R = dwg_rows(nq, heads);
  if (WGS == 1 || tid < DWG_THREADS) dwg_stage_q<BF16>(q, Qs, R, tid);
  float wc[8][2];
  dwg_weights(w, R, t, wc);
  qsa_fence_proxy_async();  // Q's st.shared seen by the async proxy (wgmma)
  __syncthreads();
  const unsigned q_addr = qsa_smem_addr(Qs);

  const int tiles = (blocks + DWG_M - 1) / DWG_M;
  const int sidx = dwg_streamer<WGS>(), scount = (int)gridDim.x * WGS;
  const int my_tiles = sidx < tiles ? (tiles - 1 - sidx) / scount + 1 : 0;
  const int row0 = 16 * warp + g;  // this thread's tile rows: row0 and row0 + 8
  // This thread's 2 rows x 8 float4 of tile i (blocks past the end: zeros, never stored):
  // float4 p is physical k 16 p + 4 t .. + 3.
  auto load = [&](float4 (&v)[2][8], int i) {
    const int b0 = (sidx + i * scount) * DWG_M + row0;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int b = b0 + 8 * h;
      const float4* src = reinterpret_cast<const float4*>(kb + (size_t)(b < blocks ? b : 0) * QSA_HEAD_DIM) + t;
#pragma unroll
      for (int p = 0; p < 8; ++p) v[h][p] = b < blocks ? src[4 * p] : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  };
  float acc[DWG_N / 2];
  auto mma = [&](const float4 (&v)[2][8]) { dwg_mma<BF16>(v, q_addr, acc); };
  auto epilogue = [&](int i) { dwg_epilogue(acc, wc, R, (sidx + i * scount) * DWG_M + row0, blocks, t, s); };

  if constexpr (RING) {
#pragma unroll 1
    for (int i = 0; i < my_tiles; ++i) {
      dec_wait_pending(stages - 2);  // tile i's copies (this thread's own) have landed
      // Refill the slot of tile i - 1: this thread read it into registers last iteration and
      // its MMAs waited on them, so the copy cannot overwrite data still to be read.
      if (i + stages - 1 < my_tiles) dwg_issue<BF16, WGS>(kb, blocks, i + stages - 1, stages);
      qsa_cp_async_commit();
      float4 v[2][8];
      const int wg = tid / DWG_THREADS;
      const float4* slot =
          dwg_ring<BF16>() + (wg * stages + i % stages) * DWG_RING_SLOT + tid % DWG_THREADS;
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int p = 0; p < 8; ++p) v[h][p] = slot[(h * 8 + p) * DWG_THREADS];
      mma(v);
      epilogue(i);
    }
    qsa_cp_async_wait_group<0>();  // only empty groups can remain; leave none in flight
    return;
  }
  // Two whole tiles in registers: the next tile's 16 loads in flight during this one.
  float4 va[2][8], vb[2][8];
  if (my_tiles > 0) load(va, 0);
#pragma unroll 1
  for (int i = 0; i < my_tiles; i += 2) {
    if (i + 1 < my_tiles) load(vb, i + 1);  // in flight during tile i
    mma(va);
    epilogue(i);
    if (i + 1 >= my_tiles) break;
    if (i + 2 < my_tiles) load(va, i + 2);  // in flight during tile i + 1
    mma(vb);
    epilogue(i + 1);
  }
}
