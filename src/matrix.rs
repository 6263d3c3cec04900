//! matrix.yaml: the targets, variants, cases and gates, parsed and validated.
//!
//! Parsing is strict: unknown keys are rejected by serde; everything serde cannot check
//! (dangling names, impossible shapes, duplicate names) is checked by `validate`. Every error
//! names the file, the line and the field, and says what would be valid.

mod case_checks;
mod inputs;
pub mod limits;
mod locate;

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

impl Matrix {
    /// Read, parse and validate a matrix file.
    pub fn load(path: &Path) -> Result<Matrix, MatrixError> {
        let source = read_source(path)?;
        Self::parse(path, &source)
    }

    /// Parse and validate matrix text (`path` is used in messages only).
    pub fn parse(path: &Path, source: &str) -> Result<Matrix, MatrixError> {
        let mut m: Matrix = serde_yaml::from_str(source).map_err(|e| yaml_error(path, &e))?;
        m.path = path.to_owned();
        m.source = source.to_owned();
        resolve_inputs(&mut m.cases, path);
        m.validate()?;
        Ok(m)
    }

    /// Add the cases of another file (`--cases FILE`): a YAML file with one key, `cases`.
    /// The added cases are validated against this matrix's targets and variants; `.npy`
    /// input paths are resolved relative to that file.
    pub fn add_cases_file(&mut self, path: &Path) -> Result<usize, MatrixError> {
        let source = read_source(path)?;
        self.add_cases_text(path, &source)
    }

