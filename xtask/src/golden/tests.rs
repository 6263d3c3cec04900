use super::*;

const FULL: &str = "a x ids: 1\nb x ids: 2\nc x ids: 3";

fn golden_at(dir: &Path, name: &str, content: &str) {
    let mut g = Golden::new(dir, true, None);
    assert!(matches!(
        g.check("cpu", name, content, Scope::Full).unwrap(),
        SnapState::Blessed(_)
    ));
}

fn accepted(dir: &Path, name: &str) -> insta::Snapshot {
    insta::Snapshot::from_file(&dir.join(format!("cpu/{name}.snap"))).unwrap()
}

#[test]
fn new_then_same_then_changed_then_blessed() {
    let dir = tempfile::tempdir().unwrap();
    let mut g = Golden::new(dir.path(), false, None);
    assert_eq!(
        g.check("cpu", "parity__x", "a\nb", Scope::Full).unwrap(),
        SnapState::New
    );
    assert!(dir.path().join("cpu/parity__x.snap.new").exists());
    golden_at(dir.path(), "parity__x", "a\nb");
    assert!(!dir.path().join("cpu/parity__x.snap.new").exists());
    // What we wrote, insta reads back as the same contents.
    assert_eq!(
        accepted(dir.path(), "parity__x")
            .as_text()
            .unwrap()
            .to_string(),
        "a\nb"
    );
    let mut g = Golden::new(dir.path(), false, None);
    assert_eq!(
        g.check("cpu", "parity__x", "a\nb\n", Scope::Full).unwrap(),
        SnapState::Same
    );
    match g.check("cpu", "parity__x", "a\nc", Scope::Full).unwrap() {
        SnapState::Changed(c) => assert_eq!(c.diff, "-b\n+c\n"),
        other => panic!("expected a change, got {other:?}"),
    }
    assert!(dir.path().join("cpu/parity__x.snap.new").exists());
    std::fs::write(
        dir.path().join("cpu/stale.snap"),
        render("stale", "z", None),
    )
    .unwrap();
    let unref = g.unreferenced("cpu").unwrap();
    assert_eq!(unref, vec![dir.path().join("cpu/stale.snap")]);
}

/// The repro line of one check compares that check's line only, and writes no partial
/// `.snap.new` that `cargo insta accept` would turn into a 1-line golden.
#[test]
fn a_filtered_run_compares_its_lines_and_writes_no_pending() {
    let dir = tempfile::tempdir().unwrap();
    golden_at(dir.path(), "parity__x", FULL);
    let mut g = Golden::new(dir.path(), false, None);
    assert_eq!(
        g.check("cpu", "parity__x", "b x ids: 2", Scope::Partial)
            .unwrap(),
        SnapState::Same
    );
    match g
        .check("cpu", "parity__x", "b x ids: 9", Scope::Partial)
        .unwrap()
    {
        SnapState::Changed(c) => {
            assert_eq!(c.diff, "-b x ids: 2\n+b x ids: 9\n");
            assert_eq!(c.meaning.lines, vec!["x/b/x: `2` -> `9`"]);
        }
        other => panic!("expected a change, got {other:?}"),
    }
    assert!(!dir.path().join("cpu/parity__x.snap.new").exists());
    // A new check on a filtered run is a change, not a pending snapshot either.
    assert!(matches!(
        g.check("cpu", "parity__x", "d x ids: 4", Scope::Partial)
            .unwrap(),
        SnapState::Changed(_)
    ));
    assert!(!dir.path().join("cpu/parity__x.snap.new").exists());
}

#[test]
fn a_filtered_bless_updates_only_its_lines() {
    let dir = tempfile::tempdir().unwrap();
    golden_at(dir.path(), "parity__x", FULL);
    let mut g = Golden::new(dir.path(), true, None);
    let ran = "b x ids: 9\nd x ids: 4";
    assert!(matches!(
        g.check("cpu", "parity__x", ran, Scope::Partial).unwrap(),
        SnapState::Blessed(_)
    ));
    assert_eq!(
        accepted(dir.path(), "parity__x")
            .as_text()
            .unwrap()
            .to_string(),
        "a x ids: 1\nb x ids: 9\nc x ids: 3\nd x ids: 4"
    );
    // A full run producing the same lines in its own order is the same snapshot.
    let mut g = Golden::new(dir.path(), false, None);
    let full = "a x ids: 1\nd x ids: 4\nb x ids: 9\nc x ids: 3";
    assert_eq!(
        g.check("cpu", "parity__x", full, Scope::Full).unwrap(),
        SnapState::Same
    );
}

#[test]
fn a_decade_rise_needs_a_reason_to_bless() {
    let dir = tempfile::tempdir().unwrap();
    let old = "normal simt scores: rel_max [1e-7,1e-6) rel_rmse [1e-8,1e-7)";
    let new = "normal simt scores: rel_max [1e-6,1e-5) rel_rmse [1e-8,1e-7)";
    golden_at(dir.path(), "error__scores_ragged", old);
    let rise = "error of scores_ragged/normal/simt (rel_max) rose 10x (1e-7 -> 1e-6)";
    // A plain run: changed, and no .snap.new for `cargo insta accept` to take.
    let mut g = Golden::new(dir.path(), false, None);
    match g
        .check("cpu", "error__scores_ragged", new, Scope::Full)
        .unwrap()
    {
        SnapState::Changed(c) => assert_eq!(c.meaning.rises, vec![rise]),
        other => panic!("expected a change, got {other:?}"),
    }
    assert!(!dir
        .path()
        .join("cpu/error__scores_ragged.snap.new")
        .exists());
    // --bless alone: refused, the golden untouched.
    let mut g = Golden::new(dir.path(), true, None);
    assert!(matches!(
        g.check("cpu", "error__scores_ragged", new, Scope::Full)
            .unwrap(),
        SnapState::Refused(_)
    ));
    assert_eq!(g.failures().count(), 1);
    let snap = accepted(dir.path(), "error__scores_ragged");
    assert_eq!(snap.as_text().unwrap().to_string(), old);
    // --bless --reason: written, the reason in the header insta reads.
    let why = "bf16 inputs now: expected, see #12";
    let mut g = Golden::new(dir.path(), true, Some(why.into()));
    assert!(matches!(
        g.check("cpu", "error__scores_ragged", new, Scope::Full)
            .unwrap(),
        SnapState::Blessed(_)
    ));
    let snap = accepted(dir.path(), "error__scores_ragged");
    assert_eq!(snap.as_text().unwrap().to_string(), new);
    let d = snap.metadata().description().unwrap().to_string();
    assert!(d.contains(why) && d.contains(rise), "{d}");
    // A later plain bless of another change keeps the recorded reason.
    let newer = "normal simt scores: rel_max [1e-6,1e-5) rel_rmse [1e-9,1e-8)";
    let mut g = Golden::new(dir.path(), true, None);
    g.check("cpu", "error__scores_ragged", newer, Scope::Full)
        .unwrap();
    let snap = accepted(dir.path(), "error__scores_ragged");
    assert_eq!(snap.metadata().description(), Some(d.as_str()));
}

#[test]
fn unexpected_names_only_per_check_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    golden_at(dir.path(), "parity__gone", "a x ids: 1");
    golden_at(dir.path(), "parity__kept", "a x ids: 1");
    golden_at(dir.path(), "dispatch", "t a - -> k");
    let g = Golden::new(dir.path(), false, None);
    let expected = BTreeSet::from(["parity__kept".to_string()]);
    assert_eq!(
        g.unexpected("cpu", &expected).unwrap(),
        vec![dir.path().join("cpu/parity__gone.snap")]
    );
}
