//! `qsa`: the runner. Runs the suites of one target in its own process and writes the
//! results as YAML. It is what travels to a GPU machine that has no Rust toolchain;
//! `cargo xtask matrix` starts one per target, with a time limit.
//!
//! While it runs, each finished unit (a suite on one input) is streamed to a journal next to
//! the results (`results.journal.yaml`, see `qsa::journal`): a crash or a kill keeps every
//! finished check, and `--resume` carries on after them, skipping the check that crashed.
//! A panic in a check becomes that check's `crashed` record and the run goes on.
//!
//! Exit codes: 0 every check passed (results written); 1 a check failed, errored or crashed
//! (results written: the failures are inside them); 2 bad usage or configuration, or the
//! results could not be written; 3 the target's device is absent (results written with
//! status built-not-run / skipped). Killed by a signal, it exits as the signal says; the
//! journal keeps what finished.

use clap::{Parser, Subcommand};
use qsa::dump::Dumper;
use qsa::matrix::Matrix;
use qsa::results::{TargetResults, TargetStatus};
use qsa::runner::{self, RunSpec};
use qsa::suites::bench::BenchGolden;
use qsa::suites::{Filter, Selection};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "qsa",
    version,
    about = "Run qsa's parity, error and bench suites for one target"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the suites of one target and write results.yaml.
    Run(Box<RunArgs>),
    /// Print the launch sequence of one call (kernel, grid, block, shared bytes, arguments,
    /// buffers) from the code the runner launches with: what bench/*.py launch with cupy.
    Plan(Box<qsa::plan::request::PlanArgs>),
    /// Print the device the backend of each target would use here (or why there is none).
    Devices {
        #[arg(long, default_value = "matrix.yaml")]
        matrix: PathBuf,
        #[arg(long, default_value = "build/kernels")]
        code_objects: PathBuf,
    },
}

#[derive(clap::Args)]
struct RunArgs {
    /// The matrix file.
    #[arg(long, default_value = "matrix.yaml")]
    matrix: PathBuf,
    /// Extra cases (a YAML file with a `cases:` list); repeatable.
    #[arg(long = "cases")]
    cases_files: Vec<PathBuf>,
    /// Target name from the matrix (cpu, sm_90, gfx906, ...).
    #[arg(long)]
    target: String,
    /// Only these cases (repeatable).
    #[arg(long = "case")]
    case: Vec<String>,
    /// Only these suites: parity, error, bench (repeatable).
    #[arg(long = "suite")]
    suite: Vec<String>,
    /// Only these variants (repeatable).
    #[arg(long = "variant")]
    variant: Vec<String>,
    /// Only these distributions (repeatable).
    #[arg(long = "dist")]
    dist: Vec<String>,
    /// Run shard i of n (1-based), e.g. 2/4.
    #[arg(long)]
    shard: Option<String>,
    /// Folder of code objects: <dir>/<target>/<kernel>.cubin|.co
    #[arg(long, default_value = "build/kernels")]
    code_objects: PathBuf,
    /// Golden benchmark medians to compare with (golden/<target>/bench.yaml).
    #[arg(long)]
    bench_golden: Option<PathBuf>,
    /// Where to write the results (atomically).
    #[arg(long)]
    out: PathBuf,
    /// The journal each finished unit is streamed to (default: next to --out,
    /// <stem>.journal.yaml).
    #[arg(long, value_name = "FILE")]
    journal: Option<PathBuf>,
    /// Keep the journal of an earlier run of this target and run only what it has not begun
    /// (the check in flight when that run died is reported as crashed, not rerun).
    #[arg(long)]
    resume: bool,
    /// Write the inputs, outputs and references of failing checks as .npy files into DIR
    /// (one folder per check, DIR/index.yaml says which file is which).
    #[arg(long, value_name = "DIR")]
    dump: Option<PathBuf>,
    /// With --dump: dump every check, not only failing ones.
    #[arg(long, requires = "dump")]
    dump_all: bool,
    /// Suppress the progress lines on stderr.
    #[arg(long)]
    quiet: bool,
    /// Run a GPU target without its device: the kernel sources on the CPU through the SIMT
    /// emulator (status `emulated`; calls past src/emu/backend.rs's budgets, QSA_EMU_BUDGET=N
    /// to raise them, and kernels whose source does not build for the host are unsupported
    /// in emulation).
    #[arg(long, conflicts_with = "no_ptx")]
    emulate: bool,
    /// Do not run an older NVIDIA target's PTX on a newer card (report `built, not run`).
    /// Where a GPU target runs, in order of preference: its own card (`run`); a newer
    /// NVIDIA card through the target's PTX, compiled by the driver, with the target's
    /// dispatch, caps and shared limit (`run (PTX on sm_90)`, bench skipped); the SIMT
    /// emulator (`--emulate`, or `cargo xtask matrix` by default: `emulated`); else
    /// `built, not run` with the reason.
    #[arg(long)]
    no_ptx: bool,
    /// Run the parity and error suites under NVIDIA's `compute-sanitizer --tool TOOL`
    /// (memcheck, racecheck, synccheck, initcheck): every error or hazard it reports becomes
    /// a failed check naming the tool, kernel and case. NVIDIA targets with their card only.
    #[arg(long, value_name = "TOOL", conflicts_with = "emulate")]
    sanitize: Option<String>,
}

