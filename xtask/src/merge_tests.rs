use super::bless::bless_from;
use super::*;

fn snap(body: &str) -> String {
    format!("---\nsource: xtask/src/golden.rs\nexpression: x\n---\n{body}\n")
}

fn matrix() -> Matrix {
    Matrix::load(&default_matrix_path()).unwrap()
}

#[test]
fn golden_place_needs_golden_target_file() {
    let p = Path::new("a/qsa-sm_90/sm_90/pending/golden/sm_90/parity__x.snap.new");
    assert_eq!(
        golden_place(p),
        Some(("sm_90".into(), "parity__x.snap.new".into()))
    );
    assert_eq!(golden_place(Path::new("a/sm_90/parity__x.snap.new")), None);
    assert_eq!(
        golden_place(Path::new("golden/sm_90/deeper/x.snap.new")),
        None
    );
}

#[test]
fn bless_from_accepts_everything_or_nothing() {
    let m = matrix();
    let dir = tempfile::tempdir().unwrap();
    let art = dir.path().join("art/qsa-sm_90/sm_90/pending/golden/sm_90");
    std::fs::create_dir_all(&art).unwrap();
    std::fs::write(art.join("parity__a.snap.new"), snap("a 2")).unwrap();
    std::fs::write(
        art.join("bench.yaml.new"),
        "measured_on: H200\nentries: {}\n",
    )
    .unwrap();
    let golden = dir.path().join("golden");
    std::fs::create_dir_all(golden.join("sm_90")).unwrap();
    std::fs::write(golden.join("sm_90/parity__a.snap"), snap("a 1")).unwrap();

    // A broken proposal anywhere: nothing is written.
    let bad = dir
        .path()
        .join("art/qsa-gfx906/gfx906/pending/golden/gfx906");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(bad.join("bench.yaml.new"), "entries: [not, a, map]\n").unwrap();
    assert!(bless_from(&dir.path().join("art"), &golden, &m).is_err());
    assert_eq!(
        std::fs::read_to_string(golden.join("sm_90/parity__a.snap")).unwrap(),
        snap("a 1")
    );
    assert!(!golden.join("sm_90/bench.yaml").exists());
    let leftovers: Vec<_> = std::fs::read_dir(golden.join("sm_90")).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "no staged temporaries left behind");
    std::fs::remove_dir_all(dir.path().join("art/qsa-gfx906")).unwrap();

    let done = bless_from(&dir.path().join("art"), &golden, &m).unwrap();
    assert_eq!(done.len(), 2);
    assert_eq!(
        std::fs::read_to_string(golden.join("sm_90/parity__a.snap")).unwrap(),
        snap("a 2")
    );
    assert_eq!(
        snapshot_text(&golden.join("sm_90/parity__a.snap")).unwrap(),
        "a 2"
    );
    assert!(done.iter().any(|b| b.what == "changed"));
    assert!(done
        .iter()
        .any(|b| b.what == "new" && b.to.ends_with("sm_90/bench.yaml")));
}

#[test]
fn bless_from_rejects_unknown_targets_and_empty_folders() {
    let m = matrix();
    let dir = tempfile::tempdir().unwrap();
    let golden = dir.path().join("golden");
    assert!(bless_from(dir.path(), &golden, &m)
        .unwrap_err()
        .to_string()
        .contains("no pending"));
    let art = dir.path().join("golden/sm_99");
    std::fs::create_dir_all(&art).unwrap();
    std::fs::write(art.join("x.snap.new"), snap("x")).unwrap();
    assert!(bless_from(dir.path(), &dir.path().join("g2"), &m)
        .unwrap_err()
        .to_string()
        .contains("sm_99"));
}
