// NSA selection attention: forward (o, lse) and backward (dq, dk, dv), bf16 / f16 inputs,
// f32 accumulation. One source for CUDA and HIP through common/portable.h.
//
// Semantics (the contract shared with src/reference/attention.rs):
//   q [batch, q_len, hq, 128], k / v [batch, kv_len, hkv, 128] (u16 element bits),
//   ids [batch, q_len, hkv, t] int32, d_o [batch, q_len, hq, 128] f32.
//   Query token i sits at position kv_len - q_len + i. For (b, i, kv head g) the listed ids
//   are de-duplicated (an id repeated in one list counts once), -1 is "no block", and key
//   token j = id * 64 + r is visible iff j <= q_pos (and so j < kv_len). Query head h reads
//   kv head h / (hq / hkv). logits = scale * q.k; o and lse (natural log) in f32; a query
//   that sees no key gets o = 0, lse = -inf and zero gradients.
//
// Kernels (each instantiated for bf16 and f16; the suffix names the element type):
//   qsa_attn_gather_fwd_*   one wave per (b, i, h), K/V read from global per head: the
//                           error baseline.
//   qsa_attn_gather_bwd_*   the same for the backward, one atomic per dk / dv element.
//   qsa_attn_staged_fwd_*   one CTA per (b, tile of query tokens, kv head, chunk of the
//                           group's heads, split): every selected block's K and V staged
//                           once in shared memory / LDS for all rows (heads x tokens) of the
//                           CTA; double-buffered (cp.async on sm_80+) when the host passes
//                           nbuf = 2; online softmax in f32. With splits > 1 each CTA writes
//                           a partial (o, lse) and qsa_attn_combine merges them exactly.
//   qsa_attn_ring_fwd_*     (common/attention_ring_fwd.h, sm_80+ CUDA) the staged forward's
//                           geometry with a cp.async ring of K/V block slots, one barrier per
//                           block and each warp's online softmax in registers: the prefill
//                           forward there (src/dispatch/attention.rs, choose_forward).
//   qsa_attn_combine        merges split partials: lse = log sum exp, o = weighted mean.
//   qsa_attn_staged_bwd_*   dq, dk, dv with the same staging; dk / dv partials reduced over
//                           the CTA's rows before one global atomic per element and block.
//                           With kv_grads = 0 it computes dq (and D = rowsum(dO O) per row,
//                           written to drow) only, for:
//   qsa_attn_kv_bwd_*       dk, dv KV-block-major (sm_80+ CUDA): one CTA per (b, kv head,
//                           kv block) gathers the block's query tokens itself, accumulates in
//                           registers and writes each element once: no atomics, no zero-fill.
//                           Given dq, it also adds dQ by atomics (no query-side pass; D from:
//   qsa_attn_bwd_delta      D = rowsum(dO O), one wave per row).
// On sm_80+ (CUDA) the staged forward's QK^T and PV and the backward's S and dP run on tensor
// cores (mma.sync m16n8k16, f32 accumulation; f32 operands split into 16-bit parts, see
// tc_pv), and the backward's dQ, dK and dV products on tf32 tensor cores (mma.sync m16n8k8,
// f32 operands split into two tf32 parts, see tf32_split); sm_75 and HIP keep the FP32 tiles.
#include "common/portable.h"

#define ATT_D 128
#define ATT_BLK 64
// Rows (query heads x query tokens) one staged CTA owns.
#define ATT_ROWS 16
#define ATT_THREADS 128
// Staged K / V rows in u16: 128 + 8. The 16-byte pad keeps rows 16-byte aligned for
// vector loads and cp.async, and moves row c to bank 4c: eight lanes reading 16 bytes of
// eight consecutive keys cover all 32 banks (a 16-byte-per-lane request needs two
// wavefronts anyway), so the QK^T and dP loops read without conflicts.
#define KV_STRIDE 136
// f32 rows of q / dO: +4 floats puts rows on different banks for broadcast reads.
#define Q_STRIDE 132
// f32 rows of scores / probabilities: 16-byte aligned for float4 reads.
#define S_STRIDE 68

typedef unsigned short u16;

// ---- element conversion (no vendor half headers: the bits are the contract) ----------------
struct Bf16 {
  static constexpr bool is_bf16 = true;
  static __device__ __forceinline__ float lo(unsigned w) { return qsa_bf16x2_lo(w); }
  static __device__ __forceinline__ float hi(unsigned w) { return qsa_bf16x2_hi(w); }
  static __device__ __forceinline__ float one(u16 b) { return qsa_bf16_to_f32(b); }
};

struct F16 {
  static constexpr bool is_bf16 = false;
  static __device__ __forceinline__ float lo(unsigned w) { return qsa_f16_to_f32((u16)(w & 0xffffu)); }
  static __device__ __forceinline__ float hi(unsigned w) { return qsa_f16_to_f32((u16)(w >> 16)); }
  static __device__ __forceinline__ float one(u16 b) { return qsa_f16_to_f32(b); }
};

QSA_DEVICE float qsa_neg_inf() { return __uint_as_float(0xff800000u); }

// ---- the selection of one (b, i, g): de-duplicated, visible block ids --------------------------
// True when slot s of `list` is the first occurrence of a visible block.
QSA_DEVICE bool qsa_first_visible(const int* list, int s, long long q_pos) {
  const int id = list[s];
  if (id < 0 || (long long)id * ATT_BLK > q_pos) return false;
  for (int u = 0; u < s; ++u)
    if (list[u] == id) return false;
  return true;
}

// =============================================================================================
// Gather kernels: one wave per (b, i, h). Lane l holds dims l*DPL .. l*DPL+DPL-1.
// =============================================================================================
#define DPL (ATT_D / QSA_WAVE)

template <typename E>
QSA_DEVICE void gather_load_row(const u16* src, int lane, float* out) {
#pragma unroll
  for (int e = 0; e < DPL; ++e) out[e] = E::one(src[lane * DPL + e]);
}

template <typename E>
QSA_DEVICE void gather_fwd(const u16* __restrict__ q, const u16* __restrict__ k, const u16* __restrict__ v,
                           const int* __restrict__ ids, float* __restrict__ o, float* __restrict__ lse,
                           int batch, int q_len, int kv_len, int hq, int hkv, int t, float scale) {
  const int waves_per_block = blockDim.x / QSA_WAVE;
  const long long row = (long long)blockIdx.x * waves_per_block + threadIdx.x / QSA_WAVE;
  const long long rows = (long long)batch * q_len * hq;
  if (row >= rows) return;
  const int lane = qsa_lane();
  const int h = (int)(row % hq);
  const long long bi = row / hq;  // b * q_len + i
  const int i = (int)(bi % q_len);
  const int b = (int)(bi / q_len);
  const int g = h / (hq / hkv);
  const long long q_pos = (long long)kv_len - q_len + i;
  const int* list = ids + (bi * hkv + g) * t;

  float qv[DPL], acc[DPL];
  gather_load_row<E>(q + row * ATT_D, lane, qv);
#pragma unroll
  for (int e = 0; e < DPL; ++e) acc[e] = 0.f;
  float m = qsa_neg_inf(), l = 0.f;
  for (int s = 0; s < t; ++s) {
    if (!qsa_first_visible(list, s, q_pos)) continue;
    const long long base = (long long)list[s] * ATT_BLK;
    const long long last = q_pos < base + ATT_BLK - 1 ? q_pos : base + ATT_BLK - 1;
    for (long long j = base; j <= last; ++j) {
      const long long kv_off = (((long long)b * kv_len + j) * hkv + g) * ATT_D;
      float kv[DPL];
      gather_load_row<E>(k + kv_off, lane, kv);
      float d = 0.f;
#pragma unroll
      for (int e = 0; e < DPL; ++e) d += qv[e] * kv[e];
      const float sc = qsa_wave_sum(d) * scale;
      const float m_new = fmaxf(m, sc);
      const float alpha = expf(m - m_new);  // m = -inf on the first key: alpha = 0
      const float p = expf(sc - m_new);
      l = l * alpha + p;
      gather_load_row<E>(v + kv_off, lane, kv);
#pragma unroll
      for (int e = 0; e < DPL; ++e) acc[e] = acc[e] * alpha + p * kv[e];
      m = m_new;
    }
  }
  const bool none = !(l > 0.f);
  const float inv = none ? 0.f : 1.f / l;
#pragma unroll
  for (int e = 0; e < DPL; ++e) o[row * ATT_D + lane * DPL + e] = acc[e] * inv;
  if (lane == 0) lse[row] = none ? qsa_neg_inf() : m + logf(l);
}

template <typename E>
QSA_DEVICE void gather_bwd(const u16* __restrict__ q, const u16* __restrict__ k, const u16* __restrict__ v,
                           const int* __restrict__ ids, const float* __restrict__ o,
                           const float* __restrict__ lse, const float* __restrict__ d_o,
                           float* __restrict__ dq, float* __restrict__ dk, float* __restrict__ dv,
                           int batch, int q_len, int kv_len, int hq, int hkv, int t, float scale) {
  const int waves_per_block = blockDim.x / QSA_WAVE;
  const long long row = (long long)blockIdx.x * waves_per_block + threadIdx.x / QSA_WAVE;
  const long long rows = (long long)batch * q_len * hq;
  if (row >= rows) return;
  const int lane = qsa_lane();
  const int h = (int)(row % hq);
  const long long bi = row / hq;
  const int i = (int)(bi % q_len);
  const int b = (int)(bi / q_len);
  const int g = h / (hq / hkv);
  const long long q_pos = (long long)kv_len - q_len + i;
  const int* list = ids + (bi * hkv + g) * t;

  float qv[DPL], dov[DPL], dqa[DPL];
  gather_load_row<E>(q + row * ATT_D, lane, qv);
  float dsum = 0.f;
#pragma unroll
  for (int e = 0; e < DPL; ++e) {
    dov[e] = d_o[row * ATT_D + lane * DPL + e];
    dsum += dov[e] * o[row * ATT_D + lane * DPL + e];
    dqa[e] = 0.f;
  }
  const float D = qsa_wave_sum(dsum);
  const float L = lse[row];
  if (L == qsa_neg_inf()) {  // no visible key: zero gradients
#pragma unroll
    for (int e = 0; e < DPL; ++e) dq[row * ATT_D + lane * DPL + e] = 0.f;
    return;
  }
  for (int s = 0; s < t; ++s) {
    if (!qsa_first_visible(list, s, q_pos)) continue;
    const long long base = (long long)list[s] * ATT_BLK;
    const long long last = q_pos < base + ATT_BLK - 1 ? q_pos : base + ATT_BLK - 1;
    for (long long j = base; j <= last; ++j) {
      const long long kv_off = (((long long)b * kv_len + j) * hkv + g) * ATT_D;
      float kv[DPL], vv[DPL];
      gather_load_row<E>(k + kv_off, lane, kv);
      gather_load_row<E>(v + kv_off, lane, vv);
      float d = 0.f, dp = 0.f;
#pragma unroll
      for (int e = 0; e < DPL; ++e) {
        d += qv[e] * kv[e];
        dp += dov[e] * vv[e];
      }
      const float sc = qsa_wave_sum(d) * scale;
      dp = qsa_wave_sum(dp);
      const float p = expf(sc - L);
      const float ds = p * (dp - D) * scale;
#pragma unroll
      for (int e = 0; e < DPL; ++e) {
        dqa[e] += ds * kv[e];
        atomicAdd(dk + kv_off + lane * DPL + e, ds * qv[e]);
        atomicAdd(dv + kv_off + lane * DPL + e, p * dov[e]);
      }
    }
  }
#pragma unroll
  for (int e = 0; e < DPL; ++e) dq[row * ATT_D + lane * DPL + e] = dqa[e];
}

