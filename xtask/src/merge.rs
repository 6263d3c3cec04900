//! `cargo xtask report merge DIR...`: join the results that runners on different machines
//! uploaded (one folder per target, as `cargo xtask matrix --out` writes them) into one
//! JUnit file, one Markdown summary and one exit code; and `bless --from DIR` (`bless`):
//! accept the pending snapshots of a downloaded CI run into golden/.
//!
//! What a folder may hold, found at any depth (artifact downloads add a folder level):
//! - `<target>/report.yaml`: a `TargetReport` (results + gate notes); preferred.
//! - `<target>/results.yaml`: the runner's `TargetResults` (used when no report.yaml).
//! - `<target>/health.txt`: written by the workflow when the runner's health check failed.
//! - `.../golden/<target>/<name>.snap.new`, `.../golden/<target>/bench.yaml.new`: pending
//!   snapshots and benchmark proposals, as `bless --from` reads them.
//!
//! Several results of one target (shards, `--shard i/n`) are joined into one.
//!
//! Exit codes: 0 every gate holds (unstable targets do not gate); 1 a gate failed;
//! 2 bad input (unreadable file, unknown enabled target).

use crate::ci::{default_matrix_path, Enabled};
use crate::report::{self, GateNote, TargetReport};
use anyhow::{bail, Context, Result};
use qsa::matrix::Matrix;
use qsa::results::{write_atomic, TargetResults, TargetStatus};
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

pub mod bless;
pub use bless::run_bless;

/// How deep the walk goes below each DIR: `artifacts/<artifact>/<target>/pending/golden/<t>/x`.
const MAX_DEPTH: usize = 8;

#[derive(clap::Args, Debug, Clone)]
pub struct ReportArgs {
    #[command(subcommand)]
    pub cmd: ReportCmd,
}

#[derive(clap::Subcommand, Debug, Clone)]
pub enum ReportCmd {
    /// Join per-runner results into one JUnit file, one Markdown summary and one exit code.
    Merge(MergeArgs),
    /// Accept the pending snapshots of a downloaded CI run into golden/ (after review).
    Bless(BlessArgs),
}

#[derive(clap::Args, Debug, Clone)]
pub struct BlessArgs {
    /// A folder of downloaded CI artifacts (`gh run download RUN -p 'qsa-*' -D DIR`).
    #[arg(long, value_name = "DIR")]
    pub from: PathBuf,
    /// The matrix file (default: matrix.yaml at the workspace root).
    #[arg(long, value_name = "FILE")]
    pub matrix: Option<PathBuf>,
    /// Where the accepted snapshots go (default: golden/ at the root).
    #[arg(long, value_name = "DIR")]
    pub golden: Option<PathBuf>,
}

#[derive(clap::Args, Debug, Clone)]
pub struct MergeArgs {
    /// Folders holding <target>/results.yaml (or report.yaml), at any depth.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Write the joined JUnit XML here.
    #[arg(long, value_name = "OUT")]
    pub junit: Option<PathBuf>,
    /// Write the Markdown summary here.
    #[arg(long, value_name = "OUT")]
    pub summary: Option<PathBuf>,
    /// The matrix file (default: matrix.yaml at the workspace root).
    #[arg(long, value_name = "FILE")]
    pub matrix: Option<PathBuf>,
    /// The accepted snapshots, to diff pending ones against (default: golden/ at the root).
    #[arg(long, value_name = "DIR")]
    pub golden: Option<PathBuf>,
    /// The GPU targets that were meant to run (as for ci-matrix): one of them without
    /// results is a failure; the others are listed as not enabled. Neither flag: a target
    /// without results is listed as not run, not gating.
    #[arg(long, value_name = "LIST", conflicts_with = "enabled_from_env")]
    pub enabled: Option<String>,
    #[arg(long, value_name = "VAR")]
    pub enabled_from_env: Option<String>,
}

/// What the walk found in the merged folders.
#[derive(Default, Debug)]
struct Found {
    /// Per target, in the order found: one entry per results/report file (shards).
    reports: BTreeMap<String, Vec<TargetReport>>,
    /// Per target: health-check failure text.
    health: BTreeMap<String, String>,
    /// Pending files: (target, file under golden/<target>/, path on disk).
    pending: Vec<(String, String, PathBuf)>,
}

