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

use super::occupancy::{self, Limiter, Occupancy};
pub use super::resource_gates::{gate_resources, Violation, ViolationKind};
use anyhow::{anyhow, bail, Context, Result};
use qsa::matrix::Target;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;

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

// ---------------------------------------------------------------------------------------
// Parsers for the tools' output.

/// One function of `cuobjdump --dump-resource-usage`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct CuobjdumpUsage {
    pub regs: u32,
    pub stack: u32,
    pub shared: u32,
    pub local: u32,
}

/// `cuobjdump --dump-resource-usage` of one cubin: function name -> usage.
pub fn parse_cuobjdump_usage(text: &str) -> Result<BTreeMap<String, CuobjdumpUsage>> {
    let mut out = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let t = line.trim();
        if let Some(name) = t
            .strip_prefix("Function ")
            .and_then(|r| r.strip_suffix(':'))
        {
            current = Some(name.to_string());
        } else if t.starts_with("REG:") {
            let name = current
                .take()
                .ok_or_else(|| anyhow!("cuobjdump: usage line without a function: `{t}`"))?;
            let mut fields = BTreeMap::new();
            for kv in t.split_whitespace() {
                if let Some((k, v)) = kv.split_once(':') {
                    fields.insert(k, v);
                }
            }
            let get = |k: &str| -> Result<u32> {
                let v = fields
                    .get(k)
                    .ok_or_else(|| anyhow!("cuobjdump: no {k} for function {name}"))?;
                v.parse()
                    .with_context(|| format!("cuobjdump: bad {k} value `{v}` for function {name}"))
            };
            let usage = CuobjdumpUsage {
                regs: get("REG")?,
                stack: get("STACK")?,
                shared: get("SHARED")?,
                local: get("LOCAL")?,
            };
            if out.insert(name.clone(), usage).is_some() {
                bail!("cuobjdump: function {name} appears twice (more than one ELF in the input?)");
            }
        }
    }
    Ok(out)
}

/// `EIATTR_MAX_THREADS` of each kernel in `cuobjdump -elf` output (x * y * z).
pub fn parse_cuobjdump_max_threads(elf_dump: &str) -> Result<BTreeMap<String, u32>> {
    let mut out = BTreeMap::new();
    let mut section: Option<&str> = None;
    let mut lines = elf_dump.lines();
    while let Some(line) = lines.next() {
        if let Some(name) = line.strip_prefix(".nv.info.") {
            section = Some(name.trim());
        } else if !line.starts_with(char::is_whitespace) && !line.is_empty() {
            section = None;
        } else if line.trim() == "Attribute:\tEIATTR_MAX_THREADS".trim()
            || line.trim().ends_with("EIATTR_MAX_THREADS")
        {
            let Some(name) = section else { continue };
            // Format line, then `Value:\t0x100 0x1 0x1`.
            let value = lines
                .by_ref()
                .map(str::trim)
                .find(|l| l.starts_with("Value:"))
                .ok_or_else(|| {
                    anyhow!("cuobjdump -elf: EIATTR_MAX_THREADS of {name} has no value")
                })?;
            let mut product: u32 = 1;
            for v in value.trim_start_matches("Value:").split_whitespace() {
                let n = u32::from_str_radix(v.trim_start_matches("0x"), 16).with_context(|| {
                    format!("cuobjdump -elf: bad EIATTR_MAX_THREADS value `{v}` for {name}")
                })?;
                product = product.saturating_mul(n);
            }
            out.insert(name.to_string(), product);
        }
    }
    Ok(out)
}

/// One entry function of a ptxas `--resource-usage` log.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct PtxasUsage {
    pub regs: u32,
    pub stack_frame: u32,
    pub spill_stores: u32,
    pub spill_loads: u32,
    pub smem: u32,
}

/// Leading number of `s` (after trimming), e.g. `272 bytes stack frame` -> 272.
fn leading_number(s: &str) -> Option<u32> {
    s.split_whitespace().next()?.parse().ok()
}

/// The number just before `suffix` in a comma-separated ptxas list.
fn field_before(line: &str, suffix: &str) -> Option<u32> {
    line.split(',')
        .map(str::trim)
        .find(|p| p.ends_with(suffix))
        .and_then(leading_number)
}

