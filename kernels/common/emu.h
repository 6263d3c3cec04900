// qsa SIMT emulator, device side: the CUDA / HIP API the kernels use, for a host build.
//
// portable.h includes this when QSA_EMU is defined (src/emu/compile.rs builds each kernel
// source with g++ or clang++ into a shared library per vendor and wave width). The runtime
// (fibers, barriers, block scheduling, launches) is kernels/common/emu_runtime.h.
//
// Model (HIP-CPU's): one OS thread runs one block at a time; the block's threads are
// fibers switched at every sync point (__syncthreads, and each wave collective: shuffles,
// ballots, any/all, __syncwarp). `__shared__` is thread_local storage, so the fibers of the
// block running on an OS thread share it and blocks on other OS threads do not. Between two
// sync points a fiber runs alone: the order the scheduler runs fibers in (forward, reverse,
// seeded random) is the only freedom, which is what the race check varies. The blocks of a
// thread-block cluster (sm_90+) take turns on one OS thread, swapping their shared memory in
// and out of TLS at each cluster barrier (emu_cluster.h).
//
// Build definitions: QSA_EMU_WAVE (32 | 64), QSA_EMU_HIP (AMD targets: 64-bit lane masks,
// the HIP spellings) or neither (NVIDIA), QSA_EMU_CUDA_ARCH (e.g. 900, NVIDIA only).
#pragma once
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>

// The runtime's standard headers (emu_runtime.h), here before the macros below exist.
#include <math.h>
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#if !defined(QSA_EMU_WAVE) || (QSA_EMU_WAVE != 32 && QSA_EMU_WAVE != 64)
#error "QSA_EMU_WAVE must be 32 or 64 (src/emu/compile.rs passes it)"
#endif
#define QSA_WAVE QSA_EMU_WAVE

#if defined(QSA_EMU_HIP)
#define QSA_HIP 1
typedef unsigned long long qsa_lanemask_t;  // HIP's __ballot is 64-bit on every wave width
#define QSA_FULL_MASK (~0ull)
#else
#define QSA_CUDA 1
#if QSA_EMU_WAVE != 32
#error "NVIDIA warps are 32 wide: QSA_EMU_WAVE=64 needs QSA_EMU_HIP"
#endif
#if defined(QSA_EMU_CUDA_ARCH)
#define __CUDA_ARCH__ QSA_EMU_CUDA_ARCH
#endif
typedef unsigned int qsa_lanemask_t;
#define QSA_FULL_MASK 0xffffffffu
#endif

// Keywords of the device languages.
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ thread_local
#define __align__(n) __attribute__((aligned(n)))
// The dynamic shared array (defined by the module's generated wrapper, src/emu/compile.rs).
// Declared __thread, not thread_local: g++ calls a block-scope `extern thread_local`'s
// dynamic-initialisation function unguarded in a template (tc_body of block_scores.cu),
// and that function is an absent weak symbol, so the call jumps to address 0. __thread
// variables have no dynamic initialisation, hence no such call.
#define QSA_DYNAMIC_SHARED(name) extern __thread __align__(16) unsigned char name[]

