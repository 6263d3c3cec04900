//! One emulated module (a kernel source built for one target): its kernels, their
//! signatures and shared memory, and launches through the runtime's C ABI
//! (kernels/common/emu_runtime.h).

use super::compile::{self, TlsSymbol};
use super::{EmuTarget, Schedule};
use crate::backend::{BackendError, BackendResult};
use crate::gpu::{Arg, LaunchDims};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::Path;

/// Stack of each emulated GPU thread (a fiber). The kernels keep a few dozen registers'
/// worth of locals; 64 KiB leaves room for g++ -O2 frames and lambdas.
const STACK_BYTES: u64 = 256 * 1024;
/// Most threads of one block, as on every GPU target.
const MAX_BLOCK_THREADS: u32 = 1024;

/// `qsa_emu_launch_t` of emu_runtime.h, field for field.
#[repr(C)]
struct LaunchDesc {
    kernel: c_int,
    grid: [u32; 3],
    block: [u32; 3],
    args: *mut *mut c_void,
    schedule: c_int,
    workers: c_int,
    seed: u64,
    shared_ranges: *const i64,
    n_shared_ranges: c_int,
    poison: u8,
    stack_bytes: u64,
}

type LaunchFn = unsafe extern "C" fn(*const LaunchDesc, *mut c_char, usize) -> c_int;

struct Kernel {
    name: String,
    signature: String,
    /// Bytes of its `__shared__` variables.
    static_shared: u64,
    /// (offset from the TLS anchor, bytes) of its static shared variables.
    ranges: Vec<(i64, u64)>,
    /// Blocks per thread-block cluster along x (`QSA_CLUSTER_DIMS`); 1 without clusters.
    cluster: u32,
}

pub struct EmuModule {
    target: EmuTarget,
    kernels: Vec<Kernel>,
    /// Offsets (from the TLS anchor) of the dynamic shared arrays.
    dynamic: Vec<i64>,
    launch: LaunchFn,
    // Keeps the code mapped; last so that it is dropped after everything above.
    _lib: libloading::Library,
}

fn load_err(path: &Path, e: impl std::fmt::Display) -> BackendError {
    BackendError::Device(format!(
        "cannot load the emulated module {}: {e}",
        path.display()
    ))
}

