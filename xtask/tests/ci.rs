//! CI: the workflows agree with matrix.yaml (through `cargo xtask ci-matrix`, never a
//! hard-coded list), `cargo xtask report merge` joins recorded results of several targets
//! into JUnit (read back by junitparser, a reader nobody here wrote) and a summary a
//! reviewer can act on, the PR-comment script updates one comment, and the runner health
//! check reports why a runner is sick.
//!
//! Optional tools: python3 with `junitparser` and `node`. Missing, their tests print
//! SKIPPED on the terminal (not captured); with QSA_REQUIRE_JUNITPARSER=1 / QSA_REQUIRE_NODE=1
//! (set by CI) a missing tool fails the test instead.

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

fn ci_matrix(enabled: &str) -> Value {
    let o = xtask(&["ci-matrix", "--enabled", enabled]);
    assert!(
        o.status.success(),
        "ci-matrix --enabled {enabled}: {}",
        text(&o)
    );
    // JSON is YAML: the YAML reader checks the JSON too.
    serde_yaml::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("ci-matrix printed no JSON ({e}): {}", text(&o)))
}

#[test]
fn every_target_gets_a_job_or_a_not_run_line() {
    let targets = matrix_targets();
    let gpu: Vec<&Target> = targets.iter().filter(|t| t.vendor != "cpu").collect();
    let first = gpu[0].name.clone();
    for enabled in ["", "none", "all", first.as_str()] {
        let out = ci_matrix(enabled);
        let include = out["matrix"]["include"].as_sequence().unwrap();
        let not_run = out["not_run"].as_sequence().unwrap();
        assert_eq!(out["any"].as_bool(), Some(!include.is_empty()));
        let mut seen = BTreeSet::new();
        for j in include {
            let t = gpu
                .iter()
                .find(|t| t.name == s(&j["target"]))
                .expect("a job for a GPU target of matrix.yaml");
            let labels: Vec<String> = j["runs_on"].as_sequence().unwrap().iter().map(s).collect();
            assert_eq!(
                labels, t.runs_on,
                "{}: runs_on labels differ from matrix.yaml",
                t.name
            );
            assert_eq!(
                s(&j["health"]),
                if t.vendor == "amd" {
                    "rocminfo"
                } else {
                    "nvidia-smi"
                }
            );
            seen.insert(t.name.clone());
        }
        for n in not_run {
            assert!(s(&n["reason"]).contains("not enabled"), "{n:?}");
            assert!(
                seen.insert(s(&n["target"])),
                "{} both runs and is not run",
                s(&n["target"])
            );
        }
        let want: BTreeSet<String> = gpu.iter().map(|t| t.name.clone()).collect();
        assert_eq!(
            seen, want,
            "enabled `{enabled}`: every GPU target gets a job or a not-run line"
        );
    }
    // cpu has no GPU job: the hosted job runs its whole matrix, on matrix.yaml's labels.
    let cpu = targets
        .iter()
        .find(|t| t.vendor == "cpu")
        .expect("a cpu target");
    let w = workflow("ci.yml");
    let hosted = job(&w, "hosted");
    assert_eq!(
        s(&hosted["runs-on"]),
        cpu.runs_on.join(","),
        "hosted job labels = cpu's runs_on"
    );
    assert!(steps_text(hosted).contains(&format!(
        "cargo xtask matrix --target {} --require-toolchains",
        cpu.name
    )));
}

