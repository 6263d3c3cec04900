//! `cargo xtask mutants` on a tiny fake project (a git repository in a temp dir whose
//! "checks" are grep), so each verdict is seen in seconds: caught, survived, misfired,
//! stale, broken baseline, weak expect, and the planted file restored after each mutant.

use std::path::Path;
use std::process::{Command, Output};

/// A git repository with `src/lib.txt` (the code) and `check.sh` (the "test suite": fails
/// with a message when a guarded line is missing).
fn project() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    write(
        p,
        "src/lib.txt",
        "fn add(a, b) = a + b\nfn ties = lower index\n",
    );
    write(
        p,
        "check.sh",
        "grep -q 'a + b' src/lib.txt || { echo 'add: wrong sum'; exit 1; }\n",
    );
    std::fs::create_dir_all(p.join("mutants")).unwrap();
    let git = |args: &[&str]| {
        let o = Command::new("git")
            .args(args)
            .current_dir(p)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    git(&["init", "-q"]);
    git(&["add", "."]);
    d
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn mutant(root: &Path, name: &str, find: &str, replace: &str, command: &str, expect: &str) {
    let y = format!(
        "about: {name}\nedits:\n  - file: src/lib.txt\n    find: {find:?}\n    replace: {replace:?}\ncommand: {command:?}\nexpect: {expect:?}\n"
    );
    write(root, &format!("mutants/{name}.yaml"), &y);
}

fn xtask(root: &Path, args: &[&str]) -> (Option<i32>, String) {
    let o: Output = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("mutants")
        .arg("--root")
        .arg(root)
        .args(args)
        .output()
        .expect("run xtask");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.code(), text)
}

fn scratch_file(root: &Path) -> String {
    std::fs::read_to_string(root.join("target/mutants/tree/src/lib.txt")).unwrap()
}

/// Two caught mutants editing the same text of one file: the second applies only if the
/// first one's file was restored.
fn two_mutants_of_one_line(p: &Path) {
    for (name, replace) in [("add-minus", "a - b"), ("add-swap", "b + a")] {
        mutant(p, name, "a + b", replace, "bash check.sh", "add: wrong sum");
    }
}

const ORIGINAL: &str = "fn add(a, b) = a + b\nfn ties = lower index\n";

#[test]
fn a_caught_mutant_passes_and_every_file_is_restored() {
    let d = project();
    let p = d.path();
    two_mutants_of_one_line(p);
    let (code, out) = xtask(p, &[]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("add-minus") && out.contains("caught"), "{out}");
    assert!(
        out.contains("mutants: 2 caught, 0 survived, 0 misfired in 0m"),
        "{out}"
    );
    assert_eq!(scratch_file(p), ORIGINAL, "the scratch file is restored");
    assert_eq!(
        std::fs::read_to_string(p.join("src/lib.txt")).unwrap(),
        ORIGINAL,
        "the source tree is never touched"
    );
}

#[test]
fn a_survived_mutant_fails_the_harness_with_what_to_do() {
    let d = project();
    let p = d.path();
    mutant(
        p,
        "ties-higher",
        "lower index",
        "higher index",
        "bash check.sh",
        "ties: wrong order",
    );
    let (code, out) = xtask(p, &[]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("ties-higher") && out.contains("SURVIVED"),
        "{out}"
    );
    assert!(
        out.contains("the check it names does not guard this regression"),
        "{out}"
    );
    assert!(out.contains("$ bash check.sh"), "names the command: {out}");
    assert!(
        out.contains("mutants: 0 caught, 1 survived, 0 misfired"),
        "{out}"
    );
    assert_eq!(scratch_file(p), ORIGINAL);
}

#[test]
fn a_mutant_failing_without_expect_misfires_and_shows_the_output_tail() {
    let d = project();
    let p = d.path();
    mutant(
        p,
        "misfire",
        "a + b",
        "a - b",
        "bash check.sh; grep -q never src/lib.txt || { echo 'unrelated: compile error'; exit 1; }",
        "add: wrong sum",
    );
    // Made to fail for another reason: the check's own message is not printed.
    write(p, "check.sh", "grep -q 'a + b' src/lib.txt || exit 1\n");
    let (code, out) = xtask(p, &[]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("BROKEN BASELINE"),
        "the grep for `never` fails unmutated too: {out}"
    );

    // A real misfire: the baseline passes, the mutant fails without the expected text.
    mutant(
        p,
        "misfire",
        "a + b",
        "a - b",
        "bash check.sh",
        "add: wrong sum",
    );
    let (code, out) = xtask(p, &[]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("MISFIRED (exit 1, without the expected text)"),
        "{out}"
    );
    assert!(
        out.contains("mutants: 0 caught, 0 survived, 1 misfired"),
        "{out}"
    );
    assert!(
        out.contains("target/mutants/logs/misfire.log"),
        "points at the full log: {out}"
    );
    assert_eq!(scratch_file(p), ORIGINAL);
}