/// ptxas `--resource-usage` output (nvcc prints it on stderr): entry function -> usage.
pub fn parse_ptxas(log: &str) -> Result<BTreeMap<String, PtxasUsage>> {
    let mut out: BTreeMap<String, PtxasUsage> = BTreeMap::new();
    let mut entry: Option<String> = None;
    let mut props_for: Option<String> = None;
    for line in log.lines() {
        let t = line
            .trim()
            .trim_start_matches("ptxas info")
            .trim_start()
            .trim_start_matches(':')
            .trim();
        if let Some(rest) = t.strip_prefix("Compiling entry function '") {
            let name = rest.split('\'').next().unwrap_or_default().to_string();
            out.insert(name.clone(), PtxasUsage::default());
            entry = Some(name);
        } else if let Some(rest) = t.strip_prefix("Function properties for ") {
            props_for = Some(rest.trim().to_string());
        } else if t.contains("bytes stack frame") {
            // Belongs to the function named by the preceding "Function properties" line; only
            // entry functions are reported (device functions have their own lines).
            if let Some(u) = props_for.as_ref().and_then(|n| out.get_mut(n)) {
                u.stack_frame = field_before(t, "bytes stack frame").unwrap_or(0);
                u.spill_stores = field_before(t, "bytes spill stores").unwrap_or(0);
                u.spill_loads = field_before(t, "bytes spill loads").unwrap_or(0);
            }
        } else if let Some(rest) = t.strip_prefix("Used ") {
            let name = entry
                .as_ref()
                .ok_or_else(|| anyhow!("ptxas: `{t}` before any entry function"))?;
            let u = out.get_mut(name).expect("inserted with the entry");
            u.regs = leading_number(rest)
                .ok_or_else(|| anyhow!("ptxas: cannot read registers in `{t}`"))?;
            u.smem = field_before(t, "bytes smem").unwrap_or(0);
        }
    }
    Ok(out)
}

/// One kernel of an AMDGPU code object's metadata note.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct AmdKernelMeta {
    #[serde(rename = ".name")]
    pub name: String,
    #[serde(rename = ".vgpr_count")]
    pub vgpr_count: u32,
    #[serde(rename = ".sgpr_count")]
    pub sgpr_count: u32,
    /// Absent before gfx90a (no accumulation registers).
    #[serde(rename = ".agpr_count", default)]
    pub agpr_count: Option<u32>,
    #[serde(rename = ".group_segment_fixed_size")]
    pub group_segment_fixed_size: u32,
    #[serde(rename = ".private_segment_fixed_size")]
    pub private_segment_fixed_size: u32,
    #[serde(rename = ".vgpr_spill_count", default)]
    pub vgpr_spill_count: u32,
    #[serde(rename = ".sgpr_spill_count", default)]
    pub sgpr_spill_count: u32,
    #[serde(rename = ".wavefront_size")]
    pub wavefront_size: u32,
    #[serde(rename = ".max_flat_workgroup_size")]
    pub max_flat_workgroup_size: u32,
}

/// The kernels of `llvm-readobj --notes` output of one code object.
pub fn parse_readobj_notes(text: &str) -> Result<Vec<AmdKernelMeta>> {
    #[derive(Deserialize)]
    struct Meta {
        #[serde(rename = "amdhsa.kernels")]
        kernels: Vec<AmdKernelMeta>,
    }
    let start = text.find("AMDGPU Metadata: ---").ok_or_else(|| {
        anyhow!("llvm-readobj --notes: no `AMDGPU Metadata` note (not an AMDGPU code object?)")
    })?;
    let body = &text[start + "AMDGPU Metadata: ".len()..];
    // The YAML document ends with a line holding `...`.
    let end = body
        .lines()
        .scan(0usize, |pos, l| {
            let here = *pos;
            *pos += l.len() + 1;
            Some((here, l))
        })
        .find(|(_, l)| l.trim() == "...")
        .map(|(p, _)| p)
        .ok_or_else(|| {
            anyhow!("llvm-readobj --notes: the metadata document does not end with `...`")
        })?;
    let meta: Meta = serde_yaml::from_str(&body[..end])
        .context("llvm-readobj --notes: cannot parse the AMDGPU metadata")?;
    Ok(meta.kernels)
}

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

