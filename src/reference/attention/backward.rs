//! FP64 backward of the attention contract (see the parent module's docs for the gradient
//! formulas): per (batch, KV head) pair, multi-threaded, scattered into q/k/v-shaped
//! gradients in the problem's K/V layout. Shares the visibility rule, widening and softmax
//! with the forward in `super`, so both judge the same contract.

use super::{dot, kv_row, probs, validate_attn, visible_keys, widen, AttnBackwardF64, Kv, D};
use crate::backend::BackendResult;
use crate::cpu::par::par_map;
use crate::problem::AttnProblem;

/// Gradients of one (batch, KV head) pair: `dq` rows `[q_len, group, D]` and `dk`, `dv`
/// `[kv_len, D]` (only this pair's queries touch this pair's keys).
struct PairGrads {
    dq: Vec<f64>,
    dk: Vec<f64>,
    dv: Vec<f64>,
}

fn backward_pair(
    p: &AttnProblem,
    q: &[f64],
    kv: &Kv,
    d_o: &[f64],
    b: usize,
    g: usize,
) -> PairGrads {
    let group = p.group();
    let scale = p.scale as f64;
    let mut gr = PairGrads {
        dq: vec![0.0; p.q_len * group * D],
        dk: vec![0.0; p.kv_len * D],
        dv: vec![0.0; p.kv_len * D],
    };
    for i in 0..p.q_len {
        // A row whose upstream gradient is zero contributes exactly zero to dq, dk and dv
        // (dP = dO.V = 0 and D = rowsum(dO*O) = 0): skipping it is exact, and it is what makes
        // the backward of a large case cheap when only some rows carry a gradient
        // (suites::error zeroes d_o outside the checked rows).
        let first = ((b * p.q_len + i) * p.hq + g * group) * D;
        if d_o[first..first + group * D].iter().all(|x| *x == 0.0) {
            continue;
        }
        let keys = visible_keys(p, b, i, g);
        for (hh, h) in (g * group..(g + 1) * group).enumerate() {
            let row = ((b * p.q_len + i) * p.hq + h) * D;
            let (qh, doh) = (&q[row..row + D], &d_o[row..row + D]);
            let Some((pr, _)) = probs(p, kv, b, g, qh, &keys) else {
                continue;
            };
            let dp: Vec<f64> = keys
                .iter()
                .map(|&j| dot(doh, &kv.v[kv_row(p, &kv.v, b, j, g)]))
                .collect();
            let dsum: f64 = pr.iter().zip(&dp).map(|(a, c)| a * c).sum();
            let dq = &mut gr.dq[(i * group + hh) * D..(i * group + hh + 1) * D];
            for ((&j, &pj), &dpj) in keys.iter().zip(&pr).zip(&dp) {
                let ds = pj * (dpj - dsum);
                let k = &kv.k[kv_row(p, &kv.k, b, j, g)];
                dq.iter_mut().zip(k).for_each(|(x, y)| *x += scale * ds * y);
                let dk = &mut gr.dk[j * D..(j + 1) * D];
                dk.iter_mut()
                    .zip(qh)
                    .for_each(|(x, y)| *x += scale * ds * y);
                let dv = &mut gr.dv[j * D..(j + 1) * D];
                dv.iter_mut().zip(doh).for_each(|(x, y)| *x += pj * y);
            }
        }
    }
    gr
}

/// Backward on widened inputs (the finite-difference test perturbs these directly).
pub(super) fn backward_core(p: &AttnProblem, q: &[f64], kv: &Kv, d_o: &[f64]) -> AttnBackwardF64 {
    let pairs = par_map(p.batch * p.hkv, |n| {
        backward_pair(p, q, kv, d_o, n / p.hkv, n % p.hkv)
    });
    let mut out = AttnBackwardF64 {
        dq: vec![0.0; q.len()],
        dk: vec![0.0; kv.k.len()],
        dv: vec![0.0; kv.v.len()],
    };
    let group = p.group();
    for (n, gr) in pairs.into_iter().enumerate() {
        let (b, g) = (n / p.hkv, n % p.hkv);
        for i in 0..p.q_len {
            for hh in 0..group {
                let dst = ((b * p.q_len + i) * p.hq + g * group + hh) * D;
                let src = (i * group + hh) * D;
                out.dq[dst..dst + D].copy_from_slice(&gr.dq[src..src + D]);
            }
        }
        for j in 0..p.kv_len {
            let dst = kv_row(p, &out.dk, b, j, g);
            out.dk[dst.clone()].copy_from_slice(&gr.dk[j * D..(j + 1) * D]);
            out.dv[dst].copy_from_slice(&gr.dv[j * D..(j + 1) * D]);
        }
    }
    out
}

/// FP64 backward (full): gradients of `sum(d_o * o)` with respect to q, k, v.
/// Multi-threaded over (batch, KV head) pairs, which own disjoint slices of dk and dv.
pub fn attn_backward_f64(p: &AttnProblem) -> BackendResult<AttnBackwardF64> {
    validate_attn(p, true)?;
    let kv = Kv {
        k: widen(p, &p.k),
        v: widen(p, &p.v),
    };
    let q = widen(p, &p.q);
    let d_o: Vec<f64> = p.d_o.iter().map(|&x| x as f64).collect();
    Ok(backward_core(p, &q, &kv, &d_o))
}
