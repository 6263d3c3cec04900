//! The suites: parity (exact ids), error (FP64 error against the baseline variant's) and
//! bench (median over repetitions). Each turns one case into `Record`s; none of them knows
//! which backend it drives.

pub mod bench;
pub mod error;
pub mod filter;
pub mod parity;
pub mod stats;

pub use filter::{Filter, Selection};

use crate::backend::{Backend, BackendError, Prepared};
use crate::matrix::{Case, FamilyName, Matrix, Suite, Target};
use crate::problem::{Output, Problem};
use crate::results::{Record, Status};
use std::collections::BTreeMap;

/// Everything a suite needs to run one case on one target.
pub struct Ctx<'a> {
    pub matrix: &'a Matrix,
    pub target: &'a Target,
    pub backend: &'a dyn Backend,
    pub filter: &'a Filter,
    /// Golden benchmark medians of this target (bench.yaml), if any.
    pub bench_golden: &'a bench::BenchGolden,
    /// Extra arguments that `repro` must repeat (e.g. `--cases FILE`).
    pub repro_extra: String,
    /// `qsa run --dump DIR`: where the arrays of (failing) checks go.
    pub dump: Option<&'a crate::dump::Dumper>,
}

impl Ctx<'_> {
    /// Dump the arrays of `rec`'s check if `--dump` wants it (its status is final by now);
    /// `arrays` is called only then, so a run without `--dump` copies nothing.
    pub fn dump(&self, rec: &Record, arrays: impl FnOnce() -> Vec<crate::dump::Array>) {
        if let Some(d) = self.dump.filter(|d| d.wants(rec)) {
            // An I/O error is printed by the dumper; the check's result stands.
            let _ = d.write(rec, arrays());
        }
    }

    /// The command that reruns exactly one check.
    pub fn repro(&self, suite: Suite, case: &str, dist: &str, variant: &str) -> String {
        let mut cmd = format!(
            "cargo xtask matrix --target {} --case {case} --suite {}",
            self.target.name,
            suite.name()
        );
        if dist != "-" {
            cmd.push_str(&format!(" --dist {dist}"));
        }
        if variant != "-" {
            cmd.push_str(&format!(" --variant {variant}"));
        }
        cmd.push_str(&self.repro_extra);
        cmd
    }

    /// A case whose inputs could not be made (a bad .npy, an unknown distribution): one
    /// error record naming the problem, instead of checks that never ran.
    pub fn input_error(&self, suite: Suite, case: &Case, dist: &str, msg: String) -> Record {
        let mut r = self.record(suite, case, dist, "-", "inputs");
        r.status = Status::Error;
        r.message = msg;
        r
    }

    pub fn record(
        &self,
        suite: Suite,
        case: &Case,
        dist: &str,
        variant: &str,
        check: &str,
    ) -> Record {
        Record {
            suite,
            case: case.name.clone(),
            dist: dist.to_string(),
            variant: variant.to_string(),
            check: check.to_string(),
            dispatched: None,
            status: Status::Pass,
            message: String::new(),
            metrics: BTreeMap::new(),
            snapshot: None,
            repro: self.repro(suite, &case.name, dist, variant),
        }
    }
}

/// The problem of each selected distribution of `case`, made lazily (one large problem in
/// memory at a time); a distribution whose inputs cannot be made yields its error record.
pub fn problems<'c, T: 'c>(
    ctx: &'c Ctx,
    suite: Suite,
    case: &'c Case,
    make: fn(u64, &Case, &str) -> Result<T, String>,
) -> impl Iterator<Item = Result<(String, T), Box<Record>>> + 'c {
    crate::cases::dists(case)
        .into_iter()
        .filter(|d| ctx.filter.dist(d))
        .map(move |dist| match make(ctx.matrix.seed, case, &dist) {
            Ok(p) => Ok((dist, p)),
            Err(e) => Err(Box::new(ctx.input_error(suite, case, &dist, e))),
        })
}

/// Run one variant of a problem once: (dispatched kernel, output), or the backend's reason.
pub fn run_once(
    ctx: &Ctx,
    family: FamilyName,
    variant: &str,
    problem: &Problem,
) -> Result<(String, Output), BackendError> {
    let v = ctx.matrix.variant(family, variant).ok_or_else(|| {
        BackendError::Input(format!("unknown {} variant `{variant}`", family.name()))
    })?;
    let mut prepared: Box<dyn Prepared + '_> = ctx.backend.prepare(&v.switches(), problem)?;
    prepared.run()?;
    let out = prepared.output()?;
    Ok((prepared.dispatched(), out))
}

