//! Bench: median over repetitions after warm-up, with NVBench's kind of stopping rule (stop
//! once the median's relative standard error is below the target, or at the rep / time
//! cap), compared with the golden median through a confidence interval of their ratio.
//!
//! The interval: each median gets a distribution-free 97.5% interval from its order
//! statistics (`stats::median_interval`: no normality assumed, one preempted rep moves it by
//! one rank); the ratio's interval runs from new.lo / golden.hi to new.hi / golden.lo and
//! covers the true ratio with probability >= 95%. No random numbers: the same samples give
//! the same verdict on every machine.
//!
//! Verdicts, with `t` the target's tolerance: SLOWER (gating) when the whole interval lies
//! above 1 + t, however noisy the run (a 6.5x slowdown with 17% noise is a slowdown); FASTER
//! when it lies below 1 - t; SAME when it lies inside [1 - t, 1 + t]; NOISY only when it
//! straddles one of those edges; NEW with no golden median. A SLOWER verdict is measured
//! again (`remeasure`) and stands only if every measurement says SLOWER.

use super::stats::{timing_stats, TimingStats};
use super::{mark_error, Ctx};
use crate::backend::{BackendResult, Prepared};
use crate::cases;
use crate::matrix::{BenchGates, Case, FamilyName, Suite};
use crate::problem::{Problem, HEAD_DIM};
use crate::results::{Record, Status};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Golden medians of one target: key "case/variant/check" (see `key`). Each entry carries its
/// median's interval (`median_lo`, `median_hi`); entries written before those fields existed
/// (golden/sm_90/bench.yaml of 2026-11-30) get one from their `rel_noise`
/// (`TimingStats::interval`).
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

/// The golden entry a passing bench record proposes (its metrics, in microseconds, back to
/// seconds): what `cargo xtask matrix --bless` writes to bench.yaml.
pub fn golden_entry(metrics: &BTreeMap<String, f64>) -> TimingStats {
    let get = |k: &str| metrics.get(k).copied().unwrap_or(0.0);
    TimingStats {
        median: get("median_us") * 1e-6,
        median_lo: get("median_lo_us") * 1e-6,
        median_hi: get("median_hi_us") * 1e-6,
        min: get("min_us") * 1e-6,
        max: get("max_us") * 1e-6,
        rel_noise: get("rel_noise"),
        reps: get("reps") as usize,
    }
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

/// new / golden: the ratio of the medians and its >= 95% interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RatioInterval {
    pub ratio: f64,
    pub lo: f64,
    pub hi: f64,
}

/// The ratio of the medians with its interval; None when a median is not positive (NaN and
/// zero both fail `> 0`), since such a run cannot call anything.
pub fn ratio_interval(new: &TimingStats, golden: &TimingStats) -> Option<RatioInterval> {
    if !(new.median > 0.0 && golden.median > 0.0) {
        return None;
    }
    let (n_lo, n_hi) = new.interval();
    let (g_lo, g_hi) = golden.interval();
    Some(RatioInterval {
        ratio: new.median / golden.median,
        lo: n_lo / g_hi,
        hi: if g_lo > 0.0 {
            n_hi / g_lo
        } else {
            f64::INFINITY
        },
    })
}

/// Compare a measurement with the golden one (see the module doc for the rules).
pub fn verdict(new: &TimingStats, golden: Option<&TimingStats>, tolerance: f64) -> Verdict {
    let Some(g) = golden else { return Verdict::New };
    let Some(r) = ratio_interval(new, g) else {
        return Verdict::Noisy;
    };
    // Written so that a NaN bound falls through to NOISY.
    if r.lo > 1.0 + tolerance {
        Verdict::Slower
    } else if r.hi < 1.0 - tolerance {
        Verdict::Faster
    } else if r.lo >= 1.0 - tolerance && r.hi <= 1.0 + tolerance {
        Verdict::Same
    } else {
        Verdict::Noisy
    }
}

