//! The CPU backend: the embedded default target "cpu", which always runs. It runs the CPU
//! implementations of `crate::cpu` (multi-threaded with std threads), chosen by the same
//! dispatch functions as the GPU backends, with `CpuBackend::caps()` as the target:
//!
//! - top-k: `Split` runs the CPU two-stage split (dispatched "split"); `Register` and `Wide`
//!   both run the single-pass radix select (dispatched "radix": on the CPU they are one
//!   algorithm). All give the same ids; the split is exact (see `cpu::topk`).
//! - scores: `Warp` runs the warp kernel's summation order ("warp"); every other choice runs
//!   the FP32 tiled kernel's order ("simt"): the CPU has no tensor cores, and with no
//!   features in `caps()` dispatch only picks between those two anyway.
//! - attention: one f32 implementation, the straightforward gather (dispatched "gather"),
//!   whatever `dispatch::attention::choose` says: staging is a GPU memory optimization with
//!   the same math.
//!
//! Inputs are validated in `prepare`; errors name the field and the fix. NaN scores are
//! legal for top-k (the contract orders them); NaN in scorer or attention inputs propagates.

use std::time::Instant;

use super::{Backend, BackendError, BackendResult, DeviceInfo, Prepared};
use crate::cpu::attention::{attn_backward, attn_forward};
use crate::cpu::par::threads;
use crate::cpu::scores::{scores_f32, ScoreOrder};
use crate::cpu::topk::{topk_radix, topk_split};
use crate::dispatch::scores::ScoresKernel;
use crate::dispatch::topk::{TopkKernel, TopkShape};
use crate::dispatch::{self, Switches, TargetCaps, Vendor};
use crate::problem::{AttnProblem, Output, Problem, ScoresProblem, TopkProblem, HEAD_DIM};
use crate::reference::attention::validate_attn;

/// The CPU backend (stateless: threads come from `std::thread::available_parallelism`).
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuBackend;

impl CpuBackend {
    pub fn new() -> Self {
        CpuBackend
    }

    /// The "cpu" target as dispatch sees it: wave 1, no shared memory, one "multiprocessor"
    /// per thread, no features.
    pub fn caps() -> TargetCaps {
        TargetCaps {
            name: "cpu".into(),
            vendor: Vendor::Cpu,
            wave: 1,
            shared_per_block: 0,
            multiprocessors: threads() as u32,
            features: Vec::new(),
        }
    }
}

