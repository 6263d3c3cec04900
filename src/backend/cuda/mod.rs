//! CUDA backend: `CudaApi` implements `crate::gpu::GpuApi` over the CUDA driver API through
//! cudarc with dynamic loading, so the binary builds and starts on machines with no NVIDIA
//! driver and reports that as an error instead of cudarc's panic.
//!
//! Code objects are the cubins (or fatbins) `cargo xtask build` writes, one per kernel
//! family, loaded lazily the first time a family's kernel is launched.

mod driver;

use crate::backend::{BackendError, BackendResult};
use crate::gpu::{Arg, DevPtr, Family, GpuApi, GpuProps, LaunchDims};
use cudarc::driver::result::{self as cu, DriverError};
use cudarc::driver::sys;
use driver::{driver_text, kernel_module_version, NVIDIA_VERSION_FILE};
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::path::{Path, PathBuf};

/// "cuCall: CUDA_ERROR_X (description)" as a device error.
fn device_err(call: &str, e: DriverError) -> BackendError {
    let name = e
        .error_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("{:?}", e.0));
    let text = e
        .error_string()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    BackendError::Device(format!("{call}: {name} ({text})"))
}

fn ck<T>(call: &str, r: Result<T, DriverError>) -> BackendResult<T> {
    r.map_err(|e| device_err(call, e))
}

/// Is libcuda loadable? Every cudarc call panics when it is not, so this comes first.
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen the library by its usual names.
    unsafe { sys::is_culib_present() }
}

/// One CUDA device, its primary context and one non-blocking stream.
pub struct CudaApi {
    props: GpuProps,
    driver: String,
    dev: sys::CUdevice,
    ctx: sys::CUcontext,
    stream: sys::CUstream,
    dir: PathBuf,
    /// Load `<stem>.fatbin` only, never the cubin: an older target's PTX on this newer card
    /// (`crate::ptx`), which the driver compiles at load.
    fatbin_only: bool,
    /// The target whose code objects `dir` holds (the card's arch unless `run_as_ptx`).
    build_target: String,
    modules: RefCell<HashMap<Family, sys::CUmodule>>,
    functions: RefCell<HashMap<(Family, String), sys::CUfunction>>,
}

impl CudaApi {
    /// Open device `ordinal`; kernels come from `<code_object_dir>/<family stem>.cubin`.
    pub fn open(ordinal: usize, code_object_dir: &Path) -> BackendResult<CudaApi> {
        if !driver_present() {
            return Err(BackendError::Device(
                "no CUDA driver (libcuda.so not found): install the NVIDIA driver, or run the cpu target".into(),
            ));
        }
        if let Err(e) = cu::init() {
            if e.0 == sys::CUresult::CUDA_ERROR_NO_DEVICE {
                return Err(BackendError::Device("no CUDA device".into()));
            }
            return Err(device_err("cuInit", e));
        }
        let count = match cu::device::get_count() {
            Ok(n) => n,
            Err(e) if e.0 == sys::CUresult::CUDA_ERROR_NO_DEVICE => 0,
            Err(e) => return Err(device_err("cuDeviceGetCount", e)),
        };
        if count <= 0 {
            return Err(BackendError::Device("no CUDA device".into()));
        }
        if ordinal >= count as usize {
            return Err(BackendError::Device(format!(
                "CUDA device {ordinal} does not exist: the driver sees {count} device(s)"
            )));
        }
        let dev = ck("cuDeviceGet", cu::device::get(ordinal as i32))?;
        // SAFETY: dev is a valid device handle; the primary context is released in Drop.
        let ctx = ck("cuDevicePrimaryCtxRetain", unsafe {
            cu::primary_ctx::retain(dev)
        })?;
        // SAFETY: ctx was just retained.
        ck("cuCtxSetCurrent", unsafe { cu::ctx::set_current(ctx) })?;
        let attr = |a: sys::CUdevice_attribute, call: &str| -> BackendResult<i32> {
            // SAFETY: dev is valid; the attribute is a plain query.
            ck(call, unsafe { cu::device::get_attribute(dev, a) })
        };
        use sys::CUdevice_attribute as A;
        let major = attr(
            A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
            "cuDeviceGetAttribute(major)",
        )?;
        let minor = attr(
            A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
            "cuDeviceGetAttribute(minor)",
        )?;
        let sms = attr(
            A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            "cuDeviceGetAttribute(SM count)",
        )?;
        let warp = attr(
            A::CU_DEVICE_ATTRIBUTE_WARP_SIZE,
            "cuDeviceGetAttribute(warp size)",
        )?;
        let shared = attr(
            A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            "cuDeviceGetAttribute(max shared per block opt-in)",
        )?;
        let name = ck("cuDeviceGetName", cu::device::get_name(dev))?;
        let mut version = 0i32;
        // SAFETY: writes one int.
        ck(
            "cuDriverGetVersion",
            unsafe { sys::cuDriverGetVersion(&mut version) }.result(),
        )?;
        let stream = ck(
            "cuStreamCreate",
            cu::stream::create(cu::stream::StreamKind::NonBlocking),
        )?;
        Ok(CudaApi {
            props: GpuProps {
                name,
                arch: format!("sm_{major}{minor}"),
                multiprocessors: sms as u32,
                warp_size: warp as u32,
                max_shared_per_block: shared as u32,
            },
            driver: driver_text(
                version,
                std::fs::read_to_string(NVIDIA_VERSION_FILE)
                    .ok()
                    .as_deref()
                    .and_then(kernel_module_version),
            ),
            dev,
            ctx,
            stream,
            dir: code_object_dir.to_path_buf(),
            fatbin_only: false,
            build_target: format!("sm_{major}{minor}"),
            modules: RefCell::new(HashMap::new()),
            functions: RefCell::new(HashMap::new()),
        })
    }

