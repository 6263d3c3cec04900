//! `cargo xtask matrix`: build what this host can build, run each target's suites in its
//! own runner process with a time limit, compare with golden/, gate, and report.

use crate::build;
use crate::build::resources::{gate_resources, Report as ResourceReport};
use crate::build::toolchain;
use crate::golden::{Golden, SnapState};
use crate::report::{self, GateNote, TargetReport};
use anyhow::{Context, Result};
use qsa::matrix::{Matrix, Suite, Target};
use qsa::results::{write_atomic, Record, Status, TargetResults, TargetStatus};
use qsa::suites::bench::{key as bench_key, BenchGolden};
use qsa::suites::stats::TimingStats;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `cargo xtask matrix` options.
#[derive(clap::Args, Debug, Clone)]
#[command(
    after_help = "Exit codes: 0 every gate holds; 1 a gate failed; 2 bad usage or configuration.\n\
Examples:\n  cargo xtask matrix                       every target this host can build and run\n  \
cargo xtask matrix --target cpu --case topk_edges_small --suite parity\n  \
cargo xtask matrix --cases my_cases.yaml --target cpu   add cases (e.g. .npy captured from a model)\n  \
cargo xtask matrix --bless                accept the new snapshots and benchmark medians"
)]
pub struct MatrixArgs {
    /// The matrix file.
    #[arg(long, default_value = "matrix.yaml")]
    pub matrix: PathBuf,
    /// Extra cases from another file (repeatable); not snapshotted (ad hoc), still gated.
    #[arg(long = "cases", value_name = "FILE")]
    pub cases: Vec<PathBuf>,
    /// Only these targets (repeatable; default: all of matrix.yaml).
    #[arg(long = "target", value_name = "T")]
    pub targets: Vec<String>,
    /// Only these cases (repeatable).
    #[arg(long = "case")]
    pub case: Vec<String>,
    /// Only these suites: parity, error, bench (repeatable).
    #[arg(long = "suite")]
    pub suite: Vec<String>,
    /// Only these variants (repeatable).
    #[arg(long = "variant")]
    pub variant: Vec<String>,
    /// Only these input distributions (repeatable).
    #[arg(long = "dist")]
    pub dist: Vec<String>,
    /// Run shard i of n of each target's cases (e.g. 2/4).
    #[arg(long)]
    pub shard: Option<String>,
    /// Accept: write new snapshots and benchmark medians to golden/, remove stale ones.
    #[arg(long)]
    pub bless: bool,
    /// A GPU target whose toolchain is missing fails the run instead of being skipped (CI).
    #[arg(long)]
    pub require_toolchains: bool,
    /// Seconds one target's runner may take before it is killed and marked failed.
    #[arg(long, default_value_t = 1800)]
    pub timeout: u64,
    /// Where results, JUnit and the summary go.
    #[arg(long, default_value = "target/qsa")]
    pub out: PathBuf,
    /// Compare results already made elsewhere (<DIR>/<target>/results.yaml, e.g. from a GPU
    /// machine without Rust) instead of running.
    #[arg(long, value_name = "DIR")]
    pub from_results: Option<PathBuf>,
}