fn main() -> ExitCode {
    qsa::crash::install_panic_hook();
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Run(a) => run(*a),
        Cmd::Plan(a) => plan(&a),
        Cmd::Devices {
            matrix,
            code_objects,
        } => devices(&matrix, &code_objects),
    }
}

/// `qsa plan`: exit 0 with the plan on stdout, 2 with the reason on stderr.
fn plan(a: &qsa::plan::request::PlanArgs) -> ExitCode {
    use qsa::plan::request;
    let planned = request::resolve(a).and_then(|r| {
        let p = request::launch_plan(&r)?;
        Ok((r, p))
    });
    match planned {
        Ok((r, p)) if a.json => {
            write_stdout(&format!("{}\n", request::to_json(&r, &p))).unwrap_or(ExitCode::SUCCESS)
        }
        Ok((r, p)) => write_stdout(&request::to_text(&r, &p)).unwrap_or(ExitCode::SUCCESS),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

fn load_matrix(path: &std::path::Path, extra: &[PathBuf]) -> Result<Matrix, String> {
    let mut m = Matrix::load(path).map_err(|e| e.to_string())?;
    for f in extra {
        m.add_cases_file(f).map_err(|e| e.to_string())?;
    }
    Ok(m)
}

fn devices(matrix: &std::path::Path, code_objects: &std::path::Path) -> ExitCode {
    let m = match load_matrix(matrix, &[]) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    for t in &m.targets {
        let line = match runner::open_backend(t, &code_objects.join(&t.name)) {
            Ok(b) => match b.ptx_run() {
                Some(p) => format!("{:8} {}: {}", t.name, b.device().name, p.label()),
                None => format!("{:8} {}", t.name, b.device().name),
            },
            Err(e) => format!("{:8} none: {}", t.name, e.0),
        };
        // One line per target as it is probed (opening a device can take seconds).
        if let Some(code) = write_stdout(&format!("{line}\n")) {
            return code;
        }
    }
    ExitCode::SUCCESS
}

/// Write to stdout. A reader that went away (`qsa devices | head -1`) ends the command
/// quietly with success, as it does for other Unix tools; any other write error is reported
/// (exit 2). `None`: written.
fn write_stdout(text: &str) -> Option<ExitCode> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => None,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Some(ExitCode::SUCCESS),
        Err(e) => {
            eprintln!("error: cannot write to stdout: {e}");
            Some(ExitCode::from(2))
        }
    }
}