// =============================================================================================
// Staged kernels
// =============================================================================================

// Geometry of one staged CTA, decoded from blockIdx.x. Row r = tok * hc + hh covers query
// token i = tile * qt + tok and query head h = g * G + chunk * hc + hh.
struct StagedCta {
  int b, tile, g, chunk;
  int hc, qt, group;
};

QSA_DEVICE StagedCta staged_cta(int q_len, int hkv, int group, int hc, int qt) {
  StagedCta c;
  const int nchunk = group / hc;
  const int ntiles = (q_len + qt - 1) / qt;
  long long x = blockIdx.x;
  c.chunk = (int)(x % nchunk);
  x /= nchunk;
  c.g = (int)(x % hkv);
  x /= hkv;
  c.tile = (int)(x % ntiles);
  c.b = (int)(x / ntiles);
  c.hc = hc;
  c.qt = qt;
  c.group = group;
  return c;
}

// Shared-memory layout of the staged kernels (bytes from the dynamic base). The host
// computes the same sizes in src/gpu/attention.rs (staged_shared_bytes).
struct StagedSmem {
  float* qs;       // [ATT_ROWS][Q_STRIDE] q (f32)
  float* dos;      // [ATT_ROWS][Q_STRIDE] dO (backward only)
  float* ss;       // [ATT_ROWS][S_STRIDE] scores -> probabilities
  float* ds;       // [ATT_ROWS][S_STRIDE] dS (backward only)
  float* row_m;    // [ATT_ROWS] running max (forward) / lse (backward)
  float* row_l;    // [ATT_ROWS] running sum (forward) / D = rowsum(dO * O) (backward)
  float* row_a;    // [ATT_ROWS] rescale factor of this block (forward)
  int* raw;        // [cap] the CTA's ids, token-major (-1: none or invisible)
  unsigned* tmp;   // [cap] scratch of the list build
  int* uid;        // [cap] unique visible ids, in first-occurrence order
  unsigned* umask; // [cap] per unique id: bit tok set when token tok selected it
  int* count;      // [1]
  u16* kv;         // nbuf x { K [ATT_BLK][KV_STRIDE], V [ATT_BLK][KV_STRIDE] }
};

QSA_DEVICE StagedSmem staged_smem(unsigned char* base, int cap, bool backward) {
  StagedSmem s;
  unsigned char* p = base;
  const int qbytes = ATT_ROWS * Q_STRIDE * 4, sbytes = ATT_ROWS * S_STRIDE * 4;
  s.qs = (float*)p;
  p += qbytes;
  s.dos = (float*)p;
  if (backward) p += qbytes;
  s.ss = (float*)p;
  p += sbytes;
  s.ds = (float*)p;
  if (backward) p += sbytes;
  s.row_m = (float*)p;
  s.row_l = s.row_m + ATT_ROWS;
  s.row_a = s.row_l + ATT_ROWS;
  p += 3 * ATT_ROWS * 4;
  s.raw = (int*)p;
  s.tmp = (unsigned*)(s.raw + cap);
  s.uid = (int*)(s.tmp + cap);
  s.umask = (unsigned*)(s.uid + cap);
  s.count = (int*)(s.umask + cap);
  p += (4 * cap + 1) * 4;
  p = base + (((p - base) + 15) / 16) * 16;
  s.kv = (u16*)p;
  return s;
}

// The CTA's block list: the union over its tokens of each token's de-duplicated visible
// ids, each with the mask of tokens that selected it. Deterministic order (token-major,
// first occurrence), so every split CTA of one work item builds the same list.
QSA_DEVICE void staged_build_list(const StagedSmem& s, const int* ids, const StagedCta& c, int q_len,
                                  int kv_len, int hkv, int t) {
  const int n = c.qt * t;
  for (int e = threadIdx.x; e < n; e += blockDim.x) {
    const int tok = e / t, slot = e % t;
    const int i = c.tile * c.qt + tok;
    int id = -1;
    if (i < q_len) {
      id = ids[(((long long)c.b * q_len + i) * hkv + c.g) * t + slot];
      const long long q_pos = (long long)kv_len - q_len + i;
      if (id < 0 || (long long)id * ATT_BLK > q_pos) id = -1;  // invisible: as "no block"
    }
    s.raw[e] = id;
  }
  QSA_SYNC();
  // tmp[e] = mask of tokens selecting raw[e] when e is its first occurrence, else 0.
  for (int e = threadIdx.x; e < n; e += blockDim.x) {
    const int id = s.raw[e];
    unsigned mask = 0;
    if (id >= 0) {
      for (int u = 0; u < n; ++u)
        if (s.raw[u] == id) {
          if (u < e) {
            mask = 0;
            break;
          }
          mask |= 1u << (u / t);
        }
    }
    s.tmp[e] = mask;
  }
  QSA_SYNC();
  for (int e = threadIdx.x; e < n; e += blockDim.x) {
    if (!s.tmp[e]) continue;
    int pos = 0;
    for (int u = 0; u < e; ++u) pos += s.tmp[u] != 0u;
    s.uid[pos] = s.raw[e];
    s.umask[pos] = s.tmp[e];
  }
  if (threadIdx.x == 0) {
    int cnt = 0;
    for (int u = 0; u < n; ++u) cnt += s.tmp[u] != 0u;
    *s.count = cnt;
  }
  QSA_SYNC();
}

// ---- staging copies: cp.async on sm_80+, plain 16-byte copies elsewhere -----------------------
#if defined(QSA_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define QSA_ASYNC_COPY 1
#endif

QSA_DEVICE void qsa_copy16(u16* dst, const u16* src, bool valid) {
#if defined(QSA_ASYNC_COPY)
  qsa_cp_async16(dst, src, valid ? 16 : 0);  // src-size 0: the 16 bytes are zero-filled
#else
  uint4 val = make_uint4(0u, 0u, 0u, 0u);
  if (valid) val = *(const uint4*)src;
  *(uint4*)dst = val;
#endif
}
QSA_DEVICE void qsa_copy_commit() {
#if defined(QSA_ASYNC_COPY)
  qsa_cp_async_commit();
#endif
}
// Wait until at most `pending` (0 or 1) committed groups are still in flight.
QSA_DEVICE void qsa_copy_wait(int pending) {
#if defined(QSA_ASYNC_COPY)
  if (pending) qsa_cp_async_wait_group<1>();
  else qsa_cp_async_wait_group<0>();
#else
  (void)pending;
#endif
}

// Stage block `id` of (b, g) into buf: K and V rows [ATT_BLK][KV_STRIDE]; keys past kv_len
// are zero-filled (a masked key's p is 0, and 0 * stale NaN would not be).
QSA_DEVICE void staged_issue(u16* buf, const u16* k, const u16* v, int b, int g, int id, int kv_len, int hkv) {
  u16* ks = buf;
  u16* vs = buf + ATT_BLK * KV_STRIDE;
  // 64 rows x 16 chunks of 16 bytes, for K and for V.
  for (int c = threadIdx.x; c < ATT_BLK * (ATT_D / 8); c += blockDim.x) {
    const int r = c / (ATT_D / 8), ch = c % (ATT_D / 8);
    const long long j = (long long)id * ATT_BLK + r;
    const bool valid = j < kv_len;
    const long long off = valid ? ((((long long)b * kv_len + j) * hkv + g) * ATT_D + ch * 8) : 0;
    qsa_copy16(ks + r * KV_STRIDE + ch * 8, k + off, valid);
    qsa_copy16(vs + r * KV_STRIDE + ch * 8, v + off, valid);
  }
  qsa_copy_commit();
}

// Stage the CTA's q rows (f32) and, for the backward, dO rows; invalid rows are zero.
template <typename E>
QSA_DEVICE void staged_load_rows(const StagedSmem& s, const StagedCta& c, const u16* q, const float* d_o,
                                 int q_len, int hq) {
  for (int e = threadIdx.x; e < ATT_ROWS * ATT_D; e += blockDim.x) {
    const int r = e / ATT_D, d = e % ATT_D;
    const int tok = r / c.hc, hh = r % c.hc;
    const int i = c.tile * c.qt + tok;
    float qv = 0.f, dv = 0.f;
    if (tok < c.qt && i < q_len) {
      const int h = c.g * c.group + c.chunk * c.hc + hh;
      const long long off = (((long long)c.b * q_len + i) * hq + h) * ATT_D + d;
      qv = E::one(q[off]);
      if (d_o) dv = d_o[off];
    }
    s.qs[r * Q_STRIDE + d] = qv;
    if (d_o) s.dos[r * Q_STRIDE + d] = dv;
  }
}

