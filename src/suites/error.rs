//! Error: RMSE and max error of every variant against FP64, gated per family and precision
//! (matrix.yaml `gates.error_limits`, where each figure's measurement is written) at
//! `min(limit, max(error_ratio x reference, floor))`: within `error_ratio` of the family
//! baseline's error on the same inputs (or, for tf32 / bf16 scorers, of FP64's own error on
//! inputs rounded to that format), never above the precision's `limit`, which binds the
//! baseline too. Scores must also stay inside the rigorous per-element error bound of their
//! precision.

use super::parity::{input_format, round_bf16, round_tf32, Bounds, InputFormat};
use super::stats::{error_stats, ErrorStats};
use super::{decade, mark_error, problems, run_once, Ctx};
use crate::cases;
use crate::dispatch::Feature;
use crate::dump::{Array, Role};
use crate::matrix::{Case, ErrorLimit, FamilyName, Precision, Suite, Target};
use crate::problem::{AttnProblem, Output, Problem, HEAD_DIM};
use crate::reference;
use crate::results::{Record, Status};

pub fn run(ctx: &Ctx, case: &Case) -> Vec<Record> {
    match case.family() {
        FamilyName::Scores => scores(ctx, case),
        FamilyName::Attention => attention(ctx, case),
        FamilyName::Topk => Vec::new(),
    }
}

/// The arithmetic `kernel` is judged by on `target`: scorers by their input format;
/// attention is `mma` for the staged kernel where it is built with mma.sync (NVIDIA sm_80+,
/// the targets with bf16 tensor cores: kernels/selection_attention.cu), `f32_staged` for the
/// staged kernel's FP32 tiles elsewhere (its own measured class: matrix.yaml), f32 otherwise.
pub fn precision(family: FamilyName, kernel: &str, target: &Target) -> Precision {
    match family {
        FamilyName::Scores => match input_format(kernel) {
            InputFormat::F32 => Precision::F32,
            InputFormat::Tf32 => Precision::Tf32,
            InputFormat::Bf16 => Precision::Bf16,
        },
        FamilyName::Attention
            if kernel.starts_with("staged") && target.features.contains(&Feature::Bf16Tc) =>
        {
            Precision::Mma
        }
        FamilyName::Attention if kernel.starts_with("staged") => Precision::F32Staged,
        _ => Precision::F32,
    }
}

fn precision_name(p: Precision) -> &'static str {
    match p {
        Precision::F32 => "f32",
        Precision::Tf32 => "tf32",
        Precision::Bf16 => "bf16",
        Precision::Mma => "mma",
        Precision::F32Staged => "f32_staged",
    }
}

/// The floor and limit of (family, precision), or the configuration error that names the
/// missing or inconsistent entry of matrix.yaml.
fn limits(ctx: &Ctx, family: FamilyName, p: Precision) -> Result<ErrorLimit, String> {
    let at = format!(
        "{}: gates.error_limits.{}.{}",
        ctx.matrix.path.display(),
        family.name(),
        precision_name(p)
    );
    match ctx
        .matrix
        .gates
        .error_limits
        .get(&family)
        .and_then(|m| m.get(&p))
    {
        Some(l) if l.floor >= 0.0 && l.limit >= l.floor => Ok(*l),
        Some(l) => Err(format!(
            "{at}: need 0 <= floor <= limit (floor {:e}, limit {:e})",
            l.floor, l.limit
        )),
        None => Err(format!(
            "{at} is missing: add {{floor, limit}} measured for {} kernels of this precision",
            family.name()
        )),
    }
}

/// One output tensor's errors for every variant, gated against the baseline's.
struct Measured {
    variant: String,
    kernel: String,
    stats: ErrorStats,
    /// The kernel's scores, kept only for `--dump` (gating ends after every variant ran).
    scores: Option<Vec<f32>>,
}