#[test]
fn a_hanging_mutant_is_killed_at_the_time_limit() {
    let d = project();
    let p = d.path();
    mutant(
        p,
        "hang",
        "a + b",
        "a - b",
        "grep -q 'a + b' src/lib.txt || sleep 30",
        "never printed",
    );
    let t = std::time::Instant::now();
    let (code, out) = xtask(p, &["--timeout", "1"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("MISFIRED (killed after the 1s time limit)"),
        "{out}"
    );
    assert!(
        t.elapsed().as_secs() < 20,
        "the sleep is killed, not waited for"
    );
    assert_eq!(scratch_file(p), ORIGINAL);
}

#[test]
fn a_stale_find_is_an_error_naming_the_mutant_and_file() {
    let d = project();
    let p = d.path();
    mutant(
        p,
        "gone",
        "a * b",
        "a / b",
        "bash check.sh",
        "add: wrong sum",
    );
    let (code, out) = xtask(p, &[]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("stale mutant gone"), "{out}");
    assert!(out.contains("occurs 0 times in src/lib.txt"), "{out}");
    assert!(
        !out.contains("baseline"),
        "nothing runs before the mutants apply: {out}"
    );
}

#[test]
fn a_broken_baseline_runs_no_mutant() {
    let d = project();
    let p = d.path();
    mutant(
        p,
        "add-minus",
        "a + b",
        "a - b",
        "bash check.sh && false",
        "add: wrong sum",
    );
    let (code, out) = xtask(p, &[]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("baseline 1/1: BROKEN"), "{out}");
    assert!(
        out.contains("the command fails on the unmutated tree"),
        "{out}"
    );
    assert!(out.contains("1 not run (broken baseline)"), "{out}");
    assert!(
        !p.join("target/mutants/logs/add-minus.log").exists(),
        "the mutant did not run"
    );
}

#[test]
fn an_expect_the_passing_command_prints_is_rejected() {
    let d = project();
    let p = d.path();
    mutant(
        p,
        "weak",
        "a + b",
        "a - b",
        "echo 'test add ... ok'; bash check.sh",
        "test add",
    );
    let (code, out) = xtask(p, &[]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("WEAK EXPECT: the passing baseline already prints `test add`"),
        "{out}"
    );
}

#[test]
fn list_only_and_sample_select_mutants() {
    let d = project();
    let p = d.path();
    for n in ["a1", "a2", "a3"] {
        mutant(p, n, "a + b", "a - b", "bash check.sh", "add: wrong sum");
    }
    let (code, out) = xtask(p, &["--list"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("3 mutants") && out.contains("$ bash check.sh"),
        "{out}"
    );
    let (code, out) = xtask(p, &["--only", "a2"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("1 caught") && !out.contains("a1"), "{out}");
    let (code, out) = xtask(p, &["--only", "nope"]);
    assert_eq!(code, Some(2), "{out}");
    assert!(
        out.contains("--only nope: no such mutant") && out.contains("a1, a2, a3"),
        "{out}"
    );
    let (code, out) = xtask(p, &["--sample", "2", "--seed", "1"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("sample: 2 of 3 mutants, seed 1 (repeat with --sample 2 --seed 1): a1, a3"),
        "{out}"
    );
}

#[test]
fn in_place_plants_in_the_tree_itself_and_restores_it() {
    let d = project();
    let p = d.path();
    two_mutants_of_one_line(p);
    let (code, out) = xtask(p, &["--in-place"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("in place: planting in"), "{out}");
    assert!(
        out.contains("mutants: 2 caught, 0 survived, 0 misfired"),
        "{out}"
    );
    assert!(
        !p.join("target/mutants/tree").exists(),
        "no scratch tree in place"
    );
    assert_eq!(
        std::fs::read_to_string(p.join("src/lib.txt")).unwrap(),
        ORIGINAL,
        "the planted file is restored"
    );
}

#[test]
fn in_place_refuses_a_file_changed_since_git_add() {
    let d = project();
    let p = d.path();
    mutant(
        p,
        "add-minus",
        "a + b",
        "a - b",
        "bash check.sh",
        "add: wrong sum",
    );
    let edited = format!("{ORIGINAL}// local edit\n");
    write(p, "src/lib.txt", &edited);
    let (code, out) = xtask(p, &["--in-place"]);
    assert_eq!(code, Some(2), "{out}");
    assert!(
        out.contains("--in-place: this file has changed since `git add` (src/lib.txt)")
            && out.contains("run without --in-place"),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(p.join("src/lib.txt")).unwrap(),
        edited,
        "nothing planted, nothing run"
    );
    assert!(!out.contains("baseline"), "{out}");
}