// acc[2][4] += rows (r0, r0+1) of A (f32 smem, Q_STRIDE) . keys (k0 + 16 m) of B (staged u16).
template <typename E>
QSA_DEVICE void staged_dot_tile(const float* A, const u16* B, int r0, int k0, float acc[2][4]) {
#pragma unroll
  for (int a = 0; a < 2; ++a)
#pragma unroll
    for (int m = 0; m < 4; ++m) acc[a][m] = 0.f;
#pragma unroll 2
  for (int d = 0; d < ATT_D; d += 8) {
    const float4 a0 = *(const float4*)(A + r0 * Q_STRIDE + d);
    const float4 a1 = *(const float4*)(A + r0 * Q_STRIDE + d + 4);
    const float4 b0 = *(const float4*)(A + (r0 + 1) * Q_STRIDE + d);
    const float4 b1 = *(const float4*)(A + (r0 + 1) * Q_STRIDE + d + 4);
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      const uint4 w = *(const uint4*)(B + (k0 + 16 * m) * KV_STRIDE + d);
      const float x0 = E::lo(w.x), x1 = E::hi(w.x), x2 = E::lo(w.y), x3 = E::hi(w.y);
      const float x4 = E::lo(w.z), x5 = E::hi(w.z), x6 = E::lo(w.w), x7 = E::hi(w.w);
      acc[0][m] += a0.x * x0 + a0.y * x1 + a0.z * x2 + a0.w * x3 + a1.x * x4 + a1.y * x5 + a1.z * x6 + a1.w * x7;
      acc[1][m] += b0.x * x0 + b0.y * x1 + b0.z * x2 + b0.w * x3 + b1.x * x4 + b1.y * x5 + b1.z * x6 + b1.w * x7;
    }
  }
}

// acc[2][8] += P rows (r0, r0+1) (f32 smem, S_STRIDE) x B rows (staged u16), dims d0..d0+7,
// over the keys 0..nkeys-1 (nkeys a multiple of 4).
template <typename E>
QSA_DEVICE void staged_pv_tile(const float* P, const u16* B, int r0, int d0, int nkeys, float acc[2][8]) {
  for (int c = 0; c < nkeys; c += 4) {
    const float4 p0 = *(const float4*)(P + r0 * S_STRIDE + c);
    const float4 p1 = *(const float4*)(P + (r0 + 1) * S_STRIDE + c);
    const float pa[4] = {p0.x, p0.y, p0.z, p0.w};
    const float pb[4] = {p1.x, p1.y, p1.z, p1.w};
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const uint4 w = *(const uint4*)(B + (c + u) * KV_STRIDE + d0);
      const float x[8] = {E::lo(w.x), E::hi(w.x), E::lo(w.y), E::hi(w.y),
                          E::lo(w.z), E::hi(w.z), E::lo(w.w), E::hi(w.w)};
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        acc[0][e] += pa[u] * x[e];
        acc[1][e] += pb[u] * x[e];
      }
    }
  }
}

// Keys of the staged block `id` that any row of the CTA may see: 0 .. result-1 (rounded up to
// a multiple of 4 for the vector loops; the masked tail has p = 0 and zero-filled rows).
QSA_DEVICE int staged_key_limit(const StagedCta& c, int id, unsigned mask, int q_len, int kv_len) {
  long long best = -1;
  for (int tok = 0; tok < c.qt; ++tok)
    if (mask & (1u << tok)) {
      const long long q_pos = (long long)kv_len - q_len + c.tile * c.qt + tok;
      if (q_pos > best) best = q_pos;
    }
  long long n = best - (long long)id * ATT_BLK + 1;
  if (n > ATT_BLK) n = ATT_BLK;
  if (n < 0) n = 0;
  return (int)((n + 3) & ~3LL);
}

// ---- tensor-core tiles (sm_80+; sm_75 and HIP keep the FP32 tiles above) ----------------------
// mma.sync m16n8k16, f32 accumulation. Fragments (g = lane / 4, t = lane % 4):
//   A (16 x 16, row): regs {(g, 2t..2t+1), (g+8, 2t..), (g, 2t+8..), (g+8, 2t+8..)}
//   B (16 x 8, col):  regs {(k 2t..2t+1, n g), (k 2t+8.., n g)}
//   C (16 x 8):       {(g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1)}
// q and K / V are bf16 / f16 data, so QK^T is exact in the products. P is f32 in [0, 1]: one
// 16-bit copy would cost 2^-9 (bf16) of relative error, far over the gate (4x the gather
// kernel's FP32 error), so P is split into parts that sum back to it: bf16 hi + mid + lo
// (2^-27 relative), f16 hi + lo with lo scaled by 2^12 into its own accumulator (keeps lo out
// of f16's subnormal range; 2^-23 relative).
#if defined(QSA_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define QSA_ATTN_MMA 1
#define ATT_LO_SCALE 4096.f

template <typename E>
QSA_DEVICE unsigned tc_pack(float lo, float hi) {  // lo -> low half (the lower index)
  return E::is_bf16 ? qsa_pack_bf16x2(lo, hi) : qsa_pack_f16x2(lo, hi);
}

template <typename E>
QSA_DEVICE void tc_mma(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  if (E::is_bf16) qsa_mma_m16n8k16_bf16(c, a, b0, b1);
  else qsa_mma_m16n8k16_f16(c, a, b0, b1);
}

// q rows of the CTA as A fragments, 8 k-steps of 16 dims (exact: q is E data).
template <typename E>
QSA_DEVICE void tc_load_q(const float* qs, int lane, unsigned (&qa)[8][4]) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int ks = 0; ks < 8; ++ks)
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // dims +0 / +8
      const float2 x = *(const float2*)(qs + g * Q_STRIDE + ks * 16 + 8 * h + 2 * t);
      const float2 y = *(const float2*)(qs + (g + 8) * Q_STRIDE + ks * 16 + 8 * h + 2 * t);
      qa[ks][2 * h] = tc_pack<E>(x.x, x.y);
      qa[ks][2 * h + 1] = tc_pack<E>(y.x, y.y);
    }
}

// sc[n][.] = q . K for keys k0 + 8 n + (2t, 2t+1), rows g / g+8.
template <typename E>
QSA_DEVICE void tc_qk(const unsigned (&qa)[8][4], const u16* ks, int k0, int lane, float (&sc)[2][4]) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int n = 0; n < 2; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) sc[n][e] = 0.f;
#pragma unroll
  for (int kk = 0; kk < 8; ++kk)
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      const u16* kp = ks + (k0 + 8 * n + g) * KV_STRIDE + kk * 16 + 2 * t;
      tc_mma<E>(sc[n], qa[kk], *(const unsigned*)kp, *(const unsigned*)(kp + 8));
    }
}

// acc[j] += P (16 rows, f32 smem) x V (keys 0..nkeys-1) for dims d0 + 8 j, j < 4; f16's
// scaled low part goes to acc_lo.
template <typename E>
QSA_DEVICE void tc_pv(const float* P, const u16* vs, int d0, int nkeys, int lane, float (&acc)[4][4],
                      float (&acc_lo)[4][4]) {
  const int g = lane / 4, t = lane % 4;
  for (int k0 = 0; k0 < nkeys; k0 += 16) {
    float p[4][2];  // A order: (g, 2t), (g+8, 2t), (g, 2t+8), (g+8, 2t+8)
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      const float2 x = *(const float2*)(P + (g + 8 * (h & 1)) * S_STRIDE + k0 + 8 * (h >> 1) + 2 * t);
      p[h][0] = x.x;
      p[h][1] = x.y;
    }
    unsigned a0[4], a1[4], a2[4];
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      a0[h] = tc_pack<E>(p[h][0], p[h][1]);
      const float r0 = p[h][0] - E::lo(a0[h]), r1 = p[h][1] - E::hi(a0[h]);
      if (E::is_bf16) {
        a1[h] = tc_pack<E>(r0, r1);
        a2[h] = tc_pack<E>(r0 - E::lo(a1[h]), r1 - E::hi(a1[h]));
      } else {
        a1[h] = tc_pack<E>(r0 * ATT_LO_SCALE, r1 * ATT_LO_SCALE);
        a2[h] = 0u;
      }
    }
    const int key = k0 + (lane & 7) + ((lane >> 3) & 1) * 8;
#pragma unroll
    for (int jp = 0; jp < 2; ++jp) {
      unsigned b0, b1, b2, b3;
      qsa_ldmatrix_x4_trans(vs + key * KV_STRIDE + d0 + 16 * jp + (lane >> 4) * 8, b0, b1, b2, b3);
      tc_mma<E>(acc[2 * jp], a0, b0, b1);
      tc_mma<E>(acc[2 * jp + 1], a0, b2, b3);
      if (E::is_bf16) {
        tc_mma<E>(acc[2 * jp], a1, b0, b1);
        tc_mma<E>(acc[2 * jp + 1], a1, b2, b3);
        tc_mma<E>(acc[2 * jp], a2, b0, b1);
        tc_mma<E>(acc[2 * jp + 1], a2, b2, b3);
      } else {
        tc_mma<E>(acc_lo[2 * jp], a1, b0, b1);
        tc_mma<E>(acc_lo[2 * jp + 1], a1, b2, b3);
      }
    }
  }
}

// out[n][.] = A . B for keys k0 + 8 n + (2t, 2t+1), rows g / g+8, with A f32 rows in shared
// memory (Q_STRIDE) split into NPART 16-bit parts that sum back to it (NPART = 1 for q, which
// is E data; 3 for dO: 2^-27 relative with bf16). B: staged [key][dim] rows.
template <typename E, int NPART>
QSA_DEVICE void tc_dot_split(const float* A, const u16* B, int k0, int lane, float (&out)[2][4]) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int n = 0; n < 2; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) out[n][e] = 0.f;
#pragma unroll 2
  for (int kk = 0; kk < 8; ++kk) {
    float x[4][2];
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      const float2 v = *(const float2*)(A + (g + 8 * (h & 1)) * Q_STRIDE + kk * 16 + 8 * (h >> 1) + 2 * t);
      x[h][0] = v.x;
      x[h][1] = v.y;
    }
    unsigned b[2][2];
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      const u16* bp = B + (k0 + 8 * n + g) * KV_STRIDE + kk * 16 + 2 * t;
      b[n][0] = *(const unsigned*)bp;
      b[n][1] = *(const unsigned*)(bp + 8);
    }
