use super::*;

const REAL: &str = include_str!("../../matrix.yaml");

fn parse(text: &str) -> Result<Matrix, MatrixError> {
    Matrix::parse(Path::new("matrix.yaml"), text)
}

/// The error for `REAL` with `from` replaced by `to` (which must occur).
fn error_with(from: &str, to: &str) -> MatrixError {
    assert!(
        REAL.contains(from),
        "test edit `{from}` not found in matrix.yaml"
    );
    parse(&REAL.replacen(from, to, 1)).expect_err("the edit must be rejected")
}

#[test]
fn the_real_matrix_parses() {
    let m = parse(REAL).unwrap();
    assert_eq!(
        m.target_names(),
        ["cpu", "sm_75", "sm_86", "sm_90", "gfx906", "gfx1201", "gfx950"]
    );
    assert!(m.cases.len() > 20);
    assert_eq!(m.target("gfx950").unwrap().shared_per_block, Some(163840));
}

#[test]
fn unknown_keys_name_the_line_and_the_valid_fields() {
    let e = error_with(
        "    topk: {queries: 3, n: 40960,",
        "    topk: {quries: 3, n: 40960,",
    );
    let text = e.to_string();
    assert!(text.starts_with("matrix.yaml:"), "{text}");
    assert!(e.line.is_some(), "{text}");
    assert!(
        text.contains("quries") && text.contains("queries"),
        "{text}"
    );
}

#[test]
fn semantic_errors_name_file_line_field_and_fix() {
    let e = error_with(
        "topk: {queries: 3, n: 40960, capacity: 262144",
        "topk: {queries: 3, n: 40960, capacity: 4096",
    );
    assert_eq!(e.field, "cases.topk.n");
    assert!(e.message.contains("raise capacity"), "{e}");
    // The line of the field itself (the case's `topk:` line), found by structure.
    let line = e.line.unwrap();
    assert!(
        REAL.lines()
            .nth(line - 1)
            .unwrap()
            .contains("topk: {queries: 3, n: 40960, capacity: 262144"),
        "line {line}"
    );
    assert!(REAL
        .lines()
        .nth(line - 2)
        .unwrap()
        .contains("topk_decode_3q_40k"));

    let e = error_with(
        "variants: [auto, wide, split]\n    suites: [parity, bench]",
        "variants: [auto, wider]\n    suites: [parity, bench]",
    );
    assert_eq!(e.field, "cases.variants");
    assert!(
        e.message.contains("`wider`") && e.message.contains("declared: auto"),
        "{e}"
    );

    let e = error_with(
        "STRATA_QSA_WARP: \"1\"}, doc: \"no tensor",
        "STRATA_QSA_WRAP: \"1\"}, doc: \"no tensor",
    );
    assert!(
        e.message.contains("unknown switch `STRATA_QSA_WRAP`"),
        "{e}"
    );

    let e = error_with(
        "STRATA_QSA_WARP: \"1\"}, doc: \"no tensor",
        "QSA_SCORES_KERNEL: fastest}, doc: \"no tensor",
    );
    assert!(
        e.message
            .contains("variant `simt`: QSA_SCORES_KERNEL=fastest: expected warp"),
        "{e}"
    );

    let e = error_with("  - name: sm_75\n", "  - name: sm75\n");
    assert!(e.message.contains("sm_<NN>"), "{e}");

    let e = error_with(
        "dists: [uniform, ties, descending, nan_inf]",
        "dists: [uniform, nans]",
    );
    assert!(
        e.message.contains("unknown topk distribution `nans`"),
        "{e}"
    );

    let e = error_with(
        "    wave: 64\n    shared_per_block: 65536",
        "    wave: 48\n    shared_per_block: 65536",
    );
    assert_eq!(e.field, "targets.wave");

    let e = error_with("    targets: gpu\n", "    targets: [sm_99]\n");
    assert!(e.message.contains("unknown target `sm_99`"), "{e}");

    let e = error_with("scores: warp\n", "scores: nonesuch\n");
    assert_eq!(e.field, "baselines");
}

#[test]
fn syntax_errors_and_missing_files_are_errors_not_panics() {
    let e = parse("version: 1\nseed: [").unwrap_err();
    assert!(e.line.is_some(), "{e}");
    let e = Matrix::load(Path::new("/nonexistent/matrix.yaml")).unwrap_err();
    assert!(e.to_string().contains("cannot read"), "{e}");
    assert!(parse("").is_err());
}

#[test]
fn cases_files_add_cases_and_resolve_npy_paths() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("more.yaml");
    crate::npy::write_le(&dir.path().join("s.npy"), "<f4", &[2, 10], &[0; 80]).unwrap();
    std::fs::write(
        &f,
        "cases:\n  - name: captured\n    topk: {queries: 2, n: 10, capacity: 10, k: 3}\n    inputs: {scores: s.npy}\n    variants: [auto]\n    suites: [parity]\n",
    )
    .unwrap();
    let mut m = parse(REAL).unwrap();
    assert_eq!(m.add_cases_file(&f).unwrap(), 1);
    let c = m.cases.last().unwrap();
    assert_eq!(c.inputs["scores"], dir.path().join("s.npy"));
    // The same name again is an error that names the new file.
    let e = m.add_cases_file(&f).unwrap_err();
    assert!(e.to_string().contains("already exists"), "{e}");
    std::fs::write(&f, "cases:\n  - name: x\n    topk: {queries: 1, n: 1, capacity: 1, k: 1}\n    variants: [auto]\n    suites: [error]\n    dists: [uniform]\n").unwrap();
    let e = m.add_cases_file(&f).unwrap_err();
    assert!(e.message.contains("no error suite"), "{e}");
}
