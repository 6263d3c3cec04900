//! CPU selection attention in f32 (the "gather" kernel's arithmetic): forward and backward
//! over the gathered blocks, with the semantics of `crate::reference::attention` (its
//! `validate_attn` is the shared input check; the masking below is the kernels' own walk
//! over the list, kept apart from the reference's). Two-pass softmax per head:
//! logits, max, exponentials, sum; accumulation in f32 as on the GPU.

use super::par::par_map;
use crate::backend::BackendResult;
use crate::problem::{AttnBackward, AttnForward, AttnProblem, KvLayout, ATTN_BLOCK, HEAD_DIM};
use crate::reference::attention::validate_attn;

const D: usize = HEAD_DIM;

/// The key tokens query token `i` of batch `b` sees through KV head `g`, as the gather
/// kernel walks them: the listed blocks in list order, repeats and -1 skipped, each clipped
/// by causality and `kv_len`.
fn visible_keys(p: &AttnProblem, b: usize, i: usize, g: usize) -> Vec<usize> {
    let base = ((b * p.q_len + i) * p.hkv + g) * p.t;
    let list = &p.ids[base..base + p.t];
    let end = (p.q_pos(i) + 1).min(p.kv_len);
    let mut keys = Vec::new();
    for (s, &id) in list.iter().enumerate() {
        if id < 0 || list[..s].contains(&id) {
            continue;
        }
        let start = id as usize * ATTN_BLOCK;
        keys.extend(start..(start + ATTN_BLOCK).min(end));
    }
    keys
}

/// K and V widened to f32 (exact), `[batch, kv_len, hkv, D]`.
struct Kv {
    k: Vec<f32>,
    v: Vec<f32>,
}

impl Kv {
    fn new(p: &AttnProblem) -> Self {
        Kv {
            k: widen(p, &p.k),
            v: widen(p, &p.v),
        }
    }
    fn at(p: &AttnProblem, b: usize, j: usize, g: usize) -> std::ops::Range<usize> {
        let s = match p.kv_layout {
            KvLayout::Nhd => ((b * p.kv_len + j) * p.hkv + g) * D,
            KvLayout::Hnd => ((b * p.hkv + g) * p.kv_len + j) * D,
        };
        s..s + D
    }
}

fn widen(p: &AttnProblem, bits: &[u16]) -> Vec<f32> {
    bits.iter().map(|&x| p.dtype.to_f32(x)).collect()
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .fold(0.0f32, |acc, (x, y)| x.mul_add(*y, acc))
}

/// Softmax probabilities over `keys` and the log-sum-exp; `None` when there is no key.
fn probs(
    p: &AttnProblem,
    kv: &Kv,
    b: usize,
    g: usize,
    q: &[f32],
    keys: &[usize],
) -> Option<(Vec<f32>, f32)> {
    if keys.is_empty() {
        return None;
    }
    let s: Vec<f32> = keys
        .iter()
        .map(|&j| p.scale * dot(q, &kv.k[Kv::at(p, b, j, g)]))
        .collect();
    let m = s.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let e: Vec<f32> = s.iter().map(|x| (x - m).exp()).collect();
    let l: f32 = e.iter().sum();
    Some((e.iter().map(|x| x / l).collect(), m + l.ln()))
}

/// One (b, i) row, every head: `(o [hq * D], lse [hq])`.
fn forward_row(p: &AttnProblem, kv: &Kv, b: usize, i: usize) -> (Vec<f32>, Vec<f32>) {
    let (group, r) = (p.group(), b * p.q_len + i);
    let q = widen(p, &p.q[r * p.hq * D..(r + 1) * p.hq * D]);
    let (mut o, mut lse) = (vec![0.0f32; p.hq * D], vec![f32::NEG_INFINITY; p.hq]);
    for g in 0..p.hkv {
        let keys = visible_keys(p, b, i, g);
        for h in g * group..(g + 1) * group {
            let Some((pr, l)) = probs(p, kv, b, g, &q[h * D..(h + 1) * D], &keys) else {
                continue;
            };
            let oh = &mut o[h * D..(h + 1) * D];
            for (&j, &pj) in keys.iter().zip(&pr) {
                let v = &kv.v[Kv::at(p, b, j, g)];
                oh.iter_mut()
                    .zip(v)
                    .for_each(|(x, y)| *x = pj.mul_add(*y, *x));
            }
            lse[h] = l;
        }
    }
    (o, lse)
}

