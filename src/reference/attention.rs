//! FP64 reference of NSA selection attention, forward and backward, and the semantics every
//! selection-attention kernel follows (the contract):
//!
//! - Query token `i` of batch `b` sits at position `p.q_pos(i) = kv_len - q_len + i`.
//! - For each `(b, i, kv head g)` the list `p.ids[((b*q_len + i)*hkv + g)*t .. +t]` names the
//!   selected blocks. `-1` means "no block". An id that repeats in one list counts once (the
//!   kernels de-duplicate). Ids must lie in `[-1, ceil(kv_len / 64))`; anything else is an
//!   input error, never a silent skip.
//! - Key token `j = id*64 + r` (`r < 64`) is visible iff `j <= q_pos` (causal) and
//!   `j < kv_len` (the last block may be partial).
//! - Query head `h` uses KV head `h / (hq / hkv)` (GQA: the heads of a group share the
//!   selection).
//! - Logits `scale * q . k`; `o = sum_j softmax_j v_j`; `lse = ln(sum_j exp(logit_j))`
//!   (natural log).
//! - A query that sees no key gets `o = 0`, `lse = -inf`, and contributes no gradient.
//! - Backward from `p.d_o`: the standard softmax-attention gradients. With `P_j` the
//!   probabilities, `dP_j = dO . v_j`, `D = sum_j P_j dP_j` and `dS_j = P_j (dP_j - D)`:
//!   `dq = scale sum_j dS_j k_j`, `dk_j += scale dS_j q`, `dv_j += P_j dO`, where `dk`/`dv`
//!   accumulate over every query token and head that saw key `j`. Shapes of q, k, v.
//! - Inputs are u16 bits of `p.dtype`, widened exactly (`to_f32`, then to f64). NaN or
//!   infinite inputs are not errors: they propagate.
//!
//! This file holds the contract's checks (`validate_attn`), its visibility rule, and the
//! forward; `backward` the FP64 gradients; `tests` the hand-worked and finite-difference
//! checks.

use crate::backend::{BackendError, BackendResult};
use crate::cpu::par::par_map;
use crate::problem::{AttnProblem, KvLayout, ATTN_BLOCK, HEAD_DIM};

const D: usize = HEAD_DIM;

mod backward;
#[cfg(test)]
pub(crate) mod tests;

pub use backward::attn_backward_f64;

/// FP64 forward output, shapes of `AttnForward`.
#[derive(Clone, Debug, Default)]
pub struct AttnForwardF64 {
    /// `[batch, q_len, hq, D]`
    pub o: Vec<f64>,
    /// `[batch, q_len, hq]`, natural log, -inf where a query saw no key.
    pub lse: Vec<f64>,
}

/// FP64 gradients, shapes of q, k, v.
#[derive(Clone, Debug, Default)]
pub struct AttnBackwardF64 {
    pub dq: Vec<f64>,
    pub dk: Vec<f64>,
    pub dv: Vec<f64>,
}

fn check_len(field: &str, got: usize, want: usize, shape: &str) -> BackendResult<()> {
    if got == want {
        return Ok(());
    }
    Err(BackendError::Input(format!(
        "attention {field} has {got} elements, the shape {shape} needs {want}: generate it for the case's shape"
    )))
}

/// Blocks of `ATTN_BLOCK` tokens in the KV sequence (the valid ids are -1 and `0..blocks`).
pub fn kv_blocks(p: &AttnProblem) -> usize {
    p.kv_len.div_ceil(ATTN_BLOCK)
}

/// With `do_dtype` bf16 every dO value must be a bf16 (the GPU reads its 16 bits): a value
/// that is not would be rounded silently, so it is refused, with its row and the fix.
fn check_do_dtype(p: &AttnProblem) -> BackendResult<()> {
    if p.do_dtype != crate::problem::GradDtype::Bf16 {
        return Ok(());
    }
    let exact = |x: f32| half::bf16::from_f32(x).to_f32().to_bits() == x.to_bits() || x.is_nan();
    match p.d_o.iter().position(|&x| !exact(x)) {
        None => Ok(()),
        Some(n) => Err(BackendError::Input(format!(
            "d_o[row {}, dim {}] = {:e} is not a bf16 value, but do_dtype is bf16: round dO \
             to bf16 first, or use do_dtype f32",
            n / D,
            n % D,
            p.d_o[n]
        ))),
    }
}