/// The exit code: 0 every gate holds, 1 a gate failed (outputs are written either way).
pub fn run(args: ReportArgs) -> Result<u8> {
    match args.cmd {
        ReportCmd::Merge(a) => merge(&a),
        ReportCmd::Bless(a) => run_bless(&a).map(|()| 0),
    }
}

/// Merge, write the outputs, print the terminal table; the gate's exit code (0 or 1).
pub fn merge(a: &MergeArgs) -> Result<u8> {
    let matrix_path = a.matrix.clone().unwrap_or_else(default_matrix_path);
    let matrix = Matrix::load(&matrix_path)?;
    let golden = a.golden.clone().unwrap_or_else(|| {
        matrix_path
            .parent()
            .unwrap_or(Path::new("."))
            .join("golden")
    });
    let enabled = match (&a.enabled, &a.enabled_from_env) {
        (None, None) => None,
        (e, v) => Some(Enabled::from_args(e.as_deref(), v.as_deref(), &matrix)?),
    };
    let mut found = Found::default();
    for d in &a.dirs {
        if !d.is_dir() {
            bail!(
                "{}: not a folder (expected a folder of <target>/results.yaml)",
                d.display()
            );
        }
        walk(d, 0, true, &mut found)?;
    }
    let reports = assemble(&matrix, &golden, enabled.as_ref(), found)?;
    let mut summary = report::markdown::render(&reports);
    summary.push_str(&bless_hint(&reports));
    if let Some(p) = &a.summary {
        write_atomic(p, summary.as_bytes())?;
    }
    if let Some(p) = &a.junit {
        write_atomic(p, report::junit::render(&reports)?.as_bytes())?;
    }
    print!("{}", report::terminal::render(&reports));
    Ok(report::exit_code(&reports))
}

