//! FP64 reference of the indexer block scores, and the forward error bound of an f32 scorer.
//!
//! `S[q,b] = sum_h w[q,h] * relu(Q[q,h,:] . Kb[b,:])`. The products of two f32 values are
//! exact in f64 (24 + 24 significant bits < 53), so the only rounding here is the f64
//! summation: relative to the f32 scorers' error it is negligible, and the bound below still
//! accounts for it.
//!
//! ReLU is `max(x, 0)` with IEEE maxNum semantics, as the kernels' `fmaxf(x, 0.f)`: a NaN dot
//! gives 0; a NaN or infinite weight, or an infinite dot, propagates.

use crate::cpu::par::par_row_pieces;
use crate::problem::{ScoresProblem, HEAD_DIM};

/// The kernels' ReLU: `fmaxf(x, 0)` (NaN -> 0).
fn relu(x: f64) -> f64 {
    x.max(0.0)
}

/// `q . k` in f64 with 8 independent partial sums (so it vectorizes).
fn dot(q: &[f64], k: &[f32]) -> f64 {
    let mut acc = [0.0f64; 8];
    for (qc, kc) in q.chunks_exact(8).zip(k.chunks_exact(8)) {
        for j in 0..8 {
            acc[j] += qc[j] * kc[j] as f64;
        }
    }
    acc.iter().sum()
}

/// `sum |q_d k_d|` in f64 (the magnitude the dot-product error bound scales with).
fn abs_dot(q: &[f64], k: &[f32]) -> f64 {
    let mut acc = [0.0f64; 8];
    for (qc, kc) in q.chunks_exact(8).zip(k.chunks_exact(8)) {
        for j in 0..8 {
            acc[j] += (qc[j] * kc[j] as f64).abs();
        }
    }
    acc.iter().sum()
}

/// Query `q`'s rows of Q as f64, `[heads, HEAD_DIM]`.
fn query_f64(p: &ScoresProblem, q: usize) -> Vec<f64> {
    let n = p.heads * HEAD_DIM;
    p.q[q * n..(q + 1) * n].iter().map(|&x| x as f64).collect()
}

fn kb_row(p: &ScoresProblem, b: usize) -> &[f32] {
    &p.kb[b * HEAD_DIM..(b + 1) * HEAD_DIM]
}

/// `[nq, blocks]` FP64 scores, multi-threaded over queries.
pub fn scores_f64(p: &ScoresProblem) -> Vec<f64> {
    let mut out = vec![0.0; p.nq * p.blocks];
    if p.blocks == 0 {
        return out;
    }
    // Rows in pieces of 4,096 blocks: one decode query's 262,144 blocks use every core.
    par_row_pieces(&mut out, p.blocks, 4096, |q, b0, piece| {
        let qf = query_f64(p, q);
        let w = &p.w[q * p.heads..(q + 1) * p.heads];
        for (i, s) in piece.iter_mut().enumerate() {
            let k = kb_row(p, b0 + i);
            *s = (0..p.heads)
                .map(|h| w[h] as f64 * relu(dot(&qf[h * HEAD_DIM..(h + 1) * HEAD_DIM], k)))
                .sum();
        }
    });
    out
}

/// Higham's `gamma_n = n u / (1 - n u)`.
fn gamma(n: usize, u: f64) -> f64 {
    let nu = n as f64 * u;
    assert!(nu < 1.0, "gamma_{n} undefined for unit roundoff {u}");
    nu / (1.0 - nu)
}