/// What a prepared CPU call computes.
enum Job<'a> {
    TopkRadix(&'a TopkProblem),
    TopkSplit(&'a TopkProblem),
    Scores(&'a ScoresProblem, ScoreOrder),
    AttnForward(&'a AttnProblem),
    AttnBackward(&'a AttnProblem),
}

impl Job<'_> {
    fn name(&self) -> &'static str {
        match self {
            Job::TopkRadix(_) => "radix",
            Job::TopkSplit(_) => "split",
            Job::Scores(_, order) => order.name(),
            Job::AttnForward(_) | Job::AttnBackward(_) => "gather",
        }
    }

    fn run(&self) -> BackendResult<Output> {
        Ok(match self {
            Job::TopkRadix(p) => Output::Ids(topk_radix(p)),
            Job::TopkSplit(p) => Output::Ids(topk_split(p)),
            Job::Scores(p, order) => Output::Scores(scores_f32(p, *order)),
            Job::AttnForward(p) => Output::AttnForward(attn_forward(p)?),
            Job::AttnBackward(p) => Output::AttnBackward(attn_backward(p)?),
        })
    }
}

fn len_error(field: &str, got: usize, want: usize, shape: String) -> BackendError {
    BackendError::Input(format!(
        "{field} has {got} elements, the shape {shape} needs {want}: generate it for the case's shape"
    ))
}

/// Top-k inputs: lengths, `n <= capacity`, `k >= 1`, `active` in `0..=n`.
fn validate_topk(p: &TopkProblem) -> BackendResult<()> {
    if p.n > p.capacity {
        return Err(BackendError::Shape(format!(
            "top-k n = {} exceeds the row stride capacity = {}: raise capacity to at least n",
            p.n, p.capacity
        )));
    }
    if p.k == 0 {
        return Err(BackendError::Input(
            "top-k k = 0: ask for at least one id".into(),
        ));
    }
    let want = p.nq * p.capacity;
    if p.scores.len() != want {
        let shape = format!("[nq {}, capacity {}]", p.nq, p.capacity);
        return Err(len_error("top-k scores", p.scores.len(), want, shape));
    }
    let Some(active) = &p.active else {
        return Ok(());
    };
    if active.len() != p.nq {
        return Err(len_error(
            "top-k active",
            active.len(),
            p.nq,
            format!("[nq {}]", p.nq),
        ));
    }
    match active.iter().enumerate().find(|&(_, &a)| a < 0 || a as usize > p.n) {
        Some((q, a)) => Err(BackendError::Input(format!(
            "top-k active[{q}] = {a} is outside 0..={}: a query's candidates are a prefix of its n entries",
            p.n
        ))),
        None => Ok(()),
    }
}

/// Scorer inputs: lengths of q, kb and w.
fn validate_scores(p: &ScoresProblem) -> BackendResult<()> {
    let checks = [
        (
            "scores q",
            p.q.len(),
            p.nq * p.heads * HEAD_DIM,
            format!("[nq {}, heads {}, {HEAD_DIM}]", p.nq, p.heads),
        ),
        (
            "scores kb",
            p.kb.len(),
            p.blocks * HEAD_DIM,
            format!("[blocks {}, {HEAD_DIM}]", p.blocks),
        ),
        (
            "scores w",
            p.w.len(),
            p.nq * p.heads,
            format!("[nq {}, heads {}]", p.nq, p.heads),
        ),
    ];
    for (field, got, want, shape) in checks {
        if got != want {
            return Err(len_error(field, got, want, shape));
        }
    }
    Ok(())
}

/// Validate `problem` and pick the job the dispatch functions choose under `sw`.
fn plan<'a>(sw: &Switches, problem: &'a Problem) -> BackendResult<Job<'a>> {
    let caps = CpuBackend::caps();
    Ok(match problem {
        Problem::Topk(p) => {
            validate_topk(p)?;
            let shape = TopkShape {
                nq: p.nq,
                n: p.n,
                k: p.k,
                has_active: p.active.is_some(),
            };
            match dispatch::topk::choose(&caps, sw, shape)? {
                TopkKernel::Split => Job::TopkSplit(p),
                // The CPU has no clusters and no speculative kernel: dispatch never picks them
                // here; forced, they run the radix select.
                TopkKernel::Register
                | TopkKernel::Wide
                | TopkKernel::Cluster
                | TopkKernel::Spec => Job::TopkRadix(p),
            }
        }
        Problem::Scores(p) => {
            validate_scores(p)?;
            dispatch::scores::check_switches(sw).map_err(BackendError::Input)?;
            match dispatch::scores::choose_for(&caps, sw, p.nq) {
                ScoresKernel::Warp => Job::Scores(p, ScoreOrder::Warp),
                _ => Job::Scores(p, ScoreOrder::Simt),
            }
        }
        Problem::AttnForward(p) => {
            validate_attn(p, false)?;
            let _ = dispatch::attention::choose(&caps, sw); // one CPU implementation: gather
            Job::AttnForward(p)
        }
        Problem::AttnBackward(p) => {
            validate_attn(p, true)?;
            let _ = dispatch::attention::choose(&caps, sw);
            Job::AttnBackward(p)
        }
    })
}

/// A validated, dispatched CPU call; `output` holds the last run's result.
struct CpuPrepared<'a> {
    job: Job<'a>,
    output: Option<Output>,
}

impl Prepared for CpuPrepared<'_> {
    fn dispatched(&self) -> String {
        self.job.name().to_string()
    }

    fn run(&mut self) -> BackendResult<()> {
        self.output = Some(self.job.run()?);
        Ok(())
    }

    /// Wall-clock seconds of each of `reps` runs (`Instant` around each).
    fn time(&mut self, reps: usize) -> BackendResult<Vec<f64>> {
        (0..reps)
            .map(|_| {
                let start = Instant::now();
                self.run()?;
                Ok(start.elapsed().as_secs_f64())
            })
            .collect()
    }

    /// The last run's output; runs once first if nothing ran yet.
    fn output(&mut self) -> BackendResult<Output> {
        match &self.output {
            Some(out) => Ok(out.clone()),
            None => {
                let out = self.job.run()?;
                self.output = Some(out.clone());
                Ok(out)
            }
        }
    }
}

impl Backend for CpuBackend {
    fn device(&self) -> DeviceInfo {
        DeviceInfo {
            name: format!("cpu ({} threads)", threads()),
            arch: "cpu".into(),
            driver: "std threads".into(),
        }
    }

