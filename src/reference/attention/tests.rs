//! Tests of the FP64 attention reference: hand-worked cases of the contract (visibility,
//! causal end, partial blocks, empty lists, repeats), exactness of the f64 accumulation,
//! error messages, NHD vs head-major layouts, and the backward against finite differences.
//! `random_problem` and `Rng` are shared with the CPU backend's tests.

use super::backward::backward_core;
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
        do_dtype: crate::problem::GradDtype::F32,
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
        do_dtype: crate::problem::GradDtype::F32,
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
