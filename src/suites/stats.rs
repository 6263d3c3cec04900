//! Error statistics against FP64, and timing statistics.

/// RMSE and max absolute error of `got` against `want`, over the indices `idx` (all when
/// None). A NaN in `got` where `want` is finite counts as an infinite error.
#[derive(Clone, Copy, Debug, Default)]
pub struct ErrorStats {
    pub rmse: f64,
    pub max_abs: f64,
    /// Largest |want| over the compared elements (the scale for relative gates).
    pub scale: f64,
    pub count: usize,
}

impl ErrorStats {
    pub fn rel_max(&self) -> f64 {
        if self.scale > 0.0 {
            self.max_abs / self.scale
        } else {
            self.max_abs
        }
    }
    pub fn rel_rmse(&self) -> f64 {
        if self.scale > 0.0 {
            self.rmse / self.scale
        } else {
            self.rmse
        }
    }
}

pub fn error_stats(got: &[f32], want: &[f64], idx: Option<&[usize]>) -> ErrorStats {
    let mut sum2 = 0.0;
    let mut max_abs = 0.0f64;
    let mut scale = 0.0f64;
    let mut count = 0usize;
    let mut visit = |i: usize| {
        let (g, w) = (got[i] as f64, want[i]);
        if w.is_finite() {
            scale = scale.max(w.abs());
        }
        let e = if g == w {
            0.0 // also equal infinities (lse = -inf)
        } else if g.is_nan() || w.is_nan() || g.is_infinite() || w.is_infinite() {
            f64::INFINITY
        } else {
            (g - w).abs()
        };
        sum2 += e * e;
        max_abs = max_abs.max(e);
        count += 1;
    };
    match idx {
        Some(ix) => ix.iter().for_each(|&i| visit(i)),
        None => (0..got.len().min(want.len())).for_each(&mut visit),
    }
    let rmse = if count > 0 {
        (sum2 / count as f64).sqrt()
    } else {
        0.0
    };
    ErrorStats {
        rmse,
        max_abs,
        scale,
        count,
    }
}

/// Median, min, max and the relative standard error of the median of timings (seconds), and
/// a distribution-free confidence interval of the median (`median_interval`).
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct TimingStats {
    pub median: f64,
    /// The median's interval at `MEDIAN_CONFIDENCE` (seconds). Golden files written before
    /// these fields existed lack them (read as 0): `interval` then derives one from
    /// `rel_noise`.
    #[serde(default)]
    pub median_lo: f64,
    #[serde(default)]
    pub median_hi: f64,
    pub min: f64,
    pub max: f64,
    /// Standard error of the median relative to it (1.2533 * sd / sqrt(n) / median).
    pub rel_noise: f64,
    pub reps: usize,
}

/// Two-sided confidence of each median's interval. The ratio of two medians gets the
/// interval whose ends are the ratios of the two intervals' opposite ends: it covers the true
/// ratio whenever both intervals cover their medians, so with probability at least
/// 1 - 2 x 2.5% = 95% (Bonferroni), whatever the distributions.
pub const MEDIAN_CONFIDENCE: f64 = 0.975;

/// The two-sided standard normal quantile of `MEDIAN_CONFIDENCE` (z at 0.9875).
const Z_MEDIAN: f64 = 2.2414;

/// Student's t at 0.9875 for 1 ..= 5 degrees of freedom (samples of 2 ..= 6, too few for
/// `median_interval`); computed by bisection on the t distribution's cdf (Simpson's rule):
/// df 1 is exact, tan(pi x 0.49375) = 50.92.
const T_MEDIAN: [f64; 5] = [50.92, 8.860, 5.392, 4.315, 3.810];

impl TimingStats {
    /// The median's confidence interval: the stored one, or for golden entries written
    /// before intervals were stored, median x (1 -/+ z x rel_noise) (a normal
    /// approximation from the standard error they carry).
    pub fn interval(&self) -> (f64, f64) {
        if self.median_lo > 0.0 && self.median_hi >= self.median_lo {
            return (self.median_lo, self.median_hi);
        }
        let half = Z_MEDIAN * self.rel_noise;
        if half.is_finite() && half < 1.0 {
            (self.median * (1.0 - half), self.median * (1.0 + half))
        } else {
            (0.0, f64::INFINITY)
        }
    }
}

