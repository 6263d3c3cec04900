//! `cargo xtask setup`: install the pinned toolchains, idempotently, and say what was done
//! and what was skipped.
//!
//! - CUDA: a machine's own nvcc (CUDA_HOME / PATH) is used as is. Otherwise the project venv
//!   `.venv-cuda` gets the pinned PyPI wheels (`toolchain::CUDA_WHEELS`), and g++ (nvcc's
//!   host preprocessor) is installed if missing.
//! - HIP: a machine's own ROCm (ROCM_PATH, /opt/rocm) is used as is. Otherwise Debian's
//!   clang-22 and HIP packages via apt-get (as root; otherwise the exact commands are printed),
//!   then `.toolchains/amdgcn-bitcode/`: Debian's device libraries, the ISA-version bitcode
//!   those libraries lack for the matrix's AMD targets (gfx1201, gfx950), and the
//!   `__atomic_work_item_fence` shim.

use crate::build::toolchain::{
    self, isa_version, CUDA_WHEELS, DEBIAN_BITCODE_DIR, HIP_APT_PACKAGES,
};
use anyhow::{bail, Context, Result};
use qsa::matrix::{Matrix, Toolchain};
use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};
use std::time::Instant;
use xshell::{cmd, Shell};

/// `cargo xtask setup` options.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct SetupArgs {
    /// Say what would be installed, install nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The matrix whose AMD targets need ISA bitcode (default: matrix.yaml at the root).
    #[arg(long, value_name = "FILE")]
    pub matrix: Option<PathBuf>,
}

/// Collects what setup did, skipped, or could not do.
struct Log {
    dry_run: bool,
    is_root: bool,
    /// Commands a non-root user must run (printed at the end).
    todo: Vec<String>,
}

impl Log {
    fn did(&self, what: impl AsRef<str>) {
        let verb = if self.dry_run { "would" } else { "done" };
        println!("  {verb}: {}", what.as_ref());
    }
    fn skip(&self, what: impl AsRef<str>) {
        println!("  skip: {}", what.as_ref());
    }
    /// Before a long step: what it fetches, so a fresh machine is not silent for minutes.
    /// The tools' own lines (pip's wheel sizes, apt's `Get:` lines) follow as they come.
    fn start(&self, what: impl AsRef<str>) {
        println!("  start: {}", what.as_ref());
    }
}

/// Whether stdout is a terminal: progress bars and carriage returns only there, plain lines
/// in CI logs.
fn tty() -> bool {
    std::io::stdout().is_terminal()
}