    /// Driver version, free text ("CUDA driver 13.0 (580.159.04)").
    pub fn driver(&self) -> &str {
        &self.driver
    }

    /// Run an older target's PTX on this card (`crate::ptx::Mode::Ptx`): load the fatbins
    /// (whose PTX the driver compiles for this card), never the target's cubins, and allow
    /// a block no more shared memory than the target has (`shared_limit`), so a launch
    /// that would not fit on the target's card fails here too.
    pub fn run_as_ptx(&mut self, target: &str, shared_limit: u32) {
        self.fatbin_only = true;
        self.build_target = target.to_string();
        self.props.max_shared_per_block = self.props.max_shared_per_block.min(shared_limit);
    }

    /// Load every kernel family's code object now (in PTX mode the driver compiles each
    /// PTX here), so a driver that cannot is a reason before any work, not an error per
    /// check.
    pub fn load_all(&self) -> BackendResult<()> {
        self.bind()?;
        for f in Family::ALL {
            self.module(f)?;
        }
        Ok(())
    }

    fn bind(&self) -> BackendResult<()> {
        // SAFETY: the context is retained for the life of self.
        ck("cuCtxSetCurrent", unsafe { cu::ctx::set_current(self.ctx) })
    }

    fn build_hint(&self) -> String {
        format!("cargo xtask build --target {}", self.build_target)
    }

    fn module(&self, family: Family) -> BackendResult<sys::CUmodule> {
        if let Some(m) = self.modules.borrow().get(&family) {
            return Ok(*m);
        }
        let stem = family.stem();
        let fatbin = self.dir.join(format!("{stem}.fatbin"));
        let candidates = if self.fatbin_only {
            vec![fatbin]
        } else {
            vec![self.dir.join(format!("{stem}.cubin")), fatbin]
        };
        let Some(path) = candidates.iter().find(|p| p.is_file()) else {
            let nor = if self.fatbin_only {
                ""
            } else {
                " (nor .fatbin)"
            };
            return Err(BackendError::Device(format!(
                "{} not found{nor}: build the {stem} kernels with `{}`",
                candidates[0].display(),
                self.build_hint()
            )));
        };
        let image = std::fs::read(path)
            .map_err(|e| BackendError::Device(format!("cannot read {}: {e}", path.display())))?;
        // SAFETY: image is a complete cubin/fatbin read from disk and outlives the call.
        let loaded = unsafe { cu::module::load_data(image.as_ptr().cast::<c_void>()) };
        let module = match loaded {
            Ok(m) => m,
            Err(e)
                if e.0 == sys::CUresult::CUDA_ERROR_NO_BINARY_FOR_GPU
                    || e.0 == sys::CUresult::CUDA_ERROR_INVALID_IMAGE =>
            {
                return Err(BackendError::Device(format!(
                    "{} has no code for this {} ({}): rebuild with `{}`",
                    path.display(),
                    self.props.arch,
                    device_err("cuModuleLoadData", e),
                    self.build_hint()
                )))
            }
            Err(e)
                if e.0 == sys::CUresult::CUDA_ERROR_UNSUPPORTED_PTX_VERSION
                    || e.0 == sys::CUresult::CUDA_ERROR_INVALID_PTX
                    || e.0 == sys::CUresult::CUDA_ERROR_JIT_COMPILER_NOT_FOUND =>
            {
                return Err(BackendError::Device(format!(
                    "the driver ({}) cannot compile the PTX of {} for this {} ({}): a driver at \
                     least as new as the nvcc that built it is needed (update the driver, or \
                     build with the nvcc of this driver's CUDA version)",
                    self.driver,
                    path.display(),
                    self.props.arch,
                    device_err("cuModuleLoadData", e)
                )))
            }
            Err(e) => {
                return Err(device_err(
                    &format!("cuModuleLoadData({})", path.display()),
                    e,
                ))
            }
        };
        self.modules.borrow_mut().insert(family, module);
        Ok(module)
    }

