//! `cargo xtask matrix --sanitize memcheck,racecheck,...`: the parity and error suites of
//! each selected NVIDIA target under each compute-sanitizer tool (`qsa run --sanitize T`,
//! src/sanitize/), every error or hazard a failed check naming tool, kernel and case.
//!
//! Everything that cannot work is refused before any build (exit 2): an unknown tool,
//! `--suite bench` (timings under a sanitizer are the tool's), a non-NVIDIA target, a
//! target whose card is not here (nothing runs on a device to check), no compute-sanitizer.
//! Snapshots are not compared here (the plain matrix does that): a sanitized run reports
//! one row per (target, tool), `sm_90 memcheck`, in the terminal, JUnit and Markdown.

use crate::build::toolchain;
use crate::matrix::runner::{build_runner, run_runner_with};
use crate::matrix::MatrixArgs;
use crate::report::{self, TargetReport};
use crate::repro::Repro;
use anyhow::Result;
use qsa::matrix::{Matrix, Target};
use qsa::results::write_atomic;
use qsa::sanitize::{find_compute_sanitizer, refuse_target, Tool};
use std::ffi::OsString;
use std::path::Path;

/// Refusals first, then build, run each (target, tool), report. The exit code.
pub fn run(
    a: &MatrixArgs,
    m: &Matrix,
    targets: &[Target],
    out: &Path,
    repro: &Repro,
) -> Result<u8> {
    let root = toolchain::project_root();
    let tools = match check(a, targets, &root) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(2);
        }
    };
    let _lock = match crate::lock::acquire(out) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(2);
        }
    };
    let refs: Vec<&Target> = targets.iter().collect();
    let summary = crate::build::build_targets(
        &refs,
        std::thread::available_parallelism().map_or(2, |n| n.get()),
    )?;
    crate::build::print_summary(&summary);
    if summary.targets.iter().any(|t| t.failed()) {
        eprintln!("error: a kernel failed to compile (see above): nothing to sanitize");
        return Ok(1);
    }
    let runner = build_runner(&root)?;
    let golden_root = root.join("golden");
    let mut reports = Vec::new();
    for t in targets {
        for tool in &tools {
            let name = tool.name();
            let extra: Vec<OsString> = vec!["--sanitize".into(), name.into()];
            let mut results = run_runner_with(
                &runner,
                a,
                m,
                t,
                &out.join(format!("sanitize-{name}")),
                &golden_root,
                &extra,
            )?;
            for rec in &mut results.records {
                rec.repro = if rec.case == "-" {
                    format!("{} --sanitize {name}", repro.target(&t.name))
                } else {
                    format!("{} --sanitize {name}", repro.check(&t.name, rec))
                };
            }
            results.target = format!("{} {name}", t.name);
            reports.push(TargetReport {
                results,
                unstable: t.unstable.clone(),
                build: String::new(),
                notes: Vec::new(),
            });
        }
    }
    let junit = report::junit::render(&reports)?;
    write_atomic(&out.join("junit.xml"), junit.as_bytes())?;
    let summary = report::markdown::render(&reports);
    write_atomic(&out.join("summary.md"), summary.as_bytes())?;
    print!("{}", report::terminal::render(&reports));
    println!(
        "\nresults: {}/sanitize-<tool>/<target>/results.yaml (the tool's log beside each)",
        out.display()
    );
    Ok(report::exit_code(&reports))
}

/// The tools, or why this run cannot be done, with the fix.
fn check(a: &MatrixArgs, targets: &[Target], root: &Path) -> Result<Vec<Tool>, String> {
    let tools = a
        .sanitize
        .iter()
        .map(|s| Tool::parse(s))
        .collect::<Result<Vec<_>, _>>()?;
    if a.suite.iter().any(|s| s == "bench") {
        return Err(
            "--sanitize never runs the bench suite (its timings would be the tool's): drop \
             --suite bench"
                .into(),
        );
    }
    if a.targets.is_empty() {
        return Err(
            "--sanitize needs --target: name the NVIDIA targets whose card is on this \
                    machine (e.g. --target sm_90)"
                .into(),
        );
    }
    if a.from_results.is_some() || a.bless || a.emulate.emulate {
        return Err(
            "--sanitize runs the kernels on the card: it does not combine with \
                    --from-results, --bless or --emulate"
                .into(),
        );
    }
    for t in targets {
        if let Some(e) = refuse_target(t, None) {
            return Err(e);
        }
        let dir = root.join("build/kernels").join(&t.name);
        if let Err(no) = qsa::runner::open_backend(t, &dir) {
            return Err(refuse_target(t, Some(&no.0)).unwrap_or(no.0));
        }
    }
    // The runner looks on PATH first: put the one found here there, wherever it was.
    let found = find_compute_sanitizer(&root.join(".venv-cuda"))?;
    if let Some(dir) = found.parent() {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let dirs = std::iter::once(dir.to_path_buf()).chain(std::env::split_paths(&path));
        let joined = std::env::join_paths(dirs).map_err(|e| e.to_string())?;
        std::env::set_var("PATH", joined);
    }
    Ok(tools)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        a: MatrixArgs,
    }

    /// The refusal for `cargo xtask matrix ARGS`, which must come before any build.
    fn refused(args: &[&str]) -> String {
        let cli =
            Cli::try_parse_from(std::iter::once("matrix").chain(args.iter().copied())).unwrap();
        let root = crate::root::find(Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap();
        let m = Matrix::load(&root.join("matrix.yaml")).unwrap();
        let targets: Vec<Target> = cli
            .a
            .targets
            .iter()
            .map(|n| m.target(n).unwrap().clone())
            .collect();
        check(&cli.a, &targets, &root).expect_err("refused")
    }

    #[test]
    fn what_cannot_be_sanitized_is_refused_before_any_build() {
        let e = refused(&["--sanitize", "memcheck,leakcheck", "--target", "sm_90"]);
        assert!(
            e.contains("unknown compute-sanitizer tool `leakcheck`"),
            "{e}"
        );
        let e = refused(&[
            "--sanitize",
            "memcheck",
            "--target",
            "sm_90",
            "--suite",
            "bench",
        ]);
        assert!(e.contains("drop --suite bench"), "{e}");
        let e = refused(&["--sanitize", "racecheck"]);
        assert!(e.contains("needs --target"), "{e}");
        let e = refused(&["--sanitize", "memcheck", "--target", "cpu"]);
        assert!(e.contains("NVIDIA targets only"), "{e}");
        let e = refused(&["--sanitize", "synccheck", "--target", "sm_90", "--emulate"]);
        assert!(e.contains("does not combine with"), "{e}");
        // No card here (this machine): refused naming the target and the driver's absence.
        let root = crate::root::find(Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap();
        let m = Matrix::load(&root.join("matrix.yaml")).unwrap();
        if qsa::runner::open_backend(m.target("sm_90").unwrap(), Path::new("/x")).is_err() {
            let e = refused(&["--sanitize", "memcheck,initcheck", "--target", "sm_90"]);
            assert!(e.contains("needs sm_90's card on this machine"), "{e}");
        }
    }
}
