//! The pure helpers of kernels/common/portable.h (compiled for the host by build.rs) against
//! the Rust contract (`qsa::contract`) and independent references. A failure names the
//! helper, the input bits and both outputs.
//!
//! `cargo test -p qsa-hostcheck` (the package builds at opt-level 3, Cargo.toml): the 2^32
//! order-key check takes seconds (README.md of this crate has the measured times).

use qsa::contract;
use std::fmt::Display;
use std::time::Instant;

/// Inputs where a kernel helper and its reference disagree; `finish` panics with the helper,
/// the reference, how many inputs differ and the first few of them.
struct Disagreements {
    helper: &'static str,
    reference: &'static str,
    checked: u64,
    count: u64,
    first: Vec<String>,
}

impl Disagreements {
    fn new(helper: &'static str, reference: &'static str) -> Self {
        Disagreements {
            helper,
            reference,
            checked: 0,
            count: 0,
            first: Vec::new(),
        }
    }
    /// One input checked; `differs` with its input, the kernel's and the reference's output.
    fn check(&mut self, same: bool, input: impl Display, kernel: impl Display, want: impl Display) {
        self.checked += 1;
        if !same {
            self.add(format!("{input}: kernel {kernel}, reference {want}"));
        }
    }
    fn add(&mut self, line: String) {
        self.count += 1;
        if self.first.len() < 8 {
            self.first.push(line);
        }
    }
    fn merge(&mut self, other: Disagreements) {
        self.checked += other.checked;
        self.count += other.count;
        for l in other.first {
            if self.first.len() < 8 {
                self.first.push(l);
            }
        }
    }
    fn finish(self) {
        assert!(self.checked > 0, "{}: no input was checked", self.helper);
        if self.count > 0 {
            panic!(
                "{} disagrees with {} on {} of {} inputs; first:\n  {}",
                self.helper,
                self.reference,
                self.count,
                self.checked,
                self.first.join("\n  ")
            );
        }
    }
}

/// An f32's bits and what they are, for messages.
fn f32_bits(bits: u32) -> String {
    format!("x = {bits:#010x} ({:e})", f32::from_bits(bits))
}

// ---- qsa_order_key -------------------------------------------------------------------------

// 64 KiB of keys per buffer stays in L2: 7.5 s of CPU for 2^32 inputs, against 9.1 s with
// 2^20 (4 MiB) batches (README.md).
const BATCH: usize = 1 << 14;

const CONTRACT_KEY: &str = "the contract (qsa::contract::order_key)";

/// Every f32 bit pattern through the kernel's key and the contract's, in batches of 2^14
/// (one FFI call each), spread over up to 4 threads.
#[test]
fn order_key_all_bit_patterns() {
    let start = Instant::now();
    let batches = (1u64 << 32) / BATCH as u64;
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(4)) as u64;
    let mut all = Disagreements::new("qsa_order_key", CONTRACT_KEY);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                s.spawn(move || {
                    let mut d = Disagreements::new("qsa_order_key", CONTRACT_KEY);
                    let mut keys = vec![0u32; BATCH];
                    let mut want = vec![0u32; BATCH];
                    for b in (w..batches).step_by(workers as usize) {
                        let base = (b * BATCH as u64) as u32;
                        qsa_hostcheck::order_keys(base, &mut keys);
                        // Two plain loops and a slice compare (vectorised); the per-input
                        // walk runs only for a batch that differs.
                        for (i, c) in want.iter_mut().enumerate() {
                            *c = contract::order_key(f32::from_bits(base + i as u32));
                        }
                        d.checked += BATCH as u64;
                        if keys == want {
                            continue;
                        }
                        for (i, (&k, &c)) in keys.iter().zip(&want).enumerate() {
                            if k != c {
                                d.add(format!(
                                    "{}: kernel {k:#010x}, contract {c:#010x}",
                                    f32_bits(base + i as u32)
                                ));
                            }
                        }
                    }
                    d
                })
            })
            .collect();
        for h in handles {
            all.merge(h.join().expect("a worker panicked"));
        }
    });
    assert_eq!(all.checked, 1u64 << 32, "not every bit pattern was checked");
    eprintln!(
        "qsa_order_key: 2^32 inputs checked in {:.1} s ({workers} threads)",
        start.elapsed().as_secs_f64()
    );
    all.finish();
}

/// The contract's named rules, one message each (the exhaustive test says which inputs
/// differ; these say which rule broke).
#[test]
fn order_key_rules() {
    let key = |x: f32| qsa_hostcheck::order_key(x.to_bits());
    let neg_zero = key(-0.0);
    assert_eq!(
        neg_zero,
        key(0.0),
        "qsa_order_key(-0.0 = 0x80000000) = {neg_zero:#010x}, qsa_order_key(+0.0) = {:#010x}: the contract maps -0.0 to +0.0",
        key(0.0)
    );
    for nan in [0x7fc0_0000u32, 0xffc0_0000, 0x7f80_0001, 0xffff_ffff] {
        let k = qsa_hostcheck::order_key(nan);
        assert!(
            k < key(f32::NEG_INFINITY),
            "qsa_order_key(NaN {nan:#010x}) = {k:#010x} is not below qsa_order_key(-inf) = {:#010x}: the contract puts every NaN below -inf",
            key(f32::NEG_INFINITY)
        );
    }
    for (lo, hi) in [
        (f32::MAX, f32::INFINITY),
        (-1.0, -f32::from_bits(1)),
        (f32::from_bits(1), 1.0),
    ] {
        assert!(
            key(lo) < key(hi),
            "qsa_order_key({lo:e}) = {:#010x} is not below qsa_order_key({hi:e}) = {:#010x}: the key must be monotone",
            key(lo),
            key(hi)
        );
    }
}

