//! The golden side of one target's run: per-check snapshots of its records, the notes a
//! reviewer reads for each changed one (what it means, the diff, the command to rerun it),
//! snapshots no case produces, and the benchmark medians.

use crate::golden::emulated::EmuSnap;
use crate::golden::{Golden, Scope, SnapState};
use crate::report::GateNote;
use crate::repro::Repro;
use anyhow::Result;
use qsa::matrix::{Matrix, Suite, Target};
use qsa::results::{write_atomic, Status, TargetResults};
use qsa::suites::bench::{golden_entry, key as bench_key, BenchGolden};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Compare one snapshot; a failing or informative note when it is not simply the same.
pub fn check(
    golden: &mut Golden,
    target: &str,
    name: &str,
    content: &str,
    scope: Scope,
    repro: String,
    notes: &mut Vec<GateNote>,
) -> Result<()> {
    let state = golden.check(target, name, content, scope)?;
    push_note(state, target, name, content, scope, repro, notes);
    Ok(())
}

/// The note a reviewer reads for a snapshot comparison that is not simply the same (none
/// when it is).
pub fn push_note(
    state: SnapState,
    target: &str,
    name: &str,
    content: &str,
    scope: Scope,
    repro: String,
    notes: &mut Vec<GateNote>,
) {
    let file = format!("golden/{target}/{name}.snap");
    let partial = scope == Scope::Partial;
    let (failed, message, change) = match state {
        SnapState::Same => return,
        SnapState::Blessed(c) if c.meaning.rises.is_empty() => return,
        SnapState::Blessed(c) => (
            false,
            format!("blessed with --reason (recorded in {file}): {}", c.meaning.rises.join("; ")),
            c,
        ),
        SnapState::New if partial => (
            true,
            format!("no accepted snapshot {file}: a filtered run writes no pending snapshot; run the case unfiltered to review it, or accept these lines with --bless"),
            Default::default(),
        ),
        SnapState::New => (
            true,
            format!("new snapshot {file}.new: review it (cargo insta review) or accept with --bless"),
            Default::default(),
        ),
        SnapState::Refused(c) => (
            true,
            format!("not blessed: an error rose by a decade or more, which --bless accepts only with a reason: add --reason \"why this is expected\" (recorded in {file})"),
            c,
        ),
        SnapState::Changed(c) if !c.meaning.rises.is_empty() => (
            true,
            format!("differs from {file}, and an error rose by a decade or more: a failed check unless accepted with --bless --reason \"why\" (no .snap.new is written for `cargo insta accept`)"),
            c,
        ),
        SnapState::Changed(c) if partial => (
            true,
            format!("differs from the same lines of {file} (a filtered run compares only the checks it ran and writes no .snap.new): fix it, or accept these lines with --bless"),
            c,
        ),
        SnapState::Changed(c) => (
            true,
            format!("differs from {file} (pending: .snap.new): review it (cargo insta review) or accept with --bless"),
            c,
        ),
    };
    let diff = if change.diff.is_empty() {
        content.lines().map(|l| format!("+{l}\n")).collect()
    } else {
        change.diff
    };
    notes.push(GateNote {
        kind: "snapshot".into(),
        name: name.into(),
        failed,
        message,
        meaning: change.meaning.lines,
        diff,
        repro,
    });
}

/// One snapshot per (suite, case): a line per (distribution, variant, check).
pub fn records(
    golden: &mut Golden,
    m: &Matrix,
    t: &Target,
    r: &TargetResults,
    scope: Scope,
    repro: &Repro,
    notes: &mut Vec<GateNote>,
) -> Result<()> {
    let settled = settled(golden, t, r)?;
    for ((suite, case), text) in contents(m, &settled) {
        check(
            golden,
            &t.name,
            &format!("{}__{case}", suite.name()),
            &text,
            scope,
            repro.snapshot(&t.name, &case, suite),
            notes,
        )?;
    }
    Ok(())
}