/// Gate `m`, the error of a `kernel` of `family`, against the reference error: writes
/// status, message, metrics and snapshot.
fn gate(
    ctx: &Ctx,
    rec: &mut Record,
    family: FamilyName,
    kernel: &str,
    m: &ErrorStats,
    base: Option<&ErrorStats>,
) {
    let p = precision(family, kernel, ctx.target);
    let lim = match limits(ctx, family, p) {
        Ok(l) => l,
        Err(e) => {
            rec.status = Status::Error;
            rec.message = e;
            return;
        }
    };
    let ratio = ctx.matrix.gates.error_ratio;
    let base_rel = base.map(|b| b.rel_max());
    let relative = base_rel.map_or(lim.floor, |b| (ratio * b).max(lim.floor));
    let gate = relative.min(lim.limit);
    rec.metrics.insert("rmse".into(), m.rmse);
    rec.metrics.insert("max_abs".into(), m.max_abs);
    rec.metrics.insert("rel_max".into(), m.rel_max());
    rec.metrics.insert("limit".into(), gate);
    if let Some(b) = base_rel {
        rec.metrics.insert("baseline_rel_max".into(), b);
    }
    rec.snapshot = Some(format!(
        "rel_max {} rel_rmse {}",
        decade(m.rel_max()),
        decade(m.rel_rmse())
    ));
    let e = m.rel_max();
    let prec = format!("{} {}", family.name(), precision_name(p));
    if e.is_nan() || e > lim.limit {
        rec.status = Status::Fail;
        rec.message = format!(
            "relative max error {e:.3e} exceeds the {prec} limit {:.1e} (about 4x the largest error ever measured at this precision; matrix.yaml gates.error_limits); RMSE {:.3e} over {} values",
            lim.limit, m.rmse, m.count
        );
    } else if e > gate {
        rec.status = Status::Fail;
        rec.message = match base_rel {
            Some(b) => format!(
                "relative max error {e:.3e} exceeds the gate {gate:.3e} (= max({ratio} x baseline {b:.3e}, {prec} floor {:.1e})); RMSE {:.3e} over {} values",
                lim.floor, m.rmse, m.count
            ),
            None => format!(
                "relative max error {e:.3e} exceeds the {prec} floor {:.1e} (no baseline result to compare with)",
                lim.floor
            ),
        };
    }
}

/// The baseline variant first (its error gates the others), then the case's variants.
fn variants_with_baseline(
    ctx: &Ctx,
    case: &Case,
    family: FamilyName,
) -> (Option<String>, Vec<String>) {
    let base = ctx.matrix.baselines.get(&family).cloned();
    let mut list: Vec<String> = base.iter().cloned().collect();
    for v in &case.variants {
        if !list.contains(v) && ctx.filter.variant(v) {
            list.push(v.clone());
        }
    }
    (base, list)
}

fn scores(ctx: &Ctx, case: &Case) -> Vec<Record> {
    let mut out = Vec::new();
    let (base_name, variants) = variants_with_baseline(ctx, case, FamilyName::Scores);
    for item in problems(ctx, Suite::Error, case, cases::scores_problem) {
        let (dist, p) = match item {
            Ok(x) => x,
            Err(rec) => {
                out.push(*rec);
                continue;
            }
        };
        let s64 = reference::scores::scores_f64(&p);
        // What each input format allows: FP64 on inputs rounded to TF32 / BF16. A
        // tensor-core kernel is gated at ratio x this, not at ratio x the f32 warp kernel's
        // error, which no 10- or 8-bit mantissa can reach.
        let ideal = |p: &crate::problem::ScoresProblem, fmt: InputFormat| -> Option<ErrorStats> {
            let round: fn(f32) -> f32 = match fmt {
                InputFormat::F32 => return None,
                InputFormat::Tf32 => round_tf32,
                InputFormat::Bf16 => round_bf16,
            };
            let rp = crate::problem::ScoresProblem {
                q: p.q.iter().map(|x| round(*x)).collect(),
                kb: p.kb.iter().map(|x| round(*x)).collect(),
                ..p.clone()
            };
            let r64: Vec<f32> = reference::scores::scores_f64(&rp)
                .iter()
                .map(|x| *x as f32)
                .collect();
            Some(error_stats(&r64, &s64, None))
        };
        let mut ideals: Vec<(InputFormat, Option<ErrorStats>)> = Vec::new();
        let problem = Problem::Scores(p);
        let mut bounds = Bounds::default();
        let mut measured: Vec<Measured> = Vec::new();
        let mut recs = Vec::new();
        for variant in &variants {
            let mut rec = ctx.record(Suite::Error, case, &dist, variant, "scores");
            match run_once(ctx, FamilyName::Scores, variant, &problem) {
                Ok((kernel, Output::Scores(s))) => {
                    let Problem::Scores(p) = &problem else {
                        unreachable!("built above")
                    };
                    let stats = error_stats(&s, &s64, None);
                    // The rigorous bound of the kernel's precision: no element may exceed it.
                    let over = over_bound(&s, &s64, bounds.for_kernel(p, &kernel));
                    rec.metrics.insert("over_bound".into(), over as f64);
                    if over > 0 {
                        rec.status = Status::Fail;
                        rec.message = format!("{over} scores exceed the rigorous error bound of a {kernel} kernel: the arithmetic is wrong, not just reordered");
                    }
                    rec.dispatched = Some(kernel.clone());
                    measured.push(Measured {
                        variant: variant.clone(),
                        kernel,
                        stats,
                        scores: ctx.dump.is_some().then_some(s),
                    });
                }
                Ok((_, other)) => {
                    rec.status = Status::Error;
                    rec.message =
                        format!("backend returned {other:?}-shaped output for a scores problem");
                }
                Err(e) => mark_error(&mut rec, &e),
            }
            recs.push(rec);
        }
        let base = base_name
            .as_ref()
            .and_then(|b| measured.iter().find(|m| &m.variant == b))
            .map(|m| m.stats);
        for rec in &mut recs {
            if let Some(m) = measured.iter().find(|m| m.variant == rec.variant) {
                let failed_bound = rec.status == Status::Fail;
                let msg = std::mem::take(&mut rec.message);
                let fmt = input_format(&m.kernel);
                if !ideals.iter().any(|(f, _)| *f == fmt) {
                    let Problem::Scores(sp) = &problem else {
                        unreachable!("built above")
                    };
                    ideals.push((fmt, ideal(sp, fmt)));
                }
                let ideal_stats = ideals.iter().find(|(f, _)| *f == fmt).and_then(|(_, s)| *s);
                // The reference error of this kernel's precision: the baseline's, or the
                // rounding of its inputs, whichever is larger.
                let reference_err = match (base, ideal_stats) {
                    (Some(b), Some(i)) if i.rel_max() > b.rel_max() => Some(i),
                    (b, None) => b,
                    (None, i) => i,
                    (b, _) => b,
                };
                if let Some(i) = ideal_stats {
                    rec.metrics.insert("ideal_rel_max".into(), i.rel_max());
                }
                gate(
                    ctx,
                    rec,
                    FamilyName::Scores,
                    &m.kernel,
                    &m.stats,
                    reference_err.as_ref(),
                );
                if failed_bound {
                    rec.status = Status::Fail;
                    rec.message = if rec.message.is_empty() {
                        msg
                    } else {
                        format!("{msg}; {}", rec.message)
                    };
                }
                if let (Some(got), Problem::Scores(sp)) = (&m.scores, &problem) {
                    let bound = bounds.for_kernel(sp, &m.kernel);
                    ctx.dump(rec, || scores_arrays(sp, got, &s64, bound));
                }
            }
        }
        // The baseline ran only to gate the others: keep its record only if the case lists it.
        out.extend(
            recs.into_iter()
                .filter(|r| case.variants.contains(&r.variant)),
        );
    }
    out
}

