//! HIP backend: `HipApi` implements `gpu::GpuApi` on one AMD GPU with the HIP runtime's
//! module API, loaded from `libamdhip64` at run time (`ffi`). Built, not run: no AMD GPU
//! was available where this was written; see the notes below for what that leaves unproven.
//!
//! - `ffi`: the runtime calls, declared with `int` status codes (why: see there). Only
//!   calls whose C signature and enum values are the same in ROCm 5, 6 and 7; device facts
//!   only through `hipDeviceGetAttribute`, never `hipDeviceProp_t`.
//! - `status`: every non-success `hipError_t` becomes `BackendError::Device` naming the
//!   call, the runtime's error name and the number.
//! - `code_object`: the gfx target of a code object, read from its header. That is where
//!   the arch name comes from: the runtime offers no stable string for it. A trial
//!   `hipModuleLoadData` in `HipApi::open` then proves the device runs that code
//!   (`hipErrorNoBinaryForGpu` or similar on a mismatch). `QSA_HIP_ARCH` can assert the
//!   target, or name it when a header cannot be read.
//! - `params`: `gpu::Arg`s as the `void**` array `hipModuleLaunchKernel` takes.
//! - `api`: `HipApi` itself.
//!
//! The library at run time: `ffi::lib` dlopens the first of `libamdhip64.so`, `.so.7`,
//! `.so.6`, `.so.5` (then the same under `$ROCM_PATH/lib`, `$HIP_PATH/lib`, `/opt/rocm/lib`)
//! on first use, so the one `qsa` binary starts on any machine and links no HIP library
//! (`ldd` shows none; `.ci/run` checks it). No library: `open` returns
//! `BackendError::Device("HIP runtime library not found: tried ...")`, and the target is
//! `built, not run` with that reason. With the library present and no GPU,
//! `hipGetDeviceCount` answers `hipErrorNoDevice` with a count of 0 (5.2.3, here), and
//! `open` returns `BackendError::Device("no HIP device: ...")`, as the CUDA side does.

mod api;
mod code_object;
mod device;
mod ffi;
mod params;
mod status;

pub use api::{code_object_path, HipApi, ARCH_ENV};
pub use code_object::{targets as code_object_targets, GfxTarget};
