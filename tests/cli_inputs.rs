//! `qsa run` refuses every mistake before any work, with exit 2 and a message naming the
//! bad value and the valid ones; never a green run of 0 checks, never a backtrace, never
//! the whole input echoed (issue 11). `xtask/tests/inputs.rs` checks `cargo xtask matrix`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn qsa(args: &[&str]) -> Output {
    let out = tempfile::tempdir().unwrap();
    let results = out.path().join("results.yaml");
    let target: &[&str] = if args.contains(&"--target") {
        &[]
    } else {
        &["--target", "cpu"]
    };
    Command::new(env!("CARGO_BIN_EXE_qsa"))
        .args(["run", "--quiet", "--out"])
        .arg(&results)
        .args(target)
        .args(args)
        .current_dir(root())
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("run qsa")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Exit 2, one `error:` line containing each of `want`, and no backtrace.
fn refused(args: &[&str], want: &[&str]) -> String {
    let o = qsa(args);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "qsa run {args:?}: {e}");
    assert!(e.starts_with("error: "), "{e}");
    for w in want {
        assert!(e.contains(w), "qsa run {args:?}: `{e}` lacks `{w}`");
    }
    assert!(
        !e.contains("stack backtrace") && !e.contains("panicked"),
        "{e}"
    );
    e
}

#[test]
fn every_selection_typo_is_exit_2_naming_the_valid_values() {
    refused(
        &["--variant", "nosuch"],
        &["--variant `nosuch`", "they run: auto, bf16"],
    );
    refused(
        &["--dist", "nosuch"],
        &["--dist `nosuch`", "they use: adversarial"],
    );
    refused(
        &["--suite", "nosuch"],
        &["--suite `nosuch`", "use parity, error or bench"],
    );
    refused(&["--shard", "3/2"], &["--shard `3/2`: need 1 <= i <= n"]);
    refused(&["--shard", "0/0"], &["--shard `0/0`: need 1 <= i <= n"]);
    refused(&["--shard", "x"], &["--shard `x`: a shard is i/n"]);
    refused(
        &["--case", "nosuch"],
        &["--case `nosuch`", "declared: topk_decode_3q_40k"],
    );
    refused(
        &["--target", "sm_99"],
        &["unknown target `sm_99`", "declares: cpu, sm_75"],
    );
    // Valid names that select nothing here.
    refused(
        &["--case", "attn_decode_16q"],
        &["runs no check on cpu", "attn_decode_16q runs on gpu"],
    );
    refused(
        &["--case", "topk_edges_small", "--variant", "gather"],
        &["--variant `gather`: the selected cases have no such variant; they run: auto, register, wide"],
    );
}

#[test]
fn a_broken_cases_file_is_exit_2_at_its_line_without_a_backtrace() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("c.yaml");
    std::fs::write(
        &f,
        "cases:\n  - name: big_k\n    topk: {queries: 1, n: 8, capacity: 8, k: 100000}\n    dists: [uniform]\n    variants: [auto]\n    suites: [parity]\n",
    )
    .unwrap();
    let e = refused(
        &["--cases", f.to_str().unwrap()],
        &["c.yaml:3: cases.topk.k: case `big_k`: k = 100000 exceeds the top-k kernels' limit of 4096"],
    );
    assert_eq!(e.lines().count(), 1, "{e}");
}

#[test]
fn fifty_megabytes_of_random_text_give_a_short_message() {
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("matrix.yaml");
    // Letters, spaces and newlines: one 50 MB YAML string, which serde's message quotes.
    let mut x: u32 = 12345;
    let text: Vec<u8> = (0..50_000_000)
        .map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            match (x >> 16) % 40 {
                0 => b'\n',
                1..=5 => b' ',
                r => b'a' + (r % 26) as u8,
            }
        })
        .collect();
    std::fs::write(&m, &text).unwrap();
    let e = refused(&["--matrix", m.to_str().unwrap()], &["matrix.yaml"]);
    assert!(
        e.len() < 600,
        "{} bytes of error: {}",
        e.len(),
        &e[..300.min(e.len())]
    );
}

#[test]
fn the_example_cases_still_load() {
    let o = Command::new(env!("CARGO_BIN_EXE_qsa"))
        .args(["devices", "--matrix"])
        .arg(Path::new("matrix.yaml"))
        .current_dir(root())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
}
