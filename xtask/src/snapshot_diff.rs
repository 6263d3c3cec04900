//! What a changed snapshot means, in words a reviewer can act on: "ids changed for 1 of 8
//! queries of topk_edges_small/signed_zeros/wide", "error of scores_ragged/normal/simt
//! (rel_max) rose 10x (1e-7 -> 1e-6)", "qsa_topk_split_select: sgpr_spill 18 -> 40". A raw
//! diff shows `[1e-7,1e-6)` -> `[1e-6,1e-5)` or a new digest, which is easy to bless
//! without reading; these lines are what the terminal, the summary and the PR comment show.
//!
//! Snapshot kinds, by name: `parity__<case>` and `error__<case>` hold one line per check,
//! `<dist> <variant> <check>: <value>` (keyed by the part before `: `); `resources` is a
//! table with a header row, keyed by its first two columns; `dispatch` holds
//! `<case> <variant> <switch> -> <kernel>` lines.

use std::collections::BTreeMap;

/// The meaning of one snapshot's change.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Meaning {
    /// One sentence per changed check, row or line, in snapshot order.
    pub lines: Vec<String>,
    /// The errors that rose by a decade or more (also in `lines`): a failed check unless
    /// blessed with `--reason`.
    pub rises: Vec<String>,
}

/// Is `name` a snapshot with one independent line per check (which a filtered run may
/// compare and bless line by line)?
pub fn is_per_check(name: &str) -> bool {
    name.starts_with("parity__") || name.starts_with("error__")
}

/// The key of a per-check line: `<dist> <variant> <check>`.
pub fn check_key(line: &str) -> &str {
    line.split_once(": ").map_or(line, |(k, _)| k)
}

/// Explain the change from `old` to `new` (snapshot contents, without insta's header).
/// `partial`: `new` holds only some checks (a filtered run); checks missing from it are
/// not reported as removed.
pub fn explain(target: &str, name: &str, old: &str, new: &str, partial: bool) -> Meaning {
    let mut m = Meaning::default();
    if let Some(case) = name
        .split_once("__")
        .map(|(_, c)| c)
        .filter(|_| is_per_check(name))
    {
        per_check(case, old, new, partial, &mut m);
    } else if name == "resources" {
        table(target, old, new, &mut m);
    } else if name == "dispatch" {
        arrows(old, new, &mut m);
    }
    // Anything the readers above could not name (a partial run's unrun lines excepted).
    if m.lines.is_empty() && old != new && !(partial && is_per_check(name)) {
        let d = crate::golden::diff(old, new);
        let changed = d.lines().count();
        if changed > 0 {
            m.lines
                .push(format!("{changed} line(s) differ (see the diff)"));
        }
    }
    m
}

fn keyed(text: &str) -> Vec<(&str, &str)> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split_once(": ").unwrap_or((l, "")))
        .collect()
}

fn per_check(case: &str, old: &str, new: &str, partial: bool, m: &mut Meaning) {
    let old_map: BTreeMap<&str, &str> = keyed(old).into_iter().collect();
    let new_list = keyed(new);
    let label = |key: &str| {
        let parts: Vec<&str> = key.split_whitespace().collect();
        match parts.as_slice() {
            // The single check of a top-k or scores line needs no name.
            [dist, variant, "ids" | "select" | "scores"] => format!("{case}/{dist}/{variant}"),
            [dist, variant, check] => format!("{case}/{dist}/{variant}/{check}"),
            _ => format!("{case}/{key}"),
        }
    };
    for (key, value) in &new_list {
        match old_map.get(key) {
            None => m.lines.push(format!("new check {}: {value}", label(key))),
            Some(old_value) if old_value != value => {
                values(&label(key), old_value, value, m);
            }
            Some(_) => {}
        }
    }
    if !partial {
        let new_keys: Vec<&str> = new_list.iter().map(|(k, _)| *k).collect();
        for key in old_map.keys().filter(|k| !new_keys.contains(k)) {
            m.lines
                .push(format!("check {} is no longer produced", label(key)));
        }
    }
}

