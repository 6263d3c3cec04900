//! `cargo xtask matrix` against golden snapshots, end to end, in a scratch project: a copy
//! of this repository's matrix.yaml and CPU dispatch snapshot, a `Cargo.toml` with a
//! `[workspace]`, and CPU results written here (`--from-results`, so no runner is built).
//! The scratch tree is also the "copied checkout": xtask must find it as its root at run
//! time, not the tree it was compiled in.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const PARITY_TIES_WIDE: &str =
    "ids 4c2e6d0935865dfa selected 257 queries 8 by 1: 3d68d047b9dffea7879b2cdd3d68d047";
const PARITY_TIES_AUTO: &str = PARITY_TIES_WIDE;
const ERROR_LOW: &str = "rel_max [1e-7,1e-6) rel_rmse [1e-8,1e-7)";
const ERROR_HIGH: &str = "rel_max [1e-6,1e-5) rel_rmse [1e-8,1e-7)";

struct Tree {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

impl Tree {
    fn new() -> Tree {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("qsa-copy");
        std::fs::create_dir_all(root.join("golden/cpu")).unwrap();
        std::fs::create_dir_all(root.join("sub/dir")).unwrap();
        std::fs::write(root.join("Cargo.toml"), "[workspace]\nmembers = []\n").unwrap();
        std::fs::copy(repo().join("matrix.yaml"), root.join("matrix.yaml")).unwrap();
        std::fs::copy(
            repo().join("golden/cpu/dispatch.snap"),
            root.join("golden/cpu/dispatch.snap"),
        )
        .unwrap();
        Tree { _dir: dir, root }
    }

    /// CPU results holding these records: (suite, case, dist, variant, check, status, snapshot).
    fn results(&self, records: &[(&str, &str, &str, &str, &str, &str, &str)]) {
        let mut y = String::from(
            "target: cpu\nstatus: run\nreason: ''\ndevice:\n  name: cpu (test)\n  arch: cpu\n  driver: ''\n\
             seed: 20261130\nstarted: 2026-12-01T00:00:00Z\nseconds: 0.1\nrecords:\n",
        );
        for (suite, case, dist, variant, check, status, snap) in records {
            y.push_str(&format!(
                "- suite: {suite}\n  case: {case}\n  dist: {dist}\n  variant: {variant}\n  check: {check}\n  \
                 status: {status}\n  message: 'planted'\n  snapshot: '{snap}'\n  repro: 'from the runner'\n"
            ));
        }
        let p = self.root.join("results/cpu/results.yaml");
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, y).unwrap();
    }

    /// `cargo xtask matrix --target cpu --from-results results ARGS`, run from a
    /// subdirectory of the tree.
    fn matrix(&self, args: &[&str]) -> Output {
        self.matrix_with(Command::new(env!("CARGO_BIN_EXE_xtask")), args)
    }

    fn matrix_with(&self, mut cmd: Command, args: &[&str]) -> Output {
        cmd.args(["matrix", "--target", "cpu", "--from-results"])
            .arg(self.root.join("results"))
            .args(args)
            .current_dir(self.root.join("sub/dir"))
            .env_remove("CI")
            .output()
            .unwrap()
    }

    fn snap(&self, name: &str) -> String {
        std::fs::read_to_string(self.root.join(format!("golden/cpu/{name}.snap"))).unwrap()
    }

