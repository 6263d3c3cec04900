//! The decode forward (`qsa_attn_dec_fwd_*`, kernels/common/attention_decode.h) emulated on
//! sm_90 and sm_86 through the GPU host code (src/gpu/attention_decode.rs) under the race
//! check's schedules, in every plan shape the sweep switches reach: one CTA per item, splits
//! merged by the item's last CTA (a ticket), by qsa_attn_combine or through a thread-block
//! cluster's distributed shared memory (sm_90), one warp with a one-stage
//! ring, eight warps, uneven splits. o and lse against FP64 (src/reference/attention.rs)
//! within the mma limit (matrix.yaml gates.error_limits.attention.mma: 5e-5), on the edge
//! distributions: -1 and out-of-range-causal ids, repeated ids, causal edges and the partial
//! last block (kv_len 300 and 200 are not multiples of 64), bf16 and f16.

mod emu_matrix;

use emu_matrix::{caps, matrix, par_each, switches};

use qsa::emu::{race, Schedule};
use qsa::problem::{Output, Problem};
use qsa::reference::attention::{attn_forward_f64, AttnForwardF64};

/// o and lse of a decode forward's output against FP64 within emu_matrix::MMA_LIMIT; `why` (empty, or
/// " (what the failure suggests)") ends the message.
fn assert_o_lse(what: &str, output: Output, want: &AttnForwardF64, why: &str) {
    let Output::AttnForward(o) = output else {
        panic!("{what}: no forward output")
    };
    emu_matrix::assert_o_lse("decode forward", what, &o, want, why);
}

/// Switches as (key, value) pairs.
type Pairs = &'static [(&'static str, &'static str)];

