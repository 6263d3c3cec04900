//! The decode forward with its K/V rows fetched by cp.async.bulk (`QSA_ATTN_DEC_COPY=bulk`, the
//! `_bk_` kernels: one bulk copy per 256-byte row, one mbarrier per warp stage; sm_90a only)
//! emulated on sm_90 under the race check's schedules (bulk copies land at issue, at the first
//! poll of their mbarrier, or by coin: kernels/common/emu_mbarrier.h). o and lse against FP64
//! within the mma limit, and bit for bit equal to the cp.async kernel of the same plan (the copy
//! form moves bytes only: same units, same order, same arithmetic). Shapes: matrix.yaml's
//! attn_emu_g4 / attn_emu_g8_f16 and the issue-13 shapes cut down (group 8 and 16, 1 and 16
//! queries), on -1, repeated and causal-edge ids (a unit past the edge: rows zeroed, not fetched).

mod emu_matrix;

use emu_matrix::{assert_o_lse, caps, matrix, par_each, switches};

use qsa::emu::{race, Schedule};
use qsa::matrix::{Case, Matrix};
use qsa::problem::{AttnForward, AttnProblem, Output, Problem};
use qsa::reference::attention::attn_forward_f64;

type Pairs = &'static [(&'static str, &'static str)];

/// (label, the bulk plan's switches, the dispatch name it must report). Each runs again with
/// QSA_ATTN_DEC_COPY=cp_async in place of bulk for the bit-for-bit comparison.
const PLANS: [(&str, Pairs, &str); 6] = [
    ("auto shape", &[("QSA_ATTN_DEC_COPY", "bulk")], "decode"),
    (
        "6 warps x 4 stages, no split",
        &[
            ("QSA_ATTN_DEC_COPY", "bulk"),
            ("QSA_ATTN_DEC_WARPS", "6"),
            ("QSA_ATTN_DEC_STAGES", "4"),
            ("QSA_ATTN_DEC_SPLITS", "1"),
        ],
        "decode",
    ),
    (
        "one warp x 3 stages, split 2, combine launch",
        &[
            ("QSA_ATTN_DEC_COPY", "bulk"),
            ("QSA_ATTN_DEC_WARPS", "1"),
            ("QSA_ATTN_DEC_STAGES", "3"),
            ("QSA_ATTN_DEC_SPLITS", "2"),
            ("QSA_ATTN_DEC_MERGE", "launch"),
        ],
        "decode_combine",
    ),
    (
        "3 warps x 2 stages, split 5, in-kernel merge",
        &[
            ("QSA_ATTN_DEC_COPY", "bulk"),
            ("QSA_ATTN_DEC_WARPS", "3"),
            ("QSA_ATTN_DEC_STAGES", "2"),
            ("QSA_ATTN_DEC_SPLITS", "5"),
        ],
        "decode_split",
    ),
    (
        "cluster merge",
        &[
            ("QSA_ATTN_DEC_COPY", "bulk"),
            ("QSA_ATTN_DEC_MERGE", "cluster"),
        ],
        "decode_cluster",
    ),
    (
        "interleaved units, 3 warps, look-ahead 2, split 2",
        &[
            ("QSA_ATTN_DEC_COPY", "bulk"),
            ("QSA_ATTN_DEC_ORDER", "interleave"),
            ("QSA_ATTN_DEC_AHEAD", "2"),
            ("QSA_ATTN_DEC_WARPS", "3"),
            ("QSA_ATTN_DEC_SPLITS", "2"),
        ],
        "decode_split",
    ),
];

/// `base`'s case with another query count and group (one KV head): the issue-13 shapes at the
/// emulator's size.
fn reshaped(m: &Matrix, base: &str, q_len: usize, group: usize) -> Case {
    let mut c = m.cases.iter().find(|c| c.name == base).unwrap().clone();
    let a = c.attention.as_mut().unwrap();
    a.q_len = q_len;
    a.hq = group;
    a.hkv = 1;
    a.batch = 1;
    c
}

/// (label, problem) of every shape and distribution the bulk form is checked on.
fn problems(m: &Matrix) -> Vec<(String, AttnProblem)> {
    let mut out = Vec::new();
    let mut add = |c: &Case, dists: &[&str]| {
        for d in dists {
            let a = c.attention.as_ref().unwrap();
            let label = format!("{} ({} q, group {})/{d}", c.name, a.q_len, a.hq / a.hkv);
            out.push((label, qsa::cases::attn_problem(m.seed, c, d).unwrap()));
        }
    };
    let find = |n: &str| m.cases.iter().find(|c| c.name == n).unwrap().clone();
    add(
        &find("attn_emu_g4"),
        &["repeat_ids", "invalid_ids", "causal_edge"],
    );
    add(&find("attn_emu_g8_f16"), &["causal_edge", "invalid_ids"]);
    for (q_len, group) in [(16, 16), (1, 16), (16, 8), (1, 8)] {
        add(
            &reshaped(m, "attn_emu_g4", q_len, group),
            &["repeat_ids", "invalid_ids", "causal_edge"],
        );
    }
    out
}

