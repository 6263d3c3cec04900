// Test kernels of the SIMT emulator (tests/emu_primitives.rs): each exercises one primitive
// of kernels/common/portable.h / emu.h so that its result can be checked against the
// documented CUDA / HIP semantics on wave 32 and wave 64.
#include "common/portable.h"

// Indices: one int4-like record per thread.
QSA_KERNEL void emu_indices(int* out) {
  const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  int* o = out + 8 * (b * blockDim.x * blockDim.y * blockDim.z + t);
  o[0] = threadIdx.x; o[1] = threadIdx.y; o[2] = threadIdx.z;
  o[3] = blockIdx.x; o[4] = blockIdx.y; o[5] = blockIdx.z;
  o[6] = blockDim.x * blockDim.y * blockDim.z;
  o[7] = gridDim.x * gridDim.y * gridDim.z;
}

// Shuffles: value of thread t is 1000 + t; out[mode * n + t] for mode shfl, xor, up, down.
QSA_KERNEL void emu_shuffles(int* out, int arg, int width) {
  const int n = blockDim.x, t = threadIdx.x, v = 1000 + t;
  out[0 * n + t] = __shfl_sync(QSA_FULL_MASK, v, arg, width);
  out[1 * n + t] = __shfl_xor_sync(QSA_FULL_MASK, v, arg, width);
  out[2 * n + t] = __shfl_up_sync(QSA_FULL_MASK, v, (unsigned)arg, width);
  out[3 * n + t] = __shfl_down_sync(QSA_FULL_MASK, v, (unsigned)arg, width);
}

// portable.h's full-wave forms and helpers: shfl of a float and a 64-bit value, the wave
// sum, lane and lanes-below.
QSA_KERNEL void emu_wave_helpers(float* f, unsigned long long* u, int* sum, int* lane, unsigned long long* below) {
  const unsigned t = threadIdx.x;
  f[t] = qsa_shfl(0.5f + (float)t, (int)(t + 1) % QSA_WAVE);
  u[t] = qsa_shfl_down(((unsigned long long)t << 40) | t, 1);
  sum[t] = qsa_wave_sum((int)t);
  lane[t] = (int)qsa_lane();
  below[t] = (unsigned long long)qsa_lanes_below();
}

// Ballot, any, all of pred[t].
QSA_KERNEL void emu_votes(const int* pred, unsigned long long* ballot, int* any, int* all, int* popc) {
  const unsigned t = threadIdx.x;
  const qsa_lanemask_t m = qsa_ballot(pred[t] != 0);
  ballot[t] = (unsigned long long)m;
  popc[t] = qsa_popc_mask(m);
  any[t] = __any_sync(QSA_FULL_MASK, pred[t]);
  all[t] = __all_sync(QSA_FULL_MASK, pred[t]);
}

// Atomics under contention: every thread of every block hits the same few words, in global
// memory directly and through a shared-memory total per block.
QSA_KERNEL void emu_atomics(unsigned* g, float* gf) {
  __shared__ unsigned s_sum;
  __shared__ int s_min;
  const unsigned t = threadIdx.x, id = blockIdx.x * blockDim.x + t;
  if (t == 0) {
    s_sum = 0;
    s_min = 1 << 30;
  }
  __syncthreads();
  atomicAdd(&s_sum, id);
  atomicMin(&s_min, (int)(id * 7 % 1009));
  atomicAdd(&g[0], 1u);
  atomicMax(&g[1], id);
  atomicMin(&g[2], id + 5);
  atomicOr(&g[3], 1u << (id % 32));
  unsigned old = g[4], seen;
  do {  // a CAS loop: an increment that must not lose updates
    seen = old;
    old = atomicCAS(&g[4], seen, seen + 2);
  } while (old != seen);
  atomicAdd(&gf[0], 0.5f);
  __syncthreads();
  if (t == 0) {
    atomicAdd(&g[5], s_sum);
    atomicMin((int*)&g[6], s_min);
  }
}

// A barrier: thread t reads what thread t + 1 wrote before it.
QSA_KERNEL void emu_barrier(int* out) {
  __shared__ int s[1024];
  const unsigned t = threadIdx.x;
  s[t] = 3 * (int)t + 1;
  __syncthreads();
  out[blockIdx.x * blockDim.x + t] = s[(t + 1) % blockDim.x];
}

// The planted race: emu_barrier without its barrier. The race check must fail it.
QSA_KERNEL void emu_missing_barrier(int* out) {
  __shared__ int s[1024];
  const unsigned t = threadIdx.x;
  s[t] = 3 * (int)t + 1;
  out[blockIdx.x * blockDim.x + t] = s[(t + 1) % blockDim.x];
}

// Dynamic shared memory: `n` floats, written and read back reversed.
QSA_KERNEL void emu_dynamic(float* out, int n) {
  QSA_DYNAMIC_SHARED(dyn_raw);
  float* d = (float*)dyn_raw;
  for (int i = threadIdx.x; i < n; i += blockDim.x) d[i] = (float)i;
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = d[n - 1 - i];
}

// Static shared memory of 48 KiB (for the limit check against a smaller target).
QSA_KERNEL void emu_big_static(int* out) {
  __shared__ int s[12 * 1024];
  s[threadIdx.x] = 1;
  __syncthreads();
  out[threadIdx.x] = s[(threadIdx.x + 1) % blockDim.x];
}

// A deadlock: lanes below 16 wait at a shuffle, the others at a barrier.
QSA_KERNEL void emu_divergent(int* out) {
  int v = (int)threadIdx.x;
  if (qsa_lane() < 16) v = qsa_shfl_xor(v, 1);
  else __syncthreads();
  out[threadIdx.x] = v;
}

// A shuffle from a lane that has exited.
QSA_KERNEL void emu_exited_lane(int* out) {
  if (qsa_lane() == 0) return;
  out[threadIdx.x] = qsa_shfl((int)threadIdx.x, 0);
}

// __shared__ in a device function (not a kernel body): 1 KiB the emulator cannot attribute
// to one kernel, so it counts it for every kernel of the module.
QSA_DEVICE int emu_helper_shared(int v) {
  __shared__ int h[256];
  h[threadIdx.x % 256] = v;
  __syncthreads();
  return h[(threadIdx.x + 1) % 256];
}

QSA_KERNEL void emu_helper_user(int* out) { out[threadIdx.x] = emu_helper_shared((int)threadIdx.x); }