/// Forward over every row, multi-threaded over (batch, token) rows.
pub fn attn_forward(p: &AttnProblem) -> BackendResult<AttnForward> {
    validate_attn(p, false)?;
    let kv = Kv::new(p);
    let rows = par_map(p.batch * p.q_len, |r| {
        forward_row(p, &kv, r / p.q_len, r % p.q_len)
    });
    let mut out = AttnForward::default();
    for (o, lse) in rows {
        out.o.extend(o);
        out.lse.extend(lse);
    }
    Ok(out)
}

/// Gradients of one (batch, KV head) pair: `dq [q_len, group, D]`, `dk`/`dv [kv_len, D]`.
struct PairGrads {
    dq: Vec<f32>,
    dk: Vec<f32>,
    dv: Vec<f32>,
}

fn backward_pair(p: &AttnProblem, q: &[f32], kv: &Kv, b: usize, g: usize) -> PairGrads {
    let group = p.group();
    let mut gr = PairGrads {
        dq: vec![0.0; p.q_len * group * D],
        dk: vec![0.0; p.kv_len * D],
        dv: vec![0.0; p.kv_len * D],
    };
    for i in 0..p.q_len {
        let keys = visible_keys(p, b, i, g);
        for (hh, h) in (g * group..(g + 1) * group).enumerate() {
            let row = ((b * p.q_len + i) * p.hq + h) * D;
            let (qh, doh) = (&q[row..row + D], &p.d_o[row..row + D]);
            let Some((pr, _)) = probs(p, kv, b, g, qh, &keys) else {
                continue;
            };
            let dp: Vec<f32> = keys
                .iter()
                .map(|&j| dot(doh, &kv.v[Kv::at(p, b, j, g)]))
                .collect();
            let dsum = pr
                .iter()
                .zip(&dp)
                .fold(0.0f32, |a, (x, y)| x.mul_add(*y, a));
            let dq = &mut gr.dq[(i * group + hh) * D..(i * group + hh + 1) * D];
            for ((&j, &pj), &dpj) in keys.iter().zip(&pr).zip(&dp) {
                let ds = p.scale * pj * (dpj - dsum);
                let k = &kv.k[Kv::at(p, b, j, g)];
                dq.iter_mut()
                    .zip(k)
                    .for_each(|(x, y)| *x = ds.mul_add(*y, *x));
                let dk = &mut gr.dk[j * D..(j + 1) * D];
                dk.iter_mut()
                    .zip(qh)
                    .for_each(|(x, y)| *x = ds.mul_add(*y, *x));
                let dv = &mut gr.dv[j * D..(j + 1) * D];
                dv.iter_mut()
                    .zip(doh)
                    .for_each(|(x, y)| *x = pj.mul_add(*y, *x));
            }
        }
    }
    gr
}

