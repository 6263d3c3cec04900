//! `HipApi`: `gpu::GpuApi` on one AMD GPU through the HIP runtime (module API).

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::CString;
use std::os::raw::{c_int, c_void};
use std::path::{Path, PathBuf};
use std::ptr::null_mut;

use super::code_object::{self, GfxTarget};
use super::device::*;
use super::ffi::{self, hip, hipEvent_t, hipFunction_t, hipModule_t};
use super::params::KernelParams;
use super::status::{check, device_error, error_name};
use crate::backend::{BackendError, BackendResult};
use crate::gpu::{Arg, DevPtr, Family, GpuApi, GpuProps, LaunchDims};

/// Names the gfx target when the code objects cannot (a compressed bundle), and otherwise
/// asserts it: `QSA_HIP_ARCH=gfx906` makes `open` fail unless the code objects are gfx906.
pub const ARCH_ENV: &str = "QSA_HIP_ARCH";

/// Dynamic LDS above this is requested with `hipFuncSetAttribute` first (CUDA needs the
/// opt-in above 48 KiB; AMD parts have 64 KiB per workgroup except gfx950's 160 KiB).
const SHARED_OPT_IN_ABOVE: u32 = 64 * 1024;

/// Where `cargo xtask build --target gfxNNN` puts a family's code object: `<dir>/<stem>.co`,
/// one bare AMDGPU ELF (or an uncompressed offload bundle) per family, one target per dir.
pub fn code_object_path(dir: &Path, family: Family) -> PathBuf {
    dir.join(format!("{}.co", family.stem()))
}

/// One AMD GPU, its code objects (loaded lazily, one module per family) and the default
/// stream. Holds raw runtime handles and a `RefCell`, so it is neither `Send` nor `Sync`:
/// every call happens on the thread that opened it, where `hipSetDevice(ordinal)` holds
/// (HIP's current device is per thread).
#[derive(Debug)]
pub struct HipApi {
    ordinal: c_int,
    props: GpuProps,
    /// (major, minor) from hipDeviceGetAttribute: the gfx version without its stepping.
    gfx_version: (u32, u32),
    target: GfxTarget,
    runtime_version: String,
    dir: PathBuf,
    modules: RefCell<HashMap<Family, Module>>,
}

#[derive(Debug)]
struct Module {
    handle: hipModule_t,
    path: PathBuf,
    /// The image stays alive as long as the module: not every ROCm release documents that
    /// hipModuleLoadData copies it.
    _image: Vec<u8>,
    kernels: HashMap<String, Kernel>,
}

#[derive(Clone, Copy, Debug)]
struct Kernel {
    func: hipFunction_t,
    /// Largest dynamic LDS already requested with hipFuncSetAttribute.
    shared_opt_in: u32,
}

impl HipApi {
    /// Devices the HIP runtime sees (after HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES).
    /// `hipErrorNoDevice` is zero devices, not an error: it is what the runtime answers on
    /// a machine without an AMD GPU or without `/dev/kfd` (checked with 5.2.3 here).
    pub fn device_count() -> BackendResult<usize> {
        let mut count: c_int = 0;
        // SAFETY: one out-parameter.
        let status = unsafe { (hip()?.hipGetDeviceCount)(&mut count) };
        match status {
            ffi::SUCCESS => Ok(usize::try_from(count).unwrap_or(0)),
            ffi::ERROR_NO_DEVICE => Ok(0),
            ffi::ERROR_INSUFFICIENT_DRIVER => Err(BackendError::Device(format!(
                "no usable HIP device: hipGetDeviceCount: {} ({status}): the amdgpu kernel \
                 driver is older than this ROCm runtime needs",
                error_name(status)
            ))),
            _ => Err(device_error("hipGetDeviceCount", status)),
        }
    }