#[test]
fn gpu_jobs_come_from_ci_matrix_not_from_a_list_in_the_workflow() {
    let w = workflow("ci.yml");
    let plan = job(&w, "plan");
    assert!(steps_text(plan).contains("cargo xtask ci-matrix --enabled-from-env QSA_GPU_TARGETS"));
    assert_eq!(
        s(&plan["outputs"]["matrix"]),
        "${{ steps.plan.outputs.matrix }}"
    );
    let gpu = job(&w, "gpu");
    assert_eq!(
        s(&gpu["strategy"]["matrix"]),
        "${{ fromJSON(needs.plan.outputs.matrix) }}"
    );
    assert_eq!(s(&gpu["runs-on"]), "${{ matrix.runs_on }}");
    assert_eq!(s(&gpu["continue-on-error"]), "${{ matrix.unstable }}");
    assert!(
        s(&gpu["if"]).contains("needs.plan.outputs.any == 'true'"),
        "no GPU job (and no empty matrix) when none is enabled"
    );
    // The health check is the first step after the checkout; the matrix runs the job's target.
    let steps = gpu["steps"].as_sequence().unwrap();
    let first_run = steps.iter().find(|st| st.get("run").is_some()).unwrap();
    assert!(
        s(&first_run["run"]).contains(".ci/gpu-health.sh"),
        "health check first"
    );
    assert!(steps_text(gpu).contains("cargo xtask matrix \"${args[@]}\""));
    assert!(steps_text(gpu).contains("--shard \"$SHARD\""));
    // No target name or runner label of matrix.yaml is written into any workflow.
    for file in ["ci.yml", "pr-comment.yml"] {
        let mut all = Vec::new();
        strings(&workflow(file), &mut all);
        for t in matrix_targets().iter().filter(|t| t.vendor != "cpu") {
            for needle in
                std::iter::once(&t.name).chain(t.runs_on.iter().filter(|l| l.starts_with("gpu-")))
            {
                let hit = all.iter().find(|x| x.contains(needle.as_str()));
                assert!(
                    hit.is_none(),
                    "{file} hard-codes `{needle}` ({hit:?}): read it from ci-matrix"
                );
            }
        }
    }
    // The merge sees every job: hosted and GPU, even when some failed.
    let report = job(&w, "report");
    let needs: Vec<String> = report["needs"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(s)
        .collect();
    assert!(needs.contains(&"hosted".into()) && needs.contains(&"gpu".into()));
    assert!(s(&report["if"]).contains("always()"));
    assert!(steps_text(report)
        .contains("cargo xtask report merge artifacts --enabled-from-env QSA_GPU_TARGETS"));
    assert!(steps_text(report).contains("GITHUB_STEP_SUMMARY"));
}

#[test]
fn workflows_are_least_privilege_and_fork_safe() {
    let dir = root().join(".github/workflows");
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let w = yaml(&p);
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        let perms = w
            .get("permissions")
            .unwrap_or_else(|| panic!("{name}: no top-level permissions"));
        if let Some(m) = perms.as_mapping() {
            for (k, v) in m {
                assert!(
                    s(v) == "read" || s(v) == "none",
                    "{name}: top-level {} is {}: write only per job",
                    s(k),
                    s(v)
                );
            }
        }
        let on = &w["on"];
        assert!(
            on.get("pull_request_target").is_none(),
            "{name}: no pull_request_target workflows"
        );
    }
    let ci = workflow("ci.yml");
    // A fork's pull request waits for a maintainer's approval before any self-hosted job.
    let approve = job(&ci, "approve-gpu");
    assert_eq!(s(&approve["environment"]), "gpu-fork-approval");
    assert!(s(&approve["if"]).contains("needs.plan.outputs.fork == 'true'"));
    let plan = steps_text(job(&ci, "plan"));
    assert!(
        plan.contains("github.event.pull_request.head.repo.full_name")
            && plan.contains("github.repository")
    );
    let gpu = job(&ci, "gpu");
    assert!(gpu["needs"]
        .as_sequence()
        .unwrap()
        .iter()
        .any(|n| s(n) == "approve-gpu"));
    let cond = s(&gpu["if"]);
    assert!(
        cond.contains("needs.approve-gpu.result == 'success'")
            && cond.contains("needs.plan.outputs.fork != 'true'"),
        "{cond}"
    );
    // The comment workflow never runs pull-request code.
    let pc = workflow("pr-comment.yml");
    assert!(pc["on"].get("workflow_run").is_some());
    assert_eq!(
        pc["permissions"].as_mapping().map(|m| m.len()),
        Some(0),
        "pr-comment: permissions: {{}} at the top"
    );
    let comment = job(&pc, "comment");
    let mut perms: Vec<String> = comment["permissions"]
        .as_mapping()
        .unwrap()
        .iter()
        .map(|(k, v)| format!("{}={}", s(k), s(v)))
        .collect();
    perms.sort();
    assert_eq!(perms, ["actions=read", "pull-requests=write"]);
    let uses: Vec<String> = comment["steps"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|st| st.get("uses"))
        .map(s)
        .collect();
    assert!(
        uses.iter().all(|u| !u.starts_with("actions/checkout")),
        "pr-comment checks out nothing: {uses:?}"
    );
    assert!(
        comment["steps"]
            .as_sequence()
            .unwrap()
            .iter()
            .all(|st| st.get("run").is_none()),
        "pr-comment runs no shell"
    );
}

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

