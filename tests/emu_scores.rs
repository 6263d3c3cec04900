//! The block-score kernels (kernels/block_scores.cu: warp, FP32 SIMT) emulated through
//! `EmuApi` and the GPU host code of src/gpu/scores.rs with each target's dispatch: scores
//! within the f32 gate of FP64 (src/reference/scores.rs), the same under forward, reverse
//! and random thread schedules; and where the source does not build for the host yet
//! (tensor-core inline PTX on sm_80+), `unsupported in emulation` naming the kernel and the
//! instructions, never a pass.

use qsa::backend::BackendError;
use qsa::dispatch::{Switches, TargetCaps};
use qsa::emu::{race, Schedule};
use qsa::matrix::Matrix;
use qsa::problem::{Output, Problem};
use qsa::reference::scores::scores_f64;
use std::collections::BTreeMap;
use std::path::Path;

fn matrix() -> Matrix {
    Matrix::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("matrix.yaml")).unwrap()
}

fn caps(m: &Matrix, name: &str) -> TargetCaps {
    m.target(name).unwrap().caps()
}

fn switches(pairs: &[(&str, &str)]) -> Switches {
    Switches::new(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
    )
}

fn problem(m: &Matrix, case: &str, dist: &str) -> Problem {
    let c = m.cases.iter().find(|c| c.name == case).unwrap();
    Problem::Scores(qsa::cases::scores_problem(m.seed, c, dist).unwrap())
}

/// The matrix's f32 limit for scores (gates.error_limits.scores.f32.limit, 1e-6).
const F32_LIMIT: f64 = 1e-6;

#[test]
fn warp_and_simt_match_fp64_under_every_schedule() {
    let m = matrix();
    let simt = switches(&[("STRATA_QSA_WARP", "1")]);
    let warp = switches(&[("STRATA_QSA_WARP", "1"), ("STRATA_SELECT_SIMT", "0")]);
    for target in ["gfx906", "gfx1201", "sm_75"] {
        let caps = caps(&m, target);
        for (case, dist) in [
            ("scores_emu_tiles", "dup_blocks"),
            ("scores_ragged", "normal"),
        ] {
            let p = problem(&m, case, dist);
            let Problem::Scores(sp) = &p else {
                unreachable!()
            };
            let want = scores_f64(sp);
            let scale = want.iter().fold(0f64, |a, x| a.max(x.abs()));
            for (sw, kernel) in [(&simt, "simt"), (&warp, "warp")] {
                let run = race::check(&caps, sw, &p, &Schedule::RACE_CHECK)
                    .unwrap_or_else(|e| panic!("{target} {case} {kernel}: {e}"));
                assert_eq!(run.dispatched, kernel, "{target} {case}");
                let Output::Scores(got) = run.output else {
                    panic!("scores gave no scores")
                };
                let worst = got
                    .iter()
                    .zip(&want)
                    .map(|(g, w)| (*g as f64 - w).abs() / scale)
                    .fold(0f64, f64::max);
                assert!(
                    worst <= F32_LIMIT,
                    "{target} {case}/{dist} {kernel}: relative max error {worst:e} past {F32_LIMIT:e}"
                );
            }
        }
    }
}

/// sm_90's scorer source keeps its tensor-core inline PTX in the host build: every kernel
/// of it is unsupported in emulation, naming the kernel and the instructions; gfx950's MFMA
/// kernel is not in the host build at all (its #if wants __gfx950__).
#[test]
fn what_does_not_build_for_the_host_is_unsupported_and_named() {
    let m = matrix();
    let p = problem(&m, "scores_ragged", "normal");
    let e = race::check(&caps(&m, "sm_90"), &switches(&[]), &p, &[Schedule::Forward])
        .err()
        .expect("sm_90's tensor-core scorer cannot run emulated before the PTX wrappers");
    let BackendError::Unsupported(msg) = &e else {
        panic!("not unsupported: {e}")
    };
    assert!(
        msg.starts_with(
            "unsupported in emulation: block_scores_tf32 (block_scores.cu for sm_90) needs"
        ) && msg.contains("mma.sync"),
        "{msg}"
    );
    let bf16 = switches(&[("STRATA_BF16_TC", "1")]);
    let e = race::check(&caps(&m, "gfx950"), &bf16, &p, &[Schedule::Forward])
        .err()
        .expect("gfx950's MFMA scorer is not emulated");
    assert!(
        matches!(&e, BackendError::Unsupported(m) if m.contains("unsupported in emulation: block_scores_mfma_bf16 is not in the host build")),
        "{e}"
    );
}
