//! The journal: what a runner streams while it runs, so that a crash, a kill (the OOM
//! killer, a hung driver, xtask's timeout) or a panic loses only the check in flight.
//!
//! One YAML document per entry, each closed by the document-end marker `...` and synced to
//! disk (`sync_data`) before the runner goes on. A document without its `...` was cut by a
//! kill mid-write and is ignored. The entries of one unit of work (a suite on one input:
//! `Unit`) are `begin`, its `record`s, then `end`; a `begin` without its `end` is the unit
//! that was in flight when the runner died. `qsa run --resume` skips every unit the journal
//! has begun, so a restart never reruns the check that killed the runner.

use crate::backend::DeviceInfo;
use crate::matrix::Suite;
use crate::results::{Record, Status};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The unit a runner runs, streams and skips: one suite of one case on one input
/// distribution, every selected variant (the error suite gates each variant against the
/// baseline variant run on the same input, so the variants of an input stay together). The
/// bench suite measures the first selected distribution only: its unit has `dist` "-".
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Unit {
    pub suite: Suite,
    pub case: String,
    pub dist: String,
}

impl std::fmt::Display for Unit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.suite.name(), self.case)?;
        if self.dist != "-" {
            write!(f, " --dist {}", self.dist)?;
        }
        Ok(())
    }
}

/// A unit as it begins: with the command that reruns it, for a crash record written by
/// whoever finds the runner dead.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Begin {
    pub unit: Unit,
    pub repro: String,
}

/// A runner process starting (a resumed run adds one more).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Start {
    pub target: String,
    pub device: DeviceInfo,
    pub seed: u64,
    /// UTC, RFC 3339.
    pub started: String,
    pub pid: u32,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Entry {
    Start(Start),
    Begin(Begin),
    Record(Box<Record>),
    /// The unit finished; `seconds` it took.
    End {
        unit: Unit,
        seconds: f64,
    },
}

/// Appends entries to a journal file, each synced to disk before `append` returns.
pub struct Journal {
    file: std::fs::File,
    path: PathBuf,
}

impl Journal {
    /// Open `path` for appending; `fresh` empties it first (a new run, not a resume).
    pub fn open(path: &Path, fresh: bool) -> anyhow::Result<Journal> {
        if let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .truncate(false)
            .open(path)
            .map_err(|e| anyhow::anyhow!("cannot open the journal {}: {e}", path.display()))?;
        if fresh {
            file.set_len(0)
                .map_err(|e| anyhow::anyhow!("cannot empty {}: {e}", path.display()))?;
        }
        Ok(Journal {
            file,
            path: path.to_path_buf(),
        })
    }

    pub fn append(&mut self, entry: &Entry) -> anyhow::Result<()> {
        let text = format!("---\n{}...\n", serde_yaml::to_string(entry)?);
        self.file
            .write_all(text.as_bytes())
            .and_then(|()| self.file.sync_data())
            .map_err(|e| anyhow::anyhow!("cannot write the journal {}: {e}", self.path.display()))
    }

    /// Close the unit in flight (`begin` without `end`) with a crashed record: what a
    /// supervisor does when it finds the runner dead, before resuming it.
    pub fn close_in_flight(&mut self, state: &State, message: &str) -> anyhow::Result<bool> {
        let Some(b) = &state.in_flight else {
            return Ok(false);
        };
        self.append(&Entry::Record(Box::new(crashed_record(b, message))))?;
        self.append(&Entry::End {
            unit: b.unit.clone(),
            seconds: 0.0,
        })?;
        Ok(true)
    }
}

/// The record of a unit that crashed: variant and check "-" (the unit's variants all ran,
/// or none finished; the message says which variant was in flight when that is known).
pub fn crashed_record(b: &Begin, message: &str) -> Record {
    Record {
        suite: b.unit.suite,
        case: b.unit.case.clone(),
        dist: b.unit.dist.clone(),
        variant: "-".into(),
        check: "-".into(),
        dispatched: None,
        status: Status::Crashed,
        message: message.to_string(),
        metrics: Default::default(),
        snapshot: None,
        repro: b.repro.clone(),
    }
}