/// `1m 05s` / `42s`, for the closing line of a long step.
fn took(start: Instant) -> String {
    let s = start.elapsed().as_secs();
    if s >= 60 {
        format!("{}m {:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// Bytes under `dir` (files only; links not followed), for "what it installed" lines.
fn dir_bytes(dir: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

fn mib(bytes: u64) -> String {
    format!("{:.0} MiB", bytes as f64 / (1024.0 * 1024.0))
}

pub fn run(args: SetupArgs) -> Result<()> {
    let root = toolchain::project_root();
    let sh = Shell::new()?;
    sh.change_dir(&root);
    let is_root = cmd!(sh, "id -u")
        .quiet()
        .read()
        .map(|s| s.trim() == "0")
        .unwrap_or(false);
    let mut log = Log {
        dry_run: args.dry_run,
        is_root,
        todo: Vec::new(),
    };
    let matrix_path = args
        .matrix
        .clone()
        .unwrap_or_else(|| root.join("matrix.yaml"));
    let matrix = Matrix::load(&matrix_path)?;
    let amd_archs: Vec<String> = matrix
        .targets
        .iter()
        .filter(|t| t.toolchain == Toolchain::Hip)
        .map(|t| t.name.clone())
        .collect();

    println!("cuda:");
    setup_cuda(&sh, &root, &mut log)?;
    println!("hip:");
    setup_hip(&sh, &root, &amd_archs, &mut log)?;

    if !log.todo.is_empty() {
        println!("\nnot root: run these as root, then `cargo xtask setup` again:");
        for c in &log.todo {
            println!("  {c}");
        }
        bail!(
            "setup is incomplete: {} command(s) need root",
            log.todo.len()
        );
    }
    if !args.dry_run {
        println!("\ntoolchains:");
        for t in matrix.targets.iter().filter(|t| t.is_gpu()) {
            match toolchain::toolchain_status(t) {
                Ok(info) => println!("  {:<8} {}", t.name, info.describe()),
                Err(m) => bail!("target {} still has no toolchain after setup: {m}", t.name),
            }
        }
    }
    Ok(())
}

/// `apt-get install` of the packages not yet installed: runs as root, else queued for the
/// user. Returns false when something is still missing.
fn apt_install(sh: &Shell, packages: &[&str], log: &mut Log) -> Result<bool> {
    let missing: Vec<&str> = packages
        .iter()
        .copied()
        .filter(|p| {
            let format = "${Status}";
            cmd!(sh, "dpkg-query -W -f {format} {p}")
                .quiet()
                .ignore_stderr()
                .read()
                .map_or(true, |s| !s.contains("install ok installed"))
        })
        .collect();
    if missing.is_empty() {
        log.skip(format!(
            "apt packages already installed: {}",
            packages.join(" ")
        ));
        return Ok(true);
    }
    let install = format!(
        "apt-get install -y --no-install-recommends {}",
        missing.join(" ")
    );
    if log.dry_run {
        log.did(format!("apt-get update && {install}"));
        return Ok(true);
    }
    if !log.is_root {
        log.todo.push("apt-get update".into());
        log.todo.push(install);
        return Ok(false);
    }
    // The size in the start line: dpkg's Installed-Size of clang-22, llvm-22, lld-22, the HIP
    // packages and their dependencies on the development machine (Debian 12, 2026-12-01).
    // apt prints the download size ("Need to get ... MB") and one `Get:` line per package
    // with its size; `-q` drops its carriage-return progress line where stdout is no terminal.
    let quiet: &[&str] = if tty() { &[] } else { &["-q"] };
    let start = Instant::now();
    log.start("apt-get update");
    cmd!(sh, "apt-get update {quiet...}")
        .env("DEBIAN_FRONTEND", "noninteractive")
        .run()
        .context("apt-get update failed")?;
    log.start(format!(
        "apt-get install {} (clang-22 + HIP and their dependencies: about 450 MiB installed; minutes on a fresh machine)",
        missing.join(" ")
    ));
    let pkgs = &missing;
    cmd!(
        sh,
        "apt-get install -y {quiet...} --no-install-recommends {pkgs...}"
    )
    .env("DEBIAN_FRONTEND", "noninteractive")
    .run()
    .with_context(|| format!("apt-get install {} failed", missing.join(" ")))?;
    log.did(format!(
        "installed {} in {}",
        missing.join(" "),
        took(start)
    ));
    Ok(true)
}

/// Pinned wheel versions installed in the venv, read from its `*.dist-info` folders.
fn installed_wheels(root: &Path) -> Vec<(String, String)> {
    let Some(site) = toolchain::venv_site_packages(root) else {
        return Vec::new();
    };
    let Ok(rd) = std::fs::read_dir(site) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            let stem = n.strip_suffix(".dist-info")?;
            let (name, ver) = stem.rsplit_once('-')?;
            Some((name.replace('_', "-").to_lowercase(), ver.to_string()))
        })
        .collect()
}

fn setup_cuda(sh: &Shell, root: &Path, log: &mut Log) -> Result<()> {
    if let Some((nvcc, origin)) = toolchain::system_nvcc() {
        log.skip(format!(
            "using the machine's nvcc {} ({origin}); no venv",
            nvcc.display()
        ));
    } else {
        let have = installed_wheels(root);
        let wanted: Vec<String> = CUDA_WHEELS
            .iter()
            .map(|(n, v)| format!("{n}=={v}"))
            .collect();
        let missing: Vec<String> = CUDA_WHEELS
            .iter()
            .zip(&wanted)
            .filter(|((n, v), _)| !have.iter().any(|(hn, hv)| hn == n && hv == v))
            .map(|(_, w)| w.clone())
            .collect();
        let venv = toolchain::venv_dir(root);
        if missing.is_empty() {
            log.skip(format!("{} has {}", venv.display(), wanted.join(" ")));
        } else {
            if !venv.join("bin").join("pip").is_file() {
                if log.dry_run {
                    log.did(format!("python3 -m venv {}", venv.display()));
                } else {
                    // Debian's python3 needs python3-venv for `-m venv` (ensurepip).
                    if cmd!(sh, "python3 -c 'import ensurepip'")
                        .quiet()
                        .ignore_stderr()
                        .run()
                        .is_err()
                        && !apt_install(sh, &["python3-venv"], log)?
                    {
                        return Ok(());
                    }
                    cmd!(sh, "python3 -m venv {venv}")
                        .run()
                        .context("python3 -m venv failed")?;
                    log.did(format!("created {}", venv.display()));
                }
            }
            let pip = venv.join("bin").join("pip");
            if log.dry_run {
                log.did(format!("{} install {}", pip.display(), wanted.join(" ")));
            } else {
                // Sizes in the start line: pip's own figures for these wheels (37.4 + 61.6 +
                // 2.2 + 0.3 + 0.1 MB) and the venv afterwards (274 MiB), 2026-12-01.
                // pip prints each wheel with its download size as it fetches it; its progress
                // bar (carriage returns) only on a terminal.
                let bar = if tty() { "on" } else { "off" };
                let start = Instant::now();
                log.start(format!(
                    "pip install {} into {} (about 100 MB of wheels, 274 MiB installed)",
                    missing.join(" "),
                    venv.display()
                ));
                cmd!(
                    sh,
                    "{pip} install --disable-pip-version-check --progress-bar {bar} {wanted...}"
                )
                .run()
                .context("pip install of the CUDA wheels failed")?;
                log.did(format!(
                    "installed {} in {} ({} now)",
                    missing.join(" "),
                    took(start),
                    mib(dir_bytes(&venv))
                ));
            }
        }
    }
    // nvcc preprocesses with the host compiler even for device-only output.
    if toolchain::which("g++").is_none() {
        apt_install(sh, &["g++"], log)?;
    } else {
        log.skip("host compiler g++ present");
    }
    Ok(())
}

fn setup_hip(sh: &Shell, root: &Path, amd_archs: &[String], log: &mut Log) -> Result<()> {
    if let Some(rocm) = toolchain::system_rocm() {
        log.skip(format!(
            "using the machine's ROCm at {}; no apt packages, no bitcode",
            rocm.display()
        ));
        return Ok(());
    }
    if !apt_install(sh, &HIP_APT_PACKAGES, log)? {
        return Ok(());
    }
    let dir = toolchain::bitcode_dir(root);
    let system = Path::new(DEBIAN_BITCODE_DIR);
    if log.dry_run {
        log.did(format!(
            "copy {DEBIAN_BITCODE_DIR}/*.bc to {}",
            dir.display()
        ));
    } else {
        std::fs::create_dir_all(&dir)?;
        let mut copied = 0;
        let mut entries: Vec<PathBuf> = std::fs::read_dir(system)
            .with_context(|| {
                format!("cannot read {DEBIAN_BITCODE_DIR} (package rocm-device-libs)")
            })?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "bc"))
            .collect();
        entries.sort();
        for src in &entries {
            let dst = dir.join(src.file_name().expect("read_dir entries have names"));
            if std::fs::read(&dst).ok() != std::fs::read(src).ok() {
                std::fs::copy(src, &dst)
                    .with_context(|| format!("cannot copy {}", src.display()))?;
                copied += 1;
            }
        }
        if copied > 0 {
            log.did(format!(
                "copied {copied} device libraries to {}",
                dir.display()
            ));
        } else {
            log.skip(format!(
                "{} device libraries already in {}",
                entries.len(),
                dir.display()
            ));
        }
    }
    for arch in amd_archs {
        let Some((file, version)) = isa_version(arch) else {
            bail!("AMD target `{arch}` is not named gfxNNN")
        };
        if system.join(&file).is_file() {
            continue;
        }
        let out = dir.join(&file);
        if out.is_file() {
            log.skip(format!("{file} (ISA {version}, {arch}) exists"));
            continue;
        }
        if log.dry_run {
            log.did(format!("generate {file} (ISA {version}) for {arch}"));
            continue;
        }
        // The device libraries predate this arch: its ISA version is one constant.
        let c = dir.join(format!("isa_{version}.c"));
        std::fs::write(&c, format!("const __attribute__((address_space(4))) unsigned __oclc_ISA_version = {version};\n"))?;
        cmd!(sh, "clang-22 -target amdgcn-amd-amdhsa -mcode-object-version=5 -nogpulib -x c -emit-llvm -c -O2 {c} -o {out}")
            .quiet()
            .run()
            .with_context(|| format!("cannot generate {file}"))?;
        std::fs::remove_file(&c)?;
        log.did(format!("generated {file} (ISA {version}) for {arch}"));
    }
    if log.dry_run {
        log.did(format!(
            "write {}",
            toolchain::hip_shim_path(root).display()
        ));
    } else {
        let (shim, written) = toolchain::ensure_hip_shim(root)?;
        if written {
            log.did(format!(
                "wrote the __atomic_work_item_fence shim {}",
                shim.display()
            ));
        } else {
            log.skip(format!("shim {} is current", shim.display()));
        }
    }
    Ok(())
}
