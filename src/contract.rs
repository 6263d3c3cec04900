//! The selection-order contract, the same for every top-k kernel, the CPU backend and the
//! FP64 references (DESIGN.md, "Selection order is a contract").
//!
//! - key = a monotone unsigned integer of the score, after mapping -0.0 to +0.0 and every NaN
//!   (any sign, any payload) to key 0, below -inf;
//! - larger key first; equal keys by lower index;
//! - output ids ascending, cells past the selected count hold -1.
//!
//! `order_key` is bit-identical to `qsa_order_key` in kernels/common/portable.h.

use std::cmp::Ordering;

/// The 32-bit order key of an f32 score (bit-identical to `qsa_order_key`).
///
/// Positive floats get the sign bit set (so they sort above every negative), negative floats
/// are bit-inverted (so a larger magnitude gives a smaller key). -inf maps to 0x007f_ffff;
/// NaN takes 0, below it; nothing else maps to 0.
#[inline]
pub fn order_key(x: f32) -> u32 {
    let mut u = x.to_bits();
    if u == 0x8000_0000 {
        u = 0; // -0.0 -> +0.0
    }
    if x.is_nan() {
        return 0;
    }
    if u & 0x8000_0000 != 0 {
        !u
    } else {
        u | 0x8000_0000
    }
}

/// The 64-bit twin of [`order_key`] for FP64 scores (the references' end-to-end selection).
/// -inf maps to 0x000f_ffff_ffff_ffff; NaN takes 0.
pub fn order_key_f64(x: f64) -> u64 {
    const SIGN: u64 = 1 << 63;
    let mut u = x.to_bits();
    if u == SIGN {
        u = 0; // -0.0 -> +0.0
    }
    if x.is_nan() {
        return 0;
    }
    if u & SIGN != 0 {
        !u
    } else {
        u | SIGN
    }
}

/// The contract's total order on (key, index) pairs: `Less` means `a` is selected before `b`
/// (larger key first, then lower index). Generic over the key width (u32 or u64).
pub fn selection_cmp<K: Ord>(a: (K, usize), b: (K, usize)) -> Ordering {
    b.0.cmp(&a.0).then(a.1.cmp(&b.1))
}

/// Turn a query's selected ids (any order, at most `k`, no -1) into the output row:
/// ascending, padded with -1 up to `k`. More than `k` ids is a caller bug: they are truncated
/// after sorting only in release builds (debug builds assert).
pub fn finalize_ids(mut selected: Vec<i32>, k: usize) -> Vec<i32> {
    debug_assert!(
        selected.len() <= k,
        "{} ids selected for k = {k}",
        selected.len()
    );
    selected.sort_unstable();
    selected.truncate(k);
    selected.resize(k, -1);
    selected
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_signs_tie() {
        assert_eq!(order_key(-0.0), order_key(0.0));
        assert_eq!(order_key(0.0), 0x8000_0000);
        assert_eq!(order_key_f64(-0.0), order_key_f64(0.0));
    }

    #[test]
    fn nan_below_neg_inf_and_inf_on_top() {
        assert_eq!(order_key(f32::NAN), 0);
        assert_eq!(order_key(-f32::NAN), 0);
        assert_eq!(order_key(f32::from_bits(0x7f80_0001)), 0);
        assert_eq!(order_key(f32::from_bits(0xffc0_1234)), 0);
        assert_eq!(order_key(f32::NEG_INFINITY), 0x007f_ffff);
        assert!(order_key(f32::NEG_INFINITY) > order_key(f32::NAN));
        assert_eq!(order_key(f32::INFINITY), 0xff80_0000);
        assert!(order_key(f32::INFINITY) > order_key(f32::MAX));
        assert_eq!(order_key_f64(f64::NAN), 0);
        assert_eq!(order_key_f64(f64::NEG_INFINITY), 0x000f_ffff_ffff_ffff);
        assert!(order_key_f64(f64::INFINITY) > order_key_f64(f64::MAX));
    }

    #[test]
    fn monotone_on_a_ladder() {
        let ladder = [
            f32::NEG_INFINITY,
            -f32::MAX,
            -1.5,
            -1.0,
            -f32::MIN_POSITIVE,
            -f32::from_bits(1), // largest negative subnormal
            0.0,
            f32::from_bits(1),
            f32::MIN_POSITIVE,
            1.0,
            1.5,
            f32::MAX,
            f32::INFINITY,
        ];
        for w in ladder.windows(2) {
            assert!(order_key(w[0]) < order_key(w[1]), "{} vs {}", w[0], w[1]);
            assert!(order_key_f64(w[0] as f64) < order_key_f64(w[1] as f64));
        }
    }

    #[test]
    fn cmp_prefers_larger_key_then_lower_index() {
        assert_eq!(selection_cmp((5u32, 9), (4u32, 0)), Ordering::Less);
        assert_eq!(selection_cmp((4u32, 0), (4u32, 1)), Ordering::Less);
        assert_eq!(selection_cmp((4u32, 1), (4u32, 1)), Ordering::Equal);
    }

    #[test]
    fn finalize_sorts_and_pads() {
        assert_eq!(finalize_ids(vec![7, 2, 5], 5), vec![2, 5, 7, -1, -1]);
        assert_eq!(finalize_ids(vec![], 2), vec![-1, -1]);
        assert_eq!(finalize_ids(vec![1, 0], 2), vec![0, 1]);
    }
}
