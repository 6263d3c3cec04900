// NSA selection attention: the gather kernels (one wave per (b, i, h)), the error baseline.
// Included by kernels/selection_attention.cu (which defines ATT_*, u16, Bf16 / F16 before it);
// split out of it to keep each file readable.

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
