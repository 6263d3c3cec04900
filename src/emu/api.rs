//! `EmuApi`: `GpuApi` over host memory and emulated launches, so the host code of
//! src/gpu/ (launch rules, workspaces, splits, dispatch) drives the kernel sources on the
//! CPU exactly as it drives them on a card.

use super::guard::Guarded;
use super::module::EmuModule;
use super::{EmuTarget, Schedule};
use crate::backend::{BackendError, BackendResult};
use crate::dispatch::TargetCaps;
use crate::gpu::{Arg, DevPtr, Family, GpuApi, GpuProps, LaunchDims};
use sha2::{Digest, Sha256};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Alignment of every allocation's start. cudaMalloc gives 256; here 16, the widest access a
/// kernel makes (16-byte vectors, cp.async, bulk copies), so that the end of the user's bytes
/// lies against the rear guard zone to within 15 bytes (with 256, a read one past the end of
/// a 160-byte id list fell in the slack, unseen). The kernels' host code assumes nothing
/// wider.
const ALIGN: usize = 16;
/// Fresh allocations hold this byte, as device memory holds whatever was there: a kernel
/// that reads what nobody wrote gets garbage, not a lucky zero.
const FRESH_BYTE: u8 = 0xcd;
/// Guard zones before and after every allocation (src/emu/guard.rs): pages no access may
/// touch, so a launch that read or wrote one fails naming the kernel and the allocation.
/// Without them an out-of-bounds write corrupts the host heap and the process dies later with
/// SIGSEGV (the curated mutant gpu-topk-spec-kernel-for-wrong-chunk, 2026-12-02: workspace
/// laid out for 3 chunks of 8,192 entries, allocated for 2 of 16,384), and an out-of-bounds
/// read passes with whatever lies there. Each zone is the allocation's own size (a wrong
/// layout overshoots by about that), at least 1 MiB, at most 64 MiB: address space only.
/// Unseen: an access past a zone, a read of the slack before the start (the user's bytes
/// end at the rear zone; the front zone starts at the page below them) or of the bytes
/// that round the size up to ALIGN.
fn guard_bytes(size: usize) -> usize {
    size.clamp(1 << 20, 64 << 20)
}

/// One live allocation, in the order it was made.
struct Alloc {
    seq: u64,
    mem: Guarded,
}

/// One launch of a call, and device memory after it (for the race check): the digest of
/// every allocation, and each allocation's bytes in the order the host code made them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchRecord {
    pub kernel: String,
    pub memory_digest: [u8; 32],
    pub memory: Vec<Vec<u8>>,
}

pub struct EmuApi {
    props: GpuProps,
    target: EmuTarget,
    kernels_dir: PathBuf,
    schedule: Schedule,
    workers: usize,
    modules: RefCell<HashMap<PathBuf, Arc<EmuModule>>>,
    /// Live allocations by (user) address, with the order they were made in.
    memory: RefCell<BTreeMap<u64, Alloc>>,
    allocations: std::cell::Cell<u64>,
    records: RefCell<Vec<LaunchRecord>>,
}

impl EmuApi {
    /// An emulated device of target `caps`, its threads scheduled in `schedule` order.
    pub fn new(caps: &TargetCaps, schedule: Schedule) -> BackendResult<Self> {
        let target = EmuTarget::from_caps(caps)?;
        let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
        Ok(EmuApi {
            props: GpuProps {
                name: format!("{} emulated on the host ({workers} threads)", caps.name),
                arch: caps.name.clone(),
                multiprocessors: caps.multiprocessors,
                warp_size: target.wave,
                max_shared_per_block: target.shared_per_block,
            },
            target,
            kernels_dir: super::default_kernels_dir(),
            schedule,
            workers,
            modules: RefCell::new(HashMap::new()),
            memory: RefCell::new(BTreeMap::new()),
            allocations: std::cell::Cell::new(0),
            records: RefCell::new(Vec::new()),
        })
    }

    /// Run blocks on this many OS threads (1: blocks in schedule order, reproducible).
    pub fn with_workers(mut self, workers: usize) -> Self {
        self.workers = workers.max(1);
        self
    }

    pub fn target(&self) -> &EmuTarget {
        &self.target
    }

    /// The launches so far, each with the digest of device memory after it.
    pub fn records(&self) -> Vec<LaunchRecord> {
        self.records.borrow().clone()
    }

    fn module(&self, source: &Path) -> BackendResult<Arc<EmuModule>> {
        if let Some(m) = self.modules.borrow().get(source) {
            return Ok(m.clone());
        }
        let m = super::load(&self.kernels_dir, source, &self.target)?;
        self.modules
            .borrow_mut()
            .insert(source.to_path_buf(), m.clone());
        Ok(m)
    }

    /// Launch `kernel` of any kernel source (e.g. the emulator's own test kernels), built
    /// for this target with kernels/ on the include path. Synchronous; recorded.
    pub fn launch_source(
        &self,
        source: &Path,
        kernel: &str,
        dims: LaunchDims,
        args: &[Arg],
    ) -> BackendResult<()> {
        for a in args {
            if let Arg::Ptr(p) = a {
                self.bytes(DevPtr { bytes: 0, ..*p }).map_err(|e| {
                    BackendError::Device(format!("{kernel}: pointer argument: {e}"))
                })?;
            }
        }
        let in_emulation = |e: BackendError| match e {
            // "unsupported in emulation: qsa_x needs cp.async... (x.cu does not build ...)":
            // counted as unsup per check, never a pass; gone once the source builds.
            BackendError::Unsupported(m) => {
                BackendError::Unsupported(format!("unsupported in emulation: {kernel} {m}"))
            }
            e => e,
        };
        self.module(source)
            .map_err(in_emulation)?
            .launch(kernel, dims, args, self.schedule, self.workers)
            .map_err(in_emulation)?;
        self.check_guards(kernel)?;
        let memory = self.memory_contents();
        let mut h = Sha256::new();
        for m in &memory {
            h.update(m);
        }
        self.records.borrow_mut().push(LaunchRecord {
            kernel: kernel.to_string(),
            memory_digest: h.finalize().into(),
            memory,
        });
        Ok(())
    }