    fn prepare<'a>(
        &'a self,
        switches: &Switches,
        problem: &'a Problem,
    ) -> BackendResult<Box<dyn Prepared + 'a>> {
        let job = plan(switches, problem)?;
        Ok(Box::new(CpuPrepared { job, output: None }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::AttnDtype;
    use crate::reference::attention::tests::random_problem;
    use crate::reference::topk::topk_ids;

    fn sw(pairs: &[(&str, &str)]) -> Switches {
        Switches::from_pairs(pairs)
    }

    fn topk(nq: usize, n: usize, k: usize) -> TopkProblem {
        // A few distinct values in a scrambled order: heavy ties.
        let scores = (0..nq * n).map(|i| ((i * 7919) % 13) as f32).collect();
        TopkProblem {
            nq,
            n,
            capacity: n,
            k,
            scores,
            active: None,
        }
    }

    fn run(sw: &Switches, p: &Problem) -> (String, Output) {
        let backend = CpuBackend::new();
        let mut prepared = backend.prepare(sw, p).unwrap();
        prepared.run().unwrap();
        (prepared.dispatched(), prepared.output().unwrap())
    }

    #[test]
    fn topk_dispatch_and_ids() {
        for (p, switches, want) in [
            (topk(3, 100, 10), sw(&[]), "radix"),
            (topk(2, 20_000, 300), sw(&[]), "split"),
            (
                topk(2, 20_000, 300),
                sw(&[("QSA_TOPK_KERNEL", "wide")]),
                "radix",
            ),
            (
                topk(2, 500, 7),
                sw(&[("QSA_TOPK_KERNEL", "split")]),
                "split",
            ),
        ] {
            let ids = topk_ids(&p);
            let (name, out) = run(&switches, &Problem::Topk(p));
            assert_eq!(name, want);
            assert!(matches!(out, Output::Ids(got) if got == ids));
        }
    }

    #[test]
    fn scores_dispatch() {
        // 8 queries: enough for the SIMT kernel (dispatch::scores::SIMT_MIN_QUERIES); one
        // query is a decode call, which takes the warp kernel.
        let make = |nq: usize| ScoresProblem {
            nq,
            heads: 1,
            blocks: 2,
            q: vec![0.5; nq * HEAD_DIM],
            kb: vec![1.0; 2 * HEAD_DIM],
            w: vec![2.0; nq],
        };
        let (prefill, decode) = (Problem::Scores(make(8)), Problem::Scores(make(1)));
        for (switches, p, want) in [
            (sw(&[]), &prefill, "simt"),
            (sw(&[("STRATA_SELECT_SIMT", "0")]), &prefill, "warp"),
            (sw(&[("STRATA_QSA_WARP", "1")]), &prefill, "simt"),
            (sw(&[]), &decode, "warp"),
        ] {
            let (name, out) = run(&switches, p);
            assert_eq!(name, want);
            assert!(matches!(out, Output::Scores(s) if s.iter().all(|x| *x == 128.0)));
        }
    }

    #[test]
    fn attention_runs_gather() {
        let p = random_problem(9, AttnDtype::Bf16, 1, 2, 80, 2, 1, 2);
        let (name, out) = run(&sw(&[]), &Problem::AttnForward(p.clone()));
        assert_eq!(name, "gather");
        assert!(matches!(out, Output::AttnForward(f) if f.o.len() == 2 * 2 * HEAD_DIM));
        let (_, out) = run(&sw(&[]), &Problem::AttnBackward(p));
        assert!(matches!(out, Output::AttnBackward(g) if g.dk.len() == 80 * HEAD_DIM));
    }

    fn prepare_err(p: Problem) -> String {
        match CpuBackend::new().prepare(&sw(&[]), &p) {
            Ok(_) => panic!("expected an error"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn bad_inputs_are_named() {
        let mut p = topk(2, 10, 3);
        p.capacity = 9;
        assert!(prepare_err(Problem::Topk(p)).contains("capacity"));
        let mut p = topk(2, 10, 3);
        p.k = 0;
        assert!(prepare_err(Problem::Topk(p)).contains("k = 0"));
        let mut p = topk(2, 10, 3);
        p.scores.pop();
        assert!(prepare_err(Problem::Topk(p)).contains("top-k scores has 19"));
        let mut p = topk(2, 10, 3);
        p.active = Some(vec![3, 11]);
        assert!(prepare_err(Problem::Topk(p)).contains("active[1] = 11"));
        let p = ScoresProblem {
            nq: 1,
            heads: 2,
            blocks: 1,
            q: vec![0.0; 5],
            kb: vec![],
            w: vec![],
        };
        assert!(prepare_err(Problem::Scores(p)).contains("scores q has 5"));
        let mut p = random_problem(9, AttnDtype::F16, 1, 2, 80, 2, 1, 2);
        p.hkv = 3;
        assert!(prepare_err(Problem::AttnForward(p)).contains("multiple of hkv"));
    }

    #[test]
    fn time_gives_one_duration_per_rep() {
        let p = Problem::Topk(topk(1, 50, 5));
        let backend = CpuBackend::new();
        let mut prepared = backend.prepare(&sw(&[]), &p).unwrap();
        let t = prepared.time(3).unwrap();
        assert_eq!(t.len(), 3);
        assert!(t.iter().all(|&s| s >= 0.0));
    }
}
