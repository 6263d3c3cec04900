//! One compile: a kernel source for one target into its code object(s), incremental, and
//! the kernels' resources read back from what was built.

use super::resources::{self, KernelReport};
use super::toolchain::{ensure_hip_shim, isa_version, ToolchainInfo};
use super::{annotations, stamp};
use anyhow::{anyhow, bail, Context, Result};
use qsa::dispatch::{Feature, Vendor};
use qsa::matrix::Target;
use std::path::{Path, PathBuf};
use std::time::Instant;
use xshell::{cmd, Shell};

/// What happened to one (target, source).
#[derive(Clone, Debug, PartialEq)]
pub enum SourceStatus {
    /// Compiled, in this many seconds.
    Built(f64),
    UpToDate,
    /// kernels/<stem>.cu does not exist (yet).
    Missing,
    /// The compiler (or the resource read-back) failed; the message has its output.
    Failed(String),
}

/// The result of one (target, source) job.
#[derive(Clone, Debug)]
pub struct SourceBuild {
    pub stem: String,
    pub status: SourceStatus,
    /// Code objects written (cubin + fatbin, or co).
    pub outputs: Vec<PathBuf>,
    pub kernels: Vec<KernelReport>,
}

/// Paths of one job, relative to the project root (commands run there, so stamps and logs
/// do not depend on where the checkout lives).
struct Job<'a> {
    root: &'a Path,
    target: &'a Target,
    tc: &'a ToolchainInfo,
    stem: &'a str,
    src: PathBuf,
    dir: PathBuf,
}

impl Job<'_> {
    fn out(&self, ext: &str) -> PathBuf {
        self.dir.join(format!("{}.{ext}", self.stem))
    }
    fn abs(&self, p: &Path) -> PathBuf {
        self.root.join(p)
    }
}

/// Build `kernels/<stem>.cu` for `target` into `build/kernels/<target>/` unless up to date,
/// then read its kernels' resources from the binaries.
pub fn build_source(root: &Path, target: &Target, tc: &ToolchainInfo, stem: &str) -> SourceBuild {
    let job = Job {
        root,
        target,
        tc,
        stem,
        src: PathBuf::from("kernels").join(format!("{stem}.cu")),
        dir: PathBuf::from("build").join("kernels").join(&target.name),
    };
    let mut result = SourceBuild {
        stem: stem.to_string(),
        status: SourceStatus::Missing,
        outputs: Vec::new(),
        kernels: Vec::new(),
    };
    if !job.abs(&job.src).is_file() {
        return result;
    }
    match run_job(&job) {
        Ok((status, outputs, kernels)) => {
            result.status = status;
            result.outputs = outputs.iter().map(|o| job.abs(o)).collect();
            result.kernels = kernels;
        }
        Err(e) => result.status = SourceStatus::Failed(format!("{e:#}")),
    }
    result
}

fn run_job(job: &Job) -> Result<(SourceStatus, Vec<PathBuf>, Vec<KernelReport>)> {
    let sh = Shell::new()?;
    sh.change_dir(job.root);
    sh.create_dir(&job.dir)?;
    let (flags, outputs, extra_inputs) = match job.target.vendor {
        Vendor::Nvidia => nvidia_flags(job)?,
        Vendor::Amd => amd_flags(job)?,
        Vendor::Cpu => bail!("target {} is not a GPU target", job.target.name),
    };
    let mut inputs = vec![job.abs(&job.src)];
    inputs.extend(stamp::local_includes(
        &job.abs(&job.src),
        &[job.root.join("kernels")],
    )?);
    inputs.extend(extra_inputs);
    let digest = stamp::digest(&inputs, &flags, &job.tc.version)?;
    let stamp_file = job.abs(&job.out("stamp"));
    let abs_outputs: Vec<PathBuf> = outputs.iter().map(|o| job.abs(o)).collect();

    let status = if stamp::up_to_date(&stamp_file, &digest, &abs_outputs) {
        SourceStatus::UpToDate
    } else {
        // A failed or interrupted build must not leave a stale stamp or object behind.
        let _ = std::fs::remove_file(&stamp_file);
        for o in &abs_outputs {
            let _ = std::fs::remove_file(o);
        }
        let start = Instant::now();
        match job.target.vendor {
            Vendor::Nvidia => compile_nvidia(&sh, job, &flags)?,
            _ => compile_amd(&sh, job, &flags)?,
        }
        std::fs::write(&stamp_file, format!("{digest}\n"))?;
        SourceStatus::Built(start.elapsed().as_secs_f64())
    };

    let source_text = std::fs::read_to_string(job.abs(&job.src))?;
    let decls = annotations::scan(&source_text, &job.src.display().to_string())?;
    let kernels = match job.target.vendor {
        Vendor::Nvidia => {
            let cubin = job.out("cubin");
            let cuobjdump = &job.tc.inspector;
            let usage = cmd!(sh, "{cuobjdump} --dump-resource-usage {cubin}")
                .quiet()
                .read()?;
            let elf = cmd!(sh, "{cuobjdump} -elf {cubin}").quiet().read()?;
            let log = std::fs::read_to_string(job.abs(&job.out("ptxas.log")))?;
            resources::nvidia_kernels(job.target, job.stem, &usage, &elf, &log, &decls)?
        }
        _ => {
            let co = job.out("co");
            let readobj = &job.tc.inspector;
            let notes = cmd!(sh, "{readobj} --notes {co}").quiet().read()?;
            resources::amd_kernels(job.target, job.stem, &notes, &decls)?
        }
    };
    // A kernel compiled only for some targets (`#if __CUDA_ARCH__ >= 800`) is absent from
    // the others' binaries: fine. An annotation naming a kernel the source never mentions
    // is a typo.
    for name in decls.keys() {
        let mentioned = source_text
            .lines()
            .filter(|l| !l.trim_start().starts_with("// qsa:"))
            .any(|l| {
                l.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .any(|w| w == name)
            });
        if !kernels.iter().any(|k| &k.kernel == name) && !mentioned {
            bail!(
                "{}: annotation names kernel {name}, which the source does not define",
                job.src.display()
            );
        }
    }
    Ok((status, outputs, kernels))
}