/// Distribution-free confidence interval of the median of `sorted` (ascending): the order
/// statistics `[x_(l), x_(n+1-l)]` (1-based) with `l` the largest rank such that
/// `P(Binomial(n, 1/2) < l) <= (1 - confidence) / 2`. The count of samples below the true
/// median is Binomial(n, 1/2) for any continuous distribution, so the coverage needs no
/// normality, and outliers (a preempted rep on a shared CPU) move it by one rank at most.
/// None with too few samples for that confidence (fewer than 7 at 97.5%: even `[min, max]`
/// covers only 1 - 2^(1-n)).
pub fn median_interval(sorted: &[f64], confidence: f64) -> Option<(f64, f64)> {
    let n = sorted.len();
    let tail = (1.0 - confidence) / 2.0;
    // Binomial(n, 1/2) cdf in log space (n may reach thousands: 0.5^n underflows).
    let ln_half_n = n as f64 * std::f64::consts::LN_2;
    let (mut ln_choose, mut cdf, mut l) = (0.0f64, 0.0f64, 0usize);
    for i in 0..n / 2 {
        if i > 0 {
            ln_choose += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        cdf += (ln_choose - ln_half_n).exp();
        if cdf > tail {
            break;
        }
        l = i + 1;
    }
    (l > 0).then(|| (sorted[l - 1], sorted[n - l]))
}

pub fn timing_stats(samples: &[f64]) -> TimingStats {
    if samples.is_empty() {
        return TimingStats::default();
    }
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    let median = if n % 2 == 1 {
        s[n / 2]
    } else {
        0.5 * (s[n / 2 - 1] + s[n / 2])
    };
    let mean = s.iter().sum::<f64>() / n as f64;
    let var = if n > 1 {
        s.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64
    } else {
        0.0
    };
    let rel_noise = if median > 0.0 && n > 1 {
        1.2533 * var.sqrt() / (n as f64).sqrt() / median
    } else {
        f64::INFINITY
    };
    // Too few samples for the order statistics (a call of seconds gets 3 reps): the wider
    // of [min, max] and median -/+ t x standard error, with Student's t for n - 1 degrees
    // of freedom (the standard error of 3 reps is itself a guess): three quiet reps can
    // still tell 3x from 1x, three noisy ones cannot tell anything.
    let (median_lo, median_hi) = median_interval(&s, MEDIAN_CONFIDENCE).unwrap_or_else(|| {
        let half = T_MEDIAN
            .get(n.wrapping_sub(2))
            .copied()
            .unwrap_or(f64::INFINITY)
            * rel_noise;
        if half.is_finite() && half < 1.0 {
            (
                s[0].min(median * (1.0 - half)),
                s[n - 1].max(median * (1.0 + half)),
            )
        } else {
            (0.0, f64::INFINITY)
        }
    });
    TimingStats {
        median,
        median_lo,
        median_hi,
        min: s[0],
        max: s[n - 1],
        rel_noise,
        reps: n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_stats_by_hand() {
        let e = error_stats(&[1.0, 2.0, 4.0], &[1.0, 2.5, 3.0], None);
        assert!((e.max_abs - 1.0).abs() < 1e-12);
        assert!((e.rmse - ((0.25f64 + 1.0) / 3.0).sqrt()).abs() < 1e-12);
        assert_eq!(e.scale, 3.0);
        let inf = error_stats(
            &[f32::NEG_INFINITY, f32::NAN],
            &[f64::NEG_INFINITY, 1.0],
            None,
        );
        assert!(inf.max_abs.is_infinite());
        let ok = error_stats(&[f32::NEG_INFINITY], &[f64::NEG_INFINITY], None);
        assert_eq!(ok.max_abs, 0.0);
        let sub = error_stats(&[9.0, 1.0], &[0.0, 1.0], Some(&[1]));
        assert_eq!(sub.max_abs, 0.0);
    }

    #[test]
    fn timing_stats_by_hand() {
        let t = timing_stats(&[3.0, 1.0, 2.0, 10.0]);
        assert_eq!(t.median, 2.5);
        assert_eq!((t.min, t.max, t.reps), (1.0, 10.0, 4));
        assert!(timing_stats(&[1.0]).rel_noise.is_infinite());
        // 4 samples: no order statistic reaches 97.5%: the wider of [min, max] and median
        // -/+ t(3) x standard error, here 2.5 -/+ 5.392 x 1.2533 x 4.08 / 2: no bound at all.
        assert_eq!((t.median_lo, t.median_hi), (0.0, f64::INFINITY));
        // Three quiet reps: sd 0.01, standard error 0.00724, half-width 8.86 x 0.724% = 6.4%.
        let q = timing_stats(&[1.0, 1.01, 0.99]);
        assert!((q.median_lo - 0.93584).abs() < 1e-4, "{q:?}");
        assert!((q.median_hi - 1.06416).abs() < 1e-4, "{q:?}");
        assert_eq!(timing_stats(&[1.0]).median_hi, f64::INFINITY);
    }

    #[test]
    fn median_interval_ranks_from_the_binomial() {
        let xs: Vec<f64> = (1..=200).map(f64::from).collect();
        // n = 7 is the first with P(Bin(7, 1/2) = 0) = 1/128 <= 1.25%: [x1, x7].
        assert_eq!(median_interval(&xs[..7], 0.975), Some((1.0, 7.0)));
        assert_eq!(median_interval(&xs[..6], 0.975), None, "1/64 > 1.25%");
        // n = 20: P(Bin <= 4) = 0.59% <= 1.25% < P(Bin <= 5) = 2.07%: l = 5, [x5, x16].
        assert_eq!(median_interval(&xs[..20], 0.975), Some((5.0, 16.0)));
        // n = 200: l = 84 (Python: the first i with sum(comb(200, j) for j <= i) / 2^200 >
        // 0.0125 is 84), symmetric about the median.
        assert_eq!(median_interval(&xs, 0.975), Some((84.0, 117.0)));
        assert_eq!(median_interval(&[], 0.975), None);
    }

    #[test]
    fn old_golden_entries_get_an_interval_from_their_noise() {
        let old = TimingStats {
            median: 100.0,
            rel_noise: 0.01,
            ..TimingStats::default()
        };
        let (lo, hi) = old.interval();
        assert!((lo - 97.7586).abs() < 1e-9 && (hi - 102.2414).abs() < 1e-9);
        let hopeless = TimingStats {
            median: 100.0,
            rel_noise: f64::INFINITY,
            ..TimingStats::default()
        };
        assert_eq!(hopeless.interval(), (0.0, f64::INFINITY));
    }

    /// rel_rmse and rel_max are relative to the scale (the largest |reference|) when there is
    /// one, absolute when the reference is all zeros (cargo mutants: rel_rmse is in every
    /// error snapshot and message, yet no test pinned its value).
    #[test]
    fn relative_errors_by_hand() {
        let e = ErrorStats {
            rmse: 3.0,
            max_abs: 6.0,
            scale: 4.0,
            count: 2,
        };
        assert_eq!((e.rel_rmse(), e.rel_max()), (0.75, 1.5), "3 / 4 and 6 / 4");
        let zero_scale = ErrorStats { scale: 0.0, ..e };
        assert_eq!(
            (zero_scale.rel_rmse(), zero_scale.rel_max()),
            (3.0, 6.0),
            "an all-zero reference: the errors stay absolute (never x / 0)"
        );
    }

    /// Edges of `error_stats`: nothing compared is no error (not 0 / 0); a NaN reference is an
    /// infinite error wherever the kernel gave a number (never a NaN that `max` would drop).
    #[test]
    fn error_stats_edges() {
        let none = error_stats(&[], &[], None);
        assert_eq!((none.rmse, none.max_abs, none.count), (0.0, 0.0, 0));
        let nan_ref = error_stats(&[1.0, 2.0], &[f64::NAN, 2.0], None);
        assert_eq!(nan_ref.max_abs, f64::INFINITY, "{nan_ref:?}");
    }

    /// At confidence 1 - 2^-8 and 9 samples, [x1, x9] misses the median with probability
    /// 2 x 2^-9 = 2^-8 exactly: the tail equals the cdf, and the definition (`<=`) keeps
    /// rank 1. The cdf of 0 successes, exp(-9 ln 2), is exactly 2^-9 in f64.
    #[test]
    fn median_interval_at_the_exact_tail() {
        let xs: Vec<f64> = (1..=9).map(f64::from).collect();
        assert_eq!(
            median_interval(&xs, 1.0 - 2f64.powi(-8)),
            Some((1.0, 9.0)),
            "P(Bin(9, 1/2) < 1) = 2^-9 equals the tail (1 - confidence) / 2: rank 1 is kept"
        );
        // Just below that confidence the tail is larger still; just above, nothing covers.
        assert_eq!(median_interval(&xs, 0.99), Some((1.0, 9.0)));
        assert_eq!(median_interval(&xs, 0.999), None);
    }

    /// A half-width of exactly the median is no bound (a lower end of 0 says nothing), for an
    /// old golden entry (z x rel_noise = 1 exactly at rel_noise 0.446149727848666) and for
    /// three reps (t(2) x rel_noise = 1 exactly for these samples: found by search, the
    /// premise asserted below).
    #[test]
    fn a_half_width_of_the_whole_median_is_no_interval() {
        let r = 0.446149727848666;
        assert_eq!(Z_MEDIAN * r, 1.0, "premise");
        let old = TimingStats {
            median: 100.0,
            rel_noise: r,
            ..TimingStats::default()
        };
        assert_eq!(
            old.interval(),
            (0.0, f64::INFINITY),
            "z x rel_noise = 1: a lower end of 0 is no interval"
        );
        // Far past it (z x 1 = 2.24): no interval either, never a negative lower end.
        let wide = TimingStats {
            rel_noise: 1.0,
            ..old
        };
        assert_eq!(
            wide.interval(),
            (0.0, f64::INFINITY),
            "z x rel_noise = 2.24: no interval, never a negative lower end"
        );

        let t = timing_stats(&[4.979711749274793, 5.9, 6.820288250725208]);
        assert_eq!(T_MEDIAN[1] * t.rel_noise, 1.0, "premise: {t:?}");
        assert_eq!((t.median_lo, t.median_hi), (0.0, f64::INFINITY), "{t:?}");
    }

    /// All-zero timings (a timer that returned nothing): no noise estimate, not 0 / 0.
    #[test]
    fn zero_timings_have_infinite_noise() {
        let t = timing_stats(&[0.0, 0.0, 0.0]);
        assert_eq!(t.rel_noise, f64::INFINITY, "{t:?}");
        assert_eq!((t.median_lo, t.median_hi), (0.0, f64::INFINITY));
    }
}