    fn function(&self, family: Family, kernel: &str) -> BackendResult<sys::CUfunction> {
        let key = (family, kernel.to_string());
        if let Some(f) = self.functions.borrow().get(&key) {
            return Ok(*f);
        }
        let module = self.module(family)?;
        let name = CString::new(kernel).map_err(|_| {
            BackendError::Input(format!("kernel name {kernel:?} contains a NUL byte"))
        })?;
        // SAFETY: module is loaded and stays loaded until Drop.
        let f = ck(&format!("cuModuleGetFunction({kernel})"), unsafe {
            cu::module::get_function(module, name)
        })?;
        self.functions.borrow_mut().insert(key, f);
        Ok(f)
    }

    fn sync_stream(&self, call: &str) -> BackendResult<()> {
        // SAFETY: the stream lives as long as self.
        ck(call, unsafe { cu::stream::synchronize(self.stream) })
    }
}

impl Drop for CudaApi {
    fn drop(&mut self) {
        // Best effort: errors at teardown have no one to go to.
        let _ = self.bind();
        // SAFETY: every handle below was created by this value and is not used afterwards.
        unsafe {
            let _ = cu::stream::synchronize(self.stream);
            for m in self.modules.borrow().values() {
                let _ = cu::module::unload(*m);
            }
            let _ = cu::stream::destroy(self.stream);
            let _ = cu::primary_ctx::release(self.dev);
        }
    }
}

/// Kernel parameters by value: one 8-byte slot per argument, the value at the slot's start,
/// which is where cuLaunchKernel reads the parameter's declared size from.
fn param_slots(args: &[Arg]) -> Vec<[u8; 8]> {
    args.iter()
        .map(|a| {
            let mut slot = [0u8; 8];
            match *a {
                Arg::Ptr(p) => slot.copy_from_slice(&p.addr.to_ne_bytes()),
                Arg::Null => {}
                Arg::I32(v) => slot[..4].copy_from_slice(&v.to_ne_bytes()),
                Arg::U32(v) => slot[..4].copy_from_slice(&v.to_ne_bytes()),
                Arg::I64(v) => slot.copy_from_slice(&v.to_ne_bytes()),
                Arg::F32(v) => slot[..4].copy_from_slice(&v.to_ne_bytes()),
            }
            slot
        })
        .collect()
}

impl GpuApi for CudaApi {
    fn props(&self) -> &GpuProps {
        &self.props
    }

    fn alloc(&self, bytes: usize) -> BackendResult<DevPtr> {
        self.bind()?;
        // cuMemAlloc refuses 0 bytes; an empty buffer still gets a valid address.
        // SAFETY: plain allocation.
        let addr = ck(&format!("cuMemAlloc({bytes} bytes)"), unsafe {
            cu::malloc_sync(bytes.max(1))
        })?;
        Ok(DevPtr { addr, bytes })
    }

    fn free(&self, ptr: DevPtr) {
        if self.bind().is_ok() {
            // SAFETY: ptr came from alloc; callers free each allocation once.
            let _ = unsafe { cu::free_sync(ptr.addr) };
        }
    }

    fn upload(&self, dst: DevPtr, src: &[u8]) -> BackendResult<()> {
        if src.len() > dst.bytes {
            return Err(BackendError::Input(format!(
                "upload of {} bytes into {} bytes",
                src.len(),
                dst.bytes
            )));
        }
        self.bind()?;
        // SAFETY: dst holds at least src.len() bytes; the copy completes before returning.
        ck("cuMemcpyHtoDAsync", unsafe {
            cu::memcpy_htod_async(dst.addr, src, self.stream)
        })?;
        self.sync_stream("cuStreamSynchronize(upload)")
    }

    fn download(&self, src: DevPtr, dst: &mut [u8]) -> BackendResult<()> {
        if dst.len() > src.bytes {
            return Err(BackendError::Input(format!(
                "download of {} bytes from {} bytes",
                dst.len(),
                src.bytes
            )));
        }
        self.bind()?;
        // SAFETY: src holds at least dst.len() bytes; the copy completes before returning.
        ck("cuMemcpyDtoHAsync", unsafe {
            cu::memcpy_dtoh_async(dst, src.addr, self.stream)
        })?;
        self.sync_stream("cuStreamSynchronize(download)")
    }

    fn memset_zero(&self, dst: DevPtr) -> BackendResult<()> {
        self.bind()?;
        // SAFETY: dst is a live allocation of dst.bytes bytes.
        ck("cuMemsetD8Async", unsafe {
            cu::memset_d8_async(dst.addr, 0, dst.bytes, self.stream)
        })?;
        self.sync_stream("cuStreamSynchronize(memset)")
    }

