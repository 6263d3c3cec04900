//! Reports of a matrix run: the terminal table, JUnit XML, the Markdown summary for a pull
//! request. All three are built from the same `TargetReport`s, which are also written per
//! target as `report.yaml`, so `cargo xtask report merge` can join runs made on different
//! machines.

pub mod bench_chart;
pub mod junit;
pub mod markdown;
pub mod terminal;

use qsa::results::{Status, TargetResults, TargetStatus};
use serde::{Deserialize, Serialize};

/// A gate outside the records (resources, snapshots, dispatch): one failing or noted line.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GateNote {
    /// "snapshot", "stray snapshot", "resources", "dispatch", "toolchain", "runner"
    pub kind: String,
    pub name: String,
    pub failed: bool,
    pub message: String,
    /// What a changed snapshot means, one sentence per changed check or row ("ids changed
    /// for 1 of 8 queries of ...", "error of ... rose 10x (1e-7 -> 1e-6)").
    #[serde(default)]
    pub meaning: Vec<String>,
    /// A diff for the reviewer (snapshot or resource deltas), if any.
    #[serde(default)]
    pub diff: String,
    #[serde(default)]
    pub repro: String,
}

/// Everything known about one target after a run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TargetReport {
    pub results: TargetResults,
    /// Reason the target is unstable (its failures do not gate), from matrix.yaml.
    #[serde(default)]
    pub unstable: Option<String>,
    /// Which compiler built the code objects, or why nothing was built.
    #[serde(default)]
    pub build: String,
    #[serde(default)]
    pub notes: Vec<GateNote>,
}

/// Counts of one target's records.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counts {
    pub pass: usize,
    pub fail: usize,
    pub skip: usize,
    pub unsupported: usize,
    pub gate_failures: usize,
}

impl TargetReport {
    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for r in &self.results.records {
            match r.status {
                Status::Pass => c.pass += 1,
                Status::Fail | Status::Error | Status::Crashed => c.fail += 1,
                Status::Skip => c.skip += 1,
                Status::Unsupported => c.unsupported += 1,
            }
        }
        c.gate_failures = self.notes.iter().filter(|n| n.failed).count();
        c
    }

    /// Did this target fail a gate (before unstable targets are excused)?
    pub fn failed(&self) -> bool {
        let c = self.counts();
        c.fail > 0 || c.gate_failures > 0 || self.results.status == TargetStatus::Failed
    }

    /// Does this target's failure fail the run?
    pub fn gates(&self) -> bool {
        self.failed() && self.unstable.is_none()
    }
}

/// The exit code of a set of target reports: 0 all gates hold, 1 a gate failed.
pub fn exit_code(reports: &[TargetReport]) -> u8 {
    u8::from(reports.iter().any(TargetReport::gates))
}
