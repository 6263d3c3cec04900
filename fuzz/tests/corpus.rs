//! Every committed corpus input runs without a panic and without an over-long message
//! (`cargo test` replays them; `qsa-fuzz` grows them). A finding fixed in the readers stays
//! fixed: its input is in the corpus.

use qsa_fuzz::{engine, Target};
use std::path::Path;

fn replay(target: Target) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target.name());
    let (n, bad) = engine::replay(target, &dir).unwrap();
    assert!(n > 0, "{}: empty corpus", dir.display());
    assert!(
        bad.is_empty(),
        "{} findings:\n{}",
        bad.len(),
        bad.join("\n")
    );
}

#[test]
fn npy_corpus() {
    replay(Target::Npy);
}

#[test]
fn matrix_corpus() {
    replay(Target::Matrix);
}

#[test]
fn cases_corpus() {
    replay(Target::Cases);
}

/// The harness itself catches what it must: a panic and a long message are findings.
#[test]
fn the_harness_catches_panics_and_checks_message_length() {
    let long = "x".repeat(100_000);
    let out = qsa_fuzz::check(Target::Matrix, long.as_bytes()).unwrap();
    assert!(matches!(out, qsa_fuzz::Outcome::Err { .. }));
    let r = engine::run_caught_with(|| panic!("planted"));
    assert!(r.unwrap_err().contains("planted"));
}

/// Echoed input never reaches the novelty signature, whatever quotes it holds (a finer
/// signature grew the corpus by thousands of entries a minute).
#[test]
fn signatures_drop_quoted_input() {
    let sig = |what: &str| {
        qsa_fuzz::signature(&qsa_fuzz::Outcome::Err {
            text: String::new(),
            what: what.into(),
        })
    };
    let a = sig(r#"syntax: invalid type: string "y\"ter`u edg`""#);
    let b = sig(r#"syntax: invalid type: string "abc""#);
    let c = sig("syntax: invalid type: string \"abc... (5 more bytes)");
    assert_eq!(a, "serde: invalid type: string ");
    assert_eq!((a.as_str(), b.as_str()), (c.as_str(), c.as_str()));
    let k = sig("cases.topk.k: case `x_1`: k = 100 exceeds the limit");
    assert_eq!(k, "cases.topk.k: case _: k  # exceeds the limit");
    assert_eq!(k, sig("cases.topk.k: case `y`: k = 7 exceeds the limit"));
}

#[test]
fn signatures_drop_paths() {
    let sig = |what: &str| {
        qsa_fuzz::signature(&qsa_fuzz::Outcome::Err {
            text: String::new(),
            what: what.into(),
        })
    };
    assert_eq!(
        sig("cases.inputs: case `x`: examples/cases/a b.npy: cannot read: No such file"),
        "cases.inputs: case _: PATH: cannot read: No such file"
    );
}
