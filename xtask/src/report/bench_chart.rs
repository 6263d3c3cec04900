//! The benchmark chart of the pull-request summary: per target, one bar per benchmark, its
//! median divided by the golden median (the `ratio` metric the bench suite recorded), as a
//! Mermaid `xychart-beta` block, which GitHub renders in comments and job summaries. Every
//! number drawn is a record's own `ratio`; the axis runs from 0 (so a bar's length is the
//! ratio, not an exaggerated difference) to the largest ratio rounded up to a tenth. A target
//! without ratios says why in one line instead of drawing an empty chart.

use super::TargetReport;
use qsa::matrix::Suite;
use qsa::results::{Status, TargetStatus};

/// The section: a heading, then per target a chart or the line saying why there is none.
/// Empty when no target has a bench record or a reason to mention (no bench suite ran).
pub fn render(reports: &[TargetReport]) -> String {
    let mut out = String::new();
    for tr in reports {
        out.push_str(&target_chart(tr));
    }
    if out.is_empty() {
        return out;
    }
    format!("\n### Benchmarks: this run / golden (1.0 = as fast as the golden)\n\n{out}")
}

/// One target's chart, or the line that says why it has none.
fn target_chart(tr: &TargetReport) -> String {
    let r = &tr.results;
    let bench: Vec<_> = r
        .records
        .iter()
        .filter(|rec| rec.suite == Suite::Bench && rec.status != Status::Unsupported)
        .collect();
    let bars: Vec<(String, f64)> = bench
        .iter()
        .filter_map(|rec| {
            let ratio = rec.metrics.get("ratio").copied()?;
            ratio.is_finite().then(|| {
                (
                    label(&format!("{}/{}/{}", rec.case, rec.variant, rec.check)),
                    ratio,
                )
            })
        })
        .collect();
    if bars.is_empty() {
        return match (r.status, bench.len()) {
            // Only a run on the target's own card measures time.
            (TargetStatus::Run, 0) => String::new(),
            (TargetStatus::Run, n) => format!(
                "- **{}**: no chart: none of its {n} benchmark(s) has a golden median to compare with (new benchmarks: `cargo xtask matrix --bless` on this card records them)\n",
                r.target
            ),
            (status, _) => format!(
                "- **{}**: no bench medians ({}): only a run on the target's own card measures time\n",
                r.target,
                status.label()
            ),
        };
    }
    let top = bars.iter().map(|b| b.1).fold(1.0_f64, f64::max);
    let top = (top * 10.0).ceil() / 10.0;
    let names: Vec<String> = bars.iter().map(|b| format!("\"{}\"", b.0)).collect();
    let values: Vec<String> = bars.iter().map(|b| format!("{:.3}", b.1)).collect();
    let unmatched = bench.len() - bars.len();
    let note = if unmatched > 0 {
        format!(" ({unmatched} without a golden median, not drawn)")
    } else {
        String::new()
    };
    format!(
        "**{target}**: {n} benchmark(s){note}\n\n```mermaid\nxychart-beta\n    title \"{target}: median / golden median\"\n    x-axis [{names}]\n    y-axis \"this run / golden\" 0 --> {top:.1}\n    bar [{values}]\n```\n\n",
        target = label(&r.target),
        n = bars.len(),
        names = names.join(", "),
        values = values.join(", "),
    )
}

/// A benchmark name as Mermaid string text: a double quote would end the string, so it
/// becomes a single one; control characters become spaces.
fn label(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '"' => '\'',
            c if c.is_control() => ' ',
            c => c,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use qsa::results::TargetResults;

    /// A small synthetic report: sm_90 ran three benchmarks (two with a golden median, one
    /// new), gfx906 was emulated (no medians), cpu ran with no bench suite at all.
    fn reports() -> Vec<TargetReport> {
        let results = [
            r#"
target: sm_90
status: run
seed: 1
started: "2026-12-01T00:00:00Z"
seconds: 12.0
records:
  - {suite: bench, case: topk_decode, dist: uniform, variant: auto, check: "-", status: pass, repro: r,
     metrics: {median_us: 41.5, ratio: 0.9876, verdict_same: 1.0}}
  - {suite: bench, case: attn_decode_16q, dist: uniform, variant: gather, check: bwd, status: fail, repro: r,
     metrics: {median_us: 4200.0, ratio: 1.25, verdict_slower: 1.0}}
  - {suite: bench, case: "evil\"case", dist: uniform, variant: auto, check: fwd, status: pass, repro: r,
     metrics: {median_us: 9.0, verdict_new: 1.0}}
  - {suite: parity, case: topk_decode, dist: uniform, variant: auto, check: ids, status: pass, repro: r}
"#,
            r#"
target: gfx906
status: emulated
seed: 1
started: "2026-12-01T00:00:00Z"
seconds: 3.0
records:
  - {suite: parity, case: topk_edges_small, dist: uniform, variant: wide, check: ids, status: pass, repro: r}
"#,
            r#"
target: cpu
status: run
seed: 1
started: "2026-12-01T00:00:00Z"
seconds: 3.0
records:
  - {suite: parity, case: topk_edges_small, dist: uniform, variant: wide, check: ids, status: pass, repro: r}
"#,
        ];
        results
            .iter()
            .map(|y| TargetReport {
                results: serde_yaml::from_str::<TargetResults>(y).unwrap(),
                unstable: None,
                build: String::new(),
                notes: vec![],
            })
            .collect()
    }

    #[test]
    fn chart_of_ratios_per_target_and_a_reason_where_there_is_none() {
        let md = render(&reports());
        insta::assert_snapshot!(md);
        // The drawn numbers are the records' ratios, in record order; nothing else is a bar.
        assert!(md.contains("bar [0.988, 1.250]"), "{md}");
        assert!(md.contains("1 without a golden median, not drawn"), "{md}");
        assert!(
            md.contains("- **gfx906**: no bench medians (emulated)"),
            "{md}"
        );
        assert!(
            !md.contains("**cpu**"),
            "a run with no bench suite is not mentioned: {md}"
        );
        assert!(
            !md.contains("evil\"case"),
            "a quote in a name ends no Mermaid string"
        );
    }

    #[test]
    fn no_section_without_benchmarks_or_reasons() {
        let reports = reports();
        assert_eq!(render(&reports[2..]), "");
    }

    #[test]
    fn a_run_whose_benchmarks_are_all_new_says_so() {
        let mut reports = reports();
        reports[0].results.records.iter_mut().for_each(|r| {
            r.metrics.remove("ratio");
        });
        let md = render(&reports[..1]);
        assert!(
            md.contains("none of its 3 benchmark(s) has a golden median") && !md.contains("```"),
            "{md}"
        );
    }
}