/// What a journal says: every record in the order written, which units are done (ended),
/// and the unit in flight when the last runner died, if any.
#[derive(Debug, Default)]
pub struct State {
    pub starts: Vec<Start>,
    pub records: Vec<Record>,
    /// Units with a `begin` (ended or in flight): a resume skips them all.
    pub begun: BTreeSet<Unit>,
    pub in_flight: Option<Begin>,
    /// Sum of the units' seconds.
    pub seconds: f64,
}

/// Read a journal; a missing file is an empty journal, a document cut by a kill is ignored.
pub fn read(path: &Path) -> anyhow::Result<State> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => anyhow::bail!("cannot read the journal {}: {e}", path.display()),
    };
    let mut st = State::default();
    // Documents start with a line "---" and end with a line "..." (a string that contains
    // such a line is written indented or quoted by the YAML writer, never at a line start).
    let mut doc = String::new();
    for line in text.split_inclusive('\n') {
        if line == "---\n" {
            // A new document: whatever came before without its "..." was cut by a kill.
            doc.clear();
        } else if line == "...\n" {
            let entry: Entry = serde_yaml::from_str(&doc)
                .map_err(|e| anyhow::anyhow!("{}: a damaged entry: {e}", path.display()))?;
            apply(&mut st, entry);
            doc.clear();
        } else {
            doc.push_str(line);
        }
    }
    Ok(st)
}

fn apply(st: &mut State, entry: Entry) {
    match entry {
        Entry::Start(s) => st.starts.push(s),
        Entry::Begin(b) => {
            st.begun.insert(b.unit.clone());
            st.in_flight = Some(b);
        }
        Entry::Record(r) => st.records.push(*r),
        Entry::End { unit, seconds } => {
            st.seconds += seconds;
            if st.in_flight.as_ref().is_some_and(|b| b.unit == unit) {
                st.in_flight = None;
            }
        }
    }
}

/// The journal that goes with a results file: `results.yaml` -> `results.journal.yaml`.
pub fn path_for(results: &Path) -> PathBuf {
    let stem = results
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("results");
    results.with_file_name(format!("{stem}.journal.yaml"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(case: &str) -> Unit {
        Unit {
            suite: Suite::Parity,
            case: case.into(),
            dist: "uniform".into(),
        }
    }

    #[test]
    fn a_cut_entry_is_ignored_and_the_unit_in_flight_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("j.yaml");
        let mut j = Journal::open(&p, true).unwrap();
        let b = Begin {
            unit: unit("a"),
            repro: "cargo xtask matrix --case a".into(),
        };
        j.append(&Entry::Begin(b.clone())).unwrap();
        let mut rec = crashed_record(&b, "line one\n...\nline three");
        rec.status = Status::Pass;
        j.append(&Entry::Record(Box::new(rec))).unwrap();
        j.append(&Entry::End {
            unit: unit("a"),
            seconds: 1.5,
        })
        .unwrap();
        j.append(&Entry::Begin(Begin {
            unit: unit("b"),
            repro: "r".into(),
        }))
        .unwrap();
        drop(j);
        // A kill in the middle of writing a record.
        let mut text = std::fs::read_to_string(&p).unwrap();
        text.push_str("---\nrecord:\n  suite: parity\n  case: b\n");
        std::fs::write(&p, text).unwrap();
        let st = read(&p).unwrap();
        assert_eq!(st.records.len(), 1);
        assert_eq!(st.records[0].message, "line one\n...\nline three");
        assert_eq!(st.in_flight.as_ref().unwrap().unit, unit("b"));
        assert_eq!(st.begun.len(), 2);
        assert_eq!(st.seconds, 1.5);

        let mut j = Journal::open(&p, false).unwrap();
        assert!(j.close_in_flight(&st, "killed by signal 9").unwrap());
        let st = read(&p).unwrap();
        assert!(st.in_flight.is_none());
        let last = st.records.last().unwrap();
        assert_eq!(
            (last.status, last.message.as_str()),
            (Status::Crashed, "killed by signal 9")
        );
    }
}