namespace qsa_emu {

struct Dim3 {
  unsigned x, y, z;
};

// Wave collectives. The scheduler (emu_runtime.h) computes the result of a collective once
// every live lane of the wave has arrived at it.
enum Op : int { OP_SHFL, OP_SHFL_XOR, OP_SHFL_UP, OP_SHFL_DOWN, OP_BALLOT, OP_ANY, OP_ALL, OP_SYNCWARP, OP_EXCHANGE };

// The generic collective of the matrix instructions (emu_mma.h): every lane of the wave posts
// a pointer to its operands and results; once all have arrived, the scheduler calls the
// operation once with the lanes' pointers in lane order (lanes[0 .. QSA_WAVE)). It returns
// false with a message in `err` on misuse. Lanes waiting at different operations diverge.
typedef bool (*ExchangeFn)(void* const* lanes, std::string& err);

// AtClusterBarrier: at qsa_cluster_sync (emu_cluster.h), which waits for every thread of
// every block of the cluster.
// AtNamedBarrier: at qsa_bar_sync (emu_blocks.h), waiting for a named barrier's count.
// AtMbarrier: at qsa_mbar_wait (emu_mbarrier.h), until the mbarrier's phase completes.
enum class State : uint8_t { Ready, AtBarrier, AtCollective, AtClusterBarrier, AtNamedBarrier, AtMbarrier, Done };

// One GPU thread: a fiber with its indices and its slot for the collective it waits at.
struct Thread {
  Dim3 idx;
  unsigned linear, lane, wave;
  State state;
  int op, arg, width;
  uint64_t value, result;
  ExchangeFn exchange;  // OP_EXCHANGE: the operation and this lane's posted data
  void* exchange_data;
  unsigned named;  // AtNamedBarrier: the barrier's id
  unsigned passes;  // barrier waits begun (__syncthreads, qsa_bar_sync): emu_blocks.h's balance check
  void* mbar;       // AtMbarrier: the mbarrier and the phase parity waited for
  unsigned parity;
  ucontext_t ctx;
  void* sp;  // saved stack pointer of the fast context switch (emu_runtime.h)
};

struct BlockState {
  Dim3 idx, dim, grid;
};

// Static, not inline: an inline thread_local is a GNU "unique" symbol, which the loader would
// share between the emulated modules of different wave widths loaded in one process.
static thread_local Thread* cur_thread = nullptr;
static thread_local BlockState cur_block;
static thread_local ucontext_t* sched_ctx = nullptr;
// The module's TLS anchor: __shared__ variables are found at fixed offsets from it.
static thread_local unsigned char tls_anchor = 0;

// The switch from a fiber to its scheduler (emu_runtime.h).
inline void switch_to_scheduler(Thread* t);

// Clusters (emu_cluster.h's primitives, emu_blocks.h's run_cluster): this block's rank in
// its cluster, and the address of shared variable `p` in the block of rank `rank`.
inline unsigned cluster_rank();
inline const void* cluster_map(const void* p, unsigned rank);

// Leave the fiber until the scheduler resumes it.
inline void yield_to_scheduler(State s) {
  Thread* t = cur_thread;
  t->state = s;
  switch_to_scheduler(t);
}

inline uint64_t collective(int op, uint64_t value, int arg, int width) {
  Thread* t = cur_thread;
  t->op = op;
  t->value = value;
  t->arg = arg;
  t->width = width;
  yield_to_scheduler(State::AtCollective);
  return t->result;
}

template <class T> inline T shfl(T v, int arg, int width, int op) {
  static_assert(sizeof(T) <= 8, "shuffles move at most 64 bits");
  uint64_t bits = 0;
  memcpy(&bits, &v, sizeof v);
  bits = collective(op, bits, arg, width);
  T r;
  memcpy(&r, &bits, sizeof r);
  return r;
}

// Post `data` and wait until the wave's operation `fn` has run over every lane's data.
inline void exchange(ExchangeFn fn, void* data) {
  Thread* t = cur_thread;
  t->exchange = fn;
  t->exchange_data = data;
  collective(OP_EXCHANGE, 0, 0, QSA_WAVE);
}

inline uint64_t ballot(bool p) { return collective(OP_BALLOT, p, 0, QSA_WAVE); }

}  // namespace qsa_emu

#define threadIdx (qsa_emu::cur_thread->idx)
#define blockIdx (qsa_emu::cur_block.idx)
#define blockDim (qsa_emu::cur_block.dim)
#define gridDim (qsa_emu::cur_block.grid)

// portable.h's primitives.
#define qsa_shfl_xor(v, m) qsa_emu::shfl((v), (m), QSA_WAVE, qsa_emu::OP_SHFL_XOR)
#define qsa_shfl_down(v, d) qsa_emu::shfl((v), (d), QSA_WAVE, qsa_emu::OP_SHFL_DOWN)
#define qsa_shfl(v, src) qsa_emu::shfl((v), (src), QSA_WAVE, qsa_emu::OP_SHFL)
#define qsa_ballot(p) ((qsa_lanemask_t)qsa_emu::ballot(p))
#define qsa_popc_mask(m) __builtin_popcountll((unsigned long long)(m))
#define QSA_SYNCWARP() ((void)qsa_emu::collective(qsa_emu::OP_SYNCWARP, 0, 0, QSA_WAVE))

