//! The final table in the terminal, and the failures with their repro commands.

use super::TargetReport;
use qsa::results::{Status, TargetStatus};

/// How many explained changes of one snapshot the terminal shows.
const MEANING_LINES: usize = 12;

pub fn render(reports: &[TargetReport]) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "\n{:<9} {:<18} {:>5} {:>5} {:>6} {:>6}  {}\n",
        "target", "status", "pass", "fail", "unsup", "gates", "device / reason"
    ));
    for tr in reports {
        let r = &tr.results;
        let c = tr.counts();
        // Emulated results read back (--from-results) carry no reason: the device says it.
        let emulated_bare = r.status == TargetStatus::Emulated && r.reason.is_empty();
        let what = if r.status == TargetStatus::Run || emulated_bare {
            r.device.name.clone()
        } else if r.status == TargetStatus::RunPtx {
            format!("{}: {}", r.device.name, r.reason)
        } else {
            r.reason.clone()
        };
        let verdict = if tr.failed() {
            if tr.unstable.is_some() {
                "FAIL (unstable)".to_string()
            } else if r.status == TargetStatus::Emulated {
                "FAIL (emulated)".to_string()
            } else if r.status == TargetStatus::RunPtx {
                format!("FAIL (PTX on {})", r.ptx_card().unwrap_or("?"))
            } else {
                "FAIL".to_string()
            }
        } else {
            r.status_label()
        };
        out.push_str(&format!(
            "{:<9} {:<18} {:>5} {:>5} {:>6} {:>6}  {}\n",
            r.target, verdict, c.pass, c.fail, c.unsupported, c.gate_failures, what
        ));
    }
    for tr in reports {
        // An emulated or PTX target's failures say so, and every failure names the kernel
        // that ran.
        let emulated = match tr.results.status {
            TargetStatus::Emulated => " (emulated)".to_string(),
            TargetStatus::RunPtx => {
                format!(" (PTX on {})", tr.results.ptx_card().unwrap_or("?"))
            }
            _ => String::new(),
        };
        for rec in tr.results.records.iter().filter(|r| r.status.is_failure()) {
            let kernel = rec
                .dispatched
                .as_deref()
                .map_or(String::new(), |k| format!(" [kernel {k}]"));
            out.push_str(&format!(
                "\nFAIL {}{emulated} {} {}/{}/{}/{}{kernel}: {}\n  reproduce: {}\n",
                tr.results.target,
                rec.suite.name(),
                rec.case,
                rec.dist,
                rec.variant,
                rec.check,
                rec.message,
                rec.repro
            ));
        }
        // Failed gates, then warnings (a stray snapshot on a filtered run, a bless with a
        // reason): both printed, so neither needs CI set to be seen.
        let notes = tr.notes.iter().filter(|n| n.failed);
        for n in notes.chain(tr.notes.iter().filter(|n| !n.failed)) {
            out.push_str(&format!(
                "\n{} {} {} {}: {}\n",
                if n.failed { "FAIL" } else { "WARN" },
                tr.results.target,
                n.kind,
                n.name,
                n.message
            ));
            // What the change means first; the raw diff after it, shorter when explained.
            for l in n.meaning.iter().take(MEANING_LINES) {
                out.push_str(&format!("  * {l}\n"));
            }
            if n.meaning.len() > MEANING_LINES {
                out.push_str(&format!(
                    "  * ... and {} more (summary.md lists all)\n",
                    n.meaning.len() - MEANING_LINES
                ));
            }
            let diff_lines = if n.meaning.is_empty() { 20 } else { 6 };
            for l in n.diff.lines().take(diff_lines) {
                out.push_str(&format!("  {l}\n"));
            }
            if !n.repro.is_empty() {
                out.push_str(&format!("  reproduce: {}\n", n.repro));
            }
        }
        let unsupported = tr
            .results
            .records
            .iter()
            .filter(|r| r.status == Status::Unsupported)
            .count();
        if unsupported > 0 {
            out.push_str(&format!("\nnote: {} checks on {} are not supported by its backend (listed in the summary)\n", unsupported, tr.results.target));
        }
    }
    // The plain closing line CI systems read: checks passed and failed, and what did not
    // run (unsupported checks, targets not run).
    let (mut pass, mut fail, mut skip) = (0, 0, 0);
    for tr in reports {
        let c = tr.counts();
        pass += c.pass;
        fail += c.fail + c.gate_failures + usize::from(tr.results.status == TargetStatus::Failed);
        skip += c.skip
            + c.unsupported
            + usize::from(matches!(
                tr.results.status,
                TargetStatus::Skipped | TargetStatus::BuiltNotRun
            ));
    }
    out.push_str(&format!(
        "\nmatrix: {pass} passed, {fail} failed, {skip} skipped\n"
    ));
    out
}