/// nvcc flags (without input and output paths): SASS for the target plus its PTX, so the
/// fatbin also runs on newer GPUs (the driver JITs the PTX).
fn nvidia_flags(job: &Job) -> Result<(Vec<String>, Vec<PathBuf>, Vec<PathBuf>)> {
    let sm = job
        .target
        .name
        .strip_prefix("sm_")
        .ok_or_else(|| anyhow!("CUDA target {} is not named sm_XX", job.target.name))?;
    // Feature `wgmma` (sm_90): the SASS is built for the arch-specific sm_90a, whose wgmma
    // kernels (QSA_WGMMA in kernels/common/mma.h) run only on sm_90 cards; the fatbin's PTX
    // stays plain compute_90 (no wgmma kernels), which newer cards can JIT: there dispatch
    // must not pick a wgmma kernel. compute_90a PTX would run on no other card.
    let gencode = if job.target.features.contains(&Feature::Wgmma) {
        vec![
            "-gencode".to_string(),
            format!("arch=compute_{sm}a,code=sm_{sm}a"),
            "-gencode".into(),
            format!("arch=compute_{sm},code=compute_{sm}"),
        ]
    } else {
        vec![
            "-gencode".to_string(),
            format!("arch=compute_{sm},code=[sm_{sm},compute_{sm}]"),
        ]
    };
    let mut flags = vec!["-fatbin".to_string()];
    flags.extend(gencode);
    flags.extend([
        "-O3".into(),
        "-Ikernels".into(),
        "-Werror".into(),
        "all-warnings".into(),
        "--resource-usage".into(),
    ]);
    let outputs = vec![job.out("cubin"), job.out("fatbin"), job.out("ptxas.log")];
    Ok((flags, outputs, Vec::new()))
}

fn compile_nvidia(sh: &Shell, job: &Job, flags: &[String]) -> Result<()> {
    let nvcc = &job.tc.compiler;
    let tmp = job.dir.join(format!(".tmp-{}", job.stem));
    let _ = sh.remove_path(&tmp);
    sh.create_dir(&tmp)?;
    let src = &job.src;
    // Written in the scratch directory and renamed into place, as the cubin below: a reader
    // (`.ci/test` builds the kernels while the tests run, and a test reads the fatbins) sees
    // the old file or the new one, never half of one.
    let fatbin = tmp.join(format!("{}.fatbin", job.stem));
    // --keep leaves the cubin ptxas produced for the fatbin: one compile gives both.
    let out = cmd!(
        sh,
        "{nvcc} {flags...} --keep --keep-dir {tmp} {src} -o {fatbin}"
    )
    .quiet()
    .ignore_status()
    .output()?;
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        let _ = sh.remove_path(&tmp);
        bail!(
            "nvcc failed for {} ({}):\n{}",
            job.src.display(),
            job.target.name,
            log.trim_end()
        );
    }
    if let Err(e) = check_ptx(job, &job.abs(&fatbin)) {
        let _ = sh.remove_path(&tmp);
        return Err(e);
    }
    // nvcc --keep names the cubin after the SASS arch, or for sm_90a (feature `wgmma`) after
    // its virtual arch: compute_90a (nvcc 13.0.88).
    let sm = if job.target.features.contains(&Feature::Wgmma) {
        format!("compute_{}a", &job.target.name[3..])
    } else {
        job.target.name.clone()
    };
    let kept = tmp.join(format!("{}.{sm}.cubin", job.stem));
    std::fs::rename(job.abs(&kept), job.abs(&job.out("cubin")))
        .with_context(|| format!("nvcc --keep left no {}", kept.display()))?;
    std::fs::rename(job.abs(&fatbin), job.abs(&job.out("fatbin")))?;
    sh.remove_path(&tmp)?;
    sh.write_file(job.out("ptxas.log"), log)?;
    Ok(())
}

