//! A target run through its PTX on a newer card, as xtask sees its results: the status in
//! every report (never plain `run`), its snapshots marked and never over the card's, the
//! card's own results preferred when reports are merged, and `bless --from` refusing a
//! snapshot made off the card over one made on it.

use super::*;
use crate::report::TargetReport;
use qsa::backend::DeviceInfo;
use qsa::matrix::Suite;
use qsa::results::{Record, Status, TargetStatus};
use std::path::Path;

fn matrix() -> Matrix {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    Matrix::load(&root.join("matrix.yaml")).unwrap()
}

fn record(suite: Suite, status: Status, snapshot: Option<&str>) -> Record {
    Record {
        suite,
        case: "topk_edges_small".into(),
        dist: "nan_inf".into(),
        variant: "wide".into(),
        check: "ids".into(),
        dispatched: Some("wide".into()),
        status,
        message: if status == Status::Fail {
            "1 of 8 queries differ from the reference".into()
        } else {
            String::new()
        },
        metrics: Default::default(),
        snapshot: snapshot.map(String::from),
        repro: "cargo xtask matrix --target sm_75 --case topk_edges_small --suite parity --dist nan_inf --variant wide".into(),
    }
}

fn results(status: TargetStatus, records: Vec<Record>) -> TargetResults {
    TargetResults {
        target: "sm_75".into(),
        status,
        reason: "sm_75's PTX compiled by the driver for this sm_90 at load".into(),
        device: DeviceInfo {
            name: "NVIDIA H200".into(),
            arch: "sm_90".into(),
            driver: "CUDA driver 13.0 (580.159.04)".into(),
        },
        seed: 1,
        started: String::new(),
        seconds: 12.0,
        records,
    }
}

fn report(r: TargetResults) -> TargetReport {
    TargetReport {
        results: r,
        unstable: None,
        build: String::new(),
        notes: Vec::new(),
    }
}

#[test]
fn a_ptx_run_says_so_in_the_terminal_junit_and_summary() {
    let pass = report(results(
        TargetStatus::RunPtx,
        vec![record(Suite::Parity, Status::Pass, None)],
    ));
    let term = crate::report::terminal::render(std::slice::from_ref(&pass));
    assert!(
        term.contains("sm_75     run (PTX on sm_90)     1"),
        "the terminal table must show a PTX run as run (PTX on sm_90): {term}"
    );
    assert!(term.contains("NVIDIA H200: sm_75's PTX"), "{term}");
    let junit = crate::report::junit::render(std::slice::from_ref(&pass)).unwrap();
    assert!(
        junit.contains(r#"<property name="status" value="run (PTX on sm_90)"/>"#),
        "{junit}"
    );
    assert!(
        junit.contains(r#"<property name="driver" value="CUDA driver 13.0 (580.159.04)"/>"#),
        "{junit}"
    );
    assert!(
        junit.contains("topk_edges_small/nan_inf/wide/ids"),
        "{junit}"
    );
    let md = crate::report::markdown::render(std::slice::from_ref(&pass));
    assert!(
        md.contains("| sm_75 | ✅ pass (PTX on sm_90) | 1 |"),
        "the summary must show a PTX run as pass (PTX on sm_90): {md}"
    );
    assert!(
        md.contains("NVIDIA H200, CUDA driver 13.0 (580.159.04): "),
        "{md}"
    );

    let fail = report(results(
        TargetStatus::RunPtx,
        vec![record(Suite::Parity, Status::Fail, None)],
    ));
    let term = crate::report::terminal::render(std::slice::from_ref(&fail));
    assert!(term.contains("FAIL (PTX on sm_90)"), "{term}");
    assert!(
        term.contains("FAIL sm_75 (PTX on sm_90) parity topk_edges_small/nan_inf/wide/ids"),
        "{term}"
    );
    let md = crate::report::markdown::render(std::slice::from_ref(&fail));
    assert!(md.contains("| sm_75 | ❌ fail (PTX on sm_90) |"), "{md}");
    assert!(md.contains("- **sm_75 (PTX on sm_90)** parity"), "{md}");
}

/// The snapshots of a PTX run: written marked `ptx:` where the card made none; compared,
/// never written, where it did.
#[test]
fn ptx_snapshots_are_marked_and_never_replace_the_cards() {
    let m = matrix();
    let t = m.target("sm_75").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let repro = Repro::new(&root, &root.join("matrix.yaml"), &[]);
    let r = results(
        TargetStatus::RunPtx,
        vec![record(Suite::Parity, Status::Pass, Some("digest 1"))],
    );
    let mut g = Golden::new(dir.path(), true, None);
    let mut notes = Vec::new();
    snapshots(&mut g, &m, t, &r, Scope::Full, &repro, &mut notes).unwrap();
    let file = dir.path().join("sm_75/parity__topk_edges_small.snap");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains("description: 'ptx: made on an sm_90 card through sm_75''s PTX"),
        "{text}"
    );
    // The card's own snapshot (written as the card writes it): compared, kept.
    let mut card = Golden::new(dir.path(), true, None);
    card.check(
        "sm_75",
        "parity__topk_edges_small",
        "nan_inf wide ids: digest 2\n",
        Scope::Full,
    )
    .unwrap();
    let before = std::fs::read_to_string(&file).unwrap();
    let mut g = Golden::new(dir.path(), true, None);
    let mut notes = Vec::new();
    snapshots(&mut g, &m, t, &r, Scope::Full, &repro, &mut notes).unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), before);
    let n = notes.iter().find(|n| n.failed).expect("a failing note");
    assert!(
        n.message
            .contains("sm_75's PTX run on sm_90 differs from golden/sm_75/parity__topk_edges_small.snap, which was made on an sm_75 card"),
        "{}",
        n.message
    );
    assert!(n.diff.contains("+nan_inf wide ids: digest 1"), "{}", n.diff);
}