#pragma unroll
    for (int part = 0; part < NPART; ++part) {
      unsigned a[4];
#pragma unroll
      for (int h = 0; h < 4; ++h) {
        a[h] = tc_pack<E>(x[h][0], x[h][1]);
        x[h][0] -= E::lo(a[h]);
        x[h][1] -= E::hi(a[h]);
      }
#pragma unroll
      for (int n = 0; n < 2; ++n) tc_mma<E>(out[n], a, b[n][0], b[n][1]);
    }
  }
}

// ---- the backward's dQ / dK / dV products: mma.sync m16n8k8 tf32 ("3xTF32") ----------------
// P, dS and dO are f32 values that no 16-bit format holds. tf32 keeps f32's exponent range (no
// f16 overflow of a large dS, no subnormal low parts) and an f32 splits into two tf32 parts,
// hi = tf32(x) and lo = tf32(x - hi), whose sum is within 2^-22 |x| of x. K and q are E data,
// exact in tf32 (bf16: 8, f16: 11 significant bits), so a product with them costs two mmas (hi,
// lo); dV = P^T dO splits both operands and drops lo x lo (2^-22 relative): three mmas. One
// m16n8k8 tf32 runs at the rate of one m16n8k16 bf16, so this is cheaper than the 16-bit split
// (bf16 needs three parts per operand: six mmas of twice the k for the same 2^-24).
// Fragments (g = lane / 4, t = lane % 4): A a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4);
// B b0 (k t, n g), b1 (k t+4, n g); C as m16n8k16 above.
QSA_DEVICE void tf32_split(float x, unsigned& hi, unsigned& lo) {
  hi = qsa_cvt_tf32(x);
  lo = qsa_cvt_tf32(x - __uint_as_float(hi));
}

// acc[j] += dS (16 rows, f32 smem, S_STRIDE) x K (staged [key][dim]) for dims d0 + 8 j, j < 4,
// over the keys 0 .. nkeys-1 rounded up to 8 (dS is 0 past the block's visible keys).
// The block's products run into their own accumulator, added to acc in f32 at the end: the
// tensor cores align each mma's addends to the largest and truncate, so an accumulator that
// carries every earlier block's dQ drops low bits of this block's products (on the H200, dq's
// error was 3-5x the emulator's round-to-nearest model with one accumulator for all blocks,
// docs/results/session5-2026-12-02/README.md).
template <typename E>
QSA_DEVICE void tc_ds_k(const float* dS, const u16* ks, int d0, int nkeys, int lane, float (&acc)[4][4]) {
  const int g = lane / 4, t = lane % 4;
  float blk[4][4];
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) blk[j][e] = 0.f;
  for (int k0 = 0; k0 < nkeys; k0 += 8) {
    unsigned hi[4], lo[4];
#pragma unroll
    for (int h = 0; h < 4; ++h)
      tf32_split(dS[(g + 8 * (h & 1)) * S_STRIDE + k0 + t + 4 * (h >> 1)], hi[h], lo[h]);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const u16* kp = ks + (k0 + t) * KV_STRIDE + d0 + 8 * j + g;
      const unsigned b[2] = {__float_as_uint(E::one(kp[0])), __float_as_uint(E::one(kp[4 * KV_STRIDE]))};
      qsa_mma_m16n8k8_tf32(blk[j], lo, b);
      qsa_mma_m16n8k8_tf32(blk[j], hi, b);
    }
  }
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[j][e] += blk[j][e];
}

// A fragments of P^T and dS^T for keys kw .. kw+15 (M) over the CTA's 16 rows (K, two steps of
// 8), split into tf32 parts: loaded once per block, reused for all 16 dim tiles.
struct TcKeyFrags {
  unsigned p_hi[2][4], p_lo[2][4], ds_hi[2][4], ds_lo[2][4];
};

QSA_DEVICE void tc_load_key_frags(const float* P, const float* dS, int kw, int lane, TcKeyFrags& f) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int ks = 0; ks < 2; ++ks)
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      const int off = (8 * ks + t + 4 * (h >> 1)) * S_STRIDE + kw + g + 8 * (h & 1);
      tf32_split(P[off], f.p_hi[ks][h], f.p_lo[ks][h]);
      tf32_split(dS[off], f.ds_hi[ks][h], f.ds_lo[ks][h]);
    }
}

// dv += P^T dO and dk += dS^T q (unscaled) for keys kw + g / kw + g + 8 (C layout) and dims
// d + 2t, d + 2t + 1. Rows outside `live` (bit r: row r selected the block) contribute nothing
// even where their dO is not finite (P and dS are 0 there, and 0 x inf would be NaN).
template <typename E>
QSA_DEVICE void tc_key_tile(const TcKeyFrags& f, const float* dos, const float* qs, unsigned live, int d,
                            int lane, float (&dv)[4], float (&dk)[4]) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int ks = 0; ks < 2; ++ks) {
    unsigned o_hi[2], o_lo[2], qb[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = 8 * ks + t + 4 * h;
      const bool on = (live >> r) & 1u;
      tf32_split(on ? dos[r * Q_STRIDE + d + g] : 0.f, o_hi[h], o_lo[h]);
      qb[h] = __float_as_uint(on ? qs[r * Q_STRIDE + d + g] : 0.f);
    }
    qsa_mma_m16n8k8_tf32(dv, f.p_lo[ks], o_hi);
    qsa_mma_m16n8k8_tf32(dv, f.p_hi[ks], o_lo);
    qsa_mma_m16n8k8_tf32(dv, f.p_hi[ks], o_hi);
    qsa_mma_m16n8k8_tf32(dk, f.ds_lo[ks], qb);
    qsa_mma_m16n8k8_tf32(dk, f.ds_hi[ks], qb);
  }
}

// Add one dim tile of dv / dk (C layout, dims d .. d+7 of keys kw + g, kw + g + 8) to global
// memory: one atomic per element, four elements per instruction on sm_90 (lanes t and t ^ 1
// swap halves so that each holds four consecutive dims of one key). Key c of the staged block is
// at elem0 + c * key_stride; keys at or past key_limit are not written.
QSA_DEVICE void tc_key_tile_atomics(float* dv, float* dk, long long elem0, long long key_stride, int kw,
                                    int key_limit, int d, int lane, const float (&cv)[4], const float (&ck)[4],
                                    float scale) {
  const int g = lane / 4, t = lane % 4;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const bool odd = t & 1;
  const float sv0 = qsa_shfl_xor(odd ? cv[0] : cv[2], 1), sv1 = qsa_shfl_xor(odd ? cv[1] : cv[3], 1);
  const float sk0 = qsa_shfl_xor(odd ? ck[0] : ck[2], 1), sk1 = qsa_shfl_xor(odd ? ck[1] : ck[3], 1);
  const int key = kw + g + (odd ? 8 : 0);
  if (key >= key_limit) return;
  const long long off = elem0 + key * key_stride + d + 2 * t - (odd ? 2 : 0);
  const float4 v4 = odd ? make_float4(sv0, sv1, cv[2], cv[3]) : make_float4(cv[0], cv[1], sv0, sv1);
  const float4 k4 = odd ? make_float4(sk0, sk1, ck[2], ck[3]) : make_float4(ck[0], ck[1], sk0, sk1);
  atomicAdd((float4*)(dv + off), v4);
  atomicAdd((float4*)(dk + off), make_float4(k4.x * scale, k4.y * scale, k4.z * scale, k4.w * scale));
#else
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int key = kw + g + 8 * h;
    if (key >= key_limit) continue;
    const long long off = elem0 + key * key_stride + d + 2 * t;
    atomicAdd(dv + off, cv[2 * h]);
    atomicAdd(dv + off + 1, cv[2 * h + 1]);
    atomicAdd(dk + off, ck[2 * h] * scale);
    atomicAdd(dk + off + 1, ck[2 * h + 1] * scale);
  }
#endif
}
#endif

template <typename E>
QSA_DEVICE void staged_fwd(const u16* __restrict__ q, const u16* __restrict__ k, const u16* __restrict__ v,
                           const int* __restrict__ ids, float* __restrict__ o, float* __restrict__ lse,
                           int batch, int q_len, int kv_len, int hq, int hkv, int t, float scale, int hc,
                           int qt, int nbuf) {
  QSA_DYNAMIC_SHARED(smem_raw);
  const int group = hq / hkv;
  const StagedCta c = staged_cta(q_len, hkv, group, hc, qt);
  const StagedSmem s = staged_smem(smem_raw, qt * t, false);
  const int tid = threadIdx.x;
  const int split = blockIdx.y, nsplit = gridDim.y;

  staged_load_rows<E>(s, c, q, nullptr, q_len, hq);
  if (tid < ATT_ROWS) {
    s.row_m[tid] = qsa_neg_inf();
    s.row_l[tid] = 0.f;
  }
  staged_build_list(s, ids, c, q_len, kv_len, hkv, t);  // ends with a barrier: q rows ready
  const int total = *s.count;
  const int per = (total + nsplit - 1) / nsplit;
  const int beg = split * per < total ? split * per : total;
  const int end = beg + per < total ? beg + per : total;
  const int n = end - beg;
  const int rows_valid = c.qt * c.hc;
  // Softmax roles: row tid / 8, keys 8 (tid % 8) .. +7 (eight consecutive lanes of one wave on
  // any wave width).
  const int sr = tid / 8, sk = 8 * (tid % 8);

#if defined(QSA_ATTN_MMA)
  // Tensor cores. Warp w: QK^T for keys 16 w .. 16 w + 15 of all 16 rows; PV for dims
  // 32 w .. 32 w + 31 of all 16 rows. This lane's rows: g and g + 8.
  const int warp = tid / 32, lane = tid % 32, tg = lane / 4, tt = lane % 4;
  const int kw = 16 * warp, dw = 32 * warp;
  unsigned qa[8][4];
  tc_load_q<E>(s.qs, lane, qa);
  float acc[4][4], acc_lo[4][4];
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      acc[j][e] = 0.f;
      acc_lo[j][e] = 0.f;
    }
