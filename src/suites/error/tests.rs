//! The error gate's arithmetic with hand numbers, and the tf32 / bf16 path of the scores
//! error suite (cargo mutants 2026-12-01: the library's tests ran f32 scorers only, so the
//! reference error of a tensor-core scorer, FP64 on rounded inputs, was unpinned; the gate's
//! `>` at its limit and the variant filter too).

use super::*;
use crate::backend::cpu::CpuBackend;
use crate::matrix::Matrix;
use crate::suites::bench::BenchGolden;
use crate::suites::test_util::dumped;
use crate::suites::tests::{run_with, Breakage};
use crate::suites::Filter;
use std::path::Path;

const MATRIX: &str = include_str!("../../../matrix.yaml");

fn matrix(text: &str) -> Matrix {
    Matrix::parse(Path::new("matrix.yaml"), text).unwrap()
}

fn with_ctx<R>(m: &Matrix, filter: &Filter, f: impl FnOnce(&Ctx) -> R) -> R {
    let backend = CpuBackend::new();
    let golden = BenchGolden::default();
    let ctx = Ctx {
        matrix: m,
        target: m.target("cpu").unwrap(),
        backend: &backend,
        filter,
        bench_golden: &golden,
        repro_extra: String::new(),
        dump: None,
    };
    f(&ctx)
}

fn normal_only() -> Filter {
    Filter {
        dists: vec!["normal".into()],
        ..Filter::default()
    }
}

/// Errors relative to a scale of 1, so `rel_max` is the `max_abs` given.
fn rel(e: f64) -> ErrorStats {
    ErrorStats {
        rmse: e / 2.0,
        max_abs: e,
        scale: 1.0,
        count: 4,
    }
}

/// An error exactly at the gate passes and the next double above it fails, at each of the
/// three places the gate can sit. matrix.yaml, scores f32: floor 3.0e-7, limit 1.0e-6,
/// error_ratio 4.
#[test]
fn the_error_gate_passes_an_error_exactly_at_it_and_fails_one_ulp_above() {
    let m = matrix(MATRIX);
    let case = m.cases.iter().find(|c| c.name == "scores_ragged").unwrap();
    with_ctx(&m, &Filter::default(), |ctx| {
        let judge = |e: f64, base: Option<f64>| {
            let mut rec = ctx.record(Suite::Error, case, "normal", "simt", "scores");
            let base = base.map(rel);
            gate(
                ctx,
                &mut rec,
                FamilyName::Scores,
                "simt",
                &rel(e),
                base.as_ref(),
            );
            rec
        };
        for (e, base, gate_at, fails_with) in [
            // The limit: baseline 5e-7 x 4 = 2e-6, capped at the limit 1e-6.
            (
                1.0e-6,
                Some(5.0e-7),
                1.0e-6,
                "exceeds the scores f32 limit 1.0e-6",
            ),
            // The ratio: 4 x baseline 1e-7 = 4e-7, above the floor 3e-7.
            (
                4.0 * 1.0e-7,
                Some(1.0e-7),
                4.0 * 1.0e-7,
                "exceeds the gate 4.000e-7 (= max(4 x baseline 1.000e-7, scores f32 floor 3.0e-7))",
            ),
            // The floor, with no baseline result.
            (
                3.0e-7,
                None,
                3.0e-7,
                "exceeds the scores f32 floor 3.0e-7 (no baseline result to compare with)",
            ),
        ] {
            let at = judge(e, base);
            assert_eq!(
                at.status,
                Status::Pass,
                "an error exactly at the gate {gate_at:e} must pass: {}",
                at.message
            );
            assert_eq!(
                at.metrics["limit"], gate_at,
                "the gate for baseline {base:?}"
            );
            let above = judge(e.next_up(), base);
            assert_eq!(
                above.status,
                Status::Fail,
                "one ulp above {gate_at:e} passed"
            );
            assert!(
                above.message.contains(fails_with),
                "{} (wanted: {fails_with})",
                above.message
            );
        }
    });
}

