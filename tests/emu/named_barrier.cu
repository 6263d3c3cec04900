// Probe kernels of the emulated named barriers (mma.h's qsa_bar_sync / qsa_bar_arrive; the
// model is in kernels/common/emu_blocks.h), for tests/emu_named_barrier.rs. Built for the
// emulated sm_90 (the wrappers are sm_90a's, QSA_WGMMA).
#include "common/portable.h"

#if defined(QSA_WGMMA)
// A hand-off between two warpgroups of a 256-thread block: warpgroup 1 (the producer) stores
// 128 values into shared memory and arrives at barrier 1; warpgroup 0 (the consumer) waits
// there and copies them out. `skip_sync` (the plant): neither arrives nor waits. out[i] = 1000 + i when the
// consumer read after the producer's stores.
// qsa:block 256
QSA_KERNEL void probe_named_handoff(int* out, int skip_sync) {
  __shared__ int box[128];
  const int tid = threadIdx.x, wg = tid / 128, i = tid % 128;
  if (wg == 1) {
    box[i] = 1000 + i;
    if (!skip_sync) qsa_bar_arrive(1, 256);
  } else {
    if (!skip_sync) qsa_bar_sync(1, 256);
    out[i] = box[i];
  }
}

// Misuse, by `mode`: 1 = warpgroup 0 waits at barrier 2 for 256 threads that never come (a
// deadlock, to be named); 2 = warpgroup 1 arrives at barrier 3 that nobody waits at (an
// arrival pending when the block exits).
// qsa:block 256
QSA_KERNEL void probe_named_misuse(int* out, int mode) {
  const int tid = threadIdx.x, wg = tid / 128;
  if (mode == 1 && wg == 0) qsa_bar_sync(2, 256);
  if (mode == 2 && wg == 1) qsa_bar_arrive(3, 256);
  out[tid] = tid;
}

// Barrier balance (emu_blocks.h's check_balance): warpgroup w syncs `1 + (mode & 1) * w` times
// on its own barrier 1 + w (mode 1 / 3: warpgroup 1 once more than warpgroup 0), then the whole
// block meets at __syncthreads (mode 0 / 1) or at barrier 3 for 256 threads (mode 2 / 3).
// qsa:block 256
QSA_KERNEL void probe_named_balance(int* out, int mode) {
  const int tid = threadIdx.x, wg = tid / 128;
  for (int k = 0; k < 1 + (mode & 1) * wg; ++k) qsa_bar_sync(1 + wg, 128);
  if (mode < 2) __syncthreads();
  else qsa_bar_sync_unaligned(3, 256);
  out[tid] = tid;
}
#endif
