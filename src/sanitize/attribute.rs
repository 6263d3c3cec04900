//! Findings -> failed checks, each charged to the unit that was running.
//!
//! The child runner prints `[i/n] <target> <suite> <case> [--dist D]` before each unit, to
//! the same file as the tool's reports (see `exec`), and every GpuApi call is synchronous,
//! so a kernel's report lands after its unit's progress line and before the next one. A
//! finding is charged to the last progress line above it; findings before any (start-up)
//! go to case "-". Reports of one kind from one kernel in one unit (an out-of-bounds write
//! is reported once per thread) become one check with their count.

use super::parse::{Finding, Report};
use super::{Tool, ERROR_EXITCODE};
use crate::journal::Unit;
use crate::matrix::Suite;
use crate::results::{Record, Status};
use std::collections::BTreeMap;

/// Reports grouped into one check: (unit, kernel, what was reported).
type GroupKey = (Option<Unit>, Option<String>, String);

/// The unit a progress line of `target` announces.
pub fn progress_unit(line: &str, target: &str) -> Option<Unit> {
    let rest = line.strip_prefix('[')?.split_once("] ")?.1;
    let rest = rest.strip_prefix(target)?.strip_prefix(' ')?;
    let rest = rest.split(": done by an earlier run").next()?;
    let mut words = rest.split_whitespace();
    let suite = match words.next()? {
        "parity" => Suite::Parity,
        "error" => Suite::Error,
        "bench" => Suite::Bench,
        _ => return None,
    };
    let case = words.next()?.to_string();
    let dist = match (words.next(), words.next()) {
        (Some("--dist"), Some(d)) => d.to_string(),
        (None, _) => "-".to_string(),
        _ => return None,
    };
    Some(Unit { suite, case, dist })
}

/// Everything the run of one tool says, as checks: one failed record per (unit, kernel,
/// kind of report); plus one when the tool counted errors it printed no finding for, or
/// printed no summary at all (it did not finish). `exit` is the child's exit code.
pub fn records(
    tool: Tool,
    target: &str,
    log: &str,
    report: &Report,
    exit: Option<i32>,
    log_path: &str,
) -> Vec<Record> {
    let units: Vec<(usize, Unit)> = log
        .lines()
        .enumerate()
        .filter_map(|(i, l)| progress_unit(l, target).map(|u| (i, u)))
        .collect();
    let unit_at = |line: usize| {
        units
            .iter()
            .rev()
            .find(|(i, _)| *i < line)
            .map(|(_, u)| u.clone())
    };
    let mut groups: BTreeMap<GroupKey, Vec<&Finding>> = BTreeMap::new();
    for f in &report.findings {
        groups
            .entry((unit_at(f.line), f.kernel.clone(), f.what.clone()))
            .or_default()
            .push(f);
    }
    let mut out: Vec<Record> = groups
        .into_iter()
        .map(|((unit, kernel, what), found)| {
            finding_record(tool, target, unit.as_ref(), kernel, &what, &found)
        })
        .collect();
    let exit_text = exit.map_or("killed by a signal".to_string(), |c| format!("exit {c}"));
    match report.summary_count() {
        None => out.push(run_record(
            tool,
            target,
            format!(
                "compute-sanitizer {} printed no summary: it did not finish ({exit_text}); its \
                 log: {log_path}",
                tool.name()
            ),
        )),
        Some(n) if out.is_empty() && (n > 0 || exit == Some(ERROR_EXITCODE)) => {
            out.push(run_record(
                tool,
                target,
                format!(
                    "compute-sanitizer {} counted {n} error(s) or hazard(s) ({exit_text}) but qsa \
                     read no report from its output: read the log, {log_path}, and teach \
                     src/sanitize/parse.rs its format",
                    tool.name()
                ),
            ))
        }
        Some(_) => {}
    }
    out
}

fn finding_record(
    tool: Tool,
    target: &str,
    unit: Option<&Unit>,
    kernel: Option<String>,
    what: &str,
    found: &[&Finding],
) -> Record {
    let first = found[0];
    let mut about: Vec<&str> = Vec::new();
    about.extend(first.thread.as_deref());
    about.extend(first.details.iter().map(String::as_str));
    let place = kernel
        .as_deref()
        .map_or(String::new(), |k| format!(" in kernel {k}"));
    let during = unit.map_or("before any check began (start-up)".to_string(), |u| {
        format!("while running {u}")
    });
    let more = if found.len() > 1 {
        format!("; {} reports like it", found.len())
    } else {
        String::new()
    };
    let detail = if about.is_empty() {
        String::new()
    } else {
        format!(" ({})", about.join("; "))
    };
    let mut r = base(tool, target, unit);
    r.dispatched = kernel;
    r.message = format!(
        "compute-sanitizer {}: {what}{place}{detail} {during}{more}",
        tool.name()
    );
    r.metrics
        .insert("sanitizer_reports".into(), found.len() as f64);
    r
}

fn run_record(tool: Tool, target: &str, message: String) -> Record {
    let mut r = base(tool, target, None);
    r.message = message;
    r
}

fn base(tool: Tool, target: &str, unit: Option<&Unit>) -> Record {
    let (suite, case, dist) = unit.map_or((Suite::Parity, "-".to_string(), "-".to_string()), |u| {
        (u.suite, u.case.clone(), u.dist.clone())
    });
    let mut repro = format!("qsa run --target {target} --sanitize {}", tool.name());
    if case != "-" {
        repro += &format!(" --suite {} --case {case}", suite.name());
    }
    if dist != "-" {
        repro += &format!(" --dist {dist}");
    }
    Record {
        suite,
        case,
        dist,
        variant: "-".into(),
        check: format!("compute-sanitizer {}", tool.name()),
        dispatched: None,
        status: Status::Fail,
        message: String::new(),
        metrics: BTreeMap::new(),
        snapshot: None,
        repro,
    }
}

#[cfg(test)]
#[path = "attribute_tests.rs"]
mod tests;