/// Only the error suite's own rule decides which scores are outside their bound: an error
/// equal to its bound is inside (the bound is a claim `|e| <= b`), NaN is outside any.
#[test]
fn scores_outside_their_bound_by_hand() {
    let got = [1.5f32, 1.5, f32::NAN, 2.0, -1.0];
    let want = [1.0, 1.0, 1.0, 2.0, 1.0];
    let bound = [0.5, 0.499, 1e9, 0.0, 3.0];
    // 0.5 <= 0.5 inside; 0.5 > 0.499 outside; NaN outside; 0 <= 0 inside; 2 <= 3 inside.
    assert_eq!(over_bound(&got, &want, &bound), 2);
}

/// A score 1e-3 off (about 10^3 x the f32 scorers' error) is outside the rigorous bound, and
/// the message says so before the gate's own verdict.
#[test]
fn a_score_past_the_rigorous_bound_fails_naming_the_bound() {
    let m = matrix(MATRIX);
    let recs = run_with(
        &m,
        &[("simt", Breakage::Score)],
        normal_only(),
        "scores_ragged",
        run,
    );
    let simt = recs.iter().find(|r| r.variant == "simt").unwrap();
    assert_eq!(simt.status, Status::Fail, "{simt:?}");
    assert_eq!(simt.metrics["over_bound"], 1.0, "{}", simt.message);
    assert!(
        simt.message.starts_with(
            "1 scores exceed the rigorous error bound of a simt kernel: the arithmetic is wrong"
        ),
        "{}",
        simt.message
    );
}

/// `--variant` picks the variants checked; the baseline runs first anyway (its error gates
/// the others), once.
#[test]
fn the_variant_filter_keeps_the_baseline_and_drops_the_rest() {
    let m = matrix(MATRIX);
    let case = m.cases.iter().find(|c| c.name == "scores_ragged").unwrap();
    for (variants, want) in [
        (vec![], vec!["warp", "auto", "simt", "bf16"]),
        (vec!["simt"], vec!["warp", "simt"]),
        (vec!["bf16", "warp"], vec!["warp", "bf16"]),
    ] {
        let filter = Filter {
            variants: variants.iter().map(|v| v.to_string()).collect(),
            ..Filter::default()
        };
        let (base, list) = with_ctx(&m, &filter, |ctx| {
            variants_with_baseline(ctx, case, FamilyName::Scores)
        });
        assert_eq!(base.as_deref(), Some("warp"));
        assert_eq!(list, want, "variants run for --variant {variants:?}");
    }
}

/// A bf16 scorer (the CPU has none: a fake that computes FP64 on bf16-rounded Q and Kb,
/// then rounds to f32, dispatched as "bf16") is judged against that same ideal: its error
/// is the ideal's, the reference is the ideal (larger than the warp baseline's), the gate is
/// max(4 x ideal, bf16 floor 4e-3) capped at 1.5e-2, and it passes inside the bf16 bound.
#[test]
fn a_bf16_scorer_is_gated_against_fp64_on_bf16_rounded_inputs() {
    let m = matrix(MATRIX);
    let recs = run_with(
        &m,
        &[("simt", Breakage::AsKernel("bf16"))],
        normal_only(),
        "scores_ragged",
        run,
    );
    let warp = recs.iter().find(|r| r.variant == "warp").unwrap();
    assert_eq!(warp.status, Status::Pass, "{}", warp.message);
    assert!(
        !warp.metrics.contains_key("ideal_rel_max"),
        "an f32 scorer has no rounded-input ideal"
    );
    let fakes: Vec<_> = recs
        .iter()
        .filter(|r| r.dispatched.as_deref() == Some("bf16"))
        .collect();
    assert_eq!(
        fakes.len(),
        3,
        "auto, simt and bf16 dispatch the CPU's SIMT"
    );
    for r in fakes {
        let e = r.metrics["rel_max"];
        let ideal = *r.metrics.get("ideal_rel_max").unwrap_or_else(|| {
            panic!(
                "{}: no ideal error recorded for a bf16 scorer: {:?}",
                r.variant, r.metrics
            )
        });
        assert_eq!(
            e, ideal,
            "{}: the fake is FP64 on bf16 inputs, its error is the ideal's",
            r.variant
        );
        assert_eq!(
            r.metrics["baseline_rel_max"], ideal,
            "{}: the reference error is the larger of the ideal {ideal:e} and the warp baseline's {:e}",
            r.variant, warp.metrics["rel_max"]
        );
        assert_eq!(
            r.metrics["limit"],
            (4.0 * ideal).clamp(4.0e-3, 1.5e-2), // floor 4e-3, limit 1.5e-2
            "{}",
            r.variant
        );
        assert_eq!(r.metrics["over_bound"], 0.0, "{}: {}", r.variant, r.message);
        assert_eq!(r.status, Status::Pass, "{}: {}", r.variant, r.message);
    }
}

