//! The HIP runtime calls this backend makes, loaded from `libamdhip64` at run time, and the
//! enum values it passes.
//!
//! Why at run time: a link-time dependency (`DT_NEEDED libamdhip64.so.N`) stops the dynamic
//! loader before `main` on any machine without ROCm (exit 127, "error while loading shared
//! libraries"), so a runner built with the HIP backend could not even say why; and its
//! soname pins one ROCm major. Loaded here with `libloading` (as cudarc loads libcuda), the
//! one `qsa` binary starts anywhere, and a missing library is a `BackendError::Device`
//! naming every file tried. `ldd target/*/qsa` shows no HIP library (checked in `.ci/run`).
//!
//! Only the calls qsa makes are declared, with the status as a plain C `int` (what a C enum
//! is in the x86-64 / aarch64 ABIs: a status newer than this file is a number, never an
//! invalid Rust enum) and enum arguments as `int` with the values below. Every call has the
//! same C signature in ROCm 5.x, 6.x and 7.x and every value is the same in all three:
//! checked against Debian's 5.2.3 headers (the test below compiles them) and against the
//! ROCm 7-era `include/hip/hip_runtime_api.h` of ROCm/rocm-systems. Deliberately absent:
//! `hipGetDeviceProperties` / `hipDeviceProp_t` (renamed to `...R0600` with a new layout in
//! ROCm 6) and `hipDeviceAttributeGcnArchName` (10004 in ROCm 5, "Unused5" since ROCm 6).

use std::os::raw::{c_char, c_int, c_uint, c_void};
use std::sync::OnceLock;

/// Opaque runtime handles (pointers to the runtime's own structs), named as in the headers.
#[allow(non_camel_case_types)]
pub type hipModule_t = *mut c_void;
#[allow(non_camel_case_types)]
pub type hipFunction_t = *mut c_void;
#[allow(non_camel_case_types)]
pub type hipEvent_t = *mut c_void;
#[allow(non_camel_case_types)]
pub type hipStream_t = *mut c_void;

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

/// The library's file names, newest ROCm first after the unversioned development link:
/// ROCm 7, 6 and 5 ship `.so.7`, `.so.6` and `.so.5`. Tried by the dynamic loader's search
/// (LD_LIBRARY_PATH, ld.so.cache), then in each of `ROCM_DIRS`' `lib/` (a ROCm install is
/// not always registered with ldconfig).
pub const LIBRARY_NAMES: [&str; 4] = [
    "libamdhip64.so",
    "libamdhip64.so.7",
    "libamdhip64.so.6",
    "libamdhip64.so.5",
];

/// Where ROCm lives when the loader's search does not know it: `$ROCM_PATH`, `$HIP_PATH`,
/// then the default install prefix.
fn rocm_dirs() -> Vec<std::path::PathBuf> {
    ["ROCM_PATH", "HIP_PATH"]
        .iter()
        .filter_map(|v| std::env::var_os(v).filter(|s| !s.is_empty()))
        .map(std::path::PathBuf::from)
        .chain([std::path::PathBuf::from("/opt/rocm")])
        .collect()
}

