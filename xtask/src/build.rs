//! `cargo xtask build`: every kernel source for every GPU target of matrix.yaml into
//! `build/kernels/<target>/`, incremental and in parallel, plus each target's resource
//! report (`resources.yaml`, and `resources.txt`: the text the golden snapshot holds).
//!
//! Outputs per target and source `kernels/<stem>.cu`:
//! - NVIDIA: `<stem>.cubin` (SASS for the target), `<stem>.fatbin` (SASS + PTX, so it also
//!   loads on newer GPUs), `<stem>.ptxas.log` (ptxas' resource usage, for spills);
//! - AMD: `<stem>.co` (the code object for the target's gfx arch);
//! - both: `<stem>.stamp` (digest of the inputs: nothing rebuilds while it matches).
//!
//! Warnings are errors on both vendors. A source that does not exist yet is reported as
//! missing; a missing toolchain is an error naming `cargo xtask setup`.

#[path = "occupancy.rs"]
pub mod occupancy;
#[path = "resource_gates.rs"]
pub mod resource_gates;
#[path = "resources.rs"]
pub mod resources;
#[path = "toolchain.rs"]
pub mod toolchain;

mod annotations;
#[cfg(test)]
mod bench_kernel_tests;
mod compile;
mod stamp;
#[cfg(test)]
mod trace_build_tests;

pub use compile::{SourceBuild, SourceStatus};

use anyhow::{bail, Context, Result};
use qsa::gpu::Family;
use qsa::matrix::{Matrix, Target};
use resources::Report;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;
use toolchain::ToolchainInfo;

/// `cargo xtask build` options.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct BuildArgs {
    /// Build only this GPU target (repeatable); default: every GPU target of the matrix.
    #[arg(long = "target", value_name = "T")]
    pub targets: Vec<String>,
    /// The matrix file (default: matrix.yaml at the workspace root).
    #[arg(long, value_name = "FILE")]
    pub matrix: Option<PathBuf>,
    /// Parallel compiles (default: the number of CPUs).
    #[arg(long, short = 'j')]
    pub jobs: Option<usize>,
}

/// Everything one target's build produced.
#[derive(Clone, Debug)]
pub struct TargetBuild {
    pub target: String,
    pub toolchain: ToolchainInfo,
    /// `build/kernels/<target>` (absolute).
    pub dir: PathBuf,
    pub sources: Vec<SourceBuild>,
    /// Resources of every kernel that was built (sources that failed contribute none).
    pub report: Report,
    pub report_yaml: PathBuf,
    pub report_text: PathBuf,
}

impl TargetBuild {
    pub fn failed(&self) -> bool {
        self.sources
            .iter()
            .any(|s| matches!(s.status, SourceStatus::Failed(_)))
    }
}

/// The result of a build: one entry per target, in matrix order.
#[derive(Clone, Debug)]
pub struct BuildSummary {
    pub targets: Vec<TargetBuild>,
    pub seconds: f64,
}

impl BuildSummary {
    pub fn failed(&self) -> bool {
        self.targets.iter().any(TargetBuild::failed)
    }
}

/// The kernel sources: one per family (`Family::stem`) plus the probe kernel.
pub fn kernel_stems() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = Family::ALL.iter().map(|f| f.stem()).collect();
    v.push("probe");
    v
}

/// The GPU targets named by `names` (all GPU targets when empty); an unknown or non-GPU name
/// is an error listing the valid ones.
pub fn select_targets<'m>(matrix: &'m Matrix, names: &[String]) -> Result<Vec<&'m Target>> {
    let gpu: Vec<&Target> = matrix.targets.iter().filter(|t| t.is_gpu()).collect();
    if names.is_empty() {
        return Ok(gpu);
    }
    let valid = gpu
        .iter()
        .map(|t| t.name.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let mut out: Vec<&Target> = Vec::new();
    for n in names {
        match gpu.iter().find(|t| &t.name == n) {
            Some(t) if !out.iter().any(|o| o.name == t.name) => out.push(t),
            Some(_) => {}
            None => bail!(
                "unknown GPU target `{n}` in {}; valid: {valid}",
                matrix.path.display()
            ),
        }
    }
    Ok(out)
}

