//! Golden snapshots in insta's file format, so `cargo insta review` / `accept` /
//! `pending-snapshots` work on them, written by us so that every write is atomic (write,
//! then rename) and a mismatch is a value, not a panic.
//!
//! `golden/<target>/<name>.snap` is the accepted snapshot. A full run that differs writes
//! `<name>.snap.new` beside it (pending review); `--bless` replaces the `.snap` instead.
//!
//! A filtered run (`--case`, `--dist`, `--variant`, `--suite`, `--shard`) produced only some
//! lines of a per-check snapshot: it compares those lines with the same lines of the golden
//! and never writes a `.snap.new` (accepting a partial one would delete the lines it did not
//! run). `--bless` on a filtered run updates exactly the lines it ran and keeps the others:
//! lines are independent records keyed by `<dist> <variant> <check>`, so the merge is
//! well defined, and fixing one check then blessing it is the workflow the repro line invites.
//!
//! An error that rose by a decade or more is never blessed silently: without `--reason` the
//! bless is refused for that snapshot (and no `.snap.new` is offered to `cargo insta accept`);
//! with it, the reason is written into the snapshot's `description:` header, where the pull
//! request's diff shows it.

use crate::snapshot_diff::{check_key, explain, is_per_check, Meaning};
use anyhow::{Context, Result};
use makers::Maker;
use qsa::results::write_atomic;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// How much of a snapshot this run produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Every line (an unfiltered run, or a snapshot that is always whole: dispatch,
    /// resources).
    Full,
    /// Only the lines of the checks a filtered run ran.
    Partial,
}

/// A changed snapshot: the raw diff and what it means.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Change {
    /// `-` old and `+` new lines.
    pub diff: String,
    pub meaning: Meaning,
}

/// What a snapshot comparison found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SnapState {
    Same,
    /// No accepted snapshot yet: `.snap.new` written on a full run.
    New,
    /// Differs from the accepted snapshot. On a full run `.snap.new` holds the new one,
    /// unless an error rose by a decade (that needs `--bless --reason`).
    Changed(Change),
    /// Written because of `--bless` (`reason` recorded when an error rose).
    Blessed(Change),
    /// `--bless` without `--reason` on an error that rose by a decade: not written.
    Refused(Change),
}

#[derive(Clone, Debug)]
pub struct SnapOutcome {
    pub target: String,
    pub name: String,
    pub state: SnapState,
    pub path: PathBuf,
    /// Was `.snap.new` written (there is something for `cargo insta review`)?
    pub pending_written: bool,
}

/// The snapshots of one run, over every target.
pub struct Golden {
    root: PathBuf,
    bless: bool,
    reason: Option<String>,
    referenced: BTreeSet<PathBuf>,
    pub outcomes: Vec<SnapOutcome>,
}

impl Golden {
    pub fn new(root: &Path, bless: bool, reason: Option<String>) -> Golden {
        Golden {
            root: root.to_owned(),
            bless,
            reason,
            referenced: BTreeSet::new(),
            outcomes: Vec::new(),
        }
    }

    pub fn dir(&self, target: &str) -> PathBuf {
        self.root.join(target)
    }

    /// Compare `content` (results made on the card, or pure tables) with
    /// `golden/<target>/<name>.snap`. A `--bless` here makes a snapshot that emulation made
    /// a hardware one (its `emulated:` mark is dropped: `emulated.rs`).
    pub fn check(
        &mut self,
        target: &str,
        name: &str,
        content: &str,
        scope: Scope,
    ) -> Result<SnapState> {
        let path = self.dir(target).join(format!("{name}.snap"));
        let old = read_snapshot(&path)?;
        self.compare(target, name, content, scope, old, None)
    }

    /// The accepted content of `golden/<target>/<name>.snap`, if there is one.
    pub fn accepted(&self, target: &str, name: &str) -> Result<Option<String>> {
        let path = self.dir(target).join(format!("{name}.snap"));
        Ok(read_snapshot(&path)?.map(|a| a.content))
    }

