//! The decode forward on head-major K / V (`kv_layout: hnd`, [batch, hkv, kv_len, D]; the
//! kernel's DEC_OPT_HND) emulated on sm_90 and sm_86 under the race check's schedules: o and
//! lse against FP64 (src/reference/attention.rs, its own head-major indexing) within the mma
//! limit, and bit for bit equal to the same data in fla's layout (the layout moves addresses
//! only: same units, same order, same arithmetic). Case attn_dec_hnd_emu of matrix.yaml:
//! batch 2 (the head stride spans a whole sequence), partial last block, -1 / repeated ids,
//! causal edges.

mod emu_matrix;

use emu_matrix::{assert_o_lse, caps, matrix, par_each, switches};

use qsa::emu::{race, Schedule};
use qsa::problem::{AttnProblem, KvLayout, Output, Problem, HEAD_DIM};
use qsa::reference::attention::attn_forward_f64;

type Pairs = &'static [(&'static str, &'static str)];

/// (label, switches, targets): one CTA per item, split merges (ticket, second launch, the
/// sm_90 cluster and push merges), interleaved units with L2 look-ahead, pairs of units, units
/// claimed from a CTA counter (the same schedule claims the same way on both layouts), q staged
/// once per CTA (the `_qs_` kernels), K/V rows by cp.async.bulk (the `_bk_` kernels, sm_90a: one
/// copy per row, at the head-major token stride).
const PLANS: [(&str, Pairs, &[&str]); 11] = [
    ("auto", &[], &["sm_90", "sm_86"]),
    (
        "split 3, combine launch",
        &[
            ("QSA_ATTN_DEC_SPLITS", "3"),
            ("QSA_ATTN_DEC_MERGE", "launch"),
        ],
        &["sm_90", "sm_86"],
    ),
    (
        "cluster merge",
        &[("QSA_ATTN_DEC_MERGE", "cluster")],
        &["sm_90"],
    ),
    ("flat merge", &[("QSA_ATTN_DEC_MERGE", "flat")], &["sm_90"]),
    (
        "q per CTA, split 2",
        &[("QSA_ATTN_DEC_QLOAD", "cta"), ("QSA_ATTN_DEC_SPLITS", "2")],
        &["sm_90", "sm_86"],
    ),
    (
        "push merge, L2 prefetch",
        &[
            ("QSA_ATTN_DEC_MERGE", "push"),
            ("QSA_ATTN_DEC_PREFETCH", "256"),
        ],
        &["sm_90"],
    ),
    (
        "interleaved units, 3 warps, look-ahead 2, split 2",
        &[
            ("QSA_ATTN_DEC_ORDER", "interleave"),
            ("QSA_ATTN_DEC_AHEAD", "2"),
            ("QSA_ATTN_DEC_WARPS", "3"),
            ("QSA_ATTN_DEC_SPLITS", "2"),
            ("QSA_ATTN_DEC_STAGES", "1"),
        ],
        &["sm_90"],
    ),
    (
        "pairs of units, split 3",
        &[
            ("QSA_ATTN_DEC_PAIR", "1"),
            ("QSA_ATTN_DEC_SPLITS", "3"),
            ("QSA_ATTN_DEC_WARPS", "4"),
        ],
        &["sm_90"],
    ),
    (
        "bulk copies, 3 warps x 2 stages, split 2",
        &[
            ("QSA_ATTN_DEC_COPY", "bulk"),
            ("QSA_ATTN_DEC_WARPS", "3"),
            ("QSA_ATTN_DEC_STAGES", "2"),
            ("QSA_ATTN_DEC_SPLITS", "2"),
        ],
        &["sm_90"],
    ),
    (
        "bulk copies, cluster merge",
        &[
            ("QSA_ATTN_DEC_COPY", "bulk"),
            ("QSA_ATTN_DEC_MERGE", "cluster"),
        ],
        &["sm_90"],
    ),
    (
        "dynamic units, 3 warps x 2 stages",
        &[
            ("QSA_ATTN_DEC_ORDER", "dynamic"),
            ("QSA_ATTN_DEC_WARPS", "3"),
            ("QSA_ATTN_DEC_STAGES", "2"),
        ],
        &["sm_90"],
    ),
];

/// `p` (head-major) with its K / V placed in fla's layout.
fn nhd_twin(p: &AttnProblem) -> AttnProblem {
    let d = HEAD_DIM;
    let place = |x: &[u16]| {
        let mut out = vec![0u16; x.len()];
        for b in 0..p.batch {
            for g in 0..p.hkv {
                for j in 0..p.kv_len {
                    let src = ((b * p.hkv + g) * p.kv_len + j) * d;
                    let dst = ((b * p.kv_len + j) * p.hkv + g) * d;
                    out[dst..dst + d].copy_from_slice(&x[src..src + d]);
                }
            }
        }
        out
    };
    AttnProblem {
        k: place(&p.k),
        v: place(&p.v),
        kv_layout: KvLayout::Nhd,
        ..p.clone()
    }
}

#[test]
fn head_major_decode_matches_fp64_and_the_nhd_kernel_bit_for_bit() {
    let m = matrix();
    let c = m
        .cases
        .iter()
        .find(|c| c.name == "attn_dec_hnd_emu")
        .unwrap();
    for target in ["sm_90", "sm_86"] {
        let caps = caps(&m, target);
        for dist in ["causal_edge", "repeat_ids", "invalid_ids"] {
            let p = qsa::cases::attn_problem(m.seed, c, dist).unwrap();
            assert_eq!(p.kv_layout, KvLayout::Hnd, "the case is head-major");
            let nhd = nhd_twin(&p);
            let want = attn_forward_f64(&p, None).unwrap();
            par_each(&PLANS, |&(label, sw, targets)| {
                if !targets.contains(&target) {
                    return;
                }
                let what = format!("{target} attn_dec_hnd_emu/{dist} {label}");
                // The head-major run under the race check's schedules; its nhd twin, only a
                // bit-for-bit reference here (emu_attention_decode.rs race-checks that kernel),
                // under the first.
                let run = |q: &AttnProblem, schedules: &[Schedule]| {
                    let r = race::check(
                        &caps,
                        &switches(sw),
                        &Problem::AttnForward(q.clone()),
                        schedules,
                    )
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert!(
                        r.dispatched.starts_with("decode"),
                        "{what}: dispatched {}",
                        r.dispatched
                    );
                    let Output::AttnForward(o) = r.output else {
                        panic!("{what}: no forward output")
                    };
                    o
                };
                let (h, n) = (
                    run(&p, &Schedule::RACE_CHECK),
                    run(&nhd, &Schedule::RACE_CHECK[..1]),
                );
                assert_o_lse("head-major decode", &what, &h, &want, "");
                let same =
                    |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
                assert!(
                    same(&h.o, &n.o) && same(&h.lse, &n.lse),
                    "head-major decode {what}: o / lse differ from the same data in fla's layout \
                     (the layout must change addresses only)"
                );
            });
        }
    }
}
