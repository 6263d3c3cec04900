//! `cargo xtask report merge` joins recorded results of several targets into JUnit (read back
//! by junitparser, a reader nobody here wrote) and a summary a reviewer can act on.

use super::*;

/// `report merge` of run-a + run-b with every GPU target enabled; gfx1201 made unstable.
fn merge_fixture(dirs: &[&str], enabled: &str) -> (Output, String, String, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let m = std::fs::read_to_string(root().join("matrix.yaml")).unwrap();
    let anchor = "    runs_on: [self-hosted, linux, gpu-gfx1201]\n";
    assert!(
        m.contains(anchor),
        "matrix.yaml changed: update the unstable anchor of this test"
    );
    let m = m.replace(
        anchor,
        &format!("{anchor}    unstable: \"RDNA4 driver resets under load (tracking issue)\"\n"),
    );
    let matrix = tmp.path().join("matrix.yaml");
    std::fs::write(&matrix, m).unwrap();
    let (junit, summary) = (tmp.path().join("junit.xml"), tmp.path().join("summary.md"));
    let mut args: Vec<String> = vec!["report".into(), "merge".into()];
    args.extend(
        dirs.iter()
            .map(|d| fixtures().join(d).display().to_string()),
    );
    for (k, v) in [
        ("--matrix", matrix.display().to_string()),
        ("--golden", fixtures().join("golden").display().to_string()),
        ("--enabled", enabled.to_string()),
        ("--junit", junit.display().to_string()),
        ("--summary", summary.display().to_string()),
    ] {
        args.push(k.into());
        args.push(v);
    }
    let o = xtask(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let md = std::fs::read_to_string(&summary).unwrap_or_default();
    let xml = std::fs::read_to_string(&junit).unwrap_or_default();
    (o, md, xml, tmp)
}

#[test]
fn merge_reports_what_a_reviewer_acts_on() {
    let (o, md, xml, _tmp) = merge_fixture(&["run-a", "run-b"], "all");
    assert_eq!(
        o.status.code(),
        Some(1),
        "sm_90 fails and gfx906's runner is sick: {}",
        text(&o)
    );
    assert!(!xml.is_empty() && !md.is_empty());
    let row = |t: &str| {
        md.lines()
            .find(|l| l.starts_with(&format!("| {t} |")))
            .unwrap_or_else(|| panic!("no row for {t}:\n{md}"))
            .to_string()
    };
    // Every target of matrix.yaml has a row.
    for t in matrix_targets() {
        row(&t.name);
    }
    assert!(row("cpu").contains("pass"));
    assert!(row("sm_90").contains("fail") && row("sm_90").contains("NVIDIA H200"));
    // Built, not run on sm_75's own runner: the runner is wrong, which fails.
    assert!(
        row("sm_75").contains("no CUDA device with arch sm_75"),
        "{}",
        row("sm_75")
    );
    assert!(
        md.contains("enabled for this repository but did not run on its runner (built, not run)")
    );
    assert!(
        row("gfx906").contains("health check failed")
            && row("gfx906").contains("rocminfo: no GPU agent")
    );
    assert!(
        row("gfx950").contains("skipped") || row("gfx950").contains("no HIP toolchain"),
        "{}",
        row("gfx950")
    );
    assert!(
        row("gfx1201").contains("unstable, not gating"),
        "{}",
        row("gfx1201")
    );
    // Shards of sm_86 joined: both records, one row.
    assert_eq!(md.lines().filter(|l| l.starts_with("| sm_86 |")).count(), 1);
    assert!(
        row("sm_86").contains("| 2 |"),
        "two passes from two shards: {}",
        row("sm_86")
    );
    // Failures with the command that reproduces each.
    assert!(md.contains("cargo xtask matrix --target sm_90 --case topk_split_edges --suite parity --dist adversarial --variant split"));
    assert!(md.contains("query 1: 3 ids differ"));
    // Benchmarks with verdicts and ratios.
    assert!(md.contains("SLOWER") && md.contains("1.404") && md.contains("FASTER"));
    // Resource delta (from report.yaml) and the pending snapshot's diff against golden/.
    assert!(md.contains("+topk_wide regs 128"));
    assert!(md.contains("-adversarial split ids 2x300 digest 9f8e7d6c5b4a3921"));
    assert!(md.contains("+adversarial split ids 2x300 digest 00aa11bb22cc33dd"));
    assert!(
        !md.contains("-ties split"),
        "unchanged snapshot lines are not in the diff"
    );
    assert!(md.contains("cargo xtask report bless --from"));
}

#[test]
fn unstable_failures_and_disabled_targets_do_not_gate() {
    let (o, md, _xml, _tmp) =
        merge_fixture(&["run-b", "run-a/cpu", "run-a/sm_75"], "gfx1201, sm_86");
    assert_eq!(
        o.status.code(),
        Some(0),
        "only the unstable gfx1201 fails: {}\n{md}",
        text(&o)
    );
    assert!(md.contains("unstable, not gating"));
    assert!(md.contains("`sm_90` is not enabled for this repository"));
    // gfx950 is not enabled: its uploaded "skipped" results are shown, not a runner failure.
    assert!(md.contains("no HIP toolchain") && !md.contains("did not run on its runner"));
    let sm75 = md.lines().find(|l| l.starts_with("| sm_75 |")).unwrap();
    assert!(sm75.contains("| built, not run |"), "{sm75}");
    let gfx950 = md.lines().find(|l| l.starts_with("| gfx950 |")).unwrap();
    assert!(gfx950.contains("| skipped |"), "{gfx950}");
}

#[test]
fn merge_rejects_bad_input_with_exit_2() {
    let o = xtask(&["report", "merge", "/nonexistent/qsa"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("not a folder"));
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("cpu")).unwrap();
    std::fs::write(tmp.path().join("cpu/results.yaml"), "target: [broken\n").unwrap();
    let o = xtask(&["report", "merge", tmp.path().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("results.yaml"));
    let o = xtask(&[
        "report",
        "merge",
        fixtures().join("run-a").to_str().unwrap(),
        "--enabled",
        "sm_99",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("unknown target `sm_99`"));
}

/// junitparser (PyPI) reads the merged JUnit: the counts it derives from the test cases
/// agree with the counts the writer put on the suites, and the failing check carries its
/// repro command.
#[test]
fn merged_junit_reads_back_with_junitparser() {
    let has = Command::new("python3")
        .args(["-c", "import junitparser"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has {
        return skipped(
            "merged_junit_reads_back_with_junitparser",
            "python3 with junitparser is not installed (pip install junitparser==5.0.3)",
            "QSA_REQUIRE_JUNITPARSER",
        );
    }
    let (_o, _md, _xml, tmp) = merge_fixture(&["run-a", "run-b"], "all");
    let script = r#"
import sys
from junitparser import JUnitXml, TestSuite, Failure, Error, Skipped
xml = JUnitXml.fromfile(sys.argv[1])
suites = [xml] if isinstance(xml, TestSuite) else list(xml)
total = fail = err = skip = 0
for s in suites:
    cases = list(s)
    f = sum(1 for c in cases for r in c.result if isinstance(r, Failure))
    e = sum(1 for c in cases for r in c.result if isinstance(r, Error))
    k = sum(1 for c in cases for r in c.result if isinstance(r, Skipped))
    assert s.tests == len(cases), (s.name, s.tests, len(cases))
    assert s.failures == f, (s.name, s.failures, f)
    assert s.errors == e, (s.name, s.errors, e)
    assert s.skipped == k, (s.name, s.skipped, k)
    total += len(cases); fail += f; err += e; skip += k
    for c in cases:
        for r in c.result:
            if isinstance(r, (Failure, Error)):
                print("FAILED", s.name, c.name, (r.message or "").replace("\n", " "), (r.text or "").replace("\n", " "))
print("SUITES", " ".join(sorted(s.name for s in suites)))
print("COUNTS", total, fail, err, skip)
"#;
    let o = Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(tmp.path().join("junit.xml"))
        .output()
        .unwrap();
    let out = text(&o);
    assert!(
        o.status.success(),
        "junitparser rejected the JUnit file:\n{out}"
    );
    let counts: Vec<usize> = out
        .lines()
        .find_map(|l| l.strip_prefix("COUNTS "))
        .unwrap()
        .split(' ')
        .map(|x| x.parse().unwrap())
        .collect();
    assert!(
        counts[0] >= 10 && counts[1] + counts[2] >= 3 && counts[3] >= 2,
        "{out}"
    );
    let suites = out.lines().find_map(|l| l.strip_prefix("SUITES ")).unwrap();
    for t in matrix_targets() {
        assert!(
            suites
                .split(' ')
                .any(|s| s == t.name || s.starts_with(&format!("{}.", t.name))),
            "no suite for {}: {suites}",
            t.name
        );
    }
    assert!(
        out.lines().any(|l| l.starts_with("FAILED sm_90.parity")
            && l.contains("topk_split_edges")
            && l.contains("reproduce: cargo xtask matrix --target sm_90")),
        "{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.starts_with("FAILED gfx906") && l.contains("health check failed")),
        "{out}"
    );
}
