//! The Markdown summary for a pull request: per target, what ran and how it went; the
//! failures with the command that reproduces each; snapshot diffs; benchmark verdicts, with
//! a chart of each target's ratios to its golden (`bench_chart`).

use super::TargetReport;
use qsa::matrix::Suite;
use qsa::results::{Status, TargetStatus};

pub fn render(reports: &[TargetReport]) -> String {
    let mut out = String::from("## qsa matrix\n\n| target | status | pass | fail | not supported | gates failed | device / reason |\n|---|---|---:|---:|---:|---:|---|\n");
    for tr in reports {
        let r = &tr.results;
        let c = tr.counts();
        let status = match (tr.failed(), &tr.unstable) {
            (true, Some(_)) => "❌ fail (unstable, not gating)".to_string(),
            (true, None) if r.status == TargetStatus::Emulated => "❌ fail (emulated)".to_string(),
            (true, None) if r.status == TargetStatus::RunPtx => {
                format!("❌ fail (PTX on {})", r.ptx_card().unwrap_or("?"))
            }
            (true, None) => "❌ fail".to_string(),
            (false, _) if r.status == TargetStatus::Run => "✅ pass".to_string(),
            (false, _) if r.status == TargetStatus::Emulated => "✅ pass (emulated)".to_string(),
            (false, _) if r.status == TargetStatus::RunPtx => {
                format!("✅ pass (PTX on {})", r.ptx_card().unwrap_or("?"))
            }
            (false, _) => r.status_label(),
        };
        let what = if r.status == TargetStatus::Run {
            format!("{} ({:.0} s)", r.device.name, r.seconds)
        } else if r.status == TargetStatus::Emulated {
            format!("{} ({:.0} s)", r.reason.replace('|', "\\|"), r.seconds)
        } else if r.status == TargetStatus::RunPtx {
            let driver = if r.device.driver.is_empty() {
                String::new()
            } else {
                format!(", {}", r.device.driver)
            };
            format!(
                "{}{driver}: {} ({:.0} s)",
                r.device.name,
                r.reason.replace('|', "\\|"),
                r.seconds
            )
        } else {
            r.reason.replace('|', "\\|")
        };
        out.push_str(&format!(
            "| {} | {status} | {} | {} | {} | {} | {what} |\n",
            r.target, c.pass, c.fail, c.unsupported, c.gate_failures
        ));
    }
    let failures: Vec<String> = reports
        .iter()
        .flat_map(|tr| {
            let t = match tr.results.status {
                TargetStatus::Emulated => format!("{} (emulated)", tr.results.target),
                TargetStatus::RunPtx => format!(
                    "{} (PTX on {})",
                    tr.results.target,
                    tr.results.ptx_card().unwrap_or("?")
                ),
                _ => tr.results.target.clone(),
            };
            let recs = tr
                .results
                .records
                .iter()
                .filter(|r| r.status.is_failure())
                .map(move |r| {
                    format!(
                        "- **{t}** {} `{}/{}/{}/{}`{}: {}\n  `{}`\n",
                        r.suite.name(),
                        r.case,
                        r.dist,
                        r.variant,
                        r.check,
                        r.dispatched
                            .as_deref()
                            .map_or(String::new(), |k| format!(" (kernel `{k}`)")),
                        r.message,
                        r.repro
                    )
                });
            let t2 = tr.results.target.clone();
            let notes = tr
                .notes
                .iter()
                .filter(|n| n.failed)
                .map(move |n| note_item(&t2, n));
            recs.chain(notes).collect::<Vec<_>>()
        })
        .collect();
    if !failures.is_empty() {
        out.push_str("\n### Failures\n\n");
        failures.iter().for_each(|f| out.push_str(f));
    }
    let warnings: Vec<String> = reports
        .iter()
        .flat_map(|tr| {
            tr.notes
                .iter()
                .filter(|n| !n.failed)
                .map(|n| note_item(&tr.results.target, n))
        })
        .collect();
    if !warnings.is_empty() {
        out.push_str("\n### Warnings\n\n");
        warnings.iter().for_each(|w| out.push_str(w));
    }
    let diffs: Vec<String> = reports
        .iter()
        .flat_map(|tr| {
            tr.notes
                .iter()
                .filter(|n| !n.diff.is_empty())
                .map(move |n| {
                    format!(
                        "<details><summary>{} {} {}</summary>\n\n```diff\n{}```\n</details>\n",
                        tr.results.target, n.kind, n.name, n.diff
                    )
                })
        })
        .collect();
    if !diffs.is_empty() {
        out.push_str("\n### Snapshot and resource changes\n\nPending snapshots are in the run's artifacts: `cargo xtask bless --from DIR` accepts them.\n\n");
        diffs.iter().for_each(|d| out.push_str(d));
    }
    let mut bench = String::new();
    for tr in reports {
        for r in tr
            .results
            .records
            .iter()
            .filter(|r| r.suite == Suite::Bench && r.status != Status::Unsupported)
        {
            let m = |k: &str| r.metrics.get(k).copied();
            let verdict = ["same", "faster", "slower", "noisy", "new"]
                .iter()
                .find(|v| m(&format!("verdict_{v}")).is_some())
                .map_or("-", |v| v);
            bench.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
                tr.results.target,
                r.case,
                r.variant,
                r.check,
                r.dispatched.as_deref().unwrap_or("-"),
                m("median_us").map_or("-".into(), |x| format!("{x:.2}")),
                m("ratio").map_or("-".into(), |x| format!("{x:.3}")),
                verdict.to_uppercase()
            ));
        }
    }
    // The chart of ratios first (what a reviewer looks at), the table of figures under it.
    out.push_str(&super::bench_chart::render(reports));
    if !bench.is_empty() {
        out.push_str("\n<details><summary>Benchmarks (median us; ratio = this run / golden)</summary>\n\n| target | case | variant | pass | kernel | median us | ratio | verdict |\n|---|---|---|---|---|---:|---:|---|\n");
        out.push_str(&bench);
        out.push_str("</details>\n");
    }
    let unsupported: Vec<String> = reports
        .iter()
        .flat_map(|tr| {
            tr.results
                .records
                .iter()
                .filter(|r| r.status == Status::Unsupported)
                .map(move |r| {
                    format!(
                        "- {} `{}/{}`: {}\n",
                        tr.results.target, r.case, r.variant, r.message
                    )
                })
        })
        .collect();
    if !unsupported.is_empty() {
        out.push_str("\n<details><summary>Not supported</summary>\n\n");
        unsupported.iter().for_each(|u| out.push_str(u));
        out.push_str("</details>\n");
    }
    out
}

/// A gate note as a list item: the message, what the change means (one sub-item per changed
/// check), and the command that reruns it.
fn note_item(target: &str, n: &super::GateNote) -> String {
    let mut item = format!("- **{target}** {} `{}`: {}\n", n.kind, n.name, n.message);
    for m in &n.meaning {
        item.push_str(&format!("  - {m}\n"));
    }
    if !n.repro.is_empty() {
        // After sub-items, a blank line keeps the command in the note, not the last sub-item.
        let gap = if n.meaning.is_empty() { "" } else { "\n" };
        item.push_str(&format!("{gap}  `{}`\n", n.repro));
    }
    item
}