/// The github-script of pr-comment.yml, run by node against a fake GitHub: the first run
/// creates the comment, the second updates it, a run for an old commit or a bad PR number
/// writes nothing, and @-mentions are defused.
#[test]
fn pr_comment_is_created_once_then_updated() {
    if !Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return skipped(
            "pr_comment_is_created_once_then_updated",
            "node is not installed",
            "QSA_REQUIRE_NODE",
        );
    }
    let pc = workflow("pr-comment.yml");
    let steps = job(&pc, "comment")["steps"].as_sequence().unwrap().clone();
    let script = steps
        .iter()
        .find_map(|st| st.get("with").and_then(|w| w.get("script")))
        .map(s)
        .expect("github-script step");
    let harness = r#"
const fs = require("node:fs");
const state = JSON.parse(fs.readFileSync(process.env.STATE, "utf8"));
const github = {
  paginate: async (fn, args) => fn(args),
  rest: {
    pulls: { get: async ({ pull_number }) => ({ data: { number: pull_number, head: { sha: state.head } } }) },
    issues: {
      listComments: async () => state.comments,
      updateComment: async ({ comment_id, body }) => { state.comments.find((c) => c.id === comment_id).body = body; },
      createComment: async ({ body }) => { const c = { id: state.comments.length + 1, user: { login: "github-actions[bot]" }, body }; state.comments.push(c); return { data: c }; },
    },
  },
};
const core = { info: (m) => console.log(m), warning: (m) => console.log(`warning: ${m}`) };
const context = { repo: { owner: "o", repo: "r" } };
(async () => {
  await (async function () { SCRIPT })();
  fs.writeFileSync(process.env.STATE, JSON.stringify(state));
})().catch((e) => { console.error(e); process.exit(1); });
"#
    .replace("SCRIPT", &script);
    let tmp = tempfile::tempdir().unwrap();
    let js = tmp.path().join("harness.cjs");
    std::fs::write(&js, harness).unwrap();
    let dir = tmp.path().join("summary");
    std::fs::create_dir_all(&dir).unwrap();
    let state = tmp.path().join("state.json");
    std::fs::write(&state, r#"{"head":"abc123","comments":[{"id":1,"user":{"login":"someone"},"body":"<!-- qsa-ci-summary --> not ours"}]}"#).unwrap();
    let run = |pr: &str, summary: &str, sha: &str| {
        std::fs::write(dir.join("pr-number"), pr).unwrap();
        std::fs::write(dir.join("summary.md"), summary).unwrap();
        let o = Command::new("node")
            .arg(&js)
            .env("STATE", &state)
            .env("SUMMARY_DIR", &dir)
            .env("HEAD_SHA", sha)
            .env("RUN_URL", "https://example.invalid/run/1")
            .env("CONCLUSION", "failure")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        let v: Value = serde_yaml::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
        v["comments"].as_sequence().unwrap().clone()
    };
    let c = run("7\n", "## qsa matrix\nfirst @maintainer", "abc123");
    assert_eq!(c.len(), 2, "created one, left someone else's alone");
    assert!(
        s(&c[1]["body"]).starts_with("<!-- qsa-ci-summary -->")
            && s(&c[1]["body"]).contains("first @\u{200b}maintainer")
    );
    let c = run("7", "## qsa matrix\nsecond", "abc123");
    assert_eq!(c.len(), 2, "updated, not repeated");
    assert!(s(&c[1]["body"]).contains("second") && !s(&c[1]["body"]).contains("first"));
    assert_eq!(s(&c[0]["body"]), "<!-- qsa-ci-summary --> not ours");
    let c = run("7", "stale", "old999");
    assert!(
        !s(&c[1]["body"]).contains("stale"),
        "a run for an older commit writes nothing"
    );
    let c = run("7; rm -rf /", "evil", "abc123");
    assert!(c.len() == 2 && !s(&c[1]["body"]).contains("evil"));
    // A hostile artifact: summary.md a symlink to a file of the runner is never followed.
    let secret = tmp.path().join("runner-secret");
    std::fs::write(&secret, "TOKEN=hunter2").unwrap();
    std::fs::remove_file(dir.join("summary.md")).unwrap();
    std::os::unix::fs::symlink(&secret, dir.join("summary.md")).unwrap();
    std::fs::write(dir.join("pr-number"), "7").unwrap();
    let o = Command::new("node")
        .arg(&js)
        .env("STATE", &state)
        .env("SUMMARY_DIR", &dir)
        .env("HEAD_SHA", "abc123")
        .env("RUN_URL", "https://example.invalid/run/1")
        .env("CONCLUSION", "failure")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let v: Value = serde_yaml::from_str(&std::fs::read_to_string(&state).unwrap()).unwrap();
    let body = s(&v["comments"][1]["body"]);
    assert!(
        !body.contains("hunter2") && body.contains("before it wrote a summary"),
        "a symlinked summary.md must not be read: {body}"
    );
    // A summary over the byte limit is not read at all (no 100 MB string in the runner).
    std::fs::remove_file(dir.join("summary.md")).unwrap();
    let c = run("7", &"x".repeat((1 << 20) + 1), "abc123");
    let body = s(&c[1]["body"]);
    assert!(
        body.contains("over the 1048576-byte limit") && !body.contains("xxxx"),
        "an oversized summary.md must not be read: {}",
        &body[..body.len().min(300)]
    );
}

