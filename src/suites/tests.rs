//! The gates catch broken kernels: a backend whose arithmetic is changed (a wrapper around
//! the CPU backend that perturbs one variant's outputs) must fail the suites with a message
//! that says what is wrong, while the unchanged variants pass.

use super::bench::BenchGolden;
use super::parity::{input_format, round_bf16, round_tf32, InputFormat};
use super::{error, parity, Ctx, Filter};
use crate::backend::cpu::CpuBackend;
use crate::backend::{Backend, BackendResult, DeviceInfo, Prepared};
use crate::dispatch::Switches;
use crate::matrix::Matrix;
use crate::problem::{Output, Problem, ScoresProblem};
use crate::results::{Record, Status};
use std::path::Path;

/// What the broken kernel does to its output.
#[derive(Clone, Copy)]
pub(super) enum Breakage {
    /// One score off by a relative 1e-3: a dropped or doubled term.
    Score,
    /// The largest score off by this relative amount (small: inside the rigorous bound).
    ScoreBy(f32),
    /// Two selected ids swapped for unselected ones.
    Ids,
    /// The last query's first id changed (a comparison must look past query 0).
    LastQueryIds(usize),
    /// One id missing from the output.
    ShortIds,
    /// The largest |o| (forward) and the largest |dk| (backward) off by a relative 1e-3.
    Attention,
    /// Not broken but faked: the scores an ideal kernel with this name's input format
    /// computes (FP64 on Q and Kb rounded to it, then f32), dispatched under this name. The
    /// CPU has no tf32 / bf16 scorer; this is how the error suite's rounded-input path runs.
    AsKernel(&'static str),
}

struct Broken {
    inner: CpuBackend,
    /// (dispatched kernel, what is done to its outputs); "*": every kernel's. First match.
    breaks: Vec<(&'static str, Breakage)>,
}

struct BrokenPrepared<'a> {
    inner: Box<dyn Prepared + 'a>,
    how: Option<Breakage>,
    problem: &'a Problem,
}

/// `AsKernel`'s scores: FP64 on inputs rounded to `kernel`'s format, rounded to f32.
fn rounded_input_scores(p: &ScoresProblem, kernel: &str) -> Vec<f32> {
    let round: fn(f32) -> f32 = match input_format(kernel) {
        InputFormat::Tf32 => round_tf32,
        InputFormat::Bf16 => round_bf16,
        InputFormat::F32 => |x| x,
    };
    let rp = ScoresProblem {
        q: p.q.iter().map(|x| round(*x)).collect(),
        kb: p.kb.iter().map(|x| round(*x)).collect(),
        ..p.clone()
    };
    let s64 = crate::reference::scores::scores_f64(&rp);
    s64.iter().map(|x| *x as f32).collect()
}

impl Prepared for BrokenPrepared<'_> {
    fn dispatched(&self) -> String {
        match self.how {
            Some(Breakage::AsKernel(name)) => name.to_string(),
            _ => self.inner.dispatched(),
        }
    }
    fn run(&mut self) -> BackendResult<()> {
        self.inner.run()
    }
    fn time(&mut self, reps: usize) -> BackendResult<Vec<f64>> {
        self.inner.time(reps)
    }
    fn output(&mut self) -> BackendResult<Output> {
        let out = self.inner.output()?;
        Ok(match (self.how, out) {
            (Some(b @ (Breakage::Score | Breakage::ScoreBy(_))), Output::Scores(mut s)) => {
                let by = if let Breakage::ScoreBy(x) = b {
                    x
                } else {
                    1e-3
                };
                let i = s
                    .iter()
                    .enumerate()
                    .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
                    .map_or(0, |(i, _)| i);
                s[i] *= 1.0 + by;
                Output::Scores(s)
            }
            (Some(Breakage::Ids), Output::Ids(mut ids)) => {
                ids[0] = ids[0].wrapping_add(1).max(0);
                Output::Ids(ids)
            }
            (Some(Breakage::LastQueryIds(k)), Output::Ids(mut ids)) => {
                let i = ids.len() - k;
                ids[i] = ids[i].wrapping_add(1).max(0);
                Output::Ids(ids)
            }
            (Some(Breakage::ShortIds), Output::Ids(mut ids)) => {
                ids.pop();
                Output::Ids(ids)
            }
            (Some(Breakage::Attention), Output::AttnForward(mut f)) => {
                bump_largest(&mut f.o);
                Output::AttnForward(f)
            }
            (Some(Breakage::Attention), Output::AttnBackward(mut g)) => {
                bump_largest(&mut g.dk);
                Output::AttnBackward(g)
            }
            (Some(Breakage::AsKernel(name)), Output::Scores(_)) => match self.problem {
                Problem::Scores(p) => Output::Scores(rounded_input_scores(p, name)),
                _ => unreachable!("scores come from a scores problem"),
            },
            (_, out) => out,
        })
    }
}

