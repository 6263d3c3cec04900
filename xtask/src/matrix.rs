//! `cargo xtask matrix`: build what this host can build, run each target's suites in its
//! own runner process with a time limit, compare with golden/, gate, and report.

use crate::build;
use crate::build::toolchain;
use crate::golden::{Golden, Scope};
use crate::report::{self, TargetReport};
use crate::repro::Repro;
use crate::snapshots;
use anyhow::Result;
use qsa::matrix::{Matrix, Suite, Target};
use qsa::results::{write_atomic, Status, TargetResults, TargetStatus};
use std::collections::BTreeMap;
use std::path::PathBuf;

mod gates;
pub(crate) mod runner;

use gates::{check_dispatch, note, resource_gates};
use runner::{build_runner, run_runner};

/// `cargo xtask matrix` options.
#[derive(clap::Args, Debug, Clone)]
#[command(
    after_help = "Exit codes: 0 every gate holds; 1 a gate failed; 2 bad usage or configuration.\n\
Where a GPU target runs, in order of preference: its own card (`run`); a newer NVIDIA card\n\
through the target's PTX, with the target's dispatch, caps and shared limit\n\
(`run (PTX on sm_90)`, bench skipped); the SIMT emulator (`emulated`); `built, not run`.\n\
Examples:\n  cargo xtask matrix                       every target this host can build and run\n  \
cargo xtask matrix --target cpu --case topk_edges_small --suite parity\n  \
cargo xtask matrix --target gfx906 --case topk_edges_small --suite parity --emulate\n  \
cargo xtask matrix --cases my_cases.yaml --target cpu   add cases (e.g. .npy captured from a model)\n  \
cargo xtask matrix --bless                accept the new snapshots and benchmark medians\n  \
cargo xtask matrix --bless --reason \"...\"  accept them when an error rose by a decade or more"
)]
pub struct MatrixArgs {
    /// The matrix file.
    #[arg(long, default_value = "matrix.yaml")]
    pub matrix: PathBuf,
    /// Extra cases from another file (repeatable); not snapshotted (ad hoc), still gated.
    /// Alone it runs only that file's cases; name matrix.yaml's cases with --case to add them.
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
    /// Accept: write new snapshots and benchmark medians to golden/, remove stale ones. A
    /// filtered run (--case, --dist, ...) updates only the snapshot lines it ran.
    #[arg(long)]
    pub bless: bool,
    /// Why an error that rose by a decade or more is expected (with --bless; recorded in the
    /// snapshot's header). Without it, --bless refuses such a snapshot.
    #[arg(long, requires = "bless", value_name = "WHY")]
    pub reason: Option<String>,
    /// A GPU target whose toolchain is missing fails the run instead of being skipped (CI).
    #[arg(long)]
    pub require_toolchains: bool,
    /// Seconds one target's runner may take (restarts after crashes included) before it is
    /// killed and the target marked failed (its finished checks are kept).
    #[arg(long, default_value_t = 1800)]
    pub timeout: u64,
    /// Write the inputs, outputs and references of failing checks as .npy files into
    /// DIR/<target>/ (`qsa run --dump`; DIR/<target>/index.yaml says which file is which).
    #[arg(long, value_name = "DIR")]
    pub dump: Option<PathBuf>,
    /// With --dump: dump every check, not only failing ones.
    #[arg(long, requires = "dump")]
    pub dump_all: bool,
    /// Where results, JUnit and the summary go.
    #[arg(long, default_value = "target/qsa")]
    pub out: PathBuf,
    /// Compare results already made elsewhere (<DIR>/<target>/results.yaml, e.g. from a GPU
    /// machine without Rust) instead of running.
    #[arg(long, value_name = "DIR")]
    pub from_results: Option<PathBuf>,
    #[command(flatten)]
    pub emulate: crate::emulated::EmulateArgs,
    /// Run the parity and error suites of the selected NVIDIA targets (--target, card here)
    /// under these compute-sanitizer tools (comma-separated: memcheck, racecheck, synccheck,
    /// initcheck); every error or hazard is a failed check naming tool, kernel and case.
    #[arg(long, value_delimiter = ',', value_name = "TOOLS")]
    pub sanitize: Vec<String>,
}

