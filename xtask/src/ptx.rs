//! `cargo xtask matrix` for a target that ran through its PTX on a newer NVIDIA card
//! (`qsa::ptx`; results status `run_ptx`, shown as `run (PTX on <card>)`).
//!
//! Nothing chooses the mode here: the target's runner does, before any work, when the
//! target's own card is absent and a newer NVIDIA card is present (own card > PTX on a newer
//! card > emulated > built, not run). xtask compares what such a run produced with golden/
//! under the rule of `golden::ptx` (never over a snapshot made on the target's own card),
//! keeps no bench medians (the runner skipped bench, each check saying why), and reports
//! the status everywhere a run's status goes. `cargo xtask bless --from DIR` and
//! `cargo xtask matrix --from-results DIR --bless` take such results made elsewhere (the
//! H200) through the same function.

use crate::golden::emulated::EmuSnap;
use crate::golden::{Golden, Scope};
use crate::report::GateNote;
use crate::repro::Repro;
use crate::snapshots;
use anyhow::Result;
use qsa::matrix::{Matrix, Target};
use qsa::results::TargetResults;

/// Compare the snapshots of a PTX run with golden/ (rule: `golden::ptx`).
pub fn snapshots(
    golden: &mut Golden,
    m: &Matrix,
    t: &Target,
    r: &TargetResults,
    scope: Scope,
    repro: &Repro,
    notes: &mut Vec<GateNote>,
) -> Result<()> {
    let card = if r.device.arch.is_empty() {
        "newer NVIDIA"
    } else {
        r.device.arch.as_str()
    };
    for ((suite, case), text) in snapshots::contents(m, r) {
        let name = format!("{}__{case}", suite.name());
        let file = format!("golden/{}/{name}.snap", t.name);
        let again = repro.snapshot(&t.name, &case, suite);
        let note = |failed: bool, message: String| GateNote {
            kind: "snapshot".into(),
            name: name.clone(),
            failed,
            message,
            meaning: Vec::new(),
            diff: String::new(),
            repro: again.clone(),
        };
        let unseen_note = |unseen: usize| {
            note(
                false,
                format!(
                    "{unseen} line(s) of the PTX run on {card} are not in {file}, which was made on an {} card: not compared (the next run on that card adds them)",
                    t.name
                ),
            )
        };
        match golden.check_ptx(&t.name, card, &name, &text, scope)? {
            EmuSnap::AgreesWithCard { unseen } => {
                if unseen > 0 {
                    notes.push(unseen_note(unseen));
                }
            }
            EmuSnap::DiffersFromCard { change, unseen } => {
                let mut n = note(
                    true,
                    format!(
                        "{t}'s PTX run on {card} differs from {file}, which was made on an {t} card: the driver's compilation of {t}'s PTX for {card} and the {t} card disagree (a PTX JIT or architecture-dependent behaviour); a PTX run never rewrites a snapshot made on the {t} card, --bless included",
                        t = t.name
                    ),
                );
                n.meaning = change.meaning.lines;
                n.diff = change.diff;
                notes.push(n);
                if unseen > 0 {
                    notes.push(unseen_note(unseen));
                }
            }
            EmuSnap::Emulated(state) => {
                snapshots::push_note(state, &t.name, &name, &text, scope, again, notes)
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "ptx_tests.rs"]
mod tests;
