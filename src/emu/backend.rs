//! `EmuBackend`: the `Backend` of a GPU target with no such device here. The top-k family
//! runs through the emulator under two thread schedules (a schedule-dependent launch is an
//! error naming the kernel); everything not emulated is `unsupported in emulation`, a
//! visible not-supported check, never a pass.

use super::race::{self, ScheduledRun};
use super::{EmuTarget, Schedule};
use crate::backend::{Backend, BackendError, BackendResult, DeviceInfo, Prepared};
use crate::dispatch::{Switches, TargetCaps};
use crate::problem::{Output, Problem};

/// Most score entries (queries x n) of one emulated top-k call. Measured on the 2-core
/// development machine (2026-12-01, tests/emu_topk.rs): ~0.4 s per schedule for 2 x 9,000
/// entries through the split; past this the matrix's emulated run would take minutes.
pub const MAX_EMULATED_ENTRIES: usize = 32_768;

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
        let p = match problem {
            Problem::Topk(p) => p,
            Problem::Scores(_) => {
                return Err(unsupported(
                    "the block-score kernels (tensor-core and SIMT) are not emulated yet",
                ))
            }
            Problem::AttnForward(_) | Problem::AttnBackward(_) => {
                return Err(unsupported(
                    "the selection-attention kernels are not emulated yet",
                ))
            }
        };
        let entries = p.nq.saturating_mul(p.n);
        if entries > MAX_EMULATED_ENTRIES {
            return Err(unsupported(&format!(
                "{} x {} = {entries} score entries exceed the emulator's budget of {MAX_EMULATED_ENTRIES} per call (src/emu/backend.rs)",
                p.nq, p.n
            )));
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
