//! The driver's versions, as results.yaml's `device.driver` states them.

/// Where Linux's NVIDIA kernel module states its version (the driver's build number, which
/// cuDriverGetVersion does not give: it says only the CUDA version the driver supports).
pub const NVIDIA_VERSION_FILE: &str = "/proc/driver/nvidia/version";

/// The kernel module's version ("580.159.04") from the text of /proc/driver/nvidia/version:
/// `NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  <date>` (open kernel
/// modules say `NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build ...`).
pub fn kernel_module_version(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.starts_with("NVRM version:"))?;
    let after = line.split("Kernel Module").nth(1)?;
    after
        .split_whitespace()
        .find(|w| {
            w.contains('.')
                && w.chars().next().is_some_and(|c| c.is_ascii_digit())
                && w.chars().all(|c| c.is_ascii_digit() || c == '.')
        })
        .map(String::from)
}

/// `CUDA driver 13.0 (580.159.04)` from cuDriverGetVersion's number (13000) and the kernel
/// module's version when known; the CUDA version alone otherwise. The driver's PTX JIT is
/// part of it, so this is also the version that compiles a target's PTX.
pub fn driver_text(cuda_version: i32, module: Option<String>) -> String {
    let cuda = format!(
        "CUDA driver {}.{}",
        cuda_version / 1000,
        (cuda_version % 1000) / 10
    );
    match module {
        Some(m) => format!("{cuda} ({m})"),
        None => cuda,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_driver_text_carries_the_cuda_version_and_the_kernel_module_build() {
        // /proc/driver/nvidia/version as the 580 driver writes it (proprietary and open
        // kernel modules).
        let proprietary = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu Oct  2 18:35:12 UTC 2025\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n";
        let open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Sep 23 09:42:12 UTC 2025\n";
        assert_eq!(
            kernel_module_version(proprietary).as_deref(),
            Some("580.159.04")
        );
        assert_eq!(kernel_module_version(open).as_deref(), Some("580.95.05"));
        assert_eq!(kernel_module_version("GCC version: 12.2.0"), None);
        assert_eq!(
            driver_text(13000, kernel_module_version(proprietary)),
            "CUDA driver 13.0 (580.159.04)"
        );
        assert_eq!(driver_text(12080, None), "CUDA driver 12.8");
    }
}