/// (label, switches, the dispatch name the plan must report).
const PLANS: [(&str, Pairs, &str); 27] = [
    ("auto", &[], "decode"),
    (
        "split 3, combine launch",
        &[
            ("QSA_ATTN_DEC_SPLITS", "3"),
            ("QSA_ATTN_DEC_MERGE", "launch"),
        ],
        "decode_combine",
    ),
    (
        "split 5, in-kernel merge, 2 warps x 2 stages",
        &[
            ("QSA_ATTN_DEC_SPLITS", "5"),
            ("QSA_ATTN_DEC_WARPS", "2"),
            ("QSA_ATTN_DEC_STAGES", "2"),
        ],
        "decode_split",
    ),
    (
        "one warp, one stage, no split",
        &[
            ("QSA_ATTN_DEC_SPLITS", "1"),
            ("QSA_ATTN_DEC_WARPS", "1"),
            ("QSA_ATTN_DEC_STAGES", "1"),
        ],
        "decode",
    ),
    (
        "eight warps, no split",
        &[("QSA_ATTN_DEC_SPLITS", "1"), ("QSA_ATTN_DEC_WARPS", "8")],
        "decode",
    ),
    (
        "pairs of units, split 3",
        &[
            ("QSA_ATTN_DEC_PAIR", "1"),
            ("QSA_ATTN_DEC_SPLITS", "3"),
            ("QSA_ATTN_DEC_WARPS", "4"), // sm_86: 8 warps x 2 stages do not fit
        ],
        "decode_split",
    ),
    (
        "pairs of units, one warp, three stages",
        &[
            ("QSA_ATTN_DEC_PAIR", "1"),
            ("QSA_ATTN_DEC_SPLITS", "1"),
            ("QSA_ATTN_DEC_WARPS", "1"),
            ("QSA_ATTN_DEC_STAGES", "3"),
        ],
        "decode",
    ),
    // sm_90 only; sm_86 has no clusters and falls back to the ticket merge.
    (
        "cluster merge",
        &[("QSA_ATTN_DEC_MERGE", "cluster")],
        "decode_cluster",
    ),
    // sm_90 only (sm_86 falls back to the ticket merge): the inboxes past a two-stage ring of
    // four warps, and the copies' L2 prefetch hint (the same copy here).
    (
        "push merge, 4 warps x 2 stages, L2 prefetch",
        &[
            ("QSA_ATTN_DEC_MERGE", "push"),
            ("QSA_ATTN_DEC_WARPS", "4"),
            ("QSA_ATTN_DEC_STAGES", "2"),
            ("QSA_ATTN_DEC_PREFETCH", "256"),
        ],
        "decode_push",
    ),
    (
        "push merge",
        &[("QSA_ATTN_DEC_MERGE", "push")],
        "decode_push",
    ),
    // sm_90 only (sm_86 falls back to the ticket merge): the one-level merge over every warp of
    // the cluster; 3 warps x 2 stages (absent warps 3-7 of every rank, a two-stage area stride)
    // and 8 warps x 1 stage (the one-query default's shape, the areas back to back).
    (
        "flat merge",
        &[("QSA_ATTN_DEC_MERGE", "flat")],
        "decode_flat",
    ),
    (
        "flat merge, 3 warps x 2 stages",
        &[
            ("QSA_ATTN_DEC_MERGE", "flat"),
            ("QSA_ATTN_DEC_WARPS", "3"),
            ("QSA_ATTN_DEC_STAGES", "2"),
        ],
        "decode_flat",
    ),
    (
        "flat merge, 8 warps x 1 stage, L2 prefetch",
        &[
            ("QSA_ATTN_DEC_MERGE", "flat"),
            ("QSA_ATTN_DEC_WARPS", "8"),
            ("QSA_ATTN_DEC_STAGES", "1"),
            ("QSA_ATTN_DEC_PREFETCH", "256"),
        ],
        "decode_flat",
    ),
    // sm_90 only (sm_86 falls back to the ticket merge): the lean merge (each warp's partial over
    // its own ring, one CTA barrier, rows pushed to their merging rank's inbox past the ring);
    // 3 warps x 2 stages (absent warps, a two-stage area stride), and with q staged per CTA
    // (q's tile past the inbox, where pushes land while a slower CTA may still read q).
    (
        "lean merge",
        &[("QSA_ATTN_DEC_MERGE", "lean")],
        "decode_lean",
    ),
    (
        "lean merge, 3 warps x 2 stages",
        &[
            ("QSA_ATTN_DEC_MERGE", "lean"),
            ("QSA_ATTN_DEC_WARPS", "3"),
            ("QSA_ATTN_DEC_STAGES", "2"),
        ],
        "decode_lean",
    ),
    (
        "lean merge, q per CTA",
        &[
            ("QSA_ATTN_DEC_MERGE", "lean"),
            ("QSA_ATTN_DEC_QLOAD", "cta"),
        ],
        "decode_lean",
    ),
    // q staged once per CTA (QSA_ATTN_DEC_QLOAD=cta, the `_qs_` kernels): 8 warps (one chunk of
    // q per thread; group 4 and 8: rows past the chunk's zero-filled), 3 warps x 2 stages over 3
    // splits (threads copy several chunks), one warp x 4 stages (q's group waited past four ring
    // groups), and the sm_90 cluster merge (q's tile past the CTA result).
    ("q per CTA", &[("QSA_ATTN_DEC_QLOAD", "cta")], "decode"),
    (
        "q per CTA, 3 warps x 2 stages, split 3",
        &[
            ("QSA_ATTN_DEC_QLOAD", "cta"),
            ("QSA_ATTN_DEC_WARPS", "3"),
            ("QSA_ATTN_DEC_STAGES", "2"),
            ("QSA_ATTN_DEC_SPLITS", "3"),
        ],
        "decode_split",
    ),
    (
        "q per CTA, one warp x 4 stages",
        &[
            ("QSA_ATTN_DEC_QLOAD", "cta"),
            ("QSA_ATTN_DEC_WARPS", "1"),
            ("QSA_ATTN_DEC_STAGES", "4"),
            ("QSA_ATTN_DEC_SPLITS", "1"),
        ],
        "decode",
    ),
    (
        "q per CTA, cluster merge",
        &[
            ("QSA_ATTN_DEC_QLOAD", "cta"),
            ("QSA_ATTN_DEC_MERGE", "cluster"),
        ],
        "decode_cluster",
    ),
    // Units dealt round-robin to the warps (uneven counts: 3 warps), L2 look-ahead of 2.
    (
        "interleaved units, 3 warps, look-ahead 2, split 2",
        &[
            ("QSA_ATTN_DEC_ORDER", "interleave"),
            ("QSA_ATTN_DEC_AHEAD", "2"),
            ("QSA_ATTN_DEC_WARPS", "3"),
            ("QSA_ATTN_DEC_SPLITS", "2"),
            ("QSA_ATTN_DEC_STAGES", "1"),
        ],
        "decode_split",
    ),
    // Units claimed from a CTA counter (the `_dyn_` kernels): 3 warps x 2 stages, 2 splits (the
    // prologue's fixed units, then claims; the race check's schedules change which warp takes
    // which unit), and the sm_90 cluster merge (one stage, a warp's claims cross no split).
    (
        "dynamic units, 3 warps x 2 stages, split 2",
        &[
            ("QSA_ATTN_DEC_ORDER", "dynamic"),
            ("QSA_ATTN_DEC_WARPS", "3"),
            ("QSA_ATTN_DEC_SPLITS", "2"),
            ("QSA_ATTN_DEC_STAGES", "2"),
        ],
        "decode_split",
    ),
    (
        "dynamic units, cluster merge",
        &[
            ("QSA_ATTN_DEC_ORDER", "dynamic"),
            ("QSA_ATTN_DEC_MERGE", "cluster"),
        ],
        "decode_cluster",
    ),
    // O's head dimension split over warp pairs (QSA_ATTN_DEC_DIMS=half, the `_hd_` kernels): one
    // CTA per item (warp 2p + 1 stores dims 64-127 of pair p's partial, warp 2p its m and l),
    // two pairs interleaved over three splits (the ticket merge), one pair over two splits (the
    // combine launch), and the sm_90 cluster merge with q staged per CTA.
    ("dims split", &[("QSA_ATTN_DEC_DIMS", "half")], "decode"),
    (
        "dims split, 4 warps x 2 stages, interleaved, split 3",
        &[
            ("QSA_ATTN_DEC_DIMS", "half"),
            ("QSA_ATTN_DEC_WARPS", "4"), // sm_86: 6 warps x 2 stages do not fit
            ("QSA_ATTN_DEC_STAGES", "2"),
            ("QSA_ATTN_DEC_ORDER", "interleave"),
            ("QSA_ATTN_DEC_SPLITS", "3"),
        ],
        "decode_split",
    ),
    (
        "dims split, 2 warps x 1 stage, split 2, combine launch",
        &[
            ("QSA_ATTN_DEC_DIMS", "half"),
            ("QSA_ATTN_DEC_WARPS", "2"),
            ("QSA_ATTN_DEC_STAGES", "1"),
            ("QSA_ATTN_DEC_SPLITS", "2"),
            ("QSA_ATTN_DEC_MERGE", "launch"),
        ],
        "decode_combine",
    ),
    (
        "dims split, cluster merge",
        &[
            ("QSA_ATTN_DEC_DIMS", "half"),
            ("QSA_ATTN_DEC_MERGE", "cluster"),
        ],
        "decode_cluster",
    ),
];

