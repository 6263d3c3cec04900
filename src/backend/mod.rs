//! Backends: what runs a `Problem` with a named variant on one kind of device.
//!
//! The runner asks a backend to `prepare` a problem (upload inputs, pick the kernel), then
//! runs it once for parity and error suites, or times it for the bench suite. A backend that
//! cannot run a variant says `Unsupported` with the reason; the suites report that as
//! "not supported" (ggml's test-backend-ops habit), never as a pass.

use crate::dispatch::Switches;
use crate::problem::{Output, Problem};

pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(feature = "hip")]
pub mod hip;

/// Why a backend could not run something.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// This backend has no such kernel, or the target lacks the hardware for it.
    #[error("not supported: {0}")]
    Unsupported(String),
    /// The shape is outside every kernel's limits: the message names the limit and the fix.
    #[error("shape error: {0}")]
    Shape(String),
    /// The input is invalid (NaN where none is allowed, wrong lengths, ...).
    #[error("bad input: {0}")]
    Input(String),
    /// The device or driver failed.
    #[error("device error: {0}")]
    Device(String),
}

pub type BackendResult<T> = Result<T, BackendError>;

/// Facts about the device a backend runs on; they go into results and JUnit properties.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct DeviceInfo {
    /// e.g. "cpu (2 threads)", "NVIDIA H200"
    pub name: String,
    /// The architecture that executed: the target's name as in matrix.yaml ("cpu",
    /// "sm_90", "gfx906", an emulated target's), except in a PTX run, where it is the newer
    /// card's ("sm_90" for target sm_75: `TargetResults::status_label` reads it).
    pub arch: String,
    /// Driver / runtime versions, free text, one form per vendor: CUDA
    /// `CUDA driver 13.0 (580.159.04)` (cuDriverGetVersion, then the kernel module's
    /// version from /proc/driver/nvidia/version where readable; it is also the PTX JIT's
    /// version); HIP `HIP runtime 6.4.43482` (hipRuntimeGetVersion); the emulator
    /// `qsa SIMT emulator (src/emu)`; '' on the CPU and for targets that did not run.
    pub driver: String,
}

/// A problem made ready to run: inputs on the device, kernel chosen.
pub trait Prepared {
    /// The kernel variant that actually runs (after dispatch), e.g. "topk_split".
    fn dispatched(&self) -> String;
    /// Run once and wait for completion.
    fn run(&mut self) -> BackendResult<()>;
    /// Run `reps` times and return each run's duration in seconds (device events on GPUs).
    fn time(&mut self, reps: usize) -> BackendResult<Vec<f64>>;
    /// The output of the last run.
    fn output(&mut self) -> BackendResult<Output>;
}

/// A device that can run problems.
pub trait Backend {
    fn device(&self) -> DeviceInfo;
    /// Set when this backend runs an older NVIDIA target through its PTX on a newer card
    /// (`crate::ptx`): the run's status is then `run (PTX on <card>)` and bench is skipped.
    fn ptx_run(&self) -> Option<crate::ptx::PtxRun> {
        None
    }
    /// Prepare `problem` under the switches of one variant of matrix.yaml (the engine's
    /// STRATA_* variables and qsa's forcing switches); dispatch picks the kernel from them
    /// exactly as `crate::dispatch` says.
    fn prepare<'a>(
        &'a self,
        switches: &Switches,
        problem: &'a Problem,
    ) -> BackendResult<Box<dyn Prepared + 'a>>;
}