/// `r` with the error decades it moved across a boundary by noise set back to the golden's
/// text (`error_noise.rs`): for every run on silicon, the card's own or a PTX run.
fn settled(golden: &Golden, t: &Target, r: &TargetResults) -> Result<TargetResults> {
    let mut settled = r.clone();
    let mut accepted: BTreeMap<String, Option<String>> = BTreeMap::new();
    for rec in settled
        .records
        .iter_mut()
        .filter(|x| x.suite == Suite::Error)
    {
        // Each case's golden snapshot is read once, not once per record.
        if !accepted.contains_key(&rec.case) {
            let name = format!("{}__{}", Suite::Error.name(), rec.case);
            accepted.insert(rec.case.clone(), golden.accepted(&t.name, &name)?);
        }
        rec.snapshot = crate::error_noise::settle(rec, accepted[&rec.case].as_deref());
    }
    Ok(settled)
}

/// The snapshot contents of a run's records, per (suite, case).
pub fn contents(m: &Matrix, r: &TargetResults) -> BTreeMap<(Suite, String), String> {
    let mut by: BTreeMap<(Suite, String), String> = BTreeMap::new();
    // A (suite, case) with a crashed check has lost lines: no snapshot to compare or bless
    // (the crashed record already fails the run).
    let crashed: BTreeSet<(Suite, &str)> = r
        .records
        .iter()
        .filter(|x| x.status == Status::Crashed)
        .map(|x| (x.suite, x.case.as_str()))
        .collect();
    for rec in r.records.iter().filter(|x| x.snapshot.is_some()) {
        if crashed.contains(&(rec.suite, rec.case.as_str())) {
            continue;
        }
        // Cases added with --cases are ad hoc: gated, not snapshotted.
        if m.added_cases.contains(&rec.case) {
            continue;
        }
        by.entry((rec.suite, rec.case.clone()))
            .or_default()
            .push_str(&format!(
                "{} {} {}: {}\n",
                rec.dist,
                rec.variant,
                rec.check,
                rec.snapshot.as_deref().unwrap_or("")
            ));
    }
    by
}

/// Snapshots of `t` for cases that no longer exist. A full run knows exactly which it
/// produced: the others fail it (or are deleted with --bless). A filtered run cannot tell
/// a snapshot it did not run from a stray one, so it warns about those no case of the
/// matrix could produce.
pub fn strays(
    golden: &Golden,
    m: &Matrix,
    t: &Target,
    full: bool,
    bless: bool,
    notes: &mut Vec<GateNote>,
) -> Result<()> {
    let (found, failed) = if full {
        (golden.unreferenced(&t.name)?, !bless)
    } else {
        let expected: BTreeSet<String> = m
            .cases
            .iter()
            .filter(|c| c.runs_on(t) && !m.added_cases.contains(&c.name))
            .flat_map(|c| {
                c.suites
                    .iter()
                    .map(move |s| format!("{}__{}", s.name(), c.name))
            })
            .collect();
        (golden.unexpected(&t.name, &expected)?, false)
    };
    for p in found {
        let file = p
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        let message = match (full, bless) {
            (true, true) => format!("{} removed: no case produces it", p.display()),
            (true, false) => format!(
                "{} is not produced by any case of {} (a case renamed or removed?): delete it, or run the full matrix with --bless",
                p.display(),
                m.path.display()
            ),
            (false, _) => format!(
                "{} belongs to no case of {} for {}: the next full run fails on it; delete it (a filtered run does not)",
                p.display(),
                m.path.display(),
                t.name
            ),
        };
        notes.push(GateNote {
            kind: "stray snapshot".into(),
            name: file,
            failed,
            message,
            meaning: Vec::new(),
            diff: String::new(),
            repro: String::new(),
        });
    }
    Ok(())
}

