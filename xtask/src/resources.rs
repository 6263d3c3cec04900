//! Per-kernel resource reports read from the built binaries, their text rendering (the
//! golden snapshot `golden/<target>/resources.snap`) and the resource gates.
//!
//! Sources of each figure:
//! - NVIDIA: `cuobjdump --dump-resource-usage` of the cubin (registers, static shared, stack,
//!   local), `cuobjdump -elf` (`EIATTR_MAX_THREADS`, present when the kernel has
//!   `__launch_bounds__`), and the ptxas log saved at compile time (spill stores / loads,
//!   which the binary does not record). The build checks that ptxas and cuobjdump agree on
//!   the register count of every kernel.
//! - AMD: the code object's `NT_AMDGPU_METADATA` note as `llvm-readobj --notes` prints it.
//!
//! The gates that compare a report with the golden one are in resource_gates.rs.
//!
//! The text rendering is the snapshot reviewers read, and `Report::from_text` reads it back,
//! so the gates compare against exactly what was reviewed.

use super::occupancy::{self, Occupancy};
pub use super::resource_gates::{gate_resources, Violation, ViolationKind};
use anyhow::{anyhow, bail, Result};
use qsa::matrix::Target;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The resources of every kernel of one target.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub target: String,
    /// `nvidia` or `amd`.
    pub vendor: String,
    pub wave: u32,
    /// Compiler and version, e.g. `nvcc 13.0.88`.
    pub compiler: String,
    /// Sorted by (source, kernel).
    pub kernels: Vec<KernelReport>,
}

/// One kernel's resources. Vendor-specific figures are `None` on the other vendor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelReport {
    /// Source stem (`probe` for kernels/probe.cu).
    pub source: String,
    pub kernel: String,
    /// Launch block size declared in the source (`// qsa:block N`).
    pub block: Option<u32>,
    /// Dynamic shared memory / LDS declared in the source (`// qsa:dynamic_shared BYTES`).
    pub dynamic_shared: u32,
    /// Registers per thread (NVIDIA) / VGPRs per lane (AMD, arch + acc where unified).
    pub registers: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agprs: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sgprs: Option<u32>,
    /// Static shared memory / LDS (group segment) bytes per block, as the binary records it.
    pub static_shared: u32,
    /// Stack frame bytes per thread (NVIDIA) / private segment (scratch) bytes per lane (AMD).
    pub stack: u32,
    /// Local memory bytes per thread (NVIDIA).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<u32>,
    /// Spill store / load bytes per thread (NVIDIA, from ptxas).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spill_stores: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spill_loads: Option<u32>,
    /// VGPRs / SGPRs spilled (AMD).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vgpr_spills: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sgpr_spills: Option<u32>,
    /// The largest block the binary may be launched with (launch bounds / flat workgroup size).
    pub max_threads: u32,
    pub occupancy: Option<Occupancy>,
}

impl Report {
    /// The report of one kernel, by source stem and name.
    pub fn kernel(&self, source: &str, kernel: &str) -> Option<&KernelReport> {
        self.kernels
            .iter()
            .find(|k| k.source == source && k.kernel == kernel)
    }
}

impl KernelReport {
    /// Static + dynamic shared memory / LDS per block.
    pub fn shared_total(&self) -> u64 {
        u64::from(self.static_shared) + u64::from(self.dynamic_shared)
    }
    /// `source/kernel`, how messages name a kernel.
    pub fn id(&self) -> String {
        format!("{}/{}", self.source, self.kernel)
    }
}

// Loaded through build.rs's #[path], so the submodules' paths are spelled out.
#[path = "resources/parse.rs"]
mod parse;
#[path = "resources/text.rs"]
mod text;

pub use parse::*;

// ---------------------------------------------------------------------------------------
// Building a report from parsed tool output.

/// What the source declares about one kernel's launch (xtask/src/build/annotations.rs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LaunchDecl {
    pub block: Option<u32>,
    pub dynamic_shared: u32,
}