/// Build `targets` (GPU targets of one matrix) with up to `jobs` compiles at once. Errors
/// only for a missing toolchain or an I/O failure; compile failures are in the summary.
pub fn build_targets(targets: &[&Target], jobs: usize) -> Result<BuildSummary> {
    let start = Instant::now();
    let root = toolchain::project_root();
    let _lock = BuildLock::acquire(&root.join("build").join("kernels"))?;
    let mut toolchains = Vec::new();
    for t in targets {
        let tc = toolchain::toolchain_status(t)
            .map_err(|m| anyhow::anyhow!("cannot build target {}: {m}", t.name))?;
        toolchains.push(tc);
    }
    let stems = kernel_stems();
    // Jobs are (target, source) pairs drawn from one queue by `jobs` workers: parallel
    // across targets and sources without oversubscribing a 2-core CI machine.
    let work: Vec<(usize, &str)> = (0..targets.len())
        .flat_map(|t| stems.iter().map(move |s| (t, *s)))
        .collect();
    let results: Mutex<Vec<Option<SourceBuild>>> = Mutex::new(vec![None; work.len()]);
    let next = AtomicUsize::new(0);
    let finished = AtomicUsize::new(0);
    let workers = jobs.clamp(1, work.len().max(1));
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&(t, stem)) = work.get(i) else { break };
                let r = compile::build_source(&root, targets[t], &toolchains[t], stem);
                let n = finished.fetch_add(1, Ordering::Relaxed) + 1;
                progress_line(n, work.len(), &targets[t].name, &r);
                results
                    .lock()
                    .expect("no worker panics while holding the lock")[i] = Some(r);
            });
        }
    });
    let mut results = results.into_inner().expect("workers are done");

    let mut out = Vec::new();
    for (ti, (target, tc)) in targets.iter().zip(toolchains).enumerate() {
        let sources: Vec<SourceBuild> = work
            .iter()
            .enumerate()
            .filter(|(_, (t, _))| *t == ti)
            .map(|(i, _)| results[i].take().expect("every job ran"))
            .collect();
        let mut kernels: Vec<_> = sources
            .iter()
            .flat_map(|s| s.kernels.iter().cloned())
            .collect();
        kernels.sort_by(|a, b| (&a.source, &a.kernel).cmp(&(&b.source, &b.kernel)));
        let report = Report {
            target: target.name.clone(),
            vendor: if target.vendor == qsa::dispatch::Vendor::Amd {
                "amd"
            } else {
                "nvidia"
            }
            .into(),
            wave: target.wave.unwrap_or(32),
            compiler: tc.version.clone(),
            kernels,
        };
        let dir = root.join("build").join("kernels").join(&target.name);
        std::fs::create_dir_all(&dir)?;
        let report_yaml = dir.join("resources.yaml");
        let report_text = dir.join("resources.txt");
        write_if_changed(&report_yaml, &serde_yaml::to_string(&report)?)?;
        write_if_changed(&report_text, &report.to_text())?;
        out.push(TargetBuild {
            target: target.name.clone(),
            toolchain: tc,
            dir,
            sources,
            report,
            report_yaml,
            report_text,
        });
    }
    Ok(BuildSummary {
        targets: out,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// A line on stderr as each compile finishes (a full build of every target takes minutes on
/// 2 cores: 81 s for 24 sources, 2026-12-01): plain lines, no carriage returns, so CI logs
/// stay readable. Up-to-date sources print nothing; the summary lists them.
fn progress_line(done: usize, total: usize, target: &str, r: &SourceBuild) {
    let what = match &r.status {
        SourceStatus::Built(secs) => format!("built in {secs:.1}s"),
        SourceStatus::Failed(_) => "FAILED (output below)".into(),
        SourceStatus::UpToDate | SourceStatus::Missing => return,
    };
    eprintln!("  [{done}/{total}] {target} {}.cu {what}", r.stem);
}

/// One build at a time per checkout: a second `cargo xtask build` / `matrix` waits, instead
/// of deleting outputs the first one is reading. A lock left by a dead process is taken over.
struct BuildLock(PathBuf);

impl BuildLock {
    fn acquire(dir: &Path) -> Result<BuildLock> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(".lock");
        let mut told = false;
        loop {
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(mut f) => {
                    use std::io::Write as _;
                    write!(f, "{}", std::process::id())?;
                    return Ok(BuildLock(path));
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let holder = std::fs::read_to_string(&path).unwrap_or_default();
                    let pid = holder.trim();
                    let alive = !pid.is_empty() && Path::new("/proc").join(pid).exists();
                    if !alive {
                        // Dead holder (or a lock being written this instant: re-check once).
                        std::thread::sleep(std::time::Duration::from_millis(100));
                        if std::fs::read_to_string(&path).unwrap_or_default() == holder {
                            let _ = std::fs::remove_file(&path);
                        }
                        continue;
                    }
                    if !told {
                        eprintln!(
                            "waiting for another kernel build (pid {pid}, {})",
                            path.display()
                        );
                        told = true;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(200));
                }
                Err(e) => {
                    return Err(e).with_context(|| format!("cannot create {}", path.display()))
                }
            }
        }
    }
}

