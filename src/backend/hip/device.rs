//! What the HIP device and runtime are (attributes, name, versions, the no-device message)
//! and which code objects of a build folder fit the device's gfx version.

use std::ffi::CStr;
use std::os::raw::{c_char, c_int};
use std::path::{Path, PathBuf};

use super::api::{code_object_path, ARCH_ENV};
use super::code_object::{self, GfxTarget};
use super::ffi::hip;
use super::status::check;
use crate::backend::{BackendError, BackendResult};
use crate::gpu::Family;

/// The message for "the runtime loaded but sees no GPU", with the usual cause.
pub(super) fn no_device_message() -> String {
    let cause = if Path::new("/dev/kfd").exists() {
        "/dev/kfd exists: check that this user can open it and /dev/dri/renderD* (groups \
         `render` and `video`)"
    } else {
        "/dev/kfd is absent: no amdgpu kernel driver on this machine (in a container, pass \
         --device=/dev/kfd --device=/dev/dri)"
    };
    format!("no HIP device: hipGetDeviceCount reports hipErrorNoDevice or 0 devices; {cause}")
}

pub(super) fn attribute(id: c_int, attr: c_int, what: &str) -> BackendResult<u32> {
    let mut value: c_int = 0;
    // SAFETY: one out-parameter; `attr` is a value from ffi::attr.
    let status = unsafe { (hip()?.hipDeviceGetAttribute)(&mut value, attr, id) };
    check(
        &format!("hipDeviceGetAttribute({what}, device {id})"),
        status,
    )?;
    u32::try_from(value).map_err(|_| {
        BackendError::Device(format!(
            "hipDeviceGetAttribute({what}, device {id}) returned {value}"
        ))
    })
}

pub(super) fn device_name(id: c_int) -> BackendResult<String> {
    let mut device: c_int = 0;
    // SAFETY: one out-parameter.
    check(&format!("hipDeviceGet({id})"), unsafe {
        (hip()?.hipDeviceGet)(&mut device, id)
    })?;
    let mut buf = [0 as c_char; 256];
    // SAFETY: the buffer's length is passed; the runtime NUL-terminates within it.
    check(&format!("hipDeviceGetName(device {id})"), unsafe {
        (hip()?.hipDeviceGetName)(buf.as_mut_ptr(), buf.len() as c_int, device)
    })?;
    buf[buf.len() - 1] = 0;
    // SAFETY: NUL-terminated (forced above).
    Ok(unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .trim()
        .to_string())
}

/// "HIP runtime X.Y.Z, driver X.Y.Z": both from the runtime library (clr answers
/// hipDriverGetVersion with its own HIP version, 50221153 for both on Debian's 5.2.3 with
/// no device; checked with ctypes here, 2026-12-01). Called only once a device is open.
pub(super) fn versions() -> BackendResult<String> {
    let (mut runtime, mut driver): (c_int, c_int) = (0, 0);
    // SAFETY: one out-parameter each.
    check("hipRuntimeGetVersion", unsafe {
        (hip()?.hipRuntimeGetVersion)(&mut runtime)
    })?;
    check("hipDriverGetVersion", unsafe {
        (hip()?.hipDriverGetVersion)(&mut driver)
    })?;
    Ok(format!(
        "{} ({})",
        describe_versions(runtime, driver),
        hip()?.path
    ))
}

pub(super) fn describe_versions(runtime: c_int, driver: c_int) -> String {
    format!(
        "HIP runtime {}, driver {}",
        decode_version(runtime),
        decode_version(driver)
    )
}

/// HIP_VERSION = major * 10^7 + minor * 10^5 + patch: 50221153 -> "5.2.21153".
pub(super) fn decode_version(v: c_int) -> String {
    format!("{}.{}.{}", v / 10_000_000, v / 100_000 % 100, v % 100_000)
}

pub(super) fn read_code_object(path: &Path, arch: &str) -> BackendResult<Vec<u8>> {
    std::fs::read(path).map_err(|e| {
        BackendError::Device(if e.kind() == std::io::ErrorKind::NotFound {
            format!(
                "code object {} not found: run `cargo xtask build --target {arch}`",
                path.display()
            )
        } else {
            format!("reading code object {}: {e}", path.display())
        })
    })
}

pub(super) fn list(targets: &[GfxTarget]) -> String {
    targets
        .iter()
        .map(|t| t.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The one gfx target of the code objects in `dir`, and the first family that has one.
/// `QSA_HIP_ARCH`, when set, must agree (or stands in for an unreadable header).
pub(super) fn resolve_target(
    dir: &Path,
    gfx_version: (u32, u32),
) -> BackendResult<(GfxTarget, Family)> {
    let env = std::env::var(ARCH_ENV).ok().filter(|s| !s.is_empty());
    resolve_target_with(dir, gfx_version, env.as_deref())
}

pub(super) fn resolve_target_with(
    dir: &Path,
    (major, minor): (u32, u32),
    env: Option<&str>,
) -> BackendResult<(GfxTarget, Family)> {
    let err = |msg: String| Err(BackendError::Device(msg));
    let mut found: Vec<(Family, PathBuf, GfxTarget)> = Vec::new();
    for family in Family::ALL {
        let path = code_object_path(dir, family);
        if !path.is_file() {
            continue;
        }
        let bytes = read_code_object(&path, env.unwrap_or("gfxNNN"))?;
        match code_object::targets(&bytes) {
            Ok(t) if t.len() == 1 => found.push((family, path, t[0].clone())),
            Ok(t) => {
                return err(format!(
                    "{} holds code for {} targets ({}): build one target per directory with \
                     `cargo xtask build --target gfxNNN`",
                    path.display(),
                    t.len(),
                    list(&t)
                ))
            }
            Err(e) => match env {
                Some(arch) => found.push((family, path, parse_target_id(arch))),
                None => return err(format!("{}: {e}", path.display())),
            },
        }
    }
    let Some((first_family, first_path, target)) = found.first().cloned() else {
        let hint = env.map_or_else(|| format!("gfx{major}{minor:x}N"), str::to_string);
        return err(format!(
            "no HIP code objects in {} (looked for {}): run `cargo xtask build --target {hint}` \
             (this device reports gfx version {major}.{minor})",
            dir.display(),
            Family::ALL.map(|f| format!("{}.co", f.stem())).join(", "),
        ));
    };
    if let Some((_, path, other)) = found.iter().find(|(_, _, t)| *t != target) {
        return err(format!(
            "{} is for {target} but {} is for {other}: rebuild the directory for one target",
            first_path.display(),
            path.display()
        ));
    }
    if let Some(arch) = env {
        if parse_target_id(arch) != target && arch != target.arch {
            return err(format!(
                "{ARCH_ENV}={arch}, but the code objects in {} are for {target}",
                dir.display()
            ));
        }
    }
    Ok((target, first_family))
}

/// "gfx90a:xnack-" -> arch "gfx90a", features ["xnack-"].
pub(super) fn parse_target_id(id: &str) -> GfxTarget {
    let mut parts = id.split(':');
    GfxTarget {
        arch: parts.next().unwrap_or_default().to_string(),
        features: parts.map(str::to_string).collect(),
    }
}
