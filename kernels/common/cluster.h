// qsa thread-block cluster primitives (NVIDIA sm_90+): the CTAs of a cluster run at the same
// time on one GPC and can read each other's shared memory (distributed shared memory).
// Behind portable names, like mma.h, so the kernels hold no inline asm and the emulator can
// provide the same names (QSA_EMU branch, emu_cluster.h). portable.h includes this at its end.
//
//   QSA_HAS_CLUSTERS             defined where the primitives below exist
//   QSA_CLUSTER_DIMS(x)          kernel attribute: clusters of x CTAs along grid x (compile
//                                time, so a plain launch forms them; x <= 8 is portable)
//   qsa_cluster_rank()           this CTA's rank in its cluster, 0 .. x-1
//   qsa_cluster_sync()           barrier over every thread of every CTA of the cluster;
//                                shared-memory writes before it (release) are visible to
//                                reads after it in any CTA of the cluster (acquire)
//   qsa_cluster_sync_relaxed()   the same barrier without its release / acquire: only for a
//                                barrier whose job is to keep shared memory alive (every remote
//                                read before it has returned its value); the release one costs a
//                                GPU-scope MEMBAR that waits for the thread's global stores
//   qsa_cluster_map(p, rank)     the address of the shared variable at `p` in CTA `rank` of
//                                this cluster (generic pointer, for reads)
//   qsa_cluster_map_store(p, r)  the same, for remote stores (a push: the owner reads the data
//                                after a qsa_cluster_sync that follows the stores)
//   qsa_cluster_arrive_relaxed() / qsa_cluster_wait()   the two halves of a relaxed barrier:
//                                arrive early (e.g. at kernel start), wait later; after the wait
//                                every CTA of the cluster has started, so its shared memory may
//                                be written remotely
//   qsa_globaltimer()            the GPU's nanosecond clock (development probes only)
//
// A CTA must not exit while another CTA of its cluster may still read its shared memory: a
// kernel ends with a qsa_cluster_sync() after its last remote read.
#pragma once

#if defined(QSA_EMU)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#if __has_include("emu_cluster.h")
#include "emu_cluster.h"  // the host's version (clusters of blocks run together)
#endif
#endif
#elif defined(QSA_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define QSA_HAS_CLUSTERS 1
#define QSA_CLUSTER_DIMS(x) __cluster_dims__(x, 1, 1)

QSA_DEVICE unsigned qsa_cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
QSA_DEVICE void qsa_cluster_sync() {
  asm volatile(
      "barrier.cluster.arrive.release.aligned;\n"
      "barrier.cluster.wait.acquire.aligned;\n" ::
          : "memory");
}
QSA_DEVICE void qsa_cluster_sync_relaxed() {
  asm volatile(
      "barrier.cluster.arrive.relaxed.aligned;\n"
      "barrier.cluster.wait.aligned;\n" ::
          : "memory");
}
template <class T> QSA_DEVICE const T* qsa_cluster_map(const T* p, unsigned rank) {
  unsigned long long r;
  asm volatile("mapa.u64 %0, %1, %2;\n" : "=l"(r) : "l"(p), "r"(rank));
  return (const T*)r;
}
template <class T> QSA_DEVICE T* qsa_cluster_map_store(T* p, unsigned rank) {
  unsigned long long r;
  asm volatile("mapa.u64 %0, %1, %2;\n" : "=l"(r) : "l"(p), "r"(rank));
  return (T*)r;
}
QSA_DEVICE void qsa_cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
QSA_DEVICE void qsa_cluster_wait() { asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory"); }
QSA_DEVICE unsigned long long qsa_globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
  return t;
}
#endif
