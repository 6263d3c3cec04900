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

/// Median, min, max and the relative standard error of the median of timings (seconds).
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct TimingStats {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// Standard error of the median relative to it (1.2533 * sd / sqrt(n) / median).
    pub rel_noise: f64,
    pub reps: usize,
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
    TimingStats {
        median,
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
    }
}
