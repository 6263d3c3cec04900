//! Validation of one case (of matrix.yaml or a `--cases` file): everything serde cannot
//! check, each error at the line of the field it is about (`cases[i].topk.k`), before any
//! work: family and sizes, names, variants, suites, targets, distributions, the kernels'
//! limits (limits.rs), `check_rows`, and `.npy` inputs (inputs.rs).

use super::{err_at, inputs, known_dists, limits, Case, FamilyName, Matrix, MatrixError};
use super::{Suite, TargetSel};
use crate::echo;
use std::path::Path;

/// Case names become snapshot file names (golden/<target>/<suite>__<case>.snap) and
/// command-line arguments of repro commands.
fn valid_case_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 100
        && !name.starts_with(['-', '.'])
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

impl Matrix {
    /// Check case `i` of the file at `path` (text `src`).
    pub(super) fn check_case(
        &self,
        c: &Case,
        i: usize,
        path: &Path,
        src: &str,
    ) -> Result<(), MatrixError> {
        // `sub` is the YAML path below the case (".topk.k", ".variants[2]").
        let e_at = |sub: &str, field: &str, msg: String| {
            err_at(path, src, &format!("cases[{i}]{sub}"), field, msg)
        };
        let e =
            |field: &str, msg: String| e_at(field.strip_prefix("cases").unwrap_or(""), field, msg);
        let name = echo::value(&c.name);
        if !valid_case_name(&c.name) {
            return Err(e("cases.name", format!(
                "case name `{name}`: use letters, digits, `_`, `-` and `.` (not first), at most 100: \
                 it names snapshot files and command-line arguments"
            )));
        }
        let families = [c.topk.is_some(), c.scores.is_some(), c.attention.is_some()];
        if families.iter().filter(|x| **x).count() != 1 {
            return Err(e(
                "cases",
                format!("case `{name}` must have exactly one of `topk`, `scores`, `attention`"),
            ));
        }
        let family = c.family();
        if c.variants.is_empty() {
            return Err(e(
                "cases.variants",
                format!("case `{name}` lists no variants"),
            ));
        }
        for (j, v) in c.variants.iter().enumerate() {
            if self.variant(family, v).is_none() {
                let names: Vec<&str> = self
                    .variants
                    .iter()
                    .filter(|x| x.family == family)
                    .map(|x| x.name.as_str())
                    .collect();
                return Err(e_at(
                    &format!(".variants[{j}]"),
                    "cases.variants",
                    format!(
                        "case `{name}`: `{}` is not a {} variant; declared: {}",
                        echo::value(v),
                        family.name(),
                        echo::clip(&names.join(", "), 400)
                    ),
                ));
            }
        }
        if c.suites.is_empty() {
            return Err(e("cases.suites", format!("case `{name}` lists no suites")));
        }
        match &c.targets {
            TargetSel::Keyword(k) if k != "all" && k != "gpu" => {
                return Err(e("cases.targets", format!(
                    "case `{name}`: targets must be `all`, `gpu` or a list of target names, got `{}`",
                    echo::value(k)
                )));
            }
            TargetSel::List(list) => {
                for (j, t) in list.iter().enumerate() {
                    if self.target(t).is_none() {
                        return Err(e_at(
                            &format!(".targets[{j}]"),
                            "cases.targets",
                            format!(
                                "case `{name}`: unknown target `{}`; declared: {}",
                                echo::value(t),
                                echo::clip(&self.target_names().join(", "), 400)
                            ),
                        ));
                    }
                }
            }
            TargetSel::Keyword(_) => {}
        }
        if c.inputs.is_empty() && c.dists.is_empty() {
            return Err(e(
                "cases.dists",
                format!("case `{name}` needs at least one distribution (or `inputs`)"),
            ));
        }
        if !c.inputs.is_empty() && !c.dists.is_empty() {
            return Err(e("cases.dists", format!(
                "case `{name}` reads its inputs from files, so its `dists` would be ignored: remove them"
            )));
        }
        for (j, d) in c.dists.iter().enumerate() {
            if !known_dists(family).contains(&d.as_str()) {
                return Err(e_at(
                    &format!(".dists[{j}]"),
                    "cases.dists",
                    format!(
                        "case `{name}`: unknown {} distribution `{}`; known: {}",
                        family.name(),
                        echo::value(d),
                        known_dists(family).join(", ")
                    ),
                ));
            }
        }
        self.check_family(c, &name, &e)?;
        if let Err(b) = limits::check(self, c) {
            return Err(e(
                &format!("cases.{}", b.field),
                format!("case `{name}`: {}", b.message),
            ));
        }
        if let Some(rows) = c.check_rows {
            let Some(s) = &c.attention else {
                return Err(e(
                    "cases.check_rows",
                    format!(
                    "case `{name}`: check_rows applies to attention cases only (top-k and scores \
                     check every row): remove it"
                ),
                ));
            };
            let total = s.batch.saturating_mul(s.q_len);
            if rows == 0 || rows > total {
                return Err(e(
                    "cases.check_rows",
                    format!(
                        "case `{name}`: check_rows = {rows} must be in 1..={total} \
                     (batch x q_len = {} x {} rows)",
                        s.batch, s.q_len
                    ),
                ));
            }
        }
        if let Err(b) = inputs::check(c) {
            return Err(e_at(
                &format!(".inputs.{}", b.key),
                &format!("cases.inputs.{}", echo::value(&b.key)),
                format!("case `{name}`: {}", b.message),
            ));
        }
        Ok(())
    }

