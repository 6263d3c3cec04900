//! Issue 11: every mistake in a case is an error at the exact line of its field, before any
//! work: the kernels' limits, check_rows, active conflicts, .npy inputs; long input is never
//! echoed whole.

use super::*;
use crate::npy;

const REAL: &str = include_str!("../../matrix.yaml");

fn real() -> Matrix {
    Matrix::parse(Path::new("matrix.yaml"), REAL).unwrap()
}

/// Write `cases` (the text after `cases:\n`) to a cases file in `dir` and add it.
fn add(dir: &Path, cases: &str) -> Result<usize, MatrixError> {
    let f = dir.join("more.yaml");
    std::fs::write(&f, format!("cases:\n{cases}")).unwrap();
    real().add_cases_file(&f)
}

/// The error of a one-case file, and the 1-based line of `needle` in that file.
fn error_of(dir: &Path, cases: &str, needle: &str) -> (MatrixError, usize) {
    let e = add(dir, cases).expect_err("the case must be rejected");
    let text = format!("cases:\n{cases}");
    let matches: Vec<usize> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains(needle))
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(
        matches.len(),
        1,
        "test needle `{needle}` must name one line"
    );
    (e, matches[0])
}

const TOPK: &str = "    variants: [auto]\n    suites: [parity]\n";

#[test]
fn a_case_named_like_a_prefix_of_another_is_found_at_its_own_line() {
    let dir = tempfile::tempdir().unwrap();
    // The reviewers' report: `topk_edges` after `topk_edges_small` was reported at the
    // earlier case's line (a search for "name: topk_edges").
    let cases = format!(
        "  - name: mine_edges_small\n    topk: {{queries: 1, n: 8, capacity: 8, k: 2}}\n    dists: [uniform]\n{TOPK}\
         \x20 - name: mine_edges\n    topk: {{queries: 1, n: 8, capacity: 8, k: 2}}\n    dists: [nonesuch]\n{TOPK}"
    );
    let (e, line) = error_of(dir.path(), &cases, "dists: [nonesuch]");
    assert_eq!(e.line, Some(line), "{e}");
    assert_eq!(e.field, "cases.dists");
    // A case named `a`: the letter occurs on every line before it.
    let mut cases = String::new();
    for i in 0..3 {
        cases += &format!(
            "  - name: aaa_{i}\n    topk: {{queries: 1, n: 8, capacity: 8, k: 2}}\n    dists: [uniform]\n{TOPK}"
        );
    }
    cases += "  - name: a\n    topk: {queries: 1, n: 8, capacity: 4, k: 2}\n    dists: [uniform]\n";
    cases += TOPK;
    let (e, line) = error_of(dir.path(), &cases, "capacity: 4,");
    assert_eq!(
        (e.line, e.field.as_str()),
        (Some(line), "cases.topk.n"),
        "{e}"
    );
    assert!(
        e.to_string().starts_with(&format!(
            "{}:{line}: ",
            dir.path().join("more.yaml").display()
        )),
        "{e}"
    );
}

#[test]
fn errors_in_matrix_yaml_point_at_the_field() {
    // The second variant of a list, in matrix.yaml itself.
    let text = REAL.replacen(
        "    variants: [auto, register, wide]\n    suites: [parity]\n  - name: topk_k_ge_n",
        "    variants: [auto, nosuch, wide]\n    suites: [parity]\n  - name: topk_k_ge_n",
        1,
    );
    assert_ne!(text, REAL);
    let e = Matrix::parse(Path::new("matrix.yaml"), &text).unwrap_err();
    let line = text.lines().position(|l| l.contains("nosuch")).unwrap() + 1;
    assert_eq!(e.line, Some(line), "{e}");
    assert!(
        e.message
            .contains("`nosuch` is not a topk variant; declared: auto"),
        "{e}"
    );
}

