//! Re-running this runner under compute-sanitizer, with one log for everything.
//!
//! The child's stdout and stderr and the tool's report (compute-sanitizer writes it to its
//! stdout) are all the same open file, opened once for appending, so lines land in the
//! order they were written: what lets `attribute` charge a report to the unit whose
//! progress line precedes it. The log is echoed while the child runs (the tool's lines
//! always; the runner's progress unless --quiet) and kept next to the results.

use super::{Tool, ERROR_EXITCODE};
use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Set on the child: the pid of the runner that started compute-sanitizer. A timeout in
/// `cargo xtask matrix` kills that runner with SIGKILL, which its children never hear of;
/// the child watches this pid and stops when it is gone, so no instrumented run is left
/// holding the GPU while the next one starts.
pub const PARENT_ENV: &str = "QSA_SANITIZE_PARENT";

/// In the child (`PARENT_ENV` set): a thread that ends this process once the sanitizing
/// runner is gone (checked every second; compute-sanitizer then ends too).
pub fn watch_parent_from_env() {
    let Some(pid) = std::env::var(PARENT_ENV)
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
    else {
        return;
    };
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_secs(1));
        if !alive(pid) {
            eprintln!("the sanitizing runner (pid {pid}) is gone (killed by a timeout?): stopping");
            std::process::exit(143);
        }
    });
}

/// Is process `pid` still there (Linux: /proc, where compute-sanitizer runs)?
fn alive(pid: u32) -> bool {
    Path::new("/proc").join(pid.to_string()).exists()
}

/// One sanitized run of the runner.
pub struct Plan {
    pub tool: Tool,
    pub sanitizer: PathBuf,
    /// This runner's own executable.
    pub runner: PathBuf,
    /// The runner's arguments, without `--sanitize` (`child_args`).
    pub args: Vec<OsString>,
    pub log: PathBuf,
    pub quiet: bool,
}

/// How the child ended, and its whole log.
pub struct Outcome {
    /// None: killed by a signal.
    pub exit: Option<i32>,
    pub log: String,
}

/// The runner's own arguments for the child: `--sanitize T` (and `--quiet`, since the
/// progress lines are what attribution reads) dropped; parity and error only when no suite
/// was named (bench never runs under a sanitizer: the caller refuses `--suite bench`).
pub fn child_args(argv: &[OsString]) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut skip_value = false;
    let mut suites = false;
    for a in argv {
        if std::mem::take(&mut skip_value) {
            continue;
        }
        let s = a.to_string_lossy();
        if s == "--sanitize" {
            skip_value = true;
            continue;
        }
        if s.starts_with("--sanitize=") || s == "--quiet" {
            continue;
        }
        suites |= s == "--suite" || s.starts_with("--suite=");
        out.push(a.clone());
    }
    if !suites {
        for s in ["parity", "error"] {
            out.extend(["--suite".into(), s.into()]);
        }
    }
    out
}

/// `QSA_SANITIZE_LINEBUF=1`: start compute-sanitizer through coreutils' `stdbuf -oL -eL`.
/// Attribution needs each report written when it is made; compute-sanitizer writes with C
/// stdio (it imports setvbuf and fflush), and whether it flushes per report when its
/// output is a file is not checked on hardware yet. If reports all land after the last
/// progress line (every finding charged to the last unit), this forces line buffering.
pub const LINEBUF_ENV: &str = "QSA_SANITIZE_LINEBUF";

/// The command line: compute-sanitizer's options, then the runner and its arguments.
pub fn command(plan: &Plan) -> Command {
    let mut cmd = if std::env::var(LINEBUF_ENV).is_ok_and(|v| v == "1") {
        let mut c = Command::new("stdbuf");
        c.args(["-oL", "-eL"]).arg(&plan.sanitizer);
        c
    } else {
        Command::new(&plan.sanitizer)
    };
    cmd.arg("--tool")
        .arg(plan.tool.name())
        .arg("--error-exitcode")
        .arg(ERROR_EXITCODE.to_string())
        // Host backtraces say nothing about a kernel; the report's `at` line names it.
        .args(["--show-backtrace", "no"])
        // A precise error ends that kernel, not the context: the checks after it still run
        // (and are checked), instead of all failing with the dead context's API errors.
        .args(["--destroy-on-device-error", "kernel"])
        .arg(&plan.runner)
        .args(&plan.args)
        .env(PARENT_ENV, std::process::id().to_string());
    cmd
}

