//! Mutational fuzzing of qsa's input readers on stable Rust (cargo-fuzz needs nightly).
//!
//! Each target turns bytes into a call of one reader: `npy` (the .npy decoder and header
//! check), `matrix` (matrix.yaml: parse and validate), `cases` (a `--cases` file against the
//! real matrix.yaml). A run must return `Ok` or `Err`: a panic is a finding, and so is an
//! error message that echoes more than `MAX_MESSAGE` bytes (the reviewers' 50 MB echo).
//! Without coverage instrumentation, novelty is judged by the error message's shape (digits
//! and quoted values blanked): an input that makes a message not seen before joins the corpus.

pub mod engine;
pub mod mutate;

use std::path::Path;

/// The real matrix, embedded: the `cases` target adds its input to it, and the binary needs
/// no checkout to run.
pub const REAL_MATRIX: &str = include_str!("../../matrix.yaml");

/// The longest error message any reader may print (the input can be 50 MB).
pub const MAX_MESSAGE: usize = 2048;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Npy,
    Matrix,
    Cases,
}

impl Target {
    pub const ALL: [Target; 3] = [Target::Npy, Target::Matrix, Target::Cases];
    pub fn name(self) -> &'static str {
        match self {
            Target::Npy => "npy",
            Target::Matrix => "matrix",
            Target::Cases => "cases",
        }
    }
    pub fn parse(s: &str) -> Result<Target, String> {
        Target::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| format!("unknown target `{s}`: use npy, matrix or cases"))
    }
    /// Words the mutator substitutes into this target's inputs: the cases' attention
    /// fields come from the library's own list (`qsa::plan::request::ATTENTION_KEYS`).
    pub fn dictionary(self) -> Vec<&'static str> {
        let mut words = self.words().to_vec();
        if self != Target::Npy {
            words.extend(qsa::plan::request::ATTENTION_KEYS);
        }
        words
    }
    fn words(self) -> &'static [&'static str] {
        match self {
            Target::Npy => &[
                "'<f4'",
                "'<f8'",
                "'<i4'",
                "'<i8'",
                "'>f4'",
                "'|u1'",
                "True",
                "False",
                "'shape'",
                "'descr'",
                "'fortran_order'",
                "()",
                "(,)",
                "(0,)",
                "-1",
                "L",
            ],
            Target::Matrix | Target::Cases => &[
                "cases",
                "name",
                "topk",
                "scores",
                "attention",
                "inputs",
                "active",
                "causal",
                "edge",
                "none",
                "check_rows",
                "dists",
                "variants",
                "suites",
                "targets",
                "gpu",
                "all",
                "parity",
                "error",
                "bench",
                "queries",
                "n",
                "capacity",
                "k",
                "heads",
                "blocks",
                "bf16",
                "f16",
                "nhd",
                "hnd",
                "~",
                "null",
                "true",
                "[]",
                "{}",
                "''",
                "-",
                ": ",
                "\n- ",
                "&a ",
                "*a",
                "<<: *a",
                "!!str ",
                "!!binary ",
                ".nan",
                ".inf",
                "-.inf",
                "1e400",
                "0x10",
                "0o7",
                "scores.npy",
                "/dev/zero",
                "captured_scores.npy",
                "wide",
                "split",
                "register",
                "auto",
                "uniform",
                "nan_inf",
                "random_ids",
                "cpu",
                "sm_90",
                "gfx906",
                "version",
                "seed",
                "gates",
                "baselines",
                "error_ratio",
                "bench_tolerance",
                "wave",
                "shared_per_block",
                "env",
                "STRATA_QSA_WARP",
                "QSA_TOPK_KERNEL",
            ],
        }
    }
}

/// What one input did.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// The error as printed (checked for length by `check`), and the part of it that says
    /// which check failed (for novelty: no location, no echoed input).
    Err {
        text: String,
        what: String,
    },
}