    /// Open device `ordinal` with the code objects of one gfx target in `code_object_dir`.
    ///
    /// The gfx name comes from the code objects (see `code_object.rs` for why), and the
    /// first one present is loaded here as the proof that this device runs them: a
    /// mismatch fails now, naming the file and the rebuild command, instead of at the
    /// first launch. The other families load on first use.
    pub fn open(ordinal: usize, code_object_dir: &Path) -> BackendResult<Self> {
        let count = Self::device_count()?;
        if count == 0 {
            return Err(BackendError::Device(no_device_message()));
        }
        if ordinal >= count {
            return Err(BackendError::Device(format!(
                "HIP device {ordinal} requested, but the runtime sees {count} device(s) \
                 (HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES may hide some)"
            )));
        }
        let id = ordinal as c_int;
        // SAFETY: plain int argument.
        check(&format!("hipSetDevice({id})"), unsafe {
            (hip()?.hipSetDevice)(id)
        })?;
        let name = device_name(id)?;
        let major = attribute(
            id,
            ffi::attr::COMPUTE_CAPABILITY_MAJOR,
            "ComputeCapabilityMajor",
        )?;
        let minor = attribute(
            id,
            ffi::attr::COMPUTE_CAPABILITY_MINOR,
            "ComputeCapabilityMinor",
        )?;
        let (target, first) = resolve_target(code_object_dir, (major, minor))?;
        let props = GpuProps {
            name,
            arch: target.arch.clone(),
            multiprocessors: attribute(id, ffi::attr::MULTIPROCESSOR_COUNT, "MultiprocessorCount")?,
            warp_size: attribute(id, ffi::attr::WARP_SIZE, "WarpSize")?,
            max_shared_per_block: attribute(
                id,
                ffi::attr::MAX_SHARED_MEMORY_PER_BLOCK,
                "MaxSharedMemoryPerBlock",
            )?,
        };
        let api = HipApi {
            ordinal: id,
            props,
            gfx_version: (major, minor),
            target,
            runtime_version: versions()?,
            dir: code_object_dir.to_path_buf(),
            modules: RefCell::new(HashMap::new()),
        };
        // The trial load: the runtime, not a table, decides whether this device runs them.
        api.load_module(first)?;
        Ok(api)
    }

    /// The gfx target the code objects were built for (and the device accepted).
    pub fn target(&self) -> &GfxTarget {
        &self.target
    }

    /// Runtime and driver versions and the library, free text ("HIP runtime 6.4.43482,
    /// driver 6.4.43482 (libamdhip64.so.6)"),
    /// like `CudaApi::driver`; the runner records it as `device.driver`.
    pub fn driver(&self) -> &str {
        &self.runtime_version
    }

    fn load_module(&self, family: Family) -> BackendResult<()> {
        let path = code_object_path(&self.dir, family);
        let image = read_code_object(&path, &self.target.arch)?;
        match code_object::targets(&image) {
            Ok(t) if t.len() == 1 && t[0] == self.target => {}
            Ok(t) => {
                return Err(BackendError::Device(format!(
                    "{} holds code for {}, but this device's other code objects are {}: \
                     rebuild the directory with `cargo xtask build --target {}`",
                    path.display(),
                    list(&t),
                    self.target,
                    self.target.arch
                )))
            }
            // Unreadable header: only accepted when QSA_HIP_ARCH named the target, and the
            // load below is still the real check.
            Err(_) if std::env::var(ARCH_ENV).is_ok() => {}
            Err(e) => return Err(BackendError::Device(format!("{}: {e}", path.display()))),
        }
        let mut handle: hipModule_t = null_mut();
        // SAFETY: `image` is a whole code object that outlives the module (kept below).
        let status = unsafe { (hip()?.hipModuleLoadData)(&mut handle, image.as_ptr().cast()) };
        if status != ffi::SUCCESS {
            return Err(self.load_error(&path, status));
        }
        self.modules.borrow_mut().insert(
            family,
            Module {
                handle,
                path,
                _image: image,
                kernels: HashMap::new(),
            },
        );
        Ok(())
    }

