//! Bench: median over repetitions after warm-up, with NVBench's kind of stopping rule (stop
//! once the median's relative standard error is below the target, or at the rep / time
//! cap), compared with the golden median using the target's tolerance and the run's own
//! noise. A suspected regression is measured again before it fails.
//!
//! Verdicts: SAME (within tolerance), FASTER, SLOWER (gating), NOISY (the run's own noise is
//! too large to tell), NEW (no golden median yet).

use super::stats::{timing_stats, TimingStats};
use super::{mark_error, Ctx};
use crate::backend::{BackendResult, Prepared};
use crate::cases;
use crate::matrix::{BenchGates, Case, FamilyName, Suite};
use crate::problem::{Problem, HEAD_DIM};
use crate::results::{Record, Status};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Golden medians of one target: key "case/variant/check" (see `key`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct BenchGolden {
    /// Where and when the medians were measured (free text: device, date, command).
    #[serde(default)]
    pub measured_on: String,
    #[serde(default)]
    pub entries: BTreeMap<String, TimingStats>,
}

pub fn key(case: &str, variant: &str, check: &str) -> String {
    format!("{case}/{variant}/{check}")
}

/// The verdict of one comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Same,
    Faster,
    Slower,
    Noisy,
    New,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Same => "SAME",
            Verdict::Faster => "FASTER",
            Verdict::Slower => "SLOWER",
            Verdict::Noisy => "NOISY",
            Verdict::New => "NEW",
        }
    }
}

/// Compare a measurement with the golden one. A change counts only beyond the target's
/// tolerance plus three times the two runs' combined noise; a run noisier than half the
/// tolerance cannot call a slowdown.
pub fn verdict(new: &TimingStats, golden: Option<&TimingStats>, tolerance: f64) -> Verdict {
    let Some(g) = golden else { return Verdict::New };
    // NaN and zero medians both fail `> 0`: such a run cannot call anything.
    let positive = |x: f64| x > 0.0;
    if !positive(g.median) || !positive(new.median) {
        return Verdict::Noisy;
    }
    let ratio = new.median / g.median;
    let noise = (new.rel_noise.powi(2) + g.rel_noise.powi(2)).sqrt();
    let band = tolerance + 3.0 * noise;
    if ratio < 1.0 - band {
        Verdict::Faster
    } else if ratio <= 1.0 + band {
        Verdict::Same
    } else if new.rel_noise > tolerance / 2.0 {
        Verdict::Noisy
    } else {
        Verdict::Slower
    }
}

/// Measure with the stopping rule: warm up, then batches of reps until the median's
/// relative standard error is below the target, or the rep or time cap is hit.
pub fn measure(p: &mut dyn Prepared, g: &BenchGates) -> BackendResult<TimingStats> {
    // The first warm-up run is timed to size the rest: a call of seconds (the prefill
    // attention's gather baseline) gets fewer warm-ups and reps, never fewer than 3 reps,
    // instead of blowing the time budget by an order of magnitude.
    let estimate = p.time(1)?.first().copied().unwrap_or(0.0);
    let affordable = if estimate > 0.0 {
        (g.max_seconds / estimate) as usize
    } else {
        usize::MAX
    };
    for _ in 1..g.warmup.min(affordable.max(1)) {
        p.run()?;
    }
    let min_reps = g.min_reps.min(affordable.max(3)).max(1);
    let start = std::time::Instant::now();
    let mut samples = Vec::new();
    let mut batch = min_reps;
    loop {
        samples.extend(p.time(batch)?);
        let t = timing_stats(&samples);
        let spent = start.elapsed().as_secs_f64();
        if samples.len() >= g.max_reps
            || (samples.len() >= min_reps && spent >= g.max_seconds)
            || (samples.len() >= min_reps && t.rel_noise <= g.target_rel_noise)
        {
            return Ok(t);
        }
        batch = (samples.len()).min(g.max_reps - samples.len()).max(1);
    }
}

