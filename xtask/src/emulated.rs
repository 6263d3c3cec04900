//! `cargo xtask matrix` for a GPU target whose device is not here: instead of `built, not
//! run`, its runner runs with `qsa run --emulate` (src/emu/: the kernel sources on the CPU
//! with the target's wave width, shared memory limit and dispatch) and the target reports
//! status `emulated`, distinct from `run` everywhere (terminal, results.yaml, JUnit,
//! summary), with repro lines that emulate too (`--emulate`).
//!
//! What emulates by default: the parity and error suites (never bench: an emulated kernel
//! says nothing about the card's speed) of the cases whose calls fit the emulator's
//! budgets (`qsa::emu::backend`): top-k up to `MAX_EMULATED_ENTRIES` score entries per
//! call, block scores up to `MAX_EMULATED_SCORE_MACS` multiply-adds, attention up to
//! `MAX_EMULATED_ATTN_MACS`: the small and edge cases. Larger cases need the card, or
//! `--emulate-budget N` (every budget N-fold; local use, minutes per target).
//! Measured on the 2-core development machine (2026-12-01, `cargo xtask matrix --target T`
//! one target at a time, emulated modules already built; the runner's own seconds):
//! sm_75 9.5 s (top-k and scores; attention unsupported), sm_86 3.8 s and sm_90 3.4 s
//! (top-k only), gfx906 16.9 s, gfx1201 13.2 s, gfx950 17.3 s (every family). Building a
//! module flavour the first time adds 3-10 s per kernel source.
//! Naming `--case` emulates exactly those cases (past the budget: `unsupported in
//! emulation`, counted as unsup, never a pass).
//!
//! Emulated results are compared with golden/ under the rule of `golden::emulated`.

use crate::golden::{Golden, Scope};
use crate::matrix::MatrixArgs;
use crate::report::GateNote;
use crate::repro::Repro;
use crate::snapshots;
use anyhow::Result;
use qsa::emu::backend::{
    attn_macs, score_macs, BUDGET_ENV, MAX_EMULATED_ATTN_MACS, MAX_EMULATED_ENTRIES,
    MAX_EMULATED_SCORE_MACS,
};
use qsa::matrix::{Case, Matrix, Suite, Target};
use qsa::results::{TargetResults, TargetStatus};

/// The emulation switches of `cargo xtask matrix`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct EmulateArgs {
    /// Emulate every selected GPU target, even where its device is here (the repro line of
    /// an emulated check carries it).
    #[arg(long, conflicts_with_all = ["no_emulate", "from_results"])]
    pub emulate: bool,
    /// Report a GPU target without its device as `built, not run` instead of emulating it.
    /// Default: emulated (parity and error of the cases within the emulator's budgets,
    /// through the SIMT emulator on the CPU; status `emulated`).
    #[arg(long)]
    pub no_emulate: bool,
    /// Multiply the emulator's per-call budgets by N (default 1: the small cases, about a
    /// minute per GPU target on 2 cores): N = 5 adds attn_causal_start, N = 40 every
    /// attention edge case (minutes each). Sets QSA_EMU_BUDGET for the runners.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub emulate_budget: u32,
}

/// The suites emulation runs.
const SUITES: [Suite; 2] = [Suite::Parity, Suite::Error];

/// Does `case` fit the emulator's budget (times `scale`): its calls' work (top-k score
/// entries, scores or attention multiply-adds) within its family's budget.
pub fn fits(case: &Case, scale: usize) -> bool {
    let within = |work: usize, max: usize| work <= max.saturating_mul(scale);
    if let Some(s) = &case.topk {
        within(s.queries.saturating_mul(s.n), MAX_EMULATED_ENTRIES)
    } else if let Some(s) = &case.scores {
        within(
            score_macs(s.queries, s.heads, s.blocks),
            MAX_EMULATED_SCORE_MACS,
        )
    } else if let Some(s) = &case.attention {
        within(
            attn_macs(s.batch, s.q_len, s.hq, s.t),
            MAX_EMULATED_ATTN_MACS,
        )
    } else {
        false
    }
}

