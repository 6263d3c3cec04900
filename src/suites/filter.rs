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

/// The filter's parsing, messages and selection with hand cases (cargo mutants 2026-12-01:
/// only the runner's integration tests exercised it; the library's own tests, none).
#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn matrix() -> Matrix {
        Matrix::parse(Path::new("matrix.yaml"), include_str!("../../matrix.yaml")).unwrap()
    }

    #[test]
    fn shards_by_hand() {
        assert_eq!(parse_shard("2/4"), Ok((2, 4)));
        assert_eq!(parse_shard("4/4"), Ok((4, 4)), "i = n: the last shard");
        assert_eq!(parse_shard("1/1"), Ok((1, 1)));
        for bad in ["0/4", "5/4", "1/0", "0/0"] {
            assert_eq!(
                parse_shard(bad),
                Err(format!("--shard `{bad}`: need 1 <= i <= n, e.g. 1/4"))
            );
        }
        assert!(parse_shard("x/4")
            .unwrap_err()
            .contains("i is not a number"));
        assert!(parse_shard("1/y")
            .unwrap_err()
            .contains("n is not a number"));
        assert!(parse_shard("14").unwrap_err().contains("a shard is i/n"));
    }

    #[test]
    fn suites_by_name() {
        assert_eq!(parse_suite("parity"), Ok(Suite::Parity));
        assert_eq!(parse_suite("error"), Ok(Suite::Error));
        assert_eq!(parse_suite("bench"), Ok(Suite::Bench));
        assert!(parse_suite("speed")
            .unwrap_err()
            .contains("use parity, error or bench"));
    }

    fn sel(cases: &[&str], variants: &[&str]) -> Selection {
        Selection {
            cases: cases.iter().map(|s| s.to_string()).collect(),
            variants: variants.iter().map(|s| s.to_string()).collect(),
            ..Selection::default()
        }
    }

    /// A variant the selected cases do not run is refused, naming the ones they do run
    /// (sorted, once each).
    #[test]
    fn an_unknown_variant_names_the_selected_cases_variants() {
        let m = matrix();
        let f = Filter::new(&m, &sel(&["topk_edges_small"], &["wide"])).unwrap();
        assert_eq!(f.variants, ["wide"]);
        assert_eq!(
            Filter::new(&m, &sel(&["topk_edges_small"], &["gather"])).unwrap_err(),
            "--variant `gather`: the selected cases have no such variant; they run: auto, register, wide"
        );
    }

    /// `selects`: a case has a check under the filter only if its name, one of its suites,
    /// one of its variants and one of its distributions all pass (topk_edges_small: suite
    /// parity, variants auto / register / wide, eight distributions, normal not among them).
    #[test]
    fn a_case_is_selected_only_when_every_part_matches() {
        let m = matrix();
        let case = m
            .cases
            .iter()
            .find(|c| c.name == "topk_edges_small")
            .unwrap();
        let strs = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let yes = [
            Filter::default(),
            Filter {
                cases: strs(&["topk_edges_small"]),
                ..Filter::default()
            },
            Filter {
                suites: vec![Suite::Parity],
                ..Filter::default()
            },
            Filter {
                variants: strs(&["wide"]),
                ..Filter::default()
            },
            Filter {
                dists: strs(&["nan_inf"]),
                ..Filter::default()
            },
        ];
        for f in &yes {
            assert!(f.selects(case), "{f:?} must select topk_edges_small");
        }
        let no = [
            Filter {
                cases: strs(&["scores_ragged"]),
                ..Filter::default()
            },
            Filter {
                suites: vec![Suite::Bench],
                ..Filter::default()
            },
            Filter {
                variants: strs(&["split"]),
                ..Filter::default()
            },
            Filter {
                dists: strs(&["normal"]),
                ..Filter::default()
            },
        ];
        for f in &no {
            assert!(!f.selects(case), "{f:?} must not select topk_edges_small");
        }
        assert!(Filter::default().is_full());
        assert!(!Filter {
            shard: Some((1, 2)),
            ..Filter::default()
        }
        .is_full());
        assert!(!yes[3].is_full());
        // A selection with no check: an error saying what the case offers.
        let cpu = m.target("cpu").unwrap();
        let bench_only = Filter {
            cases: strs(&["topk_edges_small"]),
            suites: vec![Suite::Bench],
            ..Filter::default()
        };
        let e = bench_only.check_selects(&m, &[cpu]).unwrap_err();
        assert!(
            e.starts_with("the selection runs no check on cpu: topk_edges_small runs on")
                && e.contains("suites [parity], variants [auto, register, wide]"),
            "{e}"
        );
        assert_eq!(yes[1].check_selects(&m, &[cpu]), Ok(()));
    }
}