#[test]
fn health_check_names_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = root().join(".ci/gpu-health.sh");
    let run = |target: &str, vendor: &str| {
        let out = tmp.path().join("out");
        let o = Command::new("bash")
            .arg(&script)
            .args([target, vendor, out.to_str().unwrap()])
            .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
            .env("RUNNER_NAME", "box1")
            .output()
            .unwrap();
        let health =
            std::fs::read_to_string(out.join(target).join("health.txt")).unwrap_or_default();
        (o.status.code(), health)
    };
    // No driver at all (this machine has none: the fake comes next).
    if !Path::new("/usr/bin/nvidia-smi").exists() {
        let (code, why) = run("sm_90", "nvidia");
        assert_eq!(code, Some(1));
        assert!(why.contains("nvidia-smi not found on runner box1"), "{why}");
    }
    let fake = bin.join("nvidia-smi");
    std::fs::write(&fake, "#!/bin/sh\necho 'NVIDIA H200, 9.0, 580.82'\n").unwrap();
    Command::new("chmod").arg("+x").arg(&fake).status().unwrap();
    let (code, why) = run("sm_90", "nvidia");
    assert_eq!((code, why.as_str()), (Some(0), ""));
    let (code, why) = run("sm_86", "nvidia");
    assert_eq!(code, Some(1));
    assert!(
        why.contains("no sm_86 GPU on runner box1") && why.contains("NVIDIA H200"),
        "{why}"
    );
    std::fs::write(&fake, "#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver' >&2\nexit 9\n").unwrap();
    let (code, why) = run("sm_90", "nvidia");
    assert_eq!(code, Some(1));
    assert!(
        why.contains("could not communicate with the NVIDIA driver"),
        "{why}"
    );
}

