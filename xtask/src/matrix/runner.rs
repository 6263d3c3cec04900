//! The runner process of `cargo xtask matrix` (and `matrix --sanitize`): build the release
//! `qsa` binary, then run one target's suites in it with the selection flags and a time limit
//! (restarted after a crash: `runner_stream`).

use super::MatrixArgs;
use crate::build::toolchain;
use anyhow::{Context, Result};
use qsa::matrix::{Matrix, Target};
use qsa::results::TargetResults;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

pub(crate) fn build_runner(root: &Path) -> Result<PathBuf> {
    // Not --quiet: the first build compiles every dependency in release mode (minutes), and
    // cargo's own lines show it; on a terminal cargo adds its progress bar, in CI plain lines.
    eprintln!("building the runner: cargo build --release -p qsa --bin qsa (minutes the first time, seconds after)");
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--release", "-p", "qsa", "--bin", "qsa"])
        .current_dir(root)
        .status()
        .context("cannot start cargo to build the runner")?;
    anyhow::ensure!(status.success(), "building the runner failed ({status})");
    // Where that cargo put it: CARGO_TARGET_DIR (relative paths from the workspace root, the
    // build's working folder) when set, as a build in its own target folder sets it (the
    // MSRV toolchain's test run, the mutants harness).
    let target_dir =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), |d| root.join(d));
    Ok(target_dir.join("release/qsa"))
}

/// Run one target's runner with a time limit (restarted after a crash: `runner_stream`).
pub(super) fn run_runner(
    runner: &Path,
    a: &MatrixArgs,
    m: &Matrix,
    t: &Target,
    out: &Path,
    golden_root: &Path,
    emulate: bool,
) -> Result<TargetResults> {
    let extra: Vec<OsString> = if emulate {
        vec!["--emulate".into()]
    } else {
        Vec::new()
    };
    run_runner_with(runner, a, m, t, out, golden_root, &extra)
}

/// `run_runner` with extra runner flags (`--emulate`, `--sanitize T`).
pub(crate) fn run_runner_with(
    runner: &Path,
    a: &MatrixArgs,
    m: &Matrix,
    t: &Target,
    out: &Path,
    golden_root: &Path,
    extra: &[OsString],
) -> Result<TargetResults> {
    let mut args: Vec<OsString> = vec!["run".into(), "--target".into(), t.name.clone().into()];
    args.extend(extra.iter().cloned());
    let emulate = extra.iter().any(|x| x == "--emulate");
    let sanitize = extra.iter().any(|x| x == "--sanitize");
    args.extend(["--matrix".into(), m.path.clone().into_os_string()]);
    args.push("--code-objects".into());
    args.push(toolchain::project_root().join("build/kernels").into());
    if t.bench_gate && !emulate && !sanitize {
        args.push("--bench-golden".into());
        args.push(golden_root.join(&t.name).join("bench.yaml").into());
    }
    for f in &a.cases {
        args.extend(["--cases".into(), f.clone().into_os_string()]);
    }
    for (flag, vals) in [
        ("--case", &a.case),
        ("--suite", &a.suite),
        ("--variant", &a.variant),
        ("--dist", &a.dist),
    ] {
        for v in vals {
            args.extend([flag.into(), v.into()]);
        }
    }
    if let Some(s) = &a.shard {
        args.extend(["--shard".into(), s.into()]);
    }
    if let Some(d) = &a.dump {
        args.extend(["--dump".into(), d.join(&t.name).into_os_string()]);
        if a.dump_all {
            args.push("--dump-all".into());
        }
    }
    crate::runner_stream::run(&crate::runner_stream::RunnerJob {
        runner,
        args,
        results: out.join(&t.name).join("results.yaml"),
        timeout: Duration::from_secs(a.timeout),
        matrix: m,
        target: t,
    })
}
