//! The declared values against the HIP headers, and the loader against the library, where
//! either is installed (CI: Debian's HIP 5.2.3 headers and libamdhip64.so.5, HIP_PATH=/usr).

use super::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every value this file declares, by its header name.
const VALUES: [(&str, c_int); 15] = [
    (
        "hipDeviceAttributeComputeCapabilityMajor",
        attr::COMPUTE_CAPABILITY_MAJOR,
    ),
    (
        "hipDeviceAttributeComputeCapabilityMinor",
        attr::COMPUTE_CAPABILITY_MINOR,
    ),
    (
        "hipDeviceAttributeMultiprocessorCount",
        attr::MULTIPROCESSOR_COUNT,
    ),
    (
        "hipDeviceAttributeMaxSharedMemoryPerBlock",
        attr::MAX_SHARED_MEMORY_PER_BLOCK,
    ),
    ("hipDeviceAttributeWarpSize", attr::WARP_SIZE),
    (
        "hipFuncAttributeMaxDynamicSharedMemorySize",
        FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_MEMORY_SIZE,
    ),
    ("hipMemcpyHostToDevice", MEMCPY_HOST_TO_DEVICE),
    ("hipMemcpyDeviceToHost", MEMCPY_DEVICE_TO_HOST),
    ("hipSuccess", SUCCESS),
    ("hipErrorInsufficientDriver", ERROR_INSUFFICIENT_DRIVER),
    (
        "hipErrorInvalidDeviceFunction",
        ERROR_INVALID_DEVICE_FUNCTION,
    ),
    ("hipErrorNoDevice", ERROR_NO_DEVICE),
    ("hipErrorInvalidImage", ERROR_INVALID_IMAGE),
    ("hipErrorNoBinaryForGpu", ERROR_NO_BINARY_FOR_GPU),
    ("hipErrorInvalidKernelFile", ERROR_INVALID_KERNEL_FILE),
];

/// The include folder holding `hip/hip_runtime_api.h`: `$HIP_PATH/include` when HIP_PATH
/// is set (then it must be there), else the usual places.
fn hip_include() -> Option<PathBuf> {
    let has = |d: &Path| d.join("hip/hip_runtime_api.h").is_file();
    if let Some(p) = std::env::var_os("HIP_PATH").filter(|s| !s.is_empty()) {
        let inc = PathBuf::from(p).join("include");
        assert!(
            has(&inc),
            "HIP_PATH is set but {} has no hip/hip_runtime_api.h",
            inc.display()
        );
        return Some(inc);
    }
    ["/opt/rocm/include", "/usr/include"]
        .iter()
        .map(PathBuf::from)
        .find(|d| has(d))
}

/// Compiles a C++ program that prints each value as the headers define it (no library is
/// linked: enums only), so a typo here cannot pass.
#[test]
fn enum_values_match_the_hip_headers() {
    let Some(inc) = hip_include() else {
        eprintln!("SKIPPED: no HIP headers here (HIP_PATH unset, none in /opt/rocm or /usr); CI sets HIP_PATH=/usr");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("values.cpp");
    let mut body =
        String::from("#include <hip/hip_runtime_api.h>\n#include <cstdio>\nint main() {\n");
    for (name, _) in VALUES {
        body += &format!("  std::printf(\"{name} %d\\n\", (int){name});\n");
    }
    body += "}\n";
    std::fs::write(&src, body).unwrap();
    let exe = dir.path().join("values");
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let out = Command::new(&cxx)
        .args(["-D__HIP_PLATFORM_AMD__", "-I"])
        .arg(&inc)
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| panic!("cannot start {cxx}: {e}"));
    assert!(
        out.status.success(),
        "{cxx} failed on the HIP headers in {}: {}",
        inc.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe).output().unwrap();
    let printed = String::from_utf8(run.stdout).unwrap();
    for ((name, ours), line) in VALUES.iter().zip(printed.lines()) {
        assert_eq!(
            line,
            format!("{name} {ours}"),
            "headers in {} disagree with ffi.rs",
            inc.display()
        );
    }
    assert_eq!(printed.lines().count(), VALUES.len());
}

/// The library's own names for our error codes: a check of the codes against the runtime
/// actually loaded (5.2.3 here), not only the headers.
#[test]
fn the_loaded_runtime_names_our_error_codes() {
    let (hip, error_name) = match lib() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("SKIPPED: {e}");
            return;
        }
    };
    eprintln!("HIP runtime loaded from {}", hip.path);
    for (name, code) in VALUES
        .iter()
        .filter(|(n, _)| n.starts_with("hipErr") || *n == "hipSuccess")
    {
        // SAFETY: hipGetErrorName takes any int and returns a static string.
        let got = unsafe { std::ffi::CStr::from_ptr(error_name(*code)) };
        assert_eq!(got.to_str().unwrap(), *name, "code {code}");
    }
}

#[test]
fn a_missing_library_names_every_file_tried_and_the_fix() {
    let names = vec![
        "libamdhip64.so.999".to_string(),
        "/nonexistent/rocm/lib/libamdhip64.so.7".to_string(),
    ];
    let msg = load_first(&names).err().expect("no such library");
    assert!(
        msg.starts_with(
            "HIP runtime library not found: tried libamdhip64.so.999, \
             /nonexistent/rocm/lib/libamdhip64.so.7 (No such file or directory); "
        ),
        "{msg}"
    );
    assert!(msg.contains("install ROCm"), "{msg}");
    // The default list covers ROCm 5, 6 and 7 and the default prefix.
    let all = candidates();
    for n in LIBRARY_NAMES {
        assert!(all.contains(&n.to_string()), "{all:?}");
    }
    assert!(
        all.iter().any(|c| c == "/opt/rocm/lib/libamdhip64.so.6"),
        "{all:?}"
    );
}
