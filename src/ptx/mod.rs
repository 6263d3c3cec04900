//! Older NVIDIA targets on a newer card, through their PTX.
//!
//! The fatbins `cargo xtask build` writes for `sm_XX` carry `compute_XX` PTX next to the
//! SASS (`-gencode arch=compute_XX,code=[sm_XX,compute_XX]`), and the driver compiles PTX
//! for whatever newer card loads it. So on an H200 (sm_90), `qsa run --target sm_75` can
//! run sm_75's kernels on silicon: the target's dispatch, caps and shared-memory limit, the
//! card's execution. Such a run is status `run (PTX on sm_90)`, never plain `run`, and keeps
//! no bench medians (a time on an H200 says nothing about an RTX 2080 Ti).
//!
//! The order of preference for a GPU target: its own card, then PTX on a newer NVIDIA card,
//! then the emulator (`cargo xtask matrix`), then `built, not run`.
//!
//! `decide` is the whole rule, pure (device arch x target x fatbin contents -> mode or the
//! reason there is none); the runner calls it before any work.

pub mod fatbin;

use crate::dispatch::Vendor;
use std::path::{Path, PathBuf};

/// A target run through its PTX on a newer card.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PtxRun {
    /// The target, as in matrix.yaml ("sm_75").
    pub target: String,
    /// The card it runs on ("sm_90").
    pub card: String,
    /// Dynamic shared memory one block may use: the target's, never the card's larger one.
    pub shared_limit: u32,
}

impl PtxRun {
    /// The target status label: `run (PTX on sm_90)`.
    pub fn label(&self) -> String {
        status_label(&self.card)
    }
    /// Why the results look as they do (results.yaml `reason`).
    pub fn reason(&self) -> String {
        format!(
            "{t}'s PTX compiled by the driver for this {c} at load: {t}'s dispatch, caps and \
             shared limit ({} bytes per block), the {c} card's execution; no bench medians",
            self.shared_limit,
            t = self.target,
            c = self.card
        )
    }
    /// The message of every bench check this mode skips.
    pub fn bench_skip(&self) -> String {
        format!(
            "skipped: {t} ran as PTX on an {c} card, whose times say nothing about a {t} card \
             (no bench medians in PTX mode; bench needs the {t} card itself)",
            t = self.target,
            c = self.card
        )
    }
}

/// `run (PTX on <card>)`: the status of a target run through its PTX on `card`.
pub fn status_label(card: &str) -> String {
    format!("run (PTX on {card})")
}

/// How an NVIDIA target runs on the card here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The card is the target's own: its SASS, as always.
    Native,
    /// A newer card: the target's PTX, compiled by the driver.
    Ptx(PtxRun),
}

/// `sm_75` -> 75, `sm_100` -> 100. Architecture-specific names (`sm_90a`) have no PTX that
/// runs forward, so they are not numbers here.
pub fn sm_number(arch: &str) -> Option<u32> {
    let digits = arch.strip_prefix("sm_")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// What the fatbin of each kernel family holds: the file, and its PTX architectures or why
/// it could not be read.
pub type FatbinScan = Vec<(PathBuf, Result<Vec<u32>, String>)>;

/// Read the fatbin of every kernel family in `dir` (`<dir>/<stem>.fatbin`).
pub fn scan_fatbins(dir: &Path) -> FatbinScan {
    crate::gpu::Family::ALL
        .iter()
        .map(|f| {
            let p = dir.join(format!("{}.fatbin", f.stem()));
            let r = std::fs::read(&p)
                .map_err(|e| format!("cannot read it ({e})"))
                .and_then(|b| fatbin::ptx_archs(&b));
            (p, r)
        })
        .collect()
}

/// The card here, as the runner sees it.
#[derive(Clone, Debug)]
pub struct Card<'a> {
    pub vendor: Vendor,
    pub arch: &'a str,
    /// The most dynamic shared memory one block may opt into on this card.
    pub max_shared_per_block: u32,
}

/// The target to run, from matrix.yaml.
#[derive(Clone, Debug)]
pub struct Wanted<'a> {
    pub name: &'a str,
    pub vendor: Vendor,
    pub shared_per_block: u32,
}

/// How `target` runs on `card`, or why it cannot (a `built, not run` reason naming the
/// fix). `allow_ptx: false` (`qsa run --no-ptx`) refuses the PTX mode. `scan` reads the
/// target's fatbins; it is called only when the PTX mode is otherwise possible.
pub fn decide(
    target: &Wanted,
    card: &Card,
    allow_ptx: bool,
    scan: impl FnOnce() -> FatbinScan,
) -> Result<Mode, String> {
    let t = target.name;
    if target.vendor != card.vendor {
        return Err(format!(
            "{t} is a {:?} target and the device here is {:?} ({}): no code of one vendor runs on the other",
            target.vendor, card.vendor, card.arch
        ));
    }
    if card.arch == t {
        return Ok(Mode::Native);
    }
    let instead = format!("run target {} instead", card.arch);
    let (Some(want), Some(have)) = (sm_number(t), sm_number(card.arch)) else {
        return Err(format!(
            "the device here is {}, not {t}, and one of them is not an sm_XX architecture whose PTX runs forward: {instead}",
            card.arch
        ));
    };
    if have < want {
        return Err(format!(
            "the CUDA device here is {}, older than {t}: {t}'s code (SASS or PTX) runs only on {t} or newer; {instead}",
            card.arch
        ));
    }
    if !allow_ptx {
        return Err(format!(
            "the CUDA device here is {}, not {t}, and --no-ptx forbids running {t}'s PTX on it: {instead}, or drop --no-ptx",
            card.arch
        ));
    }
    for (file, archs) in scan() {
        let fix = format!(
            "rebuild with `cargo xtask build --target {t}` (nvcc -gencode arch=compute_{want},code=[sm_{want},compute_{want}])"
        );
        match archs {
            Err(why) => {
                return Err(format!(
                    "{t} on this {} needs its PTX, and {}: {why}; {fix}",
                    card.arch,
                    file.display()
                ))
            }
            Ok(a) if !a.contains(&want) => {
                let found = if a.is_empty() {
                    "none".to_string()
                } else {
                    a.iter()
                        .map(|x| format!("compute_{x}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                return Err(format!(
                    "{t} on this {} needs its PTX, and {} carries no compute_{want} PTX (PTX found: {found}); {fix}",
                    card.arch,
                    file.display()
                ));
            }
            Ok(_) => {}
        }
    }
    Ok(Mode::Ptx(PtxRun {
        target: t.to_string(),
        card: card.arch.to_string(),
        shared_limit: target.shared_per_block.min(card.max_shared_per_block),
    }))
}

#[cfg(test)]
mod tests;