/// Declares the runtime's functions once: the table's fields and the loader that fills
/// them, so a symbol cannot be declared without being loaded (or the other way round).
macro_rules! hip_functions {
    ($( $(#[$m:meta])* fn $name:ident($($arg:ident: $ty:ty),* $(,)?); )*) => {
        /// The loaded library and one pointer per function qsa calls.
        #[allow(non_snake_case)]
        pub struct Hip {
            /// Where the library was found (for messages).
            pub path: String,
            $( $(#[$m])* pub $name: unsafe extern "C" fn($($ty),*) -> Status, )*
            /// Keeps the library mapped for as long as the pointers above live.
            _lib: libloading::Library,
        }

        impl Hip {
            /// # Safety
            /// `lib` must be a HIP runtime: each symbol is trusted to have the C signature
            /// declared here.
            #[allow(non_snake_case)]
            unsafe fn from_library(lib: libloading::Library, path: String) -> Result<Hip, String> {
                $(
                    let $name = *lib
                        .get::<unsafe extern "C" fn($($ty),*) -> Status>(
                            concat!(stringify!($name), "\0").as_bytes(),
                        )
                        .map_err(|e| format!("{path} has no {}: {e}", stringify!($name)))?;
                )*
                Ok(Hip { path, $($name,)* _lib: lib })
            }
        }
    };
}

hip_functions! {
    fn hipGetDeviceCount(count: *mut c_int);
    fn hipSetDevice(device_id: c_int);
    fn hipDeviceGet(device: *mut c_int, ordinal: c_int);
    fn hipDeviceGetName(name: *mut c_char, len: c_int, device: c_int);
    fn hipDeviceGetAttribute(value: *mut c_int, attr: c_int, device_id: c_int);
    fn hipRuntimeGetVersion(version: *mut c_int);
    fn hipDriverGetVersion(version: *mut c_int);

    fn hipMalloc(ptr: *mut *mut c_void, size: usize);
    fn hipFree(ptr: *mut c_void);
    fn hipMemcpy(dst: *mut c_void, src: *const c_void, size: usize, kind: c_int);
    fn hipMemset(dst: *mut c_void, value: c_int, size: usize);

    fn hipModuleLoadData(module: *mut hipModule_t, image: *const c_void);
    fn hipModuleUnload(module: hipModule_t);
    fn hipModuleGetFunction(function: *mut hipFunction_t, module: hipModule_t, name: *const c_char);
    fn hipModuleLaunchKernel(
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
    );
    fn hipFuncSetAttribute(func: *const c_void, attr: c_int, value: c_int);

    fn hipDeviceSynchronize();
    fn hipEventCreate(event: *mut hipEvent_t);
    fn hipEventRecord(event: hipEvent_t, stream: hipStream_t);
    fn hipEventSynchronize(event: hipEvent_t);
    fn hipEventElapsedTime(ms: *mut f32, start: hipEvent_t, stop: hipEvent_t);
    fn hipEventDestroy(event: hipEvent_t);
}

/// `hipGetErrorName` returns a string, not a status, so it is loaded on its own.
pub type GetErrorName = unsafe extern "C" fn(Status) -> *const c_char;

/// The HIP runtime, loaded on first use (once per process); the error says which files
/// were tried and why each failed, and how to fix it.
pub fn lib() -> Result<&'static (Hip, GetErrorName), String> {
    static LIB: OnceLock<Result<(Hip, GetErrorName), String>> = OnceLock::new();
    LIB.get_or_init(|| load_first(&candidates()))
        .as_ref()
        .map_err(Clone::clone)
}

fn candidates() -> Vec<String> {
    let mut all: Vec<String> = LIBRARY_NAMES.iter().map(|n| n.to_string()).collect();
    for dir in rocm_dirs() {
        for n in LIBRARY_NAMES {
            all.push(dir.join("lib").join(n).display().to_string());
        }
    }
    all
}

/// The runtime's function table, or `BackendError::Device` saying why it is not here.
pub fn hip() -> crate::backend::BackendResult<&'static Hip> {
    lib()
        .map(|(h, _)| h)
        .map_err(crate::backend::BackendError::Device)
}

/// The first of `names` that loads and has every function; else what was tried, and why.
fn load_first(names: &[String]) -> Result<(Hip, GetErrorName), String> {
    let mut tried = Vec::new();
    for name in names.iter().cloned() {
        // SAFETY: loading the HIP runtime runs its initialisers, which is what every HIP
        // program does at start-up; nothing else is loaded under these names.
        match unsafe { libloading::Library::new(&name) } {
            Ok(lib) => {
                // SAFETY: hipGetErrorName's C signature is `const char* (hipError_t)`.
                let get_name = unsafe { lib.get::<GetErrorName>(b"hipGetErrorName\0") }
                    .map(|s| *s)
                    .map_err(|e| format!("{name} has no hipGetErrorName: {e}"))?;
                // SAFETY: a library found under the HIP runtime's own names.
                let hip = unsafe { Hip::from_library(lib, name) }?;
                return Ok((hip, get_name));
            }
            Err(e) => tried.push((name, reason(&e))),
        }
    }
    Err(format!(
        "HIP runtime library not found: tried {}; install ROCm (or Debian's libamdhip64-5), or \
         point LD_LIBRARY_PATH / ROCM_PATH at its lib/ folder",
        group_by_reason(&tried)
    ))
}

/// dlopen's own reason ("cannot open shared object file: No such file or directory"):
/// libloading keeps it as the error's source, and it repeats the file name first.
fn reason(e: &libloading::Error) -> String {
    let full = std::error::Error::source(e).map_or_else(|| e.to_string(), |s| s.to_string());
    full.rsplit(": ").next().unwrap_or(&full).to_string()
}

/// "a, b (why); c (other reason)": the files in order, each run of one reason once.
fn group_by_reason(tried: &[(String, String)]) -> String {
    let mut parts: Vec<(Vec<&str>, &str)> = Vec::new();
    for (name, why) in tried {
        match parts.last_mut() {
            Some((names, w)) if *w == why.as_str() => names.push(name),
            _ => parts.push((vec![name], why)),
        }
    }
    parts
        .iter()
        .map(|(names, why)| format!("{} ({why})", names.join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests;