    fn load_error(&self, path: &Path, status: ffi::Status) -> BackendError {
        let call = format!("hipModuleLoadData({})", path.display());
        let wrong_gpu = matches!(
            status,
            ffi::ERROR_NO_BINARY_FOR_GPU
                | ffi::ERROR_INVALID_KERNEL_FILE
                | ffi::ERROR_INVALID_IMAGE
                | ffi::ERROR_SHARED_OBJECT_INIT_FAILED
        );
        if !wrong_gpu {
            return device_error(&call, status);
        }
        let (major, minor) = self.gfx_version;
        BackendError::Device(format!(
            "{call} failed: {} ({status}): device {} ({}, gfx{major}{minor:x}x by \
             hipDeviceGetAttribute) cannot run code built for {}; build for this device with \
             `cargo xtask build --target gfxNNN` (its arch: `rocminfo | grep gfx`) and \
             point the runner at that directory",
            error_name(status),
            self.ordinal,
            self.props.name,
            self.target,
        ))
    }

    fn kernel(&self, family: Family, name: &str) -> BackendResult<Kernel> {
        if !self.modules.borrow().contains_key(&family) {
            self.load_module(family)?;
        }
        let mut modules = self.modules.borrow_mut();
        let module = modules.get_mut(&family).ok_or_else(|| {
            BackendError::Device(format!("module for {} vanished", family.stem()))
        })?;
        if let Some(k) = module.kernels.get(name) {
            return Ok(*k);
        }
        let c_name = CString::new(name)
            .map_err(|_| BackendError::Input(format!("kernel name {name:?} contains NUL")))?;
        let mut func: hipFunction_t = null_mut();
        // SAFETY: live module handle, NUL-terminated name, one out-parameter.
        let status =
            unsafe { (hip()?.hipModuleGetFunction)(&mut func, module.handle, c_name.as_ptr()) };
        if status != ffi::SUCCESS {
            return Err(BackendError::Device(format!(
                "hipModuleGetFunction({name}) failed: {} ({status}): no kernel `{name}` in {}; \
                 the code object is stale or the name is wrong: rebuild with `cargo xtask \
                 build --target {}`",
                error_name(status),
                module.path.display(),
                self.target.arch
            )));
        }
        let kernel = Kernel {
            func,
            shared_opt_in: 0,
        };
        module.kernels.insert(name.to_string(), kernel);
        Ok(kernel)
    }

    /// Ask for `bytes` of dynamic LDS before a launch that needs more than 64 KiB.
    fn opt_in_shared(
        &self,
        family: Family,
        name: &str,
        func: hipFunction_t,
        bytes: u32,
    ) -> BackendResult<()> {
        let value = c_int::try_from(bytes)
            .map_err(|_| BackendError::Shape(format!("{bytes} bytes of shared memory")))?;
        // SAFETY: a live function handle passed as the `const void*` the call takes.
        let status = unsafe {
            (hip()?.hipFuncSetAttribute)(
                func as *const c_void,
                ffi::FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_MEMORY_SIZE,
                value,
            )
        };
        // Current clr (hip_module.cpp) accepts a module function here and records the
        // value; older releases returned success without doing anything ("No way to set
        // function attribute yet"); a release whose lookup knows only functions registered
        // from a host fat binary may answer hipErrorInvalidDeviceFunction for a module
        // handle. clr checks a module launch's dynamic LDS against the device's LDS size,
        // not against this attribute, so that one answer is not a failure: the launch's
        // own status is the one that counts.
        if status != ffi::SUCCESS && status != ffi::ERROR_INVALID_DEVICE_FUNCTION {
            return Err(device_error(
                &format!("hipFuncSetAttribute({name}, MaxDynamicSharedMemorySize, {bytes})"),
                status,
            ));
        }
        if let Some(k) = self
            .modules
            .borrow_mut()
            .get_mut(&family)
            .and_then(|m| m.kernels.get_mut(name))
        {
            k.shared_opt_in = bytes;
        }
        Ok(())
    }
}

impl GpuApi for HipApi {
    fn props(&self) -> &GpuProps {
        &self.props
    }

