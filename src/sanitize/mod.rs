//! Sanitizer mode for NVIDIA targets: `qsa run --sanitize TOOL` re-runs itself under
//! NVIDIA's `compute-sanitizer --tool TOOL` and turns every error or hazard the tool reports
//! into a failed check naming the tool, the kernel and the case.
//!
//! - `parse`: compute-sanitizer's text -> findings and summaries.
//! - `attribute`: findings -> failed `Record`s, each charged to the unit (suite, case,
//!   distribution) whose progress line precedes it in the merged log.
//! - `session`: `qsa run --sanitize`: the refusals (not NVIDIA, no card, bench, no
//!   compute-sanitizer), the run, the findings added to results.yaml.
//! - `exec`: the re-execution: the child runner's stdout, stderr and the tool's report go to
//!   one log file (one open file description, so their order is the order they were
//!   written), which is echoed while it runs and parsed when it ends.
//!
//! Why re-execute instead of a wrapper script: the runner is what travels to a GPU machine
//! without cargo, so the same binary must be able to sanitize itself there.
//! The bench suite never runs under a sanitizer (its timings would be the tool's).

pub mod attribute;
pub mod exec;
pub mod parse;
pub mod session;

use std::path::{Path, PathBuf};

/// What `--error-exitcode` makes compute-sanitizer exit with when it reported anything:
/// distinct from every exit code of the runner (0-3) and from a signal's 128+n.
pub const ERROR_EXITCODE: i32 = 86;

/// The compute-sanitizer tools qsa runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tool {
    Memcheck,
    Racecheck,
    Synccheck,
    Initcheck,
}

impl Tool {
    pub const ALL: [Tool; 4] = [
        Tool::Memcheck,
        Tool::Racecheck,
        Tool::Synccheck,
        Tool::Initcheck,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Tool::Memcheck => "memcheck",
            Tool::Racecheck => "racecheck",
            Tool::Synccheck => "synccheck",
            Tool::Initcheck => "initcheck",
        }
    }

    /// "memcheck" -> Memcheck; anything else is an error that lists the tools.
    pub fn parse(s: &str) -> Result<Tool, String> {
        Tool::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown compute-sanitizer tool `{}`: use one of {}",
                    crate::echo::value(s),
                    Tool::ALL.map(|t| t.name()).join(", ")
                )
            })
    }
}

/// The error for a target compute-sanitizer cannot check: not NVIDIA, or no card here.
pub fn refuse_target(target: &crate::matrix::Target, no_device: Option<&str>) -> Option<String> {
    use crate::dispatch::Vendor;
    if target.vendor != Vendor::Nvidia {
        return Some(format!(
            "--sanitize runs NVIDIA targets only (compute-sanitizer is NVIDIA's tool); {} is not \
             one: pick an sm_* target",
            target.name
        ));
    }
    no_device.map(|why| {
        format!(
            "--sanitize needs {}'s card on this machine: compute-sanitizer checks kernels as they \
             run on the device, and there is none here ({why}); run it where the card is",
            target.name
        )
    })
}

/// compute-sanitizer: on PATH, else under `$CUDA_HOME` / `$CUDA_PATH` / /usr/local/cuda,
/// else in the `.venv-cuda` that `cargo xtask setup` makes (PyPI's
/// nvidia-cuda-sanitizer-api). The error names every place looked and the fix.
pub fn find_compute_sanitizer(venv: &Path) -> Result<PathBuf, String> {
    let mut looked: Vec<PathBuf> = Vec::new();
    if let Some(path) = std::env::var_os("PATH") {
        looked.extend(std::env::split_paths(&path).map(|d| d.join("compute-sanitizer")));
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(d) = std::env::var_os(var).filter(|s| !s.is_empty()) {
            looked.push(PathBuf::from(d).join("bin/compute-sanitizer"));
        }
    }
    looked.push(PathBuf::from("/usr/local/cuda/bin/compute-sanitizer"));
    looked.extend(venv_candidates(venv));
    if let Some(found) = looked.iter().find(|p| p.is_file()) {
        return Ok(found.clone());
    }
    Err(format!(
        "compute-sanitizer not found (looked on PATH, in $CUDA_HOME/bin, $CUDA_PATH/bin, \
         /usr/local/cuda/bin and {}): install the CUDA toolkit's compute-sanitizer and put it \
         on PATH or set CUDA_HOME, or `{}/bin/pip install nvidia-cuda-sanitizer-api`",
        venv.display(),
        venv.display()
    ))
}

/// Where PyPI's wheels put it: `nvidia/cu13/bin/` (CUDA 13 wheels) or
/// `nvidia/cuda_sanitizer_api/compute-sanitizer/` (CUDA 12 wheels), under any
/// `lib*/python3*/site-packages` of the venv.
fn venv_candidates(venv: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for lib in ["lib", "lib64"] {
        let Ok(entries) = std::fs::read_dir(venv.join(lib)) else {
            continue;
        };
        for e in entries.flatten() {
            let nvidia = e.path().join("site-packages/nvidia");
            out.push(nvidia.join("cu13/bin/compute-sanitizer"));
            out.push(nvidia.join("cuda_sanitizer_api/compute-sanitizer/compute-sanitizer"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_parse_by_name_and_an_unknown_one_lists_them() {
        assert_eq!(Tool::parse("racecheck"), Ok(Tool::Racecheck));
        let e = Tool::parse("leakcheck").unwrap_err();
        assert!(
            e.contains("`leakcheck`") && e.contains("memcheck, racecheck, synccheck, initcheck"),
            "{e}"
        );
    }

    #[test]
    fn a_missing_compute_sanitizer_names_where_it_looked_and_the_fix() {
        let venv = tempfile::tempdir().unwrap();
        // PATH and CUDA_HOME may hold one on a GPU machine: only check the message there.
        if let Err(e) = find_compute_sanitizer(venv.path()) {
            assert!(e.starts_with("compute-sanitizer not found"), "{e}");
            assert!(e.contains("CUDA_HOME") && e.contains("pip install"), "{e}");
        }
        // One in the venv's CUDA 13 wheel layout is found.
        let bin = venv
            .path()
            .join("lib/python3.11/site-packages/nvidia/cu13/bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(bin.join("compute-sanitizer"), b"").unwrap();
        assert!(venv_candidates(venv.path()).contains(&bin.join("compute-sanitizer")));
        assert!(find_compute_sanitizer(venv.path()).is_ok());
    }
}