/// How many of the kernel's scores lie outside their rigorous bound: the bound claims
/// `|got - want| <= bound`, so an error equal to it is inside; NaN is outside any bound.
fn over_bound(got: &[f32], want: &[f64], bound: &[f64]) -> usize {
    got.iter()
        .zip(want)
        .zip(bound)
        .filter(|((g, w), b)| {
            let e = (**g as f64 - **w).abs();
            e.is_nan() || e > **b
        })
        .count()
}

/// What `--dump` writes for a scores error check.
fn scores_arrays(
    p: &crate::problem::ScoresProblem,
    got: &[f32],
    s64: &[f64],
    bound: &[f64],
) -> Vec<Array> {
    let (nq, nb) = (p.nq, p.blocks);
    // A wrong-length output is dumped flat (its length is part of what is wrong).
    let shape = if got.len() == nq * nb {
        vec![nq, nb]
    } else {
        vec![got.len()]
    };
    vec![
        Array::f32(Role::Input, "q", &[nq, p.heads, HEAD_DIM], &p.q),
        Array::f32(Role::Input, "kb", &[nb, HEAD_DIM], &p.kb),
        Array::f32(Role::Input, "w", &[nq, p.heads], &p.w),
        Array::f32(Role::Output, "scores", &shape, got).about("the kernel's f32 scores"),
        Array::f64(Role::Reference, "scores", &[nq, nb], s64).about("FP64 scores"),
        Array::f64(Role::Reference, "bound", &[nq, nb], bound)
            .about("rigorous error bound of each score at the kernel's input precision"),
    ]
}

/// Flat indices of the checked rows in a `[batch, q_len, width]` tensor.
fn row_indices(p: &AttnProblem, rows: &[(usize, usize)], width: usize) -> Vec<usize> {
    rows.iter()
        .flat_map(|&(b, i)| {
            let base = (b * p.q_len + i) * width;
            base..base + width
        })
        .collect()
}

