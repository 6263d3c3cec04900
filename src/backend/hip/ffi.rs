//! The HIP runtime calls this backend makes, and the enum values it passes.
//!
//! hip-sys links `libamdhip64` (its build script emits `-l amdhip64` from `HIP_PATH`) and
//! gives the handle types, but its functions return `hipError_t` as a *Rust* enum generated
//! from ROCm 5 headers. A status the runtime returns that the enum lacks (ROCm 6 and 7 added
//! codes, e.g. 911/912) would be an invalid enum value: undefined behaviour, not an error.
//! So the few calls used here are declared again with the status as a plain C `int` (which
//! is what a C enum is in the x86-64 / aarch64 ABIs) and enum arguments as `int` with the
//! values below. The symbols are the same ones hip-sys binds; only the Rust types differ.
//!
//! Every call here has the same C signature in ROCm 5.x, 6.x and 7.x, and every enum value
//! is the same in all three: checked against Debian's 5.2.3 headers (installed here, and
//! hip-sys's bindings in the tests below) and against the ROCm 7-era
//! `include/hip/hip_runtime_api.h` of ROCm/rocm-systems. Deliberately absent:
//! `hipGetDeviceProperties` / `hipDeviceProp_t` (renamed to `...R0600` with a new layout in
//! ROCm 6) and `hipDeviceAttributeGcnArchName` (10004 in ROCm 5, "Unused5" since ROCm 6).

use std::os::raw::{c_char, c_int, c_uint, c_void};

pub use hip_sys::hiprt::{hipEvent_t, hipFunction_t, hipModule_t, hipStream_t};

/// A `hipError_t` as the runtime returns it.
pub type Status = c_int;

pub const SUCCESS: Status = 0;
pub const ERROR_INSUFFICIENT_DRIVER: Status = 35;
pub const ERROR_INVALID_DEVICE_FUNCTION: Status = 98;
pub const ERROR_NO_DEVICE: Status = 100;
pub const ERROR_INVALID_IMAGE: Status = 200;
pub const ERROR_NO_BINARY_FOR_GPU: Status = 209;
pub const ERROR_INVALID_KERNEL_FILE: Status = 218;
pub const ERROR_SHARED_OBJECT_INIT_FAILED: Status = 303;

/// `hipDeviceAttribute_t` values (the CUDA-compatible block; unchanged from ROCm 5.0 to 7.x:
/// later releases only appended after `hipDeviceAttributeMemoryPoolsSupported`).
pub mod attr {
    use std::os::raw::c_int;
    pub const COMPUTE_CAPABILITY_MAJOR: c_int = 23;
    pub const COMPUTE_CAPABILITY_MINOR: c_int = 61;
    pub const MULTIPROCESSOR_COUNT: c_int = 63;
    pub const MAX_SHARED_MEMORY_PER_BLOCK: c_int = 74;
    pub const WARP_SIZE: c_int = 87;
}

/// `hipFuncAttributeMaxDynamicSharedMemorySize` (CUDA's value, never changed).
pub const FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_MEMORY_SIZE: c_int = 8;
/// `hipMemcpyKind` (CUDA's values).
pub const MEMCPY_HOST_TO_DEVICE: c_int = 1;
pub const MEMCPY_DEVICE_TO_HOST: c_int = 2;

