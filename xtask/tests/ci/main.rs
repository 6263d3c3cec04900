//! CI: the workflows agree with matrix.yaml (through `cargo xtask ci-matrix`, never a
//! hard-coded list), `cargo xtask report merge` joins recorded results of several targets
//! into JUnit (read back by junitparser, a reader nobody here wrote) and a summary a
//! reviewer can act on, the PR-comment script updates one comment, and the runner health
//! check reports why a runner is sick.
//!
//! Optional tools: python3 with `junitparser` and `node`. Missing, their tests print
//! SKIPPED on the terminal (not captured); with QSA_REQUIRE_JUNITPARSER=1 / QSA_REQUIRE_NODE=1
//! (set by CI) a missing tool fails the test instead.
//!
//! Modules, one job each: `workflows` (the workflows against matrix.yaml, least privilege,
//! pinned actions), `merge` (`report merge`: summary, JUnit, junitparser), `pr_comment` (the
//! PR-comment script under node), `health` (.ci/gpu-health.sh), `msrv` (rust-version against
//! Cargo.lock). This file holds what they share: paths, the xtask binary, YAML readers.

mod health;
mod merge;
mod msrv;
mod pr_comment;
mod workflows;

use serde_yaml::Value;
use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn fixtures() -> PathBuf {
    root().join("xtask/tests/fixtures/results")
}

fn xtask(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .current_dir(root())
        .env_remove("GITHUB_RUN_ID")
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

/// Say SKIPPED where it is seen: libtest captures print!, not writes to the stderr handle.
fn skipped(test: &str, why: &str, require_var: &str) {
    if std::env::var(require_var).is_ok_and(|v| v == "1") {
        panic!("{test}: {why}, and {require_var}=1 requires it");
    }
    let _ = writeln!(
        std::io::stderr(),
        "\nSKIPPED {test}: {why} (set {require_var}=1 to make this a failure)"
    );
}

fn yaml(path: &Path) -> Value {
    let t = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml::from_str(&t).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn workflow(name: &str) -> Value {
    yaml(&root().join(".github/workflows").join(name))
}

fn job<'a>(w: &'a Value, name: &str) -> &'a Value {
    w.get("jobs")
        .and_then(|j| j.get(name))
        .unwrap_or_else(|| panic!("workflow has no job `{name}`"))
}

fn s(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        other => serde_yaml::to_string(other).unwrap(),
    }
}

/// Every string of a YAML value (keys and values), for "nothing hard-coded" checks.
fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Sequence(xs) => xs.iter().for_each(|x| strings(x, out)),
        Value::Mapping(m) => m.iter().for_each(|(k, x)| {
            strings(k, out);
            strings(x, out)
        }),
        Value::Tagged(t) => strings(&t.value, out),
        _ => {}
    }
}

fn steps_text(job: &Value) -> String {
    let mut all = Vec::new();
    strings(job.get("steps").expect("job has steps"), &mut all);
    all.join("\n")
}

struct Target {
    name: String,
    vendor: String,
    runs_on: Vec<String>,
}

fn matrix_targets() -> Vec<Target> {
    let m = yaml(&root().join("matrix.yaml"));
    m["targets"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|t| Target {
            name: s(&t["name"]),
            vendor: s(&t["vendor"]),
            runs_on: t["runs_on"].as_sequence().unwrap().iter().map(s).collect(),
        })
        .collect()
}