fn attention(ctx: &Ctx, case: &Case) -> Vec<Record> {
    let mut out = Vec::new();
    let (base_name, variants) = variants_with_baseline(ctx, case, FamilyName::Attention);
    let shape = case.attention.as_ref().expect("attention case");
    let rows = cases::checked_rows(shape, case.check_rows);
    for item in problems(ctx, Suite::Error, case, cases::attn_problem) {
        let (dist, p) = match item {
            Ok(x) => x,
            Err(rec) => {
                out.push(*rec);
                continue;
            }
        };
        let fwd64 = match reference::attention::attn_forward_f64(&p, Some(&rows)) {
            Ok(r) => r,
            Err(e) => {
                out.push(ctx.input_error(Suite::Error, case, &dist, e.to_string()));
                continue;
            }
        };
        let bwd64 = match reference::attention::attn_backward_f64(&p) {
            Ok(r) => r,
            Err(e) => {
                out.push(ctx.input_error(Suite::Error, case, &dist, e.to_string()));
                continue;
            }
        };
        let o_idx = row_indices(&p, &rows, p.hq * HEAD_DIM);
        let lse_idx = row_indices(&p, &rows, p.hq);
        // Tensors checked per pass, as (check name, stats) per variant.
        let mut recs: Vec<(Record, Vec<(&'static str, ErrorStats)>)> = Vec::new();
        let fwd = Problem::AttnForward(p.clone());
        let bwd = Problem::AttnBackward(p);
        for variant in &variants {
            let mut rec = ctx.record(Suite::Error, case, &dist, variant, "fwd");
            let mut checks = Vec::new();
            match run_once(ctx, FamilyName::Attention, variant, &fwd) {
                Ok((kernel, Output::AttnForward(f))) => {
                    rec.dispatched = Some(kernel);
                    checks.push(("o", error_stats(&f.o, &fwd64.o, Some(&o_idx))));
                    checks.push(("lse", error_stats(&f.lse, &fwd64.lse, Some(&lse_idx))));
                }
                Ok((_, other)) => {
                    rec.status = Status::Error;
                    rec.message =
                        format!("backend returned {other:?}-shaped output for attention forward");
                }
                Err(e) => mark_error(&mut rec, &e),
            }
            recs.push((rec, checks));
            let mut rec = ctx.record(Suite::Error, case, &dist, variant, "bwd");
            let mut checks = Vec::new();
            match run_once(ctx, FamilyName::Attention, variant, &bwd) {
                Ok((kernel, Output::AttnBackward(g))) => {
                    rec.dispatched = Some(kernel);
                    checks.push(("dq", error_stats(&g.dq, &bwd64.dq, None)));
                    checks.push(("dk", error_stats(&g.dk, &bwd64.dk, None)));
                    checks.push(("dv", error_stats(&g.dv, &bwd64.dv, None)));
                }
                Ok((_, other)) => {
                    rec.status = Status::Error;
                    rec.message =
                        format!("backend returned {other:?}-shaped output for attention backward");
                }
                Err(e) => mark_error(&mut rec, &e),
            }
            recs.push((rec, checks));
        }
        for i in 0..recs.len() {
            if recs[i].1.is_empty() {
                continue;
            }
            let base_checks: Option<Vec<(&str, ErrorStats)>> = base_name.as_ref().and_then(|b| {
                recs.iter()
                    .find(|(r, c)| &r.variant == b && r.check == recs[i].0.check && !c.is_empty())
                    .map(|(_, c)| c.clone())
            });
            let (rec, checks) = &mut recs[i];
            let mut parts = Vec::new();
            let mut failures = Vec::new();
            let mut errors = Vec::new();
            for (name, stats) in checks.iter() {
                let base = base_checks
                    .as_ref()
                    .and_then(|bc| bc.iter().find(|(n, _)| n == name))
                    .map(|(_, s)| *s);
                // A fresh record per tensor: its metrics are prefixed with the tensor's name
                // below (a clone of `rec` would carry the previous tensors' metrics along,
                // prefixed again: `dv_dk_dq_rel_max`).
                let mut sub = rec.clone();
                sub.status = Status::Pass;
                sub.message.clear();
                sub.metrics.clear();
                let kernel = rec.dispatched.clone().unwrap_or_default();
                gate(
                    ctx,
                    &mut sub,
                    FamilyName::Attention,
                    &kernel,
                    stats,
                    base.as_ref(),
                );
                for (k, v) in sub.metrics {
                    rec.metrics.insert(format!("{name}_{k}"), v);
                }
                parts.push(format!("{name} {}", sub.snapshot.unwrap_or_default()));
                match sub.status {
                    Status::Fail => failures.push(format!("{name}: {}", sub.message)),
                    Status::Error => errors.push(sub.message),
                    _ => {}
                }
            }
            rec.snapshot = Some(parts.join("; "));
            if let Some(e) = errors.first() {
                rec.status = Status::Error;
                rec.message = e.clone();
            } else if !failures.is_empty() {
                rec.status = Status::Fail;
                rec.message = failures.join("; ");
            }
        }
        out.extend(
            recs.into_iter()
                .map(|(r, _)| r)
                .filter(|r| case.variants.contains(&r.variant)),
        );
    }
    out
}

#[cfg(test)]
mod tests;
