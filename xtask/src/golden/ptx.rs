//! Snapshots of runs through an older target's PTX on a newer card (`qsa::ptx`, target
//! status `run (PTX on <card>)`).
//!
//! Such a run executed on silicon, but not on the target's card: another SM generation ran
//! the driver's compilation of the target's PTX. Its snapshots rank between the card's and
//! the emulator's (the order of preference: own card > PTX on a newer card > emulated):
//!
//! - **Made on the target's own card** (no mark in its header): a PTX run compares the lines
//!   both have and never writes it, `--bless` included.
//! - **Absent, emulated, or made by a PTX run**: compared and written like any snapshot,
//!   every write headed `description: "ptx: ..."`. The same lines as an emulated snapshot,
//!   with `--bless`, relabel it `ptx:` (confirmed on silicon).
//! - **Error snapshots** made by another maker (emulated, or the target's own card) agree
//!   with the run where decade bins lie one decade apart (`makers.rs`: the card rounds
//!   differently from the emulator's IEEE f32); two decades or more fail.
//! - **Emulation** treats a `ptx:` snapshot as made on a card: compared, never rewritten.
//! - **The target's own card** compares with it like any snapshot, and a whole `--bless`
//!   run on that card drops the mark.

use super::emulated::EmuSnap;
use super::{Golden, Scope};
use anyhow::Result;

/// How the header of a snapshot made by a PTX run begins.
pub const MARK: &str = "ptx:";

/// Is this snapshot header the mark of a PTX run?
pub fn is_mark(description: Option<&str>) -> bool {
    description.is_some_and(|d| d.trim_start().starts_with(MARK))
}

/// The header of every snapshot a PTX run on `card` writes for `target`.
pub fn mark(target: &str, card: &str) -> String {
    format!(
        "{MARK} made on an {card} card through {target}'s PTX (qsa run --target {target} on a \
         newer card: {target}'s dispatch, caps and shared limit), not on an {target} card. The \
         first run on an {target} card confirms it (same lines) or replaces it (cargo xtask \
         matrix --target {target} --bless on that card); a PTX run never rewrites a snapshot \
         made on the {target} card"
    )
}

impl Golden {
    /// Compare the `content` of a PTX run on `card` with `golden/<target>/<name>.snap`
    /// under the rule above.
    pub fn check_ptx(
        &mut self,
        target: &str,
        card: &str,
        name: &str,
        content: &str,
        scope: Scope,
    ) -> Result<EmuSnap> {
        let m = mark(target, card);
        self.check_off_card(target, name, content, scope, &m, |a| !a.is_off_card())
    }
}

#[cfg(test)]
mod tests {
    use super::super::emulated;
    use super::super::SnapState;
    use super::*;
    use std::path::Path;

    const LINES: &str = "a x ids: 1\nb x ids: 2\nc x ids: 3";

    fn header(dir: &Path, name: &str) -> Option<String> {
        insta::Snapshot::from_file(&dir.join(format!("sm_75/{name}.snap")))
            .unwrap()
            .metadata()
            .description()
            .map(String::from)
    }

    fn text(dir: &Path, name: &str) -> String {
        std::fs::read_to_string(dir.join(format!("sm_75/{name}.snap"))).unwrap()
    }

    /// A snapshot made on an RTX 2080 Ti is compared by a PTX run on the H200, never
    /// rewritten by it, --bless included.
    #[test]
    fn a_ptx_run_never_overwrites_a_snapshot_made_on_the_targets_card() {
        let dir = tempfile::tempdir().unwrap();
        let mut card = Golden::new(dir.path(), true, None);
        card.check("sm_75", "parity__x", LINES, Scope::Full)
            .unwrap();
        let before = text(dir.path(), "parity__x");
        for bless in [false, true] {
            let mut g = Golden::new(dir.path(), bless, Some("why".into()));
            match g
                .check_ptx("sm_75", "sm_90", "parity__x", "b x ids: 9", Scope::Full)
                .unwrap()
            {
                EmuSnap::DiffersFromCard { change, .. } => {
                    assert_eq!(change.diff, "-b x ids: 2\n+b x ids: 9\n")
                }
                other => panic!(
                    "bless={bless}: a PTX run rewrote a snapshot made on the target's card, or did not compare with it: {other:?}"
                ),
            }
            assert_eq!(
                text(dir.path(), "parity__x"),
                before,
                "bless={bless}: a PTX run rewrote a snapshot made on the target's card"
            );
            assert!(!dir.path().join("sm_75/parity__x.snap.new").exists());
        }
        let mut g = Golden::new(dir.path(), false, None);
        assert_eq!(
            g.check_ptx("sm_75", "sm_90", "parity__x", LINES, Scope::Full)
                .unwrap(),
            EmuSnap::AgreesWithCard { unseen: 0 }
        );
    }

