// Test kernels of the emulated thread-block clusters (tests/emu_cluster.rs): blocks that
// exchange values through qsa_cluster_map after qsa_cluster_sync, and misuses the emulator
// must name. Built for sm_90 (kernels/common/cluster.h's primitives exist from there on).
#include "common/portable.h"

#if defined(QSA_HAS_CLUSTERS)
#define EMU_CLUSTER 4

// Round 1: thread t of block b (b = blockIdx.x + gridDim.x * blockIdx.y) holds
// 1000 (b + 1) + t; each thread folds the values of thread (t + r) % n of every rank r of its
// cluster, sum = 7 sum + value, rank 0 first. Round 2: each block holds -sum and reads its
// next rank's. out[3 (b n + t) ..] = rank, sum, next. A map that reads the own block, or a
// barrier that does not wait for the other blocks, changes sum or next.
QSA_KERNEL QSA_CLUSTER_DIMS(EMU_CLUSTER) void emu_cluster_exchange(int* out) {
  __shared__ int v[1024];
  const unsigned n = blockDim.x, t = threadIdx.x, rank = qsa_cluster_rank();
  const unsigned b = blockIdx.x + gridDim.x * blockIdx.y;
  v[t] = (int)(1000 * (b + 1) + t);
  qsa_cluster_sync();
  int sum = 0;
  for (unsigned r = 0; r < EMU_CLUSTER; ++r) sum = 7 * sum + *qsa_cluster_map(&v[(t + r) % n], r);
  qsa_cluster_sync();  // every block has read round 1 before any overwrites it
  v[t] = -sum;
  qsa_cluster_sync();
  const int next = *qsa_cluster_map(&v[t], (rank + 1) % EMU_CLUSTER);
  int* o = out + 3 * (b * n + t);
  o[0] = (int)rank;
  o[1] = sum;
  o[2] = next;
  qsa_cluster_sync();  // no block exits while its neighbour may still read it
}

// A race the barriers do not order: each block reads its next rank's value and then
// overwrites its own with no cluster barrier between the two, so what a block reads depends
// on whether its neighbour already ran past the read.
QSA_KERNEL QSA_CLUSTER_DIMS(EMU_CLUSTER) void emu_cluster_race(int* out) {
  __shared__ int v[1024];
  const unsigned t = threadIdx.x, rank = qsa_cluster_rank();
  v[t] = (int)rank + 1;
  qsa_cluster_sync();
  const int seen = *qsa_cluster_map(&v[t], (rank + 1) % EMU_CLUSTER);
  v[t] = 100;
  out[(blockIdx.x + gridDim.x * blockIdx.y) * blockDim.x + t] = seen;
  qsa_cluster_sync();
}

// Rank 0 exits right after the barrier; the others then read its shared memory with no
// further barrier. cluster.h asks kernels not to do this, and the emulator keeps an exited
// block's shared memory readable until its cluster ends, so the read gets rank 0's value.
QSA_KERNEL QSA_CLUSTER_DIMS(EMU_CLUSTER) void emu_cluster_read_after_exit(int* out) {
  __shared__ int v[1024];
  const unsigned t = threadIdx.x, rank = qsa_cluster_rank();
  v[t] = (int)(blockIdx.x * 100 + t);
  qsa_cluster_sync();
  if (rank == 0) return;
  out[blockIdx.x * blockDim.x + t] = *qsa_cluster_map(&v[t], 0);
}

// Thread 0 waits at __syncthreads while the others wait at the cluster barrier.
QSA_KERNEL QSA_CLUSTER_DIMS(EMU_CLUSTER) void emu_cluster_divergent(int* out) {
  if (threadIdx.x == 0) {
    __syncthreads();
  } else {
    qsa_cluster_sync();
  }
  out[threadIdx.x] = 1;
}

// Threads past the first wave exit; the first wave waits at the cluster barrier.
QSA_KERNEL QSA_CLUSTER_DIMS(EMU_CLUSTER) void emu_cluster_threads_exit(int* out) {
  if (threadIdx.x >= QSA_WAVE) return;
  qsa_cluster_sync();
  out[threadIdx.x] = 1;
}

// Block of rank 1 exits; the others wait at the cluster barrier for it.
QSA_KERNEL QSA_CLUSTER_DIMS(EMU_CLUSTER) void emu_cluster_block_exits(int* out) {
  if (qsa_cluster_rank() == 1) return;
  qsa_cluster_sync();
  out[threadIdx.x] = 1;
}
#endif