/// Check shapes, lengths and ids (and `d_o` when `backward`): the errors name the field and
/// the fix. Every selection-attention implementation calls this before running.
pub fn validate_attn(p: &AttnProblem, backward: bool) -> BackendResult<()> {
    if p.hq == 0 || p.hkv == 0 || !p.hq.is_multiple_of(p.hkv) {
        return Err(BackendError::Shape(format!(
            "hq = {} query heads must be a positive multiple of hkv = {} KV heads (GQA groups)",
            p.hq, p.hkv
        )));
    }
    if p.q_len > p.kv_len {
        return Err(BackendError::Shape(format!(
            "q_len = {} exceeds kv_len = {}: the query tokens are the last q_len of the sequence",
            p.q_len, p.kv_len
        )));
    }
    let (b, ql, kl) = (p.batch, p.q_len, p.kv_len);
    let q_shape = format!("[batch {b}, q_len {ql}, hq {}, {D}]", p.hq);
    let kv_shape = p.kv_layout.shape(b, kl, p.hkv);
    check_len("q", p.q.len(), b * ql * p.hq * D, &q_shape)?;
    check_len("k", p.k.len(), b * kl * p.hkv * D, &kv_shape)?;
    check_len("v", p.v.len(), b * kl * p.hkv * D, &kv_shape)?;
    let ids_shape = format!("[batch {b}, q_len {ql}, hkv {}, t {}]", p.hkv, p.t);
    check_len("ids", p.ids.len(), b * ql * p.hkv * p.t, &ids_shape)?;
    if backward {
        check_len("d_o", p.d_o.len(), b * ql * p.hq * D, &q_shape)?;
        check_do_dtype(p)?;
    }
    let blocks = kv_blocks(p) as i64;
    if let Some((n, &id)) = p
        .ids
        .iter()
        .enumerate()
        .find(|&(_, &id)| id < -1 || id as i64 >= blocks)
    {
        let (slot, g, i, bb) = (
            n % p.t,
            n / p.t % p.hkv,
            n / p.t / p.hkv % ql,
            n / p.t / p.hkv / ql,
        );
        return Err(BackendError::Input(format!(
            "ids[b {bb}, i {i}, g {g}, slot {slot}] = {id} is outside [-1, {blocks}): kv_len = {kl} has {blocks} blocks of {ATTN_BLOCK}; fix the case's ids or kv_len"
        )));
    }
    Ok(())
}

/// The listed blocks of `(b, i, g)` as a set: `listed[block]`. A repeat is the same
/// member; -1 is no member (validated ids lie in `[-1, blocks)`).
fn listed_blocks(p: &AttnProblem, b: usize, i: usize, g: usize) -> Vec<bool> {
    let base = ((b * p.q_len + i) * p.hkv + g) * p.t;
    let mut listed = vec![false; kv_blocks(p)];
    for &id in &p.ids[base..base + p.t] {
        if let Ok(block) = usize::try_from(id) {
            listed[block] = true;
        }
    }
    listed
}

/// The contract's visibility rule, as one predicate: key token `j` is seen by query token
/// `i` iff its block is listed, it is not past the query's position (causal), and it is
/// inside the sequence.
fn sees(p: &AttnProblem, listed: &[bool], i: usize, j: usize) -> bool {
    j < p.kv_len && j <= p.q_pos(i) && listed[j / ATTN_BLOCK]
}

/// The key tokens query token `i` of batch `b` sees through KV head `g`, ascending: every
/// token of the sequence filtered by [`sees`]. Written from the definition (a set and a
/// predicate over all tokens), not as the kernels' walk over the list, so that a kernel and
/// this reference do not share a masking bug.
fn visible_keys(p: &AttnProblem, b: usize, i: usize, g: usize) -> Vec<usize> {
    let listed = listed_blocks(p, b, i, g);
    (0..p.kv_len).filter(|&j| sees(p, &listed, i, j)).collect()
}

/// K and V widened to f64, `[batch, kv_len, hkv, D]`.
struct Kv {
    k: Vec<f64>,
    v: Vec<f64>,
}

fn widen(p: &AttnProblem, bits: &[u16]) -> Vec<f64> {
    bits.iter().map(|&x| p.dtype.to_f32(x) as f64).collect()
}

