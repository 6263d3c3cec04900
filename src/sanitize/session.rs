//! `qsa run --sanitize TOOL`: refuse what cannot be sanitized (before any work), run the
//! runner under the tool, add its findings to the results as failed checks, and exit as the
//! runner does (0 all passed, 1 a check failed, 2 bad usage).

use super::{attribute, exec, find_compute_sanitizer, parse, refuse_target, Tool};
use crate::matrix::{Matrix, Target};
use crate::results::{TargetResults, TargetStatus};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Everything `run` needs from the command line.
pub struct Request<'a> {
    pub tool: &'a str,
    pub matrix: &'a Matrix,
    pub target: &'a Target,
    /// `<code objects>/<target>`.
    pub code_objects: &'a Path,
    pub out: &'a Path,
    pub suites: &'a [String],
    pub resume: bool,
    pub quiet: bool,
    /// The runner's own arguments (after the program name), `--sanitize` included.
    pub argv: Vec<OsString>,
}

/// The runner's exit code.
pub fn run(req: &Request) -> u8 {
    let plan = match prepare(req) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    if !req.resume {
        let _ = std::fs::remove_file(req.out);
    }
    let outcome = match exec::run(&plan) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    if outcome.exit == Some(2) {
        eprintln!(
            "error: the runner under compute-sanitizer refused its arguments (exit 2; see above)"
        );
        return 2;
    }
    let report = parse::parse(&outcome.log);
    let log_path = plan.log.display().to_string();
    let found = attribute::records(
        plan.tool,
        &req.target.name,
        &outcome.log,
        &report,
        outcome.exit,
        &log_path,
    );
    let mut results = TargetResults::read(req.out).unwrap_or_else(|e| {
        crate::runner::not_run(
            req.matrix,
            req.target,
            TargetStatus::Failed,
            format!(
                "the runner under compute-sanitizer {} ended ({}) without results: {e:#}; its \
                 log: {log_path}",
                plan.tool.name(),
                outcome
                    .exit
                    .map_or("a signal".to_string(), |c| format!("exit {c}"))
            ),
        )
    });
    let checks = results.records.len();
    results.records.extend(found.iter().cloned());
    if let Err(e) = results.write(req.out) {
        eprintln!("error: {e:#}");
        return 2;
    }
    for r in &found {
        eprintln!("FAIL {}: {}\n  repro: {}", r.case, r.message, r.repro);
    }
    eprintln!(
        "compute-sanitizer {}: {} finding(s) over {checks} checks of {} (log: {log_path})",
        plan.tool.name(),
        found.len(),
        req.target.name
    );
    if results.failures() > 0 || results.status == TargetStatus::Failed {
        1
    } else {
        0
    }
}

/// Every refusal before any work: the tool's name, bench, the target (NVIDIA, card here),
/// compute-sanitizer itself.
fn prepare(req: &Request) -> Result<exec::Plan, String> {
    let tool = Tool::parse(req.tool)?;
    if req.suites.iter().any(|s| s == "bench") {
        return Err(
            "--sanitize never runs the bench suite (its timings would be the \
                    tool's): drop --suite bench"
                .into(),
        );
    }
    if let Some(e) = refuse_target(req.target, None) {
        return Err(e);
    }
    // The card must be here: open it as the child will (then let it go again).
    if let Err(no) = crate::runner::open_backend(req.target, req.code_objects) {
        return Err(refuse_target(req.target, Some(&no.0)).unwrap_or(no.0));
    }
    let sanitizer = find_compute_sanitizer(Path::new(".venv-cuda"))?;
    let runner = std::env::current_exe()
        .map_err(|e| format!("cannot find this runner's own executable: {e}"))?;
    Ok(exec::Plan {
        tool,
        sanitizer,
        runner,
        args: exec::child_args(&req.argv),
        log: log_path(req.out, tool),
        quiet: req.quiet,
    })
}

/// `out/results.yaml` -> `out/results.sanitize-memcheck.log`.
fn log_path(out: &Path, tool: Tool) -> PathBuf {
    let stem = out
        .file_stem()
        .map_or("results".into(), |s| s.to_string_lossy().into_owned());
    out.with_file_name(format!("{stem}.sanitize-{}.log", tool.name()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request<'a>(
        m: &'a Matrix,
        t: &'a Target,
        tool: &'a str,
        suites: &'a [String],
    ) -> Request<'a> {
        Request {
            tool,
            matrix: m,
            target: t,
            code_objects: Path::new("/nonexistent"),
            out: Path::new("/nonexistent/results.yaml"),
            suites,
            resume: false,
            quiet: true,
            argv: Vec::new(),
        }
    }

    /// Each refusal, before any work, with the fix in its message (this machine has no
    /// NVIDIA card; on one that has, the sm_* case is skipped).
    #[test]
    fn what_cannot_be_sanitized_is_refused_with_the_fix() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let m = Matrix::load(&root.join("matrix.yaml")).unwrap();
        let sm90 = m.target("sm_90").unwrap();
        let gfx = m.target("gfx906").unwrap();
        let none: Vec<String> = Vec::new();
        let bench = vec!["bench".to_string()];
        let err = |r: Request| prepare(&r).err().expect("refused");

        assert!(
            err(request(&m, sm90, "leakcheck", &none)).contains("unknown compute-sanitizer tool")
        );
        assert!(err(request(&m, sm90, "memcheck", &bench)).contains("drop --suite bench"));
        assert!(err(request(&m, gfx, "memcheck", &none)).contains("NVIDIA targets only"));
        if crate::runner::open_backend(sm90, Path::new("/nonexistent")).is_err() {
            let e = err(request(&m, sm90, "memcheck", &none));
            assert!(e.contains("needs sm_90's card on this machine"), "{e}");
            assert!(e.contains("no CUDA driver"), "{e}");
        }
        assert_eq!(
            log_path(Path::new("out/sm_90/results.yaml"), Tool::Racecheck),
            Path::new("out/sm_90/results.sanitize-racecheck.log")
        );
    }
}
