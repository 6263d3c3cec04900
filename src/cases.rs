//! From a case of matrix.yaml and one distribution to the concrete `Problem` (generated
//! inputs, or tensors read from .npy files).

use crate::gen;
use crate::matrix::{ActiveMode, AttnShape, Case};
use crate::npy;
use crate::problem::{AttnProblem, ScoresProblem, TopkProblem, HEAD_DIM};

/// The distributions a case runs ("npy" when its tensors come from files).
pub fn dists(case: &Case) -> Vec<String> {
    if case.inputs.is_empty() {
        case.dists.clone()
    } else {
        vec!["npy".to_string()]
    }
}

/// Per-query active counts for the prefill form.
pub fn active_counts(mode: ActiveMode, nq: usize, n: usize, k: usize) -> Option<Vec<i32>> {
    match mode {
        ActiveMode::None => None,
        ActiveMode::Causal => Some(
            (0..nq)
                .map(|q| (n + q + 1).saturating_sub(nq).min(n) as i32)
                .collect(),
        ),
        ActiveMode::Edge => {
            let edges = [0, 1, k.saturating_sub(1), k, k + 1, n];
            Some(
                (0..nq)
                    .map(|q| edges[q % edges.len()].min(n) as i32)
                    .collect(),
            )
        }
    }
}

pub fn topk_problem(seed: u64, case: &Case, dist: &str) -> Result<TopkProblem, String> {
    let s = case.topk.as_ref().ok_or("not a top-k case")?;
    let scores = match case.inputs.get("scores") {
        Some(path) => {
            let a: npy::Npy<f32> = npy::read(path)?;
            if a.shape != [s.queries, s.capacity] {
                return Err(format!(
                    "{}: shape {:?}, the case needs [queries, capacity] = [{}, {}]",
                    path.display(),
                    a.shape,
                    s.queries,
                    s.capacity
                ));
            }
            a.data
        }
        None => gen::topk_scores(seed, &case.name, dist, s.queries, s.n, s.capacity, s.k)?,
    };
    let active = match case.inputs.get("active") {
        Some(path) => {
            let a: npy::Npy<i32> = npy::read(path)?;
            if a.shape != [s.queries] {
                return Err(format!(
                    "{}: shape {:?}, the case needs [queries] = [{}]",
                    path.display(),
                    a.shape,
                    s.queries
                ));
            }
            if let Some(bad) = a.data.iter().find(|&&x| x < 0 || x as usize > s.n) {
                return Err(format!(
                    "{}: active count {bad} is outside [0, n = {}]",
                    path.display(),
                    s.n
                ));
            }
            Some(a.data)
        }
        None => active_counts(s.active, s.queries, s.n, s.k),
    };
    Ok(TopkProblem {
        nq: s.queries,
        n: s.n,
        capacity: s.capacity,
        k: s.k,
        scores,
        active,
    })
}

pub fn scores_problem(seed: u64, case: &Case, dist: &str) -> Result<ScoresProblem, String> {
    let s = case.scores.as_ref().ok_or("not a scores case")?;
    let (mut q, mut kb, mut w) = if case.inputs.is_empty() {
        gen::scores_inputs(seed, &case.name, dist, s.queries, s.heads, s.blocks)?
    } else {
        (Vec::new(), Vec::new(), Vec::new())
    };
    let wanted = [
        ("q", vec![s.queries, s.heads, HEAD_DIM]),
        ("kb", vec![s.blocks, HEAD_DIM]),
        ("w", vec![s.queries, s.heads]),
    ];
    for (name, shape) in wanted {
        let Some(path) = case.inputs.get(name) else {
            if !case.inputs.is_empty() {
                return Err(format!(
                    "case `{}` reads its inputs from files but names no `{name}`",
                    case.name
                ));
            }
            continue;
        };
        let a: npy::Npy<f32> = npy::read(path)?;
        if a.shape != shape {
            return Err(format!(
                "{}: shape {:?}, the case needs {name} = {shape:?}",
                path.display(),
                a.shape
            ));
        }
        match name {
            "q" => q = a.data,
            "kb" => kb = a.data,
            _ => w = a.data,
        }
    }
    Ok(ScoresProblem {
        nq: s.queries,
        heads: s.heads,
        blocks: s.blocks,
        q,
        kb,
        w,
    })
}