    /// The bytes of a live allocation (checked: an unknown or stale pointer is an error).
    fn bytes(&self, p: DevPtr) -> BackendResult<*mut u8> {
        match self.memory.borrow().get(&p.addr) {
            Some(a) if a.mem.size >= p.bytes => Ok(p.addr as *mut u8),
            Some(a) => Err(BackendError::Device(format!(
                "emulated memory: {} bytes at {:#x} used, allocation holds {}",
                p.bytes, p.addr, a.mem.size
            ))),
            None => Err(BackendError::Device(format!(
                "emulated memory: {:#x} is not a live allocation",
                p.addr
            ))),
        }
    }

    /// A copy of every live allocation, in the order they were made (addresses differ
    /// from run to run; the order of the host code's allocations does not).
    fn memory_contents(&self) -> Vec<Vec<u8>> {
        let memory = self.memory.borrow();
        let mut live: Vec<&Alloc> = memory.values().collect();
        live.sort_by_key(|a| a.seq);
        live.into_iter()
            // SAFETY: a live allocation of a.mem.size bytes; no launch runs now.
            .map(|a| {
                unsafe { std::slice::from_raw_parts(a.mem.user as *const u8, a.mem.size) }.to_vec()
            })
            .collect()
    }

    /// After `kernel`'s launch: no access touched a guard zone, or the launch failed with the
    /// allocation and what it did (a write: the first and last changed byte; a read: the
    /// first address read). The zones are closed again, so a later launch is not blamed for
    /// this one's accesses.
    fn check_guards(&self, kernel: &str) -> BackendResult<()> {
        let mut first_err = None;
        for (&addr, a) in self.memory.borrow().iter() {
            let Some(f) = a.mem.check() else { continue };
            let size = a.mem.size as isize;
            let at = |o: isize| {
                if o < 0 {
                    format!("{} before its start", -o)
                } else {
                    format!("{} past its end", o - size)
                }
            };
            let what = format!("allocation #{} ({} bytes at {addr:#x})", a.seq, size);
            first_err.get_or_insert_with(|| match (f.changed.first(), f.changed.last()) {
                (Some(&lo), Some(&hi)) => format!(
                    "emulated {kernel}: out-of-bounds global write: {} bytes changed around \
                     {what}, from byte {} to byte {} (a wrong size, stride or layout of a \
                     buffer?)",
                    f.changed.len(),
                    at(lo),
                    at(hi)
                ),
                _ => format!(
                    "emulated {kernel}: out-of-bounds global {}: {what}, first at byte {} \
                     ({} faulting access{}; an index one past the end, or a wrong size, \
                     stride or layout of a buffer?)",
                    if f.write { "write" } else { "read" },
                    at(f.first),
                    f.faults,
                    if f.faults == 1 { "" } else { "es" }
                ),
            });
        }
        first_err.map_or(Ok(()), |e| Err(BackendError::Device(e)))
    }
}

impl GpuApi for EmuApi {
    fn props(&self) -> &GpuProps {
        &self.props
    }

    fn alloc(&self, bytes: usize) -> BackendResult<DevPtr> {
        let size = bytes.max(1);
        let mem = Guarded::new(size, ALIGN, guard_bytes(size), FRESH_BYTE)
            .map_err(|e| BackendError::Device(format!("emulated alloc of {bytes} bytes: {e}")))?;
        let seq = self.allocations.get();
        self.allocations.set(seq + 1);
        let addr = mem.user;
        self.memory.borrow_mut().insert(addr, Alloc { seq, mem });
        Ok(DevPtr { addr, bytes })
    }

    fn free(&self, ptr: DevPtr) {
        // Dropping the allocation unmaps it.
        self.memory.borrow_mut().remove(&ptr.addr);
    }

    fn upload(&self, dst: DevPtr, src: &[u8]) -> BackendResult<()> {
        let p = self.bytes(DevPtr {
            bytes: src.len(),
            ..dst
        })?;
        // SAFETY: p holds at least src.len() bytes (checked), distinct from src.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), p, src.len()) };
        Ok(())
    }

    fn download(&self, src: DevPtr, dst: &mut [u8]) -> BackendResult<()> {
        let p = self.bytes(DevPtr {
            bytes: dst.len(),
            ..src
        })?;
        // SAFETY: as in upload.
        unsafe { std::ptr::copy_nonoverlapping(p, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    fn memset_zero(&self, dst: DevPtr) -> BackendResult<()> {
        let p = self.bytes(dst)?;
        // SAFETY: p holds dst.bytes bytes.
        unsafe { std::ptr::write_bytes(p, 0, dst.bytes) };
        Ok(())
    }

    /// Synchronous: the launch has finished when this returns.
    fn launch(
        &self,
        family: Family,
        kernel: &str,
        dims: LaunchDims,
        args: &[Arg],
    ) -> BackendResult<()> {
        let source = self.kernels_dir.join(format!("{}.cu", family.stem()));
        self.launch_source(&source, kernel, dims, args)
    }

    fn synchronize(&self) -> BackendResult<()> {
        Ok(())
    }

    /// Host wall time of the emulated launches: what the CPU spent, not a GPU time.
    fn time(&self, f: &mut dyn FnMut() -> BackendResult<()>) -> BackendResult<f64> {
        let t = std::time::Instant::now();
        f()?;
        Ok(t.elapsed().as_secs_f64())
    }
}