fn forward(
    caps: &qsa::dispatch::TargetCaps,
    sw: &[(&str, &str)],
    p: &AttnProblem,
    what: &str,
    schedules: &[Schedule],
) -> (String, AttnForward) {
    let run = race::check(
        caps,
        &switches(sw),
        &Problem::AttnForward(p.clone()),
        schedules,
    )
    .unwrap_or_else(|e| panic!("{what}: {e}"));
    let Output::AttnForward(o) = run.output else {
        panic!("{what}: no forward output")
    };
    (run.dispatched, o)
}

#[test]
fn bulk_copied_decode_matches_fp64_and_the_cp_async_kernel_bit_for_bit() {
    let m = matrix();
    let caps = caps(&m, "sm_90");
    for (label, p) in problems(&m) {
        let want = attn_forward_f64(&p, None).unwrap();
        par_each(&PLANS, |&(plan, sw, name)| {
            let what = format!("sm_90 {label} {plan}");
            let (dispatched, b) = forward(&caps, sw, &p, &what, &Schedule::RACE_CHECK);
            assert!(
                dispatched.starts_with(name),
                "{what}: dispatched {dispatched} (want {name})"
            );
            assert_o_lse("bulk-copied decode", &what, &b, &want, "");
            let twin: Vec<(&str, &str)> = sw
                .iter()
                .map(|&(k, v)| {
                    if k == "QSA_ATTN_DEC_COPY" {
                        (k, "cp_async")
                    } else {
                        (k, v)
                    }
                })
                .collect();
            // The twin is a bit-for-bit reference only (emu_attention_decode.rs race-checks the
            // cp.async kernels): one schedule.
            let twin_what = format!("{what} (cp_async twin)");
            let (_, c) = forward(&caps, &twin, &p, &twin_what, &Schedule::RACE_CHECK[..1]);
            let same =
                |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
            assert!(
                same(&b.o, &c.o) && same(&b.lse, &c.lse),
                "bulk-copied decode {what}: o / lse differ from the cp.async kernel's (the copy \
                 form must move bytes only: a row fetched to the wrong place, or a causal-edge row \
                 not zeroed)"
            );
        });
    }
}

/// The copies-only probe (QSA_ATTN_DEC_PROBE=no_math, the card's copy floor) on the bulk form:
/// every copy issued is waited on (the emulator fails a block that exits with copies in flight),
/// and the output is the probe's (o = 0, lse = -inf), not the attention.
#[test]
fn bulk_copied_decode_no_math_probe_waits_for_every_copy() {
    let m = matrix();
    let caps = caps(&m, "sm_90");
    let c = reshaped(&m, "attn_emu_g4", 16, 16);
    let p = qsa::cases::attn_problem(m.seed, &c, "causal_edge").unwrap();
    for sw in [
        &[
            ("QSA_ATTN_DEC_COPY", "bulk"),
            ("QSA_ATTN_DEC_PROBE", "no_math"),
        ][..],
        &[
            ("QSA_ATTN_DEC_COPY", "bulk"),
            ("QSA_ATTN_DEC_PROBE", "no_math"),
            ("QSA_ATTN_DEC_MERGE", "cluster"),
        ][..],
    ] {
        let what = format!("sm_90 16 q group 16 no_math {sw:?}");
        let (_, o) = forward(&caps, sw, &p, &what, &Schedule::RACE_CHECK);
        assert!(
            o.o.iter().all(|&x| x == 0.0) && o.lse.iter().all(|&x| x == f32::NEG_INFINITY),
            "{what}: the probe's output is o = 0, lse = -inf"
        );
    }
}

/// Rows past the causal edge are not fetched; their lanes zero them, because p = 0 there and
/// 0 x a stale NaN is not 0. The race check's poisons are finite bf16 / f16 (0xa5a5, 0x5a5a, ...),
/// so stale rows are harmless under them; a random schedule seeded 0xc3 poisons shared memory
/// with 0xff bytes (0x3c ^ 0xc3: src/emu/mod.rs Schedule::poison), 0xffff being NaN in bf16 and
/// f16, as uninitialised shared memory on the card may hold.
#[test]
fn bulk_copied_decode_zeroes_rows_past_the_causal_edge() {
    let m = matrix();
    let caps = caps(&m, "sm_90");
    let nan_poison = Schedule::Random(0xc3);
    for c in [
        reshaped(&m, "attn_emu_g4", 16, 16),
        m.cases
            .iter()
            .find(|c| c.name == "attn_emu_g8_f16")
            .unwrap()
            .clone(),
    ] {
        let p = qsa::cases::attn_problem(m.seed, &c, "causal_edge").unwrap();
        let want = attn_forward_f64(&p, None).unwrap();
        for (plan, sw, _) in PLANS
            .iter()
            .filter(|(l, _, _)| matches!(*l, "auto shape" | "6 warps x 4 stages, no split"))
        {
            let what = format!("sm_90 {}/causal_edge {plan}, NaN poison", c.name);
            let run = race::run_scheduled(
                &caps,
                &switches(sw),
                &Problem::AttnForward(p.clone()),
                nan_poison,
            )
            .unwrap_or_else(|e| panic!("{what}: {e}"));
            let Output::AttnForward(o) = run.output else {
                panic!("{what}: no forward output")
            };
            assert_o_lse(
                "bulk-copied decode",
                &what,
                &o,
                &want,
                " (a row past the causal edge left unzeroed?)",
            );
        }
    }
}