/// One check's old and new value.
fn values(label: &str, old: &str, new: &str, m: &mut Meaning) {
    if let (Some(o), Some(n)) = (IdsLine::parse(old), IdsLine::parse(new)) {
        m.lines.push(o.explain(&n, label));
        return;
    }
    let (old_f, new_f) = (fields(old), fields(new));
    let mut said = false;
    for (name, new_v) in &new_f {
        let Some((_, old_v)) = old_f.iter().find(|(n, _)| n == name) else {
            continue;
        };
        if old_v == new_v {
            continue;
        }
        said = true;
        match (Decade::parse(old_v), Decade::parse(new_v)) {
            (Some(a), Some(b)) => {
                let line = a.change(&b, label, name);
                if a.rose_to(&b) {
                    m.rises.push(line.clone());
                }
                m.lines.push(line);
            }
            _ => m
                .lines
                .push(format!("{name} of {label}: {old_v} -> {new_v}")),
        }
    }
    if !said {
        m.lines.push(format!("{label}: `{old}` -> `{new}`"));
    }
}

/// `name value` pairs of a snapshot value: `rel_max [1e-7,1e-6) rel_rmse [1e-8,1e-7)`, or
/// groups joined by `; ` whose first word names them (`o rel_max ... ; lse rel_max ...`).
fn fields(value: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for group in value.split("; ") {
        let words: Vec<&str> = group.split_whitespace().collect();
        let (prefix, pairs) = if words.len() % 2 == 1 {
            (format!("{} ", words[0]), &words[1..])
        } else {
            (String::new(), &words[..])
        };
        for p in pairs.chunks(2) {
            out.push((format!("{prefix}{}", p[0]), p[1].to_string()));
        }
    }
    out
}

/// A decade as the error snapshots write it: `[1e-7,1e-6)`, `0`, or a non-finite value.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Decade {
    Zero,
    Exp(i32),
    NonFinite,
}

impl Decade {
    fn parse(s: &str) -> Option<Decade> {
        if s == "0" {
            return Some(Decade::Zero);
        }
        if matches!(s, "inf" | "-inf" | "NaN") {
            return Some(Decade::NonFinite);
        }
        let lo = s.strip_prefix("[1e")?.split_once(',')?.0;
        lo.parse().ok().map(Decade::Exp)
    }

    fn show(&self) -> String {
        match self {
            Decade::Zero => "0".into(),
            Decade::Exp(e) => format!("1e{e}"),
            Decade::NonFinite => "non-finite".into(),
        }
    }

    /// Did the error grow by a decade or more (from zero or to non-finite counts)?
    fn rose_to(&self, new: &Decade) -> bool {
        match (self, new) {
            (Decade::Exp(a), Decade::Exp(b)) => b > a,
            (Decade::NonFinite, _) => false,
            (_, Decade::NonFinite) => true,
            (Decade::Zero, Decade::Exp(_)) => true,
            (_, Decade::Zero) => false,
        }
    }

    fn change(&self, new: &Decade, label: &str, field: &str) -> String {
        let (a, b) = (self.show(), new.show());
        let verb = match (self, new) {
            (Decade::Exp(x), Decade::Exp(y)) if y > x => format!("rose {}", factor(y - x)),
            (Decade::Exp(x), Decade::Exp(y)) => format!("fell {}", factor(x - y)),
            _ if self.rose_to(new) => "rose".to_string(),
            _ => "fell".to_string(),
        };
        format!("error of {label} ({field}) {verb} ({a} -> {b})")
    }
}

fn factor(decades: i32) -> String {
    if decades <= 6 {
        format!("{}x", 10u64.pow(decades as u32))
    } else {
        format!("1e{decades}x")
    }
}

/// A top-k parity value: `ids <digest> selected <n> queries <nq> by <g>: <4 hex per group>`
/// (older snapshots stop after `selected <n>`).
struct IdsLine<'a> {
    digest: &'a str,
    selected: &'a str,
    queries: Option<(usize, usize, Vec<&'a str>)>,
}