    /// `add_cases_file` on text already read (`path` names it in messages and is the base of
    /// relative `.npy` paths).
    pub fn add_cases_text(&mut self, path: &Path, source: &str) -> Result<usize, MatrixError> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct CasesFile {
            cases: Vec<Case>,
        }
        let source = source.to_owned();
        let file: CasesFile = serde_yaml::from_str(&source).map_err(|e| yaml_error(path, &e))?;
        let mut cases = file.cases;
        resolve_inputs(&mut cases, path);
        let n = cases.len();
        for (i, case) in cases.iter().enumerate() {
            self.check_case(case, i, path, &source)?;
            if self.cases.iter().any(|c| c.name == case.name) {
                let where_ = if self.added_cases.contains(&case.name) {
                    "in a cases file read before (or earlier in this one)".to_string()
                } else {
                    format!("in {}", self.path.display())
                };
                return Err(err_at(
                    path,
                    &source,
                    &format!("cases[{i}].name"),
                    "cases.name",
                    format!(
                        "case `{}` already exists {where_}: give it another name",
                        echo::value(&case.name)
                    ),
                ));
            }
            self.added_cases.insert(case.name.clone());
            self.cases.push(case.clone());
        }
        Ok(n)
    }

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

    fn validate(&self) -> Result<(), MatrixError> {
        let (path, src) = (self.path.as_path(), self.source.as_str());
        if self.version != 1 {
            return Err(err_at(
                path,
                src,
                "version",
                "version",
                format!(
                    "version {} is not supported: this qsa reads version 1",
                    self.version
                ),
            ));
        }
        if self.gates.error_ratio.is_nan() || self.gates.error_ratio < 1.0 {
            return Err(err_at(
                path,
                src,
                "gates.error_ratio",
                "gates.error_ratio",
                "must be a number >= 1.0".into(),
            ));
        }
        let b = &self.gates.bench;
        if b.min_reps == 0
            || b.min_reps > b.max_reps
            || b.max_seconds.is_nan()
            || b.max_seconds <= 0.0
        {
            return Err(err_at(
                path,
                src,
                "gates.bench",
                "gates.bench",
                format!(
                    "need 1 <= min_reps ({}) <= max_reps ({}) and max_seconds > 0",
                    b.min_reps, b.max_reps
                ),
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, t) in self.targets.iter().enumerate() {
            if !seen.insert(&t.name) {
                return Err(err_at(
                    path,
                    src,
                    &format!("targets[{i}].name"),
                    "targets.name",
                    format!("target `{}` is declared twice", echo::value(&t.name)),
                ));
            }
            self.check_target(i, t)?;
        }
        if !self.targets.iter().any(|t| t.vendor == Vendor::Cpu) {
            return Err(err_at(
                path,
                src,
                "targets",
                "targets",
                "a `cpu` target is required: it is the embedded default that always runs".into(),
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, v) in self.variants.iter().enumerate() {
            let at = format!("variants[{i}].name");
            if !seen.insert((v.family, &v.name)) {
                return Err(err_at(
                    path,
                    src,
                    &at,
                    "variants.name",
                    format!(
                        "variant `{}` of family {} is declared twice",
                        echo::value(&v.name),
                        v.family.name()
                    ),
                ));
            }
            for key in v.env.keys() {
                if !KNOWN_SWITCHES.iter().any(|(k, _)| k == key) {
                    let known: Vec<&str> = KNOWN_SWITCHES.iter().map(|(k, _)| *k).collect();
                    return Err(err_at(
                        path,
                        src,
                        &format!("variants[{i}].env.{key}"),
                        "variants.env",
                        format!(
                            "unknown switch `{}` in variant `{}`: known switches are {}",
                            echo::value(key),
                            echo::value(&v.name),
                            known.join(", ")
                        ),
                    ));
                }
            }
            if let Err(e) = crate::dispatch::scores::check_switches(&v.switches()) {
                return Err(err_at(
                    path,
                    src,
                    &format!("variants[{i}].env"),
                    "variants.env",
                    format!("variant `{}`: {e}", echo::value(&v.name)),
                ));
            }
        }
        for (family, name) in &self.baselines {
            if self.variant(*family, name).is_none() {
                return Err(err_at(
                    path,
                    src,
                    &format!("baselines.{}", family.name()),
                    "baselines",
                    format!(
                        "baseline `{}` of {} is not a declared variant of that family",
                        echo::value(name),
                        family.name()
                    ),
                ));
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, c) in self.cases.iter().enumerate() {
            if !seen.insert(&c.name) {
                return Err(err_at(
                    path,
                    src,
                    &format!("cases[{i}].name"),
                    "cases.name",
                    format!("case `{}` is declared twice", echo::value(&c.name)),
                ));
            }
            self.check_case(c, i, path, src)?;
        }
        Ok(())
    }

    fn check_target(&self, i: usize, t: &Target) -> Result<(), MatrixError> {
        let (path, src) = (self.path.as_path(), self.source.as_str());
        let name = echo::value(&t.name);
        let valid_name = t.name == "cpu" || t.name.starts_with("sm_") || t.name.starts_with("gfx");
        if !valid_name {
            return Err(err_at(
                path,
                src,
                &format!("targets[{i}].name"),
                "targets.name",
                format!(
                    "`{}` is not a target name: use `cpu`, `sm_<NN>` (NVIDIA) or `gfx<NNN>` (AMD)",
                    name
                ),
            ));
        }
        let vendor_ok = matches!(
            (t.vendor, t.name.as_str()),
            (Vendor::Cpu, "cpu") | (Vendor::Nvidia, _) | (Vendor::Amd, _)
        ) && (t.vendor != Vendor::Nvidia || t.name.starts_with("sm_"))
            && (t.vendor != Vendor::Amd || t.name.starts_with("gfx"));
        if !vendor_ok {
            return Err(err_at(
                path,
                src,
                &format!("targets[{i}].vendor"),
                "targets.vendor",
                format!("target `{}` cannot have vendor {:?}", name, t.vendor),
            ));
        }
        let want_tc = match t.vendor {
            Vendor::Nvidia => Toolchain::Cuda,
            Vendor::Amd => Toolchain::Hip,
            Vendor::Cpu => Toolchain::None,
        };
        if t.toolchain != want_tc {
            return Err(err_at(
                path,
                src,
                &format!("targets[{i}].toolchain"),
                "targets.toolchain",
                format!(
                    "target `{}` ({:?}) needs toolchain {:?}",
                    name, t.vendor, want_tc
                ),
            ));
        }
        if t.is_gpu() {
            match t.wave {
                Some(32) | Some(64) => {}
                other => {
                    return Err(err_at(
                        path,
                        src,
                        &format!("targets[{i}].wave"),
                        "targets.wave",
                        format!("target `{}`: wave must be 32 or 64, got {other:?}", name),
                    ))
                }
            }
            if t.shared_per_block.unwrap_or(0) < 16 * 1024 || t.multiprocessors.unwrap_or(0) == 0 {
                return Err(err_at(path, src, &format!("targets[{i}].shared_per_block"), "targets.shared_per_block", format!(
                    "GPU target `{}` needs shared_per_block (bytes, >= 16384) and multiprocessors (> 0)",
                    name
                )));
            }
        }
        if t.runs_on.is_empty() {
            return Err(err_at(
                path,
                src,
                &format!("targets[{i}].runs_on"),
                "targets.runs_on",
                format!("target `{}` needs at least one runner label", name),
            ));
        }
        if !(t.bench_tolerance > 0.0 && t.bench_tolerance < 1.0) {
            return Err(err_at(
                path,
                src,
                &format!("targets[{i}].bench_tolerance"),
                "targets.bench_tolerance",
                format!("target `{}`: bench_tolerance must be in (0, 1)", name),
            ));
        }
        Ok(())
    }
}

/// The text of a matrix or cases file, or an error naming it.
fn read_source(path: &Path) -> Result<String, MatrixError> {
    std::fs::read_to_string(path).map_err(|e| MatrixError {
        path: path.to_owned(),
        line: None,
        field: "(file)".into(),
        message: format!("cannot read: {e}"),
    })
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

/// Relative `.npy` paths of `cases` are relative to the file that declares them.
fn resolve_inputs(cases: &mut [Case], file: &Path) {
    let base = file.parent().unwrap_or(Path::new("."));
    for case in cases {
        for p in case.inputs.values_mut() {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        }
    }
}

fn yaml_error(path: &Path, e: &serde_yaml::Error) -> MatrixError {
    let line = e.location().map(|l| l.line());
    // serde's message reads "cases[3].topk: unknown field `quries`, expected one of ...":
    // the part before the first ": " is the field path, the rest says what would be valid.
    // It can quote the input (a whole file of random text is one "invalid type: string"),
    // so both parts are clipped.
    let text = e.to_string();
    let (field, message) = match text.split_once(": ") {
        Some((f, m)) if !f.contains(' ') => (echo::clip(f, 100), echo::clip(m, 300)),
        _ => ("(syntax)".to_string(), echo::clip(&text, 300)),
    };
    MatrixError {
        path: path.to_owned(),
        line,
        field,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REAL: &str = include_str!("../matrix.yaml");

    fn parse(text: &str) -> Result<Matrix, MatrixError> {
        Matrix::parse(Path::new("matrix.yaml"), text)
    }

    /// The error for `REAL` with `from` replaced by `to` (which must occur).
    fn error_with(from: &str, to: &str) -> MatrixError {
        assert!(
            REAL.contains(from),
            "test edit `{from}` not found in matrix.yaml"
        );
        parse(&REAL.replacen(from, to, 1)).expect_err("the edit must be rejected")
    }

    #[test]
    fn the_real_matrix_parses() {
        let m = parse(REAL).unwrap();
        assert_eq!(
            m.target_names(),
            ["cpu", "sm_75", "sm_86", "sm_90", "gfx906", "gfx1201", "gfx950"]
        );
        assert!(m.cases.len() > 20);
        assert_eq!(m.target("gfx950").unwrap().shared_per_block, Some(163840));
    }

    #[test]
    fn unknown_keys_name_the_line_and_the_valid_fields() {
        let e = error_with(
            "    topk: {queries: 3, n: 40960,",
            "    topk: {quries: 3, n: 40960,",
        );
        let text = e.to_string();
        assert!(text.starts_with("matrix.yaml:"), "{text}");
        assert!(e.line.is_some(), "{text}");
        assert!(
            text.contains("quries") && text.contains("queries"),
            "{text}"
        );
    }

    #[test]
    fn semantic_errors_name_file_line_field_and_fix() {
        let e = error_with(
            "topk: {queries: 3, n: 40960, capacity: 262144",
            "topk: {queries: 3, n: 40960, capacity: 4096",
        );
        assert_eq!(e.field, "cases.topk.n");
        assert!(e.message.contains("raise capacity"), "{e}");
        // The line of the field itself (the case's `topk:` line), found by structure.
        let line = e.line.unwrap();
        assert!(
            REAL.lines()
                .nth(line - 1)
                .unwrap()
                .contains("topk: {queries: 3, n: 40960, capacity: 262144"),
            "line {line}"
        );
        assert!(REAL
            .lines()
            .nth(line - 2)
            .unwrap()
            .contains("topk_decode_3q_40k"));

        let e = error_with(
            "variants: [auto, wide, split]\n    suites: [parity, bench]",
            "variants: [auto, wider]\n    suites: [parity, bench]",
        );
        assert_eq!(e.field, "cases.variants");
        assert!(
            e.message.contains("`wider`") && e.message.contains("declared: auto"),
            "{e}"
        );

        let e = error_with(
            "STRATA_QSA_WARP: \"1\"}, doc: \"no tensor",
            "STRATA_QSA_WRAP: \"1\"}, doc: \"no tensor",
        );
        assert!(
            e.message.contains("unknown switch `STRATA_QSA_WRAP`"),
            "{e}"
        );

        let e = error_with(
            "STRATA_QSA_WARP: \"1\"}, doc: \"no tensor",
            "QSA_SCORES_KERNEL: fastest}, doc: \"no tensor",
        );
        assert!(
            e.message
                .contains("variant `simt`: QSA_SCORES_KERNEL=fastest: expected warp"),
            "{e}"
        );

        let e = error_with("  - name: sm_75\n", "  - name: sm75\n");
        assert!(e.message.contains("sm_<NN>"), "{e}");

        let e = error_with(
            "dists: [uniform, ties, descending, nan_inf]",
            "dists: [uniform, nans]",
        );
        assert!(
            e.message.contains("unknown topk distribution `nans`"),
            "{e}"
        );

        let e = error_with(
            "    wave: 64\n    shared_per_block: 65536",
            "    wave: 48\n    shared_per_block: 65536",
        );
        assert_eq!(e.field, "targets.wave");

        let e = error_with("    targets: gpu\n", "    targets: [sm_99]\n");
        assert!(e.message.contains("unknown target `sm_99`"), "{e}");

        let e = error_with("scores: warp\n", "scores: nonesuch\n");
        assert_eq!(e.field, "baselines");
    }

    #[test]
    fn syntax_errors_and_missing_files_are_errors_not_panics() {
        let e = parse("version: 1\nseed: [").unwrap_err();
        assert!(e.line.is_some(), "{e}");
        let e = Matrix::load(Path::new("/nonexistent/matrix.yaml")).unwrap_err();
        assert!(e.to_string().contains("cannot read"), "{e}");
        assert!(parse("").is_err());
    }

    #[test]
    fn cases_files_add_cases_and_resolve_npy_paths() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("more.yaml");
        crate::npy::write_le(&dir.path().join("s.npy"), "<f4", &[2, 10], &[0; 80]).unwrap();
        std::fs::write(
            &f,
            "cases:\n  - name: captured\n    topk: {queries: 2, n: 10, capacity: 10, k: 3}\n    inputs: {scores: s.npy}\n    variants: [auto]\n    suites: [parity]\n",
        )
        .unwrap();
        let mut m = parse(REAL).unwrap();
        assert_eq!(m.add_cases_file(&f).unwrap(), 1);
        let c = m.cases.last().unwrap();
        assert_eq!(c.inputs["scores"], dir.path().join("s.npy"));
        // The same name again is an error that names the new file.
        let e = m.add_cases_file(&f).unwrap_err();
        assert!(e.to_string().contains("already exists"), "{e}");
        std::fs::write(&f, "cases:\n  - name: x\n    topk: {queries: 1, n: 1, capacity: 1, k: 1}\n    variants: [auto]\n    suites: [error]\n    dists: [uniform]\n").unwrap();
        let e = m.add_cases_file(&f).unwrap_err();
        assert!(e.message.contains("no error suite"), "{e}");
    }
}

#[cfg(test)]
mod tests_inputs;
