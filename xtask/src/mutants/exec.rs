//! Running one command in the scratch tree: bash, its own process group (so a time limit
//! or Ctrl-C ends cargo, rustc and the test binaries together), stdout and stderr
//! interleaved into one log file a reviewer can open.

use anyhow::{Context, Result};
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Set by the Ctrl-C handler; the runner ends the child, restores the file and stops.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

pub fn install_ctrlc() {
    // A second install (tests calling run twice in one process) is harmless to ignore.
    let _ = ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::SeqCst));
}

pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

pub struct Finished {
    /// None when it was killed (time limit or Ctrl-C).
    pub code: Option<i32>,
    pub timed_out: bool,
    pub output: String,
    pub secs: f64,
    /// Where the whole output is.
    pub log: std::path::PathBuf,
}

impl Finished {
    pub fn passed(&self) -> bool {
        self.code == Some(0)
    }

    /// The last `n` lines of the output, indented for a report.
    pub fn tail(&self, n: usize) -> String {
        let lines: Vec<&str> = self.output.lines().collect();
        let from = lines.len().saturating_sub(n);
        lines[from..]
            .iter()
            .map(|l| format!("    | {l}\n"))
            .collect()
    }

    pub fn status(&self) -> String {
        match (self.code, self.timed_out) {
            (_, true) => format!("killed after the {:.0}s time limit", self.secs),
            (Some(c), _) => format!("exit {c}"),
            (None, _) => "killed by a signal".into(),
        }
    }
}

/// Run `command` with bash in `dir`, output to `log`, killed after `limit`.
pub fn run(command: &str, dir: &Path, log: &Path, limit: Duration) -> Result<Finished> {
    if let Some(d) = log.parent() {
        std::fs::create_dir_all(d)?;
    }
    let file =
        std::fs::File::create(log).with_context(|| format!("cannot write {}", log.display()))?;
    let start = Instant::now();
    let mut child = Command::new("bash")
        .args(["-c", command])
        .current_dir(dir)
        // The scratch tree's own build outputs, never the developer's target/.
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file)
        .process_group(0)
        .spawn()
        .context("cannot start bash")?;
    let pgid = child.id() as i32;
    let mut timed_out = false;
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if start.elapsed() > limit || interrupted() {
            timed_out = !interrupted();
            // SAFETY: kill(2) on the child's own process group; no memory is involved.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            break child.wait()?;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let output = String::from_utf8_lossy(&std::fs::read(log).unwrap_or_default()).into_owned();
    Ok(Finished {
        code: status.code(),
        timed_out,
        output,
        secs: start.elapsed().as_secs_f64(),
        log: log.to_path_buf(),
    })
}
