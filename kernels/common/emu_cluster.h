// qsa SIMT emulator: thread-block clusters (cluster.h's primitives for the host build of an
// sm_90+ target). cluster.h includes this under QSA_EMU when __CUDA_ARCH__ >= 900.
//
// Model (emu_blocks.h `run_cluster`): the blocks of one cluster take turns on one OS thread.
// A block runs until every one of its live threads waits at qsa_cluster_sync (or has exited);
// then its shared memory is saved to the cluster's per-block copy and the next block's is put
// back in the thread-local storage where its `__shared__` variables live. Once every block
// waits, the barrier is released. qsa_cluster_map(p, r) of another block therefore reads
// that block's copy: exactly what it held when it last reached the barrier, which is what a
// kernel that synchronises correctly may read. The order the blocks take turns in follows the
// launch's schedule (forward, reverse, seeded random), so a remote read that the barriers do
// not order gives schedule-dependent results and the race check names the kernel.
#pragma once

#define QSA_HAS_CLUSTERS 1

// The cluster size of a kernel reaches the runtime through the module's registry: when
// src/emu/compile.rs preprocesses a source to list its kernels it defines
// QSA_EMU_SCAN_CLUSTERS, so `extern "C" QSA_CLUSTER_DIMS(8) void k(` reads
// `extern "C" qsa_emu_cluster_dims(8) void k(` there; in the build itself the attribute is
// empty.
#if defined(QSA_EMU_SCAN_CLUSTERS)
#define QSA_CLUSTER_DIMS(x) qsa_emu_cluster_dims(x)
#else
#define QSA_CLUSTER_DIMS(x)
#endif

QSA_DEVICE unsigned qsa_cluster_rank() { return qsa_emu::cluster_rank(); }
QSA_DEVICE void qsa_cluster_sync() { qsa_emu::yield_to_scheduler(qsa_emu::State::AtClusterBarrier); }
// The emulator orders every memory access: relaxed is the same barrier.
QSA_DEVICE void qsa_cluster_sync_relaxed() { qsa_cluster_sync(); }
template <class T> QSA_DEVICE const T* qsa_cluster_map(const T* p, unsigned rank) {
  return static_cast<const T*>(qsa_emu::cluster_map(p, rank));
}
// A remote store lands in the other block's saved copy, which that block loads when it next
// runs: visible to it after the next barrier, as on the card.
template <class T> QSA_DEVICE T* qsa_cluster_map_store(T* p, unsigned rank) {
  return const_cast<T*>(static_cast<const T*>(qsa_emu::cluster_map(p, rank)));
}
// The split barrier: the arrival is a no-op and the wait a whole barrier, which orders at least
// what the card's does (every block has started; nothing written between the two halves is
// promised to anyone).
QSA_DEVICE void qsa_cluster_arrive_relaxed() {}
QSA_DEVICE void qsa_cluster_wait() { qsa_cluster_sync(); }
