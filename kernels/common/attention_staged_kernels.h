// NSA selection attention: staged_fwd and staged_bwd, the staged kernels' bodies.
// Included by kernels/selection_attention.cu (which defines ATT_*, u16, Bf16 / F16 before it);
// split out of it to keep each file readable.

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