// K / V row of key j of KV head g in the problem's layout (this file's own indexing).
fn kv_row(p: &AttnProblem, t: &[f64], b: usize, j: usize, g: usize) -> std::ops::Range<usize> {
    let s = match p.kv_layout {
        KvLayout::Nhd => ((b * p.kv_len + j) * p.hkv + g) * D,
        KvLayout::Hnd => ((b * p.hkv + g) * p.kv_len + j) * D,
    };
    debug_assert!(s + D <= t.len());
    s..s + D
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Softmax probabilities over `keys` and the log-sum-exp; `None` when there is no key.
fn probs(
    p: &AttnProblem,
    kv: &Kv,
    b: usize,
    g: usize,
    q: &[f64],
    keys: &[usize],
) -> Option<(Vec<f64>, f64)> {
    if keys.is_empty() {
        return None;
    }
    let scale = p.scale as f64;
    let s: Vec<f64> = keys
        .iter()
        .map(|&j| scale * dot(q, &kv.k[kv_row(p, &kv.k, b, j, g)]))
        .collect();
    let m = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = s.iter().map(|x| (x - m).exp()).collect();
    let l: f64 = e.iter().sum();
    Some((e.iter().map(|x| x / l).collect(), m + l.ln()))
}

/// One (b, i) row, every head: `o` (`hq * D`) and `lse` (`hq`).
fn forward_row(
    p: &AttnProblem,
    kv: &Kv,
    b: usize,
    i: usize,
    q: &[f64],
    o: &mut [f64],
    lse: &mut [f64],
) {
    let group = p.group();
    for g in 0..p.hkv {
        let keys = visible_keys(p, b, i, g);
        for h in g * group..(g + 1) * group {
            let oh = &mut o[h * D..(h + 1) * D];
            oh.fill(0.0);
            let Some((pr, l)) = probs(p, kv, b, g, &q[h * D..(h + 1) * D], &keys) else {
                lse[h] = f64::NEG_INFINITY;
                continue;
            };
            for (&j, &pj) in keys.iter().zip(&pr) {
                let v = &kv.v[kv_row(p, &kv.v, b, j, g)];
                oh.iter_mut().zip(v).for_each(|(x, y)| *x += pj * y);
            }
            lse[h] = l;
        }
    }
}

/// FP64 forward. `rows`: an optional subset of `(batch, query token)` pairs to compute (for
/// cases too large for a full FP64 pass); rows not listed are left at `o = 0`, `lse = 0`
/// (finite placeholders: compare only the rows you asked for). Multi-threaded over rows.
pub fn attn_forward_f64(
    p: &AttnProblem,
    rows: Option<&[(usize, usize)]>,
) -> BackendResult<AttnForwardF64> {
    validate_attn(p, false)?;
    if let Some((n, &(b, i))) = rows
        .into_iter()
        .flatten()
        .enumerate()
        .find(|(_, &(b, i))| b >= p.batch || i >= p.q_len)
    {
        return Err(BackendError::Input(format!(
            "rows[{n}] = (batch {b}, token {i}) is outside batch {} x q_len {}",
            p.batch, p.q_len
        )));
    }
    let kv = Kv {
        k: widen(p, &p.k),
        v: widen(p, &p.v),
    };
    let all: Vec<(usize, usize)>;
    let rows = match rows {
        Some(r) => r,
        None => {
            all = (0..p.batch)
                .flat_map(|b| (0..p.q_len).map(move |i| (b, i)))
                .collect();
            &all
        }
    };
    let width = p.hq * D;
    let results = par_map(rows.len(), |n| {
        let (b, i) = rows[n];
        let r = b * p.q_len + i;
        let q = widen(p, &p.q[r * width..(r + 1) * width]);
        let (mut o, mut lse) = (vec![0.0; width], vec![0.0; p.hq]);
        forward_row(p, &kv, b, i, &q, &mut o, &mut lse);
        (o, lse)
    });
    let rows_total = p.batch * p.q_len;
    let mut out = AttnForwardF64 {
        o: vec![0.0; rows_total * width],
        lse: vec![0.0; rows_total * p.hq],
    };
    for (&(b, i), (o, lse)) in rows.iter().zip(results) {
        let r = b * p.q_len + i;
        out.o[r * width..(r + 1) * width].copy_from_slice(&o);
        out.lse[r * p.hq..(r + 1) * p.hq].copy_from_slice(&lse);
    }
    Ok(out)
}

/// Forward over every row on widened inputs: for the finite-difference test.
#[cfg(test)]
fn forward_core(p: &AttnProblem, q: &[f64], kv: &Kv) -> Vec<f64> {
    use crate::cpu::par::par_chunks_mut;
    let width = p.hq * D;
    let mut o = vec![0.0; q.len()];
    par_chunks_mut(&mut o, width, |r, orow| {
        let mut lse = vec![0.0; p.hq];
        forward_row(
            p,
            kv,
            r / p.q_len,
            r % p.q_len,
            &q[r * width..(r + 1) * width],
            orow,
            &mut lse,
        );
    });
    o
}
