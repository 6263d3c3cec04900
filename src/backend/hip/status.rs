//! `hipError_t` -> `BackendError::Device`, naming the call that failed.

use std::ffi::CStr;

use super::ffi::{self, Status};
use crate::backend::{BackendError, BackendResult};

/// The runtime's own name for `status` ("hipErrorNoBinaryForGpu"), so codes newer than
/// this file still get a name; the number is always printed as well.
pub fn error_name(status: Status) -> String {
    let Ok((_, get_name)) = ffi::lib() else {
        return format!("hipError {status}");
    };
    // SAFETY: hipGetErrorName takes any int and returns a static string or null; it needs
    // no device and no initialised runtime.
    let name = unsafe { get_name(status) };
    if name.is_null() {
        return format!("hipError {status}");
    }
    // SAFETY: non-null, NUL-terminated, static storage in the runtime library.
    unsafe { CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned()
}

/// "`call` failed: hipErrorX (n)" as a device error.
pub fn device_error(call: &str, status: Status) -> BackendError {
    BackendError::Device(format!("{call} failed: {} ({status})", error_name(status)))
}

/// `Ok` on `hipSuccess`, else a device error naming `call`.
pub fn check(call: &str, status: Status) -> BackendResult<()> {
    if status == ffi::SUCCESS {
        Ok(())
    } else {
        Err(device_error(call, status))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_call_and_the_code() {
        assert!(check("hipFree", ffi::SUCCESS).is_ok());
        let e = check(
            "hipModuleLoadData(/x/topk.co)",
            ffi::ERROR_NO_BINARY_FOR_GPU,
        )
        .unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, BackendError::Device(_)), "{msg}");
        assert!(
            msg.contains("hipModuleLoadData(/x/topk.co) failed"),
            "{msg}"
        );
        assert!(msg.contains("hipErrorNoBinaryForGpu (209)"), "{msg}");
    }

    #[test]
    fn unknown_codes_still_print_their_number() {
        // 5.2.3 answers "hipErrorUnknown" for codes it does not know; others may give null.
        let msg = device_error("hipMalloc(64 bytes)", 12345).to_string();
        assert!(msg.contains("hipMalloc(64 bytes) failed: "), "{msg}");
        assert!(msg.ends_with("(12345)"), "{msg}");
    }
}