/// Per element `[nq, blocks]`, a bound on `|S_scorer - S_f64|` for a scorer that rounds Q
/// and Kb to a format of unit roundoff `u_in` (0: f32 inputs; 2^-11: TF32; 2^-8: BF16),
/// keeps `w` in f32, and accumulates each 128-term dot and then the head sum in arithmetic of
/// unit roundoff `u_acc` (2^-24 for f32 round-to-nearest; pass 2^-23 for accumulators that
/// truncate), in any summation order, with or without fma.
///
/// The bound (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., eq. (3.5)
/// and Lemma 3.1: for an n-term inner product in any order, `|fl(x.y) - x.y| <= gamma_n
/// sum|x_i y_i|`; it holds with fma too):
/// - input rounding: `|q~k~ - qk| <= ((1+u_in)^2 - 1) |qk|`;
/// - dot of head h: `E_h = [((1+u_in)^2 - 1) + gamma_128(u_acc) (1+u_in)^2] A_h`, with
///   `A_h = sum_d |q_hd k_bd|`;
/// - ReLU is 1-Lipschitz, so the rounded ReLU output `r~_h` is within `E_h` of `r_h`;
/// - head sum of H terms: `sum_h |w_h| E_h + gamma_H(u_acc) sum_h |w_h| (r_h + E_h)`;
/// - plus the FP64 reference's own error, `gamma_{128+H}(2^-53) sum_h |w_h| (A_h + r_h)`,
///   and an underflow allowance of `2^-149` per product (gradual underflow adds exactly).
///
/// Overflow (an infinite or NaN score) gives an infinite or NaN bound: no claim.
pub fn scores_error_bound(p: &ScoresProblem, u_in: f64, u_acc: f64) -> Vec<f64> {
    let grow = (1.0 + u_in) * (1.0 + u_in);
    let dot_rel = (grow - 1.0) + gamma(HEAD_DIM, u_acc) * grow;
    let g_heads = gamma(p.heads, u_acc);
    let g_ref = gamma(HEAD_DIM + p.heads, f64::EPSILON / 2.0);
    let underflow = (p.heads * (HEAD_DIM + 1)) as f64 * f64::powi(2.0, -149);
    let mut out = vec![0.0; p.nq * p.blocks];
    if p.blocks == 0 {
        return out;
    }
    par_row_pieces(&mut out, p.blocks, 4096, |q, b0, piece| {
        let qf = query_f64(p, q);
        let w = &p.w[q * p.heads..(q + 1) * p.heads];
        for (i, e) in piece.iter_mut().enumerate() {
            let k = kb_row(p, b0 + i);
            let mut bound = underflow;
            for (h, &wh) in w.iter().enumerate() {
                let qh = &qf[h * HEAD_DIM..(h + 1) * HEAD_DIM];
                let (a, r, wa) = (abs_dot(qh, k), relu(dot(qh, k)), (wh as f64).abs());
                let e_h = dot_rel * a;
                bound += wa * e_h + g_heads * wa * (r + e_h) + g_ref * wa * (a + r);
            }
            *e = bound;
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rigorous bound of block 0 of `hand()`, term by term from the formula in the
    /// doc comment of `scores_error_bound` (dots: head 0 = 5 with sum|q k| = 5; head 1 =
    /// -2.5 with sum|q k| = 3.5, ReLU 0; w = 0.5, -2.0), so a changed constant, sign or
    /// gamma in the code fails here (cargo mutants found none of those caught before).
    #[test]
    fn the_error_bound_by_hand() {
        let g = |n: f64, u: f64| n * u / (1.0 - n * u);
        for (u_in, u_acc) in [(0.0, 2f64.powi(-24)), (2f64.powi(-11), 2f64.powi(-23))] {
            let grow = (1.0 + u_in) * (1.0 + u_in);
            let dot_rel = (grow - 1.0) + g(128.0, u_acc) * grow;
            let (g_heads, g_ref) = (g(2.0, u_acc), g(130.0, 2f64.powi(-53)));
            let head = |wa: f64, a: f64, r: f64| {
                wa * dot_rel * a + g_heads * wa * (r + dot_rel * a) + g_ref * wa * (a + r)
            };
            let want = 2.0 * 129.0 * 2f64.powi(-149) + head(0.5, 5.0, 5.0) + head(2.0, 3.5, 0.0);
            let got = scores_error_bound(&hand(), u_in, u_acc)[0];
            assert!(
                ((got - want) / want).abs() < 1e-12,
                "scores_error_bound(u_in {u_in:e}, u_acc {u_acc:e}) = {got:e}, by hand {want:e}"
            );
        }
        // Zero queries: nothing but the underflow allowance, 2^-149 per product and sum
        // term (2 heads x (128 + 1)), exactly.
        let mut zero = hand();
        zero.q.iter_mut().for_each(|x| *x = 0.0);
        let got = scores_error_bound(&zero, 0.0, 2f64.powi(-24))[0];
        assert_eq!(
            got,
            2.0 * 129.0 * 2f64.powi(-149),
            "the underflow allowance"
        );
    }

    /// 1 query, 2 heads, 2 blocks; Q and Kb are zero past d = 1, so the dots are by hand.
    fn hand() -> ScoresProblem {
        let mut q = vec![0.0f32; 2 * HEAD_DIM];
        q[0] = 1.0;
        q[1] = 2.0; // head 0: (1, 2)
        q[HEAD_DIM] = -1.0;
        q[HEAD_DIM + 1] = 0.5; // head 1: (-1, 0.5)
        let mut kb = vec![0.0f32; 2 * HEAD_DIM];
        kb[0] = 3.0;
        kb[1] = 1.0; // block 0: (3, 1)
        kb[HEAD_DIM] = -2.0;
        kb[HEAD_DIM + 1] = 4.0; // block 1: (-2, 4)
        ScoresProblem {
            nq: 1,
            heads: 2,
            blocks: 2,
            q,
            kb,
            w: vec![0.5, -2.0],
        }
    }

    #[test]
    fn hand_case() {
        // Block 0: head 0 dot 5, head 1 dot -2.5 -> relu 0: 0.5*5 = 2.5.
        // Block 1: head 0 dot 6, head 1 dot 4: 0.5*6 - 2*4 = -5.
        assert_eq!(scores_f64(&hand()), vec![2.5, -5.0]);
    }

    #[test]
    fn nan_dot_is_zero_nan_weight_propagates() {
        let mut p = hand();
        p.q[HEAD_DIM + 2] = f32::NAN; // head 1's dots are NaN -> relu 0
        assert_eq!(scores_f64(&p), vec![2.5, 3.0]);
        p.w[0] = f32::NAN;
        assert!(scores_f64(&p).iter().all(|s| s.is_nan()));
    }

    /// One query, `heads` heads, one block, from explicit head rows of Q and one Kb row.
    fn one_block(qrows: &[Vec<f32>], kb: Vec<f32>, w: Vec<f32>) -> ScoresProblem {
        ScoresProblem {
            nq: 1,
            heads: qrows.len(),
            blocks: 1,
            q: qrows.concat(),
            kb,
            w,
        }
    }

    const TWO_30: f32 = 1_073_741_824.0;

    /// Dots whose f32 sum loses the answer and whose f64 sum is exact, in any order: each
    /// of 8 leading terms 2^30 absorbs a 1 in f32 (ulp 128 at 2^30), and 8 trailing -2^30
    /// cancel them. Exact dot: 112, the count of ones.
    #[test]
    fn dot_is_exact_where_f32_loses_it() {
        let mut k = vec![1.0f32; HEAD_DIM];
        k[..8].fill(TWO_30);
        k[HEAD_DIM - 8..].fill(-TWO_30);
        let p = one_block(&[vec![1.0; HEAD_DIM]], k, vec![1.0]);
        assert_eq!(
            scores_f64(&p),
            [112.0],
            "scores reference lost the exact dot 112 of [2^30 x8, 1 x112, -2^30 x8]: it does not accumulate the dot in FP64"
        );
    }

    /// Products of two f32 values are exact in f64 (48 significant bits): (1 + 2^-23)
    /// (1 - 2^-23) = 1 - 2^-46, which rounds to 1 in f32.
    #[test]
    fn products_are_not_rounded_to_f32() {
        let mut q = vec![0.0f32; HEAD_DIM];
        let mut k = vec![0.0f32; HEAD_DIM];
        q[5] = f32::from_bits(0x3f80_0001); // 1 + 2^-23
        k[5] = f32::from_bits(0x3f7f_fffe); // 1 - 2^-23
        let p = one_block(&[q], k, vec![1.0]);
        assert_eq!(
            scores_f64(&p),
            [1.0 - f64::powi(2.0, -46)],
            "scores reference rounds the products q*k to f32"
        );
    }

    /// The head sum in f64: relu'd dots 2^30, 1, 2^30 weighted 1, 1, -1 sum to exactly 1;
    /// in f32 the 1 is absorbed and the sum is 0.
    #[test]
    fn head_sum_is_exact_where_f32_loses_it() {
        let head = |dot: f32| {
            let mut q = vec![0.0f32; HEAD_DIM];
            q[0] = dot;
            q
        };
        let mut k = vec![0.0f32; HEAD_DIM];
        k[0] = 1.0;
        let p = one_block(
            &[head(TWO_30), head(1.0), head(TWO_30)],
            k,
            vec![1.0, 1.0, -1.0],
        );
        assert_eq!(
            scores_f64(&p),
            [1.0],
            "scores reference lost the exact head sum 2^30 + 1 - 2^30: it does not sum heads in FP64"
        );
    }

    /// Random integer inputs with heavy cancellation, against exact integer arithmetic.
    /// |q|, |k| < 2^12 and |w| < 2^8 keep every partial sum below 2^42 in magnitude: exact
    /// in f64 in any summation order, far past f32's 24 bits.
    #[test]
    fn integer_inputs_match_exact_arithmetic() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut int = |m: i64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % (2 * m as u64 + 1)) as i64 - m
        };
        let (nq, heads, blocks) = (3, 8, 16);
        let q: Vec<i64> = (0..nq * heads * HEAD_DIM).map(|_| int(4095)).collect();
        let kb: Vec<i64> = (0..blocks * HEAD_DIM).map(|_| int(4095)).collect();
        let w: Vec<i64> = (0..nq * heads).map(|_| int(255)).collect();
        let p = ScoresProblem {
            nq,
            heads,
            blocks,
            q: q.iter().map(|&v| v as f32).collect(),
            kb: kb.iter().map(|&v| v as f32).collect(),
            w: w.iter().map(|&v| v as f32).collect(),
        };
        let got = scores_f64(&p);
        let mut beyond_f32 = 0;
        for qi in 0..nq {
            for b in 0..blocks {
                let exact: i128 = (0..heads)
                    .map(|h| {
                        let row = (qi * heads + h) * HEAD_DIM;
                        let dot: i128 = (0..HEAD_DIM)
                            .map(|d| (q[row + d] * kb[b * HEAD_DIM + d]) as i128)
                            .sum();
                        w[qi * heads + h] as i128 * dot.max(0)
                    })
                    .sum();
                assert_eq!(
                    got[qi * blocks + b],
                    exact as f64,
                    "scores reference [{qi}, {b}] is not the exact integer score {exact}"
                );
                beyond_f32 += usize::from((exact as f32) as i128 != exact);
            }
        }
        assert!(
            beyond_f32 > 0,
            "the inputs must need more than f32's precision"
        );
    }

    #[test]
    fn bound_by_hand() {
        let p = hand();
        let e = scores_error_bound(&p, 0.0, f64::powi(2.0, -24));
        // Block 0: A = (|1*3| + |2*1|, |-1*3| + |0.5*1|) = (5, 3.5), r = (5, 0): the leading
        // term is gamma_128 (0.5*5 + 2*3.5) + gamma_2 (0.5*5).
        let g128 = gamma(128, f64::powi(2.0, -24));
        let lead = g128 * 9.5 + gamma(2, f64::powi(2.0, -24)) * 2.5;
        assert!(e[0] >= lead && e[0] < lead * 1.01, "{} vs {lead}", e[0]);
        // Coarser inputs give a larger bound.
        assert!(scores_error_bound(&p, f64::powi(2.0, -8), f64::powi(2.0, -24))[0] > e[0] * 10.0);
    }
}
