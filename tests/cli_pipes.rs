//! The `qsa` binary's commands end quietly when their reader goes away (`qsa devices |
//! head -1`), as Unix tools do, instead of panicking on the broken pipe (exit 101 and a
//! backtrace, seen 2026-12-01).

use std::path::Path;
use std::process::{Command, Stdio};

fn exit_with_reader_gone(args: &[&str]) -> std::process::ExitStatus {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_qsa"))
        .args(args)
        .current_dir(root)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The read end closed before the command writes anything: its first write fails.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(
        out.stderr.is_empty(),
        "{args:?} wrote to stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.status
}

#[test]
fn devices_and_plan_end_quietly_when_the_reader_goes_away() {
    assert!(exit_with_reader_gone(&["devices"]).success());
    let plan = ["plan", "--target", "sm_90", "--topk", "nq=1,n=9000,k=64"];
    assert!(exit_with_reader_gone(&plan).success());
    let json = [
        "plan",
        "--json",
        "--target",
        "sm_90",
        "--topk",
        "nq=1,n=9000,k=64",
    ];
    assert!(exit_with_reader_gone(&json).success());
}