/// What an emulated run of `t` runs: the runner's `--case` and `--suite` filters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub cases: Vec<String>,
    pub suites: Vec<String>,
    /// Cases of `t` (under the run's filters) left to the card.
    pub left: usize,
}

/// The plan for `t` under the user's filters (`--case` named: exactly those).
pub fn plan(a: &MatrixArgs, m: &Matrix, t: &Target) -> Plan {
    let suites: Vec<Suite> = SUITES
        .into_iter()
        .filter(|s| a.suite.is_empty() || a.suite.iter().any(|x| x == s.name()))
        .collect();
    let runs: Vec<&Case> = m
        .cases
        .iter()
        .filter(|c| c.runs_on(t) && (a.case.is_empty() || a.case.contains(&c.name)))
        .filter(|c| {
            c.suites
                .iter()
                .any(|s| a.suite.is_empty() || a.suite.iter().any(|x| x == s.name()))
        })
        .collect();
    let cases: Vec<String> = runs
        .iter()
        .filter(|c| c.suites.iter().any(|s| suites.contains(s)))
        .filter(|c| !a.case.is_empty() || fits(c, a.emulate.emulate_budget as usize))
        .map(|c| c.name.clone())
        .collect();
    Plan {
        left: runs.len() - cases.len(),
        cases,
        suites: suites.iter().map(|s| s.name().to_string()).collect(),
    }
}

/// Should `t` be emulated without even asking for its device (`--emulate`)?
pub fn forced(a: &MatrixArgs, t: &Target) -> bool {
    a.emulate.emulate && t.is_gpu()
}

/// The results of GPU target `t` that did not run here (`built, not run`, or `skipped`
/// because its toolchain is missing: the emulator needs only the host's C++ compiler):
/// emulated instead, unless `--no-emulate` or nothing selected can be emulated (then the
/// not-run results, saying why). `run` starts the target's runner with `--emulate` and the
/// plan's filters.
pub fn instead(
    a: &MatrixArgs,
    m: &Matrix,
    t: &Target,
    not_run: TargetResults,
    run: impl FnOnce(&MatrixArgs) -> Result<TargetResults>,
) -> Result<TargetResults> {
    let emulable = matches!(
        not_run.status,
        TargetStatus::BuiltNotRun | TargetStatus::Skipped
    );
    if !t.is_gpu() || !emulable || a.emulate.no_emulate || a.from_results.is_some() {
        return Ok(not_run);
    }
    let p = plan(a, m, t);
    if p.cases.is_empty() || p.suites.is_empty() {
        let mut r = not_run;
        r.reason = format!(
            "{}; nothing selected can be emulated (parity and error of cases within the emulator's budgets, src/emu/backend.rs; never bench)",
            r.reason
        );
        return Ok(r);
    }
    let mut ea = a.clone();
    ea.case = p.cases.clone();
    ea.suite = p.suites.clone();
    if a.emulate.emulate_budget > 1 {
        // The runner's EmuBackend reads the budget scale from its environment. xtask runs
        // its targets one after another on this thread, so nothing reads the environment
        // while it changes.
        std::env::set_var(BUDGET_ENV, a.emulate.emulate_budget.to_string());
    }
    let mut r = run(&ea)?;
    let why = if not_run.reason.is_empty() {
        "--emulate".to_string()
    } else {
        format!("no run here ({})", not_run.reason)
    };
    let left = if p.left > 0 {
        format!(
            "; {} other case(s) not emulated (past the emulator's budget: --emulate-budget N)",
            p.left
        )
    } else {
        String::new()
    };
    let what = format!(
        "{}: {} of {}{left}",
        r.device.name,
        p.suites.join(" and "),
        p.cases.join(", ")
    );
    r.reason = if r.reason.is_empty() {
        format!("{what}; {why}")
    } else {
        format!("{}; {what}; {why}", r.reason)
    };
    Ok(r)
}

