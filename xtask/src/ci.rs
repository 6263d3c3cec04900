//! `cargo xtask ci-matrix`: the GitHub Actions job matrix of the GPU targets, read from
//! matrix.yaml, so the workflow never hard-codes a target or a runner label.
//!
//! Which GPU targets get a job is the repository's choice (a repository variable, usually
//! `QSA_GPU_TARGETS`, read through `--enabled-from-env`): a fork or a repository without
//! self-hosted runners enables none and gets a green run whose summary lists every GPU target
//! as not run, instead of jobs queued forever for runners that do not exist.
//!
//! The enabled list is words separated by commas or spaces: target names, `all` (every GPU
//! target), `none`; `NAME:N` splits that target's suites into N shards (N jobs, each running
//! `--shard i/N`). `cpu` may be listed: it always runs on the hosted job, so it is accepted
//! and ignored.

use anyhow::{bail, Context, Result};
use qsa::dispatch::Vendor;
use qsa::matrix::{Matrix, Target};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

/// The most shards one target may ask for (each is a job on the same kind of runner).
pub const MAX_SHARDS: usize = 16;

#[derive(clap::Args, Debug, Clone)]
pub struct CiMatrixArgs {
    /// The matrix file (default: matrix.yaml at the workspace root).
    #[arg(long, value_name = "FILE")]
    pub matrix: Option<PathBuf>,
    /// Enabled GPU targets: `all`, `none`, or names (`sm_90,gfx906:2`; `:N` = N shards).
    #[arg(long, value_name = "LIST", conflicts_with = "enabled_from_env")]
    pub enabled: Option<String>,
    /// Read the enabled list from this environment variable (unset or empty: none).
    #[arg(long, value_name = "VAR")]
    pub enabled_from_env: Option<String>,
    /// Also append `matrix=`, `any=` and `not_run=` lines to this file ($GITHUB_OUTPUT).
    #[arg(long, value_name = "FILE")]
    pub github_output: Option<PathBuf>,
}

/// One GPU job of the workflow's matrix.
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    pub target: String,
    pub vendor: &'static str,
    pub runs_on: Vec<String>,
    pub unstable: bool,
    pub unstable_reason: String,
    /// The health check the job runs before anything else.
    pub health: &'static str,
    /// `i/n`; `1/1` when the target is not sharded.
    pub shard: String,
    /// Unique artifact name of this job's results.
    pub artifact: String,
}

/// The enabled set: target name -> shard count.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Enabled {
    pub targets: BTreeMap<String, usize>,
    /// Where the list came from, for the "not run" reason.
    pub source: String,
}

impl Enabled {
    /// Parse an enabled list against the matrix; unknown names are an error that lists the
    /// declared GPU targets.
    pub fn parse(list: &str, matrix: &Matrix, source: &str) -> Result<Enabled> {
        let gpu: Vec<&Target> = matrix.targets.iter().filter(|t| t.is_gpu()).collect();
        let names = || {
            gpu.iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut targets = BTreeMap::new();
        for word in list
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|w| !w.is_empty())
        {
            let (name, shards) = match word.split_once(':') {
                Some((n, s)) => {
                    let k: usize = s
                        .parse()
                        .ok()
                        .filter(|k| (1..=MAX_SHARDS).contains(k))
                        .with_context(|| format!("{source}: `{word}`: shards must be a number from 1 to {MAX_SHARDS}"))?;
                    (n, k)
                }
                None => (word, 1),
            };
            match name {
                "none" => {}
                "all" => {
                    for t in &gpu {
                        targets.entry(t.name.clone()).or_insert(shards);
                    }
                }
                _ => match matrix.target(name) {
                    Some(t) if t.is_gpu() => {
                        targets.insert(t.name.clone(), shards);
                    }
                    Some(_) => {} // cpu: always runs on the hosted job
                    None => bail!(
                        "{source}: unknown target `{name}`; {} declares the GPU targets: {}",
                        matrix.path.display(),
                        names()
                    ),
                },
            }
        }
        Ok(Enabled {
            targets,
            source: source.to_string(),
        })
    }

    /// From `--enabled` or `--enabled-from-env` (neither: none enabled).
    pub fn from_args(
        enabled: Option<&str>,
        from_env: Option<&str>,
        matrix: &Matrix,
    ) -> Result<Enabled> {
        match (enabled, from_env) {
            (Some(list), _) => Enabled::parse(list, matrix, "--enabled"),
            (None, Some(var)) => {
                let list = std::env::var(var).unwrap_or_default();
                Enabled::parse(&list, matrix, &format!("environment variable {var}"))
            }
            (None, None) => Ok(Enabled {
                targets: BTreeMap::new(),
                source: "--enabled".into(),
            }),
        }
    }

    /// Why a GPU target that is not in the list does not run.
    pub fn not_enabled_reason(&self, target: &str) -> String {
        format!(
            "not run: `{target}` is not enabled for this repository ({}; docs/ci.md says how to enable a target with a registered runner)",
            self.source
        )
    }
}