pub fn run(a: MatrixArgs) -> Result<u8> {
    let root = toolchain::project_root();
    let matrix_path = if a.matrix.is_absolute() {
        a.matrix.clone()
    } else {
        root.join(&a.matrix)
    };
    let mut m = match Matrix::load(&matrix_path) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(2);
        }
    };
    for f in &a.cases {
        if let Err(e) = m.add_cases_file(f) {
            eprintln!("error: {e}");
            return Ok(2);
        }
    }
    let targets: Vec<Target> = if a.targets.is_empty() {
        m.targets.clone()
    } else {
        let mut v = Vec::new();
        for n in &a.targets {
            match m.target(n) {
                Some(t) => v.push(t.clone()),
                None => {
                    eprintln!(
                        "error: unknown target `{}`; {} declares: {}",
                        qsa::echo::value(n),
                        m.path.display(),
                        m.target_names().join(", ")
                    );
                    return Ok(2);
                }
            }
        }
        v
    };
    // Every selection flag checked before any work (the runner checks them again).
    let filter = match check_selection(&a, &m, &targets) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(2);
        }
    };
    let full = a.case.is_empty()
        && a.suite.is_empty()
        && a.variant.is_empty()
        && a.dist.is_empty()
        && a.shard.is_none();
    let golden_root = root.join("golden");
    let mut golden = Golden::new(&golden_root, a.bless);
    let out = if a.out.is_absolute() {
        a.out.clone()
    } else {
        root.join(&a.out)
    };
    let mut reports = Vec::new();

    // 1. Build every GPU target whose toolchain is here.
    let (buildable, missing): (Vec<&Target>, Vec<(&Target, String)>) = split_by_toolchain(&targets);
    let mut builds: BTreeMap<String, build::TargetBuild> = BTreeMap::new();
    if !buildable.is_empty() {
        eprintln!(
            "building kernels for {} ...",
            buildable
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        let summary = build::build_targets(
            &buildable,
            std::thread::available_parallelism().map_or(2, |n| n.get()),
        )?;
        build::print_summary(&summary);
        for tb in summary.targets {
            builds.insert(tb.target.clone(), tb);
        }
    }

    // 2. The runner binary (release: the suites are compute-heavy on the CPU).
    let runner = if a.from_results.is_none() {
        Some(build_runner(&root)?)
    } else {
        None
    };

    // 3. Run (or read) each target, then gate.
    for t in &targets {
        let mut notes = Vec::new();
        let mut build_line = String::new();
        let results: TargetResults =
            if let Some((_, why)) = missing.iter().find(|(x, _)| x.name == t.name) {
                if a.require_toolchains {
                    notes.push(note(
                        "toolchain",
                        "missing",
                        true,
                        why.clone(),
                        "cargo xtask setup",
                    ));
                }
                qsa::runner::not_run(&m, t, TargetStatus::Skipped, format!("not built: {why}"))
            } else {
                if let Some(tb) = builds.get(&t.name) {
                    build_line = format!("built with {}", tb.toolchain.describe());
                    resource_gates(&mut golden, t, &tb.report, tb.failed(), &mut notes)?;
                }
                if let Some(dir) = &a.from_results {
                    let p = dir.join(&t.name).join("results.yaml");
                    if p.exists() {
                        TargetResults::read(&p)?
                    } else {
                        qsa::runner::not_run(
                            &m,
                            t,
                            TargetStatus::Skipped,
                            format!("no results at {}", p.display()),
                        )
                    }
                } else if let Err(why) = filter.check_selects(&m, &[t]) {
                    qsa::runner::not_run(&m, t, TargetStatus::Skipped, why)
                } else if builds.get(&t.name).is_some_and(|b| b.failed()) {
                    qsa::runner::not_run(
                        &m,
                        t,
                        TargetStatus::Failed,
                        "kernel build failed (see above)".into(),
                    )
                } else {
                    run_runner(
                        runner.as_deref().expect("built above"),
                        &a,
                        &m,
                        t,
                        &out,
                        &golden_root,
                    )?
                }
            };
        // Dispatch: the table of every target (pure), and what ran against it.
        if a.cases.is_empty() {
            let table = qsa::plan::dispatch_table(&m, t);
            snapshot_note(
                &mut golden,
                &t.name,
                "dispatch",
                &table,
                &mut notes,
                format!("cargo xtask matrix --target {}", t.name),
            )?;
        }
        check_dispatch(&m, t, &results, &mut notes);
        if results.status == TargetStatus::Run {
            record_snapshots(&mut golden, &m, t, &results, &mut notes)?;
            // Benchmark medians: accepted with --bless, otherwise proposed as bench.yaml.new
            // (CI uploads it with the pending snapshots; `cargo xtask bless --from` takes it).
            let benched = results
                .records
                .iter()
                .any(|r| r.suite == Suite::Bench && r.status == Status::Pass);
            if t.bench_gate && benched {
                let file = if a.bless {
                    "bench.yaml"
                } else {
                    "bench.yaml.new"
                };
                write_bench(&golden_root, t, &results, file)?;
            }
            if full && a.cases.is_empty() {
                let stale = golden.unreferenced(&t.name)?;
                let ci = std::env::var_os("CI").is_some();
                for p in stale {
                    let msg = if a.bless {
                        format!("{} removed (no case produces it)", p.display())
                    } else {
                        format!(
                            "{} is not produced by any case: delete it or run with --bless",
                            p.display()
                        )
                    };
                    notes.push(note(
                        "snapshot",
                        &p.file_name().unwrap_or_default().to_string_lossy(),
                        ci && !a.bless,
                        msg,
                        "",
                    ));
                }
            }
        }
        let tr = TargetReport {
            results,
            unstable: t.unstable.clone(),
            build: build_line,
            notes,
        };
        let text = serde_yaml::to_string(&tr)?;
        write_atomic(&out.join(&t.name).join("report.yaml"), text.as_bytes())?;
        reports.push(tr);
    }

    // 4. Reports.
    let junit = report::junit::render(&reports)?;
    write_atomic(&out.join("junit.xml"), junit.as_bytes())?;
    let summary = report::markdown::render(&reports);
    write_atomic(&out.join("summary.md"), summary.as_bytes())?;
    print!("{}", report::terminal::render(&reports));
    let pending: Vec<_> = golden.failures().collect();
    if !pending.is_empty() {
        println!("\n{} snapshot(s) pending review: `cargo insta review` (or `cargo xtask matrix --bless`) accepts them:", pending.len());
        for o in &pending {
            println!(
                "  {} ({} {})",
                o.path.with_extension("snap.new").display(),
                o.target,
                o.name
            );
        }
    }
    println!(
        "\nresults: {}/<target>/results.yaml  junit: {}  summary: {}",
        out.display(),
        out.join("junit.xml").display(),
        out.join("summary.md").display()
    );
    Ok(report::exit_code(&reports))
}