/// NVIDIA kernels of one source from the cuobjdump usage, the elf dump and the ptxas log.
/// Fails if ptxas and the binary disagree on a kernel's registers (the log is stale or
/// belongs to another binary).
pub fn nvidia_kernels(
    target: &Target,
    source: &str,
    usage: &str,
    elf_dump: &str,
    ptxas_log: &str,
    decls: &BTreeMap<String, LaunchDecl>,
) -> Result<Vec<KernelReport>> {
    let usage = parse_cuobjdump_usage(usage)?;
    let max_threads = parse_cuobjdump_max_threads(elf_dump)?;
    let ptxas = parse_ptxas(ptxas_log)?;
    let mut out = Vec::new();
    for (name, u) in usage {
        let p = ptxas.get(&name).ok_or_else(|| {
            anyhow!("{source}: kernel {name} is in the cubin but not in the ptxas log")
        })?;
        if p.regs != u.regs {
            bail!(
                "{source}: kernel {name}: ptxas says {} registers, cuobjdump {}: stale log?",
                p.regs,
                u.regs
            );
        }
        let decl = decls.get(&name).copied().unwrap_or_default();
        let max = max_threads.get(&name).copied().unwrap_or(1024);
        let occupancy = match decl.block {
            Some(block) => Some(occupancy::nvidia(
                &target.name,
                &target.limits,
                occupancy::NvidiaKernel {
                    block,
                    regs: u.regs,
                    static_shared: u.shared,
                    dynamic_shared: decl.dynamic_shared,
                },
            )?),
            None => None,
        };
        out.push(KernelReport {
            source: source.to_string(),
            kernel: name,
            block: decl.block,
            dynamic_shared: decl.dynamic_shared,
            registers: u.regs,
            agprs: None,
            sgprs: None,
            static_shared: u.shared,
            stack: u.stack,
            local: Some(u.local),
            spill_stores: Some(p.spill_stores),
            spill_loads: Some(p.spill_loads),
            vgpr_spills: None,
            sgpr_spills: None,
            max_threads: max,
            occupancy,
        });
    }
    Ok(out)
}

/// AMD kernels of one source from `llvm-readobj --notes` of its code object.
pub fn amd_kernels(
    target: &Target,
    source: &str,
    notes: &str,
    decls: &BTreeMap<String, LaunchDecl>,
) -> Result<Vec<KernelReport>> {
    let mut out = Vec::new();
    for m in parse_readobj_notes(notes)? {
        if let Some(w) = target.wave {
            if w != m.wavefront_size {
                bail!(
                    "{source}: kernel {} was built for wave {} but target {} has wave {w}",
                    m.name,
                    m.wavefront_size,
                    target.name
                );
            }
        }
        let decl = decls.get(&m.name).copied().unwrap_or_default();
        let occupancy = match decl.block {
            Some(block) => Some(occupancy::amd(
                &target.name,
                &target.limits,
                occupancy::AmdKernel {
                    block,
                    wave: m.wavefront_size,
                    vgprs: m.vgpr_count,
                    sgprs: m.sgpr_count,
                    static_lds: m.group_segment_fixed_size,
                    dynamic_lds: decl.dynamic_shared,
                },
            )?),
            None => None,
        };
        out.push(KernelReport {
            source: source.to_string(),
            kernel: m.name,
            block: decl.block,
            dynamic_shared: decl.dynamic_shared,
            registers: m.vgpr_count,
            agprs: Some(m.agpr_count.unwrap_or(0)),
            sgprs: Some(m.sgpr_count),
            static_shared: m.group_segment_fixed_size,
            stack: m.private_segment_fixed_size,
            local: None,
            spill_stores: None,
            spill_loads: None,
            vgpr_spills: Some(m.vgpr_spill_count),
            sgpr_spills: Some(m.sgpr_spill_count),
            max_threads: m.max_flat_workgroup_size,
            occupancy,
        });
    }
    out.sort_by(|a, b| a.kernel.cmp(&b.kernel));
    Ok(out)
}

#[cfg(test)]
#[path = "resources/tests.rs"]
pub(crate) mod tests;
