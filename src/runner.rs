//! One target's run: open the backend for the target, run every selected case's suites,
//! and collect the records. The `qsa` binary is a thin CLI over this.

use crate::backend::cpu::CpuBackend;
use crate::backend::{Backend, DeviceInfo};
use crate::matrix::{Matrix, Target};
use crate::results::{utc_now, Record, TargetResults, TargetStatus};
use crate::suites::bench::BenchGolden;
use crate::suites::{run_case, Ctx, Filter};
use std::path::Path;

/// Why a target's backend could not be opened: a skip with the reason, not a crash.
#[derive(Debug)]
pub struct NoDevice(pub String);

/// Open the backend that runs `target` on this machine.
pub fn open_backend(target: &Target, code_objects: &Path) -> Result<Box<dyn Backend>, NoDevice> {
    use crate::dispatch::Vendor;
    match target.vendor {
        Vendor::Cpu => Ok(Box::new(CpuBackend::new())),
        Vendor::Nvidia => open_cuda(target, code_objects),
        Vendor::Amd => open_hip(target, code_objects),
    }
}

#[cfg(feature = "cuda")]
fn open_cuda(target: &Target, dir: &Path) -> Result<Box<dyn Backend>, NoDevice> {
    let api = crate::backend::cuda::CudaApi::open(0, dir).map_err(|e| NoDevice(e.to_string()))?;
    let arch = crate::gpu::GpuApi::props(&api).arch.clone();
    if arch != target.name {
        return Err(NoDevice(format!(
            "the CUDA device here is {arch}, not {}: run target {arch} instead",
            target.name
        )));
    }
    Ok(Box::new(crate::gpu::backend::GpuBackend::new(
        api,
        target.caps(),
    )))
}

#[cfg(not(feature = "cuda"))]
fn open_cuda(_: &Target, _: &Path) -> Result<Box<dyn Backend>, NoDevice> {
    Err(NoDevice(
        "this runner was built without the `cuda` feature".into(),
    ))
}

#[cfg(feature = "hip")]
fn open_hip(target: &Target, dir: &Path) -> Result<Box<dyn Backend>, NoDevice> {
    let api = crate::backend::hip::HipApi::open(0, dir).map_err(|e| NoDevice(e.to_string()))?;
    let arch = crate::gpu::GpuApi::props(&api).arch.clone();
    if arch != target.name {
        return Err(NoDevice(format!(
            "the HIP device here is {arch}, not {}: run target {arch} instead",
            target.name
        )));
    }
    Ok(Box::new(crate::gpu::backend::GpuBackend::new(
        api,
        target.caps(),
    )))
}

#[cfg(not(feature = "hip"))]
fn open_hip(_: &Target, _: &Path) -> Result<Box<dyn Backend>, NoDevice> {
    Err(NoDevice("this runner was built without the `hip` feature (cargo build --features hip, with ROCm's HIP_PATH)".into()))
}

/// Everything `run_target` needs besides the backend.
pub struct RunSpec<'a> {
    pub matrix: &'a Matrix,
    pub target: &'a Target,
    pub filter: &'a Filter,
    pub bench_golden: &'a BenchGolden,
    pub repro_extra: String,
}

/// Run the selected cases on `backend`; progress lines go to `progress`.
pub fn run_target(
    spec: &RunSpec,
    backend: &dyn Backend,
    progress: &mut dyn FnMut(&str),
) -> TargetResults {
    let started = utc_now();
    let clock = std::time::Instant::now();
    let ctx = Ctx {
        matrix: spec.matrix,
        target: spec.target,
        backend,
        filter: spec.filter,
        bench_golden: spec.bench_golden,
        repro_extra: spec.repro_extra.clone(),
    };
    let cases = planned_cases(spec.matrix, spec.target, spec.filter);
    let total = cases.len();
    let mut records: Vec<Record> = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let mut line =
            |what: &str| progress(&format!("[{}/{total}] {} {what}", i + 1, spec.target.name));
        records.extend(run_case(&ctx, case, &mut line));
    }
    TargetResults {
        target: spec.target.name.clone(),
        status: TargetStatus::Run,
        reason: String::new(),
        device: backend.device(),
        seed: spec.matrix.seed,
        started,
        seconds: clock.elapsed().as_secs_f64(),
        records,
    }
}

/// The cases of `matrix` that run on `target` under `filter` (shards applied), in order.
pub fn planned_cases<'m>(
    matrix: &'m Matrix,
    target: &Target,
    filter: &Filter,
) -> Vec<&'m crate::matrix::Case> {
    matrix
        .cases
        .iter()
        .filter(|c| c.runs_on(target) && filter.case(&c.name))
        .filter(|c| c.suites.iter().any(|s| filter.suite(*s)))
        .enumerate()
        .filter(|(i, _)| filter.shard.is_none_or(|(k, n)| i % n == k - 1))
        .map(|(_, c)| c)
        .collect()
}

/// Results for a target that did not run: `built, not run` or `skipped`, with the reason.
pub fn not_run(
    matrix: &Matrix,
    target: &Target,
    status: TargetStatus,
    reason: String,
) -> TargetResults {
    TargetResults {
        target: target.name.clone(),
        status,
        reason,
        device: DeviceInfo::default(),
        seed: matrix.seed,
        started: utc_now(),
        seconds: 0.0,
        records: Vec::new(),
    }
}
