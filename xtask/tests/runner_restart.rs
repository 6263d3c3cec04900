//! `cargo xtask matrix` supervising a runner that dies: killed mid-run (what the OOM killer
//! does), it is restarted without the check in flight, that check is reported as crashed
//! and every other check runs; hung past --timeout, it is killed and the target is failed
//! with the checks that finished before. Crashes are planted with the runner's test-only
//! `QSA_TEST_CRASH` switch (src/crash.rs).

use serde_yaml::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn matrix(crash: &str, extra: &[&str], out: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["matrix", "--target", "cpu", "--case", "topk_edges_small"])
        .args(["--suite", "parity", "--out"])
        .arg(out)
        .args(extra)
        .env("QSA_TEST_CRASH", crash)
        .current_dir(root())
        .output()
        .expect("run xtask")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn report(out: &Path) -> Value {
    serde_yaml::from_str(&std::fs::read_to_string(out.join("cpu/report.yaml")).unwrap()).unwrap()
}

fn statuses(r: &Value) -> Vec<(String, String)> {
    r["results"]["records"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["dist"].as_str().unwrap().to_string(),
                x["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn a_killed_runner_is_restarted_without_the_check_in_flight() {
    let tmp = tempfile::tempdir().unwrap();
    let o = matrix("parity/topk_edges_small/ties=kill", &[], tmp.path());
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("restarting the cpu runner with --resume"), "{t}");
    assert!(
        t.contains(
            "FAIL cpu parity topk_edges_small/ties/-/-: the runner was killed by signal 9 (SIGKILL"
        ),
        "{t}"
    );
    let r = report(tmp.path());
    // The runner's last run exited 1 with its results written: checks failed, not a crash.
    assert_eq!(r["results"]["status"].as_str(), Some("run"), "{t}");
    let s = statuses(&r);
    assert_eq!(s.len(), 22, "{s:?}");
    assert_eq!(s.iter().filter(|(_, st)| st == "pass").count(), 21);
    assert!(s.contains(&("ties".into(), "crashed".into())));
    // The case's snapshot lost lines: it is neither compared nor proposed.
    let pending = root().join("golden/cpu/parity__topk_edges_small.snap.new");
    assert!(!pending.exists(), "{} was written", pending.display());
}

#[test]
fn a_hung_runner_is_killed_at_the_timeout_and_keeps_its_finished_checks() {
    let tmp = tempfile::tempdir().unwrap();
    let o = matrix(
        "parity/topk_edges_small/ties=hang",
        &["--timeout", "20"],
        tmp.path(),
    );
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    let r = report(tmp.path());
    assert_eq!(r["results"]["status"].as_str(), Some("failed"), "{t}");
    let reason = r["results"]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("the runner exceeded --timeout 20 s and was killed in parity topk_edges_small --dist ties"),
        "{reason}"
    );
    let s = statuses(&r);
    assert_eq!(
        s,
        [
            ("uniform".into(), "pass".into()),
            ("uniform".into(), "pass".into()),
            ("uniform".into(), "pass".into()),
            ("ties".into(), "crashed".into())
        ]
    );
}
