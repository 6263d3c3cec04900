//! Parsers for the tools' output: cuobjdump's resource usage and elf dump, the ptxas log
//! (NVIDIA), llvm-readobj's notes (AMD).

use anyhow::{anyhow, bail, Context, Result};
use serde::Deserialize;
use std::collections::BTreeMap;

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
