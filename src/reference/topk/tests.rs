//! The oracle pinned by hand: every expected id list below was worked out from the written
//! contract (README, "The selection-order contract"), not by running any code.

use super::*;

/// One query over `row`, with padding past n that must never be read.
fn one_row(row: &[f32], k: usize) -> Vec<i32> {
    rows(&[row], k, None)
}

fn rows(rs: &[&[f32]], k: usize, active: Option<Vec<i32>>) -> Vec<i32> {
    let n = rs[0].len();
    let capacity = n + 3;
    let mut scores = vec![f32::INFINITY; rs.len() * capacity];
    for (q, r) in rs.iter().enumerate() {
        scores[q * capacity..q * capacity + n].copy_from_slice(r);
    }
    topk_ids(&TopkProblem {
        nq: rs.len(),
        n,
        capacity,
        k,
        scores,
        active,
    })
}

fn f(bits: u32) -> f32 {
    f32::from_bits(bits)
}

/// Every NaN, whatever its sign, payload or quietness, is one value below -inf: NaNs tie
/// with each other (so the lower index wins) and lose to -inf.
#[test]
fn nans_of_every_payload_and_sign_tie_below_neg_inf() {
    let row = [
        f(0x7fc0_0000),    // 0: +qNaN
        f(0xffc0_0000),    // 1: -qNaN
        f(0x7f80_0001),    // 2: +sNaN, smallest payload
        f(0xffff_ffff),    // 3: -NaN, largest payload
        f32::NEG_INFINITY, // 4
        f(0x7fbf_ffff),    // 5: +sNaN, largest signalling payload
    ];
    assert_eq!(one_row(&row, 1), [4]);
    assert_eq!(one_row(&row, 2), [0, 4]);
    assert_eq!(one_row(&row, 3), [0, 1, 4]);
    assert_eq!(one_row(&row, 5), [0, 1, 2, 3, 4]);
    // Reordered: the NaN picked is always the lowest index, never the "largest" bits.
    let row = [f(0xffff_ffff), f(0x7f80_0001), f(0x7fc0_0000)];
    assert_eq!(one_row(&row, 1), [0]);
    let row = [f(0x7f80_0001), f(0xffff_ffff), f32::NEG_INFINITY];
    assert_eq!(one_row(&row, 2), [0, 2]);
}

#[test]
fn infinities_bound_the_numbers() {
    let row = [
        1.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MAX,
        -f32::MAX,
        f32::NAN,
    ];
    assert_eq!(one_row(&row, 1), [1]);
    assert_eq!(one_row(&row, 2), [1, 3]);
    assert_eq!(one_row(&row, 4), [0, 1, 3, 4]);
    assert_eq!(one_row(&row, 5), [0, 1, 2, 3, 4]);
    // Two +inf tie: lower index.
    assert_eq!(one_row(&[f32::INFINITY, 7.0, f32::INFINITY], 1), [0]);
    assert_eq!(
        one_row(&[f32::NEG_INFINITY, -7.0, f32::NEG_INFINITY], 2),
        [0, 1]
    );
}

/// -0.0 and +0.0 are one value: among zeros only the index decides.
#[test]
fn signed_zeros_are_equal() {
    assert_eq!(one_row(&[-0.0, 0.0], 1), [0]);
    assert_eq!(one_row(&[0.0, -0.0], 1), [0]);
    let row = [-0.0, 0.0, -0.0, 0.0, -f32::from_bits(1), f32::from_bits(1)];
    assert_eq!(one_row(&row, 1), [5]);
    assert_eq!(one_row(&row, 2), [0, 5]);
    assert_eq!(one_row(&row, 3), [0, 1, 5]);
    assert_eq!(one_row(&row, 4), [0, 1, 2, 5]);
    assert_eq!(one_row(&row, 5), [0, 1, 2, 3, 5]);
    // Zeros of both signs straddling the cut, behind three positives.
    let row = [-0.0, 2.0, -0.0, 0.0, 3.0, 0.0, 1.0, -1.0];
    assert_eq!(one_row(&row, 4), [0, 1, 4, 6]);
    assert_eq!(one_row(&row, 5), [0, 1, 2, 4, 6]);
}

