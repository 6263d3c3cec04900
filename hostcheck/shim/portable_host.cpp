// extern "C" wrappers of the pure helpers of kernels/common/portable.h, compiled for the host
// by hostcheck/build.rs with g++ and -DQSA_HOST: the same text the device compilers read.
// f32 results cross the boundary as bits, so NaN payloads and the sign of zero survive.
#include "../../kernels/common/portable.h"

#if !defined(QSA_HOST)
#error "build.rs compiles this file with -DQSA_HOST"
#endif

extern "C" {

uint32_t qsa_host_order_key(uint32_t x_bits) { return qsa_order_key(__uint_as_float(x_bits)); }

// Keys of the n bit patterns start, start + 1, ... (wrapping) into out. The loop inlines the
// helper, so the exhaustive check pays no call per input.
void qsa_host_order_keys(uint32_t start, size_t n, uint32_t* out) {
  for (size_t i = 0; i < n; ++i) out[i] = qsa_order_key(__uint_as_float(start + (uint32_t)i));
}

uint32_t qsa_host_radix_digit(uint32_t key, int shift) { return qsa_radix_digit(key, shift); }

int qsa_host_clamp_count(int active, int n) { return qsa_clamp_count(active, n); }

uint32_t qsa_host_bf16_to_f32(uint16_t b) { return __float_as_uint(qsa_bf16_to_f32(b)); }
uint32_t qsa_host_bf16x2_lo(uint32_t w) { return __float_as_uint(qsa_bf16x2_lo(w)); }
uint32_t qsa_host_bf16x2_hi(uint32_t w) { return __float_as_uint(qsa_bf16x2_hi(w)); }

}  // extern "C"