/// Work per call, to report rates: (flop, bytes moved at least once).
fn work(problem: &Problem) -> (f64, f64) {
    match problem {
        Problem::Topk(p) => (0.0, (p.nq * p.n * 4) as f64),
        Problem::Scores(p) => {
            let flop = 2.0 * (p.nq * p.heads * p.blocks * HEAD_DIM) as f64;
            let bytes = ((p.nq * p.heads * HEAD_DIM
                + p.blocks * HEAD_DIM
                + p.nq * p.heads
                + p.nq * p.blocks)
                * 4) as f64;
            (flop, bytes)
        }
        Problem::AttnForward(p) | Problem::AttnBackward(p) => {
            let keys = (p.t * crate::problem::ATTN_BLOCK) as f64;
            let rows = (p.batch * p.q_len * p.hq) as f64;
            let flop = 4.0
                * rows
                * keys
                * HEAD_DIM as f64
                * if matches!(problem, Problem::AttnBackward(_)) {
                    2.5
                } else {
                    1.0
                };
            let bytes = (p.batch * p.q_len * p.hkv) as f64 * keys * HEAD_DIM as f64 * 2.0 * 2.0;
            (flop, bytes)
        }
    }
}

pub fn run(ctx: &Ctx, case: &Case) -> Vec<Record> {
    let mut out = Vec::new();
    let Some(dist) = cases::dists(case).into_iter().find(|d| ctx.filter.dist(d)) else {
        return out;
    };
    let family = case.family();
    let built: Result<Vec<(&'static str, Problem)>, String> = match family {
        FamilyName::Topk => {
            cases::topk_problem(ctx.matrix.seed, case, &dist).map(|p| vec![("-", Problem::Topk(p))])
        }
        FamilyName::Scores => cases::scores_problem(ctx.matrix.seed, case, &dist)
            .map(|p| vec![("-", Problem::Scores(p))]),
        FamilyName::Attention => cases::attn_problem(ctx.matrix.seed, case, &dist).map(|p| {
            vec![
                ("fwd", Problem::AttnForward(p.clone())),
                ("bwd", Problem::AttnBackward(p)),
            ]
        }),
    };
    let problems = match built {
        Ok(p) => p,
        Err(e) => {
            return vec![ctx.input_error(Suite::Bench, case, &dist, e)];
        }
    };
    for (check, problem) in &problems {
        for variant in case.variants.iter().filter(|v| ctx.filter.variant(v)) {
            let mut rec = ctx.record(Suite::Bench, case, &dist, variant, check);
            bench_one(ctx, family, variant, check, problem, &mut rec);
            out.push(rec);
        }
    }
    out
}