impl<'a> IdsLine<'a> {
    fn parse(v: &'a str) -> Option<IdsLine<'a>> {
        let rest = v.strip_prefix("ids ")?;
        let (digest, rest) = rest.split_once(" selected ")?;
        let (selected, groups) = match rest.split_once(" queries ") {
            Some((s, g)) => (s, Some(g)),
            None => (rest, None),
        };
        let queries = groups.and_then(|g| {
            let (shape, hex) = g.split_once(": ")?;
            let (nq, by) = shape.split_once(" by ")?;
            let chunks = (0..hex.len() / 4).map(|i| &hex[i * 4..i * 4 + 4]).collect();
            Some((nq.parse().ok()?, by.parse().ok()?, chunks))
        });
        Some(IdsLine {
            digest,
            selected,
            queries,
        })
    }

    fn explain(&self, new: &IdsLine, label: &str) -> String {
        let mut parts = Vec::new();
        match (&self.queries, &new.queries) {
            (Some((nq, by, a)), Some((nq2, by2, b))) if nq == nq2 && by == by2 => {
                let changed: Vec<usize> = (0..a.len().min(b.len()))
                    .filter(|&i| a[i] != b[i])
                    .collect();
                let shown: Vec<String> = changed
                    .iter()
                    .take(8)
                    .map(|&i| {
                        let (lo, hi) = (i * by, ((i + 1) * by).min(*nq) - 1);
                        if lo == hi {
                            lo.to_string()
                        } else {
                            format!("{lo}-{hi}")
                        }
                    })
                    .collect();
                let more = if changed.len() > 8 { ", ..." } else { "" };
                if changed.is_empty() && self.digest != new.digest {
                    parts.push(format!(
                        "ids changed for {label} (the per-query digests collide; compare the ids)"
                    ));
                } else if *by == 1 {
                    parts.push(format!(
                        "ids changed for {} of {nq} queries of {label} (query {}{more})",
                        changed.len(),
                        shown.join(", ")
                    ));
                } else {
                    parts.push(format!(
                        "ids changed in {} of {} groups of {by} queries of {label} (queries {}{more})",
                        changed.len(),
                        a.len(),
                        shown.join(", ")
                    ));
                }
            }
            _ if self.digest != new.digest => {
                parts.push(format!(
                    "ids changed for {label} (digest {} -> {})",
                    self.digest, new.digest
                ));
            }
            _ => {}
        }
        if self.selected != new.selected {
            parts.push(format!(
                "selected count of {label} {} -> {}",
                self.selected, new.selected
            ));
        }
        if parts.is_empty() {
            parts.push(format!("per-query digests of {label} added"));
        }
        parts.join("; ")
    }
}

/// Resource tables: rows keyed by their first two columns (source, kernel), cells named by
/// the header row; comment lines (`#`) compared as text.
fn table(target: &str, old: &str, new: &str, m: &mut Meaning) {
    fn parse(text: &str) -> (Vec<&str>, Vec<String>, BTreeMap<String, Vec<&str>>) {
        let mut comments = Vec::new();
        let mut header: Vec<String> = Vec::new();
        let mut rows = BTreeMap::new();
        for l in text.lines().filter(|l| !l.trim().is_empty()) {
            if l.starts_with('#') {
                comments.push(l);
            } else if header.is_empty() {
                header = l.split_whitespace().map(String::from).collect();
            } else {
                let cells: Vec<&str> = l.split_whitespace().collect();
                let key = cells.iter().take(2).copied().collect::<Vec<_>>().join("/");
                rows.insert(key, cells);
            }
        }
        (comments, header, rows)
    }
    let (oc, oh, orows) = parse(old);
    let (nc, nh, nrows) = parse(new);
    for (a, b) in oc.iter().zip(&nc).filter(|(a, b)| a != b) {
        m.lines.push(format!("{target} header: `{a}` -> `{b}`"));
    }
    if oh != nh {
        m.lines.push(format!(
            "{target}: the table's columns changed ({} -> {})",
            oh.join(" "),
            nh.join(" ")
        ));
        return;
    }
    for (key, cells) in &nrows {
        let kernel = key.split_once('/').map_or(key.as_str(), |(_, k)| k);
        let Some(old_cells) = orows.get(key) else {
            m.lines.push(format!("{target} {kernel}: new kernel"));
            continue;
        };
        let changes: Vec<String> = nh
            .iter()
            .zip(old_cells.iter().zip(cells))
            .filter(|(_, (a, b))| a != b)
            .map(|(col, (a, b))| format!("{col} {a} -> {b}"))
            .collect();
        if !changes.is_empty() {
            m.lines
                .push(format!("{target} {kernel}: {}", changes.join(", ")));
        }
    }
    for key in orows.keys().filter(|k| !nrows.contains_key(*k)) {
        let kernel = key.split_once('/').map_or(key.as_str(), |(_, k)| k);
        m.lines.push(format!("{target} {kernel}: kernel removed"));
    }
}

/// Dispatch tables: `<what> -> <kernel>` lines keyed by `<what>`.
fn arrows(old: &str, new: &str, m: &mut Meaning) {
    let parse = |t: &'_ str| -> Vec<(String, String)> {
        t.lines()
            .filter_map(|l| l.rsplit_once("->"))
            .map(|(k, v)| {
                let key = k.split_whitespace().collect::<Vec<_>>().join(" ");
                (key, v.trim().to_string())
            })
            .collect()
    };
    let (o, n) = (parse(old), parse(new));
    let om: BTreeMap<_, _> = o.iter().cloned().collect();
    let nm: BTreeMap<_, _> = n.iter().cloned().collect();
    for (k, v) in &n {
        match om.get(k) {
            None => m.lines.push(format!("dispatch of {k}: new row -> {v}")),
            Some(ov) if ov != v => m.lines.push(format!("dispatch of {k}: {ov} -> {v}")),
            Some(_) => {}
        }
    }
    for (k, _) in o.iter().filter(|(k, _)| !nm.contains_key(k)) {
        m.lines.push(format!("dispatch of {k}: row removed"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(groups: &str) -> String {
        format!("ids 0123456789abcdef selected 257 queries 8 by 1: {groups}")
    }

    #[test]
    fn parity_names_the_changed_queries() {
        let old = format!(
            "signed_zeros wide ids: {}",
            ids("00000000000000000000000000000000")
        );
        let new = format!(
            "signed_zeros wide ids: {}",
            ids("00000000000000000000000000001234")
        )
        .replace("0123456789abcdef", "fedcba9876543210");
        let m = explain("cpu", "parity__topk_edges_small", &old, &new, false);
        assert_eq!(
            m.lines,
            vec!["ids changed for 1 of 8 queries of topk_edges_small/signed_zeros/wide (query 7)"]
        );
        assert!(m.rises.is_empty());
    }

    /// The runner's own format, read back: query 5 of 8 changed, and groups of 4 of 256.
    #[test]
    fn the_parity_suite_format_round_trips() {
        use qsa::suites::parity::ids_snapshot;
        let k = 4;
        let old_ids: Vec<i32> = (0..8 * k as i32).collect();
        let mut new_ids = old_ids.clone();
        new_ids[5 * k + 1] = -1;
        let line = |ids: &[i32], nq| format!("ties wide ids: {}", ids_snapshot(ids, nq, 30));
        let m = explain(
            "cpu",
            "parity__e",
            &line(&old_ids, 8),
            &line(&new_ids, 8),
            false,
        );
        assert_eq!(
            m.lines,
            vec!["ids changed for 1 of 8 queries of e/ties/wide (query 5)"]
        );
        let old_ids: Vec<i32> = (0..256 * k as i32).collect();
        let mut new_ids = old_ids.clone();
        new_ids[9 * k] = -1;
        let m = explain(
            "cpu",
            "parity__p",
            &line(&old_ids, 256),
            &line(&new_ids, 256),
            false,
        );
        assert_eq!(
            m.lines,
            vec!["ids changed in 1 of 64 groups of 4 queries of p/ties/wide (queries 8-11)"]
        );
    }

    #[test]
    fn grouped_queries_say_which_group() {
        let old = "u auto ids: ids aa selected 5 queries 256 by 4: 00000000";
        let new = "u auto ids: ids bb selected 5 queries 256 by 4: 00001111";
        let m = explain("cpu", "parity__p", old, new, false);
        assert_eq!(
            m.lines,
            vec!["ids changed in 1 of 2 groups of 4 queries of p/u/auto (queries 4-7)"]
        );
    }

    #[test]
    fn a_decade_rise_is_named_and_collected() {
        let old = "normal simt scores: rel_max [1e-7,1e-6) rel_rmse [1e-8,1e-7)";
        let new = "normal simt scores: rel_max [1e-6,1e-5) rel_rmse [1e-8,1e-7)";
        let m = explain("cpu", "error__scores_ragged", old, new, false);
        let want = "error of scores_ragged/normal/simt (rel_max) rose 10x (1e-7 -> 1e-6)";
        assert_eq!(m.lines, vec![want]);
        assert_eq!(m.rises, vec![want]);
        // The other way is a fall: reported, not a rise.
        let m = explain("cpu", "error__scores_ragged", new, old, false);
        assert_eq!(
            m.lines,
            vec!["error of scores_ragged/normal/simt (rel_max) fell 10x (1e-6 -> 1e-7)"]
        );
        assert!(m.rises.is_empty());
    }

    #[test]
    fn attention_groups_and_zero_errors() {
        let old = "r gather bwd: dq rel_max [1e-6,1e-5) rel_rmse 0; dk rel_max [1e-7,1e-6) rel_rmse [1e-8,1e-7)";
        let new = "r gather bwd: dq rel_max [1e-6,1e-5) rel_rmse [1e-9,1e-8); dk rel_max [1e-5,1e-4) rel_rmse [1e-8,1e-7)";
        let m = explain("sm_90", "error__attn", old, new, false);
        assert_eq!(
            m.rises,
            vec![
                "error of attn/r/gather/bwd (dq rel_rmse) rose (0 -> 1e-9)",
                "error of attn/r/gather/bwd (dk rel_max) rose 100x (1e-7 -> 1e-5)"
            ]
        );
    }

    #[test]
    fn partial_runs_do_not_report_unrun_checks() {
        let old = "a x ids: 1\nb x ids: 2";
        assert!(explain("cpu", "parity__c", old, "a x ids: 1", true)
            .lines
            .is_empty());
        assert_eq!(
            explain("cpu", "parity__c", old, "a x ids: 1", false).lines,
            vec!["check c/b/x is no longer produced"]
        );
    }

    #[test]
    fn resource_rows_name_kernel_and_column() {
        let head = "# target: gfx906\nsource kernel block vgpr sgpr_spill occ\n";
        let old = format!("{head}topk qsa_topk_split_select 512 55 18 40%\n");
        let new =
            format!("{head}topk qsa_topk_split_select 512 55 40 40%\ntopk qsa_new 64 1 0 1%\n");
        let m = explain("gfx906", "resources", &old, &new, false);
        assert_eq!(
            m.lines,
            vec![
                "gfx906 qsa_new: new kernel",
                "gfx906 qsa_topk_split_select: sgpr_spill 18 -> 40"
            ]
        );
    }

    #[test]
    fn dispatch_rows() {
        let old = "topk_a   auto  -   -> split\ntopk_a   wide  -   -> radix";
        let new = "topk_a   auto  -   -> radix\ntopk_a   wide  -   -> radix";
        assert_eq!(
            explain("cpu", "dispatch", old, new, false).lines,
            vec!["dispatch of topk_a auto -: split -> radix"]
        );
    }
}
