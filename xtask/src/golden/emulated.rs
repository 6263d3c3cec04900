//! Snapshots of emulated results (`qsa run --emulate`, target status `emulated`).
//!
//! The rule, per snapshot file `golden/<target>/<name>.snap`:
//!
//! - **Made on the card** (its header has no `emulated:` mark): emulation never writes it,
//!   not even with `--bless`. The emulated lines are compared with the lines of it that both
//!   have (the emulator runs fewer cases and checks than the card); a difference fails,
//!   naming the file. Emulated lines the card never ran are reported, not compared.
//! - **Absent, or made by emulation**: written and compared like any snapshot (`.snap.new`
//!   pending review, `--bless` accepts), every write with the header
//!   `description: "emulated: ..."`, so a reviewer sees that no card made it.
//! - **A run on the card** compares with an emulated snapshot like any other: the same lines
//!   confirm it; different lines fail (the card and the emulator disagree: a GPU-only
//!   behaviour the emulator does not model, or an emulator bug), error bins one decade
//!   apart excepted (`makers.rs`). `--bless` on the card (a
//!   whole, unfiltered run) drops the mark: from then on it is a hardware snapshot that
//!   emulation only compares with (`Golden::check`).
//!
//! Error snapshots (`error__*`) off the card agree when every decade bin is the card's or
//! its neighbour: the rule for comparisons across makers, `makers.rs`, which also says why.

use super::makers::{self, Maker};
use super::{diff, read_snapshot, same_lines, subset, Change, Golden, Scope, SnapState};
use crate::snapshot_diff::{check_key, explain};
use anyhow::Result;
use std::collections::BTreeSet;

/// How the header of a snapshot made by emulation begins.
pub const MARK: &str = "emulated:";

/// Is this snapshot header the mark of emulation?
pub fn is_mark(description: Option<&str>) -> bool {
    description.is_some_and(|d| d.trim_start().starts_with(MARK))
}

/// The header of every snapshot emulation writes for `target`.
pub fn mark(target: &str) -> String {
    format!(
        "{MARK} made by the SIMT emulator (qsa run --emulate), not on a {target} card. \
         The first run on the card confirms it (same lines) or replaces it \
         (cargo xtask matrix --target {target} --bless on the card); emulation never \
         rewrites a snapshot made on the card"
    )
}

/// What comparing one emulated snapshot found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EmuSnap {
    /// Compared with a snapshot made on the card: every line both have agrees. `unseen`:
    /// emulated lines the card's snapshot does not have (not compared).
    AgreesWithCard { unseen: usize },
    /// Compared with a snapshot made on the card: these lines differ (never written).
    DiffersFromCard { change: Change, unseen: usize },
    /// No snapshot from the card: compared with (or written as) one made off the card
    /// (emulated, or by a PTX run for `check_ptx`), headed with that maker's mark.
    Emulated(SnapState),
}

impl Golden {
    /// Compare emulated `content` with `golden/<target>/<name>.snap` under the rule above.
    /// A snapshot made by a PTX run (`golden::ptx`) ran on silicon: to emulation it is one
    /// made on the card.
    pub fn check_emulated(
        &mut self,
        target: &str,
        name: &str,
        content: &str,
        scope: Scope,
    ) -> Result<EmuSnap> {
        let m = mark(target);
        self.check_off_card(target, name, content, scope, &m, |a| !a.is_emulated())
    }