extern "C" {
    pub fn hipGetDeviceCount(count: *mut c_int) -> Status;
    pub fn hipSetDevice(device_id: c_int) -> Status;
    pub fn hipDeviceGet(device: *mut c_int, ordinal: c_int) -> Status;
    pub fn hipDeviceGetName(name: *mut c_char, len: c_int, device: c_int) -> Status;
    pub fn hipDeviceGetAttribute(value: *mut c_int, attr: c_int, device_id: c_int) -> Status;
    pub fn hipRuntimeGetVersion(version: *mut c_int) -> Status;
    pub fn hipGetErrorName(error: Status) -> *const c_char;

    pub fn hipMalloc(ptr: *mut *mut c_void, size: usize) -> Status;
    pub fn hipFree(ptr: *mut c_void) -> Status;
    pub fn hipMemcpy(dst: *mut c_void, src: *const c_void, size: usize, kind: c_int) -> Status;
    pub fn hipMemset(dst: *mut c_void, value: c_int, size: usize) -> Status;

    pub fn hipModuleLoadData(module: *mut hipModule_t, image: *const c_void) -> Status;
    pub fn hipModuleUnload(module: hipModule_t) -> Status;
    pub fn hipModuleGetFunction(
        function: *mut hipFunction_t,
        module: hipModule_t,
        name: *const c_char,
    ) -> Status;
    #[allow(clippy::too_many_arguments)]
    pub fn hipModuleLaunchKernel(
        f: hipFunction_t,
        grid_x: c_uint,
        grid_y: c_uint,
        grid_z: c_uint,
        block_x: c_uint,
        block_y: c_uint,
        block_z: c_uint,
        shared_bytes: c_uint,
        stream: hipStream_t,
        kernel_params: *mut *mut c_void,
        extra: *mut *mut c_void,
    ) -> Status;
    pub fn hipFuncSetAttribute(func: *const c_void, attr: c_int, value: c_int) -> Status;

    pub fn hipDeviceSynchronize() -> Status;
    pub fn hipEventCreate(event: *mut hipEvent_t) -> Status;
    pub fn hipEventRecord(event: hipEvent_t, stream: hipStream_t) -> Status;
    pub fn hipEventSynchronize(event: hipEvent_t) -> Status;
    pub fn hipEventElapsedTime(ms: *mut f32, start: hipEvent_t, stop: hipEvent_t) -> Status;
    pub fn hipEventDestroy(event: hipEvent_t) -> Status;
}

#[cfg(test)]
mod tests {
    use super::*;
    use hip_sys::hiprt::{hipDeviceAttribute_t as A, hipError_t as E, hipFuncAttribute};

    /// Our numbers against hip-sys's bindgen output (generated from real HIP headers), so a
    /// typo here cannot pass. The ROCm 6/7 side was checked by reading the newer header.
    #[test]
    fn enum_values_match_the_hip_headers() {
        assert_eq!(
            attr::COMPUTE_CAPABILITY_MAJOR,
            A::hipDeviceAttributeComputeCapabilityMajor as c_int
        );
        assert_eq!(
            attr::COMPUTE_CAPABILITY_MINOR,
            A::hipDeviceAttributeComputeCapabilityMinor as c_int
        );
        assert_eq!(
            attr::MULTIPROCESSOR_COUNT,
            A::hipDeviceAttributeMultiprocessorCount as c_int
        );
        assert_eq!(
            attr::MAX_SHARED_MEMORY_PER_BLOCK,
            A::hipDeviceAttributeMaxSharedMemoryPerBlock as c_int
        );
        assert_eq!(attr::WARP_SIZE, A::hipDeviceAttributeWarpSize as c_int);
        assert_eq!(
            FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_MEMORY_SIZE,
            hipFuncAttribute::hipFuncAttributeMaxDynamicSharedMemorySize as c_int
        );
        assert_eq!(SUCCESS, E::hipSuccess as c_int);
        assert_eq!(
            ERROR_INSUFFICIENT_DRIVER,
            E::hipErrorInsufficientDriver as c_int
        );
        assert_eq!(
            ERROR_INVALID_DEVICE_FUNCTION,
            E::hipErrorInvalidDeviceFunction as c_int
        );
        assert_eq!(ERROR_NO_DEVICE, E::hipErrorNoDevice as c_int);
        assert_eq!(ERROR_INVALID_IMAGE, E::hipErrorInvalidImage as c_int);
        assert_eq!(ERROR_NO_BINARY_FOR_GPU, E::hipErrorNoBinaryForGpu as c_int);
        assert_eq!(
            ERROR_INVALID_KERNEL_FILE,
            E::hipErrorInvalidKernelFile as c_int
        );
        assert_eq!(
            ERROR_SHARED_OBJECT_INIT_FAILED,
            E::hipErrorSharedObjectInitFailed as c_int
        );
        assert_eq!(
            MEMCPY_HOST_TO_DEVICE,
            hip_sys::hiprt::hipMemcpyKind::hipMemcpyHostToDevice as c_int
        );
        assert_eq!(
            MEMCPY_DEVICE_TO_HOST,
            hip_sys::hiprt::hipMemcpyKind::hipMemcpyDeviceToHost as c_int
        );
    }
}
