//! `cargo xtask matrix` refuses every mistake in its flags before any work (no kernel
//! build, no runner): exit 2 and a message naming the bad value and the valid ones (issue
//! 11). Each case here was a green run of 0 checks, or "the runner crashed" with exit 1.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn matrix(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("matrix")
        .args(args)
        .current_dir(root())
        .env("CI", "true")
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("run xtask")
}

fn refused(args: &[&str], want: &str) {
    let o = matrix(args);
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.status.code(), Some(2), "xtask matrix {args:?}: {out}");
    assert!(
        out.contains(want),
        "xtask matrix {args:?}: `{out}` lacks `{want}`"
    );
    // Refused before any work: nothing built, no runner started.
    assert!(
        !out.contains("building") && !out.contains("running "),
        "{out}"
    );
    assert!(
        !out.contains("stack backtrace") && !out.contains("panicked"),
        "{out}"
    );
}

#[test]
fn every_flag_typo_is_exit_2_before_any_work() {
    let cpu = ["--target", "cpu"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        cpu.iter().copied().chain(extra.iter().copied()).collect()
    };
    refused(
        &with(&["--variant", "nosuch"]),
        "--variant `nosuch`: the matrix's cases have no such variant; they run: auto",
    );
    refused(
        &with(&["--dist", "nosuch"]),
        "--dist `nosuch`: the matrix's cases have no such distribution; they use: adversarial",
    );
    refused(
        &with(&["--suite", "nosuch"]),
        "--suite `nosuch` is not a suite: use parity, error or bench",
    );
    refused(
        &with(&["--shard", "3/2"]),
        "--shard `3/2`: need 1 <= i <= n",
    );
    refused(
        &with(&["--shard", "0/0"]),
        "--shard `0/0`: need 1 <= i <= n",
    );
    refused(
        &with(&["--case", "nosuch"]),
        "--case `nosuch`: no such case",
    );
    refused(&["--target", "nosuch"], "unknown target `nosuch`");
    refused(
        &with(&["--case", "attn_decode_16q"]),
        "the selection runs no check on cpu",
    );
    refused(
        &with(&["--from-results", "/nonexistent"]),
        "--from-results /nonexistent: no such folder",
    );
    refused(
        &["--cases", "/nonexistent.yaml"],
        "/nonexistent.yaml: (file): cannot read",
    );
}

#[test]
fn a_broken_matrix_is_one_line_without_backtrace_frames() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("m.yaml");
    std::fs::write(&m, "version: [").unwrap();
    let o = matrix(&["--matrix", m.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: ") && err.contains("m.yaml:"),
        "{err}"
    );
    assert!(!has_frames(&err), "backtrace frames in: {err}");
}

/// `anyhow` errors printed with `{:?}` carry `Stack backtrace:` and `  0: ...` frames when
/// RUST_BACKTRACE=1; `{:#}` never does.
fn has_frames(s: &str) -> bool {
    s.to_lowercase().contains("stack backtrace")
        || s.lines().any(|l| {
            let t = l.trim_start();
            l.len() > t.len()
                && t.split_once(": ")
                    .is_some_and(|(n, _)| n.parse::<u32>().is_ok())
        })
}

#[test]
fn an_unreadable_results_file_is_an_error_without_backtrace_frames() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("cpu")).unwrap();
    std::fs::write(dir.path().join("cpu/results.yaml"), "records: [").unwrap();
    let o = matrix(&[
        "--target",
        "cpu",
        "--from-results",
        dir.path().to_str().unwrap(),
        "--out",
        dir.path().join("out").to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("error: ") && err.contains("results.yaml"),
        "{err}"
    );
    assert!(!has_frames(&err), "backtrace frames in: {err}");
}