/// Repro lines of emulated results emulate too (on a machine with the card as well).
pub fn mark_repro(r: &mut TargetResults) {
    if r.status == TargetStatus::Emulated {
        for rec in &mut r.records {
            rec.repro = with_flag(&rec.repro);
        }
    }
}

fn with_flag(repro: &str) -> String {
    if repro.is_empty() || repro.contains(" --emulate") {
        repro.to_string()
    } else {
        format!("{repro} --emulate")
    }
}

/// Compare an emulated run's snapshots with golden/ (rule: `golden::emulated`).
pub fn snapshots(
    golden: &mut Golden,
    m: &Matrix,
    t: &Target,
    r: &TargetResults,
    scope: Scope,
    repro: &Repro,
    notes: &mut Vec<GateNote>,
) -> Result<()> {
    let off = snapshots::OffCard {
        check: &mut |g: &mut Golden, name: &str, text: &str, scope| {
            g.check_emulated(&t.name, name, text, scope)
        },
        repro: &|case: &str, suite| with_flag(&repro.snapshot(&t.name, case, suite)),
        unseen: &|unseen, file| {
            format!(
                "{unseen} emulated line(s) are not in {file}, which was made on the card: not compared (the next run on the card adds them)"
            )
        },
        differs: &|file| {
            format!(
                "emulated {} results differ from {file}, which was made on the card: the kernel source and the card disagree (a GPU-only bug, or one in the emulator); emulation never rewrites a snapshot made on the card, --bless included",
                t.name
            )
        },
    };
    snapshots::compare_off_card(golden, m, t, r, scope, notes, off)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::TargetReport;
    use clap::Parser;
    use qsa::backend::DeviceInfo;
    use qsa::results::{Record, Status};

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        a: MatrixArgs,
    }

    fn args(extra: &[&str]) -> MatrixArgs {
        Cli::try_parse_from(std::iter::once("matrix").chain(extra.iter().copied()))
            .unwrap()
            .a
    }

    fn matrix() -> Matrix {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        Matrix::load(&root.join("matrix.yaml")).unwrap()
    }

    fn emulated_report(status: Status) -> TargetReport {
        let rec = Record {
            suite: Suite::Parity,
            case: "topk_edges_small".into(),
            dist: "nan_inf".into(),
            variant: "wide".into(),
            check: "ids".into(),
            dispatched: Some("wide".into()),
            status,
            message: "1 of 8 queries differ from the reference".into(),
            metrics: Default::default(),
            snapshot: None,
            repro: "cargo xtask matrix --target gfx906 --case topk_edges_small --suite parity --dist nan_inf --variant wide".into(),
        };
        let mut results = TargetResults {
            target: "gfx906".into(),
            status: TargetStatus::Emulated,
            reason: "gfx906 emulated on the host CPU (2 threads): parity of topk_edges_small"
                .into(),
            device: DeviceInfo {
                name: "gfx906 emulated on the host CPU (2 threads)".into(),
                arch: "gfx906".into(),
                driver: "qsa SIMT emulator (src/emu)".into(),
            },
            seed: 1,
            started: String::new(),
            seconds: 1.0,
            records: vec![rec],
        };
        mark_repro(&mut results);
        TargetReport {
            results,
            unstable: None,
            build: String::new(),
            notes: Vec::new(),
        }
    }

    /// The default emulates the small cases of every family (the edge cases included),
    /// parity and error only; a named case is emulated as asked; bench alone emulates
    /// nothing; --emulate-budget N takes bigger cases.
    #[test]
    fn the_plan_takes_the_small_cases_and_never_bench() {
        let m = matrix();
        let t = m.target("gfx906").unwrap();
        let p = plan(&args(&[]), &m, t);
        for c in [
            "topk_edges_small",
            "topk_cut_specials",
            "topk_cut_specials_small",
            "scores_ragged",
            "scores_emu_tiles",
            "scores_emu_decode",
            "attn_emu_g4",
            "attn_emu_g8_f16",
        ] {
            assert!(p.cases.iter().any(|x| x == c), "{c} not emulated: {p:?}");
        }
        for big in [
            "topk_decode_3q_262k",
            "scores_prefill_32k",
            "attn_causal_start",
            "attn_edges_g16",
        ] {
            assert!(!p.cases.iter().any(|x| x == big), "{big} emulated: {p:?}");
        }
        let more = plan(&args(&["--emulate-budget", "5"]), &m, t);
        assert!(
            more.cases.iter().any(|x| x == "attn_causal_start"),
            "{more:?}"
        );
        assert!(
            !more.cases.iter().any(|x| x == "attn_edges_g16"),
            "{more:?}"
        );
        assert!(Cli::try_parse_from(["matrix", "--emulate-budget", "0"]).is_err());
        assert_eq!(p.suites, ["parity", "error"]);
        assert!(p.left > 0);
        let named = plan(&args(&["--case", "topk_decode_1q_262k"]), &m, t);
        assert_eq!(named.cases, ["topk_decode_1q_262k"]);
        assert!(plan(&args(&["--suite", "bench"]), &m, t).suites.is_empty());
    }

    #[test]
    fn emulate_and_no_emulate_exclude_each_other_and_from_results() {
        assert!(args(&["--no-emulate"]).emulate.no_emulate);
        assert!(args(&["--emulate"]).emulate.emulate);
        for bad in [
            &["--emulate", "--no-emulate"][..],
            &["--emulate", "--from-results", "x"][..],
        ] {
            assert!(
                Cli::try_parse_from(std::iter::once("matrix").chain(bad.iter().copied())).is_err(),
                "{bad:?} accepted"
            );
        }
    }

    /// Status `emulated` everywhere a reader looks, never `run`; repro lines emulate.
    #[test]
    fn an_emulated_target_says_so_in_junit_terminal_summary_and_repro() {
        let tr = emulated_report(Status::Fail);
        let repro = &tr.results.records[0].repro;
        assert!(repro.ends_with(" --emulate"), "{repro}");
        let junit = crate::report::junit::render(std::slice::from_ref(&tr)).unwrap();
        assert!(
            junit.contains(r#"<property name="status" value="emulated"/>"#),
            "an emulated target's JUnit status property must say emulated: {junit}"
        );
        assert!(
            junit.contains("topk_edges_small/nan_inf/wide/ids") && junit.contains("--emulate"),
            "the emulated checks are listed, with repro lines that emulate: {junit}"
        );
        let term = crate::report::terminal::render(std::slice::from_ref(&tr));
        assert!(term.contains("FAIL (emulated)"), "{term}");
        assert!(
            term.contains("FAIL gfx906 (emulated) parity topk_edges_small/nan_inf/wide/ids [kernel wide]: 1 of 8"),
            "{term}"
        );
        let md = crate::report::markdown::render(std::slice::from_ref(&tr));
        assert!(md.contains("| gfx906 | ❌ fail (emulated) |"), "{md}");
        let pass = emulated_report(Status::Pass);
        let term = crate::report::terminal::render(std::slice::from_ref(&pass));
        assert!(term.contains("gfx906    emulated "), "{term}");
        assert!(!term.contains(" run "), "{term}");
        let md = crate::report::markdown::render(std::slice::from_ref(&pass));
        assert!(md.contains("| gfx906 | ✅ pass (emulated) |"), "{md}");
        // Twice through mark_repro (results read back) adds the flag once.
        let mut r = pass.results.clone();
        mark_repro(&mut r);
        assert_eq!(r.records[0].repro.matches("--emulate").count(), 1);
    }

    /// Unsupported in emulation is counted as unsup, never as a pass.
    #[test]
    fn unsupported_in_emulation_is_not_a_pass() {
        let tr = emulated_report(Status::Unsupported);
        let c = tr.counts();
        assert_eq!((c.pass, c.unsupported), (0, 1));
        let junit = crate::report::junit::render(std::slice::from_ref(&tr)).unwrap();
        assert!(junit.contains("<skipped"), "{junit}");
    }
}