/// Merged reports: the target's own card replaces a PTX run of it.
#[test]
fn the_cards_own_results_replace_a_ptx_run_when_merged() {
    let ptx = report(results(TargetStatus::RunPtx, vec![]));
    let mut own = report(results(TargetStatus::Run, vec![]));
    own.results.device.name = "NVIDIA GeForce RTX 2080 Ti".into();
    own.results.device.arch = "sm_75".into();
    let joined = crate::merge::join_shards(vec![ptx.clone(), own]);
    assert_eq!(joined.results.status, TargetStatus::Run);
    assert_eq!(joined.results.device.arch, "sm_75");
    let emu = report(results(TargetStatus::Emulated, vec![]));
    let joined = crate::merge::join_shards(vec![emu, ptx]);
    assert_eq!(joined.results.status, TargetStatus::RunPtx);
}

/// `bless --from`: a pending snapshot from a PTX run (or emulation) may not replace one
/// the card made; over its own kind, or nothing, it is accepted.
#[test]
fn bless_from_refuses_a_ptx_snapshot_over_the_cards() {
    let m = matrix();
    let dir = tempfile::tempdir().unwrap();
    let golden = dir.path().join("golden");
    let art = dir.path().join("art/golden/sm_75");
    std::fs::create_dir_all(&art).unwrap();
    // What a PTX run leaves pending.
    let mut g = Golden::new(&dir.path().join("ptx"), false, None);
    g.check_ptx("sm_75", "sm_90", "parity__x", "a x ids: 1", Scope::Full)
        .unwrap();
    std::fs::copy(
        dir.path().join("ptx/sm_75/parity__x.snap.new"),
        art.join("parity__x.snap.new"),
    )
    .unwrap();
    let done = crate::merge::bless::bless_from(&dir.path().join("art"), &golden, &m).unwrap();
    assert_eq!(done.len(), 1);
    // Now the card's own snapshot is there: the same artifact is refused.
    let mut card = Golden::new(&golden, true, None);
    card.check("sm_75", "parity__x", "a x ids: 2", Scope::Full)
        .unwrap();
    let e = match crate::merge::bless::bless_from(&dir.path().join("art"), &golden, &m) {
        Ok(done) => panic!("bless --from let a PTX snapshot replace the card's: {done:?}"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains("was made off the card (ptx)") && e.contains("which was made on the card"),
        "{e}"
    );
    assert!(std::fs::read_to_string(golden.join("sm_75/parity__x.snap"))
        .unwrap()
        .contains("a x ids: 2"));
}