/// Run the child to its end, echoing the log as it grows.
pub fn run(plan: &Plan) -> std::io::Result<Outcome> {
    if let Some(dir) = plan.log.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    // Appending: every writer's line goes to the end, whoever wrote last.
    let _ = std::fs::remove_file(&plan.log);
    let log = File::options().create(true).append(true).open(&plan.log)?;
    let mut cmd = command(plan);
    cmd.stdout(log.try_clone()?).stderr(log);
    eprintln!(
        "running under compute-sanitizer {} (log: {}): {}",
        plan.tool.name(),
        plan.log.display(),
        describe(&cmd)
    );
    let mut child = cmd.spawn().map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!("cannot start {}: {e}", plan.sanitizer.display()),
        )
    })?;
    let mut tail = Tail::open(&plan.log)?;
    let status = loop {
        tail.echo(plan.quiet)?;
        if let Some(s) = child.try_wait()? {
            break s;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    tail.echo(plan.quiet)?;
    tail.flush(plan.quiet);
    Ok(Outcome {
        exit: status.code(),
        log: std::fs::read_to_string(&plan.log)?,
    })
}

fn describe(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Follows the log, printing whole lines to stderr.
struct Tail {
    file: File,
    pending: String,
}

impl Tail {
    fn open(path: &Path) -> std::io::Result<Tail> {
        let mut file = File::open(path)?;
        file.seek(SeekFrom::Start(0))?;
        Ok(Tail {
            file,
            pending: String::new(),
        })
    }

    fn echo(&mut self, quiet: bool) -> std::io::Result<()> {
        let mut bytes = Vec::new();
        self.file.read_to_end(&mut bytes)?;
        self.pending.push_str(&String::from_utf8_lossy(&bytes));
        while let Some(at) = self.pending.find('\n') {
            let line: String = self.pending.drain(..=at).collect();
            show(line.trim_end(), quiet);
        }
        Ok(())
    }

    fn flush(&mut self, quiet: bool) {
        let rest = std::mem::take(&mut self.pending);
        if !rest.is_empty() {
            show(rest.trim_end(), quiet);
        }
    }
}

fn show(line: &str, quiet: bool) {
    if !quiet || line.starts_with("=========") {
        eprintln!("{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_child_can_tell_whether_its_sanitizing_runner_is_alive() {
        assert!(alive(std::process::id()));
        assert!(!alive(u32::MAX - 1), "no such pid");
        let plan = Plan {
            tool: Tool::Racecheck,
            sanitizer: PathBuf::from("compute-sanitizer"),
            runner: PathBuf::from("qsa"),
            args: Vec::new(),
            log: PathBuf::from("l"),
            quiet: true,
        };
        let cmd = command(&plan);
        let env: Vec<_> = cmd.get_envs().collect();
        let pid = std::process::id().to_string();
        assert!(
            env.iter()
                .any(|(k, v)| *k == PARENT_ENV && *v == Some(pid.as_ref())),
            "{env:?}"
        );
        assert_eq!(
            describe(&cmd),
            "compute-sanitizer --tool racecheck --error-exitcode 86 --show-backtrace no \
             --destroy-on-device-error kernel qsa"
        );
    }

    #[test]
    fn the_child_runs_without_sanitize_or_quiet_and_defaults_to_parity_and_error() {
        let got = child_args(&os(&[
            "run",
            "--target",
            "sm_90",
            "--sanitize",
            "memcheck",
            "--quiet",
            "--out",
            "r.yaml",
        ]));
        assert_eq!(
            got,
            os(&[
                "run", "--target", "sm_90", "--out", "r.yaml", "--suite", "parity", "--suite",
                "error"
            ])
        );
        let got = child_args(&os(&["run", "--sanitize=racecheck", "--suite", "parity"]));
        assert_eq!(got, os(&["run", "--suite", "parity"]));
    }

    /// A stand-in for compute-sanitizer (a shell script: same argument shape, prints a
    /// report, exits with --error-exitcode) proves the log's order and the exit code.
    #[test]
    fn the_log_keeps_the_childs_lines_and_the_tools_report_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("compute-sanitizer");
        std::fs::write(
            &fake,
            "#!/bin/sh\n\
             # --tool T --error-exitcode N --show-backtrace no --destroy-on-device-error kernel RUNNER ARGS...\n\
             echo '========= COMPUTE-SANITIZER'\n\
             echo \"[1/1] sm_90 parity ${11}\" >&2\n\
             echo '========= Invalid __global__ write of size 4 bytes'\n\
             echo '=========     at k+0x10'\n\
             echo '========= ERROR SUMMARY: 1 error'\n\
             exit $4\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let plan = Plan {
            tool: Tool::Memcheck,
            sanitizer: fake,
            runner: PathBuf::from("qsa"),
            args: os(&["run", "case_a"]),
            log: dir.path().join("out/memcheck.log"),
            quiet: true,
        };
        let out = run(&plan).unwrap();
        assert_eq!(out.exit, Some(ERROR_EXITCODE));
        let lines: Vec<&str> = out.log.lines().collect();
        assert_eq!(lines[1], "[1/1] sm_90 parity case_a", "{lines:?}");
        assert_eq!(
            lines[2],
            "========= Invalid __global__ write of size 4 bytes"
        );
    }
}