/// This run's medians as the target's benchmark baseline (`bench.yaml`, with --bless) or a
/// proposal for one (`bench.yaml.new`). A filtered run measured only some entries: with
/// --bless they replace those entries of `bench.yaml`, and it proposes no partial
/// `bench.yaml.new`.
pub fn bench(
    golden_root: &Path,
    t: &Target,
    r: &TargetResults,
    bless: bool,
    full: bool,
) -> Result<()> {
    let accepted = golden_root.join(&t.name).join("bench.yaml");
    let file = match (bless, full) {
        (true, _) => accepted.clone(),
        (false, true) => golden_root.join(&t.name).join("bench.yaml.new"),
        (false, false) => return Ok(()),
    };
    let driver = if r.device.driver.is_empty() {
        String::new()
    } else {
        format!(" ({})", r.device.driver)
    };
    let mut g = BenchGolden {
        measured_on: format!("{}{driver}, runner started {}", r.device.name, r.started),
        entries: BTreeMap::new(),
    };
    if !full && accepted.exists() {
        let text = std::fs::read_to_string(&accepted)?;
        let old: BenchGolden = serde_yaml::from_str(&text)
            .map_err(|e| anyhow::anyhow!("{}: {e}", accepted.display()))?;
        g.entries = old.entries;
        g.measured_on = format!("{}; some entries: {}", old.measured_on, g.measured_on);
    }
    for rec in r
        .records
        .iter()
        .filter(|x| x.suite == Suite::Bench && x.status == Status::Pass)
    {
        g.entries.insert(
            bench_key(&rec.case, &rec.variant, &rec.check),
            golden_entry(&rec.metrics),
        );
    }
    let text = format!(
        "# Golden benchmark medians for {} (seconds), each with its 97.5% interval (median_lo, median_hi:\n# order statistics, src/suites/stats.rs). Written by `cargo xtask matrix --bless`.\n{}",
        t.name,
        serde_yaml::to_string(&g)?
    );
    write_atomic(&file, text.as_bytes())
}

/// How a run made without the target's own card (emulated, or its PTX on a newer card) is
/// compared with golden/ and how its notes speak of it; the comparison itself is the same.
pub struct OffCard<'a> {
    /// The golden rule for this kind of run (`Golden::check_emulated` / `check_ptx`).
    pub check: &'a mut dyn FnMut(&mut Golden, &str, &str, Scope) -> Result<EmuSnap>,
    /// The command that reruns one case's snapshot.
    pub repro: &'a dyn Fn(&str, Suite) -> String,
    /// The note for `n` lines a snapshot made on the card lacks (given its file).
    pub unseen: &'a dyn Fn(usize, &str) -> String,
    /// The failure when the run differs from a snapshot made on the card (given its file).
    pub differs: &'a dyn Fn(&str) -> String,
}

/// Compare the snapshots of an off-card run with golden/ under `off`'s rule: lines a card
/// made are never rewritten (a difference fails, lines it lacks are noted), snapshots no
/// card made are treated as the run's own.
pub fn compare_off_card(
    golden: &mut Golden,
    m: &Matrix,
    t: &Target,
    r: &TargetResults,
    scope: Scope,
    notes: &mut Vec<GateNote>,
    off: OffCard,
) -> Result<()> {
    // A PTX run's float atomics move a value across a decade boundary as the card's do.
    let r = &settled(golden, t, r)?;
    for ((suite, case), text) in contents(m, r) {
        let name = format!("{}__{case}", suite.name());
        let file = format!("golden/{}/{name}.snap", t.name);
        let again = (off.repro)(&case, suite);
        let note = |failed: bool, message: String| GateNote {
            kind: "snapshot".into(),
            name: name.clone(),
            failed,
            message,
            meaning: Vec::new(),
            diff: String::new(),
            repro: again.clone(),
        };
        match (off.check)(golden, &name, &text, scope)? {
            EmuSnap::AgreesWithCard { unseen } => {
                if unseen > 0 {
                    notes.push(note(false, (off.unseen)(unseen, &file)));
                }
            }
            EmuSnap::DiffersFromCard { change, unseen } => {
                let mut n = note(true, (off.differs)(&file));
                n.meaning = change.meaning.lines;
                n.diff = change.diff;
                notes.push(n);
                if unseen > 0 {
                    notes.push(note(false, (off.unseen)(unseen, &file)));
                }
            }
            EmuSnap::Emulated(state) => {
                push_note(state, &t.name, &name, &text, scope, again, notes)
            }
        }
    }
    Ok(())
}