#[test]
fn shapes_past_the_kernels_limits_are_errors_at_parse_time() {
    let dir = tempfile::tempdir().unwrap();
    let topk =
        |shape: &str| format!("  - name: big\n    topk: {shape}\n    dists: [uniform]\n{TOPK}");
    let (e, line) = error_of(
        dir.path(),
        &topk("{queries: 1, n: 200000, capacity: 200000, k: 100000}"),
        "k: 100000",
    );
    assert_eq!(
        (e.line, e.field.as_str()),
        (Some(line), "cases.topk.k"),
        "{e}"
    );
    assert!(
        e.message
            .contains("k = 100000 exceeds the top-k kernels' limit of 4096"),
        "{e}"
    );
    let (e, _) = error_of(
        dir.path(),
        &topk("{queries: 1, n: 2000000, capacity: 2000000, k: 10}"),
        "n: 2000000",
    );
    assert_eq!(e.field, "cases.topk.n", "{e}");
    assert!(e.message.contains("limit of 1048576"), "{e}");
    let (e, _) = error_of(
        dir.path(),
        &topk("{queries: 1, n: 10, capacity: 2000000, k: 10}"),
        "capacity: 2000000",
    );
    assert_eq!(e.field, "cases.topk.capacity", "{e}");
    // Inputs past any memory: a typo, not an allocation failure at run time.
    let (e, _) = error_of(
        dir.path(),
        &topk("{queries: 100000000, n: 1000000, capacity: 1000000, k: 10}"),
        "queries: 100000000",
    );
    assert!(e.message.contains("over the 34359738368-byte limit"), "{e}");
    let (e, _) = error_of(
        dir.path(),
        &topk("{queries: 4611686018427387904, n: 1000000, capacity: 1000000, k: 10}"),
        "queries: 4611686018427387904",
    );
    assert!(
        e.message.contains("exceeds the kernels' int32 argument"),
        "{e}"
    );
    let scores = "  - name: big\n    scores: {queries: 4611686018427387904, heads: 4611686018427387904, blocks: 1}\n    dists: [normal]\n    variants: [auto]\n    suites: [error]\n";
    let (e, _) = error_of(dir.path(), scores, "heads: 4611686018427387904");
    assert!(e.message.contains("more than 2^64"), "{e}");
    // Attention: the staged kernel's shared memory on the smallest GPU of the matrix.
    let attn = "  - name: wide_t\n    attention: {batch: 1, q_len: 16, kv_len: 65536, hq: 16, hkv: 1, t: 600, dtype: bf16}\n    dists: [random_ids]\n    variants: [auto]\n    suites: [error]\n";
    let (e, line) = error_of(dir.path(), attn, "t: 600");
    assert_eq!(
        (e.line, e.field.as_str()),
        (Some(line), "cases.attention"),
        "{e}"
    );
    assert!(
        e.message.contains("variant `auto` on target `sm_75`") && e.message.contains("at most t ="),
        "{e}"
    );
    // Restricted to the CPU target it is accepted.
    add(dir.path(), &format!("{attn}    targets: [cpu]\n")).unwrap();
}

#[test]
fn check_rows_outside_the_rows_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let attn = |rows: &str| {
        format!("  - name: rows\n    attention: {{batch: 2, q_len: 8, kv_len: 64, hq: 2, hkv: 1, t: 1, dtype: bf16}}\n    dists: [random_ids]\n    variants: [auto]\n    suites: [error]\n    check_rows: {rows}\n")
    };
    for (rows, want) in [
        ("0", "check_rows = 0 must be in 1..=16"),
        ("1000", "check_rows = 1000 must be in 1..=16"),
    ] {
        let (e, line) = error_of(dir.path(), &attn(rows), &format!("check_rows: {rows}"));
        assert_eq!(
            (e.line, e.field.as_str()),
            (Some(line), "cases.check_rows"),
            "{e}"
        );
        assert!(e.message.contains(want), "{e}");
    }
    add(dir.path(), &attn("16")).unwrap();
    let topk = format!("  - name: rows\n    topk: {{queries: 1, n: 8, capacity: 8, k: 2}}\n    dists: [uniform]\n{TOPK}    check_rows: 1\n");
    let (e, _) = error_of(dir.path(), &topk, "check_rows: 1");
    assert!(
        e.message
            .contains("check_rows applies to attention cases only"),
        "{e}"
    );
}

/// A cases file with .npy inputs in `dir`: scores [2, 8] f32 and active [2] i32 by default.
fn npy_case(dir: &Path, topk: &str, inputs: &str) -> String {
    format!("  - name: captured\n    topk: {topk}\n    inputs: {inputs}\n{TOPK}")
        .replace("DIR", &dir.display().to_string())
}

fn write(dir: &Path, name: &str, bytes: Vec<u8>) {
    std::fs::write(dir.join(name), bytes).unwrap();
}