/// The jobs of the enabled GPU targets, in matrix.yaml's order, and a "not run" line for
/// every other GPU target.
pub fn jobs(matrix: &Matrix, enabled: &Enabled) -> (Vec<Job>, Vec<(String, String)>) {
    let mut jobs = Vec::new();
    let mut not_run = Vec::new();
    for t in matrix.targets.iter().filter(|t| t.is_gpu()) {
        let Some(&n) = enabled.targets.get(&t.name) else {
            not_run.push((t.name.clone(), enabled.not_enabled_reason(&t.name)));
            continue;
        };
        for i in 1..=n {
            let artifact = if n == 1 {
                format!("qsa-{}", t.name)
            } else {
                format!("qsa-{}-shard-{i}-of-{n}", t.name)
            };
            jobs.push(Job {
                target: t.name.clone(),
                vendor: match t.vendor {
                    Vendor::Nvidia => "nvidia",
                    Vendor::Amd => "amd",
                    Vendor::Cpu => "cpu",
                },
                runs_on: t.runs_on.clone(),
                unstable: t.unstable.is_some(),
                unstable_reason: t.unstable.clone().unwrap_or_default(),
                health: if t.vendor == Vendor::Amd {
                    "rocminfo"
                } else {
                    "nvidia-smi"
                },
                shard: format!("{i}/{n}"),
                artifact,
            });
        }
    }
    (jobs, not_run)
}

/// `{"include":[...]}`: what `strategy.matrix` takes through `fromJSON`.
pub fn matrix_json(jobs: &[Job]) -> String {
    let mut out = String::from("{\"include\":[");
    for (i, j) in jobs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let labels: Vec<String> = j.runs_on.iter().map(|l| json_str(l)).collect();
        let _ = write!(
            out,
            "{{\"target\":{},\"vendor\":{},\"runs_on\":[{}],\"unstable\":{},\"unstable_reason\":{},\"health\":{},\"shard\":{},\"artifact\":{}}}",
            json_str(&j.target),
            json_str(j.vendor),
            labels.join(","),
            j.unstable,
            json_str(&j.unstable_reason),
            json_str(j.health),
            json_str(&j.shard),
            json_str(&j.artifact)
        );
    }
    out.push_str("]}");
    out
}

/// A JSON string literal (RFC 8259 escaping).
pub fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

pub fn default_matrix_path() -> PathBuf {
    let here = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent().unwrap_or(here).join("matrix.yaml")
}

pub fn run(args: CiMatrixArgs) -> Result<()> {
    let path = args.matrix.clone().unwrap_or_else(default_matrix_path);
    let matrix = Matrix::load(&path)?;
    let enabled = Enabled::from_args(
        args.enabled.as_deref(),
        args.enabled_from_env.as_deref(),
        &matrix,
    )?;
    let (jobs, not_run) = jobs(&matrix, &enabled);
    let json = matrix_json(&jobs);
    let not_run_json: Vec<String> = not_run
        .iter()
        .map(|(t, why)| {
            format!(
                "{{\"target\":{},\"reason\":{}}}",
                json_str(t),
                json_str(why)
            )
        })
        .collect();
    println!(
        "{{\"matrix\":{json},\"any\":{},\"not_run\":[{}]}}",
        !jobs.is_empty(),
        not_run_json.join(",")
    );
    for (t, why) in &not_run {
        eprintln!("{t}: {why}");
    }
    if let Some(file) = &args.github_output {
        // One line per output: the JSON above has no newlines (json_str escapes them).
        let lines = format!(
            "matrix={json}\nany={}\nnot_run={}\n",
            !jobs.is_empty(),
            not_run
                .iter()
                .map(|(t, _)| t.as_str())
                .collect::<Vec<_>>()
                .join(",")
        );
        use std::io::Write as _;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(file)
            .and_then(|mut f| f.write_all(lines.as_bytes()))
            .with_context(|| format!("cannot append to {}", file.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matrix() -> Matrix {
        Matrix::load(&default_matrix_path()).expect("the repository's matrix.yaml loads")
    }

    #[test]
    fn none_enabled_lists_every_gpu_target_as_not_run() {
        let m = matrix();
        let (jobs, not_run) = jobs(&m, &Enabled::parse("", &m, "test").unwrap());
        assert!(jobs.is_empty());
        let gpu: Vec<&str> = m
            .targets
            .iter()
            .filter(|t| t.is_gpu())
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(
            not_run.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>(),
            gpu
        );
        assert!(not_run[0].1.contains("not enabled"));
        assert_eq!(matrix_json(&jobs), "{\"include\":[]}");
    }

    #[test]
    fn all_shards_and_labels_come_from_the_matrix() {
        let m = matrix();
        let e = Enabled::parse("all, sm_90:2 cpu", &m, "test").unwrap();
        let (jobs, not_run) = jobs(&m, &e);
        assert!(not_run.is_empty());
        let sm90: Vec<&Job> = jobs.iter().filter(|j| j.target == "sm_90").collect();
        assert_eq!(sm90.len(), 2);
        assert_eq!(sm90[1].shard, "2/2");
        assert_eq!(sm90[1].artifact, "qsa-sm_90-shard-2-of-2");
        for j in &jobs {
            assert_eq!(&j.runs_on, &m.target(&j.target).unwrap().runs_on);
        }
        assert!(jobs.iter().all(|j| j.target != "cpu"));
        let gfx = jobs.iter().find(|j| j.target == "gfx906").unwrap();
        assert_eq!(gfx.health, "rocminfo");
    }

    #[test]
    fn bad_lists_are_errors_that_name_the_choices() {
        let m = matrix();
        let e = Enabled::parse("sm_91", &m, "QSA_GPU_TARGETS")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("sm_91") && e.contains("sm_90") && e.contains("QSA_GPU_TARGETS"),
            "{e}"
        );
        assert!(Enabled::parse("sm_90:0", &m, "x").is_err());
        assert!(Enabled::parse("sm_90:x", &m, "x").is_err());
    }

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(json_str("a\"b\\c\nd\u{1}"), "\"a\\\"b\\\\c\\nd\\u0001\"");
    }
}
