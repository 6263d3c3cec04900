//! Which checks to run (`--case`, `--suite`, `--variant`, `--dist`, `--shard`), checked
//! against the matrix before any work by both `cargo xtask matrix` and `qsa run`: a typo is
//! an error naming the value and the valid ones, never a green run of 0 checks.

use crate::echo;
use crate::matrix::{Case, Matrix, Suite, Target};

/// Which checks to run: every empty list means "all".
#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub cases: Vec<String>,
    pub suites: Vec<Suite>,
    pub variants: Vec<String>,
    pub dists: Vec<String>,
    /// `(i, n)`: run only the cases whose index in the plan is i mod n (1-based i).
    pub shard: Option<(usize, usize)>,
}

/// The selection flags as typed on either command line.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    pub cases: Vec<String>,
    pub suites: Vec<String>,
    pub variants: Vec<String>,
    pub dists: Vec<String>,
    pub shard: Option<String>,
}

/// `i/n` with 1 <= i <= n.
pub fn parse_shard(s: &str) -> Result<(usize, usize), String> {
    let v = echo::value(s);
    let (i, n) = s
        .split_once('/')
        .ok_or_else(|| format!("--shard `{v}`: a shard is i/n, e.g. 1/4"))?;
    let (i, n): (usize, usize) = (
        i.parse()
            .map_err(|_| format!("--shard `{v}`: i is not a number (a shard is i/n, e.g. 1/4)"))?,
        n.parse()
            .map_err(|_| format!("--shard `{v}`: n is not a number (a shard is i/n, e.g. 1/4)"))?,
    );
    if n == 0 || i == 0 || i > n {
        return Err(format!("--shard `{v}`: need 1 <= i <= n, e.g. 1/4"));
    }
    Ok((i, n))
}

pub fn parse_suite(s: &str) -> Result<Suite, String> {
    Suite::ALL
        .into_iter()
        .find(|x| x.name() == s)
        .ok_or_else(|| {
            format!(
                "--suite `{}` is not a suite: use parity, error or bench",
                echo::value(s)
            )
        })
}

/// Names for a message: all of them, up to a few hundred bytes.
fn list(names: &[&str]) -> String {
    echo::clip(&names.join(", "), 600)
}

/// Sorted, without repeats.
fn unique<'a>(it: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut v: Vec<&str> = it.collect();
    v.sort_unstable();
    v.dedup();
    v
}

impl Filter {
    /// The filter of `sel`, every name checked against `matrix`: cases it declares,
    /// variants and distributions of the selected cases, suites, the shard's form.
    pub fn new(matrix: &Matrix, sel: &Selection) -> Result<Filter, String> {
        let suites = sel
            .suites
            .iter()
            .map(|s| parse_suite(s))
            .collect::<Result<Vec<_>, _>>()?;
        let shard = sel.shard.as_deref().map(parse_shard).transpose()?;
        for c in &sel.cases {
            if matrix.cases.iter().all(|x| &x.name != c) {
                let names: Vec<&str> = matrix.cases.iter().map(|x| x.name.as_str()).collect();
                return Err(format!(
                    "--case `{}`: no such case in {} (or a --cases file); declared: {}",
                    echo::value(c),
                    matrix.path.display(),
                    list(&names)
                ));
            }
        }
        let f = Filter {
            cases: sel.cases.clone(),
            suites,
            variants: sel.variants.clone(),
            dists: sel.dists.clone(),
            shard,
        };
        let selected: Vec<&Case> = matrix.cases.iter().filter(|c| f.case(&c.name)).collect();
        let scope = if f.cases.is_empty() {
            "the matrix's cases"
        } else {
            "the selected cases"
        };
        let variants = unique(
            selected
                .iter()
                .flat_map(|c| c.variants.iter().map(|v| v.as_str())),
        );
        for v in &f.variants {
            if !variants.contains(&v.as_str()) {
                return Err(format!(
                    "--variant `{}`: {scope} have no such variant; they run: {}",
                    echo::value(v),
                    list(&variants)
                ));
            }
        }
        let dist_names: Vec<Vec<String>> =
            selected.iter().map(|c| crate::cases::dists(c)).collect();
        let dists = unique(dist_names.iter().flatten().map(|d| d.as_str()));
        for d in &f.dists {
            if !dists.contains(&d.as_str()) {
                return Err(format!(
                    "--dist `{}`: {scope} have no such distribution; they use: {} (`npy`: inputs from files)",
                    echo::value(d),
                    list(&dists)
                ));
            }
        }
        Ok(f)
    }

    /// Whether `case` has at least one check under this filter (shard aside).
    pub fn selects(&self, case: &Case) -> bool {
        self.case(&case.name)
            && case.suites.iter().any(|s| self.suite(*s))
            && case.variants.iter().any(|v| self.variant(v))
            && crate::cases::dists(case).iter().any(|d| self.dist(d))
    }

    /// An error unless the filter selects a check on one of `targets` (before sharding: a
    /// shard may be empty). Says what each selected case offers, so the fix is plain.
    pub fn check_selects(&self, matrix: &Matrix, targets: &[&Target]) -> Result<(), String> {
        let runs = |c: &Case| targets.iter().any(|t| c.runs_on(t));
        if matrix.cases.iter().any(|c| runs(c) && self.selects(c)) {
            return Ok(());
        }
        let names: Vec<&str> = targets.iter().map(|t| t.name.as_str()).collect();
        let why: Vec<String> = matrix
            .cases
            .iter()
            .filter(|c| self.case(&c.name))
            .take(5)
            .map(|c| {
                let suites: Vec<&str> = c.suites.iter().map(|s| s.name()).collect();
                format!(
                    "{} runs on {}, suites [{}], variants [{}], dists [{}]",
                    c.name,
                    match &c.targets {
                        crate::matrix::TargetSel::Keyword(k) => k.clone(),
                        crate::matrix::TargetSel::List(l) => l.join(", "),
                    },
                    suites.join(", "),
                    c.variants.join(", "),
                    crate::cases::dists(c).join(", ")
                )
            })
            .collect();
        Err(echo::clip(
            &format!(
                "the selection runs no check on {}: {}",
                names.join(", "),
                why.join("; ")
            ),
            1200,
        ))
    }

    pub fn case(&self, name: &str) -> bool {
        self.cases.is_empty() || self.cases.iter().any(|c| c == name)
    }
    pub fn suite(&self, s: Suite) -> bool {
        self.suites.is_empty() || self.suites.contains(&s)
    }
    pub fn variant(&self, v: &str) -> bool {
        self.variants.is_empty() || self.variants.iter().any(|x| x == v)
    }
    pub fn dist(&self, d: &str) -> bool {
        self.dists.is_empty() || self.dists.iter().any(|x| x == d)
    }
    pub fn is_full(&self) -> bool {
        self.cases.is_empty()
            && self.suites.is_empty()
            && self.variants.is_empty()
            && self.dists.is_empty()
            && self.shard.is_none()
    }
}