#else
  // FP32. QK^T tiles: rows r0, r0+1 (r0 = 2 (tid / 16)), keys kq + 16 m. PV: rows r0, r0+1,
  // dims dv0 .. dv0+7.
  const int r0 = 2 * (tid / 16), kq = tid % 16, dv0 = 8 * (tid % 16);
  float acc[2][8];
#pragma unroll
  for (int a = 0; a < 2; ++a)
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[a][e] = 0.f;
#endif

  const int buf_elems = 2 * ATT_BLK * KV_STRIDE;
  if (n > 0) staged_issue(s.kv, k, v, c.b, c.g, s.uid[beg], kv_len, hkv);
  for (int it = 0; it < n; ++it) {
    const int id = s.uid[beg + it];
    const unsigned mask = s.umask[beg + it];
    u16* buf = s.kv + (nbuf == 2 ? (it & 1) : 0) * buf_elems;
    const bool ahead = nbuf == 2 && it + 1 < n;
    if (ahead) staged_issue(s.kv + ((it + 1) & 1) * buf_elems, k, v, c.b, c.g, s.uid[beg + it + 1], kv_len, hkv);
    qsa_copy_wait(ahead ? 1 : 0);
    QSA_SYNC();
    const u16* ks = buf;
    const u16* vs = buf + ATT_BLK * KV_STRIDE;
    const int nkeys = staged_key_limit(c, id, mask, q_len, kv_len);
    const long long base = (long long)id * ATT_BLK;

    // S = scale * q . K for the rows that selected the block, -inf elsewhere.
#if defined(QSA_ATTN_MMA)
    {
      float sc[2][4];
      if (kw < nkeys) {
        tc_qk<E>(qa, ks, kw, lane, sc);
      } else {
#pragma unroll
        for (int nn = 0; nn < 2; ++nn)
#pragma unroll
          for (int e = 0; e < 4; ++e) sc[nn][e] = 0.f;
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = tg + 8 * h;
        const bool live = r < rows_valid && (mask >> (r / c.hc) & 1u);
        const long long q_pos = (long long)kv_len - q_len + c.tile * c.qt + r / c.hc;
#pragma unroll
        for (int nn = 0; nn < 2; ++nn) {
          const int key = kw + 8 * nn + 2 * tt;
          float2 w;
          w.x = live && base + key <= q_pos ? sc[nn][2 * h] * scale : qsa_neg_inf();
          w.y = live && base + key + 1 <= q_pos ? sc[nn][2 * h + 1] * scale : qsa_neg_inf();
          *(float2*)(s.ss + r * S_STRIDE + key) = w;
        }
      }
    }
#else
    {
      const bool live0 = r0 < rows_valid && (mask >> (r0 / c.hc) & 1u);
      const bool live1 = r0 + 1 < rows_valid && (mask >> ((r0 + 1) / c.hc) & 1u);
      float sc[2][4];
      if (live0 || live1) staged_dot_tile<E>(s.qs, ks, r0, kq, sc);
#pragma unroll
      for (int a = 0; a < 2; ++a) {
        const int r = r0 + a;
        const bool live = a == 0 ? live0 : live1;
        const long long q_pos = (long long)kv_len - q_len + c.tile * c.qt + r / c.hc;
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          const int key = kq + 16 * m;
          const bool vis = live && base + key <= q_pos;
          s.ss[r * S_STRIDE + key] = vis ? sc[a][m] * scale : qsa_neg_inf();
        }
      }
    }
#endif
    QSA_SYNC();
    // Online softmax.
    {
      float* row = s.ss + sr * S_STRIDE + sk;
      float mx = qsa_neg_inf();
#pragma unroll
      for (int e = 0; e < 8; ++e) mx = fmaxf(mx, row[e]);
      mx = fmaxf(mx, qsa_shfl_xor(mx, 1));
      mx = fmaxf(mx, qsa_shfl_xor(mx, 2));
      mx = fmaxf(mx, qsa_shfl_xor(mx, 4));
      const float m_old = s.row_m[sr];
      const float m_new = fmaxf(m_old, mx);
      float sum = 0.f;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float p = m_new == qsa_neg_inf() ? 0.f : expf(row[e] - m_new);
        row[e] = p;
        sum += p;
      }
      sum += qsa_shfl_xor(sum, 1);
      sum += qsa_shfl_xor(sum, 2);
      sum += qsa_shfl_xor(sum, 4);
      QSA_SYNCWARP();
      if ((tid & 7) == 0) {
        const float alpha = m_new == qsa_neg_inf() ? 1.f : expf(m_old - m_new);
        s.row_a[sr] = alpha;
        s.row_l[sr] = s.row_l[sr] * alpha + sum;
        s.row_m[sr] = m_new;
      }
    }
    QSA_SYNC();
    // O = alpha O + P V.
#if defined(QSA_ATTN_MMA)
    {
      const float a0 = s.row_a[tg], a1 = s.row_a[tg + 8];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        acc[j][0] *= a0;
        acc[j][1] *= a0;
        acc[j][2] *= a1;
        acc[j][3] *= a1;
        acc_lo[j][0] *= a0;
        acc_lo[j][1] *= a0;
        acc_lo[j][2] *= a1;
        acc_lo[j][3] *= a1;
      }
      tc_pv<E>(s.ss, vs, dw, nkeys, lane, acc, acc_lo);
    }
#else
    {
      const float a0 = s.row_a[r0], a1 = s.row_a[r0 + 1];
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        acc[0][e] *= a0;
        acc[1][e] *= a1;
      }
      const bool live = (r0 < rows_valid && (mask >> (r0 / c.hc) & 1u)) ||
                        (r0 + 1 < rows_valid && (mask >> ((r0 + 1) / c.hc) & 1u));
      if (live) staged_pv_tile<E>(s.ss, vs, r0, dv0, nkeys, acc);
    }
#endif
    QSA_SYNC();  // the buffer and the scores are rewritten next iteration
    if (nbuf != 2 && it + 1 < n) staged_issue(s.kv, k, v, c.b, c.g, s.uid[beg + it + 1], kv_len, hkv);
  }

  // Write (o, lse): final when nsplit == 1, else a partial in the workspace layout
  // [split][b, q_len, hq, ...] that qsa_attn_combine merges.
  const long long rows_total = (long long)batch * q_len * hq;
#if defined(QSA_ATTN_MMA)
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = tg + 8 * h;
    const int tok = r / c.hc, hh = r % c.hc;
    const int i = c.tile * c.qt + tok;
    if (r >= rows_valid || i >= q_len) continue;
    const int hd = c.g * group + c.chunk * c.hc + hh;
    const long long row = (((long long)c.b * q_len + i) * hq + hd) + split * rows_total;
    const float l = s.row_l[r];
    const bool none = !(l > 0.f);
    const float inv = none ? 0.f : 1.f / l;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      float2 w;
      w.x = (acc[j][2 * h] + acc_lo[j][2 * h] * (1.f / ATT_LO_SCALE)) * inv;
      w.y = (acc[j][2 * h + 1] + acc_lo[j][2 * h + 1] * (1.f / ATT_LO_SCALE)) * inv;
      *(float2*)(o + row * ATT_D + dw + 8 * j + 2 * tt) = w;
    }
    if (warp == 0 && tt == 0) lse[row] = none ? qsa_neg_inf() : s.row_m[r] + logf(l);
  }
#else
#pragma unroll
  for (int a = 0; a < 2; ++a) {
    const int r = r0 + a;
    const int tok = r / c.hc, hh = r % c.hc;
    const int i = c.tile * c.qt + tok;
    if (r >= rows_valid || i >= q_len) continue;
    const int h = c.g * group + c.chunk * c.hc + hh;
    const long long row = (((long long)c.b * q_len + i) * hq + h) + split * rows_total;
    const float l = s.row_l[r];
    const bool none = !(l > 0.f);
    const float inv = none ? 0.f : 1.f / l;
#pragma unroll
    for (int e = 0; e < 8; ++e) o[row * ATT_D + dv0 + e] = acc[a][e] * inv;
    if (kq == 0) lse[row] = none ? qsa_neg_inf() : s.row_m[r] + logf(l);
  }
#endif
}

template <typename E>
QSA_DEVICE void staged_bwd(const u16* __restrict__ q, const u16* __restrict__ k, const u16* __restrict__ v,
                           const int* __restrict__ ids, const float* __restrict__ o,
                           const float* __restrict__ lse, const float* __restrict__ d_o,
                           float* __restrict__ dq, float* __restrict__ dk, float* __restrict__ dv,
                           float* __restrict__ drow, int batch, int q_len, int kv_len, int hq, int hkv, int t,
                           float scale, int hc, int qt, int nbuf, int kv_grads) {
  QSA_DYNAMIC_SHARED(smem_raw);
  (void)batch;
  const int group = hq / hkv;
  const StagedCta c = staged_cta(q_len, hkv, group, hc, qt);
  const StagedSmem s = staged_smem(smem_raw, qt * t, true);
  const int tid = threadIdx.x;
  const int rows_valid = c.qt * c.hc;

  staged_load_rows<E>(s, c, q, d_o, q_len, hq);
  // Per row: lse and D = rowsum(dO * O); eight lanes per row.
  {
    const int r = tid / 8, part = tid % 8;
    const int tok = r / c.hc, hh = r % c.hc;
    const int i = c.tile * c.qt + tok;
    const bool valid = r < rows_valid && i < q_len;
    const long long row = valid ? (((long long)c.b * q_len + i) * hq + c.g * group + c.chunk * c.hc + hh) : 0;
    float dsum = 0.f;
    if (valid)
      for (int d = part * 16; d < part * 16 + 16; ++d) dsum += d_o[row * ATT_D + d] * o[row * ATT_D + d];
    dsum += qsa_shfl_xor(dsum, 1);
    dsum += qsa_shfl_xor(dsum, 2);
    dsum += qsa_shfl_xor(dsum, 4);
    if (part == 0) {
      s.row_m[r] = valid ? lse[row] : qsa_neg_inf();
      s.row_l[r] = dsum;
      if (valid) drow[row] = dsum;  // for qsa_attn_kv_bwd_*
    }
  }
  staged_build_list(s, ids, c, q_len, kv_len, hkv, t);
  const int n = *s.count;

#if defined(QSA_ATTN_MMA)
  // Tensor cores. Warp w: S and dP for keys 16 w .. 16 w + 15 of all 16 rows, dQ for dims
  // 32 w .. 32 w + 31 of all 16 rows (this lane's rows: g and g + 8), dK and dV for keys
  // 16 w .. 16 w + 15, all dims.
  const int warp = tid / 32, lane = tid % 32, tg = lane / 4, tt = lane % 4;
  const int kw = 16 * warp, dw = 32 * warp;
  float dqa[4][4];
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) dqa[j][e] = 0.f;
#else
  // FP32 tiles: QK^T / dP for rows r0, r0+1 and keys kq + 16 m; dQ for rows r0, r0+1 and dims
  // d0 .. d0+7.
  const int r0 = 2 * (tid / 16), d0 = 8 * (tid % 16), kq = tid % 16;
  float dqa[2][8];
