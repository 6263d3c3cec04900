//! `cargo xtask`: the qsa build and test orchestrator (rust-analyzer's xtask convention:
//! plain Rust, no make, run through the `.cargo/config.toml` alias).
//!
//! Exit codes: 0 every gate holds; 1 a gate failed; 2 bad usage or configuration.

mod build;
mod ci;
mod emulated;
mod error_noise;
mod golden;
mod lock;
mod matrix;
mod merge;
mod mutants;
mod ptx;
mod report;
mod repro;
mod root;
mod runner_stream;
mod sanitize;
mod setup;
mod snapshot_diff;
mod snapshots;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "cargo xtask", about = "Build, test and gate the qsa kernels on every target", long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Install the pinned CUDA and HIP toolchains (idempotent; says what it did).
    Setup(setup::SetupArgs),
    /// Compile every kernel for each GPU target and write its resource report.
    Build(build::BuildArgs),
    /// Build, run every target's suites, compare with golden/, gate and report.
    Matrix(matrix::MatrixArgs),
    /// Print the CI job matrix of the enabled GPU targets (JSON, from matrix.yaml).
    CiMatrix(ci::CiMatrixArgs),
    /// Reports across runs: `report merge DIR...` joins per-runner results.
    Report(merge::ReportArgs),
    /// Accept pending snapshots downloaded from a CI run (same as `report bless --from`).
    Bless(merge::BlessArgs),
    /// Plant each curated regression (mutants/*.yaml) and check that its named check fails.
    Mutants(mutants::MutantsArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The project root of the tree this is run in (not the one xtask was compiled in).
    if let Err(e) = root::init() {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let result = match cli.cmd {
        Cmd::Setup(a) => setup::run(a),
        Cmd::Build(a) => build::run(a).map(|_| ()),
        Cmd::Matrix(a) => match matrix::run(a) {
            Ok(code) => return ExitCode::from(code),
            Err(e) => Err(e),
        },
        Cmd::CiMatrix(a) => ci::run(a),
        Cmd::Bless(a) => merge::run_bless(&a),
        Cmd::Report(a) => match merge::run(a) {
            Ok(code) => return ExitCode::from(code),
            Err(e) => Err(e),
        },
        Cmd::Mutants(a) => match mutants::run(a) {
            Ok(code) => return ExitCode::from(code),
            Err(e) => Err(e),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
