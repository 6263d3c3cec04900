//! The command that reruns exactly one check, or one snapshot, of a `cargo xtask matrix`
//! run: its filters plus whatever else chose what ran (`--matrix` when not the default,
//! every `--cases` file). Built here, where the `cargo xtask matrix` command line is
//! defined, from the record's fields: the runner's own line does not know which matrix file
//! xtask gave it. Paths are relative to the project root when they lie under it (the
//! commands in the README run from the root; xtask resolves them against it too).
//! `--shard` is never repeated: a shard of a one-case run could exclude that case.

use qsa::matrix::Suite;
use qsa::results::Record;
use std::path::{Path, PathBuf};

/// What every repro line of one run ends with.
#[derive(Clone, Debug, Default)]
pub struct Repro {
    suffix: String,
}

impl Repro {
    /// `matrix` and `cases` as xtask resolved them (absolute).
    pub fn new(root: &Path, matrix: &Path, cases: &[PathBuf]) -> Repro {
        let mut suffix = String::new();
        if matrix != root.join("matrix.yaml") {
            suffix.push_str(&format!(" --matrix {}", shown(root, matrix)));
        }
        for c in cases {
            suffix.push_str(&format!(" --cases {}", shown(root, c)));
        }
        Repro { suffix }
    }

    /// One check: target, case, suite, and the distribution and variant when it has them.
    pub fn check(&self, target: &str, r: &Record) -> String {
        let mut cmd = filters(target, &r.case, r.suite);
        if r.dist != "-" {
            cmd.push_str(&format!(" --dist {}", r.dist));
        }
        if r.variant != "-" {
            cmd.push_str(&format!(" --variant {}", r.variant));
        }
        cmd + &self.suffix
    }

    /// Every check of one (suite, case) snapshot.
    pub fn snapshot(&self, target: &str, case: &str, suite: Suite) -> String {
        filters(target, case, suite) + &self.suffix
    }

    /// A whole target (its dispatch table).
    pub fn target(&self, target: &str) -> String {
        format!("cargo xtask matrix --target {target}{}", self.suffix)
    }
}

fn filters(target: &str, case: &str, suite: Suite) -> String {
    format!(
        "cargo xtask matrix --target {target} --case {case} --suite {}",
        suite.name()
    )
}

/// `p` relative to `root` when under it, else as given (absolute).
fn shown(root: &Path, p: &Path) -> String {
    p.strip_prefix(root).unwrap_or(p).display().to_string()
}

/// A `--cases` or `--matrix` path as the user meant it: relative to the current directory
/// if it is there, else relative to the project root (so a repro line works from both).
pub fn resolve(root: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        return p.to_path_buf();
    }
    let here = std::env::current_dir().unwrap_or_default().join(p);
    if here.exists() {
        here
    } else {
        root.join(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qsa::results::Status;

    fn record(dist: &str, variant: &str) -> Record {
        Record {
            suite: Suite::Parity,
            case: "topk_edges_small".into(),
            dist: dist.into(),
            variant: variant.into(),
            check: "ids".into(),
            dispatched: None,
            status: Status::Fail,
            message: String::new(),
            metrics: Default::default(),
            snapshot: None,
            repro: "from the runner".into(),
        }
    }

    #[test]
    fn repro_lines_carry_matrix_and_cases() {
        let root = Path::new("/src/qsa");
        let plain = Repro::new(root, &root.join("matrix.yaml"), &[]);
        assert_eq!(
            plain.check("cpu", &record("ties", "wide")),
            "cargo xtask matrix --target cpu --case topk_edges_small --suite parity --dist ties --variant wide"
        );
        let other = Repro::new(
            root,
            &root.join("ci/small.yaml"),
            &[
                root.join("examples/cases/nasty.yaml"),
                "/tmp/mine.yaml".into(),
            ],
        );
        assert_eq!(
            other.check("cpu", &record("-", "-")),
            "cargo xtask matrix --target cpu --case topk_edges_small --suite parity \
             --matrix ci/small.yaml --cases examples/cases/nasty.yaml --cases /tmp/mine.yaml"
        );
        assert_eq!(
            other.target("sm_90"),
            "cargo xtask matrix --target sm_90 --matrix ci/small.yaml \
             --cases examples/cases/nasty.yaml --cases /tmp/mine.yaml"
        );
    }
}
