//! The gates catch broken kernels: a backend whose arithmetic is changed (a wrapper around
//! the CPU backend that perturbs one variant's outputs) must fail the suites with a message
//! that says what is wrong, while the unchanged variants pass.

use super::bench::BenchGolden;
use super::{error, parity, Ctx, Filter};
use crate::backend::cpu::CpuBackend;
use crate::backend::{Backend, BackendResult, DeviceInfo, Prepared};
use crate::dispatch::Switches;
use crate::matrix::Matrix;
use crate::problem::{Output, Problem};
use crate::results::Status;
use std::path::Path;

/// What the broken kernel does to its output.
#[derive(Clone, Copy)]
enum Breakage {
    /// One score off by a relative 1e-3: a dropped or doubled term.
    Score,
    /// Two selected ids swapped for unselected ones.
    Ids,
}

struct Broken {
    inner: CpuBackend,
    /// Only outputs of this dispatched kernel are changed.
    kernel: &'static str,
    how: Breakage,
}

struct BrokenPrepared<'a> {
    inner: Box<dyn Prepared + 'a>,
    how: Option<Breakage>,
}

impl Prepared for BrokenPrepared<'_> {
    fn dispatched(&self) -> String {
        self.inner.dispatched()
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
            (Some(Breakage::Score), Output::Scores(mut s)) => {
                let i = s
                    .iter()
                    .enumerate()
                    .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
                    .map_or(0, |(i, _)| i);
                s[i] *= 1.0 + 1e-3;
                Output::Scores(s)
            }
            (Some(Breakage::Ids), Output::Ids(mut ids)) => {
                ids[0] = ids[0].wrapping_add(1).max(0);
                Output::Ids(ids)
            }
            (_, out) => out,
        })
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
        let how = (inner.dispatched() == self.kernel).then_some(self.how);
        Ok(Box::new(BrokenPrepared { inner, how }))
    }
}

fn matrix() -> Matrix {
    Matrix::parse(Path::new("matrix.yaml"), include_str!("../../matrix.yaml")).unwrap()
}

#[test]
fn a_changed_scorer_fails_the_error_suite_and_the_baseline_still_passes() {
    let m = matrix();
    let target = m.target("cpu").unwrap();
    let backend = Broken {
        inner: CpuBackend::new(),
        kernel: "simt",
        how: Breakage::Score,
    };
    let filter = Filter {
        dists: vec!["normal".into()],
        ..Filter::default()
    };
    let golden = BenchGolden::default();
    let ctx = Ctx {
        matrix: &m,
        target,
        backend: &backend,
        filter: &filter,
        bench_golden: &golden,
        repro_extra: String::new(),
    };
    let case = m.cases.iter().find(|c| c.name == "scores_ragged").unwrap();
    let recs = error::run(&ctx, case);
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
    let m = matrix();
    let target = m.target("cpu").unwrap();
    let backend = Broken {
        inner: CpuBackend::new(),
        kernel: "radix",
        how: Breakage::Ids,
    };
    let filter = Filter {
        dists: vec!["uniform".into()],
        ..Filter::default()
    };
    let golden = BenchGolden::default();
    let ctx = Ctx {
        matrix: &m,
        target,
        backend: &backend,
        filter: &filter,
        bench_golden: &golden,
        repro_extra: String::new(),
    };
    let case = m
        .cases
        .iter()
        .find(|c| c.name == "topk_edges_small")
        .unwrap();
    let recs = parity::run(&ctx, case);
    assert!(!recs.is_empty());
    for r in &recs {
        assert_eq!(r.status, Status::Fail, "{r:?}");
        assert!(
            r.message
                .contains("differ from the reference; first: query 0"),
            "{}",
            r.message
        );
    }
}
