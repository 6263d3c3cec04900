//! Race detection by schedule: run one call under several thread orders and compare device
//! memory after every launch. Correct kernels synchronise every exchange through barriers,
//! wave collectives or atomics whose result does not depend on order, so their memory is
//! the same whatever order the threads between two sync points run in; a missing barrier,
//! a race or a read of unwritten shared memory (poisoned differently per schedule) changes
//! it. The first launch whose memory differs is the kernel named.

use super::api::{EmuApi, LaunchRecord};
use super::Schedule;
use crate::backend::{Backend, BackendError, BackendResult};
use crate::dispatch::{Switches, TargetCaps};
use crate::gpu::backend::GpuBackend;
use crate::problem::{Output, Problem};

/// What one schedule produced.
pub struct ScheduledRun {
    pub schedule: Schedule,
    pub dispatched: String,
    pub output: Output,
    pub records: Vec<LaunchRecord>,
}

/// Run `problem` on the emulated `caps` under `schedule` (blocks on one OS thread, so that
/// the order of blocks is the schedule's too).
pub fn run_scheduled(
    caps: &TargetCaps,
    switches: &Switches,
    problem: &Problem,
    schedule: Schedule,
) -> BackendResult<ScheduledRun> {
    let api = EmuApi::new(caps, schedule)?.with_workers(1);
    let backend = GpuBackend::new(api, caps.clone());
    let (dispatched, output) = {
        let mut prepared = backend.prepare(switches, problem)?;
        prepared.run()?;
        (prepared.dispatched(), prepared.output()?)
    };
    Ok(ScheduledRun {
        schedule,
        dispatched,
        output,
        records: backend.api().records(),
    })
}

/// The first difference between two runs' launch records, as a message naming the kernel.
pub fn compare(
    target: &str,
    (sa, a): (Schedule, &[LaunchRecord]),
    (sb, b): (Schedule, &[LaunchRecord]),
) -> Result<(), String> {
    let order = format!("{} and {} schedules", sa.name(), sb.name());
    for (i, (ra, rb)) in a.iter().zip(b).enumerate() {
        if ra.kernel != rb.kernel {
            return Err(format!(
                "{target}: launch {i} is {} under one and {} under the other of the {order}: the host code's launches depend on the schedule",
                ra.kernel, rb.kernel
            ));
        }
        if ra.memory_digest != rb.memory_digest {
            return Err(format!(
                "race in {} on {target} (launch {i} of the call): device memory after it differs between the {order}; its result depends on the order threads run between two sync points: a missing __syncthreads / __syncwarp, a race on shared or global memory, or a read of shared memory no thread wrote",
                ra.kernel
            ));
        }
    }
    if a.len() != b.len() {
        return Err(format!(
            "{target}: {} launches under one and {} under the other of the {order}",
            a.len(),
            b.len()
        ));
    }
    Ok(())
}

/// Run `problem` under every schedule of `schedules` (the first is the reference) and
/// return the reference run; a schedule-dependent launch is an error naming the kernel.
pub fn check(
    caps: &TargetCaps,
    switches: &Switches,
    problem: &Problem,
    schedules: &[Schedule],
) -> BackendResult<ScheduledRun> {
    let mut runs = schedules
        .iter()
        .map(|&s| run_scheduled(caps, switches, problem, s));
    let first = runs
        .next()
        .ok_or_else(|| BackendError::Input("race check with no schedule".into()))??;
    for run in runs {
        let run = run?;
        compare(
            &caps.name,
            (first.schedule, &first.records),
            (run.schedule, &run.records),
        )
        .map_err(BackendError::Device)?;
    }
    Ok(first)
}
