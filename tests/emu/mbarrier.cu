// Probe kernels of the emulated mbarriers and 1-D bulk copies (mbarrier.h; the model is in
// kernels/common/emu_mbarrier.h), for tests/emu_mbarrier.rs. Built for the emulated sm_90.
#include "common/portable.h"
#include "common/mbarrier.h"

#if defined(QSA_WGMMA)
// One warp copies 128 ints from global memory into shared memory with one bulk copy on a
// "full" mbarrier; the block's 128 threads wait on it and copy them out. By `mode`: 0 = as
// written; 1 = the readers skip the wait (the plant: under a lazy schedule they read the
// block's own -7s and the copy is still in flight at exit); 2 = nobody waits and nobody reads (a copy abandoned at exit); 3 =
// the readers wait for the second phase, which never comes (a deadlock, to be named); 4 = the
// producer arrives twice on a count-1 barrier in one phase.
// qsa:block 128
QSA_KERNEL void probe_mbar_copy(const int* src, int* out, int mode) {
  __shared__ __align__(16) int box[128];
  __shared__ __align__(8) unsigned long long full;
  const int tid = threadIdx.x;
  box[tid] = -7;
  if (tid == 0) {
    qsa_mbar_init(&full, 1);
    qsa_fence_mbar_init();
  }
  __syncthreads();
  if (tid == 0) {
    qsa_mbar_arrive_expect_tx(&full, 512);
    qsa_bulk_g2s(box, src, 512, &full);
    if (mode == 4) qsa_mbar_arrive(&full);
  }
  if (mode == 2) return;
  if (mode == 0 || mode == 4) qsa_mbar_wait(&full, 0);
  if (mode == 3) {
    qsa_mbar_wait(&full, 0);
    qsa_mbar_wait(&full, 1);  // the second phase: nobody arrives for it
  }
  out[tid] = box[tid];
}
#endif
