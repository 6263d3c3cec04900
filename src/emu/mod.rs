//! The SIMT emulator: the kernel sources in kernels/*.cu run on the CPU, so the GPU host
//! code (src/gpu/) and each GPU target's dispatch run on machines without that GPU.
//!
//! - `compile`: a kernel source built for the host through the emulation branch of
//!   kernels/common/portable.h (kernels/common/emu.h), one shared library per target
//!   flavour (vendor, wave width 32 / 64, CUDA arch), cached.
//! - `module`: a loaded module, its kernels' signatures and shared memory, launches.
//! - `api`: `EmuApi`, the `GpuApi` over host memory and emulated launches; `guard`: each
//!   allocation's guard zones (a read or write out of bounds fails the launch).
//! - `backend`: `EmuBackend`, the runner's `Backend` for a GPU target without its device
//!   (`qsa run --emulate`): top-k emulated, the other families unsupported in emulation.
//! - `race`: the same call under several thread schedules; output that depends on the
//!   schedule is a failed check naming the kernel.
//!
//! Threads of a block are fibers (ucontext) on one OS thread, switched at barriers and
//! wave collectives; blocks spread over the host's cores (kernels/common/emu_runtime.h, emu_blocks.h).
//! The blocks of a thread-block cluster (sm_90's `QSA_CLUSTER_DIMS`) take turns on one OS
//! thread, each with its own copy of shared memory (kernels/common/emu_cluster.h).

pub mod api;
pub mod backend;
pub mod compile;
mod guard;
pub mod module;
pub mod race;

#[cfg(not(target_endian = "little"))]
compile_error!("the emulator passes 4-byte kernel arguments in the low half of 8-byte slots");

use crate::backend::{BackendError, BackendResult};
use crate::dispatch::{TargetCaps, Vendor};
use module::EmuModule;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// What an emulated module is built for and checked against: a GPU target's caps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmuTarget {
    /// The target's name in matrix.yaml ("sm_90", "gfx906", ...).
    pub name: String,
    /// AMD targets build the kernels' HIP branch (64-bit lane masks, HIP spellings).
    pub hip: bool,
    pub wave: u32,
    pub shared_per_block: u32,
    pub multiprocessors: u32,
    /// `__CUDA_ARCH__` of NVIDIA targets (sm_90 -> 900).
    pub cuda_arch: Option<u32>,
}

impl EmuTarget {
    /// The emulated form of a GPU target. The CPU target has nothing to emulate.
    pub fn from_caps(caps: &TargetCaps) -> BackendResult<Self> {
        let hip = match caps.vendor {
            Vendor::Amd => true,
            Vendor::Nvidia => false,
            Vendor::Cpu => {
                return Err(BackendError::Unsupported(format!(
                    "target {} is the CPU: it runs its own backend, not the emulator",
                    caps.name
                )))
            }
        };
        let allowed: &[u32] = if hip { &[32, 64] } else { &[32] };
        if !allowed.contains(&caps.wave) {
            return Err(BackendError::Input(format!(
                "target {}: wave {} cannot be emulated (NVIDIA 32; AMD 32 or 64): fix matrix.yaml",
                caps.name, caps.wave
            )));
        }
        let cuda_arch = (!hip)
            .then(|| {
                caps.name
                    .strip_prefix("sm_")
                    .and_then(|n| n.parse::<u32>().ok())
                    .map(|n| n * 10)
            })
            .flatten();
        Ok(EmuTarget {
            name: caps.name.clone(),
            hip,
            wave: caps.wave,
            shared_per_block: caps.shared_per_block,
            multiprocessors: caps.multiprocessors,
            cuda_arch,
        })
    }

    /// Part of the module's file name: what the build depends on.
    pub fn module_tag(&self) -> String {
        match (self.hip, self.cuda_arch) {
            (true, _) => format!("hip-w{}", self.wave),
            (false, Some(a)) => format!("cuda{a}-w{}", self.wave),
            (false, None) => format!("cuda-w{}", self.wave),
        }
    }
}

