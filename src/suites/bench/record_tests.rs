//! What a bench record says, end to end through `run` and `bench_one`, with a backend whose
//! every call takes exactly 2 us: the metrics, the rates from `work`, the message and the
//! golden comparison are then numbers a test can state by hand (cargo mutants found them
//! unpinned: no library test ran the bench suite).

use super::*;
use crate::backend::{Backend, BackendResult, DeviceInfo, Prepared};
use crate::dispatch::Switches;
use crate::matrix::Matrix;
use crate::suites::filter::Filter;
use std::path::Path;

/// Every timed call takes 2 us.
struct TwoMicros;
impl Prepared for TwoMicros {
    fn dispatched(&self) -> String {
        "two_micros".into()
    }
    fn run(&mut self) -> BackendResult<()> {
        Ok(())
    }
    fn time(&mut self, reps: usize) -> BackendResult<Vec<f64>> {
        Ok(vec![2e-6; reps])
    }
    fn output(&mut self) -> BackendResult<crate::problem::Output> {
        unreachable!("bench never reads outputs")
    }
}

struct Fixed;
impl Backend for Fixed {
    fn device(&self) -> DeviceInfo {
        DeviceInfo::default()
    }
    fn prepare<'a>(
        &'a self,
        _: &Switches,
        _: &'a Problem,
    ) -> BackendResult<Box<dyn Prepared + 'a>> {
        Ok(Box::new(TwoMicros))
    }
}

fn bench(golden: &BenchGolden, variant: &str) -> Vec<Record> {
    bench_case("scores_ragged", golden, variant)
}

fn bench_case(case: &str, golden: &BenchGolden, variant: &str) -> Vec<Record> {
    let m = Matrix::parse(
        Path::new("matrix.yaml"),
        include_str!("../../../matrix.yaml"),
    )
    .unwrap();
    let filter = Filter {
        variants: vec![variant.into()],
        ..Filter::default()
    };
    let ctx = Ctx {
        matrix: &m,
        target: m.target("cpu").unwrap(),
        backend: &Fixed,
        filter: &filter,
        bench_golden: golden,
        repro_extra: String::new(),
        dump: None,
    };
    let case = m.cases.iter().find(|c| c.name == case).unwrap();
    run(&ctx, case)
}

#[test]
fn a_bench_record_states_its_timing_rates_and_golden_by_hand() {
    let recs = bench(&BenchGolden::default(), "warp");
    assert_eq!(
        recs.len(),
        1,
        "one dist (the first), one variant, one check"
    );
    let r = &recs[0];
    assert_eq!((r.dist.as_str(), r.variant.as_str()), ("normal", "warp"));
    assert_eq!(r.dispatched.as_deref(), Some("two_micros"));
    let m = |k: &str| r.metrics[k];
    for k in [
        "median_us",
        "median_lo_us",
        "median_hi_us",
        "min_us",
        "max_us",
    ] {
        assert!((m(k) - 2.0).abs() < 1e-9, "{k} = {}", m(k));
    }
    assert_eq!(m("rel_noise"), 0.0);
    assert_eq!(m("remeasured"), 0.0);
    // scores_ragged: 9 queries x 7 heads x 77 blocks: 2 * 9 * 7 * 77 * 128 FLOP in 2 us.
    let flop = 2.0 * (9 * 7 * 77 * 128) as f64;
    assert!(
        (m("tflops") - flop / 2e-6 / 1e12).abs() < 1e-12,
        "{}",
        m("tflops")
    );
    let bytes = ((9 * 7 * 128 + 77 * 128 + 9 * 7 + 9 * 77) * 4) as f64;
    assert!(
        (m("gbps") - bytes / 2e-6 / 1e9).abs() < 1e-9,
        "{}",
        m("gbps")
    );
    assert!(
        r.message
            .starts_with("NEW median 2.00 us, interval [2.00, 2.00] ("),
        "{}",
        r.message
    );
    assert!(r.message.ends_with("reps, noise 0.0%)"), "{}", r.message);
    assert_eq!(r.status, Status::Pass);

    // Against a golden of 1 us: twice as slow, and the record says so with the golden's figures.
    let mut golden = BenchGolden::default();
    golden.entries.insert(
        key("scores_ragged", "warp", "-"),
        crate::suites::stats::timing_stats(&[1e-6; 20]),
    );
    let r = &bench(&golden, "warp")[0];
    assert!((r.metrics["golden_median_us"] - 1.0).abs() < 1e-9);
    assert!(
        r.message.starts_with("SLOWER median 2.00 us")
            && r.message.contains(", golden 1.00 us [1.00, 1.00]"),
        "{}",
        r.message
    );
}

#[test]
fn a_top_k_bench_record_has_a_byte_rate_and_no_flop_rate() {
    // topk_k_ge_n: rows of n scores read once; no arithmetic worth a FLOP rate.
    let m = Matrix::parse(
        Path::new("matrix.yaml"),
        include_str!("../../../matrix.yaml"),
    )
    .unwrap();
    let t = m.cases.iter().find(|c| c.name == "topk_k_ge_n").unwrap();
    let s = t.topk.as_ref().unwrap();
    let r = &bench_case("topk_k_ge_n", &BenchGolden::default(), "auto")[0];
    assert!(!r.metrics.contains_key("tflops"), "{:?}", r.metrics);
    let bytes = (s.queries * s.n * 4) as f64;
    assert!(
        (r.metrics["gbps"] - bytes / 2e-6 / 1e9).abs() < 1e-9,
        "{:?}",
        r.metrics
    );
}
