//! The ratio interval, the verdict's edges and the golden entry with hand numbers (cargo
//! mutants 2026-12-01: the verdict tests are statistical, over synthetic runs, and never sat
//! exactly on an edge; the ratio's arithmetic was pinned only through them; what `--bless`
//! writes to bench.yaml, only by xtask's runs).

use super::*;

/// A stored interval: `interval()` hands back (lo, hi) as they are.
fn stats(median: f64, lo: f64, hi: f64) -> TimingStats {
    TimingStats {
        median,
        median_lo: lo,
        median_hi: hi,
        ..TimingStats::default()
    }
}

/// new / golden: the ratio of the medians, from new.lo / golden.hi to new.hi / golden.lo.
#[test]
fn the_ratio_interval_by_hand() {
    let new = stats(3.0, 1.5, 6.0);
    let golden = stats(2.0, 1.0, 4.0);
    assert_eq!(
        ratio_interval(&new, &golden),
        Some(RatioInterval {
            ratio: 1.5,
            lo: 0.375,
            hi: 6.0
        }),
        "3 / 2, 1.5 / 4, 6 / 1"
    );
    // A golden median with no interval at all, [0, inf] (three reps too noisy to say
    // anything): the ratio's interval is [0, inf], never new.hi / 0.
    let open = TimingStats {
        median: 2.0,
        rel_noise: f64::INFINITY,
        ..TimingStats::default()
    };
    assert_eq!(
        ratio_interval(&new, &open),
        Some(RatioInterval {
            ratio: 1.5,
            lo: 0.0,
            hi: f64::INFINITY
        })
    );
    // A median of 0 on either side (a timer that returned nothing) calls nothing.
    assert_eq!(ratio_interval(&new, &stats(0.0, 0.0, 0.0)), None);
    assert_eq!(ratio_interval(&stats(0.0, 0.0, 0.0), &golden), None);
}

/// Each verdict edge, with the interval ending exactly on it (tolerance 0.25: edges 0.75 and
/// 1.25, exact in binary). The golden median is 2 with the interval [2, 2], so the ratio's
/// interval is the new one halved.
#[test]
fn verdicts_exactly_on_the_tolerance_edges() {
    let golden = stats(2.0, 2.0, 2.0);
    let v = |lo: f64, hi: f64| verdict(&stats(lo, lo, hi), Some(&golden), 0.25);
    // [1.25, 5]: starts on 1 + t, touching the tolerance: not (wholly) above it.
    assert_eq!(v(2.5, 10.0), Verdict::Noisy, "ratio interval [1.25, 5]");
    // Just past it: SLOWER.
    assert_eq!(
        v(2.5f64.next_up(), 10.0),
        Verdict::Slower,
        "ratio interval (1.25, 5]"
    );
    // [0.25, 0.75]: ends on 1 - t: not (wholly) below it.
    assert_eq!(v(0.5, 1.5), Verdict::Noisy, "ratio interval [0.25, 0.75]");
    assert_eq!(
        v(0.5, 1.5f64.next_down()),
        Verdict::Faster,
        "ratio interval [0.25, 0.75)"
    );
    // [0.75, 1.25]: inside the tolerance, edges included: SAME.
    assert_eq!(v(1.5, 2.5), Verdict::Same, "ratio interval [0.75, 1.25]");
    assert_eq!(
        v(1.5f64.next_down(), 2.5),
        Verdict::Noisy,
        "ratio interval [0.75 - ulp, 1.25]"
    );
    assert_eq!(
        v(1.5, 2.5f64.next_up()),
        Verdict::Noisy,
        "ratio interval [0.75, 1.25 + ulp]"
    );
}

/// A passing record's metrics (microseconds) become the golden entry `--bless` writes
/// (seconds), under the key "case/variant/check".
#[test]
fn the_golden_entry_by_hand() {
    let metrics: BTreeMap<String, f64> = [
        ("median_us", 800.0),
        ("median_lo_us", 790.0),
        ("median_hi_us", 812.5),
        ("min_us", 780.0),
        ("max_us", 900.0),
        ("rel_noise", 0.01),
        ("reps", 20.0),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let g = golden_entry(&metrics);
    let close = |got: f64, want: f64| (got - want).abs() <= 1e-12 * want;
    for (what, got, want) in [
        ("median", g.median, 800e-6),
        ("median_lo", g.median_lo, 790e-6),
        ("median_hi", g.median_hi, 812.5e-6),
        ("min", g.min, 780e-6),
        ("max", g.max, 900e-6),
    ] {
        assert!(close(got, want), "{what}: {got:e} s, by hand {want:e} s");
    }
    assert_eq!((g.rel_noise, g.reps), (0.01, 20));
    assert_eq!(
        key("topk_decode_3q_40k", "wide", "-"),
        "topk_decode_3q_40k/wide/-"
    );
}