    /// The comparison behind `check` and `check_emulated`: `mark` is the header every write
    /// carries for results made by emulation (`None`: made on the card).
    fn compare(
        &mut self,
        target: &str,
        name: &str,
        content: &str,
        scope: Scope,
        old: Option<Accepted>,
        mark: Option<&str>,
    ) -> Result<SnapState> {
        let path = self.dir(target).join(format!("{name}.snap"));
        let pending = path.with_extension("snap.new");
        self.referenced.insert(path.clone());
        let content = normalize(content);
        // Error bins one decade from a golden made by another maker (the emulator against
        // silicon) take the golden's text: the rule and its measurements are `makers.rs`.
        let run = Maker::of(mark);
        let across = old
            .as_ref()
            .map(|o| Maker::of(o.description.as_deref()))
            .filter(|&made| makers::across(name, run, made));
        let content = match (&old, across) {
            (Some(o), Some(_)) => makers::settle(&o.content, &content),
            _ => content,
        };
        let partial = scope == Scope::Partial && is_per_check(name);
        // The header a rewrite keeps: emulation marks what it writes; the card drops the
        // mark of an emulated snapshot it confirms or replaces whole (a filtered run on the
        // card leaves the lines it did not run emulated, so the mark stays).
        let kept = |old: &Accepted| match mark {
            // A filtered run leaves the lines it did not run as their maker made them: the
            // header stays (a PTX run's few lines do not make an emulated file silicon's).
            Some(_) if partial && old.is_off_card() => old.description.clone(),
            Some(m) => Some(m.to_string()),
            None if partial => old.description.clone(),
            None => old.description.clone().filter(|d| !off_card_mark(Some(d))),
        };
        let mut pending_written = false;
        let state = match &old {
            None if self.bless => {
                write_atomic(&path, render(name, &content, mark).as_bytes())?;
                if !partial {
                    remove_if_exists(&pending)?;
                }
                SnapState::Blessed(Change::default())
            }
            None => {
                if !partial {
                    write_atomic(&pending, render(name, &content, mark).as_bytes())?;
                    pending_written = true;
                }
                SnapState::New
            }
            Some(old) => {
                // What this run is compared against: on a filtered run, the golden's lines
                // for the checks it ran.
                let compared = if partial {
                    subset(&old.content, &content)
                } else {
                    old.content.clone()
                };
                // The same lines under a better maker: the card confirming what emulation or
                // a PTX run wrote (from now on a hardware snapshot), a PTX run confirming
                // what emulation wrote (from now on made on silicon).
                let relabels = !partial && kept(old) != old.description;
                if same_lines(&compared, &content) && self.bless && relabels {
                    write_atomic(
                        &path,
                        render(name, &old.content, kept(old).as_deref()).as_bytes(),
                    )?;
                    SnapState::Blessed(Change::default())
                } else if same_lines(&compared, &content) {
                    if !partial {
                        remove_if_exists(&pending)?;
                    }
                    SnapState::Same
                } else {
                    let mut meaning = explain(target, name, &compared, &content, partial);
                    if let Some(made) = across {
                        meaning.lines.insert(0, makers::still_differs(run, made));
                    }
                    let change = Change {
                        diff: diff(&compared, &content),
                        meaning,
                    };
                    let rose = !change.meaning.rises.is_empty();
                    if self.bless && rose && self.reason.is_none() {
                        // Nothing for `cargo insta accept` to take either.
                        remove_if_exists(&pending)?;
                        SnapState::Refused(change)
                    } else if self.bless {
                        let text = if partial {
                            merge(&old.content, &content)
                        } else {
                            content.clone()
                        };
                        let description = match (&self.reason, rose) {
                            (Some(r), true) => Some(format!(
                                "blessed on {} with a reason: {r} (for: {})",
                                qsa::results::utc_now(),
                                change.meaning.rises.join("; ")
                            )),
                            _ => kept(old),
                        };
                        write_atomic(
                            &path,
                            render(name, &text, description.as_deref()).as_bytes(),
                        )?;
                        if !partial {
                            remove_if_exists(&pending)?;
                        }
                        SnapState::Blessed(change)
                    } else {
                        if !partial && !rose {
                            write_atomic(
                                &pending,
                                render(name, &content, kept(old).as_deref()).as_bytes(),
                            )?;
                            pending_written = true;
                        } else if !partial {
                            remove_if_exists(&pending)?;
                        }
                        SnapState::Changed(change)
                    }
                }
            }
        };
        self.outcomes.push(SnapOutcome {
            target: target.into(),
            name: name.into(),
            state: state.clone(),
            path,
            pending_written,
        });
        Ok(state)
    }

    /// `.snap` files of `target` that this run did not produce (meaningful after a full
    /// run of that target only: the caller checks). With `--bless` they are deleted.
    pub fn unreferenced(&self, target: &str) -> Result<Vec<PathBuf>> {
        let out: Vec<PathBuf> = snap_files(&self.dir(target))?
            .into_iter()
            .filter(|p| !self.referenced.contains(p))
            .collect();
        if self.bless {
            for p in &out {
                std::fs::remove_file(p)
                    .with_context(|| format!("cannot remove {}", p.display()))?;
            }
        }
        Ok(out)
    }

    /// `.snap` files of `target` that no case could produce: for a filtered run, which
    /// cannot tell an unproduced snapshot from one it did not run. `expected` holds the
    /// snapshot names that the matrix's cases for this target produce.
    pub fn unexpected(&self, target: &str, expected: &BTreeSet<String>) -> Result<Vec<PathBuf>> {
        Ok(snap_files(&self.dir(target))?
            .into_iter()
            .filter(|p| {
                let stem = p.file_stem().unwrap_or_default().to_string_lossy();
                is_per_check(&stem) && !expected.contains(stem.as_ref())
            })
            .collect())
    }

    /// Snapshots that fail the run: new, changed, or refused.
    pub fn failures(&self) -> impl Iterator<Item = &SnapOutcome> {
        self.outcomes.iter().filter(|o| {
            matches!(
                o.state,
                SnapState::New | SnapState::Changed(_) | SnapState::Refused(_)
            )
        })
    }
}

