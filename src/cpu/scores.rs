//! CPU block scores in f32, in the summation orders of the GPU kernels, so that a kernel's
//! output can be compared with its CPU twin bit for bit (and with FP64 within the bound).
//!
//! - "warp" (the warp kernel, wave 32): lane `l` holds `fmaf` of the products for
//!   `d = 4l .. 4l+3` in order, starting from 0; then a butterfly `v += shfl_xor(v, off)` for
//!   `off = 16, 8, 4, 2, 1` (every lane ends with the same value: f32 addition commutes).
//! - "simt" (the FP32 tiled kernel): each dot accumulated sequentially over `d = 0 .. 127`
//!   with `fmaf` from 0.
//!
//! Both: `r = fmaxf(dot, 0)`, then `acc = fmaf(w[h], r, acc)` over `h = 0 .. heads-1` from 0.
//! `f32::mul_add` is a fused multiply-add (one rounding), as `fmaf` is on the GPU.

use super::par::par_chunks_mut;
use crate::problem::{ScoresProblem, HEAD_DIM};

/// The summation order of one scorer kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScoreOrder {
    Warp,
    Simt,
}

impl ScoreOrder {
    /// The kernel name this order reproduces (as `dispatch::scores::ScoresKernel::name`).
    pub fn name(self) -> &'static str {
        match self {
            ScoreOrder::Warp => "warp",
            ScoreOrder::Simt => "simt",
        }
    }
}

/// The warp kernel's dot: 32 lanes of 4 sequential fmas, then the xor butterfly.
#[inline(always)]
fn dot_warp(q: &[f32], k: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 32];
    for (l, v) in lanes.iter_mut().enumerate() {
        for d in 4 * l..4 * l + 4 {
            *v = q[d].mul_add(k[d], *v);
        }
    }
    // After `v += shfl_xor(v, off)`, lanes l and l^off agree, so the lower half carries it.
    let mut width = 32;
    while width > 1 {
        width /= 2;
        for l in 0..width {
            lanes[l] += lanes[l + width];
        }
    }
    lanes[0]
}

/// The SIMT kernel's dot: sequential fmas over d.
#[inline(always)]
fn dot_simt(q: &[f32], k: &[f32]) -> f32 {
    q.iter()
        .zip(k)
        .fold(0.0f32, |acc, (&a, &b)| a.mul_add(b, acc))
}

/// Query `q`'s scores into `row` (`blocks` entries). Inlined into each caller so the
/// FMA-enabled copy below compiles `mul_add` to the hardware instruction.
#[inline(always)]
fn score_row<F: Fn(&[f32], &[f32]) -> f32>(p: &ScoresProblem, dot: F, q: usize, row: &mut [f32]) {
    let qrows = &p.q[q * p.heads * HEAD_DIM..(q + 1) * p.heads * HEAD_DIM];
    let w = &p.w[q * p.heads..(q + 1) * p.heads];
    for (b, s) in row.iter_mut().enumerate() {
        let k = &p.kb[b * HEAD_DIM..(b + 1) * HEAD_DIM];
        *s = w
            .iter()
            .zip(qrows.chunks_exact(HEAD_DIM))
            .fold(0.0f32, |acc, (&wh, qh)| {
                wh.mul_add(dot(qh, k).max(0.0), acc)
            });
    }
}

/// `score_row` compiled with the FMA instruction set: bit-identical (a fused multiply-add
/// has one rounding either way), about 10x faster than the libm `fmaf` calls of the
/// baseline x86-64 build.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
unsafe fn score_row_fma(p: &ScoresProblem, order: ScoreOrder, q: usize, row: &mut [f32]) {
    match order {
        ScoreOrder::Warp => score_row(p, dot_warp, q, row),
        ScoreOrder::Simt => score_row(p, dot_simt, q, row),
    }
}