    fn launch(
        &self,
        family: Family,
        kernel: &str,
        dims: LaunchDims,
        args: &[Arg],
    ) -> BackendResult<()> {
        self.bind()?;
        let f = self.function(family, kernel)?;
        // Opt in whenever there is dynamic shared memory: the 48 KiB default covers static and
        // dynamic together, so a kernel with 27 KiB of static shared memory (the cluster
        // top-k) fails to launch with 32 KiB of dynamic without it (seen on the H200,
        // 2026-12-01: CUDA_ERROR_INVALID_VALUE at topk_decode_3q_64k).
        if dims.shared_bytes > 0 {
            if dims.shared_bytes > self.props.max_shared_per_block {
                return Err(BackendError::Shape(format!(
                    "{kernel} asks for {} bytes of shared memory; this {} allows {}",
                    dims.shared_bytes, self.props.arch, self.props.max_shared_per_block
                )));
            }
            // SAFETY: f is a live function handle.
            ck(
                "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
                unsafe {
                    cu::function::set_function_attribute(
                        f,
                        sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        dims.shared_bytes as i32,
                    )
                },
            )?;
        }
        let mut slots = param_slots(args);
        let mut params: Vec<*mut c_void> = slots
            .iter_mut()
            .map(|s| s.as_mut_ptr().cast::<c_void>())
            .collect();
        // SAFETY: params point at `slots`, alive until the call returns (the driver copies
        // parameter values at launch); the caller's argument list matches the kernel's C
        // signature (gpu::topk and friends are written against kernels/*.cu).
        ck(&format!("cuLaunchKernel({kernel})"), unsafe {
            cu::launch_kernel(
                f,
                dims.grid,
                dims.block,
                dims.shared_bytes,
                self.stream,
                &mut params,
            )
        })
    }

    fn synchronize(&self) -> BackendResult<()> {
        self.bind()?;
        self.sync_stream("cuStreamSynchronize")
    }

    fn time(&self, f: &mut dyn FnMut() -> BackendResult<()>) -> BackendResult<f64> {
        self.bind()?;
        let start = ck(
            "cuEventCreate",
            cu::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT),
        )?;
        let end = match cu::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT) {
            Ok(e) => e,
            Err(e) => {
                // SAFETY: start was just created.
                let _ = unsafe { cu::event::destroy(start) };
                return Err(device_err("cuEventCreate", e));
            }
        };
        let result = (|| {
            // SAFETY: events and stream are live for this closure.
            ck("cuEventRecord(start)", unsafe {
                cu::event::record(start, self.stream)
            })?;
            f()?;
            ck("cuEventRecord(end)", unsafe {
                cu::event::record(end, self.stream)
            })?;
            ck("cuEventSynchronize", unsafe { cu::event::synchronize(end) })?;
            let ms = ck("cuEventElapsedTime", unsafe {
                cu::event::elapsed(start, end)
            })?;
            Ok(f64::from(ms) / 1e3)
        })();
        // SAFETY: both events were created above and are no longer used.
        unsafe {
            let _ = cu::event::destroy(start);
            let _ = cu::event::destroy(end);
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_without_a_driver_or_device_is_an_error_not_a_panic() {
        let dir = std::env::temp_dir();
        match CudaApi::open(0, &dir) {
            // A machine with a GPU opens it; then a missing code object must be an error.
            Ok(api) => {
                let err = api.launch(
                    Family::Topk,
                    "qsa_topk_register",
                    LaunchDims {
                        grid: (1, 1, 1),
                        block: (256, 1, 1),
                        shared_bytes: 0,
                    },
                    &[],
                );
                let msg = err.expect_err("no code object in the temp dir").to_string();
                assert!(msg.contains("cargo xtask build --target sm_"), "{msg}");
            }
            Err(e) => {
                let msg = e.to_string();
                if driver_present() {
                    assert!(msg.contains("CUDA"), "{msg}");
                } else {
                    assert_eq!(
                        msg,
                        "device error: no CUDA driver (libcuda.so not found): install the NVIDIA driver, or run the cpu target"
                    );
                }
            }
        }
    }

    #[test]
    fn parameters_sit_at_the_start_of_their_slots() {
        let slots = param_slots(&[
            Arg::I32(-2),
            Arg::Null,
            Arg::Ptr(DevPtr {
                addr: 0x1234,
                bytes: 4,
            }),
        ]);
        assert_eq!(i32::from_ne_bytes(slots[0][..4].try_into().unwrap()), -2);
        assert_eq!(slots[1], [0u8; 8]);
        assert_eq!(u64::from_ne_bytes(slots[2]), 0x1234);
    }
}
