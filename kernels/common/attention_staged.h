// NSA selection attention: the staged kernels' geometry, shared-memory layout, block list,
// copies and FP32 tiles (sm_75 and HIP).
// Included by kernels/selection_attention.cu (which defines ATT_*, u16, Bf16 / F16 before it);
// split out of it to keep each file readable.

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

