//! matrix.yaml: the targets, variants, cases and gates, parsed and validated.
//!
//! Parsing is strict: unknown keys are rejected by serde; everything serde cannot check
//! (dangling names, impossible shapes, duplicate names) is checked by `validate`. Every error
//! names the file, the line and the field, and says what would be valid.

mod case_checks;
mod inputs;
pub mod limits;
mod load;
mod locate;
mod validate;

pub use locate::Spans;

use crate::dispatch::{Feature, Switches, TargetCaps, Vendor, KNOWN_SWITCHES};
use crate::echo;
use crate::problem::AttnDtype;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// The suites a case can run.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, serde::Serialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Suite {
    /// Top-k ids equal the reference's exactly; end-to-end selection from a scorer.
    Parity,
    /// FP64 error of outputs against the baseline variant's.
    Error,
    /// Timing: median over repetitions after warm-up.
    Bench,
}

impl Suite {
    pub const ALL: [Suite; 3] = [Suite::Parity, Suite::Error, Suite::Bench];
    pub fn name(self) -> &'static str {
        match self {
            Suite::Parity => "parity",
            Suite::Error => "error",
            Suite::Bench => "bench",
        }
    }
}

/// Kernel families, as matrix.yaml names them.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, serde::Serialize,
)]
#[serde(rename_all = "lowercase")]
pub enum FamilyName {
    Topk,
    Scores,
    Attention,
}

impl FamilyName {
    pub fn name(self) -> &'static str {
        match self {
            FamilyName::Topk => "topk",
            FamilyName::Scores => "scores",
            FamilyName::Attention => "attention",
        }
    }
}

/// Which toolchain builds a target's kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Toolchain {
    None,
    Cuda,
    Hip,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Matrix {
    pub version: u32,
    pub seed: u64,
    pub gates: Gates,
    pub variants: Vec<Variant>,
    pub baselines: BTreeMap<FamilyName, String>,
    pub targets: Vec<Target>,
    pub cases: Vec<Case>,
    /// Where the matrix was read from (for error messages and repro commands).
    #[serde(skip)]
    pub path: PathBuf,
    #[serde(skip)]
    source: String,
    /// Names of the cases added with `add_cases_file` (ad hoc: gated, not snapshotted).
    #[serde(skip)]
    pub added_cases: std::collections::BTreeSet<String>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gates {
    pub error_ratio: f64,
    /// Per family and precision: the error suite's floor and limit (src/suites/error.rs).
    pub error_limits: BTreeMap<FamilyName, BTreeMap<Precision, ErrorLimit>>,
    pub bench: BenchGates,
}

/// The arithmetic a kernel's error is judged by (src/suites/error.rs `precision`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    F32,
    Tf32,
    Bf16,
    /// Tensor-core attention (16-bit operand parts, f32 accumulation).
    Mma,
    /// The staged attention kernel in FP32 tiles (targets without bf16 tensor cores: sm_75,
    /// AMD): dS from tile products, dK / dV reduced per CTA then added atomically.
    #[serde(rename = "f32_staged")]
    F32Staged,
}

/// Relative max error: below `floor` always passes; above `limit` always fails.
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorLimit {
    pub floor: f64,
    pub limit: f64,
}

#[derive(Clone, Debug, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct BenchGates {
    pub warmup: usize,
    pub min_reps: usize,
    pub max_reps: usize,
    pub max_seconds: f64,
    pub target_rel_noise: f64,
    pub remeasure: usize,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Variant {
    pub name: String,
    pub family: FamilyName,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub doc: String,
}

impl Variant {
    pub fn switches(&self) -> Switches {
        Switches::new(self.env.clone())
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    pub name: String,
    pub vendor: Vendor,
    pub card: String,
    pub toolchain: Toolchain,
    /// GitHub Actions `runs-on` labels of the runner that has this card.
    pub runs_on: Vec<String>,
    #[serde(default)]
    pub wave: Option<u32>,
    #[serde(default)]
    pub shared_per_block: Option<u32>,
    #[serde(default)]
    pub multiprocessors: Option<u32>,
    #[serde(default)]
    pub features: Vec<Feature>,
    /// Occupancy limits (NVIDIA: regs_per_sm, ...; AMD: vgprs_per_simd_lane, ...).
    #[serde(default)]
    pub limits: BTreeMap<String, u64>,
    /// Relative benchmark tolerance before a slowdown is suspected.
    pub bench_tolerance: f64,
    /// A reason: the target's failures are reported, not gating.
    #[serde(default)]
    pub unstable: Option<String>,
    /// Keep golden benchmark medians and gate on them (false: every verdict is NEW).
    #[serde(default = "yes")]
    pub bench_gate: bool,
    /// This target's measurement settings, replacing `gates.bench`.
    #[serde(default)]
    pub bench: Option<BenchGates>,
}

fn yes() -> bool {
    true
}

impl Target {
    pub fn caps(&self) -> TargetCaps {
        TargetCaps {
            name: self.name.clone(),
            vendor: self.vendor,
            wave: self.wave.unwrap_or(1),
            shared_per_block: self.shared_per_block.unwrap_or(0),
            multiprocessors: self.multiprocessors.unwrap_or(1),
            features: self.features.clone(),
        }
    }
    pub fn is_gpu(&self) -> bool {
        self.vendor != Vendor::Cpu
    }
    /// The benchmark settings in force on this target.
    pub fn bench_gates<'a>(&'a self, matrix: &'a Matrix) -> &'a BenchGates {
        self.bench.as_ref().unwrap_or(&matrix.gates.bench)
    }
}

/// Which targets a case runs on.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum TargetSel {
    /// `all` or `gpu`.
    Keyword(String),
    List(Vec<String>),
}