#[test]
fn decode_forward_matches_fp64_in_every_plan_shape() {
    let m = matrix();
    for target in ["sm_90", "sm_86"] {
        let caps = caps(&m, target);
        for (case, dist) in [
            ("attn_emu_g4", "repeat_ids"),
            ("attn_emu_g4", "invalid_ids"),
            ("attn_emu_g4", "causal_edge"),
            ("attn_emu_g8_f16", "causal_edge"),
            ("attn_emu_g8_f16", "invalid_ids"),
        ] {
            let c = m.cases.iter().find(|c| c.name == case).unwrap();
            let p = qsa::cases::attn_problem(m.seed, c, dist).unwrap();
            let want = attn_forward_f64(&p, None).unwrap();
            par_each(&PLANS, |&(label, sw, name)| {
                let name = if target == "sm_86"
                    && matches!(
                        name,
                        "decode_cluster" | "decode_push" | "decode_flat" | "decode_lean"
                    ) {
                    "decode_split"
                } else {
                    name
                };
                let what = format!("{target} {case}/{dist} {label}");
                let run = race::check(
                    &caps,
                    &switches(sw),
                    &Problem::AttnForward(p.clone()),
                    &Schedule::RACE_CHECK,
                )
                .unwrap_or_else(|e| panic!("{what}: {e}"));
                assert!(
                    run.dispatched.starts_with(name),
                    "{what}: dispatched {} (want {name})",
                    run.dispatched
                );
                assert_o_lse(&what, run.output, &want, "");
            });
        }
    }
}

/// A sharp softmax (scale 8 instead of 1/sqrt(128): scores ~90x wider, so a later unit's score
/// often passes the running max by far more than the lazy rescale's slack of 2^8): the kernel's
/// rescale of l and O runs after the first unit, which N(0,1) scores at the usual scale
/// almost never reach; skipped, exp2 of the unrescaled scores overflows.
#[test]
fn decode_forward_rescales_on_a_sharp_softmax() {
    let m = matrix();
    for target in ["sm_90", "sm_86"] {
        let caps = caps(&m, target);
        for case in ["attn_emu_g4", "attn_emu_g8_f16"] {
            let c = m.cases.iter().find(|c| c.name == case).unwrap();
            let mut p = qsa::cases::attn_problem(m.seed, c, "random_ids").unwrap();
            p.scale = 8.0;
            let want = attn_forward_f64(&p, None).unwrap();
            for (label, sw, _) in PLANS.iter().filter(|(l, _, _)| {
                matches!(
                    *l,
                    "auto"
                        | "one warp, one stage, no split"
                        | "pairs of units, one warp, three stages"
                        | "dynamic units, 3 warps x 2 stages, split 2"
                        | "q per CTA, 3 warps x 2 stages, split 3"
                        | "dims split"
                        | "dims split, cluster merge"
                )
            }) {
                let what = format!("{target} {case}/random_ids scale 8 {label}");
                let run = race::check(
                    &caps,
                    &switches(sw),
                    &Problem::AttnForward(p.clone()),
                    &Schedule::RACE_CHECK,
                )
                .unwrap_or_else(|e| panic!("{what}: {e}"));
                assert!(
                    run.dispatched.starts_with("decode"),
                    "{what}: dispatched {}",
                    run.dispatched
                );
                assert_o_lse(&what, run.output, &want, " (the online softmax's rescale)");
            }
        }
    }
}