/// Denormals are numbers (no flush to zero): the smallest one beats both zeros.
#[test]
fn denormals_are_not_zero() {
    let row = [
        f(0x0000_0001),    // 0: smallest positive denormal
        0.0,               // 1
        f(0x8000_0001),    // 2: largest negative denormal
        f(0x0000_0002),    // 3
        f32::MIN_POSITIVE, // 4: smallest normal
        f(0x007f_ffff),    // 5: largest denormal
        -0.0,              // 6
    ];
    assert_eq!(one_row(&row, 1), [4]);
    assert_eq!(one_row(&row, 2), [4, 5]);
    assert_eq!(one_row(&row, 3), [3, 4, 5]);
    assert_eq!(one_row(&row, 4), [0, 3, 4, 5]);
    assert_eq!(one_row(&row, 5), [0, 1, 3, 4, 5]);
    assert_eq!(one_row(&row, 6), [0, 1, 3, 4, 5, 6]);
}

/// One ulp apart is a different value, in both signs and across the exponent step at 1.0.
#[test]
fn ulp_neighbours_are_ordered() {
    let row = [
        1.0,            // 0
        f(0x3f80_0001), // 1: 1 + 2^-23
        f(0x3f7f_ffff), // 2: 1 - 2^-24
        1.0,            // 3
        -1.0,           // 4
        f(0xbf7f_ffff), // 5: -(1 - 2^-24)
        f(0xbf80_0001), // 6: -(1 + 2^-23)
    ];
    assert_eq!(one_row(&row, 1), [1]);
    assert_eq!(one_row(&row, 2), [0, 1]);
    assert_eq!(one_row(&row, 3), [0, 1, 3]);
    assert_eq!(one_row(&row, 4), [0, 1, 2, 3]);
    assert_eq!(one_row(&row, 5), [0, 1, 2, 3, 5]);
    assert_eq!(one_row(&row, 6), [0, 1, 2, 3, 4, 5]);
}

/// The whole ladder, one rung per k: each step adds exactly the id written next to it.
#[test]
fn full_order_of_every_class() {
    let row = [
        f32::NAN,          // 0
        -0.0,              // 1
        f32::INFINITY,     // 2
        f(0x8000_0001),    // 3: -denormal
        -f32::NAN,         // 4
        f32::NEG_INFINITY, // 5
        0.0,               // 6
        f(0x0000_0001),    // 7: +denormal
        -1.0,              // 8
        1.0,               // 9
    ];
    // Selection order: +inf, 1, +denormal, -0 (index 1 before +0 at 6), +0, -denormal, -1,
    // -inf, NaN (index 0 before -NaN at 4), -NaN.
    let order = [2, 9, 7, 1, 6, 3, 8, 5, 0, 4];
    for k in 0..=order.len() {
        let mut want: Vec<i32> = order[..k].to_vec();
        want.sort_unstable();
        assert_eq!(one_row(&row, k), want, "k = {k}");
    }
}

#[test]
fn k_past_n_pads_and_active_limits() {
    assert_eq!(one_row(&[0.5, 2.0, 1.0], 5), [0, 1, 2, -1, -1]);
    assert_eq!(one_row(&[0.5, 2.0, 1.0], 0), Vec::<i32>::new());
    let r: [&[f32]; 2] = [&[0.5, 2.0, 1.0], &[1.0, 2.0, 3.0]];
    assert_eq!(rows(&r, 2, Some(vec![0, 1])), [-1, -1, 0, -1]);
    assert_eq!(rows(&r, 1, Some(vec![2, 3])), [1, 2]);
    // Negative and past-n active counts clamp.
    assert_eq!(rows(&r, 1, Some(vec![-4, 9])), [-1, 2]);
}

/// The f64 twin: values that differ only past f32's precision, and the same special rules.
#[test]
fn f64_twin() {
    let s = [1.0, f64::NAN, -0.0, 0.0, 1.0 + 1e-12, 1.0];
    assert_eq!(topk_ids_f64(&s, 2, 3, 2, None), [0, 2, 1, 2]);
    assert_eq!(topk_ids_f64(&s, 2, 3, 2, Some(&[1, 2])), [0, -1, 0, 1]);
    let s = [
        -f64::NAN,
        f64::NEG_INFINITY,
        f64::NAN,
        f64::from_bits(1),
        -0.0,
        0.0,
    ];
    assert_eq!(topk_ids_f64(&s, 1, 6, 1, None), [3]);
    assert_eq!(topk_ids_f64(&s, 1, 6, 3, None), [3, 4, 5]);
    assert_eq!(topk_ids_f64(&s, 1, 6, 5, None), [0, 1, 3, 4, 5]);
}