    fn pending(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(self.root.join("golden/cpu"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().ends_with(".new"))
            .collect();
        v.sort();
        v
    }
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

/// Two parity lines and one error line, blessed as the golden.
fn blessed_tree() -> Tree {
    let t = Tree::new();
    t.results(&[
        (
            "parity",
            "topk_edges_small",
            "ties",
            "auto",
            "ids",
            "pass",
            PARITY_TIES_AUTO,
        ),
        (
            "parity",
            "topk_edges_small",
            "ties",
            "wide",
            "ids",
            "pass",
            PARITY_TIES_WIDE,
        ),
        (
            "error",
            "scores_ragged",
            "normal",
            "simt",
            "scores",
            "pass",
            ERROR_LOW,
        ),
    ]);
    let o = t.matrix(&["--bless"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let o = t.matrix(&[]);
    assert_eq!(code(&o), 0, "a blessed tree passes: {}", text(&o));
    t
}

#[test]
fn a_copied_tree_uses_its_own_root() {
    let t = blessed_tree();
    // Run from t.root/sub/dir: the tree's own golden/ and target/ were used.
    assert!(t.snap("parity__topk_edges_small").contains("ties wide ids"));
    assert!(t.root.join("target/qsa/summary.md").exists());
    // Outside any project: a clear error before any work.
    let dir = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["matrix", "--target", "cpu"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(code(&o), 2);
    assert!(text(&o).contains("no qsa project above"), "{}", text(&o));
}

#[test]
fn a_stray_snapshot_fails_a_full_run_and_warns_a_filtered_one() {
    let t = blessed_tree();
    std::fs::copy(
        t.root.join("golden/cpu/parity__topk_edges_small.snap"),
        t.root.join("golden/cpu/parity__topk_renamed_case.snap"),
    )
    .unwrap();
    let o = t.matrix(&[]);
    assert_eq!(
        code(&o),
        1,
        "a stray snapshot must fail a full run: {}",
        text(&o)
    );
    let want = "FAIL cpu stray snapshot parity__topk_renamed_case.snap: ";
    assert!(text(&o).contains(want), "{}", text(&o));
    assert!(
        text(&o).contains("is not produced by any case"),
        "{}",
        text(&o)
    );
    let summary = std::fs::read_to_string(t.root.join("target/qsa/summary.md")).unwrap();
    assert!(
        summary.contains("stray snapshot `parity__topk_renamed_case.snap`"),
        "{summary}"
    );
    // A filtered run cannot fail on it, but says so.
    let o = t.matrix(&["--case", "topk_edges_small"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(
        text(&o).contains("WARN cpu stray snapshot parity__topk_renamed_case.snap"),
        "{}",
        text(&o)
    );
}

#[test]
fn a_filtered_repro_run_is_green_and_leaves_no_pending_snapshot() {
    let t = blessed_tree();
    let golden = t.snap("parity__topk_edges_small");
    // The runner ran one check: the repro line's filters.
    t.results(&[(
        "parity",
        "topk_edges_small",
        "ties",
        "wide",
        "ids",
        "pass",
        PARITY_TIES_WIDE,
    )]);
    let repro = [
        "--case",
        "topk_edges_small",
        "--suite",
        "parity",
        "--dist",
        "ties",
        "--variant",
        "wide",
    ];
    let o = t.matrix(&repro);
    assert_eq!(
        code(&o),
        0,
        "a repro run on a clean tree must pass: {}",
        text(&o)
    );
    assert!(
        t.pending().is_empty(),
        "a filtered run must write no .snap.new: {:?}",
        t.pending()
    );
    // --bless on it changes nothing (it would have deleted the other lines).
    let o = t.matrix(&[&repro[..], &["--bless"]].concat());
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert_eq!(t.snap("parity__topk_edges_small"), golden);
    // A changed check on a filtered run: the meaning, and still no .snap.new.
    let changed = PARITY_TIES_WIDE
        .replace("4c2e6d09", "00000000")
        .replace("3d68d047b9df", "3d68d047ffff");
    t.results(&[(
        "parity",
        "topk_edges_small",
        "ties",
        "wide",
        "ids",
        "fail",
        &changed,
    )]);
    std::fs::copy(t.root.join("matrix.yaml"), t.root.join("alt.yaml")).unwrap();
    let o = t.matrix(&[&repro[..], &["--matrix", "alt.yaml"]].concat());
    assert_eq!(code(&o), 1, "{}", text(&o));
    let out = text(&o);
    assert!(
        out.contains("ids changed for 1 of 8 queries of topk_edges_small/ties/wide (query 2)"),
        "{out}"
    );
    assert!(
        out.contains("a filtered run compares only the checks it ran"),
        "{out}"
    );
    // The failing check's repro line is complete: it names the matrix file it ran.
    assert!(
        out.contains("reproduce: cargo xtask matrix --target cpu --case topk_edges_small --suite parity --dist ties --variant wide --matrix alt.yaml"),
        "the repro line must name the matrix file: {out}"
    );
    assert!(
        t.pending().is_empty(),
        "a filtered run must write no .snap.new: {:?}",
        t.pending()
    );
}

#[test]
fn a_decade_rise_fails_until_blessed_with_a_reason() {
    let t = blessed_tree();
    t.results(&[
        (
            "parity",
            "topk_edges_small",
            "ties",
            "auto",
            "ids",
            "pass",
            PARITY_TIES_AUTO,
        ),
        (
            "parity",
            "topk_edges_small",
            "ties",
            "wide",
            "ids",
            "pass",
            PARITY_TIES_WIDE,
        ),
        (
            "error",
            "scores_ragged",
            "normal",
            "simt",
            "scores",
            "pass",
            ERROR_HIGH,
        ),
    ]);
    let rise = "error of scores_ragged/normal/simt (rel_max) rose 10x (1e-7 -> 1e-6)";
    let o = t.matrix(&[]);
    assert_eq!(code(&o), 1, "a decade rise must fail the run: {}", text(&o));
    assert!(text(&o).contains(rise), "{}", text(&o));
    assert!(
        t.pending().is_empty(),
        "a decade rise must not be offered to insta accept: {:?}",
        t.pending()
    );
    let summary = std::fs::read_to_string(t.root.join("target/qsa/summary.md")).unwrap();
    assert!(summary.contains(rise), "{summary}");
    let o = t.matrix(&["--bless"]);
    assert_eq!(
        code(&o),
        1,
        "--bless without --reason must refuse a decade rise: {}",
        text(&o)
    );
    assert!(
        text(&o).contains("not blessed: an error rose by a decade or more"),
        "{}",
        text(&o)
    );
    assert!(t.snap("error__scores_ragged").contains(ERROR_LOW));
    let o = t.matrix(&["--bless", "--reason", "planted in a test"]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let snap = t.snap("error__scores_ragged");
    assert!(
        snap.contains(ERROR_HIGH) && snap.contains("planted in a test"),
        "{snap}"
    );
    assert!(
        text(&o).contains("WARN cpu snapshot error__scores_ragged: blessed with --reason"),
        "{}",
        text(&o)
    );
}

#[test]
fn a_second_run_is_refused_by_the_lock() {
    let t = blessed_tree();
    let out = t.root.join("target/qsa");
    let lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(out.join(".matrix.lock"))
        .unwrap();
    fs4::FileExt::try_lock(&lock).unwrap();
    std::fs::write(
        out.join(".matrix.lock"),
        "pid 4242, started 2026-12-01T00:00:00Z",
    )
    .unwrap();
    let o = t.matrix(&[]);
    assert_eq!(
        code(&o),
        2,
        "a second run must be refused by the lock: {}",
        text(&o)
    );
    let want = "error: another `cargo xtask matrix` (pid 4242, started 2026-12-01T00:00:00Z) is writing to";
    assert!(
        text(&o).contains(want) && text(&o).contains("--out DIR"),
        "{}",
        text(&o)
    );
    drop(lock);
    assert_eq!(code(&t.matrix(&[])), 0);
}

/// A full disk, played by a file size limit: the write fails with a clear error and leaves
/// no `.tmp-PID` file.
#[test]
fn no_temp_file_after_a_failed_write() {
    let t = blessed_tree();
    // SIGXFSZ ignored (kept across exec), so the write returns EFBIG instead of a kill.
    let mut cmd = Command::new("bash");
    cmd.args([
        "-c",
        "trap '' XFSZ; ulimit -f 1; exec \"$0\" \"$@\"",
        env!("CARGO_BIN_EXE_xtask"),
    ]);
    let o = t.matrix_with(cmd, &[]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("cannot write"), "{}", text(&o));
    let mut left = Vec::new();
    let mut dirs = vec![t.root.clone()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.to_string_lossy().contains(".tmp-") {
                left.push(p);
            }
        }
    }
    assert!(left.is_empty(), "temp files left: {left:?}");
}