fn run(a: RunArgs) -> ExitCode {
    // Under `--sanitize`, this is the child: stop when the runner that started it is gone.
    qsa::sanitize::exec::watch_parent_from_env();
    let m = match load_matrix(&a.matrix, &a.cases_files) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let Some(target) = m.target(&a.target) else {
        eprintln!(
            "error: unknown target `{}`; {} declares: {}",
            qsa::echo::value(&a.target),
            a.matrix.display(),
            m.target_names().join(", ")
        );
        return ExitCode::from(2);
    };
    let golden = match &a.bench_golden {
        Some(p) if p.exists() => match std::fs::read_to_string(p)
            .map_err(|e| e.to_string())
            .and_then(|t| serde_yaml::from_str::<BenchGolden>(&t).map_err(|e| e.to_string()))
        {
            Ok(g) => g,
            Err(e) => {
                eprintln!("error: {}: {e}", p.display());
                return ExitCode::from(2);
            }
        },
        _ => BenchGolden::default(),
    };
    let selection = Selection {
        cases: a.case,
        suites: a.suite.clone(),
        variants: a.variant,
        dists: a.dist,
        shard: a.shard,
    };
    let filter = match Filter::new(&m, &selection).and_then(|f| {
        f.check_selects(&m, &[target])?;
        Ok(f)
    }) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let repro_extra: String = a
        .cases_files
        .iter()
        .map(|f| format!(" --cases {}", f.display()))
        .collect();
    let dumper = match a
        .dump
        .as_deref()
        .map(|d| Dumper::new(d, a.dump_all))
        .transpose()
    {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::from(2);
        }
    };
    let code_objects = a.code_objects.join(&target.name);
    if let Some(tool) = &a.sanitize {
        return ExitCode::from(qsa::sanitize::session::run(
            &qsa::sanitize::session::Request {
                tool,
                matrix: &m,
                target,
                code_objects: &code_objects,
                out: &a.out,
                suites: &a.suite,
                resume: a.resume,
                quiet: a.quiet,
                argv: std::env::args_os().skip(1).collect(),
            },
        ));
    }
    let journal = a
        .journal
        .clone()
        .unwrap_or_else(|| qsa::journal::path_for(&a.out));
    let opened = if a.emulate {
        runner::open_emulated(target)
    } else {
        runner::open_backend_with(target, &code_objects, !a.no_ptx)
    };
    let results = match opened {
        Ok(backend) => {
            let spec = RunSpec {
                matrix: &m,
                target,
                filter: &filter,
                bench_golden: &golden,
                repro_extra,
                dump: dumper.as_ref(),
                journal: &journal,
                resume: a.resume,
            };
            let quiet = a.quiet;
            let run = runner::run_target(&spec, backend.as_ref(), &mut |line| {
                if !quiet {
                    eprintln!("{line}");
                }
            });
            match run {
                Ok(r) if a.emulate => TargetResults {
                    status: TargetStatus::Emulated,
                    ..r
                },
                Ok(r) => r,
                Err(e) => {
                    eprintln!("error: {e:#}");
                    return ExitCode::from(2);
                }
            }
        }
        Err(no) => {
            let status = if code_objects.is_dir() {
                TargetStatus::BuiltNotRun
            } else {
                TargetStatus::Skipped
            };
            let r = runner::not_run(&m, target, status, no.0);
            if let Err(e) = r.write(&a.out) {
                eprintln!("error: {e:#}");
                return ExitCode::from(2);
            }
            eprintln!("{}: {}: {}", target.name, status.label(), r.reason);
            return ExitCode::from(3);
        }
    };
    if let Err(e) = results.write(&a.out) {
        eprintln!("error: {e:#}");
        return ExitCode::from(2);
    }
    let failed = results.failures();
    if failed > 0 {
        eprintln!(
            "{}: {failed} of {} checks failed (see {})",
            target.name,
            results.records.len(),
            a.out.display()
        );
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
