//! The selection-order contract as the kernels implement it: a bit-level key, the same for
//! every top-k kernel and the CPU backend (DESIGN.md, "Selection order is a contract").
//! The references do NOT use this module: `reference::topk` derives the same order from
//! the written contract independently, so that a broken rule here fails parity.
//!
//! - key = a monotone unsigned integer of the score, after mapping -0.0 to +0.0 and every NaN
//!   (any sign, any payload) to key 0, below -inf;
//! - larger key first; equal keys by lower index;
//! - output ids ascending, cells past the selected count hold -1.
//!
//! `order_key` is bit-identical to `qsa_order_key` in kernels/common/portable.h.

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
        }
    }

    /// Every pair of a ladder of special values: the key must order them as the oracle
    /// (`reference::topk`, written from the README's contract without this module) does.
    #[test]
    fn order_key_agrees_with_the_oracle() {
        use crate::problem::TopkProblem;
        let ladder = [
            f32::NAN,
            -f32::NAN,
            f32::from_bits(0x7f80_0001), // +sNaN
            f32::from_bits(0xffff_ffff), // -NaN, largest payload
            f32::NEG_INFINITY,
            -f32::MAX,
            -1.0,
            f32::from_bits(0xbf7f_ffff), // -(1 - 2^-24)
            -f32::MIN_POSITIVE,
            -f32::from_bits(1),
            -0.0,
            0.0,
            f32::from_bits(1),
            f32::from_bits(0x007f_ffff), // largest denormal
            f32::MIN_POSITIVE,
            1.0,
            f32::from_bits(0x3f80_0001), // 1 + 2^-23
            f32::MAX,
            f32::INFINITY,
        ];
        for &a in &ladder {
            for &b in &ladder {
                // Row [a, b], k = 1: the contract takes index 0 iff key(a) >= key(b).
                let by_key = if order_key(a) >= order_key(b) { 0 } else { 1 };
                let p = TopkProblem {
                    nq: 1,
                    n: 2,
                    capacity: 2,
                    k: 1,
                    scores: vec![a, b],
                    active: None,
                };
                let oracle = crate::reference::topk::topk_ids(&p)[0];
                assert_eq!(
                    by_key,
                    oracle,
                    "order_key disagrees with the written contract (reference::topk) on [{a:?} ({:#010x}), {b:?} ({:#010x})], k = 1: the key selects index {by_key}, the contract index {oracle}",
                    a.to_bits(),
                    b.to_bits()
                );
            }
        }
    }

    #[test]
    fn finalize_sorts_and_pads() {
        assert_eq!(finalize_ids(vec![7, 2, 5], 5), vec![2, 5, 7, -1, -1]);
        assert_eq!(finalize_ids(vec![], 2), vec![-1, -1]);
        assert_eq!(finalize_ids(vec![1, 0], 2), vec![0, 1]);
    }
}