/// Turn a backend error into the record's status and message.
pub fn mark_error(rec: &mut Record, e: &BackendError) {
    rec.status = match e {
        BackendError::Unsupported(_) => Status::Unsupported,
        _ => Status::Error,
    };
    rec.message = e.to_string();
}

/// Run one suite of `case` (every selected distribution and variant): the records, in a
/// stable order. The runner calls it once per unit (`crate::journal::Unit`).
pub fn run_suite(ctx: &Ctx, case: &Case, suite: Suite) -> Vec<Record> {
    match suite {
        Suite::Parity => parity::run(ctx, case),
        Suite::Error => error::run(ctx, case),
        Suite::Bench => bench::run(ctx, case),
    }
}

/// Short stable digest of bytes (first 16 hex digits of SHA-256).
pub fn digest(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let h = Sha256::digest(bytes);
    h.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// The decade of an error, for snapshots: `[1e-7,1e-6)`. A kernel that accumulates with
/// atomics (dK/dV) changes its error from run to run in the second digit (5e-7 one run,
/// 6e-7 the next, seen on the H200), so a snapshot keeps only the decade, which moves when the
/// arithmetic really changes; the gate itself compares the exact values.
pub fn decade(x: f64) -> String {
    if x == 0.0 {
        "0".into()
    } else if !x.is_finite() {
        format!("{x}")
    } else {
        let e = x.abs().log10().floor() as i32;
        format!("[1e{e},1e{})", e + 1)
    }
}

#[cfg(test)]
#[test]
fn decades() {
    assert_eq!(decade(5.1e-7), "[1e-7,1e-6)");
    assert_eq!(decade(6.0e-7), "[1e-7,1e-6)");
    assert_eq!(decade(1.0e-6), "[1e-6,1e-5)");
    assert_eq!(decade(0.0), "0");
    assert_eq!(decade(f64::INFINITY), "inf");
}

#[cfg(test)]
mod tests;

/// Helpers for the suites' tests of one function at a time.
#[cfg(test)]
mod test_util {
    use crate::dump::{Array, Dumper, Index};
    use crate::matrix::Suite;
    use crate::results::{Record, Status};
    use std::collections::BTreeMap;

    /// A record with nothing in it.
    pub fn blank_record() -> Record {
        Record {
            suite: Suite::Parity,
            case: "hand".into(),
            dist: "-".into(),
            variant: "-".into(),
            check: "-".into(),
            dispatched: None,
            status: Status::Pass,
            message: String::new(),
            metrics: BTreeMap::new(),
            snapshot: None,
            repro: String::new(),
        }
    }

    /// What `--dump` writes for `arrays`: (file, shape) of each, from the dump's index.
    pub fn dumped(arrays: Vec<Array>) -> Vec<(String, Vec<usize>)> {
        let dir = tempfile::tempdir().unwrap();
        let dumper = Dumper::new(dir.path(), true).unwrap();
        dumper.write(&blank_record(), arrays).unwrap();
        let text = std::fs::read_to_string(dir.path().join("index.yaml")).unwrap();
        let index: Index = serde_yaml::from_str(&text).unwrap();
        index.checks[0]
            .files
            .iter()
            .map(|f| (f.file.clone(), f.shape.clone()))
            .collect()
    }

    /// A kernel the backend does not have is UNSUPPORTED (a skip that says why), any other
    /// backend error an ERROR; the message is the backend's.
    #[test]
    fn backend_errors_mark_the_record_by_kind() {
        use crate::backend::BackendError;
        let mut rec = blank_record();
        super::mark_error(
            &mut rec,
            &BackendError::Unsupported("no tf32 on cpu".into()),
        );
        assert_eq!(
            (rec.status, rec.message.as_str()),
            (Status::Unsupported, "not supported: no tf32 on cpu")
        );
        super::mark_error(&mut rec, &BackendError::Input("NaN in q".into()));
        assert_eq!(
            (rec.status, rec.message.as_str()),
            (Status::Error, "bad input: NaN in q")
        );
    }
}