// ---------------------------------------------------------------------------------------
// Text rendering (the snapshot) and reading it back.

/// Columns of the rendering: header, and how to show / read one kernel's value.
struct Column {
    name: &'static str,
    /// Left-aligned (names) rather than right-aligned (numbers).
    left: bool,
    show: fn(&KernelReport) -> String,
    read: fn(&mut KernelReport, &str) -> Result<()>,
}

fn opt(v: Option<u32>) -> String {
    v.map_or("-".to_string(), |v| v.to_string())
}

fn num(s: &str) -> Result<u32> {
    s.parse().map_err(|_| anyhow!("`{s}` is not a number"))
}

fn opt_num(s: &str) -> Result<Option<u32>> {
    if s == "-" {
        Ok(None)
    } else {
        num(s).map(Some)
    }
}

fn show_occ(k: &KernelReport) -> String {
    k.occupancy
        .map_or("-".into(), |o| format!("{}/{}", o.waves, o.max_waves))
}
fn read_occ(k: &mut KernelReport, s: &str) -> Result<()> {
    if s == "-" {
        k.occupancy = None;
        return Ok(());
    }
    let (w, m) = s
        .split_once('/')
        .ok_or_else(|| anyhow!("occupancy `{s}` is not WAVES/MAX"))?;
    let o = k.occupancy.get_or_insert(Occupancy {
        blocks: 0,
        waves: 0,
        max_waves: 0,
        limiter: Limiter::Threads,
    });
    o.waves = num(w)?;
    o.max_waves = num(m)?;
    Ok(())
}
fn show_blocks(k: &KernelReport) -> String {
    k.occupancy.map_or("-".into(), |o| o.blocks.to_string())
}
fn read_blocks(k: &mut KernelReport, s: &str) -> Result<()> {
    if s != "-" {
        let b = num(s)?;
        k.occupancy
            .get_or_insert(Occupancy {
                blocks: 0,
                waves: 0,
                max_waves: 0,
                limiter: Limiter::Threads,
            })
            .blocks = b;
    }
    Ok(())
}
fn show_pct(k: &KernelReport) -> String {
    k.occupancy
        .map_or("-".into(), |o| format!("{}%", o.percent()))
}
fn show_limiter(k: &KernelReport) -> String {
    k.occupancy
        .map_or("-".into(), |o| o.limiter.name().to_string())
}
fn read_limiter(k: &mut KernelReport, s: &str) -> Result<()> {
    if s != "-" {
        let l = Limiter::parse(s).ok_or_else(|| anyhow!("unknown limiter `{s}`"))?;
        k.occupancy
            .get_or_insert(Occupancy {
                blocks: 0,
                waves: 0,
                max_waves: 0,
                limiter: l,
            })
            .limiter = l;
    }
    Ok(())
}
fn ignore(_: &mut KernelReport, _: &str) -> Result<()> {
    Ok(())
}

macro_rules! col {
    ($name:expr, $field:ident, opt) => {
        Column {
            name: $name,
            left: false,
            show: |k| opt(k.$field),
            read: |k, s| {
                k.$field = opt_num(s)?;
                Ok(())
            },
        }
    };
    ($name:expr, $field:ident) => {
        Column {
            name: $name,
            left: false,
            show: |k| k.$field.to_string(),
            read: |k, s| {
                k.$field = num(s)?;
                Ok(())
            },
        }
    };
}