/// Collect what `dir` holds; `results: false` collects pending files only (bless reads no
/// results, so a broken results file cannot stop it).
fn walk(dir: &Path, depth: usize, results: bool, found: &mut Found) -> Result<()> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()
        .with_context(|| format!("cannot read {}", dir.display()))?;
    entries.sort();
    // report.yaml wins over results.yaml in the same folder: it holds the same results
    // plus the gate notes.
    let has_report = entries
        .iter()
        .any(|p| p.file_name().is_some_and(|n| n == "report.yaml"));
    for p in entries {
        // Artifacts are untrusted input: never follow a link out of the folder.
        let meta = std::fs::symlink_metadata(&p)
            .with_context(|| format!("cannot stat {}", p.display()))?;
        if meta.file_type().is_symlink() {
            continue;
        }
        if meta.is_dir() {
            walk(&p, depth + 1, results, found)?;
            continue;
        }
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let folder = p
            .parent()
            .and_then(|d| d.file_name())
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_string();
        match name {
            "report.yaml" if results => {
                let text = std::fs::read_to_string(&p)
                    .with_context(|| format!("cannot read {}", p.display()))?;
                let r: TargetReport = serde_yaml::from_str(&text)
                    .map_err(|e| anyhow::anyhow!("{}: not a qsa report file: {e}", p.display()))?;
                found
                    .reports
                    .entry(r.results.target.clone())
                    .or_default()
                    .push(r);
            }
            "results.yaml" if results && !has_report => {
                let results = TargetResults::read(&p)?;
                let r = TargetReport {
                    results,
                    unstable: None,
                    build: String::new(),
                    notes: Vec::new(),
                };
                found
                    .reports
                    .entry(r.results.target.clone())
                    .or_default()
                    .push(r);
            }
            "health.txt" if results => {
                let text = std::fs::read_to_string(&p)
                    .with_context(|| format!("cannot read {}", p.display()))?;
                found.health.insert(folder, text.trim().to_string());
            }
            _ if name.ends_with(".snap.new") || name == "bench.yaml.new" => {
                if let Some((target, file)) = golden_place(&p) {
                    found.pending.push((target, file, p.clone()));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// `(target, file)` of a pending file from the components after its last `golden` folder:
/// exactly `golden/<target>/<file>`.
pub fn golden_place(p: &Path) -> Option<(String, String)> {
    let comps: Vec<&str> = p
        .components()
        .map(|c| match c {
            Component::Normal(s) => s.to_str().unwrap_or("\u{0}"),
            _ => "\u{0}",
        })
        .collect();
    let at = comps.iter().rposition(|c| *c == "golden")?;
    match &comps[at + 1..] {
        [target, file] if !target.contains('\u{0}') && !file.contains('\u{0}') => {
            Some((target.to_string(), file.to_string()))
        }
        _ => None,
    }
}

/// Join shards, add pending-snapshot notes and the targets without results, in matrix order.
fn assemble(
    matrix: &Matrix,
    golden: &Path,
    enabled: Option<&Enabled>,
    mut found: Found,
) -> Result<Vec<TargetReport>> {
    let mut out = Vec::new();
    let mut names: Vec<String> = matrix.targets.iter().map(|t| t.name.clone()).collect();
    names.extend(
        found
            .reports
            .keys()
            .filter(|k| matrix.target(k).is_none())
            .cloned(),
    );
    for name in names {
        let declared = matrix.target(&name);
        let mut tr = match found.reports.remove(&name) {
            Some(shards) => join_shards(shards),
            None => {
                let expected = match enabled {
                    Some(e) => {
                        declared.is_some_and(|t| !t.is_gpu() || e.targets.contains_key(&name))
                    }
                    None => false,
                };
                let (status, reason) = if let Some(h) = found.health.get(&name) {
                    (
                        TargetStatus::Failed,
                        format!("the runner's health check failed: {h}"),
                    )
                } else if expected {
                    (TargetStatus::Failed, "enabled, but no results were uploaded: the job failed before the runner wrote them, was cancelled, or found no runner (see the job's log)".to_string())
                } else if let (Some(e), Some(_)) = (enabled, declared) {
                    (TargetStatus::Skipped, e.not_enabled_reason(&name))
                } else {
                    (
                        TargetStatus::Skipped,
                        "not run: no results for this target in the merged folders".to_string(),
                    )
                };
                TargetReport {
                    results: TargetResults {
                        target: name.clone(),
                        status,
                        reason,
                        device: Default::default(),
                        seed: matrix.seed,
                        started: String::new(),
                        seconds: 0.0,
                        records: Vec::new(),
                    },
                    unstable: None,
                    build: String::new(),
                    notes: Vec::new(),
                }
            }
        };
        // A target this repository has a runner for must run there: built-not-run or
        // skipped on its own runner means the runner is wrong (labels, driver, toolchain).
        let expected_run = enabled.is_some_and(|e| {
            declared.is_some_and(|t| !t.is_gpu() || e.targets.contains_key(&name))
        });
        if expected_run
            && matches!(
                tr.results.status,
                TargetStatus::BuiltNotRun
                    | TargetStatus::Skipped
                    | TargetStatus::Emulated
                    | TargetStatus::RunPtx
            )
        {
            tr.notes.push(GateNote {
                kind: "runner".into(),
                name: name.clone(),
                failed: true,
                message: format!(
                    "enabled for this repository but did not run on its runner ({}): {}",
                    tr.results.status_label(),
                    tr.results.reason
                ),
                meaning: Vec::new(),
                diff: String::new(),
                repro: String::new(),
            });
        }
        // matrix.yaml of the merging checkout decides what is unstable.
        if let Some(t) = declared {
            tr.unstable = t.unstable.clone();
        }
        for (target, file, path) in found.pending.iter().filter(|(t, _, _)| *t == name) {
            let snap = file
                .trim_end_matches(".new")
                .trim_end_matches(".snap")
                .to_string();
            if tr
                .notes
                .iter()
                .any(|n| n.kind == "snapshot" && (n.name == snap || n.name == *file))
            {
                continue;
            }
            tr.notes.push(pending_note(golden, target, file, path)?);
        }
        out.push(tr);
    }
    Ok(out)
}

/// One target from several results files (shards of one suite run).
pub(crate) fn join_shards(mut shards: Vec<TargetReport>) -> TargetReport {
    // The card's results replace an emulated run of the same target (a hosted job that
    // emulated it while its own runner ran it): the two are not shards of one run.
    if shards
        .iter()
        .any(|s| s.results.status != TargetStatus::Emulated)
    {
        shards.retain(|s| s.results.status != TargetStatus::Emulated);
    }
    // Likewise the target's own card replaces a run through its PTX on a newer card.
    if shards.iter().any(|s| s.results.status == TargetStatus::Run) {
        shards.retain(|s| s.results.status != TargetStatus::RunPtx);
    }
    let mut first = shards.remove(0);
    for s in shards {
        let (a, b) = (&mut first.results, s.results);
        a.status = match (a.status, b.status) {
            (TargetStatus::Failed, _) | (_, TargetStatus::Failed) => TargetStatus::Failed,
            (TargetStatus::Run, _) | (_, TargetStatus::Run) => TargetStatus::Run,
            (TargetStatus::RunPtx, _) | (_, TargetStatus::RunPtx) => TargetStatus::RunPtx,
            (x, _) => x,
        };
        if !b.reason.is_empty() && !a.reason.contains(&b.reason) {
            a.reason = if a.reason.is_empty() {
                b.reason
            } else {
                format!("{}; {}", a.reason, b.reason)
            };
        }
        if a.device.name.is_empty() {
            a.device = b.device;
        }
        if !b.started.is_empty() && (a.started.is_empty() || b.started < a.started) {
            a.started = b.started;
        }
        a.seconds += b.seconds;
        a.records.extend(b.records);
        if first.build.is_empty() {
            first.build = s.build;
        }
        for n in s.notes {
            if !first
                .notes
                .iter()
                .any(|m| m.kind == n.kind && m.name == n.name && m.message == n.message)
            {
                first.notes.push(n);
            }
        }
    }
    first
}

/// A failing note for a pending snapshot or benchmark proposal, with its diff against the
/// accepted one.
fn pending_note(golden: &Path, target: &str, file: &str, path: &Path) -> Result<GateNote> {
    let accepted = golden.join(target).join(file.trim_end_matches(".new"));
    let (new, old) = if file.ends_with(".snap.new") {
        (
            snapshot_text(path)?,
            if accepted.exists() {
                Some(snapshot_text(&accepted)?)
            } else {
                None
            },
        )
    } else {
        let read = |p: &Path| {
            std::fs::read_to_string(p).with_context(|| format!("cannot read {}", p.display()))
        };
        (
            read(path)?,
            if accepted.exists() {
                Some(read(&accepted)?)
            } else {
                None
            },
        )
    };
    // What the change means, as a local run says it (the PR comment shows these lines).
    let snap_name = file.trim_end_matches(".new").trim_end_matches(".snap");
    let meaning = match &old {
        Some(old) if file.ends_with(".snap.new") => {
            crate::snapshot_diff::explain(target, snap_name, old, &new, false).lines
        }
        _ => Vec::new(),
    };
    let (message, diff) = match &old {
        Some(old) => (
            "changed: pending review".to_string(),
            crate::golden::diff(old, &new),
        ),
        None => (
            "new: no accepted snapshot yet".to_string(),
            new.lines().map(|l| format!("+{l}\n")).collect(),
        ),
    };
    Ok(GateNote {
        kind: "snapshot".into(),
        name: format!("{target}/{file}")
            .trim_end_matches(".new")
            .to_string(),
        failed: true,
        message,
        meaning,
        diff,
        repro:
            "cargo xtask report bless --from DIR (DIR: this run's downloaded artifacts; docs/ci.md)"
                .into(),
    })
}

fn snapshot_text(p: &Path) -> Result<String> {
    let snap = insta::Snapshot::from_file(p)
        .map_err(|e| anyhow::anyhow!("{}: not a readable insta snapshot: {e}", p.display()))?;
    Ok(snap.as_text().map(|t| t.to_string()).unwrap_or_default())
}

/// The exact commands that accept this run's pending snapshots, when there are any.
fn bless_hint(reports: &[TargetReport]) -> String {
    let pending = reports
        .iter()
        .flat_map(|r| &r.notes)
        .any(|n| n.kind == "snapshot" && n.failed);
    if !pending {
        return String::new();
    }
    let run = std::env::var("GITHUB_RUN_ID").ok();
    let repo = std::env::var("GITHUB_REPOSITORY").ok();
    let download = match (run, repo) {
        (Some(run), Some(repo)) => {
            format!("gh run download {run} -R {repo} -p 'qsa-*' -D ci-artifacts")
        }
        _ => "gh run download RUN_ID -p 'qsa-*' -D ci-artifacts".to_string(),
    };
    format!(
        "\n### Accepting the pending snapshots\n\nRead the diffs above first. Then, in a checkout of this branch:\n\n```sh\n{download}\ncargo xtask report bless --from ci-artifacts\ngit add golden && git commit -m 'bless snapshots'\n```\n"
    )
}

#[cfg(test)]
#[path = "merge_tests.rs"]
mod tests;