// ---- qsa_radix_digit -----------------------------------------------------------------------

/// Digit d (shift = 24 - 8d, as the kernels pass it) is byte d of the key, most significant
/// first: over edge keys and a stride through all of them.
#[test]
fn radix_digit_is_the_keys_byte() {
    let mut d = Disagreements::new(
        "qsa_radix_digit",
        "its reference (byte d of the key, most significant first)",
    );
    let edges = [
        0u32,
        1,
        0xff,
        0x100,
        0x7fff_ffff,
        0x8000_0000,
        0xffff_fffe,
        u32::MAX,
    ];
    for key in edges.into_iter().chain((0..=u32::MAX).step_by(4099)) {
        for digit in 0..4 {
            let shift = 24 - 8 * digit as i32;
            let got = qsa_hostcheck::radix_digit(key, shift);
            let want = u32::from(key.to_be_bytes()[digit]);
            d.check(
                got == want,
                format_args!("key = {key:#010x}, shift = {shift}"),
                format_args!("{got:#04x}"),
                format_args!("{want:#04x}"),
            );
        }
    }
    d.finish();
}

// ---- qsa_clamp_count -----------------------------------------------------------------------

/// A prefill query's count is clamp(active, 0, n) (kernels/topk.cu's contract).
#[test]
fn clamp_count_is_clamp_to_row() {
    let mut d = Disagreements::new("qsa_clamp_count", "its reference (active.clamp(0, n))");
    let rows = [0i32, 1, 2, 7, 256, 4096, 1 << 20, i32::MAX];
    for n in rows {
        let near = |c: i32| (-3..=3).map(move |o: i32| c.saturating_add(o));
        let actives: std::collections::BTreeSet<i32> = [i32::MIN, i32::MAX]
            .into_iter()
            .chain(near(0))
            .chain(near(n))
            .chain(near(n / 2))
            .collect();
        for active in actives {
            let got = qsa_hostcheck::clamp_count(active, n);
            let want = active.clamp(0, n);
            d.check(
                got == want,
                format_args!("active = {active} ({:#010x}), n = {n}", active as u32),
                got,
                want,
            );
        }
    }
    d.finish();
}

// ---- bf16 -> f32 ---------------------------------------------------------------------------

/// Same f32, or both NaN of the same sign: `half` sets the quiet bit of a signalling NaN
/// where the kernels' exact shift keeps it; either way the value is a NaN.
fn same_f32(got: u32, want: u32) -> bool {
    let nan = |b: u32| f32::from_bits(b).is_nan();
    got == want || (nan(got) && nan(want) && (got ^ want) >> 31 == 0)
}

/// The inputs the attention kernels read (`src/problem.rs` widens them with `half` for the
/// references): all 2^16 bf16 values, alone and as either half of a packed pair.
#[test]
fn bf16_widening_matches_half() {
    let mut one = Disagreements::new("qsa_bf16_to_f32", "its reference (half::bf16::to_f32)");
    let mut lo = Disagreements::new(
        "qsa_bf16x2_lo",
        "its reference (half::bf16::to_f32 of the low half)",
    );
    let mut hi = Disagreements::new(
        "qsa_bf16x2_hi",
        "its reference (half::bf16::to_f32 of the high half)",
    );
    let bits = |b: u16| half::bf16::from_bits(b).to_f32().to_bits();
    for b in 0..=u16::MAX {
        let want = bits(b);
        let got = qsa_hostcheck::bf16_to_f32(b);
        one.check(
            same_f32(got, want),
            format_args!("b = {b:#06x}"),
            format_args!("{got:#010x}"),
            format_args!("{want:#010x}"),
        );
        // The other half of the pair must not leak in: 0, all ones, and the same value.
        for other in [0u16, u16::MAX, b] {
            let w_lo = u32::from(other) << 16 | u32::from(b);
            let got = qsa_hostcheck::bf16x2_lo(w_lo);
            lo.check(
                same_f32(got, want),
                format_args!("w = {w_lo:#010x}"),
                format_args!("{got:#010x}"),
                format_args!("{want:#010x}"),
            );
            let w_hi = u32::from(b) << 16 | u32::from(other);
            let got = qsa_hostcheck::bf16x2_hi(w_hi);
            hi.check(
                same_f32(got, want),
                format_args!("w = {w_hi:#010x}"),
                format_args!("{got:#010x}"),
                format_args!("{want:#010x}"),
            );
        }
    }
    one.finish();
    lo.finish();
    hi.finish();
}
