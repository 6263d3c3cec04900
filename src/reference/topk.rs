//! The top-k oracle: a full stable sort under the contract of `crate::contract`, no radix
//! select. Slow (n log n per query) and obviously correct, it is what the CPU radix and
//! split implementations, and every GPU kernel, are compared with id for id.

use crate::contract::{finalize_ids, order_key, order_key_f64, selection_cmp};
use crate::problem::TopkProblem;

/// Select `k` of `keys` (index = position): the contract's order by a full sort, then the
/// output row (ascending, -1 padded). `k >= keys.len()` selects every entry.
fn select_row<K: Ord + Copy>(keys: &[K], k: usize) -> Vec<i32> {
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by(|&a, &b| selection_cmp((keys[a], a), (keys[b], b)));
    order.truncate(k);
    finalize_ids(order.into_iter().map(|i| i as i32).collect(), k)
}

/// Ids of `p` per query (`nq * k`), over the first `p.candidates(q)` entries of each row.
pub fn topk_ids(p: &TopkProblem) -> Vec<i32> {
    let mut out = Vec::with_capacity(p.nq * p.k);
    for q in 0..p.nq {
        let keys: Vec<u32> = p.row(q)[..p.candidates(q)]
            .iter()
            .map(|&x| order_key(x))
            .collect();
        out.extend(select_row(&keys, p.k));
    }
    out
}

/// Ids per query (`nq * k`) selected from FP64 scores `[nq, n]` (row stride `n`) under the
/// f64 twin of the contract: the end-to-end reference (FP64 scores, then selection).
/// `active[q]` limits row q to its first `active[q]` entries (clamped to 0..=n, as
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
        let keys: Vec<u64> = scores[q * n..q * n + c]
            .iter()
            .map(|&x| order_key_f64(x))
            .collect();
        out.extend(select_row(&keys, k));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(rows: &[&[f32]], k: usize, active: Option<Vec<i32>>) -> TopkProblem {
        let n = rows[0].len();
        let capacity = n + 3; // padding past n must never be read
        let mut scores = vec![f32::NAN; rows.len() * capacity];
        for (q, r) in rows.iter().enumerate() {
            scores[q * capacity..q * capacity + n].copy_from_slice(r);
            scores[q * capacity + n..(q + 1) * capacity].fill(f32::INFINITY);
        }
        TopkProblem {
            nq: rows.len(),
            n,
            capacity,
            k,
            scores,
            active,
        }
    }

    /// 2 queries x 3 entries, by hand: ties, NaN, -0.0.
    #[test]
    fn hand_2x3() {
        let p = problem(
            &[&[1.0, f32::NAN, 1.0], &[-0.0, 0.0, f32::NEG_INFINITY]],
            2,
            None,
        );
        // Row 0: 1.0@0 and 1.0@2 beat NaN. Row 1: -0.0 ties +0.0, both beat -inf.
        assert_eq!(topk_ids(&p), vec![0, 2, 0, 1]);
        let p = problem(
            &[&[1.0, f32::NAN, 1.0], &[-0.0, 0.0, f32::NEG_INFINITY]],
            1,
            None,
        );
        // Tie -> lower index.
        assert_eq!(topk_ids(&p), vec![0, 0]);
        let p = problem(
            &[&[f32::NAN, f32::NEG_INFINITY, f32::NAN], &[3.0, 2.0, 1.0]],
            2,
            None,
        );
        // -inf beats NaN; the NaN tie goes to the lower index.
        assert_eq!(topk_ids(&p), vec![0, 1, 0, 1]);
    }

    #[test]
    fn k_past_n_and_active() {
        let p = problem(&[&[0.5, 2.0, 1.0], &[1.0, 2.0, 3.0]], 5, None);
        assert_eq!(topk_ids(&p), vec![0, 1, 2, -1, -1, 0, 1, 2, -1, -1]);
        let p = problem(&[&[0.5, 2.0, 1.0], &[1.0, 2.0, 3.0]], 2, Some(vec![0, 1]));
        assert_eq!(topk_ids(&p), vec![-1, -1, 0, -1]);
        let p = problem(&[&[0.5, 2.0, 1.0], &[1.0, 2.0, 3.0]], 1, Some(vec![2, 3]));
        assert_eq!(topk_ids(&p), vec![1, 2]);
    }

    #[test]
    fn f64_twin() {
        let s = [1.0, f64::NAN, -0.0, 0.0, 1.0 + 1e-12, 1.0];
        assert_eq!(topk_ids_f64(&s, 2, 3, 2, None), vec![0, 2, 1, 2]);
        assert_eq!(topk_ids_f64(&s, 2, 3, 2, Some(&[1, 2])), vec![0, -1, 0, 1]);
    }
}