impl EmuModule {
    /// Build (or reuse from `cache`) and load `source` for `target`.
    pub fn open(
        kernels_dir: &Path,
        source: &Path,
        target: &EmuTarget,
        cache: &Path,
    ) -> BackendResult<Self> {
        let path = compile::build(kernels_dir, source, target, cache)?;
        let text = std::fs::read_to_string(source)
            .map_err(|e| BackendError::Device(format!("cannot read {}: {e}", source.display())))?;
        let dyn_names = compile::module_dynamic_shared_names(kernels_dir, &text)?;
        let syms = compile::tls_symbols(&path)?;
        let anchor = syms
            .iter()
            .find(|s| s.name.contains("qsa_emu") && s.name.contains("tls_anchor"))
            .ok_or_else(|| load_err(&path, "no qsa_emu::tls_anchor TLS symbol"))?
            .offset as i64;
        // SAFETY: the library is the module just built from the runtime; loading runs no
        // code of ours beyond static initialisers of plain data.
        let lib = unsafe { libloading::Library::new(&path) }.map_err(|e| load_err(&path, e))?;
        // SAFETY: the symbols' types are those of emu_runtime.h's C ABI.
        let (count, name, sig, cluster, wave, launch) = unsafe {
            let count: libloading::Symbol<unsafe extern "C" fn() -> c_int> = lib
                .get(b"qsa_emu_kernel_count\0")
                .map_err(|e| load_err(&path, e))?;
            let name: libloading::Symbol<unsafe extern "C" fn(c_int) -> *const c_char> = lib
                .get(b"qsa_emu_kernel_name\0")
                .map_err(|e| load_err(&path, e))?;
            let sig: libloading::Symbol<unsafe extern "C" fn(c_int) -> *const c_char> = lib
                .get(b"qsa_emu_kernel_signature\0")
                .map_err(|e| load_err(&path, e))?;
            let cluster: libloading::Symbol<unsafe extern "C" fn(c_int) -> u32> = lib
                .get(b"qsa_emu_kernel_cluster\0")
                .map_err(|e| load_err(&path, e))?;
            let wave: libloading::Symbol<unsafe extern "C" fn() -> c_int> =
                lib.get(b"qsa_emu_wave\0").map_err(|e| load_err(&path, e))?;
            let launch: libloading::Symbol<LaunchFn> = lib
                .get(b"qsa_emu_launch\0")
                .map_err(|e| load_err(&path, e))?;
            (*count, *name, *sig, *cluster, *wave, *launch)
        };
        // SAFETY: plain queries; the strings are static in the library, which outlives them.
        let built_wave = unsafe { wave() } as u32;
        if built_wave != target.wave {
            return Err(load_err(
                &path,
                format!(
                    "built for wave {built_wave}, target {} has {}",
                    target.name, target.wave
                ),
            ));
        }
        let cstr = |p: *const c_char| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned();
        let names: Vec<String> = (0..unsafe { count() })
            .map(|i| cstr(unsafe { name(i) }))
            .collect();
        // __shared__ variables declared in device functions, not in a kernel's body: which
        // kernels reach them is unknown here, so every kernel counts (and poisons) them.
        let unattributed: Vec<(i64, u64)> = syms
            .iter()
            .filter(|s| !s.name.contains("qsa_emu") && !dyn_names.contains(&s.name))
            .filter(|s| {
                !names
                    .iter()
                    .any(|k| s.name.starts_with(&compile::local_static_prefix(k)))
            })
            .map(|s| (s.offset as i64 - anchor, s.size))
            .collect();
        let kernels = (0..names.len())
            .map(|i| {
                let name = names[i].clone();
                let mut ranges = static_shared(&syms, &name, anchor);
                ranges.extend(&unattributed);
                Kernel {
                    static_shared: ranges.iter().map(|r| r.1).sum(),
                    signature: cstr(unsafe { sig(i as c_int) }),
                    // SAFETY: a plain query of kernel i < count.
                    cluster: unsafe { cluster(i as c_int) },
                    name,
                    ranges,
                }
            })
            .collect();
        let dynamic = syms
            .iter()
            .filter(|s| dyn_names.contains(&s.name))
            .map(|s| s.offset as i64 - anchor)
            .collect();
        Ok(EmuModule {
            target: target.clone(),
            kernels,
            dynamic,
            launch,
            _lib: lib,
        })
    }

    pub fn kernel_names(&self) -> impl Iterator<Item = &str> {
        self.kernels.iter().map(|k| k.name.as_str())
    }

    /// Blocks per thread-block cluster of `kernel` (1 without clusters), if the module has it.
    pub fn cluster_size(&self, kernel: &str) -> Option<u32> {
        self.kernels
            .iter()
            .find(|k| k.name == kernel)
            .map(|k| k.cluster)
    }

    /// Bytes of `kernel`'s static `__shared__` variables, if the module has it.
    pub fn static_shared(&self, kernel: &str) -> Option<u64> {
        self.kernels
            .iter()
            .find(|k| k.name == kernel)
            .map(|k| k.static_shared)
    }

    /// Run `kernel` to completion under `schedule` on `workers` OS threads.
    pub fn launch(
        &self,
        kernel: &str,
        dims: LaunchDims,
        args: &[Arg],
        schedule: Schedule,
        workers: usize,
    ) -> BackendResult<()> {
        let index = self
            .kernels
            .iter()
            .position(|k| k.name == kernel)
            .ok_or_else(|| {
                let known: Vec<&str> = self.kernel_names().collect();
                BackendError::Unsupported(format!(
                    "is not in the host build of its source for {} (an #if leaves it out for this target; the module has {})",
                    self.target.name,
                    known.join(", ")
                ))
            })?;
        let k = &self.kernels[index];
        check_args(k, args)?;
        self.check_dims(k, dims)?;
        let mut slots: Vec<u64> = args.iter().map(slot).collect();
        let mut params: Vec<*mut c_void> =
            slots.iter_mut().map(|s| (s as *mut u64).cast()).collect();
        let mut ranges: Vec<i64> = Vec::new();
        for &(off, bytes) in &k.ranges {
            ranges.extend([off, bytes as i64]);
        }
        for &off in &self.dynamic {
            ranges.extend([off, dims.shared_bytes as i64]);
        }
        let desc = LaunchDesc {
            kernel: index as c_int,
            grid: [dims.grid.0, dims.grid.1, dims.grid.2],
            block: [dims.block.0, dims.block.1, dims.block.2],
            args: params.as_mut_ptr(),
            schedule: schedule.code(),
            workers: workers.max(1) as c_int,
            seed: schedule.seed(),
            shared_ranges: ranges.as_ptr(),
            n_shared_ranges: (ranges.len() / 2) as c_int,
            poison: schedule.poison(),
            stack_bytes: STACK_BYTES,
        };
        let mut err = vec![0u8; 1024];
        // SAFETY: desc matches qsa_emu_launch_t; params point at `slots`, one per parameter
        // of the kernel's C signature (checked above); pointer arguments are host
        // allocations of the caller (EmuApi) that outlive this synchronous call.
        let rc = unsafe { (self.launch)(&desc, err.as_mut_ptr().cast(), err.len()) };
        if rc == 0 {
            return Ok(());
        }
        let msg = CStr::from_bytes_until_nul(&err)
            .map(|c| c.to_string_lossy().into_owned())
            .unwrap_or_default();
        Err(BackendError::Device(format!(
            "emulated {} on {}: {msg}",
            kernel, self.target.name
        )))
    }