/// A tf32 scorer whose baseline is worse than the tf32 ideal is gated against the baseline:
/// the reference error is the larger of the two. The warp baseline is broken by 1e-2 (the
/// ideal of tf32 inputs is about 4e-4); the tf32 limit is raised to 0.1 here so that the
/// gate, 4 x the reference, is not capped and shows which reference was taken.
#[test]
fn a_tf32_scorer_takes_the_baseline_error_when_it_is_the_larger() {
    let m = matrix(&MATRIX.replace(
        "      tf32: {floor: 4.0e-4, limit: 1.5e-3}\n",
        "      tf32: {floor: 4.0e-4, limit: 1.0e-1}\n",
    ));
    let recs = run_with(
        &m,
        &[
            ("warp", Breakage::ScoreBy(1e-2)),
            ("simt", Breakage::AsKernel("tf32")),
        ],
        normal_only(),
        "scores_ragged",
        run,
    );
    let warp = recs.iter().find(|r| r.variant == "warp").unwrap();
    let base = warp.metrics["rel_max"];
    let tf32: Vec<_> = recs
        .iter()
        .filter(|r| r.dispatched.as_deref() == Some("tf32"))
        .collect();
    assert_eq!(tf32.len(), 3, "auto, simt and bf16 dispatch the CPU's SIMT");
    for r in tf32 {
        let ideal = r.metrics["ideal_rel_max"];
        assert!(
            ideal < base,
            "premise: ideal {ideal:e} below the broken baseline {base:e}"
        );
        assert_eq!(
            r.metrics["baseline_rel_max"], base,
            "{}: the reference error is the larger of the ideal {ideal:e} and the baseline's",
            r.variant
        );
        assert_eq!(r.metrics["limit"], 4.0 * base, "{}", r.variant);
        assert_eq!(r.status, Status::Pass, "{}: {}", r.variant, r.message);
    }
}

/// What `--dump` writes for a scores error check: [nq, blocks] arrays, except a kernel output
/// of the wrong length, dumped flat (its length is part of what is wrong).
#[test]
fn a_scores_dump_holds_every_array_in_its_shape() {
    let p = crate::problem::ScoresProblem {
        nq: 2,
        heads: 1,
        blocks: 3,
        q: vec![0.0; 2 * HEAD_DIM],
        kb: vec![0.0; 3 * HEAD_DIM],
        w: vec![1.0; 2],
    };
    let (s64, bound) = ([0.0; 6], [0.0; 6]);
    for (got, shape) in [(vec![0.0f32; 6], vec![2, 3]), (vec![0.0f32; 5], vec![5])] {
        let files = dumped(scores_arrays(&p, &got, &s64, &bound));
        let want: Vec<(String, Vec<usize>)> = [
            ("input_q.npy", vec![2, 1, 128]),
            ("input_kb.npy", vec![3, 128]),
            ("input_w.npy", vec![2, 1]),
            ("output_scores.npy", shape),
            ("reference_scores.npy", vec![2, 3]),
            ("reference_bound.npy", vec![2, 3]),
        ]
        .into_iter()
        .map(|(f, s)| (f.to_string(), s))
        .collect();
        assert_eq!(files, want, "{} kernel scores", got.len());
    }
}