/// `[nq, blocks]` f32 scores in `order`, multi-threaded over queries.
pub fn scores_f32(p: &ScoresProblem, order: ScoreOrder) -> Vec<f32> {
    let mut out = vec![0.0f32; p.nq * p.blocks];
    if p.blocks == 0 {
        return out;
    }
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU supports FMA (checked just above).
        par_chunks_mut(&mut out, p.blocks, |q, row| unsafe {
            score_row_fma(p, order, q, row)
        });
        return out;
    }
    par_chunks_mut(&mut out, p.blocks, |q, row| match order {
        ScoreOrder::Warp => score_row(p, dot_warp, q, row),
        ScoreOrder::Simt => score_row(p, dot_simt, q, row),
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::scores::{scores_error_bound, scores_f64};

    struct Rng(u64);
    impl Rng {
        fn unit(&mut self) -> f32 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        }
    }

    fn random(nq: usize, heads: usize, blocks: usize, seed: u64) -> ScoresProblem {
        let mut r = Rng(seed);
        let mut v = |n: usize| (0..n).map(|_| r.unit()).collect::<Vec<f32>>();
        let q = v(nq * heads * HEAD_DIM);
        let kb = v(blocks * HEAD_DIM);
        let w = v(nq * heads);
        ScoresProblem {
            nq,
            heads,
            blocks,
            q,
            kb,
            w,
        }
    }

    #[test]
    fn both_orders_within_the_f32_bound_of_fp64() {
        let p = random(3, 5, 37, 7);
        let want = scores_f64(&p);
        let bound = scores_error_bound(&p, 0.0, f64::powi(2.0, -24));
        for order in [ScoreOrder::Warp, ScoreOrder::Simt] {
            let got = scores_f32(&p, order);
            let mut differs = false;
            for i in 0..want.len() {
                let err = (got[i] as f64 - want[i]).abs();
                assert!(
                    err <= bound[i],
                    "{order:?} [{i}]: err {err} > bound {}",
                    bound[i]
                );
                // Far tighter than the worst case in practice:
                assert!(
                    err <= 1e-5 * (1.0 + want[i].abs()),
                    "{order:?} [{i}]: err {err}"
                );
                differs |= got[i] as f64 != want[i];
            }
            assert!(differs, "f32 rounding should show somewhere");
        }
    }

    #[test]
    fn orders_are_the_kernels_orders() {
        // q = 1, k = [2^24, 1 x 126, -2^24]: the exact dot is 126.
        let mut k = vec![1.0f32; HEAD_DIM];
        k[0] = 16_777_216.0;
        k[HEAD_DIM - 1] = -16_777_216.0;
        let q = vec![1.0f32; HEAD_DIM];
        // SIMT: 2^24 absorbs each +1 (ulp 2, ties to even): 2^24 - 2^24 = 0.
        assert_eq!(dot_simt(&q, &k), 0.0);
        // Warp: lane 0 = 2^24 (its three +1s absorbed), lanes 1..30 = 4, lane 31 = 3 - 2^24;
        // the tree then adds exactly (every partial is an even integer near 2^24 or small):
        // 2^24 + 30*4 + 3 - 2^24 = 123.
        assert_eq!(dot_warp(&q, &k), 123.0);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn fma_build_is_bit_identical() {
        if !std::is_x86_feature_detected!("fma") {
            return; // nothing to compare on this CPU
        }
        let p = random(2, 7, 19, 3);
        for order in [ScoreOrder::Warp, ScoreOrder::Simt] {
            for q in 0..p.nq {
                let (mut a, mut b) = (vec![0.0f32; p.blocks], vec![0.0f32; p.blocks]);
                // SAFETY: FMA support checked above.
                unsafe { score_row_fma(&p, order, q, &mut a) };
                match order {
                    ScoreOrder::Warp => score_row(&p, dot_warp, q, &mut b),
                    ScoreOrder::Simt => score_row(&p, dot_simt, q, &mut b),
                }
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&a), bits(&b), "{order:?} query {q}");
            }
        }
    }
}
