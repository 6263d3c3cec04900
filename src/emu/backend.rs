//! `EmuBackend`: the `Backend` of a GPU target with no such device here. Every family (top-k,
//! block scores, selection attention forward and backward) runs through the same GPU host
//! code (src/gpu/) over `EmuApi` under two thread schedules (a schedule-dependent launch is
//! an error naming the kernel). What is not emulated is `unsupported in emulation`, a
//! visible not-supported check, never a pass: a call past its family's budget, or a kernel
//! whose source does not build for the host yet (inline PTX: src/emu/compile.rs names it).

use super::race::{self, ScheduledRun};
use super::{EmuTarget, Schedule};
use crate::backend::{Backend, BackendError, BackendResult, DeviceInfo, Prepared};
use crate::dispatch::{Switches, TargetCaps};
use crate::problem::{Output, Problem};

/// Most score entries (queries x n) of one emulated top-k call. Measured on the 2-core
/// development machine (2026-12-01, tests/emu_topk.rs): ~0.4 s per schedule for 2 x 9,000
/// entries through the split; past this the matrix's emulated run would take minutes.
pub const MAX_EMULATED_ENTRIES: usize = 32_768;

/// Most multiply-adds (queries x heads x blocks x 128) of one emulated block-score call.
/// Measured on the 2-core development machine, shared with other jobs (2026-12-01,
/// `qsa run --emulate --target gfx906 --case C`, release runner, modules built, error and
/// parity suites): scores_ragged (0.6 M) 4.2 s, scores_emu_decode (3.3 M) 2.9 s,
/// scores_emu_tiles (6.7 M, SIMT) 6.5 s; scores_prefill_32k (1,074 M) would take most of an
/// hour.
pub const MAX_EMULATED_SCORE_MACS: usize = 8_000_000;

/// Most multiply-adds of the QK^T product (batch x q_len x hq x t x 64 x 128) of one
/// emulated attention call (forward; the backward does about 2.5x that). Measured as
/// above (error suite, forward and backward, gather and staged): attn_emu_g4 (1.3 M)
/// 4.4 s, attn_emu_g8_f16 (1.6 M) 3.2 s, attn_causal_start (17 M, mostly masked) 19 s,
/// attn_edges_g16 (42 M) 113 s, attn_edges_g8_f16 (69 M) 273 s: past 4 M a case costs
/// more than the minute a target may take in CI (`--emulate-budget 5` takes
/// attn_causal_start, 40 every attention edge case).
pub const MAX_EMULATED_ATTN_MACS: usize = 4_000_000;

/// `QSA_EMU_BUDGET=N` multiplies every budget above by N (local use: `cargo xtask matrix
/// --emulate-budget N`); unset, empty or not a positive integer: 1.
pub const BUDGET_ENV: &str = "QSA_EMU_BUDGET";

/// The budget multiplier of `BUDGET_ENV`.
pub fn budget_scale() -> usize {
    std::env::var(BUDGET_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(1)
}

/// Multiply-adds of a block-score call (QSA_HEAD_DIM = 128).
pub fn score_macs(nq: usize, heads: usize, blocks: usize) -> usize {
    nq.saturating_mul(heads)
        .saturating_mul(blocks)
        .saturating_mul(128)
}

/// Multiply-adds of an attention call's QK^T (blocks of 64 keys, head dim 128).
pub fn attn_macs(batch: usize, q_len: usize, hq: usize, t: usize) -> usize {
    batch
        .saturating_mul(q_len)
        .saturating_mul(hq)
        .saturating_mul(t)
        .saturating_mul(64 * 128)
}

/// Why a call of this size is not emulated (past its family's budget times `scale`), if so.
pub fn over_budget(problem: &Problem, scale: usize) -> Option<String> {
    let (what, work, max) = match problem {
        Problem::Topk(p) => (
            format!("{} x {} score entries", p.nq, p.n),
            p.nq.saturating_mul(p.n),
            MAX_EMULATED_ENTRIES,
        ),
        Problem::Scores(p) => (
            format!(
                "{} queries x {} heads x {} blocks x 128 multiply-adds",
                p.nq, p.heads, p.blocks
            ),
            score_macs(p.nq, p.heads, p.blocks),
            MAX_EMULATED_SCORE_MACS,
        ),
        Problem::AttnForward(p) | Problem::AttnBackward(p) => (
            format!(
                "{} x {} tokens x {} heads x {} blocks x 64 x 128 multiply-adds",
                p.batch, p.q_len, p.hq, p.t
            ),
            attn_macs(p.batch, p.q_len, p.hq, p.t),
            MAX_EMULATED_ATTN_MACS,
        ),
    };
    let max = max.saturating_mul(scale);
    (work > max).then(|| {
        format!(
            "{what} = {work} exceed the emulator's budget of {max} per call (src/emu/backend.rs; {BUDGET_ENV}=N or cargo xtask matrix --emulate-budget N raises it N-fold)"
        )
    })
}

/// The schedules every emulated call runs under (the full set, random order included, is
/// tests/emu_topk.rs's).
const SCHEDULES: [Schedule; 2] = [Schedule::Forward, Schedule::Reverse];

pub struct EmuBackend {
    caps: TargetCaps,
}

impl EmuBackend {
    /// The emulated form of GPU target `caps`; an error for targets that cannot be emulated.
    pub fn new(caps: TargetCaps) -> BackendResult<Self> {
        EmuTarget::from_caps(&caps)?;
        Ok(EmuBackend { caps })
    }
}

fn unsupported(what: &str) -> BackendError {
    BackendError::Unsupported(format!("unsupported in emulation: {what}"))
}

impl Backend for EmuBackend {
    fn device(&self) -> DeviceInfo {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        DeviceInfo {
            name: format!(
                "{} emulated on the host CPU ({threads} threads)",
                self.caps.name
            ),
            arch: self.caps.name.clone(),
            driver: "qsa SIMT emulator (src/emu)".into(),
        }
    }

    fn prepare<'a>(
        &'a self,
        switches: &Switches,
        problem: &'a Problem,
    ) -> BackendResult<Box<dyn Prepared + 'a>> {
        if let Some(why) = over_budget(problem, budget_scale()) {
            return Err(unsupported(&why));
        }
        Ok(Box::new(EmuPrepared {
            caps: &self.caps,
            switches: switches.clone(),
            problem,
            run: None,
        }))
    }
}

/// A call that runs when asked: under every schedule of `SCHEDULES`, compared.
struct EmuPrepared<'a> {
    caps: &'a TargetCaps,
    switches: Switches,
    problem: &'a Problem,
    run: Option<ScheduledRun>,
}

impl Prepared for EmuPrepared<'_> {
    fn dispatched(&self) -> String {
        match &self.run {
            Some(r) => r.dispatched.clone(),
            None => "(not run)".into(),
        }
    }

    fn run(&mut self) -> BackendResult<()> {
        self.run = Some(race::check(
            self.caps,
            &self.switches,
            self.problem,
            &SCHEDULES,
        )?);
        Ok(())
    }

    fn time(&mut self, _reps: usize) -> BackendResult<Vec<f64>> {
        Err(unsupported(
            "timing: emulated kernels say nothing about the card's speed",
        ))
    }

    fn output(&mut self) -> BackendResult<Output> {
        self.run
            .as_ref()
            .map(|r| r.output.clone())
            .ok_or_else(|| BackendError::Device("emulated output asked before run".into()))
    }
}
