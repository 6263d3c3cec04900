//! `qsa run --emulate`: a GPU target with no device here runs its parity checks through
//! the SIMT emulator, status `emulated` (not `run`, not `built, not run`); cases past the
//! emulator's budget are `unsupported` checks that name the emulator, counted, never passes.

use qsa::results::{Status, TargetResults, TargetStatus};
use std::process::Command;

fn run_emulated(target: &str, cases: &[&str]) -> (TargetResults, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.yaml");
    let mut c = Command::new(env!("CARGO_BIN_EXE_qsa"));
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    c.args([
        "run",
        "--emulate",
        "--quiet",
        "--suite",
        "parity",
        "--target",
        target,
    ]);
    c.arg("--out").arg(&out);
    for case in cases {
        c.args(["--case", case]);
    }
    let o = c.output().expect("run qsa");
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(
        o.status.code(),
        Some(0),
        "qsa run --emulate --target {target}: {stderr}"
    );
    (TargetResults::read(&out).unwrap(), stderr)
}

/// Top-k and scores run on every target (sm_90's through its emulated tensor cores, gfx906's
/// FP32 kernels); a case past the emulator's budget is unsupported everywhere. Unsupported
/// checks name the emulator, never pass.
#[test]
fn emulated_target_runs_what_builds_and_reports_the_rest_unsupported() {
    let cases = ["topk_k_ge_n", "scores_ragged", "topk_decode_3q_40k"];
    for (target, passes, unsupported) in [
        (
            "sm_90",
            &["topk_k_ge_n", "scores_ragged"][..],
            &["topk_decode_3q_40k"][..],
        ),
        (
            "gfx906",
            &["topk_k_ge_n", "scores_ragged"][..],
            &["topk_decode_3q_40k"][..],
        ),
    ] {
        let (r, _) = run_emulated(target, &cases);
        assert_eq!(
            r.status,
            TargetStatus::Emulated,
            "{target}: status {:?}",
            r.status
        );
        assert!(
            r.device.name.contains("emulated"),
            "{target}: device {}",
            r.device.name
        );
        let records = &r.records;
        let of = |case: &'static str| records.iter().filter(move |x| x.case == case);
        for &case in passes {
            let rs: Vec<_> = of(case).collect();
            assert!(!rs.is_empty(), "{target}: no {case} records");
            for x in rs {
                assert_eq!(
                    x.status,
                    Status::Pass,
                    "{target} {case} {} {}: {}",
                    x.dist,
                    x.variant,
                    x.message
                );
            }
        }
        for &case in unsupported {
            let rest: Vec<_> = of(case).collect();
            assert!(!rest.is_empty(), "{target}: no {case} records");
            for x in rest {
                assert_eq!(
                    x.status,
                    Status::Unsupported,
                    "{target} {case}: {:?} {}",
                    x.status,
                    x.message
                );
                assert!(
                    x.message.contains("unsupported in emulation"),
                    "{target} {case}: {}",
                    x.message
                );
            }
        }
    }
}