/// q staged once per CTA (the `_qs_` kernels): each thread copies its own chunks of q, and only
/// the CTA barrier after its wait makes the other warps' chunks visible to a warp's ldmatrix.
/// The race check's schedules cannot see that barrier go (every thread stages q before its
/// first shuffle, and the list's shuffles hold each warp until all its lanes arrive, so q is
/// whole before any ldmatrix); one wave at a time (Schedule::WaveFirst) runs warp 0 up to the
/// barrier before warp 1 has staged anything, so without it warp 0 multiplies by poison.
#[test]
fn q_staged_per_cta_waits_for_every_warp_one_wave_at_a_time() {
    let m = matrix();
    let caps = caps(&m, "sm_90");
    for (case, dist) in [
        ("attn_emu_g4", "random_ids"),
        ("attn_emu_g8_f16", "causal_edge"),
    ] {
        let c = m.cases.iter().find(|c| c.name == case).unwrap();
        let p = qsa::cases::attn_problem(m.seed, c, dist).unwrap();
        let want = attn_forward_f64(&p, None).unwrap();
        for (label, sw, _) in PLANS.iter().filter(|(l, _, _)| {
            matches!(
                *l,
                "q per CTA" | "q per CTA, 3 warps x 2 stages, split 3" | "q per CTA, cluster merge"
            )
        }) {
            let what = format!("sm_90 {case}/{dist} {label}, one wave at a time");
            let run = race::run_scheduled(
                &caps,
                &switches(sw),
                &Problem::AttnForward(p.clone()),
                Schedule::WaveFirst,
            )
            .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_o_lse(
                &what,
                run.output,
                &want,
                " (q read before every warp's chunk landed?)",
            );
        }
    }
}

/// The lean merge (the `_lean_` kernels) one wave at a time: warp 0 runs through its partial's
/// store up to the one CTA barrier before any other warp has stored, so a read of the warps'
/// partials before that barrier multiplies ring bytes (poison).
#[test]
fn lean_merge_waits_for_every_warp_one_wave_at_a_time() {
    let m = matrix();
    let caps = caps(&m, "sm_90");
    let c = m.cases.iter().find(|c| c.name == "attn_emu_g4").unwrap();
    let p = qsa::cases::attn_problem(m.seed, c, "causal_edge").unwrap();
    let want = attn_forward_f64(&p, None).unwrap();
    for (label, sw, _) in PLANS.iter().filter(|(l, _, _)| l.starts_with("lean merge")) {
        let what = format!("sm_90 attn_emu_g4/causal_edge {label}, one wave at a time");
        let run = race::run_scheduled(
            &caps,
            &switches(sw),
            &Problem::AttnForward(p.clone()),
            Schedule::WaveFirst,
        )
        .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_o_lse(
            &what,
            run.output,
            &want,
            " (a warp's partial read before the CTA barrier?)",
        );
    }
}

/// The merge probes (`cta`, `cluster`: timing ablations whose output is not the attention) end
/// every cluster kernel without a deadlock or an order-dependent write: the cluster barrier the
/// `cluster` probe takes is reached by every CTA, and nothing remote is touched after it.
#[test]
fn merge_probes_end_every_cluster_kernel_cleanly() {
    let m = matrix();
    let caps = caps(&m, "sm_90");
    let c = m.cases.iter().find(|c| c.name == "attn_emu_g4").unwrap();
    let p = qsa::cases::attn_problem(m.seed, c, "random_ids").unwrap();
    for merge in ["cluster", "push", "flat", "lean"] {
        for probe in ["cta", "cluster"] {
            let sw = [("QSA_ATTN_DEC_MERGE", merge), ("QSA_ATTN_DEC_PROBE", probe)];
            let what = format!("sm_90 merge={merge} probe={probe}");
            let run = race::check(
                &caps,
                &switches(&sw),
                &Problem::AttnForward(p.clone()),
                &Schedule::RACE_CHECK,
            )
            .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert!(
                run.dispatched.starts_with(&format!("decode_{merge}")),
                "{what}: dispatched {}",
                run.dispatched
            );
        }
    }
}