fn columns(vendor: &str) -> Vec<Column> {
    let mut c = vec![
        Column {
            name: "source",
            left: true,
            show: |k| k.source.clone(),
            read: |k, s| {
                k.source = s.into();
                Ok(())
            },
        },
        Column {
            name: "kernel",
            left: true,
            show: |k| k.kernel.clone(),
            read: |k, s| {
                k.kernel = s.into();
                Ok(())
            },
        },
        col!("block", block, opt),
    ];
    if vendor == "amd" {
        c.extend([
            col!("dyn_lds", dynamic_shared),
            col!("vgpr", registers),
            col!("agpr", agprs, opt),
            col!("sgpr", sgprs, opt),
            col!("lds", static_shared),
            col!("scratch", stack),
            col!("vgpr_spill", vgpr_spills, opt),
            col!("sgpr_spill", sgpr_spills, opt),
            col!("max_wg", max_threads),
            Column {
                name: "wg/CU",
                left: false,
                show: show_blocks,
                read: read_blocks,
            },
            Column {
                name: "waves/CU",
                left: false,
                show: show_occ,
                read: read_occ,
            },
        ]);
    } else {
        c.extend([
            col!("dyn_smem", dynamic_shared),
            col!("regs", registers),
            col!("smem", static_shared),
            col!("stack", stack),
            col!("local", local, opt),
            col!("spill_st", spill_stores, opt),
            col!("spill_ld", spill_loads, opt),
            col!("max_thr", max_threads),
            Column {
                name: "blocks/SM",
                left: false,
                show: show_blocks,
                read: read_blocks,
            },
            Column {
                name: "warps/SM",
                left: false,
                show: show_occ,
                read: read_occ,
            },
        ]);
    }
    c.extend([
        Column {
            name: "occ",
            left: false,
            show: show_pct,
            read: ignore,
        },
        Column {
            name: "limiter",
            left: true,
            show: show_limiter,
            read: read_limiter,
        },
    ]);
    c
}

const HEADER_PREFIX: &str = "# target: ";