#[cfg(test)]
mod verdict_tests;

#[cfg(test)]
mod record_tests;

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

/// Measure and compare with the golden entry; a SLOWER verdict is measured again up to
/// `gates.remeasure` times, each re-measurement judged on its own samples, and the one most
/// favourable to the kernel (lowest interval start) kept: a slowdown must survive every
/// retry. Returns the kept measurement, its verdict and the number of re-measurements.
pub fn judge(
    p: &mut dyn Prepared,
    gates: &BenchGates,
    golden: Option<&TimingStats>,
    tol: f64,
) -> BackendResult<(TimingStats, Verdict, usize)> {
    let lo = |t: &TimingStats| {
        golden
            .and_then(|g| ratio_interval(t, g))
            .map_or(f64::NEG_INFINITY, |r| r.lo)
    };
    let mut t = measure(p, gates)?;
    let mut v = verdict(&t, golden, tol);
    let mut remeasured = 0;
    while v == Verdict::Slower && remeasured < gates.remeasure {
        remeasured += 1;
        let t2 = measure(p, gates)?;
        if lo(&t2) < lo(&t) {
            t = t2;
        }
        v = verdict(&t, golden, tol);
    }
    Ok((t, v, remeasured))
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
    let (t, v, remeasured) = match judge(prepared.as_mut(), gates, golden, tol) {
        Ok(x) => x,
        Err(e) => return mark_error(rec, &e),
    };
    let (flop, bytes) = work(problem);
    rec.metrics.insert("median_us".into(), t.median * 1e6);
    rec.metrics.insert("median_lo_us".into(), t.median_lo * 1e6);
    rec.metrics.insert("median_hi_us".into(), t.median_hi * 1e6);
    rec.metrics.insert("min_us".into(), t.min * 1e6);
    rec.metrics.insert("max_us".into(), t.max * 1e6);
    rec.metrics.insert("rel_noise".into(), t.rel_noise);
    rec.metrics.insert("reps".into(), t.reps as f64);
    rec.metrics.insert("remeasured".into(), remeasured as f64);
    if flop > 0.0 {
        rec.metrics.insert("tflops".into(), flop / t.median / 1e12);
    }
    rec.metrics.insert("gbps".into(), bytes / t.median / 1e9);
    rec.message = format!(
        "{} median {:.2} us, interval [{:.2}, {:.2}] ({} reps, noise {:.1}%)",
        v.name(),
        t.median * 1e6,
        t.median_lo * 1e6,
        t.median_hi * 1e6,
        t.reps,
        t.rel_noise * 100.0
    );
    if let Some(g) = golden {
        let (g_lo, g_hi) = g.interval();
        rec.metrics
            .insert("golden_median_us".into(), g.median * 1e6);
        rec.message.push_str(&format!(
            ", golden {:.2} us [{:.2}, {:.2}]",
            g.median * 1e6,
            g_lo * 1e6,
            g_hi * 1e6
        ));
        if let Some(r) = ratio_interval(&t, g) {
            rec.metrics.insert("ratio".into(), r.ratio);
            rec.metrics.insert("ratio_lo".into(), r.lo);
            rec.metrics.insert("ratio_hi".into(), r.hi);
            rec.message.push_str(&format!(
                ", ratio {:.3} (95% interval [{:.3}, {:.3}]), tolerance {:.0}%",
                r.ratio,
                r.lo,
                r.hi,
                tol * 100.0
            ));
        }
    }
    if v == Verdict::Slower {
        rec.status = Status::Fail;
        rec.message.push_str(&format!(
            ": the whole interval lies above 1 + tolerance, still after {remeasured} re-measurements"
        ));
    }
    rec.metrics
        .insert(format!("verdict_{}", v.name().to_lowercase()), 1.0);
}

#[cfg(test)]
#[path = "bench_tests.rs"]
mod tests;