impl Default for TargetSel {
    fn default() -> Self {
        TargetSel::Keyword("all".into())
    }
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub name: String,
    #[serde(default)]
    pub topk: Option<TopkShape>,
    #[serde(default)]
    pub scores: Option<ScoresShape>,
    #[serde(default)]
    pub attention: Option<AttnShape>,
    /// Input distributions (src/gen.rs); ignored for tensors read from `inputs`.
    #[serde(default)]
    pub dists: Vec<String>,
    pub variants: Vec<String>,
    pub suites: Vec<Suite>,
    #[serde(default)]
    pub targets: TargetSel,
    /// Check only this many (evenly spaced) query rows against FP64: for shapes whose full
    /// FP64 reference would take minutes on a CPU. Every checked row is exact; the rest
    /// still run on the device.
    #[serde(default)]
    pub check_rows: Option<usize>,
    /// Tensors read from .npy files instead of generated (paths relative to the file that
    /// declares the case): topk: scores [queries, capacity] f32, active [queries] i32;
    /// scores: q, kb, w (f32).
    #[serde(default)]
    pub inputs: BTreeMap<String, PathBuf>,
}

#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ActiveMode {
    /// Decode form: no active counts.
    None,
    /// Prefill: query q of nq sees the first n - nq + q + 1 entries (clamped to [0, n]).
    Causal,
    /// Active counts that hit every edge: 0, 1, k-1, k, k+1, n (cycled over queries).
    Edge,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopkShape {
    pub queries: usize,
    pub n: usize,
    pub capacity: usize,
    pub k: usize,
    #[serde(default = "active_none")]
    pub active: ActiveMode,
}

fn active_none() -> ActiveMode {
    ActiveMode::None
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScoresShape {
    pub queries: usize,
    pub heads: usize,
    pub blocks: usize,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttnShape {
    pub batch: usize,
    pub q_len: usize,
    pub kv_len: usize,
    pub hq: usize,
    pub hkv: usize,
    pub t: usize,
    pub dtype: AttnDtype,
    /// Softmax scale; default 1/sqrt(128).
    #[serde(default)]
    pub scale: Option<f32>,
    /// K / V layout: `nhd` (fla's, the default) or `hnd` (head-major: decode forward only).
    #[serde(default)]
    pub kv_layout: crate::problem::KvLayout,
    /// dO's dtype: `f32` (the default) or `bf16` (src/problem.rs, GradDtype).
    #[serde(default)]
    pub do_dtype: crate::problem::GradDtype,
}

impl Case {
    pub fn family(&self) -> FamilyName {
        if self.topk.is_some() {
            FamilyName::Topk
        } else if self.scores.is_some() {
            FamilyName::Scores
        } else {
            FamilyName::Attention
        }
    }
    pub fn runs_on(&self, target: &Target) -> bool {
        match &self.targets {
            TargetSel::Keyword(k) if k == "gpu" => target.is_gpu(),
            TargetSel::Keyword(_) => true,
            TargetSel::List(l) => l.iter().any(|t| t == &target.name),
        }
    }
}

/// A matrix error: file, line, field, and what would be valid.
#[derive(Debug)]
pub struct MatrixError {
    pub path: PathBuf,
    pub line: Option<usize>,
    pub field: String,
    pub message: String,
}

impl fmt::Display for MatrixError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(
                f,
                "{}:{}: {}: {}",
                self.path.display(),
                l,
                self.field,
                self.message
            ),
            None => write!(
                f,
                "{}: {}: {}",
                self.path.display(),
                self.field,
                self.message
            ),
        }
    }
}

impl std::error::Error for MatrixError {}

/// Distribution names each family accepts (src/gen.rs implements them).
pub fn known_dists(family: FamilyName) -> &'static [&'static str] {
    match family {
        FamilyName::Topk => crate::gen::TOPK_DISTS,
        FamilyName::Scores => crate::gen::SCORES_DISTS,
        FamilyName::Attention => crate::gen::ATTN_DISTS,
    }
}

/// An error about the field at YAML path `at` (`cases[3].topk.k`) of `src`: its line is
/// found by the file's structure (locate.rs), never by searching the text.
fn err_at(path: &Path, src: &str, at: &str, field: &str, message: String) -> MatrixError {
    MatrixError {
        path: path.to_owned(),
        line: Spans::of(src).line(at),
        field: field.to_owned(),
        message,
    }
}

impl Matrix {
    pub fn target(&self, name: &str) -> Option<&Target> {
        self.targets.iter().find(|t| t.name == name)
    }

    pub fn variant(&self, family: FamilyName, name: &str) -> Option<&Variant> {
        self.variants
            .iter()
            .find(|v| v.family == family && v.name == name)
    }

    pub fn target_names(&self) -> Vec<&str> {
        self.targets.iter().map(|t| t.name.as_str()).collect()
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod tests_inputs;