    fn alloc(&self, bytes: usize) -> BackendResult<DevPtr> {
        // hipMalloc(0) succeeds with a null pointer; like the CUDA side, an empty buffer
        // still gets a real address, so kernels and `free` never see null for a buffer.
        let mut ptr: *mut c_void = null_mut();
        // SAFETY: one out-parameter.
        check(&format!("hipMalloc({bytes} bytes)"), unsafe {
            (hip()?.hipMalloc)(&mut ptr, bytes.max(1))
        })?;
        Ok(DevPtr {
            addr: ptr as u64,
            bytes,
        })
    }

    fn free(&self, ptr: DevPtr) {
        if ptr.addr != 0 {
            // The trait gives no way to report a failure here; a failing hipFree means an
            // earlier error (a faulted kernel) that the next checked call reports.
            // SAFETY: an address hipMalloc returned.
            if let Ok(h) = hip() {
                let _ = unsafe { (h.hipFree)(ptr.addr as *mut c_void) };
            }
        }
    }

    fn upload(&self, dst: DevPtr, src: &[u8]) -> BackendResult<()> {
        if src.len() > dst.bytes {
            return Err(BackendError::Input(format!(
                "upload of {} bytes into a {}-byte device buffer",
                src.len(),
                dst.bytes
            )));
        }
        if src.is_empty() {
            return Ok(());
        }
        // SAFETY: dst holds at least src.len() bytes (checked above); src is a live slice.
        check(
            &format!("hipMemcpy(host to device, {} bytes)", src.len()),
            unsafe {
                (hip()?.hipMemcpy)(
                    dst.addr as *mut c_void,
                    src.as_ptr().cast(),
                    src.len(),
                    ffi::MEMCPY_HOST_TO_DEVICE,
                )
            },
        )
    }

    fn download(&self, src: DevPtr, dst: &mut [u8]) -> BackendResult<()> {
        if dst.len() > src.bytes {
            return Err(BackendError::Input(format!(
                "download of {} bytes from a {}-byte device buffer",
                dst.len(),
                src.bytes
            )));
        }
        if dst.is_empty() {
            return Ok(());
        }
        // SAFETY: src holds at least dst.len() bytes (checked above); dst is a live slice.
        check(
            &format!("hipMemcpy(device to host, {} bytes)", dst.len()),
            unsafe {
                (hip()?.hipMemcpy)(
                    dst.as_mut_ptr().cast(),
                    src.addr as *const c_void,
                    dst.len(),
                    ffi::MEMCPY_DEVICE_TO_HOST,
                )
            },
        )
    }

    fn memset_zero(&self, dst: DevPtr) -> BackendResult<()> {
        if dst.bytes == 0 {
            return Ok(());
        }
        // SAFETY: the whole allocation.
        check(&format!("hipMemset({} bytes)", dst.bytes), unsafe {
            (hip()?.hipMemset)(dst.addr as *mut c_void, 0, dst.bytes)
        })?;
        // hipMemset may return before the device is done; the trait promises a finished
        // call (the CUDA side synchronizes its stream here too).
        self.synchronize()
    }

    fn launch(
        &self,
        family: Family,
        kernel: &str,
        dims: LaunchDims,
        args: &[Arg],
    ) -> BackendResult<()> {
        check_dims(kernel, &dims, self.props.max_shared_per_block)?;
        let k = self.kernel(family, kernel)?;
        if dims.shared_bytes > SHARED_OPT_IN_ABOVE && dims.shared_bytes > k.shared_opt_in {
            self.opt_in_shared(family, kernel, k.func, dims.shared_bytes)?;
        }
        let mut params = KernelParams::new(args);
        let (g, b) = (dims.grid, dims.block);
        // SAFETY: live function; `params` holds one pointer per argument and outlives the
        // call (the runtime copies the values during it); null stream = default stream.
        let status = unsafe {
            (hip()?.hipModuleLaunchKernel)(
                k.func,
                g.0,
                g.1,
                g.2,
                b.0,
                b.1,
                b.2,
                dims.shared_bytes,
                null_mut(),
                params.as_mut_ptr(),
                null_mut(),
            )
        };
        check(
            &format!(
                "hipModuleLaunchKernel({kernel} in {}.co, grid {g:?}, block {b:?}, {} B dynamic LDS)",
                family.stem(),
                dims.shared_bytes
            ),
            status,
        )
    }