#[test]
fn npy_inputs_are_checked_when_the_file_is_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "s.npy", npy::encode("<f4", &[2, 8], &[0; 64]));
    write(
        d,
        "a.npy",
        npy::encode("<i4", &[2], &[3, 0, 0, 0, 8, 0, 0, 0]),
    );
    let shape = "{queries: 2, n: 8, capacity: 8, k: 2}";
    add(d, &npy_case(d, shape, "{scores: s.npy, active: a.npy}")).unwrap();

    let bad: &[(&str, Vec<u8>, &str, &str)] = &[
        (
            "int_scores.npy",
            npy::encode("<i4", &[2, 8], &[0; 64]),
            "scores",
            "dtype <i4 but `scores` is float32",
        ),
        (
            "shape.npy",
            npy::encode("<f4", &[8, 2], &[0; 64]),
            "scores",
            "shape [8, 2], but `scores` of this case is [2, 8] (queries x capacity)",
        ),
        (
            "trunc.npy",
            npy::encode("<f4", &[2, 8], &[0; 60]),
            "scores",
            "truncated: shape [2, 8] of <f4 needs 64 bytes of data, the file has 60",
        ),
        (
            "be.npy",
            npy::encode(">f4", &[2, 8], &[0; 64]),
            "scores",
            "dtype `>f4` is not supported",
        ),
        (
            "float_active.npy",
            npy::encode("<f4", &[2], &[0; 8]),
            "active",
            "dtype <f4 but `active` is int32",
        ),
        (
            "range.npy",
            npy::encode("<i4", &[2], &[3, 0, 0, 0, 9, 0, 0, 0]),
            "active",
            "active count 9 of query 1 is outside [0, n = 8]",
        ),
    ];
    for (file, bytes, key, want) in bad {
        write(d, file, bytes.clone());
        let inputs = if *key == "scores" {
            format!("{{scores: {file}}}")
        } else {
            format!("{{scores: s.npy, active: {file}}}")
        };
        let (e, line) = error_of(d, &npy_case(d, shape, &inputs), "inputs:");
        assert_eq!(
            (e.line, e.field.clone()),
            (Some(line), format!("cases.inputs.{key}")),
            "{e}"
        );
        assert!(e.message.contains(want), "{file}: `{e}` lacks `{want}`");
        assert!(
            e.message.contains(&d.join(file).display().to_string()),
            "{e}"
        );
    }
    let mut fortran = npy::encode("<f4", &[2, 8], &[0; 64]);
    let at = fortran.windows(5).position(|w| w == b"False").unwrap();
    fortran.splice(at..at + 5, b"True ".iter().copied());
    write(d, "f.npy", fortran);
    let (e, _) = error_of(d, &npy_case(d, shape, "{scores: f.npy}"), "inputs:");
    assert!(e.message.contains("Fortran-order"), "{e}");
    let (e, _) = error_of(d, &npy_case(d, shape, "{scores: missing.npy}"), "inputs:");
    assert!(e.message.contains("missing.npy: cannot read"), "{e}");
    let (e, _) = error_of(d, &npy_case(d, shape, "{active: a.npy}"), "inputs:");
    assert!(e.message.contains("names no `scores`"), "{e}");
}

#[test]
fn an_active_file_and_an_active_mode_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "s.npy", npy::encode("<f4", &[2, 8], &[0; 64]));
    write(d, "a.npy", npy::encode("<i4", &[2], &[0; 8]));
    let c = npy_case(
        d,
        "{queries: 2, n: 8, capacity: 8, k: 2, active: causal}",
        "{scores: s.npy, active: a.npy}",
    );
    let (e, _) = error_of(d, &c, "inputs:");
    assert_eq!(e.field, "cases.inputs.active");
    assert!(
        e.message
            .contains("active counts come from a file and from `active: causal`"),
        "{e}"
    );
    // dists next to inputs would be ignored: an error, not silence.
    let c = format!(
        "{}    dists: [uniform]\n",
        npy_case(
            d,
            "{queries: 2, n: 8, capacity: 8, k: 2}",
            "{scores: s.npy}"
        )
    );
    let (e, line) = error_of(d, &c, "dists: [uniform]");
    assert_eq!(e.line, Some(line), "{e}");
    assert!(e.message.contains("would be ignored"), "{e}");
}

#[test]
fn long_input_is_never_echoed_whole() {
    // 1 MB of text without a colon is one YAML string: serde's message quotes it.
    let junk: String = (0..1_000_000u32)
        .map(|i| {
            if i % 61 == 0 {
                '\n'
            } else {
                (b'a' + (i * 7 % 26) as u8) as char
            }
        })
        .collect();
    let e = Matrix::parse(Path::new("m.yaml"), &junk).unwrap_err();
    assert!(
        e.to_string().len() < 600,
        "{} bytes: {}",
        e.to_string().len(),
        &e.to_string()[..200]
    );
    // A long case name or variant is clipped too.
    let dir = tempfile::tempdir().unwrap();
    let long = "x".repeat(10_000);
    let c = format!("  - name: ok\n    topk: {{queries: 1, n: 8, capacity: 8, k: 2}}\n    dists: [{long}]\n{TOPK}");
    let e = add(dir.path(), &c).unwrap_err();
    assert!(e.to_string().len() < 600, "{}", e.to_string().len());
    let c = format!("  - name: {long}\n    topk: {{queries: 1, n: 8, capacity: 8, k: 2}}\n    dists: [uniform]\n{TOPK}");
    let e = add(dir.path(), &c).unwrap_err();
    assert!(
        e.to_string().len() < 600 && e.message.contains("case name"),
        "{e}"
    );
}