fn bench_one(
    ctx: &Ctx,
    family: FamilyName,
    variant: &str,
    check: &str,
    problem: &Problem,
    rec: &mut Record,
) {
    let Some(v) = ctx.matrix.variant(family, variant) else {
        rec.status = Status::Error;
        rec.message = format!("unknown variant `{variant}`");
        return;
    };
    let gates = ctx.target.bench_gates(ctx.matrix);
    let mut prepared = match ctx.backend.prepare(&v.switches(), problem) {
        Ok(p) => p,
        Err(e) => return mark_error(rec, &e),
    };
    rec.dispatched = Some(prepared.dispatched());
    let golden = ctx
        .bench_golden
        .entries
        .get(&key(&rec.case, variant, check));
    let tol = ctx.target.bench_tolerance;
    let mut t = match measure(prepared.as_mut(), gates) {
        Ok(t) => t,
        Err(e) => return mark_error(rec, &e),
    };
    let mut v = verdict(&t, golden, tol);
    let mut remeasured = 0;
    while v == Verdict::Slower && remeasured < gates.remeasure {
        remeasured += 1;
        match measure(prepared.as_mut(), gates) {
            // Keep the faster of the two medians: a slowdown must survive every retry.
            Ok(t2) if t2.median < t.median => t = t2,
            Ok(_) => {}
            Err(e) => return mark_error(rec, &e),
        }
        v = verdict(&t, golden, tol);
    }
    let (flop, bytes) = work(problem);
    rec.metrics.insert("median_us".into(), t.median * 1e6);
    rec.metrics.insert("min_us".into(), t.min * 1e6);
    rec.metrics.insert("max_us".into(), t.max * 1e6);
    rec.metrics.insert("rel_noise".into(), t.rel_noise);
    rec.metrics.insert("reps".into(), t.reps as f64);
    rec.metrics.insert("remeasured".into(), remeasured as f64);
    if flop > 0.0 {
        rec.metrics.insert("tflops".into(), flop / t.median / 1e12);
    }
    rec.metrics.insert("gbps".into(), bytes / t.median / 1e9);
    if let Some(g) = golden {
        rec.metrics
            .insert("golden_median_us".into(), g.median * 1e6);
        rec.metrics.insert("ratio".into(), t.median / g.median);
    }
    rec.message = format!(
        "{} median {:.2} us ({} reps, noise {:.1}%)",
        v.name(),
        t.median * 1e6,
        t.reps,
        t.rel_noise * 100.0
    );
    if let Some(g) = golden {
        rec.message.push_str(&format!(
            ", golden {:.2} us, ratio {:.3}, tolerance {:.0}%",
            g.median * 1e6,
            t.median / g.median,
            tol * 100.0
        ));
    }
    if v == Verdict::Slower {
        rec.status = Status::Fail;
        rec.message.push_str(&format!(
            " — still slower after {remeasured} re-measurements"
        ));
    }
    rec.metrics
        .insert(format!("verdict_{}", v.name().to_lowercase()), 1.0);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(median: f64, rel_noise: f64) -> TimingStats {
        TimingStats {
            median,
            min: median,
            max: median,
            rel_noise,
            reps: 50,
        }
    }

    #[test]
    fn verdicts() {
        let g = t(100.0, 0.002);
        assert_eq!(verdict(&t(101.0, 0.002), Some(&g), 0.05), Verdict::Same);
        assert_eq!(verdict(&t(80.0, 0.002), Some(&g), 0.05), Verdict::Faster);
        assert_eq!(verdict(&t(120.0, 0.002), Some(&g), 0.05), Verdict::Slower);
        assert_eq!(verdict(&t(120.0, 0.04), Some(&g), 0.05), Verdict::Noisy);
        // Noise widens the band: 8% slower with 2% noise on each side is not a regression.
        assert_eq!(
            verdict(&t(108.0, 0.02), Some(&t(100.0, 0.02)), 0.05),
            Verdict::Same
        );
        assert_eq!(verdict(&t(100.0, 0.0), None, 0.05), Verdict::New);
    }

    struct Fake {
        times: Vec<f64>,
        runs: usize,
    }
    impl Prepared for Fake {
        fn dispatched(&self) -> String {
            "fake".into()
        }
        fn run(&mut self) -> BackendResult<()> {
            self.runs += 1;
            Ok(())
        }
        fn time(&mut self, reps: usize) -> BackendResult<Vec<f64>> {
            Ok((0..reps)
                .map(|i| self.times[i % self.times.len()])
                .collect())
        }
        fn output(&mut self) -> BackendResult<crate::problem::Output> {
            unreachable!("bench never reads outputs")
        }
    }

    #[test]
    fn stopping_rule_stops_early_when_quiet_and_at_the_cap_when_noisy() {
        let g = BenchGates {
            warmup: 2,
            min_reps: 10,
            max_reps: 200,
            max_seconds: 10.0,
            target_rel_noise: 0.005,
            remeasure: 1,
        };
        let mut quiet = Fake {
            times: vec![1.0, 1.001, 0.999],
            runs: 0,
        };
        let s = measure(&mut quiet, &g).unwrap();
        assert_eq!(quiet.runs, 1, "the timed warm-up and one plain run");
        assert_eq!(s.reps, 10);
        // A call of 4 s with a 10 s budget: 2 warm-ups (the timed one and one run) and 3
        // reps, the floor; a call of 20 s: the timed warm-up only.
        let mut slow = Fake {
            times: vec![4.0],
            runs: 0,
        };
        assert_eq!(measure(&mut slow, &g).unwrap().reps, 3);
        assert_eq!(slow.runs, 1);
        let mut slower = Fake {
            times: vec![20.0],
            runs: 0,
        };
        assert_eq!(measure(&mut slower, &g).unwrap().reps, 3);
        assert_eq!(slower.runs, 0);
        let mut noisy = Fake {
            times: vec![1.0, 3.0, 0.5, 2.0],
            runs: 0,
        };
        assert_eq!(measure(&mut noisy, &g).unwrap().reps, 200);
    }
}