/// Run `target` on `data` once. Panics propagate (the engine catches them). The `cases`
/// target reads its input as if it were `examples/cases/fuzz.yaml`, so that, run from the
/// repository root, `.npy` paths reach the example files.
pub fn run_one(target: Target, data: &[u8]) -> Outcome {
    let matrix_err = |e: qsa::matrix::MatrixError| {
        // The field path without indices or map keys: `cases.inputs`, `targets.wave`.
        let field: String = e.field.split('.').take(2).collect::<Vec<_>>().join(".");
        let field: String = field
            .chars()
            .filter(|c| c.is_ascii_lowercase() || *c == '.')
            .collect();
        Outcome::Err {
            what: format!("{field}: {}", e.message),
            text: e.to_string(),
        }
    };
    match target {
        Target::Npy => {
            let a = qsa::npy::decode::<f32>(data).map(|_| ());
            let b = qsa::npy::decode::<i32>(data).map(|_| ());
            let _ = qsa::npy::parse_header(data, u64::MAX);
            match a.and(b) {
                Ok(()) => Outcome::Ok,
                Err(e) => Outcome::Err {
                    what: e.clone(),
                    text: e,
                },
            }
        }
        Target::Matrix => {
            let text = String::from_utf8_lossy(data);
            match qsa::matrix::Matrix::parse(Path::new("fuzz/matrix.yaml"), &text) {
                Ok(_) => Outcome::Ok,
                Err(e) => matrix_err(e),
            }
        }
        Target::Cases => {
            let mut m = real_matrix();
            let text = String::from_utf8_lossy(data);
            match m.add_cases_text(Path::new("examples/cases/fuzz.yaml"), &text) {
                Ok(_) => Outcome::Ok,
                Err(e) => matrix_err(e),
            }
        }
    }
}

fn real_matrix() -> qsa::matrix::Matrix {
    use std::sync::OnceLock;
    static M: OnceLock<qsa::matrix::Matrix> = OnceLock::new();
    M.get_or_init(|| {
        qsa::matrix::Matrix::parse(Path::new("matrix.yaml"), REAL_MATRIX)
            .expect("the embedded matrix.yaml is valid")
    })
    .clone()
}

/// Run `data` and check the invariants other than "no panic": the reason it is a finding.
pub fn check(target: Target, data: &[u8]) -> Result<Outcome, String> {
    let out = run_one(target, data);
    if let Outcome::Err { text, .. } = &out {
        if text.len() > MAX_MESSAGE {
            return Err(format!(
                "error message of {} bytes (limit {MAX_MESSAGE}): {}",
                text.len(),
                qsa::echo::clip(text, 200)
            ));
        }
    }
    Ok(out)
}

/// The shape of an outcome, for novelty: what failed, cut at the first quote (echoed
/// input can hold any quote, so nothing after one is trusted), digits blanked, letters
/// only, cut short. A case's name (checked first, so free of quotes) is skipped: `case
/// `x`: k = 7 exceeds` reads `case _: k = # exceeds`. Coarse on purpose: without coverage
/// feedback, a signature that kept echoed bytes made thousands of "new" inputs a minute.
pub fn signature(out: &Outcome) -> String {
    let Outcome::Err { what, .. } = out else {
        return "ok".into();
    };
    let mut s = what.clone();
    // serde's messages start with a field path that holds map keys from the input
    // (`targets[0].limits.<key>: invalid type: ...`): keep only serde's own words.
    const SERDE: [&str; 9] = [
        "untagged and internally tagged",
        "data did not match any variant",
        "invalid type",
        "invalid value",
        "invalid length",
        "unknown field",
        "unknown variant",
        "missing field",
        "duplicate field",
    ];
    if let Some(at) = SERDE.iter().filter_map(|p| s.find(p)).min() {
        s.replace_range(..at, "serde: ");
    }
    if let Some(at) = s.find(": case `") {
        let name_start = at + ": case `".len();
        if let Some(len) = s[name_start..].find('`') {
            s.replace_range(at..name_start + len + 1, ": case _");
        }
    }
    if let Some(a) = s.find(['`', '"']) {
        s.truncate(a);
    }
    // A file path (from the input) up to the ": " that ends it.
    if let Some(a) = s.find('/') {
        let start = s[..a].rfind(' ').map_or(0, |i| i + 1);
        let end = s[a..].find(": ").map_or(s.len(), |e| a + e);
        s.replace_range(start..end, "PATH");
    }
    let mut sig = String::new();
    for c in s.chars() {
        let c = match c {
            '0'..='9' => '#',
            c if c.is_ascii_alphabetic() || matches!(c, ' ' | ':' | '.' | '_') => c,
            _ => continue,
        };
        if !(c == '#' && sig.ends_with('#')) {
            sig.push(c);
        }
        if sig.len() >= 80 {
            break;
        }
    }
    sig
}