impl Drop for BuildLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Leave an unchanged file untouched (its mtime too), so watchers see only real changes.
fn write_if_changed(path: &Path, text: &str) -> Result<()> {
    if std::fs::read_to_string(path).is_ok_and(|s| s == text) {
        return Ok(());
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// One line per (target, source) and a closing line.
pub fn print_summary(summary: &BuildSummary) {
    for t in &summary.targets {
        println!("{} [{}]", t.target, t.toolchain.describe());
        for s in &t.sources {
            let what = match &s.status {
                SourceStatus::Built(secs) => format!("built in {secs:.1}s"),
                SourceStatus::UpToDate => "up to date".into(),
                SourceStatus::Missing => {
                    "missing (kernels/{stem}.cu does not exist yet)".replace("{stem}", &s.stem)
                }
                SourceStatus::Failed(_) => "FAILED".into(),
            };
            let n = s.kernels.len();
            let kernels = if n > 0 {
                format!(", {n} kernel{}", if n == 1 { "" } else { "s" })
            } else {
                String::new()
            };
            println!("  {:<22} {what}{kernels}", format!("{}.cu", s.stem));
        }
        let rel = |p: &Path| {
            p.strip_prefix(toolchain::project_root())
                .unwrap_or(p)
                .display()
                .to_string()
        };
        println!(
            "  outputs in {}; resources: {}, {}",
            rel(&t.dir),
            rel(&t.report_text),
            rel(&t.report_yaml)
        );
    }
    for t in &summary.targets {
        for s in &t.sources {
            if let SourceStatus::Failed(msg) = &s.status {
                eprintln!("\n{} {}.cu:\n{msg}", t.target, s.stem);
            }
        }
    }
    let built = summary
        .targets
        .iter()
        .flat_map(|t| &t.sources)
        .filter(|s| matches!(s.status, SourceStatus::Built(_)))
        .count();
    println!(
        "{} targets, {built} compiled, {} up to date, {:.1}s",
        summary.targets.len(),
        summary
            .targets
            .iter()
            .flat_map(|t| &t.sources)
            .filter(|s| s.status == SourceStatus::UpToDate)
            .count(),
        summary.seconds
    );
}

/// The golden resource snapshot of a target (`golden/<target>/resources.snap`), if any.
pub fn golden_report(target: &str) -> Result<Option<Report>> {
    let path = toolchain::project_root()
        .join("golden")
        .join(target)
        .join("resources.snap");
    match std::fs::read_to_string(&path) {
        Ok(text) => Report::from_text(&text)
            .map(Some)
            .with_context(|| format!("cannot read {}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// The resource gates of every built target against its golden snapshot (a target without
/// one is held to the golden-free rules: no spills, shared memory within limits, block size
/// declared and launchable).
pub fn gate_summary(matrix: &Matrix, summary: &BuildSummary) -> Result<Vec<resources::Violation>> {
    let mut out = Vec::new();
    for t in &summary.targets {
        let target = matrix
            .target(&t.target)
            .context("built target is in the matrix")?;
        let golden = golden_report(&t.target)?;
        out.extend(resources::gate_resources(
            golden.as_ref(),
            &t.report,
            target,
        ));
    }
    Ok(out)
}

/// `cargo xtask build`. Resource gate violations are printed, not fatal: `cargo xtask
/// matrix` is where they gate.
pub fn run(args: BuildArgs) -> Result<BuildSummary> {
    let root = toolchain::project_root();
    let path = args
        .matrix
        .clone()
        .unwrap_or_else(|| root.join("matrix.yaml"));
    let matrix = Matrix::load(&path)?;
    let targets = select_targets(&matrix, &args.targets)?;
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    let summary = build_targets(&targets, jobs)?;
    print_summary(&summary);
    // Missing block sizes are listed once per kernel, not once per target.
    let mut undeclared: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for v in gate_summary(&matrix, &summary)? {
        if v.kind == resources::ViolationKind::NoBlockSize {
            undeclared.entry(v.kernel).or_default().push(v.target);
        } else {
            println!("resource gate: {}", v.message);
        }
    }
    for (kernel, targets) in &undeclared {
        println!(
            "resource gate: {kernel} declares no launch block size (add `// qsa:block N` above it): {}",
            targets.join(" ")
        );
    }
    if summary.failed() {
        bail!("some kernels failed to build (above)");
    }
    Ok(summary)
}
