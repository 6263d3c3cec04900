//! The text rendering of a report (the golden snapshot `resources.snap`, aligned columns) and
//! reading it back (`Report::from_text`), so the gates compare against what was reviewed.

use super::{KernelReport, Report};
use crate::build::occupancy::{Limiter, Occupancy};
use anyhow::{anyhow, bail, Context, Result};
use std::fmt::Write as _;

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
}