    fn check_dims(&self, k: &Kernel, d: LaunchDims) -> BackendResult<()> {
        let threads = d.block.0 as u64 * d.block.1 as u64 * d.block.2 as u64;
        if threads == 0 || threads > MAX_BLOCK_THREADS as u64 {
            return Err(BackendError::Shape(format!(
                "{}: block {:?} has {threads} threads; 1..={MAX_BLOCK_THREADS} allowed",
                k.name, d.block
            )));
        }
        if d.grid.0 == 0 || d.grid.1 == 0 || d.grid.2 == 0 {
            return Err(BackendError::Shape(format!(
                "{}: empty grid {:?}",
                k.name, d.grid
            )));
        }
        if k.cluster == 0 {
            return Err(BackendError::Input(format!(
                "{}: its QSA_CLUSTER_DIMS(...) is not a plain number after preprocessing, so the emulator cannot size its clusters: write the size as an integer literal or a macro of one",
                k.name
            )));
        }
        if !d.grid.0.is_multiple_of(k.cluster) {
            return Err(BackendError::Shape(format!(
                "{}: grid x {} is not a multiple of its cluster size {} (QSA_CLUSTER_DIMS): launch whole clusters",
                k.name, d.grid.0, k.cluster
            )));
        }
        let total = k.static_shared + d.shared_bytes as u64;
        let limit = self.target.shared_per_block as u64;
        if total > limit || d.shared_bytes > compile::DYN_SHARED_MAX {
            return Err(BackendError::Shape(format!(
                "{} uses {} bytes of static and {} of dynamic shared memory, {total} in all; {} allows {limit} per block",
                k.name, k.static_shared, d.shared_bytes, self.target.name
            )));
        }
        Ok(())
    }
}

/// The static shared ranges of `kernel`: the thread-local statics declared in its body.
fn static_shared(syms: &[TlsSymbol], kernel: &str, anchor: i64) -> Vec<(i64, u64)> {
    let prefix = compile::local_static_prefix(kernel);
    syms.iter()
        .filter(|s| s.name.starts_with(&prefix))
        .map(|s| (s.offset as i64 - anchor, s.size))
        .collect()
}

fn arg_code(a: &Arg) -> char {
    match a {
        Arg::Ptr(_) | Arg::Null => 'p',
        Arg::I32(_) => 'i',
        Arg::U32(_) => 'u',
        Arg::I64(_) => 'l',
        Arg::F32(_) => 'f',
    }
}

fn check_args(k: &Kernel, args: &[Arg]) -> BackendResult<()> {
    let given: String = args.iter().map(arg_code).collect();
    if given != k.signature {
        return Err(BackendError::Input(format!(
            "{} takes ({}) but the launch passes ({given}) (p pointer, i int, u unsigned, l 64-bit, f float): the host code and the kernel's C signature disagree",
            k.name, k.signature
        )));
    }
    Ok(())
}

/// An argument's value in an 8-byte slot (little-endian: a 4-byte parameter reads its low half).
fn slot(a: &Arg) -> u64 {
    match *a {
        Arg::Ptr(p) => p.addr,
        Arg::Null => 0,
        Arg::I32(v) => v as u32 as u64,
        Arg::U32(v) => v as u64,
        Arg::I64(v) => v as u64,
        Arg::F32(v) => v.to_bits() as u64,
    }
}
