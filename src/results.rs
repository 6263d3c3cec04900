//! Results: what a runner process writes for one target, and what xtask reads back.
//!
//! The runner writes `results.yaml` atomically (`write_atomic`), so an interrupted or
//! crashed run leaves either the previous file or nothing, never half a file. While it runs,
//! every finished check is also streamed to a journal (`crate::journal`), so a crash or a
//! kill loses only the check in flight.

use crate::backend::DeviceInfo;
use crate::matrix::Suite;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// Outcome of one check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pass,
    Fail,
    /// Not run, with the reason (no device, filtered, too large for this target).
    Skip,
    /// The backend has no kernel for it: reported, never counted as a pass.
    Unsupported,
    /// The run broke (device error, bad input): a failure with a reason.
    Error,
    /// The check was in flight when its runner panicked, was killed (a signal: the OOM
    /// killer, a timeout) or died: a failure whose message is the panic or the signal.
    Crashed,
}

impl Status {
    pub fn is_failure(self) -> bool {
        matches!(self, Status::Fail | Status::Error | Status::Crashed)
    }
}

/// How far a target got.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TargetStatus {
    /// Ran on the hardware.
    Run,
    /// Ran on a newer NVIDIA card through the target's PTX (`qsa::ptx`): the target's
    /// dispatch, caps and shared limit, the card's silicon; no bench medians. Shown as
    /// `run (PTX on <card>)` (`TargetResults::status_label`), never as plain `run`.
    RunPtx,
    /// Compiled and resource-checked only: no such device here.
    BuiltNotRun,
    /// No such device here: the kernel sources ran on the CPU through the SIMT emulator
    /// (src/emu/), with this target's wave width, shared memory and dispatch. What the
    /// emulator does not cover is reported per check as unsupported in emulation.
    Emulated,
    /// Not built and not run (no toolchain, filtered out), with the reason.
    Skipped,
    /// The runner crashed, hung or could not start.
    Failed,
}

impl TargetStatus {
    pub fn label(self) -> &'static str {
        match self {
            TargetStatus::Run => "run",
            // The card is in `TargetResults::status_label`; without it, still never `run`.
            TargetStatus::RunPtx => "run (PTX)",
            TargetStatus::BuiltNotRun => "built, not run",
            TargetStatus::Emulated => "emulated",
            TargetStatus::Skipped => "skipped",
            TargetStatus::Failed => "failed",
        }
    }
}

/// One check: a (suite, case, distribution, variant, pass) cell.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Record {
    pub suite: Suite,
    pub case: String,
    /// Input distribution ("-" where not applicable).
    pub dist: String,
    pub variant: String,
    /// Sub-check: "ids", "select", "fwd", "bwd", ... ("-" where there is one).
    pub check: String,
    /// The kernel that actually ran (after dispatch).
    #[serde(default)]
    pub dispatched: Option<String>,
    pub status: Status,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub metrics: BTreeMap<String, f64>,
    /// Stable text compared with the golden snapshot (None: nothing to snapshot).
    #[serde(default)]
    pub snapshot: Option<String>,
    /// The command that reproduces exactly this check.
    pub repro: String,
}

/// Everything one runner process produced for one target.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TargetResults {
    pub target: String,
    pub status: TargetStatus,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub device: DeviceInfo,
    pub seed: u64,
    /// UTC, RFC 3339.
    pub started: String,
    pub seconds: f64,
    pub records: Vec<Record>,
}

impl TargetResults {
    /// The status as every report shows it: `run (PTX on sm_90)` for a PTX run (the card
    /// is the device's arch), the plain label otherwise.
    pub fn status_label(&self) -> String {
        match self.status {
            TargetStatus::RunPtx if !self.device.arch.is_empty() => {
                crate::ptx::status_label(&self.device.arch)
            }
            s => s.label().to_string(),
        }
    }
    /// The card a PTX run executed on ("sm_90"); None for every other status.
    pub fn ptx_card(&self) -> Option<&str> {
        (self.status == TargetStatus::RunPtx).then_some(self.device.arch.as_str())
    }
    /// Did it execute on silicon (its own card, or a newer one through its PTX)?
    pub fn ran_on_a_card(&self) -> bool {
        matches!(self.status, TargetStatus::Run | TargetStatus::RunPtx)
    }
    pub fn failures(&self) -> usize {
        self.records
            .iter()
            .filter(|r| r.status.is_failure())
            .count()
    }
    pub fn read(path: &Path) -> anyhow::Result<TargetResults> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        serde_yaml::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{}: not a qsa results file: {e}", path.display()))
    }
    pub fn write(&self, path: &Path) -> anyhow::Result<()> {
        let text = serde_yaml::to_string(self)?;
        write_atomic(path, text.as_bytes())
    }
}

/// Write `bytes` to `path` through a temporary file in the same folder and a rename, so a
/// reader (or a crash) never sees half a file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("out");
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    // A failed write (a full disk) leaves no partial temp file behind.
    std::fs::write(&tmp, bytes).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        anyhow::anyhow!("cannot write {}: {e}", path.display())
    })?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        anyhow::anyhow!("cannot rename {} to {}: {e}", tmp.display(), path.display())
    })
}

/// Current UTC time, RFC 3339, without a date crate (civil-from-days, Howard Hinnant).
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