/// The largest-magnitude value times 1 + 1e-3 (about 100x the attention f32 limit).
fn bump_largest(v: &mut [f32]) {
    if let Some(i) = (0..v.len()).max_by(|&a, &b| v[a].abs().total_cmp(&v[b].abs())) {
        v[i] *= 1.0 + 1e-3;
    }
}

impl Backend for Broken {
    fn device(&self) -> DeviceInfo {
        self.inner.device()
    }
    fn prepare<'a>(
        &'a self,
        switches: &Switches,
        problem: &'a Problem,
    ) -> BackendResult<Box<dyn Prepared + 'a>> {
        let inner = self.inner.prepare(switches, problem)?;
        let how = self
            .breaks
            .iter()
            .find(|(k, _)| *k == "*" || inner.dispatched() == *k)
            .map(|(_, how)| *how);
        Ok(Box::new(BrokenPrepared {
            inner,
            how,
            problem,
        }))
    }
}

/// Run `suite` on one case and distribution of the real matrix on the CPU target, with the
/// CPU backend's `kernel` broken as `how` says.
fn run_broken(
    kernel: &'static str,
    how: Breakage,
    case: &str,
    dist: &str,
    suite: fn(&Ctx, &crate::matrix::Case) -> Vec<crate::results::Record>,
) -> Vec<crate::results::Record> {
    let m = Matrix::parse(Path::new("matrix.yaml"), include_str!("../../matrix.yaml")).unwrap();
    run_broken_in(&m, kernel, how, case, dist, suite)
}

fn run_broken_in(
    m: &Matrix,
    kernel: &'static str,
    how: Breakage,
    case: &str,
    dist: &str,
    suite: fn(&Ctx, &crate::matrix::Case) -> Vec<crate::results::Record>,
) -> Vec<crate::results::Record> {
    let filter = Filter {
        dists: vec![dist.into()],
        ..Filter::default()
    };
    run_with(m, &[(kernel, how)], filter, case, suite)
}

