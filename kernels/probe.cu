// qsa probe kernel: a small but real kernel that exercises the primitives the families use
// (shared-memory / LDS atomics, barriers, wave shuffles, the selection-order key), so the
// build pipeline and its resource report have meaningful numbers on every target even before
// the family kernels exist. It is also a cheap smoke test for a runner: the histogram of one
// radix digit of the order keys must sum to n, and the per-block sums are exact for integer
// inputs.
//
// Launch-shape annotations (read by xtask/src/build/annotations.rs; see its doc comment):
//   `// qsa:block N` above a kernel = the block size the host launches it with;
//   `// qsa:dynamic_shared BYTES`   = the dynamic shared memory / LDS it launches with.
#include "common/portable.h"

#define QSA_PROBE_BLOCK 256
#define QSA_PROBE_BINS 256
#define QSA_PROBE_WAVES (QSA_PROBE_BLOCK / QSA_WAVE)

// One 8-bit digit (bits [shift, shift+8)) of the order key of every score, counted into a
// 256-bin histogram: per block in shared memory, then merged into `hist` (256 u32, zeroed by
// the caller). Each block also writes the sum of its scores (non-finite ones skipped) to
// `block_sums[blockIdx.x]`, reduced with wave shuffles and then across waves.
// qsa:block 256
QSA_KERNEL void __launch_bounds__(QSA_PROBE_BLOCK)
    qsa_probe_histogram(const float* __restrict__ scores, unsigned n, unsigned shift,
                        unsigned* __restrict__ hist, float* __restrict__ block_sums) {
  __shared__ unsigned bins[QSA_PROBE_BINS];
  __shared__ float wave_sums[QSA_PROBE_WAVES];

  for (unsigned b = threadIdx.x; b < QSA_PROBE_BINS; b += QSA_PROBE_BLOCK) bins[b] = 0u;
  QSA_SYNC();

  float acc = 0.0f;
  const unsigned stride = gridDim.x * QSA_PROBE_BLOCK;
  for (unsigned i = blockIdx.x * QSA_PROBE_BLOCK + threadIdx.x; i < n; i += stride) {
    const float x = scores[i];
    const unsigned digit = qsa_radix_digit(qsa_order_key(x), (int)shift);
    atomicAdd(&bins[digit], 1u);
    // isfinite, spelled with the key bits so it is the same on both vendors' headers.
    if ((__float_as_uint(x) & 0x7f800000u) != 0x7f800000u) acc += x;
  }

  acc = qsa_wave_sum(acc);
  if (qsa_lane() == 0) wave_sums[threadIdx.x / QSA_WAVE] = acc;
  QSA_SYNC();

  for (unsigned b = threadIdx.x; b < QSA_PROBE_BINS; b += QSA_PROBE_BLOCK) {
    const unsigned c = bins[b];
    if (c != 0u) atomicAdd(&hist[b], c);
  }
  if (threadIdx.x < QSA_WAVE) {
    float s = threadIdx.x < QSA_PROBE_WAVES ? wave_sums[threadIdx.x] : 0.0f;
    s = qsa_wave_sum(s);
    if (threadIdx.x == 0) block_sums[blockIdx.x] = s;
  }
}

// Exclusive prefix sum of the 256-bin histogram with one block: the step a radix select
// takes after counting. Uses the ballot / lanes-below primitives for a per-wave scan of the
// non-empty bins (how the top-k kernels compact candidates), and dynamic shared memory so
// the dynamic-shared annotation has a user. `nonempty` gets the number of non-empty bins.
// qsa:block 256
// qsa:dynamic_shared 1024
QSA_KERNEL void __launch_bounds__(QSA_PROBE_BLOCK)
    qsa_probe_scan(const unsigned* __restrict__ hist, unsigned* __restrict__ offsets,
                   unsigned* __restrict__ nonempty) {
  QSA_DYNAMIC_SHARED(smem);
  unsigned* sums = reinterpret_cast<unsigned*>(smem);  // QSA_PROBE_BINS u32 = 1024 bytes
  __shared__ unsigned wave_tot[QSA_PROBE_WAVES];
  __shared__ unsigned wave_nz[QSA_PROBE_WAVES];

  const unsigned t = threadIdx.x;
  const unsigned c = hist[t];
  // Inclusive scan within the wave (Hillis-Steele over shuffles).
  unsigned v = c;
#pragma unroll
  for (int off = 1; off < QSA_WAVE; off <<= 1) {
    const unsigned u = qsa_shfl(v, (qsa_lane() >= (unsigned)off) ? qsa_lane() - off : qsa_lane());
    if (qsa_lane() >= (unsigned)off) v += u;
  }
  const qsa_lanemask_t nz = qsa_ballot(c != 0u);
  if (qsa_lane() == QSA_WAVE - 1) {
    wave_tot[t / QSA_WAVE] = v;
    wave_nz[t / QSA_WAVE] = (unsigned)qsa_popc_mask(nz);
  }
  sums[t] = v - c;
  QSA_SYNC();

  unsigned base = 0u, nz_total = 0u;
  for (unsigned w = 0; w < QSA_PROBE_WAVES; ++w) {
    if (w < t / QSA_WAVE) base += wave_tot[w];
    nz_total += wave_nz[w];
  }
  offsets[t] = sums[t] + base;
  if (t == 0) *nonempty = nz_total;
}