/// The selection flags as a filter, checked against the matrix and the targets; and
/// `--from-results` must be a folder holding results of at least one selected target.
fn check_selection(
    a: &MatrixArgs,
    m: &Matrix,
    targets: &[Target],
) -> Result<qsa::suites::Filter, String> {
    let sel = qsa::suites::Selection {
        cases: a.case.clone(),
        suites: a.suite.clone(),
        variants: a.variant.clone(),
        dists: a.dist.clone(),
        shard: a.shard.clone(),
    };
    let filter = qsa::suites::Filter::new(m, &sel)?;
    let refs: Vec<&Target> = targets.iter().collect();
    if a.from_results.is_none() {
        filter.check_selects(m, &refs)?;
    }
    if let Some(dir) = &a.from_results {
        if !dir.is_dir() {
            return Err(format!(
                "--from-results {}: no such folder (it holds <target>/results.yaml from `qsa run`)",
                dir.display()
            ));
        }
        if !targets
            .iter()
            .any(|t| dir.join(&t.name).join("results.yaml").is_file())
        {
            return Err(format!(
                "--from-results {}: no <target>/results.yaml for any of {}",
                dir.display(),
                refs.iter()
                    .map(|t| t.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    Ok(filter)
}

fn note(kind: &str, name: &str, failed: bool, message: String, repro: &str) -> GateNote {
    GateNote {
        kind: kind.into(),
        name: name.into(),
        failed,
        message,
        diff: String::new(),
        repro: repro.into(),
    }
}

/// GPU targets whose toolchain is present, and the others with the reason and the fix.
fn split_by_toolchain(targets: &[Target]) -> (Vec<&Target>, Vec<(&Target, String)>) {
    let mut ok = Vec::new();
    let mut missing = Vec::new();
    for t in targets.iter().filter(|t| t.is_gpu()) {
        match toolchain::toolchain_status(t) {
            Ok(_) => ok.push(t),
            Err(e) => missing.push((t, e.to_string())),
        }
    }
    (ok, missing)
}

fn build_runner(root: &Path) -> Result<PathBuf> {
    eprintln!("building the runner (cargo build --release -p qsa --bin qsa) ...");
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--release", "--quiet", "-p", "qsa", "--bin", "qsa"])
        .current_dir(root)
        .status()
        .context("cannot start cargo to build the runner")?;
    anyhow::ensure!(status.success(), "building the runner failed ({status})");
    Ok(root.join("target/release/qsa"))
}

/// Run one target's runner with a time limit; a hang or crash becomes a failed target.
fn run_runner(
    runner: &Path,
    a: &MatrixArgs,
    m: &Matrix,
    t: &Target,
    out: &Path,
    golden_root: &Path,
) -> Result<TargetResults> {
    let results_path = out.join(&t.name).join("results.yaml");
    let _ = std::fs::remove_file(&results_path);
    let mut cmd = Command::new(runner);
    cmd.args(["run", "--target", &t.name, "--matrix"])
        .arg(&m.path)
        .arg("--out")
        .arg(&results_path);
    cmd.arg("--code-objects")
        .arg(toolchain::project_root().join("build/kernels"));
    if t.bench_gate {
        cmd.arg("--bench-golden")
            .arg(golden_root.join(&t.name).join("bench.yaml"));
    }
    for f in &a.cases {
        cmd.arg("--cases").arg(f);
    }
    for (flag, vals) in [
        ("--case", &a.case),
        ("--suite", &a.suite),
        ("--variant", &a.variant),
        ("--dist", &a.dist),
    ] {
        for v in vals {
            cmd.args([flag, v.as_str()]);
        }
    }
    if let Some(s) = &a.shard {
        cmd.args(["--shard", s]);
    }
    eprintln!("running {} ...", t.name);
    let mut child = cmd
        .stdout(Stdio::inherit())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start {}", runner.display()))?;
    // Progress lines pass through as they come; the last few are kept for a crash report.
    let stderr = child.stderr.take().expect("piped");
    let tail = std::thread::spawn(move || {
        let mut last: Vec<String> = Vec::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("  {line}");
            last.push(line);
            if last.len() > 20 {
                last.remove(0);
            }
        }
        last
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break Some(s);
        }
        if start.elapsed() > Duration::from_secs(a.timeout) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let last = tail.join().unwrap_or_default();
    let failed = |reason: String| qsa::runner::not_run(m, t, TargetStatus::Failed, reason);
    Ok(match status {
        None => failed(format!(
            "the runner exceeded --timeout {} s and was killed (a hung kernel?); last output: {}",
            a.timeout,
            last.join(" | ")
        )),
        Some(s) if s.success() || s.code() == Some(3) => match TargetResults::read(&results_path) {
            Ok(r) => r,
            Err(e) => failed(format!(
                "the runner exited but its results are unreadable: {e:#}"
            )),
        },
        Some(s) => failed(format!(
            "the runner crashed ({s}); last output: {}",
            last.join(" | ")
        )),
    })
}

fn snapshot_note(
    golden: &mut Golden,
    target: &str,
    name: &str,
    content: &str,
    notes: &mut Vec<GateNote>,
    repro: String,
) -> Result<()> {
    match golden.check(target, name, content)? {
        SnapState::Same | SnapState::Blessed => {}
        SnapState::New => notes.push(GateNote {
            kind: "snapshot".into(),
            name: name.into(),
            failed: true,
            message: format!("new snapshot golden/{target}/{name}.snap.new: review it (cargo insta review) or accept with --bless"),
            diff: content.lines().map(|l| format!("+{l}\n")).collect(),
            repro,
        }),
        SnapState::Changed(diff) => notes.push(GateNote {
            kind: "snapshot".into(),
            name: name.into(),
            failed: true,
            message: format!("differs from golden/{target}/{name}.snap (pending: .snap.new): review it (cargo insta review) or accept with --bless"),
            diff,
            repro,
        }),
    }
    Ok(())
}

/// One snapshot per (suite, case): a line per (distribution, variant, check).
fn record_snapshots(
    golden: &mut Golden,
    m: &Matrix,
    t: &Target,
    r: &TargetResults,
    notes: &mut Vec<GateNote>,
) -> Result<()> {
    let mut by: BTreeMap<(Suite, &str), Vec<&Record>> = BTreeMap::new();
    for rec in r.records.iter().filter(|x| x.snapshot.is_some()) {
        // Cases added with --cases are ad hoc: gated, not snapshotted.
        if m.added_cases.contains(&rec.case) {
            continue;
        }
        by.entry((rec.suite, rec.case.as_str()))
            .or_default()
            .push(rec);
    }
    for ((suite, case), recs) in by {
        let text: String = recs
            .iter()
            .map(|x| {
                format!(
                    "{} {} {}: {}\n",
                    x.dist,
                    x.variant,
                    x.check,
                    x.snapshot.as_deref().unwrap_or("")
                )
            })
            .collect();
        let repro = format!(
            "cargo xtask matrix --target {} --case {case} --suite {}",
            t.name,
            suite.name()
        );
        snapshot_note(
            golden,
            &t.name,
            &format!("{}__{case}", suite.name()),
            &text,
            notes,
            repro,
        )?;
    }
    Ok(())
}

/// Every kernel that ran must be the one the dispatch table predicts.
fn check_dispatch(m: &Matrix, t: &Target, r: &TargetResults, notes: &mut Vec<GateNote>) {
    for rec in &r.records {
        let (Some(ran), Some(case)) =
            (&rec.dispatched, m.cases.iter().find(|c| c.name == rec.case))
        else {
            continue;
        };
        if let Ok(want) = qsa::plan::predicted_kernel(m, t, case, &rec.variant, rec.check == "bwd")
        {
            if &want != ran {
                notes.push(note("dispatch", &format!("{}/{}", rec.case, rec.variant), true, format!("ran `{ran}`, but the dispatch table says `{want}`: src/dispatch and the backend disagree"), &rec.repro));
            }
        }
    }
}

/// Resource snapshot and gates of one built target.
fn resource_gates(
    golden: &mut Golden,
    t: &Target,
    new: &ResourceReport,
    build_failed: bool,
    notes: &mut Vec<GateNote>,
) -> Result<()> {
    if build_failed {
        notes.push(note(
            "build",
            &t.name,
            true,
            "a kernel failed to compile (warnings are errors): see the build output".into(),
            &format!("cargo xtask build --target {}", t.name),
        ));
    }
    let path = golden.dir(&t.name).join("resources.snap");
    let old = if path.exists() {
        let snap = insta::Snapshot::from_file(&path)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        let text = snap.as_text().map(|x| x.to_string()).unwrap_or_default();
        Some(
            ResourceReport::from_text(&text)
                .with_context(|| format!("{}: unreadable resource snapshot", path.display()))?,
        )
    } else {
        None
    };
    for v in gate_resources(old.as_ref(), new, t) {
        notes.push(note(
            "resources",
            &t.name,
            true,
            v.message,
            &format!("cargo xtask build --target {}", t.name),
        ));
    }
    snapshot_note(
        golden,
        &t.name,
        "resources",
        &new.to_text(),
        notes,
        format!("cargo xtask build --target {}", t.name),
    )
}

/// This run's medians as the target's benchmark baseline (`bench.yaml`, with --bless) or a
/// proposal for one (`bench.yaml.new`).
fn write_bench(golden_root: &Path, t: &Target, r: &TargetResults, file: &str) -> Result<()> {
    let driver = if r.device.driver.is_empty() {
        String::new()
    } else {
        format!(" ({})", r.device.driver)
    };
    let mut g = BenchGolden {
        measured_on: format!("{}{driver}, runner started {}", r.device.name, r.started),
        entries: BTreeMap::new(),
    };
    for rec in r
        .records
        .iter()
        .filter(|x| x.suite == Suite::Bench && x.status == Status::Pass)
    {
        let get = |k: &str| rec.metrics.get(k).copied().unwrap_or(0.0);
        g.entries.insert(
            bench_key(&rec.case, &rec.variant, &rec.check),
            TimingStats {
                median: get("median_us") * 1e-6,
                min: get("min_us") * 1e-6,
                max: get("max_us") * 1e-6,
                rel_noise: get("rel_noise"),
                reps: get("reps") as usize,
            },
        );
    }
    let text = format!(
        "# Golden benchmark medians for {} (seconds). Written by `cargo xtask matrix --bless`.\n{}",
        t.name,
        serde_yaml::to_string(&g)?
    );
    write_atomic(&golden_root.join(&t.name).join(file), text.as_bytes())
}
