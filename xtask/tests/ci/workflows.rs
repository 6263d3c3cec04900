//! The workflows agree with matrix.yaml (through `cargo xtask ci-matrix`, never a hard-coded
//! list), are least-privilege and fork-safe, and pin every action by commit SHA.

use super::*;

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