/// Cargo.toml's `rust-version` is at least what every package Cargo.lock resolves for this
/// host declares (cargo metadata), so the stated minimum can build the locked tree; CI's
/// msrv job builds with exactly that version, which checks the other side.
#[test]
fn rust_version_covers_the_lock() {
    // "1.89" is "1.89.0": compare (major, minor, patch).
    let parse = |v: &str| -> Vec<u64> {
        let mut p: Vec<u64> = v.split('.').map(|x| x.parse().unwrap()).collect();
        p.resize(3, 0);
        p
    };
    let host = String::from_utf8(Command::new("rustc").arg("-vV").output().unwrap().stdout)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .expect("rustc -vV names the host");
    let o = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--locked",
            "--filter-platform",
        ])
        .arg(&host)
        .current_dir(root())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let m: Value = serde_yaml::from_slice(&o.stdout).unwrap();
    let resolved: Vec<String> = m["resolve"]["nodes"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|n| s(&n["id"]))
        .collect();
    let mut need: Option<(Vec<u64>, String)> = None;
    let mut ours: Option<(Vec<u64>, String)> = None;
    for p in m["packages"].as_sequence().unwrap() {
        if !resolved.contains(&s(&p["id"])) {
            continue;
        }
        let Some(rv) = p["rust_version"].as_str() else {
            continue;
        };
        if s(&p["name"]) == "qsa" {
            ours = Some((parse(rv), rv.to_string()));
        }
        let who = format!("{rv} for {} {}", s(&p["name"]), s(&p["version"]));
        if need.as_ref().is_none_or(|(v, _)| parse(rv) > *v) {
            need = Some((parse(rv), who));
        }
    }
    let (need, who) = need.expect("some locked package declares a rust-version");
    let (ours, stated) = ours.expect("the qsa package declares rust-version");
    assert!(
        ours >= need,
        "Cargo.toml says rust-version {stated} but Cargo.lock needs {who}. Raise \
         [workspace.package] rust-version (and the README's minimum) or pin that crate lower"
    );
}

/// Every action is pinned by a full commit SHA with the version it stands for in a comment,
/// and every checkout drops its credentials (zizmor in .ci/run audits the same and more;
/// this is the seconds-fast guard that runs with `cargo test`).
#[test]
fn every_action_is_pinned_by_sha_with_its_version() {
    let dir = root().join(".github/workflows");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        let raw = std::fs::read_to_string(&p).unwrap();
        for (i, line) in raw.lines().enumerate() {
            let Some(rest) = line
                .trim_start()
                .trim_start_matches("- ")
                .strip_prefix("uses: ")
            else {
                continue;
            };
            n += 1;
            let (action, comment) = rest.split_once(" # ").unwrap_or((rest, ""));
            let sha = action.trim().rsplit_once('@').map_or("", |x| x.1);
            assert!(
                sha.len() == 40 && sha.bytes().all(|b| b.is_ascii_hexdigit()),
                "{name}:{}: `{}` is not pinned by a full commit SHA: pin it, with the version \
                 in a comment (`uses: owner/repo@<40 hex> # vX.Y.Z`)",
                i + 1,
                action.trim()
            );
            assert!(
                !comment.trim().is_empty(),
                "{name}:{}: `{}` has no version comment",
                i + 1,
                action.trim()
            );
        }
        let w = yaml(&p);
        for (job, j) in w["jobs"].as_mapping().unwrap() {
            for st in j["steps"].as_sequence().into_iter().flatten() {
                if s(&st["uses"]).starts_with("actions/checkout@") {
                    assert_eq!(
                        s(&st["with"]["persist-credentials"]),
                        "false",
                        "{name}: job {}: checkout must set persist-credentials: false",
                        s(job)
                    );
                }
            }
        }
    }
    assert!(n >= 10, "only {n} `uses:` lines found: the scan is broken");
}
