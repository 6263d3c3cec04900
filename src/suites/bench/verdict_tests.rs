//! The ratio interval and the verdict's edges with hand numbers (cargo mutants 2026-12-01:
//! the verdict tests are statistical, over synthetic runs, and never sat exactly on an
//! edge; the ratio's arithmetic was pinned only through them).

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
