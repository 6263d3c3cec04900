//! The top-k oracle: a full sort under the selection-order contract as the README writes it,
//! no radix select, and no code shared with what it judges.
//!
//! The written contract: "key = monotone u32 of the score, -0.0 as +0.0, every NaN below
//! -inf; larger key first; ties by lower index; ids ascending, -1 past the count". The CPU
//! kernels and the GPU kernels implement it through a bit-level key (`crate::contract`,
//! `qsa_order_key`). This oracle never looks at bits: it ranks a score by its *class*
//! (every NaN, whatever its sign or payload, is one class below all numbers) and then by its
//! *value as an f64* under IEEE comparison (where -0.0 == +0.0 and -inf < every finite),
//! then by index. A monotone key of a number orders numbers exactly as their values do, so
//! this is the same total order, derived independently: a broken rule in the kernels' key
//! (signed zeros, NaN placement, inf) makes the two disagree, and parity says so.

use std::cmp::Ordering;

use crate::problem::TopkProblem;

/// The rank of one score under the contract: NaN (any payload, any sign) below every number;
/// numbers (±inf included) by value, with -0.0 equal to +0.0.
#[derive(Clone, Copy, Debug)]
enum Rank {
    Nan,
    Number(f64),
}

impl Rank {
    fn of(x: f64) -> Rank {
        if x.is_nan() {
            Rank::Nan
        } else {
            Rank::Number(x)
        }
    }

    /// `Greater` when `self` is selected before `other` on value alone.
    fn cmp_value(self, other: Rank) -> Ordering {
        match (self, other) {
            (Rank::Nan, Rank::Nan) => Ordering::Equal,
            (Rank::Nan, Rank::Number(_)) => Ordering::Less,
            (Rank::Number(_), Rank::Nan) => Ordering::Greater,
            // Neither is NaN, so IEEE comparison is total here, and -0.0 == +0.0.
            (Rank::Number(a), Rank::Number(b)) => a.partial_cmp(&b).expect("numbers compare"),
        }
    }
}

/// `Less` when entry `(a, ia)` is selected before `(b, ib)`: larger value first, then the
/// lower index.
fn selected_before(a: Rank, ia: usize, b: Rank, ib: usize) -> Ordering {
    b.cmp_value(a).then(ia.cmp(&ib))
}

/// The contract's selection of `k` entries of `row` (index = position), as an output row:
/// ids ascending, -1 past the count. `k >= row.len()` selects every entry.
fn select_row(row: &[f64], k: usize) -> Vec<i32> {
    let ranks: Vec<Rank> = row.iter().map(|&x| Rank::of(x)).collect();
    let mut order: Vec<usize> = (0..row.len()).collect();
    order.sort_by(|&a, &b| selected_before(ranks[a], a, ranks[b], b));
    let mut ids: Vec<i32> = order.iter().take(k).map(|&i| i as i32).collect();
    ids.sort_unstable();
    ids.resize(k, -1);
    ids
}

/// Ids of `p` per query (`nq * k`), over the first `p.candidates(q)` entries of each row.
/// f32 scores widen to f64 exactly (NaN stays NaN), so the order is the f32 scores' order.
pub fn topk_ids(p: &TopkProblem) -> Vec<i32> {
    let mut out = Vec::with_capacity(p.nq * p.k);
    for q in 0..p.nq {
        let row: Vec<f64> = p.row(q)[..p.candidates(q)]
            .iter()
            .map(|&x| x as f64)
            .collect();
        out.extend(select_row(&row, p.k));
    }
    out
}

/// Ids per query (`nq * k`) selected from FP64 scores `[nq, n]` (row stride `n`) under the
/// same contract: the end-to-end reference (FP64 scores, then selection). `active[q]`
/// limits row q to its first `active[q]` entries (clamped to 0..=n, as
/// `TopkProblem::candidates` does).
pub fn topk_ids_f64(
    scores: &[f64],
    nq: usize,
    n: usize,
    k: usize,
    active: Option<&[i32]>,
) -> Vec<i32> {
    let mut out = Vec::with_capacity(nq * k);
    for q in 0..nq {
        let c = active.map_or(n, |a| (a[q].max(0) as usize).min(n));
        out.extend(select_row(&scores[q * n..q * n + c], k));
    }
    out
}

#[cfg(test)]
mod tests;
