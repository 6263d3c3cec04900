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
    let off = snapshots::OffCard {
        check: &mut |g: &mut Golden, name: &str, text: &str, scope| {
            g.check_ptx(&t.name, card, name, text, scope)
        },
        repro: &|case: &str, suite| repro.snapshot(&t.name, case, suite),
        unseen: &|unseen, file| {
            format!(
                "{unseen} line(s) of the PTX run on {card} are not in {file}, which was made on an {} card: not compared (the next run on that card adds them)",
                t.name
            )
        },
        differs: &|file| {
            format!(
                "{t}'s PTX run on {card} differs from {file}, which was made on an {t} card: the driver's compilation of {t}'s PTX for {card} and the {t} card disagree (a PTX JIT or architecture-dependent behaviour); a PTX run never rewrites a snapshot made on the {t} card, --bless included",
                t = t.name
            )
        },
    };
    snapshots::compare_off_card(golden, m, t, r, scope, notes, off)
}

#[cfg(test)]
#[path = "ptx_tests.rs"]
mod tests;
