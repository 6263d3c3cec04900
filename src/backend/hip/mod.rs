//! HIP backend: `HipApi` implements `gpu::GpuApi` on one AMD GPU with the HIP runtime's
//! module API (hip-sys links `libamdhip64`). Built, not run: no AMD GPU was available
//! where this was written; see the notes below for what that leaves unproven.
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
//! The library at run time: hip-sys links `libamdhip64.so.N` as an ordinary `DT_NEEDED`
//! dependency, so a binary built with `--features hip` does not start at all on a machine
//! without it (the dynamic loader stops before `main`: "error while loading shared
//! libraries: libamdhip64.so.5", exit status 127); no Rust code runs, so no `BackendError`
//! is possible. The soname also pins the ROCm major it was built against (5, 6 and 7 ship
//! `.so.5`, `.so.6`, `.so.7`), so the HIP runner is built on the AMD runner against its
//! ROCm, and the default build (`cuda` only) never links it. With the library present and
//! no GPU, `hipGetDeviceCount` answers `hipErrorNoDevice` with a count of 0 (5.2.3, here),
//! and `open` returns `BackendError::Device("no HIP device: ...")`, as the CUDA side does.

mod api;
mod code_object;
mod ffi;
mod params;
mod status;

pub use api::{code_object_path, HipApi, ARCH_ENV};
pub use code_object::{targets as code_object_targets, GfxTarget};
