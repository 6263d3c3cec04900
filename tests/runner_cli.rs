//! The `qsa` runner as a user (or xtask) sees it: its exit codes, a panicking check that
//! becomes a `crashed` record without backtrace frames, and a killed runner whose finished
//! checks survive in the journal and are carried on with `--resume`.
//!
//! Crashes are planted with the runner's test-only `QSA_TEST_CRASH` switch (src/crash.rs).

use std::path::Path;
use std::process::{Command, Output};

const CASE: [&str; 4] = ["--case", "topk_edges_small", "--suite", "parity"];

fn qsa(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_qsa"));
    c.args(args).current_dir(env!("CARGO_MANIFEST_DIR"));
    c.env_remove("QSA_TEST_CRASH");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run qsa")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn results(p: &Path) -> qsa::results::TargetResults {
    qsa::results::TargetResults::read(p).unwrap()
}

fn run_args<'a>(out: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["run", "--target", "cpu", "--out", out];
    v.extend(CASE);
    v.extend(extra);
    v
}

#[test]
fn exit_codes_0_pass_2_usage_3_no_device() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.yaml");
    let out = out.to_str().unwrap();
    let o = qsa(&run_args(out, &["--dist", "uniform"]), &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(results(Path::new(out)).failures(), 0);

    let o = qsa(&["run", "--target", "sm_99", "--out", out], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("unknown target `sm_99`"),
        "{}",
        stderr(&o)
    );
    let o = qsa(&run_args(out, &["--dump-all"]), &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--dump"), "{}", stderr(&o));

    // No CUDA device on a build machine; on a GPU machine sm_90 may run: then skip.
    let o = qsa(
        &[
            "run",
            "--target",
            "sm_90",
            "--out",
            out,
            "--case",
            "topk_edges_small",
        ],
        &[],
    );
    if o.status.code() == Some(3) {
        let r = results(Path::new(out));
        assert!(r.records.is_empty());
        assert!(!r.reason.is_empty());
    } else {
        eprintln!("SKIPPED exit code 3: this machine has an sm_90 device");
    }
}

#[test]
fn a_panicking_check_is_a_crashed_record_without_backtrace_frames_and_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.yaml");
    let o = qsa(
        &run_args(
            out.to_str().unwrap(),
            &["--dist", "uniform", "--dist", "ties"],
        ),
        &[
            ("QSA_TEST_CRASH", "parity/topk_edges_small/uniform=panic"),
            ("RUST_BACKTRACE", "1"),
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("cpu: 1 of 4 checks failed"),
        "{}",
        stderr(&o)
    );
    let r = results(&out);
    let crashed: Vec<_> = r
        .records
        .iter()
        .filter(|x| x.status == qsa::results::Status::Crashed)
        .collect();
    assert_eq!(crashed.len(), 1, "{:?}", r.records);
    let m = &crashed[0].message;
    assert!(
        m.starts_with("panicked at src/crash.rs:")
            && m.ends_with(
                ": QSA_TEST_CRASH planted a panic in parity topk_edges_small --dist uniform"
            ),
        "{m}"
    );
    assert!(!m.contains('\n') && !m.contains("backtrace"), "{m}");
    assert_eq!(
        crashed[0].repro,
        "cargo xtask matrix --target cpu --case topk_edges_small --suite parity --dist uniform"
    );
    // The run went on: the other distribution's three variants passed.
    let passed = r
        .records
        .iter()
        .filter(|x| x.dist == "ties" && x.status == qsa::results::Status::Pass);
    assert_eq!(passed.count(), 3);
}

#[test]
fn a_killed_runner_keeps_its_finished_checks_and_resume_skips_the_crashed_one() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.yaml");
    let out_s = out.to_str().unwrap();
    let kill = [("QSA_TEST_CRASH", "parity/topk_edges_small/all_equal=kill")];
    let o = qsa(&run_args(out_s, &[]), &kill);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(o.status.signal(), Some(9), "{}", stderr(&o));
    assert!(!out.exists(), "no results.yaml from a killed runner");
    let st = qsa::journal::read(&qsa::journal::path_for(&out)).unwrap();
    // uniform and ties finished (3 variants each); all_equal was in flight.
    assert_eq!(st.records.len(), 6, "{:?}", st.records);
    assert_eq!(st.in_flight.as_ref().unwrap().unit.dist, "all_equal");

    let o = qsa(&run_args(out_s, &["--resume"]), &kill);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("--dist all_equal: done by an earlier run, skipped"));
    let r = results(&out);
    // 8 distributions x 3 variants, less the crashed unit's 3, plus its crashed record.
    assert_eq!(r.records.len(), 22);
    let c = r
        .records
        .iter()
        .find(|x| x.status == qsa::results::Status::Crashed)
        .unwrap();
    assert_eq!(c.dist, "all_equal");
    assert!(
        c.message.contains("a previous runner died in this check"),
        "{}",
        c.message
    );
    // Plan order is kept: the crashed unit sits between ties and signed_zeros.
    let dists: Vec<&str> = r.records.iter().map(|x| x.dist.as_str()).collect();
    assert_eq!(&dists[5..8], ["ties", "all_equal", "signed_zeros"]);
}