/// The order in which the scheduler runs the ready threads of a block between two sync
/// points (and, with one worker, the order of blocks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    Forward,
    Reverse,
    /// A seeded shuffle, drawn anew at every step.
    Random(u64),
    /// One wave at a time, its collectives resolved as soon as its lanes arrive
    /// (emu_runtime.h's WAVE_FIRST): a wave that reads what other waves stage without a
    /// barrier between reads poison.
    WaveFirst,
}

impl Schedule {
    /// The orders the race check compares.
    pub const RACE_CHECK: [Schedule; 3] = [
        Schedule::Forward,
        Schedule::Reverse,
        Schedule::Random(20261201),
    ];

    fn code(self) -> i32 {
        match self {
            Schedule::Forward => 0,
            Schedule::Reverse => 1,
            Schedule::Random(_) => 2,
            Schedule::WaveFirst => 3,
        }
    }
    fn seed(self) -> u64 {
        match self {
            Schedule::Random(s) => s,
            _ => 0,
        }
    }
    /// The byte that fills shared memory before each block: distinct per schedule, so a
    /// read of shared memory no thread wrote shows up as a schedule-dependent output.
    fn poison(self) -> u8 {
        match self {
            Schedule::Forward => 0xa5,
            Schedule::Reverse => 0x5a,
            Schedule::Random(s) => 0x3c ^ (s as u8),
            Schedule::WaveFirst => 0xc3,
        }
    }
    pub fn name(self) -> String {
        match self {
            Schedule::Forward => "forward".into(),
            Schedule::Reverse => "reverse".into(),
            Schedule::Random(s) => format!("random (seed {s})"),
            Schedule::WaveFirst => "wave-first".into(),
        }
    }
}

/// The repository's kernels/ directory (the sources the emulator builds).
pub fn default_kernels_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels")
}

/// Where built modules are cached: $QSA_EMU_CACHE, else target/emu of this repository.
pub fn default_cache_dir() -> PathBuf {
    std::env::var_os("QSA_EMU_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("target")
                .join("emu")
        })
}

/// Modules are loaded once per process and shared: (source, target) -> module. Targets of
/// one build flavour (gfx906 and gfx950) share the library but not the limits checked. A
/// source that does not build is remembered too (one compiler run per process, not one per
/// check), and only that source: the other families of the target still load.
///
/// Each module has its own cell: the map's lock is held only to find the cell, so two
/// threads compile two different modules at once (a test binary's threads each wanting a
/// module: ~10 s of g++ apiece, serialized behind one lock before), and a module already
/// loaded never waits for another's compile. A second thread wanting the module being built
/// waits on that cell alone.
pub fn load(
    kernels_dir: &Path,
    source: &Path,
    target: &EmuTarget,
) -> BackendResult<Arc<EmuModule>> {
    type Cell = Arc<OnceLock<Result<Arc<EmuModule>, BackendError>>>;
    static LOADED: OnceLock<Mutex<HashMap<(PathBuf, String), Cell>>> = OnceLock::new();
    let key = (source.to_path_buf(), target.name.clone());
    let cell: Cell = {
        let mut map = LOADED
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        Arc::clone(map.entry(key).or_default())
    };
    cell.get_or_init(|| {
        EmuModule::open(kernels_dir, source, target, &default_cache_dir()).map(Arc::new)
    })
    .as_ref()
    .map(Arc::clone)
    .map_err(same_error)
}

/// A copy of a remembered error (BackendError holds only its kind and message).
fn same_error(e: &BackendError) -> BackendError {
    match e {
        BackendError::Unsupported(m) => BackendError::Unsupported(m.clone()),
        BackendError::Shape(m) => BackendError::Shape(m.clone()),
        BackendError::Input(m) => BackendError::Input(m.clone()),
        BackendError::Device(m) => BackendError::Device(m.clone()),
    }
}