/// Run `suite` on one case of `m` on the CPU target under `filter`, with each listed
/// kernel's outputs changed as its breakage says.
pub(super) fn run_with(
    m: &Matrix,
    breaks: &[(&'static str, Breakage)],
    filter: Filter,
    case: &str,
    suite: fn(&Ctx, &crate::matrix::Case) -> Vec<Record>,
) -> Vec<Record> {
    let backend = Broken {
        inner: CpuBackend::new(),
        breaks: breaks.to_vec(),
    };
    let golden = BenchGolden::default();
    let ctx = Ctx {
        matrix: m,
        target: m.target("cpu").unwrap(),
        backend: &backend,
        filter: &filter,
        bench_golden: &golden,
        repro_extra: String::new(),
        dump: None,
    };
    let case = m.cases.iter().find(|c| c.name == case).unwrap();
    suite(&ctx, case)
}

#[test]
fn a_changed_scorer_fails_the_error_suite_and_the_baseline_still_passes() {
    let recs = run_broken(
        "simt",
        Breakage::Score,
        "scores_ragged",
        "normal",
        error::run,
    );
    let simt = recs.iter().find(|r| r.variant == "simt").unwrap();
    assert_eq!(simt.status, Status::Fail, "{simt:?}");
    assert!(simt.message.contains("exceed"), "{}", simt.message);
    assert!(
        simt.repro
            .contains("--case scores_ragged --suite error --dist normal --variant simt"),
        "{}",
        simt.repro
    );
    let warp = recs.iter().find(|r| r.variant == "warp").unwrap();
    assert_eq!(warp.status, Status::Pass, "{warp:?}");
}

#[test]
fn a_changed_top_k_fails_parity_with_the_first_differing_query() {
    let recs = run_broken(
        "radix",
        Breakage::Ids,
        "topk_edges_small",
        "uniform",
        parity::run,
    );
    assert!(!recs.is_empty());
    for r in &recs {
        assert_eq!(r.status, Status::Fail, "{r:?}");
        assert!(
            r.message
                .contains("differ from the reference; first: query 0"),
            "{}",
            r.message
        );
        // Active counts 0, 1, 63, 64, 65, 300, 0, 1 (the `edge` rows) with k = 64: the
        // reference selects 0 + 1 + 63 + 64 + 64 + 64 + 0 + 1 ids; -1 pads the rest.
        assert_eq!(r.metrics["selected"], 257.0, "ids the reference selected");
    }
}

#[test]
fn a_1e_5_bias_on_one_score_fails_the_f32_limit_even_when_the_baseline_shares_it() {
    // In every scorer (the warp baseline too): the ratio to the baseline cannot see it, the
    // f32 limit (1e-6) does.
    let recs = run_broken(
        "*",
        Breakage::ScoreBy(1e-5),
        "scores_ragged",
        "normal",
        error::run,
    );
    for v in ["warp", "simt"] {
        let r = recs.iter().find(|r| r.variant == v).unwrap();
        assert_eq!(r.status, Status::Fail, "{r:?}");
        assert!(
            r.message.contains("exceeds the scores f32 limit 1.0e-6"),
            "{}",
            r.message
        );
    }
    // In one non-baseline scorer only: failed the same way, the baseline passes.
    let recs = run_broken(
        "simt",
        Breakage::ScoreBy(1e-5),
        "scores_ragged",
        "normal",
        error::run,
    );
    let simt = recs.iter().find(|r| r.variant == "simt").unwrap();
    assert_eq!(simt.status, Status::Fail, "{simt:?}");
    assert!(simt.message.contains("limit"), "{}", simt.message);
    let warp = recs.iter().find(|r| r.variant == "warp").unwrap();
    assert_eq!(warp.status, Status::Pass, "{warp:?}");
}

#[test]
fn a_missing_error_limit_is_a_configuration_error_naming_the_entry() {
    let text = include_str!("../../matrix.yaml")
        .replace("      f32: {floor: 3.0e-7, limit: 1.0e-6}\n", "");
    let m = Matrix::parse(Path::new("matrix.yaml"), &text).unwrap();
    let recs = run_broken_in(
        &m,
        "none",
        Breakage::Score,
        "scores_ragged",
        "normal",
        error::run,
    );
    let warp = recs.iter().find(|r| r.variant == "warp").unwrap();
    assert_eq!(warp.status, Status::Error, "{warp:?}");
    assert!(
        warp.message
            .contains("matrix.yaml: gates.error_limits.scores.f32 is missing"),
        "{}",
        warp.message
    );
}

/// A floor above its limit (or a negative floor) is a configuration error too, never a gate
/// that quietly takes one of the two (cargo mutants: the consistency guard was unpinned).
#[test]
fn an_inconsistent_error_limit_is_a_configuration_error() {
    for (entry, why) in [
        (
            "      f32: {floor: 3.0e-6, limit: 1.0e-6}\n",
            "floor 3e-6, limit 1e-6",
        ),
        (
            "      f32: {floor: -1.0e-7, limit: 1.0e-6}\n",
            "floor -1e-7, limit 1e-6",
        ),
    ] {
        let text = include_str!("../../matrix.yaml")
            .replace("      f32: {floor: 3.0e-7, limit: 1.0e-6}\n", entry);
        let m = Matrix::parse(Path::new("matrix.yaml"), &text).unwrap();
        let recs = run_broken_in(
            &m,
            "none",
            Breakage::Score,
            "scores_ragged",
            "normal",
            error::run,
        );
        let warp = recs.iter().find(|r| r.variant == "warp").unwrap();
        assert_eq!(warp.status, Status::Error, "{why}: {warp:?}");
        assert!(
            warp.message.contains("need 0 <= floor <= limit") && warp.message.contains(why),
            "{why}: {}",
            warp.message
        );
    }
}

#[test]
fn the_error_gate_catches_an_error_inside_the_rigorous_bound() {
    // 7e-7 of the largest score: past 4x the warp kernel's error on these inputs (about
    // 1e-7) yet below the f32 limit (1e-6) and inside the rigorous bound, so only the
    // ratio gate against the baseline can fail it.
    let recs = run_broken(
        "simt",
        Breakage::ScoreBy(7e-7),
        "scores_ragged",
        "normal",
        error::run,
    );
    let simt = recs.iter().find(|r| r.variant == "simt").unwrap();
    assert_eq!(
        simt.status,
        Status::Fail,
        "an error past the gate passed the error suite: {simt:?}"
    );
    assert!(
        simt.message.contains("exceeds the gate") && !simt.message.contains("rigorous"),
        "{}",
        simt.message
    );
}

#[test]
fn parity_compares_every_query_and_the_id_count() {
    // topk_edges_small: the k of its problems, to break the last query's first id.
    let m = Matrix::parse(Path::new("matrix.yaml"), include_str!("../../matrix.yaml")).unwrap();
    let case = m
        .cases
        .iter()
        .find(|c| c.name == "topk_edges_small")
        .unwrap();
    let shape = case
        .topk
        .as_ref()
        .expect("topk_edges_small is a top-k case");
    let recs = run_broken(
        "radix",
        Breakage::LastQueryIds(shape.k),
        "topk_edges_small",
        "uniform",
        parity::run,
    );
    let last = shape.queries - 1;
    assert!(!recs.is_empty() && shape.queries > 1);
    for r in &recs {
        assert_eq!(
            r.status,
            Status::Fail,
            "parity passed a kernel whose last query's ids differ: {r:?}"
        );
        let want = format!(
            "1 of {} queries differ from the reference; first: query {last}",
            shape.queries
        );
        assert!(r.message.contains(&want), "{}", r.message);
    }
    let recs = run_broken(
        "radix",
        Breakage::ShortIds,
        "topk_edges_small",
        "uniform",
        parity::run,
    );
    for r in &recs {
        assert_eq!(r.status, Status::Fail, "{r:?}");
        assert!(r.message.contains("expected nq * k"), "{}", r.message);
    }
}

/// Each attention kernel is judged by its own arithmetic's measured limits: the staged kernel
/// is `mma` where it is built with mma.sync, `f32_staged` in FP32 tiles (sm_75's path: its
/// first run on silicon, through PTX on the H200, measured dk 7.4x the gather baseline at
/// attn_prefill_16k, above the f32 floor that gather and the CPU set), gather is `f32`.
#[test]
fn attention_precision_follows_the_kernels_arithmetic() {
    use crate::matrix::{FamilyName, Precision};
    let m = Matrix::parse(Path::new("matrix.yaml"), include_str!("../../matrix.yaml")).unwrap();
    let t = |name: &str| m.targets.iter().find(|t| t.name == name).unwrap();
    let p = |kernel: &str, target: &str| error::precision(FamilyName::Attention, kernel, t(target));
    assert_eq!(p("staged", "sm_90"), Precision::Mma);
    assert_eq!(p("staged", "sm_86"), Precision::Mma);
    assert_eq!(p("staged", "sm_75"), Precision::F32Staged);
    assert_eq!(p("staged", "gfx906"), Precision::F32Staged);
    assert_eq!(p("gather", "sm_90"), Precision::F32);
    assert_eq!(p("gather", "sm_75"), Precision::F32);
    let s = |kernel: &str| error::precision(FamilyName::Scores, kernel, t("sm_90"));
    assert_eq!(s("warp"), Precision::F32);
    assert_eq!(s("simt"), Precision::F32);
    assert_eq!(s("tf32"), Precision::Tf32);
    assert_eq!(s("tf32_decode"), Precision::Tf32);
    assert_eq!(s("bf16"), Precision::Bf16);
    assert_eq!(s("bf16_decode"), Precision::Bf16);
    assert_eq!(s("wmma_bf16"), Precision::Bf16, "gfx12's WMMA scorer");
    assert_eq!(s("mfma_bf16"), Precision::Bf16, "gfx950's MFMA scorer");
    assert_eq!(
        s("staged"),
        Precision::F32,
        "a scorer named like an attention kernel"
    );
    let limits = &m.gates.error_limits[&FamilyName::Attention];
    assert!(
        limits[&Precision::F32Staged].floor > limits[&Precision::F32].floor,
        "the staged FP32 class exists because it measured above gather's floor"
    );
}

/// A parity snapshot line says which queries changed: one id changed in query 100 of 130
/// (groups of `by` = 3 queries) moves the whole-ids digest and exactly the 4 hex digits of
/// group 33, and the line keeps its fields (cargo mutants: the line's format and the group
/// arithmetic were pinned only by the golden files, which `cargo test` does not read).
#[test]
fn a_parity_snapshot_line_localizes_a_changed_query() {
    use super::digest;
    let (nq, k) = (130, 2);
    let ids: Vec<i32> = (0..nq * k).map(|i| i as i32).collect();
    let line = parity::ids_snapshot(&ids, nq, 250);
    let whole = digest(
        &ids.iter()
            .flat_map(|x| x.to_le_bytes())
            .collect::<Vec<u8>>(),
    );
    let prefix = format!("ids {whole} selected 250 queries 130 by 3: ");
    assert!(line.starts_with(&prefix), "{line}");
    let groups = &line[prefix.len()..];
    assert_eq!(
        groups.len(),
        4 * 44,
        "44 groups of 3 queries (the last holds 1): {line}"
    );
    let mut changed = ids.clone();
    changed[100 * k + 1] = -1;
    let other = parity::ids_snapshot(&changed, nq, 250);
    assert_ne!(line[..20], other[..20], "the whole-ids digest must change");
    let other_groups = &other[prefix.len()..];
    let differ: Vec<usize> = (0..44)
        .filter(|g| groups[4 * g..4 * g + 4] != other_groups[4 * g..4 * g + 4])
        .collect();
    assert_eq!(
        differ,
        vec![33],
        "only query 100's group (100 / 3 = 33) moves"
    );
}

/// The attention error suite judges every checked tensor: an o and a dk off by 1e-3 at
/// their largest element fail forward and backward with the tensor named, for the staged
/// variant and for the baseline (the limit binds it too), on every row the case checks
/// (cargo mutants: with `-- --lib`, nothing in the library's tests ran this suite; only
/// the matrix's snapshots did).
#[test]
fn a_changed_attention_output_fails_the_error_suite_forward_and_backward() {
    let ok = run_broken(
        "none",
        Breakage::Attention,
        "attn_edges_g4",
        "random_ids",
        error::run,
    );
    let bad = run_broken(
        "*",
        Breakage::Attention,
        "attn_edges_g4",
        "random_ids",
        error::run,
    );
    for (recs, broken) in [(&ok, false), (&bad, true)] {
        for check in ["fwd", "bwd"] {
            let rs: Vec<_> = recs.iter().filter(|r| r.check == check).collect();
            assert_eq!(rs.len(), 2, "auto and gather, {check}: {recs:?}");
            for r in rs {
                if broken {
                    assert_eq!(
                        r.status,
                        Status::Fail,
                        "{check} {}: {}",
                        r.variant,
                        r.message
                    );
                    let tensor = if check == "fwd" { "o:" } else { "dk:" };
                    assert!(
                        r.message.contains(tensor),
                        "{check} {}: {}",
                        r.variant,
                        r.message
                    );
                } else {
                    assert_eq!(
                        r.status,
                        Status::Pass,
                        "{check} {}: {}",
                        r.variant,
                        r.message
                    );
                }
            }
        }
    }
}

/// The end-to-end selection check (scores, then top-k, swaps allowed only where the rigorous
/// bound covers them) fails a scorer whose largest score flips sign, naming the query and
/// the gap, while the unbroken variants pass every query (cargo mutants: no library test
/// ran `parity::select`; `select -> vec![]` and 32 mutants of `compare_selection` went
/// unseen).
#[test]
fn a_changed_scorer_fails_the_selection_check_and_the_others_pass() {
    let recs = run_broken(
        "simt",
        Breakage::ScoreBy(-2.0),
        "scores_ragged",
        "normal",
        parity::run,
    );
    let selects: Vec<_> = recs.iter().filter(|r| r.check == "select").collect();
    assert_eq!(selects.len(), 4, "auto, simt, warp, bf16: {recs:?}");
    let mut broken = 0;
    for r in selects {
        // `auto` takes the SIMT kernel on the CPU target too: broken where it dispatched it.
        if r.dispatched.as_deref() == Some("simt") {
            broken += 1;
            assert_eq!(r.status, Status::Fail, "{r:?}");
            assert!(
                r.message
                    .contains("selection differences beyond the error bound")
                    && r.message.contains("q"),
                "{}",
                r.message
            );
        } else {
            assert_eq!(r.status, Status::Pass, "{}: {}", r.variant, r.message);
        }
    }
    assert!(broken >= 1, "no check dispatched the broken SIMT kernel");
}