/// Backward (full), multi-threaded over (batch, KV head) pairs, which own disjoint slices
/// of dk and dv; the pairs' pieces are scattered into the q/k/v layouts at the end.
pub fn attn_backward(p: &AttnProblem) -> BackendResult<AttnBackward> {
    validate_attn(p, true)?;
    let kv = Kv::new(p);
    let q = widen(p, &p.q);
    let pairs = par_map(p.batch * p.hkv, |n| {
        backward_pair(p, &q, &kv, n / p.hkv, n % p.hkv)
    });
    let group = p.group();
    let mut out = AttnBackward {
        dq: vec![0.0; q.len()],
        dk: vec![0.0; kv.k.len()],
        dv: vec![0.0; kv.v.len()],
    };
    for (n, gr) in pairs.into_iter().enumerate() {
        let (b, g) = (n / p.hkv, n % p.hkv);
        for i in 0..p.q_len {
            let dst = ((b * p.q_len + i) * p.hq + g * group) * D;
            let src = i * group * D;
            out.dq[dst..dst + group * D].copy_from_slice(&gr.dq[src..src + group * D]);
        }
        for j in 0..p.kv_len {
            let dst = Kv::at(p, b, j, g);
            out.dk[dst.clone()].copy_from_slice(&gr.dk[j * D..(j + 1) * D]);
            out.dv[dst].copy_from_slice(&gr.dv[j * D..(j + 1) * D]);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::AttnDtype;
    use crate::reference::attention::tests::random_problem;
    use crate::reference::attention::{attn_backward_f64, attn_forward_f64};

    /// Largest |got - want| relative to the largest |want| (0 when both are empty).
    fn rel_err(got: &[f32], want: &[f64]) -> f64 {
        assert_eq!(got.len(), want.len());
        let scale = want.iter().fold(0.0f64, |m, x| m.max(x.abs())).max(1e-30);
        let err = got.iter().zip(want).fold(0.0f64, |m, (g, w)| {
            assert_eq!(g.is_finite(), w.is_finite(), "{g} vs {w}");
            if w.is_finite() {
                m.max((*g as f64 - w).abs())
            } else {
                m
            }
        });
        err / scale
    }

    #[test]
    fn forward_and_backward_match_fp64() {
        for (seed, dtype, shape) in [
            (1, AttnDtype::Bf16, (2, 3, 200, 4, 2, 3)),
            (2, AttnDtype::F16, (1, 5, 70, 8, 1, 4)),
            (3, AttnDtype::Bf16, (3, 1, 64, 2, 2, 1)),
        ] {
            let (batch, q_len, kv_len, hq, hkv, t) = shape;
            let p = random_problem(seed, dtype, batch, q_len, kv_len, hq, hkv, t);
            let (f, f64f) = (
                attn_forward(&p).unwrap(),
                attn_forward_f64(&p, None).unwrap(),
            );
            assert!(rel_err(&f.o, &f64f.o) < 1e-5, "o, seed {seed}");
            assert!(rel_err(&f.lse, &f64f.lse) < 1e-5, "lse, seed {seed}");
            let (g, g64) = (attn_backward(&p).unwrap(), attn_backward_f64(&p).unwrap());
            assert!(
                g64.dk.iter().any(|&x| x != 0.0),
                "seed {seed} must see keys"
            );
            for (name, a, b) in [
                ("dq", &g.dq, &g64.dq),
                ("dk", &g.dk, &g64.dk),
                ("dv", &g.dv, &g64.dv),
            ] {
                let e = rel_err(a, b);
                assert!(e < 1e-5, "{name}, seed {seed}: {e}");
            }
        }
    }

    #[test]
    fn logits_past_the_f32_exp_range_do_not_overflow() {
        let mut p = random_problem(5, AttnDtype::Bf16, 1, 3, 200, 4, 2, 3);
        // exp overflows f32 past 88.7: a softmax that does not subtract the row max turns
        // these logits into inf / inf = NaN.
        p.scale = 1.0e4;
        let (f, w) = (
            attn_forward(&p).unwrap(),
            attn_forward_f64(&p, None).unwrap(),
        );
        assert!(
            f.o.iter().chain(&f.lse).all(|x| x.is_finite()),
            "softmax overflow: non-finite o or lse with logits past 88.7"
        );
        assert!(rel_err(&f.o, &w.o) < 1e-3, "o with large logits");
    }

    #[test]
    fn bad_ids_are_errors() {
        let mut p = random_problem(4, AttnDtype::Bf16, 1, 2, 100, 2, 1, 2);
        p.ids[3] = 2; // 100 tokens = 2 blocks: valid ids are -1, 0, 1
        assert!(attn_forward(&p).is_err());
        assert!(attn_backward(&p).is_err());
    }
}