#pragma unroll
  for (int a = 0; a < 2; ++a)
#pragma unroll
    for (int e = 0; e < 8; ++e) dqa[a][e] = 0.f;
#endif

  const int buf_elems = 2 * ATT_BLK * KV_STRIDE;
  if (n > 0) staged_issue(s.kv, k, v, c.b, c.g, s.uid[0], kv_len, hkv);
  for (int it = 0; it < n; ++it) {
    const int id = s.uid[it];
    const unsigned mask = s.umask[it];
    u16* buf = s.kv + (nbuf == 2 ? (it & 1) : 0) * buf_elems;
    const bool ahead = nbuf == 2 && it + 1 < n;
    if (ahead) staged_issue(s.kv + ((it + 1) & 1) * buf_elems, k, v, c.b, c.g, s.uid[it + 1], kv_len, hkv);
    qsa_copy_wait(ahead ? 1 : 0);
    QSA_SYNC();
    const u16* ks = buf;
    const u16* vs = buf + ATT_BLK * KV_STRIDE;
    const int nkeys = staged_key_limit(c, id, mask, q_len, kv_len);
    const long long base = (long long)id * ATT_BLK;

    // P = exp(scale q.K - lse), dP = dO . V, dS = P (dP - D).
#if defined(QSA_ATTN_MMA)
    {
      float sc[2][4], dp[2][4];
      if (kw < nkeys) {
        tc_dot_split<E, 1>(s.qs, ks, kw, lane, sc);
        tc_dot_split<E, 3>(s.dos, vs, kw, lane, dp);
      } else {
#pragma unroll
        for (int nn = 0; nn < 2; ++nn)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            sc[nn][e] = 0.f;
            dp[nn][e] = 0.f;
          }
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = tg + 8 * h;
        const float L = s.row_m[r], D = s.row_l[r];
        const bool live = r < rows_valid && (mask >> (r / c.hc) & 1u) && L != qsa_neg_inf();
        const long long q_pos = (long long)kv_len - q_len + c.tile * c.qt + r / c.hc;
#pragma unroll
        for (int nn = 0; nn < 2; ++nn) {
          const int key = kw + 8 * nn + 2 * tt;
          float2 pw, gw;  // P and dS
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const bool vis = live && base + key + e <= q_pos;
            const float p = vis ? expf(sc[nn][2 * h + e] * scale - L) : 0.f;
            const float d = vis ? p * (dp[nn][2 * h + e] - D) : 0.f;
            if (e == 0) {
              pw.x = p;
              gw.x = d;
            } else {
              pw.y = p;
              gw.y = d;
            }
          }
          *(float2*)(s.ss + r * S_STRIDE + key) = pw;
          *(float2*)(s.ds + r * S_STRIDE + key) = gw;
        }
      }
    }
#else
    {
      const bool live0 = r0 < rows_valid && (mask >> (r0 / c.hc) & 1u) && s.row_m[r0] != qsa_neg_inf();
      const bool live1 =
          r0 + 1 < rows_valid && (mask >> ((r0 + 1) / c.hc) & 1u) && s.row_m[r0 + 1] != qsa_neg_inf();
      float sc[2][4], dp[2][4];
      if (live0 || live1) {
        staged_dot_tile<E>(s.qs, ks, r0, kq, sc);
        staged_dot_tile<E>(s.dos, vs, r0, kq, dp);
      }
#pragma unroll
      for (int a = 0; a < 2; ++a) {
        const int r = r0 + a;
        const bool live = a == 0 ? live0 : live1;
        const long long q_pos = (long long)kv_len - q_len + c.tile * c.qt + r / c.hc;
        const float L = s.row_m[r], D = s.row_l[r];
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          const int key = kq + 16 * m;
          const bool vis = live && base + key <= q_pos;
          const float p = vis ? expf(sc[a][m] * scale - L) : 0.f;
          s.ss[r * S_STRIDE + key] = p;
          s.ds[r * S_STRIDE + key] = vis ? p * (dp[a][m] - D) : 0.f;
        }
      }
    }
#endif
    QSA_SYNC();
#if defined(QSA_ATTN_MMA)
    // dQ += dS K (scale at the end); dV = P^T dO and dK = scale dS^T q for the warp's keys,
    // reduced over the CTA's rows in the mma, then one atomic per element.
    tc_ds_k<E>(s.ds, ks, dw, nkeys, lane, dqa);
    if (kv_grads && kw < nkeys) {
      unsigned live = 0;
      for (int r = 0; r < rows_valid; ++r) live |= ((mask >> (r / c.hc)) & 1u) << r;
      TcKeyFrags f;
      tc_load_key_frags(s.ss, s.ds, kw, lane, f);
      const long long elem0 = (((long long)c.b * kv_len + base) * hkv + c.g) * ATT_D;
      const int key_limit = kv_len - base < nkeys ? (int)(kv_len - base) : nkeys;
      for (int d = 0; d < ATT_D; d += 8) {
        float cv[4] = {0.f, 0.f, 0.f, 0.f}, ck[4] = {0.f, 0.f, 0.f, 0.f};
        tc_key_tile<E>(f, s.dos, s.qs, live, d, lane, cv, ck);
        tc_key_tile_atomics(dv, dk, elem0, (long long)hkv * ATT_D, kw, key_limit, d, lane, cv, ck, scale);
      }
    }
#else
    // dQ += dS K (scale at the end).
    {
      const bool live = (r0 < rows_valid && (mask >> (r0 / c.hc) & 1u)) ||
                        (r0 + 1 < rows_valid && (mask >> ((r0 + 1) / c.hc) & 1u));
      if (live) staged_pv_tile<E>(s.ds, ks, r0, d0, nkeys, dqa);
    }
    // dV[c][d] = sum_r P[r][c] dO[r][d], dK[c][d] = scale sum_r dS[r][c] q[r][d]: reduced over
    // the CTA's rows here, then one atomic per element. Thread: keys kg*4..+3, dims d0..d0+7.
    for (int pass = 0; pass < 2 * kv_grads; ++pass) {
      const int kg = pass * 8 + tid / 16;
      if (kg * 4 >= nkeys) continue;
      float av[4][8], ak[4][8];
#pragma unroll
      for (int u = 0; u < 4; ++u)
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          av[u][e] = 0.f;
          ak[u][e] = 0.f;
        }
      for (int r = 0; r < rows_valid; ++r) {
        if (!(mask >> (r / c.hc) & 1u)) continue;
        const float4 p = *(const float4*)(s.ss + r * S_STRIDE + kg * 4);
        const float4 g = *(const float4*)(s.ds + r * S_STRIDE + kg * 4);
        const float4 o0 = *(const float4*)(s.dos + r * Q_STRIDE + d0);
        const float4 o1 = *(const float4*)(s.dos + r * Q_STRIDE + d0 + 4);
        const float4 q0 = *(const float4*)(s.qs + r * Q_STRIDE + d0);
        const float4 q1 = *(const float4*)(s.qs + r * Q_STRIDE + d0 + 4);
        const float pp[4] = {p.x, p.y, p.z, p.w}, gg[4] = {g.x, g.y, g.z, g.w};
        const float oo[8] = {o0.x, o0.y, o0.z, o0.w, o1.x, o1.y, o1.z, o1.w};
        const float qq[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
#pragma unroll
        for (int u = 0; u < 4; ++u)
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            av[u][e] += pp[u] * oo[e];
            ak[u][e] += gg[u] * qq[e];
          }
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const long long j = base + kg * 4 + u;
        if (kg * 4 + u >= nkeys || j >= kv_len) continue;
        const long long off = (((long long)c.b * kv_len + j) * hkv + c.g) * ATT_D + d0;
#if defined(QSA_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        // Hopper has vector f32 reductions: a quarter of the atomic instructions.
        atomicAdd((float4*)(dv + off), make_float4(av[u][0], av[u][1], av[u][2], av[u][3]));
        atomicAdd((float4*)(dv + off + 4), make_float4(av[u][4], av[u][5], av[u][6], av[u][7]));
        atomicAdd((float4*)(dk + off),
                  make_float4(ak[u][0] * scale, ak[u][1] * scale, ak[u][2] * scale, ak[u][3] * scale));
        atomicAdd((float4*)(dk + off + 4),
                  make_float4(ak[u][4] * scale, ak[u][5] * scale, ak[u][6] * scale, ak[u][7] * scale));
#else
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          atomicAdd(dv + off + e, av[u][e]);
          atomicAdd(dk + off + e, ak[u][e] * scale);
        }
#endif
      }
    }
#endif
    QSA_SYNC();  // the buffer, P and dS are rewritten next iteration
    if (nbuf != 2 && it + 1 < n) staged_issue(s.kv, k, v, c.b, c.g, s.uid[it + 1], kv_len, hkv);
  }
  // dq rows are owned by this CTA alone: plain stores.
#if defined(QSA_ATTN_MMA)
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = tg + 8 * h;
    const int tok = r / c.hc, hh = r % c.hc;
    const int i = c.tile * c.qt + tok;
    if (r >= rows_valid || i >= q_len) continue;
    const long long row = ((long long)c.b * q_len + i) * hq + c.g * group + c.chunk * c.hc + hh;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 w = make_float2(dqa[j][2 * h] * scale, dqa[j][2 * h + 1] * scale);
      *(float2*)(dq + row * ATT_D + dw + 8 * j + 2 * tt) = w;
    }
  }