pub fn run(a: MatrixArgs) -> Result<u8> {
    let root = toolchain::project_root();
    let matrix_path = if a.matrix.is_absolute() {
        a.matrix.clone()
    } else {
        root.join(&a.matrix)
    };
    let mut a = a;
    a.cases = a
        .cases
        .iter()
        .map(|c| crate::repro::resolve(&root, c))
        .collect();
    let repro = Repro::new(&root, &matrix_path, &a.cases);
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
    a.case = case_selection(&m, &a.cases, std::mem::take(&mut a.case));
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
    if !a.sanitize.is_empty() {
        let out = root.join(&a.out);
        return crate::sanitize::run(&a, &m, &targets, &out, &repro);
    }
    let full = a.case.is_empty()
        && a.suite.is_empty()
        && a.variant.is_empty()
        && a.dist.is_empty()
        && a.shard.is_none();
    let scope = if full { Scope::Full } else { Scope::Partial };
    let golden_root = root.join("golden");
    let mut golden = Golden::new(&golden_root, a.bless, a.reason.clone());
    let out = if a.out.is_absolute() {
        a.out.clone()
    } else {
        root.join(&a.out)
    };
    // One run at a time writes `out` (held until this function returns).
    let _lock = match crate::lock::acquire(&out) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(2);
        }
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
        let mut results: TargetResults = if let Some((_, why)) =
            missing.iter().find(|(x, _)| x.name == t.name)
        {
            if a.require_toolchains {
                notes.push(note(
                    "toolchain",
                    "missing",
                    true,
                    why.clone(),
                    "cargo xtask setup",
                ));
            }
            let skipped =
                qsa::runner::not_run(&m, t, TargetStatus::Skipped, format!("not built: {why}"));
            crate::emulated::instead(&a, &m, t, skipped, |ea| {
                let runner = runner.as_deref().expect("built above");
                run_runner(runner, ea, &m, t, &out, &golden_root, true)
            })?
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
                // The selection runs nothing on this target: say so instead of starting a runner.
                qsa::runner::not_run(&m, t, TargetStatus::Skipped, why)
            } else if builds.get(&t.name).is_some_and(|b| b.failed()) {
                qsa::runner::not_run(
                    &m,
                    t,
                    TargetStatus::Failed,
                    "kernel build failed (see above)".into(),
                )
            } else {
                // A GPU target without its device here runs emulated (emulated.rs).
                let runner = runner.as_deref().expect("built above");
                let emulate =
                    |ea: &MatrixArgs| run_runner(runner, ea, &m, t, &out, &golden_root, true);
                if crate::emulated::forced(&a, t) {
                    let forced = qsa::runner::not_run(&m, t, TargetStatus::Skipped, String::new());
                    crate::emulated::instead(&a, &m, t, forced, emulate)?
                } else {
                    let r = run_runner(runner, &a, &m, t, &out, &golden_root, false)?;
                    crate::emulated::instead(&a, &m, t, r, emulate)?
                }
            }
        };
        // Every repro line complete (--matrix, --cases), whoever wrote the results.
        for rec in &mut results.records {
            rec.repro = repro.check(&t.name, rec);
        }
        crate::emulated::mark_repro(&mut results);
        // Dispatch: the table of every target (pure, always whole), and what ran against it.
        if a.cases.is_empty() {
            let table = qsa::plan::dispatch_table(&m, t);
            snapshots::check(
                &mut golden,
                &t.name,
                "dispatch",
                &table,
                Scope::Full,
                repro.target(&t.name),
                &mut notes,
            )?;
        }
        check_dispatch(&m, t, &results, &mut notes);
        if results.status == TargetStatus::Run {
            snapshots::records(&mut golden, &m, t, &results, scope, &repro, &mut notes)?;
            // Benchmark medians: accepted with --bless, otherwise proposed as bench.yaml.new
            // (CI uploads it with the pending snapshots; `cargo xtask bless --from` takes it).
            let benched = results
                .records
                .iter()
                .any(|r| r.suite == Suite::Bench && r.status == Status::Pass);
            if t.bench_gate && benched {
                snapshots::bench(&golden_root, t, &results, a.bless, full)?;
            }
            if a.cases.is_empty() {
                snapshots::strays(&golden, &m, t, full, a.bless, &mut notes)?;
            }
        } else if results.status == TargetStatus::Emulated {
            crate::emulated::snapshots(&mut golden, &m, t, &results, scope, &repro, &mut notes)?;
        } else if results.status == TargetStatus::RunPtx {
            crate::ptx::snapshots(&mut golden, &m, t, &results, scope, &repro, &mut notes)?;
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
    let pending: Vec<_> = golden.failures().filter(|o| o.pending_written).collect();
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

/// The `--case` selection: as given, or with `--cases FILE` and no `--case`, the file's own
/// cases (a user trying captured inputs should not wait for the whole matrix first).
fn case_selection(m: &Matrix, cases_files: &[PathBuf], given: Vec<String>) -> Vec<String> {
    if cases_files.is_empty() || !given.is_empty() {
        return given;
    }
    m.cases
        .iter()
        .filter(|c| m.added_cases.contains(&c.name))
        .map(|c| c.name.clone())
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn cases_files_alone_select_their_own_cases() {
        let root = crate::root::find(Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap();
        let mut m = Matrix::load(&root.join("matrix.yaml")).unwrap();
        let file = root.join("examples/cases/nasty.yaml");
        m.add_cases_file(&file).unwrap();
        let files = vec![file];
        let picked = case_selection(&m, &files, Vec::new());
        assert!(!picked.is_empty());
        assert!(
            picked.iter().all(|c| m.added_cases.contains(c)),
            "--cases FILE ran matrix.yaml's cases too: {picked:?}"
        );
        // --case still wins, and without --cases nothing is chosen for the user.
        let given = vec!["topk_edges_small".to_string()];
        assert_eq!(case_selection(&m, &files, given.clone()), given);
        assert!(case_selection(&m, &[], Vec::new()).is_empty());
    }
}
