//! A run through an older target's PTX on a newer card (`crate::ptx`): status
//! `run (PTX on sm_90)`, never plain `run`; bench checks skipped with the reason, nothing
//! timed; the status survives results.yaml. The backend is the CPU one dressed as an H200,
//! so this runs without a GPU.

use super::{run_target, RunSpec};
use crate::backend::cpu::CpuBackend;
use crate::backend::{Backend, BackendResult, DeviceInfo, Prepared};
use crate::dispatch::Switches;
use crate::matrix::{Matrix, Suite};
use crate::problem::Problem;
use crate::ptx::PtxRun;
use crate::results::{Status, TargetResults, TargetStatus};
use crate::suites::bench::BenchGolden;
use crate::suites::Filter;
use std::path::Path;

struct OnCard {
    inner: CpuBackend,
    ptx: Option<PtxRun>,
}

impl Backend for OnCard {
    fn device(&self) -> DeviceInfo {
        DeviceInfo {
            name: "NVIDIA H200".into(),
            arch: "sm_90".into(),
            driver: "CUDA driver 13.0 (580.159.04)".into(),
        }
    }
    fn ptx_run(&self) -> Option<PtxRun> {
        self.ptx.clone()
    }
    fn prepare<'a>(
        &'a self,
        switches: &Switches,
        problem: &'a Problem,
    ) -> BackendResult<Box<dyn Prepared + 'a>> {
        self.inner.prepare(switches, problem)
    }
}

fn run(ptx: Option<PtxRun>) -> TargetResults {
    let m = Matrix::parse(Path::new("matrix.yaml"), include_str!("../matrix.yaml")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let filter = Filter {
        cases: vec!["topk_decode_3q_40k".into()],
        suites: vec![Suite::Parity, Suite::Bench],
        variants: vec!["wide".into()],
        dists: vec!["uniform".into()],
        shard: None,
    };
    let spec = RunSpec {
        matrix: &m,
        target: m.target("cpu").unwrap(),
        filter: &filter,
        bench_golden: &BenchGolden::default(),
        repro_extra: String::new(),
        dump: None,
        journal: &dir.path().join("journal.yaml"),
        resume: false,
    };
    let backend = OnCard {
        inner: CpuBackend::new(),
        ptx,
    };
    let r = run_target(&spec, &backend, &mut |_| {}).unwrap();
    // Through results.yaml and back, as xtask reads it.
    let path = dir.path().join("results.yaml");
    r.write(&path).unwrap();
    TargetResults::read(&path).unwrap()
}

#[test]
fn a_ptx_run_is_never_reported_as_run_and_keeps_no_bench_times() {
    let ptx = PtxRun {
        target: "sm_75".into(),
        card: "sm_90".into(),
        shared_limit: 65_536,
    };
    let r = run(Some(ptx.clone()));
    assert_eq!(
        r.status,
        TargetStatus::RunPtx,
        "a run through the target's PTX on a newer card must be status run_ptx, not {:?}",
        r.status
    );
    assert_eq!(
        r.status_label(),
        "run (PTX on sm_90)",
        "the status label of a PTX run must say PTX and name the card"
    );
    assert_eq!(r.reason, ptx.reason());
    assert!(r.ran_on_a_card());
    let parity: Vec<_> = r
        .records
        .iter()
        .filter(|x| x.suite == Suite::Parity)
        .collect();
    assert!(
        !parity.is_empty() && parity.iter().all(|x| x.status == Status::Pass),
        "{parity:?}"
    );
    let bench: Vec<_> = r
        .records
        .iter()
        .filter(|x| x.suite == Suite::Bench)
        .collect();
    assert_eq!(bench.len(), 1, "{bench:?}");
    for b in bench {
        assert_eq!(
            b.status,
            Status::Skip,
            "a PTX run timed a bench check: {b:?}"
        );
        assert_eq!(b.message, ptx.bench_skip());
        assert!(
            b.metrics.is_empty(),
            "a PTX run keeps no bench medians: {b:?}"
        );
    }
}

#[test]
fn the_own_card_is_plain_run_and_benches() {
    let r = run(None);
    assert_eq!(r.status, TargetStatus::Run);
    assert_eq!(r.status_label(), "run");
    assert!(r.reason.is_empty(), "{}", r.reason);
    let bench = r.records.iter().find(|x| x.suite == Suite::Bench).unwrap();
    assert_ne!(bench.status, Status::Skip, "{bench:?}");
    assert!(bench.metrics.contains_key("median_us"), "{bench:?}");
}
