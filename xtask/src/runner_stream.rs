//! Supervising one target's `qsa run`: start it, pass its progress through, and when it
//! dies (a signal: the OOM killer, a crash in a driver; a panic outside any check) mark the
//! check in flight as crashed in its journal and restart it with `--resume`, which skips
//! every check the journal has begun. `--timeout` bounds all the runs of a target together:
//! past it the runner is killed, the check in flight is marked crashed, and the target is
//! `failed` with every check that finished before (a hung driver would hang again).
//!
//! The runner's exit codes (src/bin/qsa.rs): 0 every check passed, 1 some check failed
//! (both: results written), 3 no device here (results written, built-not-run / skipped),
//! 2 it refused its arguments or could not write its results. Anything else is a crash.

use anyhow::{Context, Result};
use qsa::journal::{self, Journal};
use qsa::matrix::{Matrix, Target};
use qsa::results::{TargetResults, TargetStatus};
use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Restarts after crashes, per target: each one skips one more check, so a runner that dies
/// on every check would otherwise restart once per check.
pub const MAX_RESTARTS: usize = 8;

/// One target's runner invocation.
pub struct RunnerJob<'a> {
    pub runner: &'a Path,
    /// `run --target T ...` without `--out`, `--journal`, `--resume`.
    pub args: Vec<OsString>,
    pub results: PathBuf,
    pub timeout: Duration,
    pub matrix: &'a Matrix,
    pub target: &'a Target,
}

enum Ended {
    Exited(ExitStatus),
    TimedOut,
}

/// Run the job to the end (restarting after crashes); a target whose runner cannot finish
/// is `failed`, and still carries every check its journal kept.
pub fn run(job: &RunnerJob) -> Result<TargetResults> {
    let journal_path = journal::path_for(&job.results);
    let _ = std::fs::remove_file(&job.results);
    let _ = std::fs::remove_file(&journal_path);
    let deadline = Instant::now() + job.timeout;
    let name = &job.target.name;
    for attempt in 0..=MAX_RESTARTS {
        let mut cmd = Command::new(job.runner);
        cmd.args(&job.args)
            .arg("--out")
            .arg(&job.results)
            .arg("--journal")
            .arg(&journal_path);
        if attempt > 0 {
            cmd.arg("--resume");
            eprintln!("restarting the {name} runner with --resume (restart {attempt} of at most {MAX_RESTARTS}) ...");
        } else {
            eprintln!("running {name} ...");
        }
        let (ended, last) = run_once(cmd, deadline, job.runner)?;
        let status = match ended {
            Ended::TimedOut => {
                let msg = format!(
                    "timed out: the {name} runner exceeded --timeout {} s in this check and was killed (a hung kernel?)",
                    job.timeout.as_secs()
                );
                let done = close_in_flight(&journal_path, &msg)?;
                return failed(
                    job,
                    &journal_path,
                    format!(
                        "the runner exceeded --timeout {} s and was killed{}; the checks that finished before are kept, the rest did not run; last output: {}",
                        job.timeout.as_secs(),
                        done.map(|u| format!(" in {u}")).unwrap_or_default(),
                        last.join(" | ")
                    ),
                );
            }
            Ended::Exited(s) => s,
        };
        if status.success() || matches!(status.code(), Some(1) | Some(3)) {
            return match TargetResults::read(&job.results) {
                Ok(r) => Ok(r),
                Err(e) => failed(
                    job,
                    &journal_path,
                    format!("the runner exited ({status}) but its results are unreadable: {e:#}"),
                ),
            };
        }
        let how = describe(status, &last);
        if status.code() == Some(2) {
            return failed(job, &journal_path, format!("the runner {how}"));
        }
        let msg =
            format!("the runner {how} in this check; the matrix restarted it without this check");
        match close_in_flight(&journal_path, &msg)? {
            Some(unit) => eprintln!(
                "{name}: the runner {how} in {unit}: kept the finished checks, marked it crashed"
            ),
            None => {
                return failed(
                    job,
                    &journal_path,
                    format!("the runner {how} outside any check"),
                )
            }
        }
    }
    failed(
        job,
        &journal_path,
        format!(
            "the runner crashed {} times; gave up (the crashed checks are in the results)",
            MAX_RESTARTS + 1
        ),
    )
}

/// Mark the unit in flight as crashed; the unit, if there was one.
fn close_in_flight(path: &Path, msg: &str) -> Result<Option<journal::Unit>> {
    let st = journal::read(path)?;
    let unit = st.in_flight.as_ref().map(|b| b.unit.clone());
    if unit.is_some() {
        Journal::open(path, false)?.close_in_flight(&st, msg)?;
    }
    Ok(unit)
}

/// A failed target with every record the journal kept.
fn failed(job: &RunnerJob, journal_path: &Path, reason: String) -> Result<TargetResults> {
    let st = journal::read(journal_path)?;
    let mut r = qsa::runner::not_run(job.matrix, job.target, TargetStatus::Failed, reason);
    if let Some(s) = st.starts.first() {
        r.started = s.started.clone();
    }
    if let Some(s) = st.starts.last() {
        r.device = s.device.clone();
    }
    r.seconds = st.seconds;
    r.records = st.records;
    Ok(r)
}

/// "was killed by signal 9 (SIGKILL)", "exited with 101: panicked at ...", with the
/// runner's own panic line when it printed one (never backtrace frames).
fn describe(s: ExitStatus, last: &[String]) -> String {
    use std::os::unix::process::ExitStatusExt;
    let panic = last
        .iter()
        .rev()
        .find_map(|l| {
            l.strip_prefix("qsa: thread ")
                .and_then(|l| l.split_once(' '))
        })
        .map(|(_, msg)| format!(": {msg}"));
    match (s.signal(), s.code()) {
        (Some(sig), _) => format!("was killed by signal {sig} ({})", signal_name(sig)),
        (None, Some(code)) => match panic {
            Some(p) => format!("exited with {code}{p}"),
            None => format!("exited with {code}; last output: {}", last.join(" | ")),
        },
        _ => format!("ended ({s})"),
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        4 => "SIGILL",
        6 => "SIGABRT: an abort, e.g. in a driver",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL: the OOM killer, or someone killed it",
        11 => "SIGSEGV",
        15 => "SIGTERM",
        _ => "see `kill -l`",
    }
}

/// Start the runner, pass its stderr through (indented), wait until it ends or the
/// deadline; the last lines of its stderr come back for the report.
fn run_once(mut cmd: Command, deadline: Instant, runner: &Path) -> Result<(Ended, Vec<String>)> {
    let mut child = cmd
        .stdout(Stdio::inherit())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start {}", runner.display()))?;
    let stderr = child.stderr.take().expect("piped");
    let tail = std::thread::spawn(move || {
        let mut last: Vec<String> = Vec::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("  {line}");
            // Backtrace frames (always indented; the runner's own lines never are) are for
            // the terminal, not for the report's reason.
            if line.starts_with(char::is_whitespace) {
                continue;
            }
            last.push(line);
            if last.len() > 20 {
                last.remove(0);
            }
        }
        last
    });
    let ended = loop {
        if let Some(s) = child.try_wait()? {
            break Ended::Exited(s);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break Ended::TimedOut;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let last = tail.join().unwrap_or_default();
    Ok((ended, last))
}
