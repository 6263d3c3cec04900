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

use crate::backend::{BackendError, BackendResult};
use crate::cpu::par::par_map;
use crate::problem::{AttnProblem, KvLayout, ATTN_BLOCK, HEAD_DIM};

const D: usize = HEAD_DIM;

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
fn backward_core(p: &AttnProblem, q: &[f64], kv: &Kv, d_o: &[f64]) -> AttnBackwardF64 {
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::problem::AttnDtype;

    /// Tiny xorshift for test data (the project's generator lives in src/gen.rs).
    pub(crate) struct Rng(pub u64);
    impl Rng {
        pub fn unit(&mut self) -> f32 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        }
        pub fn below(&mut self, n: usize) -> usize {
            ((self.unit() + 1.0) * 0.5 * n as f32) as usize % n.max(1)
        }
    }

    /// A random problem; `ids` drawn from -1 ..= blocks-1 with repeats.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn random_problem(
        seed: u64,
        dtype: AttnDtype,
        batch: usize,
        q_len: usize,
        kv_len: usize,
        hq: usize,
        hkv: usize,
        t: usize,
    ) -> AttnProblem {
        let mut r = Rng(seed);
        let blocks = kv_len.div_ceil(ATTN_BLOCK);
        let bits = |n: usize, r: &mut Rng| {
            (0..n)
                .map(|_| dtype.from_f32(r.unit()))
                .collect::<Vec<u16>>()
        };
        let q = bits(batch * q_len * hq * D, &mut r);
        let k = bits(batch * kv_len * hkv * D, &mut r);
        let v = bits(batch * kv_len * hkv * D, &mut r);
        let ids = (0..batch * q_len * hkv * t)
            .map(|_| r.below(blocks + 1) as i32 - 1)
            .collect();
        let d_o = (0..batch * q_len * hq * D).map(|_| r.unit()).collect();
        AttnProblem {
            batch,
            q_len,
            kv_len,
            hq,
            hkv,
            t,
            dtype,
            scale: 1.0 / (D as f32).sqrt(),
            q,
            k,
            v,
            ids,
            d_o,
            kv_layout: Default::default(),
        }
    }

    /// A one-row problem with explicit vectors (zero past the listed coordinates).
    fn hand(q_len: usize, kv_len: usize, ids: Vec<i32>, keys: &[(f32, f32)]) -> AttnProblem {
        let dt = AttnDtype::Bf16;
        let mut q = vec![0u16; q_len * D];
        for i in 0..q_len {
            q[i * D] = dt.from_f32(1.0);
        }
        let (mut k, mut v) = (vec![0u16; kv_len * D], vec![0u16; kv_len * D]);
        for (j, &(kj, vj)) in keys.iter().enumerate() {
            k[j * D] = dt.from_f32(kj);
            v[j * D + 1] = dt.from_f32(vj);
        }
        let t = ids.len() / q_len;
        AttnProblem {
            batch: 1,
            q_len,
            kv_len,
            hq: 1,
            hkv: 1,
            t,
            dtype: dt,
            scale: 1.0,
            q,
            k,
            v,
            ids,
            d_o: vec![0.0; q_len * D],
            kv_layout: Default::default(),
        }
    }

    /// `nhd` data (NHD-flat `x`) placed head-major.
    fn to_hnd<T: Copy>(p: &AttnProblem, x: &[T]) -> Vec<T> {
        let mut out = x.to_vec();
        for b in 0..p.batch {
            for j in 0..p.kv_len {
                for g in 0..p.hkv {
                    let src = ((b * p.kv_len + j) * p.hkv + g) * D;
                    let dst = ((b * p.hkv + g) * p.kv_len + j) * D;
                    out[dst..dst + D].copy_from_slice(&x[src..src + D]);
                }
            }
        }
        out
    }

    #[test]
    fn head_major_kv_gives_the_same_attention_and_head_major_gradients() {
        let p = random_problem(5, AttnDtype::Bf16, 2, 3, 150, 8, 2, 4);
        let h = AttnProblem {
            k: to_hnd(&p, &p.k),
            v: to_hnd(&p, &p.v),
            kv_layout: KvLayout::Hnd,
            ..p.clone()
        };
        let (f, fh) = (
            attn_forward_f64(&p, None).unwrap(),
            attn_forward_f64(&h, None).unwrap(),
        );
        assert_eq!((f.o, f.lse), (fh.o, fh.lse));
        let (g, gh) = (
            attn_backward_f64(&p).unwrap(),
            attn_backward_f64(&h).unwrap(),
        );
        assert_eq!(g.dq, gh.dq);
        assert_eq!(to_hnd(&p, &g.dk), gh.dk);
        assert_eq!(to_hnd(&p, &g.dv), gh.dv);
        // A wrong length names the head-major shape.
        let short = AttnProblem {
            k: vec![0; 10],
            ..h
        };
        let e = attn_forward_f64(&short, None).unwrap_err().to_string();
        assert!(e.contains("[batch 2, hkv 2, kv_len 150, 128]"), "{e}");
    }

    #[test]
    fn one_block_by_hand() {
        // Keys 0, 1 with logits 0 and 1; values 2 and -4 on coordinate 1.
        let p = hand(1, 2, vec![0], &[(0.0, 2.0), (1.0, -4.0)]);
        let f = attn_forward_f64(&p, None).unwrap();
        let e = std::f64::consts::E;
        assert!((f.lse[0] - (1.0 + e).ln()).abs() < 1e-15);
        let want = (2.0 - 4.0 * e) / (1.0 + e);
        assert!((f.o[1] - want).abs() < 1e-15, "{} vs {want}", f.o[1]);
        assert_eq!(f.o[0], 0.0);
        // The same list with a repeat and a -1 counts block 0 once.
        let p2 = hand(1, 2, vec![0, -1, 0], &[(0.0, 2.0), (1.0, -4.0)]);
        let f2 = attn_forward_f64(&p2, None).unwrap();
        assert_eq!((f2.o.clone(), f2.lse.clone()), (f.o, f.lse));
    }

    #[test]
    fn causal_partial_block_and_empty() {
        // q_len 2 over kv_len 2: token 0 sits at position 0 and sees key 0 only.
        let p = hand(2, 2, vec![0, 0], &[(0.0, 2.0), (1.0, -4.0)]);
        let f = attn_forward_f64(&p, None).unwrap();
        assert_eq!((f.o[1], f.lse[0]), (2.0, 0.0));
        // No block: o = 0, lse = -inf, and no gradient.
        let mut p = hand(1, 2, vec![-1], &[(0.0, 2.0), (1.0, -4.0)]);
        p.d_o = vec![1.0; D];
        let f = attn_forward_f64(&p, None).unwrap();
        assert!(f.o.iter().all(|&x| x == 0.0) && f.lse[0] == f64::NEG_INFINITY);
        let g = attn_backward_f64(&p).unwrap();
        assert!(g.dq.iter().chain(&g.dk).chain(&g.dv).all(|&x| x == 0.0));
    }

    /// The visible sets by hand. kv_len 130 = blocks 0..63, 64..127 and the partial
    /// 128..129; q_len 3 puts the queries at positions 127, 128, 129.
    #[test]
    fn visible_sets_by_hand() {
        let ids = vec![
            2, -1, 1, 1, // pos 127: block 2 starts past it; block 1 listed twice
            2, 0, 2, -1, // pos 128: block 0, and block 2 up to the query itself
            1, 2, 2, 0, // pos 129: everything up to the end of the sequence
        ];
        let p = hand(3, 130, ids, &[]);
        let ranges = |rs: &[std::ops::Range<usize>]| -> Vec<usize> {
            rs.iter().flat_map(|r| r.clone()).collect()
        };
        let want: [Vec<usize>; 3] = [
            (64..128).collect(),
            ranges(&[0..64, 128..129]),
            (0..130).collect(),
        ];
        for (i, want) in want.iter().enumerate() {
            let got = visible_keys(&p, 0, i, 0);
            assert_eq!(
                &got, want,
                "reference visibility of query {i} (position {}) is not the contract's: causal end is the query's own position, kv_len the end of the sequence",
                p.q_pos(i)
            );
        }
        // No listed block, or only -1: nothing visible.
        let p = hand(1, 130, vec![-1, -1], &[]);
        assert!(visible_keys(&p, 0, 0, 0).is_empty());
    }

    /// The reference accumulates in f64: equal logits over one block of 64 keys make every
    /// probability exactly 1/64, and values 2^30, 1, -2^30 (exact in bf16) give
    /// o = (2^30 + 1 - 2^30) / 64 = 1/64 exactly in f64. In f32, 2^30/64 = 2^24 absorbs the
    /// 1/64 (its ulp is 2) and o comes out 0.
    #[test]
    fn output_is_exact_where_f32_is_not() {
        let mut keys = vec![(0.0f32, 0.0f32); 64];
        keys[0].1 = 1_073_741_824.0; // 2^30
        keys[1].1 = 1.0;
        keys[2].1 = -1_073_741_824.0;
        let p = hand(1, 64, vec![0], &keys);
        let f = attn_forward_f64(&p, None).unwrap();
        assert_eq!(
            f.o[1],
            1.0 / 64.0,
            "attention reference gives o = {:e}, exactly 1/64 in f64: it does not accumulate in FP64",
            f.o[1]
        );
        assert_eq!(f.lse[0], 64f64.ln(), "lse of 64 equal logits 0");
        // The backward's dv_j = P_j dO is exact too: 1/64 of dO.
        let mut p = p;
        p.d_o[1] = 3.0;
        let g = attn_backward_f64(&p).unwrap();
        assert!(
            (0..64).all(|j| g.dv[j * D + 1] == 3.0 / 64.0),
            "dv not exact"
        );
    }

    #[test]
    fn errors_name_the_field() {
        let p = hand(1, 65, vec![2], &[(0.0, 2.0)]);
        let e = attn_forward_f64(&p, None).unwrap_err().to_string();
        assert!(
            e.contains("ids[b 0, i 0, g 0, slot 0] = 2") && e.contains("[-1, 2)"),
            "{e}"
        );
        let mut p = hand(1, 65, vec![1], &[(0.0, 2.0)]);
        p.v.pop();
        assert!(attn_forward_f64(&p, None)
            .unwrap_err()
            .to_string()
            .contains("attention v has"));
        p.hkv = 2;
        assert!(matches!(
            attn_forward_f64(&p, None),
            Err(BackendError::Shape(_))
        ));
        let p = hand(1, 65, vec![1], &[(0.0, 2.0)]);
        assert!(attn_forward_f64(&p, Some(&[(0, 1)]))
            .unwrap_err()
            .to_string()
            .contains("rows[0]"));
        assert!(attn_backward_f64(&AttnProblem { d_o: vec![], ..p }).is_err());
    }

    /// The bad id's coordinates in the message are the ones it sits at, in every dimension
    /// (cargo mutants: with all four at zero, `/` and `%` swapped in the decomposition of the
    /// flat index went unseen), and zero query heads is a shape error even when hkv is not.
    #[test]
    fn errors_locate_the_bad_id_in_every_dimension() {
        // batch 2, q_len 3, hkv 2, t 4: flat index of (b 1, i 2, g 1, slot 2); every
        // coordinate differs from what a `/` <-> `%` swap in the decomposition gives.
        let mut p = random_problem(7, AttnDtype::Bf16, 2, 3, 130, 4, 2, 4);
        let (b, i, g, slot) = (1, 2, 1, 2);
        p.ids.iter_mut().for_each(|id| *id = -1);
        p.ids[((b * 3 + i) * 2 + g) * 4 + slot] = 9;
        let e = attn_forward_f64(&p, None).unwrap_err().to_string();
        assert!(
            e.contains("ids[b 1, i 2, g 1, slot 2] = 9") && e.contains("[-1, 3)"),
            "{e}"
        );
        let p = random_problem(7, AttnDtype::Bf16, 1, 1, 64, 0, 1, 1);
        let e = attn_forward_f64(&p, None).unwrap_err();
        assert!(
            matches!(&e, BackendError::Shape(m) if m.contains("hq = 0 query heads")),
            "{e}"
        );
    }

    /// The backward skips a (batch, token, KV head) whose upstream gradient is all zero; the
    /// skip must test that row's own d_o. Gradients are linear in d_o, so the gradient of one
    /// row's d_o plus that of all the others is the full gradient; a skip that reads another
    /// row's d_o drops a live row from one side (cargo mutants: the row offset with `*`
    /// turned into `/` went unseen while every row of every test's d_o was nonzero).
    #[test]
    fn zero_gradient_rows_are_skipped_by_their_own_d_o() {
        let p = random_problem(11, AttnDtype::Bf16, 2, 3, 130, 4, 2, 3);
        let group = p.group();
        let (b, i, g) = (1, 1, 1);
        let first = ((b * p.q_len + i) * p.hq + g * group) * D;
        let one_row: Vec<f32> = (0..p.d_o.len())
            .map(|n| {
                if (first..first + group * D).contains(&n) {
                    p.d_o[n]
                } else {
                    0.0
                }
            })
            .collect();
        let the_rest: Vec<f32> = p.d_o.iter().zip(&one_row).map(|(a, o)| a - o).collect();
        let full = attn_backward_f64(&p).unwrap();
        let a = attn_backward_f64(&AttnProblem {
            d_o: one_row,
            ..p.clone()
        })
        .unwrap();
        let r = attn_backward_f64(&AttnProblem {
            d_o: the_rest,
            ..p.clone()
        })
        .unwrap();
        for (name, f, x, y) in [
            ("dq", &full.dq, &a.dq, &r.dq),
            ("dk", &full.dk, &a.dk, &r.dk),
            ("dv", &full.dv, &a.dv, &r.dv),
        ] {
            let scale = f.iter().fold(0f64, |m, v| m.max(v.abs()));
            for n in 0..f.len() {
                assert!(
                    (x[n] + y[n] - f[n]).abs() <= 1e-12 * scale,
                    "{name}[{n}]: one row {} + the rest {} != full {}",
                    x[n],
                    y[n],
                    f[n]
                );
            }
        }
        assert!(
            a.dq[first..first + group * D].iter().any(|v| *v != 0.0),
            "the live row's dq is zero"
        );
    }

    #[test]
    fn rows_subset_matches_full() {
        let p = random_problem(3, AttnDtype::F16, 2, 3, 130, 4, 2, 3);
        let full = attn_forward_f64(&p, None).unwrap();
        let sub = attn_forward_f64(&p, Some(&[(1, 2), (0, 0)])).unwrap();
        let w = p.hq * D;
        for r in [5, 0] {
            assert_eq!(sub.o[r * w..(r + 1) * w], full.o[r * w..(r + 1) * w]);
            assert_eq!(
                sub.lse[r * p.hq..(r + 1) * p.hq],
                full.lse[r * p.hq..(r + 1) * p.hq]
            );
        }
        assert!(sub.o[w..2 * w].iter().all(|&x| x == 0.0));
    }

    /// Central differences of `L = sum(d_o * o)` against the analytic gradients, on sampled
    /// coordinates of q, k and v.
    #[test]
    fn backward_matches_finite_differences() {
        let p = random_problem(11, AttnDtype::Bf16, 1, 3, 100, 2, 1, 3);
        let q0 = widen(&p, &p.q);
        let kv0 = Kv {
            k: widen(&p, &p.k),
            v: widen(&p, &p.v),
        };
        let d_o: Vec<f64> = p.d_o.iter().map(|&x| x as f64).collect();
        let g = backward_core(&p, &q0, &kv0, &d_o);
        assert!(
            g.dk.iter().any(|&x| x != 0.0),
            "the case must see some keys"
        );
        let loss = |q: &[f64], kv: &Kv| -> f64 {
            forward_core(&p, q, kv)
                .iter()
                .zip(&d_o)
                .map(|(a, b)| a * b)
                .sum()
        };
        let h = 1e-6;
        let mut r = Rng(5);
        for which in 0..3 {
            let n = [q0.len(), kv0.k.len(), kv0.v.len()][which];
            let grad = [&g.dq, &g.dk, &g.dv][which];
            for _ in 0..40 {
                let c = r.below(n);
                let eval = |delta: f64| {
                    let (mut q, mut kv) = (
                        q0.clone(),
                        Kv {
                            k: kv0.k.clone(),
                            v: kv0.v.clone(),
                        },
                    );
                    [&mut q, &mut kv.k, &mut kv.v][which][c] += delta;
                    loss(&q, &kv)
                };
                let fd = (eval(h) - eval(-h)) / (2.0 * h);
                assert!(
                    (fd - grad[c]).abs() <= 1e-7 + 1e-6 * grad[c].abs(),
                    "tensor {which} [{c}]: fd {fd} vs {}",
                    grad[c]
                );
            }
        }
    }
}