impl Report {
    /// The stable, aligned text form: one header comment, a legend, a column header and one
    /// line per kernel. Deterministic for a given report (sorted kernels, no timestamps).
    pub fn to_text(&self) -> String {
        let cols = columns(&self.vendor);
        let cells: Vec<Vec<String>> =
            std::iter::once(cols.iter().map(|c| c.name.to_string()).collect())
                .chain(
                    self.kernels
                        .iter()
                        .map(|k| cols.iter().map(|c| (c.show)(k)).collect()),
                )
                .collect();
        let widths: Vec<usize> = (0..cols.len())
            .map(|i| cells.iter().map(|r| r[i].len()).max().unwrap_or(0))
            .collect();
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{HEADER_PREFIX}{}  vendor: {}  wave: {}  compiler: {}",
            self.target, self.vendor, self.wave, self.compiler
        );
        let legend = if self.vendor == "amd" {
            "# bytes: dyn_lds lds scratch; per lane: vgpr agpr sgpr; wg/CU, waves/CU: resident at the declared block size"
        } else {
            "# bytes: dyn_smem smem stack local spill_st spill_ld; regs per thread; blocks/SM, warps/SM: resident at the declared block size"
        };
        let _ = writeln!(s, "{legend}");
        for row in &cells {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                if i > 0 {
                    line.push_str("  ");
                }
                if cols[i].left {
                    let _ = write!(line, "{cell:<w$}", w = widths[i]);
                } else {
                    let _ = write!(line, "{cell:>w$}", w = widths[i]);
                }
            }
            s.push_str(line.trim_end());
            s.push('\n');
        }
        s
    }

    /// Read a report back from its text form (optionally inside an insta snapshot file).
    pub fn from_text(text: &str) -> Result<Report> {
        let mut body = text;
        if let Some(rest) = text.strip_prefix("---\n") {
            // insta header: `---` metadata `---` then the snapshot.
            let end = rest
                .find("\n---\n")
                .ok_or_else(|| anyhow!("snapshot header is not closed by `---`"))?;
            body = &rest[end + 5..];
        }
        let mut lines = body.lines().filter(|l| !l.trim().is_empty());
        let head = lines
            .next()
            .ok_or_else(|| anyhow!("empty resource report"))?;
        let head = head
            .strip_prefix(HEADER_PREFIX)
            .ok_or_else(|| anyhow!("resource report must start with `{HEADER_PREFIX}`"))?;
        let (target, rest) = head
            .split_once("  vendor: ")
            .ok_or_else(|| anyhow!("header has no vendor"))?;
        let (vendor, rest) = rest
            .split_once("  wave: ")
            .ok_or_else(|| anyhow!("header has no wave"))?;
        let (wave, compiler) = rest
            .split_once("  compiler: ")
            .ok_or_else(|| anyhow!("header has no compiler"))?;
        let cols = columns(vendor);
        let mut header: Option<Vec<usize>> = None;
        let mut kernels = Vec::new();
        for line in lines {
            if line.starts_with('#') {
                continue;
            }
            let fields: Vec<&str> = line.split_whitespace().collect();
            let Some(map) = &header else {
                let mut idx = Vec::new();
                for f in &fields {
                    idx.push(
                        cols.iter()
                            .position(|c| c.name == *f)
                            .ok_or_else(|| anyhow!("unknown column `{f}`"))?,
                    );
                }
                header = Some(idx);
                continue;
            };
            if fields.len() != map.len() {
                bail!(
                    "line `{line}` has {} fields, the header {}",
                    fields.len(),
                    map.len()
                );
            }
            let mut k = KernelReport {
                source: String::new(),
                kernel: String::new(),
                block: None,
                dynamic_shared: 0,
                registers: 0,
                agprs: None,
                sgprs: None,
                static_shared: 0,
                stack: 0,
                local: None,
                spill_stores: None,
                spill_loads: None,
                vgpr_spills: None,
                sgpr_spills: None,
                max_threads: 0,
                occupancy: None,
            };
            for (f, &ci) in fields.iter().zip(map) {
                (cols[ci].read)(&mut k, f)
                    .with_context(|| format!("column {} of `{line}`", cols[ci].name))?;
            }
            kernels.push(k);
        }
        Ok(Report {
            target: target.to_string(),
            vendor: vendor.to_string(),
            wave: num(wave).context("header wave")?,
            compiler: compiler.trim().to_string(),
            kernels,
        })
    }

    pub fn kernel(&self, source: &str, kernel: &str) -> Option<&KernelReport> {
        self.kernels
            .iter()
            .find(|k| k.source == source && k.kernel == kernel)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    // Real tool output, captured from this build (xtask/tests/fixtures/README.md says how).
    macro_rules! fixture {
        ($name:literal) => {
            include_str!(concat!("../tests/fixtures/", $name))
        };
    }

    fn matrix() -> qsa::matrix::Matrix {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../matrix.yaml");
        qsa::matrix::Matrix::load(std::path::Path::new(path)).unwrap()
    }

    pub(crate) fn target(name: &str) -> Target {
        matrix().target(name).unwrap().clone()
    }

    fn decls(pairs: &[(&str, u32, u32)]) -> BTreeMap<String, LaunchDecl> {
        pairs
            .iter()
            .map(|(n, b, d)| {
                (
                    n.to_string(),
                    LaunchDecl {
                        block: Some(*b),
                        dynamic_shared: *d,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn cuobjdump_usage_sm90_probe() {
        let u = parse_cuobjdump_usage(fixture!("probe_sm_90.res-usage.txt")).unwrap();
        assert_eq!(
            u["qsa_probe_scan"],
            CuobjdumpUsage {
                regs: 15,
                stack: 0,
                shared: 1088,
                local: 0
            }
        );
        assert_eq!(
            u["qsa_probe_histogram"],
            CuobjdumpUsage {
                regs: 16,
                stack: 0,
                shared: 2080,
                local: 0
            }
        );
        let u = parse_cuobjdump_usage(fixture!("block_scores_sm_86.res-usage.txt")).unwrap();
        assert_eq!(u.len(), 6);
        assert_eq!(
            u["block_scores_bf16_decode"],
            CuobjdumpUsage {
                regs: 128,
                stack: 152,
                shared: 0,
                local: 0
            }
        );
        assert_eq!(u["block_scores_simt"].shared, 43264);
        assert!(parse_cuobjdump_usage(" Function f:\n  REG:x STACK:0 SHARED:0 LOCAL:0\n").is_err());
    }

    #[test]
    fn cuobjdump_max_threads() {
        let m = parse_cuobjdump_max_threads(fixture!("probe_sm_90.elf.txt")).unwrap();
        assert_eq!(m.get("qsa_probe_scan"), Some(&256));
        assert_eq!(m.get("qsa_probe_histogram"), Some(&256));
        let m = parse_cuobjdump_max_threads(fixture!("spill_sm_75.elf.txt")).unwrap();
        assert_eq!(m.get("spill_kernel"), Some(&1024));
    }

    #[test]
    fn ptxas_logs() {
        let p = parse_ptxas(fixture!("probe_sm_90.ptxas.log")).unwrap();
        assert_eq!(
            p["qsa_probe_scan"],
            PtxasUsage {
                regs: 15,
                stack_frame: 0,
                spill_stores: 0,
                spill_loads: 0,
                smem: 64
            }
        );
        assert_eq!(p["qsa_probe_histogram"].smem, 1056);
        let p = parse_ptxas(fixture!("spill_sm_75.ptxas.log")).unwrap();
        assert_eq!(
            p["spill_kernel"],
            PtxasUsage {
                regs: 64,
                stack_frame: 272,
                spill_stores: 516,
                spill_loads: 532,
                smem: 0
            }
        );
        let p = parse_ptxas(fixture!("block_scores_sm_86.ptxas.log")).unwrap();
        assert_eq!(p.len(), 6);
        assert_eq!(
            (
                p["block_scores_tf32_decode"].spill_stores,
                p["block_scores_tf32_decode"].spill_loads
            ),
            (196, 144)
        );
        assert_eq!(p["block_scores_warp"].regs, 40);
    }

    #[test]
    fn readobj_notes_all_three_amd_targets() {
        let k = parse_readobj_notes(fixture!("probe_gfx906.notes.txt")).unwrap();
        let h = k.iter().find(|k| k.name == "qsa_probe_histogram").unwrap();
        assert_eq!(
            (
                h.vgpr_count,
                h.sgpr_count,
                h.agpr_count,
                h.group_segment_fixed_size,
                h.wavefront_size,
                h.max_flat_workgroup_size
            ),
            (12, 27, None, 1040, 64, 256)
        );
        let k = parse_readobj_notes(fixture!("probe_gfx950.notes.txt")).unwrap();
        let h = k.iter().find(|k| k.name == "qsa_probe_histogram").unwrap();
        assert_eq!(
            (
                h.vgpr_count,
                h.sgpr_count,
                h.agpr_count,
                h.group_segment_fixed_size
            ),
            (11, 30, Some(0), 1040)
        );
        let k = parse_readobj_notes(fixture!("probe_gfx1201.notes.txt")).unwrap();
        let s = k.iter().find(|k| k.name == "qsa_probe_scan").unwrap();
        assert_eq!(
            (
                s.vgpr_count,
                s.sgpr_count,
                s.group_segment_fixed_size,
                s.wavefront_size
            ),
            (14, 10, 64, 32)
        );
        let k = parse_readobj_notes(fixture!("topk_gfx906.notes.txt")).unwrap();
        let s = k
            .iter()
            .find(|k| k.name == "qsa_topk_split_select")
            .unwrap();
        assert_eq!(
            (
                s.vgpr_count,
                s.sgpr_count,
                s.sgpr_spill_count,
                s.vgpr_spill_count
            ),
            (54, 100, 38, 0)
        );
        let k = parse_readobj_notes(fixture!("spill_gfx906.notes.txt")).unwrap();
        assert_eq!(
            (k[0].vgpr_spill_count, k[0].private_segment_fixed_size),
            (81, 176)
        );
        assert!(parse_readobj_notes("File: x.co\nNotes [\n]\n").is_err());
    }

    pub(crate) fn nvidia_probe_report() -> Report {
        let t = target("sm_90");
        let d = decls(&[
            ("qsa_probe_histogram", 256, 0),
            ("qsa_probe_scan", 256, 1024),
        ]);
        let kernels = nvidia_kernels(
            &t,
            "probe",
            fixture!("probe_sm_90.res-usage.txt"),
            fixture!("probe_sm_90.elf.txt"),
            fixture!("probe_sm_90.ptxas.log"),
            &d,
        )
        .unwrap();
        Report {
            target: "sm_90".into(),
            vendor: "nvidia".into(),
            wave: 32,
            compiler: "nvcc 13.0.88".into(),
            kernels,
        }
    }

    pub(crate) fn amd_topk_report() -> Report {
        let t = target("gfx906");
        let d = decls(&[
            ("qsa_topk_split_select", 512, 0),
            ("qsa_topk_wide", 1024, 0),
        ]);
        let kernels = amd_kernels(&t, "topk", fixture!("topk_gfx906.notes.txt"), &d).unwrap();
        Report {
            target: "gfx906".into(),
            vendor: "amd".into(),
            wave: 64,
            compiler: "clang 22.1.8 (Debian)".into(),
            kernels,
        }
    }

    #[test]
    fn nvidia_report_combines_the_tools() {
        let r = nvidia_probe_report();
        let h = r.kernel("probe", "qsa_probe_histogram").unwrap();
        assert_eq!(
            (h.registers, h.static_shared, h.max_threads, h.spill_stores),
            (16, 2080, 256, Some(0))
        );
        // 256 threads, 16 regs on sm_90: 8 blocks by threads (see occupancy tests).
        assert_eq!(h.occupancy.unwrap().waves, 64);
        // A ptxas log from another binary is caught.
        let e = nvidia_kernels(
            &target("sm_90"),
            "probe",
            fixture!("probe_sm_90.res-usage.txt"),
            "",
            &fixture!("probe_sm_90.ptxas.log").replace("Used 15 registers", "Used 17 registers"),
            &BTreeMap::new(),
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("ptxas says 17 registers, cuobjdump 15"),
            "{e}"
        );
    }

    #[test]
    fn amd_report_wave_mismatch_is_an_error() {
        let e = amd_kernels(
            &target("gfx1201"),
            "topk",
            fixture!("topk_gfx906.notes.txt"),
            &BTreeMap::new(),
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("wave 64 but target gfx1201 has wave 32"),
            "{e}"
        );
    }

    #[test]
    fn text_round_trips_and_is_aligned() {
        for r in [nvidia_probe_report(), amd_topk_report()] {
            let text = r.to_text();
            let back = Report::from_text(&text).unwrap();
            assert_eq!(back.to_text(), text);
            assert_eq!(back.kernels.len(), r.kernels.len());
            for (a, b) in back.kernels.iter().zip(&r.kernels) {
                assert_eq!(
                    (a.registers, a.static_shared, a.stack, a.block),
                    (b.registers, b.static_shared, b.stack, b.block)
                );
                assert_eq!(
                    (a.spill_stores, a.spill_loads, a.vgpr_spills, a.sgpr_spills),
                    (b.spill_stores, b.spill_loads, b.vgpr_spills, b.sgpr_spills)
                );
                assert_eq!(
                    a.occupancy
                        .map(|o| (o.waves, o.max_waves, o.blocks, o.limiter)),
                    b.occupancy
                        .map(|o| (o.waves, o.max_waves, o.blocks, o.limiter))
                );
            }
            // Every table line has its columns at the same offsets as the header.
            let table: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
            let col = |l: &str| l.find(" kernel").or_else(|| l.find(" qsa_"));
            assert!(table.iter().all(|l| col(l) == col(table[0])), "{text}");
        }
        // Inside an insta snapshot file.
        let r = nvidia_probe_report();
        let snap = format!(
            "---\nsource: xtask/src/golden.rs\nexpression: resources\n---\n{}",
            r.to_text()
        );
        assert_eq!(Report::from_text(&snap).unwrap().to_text(), r.to_text());
        assert!(Report::from_text("garbage\n").is_err());
    }

    #[test]
    fn text_snapshot_of_the_probe_on_sm_90() {
        let text = nvidia_probe_report().to_text();
        let expected = "\
# target: sm_90  vendor: nvidia  wave: 32  compiler: nvcc 13.0.88
# bytes: dyn_smem smem stack local spill_st spill_ld; regs per thread; blocks/SM, warps/SM: resident at the declared block size
source  kernel               block  dyn_smem  regs  smem  stack  local  spill_st  spill_ld  max_thr  blocks/SM  warps/SM   occ  limiter
probe   qsa_probe_histogram    256         0    16  2080      0      0         0         0      256          8     64/64  100%  threads
probe   qsa_probe_scan         256      1024    15  1088      0      0         0         0      256          8     64/64  100%  threads
";
        assert_eq!(text, expected);
    }
}
