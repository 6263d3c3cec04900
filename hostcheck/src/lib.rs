//! The pure device helpers of `kernels/common/portable.h`, compiled for the host from that
//! same header (build.rs: g++ with `-DQSA_HOST`), behind safe wrappers. The tests in
//! `tests/` check them against the Rust contract (`qsa::contract`) and independent
//! references, so a changed rule in the kernels' header fails `cargo test` on a machine
//! without a GPU.
//!
//! What is checked, and what cannot be (see README.md next to this crate):
//! - `qsa_order_key` on all 2^32 bit patterns; `qsa_radix_digit`, `qsa_clamp_count`, the
//!   bf16 -> f32 widenings (`qsa_bf16_to_f32`, `qsa_bf16x2_lo` / `_hi`).
//! - Not the tensor-core roundings (tf32, bf16x2, f16x2 `cvt` in inline PTX on CUDA, `__bf16`
//!   casts lowered by the AMDGPU backend) nor the CUDA f16 -> f32 widening (inline asm): a
//!   host version of those would be a re-implementation, not the device's code.

mod ffi {
    extern "C" {
        pub fn qsa_host_order_key(x_bits: u32) -> u32;
        pub fn qsa_host_order_keys(start: u32, n: usize, out: *mut u32);
        pub fn qsa_host_radix_digit(key: u32, shift: i32) -> u32;
        pub fn qsa_host_clamp_count(active: i32, n: i32) -> i32;
        pub fn qsa_host_bf16_to_f32(b: u16) -> u32;
        pub fn qsa_host_bf16x2_lo(w: u32) -> u32;
        pub fn qsa_host_bf16x2_hi(w: u32) -> u32;
    }
}

/// `qsa_order_key` of the f32 with these bits.
pub fn order_key(x_bits: u32) -> u32 {
    // SAFETY: a pure function of its argument (shim/portable_host.cpp).
    unsafe { ffi::qsa_host_order_key(x_bits) }
}

/// `qsa_order_key` of the bit patterns `start`, `start + 1`, ... (wrapping), one per cell
/// of `out`: the exhaustive check's batch, one call per batch.
pub fn order_keys(start: u32, out: &mut [u32]) {
    // SAFETY: writes exactly out.len() cells of a valid, exclusive slice.
    unsafe { ffi::qsa_host_order_keys(start, out.len(), out.as_mut_ptr()) }
}

/// `qsa_radix_digit`: bits [shift, shift + 8) of a key. The kernels pass shift = 24 - 8 * d.
pub fn radix_digit(key: u32, shift: i32) -> u32 {
    assert!(
        (0..=24).contains(&shift),
        "shift {shift} is outside the kernels' 0..=24"
    );
    // SAFETY: a pure function; the shift is in range (a shift past 31 is UB in C++).
    unsafe { ffi::qsa_host_radix_digit(key, shift) }
}

/// `qsa_clamp_count`: a prefill query's active count clamped to [0, n].
pub fn clamp_count(active: i32, n: i32) -> i32 {
    // SAFETY: a pure function of its arguments.
    unsafe { ffi::qsa_host_clamp_count(active, n) }
}

/// `qsa_bf16_to_f32` of a bf16's bits, as the f32's bits.
pub fn bf16_to_f32(b: u16) -> u32 {
    // SAFETY: a pure function of its argument.
    unsafe { ffi::qsa_host_bf16_to_f32(b) }
}

/// `qsa_bf16x2_lo` of a packed pair (the low half, the lower index), as the f32's bits.
pub fn bf16x2_lo(w: u32) -> u32 {
    // SAFETY: a pure function of its argument.
    unsafe { ffi::qsa_host_bf16x2_lo(w) }
}

/// `qsa_bf16x2_hi` of a packed pair (the high half), as the f32's bits.
pub fn bf16x2_hi(w: u32) -> u32 {
    // SAFETY: a pure function of its argument.
    unsafe { ffi::qsa_host_bf16x2_hi(w) }
}