    /// The comparison behind `check_emulated` and `check_ptx`: a snapshot that
    /// `made_on_card` is compared on the lines both have and never written; any other (or
    /// none) is compared and written like any snapshot, every write headed `mark`.
    pub(super) fn check_off_card(
        &mut self,
        target: &str,
        name: &str,
        content: &str,
        scope: Scope,
        mark: &str,
        made_on_card: impl Fn(&super::Accepted) -> bool,
    ) -> Result<EmuSnap> {
        let path = self.dir(target).join(format!("{name}.snap"));
        let old = read_snapshot(&path)?;
        match old {
            Some(card) if made_on_card(&card) => {
                self.referenced.insert(path);
                let content = super::normalize(content);
                let on_card: BTreeSet<&str> = card.content.lines().map(check_key).collect();
                let shared: Vec<&str> = content
                    .lines()
                    .filter(|l| on_card.contains(check_key(l)))
                    .collect();
                let unseen = content.lines().count() - shared.len();
                let shared = shared.join("\n");
                let golden = subset(&card.content, &shared);
                let (run, made) = (
                    Maker::of(Some(mark)),
                    Maker::of(card.description.as_deref()),
                );
                let across = makers::across(name, run, made);
                let shared = if across {
                    makers::settle(&golden, &shared)
                } else {
                    shared
                };
                Ok(if same_lines(&golden, &shared) {
                    EmuSnap::AgreesWithCard { unseen }
                } else {
                    let mut meaning = explain(target, name, &golden, &shared, true);
                    if across {
                        meaning.lines.insert(0, makers::still_differs(run, made));
                    }
                    EmuSnap::DiffersFromCard {
                        change: Change {
                            diff: diff(&golden, &shared),
                            meaning,
                        },
                        unseen,
                    }
                })
            }
            old => Ok(EmuSnap::Emulated(self.compare(
                target,
                name,
                content,
                scope,
                old,
                Some(mark),
            )?)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const CARD: &str = "a x ids: 1\nb x ids: 2\nc x ids: 3";

    fn header(dir: &Path, target: &str, name: &str) -> Option<String> {
        insta::Snapshot::from_file(&dir.join(format!("{target}/{name}.snap")))
            .unwrap()
            .metadata()
            .description()
            .map(String::from)
    }

    fn text(dir: &Path, target: &str, name: &str) -> String {
        std::fs::read_to_string(dir.join(format!("{target}/{name}.snap"))).unwrap()
    }

    /// A snapshot made on the card (sm_90's from the H200) is compared on the lines both
    /// have, and never rewritten from emulation, not even with --bless.
    #[test]
    fn emulation_never_overwrites_a_snapshot_made_on_the_card() {
        let dir = tempfile::tempdir().unwrap();
        let mut card = Golden::new(dir.path(), true, None);
        card.check("sm_90", "parity__x", CARD, Scope::Full).unwrap();
        let before = text(dir.path(), "sm_90", "parity__x");

        for bless in [false, true] {
            let mut g = Golden::new(dir.path(), bless, Some("why".into()));
            match g
                .check_emulated("sm_90", "parity__x", "b x ids: 9", Scope::Full)
                .unwrap()
            {
                EmuSnap::DiffersFromCard { change, unseen } => {
                    assert_eq!(change.diff, "-b x ids: 2\n+b x ids: 9\n");
                    assert_eq!(unseen, 0);
                }
                other => panic!(
                    "bless={bless}: emulation rewrote a snapshot made on the card, or did not compare with it: {other:?}"
                ),
            }
            assert_eq!(
                text(dir.path(), "sm_90", "parity__x"),
                before,
                "bless={bless}: emulation rewrote a snapshot made on the card"
            );
            assert!(!dir.path().join("sm_90/parity__x.snap.new").exists());
        }
        let mut g = Golden::new(dir.path(), false, None);
        assert_eq!(
            g.check_emulated("sm_90", "parity__x", "b x ids: 2\nd x ids: 4", Scope::Full)
                .unwrap(),
            EmuSnap::AgreesWithCard { unseen: 1 },
            "emulation runs fewer checks than the card: only the shared line is compared"
        );
    }

    /// Where the card made nothing, emulation writes snapshots marked as its own; the first
    /// whole run on the card with --bless drops the mark, and emulation then only compares.
    #[test]
    fn emulated_snapshots_are_marked_and_the_card_takes_them_over() {
        let dir = tempfile::tempdir().unwrap();
        let mut g = Golden::new(dir.path(), false, None);
        assert_eq!(
            g.check_emulated("gfx906", "parity__x", CARD, Scope::Full)
                .unwrap(),
            EmuSnap::Emulated(SnapState::New)
        );
        let pending =
            std::fs::read_to_string(dir.path().join("gfx906/parity__x.snap.new")).unwrap();
        assert!(
            pending.contains("description: 'emulated: made by the SIMT emulator"),
            "{pending}"
        );
        let mut g = Golden::new(dir.path(), true, None);
        g.check_emulated("gfx906", "parity__x", CARD, Scope::Full)
            .unwrap();
        assert!(is_mark(
            header(dir.path(), "gfx906", "parity__x").as_deref()
        ));
        // Emulation may rewrite its own snapshot (a changed kernel, blessed).
        let mut g = Golden::new(dir.path(), true, None);
        assert!(matches!(
            g.check_emulated(
                "gfx906",
                "parity__x",
                "a x ids: 7\nb x ids: 2\nc x ids: 3",
                Scope::Full
            )
            .unwrap(),
            EmuSnap::Emulated(SnapState::Blessed(_))
        ));
        assert!(is_mark(
            header(dir.path(), "gfx906", "parity__x").as_deref()
        ));
        // The card, without --bless: the same lines pass and the mark stays.
        let same = "a x ids: 7\nb x ids: 2\nc x ids: 3";
        let mut card = Golden::new(dir.path(), false, None);
        assert_eq!(
            card.check("gfx906", "parity__x", same, Scope::Full)
                .unwrap(),
            SnapState::Same
        );
        assert!(is_mark(
            header(dir.path(), "gfx906", "parity__x").as_deref()
        ));
        // A filtered bless on the card leaves the lines it did not run emulated.
        let mut card = Golden::new(dir.path(), true, None);
        card.check("gfx906", "parity__x", "a x ids: 7", Scope::Partial)
            .unwrap();
        assert!(is_mark(
            header(dir.path(), "gfx906", "parity__x").as_deref()
        ));
        // A whole run on the card with --bless confirms it: made on the card from now on.
        let mut card = Golden::new(dir.path(), true, None);
        card.check("gfx906", "parity__x", same, Scope::Full)
            .unwrap();
        assert_eq!(header(dir.path(), "gfx906", "parity__x"), None);
        let mut g = Golden::new(dir.path(), true, None);
        assert!(matches!(
            g.check_emulated("gfx906", "parity__x", "a x ids: 8", Scope::Full)
                .unwrap(),
            EmuSnap::DiffersFromCard { .. }
        ));
        assert!(text(dir.path(), "gfx906", "parity__x").contains("a x ids: 7"));
    }
}