    /// Where the card made nothing, a PTX run writes snapshots marked as its own; it
    /// relabels an emulated snapshot it confirms; emulation never rewrites what it wrote;
    /// the target's own card takes it over with a whole --bless.
    #[test]
    fn ptx_snapshots_are_marked_outrank_emulation_and_yield_to_the_card() {
        let dir = tempfile::tempdir().unwrap();
        // Emulation first (sm_75's golden today), then the PTX run confirms it.
        let mut emu = Golden::new(dir.path(), true, None);
        emu.check_emulated("sm_75", "parity__x", LINES, Scope::Full)
            .unwrap();
        assert!(emulated::is_mark(
            header(dir.path(), "parity__x").as_deref()
        ));
        let mut g = Golden::new(dir.path(), false, None);
        assert_eq!(
            g.check_ptx("sm_75", "sm_90", "parity__x", LINES, Scope::Full)
                .unwrap(),
            EmuSnap::Emulated(SnapState::Same)
        );
        let mut g = Golden::new(dir.path(), true, None);
        g.check_ptx("sm_75", "sm_90", "parity__x", LINES, Scope::Full)
            .unwrap();
        let h = header(dir.path(), "parity__x");
        assert!(
            is_mark(h.as_deref()) && h.as_deref().unwrap().contains("made on an sm_90 card"),
            "a PTX run confirming an emulated snapshot must relabel it ptx: {h:?}"
        );
        // A new snapshot from a PTX run is pending with the mark.
        let mut g = Golden::new(dir.path(), false, None);
        assert_eq!(
            g.check_ptx("sm_75", "sm_90", "error__y", "a x err: 1", Scope::Full)
                .unwrap(),
            EmuSnap::Emulated(SnapState::New)
        );
        let pending = std::fs::read_to_string(dir.path().join("sm_75/error__y.snap.new")).unwrap();
        assert!(
            pending.contains("description: 'ptx: made on an sm_90 card"),
            "{pending}"
        );
        // Emulation compares with the PTX snapshot and never rewrites it.
        let before = text(dir.path(), "parity__x");
        let mut emu = Golden::new(dir.path(), true, None);
        assert!(matches!(
            emu.check_emulated("sm_75", "parity__x", "a x ids: 5", Scope::Full)
                .unwrap(),
            EmuSnap::DiffersFromCard { .. }
        ));
        assert_eq!(
            text(dir.path(), "parity__x"),
            before,
            "emulation rewrote a snapshot made by a PTX run"
        );
        // The target's own card, whole and blessed: the mark goes.
        let mut card = Golden::new(dir.path(), true, None);
        card.check("sm_75", "parity__x", LINES, Scope::Full)
            .unwrap();
        assert_eq!(header(dir.path(), "parity__x"), None);
    }

    /// sm_86's error goldens are the emulator's; its PTX on the H200 rounds differently
    /// (session 9: bins one decade apart both ways). One decade agrees, two fail, saying why.
    #[test]
    fn a_ptx_run_agrees_with_an_emulated_error_golden_within_one_decade() {
        let dir = tempfile::tempdir().unwrap();
        let emu_lines = "random_ids auto fwd: o rel_max [1e-7,1e-6) rel_rmse [1e-8,1e-7)\nrandom_ids auto bwd: dk rel_max [1e-7,1e-6)";
        let mut emu = Golden::new(dir.path(), true, None);
        emu.check_emulated("sm_75", "error__x", emu_lines, Scope::Full)
            .unwrap();
        let one = "random_ids auto fwd: o rel_max [1e-6,1e-5) rel_rmse [1e-9,1e-8)\nrandom_ids auto bwd: dk rel_max [1e-7,1e-6)";
        let mut g = Golden::new(dir.path(), false, None);
        assert_eq!(
            g.check_ptx("sm_75", "sm_90", "error__x", one, Scope::Full)
                .unwrap(),
            EmuSnap::Emulated(SnapState::Same),
            "a PTX run one decade from the emulator's error golden must agree (golden/makers.rs)"
        );
        assert!(!dir.path().join("sm_75/error__x.snap.new").exists());
        let two = one.replace("dk rel_max [1e-7,1e-6)", "dk rel_max [1e-5,1e-4)");
        let mut g = Golden::new(dir.path(), false, None);
        match g
            .check_ptx("sm_75", "sm_90", "error__x", &two, Scope::Full)
            .unwrap()
        {
            EmuSnap::Emulated(SnapState::Changed(c)) => {
                assert!(
                    c.meaning.lines[0].contains("moved two decades or more")
                        && c.meaning.lines[0].contains("a PTX run on a newer card")
                        && c.meaning.lines[0].contains("the SIMT emulator"),
                    "{:?}",
                    c.meaning.lines
                );
                assert_eq!(
                    c.meaning.rises,
                    vec!["error of x/random_ids/auto/bwd (dk rel_max) rose 100x (1e-7 -> 1e-5)"]
                );
                // Only the line that moved two decades is in the diff.
                assert_eq!(
                    c.diff,
                    "-random_ids auto bwd: dk rel_max [1e-7,1e-6)\n+random_ids auto bwd: dk rel_max [1e-5,1e-4)\n"
                );
            }
            other => {
                panic!("a PTX run two decades from the emulator's error golden passed: {other:?}")
            }
        }
    }

    /// A filtered PTX run blessing a few lines of an emulated snapshot leaves it marked
    /// emulated: the other lines were never run on silicon.
    #[test]
    fn a_filtered_ptx_bless_keeps_the_emulated_mark() {
        let dir = tempfile::tempdir().unwrap();
        let mut emu = Golden::new(dir.path(), true, None);
        emu.check_emulated("sm_75", "parity__x", LINES, Scope::Full)
            .unwrap();
        let mut g = Golden::new(dir.path(), true, None);
        g.check_ptx("sm_75", "sm_90", "parity__x", "a x ids: 7", Scope::Partial)
            .unwrap();
        let t = text(dir.path(), "parity__x");
        assert!(t.contains("a x ids: 7") && t.contains("b x ids: 2"), "{t}");
        assert!(
            emulated::is_mark(header(dir.path(), "parity__x").as_deref()),
            "a filtered PTX bless relabelled lines it did not run: {t}"
        );
    }
}