#else
#pragma unroll
  for (int a = 0; a < 2; ++a) {
    const int r = r0 + a;
    const int tok = r / c.hc, hh = r % c.hc;
    const int i = c.tile * c.qt + tok;
    if (r >= rows_valid || i >= q_len) continue;
    const long long row = ((long long)c.b * q_len + i) * hq + c.g * group + c.chunk * c.hc + hh;
#pragma unroll
    for (int e = 0; e < 8; ++e) dq[row * ATT_D + d0 + e] = dqa[a][e] * scale;
  }
#endif
}

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
// not measurements: H200.md has the runs that measure them.
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
// 16-byte pieces of one tile row: q (128 x 2 B) then dO (128 x 4 B).
#define KVB_Q_PIECES (ATT_D * 2 / 16)
#define KVB_ROW_PIECES (KVB_Q_PIECES + ATT_D * 4 / 16)

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

QSA_DEVICE KvCta kv_cta(int batch, int hkv) {
  const long long x = blockIdx.x;
  const long long heads = (long long)batch * hkv;
  KvCta c;
  c.id = (int)(x / heads);
  c.g = (int)(x % hkv);
  c.b = (int)(x % heads / hkv);
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
};

QSA_DEVICE KvSmem kv_smem(unsigned char* base) {
  KvSmem s;
  s.kv = (u16*)base;
  s.qr0 = s.kv + 2 * ATT_BLK * KV_STRIDE;
  s.dos0 = (float*)(s.qr0 + 2 * KVB_QR_ELEMS);
  s.ps = s.dos0 + 2 * KVB_DO_ELEMS;
  s.dps = s.ps + ATT_ROWS * S_STRIDE;
  s.rows0 = s.dps + ATT_ROWS * S_STRIDE;
  s.toks = (int*)(s.rows0 + 2 * KVB_ROW_ELEMS);
  s.wave_hits = s.toks + KVB_CHUNK;
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

// The tokens i0 .. i0 + KVB_CHUNK - 1 (< q_len) whose list of kv head g holds `id`, compacted
// in order into s.toks; returns their count (the same in every thread).
QSA_DEVICE int kv_collect(const KvSmem& s, const int* ids, const KvCta& c, long long i0, int q_len, int hkv,
                          int t) {
  const long long i = i0 + threadIdx.x;
  bool hit = false;
  if (i < q_len) {
    const int* list = ids + (((long long)c.b * q_len + i) * hkv + c.g) * t;
    for (int u = 0; u < t; ++u) hit |= list[u] == c.id;
  }
  const qsa_lanemask_t m = qsa_ballot(hit);
  const int wave = threadIdx.x / QSA_WAVE;
  if (qsa_lane() == 0) s.wave_hits[wave] = (int)qsa_popc_mask(m);
  QSA_SYNC();
  int before = 0, total = 0;
  for (int w = 0; w < KVB_THREADS / QSA_WAVE; ++w) {
    before += w < wave ? s.wave_hits[w] : 0;
    total += s.wave_hits[w];
  }
  if (hit) s.toks[before + (int)qsa_popc_mask(m & qsa_lanes_below())] = (int)i;
  QSA_SYNC();
  return total;
}

// The chunk's tiles: tile n covers head chunk n / per_chunk and the kept tokens
// t0 = (n % per_chunk) qt .. t0 + ntok - 1. Row r = tok * hc + hh.
struct KvTiles {
  int found, per_chunk, count;
  int group, hc, qt, q_len, hq;
  long long shift;  // q_pos = shift + i
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
  for (int e = threadIdx.x; e < ATT_ROWS * KVB_ROW_PIECES; e += KVB_THREADS) {
    const int r = e / KVB_ROW_PIECES, piece = e % KVB_ROW_PIECES, tok = r / tl.hc;
    const bool valid = tok < ntok;
    const long long row = valid ? ((long long)c.b * tl.q_len + s.toks[t0 + tok]) * tl.hq + head0 + r % tl.hc : 0;
    if (piece < KVB_Q_PIECES)
      qsa_copy16(kv_qr(s, buf) + r * KV_STRIDE + piece * 8, q + row * ATT_D + piece * 8, valid);
    else
      qsa_copy16((u16*)(kv_dos(s, buf) + r * Q_STRIDE + (piece - KVB_Q_PIECES) * 4),
                 (const u16*)(d_o + row * ATT_D + (piece - KVB_Q_PIECES) * 4), valid);
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
      pos = (int)(tl.shift + i);
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

template <typename E, bool DQ>
QSA_DEVICE void kv_bwd(const u16* __restrict__ q, const u16* __restrict__ k, const u16* __restrict__ v,
                       const int* __restrict__ ids, const float* __restrict__ lse, const float* __restrict__ drow,
                       const float* __restrict__ d_o, float* __restrict__ dk, float* __restrict__ dv,
                       float* __restrict__ dq, int batch, int q_len, int kv_len, int hq, int hkv, int t, float scale,
                       int hc, int qt) {
  QSA_DYNAMIC_SHARED(smem_raw);
  const KvCta c = kv_cta(batch, hkv);
  const long long base = (long long)c.id * ATT_BLK;
  const int keys = kv_len - base < ATT_BLK ? (int)(kv_len - base) : ATT_BLK;  // of the block, < kv_len
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, tg = lane / 4, tt = lane % 4;
  const int kw = 16 * (warp % 4), dbase = 64 * (warp / 4);
  const KvSmem s = kv_smem(smem_raw);
  KvTiles tl;
  tl.group = hq / hkv;
  tl.hc = hc;
  tl.qt = qt;
  tl.q_len = q_len;
  tl.hq = hq;
  tl.shift = (long long)kv_len - q_len;
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
  const long long first = base - tl.shift > 0 ? base - tl.shift : 0;  // the first token that sees key base
  for (long long i0 = first; i0 < q_len; i0 += KVB_CHUNK) {
    // kv_collect's barriers also retire the previous chunk's last tile (buffers, P, dP).
    tl.found = kv_collect(s, ids, c, i0, q_len, hkv, t);
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
      {  // P (warps 0-3) or raw dP (warps 4-7) for keys kw .. kw + 15
        float sc[2][4];
        if (warp < 4) kv_qk<E>(kv_qr(s, buf), ks, kw, lane, sc);
        else tc_dot_split<E, 3>(kv_dos(s, buf), vs, kw, lane, sc);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = tg + 8 * h;
          const float L = kv_row_lse(s, buf)[r];
          const long long pos = kv_row_pos(s, buf)[r];
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
            *(float2*)((warp < 4 ? s.ps : s.dps) + r * S_STRIDE + key) = make_float2(w[0], w[1]);
          }
        }
      }
      // Tile n + 1's lse / D, loaded during the S / dP math (buffer buf ^ 1 was last read by
      // tile n - 1); published here rather than after the key tiles, where registers are short.
      if (ahead) kv_publish_rows(s, buf ^ 1, next);
      QSA_SYNC();  // P and dP of tile n
      if (kw < keys) {
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
      if (DQ) kv_dq_tile<E>(s, buf, c, tl, n, keys, warp, lane, dq, scale);
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
#endif  // QSA_ATTN_MMA

// Merge split partials: one CTA of ATT_D threads per (b, i, h) row.
// qsa:block 128
QSA_KERNEL void __launch_bounds__(ATT_D) qsa_attn_combine(const float* __restrict__ o_part,
                                                          const float* __restrict__ lse_part,
                                                          float* __restrict__ o, float* __restrict__ lse,
                                                          long long rows, int nsplit) {
  const long long row = blockIdx.x;
  if (row >= rows) return;
  const int d = threadIdx.x;
  float mx = qsa_neg_inf();
  for (int sp = 0; sp < nsplit; ++sp) mx = fmaxf(mx, lse_part[sp * rows + row]);
  if (mx == qsa_neg_inf()) {
    o[row * ATT_D + d] = 0.f;
    if (d == 0) lse[row] = qsa_neg_inf();
    return;
  }
  float sum = 0.f, acc = 0.f;
  for (int sp = 0; sp < nsplit; ++sp) {
    const float w = expf(lse_part[sp * rows + row] - mx);  // -inf partial: w = 0
    sum += w;
    acc += w * o_part[(sp * rows + row) * ATT_D + d];
  }
  o[row * ATT_D + d] = acc / sum;
  if (d == 0) lse[row] = mx + logf(sum);
}

// D = rowsum(dO O) per (b, i, h) row for the fused KV-block-major backward (QSA_ATTN_BWD=kvdq),
// which has no query-side pass to compute it: one wave per row, rows of 128 f32.
// qsa:block 256
QSA_KERNEL void __launch_bounds__(256) qsa_attn_bwd_delta(const float* __restrict__ o,
                                                          const float* __restrict__ d_o,
                                                          float* __restrict__ drow, long long rows) {
  const long long row = (long long)blockIdx.x * (256 / QSA_WAVE) + threadIdx.x / QSA_WAVE;
  if (row >= rows) return;
  float sum = 0.f;
  for (int d = qsa_lane(); d < ATT_D; d += QSA_WAVE) sum += d_o[row * ATT_D + d] * o[row * ATT_D + d];
  sum = qsa_wave_sum(sum);
  if (qsa_lane() == 0) drow[row] = sum;
}

#include "common/attention_ring_fwd.h"

// Launch shapes for the resource report (xtask/src/build/annotations.rs). The staged
// kernels' dynamic shared memory is the single-buffered size at t = 16 ids per list, what
// src/dispatch/attention.rs::staged_plan picks for the matrix's cases on every target.
// qsa:block 256 for qsa_attn_gather_fwd_bf16
// qsa:block 256 for qsa_attn_gather_fwd_f16
// qsa:block 256 for qsa_attn_gather_bwd_bf16
// qsa:block 256 for qsa_attn_gather_bwd_f16
// qsa:block 128 for qsa_attn_staged_fwd_bf16
// qsa:block 128 for qsa_attn_staged_fwd_f16
// qsa:block 128 for qsa_attn_staged_bwd_bf16
// qsa:block 128 for qsa_attn_staged_bwd_f16
// qsa:dynamic_shared 48080 for qsa_attn_staged_fwd_bf16
// qsa:dynamic_shared 48080 for qsa_attn_staged_fwd_f16
// qsa:block 128 for qsa_attn_ring_fwd_bf16
// qsa:block 128 for qsa_attn_ring_fwd_f16
// qsa:dynamic_shared 69904 for qsa_attn_ring_fwd_bf16
// qsa:dynamic_shared 69904 for qsa_attn_ring_fwd_f16
// qsa:block 128 for qsa_attn_ring_qs_fwd_bf16
// qsa:block 128 for qsa_attn_ring_qs_fwd_f16
// qsa:dynamic_shared 56848 for qsa_attn_ring_qs_fwd_bf16
// qsa:dynamic_shared 56848 for qsa_attn_ring_qs_fwd_f16
// qsa:block 128 for qsa_attn_ring_sw_fwd_bf16
// qsa:block 128 for qsa_attn_ring_sw_fwd_f16
// qsa:dynamic_shared 65808 for qsa_attn_ring_sw_fwd_bf16
// qsa:dynamic_shared 65808 for qsa_attn_ring_sw_fwd_f16
// qsa:dynamic_shared 60880 for qsa_attn_staged_bwd_bf16
// qsa:dynamic_shared 60880 for qsa_attn_staged_bwd_f16
// qsa_attn_kv_bwd_bf16, qsa_attn_kv_bwd_f16, qsa_attn_kv_dq_bwd_bf16 and qsa_attn_kv_dq_bwd_f16
// exist in sm_80+ CUDA builds only (QSA_ATTN_MMA).
// qsa:block 256 for qsa_attn_kv_bwd_bf16
// qsa:block 256 for qsa_attn_kv_bwd_f16
// qsa:dynamic_shared 70560 for qsa_attn_kv_bwd_bf16
// qsa:dynamic_shared 70560 for qsa_attn_kv_bwd_f16
// qsa:block 256 for qsa_attn_kv_dq_bwd_bf16
// qsa:block 256 for qsa_attn_kv_dq_bwd_f16
// qsa:dynamic_shared 70560 for qsa_attn_kv_dq_bwd_bf16
// qsa:dynamic_shared 70560 for qsa_attn_kv_dq_bwd_f16
#define QSA_ATTN_INSTANCES(SUF, E)                                                                      \
  QSA_KERNEL void __launch_bounds__(256)                                                                \
      qsa_attn_gather_fwd_##SUF(const u16* q, const u16* k, const u16* v, const int* ids, float* o,   \
                                float* lse, int batch, int q_len, int kv_len, int hq, int hkv, int t,  \
                                float scale) {                                                         \
    gather_fwd<E>(q, k, v, ids, o, lse, batch, q_len, kv_len, hq, hkv, t, scale);                    \
  }                                                                                                    \
  QSA_KERNEL void __launch_bounds__(256)                                                                \
      qsa_attn_gather_bwd_##SUF(const u16* q, const u16* k, const u16* v, const int* ids,             \
                                const float* o, const float* lse, const float* d_o, float* dq,         \
                                float* dk, float* dv, int batch, int q_len, int kv_len, int hq,        \
                                int hkv, int t, float scale) {                                         \
    gather_bwd<E>(q, k, v, ids, o, lse, d_o, dq, dk, dv, batch, q_len, kv_len, hq, hkv, t, scale);   \
  }                                                                                                    \
  QSA_KERNEL void __launch_bounds__(ATT_THREADS)                                                        \
      qsa_attn_staged_fwd_##SUF(const u16* q, const u16* k, const u16* v, const int* ids, float* o,   \
                                float* lse, int batch, int q_len, int kv_len, int hq, int hkv, int t,  \
                                float scale, int hc, int qt, int nbuf) {                               \
    staged_fwd<E>(q, k, v, ids, o, lse, batch, q_len, kv_len, hq, hkv, t, scale, hc, qt, nbuf);      \
  }                                                                                                    \
  QSA_KERNEL void __launch_bounds__(ATT_THREADS)                                                        \
      qsa_attn_staged_bwd_##SUF(const u16* q, const u16* k, const u16* v, const int* ids,             \
                                const float* o, const float* lse, const float* d_o, float* dq,         \
                                float* dk, float* dv, float* drow, int batch, int q_len, int kv_len,   \
                                int hq, int hkv, int t, float scale, int hc, int qt, int nbuf,         \
                                int kv_grads) {                                                        \
    staged_bwd<E>(q, k, v, ids, o, lse, d_o, dq, dk, dv, drow, batch, q_len, kv_len, hq, hkv, t, scale, \
                  hc, qt, nbuf, kv_grads);                                                             \
  }