/// The (batch, query-token) rows checked against FP64: all, or `check_rows` evenly spaced
/// (first and last included).
pub fn checked_rows(s: &AttnShape, check_rows: Option<usize>) -> Vec<(usize, usize)> {
    let total = s.batch * s.q_len;
    let pick = check_rows.unwrap_or(total).clamp(1, total);
    let mut rows: Vec<usize> = (0..pick)
        .map(|j| {
            if pick == 1 {
                0
            } else {
                j * (total - 1) / (pick - 1)
            }
        })
        .collect();
    rows.dedup();
    rows.into_iter()
        .map(|r| (r / s.q_len, r % s.q_len))
        .collect()
}

pub fn attn_problem(seed: u64, case: &Case, dist: &str) -> Result<AttnProblem, String> {
    let s = case.attention.as_ref().ok_or("not an attention case")?;
    let rows = case.check_rows.map(|_| checked_rows(s, case.check_rows));
    let shape = gen::AttnGenShape {
        batch: s.batch,
        q_len: s.q_len,
        kv_len: s.kv_len,
        hq: s.hq,
        hkv: s.hkv,
        t: s.t,
        dtype: s.dtype,
        kv_layout: s.kv_layout,
        do_dtype: s.do_dtype,
    };
    let inp = gen::attn_inputs(seed, &case.name, dist, shape, rows.as_deref())?;
    Ok(AttnProblem {
        batch: s.batch,
        q_len: s.q_len,
        kv_len: s.kv_len,
        hq: s.hq,
        hkv: s.hkv,
        t: s.t,
        dtype: s.dtype,
        scale: s.scale.unwrap_or(1.0 / (HEAD_DIM as f32).sqrt()),
        q: inp.q,
        k: inp.k,
        v: inp.v,
        kv_layout: s.kv_layout,
        ids: inp.ids,
        d_o: inp.d_o,
        do_dtype: s.do_dtype,
    })
}

/// Bytes the case's inputs take (None past `usize`), to refuse a case that cannot fit
/// before generating it (src/matrix/limits.rs).
pub fn input_bytes(case: &Case) -> Option<usize> {
    let prod = |xs: &[usize]| xs.iter().try_fold(1usize, |a, &x| a.checked_mul(x));
    let sum = |xs: &[Option<usize>]| {
        xs.iter()
            .try_fold(0usize, |a, x| x.and_then(|x| a.checked_add(x)))
    };
    if let Some(s) = &case.topk {
        prod(&[s.queries, s.capacity, 4])
    } else if let Some(s) = &case.scores {
        sum(&[
            prod(&[s.queries, s.heads, HEAD_DIM, 4]),
            prod(&[s.blocks, HEAD_DIM, 4]),
            prod(&[s.queries, s.heads, 4]),
        ])
    } else if let Some(s) = &case.attention {
        sum(&[
            prod(&[s.batch, s.q_len, s.hq, HEAD_DIM, 6]),
            prod(&[s.batch, s.kv_len, s.hkv, HEAD_DIM, 4]),
            prod(&[s.batch, s.q_len, s.hkv, s.t, 4]),
        ])
    } else {
        Some(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causal_counts_end_at_n() {
        let a = active_counts(ActiveMode::Causal, 4, 10, 2).unwrap();
        assert_eq!(a, vec![7, 8, 9, 10]);
        let e = active_counts(ActiveMode::Edge, 6, 100, 16).unwrap();
        assert_eq!(e, vec![0, 1, 15, 16, 17, 100]);
    }

    #[test]
    fn checked_rows_span_the_batch() {
        let s = AttnShape {
            batch: 2,
            q_len: 10,
            kv_len: 100,
            hq: 4,
            hkv: 2,
            t: 4,
            dtype: crate::problem::AttnDtype::Bf16,
            scale: None,
            kv_layout: Default::default(),
            do_dtype: Default::default(),
        };
        let r = checked_rows(&s, Some(3));
        assert_eq!(r, vec![(0, 0), (0, 9), (1, 9)]);
        assert_eq!(checked_rows(&s, None).len(), 20);
    }
}