/// The fatbin must carry the target's own PTX: it is what runs the target on a newer card
/// (`qsa::ptx`, status `run (PTX on sm_90)`), and what the runner looks for before it tries.
fn check_ptx(job: &Job, fatbin: &Path) -> Result<()> {
    let want = qsa::ptx::sm_number(&job.target.name)
        .ok_or_else(|| anyhow!("CUDA target {} is not named sm_XX", job.target.name))?;
    let bytes =
        std::fs::read(fatbin).with_context(|| format!("cannot read {}", fatbin.display()))?;
    let found =
        qsa::ptx::fatbin::ptx_archs(&bytes).map_err(|e| anyhow!("{}: {e}", fatbin.display()))?;
    if !found.contains(&want) {
        // Arch-specific PTX (compute_90a) is not counted (qsa::ptx::fatbin): it runs on no
        // newer card.
        let keep = if job.target.features.contains(&Feature::Wgmma) {
            format!("arch=compute_{want},code=compute_{want}` (portable PTX, beside the sm_{want}a SASS)")
        } else {
            format!("arch=compute_{want},code=[sm_{want},compute_{want}]`")
        };
        bail!(
            "{} carries no compute_{want} PTX (found: {found:?}; arch-specific PTX not counted): keep `-gencode {keep} in nvidia_flags; newer cards run {} through it",
            fatbin.display(),
            job.target.name
        );
    }
    Ok(())
}

/// clang / hipcc flags (without input and output paths). The Debian route adds the HIP 5.2
/// workarounds (notes/toolchains.md); both define the wave size explicitly, because clang 22
/// no longer does and portable.h refuses to guess.
fn amd_flags(job: &Job) -> Result<(Vec<String>, Vec<PathBuf>, Vec<PathBuf>)> {
    let wave = job
        .target
        .wave
        .ok_or_else(|| anyhow!("HIP target {} has no wave in matrix.yaml", job.target.name))?;
    let mut flags: Vec<String> = vec![
        "-x".into(),
        "hip".into(),
        format!("--offload-arch={}", job.target.name),
        format!("-D__AMDGCN_WAVEFRONT_SIZE={wave}"),
        "-mcode-object-version=5".into(),
        "-O3".into(),
        "--cuda-device-only".into(),
        "--no-gpu-bundle-output".into(),
        "-Werror".into(),
        "-Wall".into(),
        "-Ikernels".into(),
    ];
    let mut extra: Vec<PathBuf> = Vec::new();
    if let Some(d) = &job.tc.debian_hip {
        let (shim, _) = ensure_hip_shim(job.root)?;
        let shim: PathBuf = shim;
        let rel = |p: &Path| p.strip_prefix(job.root).unwrap_or(p).display().to_string();
        flags.push(format!("--rocm-path={}", d.rocm_path.display()));
        flags.push(format!(
            "--rocm-device-lib-path={}",
            rel(&d.device_lib_path)
        ));
        flags.push("-include".into());
        flags.push(rel(&shim));
        extra.push(shim);
        if let Some((isa, _)) = isa_version(&job.target.name) {
            extra.push(d.device_lib_path.join(isa));
        }
    }
    Ok((flags, vec![job.out("co")], extra))
}

fn compile_amd(sh: &Shell, job: &Job, flags: &[String]) -> Result<()> {
    let cc = &job.tc.compiler;
    let (src, co) = (&job.src, job.out("co.tmp"));
    // Renamed into place once whole, as compile_nvidia's outputs.
    let out = cmd!(sh, "{cc} {flags...} -c {src} -o {co}")
        .quiet()
        .ignore_status()
        .output()?;
    if !out.status.success() {
        bail!(
            "{} failed for {} ({}):\n{}{}",
            cc.display(),
            job.src.display(),
            job.target.name,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr).trim_end()
        );
    }
    std::fs::rename(job.abs(&co), job.abs(&job.out("co")))?;
    Ok(())
}
