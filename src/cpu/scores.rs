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

use super::par::{par_chunks_mut, par_row_pieces};
use crate::problem::{ScoresProblem, HEAD_DIM};

/// Blocks scored side by side by the FMA build (`score_tile`): one SIMD lane each.
const LANES: usize = 8;
/// Blocks per work item of the FMA build: rows split into pieces, so that one query (decode:
/// nq = 1, 262,144 blocks) spreads over every core instead of one.
const PIECE: usize = 512 * LANES;

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

/// Query `q`'s rows (`heads` x HEAD_DIM) and head weights.
#[inline(always)]
fn query_of(p: &ScoresProblem, q: usize) -> (&[f32], &[f32]) {
    let rows = &p.q[q * p.heads * HEAD_DIM..(q + 1) * p.heads * HEAD_DIM];
    let w = &p.w[q * p.heads..(q + 1) * p.heads];
    (rows, w)
}

/// Query `q`'s scores into `row` (`blocks` entries). Inlined into each caller so the
/// FMA-enabled copy below compiles `mul_add` to the hardware instruction.
#[inline(always)]
fn score_row<F: Fn(&[f32], &[f32]) -> f32>(p: &ScoresProblem, dot: F, q: usize, row: &mut [f32]) {
    let (qrows, w) = query_of(p, q);
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

/// The scores of blocks `b0 .. b0 + out.len()` (at most `LANES`) of query `q`: `score_row`'s
/// arithmetic, each block in its own lane. Every lane runs exactly the scalar order's
/// operations on its own block (the keys transposed to `[d][lane]` first, so that each step
/// is one vector fma over the lanes), so the results are `score_row`'s bit for bit; lanes
/// past `out.len()` score zero keys and are dropped.
// The lane loops index by `j` on purpose: `for j in 0..LANES` over fixed-size arrays is the
// shape LLVM turns into one vector instruction per step.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
fn score_tile(p: &ScoresProblem, order: ScoreOrder, q: usize, b0: usize, out: &mut [f32]) {
    let mut kt = [[0.0f32; LANES]; HEAD_DIM];
    for (j, k) in p.kb[b0 * HEAD_DIM..(b0 + out.len()) * HEAD_DIM]
        .chunks_exact(HEAD_DIM)
        .enumerate()
    {
        for (d, &x) in k.iter().enumerate() {
            kt[d][j] = x;
        }
    }
    let (qrows, w) = query_of(p, q);
    let mut s = [0.0f32; LANES];
    for (&wh, qh) in w.iter().zip(qrows.chunks_exact(HEAD_DIM)) {
        let dot = match order {
            ScoreOrder::Warp => {
                // dot_warp per lane: 32 partial sums of 4 fmas, then the butterfly's halves.
                let mut part = [[0.0f32; LANES]; 32];
                for (l, v) in part.iter_mut().enumerate() {
                    for d in 4 * l..4 * l + 4 {
                        for j in 0..LANES {
                            v[j] = qh[d].mul_add(kt[d][j], v[j]);
                        }
                    }
                }
                let mut width = 32;
                while width > 1 {
                    width /= 2;
                    for l in 0..width {
                        for j in 0..LANES {
                            part[l][j] += part[l + width][j];
                        }
                    }
                }
                part[0]
            }
            ScoreOrder::Simt => {
                // dot_simt per lane: sequential fmas over d.
                let mut acc = [0.0f32; LANES];
                for (d, &x) in qh.iter().enumerate() {
                    for j in 0..LANES {
                        acc[j] = x.mul_add(kt[d][j], acc[j]);
                    }
                }
                acc
            }
        };
        for j in 0..LANES {
            s[j] = wh.mul_add(dot[j].max(0.0), s[j]);
        }
    }
    out.copy_from_slice(&s[..out.len()]);
}

/// `score_tile` over a piece of a row, compiled with FMA and AVX2: bit-identical to
/// `score_row` (a fused multiply-add has one rounding either way, and the lanes keep the
/// order). The libm `fmaf` calls of the baseline x86-64 build are about 10x slower than the
/// FMA instruction. Lanes and row pieces against the previous FMA build (one block at a time,
/// a thread per query), `qsa run --target cpu --suite bench`, both release builds in one
/// session on the 2-core CI machine, 2026-12-03: scores_prefill_32k auto 452-537 ms -> 87-92
/// ms; scores_decode_1q_262k auto 8.35 s -> 0.12 s (one query used one core before).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma,avx2")]
unsafe fn score_piece_fma(
    p: &ScoresProblem,
    order: ScoreOrder,
    q: usize,
    b0: usize,
    out: &mut [f32],
) {
    for (i, tile) in out.chunks_mut(LANES).enumerate() {
        score_tile(p, order, q, b0 + i * LANES, tile);
    }
}

/// `[nq, blocks]` f32 scores in `order`, multi-threaded over queries (and over pieces of a
/// row in the FMA build).
pub fn scores_f32(p: &ScoresProblem, order: ScoreOrder) -> Vec<f32> {
    let mut out = vec![0.0f32; p.nq * p.blocks];
    if p.blocks == 0 {
        return out;
    }
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("fma") && std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports FMA and AVX2 (checked just above).
        par_row_pieces(&mut out, p.blocks, PIECE, |q, b0, piece| unsafe {
            score_piece_fma(p, order, q, b0, piece)
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

    /// The lane build (`scores_f32` on an FMA + AVX2 CPU) against the scalar definition of
    /// each order (`score_row`), bit for bit: blocks that fill no whole tile (19, 37) and
    /// rows split into several pieces (PIECE + 11), values of every sign and magnitude with
    /// NaN, infinities and signed zeros among them (ReLU's NaN rule and -0 in the lanes).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn lane_build_is_bit_identical_to_the_scalar_order() {
        if !(std::is_x86_feature_detected!("fma") && std::is_x86_feature_detected!("avx2")) {
            eprintln!("SKIPPED: this CPU has no FMA + AVX2, so scores_f32 takes the scalar path");
            return;
        }
        let specials = [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.0,
            0.0,
            3e38,
            -1e-40,
        ];
        for (nq, heads, blocks, seed) in [(2, 7, 19, 3), (1, 3, 37, 5), (2, 2, PIECE + 11, 9)] {
            let mut p = random(nq, heads, blocks, seed);
            for (i, x) in specials.iter().enumerate() {
                let (nk, nq_) = (p.kb.len(), p.q.len());
                p.kb[(i * 131) % nk] = *x;
                p.q[(i * 71 + 5) % nq_] = *x;
            }
            // Large products in one block's dot: orders that differ show.
            p.kb[HEAD_DIM..2 * HEAD_DIM]
                .iter_mut()
                .for_each(|x| *x *= 1e7);
            for order in [ScoreOrder::Warp, ScoreOrder::Simt] {
                let lanes = scores_f32(&p, order);
                for q in 0..p.nq {
                    let mut want = vec![0.0f32; p.blocks];
                    match order {
                        ScoreOrder::Warp => score_row(&p, dot_warp, q, &mut want),
                        ScoreOrder::Simt => score_row(&p, dot_simt, q, &mut want),
                    }
                    let got = &lanes[q * p.blocks..(q + 1) * p.blocks];
                    for b in 0..p.blocks {
                        // NaN payloads are not part of the order (libm's fmaf and the
                        // instruction may differ there): NaN must meet NaN.
                        if got[b].is_nan() && want[b].is_nan() {
                            continue;
                        }
                        assert_eq!(
                            got[b].to_bits(),
                            want[b].to_bits(),
                            "{order:?} nq {nq} blocks {blocks}: query {q} block {b}: lanes {} scalar {}",
                            got[b],
                            want[b]
                        );
                    }
                }
            }
        }
    }
}
