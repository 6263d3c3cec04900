//! `EmuApi`: `GpuApi` over host memory and emulated launches, so the host code of
//! src/gpu/ (launch rules, workspaces, splits, dispatch) drives the kernel sources on the
//! CPU exactly as it drives them on a card.

use super::module::EmuModule;
use super::{EmuTarget, Schedule};
use crate::backend::{BackendError, BackendResult};
use crate::dispatch::TargetCaps;
use crate::gpu::{Arg, DevPtr, Family, GpuApi, GpuProps, LaunchDims};
use sha2::{Digest, Sha256};
use std::alloc::Layout;
use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Alignment of every allocation (cudaMalloc gives at least 256).
const ALIGN: usize = 256;
/// Fresh allocations hold this byte, as device memory holds whatever was there: a kernel
/// that reads what nobody wrote gets garbage, not a lucky zero.
const FRESH_BYTE: u8 = 0xcd;

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
    /// Live allocations by address, with the order they were made in.
    memory: RefCell<BTreeMap<u64, (u64, Layout)>>,
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
            Some((_, l)) if l.size() >= p.bytes => Ok(p.addr as *mut u8),
            Some((_, l)) => Err(BackendError::Device(format!(
                "emulated memory: {} bytes at {:#x} used, allocation holds {}",
                p.bytes,
                p.addr,
                l.size()
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
        let mut live: Vec<(u64, u64, Layout)> = self
            .memory
            .borrow()
            .iter()
            .map(|(&a, &(seq, l))| (seq, a, l))
            .collect();
        live.sort_by_key(|x| x.0);
        live.into_iter()
            // SAFETY: a live allocation of l.size() bytes; no launch runs now.
            .map(|(_, addr, l)| {
                unsafe { std::slice::from_raw_parts(addr as *const u8, l.size()) }.to_vec()
            })
            .collect()
    }
}

impl GpuApi for EmuApi {
    fn props(&self) -> &GpuProps {
        &self.props
    }

    fn alloc(&self, bytes: usize) -> BackendResult<DevPtr> {
        let layout = Layout::from_size_align(bytes.max(1), ALIGN)
            .map_err(|e| BackendError::Shape(format!("emulated alloc of {bytes} bytes: {e}")))?;
        // SAFETY: layout has a non-zero size.
        let p = unsafe { std::alloc::alloc(layout) };
        if p.is_null() {
            return Err(BackendError::Device(format!(
                "emulated alloc of {bytes} bytes: out of host memory"
            )));
        }
        // SAFETY: p holds layout.size() bytes.
        unsafe { std::ptr::write_bytes(p, FRESH_BYTE, layout.size()) };
        let seq = self.allocations.get();
        self.allocations.set(seq + 1);
        self.memory.borrow_mut().insert(p as u64, (seq, layout));
        Ok(DevPtr {
            addr: p as u64,
            bytes,
        })
    }

    fn free(&self, ptr: DevPtr) {
        if let Some((_, layout)) = self.memory.borrow_mut().remove(&ptr.addr) {
            // SAFETY: allocated by `alloc` with this layout, removed from the map once.
            unsafe { std::alloc::dealloc(ptr.addr as *mut u8, layout) };
        }
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

impl Drop for EmuApi {
    fn drop(&mut self) {
        for (addr, (_, layout)) in std::mem::take(&mut *self.memory.borrow_mut()) {
            // SAFETY: allocated by `alloc` with this layout and still live.
            unsafe { std::alloc::dealloc(addr as *mut u8, layout) };
        }
    }
}