    fn synchronize(&self) -> BackendResult<()> {
        // SAFETY: no arguments.
        check("hipDeviceSynchronize", unsafe {
            (hip()?.hipDeviceSynchronize)()
        })
    }

    fn time(&self, f: &mut dyn FnMut() -> BackendResult<()>) -> BackendResult<f64> {
        let start = Event::new()?;
        let stop = Event::new()?;
        // SAFETY (all four): live events, null stream = the default stream launches use.
        check("hipEventRecord(start)", unsafe {
            (hip()?.hipEventRecord)(start.0, null_mut())
        })?;
        f()?;
        check("hipEventRecord(stop)", unsafe {
            (hip()?.hipEventRecord)(stop.0, null_mut())
        })?;
        check("hipEventSynchronize(stop)", unsafe {
            (hip()?.hipEventSynchronize)(stop.0)
        })?;
        let mut ms = 0f32;
        check("hipEventElapsedTime", unsafe {
            (hip()?.hipEventElapsedTime)(&mut ms, start.0, stop.0)
        })?;
        Ok(f64::from(ms) * 1e-3)
    }
}

impl Drop for HipApi {
    fn drop(&mut self) {
        for module in self.modules.get_mut().values() {
            // Nothing to report to from drop; the process is usually about to exit.
            // SAFETY: a module this API loaded and no one else holds.
            if let Ok(h) = hip() {
                let _ = unsafe { (h.hipModuleUnload)(module.handle) };
            }
        }
    }
}

/// A timing event, destroyed on every path out of `time`.
struct Event(hipEvent_t);

impl Event {
    fn new() -> BackendResult<Self> {
        let mut event: hipEvent_t = null_mut();
        // SAFETY: one out-parameter.
        check("hipEventCreate", unsafe {
            (hip()?.hipEventCreate)(&mut event)
        })?;
        Ok(Event(event))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: an event hipEventCreate returned.
        if let Ok(h) = hip() {
            let _ = unsafe { (h.hipEventDestroy)(self.0) };
        }
    }
}

/// Limits HIP enforces on every launch, checked here first so the error names them:
/// no zero dimension; gridDim.x <= 2^31 - 1, gridDim.y/z <= 65536 (clr 6+); and
/// gridDim * blockDim < 2^32 per dimension (all releases); dynamic LDS within the device's.
fn check_dims(kernel: &str, dims: &LaunchDims, max_shared: u32) -> BackendResult<()> {
    let (g, b) = (dims.grid, dims.block);
    let grid = [g.0, g.1, g.2];
    let block = [b.0, b.1, b.2];
    let shape = |why: String| Err(BackendError::Shape(format!("launch of {kernel}: {why}")));
    if grid.contains(&0) || block.contains(&0) {
        return shape(format!("grid {g:?} / block {b:?} has a zero dimension"));
    }
    if g.0 > i32::MAX as u32 || g.1 > 65536 || g.2 > 65536 {
        return shape(format!("grid {g:?} is over HIP's (2^31-1, 65536, 65536)"));
    }
    for axis in 0..3 {
        if u64::from(grid[axis]) * u64::from(block[axis]) > u64::from(u32::MAX) {
            return shape(format!(
                "grid {g:?} x block {b:?} reaches 2^32 work-items in one dimension, which HIP \
                 does not launch"
            ));
        }
    }
    if dims.shared_bytes > max_shared {
        return shape(format!(
            "{} bytes of dynamic LDS, but this device gives a workgroup at most {max_shared}",
            dims.shared_bytes
        ));
    }
    Ok(())
}

#[cfg(test)]
#[path = "api_tests.rs"]
mod tests;