fn snap_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries {
            let p = e?.path();
            if p.extension().is_some_and(|x| x == "snap") {
                out.push(p);
            }
        }
    }
    out.sort();
    Ok(out)
}

fn normalize(s: &str) -> String {
    s.replace("\r\n", "\n").trim_end().to_string()
}

/// Same lines, in any order: a filtered `--bless` appends checks it added, so a full run
/// may produce the same lines in another order.
fn same_lines(a: &str, b: &str) -> bool {
    fn sorted(s: &str) -> Vec<&str> {
        let mut v: Vec<&str> = s.lines().collect();
        v.sort_unstable();
        v
    }
    sorted(a) == sorted(b)
}

/// The lines of `golden` whose check a filtered run produced in `ran`.
fn subset(golden: &str, ran: &str) -> String {
    let keys: BTreeSet<&str> = ran.lines().map(check_key).collect();
    golden
        .lines()
        .filter(|l| keys.contains(check_key(l)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `golden` with the lines of the checks in `ran` replaced (new checks appended).
fn merge(golden: &str, ran: &str) -> String {
    let mut lines: Vec<&str> = golden.lines().collect();
    for l in ran.lines() {
        match lines.iter().position(|g| check_key(g) == check_key(l)) {
            Some(i) => lines[i] = l,
            None => lines.push(l),
        }
    }
    lines.join("\n")
}

/// insta's `.snap` layout: a YAML header between `---` lines, then the contents.
fn render(name: &str, content: &str, description: Option<&str>) -> String {
    let description = description.map_or(String::new(), |d| {
        // A YAML scalar, quoted as YAML needs (a reason may hold `: ` or `#`).
        let quoted = serde_yaml::to_string(d).unwrap_or_else(|_| format!("{d:?}"));
        format!("description: {}\n", quoted.trim_end())
    });
    format!("---\nsource: xtask/src/golden.rs\n{description}expression: {name}\n---\n{content}\n")
}

struct Accepted {
    content: String,
    description: Option<String>,
}

impl Accepted {
    /// Made by emulation (its header carries the `emulated:` mark), not on the card.
    fn is_emulated(&self) -> bool {
        emulated::is_mark(self.description.as_deref())
    }
    /// Made by emulation or by a PTX run on a newer card: not on the target's own card.
    fn is_off_card(&self) -> bool {
        off_card_mark(self.description.as_deref())
    }
}

/// Read an accepted snapshot with insta's own parser (so what we write is what insta reads).
fn read_snapshot(path: &Path) -> Result<Option<Accepted>> {
    if !path.exists() {
        return Ok(None);
    }
    let snap = insta::Snapshot::from_file(path)
        .map_err(|e| anyhow::anyhow!("{}: not a readable insta snapshot: {e}", path.display()))?;
    let text = snap.as_text().map(|t| t.to_string()).unwrap_or_default();
    Ok(Some(Accepted {
        content: normalize(&text),
        description: snap.metadata().description().map(String::from),
    }))
}

fn remove_if_exists(p: &Path) -> Result<()> {
    match std::fs::remove_file(p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(anyhow::anyhow!("cannot remove {}: {e}", p.display())),
    }
}

/// A line diff: lines only in the old snapshot (`-`) and only in the new one (`+`), in
/// order. Snapshot lines are independent records, so this is what a reviewer needs.
pub fn diff(old: &str, new: &str) -> String {
    let old_lines: Vec<&str> = old.lines().collect();
    let new_lines: Vec<&str> = new.lines().collect();
    let mut out = String::new();
    for l in &old_lines {
        if !new_lines.contains(l) {
            out.push_str(&format!("-{l}\n"));
        }
    }
    for l in &new_lines {
        if !old_lines.contains(l) {
            out.push_str(&format!("+{l}\n"));
        }
    }
    out
}

pub mod emulated;
pub mod makers;
pub mod ptx;

/// `bless --from`: a pending snapshot made off the card (emulated, or by a PTX run) may not
/// replace `dest` where the target's own card made it; the error names both files.
pub fn refuse_off_card_over_card(pending: &Path, dest: &Path) -> Result<()> {
    let Some(new) = read_snapshot(pending)? else {
        return Ok(());
    };
    match read_snapshot(dest)? {
        Some(old) if new.is_off_card() && !old.is_off_card() => anyhow::bail!(
            "{} was made off the card ({}) and would replace {}, which was made on the card: a snapshot made on the card is only replaced from the card (cargo xtask matrix --target <target> --bless there)",
            pending.display(),
            new.description.as_deref().unwrap_or("").split(':').next().unwrap_or(""),
            dest.display()
        ),
        _ => Ok(()),
    }
}

/// Does a snapshot header say it was made off the target's own card (the emulator's or a
/// PTX run's mark)? The target's own card drops either mark when it confirms the lines.
fn off_card_mark(description: Option<&str>) -> bool {
    emulated::is_mark(description) || ptx::is_mark(description)
}
#[cfg(test)]
mod tests;