#define QSA_ATTN_KV_INSTANCE(SUF, E)                                                                    \
  QSA_KERNEL void KVB_BOUNDS                                                                            \
      qsa_attn_kv_bwd_##SUF(const u16* q, const u16* k, const u16* v, const int* ids, const float* lse, \
                            const float* drow, const float* d_o, float* dk, float* dv, int batch,       \
                            int q_len, int kv_len, int hq, int hkv, int t, float scale, int hc, int qt) { \
    kv_bwd<E, false>(q, k, v, ids, lse, drow, d_o, dk, dv, nullptr, batch, q_len, kv_len, hq, hkv, t, scale, \
                     hc, qt);                                                                           \
  }                                                                                                    \
  QSA_KERNEL void KVB_BOUNDS                                                                            \
      qsa_attn_kv_dq_bwd_##SUF(const u16* q, const u16* k, const u16* v, const int* ids, const float* lse, \
                               const float* drow, const float* d_o, float* dk, float* dv, float* dq,    \
                               int batch, int q_len, int kv_len, int hq, int hkv, int t, float scale,   \
                               int hc, int qt) {                                                        \
    kv_bwd<E, true>(q, k, v, ids, lse, drow, d_o, dk, dv, dq, batch, q_len, kv_len, hq, hkv, t, scale, hc, \
                    qt);                                                                                \
  }

QSA_ATTN_INSTANCES(bf16, Bf16)
QSA_ATTN_INSTANCES(f16, F16)
#if defined(QSA_ATTN_MMA)
QSA_ATTN_KV_INSTANCE(bf16, Bf16)
QSA_ATTN_KV_INSTANCE(f16, F16)
#endif
// qsa_attn_ring_fwd_bf16, qsa_attn_ring_fwd_f16, (q in shared memory, four CTAs per SM)
// qsa_attn_ring_qs_fwd_bf16, qsa_attn_ring_qs_fwd_f16 and the swizzled-slot twins of the first
// two, qsa_attn_ring_sw_fwd_bf16, qsa_attn_ring_sw_fwd_f16 (common/attention_ring_fwd.h; sm_90+
// only; the q-in-shared one spilled 16 bytes at 128 registers swizzled, so it is not built)
// exist where the staged kernels run on tensor cores only: sm_80+ CUDA.
#if defined(QSA_ATTN_MMA)
QSA_ATTN_RING_INSTANCE(ring, bf16, Bf16, false, false, RING_MIN_CTAS)
QSA_ATTN_RING_INSTANCE(ring, f16, F16, false, false, RING_MIN_CTAS)
QSA_ATTN_RING_INSTANCE(ring_qs, bf16, Bf16, true, false, RING_QS_MIN_CTAS)
QSA_ATTN_RING_INSTANCE(ring_qs, f16, F16, true, false, RING_QS_MIN_CTAS)
#if __CUDA_ARCH__ >= 900  // sm_86's build of it spilled 8 bytes (cargo xtask build, 2026-12-02)
QSA_ATTN_RING_INSTANCE(ring_sw, bf16, Bf16, false, true, RING_MIN_CTAS)
QSA_ATTN_RING_INSTANCE(ring_sw, f16, F16, false, true, RING_MIN_CTAS)
#endif
#endif

// The decode forward (kernels/common/attention_decode.h), in this family's code object: one
// unit per softmax step, and bf16's two units per step (`_pair_`; f16 has no registers for it).
// Resource report shape: 4 warps x 1 stage, the smallest plan (src/dispatch/attention_decode.rs
// sizes the ring per target; every target's 64 KiB must hold the declared figure).
// qsa:block 128 for qsa_attn_dec_fwd_bf16
// qsa:block 128 for qsa_attn_dec_fwd_f16
// qsa:block 128 for qsa_attn_dec_fwd_pair_bf16
// qsa:dynamic_shared 34816 for qsa_attn_dec_fwd_bf16
// qsa:dynamic_shared 34816 for qsa_attn_dec_fwd_f16
// qsa:dynamic_shared 34816 for qsa_attn_dec_fwd_pair_bf16
#include "common/attention_decode.h"
QSA_ATTN_DECODE_INSTANCE(qsa_attn_dec_fwd_bf16, DecBf16, false)
QSA_ATTN_DECODE_INSTANCE(qsa_attn_dec_fwd_f16, DecF16, false)
QSA_ATTN_DECODE_INSTANCE(qsa_attn_dec_fwd_pair_bf16, DecBf16, true)
// The cluster-merge decode kernels (sm_90; a NaN-writing stand-in elsewhere), same shape.
// qsa:block 128 for qsa_attn_dec_cl_fwd_bf16
// qsa:block 128 for qsa_attn_dec_cl_fwd_f16
// qsa:block 128 for qsa_attn_dec_cl_fwd_pair_bf16
// qsa:dynamic_shared 34816 for qsa_attn_dec_cl_fwd_bf16
// qsa:dynamic_shared 34816 for qsa_attn_dec_cl_fwd_f16
// qsa:dynamic_shared 34816 for qsa_attn_dec_cl_fwd_pair_bf16
QSA_ATTN_DECODE_CLUSTER_INSTANCE(qsa_attn_dec_cl_fwd_bf16, DecBf16, false)
QSA_ATTN_DECODE_CLUSTER_INSTANCE(qsa_attn_dec_cl_fwd_f16, DecF16, false)
QSA_ATTN_DECODE_CLUSTER_INSTANCE(qsa_attn_dec_cl_fwd_pair_bf16, DecBf16, true)