    /// The family's own rules: sizes >= 1, consistent shapes, the suites it has.
    fn check_family(
        &self,
        c: &Case,
        name: &str,
        e: &dyn Fn(&str, String) -> MatrixError,
    ) -> Result<(), MatrixError> {
        match c.family() {
            FamilyName::Topk => {
                let s = c.topk.as_ref().expect("family checked above");
                if s.queries == 0 || s.n == 0 || s.k == 0 {
                    return Err(e(
                        "cases.topk",
                        format!("case `{name}`: queries, n and k must be >= 1"),
                    ));
                }
                if s.n > s.capacity {
                    return Err(e("cases.topk.n", format!(
                        "case `{name}`: n = {} exceeds the score buffer's capacity {}: the engine's rows are at most `capacity` long; raise capacity to at least n",
                        s.n, s.capacity
                    )));
                }
                if c.suites.contains(&Suite::Error) {
                    return Err(e(
                        "cases.suites",
                        format!(
                            "case `{name}`: top-k has no error suite (ids are exact): use parity"
                        ),
                    ));
                }
            }
            FamilyName::Scores => {
                let s = c.scores.as_ref().expect("family checked above");
                if s.queries == 0 || s.heads == 0 || s.blocks == 0 {
                    return Err(e(
                        "cases.scores",
                        format!("case `{name}`: queries, heads and blocks must be >= 1"),
                    ));
                }
            }
            FamilyName::Attention => {
                let s = c.attention.as_ref().expect("family checked above");
                let sizes = [s.batch, s.q_len, s.kv_len, s.hq, s.hkv, s.t];
                if sizes.contains(&0) {
                    return Err(e(
                        "cases.attention",
                        format!("case `{name}`: every size must be >= 1"),
                    ));
                }
                if !s.hq.is_multiple_of(s.hkv) {
                    return Err(e(
                        "cases.attention.hq",
                        format!(
                            "case `{name}`: hq ({}) must be a multiple of hkv ({})",
                            s.hq, s.hkv
                        ),
                    ));
                }
                if s.q_len > s.kv_len {
                    return Err(e("cases.attention.q_len", format!("case `{name}`: q_len ({}) > kv_len ({}): queries sit at the end of the sequence", s.q_len, s.kv_len)));
                }
                if let Some(scale) = s.scale {
                    if !(scale.is_finite() && scale > 0.0) {
                        return Err(e("cases.attention.scale", format!(
                            "case `{name}`: scale = {scale} must be a finite number > 0 (default 1/sqrt(128))"
                        )));
                    }
                }
                if c.suites.contains(&Suite::Parity) {
                    return Err(e("cases.suites", format!("case `{name}`: attention has error and bench suites (its lse parity is part of error)")));
                }
            }
        }
        Ok(())
    }
}