// The vendors' spellings, for kernels that use them directly.
inline void __syncthreads() {
  ++qsa_emu::cur_thread->passes;
  qsa_emu::yield_to_scheduler(qsa_emu::State::AtBarrier);
}
// Named barriers (mma.h's bar.sync / bar.arrive wrappers): defined in emu_blocks.h, which
// holds the block's barrier state.
inline void qsa_bar_sync(unsigned id, unsigned count);
inline void qsa_bar_arrive(unsigned id, unsigned count);
// The emulator's named barriers take arrivals from any instruction: aligned or not alike.
inline void qsa_bar_sync_unaligned(unsigned id, unsigned count) { qsa_bar_sync(id, count); }
template <class T> inline T __shfl_up_sync(unsigned long long, T v, int d, int w = QSA_WAVE) {
  return qsa_emu::shfl(v, d, w, qsa_emu::OP_SHFL_UP);
}
template <class T> inline T __shfl_down_sync(unsigned long long, T v, int d, int w = QSA_WAVE) {
  return qsa_emu::shfl(v, d, w, qsa_emu::OP_SHFL_DOWN);
}
template <class T> inline T __shfl_xor_sync(unsigned long long, T v, int m, int w = QSA_WAVE) {
  return qsa_emu::shfl(v, m, w, qsa_emu::OP_SHFL_XOR);
}
template <class T> inline T __shfl_sync(unsigned long long, T v, int s, int w = QSA_WAVE) {
  return qsa_emu::shfl(v, s, w, qsa_emu::OP_SHFL);
}
inline int __any_sync(unsigned long long, int p) { return (int)qsa_emu::collective(qsa_emu::OP_ANY, p != 0, 0, QSA_WAVE); }
inline int __all_sync(unsigned long long, int p) { return (int)qsa_emu::collective(qsa_emu::OP_ALL, p != 0, 0, QSA_WAVE); }

inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline unsigned __float_as_uint(float f) {
  unsigned u;
  memcpy(&u, &f, 4);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
inline int __float_as_int(float f) { return (int)__float_as_uint(f); }
inline float __int_as_float(int i) { return __uint_as_float((unsigned)i); }

// CUDA's integer min / max overloads (mixed signedness compares as unsigned, as CUDA does).
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline unsigned min(int a, unsigned b) { return min((unsigned)a, b); }
inline unsigned min(unsigned a, int b) { return min(a, (unsigned)b); }
inline unsigned max(int a, unsigned b) { return max((unsigned)a, b); }
inline unsigned max(unsigned a, int b) { return max(a, (unsigned)b); }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return __builtin_fminf(a, b); }
inline float max(float a, float b) { return __builtin_fmaxf(a, b); }

// Atomics: shared memory is private to one OS thread and fibers never preempt each other,
// but global memory is shared by the OS threads running other blocks, so every atomic is a
// real one. They return the old value, as CUDA's do.
template <class T> inline T atomicAdd(T* p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }
inline float atomicAdd(float* p, float v) {
  unsigned* u = (unsigned*)p;
  unsigned old = __atomic_load_n(u, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(u, &old, __float_as_uint(__uint_as_float(old) + v), true, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED)) {
  }
  return __uint_as_float(old);
}
template <class T> inline T atomicSub(T* p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_RELAXED); }
template <class T> inline T atomicOr(T* p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_RELAXED); }
template <class T> inline T atomicAnd(T* p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_RELAXED); }
template <class T> inline T atomicXor(T* p, T v) { return __atomic_fetch_xor(p, v, __ATOMIC_RELAXED); }
template <class T> inline T atomicExch(T* p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_RELAXED); }
template <class T> inline T atomicMin(T* p, T v) {
  T old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (v < old && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  return old;
}
template <class T> inline T atomicMax(T* p, T v) {
  T old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (v > old && !__atomic_compare_exchange_n(p, &old, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  return old;
}
template <class T> inline T atomicCAS(T* p, T expected, T desired) {
  __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
  return expected;
}

// Fences and loads that bypass L1 (what another block wrote): the host's memory is coherent,
// so they are C++ fences and relaxed atomic loads.
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
template <class T> inline T __ldcg(const T* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
#define __HIP_MEMORY_SCOPE_WORKGROUP 2
#define __HIP_MEMORY_SCOPE_AGENT 3
#define __HIP_MEMORY_SCOPE_SYSTEM 4
#define __hip_atomic_load(p, order, scope) __atomic_load_n((p), (order))
#define __hip_atomic_store(p, v, order, scope) __atomic_store_n((p), (v), (order))
#define __builtin_amdgcn_wave_barrier() QSA_SYNCWARP()

// Built-in vector types (float4, uint4, ...) and their atomics.
#include "emu_vector.h"
// mbarriers and bulk copies (mbarrier.h's host branch).
#include "emu_mbarrier.h"
